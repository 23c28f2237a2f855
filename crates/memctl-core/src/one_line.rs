//! Stored text quoted on one line, as summaries, reports and the paper export quote it.

/// `text`'s words joined by single spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`one_line`], cut after `max` characters (the cut marked `…`).
/// Built as it goes, stopping at the cut: a path report quotes a value per level, and values
/// can be long.
pub(crate) fn shortened(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(4 * max + 3));
    let mut chars = 0;
    for (i, word) in text.split_whitespace().enumerate() {
        for c in (i > 0).then_some(' ').into_iter().chain(word.chars()) {
            if chars == max {
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words joined, then cut after 80 characters, as the text was shortened before.
    #[test]
    fn shortens_to_one_line_of_max_characters() {
        let long_word = format!("{} yz", "a".repeat(78));
        for text in ["", "  a \n b\t", &"x".repeat(80), &"é".repeat(81), &"word ".repeat(30), &long_word] {
            let one = one_line(text);
            let expected = if one.chars().count() > 80 {
                format!("{}…", one.chars().take(80).collect::<String>())
            } else {
                one
            };
            assert_eq!(shortened(text, 80), expected, "{text:?}");
        }
    }
}
