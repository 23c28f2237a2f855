//! `count_tokens` must equal tiktoken-rs's `encode_ordinary(text).len()`, sample by sample, for
//! both encodings: code, prose, numbers, whitespace runs, URLs, emoji, non-ASCII scripts, long
//! words, punctuation runs, plus every short string over an alphabet of the characters that decide
//! where tiktoken splits, and random mixes of all of these.

use memctl_core::{count_tokens, count_tokens_within, Encoding, ErrorKind};

const RUST: &str = r#"use std::collections::HashMap;

/// Counts words.
pub fn count(text: &str) -> HashMap<&str, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_works() {
        assert_eq!(super::count("a b a")["a"], 2);
    }
}
"#;

const PYTHON: &str = "import os\n\n\nclass Memory:\n    \"\"\"A branch's memory.\"\"\"\n\n    def __init__(self, path: str) -> None:\n        self.path = os.path.expanduser(path)\n        self._cache: dict[str, int] = {}\n\n    def get(self, key):\n        if key not in self._cache:\n            raise KeyError(f\"{key!r} isn't here\")\n        return self._cache[key]  # O(1)\n\n\nif __name__ == '__main__':\n    print(Memory('~/x').get('y'))\n";

const C_TABS: &str = "#include <stdio.h>\r\n\r\nint main(int argc, char **argv) {\r\n\tfor (int i = 0; i < argc; i++) {\r\n\t\tif (argv[i][0] == '-') {\r\n\t\t\tprintf(\"%s\\n\", argv[i]);\r\n\t\t}\r\n\t}\r\n\treturn 0;\r\n}\r\n\t\t\n";

const PROSE: &str = "The quick brown fox jumps over the lazy dog. It's 5 o'clock somewhere; we'll see, \
    they'd said, and I'M NOT SURE THEY'VE GONE. \"Quoted,\" she wrote — with an em dash… and \
    ellipsis. Mr. O'Neill's café served crème brûlée to naïve coöperators in Zürich.\n\n\
    A new paragraph, after two newlines.   Three spaces before this.\tA tab before this.";

const NUMBERS: &str = "0 1 12 123 1234 12345 123456789012345 3.14159 -42 +7 1e10 0xFF 0b1010 1,000,000 \
    2024-06-01T12:34:56Z 99.9% $1,234.56 ¥500 ١٢٣٤ ４５６ Ⅻ ½ ²³ 10:30pm";

const URLS: &str = "See https://example.com/path/to/page?query=1&b=two#frag and \
    http://localhost:8080/api/v1/items/42, mailto:someone@example.org, \
    ftp://files.example.net/pub/file.tar.gz or www.example.co.uk/a_b-c~d.";

const EMOJI: &str = "👍 🎉🎉🎉 👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 🇫🇷🇯🇵 flags, 👋🏽 wave, ❤️ heart, ✔ done 😀😃😄😁";

const CJK: &str = "我们的记忆存储在SQLite中。分支是写时复制的。日本語のテキストとカタカナ、ひらがな。\
    한국어 텍스트도 있습니다. 中文，標點符號：「引號」！";

const CYRILLIC: &str = "Съешь же ещё этих мягких французских булок, да выпей чаю. ПРИВЕТ, Мир! ёЁ";

const ARABIC: &str = "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣ وعلامات ترقيم، وكذلك كلمة English في الوسط.";

const MIXED_SCRIPTS: &str = "Ελληνικά κείμενα, עברית, हिन्दी पाठ, ไทย, Tiếng Việt có dấu, \
    e\u{301}te\u{301} (combining accents), Å vs A\u{30a}, ﬁ ligature, zero\u{200b}width, \
    soft\u{ad}hyphen, nbsp\u{a0}here, ideographic\u{3000}space, line\u{2028}sep.";

/// Characters of the Latin split DFA's set beyond Latin-1: Latin Extended, general
/// punctuation and spaces, letterlike symbols, arrows, mathematical and technical symbols.
const LATIN_SYMBOLS: &str = "\u{2113} \u{216b} \u{1c5}x \u{17f}'s 'x\u{17f} x\u{20d7}y a\u{2000}b\u{200a}c\u{2028}d \
    \u{2190} \u{2192}\u{21d2} a\u{2264}b\u{2265}c \u{2211}\u{221e} \u{2605}\u{2713} \u{27e8}x\u{27e9} \u{2b1b}\u{2bff} \
    \u{2018}quoted\u{2019} \u{201c}it\u{2019}s\u{201d} \u{2026}\u{2014}\u{2013} \u{2022} \u{20ac}5 \u{2122} \u{24f}\u{180}";

const SPECIAL: &str = "<|endoftext|> is counted as text, as are <|fim_prefix|> and <|endofprompt|>.";

#[rustfmt::skip]
const SAMPLES: &[&str] = &[
    "", "a", " ", "\n", "\t", "\r\n", "hello", " hello", "hello world", "Hello, World!", RUST,
    PYTHON, C_TABS, PROSE, NUMBERS, URLS, EMOJI, CJK, CYRILLIC, ARABIC, MIXED_SCRIPTS, LATIN_SYMBOLS, SPECIAL,
    "I'm you're he's they'll we've she'd DON'T IT'S it’s", "abc\n  ", "abc\n\n\t", "x \n ",
    "fn main() {\n    ", "a\n \n ", "\n ", " \n", "\r\n \r\n  ", "trailing spaces   ",
    "  leading spaces", "x\u{3000}\n\u{3000}", "!!!", "?!?!?!", "...", "---", "***", "===",
    "// ---------------------------------------------------------------------",
    "/////////", "<<<>>>", "{{{}}}", "((()))", "[[[]]]", "#!/usr/bin/env bash", "\u{feff}BOM",
    "\u{1}\u{2}\u{7f} control", "tab\tseparated\tvalues\n1\t2\t3\n",
];

/// Whole-sample corpus, each sample compared as is.
fn fixed_samples() -> Vec<String> {
    let mut samples: Vec<String> = SAMPLES.iter().map(|s| s.to_string()).collect();

    // Long whitespace runs, alone, before a word, before a newline, at the end.
    for ws in [" ", "\t", "\n", "\r\n", " \t", "\u{a0}", "\u{3000}"] {
        for n in [2, 3, 17, 128, 1000, 5000] {
            let run = ws.repeat(n);
            samples.push(run.clone());
            samples.push(format!("x{run}y"));
            samples.push(format!("x{run}\ny"));
            samples.push(format!("x{run}"));
            samples.push(format!("{run}!"));
        }
    }
    // Long words and unbroken strings (these reach tiktoken's heap-based merge).
    samples.push("a".repeat(3000));
    samples.push("ab".repeat(1500));
    samples.push("Supercalifragilisticexpialidocious".repeat(40));
    samples.push("pneumonoultramicroscopicsilicovolcanoconiosis".to_string());
    samples.push("Donaudampfschifffahrtsgesellschaftskapitänswitwe".to_string());
    samples.push("aGVsbG8gd29ybGQhIFRoaXMgaXMgYSBiYXNlNjQgYmxvYiB0aGF0IGdvZXMgb24gYW5kIG9u".repeat(30));
    samples.push("0123456789".repeat(200));
    samples.push("é".repeat(500));
    samples.push("漢字".repeat(400));
    samples.push("🙂".repeat(300));
    // Repeated punctuation.
    for p in ["!", ".", "-", "=", "*", "#", "?!", ",", ";", "_", "/", "\\", "'", "\""] {
        samples.push(p.repeat(257));
        samples.push(format!("word{} next", p.repeat(9)));
    }
    // Bigger documents: everything at once, and a long one.
    let all = samples.concat();
    samples.push([RUST, PYTHON, C_TABS, PROSE, NUMBERS, URLS, EMOJI, CJK, CYRILLIC, ARABIC].concat());
    samples.push(all.chars().take(30_000).collect());
    samples
}

/// Every string of up to 4 characters over the characters that decide tiktoken's splits.
fn short_strings() -> Vec<String> {
    let alphabet = [' ', '\t', '\n', '\r', 'a', 'B', '1', '!', '\'', 's', '/', '\u{a0}', 'é', '中'];
    let mut all = vec![String::new()];
    let mut layer = vec![String::new()];
    for _ in 0..4 {
        layer = layer
            .iter()
            .flat_map(|s| {
                alphabet.iter().map(move |c| {
                    let mut t = s.clone();
                    t.push(*c);
                    t
                })
            })
            .collect();
        all.extend(layer.iter().cloned());
    }
    all
}

/// Random mixes of fragments from a fixed seed (no dependency on a random crate).
fn random_mixes() -> Vec<String> {
    #[rustfmt::skip]
    let fragments = [
        " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u{a0}", "\u{3000}", "the",
        " the", "The", "THE", "tHe", "'s", "'S", "'ll", "’", "don't", "42", "1234567", "3.14", "-",
        "--", "!", "?", "...", "/", "//", "{", "}", "()", "=>", "::", "\"", "'", "#", "@", "é",
        "naïve", "Ж", "Привет", "мир", "中文", "日本", "한국", "مرحبا", "हिन्दी", "😀", "👨‍👩‍👧", "🇫🇷",
        "e\u{301}", "https://x.io/a?b=c", "snake_case", "camelCase", "SCREAMING", "x86_64",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..400)
        .map(|_| {
            let len = (next() % 60) as usize;
            (0..len).map(|_| fragments[(next() % fragments.len() as u64) as usize]).collect()
        })
        .collect()
}

fn assert_counts_equal(encoding: Encoding, reference: &tiktoken_rs::CoreBPE) {
    let samples: Vec<String> =
        fixed_samples().into_iter().chain(short_strings()).chain(random_mixes()).collect();
    let mismatches: Vec<String> = samples
        .iter()
        .filter_map(|text| {
            let ours = count_tokens(encoding, text);
            let theirs = reference.encode_ordinary(text).len();
            let shown: String = text.chars().take(80).collect();
            (ours != theirs)
                .then(|| format!("{shown:?} ({} bytes): ours {ours}, tiktoken-rs {theirs}", text.len()))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{encoding}: {} of {} samples differ:\n{}",
        mismatches.len(),
        samples.len(),
        mismatches.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn cl100k_base_counts_equal_tiktoken_rs() {
    assert_counts_equal(Encoding::Cl100kBase, &tiktoken_rs::cl100k_base().unwrap());
}

#[test]
fn o200k_base_counts_equal_tiktoken_rs() {
    assert_counts_equal(Encoding::O200kBase, &tiktoken_rs::o200k_base().unwrap());
}

/// `count_tokens_within` gives the count up to its limit and None one below it, on every sample.
#[test]
fn counts_within_a_limit_stop_past_it() {
    let samples: Vec<String> =
        fixed_samples().into_iter().chain(short_strings()).chain(random_mixes()).collect();
    for encoding in Encoding::ALL {
        for text in &samples {
            let count = count_tokens(encoding, text);
            assert_eq!(count_tokens_within(encoding, text, count), Some(count), "{encoding} {text:?}");
            assert_eq!(count_tokens_within(encoding, text, count + 1), Some(count), "{encoding} {text:?}");
            if count > 0 {
                assert_eq!(count_tokens_within(encoding, text, count - 1), None, "{encoding} {text:?}");
                assert_eq!(count_tokens_within(encoding, text, 0), None, "{encoding} {text:?}");
            }
        }
    }
}

#[test]
fn encoding_names_round_trip() {
    for name in ["cl100k_base", "o200k_base"] {
        assert_eq!(name.parse::<Encoding>().unwrap().as_str(), name);
    }
    assert_eq!("cl100k_base".parse::<Encoding>().unwrap(), Encoding::Cl100kBase);
    assert_eq!("o200k_base".parse::<Encoding>().unwrap(), Encoding::O200kBase);
}

#[test]
fn unknown_encoding_is_invalid_input() {
    for name in ["p50k_base", "", "CL100K_BASE", "o200k", "gpt-4o"] {
        let err = name.parse::<Encoding>().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}");
        assert!(err.message().contains("cl100k_base"), "{}", err.message());
    }
}
