//! `memctl init`: create the database (or bring an older one up to date).

use crate::invocation::Context;
use memctl_core::SCHEMA_VERSION;
use serde_json::json;

pub fn run(ctx: &Context) -> anyhow::Result<()> {
    let store = ctx.open()?;
    let fts5 = store.uses_fts()?;
    let db = ctx.db_label();
    ctx.emit(json!({"db": db, "schema_version": SCHEMA_VERSION, "fts5": fts5}), || {
        let search = match (fts5, store.uses_word_index()) {
            (true, _) => "FTS5 search",
            (false, true) => "word-index search",
            (false, false) => "keyword search (no FTS5)",
        };
        format!("Initialized {db} (schema {SCHEMA_VERSION}, {search})")
    });
    Ok(())
}
