//! The LLM memory protocol (SPEC §4.7): `<memory_update>{json}</memory_update>` blocks an LLM
//! writes, applied to a branch in one transaction, and the `<memory_results>` text fed back.
//!
//! What a block is: blocks.rs. A block is first checked as a whole (parse.rs): every problem is
//! listed (bad JSON, wrong types, unknown keys, non-positive `k`, empty texts). Then its
//! operations run in the fixed order of the spec, each inside its own savepoint, so reads see
//! earlier writes and a failing operation (an id outside the view, say) can be undone alone.
//! Strict mode (the default) applies nothing when anything failed; lenient mode keeps the
//! operations that worked and lists the others.

mod blocks;
mod parse;

pub use blocks::{find_update_block, strip_blocks};

use crate::error::{Error, ErrorKind, Result, Topic};
use crate::rows::{Event, Record};
use crate::store::{Store, Tx};
use parse::{is_read, parse, Op};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Tag added to every archival record an LLM writes.
pub const LLM_TAG: &str = "LLM_INSIGHT";
/// Importance of core values an LLM writes without saying.
pub const LLM_IMPORTANCE: u8 = 4;
/// Kind of recall events an LLM writes without saying.
pub const LLM_KIND: &str = "llm_insight";
/// At most this many items per section of the results block.
const RESULTS_PER_SECTION: usize = 10;

/// An operation that was not applied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub op: String,
    pub reason: String,
}

/// What applying a block did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyOutcome {
    /// Per key (canonical names): what each operation returned.
    pub results: Map<String, Value>,
    /// How many operations were applied.
    pub applied: usize,
    pub skipped: Vec<Skipped>,
    /// True when the block only read: the runner should ask the LLM again with the results.
    pub read_only: bool,
    /// What the `<memory_results>` block shows.
    #[serde(skip)]
    pub feedback: Feedback,
}

/// The reads of a block, for the `<memory_results>` text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Feedback {
    pub core: Vec<(String, Option<String>)>,
    pub archival: Vec<Record>,
    pub recall: Vec<Event>,
}

impl Store {
    /// Applies the first `<memory_update>` block of `text` (or a bare JSON object) to `branch`
    /// in one transaction. Strict: any problem applies nothing and is an invalid-input error
    /// listing them all. Lenient: what works is applied, the rest listed in `skipped`.
    pub fn apply_update(&self, branch: &str, text: &str, lenient: bool) -> Result<ApplyOutcome> {
        let body = find_update_block(text)
            .ok_or_else(|| Error::invalid("no <memory_update> block and no JSON object in the input"))?;
        let (ops, problems) = parse(body).map_err(|problem| problems_error(&[problem]))?;
        // An unknown branch fails here, before the transaction; each operation then reads
        // what it needs of the branch's path (appends and records only the branch itself).
        self.branch_for_write(branch)?;
        let read_only = !ops.is_empty() && ops.iter().all(|(_, op)| is_read(op));
        let outcome = self.write(|tx| {
            let mut results = Map::new();
            let mut feedback = Feedback::default();
            let mut applied = 0;
            let mut failures = Vec::new();
            for (name, op) in &ops {
                match tx.savepoint(|tx| run(tx, branch, op, &mut feedback)) {
                    Ok(result) => {
                        results.insert(name.to_string(), result);
                        applied += 1;
                    }
                    Err(e) if e.kind() == ErrorKind::Busy || e.kind() == ErrorKind::Internal => {
                        return Err(e)
                    }
                    Err(e) => {
                        failures.push(Skipped { op: name.to_string(), reason: e.message().to_string() })
                    }
                }
            }
            // Strict: the valid operations ran too, so the error lists every problem; the
            // transaction then rolls back whole.
            let mut skipped = problems.clone();
            skipped.extend(failures);
            if !lenient && !skipped.is_empty() {
                return Err(problems_error(&skipped));
            }
            Ok((results, feedback, applied, skipped))
        })?;
        let (results, feedback, applied, skipped) = outcome;
        Ok(ApplyOutcome { results, applied, skipped, read_only, feedback })
    }
}

fn problems_error(problems: &[Skipped]) -> Error {
    let list: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.op, p.reason)).collect();
    Error::invalid(format!("memory_update rejected, nothing applied: {}", list.join("; ")))
        .with_topic(Topic::RejectedUpdate)
}

/// Runs one operation; its JSON result.
fn run(tx: &Tx<'_>, branch: &str, op: &Op, feedback: &mut Feedback) -> Result<Value> {
    Ok(match op {
        Op::CoreSet(entries) => {
            let mut set = Vec::new();
            let mut evicted = Vec::new();
            for (key, value, write) in entries {
                let outcome = tx.core_set(branch, key, value, *write)?;
                set.push(outcome.key);
                evicted.extend(outcome.evicted);
            }
            json!({"set": set, "evicted": evicted})
        }
        Op::CoreGet(keys) => {
            let core = tx.core(branch)?;
            let mut map = Map::new();
            for key in keys {
                let value = core.iter().find(|e| &e.key == key).map(|e| e.value.clone());
                feedback.core.push((key.clone(), value.clone()));
                map.insert(key.clone(), value.map_or(Value::Null, Value::String));
            }
            Value::Object(map)
        }
        Op::CoreDelete(keys) => {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            json!({"deleted": tx.core_delete(branch, &keys)?})
        }
        Op::ArchivalAdd(records) => {
            let mut added = Vec::new();
            for (text, tags) in records {
                let mut tags = tags.clone();
                if !tags.iter().any(|t| t == LLM_TAG) {
                    tags.insert(0, LLM_TAG.to_string());
                }
                added.push(tx.archival_add(branch, text, &tags)?);
            }
            json!(added)
        }
        Op::ArchivalUpdate(updates) => {
            let mut done = Vec::new();
            for (id, text, tags) in updates {
                done.push(tx.archival_update(branch, *id, text.as_deref(), tags.as_deref())?);
            }
            json!(done)
        }
        Op::ArchivalSearch(search) => {
            let hits = tx.archival_search(branch, search)?;
            feedback.archival.extend(hits.iter().cloned());
            json!(hits)
        }
        Op::RecallAppend(events) => {
            let mut added = Vec::new();
            for (kind, text, tags) in events {
                added.push(tx.recall_append(branch, kind, text, tags)?);
            }
            json!(added)
        }
        Op::RecallSearch(query, k) => {
            let hits = tx.recall_search(branch, query, *k)?;
            feedback.recall.extend(hits.iter().cloned());
            json!(hits)
        }
        Op::RecallEvict(selector) => json!(tx.recall_evict(branch, selector)?),
        Op::RecallSummarize { kind, text, ids } => {
            json!({"id": tx.recall_summarize(branch, kind, text, ids)?})
        }
        Op::Consolidate => {
            let outcome = tx.consolidate(branch, false)?;
            json!({"consolidated": outcome.consolidated, "summaries": outcome.summaries})
        }
        Op::Step(steps) => {
            let ids =
                steps.iter().map(|step| Ok(tx.step_add(branch, step)?.id)).collect::<Result<Vec<i64>>>()?;
            json!({ "ids": ids })
        }
    })
}

impl ApplyOutcome {
    /// The `<memory_results>` block fed back to the LLM (the Python store's format): core values,
    /// archival hits with their tags, recall hits with their time; at most 10 items a section.
    pub fn results_block(&self) -> String {
        let mut sections = Vec::new();
        let f = &self.feedback;
        if !f.core.is_empty() {
            let lines: Vec<String> = f
                .core
                .iter()
                .take(RESULTS_PER_SECTION)
                .map(|(k, v)| format!("- {k}: {}", v.as_deref().unwrap_or("(not found)")))
                .collect();
            sections.push(format!("**Core Memory Values:**\n{}", lines.join("\n")));
        }
        if !f.archival.is_empty() {
            let lines: Vec<String> = f
                .archival
                .iter()
                .take(RESULTS_PER_SECTION)
                .enumerate()
                .map(|(i, r)| format!("[{}] {}\nTags: {}", i + 1, r.text, r.tags.join(", ")))
                .collect();
            sections.push(format!("**Archival Search Results:**\n{}", lines.join("\n")));
        }
        if !f.recall.is_empty() {
            let lines: Vec<String> = f
                .recall
                .iter()
                .take(RESULTS_PER_SECTION)
                .enumerate()
                .map(|(i, e)| {
                    format!("[{}] ({}) {}\nTime: {}", i + 1, e.kind, e.text, crate::clock::utc_datetime(e.ts))
                })
                .collect();
            sections.push(format!("**Recall Search Results:**\n{}", lines.join("\n")));
        }
        if sections.is_empty() {
            sections.push("(this update read nothing)".into());
        }
        // Stored texts are shown as they are, but for the tags they hold (see `escape_tags`).
        format!("<memory_results>\n{}\n</memory_results>", blocks::escape_tags(&sections.join("\n\n")))
    }
}
