//! Every row of one core key, archival record or event, wherever it was written, with where it
//! stands against a branch's path ([`Reach`], from THE predicate of sql.rs, written in Rust
//! over the path's cutoffs). `why` explains a view with these; which row the view shows still
//! comes from the readers in mod.rs.

use crate::db::{Row, Value};
use crate::error::Result;
use crate::rows::{BranchPath, Event, Summary};
use crate::schema::{event_rid, version_of};
use crate::store::Store;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// Where a row stands against a branch's path (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// In the view: written by the branch, or by an ancestor up to the path's cutoff there.
    InView,
    /// Written to an ancestor after the path left it (after the fork of the path's branch below).
    AfterFork,
    /// Written in a branch that is neither the branch nor one of its ancestors.
    OffPath,
}

/// A row of a layer table, with its writer and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Placed<T> {
    pub branch: String,
    /// The writer's parent, for rows off the path (where that branch came from); None on it.
    pub parent: Option<String>,
    pub seq: i64,
    pub ts: f64,
    pub reach: Reach,
    /// The highest seq of the writer the view holds, when the writer is on the path.
    pub cutoff: Option<i64>,
    pub row: T,
}

/// One core row: None is a delete (tombstone).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CoreRow {
    pub value: Option<String>,
    pub importance: u8,
    pub ttl: Option<f64>,
}

/// One archival version: text None is a delete (tombstone).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Version {
    pub text: Option<String>,
    pub tags: Vec<String>,
}

/// The rows `sql` reads ([`placed_sql`]), oldest first, placed against `path` by the view's
/// rule (sql.rs's `visible_through`, here in Rust): in the view when their branch is on the
/// path and they are at or below its cutoff, after the fork when above it, else off the path.
fn placed<T>(
    store: &Store,
    path: &BranchPath,
    sql: &str,
    param: Value<'_>,
    row: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<Placed<T>>> {
    let mut rows = store.conn.query(sql, [param], |r| {
        let seq = r.get(2)?;
        let cutoff = path.position(r.get(4)?).map(|p| path.cutoff(p));
        let reach = match cutoff {
            None => Reach::OffPath,
            Some(cutoff) if seq <= cutoff => Reach::InView,
            Some(_) => Reach::AfterFork,
        };
        let placed =
            Placed { branch: r.get(0)?, parent: None, seq, ts: r.get(3)?, reach, cutoff, row: row(r)? };
        Ok((placed, r.get(1)?))
    })?;
    name_parents_off_path(store, &mut rows)?;
    let mut rows: Vec<Placed<T>> = rows.into_iter().map(|(placed, _)| placed).collect();
    // Ordered here, not by SQLite's sorter: a key written at every level of a deep path has
    // thousands of rows, and the sorter copies each whole (a fifth of the query).
    rows.sort_unstable_by_key(|r| r.seq);
    Ok(rows)
}

/// Names the parent (its bid beside each row) of the writer of each row off the path, the
/// only rows that show it, by one read of those parents: a join to the parent of every row
/// cost `why` of a key written at every level of a deep path 3% of its instructions.
fn name_parents_off_path<T>(store: &Store, rows: &mut [(Placed<T>, Option<i64>)]) -> Result<()> {
    let off_path = |row: &Placed<T>| row.reach == Reach::OffPath;
    let bids: BTreeSet<i64> =
        rows.iter().filter(|(row, _)| off_path(row)).filter_map(|(_, bid)| *bid).collect();
    if bids.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT b.bid, b.id FROM {} j JOIN branches b ON b.bid = j.value",
        store.backend().json_ints("?1")
    );
    let names: HashMap<i64, String> = store
        .conn
        .query(&sql, [serde_json::to_string(&bids)?], |r| Ok((r.get(0)?, r.get(1)?)))?
        .into_iter()
        .collect();
    for (row, bid) in rows.iter_mut().filter(|(row, _)| off_path(row)) {
        row.parent = bid.and_then(|bid| names.get(&bid).cloned());
    }
    Ok(())
}

/// SQL: the rows of `from` (a FROM clause naming the branch `b` and the layer row `t`) matching
/// `filter`, with the columns [`placed`] reads first and then `columns`.
fn placed_sql(from: &str, filter: &str, columns: &str) -> String {
    format!(
        "SELECT b.id, b.parent, t.seq, t.created_at, t.branch, {columns}
         FROM {from}
         WHERE {filter}"
    )
}

/// Columns after the fixed ones of [`placed`] start here.
const FIRST: usize = 5;

/// Every write of core key `key`, in any branch: one index probe per branch.
pub(crate) fn core_key(store: &Store, path: &BranchPath, key: &str) -> Result<Vec<Placed<CoreRow>>> {
    let from = "branches b CROSS JOIN core t ON t.branch = b.bid AND t.key = ?1";
    let sql = placed_sql(from, "1 = 1", "t.value, t.importance, t.ttl_s");
    placed(store, path, &sql, key.into(), |r| {
        Ok(CoreRow { value: r.get(FIRST)?, importance: r.get(FIRST + 1)?, ttl: r.get(FIRST + 2)? })
    })
}

/// Every version of archival record `id`, in any branch.
pub(crate) fn record(store: &Store, path: &BranchPath, id: i64) -> Result<Vec<Placed<Version>>> {
    placed(store, path, &record_sql(), id.into(), |r| {
        Ok(Version { text: r.get(FIRST)?, tags: super::tags_at(r, FIRST + 1)? })
    })
}

/// SQL: what [`record`] reads of record `?1`.
pub(super) fn record_sql() -> String {
    placed_sql("archival t JOIN branches b ON b.bid = t.branch", &version_of("t", "?1"), "t.text, t.tags")
}

/// Event `id`, wherever it was written (its rowid holds its branch: one probe per branch).
pub(crate) fn event(store: &Store, path: &BranchPath, id: i64) -> Result<Option<Placed<Event>>> {
    let from = format!(
        "branches b CROSS JOIN events t ON t.rid = {} AND t.seq = ?1",
        event_rid::sql_of("b.bid", "?1")
    );
    let sql = placed_sql(&from, "1 = 1", "t.kind, t.text, t.tags");
    let mut rows = placed(store, path, &sql, id.into(), |r| {
        Ok(Event {
            id,
            branch: r.get(0)?,
            kind: r.get(FIRST)?,
            text: r.get(FIRST + 1)?,
            tags: super::tags_at(r, FIRST + 2)?.into(),
            ts: r.get(3)?,
        })
    })?;
    Ok(rows.pop())
}

/// Every exclusion of event `id` (evictions and consolidations write them), in any branch.
pub(crate) fn exclusions(store: &Store, path: &BranchPath, id: i64) -> Result<Vec<Placed<()>>> {
    let from = "inherited_exclusions t JOIN branches b ON b.bid = t.branch";
    placed(store, path, &placed_sql(from, "t.event_id = ?1", "NULL"), id.into(), |_| Ok(()))
}

/// Every summary that names event `id` among those it stands for, in any branch.
pub(crate) fn summaries(store: &Store, path: &BranchPath, id: i64) -> Result<Vec<Placed<Summary>>> {
    summaries_listing(store, path, "summarized_event_ids", id)
}

/// Every summary that folds in summary `id` (a newer summary of its kind), in any branch.
pub(crate) fn summaries_folding(store: &Store, path: &BranchPath, id: i64) -> Result<Vec<Placed<Summary>>> {
    summaries_listing(store, path, "replaced_summary_ids", id)
}

/// Every summary whose list of ids in `column` holds `id`.
fn summaries_listing(
    store: &Store,
    path: &BranchPath,
    column: &str,
    id: i64,
) -> Result<Vec<Placed<Summary>>> {
    let sql = placed_sql(
        "inherited_summaries t JOIN branches b ON b.bid = t.branch",
        &format!(
            "EXISTS (SELECT 1 FROM {} e WHERE e.value = ?1)",
            store.backend().json_ints(&format!("t.{column}"))
        ),
        "t.kind, t.summary_text, t.summarized_event_ids",
    );
    placed(store, path, &sql, id.into(), |r| {
        Ok(Summary {
            id: r.get(2)?,
            branch: r.get(0)?,
            kind: r.get(FIRST)?,
            text: r.get(FIRST + 1)?,
            event_ids: super::parse_ids(r.value(FIRST + 2)?.as_str()?),
            ts: r.get(3)?,
        })
    })
}

impl CoreRow {
    /// Whether a row written at `ts` has run out its TTL at `now`: the Rust form of
    /// `sql::live_core`, the condition the view drops rows on.
    pub(crate) fn expired(&self, ts: f64, now: f64) -> bool {
        self.ttl.is_some_and(|ttl| ts + ttl < now)
    }
}
