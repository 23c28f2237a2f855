//! Branches: the nodes of the tree search, their ids and node_uid aliases, and the path from a
//! branch to its root with the per-ancestor cutoffs that define its view (SPEC §2, §4.1).

use crate::error::{Error, Result, Topic};
use crate::store::{Store, Tx};
use rusqlite::{OptionalExtension, Row};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::rc::Rc;

/// A branch as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Branch {
    #[serde(skip)]
    pub(crate) bid: i64,
    pub id: String,
    pub node_uid: Option<String>,
    pub parent: Option<String>,
    pub depth: i64,
    pub fork_seq: i64,
    #[serde(rename = "ts")]
    pub created_at: f64,
    /// The runner's own data about the node (a JSON object), e.g. its score.
    pub meta: serde_json::Value,
    /// Whether the branch holds its parent's view's anchor rows (view.rs).
    #[serde(skip)]
    pub(crate) anchored: bool,
}

/// What `fork` and `create_root` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForkOutcome {
    pub branch: String,
    pub parent: Option<String>,
    pub depth: i64,
    pub fork_seq: i64,
    /// False when the branch already existed with the same parent (an idempotent repeat).
    pub created: bool,
}

/// The path from a branch up to its root, with what each branch contributes to the view:
/// every row of the branch itself, and from each ancestor the rows up to the fork point of the
/// path's branch below it.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchPath {
    /// The branch first, its root last.
    branches: Vec<Branch>,
    /// Position in `branches` by bid.
    positions: HashMap<i64, usize>,
    /// `[[bid, cutoff], …]` in path order, as loaded into the view's path table.
    cutoffs_json: String,
}

impl BranchPath {
    fn new(branches: Vec<Branch>) -> BranchPath {
        let mut cutoffs = Vec::with_capacity(branches.len());
        let mut cutoff = i64::MAX;
        for branch in &branches {
            cutoffs.push([branch.bid, cutoff]);
            cutoff = branch.fork_seq;
        }
        let positions = branches.iter().enumerate().map(|(i, b)| (b.bid, i)).collect();
        BranchPath { branches, positions, cutoffs_json: json!(cutoffs).to_string() }
    }

    pub fn branch(&self) -> &Branch {
        &self.branches[0]
    }

    /// The branch, then its parent, … up to the root.
    pub fn branches(&self) -> &[Branch] {
        &self.branches
    }

    /// The nearest anchored branch of the path (see view.rs): its position and bid.
    pub(crate) fn anchor(&self) -> Option<(usize, i64)> {
        self.branches.iter().enumerate().find(|(_, b)| b.anchored).map(|(i, b)| (i, b.bid))
    }

    pub(crate) fn cutoffs_json(&self) -> &str {
        &self.cutoffs_json
    }

    /// The id of a branch on this path, by bid.
    pub(crate) fn id_of(&self, bid: i64) -> &str {
        self.positions.get(&bid).map_or("?", |&i| self.branches[i].id.as_str())
    }
}

/// Checks a caller-chosen branch id or node_uid: `[A-Za-z0-9._:@/-]{1,128}`.
pub fn validate_branch_id(id: &str, what: &str) -> Result<()> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || "._:@/-".contains(c);
    if id.is_empty() || id.len() > 128 || !id.chars().all(valid_char) || id == "-" {
        return Err(Error::invalid(format!(
            "invalid {what} '{id}': use 1 to 128 characters from A-Z a-z 0-9 . _ : @ / -"
        )));
    }
    Ok(())
}

const BRANCH_COLUMNS: &str =
    "b.bid, b.id, b.node_uid, p.id, b.depth, b.fork_seq, b.created_at, b.meta, b.anchored";

fn branch_from_row(row: &Row<'_>) -> rusqlite::Result<Branch> {
    Ok(Branch {
        bid: row.get(0)?,
        id: row.get(1)?,
        node_uid: row.get(2)?,
        parent: row.get(3)?,
        depth: row.get(4)?,
        fork_seq: row.get(5)?,
        created_at: row.get(6)?,
        meta: serde_json::from_str(&row.get::<_, String>(7)?).unwrap_or_default(),
        anchored: row.get(8)?,
    })
}

impl Store {
    /// Finds a branch by id, or else by node_uid. Unknown names are a not-found error.
    pub fn branch(&self, name: &str) -> Result<Branch> {
        self.find_branch(name)?.ok_or_else(|| unknown_branch(name))
    }

    pub(crate) fn find_branch(&self, name: &str) -> Result<Option<Branch>> {
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM branches b LEFT JOIN branches p ON p.bid = b.parent
             WHERE b.id = ?1
             UNION ALL
             SELECT {BRANCH_COLUMNS} FROM branches b LEFT JOIN branches p ON p.bid = b.parent
             WHERE b.node_uid = ?1 AND b.id <> ?1
             LIMIT 1"
        );
        Ok(self.conn.prepare_cached(&sql)?.query_row([name], branch_from_row).optional()?)
    }

    /// All branches, parents before children (by fork_seq).
    pub fn branches(&self) -> Result<Vec<Branch>> {
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM branches b LEFT JOIN branches p ON p.bid = b.parent
             ORDER BY b.fork_seq"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], branch_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The direct children of a branch, oldest first.
    pub fn children(&self, name: &str) -> Result<Vec<Branch>> {
        let parent = self.branch(name)?;
        let sql = format!(
            "SELECT {BRANCH_COLUMNS} FROM branches b JOIN branches p ON p.bid = b.parent
             WHERE b.parent = ?1 ORDER BY b.fork_seq"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([parent.bid], branch_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The path of a branch (itself first, root last), read once per handle in one query.
    /// Cached by branch id, which never changes (a node_uid may, so it is resolved each time).
    pub fn path(&self, name: &str) -> Result<Rc<BranchPath>> {
        if let Some(path) = self.cached_path(name) {
            return Ok(path);
        }
        let branch = self.branch(name)?;
        let path = Rc::new(self.read_path(&branch, false)?);
        self.cache_path(path.clone());
        Ok(path)
    }

    /// The path from `branch` up to its nearest anchored branch (or its root): all that
    /// resolving its core and summaries reads (view.rs), at most `anchor_every` levels.
    pub(crate) fn path_to_anchor(&self, branch: &Branch) -> Result<BranchPath> {
        self.read_path(branch, true)
    }

    fn read_path(&self, branch: &Branch, stop_at_anchor: bool) -> Result<BranchPath> {
        let sql = format!(
            "WITH RECURSIVE up(bid, step) AS (
                 SELECT ?1, 0
                 UNION ALL
                 SELECT b.parent, up.step + 1 FROM up JOIN branches b ON b.bid = up.bid
                 WHERE b.parent IS NOT NULL AND NOT (?2 AND b.anchored)
             )
             SELECT {BRANCH_COLUMNS} FROM up
             JOIN branches b ON b.bid = up.bid LEFT JOIN branches p ON p.bid = b.parent
             ORDER BY up.step"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let branches: Vec<Branch> = stmt
            .query_map(rusqlite::params![branch.bid, stop_at_anchor], branch_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(BranchPath::new(branches))
    }

    /// Creates a root branch (idempotent; a conflict if the id exists with a parent).
    pub fn create_root(&self, id: &str) -> Result<ForkOutcome> {
        self.write(|tx| tx.create_root(id))
    }

    /// Forks `id` (or a generated id) under `parent` (SPEC §4.1).
    pub fn fork(&self, parent: &str, id: Option<&str>) -> Result<ForkOutcome> {
        self.write(|tx| tx.fork(parent, id))
    }

    /// Sets the node_uid alias of a branch.
    pub fn set_node_uid(&self, name: &str, node_uid: &str) -> Result<Branch> {
        self.write(|tx| tx.set_node_uid(name, node_uid))
    }
}

fn uid_taken(name: &str, holder: &str) -> Error {
    Error::conflict(format!("'{name}' is already the node_uid of branch '{holder}'"))
        .with_hint("branch ids and node_uids share one namespace; choose another name")
}

pub(crate) fn unknown_branch(name: &str) -> Error {
    Error::not_found(format!("unknown branch '{name}'")).with_topic(Topic::UnknownBranch)
}

impl Tx<'_> {
    pub fn create_root(&self, id: &str) -> Result<ForkOutcome> {
        self.create_branch(None, id)
    }

    pub fn fork(&self, parent: &str, id: Option<&str>) -> Result<ForkOutcome> {
        let parent = self.branch(parent)?;
        match id {
            Some(id) => self.create_branch(Some(&parent), id),
            None => {
                // Deterministic for a given database state: derived from the seq it will get.
                let seq = self.peek_seq()?;
                let hash = blake3::hash(format!("{}\0{seq}", parent.id).as_bytes());
                self.create_branch(Some(&parent), &hash.to_hex()[..32])
            }
        }
    }

    pub(crate) fn create_branch(&self, parent: Option<&Branch>, id: &str) -> Result<ForkOutcome> {
        validate_branch_id(id, "branch id")?;
        if let Some(existing) = self.find_branch(id)? {
            if existing.id != id {
                return Err(uid_taken(id, &existing.id));
            }
            let same_parent = existing.parent.as_deref() == parent.map(|p| p.id.as_str());
            if !same_parent {
                let was =
                    existing.parent.as_deref().map_or("a root".to_string(), |p| format!("a child of '{p}'"));
                let asked = parent.map_or("a root".to_string(), |p| format!("a child of '{}'", p.id));
                return Err(Error::conflict(format!("branch '{id}' exists as {was}, not as {asked}"))
                    .with_hint("pick another id, or fork from the branch's real parent"));
            }
            return Ok(ForkOutcome {
                branch: existing.id,
                parent: existing.parent,
                depth: existing.depth,
                fork_seq: existing.fork_seq,
                created: false,
            });
        }
        let fork_seq = self.next_seq()?;
        let depth = parent.map_or(0, |p| p.depth + 1);
        // What the parent's view holds now is what the child inherits: kept so that counting a
        // view's events stays O(1) however deep it is.
        let inherited_events = match parent {
            Some(p) => crate::view::event_count(self, p.bid)?,
            None => 0,
        };
        // Every `anchor_every` levels the child keeps the rows of the parent's view that can
        // still decide a core key or show a summary, so reads stop there (view.rs).
        let every = self.config.anchor_every;
        let anchor = match parent {
            Some(p) if every > 0 && depth % every == 0 => {
                Some(crate::view::anchor_rows(self, &self.path_to_anchor(p)?)?)
            }
            _ => None,
        };
        let bid = self
            .conn
            .prepare_cached(
                "INSERT INTO branches(id, parent, fork_seq, depth, created_at, inherited_events, anchored)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING bid",
            )?
            .query_row(
                rusqlite::params![
                    id,
                    parent.map(|p| p.bid),
                    fork_seq,
                    depth,
                    self.now(),
                    inherited_events as i64,
                    anchor.is_some()
                ],
                |r| r.get::<_, i64>(0),
            )?;
        let mut insert = self.conn.prepare_cached("INSERT INTO anchor_rows(branch, seq) VALUES (?1, ?2)")?;
        for seq in anchor.iter().flatten() {
            insert.execute([bid, *seq])?;
        }
        let op = if parent.is_some() { "fork" } else { "branch.create" };
        self.journal(Some(bid), op, json!({"parent": parent.map(|p| &p.id), "fork_seq": fork_seq}))?;
        Ok(ForkOutcome {
            branch: id.to_string(),
            parent: parent.map(|p| p.id.clone()),
            depth,
            fork_seq,
            created: true,
        })
    }

    /// Replaces the runner's metadata of a branch; it must be a JSON object.
    pub fn set_branch_meta(&self, name: &str, meta: &serde_json::Value) -> Result<Branch> {
        if !meta.is_object() {
            return Err(Error::invalid(format!("branch metadata must be a JSON object, not {meta}")));
        }
        let branch = self.branch(name)?;
        if &branch.meta == meta {
            return Ok(branch);
        }
        self.conn
            .prepare_cached("UPDATE branches SET meta = ?1 WHERE bid = ?2")?
            .execute(rusqlite::params![meta.to_string(), branch.bid])?;
        self.forget_paths();
        self.journal(Some(branch.bid), "branch.set_meta", json!({ "meta": meta }))?;
        Ok(Branch { meta: meta.clone(), ..branch })
    }

    pub fn set_node_uid(&self, name: &str, node_uid: &str) -> Result<Branch> {
        validate_branch_id(node_uid, "node_uid")?;
        let branch = self.branch(name)?;
        if let Some(holder) = self.find_branch(node_uid)? {
            if holder.bid != branch.bid {
                return Err(uid_taken(node_uid, &holder.id));
            }
        }
        self.conn
            .prepare_cached("UPDATE branches SET node_uid = ?1 WHERE bid = ?2")?
            .execute(rusqlite::params![node_uid, branch.bid])?;
        self.forget_paths();
        self.journal(Some(branch.bid), "branch.set_uid", json!({"node_uid": node_uid}))?;
        Ok(Branch { node_uid: Some(node_uid.to_string()), ..branch })
    }
}

/// How many rows a branch wrote itself, per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OwnCounts {
    /// Core rows: values and deletions.
    pub core: i64,
    pub events: i64,
    /// Archival versions: adds, updates and deletions.
    pub archival: i64,
}

impl Store {
    /// The rows a branch wrote itself (not what it inherits).
    pub fn own_counts(&self, name: &str) -> Result<OwnCounts> {
        let bid = self.branch(name)?.bid;
        let count = |table: &str| -> Result<i64> {
            let sql = format!("SELECT count(*) FROM {table} WHERE branch = ?1");
            Ok(self.conn.prepare_cached(&sql)?.query_row([bid], |r| r.get(0))?)
        };
        Ok(OwnCounts { core: count("core")?, events: count("events")?, archival: count("archival")? })
    }
}
