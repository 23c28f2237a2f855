//! `memctl_match`, an FTS5 auxiliary function: for each row an archival search matches, whether
//! the view holds it, and if so how often each query word occurs in it — with the row's length,
//! stored as `archival.tokens`, what the view's bm25 (query.rs) needs. Its visibility test is a
//! derived form of the view rule (see the view's module comment), checked against the model by
//! tests/engine/model.rs.
//!
//! FTS5's own `bm25()` is not used because it counts, on every query, the documents of each
//! phrase in the whole database (`xQueryPhrase`): at a million records that costs tens of
//! milliseconds before the first row, and it makes one branch's ranking depend on its
//! siblings' records. This function only reads the current row's position lists. Nor does it
//! ask FTS5 for the row's size (`xColumnSize`, a statement run per row: a third of a search's
//! time); the index keeps no sizes (`columnsize=0`), the search reads `archival.tokens`.
//!
//! Call: `memctl_match(archival_fts, words, first_branch, forks)`. The MATCH expression lists
//! the query words as phrases `0..words`, then any tag phrases, then one phrase per path branch
//! (nearest first) from `first_branch` on; `forks` holds the path's fork seqs in the same order
//! as little-endian `i64`s. The result is NULL for a row outside the view, else a blob of
//! little-endian `u32`s: `[tf of word 0, tf of word 1, …]`.
//!
//! Whether the view holds a row follows from its seq alone, up to one phrase check: a branch's
//! rows come after its fork, and an ancestor contributes the rows up to the fork of the path's
//! branch below it. So the seqs between the fork of path branch j and the fork of branch j-1
//! can only be visible as rows of branch j (nearer branches did not exist yet; farther ones had
//! been left), and the row is visible exactly when it matched branch j's phrase.

use crate::error::{Error, Result};
use crate::query::TermCounts;
use crate::store::Store;
use rusqlite::{ffi, Connection};
use std::os::raw::{c_int, c_void};
use std::ptr;

/// The name the function is registered under.
pub(super) const FUNCTION: &str = "memctl_match";

/// The `forks` argument for a path's fork seqs, nearest branch first.
pub(super) fn encode_forks(forks: impl Iterator<Item = i64>) -> Vec<u8> {
    forks.flat_map(i64::to_le_bytes).collect()
}

/// The counts of a visible row of `tokens` words, from the function's blob.
pub(super) fn decode_counts(blob: &[u8], tokens: u32) -> Option<TermCounts> {
    if blob.len() % 4 != 0 {
        return None;
    }
    let tf = blob.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Some(TermCounts { tokens, tf })
}

/// Whether `memctl_match` is registered on the store's connection (the store's memo forgets it
/// on a rollback; registering again is harmless: FTS5 finds the newest function of a name).
#[derive(Default)]
struct Registered(bool);

/// Registers `memctl_match` on the store's connection, once.
pub(super) fn register(store: &Store) -> Result<()> {
    if !store.memo(|registered: &mut Registered| registered.0) {
        let conn = store.conn.sqlite().ok_or_else(|| Error::internal("FTS5 is SQLite's"))?;
        register_on(conn)?;
        store.memo(|registered: &mut Registered| registered.0 = true);
    }
    Ok(())
}

/// Registers `memctl_match` on `conn`, whose SQLite must have FTS5.
fn register_on(conn: &Connection) -> Result<()> {
    // SAFETY: `fts5(?1)` with a bound "fts5_api_ptr" pointer is SQLite's documented way to get
    // the FTS5 API of a connection; the statement is finalized before returning, and the API
    // object lives as long as the connection, which owns the registered function.
    unsafe {
        let db = conn.handle();
        let mut api: *mut ffi::fts5_api = ptr::null_mut();
        let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(db, c"SELECT fts5(?1)".as_ptr(), -1, &mut stmt, ptr::null_mut());
        if rc != ffi::SQLITE_OK {
            return Err(Error::internal(format!("cannot reach FTS5 (SQLite error {rc})")));
        }
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        let create = match api.as_ref() {
            Some(api) if api.iVersion >= 2 => api.xCreateFunction,
            _ => None,
        };
        let Some(create) = create else {
            return Err(Error::internal("this SQLite's FTS5 API is too old for memctl_match"));
        };
        let rc = create(api, c"memctl_match".as_ptr(), ptr::null_mut(), Some(memctl_match), None);
        if rc != ffi::SQLITE_OK {
            return Err(Error::internal(format!("cannot register memctl_match (SQLite error {rc})")));
        }
    }
    Ok(())
}

/// The auxiliary function itself (see the module comment).
unsafe extern "C" fn memctl_match(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite passes a valid API, context and `argc` values for the current row.
    let outcome = unsafe { row_counts(&*api, fts, argc, argv) };
    match outcome {
        Ok(Some(blob)) => unsafe {
            ffi::sqlite3_result_blob(
                ctx,
                blob.as_ptr().cast::<c_void>(),
                blob.len() as c_int,
                ffi::SQLITE_TRANSIENT(),
            )
        },
        Ok(None) => unsafe { ffi::sqlite3_result_null(ctx) },
        Err((rc, message)) => unsafe {
            ffi::sqlite3_result_error(ctx, message.as_ptr(), -1);
            ffi::sqlite3_result_error_code(ctx, rc);
        },
    }
}

type Failure = (c_int, &'static std::ffi::CStr);

const USAGE: Failure = (ffi::SQLITE_ERROR, c"memctl_match(archival_fts, words, first_branch, forks)");

/// The current row's counts, or None when the view does not hold it.
unsafe fn row_counts(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) -> std::result::Result<Option<Vec<u8>>, Failure> {
    let (Some(rowid), Some(phrase_first), Some(phrase_next)) =
        (api.xRowid, api.xPhraseFirst, api.xPhraseNext)
    else {
        return Err((ffi::SQLITE_ERROR, c"incomplete FTS5 API"));
    };
    if argc != 3 {
        return Err(USAGE);
    }
    // SAFETY: `argv` holds `argc` values; a blob's bytes stay valid until the value changes,
    // which it does not while this call runs.
    let (words, first_branch, forks) = unsafe {
        let args = std::slice::from_raw_parts(argv, 3);
        let bytes = ffi::sqlite3_value_bytes(args[2]).max(0) as usize;
        let blob = ffi::sqlite3_value_blob(args[2]).cast::<u8>();
        let forks = if blob.is_null() { &[][..] } else { std::slice::from_raw_parts(blob, bytes) };
        (ffi::sqlite3_value_int(args[0]), ffi::sqlite3_value_int(args[1]), forks)
    };
    if words < 0 || first_branch < words || forks.len() % 8 != 0 {
        return Err(USAGE);
    }
    let fork = |j: usize| i64::from_le_bytes(forks[8 * j..8 * j + 8].try_into().unwrap_or([0; 8]));
    let check =
        |rc: c_int| if rc == ffi::SQLITE_OK { Ok(()) } else { Err((rc, c"FTS5 could not read the row")) };
    // The one path branch whose rows at this seq the view holds: the nearest forked before it.
    let seq = unsafe { rowid(fts) };
    let branches = forks.len() / 8;
    let (mut low, mut high) = (0, branches);
    while low < high {
        let mid = (low + high) / 2;
        if fork(mid) < seq {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    if low == branches {
        return Ok(None);
    }
    // Counts the instances of `phrase` in the current row.
    let instances = |phrase: c_int| -> std::result::Result<u32, Failure> {
        let mut iter = ffi::Fts5PhraseIter { a: ptr::null(), b: ptr::null() };
        let (mut column, mut offset) = (0, 0);
        // SAFETY: `fts` is the context of the row being read; `iter` lives across the calls.
        check(unsafe { phrase_first(fts, phrase, &mut iter, &mut column, &mut offset) })?;
        let mut n = 0;
        while column >= 0 {
            n += 1;
            unsafe { phrase_next(fts, &mut iter, &mut column, &mut offset) };
        }
        Ok(n)
    };
    if instances(first_branch + low as c_int)? == 0 {
        return Ok(None);
    }
    let mut blob = Vec::with_capacity(4 * words as usize);
    for phrase in 0..words {
        blob.extend_from_slice(&instances(phrase)?.to_le_bytes());
    }
    Ok(Some(blob))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_counts() {
        let blob: Vec<u8> = [2u32, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(decode_counts(&blob, 7), Some(TermCounts { tokens: 7, tf: vec![2, 0] }));
        assert_eq!(decode_counts(&[1, 0], 7), None);
        assert_eq!(encode_forks([1i64, -1].into_iter()).len(), 16);
    }
}
