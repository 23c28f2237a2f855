//! `diff`: what one branch's view holds that another's does not, per layer, read through the
//! view's own readers (view/), so it can never disagree with what `read` shows.

use crate::error::Result;
use crate::rows::{BranchPath, CoreEntry, Event, Record, Summary};
use crate::store::Store;
use crate::stored_text::same_tags;
use crate::view;
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

// The fields of a diff are declared in alphabetical order: memctl's JSON lists keys sorted,
// and a diff of thousands of rows is written straight from these types (the test below holds
// them to it).

/// Where the two branches' paths meet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommonAncestor {
    /// The newest seq of that branch each side sees (None: all of its rows, i.e. the side is
    /// that branch itself).
    pub a_sees_up_to: Option<i64>,
    pub b_sees_up_to: Option<i64>,
    /// The deepest branch on both paths (A or B itself when one descends from the other).
    pub branch: String,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archival: Option<ArchivalDiff>,
    pub b: String,
    pub common_ancestor: Option<CommonAncestor>,
    /// Keys only in one view, and keys whose visible values differ (value, writer or seq).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<CoreDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<Sides<Event>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summaries: Option<Sides<Summary>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreDiff {
    pub changed: Vec<Changed<CoreEntry>>,
    pub only_a: Vec<CoreEntry>,
    pub only_b: Vec<CoreEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArchivalDiff {
    /// Records both see, at different versions.
    pub changed: Vec<Changed<Record>>,
    pub only_a: Vec<Record>,
    pub only_b: Vec<Record>,
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
    /// one snapshot of the database. Only what can differ is read: the two views hold the same
    /// rows up to the seq where their paths part (view::shared_until), so events and archival
    /// records are compared from the rows above it — and from the older events those exclude —
    /// while core and summaries, bounded by anchors, are compared whole. One side is read, then
    /// the other: the view loads one path at a time.
    pub fn diff(&self, a: &str, b: &str, layers: &[Layer]) -> Result<Diff> {
        let wanted = |layer: Layer| layers.is_empty() || layers.contains(&layer);
        self.read(|| {
            let (path_a, path_b) = (self.path(a)?, self.path(b)?);
            let (path_a, path_b) = (&*path_a, &*path_b);
            let common_ancestor = view::meeting(path_a, path_b).map(|(i, j)| {
                // A side sees all of its own branch, else up to its cutoff there.
                let sees = |path: &BranchPath, at: usize| (at > 0).then(|| path.cutoff(at));
                CommonAncestor {
                    branch: path_a.branches()[i].id.to_string(),
                    a_sees_up_to: sees(path_a, i),
                    b_sees_up_to: sees(path_b, j),
                }
            });
            let after = view::shared_until(path_a, path_b);
            let mut side_a = Side::read(self, path_a, after, &wanted)?;
            let mut side_b = Side::read(self, path_b, after, &wanted)?;
            // Older events an exclusion above `after` hides, and records written above it: each
            // is looked up in both views.
            let hidden = merged(&side_a.hidden, &side_b.hidden, |&id| id <= after);
            let touched = merged(&side_a.touched, &side_b.touched, |_| true);
            side_a.look_up(self, path_a, &hidden, &touched)?;
            side_b.look_up(self, path_b, &hidden, &touched)?;

            let recall = wanted(Layer::Recall).then(|| {
                let Sides { only_a: more_a, only_b: more_b } = sides(&side_a.among, &side_b.among, |e| e.id);
                let newest_first = |mut events: Vec<Event>, more: Vec<Event>| {
                    events.extend(more);
                    events.sort_by_key(|e| std::cmp::Reverse(e.id));
                    events
                };
                Sides {
                    only_a: newest_first(std::mem::take(&mut side_a.events), more_a),
                    only_b: newest_first(std::mem::take(&mut side_b.events), more_b),
                }
            });
            let archival = wanted(Layer::Archival).then(|| {
                let Sides { only_a, only_b } = sides(&side_a.records, &side_b.records, |r| r.id);
                let by_id: BTreeMap<i64, &Record> = side_b.records.iter().map(|r| (r.id, r)).collect();
                let changed = side_a
                    .records
                    .iter()
                    .filter_map(|ra| {
                        // Another version with the same text and tags is no change.
                        let rb = by_id.get(&ra.id).filter(|rb| {
                            rb.seq != ra.seq && (rb.text != ra.text || !same_tags(&rb.tags, &ra.tags))
                        })?;
                        Some(Changed { a: ra.clone(), b: (*rb).clone() })
                    })
                    .collect();
                ArchivalDiff { only_a, only_b, changed }
            });
            Ok(Diff {
                a: path_a.branch().id.clone(),
                b: path_b.branch().id.clone(),
                common_ancestor,
                core: wanted(Layer::Core).then(|| core_diff(&side_a.core, &side_b.core)),
                recall,
                summaries: wanted(Layer::Summaries)
                    .then(|| sides(&side_a.summaries, &side_b.summaries, |s| s.id)),
                archival,
            })
        })
    }
}

/// What a diff reads of one view.
#[derive(Default)]
struct Side {
    core: Vec<CoreEntry>,
    summaries: Vec<Summary>,
    /// Its events above the shared seq, newest first: in this view only.
    events: Vec<Event>,
    /// Events its exclusions above the shared seq hide.
    hidden: Vec<i64>,
    /// Records with a version above the shared seq.
    touched: Vec<i64>,
    /// Which of everyone's hidden events it shows, newest first.
    among: Vec<Event>,
    /// Its versions of everyone's touched records, newest version first.
    records: Vec<Record>,
}

impl Side {
    fn read(store: &Store, path: &BranchPath, after: i64, wanted: &impl Fn(Layer) -> bool) -> Result<Side> {
        let mut side = Side::default();
        if wanted(Layer::Core) {
            side.core = view::core(store, path)?;
        }
        if wanted(Layer::Summaries) {
            side.summaries = view::summaries(store, path)?;
        }
        if wanted(Layer::Recall) {
            side.events = view::events_after(store, path, after)?;
            side.hidden = view::excluded_after(store, path, after)?;
        }
        if wanted(Layer::Archival) {
            side.touched = view::records_after(store, path, after)?;
        }
        Ok(side)
    }

    fn look_up(&mut self, store: &Store, path: &BranchPath, hidden: &[i64], touched: &[i64]) -> Result<()> {
        if !hidden.is_empty() {
            self.among = view::events_among(store, path, hidden)?;
        }
        if !touched.is_empty() {
            self.records = view::records_among(store, path, touched)?;
        }
        Ok(())
    }
}

/// The ids of both lists that `keep` keeps, sorted, once each.
fn merged(a: &[i64], b: &[i64], keep: impl Fn(&i64) -> bool) -> Vec<i64> {
    let mut ids: Vec<i64> = a.iter().chain(b).copied().filter(keep).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn sides<T: Clone, K: Ord>(a: &[T], b: &[T], key: impl Fn(&T) -> K) -> Sides<T> {
    let keys_a: BTreeSet<K> = a.iter().map(&key).collect();
    let keys_b: BTreeSet<K> = b.iter().map(&key).collect();
    Sides {
        only_a: a.iter().filter(|x| !keys_b.contains(&key(x))).cloned().collect(),
        only_b: b.iter().filter(|x| !keys_a.contains(&key(x))).cloned().collect(),
    }
}

fn core_diff(a: &[CoreEntry], b: &[CoreEntry]) -> CoreDiff {
    let Sides { only_a, only_b } = sides(a, b, |e| e.key.clone());
    let by_key: BTreeMap<&str, &CoreEntry> = b.iter().map(|e| (e.key.as_str(), e)).collect();
    let changed = a
        .iter()
        .filter_map(|ea| by_key.get(ea.key.as_str()).map(|eb| (ea, *eb)))
        // The same value written twice (each branch its own, as important, as long-lived) is
        // no change; the same value pinned in one and evictable in the other is one.
        .filter(|(ea, eb)| {
            ea.seq != eb.seq && (ea.value != eb.value || ea.importance != eb.importance || ea.ttl != eb.ttl)
        })
        .map(|(ea, eb)| Changed { a: ea.clone(), b: eb.clone() })
        .collect();
    CoreDiff { only_a, only_b, changed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::tests::{core_entry, event, keys_sorted, record, summary};

    #[test]
    fn diffs_serialize_with_sorted_keys() {
        let common = CommonAncestor { a_sees_up_to: Some(1), b_sees_up_to: None, branch: "root".into() };
        keys_sorted(&Diff {
            a: "a".into(),
            archival: Some(ArchivalDiff {
                changed: vec![Changed { a: record(None), b: record(Some(1.0)) }],
                only_a: vec![record(None)],
                only_b: vec![],
            }),
            b: "b".into(),
            common_ancestor: Some(common),
            core: Some(CoreDiff {
                changed: vec![Changed { a: core_entry(), b: core_entry() }],
                only_a: vec![core_entry()],
                only_b: vec![],
            }),
            recall: Some(Sides { only_a: vec![event()], only_b: vec![] }),
            summaries: Some(Sides { only_a: vec![], only_b: vec![summary()] }),
        });
    }
}
