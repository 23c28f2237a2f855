//! Text rendering shared by the commands (timestamps, aligned tables, tag lists) and the error
//! report of SPEC §9: `Error: …` plus a hint, or `{"error":{kind, message}}` with `--json`.

use memctl_core::Error;
use serde_json::json;

pub fn print_error(error: &Error, json: bool) {
    if json {
        let mut body = json!({"kind": error.kind().as_str(), "message": error.message()});
        if let Some(hint) = error.hint() {
            body["hint"] = json!(hint);
        }
        eprintln!("{}", json!({ "error": body }));
    } else {
        eprintln!("Error: {}", error.message());
        if let Some(hint) = error.hint() {
            eprintln!("hint: {hint}");
        }
    }
}

/// `2026-01-02 03:04:05` (UTC) for epoch seconds.
pub fn timestamp(epoch: f64) -> String {
    let secs = epoch.floor() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Proleptic Gregorian date of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// ` (tags: a, b)`, or nothing without tags.
pub fn tags_suffix(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(" (tags: {})", tags.join(", "))
    }
}

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

/// The first line of `text`, cut to `max` characters with an ellipsis.
pub fn excerpt(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("");
    let more_lines = text.lines().nth(1).is_some();
    if first.chars().count() > max {
        first.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else if more_lines {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_timestamps() {
        assert_eq!(timestamp(0.0), "1970-01-01 00:00:00");
        assert_eq!(timestamp(1_700_000_000.9), "2023-11-14 22:13:20");
        assert_eq!(timestamp(951_782_400.0), "2000-02-29 00:00:00");
    }

    #[test]
    fn aligns_tables() {
        let t = table(&["KEY", "VALUE"], &[vec!["a".into(), "1".into()], vec!["longer".into(), "2".into()]]);
        assert_eq!(t, "KEY     VALUE\na       1\nlonger  2");
    }
}
