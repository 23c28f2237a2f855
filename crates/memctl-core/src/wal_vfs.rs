//! The `memctl` VFS: SQLite's default VFS, except that each WAL frame reaches the file in one
//! system call instead of two.
//!
//! SQLite writes a frame as its 24-byte header, then the page right after it (`walWriteOneFrame`).
//! On this project's virtual machine a `pwrite` costs about as much as the copy it makes, so a
//! commit of three or four pages spent a third of its time on the extra calls. Here a small write
//! that extends the WAL past everything this handle wrote is held back and sent together with
//! the write that continues it; anything else done to the file first sends what is held. Nothing
//! else changes: the main database file is the default VFS's own, the bytes on disk are the
//! same, and other processes and tools may use the default VFS on the same database.
//!
//! Only appends are held. A new frame's header is always followed by its page before SQLite
//! publishes the frame in the shared WAL index, so by then it has gone out. Other small writes
//! rewrite what is already there — `walRewriteChecksums` rewrites the headers of a commit that
//! spilled pages, the last of them right before the commit is published — and holding one of
//! those would leave a committed frame with a stale checksum on disk until the next call, and
//! lose the commit if the process died first. They go straight through. A crash between a
//! header and its page leaves a torn frame either way, which the WAL's checksums reject.

use crate::error::{Error, Result};
use rusqlite::ffi;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

/// The name connections open the database with.
pub(crate) const NAME: &str = "memctl";
const C_NAME: &CStr = c"memctl";

/// Writes at most this long are held back (a frame header; the WAL header is 32 bytes).
const SMALL_WRITE: usize = 32;

/// Registers the VFS once per process (not as the default).
pub(crate) fn register() -> Result<()> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED.get_or_init(register_once).clone().map_err(Error::internal)
}

/// The default VFS, which does all the work: set once, before the VFS is registered.
static BASE: OnceLock<usize> = OnceLock::new();

fn base() -> *mut ffi::sqlite3_vfs {
    BASE.get().copied().unwrap_or(0) as *mut ffi::sqlite3_vfs
}

fn register_once() -> std::result::Result<(), String> {
    // SAFETY: sqlite3_vfs_find returns the registered default VFS, which lives for the process;
    // the new VFS is leaked so that it does too, as SQLite requires of registered VFSes.
    unsafe {
        let base = ffi::sqlite3_vfs_find(std::ptr::null());
        if base.is_null() {
            return Err("SQLite has no default VFS".into());
        }
        let _ = BASE.set(base as usize);
        let mut vfs = *base;
        vfs.zName = C_NAME.as_ptr();
        vfs.szOsFile = wal_file_size((*base).szOsFile);
        vfs.pNext = std::ptr::null_mut();
        vfs.xOpen = Some(open);
        // pAppData stays the default VFS's: its own functions, copied above, read it.
        let rc = ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0);
        if rc != ffi::SQLITE_OK {
            return Err(format!("cannot register the memctl VFS (SQLite error {rc})"));
        }
    }
    Ok(())
}

/// A WAL file: the default VFS's file, stored right after this header, and the write held back.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// A small write not sent yet, and the offset it goes to.
    held: Vec<u8>,
    held_at: i64,
    /// The end of what this handle has written since the WAL's header (offset 0) was last
    /// written: a write starting there or beyond appends.
    written_end: i64,
}

/// Where the default VFS's file starts inside ours, 8-byte aligned.
const REAL_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(8);

fn wal_file_size(base_size: c_int) -> c_int {
    (REAL_OFFSET + base_size.max(0) as usize) as c_int
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let base = base();
    // SAFETY: SQLite gives `file` szOsFile bytes, enough for the default VFS's file alone or
    // for ours with it at REAL_OFFSET; only WAL files get the wrapper.
    unsafe {
        let Some(base_open) = (*base).xOpen else { return ffi::SQLITE_ERROR };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return base_open(base, name, file, flags, out_flags);
        }
        let real = file.cast::<u8>().add(REAL_OFFSET).cast::<ffi::sqlite3_file>();
        let rc = base_open(base, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            // SQLite calls no method of a file whose open failed and whose pMethods is NULL.
            (*file).pMethods = std::ptr::null();
            return rc;
        }
        std::ptr::write(
            file.cast::<WalFile>(),
            WalFile {
                base: ffi::sqlite3_file { pMethods: &WAL_METHODS },
                real,
                held: Vec::new(),
                held_at: 0,
                written_end: 0,
            },
        );
    }
    ffi::SQLITE_OK
}

/// The wrapper's state and the default VFS's file with its methods.
///
/// # Safety
/// `file` must be a file this VFS opened as a WAL file.
unsafe fn parts<'a>(file: *mut ffi::sqlite3_file) -> (&'a mut WalFile, &'a ffi::sqlite3_io_methods) {
    // SAFETY: per the function's contract; the real file's methods were set by its open.
    unsafe {
        let wal = &mut *file.cast::<WalFile>();
        let methods = &*(*wal.real).pMethods;
        (wal, methods)
    }
}

/// Sends the held write, if any.
fn flush(wal: &mut WalFile, methods: &ffi::sqlite3_io_methods) -> c_int {
    if wal.held.is_empty() {
        return ffi::SQLITE_OK;
    }
    let Some(write) = methods.xWrite else { return ffi::SQLITE_ERROR };
    // SAFETY: `real` is the open file; `held` is a live buffer of the given length.
    let rc = unsafe { write(wal.real, wal.held.as_ptr().cast(), wal.held.len() as c_int, wal.held_at) };
    wal.held.clear();
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let (wal, methods) = unsafe { parts(file) };
    let Some(real_write) = methods.xWrite else { return ffi::SQLITE_ERROR };
    // SAFETY: SQLite passes `amount` readable bytes at `data`.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), amount.max(0) as usize) };
    if offset == 0 {
        // The WAL's header: the WAL starts over, and whatever lies beyond is old.
        wal.written_end = 0;
    }
    let end = offset + bytes.len() as i64;
    let continues = !wal.held.is_empty() && offset == wal.held_at + wal.held.len() as i64;
    if continues {
        // The page after its frame header: both in one call.
        wal.held.extend_from_slice(bytes);
        wal.written_end = wal.written_end.max(end);
        if bytes.len() <= SMALL_WRITE && wal.held.len() <= 4 * SMALL_WRITE {
            return ffi::SQLITE_OK;
        }
        return flush(wal, methods);
    }
    let rc = flush(wal, methods);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let appends = offset >= wal.written_end;
    wal.written_end = wal.written_end.max(end);
    if appends && bytes.len() <= SMALL_WRITE {
        wal.held.extend_from_slice(bytes);
        wal.held_at = offset;
        return ffi::SQLITE_OK;
    }
    unsafe { real_write(wal.real, data, amount, offset) }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let (wal, methods) = unsafe { parts(file) };
    let flushed = flush(wal, methods);
    let closed = match methods.xClose {
        Some(close) => unsafe { close(wal.real) },
        None => ffi::SQLITE_OK,
    };
    // SAFETY: the file is not used after xClose; its buffer is freed here.
    unsafe { std::ptr::drop_in_place(&mut wal.held) };
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        closed
    }
}

/// A method that first sends what is held, then does the default VFS's work.
macro_rules! after_flush {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            let (wal, methods) = unsafe { parts(file) };
            let rc = flush(wal, methods);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            match methods.$method {
                Some(method) => unsafe { method(wal.real $(, $arg)*) },
                None => ffi::SQLITE_ERROR,
            }
        }
    };
}

after_flush!(read, xRead, (data: *mut c_void, amount: c_int, offset: i64));
after_flush!(truncate, xTruncate, (size: i64));
after_flush!(sync, xSync, (flags: c_int));
after_flush!(file_size, xFileSize, (size: *mut i64));
after_flush!(lock, xLock, (level: c_int));
after_flush!(unlock, xUnlock, (level: c_int));
after_flush!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int));
after_flush!(file_control, xFileControl, (op: c_int, arg: *mut c_void));
after_flush!(shm_map, xShmMap, (region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void));
after_flush!(shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int));
after_flush!(shm_unmap, xShmUnmap, (delete: c_int));
after_flush!(fetch, xFetch, (offset: i64, amount: c_int, out: *mut *mut c_void));
after_flush!(unfetch, xUnfetch, (offset: i64, page: *mut c_void));

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let (wal, methods) = unsafe { parts(file) };
    methods.xSectorSize.map_or(4096, |method| unsafe { method(wal.real) })
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let (wal, methods) = unsafe { parts(file) };
    methods.xDeviceCharacteristics.map_or(0, |method| unsafe { method(wal.real) })
}

/// Never called on a WAL file (its shared memory belongs to the database file); forwarded, and
/// with nothing to report a failed send through, it sends nothing.
unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    let (wal, methods) = unsafe { parts(file) };
    if let Some(method) = methods.xShmBarrier {
        unsafe { method(wal.real) }
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, OpenFlags};
    use std::path::Path;
    use tempfile::TempDir;

    /// A WAL database through this VFS in a new directory, with a table `t(x)`.
    fn open() -> (TempDir, Connection) {
        super::register().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn =
            Connection::open_with_flags_and_vfs(dir.path().join("db.sqlite"), flags, super::NAME).unwrap();
        // As in memctl: closing does not checkpoint, so recovery reads the WAL.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; CREATE TABLE t(x);")
            .unwrap();
        (dir, conn)
    }

    /// The rows of `t` that recovery finds in the files as they are on disk now — what a killed
    /// process leaves — read from a copy with the default VFS.
    fn rows_after_a_kill(dir: &Path) -> i64 {
        let killed = tempfile::tempdir().unwrap();
        for name in ["db.sqlite", "db.sqlite-wal"] {
            std::fs::copy(dir.join(name), killed.path().join(name)).unwrap();
        }
        let plain = Connection::open(killed.path().join("db.sqlite")).unwrap();
        plain.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap()
    }

    /// A transaction that spills pages to the WAL and then changes a spilled page ends with
    /// SQLite rewriting its frames' headers one by one (`walRewriteChecksums`). Those rewrites
    /// must reach the file before COMMIT returns.
    #[test]
    fn a_spilling_commit_is_on_disk_when_it_returns() {
        let (dir, conn) = open();
        conn.execute_batch(
            "INSERT INTO t VALUES (1); PRAGMA cache_size = 5;
             BEGIN;
             WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000)
                 INSERT INTO t SELECT randomblob(100) FROM c;
             UPDATE t SET x = randomblob(100);
             COMMIT;",
        )
        .unwrap();
        assert_eq!(rows_after_a_kill(dir.path()), 2001, "the committed rows survive a kill");
    }

    /// Frames written the ordinary way (each header held back, then sent with its page).
    #[test]
    fn ordinary_commits_are_on_disk_when_they_return() {
        let (dir, conn) = open();
        for i in 0..300 {
            conn.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
        }
        assert_eq!(rows_after_a_kill(dir.path()), 300);
    }
}
