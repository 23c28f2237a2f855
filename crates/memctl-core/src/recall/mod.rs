//! Recall memory (SPEC §4.3): the immutable timeline of events. Events leave a branch's view only
//! through exclusion rows written in that branch; summaries stand in for what they replaced.

mod consolidate;

pub use consolidate::{ConsolidateOutcome, SUMMARY_MAX_CHARS};

use crate::archival::ArchivalWrite;
use crate::db::params;
use crate::error::{Error, Result};
use crate::journal;
use crate::query::{ranked, Query};
use crate::rows::{is_step, AppendOutcome, Branch, BranchPath, Event, Summary};
use crate::schema::{event_rid, tags};
use crate::store::{Store, Tx};
use crate::stored_text::{content_hash, normalize_tags};
use crate::view::{self, Counted};
use serde::Serialize;
use serde_json::json;
use std::sync::LazyLock;

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

/// The most kept summaries a summary row records. Summaries written by hand fold nothing, so a
/// view may keep many; recording them all in every row would grow with their square. Past
/// this, rows record nothing and readers read them one by one, as the summaries they return
/// are that many anyway.
const RECORDED_SUMMARIES: usize = 128;

impl Store {
    /// Summaries, then the newest `limit` events (all when None).
    pub fn recall_list(&self, branch: &str, limit: Option<usize>) -> Result<RecallView> {
        let path = self.window_path(branch, limit)?;
        Ok(RecallView {
            summaries: view::named_summaries(self, &path)?,
            events: view::events(self, &path, limit)?,
        })
    }

    /// Searches the whole visible timeline with archival search's semantics: words OR-ed,
    /// bm25 over the view's matching events (text, kind and tags), ties newest first. Events
    /// are counted as they are read; only the `k` best are built.
    pub fn recall_search(&self, branch: &str, query: &str, k: usize) -> Result<Vec<Event>> {
        let query = Query::parse(query);
        if k == 0 || query.matches_nothing() {
            // (An unknown branch is still an error.)
            self.branch(branch)?;
            return Ok(vec![]);
        }
        if query.is_blank() {
            return self.read(|| view::events(self, &*self.window_path(branch, Some(k))?, Some(k)));
        }
        let path = self.path(branch)?;
        self.read(|| {
            let ranked = ranked(view::event_keyword_matches(self, &path, &query)?, k);
            let ids: Vec<i64> = ranked.into_iter().map(|(_, id)| id).collect();
            view::events_in_order(self, &path, &ids)
        })
    }
}

/// The events as [`Tx::insert_exclusions`] takes them: each id, and whether it is a step.
pub(crate) fn excluded(events: &[Event]) -> impl Iterator<Item = (i64, bool)> + '_ {
    events.iter().map(|e| (e.id, is_step(&e.kind)))
}

impl Tx<'_> {
    /// Appends an event; over the threshold, the branch's recall is then consolidated.
    pub fn recall_append(
        &self,
        branch: &str,
        kind: &str,
        text: &str,
        tags: &[String],
    ) -> Result<AppendOutcome> {
        let outcome = self.recall_append_unconsolidated(branch, kind, text, tags)?;
        if !outcome.skipped {
            self.auto_consolidate(&self.branch_for_write(branch)?)?;
        }
        Ok(outcome)
    }

    /// [`Tx::recall_append`] without the consolidation that may follow: `apply` runs it once
    /// after its block's operations, so that they act on the view as the block found it.
    pub(crate) fn recall_append_unconsolidated(
        &self,
        branch: &str,
        kind: &str,
        text: &str,
        tags: &[String],
    ) -> Result<AppendOutcome> {
        let kind = &self.recall_kind(kind)?;
        if text.trim().is_empty() {
            return Err(Error::invalid("event text must not be empty"));
        }
        let branch = self.branch_for_write(branch)?;
        let bid = branch.bid;
        let text = self.redacted(text);
        let tags = normalize_tags(self, tags)?;
        let outcome = self.insert_event(&branch, kind, &text, &tags)?;
        if !outcome.skipped {
            let args = journal::RecordArgs::new(outcome.id, Some(kind), &text, &tags);
            self.insert_op(Some(bid), "recall.append", &serde_json::to_string(&args)?)?;
        }
        Ok(outcome)
    }

    /// Stores one event in `bid` (text redacted and tags normalised by the caller) unless the
    /// branch holds an identical one in its view: then that one's id, skipped.
    pub(crate) fn insert_event(
        &self,
        branch: &Branch,
        kind: &str,
        text: &str,
        tags: &[String],
    ) -> Result<AppendOutcome> {
        let bid = branch.bid;
        let tags_json = tags::to_json(tags)?;
        let hash = content_hash(&[kind, text, &tags_json]);
        // One statement in the common case: the unique (branch, text_hash) index turns a
        // duplicate into a no-op, and only then is the existing id looked up.
        let seq = self.peek_seq()?;
        if !self.insert_event_row(bid, seq, kind, text, &tags_json, &hash, None)? {
            let id: i64 = self.conn.query_one(
                "SELECT seq FROM events WHERE branch = ?1 AND text_hash = ?2",
                params![bid, hash],
                |r| r.get(0),
            )?;
            // The branch's own event: the nearest branch of its path holds it.
            if !view::events_among(self, &*self.near_path(&branch.id, 1)?, &[id])?.is_empty() {
                return Ok(AppendOutcome { id, skipped: true });
            }
            // The identical event left the branch's view (evicted, consolidated): this one is
            // new. The old row stays for the views that still show it; only its duplicate key
            // moves aside, so that the new one is the one later appends find.
            let aside = content_hash(&[kind, text, &tags_json, &id.to_string()]);
            self.conn.execute(
                "UPDATE events SET text_hash = ?2 WHERE rid = ?1",
                params![event_rid::of(bid, id)?, aside],
            )?;
            let inserted = self.insert_event_row(bid, seq, kind, text, &tags_json, &hash, None)?;
            debug_assert!(inserted, "the duplicate key was moved aside");
        }
        self.next_seq()?;
        Ok(AppendOutcome { id: seq, skipped: false })
    }

    /// Stores a conversation step (kind `step:…`, readable text, JSON payload) in `bid`. Steps
    /// are never deduplicated: the same words can be said twice.
    pub(crate) fn insert_step(&self, bid: i64, kind: &str, text: &str, payload: &str) -> Result<i64> {
        let seq = self.peek_seq()?;
        let hash = content_hash(&[kind, text, payload, &seq.to_string()]);
        self.insert_event_row(bid, seq, kind, text, "[]", &hash, Some(payload))?;
        self.next_seq()?;
        Ok(seq)
    }

    /// One events row; false when the branch already holds one with the same hash.
    #[allow(clippy::too_many_arguments)]
    fn insert_event_row(
        &self,
        bid: i64,
        seq: i64,
        kind: &str,
        text: &str,
        tags_json: &str,
        hash: &[u8; 32],
        payload: Option<&str>,
    ) -> Result<bool> {
        // Built once: every append runs it.
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "INSERT INTO events(rid, seq, branch, kind, text, tags, text_hash, created_at, ordinal, steps,
                                    payload)
                 VALUES (?8, ?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(({}), 0) + 1, coalesce(({}), 0) + ?10, ?9)
                 ON CONFLICT (branch, text_hash) DO NOTHING",
                view::last_count("events", Counted::Events, "?2"),
                view::last_count("events", Counted::Steps, "?2")
            )
        });
        let step = i64::from(is_step(kind));
        let rid = event_rid::of(bid, seq)?;
        let params = params![seq, bid, kind, text, tags_json, hash, self.now(), rid, payload, step];
        Ok(self.conn.execute(&SQL, params)? > 0)
    }

    /// The visible events with these ids, oldest first, each once; an id outside the view is an
    /// error. Each is looked up by its id, so the cost follows the ids, not the view.
    fn visible_events(&self, path: &BranchPath, ids: &[i64]) -> Result<Vec<Event>> {
        let mut wanted = ids.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let mut events = view::events_among(self, path, &wanted)?;
        events.reverse();
        if let Some(id) = ids.iter().find(|&&id| events.binary_search_by_key(&id, |e| e.id).is_err()) {
            return Err(Error::not_found(format!(
                "event {id} is not in the view of branch '{}'",
                path.branch().id
            )));
        }
        Ok(events)
    }

    /// Hides visible events from branch `bid`'s view: each `(id, step)`, `step` telling whether
    /// it is a conversation step (its kind `step:…`), which the view's count of steps needs.
    pub(crate) fn insert_exclusions(
        &self,
        bid: i64,
        excluded: impl IntoIterator<Item = (i64, bool)>,
    ) -> Result<()> {
        let sql = format!(
            "INSERT INTO inherited_exclusions(seq, branch, event_id, created_at, ordinal, steps)
             VALUES (?1, ?2, ?3, ?4, coalesce(({}), 0) + 1, coalesce(({}), 0) + ?5)",
            view::last_count("inherited_exclusions", Counted::Events, "?2"),
            view::last_count("inherited_exclusions", Counted::Steps, "?2")
        );
        for (id, step) in excluded {
            self.conn.execute(&sql, params![self.next_seq()?, bid, id, self.now(), i64::from(step)])?;
        }
        Ok(())
    }

    /// Hides visible events from this branch's view (and its later descendants').
    pub fn recall_exclude(&self, branch: &str, ids: &[i64]) -> Result<()> {
        let path = self.path(branch)?;
        let events = self.visible_events(&path, ids)?;
        self.insert_exclusions(path.branch().bid, excluded(&events))?;
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        self.journal(Some(path.branch().bid), "recall.exclude", json!({"ids": ids}))?;
        Ok(())
    }

    /// Replaces visible events by a summary: a summary row plus their exclusions (SPEC §2.1).
    pub fn recall_summarize(&self, branch: &str, kind: &str, text: &str, ids: &[i64]) -> Result<i64> {
        if text.trim().is_empty() {
            return Err(Error::invalid("summary text must not be empty"));
        }
        let kind = &self.recall_kind(kind)?;
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let events = self.visible_events(&path, ids)?;
        if let Some(step) = events.iter().find(|e| is_step(&e.kind)) {
            return Err(Error::invalid(format!(
                "event {} is a conversation step: `memctl compact` summarizes the conversation",
                step.id
            )));
        }
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        let mut kept = self.kept_summaries(&path)?;
        let seq = self.insert_summary(bid, &mut kept, kind, text, &ids, &[])?;
        self.insert_exclusions(bid, excluded(&events))?;
        self.journal(Some(bid), "recall.summarize", json!({"id": seq, "kind": kind, "event_ids": ids}))?;
        Ok(seq)
    }

    /// The ids of the summaries `path`'s view keeps, as [`Tx::insert_summary`] takes them.
    pub(crate) fn kept_summaries(&self, path: &BranchPath) -> Result<Vec<i64>> {
        Ok(view::summaries(self, path)?.iter().map(|s| s.id).collect())
    }

    /// Writes a summary row (redacted) in branch `bid`, standing in for `event_ids` and folding
    /// in `replaced`. `kept` holds the ids of the summaries the branch's view keeps (as
    /// `view::summaries` reads them), and is brought up to date: `replaced` leave, this one
    /// comes. The row records them for readers (see `view::summaries`), unless they are more
    /// than [`RECORDED_SUMMARIES`].
    pub(crate) fn insert_summary(
        &self,
        bid: i64,
        kept: &mut Vec<i64>,
        kind: &str,
        text: &str,
        event_ids: &[i64],
        replaced: &[i64],
    ) -> Result<i64> {
        let seq = self.next_seq()?;
        kept.retain(|id| !replaced.contains(id));
        kept.push(seq);
        self.conn.execute(
            "INSERT INTO inherited_summaries (seq, branch, kind, summary_text, summarized_event_ids,
                                              replaced_summary_ids, created_at, view_summary_ids)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                seq,
                bid,
                kind,
                self.redacted(text),
                serde_json::to_string(event_ids)?,
                serde_json::to_string(replaced)?,
                self.now(),
                (kept.len() <= RECORDED_SUMMARIES).then(|| serde_json::to_string(kept)).transpose()?
            ],
        )?;
        Ok(seq)
    }

    /// Moves visible events out of the branch's view after copying their full text to archival.
    pub fn recall_evict(&self, branch: &str, selector: &EvictSelector) -> Result<EvictOutcome> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        // Steps are the conversation's: `prune`, `compact` and `reset` reduce it, and keep its
        // system and task steps.
        let not_recall = |what: String| {
            Error::invalid(format!("{what}: `memctl prune`, `compact` and `reset` reduce the conversation"))
        };
        let selected: Vec<Event> = match selector {
            EvictSelector::Ids(ids) => self.visible_events(&path, ids)?,
            EvictSelector::Oldest(n) => view::oldest_events_besides_steps(self, &path, *n)?,
            EvictSelector::Kind(kind) => {
                let kind = self.event_kind(kind)?;
                if is_step(&kind) {
                    return Err(not_recall(format!("kind '{kind}' is the conversation's steps")));
                }
                view::events_of_kind(self, &path, &kind)?
            }
        };
        if let Some(step) = selected.iter().find(|e| is_step(&e.kind)) {
            return Err(not_recall(format!("event {} is a conversation step", step.id)));
        }
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
        self.insert_exclusions(bid, excluded(&selected))?;
        let ids: Vec<i64> = selected.iter().map(|e| e.id).collect();
        self.journal(Some(bid), "recall.evict", json!({"ids": ids, "archived": record.id}))?;
        Ok(EvictOutcome { evicted: ids, archived: Some(record.id) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Summaries by hand fold nothing: a view keeping more than [`RECORDED_SUMMARIES`] of them
    /// gets rows that record nothing, and still reads every summary it keeps.
    #[test]
    fn many_kept_summaries_are_not_recorded_and_still_read() {
        let s = Store::scratch();
        s.create_root("r").unwrap();
        let written = RECORDED_SUMMARIES + 3;
        for i in 0..written {
            // Each summary hides its event: the view never holds enough to consolidate.
            let event = s.recall_append("r", "note", &format!("event {i}"), &[]).unwrap().id;
            s.recall_summarize("r", "note", &format!("summary {i}"), &[event]).unwrap();
        }
        let recorded: Vec<bool> = s
            .conn
            .query(
                "SELECT view_summary_ids IS NOT NULL FROM inherited_summaries ORDER BY seq",
                params![],
                |r| r.get(0),
            )
            .unwrap();
        let expected: Vec<bool> = (0..written).map(|i| i < RECORDED_SUMMARIES).collect();
        assert_eq!(recorded, expected);
        let path = s.path("r").unwrap();
        let ids: Vec<i64> = view::summaries(&s, &path).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(ids.len(), written);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first");
    }
}
