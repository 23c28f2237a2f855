//! THE view (SPEC §2): the one definition of what a branch sees, used by every reader.
//!
//! A branch B with path B = b0, b1, …, bk (root) sees every row of b0, and from each ancestor bi
//! the rows with `seq <= fork_seq(b(i-1))`. That rule is written once in each form it takes:
//! - path.rs builds the path and its cutoffs (`cutoffs`) and loads them into `temp.view_path`;
//! - sql.rs turns them into the one SQL predicate (`visible_through`) that every query here
//!   and every "is there a visible row that …" sub-query is built from, but for the derived
//!   forms below.
//!
//! On top of it, per layer:
//! - core: per key the visible row with the greatest seq, among rows whose TTL has not run out;
//!   a tombstone (NULL value) hides the key;
//! - recall: visible events not hidden by a visible exclusion; visible summaries not folded into
//!   a newer visible summary;
//! - archival: per record the visible version with the greatest seq; a tombstone hides it.
//!
//! Anchors: core and summaries are resolved over all their visible rows, which would mean one
//! probe per ancestor. So every `anchor_every` levels a fork records which rows of its parent's
//! view can still count (`anchor_rows`, by seq; they are immutable, as the parent's later rows
//! are not in the child's view), and readers take the path down to the nearest anchored branch
//! plus its anchor rows. The rows read are the same, minus ones that can never win. Within a
//! branch, each summary row records the summaries its view kept once it was written, which
//! stand for every older row in the same way ([`summaries`]). A read of windows, core and
//! summaries alone reads the path only down to the nearest anchor and its [`WINDOW_BRANCHES`]
//! nearest branches ([`Store::window_path`]), and looks up the writers of anchor rows from
//! above it ([`name_writers_beyond`]); a read of every row needs the whole path.
//!
//! Derived implementations — faster forms of the same rule, each checked against the in-memory
//! model of tests/engine/model.rs (and the viewer's against `memctl read`, `diff` and `why`):
//! - `path::holds` (and `held_at`, which also gives the writer's position) decides visibility of
//!   a row from its seq and branch. fts_match.rs keeps FTS5's matches with it; and on SQLite a
//!   read of every event or record (and the keyword searches' counts of every record and
//!   event, the later versions that supersede records, `path`'s rows of every layer, the
//!   conversation's steps from their index, then the exclusions of those steps by event id), on
//!   a path that holds most branches (a deep chain), scans the whole tables and keeps the view's
//!   rows with it, where one probe per path branch and table (3,000 at depth 1,000: events,
//!   exclusions, records) costs more than reading past the other branches' rows — giving up for
//!   the probes once it has read past two rows per path branch ([`scanned`]; checked against
//!   the probes by a unit test too); the events, scanned in rowid order, are then read on by
//!   probes past the last row of the view the scan met, the steps read again by probes;
//! - [`event_count`], [`event_counts`] and [`events_written_along`] count a view's events (and
//!   its conversation steps) from running counts kept at write time;
//! - a core read of many versions of few keys (a key set at every step of a long branch) gives
//!   up its scan of every version for one row per branch and key, found through the
//!   `(branch, key, seq)` index ([`core_by_key`]; checked against the scan by a unit test too);
//! - [`summaries`] stops at the first visible row that records the summaries its writer's
//!   view kept, which stand for every older row (checked against the rows read one by one by
//!   a unit test too);
//! - the HTML viewer's JavaScript (export/viewer.html) recomputes views, diffs and per-key histories from embedded rows.
//!
//! history.rs places single rows (one core key, record or event) against a path for `why`
//! with the predicate itself, written in Rust over the path's cutoffs (the model test checks
//! where it places every write of a key or record).
//!
//! Nothing else in the crate decides visibility; this module imports nothing above the store.

mod fts_match;
pub(crate) mod history;
mod path;
mod shared;
mod sql;

pub(crate) use path::{collected_name, meeting, shared_until};

use shared::Shared;

use crate::db::{named, params, Backend, Params, Row, ValueRef};
use crate::error::{Error, Result};
use crate::query::{Match, Query};
use crate::rows::{is_step, Branch, BranchPath, CoreEntry, Event, Record, Summary};
use crate::schema::{event_rid, later_version, tags, version_of, STEP_EVENT};
use crate::store::Store;
use serde::Serialize;
use smallvec::{smallvec, SmallVec};
use sql::{
    anchored, current_version, events_past, has_tags, live_core, newest_core_per_key, not_excluded,
    not_excluded_by_set, visible, visible_per_branch, visible_through, EVENTS_NEWEST_FIRST, NEWEST_FIRST,
    NOT_DELETED,
};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

/// Everything a branch sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    pub branch: Branch,
    /// Visible core entries, oldest write first.
    pub core: Vec<CoreEntry>,
    /// Visible summaries, oldest first.
    pub summaries: Vec<Summary>,
    /// Visible events, newest first.
    pub events: Vec<Event>,
    /// Visible archival records (current versions), newest first.
    pub archival: Vec<Record>,
}

impl Store {
    /// The whole view of a branch.
    pub fn view(&self, name: &str) -> Result<View> {
        self.view_window(name, None, None)
    }

    /// The view with at most `events` newest events and `records` newest archival records
    /// (None: all), read from one snapshot of the database.
    pub fn view_window(
        &self,
        name: &str,
        events_limit: Option<usize>,
        records: Option<usize>,
    ) -> Result<View> {
        self.read(|| {
            // Windows of events and records are read over the nearest branches first, and core
            // and summaries down to the nearest anchor: only the path's nearest branches are
            // read, unless a window is short of rows there (`windowed`).
            let path = self.window_path(name, events_limit.and(records))?;
            Ok(View {
                branch: path.branch().clone(),
                core: named_core(self, &path)?,
                summaries: named_summaries(self, &path)?,
                events: events(self, &path, events_limit)?,
                archival: archival(self, &path, &[], records)?,
            })
        })
    }

    /// The path a read of windows of at most `limit` rows needs (see [`windowed`]): down to
    /// the nearest anchor and at least [`WINDOW_BRANCHES`] branches ([`Store::near_path`]); the
    /// whole path for a read of every row (None).
    pub(crate) fn window_path(&self, name: &str, limit: Option<usize>) -> Result<Rc<BranchPath>> {
        match limit {
            Some(_) => self.near_path(name, WINDOW_BRANCHES),
            None => self.path(name),
        }
    }
}

/// Names the writers of rows of `table` (each its seq and its writer's id) that `path` does not
/// hold: rows an anchor keeps from above a path read only down to it ([`Store::near_path`]),
/// which `id_of` gives as "?". Core writes, which show no writer, go without.
fn name_writers_beyond<'r>(
    store: &Store,
    path: &BranchPath,
    table: &str,
    rows: impl Iterator<Item = (i64, &'r mut Arc<str>)>,
) -> Result<()> {
    let on_path: HashSet<&str> = path.branches().iter().map(|b| &*b.id).collect();
    let beyond: Vec<(i64, &mut Arc<str>)> = rows.filter(|(_, id)| !on_path.contains(&***id)).collect();
    if beyond.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT t.seq, b.id FROM {} j JOIN {table} t ON t.seq = j.value JOIN branches b ON b.bid = t.branch",
        store.backend().json_ints("?1")
    );
    let seqs: Vec<i64> = beyond.iter().map(|(seq, _)| *seq).collect();
    let writers: HashMap<i64, Arc<str>> = store
        .conn
        .query(&sql, params![serde_json::to_string(&seqs)?], |r| Ok((r.get(0)?, r.get(1)?)))?
        .into_iter()
        .collect();
    for (seq, id) in beyond {
        if let Some(writer) = writers.get(&seq) {
            id.clone_from(writer);
        }
    }
    Ok(())
}

/// The `?1` of [`has_tags`].
fn tags_filter(tags: &[String]) -> Result<Option<String>> {
    Ok(if tags.is_empty() { None } else { Some(tags::to_json(tags)?) })
}

/// The tags of column `index`, stored as a JSON array, read without copying the column.
fn tags_at(row: &Row<'_>, index: usize) -> Result<Vec<String>> {
    Ok(tags::parse(row.value(index)?.as_str()?))
}

/// Loads the branches an anchored read ([`anchored`]) of `path` reads — down to its nearest
/// anchor, or all of them — and returns the read's `:last` (the anchor's position) and
/// `:anchor` (its bid).
fn load_to_anchor(store: &Store, path: &BranchPath) -> Result<(i64, Option<i64>)> {
    let (count, params) = match path.anchor() {
        Some((position, bid)) => (position + 1, (position as i64, Some(bid))),
        None => (path.branches().len(), (i64::MAX, None)),
    };
    path::load_nearest(store, path, count)?;
    Ok(params)
}

/// How many of a path's nearest branches a window of its newest rows is first read over.
const WINDOW_BRANCHES: usize = 32;

/// At most `limit` of the view's rows, nearest branch first, from `read(path, from, limit)`: at
/// most `limit` rows of the path branches at positions `from` and beyond that `temp.view_path`
/// holds, in that order, their writers named by `path`. They are read first over the table as
/// it is, holding at least the [`WINDOW_BRANCHES`] nearest branches, whose visible rows are all
/// newer than the farther branches' (`path::holder`) and can be hidden or replaced only by rows
/// of their own (`path::load_nearest`); only if those hold fewer than `limit`, and the reader
/// has not had `enough()`, is the whole path loaded (read first if `path` stops at an anchor:
/// [`Store::window_path`]), and the rest read from the branches after them.
fn windowed<T>(
    store: &Store,
    path: &BranchPath,
    limit: usize,
    read: impl Fn(&BranchPath, usize, usize) -> Result<Vec<T>>,
    enough: impl Fn() -> bool,
) -> Result<Vec<T>> {
    if limit == 0 || enough() {
        return Ok(Vec::new());
    }
    let held = path::load_nearest(store, path, WINDOW_BRANCHES)?;
    let mut rows = read(path, 0, limit)?;
    if rows.len() < limit && !enough() && (held < path.branches().len() || !path.is_whole()) {
        // A path read only down to an anchor ([`Store::near_path`]) is read on to the root.
        let whole;
        let path = if path.is_whole() {
            path
        } else {
            whole = store.path(&path.branch().id)?;
            &*whole
        };
        path::load(store, path)?;
        rows.extend(read(path, held, limit - rows.len())?);
    }
    Ok(rows)
}

const CORE_COLUMNS: &str = "t.key, t.value, t.branch, t.seq, t.importance, t.ttl_s, t.created_at";

/// Visible core entries (tombstones and expired rows resolved), oldest write first.
pub(crate) fn core(store: &Store, path: &BranchPath) -> Result<Vec<CoreEntry>> {
    let (last, anchor) = load_to_anchor(store, path)?;
    let now = store.clock.now();
    let params = || named![":now" => now, ":last" => last, ":anchor" => anchor];
    let rows = match core_by_scan(store, path, params(), true)? {
        Some(rows) => rows,
        None => core_by_key(store, path, params())?,
    };
    Ok(newest_live(rows))
}

/// A core read's scan of every row that can be visible gives up once it has read more than
/// this many rows…
const CORE_SCAN_MIN_ROWS: usize = 32;

/// …and more than this many per (branch, key) pair among them: rows superseded on their own
/// branch, which [`core_by_key`] skips at about two and a half rows' cost per pair.
const CORE_ROWS_PER_PAIR: usize = 3;

/// Per key, the newest of the live core rows of the path down to its nearest anchor and the
/// anchor's rows (see [`load_to_anchor`]); None if `may_give_up` and they are many versions of
/// few keys ([`CORE_SCAN_MIN_ROWS`]). Each of a key's versions costs a row read here, which is
/// cheapest while most are current; a row older than its key's newest so far is passed over
/// after reading its key and seq, unbuilt (in a tree, most rows read are older values of a key
/// that a nearer branch set again).
fn core_by_scan(
    store: &Store,
    path: &BranchPath,
    params: Params<'_>,
    may_give_up: bool,
) -> Result<Option<Vec<(CoreEntry, bool)>>> {
    let sql = format!(
        "SELECT r.* FROM ({}) r WHERE {}",
        anchored(store.backend(), "core", CORE_COLUMNS),
        live_core("")
    );
    let mut rows: Vec<(CoreEntry, bool)> = Vec::new();
    // Each key's place in `rows`, and the (branch, place) of every row read.
    let mut places: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut read: Vec<(i64, usize)> = Vec::new();
    let (mut check_at, mut given_up) = (CORE_SCAN_MIN_ROWS + 1, false);
    store.conn.each(&sql, params, |row| {
        let key = row.text_bytes(0)?;
        let place = match places.get(key) {
            Some(&place) => {
                if row.get::<i64>(3)? > rows[place].0.seq {
                    rows[place] = core_entry(path, row)?;
                }
                place
            }
            None => {
                places.insert(key.to_vec(), rows.len());
                rows.push(core_entry(path, row)?);
                rows.len() - 1
            }
        };
        read.push((row.get(2)?, place));
        // Counted at doubling row counts: nothing for the few rows of most reads.
        if may_give_up && read.len() == check_at {
            let mut pairs = read.clone();
            pairs.sort_unstable();
            pairs.dedup();
            given_up = read.len() > CORE_ROWS_PER_PAIR * pairs.len();
            check_at *= 2;
        }
        Ok(if given_up { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    Ok((!given_up).then_some(rows))
}

/// What [`core_by_scan`] reads that can be a key's newest live row: per branch and key one
/// row, read through the `(branch, key, seq)` index ([`newest_core_per_key`]) whatever the
/// number of versions under it.
fn core_by_key(store: &Store, path: &BranchPath, params: Params<'_>) -> Result<Vec<(CoreEntry, bool)>> {
    let sql = format!("SELECT r.* FROM ({}) r WHERE {}", newest_core_per_key(CORE_COLUMNS), live_core(""));
    store.conn.query(&sql, params, |row| core_entry(path, row))
}

/// A core row, and whether it is a tombstone.
fn core_entry(path: &BranchPath, row: &Row<'_>) -> Result<(CoreEntry, bool)> {
    let value: Option<String> = row.get(1)?;
    let tombstone = value.is_none();
    let entry = CoreEntry {
        key: row.get(0)?,
        value: value.unwrap_or_default(),
        branch: path.id_of(row.get(2)?),
        seq: row.get(3)?,
        importance: row.get(4)?,
        ttl: row.get(5)?,
        ts: row.get(6)?,
    };
    Ok((entry, tombstone))
}

/// Per key its newest live row, unless a tombstone; oldest write first. Here rather than by
/// GROUP BY and ORDER BY, through which SQLite sorted the few rows in two temporary b-trees (a
/// ninth of a core read), and the same for both backends.
fn newest_live(mut rows: Vec<(CoreEntry, bool)>) -> Vec<CoreEntry> {
    rows.sort_unstable_by(|(a, _), (b, _)| a.key.cmp(&b.key).then(b.seq.cmp(&a.seq)));
    rows.dedup_by(|(older, _), (newest, _)| older.key == newest.key);
    let mut entries: Vec<CoreEntry> =
        rows.into_iter().filter(|(_, tombstone)| !tombstone).map(|(entry, _)| entry).collect();
    entries.sort_unstable_by_key(|entry| entry.seq);
    entries
}

/// The anchor rows a branch forked from `path`'s branch now keeps (see [`anchored`]): per core
/// key, its rows newest first down to the first without a TTL — nothing under that one can
/// ever show, and a tombstone there is dropped, since it only hides what is under it — and the
/// visible summaries. Expired rows are kept: the clock may be set back (`MEMCTL_NOW`).
/// Branches deeper down read at most `anchor_every` levels plus these rows, whatever their
/// depth; the anchor copies no data, only names rows by seq.
pub(crate) fn anchor_rows(store: &Store, path: &BranchPath) -> Result<Vec<i64>> {
    let (last, anchor) = load_to_anchor(store, path)?;
    let sql = format!(
        "SELECT key, seq, value IS NULL, ttl_s IS NULL FROM ({}) r ORDER BY key, seq DESC",
        anchored(store.backend(), "core", CORE_COLUMNS)
    );
    let mut seqs = Vec::new();
    let mut settled: Option<String> = None;
    store.conn.query(&sql, named![":last" => last, ":anchor" => anchor], |row| {
        let key: String = row.get(0)?;
        if settled.as_ref() == Some(&key) {
            return Ok(());
        }
        let (seq, tombstone, lasting): (i64, bool, bool) = (row.get(1)?, row.get(2)?, row.get(3)?);
        if lasting {
            settled = Some(key);
        }
        if !(lasting && tombstone) {
            seqs.push(seq);
        }
        Ok(())
    })?;
    seqs.extend(summaries(store, path)?.iter().map(|s| s.id));
    Ok(seqs)
}

/// Visible events, newest first, at most `limit`.
pub(crate) fn events(store: &Store, path: &BranchPath, limit: Option<usize>) -> Result<Vec<Event>> {
    match limit {
        None => Ok(newest_first(every_event(store, path, building(&mut Shared::default()))?)),
        Some(limit) => events_by_probes(store, path, limit),
    }
}

/// `events` newest first ([`every_event`] reads them in no set order).
fn newest_first(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_unstable_by_key(|e| Reverse(e.id));
    events
}

/// What a read of every visible row of a layer does with each ([`every_event`],
/// [`every_current_version`]): given the row, the column the layer's own columns start at (an
/// event's [`event_fields`]; a version's after its seq and branch, see [`Versions`]), its seq
/// and its writer's id, it maps the row to what the read returns, or leaves it out (None).
trait RowMapper<T>: FnMut(&Row<'_>, usize, i64, &Arc<str>) -> Result<Option<T>> {}

impl<T, F: FnMut(&Row<'_>, usize, i64, &Arc<str>) -> Result<Option<T>>> RowMapper<T> for F {}

/// The [`RowMapper`] that builds every event.
fn building(shared: &mut Shared) -> impl RowMapper<Event> + '_ {
    |row, first, seq, branch| event_of(row, first, seq, Arc::clone(branch), shared).map(Some)
}

/// Every visible event, as `map` maps it, in no set order. A view of few events on a short
/// path takes them newest first and stops when it has them all: what consolidation hid, the
/// oldest events, however many, is never read; events hidden among newer ones (an evict by
/// kind, say) cost a probe each. (On a long path, the probe per branch costs more than the
/// scans.)
fn every_event<T>(store: &Store, path: &BranchPath, mut map: impl RowMapper<T>) -> Result<Vec<T>> {
    debug_assert!(path.is_whole(), "a read of every event along a path stopped at an anchor");
    if path.branches().len() <= WINDOW_BRANCHES {
        let count = event_count(store, path.branch().bid)?;
        if count <= FEW_EVENTS {
            // The path is no longer than a window's ([`windowed`]): one read takes every branch.
            path::load(store, path)?;
            let sql = newest_events(store.backend());
            return mapped_rows(store, path, &sql, params![0i64, count as i64], &mut map);
        }
    }
    scanned_or_probed(
        store,
        path,
        &mut map,
        |map| store.read(|| events_by_scans(store, path, map)),
        |map| events_past_rid(store, path, &EVENT_ROWS, -1, map),
    )
}

/// The most events a read of all of a short path's events takes as a window of that many
/// ([`every_event`]): each costs a probe for what hides it, where a read of every event reads
/// every exclusion once.
const FEW_EVENTS: usize = 256;

/// The newest visible events of the path branches from position `?1` on, at most `?2`.
fn newest_events(backend: Backend) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM {} WHERE p.pos >= ?1 {EVENTS_NEWEST_FIRST} LIMIT ?2",
        visible_per_branch(backend, "events", "", None, &not_excluded(), Some("?2"))
    )
}

/// [`events`] by one range probe per path branch, nearest first, stopping at `limit`.
fn events_by_probes(store: &Store, path: &BranchPath, limit: usize) -> Result<Vec<Event>> {
    Ok(newest_by_probes(store, path, limit, |_| true, usize::MAX)?.into_iter().flatten().collect())
}

/// The newest `limit` visible events, newest first, less the conversation's steps, which are
/// read and counted toward `limit` but not built; the read stops once `wanted` events besides
/// the steps are built. What consolidation reads, `limit` and `wanted` the view's counts of
/// events and of events besides the steps: it stops at the oldest of those, however many steps
/// are older, and never reaches what earlier consolidations hid. (A read bounded by neither
/// count would read every hidden event; building the steps cost every `recall append` beside a
/// long conversation a build of it.) On PostgreSQL the statement's rows arrive whole: the stop
/// saves only a second read.
pub(crate) fn newest_events_besides_steps(
    store: &Store,
    path: &BranchPath,
    limit: usize,
    wanted: usize,
) -> Result<Vec<Event>> {
    let not_step = |kind: &[u8]| !is_step_kind(kind);
    Ok(newest_by_probes(store, path, limit, not_step, wanted)?.into_iter().flatten().collect())
}

/// The newest `limit` visible events, newest first, by one range probe per path branch,
/// nearest first ([`windowed`]), stopping once `wanted` are built; those whose kind `built`
/// refuses are read and counted, as None, but not built.
fn newest_by_probes(
    store: &Store,
    path: &BranchPath,
    limit: usize,
    built: impl Fn(&[u8]) -> bool,
    wanted: usize,
) -> Result<Vec<Option<Event>>> {
    let sql = newest_events(store.backend());
    let count = Cell::new(0);
    let enough = || count.get() >= wanted;
    let read = |path: &BranchPath, from: usize, limit: usize| {
        let mut shared = Shared::default();
        let mut build = building(&mut shared);
        let mut mapped = |row: &Row<'_>, first, seq, branch: &Arc<str>| match built(row.text_bytes(first)?) {
            true => {
                count.set(count.get() + 1);
                build(row, first, seq, branch).map(Some)
            }
            false => Ok(Some(None)),
        };
        mapped_rows_until(store, path, &sql, params![from as i64, limit as i64], &mut mapped, enough)
    };
    windowed(store, path, limit, read, enough)
}

/// The visible events of `rows` with a rowid above `rid` (-1: every one) that no visible
/// exclusion hides, as `map` maps them, newest first, by one range probe per path branch.
fn events_past_rid<T>(
    store: &Store,
    path: &BranchPath,
    rows: &EventRows,
    rid: i64,
    map: &mut impl RowMapper<T>,
) -> Result<Vec<T>> {
    path::load(store, path)?;
    let sql = rows.past_rid(store.backend());
    mapped_rows(store, path, &sql, params![rid], map)
}

/// A read of every visible row of a layer: what `scan` read, one scan of the whole table
/// ([`scanned`]), where the path holds most branches (a deep chain, whose view likely holds
/// most rows) and the scan did not give up; else what `probes` read, one range probe per path
/// branch. Both are handed `map`, what the read does with each row (a [`RowMapper`], say),
/// which neither could borrow while the other holds it.
fn scanned_or_probed<M, T>(
    store: &Store,
    path: &BranchPath,
    map: &mut M,
    scan: impl FnOnce(&mut M) -> Result<Option<T>>,
    probes: impl FnOnce(&mut M) -> Result<T>,
) -> Result<T> {
    scanned_or_probed_as(path::holds_most_branches(store, path)?, map, scan, probes)
}

/// [`scanned_or_probed`] told whether the path holds most branches, by a caller that makes
/// several reads of one view (on PostgreSQL each asking is a round trip).
fn scanned_or_probed_as<M, T>(
    holds_most: bool,
    map: &mut M,
    scan: impl FnOnce(&mut M) -> Result<Option<T>>,
    probes: impl FnOnce(&mut M) -> Result<T>,
) -> Result<T> {
    if holds_most {
        if let Some(rows) = scan(map)? {
            return Ok(rows);
        }
    }
    probes(map)
}

/// The rows of `sql`, a read of a layer's rows in every branch (a whole table, an index of it,
/// the rows of given events) whose seq and branch are at `place`, that the view holds
/// (`path::held_at`), each mapped by `f`, which may leave one out (None: it still counts as
/// held). It gives up once it has read past more than two rows per path branch: the read then
/// meets many other branches' rows, and the probes, one per path branch, read only the view's.
/// A scan given up costs at most about what the probes cost: the rows read past, about as much
/// as the probes' seeks, and the view's rows read before it gave up, which the probes read
/// again (but for the events: [`events_by_scans`]). On PostgreSQL it never gives up: the
/// client has received every row before the first reaches `f`, so the whole table is read
/// either way — as the path's join to it was, before reads went per branch — and the probes
/// would only add to it.
fn scanned<T>(
    store: &Store,
    path: &BranchPath,
    sql: &str,
    params: Params<'_>,
    place: Place,
    mut f: impl FnMut(&Row<'_>, Held<'_>) -> Result<Option<T>>,
) -> Result<Scan<T>> {
    debug_assert!(path.is_whole(), "a scan of every row along a path stopped at an anchor");
    let bound = match store.backend() {
        Backend::Sqlite => 2 * path.branches().len(),
        Backend::Postgres => usize::MAX,
    };
    let (mut kept, mut passed) = (Vec::new(), 0);
    store.conn.each(sql, params, |row| {
        let (seq, bid) = place.read(row)?;
        if let Some(position) = path::held_at(path, seq, bid) {
            kept.extend(f(row, Held { seq, position, branch: &path.branches()[position].id })?);
        } else {
            passed += 1;
        }
        Ok(if passed > bound { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    Ok(Scan { kept, whole: passed <= bound })
}

/// Where [`scanned`] reads a row's seq and branch.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// In two columns: the seq's, then the branch's (bid).
    Columns(usize, usize),
    /// In an event's rowid, which holds both (`event_rid`): one column read instead of two,
    /// for each of a whole view's events (5% of a view's instructions at depth 1,000).
    EventRid(usize),
}

impl Place {
    /// The row's seq and branch (bid).
    fn read(self, row: &Row<'_>) -> Result<(i64, i64)> {
        match self {
            Place::Columns(seq, bid) => Ok((row.get(seq)?, row.get(bid)?)),
            Place::EventRid(rid) => {
                let (bid, seq) = event_rid::split(row.get(rid)?);
                Ok((seq, bid))
            }
        }
    }
}

/// What [`scanned`] kept, and whether it read the whole table (it had not given up).
struct Scan<T> {
    kept: Vec<T>,
    whole: bool,
}

impl<T> Scan<T> {
    /// The rows, if the scan read the whole table.
    fn whole(self) -> Option<Vec<T>> {
        self.whole.then_some(self.kept)
    }
}

/// A row of the view, as [`scanned`] read it: its seq, and the path position and id of the
/// branch that wrote it.
struct Held<'p> {
    seq: i64,
    position: usize,
    branch: &'p Arc<str>,
}

/// Every visible event, as `map` maps it, in no set order, from one scan of the exclusions and
/// one of the events ([`scanned`]); None if the exclusions' gave up. The events are scanned in
/// rowid order, a branch's after another's: if that scan gives up, it has read every visible
/// event up to the last row of the view it met (hidden or not), and one probe per path branch
/// reads on from there. (A path that holds most branches but few of the table's rows, its
/// siblings' rows after its own, would otherwise read its events twice.) To be run in one
/// snapshot ([`Store::read`]).
fn events_by_scans<T>(
    store: &Store,
    path: &BranchPath,
    map: &mut impl RowMapper<T>,
) -> Result<Option<Vec<T>>> {
    let Some(hidden) = hidden_by(store, path, EVERY_EXCLUSION, params![])? else {
        return Ok(None);
    };
    // The last row met, by its path position and seq.
    let mut last = None;
    let Scan { kept: mut events, whole } =
        scanned(store, path, &EVENT_ROWS.every_one(), params![], Place::EventRid(0), |row, held| {
            last = Some((held.position, held.seq));
            match hidden.contains(&held.seq) {
                true => Ok(None),
                false => map(row, 1, held.seq, held.branch),
            }
        })?;
    if !whole {
        let after = last.map_or(Ok(-1), |(at, seq)| event_rid::of(path.branches()[at].bid, seq))?;
        events.extend(events_past_rid(store, path, &EVENT_ROWS, after, map)?);
    }
    Ok(Some(events))
}

/// The oldest `n` visible events besides the conversation's steps (which `prune`, `compact`
/// and `reset` manage, and whose system and task steps always stay), oldest first. Unless that
/// is all of them ([`event_counts`]), the ids of every event are read first, without building
/// any; then [`FEW_EVENTS`] or fewer are looked up by rowid, and more built by a second read (a
/// lookup costs about what reading four events does).
pub(crate) fn oldest_events_besides_steps(store: &Store, path: &BranchPath, n: usize) -> Result<Vec<Event>> {
    if n >= event_counts(store, path.branch().bid)?.besides_steps() {
        let mut events = events_where(store, path, |kind, _| !is_step_kind(kind))?;
        events.truncate(n);
        return Ok(events);
    }
    let mut ids = every_event(store, path, |row: &Row<'_>, first, seq, _: &Arc<str>| {
        Ok((!is_step_kind(row.text_bytes(first)?)).then_some(seq))
    })?;
    ids.sort_unstable();
    ids.truncate(n);
    match ids.last() {
        Some(&newest) if ids.len() > FEW_EVENTS => {
            events_where(store, path, |kind, seq| seq <= newest && !is_step_kind(kind))
        }
        _ => events_in_order(store, path, &ids),
    }
}

/// Whether a stored kind is a conversation step's.
fn is_step_kind(kind: &[u8]) -> bool {
    std::str::from_utf8(kind).is_ok_and(is_step)
}

/// The visible events of kind `kind`, oldest first.
pub(crate) fn events_of_kind(store: &Store, path: &BranchPath, kind: &str) -> Result<Vec<Event>> {
    events_where(store, path, |of_kind, _| of_kind == kind.as_bytes())
}

/// The visible events that `keep` keeps, given their kind and seq, oldest first, read as
/// [`every_event`] reads them, building only those.
fn events_where(
    store: &Store,
    path: &BranchPath,
    mut keep: impl FnMut(&[u8], i64) -> bool,
) -> Result<Vec<Event>> {
    let mut shared = Shared::default();
    let mut build = building(&mut shared);
    let mut events = every_event(store, path, |row: &Row<'_>, first, seq, branch: &Arc<str>| {
        match keep(row.text_bytes(first)?, seq) {
            true => build(row, first, seq, branch),
            false => Ok(None),
        }
    })?;
    events.sort_unstable_by_key(|e| e.id);
    Ok(events)
}

/// The recall search: the view's events that hold a word of `query` in their text, kind or
/// tags (each tag a text), with their counts, counted from the stored columns as they are read
/// ([`every_event`]), without building events.
pub(crate) fn event_keyword_matches(store: &Store, path: &BranchPath, query: &Query) -> Result<Vec<Match>> {
    every_event(store, path, counting(query))
}

/// The [`RowMapper`] of the recall search: the events that hold a query word, with their
/// counts.
fn counting(query: &Query) -> impl RowMapper<Match> + '_ {
    let (mut counter, mut shared) = (query.term_counter(), Shared::default());
    move |row: &Row<'_>, first, seq, _: &Arc<str>| {
        let tags = shared.tags(row.value(first + 2)?)?;
        let mut haystacks: SmallVec<[&[u8]; 4]> =
            smallvec![row.text_bytes(first + 1)?, row.text_bytes(first)?];
        haystacks.extend(tags.iter().map(|tag| tag.as_bytes()));
        Ok(counter.matches(&haystacks).map(|counts| Match { seq, counts }))
    }
}

/// Events `ids`, in the order given, each found by its rowid: events that a read of the view in
/// the same snapshot found (a search's ranking, the oldest few), so their visibility is not
/// checked again.
pub(crate) fn events_in_order(store: &Store, path: &BranchPath, ids: &[i64]) -> Result<Vec<Event>> {
    let rid = |id| {
        held_rid(path, id).ok_or_else(|| {
            Error::internal(format!("event {id} is not held by the path of '{}'", path.branch().id))
        })
    };
    let rids: Vec<i64> = ids.iter().map(|&id| rid(id)).collect::<Result<_>>()?;
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM {} s JOIN events t ON t.rid = s.value ORDER BY s.key",
        store.backend().json_ints("?1")
    );
    events_of(store, path, &sql, params![serde_json::to_string(&rids)?])
}

/// The rowid event `id` has if the path holds it: in the one path branch that can hold it
/// (path::holder). None for an id no path branch holds, or past what a rowid holds: no event of
/// the view.
fn held_rid(path: &BranchPath, id: i64) -> Option<i64> {
    event_rid::of(path::holder(path, id)?, id).ok()
}

/// An event's own columns, as [`event_of`] reads them.
macro_rules! event_fields {
    () => {
        "t.kind, t.text, t.tags, t.created_at"
    };
}

/// An event's seq and branch, then its own columns.
const EVENT_COLUMNS: &str = concat!("t.seq, t.branch, ", event_fields!());

/// Which events a read of every visible one reads, and which of their own columns it hands its
/// [`RowMapper`]: every event ([`events_by_scans`]) or the steps ([`steps_by_scan`]), with the
/// probes of [`events_past_rid`] for both.
struct EventRows {
    /// The events' own columns, after the rowid of a scan or the seq and branch of the probes.
    fields: &'static str,
    /// The events read: an SQL condition on `t` (`1 = 1`: every one).
    condition: &'static str,
    /// Where a scan reads them: the table, or an index of theirs named (`INDEXED BY`), so that
    /// the planner cannot take the table, which it reads in the same order.
    scanned: &'static str,
}

/// Every event, with [`event_fields`].
const EVENT_ROWS: EventRows = EventRows { fields: event_fields!(), condition: "1 = 1", scanned: "events t" };

/// The conversation's steps ([`steps`]), read from their partial index, whose condition
/// ([`STEP_EVENT`]) the statements hold: a read's cost follows the steps, not the events.
const STEP_ROWS: EventRows = EventRows {
    fields: "t.kind, t.payload",
    condition: STEP_EVENT,
    scanned: "events t INDEXED BY events_steps",
};

impl EventRows {
    /// These events in rowid order, as a scan reads them: the rowid (branch and seq), then
    /// [`EventRows::fields`].
    fn every_one(&self) -> String {
        format!("SELECT t.rid, {} FROM {} WHERE {} ORDER BY t.rid", self.fields, self.scanned, self.condition)
    }

    /// The statement of [`events_past_rid`]: these events above rowid `?1` that no visible
    /// exclusion hides, newest first, read with their seq and branch, then
    /// [`EventRows::fields`].
    fn past_rid(&self, backend: Backend) -> String {
        format!(
            "SELECT t.seq, t.branch, {} FROM {} WHERE {} {EVENTS_NEWEST_FIRST}",
            self.fields,
            events_past(backend, "?1", self.condition),
            not_excluded_by_set()
        )
    }
}

/// The events of the rows of `sql`, read with [`EVENT_COLUMNS`].
fn events_of(store: &Store, path: &BranchPath, sql: &str, params: Params<'_>) -> Result<Vec<Event>> {
    mapped_rows(store, path, sql, params, &mut building(&mut Shared::default()))
}

/// The rows of `sql` as `map` maps them, each read with its seq and branch first, then the
/// layer's own columns ([`EVENT_COLUMNS`], [`RECORD_COLUMNS`], a version's [`Versions`]).
fn mapped_rows<T>(
    store: &Store,
    path: &BranchPath,
    sql: &str,
    params: Params<'_>,
    map: &mut impl RowMapper<T>,
) -> Result<Vec<T>> {
    mapped_rows_until(store, path, sql, params, map, || false)
}

/// [`mapped_rows`], stopping after the first row after which `enough()` holds.
fn mapped_rows_until<T>(
    store: &Store,
    path: &BranchPath,
    sql: &str,
    params: Params<'_>,
    map: &mut impl RowMapper<T>,
    enough: impl Fn() -> bool,
) -> Result<Vec<T>> {
    let mut kept = Vec::new();
    store.conn.each(sql, params, |row| {
        let (seq, bid) = (row.get(0)?, row.get(1)?);
        // Borrowed from the path; a writer off it is "?", as `id_of` gives.
        let beyond;
        let writer = match path.id_on_path(bid) {
            Some(id) => id,
            None => {
                beyond = path.id_of(bid);
                &beyond
            }
        };
        kept.extend(map(row, 2, seq, writer)?);
        Ok(if enough() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    Ok(kept)
}

/// The event of a row whose own columns start at `first`, with its seq and its writer's id.
fn event_of(row: &Row<'_>, first: usize, seq: i64, branch: Arc<str>, shared: &mut Shared) -> Result<Event> {
    Ok(Event {
        id: seq,
        branch,
        kind: shared.kind(row.value(first)?)?,
        text: row.get(first + 1)?,
        tags: shared.tags(row.value(first + 2)?)?,
        ts: row.get(first + 3)?,
    })
}

/// A visible conversation step, as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredStep {
    pub id: i64,
    pub kind: String,
    pub payload: Option<String>,
}

/// The visible conversation steps (events of kind `step:…`), oldest first: on a deep chain by
/// one scan of the steps' index ([`steps_by_scan`]), else by one probe of it per path branch.
pub(crate) fn steps(store: &Store, path: &BranchPath) -> Result<Vec<StoredStep>> {
    let mut steps = scanned_or_probed(
        store,
        path,
        &mut (),
        |_| store.read(|| steps_by_scan(store, path)),
        |_| events_past_rid(store, path, &STEP_ROWS, -1, &mut stored_step),
    )?;
    steps.sort_unstable_by_key(|step| step.id);
    Ok(steps)
}

/// The visible steps, in no set order, from one scan of the steps' index ([`scanned`]) without
/// the path's table; None if it gave up. What hides them is read afterwards: whole, as a read
/// of every event does, only if the table holds fewer exclusions than the steps found; else,
/// or if that read gave up, looked up by the steps' ids, since a consolidated timeline holds
/// an exclusion per event, and its conversation a few steps, or none. The lookup gives up as a
/// scan does: a step that every other branch excluded (each reset its conversation) has an
/// exclusion per branch, which only the branches that wrote them see.
fn steps_by_scan(store: &Store, path: &BranchPath) -> Result<Option<Vec<StoredStep>>> {
    let scan = scanned(store, path, &STEP_ROWS.every_one(), params![], Place::EventRid(0), |row, held| {
        stored_step(row, 1, held.seq, held.branch)
    })?;
    let Some(mut steps) = scan.whole() else {
        return Ok(None);
    };
    if steps.is_empty() {
        return Ok(Some(steps));
    }
    // What hides them is read from every exclusion when the table holds fewer than the steps
    // found (a conversation's own prunes and resets, say), which costs less than looking up
    // each step's. Otherwise (a consolidated timeline holds an exclusion per event), or if that
    // read gave up on other branches' exclusions, each step's are looked up.
    let mut hidden = None;
    if fewer_exclusions_than(store, steps.len())? {
        hidden = hidden_by(store, path, EVERY_EXCLUSION, params![])?;
    }
    if hidden.is_none() {
        let ids = serde_json::to_string(&steps.iter().map(|step| step.id).collect::<Vec<i64>>())?;
        hidden = hidden_by(store, path, &exclusions_of(store.backend()), params![ids])?;
    }
    let Some(hidden) = hidden else {
        return Ok(None);
    };
    steps.retain(|step| !hidden.contains(&step.id));
    Ok(Some(steps))
}

/// Whether the exclusions table holds fewer than `n` rows, read no further than the `n`th.
fn fewer_exclusions_than(store: &Store, n: usize) -> Result<bool> {
    let Some(past) = n.checked_sub(1) else {
        return Ok(false);
    };
    let sql = "SELECT 1 FROM inherited_exclusions LIMIT 1 OFFSET ?1";
    Ok(!store.conn.exists(sql, params![past as i64])?)
}

/// Every exclusion: its seq and branch, then the event's id, as [`hidden_by`] reads them.
const EVERY_EXCLUSION: &str = "SELECT x.seq, x.branch, x.event_id FROM inherited_exclusions x";

/// The events that the view's exclusions among the rows of `exclusions` (an exclusion's seq,
/// branch and event id) hide, from one scan of them ([`scanned`]); None if it gave up.
fn hidden_by(
    store: &Store,
    path: &BranchPath,
    exclusions: &str,
    params: Params<'_>,
) -> Result<Option<HashSet<i64>>> {
    let scan = scanned(store, path, exclusions, params, Place::Columns(0, 1), |row, _| row.get(2).map(Some))?;
    Ok(scan.whole().map(HashSet::from_iter))
}

/// Every exclusion of the events of the JSON array `?1`, in any branch, by the index of their
/// event ids: its seq and branch, then the event's id.
fn exclusions_of(backend: Backend) -> String {
    format!(
        "SELECT x.seq, x.branch, x.event_id
         FROM {} j CROSS JOIN inherited_exclusions x ON x.event_id = j.value",
        backend.json_ints("?1")
    )
}

/// The [`RowMapper`] of [`steps`].
fn stored_step(row: &Row<'_>, first: usize, seq: i64, _: &Arc<str>) -> Result<Option<StoredStep>> {
    Ok(Some(StoredStep { id: seq, kind: row.get(first)?, payload: row.get(first + 1)? }))
}

/// Visible summaries not folded into another visible summary, oldest first.
///
/// Every summary row records the summaries its branch's view kept once it was written
/// (`view_summary_ids`, itself among them): for a view that sees the row, these stand for every
/// row older than it, as anchor rows stand for the path beyond the anchor (the rows it leaves
/// out are folded by rows this view sees too). So the visible rows are read newest first,
/// nearest branch first, only until the first that records them, which is usually the first:
/// a long branch's hundreds of folded summaries (each consolidation folds the one before) are
/// not read. Rows written before memctl recorded them are read as they come, each with the
/// summaries it folds, and after them the anchor's rows. Then the rows kept are read whole.
/// (Checking each row in SQL against every other row's list was quadratic in the rows a path
/// accumulates.)
pub(crate) fn summaries(store: &Store, path: &BranchPath) -> Result<Vec<Summary>> {
    let (last, anchor) = load_to_anchor(store, path)?;
    let sql = format!(
        "SELECT t.seq, t.replaced_summary_ids, t.view_summary_ids FROM {} {NEWEST_FIRST}",
        visible_per_branch(store.backend(), "inherited_summaries", "", None, "p.pos <= :last", None)
    );
    let (mut seqs, mut folded, mut settled) = (Vec::new(), HashSet::new(), false);
    store.conn.each(&sql, named![":last" => last], |row| {
        seqs.push(row.get::<i64>(0)?);
        folded.extend(parse_ids(row.value(1)?.as_str()?));
        if let Some(view_ids) = row.get::<Option<String>>(2)? {
            seqs.extend(parse_ids(&view_ids));
            settled = true;
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    seqs.retain(|seq| !folded.contains(seq));
    seqs.sort_unstable();
    seqs.dedup();
    let anchor = if settled { None } else { anchor };
    if seqs.is_empty() && anchor.is_none() {
        return Ok(Vec::new());
    }
    // (Joins, not `IN` lists: SQLite would fill a temporary b-tree for each.)
    let columns = "t.seq, t.branch, t.kind, t.summary_text, t.summarized_event_ids, t.created_at";
    let sql = format!(
        "SELECT {columns} FROM {} j CROSS JOIN inherited_summaries t ON t.seq = j.value
         UNION ALL
         SELECT {columns} FROM anchor_rows a CROSS JOIN inherited_summaries t ON t.seq = a.seq WHERE a.branch = ?2",
        store.backend().json_ints("?1")
    );
    let mut kept = Vec::new();
    store.conn.each(&sql, params![serde_json::to_string(&seqs)?, anchor], |row| {
        let seq = row.get(0)?;
        // (The anchor's rows may be folded by the rows read.)
        if !folded.contains(&seq) {
            kept.push(Summary {
                id: seq,
                branch: path.id_of(row.get(1)?),
                kind: row.get(2)?,
                text: row.get(3)?,
                event_ids: parse_ids(row.value(4)?.as_str()?),
                ts: row.get(5)?,
            });
        }
        Ok(ControlFlow::Continue(()))
    })?;
    kept.sort_unstable_by_key(|summary| summary.id);
    Ok(kept)
}

/// [`core`], its writers named whatever the path ([`name_writers_beyond`]).
pub(crate) fn named_core(store: &Store, path: &BranchPath) -> Result<Vec<CoreEntry>> {
    let mut core = core(store, path)?;
    if !path.is_whole() {
        name_writers_beyond(store, path, "core", core.iter_mut().map(|e| (e.seq, &mut e.branch)))?;
    }
    Ok(core)
}

/// [`summaries`], their writers named whatever the path ([`name_writers_beyond`]).
pub(crate) fn named_summaries(store: &Store, path: &BranchPath) -> Result<Vec<Summary>> {
    let mut summaries = summaries(store, path)?;
    if !path.is_whole() {
        let writers = summaries.iter_mut().map(|s| (s.id, &mut s.branch));
        name_writers_beyond(store, path, "inherited_summaries", writers)?;
    }
    Ok(summaries)
}

/// Ids from their stored JSON array (a summary's covered and folded ids): the form memctl
/// writes directly, anything else through serde_json.
pub(crate) fn parse_ids(json: &str) -> Vec<i64> {
    plain_ids(json).unwrap_or_else(|| serde_json::from_str(json).unwrap_or_default())
}

/// `[1,2,3]`, as memctl writes ids (seqs: no sign, no spaces, no leading zero), a byte at a
/// time. None for any other form.
fn plain_ids(json: &str) -> Option<Vec<i64>> {
    let inner = json.strip_prefix('[')?.strip_suffix(']')?.as_bytes();
    let mut ids = Vec::with_capacity(inner.len() / 4 + 1);
    if inner.is_empty() {
        return Some(ids);
    }
    let (mut id, mut digits) = (0i64, 0);
    for &byte in inner {
        match byte {
            b'0'..=b'9' if !(digits > 0 && id == 0) => {
                id = id.checked_mul(10)?.checked_add(i64::from(byte - b'0'))?;
                digits += 1;
            }
            b',' if digits > 0 => {
                ids.push(id);
                (id, digits) = (0, 0);
            }
            _ => return None,
        }
    }
    (digits > 0).then(|| {
        ids.push(id);
        ids
    })
}

/// Per path position (0: the branch itself): how many events that branch wrote which the view
/// holds rows of (before exclusions), and the first and last of their ids — from the running
/// ordinals (see [`event_count`]) and the ends of its rowid range: three probes per branch,
/// whatever the number of events.
pub(crate) fn events_written_along(
    store: &Store,
    path: &BranchPath,
) -> Result<Vec<(usize, Option<[i64; 2]>)>> {
    path::load(store, path)?;
    let range = event_rid::range("p.bid", "p.cutoff");
    let sql = format!(
        "SELECT (SELECT t.ordinal FROM events t WHERE t.rid BETWEEN {range} ORDER BY t.rid DESC LIMIT 1),
                (SELECT t.seq FROM events t WHERE t.rid BETWEEN {range} ORDER BY t.rid LIMIT 1),
                (SELECT t.seq FROM events t WHERE t.rid BETWEEN {range} ORDER BY t.rid DESC LIMIT 1)
         FROM temp.view_path p ORDER BY p.pos"
    );
    store.conn.query(&sql, params![], |r| {
        let ends = match (r.get::<Option<i64>>(1)?, r.get::<Option<i64>>(2)?) {
            (Some(first), Some(last)) => Some([first, last]),
            _ => None,
        };
        Ok((r.get::<Option<i64>>(0)?.unwrap_or(0) as usize, ends))
    })
}

/// How many events the view of branch `bid` shows, in constant time — a derived form of the
/// rule (see the module comment): the events it inherited at its fork (`inherited_events`,
/// written by the fork), plus its own events, less its own exclusions (each hides one visible
/// event). The newest row of each table carries the branch's running count (`ordinal`).
pub(crate) fn event_count(store: &Store, bid: i64) -> Result<usize> {
    // Built once: many reads run it.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT {} FROM branches b WHERE b.bid = ?1", visible_count(Counted::Events))
    });
    let count: i64 = store.conn.query_one(&SQL, [bid], |r| r.get(0))?;
    Ok(count.max(0) as usize)
}

/// How many events the view of branch `bid` shows, and how many of them are conversation steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EventCounts {
    pub events: usize,
    pub steps: usize,
}

impl EventCounts {
    /// The events besides the steps: what consolidation summarises.
    pub(crate) fn besides_steps(&self) -> usize {
        self.events.saturating_sub(self.steps)
    }
}

/// [`event_count`], with the view's steps counted the same way from their own running counts
/// (`inherited_steps`, `steps`), in one statement.
pub(crate) fn event_counts(store: &Store, bid: i64) -> Result<EventCounts> {
    // Built once: every append and fork runs it.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {}, {} FROM branches b WHERE b.bid = ?1",
            visible_count(Counted::Events),
            visible_count(Counted::Steps)
        )
    });
    let (events, steps): (i64, i64) = store.conn.query_one(&SQL, [bid], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(EventCounts { events: events.max(0) as usize, steps: steps.max(0) as usize })
}

/// What a running count counts: a branch's rows, or those of them that are (hide) steps.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counted {
    Events,
    Steps,
}

impl Counted {
    /// The column of `branches` that holds what the view inherited at the fork, and the column
    /// of `events` and `inherited_exclusions` that holds the running count.
    fn columns(self) -> (&'static str, &'static str) {
        match self {
            Counted::Events => ("inherited_events", "ordinal"),
            Counted::Steps => ("inherited_steps", "steps"),
        }
    }
}

/// SQL for the view's count of what `counted` counts, for the row `b` of `branches`. (Two
/// counts read the same newest rows in subqueries of their own: reading each row once, in a
/// join, saved 33K instructions a fork and cost 48K a `pressure`, which reads one count.)
fn visible_count(counted: Counted) -> String {
    let inherited = counted.columns().0;
    format!(
        "b.{inherited} + coalesce(({}), 0) - coalesce(({}), 0)",
        last_count("events", counted, "b.bid"),
        last_count("inherited_exclusions", counted, "b.bid")
    )
}

/// SQL for the running count of `counted` on the newest row of branch `bid` in `table` (events
/// or exclusions): how many such rows the branch has written there, which a new row adds to.
pub(crate) fn last_count(table: &str, counted: Counted, bid: &str) -> String {
    let column = counted.columns().1;
    match table {
        "events" => format!(
            "SELECT {column} FROM events WHERE rid BETWEEN {} ORDER BY rid DESC LIMIT 1",
            event_rid::all_of(bid)
        ),
        _ => format!("SELECT {column} FROM {table} WHERE branch = {bid} ORDER BY seq DESC LIMIT 1"),
    }
}

/// The visible rows of `table` with a seq above `after` (`?1`): one probe per path branch whose
/// cutoff lies above it, the nearest few when `after` is where two views part (diff).
fn visible_after(backend: Backend, table: &str) -> String {
    visible_per_branch(backend, table, "", Some("?1"), "p.cutoff > ?1", None)
}

/// Loads the path's branches that hold the view's rows with a seq at or above `seq`: enough
/// for a read of those rows and of what can hide or replace them (path.rs).
fn load_from(store: &Store, path: &BranchPath, seq: i64) -> Result<()> {
    path::load_nearest(store, path, path::nearest_holding(path, seq)).map(|_| ())
}

/// Visible events with a seq above `after`, newest first.
pub(crate) fn events_after(store: &Store, path: &BranchPath, after: i64) -> Result<Vec<Event>> {
    load_from(store, path, after.saturating_add(1))?;
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM {}
         WHERE {} {EVENTS_NEWEST_FIRST}",
        visible_after(store.backend(), "events"),
        not_excluded()
    );
    events_of(store, path, &sql, params![after])
}

/// The events that visible exclusions with a seq above `after` hide.
pub(crate) fn excluded_after(store: &Store, path: &BranchPath, after: i64) -> Result<Vec<i64>> {
    load_from(store, path, after.saturating_add(1))?;
    let sql = format!("SELECT t.event_id FROM {}", visible_after(store.backend(), "inherited_exclusions"));
    store.conn.query(&sql, [after], |r| r.get(0))
}

/// The records with a visible version (or delete) with a seq above `after`.
pub(crate) fn records_after(store: &Store, path: &BranchPath, after: i64) -> Result<Vec<i64>> {
    load_from(store, path, after.saturating_add(1))?;
    let sql = format!("SELECT DISTINCT t.record_id FROM {}", visible_after(store.backend(), "archival"));
    store.conn.query(&sql, [after], |r| r.get(0))
}

/// Those of events `ids` the view shows, newest first. Each id is looked up in the one path
/// branch that can hold it (path::holder), so the cost follows the ids, not the path.
pub(crate) fn events_among(store: &Store, path: &BranchPath, ids: &[i64]) -> Result<Vec<Event>> {
    let held: Vec<(i64, i64)> = ids.iter().filter_map(|&id| Some((id, held_rid(path, id)?))).collect();
    // An exclusion comes after the event it hides: the branches down to the oldest one's holder.
    let Some(oldest) = held.iter().map(|&(id, _)| id).min() else {
        return Ok(Vec::new());
    };
    load_from(store, path, oldest)?;
    let rids: Vec<i64> = held.iter().map(|&(_, rid)| rid).collect();
    let sql = format!(
        "SELECT {EVENT_COLUMNS}
         FROM {} j JOIN temp.view_path p ON p.bid = {}
         JOIN events t ON t.rid = j.value AND {}
         WHERE {} ORDER BY t.seq DESC",
        store.backend().json_ints("?1"),
        event_rid::bid_of("j.value"),
        visible_through("p", "t"),
        not_excluded()
    );
    events_of(store, path, &sql, params![serde_json::to_string(&rids)?])
}

/// The view's rows of `table` (`columns` of `t`, read by the mapping from column 2 on), each
/// with the path position of the branch that wrote it (0: the branch itself), oldest first: the
/// material of per-node deltas. Core rows whose TTL has run out are left out, as the view leaves
/// them out. Read by one scan of the table where the path holds most branches ([`scanned_or_probed`]), else,
/// or if the scan gave up, by one range scan per path branch.
pub(crate) fn rows_along<T>(
    store: &Store,
    path: &BranchPath,
    table: &str,
    columns: &str,
    row: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<(usize, T)>> {
    scanned_or_probed(
        store,
        path,
        &mut (),
        |_| rows_along_by_scan(store, path, table, columns, &row),
        |_| rows_along_by_probes(store, path, table, columns, &row),
    )
}

/// The filter and parameters of a read of `table`'s rows along a path: core's live rows.
fn along_filter(store: &Store, table: &str) -> (String, Params<'static>) {
    if table == "core" {
        (live_core("t"), named![":now" => store.clock.now()])
    } else {
        ("1 = 1".to_string(), params![])
    }
}

/// [`rows_along`] by one scan of the table, in seq order (its rowid), keeping the rows the view
/// holds ([`scanned`]); None if it gave up.
fn rows_along_by_scan<T>(
    store: &Store,
    path: &BranchPath,
    table: &str,
    columns: &str,
    row: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Option<Vec<(usize, T)>>> {
    let (live, params) = along_filter(store, table);
    let sql = format!("SELECT t.seq, t.branch, {columns} FROM {table} t WHERE {live} ORDER BY t.seq");
    Ok(scanned(store, path, &sql, params, Place::Columns(0, 1), |r, held| {
        Ok(Some((held.position, row(r)?)))
    })?
    .whole())
}

/// [`rows_along`] by one range scan per path branch.
fn rows_along_by_probes<T>(
    store: &Store,
    path: &BranchPath,
    table: &str,
    columns: &str,
    row: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<(usize, T)>> {
    path::load(store, path)?;
    let (live, params) = along_filter(store, table);
    let sql =
        format!("SELECT p.pos, t.branch, {columns} FROM {} WHERE {live} ORDER BY t.seq", visible(table));
    store.conn.query(&sql, params, |r| Ok((r.get::<usize>(0)?, row(r)?)))
}

/// A record's own columns, as [`record_of`] reads them.
macro_rules! record_fields {
    () => {
        "t.record_id, t.text, t.tags, t.created_at"
    };
}

/// A version's seq and branch, then the record's own columns.
const RECORD_COLUMNS: &str = concat!("t.seq, t.branch, ", record_fields!());

/// The records of the rows of `sql`, read with [`RECORD_COLUMNS`].
fn records_of(store: &Store, path: &BranchPath, sql: &str, params: Params<'_>) -> Result<Vec<Record>> {
    mapped_rows(store, path, sql, params, &mut building_records(&mut Shared::default()))
}

/// The record of a row whose own columns ([`record_fields`]) start at `first`, with its seq and
/// its writer's id.
fn record_of(row: &Row<'_>, first: usize, seq: i64, branch: Arc<str>, shared: &mut Shared) -> Result<Record> {
    Ok(Record {
        id: row.get(first)?,
        branch,
        text: row.get(first + 1)?,
        tags: shared.tags(row.value(first + 2)?)?,
        ts: row.get(first + 3)?,
        seq,
        score: None,
    })
}

/// Visible archival records carrying all of `tags`, newest version first, at most `limit`.
pub(crate) fn archival(
    store: &Store,
    path: &BranchPath,
    tags: &[String],
    limit: Option<usize>,
) -> Result<Vec<Record>> {
    let tags = tags_filter(tags)?;
    // A window stops at its first `limit` current versions, checked one probe each; a read of
    // every record knows the superseded versions first, from one pass over the view's updates.
    let Some(limit) = limit else {
        let (versions, mut shared) = (Versions::records(tags.as_deref()), Shared::default());
        let mut records = every_current_version(store, path, &versions, building_records(&mut shared))?;
        records.sort_unstable_by_key(|r| Reverse(r.seq));
        return Ok(records);
    };
    let backend = store.backend();
    let current =
        format!("{NOT_DELETED} AND {} AND {}", current_version(), has_tags(backend, tags.as_deref()));
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM {} WHERE p.pos >= ?2 {NEWEST_FIRST} LIMIT ?3",
        visible_per_branch(backend, "archival", "", None, &current, Some("?3"))
    );
    let read = |path: &BranchPath, from: usize, limit: usize| {
        let params = params![tags.as_deref(), from as i64, limit as i64];
        records_of(store, path, &sql, params)
    };
    windowed(store, path, limit, read, || false)
}

/// What a read of every current version reads ([`every_current_version`]): each version's seq
/// and branch, then the reader's own `fields` ([`record_fields`] for records; a reader that
/// builds none reads only what it looks at), of the versions carrying every tag of `tags` (a
/// JSON array, see [`has_tags`]; None: any) and, for the keyword search on PostgreSQL, of those
/// its `words` index matches with `words` (a tsquery).
struct Versions<'a> {
    fields: &'static str,
    tags: Option<&'a str>,
    words: Option<String>,
}

impl<'a> Versions<'a> {
    /// The records carrying every tag of `tags`.
    fn records(tags: Option<&'a str>) -> Versions<'a> {
        Versions { fields: record_fields!(), tags, words: None }
    }

    /// The statement reading these versions by one scan of the table, or by the path's probes
    /// (`probes`), with its parameters: `?1` the tags, `?2` the words.
    fn statement(&self, backend: Backend, probes: bool) -> (String, Params<'_>) {
        let (filter, params) = self.filter(backend);
        let rows = match (probes, &self.words) {
            (false, _) => format!("archival t WHERE {filter}"),
            // The word index yields the path's matches in one lookup (each entry names its
            // branch), where reading each path branch would test every version it holds.
            (true, Some(_)) => format!("{} WHERE {filter}", visible("archival")),
            (true, None) => visible_per_branch(backend, "archival", "", None, &filter, None),
        };
        (format!("SELECT t.seq, t.branch, {} FROM {rows}", self.fields), params)
    }

    /// The condition on version `t`, with its parameters.
    fn filter(&self, backend: Backend) -> (String, Params<'_>) {
        let filter = format!("{NOT_DELETED} AND {}", has_tags(backend, self.tags));
        match &self.words {
            Some(words) => (
                filter + " AND t.words @@ CAST(CAST(?2 AS TEXT) AS tsquery)",
                params![self.tags, words.as_str()],
            ),
            None => (filter, params![self.tags]),
        }
    }
}

/// The view's current versions (not deletes) that `versions` takes, as `map` maps them, in no
/// set order, read in one snapshot: the superseded versions are known first, so that `map`
/// sees only current ones. Every version of the view is read: by one scan of the table where
/// the path holds most branches ([`scanned_or_probed`]), else (or if the scan gave up) by one range probe
/// per path branch. A version the scan mapped before it gave up is mapped again by the probes
/// (the first mapping is dropped): `map` must keep no state across rows, such as a total.
fn every_current_version<T>(
    store: &Store,
    path: &BranchPath,
    versions: &Versions<'_>,
    mut map: impl RowMapper<T>,
) -> Result<Vec<T>> {
    store.read(|| {
        let holds_most = path::holds_most_branches(store, path)?;
        let superseded = superseded_versions(store, path, holds_most)?;
        let mut current = |row: &Row<'_>, first, seq, branch: &Arc<str>| match superseded.is_superseded(seq) {
            true => Ok(None),
            false => map(row, first, seq, branch),
        };
        scanned_or_probed_as(
            holds_most,
            &mut current,
            |map| versions_by_scan(store, path, versions, map),
            |map| versions_by_probes(store, path, versions, map),
        )
    })
}

/// The [`RowMapper`] that builds every version's record.
fn building_records(shared: &mut Shared) -> impl RowMapper<Record> + '_ {
    |row, first, seq, branch| record_of(row, first, seq, Arc::clone(branch), shared).map(Some)
}

/// The characters of the text of each of the view's current versions (what `pressure`
/// measures), as stored beside it (`archival.chars`): the read touches no text, only the index
/// by branch and seq, which holds them.
pub(crate) fn current_text_chars(store: &Store, path: &BranchPath) -> Result<Vec<usize>> {
    let lengths = Versions { fields: "t.chars", tags: None, words: None };
    every_current_version(store, path, &lengths, |row: &Row<'_>, first, _, _: &Arc<str>| {
        let chars: i64 = row.get(first)?;
        usize::try_from(chars)
            .map(Some)
            .map_err(|_| Error::internal(format!("a stored length of {chars} characters")))
    })
}

/// The visible versions (current or not) that `versions` takes, as `map` maps them, from one
/// scan of the table ([`scanned`]); None if it gave up.
fn versions_by_scan<T>(
    store: &Store,
    path: &BranchPath,
    versions: &Versions<'_>,
    map: &mut impl RowMapper<T>,
) -> Result<Option<Vec<T>>> {
    let (sql, params) = versions.statement(store.backend(), false);
    Ok(scanned(store, path, &sql, params, Place::Columns(0, 1), |row, held| {
        map(row, 2, held.seq, held.branch)
    })?
    .whole())
}

/// [`versions_by_scan`] by one range probe per path branch.
fn versions_by_probes<T>(
    store: &Store,
    path: &BranchPath,
    versions: &Versions<'_>,
    map: &mut impl RowMapper<T>,
) -> Result<Vec<T>> {
    path::load(store, path)?;
    let (sql, params) = versions.statement(store.backend(), true);
    mapped_rows(store, path, &sql, params, map)
}

/// The keyword search (`search.fts = "off"`, and PostgreSQL): the view's current versions that
/// carry all `tags` and hold a word of `query`, counted from their stored text and tags (the
/// columns FTS5 indexes) as they are read, without building records, in one snapshot
/// ([`every_current_version`]). On PostgreSQL the `words` index narrows the versions read to
/// those holding a query word (and those whose words it cannot hold).
pub(crate) fn archival_keyword_matches(
    store: &Store,
    path: &BranchPath,
    query: &Query,
    tags: &[String],
) -> Result<Vec<Match>> {
    let tags = tags_filter(tags)?;
    let words = store.uses_word_index().then(|| {
        let bids: Vec<i64> = path.branches().iter().map(|b| b.bid).collect();
        query.tsquery(&bids)
    });
    let versions = Versions { fields: KEYWORD_FIELDS, tags: tags.as_deref(), words };
    every_current_version(store, path, &versions, counting_versions(query))
}

/// What the keyword search reads of a version: its text and tags (the columns FTS5 indexes),
/// and its length in words (what bm25 normalises by).
const KEYWORD_FIELDS: &str = "t.text, t.tags, t.tokens";

/// The [`RowMapper`] of the keyword search (versions read with [`KEYWORD_FIELDS`]): those that
/// hold a query word, with their counts.
fn counting_versions(query: &Query) -> impl RowMapper<Match> + '_ {
    let mut counter = query.term_counter();
    move |row: &Row<'_>, first, seq, _: &Arc<str>| {
        let haystacks = [row.text_bytes(first)?, row.text_bytes(first + 1)?];
        Ok(counter.matches_of(&haystacks, || row.get(first + 2))?.map(|counts| Match { seq, counts }))
    }
}

/// The visible version of one record, or None if it is not in the view (or deleted there).
pub(crate) fn archival_record(store: &Store, path: &BranchPath, id: i64) -> Result<Option<Record>> {
    // The record's id is the seq of its first version, which all its other versions come after.
    load_from(store, path, id)?;
    // The newest visible version is a tombstone when its text is NULL: deleted in this view.
    let mut shared = Shared::default();
    let mut building = building_records(&mut shared);
    let sql = newest_version_of_record();
    let mut newest =
        mapped_rows(store, path, &sql, params![id], &mut |row: &Row<'_>, first, seq, branch: &Arc<str>| {
            match row.value(first + 1)? {
                ValueRef::Null => Ok(None),
                _ => building(row, first, seq, branch),
            }
        })?;
    Ok(newest.pop())
}

/// SQL: the newest visible version of record `?1`, with [`RECORD_COLUMNS`].
fn newest_version_of_record() -> String {
    format!(
        "SELECT {RECORD_COLUMNS} FROM archival t JOIN temp.view_path p ON {}
         WHERE {} ORDER BY t.seq DESC LIMIT 1",
        visible_through("p", "t"),
        version_of("t", "?1")
    )
}

/// The visible versions of those of records `ids` the view holds, newest version first.
pub(crate) fn records_among(store: &Store, path: &BranchPath, ids: &[i64]) -> Result<Vec<Record>> {
    // A record's id is the seq of its first version, which all its other versions come after;
    // an id no path branch holds is a record of another tree.
    let Some(oldest) = ids.iter().copied().filter(|&id| path::holder(path, id).is_some()).min() else {
        return Ok(Vec::new());
    };
    load_from(store, path, oldest)?;
    records_of(store, path, &current_versions_among(store.backend()), params![serde_json::to_string(ids)?])
}

/// SQL: the current visible versions of the records in JSON array `?1`, with
/// [`RECORD_COLUMNS`], newest first.
fn current_versions_among(backend: Backend) -> String {
    format!(
        "SELECT {RECORD_COLUMNS} FROM {} j JOIN archival t ON {}
         JOIN temp.view_path p ON {}
         WHERE {NOT_DELETED} AND {} ORDER BY t.seq DESC",
        backend.json_ints("?1"),
        version_of("t", "j.value"),
        visible_through("p", "t"),
        current_version()
    )
}

/// FTS5: the visible, current versions matching `query` and carrying all `tags`. FTS5 finds
/// the view's matches (fts_match.rs) at a cost that follows them, not the database; versions
/// superseded in the view are dropped here.
pub(crate) fn archival_fts_matches(
    store: &Store,
    path: &Rc<BranchPath>,
    query: &Query,
    tags: &[String],
) -> Result<Vec<Match>> {
    let holds_most = path::holds_most_branches(store, path)?;
    let mut matches = fts_match::view_matches(store, path, query, tags, holds_most)?;
    let superseded = superseded_versions(store, path, holds_most)?;
    matches.retain(|m| !superseded.is_superseded(m.seq));
    if !tags.is_empty() {
        let tagged = seqs_with_tags(store, matches.iter().map(|m| m.seq), tags)?;
        matches.retain(|m| tagged.contains(&m.seq));
    }
    Ok(matches)
}

/// Which versions of the view's records a newer visible version replaces.
struct Superseded {
    /// Record id → the seq of its newest visible version, for records updated or deleted in
    /// the view.
    newest: HashMap<i64, i64>,
    /// Seq → record id of the visible versions that are not a record's first.
    later_versions: HashMap<i64, i64>,
}

impl Superseded {
    fn is_superseded(&self, seq: i64) -> bool {
        let record = self.later_versions.get(&seq).copied().unwrap_or(seq);
        self.newest.get(&record).is_some_and(|&newest| newest > seq)
    }
}

/// The visible updates and deletes, read through their partial index: by one scan of it
/// ([`scanned`]) where the path holds most branches ([`scanned_or_probed`]) — a whole view then needs no
/// path table — else, or if the scan gave up, by one range scan of it per path branch.
fn superseded_versions(store: &Store, path: &BranchPath, holds_most: bool) -> Result<Superseded> {
    let later = scanned_or_probed_as(
        holds_most,
        &mut (),
        |_| later_versions_by_scan(store, path),
        |_| later_versions_by_probes(store, path),
    )?;
    let mut superseded = Superseded { newest: HashMap::new(), later_versions: HashMap::new() };
    for (seq, record) in later {
        superseded.later_versions.insert(seq, record);
        let newest = superseded.newest.entry(record).or_insert(seq);
        *newest = (*newest).max(seq);
    }
    Ok(superseded)
}

/// The seq and record id of each visible version that is not a record's first, from one scan
/// of their partial index ([`scanned`]); None if it gave up.
fn later_versions_by_scan(store: &Store, path: &BranchPath) -> Result<Option<Vec<(i64, i64)>>> {
    let sql = format!(
        "SELECT t.seq, t.branch, t.record_id FROM archival t INDEXED BY archival_later_versions WHERE {}",
        later_version("t")
    );
    Ok(scanned(store, path, &sql, params![], Place::Columns(0, 1), |row, held| {
        Ok(Some((held.seq, row.get(2)?)))
    })?
    .whole())
}

/// [`later_versions_by_scan`] by one range scan of the index per path branch.
fn later_versions_by_probes(store: &Store, path: &BranchPath) -> Result<Vec<(i64, i64)>> {
    path::load(store, path)?;
    let sql = format!(
        "SELECT t.seq, t.record_id FROM {}",
        visible_per_branch(
            store.backend(),
            "archival",
            "INDEXED BY archival_later_versions",
            None,
            &later_version("t"),
            None
        )
    );
    store.conn.query(&sql, params![], |row| Ok((row.get(0)?, row.get(1)?)))
}

/// Those of `seqs` whose version carries every tag of `tags`.
fn seqs_with_tags(store: &Store, seqs: impl Iterator<Item = i64>, tags: &[String]) -> Result<HashSet<i64>> {
    let seqs = serde_json::to_string(&seqs.collect::<Vec<_>>())?;
    let tags = tags_filter(tags)?;
    let sql = format!(
        "SELECT t.seq FROM archival t WHERE t.seq IN (SELECT value FROM {}) AND {}",
        store.backend().json_ints("?2"),
        has_tags(store.backend(), tags.as_deref())
    );
    Ok(store.conn.query(&sql, params![tags, seqs], |r| r.get(0))?.into_iter().collect())
}

/// The versions with these seqs, in the order given.
pub(crate) fn archival_versions(store: &Store, path: &BranchPath, seqs: &[i64]) -> Result<Vec<Record>> {
    let sql = format!(
        "SELECT {RECORD_COLUMNS} FROM {} s JOIN archival t ON t.seq = s.value ORDER BY s.key",
        store.backend().json_ints("?1")
    );
    records_of(store, path, &sql, params![serde_json::to_string(seqs)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::TermCounts;
    use crate::rows::STEP_KIND;
    use proptest::prelude::*;

    /// Appends an event of `kind`: a step row as the conversation layer writes one (the view
    /// reads no payload; `recall_append` refuses step kinds), else a plain event.
    fn append(s: &Store, branch: &str, kind: &str, text: &str, tags: &[String]) -> i64 {
        if !is_step(kind) {
            return s.recall_append(branch, kind, text, tags).unwrap().id;
        }
        let bid = s.branch(branch).unwrap().bid;
        let payload = serde_json::json!({ "text": text }).to_string();
        s.write(|tx| tx.insert_step(bid, kind, text, &payload)).unwrap()
    }

    /// Every visible event, newest first, by one scan of the exclusions and one of the events
    /// (None: the first gave up).
    fn every_event_by_scan(s: &Store, path: &BranchPath) -> Result<Option<Vec<Event>>> {
        let mut shared = Shared::default();
        Ok(s.read(|| events_by_scans(s, path, &mut building(&mut shared)))?.map(newest_first))
    }

    /// Every visible event, newest first, by one range probe per path branch.
    fn every_event_by_probes(s: &Store, path: &BranchPath) -> Result<Vec<Event>> {
        events_past_rid(s, path, &EVENT_ROWS, -1, &mut building(&mut Shared::default()))
    }

    /// The visible versions (current or not), newest first, by one scan of the table; None if
    /// it gave up.
    fn versions_by_scan_built(s: &Store, path: &BranchPath) -> Result<Option<Vec<Record>>> {
        let mut shared = Shared::default();
        let versions =
            versions_by_scan(s, path, &Versions::records(None), &mut building_records(&mut shared))?;
        Ok(versions.map(|mut records| {
            records.sort_unstable_by_key(|r| Reverse(r.seq));
            records
        }))
    }

    /// The visible versions (current or not), newest first, by one range probe per path branch.
    fn versions_by_probes_built(s: &Store, path: &BranchPath) -> Result<Vec<Record>> {
        let mut records = versions_by_probes(
            s,
            path,
            &Versions::records(None),
            &mut building_records(&mut Shared::default()),
        )?;
        records.sort_unstable_by_key(|r| Reverse(r.seq));
        Ok(records)
    }

    /// Forms memctl does not write go to serde_json, which reads them or gives no ids.
    #[test]
    fn ids_in_other_forms() {
        for (json, plain, parsed) in [
            ("[]", Some(vec![]), vec![]),
            ("[0,7,10]", Some(vec![0, 7, 10]), vec![0, 7, 10]),
            ("[1, 2]", None, vec![1, 2]),
            ("[-3]", None, vec![-3]),
            ("[01]", None, vec![]),
            ("[1,]", None, vec![]),
            ("[,1]", None, vec![]),
            ("[99999999999999999999]", None, vec![]),
            ("", None, vec![]),
        ] {
            assert_eq!(plain_ids(json), plain, "{json}");
            assert_eq!(parse_ids(json), parsed, "{json}");
        }
    }

    /// The rows of a read share their writer's id with the path, and their kinds and tag
    /// lists with each other, read by scans or by probes.
    #[test]
    fn rows_share_their_names_and_tags() {
        let s = Store::scratch();
        s.create_root("root").unwrap();
        let write = |branch: &str| {
            for i in 0..3 {
                s.recall_append(branch, "note", &format!("{branch} {i}"), &["t".into()]).unwrap();
                s.archival_add(branch, &format!("{branch} record {i}"), &["t".into()]).unwrap();
            }
        };
        write("root");
        s.fork("root", Some("leaf")).unwrap();
        write("leaf");
        let path = s.path("leaf").unwrap();
        let id = |name: &str| Arc::clone(&path.branches().iter().find(|b| &*b.id == name).unwrap().id);
        let events =
            [every_event_by_scan(&s, &path).unwrap().unwrap(), every_event_by_probes(&s, &path).unwrap()];
        let records = [
            versions_by_scan_built(&s, &path).unwrap().unwrap(),
            versions_by_probes_built(&s, &path).unwrap(),
        ];
        for (events, records) in events.iter().zip(&records) {
            assert_eq!((events.len(), records.len()), (6, 6));
            assert!(events.iter().all(|e| Arc::ptr_eq(&e.branch, &id(&e.branch))));
            assert!(records.iter().all(|r| Arc::ptr_eq(&r.branch, &id(&r.branch))));
            assert!(events.iter().all(|e| Arc::ptr_eq(&e.kind, &events[0].kind)));
            assert!(events.iter().all(|e| Arc::ptr_eq(&e.tags, &events[0].tags)));
            assert!(records.iter().all(|r| Arc::ptr_eq(&r.tags, &records[0].tags)));
        }
    }

    /// Pressure's measure of the current versions' texts, taken without building records, is
    /// that of the records read, and the keyword search counts current versions only: by a scan
    /// (a chain) and by probes (among many siblings), with an update, a delete and text that is
    /// not ASCII.
    #[test]
    fn current_texts_are_measured_as_built() {
        let s = Store::scratch();
        s.create_root("root").unwrap();
        s.archival_add("root", "café crème", &[]).unwrap();
        let updated = s.archival_add("root", "naïve plan", &[]).unwrap().id;
        let deleted = s.archival_add("root", "gone", &[]).unwrap().id;
        s.fork("root", Some("leaf")).unwrap();
        let update = s.archival_update("leaf", updated, Some("été — résumé"), None).unwrap().seq;
        s.archival_delete("leaf", deleted).unwrap();
        s.archival_add("leaf", "plain", &[]).unwrap();
        let measured = || {
            let path = s.path("leaf").unwrap();
            let mut chars = current_text_chars(&s, &path).unwrap();
            chars.sort_unstable();
            let records = archival(&s, &path, &[], None).unwrap();
            let mut built: Vec<usize> = records.iter().map(|r| r.text.chars().count()).collect();
            built.sort_unstable();
            assert_eq!(chars, built);
            // "plan" is only in the version the update superseded, "gone" only in a deleted one.
            let query = Query::parse("plan été gone");
            let found: Vec<i64> =
                archival_keyword_matches(&s, &path, &query, &[]).unwrap().iter().map(|m| m.seq).collect();
            assert_eq!(found, [update]);
            (chars, path::holds_most_branches(&s, &path).unwrap())
        };
        assert_eq!(measured(), (vec![5, 10, 12], true));
        for i in 0..4 {
            s.fork("root", Some(&format!("sibling{i}"))).unwrap();
        }
        assert_eq!(measured(), (vec![5, 10, 12], false));
    }

    /// A chain's leaf reads its whole view by scans; a branch whose siblings wrote most rows
    /// gives the scans up after two rows per path branch, and reads by probes (the events from
    /// where their scan stopped).
    #[test]
    fn scans_give_up_on_other_branches_rows() {
        let s = Store::scratch();
        let write = |branch: &str, text: &str| {
            s.recall_append(branch, "note", text, &[]).unwrap();
            s.archival_add(branch, text, &[]).unwrap();
        };
        s.create_root("root").unwrap();
        write("root", "root's");
        s.fork("root", Some("leaf")).unwrap();
        s.fork("root", Some("busy")).unwrap();
        write("leaf", "leaf's");
        let leaf = s.path("leaf").unwrap();
        assert_eq!(every_event_by_scan(&s, &leaf).unwrap().map(|e| e.len()), Some(2));
        assert_eq!(versions_by_scan_built(&s, &leaf).unwrap().map(|r| r.len()), Some(2));
        let before = s.view("leaf").unwrap();
        let query = Query::parse("root's leaf's busy");
        let found = |s: &Store| {
            let matches = archival_keyword_matches(s, &leaf, &query, &[]).unwrap();
            matches.into_iter().map(|m| (m.seq, m.counts)).collect::<HashMap<_, _>>()
        };
        let found_before = found(&s);
        assert_eq!(found_before.len(), 2);
        for i in 0..5 {
            write("busy", &format!("busy {i}"));
        }
        assert!(
            !scanned(&s, &leaf, &EVENT_ROWS.every_one(), params![], Place::EventRid(0), |_, _| Ok(Some(())))
                .unwrap()
                .whole
        );
        assert_eq!(every_event_by_scan(&s, &leaf).unwrap(), Some(every_event_by_probes(&s, &leaf).unwrap()));
        assert!(versions_by_scan_built(&s, &leaf).unwrap().is_none());
        assert_eq!(s.view("leaf").unwrap(), before, "the probes read the same view");
        assert_eq!(found(&s), found_before, "the keyword search's probes count the same");
    }

    /// An events scan that gives up on a sibling's rows, past a path branch's own and before
    /// a later path branch's, keeps what it read and probes on from there: the whole view, each
    /// event once, newest first; also when the last row of the view it met, and a row the
    /// probes meet, are hidden.
    #[test]
    fn an_events_scan_given_up_reads_on_by_probes() {
        let s = Store::scratch();
        let append = |branch: &str, text: &str| s.recall_append(branch, "note", text, &[]).unwrap().id;
        s.create_root("root").unwrap();
        let root = append("root", "root's");
        s.fork("root", Some("mid")).unwrap();
        s.fork("root", Some("busy")).unwrap();
        let mid = append("mid", "mid's");
        for i in 0..8 {
            append("busy", &format!("busy {i}"));
        }
        s.fork("mid", Some("late")).unwrap();
        let late = [append("late", "late 1"), append("late", "late 2")];
        append("mid", "after late's fork");
        let path = s.path("late").unwrap();
        let scanned_ids = || -> Vec<i64> {
            let events = every_event_by_scan(&s, &path).unwrap().unwrap();
            assert_eq!(events, every_event_by_probes(&s, &path).unwrap());
            events.iter().map(|e| e.id).collect()
        };
        // Root's and mid's kept, mid's later row and busy's passed: given up, two rows read.
        let all = |_: &Row<'_>, _: Held<'_>| Ok(Some(()));
        let scan = scanned(&s, &path, &EVENT_ROWS.every_one(), params![], Place::EventRid(0), all).unwrap();
        assert_eq!((scan.kept.len(), scan.whole), (2, false));
        assert_eq!(scanned_ids(), [late[1], late[0], mid, root]);
        s.recall_exclude("late", &[mid, late[0]]).unwrap();
        assert_eq!(scanned_ids(), [late[1], root]);
    }

    /// The oldest n events of a view that holds more than [`FEW_EVENTS`], on a chain whose
    /// leaf reads them by scans and on a side branch that reads them by probes: a few looked up
    /// by rowid, more built by a second read, all by one read, with excluded events among them.
    #[test]
    fn the_oldest_events_by_lookups_and_by_a_second_read() {
        let s = Store::scratch_keeping_events();
        s.create_root("b0").unwrap();
        let mut ids = Vec::new();
        for level in 1..=4 {
            for i in 0..100 {
                ids.push(
                    s.recall_append(&format!("b{}", level - 1), "note", &format!("e{level}.{i}"), &[])
                        .unwrap()
                        .id,
                );
            }
            s.fork(&format!("b{}", level - 1), Some(&format!("b{level}"))).unwrap();
        }
        // A side branch off the root with events of its own and two children: its path holds
        // two of the eight branches.
        s.fork("b0", Some("side")).unwrap();
        for i in 0..300 {
            s.recall_append("side", "note", &format!("side {i}"), &[]).unwrap();
        }
        for child in ["side-1", "side-2"] {
            s.fork("side", Some(child)).unwrap();
        }
        s.recall_exclude("b4", &[ids[0], ids[150], ids[399]]).unwrap();
        let (leaf, side) = (s.path("b4").unwrap(), s.path("side").unwrap());
        assert!(
            path::holds_most_branches(&s, &leaf).unwrap() && !path::holds_most_branches(&s, &side).unwrap()
        );
        for path in [&leaf, &side] {
            let oldest: Vec<Event> = every_event_by_probes(&s, path).unwrap().into_iter().rev().collect();
            assert!(oldest.len() > FEW_EVENTS + 20);
            for n in [10, FEW_EVENTS, FEW_EVENTS + 1, oldest.len() - 1, oldest.len()] {
                assert_eq!(
                    oldest_events_besides_steps(&s, path, n).unwrap(),
                    oldest[..n],
                    "{n} of {}",
                    path.branch().id
                );
            }
        }
    }

    /// At depth 40, a window that the leaf's own rows fill reads over the nearest
    /// [`WINDOW_BRANCHES`] branches only; one they do not fill reads on past them, the rest
    /// from the root.
    #[test]
    fn a_window_reads_past_the_nearest_branches_only_when_they_fall_short() {
        let s = Store::scratch();
        s.create_root("b0").unwrap();
        for i in 0..5 {
            s.recall_append("b0", "note", &format!("root {i}"), &[]).unwrap();
        }
        for level in 1..=40 {
            s.fork(&format!("b{}", level - 1), Some(&format!("b{level}"))).unwrap();
        }
        for i in 0..3 {
            s.recall_append("b40", "note", &format!("leaf {i}"), &[]).unwrap();
        }
        let path = s.path("b40").unwrap();
        let held = || {
            s.conn.query_one("SELECT count(*) FROM temp.view_path", params![], |r| r.get::<i64>(0)).unwrap()
        };
        let texts = |events: Vec<Event>| events.into_iter().map(|e| e.text).collect::<Vec<_>>();
        assert_eq!(texts(events(&s, &path, Some(3)).unwrap()), ["leaf 2", "leaf 1", "leaf 0"]);
        assert_eq!(held(), WINDOW_BRANCHES as i64);
        assert_eq!(
            texts(events(&s, &path, Some(5)).unwrap()),
            ["leaf 2", "leaf 1", "leaf 0", "root 4", "root 3"]
        );
        assert_eq!(held(), 41);
    }

    /// A step is hidden by an exclusion its view holds, whether the scan of the steps' index or
    /// the probes read it: its own branch's, or its ancestor's before the fork; not a sibling's,
    /// nor one its ancestor wrote after the fork. A view of no step, whatever it excludes, has
    /// none.
    #[test]
    fn steps_are_hidden_by_the_exclusions_the_view_holds() {
        let s = Store::scratch();
        let step = |branch: &str, text: &str| append(&s, branch, "step:user", text, &[]);
        s.create_root("root").unwrap();
        let steps_of_root = ["before", "leaf's", "sibling's", "root's"].map(|text| step("root", text));
        let [before, by_leaf, by_sibling, by_root] = steps_of_root;
        s.recall_exclude("root", &[before]).unwrap();
        s.fork("root", Some("leaf")).unwrap();
        s.fork("root", Some("sibling")).unwrap();
        let own = step("leaf", "own");
        s.recall_exclude("leaf", &[by_leaf]).unwrap();
        s.recall_exclude("sibling", &[by_sibling]).unwrap();
        s.recall_exclude("root", &[by_root]).unwrap();
        let ids = |steps: Option<Vec<StoredStep>>| {
            let mut ids: Vec<i64> = steps.unwrap().into_iter().map(|step| step.id).collect();
            ids.sort_unstable();
            ids
        };
        for (branch, seen) in [
            ("leaf", vec![by_sibling, by_root, own]),
            ("root", vec![by_leaf, by_sibling]),
            ("sibling", vec![by_leaf, by_root]),
        ] {
            let path = s.path(branch).unwrap();
            assert_eq!(ids(s.read(|| steps_by_scan(&s, &path)).unwrap()), seen, "{branch}'s scan");
            let probed = events_past_rid(&s, &path, &STEP_ROWS, -1, &mut stored_step).unwrap();
            assert_eq!(ids(Some(probed)), seen, "{branch}'s probes");
            assert_eq!(steps(&s, &path).unwrap().into_iter().map(|step| step.id).collect::<Vec<_>>(), seen);
        }
        let empty = Store::scratch();
        empty.create_root("root").unwrap();
        let note = empty.recall_append("root", "note", "not a step", &[]).unwrap().id;
        empty.recall_exclude("root", &[note]).unwrap();
        let path = empty.path("root").unwrap();
        assert_eq!(ids(empty.read(|| steps_by_scan(&empty, &path)).unwrap()), Vec::<i64>::new());
    }

    /// The steps' scan gives up, for the probes, on other branches' steps, and on other
    /// branches' exclusions of the steps it found (each sibling reset the conversation): past
    /// two rows per path branch, as every scan does.
    #[test]
    fn the_steps_scan_gives_up_on_other_branches_rows() {
        let s = Store::scratch();
        s.create_root("root").unwrap();
        let first = append(&s, "root", "step:user", "first", &[]);
        s.fork("root", Some("leaf")).unwrap();
        let path = s.path("leaf").unwrap();
        let scan = || s.read(|| steps_by_scan(&s, &path)).unwrap().map(|steps| steps.len());
        assert_eq!(scan(), Some(1));
        for i in 0..5 {
            s.fork("root", Some(&format!("reset-{i}"))).unwrap();
            s.recall_exclude(&format!("reset-{i}"), &[first]).unwrap();
        }
        assert_eq!(scan(), None, "five exclusions the leaf does not see, past four");
        let ids = |steps: Vec<StoredStep>| steps.into_iter().map(|step| step.id).collect::<Vec<_>>();
        assert_eq!(ids(steps(&s, &path).unwrap()), [first]);
        let chatty = Store::scratch();
        chatty.create_root("root").unwrap();
        chatty.fork("root", Some("leaf")).unwrap();
        chatty.fork("root", Some("chatty")).unwrap();
        for i in 0..5 {
            append(&chatty, "chatty", "step:user", &format!("chatty {i}"), &[]);
        }
        let own = append(&chatty, "leaf", "step:user", "own", &[]);
        let path = chatty.path("leaf").unwrap();
        assert!(
            chatty.read(|| steps_by_scan(&chatty, &path)).unwrap().is_none(),
            "five steps of another branch"
        );
        assert_eq!(ids(steps(&chatty, &path).unwrap()), [own]);
    }

    /// What hides the steps a scan found is read from every exclusion when the table holds
    /// fewer than the steps, and looked up by the steps' ids otherwise, or when that read gives
    /// up on other branches' exclusions (of their own notes): each way, the steps are the
    /// visible step events.
    #[test]
    fn the_steps_exclusions_are_read_whole_or_looked_up() {
        let s = Store::scratch();
        s.create_root("root").unwrap();
        let mut leaf = "root".to_string();
        for level in 0..6 {
            for turn in 0..4 {
                append(&s, &leaf, "step:user", &format!("turn {turn} at {level}"), &[]);
            }
            s.recall_append(&leaf, "note", &format!("note at {level}"), &[]).unwrap();
            let child = format!("c{level}");
            s.fork(&leaf, Some(&child)).unwrap();
            leaf = child;
        }
        let path = s.path(&leaf).unwrap();
        let expected = || {
            let path = s.path(&leaf).unwrap();
            let mut ids: Vec<i64> = events(&s, &path, None)
                .unwrap()
                .into_iter()
                .filter(|e| is_step(&e.kind))
                .map(|e| e.id)
                .collect();
            ids.sort_unstable();
            ids
        };
        // In no set order: sorted.
        let sorted = |steps: Vec<StoredStep>| {
            let mut ids: Vec<i64> = steps.into_iter().map(|step| step.id).collect();
            ids.sort_unstable();
            ids
        };
        let scanned = || s.read(|| steps_by_scan(&s, &s.path(&leaf).unwrap())).unwrap().map(sorted);
        let ids: Vec<i64> = expected();
        // A few exclusions (a prune): read whole.
        s.recall_exclude(&leaf, &ids[..3]).unwrap();
        assert!(fewer_exclusions_than(&s, ids.len()).unwrap(), "3 against the 24 steps the scan finds");
        assert_eq!(scanned(), Some(expected()));
        // More exclusions than steps, of the notes and of steps: looked up.
        let notes: Vec<i64> = events(&s, &path, None)
            .unwrap()
            .into_iter()
            .filter(|e| &*e.kind == "note")
            .map(|e| e.id)
            .collect();
        s.recall_exclude(&leaf, &notes).unwrap();
        s.recall_exclude(&leaf, &ids[3..20]).unwrap();
        assert!(!fewer_exclusions_than(&s, ids.len()).unwrap(), "26 against 24");
        assert_eq!(scanned(), Some(expected()));
        // Fewer exclusions than steps, but most of them other branches': the whole read gives
        // up past two a path branch, and the lookup finds the leaf's.
        let other = Store::scratch();
        other.create_root("root").unwrap();
        let steps: Vec<i64> =
            (0..40).map(|turn| append(&other, "root", "step:user", &format!("turn {turn}"), &[])).collect();
        other.fork("root", Some("leaf")).unwrap();
        other.recall_exclude("leaf", &steps[..2]).unwrap();
        for sibling in 0..6 {
            let sibling = format!("sibling-{sibling}");
            other.fork("root", Some(&sibling)).unwrap();
            let own: Vec<i64> = (0..5)
                .map(|turn| {
                    other.recall_append(&sibling, "note", &format!("{sibling} {turn}"), &[]).unwrap().id
                })
                .collect();
            other.recall_exclude(&sibling, &own).unwrap();
        }
        assert!(fewer_exclusions_than(&other, steps.len()).unwrap());
        let path = other.path("leaf").unwrap();
        assert!(other.read(|| hidden_by(&other, &path, EVERY_EXCLUSION, params![])).unwrap().is_none());
        let found = other.read(|| steps_by_scan(&other, &path)).unwrap().unwrap();
        assert_eq!(sorted(found), steps[2..]);
    }

    /// The newest events besides the steps are the newest visible events less the steps, the
    /// steps counted toward the limit, on a short path and past a window's branches, whatever
    /// hides them: each branch's own exclusions, and the leaf's of its ancestors' events; asked
    /// for fewer, they are the newest of them.
    #[test]
    fn the_newest_events_besides_steps_are_the_newest_events_less_the_steps() {
        let s = Store::scratch();
        s.create_root("b0").unwrap();
        let depth = WINDOW_BRANCHES + 4;
        for level in 0..depth {
            let branch = format!("b{level}");
            let mut written = Vec::new();
            for kind in ["note", "step:user", "metric", "step:action"] {
                written.push(append(&s, &branch, kind, &format!("{kind} at {level}"), &[]));
            }
            if level % 5 == 0 {
                s.recall_exclude(&branch, &written[..2]).unwrap();
            }
            s.fork(&branch, Some(&format!("b{}", level + 1))).unwrap();
        }
        let leaf = format!("b{depth}");
        let seen = events(&s, &s.path(&leaf).unwrap(), None).unwrap();
        // Near and far: b0's event is read only past the window's branches.
        let hidden = [seen[3].id, seen[10].id, seen[40].id, seen[41].id, seen[seen.len() - 1].id];
        s.recall_exclude(&leaf, &hidden).unwrap();
        let mut steps_passed_over = 0;
        for branch in ["b0", "b4", &leaf] {
            let path = s.path(branch).unwrap();
            let newest = events(&s, &path, None).unwrap();
            for limit in [3, 10, newest.len().saturating_sub(3), newest.len(), newest.len() + 5] {
                let within = &newest[..limit.min(newest.len())];
                let others: Vec<i64> =
                    within.iter().filter(|e| !e.kind.starts_with(STEP_KIND)).map(|e| e.id).collect();
                steps_passed_over += within.len() - others.len();
                let read = newest_events_besides_steps(&s, &path, limit, usize::MAX).unwrap();
                assert_eq!(read.iter().map(|e| e.id).collect::<Vec<_>>(), others, "{branch}, {limit}");
                assert_eq!(
                    read,
                    within.iter().filter(|e| others.contains(&e.id)).cloned().collect::<Vec<_>>()
                );
                for wanted in [0, 1, others.len() / 2, others.len().saturating_sub(1), others.len()] {
                    // Each read starts from the window's branches, as a call's first read does.
                    s.forget_paths();
                    let fewer = newest_events_besides_steps(&s, &path, limit, wanted).unwrap();
                    assert_eq!(fewer, read[..wanted.min(read.len())], "{branch}, {limit}, {wanted}");
                }
            }
        }
        assert!(steps_passed_over > depth, "the views hold steps: {steps_passed_over}");
        // On the leaf, what the window's branches hold is enough for the newest few: the rest of
        // the path is never loaded; all of them need it.
        let path = s.path(&leaf).unwrap();
        let loaded = |wanted: usize| {
            s.forget_paths();
            newest_events_besides_steps(&s, &path, usize::MAX, wanted).unwrap();
            s.conn.query_one("SELECT count(*) FROM temp.view_path", params![], |r| r.get::<i64>(0)).unwrap()
        };
        assert_eq!(loaded(4), WINDOW_BRANCHES as i64);
        assert_eq!(loaded(usize::MAX), path.branches().len() as i64);
    }

    /// Steps are found in their partial index: its condition is the steps' kind prefix, and the
    /// steps' statements, the scan's and the probes', read that index, not every event; the
    /// exclusions of the steps a scan found are found by the index of their event ids.
    #[test]
    fn steps_are_read_from_their_index() {
        assert_eq!(STEP_EVENT, format!("substr(kind, 1, {}) = '{STEP_KIND}'", STEP_KIND.len()));
        let s = planning_store();
        let plan = |sql: String, params: Params<'_>| s.conn.query_plan(&sql, params);
        let scan = plan(STEP_ROWS.every_one(), params![]);
        assert!(scan.contains("SCAN t USING INDEX events_steps") && !scan.contains("TEMP B-TREE"), "{scan}");
        let probes = plan(STEP_ROWS.past_rid(Backend::Sqlite), params![-1i64]);
        assert!(probes.contains("SEARCH t USING INDEX events_steps"), "{probes}");
        // What hides the steps a scan found is looked up by their ids.
        let hidden = plan(exclusions_of(Backend::Sqlite), params!["[1, 2]"]);
        assert!(hidden.contains("SEARCH x USING INDEX inherited_exclusions_event (event_id=?)"), "{hidden}");
    }

    /// A record's versions are found by their indexes, the first by its seq and the later ones
    /// by record (a partial index, which holds no first version), and so is a newer version of
    /// a record, never by a scan.
    #[test]
    fn record_versions_are_read_by_their_indexes() {
        assert_eq!(later_version("t"), "t.record_id != t.seq", "the partial indexes' condition");
        let s = planning_store();
        let plan = |sql: String, params: Params<'_>| s.conn.query_plan(&sql, params);
        for plan in [
            plan(newest_version_of_record(), params![1i64]),
            plan(current_versions_among(Backend::Sqlite), params!["[1, 2]"]),
            plan(history::record_sql(), params![1i64]),
        ] {
            assert!(plan.contains("SEARCH t USING INTEGER PRIMARY KEY (rowid=?)"), "{plan}");
            assert!(plan.contains("SEARCH t USING INDEX archival_record_versions (record_id=?)"), "{plan}");
            assert!(!plan.contains("SCAN t") && !plan.contains("SCAN n"), "{plan}");
        }
        let newer = plan(current_versions_among(Backend::Sqlite), params!["[1, 2]"]);
        assert!(
            newer.contains("SEARCH n USING INDEX archival_record_versions (record_id=? AND seq>?)"),
            "{newer}"
        );
    }

    /// A store with a root whose path is loaded, to plan the view's statements on.
    fn planning_store() -> Store {
        let s = Store::scratch();
        s.create_root("root").unwrap();
        path::load(&s, &s.path("root").unwrap()).unwrap();
        s
    }

    /// Forks a child of `parent`, named after the branches so far, and adds it to them.
    fn fork_child(s: &Store, branches: &mut Vec<String>, parent: &str) {
        let child = format!("b{}", branches.len());
        s.fork(parent, Some(&child)).unwrap();
        branches.push(child);
    }

    /// A core row with a TTL, as `core set --ttl` stores it, but written `age` seconds ago: it
    /// has run out if its TTL is shorter. (Written here, as the view's tests name no layer
    /// above it, nor the clock.)
    fn set_with_ttl(s: &Store, branch: &str, key: &str, value: &str, ttl: f64, age: f64) {
        let bid = s.path(branch).unwrap().branches()[0].bid;
        let sql = "INSERT INTO core(seq, branch, key, value, importance, ttl_s, created_at)
                   VALUES (?1, ?2, ?3, ?4, 3, ?5, ?6)";
        s.write(|tx| tx.conn.execute(sql, params![tx.next_seq()?, bid, key, value, ttl, tx.now() - age]))
            .unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Random trees of forks, events (conversation steps among them), exclusions and archival
        /// writes: on every branch, the scans that read whole layers find the rows the probes
        /// find, in the same order (the keyword search's scan counts the versions its probes
        /// count, and the scan of later versions finds the same updates and deletes), a window
        /// of the view's count of events holds them all (and its count of steps is theirs), the
        /// oldest n events and those of a kind are the probes' (as each reader chooses to read
        /// them), the recall search counts
        /// from the stored columns, by the scan, the probes and its own choice, what the events
        /// built hold, and the conversation's steps are the view's step events, oldest first
        /// (the nested loop's order, farthest branch first and rowid within one, is seq order).
        /// A chain forked last, long enough that its leaf's scans never give up, makes sure they
        /// are compared at least there.
        #[test]
        fn scans_read_what_probes_read(ops in prop::collection::vec((0u8..9, 0usize..8), 1..60)) {
            let writes = ops.len();
            let s = Store::scratch();
            s.create_root("b0").unwrap();
            let (mut branches, mut events, mut records) = (vec!["b0".to_string()], vec![], vec![]);
            for (i, (op, pick)) in ops.into_iter().enumerate() {
                let branch = branches[pick % branches.len()].clone();
                let text = format!("row {i}");
                // Writes about rows another branch cannot see are refused; that is the view's business.
                match op {
                    0 => fork_child(&s, &mut branches, &branch),
                    1 => {
                        let kind = if pick % 2 == 0 { "step:user" } else { "note" };
                        events.push(append(&s, &branch, kind, &text, &[format!("t{pick}")]));
                    }
                    2 if !events.is_empty() => {
                        let _ = s.recall_exclude(&branch, &[events[pick % events.len()]]);
                    }
                    3 if !records.is_empty() => {
                        let _ = s.archival_update(&branch, records[pick % records.len()], Some(&text), None);
                    }
                    4 if !records.is_empty() => {
                        let _ = s.archival_delete(&branch, records[pick % records.len()]);
                    }
                    5 => {
                        s.core_set(&branch, &format!("k{}", pick % 3), &text, Default::default()).unwrap();
                    }
                    6 => {
                        let _ = s.core_delete(&branch, &[&format!("k{}", pick % 3)]);
                    }
                    7 if !events.is_empty() => {
                        let _ = s.recall_summarize(&branch, "summary", &text, &[events[pick % events.len()]]);
                    }
                    _ => records.push(s.archival_add(&branch, &text, &[format!("t{}", pick % 2)]).unwrap().id),
                }
            }
            let mut parent = branches[branches.len() / 2].clone();
            // Each op writes at most one row: the leaf's bound, two per path branch, exceeds them all.
            for _ in 0..=writes {
                let child = format!("b{}", branches.len());
                s.fork(&parent, Some(&child)).unwrap();
                branches.push(child.clone());
                parent = child;
            }
            for (i, branch) in branches.iter().enumerate() {
                let path = s.path(branch).unwrap();
                let scans = (
                    every_event_by_scan(&s, &path).unwrap(),
                    versions_by_scan_built(&s, &path).unwrap(),
                    later_versions_by_scan(&s, &path).unwrap(),
                );
                let leaf = i + 1 == branches.len();
                prop_assert!(!leaf || (scans.0.is_some() && scans.1.is_some() && scans.2.is_some()), "the chain's leaf");
                let probed = every_event_by_probes(&s, &path).unwrap();
                // A window of the view's count of events holds every one of them; the running
                // counts give the steps among them too.
                let count = event_count(&s, path.branch().bid).unwrap();
                prop_assert_eq!(&events_by_probes(&s, &path, count).unwrap(), &probed);
                let counts = EventCounts { events: count, steps: probed.iter().filter(|e| is_step(&e.kind)).count() };
                prop_assert_eq!(event_counts(&s, path.branch().bid).unwrap(), counts);
                // Eviction's reads: the oldest n events besides the steps, and those of a kind,
                // oldest first.
                let oldest: Vec<Event> = probed.iter().rev().cloned().collect();
                let besides: Vec<Event> = oldest.iter().filter(|e| !is_step(&e.kind)).cloned().collect();
                for n in [0, 1, 3, besides.len().saturating_sub(1), besides.len(), 1000] {
                    prop_assert_eq!(
                        &oldest_events_besides_steps(&s, &path, n).unwrap()[..],
                        &besides[..n.min(besides.len())]
                    );
                }
                for kind in ["note", "step:user", "absent"] {
                    let of_kind: Vec<Event> = oldest.iter().filter(|e| &*e.kind == kind).cloned().collect();
                    prop_assert_eq!(events_of_kind(&s, &path, kind).unwrap(), of_kind);
                }
                // The recall search's counts from the stored columns are those of the events
                // built (text, kind and each tag), by the scan, the probes and its own read.
                let query = Query::parse("1 2 3 step t4");
                let expected: Vec<(i64, TermCounts)> = probed
                    .iter()
                    .filter_map(|e| {
                        let mut haystacks = vec![e.text.as_str(), &e.kind];
                        haystacks.extend(e.tags.iter().map(String::as_str));
                        let counts = query.term_counts(&haystacks);
                        counts.matches().then_some((e.id, counts))
                    })
                    .collect();
                let sorted = |matches: Vec<Match>| {
                    let mut pairs: Vec<(i64, TermCounts)> = matches.into_iter().map(|m| (m.seq, m.counts)).collect();
                    pairs.sort_unstable_by_key(|&(seq, _)| Reverse(seq));
                    pairs
                };
                prop_assert_eq!(&sorted(event_keyword_matches(&s, &path, &query).unwrap()), &expected);
                let probed_matches =
                    events_past_rid(&s, &path, &EVENT_ROWS, -1, &mut counting(&query)).unwrap();
                prop_assert_eq!(&sorted(probed_matches), &expected);
                let scanned_matches = s.read(|| events_by_scans(&s, &path, &mut counting(&query))).unwrap();
                prop_assert!(!leaf || scanned_matches.is_some(), "the chain's leaf");
                if let Some(scanned) = scanned_matches {
                    prop_assert_eq!(&sorted(scanned), &expected);
                }
                let found: Vec<(i64, String)> =
                    steps(&s, &path).unwrap().into_iter().map(|step| (step.id, step.kind)).collect();
                prop_assert!(found.windows(2).all(|pair| pair[0].0 < pair[1].0), "oldest first: {:?}", found);
                let step_events: Vec<(i64, String)> = probed
                    .iter()
                    .rev()
                    .filter(|event| event.kind.starts_with(STEP_KIND))
                    .map(|event| (event.id, event.kind.to_string()))
                    .collect();
                prop_assert_eq!(&found, &step_events);
                // Both of its reads: the chain's leaf scans; any branch may probe.
                let ids = |mut steps: Vec<StoredStep>| {
                    steps.sort_unstable_by_key(|step| step.id);
                    steps.into_iter().map(|step| (step.id, step.kind)).collect::<Vec<_>>()
                };
                let probed_steps = events_past_rid(&s, &path, &STEP_ROWS, -1, &mut stored_step).unwrap();
                prop_assert_eq!(&ids(probed_steps), &step_events);
                let scanned_steps = s.read(|| steps_by_scan(&s, &path)).unwrap();
                prop_assert!(!leaf || scanned_steps.is_some(), "the chain's leaf");
                if let Some(scanned) = scanned_steps {
                    prop_assert_eq!(&ids(scanned), &step_events);
                }
                if let Some(scanned) = scans.0 {
                    prop_assert_eq!(scanned, probed);
                }
                if let Some(scanned) = scans.1 {
                    prop_assert_eq!(scanned, versions_by_probes_built(&s, &path).unwrap());
                }
                if let Some(mut scanned) = scans.2 {
                    let mut probed = later_versions_by_probes(&s, &path).unwrap();
                    scanned.sort_unstable();
                    probed.sort_unstable();
                    prop_assert_eq!(scanned, probed);
                }
                for (table, columns) in [
                    ("core", "t.key, t.value"),
                    ("inherited_exclusions", "CAST(t.event_id AS TEXT), NULL"),
                    ("inherited_summaries", "CAST(t.seq AS TEXT), t.kind"),
                    ("archival", "CAST(t.record_id AS TEXT), t.text"),
                ] {
                    let row = |r: &Row<'_>| Ok((r.get::<String>(2)?, r.get::<Option<String>>(3)?));
                    let scanned = rows_along_by_scan(&s, &path, table, columns, row).unwrap();
                    prop_assert!(!leaf || scanned.is_some(), "the chain's leaf");
                    if let Some(scanned) = scanned {
                        prop_assert_eq!(scanned, rows_along_by_probes(&s, &path, table, columns, row).unwrap());
                    }
                }
                // Texts "row 1" to "row 7" hold a query word, the others none.
                let query = Query::parse("1 2 3 4 5 6 7");
                for tags in [None, Some(r#"["t0"]"#)] {
                    let versions = Versions { fields: KEYWORD_FIELDS, tags, words: None };
                    let counted = |matches: Vec<Match>| {
                        let mut pairs: Vec<(i64, TermCounts)> =
                            matches.into_iter().map(|m| (m.seq, m.counts)).collect();
                        pairs.sort_unstable_by_key(|&(seq, _)| seq);
                        pairs
                    };
                    let scanned = versions_by_scan(&s, &path, &versions, &mut counting_versions(&query)).unwrap();
                    prop_assert!(!leaf || scanned.is_some(), "the chain's leaf");
                    if let Some(scanned) = scanned {
                        let probed = versions_by_probes(&s, &path, &versions, &mut counting_versions(&query));
                        prop_assert_eq!(counted(scanned), counted(probed.unwrap()));
                    }
                }
            }
        }

        /// Chains deeper than [`WINDOW_BRANCHES`], with levels that write nothing, side
        /// branches, writes at ancestors after their child forked (rows the chain does not
        /// see), core keys, exclusions, summaries, updates and deletes of rows far up the path,
        /// and anchors or none: a window of the newest n events, or records (with a tags filter
        /// or none), is the first n of every such row. It is read along the whole path and
        /// along the path down to the nearest anchor ([`Store::window_path`]), while the path
        /// table holds another branch's path, and along the nearer path while it holds the
        /// whole one. A view of windows, read along the nearer path, names the writers of its
        /// core keys and summaries as the whole path does.
        #[test]
        fn windows_read_the_newest_of_every_row(
            anchor_every in prop::sample::select(vec![0i64, 1, 16]),
            ops in prop::collection::vec((0u8..7, 0usize..64, 0usize..3), 1..80),
        ) {
            let s = Store::scratch_anchoring(anchor_every);
            s.create_root("b0").unwrap();
            let (mut chain, mut event_ids, mut records) = (vec!["b0".to_string()], vec![], vec![]);
            for (i, (op, pick, forks)) in ops.into_iter().enumerate() {
                // Most writes at the chain's tip, some at an ancestor or a side branch off it.
                let at = match pick % 8 {
                    0 => chain[pick % chain.len()].clone(),
                    1 => {
                        let side = format!("side{i}");
                        s.fork(&chain[pick % chain.len()], Some(&side)).unwrap();
                        side
                    }
                    _ => chain.last().unwrap().clone(),
                };
                let text = format!("row {i}");
                // Rows the writer cannot see are refused; that is the view's business.
                match op {
                    0 => event_ids.push(s.recall_append(&at, "note", &text, &[]).unwrap().id),
                    1 if !event_ids.is_empty() => {
                        let _ = s.recall_exclude(&at, &[event_ids[pick % event_ids.len()]]);
                    }
                    2 if !records.is_empty() => {
                        let _ = s.archival_update(&at, records[pick % records.len()], Some(&text), None);
                    }
                    3 if !records.is_empty() => {
                        let _ = s.archival_delete(&at, records[pick % records.len()]);
                    }
                    4 if !event_ids.is_empty() => {
                        let id = event_ids[pick % event_ids.len()];
                        let _ = s.recall_summarize(&at, "summary", &text, &[id]);
                    }
                    5 => {
                        s.core_set(&at, &format!("k{}", pick % 4), &text, Default::default()).unwrap();
                    }
                    _ => records.push(s.archival_add(&at, &text, &[format!("t{}", pick % 2)]).unwrap().id),
                }
                // A level or two after most writes, none after some: chains pass the window's
                // branches, and some levels write nothing.
                for _ in 0..forks {
                    let child = format!("b{}", chain.len());
                    s.fork(chain.last().unwrap(), Some(&child)).unwrap();
                    chain.push(child);
                }
            }
            let elsewhere = s.path("b0").unwrap();
            let tagged = ["t1".to_string()];
            for branch in chain.iter().rev().step_by(5) {
                s.forget_paths();
                let near = s.window_path(branch, Some(1)).unwrap();
                prop_assert!(near.is_whole() || near.anchor().is_some());
                let path = s.path(branch).unwrap();
                let every_event = every_event_by_probes(&s, &path).unwrap();
                let every_record = versions_by_probes_built(&s, &path).unwrap();
                let holds_most = path::holds_most_branches(&s, &path).unwrap();
                let superseded = superseded_versions(&s, &path, holds_most).unwrap();
                let current: Vec<&Record> =
                    every_record.iter().filter(|r| !superseded.is_superseded(r.seq)).collect();
                for n in [0, 1, 3, 8, 1000] {
                    for along in [&path, &near] {
                        path::load(&s, &elsewhere).unwrap();
                        let window = events(&s, along, Some(n)).unwrap();
                        prop_assert_eq!(&window[..], &every_event[..n.min(every_event.len())]);
                        for tags in [&[][..], &tagged[..]] {
                            path::load(&s, &elsewhere).unwrap();
                            let window = archival(&s, along, tags, Some(n)).unwrap();
                            let carries = |r: &&Record| tags.iter().all(|t| r.tags.contains(t));
                            let expected: Vec<&Record> =
                                current.iter().copied().filter(carries).take(n).collect();
                            prop_assert_eq!(window.iter().collect::<Vec<_>>(), expected);
                        }
                    }
                    // Along the nearer path while the table holds the whole one.
                    path::load(&s, &path).unwrap();
                    let window = events(&s, &near, Some(n)).unwrap();
                    prop_assert_eq!(&window[..], &every_event[..n.min(every_event.len())]);
                }
                s.forget_paths();
                let view = s.view_window(branch, Some(3), Some(3)).unwrap();
                prop_assert_eq!(view.core, core(&s, &path).unwrap());
                prop_assert_eq!(view.summaries, summaries(&s, &path).unwrap());
                prop_assert_eq!(&view.events[..], &every_event[..3.min(every_event.len())]);
                let newest: Vec<&Record> = current.iter().copied().take(3).collect();
                prop_assert_eq!(view.archival.iter().collect::<Vec<_>>(), newest);
            }
        }

        /// Random trees of forks and core writes — a few keys set over and over, some with a
        /// TTL that has run out or not, deletions — with anchors or none: on every branch, the
        /// core read per key finds what the scan of every version finds, and the core read
        /// gives the same. A root that sets one key many times at the end makes sure the scan
        /// gives up there, so that the read takes the per-key form at least once.
        #[test]
        fn core_per_key_reads_what_the_scan_reads(
            anchor_every in prop::sample::select(vec![0i64, 1, 3]),
            ops in prop::collection::vec((0u8..5, 0usize..16), 1..120),
        ) {
            let s = Store::scratch_anchoring(anchor_every);
            s.create_root("b0").unwrap();
            let mut branches = vec!["b0".to_string()];
            for (i, (op, pick)) in ops.into_iter().enumerate() {
                let branch = branches[pick % branches.len()].clone();
                let key = format!("k{}", pick % 3);
                match op {
                    0 => fork_child(&s, &mut branches, &branch),
                    1 => {
                        let (ttl, age) = (1.0 + (pick % 4) as f64, (pick % 7) as f64);
                        set_with_ttl(&s, &branch, &key, &format!("v{i}"), ttl, age);
                    }
                    2 => {
                        let _ = s.core_delete(&branch, &[&key]);
                    }
                    _ => {
                        s.core_set(&branch, &key, &format!("v{i}"), Default::default()).unwrap();
                    }
                }
            }
            // A root with many versions of one key, some after its child forked.
            s.create_root("solo").unwrap();
            let many = |branch: &str, key: &str| {
                for i in 0..=CORE_SCAN_MIN_ROWS {
                    s.core_set(branch, key, &format!("{branch} {i}"), Default::default()).unwrap();
                }
            };
            many("solo", "k0");
            s.fork("solo", Some("solo1")).unwrap();
            many("solo", "k0");
            many("solo1", "k1");
            branches.extend(["solo".to_string(), "solo1".to_string()]);
            for branch in &branches {
                let path = s.path(branch).unwrap();
                let (last, anchor) = load_to_anchor(&s, &path).unwrap();
                let params = || named![":now" => s.clock.now(), ":last" => last, ":anchor" => anchor];
                let scanned = newest_live(core_by_scan(&s, &path, params(), false).unwrap().unwrap());
                prop_assert_eq!(&newest_live(core_by_key(&s, &path, params()).unwrap()), &scanned);
                prop_assert_eq!(core(&s, &path).unwrap(), scanned);
                let gives_up = core_by_scan(&s, &path, params(), true).unwrap().is_none();
                prop_assert!(gives_up || branch != "solo", "the scan of solo's many versions gives up");
            }
        }

        /// Random trees of forks, bursts of appends that consolidate (each consolidation folding
        /// the one before), single appends and summaries written by hand, with anchors or
        /// none: on every branch, the summaries read from the rows' records of their view are
        /// those read from the rows as written before memctl recorded them — some of them, then
        /// all (every row read, the anchor's after them). A root consolidated many times, and a
        /// child forked from it that consolidates and summarises by hand, are read at least.
        #[test]
        fn summaries_read_from_the_newest_row_are_those_of_every_row(
            anchor_every in prop::sample::select(vec![0i64, 1, 3]),
            ops in prop::collection::vec((0u8..4, 0usize..16), 1..40),
            parity in 0i64..2,
        ) {
            let s = Store::scratch_anchoring(anchor_every);
            let append = |branch: &str, i: usize, pick: usize| {
                let kind = if pick % 2 == 0 { "note" } else { "plan" };
                append(&s, branch, kind, &format!("{branch} event {i}"), &[]);
            };
            let burst = |branch: &str, pick: usize| (0..12).for_each(|i| append(branch, 100 * pick + i, pick + i));
            s.create_root("b0").unwrap();
            let mut branches = vec!["b0".to_string()];
            for (i, (op, pick)) in ops.into_iter().enumerate() {
                let branch = branches[pick % branches.len()].clone();
                match op {
                    0 => fork_child(&s, &mut branches, &branch),
                    1 => burst(&branch, i),
                    2 => {
                        let events = s.view(&branch).unwrap().events;
                        if let Some(event) = events.get(pick % events.len().max(1)) {
                            s.recall_summarize(&branch, &event.kind, &format!("by hand {i}"), &[event.id]).unwrap();
                        }
                    }
                    _ => append(&branch, i, pick),
                }
            }
            s.create_root("long").unwrap();
            (0..5).for_each(|i| burst("long", i));
            s.fork("long", Some("long1")).unwrap();
            (5..8).for_each(|i| burst("long1", i));
            let event = s.view("long1").unwrap().events[0].clone();
            s.recall_summarize("long1", "note", "by hand", &[event.id]).unwrap();
            branches.extend(["long".to_string(), "long1".to_string()]);
            let read = |branch: &str| summaries(&s, &s.path(branch).unwrap()).unwrap();
            let recorded: Vec<Vec<Summary>> = branches.iter().map(|b| read(b)).collect();
            prop_assert!(recorded.last().unwrap().len() >= 2, "long1 keeps its summaries");
            for unrecorded in [format!("seq % 2 = {parity}"), "1 = 1".to_string()] {
                s.conn.execute(&format!("UPDATE inherited_summaries SET view_summary_ids = NULL WHERE {unrecorded}"), params![]).unwrap();
                for (branch, recorded) in branches.iter().zip(&recorded) {
                    prop_assert_eq!(&read(branch), recorded, "{} with rows where {}", branch, unrecorded);
                }
            }
        }
    }

    proptest! {
        // Cheap cases: enough of them to reach the rare forms (a leading zero, an overflow).
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Ids as memctl stores them are read directly, as serde_json reads them.
        #[test]
        fn stored_ids_read_directly(ids in prop::collection::vec(0i64..=i64::MAX, 0..40)) {
            let json = serde_json::to_string(&ids).unwrap();
            prop_assert_eq!(plain_ids(&json), Some(ids));
        }

        /// Whatever the text, the direct reading gives serde_json's ids or gives way to it.
        #[test]
        fn ids_read_directly_are_serde_jsons(
            json in prop_oneof!["[\\[\\]0-9, +\\-.eE]{0,14}", "\\[(0|[0-9]{1,3}|[0-9]{19,20})?(,[0-9 -]{0,3})*\\]"],
        ) {
            let parsed: Result<Vec<i64>, _> = serde_json::from_str(&json);
            if let Some(ids) = plain_ids(&json) {
                prop_assert_eq!(Some(ids), parsed.ok());
            }
            prop_assert_eq!(parse_ids(&json), serde_json::from_str::<Vec<i64>>(&json).unwrap_or_default());
        }
    }
}
