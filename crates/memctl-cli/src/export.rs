//! `memctl export paper|html|jsonl`: what researchers keep at the end of a run.

use crate::invocation::Context;
use clap::{Args, Subcommand};
use memctl_core::{viewer_html, Error};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const EXAMPLES: &str = "\
Examples:
  memctl export html --out run/memory_database.html
  memctl export jsonl --out run/memory_calls.jsonl
  memctl export jsonl | jq -c 'select(.op == \"mem_core_set\")'";

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// One self-contained HTML page to browse every branch's memory offline
    #[command(after_help = HTML_EXAMPLES)]
    Html(HtmlArgs),

    /// The operation journal as JSON lines, in the Python store's log format
    #[command(after_help = JSONL_EXAMPLES)]
    Jsonl(JsonlArgs),
}

const HTML_EXAMPLES: &str = "\
Examples:
  memctl export html                              # ./memory_database.html
  memctl export html --out run/memory_database.html
The page needs no network: open it in any browser. It draws the branch tree (search by id or
node_uid, fold subtrees) and, for the branch you select, its view: core, recall timeline,
summaries and excluded events, archival records (own rows marked apart from inherited ones), and
the operations that wrote them. Open FILE#branch=ID to start at a branch.";

const JSONL_EXAMPLES: &str = "\
Examples:
  memctl export jsonl > memory_calls.jsonl
  memctl export jsonl --out run/memory_calls.jsonl
One line per journal row, oldest first: {ts, op, layer, memory_type, branch_id, node_id, phase,
run_id, details} as the Python store logged them (op names mapped, e.g. core.set -> mem_core_set),
plus seq, actor and memctl_op.";

#[derive(Debug, Args)]
pub struct HtmlArgs {
    /// Where to write the page
    #[arg(long, short, value_name = "FILE", default_value = "memory_database.html")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct JsonlArgs {
    /// Write to FILE instead of stdout
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(ctx: &Context, command: ExportCommand) -> anyhow::Result<()> {
    match command {
        ExportCommand::Html(args) => html(ctx, args),
        ExportCommand::Jsonl(args) => jsonl(ctx, args),
    }
}

fn html(ctx: &Context, args: HtmlArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let title =
        ctx.db.file_name().map_or_else(|| ctx.db.display().to_string(), |n| n.to_string_lossy().into());
    let data = store.viewer_data(&title)?;
    let branches = data["branches"].as_array().map_or(0, Vec::len);
    let page = viewer_html(&data);
    write_file(&args.out, page.as_bytes())?;
    ctx.emit(json!({"out": args.out, "bytes": page.len(), "branches": branches}), || {
        format!("Wrote {} ({} bytes, {branches} branches)", args.out.display(), page.len())
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
    match &args.out {
        Some(out) => {
            write_file(out, text.as_bytes())?;
            ctx.emit(json!({"out": out, "lines": lines.len()}), || {
                format!("Wrote {} ({} lines)", out.display(), lines.len())
            });
        }
        // The lines are the data; --json changes nothing here.
        None => {
            let mut stdout = std::io::stdout().lock();
            if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    return Err(e.into());
                }
            }
        }
    }
    Ok(())
}

/// Writes a whole file through a temporary sibling, so a reader never sees half of it.
pub fn write_file(path: &Path, bytes: &[u8]) -> memctl_core::Result<()> {
    let fail = |e: std::io::Error| Error::invalid(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}
