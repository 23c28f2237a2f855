//! `diff`: what one branch's view holds that another's does not, per layer. Computed from the
//! two whole views (view/), so it can never disagree with what `read` shows.

use crate::error::Result;
use crate::rows::{Branch, CoreEntry, Event, Record, Summary};
use crate::store::Store;
use crate::view::View;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The layers a diff can cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Core,
    Recall,
    Summaries,
    Archival,
}

impl Layer {
    pub const ALL: [Layer; 4] = [Layer::Core, Layer::Recall, Layer::Summaries, Layer::Archival];
}

/// Where the two branches' paths meet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommonAncestor {
    /// The deepest branch on both paths (A or B itself when one descends from the other).
    pub branch: String,
    /// The newest seq of that branch each side sees (None: all of its rows, i.e. the side is
    /// that branch itself).
    pub a_sees_up_to: Option<i64>,
    pub b_sees_up_to: Option<i64>,
}

/// A value or version both sides see, but differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Changed<T> {
    pub a: T,
    pub b: T,
}

/// One layer's differences: rows only A sees, only B sees, and (core, archival) changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sides<T> {
    pub only_a: Vec<T>,
    pub only_b: Vec<T>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    pub common_ancestor: Option<CommonAncestor>,
    /// Keys only in one view, and keys whose visible values differ (value, writer or seq).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<CoreDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<Sides<Event>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summaries: Option<Sides<Summary>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archival: Option<ArchivalDiff>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreDiff {
    pub only_a: Vec<CoreEntry>,
    pub only_b: Vec<CoreEntry>,
    pub changed: Vec<Changed<CoreEntry>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArchivalDiff {
    pub only_a: Vec<Record>,
    pub only_b: Vec<Record>,
    /// Records both see, at different versions.
    pub changed: Vec<Changed<Record>>,
}

impl Diff {
    /// Whether the two views are the same in every layer compared.
    pub fn is_empty(&self) -> bool {
        let core = self
            .core
            .as_ref()
            .is_none_or(|d| d.only_a.is_empty() && d.only_b.is_empty() && d.changed.is_empty());
        let recall = self.recall.as_ref().is_none_or(|d| d.only_a.is_empty() && d.only_b.is_empty());
        let summaries = self.summaries.as_ref().is_none_or(|d| d.only_a.is_empty() && d.only_b.is_empty());
        let archival = self
            .archival
            .as_ref()
            .is_none_or(|d| d.only_a.is_empty() && d.only_b.is_empty() && d.changed.is_empty());
        core && recall && summaries && archival
    }
}

impl Store {
    /// What B's view has that A's does not and the reverse, in `layers` (all when empty), from
    /// one snapshot of the database.
    pub fn diff(&self, a: &str, b: &str, layers: &[Layer]) -> Result<Diff> {
        let wanted = |layer: Layer| layers.is_empty() || layers.contains(&layer);
        self.read(|| {
            let (view_a, view_b) = (self.view(a)?, self.view(b)?);
            let (path_a, path_b) = (self.path(a)?, self.path(b)?);
            Ok(Diff {
                a: view_a.branch.id.clone(),
                b: view_b.branch.id.clone(),
                common_ancestor: common_ancestor(path_a.branches(), path_b.branches()),
                core: wanted(Layer::Core).then(|| core_diff(&view_a, &view_b)),
                recall: wanted(Layer::Recall).then(|| sides(&view_a.events, &view_b.events, |e| e.id)),
                summaries: wanted(Layer::Summaries)
                    .then(|| sides(&view_a.summaries, &view_b.summaries, |s| s.id)),
                archival: wanted(Layer::Archival).then(|| archival_diff(&view_a, &view_b)),
            })
        })
    }
}

/// The deepest branch on both paths (each nearest first), and how much of it each side sees: a
/// side sees all of its own branch, else up to the fork of its path's branch just below it.
fn common_ancestor(a: &[Branch], b: &[Branch]) -> Option<CommonAncestor> {
    let position_in_b: BTreeMap<&str, usize> =
        b.iter().enumerate().map(|(i, br)| (br.id.as_str(), i)).collect();
    let (i, j) =
        a.iter().enumerate().find_map(|(i, br)| position_in_b.get(br.id.as_str()).map(|&j| (i, j)))?;
    let sees = |path: &[Branch], at: usize| at.checked_sub(1).map(|below| path[below].fork_seq);
    Some(CommonAncestor { branch: a[i].id.clone(), a_sees_up_to: sees(a, i), b_sees_up_to: sees(b, j) })
}

fn sides<T: Clone, K: Ord>(a: &[T], b: &[T], key: impl Fn(&T) -> K) -> Sides<T> {
    let keys_a: BTreeSet<K> = a.iter().map(&key).collect();
    let keys_b: BTreeSet<K> = b.iter().map(&key).collect();
    Sides {
        only_a: a.iter().filter(|x| !keys_b.contains(&key(x))).cloned().collect(),
        only_b: b.iter().filter(|x| !keys_a.contains(&key(x))).cloned().collect(),
    }
}

fn core_diff(a: &View, b: &View) -> CoreDiff {
    let Sides { only_a, only_b } = sides(&a.core, &b.core, |e| e.key.clone());
    let by_key: BTreeMap<&str, &CoreEntry> = b.core.iter().map(|e| (e.key.as_str(), e)).collect();
    let changed = a
        .core
        .iter()
        .filter_map(|ea| by_key.get(ea.key.as_str()).map(|eb| (ea, *eb)))
        .filter(|(ea, eb)| ea.seq != eb.seq)
        .map(|(ea, eb)| Changed { a: ea.clone(), b: eb.clone() })
        .collect();
    CoreDiff { only_a, only_b, changed }
}

fn archival_diff(a: &View, b: &View) -> ArchivalDiff {
    let Sides { only_a, only_b } = sides(&a.archival, &b.archival, |r| r.id);
    let by_id: BTreeMap<i64, &Record> = b.archival.iter().map(|r| (r.id, r)).collect();
    let changed = a
        .archival
        .iter()
        .filter_map(|ra| by_id.get(&ra.id).map(|rb| (ra, *rb)))
        .filter(|(ra, rb)| ra.seq != rb.seq)
        .map(|(ra, rb)| Changed { a: ra.clone(), b: rb.clone() })
        .collect();
    ArchivalDiff { only_a, only_b, changed }
}
