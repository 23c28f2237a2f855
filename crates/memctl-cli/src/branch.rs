//! `memctl branch create|list|show|mark|set-uid` and `memctl fork`.

use crate::invocation::Context;
use crate::output::{count, excerpt, fields, table, timestamp, tree};
use clap::{Args, Subcommand, ValueEnum};
use memctl_core::{Branch, BranchStatus, Error, ErrorKind, ForkOutcome, MarkOutcome, Store, Tx};
use serde_json::{json, Value};

pub const FORK_EXAMPLES: &str = "\
Examples:
  memctl fork root node-1        # node-1 sees root's memory as of now
  memctl fork node-1             # a generated id, printed
  memctl fork - root             # '-' as parent makes a root
Forking an id that already exists under the same parent returns it (safe to retry);
under another parent it is a conflict (exit 4).";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum BranchCommand {
    /// Create a root branch (idempotent)
    #[command(after_help = "Example:\n  memctl branch create root")]
    Create {
        /// Branch id: 1-128 characters from A-Z a-z 0-9 . _ : @ / -
        id: String,
        /// The runner's data about the node, a JSON object (e.g. '{"score": 0.8}'); secrets in it are
        /// masked before storage
        #[arg(long, value_name = "JSON")]
        meta: Option<String>,
    },
    /// Show every branch as a tree, with its status
    #[command(
        after_help = "Examples:\n  memctl branch list\n  memctl branch list --status dead\n  memctl --json branch list"
    )]
    List {
        /// Only branches with this status, as a list
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
    },
    /// Show one branch: its path from the root and what it wrote itself
    #[command(after_help = "Example:\n  memctl branch show node-7")]
    Show {
        /// Branch id or node_uid
        branch: String,
    },
    /// Mark a branch alive, dead, best or pruned (gc collects dead and pruned ones; one branch of
    /// a tree is best: the one before becomes alive)
    #[command(after_help = MARK_EXAMPLES)]
    Mark {
        /// Branch id or node_uid
        branch: String,
        /// The branch's new status
        #[arg(value_enum)]
        status: StatusArg,
        /// Why (kept with the status, shown by `branch show` and `branch list`)
        #[arg(long)]
        note: Option<String>,
        /// Mark every branch under it too, but those marked best
        #[arg(long)]
        subtree: bool,
    },
    /// Give a branch a node_uid alias (usable wherever a branch is taken)
    #[command(after_help = "Example:\n  memctl branch set-uid 3f2a9c node-7")]
    SetUid {
        /// Branch id or current node_uid
        branch: String,
        /// The alias, e.g. the tree node's real id
        uid: String,
    },
}

const MARK_EXAMPLES: &str = "\
Examples:
  memctl branch mark node-7 best --note 'lowest runtime, 1.9 s'
  memctl branch mark node-4 dead --note 'segfaults with -O3'
  memctl branch mark node-2 pruned --subtree     # the node and everything under it

`export paper` takes the one `best` branch when --branch is not given; `gc` deletes dead and
pruned branches whose descendants are all dead or pruned too.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusArg {
    Alive,
    Dead,
    Best,
    Pruned,
}

impl From<StatusArg> for BranchStatus {
    fn from(status: StatusArg) -> BranchStatus {
        match status {
            StatusArg::Alive => BranchStatus::Alive,
            StatusArg::Dead => BranchStatus::Dead,
            StatusArg::Best => BranchStatus::Best,
            StatusArg::Pruned => BranchStatus::Pruned,
        }
    }
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// Parent branch (id or node_uid), or `-` for a new root
    pub parent: String,
    /// Id of the new branch [default: generated]
    pub id: Option<String>,
    /// The runner's data about the node, a JSON object (e.g. '{"score": 0.8}'); secrets in it are
    /// masked before storage
    #[arg(long, value_name = "JSON")]
    pub meta: Option<String>,
}

pub fn run(ctx: &Context, command: BranchCommand) -> anyhow::Result<()> {
    let store = ctx.open()?;
    match command {
        BranchCommand::Create { id, meta } => {
            let meta = parse_meta(meta.as_deref())?;
            let outcome = store.write(|tx| {
                let outcome = tx.create_root(&id)?;
                set_meta(tx, &outcome, meta.as_ref())
            })?;
            report_fork(ctx, &outcome);
        }
        BranchCommand::List { status } => list(ctx, &store, status.map(BranchStatus::from))?,
        BranchCommand::Mark { branch, status, note, subtree } => {
            let status = BranchStatus::from(status);
            let outcome = store.mark_branch(&branch, status, note.as_deref(), subtree)?;
            let mut value = serde_json::to_value(&outcome)?;
            value["status"] = json!(status.as_str());
            ctx.emit(value, || mark_text(&outcome, status));
        }
        BranchCommand::Show { branch } => show(ctx, &store, &branch)?,
        BranchCommand::SetUid { branch, uid } => {
            let branch = store.set_node_uid(&branch, &uid)?;
            ctx.emit(json!({"branch": branch.id, "node_uid": uid}), || {
                format!("Branch {} now answers to node_uid {uid}", branch.id)
            });
        }
    }
    Ok(())
}

pub fn fork(ctx: &Context, args: ForkArgs) -> anyhow::Result<()> {
    let meta = parse_meta(args.meta.as_deref())?;
    if args.parent == "-" && args.id.is_none() {
        return Err(Error::new(ErrorKind::Usage, "a new root needs an id")
            .with_hint("memctl fork - ROOT_ID")
            .into());
    }
    let store = ctx.open()?;
    let outcome = store.write(|tx| {
        let outcome = match (args.parent.as_str(), args.id.as_deref()) {
            ("-", Some(id)) => tx.create_root(id)?,
            (parent, id) => tx.fork(parent, id)?,
        };
        set_meta(tx, &outcome, meta.as_ref())
    })?;
    report_fork(ctx, &outcome);
    Ok(())
}

fn parse_meta(text: Option<&str>) -> memctl_core::Result<Option<Value>> {
    let Some(text) = text else { return Ok(None) };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Error::invalid(format!("--meta is not valid JSON: {e}")).with_hint(r#"e.g. --meta '{"score": 0.8}'"#)
    })?;
    Ok(Some(value))
}

fn set_meta(tx: &Tx<'_>, outcome: &ForkOutcome, meta: Option<&Value>) -> memctl_core::Result<ForkOutcome> {
    if let Some(meta) = meta {
        tx.set_branch_meta(&outcome.branch, meta)?;
    }
    Ok(outcome.clone())
}

fn report_fork(ctx: &Context, outcome: &ForkOutcome) {
    ctx.emit(serde_json::to_value(outcome).unwrap_or_default(), || {
        let place = match &outcome.parent {
            Some(parent) => {
                format!("under {parent} (depth {}, fork seq {})", outcome.depth, outcome.fork_seq)
            }
            None => format!("as a root (fork seq {})", outcome.fork_seq),
        };
        let verb = if outcome.created { "Created" } else { "Already exists:" };
        format!("{verb} {} {place}", outcome.branch)
    });
}

fn branch_json(branch: &Branch) -> serde_json::Value {
    json!({"id": branch.id, "node_uid": branch.node_uid, "parent": branch.parent,
           "depth": branch.depth, "fork_seq": branch.fork_seq, "ts": branch.created_at, "meta": branch.meta,
           "status": branch.status, "status_note": branch.status_note})
}

fn list(ctx: &Context, store: &Store, status: Option<BranchStatus>) -> anyhow::Result<()> {
    let mut branches = store.branches()?;
    if let Some(status) = status {
        branches.retain(|b| b.status == status);
    }
    let json = json!({"branches": branches.iter().map(branch_json).collect::<Vec<_>>()});
    ctx.emit(json, || match status {
        _ if branches.is_empty() && status.is_none() => {
            "No branches yet (create one with `memctl branch create ID`)".to_string()
        }
        None => tree(&branches),
        Some(status) if branches.is_empty() => format!("No branch is {}", status.as_str()),
        Some(_) => {
            let rows: Vec<Vec<String>> = branches
                .iter()
                .map(|b| {
                    let note = b.status_note.as_deref().map(|n| excerpt(n, 60)).unwrap_or_default();
                    vec![b.id.clone(), b.node_uid.clone().unwrap_or_default(), b.depth.to_string(), note]
                })
                .collect();
            table(&["BRANCH", "NODE_UID", "DEPTH", "NOTE"], &rows)
        }
    });
    Ok(())
}

fn show(ctx: &Context, store: &Store, name: &str) -> anyhow::Result<()> {
    let path = store.path(name)?;
    let branch = path.branch().clone();
    let own = store.own_counts(&branch.id)?;
    let root_first: Vec<&str> = path.branches().iter().rev().map(|b| &*b.id).collect();
    let json = json!({
        "branch": branch_json(&branch),
        "path": root_first,
        "own": own,
    });
    ctx.emit(json, || {
        fields(&[
            ("branch", branch.id.clone()),
            ("node_uid", branch.node_uid.clone().unwrap_or_else(|| "-".into())),
            ("parent", branch.parent.clone().unwrap_or_else(|| "- (root)".into())),
            ("depth", branch.depth.to_string()),
            ("fork seq", branch.fork_seq.to_string()),
            ("created", timestamp(branch.created_at).to_string()),
            ("meta", branch.meta.to_string()),
            ("status", status_text(&branch)),
            ("path", root_first.join(" → ")),
            ("own rows", format!("core {} · events {} · archival {}", own.core, own.events, own.archival)),
        ])
    });
    Ok(())
}

/// `dead — segfaults with -O3`: the status and its note.
fn status_text(branch: &Branch) -> String {
    match &branch.status_note {
        Some(note) => format!("{} — {note}", branch.status.as_str()),
        None => branch.status.as_str().to_string(),
    }
}

/// What `branch mark` says it did.
fn mark_text(outcome: &MarkOutcome, status: BranchStatus) -> String {
    let marked = &outcome.marked;
    let others = match marked.len() {
        1 => String::new(),
        n => format!(" and {} under it", count(n - 1, "branch", "branches")),
    };
    let mut text = format!("Marked {}{others} {}", marked[0], status.as_str());
    if !outcome.kept_best.is_empty() {
        text.push_str(&format!(" (kept best: {})", outcome.kept_best.join(", ")));
    }
    if let Some(earlier) = &outcome.was_best {
        text.push_str(&format!("; {earlier}, best before, is alive now"));
    }
    text
}
