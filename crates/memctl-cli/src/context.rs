//! `memctl context`: the memory section a runner puts into a prompt.

use crate::invocation::Context;
use clap::Args;
use memctl_core::{Budget, Encoding};

pub const EXAMPLES: &str = "\
Examples:
  memctl context node-7                               # within memory_budget_chars
  memctl context node-7 --query 'tiling speedup' --budget-chars 24000
  memctl context node-7 --budget-tokens 2000 --encoding o200k_base
  memctl --json context node-7 | jq .sections.recall.dropped
Core lines come first (kept by importance, then newest; shown by key); recall (summaries, then
events newest first, the conversation's steps left to `memctl messages`) and archival (best first
for --query, else newest) share the rest. Whole items are dropped, never cut, so the text never
exceeds the budget; an item's lines after its first are indented. Reading the context writes
nothing.";

#[derive(Debug, Args)]
pub struct ContextArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// Words to pick the archival records by (default: the newest)
    #[arg(long)]
    pub query: Option<String>,
    /// Budget in characters [default: memory_budget_chars]
    #[arg(long, value_name = "N", conflicts_with_all = ["budget_tokens", "no_limit"])]
    pub budget_chars: Option<usize>,
    /// Budget in tokens of --encoding
    #[arg(long, value_name = "N", requires = "encoding", conflicts_with = "no_limit")]
    pub budget_tokens: Option<usize>,
    /// Tokenizer for --budget-tokens: cl100k_base or o200k_base
    #[arg(long, value_name = "NAME", requires = "budget_tokens", value_parser = crate::input::encoding)]
    pub encoding: Option<Encoding>,
    /// No budget: every line of the window
    #[arg(long)]
    pub no_limit: bool,
}

pub fn run(ctx: &Context, args: ContextArgs) -> anyhow::Result<()> {
    let budget = match (args.budget_tokens, args.encoding) {
        (Some(limit), Some(encoding)) => Budget::Tokens { limit, encoding },
        _ if args.no_limit => Budget::Unlimited,
        _ => Budget::Chars(args.budget_chars.unwrap_or(ctx.config.memory_budget_chars)),
    };
    let store = ctx.open()?;
    let rendered = store.render_context(&args.branch, args.query.as_deref(), budget)?;
    ctx.emit(serde_json::to_value(&rendered)?, || rendered.text.clone());
    Ok(())
}
