//! End-to-end: `context`, `pressure`, `consolidate` and the summarizer protocol (SPEC §4.5,
//! §4.6, §6), through the real binary.

use crate::support::{array, backends, int, Db, Sandbox};
use serde_json::Value;

/// A root with 12 events of two kinds and two children forked from it.
fn search_run(db: &Db, config: &str) -> Sandbox {
    let sb = Sandbox::on(db, config);
    sb.ok(&["init"]);
    sb.ok(&["branch", "create", "root"]);
    sb.ok(&["core", "set", "root", "task", "tune the stencil"]);
    for i in 0..12 {
        let kind = if i % 2 == 0 { "metric" } else { "error" };
        sb.ok(&["recall", "append", "root", "--kind", kind, &format!("root {kind} {i}")]);
    }
    sb.ok(&["fork", "root", "a"]);
    sb.ok(&["fork", "root", "b"]);
    sb
}

const SMALL: &str = "recall_max_events = 4\nrecall_consolidation_threshold = 1.5\nauto_consolidate = false\n";

/// A summarizer script that counts its calls in `calls.txt` and answers with the request's task.
const COUNTING_SCRIPT: &str = "#!/bin/sh\nread -r request\necho x >> calls.txt\nprintf 'LLM summary of %s' \"$(printf '%s' \"$request\" | head -c 24)\"\n";

fn with_summarizer(db: &Db, script: &str, timeout_s: u64) -> Sandbox {
    let config = format!("{SMALL}\n[summarizer]\ncommand = \"sh ./summarize.sh\"\ntimeout_s = {timeout_s}\n");
    let sb = search_run(db, &config);
    std::fs::write(sb.file("summarize.sh"), script).unwrap();
    sb
}

fn calls(sb: &Sandbox) -> usize {
    std::fs::read_to_string(sb.file("calls.txt")).map(|t| t.lines().count()).unwrap_or(0)
}

#[test]
fn context_prints_the_prompt_section_within_budget() {
    for db in backends("context_prints_the_prompt_section_within_budget") {
        context_prints_the_prompt_section_within_budget_on(&search_run(&db, SMALL));
    }
}

fn context_prints_the_prompt_section_within_budget_on(sb: &Sandbox) {
    let text = sb.ok(&["context", "a", "--no-limit"]);
    assert!(text.starts_with("Core Memory:\n- task: tune the stencil\nRecall Memory:\n- [error] root error 11\n- [metric] root metric 10\n"), "{text}");
    let json = sb.json(&["context", "a", "--budget-chars", "60"]);
    let rendered = json["text"].as_str().unwrap();
    assert!(rendered.chars().count() <= 60);
    assert_eq!(int(&json, "chars") as usize, rendered.chars().count());
    assert!(json.get("tokens").is_none());
    for section in ["core", "recall", "archival"] {
        array(&json["sections"][section], "included");
        array(&json["sections"][section], "dropped");
    }
    assert!(!array(&json["sections"]["recall"], "dropped").is_empty());
    let tokens = sb.json(&["context", "a", "--budget-tokens", "15", "--encoding", "o200k_base"]);
    assert!(int(&tokens, "tokens") <= 15);
    // An unknown encoding is a usage error, as for `messages` and `compact`.
    for command in [&["context", "a"][..], &["messages", "a"], &["compact", "a"]] {
        let args = [command, &["--budget-tokens", "15", "--encoding", "gpt2"]].concat();
        let refused = sb.run(&args).text_error(2);
        assert!(refused.stderr.contains("unknown token encoding \"gpt2\""), "{}", refused.transcript());
    }
    sb.run(&["messages", "a", "--encoding", "o200k_base"]).text_error(2);
    sb.run(&["context", "a", "--budget-tokens", "15"]).text_error(2);
}

#[test]
fn pressure_and_consolidate_from_the_command_line() {
    for db in backends("pressure_and_consolidate_from_the_command_line") {
        pressure_and_consolidate_from_the_command_line_on(&search_run(&db, SMALL));
    }
}

fn pressure_and_consolidate_from_the_command_line_on(sb: &Sandbox) {
    // The archival records: counted with their characters (not bytes), current versions only.
    let archival = |branch: &str| {
        let p = sb.json(&["pressure", branch]);
        (int(&p["archival"], "count"), int(&p["archival"], "chars"))
    };
    let id = int(&sb.json(&["archival", "add", "a", "été — résumé"]), "id").to_string();
    sb.ok(&["archival", "add", "a", "plain"]);
    assert_eq!(archival("a"), (2, 17));
    sb.ok(&["fork", "a", "a-child"]);
    sb.ok(&["archival", "update", "a-child", &id, "--text", "naïve"]);
    assert_eq!(archival("a-child"), (2, 10));
    assert_eq!(archival("a"), (2, 17), "the parent keeps its version");
    sb.ok(&["archival", "delete", "a-child", &id]);
    assert_eq!(archival("a-child"), (1, 5));
    let p = sb.json(&["pressure", "a"]);
    assert_eq!(p["recall"]["count"], 12);
    assert!(array(&p, "recommendations").iter().any(|r| r == "consolidate_recall"));
    let out = sb.json(&["consolidate", "a"]);
    assert_eq!(int(&out, "consolidated"), 8);
    assert_eq!(array(&out, "summaries").len(), 2);
    let list = sb.json(&["recall", "list", "a", "--limit", "100"]);
    assert_eq!((array(&list, "events").len(), array(&list, "summaries").len()), (4, 2));
    // The sibling and the parent keep every event.
    assert_eq!(array(&sb.json(&["recall", "list", "b", "--limit", "100"]), "events").len(), 12);
    assert_eq!(array(&sb.json(&["recall", "list", "root", "--limit", "100"]), "events").len(), 12);
    let again = sb.ok(&["consolidate", "a"]);
    assert!(again.starts_with("Nothing to consolidate"), "{again}");
}

#[test]
fn summarizer_answers_are_used_and_shared_through_the_cache() {
    for db in backends("summarizer_answers_are_used_and_shared_through_the_cache") {
        summarizer_answers_are_used_and_shared_through_the_cache_on(&with_summarizer(
            &db,
            COUNTING_SCRIPT,
            10,
        ));
    }
}

fn summarizer_answers_are_used_and_shared_through_the_cache_on(sb: &Sandbox) {
    let out = sb.run(&["--json", "consolidate", "a"]).success();
    assert_eq!(out.stderr, "", "no warning when the summarizer answers");
    assert_eq!(calls(sb), 2, "one call per kind");
    let summaries: Vec<Value> = array(&sb.json(&["recall", "list", "a"]), "summaries").clone();
    assert!(summaries
        .iter()
        .all(|s| s["text"].as_str().unwrap().starts_with("LLM summary of {\"task\":\"consolidate")));
    // Sibling b inherits the same events: identical requests, answered by another process from
    // the cache, without calling the script again.
    sb.ok(&["consolidate", "b"]);
    assert_eq!(calls(sb), 2);
    let b: Vec<Value> = array(&sb.json(&["recall", "list", "b"]), "summaries").clone();
    let texts = |list: &[Value]| list.iter().map(|s| s["text"].clone()).collect::<Vec<_>>();
    assert_eq!(texts(&b), texts(&summaries));
}

#[test]
fn a_failing_summarizer_falls_back_with_a_warning() {
    for db in backends("a_failing_summarizer_falls_back_with_a_warning") {
        a_failing_summarizer_falls_back_with_a_warning_on(&with_summarizer(
            &db,
            "#!/bin/sh\necho 'model overloaded' >&2\nexit 3\n",
            10,
        ));
    }
}

fn a_failing_summarizer_falls_back_with_a_warning_on(sb: &Sandbox) {
    let out = sb.run(&["consolidate", "a"]).success();
    assert!(out.stderr.starts_with("warning: summarizer `sh ./summarize.sh` failed"), "{}", out.stderr);
    assert!(out.stderr.contains("model overloaded"));
    let summaries = sb.json(&["recall", "list", "a"]);
    let text = array(&summaries, "summaries")[0]["text"].as_str().unwrap().to_string();
    assert!(
        text.starts_with("4 metric events, 2026-01-02 03:04:05 to 2026-01-02 03:04:05:\n- root metric 0"),
        "{text}"
    );
    // --quiet silences the warning; the command still succeeds.
    let quiet = with_summarizer(&Db::Sqlite, "#!/bin/sh\nexit 1\n", 10);
    assert_eq!(quiet.run(&["--quiet", "consolidate", "a"]).success().stderr, "");
}

#[test]
fn a_hanging_summarizer_times_out_and_falls_back() {
    for db in backends("a_hanging_summarizer_times_out_and_falls_back") {
        a_hanging_summarizer_times_out_and_falls_back_on(&with_summarizer(&db, "#!/bin/sh\nsleep 30\n", 1));
    }
}

fn a_hanging_summarizer_times_out_and_falls_back_on(sb: &Sandbox) {
    let started = std::time::Instant::now();
    let out = sb.run(&["consolidate", "a"]).success();
    assert!(started.elapsed().as_secs() < 20, "the timeout ends the call");
    assert!(out.stderr.contains("timed out after 1 s"), "{}", out.stderr);
    assert_eq!(array(&sb.json(&["recall", "list", "a"]), "summaries").len(), 2);
}
