//! `memctl diff A B`: what B's view has that A's does not, and the reverse, layer by layer.

use crate::invocation::Context;
use crate::output::{event_line, one_line, record_line, summary_line};
use clap::{Args, ValueEnum};
use memctl_core::{CoreEntry, Diff, Layer, Record};
use std::fmt::{self, Display, Write};

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
    ctx.emit_sorted_lines(&diff, |out| write_text(out, &diff));
    Ok(())
}

/// Writes the diff as text, ending in a line break: as it is made, since a diff can hold tens
/// of thousands of lines.
fn write_text(out: &mut dyn Write, diff: &Diff) -> fmt::Result {
    write!(out, "{}", heading(diff))?;
    if diff.is_empty() {
        return writeln!(out, "\nNo differences: {} and {} see the same memory.", diff.a, diff.b);
    }
    if let Some(core) = &diff.core {
        let mut section = Section::new(out, "Core");
        for entry in &core.only_a {
            section.line(format_args!("  - {}", core_line(entry)))?;
        }
        for entry in &core.only_b {
            section.line(format_args!("  + {}", core_line(entry)))?;
        }
        for c in &core.changed {
            let mut also = String::new();
            if c.a.importance != c.b.importance {
                also += &format!(", importance {} → {}", c.a.importance, c.b.importance);
            }
            if c.a.ttl != c.b.ttl {
                let ttl = |t: Option<f64>| t.map_or("none".to_string(), |t| format!("{t} s"));
                also += &format!(", ttl {} → {}", ttl(c.a.ttl), ttl(c.b.ttl));
            }
            section.line(format_args!(
                "  ~ {}: {} → {}  (← {} seq {} / ← {} seq {}{also})",
                c.a.key,
                one_line(&c.a.value),
                one_line(&c.b.value),
                c.a.branch,
                c.a.seq,
                c.b.branch,
                c.b.seq
            ))?;
        }
    }
    if let Some(recall) = &diff.recall {
        let mut section = Section::new(out, "Recall");
        for event in &recall.only_a {
            section.marked('-', event_line(event))?;
        }
        for event in &recall.only_b {
            section.marked('+', event_line(event))?;
        }
    }
    if let Some(summaries) = &diff.summaries {
        let mut section = Section::new(out, "Summaries");
        for summary in &summaries.only_a {
            section.marked('-', summary_line(summary))?;
        }
        for summary in &summaries.only_b {
            section.marked('+', summary_line(summary))?;
        }
    }
    if let Some(archival) = &diff.archival {
        let mut section = Section::new(out, "Archival");
        for record in &archival.only_a {
            section.marked('-', record_line(record))?;
        }
        for record in &archival.only_b {
            section.marked('+', record_line(record))?;
        }
        for c in &archival.changed {
            let tags_changed = !memctl_core::same_tags(&c.a.tags, &c.b.tags);
            let (a, b) = (version(&c.a, tags_changed), version(&c.b, tags_changed));
            section.line(format_args!("  ~ #{}: {a} → {b}", c.a.id))?;
        }
    }
    writeln!(out)
}

/// A layer's lines, written straight to the output (a diff can hold tens of thousands), under
/// the layer's heading, which is written with the first line: a layer without lines shows nothing.
struct Section<'a> {
    out: &'a mut dyn Write,
    name: &'static str,
    started: bool,
    /// The line being marked.
    line: String,
}

impl<'a> Section<'a> {
    fn new(out: &'a mut dyn Write, name: &'static str) -> Section<'a> {
        Section { out, name, started: false, line: String::new() }
    }

    fn line(&mut self, line: impl Display) -> fmt::Result {
        self.start()?;
        write!(self.out, "\n{line}")
    }

    /// A line of output.rs, which starts with two spaces, with a marker after them: `  - #12 …`.
    fn marked(&mut self, marker: char, line: impl Display) -> fmt::Result {
        self.start()?;
        self.line.clear();
        write!(self.line, "{line}")?;
        let rest = self.line.strip_prefix("  ");
        debug_assert!(rest.is_some(), "output.rs lines start with two spaces");
        write!(self.out, "\n  {marker} {}", rest.unwrap_or(&self.line))
    }

    fn start(&mut self) -> fmt::Result {
        if !self.started {
            write!(self.out, "\n{}:", self.name)?;
            self.started = true;
        }
        Ok(())
    }
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

fn core_line(entry: &CoreEntry) -> String {
    format!("{}: {}  (← {} seq {})", entry.key, one_line(&entry.value), entry.branch, entry.seq)
}

/// A version of a record on a `~` line, with its tags when they changed (they may be all that did).
fn version(record: &Record, tags_changed: bool) -> String {
    let text = crate::output::excerpt(&record.text, 60);
    let tags = crate::output::tags_suffix(if tags_changed { &record.tags } else { &[] });
    format!("seq {} by {}: {text}{tags}", record.seq, record.branch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marker goes after the first line's two spaces, whatever the lines after it hold, and
    /// the heading comes with the first line only.
    #[test]
    fn sections_mark_lines_after_their_indent() {
        let mut out = "heading".to_string();
        let mut section = Section::new(&mut out, "Recall");
        section.marked('-', "  #1     text\n         more\n  #9").unwrap();
        section.marked('+', "  #2     next").unwrap();
        section.line("  ~ changed").unwrap();
        Section::new(&mut out, "Empty");
        assert_eq!(
            out,
            "heading\nRecall:\n  - #1     text\n         more\n  #9\n  + #2     next\n  ~ changed"
        );
    }
}
