//! Archival memory (SPEC §4.4): long-term records with stable ids, versioned updates and
//! tombstone deletes, searched with FTS5 or, with the same semantics, by keywords.

use crate::db::{params, Backend};
use crate::error::{Error, Result};
use crate::journal;
use crate::query::{index_words, ranked, token_count, Query};
use crate::rows::{AppendOutcome, Record};
use crate::schema;
use crate::store::{Store, Tx};
use crate::stored_text::{content_hash, normalize_tags, same_tags};
use crate::view;
use serde::Serialize;
use serde_json::json;
use std::sync::LazyLock;

/// A search over a branch's archival view.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Search {
    /// Words OR-ed; blank lists newest first.
    pub query: String,
    pub k: usize,
    /// Required tags (AND), applied before the limit; taken as writes take tags (trimmed and
    /// redacted: a secret finds the records whose tag held one; an empty or multi-line tag is
    /// invalid input).
    pub tags: Vec<String>,
}

/// An archival version to write, before redaction.
pub(crate) struct ArchivalWrite {
    pub text: String,
    pub tags: Vec<String>,
}

impl ArchivalWrite {
    pub fn new<const N: usize>(text: String, tags: [String; N]) -> ArchivalWrite {
        ArchivalWrite { text, tags: tags.to_vec() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UpdateOutcome {
    pub id: i64,
    /// The seq of the new version, or of the version the branch sees when nothing changed.
    pub seq: i64,
    /// The branch already saw this text and these tags (in any order): nothing was written.
    pub unchanged: bool,
}

impl Store {
    /// A record as the branch sees it; not found when outside the view or deleted there.
    pub fn archival_get(&self, branch: &str, id: i64) -> Result<Record> {
        let path = self.path(branch)?;
        view::archival_record(self, &path, id)?.ok_or_else(|| unknown_record(id, &path.branch().id))
    }

    /// The newest `limit` visible records (all when None).
    pub fn archival_list(&self, branch: &str, limit: Option<usize>) -> Result<Vec<Record>> {
        view::archival(self, &*self.window_path(branch, limit)?, &[], limit)
    }

    /// Searches the branch's view (SPEC §4.4): words OR-ed, tags AND-ed before the limit, ranked
    /// by bm25 over the view's matches (query.rs) whether FTS5 or the fallback finds them, ties
    /// newest first.
    pub fn archival_search(&self, branch: &str, search: &Search) -> Result<Vec<Record>> {
        let query = Query::parse(&search.query);
        let tags = normalize_tags(self, &search.tags)?;
        if search.k == 0 || query.matches_nothing() {
            // (An unknown branch is still an error.)
            self.branch(branch)?;
            return Ok(vec![]);
        }
        if query.is_blank() {
            return view::archival(self, &*self.window_path(branch, Some(search.k))?, &tags, Some(search.k));
        }
        let path = self.path(branch)?;
        self.read(|| {
            let matches = if self.uses_fts()? {
                view::archival_fts_matches(self, &path, &query, &tags)?
            } else {
                view::archival_keyword_matches(self, &path, &query, &tags)?
            };
            let ranked = ranked(matches, search.k);
            let seqs: Vec<i64> = ranked.iter().map(|&(_, seq)| seq).collect();
            let mut records = view::archival_versions(self, &path, &seqs)?;
            for (record, (score, _)) in records.iter_mut().zip(ranked) {
                record.score = Some(score);
            }
            Ok(records)
        })
    }
}

/// SQL: the record of a version of branch `?1` with content hash `?2` that is still its
/// record's current version there. Built once: every archival write runs it.
static IDENTICAL_CURRENT_VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT t.record_id FROM archival t WHERE t.branch = ?1 AND t.text_hash = ?2
             AND NOT EXISTS (SELECT 1 FROM archival n WHERE n.record_id = t.record_id
                             AND n.seq > t.seq AND n.branch = ?1 AND {})
             LIMIT 1",
        schema::later_version("n")
    )
});

fn unknown_record(id: i64, branch: &str) -> Error {
    Error::not_found(format!("archival record {id} is not in the view of branch '{branch}'"))
}

impl Tx<'_> {
    /// Refuses a record's text that a write may not store: empty, or over `archival_max_chars`.
    fn check_record_text(&self, text: &str) -> Result<()> {
        if text.trim().is_empty() {
            return Err(Error::invalid("archival text must not be empty"));
        }
        let max = self.config.archival_max_chars;
        let chars = text.chars().count();
        if chars > max {
            return Err(Error::invalid(format!(
                "archival text has {chars} characters, more than archival_max_chars = {max}"
            ))
            .with_hint("split the text into several records, or raise archival_max_chars"));
        }
        Ok(())
    }

    pub fn archival_add(&self, branch: &str, text: &str, tags: &[String]) -> Result<AppendOutcome> {
        self.check_record_text(text)?;
        let bid = self.branch_for_write(branch)?.bid;
        let (text, tags) = (self.redacted(text), normalize_tags(self, tags)?);
        let outcome = self.insert_record(bid, &text, &tags)?;
        if !outcome.skipped {
            let args = journal::RecordArgs::new(outcome.id, None, &text, &tags);
            self.insert_op(Some(bid), "archival.add", &serde_json::to_string(&args)?)?;
        }
        Ok(outcome)
    }

    /// Writes a new record in `bid`, redacted, unless the branch already holds an identical
    /// current one (then that one's id, skipped).
    pub(crate) fn archival_insert(&self, bid: i64, write: ArchivalWrite) -> Result<AppendOutcome> {
        self.insert_record(bid, &self.redacted(&write.text), &normalize_tags(self, &write.tags)?)
    }

    /// [`Tx::archival_insert`] of a text and tags as they are stored (redacted, normalized).
    fn insert_record(&self, bid: i64, text: &str, tags: &[String]) -> Result<AppendOutcome> {
        let tags_json = schema::tags::to_json(tags)?;
        let hash = content_hash(&[text, &tags_json]);
        let existing: Option<i64> =
            self.conn.query_opt(&IDENTICAL_CURRENT_VERSION, params![bid, hash], |r| r.get(0))?;
        if let Some(id) = existing {
            return Ok(AppendOutcome { id, skipped: true });
        }
        let seq = self.next_seq()?;
        self.insert_version(seq, seq, bid, Some(text), &tags_json, Some(&hash))?;
        Ok(AppendOutcome { id: seq, skipped: false })
    }

    /// Inserts one version row; the FTS5 index takes it with the next batch, or at the end of a
    /// bulk write (schema/fts.rs).
    fn insert_version(
        &self,
        seq: i64,
        record_id: i64,
        bid: i64,
        text: Option<&str>,
        tags_json: &str,
        hash: Option<&[u8; 32]>,
    ) -> Result<()> {
        let tokens = text.map_or(0, |text| token_count(&[text, tags_json]));
        let chars = text.map(schema::char_count);
        match self.backend() {
            Backend::Sqlite => self.conn.execute(
                "INSERT INTO archival(seq, record_id, branch, text, tags, text_hash, created_at, tokens, chars)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![seq, record_id, bid, text, tags_json, hash, self.now(), tokens, chars],
            )?,
            Backend::Postgres => {
                let words = text
                    .map(|text| serde_json::to_string(&index_words(&[text, tags_json], bid)))
                    .transpose()?;
                let sql = format!(
                    "INSERT INTO archival(seq, record_id, branch, text, tags, text_hash, created_at, tokens, chars, words)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, {})",
                    schema::words_entry("?10")
                );
                self.conn.execute(
                    &sql,
                    params![seq, record_id, bid, text, tags_json, hash, self.now(), tokens, chars, words],
                )?
            }
        };
        if !self.fts_at_end.get() && self.fts_table()? {
            schema::fts::index_when_due(self.conn.fts5()?, seq, self.config.search.fts_batch.get())?;
        }
        Ok(())
    }

    /// Writes a new version in this branch: new text and/or tags, the rest kept.
    pub fn archival_update(
        &self,
        branch: &str,
        id: i64,
        text: Option<&str>,
        tags: Option<&[String]>,
    ) -> Result<UpdateOutcome> {
        if text.is_none() && tags.is_none() {
            return Err(Error::invalid("archival update needs a new text, new tags, or both"));
        }
        text.map(|text| self.check_record_text(text)).transpose()?;
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let current =
            view::archival_record(self, &path, id)?.ok_or_else(|| unknown_record(id, &path.branch().id))?;
        let text = text.map_or_else(|| current.text.clone(), |t| self.redacted(t));
        let tags = match tags {
            Some(tags) => normalize_tags(self, tags)?,
            None => current.tags.to_vec(),
        };
        if text == current.text && same_tags(&tags, &current.tags) {
            return Ok(UpdateOutcome { id, seq: current.seq, unchanged: true });
        }
        let tags_json = schema::tags::to_json(&tags)?;
        let hash = content_hash(&[&text, &tags_json]);
        let seq = self.next_seq()?;
        self.insert_version(seq, id, bid, Some(&text), &tags_json, Some(&hash))?;
        self.journal(
            Some(bid),
            "archival.update",
            json!({"id": id, "seq": seq, "text": text, "tags": tags}),
        )?;
        Ok(UpdateOutcome { id, seq, unchanged: false })
    }

    /// Deletes a record from this branch's view (a tombstone version); returns the new seq.
    pub fn archival_delete(&self, branch: &str, id: i64) -> Result<i64> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        view::archival_record(self, &path, id)?.ok_or_else(|| unknown_record(id, &path.branch().id))?;
        let seq = self.next_seq()?;
        self.insert_version(seq, id, bid, None, "[]", None)?;
        self.journal(Some(bid), "archival.delete", json!({"id": id, "seq": seq}))?;
        Ok(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The duplicate check finds an identical version by its hash and a newer version of its
    /// record by the index of later versions, never by a scan.
    #[test]
    fn the_duplicate_check_reads_by_its_indexes() {
        let s = Store::scratch();
        let plan = s.conn.query_plan(&IDENTICAL_CURRENT_VERSION, params![1i64, vec![0u8; 32]]);
        assert!(
            plan.contains("SEARCH t USING INDEX archival_branch_hash (branch=? AND text_hash=?)"),
            "{plan}"
        );
        assert!(
            plan.contains("SEARCH n USING INDEX archival_record_versions (record_id=? AND seq>?)"),
            "{plan}"
        );
    }
}
