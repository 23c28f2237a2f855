//! `memctl gc`: deletes the branches a search is done with, and the rows only they could see.

use crate::invocation::Context;
use crate::output::{count, table};
use clap::Args;
use memctl_core::{GcReport, GcRequest, VacuumOutcome};
use serde_json::json;

pub const EXAMPLES: &str = "\
Examples:
  memctl branch mark node-4 dead --subtree && memctl gc    # every dead or pruned subtree
  memctl gc --dry-run                                      # what it would delete, nothing more
  memctl gc --branch node-9 --subtree --vacuum             # node-9 and all under it, then shrink

By default gc collects every branch marked dead or pruned whose descendants are all dead or
pruned too. A collected branch's rows go, with its archival search entries; the views of all
other branches stay exactly as they were. Its journal rows stay (they are the history) unless
--journal is given, and its id stays taken. One transaction: other processes keep reading, and
writers wait for it as for any write.";

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Collect the branches marked dead or pruned (the default when no --branch is given)
    #[arg(long)]
    pub dead: bool,
    /// Collect this branch (repeatable; a branch with descendants needs --subtree)
    #[arg(long = "branch", value_name = "BRANCH")]
    pub branches: Vec<String>,
    /// With --branch: collect everything under it too
    #[arg(long, requires = "branches")]
    pub subtree: bool,
    /// Delete the journal rows of collected branches too (those an earlier gc collected as well)
    #[arg(long)]
    pub journal: bool,
    /// Report what would be collected and freed; change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Afterwards, return the freed pages to the file system
    #[arg(long, conflicts_with = "dry_run")]
    pub vacuum: bool,
}

pub fn run(ctx: &Context, args: GcArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let request = GcRequest {
        marked: args.dead,
        branches: args.branches,
        subtree: args.subtree,
        journal: args.journal,
        dry_run: args.dry_run,
    };
    let report = store.gc(&request)?;
    let vacuum = if args.vacuum { Some(store.vacuum()?) } else { None };
    let json = json!({
        "dry_run": report.dry_run, "collected": report.collected, "rows": report.rows,
        "bytes_freed": report.bytes_freed, "kept": report.kept, "vacuum": vacuum,
    });
    ctx.emit(json, || text(&report, vacuum.as_ref()));
    Ok(())
}

fn text(report: &GcReport, vacuum: Option<&VacuumOutcome>) -> String {
    let mut out = Vec::new();
    let verb = if report.dry_run { "Would collect" } else { "Collected" };
    if report.collected.is_empty() {
        let verb = if report.dry_run { "would delete" } else { "deleted" };
        out.push(match report.rows.journal {
            0 => "Nothing to collect.".to_string(),
            n => format!(
                "Nothing to collect; {verb} {} of branches collected before.",
                count(n, "journal row", "journal rows")
            ),
        });
    } else {
        let shown: Vec<&str> = report.collected.iter().take(10).map(String::as_str).collect();
        let more = report.collected.len() - shown.len();
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        out.push(format!(
            "{verb} {}: {}{more}",
            count(report.collected.len(), "branch", "branches"),
            shown.join(", ")
        ));
        let r = &report.rows;
        let rows = [
            ("core", r.core),
            ("events", r.events),
            ("archival", r.archival),
            ("exclusions", r.exclusions),
            ("summaries", r.summaries),
            ("anchors", r.anchors),
            ("promoted", r.promoted),
            ("journal", r.journal),
        ];
        let rows: Vec<Vec<String>> =
            rows.iter().filter(|(_, n)| *n > 0).map(|(t, n)| vec![t.to_string(), n.to_string()]).collect();
        if !rows.is_empty() {
            out.push(table(&["TABLE", "ROWS"], &rows));
        }
        let freed = if report.dry_run { "would free" } else { "freed" };
        out.push(format!(
            "{}, {freed} {} bytes of pages",
            count(report.rows.total(), "row", "rows"),
            report.bytes_freed
        ));
    }
    for kept in &report.kept {
        out.push(format!("Kept {}: {}", kept.branch, kept.reason));
    }
    if let Some(v) = vacuum {
        out.push(format!(
            "Vacuum ({}): the database went from {} to {} bytes",
            v.mode, v.bytes_before, v.bytes_after
        ));
    }
    out.join("\n")
}
