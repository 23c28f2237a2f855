//! Read marks reused instead of moved, saving two of the six lock calls of a transaction.
//!
//! A WAL reader records how much of the WAL it uses in one of four read marks, each guarded by
//! a lock in the shared WAL index, and holds that lock shared while it reads. When no mark equals
//! the WAL's length, `walTryBeginRead` takes a mark's lock exclusively, moves the mark up to the
//! end of the WAL, releases it, and then takes it shared: three lock calls. After every commit
//! the WAL is longer than every mark, so a process that commits in a loop made those calls each
//! time; each is an `fcntl`, and the six of a transaction were a quarter of an append.
//!
//! When a mark lies at most [`STALE_FRAMES`] behind the WAL's end, this VFS refuses the
//! exclusive lock as busy, without a system call. SQLite then does what it does when other
//! readers hold every mark: it reads under the highest mark not past the WAL's end, taking only
//! that mark's lock shared. The reader still sees the whole WAL (its snapshot is the WAL index
//! header, not the mark); the mark only stops checkpoints from copying frames past it into the
//! database while this reader runs. So a checkpoint meanwhile may copy up to `STALE_FRAMES` fewer
//! frames, and the next one copies them. Refusing a lock is always allowed: another process could
//! hold it.
//!
//! Only readers are refused. A connection holding any lock exclusively is checkpointing,
//! recovering the index or restarting the WAL, and moves marks on purpose; it is never refused.

use std::sync::atomic::{AtomicU32, Ordering};

/// How far behind the end of the WAL a mark may be and still be read under. A process that
/// commits four frames at a time moves a mark once in about 32 transactions.
pub(super) const STALE_FRAMES: u32 = 128;

/// Byte offsets in the WAL index's first region (sqlite.org/walformat.html): `mxFrame` of the
/// first copy of the header, and `aReadMark[0]` of the checkpoint information after both copies.
const MX_FRAME: usize = 16;
const READ_MARKS: usize = 100;

/// A mark nobody reads under.
const NOT_USED: u32 = u32::MAX;

/// True if a request to lock `n` locks from `offset` in mode `flags` is a reader's attempt to
/// move a read mark while one close enough to the WAL's end can be read under instead.
/// `exclusive` has bit `i` set while the connection holds lock `i` exclusively; `index` is the
/// WAL index's first region, null while it is not mapped.
///
/// # Safety
/// `index`, if not null, must point at the mapped first region of a WAL index (32 KiB).
pub(super) unsafe fn refuse(offset: i32, n: i32, flags: i32, exclusive: u8, index: *const u8) -> bool {
    use rusqlite::ffi::{SQLITE_SHM_EXCLUSIVE, SQLITE_SHM_LOCK};
    if flags != SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE
        || n != 1
        || !super::READ_MARK_LOCKS.contains(&offset)
        || exclusive != 0
        || index.is_null()
    {
        return false;
    }
    // SAFETY: the fields read lie inside the region, are 4-byte aligned (the region is
    // page-aligned), and other processes change them only through atomic stores.
    let load = |at: usize| unsafe { (*index.add(at).cast::<AtomicU32>()).load(Ordering::Acquire) };
    let end = load(MX_FRAME);
    (1..=4)
        .map(|mark| load(READ_MARKS + 4 * mark))
        .any(|mark| mark != NOT_USED && mark <= end && end - mark <= STALE_FRAMES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi::{SQLITE_SHM_EXCLUSIVE, SQLITE_SHM_LOCK, SQLITE_SHM_SHARED, SQLITE_SHM_UNLOCK};

    const X_LOCK: i32 = SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE;

    /// A first region with this WAL end and these marks 1 to 4.
    fn index(end: u32, marks: [u32; 4]) -> Vec<u32> {
        let mut region = vec![0u32; 32 << 8];
        region[MX_FRAME / 4] = end;
        for (i, mark) in marks.into_iter().enumerate() {
            region[READ_MARKS / 4 + 1 + i] = mark;
        }
        region
    }

    fn refused(region: &[u32], offset: i32, n: i32, flags: i32, exclusive: u8) -> bool {
        unsafe { refuse(offset, n, flags, exclusive, region.as_ptr().cast()) }
    }

    #[test]
    fn a_reader_moving_a_mark_is_refused_while_one_is_recent() {
        let u = NOT_USED;
        for offset in 4..=7 {
            assert!(refused(&index(1000, [900, u, u, 1000 - STALE_FRAMES]), offset, 1, X_LOCK, 0));
            assert!(refused(&index(1000, [0, 999, u, u]), offset, 1, X_LOCK, 0));
            assert!(refused(&index(STALE_FRAMES, [0, u, u, u]), offset, 1, X_LOCK, 0));
        }
    }

    #[test]
    fn a_reader_is_let_through_when_every_mark_is_stale_unused_or_ahead() {
        let u = NOT_USED;
        assert!(!refused(&index(1000, [1000 - STALE_FRAMES - 1, u, u, u]), 4, 1, X_LOCK, 0));
        assert!(!refused(&index(1000, [u, u, u, u]), 4, 1, X_LOCK, 0));
        // Marks past the WAL's end belong to a WAL that was restarted since.
        assert!(!refused(&index(10, [20, 11, u, u]), 4, 1, X_LOCK, 0));
        // Mark 0 is not one of the four: its value means nothing.
        let mut region = index(1000, [u, u, u, u]);
        region[READ_MARKS / 4] = 1000;
        assert!(!refused(&region, 4, 1, X_LOCK, 0));
    }

    #[test]
    fn other_requests_and_other_holders_are_never_refused() {
        let recent = index(1000, [1000, 1000, 1000, 1000]);
        for offset in [0, 1, 2, 3] {
            assert!(!refused(&recent, offset, 1, X_LOCK, 0), "lock {offset}");
        }
        assert!(!refused(&recent, 4, 4, X_LOCK, 0), "all four marks at once (a restart)");
        for flags in [
            SQLITE_SHM_LOCK | SQLITE_SHM_SHARED,
            SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE,
            SQLITE_SHM_UNLOCK | SQLITE_SHM_SHARED,
        ] {
            assert!(!refused(&recent, 4, 1, flags, 0), "flags {flags}");
        }
        for holding in [0b1, 0b10, 0b100, 0b1000_0000] {
            assert!(!refused(&recent, 4, 1, X_LOCK, holding), "holding {holding:#b}");
        }
        assert!(!unsafe { refuse(4, 1, X_LOCK, 0, std::ptr::null()) }, "no index mapped");
    }
}
