//! Search queries as words (SPEC §4.4). User text is split into words exactly the way the FTS5
//! `unicode61` tokenizer splits stored text, so every character is a valid query — quotes, `-`,
//! `:`, `AND`, `NEAR` — and the keyword fallback matches the same records FTS5 does.

use crate::error::Result;
use memchr::memmem::Finder;
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::collections::HashSet;

/// English stop words dropped from queries (unless a query has nothing else).
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "up", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would", "you",
    "your", // What is left of contractions once the apostrophe splits them: what's, don't, we'll.
    "s", "t", "d", "ll", "m", "re", "ve",
];

/// Folded words of `text`: maximal runs of letters, digits and combining marks — the token
/// characters of the FTS5 index (`unicode61`, categories `L* N* Co M*`).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty()).map(|w| w.chars().map(fold).collect())
}

/// The longest word PostgreSQL keeps in a `tsvector` (bytes), and a bound on a record's words
/// in all, well inside its 1 MiB `tsvector`.
const MAX_INDEXED_WORD: usize = 2046;
const MAX_INDEXED_BYTES: usize = 512 * 1024;

/// The words a record of branch `bid` is found by on PostgreSQL, its `words` index entry: every
/// distinct word of `haystacks` (its text and stored tags), split and folded as the FTS5 index
/// and the keyword search split them, and its branch (see [`branch_entry`]). When a word is
/// longer than an index entry holds, or the words are too many, [`UNINDEXED`] stands for them:
/// such a record is a candidate for every search of its branch.
pub fn index_words(haystacks: &[&str], bid: i64) -> Vec<String> {
    let distinct: std::collections::BTreeSet<String> = haystacks.iter().flat_map(|h| words(h)).collect();
    let bytes: usize = distinct.iter().map(|w| w.len() + 8).sum();
    let mut entry: Vec<String> =
        if bytes > MAX_INDEXED_BYTES || distinct.iter().any(|w| w.len() > MAX_INDEXED_WORD) {
            vec![UNINDEXED.to_string()]
        } else {
            distinct.into_iter().collect()
        };
    entry.push(branch_entry(bid));
    entry
}

/// The index entry of records whose words it cannot hold; every search asks for it too. No
/// word is equal to it, nor to a branch's entry: `~` separates words.
pub const UNINDEXED: &str = "~unindexed~";

/// The index entry naming a record's branch: a search asks for its words AND one of the path's
/// branches, so the index yields the matches of the view's branches only, as FTS5's branch
/// column does on SQLite.
fn branch_entry(bid: i64) -> String {
    format!("~b{bid}~")
}

/// How many words `haystacks` hold in all, as the FTS5 index splits them: a record's length for
/// bm25, stored with it (`archival.tokens`) so a search reads it with the row's seq. Counts what
/// [`TermCounter`] counts.
pub fn token_count(haystacks: &[&str]) -> u32 {
    let words = |h: &&str| match h.is_ascii() {
        true => ascii_word_count(h.as_bytes()),
        false => h.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty()).count() as u32,
    };
    haystacks.iter().map(words).sum()
}

/// The token characters of FTS5's `unicode61` with categories `L* N* Co M*`: letters, digits,
/// private-use characters and marks. Rust's alphanumerics are letters and digits plus the
/// letter-like symbols of Unicode's Other_Alphabetic (circled and squared Latin letters), which
/// FTS5 treats as separators; marks that are not alphabetic are listed below.
fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    (c.is_alphanumeric() && !is_letter_symbol(c)) || is_private_use(c) || is_mark(c)
}

/// Circled and squared Latin letters (category So, yet alphabetic to Rust).
fn is_letter_symbol(c: char) -> bool {
    matches!(c, '\u{24B6}'..='\u{24E9}' | '\u{1F130}'..='\u{1F149}' | '\u{1F150}'..='\u{1F169}' | '\u{1F170}'..='\u{1F189}')
}

fn is_private_use(c: char) -> bool {
    matches!(c, '\u{E000}'..='\u{F8FF}' | '\u{F0000}'..='\u{FFFFD}' | '\u{100000}'..='\u{10FFFD}')
}

fn is_mark(c: char) -> bool {
    in_ranges(MARKS, c)
}

/// The marks (categories Mn, Mc, Me; Unicode 14) that Rust does not count as alphabetic:
/// combining accents, viramas, Hebrew and Arabic points, variation selectors…
const MARKS: &[(u32, u32)] = &[
    (0x0300, 0x0344),
    (0x0346, 0x0362),
    (0x0483, 0x0489),
    (0x0591, 0x05AF),
    (0x0658, 0x0658),
    (0x06DF, 0x06E0),
    (0x06EA, 0x06EC),
    (0x0740, 0x074A),
    (0x07EB, 0x07F3),
    (0x07FD, 0x07FD),
    (0x0818, 0x0819),
    (0x082D, 0x082D),
    (0x0859, 0x085B),
    (0x0898, 0x089F),
    (0x08CA, 0x08D3),
    (0x08E0, 0x08E1),
    (0x08EA, 0x08EF),
    (0x093C, 0x093C),
    (0x094D, 0x094D),
    (0x0951, 0x0954),
    (0x09BC, 0x09BC),
    (0x09CD, 0x09CD),
    (0x09FE, 0x09FE),
    (0x0A3C, 0x0A3C),
    (0x0A4D, 0x0A4D),
    (0x0ABC, 0x0ABC),
    (0x0ACD, 0x0ACD),
    (0x0AFD, 0x0AFF),
    (0x0B3C, 0x0B3C),
    (0x0B4D, 0x0B4D),
    (0x0B55, 0x0B55),
    (0x0BCD, 0x0BCD),
    (0x0C3C, 0x0C3C),
    (0x0C4D, 0x0C4D),
    (0x0CBC, 0x0CBC),
    (0x0CCD, 0x0CCD),
    (0x0D3B, 0x0D3C),
    (0x0D4D, 0x0D4D),
    (0x0DCA, 0x0DCA),
    (0x0E47, 0x0E4C),
    (0x0E4E, 0x0E4E),
    (0x0EBA, 0x0EBA),
    (0x0EC8, 0x0ECC),
    (0x0F18, 0x0F19),
    (0x0F35, 0x0F35),
    (0x0F37, 0x0F37),
    (0x0F39, 0x0F39),
    (0x0F3E, 0x0F3F),
    (0x0F84, 0x0F84),
    (0x0F86, 0x0F87),
    (0x0FC6, 0x0FC6),
    (0x1037, 0x1037),
    (0x1039, 0x103A),
    (0x135D, 0x135F),
    (0x1714, 0x1715),
    (0x1734, 0x1734),
    (0x17B4, 0x17B5),
    (0x17C9, 0x17D3),
    (0x17DD, 0x17DD),
    (0x180B, 0x180D),
    (0x180F, 0x180F),
    (0x1939, 0x193B),
    (0x1A60, 0x1A60),
    (0x1A75, 0x1A7C),
    (0x1A7F, 0x1A7F),
    (0x1AB0, 0x1ABE),
    (0x1AC1, 0x1ACB),
    (0x1B34, 0x1B34),
    (0x1B44, 0x1B44),
    (0x1B6B, 0x1B73),
    (0x1BAA, 0x1BAB),
    (0x1BE6, 0x1BE6),
    (0x1BF2, 0x1BF3),
    (0x1C37, 0x1C37),
    (0x1CD0, 0x1CD2),
    (0x1CD4, 0x1CE8),
    (0x1CED, 0x1CED),
    (0x1CF4, 0x1CF4),
    (0x1CF7, 0x1CF9),
    (0x1DC0, 0x1DD2),
    (0x1DF5, 0x1DFF),
    (0x20D0, 0x20F0),
    (0x2CEF, 0x2CF1),
    (0x2D7F, 0x2D7F),
    (0x302A, 0x302F),
    (0x3099, 0x309A),
    (0xA66F, 0xA672),
    (0xA67C, 0xA67D),
    (0xA6F0, 0xA6F1),
    (0xA806, 0xA806),
    (0xA82C, 0xA82C),
    (0xA8C4, 0xA8C4),
    (0xA8E0, 0xA8F1),
    (0xA92B, 0xA92D),
    (0xA953, 0xA953),
    (0xA9B3, 0xA9B3),
    (0xA9C0, 0xA9C0),
    (0xAABF, 0xAABF),
    (0xAAC1, 0xAAC1),
    (0xAAF6, 0xAAF6),
    (0xABEC, 0xABED),
    (0xFE00, 0xFE0F),
    (0xFE20, 0xFE2F),
    (0x101FD, 0x101FD),
    (0x102E0, 0x102E0),
    (0x10A38, 0x10A3A),
    (0x10A3F, 0x10A3F),
    (0x10AE5, 0x10AE6),
    (0x10F46, 0x10F50),
    (0x10F82, 0x10F85),
    (0x11046, 0x11046),
    (0x11070, 0x11070),
    (0x1107F, 0x1107F),
    (0x110B9, 0x110BA),
    (0x11133, 0x11134),
    (0x11173, 0x11173),
    (0x111C0, 0x111C0),
    (0x111C9, 0x111CC),
    (0x11235, 0x11236),
    (0x112E9, 0x112EA),
    (0x1133B, 0x1133C),
    (0x1134D, 0x1134D),
    (0x11366, 0x1136C),
    (0x11370, 0x11374),
    (0x11442, 0x11442),
    (0x11446, 0x11446),
    (0x1145E, 0x1145E),
    (0x114C2, 0x114C3),
    (0x115BF, 0x115C0),
    (0x1163F, 0x1163F),
    (0x116B6, 0x116B7),
    (0x1172B, 0x1172B),
    (0x11839, 0x1183A),
    (0x1193D, 0x1193E),
    (0x11943, 0x11943),
    (0x119E0, 0x119E0),
    (0x11A33, 0x11A34),
    (0x11A47, 0x11A47),
    (0x11A98, 0x11A99),
    (0x11C3F, 0x11C3F),
    (0x11D42, 0x11D42),
    (0x11D44, 0x11D45),
    (0x11D97, 0x11D97),
    (0x16AF0, 0x16AF4),
    (0x16B30, 0x16B36),
    (0x16FE4, 0x16FE4),
    (0x1BC9D, 0x1BC9D),
    (0x1CF00, 0x1CF2D),
    (0x1CF30, 0x1CF46),
    (0x1D165, 0x1D169),
    (0x1D16D, 0x1D172),
    (0x1D17B, 0x1D182),
    (0x1D185, 0x1D18B),
    (0x1D1AA, 0x1D1AD),
    (0x1D242, 0x1D244),
    (0x1DA00, 0x1DA36),
    (0x1DA3B, 0x1DA6C),
    (0x1DA75, 0x1DA75),
    (0x1DA84, 0x1DA84),
    (0x1DA9B, 0x1DA9F),
    (0x1DAA1, 0x1DAAF),
    (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE),
    (0x1E2EC, 0x1E2EF),
    (0x1E8D0, 0x1E8D6),
    (0x1E944, 0x1E946),
    (0x1E948, 0x1E94A),
    (0xE0100, 0xE01EF),
];

/// Case folding as `unicode61` does it: one character to one character, so a character whose
/// lower case is longer (`İ`) stays as it is. SQLite's fold table is its own: it folds a few
/// letter variants that have no lower case (`ſ`, `ς`, `ϐ`, …), and predates some case pairs,
/// whose capitals it leaves as they are (Cherokee, Georgian Mtavruli, newer Latin and Cyrillic
/// letters); the `words_split_and_fold_where_fts5_does` test holds the two tables to it.
fn fold(c: char) -> char {
    if let Ok(i) = FOLDS.binary_search_by_key(&c, |&(from, _)| from) {
        return FOLDS[i].1;
    }
    if in_ranges(UNFOLDED, c) {
        return c;
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(single), None) => single,
        _ => c,
    }
}

/// SQLite's folds that are not lower cases, by code point.
const FOLDS: &[(char, char)] = &[
    ('µ', 'μ'),
    ('ſ', 's'),
    ('\u{345}', 'ι'),
    ('ς', 'σ'),
    ('ϐ', 'β'),
    ('ϑ', 'θ'),
    ('ϕ', 'φ'),
    ('ϖ', 'π'),
    ('ϰ', 'κ'),
    ('ϱ', 'ρ'),
    ('ϵ', 'ε'),
    ('ẛ', 'ṡ'),
    ('\u{1FBE}', 'ι'),
];

/// Capitals SQLite's table does not fold.
const UNFOLDED: &[(u32, u32)] = &[
    (0x037F, 0x037F),
    (0x0528, 0x0528),
    (0x052A, 0x052A),
    (0x052C, 0x052C),
    (0x052E, 0x052E),
    (0x13A0, 0x13F5),
    (0x1C89, 0x1C89),
    (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF),
    (0x2C2F, 0x2C2F),
    (0xA698, 0xA698),
    (0xA69A, 0xA69A),
    (0xA796, 0xA796),
    (0xA798, 0xA798),
    (0xA79A, 0xA79A),
    (0xA79C, 0xA79C),
    (0xA79E, 0xA79E),
    (0xA7AB, 0xA7AE),
    (0xA7B0, 0xA7B4),
    (0xA7B6, 0xA7B6),
    (0xA7B8, 0xA7B8),
    (0xA7BA, 0xA7BA),
    (0xA7BC, 0xA7BC),
    (0xA7BE, 0xA7BE),
    (0xA7C0, 0xA7C0),
    (0xA7C2, 0xA7C2),
    (0xA7C4, 0xA7C7),
    (0xA7C9, 0xA7C9),
    (0xA7CB, 0xA7CC),
    (0xA7CE, 0xA7CE),
    (0xA7D0, 0xA7D0),
    (0xA7D2, 0xA7D2),
    (0xA7D4, 0xA7D4),
    (0xA7D6, 0xA7D6),
    (0xA7D8, 0xA7D8),
    (0xA7DA, 0xA7DA),
    (0xA7DC, 0xA7DC),
    (0xA7F5, 0xA7F5),
    (0x104B0, 0x104D3),
    (0x10570, 0x1057A),
    (0x1057C, 0x1058A),
    (0x1058C, 0x10592),
    (0x10594, 0x10595),
    (0x10C80, 0x10CB2),
    (0x10D50, 0x10D65),
    (0x118A0, 0x118BF),
    (0x16E40, 0x16E5F),
    (0x16EA0, 0x16EB8),
    (0x1E900, 0x1E921),
];

/// Whether `c` lies in one of the sorted, disjoint inclusive `ranges`.
fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    ranges
        .binary_search_by(|&(low, high)| {
            if high < c {
                Ordering::Less
            } else if low > c {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_ok()
}

/// A parsed search query: the distinct words to look for.
#[derive(Debug, Clone)]
pub struct Query {
    words: Vec<String>,
    /// A searcher for each ASCII word, for ASCII text (see [`TermCounter`]).
    ascii_finders: Vec<Option<Finder<'static>>>,
    blank: bool,
}

impl Query {
    pub fn parse(text: &str) -> Query {
        let mut seen = HashSet::new();
        let all: Vec<String> = words(text).filter(|w| seen.insert(w.clone())).collect();
        let content: Vec<String> =
            all.iter().filter(|w| !STOP_WORDS.contains(&w.as_str())).cloned().collect();
        // A query made only of stop words ("and or not") still means those words.
        let words = if content.is_empty() { all } else { content };
        let ascii_finders =
            words.iter().map(|w| w.is_ascii().then(|| Finder::new(w.as_bytes()).into_owned())).collect();
        Query { blank: text.trim().is_empty(), words, ascii_finders }
    }

    /// An empty query lists instead of searching.
    pub fn is_blank(&self) -> bool {
        self.blank
    }

    /// Non-blank text with no word in it (only punctuation) matches nothing.
    pub fn matches_nothing(&self) -> bool {
        !self.blank && self.words.is_empty()
    }

    #[cfg(test)]
    pub fn words(&self) -> &[String] {
        &self.words
    }

    pub fn word_count(&self) -> usize {
        self.words.len()
    }

    /// The PostgreSQL `tsquery` finding the records of `branches` whose index entry holds any of
    /// the words (each quoted: a word is never syntax), or is [`UNINDEXED`].
    pub fn tsquery(&self, branches: &[i64]) -> String {
        let quote = |w: &str| format!("'{}'", w.replace('\\', "\\\\").replace('\'', "''"));
        let fits = self.words.iter().map(String::as_str).filter(|w| w.len() <= MAX_INDEXED_WORD);
        let words: Vec<String> = fits.chain([UNINDEXED]).map(quote).collect();
        let branches: Vec<String> = branches.iter().map(|&bid| quote(&branch_entry(bid))).collect();
        format!("({}) & ({})", words.join(" | "), branches.join(" | "))
    }

    /// The FTS5 MATCH expression of a search over a view (see fts_match.rs for the phrase
    /// order it promises): the words OR-ed in `text` and `tags`, each required ASCII tag as a
    /// phrase of its words in `tags` (a prefilter: the exact tags are checked after), and the path's
    /// branches OR-ed in `branch` (no branch clause for no branches: every branch's rows).
    /// Every word is a quoted string, so nothing is syntax.
    pub fn fts_expression(&self, tags: &[String], branches: &[i64]) -> String {
        let quote = |text: &str| format!("\"{}\"", text.replace('"', "\"\""));
        let word_phrases: Vec<String> = self.words.iter().map(|w| quote(w)).collect();
        let mut expression = format!("{{text tags}}: ({})", word_phrases.join(" OR "));
        // Only ASCII tags: their words are FTS5's words whatever its Unicode tables say.
        for tag in tags.iter().filter(|tag| tag.is_ascii()) {
            let tag_words: Vec<String> = words(tag).collect();
            if !tag_words.is_empty() {
                expression += &format!(" AND tags: {}", quote(&tag_words.join(" ")));
            }
        }
        if !branches.is_empty() {
            let branches: Vec<String> = branches.iter().map(|bid| quote(&bid.to_string())).collect();
            expression += &format!(" AND branch: ({})", branches.join(" OR "));
        }
        expression
    }

    /// A counter of this query's words, for one text after another.
    pub fn term_counter(&self) -> TermCounter<'_> {
        let counts = TermCounts { tokens: 0, tf: smallvec::smallvec![0; self.words.len()] };
        TermCounter { query: self, counts, lowered: Vec::new(), folded: String::new() }
    }

    /// [`TermCounter::matches`], counts given whether or not a query word is there.
    #[cfg(test)]
    pub fn term_counts(&self, haystacks: &[&str]) -> TermCounts {
        let haystacks: Vec<&[u8]> = haystacks.iter().map(|h| h.as_bytes()).collect();
        let mut counter = self.term_counter();
        counter.count(&haystacks);
        counter.count_ascii_words();
        counter.counts
    }
}

/// Counts a query's words in text after text (the fallback counts every visible record),
/// reusing its buffers: only a text that holds a query word gets counts of its own.
pub struct TermCounter<'q> {
    query: &'q Query,
    /// The counts of the text counted last.
    counts: TermCounts,
    /// The ASCII haystacks being counted, lowered, a space after each.
    lowered: Vec<u8>,
    /// The non-ASCII word being compared, folded.
    folded: String,
}

impl TermCounter<'_> {
    /// How often each query word occurs in `haystacks` (texts, as bytes), and how many words they
    /// hold in all ([`token_count`]), if they hold a query word. The words are counted only
    /// then: for the recall search of a long timeline, most events hold none.
    pub fn matches(&mut self, haystacks: &[&[u8]]) -> Option<TermCounts> {
        if !self.count(haystacks) {
            return None;
        }
        self.count_ascii_words();
        Some(self.counts.clone())
    }

    /// [`TermCounter::matches`] of haystacks whose word count is stored (an archival version's
    /// length), which `tokens` reads only for a match (so a bad stored count fails only a
    /// search that matches its version): ASCII text is then only searched for the query words.
    pub fn matches_of(
        &mut self,
        haystacks: &[&[u8]],
        tokens: impl FnOnce() -> Result<u32>,
    ) -> Result<Option<TermCounts>> {
        if !self.count(haystacks) {
            return Ok(None);
        }
        Ok(Some(TermCounts { tokens: tokens()?, tf: self.counts.tf.clone() }))
    }

    /// Counts `haystacks` into `self.counts` and returns whether they hold a query word; `tokens`
    /// then holds the words of the haystacks that are not ASCII only (the others' are counted
    /// for a match alone: [`TermCounter::count_ascii_words`]). Haystacks come as bytes so that
    /// ASCII text, most of it, needs no UTF-8 check but the ASCII test: for the keyword search
    /// on SQLite that check was 7% of its instructions. Bytes that are not UTF-8 (memctl writes
    /// none) separate words, as the replacement character does.
    fn count(&mut self, haystacks: &[&[u8]]) -> bool {
        let counts = &mut self.counts;
        counts.tokens = 0;
        counts.tf.fill(0);
        // Most text: words are runs of ASCII letters and digits. The ASCII haystacks are lowered
        // into one buffer, a space after each (no word runs from one into the next), and rather
        // than compare every word with every query word, the runs are counted and each query
        // word found in the buffer once, where an occurrence with no letter or digit on either
        // side is one word equal to it (no ASCII word equals a query word that is not ASCII).
        self.lowered.clear();
        for &haystack in haystacks {
            if push_lowered_ascii(haystack, &mut self.lowered) {
                continue;
            }
            let text = String::from_utf8_lossy(haystack);
            for word in text.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty()) {
                let candidate = if word.is_ascii() {
                    word
                } else {
                    self.folded.clear();
                    self.folded.extend(word.chars().map(fold));
                    self.folded.as_str()
                };
                counts.count(&self.query.words, candidate.as_bytes());
            }
        }
        for (tf, finder) in counts.tf.iter_mut().zip(&self.query.ascii_finders) {
            if let Some(finder) = finder {
                *tf += ascii_occurrences(&self.lowered, finder);
            }
        }
        counts.matches()
    }

    /// Adds the words of the ASCII haystacks counted last to their `tokens`.
    fn count_ascii_words(&mut self) {
        self.counts.tokens += ascii_word_count(&self.lowered);
    }
}

/// Whether `text` is ASCII; if so, appends it in lower case and a space to `lowered`, else
/// leaves `lowered` as it was. The check is made in the pass that lowers the copy, not in a
/// pass of its own; a text that is not ASCII (counted word by word, at many times the cost)
/// pays for a copy it does not keep.
fn push_lowered_ascii(text: &[u8], lowered: &mut Vec<u8>) -> bool {
    let start = lowered.len();
    lowered.extend_from_slice(text);
    let mut high = 0;
    for b in &mut lowered[start..] {
        high |= *b;
        b.make_ascii_lowercase();
    }
    if !high.is_ascii() {
        lowered.truncate(start);
        return false;
    }
    lowered.push(b' ');
    true
}

/// The words of ASCII `text`: the starts of its runs of letters and digits.
fn ascii_word_count(text: &[u8]) -> u32 {
    let mut previous = false;
    let mut starts = 0;
    for &byte in text {
        let alphanumeric = byte.is_ascii_alphanumeric();
        starts += u32::from(alphanumeric && !previous);
        previous = alphanumeric;
    }
    starts
}

/// How many words of lowered ASCII `text` equal the lower-case word `finder` looks for.
fn ascii_occurrences(text: &[u8], finder: &Finder<'_>) -> u32 {
    let bounded = |at: usize| text.get(at).is_none_or(|b| !b.is_ascii_alphanumeric());
    let len = finder.needle().len();
    // Found one after another as `find_iter` would, without the copy of the searcher it makes.
    let (mut from, mut words) = (0, 0);
    while let Some(found) = text.get(from..).and_then(|rest| finder.find(rest)) {
        let at = from + found;
        words += u32::from((at == 0 || bounded(at - 1)) && bounded(at + len));
        from = at + len.max(1);
    }
    words
}

/// How many query words' counts [`TermCounts`] keeps without a heap buffer.
const INLINE_WORDS: usize = 4;

/// What ranking needs of one matching record or event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermCounts {
    /// Words in its searched texts (a record's text and tags; an event's text, kind and tags).
    pub tokens: u32,
    /// Occurrences of each query word, in query order; a search holds one per match, so those
    /// of a few words are kept inline.
    pub tf: SmallVec<[u32; INLINE_WORDS]>,
}

impl TermCounts {
    /// Counts one word of the text (folded, or ASCII in any case) against the query's words.
    fn count(&mut self, wanted: &[String], word: &[u8]) {
        self.tokens += 1;
        for (tf, wanted) in self.tf.iter_mut().zip(wanted) {
            // Query words are folded: an ASCII word matches its ASCII lower case.
            if wanted.len() == word.len() && wanted.as_bytes().eq_ignore_ascii_case(word) {
                *tf += 1;
            }
        }
    }

    pub fn matches(&self) -> bool {
        self.tf.iter().any(|&n| n > 0)
    }
}

/// A row of a view that matches a search (an archival version, an event): its seq, and what
/// ranking needs of it.
#[derive(Debug, Clone)]
pub struct Match {
    pub seq: i64,
    pub counts: TermCounts,
}

/// The `k` best of `matches` by [`bm25`] over them all, best first, ties newest (the greater
/// seq) first: each match's score and seq.
pub fn ranked(matches: Vec<Match>, k: usize) -> Vec<(f64, i64)> {
    let (counts, seqs): (Vec<_>, Vec<_>) = matches.into_iter().map(|m| (m.counts, m.seq)).unzip();
    let mut ranked: Vec<(f64, i64)> = bm25(&counts).into_iter().zip(seqs).collect();
    let best_first = |a: &(f64, i64), b: &(f64, i64)| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1));
    // The k best, then only those sorted.
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k, best_first);
        ranked.truncate(k);
    }
    ranked.sort_unstable_by(best_first);
    ranked
}

/// bm25 parameters (the usual ones, as in FTS5's `bm25()`).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// bm25 scores (higher is better) of the records matching a query in one view, with the
/// statistics taken from those matches: a word found in fewer of them weighs more, a longer
/// record weighs each occurrence less. Nothing outside the view enters a score, so a branch's
/// ranking never moves with other branches' records, and FTS5 and the fallback, which feed it
/// the same counts, rank identically.
fn bm25(matches: &[TermCounts]) -> Vec<f64> {
    let Some(words) = matches.first().map(|m| m.tf.len()) else { return vec![] };
    let n = matches.len() as f64;
    let avg_tokens = (matches.iter().map(|m| f64::from(m.tokens)).sum::<f64>() / n).max(1.0);
    // The IDF that stays positive for common words (Lucene's), so another matched word always adds.
    let idf: Vec<f64> = (0..words)
        .map(|w| {
            let df = matches.iter().filter(|m| m.tf[w] > 0).count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    matches
        .iter()
        .map(|m| {
            let norm = K1 * (1.0 - B + B * f64::from(m.tokens) / avg_tokens);
            m.tf.iter()
                .zip(&idf)
                .filter(|(&tf, _)| tf > 0)
                .map(|(&tf, idf)| idf * f64::from(tf) * (K1 + 1.0) / (f64::from(tf) + norm))
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Haystacks counted together count what each counts alone, in any mix of ASCII and
        /// not: no word runs from one into the next.
        #[test]
        fn haystacks_count_apart(haystacks in prop::collection::vec("[a-cA-C0-9 .:é-]{0,12}", 0..4), query in "[a-cé ]{1,8}") {
            let query = Query::parse(&query);
            let together = query.term_counts(&haystacks.iter().map(String::as_str).collect::<Vec<_>>());
            let alone: Vec<TermCounts> = haystacks.iter().map(|h| query.term_counts(&[h])).collect();
            prop_assert_eq!(together.tokens, alone.iter().map(|c| c.tokens).sum::<u32>());
            for (w, tf) in together.tf.iter().enumerate() {
                prop_assert_eq!(*tf, alone.iter().map(|c| c.tf[w]).sum::<u32>(), "{}", query.words()[w]);
            }
        }

        /// The stored length of a record is the length its keyword counts give it.
        #[test]
        fn token_count_is_term_counts_length(text in "\\PC{0,40}", tags in "[a-z: é\u{301}]{0,12}") {
            let counts = Query::parse("x").term_counts(&[&text, &tags]);
            prop_assert_eq!(token_count(&[&text, &tags]), counts.tokens);
        }

        /// The ASCII fast path counts what comparing every word with every query word counts.
        #[test]
        fn ascii_counts_are_word_comparisons(text in "[a-cA-C0-9 .:-]{0,60}", query in "[a-cA-C0-9 ]{1,12}") {
            let query = Query::parse(&query);
            let counts = query.term_counts(&[&text]);
            let words: Vec<&str> = text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
            prop_assert_eq!(counts.tokens as usize, words.len());
            for (tf, wanted) in counts.tf.iter().zip(query.words()) {
                let expected = words.iter().filter(|w| w.eq_ignore_ascii_case(wanted)).count();
                prop_assert_eq!(*tf as usize, expected, "{}", wanted);
            }
        }
    }

    #[test]
    fn syntax_is_words() {
        let q = Query::parse("\"mpi\" -tune: a/b.c 'x' NEAR");
        assert_eq!(q.words(), ["mpi", "tune", "b", "c", "x", "near"]);
        let tags = ["kind:\"x\"".into(), "!".into(), "Ⓐ".into(), "été".into()];
        let expression = q.fts_expression(&tags, &[7, 1]);
        assert_eq!(
            expression,
            "{text tags}: (\"mpi\" OR \"tune\" OR \"b\" OR \"c\" OR \"x\" OR \"near\") \
             AND tags: \"kind x\" AND branch: (\"7\" OR \"1\")"
        );
        let expression = q.fts_expression(&[], &[]);
        assert_eq!(expression, "{text tags}: (\"mpi\" OR \"tune\" OR \"b\" OR \"c\" OR \"x\" OR \"near\")");
    }

    #[test]
    fn stop_words_only_when_something_else_remains() {
        assert_eq!(Query::parse("the cache").words(), ["cache"]);
        assert_eq!(Query::parse("AND OR NOT").words(), ["and", "or", "not"]);
        assert!(Query::parse("  ").is_blank());
        assert!(Query::parse("...").matches_nothing());
    }

    /// Every character of planes 0 and 1 in turn between two letters, split into words here and
    /// by FTS5's own tokenizer (configured as in schema.rs): the same words, except where FTS5
    /// keeps a character that Rust's Unicode tables call neither a letter, a digit nor a mark —
    /// characters newer than SQLite's tables, which FTS5 takes as token characters.
    #[test]
    fn words_split_and_fold_where_fts5_does() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(x, tokenize=\"unicode61 remove_diacritics 0 categories 'L* N* Co M*'\");
             CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
        )
        .unwrap();
        let chars: Vec<char> = (0..0x20000u32).filter_map(char::from_u32).collect();
        let text = |c: char| format!("qa{c}bq zz");
        conn.execute_batch("BEGIN").unwrap();
        let mut insert = conn.prepare("INSERT INTO t(rowid, x) VALUES (?1, ?2)").unwrap();
        for &c in &chars {
            insert.execute(rusqlite::params![u32::from(c), text(c)]).unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
        let mut fts: Vec<Vec<String>> = vec![vec![]; 0x20000];
        let mut rows = conn.prepare("SELECT doc, term FROM v ORDER BY doc, offset").unwrap();
        for row in rows.query_map([], |r| Ok((r.get::<_, i64>(0)? as usize, r.get::<_, String>(1)?))).unwrap()
        {
            let (doc, term) = row.unwrap();
            fts[doc].push(term);
        }
        let newer_than_sqlite = |c: char, ours: &[String], theirs: &[String]| {
            !is_word_char(c) && ours.len() == 3 && theirs.len() == 2
        };
        let differ: Vec<String> = chars
            .iter()
            .filter(|&&c| {
                let ours: Vec<String> = words(&text(c)).collect();
                let theirs = &fts[u32::from(c) as usize];
                ours != *theirs && !newer_than_sqlite(c, &ours, theirs)
            })
            .map(|&c| {
                format!(
                    "U+{:04X}: {:?} here, {:?} in FTS5",
                    u32::from(c),
                    words(&text(c)).collect::<Vec<_>>(),
                    fts[u32::from(c) as usize]
                )
            })
            .collect();
        assert!(differ.is_empty(), "{} characters differ: {:?}", differ.len(), &differ);
    }

    #[test]
    fn words_are_folded_like_the_fts_index() {
        let folded: Vec<String> = words("Cafe\u{301} İstanbul ΣΊΣΥΦΟΣ 5µs हैलो").collect();
        assert_eq!(folded, ["cafe\u{301}", "İstanbul", "σίσυφοσ", "5μs", "हैलो"]);
    }

    #[test]
    fn counts_occurrences_and_words() {
        let q = Query::parse("gpu cache ÉTÉ");
        let counts = q.term_counts(&["GPU gpu, no été", "[\"cache\"]"]);
        assert_eq!(counts, TermCounts { tokens: 5, tf: smallvec::smallvec![2, 1, 1] });
        assert!(!q.term_counts(&["gpus"]).matches());
    }

    /// A counter reused over texts counts each as a fresh one does, and gives counts only to
    /// texts holding a query word.
    #[test]
    fn a_reused_counter_counts_each_text_afresh() {
        let q = Query::parse("gpu été");
        let mut counter = q.term_counter();
        for text in ["GPU gpu, a long text", "nothing here", "été", "gpu"] {
            let fresh = q.term_counts(&[text]);
            assert_eq!(counter.matches(&[text.as_bytes()]), fresh.matches().then_some(fresh));
        }
        let counts = counter.matches_of(&[b"gpu"], || Ok(7)).unwrap().unwrap();
        assert_eq!(counts, TermCounts { tokens: 7, tf: smallvec::smallvec![1, 0] });
        // The stored length is read only for a match.
        assert_eq!(counter.matches_of(&[b"nothing"], || panic!("read")).unwrap(), None);
    }

    /// Bytes that are not UTF-8 (a foreign writer's) separate words; the words around them count.
    #[test]
    fn bytes_not_utf8_separate_words() {
        let q = Query::parse("gpu été");
        let counts = q.term_counter().matches(&[b"gpu\xffcache \xc3\xa9t\xc3\xa9\xc3"]).unwrap();
        assert_eq!(counts, TermCounts { tokens: 3, tf: smallvec::smallvec![1, 1] });
    }

    #[test]
    fn bm25_prefers_more_and_rarer_words_and_shorter_records() {
        let m = |tokens, tf: &[u32]| TermCounts { tokens, tf: tf.into() };
        // "rare" is in one match, "common" in all three.
        let scores = bm25(&[m(10, &[1, 1]), m(10, &[0, 1]), m(20, &[0, 1])]);
        assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
        assert!(scores.iter().all(|s| *s > 0.0));
        assert!(bm25(&[]).is_empty());
    }
}
