//! Secret redaction before storage (SPEC §5): `name: value` assignments of api keys, secrets,
//! tokens and passwords keep the name and lose the value; credentials recognisable by their
//! shape (`sk-…`, `hf_…`, AWS, GitHub, GitLab, Slack, Google, Stripe, Replicate, Groq, npm and
//! PyPI keys, JWTs, private key blocks) vanish; bearer tokens and the passwords of URLs
//! (`scheme://user:…@`) lose theirs.

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use regex::Regex;
use std::borrow::Cow;
use std::sync::LazyLock;

/// Names whose value is a secret, as the end of an identifier (`OPENAI_API_KEY`,
/// `aws_secret_access_key`, `client_secret`, `x-api-key`, `gpg_passphrase`), in any case.
/// `token`, `pass` and `pwd` only after some words: see [`names_secret`].
const SECRET_NAMES: &str = r"api[_\-]?key|secret(?:[_\-]?(?:access[_\-]?)?key)?|access[_\-]?key|private[_\-]?key|token|passw(?:or)?d|passphrase|pass|pwd";

/// A string inside a JSON string, its quotes escaped (`\"…\"`), holding escaped quotes of its
/// own (`\\\"`) and other escapes.
const ESCAPED_STRING: &str = r#"\\"(?:\\\\\\"|[^"\\\n]|\\[^"\n])*\\""#;

/// `name: value`, `name=value`, `name := value`, `name => value`: the identifier ending in a
/// secret's name (a longer word, `max_tokens`, is not one), the separator, then on the same
/// line the value, whole if quoted, else up to a space, quote or closing punctuation. ASCII word
/// bounds: Unicode ones made any text holding a non-ASCII letter 35 times slower.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i)((?-u:\b)([A-Za-z0-9_.\-]*?(?:{SECRET_NAMES}))[ \t]*(?::=|=>|[:=])[ \t]*)({ESCAPED_STRING}|"[^"\n]*"|'[^'\n]*'|[^\s"',;)\]}}]+)"#
    ))
    .expect("valid regex")
});

/// The same in JSON, a Python dict or YAML with quoted names (`"api_key": "…"`): only a string
/// value is masked, so `{"token": 5, "password": "…"}` keeps its 5 and loses the password. Also
/// JSON held in a JSON string, its quotes escaped (`{\"password\": \"…\"}`).
static QUOTED_ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i)(["']([A-Za-z0-9_.\-]*?(?:{SECRET_NAMES}))\\?["'][ \t]*(?::|=>|=)[ \t]*)({ESCAPED_STRING}|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"#
    ))
    .expect("valid regex")
});

/// Credentials recognisable by their shape, masked whole. None starts right after a letter or
/// digit (the first group, kept), so that `mask-rcnn-resnet50` or `task-specific-adapter` is
/// no `sk-` key, where `key_sk-…` holds one.
static SHAPED_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(^|[^A-Za-z0-9])(",
        r"sk-[A-Za-z0-9_\-]{16,}",
        r"|hf_[A-Za-z0-9]{10,}",
        r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        r"|gh[pousr]_[A-Za-z0-9]{20,}",
        r"|github_pat_[A-Za-z0-9_]{20,}",
        r"|glpat-[A-Za-z0-9_\-]{20,}",
        r"|xox[abposr]-[0-9][A-Za-z0-9\-]{9,}",
        r"|AIza[A-Za-z0-9_\-]{30,}",
        r"|[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
        r"|r8_[A-Za-z0-9]{30,}",
        r"|gsk_[A-Za-z0-9]{40,}",
        r"|npm_[A-Za-z0-9]{30,}",
        r"|ya29\.[A-Za-z0-9_.\-]{20,}",
        r"|pypi-AgE[A-Za-z0-9_\-]{40,}",
        r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        // A private key block (PEM, or PGP's `PRIVATE KEY BLOCK`): all of it to its end line, or,
        // cut short, its header lines (`Proc-Type: 4,ENCRYPTED`, `Comment: <a@b.org>`) and lines
        // of base64, with its line ends as they are or escaped (`\n`, in a JSON string). Text that
        // only names the block's lines (`pem.startswith("-----BEGIN PRIVATE KEY-----")`, even
        // with its end line after) holds none: a block holds no quote.
        // (A block holds no `--`, so the search for its end line stops at the next block's.)
        r"|-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:,.@<>\\\s]|-[A-Za-z0-9])*?-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
        r"|-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:(?:\r?\n|\\n)[A-Za-z][A-Za-z\-]*: [^\r\n\\]*)*(?:\s*(?:\r?\n|\\n)[A-Za-z0-9+/=]{16,})+",
        r")",
    ))
    .expect("valid regex")
});

/// A credential after the word that introduces it (`Bearer …`, `Authorization: Basic …`), and
/// the password of a URL (the user may be empty, the password may hold `@` or `/`): the
/// introduction is kept.
static INTRODUCED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?i)((?-u:\b)authorization["']?[ \t]*:[ \t]*["']?((?:basic|bearer|token|digest|negotiate)[ \t]+)?)[^\s"',;]+"#,
        r"|((?-u:\b)bearer[ \t]+)[A-Za-z0-9\-._~+/]{16,}=*",
        r"|((?-u:\b)[a-z][a-z0-9+.\-]*://[^\s:/@\[]*:)(?:[^\s/]+|[^\s/@]*/[^\s@]*?)@",
    ))
    .expect("valid regex")
});

/// The marker that replaces a secret.
pub const MASK: &str = "***";

/// Returns `text` with secrets masked. Borrowed (and cheap) when nothing looks secret.
pub fn redact(text: &str) -> Cow<'_, str> {
    if !might_hold_secret(text) {
        return Cow::Borrowed(text);
    }
    // Shapes first: a private key block assigned to a name goes whole, not its first line.
    let mut masked = Cow::Borrowed(text);
    // Again while it masks: a key right after another (`hf_…-----BEGIN…`) follows a letter
    // until the first is masked.
    for _ in 0..3 {
        let again = SHAPED_KEY.replace_all(&masked, |caps: &regex::Captures| {
            let key = &caps[2];
            // `sk-video-processing-toolkit` and `hf_transformers` are names: an OpenAI key holds
            // a digit, a Hugging Face token a digit or 30 letters and more.
            let name = (key.starts_with("sk-") && !has_digit(key))
                || (key.starts_with("hf_") && !has_digit(key) && key.len() < 33);
            if name {
                return caps[0].to_string();
            }
            format!("{}{MASK}", &caps[1])
        });
        match again {
            Cow::Owned(again) if again != *masked => masked = Cow::Owned(again),
            _ => break,
        }
    }
    let assigned = |caps: &regex::Captures| {
        let (name, value) = (&caps[2], &caps[3]);
        let quote = ["\\\"", "\"", "'"].into_iter().find(|q| value.starts_with(q)).unwrap_or("");
        if !secret_assignment(name, value.trim_matches(['"', '\'', '\\']), !quote.is_empty()) {
            return caps[0].to_string();
        }
        format!("{}{quote}{MASK}{quote}", &caps[1])
    };
    let masked = QUOTED_ASSIGNMENT.replace_all(&masked, assigned);
    let masked = ASSIGNMENT.replace_all(&masked, assigned);
    let masked = INTRODUCED.replace_all(&masked, |caps: &regex::Captures| {
        let credential = &caps[0][caps.get(1).or(caps.get(3)).or(caps.get(4)).map_or(0, |m| m.len())..];
        // Prose ("Authorization: required", "the bearer of bad-news-for-everyone") names no
        // credential: one after no scheme, or after "bearer", holds a digit (or, after
        // "Authorization:", is long).
        let schemeless = caps.get(1).is_some() && caps.get(2).is_none();
        // `http://host:8080/a@b` holds a port and a path, no password.
        let port = caps.get(4).is_some_and(|prefix| is_port_and_path(prefix.as_str(), credential));
        if (schemeless && !has_digit(credential) && credential.len() < 20)
            || (caps.get(3).is_some() && !has_digit(credential))
            || port
        {
            return caps[0].to_string();
        }
        let kept = caps.get(1).or(caps.get(3)).or(caps.get(4)).map_or("", |m| m.as_str());
        let at = if caps.get(4).is_some() { "@" } else { "" };
        format!("{kept}{MASK}{at}")
    });
    match masked {
        Cow::Borrowed(same) if same == text => Cow::Borrowed(text),
        other => Cow::Owned(other.into_owned()),
    }
}

fn has_digit(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
}

/// Whether what follows a URL's `scheme://host:` (`prefix`) is a port and a path (`8080/…`),
/// not a password: digits, then a path, after a host name (`localhost`, or one with a dot), not
/// a user's (`ann:2024/x@db` holds one).
fn is_port_and_path(prefix: &str, text: &str) -> bool {
    let host = prefix.rsplit_once("://").map_or("", |(_, rest)| rest.trim_end_matches(':'));
    let port = text.split_once('/').map(|(port, _)| port);
    (host.contains('.') || host.eq_ignore_ascii_case("localhost"))
        && port.is_some_and(|port| (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `name` assigned `value` (quoted or not) holds a secret: a name that names one
/// ([`names_secret`]), or `pass` alone given a string (`{user: 'ann', pass: '…'}`; a test's
/// verdict is a boolean or a number), and a value that can be one ([`no_secret`]; a `*_pwd`'s
/// path, `CUR_PWD=/home/ann`, is a working directory).
pub(crate) fn secret_assignment(name: &str, value: &str, quoted: bool) -> bool {
    let named = names_secret(name) || (quoted && name.eq_ignore_ascii_case("pass"));
    let path = name.to_ascii_lowercase().ends_with("pwd") && value.starts_with(['/', '~', '$']);
    named && !path && !no_secret(value)
}

/// A value no secret is: empty, a boolean, null, a number (`use_auth_token=True`,
/// `loss_per_token=2.31`), or the rest of `==`.
fn no_secret(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    matches!(lower.as_str(), "" | "true" | "false" | "none" | "null" | "nil")
        || value.starts_with('=')
        || value.parse::<f64>().is_ok()
}

/// Words before `_token` that make it a credential (`hf_token`, `GITHUB_TOKEN`,
/// `access_token`); after any other (`pad_token`, `next_token`, `time_per_token`) it is a
/// token of text. `token` alone is one, as SPEC §5 has it.
const CREDENTIAL_TOKENS: [&str; 24] = [
    "hf", "auth", "access", "api", "bot", "refresh", "id", "github", "gh", "gitlab", "slack", "bearer",
    "oauth", "session", "secret", "personal", "private", "app", "client", "service", "jwt", "openai",
    "wandb", "npm",
];

/// Words before `_pass` that make it a password (`DB_PASS`, `smtp_pass`); after any other
/// (`forward_pass`, `first_pass`) it is a pass over data, and `pass` alone is a test's verdict.
const CREDENTIAL_PASSES: [&str; 32] = [
    "db", "database", "mysql", "postgres", "pg", "redis", "mongo", "smtp", "mail", "email", "ftp", "ldap",
    "admin", "root", "user", "login", "proxy", "wifi", "sudo", "amqp", "rabbitmq", "es", "elastic", "kafka",
    "vpn", "ssh", "sftp", "imap", "api", "app", "service", "master",
];

/// The word before a name's last `_`, `-` or `.` and its end `suffix` (`db` in `APP_DB_PASS`);
/// None when the name is not `WORD_SUFFIX` (the suffix alone, or glued to a word: `bypass`).
fn word_before<'n>(lower: &'n str, suffix: &str) -> Option<&'n str> {
    let before = lower.strip_suffix(suffix)?.strip_suffix(['_', '-', '.'])?;
    Some(before.rsplit(['_', '-', '.']).next().unwrap_or(before))
}

/// Whether `name`, as the name of a value (a JSON key, a core key), names a secret as an
/// assignment's name does in text (ending in `api_key`, `secret`, `token`, `password` …, in
/// any case): the value of `{"openai_api_key": "…"}` is a secret as that of
/// `openai_api_key: …` is. `token` is one alone or after a word of [`CREDENTIAL_TOKENS`],
/// `pass` after a word of [`CREDENTIAL_PASSES`], `pwd` after any word (alone it is the
/// shell's working directory).
pub fn names_secret(name: &str) -> bool {
    static WHOLE_NAME: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!(r"(?i)(?:{SECRET_NAMES})$")).expect("valid regex"));
    // Every secret's name ends in one of these: most names (every core key and JSON field) are
    // told apart without compiling the regex.
    let lower = name.to_ascii_lowercase();
    if !SECRET_NAME_ENDS.iter().any(|end| lower.ends_with(end)) || !WHOLE_NAME.is_match(name) {
        return false;
    }
    if lower.ends_with("token") {
        lower == "token" || word_before(&lower, "token").is_some_and(|w| CREDENTIAL_TOKENS.contains(&w))
    } else if lower.ends_with("pass") {
        word_before(&lower, "pass").is_some_and(|w| CREDENTIAL_PASSES.contains(&w))
    } else if lower.ends_with("pwd") {
        word_before(&lower, "pwd").is_some_and(|w| !w.is_empty())
    } else {
        true
    }
}

/// The ends of [`SECRET_NAMES`]' names, in lower case (`passwd` and `pwd` end in `wd`,
/// `password` in `word`); the tests of [`names_secret`] hold them to it.
const SECRET_NAME_ENDS: [&str; 7] = ["key", "secret", "token", "wd", "word", "phrase", "pass"];

/// Literals every secret (or what introduces it) contains, in lower case. Checked first, so
/// text with nothing to redact (nearly all of it) costs one fast scan and the redaction
/// regexes are never even compiled in most processes.
const MIGHT_HOLD_SECRET: [&str; 45] = [
    "sk-",
    "hf_",
    "api_key",
    "apikey",
    "api-key",
    "secret",
    "access",
    "private",
    "token",
    "passw",
    "passphrase",
    "pass\"",
    "pass'",
    "pass:",
    "pass=",
    "pass :",
    "pass =",
    "_pass",
    "-pass",
    ".pass",
    "_pwd",
    "-pwd",
    ".pwd",
    "akia",
    "asia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "aiza",
    "_live_",
    "_test_",
    "eyj",
    "r8_",
    "gsk_",
    "npm_",
    "ya29.",
    "pypi-",
    "bearer",
    "authorization",
    "-----begin",
];

/// One scan of a copy in lower case for all the literals at once: an Aho-Corasick automaton,
/// built once per process. The regex engine's multi-literal search scanned a short text in half
/// the time (90 against 180 ns), but compiling it cost every CLI call some 2M instructions, a
/// fifth of a `core set`; this build costs 0.4M.
fn might_hold_secret(text: &str) -> bool {
    static LITERALS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        // A contiguous NFA: its build costs a fraction of a DFA's, and texts are short.
        let kind = Some(AhoCorasickKind::ContiguousNFA);
        AhoCorasick::builder().kind(kind).build(MIGHT_HOLD_SECRET).expect("literals")
    });
    // A URL holds a password only with an `@` after its `://` (links are common, passwords in
    // them rare).
    let url_credentials = || text.find("://").is_some_and(|at| text[at..].contains('@'));
    LITERALS.is_match(&text.to_ascii_lowercase()) || url_credentials()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_assignments_and_provider_keys() {
        assert_eq!(redact("API_KEY=abc123 rest"), "API_KEY=*** rest");
        assert_eq!(redact("my password: hunter2"), "my password: ***");
        assert_eq!(redact("Token = xyz"), "Token = ***");
        assert_eq!(redact("use sk-abcdefghijklmnop1234 now"), "use *** now");
        assert_eq!(redact("hf_abcdefghij1"), "***");
        assert_eq!(redact("sk-short"), "sk-short");
        assert_eq!(redact("max_tokens 100"), "max_tokens 100");
        assert!(matches!(redact("plain text"), Cow::Borrowed(_)));
        assert!(matches!(redact("the key insight: a high api rate"), Cow::Borrowed(_)));
        assert_eq!(redact("my PassWord: hunter2"), "my PassWord: ***", "literals match in any case");
        assert_eq!(redact("Sk-abcdefghijklmnopqrst is no key"), "Sk-abcdefghijklmnopqrst is no key");
    }

    #[test]
    fn words_holding_sk_dash_are_no_keys() {
        for text in [
            "mask-rcnn-resnet50-fpn",
            "the task-specific-adapter-module-v2-final works",
            "risk-adjusted-return-over-baseline",
            "desk-lamp-brightness-controller-v3",
            "max_tokens: 100",
            "token_count: 5",
            "secret_id: 3",
            "tokens: 12",
            "a basic configuration of the solver",
            "the bearer of bad-news-for-everyone-involved",
            "Authorization: required for all endpoints",
            r#"{"token": 5, "temperature": 0.7, "use_auth_token": true,"#,
            "pad_token: <pad>, eos_token: </s>",
            "xoxo-gossip-girl-episodes",
            "if next_token == tokenizer.eos_token_id:",
            "from_pretrained(m, token=True, use_auth_token=True)",
            "time_to_first_token=0.184 loss_per_token=2.31",
            r#"{"token": 5, "logprob": -0.02, "image_token": "<image>"}"#,
            "auth:\n  token:\n    enabled: true",
            "OPENAI_API_KEY=\nWANDB_PROJECT=llm-evals",
            "hf_transformers_cache",
            "assert pem.startswith(\"-----BEGIN PRIVATE KEY-----\")\ndef other(): return 1",
            "see https://example.org/a:b@c and http://host:8080/path",
            "forward_pass: 12.3 ms, first_pass: done, pass: true, bypass=1, compass: north",
            "PWD=/home/ann OLDPWD=/tmp pwd: /srv",
            "pass@k: 0.42 after the forward-pass",
            "http://localhost:8080/a@b and https://medium.com:443/@ann",
            "npm_config_cache=/tmp/npm",
            "assert pem.startswith(\"-----BEGIN PRIVATE KEY-----\")\nassert pem.endswith(\"-----END PRIVATE KEY-----\\n\")",
            "if line == \"-----BEGIN RSA PRIVATE KEY-----\": start = i\nelif line == \"-----END RSA PRIVATE KEY-----\": end = i",
            "pip install pypi-attestations-and-signing-helpers-package",
            "curl http://[::1]:8080/users/@me and http://127.0.0.1:8080/@me",
            "CUR_PWD=/home/ann/project start_pwd: ~/exp SAVED_PWD=$(pwd)",
            "pass: true, pass = 3, tests pass: 12/12",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn masks_the_common_credential_shapes() {
        let cases = [
            ("key AKIAIOSFODNN7EXAMPLE here", "key *** here"),
            ("key_sk-abc123def456ghi789jkl012mno345pqr", "key_***"),
            ("(sk-abcdefghijklmnop1234,sk-abcdefghijklmnop5678)", "(***,***)"),
            ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key=***"),
            ("SECRET_KEY=abc123", "SECRET_KEY=***"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "***"),
            ("github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz", "***"),
            ("glpat-abcdefghij0123456789", "***"),
            ("xoxb-1234567890-abcdefghij", "***"),
            ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "***"),
            ("sk_live_abcdefghijklmnop1234", "***"),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt ***",
            ),
            ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"),
            ("curl -H 'Authorization: Basic dXNlcjpwYXNz'", "curl -H 'Authorization: Basic ***'"),
            (r#"curl -H "Authorization: Bearer sk-abcdefghijklmnop1234" https://x"#, r#"curl -H "Authorization: Bearer ***" https://x"#),
            ("huggingface-cli login --token hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", "huggingface-cli login --token ***"),
            (r#"{"use_auth_token":true,"api_key":"abc123xyz","password":"hunter2"}"#, r#"{"use_auth_token":true,"api_key":"***","password":"***"}"#),
            (r#"{"pad_token":null,"hf_token":"hf_abcdefghij1"}"#, r#"{"pad_token":null,"hf_token":"***"}"#),
            (r#"password := "hunter2""#, r#"password := "***""#),
            ("'password' => 'hunter2'", "'password' => '***'"),
            ("from_pretrained(m, token=hf_abcdefghij1)", "from_pretrained(m, token=***)"),
            ("bearer abcdefghijklmnop0123", "bearer ***"),
            ("postgres://user:hunter2secret@host/db", "postgres://user:***@host/db"),
            ("https://user:pw@github.com/x", "https://user:***@github.com/x"),
            ("x-api-key: abc123", "x-api-key: ***"),
            ("Api-Key: abc123", "Api-Key: ***"),
            ("passwd: hunter2", "passwd: ***"),
            (r#"{"api_key": "abc def"}"#, r#"{"api_key": "***"}"#),
            (r#"password: "hunter2 secret words" end"#, r#"password: "***" end"#),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nafter", "***\nafter"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\ncut short", "***\ncut short"),
            (
                "private_key: -----BEGIN RSA PRIVATE KEY-----\nMIIEsecretbody\n-----END RSA PRIVATE KEY-----",
                "private_key: ***",
            ),
            ("redis://:hunter2@host:6379", "redis://:***@host:6379"),
            ("hf_abcdefghijklmnopqrst1-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAxyz", "******"),
            ("https://ann:p@ss@host/x", "https://ann:***@host/x"),
            ("pip install sk-video-processing-toolkit", "pip install sk-video-processing-toolkit"),
            ("DB_PASS=hunter2 next", "DB_PASS=*** next"),
            ("smtp_pass: hunter2", "smtp_pass: ***"),
            ("MYSQL_PWD=hunter2", "MYSQL_PWD=***"),
            ("gpg_passphrase=s3cr3t", "gpg_passphrase=***"),
            ("REPLICATE_API_TOKEN r8_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789a", "REPLICATE_API_TOKEN ***"),
            ("groq gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOp", "groq ***"),
            ("//registry.npmjs.org/:_authToken npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "//registry.npmjs.org/:_authToken ***"),
            ("access ya29.a0AfH6SMBx3kLmNoPqRsTuVwXyZ-0123456789", "access ***"),
            ("TWINE pypi-AgEIcHlwaS5vcmcCJDU1ZjM0YTM4LTk2ZjEtNDg3Ni1hNmY3LWE0ZDQ1", "TWINE ***"),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\nComment: https://gnupg.org\n\nlQOYBF0\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----\nafter",
                "***\nafter",
            ),
            (
                r#"{"key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"}"#,
                r#"{"key": "***\n"}"#,
            ),
            (r#""-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nMIIEabc"#, r#""***\nMIIEabc"#),
            (r#"{\"password\": \"hunter2\", \"user\": \"ann\"}"#, r#"{\"password\": \"***\", \"user\": \"ann\"}"#),
            ("postgres://ann:pa/ss@db/x", "postgres://ann:***@db/x"),
            ("https://ann:2024/secret@db.example.com/x", "https://ann:***@db.example.com/x"),
            ("access ya29.c.c0ASRK0GZabcdef0123456789", "access ***"),
            (r#"{"cmd": "PGPASSWORD=\"s3cret\" psql -h db"}"#, r#"{"cmd": "PGPASSWORD=\"***\" psql -h db"}"#),
            (r#"{\"password\": \"hunt\\\"er2\"}"#, r#"{\"password\": \"***\"}"#),
            ("auth: { user: 'ann', pass: 'hunter2' }", "auth: { user: 'ann', pass: '***' }"),
            (r#"{"user": "ann", "pass": "hunter2"}"#, r#"{"user": "ann", "pass": "***"}"#),
            ("RABBITMQ_PASS=hunter2", "RABBITMQ_PASS=***"),
            ("smtp = {'user': 'ann', 'pass' : 'hunter2'}; pass = 'hunter2'", "smtp = {'user': 'ann', 'pass' : '***'}; pass = '***'"),
        ];
        for (text, expected) in cases {
            assert_eq!(redact(text), expected, "{text}");
            assert_eq!(redact(expected), expected, "redaction is idempotent: {expected}");
        }
    }

    /// Each form of [`SECRET_NAMES`] ends in one of [`SECRET_NAME_ENDS`], which [`names_secret`]
    /// checks before its regex.
    #[test]
    fn every_secret_name_ends_as_the_pre_check_expects() {
        for name in [
            "api_key",
            "API-KEY",
            "apikey",
            "secret",
            "secret_key",
            "secret-access-key",
            "access_key",
            "private_key",
            "token",
            "passwd",
            "Password",
            "passphrase",
            "DB_PASS",
            "MYSQL_PWD",
        ] {
            let lower = name.to_ascii_lowercase();
            assert!(SECRET_NAME_ENDS.iter().any(|end| lower.ends_with(end)), "{name}");
            assert!(names_secret(name), "{name}");
        }
    }

    #[test]
    fn names_secrets_as_assignments_do() {
        for name in [
            "api_key",
            "OPENAI_API_KEY",
            "secret",
            "client_secret",
            "token",
            "hf_token",
            "Password",
            "aws_secret_access_key",
            "x-api-key",
            "passwd",
            "GITHUB_TOKEN",
            "access_token",
            "DB_PASS",
            "app.db-pass",
            "MYSQL_PWD",
            "passphrase",
            "key_passphrase",
        ] {
            assert!(names_secret(name), "{name}");
            assert_ne!(redact(&format!("{name}: x1")), format!("{name}: x1"), "{name}");
        }
        for name in [
            "max_tokens",
            "secret_id",
            "tokenizer",
            "api",
            "pass",
            "pad_token",
            "EOS_TOKEN",
            "next_token",
            "time_per_output_token",
            "mytoken",
            "forward_pass",
            "bypass",
            "pwd",
            "oldpwd",
        ] {
            assert!(!names_secret(name), "{name}");
            assert_eq!(redact(&format!("{name}: x1")), format!("{name}: x1"), "{name}");
        }
    }
}
