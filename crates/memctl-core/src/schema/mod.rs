//! The schema (SPEC §3) as ordered, embedded migrations under `PRAGMA user_version`.
//!
//! Every layer table keys its rows by the database-wide `seq` (the rowid), and is indexed by
//! `(branch, seq)` so the view reads each ancestor with one index range scan. Branches are
//! referenced by an integer `bid`; the caller-facing id and node_uid live only in `branches`.

pub(crate) mod fts;
mod postgres;
pub(crate) mod tags;

pub(crate) use postgres::{fill_archival, words_entry, SCHEMA as POSTGRES_SCHEMA};

use crate::db::Conn;
use crate::error::{Error, Result, Topic};
use crate::query::token_count;
use rusqlite::Connection;

/// Whether opening may create the schema in a new or empty file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Creation {
    Allowed,
    Refused,
}

/// Where an event is stored: `events` is ordered by branch, then seq (`rid = bid << 40 | seq`),
/// so a branch's events are one rowid range and the table needs no `(branch, seq)` index — one
/// page less to write per append. This is the encoding's one definition (the migration that
/// introduced it spells it in its frozen SQL).
pub(crate) mod event_rid {
    use crate::error::{Error, Result};

    /// Bits of a rowid that hold the seq (public for readers of the file that are not memctl,
    /// such as the bench's floors).
    pub const SEQ_BITS: u32 = 40;
    /// The largest seq the encoding can hold; bids stay below 2^23 so a rowid fits an i64.
    const MAX_SEQ: i64 = (1 << SEQ_BITS) - 1;
    const MAX_BID: i64 = (1 << (63 - SEQ_BITS)) - 1;

    /// The rowid of event `seq` of branch `bid`.
    pub(crate) fn of(bid: i64, seq: i64) -> Result<i64> {
        if !(0..=MAX_SEQ).contains(&seq) || !(0..=MAX_BID).contains(&bid) {
            return Err(Error::internal(format!(
                "event seq {seq} of branch {bid} is past what the events table can order (2^40 seqs, 2^23 branches)"
            )));
        }
        Ok(bid << SEQ_BITS | seq)
    }

    /// The branch (bid) and seq of the event whose rowid is `rid`: [`of`] undone.
    pub(crate) fn split(rid: i64) -> (i64, i64) {
        (rid >> SEQ_BITS, rid & MAX_SEQ)
    }

    /// SQL for the rowid of event `seq` of branch `bid`, both SQL expressions.
    pub(crate) fn sql_of(bid: &str, seq: &str) -> String {
        format!("({} + {seq})", first(bid))
    }

    /// SQL `lo AND hi` for `rid BETWEEN …`: the events of branch `bid` with seq ≤ `cutoff`,
    /// both SQL expressions (`cutoff` may exceed the seqs the encoding holds).
    pub(crate) fn range(bid: &str, cutoff: &str) -> String {
        range_after(bid, "-1", cutoff)
    }

    /// [`range`] of the events with a seq above `after` (an SQL expression, at least -1).
    pub(crate) fn range_after(bid: &str, after: &str, cutoff: &str) -> String {
        format!("{} + {after} + 1 AND {}", first(bid), last(bid, cutoff))
    }

    /// [`range`] of the events with a rowid above `rid` (an SQL expression, at least -1): the
    /// rest of a read in rowid order that stopped at `rid`. (CASE, not SQLite's two-argument
    /// `max`, which PostgreSQL spells `GREATEST`.)
    pub(crate) fn range_past(bid: &str, cutoff: &str, rid: &str) -> String {
        format!(
            "CASE WHEN {rid} < {lo} THEN {lo} ELSE {rid} + 1 END AND {}",
            last(bid, cutoff),
            lo = first(bid)
        )
    }

    /// SQL for the rowid of branch `bid`'s event `cutoff`, or of its last if the encoding
    /// holds no such seq.
    fn last(bid: &str, cutoff: &str) -> String {
        format!("{} + CASE WHEN {cutoff} < {MAX_SEQ} THEN {cutoff} ELSE {MAX_SEQ} END", first(bid))
    }

    /// SQL for the first rowid of branch `bid` (typed, as a bound parameter may not be).
    fn first(bid: &str) -> String {
        format!("(CAST({bid} AS BIGINT) << {SEQ_BITS})")
    }

    /// SQL for the bid of the event whose rowid is `rid`, an SQL expression.
    pub(crate) fn bid_of(rid: &str) -> String {
        format!("({rid} >> {SEQ_BITS})")
    }

    /// SQL `lo AND hi`: every event of branch `bid`.
    pub(crate) fn all_of(bid: &str) -> String {
        format!("{lo} AND {lo} + {MAX_SEQ}", lo = first(bid))
    }
}

/// One step of the schema's history, applied in order inside one write transaction.
struct Migration {
    /// Timestamped name, kept in `meta` for people reading the database.
    name: &'static str,
    sql: &'static str,
    /// Statements run only when the SQLite build has FTS5.
    fts_sql: &'static str,
}

/// SQL (a literal, for `concat!`) that fills the step counts of the rows written before they
/// were kept, on both backends; each backend's migration adds the columns in its own types.
macro_rules! step_counts_of_existing_rows {
    () => {
        r#"
UPDATE events SET steps = n.steps
FROM (SELECT rid, sum(CASE WHEN substr(kind, 1, 5) = 'step:' THEN 1 ELSE 0 END)
                  OVER (PARTITION BY branch ORDER BY rid) AS steps
      FROM events) AS n
WHERE events.rid = n.rid AND n.steps > 0;
UPDATE inherited_exclusions SET steps = n.steps
FROM (SELECT x.seq, sum(CASE WHEN e.seq IS NULL THEN 0 ELSE 1 END)
                    OVER (PARTITION BY x.branch ORDER BY x.seq) AS steps
      FROM inherited_exclusions x
      LEFT JOIN (SELECT seq FROM events WHERE substr(kind, 1, 5) = 'step:') AS e ON e.seq = x.event_id) AS n
WHERE inherited_exclusions.seq = n.seq AND n.steps > 0;

-- A child inherits its parent's steps as they were at the fork: what the parent inherited,
-- plus the running counts of its newest rows before the fork (its events found by the rowid
-- encoding of schema::event_rid, frozen here).
WITH RECURSIVE counts(bid, inherited) AS (
    SELECT bid, CAST(0 AS BIGINT) FROM branches WHERE parent IS NULL
    UNION ALL
    SELECT b.bid, c.inherited
        + coalesce((SELECT e.steps FROM events e
                    WHERE e.rid BETWEEN (c.bid << 40) AND (c.bid << 40) + b.fork_seq
                    ORDER BY e.rid DESC LIMIT 1), 0)
        - coalesce((SELECT x.steps FROM inherited_exclusions x
                    WHERE x.branch = c.bid AND x.seq < b.fork_seq
                    ORDER BY x.seq DESC LIMIT 1), 0)
    FROM branches b JOIN counts c ON b.parent = c.bid
)
UPDATE branches SET inherited_steps = counts.inherited
FROM counts WHERE branches.bid = counts.bid AND counts.inherited > 0;
"#
    };
}
pub(crate) use step_counts_of_existing_rows;

const MIGRATIONS: &[Migration] = &[
    Migration {
        name: "20261122_initial",
        sql: r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value ANY NOT NULL
) WITHOUT ROWID, STRICT;

CREATE TABLE branches (
    bid        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    node_uid   TEXT UNIQUE,
    parent     INTEGER REFERENCES branches(bid),
    fork_seq   INTEGER NOT NULL UNIQUE,
    depth      INTEGER NOT NULL,
    created_at REAL NOT NULL,
    meta       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX branches_parent ON branches(parent);

-- value NULL is a tombstone.
CREATE TABLE core (
    seq        INTEGER PRIMARY KEY,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    key        TEXT NOT NULL,
    value      TEXT,
    importance INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 5),
    ttl_s      REAL,
    created_at REAL NOT NULL
);
CREATE INDEX core_branch_seq ON core(branch, seq);
CREATE INDEX core_branch_key_seq ON core(branch, key, seq);

CREATE TABLE events (
    seq        INTEGER PRIMARY KEY,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    kind       TEXT NOT NULL,
    text       TEXT NOT NULL,
    tags       TEXT NOT NULL DEFAULT '[]',
    text_hash  BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX events_branch_seq ON events(branch, seq);
CREATE UNIQUE INDEX events_branch_hash ON events(branch, text_hash);

-- One row per version of a record; record_id is the seq of its first version; text NULL is a
-- tombstone.
CREATE TABLE archival (
    seq        INTEGER PRIMARY KEY,
    record_id  INTEGER NOT NULL,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    text       TEXT,
    tags       TEXT NOT NULL DEFAULT '[]',
    text_hash  BLOB,
    created_at REAL NOT NULL
);
CREATE INDEX archival_branch_seq ON archival(branch, seq);
CREATE INDEX archival_record_seq ON archival(record_id, seq);
CREATE INDEX archival_branch_hash ON archival(branch, text_hash);

CREATE TABLE inherited_exclusions (
    seq        INTEGER PRIMARY KEY,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    event_id   INTEGER NOT NULL REFERENCES events(seq),
    created_at REAL NOT NULL
);
CREATE INDEX inherited_exclusions_branch_seq ON inherited_exclusions(branch, seq);
CREATE INDEX inherited_exclusions_event ON inherited_exclusions(event_id);

CREATE TABLE inherited_summaries (
    seq                  INTEGER PRIMARY KEY,
    branch               INTEGER NOT NULL REFERENCES branches(bid),
    kind                 TEXT NOT NULL,
    summary_text         TEXT NOT NULL,
    summarized_event_ids TEXT NOT NULL,
    -- Earlier summaries this one folds in: the view shows only the newest of a chain.
    replaced_summary_ids TEXT NOT NULL DEFAULT '[]',
    created_at           REAL NOT NULL
);
CREATE INDEX inherited_summaries_branch_seq ON inherited_summaries(branch, seq);

CREATE TABLE ops (
    seq        INTEGER PRIMARY KEY,
    branch     INTEGER REFERENCES branches(bid),
    op         TEXT NOT NULL,
    args       TEXT NOT NULL,
    phase      TEXT,
    actor      TEXT,
    created_at REAL NOT NULL
);

CREATE TABLE llm_cache (
    key        BLOB PRIMARY KEY,
    output     TEXT NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID;

INSERT INTO meta(key, value) VALUES ('next_seq', 1);
PRAGMA application_id = 1296387395;
"#,
        // External content: the index reads text and tags from `archival` by seq. Tags are indexed
        // as their JSON text, whose words are the tags' words, so a rebuild gives the same index.
        // Marks are word characters, as in the keyword fallback (query.rs), so both find the same.
        fts_sql: r#"
CREATE VIRTUAL TABLE archival_fts USING fts5(
    text, tags, content='archival', content_rowid='seq',
    tokenize="unicode61 remove_diacritics 0 categories 'L* N* Co M*'"
);
"#,
    },
    // Running counts that make a view's event count O(1) at any depth (view::event_count).
    // Existing rows are numbered here.
    Migration {
        name: "20261122_view_event_counts",
        sql: r#"
-- How many events the branch's view held from its ancestors when it was forked.
ALTER TABLE branches ADD COLUMN inherited_events INTEGER NOT NULL DEFAULT 0;
-- 1, 2, 3… per branch in seq order: a branch's newest row holds its count.
ALTER TABLE events ADD COLUMN ordinal INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inherited_exclusions ADD COLUMN ordinal INTEGER NOT NULL DEFAULT 0;

UPDATE events SET ordinal = n.ordinal
FROM (SELECT seq, row_number() OVER (PARTITION BY branch ORDER BY seq) AS ordinal FROM events) AS n
WHERE events.seq = n.seq;
UPDATE inherited_exclusions SET ordinal = n.ordinal
FROM (SELECT seq, row_number() OVER (PARTITION BY branch ORDER BY seq) AS ordinal
      FROM inherited_exclusions) AS n
WHERE inherited_exclusions.seq = n.seq;

-- A child inherits its parent's view as it was at the fork: what the parent inherited, plus
-- its own events before the fork, less its own exclusions before the fork.
WITH RECURSIVE counts(bid, inherited) AS (
    SELECT bid, 0 FROM branches WHERE parent IS NULL
    UNION ALL
    SELECT b.bid, c.inherited
        + (SELECT count(*) FROM events e WHERE e.branch = c.bid AND e.seq < b.fork_seq)
        - (SELECT count(*) FROM inherited_exclusions x WHERE x.branch = c.bid AND x.seq < b.fork_seq)
    FROM branches b JOIN counts c ON b.parent = c.bid
)
UPDATE branches SET inherited_events = counts.inherited FROM counts WHERE branches.bid = counts.bid;
"#,
        fts_sql: "",
    },
    // Archival search over a view asks the index only for the path's branches: each row names
    // its branch in a third column (a token such as "17"). The partial index finds the view's
    // updates and deletes, the only versions that can hide a matching one.
    Migration {
        name: "20261123_search_by_branch",
        sql: "CREATE INDEX archival_later_versions ON archival(branch, seq) WHERE record_id != seq;",
        fts_sql: r#"
DROP TABLE IF EXISTS archival_fts;
CREATE VIRTUAL TABLE archival_fts USING fts5(
    text, tags, branch, content='archival', content_rowid='seq',
    tokenize="unicode61 remove_diacritics 0 categories 'L* N* Co M*'"
);
INSERT INTO archival_fts(archival_fts) VALUES ('rebuild');
"#,
    },
    // Anchors keep core and summary resolution off the depth of a branch (view.rs). Branches
    // forked before have none and are read along their whole path, as before.
    Migration {
        name: "20261123_view_anchors",
        sql: r#"
ALTER TABLE branches ADD COLUMN anchored INTEGER NOT NULL DEFAULT 0;
CREATE TABLE anchor_rows (
    branch INTEGER NOT NULL REFERENCES branches(bid),
    seq    INTEGER NOT NULL,
    PRIMARY KEY (branch, seq)
) WITHOUT ROWID;
"#,
        fts_sql: "",
    },
    // Events in branch order: rowid = bid · 2^40 + seq, so a branch's events are one rowid
    // range and the `(branch, seq)` index goes, one page less written per append. Exclusions no
    // longer declare a foreign key to `events(seq)` (it needs a unique index on seq, the page
    // this saves); only visible events are ever excluded, which the engine checks.
    Migration {
        name: "20261123_events_in_branch_order",
        sql: r#"
CREATE TABLE inherited_exclusions_new (
    seq        INTEGER PRIMARY KEY,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    event_id   INTEGER NOT NULL,
    created_at REAL NOT NULL,
    ordinal    INTEGER NOT NULL DEFAULT 0
);
INSERT INTO inherited_exclusions_new(seq, branch, event_id, created_at, ordinal)
    SELECT seq, branch, event_id, created_at, ordinal FROM inherited_exclusions;
DROP TABLE inherited_exclusions;
ALTER TABLE inherited_exclusions_new RENAME TO inherited_exclusions;
CREATE INDEX inherited_exclusions_branch_seq ON inherited_exclusions(branch, seq);
CREATE INDEX inherited_exclusions_event ON inherited_exclusions(event_id);

CREATE TABLE events_new (
    rid        INTEGER PRIMARY KEY,
    seq        INTEGER NOT NULL,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    kind       TEXT NOT NULL,
    text       TEXT NOT NULL,
    tags       TEXT NOT NULL DEFAULT '[]',
    text_hash  BLOB NOT NULL,
    created_at REAL NOT NULL,
    ordinal    INTEGER NOT NULL DEFAULT 0
);
-- The encoding of schema::event_rid, frozen here as this migration first wrote it.
INSERT INTO events_new(rid, seq, branch, kind, text, tags, text_hash, created_at, ordinal)
    SELECT (branch << 40) + seq, seq, branch, kind, text, tags, text_hash, created_at, ordinal FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_branch_hash ON events(branch, text_hash);
"#,
        fts_sql: "",
    },
    // The life of a search: a status per branch, promoted rows' origins, and branches collected
    // by gc. A collected branch keeps its row (its journal rows still name it, and its bid is
    // never handed out again) and loses every other row.
    Migration {
        name: "20261125_branch_life",
        sql: r#"
ALTER TABLE branches ADD COLUMN status TEXT NOT NULL DEFAULT 'alive'
    CHECK (status IN ('alive', 'dead', 'best', 'pruned'));
ALTER TABLE branches ADD COLUMN status_note TEXT;
-- When gc deleted the branch's rows; NULL for a branch in use.
ALTER TABLE branches ADD COLUMN collected_at REAL;

-- A row promote wrote (its seq), and where it came from: the branch promoted from and the seq
-- of the row in that branch's view.
CREATE TABLE promoted (
    seq        INTEGER PRIMARY KEY,
    branch     INTEGER NOT NULL REFERENCES branches(bid),
    src_branch INTEGER NOT NULL REFERENCES branches(bid),
    src_seq    INTEGER NOT NULL,
    note       TEXT
);
CREATE INDEX promoted_branch ON promoted(branch);
"#,
        fts_sql: "",
    },
    // Conversation steps: recall events of kind `step:<type>` keep their typed payload here.
    Migration {
        name: "20261125_conversation_steps",
        sql: "ALTER TABLE events ADD COLUMN payload TEXT;",
        fts_sql: "",
    },
    // A record's length in words (text and tags, split as the index splits them), which bm25
    // needs of every match: a search reads it from a narrow index by seq, where asking FTS5 ran
    // a statement per match, and the index stops keeping sizes (`columnsize=0`). Existing
    // records are counted here; the index is filled after the migrations (`migrate`).
    Migration {
        name: "20261125_archival_tokens",
        sql: r#"
ALTER TABLE archival ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
UPDATE archival SET tokens = memctl_tokens(text, tags) WHERE text IS NOT NULL;
CREATE INDEX archival_seq_tokens ON archival(seq, tokens);
"#,
        fts_sql: r#"
DROP TABLE IF EXISTS archival_fts;
CREATE VIRTUAL TABLE archival_fts USING fts5(
    text, tags, branch, content='archival', content_rowid='seq', columnsize=0,
    tokenize="unicode61 remove_diacritics 0 categories 'L* N* Co M*'"
);
"#,
    },
    // A search that walks every match of its words (view/fts_match.rs) reads each match's
    // branch with its length, to keep the view's: the narrow index by seq carries both.
    Migration {
        name: "20261126_archival_seq_branch_tokens",
        sql: r#"
DROP INDEX archival_seq_tokens;
CREATE INDEX archival_seq_branch_tokens ON archival(seq, branch, tokens);
"#,
        fts_sql: "",
    },
    // Each summary records the summaries its branch's view kept once it was written, so that a
    // view's summaries are read from its newest summary row, not from every row a long branch's
    // consolidations left (view::summaries). Rows written before have none and are read as before.
    Migration {
        name: "20261126_summary_views",
        sql: "ALTER TABLE inherited_summaries ADD COLUMN view_summary_ids TEXT;",
        fts_sql: "",
    },
    // Conversation steps among a timeline's other events: a conversation's read (view::steps)
    // finds them in this partial index, one range per path branch, instead of reading every
    // event of the path. Its condition is [`STEP_EVENT`], which the read holds in its WHERE.
    Migration {
        name: "20261127_step_events",
        sql: "CREATE INDEX events_steps ON events(rid) WHERE substr(kind, 1, 5) = 'step:';",
        fts_sql: "",
    },
    // Running counts of conversation steps beside the counts of events, so that a view's steps
    // are counted in constant time too (view::event_counts): auto-consolidation, which leaves
    // steps alone, checks the events besides them on every append.
    Migration {
        name: "20261127_view_step_counts",
        sql: concat!(
            "
-- How many steps the branch's view held from its ancestors when it was forked.
ALTER TABLE branches ADD COLUMN inherited_steps INTEGER NOT NULL DEFAULT 0;
-- Per branch in seq order, how many of its rows so far are (hide) steps: its newest row holds
-- its count, as `ordinal` does of all its rows.
ALTER TABLE events ADD COLUMN steps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inherited_exclusions ADD COLUMN steps INTEGER NOT NULL DEFAULT 0;
",
            step_counts_of_existing_rows!()
        ),
        fts_sql: "",
    },
    // Each version's length in characters (NULL for a delete, as its text), in the index by
    // branch and seq: `pressure` measures the view's current records by their characters, which
    // it counted in every text it read (3.6M characters at depth 995 in j's database); now the
    // read touches no text, only that index (view::current_text_chars). Existing versions are
    // counted here, as Rust counts them.
    Migration {
        name: "20261127_archival_chars",
        sql: r#"
ALTER TABLE archival ADD COLUMN chars INTEGER;
UPDATE archival SET chars = memctl_chars(text) WHERE text IS NOT NULL;
DROP INDEX archival_branch_seq;
CREATE INDEX archival_branch_seq_chars ON archival(branch, seq, chars);
"#,
        fts_sql: "",
    },
    // The FTS5 index takes new versions in batches (schema/fts.rs): it notes up to which seq it
    // holds them. Every write had indexed its version, so an existing index holds them all. The
    // key is written whether or not this SQLite has FTS5, so that a database migrated by a
    // build without it has the key when one with it opens the database.
    Migration {
        name: "20261128_fts_batches",
        sql: "INSERT INTO meta(key, value) VALUES ('fts_indexed_until', (SELECT coalesce(max(seq), 0) FROM archival));",
        fts_sql: "",
    },
    // A search reads each match's branch and length by its seq (view/fts_match.rs). The index
    // `(seq, branch, tokens)` compared whole records at each step of each seek; a table keyed
    // by seq compares integers (a search's instructions: -16%). Triggers keep it one row per
    // version, as an index is kept: every statement that writes, changes or deletes a version,
    // gc's and an import's too, does the same to its row in the same statement.
    Migration {
        name: "20261128_archival_lengths",
        sql: r#"
CREATE TABLE archival_lengths (
    seq    INTEGER PRIMARY KEY,
    branch INTEGER NOT NULL,
    tokens INTEGER NOT NULL
);
INSERT INTO archival_lengths(seq, branch, tokens) SELECT seq, branch, tokens FROM archival;
CREATE TRIGGER archival_lengths_insert AFTER INSERT ON archival BEGIN
    INSERT INTO archival_lengths(seq, branch, tokens) VALUES (new.seq, new.branch, new.tokens);
END;
CREATE TRIGGER archival_lengths_delete AFTER DELETE ON archival BEGIN
    DELETE FROM archival_lengths WHERE seq = old.seq;
END;
CREATE TRIGGER archival_lengths_update AFTER UPDATE OF seq, branch, tokens ON archival BEGIN
    DELETE FROM archival_lengths WHERE seq = old.seq;
    INSERT INTO archival_lengths(seq, branch, tokens) VALUES (new.seq, new.branch, new.tokens);
END;
DROP INDEX archival_seq_branch_tokens;
"#,
        fts_sql: "",
    },
    // `archival_lengths` is read only for the FTS5 index's matches, so it need hold only the
    // versions the index holds. It is written with the index's batches (schema/fts.rs) instead
    // of by a trigger at every write, a b-tree page less in each write's commit. A version is
    // never updated (a new version is a new row), so only the delete trigger is kept. Dropped:
    // the rows of the versions past the index's end, which its next batch writes, and of the
    // deletes (`chars` is NULL for them alone since schema 13; read from the narrow index).
    Migration {
        name: "20261128_lengths_with_index",
        sql: r#"
DROP TRIGGER archival_lengths_insert;
DROP TRIGGER archival_lengths_update;
DELETE FROM archival_lengths
WHERE seq > (SELECT value FROM meta WHERE key = 'fts_indexed_until')
   OR seq IN (SELECT seq FROM archival WHERE chars IS NULL);
"#,
        fts_sql: "",
    },
    // The index of versions by record served "is there a newer version of this record?" and
    // "the versions of record r". A newer version is never a record's first, and a record's
    // first is the row whose seq is its id: an index of the later versions alone serves both,
    // and a new record, most archival writes, writes no entry to it (a b-tree page less in its
    // commit).
    Migration {
        name: "20261128_record_versions",
        sql: r#"
DROP INDEX archival_record_seq;
CREATE INDEX archival_record_versions ON archival(record_id, seq) WHERE record_id != seq;
"#,
        fts_sql: "",
    },
];

/// SQL: event `kind` is a conversation step's (`step:<type>`), the condition of the partial index
/// `events_steps`. SQLite and PostgreSQL use a partial index only for a query whose WHERE holds
/// its condition, so the steps' read holds this one. `kind` is unqualified: a statement that
/// names it has one table with a `kind` column (the steps' reads join `events` to the path and
/// the exclusions, which have none).
pub(crate) const STEP_EVENT: &str = "substr(kind, 1, 5) = 'step:'";

/// SQL: archival version `t` (a table alias) is not its record's first, whose seq is the
/// record's id: the condition of the partial indexes `archival_later_versions` and
/// `archival_record_versions`, which only a query whose WHERE holds it can use.
pub(crate) fn later_version(t: &str) -> String {
    format!("{t}.record_id != {t}.seq")
}

/// SQL: archival version `t` is a version of record `id` (an SQL expression): the first one
/// by its seq, a later one through `archival_record_versions`, which holds no first version (a
/// new record writes no entry to it). Both backends read the two arms by their indexes. The
/// first arm does not name `record_id = id`: PostgreSQL would take a condition common to both
/// arms out of the OR and join on it by a scan of the table.
pub(crate) fn version_of(t: &str, id: &str) -> String {
    format!(
        "(({t}.seq = {id} AND {t}.record_id = {t}.seq) OR ({t}.record_id = {id} AND {}))",
        later_version(t)
    )
}

/// The page size of new databases. A commit writes whole pages to the WAL (an append: three), and
/// the disk writes them back at each checkpoint; 2 KiB pages halve those bytes against SQLite's
/// 4 KiB (+20-25% appends, +15% on the 1,000-branch tree, +30% archival writes, measured), at the
/// cost of a b-tree level more here and there on reads. Existing databases keep theirs.
pub const PAGE_SIZE: i64 = 2048;

/// The migration that (re)creates `archival_fts` as it is now.
const FTS_CREATED: i64 = 8;

/// FTS5 writes index leaves of 4,050 bytes by default, sized for 4 KiB pages; on smaller pages
/// each would spill into overflow pages. Its leaves are made to fit the file's pages.
fn fit_fts_leaves(conn: &Connection) -> Result<()> {
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if page_size < 4096 {
        conn.execute("INSERT INTO archival_fts(archival_fts, rank) VALUES ('pgsz', ?1)", [page_size - 64])?;
    }
    Ok(())
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// `PRAGMA application_id` of memctl databases ("MEMC"): with `user_version`, it is read from
/// the file header alone, so an up-to-date database is recognised without touching the catalogue.
pub const APPLICATION_ID: i64 = 0x4D45_4D43;

/// Brings the database to [`SCHEMA_VERSION`] (PostgreSQL: its own schema version), refusing
/// databases it must not touch.
pub(crate) fn prepare(conn: &Conn, creation: Creation) -> Result<()> {
    match conn.sqlite() {
        Some(sqlite) => prepare_sqlite(sqlite, creation),
        None => postgres::prepare(conn, creation),
    }
}

/// [`prepare`] for an SQLite file. On an up-to-date database this costs one read of two
/// header pragmas.
fn prepare_sqlite(conn: &Connection, creation: Creation) -> Result<()> {
    let (application_id, version) = header(conn)?;
    if version > SCHEMA_VERSION {
        return Err(newer_error(version));
    }
    if version == 0 && creation == Creation::Refused {
        let (_, tables) = version_and_tables(conn)?;
        if tables > 0 {
            return Err(not_memctl(conn));
        }
        return Err(
            Error::incompatible("empty file, not a memctl database yet").with_topic(Topic::NotMemctlDatabase)
        );
    }
    if version > 0 && application_id != APPLICATION_ID {
        return Err(not_memctl(conn));
    }
    if version < SCHEMA_VERSION {
        migrate(conn)?;
    }
    Ok(())
}

fn header(conn: &Connection) -> Result<(i64, i64)> {
    conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id),
                (SELECT user_version FROM pragma_user_version)",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .map_err(unreadable)
}

/// Whether the database has the FTS5 index (absent when SQLite was built without FTS5, and on
/// PostgreSQL).
pub(crate) fn has_fts_table(conn: &Conn) -> Result<bool> {
    let Some(conn) = conn.sqlite() else { return Ok(false) };
    Ok(conn
        .prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'archival_fts'")?
        .exists([])?)
}

/// The error for an SQLite database memctl did not create: a Python store's (its `core_kv` and
/// `branches` tables) is one to import, any other one to leave alone.
fn not_memctl(conn: &Connection) -> Error {
    let python_store = conn
        .query_row(
            "SELECT count(*) = 2 FROM sqlite_master WHERE type = 'table' AND name IN ('core_kv', 'branches')",
            [],
            |r| r.get::<_, bool>(0),
        )
        .unwrap_or(false);
    match python_store {
        true => Error::incompatible("a database of the Python memory store, not a memctl one")
            .with_hint("import it into a new memctl database: memctl --db NEW.sqlite import legacy FILE"),
        false => Error::incompatible("an SQLite database, but not a memctl one")
            .with_hint("memctl opens only databases it created")
            .with_topic(Topic::NotMemctlDatabase),
    }
}

/// A first read that failed: the file is no SQLite database, or damaged; unless the failure is
/// the file's or the lock's (a directory where SQLite cannot make its -wal and -shm files).
fn unreadable(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        None | Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            Error::incompatible(format!("unreadable: {}", crate::error::sqlite_reason(&e)))
                .with_hint("the file is not an SQLite database, or is damaged; memctl cannot use it")
        }
        Some(_) => {
            let message = format!("unreadable: {}", crate::error::sqlite_reason(&e));
            Error::from(e).with_message(message)
        }
    }
}

fn newer_error(version: i64) -> Error {
    Error::incompatible(format!(
        "the database has schema version {version}, newer than this memctl understands ({SCHEMA_VERSION})"
    ))
    .with_hint("upgrade memctl; the database was left untouched")
}

/// `(user_version, tables)` read together, so a migration committed by another process in
/// between cannot make a fresh memctl database look like a foreign one.
fn version_and_tables(conn: &Connection) -> Result<(i64, i64)> {
    Ok(conn.query_row(
        "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

fn migrate(conn: &Connection) -> Result<()> {
    let (version, tables) = version_and_tables(conn)?;
    if version == 0 {
        if tables > 0 {
            return Err(not_memctl(conn));
        }
        // Page size, WAL and incremental vacuum (`gc --vacuum`) are properties of the file; set
        // once, before the first write.
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    let fts5 = fts5_available(conn)?;
    register_counts(conn)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let applied = (|| {
        // Another process may have migrated while this one waited for the lock.
        let (current, tables) = version_and_tables(conn)?;
        if current > SCHEMA_VERSION {
            return Err(newer_error(current));
        }
        if current == 0 && tables > 0 {
            return Err(not_memctl(conn));
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            conn.execute_batch(migration.sql)?;
            if fts5 {
                conn.execute_batch(migration.fts_sql)?;
            }
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('migration:' || ?1, ?2)",
                rusqlite::params![(index + 1) as i64, migration.name],
            )?;
            conn.pragma_update(None, "user_version", (index + 1) as i64)?;
        }
        if fts5 && current < FTS_CREATED {
            // Leaves sized before the index is filled, so the filled index has them too. Only
            // versions with text are indexed, as writes index them ('rebuild' would index
            // deletes too, entries gc never removes).
            fit_fts_leaves(conn)?;
            fts::index_all(conn)?;
        }
        Ok(())
    })();
    match applied {
        Ok(()) => conn.execute_batch("COMMIT").map_err(Error::from),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// A table of a run, as `migrate` copies it.
pub(crate) struct RunTable {
    pub name: &'static str,
    /// Every column, in the order copied.
    pub columns: &'static [&'static str],
    /// The leading columns that are its primary key, read in their order.
    pub key: usize,
}

/// The tables a run is made of (the same on both backends), each before the tables whose rows
/// name its rows. `meta` (counters), the FTS5 index and `archival_lengths` are not rows of a
/// run: the copy sets the first and rebuilds the other two (schema/fts.rs).
pub(crate) const RUN_TABLES: &[RunTable] = &[
    RunTable {
        name: "branches",
        columns: &[
            "bid",
            "id",
            "node_uid",
            "parent",
            "fork_seq",
            "depth",
            "created_at",
            "meta",
            "inherited_events",
            "anchored",
            "status",
            "status_note",
            "collected_at",
            "inherited_steps",
        ],
        key: 1,
    },
    RunTable {
        name: "core",
        columns: &["seq", "branch", "key", "value", "importance", "ttl_s", "created_at"],
        key: 1,
    },
    RunTable {
        name: "events",
        columns: &[
            "rid",
            "seq",
            "branch",
            "kind",
            "text",
            "tags",
            "text_hash",
            "created_at",
            "ordinal",
            "payload",
            "steps",
        ],
        key: 1,
    },
    RunTable {
        name: "archival",
        columns: &[
            "seq",
            "record_id",
            "branch",
            "text",
            "tags",
            "text_hash",
            "created_at",
            "tokens",
            "chars",
        ],
        key: 1,
    },
    RunTable {
        name: "inherited_exclusions",
        columns: &["seq", "branch", "event_id", "created_at", "ordinal", "steps"],
        key: 1,
    },
    RunTable {
        name: "inherited_summaries",
        columns: &[
            "seq",
            "branch",
            "kind",
            "summary_text",
            "summarized_event_ids",
            "replaced_summary_ids",
            "created_at",
            "view_summary_ids",
        ],
        key: 1,
    },
    RunTable { name: "anchor_rows", columns: &["branch", "seq"], key: 2 },
    RunTable { name: "promoted", columns: &["seq", "branch", "src_branch", "src_seq", "note"], key: 1 },
    RunTable {
        name: "ops",
        columns: &["seq", "branch", "op", "args", "phase", "actor", "created_at"],
        key: 1,
    },
    RunTable { name: "llm_cache", columns: &["key", "output", "created_at"], key: 1 },
];

/// The functions the migrations that count existing records call: `memctl_tokens(text, tags)`,
/// a record's length in words as `archival.tokens` holds it (NULL text, a delete: 0), and
/// `memctl_chars(text)`, its length in characters as `archival.chars` holds it (SQLite's
/// `length()` stops at a NUL character; Rust does not).
fn register_counts(conn: &Connection) -> Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("memctl_tokens", 2, flags, |ctx| {
        let (text, tags): (Option<String>, String) = (ctx.get(0)?, ctx.get(1)?);
        Ok(text.map_or(0, |text| i64::from(token_count(&[&text, &tags]))))
    })?;
    conn.create_scalar_function("memctl_chars", 1, flags, |ctx| {
        let text: String = ctx.get(0)?;
        Ok(char_count(&text))
    })?;
    Ok(())
}

/// A version's length as `archival.chars` holds it.
pub(crate) fn char_count(text: &str) -> i64 {
    text.chars().count() as i64
}

/// Whether this SQLite build has FTS5 compiled in.
pub(crate) fn fts5_available(conn: &Connection) -> Result<bool> {
    Ok(conn.query_row("SELECT sqlite_compileoption_used('ENABLE_FTS5')", [], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The partial index of steps has the condition that the steps' read names.
    #[test]
    fn the_steps_index_has_the_reads_condition() {
        let index = format!("CREATE INDEX events_steps ON events(rid) WHERE {STEP_EVENT};");
        assert!(MIGRATIONS.iter().any(|m| m.sql == index));
    }

    /// An event's rowid gives back the branch and seq it was made of, at the encoding's ends,
    /// its SQL forms read the same, and what the encoding cannot hold is refused.
    #[test]
    fn event_rids_split_into_branch_and_seq() {
        let conn = Connection::open_in_memory().unwrap();
        let max_seq = (1 << 40) - 1;
        for (bid, seq) in
            [(0, 0), (1, 1), (7, 123_456), ((1 << 23) - 1, max_seq), (1, max_seq), ((1 << 23) - 1, 0)]
        {
            let rid = event_rid::of(bid, seq).unwrap();
            assert_eq!(event_rid::split(rid), (bid, seq));
            let sql = format!("SELECT {}", event_rid::sql_of("?1", "?2"));
            assert_eq!(conn.query_row(&sql, [bid, seq], |r| r.get::<_, i64>(0)).unwrap(), rid);
            let sql = format!("SELECT {}", event_rid::bid_of("?1"));
            assert_eq!(conn.query_row(&sql, [rid], |r| r.get::<_, i64>(0)).unwrap(), bid);
        }
        for (bid, seq) in [(1 << 23, 0), (0, 1 << 40), (-1, 0), (0, -1)] {
            assert!(event_rid::of(bid, seq).is_err(), "{bid} {seq}");
        }
    }

    /// `migrate` copies every column: RUN_TABLES lists each table's columns as the schema has
    /// them (a column added by a migration must be added there too).
    #[test]
    fn run_tables_list_every_column() {
        let conn = Connection::open_in_memory().unwrap();
        prepare_sqlite(&conn, Creation::Allowed).unwrap();
        for table in RUN_TABLES {
            let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid").unwrap();
            let columns: Vec<String> =
                stmt.query_map([table.name], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap();
            let mut listed: Vec<&str> = table.columns.to_vec();
            let mut found: Vec<&str> = columns.iter().map(String::as_str).collect();
            listed.sort_unstable();
            found.sort_unstable();
            assert_eq!(listed, found, "columns of {}", table.name);
        }
        // Not rows of a run (see RUN_TABLES): the counters, the FTS5 index with its lengths, and
        // SQLite's own.
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'archival_fts%'
                 AND name NOT IN ('meta', 'sqlite_sequence', 'archival_lengths')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables as usize, RUN_TABLES.len(), "every table of a run is listed");
    }
}
