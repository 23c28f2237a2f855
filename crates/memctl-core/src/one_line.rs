//! Stored text quoted on one line, as summaries, reports and the paper export quote it.

/// `text`'s words joined by single spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`one_line`], cut after `max` characters (the cut marked `…`).
/// Built a word at a time, stopping at the cut: a path report quotes a value per level, and
/// values can be long.
pub(crate) fn shortened(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(4 * max + 3));
    let mut chars = 0;
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            if chars == max {
                out.push('…');
                return out;
            }
            out.push(' ');
            chars += 1;
        }
        let room = max - chars;
        // A word of at most `room` bytes has at most `room` characters.
        let cut = if word.len() <= room { None } else { word.char_indices().nth(room) };
        match cut {
            None => {
                out.push_str(word);
                chars += word.chars().count();
            }
            Some((end, _)) => {
                out.push_str(&word[..end]);
                out.push('…');
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What [`shortened`] gives: the words joined, then cut after `max` characters.
    fn joined_then_cut(text: &str, max: usize) -> String {
        let one = one_line(text);
        if one.chars().count() > max {
            format!("{}…", one.chars().take(max).collect::<String>())
        } else {
            one
        }
    }

    #[test]
    fn shortens_to_one_line_of_max_characters() {
        let long_word = format!("{} yz", "a".repeat(78));
        for text in ["", "  a \n b\t", &"x".repeat(80), &"é".repeat(81), &"word ".repeat(30), &long_word] {
            assert_eq!(shortened(text, 80), joined_then_cut(text, 80), "{text:?}");
        }
    }

    proptest! {
        /// Words of ASCII and wider characters, cut anywhere: in a word, at its end, at a space.
        #[test]
        fn shortened_is_one_line_cut(text in "[ab é€\n\t]{0,24}", max in 0usize..20) {
            prop_assert_eq!(shortened(&text, max), joined_then_cut(&text, max));
        }
    }
}
