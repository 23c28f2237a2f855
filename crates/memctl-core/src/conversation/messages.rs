//! A branch's conversation as chat messages: the steps its view holds (after the newest reset),
//! with compaction summaries where the steps they replace were, mapped to the OpenAI or
//! Anthropic message shapes, optionally pruned and fitted to a token budget.

use super::step::{Step, StepType};
use super::{RESET_KIND, SUMMARY_KIND};
use crate::archival::Search;
use crate::error::{Error, Result};
use crate::rows::BranchPath;
use crate::store::Store;
use crate::tokens::{count_tokens_within, Encoding};
use crate::view;
use serde::Serialize;
use serde_json::{json, Value};
use std::cell::OnceCell;

/// The message shapes of the two chat APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageFormat {
    /// `[{role, content, tool_calls?}, {role: "tool", tool_call_id, content}, …]`
    #[default]
    Openai,
    /// `{system, messages: [{role, content: text | blocks}]}`, tool calls as `tool_use` and
    /// `tool_result` blocks.
    Anthropic,
}

/// How to read the conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    pub format: MessageFormat,
    /// Leave out observations; keep plans (smolagents' summary mode).
    pub summary_mode: bool,
    /// Only the newest messages that fit, counted in this encoding; system and task always.
    pub budget: Option<(usize, Encoding)>,
    /// Only the last N steps (besides system and task).
    pub keep_last: Option<usize>,
    /// Observations of actions older than the last N steps cut to C characters.
    pub old_observations: Option<(usize, usize)>,
    /// A system message with the top K archival hits for the newest user message.
    pub retrieve: usize,
}

/// The messages, and what fitting them to the budget left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Messages {
    pub format: MessageFormat,
    /// The system prompt (Anthropic: apart from the messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    pub messages: Vec<Value>,
    /// Tokens counted as chat APIs do: 4 per message plus its text (budgeted reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
    /// Steps left out to fit the budget.
    pub dropped: usize,
}

impl Messages {
    /// What goes on stdout: the array (OpenAI) or `{system, messages}` (Anthropic).
    pub fn payload(&self) -> MessagesPayload<'_> {
        match self.format {
            MessageFormat::Openai => MessagesPayload::Openai(&self.messages),
            MessageFormat::Anthropic => MessagesPayload::Anthropic {
                messages: &self.messages,
                system: self.system.as_deref().unwrap_or_default(),
            },
        }
    }
}

/// [`Messages::payload`], borrowing the messages (serialized as they are, not copied first).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum MessagesPayload<'a> {
    Openai(&'a [Value]),
    /// Its keys in sorted order, as the JSON object it replaced wrote them.
    Anthropic {
        messages: &'a [Value],
        system: &'a str,
    },
}

/// One item of the conversation, at the position of the step it is or stands in for.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Step {
        id: i64,
        step: LazyStep,
    },
    /// A compaction summary: its text and the steps it replaced.
    Summary {
        id: i64,
        text: String,
        steps: Vec<i64>,
    },
}

/// A step as stored, its payload parsed when first wanted: a budget mostly reaches only the
/// newest steps of a long conversation, and parsing (and dropping) every payload cost a fifth of
/// a `messages` call.
#[derive(Debug, Clone)]
pub(crate) struct LazyStep {
    pub step_type: StepType,
    payload: Option<String>,
    parsed: OnceCell<Step>,
}

impl LazyStep {
    fn new(step_type: StepType, payload: Option<String>) -> LazyStep {
        LazyStep { step_type, payload, parsed: OnceCell::new() }
    }

    /// A step not stored yet, with no `at`.
    fn parsed(step: Step) -> LazyStep {
        LazyStep { step_type: step.step_type, payload: None, parsed: OnceCell::from(step) }
    }

    /// The step, its payload parsed (stored payloads were validated when written).
    pub fn get(&self) -> &Step {
        self.parsed.get_or_init(|| {
            let payload = serde_json::from_str(self.payload.as_deref().unwrap_or("{}")).unwrap_or_default();
            Step { step_type: self.step_type, payload }
        })
    }

    pub fn get_mut(&mut self) -> &mut Step {
        self.get();
        self.parsed.get_mut().expect("parsed just above")
    }

    /// The payload's `at` (the step a shortened copy stands in for). Only a payload that holds
    /// the text `"at"` or a `\u` escape (the only other way to spell the key) can have one:
    /// the others are not parsed for it.
    fn at(&self) -> Option<i64> {
        let payload = self.payload.as_deref()?;
        if !(payload.contains("\"at\"") || payload.contains("\\u")) {
            return None;
        }
        self.get().payload.get("at").and_then(Value::as_i64)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub position: i64,
    pub item: Item,
}

impl Entry {
    /// The entry of a step not stored yet, at `position`.
    pub fn new_step(position: i64, step: Step) -> Entry {
        Entry { position, item: Item::Step { id: position, step: LazyStep::parsed(step) } }
    }

    pub fn step_type(&self) -> Option<StepType> {
        match &self.item {
            Item::Step { step, .. } => Some(step.step_type),
            Item::Summary { .. } => None,
        }
    }

    /// System and task steps: never pruned, compacted or left out for the budget.
    pub fn pinned(&self) -> bool {
        matches!(self.step_type(), Some(StepType::System | StepType::Task))
    }

    pub fn is_user(&self) -> bool {
        self.step_type() == Some(StepType::User)
    }
}

/// The conversation of a view, oldest first.
pub(crate) fn conversation(store: &Store, path: &BranchPath) -> Result<Vec<Entry>> {
    let stored = view::steps(store, path)?;
    let reset = stored.iter().filter(|s| s.kind == RESET_KIND).map(|s| s.id).max().unwrap_or(0);
    let mut entries = Vec::new();
    for s in stored.into_iter().filter(|s| s.id > reset && s.kind != RESET_KIND) {
        let Some(name) = s.kind.strip_prefix(crate::rows::STEP_KIND) else { continue };
        let step = LazyStep::new(StepType::parse(name)?, s.payload);
        let position = step.at().unwrap_or(s.id);
        entries.push(Entry { position, item: Item::Step { id: s.id, step } });
    }
    for summary in view::summaries(store, path)?.into_iter().filter(|s| &*s.kind == SUMMARY_KIND) {
        let Some(&position) = summary.event_ids.iter().min() else { continue };
        if position > reset {
            let item = Item::Summary { id: summary.id, text: summary.text, steps: summary.event_ids };
            entries.push(Entry { position, item });
        }
    }
    entries.sort_by_key(|e| e.position);
    Ok(entries)
}

/// The entries left after the read-time pruning options.
fn pruned(mut entries: Vec<Entry>, options: &ReadOptions) -> Vec<Entry> {
    if let Some(n) = options.keep_last {
        let loose = entries.iter().filter(|e| !e.pinned()).count();
        let mut skip = loose.saturating_sub(n);
        entries.retain(|e| {
            if e.pinned() || skip == 0 {
                return true;
            }
            skip -= 1;
            false
        });
    }
    if let Some((n, max_chars)) = options.old_observations {
        let loose = entries.iter().filter(|e| !e.pinned()).count();
        let old = loose.saturating_sub(n);
        for entry in entries.iter_mut().filter(|e| !e.pinned()).take(old) {
            if let Item::Step { step, .. } = &mut entry.item {
                shorten_observation(step.get_mut(), max_chars);
            }
        }
    }
    entries
}

/// What follows the head kept of a shortened observation.
const SHORTENED: &str = "… [shortened]";

/// Cuts an action's observation and error to `max_chars` each, saying so; true when one was
/// longer. A text cut before counts by the head it kept, so a second cut to as many characters
/// changes nothing.
pub(crate) fn shorten_observation(step: &mut Step, max_chars: usize) -> bool {
    if step.step_type != StepType::Action {
        return false;
    }
    let mut cut = false;
    for field in ["observation", "error"] {
        let text = step.text(field);
        let kept = text.strip_suffix(SHORTENED).unwrap_or(text);
        if kept.chars().count() > max_chars {
            let head: String = kept.chars().take(max_chars).collect();
            step.payload.insert(field.into(), Value::String(format!("{head}{SHORTENED}")));
            cut = true;
        }
    }
    cut
}

/// The messages one entry becomes (one or two).
pub(crate) fn to_messages(entry: &Entry, format: MessageFormat, summary_mode: bool) -> Vec<Value> {
    let (id, step) = match &entry.item {
        Item::Summary { text, steps, .. } => {
            let content = match steps.len() {
                1 => format!("[1 earlier step, summarized]\n{text}"),
                n => format!("[{n} earlier steps, summarized]\n{text}"),
            };
            return vec![json!({"role": "assistant", "content": content})];
        }
        Item::Step { id, step } => (*id, step.get()),
    };
    let text = |role: &str, content: &str| json!({"role": role, "content": content});
    match step.step_type {
        StepType::System => vec![text("system", step.text("text"))],
        StepType::Task | StepType::User => vec![text("user", step.text("text"))],
        StepType::Planning => vec![text("assistant", step.text("plan"))],
        StepType::Assistant => vec![text("assistant", step.text("text"))],
        StepType::Final => vec![text("assistant", step.text("answer"))],
        StepType::Action if summary_mode => {
            let thought = step.text("thought");
            let call = format!("Called {}({})", step.text("tool"), step.args());
            let content = if thought.is_empty() { call } else { format!("{thought}\n{call}") };
            vec![text("assistant", &content)]
        }
        StepType::Action => {
            let result = step.result();
            let thought = step.text("thought");
            match format {
                MessageFormat::Openai => vec![
                    json!({"role": "assistant", "content": (!thought.is_empty()).then_some(thought),
                           "tool_calls": [{"id": format!("call_{id}"), "type": "function",
                                           "function": {"name": step.text("tool"), "arguments": step.args().to_string()}}]}),
                    json!({"role": "tool", "tool_call_id": format!("call_{id}"), "content": result.0}),
                ],
                MessageFormat::Anthropic => {
                    let input = match step.args() {
                        Value::Object(map) => Value::Object(map),
                        other => json!({"value": other}),
                    };
                    let mut blocks = Vec::new();
                    if !thought.is_empty() {
                        blocks.push(json!({"type": "text", "text": thought}));
                    }
                    blocks.push(json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": step.text("tool"), "input": input}));
                    vec![
                        json!({"role": "assistant", "content": blocks}),
                        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{id}"),
                                                             "content": result.0, "is_error": result.1}]}),
                    ]
                }
            }
        }
    }
}

/// Tokens of messages as chat APIs count them: 4 per message plus the tokens of its text
/// (every string in it but roles, types and ids).
pub(crate) fn tokens(messages: &[Value], encoding: Encoding) -> usize {
    tokens_within(messages, encoding, usize::MAX).expect("no count exceeds usize::MAX")
}

/// [`tokens`] if they are at most `limit`, else None (counting stops past `limit`).
fn tokens_within(messages: &[Value], encoding: Encoding, limit: usize) -> Option<usize> {
    fn text(value: &Value, out: &mut String) {
        match value {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|v| text(v, out)),
            Value::Object(map) => map
                .iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "role" | "type" | "id" | "tool_call_id" | "tool_use_id")
                })
                .for_each(|(_, v)| text(v, out)),
            Value::Number(n) => out.push_str(&n.to_string()),
            _ => {}
        }
    }
    let mut used: usize = 0;
    for message in messages {
        let room = limit.checked_sub(used)?.checked_sub(4)?;
        let mut s = String::new();
        text(message, &mut s);
        used += 4 + count_tokens_within(encoding, s.trim_end(), room)?;
    }
    Some(used)
}

impl Store {
    /// The conversation of `branch` as chat messages (see [`ReadOptions`]).
    pub fn messages(&self, branch: &str, options: &ReadOptions) -> Result<Messages> {
        self.read(|| {
            let path = self.path(branch)?;
            let entries = pruned(conversation(self, &path)?, options);
            // Each entry's messages, built when first wanted: a budget mostly reaches only the
            // newest of a long conversation.
            let build = |i: usize| to_messages(&entries[i], options.format, options.summary_mode);
            let units: Vec<OnceCell<Vec<Value>>> = entries.iter().map(|_| OnceCell::new()).collect();
            let unit = |i: usize| units[i].get_or_init(|| build(i));
            let mut retrieved = match options.retrieve {
                0 => None,
                k => self.retrieval(branch, &entries, k)?,
            };
            let (keep, tokens) = match options.budget {
                None => (vec![true; entries.len()], None),
                Some((budget, encoding)) => {
                    let (keep, used, fits) = fit(&entries, &unit, retrieved.as_ref(), budget, encoding)?;
                    if let Some(r) = retrieved.as_mut() {
                        r.fits = fits;
                    }
                    (keep, Some(used))
                }
            };
            let dropped = keep.iter().filter(|k| !**k).count();
            let mut messages: Vec<Value> = Vec::new();
            let mut system = Vec::new();
            let mut retrieval = retrieved.filter(|r| r.fits).map(|r| r.message);
            let kept = units.into_iter().enumerate().filter(|(i, _)| keep[*i]);
            for (i, unit) in kept {
                for message in unit.into_inner().unwrap_or_else(|| build(i)) {
                    if options.format == MessageFormat::Anthropic && message["role"] == "system" {
                        system.push(message["content"].as_str().unwrap_or_default().to_string());
                    } else {
                        if let Some(r) = retrieval.take_if(|_| message["role"] != "system") {
                            push_retrieval(options.format, r, &mut messages, &mut system);
                        }
                        messages.push(message);
                    }
                }
            }
            if let Some(r) = retrieval {
                push_retrieval(options.format, r, &mut messages, &mut system);
            }
            let system = (options.format == MessageFormat::Anthropic).then(|| system.join("\n\n"));
            Ok(Messages { format: options.format, system, messages, tokens, dropped })
        })
    }

    /// The retrieval message: the top `k` archival records for the newest user message (or
    /// the task), as a system message.
    fn retrieval(&self, branch: &str, entries: &[Entry], k: usize) -> Result<Option<Retrieved>> {
        let query = entries.iter().rev().find_map(|e| match &e.item {
            Item::Step { step, .. } if matches!(step.step_type, StepType::User | StepType::Task) => {
                Some(step.get().text("text").to_string())
            }
            _ => None,
        });
        let Some(query) = query else { return Ok(None) };
        let hits = self.archival_search(branch, &Search { query, k, tags: vec![] })?;
        if hits.is_empty() {
            return Ok(None);
        }
        let lines: Vec<String> = hits.iter().map(|r| format!("- {}", r.text)).collect();
        let message = json!({"role": "system", "content": format!("Relevant memory:\n{}", lines.join("\n"))});
        Ok(Some(Retrieved { message, fits: true }))
    }
}

struct Retrieved {
    message: Value,
    /// Whether it is within the budget.
    fits: bool,
}

fn push_retrieval(
    format: MessageFormat,
    message: Value,
    messages: &mut Vec<Value>,
    system: &mut Vec<String>,
) {
    match format {
        MessageFormat::Anthropic => system.push(message["content"].as_str().unwrap_or_default().to_string()),
        MessageFormat::Openai => messages.push(message),
    }
}

/// Which units fit `budget`: system and task always (an error if they alone do not fit), then
/// the retrieval message, then user messages newest first, then the rest newest first until
/// one does not fit. Returns the choice, the tokens used and whether the retrieval fits.
fn fit<'a>(
    entries: &[Entry],
    unit: &dyn Fn(usize) -> &'a Vec<Value>,
    retrieved: Option<&Retrieved>,
    budget: usize,
    encoding: Encoding,
) -> Result<(Vec<bool>, usize, bool)> {
    // Counted only for the units considered, and only as far as the room left: a long
    // conversation is mostly never reached.
    let unit_within = |i: usize, room: usize| tokens_within(unit(i), encoding, room);
    let mut keep = vec![false; entries.len()];
    let mut used = 0;
    for (i, _) in entries.iter().enumerate().filter(|(_, e)| e.pinned()) {
        keep[i] = true;
        used += tokens(unit(i), encoding);
    }
    if used > budget {
        return Err(Error::invalid(format!(
            "a budget of {budget} tokens cannot hold the system and task messages ({used} tokens)"
        )));
    }
    // From here `used` never passes `budget`: every cost added is at most the room left.
    let retrieval_cost =
        retrieved.and_then(|r| tokens_within(std::slice::from_ref(&r.message), encoding, budget - used));
    let retrieval_fits = retrieval_cost.is_some();
    used += retrieval_cost.unwrap_or(0);
    for (i, _) in entries.iter().enumerate().rev().filter(|(_, e)| e.is_user()) {
        if let Some(c) = unit_within(i, budget - used) {
            keep[i] = true;
            used += c;
        }
    }
    for (i, _) in entries.iter().enumerate().rev().filter(|(_, e)| !e.pinned() && !e.is_user()) {
        let Some(c) = unit_within(i, budget - used) else { break };
        keep[i] = true;
        used += c;
    }
    Ok((keep, used, retrieval_fits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A stored step's `at` is the parsed payload's, whether or not the text `"at"` appears
    /// elsewhere in it; its payload is the stored one, parsed.
    #[test]
    fn stored_steps_read_at_as_their_parsed_payload_does() {
        for payload in [
            None,
            Some(r#"{"text": "at"}"#),
            Some(r#"{"text": "\"at\" noon"}"#),
            Some(r#"{"tool": "run", "at": 12, "observation": "at"}"#),
            Some(r#"{"at": 3}"#),
            Some(r#"{"plan": "x", "at" : 7}"#),
            Some(r#"{"plan": "x", "\u0061t": 8}"#),
            Some(r#"{"plan": "\u00e9", "a\u0074": 9}"#),
        ] {
            let step = LazyStep::new(StepType::Action, payload.map(str::to_string));
            let parsed: serde_json::Map<String, Value> =
                serde_json::from_str(payload.unwrap_or("{}")).unwrap();
            assert_eq!(step.at(), parsed.get("at").and_then(Value::as_i64), "{payload:?}");
            assert_eq!(step.get().payload, parsed);
        }
    }

    /// Tokens within a limit are the whole count up to the limit, and nothing past it.
    #[test]
    fn tokens_within_a_limit_are_the_whole_count_up_to_it() {
        let messages = [
            json!({"role": "user", "content": "tune the tile size"}),
            json!({"role": "assistant", "content": "32 \u{2014} the fastest"}),
        ];
        for encoding in Encoding::ALL {
            let whole = tokens(&messages, encoding);
            assert!(whole > 8);
            for limit in 0..whole + 3 {
                assert_eq!(tokens_within(&messages, encoding, limit), Some(whole).filter(|&t| t <= limit));
            }
        }
    }
}
