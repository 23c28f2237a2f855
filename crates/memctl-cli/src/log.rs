//! `memctl log`: the operation journal.

use crate::invocation::Context;
use crate::output::{table, timestamp};
use clap::Args;
use serde_json::json;

pub const EXAMPLES: &str = "\
Examples:
  memctl log                 # every write, oldest first
  memctl log node-7 -n 20    # the last 20 writes to node-7
  memctl --actor worker-3 --phase debug core set node-7 k v   # how rows get their actor/phase";

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only this branch's writes
    pub branch: Option<String>,
    /// Only the newest N entries
    #[arg(long, short = 'n', value_parser = crate::input::positive)]
    pub limit: Option<usize>,
}

pub fn run(ctx: &Context, args: LogArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let ops = store.ops(args.branch.as_deref(), args.limit)?;
    ctx.emit(json!({ "ops": ops }), || {
        if ops.is_empty() {
            return match &args.branch {
                Some(branch) => format!(
                    "The journal holds no rows of {branch} (gc --journal deletes a collected branch's)"
                ),
                None => "The journal is empty".to_string(),
            };
        }
        let dash = || "-".to_string();
        let rows: Vec<Vec<String>> = ops
            .iter()
            .map(|op| {
                vec![
                    op.seq.to_string(),
                    timestamp(op.ts).to_string(),
                    op.branch.clone().unwrap_or_else(dash),
                    op.op.clone(),
                    op.phase.clone().unwrap_or_else(dash),
                    op.actor.clone().unwrap_or_else(dash),
                    crate::output::excerpt(&op.details.to_string(), 80),
                ]
            })
            .collect();
        table(&["SEQ", "TIME", "BRANCH", "OP", "PHASE", "ACTOR", "DETAILS"], &rows)
    });
    Ok(())
}
