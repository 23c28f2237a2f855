//! The open database: connection set-up, the write transaction ([`Tx`]) that allocates seqs and
//! inserts journal rows, savepoints, and a per-handle memo that rollbacks clear. The store knows
//! the schema but no layer: what the memo holds is up to its users (the view's paths).

use crate::checkpoint::Checkpointer;
use crate::clock::Clock;
use crate::config::{Config, FtsMode, Synchronous};
use crate::db::{params, Backend, Conn, PgClient};
use crate::error::{sqlite_reason, Error, ErrorKind, Result, Topic};
use crate::progress::{Progress, Silent};
use crate::schema::{self, Creation};
use rusqlite::{Connection, OpenFlags};
use std::any::{Any, TypeId};
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Who is writing, recorded in every journal row (SPEC §8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpContext {
    pub phase: Option<String>,
    pub actor: Option<String>,
}

/// A memctl database opened for reading and writing.
pub struct Store {
    pub(crate) conn: Conn,
    pub(crate) config: Config,
    pub(crate) clock: Clock,
    pub(crate) context: OpContext,
    /// Whether `archival_fts` exists (and so is kept up to date by archival writes, a batch at
    /// a time: schema/fts.rs);
    /// looked up on first use, so commands that never touch archival never pay for it.
    fts_table: OnceCell<bool>,
    /// State derived from the database and kept between calls, one value per type (see
    /// [`Store::memo`]); cleared by every rollback, which may undo what it was derived from.
    memo: RefCell<HashMap<TypeId, Box<dyn Any>>>,
    /// Checkpoints the WAL in the background once it grows (file databases only).
    checkpointer: Option<Arc<Checkpointer>>,
    /// `(data version, next seq)` after this handle's last commit (see [`Tx::next_seq`]).
    seq_cache: Cell<Option<(u32, i64)>>,
    /// Where long operations report their progress (nowhere by default).
    progress: Box<dyn Progress>,
    /// The data versions just before and after this handle's last commit: between the two, no
    /// other connection committed (the commit held the write lock).
    own_commit: Cell<Option<(u32, u32)>>,
}

impl Store {
    /// Opens (creating and migrating if needed) the database at `location`: an SQLite file, or
    /// a PostgreSQL server given by a `postgres://` URL.
    pub fn open(location: &Path, config: Config, clock: Clock) -> Result<Store> {
        Store::check_location(location)?;
        match Store::url(location) {
            Some(url) => Store::open_url(url, config, clock, Creation::Allowed),
            None => Store::open_file(location, config, clock, Creation::Allowed),
        }
    }

    /// Opens an existing memctl database: a missing, empty or foreign file (or PostgreSQL
    /// database without memctl's schema) is an error and is left untouched (only an explicit
    /// `init` creates a database).
    pub fn open_existing(location: &Path, config: Config, clock: Clock) -> Result<Store> {
        Store::check_location(location)?;
        if let Some(url) = Store::url(location) {
            return Store::open_url(url, config, clock, Creation::Refused);
        }
        if !location.exists() {
            return Err(Error::not_found(format!("no database at {}", location.display()))
                .with_topic(Topic::NoDatabase));
        }
        Store::open_file(location, config, clock, Creation::Refused)
    }

    /// Refuses a location that reads as a URL of another kind than PostgreSQL's
    /// (`postgress://…`, `sqlite:///…`): taken as a file path, it would create a file named
    /// after the URL and show its password. Checked by the opens; a caller that prepares the
    /// location first (a file's directory) checks it before.
    pub fn check_location(location: &Path) -> Result<()> {
        let Some(text) = location.to_str().filter(|l| !crate::db::is_url(l)) else { return Ok(()) };
        let Some((scheme, _)) = text.split_once("://") else { return Ok(()) };
        let is_scheme = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !is_scheme {
            return Ok(());
        }
        Err(Error::invalid(format!("'{scheme}://' is not a database URL memctl opens")).with_hint(
            "give an SQLite file path, or a postgres:// or postgresql:// URL (a file whose name holds '://': ./NAME)",
        ))
    }

    /// The PostgreSQL URL a database location is, if it is one (else it is a file path).
    pub fn url(location: &Path) -> Option<&str> {
        location.to_str().filter(|l| crate::db::is_url(l))
    }

    /// A database location as it may be shown: a file's path, or a URL without its password.
    pub fn display_location(location: &Path) -> String {
        match Store::url(location) {
            Some(url) => crate::db::without_password(url),
            None => location.display().to_string(),
        }
    }

    fn open_url(url: &str, config: Config, clock: Clock, creation: Creation) -> Result<Store> {
        let client = PgClient::connect(url, schema::POSTGRES_SCHEMA, config.sqlite.busy_timeout_ms)?;
        Store::with_connection(Conn::Postgres(Box::new(client)), config, clock, creation)
    }

    /// Which database the store runs on.
    pub fn backend(&self) -> Backend {
        self.conn.backend()
    }

    fn open_file(path: &Path, config: Config, clock: Clock, creation: Creation) -> Result<Store> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if creation == Creation::Allowed {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let in_file = |e: Error| match e.kind() {
            ErrorKind::IncompatibleDb | ErrorKind::InvalidInput => {
                let message = format!("{}: {}", path.display(), e.message());
                e.with_message(message)
            }
            _ => e,
        };
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| {
                let message = format!("cannot open: {}", sqlite_reason(&e));
                Error::from(e).with_message(message)
            })
            .map_err(in_file)?;
        let synchronous = config.sqlite.synchronous;
        let mut conn = configure_sqlite(conn, &config)?;
        let checkpointer = Checkpointer::install(&mut conn, path, synchronous)?;
        let mut store =
            Store::with_connection(Conn::Sqlite(conn), config, clock, creation).map_err(in_file)?;
        store.checkpointer = Some(checkpointer);
        Ok(store)
    }

    /// A private in-memory database, for tests and tools.
    pub fn open_in_memory(config: Config, clock: Clock) -> Result<Store> {
        let conn = configure_sqlite(Connection::open_in_memory()?, &config)?;
        Store::with_connection(Conn::Sqlite(conn), config, clock, Creation::Allowed)
    }

    /// A private in-memory database with the default settings and a fixed clock, for the
    /// crate's unit tests in layers that know neither settings nor clocks.
    #[cfg(test)]
    pub(crate) fn scratch() -> Store {
        Store::scratch_anchoring(Config::default().anchor_every)
    }

    /// [`Store::scratch`] with an anchor every `levels` levels (0: none).
    #[cfg(test)]
    pub(crate) fn scratch_anchoring(levels: i64) -> Store {
        Store::scratch_with(Config { anchor_every: levels, ..Config::default() })
    }

    /// [`Store::scratch`] that never consolidates: views keep every event not excluded.
    #[cfg(test)]
    pub(crate) fn scratch_keeping_events() -> Store {
        Store::scratch_with(Config { auto_consolidate: false, ..Config::default() })
    }

    /// [`Store::scratch`] whose FTS5 index takes new archival versions `batch` at a time.
    #[cfg(test)]
    pub(crate) fn scratch_indexing_by(batch: u32) -> Store {
        let mut config = Config::default();
        config.search.fts_batch = std::num::NonZeroU32::new(batch).expect("a batch of one or more");
        Store::scratch_with(config)
    }

    #[cfg(test)]
    fn scratch_with(config: Config) -> Store {
        Store::open_in_memory(config, Clock::Fixed(1.7e9)).expect("an in-memory store")
    }

    fn with_connection(conn: Conn, config: Config, clock: Clock, creation: Creation) -> Result<Store> {
        schema::prepare(&conn, creation)?;
        if let Conn::Sqlite(sqlite) = &conn {
            let synchronous = match config.sqlite.synchronous {
                Synchronous::Normal => "NORMAL",
                Synchronous::Full => "FULL",
            };
            // Temporary tables (the view's path) stay in memory: filling them writes no file.
            sqlite.execute_batch(&format!(
                "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;"
            ))?;
        }
        Ok(Store {
            conn,
            config,
            clock,
            context: OpContext::default(),
            fts_table: OnceCell::new(),
            memo: RefCell::new(HashMap::new()),
            checkpointer: None,
            seq_cache: Cell::new(None),
            progress: Box::new(Silent),
            own_commit: Cell::new(None),
        })
    }

    /// Sets the phase and actor written to the journal by later writes.
    pub fn set_context(&mut self, context: OpContext) {
        let redacted = |text: Option<String>| text.map(|text| self.redacted(&text));
        self.context = OpContext { phase: redacted(context.phase), actor: redacted(context.actor) };
    }

    /// Where long operations (import, exports, gc) report their progress.
    pub fn set_progress(&mut self, progress: Box<dyn Progress>) {
        self.progress = progress;
    }

    /// The data versions just before and after this handle's last commit.
    pub(crate) fn own_commit(&self) -> Option<(u32, u32)> {
        self.own_commit.get()
    }

    pub(crate) fn progress(&self) -> &dyn Progress {
        self.progress.as_ref()
    }

    /// Replaces the clock (tests and replays move time to exercise TTLs).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Whether the database has the FTS5 index, which archival writes keep up to date.
    pub(crate) fn fts_table(&self) -> Result<bool> {
        if let Some(&known) = self.fts_table.get() {
            return Ok(known);
        }
        let found = schema::has_fts_table(&self.conn)?;
        Ok(*self.fts_table.get_or_init(|| found))
    }

    /// Whether archival search runs on FTS5 (else the keyword fallback). With `search.fts = "on"`
    /// a database without the index is an error rather than a silent fallback.
    /// On PostgreSQL: false (FTS5 is SQLite's; search asks the word index, see
    /// [`Store::uses_word_index`]), whatever `search.fts` says.
    pub fn uses_fts(&self) -> Result<bool> {
        if self.backend() == Backend::Postgres {
            return Ok(false);
        }
        let available = self.fts_table()?;
        match self.config.search.fts {
            FtsMode::Off => Ok(false),
            FtsMode::Auto => Ok(available),
            FtsMode::On if available => Ok(true),
            FtsMode::On => Err(Error::incompatible(
                "search.fts = \"on\" but this database has no FTS5 index (SQLite built without FTS5)",
            )
            .with_hint("set [search] fts = \"auto\" to use the keyword fallback")),
        }
    }

    /// Whether archival search asks PostgreSQL's word index for its candidates: on PostgreSQL,
    /// unless `search.fts = "off"` (then every record of the view is counted, as on SQLite).
    pub fn uses_word_index(&self) -> bool {
        self.backend() == Backend::Postgres && self.config.search.fts != FtsMode::Off
    }

    /// Runs `f` in one write transaction: committed if it returns `Ok`, rolled back (leaving
    /// the database exactly as before) otherwise. Reads inside see the writes before them.
    ///
    /// Writers run one at a time, as seq must grow in commit order: SQLite's `BEGIN IMMEDIATE`
    /// takes the database's write lock; on PostgreSQL the transaction first locks the counter
    /// row (`FOR UPDATE`), and every statement after sees what the writers before committed.
    pub fn write<T>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        let tx = Tx {
            store: self,
            next_seq: Cell::new(None),
            journalled: Cell::new(None),
            now: Cell::new(self.clock.now()),
            locked: Cell::new(None),
            fts_at_end: Cell::new(false),
        };
        let before = match &self.conn {
            Conn::Sqlite(_) => {
                self.conn.execute("BEGIN IMMEDIATE", params![])?;
                self.data_version()?
            }
            Conn::Postgres(client) => {
                let locked = client
                    .begin_with(
                        "BEGIN ISOLATION LEVEL READ COMMITTED",
                        "SELECT value FROM meta WHERE key = 'next_seq' FOR UPDATE",
                    )
                    .and_then(|rows| {
                        let value = rows.first().cloned().flatten().unwrap_or_default();
                        value.parse::<i64>().map_err(|_| Error::internal("no seq counter in meta"))
                    })
                    .inspect_err(|_| self.roll_back())?;
                tx.next_seq.set(Some(locked));
                tx.locked.set(Some(locked));
                None
            }
        };
        let outcome = f(&tx).and_then(|value| {
            match (&self.conn, tx.locked.get()) {
                // The counter is saved in the commit's round trip, when it moved.
                (Conn::Postgres(client), Some(locked)) => {
                    match tx.next_seq.get().filter(|&next| next != locked) {
                        Some(next) => client.commit_after(&format!(
                            "UPDATE meta SET value = {next} WHERE key = 'next_seq'"
                        ))?,
                        None => self.conn.commit()?,
                    }
                }
                _ => {
                    tx.flush_seq()?;
                    self.conn.commit()?;
                }
            }
            if let Some(before) = before {
                let after = self.data_version()?.unwrap_or_default();
                self.own_commit.set(Some((before, after)));
                if let Some(next) = tx.next_seq.get() {
                    self.seq_cache.set(Some((after, next)));
                }
            }
            Ok(value)
        });
        if outcome.is_err() {
            self.roll_back();
        }
        outcome
    }

    /// Runs several reads in one read transaction, so they see one snapshot of the database.
    pub(crate) fn read<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            return f();
        }
        self.conn.begin(match self.conn.backend() {
            Backend::Sqlite => "BEGIN",
            // One snapshot for every read of the call.
            Backend::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ",
        })?;
        let outcome = f().and_then(|value| {
            self.conn.commit()?;
            Ok(value)
        });
        if outcome.is_err() {
            self.roll_back();
        }
        outcome
    }

    fn roll_back(&self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.rollback();
        }
        self.forget();
    }

    /// The handle's memo of type `T` (created empty on first use), lent to `f`. Keep `f`
    /// short: it must not reach the memo of the same type again.
    pub(crate) fn memo<T: Default + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut memo = self.memo.borrow_mut();
        let value = memo.entry(TypeId::of::<T>()).or_insert_with(|| Box::new(T::default()));
        f(value.downcast_mut::<T>().expect("a memo entry holds the type it is keyed by"))
    }

    /// Drops everything memoised: after a rollback it may describe rows that are gone, or
    /// miss rows that are back (the view's path table, a new branch's path).
    pub(crate) fn forget(&self) {
        self.memo.borrow_mut().clear();
    }

    /// How many times `gc` has collected branches in this database (view/path.rs checks it).
    pub(crate) fn gc_collections(&self) -> Result<i64> {
        self.conn.query_one(
            "SELECT coalesce((SELECT value FROM meta WHERE key = 'gc_collections'), 0)",
            params![],
            |r| r.get(0),
        )
    }

    /// The next seq the database hands out, as committed (see [`Tx::next_seq`]).
    pub(crate) fn counter(&self) -> Result<i64> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT max((SELECT value FROM meta WHERE key = 'next_seq'),
                            (SELECT coalesce(max(seq), 0) + 1 FROM ops))"
            }
            Backend::Postgres => "SELECT value FROM meta WHERE key = 'next_seq'",
        };
        self.conn.query_one(sql, params![], |r| r.get(0))
    }

    /// The main database's data version (`SQLITE_FCNTL_DATA_VERSION`): unlike `PRAGMA
    /// data_version` it moves on this handle's commits too, and it is read without a statement.
    /// Within a transaction it has seen every commit of other connections. PostgreSQL keeps no
    /// such number: there, None (whatever was derived must be checked again).
    pub(crate) fn data_version(&self) -> Result<Option<u32>> {
        let Some(conn) = self.conn.sqlite() else { return Ok(None) };
        let mut version: u32 = 0;
        // SAFETY: the handle is open for as long as `self.conn`; the call writes one unsigned
        // int to the pointer it is given.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_DATA_VERSION,
                (&raw mut version).cast(),
            )
        };
        if rc != rusqlite::ffi::SQLITE_OK {
            return Err(Error::internal(format!("cannot read the data version (SQLite error {rc})")));
        }
        Ok(Some(version))
    }
}

/// Sets up an SQLite connection as every store wants it, before the schema is read.
fn configure_sqlite(mut conn: Connection, config: &Config) -> Result<Connection> {
    busy::install(&mut conn, config.sqlite.busy_timeout_ms)?;
    conn.set_prepared_statement_cache_capacity(64);
    // With STAT4 compiled in, SQLite re-plans a cached statement whenever a bound value might
    // change its plan — on every lookup here. Our plans never depend on values: keep them.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // The last connection to close would checkpoint the WAL and delete it, fsyncing twice on
    // every short-lived CLI call. Instead the WAL is kept, and shrunk when it grows (Drop).
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    schema::tags::register(&conn)?;
    Ok(conn)
}

/// WAL size past which closing a handle checkpoints and truncates it. Each process that opens
/// the database reads the whole WAL to rebuild its index, and a WAL that no connection kept
/// open across processes is never restarted by SQLite's own auto-checkpoints: it must be
/// truncated, or every later call gets slower. 1 MiB is read in well under a millisecond.
const WAL_SHRINK_BYTES: u64 = 1 << 20;

impl Store {
    /// Writes the WAL back into the database file and empties it, waiting for the lock as a
    /// write does: afterwards the file alone holds the run, to be copied or sent (a closing
    /// handle leaves a small WAL beside it). Nothing to do on PostgreSQL.
    pub fn checkpoint(&self) -> Result<()> {
        if let Some(conn) = self.conn.sqlite() {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.stop();
        }
        let Some(conn) = self.conn.sqlite() else { return };
        let Some(path) = conn.path().filter(|p| !p.is_empty()) else { return };
        let wal_bytes = std::fs::metadata(format!("{path}-wal")).map_or(0, |m| m.len());
        if wal_bytes >= WAL_SHRINK_BYTES {
            // Without waiting: if other processes are busy, one of them will shrink it later.
            let _ = conn.busy_timeout(Duration::ZERO);
            let _ = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        }
    }
}

/// A write transaction. Every row it writes gets the next seq of the database-wide counter.
pub struct Tx<'s> {
    pub(crate) store: &'s Store,
    /// The next seq to hand out, read on first use (see [`Tx::next_seq`]).
    next_seq: Cell<Option<i64>>,
    /// The seq of the last journal row written, to tell whether `meta` must be updated.
    journalled: Cell<Option<i64>>,
    /// One timestamp for everything the transaction writes (an import sets each row's own).
    now: Cell<f64>,
    /// PostgreSQL: the counter as the transaction locked it.
    locked: Cell<Option<i64>>,
    /// Whether archival writes leave the FTS5 index's batches to the end of a bulk write
    /// ([`Tx::indexing_at_end`]).
    pub(crate) fts_at_end: Cell<bool>,
}

impl<'s> std::ops::Deref for Tx<'s> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}

impl Tx<'_> {
    /// Runs the bulk write `f` with the FTS5 index's batches left to its end, where one
    /// statement indexes every version `f` wrote: FTS5 writes one segment for them all, not one
    /// per batch (an import's batches flushed and merged 64 records at a time, a third of its
    /// work). A search inside `f` still sees every version: those past the index's end are
    /// counted as they are read (view/fts_match.rs). Nested, only the outermost indexes.
    pub(crate) fn indexing_at_end<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let outer = self.fts_at_end.replace(true);
        let outcome = f();
        self.fts_at_end.set(outer);
        let outcome = outcome?;
        if !outer && self.fts_table()? {
            schema::fts::index_waiting(self.conn.fts5()?)?;
        }
        Ok(outcome)
    }

    /// The timestamp rows written now get.
    pub(crate) fn now(&self) -> f64 {
        self.now.get()
    }

    /// Stamps the rows written from now on with `ts` (imports keep the original times).
    pub(crate) fn set_now(&self, ts: f64) {
        self.now.set(ts);
    }

    /// Allocates the next seq. Safe without further locking: `BEGIN IMMEDIATE` holds the write lock.
    ///
    /// The counter is `meta.next_seq`, except that a transaction whose last seq went to its
    /// journal row (nearly all of them) does not rewrite `meta`: the journal's newest row then
    /// holds the counter. That saves one page write per command; the next value is the larger
    /// of the two.
    pub(crate) fn next_seq(&self) -> Result<i64> {
        let seq = match self.next_seq.get() {
            Some(seq) => seq,
            None => self.read_counter()?,
        };
        self.next_seq.set(Some(seq + 1));
        Ok(seq)
    }

    /// The counter at the start of an SQLite transaction (PostgreSQL's is read as it is
    /// locked, see [`Store::write`]). While the data version stands where this handle's last
    /// commit left it, no other connection has committed, so that commit still knows the next
    /// seq and the counter need not be read.
    fn read_counter(&self) -> Result<i64> {
        if let Some((version, next)) = self.store.seq_cache.get() {
            if Some(version) == self.store.data_version()? {
                return Ok(next);
            }
        }
        self.store.counter()
    }

    /// Continues the counter from `next` (a copy of a run takes its source's), never back.
    pub(crate) fn continue_from(&self, next: i64) -> Result<()> {
        let current = self.peek_seq()?;
        self.next_seq.set(Some(next.max(current)));
        Ok(())
    }

    /// The seq the next allocation will return, without taking it.
    pub(crate) fn peek_seq(&self) -> Result<i64> {
        let seq = self.next_seq()?;
        self.next_seq.set(Some(seq));
        Ok(seq)
    }

    /// Saves the counter (SQLite; PostgreSQL's is saved as the transaction commits).
    fn flush_seq(&self) -> Result<()> {
        let next = self.next_seq.get();
        if next.is_some() && next.map(|n| n - 1) != self.journalled.get() {
            self.store.conn.execute("UPDATE meta SET value = ?1 WHERE key = 'next_seq'", params![next])?;
        }
        Ok(())
    }

    /// Runs `f` inside a savepoint: kept if it returns `Ok`, undone (with the seqs it took and
    /// the memo) otherwise, while the transaction goes on.
    pub fn savepoint<T>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.in_savepoint(f, |outcome| outcome.is_ok())
    }

    /// Runs `f` and undoes everything it wrote, whatever its outcome: a dry run.
    pub(crate) fn trial<T>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.in_savepoint(f, |_| false)
    }

    fn in_savepoint<T>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> Result<T>,
        keep: impl Fn(&Result<T>) -> bool,
    ) -> Result<T> {
        let conn = &self.store.conn;
        conn.execute("SAVEPOINT memctl_savepoint", params![])?;
        let (next_seq, journalled) = (self.next_seq.get(), self.journalled.get());
        let outcome = f(self);
        if !keep(&outcome) {
            conn.execute("ROLLBACK TO memctl_savepoint", params![])?;
            self.next_seq.set(next_seq);
            self.journalled.set(journalled);
            self.store.forget();
        }
        conn.execute("RELEASE memctl_savepoint", params![])?;
        outcome
    }

    /// Inserts the journal row of one mutation, its arguments capped and serialized by the
    /// caller (journal.rs).
    pub(crate) fn insert_op(&self, bid: Option<i64>, op: &str, args: &str) -> Result<()> {
        let seq = self.next_seq()?;
        let ctx = &self.store.context;
        self.store.conn.execute(
            "INSERT INTO ops(seq, branch, op, args, phase, actor, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![seq, bid, op, args, &ctx.phase, &ctx.actor, self.now()],
        )?;
        self.journalled.set(Some(seq));
        Ok(())
    }
}

/// A busy handler with short jittered sleeps: under contention a waiting writer retries within
/// a fraction of a millisecond instead of SQLite's default back-off of up to 100 ms per try.
mod busy {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    static TIMEOUT_MS: AtomicU64 = AtomicU64::new(30_000);

    thread_local! {
        static WAIT_STARTED: Cell<Option<Instant>> = const { Cell::new(None) };
        static JITTER: Cell<u64> = Cell::new(seed());
    }

    fn seed() -> u64 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0);
        (u64::from(std::process::id()) << 32) ^ nanos ^ 0x9E37_79B9_7F4A_7C15
    }

    /// xorshift64: jitter only, never used for anything stored.
    fn jitter() -> u64 {
        JITTER.with(|state| {
            let mut x = state.get().max(1);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.set(x);
            x
        })
    }

    pub(super) fn install(conn: &mut Connection, timeout_ms: u64) -> Result<()> {
        TIMEOUT_MS.store(timeout_ms, Ordering::Relaxed);
        conn.busy_handler(Some(on_busy))?;
        Ok(())
    }

    /// Returns true to retry. `tries` counts earlier calls for the same lock wait.
    fn on_busy(tries: i32) -> bool {
        let now = Instant::now();
        let started = WAIT_STARTED.with(|cell| {
            if tries == 0 || cell.get().is_none() {
                cell.set(Some(now));
            }
            cell.get().unwrap_or(now)
        });
        let timeout = Duration::from_millis(TIMEOUT_MS.load(Ordering::Relaxed));
        if now.duration_since(started) >= timeout {
            return false;
        }
        // 50 µs doubling to a 2 ms ceiling, each sleep a random fraction of it.
        let ceiling_us = (50u64 << tries.clamp(0, 6) as u32).min(2_000);
        let sleep_us = 20 + jitter() % ceiling_us;
        std::thread::sleep(Duration::from_micros(sleep_us));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workspace builds SQLite with the options `.cargo/config.toml` gives libsqlite3-sys; a
    /// build that lost them would still work, only slower, so this says so.
    #[test]
    fn sqlite_is_built_with_the_workspace_options() {
        let store = Store::scratch();
        let sqlite = store.conn.sqlite().expect("a SQLite store");
        let options: Vec<String> = sqlite
            .prepare("PRAGMA compile_options")
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .expect("SQLite's compile options");
        assert!(options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "compile options: {options:?}");
    }
}
