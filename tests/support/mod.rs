//! Running the real `memctl` binary in a sandbox: a fresh temporary directory as the working
//! directory, a pinned clock, no inherited `MEMCTL_*` variable and a test-local `memctl.toml`.
//! Also the JSON shape checks of SPEC §9.1 shared by the tests.

#![allow(dead_code)]

pub mod postgres;

use serde_json::Value;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_memctl");

/// Every command runs with this clock (`MEMCTL_NOW`).
pub const NOW: &str = "2026-01-02T03:04:05Z";

/// `NOW` as epoch seconds, the `ts` of everything written in a sandbox.
pub const NOW_EPOCH: f64 = 1_767_323_045.0;

/// The test-local configuration: the built-in defaults, spelled out, so a developer's own
/// `memctl.toml` or `MEMCTL_*` settings can never change what the tests see.
pub const DEFAULT_CONFIG: &str = "\
# Test-local configuration (the built-in defaults).
core_max_chars = 2000
recall_max_events = 20
retrieval_k = 8

[search]
fts = \"auto\"

[sqlite]
busy_timeout_ms = 30000
";

/// A file of `tests/fixtures`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(relative)
}

/// A database the end-to-end tests run on.
#[derive(Debug, Clone)]
pub enum Db {
    /// `./memory.sqlite` in the sandbox.
    Sqlite,
    /// A new database of the shared PostgreSQL cluster, named by `db_path` in `memctl.toml`.
    Postgres(String),
}

impl Db {
    pub fn name(&self) -> &'static str {
        match self {
            Db::Sqlite => "SQLite",
            Db::Postgres(_) => "PostgreSQL",
        }
    }
}

/// The databases a test parameterised by backend runs on: an SQLite file, and a new PostgreSQL
/// database when a server is at hand (required under CI, see postgres.rs).
pub fn backends(test: &str) -> Vec<Db> {
    let mut dbs = vec![Db::Sqlite];
    if let Some(cluster) = postgres::Cluster::shared(test) {
        dbs.push(Db::Postgres(cluster.new_database()));
    }
    dbs
}

/// A fresh working directory for one test.
pub struct Sandbox {
    dir: tempfile::TempDir,
    /// The database its commands use.
    db: Db,
    /// The directory as the binary sees it (symlinks resolved), for scrubbing output.
    real: PathBuf,
}

impl Sandbox {
    /// A sandbox with the default test-local configuration and no database yet.
    pub fn new() -> Sandbox {
        Sandbox::with_config(DEFAULT_CONFIG)
    }

    /// A sandbox whose `./memctl.toml` holds `config`.
    pub fn with_config(config: &str) -> Sandbox {
        let dir = tempfile::Builder::new().prefix("memctl-cli-").tempdir().expect("temp dir");
        let real = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        std::fs::write(dir.path().join("memctl.toml"), config).expect("write memctl.toml");
        Sandbox { dir, real, db: Db::Sqlite }
    }

    /// The database its commands use.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// A sandbox whose commands use `db` (with `config` as the rest of `memctl.toml`).
    pub fn on(db: &Db, config: &str) -> Sandbox {
        match db {
            Db::Sqlite => Sandbox::with_config(config),
            Db::Postgres(url) => {
                Sandbox { db: db.clone(), ..Sandbox::with_config(&format!("db_path = \"{url}\"\n{config}")) }
            }
        }
    }

    /// A sandbox on `db` with the default configuration, initialized by `memctl init`.
    pub fn initialized_on(db: &Db) -> Sandbox {
        let sandbox = Sandbox::on(db, DEFAULT_CONFIG);
        sandbox.ok(&["init"]);
        sandbox
    }

    /// A sandbox with `./memory.sqlite` created by `memctl init`.
    pub fn initialized() -> Sandbox {
        let sandbox = Sandbox::new();
        sandbox.ok(&["init"]);
        sandbox
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A file in the sandbox.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `memctl ARGS` ready to run in the sandbox: working directory, pinned clock, every other
    /// `MEMCTL_*` variable of the test process removed (the rest of the environment is kept).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command.args(args).current_dir(self.dir.path());
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("MEMCTL_") {
                command.env_remove(&name);
            }
        }
        // Output must not depend on the terminal or on a forced colour setting.
        for name in ["COLUMNS", "CLICOLOR_FORCE", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE"] {
            command.env_remove(OsString::from(name));
        }
        command.env("MEMCTL_NOW", NOW);
        command
    }

    /// Runs `memctl ARGS` with extra environment variables and optional standard input.
    pub fn exec(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Outcome {
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = command.spawn().expect("spawn memctl");
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("stdin pipe");
            // A command refused before it reads its input exits without reading it.
            if let Err(e) = pipe.write_all(text.as_bytes()) {
                assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
            }
        }
        let output = child.wait_with_output().expect("wait for memctl");
        let scrub = |bytes: &[u8]| {
            let text = String::from_utf8(bytes.to_vec()).expect("memctl prints UTF-8");
            let text = text.replace(&self.real.display().to_string(), "[TMP]");
            text.replace(&self.dir.path().display().to_string(), "[TMP]")
        };
        Outcome {
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            stdin: stdin.map(str::to_string),
            code: output.status.code().expect("memctl exited normally, not by a signal"),
            stdout: scrub(&output.stdout),
            stderr: scrub(&output.stderr),
        }
    }

    pub fn run(&self, args: &[&str]) -> Outcome {
        self.exec(args, None, &[])
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Outcome {
        self.exec(args, Some(stdin), &[])
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        self.exec(args, None, env)
    }

    /// Runs a command that must succeed; returns its stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args).success().stdout
    }

    /// Runs `memctl --json ARGS`, which must succeed with one JSON object on stdout.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        self.run(&full).success().json()
    }

    /// Like [`Sandbox::json`] with extra environment variables.
    #[track_caller]
    pub fn json_env(&self, args: &[&str], env: &[(&str, &str)]) -> Value {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        self.exec(&full, None, env).success().json()
    }
}

/// What one `memctl` invocation did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// The command line as a person would type it (extra variables and stdin included).
    pub fn command_line(&self) -> String {
        let mut parts: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
        parts.push("memctl".into());
        parts.extend(self.args.iter().map(|a| quote(a)));
        let line = parts.join(" ");
        match &self.stdin {
            Some(text) => format!("printf '%s' {} | {line}", quote(text)),
            None => line,
        }
    }

    /// The command, its exit code, stdout and stderr: what a snapshot records.
    pub fn transcript(&self) -> String {
        let block = |text: &str| {
            if text.is_empty() {
                String::new()
            } else if text.ends_with('\n') {
                text.to_string()
            } else {
                format!("{text}\n[no newline at end]\n")
            }
        };
        format!(
            "$ {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
            self.command_line(),
            self.code,
            block(&self.stdout),
            block(&self.stderr)
        )
    }

    #[track_caller]
    pub fn success(self) -> Outcome {
        assert_eq!(self.code, 0, "expected success:\n{}", self.transcript());
        self
    }

    #[track_caller]
    pub fn exit(self, code: i32) -> Outcome {
        assert_eq!(self.code, code, "expected exit {code}:\n{}", self.transcript());
        self
    }

    /// stdout as exactly one JSON object on one line.
    #[track_caller]
    pub fn json(&self) -> Value {
        let text = self.stdout.strip_suffix('\n').unwrap_or(&self.stdout);
        assert!(!text.contains('\n'), "--json must print one line:\n{}", self.transcript());
        let value: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.transcript()));
        assert!(value.is_object(), "--json must print an object:\n{}", self.transcript());
        value
    }

    /// A text-mode failure (SPEC §9): exit `code`, nothing on stdout, one `Error: …` line and at
    /// most one `hint: …` line on stderr.
    #[track_caller]
    pub fn text_error(self, code: i32) -> Outcome {
        let outcome = self.exit(code);
        assert_eq!(outcome.stdout, "", "errors print nothing on stdout:\n{}", outcome.transcript());
        let lines: Vec<&str> = outcome.stderr.lines().collect();
        let well_formed = match lines.as_slice() {
            [error] => error.starts_with("Error: "),
            [error, hint] => error.starts_with("Error: ") && hint.starts_with("hint: "),
            _ => false,
        };
        assert!(
            well_formed && outcome.stderr.ends_with('\n'),
            "a text error is one `Error: …` line plus an optional `hint: …` line:\n{}",
            outcome.transcript()
        );
        outcome
    }

    /// A `--json` failure (SPEC §9, §9.1): exit `code`, nothing on stdout, and
    /// `{"error":{"kind":KIND,"message":…}}` as the only line on stderr. Returns the message.
    #[track_caller]
    pub fn json_error(self, code: i32, kind: &str) -> String {
        let outcome = self.exit(code);
        assert_eq!(outcome.stdout, "", "errors print nothing on stdout:\n{}", outcome.transcript());
        let text = outcome.stderr.strip_suffix('\n').unwrap_or(&outcome.stderr);
        assert!(!text.contains('\n'), "a JSON error is one line:\n{}", outcome.transcript());
        let value: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("stderr is not JSON ({e}):\n{}", outcome.transcript()));
        let error = value.get("error").and_then(Value::as_object);
        let error = error.unwrap_or_else(|| panic!("no error object:\n{}", outcome.transcript()));
        assert_eq!(error.get("kind").and_then(Value::as_str), Some(kind), "{}", outcome.transcript());
        let message = error.get("message").and_then(Value::as_str);
        let message = message.unwrap_or_else(|| panic!("no message:\n{}", outcome.transcript()));
        assert!(!message.is_empty(), "empty message:\n{}", outcome.transcript());
        message.to_string()
    }
}

/// `arg` quoted for a POSIX shell when it needs it.
pub fn quote(arg: &str) -> String {
    let plain =
        !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "._:@/=+-,%^".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

// ---- JSON shapes of SPEC §9.1 ------------------------------------------------------------------

#[track_caller]
pub fn field<'a>(value: &'a Value, name: &str) -> &'a Value {
    value.get(name).unwrap_or_else(|| panic!("missing field `{name}` in {value}"))
}

#[track_caller]
pub fn int(value: &Value, name: &str) -> i64 {
    let found = field(value, name);
    found.as_i64().unwrap_or_else(|| panic!("`{name}` must be an integer in {value}"))
}

#[track_caller]
pub fn string<'a>(value: &'a Value, name: &str) -> &'a str {
    let found = field(value, name);
    found.as_str().unwrap_or_else(|| panic!("`{name}` must be a string in {value}"))
}

#[track_caller]
pub fn boolean(value: &Value, name: &str) -> bool {
    let found = field(value, name);
    found.as_bool().unwrap_or_else(|| panic!("`{name}` must be a boolean in {value}"))
}

#[track_caller]
pub fn array<'a>(value: &'a Value, name: &str) -> &'a Vec<Value> {
    let found = field(value, name);
    found.as_array().unwrap_or_else(|| panic!("`{name}` must be an array in {value}"))
}

#[track_caller]
pub fn object<'a>(value: &'a Value, name: &str) -> &'a serde_json::Map<String, Value> {
    let found = field(value, name);
    found.as_object().unwrap_or_else(|| panic!("`{name}` must be an object in {value}"))
}

/// A string or null.
#[track_caller]
pub fn opt_string<'a>(value: &'a Value, name: &str) -> Option<&'a str> {
    let found = field(value, name);
    assert!(found.is_string() || found.is_null(), "`{name}` must be a string or null in {value}");
    found.as_str()
}

/// `ts`: float epoch seconds (serialized with a fraction, so JSON readers see a float).
#[track_caller]
pub fn check_ts(value: &Value) -> f64 {
    let ts = field(value, "ts");
    assert!(ts.is_f64(), "`ts` must be float epoch seconds in {value}");
    ts.as_f64().unwrap()
}

#[track_caller]
pub fn strings(value: &Value, name: &str) -> Vec<String> {
    array(value, name)
        .iter()
        .map(|item| {
            let text = item.as_str();
            text.unwrap_or_else(|| panic!("`{name}` must hold strings in {value}")).to_string()
        })
        .collect()
}

#[track_caller]
pub fn ints(value: &Value, name: &str) -> Vec<i64> {
    array(value, name)
        .iter()
        .map(|item| item.as_i64().unwrap_or_else(|| panic!("`{name}` must hold integers in {value}")))
        .collect()
}

/// An event: `{id, branch, kind, text, tags:[…], ts}`.
#[track_caller]
pub fn check_event(event: &Value) {
    int(event, "id");
    string(event, "branch");
    string(event, "kind");
    string(event, "text");
    strings(event, "tags");
    check_ts(event);
}

/// An archival record `{id, branch, text, tags:[…], ts}`; search hits add a numeric `score`.
#[track_caller]
pub fn check_record(record: &Value, scored: bool) {
    int(record, "id");
    string(record, "branch");
    string(record, "text");
    strings(record, "tags");
    check_ts(record);
    if scored {
        assert!(field(record, "score").is_number(), "`score` must be a number in {record}");
    }
}

/// A summary: `{id, branch, kind, text, event_ids:[…]}`.
#[track_caller]
pub fn check_summary(summary: &Value) {
    int(summary, "id");
    string(summary, "branch");
    string(summary, "kind");
    string(summary, "text");
    ints(summary, "event_ids");
}

/// `{summaries:[…], events:[…]}` of `recall list` and of `read`'s `recall`.
#[track_caller]
pub fn check_recall(recall: &Value) {
    array(recall, "summaries").iter().for_each(check_summary);
    array(recall, "events").iter().for_each(check_event);
}

/// A branch of `branch list`: `{id, node_uid, parent, depth, fork_seq}`.
#[track_caller]
pub fn check_branch(branch: &Value) {
    string(branch, "id");
    opt_string(branch, "node_uid");
    opt_string(branch, "parent");
    int(branch, "depth");
    int(branch, "fork_seq");
}

/// `fork` / `branch create`: `{branch, parent, depth, fork_seq, created}`.
#[track_caller]
pub fn check_fork(value: &Value) {
    string(value, "branch");
    opt_string(value, "parent");
    int(value, "depth");
    int(value, "fork_seq");
    boolean(value, "created");
}

/// An operation of `log`: `{seq, op, branch, phase, actor, ts, details}`.
#[track_caller]
pub fn check_op(op: &Value) {
    int(op, "seq");
    string(op, "op");
    opt_string(op, "branch");
    opt_string(op, "phase");
    opt_string(op, "actor");
    check_ts(op);
    field(op, "details");
}

/// Texts of the events in a `{events:[…]}` value, in order.
pub fn event_texts(value: &Value) -> Vec<String> {
    array(value, "events").iter().map(|e| string(e, "text").to_string()).collect()
}

/// The first column, as text, of the rows of `sql` (one the schema's tables answer alike on
/// both backends) in the sandbox's database.
pub fn texts_of(sb: &Sandbox, sql: &str) -> Vec<String> {
    match &sb.db {
        Db::Postgres(url) => postgres::texts(url, sql),
        Db::Sqlite => {
            let conn = rusqlite::Connection::open(sb.file("memory.sqlite")).expect("open the database");
            let mut stmt = conn.prepare(sql).unwrap();
            stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
        }
    }
}

/// Every row of every table (FTS shadow tables, `meta` and the `ops` journal included), each
/// table's rows sorted, plus `user_version`: equal dumps mean an unchanged database. Opened
/// read-only, between two commands.
pub fn dump(sb: &Sandbox) -> Vec<(String, Vec<String>)> {
    if let Db::Postgres(url) = &sb.db {
        return postgres::dump(url);
    }
    let conn = rusqlite::Connection::open_with_flags(
        sb.file("memory.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the database read-only");
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for needed in ["archival", "core", "events", "inherited_exclusions", "inherited_summaries", "meta", "ops"]
    {
        assert!(tables.iter().any(|t| t == needed), "table {needed} in {tables:?}");
    }
    tables.retain(|t| !t.starts_with("sqlite_"));
    let mut out = vec![("user_version".to_string(), vec![version.to_string()])];
    for table in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let columns = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |row| {
                let values = (0..columns)
                    .map(|i| row.get::<_, rusqlite::types::Value>(i))
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(format!("{values:?}"))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        rows.sort();
        out.push((table, rows));
    }
    out
}

/// Runs the first ```python block of the workspace document `doc` with python3 in `sb`, with the
/// client of `python/` importable, `MEMCTL_BIN` set to the binary, `MEMCTL_DB` to `sb`'s
/// `memory.sqlite` and the clock pinned; the
/// block and its output. Without python3: None and a notice, or a failure when CI is set (CI
/// installs it).
pub fn run_python_block(sb: &Sandbox, doc: &str) -> Option<(String, std::process::Output)> {
    let python = Command::new("python3").arg("--version").output();
    if !python.is_ok_and(|out| out.status.success()) {
        assert!(std::env::var_os("CI").is_none(), "no python3: CI must run the Python of {doc}");
        eprintln!("note: python3 not found, skipping the Python of {doc} (CI=1 makes this a failure)");
        return None;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(doc);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let start = text.find("```python\n").expect("a ```python block") + "```python\n".len();
    let block = text[start..start + text[start..].find("\n```").expect("end of the block")].to_string();
    std::fs::write(sb.file("snippet.py"), &block).unwrap();
    let mut python = Command::new("python3");
    python.arg("snippet.py").current_dir(sb.path());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MEMCTL") {
            python.env_remove(name);
        }
    }
    // The client from the source tree, running this build's binary.
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    python
        .env("MEMCTL_BIN", BIN)
        .env("PYTHONPATH", client)
        .env("MEMCTL_DB", sb.file("memory.sqlite"))
        .env("MEMCTL_NOW", NOW);
    Some((block, python.output().expect("run python3")))
}

/// Snapshots one command (its command line, exit code, stdout and stderr) under `name`, in the
/// calling module's snapshots (`e2e__<module>__<name>.snap`): a macro, so insta names the file
/// after the test module, not this one.
#[macro_export]
macro_rules! snap {
    ($name:expr, $outcome:expr $(,)?) => {{
        let (name, outcome): (&str, &$crate::support::Outcome) = (&$name[..], $outcome);
        insta::assert_snapshot!(name, outcome.transcript(), &outcome.command_line());
    }};
}

/// Snapshots several commands in one file (for sweeps of the same check over many commands).
#[macro_export]
macro_rules! snap_all {
    ($name:expr, $outcomes:expr $(,)?) => {{
        let (name, outcomes): (&str, &[$crate::support::Outcome]) = (&$name[..], $outcomes);
        let text: Vec<String> = outcomes.iter().map($crate::support::Outcome::transcript).collect();
        insta::assert_snapshot!(name, text.join("\n"), name);
    }};
}
