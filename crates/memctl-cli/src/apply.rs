//! `memctl apply` and `memctl strip`: the `<memory_update>` blocks an LLM writes.

use crate::invocation::Context;
use crate::output::count;
use clap::Args;
use memctl_core::strip_blocks;
use serde_json::json;
use std::path::PathBuf;

pub const APPLY_EXAMPLES: &str = "\
Examples:
  llm_call ... | memctl apply node-7 -                 # the LLM's whole answer, block inside
  memctl apply node-7 response.txt --results-block     # prints <memory_results> for the LLM
  memctl --json apply node-7 - --lenient <<< '{\"core\": {\"best\": \"tile-64\"}}'
The first <memory_update>{…}</memory_update> block is used (or a bare JSON object); closing tags
may be in any case, with a space before the `>` or an escaped slash; a <memory_update> without a
closing tag is a block when a JSON object follows it (the block ends with the object), else a
mention; update blocks inside a <memory_results> block are skipped. Keys, applied
in this order in one transaction: core (mem_core_set), core_get (mem_core_get), core_delete
(mem_core_del), archival (mem_archival_write), archival_update (mem_archival_update),
archival_search (mem_archival_search), recall (mem_recall_append), recall_search
(mem_recall_search), recall_evict (mem_recall_evict), recall_summarize, consolidate.
Each item of a list (core entries, archival records and updates, recall events, steps, keys) is
checked and applied on its own and named in problems: core[\"key\"], archival[1] (from 0). Any
problem rejects the whole block (exit 1, every problem of every item listed); --lenient applies
every valid item and lists each skipped one (null in its place in a result list). Blocks after
the first are not applied: a warning says how many (ignored_blocks in JSON).";

pub const STRIP_EXAMPLES: &str = "\
Example:
  memctl strip response.txt > answer.txt
Removes every <memory_update> and <memory_results> block as `apply` reads them (see `memctl apply
--help`): closing tags in any case, with a space before the `>` or escaped
(<\\/memory_update>), and malformed blocks ending in }}/>. A tag that opens no block (\"the
<memory_results> above\", a <memory_update> followed by neither a JSON object nor a closing tag)
is kept, as is the text after it.
Only the blocks go, with the white space they leave behind (a block on lines of its own leaves no
blank line); an answer without blocks is printed unchanged, with no line break added.";

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// The LLM's text: a file, or `-` (or nothing, when piped) for stdin
    pub input: Option<String>,
    /// Apply the valid operations and items and list the skipped ones instead of rejecting the
    /// block
    #[arg(long)]
    pub lenient: bool,
    /// Print the <memory_results> block to feed back to the LLM (a `<` starting a memory tag's
    /// name in a stored text is shown as `&lt;`)
    #[arg(long)]
    pub results_block: bool,
}

#[derive(Debug, Args)]
pub struct StripArgs {
    /// The text: a file, or `-` (or nothing, when piped) for stdin
    pub input: Option<String>,
}

/// The input text, as it is: a file's contents, or stdin for `-` or when piped.
fn read_input(input: Option<&str>) -> memctl_core::Result<String> {
    match input {
        Some("-") | None => crate::input::stdin(input, "LLM text"),
        Some(path) => crate::input::file(&PathBuf::from(path)),
    }
}

pub fn apply(ctx: &Context, args: ApplyArgs) -> anyhow::Result<()> {
    let text = read_input(args.input.as_deref())?;
    let store = ctx.open()?;
    let outcome = store.apply_update(&args.branch, &text, args.lenient)?;
    if outcome.ignored_blocks > 0 {
        ctx.warn(&format!(
            "only an answer's first <memory_update> block is applied: {} after it ignored",
            count(outcome.ignored_blocks, "block", "blocks")
        ));
    }
    let block = outcome.results_block();
    let mut json = serde_json::to_value(&outcome)?;
    if args.results_block {
        json["results_block"] = json!(block);
    }
    ctx.emit(json, || {
        if args.results_block {
            return block.clone();
        }
        let mut lines = vec![format!(
            "Applied {} to {}{}",
            count(outcome.applied, "operation", "operations"),
            args.branch,
            if outcome.results.is_empty() {
                String::new()
            } else {
                format!(": {}", outcome.results.keys().cloned().collect::<Vec<_>>().join(", "))
            }
        )];
        lines.extend(outcome.skipped.iter().map(|s| format!("Skipped {}: {}", s.name(), s.reason)));
        if outcome.read_only {
            lines.push("The block only read memory: ask the LLM again with --results-block".into());
        }
        lines.join("\n")
    });
    Ok(())
}

pub fn strip(ctx: &Context, args: StripArgs) -> anyhow::Result<()> {
    let text = read_input(args.input.as_deref())?;
    let stripped = strip_blocks(&text);
    if ctx.json {
        ctx.emit(json!({ "text": stripped }), String::new);
    } else {
        // The answer as it is, line breaks and all (text output usually ends in one line break).
        crate::output::stdout_bytes(stripped.as_bytes());
    }
    Ok(())
}
