//! `memctl import legacy`: a run of the Python memory store into memctl.

use crate::invocation::Context;
use crate::output::table;
use clap::{Args, Subcommand};
use memctl_core::{Error, LegacyDatabase};
use std::path::PathBuf;

pub const EXAMPLES: &str = "\
Examples:
  memctl --db run/memctl.sqlite import legacy run/memory/memory.sqlite
  memctl --json --db new.sqlite import legacy old/memory.sqlite | jq .converted
Reads a memory.sqlite written by the Python store (AI-Scientist-v2-HPC's MemoryManager) without
changing it, and writes its branches into the --db database (created if missing) in one
transaction: parents before children, so each child sees everything its ancestors wrote; where
two ancestors set one core key, the nearer one wins. Rows keep their timestamps, secrets are
redacted, search works at once. Prints what it converted and what it left out, and why.";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ImportCommand {
    /// Import a database of the Python memory store (memory.sqlite)
    #[command(after_help = EXAMPLES)]
    Legacy(LegacyArgs),
}

#[derive(Debug, Args)]
pub struct LegacyArgs {
    /// The Python store's database file (it is only read)
    pub path: PathBuf,
}

pub fn run(ctx: &Context, command: ImportCommand) -> anyhow::Result<()> {
    let ImportCommand::Legacy(args) = command;
    if same_file(&args.path, &ctx.db) {
        return Err(Error::invalid(format!(
            "{} is both the legacy database and the memctl database",
            args.path.display()
        ))
        .with_hint("write the import to another file: memctl --db memctl.sqlite import legacy …")
        .into());
    }
    // Read and check the legacy file before the target is created or opened.
    let legacy = LegacyDatabase::read(&args.path)?;
    let store = ctx.open()?;
    let report = store.import_legacy(legacy)?;
    ctx.emit(serde_json::to_value(&report)?, || {
        let c = &report.converted;
        let mut text = format!(
            "Imported {} into {}: {} branches, {} core values, {} events, {} archival records, \
             {} exclusions, {} summaries",
            report.source,
            ctx.db_label(),
            report.branches,
            c.core,
            c.events,
            c.archival,
            c.exclusions,
            c.summaries
        );
        for (title, rows) in [("Left out", &report.skipped), ("Converted with changes", &report.adjusted)] {
            if !rows.is_empty() {
                let rows: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| vec![r.count.to_string(), r.table.clone(), r.reason.clone()])
                    .collect();
                text += &format!("\n\n{title}:\n{}", table(&["ROWS", "TABLE", "WHY"], &rows));
            }
        }
        text
    });
    Ok(())
}

fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
