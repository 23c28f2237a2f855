//! Precomputes the tables behind `memctl_core::count_tokens` so that loading an encoding at run
//! time costs well under a millisecond instead of tiktoken-rs's ~50–130 ms.
//!
//! For each of cl100k_base and o200k_base it writes to `OUT_DIR`:
//! - `<name>.vocab`: the BPE vocabulary taken from tiktoken-rs itself (so it is the reference's
//!   byte for byte), as an open-addressing hash table that `src/tokens.rs` reads in place, with
//!   the rank of every pair of bytes in a direct table;
//! - `<name>.dfa`: tiktoken's pre-tokenizer regex compiled to a serialized dense DFA, which
//!   `src/tokens.rs` validates and uses in place instead of compiling the regex (1–3 ms);
//! - `<name>.ascii.dfa`: the same regex cut down to ASCII (every class and literal left with
//!   what ASCII text can match), which splits ASCII text as the whole one does: a few kB to
//!   validate where the whole DFA's 1.6/2.8 MB take 0.3/0.6 ms;
//! - `<name>.latin.dfa`: the same cut down to the Latin letters and the common punctuation and
//!   symbols ([`LATIN`]), for the text that is not ASCII only for a curly quote, a dash, an
//!   accent or an arrow: 67/108 kB, validated in 16/30 µs.

use std::{
    env, fs,
    path::{Path, PathBuf},
};

use regex_automata::dfa::{dense, StartKind};
use regex_automata::nfa::thompson;
use regex_syntax::hir::{Capture, Class, ClassUnicode, ClassUnicodeRange};
use regex_syntax::hir::{Hir, HirKind, Repetition};

/// tiktoken's cl100k_base split pattern as tiktoken-rs 0.12 has it (possessive quantifiers and all):
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`.
/// The possessive quantifiers cannot change a match here (what they forbid giving back could never
/// let a later part match), so they are dropped. The tail `\s+(?!\S)|\s` becomes the separate
/// pattern `\s+`, whose match `src/tokens.rs` shortens by one character when it is not at the
/// end of the text, which is exactly what the look-ahead does.
const CL100K_PATTERN: &str =
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]";

/// tiktoken's o200k_base split pattern (tiktoken-rs `O200K_BASE_PAT_STR`) without its tail
/// `\s+(?!\S)|\s+`, handled as for cl100k_base.
const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+",
);

/// The characters of `<name>.latin.dfa`: Basic Latin to Latin Extended-B, and General
/// Punctuation to Miscellaneous Symbols and Arrows. Must match `src/tokens.rs`.
const LATIN: [(char, char); 2] = [('\0', '\u{24f}'), ('\u{2000}', '\u{2bff}')];

/// Bits of a hash slot that hold `rank + 1` (0 marks an empty slot); the other 14 hold a
/// fingerprint of the token's hash. Must match `src/tokens.rs`.
const RANK_BITS: u32 = 18;

/// Entries of the pair table: one per pair of bytes. Must match `src/tokens.rs`.
const PAIRS: usize = 1 << 16;

/// FNV-1a folded to mix the high bits into the low ones. Must match `src/tokens.rs`.
fn token_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (h >> 32)
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let big_endian = env::var("CARGO_CFG_TARGET_ENDIAN").as_deref() == Ok("big");

    let cl100k = tiktoken_rs::cl100k_base().expect("tiktoken-rs builds cl100k_base");
    write_vocab(&out.join("cl100k_base.vocab"), &cl100k, 100_256);
    write_dfas(&out, "cl100k_base", CL100K_PATTERN, big_endian);
    drop(cl100k);

    let o200k = tiktoken_rs::o200k_base().expect("tiktoken-rs builds o200k_base");
    write_vocab(&out.join("o200k_base.vocab"), &o200k, 199_998);
    write_dfas(&out, "o200k_base", O200K_PATTERN, big_endian);
}

/// Layout, all integers u32 little-endian: `n`, `slot_bits`, `max_token_len`, then `n + 1` offsets
/// into the token bytes (rank order), then `1 << slot_bits` slots, then the rank of every pair of
/// bytes as one token (`u32::MAX` if none; 65,536, indexed by `first << 8 | second`: the merges
/// look up a pair for every byte of a piece), then the token bytes.
fn write_vocab(path: &Path, bpe: &tiktoken_rs::CoreBPE, expected: usize) {
    // Ordinary ranks are 0..n with no gap; the special tokens come after and are left out.
    let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(expected);
    while let Ok(bytes) = bpe.decode_bytes(&[tokens.len() as u32]) {
        tokens.push(bytes);
    }
    assert_eq!(tokens.len(), expected, "unexpected vocabulary size");
    assert!(tokens.len() < (1 << RANK_BITS) - 1);
    let n = tokens.len();

    let slot_bits = (2 * n).next_power_of_two().trailing_zeros();
    let mask = (1usize << slot_bits) - 1;
    let mut slots = vec![0u32; 1 << slot_bits];
    for (rank, token) in tokens.iter().enumerate() {
        let h = token_hash(token);
        let fingerprint = (h >> 46) as u32 & ((1 << (32 - RANK_BITS)) - 1);
        let mut i = h as usize & mask;
        while slots[i] != 0 {
            let other = (slots[i] & ((1 << RANK_BITS) - 1)) as usize - 1;
            assert_ne!(tokens[other], *token, "duplicate token");
            i = (i + 1) & mask;
        }
        slots[i] = (fingerprint << RANK_BITS) | (rank as u32 + 1);
    }
    let single_bytes = tokens.iter().filter(|t| t.len() == 1).count();
    assert_eq!(single_bytes, 256, "every byte must be a token");
    let max_len = tokens.iter().map(Vec::len).max().unwrap_or(0);

    let mut pairs = vec![u32::MAX; PAIRS];
    for (rank, token) in tokens.iter().enumerate() {
        if let [first, second] = token[..] {
            pairs[usize::from(first) << 8 | usize::from(second)] = rank as u32;
        }
    }

    let total: usize = tokens.iter().map(Vec::len).sum();
    let mut data = Vec::with_capacity(12 + 4 * (n + 1) + 4 * (slots.len() + pairs.len()) + total);
    for word in [n as u32, slot_bits, max_len as u32] {
        data.extend_from_slice(&word.to_le_bytes());
    }
    let mut offset = 0u32;
    data.extend_from_slice(&offset.to_le_bytes());
    for token in &tokens {
        offset += token.len() as u32;
        data.extend_from_slice(&offset.to_le_bytes());
    }
    for word in slots.iter().chain(&pairs) {
        data.extend_from_slice(&word.to_le_bytes());
    }
    for token in &tokens {
        data.extend_from_slice(token);
    }
    fs::write(path, data).expect("write vocabulary table");
}

/// Writes `<name>.dfa`, whose pattern 0 is the split pattern and pattern 1 `\s+` (leftmost-first
/// priority between them is that of the alternation they stand for; only anchored searches are
/// needed), and `<name>.ascii.dfa` and `<name>.latin.dfa`, the same patterns as parsed cut down
/// to ASCII or to [`LATIN`] ([`cut_to`]): on text of those characters a match never takes a
/// branch that needs another, so it finds the same matches, with the same priorities.
fn write_dfas(out: &Path, name: &str, pattern: &str, big_endian: bool) {
    let parse = |p: &str| regex_syntax::parse(p).expect("split pattern parses");
    let hirs = [parse(pattern), parse(r"\s+")];
    write_dfa(&out.join(format!("{name}.dfa")), &hirs, big_endian);
    let ranges = |ranges: &[(char, char)]| {
        ClassUnicode::new(ranges.iter().map(|&(first, last)| ClassUnicodeRange::new(first, last)))
    };
    for (cut, keep) in [("ascii", ranges(&[('\0', '\x7f')])), ("latin", ranges(&LATIN))] {
        let cut_hirs = hirs.each_ref().map(|hir| cut_to(hir, &keep));
        write_dfa(&out.join(format!("{name}.{cut}.dfa")), &cut_hirs, big_endian);
    }
}

/// Compiles `hirs` as `dense::Builder::build_many` compiles patterns (no captures: a DFA has
/// none) into a DFA for anchored searches, and writes it.
fn write_dfa(path: &Path, hirs: &[Hir], big_endian: bool) {
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().which_captures(thompson::WhichCaptures::None))
        .build_many_from_hir(hirs)
        .expect("split pattern compiles");
    let dfa = dense::Builder::new()
        .configure(dense::Config::new().start_kind(StartKind::Anchored))
        .build_from_nfa(&nfa)
        .expect("split DFA builds");
    let (bytes, pad) = if big_endian { dfa.to_bytes_big_endian() } else { dfa.to_bytes_little_endian() };
    fs::write(path, &bytes[pad..]).expect("write split DFA");
}

/// `hir` with every class cut down to its members in `keep` and every literal with a character
/// outside it made a failure: what can still match text of `keep`'s characters, and all of it.
fn cut_to(hir: &Hir, keep: &ClassUnicode) -> Hir {
    let cut = |sub: &Hir| Box::new(cut_to(sub, keep));
    let kept = |c: char| keep.ranges().iter().any(|range| range.start() <= c && c <= range.end());
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => hir.clone(),
        HirKind::Literal(literal) => {
            // Like a byte class, a literal that is not UTF-8 could match inside a character.
            let text = std::str::from_utf8(&literal.0).expect("the split patterns' literals are UTF-8");
            if text.chars().all(kept) {
                hir.clone()
            } else {
                Hir::fail()
            }
        }
        HirKind::Class(Class::Unicode(class)) => {
            let mut class = class.clone();
            class.intersect(keep);
            Hir::class(Class::Unicode(class))
        }
        // A byte class could match inside a character's encoding; the split patterns have none.
        HirKind::Class(Class::Bytes(_)) => panic!("the split patterns have no byte classes"),
        HirKind::Repetition(Repetition { min, max, greedy, sub }) => {
            Hir::repetition(Repetition { min: *min, max: *max, greedy: *greedy, sub: cut(sub) })
        }
        HirKind::Capture(Capture { index, name, sub }) => {
            Hir::capture(Capture { index: *index, name: name.clone(), sub: cut(sub) })
        }
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(|part| cut_to(part, keep)).collect()),
        HirKind::Alternation(branches) => {
            Hir::alternation(branches.iter().map(|branch| cut_to(branch, keep)).collect())
        }
    }
}
