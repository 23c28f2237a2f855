//! Model-based property test of the view (SPEC §2, §4.1-§4.4).
//!
//! Random sequences of branch, core, recall and archival operations (and clock moves, so TTLs
//! run out) are applied both to the engine and to a deliberately naive in-memory model written
//! from SPEC §2: every branch keeps its parent, its fork point and its own rows; the view walks
//! the path and takes, from the branch itself, every row, and from each ancestor the rows written
//! no later than the fork point of the path's branch below it. The model numbers rows with its own
//! counter ("tick"); the ids the engine hands out (event ids, record ids, version seqs, …) are only
//! learnt from the engine's answers and used as labels, and the only thing assumed about them is
//! that they strictly increase in the order operations run (which is checked).
//!
//! After every operation the engine's view of every branch is compared with the model's, and the
//! model predicts which operations fail and with which `ErrorKind`.
//!
//! This is also the equivalence check of the view's derived implementations (see the engine's
//! view module): the constant-time event count (`pressure`) must equal the model view's events,
//! and `pressure`'s count and characters of the archival records (measured without building
//! them) the model view's, after every operation; at the end of each sequence archival search
//! runs on every branch through FTS5 (its visibility callback) and through the keyword fallback
//! (`search.fts = "off"`, a second handle on the same file): both must return exactly the
//! model's visible records that match a query word, in the same order with the same scores. The
//! databases are files on disk, as in production.

use crate::pg_cluster::Cluster;
use memctl_core::{
    BranchStatus, Clock, Config, CoreWrite, ErrorKind, Event, FtsMode, GcRequest, Reach, Record, Search,
    Status, Store, Subject, Verdict, View, Why,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;

const T0: i64 = 1_700_000_000;

// Small alphabets, so that duplicates and overrides happen often. No word here may trigger
// redaction (SPEC §5).
const KEYS: [&str; 3] = ["goal", "plan", "note"];
const VALUES: [&str; 3] = ["one", "two", "three"];
const KINDS: [&str; 2] = ["obs", "tool"];
const TEXTS: [&str; 3] = ["alpha", "beta", "gamma"];
const RECAPS: [&str; 2] = ["recap one", "recap two"];
const DOCS: [&str; 3] = ["mpi tuning", "gpu kernel", "cache notes"];
const TAGS: [&str; 3] = ["A", "B", "C"];

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// An index into a list known at run time (taken modulo its length), so that shrinking an
/// earlier operation away never makes a later one meaningless.
#[derive(Clone, Copy, Debug)]
struct Pick(u8);

impl Pick {
    fn of(self, len: usize) -> Option<usize> {
        (len > 0).then(|| self.0 as usize % len)
    }
}

#[derive(Clone, Copy, Debug)]
enum BranchRef {
    /// One of the branches created so far.
    Known(Pick),
    /// A branch that never exists.
    Ghost,
}

/// How an operation names an event or an archival record.
#[derive(Clone, Copy, Debug)]
enum IdRef {
    /// One of those in the branch's view according to the model.
    Visible(Pick),
    /// One of all events (or records) ever created, in any branch.
    Known(Pick),
    /// Any seq the engine ever reported (fork points, core seqs, versions, summaries, …).
    AnySeq(Pick),
}

#[derive(Clone, Debug)]
enum Change {
    Text(&'static str),
    Tags(Vec<&'static str>),
    Both(&'static str, Vec<&'static str>),
    Neither,
}

#[derive(Clone, Debug)]
enum Op {
    /// `None`: a new root; `Some`: `create_root` again with an existing id.
    CreateRoot(Option<Pick>),
    /// Forks a new id under a branch.
    Fork(BranchRef),
    /// Forks an existing id again: under its real parent (`None`) or under the given branch.
    Refork {
        child: Pick,
        parent: Option<BranchRef>,
    },
    CoreSet {
        b: BranchRef,
        key: &'static str,
        value: &'static str,
        importance: u8,
        ttl: Option<u8>,
    },
    CoreDelete {
        b: BranchRef,
        keys: Vec<&'static str>,
    },
    Append {
        b: BranchRef,
        kind: &'static str,
        text: &'static str,
        tags: Vec<&'static str>,
    },
    /// Appends again the kind, text and tags of an event (a duplicate if the branch owns it).
    Reappend {
        b: BranchRef,
        event: IdRef,
    },
    Exclude {
        b: BranchRef,
        ids: Vec<IdRef>,
    },
    Summarize {
        b: BranchRef,
        kind: &'static str,
        text: &'static str,
        ids: Vec<IdRef>,
    },
    ArchivalAdd {
        b: BranchRef,
        text: &'static str,
        tags: Vec<&'static str>,
    },
    /// Adds again the text and tags of a record.
    Readd {
        b: BranchRef,
        record: IdRef,
    },
    ArchivalUpdate {
        b: BranchRef,
        record: IdRef,
        change: Change,
    },
    ArchivalDelete {
        b: BranchRef,
        record: IdRef,
    },
    /// Moves the clock forward by this many seconds.
    Advance(u8),
    Mark {
        b: BranchRef,
        status: BranchStatus,
        subtree: bool,
    },
    /// `None`: the branches marked dead or pruned; `Some`: one branch, with or without its subtree.
    Gc {
        target: Option<(BranchRef, bool)>,
        dry_run: bool,
    },
}

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

trait Ticked {
    fn tick(&self) -> u64;
}

#[derive(Clone, Debug)]
struct CoreRow {
    tick: u64,
    key: String,
    /// None: a tombstone.
    value: Option<String>,
    importance: u8,
    ttl: Option<i64>,
    written_at: i64,
    /// The engine's seq for it (not reported for tombstones, which are never visible).
    seq: Option<i64>,
}

#[derive(Clone, Debug)]
struct EventRow {
    tick: u64,
    id: i64,
    kind: String,
    text: String,
    tags: Vec<String>,
}

#[derive(Clone, Debug)]
struct ExclusionRow {
    tick: u64,
    event: i64,
}

#[derive(Clone, Debug)]
struct SummaryRow {
    tick: u64,
    id: i64,
    kind: String,
    text: String,
    event_ids: Vec<i64>,
}

#[derive(Clone, Debug)]
struct ArchivalRow {
    tick: u64,
    record: i64,
    seq: i64,
    /// None: a tombstone.
    text: Option<String>,
    tags: Vec<String>,
}

macro_rules! ticked {
    ($($t:ty),*) => {$(impl Ticked for $t { fn tick(&self) -> u64 { self.tick } })*};
}
ticked!(CoreRow, EventRow, ExclusionRow, SummaryRow, ArchivalRow);

#[derive(Clone, Debug)]
struct MBranch {
    id: String,
    parent: Option<usize>,
    depth: i64,
    /// The model's tick at creation: the fork point.
    fork_tick: u64,
    /// What the engine reported as fork_seq (only compared, never used for visibility).
    fork_seq: i64,
    core: Vec<CoreRow>,
    events: Vec<EventRow>,
    exclusions: Vec<ExclusionRow>,
    summaries: Vec<SummaryRow>,
    archival: Vec<ArchivalRow>,
    status: BranchStatus,
    /// Deleted by `gc`: gone for the engine, its rows kept here (no live view reaches them).
    collected: bool,
}

#[derive(Clone, Debug, PartialEq)]
struct CoreLine {
    key: String,
    value: String,
    writer: String,
    seq: i64,
    importance: u8,
    ttl: Option<f64>,
    ts: f64,
}

#[derive(Clone, Debug, PartialEq)]
struct SummaryLine {
    id: i64,
    writer: String,
    kind: String,
    text: String,
    event_ids: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq)]
struct EventLine {
    id: i64,
    writer: String,
    kind: String,
    text: String,
    tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
struct RecordLine {
    id: i64,
    writer: String,
    text: String,
    tags: Vec<String>,
    seq: i64,
}

/// A view in comparable form: core oldest write first, summaries oldest first, events newest
/// first, archival records newest version first.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    branch: (String, Option<String>, i64, i64),
    core: Vec<CoreLine>,
    summaries: Vec<SummaryLine>,
    events: Vec<EventLine>,
    archival: Vec<RecordLine>,
}

impl Seen {
    fn of(view: View) -> Seen {
        Seen {
            branch: (view.branch.id, view.branch.parent, view.branch.depth, view.branch.fork_seq),
            core: view
                .core
                .into_iter()
                .map(|e| CoreLine {
                    key: e.key,
                    value: e.value,
                    writer: e.branch.to_string(),
                    seq: e.seq,
                    importance: e.importance,
                    ttl: e.ttl,
                    ts: e.ts,
                })
                .collect(),
            summaries: view
                .summaries
                .into_iter()
                .map(|s| SummaryLine {
                    id: s.id,
                    writer: s.branch.to_string(),
                    kind: s.kind.to_string(),
                    text: s.text,
                    event_ids: s.event_ids,
                })
                .collect(),
            events: view.events.into_iter().map(EventLine::of).collect(),
            archival: view.archival.into_iter().map(RecordLine::of).collect(),
        }
    }
}

impl EventLine {
    fn of(e: Event) -> EventLine {
        EventLine {
            id: e.id,
            writer: e.branch.to_string(),
            kind: e.kind.to_string(),
            text: e.text,
            tags: e.tags.to_vec(),
        }
    }
}

impl RecordLine {
    fn of(r: Record) -> RecordLine {
        RecordLine { id: r.id, writer: r.branch.to_string(), text: r.text, tags: r.tags.to_vec(), seq: r.seq }
    }
}

/// SPEC §2, written as plainly as possible.
#[derive(Clone, Debug)]
struct Model {
    branches: Vec<MBranch>,
    /// The last tick handed out; every row written gets the next one.
    tick: u64,
    now: i64,
}

impl Model {
    fn new() -> Model {
        Model { branches: Vec::new(), tick: 0, now: T0 }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn add_branch(&mut self, id: String, parent: Option<usize>, fork_seq: i64) {
        let fork_tick = self.next_tick();
        let depth = parent.map_or(0, |p| self.branches[p].depth + 1);
        self.branches.push(MBranch {
            id,
            parent,
            depth,
            fork_tick,
            fork_seq,
            core: vec![],
            events: vec![],
            exclusions: vec![],
            summaries: vec![],
            archival: vec![],
            status: BranchStatus::Alive,
            collected: false,
        });
    }

    /// The branches not collected, in creation order.
    fn live(&self) -> Vec<usize> {
        (0..self.branches.len()).filter(|&b| !self.branches[b].collected).collect()
    }

    /// Every branch under `b`, in creation order.
    fn descendants(&self, b: usize) -> Vec<usize> {
        let under = |mut x: usize| {
            while let Some(p) = self.branches[x].parent {
                if p == b {
                    return true;
                }
                x = p;
            }
            false
        };
        self.live().into_iter().filter(|&x| under(x)).collect()
    }

    /// Which branch wrote event `id`.
    fn event_writer(&self, id: i64) -> Option<usize> {
        self.branches.iter().position(|b| b.events.iter().any(|e| e.id == id))
    }

    /// Which branch created record `id`.
    fn record_writer(&self, id: i64) -> Option<usize> {
        self.branches.iter().position(|b| b.archival.iter().any(|r| r.record == id && r.seq == id))
    }

    /// The path of `b` (itself first, root last), each branch with the last tick it contributes.
    fn path(&self, b: usize) -> Vec<(usize, u64)> {
        let mut path = vec![(b, u64::MAX)];
        let mut below = b;
        while let Some(parent) = self.branches[below].parent {
            path.push((parent, self.branches[below].fork_tick));
            below = parent;
        }
        path
    }

    /// The rows of one layer visible from `b`, with the branch that wrote each.
    fn visible<T: Ticked>(&self, b: usize, layer: fn(&MBranch) -> &[T]) -> Vec<(usize, &T)> {
        let mut rows = vec![];
        for (branch, cutoff) in self.path(b) {
            for row in layer(&self.branches[branch]) {
                if row.tick() <= cutoff {
                    rows.push((branch, row));
                }
            }
        }
        rows
    }

    fn name(&self, b: usize) -> String {
        self.branches[b].id.clone()
    }

    /// Where a row that branch `w` wrote at `tick` stands against `b`'s path, as `why` says.
    fn reach(&self, b: usize, w: usize, tick: u64) -> Reach {
        match self.path(b).into_iter().find(|(branch, _)| *branch == w) {
            None => Reach::OffPath,
            Some((_, cutoff)) if tick <= cutoff => Reach::InView,
            Some(_) => Reach::AfterFork,
        }
    }

    fn core_view(&self, b: usize) -> Vec<CoreLine> {
        // TTL is decided per row; then per key the live row with the greatest tick wins.
        let mut winners: BTreeMap<&str, (usize, &CoreRow)> = BTreeMap::new();
        for (writer, row) in self.visible(b, |m| &m.core) {
            let expired = row.ttl.is_some_and(|ttl| row.written_at + ttl < self.now);
            if expired {
                continue;
            }
            let newer = winners.get(row.key.as_str()).is_none_or(|(_, best)| best.tick < row.tick);
            if newer {
                winners.insert(&row.key, (writer, row));
            }
        }
        let mut live: Vec<(usize, &CoreRow)> =
            winners.into_values().filter(|(_, row)| row.value.is_some()).collect();
        live.sort_by_key(|(_, row)| row.tick);
        live.into_iter()
            .map(|(writer, row)| CoreLine {
                key: row.key.clone(),
                value: row.value.clone().unwrap(),
                writer: self.name(writer),
                seq: row.seq.expect("a visible value has a seq"),
                importance: row.importance,
                ttl: row.ttl.map(|t| t as f64),
                ts: row.written_at as f64,
            })
            .collect()
    }

    /// Visible events, newest first.
    fn events_view(&self, b: usize) -> Vec<EventLine> {
        let excluded: HashSet<i64> =
            self.visible(b, |m| &m.exclusions).into_iter().map(|(_, x)| x.event).collect();
        let mut events: Vec<(usize, &EventRow)> =
            self.visible(b, |m| &m.events).into_iter().filter(|(_, e)| !excluded.contains(&e.id)).collect();
        events.sort_by_key(|(_, e)| std::cmp::Reverse(e.tick));
        events
            .into_iter()
            .map(|(writer, e)| EventLine {
                id: e.id,
                writer: self.name(writer),
                kind: e.kind.clone(),
                text: e.text.clone(),
                tags: e.tags.clone(),
            })
            .collect()
    }

    /// Visible summaries, oldest first.
    fn summaries_view(&self, b: usize) -> Vec<SummaryLine> {
        let mut summaries = self.visible(b, |m| &m.summaries);
        summaries.sort_by_key(|(_, s)| s.tick);
        summaries
            .into_iter()
            .map(|(writer, s)| SummaryLine {
                id: s.id,
                writer: self.name(writer),
                kind: s.kind.clone(),
                text: s.text.clone(),
                event_ids: s.event_ids.clone(),
            })
            .collect()
    }

    /// Current visible records, newest version first.
    fn archival_view(&self, b: usize) -> Vec<RecordLine> {
        let mut current: BTreeMap<i64, (usize, &ArchivalRow)> = BTreeMap::new();
        for (writer, row) in self.visible(b, |m| &m.archival) {
            let newer = current.get(&row.record).is_none_or(|(_, best)| best.tick < row.tick);
            if newer {
                current.insert(row.record, (writer, row));
            }
        }
        let mut live: Vec<(usize, &ArchivalRow)> =
            current.into_values().filter(|(_, row)| row.text.is_some()).collect();
        live.sort_by_key(|(_, row)| std::cmp::Reverse(row.tick));
        live.into_iter()
            .map(|(writer, row)| RecordLine {
                id: row.record,
                writer: self.name(writer),
                text: row.text.clone().unwrap(),
                tags: row.tags.clone(),
                seq: row.seq,
            })
            .collect()
    }

    fn view(&self, b: usize) -> Seen {
        let branch = &self.branches[b];
        Seen {
            branch: (branch.id.clone(), branch.parent.map(|p| self.name(p)), branch.depth, branch.fork_seq),
            core: self.core_view(b),
            summaries: self.summaries_view(b),
            events: self.events_view(b),
            archival: self.archival_view(b),
        }
    }

    /// An event by id, wherever it was written.
    fn event(&self, id: i64) -> Option<EventRow> {
        self.branches.iter().flat_map(|b| &b.events).find(|e| e.id == id).cloned()
    }

    /// The text and tags of a record's first version.
    fn first_version(&self, record: i64) -> Option<(String, Vec<String>)> {
        self.branches
            .iter()
            .flat_map(|b| &b.archival)
            .find(|r| r.record == record && r.seq == record)
            .map(|r| (r.text.clone().unwrap(), r.tags.clone()))
    }

    fn index_of(&self, id: &str) -> usize {
        self.branches.iter().position(|b| b.id == id).unwrap()
    }

    /// For the hand-written tests: the core of a branch as a map.
    fn core_map(&self, id: &str) -> BTreeMap<String, String> {
        self.core_view(self.index_of(id)).into_iter().map(|l| (l.key, l.value)).collect()
    }

    fn event_texts(&self, id: &str) -> Vec<String> {
        self.events_view(self.index_of(id)).into_iter().map(|e| e.text).collect()
    }

    fn record_texts(&self, id: &str) -> Vec<String> {
        self.archival_view(self.index_of(id)).into_iter().map(|r| r.text).collect()
    }
}

/// Tags as the engine stores them: each once, first occurrence kept.
/// A model view's rows by key, each with what tells two versions of it apart.
fn keyed<T, K: Ord, V>(rows: &[T], key: impl Fn(&T) -> (K, V)) -> BTreeMap<K, V> {
    rows.iter().map(key).collect()
}

/// A diff's sides (`only`: A's and B's, in any order) and changed keys are the set differences
/// of the model's two views `a` and `b`, and the keys both hold differently.
fn same_sides<K: Ord + Clone + Debug, V: PartialEq>(
    only: (impl Iterator<Item = K>, impl Iterator<Item = K>),
    a: BTreeMap<K, V>,
    b: BTreeMap<K, V>,
    changed: impl Iterator<Item = K>,
    what: &str,
) -> Result<(), TestCaseError> {
    let minus = |x: &BTreeMap<K, V>, y: &BTreeMap<K, V>| -> Vec<K> {
        x.keys().filter(|k| !y.contains_key(*k)).cloned().collect()
    };
    let sorted = |items: &mut dyn Iterator<Item = K>| -> Vec<K> {
        let mut items: Vec<K> = items.collect();
        items.sort();
        items
    };
    let (mut only_a, mut only_b) = only;
    prop_assert_eq!(sorted(&mut only_a), minus(&a, &b), "only in A: {}", what);
    prop_assert_eq!(sorted(&mut only_b), minus(&b, &a), "only in B: {}", what);
    let differ: Vec<K> =
        a.iter().filter(|(k, v)| b.get(*k).is_some_and(|w| w != *v)).map(|(k, _)| k.clone()).collect();
    let mut changed = changed;
    prop_assert_eq!(sorted(&mut changed), differ, "changed: {}", what);
    Ok(())
}

fn normalize(tags: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for tag in tags {
        if !out.iter().any(|t| t == tag) {
            out.push(tag.to_string());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Engine and model side by side
// ---------------------------------------------------------------------------------------------

/// Words as both search paths read them on this test's alphabet: lowercase runs of letters and
/// digits (tags are indexed as their stored JSON text, whose quotes and brackets separate).
fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Ids of matches `(id, occurrences of each query word, words in all)` ranked as docs/schema.md
/// states: bm25 (k1 = 1.2, b = 0.75, IDF `ln(1 + (n - df + 0.5) / (df + 0.5))`) with the
/// statistics of the matches alone, best first, ties newest (the greater id) first.
fn ranked_by_bm25(matches: Vec<(i64, Vec<u32>, u32)>) -> Vec<i64> {
    let n = matches.len() as f64;
    let avg = (matches.iter().map(|m| f64::from(m.2)).sum::<f64>() / n).max(1.0);
    let words = matches.first().map_or(0, |m| m.1.len());
    let df = |w: usize| matches.iter().filter(|m| m.1[w] > 0).count() as f64;
    let idf: Vec<f64> = (0..words).map(|w| (1.0 + (n - df(w) + 0.5) / (df(w) + 0.5)).ln()).collect();
    let mut scored: Vec<(f64, i64)> = matches
        .iter()
        .map(|(id, tf, tokens)| {
            let norm = 1.2 * (1.0 - 0.75 + 0.75 * f64::from(*tokens) / avg);
            let score = tf
                .iter()
                .zip(&idf)
                .filter(|(&tf, _)| tf > 0)
                .map(|(&tf, idf)| idf * f64::from(tf) * 2.2 / (f64::from(tf) + norm))
                .sum();
            (score, *id)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    scored.into_iter().map(|(_, id)| id).collect()
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

fn expect_ok<T>(result: memctl_core::Result<T>, what: &str) -> Result<T, TestCaseError> {
    result.map_err(|e| fail(format!("{what}: unexpected {:?} error: {e}", e.kind())))
}

fn expect_err<T: Debug>(
    result: memctl_core::Result<T>,
    kind: ErrorKind,
    what: &str,
) -> Result<(), TestCaseError> {
    match result {
        Err(e) if e.kind() == kind => Ok(()),
        Err(e) => Err(fail(format!("{what}: expected a {kind:?} error, got {:?}: {e}", e.kind()))),
        Ok(v) => Err(fail(format!("{what}: expected a {kind:?} error, got Ok({v:?})"))),
    }
}

struct Harness {
    store: Store,
    /// A second handle on the same database that searches archival by keywords, without FTS5
    /// (on PostgreSQL, which has no FTS5, a second handle searching the same way).
    fallback: Store,
    /// The directory holding the database file (SQLite).
    dir: tempfile::TempDir,
    /// The database's URL (PostgreSQL).
    url: Option<String>,
    model: Model,
    /// Every event id the engine created, in any branch.
    events: Vec<i64>,
    /// Every archival record id the engine created, in any branch.
    records: Vec<i64>,
    /// Every fresh seq the engine reported, of any kind.
    seqs: Vec<i64>,
    /// The engine calls made so far, shown when a case fails.
    trace: Vec<String>,
}

const GHOST: &str = "ghost";

impl Harness {
    /// An engine and a model holding one root, `r0`.
    fn new() -> Harness {
        Harness::anchoring_every(Config::default().anchor_every)
    }

    /// The same, with an anchor every `levels` levels (0: none), so that the model's views are
    /// compared with views read through anchors.
    fn anchoring_every(levels: i64) -> Harness {
        Harness::on(None, levels)
    }

    /// [`Harness::anchoring_every`] on the database at `url` (PostgreSQL), else on a new SQLite file.
    fn on(url: Option<String>, levels: i64) -> Harness {
        Harness::indexing_by(url, levels, 3)
    }

    /// [`Harness::on`] with an FTS5 index that takes new records `batch` at a time, so that
    /// searches find records both in the index and past its end.
    fn indexing_by(url: Option<String>, levels: i64, batch: u32) -> Harness {
        // Budget eviction and consolidation have their own tests; the model covers SPEC §2.
        let mut config = Config {
            core_max_chars: 1_000_000,
            auto_consolidate: false,
            anchor_every: levels,
            ..Config::default()
        };
        config.search.fts_batch = std::num::NonZeroU32::new(batch).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = match &url {
            Some(url) => std::path::PathBuf::from(url),
            None => dir.path().join("memory.sqlite"),
        };
        let clock = Clock::Fixed(T0 as f64);
        let store = Store::open(&file, config.clone(), clock).unwrap();
        assert_eq!(store.uses_fts().unwrap(), url.is_none(), "the bundled SQLite has FTS5");
        let mut fallback_config = config;
        fallback_config.search.fts = FtsMode::Off;
        let fallback = Store::open(&file, fallback_config, clock).unwrap();
        let mut h = Harness {
            store,
            fallback,
            dir,
            url,
            model: Model::new(),
            events: vec![],
            records: vec![],
            seqs: vec![],
            trace: vec![],
        };
        h.apply(&Op::CreateRoot(None)).unwrap();
        h
    }

    /// Records a seq the engine just allocated: it must be greater than every earlier one.
    fn fresh(&mut self, seq: i64, what: &str) -> Result<(), TestCaseError> {
        if let Some(&last) = self.seqs.last() {
            prop_assert!(seq > last, "{what}: seq {seq} is not greater than the earlier {last}");
        }
        self.seqs.push(seq);
        Ok(())
    }

    /// A live branch (a ghost when none is left).
    fn branch(&self, r: BranchRef) -> (Option<usize>, String) {
        let live = self.model.live();
        match r {
            BranchRef::Known(pick) => match pick.of(live.len()) {
                Some(i) => (Some(live[i]), self.model.name(live[i])),
                None => (None, GHOST.to_string()),
            },
            BranchRef::Ghost => (None, GHOST.to_string()),
        }
    }

    fn event_id(&self, b: Option<usize>, r: IdRef) -> Option<i64> {
        match r {
            IdRef::Visible(pick) => {
                let visible = self.model.events_view(b?);
                pick.of(visible.len()).map(|i| visible[i].id)
            }
            IdRef::Known(pick) => pick.of(self.events.len()).map(|i| self.events[i]),
            IdRef::AnySeq(pick) => pick.of(self.seqs.len()).map(|i| self.seqs[i]),
        }
    }

    fn record_id(&self, b: Option<usize>, r: IdRef) -> Option<i64> {
        match r {
            IdRef::Visible(pick) => {
                let visible = self.model.archival_view(b?);
                pick.of(visible.len()).map(|i| visible[i].id)
            }
            IdRef::Known(pick) => pick.of(self.records.len()).map(|i| self.records[i]),
            IdRef::AnySeq(pick) => pick.of(self.seqs.len()).map(|i| self.seqs[i]),
        }
    }

    fn note(&mut self, call: String) {
        self.trace.push(call);
    }

    /// Runs a sequence; a failure names the operation and lists the engine calls made.
    fn run(&mut self, ops: &[Op]) -> Result<(), TestCaseError> {
        for (n, op) in ops.iter().enumerate() {
            if let Err(e) = self.apply(op) {
                return Err(fail(format!(
                    "op #{n} {op:?}: {e}\nengine calls so far:\n  {}",
                    self.trace.join("\n  ")
                )));
            }
        }
        self.check_final()
            .map_err(|e| fail(format!("after all ops: {e}\nengine calls:\n  {}", self.trace.join("\n  "))))
    }

    /// Applies one operation to both sides, then compares every branch's view.
    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        self.step(op)?;
        self.check_views()
    }

    fn check_views(&self) -> Result<(), TestCaseError> {
        for b in 0..self.model.branches.len() {
            let id = self.model.name(b);
            if self.model.branches[b].collected {
                expect_err(self.store.view(&id), ErrorKind::NotFound, "view of a collected branch")?;
                continue;
            }
            let actual = Seen::of(expect_ok(self.store.view(&id), "view")?);
            let expected = self.model.view(b);
            prop_assert_eq!(&actual.branch, &expected.branch, "branch {}", id);
            prop_assert_eq!(&actual.core, &expected.core, "core of {}", id);
            prop_assert_eq!(&actual.summaries, &expected.summaries, "summaries of {}", id);
            prop_assert_eq!(&actual.events, &expected.events, "events of {}", id);
            prop_assert_eq!(&actual.archival, &expected.archival, "archival of {}", id);
            // The constant-time event count (pressure, auto-consolidation) agrees with the view,
            // and so does pressure's measure of the archival records, taken without building them.
            let pressure = expect_ok(self.store.pressure(&id), "pressure")?;
            prop_assert_eq!(pressure.recall.count, expected.events.len(), "event count of {}", id);
            let chars = expected.archival.iter().map(|r| r.text.chars().count()).sum::<usize>();
            prop_assert_eq!(
                (pressure.archival.count, pressure.archival.chars),
                (expected.archival.len(), chars),
                "archival measured in {}",
                id
            );
        }
        Ok(())
    }

    /// End-of-sequence checks through other read paths than `view`.
    fn check_final(&self) -> Result<(), TestCaseError> {
        let listed: Vec<(String, Option<String>, BranchStatus)> =
            expect_ok(self.store.branches(), "branches")?
                .into_iter()
                .map(|b| (b.id, b.parent, b.status))
                .collect();
        let expected: Vec<(String, Option<String>, BranchStatus)> = self
            .model
            .live()
            .into_iter()
            .map(|b| {
                let m = &self.model.branches[b];
                (m.id.clone(), m.parent.map(|p| self.model.name(p)), m.status)
            })
            .collect();
        prop_assert_eq!(listed, expected, "branch list");
        expect_err(self.store.view(GHOST), ErrorKind::NotFound, "view ghost")?;
        for b in self.model.live() {
            let id = self.model.name(b);
            let visible = self.model.archival_view(b);
            for &record in &self.records {
                let got = self.store.archival_get(&id, record);
                match visible.iter().find(|r| r.id == record) {
                    Some(r) => {
                        let got = expect_ok(got, "archival_get")?;
                        prop_assert_eq!(
                            (&got.text, &got.tags[..], got.seq),
                            (&r.text, &r.tags[..], r.seq),
                            "archival_get({}, {})",
                            id,
                            record
                        );
                    }
                    None => expect_err(got, ErrorKind::NotFound, "archival_get")?,
                }
            }
            self.check_search(b)?;
            self.check_recall_search(b)?;
            self.check_why(b)?;
            self.check_path(b)?;
            self.check_windows(b)?;
        }
        self.check_seq_order()?;
        self.check_archival_lengths()?;
        self.check_diffs()
    }

    /// The windows of a read (`archival_list` and `recall_list` with a limit) are the newest
    /// records and events of the model's view, across as many branches as they take: each is
    /// read from the nearest branches first, and on PostgreSQL at most the window's length of
    /// each branch.
    fn check_windows(&self, b: usize) -> Result<(), TestCaseError> {
        let id = self.model.name(b);
        let view = self.model.view(b);
        for limit in [1, 3, 8] {
            let records = expect_ok(self.store.archival_list(&id, Some(limit)), "archival_list")?;
            let records: Vec<RecordLine> = records.into_iter().map(RecordLine::of).collect();
            let newest = &view.archival[..limit.min(view.archival.len())];
            prop_assert_eq!(&records[..], newest, "records window of {} in {}", limit, id);
            let events = expect_ok(self.store.recall_list(&id, Some(limit)), "recall_list")?.events;
            let events: Vec<EventLine> = events.into_iter().map(EventLine::of).collect();
            let newest = &view.events[..limit.min(view.events.len())];
            prop_assert_eq!(&events[..], newest, "events window of {} in {}", limit, id);
        }
        Ok(())
    }

    /// `diff` of every pair of branches against the model: each layer's "only in A", "only
    /// in B" and changed sets are the set differences of the model's two views.
    fn check_diffs(&self) -> Result<(), TestCaseError> {
        let live = self.model.live();
        for &a in &live {
            for &b in &live {
                let (name_a, name_b) = (self.model.name(a), self.model.name(b));
                let diff = expect_ok(self.store.diff(&name_a, &name_b, &[]), "diff")?;
                let (va, vb) = (self.model.view(a), self.model.view(b));
                let pair = format!("{name_a} vs {name_b}");
                let core = diff.core.as_ref().unwrap();
                same_sides(
                    (core.only_a.iter().map(|e| e.key.clone()), core.only_b.iter().map(|e| e.key.clone())),
                    // Changed: another value, importance or TTL (the same written by each is no
                    // change).
                    keyed(&va.core, |l| {
                        (l.key.clone(), (l.value.clone(), l.importance, l.ttl.map(f64::to_bits)))
                    }),
                    keyed(&vb.core, |l| {
                        (l.key.clone(), (l.value.clone(), l.importance, l.ttl.map(f64::to_bits)))
                    }),
                    core.changed.iter().map(|c| c.a.key.clone()),
                    &format!("core, {pair}"),
                )?;
                let recall = diff.recall.as_ref().unwrap();
                same_sides(
                    (recall.only_a.iter().map(|e| e.id), recall.only_b.iter().map(|e| e.id)),
                    keyed(&va.events, |e| (e.id, ())),
                    keyed(&vb.events, |e| (e.id, ())),
                    std::iter::empty(),
                    &format!("recall, {pair}"),
                )?;
                let summaries = diff.summaries.as_ref().unwrap();
                same_sides(
                    (summaries.only_a.iter().map(|s| s.id), summaries.only_b.iter().map(|s| s.id)),
                    keyed(&va.summaries, |s| (s.id, ())),
                    keyed(&vb.summaries, |s| (s.id, ())),
                    std::iter::empty(),
                    &format!("summaries, {pair}"),
                )?;
                let archival = diff.archival.as_ref().unwrap();
                same_sides(
                    (archival.only_a.iter().map(|r| r.id), archival.only_b.iter().map(|r| r.id)),
                    keyed(&va.archival, |r| (r.id, (r.text.clone(), r.tags.clone()))),
                    keyed(&vb.archival, |r| (r.id, (r.text.clone(), r.tags.clone()))),
                    archival.changed.iter().map(|c| c.a.id),
                    &format!("archival, {pair}"),
                )?;
                if a == b {
                    prop_assert!(diff.is_empty(), "diff {} is not empty", pair);
                }
            }
        }
        Ok(())
    }

    /// `path` of branch `b`: the model's path, and the node deltas add up to the model's view —
    /// events added less events excluded are the view's events, the core writes marked shown
    /// are the view's core, records added or updated and not deleted since are its records.
    fn check_path(&self, b: usize) -> Result<(), TestCaseError> {
        let id = self.model.name(b);
        let report = expect_ok(self.store.path_report(&id), "path_report")?;
        let view = self.model.view(b);
        let names: Vec<String> = report.nodes.iter().map(|n| n.branch.id.clone()).collect();
        let mut expected: Vec<String> =
            self.model.path(b).into_iter().map(|(n, _)| self.model.name(n)).collect();
        expected.reverse();
        prop_assert_eq!(names, expected, "path of {}", id);
        // Each node's events the view holds rows of, less the exclusions the view holds (each
        // hides one of them), are the view's events.
        let added: usize = report.nodes.iter().map(|n| n.recall.added).sum();
        let excluded: usize = report.nodes.iter().map(|n| n.recall.excluded.len()).sum();
        prop_assert_eq!(added - excluded, view.events.len(), "events along the path of {}", id);
        for (n, node) in report.nodes.iter().enumerate() {
            let (writer, cutoff) = self.model.path(b)[report.nodes.len() - 1 - n];
            let own: Vec<i64> = self.model.branches[writer]
                .events
                .iter()
                .filter(|e| e.tick <= cutoff)
                .map(|e| e.id)
                .collect();
            prop_assert_eq!(
                node.recall.added,
                own.len(),
                "events of {} in the view of {}",
                node.branch.id,
                id
            );
            prop_assert_eq!(node.recall.added_ids, own.first().map(|&f| [f, *own.last().unwrap()]), "ids");
        }
        let mut shown: Vec<(String, i64)> = report
            .nodes
            .iter()
            .flat_map(|n| {
                n.core
                    .set
                    .iter()
                    .chain(&n.core.overridden)
                    .filter(|w| w.shown)
                    .map(|w| (n.branch.id.clone(), w.seq))
            })
            .collect();
        shown.sort();
        let mut core: Vec<(String, i64)> = view.core.iter().map(|l| (l.writer.clone(), l.seq)).collect();
        core.sort();
        prop_assert_eq!(shown, core, "core shown along the path of {}", id);
        Ok(())
    }

    /// `why` on branch `b` for every core key, record and event: the write it names as shown
    /// is the model's visible writer, it says "visible" exactly when the model's view holds the
    /// subject, and it places every write of a key (but deletes, whose seq the model does not
    /// know) and of a record where the model's path does.
    fn check_why(&self, b: usize) -> Result<(), TestCaseError> {
        let id = self.model.name(b);
        let view = self.model.view(b);
        let placed = |why: &Why, tick_of: &dyn Fn(&MBranch, i64) -> Option<u64>| {
            for write in &why.writes {
                let w = self.model.index_of(&write.branch);
                if let Some(tick) = tick_of(&self.model.branches[w], write.seq) {
                    let expected = self.model.reach(b, w, tick);
                    prop_assert_eq!(write.reach, expected, "why {} places seq {}", id, write.seq);
                }
            }
            Ok(())
        };
        for key in KEYS {
            let why = expect_ok(self.store.why(&id, &Subject::Key(key.to_string())), "why key")?;
            placed(&why, &|m, seq| m.core.iter().find(|r| r.seq == Some(seq)).map(|r| r.tick))?;
            let shown: Vec<(String, i64)> = why
                .writes
                .iter()
                .filter(|w| w.status == Status::Visible)
                .map(|w| (w.branch.clone(), w.seq))
                .collect();
            let expected: Vec<(String, i64)> =
                view.core.iter().filter(|l| l.key == key).map(|l| (l.writer.clone(), l.seq)).collect();
            prop_assert_eq!(&shown, &expected, "why {} {}", id, key);
            prop_assert_eq!(
                why.verdict == Verdict::Visible,
                !expected.is_empty(),
                "verdict of why {} {}",
                id,
                key
            );
            let written = self
                .model
                .live()
                .into_iter()
                .any(|m| self.model.branches[m].core.iter().any(|r| r.key == key));
            prop_assert_eq!(
                why.verdict == Verdict::NeverWritten,
                !written,
                "why {} {}: never written",
                id,
                key
            );
        }
        let gone = |writer: Option<usize>| writer.is_none_or(|w| self.model.branches[w].collected);
        for &record in &self.records {
            if gone(self.model.record_writer(record)) {
                let why = self.store.why(&id, &Subject::Record(record));
                expect_err(why, ErrorKind::NotFound, "why of a collected record")?;
                continue;
            }
            let why = expect_ok(self.store.why(&id, &Subject::Record(record)), "why record")?;
            placed(&why, &|m, seq| m.archival.iter().find(|r| r.seq == seq).map(|r| r.tick))?;
            let shown: Vec<(String, i64)> = why
                .writes
                .iter()
                .filter(|w| w.status == Status::Visible)
                .map(|w| (w.branch.clone(), w.seq))
                .collect();
            let expected: Vec<(String, i64)> =
                view.archival.iter().filter(|r| r.id == record).map(|r| (r.writer.clone(), r.seq)).collect();
            prop_assert_eq!(&shown, &expected, "why {} --record {}", id, record);
        }
        for &event in &self.events {
            if gone(self.model.event_writer(event)) {
                let why = self.store.why(&id, &Subject::Event(event));
                expect_err(why, ErrorKind::NotFound, "why of a collected event")?;
                continue;
            }
            let why = expect_ok(self.store.why(&id, &Subject::Event(event)), "why event")?;
            let visible = view.events.iter().any(|e| e.id == event);
            prop_assert_eq!(
                why.verdict == Verdict::Visible,
                visible,
                "why {} --event {}: {}",
                id,
                event,
                why.reason
            );
        }
        expect_err(self.store.why(&id, &Subject::Record(-1)), ErrorKind::NotFound, "why unknown record")?;
        expect_err(self.store.why(&id, &Subject::Event(-1)), ErrorKind::NotFound, "why unknown event")?;
        Ok(())
    }

    /// Archival search on branch `b`, through FTS5 and through the keyword fallback, against
    /// the model: the visible records with a query word in their text or tags (and every
    /// wanted tag), ranked alike by both paths.
    fn check_search(&self, b: usize) -> Result<(), TestCaseError> {
        let id = self.model.name(b);
        let queries: [(&str, &[&str]); 6] = [
            ("mpi", &[]),
            ("gpu kernel", &[]),
            ("notes tuning cache", &[]),
            ("b", &[]),
            ("tuning kernel", &["A"]),
            ("absent", &[]),
        ];
        for (query, tags) in queries {
            let search = Search {
                query: query.to_string(),
                k: 1000,
                tags: tags.iter().map(|t| t.to_string()).collect(),
            };
            let fts = expect_ok(self.store.archival_search(&id, &search), "archival_search (FTS5)")?;
            let keywords =
                expect_ok(self.fallback.archival_search(&id, &search), "archival_search (fallback)")?;
            let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
            let expected: BTreeMap<i64, RecordLine> = self
                .model
                .archival_view(b)
                .into_iter()
                .filter(|r| tags.iter().all(|t| r.tags.iter().any(|have| have == t)))
                .filter(|r| {
                    let tokens: HashSet<String> =
                        words_of(&r.text).chain(r.tags.iter().flat_map(|t| words_of(t))).collect();
                    words.iter().any(|w| tokens.contains(w))
                })
                .map(|r| (r.id, r))
                .collect();
            let found: Vec<i64> = fts.iter().map(|r| r.id).collect();
            let mut sorted = found.clone();
            sorted.sort_unstable();
            prop_assert_eq!(
                &sorted,
                &expected.keys().copied().collect::<Vec<_>>(),
                "FTS5 search {:?} {:?} on {}",
                query,
                tags,
                id
            );
            prop_assert_eq!(
                &found,
                &keywords.iter().map(|r| r.id).collect::<Vec<_>>(),
                "fallback order, {:?} on {}",
                query,
                id
            );
            for (a, k) in fts.iter().zip(&keywords) {
                let (sa, sk) = (a.score.unwrap_or(f64::NAN), k.score.unwrap_or(f64::NAN));
                prop_assert!(
                    (sa - sk).abs() <= 1e-9 * sa.abs().max(1.0),
                    "scores {} and {} for record {} of {:?} on {}",
                    sa,
                    sk,
                    a.id,
                    query,
                    id
                );
                let model = &expected[&a.id];
                prop_assert_eq!(
                    (&a.text, &a.tags[..], a.seq),
                    (&model.text, &model.tags[..], model.seq),
                    "record {} of {:?} on {}",
                    a.id,
                    query,
                    id
                );
            }
        }
        Ok(())
    }

    /// Recall search on branch `b` against the model: the visible events with a query word in
    /// their text, kind or tags, ranked by bm25 over them (ties newest first), the best `k`.
    fn check_recall_search(&self, b: usize) -> Result<(), TestCaseError> {
        let id = self.model.name(b);
        for query in ["alpha", "gamma tool", "obs beta c", "b", "absent"] {
            let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
            let matches: Vec<(i64, Vec<u32>, u32)> = self
                .model
                .events_view(b)
                .into_iter()
                .filter_map(|e| {
                    let texts = [&e.text, &e.kind].into_iter().chain(&e.tags);
                    let tokens: Vec<String> = texts.flat_map(|t| words_of(t)).collect();
                    let tf: Vec<u32> =
                        words.iter().map(|w| tokens.iter().filter(|t| *t == w).count() as u32).collect();
                    tf.iter().any(|&n| n > 0).then_some((e.id, tf, tokens.len() as u32))
                })
                .collect();
            let expected = ranked_by_bm25(matches);
            for k in [1000, 2] {
                let found = expect_ok(self.store.recall_search(&id, query, k), "recall_search")?;
                let found: Vec<i64> = found.iter().map(|e| e.id).collect();
                prop_assert_eq!(
                    &found[..],
                    &expected[..k.min(expected.len())],
                    "recall search {:?} on {}",
                    query,
                    id
                );
            }
        }
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let n = self.model.branches.len();
        match op {
            Op::CreateRoot(None) => {
                let id = format!("r{n}");
                self.note(format!("create_root({id:?})"));
                let out = expect_ok(self.store.create_root(&id), "create_root")?;
                prop_assert!(out.created && out.parent.is_none() && out.depth == 0);
                prop_assert_eq!(&out.branch, &id);
                self.fresh(out.fork_seq, "fork_seq")?;
                self.model.add_branch(id, None, out.fork_seq);
            }
            Op::CreateRoot(Some(pick)) => {
                let live = self.model.live();
                let Some(b) = pick.of(live.len()).map(|i| live[i]) else { return Ok(()) };
                self.note(format!("create_root({:?})", self.model.name(b)));
                let branch = &self.model.branches[b];
                let result = self.store.create_root(&branch.id);
                if branch.parent.is_none() {
                    let out = expect_ok(result, "create_root again")?;
                    prop_assert!(!out.created, "a repeated create_root creates nothing");
                    prop_assert_eq!(out.fork_seq, branch.fork_seq);
                } else {
                    expect_err(result, ErrorKind::Conflict, "create_root of a child")?;
                }
            }
            Op::Fork(parent) => {
                let (p, parent_id) = self.branch(*parent);
                let id = format!("b{n}");
                self.note(format!("fork({parent_id:?}, {id:?})"));
                let result = self.store.fork(&parent_id, Some(&id));
                let Some(p) = p else {
                    return expect_err(result, ErrorKind::NotFound, "fork under a ghost");
                };
                let out = expect_ok(result, "fork")?;
                prop_assert!(out.created);
                prop_assert_eq!(&out.branch, &id);
                prop_assert_eq!(out.parent.as_deref(), Some(parent_id.as_str()));
                prop_assert_eq!(out.depth, self.model.branches[p].depth + 1);
                self.fresh(out.fork_seq, "fork_seq")?;
                self.model.add_branch(id, Some(p), out.fork_seq);
            }
            Op::Refork { child, parent } => {
                let live = self.model.live();
                let Some(c) = child.of(live.len()).map(|i| live[i]) else { return Ok(()) };
                let branch = self.model.branches[c].clone();
                let real_parent = branch.parent.map(|p| self.model.name(p));
                let asked = match parent {
                    None => real_parent.clone(),
                    Some(r) => Some(self.branch(*r).1),
                };
                match &asked {
                    Some(p) => self.note(format!("fork({p:?}, {:?})", branch.id)),
                    None => self.note(format!("create_root({:?})", branch.id)),
                }
                let (result, same_parent) = match parent {
                    None => match branch.parent {
                        Some(p) => (self.store.fork(&self.model.name(p), Some(&branch.id)), true),
                        None => (self.store.create_root(&branch.id), true),
                    },
                    Some(r) => {
                        let (p, parent_id) = self.branch(*r);
                        let result = self.store.fork(&parent_id, Some(&branch.id));
                        if p.is_none() {
                            return expect_err(result, ErrorKind::NotFound, "refork under ghost");
                        }
                        (result, p == branch.parent)
                    }
                };
                if same_parent {
                    let out = expect_ok(result, "refork under the same parent")?;
                    prop_assert!(!out.created, "an idempotent fork creates nothing");
                    prop_assert_eq!(out.fork_seq, branch.fork_seq);
                    prop_assert_eq!(out.depth, branch.depth);
                    prop_assert_eq!(out.parent, branch.parent.map(|p| self.model.name(p)));
                } else {
                    expect_err(result, ErrorKind::Conflict, "refork under another parent")?;
                }
            }
            Op::CoreSet { b, key, value, importance, ttl } => {
                let (b, id) = self.branch(*b);
                let options = CoreWrite { importance: *importance, ttl: ttl.map(f64::from) };
                self.note(format!("core_set({id:?}, {key:?}, {value:?}, {options:?})"));
                let result = self.store.core_set(&id, key, value, options);
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "core_set on a ghost");
                };
                let out = expect_ok(result, "core_set")?;
                prop_assert!(out.evicted.is_empty() && out.oversize_record.is_none());
                self.fresh(out.seq, "core_set")?;
                let tick = self.model.next_tick();
                let now = self.model.now;
                self.model.branches[b].core.push(CoreRow {
                    tick,
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    importance: *importance,
                    ttl: ttl.map(i64::from),
                    written_at: now,
                    seq: Some(out.seq),
                });
            }
            Op::CoreDelete { b, keys } => {
                let (b, id) = self.branch(*b);
                self.note(format!("core_delete({id:?}, {keys:?})"));
                let result = self.store.core_delete(&id, keys);
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "core_delete on a ghost");
                };
                let visible = self.model.core_view(b);
                let mut expected: Vec<String> = vec![];
                for key in keys {
                    if visible.iter().any(|l| l.key == *key) && !expected.iter().any(|k| k == key) {
                        expected.push(key.to_string());
                    }
                }
                let deleted = expect_ok(result, "core_delete")?;
                prop_assert_eq!(&deleted, &expected, "keys deleted");
                for key in expected {
                    let tick = self.model.next_tick();
                    let now = self.model.now;
                    self.model.branches[b].core.push(CoreRow {
                        tick,
                        key,
                        value: None,
                        importance: 3,
                        ttl: None,
                        written_at: now,
                        seq: None,
                    });
                }
            }
            Op::Append { b, kind, text, tags } => return self.append(*b, kind, text, normalize(tags)),
            Op::Reappend { b, event } => {
                let (b_index, _) = self.branch(*b);
                let Some(event) = self.event_id(b_index, *event) else {
                    return Ok(());
                };
                let Some(e) = self.model.event(event) else {
                    return Ok(());
                };
                return self.append(*b, &e.kind, &e.text, e.tags);
            }
            Op::Exclude { b, ids } => {
                let (b, id) = self.branch(*b);
                let ids: Vec<i64> = ids.iter().filter_map(|r| self.event_id(b, *r)).collect();
                self.note(format!("recall_exclude({id:?}, {ids:?})"));
                let result = self.store.recall_exclude(&id, &ids);
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "exclude on a ghost");
                };
                let Some(selected) = self.select_events(b, &ids) else {
                    return expect_err(result, ErrorKind::NotFound, "exclude outside the view");
                };
                expect_ok(result, "recall_exclude")?;
                self.exclude(b, &selected);
            }
            Op::Summarize { b, kind, text, ids } => {
                let (b, id) = self.branch(*b);
                let ids: Vec<i64> = ids.iter().filter_map(|r| self.event_id(b, *r)).collect();
                self.note(format!("recall_summarize({id:?}, {kind:?}, {text:?}, {ids:?})"));
                let result = self.store.recall_summarize(&id, kind, text, &ids);
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "summarize on a ghost");
                };
                let Some(selected) = self.select_events(b, &ids) else {
                    return expect_err(result, ErrorKind::NotFound, "summarize outside the view");
                };
                let summary = expect_ok(result, "recall_summarize")?;
                self.fresh(summary, "summary id")?;
                let tick = self.model.next_tick();
                self.model.branches[b].summaries.push(SummaryRow {
                    tick,
                    id: summary,
                    kind: kind.to_string(),
                    text: text.to_string(),
                    event_ids: selected.clone(),
                });
                self.exclude(b, &selected);
            }
            Op::ArchivalAdd { b, text, tags } => return self.archival_add(*b, text, normalize(tags)),
            Op::Readd { b, record } => {
                let (b_index, _) = self.branch(*b);
                let Some(record) = self.record_id(b_index, *record) else {
                    return Ok(());
                };
                // Its current text and tags in the branch's view, else those of its first version.
                let visible = b_index.map_or(vec![], |b| self.model.archival_view(b));
                let content = match visible.into_iter().find(|r| r.id == record) {
                    Some(r) => Some((r.text, r.tags)),
                    None => self.model.first_version(record),
                };
                let Some((text, tags)) = content else {
                    return Ok(());
                };
                return self.archival_add(*b, &text, tags);
            }
            Op::ArchivalUpdate { b, record, change } => {
                let (b, id) = self.branch(*b);
                let Some(record) = self.record_id(b, *record) else {
                    return Ok(());
                };
                let (text, tags) = match change {
                    Change::Text(t) => (Some(*t), None),
                    Change::Tags(tags) => (None, Some(normalize(tags))),
                    Change::Both(t, tags) => (Some(*t), Some(normalize(tags))),
                    Change::Neither => (None, None),
                };
                self.note(format!("archival_update({id:?}, {record}, {text:?}, {tags:?})"));
                let result = self.store.archival_update(&id, record, text, tags.as_deref());
                if text.is_none() && tags.is_none() {
                    return expect_err(result, ErrorKind::InvalidInput, "update without change");
                }
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "archival_update on a ghost");
                };
                let Some(current) = self.model.archival_view(b).into_iter().find(|r| r.id == record) else {
                    return expect_err(result, ErrorKind::NotFound, "update outside the view");
                };
                let out = expect_ok(result, "archival_update")?;
                prop_assert_eq!(out.id, record);
                let (text, tags) =
                    (text.map_or(current.text.clone(), str::to_string), tags.unwrap_or(current.tags.clone()));
                // The text and tags the branch already sees (tags in any order): nothing written.
                if text == current.text && same_tags(&tags, &current.tags) {
                    prop_assert!(out.unchanged, "an update that changes nothing wrote: {:?}", out);
                    prop_assert_eq!(out.seq, current.seq);
                    return Ok(());
                }
                prop_assert!(!out.unchanged, "an update that changes something wrote nothing");
                self.fresh(out.seq, "version seq")?;
                let tick = self.model.next_tick();
                self.model.branches[b].archival.push(ArchivalRow {
                    tick,
                    record,
                    seq: out.seq,
                    text: Some(text),
                    tags,
                });
            }
            Op::ArchivalDelete { b, record } => {
                let (b, id) = self.branch(*b);
                let Some(record) = self.record_id(b, *record) else {
                    return Ok(());
                };
                self.note(format!("archival_delete({id:?}, {record})"));
                let result = self.store.archival_delete(&id, record);
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "archival_delete on a ghost");
                };
                if !self.model.archival_view(b).iter().any(|r| r.id == record) {
                    return expect_err(result, ErrorKind::NotFound, "delete outside the view");
                }
                let seq = expect_ok(result, "archival_delete")?;
                self.fresh(seq, "tombstone seq")?;
                let tick = self.model.next_tick();
                self.model.branches[b].archival.push(ArchivalRow {
                    tick,
                    record,
                    seq,
                    text: None,
                    tags: vec![],
                });
            }
            Op::Advance(secs) => {
                self.model.now += i64::from(*secs);
                self.note(format!("set_clock(Fixed(T0 + {}))", self.model.now - T0));
                self.store.set_clock(Clock::Fixed(self.model.now as f64));
                self.fallback.set_clock(Clock::Fixed(self.model.now as f64));
            }
            Op::Mark { b, status, subtree } => {
                let (b, id) = self.branch(*b);
                self.note(format!("mark_branch({id:?}, {status:?}, None, {subtree})"));
                let result = self.store.mark_branch(&id, *status, None, *subtree);
                let best = *status == BranchStatus::Best;
                if best && *subtree {
                    return expect_err(result, ErrorKind::Usage, "mark a subtree best");
                }
                let Some(b) = b else {
                    return expect_err(result, ErrorKind::NotFound, "mark a ghost");
                };
                // A subtree's mark leaves the branches under it marked best as they are.
                let mut marked = vec![b];
                if *subtree {
                    let under = self.model.descendants(b);
                    marked.extend(
                        under.into_iter().filter(|&d| self.model.branches[d].status != BranchStatus::Best),
                    );
                }
                // Best is one branch of a tree: the one before becomes alive.
                let root = |mut at: usize| {
                    while let Some(parent) = self.model.branches[at].parent {
                        at = parent;
                    }
                    at
                };
                let was_best = (0..self.model.branches.len()).find(|&o| {
                    best && o != b
                        && !self.model.branches[o].collected
                        && self.model.branches[o].status == BranchStatus::Best
                        && root(o) == root(b)
                });
                let names: Vec<String> = marked.iter().map(|&m| self.model.name(m)).collect();
                let outcome = expect_ok(result, "mark_branch")?;
                prop_assert_eq!(outcome.marked, names, "branches marked");
                prop_assert_eq!(outcome.was_best, was_best.map(|o| self.model.name(o)), "the best before");
                if let Some(o) = was_best {
                    self.model.branches[o].status = BranchStatus::Alive;
                }
                for m in marked {
                    self.model.branches[m].status = *status;
                }
            }
            Op::Gc { target, dry_run } => return self.gc(*target, *dry_run),
        }
        Ok(())
    }

    /// `gc` on both sides: the model collects what SPEC's rule selects, every remaining view
    /// must stay as it was (checked after the step), and the collected branches are gone.
    fn gc(&mut self, target: Option<(BranchRef, bool)>, dry_run: bool) -> Result<(), TestCaseError> {
        let finished = |s: BranchStatus| matches!(s, BranchStatus::Dead | BranchStatus::Pruned);
        let mut request = GcRequest { dry_run, ..GcRequest::default() };
        let expected: Vec<usize> = match target {
            None => {
                request.marked = true;
                let m = &self.model;
                m.live()
                    .into_iter()
                    .filter(|&b| {
                        finished(m.branches[b].status)
                            && m.descendants(b).into_iter().all(|d| finished(m.branches[d].status))
                    })
                    .collect()
            }
            Some((r, subtree)) => {
                let (b, id) = self.branch(r);
                request.branches = vec![id];
                request.subtree = subtree;
                let Some(b) = b else {
                    self.note(format!("gc({request:?})"));
                    return expect_err(self.store.gc(&request), ErrorKind::NotFound, "gc of a ghost");
                };
                let under = self.model.descendants(b);
                if !under.is_empty() && !subtree {
                    self.note(format!("gc({request:?})"));
                    return expect_err(
                        self.store.gc(&request),
                        ErrorKind::Conflict,
                        "gc of a branch with descendants",
                    );
                }
                std::iter::once(b).chain(under).collect()
            }
        };
        self.note(format!("gc({request:?})"));
        let report = expect_ok(self.store.gc(&request), "gc")?;
        let names: Vec<String> = expected.iter().map(|&b| self.model.name(b)).collect();
        prop_assert_eq!(&report.collected, &names, "branches collected");
        if !dry_run {
            for b in expected {
                self.model.branches[b].collected = true;
            }
            self.check_nothing_left()?;
        }
        Ok(())
    }

    /// What the view's partial path loads rest on (view/path.rs, `nearest_holding`): every
    /// version of a record comes at or after its first, whose seq is the record's id, and every
    /// exclusion after the event it hides. And what its event readers rest on (view/mod.rs):
    /// every event's rowid holds its branch and seq (`event_rid`, 40 bits of seq).
    fn check_seq_order(&self) -> Result<(), TestCaseError> {
        if self.url.is_some() {
            return Ok(());
        }
        let file = rusqlite::Connection::open(self.dir.path().join("memory.sqlite")).unwrap();
        let count = |sql: &str| file.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        prop_assert_eq!(
            count("SELECT count(*) FROM archival WHERE seq < record_id"),
            0,
            "versions before their record"
        );
        prop_assert_eq!(
            count("SELECT count(*) FROM inherited_exclusions WHERE seq <= event_id"),
            0,
            "exclusions before their event"
        );
        prop_assert_eq!(
            count("SELECT count(*) FROM events WHERE rid != (branch << 40) + seq"),
            0,
            "event rowids that do not hold their branch and seq"
        );
        Ok(())
    }

    /// What the search's walk rests on (view/fts_match.rs): `archival_lengths` holds the branch
    /// and length of every version the FTS5 index holds (those with text up to its end), and
    /// nothing else, whatever wrote or collected them.
    fn check_archival_lengths(&self) -> Result<(), TestCaseError> {
        if self.url.is_some() {
            return Ok(());
        }
        let file = rusqlite::Connection::open(self.dir.path().join("memory.sqlite")).unwrap();
        let count = |sql: &str| file.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        let lengths = "SELECT seq, branch, tokens FROM archival_lengths";
        let indexed = "SELECT seq, branch, tokens FROM archival WHERE text IS NOT NULL
                       AND seq <= (SELECT value FROM meta WHERE key = 'fts_indexed_until')";
        prop_assert_eq!(
            count(&format!("SELECT count(*) FROM ({indexed} EXCEPT {lengths})")),
            0,
            "indexed versions missing from archival_lengths"
        );
        prop_assert_eq!(
            count(&format!("SELECT count(*) FROM ({lengths} EXCEPT {indexed})")),
            0,
            "rows of archival_lengths that are no indexed version"
        );
        Ok(())
    }

    /// No row of a collected branch is left in the file, and the search index matches the
    /// archival rows that remain.
    fn check_nothing_left(&self) -> Result<(), TestCaseError> {
        if let Some(url) = &self.url {
            return check_nothing_left_on_postgres(url);
        }
        let file = rusqlite::Connection::open(self.dir.path().join("memory.sqlite")).unwrap();
        for table in LAYER_TABLES {
            let left: i64 = file
                .query_row(
                    &format!("SELECT count(*) FROM {table} t JOIN branches b ON b.bid = t.branch WHERE b.collected_at IS NOT NULL"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            prop_assert_eq!(left, 0, "rows of collected branches left in {}", table);
        }
        let checked = file.execute("INSERT INTO archival_fts(archival_fts) VALUES ('integrity-check')", []);
        prop_assert!(checked.is_ok(), "the search index is damaged: {:?}", checked);
        for (bid, indexed) in crate::search::index_entries_of_collected_branches(&file) {
            prop_assert_eq!(indexed, 0, "search entries of collected branch {} left", bid);
        }
        Ok(())
    }

    fn append(
        &mut self,
        b: BranchRef,
        kind: &str,
        text: &str,
        tags: Vec<String>,
    ) -> Result<(), TestCaseError> {
        let (b, id) = self.branch(b);
        self.note(format!("recall_append({id:?}, {kind:?}, {text:?}, {tags:?})"));
        let result = self.store.recall_append(&id, kind, text, &tags);
        let Some(b) = b else {
            return expect_err(result, ErrorKind::NotFound, "append on a ghost");
        };
        let out = expect_ok(result, "recall_append")?;
        // Duplicates are looked for among the branch's own events only, those it has not hidden
        // from its view (an event evicted or consolidated away may come again).
        let branch = &self.model.branches[b];
        let hidden: HashSet<i64> = branch.exclusions.iter().map(|x| x.event).collect();
        let duplicate = branch
            .events
            .iter()
            .find(|e| !hidden.contains(&e.id) && e.kind == *kind && e.text == *text && e.tags == tags)
            .map(|e| e.id);
        match duplicate {
            Some(existing) => {
                prop_assert!(out.skipped, "duplicate append not skipped: {:?}", out);
                prop_assert_eq!(out.id, existing);
            }
            None => {
                prop_assert!(!out.skipped, "fresh append skipped: {:?}", out);
                self.fresh(out.id, "event id")?;
                self.events.push(out.id);
                let tick = self.model.next_tick();
                self.model.branches[b].events.push(EventRow {
                    tick,
                    id: out.id,
                    kind: kind.to_string(),
                    text: text.to_string(),
                    tags,
                });
            }
        }
        Ok(())
    }

    fn archival_add(&mut self, b: BranchRef, text: &str, tags: Vec<String>) -> Result<(), TestCaseError> {
        let (b, id) = self.branch(b);
        self.note(format!("archival_add({id:?}, {text:?}, {tags:?})"));
        let result = self.store.archival_add(&id, text, &tags);
        let Some(b) = b else {
            return expect_err(result, ErrorKind::NotFound, "archival_add on a ghost");
        };
        let out = expect_ok(result, "archival_add")?;
        // Duplicates: records whose current version in this branch's view was written by
        // this branch, with the same text and tags.
        let name = self.model.name(b);
        let duplicates: Vec<i64> = self
            .model
            .archival_view(b)
            .into_iter()
            .filter(|r| r.writer == name && r.text == *text && r.tags == tags)
            .map(|r| r.id)
            .collect();
        if duplicates.is_empty() {
            prop_assert!(!out.skipped, "fresh archival_add skipped: {:?}", out);
            self.fresh(out.id, "record id")?;
            self.records.push(out.id);
            let tick = self.model.next_tick();
            self.model.branches[b].archival.push(ArchivalRow {
                tick,
                record: out.id,
                seq: out.id,
                text: Some(text.to_string()),
                tags,
            });
        } else {
            prop_assert!(out.skipped, "duplicate archival_add not skipped: {:?}", out);
            prop_assert!(
                duplicates.contains(&out.id),
                "skipped archival_add returned {}, not one of {:?}",
                out.id,
                duplicates
            );
        }
        Ok(())
    }

    /// The visible events of `b` among `ids`, oldest first, each once; None if one of `ids` is
    /// not in the view.
    fn select_events(&self, b: usize, ids: &[i64]) -> Option<Vec<i64>> {
        let mut visible = self.model.events_view(b);
        visible.reverse();
        if !ids.iter().all(|id| visible.iter().any(|e| e.id == *id)) {
            return None;
        }
        Some(visible.into_iter().filter(|e| ids.contains(&e.id)).map(|e| e.id).collect())
    }

    fn exclude(&mut self, b: usize, events: &[i64]) {
        for &event in events {
            let tick = self.model.next_tick();
            self.model.branches[b].exclusions.push(ExclusionRow { tick, event });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn pick() -> impl Strategy<Value = Pick> {
    any::<u8>().prop_map(Pick)
}

fn branch_ref() -> impl Strategy<Value = BranchRef> {
    prop_oneof![
        20 => pick().prop_map(BranchRef::Known),
        1 => Just(BranchRef::Ghost),
    ]
}

fn id_ref() -> impl Strategy<Value = IdRef> {
    prop_oneof![
        6 => pick().prop_map(IdRef::Visible),
        3 => pick().prop_map(IdRef::Known),
        1 => pick().prop_map(IdRef::AnySeq),
    ]
}

fn one_of(values: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop::sample::select(values)
}

/// Tags are a set to an update that changes nothing: `a, b` is `b, a` (a row holds a tag once).
/// The duplicate checks take them in order.
fn same_tags(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|tag| b.contains(tag))
}

/// Mostly no tags (so that identical appends and adds happen often), sometimes one or two, the
/// same one possibly twice.
fn tags() -> impl Strategy<Value = Vec<&'static str>> {
    prop_oneof![
        3 => Just(vec![]),
        2 => prop::collection::vec(one_of(&TAGS), 1..=2),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => one_of(&DOCS).prop_map(Change::Text),
        3 => tags().prop_map(Change::Tags),
        3 => (one_of(&DOCS), tags()).prop_map(|(t, tags)| Change::Both(t, tags)),
        1 => Just(Change::Neither),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => proptest::option::weighted(0.3, pick()).prop_map(Op::CreateRoot),
        6 => branch_ref().prop_map(Op::Fork),
        2 => (pick(), proptest::option::weighted(0.6, branch_ref()))
            .prop_map(|(child, parent)| Op::Refork { child, parent }),
        7 => (
            branch_ref(),
            one_of(&KEYS),
            one_of(&VALUES),
            1..=5u8,
            proptest::option::weighted(0.4, 1..=6u8),
        )
            .prop_map(|(b, key, value, importance, ttl)| Op::CoreSet {
                b,
                key,
                value,
                importance,
                ttl,
            }),
        2 => (branch_ref(), prop::collection::vec(one_of(&KEYS), 1..=2))
            .prop_map(|(b, keys)| Op::CoreDelete { b, keys }),
        6 => (branch_ref(), one_of(&KINDS), one_of(&TEXTS), tags())
            .prop_map(|(b, kind, text, tags)| Op::Append { b, kind, text, tags }),
        2 => (branch_ref(), prop::collection::vec(id_ref(), 0..=3))
            .prop_map(|(b, ids)| Op::Exclude { b, ids }),
        2 => (
            branch_ref(),
            one_of(&KINDS),
            one_of(&RECAPS),
            prop::collection::vec(id_ref(), 0..=3),
        )
            .prop_map(|(b, kind, text, ids)| Op::Summarize { b, kind, text, ids }),
        5 => (branch_ref(), one_of(&DOCS), tags())
            .prop_map(|(b, text, tags)| Op::ArchivalAdd { b, text, tags }),
        2 => (branch_ref(), id_ref()).prop_map(|(b, event)| Op::Reappend { b, event }),
        2 => (branch_ref(), id_ref()).prop_map(|(b, record)| Op::Readd { b, record }),
        3 => (branch_ref(), id_ref(), change())
            .prop_map(|(b, record, change)| Op::ArchivalUpdate { b, record, change }),
        2 => (branch_ref(), id_ref()).prop_map(|(b, record)| Op::ArchivalDelete { b, record }),
        2 => (1..=8u8).prop_map(Op::Advance),
        2 => (branch_ref(), prop::sample::select(&BranchStatus::ALL[..]), prop::bool::weighted(0.3))
            .prop_map(|(b, status, subtree)| Op::Mark { b, status, subtree }),
        1 => (proptest::option::weighted(0.4, (branch_ref(), prop::bool::ANY)), prop::bool::weighted(0.2))
            .prop_map(|(target, dry_run)| Op::Gc { target, dry_run }),
    ]
}

/// The layer tables, which keep no row of a collected branch.
const LAYER_TABLES: [&str; 6] =
    ["core", "events", "archival", "inherited_exclusions", "inherited_summaries", "anchor_rows"];

fn check_nothing_left_on_postgres(url: &str) -> Result<(), TestCaseError> {
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    for table in LAYER_TABLES {
        let sql = format!(
            "SELECT count(*) FROM memctl.{table} t JOIN memctl.branches b ON b.bid = t.branch
             WHERE b.collected_at IS NOT NULL"
        );
        let left: i64 = client.query_one(&sql, &[]).unwrap().get(0);
        prop_assert_eq!(left, 0, "rows of collected branches left in {}", table);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        // A failure is reported with its shrunk op sequence; nothing is written to disk.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_the_model(anchor_every in 0..=3i64, fts_batch in 1..=4u32, ops in prop::collection::vec(op(), 1..=60)) {
        Harness::indexing_by(None, anchor_every, fts_batch).run(&ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The model test on PostgreSQL, and the differential test: the same random operations on
    /// an SQLite file and a PostgreSQL database each match the model after every step, and the
    /// two then give the same views, searches, journal and exports.
    #[test]
    fn postgres_matches_the_model_and_sqlite(anchor_every in 0..=3i64, ops in prop::collection::vec(op(), 1..=40)) {
        let Some(cluster) = Cluster::shared("the PostgreSQL model test") else { return Ok(()) };
        let mut sqlite = Harness::on(None, anchor_every);
        let mut postgres = Harness::on(Some(cluster.new_database()), anchor_every);
        sqlite.run(&ops)?;
        postgres.run(&ops)?;
        backends_agree(&sqlite.store, &postgres.store)?;
        // `migrate`, both ways: the PostgreSQL run copied into a new SQLite file, and back into
        // a new PostgreSQL database, reads as the run it came from.
        let config = sqlite.store.config().clone();
        let clock = sqlite.store.clock();
        let copy = Store::open(&sqlite.dir.path().join("copy.sqlite"), config.clone(), clock).unwrap();
        expect_ok(postgres.store.copy_to(&copy), "copy to SQLite")?;
        backends_agree(&sqlite.store, &copy)?;
        let url = std::path::PathBuf::from(cluster.new_database());
        let back = Store::open(&url, config, clock).unwrap();
        expect_ok(copy.copy_to(&back), "copy to PostgreSQL")?;
        backends_agree(&postgres.store, &back)?;
    }
}

/// Two stores holding the same run read alike: every branch's view and searches, the journal,
/// and the exports.
fn backends_agree(a: &Store, b: &Store) -> Result<(), TestCaseError> {
    let branches = expect_ok(a.branches(), "branches")?;
    prop_assert_eq!(&branches, &expect_ok(b.branches(), "branches")?);
    for branch in &branches {
        let id = &branch.id;
        prop_assert_eq!(expect_ok(a.view(id), "view")?, expect_ok(b.view(id), "view")?, "view of {}", id);
        for query in ["mpi", "gpu kernel", "notes tuning cache", ""] {
            let search = Search { query: query.to_string(), k: 50, tags: vec![] };
            let (found_a, found_b) = (
                expect_ok(a.archival_search(id, &search), "search")?,
                expect_ok(b.archival_search(id, &search), "search")?,
            );
            prop_assert_eq!(found_a.len(), found_b.len(), "search {:?} on {}", query, id);
            for (x, y) in found_a.iter().zip(&found_b) {
                prop_assert_eq!((x.id, &x.text), (y.id, &y.text), "search {:?} on {}", query, id);
                let (sx, sy) = (x.score.unwrap_or(0.0), y.score.unwrap_or(0.0));
                prop_assert!((sx - sy).abs() <= 1e-9 * sx.abs().max(1.0), "scores of {:?} on {}", query, id);
            }
        }
        let paper = |s: &Store| {
            expect_ok(s.paper_memory(id, None), "paper_memory").map(|p| serde_json::to_value(p).unwrap())
        };
        prop_assert_eq!(paper(a)?, paper(b)?, "paper export of {}", id);
    }
    let journal =
        |s: &Store| expect_ok(s.journal_lines(), "journal").map(|l| serde_json::to_value(l).unwrap());
    prop_assert_eq!(journal(a)?, journal(b)?, "journal export");
    let viewer = |s: &Store| expect_ok(s.viewer_data("run"), "viewer data");
    prop_assert_eq!(viewer(a)?, viewer(b)?, "viewer export");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Hand-written scenarios: the model itself against the consequences listed in SPEC §2 (the
// harness compares the engine with the model after every step as well).
// ---------------------------------------------------------------------------------------------

fn known(b: u8) -> BranchRef {
    BranchRef::Known(Pick(b))
}

fn set(b: u8, key: &'static str, value: &'static str) -> Op {
    Op::CoreSet { b: known(b), key, value, importance: 3, ttl: None }
}

fn set_ttl(b: u8, key: &'static str, value: &'static str, ttl: u8) -> Op {
    Op::CoreSet { b: known(b), key, value, importance: 3, ttl: Some(ttl) }
}

fn append(b: u8, text: &'static str) -> Op {
    Op::Append { b: known(b), kind: "obs", text, tags: vec![] }
}

fn add(b: u8, text: &'static str) -> Op {
    Op::ArchivalAdd { b: known(b), text, tags: vec!["A"] }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn model_copy_on_write_scenario() {
    let mut h = Harness::new(); // r0 = branch 0
    let steps = [
        set(0, "goal", "one"),
        append(0, "alpha"),
        add(0, "mpi tuning"),
        Op::Fork(known(0)), // b1
        Op::Fork(known(0)), // b2
        // Late parent writes.
        set(0, "goal", "two"),
        set(0, "plan", "two"),
        append(0, "beta"),
        add(0, "gpu kernel"),
        // A child's override, then a later parent write of the same key.
        set(1, "goal", "three"),
        set(0, "goal", "one"),
        // Sibling writes.
        set(2, "note", "one"),
        append(2, "gamma"),
        Op::ArchivalUpdate {
            b: known(2),
            record: IdRef::Known(Pick(0)),
            change: Change::Text("cache notes"),
        },
        Op::Fork(known(1)), // b3, a child of b1 before its delete
        Op::CoreDelete { b: known(1), keys: vec!["goal", "goal", "plan"] },
        Op::Fork(known(1)), // b4, a child of b1 after its delete
    ];
    for op in &steps {
        h.apply(op).unwrap();
    }
    let m = &h.model;
    // Late parent writes never reach the children.
    assert_eq!(m.core_map("r0"), map(&[("goal", "one"), ("plan", "two")]));
    assert_eq!(m.event_texts("r0"), strings(&["beta", "alpha"]));
    assert_eq!(m.record_texts("r0"), strings(&["gpu kernel", "mpi tuning"]));
    // Siblings never see each other; the child's override is not shadowed by the later parent
    // write; the tombstone hides the key in b1 (and its later child b4) only.
    assert_eq!(m.core_map("b1"), map(&[]));
    assert_eq!(m.core_map("b2"), map(&[("goal", "one"), ("note", "one")]));
    assert_eq!(m.core_map("b3"), map(&[("goal", "three")]));
    assert_eq!(m.core_map("b4"), map(&[]));
    assert_eq!(m.event_texts("b1"), strings(&["alpha"]));
    assert_eq!(m.event_texts("b2"), strings(&["gamma", "alpha"]));
    // The sibling's archival update is its own.
    assert_eq!(m.record_texts("b1"), strings(&["mpi tuning"]));
    assert_eq!(m.record_texts("b2"), strings(&["cache notes"]));
    h.check_final().unwrap();
}

#[test]
fn model_ttl_duplicates_and_errors_scenario() {
    let mut h = Harness::new(); // r0
    h.apply(&set(0, "goal", "one")).unwrap();
    h.apply(&Op::Fork(known(0))).unwrap(); // b1
    h.apply(&set_ttl(1, "goal", "two", 5)).unwrap();
    h.apply(&Op::Advance(5)).unwrap();
    // written_at + ttl == now: still visible.
    assert_eq!(h.model.core_map("b1"), map(&[("goal", "two")]));
    h.apply(&Op::Advance(1)).unwrap();
    // The expired override makes the inherited value visible again.
    assert_eq!(h.model.core_map("b1"), map(&[("goal", "one")]));
    assert_eq!(h.model.core_map("r0"), map(&[("goal", "one")]));

    // Duplicates: own rows only.
    h.apply(&append(0, "alpha")).unwrap();
    let before = h.events.len();
    h.apply(&append(0, "alpha")).unwrap(); // skipped
    assert_eq!(h.events.len(), before);
    h.apply(&Op::Fork(known(0))).unwrap(); // b2 inherits "alpha"
    h.apply(&append(2, "alpha")).unwrap(); // not a duplicate in b2
    assert_eq!(h.events.len(), before + 1);
    assert_eq!(h.model.event_texts("b2"), strings(&["alpha", "alpha"]));

    // Summarizing in b2 excludes there only.
    h.apply(&Op::Summarize { b: known(2), kind: "obs", text: "recap one", ids: vec![IdRef::Known(Pick(0))] })
        .unwrap();
    assert_eq!(h.model.event_texts("b2"), strings(&["alpha"]));
    assert_eq!(h.model.event_texts("r0"), strings(&["alpha"]));
    assert_eq!(h.model.summaries_view(2).len(), 1);
    assert!(h.model.summaries_view(0).is_empty());
    // b1 was forked before "alpha" existed: excluding it there is NotFound (checked by apply).
    h.apply(&Op::Exclude { b: known(1), ids: vec![IdRef::Known(Pick(0))] }).unwrap();
    assert!(h.model.branches[1].exclusions.is_empty());

    // Forks: idempotent under the same parent, a conflict under another.
    h.apply(&Op::Refork { child: Pick(2), parent: None }).unwrap();
    h.apply(&Op::Refork { child: Pick(2), parent: Some(known(1)) }).unwrap();
    h.apply(&Op::CreateRoot(Some(Pick(2)))).unwrap(); // conflict
    h.apply(&Op::CreateRoot(Some(Pick(0)))).unwrap(); // idempotent
    assert_eq!(h.model.branches.len(), 3);

    // Archival duplicates: the same text again in the same branch is skipped; in a child not.
    h.apply(&add(0, "mpi tuning")).unwrap();
    h.apply(&add(0, "mpi tuning")).unwrap();
    assert_eq!(h.records.len(), 1);
    h.apply(&add(1, "mpi tuning")).unwrap();
    assert_eq!(h.records.len(), 2);
    h.check_final().unwrap();
}
