//! An archival search's matches in a view, from FTS5: which rows the view holds, and how often
//! each query word occurs in them, with the row's length, stored as `archival.tokens` — what the
//! view's bm25 (query.rs) needs. Its visibility test is a derived form of the view rule (see the
//! view's module comment), checked against the model by tests/engine/model.rs.
//!
//! Whether the view holds a row follows from its seq and branch: a branch's rows come after its
//! fork, and an ancestor contributes the rows up to the fork of the path's branch below it. So
//! the seqs between the fork of path branch j and the fork of branch j-1 can only be visible as
//! rows of branch j (nearer branches did not exist yet; farther ones had been left), and the
//! row is visible exactly when branch j wrote it (`path::holder`). Each row FTS5 returns is read
//! with its branch and length from `archival_lengths`, a narrow table keyed by seq (one seek by
//! integer key), in one statement that returns no row (below). The FTS5 index lags the table by
//! less than a batch (schema/fts.rs): the versions past its end are read from the table and
//! counted as the keyword search counts.
//!
//! Two walks find the same matches:
//! - **by words**: FTS5 is asked for the rows holding a query word. Its cost follows the query
//!   words' matches in the whole database.
//! - **by branches**: the MATCH also asks for the path's branches (a `branch` column), so FTS5
//!   skips other branches' rows. Its cost follows the matches of the path's branches, but FTS5
//!   tests the OR of the path's branch phrases, one per level, on every row it steps to: at
//!   depth 50 that was half of a search.
//!
//! A search walks by branches unless its path holds at least half of the branches ever created
//! (a deep chain, whose view likely holds most of the database). Then it walks by words while
//! at least half the rows it has read are the view's (checked from the 64th row on), and
//! otherwise starts again by branches, having read at most 64 rows or about twice the view's
//! matches found so far, which the walk by branches reads anyway.
//!
//! `memctl_match(archival_fts, branch, tokens)`, an FTS5 auxiliary function, reads each row
//! in the statement: it keeps the row for the walk running on its thread if the view holds it,
//! with the instances of each query word (the expression's first phrases) in the row, and
//! returns 0, so that no row comes out of SQLite. Nothing is built for rows the view does not
//! hold, and no row is stepped to, read and copied into Rust: at 4,800 instructions a match,
//! that was a fifth of a search. FTS5's own `bm25()` is not used because it counts, on every
//! query, the documents of each phrase in the whole database (`xQueryPhrase`): at a million
//! records that costs tens of milliseconds before the first row, and it makes one branch's
//! ranking depend on its siblings' records. Nor is FTS5 asked for the row's size
//! (`xColumnSize`, a statement run per row); the index keeps no sizes (`columnsize=0`).

use super::sql::NOT_DELETED;
use super::{counting_versions, path, KEYWORD_FIELDS};
use crate::db::params;
use crate::error::{Error, Result};
use crate::query::{Match, Query, TermCounts};
use crate::rows::BranchPath;
use crate::schema;
use crate::store::Store;
use rusqlite::{ffi, Connection};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::ops::ControlFlow;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::rc::Rc;

/// The rows a walk by words reads before it may give up for a walk by branches.
const SAMPLE: usize = 64;

/// The view's matches of `query` whose rows carry the phrases of `tags` (a prefilter), every
/// version of a record that matches, in no particular order: those in the index, and those
/// past its end. `holds_most`: whether the path holds most branches (`path::holds_most_branches`).
pub(super) fn view_matches(
    store: &Store,
    path: &Rc<BranchPath>,
    query: &Query,
    tags: &[String],
    holds_most: bool,
) -> Result<Vec<Match>> {
    let conn = store.conn.fts5()?;
    register(store, conn)?;
    let mut matches = indexed_matches(conn, path, query, tags, holds_most)?;
    matches.extend(unindexed_matches(store, conn, path, query)?);
    Ok(matches)
}

/// The view's matches that FTS5 finds, by words or by branches (module comment).
fn indexed_matches(
    conn: &Connection,
    path: &Rc<BranchPath>,
    query: &Query,
    tags: &[String],
    holds_most: bool,
) -> Result<Vec<Match>> {
    if holds_most {
        let by_words = query.fts_expression(tags, &[]);
        if let Some(matches) = walk(conn, path, &by_words, query.word_count(), Some(SAMPLE))? {
            return Ok(matches);
        }
    }
    let bids: Vec<i64> = path.branches().iter().map(|b| b.bid).collect();
    let by_branches = query.fts_expression(tags, &bids);
    Ok(walk(conn, path, &by_branches, query.word_count(), None)?.unwrap_or_default())
}

/// The view's matches among the versions the index does not hold yet, those past its end
/// (fewer than a batch: schema/fts.rs), counted as the keyword search
/// counts every version. Their tags are checked with the others' (`archival_fts_matches`).
fn unindexed_matches(
    store: &Store,
    conn: &Connection,
    path: &BranchPath,
    query: &Query,
) -> Result<Vec<Match>> {
    let sql = format!(
        "SELECT t.seq, t.branch, {KEYWORD_FIELDS} FROM archival t WHERE t.seq > ?1 AND {NOT_DELETED}"
    );
    let mut count = counting_versions(query);
    let mut matches = Vec::new();
    store.conn.each(&sql, params![schema::fts::indexed_until(conn)?], |row| {
        let seq = row.get(0)?;
        if let Some(position) = path::held_at(path, seq, row.get(1)?) {
            matches.extend(count(row, 2, seq, &path.branches()[position].id)?);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(matches)
}

/// The rows of the MATCH `expression` (its first `words` phrases the query words) that the view
/// holds, with their counts; None once fewer than half the rows read are the view's, from the
/// `give_up`th row on (module comment).
fn walk(
    conn: &Connection,
    path: &Rc<BranchPath>,
    expression: &str,
    words: usize,
    give_up: Option<usize>,
) -> Result<Option<Vec<Match>>> {
    // CROSS JOIN keeps FTS5's matches the outer loop whatever the table statistics say. The
    // function keeps the rows; it returns 0, so that none comes back out of SQLite.
    let sql = format!(
        "SELECT 1 FROM archival_fts CROSS JOIN archival_lengths t ON t.seq = archival_fts.rowid
         WHERE archival_fts MATCH ?1 AND {FUNCTION}(archival_fts, t.branch, t.tokens)"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let walk = Walk { path: Rc::clone(path), words, give_up, read: 0, matches: Vec::new(), gave_up: false };
    let earlier = WALK.with(|current| current.replace(Some(walk)));
    debug_assert!(earlier.is_none(), "walks do not nest: one statement runs at a time on a thread");
    let outcome = statement.query([expression]).and_then(|mut rows| rows.next().map(drop));
    let walk = WALK.with(|current| current.borrow_mut().take()).expect("the walk set above");
    if walk.gave_up {
        return Ok(None);
    }
    outcome?;
    Ok(Some(walk.matches))
}

/// The name the function is registered under.
const FUNCTION: &str = "memctl_match";

thread_local! {
    /// The walk whose statement runs on this thread, to which [`memctl_match`] adds its rows.
    static WALK: RefCell<Option<Walk>> = const { RefCell::new(None) };
}

/// What a walk has read so far.
struct Walk {
    path: Rc<BranchPath>,
    /// The query words: the expression's first phrases.
    words: usize,
    /// See [`walk`].
    give_up: Option<usize>,
    /// The rows read.
    read: usize,
    /// The view's rows among them, with their counts.
    matches: Vec<Match>,
    /// Whether the walk stopped for reading too few of the view's rows.
    gave_up: bool,
}

/// Whether `memctl_match` is registered on the store's connection (the store's memo forgets it
/// on a rollback; registering again is harmless: FTS5 finds the newest function of a name).
#[derive(Default)]
struct Registered(bool);

/// Registers `memctl_match` on the store's connection, once.
fn register(store: &Store, conn: &Connection) -> Result<()> {
    if !store.memo(|registered: &mut Registered| registered.0) {
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
    // No panic may cross into SQLite: a walk not running (or already borrowed) is an error.
    let outcome = WALK
        .try_with(|current| match current.try_borrow_mut().as_deref_mut() {
            // SAFETY: SQLite passes a valid API, context and `argc` values for the current row.
            Ok(Some(walk)) => unsafe { walk.read_row(&*api, fts, argc, argv) },
            _ => Err(USAGE),
        })
        .unwrap_or(Err(USAGE));
    match outcome {
        Ok(()) => unsafe { ffi::sqlite3_result_int(ctx, 0) },
        Err((rc, message)) => unsafe {
            ffi::sqlite3_result_error(ctx, message.as_ptr(), -1);
            ffi::sqlite3_result_error_code(ctx, rc);
        },
    }
}

type Failure = (c_int, &'static std::ffi::CStr);

const USAGE: Failure = (ffi::SQLITE_ERROR, c"memctl_match(archival_fts, branch, tokens), in a walk");

impl Walk {
    /// Reads the current row, whose branch and length are the function's arguments: keeps it
    /// with the count of each query word if the view holds it; fails once the walk gives up.
    unsafe fn read_row(
        &mut self,
        api: &ffi::Fts5ExtensionApi,
        fts: *mut ffi::Fts5Context,
        argc: c_int,
        argv: *mut *mut ffi::sqlite3_value,
    ) -> std::result::Result<(), Failure> {
        let (Some(rowid), Some(phrase_count), Some(phrase_first), Some(phrase_next)) =
            (api.xRowid, api.xPhraseCount, api.xPhraseFirst, api.xPhraseNext)
        else {
            return Err((ffi::SQLITE_ERROR, c"incomplete FTS5 API"));
        };
        // SAFETY: `fts` is the context of the row being read; `argv` holds `argc` values.
        let words = self.words as c_int;
        if argc != 2 || words > unsafe { phrase_count(fts) } {
            return Err(USAGE);
        }
        let (seq, bid, tokens) =
            unsafe { (rowid(fts), ffi::sqlite3_value_int64(*argv), ffi::sqlite3_value_int64(*argv.add(1))) };
        self.read += 1;
        if !path::holds(&self.path, seq, bid) {
            if self.give_up.is_some_and(|sample| self.read >= sample && 2 * self.matches.len() < self.read) {
                self.gave_up = true;
                // SQLITE_ABORT ends this statement alone; errors such as SQLITE_FULL or
                // SQLITE_NOMEM would roll back a transaction around it.
                return Err((ffi::SQLITE_ABORT, c"the walk by words gave up"));
            }
            return Ok(());
        }
        let tokens =
            u32::try_from(tokens).map_err(|_| (ffi::SQLITE_ERROR, c"a stored length out of range"))?;
        let mut tf = SmallVec::with_capacity(self.words);
        for phrase in 0..words {
            let mut iter = ffi::Fts5PhraseIter { a: ptr::null(), b: ptr::null() };
            let (mut column, mut offset) = (0, 0);
            // SAFETY: `fts` is the context of the row being read; `iter` lives across the calls.
            let rc = unsafe { phrase_first(fts, phrase, &mut iter, &mut column, &mut offset) };
            if rc != ffi::SQLITE_OK {
                return Err((rc, c"FTS5 could not read the row"));
            }
            let mut n: u32 = 0;
            while column >= 0 {
                n += 1;
                unsafe { phrase_next(fts, &mut iter, &mut column, &mut offset) };
            }
            tf.push(n);
        }
        self.matches.push(Match { seq, counts: TermCounts { tokens, tf } });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Counted = Vec<(i64, TermCounts)>;

    /// Every match `view_matches` finds on `branch`, sorted by seq.
    fn found(s: &Store, branch: &str, query: &str) -> Counted {
        let path = s.path(branch).unwrap();
        let holds_most = path::holds_most_branches(s, &path).unwrap();
        let mut pairs: Counted = view_matches(s, &path, &Query::parse(query), &[], holds_most)
            .unwrap()
            .into_iter()
            .map(|m| (m.seq, m.counts))
            .collect();
        pairs.sort_by_key(|(seq, _)| *seq);
        pairs
    }

    fn indexed_until(s: &Store) -> i64 {
        schema::fts::indexed_until(s.conn.sqlite().unwrap()).unwrap()
    }

    /// Both walks on `branch`: (by words to the end, by branches), each sorted by seq.
    fn walks(s: &Store, branch: &str, query: &str, tags: &[String]) -> (Counted, Counted) {
        let conn = s.conn.sqlite().unwrap();
        register(s, conn).unwrap();
        let path = s.path(branch).unwrap();
        let query = Query::parse(query);
        let sorted = |matches: Vec<Match>| {
            let mut pairs: Counted = matches.into_iter().map(|m| (m.seq, m.counts)).collect();
            pairs.sort_by_key(|(seq, _)| *seq);
            pairs
        };
        let bids: Vec<i64> = path.branches().iter().map(|b| b.bid).collect();
        let [by_words, by_branches] = [&[][..], &bids].map(|bids| {
            let expression = query.fts_expression(tags, bids);
            sorted(walk(conn, &path, &expression, query.word_count(), None).unwrap().unwrap())
        });
        (by_words, by_branches)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Random trees of forks, adds, updates and deletes: on every branch, both walks find
        /// the same rows with the same counts.
        #[test]
        fn both_walks_find_the_same_matches(ops in prop::collection::vec((0u8..4, 0usize..8, 0usize..6), 1..60)) {
            let s = Store::scratch_indexing_by(1);
            s.create_root("b0").unwrap();
            let (mut branches, mut records) = (vec!["b0".to_string()], vec![]);
            let words = ["mpi", "gpu", "kernel", "cache", "tuning", "notes"];
            for (op, pick, word) in ops {
                let branch = branches[pick % branches.len()].clone();
                let text = format!("{} {} x", words[word], words[(word + pick) % words.len()]);
                match op {
                    0 => {
                        let child = format!("b{}", branches.len());
                        s.fork(&branch, Some(&child)).unwrap();
                        branches.push(child);
                    }
                    // Records another branch cannot see are refused; that is the view's business.
                    1 if !records.is_empty() => {
                        let _ = s.archival_update(&branch, records[pick % records.len()], Some(&text), None);
                    }
                    2 if !records.is_empty() => {
                        let _ = s.archival_delete(&branch, records[pick % records.len()]);
                    }
                    _ => {
                        let tag = words[pick % words.len()].to_string();
                        records.push(s.archival_add(&branch, &text, &[tag]).unwrap().id);
                    }
                }
            }
            for branch in &branches {
                for (query, tags) in [("mpi", vec![]), ("gpu kernel cache", vec![]), ("tuning", vec!["notes".to_string()])] {
                    let (by_words, by_branches) = walks(&s, branch, query, &tags);
                    prop_assert_eq!(by_words, by_branches, "{:?} on {}", query, branch);
                }
            }
        }
    }

    /// A view holding few of the rows that match gives the walk by words up after the sample,
    /// and the search still finds the view's matches, by branches.
    #[test]
    fn a_small_view_walks_by_branches() {
        let s = Store::scratch_indexing_by(1);
        s.create_root("root").unwrap();
        s.fork("root", Some("busy")).unwrap();
        s.fork("root", Some("quiet")).unwrap();
        for i in 0..3 * SAMPLE {
            s.archival_add("busy", &format!("mpi run {i}"), &[]).unwrap();
        }
        let seen = s.archival_add("quiet", "mpi once", &[]).unwrap().id;
        let conn = s.conn.sqlite().unwrap();
        register(&s, conn).unwrap();
        let path = s.path("quiet").unwrap();
        let query = Query::parse("mpi");
        let by_words = query.fts_expression(&[], &[]);
        assert!(walk(conn, &path, &by_words, 1, Some(SAMPLE)).unwrap().is_none());
        let holds_most = path::holds_most_branches(&s, &path).unwrap();
        let matches = view_matches(&s, &path, &query, &[], holds_most).unwrap();
        assert_eq!(matches.iter().map(|m| m.seq).collect::<Vec<_>>(), [seen]);
        // The busy branch's view holds all of them: the walk by words goes to the end.
        let path = s.path("busy").unwrap();
        assert_eq!(walk(conn, &path, &by_words, 1, Some(SAMPLE)).unwrap().map(|m| m.len()), Some(3 * SAMPLE));
    }

    /// A query of more words than a match keeps inline: FTS5's counts are still the keyword
    /// counter's, word by word.
    #[test]
    fn many_words_are_counted_as_the_keyword_counter_counts() {
        let s = Store::scratch_indexing_by(1);
        s.create_root("root").unwrap();
        let words: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
        let texts: Vec<String> =
            (0..6).map(|r| words.iter().step_by(r + 1).cloned().collect::<Vec<_>>().join(" ")).collect();
        for text in &texts {
            s.archival_add("root", &format!("{text} {text} tail"), &[]).unwrap();
        }
        let (by_words, by_branches) = walks(&s, "root", &words.join(" "), &[]);
        assert_eq!(by_words, by_branches);
        assert_eq!(by_words.len(), texts.len());
        let query = Query::parse(&words.join(" "));
        for (text, (_, counts)) in texts.iter().zip(&by_words) {
            assert_eq!(counts, &query.term_counts(&[&format!("{text} {text} tail"), "[]"]), "{text}");
        }
    }

    /// The index takes versions a batch at a time; a search finds those past its end too, with
    /// the same counts as if every version were indexed, on every branch.
    #[test]
    fn versions_past_the_index_are_found_as_indexed_ones() {
        let (batched, every) = (Store::scratch_indexing_by(3), Store::scratch_indexing_by(1));
        for s in [&batched, &every] {
            s.create_root("root").unwrap();
            for i in 0..7 {
                if i == 2 {
                    s.fork("root", Some("child")).unwrap();
                }
                let branch = if i > 2 && i % 2 == 1 { "child" } else { "root" };
                s.archival_add(branch, &format!("mpi run {i} mpi"), &[]).unwrap();
            }
            let kept = s.archival_list("child", None).unwrap()[0].id;
            s.archival_update("child", kept, Some("mpi updated"), None).unwrap();
        }
        // Eight versions with text, three a batch: six indexed, two past the index.
        let versions: Vec<i64> = {
            let conn = batched.conn.sqlite().unwrap();
            let mut stmt =
                conn.prepare("SELECT seq FROM archival WHERE text IS NOT NULL ORDER BY seq").unwrap();
            stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
        };
        assert_eq!(indexed_until(&batched), versions[5]);
        assert_eq!(indexed_until(&every), *versions.last().unwrap());
        for branch in ["root", "child"] {
            let both = found(&batched, branch, "mpi");
            assert_eq!(both, found(&every, branch, "mpi"), "{branch}");
            assert!(both.iter().any(|(seq, _)| *seq > versions[5]), "{branch}: a version past the index");
        }
    }

    /// Deletes count toward a batch: fewer versions than a batch are ever past the index's end,
    /// whatever the writes, and the search finds what a store indexing every version finds.
    #[test]
    fn fewer_than_a_batch_are_ever_past_the_index() {
        let (batched, every) = (Store::scratch_indexing_by(3), Store::scratch_indexing_by(1));
        let past = |s: &Store| schema::fts::waiting(s.conn.sqlite().unwrap(), indexed_until(s)).unwrap();
        for s in [&batched, &every] {
            s.create_root("root").unwrap();
            let ids: Vec<i64> =
                (0..5).map(|i| s.archival_add("root", &format!("mpi note {i}"), &[]).unwrap().id).collect();
            for id in ids.into_iter().take(4) {
                s.archival_delete("root", id).unwrap();
                assert!(past(s) < 3, "{} past the index", past(s));
            }
        }
        assert_eq!(found(&batched, "root", "mpi"), found(&every, "root", "mpi"));
        assert_eq!(found(&batched, "root", "mpi").len(), 5, "every version with text, deleted or not");
    }
}
