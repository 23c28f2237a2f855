//! Text rendering shared by the commands: stdout, timestamps, aligned tables, tag lists.

use std::io::Write;

/// Writes one line of data to stdout. A closed pipe (`memctl … | head -1`) ends the output
/// quietly, as for any Unix filter, instead of a panic.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(err) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("Error: cannot write to stdout: {err}");
        std::process::exit(i32::from(crate::failure::exit_code(memctl_core::ErrorKind::Internal)));
    }
}

/// `2026-01-02 03:04:05` (UTC) for epoch seconds.
pub fn timestamp(epoch: f64) -> String {
    memctl_core::utc_datetime(epoch)
}

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
    let one_line = one_line(text);
    if one_line.chars().count() > max {
        one_line.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else {
        one_line
    }
}

/// `text` with its line breaks shown as ⏎, for table cells and list lines.
pub fn one_line(text: &str) -> String {
    text.lines().map(str::trim_end).filter(|line| !line.is_empty()).collect::<Vec<_>>().join(" ⏎ ")
}

/// `1 record`, `2 records`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A search score with enough digits to tell results apart (bm25 scores can be tiny).
pub fn score(value: f64) -> String {
    if value == 0.0 || value.abs() >= 0.01 {
        format!("{value:.2}")
    } else {
        format!("{value:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_excerpts() {
        assert_eq!(excerpt("Core evicted: k\nvalue", 40), "Core evicted: k ⏎ value");
        assert_eq!(excerpt("abcdef", 4), "abc…");
        assert_eq!(count(1, "record", "records"), "1 record");
        assert_eq!(score(0.000012), "1.2e-5");
        assert_eq!(score(2.5), "2.50");
    }

    #[test]
    fn aligns_tables() {
        let t = table(&["KEY", "VALUE"], &[vec!["a".into(), "1".into()], vec!["longer".into(), "2".into()]]);
        assert_eq!(t, "KEY     VALUE\na       1\nlonger  2");
    }
}
