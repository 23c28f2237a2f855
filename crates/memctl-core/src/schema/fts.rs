//! The FTS5 index of archival versions lags the `archival` table (`[search] fts_batch`): once
//! the versions past its end are a batch or more, a write indexes those with text, in one
//! statement, so that FTS5 writes one segment for them all rather than one per commit (that was
//! half of an archival write's time); a bulk write (an import) indexes all of its versions in
//! one statement at its end. Versions are indexed in seq order, so the index holds
//! exactly the versions with text up to a seq, [`indexed_until`]; a search counts the versions
//! past it itself, as the keyword search counts (view/fts_match.rs), and `gc` removes from the
//! index only versions it holds.
//!
//! `archival_lengths` holds the seq, branch and length of each version the index holds, for
//! the walk over its matches: written with the index's batches, and removed with the versions
//! (a trigger on `archival`'s deletes, which only gc makes).

use crate::error::{Error, Result};
use rusqlite::{Connection, OptionalExtension};

/// The `meta` key of [`indexed_until`] (written first by the migration `20261128_fts_batches`).
const INDEXED_UNTIL: &str = "fts_indexed_until";

/// The seq up to which the index holds every archival version with text; it holds none past it.
pub(crate) fn indexed_until(conn: &Connection) -> Result<i64> {
    conn.prepare_cached(&format!("SELECT value FROM meta WHERE key = '{INDEXED_UNTIL}'"))?
        .query_row([], |r| r.get(0))
        .optional()?
        .ok_or_else(|| Error::internal(format!("the database has an FTS5 index but no meta.{INDEXED_UNTIL}")))
}

/// After a write of version `newest`: indexes the versions past the index's end once they are
/// `batch` or more. Every version counts toward a batch, deletes too, so that fewer than
/// `batch` are past the end at every commit (a bulk write, `Tx::indexing_at_end`, holds its
/// versions past it until its own end, inside its transaction): a count of fewer than `batch`
/// rows of the table's last pages.
/// There are no more of them than seqs past the end, so most writes need no count.
pub(crate) fn index_when_due(conn: &Connection, newest: i64, batch: u32) -> Result<()> {
    let until = indexed_until(conn)?;
    if newest - until < i64::from(batch) {
        return Ok(());
    }
    if waiting(conn, until)? >= i64::from(batch) {
        index_past(conn, until)?;
    }
    Ok(())
}

/// How many versions, deletes too, are past seq `until`.
pub(crate) fn waiting(conn: &Connection, until: i64) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT count(*) FROM archival WHERE seq > ?1")?
        .query_row([until], |r| r.get(0))?)
}

/// Indexes every version past the index's end, however few (a bulk write's, at its end).
pub(crate) fn index_waiting(conn: &Connection) -> Result<()> {
    index_past(conn, indexed_until(conn)?)
}

/// Fills the empty index, and its lengths, from every archival version that has text, as after
/// a migration or a copy. The lengths may hold what the migration `20261128_archival_lengths`
/// filled them with: they are filled anew.
pub(crate) fn index_all(conn: &Connection) -> Result<()> {
    conn.execute("DELETE FROM archival_lengths", [])?;
    index_past(conn, 0)
}

/// Indexes the versions with text past seq `until`, with their lengths, and notes the index's
/// new end.
fn index_past(conn: &Connection, until: i64) -> Result<()> {
    // The same versions for both: those with text past `until`.
    let to_index = "FROM archival WHERE seq > ?1 AND text IS NOT NULL";
    conn.prepare_cached(&format!(
        "INSERT INTO archival_fts(rowid, text, tags, branch) SELECT seq, text, tags, branch {to_index}"
    ))?
    .execute([until])?;
    conn.prepare_cached(&format!(
        "INSERT INTO archival_lengths(seq, branch, tokens) SELECT seq, branch, tokens {to_index}"
    ))?
    .execute([until])?;
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('{INDEXED_UNTIL}', (SELECT coalesce(max(seq), 0) FROM archival))"
    ))?
    .execute([])?;
    Ok(())
}
