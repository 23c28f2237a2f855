//! Text as every layer stores it: redacted (SPEC §7), tags normalised, and content hashed for
//! duplicate suppression.

use crate::error::{Error, Result};
use crate::redact::{redact, secret_assignment, MASK};
use crate::rows::{is_step, CONVERSATION_KIND};
use crate::store::Store;
use serde_json::{Map, Value};
use std::borrow::Cow;

impl Store {
    /// Text as it will be stored: redacted when redaction is on, and a NUL character (which
    /// PostgreSQL cannot store, and a tool's binary output may hold) as U+FFFD on both
    /// backends.
    pub(crate) fn redacted(&self, text: &str) -> String {
        let text = if self.config.redaction.enabled { redact(text) } else { Cow::Borrowed(text) };
        match text.contains('\0') {
            true => text.replace('\0', "\u{FFFD}"),
            false => text.into_owned(),
        }
    }

    /// A name memctl stores, journals and prints as given (a branch id, a node_uid, a core
    /// key), which therefore cannot be masked as a text is: refused when redaction would mask
    /// it.
    pub(crate) fn refuse_secret_name(&self, name: &str, what: &str) -> Result<()> {
        if self.redacted(name) != name {
            return Err(Error::invalid(format!("invalid {what}: it holds what looks like a secret"))
                .with_hint("name it, and put the secret (which is masked) in a value"));
        }
        Ok(())
    }

    /// An event kind as stored: trimmed, non-empty, one line, redacted. A kind to evict is
    /// taken the same way, so that it names the kind an append of it stored.
    pub(crate) fn event_kind(&self, kind: &str) -> Result<String> {
        let kind = kind.trim();
        if kind.is_empty() || kind.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "invalid event kind {kind:?}: kinds are non-empty single-line text"
            )));
        }
        Ok(self.redacted(kind))
    }

    /// The kind of a new recall event or summary: an event kind the conversation does not
    /// hold for itself (steps' `step:…`, its summaries' `conversation`), which only the
    /// conversation layer writes.
    pub(crate) fn recall_kind(&self, kind: &str) -> Result<String> {
        let kind = self.event_kind(kind)?;
        if is_step(&kind) {
            return Err(Error::invalid(format!(
                "event kind '{kind}' is taken by conversation steps: add a step with `memctl step add`"
            )));
        }
        if kind == CONVERSATION_KIND {
            return Err(Error::invalid(format!(
                "event kind '{kind}' is taken by the conversation's summaries (`memctl compact`)"
            )));
        }
        Ok(kind)
    }

    /// JSON as it will be stored (a branch's metadata, a step's payload): every key and string
    /// redacted as text is, and the text of a key that names a secret (`"api_key": "…"`)
    /// masked whole, as `api_key: …` in text would be.
    pub(crate) fn redacted_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.redacted(text)),
            Value::Array(items) => items.iter().map(|item| self.redacted_value(item)).collect(),
            Value::Object(entries) => Value::Object(self.redacted_entries(entries)),
            other => other.clone(),
        }
    }

    /// The text of a value named `name` (a core key, a JSON key) as stored: masked whole when
    /// `name: "text"` in text would lose it (`api_key`, `pass`; not `true` or `5`), else
    /// redacted as text is.
    pub(crate) fn redacted_named(&self, name: &str, text: &str) -> String {
        if self.config.redaction.enabled && secret_assignment(name, text.trim(), true) {
            MASK.to_string()
        } else {
            self.redacted(text)
        }
    }

    /// The entries of a JSON object as [`Store::redacted_value`] stores them.
    pub(crate) fn redacted_entries(&self, entries: &Map<String, Value>) -> Map<String, Value> {
        entries
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::String(text) => Value::String(self.redacted_named(key, text)),
                    _ => self.redacted_value(value),
                };
                (self.redacted(key), value)
            })
            .collect()
    }
}

/// Tags as stored: trimmed, non-empty, one line, each once, order kept. A search's tag filter
/// is taken the same way, so that it names the tags that a write of it stored.
pub(crate) fn normalize_tags(store: &Store, tags: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim();
        if tag.is_empty() || tag.chars().any(char::is_control) {
            return Err(Error::invalid(format!("invalid tag {tag:?}: tags are non-empty single-line text")));
        }
        let tag = store.redacted(tag);
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

/// Whether two rows carry the same tags, in any order (a row holds each tag once, in the order
/// it was given): for what compares rows as a reader sees them (`diff`, an update that changes
/// nothing). The duplicate checks hash the tags in their order: rows stored so carry that hash.
pub fn same_tags(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|tag| b.contains(tag))
}

pub(crate) fn content_hash(parts: &[&str]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    *hasher.finalize().as_bytes()
}
