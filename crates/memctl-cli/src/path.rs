//! `memctl path B`: the chain root → B, and what each node contributed to B's view.

use crate::invocation::Context;
use crate::output::{stdout, stdout_json, timestamp};
use clap::{Args, ValueEnum};
use memctl_core::PathReport;
use std::fmt::Write;

pub const EXAMPLES: &str = "\
Examples:
  memctl path node-7                    # root first; per node: core keys set, overridden and
                                        # deleted, events added, consolidations, records
  memctl path node-7 --format md        # the same as markdown (the paper's appendix)
  memctl --json path node-7 | jq '.nodes[] | {id: .branch.id, set: [.core.set[].key]}'

A node's delta is its part of node-7's view: for an ancestor, its rows up to the fork of the
path's next node; rows it wrote later are not in node-7's view and not listed.";

#[derive(Debug, Args)]
pub struct PathArgs {
    /// The branch at the end of the path (id or node_uid)
    pub branch: String,
    /// Output format (--json is the same as --format json)
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Md,
}

pub fn run(ctx: &Context, args: PathArgs) -> anyhow::Result<()> {
    let report = ctx.open()?.path_report(&args.branch)?;
    match args.format {
        Format::Json => stdout_json(&report),
        Format::Md if !ctx.json => stdout(&report.markdown()),
        _ => ctx.emit_sorted(&report, || text(&report)),
    }
    Ok(())
}

fn text(report: &PathReport) -> String {
    let chain: Vec<&str> = report.nodes.iter().map(|n| n.branch.id.as_str()).collect();
    let mut out = format!("Path {} ({} nodes)", chain.join(" → "), chain.len());
    for node in &report.nodes {
        let b = &node.branch;
        let uid = b.node_uid.as_ref().map_or(String::new(), |u| format!(" ({u})"));
        // Writing to a String cannot fail.
        let _ = write!(out, "\n\n{}{uid}  depth {} · {} · ", b.id, b.depth, timestamp(b.created_at));
        let _ = match node.sees_up_to {
            Some(seq) => write!(out, "{} sees its rows up to seq {seq}", report.branch),
            None => write!(out, "all of its rows"),
        };
        let lines = node.lines();
        if lines.is_empty() {
            out += "\n  no memory written";
        }
        for line in &lines {
            let _ = write!(out, "\n  {line}");
        }
    }
    out
}
