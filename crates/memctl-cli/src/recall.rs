//! `memctl recall append|list|search|evict`: the timeline of events.

use crate::input;
use crate::invocation::Context;
use crate::output::{count, event_line, no_match, summary_line};
use clap::{ArgGroup, Subcommand};
use memctl_core::EvictSelector;
use serde_json::json;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum RecallCommand {
    /// Append an event (an identical event already in the branch is not stored twice)
    #[command(after_help = "\
Examples:
  memctl recall append node-1 --kind metric 'runtime 12.4 s with -O3' --tag phase:tune
  make 2>&1 | tail -5 | memctl recall append node-1 --kind error -")]
    Append {
        /// Branch id or node_uid
        branch: String,
        /// Event kind, e.g. note, plan, metric, error, node_result
        #[arg(long, short)]
        kind: String,
        /// The text, or `-` (or nothing, when piped) to read stdin
        #[arg(allow_hyphen_values = true)]
        text: Option<String>,
        /// A tag (repeatable)
        #[arg(long = "tag", short = 't', value_name = "TAG")]
        tags: Vec<String>,
    },
    /// Summaries, then the newest events the branch sees
    #[command(
        after_help = "Examples:\n  memctl recall list node-7\n  memctl recall list node-7 --limit 100"
    )]
    List {
        /// Branch id or node_uid
        branch: String,
        /// How many events [default: recall_max_events]
        #[arg(long, short = 'n', value_parser = crate::input::positive)]
        limit: Option<usize>,
    },
    /// Search the whole visible timeline by words (best matches first)
    #[command(after_help = "\
Example:
  memctl recall search node-7 'segfault mpi' -k 5
Words are matched against each event's text, kind and tags; events matching more of them come
first, ties newest first. Inherited events count; excluded ones do not.")]
    Search {
        /// Branch id or node_uid
        branch: String,
        /// Words to look for (any characters are fine; after `--` if they start with '-')
        query: String,
        /// How many results
        #[arg(short, default_value_t = 10, value_parser = input::positive)]
        k: usize,
    },
    /// Move events out of the branch's view; their full text is kept in archival
    #[command(group(ArgGroup::new("which").required(true).args(["oldest", "kind", "ids"])))]
    #[command(after_help = "\
Examples:
  memctl recall evict node-7 --oldest 10
  memctl recall evict node-7 --kind debug
  memctl recall evict node-7 --id 41 --id 42
Inherited events are only hidden from this branch (and its later children), never deleted.")]
    Evict {
        /// Branch id or node_uid
        branch: String,
        /// The N oldest visible events besides conversation steps
        #[arg(long, value_name = "N", value_parser = input::positive)]
        oldest: Option<usize>,
        /// Every visible event of this kind
        #[arg(long)]
        kind: Option<String>,
        /// These events (repeatable)
        #[arg(long = "id", value_name = "ID", value_parser = input::id)]
        ids: Vec<i64>,
    },
}

pub fn run(ctx: &Context, command: RecallCommand) -> anyhow::Result<()> {
    let store = ctx.open()?;
    match command {
        RecallCommand::Append { branch, kind, text, tags } => {
            let text = input::text(text.as_deref(), "event text")?;
            let outcome = store.recall_append(&branch, &kind, &text, &tags)?;
            ctx.report_added(&branch, outcome, "event");
        }
        RecallCommand::List { branch, limit } => {
            let limit = limit.unwrap_or(store.config().recall_max_events);
            let view = store.recall_list(&branch, Some(limit))?;
            ctx.emit(json!({"summaries": view.summaries, "events": view.events}), || {
                let mut out = Vec::new();
                if !view.summaries.is_empty() {
                    out.push("Summaries:".to_string());
                    out.extend(view.summaries.iter().map(summary_line));
                }
                if view.events.is_empty() {
                    out.push(format!("{branch} sees no events"));
                } else {
                    out.push(format!("Events, newest first ({}):", view.events.len()));
                    out.extend(view.events.iter().map(|e| event_line(e).to_string()));
                }
                out.join("\n")
            });
        }
        RecallCommand::Search { branch, query, k } => {
            let events = store.recall_search(&branch, &query, k)?;
            ctx.emit(json!({ "events": events }), || {
                if events.is_empty() {
                    return no_match("event", &branch, &query);
                }
                events.iter().map(|e| event_line(e).to_string()).collect::<Vec<_>>().join("\n")
            });
        }
        RecallCommand::Evict { branch, oldest, kind, ids } => {
            let selector = match (oldest, kind) {
                (Some(n), _) => EvictSelector::Oldest(n),
                (None, Some(kind)) => EvictSelector::Kind(kind),
                (None, None) => EvictSelector::Ids(ids),
            };
            let outcome = store.recall_evict(&branch, &selector)?;
            ctx.emit(json!({"evicted": outcome.evicted, "archived": outcome.archived}), || {
                match outcome.archived {
                    None => format!("Nothing to evict from {branch}"),
                    Some(record) => format!(
                        "Evicted {} from {branch}'s view: {}\nTheir full text is archival record {record}",
                        count(outcome.evicted.len(), "event", "events"),
                        outcome.evicted.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
                    ),
                }
            });
        }
    }
    Ok(())
}
