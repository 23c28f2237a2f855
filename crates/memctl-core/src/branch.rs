//! Branches: creating roots and forks, node_uid aliases and the runner's metadata (SPEC §4.1).
//! Finding branches and their paths is the view's (view/path.rs).

use crate::db::params;
use crate::error::{Error, ErrorKind, Result};
use crate::rows::{Branch, BranchStatus};
use crate::store::{Store, Tx};
use crate::view;
use serde::Serialize;
use serde_json::json;

/// What `mark_branch` did: the ids marked, the branch first, and the note as stored
/// (redacted), which a `gc` may collect with the branch as soon as the mark commits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MarkOutcome {
    pub marked: Vec<String>,
    pub note: Option<String>,
    /// Branches under it marked best, which a subtree's mark leaves as they are.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_best: Vec<String>,
    /// The branch that was best before this one was marked best: alive now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was_best: Option<String>,
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

/// `name` is the id or the node_uid of another branch, `holder`.
fn name_taken(name: &str, holder: &Branch) -> Error {
    let role = if holder.id == name { "id" } else { "node_uid" };
    Error::conflict(format!("'{name}' is already the {role} of branch '{}'", holder.id))
        .with_hint("branch ids and node_uids share one namespace; choose another name")
}

impl Tx<'_> {
    /// Creates a root branch (idempotent; a conflict if the id exists with a parent).
    pub fn create_root(&self, id: &str) -> Result<ForkOutcome> {
        self.create_branch(None, id)
    }

    /// Forks `id` (or a generated id) under `parent` (SPEC §4.1).
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

    /// [`Tx::create_branch`] of a name some branch has: that branch if it is `id` with this
    /// parent (a fork or root creation retried), else an error saying whose name it is.
    fn outcome_for_taken_name(&self, parent: Option<&Branch>, id: &str) -> Result<ForkOutcome> {
        if self.collected_bid(id)?.is_some() {
            return Err(view::collected_name(id));
        }
        let existing = self.branch(id)?;
        if existing.id != id {
            return Err(name_taken(id, &existing));
        }
        let same_parent = existing.parent.as_deref() == parent.map(|p| p.id.as_str());
        if !same_parent {
            let was =
                existing.parent.as_deref().map_or("a root".to_string(), |p| format!("a child of '{p}'"));
            let asked = parent.map_or("a root".to_string(), |p| format!("a child of '{}'", p.id));
            return Err(Error::conflict(format!("branch '{id}' exists as {was}, not as {asked}"))
                .with_hint("pick another id, or fork from the branch's real parent"));
        }
        Ok(ForkOutcome {
            branch: existing.id,
            parent: existing.parent,
            depth: existing.depth,
            fork_seq: existing.fork_seq,
            created: false,
        })
    }

    pub(crate) fn create_branch(&self, parent: Option<&Branch>, id: &str) -> Result<ForkOutcome> {
        validate_branch_id(id, "branch id")?;
        self.refuse_secret_name(id, "branch id")?;
        // A new id (most forks) is no branch's name, collected or not: one probe says so, where
        // the checks of a name in use take three statements more.
        if self.conn.exists("SELECT 1 FROM branches WHERE id = ?1 OR node_uid = ?1", [id])? {
            return self.outcome_for_taken_name(parent, id);
        }
        let fork_seq = self.next_seq()?;
        let depth = parent.map_or(0, |p| p.depth + 1);
        // What the parent's view holds now is what the child inherits: kept so that counting a
        // view's events and steps stays O(1) however deep it is.
        let inherited = match parent {
            Some(p) => view::event_counts(self, p.bid)?,
            None => view::EventCounts::default(),
        };
        // Every `anchor_every` levels the child keeps the rows of the parent's view that can
        // still decide a core key or show a summary, so reads stop there (view.rs).
        let every = self.config.anchor_every;
        let anchor = match parent {
            Some(p) if every > 0 && depth % every == 0 => {
                Some(view::anchor_rows(self, &self.read_near_path(p, 1)?)?)
            }
            _ => None,
        };
        let bid = self.conn.insert_returning_key(
            "INSERT INTO branches(id, parent, fork_seq, depth, created_at, inherited_events, inherited_steps,
                                  anchored)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            "bid",
            params![
                id,
                parent.map(|p| p.bid),
                fork_seq,
                depth,
                self.now(),
                inherited.events as i64,
                inherited.steps as i64,
                anchor.is_some()
            ],
        )?;
        for seq in anchor.iter().flatten() {
            self.conn.execute("INSERT INTO anchor_rows(branch, seq) VALUES (?1, ?2)", [bid, *seq])?;
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
        let meta = self.redacted_value(meta);
        if branch.meta == meta {
            return Ok(branch);
        }
        self.conn
            .execute("UPDATE branches SET meta = ?1 WHERE bid = ?2", params![meta.to_string(), branch.bid])?;
        self.forget();
        self.journal(Some(branch.bid), "branch.set_meta", json!({ "meta": meta }))?;
        Ok(Branch { meta, ..branch })
    }

    /// Marks a branch, and with `subtree` every branch under it, with `status` (and a note, or
    /// none).
    pub fn mark_branch(
        &self,
        name: &str,
        status: BranchStatus,
        note: Option<&str>,
        subtree: bool,
    ) -> Result<MarkOutcome> {
        let best = status == BranchStatus::Best;
        if best && subtree {
            return Err(Error::new(
                ErrorKind::Usage,
                "one branch is best: --subtree cannot mark a subtree best",
            ));
        }
        let branch = self.branch(name)?;
        let mut marked = vec![branch.clone()];
        let mut kept_best = Vec::new();
        if subtree {
            // The search's result outlives a mark of the subtree above it (as `gc` would not).
            let (kept, others): (Vec<Branch>, Vec<Branch>) =
                self.descendants(&branch.id)?.into_iter().partition(|b| b.status == BranchStatus::Best);
            marked.extend(others);
            kept_best = kept.into_iter().map(|b| b.id).collect();
        }
        // Best is one branch of a tree: the one marked best before becomes alive (its note
        // stays, as history). Another root's tree is another search.
        let was_best = match best {
            true => {
                let path = self.path(&branch.id)?;
                let root = self.branch(&path.branches().last().expect("a path holds its branch").id)?;
                let tree = self.descendants(&root.id)?;
                std::iter::once(root)
                    .chain(tree)
                    .find(|b| b.status == BranchStatus::Best && b.bid != branch.bid)
            }
            false => None,
        };
        if let Some(earlier) = &was_best {
            self.conn.execute(
                "UPDATE branches SET status = ?1 WHERE bid = ?2",
                params![BranchStatus::Alive.as_str(), earlier.bid],
            )?;
        }
        // An empty note is none.
        let note = note.filter(|n| !n.trim().is_empty()).map(|n| self.redacted(n));
        for b in &marked {
            self.conn.execute(
                "UPDATE branches SET status = ?1, status_note = ?2 WHERE bid = ?3",
                params![status.as_str(), &note, b.bid],
            )?;
        }
        self.forget();
        let ids: Vec<String> = marked.into_iter().map(|b| b.id).collect();
        let was_best = was_best.map(|b| b.id);
        self.journal(
            Some(branch.bid),
            "branch.mark",
            json!({"status": status.as_str(), "note": note, "branches": ids, "kept_best": kept_best, "was_best": was_best}),
        )?;
        Ok(MarkOutcome { marked: ids, note, kept_best, was_best })
    }

    /// Sets the node_uid alias of a branch.
    pub fn set_node_uid(&self, name: &str, node_uid: &str) -> Result<Branch> {
        validate_branch_id(node_uid, "node_uid")?;
        self.refuse_secret_name(node_uid, "node_uid")?;
        if self.collected_bid(node_uid)?.is_some() {
            return Err(view::collected_name(node_uid));
        }
        let branch = self.branch(name)?;
        if let Some(holder) = self.find_branch(node_uid)? {
            if holder.bid != branch.bid {
                return Err(name_taken(node_uid, &holder));
            }
        }
        self.conn
            .execute("UPDATE branches SET node_uid = ?1 WHERE bid = ?2", params![node_uid, branch.bid])?;
        self.forget();
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
    /// The one branch marked `best`: what `export paper` exports when not told which.
    pub fn best_branch(&self) -> Result<Branch> {
        let best: Vec<Branch> =
            self.branches()?.into_iter().filter(|b| b.status == BranchStatus::Best).collect();
        match best.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(Error::new(ErrorKind::Usage, "no branch given, and no branch is marked best")
                .with_hint("pass --branch, or mark one: memctl branch mark BRANCH best")),
            many => {
                let ids: Vec<&str> = many.iter().map(|b| b.id.as_str()).collect();
                Err(Error::new(
                    ErrorKind::Usage,
                    format!("no branch given, and {} are marked best: {}", ids.len(), ids.join(", ")),
                )
                .with_hint("pass --branch, or mark all but one otherwise"))
            }
        }
    }

    /// The rows a branch wrote itself (not what it inherits).
    pub fn own_counts(&self, name: &str) -> Result<OwnCounts> {
        let bid = self.branch(name)?.bid;
        let count = |table: &str| -> Result<i64> {
            let sql = format!("SELECT count(*) FROM {table} WHERE branch = ?1");
            self.conn.query_one(&sql, [bid], |r| r.get(0))
        };
        Ok(OwnCounts { core: count("core")?, events: count("events")?, archival: count("archival")? })
    }
}
