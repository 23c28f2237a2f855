//! `memctl diff A B`: what B's view has that A's does not, and the reverse, layer by layer.

use crate::invocation::Context;
use crate::output::{event_line, one_line, record_line, summary_line};
use clap::{Args, ValueEnum};
use memctl_core::{CoreEntry, Diff, Layer, Record};

pub const EXAMPLES: &str = "\
Examples:
  memctl diff node-3 node-7                 # every layer; + only in node-7, - only in node-3
  memctl diff node-3 node-7 --layer core    # ~ marks keys both see with different values
  memctl --json diff root node-7 | jq '.core.only_b[].key'

Any two branches can be compared, not only parent and child. The common ancestor is the deepest
branch on both paths; each side sees it up to the fork of its own path's next branch.";

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The branch compared from (id or node_uid): its rows are marked -
    pub a: String,
    /// The branch compared to (id or node_uid): its rows are marked +
    pub b: String,
    /// Only these layers (repeatable) [default: all]
    #[arg(long = "layer", value_enum, value_name = "LAYER")]
    pub layers: Vec<LayerArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayerArg {
    Core,
    Recall,
    Summaries,
    Archival,
}

impl From<LayerArg> for Layer {
    fn from(layer: LayerArg) -> Layer {
        match layer {
            LayerArg::Core => Layer::Core,
            LayerArg::Recall => Layer::Recall,
            LayerArg::Summaries => Layer::Summaries,
            LayerArg::Archival => Layer::Archival,
        }
    }
}

pub fn run(ctx: &Context, args: DiffArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let layers: Vec<Layer> = args.layers.iter().map(|&l| l.into()).collect();
    let diff = store.diff(&args.a, &args.b, &layers)?;
    ctx.emit_sorted(&diff, || text(&diff));
    Ok(())
}

fn text(diff: &Diff) -> String {
    let mut out = vec![heading(diff)];
    if diff.is_empty() {
        out.push(format!("No differences: {} and {} see the same memory.", diff.a, diff.b));
        return out.join("\n");
    }
    if let Some(core) = &diff.core {
        let mut lines: Vec<String> = core.only_a.iter().map(|e| format!("  - {}", core_line(e))).collect();
        lines.extend(core.only_b.iter().map(|e| format!("  + {}", core_line(e))));
        lines.extend(core.changed.iter().map(|c| {
            format!(
                "  ~ {}: {} → {}  (← {} seq {} / ← {} seq {})",
                c.a.key,
                one_line(&c.a.value),
                one_line(&c.b.value),
                c.a.branch,
                c.a.seq,
                c.b.branch,
                c.b.seq
            )
        }));
        section(&mut out, "Core", lines);
    }
    if let Some(recall) = &diff.recall {
        let mut lines: Vec<String> =
            recall.only_a.iter().map(|e| marked('-', &event_line(e).to_string())).collect();
        lines.extend(recall.only_b.iter().map(|e| marked('+', &event_line(e).to_string())));
        section(&mut out, "Recall", lines);
    }
    if let Some(summaries) = &diff.summaries {
        let mut lines: Vec<String> = summaries.only_a.iter().map(|s| marked('-', &summary_line(s))).collect();
        lines.extend(summaries.only_b.iter().map(|s| marked('+', &summary_line(s))));
        section(&mut out, "Summaries", lines);
    }
    if let Some(archival) = &diff.archival {
        let mut lines: Vec<String> = archival.only_a.iter().map(|r| marked('-', &record_line(r))).collect();
        lines.extend(archival.only_b.iter().map(|r| marked('+', &record_line(r))));
        lines.extend(
            archival
                .changed
                .iter()
                .map(|c| format!("  ~ #{}: {} → {}", c.a.id, version(&c.a), version(&c.b))),
        );
        section(&mut out, "Archival", lines);
    }
    out.join("\n")
}

fn heading(diff: &Diff) -> String {
    let Some(common) = &diff.common_ancestor else {
        return format!("{} → {}: no common ancestor (different roots)", diff.a, diff.b);
    };
    let sees = |side: &str, upto: Option<i64>| match upto {
        Some(seq) => format!("{side} sees it up to seq {seq}"),
        None => format!("{side} is it"),
    };
    format!(
        "{} → {}: common ancestor {} ({}, {})",
        diff.a,
        diff.b,
        common.branch,
        sees(&diff.a, common.a_sees_up_to),
        sees(&diff.b, common.b_sees_up_to)
    )
}

/// A layer's heading and lines, if it has any.
fn section(out: &mut Vec<String>, name: &str, lines: Vec<String>) {
    if !lines.is_empty() {
        out.push(format!("{name}:"));
        out.extend(lines);
    }
}

fn core_line(entry: &CoreEntry) -> String {
    format!("{}: {}  (← {} seq {})", entry.key, one_line(&entry.value), entry.branch, entry.seq)
}

fn version(record: &Record) -> String {
    format!("seq {} by {}: {}", record.seq, record.branch, crate::output::excerpt(&record.text, 60))
}

/// A line of output.rs (which starts with two spaces) with a marker in front.
fn marked(marker: char, line: &str) -> String {
    format!("  {marker}{}", line.strip_prefix(' ').unwrap_or(line))
}
