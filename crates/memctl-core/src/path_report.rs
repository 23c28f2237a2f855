//! `path`: the chain root → B, and what each node of it contributed to B's view — core keys
//! set, overridden and deleted, events added and excluded, consolidations, archival records
//! added, updated and deleted. Built from the view's rows (view::rows_along), each tagged with
//! the path node that wrote it, so a node's delta is exactly its part of B's view.

use crate::clock::utc_datetime;
use crate::error::Result;
use crate::one_line::push_shortened;
use crate::rows::Branch;
use crate::store::Store;
use crate::view;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::{self, Write};

/// The path of a branch, root first, with each node's delta.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathReport {
    pub branch: String,
    /// Root first, the branch last.
    pub nodes: Vec<NodeDelta>,
}

// The fields of the report are declared in alphabetical order: memctl's JSON lists keys
// sorted, and a report at depth 1,000 is written straight from these types (the test below
// holds them to it).

/// What one node of the path contributed to the branch's view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeDelta {
    pub archival: ArchivalDelta,
    pub branch: Branch,
    pub core: CoreDelta,
    pub recall: RecallDelta,
    /// The newest seq of this node the view holds; None for the branch itself (all its rows).
    pub sees_up_to: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CoreDelta {
    /// Keys this node deleted.
    pub deleted: Vec<KeyWrite>,
    /// Keys whose earlier value this node replaced.
    pub overridden: Vec<KeyWrite>,
    /// Keys without a value before this node.
    pub set: Vec<KeyWrite>,
}

/// A node's last write of a key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyWrite {
    pub key: String,
    /// The value it replaced (or deleted), from an earlier node.
    pub previous: Option<Previous>,
    pub seq: i64,
    /// Whether the branch's view shows this very write.
    pub shown: bool,
    /// None for a delete.
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Previous {
    pub branch: String,
    pub seq: i64,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecallDelta {
    /// How many of the events the node appended are the view's (before exclusions).
    pub added: usize,
    /// The first and last of them (ids).
    pub added_ids: Option<[i64; 2]>,
    /// The summaries the node wrote.
    pub consolidated: Vec<Consolidation>,
    /// Ids of the events the node excluded (evicted or consolidated).
    pub excluded: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consolidation {
    pub events: usize,
    pub kind: String,
    pub summary: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ArchivalDelta {
    pub added: Vec<i64>,
    pub deleted: Vec<i64>,
    pub updated: Vec<i64>,
}

/// The most characters a report quotes of a core value.
const VALUE_CHARS: usize = 80;

impl NodeDelta {
    pub fn is_empty(&self) -> bool {
        let core = &self.core;
        let recall = &self.recall;
        let archival = &self.archival;
        core.set.is_empty()
            && core.overridden.is_empty()
            && core.deleted.is_empty()
            && recall.added == 0
            && recall.excluded.is_empty()
            && recall.consolidated.is_empty()
            && archival.added.is_empty()
            && archival.updated.is_empty()
            && archival.deleted.is_empty()
    }
}

impl Store {
    /// The path of `branch`, root first, with what each node contributed to its view.
    pub fn path_report(&self, branch: &str) -> Result<PathReport> {
        self.read(|| {
            let path = self.path(branch)?;
            let mut nodes: Vec<NodeDelta> = self
                .path_branches(&path)?
                .into_iter()
                .enumerate()
                .map(|(pos, branch)| NodeDelta {
                    branch,
                    sees_up_to: pos.checked_sub(1).map(|below| path.branches()[below].fork_seq),
                    core: CoreDelta::default(),
                    recall: RecallDelta::default(),
                    archival: ArchivalDelta::default(),
                })
                .collect();

            let shown: HashMap<String, i64> =
                view::core(self, &path)?.into_iter().map(|e| (e.key, e.seq)).collect();
            let core = view::rows_along(self, &path, "core", "t.key, t.value, t.seq", |r| {
                Ok((r.get::<String>(2)?, r.get::<Option<String>>(3)?, r.get::<i64>(4)?))
            })?;
            // Oldest first, so the node nearest the root comes first; per node, its last write
            // of each key counts, against the value the key had before the node.
            let mut current: HashMap<String, (Option<String>, usize, i64)> = HashMap::new();
            let mut start = 0;
            while start < core.len() {
                let pos = core[start].0;
                let end = start + core[start..].iter().take_while(|(p, _)| *p == pos).count();
                let mut last: Vec<&(String, Option<String>, i64)> = Vec::new();
                for (_, row) in core[start..end].iter().rev() {
                    if !last.iter().any(|l| l.0 == row.0) {
                        last.push(row);
                    }
                }
                last.sort_by_key(|row| row.2);
                let delta = &mut nodes[pos].core;
                for (key, value, seq) in last {
                    let previous = current.get(key).and_then(|(value, at, seq)| {
                        value.as_ref().map(|v| Previous {
                            value: v.clone(),
                            branch: path.branches()[*at].id.to_string(),
                            seq: *seq,
                        })
                    });
                    let write = KeyWrite {
                        key: key.clone(),
                        value: value.clone(),
                        seq: *seq,
                        shown: shown.get(key) == Some(seq),
                        previous,
                    };
                    match (&write.value, &write.previous) {
                        (Some(_), None) => delta.set.push(write),
                        (Some(_), Some(_)) => delta.overridden.push(write),
                        (None, Some(_)) => delta.deleted.push(write),
                        // A delete of nothing (its value had run out): no change to the view.
                        (None, None) => {}
                    }
                    current.insert(key.clone(), (value.clone(), pos, *seq));
                }
                start = end;
            }

            for (node, (added, ends)) in nodes.iter_mut().zip(view::events_written_along(self, &path)?) {
                node.recall.added = added;
                node.recall.added_ids = ends;
            }
            for (pos, id) in
                view::rows_along(self, &path, "inherited_exclusions", "t.event_id", |r| r.get::<i64>(2))?
            {
                nodes[pos].recall.excluded.push(id);
            }
            let summaries = view::rows_along(
                self,
                &path,
                "inherited_summaries",
                "t.seq, t.kind, t.summarized_event_ids",
                |r| {
                    let events = view::parse_ids(r.value(4)?.as_str()?).len();
                    Ok(Consolidation { summary: r.get(2)?, kind: r.get(3)?, events })
                },
            )?;
            for (pos, consolidation) in summaries {
                nodes[pos].recall.consolidated.push(consolidation);
            }
            let archival =
                view::rows_along(self, &path, "archival", "t.record_id, t.seq, t.text IS NULL", |r| {
                    Ok((r.get::<i64>(2)?, r.get::<i64>(3)?, r.get::<bool>(4)?))
                })?;
            for (pos, (record, seq, deleted)) in archival {
                let delta = &mut nodes[pos].archival;
                let list = match (deleted, record == seq) {
                    (true, _) => &mut delta.deleted,
                    (false, true) => &mut delta.added,
                    (false, false) => &mut delta.updated,
                };
                if list.last() != Some(&record) {
                    list.push(record);
                }
            }
            nodes.reverse();
            Ok(PathReport { branch: path.branch().id.clone(), nodes })
        })
    }
}

impl PathReport {
    /// Markdown: one paragraph per node, root first, its delta as bullets. No headings, so it
    /// fits under any heading of a larger document (the paper's appendix).
    pub fn markdown(&self) -> String {
        let mut out = vec![format!(
            "Root first; each node lists what it contributed to the memory of `{}`.",
            self.branch
        )];
        for (i, node) in self.nodes.iter().enumerate() {
            let b = &node.branch;
            let uid = b.node_uid.as_ref().map_or(String::new(), |u| format!(" (node `{u}`)"));
            let sees = match node.sees_up_to {
                Some(seq) => format!("`{}` sees its rows up to seq {seq}", self.branch),
                None => "all of its rows".to_string(),
            };
            out.push(format!(
                "\n**{}. `{}`**{uid} — depth {}, created {}; {sees}.\n",
                i + 1,
                b.id,
                b.depth,
                utc_datetime(b.created_at)
            ));
            let written = out.len();
            // Pushing to a vector cannot fail.
            let _ = node.each_line(|line| {
                out.push(format!("- {line}"));
                Ok(())
            });
            if out.len() == written {
                out.push("- No memory written.".to_string());
            }
        }
        out.join("\n")
    }
}

impl NodeDelta {
    /// Hands `emit` the delta as short lines of text (plain, and valid markdown), one per kind
    /// of change, each made in one reused buffer: a report at depth 1,000 has thousands.
    pub fn each_line(&self, mut emit: impl FnMut(&str) -> fmt::Result) -> fmt::Result {
        let mut line = String::new();
        let core = &self.core;
        if !core.set.is_empty() {
            begin(&mut line, "Core set: ");
            for (i, w) in core.set.iter().enumerate() {
                separate(&mut line, i, "; ");
                key_value(&mut line, w);
            }
            emit(&line)?;
        }
        if !core.overridden.is_empty() {
            begin(&mut line, "Core overridden: ");
            for (i, w) in core.overridden.iter().enumerate() {
                separate(&mut line, i, "; ");
                key_value(&mut line, w);
                if let Some(previous) = &w.previous {
                    line.push_str(" (was ");
                    push_shortened(&mut line, &previous.value, VALUE_CHARS);
                    line.push(')');
                }
            }
            emit(&line)?;
        }
        if !core.deleted.is_empty() {
            begin(&mut line, "Core deleted: ");
            for (i, w) in core.deleted.iter().enumerate() {
                separate(&mut line, i, ", ");
                line.push_str(&w.key);
            }
            emit(&line)?;
        }
        let recall = &self.recall;
        if let Some([first, last]) = recall.added_ids {
            begin(&mut line, "Recall: ");
            write!(line, "{} added (", count(recall.added, "event"))?;
            match recall.added {
                1 => write!(line, "#{first})")?,
                2 => write!(line, "#{first}, #{last})")?,
                _ => write!(line, "#{first} … #{last})")?,
            }
            emit(&line)?;
        }
        if !recall.consolidated.is_empty() {
            begin(&mut line, "Consolidated: ");
            for (i, c) in recall.consolidated.iter().enumerate() {
                separate(&mut line, i, "; ");
                write!(line, "summary #{} [{}] of {}", c.summary, c.kind, count(c.events, "event"))?;
            }
            emit(&line)?;
        }
        if !recall.excluded.is_empty() {
            begin(&mut line, "Excluded from the view: ");
            line.push_str(&count(recall.excluded.len(), "event"));
            emit(&line)?;
        }
        let archival = &self.archival;
        for (what, ids) in
            [("added", &archival.added), ("updated", &archival.updated), ("deleted", &archival.deleted)]
        {
            if !ids.is_empty() {
                begin(&mut line, "Archival ");
                write!(line, "{what}: ")?;
                for (i, id) in ids.iter().enumerate() {
                    separate(&mut line, i, ", ");
                    write!(line, "#{id}")?;
                }
                emit(&line)?;
            }
        }
        Ok(())
    }
}

/// Starts the next line with `head`.
fn begin(line: &mut String, head: &str) {
    line.clear();
    line.push_str(head);
}

/// `sep` before every item of a list but the first (the `i`th).
fn separate(line: &mut String, i: usize, sep: &str) {
    if i > 0 {
        line.push_str(sep);
    }
}

/// `key = value`, the value shortened (empty for a delete).
fn key_value(line: &mut String, w: &KeyWrite) {
    line.push_str(&w.key);
    line.push_str(" = ");
    push_shortened(line, w.value.as_deref().unwrap_or(""), VALUE_CHARS);
}

fn count(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::tests::{branch, keys_sorted};

    #[test]
    fn reports_serialize_with_sorted_keys() {
        let write = KeyWrite {
            key: "k".into(),
            previous: Some(Previous { branch: "root".into(), seq: 1, value: "old".into() }),
            seq: 4,
            shown: true,
            value: Some("new".into()),
        };
        let node = NodeDelta {
            archival: ArchivalDelta { added: vec![5], deleted: vec![6], updated: vec![7] },
            branch: branch(),
            core: CoreDelta {
                deleted: vec![write.clone()],
                overridden: vec![write.clone()],
                set: vec![write],
            },
            recall: RecallDelta {
                added: 2,
                added_ids: Some([8, 9]),
                consolidated: vec![Consolidation { events: 3, kind: "note".into(), summary: 10 }],
                excluded: vec![11],
            },
            sees_up_to: Some(12),
        };
        keys_sorted(&PathReport { branch: "b".into(), nodes: vec![node] });
    }
}
