//! `memctl promote SRC DST --core KEY | --record ID | --event ID`: copies what one branch found
//! into another, typically an ancestor, so that every later fork of it knows.

use crate::invocation::Context;
use clap::Args;
use memctl_core::{PromoteOutcome, Promotion};

pub const EXAMPLES: &str = "\
Examples:
  memctl promote node-7 root --core best_tile --note 'found by node-7'
  memctl promote node-7 root --record 42 --event 118    # a failure every new fork should know
  memctl --json why root best_tile                       # shows where the value came from

The copies are new rows of DST: DST and the branches forked from it afterwards see them, DST's
existing descendants do not (they were forked before). Each item must be in SRC's view (exit 1,
nothing written, otherwise); an archival text or event DST already holds is not copied twice.";

#[derive(Debug, Args)]
#[command(
    override_usage = "memctl promote <SRC> <DST> [--core <KEY>]... [--record <ID>]... [--event <ID>]... [--note <TEXT>]"
)]
#[command(group = clap::ArgGroup::new("items").required(true).multiple(true).args(["core", "record", "event"]))]
pub struct PromoteArgs {
    /// The branch whose view holds the items (id or node_uid)
    pub src: String,
    /// The branch that receives copies (id or node_uid), e.g. an ancestor of SRC
    pub dst: String,
    /// A core key of SRC's view (repeatable)
    #[arg(long, value_name = "KEY")]
    pub core: Vec<String>,
    /// An archival record of SRC's view (repeatable)
    #[arg(long, value_name = "ID", value_parser = crate::input::id)]
    pub record: Vec<i64>,
    /// An event of SRC's view (repeatable)
    #[arg(long, value_name = "ID", value_parser = crate::input::id)]
    pub event: Vec<i64>,
    /// Why, kept with each copy (`why` and `core get --explain` show it)
    #[arg(long)]
    pub note: Option<String>,
}

pub fn run(ctx: &Context, args: PromoteArgs) -> anyhow::Result<()> {
    let items = Promotion { core: args.core, records: args.record, events: args.event };
    let outcome = ctx.open()?.promote(&args.src, &args.dst, &items, args.note.as_deref())?;
    ctx.emit_serialized(&outcome, || text(&outcome))
}

fn text(outcome: &PromoteOutcome) -> String {
    let mut out = vec![format!("Promoted from {} to {}:", outcome.src, outcome.dst)];
    for p in &outcome.promoted {
        let item = match p.layer {
            "core" => format!("core {}", p.item.as_str().unwrap_or_default()),
            layer => format!("{layer} #{}", p.item),
        };
        out.push(match (p.layer, p.skipped) {
            (_, true) => format!("  {item}: already in {} (#{}), not copied", outcome.dst, p.seq),
            ("core", false) => format!("  {item} (seq {})", p.seq),
            (_, false) => format!("  {item} → #{}", p.seq),
        });
    }
    out.join("\n")
}
