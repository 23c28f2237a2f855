//! The operation journal (SPEC §8): one `ops` row per mutation, with its arguments redacted
//! and capped, and the phase and actor of the writer.

use crate::db::{params, Row};
use crate::error::Result;
use crate::store::{Store, Tx};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// Longest string kept in a journal row's arguments.
const MAX_ARG_CHARS: usize = 500;

/// One journal row. Fields in sorted order: written straight, its JSON reads as through a
/// `Value` (`why --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Op {
    pub actor: Option<String>,
    /// The branch written, if any.
    pub branch: Option<String>,
    pub details: Details,
    pub node_uid: Option<String>,
    pub op: String,
    pub phase: Option<String>,
    pub seq: i64,
    pub ts: f64,
}

/// A journal row's arguments: the JSON object as stored, written out as it is (null if the
/// stored text is not JSON) — `why` reads thousands of rows, and its text shows none. Every
/// writer stores them as serde_json writes a [`Value`], compact with keys sorted, so written
/// straight they read as they do through a `Value`. (A row stored otherwise, by hand, goes out
/// as stored: the same JSON, spelled its way.)
#[derive(Debug, Clone, PartialEq)]
pub struct Details(String);

impl Details {
    /// The stored text, if it is JSON.
    fn raw(&self) -> Option<&RawValue> {
        serde_json::from_str(&self.0).ok()
    }
}

impl std::fmt::Display for Details {
    /// The stored JSON, as it is written out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.raw().map_or("null", RawValue::get))
    }
}

impl Serialize for Details {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.raw() {
            Some(raw) => raw.serialize(serializer),
            None => serializer.serialize_unit(),
        }
    }
}

impl Tx<'_> {
    /// Writes the journal row of one mutation (SPEC §8), its arguments capped.
    pub(crate) fn journal(&self, bid: Option<i64>, op: &str, mut args: Value) -> Result<()> {
        cap(&mut args);
        self.insert_op(bid, op, &serde_json::to_string(&args)?)
    }
}

/// Arguments as journalled: every string cut to [`MAX_ARG_CHARS`]. Callers pass text as it was
/// stored, so it is already redacted.
pub(crate) fn cap(value: &mut Value) {
    cap_strings(value, MAX_ARG_CHARS);
}

/// The journal arguments of a write of one row with a text and tags (a recall append, with
/// its kind; an archival add), capped, serialized straight from the borrowed values as
/// [`Tx::journal`] would serialize them (keys in order, a missing kind left out): the hottest
/// writes, which would otherwise build a [`Value`] of their text and walk it to cap it.
#[derive(Serialize)]
pub(crate) struct RecordArgs<'a> {
    id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<Cow<'a, str>>,
    tags: Vec<Cow<'a, str>>,
    text: Cow<'a, str>,
}

impl<'a> RecordArgs<'a> {
    pub(crate) fn new(id: i64, kind: Option<&'a str>, text: &'a str, tags: &'a [String]) -> Self {
        let tags = tags.iter().map(|tag| capped(tag)).collect();
        RecordArgs { id, kind: kind.map(capped), tags, text: capped(text) }
    }
}

/// One string argument as journalled (see [`cap`]).
pub(crate) fn capped(s: &str) -> Cow<'_, str> {
    cut(s, MAX_ARG_CHARS)
}

/// `s` cut to `max` characters, the cut marked with "…".
pub(crate) fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        // No more characters than bytes: nothing to count.
        return Cow::Borrowed(s);
    }
    // Where the first `max` bytes are ASCII they are the first `max` characters: the cut is
    // found without decoding them one by one (most journalled texts, an archival write's too).
    let end = match s.as_bytes()[..max].is_ascii() {
        true => Some(max),
        false => s.char_indices().nth(max).map(|(end, _)| end),
    };
    match end {
        Some(end) => Cow::Owned(format!("{}…", &s[..end])),
        None => Cow::Borrowed(s),
    }
}

/// Cuts every string inside `value` to `max` characters, marking the cut with "…".
pub(crate) fn cap_strings(value: &mut Value, max: usize) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(cut) = cut(s, max) {
                *s = cut;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| cap_strings(item, max)),
        Value::Object(map) => map.values_mut().for_each(|item| cap_strings(item, max)),
        _ => {}
    }
}

impl Store {
    /// Journal rows, oldest first: all of them, or one branch's (collected ones too: their
    /// journal is the history); only the newest `limit`.
    pub fn ops(&self, branch: Option<&str>, limit: Option<usize>) -> Result<Vec<Op>> {
        let bid = branch.map(|name| self.journal_bid(name)).transpose()?;
        let sql = format!(
            "SELECT * FROM ({OP_SELECT} WHERE CAST(?1 AS BIGINT) IS NULL OR o.branch = ?1 ORDER BY o.seq DESC LIMIT ?2) o ORDER BY 1"
        );
        let limit = limit.map_or(i64::MAX, |n| n as i64);
        self.conn.query(&sql, params![bid, limit], op_from_row)
    }

    /// The journal rows of the mutations that wrote the rows at `seqs`, in their order. A
    /// transaction takes its seqs in one run and journals each mutation right after its rows,
    /// so a row's journal row is the first one after its seq.
    pub(crate) fn journal_entries_of(&self, seqs: &[i64]) -> Result<Vec<Option<Op>>> {
        // A mutation's last row has its journal row at the next seq, read by its key; most
        // mutations write one row. The rows before a last one search for the first journal row
        // after them (a subquery per row, which makes a row's read cost about 40% more).
        let mut entries = self.journal_rows_at(seqs, "j.value + 1")?;
        let missed: Vec<usize> = (0..seqs.len()).filter(|&at| entries[at].is_none()).collect();
        if !missed.is_empty() {
            let missed_seqs: Vec<i64> = missed.iter().map(|&at| seqs[at]).collect();
            let first_after = "(SELECT min(seq) FROM ops WHERE seq > j.value)";
            for (at, entry) in missed.into_iter().zip(self.journal_rows_at(&missed_seqs, first_after)?) {
                entries[at] = entry;
            }
        }
        Ok(entries)
    }

    /// For each of `seqs` (as `j.value`), the journal row at the seq `op_seq` gives, if any.
    fn journal_rows_at(&self, seqs: &[i64], op_seq: &str) -> Result<Vec<Option<Op>>> {
        let sql = format!(
            "SELECT j.key, o.* FROM {} j JOIN ({OP_SELECT}) o ON o.seq = {op_seq}",
            self.backend().json_ints("?1")
        );
        let mut entries = vec![None; seqs.len()];
        self.conn.query(&sql, [serde_json::to_string(seqs)?], |row| {
            let at = row.get::<usize>(0)?;
            entries[at] = Some(op_from_row_at(row, 1)?);
            Ok(())
        })?;
        Ok(entries)
    }
}

const OP_SELECT: &str = "SELECT o.seq, o.op, b.id, b.node_uid, o.phase, o.actor, o.created_at, o.args
                         FROM ops o LEFT JOIN branches b ON b.bid = o.branch";

fn op_from_row(row: &Row<'_>) -> Result<Op> {
    op_from_row_at(row, 0)
}

/// An [`OP_SELECT`] row whose columns start at `first`.
fn op_from_row_at(row: &Row<'_>, first: usize) -> Result<Op> {
    Ok(Op {
        seq: row.get(first)?,
        op: row.get(first + 1)?,
        branch: row.get(first + 2)?,
        node_uid: row.get(first + 3)?,
        phase: row.get(first + 4)?,
        actor: row.get(first + 5)?,
        ts: row.get(first + 6)?,
        details: Details(row.get(first + 7)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The arguments serialized from borrowed values are the bytes `Tx::journal` writes,
    /// strings past the cap included, with a kind or without.
    #[test]
    fn record_args_serialize_as_the_journal_would() {
        let (long_text, long_kind, long_tag) = ("é".repeat(700), "k".repeat(600), "t".repeat(501));
        let cases = [
            (Some("note"), "short text", vec!["phase:draft".to_string()]),
            (Some("plan"), long_text.as_str(), vec![]),
            (Some(long_kind.as_str()), "\"quoted\"\n\ttext", vec![long_tag.clone(), "y".to_string()]),
            (None, long_text.as_str(), vec!["BENCH".to_string(), long_tag.clone()]),
            (None, "a", vec![]),
        ];
        for (kind, text, tags) in cases {
            let mut expected = match kind {
                Some(kind) => serde_json::json!({"id": 7, "kind": kind, "text": text, "tags": tags}),
                None => serde_json::json!({"id": 7, "text": text, "tags": tags}),
            };
            cap(&mut expected);
            let args = RecordArgs::new(7, kind, text, &tags);
            assert_eq!(serde_json::to_string(&args).unwrap(), expected.to_string());
        }
    }

    proptest! {
        /// A cut keeps the first `max` characters, whatever their widths.
        #[test]
        fn a_cut_keeps_the_first_characters(text in "[ab é€🚀]{0,24}", max in 0usize..20) {
            let kept: String = text.chars().take(max).collect();
            let expected = match kept.len() < text.len() {
                true => format!("{kept}…"),
                false => text.clone(),
            };
            prop_assert_eq!(cut(&text, max), expected);
        }
    }

    /// Arguments are written out as stored, straight or through a `Value`; a stored text that is
    /// not JSON is written as null.
    #[test]
    fn details_are_written_as_stored() {
        let stored = r#"{"id":7,"tags":["a"],"text":"é \" \u0001"}"#;
        let details = Details(stored.to_string());
        assert_eq!(serde_json::to_string(&details).unwrap(), stored);
        assert_eq!(serde_json::to_value(&details).unwrap().to_string(), stored);
        assert_eq!(details.to_string(), stored);
        let damaged = Details("{\"id\":".to_string());
        assert_eq!(serde_json::to_string(&damaged).unwrap(), "null");
        assert_eq!(serde_json::to_value(&damaged).unwrap(), Value::Null);
        assert_eq!(damaged.to_string(), "null");
    }
}
