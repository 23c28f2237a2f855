//! The `memctl` VFS: SQLite's default VFS, except that each commit reaches the WAL in one
//! system call instead of two per page.
//!
//! SQLite writes a frame as its 24-byte header, then the page right after it
//! (`walWriteOneFrame`), so a commit of four pages made eight `pwrite` calls. On this project's
//! virtual machine a call costs about as much as the copy it makes, and those calls were 40% of
//! an append. Here the writes that extend the WAL are held in a buffer and sent as one when the
//! page of the commit frame (the frame whose header carries the database size) arrives. The
//! frames on disk are the same, and other processes and tools may use the default VFS on the
//! same database.
//!
//! What SQLite relies on still holds:
//! - A commit is in the file before SQLite publishes it in the shared WAL index: its last write
//!   sends the buffer, and a failed send fails that write, so SQLite abandons the commit.
//! - Nothing held outlives the write lock, and no other process could write where the held bytes
//!   go: each lock call on the database's shared memory, its barrier and its unmapping send
//!   what the WAL holds first. That catches the frames of a transaction that spilled pages and
//!   then rolled back.
//! - This connection reads what it wrote: every other call on the WAL sends the buffer first.
//! - Only whole frames that extend the WAL are held; every other write goes straight through.
//!   `walRewriteChecksums` rewrites the headers of a commit that spilled pages, the last of them
//!   right before the commit is published, and with `synchronous = FULL` a frame may be split
//!   at a sync point: holding those would leave a failure unreported.
//!
//! A commit whose frames reach past the end of the WAL file also fills the rest of the file's
//! 64 KiB chunk with zeros, in the same write. Linux then caches that part of the WAL in one
//! 64 KiB folio instead of a small one per write that reached new space, and every later commit
//! there — in this WAL and in each restarted one — copies into a cached folio with fewer,
//! larger pieces to lock, mark and write back. 10,000 appends ran 12% faster for it (median of
//! 20 interleaved runs) and took 8% less CPU. The zeros are written under the write lock, where
//! everything past this commit's frames is stale; SQLite reads them as it reads the old frames
//! it leaves past the end of a restarted WAL: not valid (page 0), so recovery stops there.
//!
//! A crash before a commit is sent loses that commit, as a crash before its `pwrite` calls did;
//! the WAL's checksums reject a torn frame either way.
//!
//! Readers reuse a read mark close behind the WAL's end instead of moving one, which takes two
//! lock calls off each transaction (see [`read_marks`]), and a streaming writer keeps its read
//! lock between transactions, which takes two more (see [`kept_reads`]).

mod kept_reads;
mod read_marks;

use crate::error::{Error, Result};
use rusqlite::ffi;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

/// The name connections open the database with.
pub(crate) const NAME: &str = "memctl";
const C_NAME: &CStr = c"memctl";

/// The size of a WAL frame header; bytes 4..8 of it hold the database size in a commit frame.
const FRAME_HEADER: usize = 24;

/// The size of the WAL's own header, written at offset 0 when the WAL starts over.
const WAL_HEADER: usize = 32;

/// The offset of the WAL's write lock among the shared-memory locks, the bit of the checkpoint
/// lock (offset 1) in a mask of them, and the offsets of the locks of read marks 1 to 4 (mark 0,
/// at 3, means "the WAL is not read" and guards the copying of a checkpoint).
const WAL_WRITE_LOCK: c_int = 0;
const CKPT_LOCK_BIT: u8 = 1 << 1;
const READ_MARK_LOCKS: std::ops::RangeInclusive<c_int> = 4..=7;

/// The most held at once: a commit of more is sent in parts, the last with its commit page.
/// Half of [`MOST_WRITTEN`], which leaves room for the zeros of [`CHUNK`].
const MOST_HELD: usize = 64 << 10;

/// The most the default VFS writes in one call (it masks larger amounts to this).
const MOST_WRITTEN: usize = 0x1_ffff;

/// The chunk a WAL file grows by once a handle has sent that much itself: a process that commits
/// once (a CLI call) writes no zeros. Frames held (at most [`MOST_HELD`]) and the zeros to the
/// end of their chunk always fit in one write.
const CHUNK: i64 = 64 << 10;
const _: () = assert!(MOST_HELD + CHUNK as usize - 1 <= MOST_WRITTEN);

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
        vfs.szOsFile = file_size_for((*base).szOsFile);
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

/// A WAL file: the default VFS's file, stored right after this header, and the writes held.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// The database file's link to this WAL, cleared when the WAL closes; null if the database
    /// file is not this VFS's (then nothing is held).
    db_link: *mut *mut WalFile,
    /// Appending writes not sent yet, and the offset the first of them goes to.
    held: Vec<u8>,
    held_at: i64,
    /// The last write held was a commit frame's header: the write of its page sends the buffer.
    commit_next: bool,
    /// The end of what this handle has written since the WAL's header (offset 0) was last
    /// written: a write starting there or beyond appends.
    written_end: i64,
    /// The bytes of frames this handle has sent.
    sent: i64,
    /// How far the WAL file is known to reach: frames ending past it ask the file for its size.
    file_end: i64,
}

/// Where the default VFS's file starts inside a WAL file, 8-byte aligned.
const REAL_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(8);

/// What a database file of this VFS keeps after the default VFS's file.
#[repr(C)]
struct DbExtra {
    /// The open WAL, null while none is open.
    wal: *mut WalFile,
    /// The first region of the shared WAL index, null while it is not mapped.
    index: *const u8,
    /// Bit `i` is set while this connection holds shared-memory lock `i` exclusively.
    exclusive: u8,
    /// The read lock kept between transactions, shared with the thread that releases it.
    reads: kept_reads::HandleReads,
}

/// A database file is the default VFS's own file (`base_size` bytes) followed, at this offset,
/// by its [`DbExtra`].
fn db_extra_offset(base_size: c_int) -> usize {
    (base_size.max(0) as usize).next_multiple_of(8)
}

fn file_size_for(base_size: c_int) -> c_int {
    let wal = REAL_OFFSET + base_size.max(0) as usize;
    let db = db_extra_offset(base_size) + std::mem::size_of::<DbExtra>();
    wal.max(db) as c_int
}

/// The state kept after a database file of this VFS.
///
/// # Safety
/// `file` must be a database file opened by this VFS whose methods are [`db_methods`]'s.
unsafe fn db_extra(file: *mut ffi::sqlite3_file) -> *mut DbExtra {
    // SAFETY: such a file was given szOsFile bytes, which leave room for the state there;
    // base() is the default VFS, registered before any file of this VFS opens.
    unsafe { file.cast::<u8>().add(db_extra_offset((*base()).szOsFile)).cast() }
}

/// The database file's link to its open WAL.
///
/// # Safety
/// As for [`db_extra`].
unsafe fn db_link(file: *mut ffi::sqlite3_file) -> *mut *mut WalFile {
    // SAFETY: per the contract.
    unsafe { &raw mut (*db_extra(file)).wal }
}

/// The default VFS's methods for database files, and this VFS's copy of them that sends what
/// the WAL holds before each shared-memory call. Set by the first database file opened.
static DB_METHODS: OnceLock<(usize, ffi::sqlite3_io_methods)> = OnceLock::new();

fn default_db_methods() -> &'static ffi::sqlite3_io_methods {
    let (default, _) = DB_METHODS.get().expect("set before a database file of this VFS opens");
    // SAFETY: the default VFS's method tables are static.
    unsafe { &*(*default as *const ffi::sqlite3_io_methods) }
}

/// This VFS's methods for a database file opened with `default` by the default VFS, if it can
/// wrap them (the default VFS uses one table for all database files).
fn db_methods(default: *const ffi::sqlite3_io_methods) -> Option<&'static ffi::sqlite3_io_methods> {
    let (known, ours) = DB_METHODS.get_or_init(|| {
        // SAFETY: `default` was just set by a successful open and points at a static table.
        let mut ours = unsafe { *default };
        if ours.iVersion >= 2 {
            ours.xShmMap = Some(db_shm_map);
            ours.xShmLock = Some(db_shm_lock);
            ours.xShmBarrier = Some(db_shm_barrier);
            ours.xShmUnmap = Some(db_shm_unmap);
        }
        ours.xClose = Some(db_close);
        (default as usize, ours)
    });
    (*known == default as usize).then_some(ours)
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let base = base();
    // SAFETY: SQLite gives `file` szOsFile bytes, enough for the default VFS's file alone, for
    // it with a link after it, or for a WAL file with it at REAL_OFFSET.
    unsafe {
        let Some(base_open) = (*base).xOpen else { return ffi::SQLITE_ERROR };
        if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            let rc = base_open(base, name, file, flags, out_flags);
            if rc == ffi::SQLITE_OK && !(*file).pMethods.is_null() {
                if let Some(ours) = db_methods((*file).pMethods) {
                    db_extra(file).write(DbExtra {
                        wal: std::ptr::null_mut(),
                        index: std::ptr::null(),
                        exclusive: 0,
                        reads: kept_reads::HandleReads::new(),
                    });
                    (*file).pMethods = ours;
                }
            }
            return rc;
        }
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
        // The WAL's name comes from the pager, which knows its database file.
        let db = ffi::sqlite3_database_file_object(name);
        let db_link = match DB_METHODS.get() {
            Some((_, ours)) if !db.is_null() && std::ptr::eq((*db).pMethods, ours) => db_link(db),
            _ => std::ptr::null_mut(),
        };
        let wal = file.cast::<WalFile>();
        std::ptr::write(
            wal,
            WalFile {
                base: ffi::sqlite3_file { pMethods: &WAL_METHODS },
                real,
                db_link,
                held: Vec::new(),
                held_at: 0,
                commit_next: false,
                written_end: 0,
                sent: 0,
                file_end: 0,
            },
        );
        if !db_link.is_null() {
            db_link.write(wal);
        }
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

/// Sends the held writes, if any, as one.
fn flush(wal: &mut WalFile, methods: &ffi::sqlite3_io_methods) -> c_int {
    if wal.held.is_empty() {
        return ffi::SQLITE_OK;
    }
    let frames = wal.held.len();
    wal.sent += frames as i64;
    let padded = wal.sent > CHUNK && pad_to_chunk(wal, methods);
    let Some(write) = methods.xWrite else { return ffi::SQLITE_ERROR };
    // SAFETY: `real` is the open file; `held` is a live buffer of at least the given length.
    let send = |len: usize| unsafe { write(wal.real, wal.held.as_ptr().cast(), len as c_int, wal.held_at) };
    let mut rc = send(wal.held.len());
    if rc != ffi::SQLITE_OK && padded {
        // The zeros must not fail a commit that fits (a nearly full disk): the frames alone.
        rc = send(frames);
    }
    wal.held.clear();
    rc
}

/// Appends to the held frames zeros up to the end of the chunk they end in, if they reach past
/// the end of the WAL file. Only called with frames held, so under the write lock: nothing past
/// them is in use.
fn pad_to_chunk(wal: &mut WalFile, methods: &ffi::sqlite3_io_methods) -> bool {
    let end = wal.held_at + wal.held.len() as i64;
    if end <= wal.file_end {
        return false;
    }
    let mut size = 0;
    let Some(file_size) = methods.xFileSize else { return false };
    // SAFETY: `real` is the open file; `size` is a live i64.
    if unsafe { file_size(wal.real, &mut size) } != ffi::SQLITE_OK {
        return false;
    }
    wal.file_end = size.max(end);
    let zeros = ((CHUNK - end % CHUNK) % CHUNK) as usize;
    if end <= size || zeros == 0 || wal.held.len() + zeros > MOST_WRITTEN {
        return false;
    }
    wal.held.resize(wal.held.len() + zeros, 0);
    wal.file_end = end + zeros as i64;
    true
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
    // The last write was a commit frame's header: this is its page, the commit's last write.
    let commit_page = std::mem::take(&mut wal.commit_next);
    if offset == 0 {
        // The WAL's header: the WAL starts over, and whatever lies beyond is old. The file may
        // have been truncated too (by any process): its length is asked again.
        wal.written_end = 0;
        wal.file_end = 0;
    }
    let end = offset + bytes.len() as i64;
    let continues = !wal.held.is_empty()
        && offset == wal.held_at + wal.held.len() as i64
        && wal.held.len() + bytes.len() <= MOST_HELD;
    if !continues {
        let rc = flush(wal, methods);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    let appends = continues || offset >= wal.written_end;
    wal.written_end = wal.written_end.max(end);
    // Only whole frames are held: a header (or the WAL's header) starts the buffer, and each
    // page follows its header. Anything else — such as the rest of a frame split at a sync
    // point — goes out now, where a failure is reported.
    let starts_frames = bytes.len() == FRAME_HEADER || (offset == 0 && bytes.len() == WAL_HEADER);
    if !(continues || appends && starts_frames) || wal.db_link.is_null() {
        return unsafe { real_write(wal.real, data, amount, offset) };
    }
    if wal.held.is_empty() {
        wal.held_at = offset;
    }
    wal.held.extend_from_slice(bytes);
    wal.commit_next = bytes.len() == FRAME_HEADER && bytes[4..8] != [0; 4];
    if commit_page {
        return flush(wal, methods);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let (wal, methods) = unsafe { parts(file) };
    let flushed = flush(wal, methods);
    if !wal.db_link.is_null() {
        // SAFETY: the database file outlives its WAL; its link is this file.
        unsafe { wal.db_link.write(std::ptr::null_mut()) };
    }
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

/// Never called on a WAL file (its shared memory belongs to the database file); forwarded.
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

/// Sends what the WAL of database file `file` holds.
///
/// # Safety
/// `file` must be a database file of this VFS.
unsafe fn flush_wal_of(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: per the contract; a linked WAL is open (it unlinks itself when it closes).
    unsafe {
        let wal = *db_link(file);
        if wal.is_null() {
            return ffi::SQLITE_OK;
        }
        let (wal, methods) = parts(wal.cast());
        flush(wal, methods)
    }
}

/// Maps a region of the WAL index, remembering where the first one is for [`read_marks`].
unsafe extern "C" fn db_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let Some(method) = default_db_methods().xShmMap else { return ffi::SQLITE_IOERR_SHMMAP };
    // SAFETY: `file` is a database file of this VFS; SQLite passes a live `out`.
    unsafe {
        let rc = method(file, region, size, extend, out);
        if region == 0 && rc == ffi::SQLITE_OK {
            (*db_extra(file)).index = (*out).cast_const().cast();
        }
        rc
    }
}

/// Before a lock is taken or released, the WAL sends what it holds. A failed send refuses a
/// lock but never keeps one: SQLite ignores what an unlock returns, and what can be held then
/// belongs to a transaction that rolled back. A reader's move of a read mark may be refused
/// (see [`read_marks`]).
unsafe extern "C" fn db_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    let rc = unsafe { flush_wal_of(file) };
    if rc != ffi::SQLITE_OK && flags & ffi::SQLITE_SHM_UNLOCK == 0 {
        return rc;
    }
    // SAFETY: `file` is a database file of this VFS, used by this thread; `index` is null or
    // the mapped first region. Fields are reached through the pointer: the thread releasing
    // kept locks reads `reads.kept` meanwhile.
    unsafe {
        let extra = db_extra(file);
        if read_marks::refuse(offset, n, flags, (*extra).exclusive, (*extra).index) {
            return ffi::SQLITE_BUSY;
        }
        let reads = &raw const (*extra).reads;
        let (index, exclusive) = ((*extra).index as usize, (*extra).exclusive != 0);
        if let kept_reads::Decision::Done =
            kept_reads::decide(reads, file as usize, index, offset, n, flags, exclusive)
        {
            return ffi::SQLITE_OK;
        }
        let Some(method) = default_db_methods().xShmLock else { return ffi::SQLITE_IOERR_SHMLOCK };
        let locks = (((1u32 << n) - 1) << offset) as u8;
        let checkpoint = locks & CKPT_LOCK_BIT != 0 && flags & ffi::SQLITE_SHM_EXCLUSIVE != 0;
        let checkpoint_starts = checkpoint && flags & ffi::SQLITE_SHM_LOCK != 0;
        if checkpoint_starts {
            kept_reads::checkpoint_starts(index);
        }
        let rc = method(file, offset, n, flags);
        if offset == WAL_WRITE_LOCK && flags == ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_EXCLUSIVE {
            kept_reads::write_lock_result(&*reads, rc);
        }
        let checkpoint_ends = if checkpoint_starts {
            rc != ffi::SQLITE_OK
        } else {
            checkpoint && (*extra).exclusive & CKPT_LOCK_BIT != 0
        };
        if checkpoint_ends {
            kept_reads::checkpoint_ends(index);
        }
        if rc == ffi::SQLITE_OK && flags & ffi::SQLITE_SHM_EXCLUSIVE != 0 {
            if flags & ffi::SQLITE_SHM_LOCK != 0 {
                (*extra).exclusive |= locks;
            } else {
                (*extra).exclusive &= !locks;
            }
        }
        rc
    }
}

/// Releases a shared lock of a database file of this VFS through the default VFS.
///
/// # Safety
/// `file` must be an open database file of this VFS holding that lock.
unsafe fn release_shared(file: *mut ffi::sqlite3_file, offset: c_int) {
    if let Some(method) = default_db_methods().xShmLock {
        // SAFETY: per the contract; SQLite ignores what an unlock returns, and so does this.
        unsafe { method(file, offset, 1, ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_SHARED) };
    }
}

/// SQLite calls the barrier right before it publishes a commit. The commit's last write sent
/// its frames already, so nothing is held here; were anything, it could not report a failure.
unsafe extern "C" fn db_shm_barrier(file: *mut ffi::sqlite3_file) {
    #[cfg(test)]
    tests::note_held_at_barrier(file);
    let _ = unsafe { flush_wal_of(file) };
    if let Some(method) = default_db_methods().xShmBarrier {
        unsafe { method(file) }
    }
}

/// Unmapping always happens; a failed send is reported after it.
unsafe extern "C" fn db_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let flushed = unsafe { flush_wal_of(file) };
    // SAFETY: `file` is a database file of this VFS. Unmapping drops its locks too, but a kept
    // one must leave the registry first.
    unsafe {
        let extra = db_extra(file);
        kept_reads::forget(&raw const (*extra).reads, file as usize);
        if (*extra).exclusive & CKPT_LOCK_BIT != 0 {
            kept_reads::checkpoint_ends((*extra).index as usize);
        }
        (*extra).index = std::ptr::null();
        (*extra).exclusive = 0;
    }
    let unmapped = match default_db_methods().xShmUnmap {
        Some(method) => unsafe { method(file, delete) },
        None => ffi::SQLITE_OK,
    };
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        unmapped
    }
}

/// SQLite closes a database's WAL before the database file; should it not, the WAL forgets it.
unsafe extern "C" fn db_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: `file` is a database file of this VFS; a linked WAL is still open. Its memory
    // must not stay in the registry of kept locks.
    unsafe {
        kept_reads::forget(&raw const (*db_extra(file)).reads, file as usize);
        let wal = *db_link(file);
        if !wal.is_null() {
            (*wal).db_link = std::ptr::null_mut();
        }
        match default_db_methods().xClose {
            Some(method) => method(file),
            None => ffi::SQLITE_OK,
        }
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::{ffi, Connection, OpenFlags};
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tempfile::TempDir;

    /// Bytes found held when SQLite was about to publish a commit, in any test: always 0.
    static HELD_AT_BARRIER: AtomicUsize = AtomicUsize::new(0);

    pub(super) fn note_held_at_barrier(file: *mut ffi::sqlite3_file) {
        // SAFETY: called by the barrier of a database file of this VFS; a linked WAL is open.
        let wal = unsafe { *super::db_link(file) };
        if !wal.is_null() {
            HELD_AT_BARRIER.fetch_add(unsafe { (*wal).held.len() }, Ordering::SeqCst);
        }
    }

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

    /// Another connection on the same database, through `vfs`.
    fn connect(dir: &Path, vfs: &str) -> Connection {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE;
        Connection::open_with_flags_and_vfs(dir.join("db.sqlite"), flags, vfs).unwrap()
    }

    /// Bytes the WAL of `conn` holds: nothing may be held once a statement has returned.
    fn held(conn: &Connection) -> usize {
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: JOURNAL_POINTER stores the open WAL's file (one of this VFS's) or null.
        unsafe {
            let rc = ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_JOURNAL_POINTER,
                (&raw mut file).cast(),
            );
            assert_eq!(rc, ffi::SQLITE_OK);
            assert!(std::ptr::eq((*file).pMethods, &super::WAL_METHODS));
            (*file.cast::<super::WalFile>()).held.len()
        }
    }

    fn rows(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap()
    }

    /// Every commit is in the file before SQLite publishes it: other connections, this VFS's
    /// or SQLite's own, read it as soon as the commit returns.
    #[test]
    fn other_connections_read_each_commit_when_it_returns() {
        let (dir, conn) = open();
        let (ours, plain) = (connect(dir.path(), super::NAME), connect(dir.path(), "unix"));
        for i in 1..=50 {
            conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
            assert_eq!(held(&conn), 0);
            assert_eq!((rows(&ours), rows(&plain)), (i, i), "after commit {i}");
        }
    }

    /// Commits of 1 to 40 pages: those past the most held are sent in parts, and the last part
    /// goes with the commit page, before SQLite publishes the commit.
    #[test]
    fn commits_of_every_size_are_sent_before_they_are_published() {
        let (dir, conn) = open();
        for pages in 1..=40 {
            conn.execute_batch(&format!(
                "BEGIN;
                 WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {pages})
                     INSERT INTO t SELECT randomblob(3000) FROM c;
                 COMMIT;"
            ))
            .unwrap();
            assert_eq!(held(&conn), 0);
        }
        assert_eq!(HELD_AT_BARRIER.load(Ordering::SeqCst), 0, "bytes held when a commit was published");
        assert_eq!(rows_after_a_kill(dir.path()), 40 * 41 / 2);
    }

    /// After one row, a transaction with a page cache of 5 pages (so it spills pages to the WAL)
    /// that inserts `rows` blobs of `bytes` and ends with `then`.
    fn spilling_transaction(conn: &Connection, rows: usize, bytes: usize, then: &str) {
        conn.execute_batch(&format!(
            "INSERT INTO t VALUES (1); PRAGMA cache_size = 5;
             BEGIN;
             WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {rows})
                 INSERT INTO t SELECT randomblob({bytes}) FROM c;
             {then}"
        ))
        .unwrap();
    }

    /// A transaction that spills frames and rolls back may end with some held. They must go
    /// out before it gives up the write lock: sent later, they would land on the frames of
    /// whoever commits next.
    #[test]
    fn a_rolled_back_spill_leaves_nothing_to_overwrite_the_next_commit() {
        let (dir, conn) = open();
        spilling_transaction(&conn, 300, 500, "ROLLBACK;");
        assert_eq!(held(&conn), 0);
        let other = connect(dir.path(), super::NAME);
        for _ in 0..20 {
            other.execute("INSERT INTO t VALUES (randomblob(500))", []).unwrap();
        }
        // The first connection writes again, after anything it could still have held.
        conn.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!((rows(&conn), rows(&other)), (22, 22));
        assert_eq!(rows_after_a_kill(dir.path()), 22);
        let check: String = other.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// The WAL file's bytes and where its frames end: the first frame whose salts are not the
    /// header's (all frames are valid while the WAL has not restarted).
    fn wal_frames(dir: &Path) -> (Vec<u8>, usize) {
        let wal = std::fs::read(dir.join("db.sqlite-wal")).unwrap();
        let page = u32::from_be_bytes(wal[8..12].try_into().unwrap()) as usize;
        let mut end = super::WAL_HEADER;
        while end + super::FRAME_HEADER + page <= wal.len() && wal[end + 8..end + 16] == wal[16..24] {
            end += super::FRAME_HEADER + page;
        }
        (wal, end)
    }

    /// Once a handle has sent a chunk, the WAL grows by whole chunks: the frames, then zeros to
    /// the chunk's end. A WAL truncated by another connection grows that way again; a restarted
    /// one overwrites its frames within the file.
    #[test]
    fn the_wal_grows_in_chunks_of_zeros_past_its_frames() {
        let (dir, conn) = open();
        // No checkpoint but the ones below: the WAL must not restart on its own.
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        let plain = connect(dir.path(), "unix");
        let chunk = super::CHUNK as usize;
        let grows_in_chunks = |commits: usize, total: i64| {
            for _ in 0..commits {
                conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
            }
            let (wal, frames_end) = wal_frames(dir.path());
            assert_eq!(wal.len() % chunk, 0, "a WAL of {} bytes", wal.len());
            assert!(wal.len() - frames_end < chunk, "frames end at {frames_end} of {}", wal.len());
            assert!(wal[frames_end..].iter().all(|&b| b == 0), "only zeros past the frames");
            assert_eq!((rows(&plain), rows_after_a_kill(dir.path())), (total, total));
        };
        grows_in_chunks(300, 300);
        plain.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("db.sqlite-wal")).unwrap().len(), 0);
        grows_in_chunks(200, 500);

        conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())).unwrap();
        let length = std::fs::metadata(dir.path().join("db.sqlite-wal")).unwrap().len();
        for _ in 0..10 {
            conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
        }
        assert_eq!(std::fs::metadata(dir.path().join("db.sqlite-wal")).unwrap().len(), length);
        assert_eq!((rows(&plain), rows_after_a_kill(dir.path())), (510, 510));
        let check: String = plain.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// The end of the WAL and read marks 1 to 4, as the shared WAL index holds them now.
    fn wal_index(dir: &Path) -> (u32, [u32; 4]) {
        let index = std::fs::read(dir.join("db.sqlite-shm")).unwrap();
        let word = |at: usize| u32::from_ne_bytes(index[at..at + 4].try_into().unwrap());
        (word(16), [word(104), word(108), word(112), word(116)])
    }

    /// Commits `commits` rows through `conn`: how often that moved a read mark. Each time, some
    /// mark must be close enough to the WAL's end to be read under.
    fn mark_moves(dir: &Path, conn: &Connection, commits: usize) -> usize {
        let mut moves = 0;
        let mut last = wal_index(dir).1;
        for _ in 0..commits {
            conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
            let (end, marks) = wal_index(dir);
            let lag = marks.iter().filter(|&&m| m <= end).map(|m| end - m).min().unwrap();
            assert!(lag <= super::read_marks::STALE_FRAMES + 4, "nearest mark {lag} frames back");
            moves += usize::from(marks != last);
            last = marks;
        }
        moves
    }

    /// A connection of this VFS reads under a read mark that is close behind the WAL's end
    /// instead of moving one on each transaction, as SQLite's own VFS does.
    #[test]
    fn readers_reuse_a_recent_read_mark() {
        let (dir, conn) = open();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        let plain = connect(dir.path(), "unix");
        plain.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        assert_eq!(mark_moves(dir.path(), &plain, 100), 100);
        let moves = mark_moves(dir.path(), &conn, 300);
        assert!((1..=10).contains(&moves), "{moves} moves in 300 commits");
        assert_eq!(mark_moves(dir.path(), &plain, 100), 100);
    }

    /// A PASSIVE checkpoint through `conn`: the frames in the WAL and the frames copied.
    fn passive_checkpoint(conn: &Connection) -> (i64, i64) {
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(1)?, r.get(2)?))).unwrap()
    }

    /// Runs PASSIVE checkpoints until one copies every frame: a handle that streamed keeps its
    /// read lock, which stops checkpoints at its mark, for a millisecond or two after its last
    /// transaction.
    fn complete_checkpoint(conn: &Connection) {
        let started = std::time::Instant::now();
        loop {
            let (frames, copied) = passive_checkpoint(conn);
            if copied == frames {
                return;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "copied {copied} of {frames}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Whether a RESTART checkpoint through `conn`, which does not wait, finds a reader in the
    /// way.
    fn restart_is_blocked(conn: &Connection) -> bool {
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get(0)).unwrap();
        busy == 1
    }

    /// A handle that has run enough transactions keeps its read lock between them, so that it
    /// is in the way of a RESTART right after a commit; the lock goes when the handle idles or
    /// closes. A short-lived handle keeps nothing.
    #[test]
    fn a_streaming_handle_keeps_its_read_lock_until_it_idles_or_closes() {
        let (dir, conn) = open();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        let other = connect(dir.path(), "unix");
        other.busy_timeout(std::time::Duration::ZERO).unwrap();
        let commits = std::cell::Cell::new(0);
        let commit = || {
            conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
            commits.set(commits.get() + 1);
        };
        // Right after a commit, tries again should the thread have released the lock meanwhile
        // (this thread held up for a millisecond or two by a loaded machine).
        let blocked_after_a_commit = || {
            (0..5).any(|_| {
                commit();
                restart_is_blocked(&other)
            })
        };
        for _ in 0..5 {
            commit();
        }
        assert!(!restart_is_blocked(&other), "a handle that has not streamed keeps nothing");

        for _ in 0..super::kept_reads::STREAMING + 10 {
            commit();
        }
        assert!(blocked_after_a_commit(), "the streaming handle keeps its read lock");
        let started = std::time::Instant::now();
        while restart_is_blocked(&other) {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "the lock is never released");
            std::thread::sleep(super::kept_reads::IDLE);
        }

        assert!(blocked_after_a_commit());
        // A checkpoint by a handle of this VFS in the same process releases kept locks first.
        let ours = connect(dir.path(), super::NAME);
        let (frames, copied) = passive_checkpoint(&ours);
        assert_eq!(copied, frames, "the checkpoint copied everything");
        assert!(!restart_is_blocked(&other));

        assert!(blocked_after_a_commit());
        drop(conn);
        assert!(!restart_is_blocked(&other), "closing releases the kept lock");
        assert_eq!(rows(&other), commits.get());
    }

    /// A writer and a reader streaming through this VFS while another connection checkpoints
    /// and restarts the WAL in a loop: the reader never sees rows go back, and every commit is
    /// there at the end.
    #[test]
    fn kept_read_locks_hold_up_under_concurrent_checkpoints() {
        let (dir, conn) = open();
        let commits = 2_000;
        let done = &std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let outcome = (0..commits)
                    .try_for_each(|_| conn.execute("INSERT INTO t VALUES (randomblob(300))", []).map(drop));
                done.store(true, Ordering::SeqCst);
                outcome.unwrap();
            });
            scope.spawn(|| {
                let reader = connect(dir.path(), super::NAME);
                let mut last = 0;
                while !done.load(Ordering::SeqCst) {
                    let now = rows(&reader);
                    assert!(now >= last, "{now} rows after {last}");
                    last = now;
                }
            });
            scope.spawn(|| {
                let checkpointer = connect(dir.path(), "unix");
                checkpointer.busy_timeout(std::time::Duration::from_millis(1)).unwrap();
                let modes = ["PASSIVE", "RESTART", "TRUNCATE"];
                for round in 0.. {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    let sql = format!("PRAGMA wal_checkpoint({})", modes[round % modes.len()]);
                    checkpointer.query_row(&sql, [], |_| Ok(())).unwrap();
                }
            });
        });
        let plain = connect(dir.path(), "unix");
        assert_eq!((rows(&plain), rows_after_a_kill(dir.path())), (commits, commits));
        let check: String = plain.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// A reader under a reused mark keeps its snapshot while others commit and checkpoint: the
    /// checkpoints stop at its mark. Once it is done, a checkpoint copies everything and the
    /// next commit restarts the WAL.
    #[test]
    fn checkpoints_stop_at_a_reused_mark_and_restart_the_wal_after() {
        let (dir, conn) = open();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        // The checkpointer is this VFS's too: holding the checkpoint lock, it moves marks.
        let (reader, checkpointer) = (connect(dir.path(), super::NAME), connect(dir.path(), super::NAME));
        let checkpoint = || passive_checkpoint(&checkpointer);
        for _ in 0..50 {
            conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
        }
        complete_checkpoint(&checkpointer);
        conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();

        reader.execute_batch("BEGIN").unwrap();
        let seen = rows(&reader);
        let (end, marks) = wal_index(dir.path());
        assert!(!marks.contains(&end), "the reader reuses an older mark: {marks:?} below {end}");
        for _ in 0..100 {
            conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
            let (frames, copied) = checkpoint();
            assert!(copied < frames, "copied {copied} of {frames} frames past the reader's mark");
        }
        assert_eq!(rows(&reader), seen);
        reader.execute_batch("COMMIT").unwrap();
        assert_eq!(rows(&reader), seen + 100);

        complete_checkpoint(&checkpointer);
        conn.execute("INSERT INTO t VALUES (randomblob(300))", []).unwrap();
        assert!(wal_index(dir.path()).0 <= 2, "the WAL restarted");
        assert_eq!((rows(&checkpointer), rows_after_a_kill(dir.path())), (seen + 101, seen + 101));
        let check: String = checkpointer.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// With `synchronous = FULL` on a disk without powersafe overwrite, SQLite pads each commit
    /// to a sector boundary by writing its last frame again after the commit has gone out, over
    /// the zeros sent with it: every commit must still be read, and found after a kill.
    #[test]
    fn sector_padding_frames_land_over_the_zeros() {
        super::register().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("file:{}?psow=0", dir.path().join("db.sqlite").display());
        let flags =
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags_and_vfs(uri, flags, super::NAME).unwrap();
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE t(x);")
            .unwrap();
        let plain = connect(dir.path(), "unix");
        let mut total = 0;
        for commit in 0..300 {
            let pages = 1 + commit % 5;
            conn.execute_batch(&format!(
                "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {pages})
                     INSERT INTO t SELECT randomblob(1500) FROM c;"
            ))
            .unwrap();
            total += pages;
            assert_eq!(rows(&plain), total, "after commit {commit}");
        }
        assert!(
            std::fs::metadata(dir.path().join("db.sqlite-wal")).unwrap().len() % super::CHUNK as u64 == 0
        );
        assert_eq!(rows_after_a_kill(dir.path()), total);
        let check: String = plain.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// A transaction that spills pages to the WAL and then changes a spilled page ends with
    /// SQLite rewriting its frames' headers one by one (`walRewriteChecksums`). Those rewrites
    /// must reach the file before COMMIT returns.
    #[test]
    fn a_spilling_commit_is_on_disk_when_it_returns() {
        let (dir, conn) = open();
        spilling_transaction(&conn, 2000, 100, "UPDATE t SET x = randomblob(100); COMMIT;");
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
