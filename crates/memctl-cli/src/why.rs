//! `memctl why B KEY | --record ID | --event ID`: every write of a core key, archival record or
//! event, which one the branch sees and why, and why it cannot see the others.

use crate::invocation::Context;
use crate::output::{excerpt, timestamp};
use clap::Args;
use memctl_core::{Content, Subject, Why, Write as WriteRow};
use std::fmt::{self, Write};

pub const EXAMPLES: &str = "\
Examples:
  memctl why node-7 best_runtime_s      # which write of the key node-7 sees, and the others
  memctl why node-7 --record 42         # the versions of archival record 42
  memctl why node-7 --event 118         # is event 118 in node-7's view, or what hid it
  memctl --json why node-7 best_runtime_s | jq '.writes[] | select(.status == \"visible\")'

Every write is listed, in any branch, oldest first, with its status for the branch:
  visible     the row the branch sees          deletes     a delete that decides
  overridden  a newer write in the view wins    expired     its TTL ran out
  hidden      an event an exclusion hides       hides       the exclusion that hides it
  folded      a summary a newer one folds in    after_fork  written to an ancestor after the fork
  off_path    written in a branch that is not the branch or one of its ancestors
A key nobody wrote has an empty history (exit 0); an unknown record or event exits 3.";

#[derive(Debug, Args)]
#[command(
    override_usage = "memctl why <BRANCH> <KEY>\n       memctl why <BRANCH> --record <ID>\n       memctl why <BRANCH> --event <ID>"
)]
#[command(group = clap::ArgGroup::new("subject").required(true).args(["key", "record", "event"]))]
pub struct WhyArgs {
    /// The branch whose view is explained (id or node_uid)
    pub branch: String,
    /// A core key
    pub key: Option<String>,
    /// An archival record id
    #[arg(long, value_name = "ID", value_parser = crate::input::id)]
    pub record: Option<i64>,
    /// A recall event id
    #[arg(long, value_name = "ID", value_parser = crate::input::id)]
    pub event: Option<i64>,
}

pub fn run(ctx: &Context, args: WhyArgs) -> anyhow::Result<()> {
    let subject = match (args.key, args.record, args.event) {
        (Some(key), _, _) => Subject::Key(key),
        (_, Some(id), _) => Subject::Record(id),
        (_, _, Some(id)) => Subject::Event(id),
        _ => unreachable!("clap requires one subject"),
    };
    let why = ctx.open()?.why(&args.branch, &subject)?;
    ctx.emit_sorted_lines(&why, |out| write_text(out, &why));
    Ok(())
}

/// Writes the history as text, ending in a line break: as it is made, since a key written at
/// every level of a deep path has thousands of lines.
fn write_text(out: &mut dyn Write, why: &Why) -> fmt::Result {
    let subject = match &why.subject {
        Subject::Key(key) => format!("core key {key}"),
        Subject::Record(id) => format!("archival record {id}"),
        Subject::Event(id) => format!("event {id}"),
    };
    writeln!(out, "{} · {subject}: {}", why.branch, why.verdict.as_str())?;
    writeln!(out, "{}", why.reason)?;
    if why.writes.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nWrites, oldest first (* decides):")?;
    for w in &why.writes {
        let mark = if Some(w.seq) == why.decided_by { '*' } else { ' ' };
        write!(out, "{mark} seq {}  {}  {}  ", w.seq, w.branch, timestamp(w.ts))?;
        write_what(out, w)?;
        writeln!(out, "\n    {}: {}", w.status.as_str(), w.reason)?;
        if let Some(op) = &w.journal {
            write!(out, "    journal #{} {}", op.seq, op.op)?;
            match (&op.phase, &op.actor) {
                (Some(phase), Some(actor)) => write!(out, " (phase {phase}, actor {actor})")?,
                (Some(phase), None) => write!(out, " (phase {phase})")?,
                (None, Some(actor)) => write!(out, " (actor {actor})")?,
                (None, None) => {}
            }
            writeln!(out)?;
        }
        if let Some(origin) = &w.promoted_from {
            write!(out, "    promoted from {} (seq {})", origin.branch, origin.seq)?;
            match &origin.note {
                Some(note) => writeln!(out, ": {note}")?,
                None => writeln!(out)?,
            }
        }
    }
    Ok(())
}

/// Writes what a write did, in a few words.
fn write_what(out: &mut dyn Write, w: &WriteRow) -> fmt::Result {
    match &w.content {
        Content::Core { value: Some(value), importance, ttl, .. } => {
            write!(out, "set = {}  [importance {importance}", excerpt(value, 60))?;
            match ttl {
                Some(ttl) => write!(out, ", ttl {ttl} s]"),
                None => write!(out, "]"),
            }
        }
        Content::Core { value: None, .. } | Content::Version { text: None, .. } => write!(out, "delete"),
        Content::Version { text: Some(text), .. } => {
            write!(out, "{}: {}", w.action.as_str(), excerpt(text, 60))
        }
        Content::Event { kind, text, .. } => write!(out, "append [{kind}] {}", excerpt(text, 60)),
        Content::Exclusion { event_id } => write!(out, "exclude event {event_id}"),
        Content::Summary { kind, event_ids, .. } => {
            write!(out, "summarize [{kind}] {} event(s)", event_ids.len())
        }
    }
}
