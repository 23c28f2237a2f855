//! Stored text quoted on one line, as summaries, reports and the paper export quote it.

/// `text`'s words joined by single spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`one_line`], cut after `max` characters (the cut marked `…`).
pub(crate) fn shortened(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(4 * max + 3));
    push_shortened(&mut out, text, max);
    out
}

/// Appends [`shortened`]`(text, max)` to `out`, stopping at the cut: a path report quotes a
/// value per level, and values can be long.
pub(crate) fn push_shortened(out: &mut String, text: &str, max: usize) {
    if push_one_line_ascii(out, text, max) {
        return;
    }
    let start = out.len();
    if !push_shortened_ascii(out, text, max) {
        out.truncate(start);
        push_shortened_words(out, text, max);
    }
}

/// [`push_shortened`] for a text that is one line already as far as the cut (most values): ASCII
/// words, one space between two, none before the first, and a word byte where the text goes
/// on past `max` (so the cut falls in a word or before one). It is then its own words joined.
/// False for any other text, having written nothing.
fn push_one_line_ascii(out: &mut String, text: &str, max: usize) -> bool {
    let bytes = text.as_bytes();
    let cut = bytes.len() > max;
    let head = &bytes[..bytes.len().min(max.saturating_add(1))];
    // Folded without an early exit, so that the loops are vectorised: whitespace other than the
    // space is b'\t'..=b'\r'.
    let other_bytes = head.iter().fold(false, |seen, &b| seen | !b.is_ascii() | (b'\t'..=b'\r').contains(&b));
    let two_spaces =
        head.iter().zip(head.iter().skip(1)).fold(false, |seen, (&a, &b)| seen | ((a == b' ') & (b == b' ')));
    // A space at the start; at the end of what is looked at, one dropped or left before the cut.
    let space_at_an_end = head.first().is_none_or(|&b| b == b' ') || head.last() == Some(&b' ');
    if other_bytes || two_spaces || space_at_an_end {
        return false;
    }
    if cut {
        out.push_str(&text[..max]);
        out.push('…');
    } else {
        out.push_str(text);
    }
    true
}

/// [`push_shortened`] for a text whose words are ASCII up to the cut (most are): a word's
/// bytes are its characters. False at the first other word, having written part of it.
fn push_shortened_ascii(out: &mut String, text: &str, max: usize) -> bool {
    // The ASCII characters `char::is_whitespace` (so `split_whitespace`) counts as such.
    let is_space = |b: &u8| matches!(b, b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r' | b' ');
    let bytes = text.as_bytes();
    let (mut chars, mut at) = (0, 0);
    loop {
        at += bytes[at..].iter().take_while(|b| is_space(b)).count();
        if at == bytes.len() {
            return true;
        }
        let end = at + bytes[at..].iter().position(is_space).unwrap_or(bytes.len() - at);
        if !bytes[at..end].is_ascii() {
            return false;
        }
        if chars > 0 {
            if chars == max {
                out.push('…');
                return true;
            }
            out.push(' ');
            chars += 1;
        }
        let room = max - chars;
        if end - at > room {
            out.push_str(&text[at..at + room]);
            out.push('…');
            return true;
        }
        out.push_str(&text[at..end]);
        chars += end - at;
        at = end;
    }
}

/// [`push_shortened`] a word at a time, for any text.
fn push_shortened_words(out: &mut String, text: &str, max: usize) {
    let mut chars = 0;
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            if chars == max {
                out.push('…');
                return;
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
                return;
            }
        }
    }
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
        fn shortened_is_one_line_cut(text in "[ab é€\n\t\r\x0b\x0c\x1c\x1f\u{85}\u{a0}\u{2003}]{0,24}", max in 0usize..20) {
            prop_assert_eq!(shortened(&text, max), joined_then_cut(&text, max));
        }

        /// ASCII text, which is shortened over its bytes, with every whitespace it can hold and the
        /// separators that are not whitespace (`\x1c` to `\x1f`).
        #[test]
        fn ascii_is_shortened_as_any_text(text in "[ab \n\t\r\x0b\x0c\x1c\x1f]{0,24}", max in 0usize..20) {
            prop_assert_eq!(shortened(&text, max), joined_then_cut(&text, max));
        }
    }
}
