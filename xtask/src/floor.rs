//! Floors: what plain SQLite, or a bare process, needs for the work a row measures. The table
//! reports each figure over its floor (report.rs), a ratio that moves much less with the
//! machine's speed than the figures themselves.

use anyhow::{ensure, Result};
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::report::millis;

/// A file with memctl's page size and journal pragmas and nothing of memctl: rows with a hash
/// index, a journal, archival texts with an external-content FTS5 index over them, and what a
/// consolidation adds (summaries, and hidden events with two indexes, as memctl's exclusions).
pub struct PlainDb {
    dir: tempfile::TempDir,
    conn: Connection,
    /// The records not in the FTS5 index yet (by seq, which the floors give in no set order:
    /// consolidations number theirs as the run did): it takes them a batch at a time, as
    /// memctl's does, in the commit of the batch's last record.
    waiting: RefCell<Vec<i64>>,
}

impl PlainDb {
    pub fn new() -> Result<PlainDb> {
        let dir = tempfile::Builder::new().prefix("memctl-bench-floor-").tempdir()?;
        let conn = Connection::open(dir.path().join(FILE))?;
        conn.pragma_update(None, "page_size", memctl_core::PAGE_SIZE)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE rows (rid INTEGER PRIMARY KEY, branch INTEGER, text TEXT, hash BLOB);
             CREATE UNIQUE INDEX rows_hash ON rows(branch, hash);
             CREATE TABLE ops (seq INTEGER PRIMARY KEY, args TEXT);
             CREATE TABLE counter (key TEXT PRIMARY KEY, value INTEGER) WITHOUT ROWID;
             INSERT INTO counter VALUES ('next', 1);
             CREATE TABLE nodes (nid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, uid TEXT UNIQUE,
                                 parent INTEGER, fork INTEGER NOT NULL UNIQUE);
             CREATE INDEX nodes_parent ON nodes(parent);
             CREATE TABLE records (seq INTEGER PRIMARY KEY, text TEXT, tags TEXT);
             CREATE TABLE summaries (rid INTEGER PRIMARY KEY, branch INTEGER, text TEXT, events TEXT);
             CREATE INDEX summaries_branch ON summaries(branch, rid);
             CREATE TABLE hidden (rid INTEGER PRIMARY KEY, branch INTEGER, event INTEGER);
             CREATE INDEX hidden_branch ON hidden(branch, rid);
             CREATE INDEX hidden_event ON hidden(event);
             CREATE VIRTUAL TABLE records_fts USING fts5(text, tags, content='records', content_rowid='seq');
             CREATE TABLE core_rows (seq INTEGER PRIMARY KEY, branch INTEGER, key TEXT, value TEXT,
                                     importance INTEGER, ttl TEXT, created_at REAL);
             CREATE INDEX core_rows_key ON core_rows(branch, key);
             CREATE TABLE event_rows (rid INTEGER PRIMARY KEY, branch INTEGER, kind TEXT, text TEXT,
                                      tags TEXT, created_at REAL, hash BLOB);
             CREATE UNIQUE INDEX event_rows_hash ON event_rows(branch, hash);",
        )?;
        // FTS5's leaves fitted to the pages, as memctl fits its own (schema.rs).
        conn.execute(
            "INSERT INTO records_fts(records_fts, rank) VALUES ('pgsz', ?1)",
            [memctl_core::PAGE_SIZE - 64],
        )?;
        Ok(PlainDb { dir, conn, waiting: RefCell::default() })
    }

    /// One transaction writing a row, its hash index entry and a journal row: the b-trees a
    /// recall append writes (a core set or a fork writes as many).
    pub fn commit_row(&self, i: usize, text: &str) -> Result<()> {
        self.transaction(|conn| {
            insert_row(conn, i, text)?;
            journal(conn, i as i64, text)
        })
    }

    /// [`PlainDb::commit_row`] and, in the same transaction, what the consolidation the row
    /// triggered writes: per summary a row with its index entry and the ids it covers, a row
    /// with two index entries per event it hides, the archival copy (its FTS5 entry with its
    /// batch's), and one journal row more.
    pub fn commit_consolidating_row(
        &self,
        i: usize,
        text: &str,
        consolidation: &Consolidation,
    ) -> Result<()> {
        self.transaction(|conn| {
            insert_row(conn, i, text)?;
            journal(conn, i as i64, text)?;
            for summary in &consolidation.summaries {
                conn.prepare_cached("INSERT INTO summaries(branch, text, events) VALUES (1, ?1, ?2)")?
                    .execute(rusqlite::params![summary.text, summary.events])?;
                for event in &summary.hidden {
                    conn.prepare_cached("INSERT INTO hidden(branch, event) VALUES (1, ?1)")?
                        .execute([event])?;
                }
            }
            for (k, record) in consolidation.records.iter().enumerate() {
                self.insert_record(consolidation.seq + k as i64, &record.text, &record.tags)?;
            }
            journal(conn, consolidation.seq + consolidation.records.len() as i64, &consolidation.journal)
        })
    }

    /// One transaction writing what a fork writes: a node row with its four index entries
    /// (id, uid, fork, parent), the counter row and a journal row.
    pub fn commit_fork(&self, i: usize, id: &str) -> Result<()> {
        self.transaction(|conn| {
            conn.prepare_cached("UPDATE counter SET value = value + 1 WHERE key = 'next'")?.execute([])?;
            conn.prepare_cached("INSERT INTO nodes(nid, id, parent, fork) VALUES (?1, ?2, ?3, ?1)")?
                .execute(rusqlite::params![i as i64, id, i.checked_sub(1).map(|p| p as i64)])?;
            journal(conn, i as i64, id)
        })
    }

    /// One transaction writing an archival text and a journal row, and, as memctl's index takes
    /// records a batch at a time, in every batch's last one the batch's FTS5 entries (FTS5 keeps
    /// a size row for each, which its own ranking reads); none of memctl's indexes on the
    /// records.
    pub fn commit_record(&self, i: usize, text: &str, tags: &[String]) -> Result<()> {
        let tags = serde_json::to_string(tags)?;
        self.transaction(|conn| {
            self.insert_record(i as i64, text, &tags)?;
            journal(conn, i as i64, text)
        })
    }

    /// The floor of `import legacy` (workload i): reads from the Python store's file `legacy`,
    /// opened immutable as memctl opens it, the columns memctl reads of its branches, core
    /// values (with their importance and TTL), events and archival texts, and writes them in
    /// one transaction: a node row per branch with its 4 index entries, a core row per value
    /// with its (branch, key) index entry, an event row per event with its hash index entry, a
    /// record per text and, in one statement at the end, their FTS5 entries. Rows of branches
    /// the file does not have, and archival rows without text, are left out, as memctl leaves
    /// them out. How many rows it wrote. (`legacy` must be a path that needs no escaping in a
    /// URI, as a temporary directory's is.)
    pub fn import_legacy(&self, legacy: &Path) -> Result<usize> {
        let source = Connection::open_with_flags(
            format!("file:{}?immutable=1", legacy.display()),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )?;
        // memctl checkpoints off the write path (checkpoint.rs): the commit leaves the WAL as
        // it is, rather than copying it back inside the commit as SQLite's auto-checkpoint would.
        self.conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let mut written = 0;
        self.transaction(|conn| {
            // Node ids in the file's order; a parent may come after its child.
            let mut branches = Vec::new();
            each_row(
                &source,
                "SELECT id, parent_id, node_uid, created_at FROM branches ORDER BY rowid",
                |r| {
                    let row: (String, Option<String>, Option<String>, Value) =
                        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
                    branches.push(row);
                    Ok(())
                },
            )?;
            let nids: HashMap<&str, i64> =
                branches.iter().enumerate().map(|(i, b)| (b.0.as_str(), i as i64 + 1)).collect();
            let mut insert = conn.prepare_cached(
                "INSERT INTO nodes(nid, id, uid, parent, fork) VALUES (?1, ?2, ?3, ?4, ?1)",
            )?;
            for (id, parent, uid, _) in &branches {
                let parent = parent.as_deref().and_then(|p| nids.get(p));
                insert.execute(rusqlite::params![nids[id.as_str()], id, uid, parent])?;
                written += 1;
            }
            // Each row's branch, if the file has it.
            let branch_of = |r: &rusqlite::Row<'_>| -> Result<Option<i64>> {
                Ok(nids.get(r.get_ref(0)?.as_str()?).copied())
            };
            let mut insert = conn.prepare_cached(
                "INSERT INTO core_rows(seq, branch, key, value, importance, ttl, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            let core = "SELECT k.branch_id, k.updated_at, k.rowid, k.key, k.value, m.importance, m.ttl
                        FROM core_kv k LEFT JOIN core_meta m ON m.branch_id = k.branch_id AND m.key = k.key";
            each_row(&source, core, |r| {
                let Some(branch) = branch_of(r)? else { return Ok(()) };
                // Values as the file holds them, whatever their types.
                let (ts, _id, key, value): (Value, i64, String, Option<String>) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                let (importance, ttl): (Value, Value) = (r.get(5)?, r.get(6)?);
                insert.execute(rusqlite::params![written as i64, branch, key, value, importance, ttl, ts])?;
                written += 1;
                Ok(())
            })?;
            let mut insert = conn.prepare_cached(
                "INSERT INTO event_rows(rid, branch, kind, text, tags, created_at, hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            each_row(&source, "SELECT branch_id, created_at, id, kind, text, tags FROM events", |r| {
                let Some(branch) = branch_of(r)? else { return Ok(()) };
                let (ts, _id, kind, text, tags): (Value, i64, String, String, Option<String>) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
                let params =
                    rusqlite::params![written as i64, branch, kind, text, tags, ts, unique_key(written)];
                insert.execute(params)?;
                written += 1;
                Ok(())
            })?;
            let mut insert =
                conn.prepare_cached("INSERT INTO records(seq, text, tags) VALUES (?1, ?2, ?3)")?;
            each_row(&source, "SELECT branch_id, created_at, id, text, tags FROM archival", |r| {
                let (_ts, _id, text, tags): (Value, i64, Option<String>, Option<String>) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                if let (Some(_), Some(text)) = (branch_of(r)?, text) {
                    insert.execute(rusqlite::params![written as i64, text, tags])?;
                    written += 1;
                }
                Ok(())
            })?;
            index_records(conn)
        })?;
        Ok(written)
    }

    /// Writes `records` (texts and JSON tags) and their FTS5 entries in one transaction (setup
    /// for [`PlainDb::search`], not timed).
    pub fn fill_records<'a>(&self, records: impl Iterator<Item = (&'a str, &'a str)>) -> Result<()> {
        self.transaction(|conn| {
            for (seq, (text, tags)) in records.enumerate() {
                conn.prepare_cached("INSERT INTO records(seq, text, tags) VALUES (?1, ?2, ?3)")?
                    .execute(rusqlite::params![seq as i64, text, tags])?;
            }
            index_records(conn)
        })
    }

    /// Inserts a record, and the FTS5 entries of the records waiting for one when they make a
    /// batch.
    fn insert_record(&self, seq: i64, text: &str, tags: &str) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO records(seq, text, tags) VALUES (?1, ?2, ?3)")?
            .execute(rusqlite::params![seq, text, tags])?;
        self.waiting.borrow_mut().push(seq);
        if self.waiting.borrow().len() >= fts_batch() as usize {
            self.index_waiting()?;
        }
        Ok(())
    }

    /// Gives the records waiting for an FTS5 entry theirs.
    pub fn index_waiting(&self) -> Result<()> {
        let waiting = serde_json::to_string(&self.waiting.take())?;
        self.conn
            .prepare_cached(
                "INSERT INTO records_fts(rowid, text, tags)
                 SELECT seq, text, tags FROM records WHERE seq IN (SELECT value FROM json_each(?1))",
            )?
            .execute([waiting])?;
        Ok(())
    }

    /// A search without an index, as far as plain SQLite goes: one scan of the records reading
    /// each text where it lies (no copy) and looking in it for the query's words until one is
    /// found (`str::contains`: no case folding, no word bounds, no ranking); how many hold one.
    pub fn scan_search(&self, query: &str) -> Result<usize> {
        let words: Vec<&str> = query.split_whitespace().collect();
        let mut stmt = self.conn.prepare_cached("SELECT text FROM records")?;
        let mut rows = stmt.query([])?;
        let mut found = 0;
        while let Some(row) = rows.next()? {
            let text = row.get_ref(0)?.as_str()?;
            found += usize::from(words.iter().any(|w| text.contains(w)));
        }
        Ok(found)
    }

    /// FTS5's own search: the `k` best records by its bm25 over the whole table (no view, no
    /// versions), the query's words OR-ed; how many it found.
    pub fn search(&self, query: &str, k: usize) -> Result<usize> {
        let words: Vec<String> = query.split_whitespace().map(|w| format!("\"{w}\"")).collect();
        let mut stmt = self.conn.prepare_cached(
            "SELECT rowid, text, tags FROM records_fts WHERE records_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        let rows = stmt.query_map(rusqlite::params![words.join(" OR "), k as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?.len())
    }

    /// Writes `texts` as rows in one transaction (setup for [`PlainDb::read_rows`], not timed).
    pub fn fill_rows<'a>(&self, texts: impl Iterator<Item = &'a str>) -> Result<()> {
        self.transaction(|conn| {
            for (i, text) in texts.enumerate() {
                conn.prepare_cached("INSERT INTO rows(rid, branch, text, hash) VALUES (?1, 1, ?2, ?3)")?
                    .execute(rusqlite::params![i as i64, text, spread_hash(text)])?;
            }
            Ok(())
        })
    }

    /// Reads the newest `limit` rows (None: every row) into owned values, newest first: what a
    /// view returns, read by one scan of one table.
    pub fn read_rows(&self, limit: Option<usize>) -> Result<usize> {
        read_rows(&self.conn, limit)
    }

    /// [`PlainDb::read_rows`] of every row on a connection opened for it, as a new memctl
    /// handle reads.
    pub fn read_rows_on_new_connection(&self) -> Result<usize> {
        read_rows(&Connection::open(self.dir.path().join(FILE))?, None)
    }

    fn transaction(&self, f: impl FnOnce(&Connection) -> Result<()>) -> Result<()> {
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        f(&self.conn)?;
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

/// What [`PlainDb::import_legacy`] measures, for the table's floor notes.
pub const IMPORT_LEGACY: &str = "plain SQLite reading the legacy file's branches, core values, events and \
     archival texts (the columns memctl reads) and writing them in one transaction: a node row per branch \
     (4 index entries), a core row per value (1 index entry), an event row per event (a hash index entry), \
     a record per text, their FTS5 entries in one statement";

/// How many records memctl's FTS5 index takes at a time (`[search] fts_batch`), which the
/// floors' FTS5 entries follow.
pub fn fts_batch() -> u32 {
    memctl_core::SearchConfig::default().fts_batch.get()
}

/// The plain database's file in its directory.
const FILE: &str = "floor.sqlite";

fn read_rows(conn: &Connection, limit: Option<usize>) -> Result<usize> {
    let mut stmt = conn.prepare_cached("SELECT rid, branch, text FROM rows ORDER BY rid DESC LIMIT ?1")?;
    // A negative LIMIT is none.
    let limit = limit.map_or(-1, |n| n as i64);
    let rows =
        stmt.query_map([limit], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?.len())
}

/// Runs `f` on every row `sql` returns.
fn each_row(conn: &Connection, sql: &str, mut f: impl FnMut(&rusqlite::Row<'_>) -> Result<()>) -> Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        f(row)?;
    }
    Ok(())
}

/// Gives every record its FTS5 entry, in one statement.
fn index_records(conn: &Connection) -> Result<()> {
    conn.execute("INSERT INTO records_fts(rowid, text, tags) SELECT seq, text, tags FROM records", [])?;
    Ok(())
}

/// What one of memctl's consolidations wrote, for the floor of the append that triggered it.
#[derive(Debug, Default)]
pub struct Consolidation {
    /// The first of the seqs its records and journal row take (no other row of the floor's
    /// tables takes them).
    pub seq: i64,
    pub summaries: Vec<SummaryWrite>,
    pub records: Vec<RecordWrite>,
    /// Its journal row's arguments, as stored.
    pub journal: String,
}

/// A summary: its text, the ids it covers (as stored) and the events it hid.
#[derive(Debug)]
pub struct SummaryWrite {
    pub text: String,
    pub events: String,
    pub hidden: Vec<i64>,
}

/// An archival copy of the events: its text and tags, as stored.
#[derive(Debug)]
pub struct RecordWrite {
    pub text: String,
    pub tags: String,
}

fn insert_row(conn: &Connection, i: usize, text: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO rows(rid, branch, text, hash) VALUES (?1, 1, ?2, ?3)")?
        .execute(rusqlite::params![i as i64, text, spread_hash(text)])?;
    Ok(())
}

fn journal(conn: &Connection, seq: i64, text: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO ops(seq, args) VALUES (?1, ?2)")?
        .execute(rusqlite::params![seq, text])?;
    Ok(())
}

/// A 32-byte key spread like a hash, a different one for each `i`.
fn unique_key(i: usize) -> Vec<u8> {
    let mut rng = crate::gen::Rng::new(i as u64);
    (0..4).flat_map(|_| rng.next_u64().to_le_bytes()).collect()
}

/// A 32-byte key spread like a hash (the floor must not depend on memctl's hashing code).
fn spread_hash(text: &str) -> Vec<u8> {
    let mut rng = crate::gen::Rng::new(
        text.len() as u64 ^ text.bytes().fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b)),
    );
    (0..4).flat_map(|_| rng.next_u64().to_le_bytes()).collect()
}

/// The floor of one CLI call: `runs` times, a process that starts, opens the database `db`,
/// inserts one row and exits (`xtask floor-insert`); the times in ms.
pub fn process(db: impl AsRef<std::ffi::OsStr>, runs: usize) -> Result<Vec<f64>> {
    let db = db.as_ref();
    time_runs(runs, |xtask| xtask.arg("floor-insert").arg(db))
}

/// [`process`] on a copy of `db`, which the floor's insert leaves as it was.
pub fn process_on_copy(db: &Path, runs: usize) -> Result<Vec<f64>> {
    let dir = tempfile::Builder::new().prefix("memctl-bench-floor-").tempdir()?;
    let copy = dir.path().join("memory.sqlite");
    std::fs::copy(db, &copy)?;
    process(&copy, runs)
}

/// What [`process`] measures, for the table's floor notes.
pub const PROCESS: &str = "a process that starts, opens the database, inserts one row and exits";

/// The floor of many CLI calls at once (workload p): `workers` threads, each running `calls`
/// [`process`] floors on `db` one after another, all threads at once, so that the inserts wait
/// for each other's locks (with SQLite's own busy handler); each call's time in ms, and the
/// wall time of them all in s.
pub fn processes_at_once(db: &Path, workers: usize, calls: usize) -> Result<(Vec<f64>, f64)> {
    let start = Instant::now();
    let times: Vec<Result<Vec<f64>>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..workers).map(|_| scope.spawn(|| process(db, calls))).collect();
        threads.into_iter().map(|t| t.join().expect("floor thread")).collect()
    });
    let wall = start.elapsed().as_secs_f64();
    Ok((times.into_iter().collect::<Result<Vec<_>>>()?.concat(), wall))
}

/// What [`processes_at_once`] measures, for the table's floor notes.
pub fn at_once(workers: usize, calls: usize) -> String {
    format!("{workers} threads each running {calls} times, all at once, {PROCESS} (waiting for the lock with SQLite's busy handler)")
}

/// The floor of a CLI call whose output is many rows: `runs` times, a process that starts,
/// opens memctl's database `db`, reads `events` events and `records` archival versions of the
/// file and prints each on one line ([`print_rows`], `xtask floor-print`); the times in ms. The
/// output is read through a pipe, as the calls' is.
pub fn process_printing(db: &Path, events: usize, records: usize, runs: usize) -> Result<Vec<f64>> {
    let counts = [events.to_string(), records.to_string()];
    time_runs(runs, |xtask| xtask.arg("floor-print").arg(db).args(&counts))
}

/// What [`process_printing`] measures, for the table's floor notes.
pub fn printing(events: usize, records: usize) -> String {
    format!("a process that starts, opens the database and prints {events} events and {records} records, a line each")
}

/// `xtask floor-print DB EVENTS RECORDS`: `events` events and `records` archival versions of
/// memctl's database `db`, in descending rowid order (the cheapest: an event's rowid holds its
/// branch, then its seq; a record's is its seq), one line each on stdout (seq, time, kind, text
/// and tags; a record's seq, time, text and tags), with none of memctl's view, ranking or
/// layout.
pub fn print_rows(db: &Path, events: usize, records: usize) -> Result<()> {
    let conn = Connection::open(db)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut stmt =
        conn.prepare("SELECT seq, created_at, kind, text, tags FROM events ORDER BY rid DESC LIMIT ?1")?;
    let mut rows = stmt.query([events as i64])?;
    while let Some(r) = rows.next()? {
        let (seq, ts, kind, text, tags): (i64, f64, String, String, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        writeln!(out, "#{seq} {ts} [{kind}] {text} {tags}")?;
    }
    let mut stmt = conn.prepare(
        "SELECT seq, created_at, text, tags FROM archival WHERE text IS NOT NULL ORDER BY seq DESC LIMIT ?1",
    )?;
    let mut rows = stmt.query([records as i64])?;
    while let Some(r) = rows.next()? {
        let (seq, ts, text, tags): (i64, f64, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        writeln!(out, "#{seq} {ts} {text} {tags}")?;
    }
    out.flush()?;
    Ok(())
}

/// The floor of `why` of a core key: `runs` times, a process that starts, opens memctl's
/// database `db` and prints every write of core key `key` with its journal row, a line each
/// ([`print_history`], `xtask floor-history`); the times in ms.
pub fn process_history(db: &Path, key: &str, runs: usize) -> Result<Vec<f64>> {
    time_runs(runs, |xtask| xtask.arg("floor-history").arg(db).arg(key))
}

/// What [`process_history`] measures, for the table's floor notes.
pub fn history(key: &str) -> String {
    format!(
        "a process that starts, opens the database and prints every write of core key {key}, in any \
         branch, with its journal row, a line each"
    )
}

/// `xtask floor-history DB KEY`: every row of core key `key` of memctl's database `db`, in any
/// branch (a probe of the key's index per branch, as `why` reads them), with its branch's id
/// and the journal row at the next seq, oldest first, one line each on stdout (seq, branch,
/// time, value; the journal row's seq, operation, phase and actor), with none of memctl's
/// path, view, statuses or reasons.
pub fn print_history(db: &Path, key: &str) -> Result<()> {
    let conn = Connection::open(db)?;
    let mut stmt = conn.prepare(
        "SELECT t.seq, b.id, t.created_at, t.value, o.seq, o.op, o.phase, o.actor
         FROM branches b CROSS JOIN core t ON t.branch = b.bid AND t.key = ?1
         LEFT JOIN ops o ON o.seq = t.seq + 1",
    )?;
    let mut lines = Vec::new();
    let mut rows = stmt.query([key])?;
    while let Some(r) = rows.next()? {
        let (seq, branch, ts, value): (i64, String, f64, Option<String>) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        let (op_seq, op, phase, actor): (Option<i64>, Option<String>, Option<String>, Option<String>) =
            (r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?);
        let (value, op) = (value.unwrap_or_default(), op.unwrap_or_default());
        let (phase, actor) = (phase.unwrap_or_default(), actor.unwrap_or_default());
        let journal = op_seq.unwrap_or_default();
        lines.push((seq, format!("seq {seq} {branch} {ts} {value} journal #{journal} {op} {phase} {actor}")));
    }
    // Ordered here, as `why` orders them, not by SQLite's sorter.
    lines.sort_unstable_by_key(|(seq, _)| *seq);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (_, line) in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// The floor of `path`: `runs` times, a process that starts, opens memctl's database `db` and
/// prints the path of branch `branch` with what each node wrote up to the next node's fork
/// ([`print_path`], `xtask floor-path`); the times in ms.
pub fn process_path(db: &Path, branch: &str, runs: usize) -> Result<Vec<f64>> {
    time_runs(runs, |xtask| xtask.arg("floor-path").arg(db).arg(branch))
}

/// What [`process_path`] measures, for the table's floor notes.
pub const PATH: &str = "a process that starts, opens the database, reads the path up its parent links, one scan \
     of each layer's table keeping each path node's rows up to the next node's fork, each node's first and last \
     event, and prints them, a line each";

/// A branch of the path [`print_path`] reads.
struct PathNode {
    bid: i64,
    id: String,
    depth: i64,
    fork_seq: i64,
    created_at: f64,
}

/// `xtask floor-path DB BRANCH`: the path of branch `branch` (its id) of memctl's database
/// `db`, read up the parent links in one recursive statement; then one scan of each table
/// (core, exclusions, summaries, archival versions) keeping the rows a path node wrote up to
/// the next node's fork, and per node the first and the last of its events (with the last
/// one's running count, `ordinal`, as `path` reads them); printed root first, a line per node
/// and per row, with none of memctl's anchors, overrides, view or layout. In one read
/// transaction, as memctl reads: one snapshot, and no lock taken and dropped per statement.
pub fn print_path(db: &Path, branch: &str) -> Result<()> {
    let conn = Connection::open(db)?;
    let _read = conn.unchecked_transaction()?;
    let mut nodes: Vec<PathNode> = conn
        .prepare(
            "WITH RECURSIVE up(bid, id, parent, depth, fork_seq, created_at) AS (
                 SELECT bid, id, parent, depth, fork_seq, created_at FROM branches WHERE id = ?1
                 UNION ALL
                 SELECT b.bid, b.id, b.parent, b.depth, b.fork_seq, b.created_at
                 FROM up JOIN branches b ON b.bid = up.parent)
             SELECT bid, id, depth, fork_seq, created_at FROM up",
        )?
        .query_map([branch], |r| {
            Ok(PathNode {
                bid: r.get(0)?,
                id: r.get(1)?,
                depth: r.get(2)?,
                fork_seq: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    ensure!(!nodes.is_empty(), "no branch {branch}");
    nodes.sort_unstable_by_key(|node| node.depth);
    // Each node's cutoff: the fork of the next node; none for the branch itself.
    let cutoffs: Vec<Option<i64>> =
        nodes.iter().skip(1).map(|next| Some(next.fork_seq)).chain([None]).collect();
    let place: HashMap<i64, (usize, i64)> = nodes
        .iter()
        .zip(&cutoffs)
        .enumerate()
        .map(|(i, (node, cutoff))| (node.bid, (i, cutoff.unwrap_or(i64::MAX))))
        .collect();
    // Each node's rows, as the lines to print.
    let mut rows_of = vec![String::new(); nodes.len()];
    let tables = [
        "SELECT branch, seq, key, value FROM core",
        "SELECT branch, seq, event_id FROM inherited_exclusions",
        "SELECT branch, seq, kind, summarized_event_ids FROM inherited_summaries",
        "SELECT branch, seq, record_id, text IS NULL FROM archival",
    ];
    for (table, sql) in tables.iter().enumerate() {
        each_row(&conn, sql, |r| {
            let Some(&(i, cutoff)) = place.get(&r.get::<_, i64>(0)?) else { return Ok(()) };
            let seq: i64 = r.get(1)?;
            if seq > cutoff {
                return Ok(());
            }
            let out = &mut rows_of[i];
            match table {
                0 => {
                    let value = r.get_ref(3)?.as_str_or_null()?.unwrap_or_default();
                    writeln!(out, "core {} = {value} #{seq}", r.get_ref(2)?.as_str()?)?
                }
                1 => writeln!(out, "excluded #{}", r.get::<_, i64>(2)?)?,
                2 => {
                    writeln!(out, "summary #{seq} [{}] {}", r.get_ref(2)?.as_str()?, r.get_ref(3)?.as_str()?)?
                }
                _ => writeln!(
                    out,
                    "record #{} version {seq} deleted {}",
                    r.get::<_, i64>(2)?,
                    r.get::<_, bool>(3)?
                )?,
            }
            Ok(())
        })?;
    }
    let mut last_event = conn
        .prepare("SELECT ordinal, seq FROM events WHERE rid BETWEEN ?1 AND ?2 ORDER BY rid DESC LIMIT 1")?;
    let mut first_event =
        conn.prepare("SELECT seq FROM events WHERE rid BETWEEN ?1 AND ?2 ORDER BY rid LIMIT 1")?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ((node, cutoff), rows) in nodes.iter().zip(cutoffs).zip(rows_of) {
        let first_rid = node.bid << memctl_core::EVENT_ROWID_SEQ_BITS;
        let last_rid = match cutoff {
            Some(cutoff) => {
                writeln!(out, "{} {} up to {cutoff}", node.id, node.created_at)?;
                first_rid + cutoff
            }
            None => {
                writeln!(out, "{} {} all", node.id, node.created_at)?;
                first_rid + (1 << memctl_core::EVENT_ROWID_SEQ_BITS) - 1
            }
        };
        let rids = rusqlite::params![first_rid, last_rid];
        let last: Option<(i64, i64)> =
            last_event.query_row(rids, |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        if let Some((count, last)) = last {
            let first: i64 = first_event.query_row(rids, |r| r.get(0))?;
            writeln!(out, "events {count} #{first} … #{last}")?;
        }
        out.write_all(rows.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// The floor of a search of a whole timeline: `runs` times, a process that starts, opens
/// memctl's database `db`, scans every event and prints how many hold a word of `query`
/// ([`scan_events`], `xtask floor-scan`); the times in ms.
pub fn process_scanning(db: &Path, query: &str, runs: usize) -> Result<Vec<f64>> {
    time_runs(runs, |xtask| xtask.arg("floor-scan").arg(db).arg(query))
}

/// What [`process_scanning`] measures, for the table's floor notes.
pub const SCANNING: &str =
    "a process that starts, opens the database and scans every event's text and kind for a query word";

/// `xtask floor-scan DB QUERY`: one scan of every event of memctl's database `db` (every
/// branch's: no view), reading each text and kind where they lie and looking in them for the
/// query's words until one is found (`str::contains`: no case folding, word bounds or
/// ranking); prints how many hold one. The recall search's floor, as
/// [`PlainDb::scan_search`] is the keyword fallback's.
pub fn scan_events(db: &Path, query: &str) -> Result<()> {
    let words: Vec<&str> = query.split_whitespace().collect();
    let conn = Connection::open(db)?;
    let mut found = 0;
    each_row(&conn, "SELECT text, kind FROM events", |row| {
        let (text, kind) = (row.get_ref(0)?.as_str()?, row.get_ref(1)?.as_str()?);
        found += usize::from(words.iter().any(|w| text.contains(w) || kind.contains(w)));
        Ok(())
    })?;
    println!("{found}");
    Ok(())
}

/// The floor of `gc` and `gc --vacuum` (workload k), on memctl's database `db`: the rows it
/// deleted, and the times in ms of the deletes and of the vacuum.
pub struct Collected {
    pub rows: usize,
    pub delete_ms: f64,
    pub vacuum_ms: f64,
}

/// [`Collected`]: on one connection with memctl's `synchronous` and no checkpoint inside a
/// commit (memctl's are off the write path), plain SQL deleting, in one
/// transaction, the FTS5 entries of the indexed archival versions of the branches marked dead
/// or pruned and not collected yet (one statement), then per branch its rows of each table
/// (the events by the branch's range of rowids) and marking it collected, with none of
/// memctl's checks of which branches may go; then the FTS5 index's segments merged, SQLite's
/// incremental vacuum run to its end and the WAL written back and truncated. The connection is opened and closed outside the
/// times, with a first read that memctl's handle has made too.
pub fn collect_dead(db: &Path) -> Result<Collected> {
    let conn = Connection::open(db)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // memctl checkpoints off the write path (checkpoint.rs): the deletes' commit leaves its
    // pages to the vacuum's checkpoint, not to one of SQLite's inside the commit.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    // A first read, untimed, as memctl's handle has made: it reads the schema, and the WAL
    // copied with the file.
    conn.query_row("SELECT count(*) FROM branches", [], |_| Ok(()))?;
    let start = Instant::now();
    conn.execute("BEGIN IMMEDIATE", [])?;
    let gone: Vec<i64> = conn
        .prepare("SELECT bid FROM branches WHERE status IN ('dead', 'pruned') AND collected_at IS NULL")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let fts: bool =
        conn.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'archival_fts'", [], |r| r.get(0))?;
    if fts {
        // Before any other statement, in rowid order: FTS5 writes its pending changes out at
        // each statement, and at each rowid lower than the one before.
        conn.execute(
            "INSERT INTO archival_fts(archival_fts, rowid, text, tags, branch)
             SELECT 'delete', t.seq, t.text, t.tags, t.branch FROM json_each(?1) g
             CROSS JOIN archival t ON t.branch = g.value
             WHERE t.text IS NOT NULL AND t.seq <= (SELECT value FROM meta WHERE key = 'fts_indexed_until')
             ORDER BY t.seq",
            [serde_json::to_string(&gone)?],
        )?;
    }
    let seq_bits = memctl_core::EVENT_ROWID_SEQ_BITS;
    let mut deletes = vec![conn.prepare(&format!(
        "DELETE FROM events WHERE rid BETWEEN ?1 << {seq_bits} AND (?1 << {seq_bits}) + (1 << {seq_bits}) - 1"
    ))?];
    for table in
        ["core", "archival", "inherited_exclusions", "inherited_summaries", "anchor_rows", "promoted"]
    {
        deletes.push(conn.prepare(&format!("DELETE FROM {table} WHERE branch = ?1"))?);
    }
    let mut collected = conn.prepare("UPDATE branches SET collected_at = 0 WHERE bid = ?1")?;
    let mut rows = 0;
    for bid in &gone {
        for delete in &mut deletes {
            rows += delete.execute([bid])?;
        }
        collected.execute([bid])?;
    }
    drop((deletes, collected));
    conn.execute("COMMIT", [])?;
    let delete_ms = millis(start.elapsed());
    let start = Instant::now();
    if fts {
        // Merged, the index's segments drop the deleted entries, as memctl's vacuum does.
        conn.execute("INSERT INTO archival_fts(archival_fts) VALUES ('optimize')", [])?;
    }
    // Each step of the statement frees one page: run to its end.
    each_row(&conn, "PRAGMA incremental_vacuum", |_| Ok(()))?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let vacuum_ms = millis(start.elapsed());
    Ok(Collected { rows, delete_ms, vacuum_ms })
}

/// What [`collect_dead`]'s deletes measure, for the table's floor notes.
pub const COLLECT_DEAD: &str = "plain SQL deleting, in one transaction, the FTS5 entries of the branches \
     marked dead (one statement, in rowid order), then per branch its rows of each table (no check of \
     which branches may go)";

/// What [`collect_dead`]'s vacuum measures, for the table's floor notes.
pub const VACUUM: &str =
    "the FTS5 index's segments merged ('optimize') and SQLite's incremental vacuum run to its end after \
     the floor's deletes, then the WAL written back";

/// Runs `target/release/xtask` with the arguments `args` gives, `runs` times; each run's time
/// in ms, its output read through a pipe.
fn time_runs(runs: usize, args: impl Fn(&mut Command) -> &mut Command) -> Result<Vec<f64>> {
    let xtask = crate::paths::release_binary("xtask");
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let output = args(&mut Command::new(&xtask)).output()?;
            let elapsed = millis(start.elapsed());
            ensure!(output.status.success(), "xtask floor: {}", String::from_utf8_lossy(&output.stderr));
            Ok(elapsed)
        })
        .collect()
}
