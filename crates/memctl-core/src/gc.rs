//! `gc`: deletes for real the branches a search is done with, and every row only they could
//! see. A collected branch's subtree goes with it, so no remaining branch has it on its path:
//! its rows were in no remaining view, and every remaining view stays exactly as it was. The
//! branch row itself stays, marked collected: its journal rows keep naming it, and its id is
//! never given out again (`schema::event_rid` keys events by it).

use crate::db::{params, Backend};
use crate::error::{Error, Result};
use crate::rows::{Branch, BranchStatus};
use crate::schema::{self, event_rid};
use crate::store::{Store, Tx};
use serde::Serialize;
use serde_json::json;
use std::collections::{BTreeSet, HashMap};

/// What to collect.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GcRequest {
    /// Every branch marked dead or pruned whose descendants are all dead or pruned too (the
    /// default when no branch is named).
    pub marked: bool,
    /// These branches (ids or node_uids)…
    pub branches: Vec<String>,
    /// …with everything under them (without it, a named branch must be a leaf).
    pub subtree: bool,
    /// Delete the journal rows of the branches collected, now and before.
    pub journal: bool,
    /// Report only; change nothing.
    pub dry_run: bool,
}

/// Rows deleted, per table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RowsFreed {
    pub core: usize,
    pub events: usize,
    pub archival: usize,
    pub exclusions: usize,
    pub summaries: usize,
    pub anchors: usize,
    pub promoted: usize,
    pub journal: usize,
}

impl RowsFreed {
    pub fn total(&self) -> usize {
        self.core
            + self.events
            + self.archival
            + self.exclusions
            + self.summaries
            + self.anchors
            + self.promoted
            + self.journal
    }
}

/// A branch marked dead or pruned that stays, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kept {
    pub branch: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    /// The branches collected, parents before children.
    pub collected: Vec<String>,
    pub rows: RowsFreed,
    /// Bytes of pages freed inside the file (reused by later writes; `vacuum` returns them).
    pub bytes_freed: i64,
    /// Marked branches left alone because something under them is still in use.
    pub kept: Vec<Kept>,
}

impl Tx<'_> {
    /// Collects the branches `request` selects (see [`GcRequest`]).
    pub fn gc(&self, request: &GcRequest) -> Result<GcReport> {
        if request.journal && !request.dry_run {
            // On SQLite the journal's newest row may hold the counter: read it before that
            // row goes, or seqs (and ids) would be handed out again. (A dry run undoes it.)
            self.peek_seq()?;
        }
        let (chosen, kept) = self.gc_selection(request)?;
        let collect = |tx: &Tx<'_>| -> Result<GcReport> {
            let free_before = tx.free_bytes()?;
            let rows = tx.delete_rows(&chosen, request.journal)?;
            let collected: Vec<String> = chosen.iter().map(|b| b.id.clone()).collect();
            let report = GcReport {
                dry_run: request.dry_run,
                rows,
                bytes_freed: tx.free_bytes()? - free_before,
                collected,
                kept,
            };
            if !chosen.is_empty() || report.rows.journal > 0 {
                tx.journal(None, "gc", json!({"collected": report.collected, "rows": report.rows}))?;
            }
            Ok(report)
        };
        if request.dry_run {
            self.trial(collect)
        } else {
            collect(self)
        }
    }

    /// The branches to collect, parents before children, and the marked ones kept.
    fn gc_selection(&self, request: &GcRequest) -> Result<(Vec<Branch>, Vec<Kept>)> {
        let all = self.branches()?;
        let mut chosen: BTreeSet<i64> = BTreeSet::new();
        let mut kept = Vec::new();
        for name in &request.branches {
            let branch = self.branch(name)?;
            let under = self.descendants(&branch.id)?;
            if !under.is_empty() && !request.subtree {
                let ids: Vec<&str> = under.iter().take(5).map(|b| b.id.as_str()).collect();
                let more = if under.len() > ids.len() { ", …" } else { "" };
                return Err(Error::conflict(format!(
                    "branch '{}' has {} under it ({}{more}); collecting it alone would cut their paths",
                    branch.id,
                    under.len(),
                    ids.join(", ")
                ))
                .with_hint("add --subtree to collect them too, or name a leaf"));
            }
            chosen.insert(branch.bid);
            chosen.extend(under.iter().map(|b| b.bid));
        }
        if request.marked || request.branches.is_empty() {
            // A marked branch goes when everything under it is marked too: children first.
            let mut done: HashMap<i64, bool> = HashMap::new();
            for b in all.iter().rev() {
                let finished_status = finished(b.status);
                let children_done = all
                    .iter()
                    .filter(|c| c.parent.as_deref() == Some(b.id.as_str()))
                    .all(|c| done.get(&c.bid).copied().unwrap_or(false));
                done.insert(b.bid, finished_status && children_done);
                if finished_status && !children_done {
                    kept.push(Kept {
                        branch: b.id.clone(),
                        reason: "a branch under it is still alive or best".to_string(),
                    });
                }
            }
            chosen.extend(done.into_iter().filter(|&(_, collect)| collect).map(|(bid, _)| bid));
            kept.reverse();
        }
        let chosen = all.into_iter().filter(|b| chosen.contains(&b.bid)).collect();
        Ok((chosen, kept))
    }

    /// Deletes every row of `branches` and marks them collected; with `journal`, the journal
    /// rows of every collected branch too.
    fn delete_rows(&self, branches: &[Branch], journal: bool) -> Result<RowsFreed> {
        let mut rows = RowsFreed::default();
        let fts = self.fts_table()?;
        let fts_until = if fts { schema::fts::indexed_until(self.conn.fts5()?)? } else { 0 };
        let now = self.now();
        self.progress().start("collecting branches", branches.len() as u64);
        if fts && !branches.is_empty() {
            // The index holds what each indexed version's insert gave it; the same values remove
            // it. Versions past its end were never in it. One statement for every branch, in seq
            // order: FTS5 writes its pending changes out at each statement after, and whenever
            // a rowid comes lower than the one before, so one statement per branch, or
            // branches' seqs interleaved, wrote a segment per branch and merged them (two thirds
            // of a large collection's work).
            let bids = serde_json::to_string(&branches.iter().map(|b| b.bid).collect::<Vec<_>>())?;
            self.conn.execute(
                &format!(
                    "INSERT INTO archival_fts(archival_fts, rowid, text, tags, branch)
                     SELECT 'delete', t.seq, t.text, t.tags, t.branch FROM {} b
                     CROSS JOIN archival t ON t.branch = b.value
                     WHERE t.text IS NOT NULL AND t.seq <= ?2 ORDER BY t.seq",
                    Backend::Sqlite.json_ints("?1")
                ),
                params![bids, fts_until],
            )?;
        }
        for b in branches {
            let delete = |sql: &str| -> Result<usize> { self.conn.execute(sql, [b.bid]) };
            rows.core += delete("DELETE FROM core WHERE branch = ?1")?;
            rows.events +=
                delete(&format!("DELETE FROM events WHERE rid BETWEEN {}", event_rid::all_of("?1")))?;
            rows.archival += delete("DELETE FROM archival WHERE branch = ?1")?;
            rows.exclusions += delete("DELETE FROM inherited_exclusions WHERE branch = ?1")?;
            rows.summaries += delete("DELETE FROM inherited_summaries WHERE branch = ?1")?;
            rows.anchors += delete("DELETE FROM anchor_rows WHERE branch = ?1")?;
            rows.promoted += delete("DELETE FROM promoted WHERE branch = ?1")?;
            self.conn.execute("UPDATE branches SET collected_at = ?1 WHERE bid = ?2", params![now, b.bid])?;
            self.progress().advance(1);
        }
        self.progress().finish();
        if journal {
            // Those of the branches collected now, and of those an earlier gc collected.
            rows.journal += self.conn.execute(
                "DELETE FROM ops WHERE branch IN (SELECT bid FROM branches WHERE collected_at IS NOT NULL)",
                params![],
            )?;
        }
        if !branches.is_empty() {
            // Handles that cached these branches' paths learn they are gone (view/path.rs).
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES ('gc_collections', 1)
                     ON CONFLICT(key) DO UPDATE SET value = meta.value + 1",
                params![],
            )?;
            self.forget();
        }
        Ok(rows)
    }

    /// The SQLite file's free pages in bytes. PostgreSQL frees nothing at a delete (its
    /// VACUUM does, later): 0 there.
    fn free_bytes(&self) -> Result<i64> {
        match self.backend() {
            Backend::Sqlite => self.conn.query_one(
                "SELECT (SELECT freelist_count FROM pragma_freelist_count) * (SELECT page_size FROM pragma_page_size)",
                params![],
                |r| r.get(0),
            ),
            Backend::Postgres => Ok(0),
        }
    }
}

/// What `vacuum` did to the database (its pages, as the file holds them once the log is
/// written back).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VacuumOutcome {
    pub bytes_before: i64,
    pub bytes_after: i64,
    /// `incremental`, or `full` for a file made before incremental vacuum (now converted).
    pub mode: &'static str,
}

impl Store {
    /// Returns the file's free pages to the file system: an incremental vacuum, or for files
    /// made before memctl set incremental auto-vacuum, one full VACUUM that converts them.
    ///
    /// On PostgreSQL: VACUUM FULL of memctl's tables, which rewrites them without their dead rows;
    /// the sizes are those of memctl's tables and indexes.
    pub fn vacuum(&self) -> Result<VacuumOutcome> {
        let size_sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT (SELECT page_count FROM pragma_page_count) * (SELECT page_size FROM pragma_page_size)"
            }
            Backend::Postgres => {
                "SELECT CAST(coalesce(sum(pg_total_relation_size(c.oid)), 0) AS BIGINT)
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            }
        };
        let size = || -> Result<i64> { self.conn.query_one(size_sql, params![], |r| r.get(0)) };
        let before = size()?;
        let mode = match self.conn.sqlite() {
            Some(conn) => {
                if self.fts_table()? {
                    // The search index keeps a deleted record's entries (and the deletes) in its
                    // segments until they are merged: merge them all, so their pages come free.
                    conn.execute("INSERT INTO archival_fts(archival_fts) VALUES ('optimize')", [])?;
                }
                let incremental: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
                let mode = if incremental == 2 {
                    // Each step of the statement frees one page: run it to the end.
                    let mut stmt = conn.prepare("PRAGMA incremental_vacuum")?;
                    let mut steps = stmt.query([])?;
                    while steps.next()?.is_some() {}
                    "incremental"
                } else {
                    conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM")?;
                    "full"
                };
                // In WAL mode the file shrinks when the log is written back.
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
                mode
            }
            None => {
                let tables: Vec<&str> = crate::schema::RUN_TABLES.iter().map(|t| t.name).collect();
                self.conn.batch(&format!("VACUUM FULL meta, {}", tables.join(", ")))?;
                "postgres"
            }
        };
        self.forget();
        Ok(VacuumOutcome { bytes_before: before, bytes_after: size()?, mode })
    }
}

/// Whether `gc` collects a branch so marked (when everything under it is too).
fn finished(status: BranchStatus) -> bool {
    matches!(status, BranchStatus::Dead | BranchStatus::Pruned)
}
