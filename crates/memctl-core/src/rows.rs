//! The rows callers see, one type per kind, and the path a view is read along. This module is
//! the bottom of the engine: it knows no SQL and imports nothing of the crate; every layer
//! above reads and writes these types.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// A branch as callers see it. Its serialized fields are declared in alphabetical order, as
/// the view's rows are (see the comment above `Event`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Branch {
    #[serde(skip)]
    pub(crate) bid: i64,
    pub depth: i64,
    pub fork_seq: i64,
    pub id: String,
    /// The runner's own data about the node (a JSON object), e.g. its score.
    pub meta: serde_json::Value,
    pub node_uid: Option<String>,
    pub parent: Option<String>,
    /// Where the search stands with it (`branch mark`).
    pub status: BranchStatus,
    /// Why, in the words of whoever marked it.
    pub status_note: Option<String>,
    #[serde(rename = "ts")]
    pub created_at: f64,
    /// Whether the branch holds its parent's view's anchor rows (view.rs).
    #[serde(skip)]
    pub(crate) anchored: bool,
}

/// A branch's place in the search: `alive` (the default) or what the runner decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BranchStatus {
    Alive,
    Dead,
    Best,
    Pruned,
}

impl BranchStatus {
    pub const ALL: [BranchStatus; 4] =
        [BranchStatus::Alive, BranchStatus::Dead, BranchStatus::Best, BranchStatus::Pruned];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            BranchStatus::Alive => "alive",
            BranchStatus::Dead => "dead",
            BranchStatus::Best => "best",
            BranchStatus::Pruned => "pruned",
        }
    }

    pub fn parse(name: &str) -> Option<BranchStatus> {
        BranchStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// A branch of a path as views read it: what places its rows (its bid, id and fork) and
/// whether it holds anchor rows. A report that shows more of each branch (meta, status) reads
/// the path's branches in full (`Store::path_branches`); reading them with every path cost a
/// CLI `read` at depth 995 a quarter of its instructions.
#[derive(Debug, Clone, PartialEq)]
pub struct PathBranch {
    pub(crate) bid: i64,
    /// Shared with the rows the view reads of this branch.
    pub id: Arc<str>,
    pub fork_seq: i64,
    pub(crate) anchored: bool,
}

/// The path from a branch up to its root (or, for some reads, to its nearest anchor), with
/// each branch's cutoff: the highest seq of its rows the view holds. The cutoffs are computed
/// in one place, `view::path`, from SPEC §2's rule.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchPath {
    /// The branch, in full.
    branch: Branch,
    /// The branch first, its root last.
    branches: Vec<PathBranch>,
    /// Position in `branches` by bid.
    positions: HashMap<i64, usize>,
    /// Each branch's cutoff, in path order.
    cutoffs: Vec<i64>,
}

impl BranchPath {
    /// The path of `branch` through `branches` (nearest first, `branch` itself first) with
    /// their cutoffs, in the same order.
    pub(crate) fn new(branch: Branch, branches: Vec<PathBranch>, cutoffs: &[i64]) -> BranchPath {
        debug_assert_eq!(branches.first().map(|b| b.bid), Some(branch.bid));
        let positions = branches.iter().enumerate().map(|(i, b)| (b.bid, i)).collect();
        BranchPath { branch, branches, positions, cutoffs: cutoffs.to_vec() }
    }

    pub fn branch(&self) -> &Branch {
        &self.branch
    }

    /// Whether the path goes up to the root (else it stops at an anchor).
    pub(crate) fn is_whole(&self) -> bool {
        self.branches.len() as i64 == self.branch.depth + 1
    }

    /// The branch, then its parent, … up to the root, or to the nearest anchor (`is_whole`).
    pub fn branches(&self) -> &[PathBranch] {
        &self.branches
    }

    /// The nearest anchored branch of the path (see view.rs): its position and bid.
    pub(crate) fn anchor(&self) -> Option<(usize, i64)> {
        self.branches.iter().enumerate().find(|(_, b)| b.anchored).map(|(i, b)| (i, b.bid))
    }

    /// The highest seq of the branch at `position` the view holds.
    pub(crate) fn cutoff(&self, position: usize) -> i64 {
        self.cutoffs[position]
    }

    /// The position of a branch on this path, by bid.
    pub(crate) fn position(&self, bid: i64) -> Option<usize> {
        self.positions.get(&bid).copied()
    }

    /// `[[bid, cutoff], …]` of the `count` nearest branches in path order, as PostgreSQL's view
    /// reads the path from a setting.
    pub(crate) fn cutoffs_json(&self, count: usize) -> String {
        let pairs: Vec<[i64; 2]> =
            self.branches.iter().zip(&self.cutoffs).take(count).map(|(b, &c)| [b.bid, c]).collect();
        serde_json::json!(pairs).to_string()
    }

    /// The id of a branch on this path, by bid, shared with the path; "?" off the path.
    pub(crate) fn id_of(&self, bid: i64) -> Arc<str> {
        self.id_on_path(bid).map_or_else(|| "?".into(), Arc::clone)
    }

    /// The id of a branch on this path, by bid, borrowed from the path.
    pub(crate) fn id_on_path(&self, bid: i64) -> Option<&Arc<str>> {
        self.positions.get(&bid).map(|&i| &self.branches[i].id)
    }
}

/// One visible core key. Its fields are declared in alphabetical order, as the view's rows are
/// (see the comment above `Event`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreEntry {
    /// The branch that wrote the visible value.
    pub branch: Arc<str>,
    pub importance: u8,
    pub key: String,
    pub seq: i64,
    pub ts: f64,
    /// Seconds after `ts` at which the value expires.
    pub ttl: Option<f64>,
    pub value: String,
}

impl CoreEntry {
    /// Characters of the entry's `key: value` line, the unit of the core budget.
    pub fn chars(&self) -> usize {
        line_chars(&self.key, &self.value)
    }
}

/// Characters of a core `key: value` line.
pub(crate) fn line_chars(key: &str, value: &str) -> usize {
    key.chars().count() + 2 + value.chars().count()
}

/// The kind prefix of conversation steps (`step:action`, …): recall events that consolidation
/// leaves to the conversation's own compaction.
pub const STEP_KIND: &str = "step:";

/// The kind of a conversation's compaction summaries: no recall event or summary takes it.
pub const CONVERSATION_KIND: &str = "conversation";

/// Whether an event of `kind` is a conversation step.
pub fn is_step(kind: &str) -> bool {
    kind.starts_with(STEP_KIND)
}

// The fields of the rows a view returns by the thousand are declared in the sorted order of
// their serialized names: memctl's JSON lists keys sorted (as `serde_json::Value`, a BTreeMap,
// writes them), and large results (`read`, `path`, `diff`) are written straight from these
// types, without building a Value (the tests below hold them to it).
//
// Names and tag lists are shared (`Arc<str>`, `Arc<[String]>`, serialized as plain strings and
// arrays): rows hold their writer's id from the path, and a read's events and records their
// kinds and tags from view/shared.rs. A whole view builds thousands of rows naming a few
// branches and kinds and carrying a few tag lists; a copy of each for every row was over a
// quarter of its instructions. A row's text is its own.

/// One recall event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub branch: Arc<str>,
    pub id: i64,
    pub kind: Arc<str>,
    pub tags: Arc<[String]>,
    pub text: String,
    pub ts: f64,
}

/// A summary standing in for excluded events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub branch: Arc<str>,
    pub event_ids: Vec<i64>,
    pub id: i64,
    pub kind: Arc<str>,
    pub text: String,
    pub ts: f64,
}

/// The visible version of an archival record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// The branch that wrote the visible version.
    pub branch: Arc<str>,
    /// Stable id: the seq of the record's first version.
    pub id: i64,
    /// Search rank, higher is better (search hits only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The seq of the visible version.
    pub seq: i64,
    pub tags: Arc<[String]>,
    pub text: String,
    pub ts: f64,
}

/// What adding an event or an archival record did: the new id, or the id of the identical row
/// the branch already holds, skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AppendOutcome {
    pub id: i64,
    pub skipped: bool,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde::Serialize;

    /// Serialized straight, as `read`, `path` and `diff` write their JSON, `row` reads as it
    /// does through `serde_json::Value`, which sorts keys.
    pub(crate) fn keys_sorted(row: &impl Serialize) {
        let straight = serde_json::to_string(row).unwrap();
        assert_eq!(straight, serde_json::to_value(row).unwrap().to_string());
    }

    #[test]
    fn rows_serialize_with_sorted_keys() {
        keys_sorted(&core_entry());
        keys_sorted(&event());
        keys_sorted(&summary());
        keys_sorted(&record(None));
        keys_sorted(&record(Some(0.5)));
        keys_sorted(&branch());
    }

    // Rows with every field set.

    pub(crate) fn core_entry() -> CoreEntry {
        CoreEntry {
            branch: "b".into(),
            importance: 2,
            key: "k".into(),
            seq: 1,
            ts: 1.5,
            ttl: Some(60.0),
            value: "v".into(),
        }
    }

    pub(crate) fn event() -> Event {
        Event {
            branch: "b".into(),
            id: 1,
            kind: "k".into(),
            tags: vec!["t".into()].into(),
            text: "x".into(),
            ts: 1.5,
        }
    }

    pub(crate) fn summary() -> Summary {
        Summary { branch: "b".into(), event_ids: vec![1], id: 2, kind: "k".into(), text: "s".into(), ts: 2.0 }
    }

    pub(crate) fn record(score: Option<f64>) -> Record {
        Record {
            branch: "b".into(),
            id: 3,
            score,
            seq: 4,
            tags: vec!["t".into()].into(),
            text: "r".into(),
            ts: 3.0,
        }
    }

    pub(crate) fn branch() -> Branch {
        Branch {
            bid: 2,
            depth: 1,
            fork_seq: 3,
            id: "b".into(),
            meta: serde_json::json!({"score": 0.5, "arm": "gpu"}),
            node_uid: Some("n".into()),
            parent: Some("root".into()),
            status: BranchStatus::Best,
            status_note: Some("why".into()),
            created_at: 1.5,
            anchored: false,
        }
    }
}
