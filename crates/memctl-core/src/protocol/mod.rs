//! The LLM memory protocol (SPEC §4.7): `<memory_update>{json}</memory_update>` blocks an LLM
//! writes, applied to a branch in one transaction, and the `<memory_results>` text fed back.
//!
//! What a block is: blocks.rs. A block is first checked (parse.rs): every problem is listed (bad
//! JSON, wrong types, unknown keys, non-positive `k`, empty texts), each item of a list on its
//! own. Then its operations run in the fixed order of the spec, each item of a list (else each
//! operation) inside its own savepoint, so reads see earlier writes and a failing one (an id
//! outside the view, say) can be undone alone. Strict mode (the default) applies nothing when
//! anything failed; lenient mode keeps what worked and lists the rest.

mod blocks;
mod parse;

pub use blocks::{find_update_block, strip_blocks};

use crate::error::{Error, Result, Topic};
use crate::rows::{Event, Record};
use crate::store::{Store, Tx};
use parse::{is_read, parse, Items, Op};
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

/// An operation, or an item of one, that was not applied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub op: String,
    /// The item of a list that was skipped alone; None when the whole operation was.
    pub item: Option<Item>,
    pub reason: String,
}

/// An item of an operation that takes a list: a core key, or its place in the list (from 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Item {
    Key(String),
    Index(usize),
}

impl Skipped {
    /// What was skipped, as messages name it: `recall`, `recall[1]` or `core["key"]`.
    pub fn name(&self) -> String {
        match &self.item {
            None => self.op.clone(),
            Some(Item::Index(i)) => format!("{}[{i}]", self.op),
            Some(Item::Key(key)) => format!("{}[{}]", self.op, Value::from(key.as_str())),
        }
    }
}

/// What applying a block did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyOutcome {
    /// Per key (canonical names): what each operation returned.
    pub results: Map<String, Value>,
    /// How many operations were applied, whole or some of their items.
    pub applied: usize,
    pub skipped: Vec<Skipped>,
    /// True when the block only read: the runner should ask the LLM again with the results.
    pub read_only: bool,
    /// How many `<memory_update>` blocks followed the first one, which alone is applied.
    pub ignored_blocks: usize,
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
        let mut updates = blocks::update_blocks(text);
        let body = (updates.next().or_else(|| blocks::bare_json(text)))
            .ok_or_else(|| Error::invalid("no <memory_update> block and no JSON object in the input"))?;
        let ignored_blocks = updates.count();
        let (ops, problems) = parse(body).map_err(|problem| problems_error(&[problem]))?;
        // An unknown branch fails here, before the transaction; each operation then reads
        // what it needs of the branch's path (appends and records only the branch itself).
        self.branch_for_write(branch)?;
        // Over the operations that check out, as lenient mode would apply them.
        let mut valid = ops.iter().filter_map(|(_, op)| op.as_ref().ok()).peekable();
        let read_only = valid.peek().is_some() && valid.all(is_read);
        let outcome = self.write(|tx| {
            let mut run = Run { tx, branch, feedback: Feedback::default(), skipped: problems.clone() };
            let mut results = Map::new();
            for (name, op) in &ops {
                let result = match op {
                    Ok(op) => run.op(name, op)?,
                    Err(reason) => {
                        run.skip(name, None, reason);
                        None
                    }
                };
                if let Some(result) = result {
                    results.insert(name.to_string(), result);
                }
            }
            // Strict: the valid operations ran too, so the error lists every problem; the
            // transaction then rolls back whole.
            if !lenient && !run.skipped.is_empty() {
                return Err(problems_error(&run.skipped));
            }
            // Once, after the operations (see `recall_append_unconsolidated`).
            if results.contains_key("recall") {
                tx.auto_consolidate(&tx.branch_for_write(branch)?)?;
            }
            Ok((results, run.feedback, run.skipped))
        })?;
        let (results, feedback, skipped) = outcome;
        Ok(ApplyOutcome { applied: results.len(), results, skipped, read_only, ignored_blocks, feedback })
    }
}

fn problems_error(problems: &[Skipped]) -> Error {
    let list: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.name(), p.reason)).collect();
    Error::invalid(format!("memory_update rejected, nothing applied: {}", list.join("; ")))
        .with_topic(Topic::RejectedUpdate)
}

/// The operations of a block running in its transaction: what they read, and what was skipped.
struct Run<'t, 's> {
    tx: &'t Tx<'s>,
    branch: &'t str,
    feedback: Feedback,
    skipped: Vec<Skipped>,
}

impl Run<'_, '_> {
    /// Runs one operation: its JSON result, or None when none of it was applied.
    fn op(&mut self, name: &str, op: &Op) -> Result<Option<Value>> {
        let branch = self.branch;
        Ok(match op {
            Op::CoreSet(entries) => {
                let set = self
                    .each(name, entries, |tx, (key, value, write)| tx.core_set(branch, key, value, *write))?;
                let keys: Vec<&String> = set.iter().flatten().map(|outcome| &outcome.key).collect();
                let evicted: Vec<&String> =
                    set.iter().flatten().flat_map(|outcome| &outcome.evicted).collect();
                any_applied(&set).then(|| json!({"set": keys, "evicted": evicted}))
            }
            Op::CoreGet(keys) => {
                let Some(keys) = self.valid(name, keys) else { return Ok(None) };
                let core = self.attempt(name, None, |tx| tx.core(branch))?;
                core.map(|core| {
                    let mut map = Map::new();
                    for key in keys {
                        let value = core.iter().find(|e| &e.key == key).map(|e| e.value.clone());
                        self.feedback.core.push((key.clone(), value.clone()));
                        map.insert(key.clone(), value.map_or(Value::Null, Value::String));
                    }
                    Value::Object(map)
                })
            }
            Op::CoreDelete(keys) => {
                let Some(keys) = self.valid(name, keys) else { return Ok(None) };
                let keys: Vec<&str> = keys.into_iter().map(String::as_str).collect();
                let deleted = self.attempt(name, None, |tx| tx.core_delete(branch, &keys))?;
                deleted.map(|deleted| json!({ "deleted": deleted }))
            }
            Op::ArchivalAdd(records) => {
                let added = self.each(name, records, |tx, (text, tags)| {
                    let mut tags = tags.clone();
                    if !tags.iter().any(|t| t == LLM_TAG) {
                        tags.insert(0, LLM_TAG.to_string());
                    }
                    tx.archival_add(branch, text, &tags)
                })?;
                any_applied(&added).then(|| json!(added))
            }
            Op::ArchivalUpdate(updates) => {
                let done = self.each(name, updates, |tx, (id, text, tags)| {
                    tx.archival_update(branch, *id, text.as_deref(), tags.as_deref())
                })?;
                any_applied(&done).then(|| json!(done))
            }
            Op::ArchivalSearch(search) => {
                let hits = self.attempt(name, None, |tx| tx.archival_search(branch, search))?;
                hits.map(|hits| {
                    self.feedback.archival.extend(hits.iter().cloned());
                    json!(hits)
                })
            }
            Op::RecallAppend(events) => {
                let added = self.each(name, events, |tx, (kind, text, tags)| {
                    tx.recall_append_unconsolidated(branch, kind, text, tags)
                })?;
                any_applied(&added).then(|| json!(added))
            }
            Op::RecallSearch(query, k) => {
                let hits = self.attempt(name, None, |tx| tx.recall_search(branch, query, *k))?;
                hits.map(|hits| {
                    self.feedback.recall.extend(hits.iter().cloned());
                    json!(hits)
                })
            }
            Op::RecallEvict(selector) => self
                .attempt(name, None, |tx| tx.recall_evict(branch, selector))?
                .map(|evicted| json!(evicted)),
            Op::RecallSummarize { kind, text, ids } => self
                .attempt(name, None, |tx| tx.recall_summarize(branch, kind, text, ids))?
                .map(|id| json!({ "id": id })),
            Op::Consolidate => self
                .attempt(name, None, |tx| tx.consolidate(branch, false))?
                .map(|outcome| json!({"consolidated": outcome.consolidated, "summaries": outcome.summaries})),
            Op::Step(steps) => {
                let ids = self.each(name, steps, |tx, step| Ok(tx.step_add(branch, step)?.id))?;
                any_applied(&ids).then(|| json!({ "ids": ids }))
            }
        })
    }

    /// Runs `f` in a savepoint: its result, or None when it failed (undone, and listed).
    fn attempt<T>(
        &mut self,
        op: &str,
        item: Option<&Item>,
        f: impl FnOnce(&Tx<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self.tx.savepoint(f) {
            Ok(value) => Ok(Some(value)),
            // The transaction cannot go on.
            Err(e) if e.ends_transaction() => Err(e),
            Err(e) => {
                self.skip(op, item, e.message());
                Ok(None)
            }
        }
    }

    /// Runs `f` on each valid item, each in a savepoint of its own: their results in place, None
    /// for an item skipped (invalid, or failing).
    fn each<T, R>(
        &mut self,
        op: &str,
        items: &Items<T>,
        mut f: impl FnMut(&Tx<'_>, &T) -> Result<R>,
    ) -> Result<Vec<Option<R>>> {
        let mut results = Vec::with_capacity(items.len());
        for (item, check) in items {
            results.push(match check {
                Ok(value) => self.attempt(op, item.as_ref(), |tx| f(tx, value))?,
                Err(reason) => {
                    self.skip(op, item.as_ref(), reason);
                    None
                }
            });
        }
        Ok(results)
    }

    /// The valid items, the others listed; None when there were items and none is valid.
    fn valid<'i, T>(&mut self, op: &str, items: &'i Items<T>) -> Option<Vec<&'i T>> {
        let mut valid = Vec::with_capacity(items.len());
        for (item, check) in items {
            match check {
                Ok(value) => valid.push(value),
                Err(reason) => self.skip(op, item.as_ref(), reason),
            }
        }
        (!valid.is_empty() || items.is_empty()).then_some(valid)
    }

    fn skip(&mut self, op: &str, item: Option<&Item>, reason: &str) {
        self.skipped.push(Skipped { op: op.to_string(), item: item.cloned(), reason: reason.to_string() });
    }
}

/// Whether an operation on a list was applied: some item was, or it had none.
fn any_applied<R>(results: &[Option<R>]) -> bool {
    results.is_empty() || results.iter().any(Option::is_some)
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
