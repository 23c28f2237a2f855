//! `memctl migrate`: copies a run to another database — an SQLite file to a PostgreSQL server
//! or back — and checks that every branch reads the same in both.

use crate::invocation::Context;
use crate::output::count;
use clap::Args;
use memctl_core::{Clock, Error, Store, Topic};
use std::path::PathBuf;

pub const EXAMPLES: &str = "\
Examples:
  memctl migrate --from run.sqlite --to postgres://memctl@db-host/run     # laptop → cluster
  memctl migrate --from postgres://memctl@db-host/run --to final.sqlite   # and back

Every row is copied as stored: branches, core, recall, archival, summaries, exclusions, the
journal, with their seqs, ids and timestamps, so the copy is the same run. The destination must
hold no run yet: a new SQLite file, or a PostgreSQL database without memctl's schema or with an
empty one (its schema, or the file, is created first). The rows are copied in one transaction,
checked before it commits: every branch's view must be identical in both databases, and so must
the journal; otherwise no row is written. --db is not used. The source is only read (a source
from an older memctl is first brought up to date, as every command does).";

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The database holding the run: an SQLite file or a postgres:// URL
    #[arg(long, value_name = "PATH|URL")]
    pub from: PathBuf,
    /// Where to copy it: a new SQLite file or a postgres:// URL (created if needed)
    #[arg(long, value_name = "PATH|URL")]
    pub to: PathBuf,
}

pub fn run(ctx: &Context, args: MigrateArgs) -> anyhow::Result<()> {
    let mut from = ctx.open_at(&args.from, false).map_err(|e| match e.topic() {
        // The CLI's advice for these names --db and `init`, which do not apply to a source.
        Some(Topic::NoDatabase | Topic::NotMemctlDatabase) => Error::new(e.kind(), e.message())
            .with_hint("--from names the database that holds the run: check its path or URL"),
        _ => e,
    })?;
    let mut to = ctx.open_at(&args.to, true)?;
    // Both views at one instant: a TTL running out between the two reads is no difference.
    let now = Clock::Fixed(from.clock().now());
    from.set_clock(now);
    to.set_clock(now);
    let transfer = from.copy_to(&to)?;
    // The file a run is taken home in: whole without its WAL.
    to.checkpoint()?;
    let (from_label, to_label) = (Store::display_location(&args.from), Store::display_location(&args.to));
    let total: usize = transfer.rows.values().sum();
    ctx.emit(
        serde_json::json!({
            "from": from_label, "to": to_label, "rows": transfer.rows,
            "next_seq": transfer.next_seq, "branches_verified": transfer.branches_verified,
        }),
        || {
            format!(
                "Copied {} from {from_label} to {to_label}; {} read the same in both",
                count(total, "row", "rows"),
                count(transfer.branches_verified, "branch", "branches")
            )
        },
    );
    Ok(())
}
