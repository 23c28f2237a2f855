//! What a memory block is: one rule, for `apply` (which block it applies) and `strip` (what it
//! removes), found in one pass over the text (SPEC §4.7).
//!
//! A tag is `<memory_update …>` or `<memory_results …>` (attributes ignored; `<memory_update/>`
//! is none) or its closing `</memory_update>`: names in any case, space allowed before the `>`,
//! the slash escaped (`<\/memory_update>`) as JSON-minded LLMs write it. A block is an opening tag
//! and then:
//!
//! - `<memory_results>`: its closing tag, before another `<memory_results>` opens (an update block
//!   the LLM echoes inside is part of the results);
//! - `<memory_update>`: a JSON object followed by `/>` (a malformed ending; stray closing braces
//!   before it, `}}}/>`, go with it); else a closing tag before another tag opens, after the JSON
//!   object when the body starts with one (its strings may hold tags), the body then being
//!   whatever precedes the closing tag; else, when the body starts with a JSON object, that
//!   object (a cut-off answer or a forgotten closing tag); else, when the body starts with `{`
//!   that no JSON object follows, up to the first `}/>` before another tag opens (a malformed
//!   block whose body `apply` refuses as invalid JSON).
//!
//! Anything else is a mention of the tag ("the <memory_results> above"), kept as text.
//!
//! The work is linear in the text: each tag is found once, and each JSON body is parsed once. A
//! parse still going at another opening tag's `>` is inside a string there (`>` is no JSON
//! outside one) while the new parse starts outside one; both see the same quotes after it, so at
//! most one of them goes on past the next `<`, and no character is read by more than two parses.

use serde::de::IgnoredAny;
use std::ops::Range;

/// The two kinds of memory block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Update,
    Results,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Update => "memory_update",
            Kind::Results => "memory_results",
        }
    }
}

/// A tag in a text, opening or closing.
#[derive(Debug, Clone, Copy)]
struct Tag {
    kind: Kind,
    open: bool,
    start: usize,
    end: usize,
}

/// A block of a text: where its opening tag starts, its body, and where it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub kind: Kind,
    pub start: usize,
    pub body: Range<usize>,
    pub end: usize,
}

/// The blocks of `text`, in order.
pub(crate) fn blocks(text: &str) -> impl Iterator<Item = Block> + '_ {
    let tags = tags(text);
    let mut next = 0;
    let mut scanned = 0;
    std::iter::from_fn(move || {
        while let Some(tag) = tags.get(next) {
            next += 1;
            // Tags inside the last block are its own.
            if !tag.open || tag.start < scanned {
                continue;
            }
            if let Some(block) = block_at(text, &tags, tag) {
                scanned = block.end;
                return Some(block);
            }
        }
        None
    })
}

/// The block `open` opens, if it opens one (see the module's rule).
fn block_at(text: &str, tags: &[Tag], open: &Tag) -> Option<Block> {
    let block = |body_end: usize, end: usize| Block {
        kind: open.kind,
        start: open.start,
        body: open.end..body_end,
        end,
    };
    if open.kind == Kind::Results {
        let close = closing(tags, open.end, Kind::Results, |tag| tag.kind == Kind::Results)?;
        return Some(block(close.start, close.end));
    }
    let json = json_end(text, open.end);
    if let Some(end) = json {
        let rest = &text[end..];
        let after =
            end + (rest.len() - rest.trim_start_matches(|c: char| c == '}' || c.is_whitespace()).len());
        if text[after..].starts_with("/>") {
            return Some(block(end, after + 2));
        }
    }
    match closing(tags, json.unwrap_or(open.end), Kind::Update, |_| true) {
        Some(close) => Some(block(close.start, close.end)),
        None => match json {
            Some(end) => Some(block(end, end)),
            None => malformed_end(text, tags, open.end).map(|at| block(at + 1, at + 3)),
        },
    }
}

/// Where the `}/>` that ends a malformed block whose body starts at `from` stands: the body
/// starts with `{` and the `}/>` comes before the next opening tag (so no text is read twice).
fn malformed_end(text: &str, tags: &[Tag], from: usize) -> Option<usize> {
    if !text[from..].trim_start().starts_with('{') {
        return None;
    }
    let next = tags.partition_point(|tag| tag.start < from);
    let limit = tags[next..].iter().find(|tag| tag.open).map_or(text.len(), |tag| tag.start);
    Some(from + text[from..limit].find("}/>")?)
}

/// The first closing tag of `kind` from `from` on, unless an opening tag that `stops` comes first.
fn closing(tags: &[Tag], from: usize, kind: Kind, stops: impl Fn(&Tag) -> bool) -> Option<Tag> {
    let first = tags.partition_point(|tag| tag.start < from);
    tags[first..]
        .iter()
        .take_while(|tag| !(tag.open && stops(tag)))
        .find(|tag| !tag.open && tag.kind == kind)
        .copied()
}

/// Where the JSON object that `text[from..]` starts with (after white space) ends, if it does
/// start with one.
fn json_end(text: &str, from: usize) -> Option<usize> {
    let json = text[from..].trim_start();
    if !json.starts_with('{') {
        return None;
    }
    let mut values = serde_json::Deserializer::from_str(json).into_iter::<IgnoredAny>();
    values.next()?.ok()?;
    Some(text.len() - json.len() + values.byte_offset())
}

/// Every tag of `text`, in order.
fn tags(text: &str) -> Vec<Tag> {
    let mut tags = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find('<') {
        let start = from + found;
        from = start + 1;
        if let Some(tag) = tag_at(text.as_bytes(), start) {
            from = tag.end;
            tags.push(tag);
        }
    }
    tags
}

/// The tag whose `<` is at `start`, if it is one.
fn tag_at(bytes: &[u8], start: usize) -> Option<Tag> {
    let (kind, open, at) = name_at(bytes, start)?;
    let rest = &bytes[at..];
    let end = if open {
        match rest.first()? {
            b'>' => at + 1,
            // Attributes run to the `>`, before any other `<`; `… />` closes itself.
            b if b.is_ascii_whitespace() => {
                let gt = rest.iter().position(|&b| b == b'>' || b == b'<')?;
                (rest[gt] == b'>' && rest[gt - 1] != b'/').then_some(at + gt + 1)?
            }
            _ => return None,
        }
    } else {
        let space = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
        (rest.get(space) == Some(&b'>')).then_some(at + space + 1)?
    };
    Some(Tag { kind, open, start, end })
}

/// The tag name that the `<` at `start` starts, after a closing slash if any (any case): its
/// kind, whether it opens, and where the name ends.
fn name_at(bytes: &[u8], start: usize) -> Option<(Kind, bool, usize)> {
    let mut at = start + 1;
    let slash = [&b"/"[..], b"\\/"].into_iter().find(|slash| bytes[at..].starts_with(slash));
    at += slash.map_or(0, <[u8]>::len);
    let kind = [Kind::Update, Kind::Results].into_iter().find(|kind| {
        let name = kind.name().as_bytes();
        bytes.get(at..at + name.len()).is_some_and(|found| found.eq_ignore_ascii_case(name))
    })?;
    Some((kind, slash.is_none(), at + kind.name().len()))
}

/// `text` with each `<` that starts a tag name written `&lt;`, whatever follows the name: a
/// stored text shown in a `<memory_results>` block can then neither close it nor hold a block.
pub(crate) fn escape_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut kept = 0;
    for (at, _) in text.match_indices('<').filter(|(at, _)| name_at(text.as_bytes(), *at).is_some()) {
        out.push_str(&text[kept..at]);
        out.push_str("&lt;");
        kept = at + 1;
    }
    out.push_str(&text[kept..]);
    out
}

/// The body of the first `<memory_update>` block of `text` (results blocks skipped), or the text
/// itself when it is a bare JSON object. None when there is neither.
pub fn find_update_block(text: &str) -> Option<&str> {
    update_blocks(text).next().or_else(|| bare_json(text))
}

/// The bodies of the `<memory_update>` blocks of `text`, in order (results blocks skipped).
pub(crate) fn update_blocks(text: &str) -> impl Iterator<Item = &str> {
    blocks(text).filter(|block| block.kind == Kind::Update).map(|block| text[block.body].trim())
}

/// The text itself, when it is a bare JSON object (an answer without blocks).
pub(crate) fn bare_json(text: &str) -> Option<&str> {
    let trimmed = text.trim();
    (trimmed.starts_with('{') && trimmed.ends_with('}')).then_some(trimmed)
}

/// `text` without its blocks (mentions of the tags are kept), and without the white space a
/// removed block would leave behind: a block at the start of its line takes the line's
/// indentation and the white space after it (up to its last line break: not the next line's
/// indentation); a block ending its line takes the spaces before it. All else is kept as it is: a
/// text without blocks comes back unchanged.
pub fn strip_blocks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut kept = 0;
    // The spaces and tabs `out` ends with, and whether only they follow a line break (or
    // nothing); kept up to date from each piece added, so that no piece is read twice.
    let (mut spaces, mut line_start) = (0, true);
    for block in blocks(text) {
        let piece = &text[kept..block.start];
        let trimmed = piece.trim_end_matches([' ', '\t']);
        if trimmed.is_empty() {
            spaces += piece.len();
        } else {
            spaces = piece.len() - trimmed.len();
            line_start = trimmed.ends_with('\n');
        }
        out.push_str(piece);
        let after = &text[block.end..];
        let run = &after[..after.len() - after.trim_start().len()];
        kept = block.end;
        if line_start {
            kept += run.rfind('\n').map_or(run.len(), |at| at + 1);
        }
        if line_start || run.contains('\n') || run.len() == after.len() {
            out.truncate(out.len() - spaces);
            spaces = 0;
        }
    }
    out.push_str(&text[kept..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_block() {
        assert_eq!(
            find_update_block("a <memory_update id=\"1\">{\"x\":1}</memory_update> b"),
            Some("{\"x\":1}")
        );
        assert_eq!(find_update_block("<memory_update>{\"x\":1}<\\/memory_update>"), Some("{\"x\":1}"));
        assert_eq!(
            find_update_block("<memory_update>{\"core\":{\"a\":\"b\"}}/>"),
            Some("{\"core\":{\"a\":\"b\"}}")
        );
        assert_eq!(find_update_block("  {\"x\": 1} "), Some("{\"x\": 1}"));
        let two = "<memory_update>{\"core\": {\"a\": \"1\"}}/> then <memory_update>{}</memory_update>";
        assert_eq!(find_update_block(two), Some("{\"core\": {\"a\": \"1\"}}"));
        assert_eq!(find_update_block("no block here"), None);
        // The tag named in prose is not a block; the block after it is.
        let prose = "I will emit a <memory_update> block.\nThe answer is 42.\n<memory_update>{\"a\":1}</memory_update>";
        assert_eq!(find_update_block(prose), Some("{\"a\":1}"));
        // A closing tag or `}}/>` inside a JSON string does not end the block.
        let inside = r#"<memory_update>{"archival": "x }}/> y </memory_update> z"}</memory_update>"#;
        assert_eq!(find_update_block(inside), Some(r#"{"archival": "x }}/> y </memory_update> z"}"#));
        // A body that is not JSON still ends at its closing tag, to be reported as invalid.
        assert_eq!(find_update_block("<memory_update>oops</memory_update> b"), Some("oops"));
        assert_eq!(find_update_block("<memory_update>{\"a\": oops}</memory_update>"), Some("{\"a\": oops}"));
        // JSON followed by more than a closing tag is reported whole, not cut to its first value.
        let more = r#"<memory_update>{"core": {"k": "v"}}, "archival": ["x"]}</memory_update>"#;
        assert_eq!(find_update_block(more), Some(r#"{"core": {"k": "v"}}, "archival": ["x"]}"#));
        let two = r#"<memory_update>{"a": 1} {"b": 2}</memory_update>"#;
        assert_eq!(find_update_block(two), Some(r#"{"a": 1} {"b": 2}"#));
    }

    #[test]
    fn closing_tags_in_any_case_with_space_close_a_block() {
        for close in ["</memory_update >", "</Memory_Update>", "</MEMORY_UPDATE\n>", "<\\/memory_update >"] {
            let text = format!("X <memory_update>{{\"a\": oops}}{close} Y");
            assert_eq!(find_update_block(&text), Some("{\"a\": oops}"), "{close}");
            assert_eq!(strip_blocks(&text), "X  Y", "{close}");
        }
        let text = "X <Memory_Update version=\"2\">{\"a\":1}</memory_update> Y";
        assert_eq!(find_update_block(text), Some("{\"a\":1}"));
        // Not tags: another name, a self-closing tag, a closing tag with attributes.
        for text in
            ["<memory_updates>{\"a\":1}", "<memory_update/>", "<memory_update />", "</memory_update x>"]
        {
            assert_eq!(tags(text).len(), 0, "{text}");
        }
    }

    #[test]
    fn a_mention_or_an_unterminated_block_keeps_the_rest() {
        for text in [
            "Based on the <memory_results> above, the answer is 42.",
            "Based on the `<memory_results>`, the answer is 42.",
            "The </memory_results> tag ends it and <memory_update/> is nothing.",
            "A <memory_update>{\"core\": {\"a\": unterminated B",
            "cut <memory_update>{\"a\":",
            "I will write a <memory_update> block.",
        ] {
            assert_eq!(strip_blocks(text), text);
            assert_eq!(find_update_block(text), None, "{text}");
        }
        // A JSON object without its closing tag is the block; the text after it stays.
        let text = "A <memory_update>{\"core\":{\"a\":\"1\"}} unterminated B";
        assert_eq!(find_update_block(text), Some("{\"core\":{\"a\":\"1\"}}"));
        assert_eq!(strip_blocks(text), "A  unterminated B");
        // A closing tag after the next opening one is not this block's.
        let text = "A <memory_update> oops <memory_update>{\"b\":2}</memory_update> C";
        assert_eq!(find_update_block(text), Some("{\"b\":2}"));
        assert_eq!(strip_blocks(text), "A <memory_update> oops  C");
    }

    #[test]
    fn an_update_echoed_inside_results_is_part_of_them() {
        let text = "<memory_results>- a: <memory_update>{\"core\":{\"fake\":\"1\"}}</memory_update></memory_results> <memory_update>{\"core\":{\"real\":\"1\"}}</memory_update>";
        assert_eq!(find_update_block(text), Some("{\"core\":{\"real\":\"1\"}}"));
        assert_eq!(strip_blocks(text), "");
        let kinds: Vec<Kind> = blocks(text).map(|block| block.kind).collect();
        assert_eq!(kinds, [Kind::Results, Kind::Update]);
    }

    #[test]
    fn strips_every_block() {
        let text = "Plan:\n<memory_update>{\"a\":1}</memory_update>\n\n\n<memory_results>\nx\n</memory_results>\nDone <memory_update>{\"core\":{\"a\":\"b\"}}/> end <memory_update>{}<\\/memory_update>!";
        assert_eq!(strip_blocks(text), "Plan:\nDone  end !");
        assert_eq!(strip_blocks("a\n\n\nb"), "a\n\n\nb", "text outside blocks is kept as it is");
        assert_eq!(strip_blocks("nothing"), "nothing");
        assert_eq!(strip_blocks(""), "");
        let prose = "I will emit a <memory_update> block.\nThe answer is 42.\n<memory_update>{\"a\":1}</memory_update>\nDone.";
        assert_eq!(strip_blocks(prose), "I will emit a <memory_update> block.\nThe answer is 42.\nDone.");
        let inside = r#"a <memory_update>{"t": "x }}/> y"}</memory_update> b"#;
        assert_eq!(strip_blocks(inside), "a  b");
        assert_eq!(strip_blocks("a <memory_update>{\"t\": 1}/> b"), "a  b");
        assert_eq!(strip_blocks("a <memory_update>{\"t\": 1}"), "a", "an unclosed block is its JSON");
        assert_eq!(strip_blocks("a <memory_update>oops</memory_update> b"), "a  b");
    }

    /// A body that is no JSON object, ended by `}/>`, is a block (apply refuses its JSON), and
    /// stray braces before `/>` go with the object they follow.
    #[test]
    fn malformed_endings_close_a_block() {
        let invalid = "Answer. <memory_update>{\"core\": {\"a\": \"b\",}}/> Done.";
        assert_eq!(strip_blocks(invalid), "Answer.  Done.");
        assert_eq!(find_update_block(invalid), Some("{\"core\": {\"a\": \"b\",}}"));
        let extra = "X <memory_update>{\"core\":{\"a\":\"b\"}}}/> Y";
        assert_eq!(strip_blocks(extra), "X  Y");
        assert_eq!(find_update_block(extra), Some("{\"core\":{\"a\":\"b\"}}"));
        // Not past the next opening tag: the first is a mention, the second the block.
        let later = "a <memory_update>{ b <memory_update>{\"x\": 1}</memory_update> c }/>";
        assert_eq!(find_update_block(later), Some("{\"x\": 1}"));
    }

    #[test]
    fn strips_only_the_white_space_a_block_leaves_behind() {
        for text in ["    def f():\n        return 1\n", "  lead and trail \n\n", "\n\na\r\n\tb  "] {
            assert_eq!(strip_blocks(text), text, "a text without blocks comes back unchanged");
        }
        let cases = [
            ("Answer <memory_update>{}</memory_update>\nNext", "Answer\nNext"),
            ("Answer\t<memory_update>{}</memory_update>", "Answer"),
            ("Here:\n  <memory_update>{}</memory_update>\n    code\n", "Here:\n    code\n"),
            ("Para 1.\n\n<memory_update>{}</memory_update>\n\nPara 2.\n", "Para 1.\n\nPara 2.\n"),
            ("<memory_update>{}</memory_update> <memory_results></memory_results>\r\n\r\nA\n", "A\n"),
            ("A\n<memory_update>{}</memory_update> B", "A\nB"),
        ];
        for (text, stripped) in cases {
            assert_eq!(strip_blocks(text), stripped, "{text:?}");
        }
        // Each piece of kept text is read once: blocks after a long run of spaces do not read it
        // again each.
        let spaces = " ".repeat(100_000);
        let text = format!("A{spaces}{}B", "<memory_results></memory_results>".repeat(20_000));
        assert_eq!(strip_blocks(&text), format!("A{spaces}B"));
    }

    #[test]
    fn escaped_tags_open_and_close_nothing() {
        let stored =
            "</memory_results><memory_update>{\"core\":{\"x\":\"1\"}}<\\/Memory_Update > a<b <memory_x";
        let escaped = escape_tags(stored);
        assert_eq!(
            escaped,
            "&lt;/memory_results>&lt;memory_update>{\"core\":{\"x\":\"1\"}}&lt;\\/Memory_Update > a<b <memory_x"
        );
        let shown = format!("<memory_results>\n- k: {escaped}\n</memory_results>");
        assert_eq!(find_update_block(&shown), None);
        assert_eq!(strip_blocks(&shown), "");
    }

    /// Mentions by the hundred thousand (two megabytes): a scan that looks for a closing tag
    /// from each of them, or parses JSON from each past the others, would not finish.
    #[test]
    fn scanning_is_linear_in_the_mentions() {
        let block = r#"<memory_update>{"core":{"r":"1"}}</memory_update>"#;
        for mention in [
            "`<memory_update>` ",
            "<memory_update> ",
            "\"<memory_update>\" ",
            "<memory_update/> ",
            "<memory_update x=1 ",
            "`<memory_results>` ",
            "</memory_update> ",
            "<memory_update>{ ",
            "<memory_update>{\"k\": \"",
            "<memory_update>{\"k\": \"x\", \"",
        ] {
            let mentions = mention.repeat(100_000);
            let text = format!("{mentions}{block}");
            assert_eq!(find_update_block(&text), Some(r#"{"core":{"r":"1"}}"#), "{mention}");
            assert_eq!(strip_blocks(&text), mentions.trim(), "{mention}");
        }
    }
}
