//! `memctl pressure` and `memctl consolidate`: how full a branch's memory is, and relief.

use crate::invocation::Context;
use crate::output::{count, fields};
use clap::Args;
use serde_json::json;

pub const PRESSURE_EXAMPLES: &str = "\
Examples:
  memctl pressure node-7
  memctl --json pressure node-7 | jq .recommendations
overall = 0.6 x core ratio + 0.4 x min(recall ratio, 1); levels low < 0.70 <= medium < 0.85 <=
high < 0.95 <= critical ([pressure_thresholds] in the configuration). archival counts the records
the branch sees (their current versions) and their characters.";

pub const CONSOLIDATE_EXAMPLES: &str = "\
Examples:
  memctl consolidate node-7
  MEMCTL_SUMMARIZER__COMMAND='python3 summarize.py' memctl consolidate node-7
When the branch sees more than recall_max_events x recall_consolidation_threshold events besides
its conversation steps (`compact` reduces those), all but the newest recall_max_events of them
are replaced per kind by a summary in this branch (the originals stay for its ancestors and
earlier children, and are copied to archival). With a summarizer configured the summaries come
from it; otherwise, or if it fails, they are extracts.";

#[derive(Debug, Args)]
pub struct BranchArg {
    /// Branch id or node_uid
    pub branch: String,
}

pub fn pressure(ctx: &Context, args: BranchArg) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let p = store.pressure(&args.branch)?;
    ctx.emit(serde_json::to_value(&p)?, || {
        let level = serde_json::to_value(p.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let mut text = format!("Memory pressure of {}: {level} ({:.3})\n", args.branch, p.overall_ratio);
        text += &fields(&[
            ("  core", format!("{} / {} chars ({:.2})", p.core.used, p.core.max, p.core.ratio)),
            ("  recall", recall_line(&p.recall)),
            (
                "  archival",
                format!("{}, {} chars", count(p.archival.count, "record", "records"), p.archival.chars),
            ),
        ]);
        if !p.recommendations.is_empty() {
            text += &format!("\nRecommended: {}", p.recommendations.join(", "));
        }
        text
    });
    Ok(())
}

pub fn consolidate(ctx: &Context, args: BranchArg) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let outcome = store.consolidate(&args.branch)?;
    for warning in &outcome.warnings {
        ctx.warn(warning);
    }
    ctx.emit(json!({"consolidated": outcome.consolidated, "summaries": outcome.summaries}), || {
        if outcome.consolidated == 0 {
            return format!("Nothing to consolidate: {} is within its recall bounds", args.branch);
        }
        let ids: Vec<String> = outcome.summaries.iter().map(i64::to_string).collect();
        format!(
            "Consolidated {} of {} into {}: {}",
            count(outcome.consolidated, "event", "events"),
            args.branch,
            count(outcome.summaries.len(), "summary", "summaries"),
            ids.join(", ")
        )
    });
    Ok(())
}

/// The recall line: events besides the steps against their bound, then the steps apart.
fn recall_line(recall: &memctl_core::RecallPressure) -> String {
    let line = format!("{} / {} events ({:.2})", recall.count, recall.max, recall.ratio);
    match recall.steps {
        0 => line,
        steps => format!(
            "{line}, besides {} (`compact` reduces those)",
            count(steps, "conversation step", "conversation steps")
        ),
    }
}
