//! Recall memory (SPEC §4.3): the immutable timeline of events. Events leave a branch's view only
//! through exclusion rows written in that branch; summaries stand in for what they replaced.

use crate::archival::ArchivalWrite;
use crate::branch::BranchPath;
use crate::error::{Error, Result};
use crate::journal;
use crate::query::{bm25, Query, TermCounts};
use crate::store::{Store, Tx};
use crate::view;
use serde::Serialize;
use serde_json::json;
use std::borrow::Cow;

/// One recall event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: i64,
    pub branch: String,
    pub kind: String,
    pub text: String,
    pub tags: Vec<String>,
    pub ts: f64,
}

/// An append's journal arguments, capped, serialized straight from the borrowed values as
/// [`Tx::journal`] would serialize them (keys in order): appends are the hottest write.
#[derive(Serialize)]
struct AppendArgs<'a> {
    id: i64,
    kind: Cow<'a, str>,
    tags: Vec<Cow<'a, str>>,
    text: Cow<'a, str>,
}

impl<'a> AppendArgs<'a> {
    fn new(id: i64, kind: &'a str, text: &'a str, tags: &'a [String]) -> Self {
        let tags = tags.iter().map(|tag| journal::capped(tag)).collect();
        AppendArgs { id, kind: journal::capped(kind), tags, text: journal::capped(text) }
    }
}

/// A summary standing in for excluded events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub id: i64,
    pub branch: String,
    pub kind: String,
    pub text: String,
    pub event_ids: Vec<i64>,
    pub ts: f64,
}

/// Result of an append: the new id, or the existing identical event's id when skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AppendOutcome {
    pub id: i64,
    pub skipped: bool,
}

/// Which visible events to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictSelector {
    Oldest(usize),
    Kind(String),
    Ids(Vec<i64>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvictOutcome {
    pub evicted: Vec<i64>,
    /// The archival record holding the evicted events' full text.
    pub archived: Option<i64>,
}

/// The recall part of a view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallView {
    pub summaries: Vec<Summary>,
    /// Newest first.
    pub events: Vec<Event>,
}

impl Store {
    pub fn recall_append(
        &self,
        branch: &str,
        kind: &str,
        text: &str,
        tags: &[String],
    ) -> Result<AppendOutcome> {
        self.write(|tx| tx.recall_append(branch, kind, text, tags))
    }

    /// Summaries, then the newest `limit` events (all when None).
    pub fn recall_list(&self, branch: &str, limit: Option<usize>) -> Result<RecallView> {
        let path = self.path(branch)?;
        Ok(RecallView { summaries: view::summaries(self, &path)?, events: view::events(self, &path, limit)? })
    }

    /// Searches the whole visible timeline with archival search's semantics: words OR-ed,
    /// bm25 over the view's matching events (text, kind and tags), ties newest first.
    pub fn recall_search(&self, branch: &str, query: &str, k: usize) -> Result<Vec<Event>> {
        let path = self.path(branch)?;
        let query = Query::parse(query);
        let events = view::events(self, &path, None)?;
        if query.is_blank() {
            return Ok(events.into_iter().take(k).collect());
        }
        let (counts, events): (Vec<TermCounts>, Vec<Event>) = events
            .into_iter()
            .map(|e| {
                let mut haystacks: Vec<&str> = vec![&e.text, &e.kind];
                haystacks.extend(e.tags.iter().map(String::as_str));
                (query.term_counts(&haystacks), e)
            })
            .filter(|(counts, _)| counts.matches())
            .unzip();
        let mut scored: Vec<(f64, Event)> = bm25(&counts).into_iter().zip(events).collect();
        // Events come newest first, and a stable sort keeps ties in that order.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(scored.into_iter().take(k).map(|(_, e)| e).collect())
    }

    pub fn recall_evict(&self, branch: &str, selector: &EvictSelector) -> Result<EvictOutcome> {
        self.write(|tx| tx.recall_evict(branch, selector))
    }

    pub fn recall_exclude(&self, branch: &str, ids: &[i64]) -> Result<()> {
        self.write(|tx| tx.recall_exclude(branch, ids))
    }

    pub fn recall_summarize(&self, branch: &str, kind: &str, text: &str, ids: &[i64]) -> Result<i64> {
        self.write(|tx| tx.recall_summarize(branch, kind, text, ids))
    }
}

/// Where an event is stored: `events` is ordered by branch, then seq (rowid = bid · 2^40 + seq),
/// so a branch's events are one rowid range and the table needs no `(branch, seq)` index — one
/// page less to write per append.
fn event_rowid(bid: i64, seq: i64) -> Result<i64> {
    const SEQS: i64 = 1 << 40;
    // bid < 2^23 keeps bid · 2^40 + seq within an i64.
    if !(0..SEQS).contains(&seq) || !(0..1 << 23).contains(&bid) {
        return Err(Error::internal(format!(
            "event seq {seq} of branch {bid} is past what the events table can order (2^40 seqs, 2^23 branches)"
        )));
    }
    Ok(bid * SEQS + seq)
}

/// Tags as stored: trimmed, non-empty, one line, each once, order kept.
pub(crate) fn normalize_tags(tx: &Tx<'_>, tags: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim();
        if tag.is_empty() || tag.chars().any(char::is_control) {
            return Err(Error::invalid(format!("invalid tag {tag:?}: tags are non-empty single-line text")));
        }
        let tag = tx.redacted(tag);
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

pub(crate) fn content_hash(parts: &[&str]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    *hasher.finalize().as_bytes()
}

impl Tx<'_> {
    pub fn recall_append(
        &self,
        branch: &str,
        kind: &str,
        text: &str,
        tags: &[String],
    ) -> Result<AppendOutcome> {
        let kind = kind.trim();
        if kind.is_empty() || kind.chars().any(char::is_control) {
            return Err(Error::invalid("event kind must be non-empty single-line text"));
        }
        if text.trim().is_empty() {
            return Err(Error::invalid("event text must not be empty"));
        }
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let text = self.redacted(text);
        let tags = normalize_tags(self, tags)?;
        let outcome = self.insert_event(bid, kind, &text, &tags)?;
        if !outcome.skipped {
            let args = AppendArgs::new(outcome.id, kind, &text, &tags);
            self.journal_serialized(Some(bid), "recall.append", &serde_json::to_string(&args)?)?;
            self.auto_consolidate(&path)?;
        }
        Ok(outcome)
    }

    /// Stores one event in `bid` (text redacted and tags normalised by the caller) unless the
    /// branch holds an identical one: then that one's id, skipped.
    pub(crate) fn insert_event(
        &self,
        bid: i64,
        kind: &str,
        text: &str,
        tags: &[String],
    ) -> Result<AppendOutcome> {
        let tags_json = serde_json::to_string(tags)?;
        let hash = content_hash(&[kind, text, &tags_json]);
        // One statement in the common case: the unique (branch, text_hash) index turns a
        // duplicate into a no-op, and only then is the existing id looked up.
        let seq = self.peek_seq()?;
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO events(rid, seq, branch, kind, text, tags, text_hash, created_at, ordinal)
                 VALUES (?8, ?1, ?2, ?3, ?4, ?5, ?6, ?7,
                         coalesce((SELECT ordinal FROM events WHERE rid BETWEEN ?2 << 40 AND ?8
                                   ORDER BY rid DESC LIMIT 1), 0) + 1)
                 ON CONFLICT (branch, text_hash) DO NOTHING",
            )?
            .execute(rusqlite::params![
                seq,
                bid,
                kind,
                text,
                tags_json,
                hash,
                self.now(),
                event_rowid(bid, seq)?
            ])?;
        if inserted == 0 {
            let id = self
                .conn
                .prepare_cached("SELECT seq FROM events WHERE branch = ?1 AND text_hash = ?2")?
                .query_row(rusqlite::params![bid, hash], |r| r.get(0))?;
            return Ok(AppendOutcome { id, skipped: true });
        }
        self.next_seq()?;
        Ok(AppendOutcome { id: seq, skipped: false })
    }

    /// The visible events with these ids, oldest first; an id outside the view is an error.
    fn visible_events(&self, path: &BranchPath, ids: &[i64]) -> Result<Vec<Event>> {
        let mut events = view::events(self, path, None)?;
        events.reverse();
        for id in ids {
            if !events.iter().any(|e| e.id == *id) {
                return Err(Error::not_found(format!(
                    "event {id} is not in the view of branch '{}'",
                    path.branch().id
                )));
            }
        }
        events.retain(|e| ids.contains(&e.id));
        Ok(events)
    }

    pub(crate) fn insert_exclusions(&self, bid: i64, ids: &[i64]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO inherited_exclusions(seq, branch, event_id, created_at, ordinal)
             VALUES (?1, ?2, ?3, ?4,
                     coalesce((SELECT ordinal FROM inherited_exclusions WHERE branch = ?2
                               ORDER BY seq DESC LIMIT 1), 0) + 1)",
        )?;
        for id in ids {
            stmt.execute(rusqlite::params![self.next_seq()?, bid, id, self.now()])?;
        }
        Ok(())
    }

    /// Hides visible events from this branch's view (and its later descendants').
    pub fn recall_exclude(&self, branch: &str, ids: &[i64]) -> Result<()> {
        let path = self.path(branch)?;
        let events = self.visible_events(&path, ids)?;
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        self.insert_exclusions(path.branch().bid, &ids)?;
        self.journal(Some(path.branch().bid), "recall.exclude", json!({"ids": ids}))?;
        Ok(())
    }

    /// Replaces visible events by a summary: a summary row plus their exclusions (SPEC §2.1).
    pub fn recall_summarize(&self, branch: &str, kind: &str, text: &str, ids: &[i64]) -> Result<i64> {
        if text.trim().is_empty() {
            return Err(Error::invalid("summary text must not be empty"));
        }
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let ids: Vec<i64> = self.visible_events(&path, ids)?.iter().map(|e| e.id).collect();
        let seq = self.insert_summary(bid, kind, text, &ids, &[])?;
        self.insert_exclusions(bid, &ids)?;
        self.journal(Some(bid), "recall.summarize", json!({"id": seq, "kind": kind, "event_ids": ids}))?;
        Ok(seq)
    }

    /// Writes a summary row (redacted) standing in for `event_ids` and folding in `replaced`.
    pub(crate) fn insert_summary(
        &self,
        bid: i64,
        kind: &str,
        text: &str,
        event_ids: &[i64],
        replaced: &[i64],
    ) -> Result<i64> {
        let seq = self.next_seq()?;
        self.conn
            .prepare_cached(
                "INSERT INTO inherited_summaries
                     (seq, branch, kind, summary_text, summarized_event_ids, replaced_summary_ids, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(rusqlite::params![
                seq,
                bid,
                kind,
                self.redacted(text),
                serde_json::to_string(event_ids)?,
                serde_json::to_string(replaced)?,
                self.now()
            ])?;
        Ok(seq)
    }

    /// Moves visible events out of the branch's view after copying their full text to archival.
    pub fn recall_evict(&self, branch: &str, selector: &EvictSelector) -> Result<EvictOutcome> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let selected: Vec<Event> = match selector {
            EvictSelector::Ids(ids) => self.visible_events(&path, ids)?,
            EvictSelector::Oldest(n) => {
                let mut events = view::events(self, &path, None)?;
                events.reverse();
                events.truncate(*n);
                events
            }
            EvictSelector::Kind(kind) => {
                let mut events = view::events(self, &path, None)?;
                events.reverse();
                events.retain(|e| &e.kind == kind);
                events
            }
        };
        if selected.is_empty() {
            return Ok(EvictOutcome { evicted: vec![], archived: None });
        }
        let body: Vec<String> = selected.iter().map(|e| format!("[{}] {}", e.kind, e.text)).collect();
        let record = self.archival_insert(
            bid,
            ArchivalWrite::new(
                format!("Evicted recall events:\n{}", body.join("\n")),
                ["EVICTED_RECALL".into(), format!("event_count:{}", selected.len())],
            ),
        )?;
        let ids: Vec<i64> = selected.iter().map(|e| e.id).collect();
        self.insert_exclusions(bid, &ids)?;
        self.journal(Some(bid), "recall.evict", json!({"ids": ids, "archived": record.id}))?;
        Ok(EvictOutcome { evicted: ids, archived: Some(record.id) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arguments serialized from borrowed values are the bytes `Tx::journal` writes,
    /// strings past the cap included.
    #[test]
    fn append_args_serialize_as_the_journal_would() {
        let (long_text, long_kind, long_tag) = ("é".repeat(700), "k".repeat(600), "t".repeat(501));
        let cases = [
            ("note", "short text", vec!["phase:draft".to_string()]),
            ("plan", long_text.as_str(), vec![]),
            (long_kind.as_str(), "\"quoted\"\n\ttext", vec![long_tag.clone(), "y".to_string()]),
        ];
        for (kind, text, tags) in cases {
            let mut expected = json!({"id": 7, "kind": kind, "text": text, "tags": tags});
            journal::cap(&mut expected);
            let args = AppendArgs::new(7, kind, text, &tags);
            assert_eq!(serde_json::to_string(&args).unwrap(), expected.to_string());
        }
    }
}
