//! `memctl archival add|get|update|delete|search`: long-term records.

use crate::input;
use crate::invocation::Context;
use crate::output::{no_match, record_line, timestamp};
use clap::{ArgGroup, Subcommand};
use memctl_core::{Record, Search};
use serde_json::json;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ArchivalCommand {
    /// Add a record (an identical record already in the branch is not stored twice)
    #[command(after_help = "\
Examples:
  memctl archival add node-1 'Tiling 64x64 beat 32x32 by 18% on A100' --tag result --tag gpu
  memctl archival add node-1 - --tag IDEA_MD < idea.md")]
    Add {
        /// Branch id or node_uid
        branch: String,
        /// The text, or `-` (or nothing, when piped) to read stdin
        #[arg(allow_hyphen_values = true)]
        text: Option<String>,
        /// A tag (repeatable)
        #[arg(long = "tag", short = 't', value_name = "TAG")]
        tags: Vec<String>,
    },
    /// Show a record as the branch sees it
    #[command(after_help = "Example:\n  memctl archival get node-7 42")]
    Get {
        /// Branch id or node_uid
        branch: String,
        /// Record id
        #[arg(value_parser = input::id)]
        id: i64,
    },
    /// Write a new version of a record in this branch (others keep theirs)
    #[command(after_help = "\
Examples:
  memctl archival update node-7 42 --text 'Tiling 64x64: +21% after pinning threads'
  memctl archival update node-7 42 --tag result --tag verified
Tags are kept unless new ones are given (or --clear-tags).")]
    #[command(group(ArgGroup::new("change").required(true).multiple(true).args(["text", "tags", "clear_tags"])))]
    Update {
        /// Branch id or node_uid
        branch: String,
        /// Record id
        #[arg(value_parser = input::id)]
        id: i64,
        /// New text, or `-` to read stdin
        #[arg(long)]
        text: Option<String>,
        /// New tags, replacing the old ones (repeatable)
        #[arg(long = "tag", short = 't', value_name = "TAG", conflicts_with = "clear_tags")]
        tags: Vec<String>,
        /// Remove every tag
        #[arg(long)]
        clear_tags: bool,
    },
    /// Delete a record from this branch's view (others keep it)
    #[command(visible_alias = "del", after_help = "Example:\n  memctl archival delete node-7 42")]
    Delete {
        /// Branch id or node_uid
        branch: String,
        /// Record id
        #[arg(value_parser = input::id)]
        id: i64,
    },
    /// Search the branch's records by words; without words, list the newest
    #[command(after_help = "\
Examples:
  memctl archival search node-7 'stencil tiling' -k 5
  memctl archival search node-7 --tag CORE_EVICT
  memctl archival search node-7 \"what's NOT working: -O3?\"   # any text is fine
  memctl archival search node-7 -- -O3                      # words that start with '-'
Words are OR-ed (records with more, or rarer, words rank first); tags are AND-ed.")]
    Search {
        /// Branch id or node_uid
        branch: String,
        /// Words to look for [default: list newest first] (after `--` if they start with '-')
        query: Option<String>,
        /// How many results [default: retrieval_k]
        #[arg(short, value_parser = input::positive)]
        k: Option<usize>,
        /// Only records with this tag, whole, as `add` stores it (repeatable, all required)
        #[arg(long = "tag", short = 't', value_name = "TAG")]
        tags: Vec<String>,
    },
}

pub fn run(ctx: &Context, command: ArchivalCommand) -> anyhow::Result<()> {
    let store = ctx.open()?;
    match command {
        ArchivalCommand::Add { branch, text, tags } => {
            let text = input::text(text.as_deref(), "record text")?;
            let outcome = store.archival_add(&branch, &text, &tags)?;
            ctx.report_added(&branch, outcome, "archival record");
        }
        ArchivalCommand::Get { branch, id } => {
            let record = store.archival_get(&branch, id)?;
            ctx.emit(json!({ "record": record }), || render_record(&record));
        }
        ArchivalCommand::Update { branch, id, text, tags, clear_tags } => {
            let text = text.map(|t| input::text(Some(&t), "record text")).transpose()?;
            let tags = (clear_tags || !tags.is_empty()).then_some(tags);
            let outcome = store.archival_update(&branch, id, text.as_deref(), tags.as_deref())?;
            ctx.emit(json!({"id": outcome.id, "seq": outcome.seq, "unchanged": outcome.unchanged}), || {
                match outcome.unchanged {
                    true => format!(
                        "Unchanged: {branch} already sees record {} with this text and these tags (seq {})",
                        outcome.id, outcome.seq
                    ),
                    false => format!(
                        "Updated record {} in {branch} (new version, seq {})",
                        outcome.id, outcome.seq
                    ),
                }
            });
        }
        ArchivalCommand::Delete { branch, id } => {
            store.archival_delete(&branch, id)?;
            ctx.emit(json!({"id": id, "deleted": true}), || {
                format!("Deleted record {id} from {branch}'s view (ancestors and siblings keep it)")
            });
        }
        ArchivalCommand::Search { branch, query, k, tags } => {
            let search = Search {
                query: query.clone().unwrap_or_default(),
                k: k.unwrap_or(store.config().retrieval_k),
                tags,
            };
            let results = store.archival_search(&branch, &search)?;
            ctx.emit(json!({ "results": results }), || {
                if results.is_empty() {
                    return no_match("record", &branch, search.query.as_str());
                }
                results.iter().map(record_line).collect::<Vec<_>>().join("\n")
            });
        }
    }
    Ok(())
}

fn render_record(record: &Record) -> String {
    format!(
        "Record {} (version seq {}, written by {} at {}){}\n\n{}",
        record.id,
        record.seq,
        record.branch,
        timestamp(record.ts),
        if record.tags.is_empty() { String::new() } else { format!("\nTags: {}", record.tags.join(", ")) },
        record.text
    )
}
