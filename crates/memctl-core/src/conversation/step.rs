//! Typed steps: what an agent inside a node did, as recall events of kind `step:<type>` whose
//! payload (a JSON object, validated here) is kept beside a readable text.

use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The kinds of step, as smolagents and chat APIs know them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepType {
    /// The system prompt.
    System,
    /// The task the agent was given.
    Task,
    /// A user turn.
    User,
    /// A plan.
    Planning,
    /// A tool call: thought, tool, args, and its observation or error.
    Action,
    /// Free text from the agent.
    Assistant,
    /// The final answer.
    Final,
}

impl StepType {
    pub const ALL: [StepType; 7] = [
        StepType::System,
        StepType::Task,
        StepType::User,
        StepType::Planning,
        StepType::Action,
        StepType::Assistant,
        StepType::Final,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepType::System => "system",
            StepType::Task => "task",
            StepType::User => "user",
            StepType::Planning => "planning",
            StepType::Action => "action",
            StepType::Assistant => "assistant",
            StepType::Final => "final",
        }
    }

    pub fn parse(name: &str) -> Result<StepType> {
        StepType::ALL.into_iter().find(|t| t.as_str() == name).ok_or_else(|| {
            let names: Vec<&str> = StepType::ALL.iter().map(|t| t.as_str()).collect();
            Error::invalid(format!("unknown step type '{name}': expected one of {}", names.join(", ")))
        })
    }

    /// "a task", "an action": for messages.
    fn with_article(self) -> String {
        let article = if matches!(self, StepType::Action | StepType::Assistant) { "an" } else { "a" };
        format!("{article} {}", self.as_str())
    }

    /// The event kind steps of this type are stored under.
    pub fn kind(self) -> String {
        format!("{}{}", crate::rows::STEP_KIND, self.as_str())
    }

    /// The payload's fields: (name, required, what it holds).
    fn fields(self) -> &'static [(&'static str, bool, Field)] {
        match self {
            StepType::System | StepType::Task | StepType::User | StepType::Assistant => {
                &[("text", true, Field::Text)]
            }
            StepType::Planning => &[("plan", true, Field::Text)],
            StepType::Final => &[("answer", true, Field::Text)],
            StepType::Action => &[
                ("tool", true, Field::Text),
                ("thought", false, Field::Text),
                ("args", false, Field::Any),
                ("observation", false, Field::Text),
                ("error", false, Field::Text),
                ("duration", false, Field::Seconds),
            ],
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Field {
    Text,
    Any,
    Seconds,
}

/// A validated step: its type and payload (a JSON object with only the type's fields; a stored
/// shortened copy's also holds `at`, the id of the step it stands in for, which `prune` writes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    #[serde(rename = "type")]
    pub step_type: StepType,
    pub payload: Map<String, Value>,
}

impl Step {
    /// Checks `payload` against `step_type`'s fields: every required one present and non-empty,
    /// each of the right type, no other field. Errors name the field.
    pub fn new(step_type: StepType, payload: Value) -> Result<Step> {
        let name = step_type.with_article();
        let Value::Object(payload) = payload else {
            return Err(Error::invalid(format!("{name} step is a JSON object, not {payload}")));
        };
        let fields = step_type.fields();
        for key in payload.keys() {
            if !fields.iter().any(|(f, _, _)| f == key) {
                let known: Vec<&str> = fields.iter().map(|(f, _, _)| *f).collect();
                return Err(Error::invalid(format!(
                    "{name} step has no field '{key}' (its fields: {})",
                    known.join(", ")
                )));
            }
        }
        for (field, required, kind) in fields {
            match (payload.get(*field), kind) {
                (None | Some(Value::Null), _) if *required => {
                    return Err(Error::invalid(format!("{name} step needs '{field}'")));
                }
                (None | Some(Value::Null), _) => {}
                (Some(Value::String(s)), Field::Text) if *required && s.trim().is_empty() => {
                    return Err(Error::invalid(format!("'{field}' of {name} step must not be empty")));
                }
                (Some(Value::String(_)), Field::Text) | (Some(_), Field::Any) => {}
                (Some(Value::Number(n)), Field::Seconds) if n.as_f64().is_some_and(|s| s >= 0.0) => {}
                (Some(other), Field::Text) => {
                    return Err(Error::invalid(format!(
                        "'{field}' of {name} step must be text, not {other}"
                    )));
                }
                (Some(other), _) => {
                    return Err(Error::invalid(format!(
                        "'{field}' of {name} step must be a number of seconds, not {other}"
                    )));
                }
            }
        }
        let payload = payload.into_iter().filter(|(_, v)| !v.is_null()).collect();
        Ok(Step { step_type, payload })
    }

    /// A text field of the payload ("" when absent).
    pub fn text(&self, field: &str) -> &str {
        self.payload.get(field).and_then(Value::as_str).unwrap_or("")
    }

    /// The action's arguments ({} when absent).
    pub fn args(&self) -> Value {
        self.payload.get("args").cloned().unwrap_or_else(|| json!({}))
    }

    /// What an action's tool gave back, as the model is shown it, and whether it failed: the
    /// observation, the error (`Error: …`), or the observation and the error after it.
    pub fn result(&self) -> (String, bool) {
        match (self.text("observation"), self.text("error")) {
            (observation, "") => (observation.to_string(), false),
            ("", error) => (format!("Error: {error}"), true),
            (observation, error) => (format!("{observation}\nError: {error}"), true),
        }
    }

    /// The step as one readable line or block: what `recall list` and `context` show.
    pub fn render(&self) -> String {
        match self.step_type {
            StepType::System | StepType::Task | StepType::User | StepType::Assistant => {
                self.text("text").to_string()
            }
            StepType::Planning => self.text("plan").to_string(),
            StepType::Final => self.text("answer").to_string(),
            StepType::Action => {
                let mut out = String::new();
                if !self.text("thought").is_empty() {
                    out.push_str(self.text("thought"));
                    out.push('\n');
                }
                out.push_str(&format!("{}({})", self.text("tool"), self.args()));
                match (self.text("observation"), self.text("error")) {
                    ("", "") => {}
                    (observation, "") => out.push_str(&format!(" → {observation}")),
                    ("", error) => out.push_str(&format!(" → error: {error}")),
                    (observation, error) => out.push_str(&format!(" → {observation}\nerror: {error}")),
                }
                out
            }
        }
    }
}
