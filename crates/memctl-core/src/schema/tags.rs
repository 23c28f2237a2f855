//! Tags as the schema stores them: a JSON array of strings in a `tags` column, written by
//! [`to_json`] and read by [`parse`]. Whether a row carries a filter's tags is decided on
//! SQLite by `memctl_has_tags`, registered here, in every statement that filters by tags
//! (view/sql.rs `has_tags`); PostgreSQL's statements spell the same test in SQL, which a test
//! here holds to the same answers.

use crate::error::Result;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Tags as stored (and as a filter is bound): a JSON array of strings.
pub(crate) fn to_json(tags: &[String]) -> Result<String> {
    Ok(serde_json::to_string(tags)?)
}

/// Tags from their stored JSON array of strings: the common form directly (a whole view
/// parses thousands), anything else through serde_json (malformed: none).
pub(crate) fn parse(json: &str) -> Vec<String> {
    match plain(json) {
        Some(tags) => tags.into_iter().map(str::to_string).collect(),
        None => serde_json::from_str(json).unwrap_or_default(),
    }
}

/// Whether the stored tags `json` hold every tag of `wanted`, each whole and equal.
fn carries_all(json: &str, wanted: &[String]) -> bool {
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
/// tags) and a JSON array of the wanted tags, parsed once per statement; a filter that is not
/// one (NULL included: `has_tags` leaves the function out without a filter) is an error, never
/// a filter that every row passes. The same test in SQL, two `json_each` scans a row, cost
/// some 11,700 instructions a row: a listing by a tag that no record carries, which tests
/// every record of the view, took 40% longer.
pub(crate) fn register(conn: &Connection) -> Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("memctl_has_tags", 2, flags, |ctx| {
        let wanted = ctx.get_or_create_aux(1, |filter| -> std::result::Result<Vec<String>, BoxError> {
            Ok(serde_json::from_str(filter.as_str()?)?)
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
        assert!(!has(None, r#"["a"]"#));
        for bad in ["nonsense", r#"{"a":1}"#] {
            let asked = conn.query_row("SELECT memctl_has_tags('[]', ?1)", [bad], |r| r.get::<_, bool>(0));
            assert!(asked.is_err(), "{bad}");
        }
    }

    proptest! {
        /// Any tags, as memctl stores them, read back as they were.
        #[test]
        fn stored_tags_read_back(tags in prop::collection::vec(".{0,8}", 0..4)) {
            prop_assert_eq!(parse(&to_json(&tags).unwrap()), tags);
        }

        /// On any tags memctl stores and any filter, the function answers as the test that
        /// PostgreSQL's statements spell in SQL (view/sql.rs `has_tags`), run here on SQLite.
        #[test]
        fn the_function_agrees_with_the_sql_spelling(
            tags in prop::collection::vec("[ab\"\\\\é\n:/ -]{0,3}", 0..4),
            wanted in prop::collection::vec("[ab\"\\\\é\n:/ -]{0,3}", 1..3),
        ) {
            let conn = Connection::open_in_memory().unwrap();
            register(&conn).unwrap();
            let (tags, wanted) = (to_json(&tags).unwrap(), to_json(&wanted).unwrap());
            let (function, spelled): (bool, bool) = conn.query_row(
                "SELECT memctl_has_tags(?1, ?2), NOT EXISTS (SELECT 1 FROM json_each(?2) want
                     WHERE want.value NOT IN (SELECT have.value FROM json_each(?1) have))",
                [&tags, &wanted],
                |r| Ok((r.get(0)?, r.get(1)?)),
            ).unwrap();
            prop_assert_eq!(function, spelled, "{} in {}", wanted, tags);
        }

        /// `carries_all` is a whole-tag subset test on any stored form.
        #[test]
        fn carries_all_is_a_subset_test(
            tags in prop::collection::vec("[ab\"\\\\é:-]{0,3}", 0..4),
            wanted in prop::collection::vec("[ab\"\\\\é:-]{0,3}", 0..3),
        ) {
            let json = to_json(&tags).unwrap();
            prop_assert_eq!(carries_all(&json, &wanted), wanted.iter().all(|w| tags.contains(w)));
        }
    }
}
