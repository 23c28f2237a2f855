//! `migrate`: a run copied whole from one database to another (SQLite to PostgreSQL, or back),
//! then checked: every branch must read the same in both.
//!
//! Every row is copied as it is stored — seqs, bids, timestamps, journal rows — so the copy is
//! the same run, not a replay. The destination must hold no run yet. The copy is one write
//! transaction, and the check runs inside it: a copy that does not read as its source is rolled
//! back, leaving no row in the destination.

use crate::db::{params, Params, Row, Value};
use crate::error::{Error, Result};
use crate::query;
use crate::schema::{self, RunTable, RUN_TABLES};
use crate::store::{Store, Tx};
use serde::Serialize;
use std::collections::BTreeMap;

/// Rows read per statement.
const PAGE: usize = 1000;
/// Rows written per statement (14 columns at most: well within both databases' parameter limits).
const BATCH: usize = 50;

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transfer {
    /// Rows copied, per table.
    pub rows: BTreeMap<&'static str, usize>,
    /// The seq the destination hands out next (the source's).
    pub next_seq: i64,
    /// Branches whose views were compared (every branch gc has not collected).
    pub branches_verified: usize,
}

impl Store {
    /// Copies this database's run into `to`, which must hold none, and checks that every branch
    /// reads the same in both. Views are read at each store's clock: give both the same fixed
    /// clock, or a TTL running out between the two reads fails the check.
    pub fn copy_to(&self, to: &Store) -> Result<Transfer> {
        self.read(|| {
            let totals = RUN_TABLES.iter().map(|t| count(self, t.name)).collect::<Result<Vec<_>>>()?;
            let next_seq = self.counter()?;
            let collections = self.gc_collections()?;
            to.write(|tx| {
                let taken = count(tx, "branches")? + count(tx, "ops")?;
                if taken > 0 {
                    return Err(Error::conflict("the destination already holds a run")
                        .with_hint("copy into a new database (or an empty one)"));
                }
                self.progress().start("copying rows", totals.iter().sum::<usize>() as u64);
                let mut rows = BTreeMap::new();
                for table in RUN_TABLES {
                    rows.insert(table.name, copy_table(self, tx, table)?);
                }
                self.progress().finish();
                finish_copy(tx, next_seq, collections, rows["branches"] > 0)?;
                let branches_verified = verify(self, tx)?;
                Ok(Transfer { rows, next_seq, branches_verified })
            })
        })
    }
}

fn count(store: &Store, table: &str) -> Result<usize> {
    let sql = format!("SELECT count(*) FROM {table}");
    store.conn.query_one(&sql, params![], |r| r.get(0))
}

/// Copies one table in pages read in key order; returns the rows copied.
fn copy_table(from: &Store, to: &Tx<'_>, table: &RunTable) -> Result<usize> {
    let columns = table.columns.join(", ");
    let key = table.columns[..table.key].join(", ");
    let after: Vec<String> = (1..=table.key).map(|i| format!("?{i}")).collect();
    let first_page = format!("SELECT {columns} FROM {} ORDER BY {key} LIMIT {PAGE}", table.name);
    let next_page = format!(
        "SELECT {columns} FROM {} WHERE ({key}) > ({}) ORDER BY {key} LIMIT {PAGE}",
        table.name,
        after.join(", ")
    );
    // Rows go in batches of one multi-row INSERT each: a round trip per batch, not per row.
    let insert = |rows: usize| -> String {
        let width = table.columns.len();
        let tuples: Vec<String> = (0..rows)
            .map(|r| {
                let slots: Vec<String> = (1..=width).map(|c| format!("?{}", r * width + c)).collect();
                format!("({})", slots.join(", "))
            })
            .collect();
        format!("INSERT INTO {} ({columns}) VALUES {}", table.name, tuples.join(", "))
    };
    let full_batch = insert(BATCH);
    let mut copied = 0;
    let mut last: Option<Vec<Value<'static>>> = None;
    loop {
        let read = |r: &Row<'_>| -> Result<Vec<Value<'static>>> {
            (0..table.columns.len()).map(|i| Ok(r.value(i)?.to_value())).collect()
        };
        let page = match &last {
            None => from.conn.query(&first_page, params![], read)?,
            Some(row) => {
                let bound = Params::Positional(row[..table.key].to_vec());
                from.conn.query(&next_page, bound, read)?
            }
        };
        for batch in page.chunks(BATCH) {
            let values: Vec<Value<'static>> = batch.iter().flatten().cloned().collect();
            let sql = if batch.len() == BATCH { full_batch.clone() } else { insert(batch.len()) };
            to.conn.execute(&sql, Params::Positional(values))?;
        }
        copied += page.len();
        from.progress().advance(page.len() as u64);
        let full = page.len() == PAGE;
        match page.into_iter().last() {
            Some(row) if full => last = Some(row),
            _ => return Ok(copied),
        }
    }
}

/// What the copied rows need around them: the counters, the next branch id (PostgreSQL), the
/// search index (FTS5, or PostgreSQL's words).
fn finish_copy(tx: &Tx<'_>, next_seq: i64, collections: i64, branches: bool) -> Result<()> {
    tx.continue_from(next_seq)?;
    if collections > 0 {
        tx.conn.execute(
            "INSERT INTO meta(key, value) VALUES ('gc_collections', ?1)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [collections],
        )?;
    }
    match tx.conn.sqlite() {
        Some(conn) if tx.fts_table()? => schema::fts::index_all(conn)?,
        Some(_) => {}
        None => {
            // New branches must get ids above the copied ones.
            if branches {
                tx.conn.query_one(
                    "SELECT setval(pg_get_serial_sequence('branches', 'bid'), (SELECT max(bid) FROM branches))",
                    params![],
                    |_| Ok(()),
                )?;
            }
            index_words(tx)?;
        }
    }
    tx.forget();
    Ok(())
}

/// Fills PostgreSQL's `archival.words` (see schema/postgres.rs) for the copied versions.
fn index_words(tx: &Tx<'_>) -> Result<()> {
    let set = format!("words = {}", schema::words_entry("(e -> 1)"));
    schema::fill_archival(&tx.conn, &set, |text, tags, bid| Ok(query::index_words(&[text, tags], bid)))
}

/// Every branch in use reads the same in both databases; returns how many were compared.
fn verify(from: &Store, to: &Tx<'_>) -> Result<usize> {
    let branches = from.branches()?;
    if to.branches()? != branches {
        return Err(differs("the branch list"));
    }
    from.progress().start("verifying views", branches.len() as u64);
    for branch in &branches {
        if from.view(&branch.id)? != to.view(&branch.id)? {
            return Err(differs(&format!("branch '{}'", branch.id)));
        }
        from.progress().advance(1);
    }
    from.progress().finish();
    if from.ops(None, None)? != to.ops(None, None)? {
        return Err(differs("the journal"));
    }
    Ok(branches.len())
}

fn differs(what: &str) -> Error {
    Error::internal(format!("the copy does not read as its source ({what} differs); nothing was copied"))
}
