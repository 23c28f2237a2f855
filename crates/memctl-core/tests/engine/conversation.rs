//! Conversation memory over random step sequences: a token budget is never exceeded and never
//! drops the system and task steps, or a user message while all of them fit; compaction keeps
//! every user message verbatim; prune, compact and reset change no other branch's view.

use memctl_core::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const WORDS: [&str; 8] = ["tile", "cache", "gpu", "runtime", "12.4 s", "make bench", "segfault", "L2"];

#[derive(Clone, Debug)]
enum Gen {
    User(usize),
    Planning(usize),
    Action { words: usize, observation: usize, error: bool },
    Assistant(usize),
    Final(usize),
}

fn text(seed: usize, len: usize) -> String {
    (0..len).map(|i| WORDS[(seed + i * 3) % WORDS.len()]).collect::<Vec<_>>().join(" ")
}

fn step(gen: &Gen, n: usize) -> Step {
    let (t, payload) = match gen {
        Gen::User(len) => (StepType::User, json!({"text": format!("user {n}: {}", text(n, *len))})),
        Gen::Planning(len) => (StepType::Planning, json!({"plan": text(n, *len)})),
        Gen::Action { words, observation, error } => {
            let mut p = json!({"tool": "run", "thought": text(n, *words), "args": {"n": n}});
            p["observation"] = json!(text(n + 1, *observation));
            if *error {
                p["error"] = json!("exit 2");
            }
            (StepType::Action, p)
        }
        Gen::Assistant(len) => (StepType::Assistant, json!({"text": text(n, *len)})),
        Gen::Final(len) => (StepType::Final, json!({"answer": text(n, *len)})),
    };
    Step::new(t, payload).unwrap()
}

fn gen() -> impl Strategy<Value = Gen> {
    prop_oneof![
        2 => (1..12usize).prop_map(Gen::User),
        1 => (1..20usize).prop_map(Gen::Planning),
        4 => (0..6usize, 0..60usize, prop::bool::weighted(0.2))
            .prop_map(|(words, observation, error)| Gen::Action { words, observation, error }),
        1 => (1..20usize).prop_map(Gen::Assistant),
        1 => (1..8usize).prop_map(Gen::Final),
    ]
}

/// root (system, task, the first half of the steps) ─┬─ a (the rest)
///                                                    └─ b (a sibling with one step)
fn build(steps: &[Gen]) -> Store {
    let store = Store::open_in_memory(Config::default(), Clock::Fixed(1_700_000_000.0)).unwrap();
    store.create_root("root").unwrap();
    store
        .step_add("root", &Step::new(StepType::System, json!({"text": "You tune stencils."})).unwrap())
        .unwrap();
    store
        .step_add("root", &Step::new(StepType::Task, json!({"text": "Make the 3D stencil fast."})).unwrap())
        .unwrap();
    let half = steps.len() / 2;
    for (n, g) in steps[..half].iter().enumerate() {
        store.step_add("root", &step(g, n)).unwrap();
    }
    store.fork("root", Some("a")).unwrap();
    store.fork("root", Some("b")).unwrap();
    for (n, g) in steps[half..].iter().enumerate() {
        store.step_add("a", &step(g, half + n)).unwrap();
    }
    store.step_add("b", &step(&Gen::User(3), 999)).unwrap();
    store
}

fn user_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .filter(|t| t.starts_with("user "))
        .collect()
}

fn views(store: &Store) -> BTreeMap<&'static str, (View, Messages)> {
    ["root", "b"]
        .into_iter()
        .map(|b| (b, (store.view(b).unwrap(), store.messages(b, &ReadOptions::default()).unwrap())))
        .collect()
}

fn tokens(messages: &[Value]) -> usize {
    // 4 per message plus its text, as memctl counts; recomputed here from the messages alone.
    messages
        .iter()
        .map(|m| {
            let mut text = String::new();
            collect(m, &mut text);
            4 + count_tokens(Encoding::Cl100kBase, text.trim_end())
        })
        .sum()
}

fn collect(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "role" | "type" | "id" | "tool_call_id" | "tool_use_id"))
            .for_each(|(_, v)| collect(v, out)),
        Value::Number(n) => out.push_str(&n.to_string()),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_budget_is_kept_and_keeps_what_matters(steps in prop::collection::vec(gen(), 2..30), budget in 30..600usize) {
        let store = build(&steps);
        let all = store.messages("a", &ReadOptions::default()).unwrap().messages;
        let options = ReadOptions { budget: Some((budget, Encoding::Cl100kBase)), ..ReadOptions::default() };
        match store.messages("a", &options) {
            Err(e) => {
                // Only when system and task alone do not fit.
                prop_assert_eq!(e.kind(), ErrorKind::InvalidInput);
                prop_assert!(tokens(&all[..2]) > budget, "{}", e);
            }
            Ok(fitted) => {
                let used = tokens(&fitted.messages);
                prop_assert!(used <= budget, "{} tokens for a budget of {}", used, budget);
                prop_assert_eq!(fitted.tokens, Some(used));
                prop_assert_eq!(&fitted.messages[..2], &all[..2], "system and task first, always");
                // Every user message, if all of them fit with system and task.
                let users = user_texts(&all);
                let user_cost: usize = all.iter().filter(|m| m["role"] == "user").map(|m| tokens(std::slice::from_ref(m))).sum();
                if tokens(&all[..1]) + user_cost <= budget {
                    prop_assert_eq!(user_texts(&fitted.messages), users);
                }
                // What is kept is a subsequence of the whole, in its order.
                let mut rest = all.iter();
                for m in &fitted.messages {
                    prop_assert!(rest.any(|x| x == m), "{} is out of order", m);
                }
            }
        }
    }

    #[test]
    fn reductions_are_copy_on_write_and_keep_user_messages(steps in prop::collection::vec(gen(), 2..30), budget in 20..300usize) {
        let store = build(&steps);
        let before = views(&store);
        let users = user_texts(&store.messages("a", &ReadOptions::default()).unwrap().messages);

        let compacted = store.compact("a", budget, Encoding::Cl100kBase).unwrap();
        let after = store.messages("a", &ReadOptions::default()).unwrap().messages;
        prop_assert_eq!(user_texts(&after), users.clone(), "compaction keeps every user message verbatim");
        prop_assert_eq!(compacted.tokens_after, tokens(&after));
        prop_assert!(compacted.tokens_after <= compacted.tokens_before);
        prop_assert_eq!(&views(&store), &before, "compaction touches only a");

        store.prune("a", Some(3), Some((1, 10))).unwrap();
        let pruned = store.messages("a", &ReadOptions::default()).unwrap().messages;
        prop_assert_eq!(&pruned[..2], &after[..2], "system and task stay");
        prop_assert_eq!(&views(&store), &before, "prune touches only a");

        store.reset("a", ResetScope::All).unwrap();
        prop_assert!(store.messages("a", &ReadOptions::default()).unwrap().messages.is_empty());
        prop_assert!(store.view("a").unwrap().core.is_empty() && store.view("a").unwrap().archival.is_empty());
        prop_assert_eq!(&views(&store), &before, "reset touches only a");
        // A fork made now continues a's (empty) conversation; root's is whole.
        store.fork("a", Some("a2")).unwrap();
        prop_assert!(store.messages("a2", &ReadOptions::default()).unwrap().messages.is_empty());
    }
}

#[test]
fn a_child_continues_its_parents_conversation_as_of_the_fork() {
    let store = build(&[Gen::User(2), Gen::Planning(3), Gen::User(2), Gen::Final(2)]);
    store.step_add("root", &step(&Gen::Assistant(2), 50)).unwrap(); // after the forks
    let roles = |b: &str| -> Vec<String> {
        store
            .messages(b, &ReadOptions::default())
            .unwrap()
            .messages
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(roles("a"), ["system", "user", "user", "assistant", "user", "assistant"]);
    assert_eq!(roles("b"), ["system", "user", "user", "assistant", "user"]);
    assert_eq!(roles("root").len(), 5);
}

#[test]
fn bad_steps_name_the_field() {
    let bad = [
        (StepType::Action, json!({"thought": "x"}), "needs 'tool'"),
        (StepType::User, json!({"text": "hi", "plan": "x"}), "no field 'plan'"),
        (StepType::Action, json!({"tool": "run", "duration": "long"}), "'duration'"),
        (StepType::Final, json!({"answer": 42}), "'answer'"),
        (StepType::Task, json!("just text"), "JSON object"),
        (StepType::Planning, json!({"plan": "  "}), "must not be empty"),
    ];
    for (t, payload, expected) in bad {
        let err = Step::new(t, payload.clone()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains(expected), "{payload}: {err}");
    }
    assert!(StepType::parse("observation").unwrap_err().to_string().contains("unknown step type"));
}
