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

    pub fn word_count(&self) -> usize {
        self.words.len()
    }

    /// The FTS5 MATCH expression of a search over a view (see fts_match.rs for the phrase
    /// order it promises): the words OR-ed in `text` and `tags`, each required tag as a phrase
    /// of its words in `tags` (a prefilter: the exact tags are checked after), and the path's
    /// branches OR-ed in `branch`. Every word is a quoted string, so nothing is syntax.
    /// Returns the expression and the index of its first branch phrase.
    pub fn fts_expression(&self, tags: &[String], branches: &[i64]) -> (String, usize) {
        let quote = |text: &str| format!("\"{}\"", text.replace('"', "\"\""));
        let word_phrases: Vec<String> = self.words.iter().map(|w| quote(w)).collect();
        let mut expression = format!("{{text tags}}: ({})", word_phrases.join(" OR "));
        let mut phrases = word_phrases.len();
        for tag in tags {
            let tag_words: Vec<String> = words(tag).collect();
            if !tag_words.is_empty() {
                expression += &format!(" AND tags: {}", quote(&tag_words.join(" ")));
                phrases += 1;
            }
        }
        let branches: Vec<String> = branches.iter().map(|bid| quote(&bid.to_string())).collect();
        expression += &format!(" AND branch: ({})", branches.join(" OR "));
        (expression, phrases)
    }

    /// How often each query word occurs in `haystacks`, and how many words they hold in all:
    /// what FTS5 reports for an indexed row (fts_match.rs), computed from the texts. Runs over
    /// every visible record in the fallback, so ASCII words are compared without allocating.
    pub fn term_counts(&self, haystacks: &[&str]) -> TermCounts {
        let mut counts = TermCounts { tokens: 0, tf: vec![0; self.words.len()] };
        let mut folded = String::new();
        for haystack in haystacks {
            for word in haystack.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty()) {
                counts.tokens += 1;
                let candidate = if word.is_ascii() {
                    word
                } else {
                    folded.clear();
                    folded.extend(word.chars().map(fold));
                    folded.as_str()
                };
                for (tf, wanted) in counts.tf.iter_mut().zip(&self.words) {
                    // Query words are folded: an ASCII word matches its ASCII lower case.
                    if wanted.len() == candidate.len() && wanted.eq_ignore_ascii_case(candidate) {
                        *tf += 1;
                    }
                }
            }
        }
        counts
    }
}

/// What ranking needs of one matching record or event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermCounts {
    /// Words in its searched text (text and tags).
    pub tokens: u32,
    /// Occurrences of each query word, in query order.
    pub tf: Vec<u32>,
}

impl TermCounts {
    pub fn matches(&self) -> bool {
        self.tf.iter().any(|&n| n > 0)
    }
}

/// bm25 parameters (the usual ones, as in FTS5's `bm25()`).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// bm25 scores (higher is better) of the records matching a query in one view, with the
/// statistics taken from those matches: a word found in fewer of them weighs more, a longer
/// record weighs each occurrence less. Nothing outside the view enters a score, so a branch's
/// ranking never moves with other branches' records, and FTS5 and the fallback, which feed it
/// the same counts, rank identically.
pub fn bm25(matches: &[TermCounts]) -> Vec<f64> {
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

    #[test]
    fn syntax_is_words() {
        let q = Query::parse("\"mpi\" -tune: a/b.c 'x' NEAR");
        assert_eq!(q.words(), ["mpi", "tune", "b", "c", "x", "near"]);
        let (expression, first_branch) = q.fts_expression(&["kind:\"x\"".into(), "!".into()], &[7, 1]);
        assert_eq!(
            expression,
            "{text tags}: (\"mpi\" OR \"tune\" OR \"b\" OR \"c\" OR \"x\" OR \"near\") \
             AND tags: \"kind x\" AND branch: (\"7\" OR \"1\")"
        );
        assert_eq!(first_branch, 7);
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
    fn counts_occurrences_and_words() {
        let q = Query::parse("gpu cache ÉTÉ");
        let counts = q.term_counts(&["GPU gpu, no été", "[\"cache\"]"]);
        assert_eq!(counts, TermCounts { tokens: 5, tf: vec![2, 1, 1] });
        assert!(!q.term_counts(&["gpus"]).matches());
    }

    #[test]
    fn bm25_prefers_more_and_rarer_words_and_shorter_records() {
        let m = |tokens, tf: &[u32]| TermCounts { tokens, tf: tf.to_vec() };
        // "rare" is in one match, "common" in all three.
        let scores = bm25(&[m(10, &[1, 1]), m(10, &[0, 1]), m(20, &[0, 1])]);
        assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
        assert!(scores.iter().all(|s| *s > 0.0));
        assert!(bm25(&[]).is_empty());
    }
}
