//! Token counts exact to OpenAI's tiktoken (as tiktoken-rs 0.12 computes them with
//! `encode_ordinary`) for cl100k_base and o200k_base, to pack a prompt within a token budget.
//!
//! Why not tiktoken-rs or bpe-openai at run time: both build their encoder on first use, measured
//! (release) at ~51/128 ms (tiktoken-rs) and ~18/44 ms (bpe-openai) per process for cl100k/o200k,
//! against ~2.5 ms for a whole CLI call. Here `build.rs` precomputes everything from tiktoken-rs's
//! own vocabulary: a hash table read in place from the binary (and a direct table of the byte
//! pairs, which every merge looks up first), and the split regex as a serialized DFA that only
//! needs validating. The whole DFA is large (1.6/2.8 MB, 0.3/0.6 ms to validate, most of the
//! first count in a process), so build.rs also cuts the same patterns down to ASCII (8/10 kB)
//! and to the Latin letters with the common punctuation and symbols ([`LATIN`]: 67/108 kB,
//! 16/30 µs): ASCII text, and text that is not ASCII only for a curly quote, a dash, an accent or
//! an arrow, never load the whole DFA. Counting a 4,000-char text of the docs in a fresh process
//! (a dash or an ellipsis in it) went from 1.88/2.18 ms to 1.52/1.53 ms with the Latin cut.
//! Counting is tiktoken's own algorithm: the same split, then the same byte-pair merges (lowest
//! rank first, leftmost on ties) on each piece.
//! `tests/engine/tokens.rs` checks the counts against tiktoken-rs.
//!
//! Special-token strings such as `<|endoftext|>` are counted as plain text, like
//! `encode_ordinary` does: memory text is never meant to contain control tokens.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::str::FromStr;
use std::sync::{LazyLock, OnceLock};

use regex_automata::dfa::{dense, Automaton};
use regex_automata::{Anchored, PatternID};

/// A tiktoken encoding whose token counts [`count_tokens`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4, GPT-3.5-turbo and the text-embedding-3 models.
    Cl100kBase,
    /// GPT-4o, GPT-4.1, GPT-5 and the o-series models.
    O200kBase,
}

impl Encoding {
    pub const ALL: [Encoding; 2] = [Encoding::Cl100kBase, Encoding::O200kBase];

    /// The name tiktoken gives the encoding.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Encoding {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Encoding::ALL.into_iter().find(|e| e.as_str() == s).ok_or_else(|| {
            crate::error::Error::invalid(format!(
                "unknown token encoding {s:?}: expected cl100k_base or o200k_base"
            ))
        })
    }
}

/// The number of tokens `text` encodes to, equal to tiktoken-rs's `encode_ordinary(text).len()`.
///
/// The encoding's tables are loaded on its first use in the process, and only then (an empty
/// text loads nothing); they stay loaded for the rest of the process.
pub fn count_tokens(encoding: Encoding, text: &str) -> usize {
    count_tokens_within(encoding, text, usize::MAX).expect("no count exceeds usize::MAX")
}

/// The number of tokens `text` encodes to if it is at most `limit`, else None. Counting stops
/// once past `limit`: fitting texts to a budget need not count the ones that cannot fit.
pub fn count_tokens_within(encoding: Encoding, text: &str, limit: usize) -> Option<usize> {
    if text.is_empty() {
        return Some(0);
    }
    let tokenizer: &Tokenizer = match encoding {
        Encoding::Cl100kBase => &CL100K_BASE,
        Encoding::O200kBase => &O200K_BASE,
    };
    tokenizer.count_within(text, limit)
}

/// A dense DFA is read in place as `u32`s, so its bytes must be 4-aligned, which
/// `include_bytes!` alone does not promise.
#[repr(C, align(4))]
struct Aligned<T: ?Sized>(T);

/// The tables build.rs wrote for one encoding, embedded in the binary.
macro_rules! tokenizer {
    ($name:literal) => {
        LazyLock::new(|| {
            static WHOLE_DFA: &Aligned<[u8]> =
                &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".dfa")));
            static LATIN_DFA: &Aligned<[u8]> =
                &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".latin.dfa")));
            static ASCII_DFA: &Aligned<[u8]> =
                &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".ascii.dfa")));
            Tokenizer {
                vocab: Vocab::new(include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".vocab"))),
                splits: [&ASCII_DFA.0, &LATIN_DFA.0, &WHOLE_DFA.0]
                    .map(|bytes| Split { bytes, dfa: OnceLock::new() }),
            }
        })
    };
}

static CL100K_BASE: LazyLock<Tokenizer> = tokenizer!("cl100k_base");
static O200K_BASE: LazyLock<Tokenizer> = tokenizer!("o200k_base");

/// The characters of the Latin split DFA: Basic Latin to Latin Extended-B, and General
/// Punctuation to Miscellaneous Symbols and Arrows. Must match build.rs.
const LATIN: [(char, char); 2] = [('\0', '\u{24f}'), ('\u{2000}', '\u{2bff}')];

fn is_latin(c: char) -> bool {
    LATIN.iter().any(|&(first, last)| first <= c && c <= last)
}

/// Bits of a hash slot that hold `rank + 1` (0 marks an empty slot); the other 14 hold a
/// fingerprint of the token's hash, so a probe rarely has to compare bytes. Must match build.rs.
const RANK_BITS: u32 = 18;
const RANK_MASK: u32 = (1 << RANK_BITS) - 1;

/// Entries of the pair table: one per pair of bytes. Must match build.rs.
const PAIRS: usize = 1 << 16;

/// FNV-1a folded to mix the high bits into the low ones. Must match build.rs.
fn token_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (h >> 32)
}

fn read_u32(bytes: &[u8], index: usize) -> u32 {
    let at = index * 4;
    // One bounds check for the four bytes (indexing each byte checks each).
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("a 4-byte slice"))
}

struct Tokenizer {
    vocab: Vocab,
    /// The split DFAs (pattern 0: tiktoken's split pattern without its whitespace tail; pattern
    /// 1: `\s+`): cut down to ASCII, cut down to [`LATIN`] (build.rs), and whole. A cut one
    /// splits text of its characters as the whole one does, and is a fraction of its size to
    /// validate; the whole one (1.6/2.8 MB) is validated only for text that needs it.
    splits: [Split; 3],
}

/// A split DFA build.rs wrote, validated on first use (by `from_bytes`, rather than trusted
/// unsafely).
struct Split {
    bytes: &'static [u8],
    dfa: OnceLock<dense::DFA<&'static [u32]>>,
}

impl Split {
    fn dfa(&self) -> &dense::DFA<&'static [u32]> {
        self.dfa.get_or_init(|| {
            dense::DFA::from_bytes(self.bytes).expect("build.rs wrote a DFA for this target").0
        })
    }
}

impl Tokenizer {
    /// The smallest DFA that splits `text` as the whole one does.
    fn split_for(&self, text: &str) -> &dense::DFA<&'static [u32]> {
        self.splits_for(text).next().expect("the whole DFA splits any text").dfa()
    }

    /// The DFAs that split `text` as the whole one does, smallest first (each character set
    /// tested only if the smaller ones fail).
    fn splits_for<'s, 't>(&'s self, text: &'t str) -> impl Iterator<Item = &'s Split> + use<'s, 't> {
        let holds: [fn(&str) -> bool; 3] = [str::is_ascii, |text| text.chars().all(is_latin), |_| true];
        self.splits.iter().zip(holds).filter(move |(_, holds)| holds(text)).map(|(split, _)| split)
    }

    fn count_within(&self, text: &str, limit: usize) -> Option<usize> {
        let split = self.split_for(text);
        let bytes = text.as_bytes();
        let mut parts = Vec::new();
        let mut count = 0;
        let mut start = 0;
        while start < bytes.len() {
            // Every character starts a piece: a letter, a digit, whitespace or anything else.
            let (mut end, pattern) =
                piece_end(split, bytes, start).expect("the split pattern matches at every character");
            if pattern.as_usize() == 1 && end < bytes.len() {
                // tiktoken's `\s+(?!\S)|\s`: a run of whitespace followed by a non-space leaves its
                // last character to start the next piece, unless it has only one.
                let last = text[start..end].chars().next_back().map_or(1, char::len_utf8);
                if end - last > start {
                    end -= last;
                }
            }
            count += self.vocab.count_piece(&bytes[start..end], &mut parts);
            if count > limit {
                return None;
            }
            start = end;
        }
        Some(count)
    }
}

/// Where the split pattern's anchored match at `start` ends, and which pattern matched: what
/// `try_search_fwd` finds, stepping the DFA by hand. A piece is a few bytes long, and the search
/// API's setup for each (the input's checks, the start state from the byte before) cost more
/// than stepping through it. The patterns look at nothing before a piece, so every piece starts
/// from the one anchored start state, and they match no empty text, so no empty match needs
/// skipping (both checked by `the_cut_dfas_are_the_whole_ones_on_their_text`).
fn piece_end(dfa: &dense::DFA<&'static [u32]>, bytes: &[u8], start: usize) -> Option<(usize, PatternID)> {
    let mut state = dfa.universal_start_state(Anchored::Yes).expect("the split patterns have no look-behind");
    let mut found = None;
    for (at, &byte) in bytes.iter().enumerate().skip(start) {
        state = dfa.next_state(state, byte);
        if dfa.is_special_state(state) {
            // A match state shows, one byte late, a match that ended before this byte.
            if dfa.is_match_state(state) {
                found = Some((at, dfa.match_pattern(state, 0)));
            } else if dfa.is_dead_state(state) {
                return found;
            }
            assert!(!dfa.is_quit_state(state), "the split DFAs quit on no byte");
        }
    }
    state = dfa.next_eoi_state(state);
    if dfa.is_match_state(state) {
        found = Some((bytes.len(), dfa.match_pattern(state, 0)));
    }
    found
}

/// The vocabulary table written by build.rs, read in place: header (`n`, `slot_bits`,
/// `max_token_len`), `n + 1` token offsets in rank order, the hash slots, the rank of every
/// pair of bytes, then the token bytes.
struct Vocab {
    offsets: &'static [u8],
    slots: &'static [u8],
    pairs: &'static [u8],
    tokens: &'static [u8],
    mask: usize,
    max_token_len: usize,
}

impl Vocab {
    fn new(data: &'static [u8]) -> Vocab {
        let n = read_u32(data, 0) as usize;
        let slot_count = 1usize << read_u32(data, 1);
        let max_token_len = read_u32(data, 2) as usize;
        let (_, rest) = data.split_at(12);
        let (offsets, rest) = rest.split_at(4 * (n + 1));
        let (slots, rest) = rest.split_at(4 * slot_count);
        let (pairs, tokens) = rest.split_at(4 * PAIRS);
        Vocab { offsets, slots, pairs, tokens, mask: slot_count - 1, max_token_len }
    }

    fn token(&self, rank: u32) -> &'static [u8] {
        let rank = rank as usize;
        &self.tokens[read_u32(self.offsets, rank) as usize..read_u32(self.offsets, rank + 1) as usize]
    }

    /// The rank of `bytes` as one token, `u32::MAX` if it is none (tiktoken's convention).
    fn rank(&self, bytes: &[u8]) -> u32 {
        match *bytes {
            [first, second] => read_u32(self.pairs, usize::from(first) << 8 | usize::from(second)),
            _ => self.hashed_rank(bytes),
        }
    }

    /// The rank of `bytes` as one token, from the hash slots.
    fn hashed_rank(&self, bytes: &[u8]) -> u32 {
        if bytes.len() > self.max_token_len {
            return u32::MAX;
        }
        let h = token_hash(bytes);
        let fingerprint = (h >> 46) as u32 & (u32::MAX >> RANK_BITS);
        let mut i = h as usize & self.mask;
        loop {
            let slot = read_u32(self.slots, i);
            if slot == 0 {
                return u32::MAX;
            }
            if slot >> RANK_BITS == fingerprint {
                let rank = (slot & RANK_MASK) - 1;
                if self.token(rank) == bytes {
                    return rank;
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Tokens in one pre-tokenized piece: tiktoken's `byte_pair_encode`, counting only.
    fn count_piece(&self, piece: &[u8], parts: &mut Vec<(usize, u32)>) -> usize {
        // Every single byte is a token (build.rs checks it).
        if piece.len() == 1 || self.rank(piece) != u32::MAX {
            1
        } else if piece.len() < 100 {
            self.merge_small(piece, parts)
        } else {
            self.merge_large(piece)
        }
    }

    /// tiktoken's `_byte_pair_merge`: O(n·m), fastest for the short pieces that are the norm.
    fn merge_small(&self, piece: &[u8], parts: &mut Vec<(usize, u32)>) -> usize {
        parts.clear();
        let mut min_rank = (u32::MAX, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank < min_rank.0 {
                min_rank = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));

        let get_rank = |parts: &Vec<(usize, u32)>, i: usize| {
            if i + 3 < parts.len() {
                self.rank(&piece[parts[i].0..parts[i + 3].0])
            } else {
                u32::MAX
            }
        };
        while min_rank.0 != u32::MAX {
            let i = min_rank.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(parts, i - 1);
            }
            parts[i].1 = get_rank(parts, i);
            parts.remove(i + 1);

            min_rank = (u32::MAX, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min_rank.0 {
                    min_rank = (rank, i);
                }
            }
        }
        parts.len() - 1
    }

    /// tiktoken's `_byte_pair_merge_large`: the same merges in O(m log n) with a heap, for long
    /// pieces such as whitespace runs or unbroken strings that would make the scan quadratic.
    fn merge_large(&self, piece: &[u8]) -> usize {
        struct State {
            prev: usize,
            end: usize,
            next_end: usize,
            next_rank: u32,
        }
        // Max-heap on (reversed rank, reversed start): the lowest rank, leftmost first.
        let mut heap = BinaryHeap::with_capacity(piece.len());
        let mut state = Vec::with_capacity(piece.len());
        state.push(State { prev: usize::MAX, end: 1, next_end: 2, next_rank: u32::MAX });
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank != u32::MAX {
                heap.push((Reverse(rank), Reverse(i)));
                state[i].next_rank = rank;
            }
            state.push(State { prev: i, end: i + 2, next_end: i + 3, next_rank: u32::MAX });
        }

        let potential_merge = |state: &mut Vec<State>,
                               heap: &mut BinaryHeap<(Reverse<u32>, Reverse<usize>)>,
                               start: usize,
                               next_end: usize| {
            state[start].next_end = next_end;
            state[start].next_rank = u32::MAX;
            if next_end <= piece.len() {
                let rank = self.rank(&piece[start..next_end]);
                if rank != u32::MAX {
                    heap.push((Reverse(rank), Reverse(start)));
                    state[start].next_rank = rank;
                }
            }
        };

        while let Some((Reverse(rank), Reverse(left_start))) = heap.pop() {
            if rank != state[left_start].next_rank {
                continue; // invalidated by an earlier merge
            }
            let right_start = state[left_start].end;
            let right_end = state[left_start].next_end;
            let right_next_end = state[right_start].next_end;

            state[left_start].end = right_end;
            potential_merge(&mut state, &mut heap, left_start, right_next_end);
            if right_end < state.len() {
                state[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = state[left_start].prev;
                potential_merge(&mut state, &mut heap, prev_start, right_end);
            }
            state[right_start].next_rank = u32::MAX;
        }

        let mut count = 0;
        let mut i = 0;
        while i < state.len() {
            count += 1;
            i = state[i].end;
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use regex_automata::util::start;
    use regex_automata::Input;
    use std::collections::HashSet;

    type Dfa = dense::DFA<&'static [u32]>;

    /// What a search reads of a state: whether it is a match (and of which patterns), dead, or
    /// a quit.
    fn observed(dfa: &Dfa, state: regex_automata::util::primitives::StateID) -> (bool, bool, Vec<PatternID>) {
        let matches = if dfa.is_match_state(state) { dfa.match_len(state) } else { 0 };
        let patterns = (0..matches).map(|i| dfa.match_pattern(state, i)).collect();
        (dfa.is_dead_state(state), dfa.is_quit_state(state), patterns)
    }

    /// Walks a cut DFA and the whole one together from every anchored start (whatever
    /// character precedes it) over every character of `chars`, byte by byte, and at the end of
    /// the text: each pair of states reached reads the same to a search. So both split every
    /// text of those characters alike.
    fn walk_together(whole: &Dfa, cut: &Dfa, chars: &[char]) -> usize {
        let encoded: Vec<Vec<u8>> = chars.iter().map(|c| c.to_string().into_bytes()).collect();
        let last_bytes: HashSet<u8> = encoded.iter().map(|bytes| bytes[bytes.len() - 1]).collect();
        let before = std::iter::once(None).chain(last_bytes.into_iter().map(Some));
        let starts = before.map(|byte| start::Config::new().anchored(Anchored::Yes).look_behind(byte));
        let mut todo: Vec<_> = starts
            .map(|config| (whole.start_state(&config).unwrap(), cut.start_state(&config).unwrap()))
            .collect();
        let mut seen: HashSet<_> = todo.iter().copied().collect();
        while let Some((w, c)) = todo.pop() {
            assert_eq!(observed(whole, w), observed(cut, c));
            let (w_end, c_end) = (whole.next_eoi_state(w), cut.next_eoi_state(c));
            assert_eq!(observed(whole, w_end), observed(cut, c_end));
            for bytes in &encoded {
                let mut next = (w, c);
                for &byte in bytes {
                    next = (whole.next_state(next.0, byte), cut.next_state(next.1, byte));
                    // A match shows one byte late: the byte after it may be a character's first.
                    assert_eq!(observed(whole, next.0), observed(cut, next.1), "{bytes:?}");
                }
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        seen.len()
    }

    fn latin_chars() -> Vec<char> {
        LATIN.iter().flat_map(|&(first, last)| first..=last).collect()
    }

    /// The ASCII and Latin DFAs are the whole ones on text of their characters, state for state.
    /// (And every DFA has what `piece_end` rests on: one anchored start state, no empty match.)
    #[test]
    fn the_cut_dfas_are_the_whole_ones_on_their_text() {
        for tokenizer in [&*CL100K_BASE, &*O200K_BASE] {
            let [ascii, latin, whole] = tokenizer.splits.each_ref().map(Split::dfa);
            for dfa in [ascii, latin, whole] {
                assert!(dfa.universal_start_state(Anchored::Yes).is_some() && !dfa.has_empty());
            }
            let ascii_chars: Vec<char> = ('\0'..='\x7f').collect();
            assert!(walk_together(whole, ascii, &ascii_chars) > 10);
            assert!(walk_together(whole, latin, &latin_chars()) > 10);
        }
    }

    /// From every character boundary in `text`, the whole DFA and `cut` find the same anchored
    /// match.
    fn same_matches(tokenizer: &Tokenizer, cut: &Split, text: &str) -> Result<(), TestCaseError> {
        let (whole, cut) = (tokenizer.splits[2].dfa(), cut.dfa());
        for start in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
            let input = Input::new(text).range(start..).anchored(Anchored::Yes);
            let expected = whole.try_search_fwd(&input).unwrap();
            prop_assert_eq!(cut.try_search_fwd(&input).unwrap(), expected, "{:?} from {}", text, start);
        }
        Ok(())
    }

    /// From every character boundary in `text`, `piece_end` finds what the search API finds, with
    /// every DFA that may split the text.
    fn pieces_end_as_searches_do(tokenizer: &Tokenizer, text: &str) -> Result<(), TestCaseError> {
        for split in tokenizer.splits_for(text) {
            let dfa = split.dfa();
            for start in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
                let input = Input::new(text).range(start..).anchored(Anchored::Yes);
                let searched = dfa.try_search_fwd(&input).unwrap().map(|m| (m.offset(), m.pattern()));
                prop_assert_eq!(
                    piece_end(dfa, text.as_bytes(), start),
                    searched,
                    "{:?} from {}",
                    text,
                    start
                );
            }
        }
        Ok(())
    }

    /// Which DFA splits which text.
    #[test]
    fn text_is_split_by_the_smallest_dfa_that_can() {
        let tokenizer = &*CL100K_BASE;
        let index = |text: &str| {
            let dfa = tokenizer.split_for(text) as *const Dfa;
            tokenizer.splits.iter().position(|split| std::ptr::eq(split.dfa(), dfa)).unwrap()
        };
        assert_eq!(index("plain text, 42"), 0);
        assert_eq!(index("it\u{2019}s caf\u{e9} \u{2014} a \u{2192} b \u{2264} c"), 1);
        assert_eq!(index("\u{24f}\u{2000}\u{2bff}"), 1);
        assert_eq!(index("\u{250}"), 2);
        assert_eq!(index("\u{1fff} \u{2c00}"), 2);
        assert_eq!(index("Привет"), 2);
        assert_eq!(index("👍"), 2);
    }

    /// The pair table holds the rank the hash slots give every pair of bytes.
    #[test]
    fn the_pair_table_holds_the_rank_of_every_pair() {
        for tokenizer in [&*CL100K_BASE, &*O200K_BASE] {
            let vocab = &tokenizer.vocab;
            let mut tokens = 0;
            for pair in 0..=u16::MAX {
                let bytes = pair.to_be_bytes();
                assert_eq!(vocab.rank(&bytes), vocab.hashed_rank(&bytes), "{bytes:?}");
                tokens += usize::from(vocab.rank(&bytes) != u32::MAX);
            }
            assert!(tokens > 1000, "only {tokens} pairs are tokens");
        }
    }

    proptest! {
        /// The same through the search itself, on ASCII text of any of its 128 characters.
        #[test]
        fn the_ascii_dfas_split_ascii_text_as_the_whole_ones_do(text in "[\\x00-\\x7f]{0,64}") {
            same_matches(&CL100K_BASE, &CL100K_BASE.splits[0], &text)?;
            same_matches(&O200K_BASE, &O200K_BASE.splits[0], &text)?;
        }

        /// And on text of the Latin DFA's characters, mostly ASCII as such text is.
        #[test]
        fn the_latin_dfas_split_latin_text_as_the_whole_ones_do(
            text in prop::collection::vec(
                prop_oneof![3 => prop::char::range('\0', '\x7f'), 1 => prop::sample::select(latin_chars())],
                0..64,
            )
        ) {
            let text: String = text.into_iter().collect();
            same_matches(&CL100K_BASE, &CL100K_BASE.splits[1], &text)?;
            same_matches(&O200K_BASE, &O200K_BASE.splits[1], &text)?;
        }

        /// `piece_end` against the search API, on text of any characters, of mostly ASCII ones,
        /// and of the Latin DFA's.
        #[test]
        fn pieces_end_where_the_search_api_finds_it(
            text in prop_oneof![
                "\\PC{0,40}",
                "[ \\t\\r\\na-zA-Z0-9'.,;!?()\\-]{0,40}",
                prop::collection::vec(prop::sample::select(latin_chars()), 0..40).prop_map(String::from_iter),
            ]
        ) {
            pieces_end_as_searches_do(&CL100K_BASE, &text)?;
            pieces_end_as_searches_do(&O200K_BASE, &text)?;
        }
    }
}
