//! `memctl read`: what a branch sees, layer by layer.

use crate::invocation::Context;
use crate::output::{view_text, Scope};
use clap::Args;
use serde_json::{json, Map, Value};

pub const EXAMPLES: &str = "\
Examples:
  memctl read node-7                    # core, recall window, newest archival records
  memctl read node-7 --scope core
  memctl --json read node-7 --all       # every visible event and record";

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// Which layers to show
    #[arg(long, value_enum, default_value_t = Scope::All)]
    pub scope: Scope,
    /// Every visible event and record, not just the recall window and the newest retrieval_k
    #[arg(long)]
    pub all: bool,
}

pub fn run(ctx: &Context, args: ReadArgs) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let config = store.config();
    let (events, records) =
        if args.all { (None, None) } else { (Some(config.recall_max_events), Some(config.retrieval_k)) };
    let view = store.view_window(&args.branch, events, records)?;
    let show = |scope: Scope| args.scope == Scope::All || args.scope == scope;

    // A whole view can hold 100,000 events: its JSON is built only when it is printed.
    if !ctx.json {
        ctx.emit(Value::Null, || view_text(&view, args.scope));
        return Ok(());
    }
    let mut json = Map::new();
    json.insert("branch".into(), json!(view.branch.id));
    if show(Scope::Core) {
        let core: Map<String, Value> = view.core.iter().map(|e| (e.key.clone(), json!(e.value))).collect();
        json.insert("core".into(), Value::Object(core));
    }
    if show(Scope::Recall) {
        json.insert("recall".into(), json!({"summaries": view.summaries, "events": view.events}));
    }
    if show(Scope::Archival) {
        json.insert("archival".into(), json!(view.archival));
    }
    ctx.emit(Value::Object(json), String::new);
    Ok(())
}
