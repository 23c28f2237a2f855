//! `memctl core set|get|del`: small key/value facts, inherited copy-on-write.

use crate::input;
use crate::invocation::Context;
use crate::output::{one_line, table, timestamp};
use clap::Subcommand;
use memctl_core::{parse_duration, CoreEntry, CoreWrite, Origin, DEFAULT_IMPORTANCE};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum CoreCommand {
    /// Set a key in a branch (descendants forked later inherit it)
    #[command(after_help = "\
Examples:
  memctl core set node-1 best_runtime_s 12.4 --importance 4
  memctl core set node-1 plan - < plan.txt
  memctl core set node-1 scratch 'try -O3 next' --ttl 30m
If the branch's visible core grows past core_max_chars, the least important, then oldest, other
keys are moved to archival (importance 5 is never evicted).")]
    Set {
        /// Branch id or node_uid
        branch: String,
        /// Key name, one line (e.g. best_runtime_s)
        key: String,
        /// The value, or `-` to read it from stdin (values may start with '-', e.g. -O3)
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// 1 (expendable) .. 5 (pinned)
        #[arg(long, short, default_value_t = DEFAULT_IMPORTANCE, value_parser = clap::value_parser!(u8).range(1..=5))]
        importance: u8,
        /// Expire after this long: seconds or e.g. 30m, 2h, 7days
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
    },
    /// Read keys as the branch sees them (inherited ones included)
    #[command(after_help = "\
Examples:
  memctl core get node-7                  # every visible key
  memctl core get node-7 best_node plan   # these keys (missing ones are null in JSON)
  memctl core get node-7 --explain        # which branch wrote each value, at which seq")]
    Get {
        /// Branch id or node_uid
        branch: String,
        /// Keys to read [default: all visible keys]
        keys: Vec<String>,
        /// Show which branch wrote each value, its seq and importance
        #[arg(long)]
        explain: bool,
    },
    /// Delete keys from the branch's view (its ancestors keep them)
    #[command(visible_alias = "delete", after_help = "Example:\n  memctl core del node-7 scratch plan")]
    Del {
        /// Branch id or node_uid
        branch: String,
        /// Keys to delete
        #[arg(required = true)]
        keys: Vec<String>,
    },
}

pub fn run(ctx: &Context, command: CoreCommand) -> anyhow::Result<()> {
    let store = ctx.open()?;
    match command {
        CoreCommand::Set { branch, key, value, importance, ttl } => {
            let value = input::text(Some(&value), "value")?;
            let ttl = ttl.as_deref().map(parse_duration).transpose()?;
            let outcome = store.core_set(&branch, &key, &value, CoreWrite { importance, ttl })?;
            if let Some(record) = outcome.oversize_record {
                ctx.note(&format!(
                    "note: the value is longer than core_max_chars; core keeps its head, archival record {record} the whole"
                ));
            }
            ctx.emit(serde_json::to_value(&outcome)?, || {
                let mut text = format!("Set {} on {} (seq {})", outcome.key, outcome.branch, outcome.seq);
                if !outcome.evicted.is_empty() {
                    text += &format!(
                        "\nEvicted to archival to stay within budget: {}",
                        outcome.evicted.join(", ")
                    );
                }
                text
            });
        }
        CoreCommand::Get { branch, keys, explain } => {
            let entries = store.core(&branch)?;
            let wanted: Vec<(String, Option<&CoreEntry>)> = if keys.is_empty() {
                entries.iter().map(|e| (e.key.clone(), Some(e))).collect()
            } else {
                keys.iter().map(|k| (k.clone(), entries.iter().find(|e| &e.key == k))).collect()
            };
            let origins = match explain {
                true => {
                    store.origins(&wanted.iter().filter_map(|(_, e)| e.map(|e| e.seq)).collect::<Vec<_>>())?
                }
                false => Default::default(),
            };
            let mut map = Map::new();
            for (key, entry) in &wanted {
                let value = match (entry, explain) {
                    (None, _) => Value::Null,
                    (Some(e), false) => json!(e.value),
                    (Some(e), true) => json!({"value": e.value, "branch": e.branch, "seq": e.seq,
                                              "importance": e.importance, "ttl": e.ttl, "ts": e.ts,
                                              "promoted_from": origins.get(&e.seq)}),
                };
                map.insert(key.clone(), value);
            }
            ctx.emit(json!({ "core": map }), || render_get(&branch, &wanted, &origins, explain));
        }
        CoreCommand::Del { branch, keys } => {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let deleted = store.core_delete(&branch, &keys)?;
            let missing: Vec<&str> =
                keys.iter().copied().filter(|k| !deleted.iter().any(|d| d == k)).collect();
            ctx.emit(json!({ "deleted": deleted }), || {
                let mut lines = Vec::new();
                if !deleted.is_empty() {
                    lines.push(format!("Deleted from {branch}: {}", deleted.join(", ")));
                }
                if !missing.is_empty() {
                    lines.push(format!("Not in {branch}'s view (nothing to delete): {}", missing.join(", ")));
                }
                lines.join("\n")
            });
        }
    }
    Ok(())
}

fn render_get(
    branch: &str,
    wanted: &[(String, Option<&CoreEntry>)],
    origins: &HashMap<i64, Origin>,
    explain: bool,
) -> String {
    if wanted.is_empty() {
        return format!("{branch} has no core keys");
    }
    if explain {
        let rows: Vec<Vec<String>> = wanted
            .iter()
            .map(|(key, entry)| match entry {
                Some(e) => vec![
                    key.clone(),
                    one_line(&e.value),
                    match origins.get(&e.seq) {
                        Some(o) => format!("{} (promoted from {} seq {})", e.branch, o.branch, o.seq),
                        None => e.branch.to_string(),
                    },
                    e.seq.to_string(),
                    e.importance.to_string(),
                    e.ttl.map_or("-".into(), |t| format!("{t}s")),
                    timestamp(e.ts).to_string(),
                ],
                None => vec![
                    key.clone(),
                    "(not found)".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ],
            })
            .collect();
        table(&["KEY", "VALUE", "FROM", "SEQ", "IMP", "TTL", "WRITTEN"], &rows)
    } else {
        let rows: Vec<Vec<String>> = wanted
            .iter()
            .map(|(key, entry)| vec![key.clone(), entry.map_or("(not found)".into(), |e| one_line(&e.value))])
            .collect();
        table(&["KEY", "VALUE"], &rows)
    }
}
