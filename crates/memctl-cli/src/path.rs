//! `memctl path B`: the chain root → B, and what each node contributed to B's view.

use crate::invocation::Context;
use crate::output::{stdout, stdout_json, timestamp};
use clap::{Args, ValueEnum};
use memctl_core::PathReport;
use std::fmt::{self, Write};

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
        _ => ctx.emit_sorted_lines(&report, |out| write_text(out, &report)),
    }
    Ok(())
}

/// Writes the report as text, ending in a line break: as it is made, since a path at depth
/// 1,000 has thousands of lines.
fn write_text(out: &mut dyn Write, report: &PathReport) -> fmt::Result {
    let chain: Vec<&str> = report.nodes.iter().map(|n| n.branch.id.as_str()).collect();
    writeln!(out, "Path {} ({} nodes)", chain.join(" → "), chain.len())?;
    for node in &report.nodes {
        let b = &node.branch;
        let uid = b.node_uid.as_ref().map_or(String::new(), |u| format!(" ({u})"));
        write!(out, "\n{}{uid}  depth {} · {} · ", b.id, b.depth, timestamp(b.created_at))?;
        match node.sees_up_to {
            Some(seq) => writeln!(out, "{} sees its rows up to seq {seq}", report.branch)?,
            None => writeln!(out, "all of its rows")?,
        }
        let mut written = false;
        node.each_line(|line| {
            written = true;
            writeln!(out, "  {line}")
        })?;
        if !written {
            writeln!(out, "  no memory written")?;
        }
    }
    Ok(())
}
