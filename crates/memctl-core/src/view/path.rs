//! Where a view starts: finding branches by id or node_uid (never one `gc` collected), the path from a branch to its root,
//! and THE rule of SPEC §2 that turns a path into per-branch cutoffs. The path is loaded into
//! `temp.view_path`, that every view query joins (sql.rs): a connection-private table on
//! SQLite, a parameter of the statements read as a table on PostgreSQL.

use crate::db::{params, Backend, Params, Row, Value};
use crate::error::{Error, Result, Topic};
use crate::rows::{Branch, BranchPath, BranchStatus, PathBranch};
use crate::store::Store;
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;
use std::sync::LazyLock;

/// The rule: a branch sees all of its own rows, and from each ancestor the rows up to the fork
/// of the path's branch just below it. `path` is nearest first; the cutoffs come in its order.
fn cutoffs(path: &[PathBranch]) -> Vec<i64> {
    let below = path.iter().map(|b| b.fork_seq);
    std::iter::once(i64::MAX).chain(below).take(path.len()).collect()
}

/// Where two paths (each nearest first) meet: the positions of their deepest common branch on
/// each, or None for different roots.
pub(crate) fn meeting(a: &BranchPath, b: &BranchPath) -> Option<(usize, usize)> {
    a.branches().iter().enumerate().find_map(|(i, br)| b.position(br.bid).map(|j| (i, j)))
}

/// The seq up to which two views hold the same rows: every row with a seq at or below it is in
/// both views or in neither, and every row above it in one view is not in the other. It is
/// where the paths part: the lower of the two cutoffs of their common branch (0 for different
/// roots). Follows from the rule, as a branch's rows all come after its fork.
pub(crate) fn shared_until(a: &BranchPath, b: &BranchPath) -> i64 {
    meeting(a, b).map_or(0, |(i, j)| a.cutoff(i).min(b.cutoff(j)))
}

/// Which branch of `path` holds seq `seq` in the view: the one whose visible rows, those after
/// its fork up to its cutoff, span it. The spans of a path's branches do not overlap, and
/// nearest first they descend (a branch forks after its parent): the holder is the first
/// branch forked before `seq`, found by bisection, as a search checks each match and a scan
/// each row ([`holds`]). Its cutoff, the fork of the branch before it, is at or above `seq` by
/// that choice.
pub(crate) fn holder(path: &BranchPath, seq: i64) -> Option<i64> {
    path.branches().get(holder_position(path, seq)).map(|b| b.bid)
}

/// The position on `path` of [`holder`]`(seq)`; the path's length when no branch holds it.
fn holder_position(path: &BranchPath, seq: i64) -> usize {
    path.branches().partition_point(|b| b.fork_seq >= seq)
}

/// How many of the path's nearest branches hold every row of the view with a seq at or above
/// `seq`: those down to the [`holder`] of `seq`, as a greater seq is held by the same branch or
/// a nearer one (all of them when no branch holds `seq`). With [`load_nearest`], what a read
/// of such rows needs: a newer version of a record comes after its first, an exclusion after
/// the event it hides.
pub(crate) fn nearest_holding(path: &BranchPath, seq: i64) -> usize {
    (holder_position(path, seq) + 1).min(path.branches().len())
}

/// Whether the view holds the row that branch `bid` wrote with seq `seq` (see [`holder`]).
pub(super) fn holds(path: &BranchPath, seq: i64, bid: i64) -> bool {
    held_at(path, seq, bid).is_some()
}

/// The path position of the branch that wrote the row (`seq`, `bid`), if the view holds that
/// row ([`holds`]).
pub(super) fn held_at(path: &BranchPath, seq: i64, bid: i64) -> Option<usize> {
    let position = holder_position(path, seq);
    path.branches().get(position).is_some_and(|b| b.bid == bid).then_some(position)
}

/// Whether the path holds at least half of the branches ever created: then its view likely
/// holds most of the database's rows (a deep chain), and reading a whole table, keeping the
/// rows the view [`holds`], costs less than one probe per path branch.
pub(super) fn holds_most_branches(store: &Store, path: &BranchPath) -> Result<bool> {
    most_branches(store, path.branches().len())
}

/// Whether `count` branches are at least half of the branches ever created.
fn most_branches(store: &Store, count: usize) -> Result<bool> {
    let created: Option<i64> =
        store.conn.query_one("SELECT max(bid) FROM branches", params![], |r| r.get(0))?;
    Ok(2 * count as i64 >= created.unwrap_or(0))
}

/// What the view keeps per handle (in the store's memo, cleared on rollback): paths by branch
/// id — parents never change, so a path stays valid while its branch exists — and which path
/// `temp.view_path` holds.
#[derive(Default)]
struct PathState {
    paths: HashMap<String, Rc<BranchPath>>,
    /// Branches a write looked up alone (`branch_for_write`), by id; dropped with the paths.
    branches: HashMap<String, Branch>,
    /// Paths read only down to an anchor (`near_path`), by id; dropped with the paths.
    near_paths: HashMap<String, Rc<BranchPath>>,
    /// Every branch's place, from the last scan for a path ([`Store::read_path_by_scan`]).
    /// Places never change, so it is dropped with the paths; a branch newer than it is read
    /// by another scan.
    scanned: Option<Rc<ScannedBranches>>,
    /// The data version the paths were last checked at (None on PostgreSQL, which keeps none:
    /// checked on every call), and how many times `gc` had collected branches then: a path is
    /// valid only while its branch is not collected.
    checked: Option<(Option<u32>, i64)>,
    /// The branch whose path is loaded, and how many of its branches, nearest first: every
    /// path of a branch (to its root, to an anchor) is a prefix of its path to the root, with
    /// the same cutoffs. None when the table may be missing or stale.
    loaded: Option<(i64, usize)>,
}

/// The path table: one row per path branch, nearest first, with its cutoff. In memory and
/// private to the connection: filling it writes nothing to the database. Created on first use
/// (and again after a rollback that undid its creation).
const PATH_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS view_path (
    pos    INTEGER PRIMARY KEY,
    bid    INTEGER NOT NULL UNIQUE,
    cutoff INTEGER NOT NULL
)";

/// The word that stands for the path's `[bid, cutoff]` pairs, nearest first, as JSON: an
/// argument the PostgreSQL connection binds ([`PATH_FROM_ARGUMENT`]).
const PATH_PAIRS: &str = "view_path_pairs";

/// `temp.view_path` on PostgreSQL: the pairs of [`PATH_PAIRS`] as a table.
static PATH_FROM_ARGUMENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "(SELECT n - 1 AS pos, CAST(e ->> 0 AS BIGINT) AS bid, CAST(e ->> 1 AS BIGINT) AS cutoff
  FROM json_array_elements(CAST({PATH_PAIRS} AS json)) WITH ORDINALITY AS j(e, n))"
    )
});

/// Puts `path` into `temp.view_path` unless it is already there: for a read of every row of
/// the view, which needs the whole path (one stopped at an anchor serves windows, core and
/// summaries only: `Store::near_path`).
pub(crate) fn load(store: &Store, path: &BranchPath) -> Result<()> {
    debug_assert!(path.is_whole(), "a read of every row along a path stopped at an anchor");
    load_nearest(store, path, path.branches().len()).map(|_| ())
}

/// Puts at least the `count` nearest branches of `path` into `temp.view_path`: enough for a
/// read of those branches' rows alone. A view row that can hide or replace one of them has a
/// greater seq — a newer version, or an exclusion, written after the event it hides was
/// visible to its writer — so it was written by the same branch or a nearer one ([`holder`]).
/// On SQLite the table grows by the branches it lacks, so a read of the nearest few at depth
/// 1,000 does not insert a thousand rows; on PostgreSQL the argument is set anew. Returns
/// how many of the nearest branches the table holds: at least `count` (or all of them).
pub(crate) fn load_nearest(store: &Store, path: &BranchPath, count: usize) -> Result<usize> {
    let bid = path.branch().bid;
    let count = count.clamp(1, path.branches().len());
    let loaded = store.memo(|state: &mut PathState| state.loaded.take());
    // A longer path of the branch may be loaded than this one, which stops at an anchor
    // (`Store::near_path`): the table is then filled anew, so that a read of it never meets
    // rows of branches the path does not hold.
    let held = match loaded {
        Some((loaded_bid, held)) if loaded_bid == bid && held <= path.branches().len() => held,
        _ => 0,
    };
    if held >= count {
        store.memo(|state: &mut PathState| state.loaded = loaded);
        return Ok(held);
    }
    let wanted = match store.backend() {
        Backend::Sqlite => {
            if loaded.is_none() {
                store.conn.execute(PATH_TABLE, params![])?;
            }
            // Outside a transaction, in a savepoint of its own, so that the inserts commit once.
            // Within one no savepoint is needed (it would journal every page it changes): a
            // load that fails leaves the path unloaded, and the next one starts by emptying the
            // table.
            if store.conn.is_autocommit() {
                store.conn.execute("SAVEPOINT view_path", params![])?;
                let filled = fill_path_table(store, path, held..count);
                // Released whatever happens: an open savepoint would hold the next statements.
                let undone = match filled {
                    Ok(()) => Ok(0),
                    Err(_) => store.conn.execute("ROLLBACK TO view_path", params![]),
                };
                store.conn.execute("RELEASE view_path", params![])?;
                undone?;
                filled?;
            } else {
                fill_path_table(store, path, held..count)?;
            }
            count
        }
        // A parameter of the statements that read it instead of a table: creating a temporary
        // table writes the catalogue, milliseconds on every new connection. It costs no round
        // trip and leaves nothing in the server's session (a pooler hands the session on).
        Backend::Postgres => {
            if let Some(client) = store.conn.postgres() {
                client.substitute("temp.view_path", &PATH_FROM_ARGUMENT);
                client.set_argument(PATH_PAIRS, path.cutoffs_json(count));
            }
            count
        }
    };
    store.memo(|state: &mut PathState| state.loaded = Some((bid, wanted)));
    Ok(wanted)
}

/// How many branches one statement puts into the path table.
const BRANCHES_PER_INSERT: usize = 64;

/// The insert of [`BRANCHES_PER_INSERT`] path branches: `(pos, bid, cutoff)` for each.
static PATH_INSERT: LazyLock<String> = LazyLock::new(|| {
    let rows = vec!["(?, ?, ?)"; BRANCHES_PER_INSERT].join(", ");
    format!("INSERT INTO temp.view_path(pos, bid, cutoff) VALUES {rows}")
});

/// Puts the branches of `path` at `positions` into `temp.view_path`: [`BRANCHES_PER_INSERT`]
/// at a time by one prepared statement (a statement per branch spent most of its 6,500
/// instructions on the statement rather than on the row), the rest one by one. Taking the rows
/// apart from JSON in SQL cost more still: `value ->> 0` parses each pair again. From position 0
/// the table is emptied first; from further down it holds the branches before them.
fn fill_path_table(store: &Store, path: &BranchPath, positions: Range<usize>) -> Result<()> {
    if positions.start == 0 {
        store.conn.execute("DELETE FROM temp.view_path", params![])?;
    }
    let row =
        |pos: usize| [Value::from(pos), Value::from(path.branches()[pos].bid), Value::from(path.cutoff(pos))];
    let whole = (positions.end - positions.start) / BRANCHES_PER_INSERT * BRANCHES_PER_INSERT;
    let (batched, rest) = (positions.start..positions.start + whole, positions.start + whole..positions.end);
    for first in batched.step_by(BRANCHES_PER_INSERT) {
        let values = (first..first + BRANCHES_PER_INSERT).flat_map(row).collect();
        store.conn.execute(&PATH_INSERT, Params::Positional(values))?;
    }
    for pos in rest {
        store.conn.execute(
            "INSERT INTO temp.view_path(pos, bid, cutoff) VALUES (?1, ?2, ?3)",
            Params::Positional(row(pos).into()),
        )?;
    }
    Ok(())
}

/// A branch row `b` with its parent's id (a LEFT JOIN as `p`), as [`branch_from_row`] reads it.
const BRANCH_COLUMNS: &str =
    "b.bid, b.id, b.node_uid, p.id, b.depth, b.fork_seq, b.created_at, b.meta, b.anchored, \
                              b.status, b.status_note";

/// A branch row `b` as [`path_branch_from_row`] reads it.
const PATH_BRANCH_COLUMNS: &str = "b.bid, b.id, b.fork_seq, b.anchored";

/// How many columns [`path_branch_from_row`] reads: a column after them is the caller's.
const PATH_BRANCH_COLUMN_COUNT: usize = 4;

fn path_branch_from_row(row: &Row<'_>) -> Result<PathBranch> {
    Ok(PathBranch { bid: row.get(0)?, id: row.get(1)?, fork_seq: row.get(2)?, anchored: row.get(3)? })
}

fn branch_from_row(row: &Row<'_>) -> Result<Branch> {
    Ok(Branch {
        bid: row.get(0)?,
        id: row.get(1)?,
        node_uid: row.get(2)?,
        parent: row.get(3)?,
        depth: row.get(4)?,
        fork_seq: row.get(5)?,
        created_at: row.get(6)?,
        meta: match row.value(7)?.as_str()? {
            // Most branches carry no meta: no parse.
            "{}" => serde_json::Value::Object(Default::default()),
            text => serde_json::from_str(text).unwrap_or_default(),
        },
        anchored: row.get(8)?,
        status: BranchStatus::parse(row.value(9)?.as_str()?).unwrap_or(BranchStatus::Alive),
        status_note: row.get(10)?,
    })
}

impl Store {
    /// Finds a branch by id, or else by node_uid. Unknown names, and those of branches `gc`
    /// collected, are a not-found error.
    pub fn branch(&self, name: &str) -> Result<Branch> {
        match self.find_branch(name)? {
            Some(branch) => Ok(branch),
            None if self.collected_bid(name)?.is_some() => Err(Error::not_found(format!(
                "branch '{name}' was collected by gc"
            ))
            .with_hint("its rows are gone and its names stay taken; `memctl log` still lists its journal")),
            None => Err(unknown_branch(name)),
        }
    }

    pub(crate) fn find_branch(&self, name: &str) -> Result<Option<Branch>> {
        // By id, then by node_uid: two small statements, of which most calls prepare only the
        // first, where one UNION of both cost every call the preparation of both.
        for column in ["id", "node_uid"] {
            let sql = format!(
                "SELECT {BRANCH_COLUMNS} FROM branches b LEFT JOIN branches p ON p.bid = b.parent
                 WHERE b.{column} = ?1 AND b.collected_at IS NULL"
            );
            if let Some(branch) = self.conn.query_opt(&sql, [name], branch_from_row)? {
                return Ok(Some(branch));
            }
        }
        Ok(None)
    }

    /// All branches in use (not collected by gc), parents before children (by fork_seq).
    pub fn branches(&self) -> Result<Vec<Branch>> {
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM branches b LEFT JOIN branches p ON p.bid = b.parent
             WHERE b.collected_at IS NULL ORDER BY b.fork_seq"
        );
        self.conn.query(&sql, params![], branch_from_row)
    }

    /// The direct children of a branch, oldest first.
    pub fn children(&self, name: &str) -> Result<Vec<Branch>> {
        let parent = self.branch(name)?;
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM branches b JOIN branches p ON p.bid = b.parent
             WHERE b.parent = ?1 AND b.collected_at IS NULL ORDER BY b.fork_seq"
        );
        self.conn.query(&sql, [parent.bid], branch_from_row)
    }

    /// Every branch under `branch` (children, their children, …), parents before children.
    pub fn descendants(&self, name: &str) -> Result<Vec<Branch>> {
        let top = self.branch(name)?;
        let sql = format!(
            "WITH RECURSIVE down(bid) AS (
                 SELECT bid FROM branches WHERE parent = ?1 AND collected_at IS NULL
                 UNION ALL
                 SELECT b.bid FROM down JOIN branches b ON b.parent = down.bid WHERE b.collected_at IS NULL
             )
             SELECT {BRANCH_COLUMNS} FROM down
             JOIN branches b ON b.bid = down.bid LEFT JOIN branches p ON p.bid = b.parent
             ORDER BY b.fork_seq"
        );
        self.conn.query(&sql, [top.bid], branch_from_row)
    }

    /// The bid of a branch in use or collected, for reading its journal.
    pub(crate) fn journal_bid(&self, name: &str) -> Result<i64> {
        match self.find_branch(name)? {
            Some(branch) => Ok(branch.bid),
            None => self.collected_bid(name)?.ok_or_else(|| unknown_branch(name)),
        }
    }

    /// The bid of the branch `gc` collected that had `name` as id or node_uid: such names stay
    /// taken.
    pub(crate) fn collected_bid(&self, name: &str) -> Result<Option<i64>> {
        self.conn.query_opt(
            "SELECT bid FROM branches WHERE (id = ?1 OR node_uid = ?1) AND collected_at IS NOT NULL",
            [name],
            |r| r.get(0),
        )
    }

    /// The path of a branch (itself first, root last), read once per handle in one query.
    /// Cached by branch id, which never changes (a node_uid may, so it is resolved each time).
    pub fn path(&self, name: &str) -> Result<Rc<BranchPath>> {
        if let Some(path) = self.cached_path(name)? {
            return Ok(path);
        }
        let branch = self.branch(name)?;
        let path = Rc::new(self.read_whole_path(&branch)?);
        self.memo(|state: &mut PathState| state.paths.insert(path.branch().id.clone(), path.clone()));
        Ok(path)
    }

    /// The branches of `path` in full, in its order (nearest first): what a report shows of
    /// each, where a view needs only their places ([`PathBranch`]).
    pub(crate) fn path_branches(&self, path: &BranchPath) -> Result<Vec<Branch>> {
        load(self, path)?;
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM temp.view_path v JOIN branches b ON b.bid = v.bid
             LEFT JOIN branches p ON p.bid = b.parent ORDER BY v.pos"
        );
        self.conn.query(&sql, params![], branch_from_row)
    }

    /// The branch `name` names, for a write that needs only the branch: taken from its cached
    /// path, else looked up alone (at depth 1,000 its path would cost a CLI call two thirds of
    /// its instructions) and kept for the handle's next writes. Only its bid and id are sure to
    /// be current: a kept branch's status, note and meta may have changed since (writes use
    /// neither).
    pub(crate) fn branch_for_write(&self, name: &str) -> Result<Branch> {
        if let Some(path) = self.cached_path(name)? {
            return Ok(path.branch().clone());
        }
        if let Some(branch) = self.memo(|state: &mut PathState| state.branches.get(name).cloned()) {
            return Ok(branch);
        }
        let branch = self.branch(name)?;
        // Kept under its id, as paths are (a node_uid is resolved each time).
        self.memo(|state: &mut PathState| state.branches.insert(branch.id.clone(), branch.clone()));
        Ok(branch)
    }

    /// The path of `name` down to its nearest anchor and at least `at_least` branches (to its
    /// root if it has no anchor there): all that a core read and a window of the `at_least`
    /// nearest branches' rows read (see the view's module comment). A key written above the
    /// anchor is visible through the anchor's rows, but its writer is not on this path (`id_of`
    /// gives "?"; a windowed view looks such writers up). The whole path when it is cached; a
    /// path read to the root is kept as the whole path it is, one that stops at an anchor for
    /// the handle's next reads of as many branches or fewer.
    pub(crate) fn near_path(&self, name: &str, at_least: usize) -> Result<Rc<BranchPath>> {
        if let Some(path) = self.cached_path(name)? {
            return Ok(path);
        }
        let kept = self.memo(|state: &mut PathState| state.near_paths.get(name).cloned());
        if let Some(path) = kept.filter(|path| path.branches().len() >= at_least) {
            return Ok(path);
        }
        let branch = self.branch(name)?;
        let path = Rc::new(self.read_near_path(&branch, at_least)?);
        // Kept under its id, as whole paths are (a node_uid is resolved each time).
        self.memo(|state: &mut PathState| {
            let kept = if path.is_whole() { &mut state.paths } else { &mut state.near_paths };
            kept.insert(path.branch().id.clone(), path.clone())
        });
        Ok(path)
    }

    /// Forgets every path the handle keeps, so that a test reads them again.
    #[cfg(test)]
    pub(crate) fn forget_paths(&self) {
        self.memo(|state: &mut PathState| *state = PathState::default());
    }

    /// The path cached under branch id `name`, if it may still be used.
    fn cached_path(&self, name: &str) -> Result<Option<Rc<BranchPath>>> {
        self.drop_paths_if_collected()?;
        Ok(self.memo(|state: &mut PathState| state.paths.get(name).cloned()))
    }

    /// Forgets the cached paths, branches and scan when another handle's `gc` has collected
    /// branches since they were checked: a write must never go to a collected branch. Costs a
    /// data-version read per call and, after another connection's commit, one read of the
    /// collection count (on PostgreSQL, which has no data version, a read per check but the
    /// first).
    fn drop_paths_if_collected(&self) -> Result<()> {
        let version = self.data_version()?;
        let own = self.own_commit();
        let current = self.memo(|state: &mut PathState| match state.checked {
            Some((v, _)) if version.is_some() && v == version => true,
            // Only this handle's own commit moved the version since the check (its gc forgets
            // the memo itself): still current.
            Some((Some(v), count)) if version.is_some_and(|version| own == Some((v, version))) => {
                state.checked = Some((version, count));
                true
            }
            _ => false,
        });
        if current {
            return Ok(());
        }
        // On PostgreSQL the call's first batch read the count (schema/postgres.rs): taken once,
        // by the handle's first check, it is older than anything the handle has cached since.
        let at_start = self.conn.postgres().and_then(|c| c.take_collections_at_start());
        let collections = match at_start {
            Some(collections) => collections,
            None => self.gc_collections()?,
        };
        self.memo(|state: &mut PathState| {
            if state.checked.is_some_and(|(_, c)| c != collections) {
                state.paths.clear();
                state.branches.clear();
                state.near_paths.clear();
                state.scanned = None;
            }
            state.checked = Some((version, collections));
        });
        Ok(())
    }

    /// [`Store::near_path`]'s path of `branch`, read anew: up the parent links, or where forks
    /// are not anchored (`anchor_every` 0) or no anchor was met as far as they place one, the
    /// whole path as it is read on its own (by a scan on a deep chain).
    pub(crate) fn read_near_path(&self, branch: &Branch, at_least: usize) -> Result<BranchPath> {
        let every = self.config.anchor_every;
        if every > 0 {
            // Forks are anchored at depths divisible by `every`: one lies within `every` levels.
            let path = self.read_path_up(branch, Some(at_least), Some(at_least + every as usize))?;
            if path.is_whole() || path.anchor().is_some() {
                return Ok(path);
            }
        }
        self.read_whole_path(branch)
    }

    fn read_whole_path(&self, branch: &Branch) -> Result<BranchPath> {
        // Bids only grow, so the branch's own is at most the greatest bid, which `most_branches`
        // compares the path against: a path shorter than half of it needs no count.
        let length = branch.depth + 1;
        if 2 * length >= branch.bid && most_branches(self, length as usize)? {
            return self.read_path_by_scan(branch);
        }
        self.read_path_up(branch, None, None)
    }

    /// The path to the root of a branch whose path holds most branches (a deep chain), from one
    /// scan of the branches table, its parent links followed here: the recursive query costs
    /// two seeks and a queue entry per level. The scan is kept for the handle's next such path
    /// (`diff` reads two, mostly the same branches), unless the branch is newer than it.
    fn read_path_by_scan(&self, branch: &Branch) -> Result<BranchPath> {
        let kept = self.memo(|state: &mut PathState| state.scanned.clone());
        let scanned = match kept {
            Some(scanned) if scanned.position(branch.bid).is_some() => scanned,
            _ => {
                let scanned = Rc::new(self.scan_branches()?);
                self.memo(|state: &mut PathState| state.scanned = Some(scanned.clone()));
                scanned
            }
        };
        let mut branches = Vec::with_capacity(branch.depth as usize + 1);
        let mut next = Some(branch.bid);
        while let Some(bid) = next {
            let (b, parent) = scanned
                .position(bid)
                .map(|at| &scanned.rows[at])
                .ok_or_else(|| Error::internal(format!("branch {bid} of {}'s path is missing", branch.id)))?;
            // A parent is older than its child: a loop is a damaged database, not a long path.
            if parent.is_some_and(|parent| parent >= bid) {
                return Err(Error::internal(format!(
                    "branch {bid} of {}'s path has a later parent",
                    branch.id
                )));
            }
            branches.push(b.clone());
            next = *parent;
        }
        Ok(path_of(branch, branches))
    }

    /// Every branch row, collected or not, with its parent's bid.
    fn scan_branches(&self) -> Result<ScannedBranches> {
        // In bid order, the table's own: a branch is then found by bisection, with no map to build.
        let sql = format!("SELECT {PATH_BRANCH_COLUMNS}, b.parent FROM branches b ORDER BY b.bid");
        let rows: Vec<(PathBranch, Option<i64>)> = self.conn.query(&sql, params![], |row| {
            Ok((path_branch_from_row(row)?, row.get(PATH_BRANCH_COLUMN_COUNT)?))
        })?;
        Ok(ScannedBranches { bids: rows.iter().map(|(b, _)| b.bid).collect(), rows })
    }

    /// The path of a branch read up its parent links by a recursive query: to the root, or
    /// (`at_least`) down to its nearest anchor and at least that many branches; at most
    /// `at_most` branches.
    fn read_path_up(
        &self,
        branch: &Branch,
        at_least: Option<usize>,
        at_most: Option<usize>,
    ) -> Result<BranchPath> {
        // `anchored`: whether a branch nearer than `bid` on the path is anchored.
        let sql = format!(
            "WITH RECURSIVE up(bid, step, anchored) AS (
                 SELECT CAST(?1 AS BIGINT), 0, 0
                 UNION ALL
                 SELECT b.parent, up.step + 1, CASE WHEN up.anchored = 1 OR b.anchored = 1 THEN 1 ELSE 0 END
                 FROM up JOIN branches b ON b.bid = up.bid
                 WHERE b.parent IS NOT NULL AND up.step + 1 < CAST(?3 AS BIGINT)
                   AND NOT ((up.anchored = 1 OR b.anchored = 1) AND up.step + 1 >= CAST(?2 AS BIGINT))
             )
             SELECT {PATH_BRANCH_COLUMNS}, up.step FROM up JOIN branches b ON b.bid = up.bid"
        );
        let [at_least, at_most] = [at_least, at_most].map(|n| n.map_or(i64::MAX, |n| n as i64));
        // Sorted here, not by an ORDER BY: SQL sorts the rows (a thousand at depth 1,000) through
        // a temporary b-tree, at a fifth of a deep path's cost; sorting their steps here is cheap.
        let mut steps = self.conn.query(&sql, params![branch.bid, at_least, at_most], |row| {
            Ok((row.get::<i64>(PATH_BRANCH_COLUMN_COUNT)?, path_branch_from_row(row)?))
        })?;
        steps.sort_by_key(|(step, _)| *step);
        Ok(path_of(branch, steps.into_iter().map(|(_, b)| b).collect()))
    }
}

/// Every branch row as one scan read it ([`Store::read_path_by_scan`]), in bid order, each
/// with its parent's bid. A branch's ancestors are older than it, so a scan that holds a branch
/// holds its whole path.
struct ScannedBranches {
    bids: Vec<i64>,
    rows: Vec<(PathBranch, Option<i64>)>,
}

impl ScannedBranches {
    /// Where branch `bid` is in `rows`.
    fn position(&self, bid: i64) -> Option<usize> {
        self.bids.binary_search(&bid).ok()
    }
}

/// The path of `branch` through `branches` (nearest first, `branch` itself first).
fn path_of(branch: &Branch, branches: Vec<PathBranch>) -> BranchPath {
    let cutoffs = cutoffs(&branches);
    BranchPath::new(branch.clone(), branches, &cutoffs)
}

fn unknown_branch(name: &str) -> Error {
    Error::not_found(format!("unknown branch '{name}'")).with_topic(Topic::UnknownBranch)
}

/// A name that belonged to a branch `gc` collected.
pub(crate) fn collected_name(name: &str) -> Error {
    Error::conflict(format!("'{name}' named a branch that gc collected; its names stay taken"))
        .with_hint("pick another id or node_uid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Random trees, anchored every few levels or not: every branch's path read from one
        /// scan of the branches equals the path read up its parent links, and so does the path
        /// a handle reads, whichever of the two it chose. Each new branch's path is read as it
        /// is forked, after a scan the handle kept that does not hold it. The path's branches
        /// read in full are its branches as looked up one by one, in its order.
        #[test]
        fn scanned_paths_are_the_paths_up(parents in prop::collection::vec(0usize..1000, 1..40), every in 0i64..4) {
            let s = Store::scratch_anchoring(every);
            s.create_root("b0").unwrap();
            for (i, pick) in parents.iter().enumerate() {
                let child = s.fork(&format!("b{}", pick % (i + 1)), Some(&format!("b{}", i + 1))).unwrap();
                let branch = s.branch(&child.branch).unwrap();
                prop_assert_eq!(s.read_path_by_scan(&branch).unwrap(), s.read_path_up(&branch, None, None).unwrap());
            }
            for i in (0..=parents.len()).step_by(3) {
                s.write(|tx| tx.set_branch_meta(&format!("b{i}"), &serde_json::json!({ "i": i }))).unwrap();
            }
            for i in 0..=parents.len() {
                let branch = s.branch(&format!("b{i}")).unwrap();
                let up = s.read_path_up(&branch, None, None).unwrap();
                prop_assert_eq!(&s.read_path_by_scan(&branch).unwrap(), &up);
                prop_assert_eq!(&*s.path(&branch.id).unwrap(), &up);
                let one_by_one: Vec<Branch> = up.branches().iter().map(|b| s.branch(&b.id).unwrap()).collect();
                prop_assert_eq!(s.path_branches(&up).unwrap(), one_by_one);
            }
        }
    }

    /// The path table holds each branch's position, bid and cutoff, whether it is filled at
    /// once or grown from a nearer load, across whole batches of inserts and the rest.
    #[test]
    fn path_table_holds_the_path() {
        let s = Store::scratch_anchoring(0);
        s.create_root("n0").unwrap();
        let depth = 2 * BRANCHES_PER_INSERT + 22;
        for i in 1..=depth {
            s.fork(&format!("n{}", i - 1), Some(&format!("n{i}"))).unwrap();
        }
        let path = s.path(&format!("n{depth}")).unwrap();
        let expected: Vec<(i64, i64, i64)> = (0..path.branches().len())
            .map(|pos| (pos as i64, path.branches()[pos].bid, path.cutoff(pos)))
            .collect();
        let table = || {
            s.conn
                .query("SELECT pos, bid, cutoff FROM temp.view_path ORDER BY pos", params![], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .unwrap()
        };
        for nearest in [1, 3, BRANCHES_PER_INSERT + 5] {
            // Another branch's path first: the load starts over.
            load(&s, &s.path("n1").unwrap()).unwrap();
            assert_eq!(load_nearest(&s, &path, nearest).unwrap(), nearest);
            assert_eq!(table(), expected[..nearest]);
            load(&s, &path).unwrap();
            assert_eq!(table(), expected, "grown from the {nearest} nearest");
        }
    }
}
