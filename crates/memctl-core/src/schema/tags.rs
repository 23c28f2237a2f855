//! Tags as the schema stores them: a JSON array of strings in a `tags` column. Whether a row
//! carries a filter's tags is decided here alone on SQLite, for its statements
//! (`memctl_has_tags`) and for reads that check rows themselves; PostgreSQL's statements spell
//! the same test in SQL.

use crate::error::Result;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

/// Tags from their stored JSON array of strings: the common form directly (a whole view
/// parses thousands), anything else through serde_json (malformed: none).
pub(crate) fn parse(json: &str) -> Vec<String> {
    match plain(json) {
        Some(tags) => tags.into_iter().map(str::to_string).collect(),
        None => serde_json::from_str(json).unwrap_or_default(),
    }
}

/// Whether the stored tags `json` hold every tag of `wanted`, each whole and equal.
pub(crate) fn carries_all(json: &str, wanted: &[String]) -> bool {
    match plain(json) {
        Some(tags) => wanted.iter().all(|tag| tags.contains(&tag.as_str())),
        None => {
            let tags = parse(json);
            wanted.iter().all(|tag| tags.contains(tag))
        }
    }
}

/// `["a","b"]`, as memctl writes tags that need no escapes: then every quote in the array
/// delimits a tag, and the tags stand in it as they are. None for any other form.
fn plain(json: &str) -> Option<Vec<&str>> {
    if json == "[]" {
        return Some(Vec::new());
    }
    let mut rest = json.strip_prefix("[\"")?.strip_suffix("\"]")?;
    let mut tags = Vec::with_capacity(2);
    loop {
        match rest.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20) {
            None => {
                tags.push(rest);
                return Some(tags);
            }
            Some(end) if rest[end..].starts_with("\",\"") => {
                tags.push(&rest[..end]);
                rest = &rest[end + 3..];
            }
            Some(_) => return None,
        }
    }
}

/// Registers `memctl_has_tags(tags, wanted)`: [`carries_all`] of a `tags` column (NULL: no
/// tags) and a JSON array of the wanted tags, parsed once per statement. The same test in SQL,
/// two `json_each` scans a row, cost some 11,700 instructions a row: a listing by a tag that
/// no record carries, which tests every record of the view, took 40% longer.
pub(crate) fn register(conn: &Connection) -> Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("memctl_has_tags", 2, flags, |ctx| {
        let wanted = ctx.get_or_create_aux(1, |filter| -> rusqlite::Result<Vec<String>> {
            Ok(serde_json::from_str(filter.as_str()?).unwrap_or_default())
        })?;
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => wanted.is_empty(),
            tags => carries_all(tags.as_str()?, &wanted),
        })
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_tags_as_json_does() {
        for json in [
            r#"[]"#,
            r#"[""]"#,
            r#"["a"]"#,
            r#"["a","b c"]"#,
            r#"["a", "b"]"#,
            r#"["a\"b"]"#,
            r#"["é","x\ny"]"#,
            "[\"a\tb\"]",
            "nonsense",
            r#"["a"],["b"]"#,
        ] {
            let expected: Vec<String> = serde_json::from_str(json).unwrap_or_default();
            assert_eq!(parse(json), expected, "{json}");
        }
    }

    /// The SQL function answers as `carries_all` does, on plain and escaped forms, NULL tags
    /// and an empty filter.
    #[test]
    fn the_sql_function_is_carries_all() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let has = |tags: Option<&str>, wanted: &str| -> bool {
            conn.query_row("SELECT memctl_has_tags(?1, ?2)", rusqlite::params![tags, wanted], |r| r.get(0))
                .unwrap()
        };
        assert!(has(Some(r#"["a","b"]"#), r#"["b"]"#));
        assert!(has(Some(r#"["a","b"]"#), r#"["b","a"]"#));
        assert!(!has(Some(r#"["a","b"]"#), r#"["a","c"]"#));
        assert!(!has(Some(r#"["kind-error"]"#), r#"["kind:error"]"#));
        assert!(has(Some(r#"["a\"b","x\ny"]"#), r#"["x\ny"]"#));
        assert!(!has(Some(r#"["ab"]"#), r#"["a"]"#));
        assert!(has(Some("[]"), "[]"));
        assert!(has(None, "[]"));
        assert!(!has(None, r#"["a"]"#));
    }

    proptest! {
        /// Any tags, as memctl stores them, read back as they were.
        #[test]
        fn stored_tags_read_back(tags in prop::collection::vec(".{0,8}", 0..4)) {
            prop_assert_eq!(parse(&serde_json::to_string(&tags).unwrap()), tags);
        }

        /// `carries_all` is a whole-tag subset test on any stored form.
        #[test]
        fn carries_all_is_a_subset_test(
            tags in prop::collection::vec("[ab\"\\\\é:-]{0,3}", 0..4),
            wanted in prop::collection::vec("[ab\"\\\\é:-]{0,3}", 0..3),
        ) {
            let json = serde_json::to_string(&tags).unwrap();
            prop_assert_eq!(carries_all(&json, &wanted), wanted.iter().all(|w| tags.contains(w)));
        }
    }
}
