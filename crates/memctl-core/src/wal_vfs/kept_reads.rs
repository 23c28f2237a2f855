//! A streaming writer keeps its read lock between transactions, saving two more lock calls.
//!
//! Every transaction takes the lock of the read mark it reads under shared, and releases it at
//! its end. Once a handle has run [`STREAMING`] transactions, this VFS keeps that lock when
//! SQLite releases it at the end of a transaction that wrote: the next transaction that reads
//! under the same mark finds it held, and a stream of appends makes no lock call for reading.
//! Any other lock call of the handle, and unmapping its shared memory, first releases what it
//! keeps; so does a process-wide thread once the lock has gone unused for a period of [`IDLE`].
//!
//! A kept lock is what a reader in a long read transaction holds: checkpoints copy no frames
//! past its mark, and the WAL cannot restart. So nothing is kept on a database while a handle of
//! this process checkpoints it: taking the checkpoint lock releases the database's kept locks
//! first, and memctl's background checkpoints copy what they would copy without this module.
//! Checkpoints run by other processes do stop at a kept mark, and their RESTART and TRUNCATE
//! cannot restart the WAL, while a writer streams and for 1–2 ms ([`IDLE`]) after. Short-lived
//! handles (a CLI call) never keep anything. Only writers keep: a writer that finds the write
//! lock busy lets its read lock go before it waits, so a RESTART or TRUNCATE checkpoint, which
//! holds the write lock while it waits for readers, never waits on a writer that waits on it.
//!
//! The hot path is two atomic operations. The handle's `kept` word says which lock is kept;
//! whichever thread releases it first claims it with a compare-and-swap, and sets it to
//! [`NONE`] only once the lock is released, so a handle that finds [`NONE`] calls the default
//! VFS as if this module did not exist, and one that finds [`CLAIMED`] waits the microsecond it
//! takes.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Read transactions a handle runs before it keeps its read lock.
pub(super) const STREAMING: u32 = 16;

/// The period of the thread that releases unused kept locks.
pub(super) const IDLE: Duration = Duration::from_millis(1);

/// `kept` when nothing is kept, and while a thread releases what was.
const NONE: i32 = -1;
const CLAIMED: i32 = -2;

/// One handle's side of it, kept with its database file.
pub(super) struct HandleReads {
    /// The offset of the lock kept, [`NONE`] or [`CLAIMED`]. Only the handle's thread sets an
    /// offset; the thread that releases the lock sets [`NONE`] after it has.
    kept: AtomicI32,
    /// The releasing thread's period when the lock was last kept.
    used: AtomicU64,
    /// Read locks the handle has released, up to [`STREAMING`]; the handle's thread only.
    released: Cell<u32>,
    /// The handle is in the registry; the handle's thread only.
    registered: Cell<bool>,
    /// The handle's transaction took the write lock; the handle's thread only.
    wrote: Cell<bool>,
}

impl HandleReads {
    pub(super) const fn new() -> Self {
        HandleReads {
            kept: AtomicI32::new(NONE),
            used: AtomicU64::new(0),
            released: Cell::new(0),
            registered: Cell::new(false),
            wrote: Cell::new(false),
        }
    }
}

/// A streaming handle, as addresses: its database file, its reads, and its database's WAL index
/// (the same for every handle of a database in the process). A handle leaves the registry before
/// its file closes, and other threads read it only with the registry locked.
#[derive(Clone, Copy)]
struct Handle {
    file: usize,
    reads: usize,
    index: usize,
}

/// The registry: streaming handles, and the databases being checkpointed in this process.
struct Registered {
    handles: Vec<Handle>,
    /// The WAL indexes of the databases being checkpointed, once per checkpoint.
    checkpoints: Vec<usize>,
}

static REGISTERED: Mutex<Registered> =
    Mutex::new(Registered { handles: Vec::new(), checkpoints: Vec::new() });

fn registered() -> MutexGuard<'static, Registered> {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wakes the thread, parked while nothing is kept.
static WOKEN: Condvar = Condvar::new();

/// Whether the thread runs: started by the first lock kept in the process.
static THREAD: OnceLock<bool> = OnceLock::new();

/// The thread's periods so far.
static PERIOD: AtomicU64 = AtomicU64::new(0);

/// The thread waits to be woken: nothing was kept when it last looked.
static PARKED: AtomicBool = AtomicBool::new(false);

/// Checkpoints running in this process, on any database: while there are none, a handle keeps
/// its lock without looking at the registry's list of them.
static CHECKPOINTS: AtomicU32 = AtomicU32::new(0);

/// Starts the thread unless it runs; false if it could not start.
fn thread_runs() -> bool {
    *THREAD.get_or_init(|| {
        std::thread::Builder::new().name("memctl-read-locks".into()).spawn(release_unused_locks).is_ok()
    })
}

/// The thread: each period, releases the locks not kept again since the one before; parks
/// while nothing is kept.
fn release_unused_locks() {
    loop {
        let mut registered = registered();
        let period = PERIOD.fetch_add(1, Ordering::Relaxed) + 1;
        let mut still_kept = false;
        for handle in &registered.handles {
            // SAFETY: registered handles are live while the registry is locked.
            still_kept |= unsafe { release_unused(handle.file, handle.reads, period) };
        }
        if !still_kept {
            PARKED.store(true, Ordering::SeqCst);
            // A handle that kept a lock before it could see PARKED is seen here.
            still_kept = registered
                .handles
                .iter()
                .any(|h| unsafe { reads_of(h.reads) }.kept.load(Ordering::SeqCst) >= 0);
            while !still_kept && PARKED.load(Ordering::SeqCst) {
                registered = WOKEN.wait(registered).unwrap_or_else(|e| e.into_inner());
            }
            PARKED.store(false, Ordering::SeqCst);
        }
        drop(registered);
        std::thread::sleep(IDLE);
    }
}

/// # Safety
/// `reads` must be the address of a live handle's reads. This thread reads only its atomics.
unsafe fn reads_of<'a>(reads: usize) -> &'a HandleReads {
    unsafe { &*(reads as *const HandleReads) }
}

/// Releases the handle's kept lock if it was not kept again in the last full period; true if
/// one is still kept.
///
/// # Safety
/// `file` and `reads` must be a live registered handle's.
unsafe fn release_unused(file: usize, reads: usize, period: u64) -> bool {
    let handle = unsafe { reads_of(reads) };
    let kept = handle.kept.load(Ordering::Acquire);
    if kept < 0 {
        return false;
    }
    if handle.used.load(Ordering::Relaxed) + 2 > period {
        return true;
    }
    // SAFETY: per the contract.
    !unsafe { claim_and_release(handle, file, kept) }
}

/// Claims the kept lock at `offset` and releases it; false if another thread got there first.
///
/// # Safety
/// `file` must be the handle's open database file of this VFS.
unsafe fn claim_and_release(handle: &HandleReads, file: usize, offset: i32) -> bool {
    if handle.kept.compare_exchange(offset, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return false;
    }
    // SAFETY: per the contract; the claim makes this the only thread touching the lock.
    unsafe { super::release_shared(file as *mut _, offset) };
    handle.kept.store(NONE, Ordering::Release);
    true
}

/// What a lock call of a handle should do, given what it keeps.
pub(super) enum Decision {
    /// Nothing more: the call released a lock that is now kept, or takes the one kept.
    Done,
    /// Make the call (anything kept has been released).
    Call,
}

/// Decides a lock call of the handle whose reads are `reads` and database file `file`, on the
/// database whose WAL index (its first region's address) is `index`. `exclusive` tells whether
/// the handle holds any lock exclusively.
///
/// # Safety
/// `reads` must be the handle's and `file` its open database file of this VFS, and only the
/// handle's thread may call this.
pub(super) unsafe fn decide(
    reads: *const HandleReads,
    file: usize,
    index: usize,
    offset: i32,
    n: i32,
    flags: i32,
    exclusive: bool,
) -> Decision {
    use rusqlite::ffi::{SQLITE_SHM_LOCK, SQLITE_SHM_SHARED, SQLITE_SHM_UNLOCK};
    // Only the locks of read marks 1 to 4 are kept.
    let mark = n == 1 && super::READ_MARK_LOCKS.contains(&offset);
    // SAFETY: per the contract.
    let handle = unsafe { &*reads };
    if mark && flags == SQLITE_SHM_UNLOCK | SQLITE_SHM_SHARED && !exclusive {
        let kept = keep(handle, file, index, offset);
        return if kept { Decision::Done } else { Decision::Call };
    }
    let takes = (mark && flags == SQLITE_SHM_LOCK | SQLITE_SHM_SHARED).then_some(offset);
    if takes.is_some() && !exclusive {
        // A read transaction starts: whether it writes is yet to be seen. (A writer that
        // restarted the WAL takes a mark again, holding the write lock.)
        handle.wrote.set(false);
    }
    // SAFETY: per the contract.
    if unsafe { release_kept(handle, file, takes) } {
        Decision::Done
    } else {
        Decision::Call
    }
}

/// Notes what a call for the write lock got. Only the read lock of a transaction that wrote is
/// kept. A reader has no reason to let go, whereas a writer that finds the write lock busy
/// does: whoever holds it may be a checkpoint waiting for readers to go (RESTART, TRUNCATE).
pub(super) fn write_lock_result(reads: &HandleReads, rc: i32) {
    reads.wrote.set(rc == rusqlite::ffi::SQLITE_OK);
}

/// A handle of this process is about to take the checkpoint lock of the database whose WAL
/// index is `index`: the database's kept locks are released and none is kept until
/// [`checkpoint_ends`], so the checkpoint copies what it would copy without this module. Under
/// a stream of writes with short pauses, a background checkpoint can then still reach the end
/// of the WAL in a pause and let the next commit restart it.
pub(super) fn checkpoint_starts(index: usize) {
    CHECKPOINTS.fetch_add(1, Ordering::SeqCst);
    let mut registered = registered();
    registered.checkpoints.push(index);
    for handle in registered.handles.iter().filter(|handle| handle.index == index) {
        // SAFETY: registered handles are live while the registry is locked.
        let reads = unsafe { reads_of(handle.reads) };
        let kept = reads.kept.load(Ordering::SeqCst);
        if kept >= 0 {
            // SAFETY: as above; losing the claim means another thread released it.
            unsafe { claim_and_release(reads, handle.file, kept) };
        }
    }
}

/// The checkpoint lock taken after [`checkpoint_starts`] was released, or not taken.
pub(super) fn checkpoint_ends(index: usize) {
    let mut registered = registered();
    if let Some(at) = registered.checkpoints.iter().position(|&running| running == index) {
        registered.checkpoints.swap_remove(at);
    }
    CHECKPOINTS.fetch_sub(1, Ordering::SeqCst);
}

/// Whether a checkpoint of the database with this WAL index runs in this process.
fn checkpointing(index: usize) -> bool {
    CHECKPOINTS.load(Ordering::SeqCst) > 0 && registered().checkpoints.contains(&index)
}

/// Keeps the handle's shared lock at `offset` instead of releasing it, once the handle streams;
/// false if it does not. Called by the handle's thread.
fn keep(handle: &HandleReads, file: usize, index: usize, offset: i32) -> bool {
    if !handle.wrote.replace(false) {
        return false;
    }
    if handle.released.get() < STREAMING {
        handle.released.set(handle.released.get() + 1);
        return false;
    }
    if checkpointing(index) || !thread_runs() {
        return false;
    }
    if !handle.registered.replace(true) {
        let reads = handle as *const HandleReads as usize;
        registered().handles.push(Handle { file, reads, index });
    }
    handle.used.store(PERIOD.load(Ordering::Relaxed), Ordering::Relaxed);
    handle.kept.store(offset, Ordering::SeqCst);
    if checkpointing(index) {
        // A checkpoint started meanwhile, and may not have seen the lock: the lock goes, by
        // this call or, if the checkpoint claimed it first, by the checkpoint's.
        let claimed =
            handle.kept.compare_exchange(offset, NONE, Ordering::SeqCst, Ordering::Relaxed).is_err();
        return claimed;
    }
    if PARKED.load(Ordering::SeqCst) {
        let _registered = registered();
        PARKED.store(false, Ordering::SeqCst);
        WOKEN.notify_one();
    }
    true
}

/// Releases what the handle keeps, unless it is the lock at `takes`, which the handle then takes
/// over (true). Called before any other lock call of the handle.
///
/// # Safety
/// As for [`decide`].
unsafe fn release_kept(handle: &HandleReads, file: usize, takes: Option<i32>) -> bool {
    let mut spins = 0u32;
    loop {
        match handle.kept.load(Ordering::Acquire) {
            NONE => return false,
            // Another thread is releasing it: a call now would race with its call. It takes a
            // microsecond, unless that thread was preempted.
            CLAIMED => {
                spins += 1;
                if spins < 100 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            offset if takes == Some(offset) => {
                let taken = handle.kept.compare_exchange(offset, NONE, Ordering::Acquire, Ordering::Relaxed);
                if taken.is_ok() {
                    return true;
                }
            }
            // SAFETY: per the contract.
            offset => _ = unsafe { claim_and_release(handle, file, offset) },
        }
    }
}

/// Releases what the handle keeps and takes it out of the registry: before its shared memory is
/// unmapped and before its file closes.
///
/// # Safety
/// As for [`decide`].
pub(super) unsafe fn forget(reads: *const HandleReads, file: usize) {
    // SAFETY: per the contract.
    let handle = unsafe { &*reads };
    unsafe { release_kept(handle, file, None) };
    if handle.registered.replace(false) {
        registered().handles.retain(|registered| registered.file != file);
    }
}
