//! The LLM memory protocol (SPEC §4.7): `<memory_update>{json}</memory_update>` blocks an LLM
//! writes, applied to a branch in one transaction, and the `<memory_results>` text fed back.
//!
//! A block is first checked as a whole: every problem is listed (bad JSON, wrong types, unknown
//! keys, non-positive `k`, empty texts). Then its operations run in the fixed order of the spec,
//! each inside its own savepoint, so reads see earlier writes and a failing operation (an id
//! outside the view, say) can be undone alone. Strict mode (the default) applies nothing when
//! anything failed; lenient mode keeps the operations that worked and lists the others.

mod blocks;

pub use blocks::{find_update_block, strip_blocks};

use crate::archival::Search;
use crate::conversation::{Step, StepType};
use crate::core_kv::CoreWrite;
use crate::error::{Error, ErrorKind, Result, Topic};
use crate::recall::EvictSelector;
use crate::rows::{Event, Record};
use crate::store::{Store, Tx};
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

/// The keys of a block, in the order they are applied, with their aliases.
const KEYS: [(&str, &str); 12] = [
    ("core", "mem_core_set"),
    ("core_get", "mem_core_get"),
    ("core_delete", "mem_core_del"),
    ("archival", "mem_archival_write"),
    ("archival_update", "mem_archival_update"),
    ("archival_search", "mem_archival_search"),
    ("recall", "mem_recall_append"),
    ("recall_search", "mem_recall_search"),
    ("recall_evict", "mem_recall_evict"),
    ("recall_summarize", "recall_summarize"),
    ("consolidate", "consolidate"),
    ("step", "step"),
];

/// One checked operation of a block.
#[derive(Debug, Clone, PartialEq)]
enum Op {
    CoreSet(Vec<(String, String, CoreWrite)>),
    CoreGet(Vec<String>),
    CoreDelete(Vec<String>),
    ArchivalAdd(Vec<(String, Vec<String>)>),
    ArchivalUpdate(Vec<(i64, Option<String>, Option<Vec<String>>)>),
    ArchivalSearch(Search),
    RecallAppend(Vec<(String, String, Vec<String>)>),
    RecallSearch(String, usize),
    RecallEvict(EvictSelector),
    RecallSummarize {
        kind: String,
        text: String,
        ids: Vec<i64>,
    },
    Consolidate,
    /// Conversation steps, for runners that batch them.
    Step(Vec<Step>),
}

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

/// The operations of a block and the problems of the keys that do not check out. A block that
/// is not a JSON object is one problem, and no operation.
type Parsed = (Vec<(&'static str, Op)>, Vec<Skipped>);

/// Checks a block's JSON and turns it into operations, listing every problem.
fn parse(body: &str) -> std::result::Result<Parsed, Skipped> {
    let value: Value = serde_json::from_str(body)
        .map_err(|e| Skipped { op: "block".into(), reason: format!("invalid JSON: {e}") })?;
    let Value::Object(map) = value else {
        return Err(Skipped { op: "block".into(), reason: "the block must be a JSON object".into() });
    };
    let mut problems = Vec::new();
    for key in map.keys() {
        if !KEYS.iter().any(|(name, alias)| key == name || key == alias) {
            problems.push(Skipped { op: key.clone(), reason: "unknown key".into() });
        }
    }
    let mut ops = Vec::new();
    for (name, alias) in KEYS {
        for key in [name, alias].into_iter().filter(|k| map.contains_key(*k)) {
            if key == alias && name != alias && map.contains_key(name) {
                problems
                    .push(Skipped { op: key.into(), reason: format!("given twice, as {name} and {alias}") });
                continue;
            }
            match parse_op(name, &map[key]) {
                Ok(op) => ops.push((name, op)),
                Err(reason) => problems.push(Skipped { op: key.into(), reason }),
            }
            if name == alias {
                break;
            }
        }
    }
    Ok((ops, problems))
}

type Check<T> = std::result::Result<T, String>;

fn text_of(value: &Value, what: &str) -> Check<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        Value::String(_) => Err(format!("{what} is empty")),
        other => Err(format!("{what} must be a string, not {other}")),
    }
}

fn strings(value: &Value, list: &str, item: &str) -> Check<Vec<String>> {
    match value {
        Value::String(_) => Ok(vec![text_of(value, item)?]),
        Value::Array(items) => items.iter().map(|v| text_of(v, item)).collect(),
        other => Err(format!("{list} must be a string or a list of strings, not {other}")),
    }
}

fn tags(value: Option<&Value>) -> Check<Vec<String>> {
    value.map_or(Ok(vec![]), |v| strings(v, "tags", "a tags entry"))
}

/// A search's words: missing or blank lists the newest, as the CLI's searches do.
fn query(value: Option<&Value>) -> Check<String> {
    match value {
        None => Ok(String::new()),
        Some(Value::String(q)) => Ok(q.clone()),
        Some(other) => Err(format!("query must be a string, not {other}")),
    }
}

fn positive(value: Option<&Value>, name: &str, default: usize) -> Check<usize> {
    match value {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| format!("{name} must be a positive integer, not {v}")),
    }
}

fn ids(value: &Value) -> Check<Vec<i64>> {
    let list = match value {
        Value::Array(items) => items.clone(),
        single => vec![single.clone()],
    };
    list.iter().map(|v| v.as_i64().ok_or_else(|| format!("ids must be integers, not {v}"))).collect()
}

/// A list of entries: an array of objects, or one object.
fn entries(value: &Value) -> Check<Vec<&Map<String, Value>>> {
    match value {
        Value::Object(one) => Ok(vec![one]),
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_object().ok_or_else(|| format!("entries must be objects, not {v}")))
            .collect(),
        other => Err(format!("must be an object or a list of objects, not {other}")),
    }
}

fn only(entry: &Map<String, Value>, allowed: &[&str]) -> Check<()> {
    match entry.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(format!("unknown field {key:?} (expected {})", allowed.join(", "))),
        None => Ok(()),
    }
}

/// Core values may be strings or other JSON (kept as its JSON text); importance is clamped.
fn core_entry(key: &str, value: &Value) -> Check<(String, String, CoreWrite)> {
    if key.trim().is_empty() {
        return Err("core keys must not be empty".into());
    }
    let (value, importance, ttl) = match value {
        Value::Object(fields) if fields.contains_key("value") => {
            only(fields, &["value", "importance", "ttl"])?;
            let importance = match fields.get("importance") {
                None => LLM_IMPORTANCE,
                Some(v) => v
                    .as_f64()
                    .ok_or_else(|| format!("importance must be a number, not {v}"))?
                    .round()
                    .clamp(1.0, 5.0) as u8,
            };
            let ttl = match fields.get("ttl") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => {
                    Some(crate::clock::parse_duration(s).map_err(|e| e.message().to_string())?)
                }
                Some(v) => Some(
                    v.as_f64()
                        .filter(|s| *s > 0.0)
                        .ok_or_else(|| format!("ttl must be positive seconds, not {v}"))?,
                ),
            };
            (&fields["value"], importance, ttl)
        }
        // An entry's fields without its value (else they would be stored as the value's JSON).
        Value::Object(fields) if fields.keys().all(|k| k == "importance" || k == "ttl") => {
            return Err(format!("core entry {key:?} needs a value"));
        }
        other => (other, LLM_IMPORTANCE, None),
    };
    let value = match value {
        Value::String(s) => s.clone(),
        Value::Null => return Err(format!("core value of {key:?} is null (use core_delete)")),
        other => other.to_string(),
    };
    if value.trim().is_empty() {
        return Err(format!("core value of {key:?} is empty"));
    }
    Ok((key.to_string(), value, CoreWrite { importance, ttl }))
}

fn parse_op(name: &str, value: &Value) -> Check<Op> {
    Ok(match name {
        "core" => match value {
            Value::Object(map) if !map.contains_key("key") => {
                Op::CoreSet(map.iter().map(|(k, v)| core_entry(k, v)).collect::<Check<_>>()?)
            }
            _ => Op::CoreSet(
                entries(value)?
                    .into_iter()
                    .map(|e| {
                        only(e, &["key", "value", "importance", "ttl"])?;
                        let key = text_of(e.get("key").unwrap_or(&Value::Null), "key")?;
                        let mut fields = e.clone();
                        fields.remove("key");
                        core_entry(&key, &Value::Object(fields))
                    })
                    .collect::<Check<_>>()?,
            ),
        },
        "core_get" => Op::CoreGet(strings(value, "core_get", "a core_get key")?),
        "core_delete" => Op::CoreDelete(strings(value, "core_delete", "a core_delete key")?),
        "archival" => Op::ArchivalAdd(match value {
            Value::String(_) => vec![(text_of(value, "archival text")?, vec![])],
            Value::Array(items) if items.iter().all(Value::is_string) => {
                items.iter().map(|v| Ok((text_of(v, "archival text")?, vec![]))).collect::<Check<_>>()?
            }
            _ => entries(value)?
                .into_iter()
                .map(|e| {
                    only(e, &["text", "content", "tags"])?;
                    let text = e.get("text").or_else(|| e.get("content")).unwrap_or(&Value::Null);
                    Ok((text_of(text, "archival text")?, tags(e.get("tags"))?))
                })
                .collect::<Check<_>>()?,
        }),
        "archival_update" => Op::ArchivalUpdate(
            entries(value)?
                .into_iter()
                .map(|e| {
                    only(e, &["id", "text", "tags"])?;
                    let id =
                        e.get("id").and_then(Value::as_i64).ok_or("archival_update needs an integer id")?;
                    let text = e.get("text").map(|t| text_of(t, "text")).transpose()?;
                    let new_tags = e.get("tags").map(|t| tags(Some(t))).transpose()?;
                    if text.is_none() && new_tags.is_none() {
                        return Err(format!("archival_update of {id} gives neither text nor tags"));
                    }
                    Ok((id, text, new_tags))
                })
                .collect::<Check<_>>()?,
        ),
        "archival_search" => {
            let (query, k, tags) = match value {
                Value::String(q) => (q.clone(), None, vec![]),
                Value::Object(e) => {
                    only(e, &["query", "k", "tags"])?;
                    (query(e.get("query"))?, e.get("k"), tags(e.get("tags"))?)
                }
                other => return Err(format!("must be a query string or an object, not {other}")),
            };
            Op::ArchivalSearch(Search { query, k: positive(k, "k", 5)?, tags })
        }
        "recall" => Op::RecallAppend(
            entries(value)?
                .into_iter()
                .map(|e| {
                    only(e, &["kind", "content", "text", "summary", "tags"])?;
                    // The text from the first of content, text, summary that is present.
                    let text = ["content", "text", "summary"]
                        .iter()
                        .find_map(|f| e.get(*f))
                        .ok_or("a recall event needs content, text or summary")?;
                    let kind = match e.get("kind") {
                        None => LLM_KIND.to_string(),
                        Some(k) => text_of(k, "kind")?,
                    };
                    Ok((kind, text_of(text, "event text")?, tags(e.get("tags"))?))
                })
                .collect::<Check<_>>()?,
        ),
        "recall_search" => match value {
            Value::String(q) => Op::RecallSearch(q.clone(), 5),
            Value::Object(e) => {
                only(e, &["query", "k"])?;
                Op::RecallSearch(query(e.get("query"))?, positive(e.get("k"), "k", 5)?)
            }
            other => return Err(format!("must be a query string or an object, not {other}")),
        },
        "recall_evict" => Op::RecallEvict(match value {
            Value::Object(e) => {
                only(e, &["ids", "oldest", "kind"])?;
                match (e.get("ids"), e.get("oldest"), e.get("kind")) {
                    (Some(list), None, None) => EvictSelector::Ids(ids(list)?),
                    (None, Some(n), None) => EvictSelector::Oldest(positive(Some(n), "oldest", 1)?),
                    (None, None, Some(k)) => EvictSelector::Kind(text_of(k, "kind")?),
                    _ => return Err("give exactly one of ids, oldest or kind".into()),
                }
            }
            list => EvictSelector::Ids(ids(list)?),
        }),
        "recall_summarize" => {
            let e = value.as_object().ok_or_else(|| format!("must be an object, not {value}"))?;
            only(e, &["kind", "summary", "text", "ids", "event_ids"])?;
            let text =
                e.get("summary").or_else(|| e.get("text")).ok_or("recall_summarize needs a summary")?;
            let list = e.get("ids").or_else(|| e.get("event_ids")).ok_or("recall_summarize needs ids")?;
            let kind = e.get("kind").map_or(Ok(LLM_KIND.to_string()), |k| text_of(k, "kind"))?;
            let ids = ids(list)?;
            if ids.is_empty() {
                return Err("recall_summarize needs at least one event id".into());
            }
            Op::RecallSummarize { kind, text: text_of(text, "summary")?, ids }
        }
        "consolidate" => match value {
            Value::Bool(true) => Op::Consolidate,
            other => return Err(format!("must be true, not {other}")),
        },
        "step" => {
            let items = match value {
                Value::Array(items) => items.clone(),
                one => vec![one.clone()],
            };
            let steps = items
                .into_iter()
                .map(|item| {
                    let Value::Object(mut fields) = item else {
                        return Err(format!("a step is an object with a type, not {item}"));
                    };
                    let step_type = fields.remove("type").ok_or("a step needs a type")?;
                    let step_type =
                        StepType::parse(&text_of(&step_type, "type")?).map_err(|e| e.to_string())?;
                    Step::new(step_type, Value::Object(fields)).map_err(|e| e.to_string())
                })
                .collect::<std::result::Result<_, String>>()?;
            Op::Step(steps)
        }
        _ => unreachable!("every key of KEYS is handled"),
    })
}

fn is_read(op: &Op) -> bool {
    matches!(op, Op::CoreGet(_) | Op::ArchivalSearch(_) | Op::RecallSearch(..))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_and_alias_parses() {
        for (name, alias) in KEYS {
            let value = match name {
                "core" => json!({"k": "v"}),
                "core_get" | "core_delete" => json!(["k"]),
                "archival" => json!([{"text": "t", "tags": ["a"]}]),
                "archival_update" => json!([{"id": 1, "text": "t"}]),
                "archival_search" | "recall_search" => json!({"query": "q", "k": 3}),
                "recall" => json!([{"kind": "note", "content": "c"}]),
                "recall_evict" => json!({"ids": [1]}),
                "recall_summarize" => json!({"summary": "s", "ids": [1]}),
                "step" => json!([{"type": "user", "text": "hi"}, {"type": "action", "tool": "run"}]),
                _ => json!(true),
            };
            for key in [name, alias] {
                let (ops, problems) = parse(&json!({ key: value.clone() }).to_string()).unwrap();
                assert!(problems.is_empty(), "{key}: {problems:?}");
                assert_eq!(ops.len(), 1, "{key}");
                assert_eq!(ops[0].0, name);
            }
        }
    }

    #[test]
    fn lists_every_problem() {
        let (ops, problems) =
            parse(r#"{"core": {"": "x"}, "bogus": 1, "archival_search": {"query": "q", "k": 0}, "recall": [{"kind": "n"}], "core_get": "k"}"#).unwrap();
        assert_eq!(ops.len(), 1);
        let ops: Vec<&str> = problems.iter().map(|p| p.op.as_str()).collect();
        assert_eq!(ops, ["bogus", "core", "archival_search", "recall"]);
        assert_eq!(parse("[1]").unwrap_err().reason, "the block must be a JSON object");
        assert!(parse("{oops").unwrap_err().reason.starts_with("invalid JSON"));
    }
}
