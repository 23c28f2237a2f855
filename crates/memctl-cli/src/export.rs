//! `memctl export paper|html|jsonl`: what researchers keep at the end of a run.

use crate::artifacts::{viewer_page, write_file, write_paper, write_viewer};
use crate::invocation::Context;
use crate::output;
use anyhow::Context as _;
use clap::{Args, Subcommand};
use memctl_core::Artifacts;
use serde_json::json;
use std::path::{Path, PathBuf};

pub const EXAMPLES: &str = "\
Examples:
  memctl export paper --branch node-42 --artifacts run/artifacts_index.json --out run/memory
  memctl export html --out run/memory_database.html
  memctl export jsonl --out run/memory_calls.jsonl
  memctl export jsonl | jq -c 'select(.op == \"mem_core_set\")'";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ExportCommand {
    /// final_memory_for_paper.md and .json for the best branch of the search
    #[command(after_help = PAPER_EXAMPLES)]
    Paper(PaperArgs),

    /// One self-contained HTML page to browse every branch's memory offline
    #[command(after_help = HTML_EXAMPLES)]
    Html(HtmlArgs),

    /// The operation journal as JSON lines, in the Python store's log format
    #[command(after_help = JSONL_EXAMPLES)]
    Jsonl(JsonlArgs),
}

// Hard-wrapped to read well in an 80-column terminal.
const PAPER_EXAMPLES: &str = "\
Examples:
  # ./final_memory_for_paper.md and .json, from memory alone
  memctl export paper --branch node-42
  memctl export paper --branch node-42 --artifacts best.json --out run/memory
  memctl export paper             # the branch marked best (branch mark B best)
The sections follow the Python store's final_memory_for_paper.md: Executive
Summary, Best Node Details, VLM Analysis & Visual Feedback, Top Nodes
Comparison, Memory-Based Analysis (title candidates, abstract material,
problem, hypothesis, method, setup, phase-0 info, results, ablations,
failure-modes timeline, threats, reproducibility, narrative), Resources Used,
Execution Feedback, Negative Results & Lessons Learned, Provenance Chain
(root -> best). Without an LLM every section is filled from memory; --artifacts
(the runner's JSON with best_node_data and top_nodes_data) fills the summary,
best-node, VLM and top-nodes sections. With [summarizer] command set, each
Memory-Based Analysis part with something recorded is rewritten through the
paper_section prompt (one cached call per part). The JSON holds every section
plus the branch's whole view.";

const HTML_EXAMPLES: &str = "\
Examples:
  memctl export html                    # ./memory_database.html
  memctl export html --out run/memory_database.html
  memctl export html --out - | gzip > memory_database.html.gz
The page needs no network: open it in any browser. It draws the branch tree
(search by id or node_uid, fold subtrees) and, for the branch you select, its
view: core, recall timeline, summaries and excluded events, archival records
(own rows marked apart from inherited ones), and the operations that wrote
them. Open FILE#branch=ID to start at a branch.";

const JSONL_EXAMPLES: &str = "\
Examples:
  memctl export jsonl > memory_calls.jsonl
  memctl export jsonl --out run/memory_calls.jsonl
One line per journal row, oldest first: {ts, op, layer, memory_type, branch_id,
node_id, phase, run_id, details} as the Python store logged them (op names
mapped, e.g. core.set -> mem_core_set), plus seq, actor and memctl_op.";

#[derive(Debug, Args)]
pub struct PaperArgs {
    /// The best branch (id or node_uid) [default: the one branch marked best]
    #[arg(long, short, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// The runner's artifacts index (JSON with best_node_data and top_nodes_data)
    #[arg(long, value_name = "FILE")]
    pub artifacts: Option<PathBuf>,
    /// Directory to write final_memory_for_paper.md and .json into
    #[arg(long, short, value_name = "DIR", default_value = ".", value_parser = crate::input::directory)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct HtmlArgs {
    /// Where to write the page (- for stdout)
    #[arg(long, short, value_name = "FILE", default_value = "memory_database.html")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct JsonlArgs {
    /// Write to FILE instead of stdout (- is stdout too)
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(ctx: &Context, command: ExportCommand) -> anyhow::Result<()> {
    match command {
        ExportCommand::Paper(args) => paper(ctx, args),
        ExportCommand::Html(args) => html(ctx, args),
        ExportCommand::Jsonl(args) => jsonl(ctx, args),
    }
}

fn paper(ctx: &Context, args: PaperArgs) -> anyhow::Result<()> {
    let artifacts = match &args.artifacts {
        Some(path) => {
            let text = crate::input::file(path)?;
            Some(Artifacts::parse(&text).with_context(|| path.display().to_string())?)
        }
        None => None,
    };
    let store = ctx.open()?;
    let branch = match args.branch {
        Some(branch) => branch,
        None => store.best_branch()?.id,
    };
    let written = write_paper(&store, &branch, artifacts.as_ref(), &args.out)?;
    for warning in &written.warnings {
        ctx.warn(warning);
    }
    ctx.emit(
        json!({"branch": written.branch, "markdown": written.markdown, "json": written.json,
               "sections": written.sections}),
        || format!("Wrote {} and {}", written.markdown.display(), written.json.display()),
    );
    Ok(())
}

fn html(ctx: &Context, args: HtmlArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let title = match memctl_core::Store::url(&ctx.db) {
        Some(_) => ctx.db_label(),
        None => ctx.db.file_name().map_or_else(|| ctx.db_label(), |n| n.to_string_lossy().into()),
    };
    // The page is the data; --json changes nothing here.
    if is_stdout(&args.out) {
        output::stdout_bytes(viewer_page(&store, &title)?.0.as_bytes());
        return Ok(());
    }
    let (bytes, branches) = write_viewer(&store, &title, &args.out)?;
    ctx.emit(json!({"out": args.out, "bytes": bytes, "branches": branches}), || {
        format!("Wrote {} ({bytes} bytes, {branches} branches)", args.out.display())
    });
    Ok(())
}

fn jsonl(ctx: &Context, args: JsonlArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let mut text = String::new();
    let lines = store.journal_lines()?;
    for line in &lines {
        text += &serde_json::to_string(line)?;
        text.push('\n');
    }
    match args.out.as_deref().filter(|out| !is_stdout(out)) {
        Some(out) => {
            write_file(out, text.as_bytes())?;
            ctx.emit(json!({"out": out, "lines": lines.len()}), || {
                format!("Wrote {} ({} lines)", out.display(), lines.len())
            });
            Ok(())
        }
        // The lines are the data; --json changes nothing here.
        None => {
            output::stdout_bytes(text.as_bytes());
            Ok(())
        }
    }
}

/// `-` names stdout, as everywhere in memctl.
fn is_stdout(out: &Path) -> bool {
    out.as_os_str() == "-"
}
