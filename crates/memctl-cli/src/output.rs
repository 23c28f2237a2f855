//! Text rendering shared by the commands: stdout, timestamps, aligned tables, tag lists, and the
//! lines that show engine rows (events, summaries, records, the branch tree, a whole view).

use clap::ValueEnum;
use memctl_core::{Branch, BranchStatus, Event, Record, Summary, View};
use std::fmt::{self, Display};
use std::io::{IsTerminal, Write};

/// Writes one line of data to stdout. A closed pipe (`memctl … | head -1`) ends the output
/// quietly, as for any Unix filter, instead of a panic.
pub fn stdout(text: &str) {
    to_stdout(|out| writeln!(out, "{text}"));
}

/// Writes an export (a page, the journal's lines) to stdout as it is.
pub fn stdout_bytes(bytes: &[u8]) {
    to_stdout(|out| out.write_all(bytes));
}

/// Writes `value` as one line of JSON to stdout, serialized as it is written: a whole view's
/// JSON can run to tens of megabytes.
pub fn stdout_json(value: &impl serde::Serialize) {
    to_stdout(|out| {
        let mut out = std::io::BufWriter::new(out);
        serde_json::to_writer(&mut out, value)?;
        writeln!(out)?;
        out.flush()
    });
}

/// Writes text to stdout as it is made, through a buffer: `write` writes whole lines, each
/// ending in a line break. A whole view's text can run to tens of megabytes, which a `String`
/// would first hold, grown by copies. As for text written whole ([`stdout`] of a trimmed text),
/// the output ends in exactly one line break: user text at the end (a note) may add more.
pub fn stdout_lines(write: impl FnOnce(&mut dyn fmt::Write) -> fmt::Result) {
    to_stdout(|out| {
        let mut text = IoText::new(std::io::BufWriter::new(out));
        if write(&mut text).is_err() {
            return Err(text
                .error
                .unwrap_or_else(|| std::io::Error::other("the text could not be formatted")));
        }
        text.finish()?.flush()
    });
}

/// A `fmt::Write` onto an `io::Write`, keeping the first I/O error (`fmt::Error` carries none),
/// and holding back the line breaks that end what it has been given until more text follows.
struct IoText<W> {
    out: W,
    error: Option<std::io::Error>,
    /// Line breaks held back.
    breaks: usize,
    /// Whether it has been given any text.
    given: bool,
}

impl<W: Write> IoText<W> {
    fn new(out: W) -> Self {
        IoText { out, error: None, breaks: 0, given: false }
    }

    /// Ends the text with one line break, if it has any text; the output.
    fn finish(mut self) -> std::io::Result<W> {
        if self.given {
            self.out.write_all(b"\n")?;
        }
        Ok(self.out)
    }

    fn put(&mut self, bytes: &[u8]) -> fmt::Result {
        self.out.write_all(bytes).map_err(|e| {
            self.error.get_or_insert(e);
            fmt::Error
        })
    }
}

impl<W: Write> fmt::Write for IoText<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let body = s.trim_end_matches('\n');
        if !body.is_empty() {
            for _ in 0..std::mem::take(&mut self.breaks) {
                self.put(b"\n")?;
            }
            self.put(body.as_bytes())?;
        }
        self.breaks += s.len() - body.len();
        self.given |= !s.is_empty();
        Ok(())
    }
}

fn to_stdout(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let out = std::io::stdout().lock();
    let result = if out.is_terminal() {
        let mut out = TerminalSafe::new(out);
        write(&mut out).and_then(|()| out.flush())
    } else {
        let mut out = out;
        write(&mut out).and_then(|()| out.flush())
    };
    if let Err(err) = result {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        // As for a file an export cannot write: the command's own work is done (and committed).
        crate::failure::exit_with(&memctl_core::Error::invalid(format!("cannot write to stdout: {err}")));
    }
}

/// Stored text shown on a terminal: its control characters (but line breaks and tabs) as their
/// Unicode pictures (ESC as ␛, CR as ␍), so that no text a run stored can move the cursor,
/// clear the screen or overwrite a line. Piped output is the text as stored. Each is one byte
/// that no multi-byte UTF-8 sequence holds, so bytes are mapped one at a time.
struct TerminalSafe<W> {
    out: W,
    /// The last byte written was 0xC2, the lead byte of the C1 controls (U+0080–U+009F, where
    /// U+009B starts a sequence on some terminals), held back until the next byte says which.
    lead: bool,
}

impl<W: Write> TerminalSafe<W> {
    fn new(out: W) -> Self {
        TerminalSafe { out, lead: false }
    }
}

impl<W: Write> Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut start = 0;
        for (i, &byte) in buf.iter().enumerate() {
            let lead = std::mem::replace(&mut self.lead, false);
            let picture = match byte {
                0x80..=0x9f if lead => '\u{FFFD}',
                _ if lead => {
                    // Not a C1 control: the held lead byte goes out before this one.
                    self.out.write_all(&buf[start..i])?;
                    self.out.write_all(&[0xc2])?;
                    start = i;
                    continue;
                }
                0xc2 => {
                    self.out.write_all(&buf[start..i])?;
                    self.lead = true;
                    start = i + 1;
                    continue;
                }
                b'\n' | b'\t' => continue,
                0..=0x1f => char::from_u32(0x2400 + u32::from(byte)).expect("a control picture"),
                0x7f => '\u{2421}',
                _ => continue,
            };
            self.out.write_all(&buf[start..i])?;
            self.out.write_all(picture.encode_utf8(&mut [0; 3]).as_bytes())?;
            start = i + 1;
        }
        self.out.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if std::mem::take(&mut self.lead) {
            self.out.write_all(&[0xc2])?;
        }
        self.out.flush()
    }
}

/// `2026-01-02 03:04:05` (UTC) for epoch seconds.
pub use memctl_core::utc_datetime as timestamp;

pub use memctl_core::tags_suffix;

/// Columns padded to their widest cell; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == columns {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = vec![line(header.to_vec())];
    out.extend(rows.iter().map(|row| line(row.iter().map(String::as_str).collect())));
    out.join("\n")
}

/// `name  value` lines with the values aligned.
pub fn fields(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(name, _)| name.chars().count()).max().unwrap_or(0);
    let lines: Vec<String> = rows
        .iter()
        .map(|(name, value)| format!("{name}{}  {value}", " ".repeat(width - name.chars().count())))
        .collect();
    lines.join("\n")
}

/// `text` on one line (line breaks shown as ⏎), cut to `max` characters with an ellipsis.
pub fn excerpt(text: &str, max: usize) -> String {
    // Most texts are one line: cut as a slice, not rebuilt character by character. Others are
    // made one line only as far as the cut: a record's text can be megabytes.
    if !text.contains('\n') {
        return cut(text.trim_end(), max);
    }
    cut(&one_line_chars(text).take(max.saturating_add(1)).collect::<String>(), max)
}

/// `line` cut to `max` characters, the last an ellipsis when cut.
fn cut(line: &str, max: usize) -> String {
    // No more characters than bytes: a short line is not counted.
    if line.len() <= max {
        return line.to_string();
    }
    // The ellipsis takes the place of the character before the first one past `max`.
    let end = if line.as_bytes()[..=max].is_ascii() {
        // Most text: up to there a character is a byte.
        max.saturating_sub(1)
    } else {
        // Counted once, up to the first character past `max`; the one before it found from there
        // backwards.
        match line.char_indices().nth(max) {
            None => return line.to_string(),
            Some((past, _)) => line[..past].char_indices().next_back().map_or(0, |(at, _)| at),
        }
    };
    let mut cut = String::with_capacity(end + '…'.len_utf8());
    cut.push_str(&line[..end]);
    cut.push('…');
    cut
}

/// `text` with its line breaks shown as ⏎, for table cells and list lines.
pub fn one_line(text: &str) -> String {
    if !text.contains('\n') {
        return text.trim_end().to_string();
    }
    one_line_chars(text).collect()
}

/// The characters of [`one_line`], read from `text` as they are wanted.
fn one_line_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    text.lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .enumerate()
        .flat_map(|(i, line)| if i > 0 { " ⏎ " } else { "" }.chars().chain(line.chars()))
}

/// `1 record`, `2 records`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What a search that found nothing says: `items` (records, events) of `branch`'s view, and
/// why when the query holds no word to look for (emoji and punctuation only separate words).
pub fn no_match(items: &str, branch: &str, query: &str) -> String {
    let found = format!("No {items} in {branch}'s view matches");
    if query.trim().is_empty() {
        return found;
    }
    let query = one_line(query);
    if memctl_core::search_words(&query).next().is_none() {
        return format!("{found}: '{query}' holds no word to look for (words are letters, digits and marks)");
    }
    format!("{found} '{query}'")
}

/// A search score with enough digits to tell results apart (bm25 scores can be tiny).
pub fn score(value: f64) -> String {
    if value == 0.0 || value.abs() >= 0.01 {
        format!("{value:.2}")
    } else {
        format!("{value:.1e}")
    }
}

/// Which layers of a view to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    All,
    Core,
    Recall,
    Archival,
}

/// The view as text, one section per layer in `scope` (see [`write_view`]).
pub fn view_text(view: &View, scope: Scope) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_view(&mut out, view, scope);
    out.pop();
    out
}

/// Writes the view as text, one section per layer in `scope`, each line ending in a line break:
/// as it is made, since a whole view can show 100,000 events.
pub fn write_view(out: &mut dyn fmt::Write, view: &View, scope: Scope) -> fmt::Result {
    let show = |wanted: Scope| scope == Scope::All || scope == wanted;
    if show(Scope::Core) {
        writeln!(out, "Core ({}):", count(view.core.len(), "key", "keys"))?;
        if !view.core.is_empty() {
            let rows: Vec<Vec<String>> = view
                .core
                .iter()
                .map(|e| vec![format!("  {}", e.key), one_line(&e.value), format!("← {}", e.branch)])
                .collect();
            writeln!(out, "{}", table(&["  KEY", "VALUE", "FROM"], &rows))?;
        }
    }
    if show(Scope::Recall) {
        writeln!(
            out,
            "Recall, {} (oldest first) and {} (newest first):",
            count(view.summaries.len(), "summary", "summaries"),
            count(view.events.len(), "event", "events")
        )?;
        for summary in &view.summaries {
            writeln!(out, "{}", summary_line(summary))?;
        }
        for event in &view.events {
            writeln!(out, "{}", event_line(event))?;
        }
    }
    if show(Scope::Archival) {
        writeln!(out, "Archival ({}, newest first):", count(view.archival.len(), "record", "records"))?;
        for record in &view.archival {
            writeln!(out, "{}", record_line(record))?;
        }
    }
    Ok(())
}

/// `#12  2026-01-02 03:04:05  [kind] text (tags: a, b)  ← branch`
pub fn event_line(event: &Event) -> EventLine<'_> {
    EventLine(event)
}

/// An event's line (see [`event_line`]), written where it is shown.
pub struct EventLine<'a>(&'a Event);

impl Display for EventLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written piece by piece, not by `write!`: a whole view writes a line per event, and
        // the padded id (a call per space) and the argument list cost a tenth of `read --all`.
        let event = self.0;
        let mut id = itoa::Buffer::new();
        let id = id.format(event.id);
        f.write_str("  #")?;
        f.write_str(id)?;
        // The id padded to five characters, then a space.
        f.write_str(&"      "[id.len().min(5)..])?;
        Display::fmt(&timestamp(event.ts), f)?;
        f.write_str("  [")?;
        f.write_str(&event.kind)?;
        f.write_str("] ")?;
        Display::fmt(&Indented(&event.text), f)?;
        Display::fmt(&tags_suffix(&event.tags), f)?;
        f.write_str("  ← ")?;
        f.write_str(&event.branch)
    }
}

/// `#12  [summary:kind] text (replaces N events)  ← branch`
pub fn summary_line(summary: &Summary) -> String {
    // (A conversation's retired summaries are folded into one that replaces no event.)
    let replaces = match summary.event_ids.len() {
        0 => String::new(),
        n => format!(" (replaces {})", count(n, "event", "events")),
    };
    format!(
        "  #{:<5} [summary:{}] {}{replaces}  ← {}",
        summary.id,
        summary.kind,
        Indented(&summary.text),
        summary.branch
    )
}

/// Text whose later lines are indented under the first line's text in a list of events.
struct Indented<'a>(&'a str);

impl Display for Indented<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line breaks found by memchr's vector search: most texts have none, and a whole view
        // writes thousands.
        let mut rest = self.0;
        while let Some(at) = memchr::memchr(b'\n', rest.as_bytes()) {
            f.write_str(&rest[..at])?;
            f.write_str("\n         ")?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// One line per record: id, score when searched, first line of text, tags, writer.
pub fn record_line(record: &Record) -> String {
    let score = record.score.map_or(String::new(), |s| format!("  score {}", score(s)));
    format!(
        "  #{:<5}{score}  {}{}  ← {}",
        record.id,
        excerpt(&record.text, 100),
        tags_suffix(&record.tags),
        record.branch
    )
}

/// The forest drawn with box characters, children in fork order.
pub fn tree(branches: &[Branch]) -> String {
    let label = |b: &Branch| {
        let name = match &b.node_uid {
            Some(uid) if uid != &b.id => format!("{}  ({uid})", b.id),
            _ => b.id.clone(),
        };
        match (b.status, &b.status_note) {
            (BranchStatus::Alive, None) => name,
            (status, None) => format!("{name}  [{}]", status.as_str()),
            (status, Some(note)) => format!("{name}  [{}: {}]", status.as_str(), excerpt(note, 40)),
        }
    };
    let children = |parent: Option<&str>| -> Vec<&Branch> {
        branches.iter().filter(|b| b.parent.as_deref() == parent).collect()
    };
    fn draw<'a>(
        out: &mut Vec<String>,
        node: &'a Branch,
        prefix: &str,
        children: &dyn Fn(Option<&str>) -> Vec<&'a Branch>,
        label: &dyn Fn(&Branch) -> String,
    ) {
        let kids = children(Some(&node.id));
        for (i, kid) in kids.iter().enumerate() {
            let last = i + 1 == kids.len();
            out.push(format!("{prefix}{}{}", if last { "└── " } else { "├── " }, label(kid)));
            let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
            draw(out, kid, &deeper, children, label);
        }
    }
    let mut out = Vec::new();
    for root in children(None) {
        out.push(label(root));
        draw(&mut out, root, "", &children, &label);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a terminal a stored escape sequence, carriage return or backspace shows as pictures;
    /// line breaks, tabs and other text stay as they are.
    #[test]
    fn a_terminal_is_shown_control_characters_as_pictures() {
        let mut out = TerminalSafe::new(Vec::new());
        out.write_all("ok\x1b[2K\rFAKE\x08\x7f é\tend\u{9b}2J ¢\n".as_bytes()).unwrap();
        // A C1 control split between two writes, and a character whose lead byte ends one.
        let (csi, cent) = ("\u{9b}".as_bytes(), "¢".as_bytes());
        for bytes in [&csi[..1], &csi[1..], &cent[..1], &cent[1..], &cent[..1]] {
            out.write_all(bytes).unwrap();
        }
        out.flush().unwrap();
        let shown = String::from_utf8_lossy(&out.out).into_owned();
        assert_eq!(shown, "ok\u{241b}[2K\u{240d}FAKE\u{2408}\u{2421} é\tend\u{FFFD}2J ¢\n\u{FFFD}¢\u{FFFD}");
    }

    /// Text written onto a failing output keeps its I/O error for the caller to report, which
    /// `fmt::Error` cannot carry, and stops at the first.
    #[test]
    fn text_onto_a_failing_output_keeps_its_error() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::StorageFull.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut text = IoText::new(Full);
        let written = fmt::write(&mut text, format_args!("{}\n", "line"));
        assert!(written.is_err());
        assert_eq!(text.error.map(|e| e.kind()), Some(std::io::ErrorKind::StorageFull));
    }

    /// Text written as it is made ends as text written whole, trimmed of its line breaks, then
    /// one: blank lines within it are kept, nothing is written for no text.
    #[test]
    fn text_written_as_it_is_made_ends_in_one_line_break() {
        let made = |pieces: &[&str]| {
            let mut text = IoText::new(Vec::new());
            for piece in pieces {
                fmt::Write::write_str(&mut text, piece).unwrap();
            }
            String::from_utf8(text.finish().unwrap()).unwrap()
        };
        assert_eq!(made(&["a\n", "\n", "b\n"]), "a\n\nb\n");
        assert_eq!(made(&["a\n", "note\n\n", "\n"]), "a\nnote\n");
        assert_eq!(made(&["a", "\n\n", "b"]), "a\n\nb\n");
        assert_eq!(made(&["\n\n"]), "\n");
        assert_eq!(made(&[]), "");
        assert_eq!(made(&[""]), "");
    }

    #[test]
    fn one_line_excerpts() {
        assert_eq!(excerpt("Core evicted: k\nvalue", 40), "Core evicted: k ⏎ value");
        assert_eq!(excerpt("abcdef", 4), "abc…");
        assert_eq!(count(1, "record", "records"), "1 record");
        assert_eq!(score(0.000012), "1.2e-5");
        assert_eq!(score(2.5), "2.50");
    }

    /// An excerpt is `one_line` cut to `max` characters, the last an ellipsis when cut.
    #[test]
    fn excerpts_cut_one_line() {
        let texts = [
            "",
            "a",
            "abc",
            "a\n\nb  \n c",
            "é\r\nà ⏎ ü\n",
            "\n\n",
            "line one\nline two\nthree",
            "  one line, indented \t ",
            "   ",
            "a\rb\r",
            "ééé àà",
        ];
        for text in texts {
            let whole: String = one_line_chars(text).collect();
            assert_eq!(one_line(text), whole, "{text:?}");
            for max in 0..whole.chars().count() + 3 {
                let expected = if whole.chars().count() > max {
                    whole.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
                } else {
                    whole.clone()
                };
                assert_eq!(excerpt(text, max), expected, "{text:?} {max}");
            }
        }
    }

    #[test]
    fn aligns_tables() {
        let t = table(&["KEY", "VALUE"], &[vec!["a".into(), "1".into()], vec!["longer".into(), "2".into()]]);
        assert_eq!(t, "KEY     VALUE\na       1\nlonger  2");
    }
}
