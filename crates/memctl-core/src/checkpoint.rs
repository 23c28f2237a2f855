//! WAL checkpoints off the write path.
//!
//! A checkpoint copies the WAL back into the database and fsyncs both: its cost is the disk
//! writing out everything committed since the last one. Run inside a commit (SQLite's
//! auto-checkpoint), it stalled a stream of writes for tens of milliseconds each time — 40% of
//! the time of 10,000 appends. Instead, a commit that finds the WAL past [`KICK_PAGES`] wakes a
//! background thread (started on first need, so short-lived processes never start one) that
//! runs a PASSIVE checkpoint on its own connection while writers go on, then syncs the database
//! file. Only the last few frames — those written while it ran — are left to a commit, which
//! copies them and so lets the next write start the WAL over.

use crate::config::Synchronous;
use rusqlite::{ffi, Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// WAL pages (8 MB at 2 KiB) after which a commit asks for a checkpoint.
const KICK_PAGES: i32 = 4_000;

/// A commit that finds no more than this many frames left to copy after a background
/// checkpoint copies them itself: a stall of a few milliseconds, as most of what it syncs was
/// synced by the background. The WAL is then complete in the database, and the next write
/// starts it over, so under a sustained stream of writes it stays near [`KICK_PAGES`] long.
/// (Left to the background alone, the checkpoint never catches up with the newest frames, and
/// SQLite never restarts the WAL.)
const TAIL_PAGES: i32 = 500;

/// WAL pages (64 MB) after which a commit checkpoints itself whatever is left: the bound when
/// the tail never gets short (a reader holding old frames, or a slow disk).
const INLINE_PAGES: i32 = 8 * KICK_PAGES;

/// The background checkpointer of one handle, shared with its WAL hook.
pub(crate) struct Checkpointer {
    path: PathBuf,
    synchronous: Synchronous,
    /// A checkpoint was asked for and has not finished yet.
    pending: Arc<AtomicBool>,
    /// WAL pages when the last checkpoint was asked for: the next is asked for once the WAL has
    /// grown since, or was restarted (then it is shorter).
    kicked_at: AtomicI32,
    /// WAL frames the last background checkpoint left copied (0: none, or the WAL restarted).
    copied: Arc<AtomicI32>,
    /// WAL pages at the last commit, to see the WAL restart.
    last_pages: AtomicI32,
    worker: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
}

impl Checkpointer {
    /// Installs the WAL hook on `conn` (replacing SQLite's in-commit auto-checkpoint).
    pub(crate) fn install(
        conn: &mut Connection,
        path: &Path,
        synchronous: Synchronous,
    ) -> rusqlite::Result<Arc<Checkpointer>> {
        let checkpointer = Arc::new(Checkpointer {
            path: path.to_path_buf(),
            synchronous,
            pending: Arc::new(AtomicBool::new(false)),
            kicked_at: AtomicI32::new(0),
            copied: Arc::new(AtomicI32::new(0)),
            last_pages: AtomicI32::new(0),
            worker: Mutex::new(None),
        });
        let hooked = Arc::clone(&checkpointer);
        conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
            if pages < hooked.last_pages.swap(pages, Ordering::Relaxed) {
                hooked.copied.store(0, Ordering::Relaxed);
            }
            if pages < KICK_PAGES {
                return Ok(());
            }
            let idle = !hooked.pending.load(Ordering::Acquire);
            let copied = hooked.copied.load(Ordering::Relaxed);
            if pages >= INLINE_PAGES || (idle && copied > 0 && pages - copied <= TAIL_PAGES) {
                // Best effort, as SQLite's own auto-checkpoint: a busy result is not an error.
                let _ = wal.checkpoint();
                hooked.copied.store(0, Ordering::Relaxed);
            } else if hooked.grown_since_last_kick(pages) && !hooked.pending.swap(true, Ordering::AcqRel) {
                hooked.kicked_at.store(pages, Ordering::Relaxed);
                hooked.kick();
            }
            Ok(())
        }))?;
        Ok(checkpointer)
    }

    /// True once the WAL was restarted (it is shorter than at the last request) or has grown by
    /// a tail since.
    fn grown_since_last_kick(&self, pages: i32) -> bool {
        let last = self.kicked_at.load(Ordering::Relaxed);
        pages < last || pages >= last + TAIL_PAGES / 2
    }

    fn kick(&self) {
        let mut worker = self.worker.lock().unwrap_or_else(|e| e.into_inner());
        if worker.is_none() {
            *worker = self.spawn();
        }
        match worker.as_ref() {
            Some((wake, _)) if wake.send(()).is_ok() => {}
            // No thread (it could not start): let a later commit try again.
            _ => self.pending.store(false, Ordering::Release),
        }
    }

    fn spawn(&self) -> Option<(Sender<()>, JoinHandle<()>)> {
        let (wake, woken) = channel::<()>();
        let (path, pending, copied) =
            (self.path.clone(), Arc::clone(&self.pending), Arc::clone(&self.copied));
        let synchronous = match self.synchronous {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        let thread = std::thread::Builder::new()
            .name("memctl-checkpoint".into())
            .spawn(move || {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let Ok(conn) = Connection::open_with_flags_and_vfs(&path, flags, crate::wal_vfs::NAME) else {
                    return;
                };
                let _ = conn.pragma_update(None, "synchronous", synchronous);
                while woken.recv().is_ok() {
                    // PASSIVE: copies what it can without waiting for readers or writers; a busy
                    // result only means another process is checkpointing.
                    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                        Ok((row.get::<_, i32>(0)?, row.get::<_, i32>(2)?))
                    });
                    if let Ok((0, frames)) = done {
                        // SQLite syncs the database only when a checkpoint copies the whole WAL;
                        // syncing here leaves the commit that copies the tail little to write.
                        sync_database(&conn);
                        copied.store(frames, Ordering::Relaxed);
                    }
                    pending.store(false, Ordering::Release);
                }
            })
            .ok()?;
        Some((wake, thread))
    }

    /// Stops the thread, letting a running checkpoint finish.
    pub(crate) fn stop(&self) {
        let worker = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((wake, thread)) = worker {
            drop(wake);
            let _ = thread.join();
        }
    }
}

/// Flushes the database file of `conn` to disk, as its checkpoints do. (Through SQLite's own
/// handle: closing another descriptor of the file would drop this process's locks on it.)
fn sync_database(conn: &Connection) {
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: the handle is this thread's open connection; FILE_POINTER stores the main
    // database's open file (owned by the connection, alive while it is) into `file`.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&raw mut file).cast(),
        );
        if rc != ffi::SQLITE_OK || file.is_null() || (*file).pMethods.is_null() {
            return;
        }
        if let Some(sync) = (*(*file).pMethods).xSync {
            // Best effort: the checkpoint that completes the WAL syncs again and reports.
            let _ = sync(file, ffi::SQLITE_SYNC_NORMAL);
        }
    }
}
