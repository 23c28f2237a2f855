//! WAL checkpoints off the write path.
//!
//! A checkpoint copies the WAL back into the database and fsyncs both: its cost is the disk
//! writing out everything committed since the last one. Run inside a commit (SQLite's
//! auto-checkpoint), it stalled a stream of writes for tens of milliseconds each time — 40% of
//! the time of 10,000 appends. Instead, a commit that finds the WAL past [`KICK_PAGES`] wakes a
//! background thread (started on first need, so short-lived processes never start one) that
//! runs a PASSIVE checkpoint on its own connection while writers go on.

use crate::config::Synchronous;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// WAL pages (16 MB at 4 KiB) after which a commit asks for a checkpoint.
const KICK_PAGES: i32 = 4_000;

/// WAL pages (64 MB) after which a commit checkpoints itself. Under a sustained stream of
/// writes the background checkpoint never catches up with the newest frames, so SQLite never
/// restarts the WAL; this bounds it, at the old cost, only in that case.
const INLINE_PAGES: i32 = 4 * KICK_PAGES;

/// The background checkpointer of one handle, shared with its WAL hook.
pub(crate) struct Checkpointer {
    path: PathBuf,
    synchronous: Synchronous,
    /// A checkpoint was asked for and has not finished yet.
    pending: Arc<AtomicBool>,
    /// WAL pages when the last checkpoint was asked for. While writers keep appending, a
    /// finished checkpoint leaves the WAL as long as it was (SQLite restarts it only once every
    /// frame is copied), so the next one waits until the WAL has grown again.
    kicked_at: AtomicI32,
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
            worker: Mutex::new(None),
        });
        let hooked = Arc::clone(&checkpointer);
        conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
            if pages >= INLINE_PAGES {
                // Best effort, as SQLite's own auto-checkpoint: a busy result is not an error.
                let _ = wal.checkpoint();
            } else if pages >= KICK_PAGES
                && hooked.grown_since_last_kick(pages)
                && !hooked.pending.swap(true, Ordering::AcqRel)
            {
                hooked.kicked_at.store(pages, Ordering::Relaxed);
                hooked.kick();
            }
            Ok(())
        }))?;
        Ok(checkpointer)
    }

    /// True once the WAL was restarted (it is shorter than at the last request) or has grown by
    /// half the kick size since.
    fn grown_since_last_kick(&self, pages: i32) -> bool {
        let last = self.kicked_at.load(Ordering::Relaxed);
        pages < last || pages >= last + KICK_PAGES / 2
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
        let (path, pending) = (self.path.clone(), Arc::clone(&self.pending));
        let synchronous = match self.synchronous {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        let thread = std::thread::Builder::new()
            .name("memctl-checkpoint".into())
            .spawn(move || {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let Ok(conn) = Connection::open_with_flags(&path, flags) else {
                    return;
                };
                let _ = conn.pragma_update(None, "synchronous", synchronous);
                while woken.recv().is_ok() {
                    // PASSIVE: copies what it can without waiting for readers or writers; a busy
                    // result only means another process is checkpointing.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
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
