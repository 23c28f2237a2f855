//! THE view rule in SQL. [`visible_through`] is the one predicate that says a layer row is in a
//! branch's view; every query of the view, and every sub-query that asks "is there a visible
//! row that …", is built from it over `temp.view_path` (path.rs).

use crate::db::Backend;
use crate::schema::{event_rid, later_version};

/// Row `t` of a layer table is visible through path entry `p`: it belongs to that path branch
/// and is not newer than the branch's cutoff (SPEC §2).
pub(super) fn visible_through(p: &str, t: &str) -> String {
    format!("{t}.branch = {p}.bid AND {t}.seq <= {p}.cutoff")
}

/// The visible rows of a layer table, as `t` with their path entry `p`. SQLite reads them by one
/// range scan per path branch; PostgreSQL plans the join its own way, which for a read of every
/// row of a view may hash the table (a reader of few of them: [`visible_per_branch`]).
pub(super) fn visible(table: &str) -> String {
    path_join(table, "", &visible_past(table, None))
}

/// Row `t` of `table` is visible through path entry `p` and has a seq above `after` (an SQL
/// expression; None: any). `events` are stored in branch order (schema.rs): for them the rule
/// reads as a rowid range instead of an index range, which starts past `after` (the rowid holds
/// the seq).
fn visible_past(table: &str, after: Option<&str>) -> String {
    match (table, after) {
        ("events", _) => {
            format!("t.rid BETWEEN {}", event_rid::range_after("p.bid", after.unwrap_or("-1"), "p.cutoff"))
        }
        (_, None) => visible_through("p", "t"),
        (_, Some(after)) => format!("{} AND t.seq > {after}", visible_through("p", "t")),
    }
}

/// The path `p` joined to `table` as `t` on `on`, read through `index` (a hint, or empty), in
/// the order SQLite's CROSS JOIN fixes: the path outside, one range of the table per branch.
fn path_join(table: &str, index: &str, on: &str) -> String {
    format!("temp.view_path p CROSS JOIN {table} t {index} ON {on}")
}

/// [`visible`] for the rows of `table` with a seq above `after` (see [`visible_past`]) that pass
/// `filter` (on `t` and `p`), read by `index` (a hint SQLite follows, or empty), and on
/// PostgreSQL at most the newest `per_branch` (an SQL expression; None: all) of each path
/// branch: enough for a window of that many rows. With `per_branch`, every condition on `t`
/// must be in `filter`, and the statement must take the rows [`NEWEST_FIRST`] (for events
/// [`EVENTS_NEWEST_FIRST`]) with a limit of at most `per_branch`: PostgreSQL keeps no more of
/// a branch.
///
/// SQLite reads each path branch by a range of the index in the nested loop its CROSS JOIN
/// fixes, and a window stops at its last row. PostgreSQL reads each by a lateral subquery
/// instead: joined to the path, its planner would scan and hash the whole table. It takes the
/// path for a hundred rows of unknown values, cannot tell how few rows a filter such as
/// `record_id != seq` keeps, and cannot stop a sort by path position early, so a window of 8
/// records read all 10,000 of a run (23 ms) where the lateral form reads 8 per branch.
pub(super) fn visible_per_branch(
    backend: Backend,
    table: &str,
    index: &str,
    after: Option<&str>,
    filter: &str,
    per_branch: Option<&str>,
) -> String {
    let on = format!("{} AND {filter}", visible_past(table, after));
    per_branch_join(backend, table, index, &on, per_branch)
}

/// The path `p` joined to `table` as `t` on `on`, each path branch read on its own
/// ([`visible_per_branch`]), on PostgreSQL at most its newest `per_branch` rows.
fn per_branch_join(backend: Backend, table: &str, index: &str, on: &str, per_branch: Option<&str>) -> String {
    match backend {
        Backend::Sqlite => path_join(table, index, on),
        Backend::Postgres => {
            // A branch's rows newest first: by rowid for events, as EVENTS_NEWEST_FIRST.
            let order = if table == "events" { "t.rid" } else { "t.seq" };
            // OFFSET 0 keeps the subquery a subquery: merged into the outer query, it would be
            // joined as the table is.
            let newest =
                per_branch.map_or("OFFSET 0".to_string(), |n| format!("ORDER BY {order} DESC LIMIT {n}"));
            format!("temp.view_path p, LATERAL (SELECT * FROM {table} t WHERE {on} {newest}) t")
        }
    }
}

/// The visible events with a rowid above `rid` (an SQL expression, at least -1: all of them)
/// that pass `filter` (on `t`), as `t` with their path entry `p`: one rowid range per path
/// branch, on PostgreSQL too ([`visible_per_branch`]).
pub(super) fn events_past(backend: Backend, rid: &str, filter: &str) -> String {
    let range = event_rid::range_past("p.bid", "p.cutoff", rid);
    per_branch_join(backend, "events", "", &format!("t.rid BETWEEN {range} AND {filter}"), None)
}

/// Archival version `t` is not a delete. Its length is NULL exactly when its text is (schema
/// 13), and the index by branch and seq holds the length: a reader that needs nothing else of a
/// version (`pressure`'s) reads that index alone.
pub(super) const NOT_DELETED: &str = "t.chars IS NOT NULL";

/// Newest first. A branch's rows all have seqs above its fork_seq, so every visible row of a
/// nearer branch is newer than every visible row of a farther one: SQLite reads this order
/// straight off the nested loop, and a window of N rows stops at the nearest ancestors.
pub(super) const NEWEST_FIRST: &str = "ORDER BY p.pos, t.seq DESC";

/// [`NEWEST_FIRST`] for events, read by rowid, which follows seq within a branch.
pub(super) const EVENTS_NEWEST_FIRST: &str = "ORDER BY p.pos, t.rid DESC";

/// Event `t` is not hidden by a visible exclusion. (A plain join: the planner starts from the
/// exclusions of that event, not from the path.)
pub(super) fn not_excluded() -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM inherited_exclusions x JOIN temp.view_path q ON {}
                     WHERE x.event_id = t.seq)",
        visible_through("q", "x")
    )
}

/// The same test as [`not_excluded`] for reads of every event: the view's exclusions are read
/// once into a set, where `not_excluded` probes them per event (cheaper for a window of a few).
pub(super) fn not_excluded_by_set() -> String {
    format!(
        "t.seq NOT IN (SELECT x.event_id FROM temp.view_path q CROSS JOIN inherited_exclusions x ON {})",
        visible_through("q", "x")
    )
}

/// Core row `t` (a table alias, or empty for bare column names) has not run out its TTL at the
/// time bound as `:now`. Expired rows count as never written.
pub(super) fn live_core(t: &str) -> String {
    let t = if t.is_empty() { String::new() } else { format!("{t}.") };
    format!("({t}ttl_s IS NULL OR {t}created_at + {t}ttl_s >= :now)")
}

/// Archival version `t` is its record's newest visible version.
pub(super) fn current_version() -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM archival n JOIN temp.view_path q ON {}
                     WHERE n.record_id = t.record_id AND n.seq > t.seq AND {})",
        visible_through("q", "n"),
        later_version("n")
    )
}

/// Record `t` carries every tag of `filter`, a JSON array that the caller binds as `?1` (None:
/// no filter, `?1` bound NULL): on SQLite by `memctl_has_tags` (schema/tags.rs), on PostgreSQL
/// by its JSON functions. Without a filter the clause leaves the test out, which on PostgreSQL
/// is two JSON scans to plan, but still names `?1`: rusqlite refuses more parameters than a
/// statement names, and PostgreSQL needs the cast to type the NULL.
pub(super) fn has_tags(backend: Backend, filter: Option<&str>) -> String {
    match (filter, backend) {
        (None, _) => "CAST(?1 AS TEXT) IS NULL".to_string(),
        (Some(_), Backend::Sqlite) => "memctl_has_tags(t.tags, ?1)".to_string(),
        (Some(_), Backend::Postgres) => format!(
            "NOT EXISTS (SELECT 1 FROM {} want WHERE want.value NOT IN (SELECT have.value FROM {} have))",
            backend.json_texts("?1"),
            backend.json_texts("t.tags")
        ),
    }
}

/// The rows of a small layer table (core, summaries) that can be visible, as `t`: those of the
/// path down to its nearest anchor, then the anchor's rows, which stand for the rest of the
/// path (see the view's module comment). Parameters: `:last`, the anchor's position, and
/// `:anchor`, its bid.
pub(super) fn anchored(backend: Backend, table: &str, columns: &str) -> String {
    let near = format!(
        "SELECT {columns} FROM {}",
        visible_per_branch(backend, table, "", None, "p.pos <= :last", None)
    );
    with_anchor_rows(&near, table, columns)
}

/// `near`, the rows read of the path down to its nearest anchor, and the anchor's rows of
/// `table` (see [`anchored`]).
fn with_anchor_rows(near: &str, table: &str, columns: &str) -> String {
    format!(
        "{near}
         UNION ALL
         SELECT {columns} FROM anchor_rows a CROSS JOIN {table} t ON t.seq = a.seq WHERE a.branch = :anchor"
    )
}

/// The core rows that can be a key's newest live row, as `t`, with the parameters of
/// [`anchored`] and `:now`: per branch of the path down to its nearest anchor and per key its
/// newest visible row whose TTL has not run out, then the anchor's rows. A branch's keys are
/// walked through the `(branch, key, seq)` index one seek each, and each key's row found by one
/// more, so that a key set a thousand times on a branch costs as much to read as one set once.
/// The walk passes over the keys a branch first wrote after its cutoff (an ancestor's, after
/// the path's fork) inside the seek, an index entry each.
pub(super) fn newest_core_per_key(columns: &str) -> String {
    let near = format!(
        "SELECT {columns} FROM keyed k CROSS JOIN core t ON t.seq = (
             SELECT c.seq FROM core c WHERE {} AND c.key = k.key AND {}
             ORDER BY c.seq DESC LIMIT 1)",
        visible_through("k", "c"),
        live_core("c")
    );
    format!(
        "WITH RECURSIVE keyed(bid, cutoff, key) AS (
             SELECT p.bid, p.cutoff, (SELECT min(c.key) FROM core c WHERE {first})
               FROM temp.view_path p WHERE p.pos <= :last
             UNION ALL
             SELECT k.bid, k.cutoff, (SELECT min(c.key) FROM core c WHERE {next} AND c.key > k.key)
               FROM keyed k WHERE k.key IS NOT NULL)
         {}",
        with_anchor_rows(&near, "core", columns),
        first = visible_through("p", "c"),
        next = visible_through("k", "c"),
    )
}
