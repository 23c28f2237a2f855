//! Search queries as words (SPEC §4.4). User text is split into words exactly the way the FTS5
//! `unicode61` tokenizer splits stored text, so every character is a valid query — quotes, `-`,
//! `:`, `AND`, `NEAR` — and the keyword fallback matches the same records FTS5 does.

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

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c)
}

/// The combining-mark blocks whose marks are not already alphabetic (decomposed accents, as in
/// macOS file names, Hebrew and Arabic points, variation selectors).
fn is_combining_mark(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}' | '\u{0483}'..='\u{0489}' | '\u{0591}'..='\u{05C7}'
        | '\u{0610}'..='\u{061A}' | '\u{064B}'..='\u{065F}' | '\u{06D6}'..='\u{06ED}'
        | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}' | '\u{20D0}'..='\u{20FF}'
        | '\u{302A}'..='\u{302F}' | '\u{3099}'..='\u{309A}' | '\u{FE00}'..='\u{FE0F}'
        | '\u{FE20}'..='\u{FE2F}')
}

/// Case folding as `unicode61` does it: one character to one character, so a character whose
/// lower case is longer (`İ`) stays as it is; final sigma and the micro sign fold like letters.
fn fold(c: char) -> char {
    match c {
        'ς' => 'σ',
        'µ' => 'μ',
        _ => {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(single), None) => single,
                _ => c,
            }
        }
    }
}

/// A parsed search query: the distinct words to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    words: Vec<String>,
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
        Query { blank: text.trim().is_empty(), words }
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

    /// The FTS5 MATCH expression: every word a quoted string, OR-ed, so nothing is syntax.
    pub fn fts_expression(&self) -> String {
        self.words.iter().map(|w| format!("\"{}\"", w.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR ")
    }

    /// The fallback's score of a text: how many of the query's words it contains. Runs over
    /// every visible record, so it folds each word into one reused buffer instead of allocating.
    pub fn matched_words(&self, haystacks: &[&str]) -> usize {
        let mut matched = vec![false; self.words.len()];
        let mut remaining = self.words.len();
        let mut folded = String::new();
        for haystack in haystacks {
            for word in haystack.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty()) {
                folded.clear();
                folded.extend(word.chars().map(fold));
                for (seen, wanted) in matched.iter_mut().zip(&self.words) {
                    if !*seen && *wanted == folded {
                        *seen = true;
                        remaining -= 1;
                    }
                }
                if remaining == 0 {
                    return self.words.len();
                }
            }
        }
        self.words.len() - remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_is_words() {
        let q = Query::parse("\"mpi\" -tune: a/b.c 'x' NEAR");
        assert_eq!(q.words(), ["mpi", "tune", "b", "c", "x", "near"]);
        assert_eq!(q.fts_expression(), "\"mpi\" OR \"tune\" OR \"b\" OR \"c\" OR \"x\" OR \"near\"");
    }

    #[test]
    fn stop_words_only_when_something_else_remains() {
        assert_eq!(Query::parse("the cache").words(), ["cache"]);
        assert_eq!(Query::parse("AND OR NOT").words(), ["and", "or", "not"]);
        assert!(Query::parse("  ").is_blank());
        assert!(Query::parse("...").matches_nothing());
    }

    #[test]
    fn words_are_folded_like_the_fts_index() {
        let folded: Vec<String> = words("Cafe\u{301} İstanbul ΣΊΣΥΦΟΣ 5µs हैलो").collect();
        assert_eq!(folded, ["cafe\u{301}", "İstanbul", "σίσυφοσ", "5μs", "हैलो"]);
    }

    #[test]
    fn counts_distinct_matches() {
        let q = Query::parse("gpu cache");
        assert_eq!(q.matched_words(&["GPU gpu, no", "[\"cache\"]"]), 2);
        assert_eq!(q.matched_words(&["gpus"]), 0);
    }
}
