//! A block's JSON checked and turned into operations (SPEC §4.7): every problem is listed. The
//! items of a list (core entries, archival records and updates, recall events, steps, the keys
//! to read or delete) are checked each on its own, so that lenient mode can skip one alone.

use super::{Item, Skipped, LLM_IMPORTANCE, LLM_KIND};
use crate::archival::Search;
use crate::conversation::{Step, StepType};
use crate::core_kv::CoreWrite;
use crate::recall::EvictSelector;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::error::Category;
use serde_json::{Map, Value};
use std::fmt;

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
pub(super) enum Op {
    CoreSet(Items<(String, String, CoreWrite)>),
    CoreGet(Items<String>),
    CoreDelete(Items<String>),
    ArchivalAdd(Items<(String, Vec<String>)>),
    ArchivalUpdate(Items<(i64, Option<String>, Option<Vec<String>>)>),
    ArchivalSearch(Search),
    RecallAppend(Items<(String, String, Vec<String>)>),
    RecallSearch(String, usize),
    RecallEvict(EvictSelector),
    RecallSummarize {
        kind: String,
        text: String,
        ids: Vec<i64>,
    },
    Consolidate,
    /// Conversation steps, for runners that batch them.
    Step(Items<Step>),
}

/// The items of an operation that takes a list, each checked on its own: its name (none for a
/// lone item given without a list) and what it holds, or its problem.
pub(super) type Items<T> = Vec<(Option<Item>, Check<T>)>;

/// The operations of a block in the order they apply, each checked (or its problem), and the
/// problems of its keys (unknown ones). A block that is not a JSON object is one problem, and no
/// operation.
pub(super) type Parsed = (Vec<(&'static str, Check<Op>)>, Vec<Skipped>);

/// Checks a block's JSON and turns it into operations, listing every problem.
pub(super) fn parse(body: &str) -> std::result::Result<Parsed, Skipped> {
    let Entries(entries) = serde_json::from_str(body).map_err(|e| {
        let reason = match e.classify() {
            Category::Data => "the block must be a JSON object".into(),
            _ => format!("invalid JSON: {e}"),
        };
        Skipped { op: "block".into(), item: None, reason }
    })?;
    let mut problems = Vec::new();
    // Each operation's name, and its key as the block gives it.
    let mut given: Vec<(&str, String)> = Vec::new();
    let mut ops = Vec::new();
    for (key, value) in entries {
        let Some(&(name, _)) = KEYS.iter().find(|(name, alias)| key == *name || key == *alias) else {
            problems.push(Skipped { op: key, item: None, reason: "unknown key".into() });
            continue;
        };
        if let Some((_, first)) = given.iter().find(|(op, _)| *op == name) {
            let reason = if *first == key {
                "given twice".into()
            } else {
                format!("given twice, as {first} and {key}")
            };
            problems.push(Skipped { op: key, item: None, reason });
            continue;
        }
        ops.push((name, parse_op(name, &value)));
        given.push((name, key));
    }
    ops.sort_by_key(|(name, _)| KEYS.iter().position(|(op, _)| op == name));
    Ok((ops, problems))
}

/// A JSON object's entries in order, a repeated key kept (a map keeps only its last value).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Entries;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Object)
    }
}

pub(super) type Check<T> = std::result::Result<T, String>;

fn text_of(value: &Value, what: &str) -> Check<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        Value::String(_) => Err(format!("{what} is empty")),
        other => Err(format!("{what} must be a string, not {other}")),
    }
}

fn tags(value: Option<&Value>) -> Check<Vec<String>> {
    match value {
        None => Ok(vec![]),
        Some(tag @ Value::String(_)) => Ok(vec![text_of(tag, "a tags entry")?]),
        Some(Value::Array(list)) => list.iter().map(|tag| text_of(tag, "a tags entry")).collect(),
        Some(other) => Err(format!("tags must be a string or a list of strings, not {other}")),
    }
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

/// The items of `value`, each checked on its own: those of a list, named by their place, or
/// `value` alone, unnamed.
fn items<T>(value: &Value, check: impl Fn(&Value) -> Check<T>) -> Items<T> {
    match value {
        Value::Array(list) => {
            list.iter().enumerate().map(|(i, item)| (Some(Item::Index(i)), check(item))).collect()
        }
        one => vec![(None, check(one))],
    }
}

/// An entry of a list: an object with only these fields.
fn entry<'v>(value: &'v Value, allowed: &[&str]) -> Check<&'v Map<String, Value>> {
    let entry = value.as_object().ok_or_else(|| format!("an entry must be an object, not {value}"))?;
    only(entry, allowed)?;
    Ok(entry)
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
        // A map of keys to values, each named by its key; or entries with a key each.
        "core" => Op::CoreSet(match value {
            Value::Object(map) if !map.contains_key("key") => {
                map.iter().map(|(key, v)| (Some(Item::Key(key.clone())), core_entry(key, v))).collect()
            }
            _ => items(value, |e| {
                let e = entry(e, &["key", "value", "importance", "ttl"])?;
                let key = text_of(e.get("key").unwrap_or(&Value::Null), "key")?;
                let mut fields = e.clone();
                fields.remove("key");
                core_entry(&key, &Value::Object(fields))
            }),
        }),
        "core_get" => Op::CoreGet(items(value, |key| text_of(key, "a core_get key"))),
        "core_delete" => Op::CoreDelete(items(value, |key| text_of(key, "a core_delete key"))),
        "archival" => Op::ArchivalAdd(items(value, |record| match record {
            Value::String(_) => Ok((text_of(record, "archival text")?, vec![])),
            Value::Object(_) => {
                let e = entry(record, &["text", "content", "tags"])?;
                let text = e.get("text").or_else(|| e.get("content")).unwrap_or(&Value::Null);
                Ok((text_of(text, "archival text")?, tags(e.get("tags"))?))
            }
            other => Err(format!("an archival record must be a text or an object, not {other}")),
        })),
        "archival_update" => Op::ArchivalUpdate(items(value, |update| {
            let e = entry(update, &["id", "text", "tags"])?;
            let id = e.get("id").and_then(Value::as_i64).ok_or("archival_update needs an integer id")?;
            let text = e.get("text").map(|t| text_of(t, "text")).transpose()?;
            let new_tags = e.get("tags").map(|t| tags(Some(t))).transpose()?;
            if text.is_none() && new_tags.is_none() {
                return Err(format!("archival_update of {id} gives neither text nor tags"));
            }
            Ok((id, text, new_tags))
        })),
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
        "recall" => Op::RecallAppend(items(value, |event| {
            let e = entry(event, &["kind", "content", "text", "summary", "tags"])?;
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
        })),
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
        "step" => Op::Step(items(value, |step| {
            let Value::Object(mut fields) = step.clone() else {
                return Err(format!("a step is an object with a type, not {step}"));
            };
            let step_type = fields.remove("type").ok_or("a step needs a type")?;
            let step_type = StepType::parse(&text_of(&step_type, "type")?).map_err(|e| e.to_string())?;
            Step::new(step_type, Value::Object(fields)).map_err(|e| e.to_string())
        })),
        _ => unreachable!("every key of KEYS is handled"),
    })
}

/// Whether the operation only reads.
pub(super) fn is_read(op: &Op) -> bool {
    matches!(op, Op::CoreGet(_) | Op::ArchivalSearch(_) | Op::RecallSearch(..))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
                let op = ops[0].1.as_ref().unwrap_or_else(|e| panic!("{key}: {e}"));
                assert_eq!(item_problems(op), [], "{key}");
            }
        }
    }

    #[test]
    fn a_key_given_twice_is_a_problem_and_the_first_is_kept() {
        let (ops, problems) = parse(r#"{"core": {"a": "1"}, "core": {"b": "2"}}"#).unwrap();
        let reasons: Vec<(&str, &str)> =
            problems.iter().map(|p| (p.op.as_str(), p.reason.as_str())).collect();
        assert_eq!(reasons, [("core", "given twice")]);
        let Ok(Op::CoreSet(set)) = &ops[0].1 else { panic!("{ops:?}") };
        assert_eq!((ops.len(), set[0].0.clone()), (1, Some(Item::Key("a".into()))));
        let (ops, problems) =
            parse(r#"{"mem_core_set": {"a": "1"}, "step": [], "core": {"b": "2"}}"#).unwrap();
        assert_eq!(problems[0].reason, "given twice, as mem_core_set and core");
        let names: Vec<&str> = ops.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["core", "step"], "in the order they apply");
    }

    type ItemProblems = Vec<(Option<Item>, String)>;

    /// The problems of an operation's items, by item.
    fn item_problems(op: &Op) -> ItemProblems {
        fn of<T>(items: &Items<T>) -> ItemProblems {
            items
                .iter()
                .filter_map(|(item, check)| Some((item.clone(), check.as_ref().err()?.clone())))
                .collect()
        }
        match op {
            Op::CoreSet(items) => of(items),
            Op::CoreGet(items) | Op::CoreDelete(items) => of(items),
            Op::ArchivalAdd(items) => of(items),
            Op::ArchivalUpdate(items) => of(items),
            Op::RecallAppend(items) => of(items),
            Op::Step(items) => of(items),
            _ => vec![],
        }
    }

    #[test]
    fn lists_every_problem_of_every_item() {
        let block = json!({
            "core": {"good": "1", "": "x", "b": "", "c": null},
            "bogus": 1,
            "archival_search": {"query": "q", "k": 0},
            "archival": [{"text": ""}, {"tags": ["x"]}, "fine"],
            "recall": [{"kind": "n"}, {"content": "ok"}],
            "core_get": ["k", 3],
            "step": {"text": "no type"},
        });
        let (ops, problems) = parse(&block.to_string()).unwrap();
        let ops: Vec<(&str, Check<ItemProblems>)> = ops
            .iter()
            .map(|(name, op)| (*name, op.as_ref().map(item_problems).map_err(String::clone)))
            .collect();
        let key = |k: &str| Some(Item::Key(k.into()));
        let at = |i: usize| Some(Item::Index(i));
        let problem = |item, reason: &str| (item, reason.to_string());
        assert_eq!(
            ops,
            [
                (
                    "core",
                    Ok(vec![
                        problem(key(""), "core keys must not be empty"),
                        problem(key("b"), "core value of \"b\" is empty"),
                        problem(key("c"), "core value of \"c\" is null (use core_delete)"),
                    ])
                ),
                ("core_get", Ok(vec![problem(at(1), "a core_get key must be a string, not 3")])),
                (
                    "archival",
                    Ok(vec![
                        problem(at(0), "archival text is empty"),
                        problem(at(1), "archival text must be a string, not null"),
                    ])
                ),
                ("archival_search", Err("k must be a positive integer, not 0".into())),
                ("recall", Ok(vec![problem(at(0), "a recall event needs content, text or summary")])),
                ("step", Ok(vec![problem(None, "a step needs a type")])),
            ]
        );
        assert_eq!(problems, [Skipped { op: "bogus".into(), item: None, reason: "unknown key".into() }]);
        assert_eq!(parse("[1]").unwrap_err().reason, "the block must be a JSON object");
        assert_eq!(parse("\"core\"").unwrap_err().reason, "the block must be a JSON object");
        assert!(parse("{oops").unwrap_err().reason.starts_with("invalid JSON"));
    }
}
