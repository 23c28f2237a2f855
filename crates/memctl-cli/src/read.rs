//! `memctl read`: what a branch sees, layer by layer.

use crate::invocation::Context;
use crate::output::{write_view, Scope};
use clap::Args;
use memctl_core::{Event, Record, Summary};
use serde::Serialize;
use std::collections::BTreeMap;

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

    let recall = RecallJson { events: &view.events, summaries: &view.summaries };
    let json = ReadJson {
        archival: show(Scope::Archival).then_some(view.archival.as_slice()),
        branch: &view.branch.id,
        core: show(Scope::Core)
            .then(|| view.core.iter().map(|e| (e.key.as_str(), e.value.as_str())).collect()),
        recall: show(Scope::Recall).then_some(recall),
    };
    ctx.emit_sorted_lines(&json, |out| write_view(out, &view, args.scope));
    Ok(())
}

/// `read --json`, written straight from the view's rows (`Context::emit_sorted`): fields in
/// sorted order, as the rows declare theirs.
#[derive(Serialize)]
struct ReadJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    archival: Option<&'a [Record]>,
    branch: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    core: Option<BTreeMap<&'a str, &'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recall: Option<RecallJson<'a>>,
}

#[derive(Serialize)]
struct RecallJson<'a> {
    events: &'a [Event],
    summaries: &'a [Summary],
}
