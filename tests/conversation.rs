//! Conversation memory through the real binary: every step type in, messages out in both
//! formats (snapshots, clock pinned), the reductions, and bad input.

use crate::support::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// root: system, task, planning, an action; child (forked then): a user turn, a failing
/// action given as JSON on stdin, an assistant reply, a final answer.
fn conversation(db: &Db) -> Sandbox {
    let sb = Sandbox::initialized_on(db);
    sb.ok(&["branch", "create", "root"]);
    let steps: &[&[&str]] = &[
        &["step", "add", "root", "--type", "system", "--text", "You are a performance engineer."],
        &["step", "add", "root", "--type", "task", "--text", "Make the 3D stencil faster."],
        &["step", "add", "root", "--type", "planning", "--plan", "1. measure  2. tile  3. vectorize"],
        &[
            "step",
            "add",
            "root",
            "--type",
            "action",
            "--thought",
            "measure first",
            "--tool",
            "run",
            "--args",
            r#"{"cmd": "make bench"}"#,
            "--observation",
            "runtime 12.4 s",
            "--duration",
            "13.1",
        ],
    ];
    for step in steps {
        sb.ok(step);
    }
    sb.ok(&["fork", "root", "child"]);
    sb.ok(&["step", "add", "child", "--type", "user", "--text", "Try tiles of 64."]);
    sb.run_stdin(
        &["step", "add", "child", "--type", "action", "-"],
        r#"{"tool": "run", "args": {"cmd": "make TILE=64"}, "error": "exit 2: tile too large"}"#,
    )
    .success();
    sb.ok(&["step", "add", "child", "--type", "assistant", "--text", "64 does not build; trying 32."]);
    sb.ok(&["step", "add", "child", "--type", "final", "--answer", "Tiles of 32: 9.8 s."]);
    sb
}

/// Rounds of a user turn and an action with a long observation, for the reductions.
fn add_rounds(sb: &Sandbox, branch: &str, rounds: std::ops::Range<usize>) {
    for n in rounds {
        sb.ok(&["step", "add", branch, "--type", "user", "--text", &format!("Round {n}.")]);
        let observation = format!("round {n}: {}", "timing line; ".repeat(40));
        sb.ok(&["step", "add", branch, "--type", "action", "--tool", "run", "--observation", &observation]);
    }
}

#[test]
fn steps_round_trip_as_messages() {
    for db in backends("steps_round_trip_as_messages") {
        steps_round_trip_as_messages_on(&conversation(&db));
    }
}

fn steps_round_trip_as_messages_on(sb: &Sandbox) {
    snap!("messages_openai", &sb.run(&["messages", "child"]).success());
    snap!("messages_anthropic", &sb.run(&["messages", "child", "--format", "anthropic"]).success());
    snap!("messages_summary_mode", &sb.run(&["messages", "child", "--summary-mode"]).success());
    snap!(
        "messages_budget_json",
        &sb.run(&["--json", "messages", "child", "--budget-tokens", "60", "--encoding", "cl100k_base"])
            .success(),
    );
    snap!(
        "step_add_text",
        &sb.run(&["step", "add", "child", "--type", "user", "--text", "Thanks."]).success(),
    );
    // The parent's conversation is as it was; the child's continues it.
    // (With --json, messages come with what fitting left out: {format, messages, dropped}.)
    let root = sb.json(&["messages", "root"]);
    assert_eq!(array(&root, "messages").len(), 5);
    // A runner may batch steps in an apply block.
    let block = r#"<memory_update>{"step": [{"type": "user", "text": "And 16?"}, {"type": "action", "tool": "run", "args": {"tile": 16}, "observation": "10.9 s"}]}</memory_update>"#;
    snap!("apply_steps_json", &sb.run_stdin(&["--json", "apply", "child", "-"], block).success());
    let messages = sb.json(&["messages", "child"]);
    let last = array(&messages, "messages").last().unwrap().clone();
    assert_eq!((string(&last, "role"), string(&last, "content")), ("tool", "10.9 s"));
    // Steps are recall events too.
    let recall = sb.json(&["recall", "list", "child", "-n", "3"]);
    assert_eq!(string(&array(&recall, "events")[0], "kind"), "step:action");
    // Without --encoding, the configured one (o200k_base counts this text in fewer tokens).
    sb.ok(&["fork", "root", "encodings"]);
    sb.ok(&["step", "add", "encodings", "--type", "user", "--text", "模板的性能比基线快了百分之二十一。"]);
    let count = |env: &[(&str, &str)]| {
        int(&sb.json_env(&["messages", "encodings", "--budget-tokens", "1000"], env), "tokens")
    };
    let (default, o200k) = (count(&[]), count(&[("MEMCTL_CONVERSATION__ENCODING", "o200k_base")]));
    let explicit = sb.json(&["messages", "encodings", "--budget-tokens", "1000", "--encoding", "o200k_base"]);
    assert!(o200k < default && o200k == int(&explicit, "tokens"), "{default} {o200k} {explicit}");
}

/// `context`'s recall window leaves the conversation to `messages`: with more steps than the
/// window holds, the notes still show, and the steps show nowhere in it.
#[test]
fn context_leaves_the_steps_to_messages() {
    for db in backends("context_leaves_the_steps_to_messages") {
        let sb = conversation(&db);
        sb.ok(&["recall", "append", "child", "--kind", "note", "tiles of 128 thrash the L2"]);
        add_rounds(&sb, "child", 0..12); // 24 steps, more than the 20 events of the window
        sb.ok(&["recall", "append", "child", "--kind", "metric", "runtime 9.8 s"]);
        let context = sb.json(&["context", "child", "--no-limit"]);
        let text = string(&context, "text");
        assert!(text.contains("- [metric] runtime 9.8 s\n- [note] tiles of 128 thrash the L2"), "{text}");
        assert!(!text.contains("step:"), "{text}");
        // A branch that holds only steps shows no recall section at all.
        let text = sb.json(&["context", "root", "--no-limit"]);
        assert!(!string(&text, "text").contains("step:"), "{text}");
    }
}

#[test]
fn reductions() {
    for db in backends("reductions") {
        reductions_on(&conversation(&db));
    }
}

fn reductions_on(sb: &Sandbox) {
    for n in 0..3 {
        sb.ok(&[
            "step",
            "add",
            "child",
            "--type",
            "user",
            "--text",
            &format!("Round {n}: again, with more threads."),
        ]);
        sb.ok(&[
            "step",
            "add",
            "child",
            "--type",
            "action",
            "--tool",
            "run",
            "--args",
            r#"{"threads": 32}"#,
            "--observation",
            &format!("round {n}: {}", "timing line; ".repeat(40)),
        ]);
    }
    snap!(
        "messages_read_time_prune",
        &sb.run(&["messages", "child", "--keep-last", "2", "--summary-mode"]).success(),
    );
    snap!("compact_text", &sb.run(&["compact", "child", "--budget-tokens", "150"]).success());
    snap!(
        "compact_within_json",
        &sb.run(&["--json", "compact", "child", "--budget-tokens", "100000"]).success(),
    );
    snap!("messages_after_compact", &sb.run(&["messages", "child"]).success());
    snap!(
        "prune_json",
        &sb.run(&["--json", "prune", "child", "--old-observations", "0", "--max-chars", "20"]).success(),
    );
    snap!("messages_after_prune", &sb.run(&["messages", "child", "--format", "anthropic"]).success());
    // Pruning again to as many characters finds nothing left to cut, and writes nothing.
    let journal = array(&sb.json(&["log"]), "ops").len();
    let again = sb.json(&["prune", "child", "--old-observations", "0", "--max-chars", "20"]);
    assert!(array(&again, "shortened").is_empty() && array(&again, "removed").is_empty(), "{again}");
    assert_eq!(array(&sb.json(&["log"]), "ops").len(), journal);
    // Keeping the last steps leaves the messages that reading them so gives, compaction
    // summaries included: those before leave the view with their steps.
    let expected = sb.json(&["messages", "child", "--keep-last", "2"]);
    let pruned = sb.json(&["prune", "child", "--keep-last", "2"]);
    assert!(!array(&pruned, "summaries").is_empty(), "{pruned}");
    assert_eq!(sb.json(&["messages", "child"]), expected);
    let archived = int(&pruned, "archived").to_string();
    let record = sb.json(&["archival", "get", "child", &archived]);
    assert!(string(field(&record, "record"), "text").contains("Pruned conversation steps"), "{record}");
    assert!(string(field(&record, "record"), "text").contains("[summary:conversation]"), "{record}");
    let conversation_summaries = |branch: &str| -> Vec<String> {
        let recall = sb.json(&["recall", "list", branch]);
        let summaries = array(&recall, "summaries").iter();
        summaries
            .filter(|s| string(s, "kind") == "conversation")
            .map(|s| string(s, "text").to_string())
            .collect()
    };
    assert!(conversation_summaries("child").iter().any(|s| s.starts_with("pruned: ")));
    sb.ok(&["core", "set", "child", "best_tile", "32"]);
    let pruned_line = conversation_summaries("child").concat();
    snap!("reset_text", &sb.run(&["reset", "child"]).success());
    assert!(array(&sb.json(&["messages", "child"]), "messages").is_empty());
    // The summaries of the conversation left with it: one line says so, in every reader, and
    // the prune's line (naming the record of its full texts) stays after it.
    let left = conversation_summaries("child");
    assert_eq!(left, [format!("conversation reset\n{pruned_line}")]);
    let context = string(&sb.json(&["context", "child"]), "text").to_string();
    let recall = context.split("Recall Memory:").nth(1).and_then(|r| r.split("Archival Memory:").next());
    assert!(recall.unwrap().starts_with("\n- [summary:conversation] conversation reset"), "{context}");
    // Nothing is left to reset, and such a reset writes nothing.
    let journal = array(&sb.json(&["log"]), "ops").len();
    let nothing = sb.json(&["reset", "child"]);
    assert_eq!((int(&nothing, "steps"), array(&nothing, "summaries").len()), (0, 0), "{nothing}");
    assert_eq!(array(&sb.json(&["log"]), "ops").len(), journal);
    assert_eq!(conversation_summaries("child"), left);
    assert_eq!(string(field(&sb.json(&["core", "get", "child"]), "core"), "best_tile"), "32", "core stays");
    snap!("reset_all_json", &sb.run(&["--json", "reset", "child", "--all"]).success());
    assert!(object(&sb.json(&["core", "get", "child"]), "core").is_empty());
    // The parent keeps everything.
    assert_eq!(array(&sb.json(&["messages", "root"]), "messages").len(), 5);
}

#[test]
fn retrieval_before_a_turn() {
    for db in backends("retrieval_before_a_turn") {
        retrieval_before_a_turn_on(&conversation(&db));
    }
}

fn retrieval_before_a_turn_on(sb: &Sandbox) {
    sb.ok(&[
        "archival",
        "add",
        "child",
        "tiles of 64 overflow the L2 cache on this machine",
        "--tag",
        "lesson",
    ]);
    sb.ok(&["step", "add", "child", "--type", "user", "--text", "Why did tiles of 64 fail?"]);
    snap!(
        "messages_retrieve",
        &sb.run(&[
            "messages",
            "child",
            "--retrieve",
            "1",
            "--budget-tokens",
            "400",
            "--encoding",
            "cl100k_base",
        ])
        .success(),
    );
}

#[test]
fn bad_steps() {
    for db in backends("bad_steps") {
        bad_steps_on(&conversation(&db));
    }
}

fn bad_steps_on(sb: &Sandbox) {
    snap!(
        "step_unknown_type_text",
        &sb.run(&["step", "add", "root", "--type", "observation", "--text", "x"]).exit(1),
    );
    snap!(
        "step_missing_field_json",
        &sb.run(&["--json", "step", "add", "root", "--type", "action", "--thought", "x"]).exit(1),
    );
    snap!(
        "step_wrong_field_text",
        &sb.run(&["step", "add", "root", "--type", "user", "--plan", "x"]).exit(1)
    );
    snap!(
        "step_malformed_payload_text",
        &sb.run_stdin(
            &["step", "add", "root", "--type", "action", "-"],
            r#"{"tool": "run", "duration": "long"}"#,
        )
        .exit(1),
    );
    // JSON has no NaN or infinity: such a duration is refused, not stored as nothing.
    for duration in ["--duration=nan", "--duration=inf", "--duration=1e309"] {
        let refused =
            sb.run(&["step", "add", "root", "--type", "action", "--tool", "t", duration]).text_error(1);
        assert!(
            refused.stderr.contains("--duration must be a number of seconds"),
            "{}",
            refused.transcript()
        );
    }
    // Fields come as flags or as JSON on stdin, not both.
    let both =
        sb.run_stdin(&["step", "add", "root", "--type", "user", "--text", "flag", "-"], r#"{"text": "in"}"#);
    assert!(both.exit(2).stderr.contains("cannot be used with"));
    // `at` is prune's, for the copies it writes: a step given one would sit anywhere.
    let at = sb.run_stdin(&["step", "add", "root", "--type", "user", "-"], r#"{"text": "x", "at": 1}"#);
    assert!(at.text_error(1).stderr.contains("has no field 'at'"));
    let wrong = sb.run_stdin(&["step", "add", "root", "--type", "user", "-"], r#"{"text": 5}"#).text_error(1);
    assert!(wrong.stderr.contains("'text' of a user step must be text, not 5"), "{}", wrong.transcript());
    snap!(
        "step_not_json_text",
        &sb.run_stdin(&["step", "add", "root", "--type", "user", "-"], "not json").exit(1),
    );
    snap!(
        "messages_budget_too_small_text",
        &sb.run(&["messages", "root", "--budget-tokens", "5", "--encoding", "cl100k_base"]).exit(1),
    );
    snap!("compact_unknown_branch_text", &sb.run(&["compact", "nope", "--budget-tokens", "10"]).exit(3));
}

/// docs/guide.md's agent loop runs as written and prints what the guide says it prints.
#[test]
fn the_guides_agent_loop_runs() {
    let sb = Sandbox::new();
    let Some((_, output)) = run_python_block(&sb, "docs/guide.md") else { return };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the guide's loop failed:\n{stdout}\n{stderr}");
    let guide =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide.md"))
            .unwrap();
    let start = guide.find("```text\n").expect("the printed output in the guide") + "```text\n".len();
    let printed = &guide[start..start + guide[start..].find("```").unwrap()];
    assert_eq!(stdout, printed, "stderr:\n{stderr}");
}

/// With a summarizer configured, compaction's summaries are its answers to the `conversation`
/// prompt; with `[conversation] auto_compact_tokens`, every `step add` compacts.
#[test]
fn summarizer_and_auto_compaction() {
    for db in backends("summarizer_and_auto_compaction") {
        summarizer_and_auto_compaction_on(&conversation(&db));
    }
}

fn summarizer_and_auto_compaction_on(sb: &Sandbox) {
    add_rounds(sb, "child", 0..3);
    // The script answers with the task it was given and the size of the run.
    std::fs::write(
        sb.file("summarize.sh"),
        "python3 -c 'import json,sys; r=json.load(sys.stdin); print(r[\"task\"], len(r[\"text\"].splitlines()), \"steps\")'",
    )
    .unwrap();
    let env = [("MEMCTL_SUMMARIZER__COMMAND", "sh ./summarize.sh")];
    sb.exec(&["compact", "child", "--budget-tokens", "150"], None, &env).success();
    let messages = sb.json(&["messages", "child"]);
    let summaries: Vec<&str> = array(&messages, "messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.contains("summarized]"))
        .collect();
    assert!(
        !summaries.is_empty()
            && summaries.iter().all(|s| s
                .split('\n')
                .nth(1)
                .is_some_and(|l| l.starts_with("conversation ") && l.ends_with(" steps"))),
        "{summaries:?}"
    );

    // Auto-compaction: a budget in the configuration compacts as steps come in.
    let auto = [("MEMCTL_CONVERSATION__AUTO_COMPACT_TOKENS", "200")];
    let before = array(&sb.json(&["messages", "child"]), "messages").len();
    for n in 3..6 {
        sb.exec(&["step", "add", "child", "--type", "user", "--text", &format!("Round {n}.")], None, &auto)
            .success();
        let observation = format!("round {n}: {}", "timing line; ".repeat(40));
        sb.exec(
            &["step", "add", "child", "--type", "action", "--tool", "run", "--observation", &observation],
            None,
            &auto,
        )
        .success();
    }
    let after = sb.json(&["messages", "child"]);
    let after = array(&after, "messages");
    let compacted =
        after.iter().filter(|m| m["content"].as_str().is_some_and(|c| c.contains("summarized]"))).count();
    assert!(
        compacted > summaries.len(),
        "auto-compaction summarized the new rounds too ({before} → {} messages)",
        after.len()
    );
    let log = sb.json(&["log", "child"]);
    assert!(array(&log, "ops").iter().any(|op| string(op, "op") == "conversation.compact"));
}

#[test]
fn steps_are_written_only_as_steps() {
    for db in backends("steps_are_written_only_as_steps") {
        steps_are_written_only_as_steps_on(&conversation(&db));
    }
}

fn steps_are_written_only_as_steps_on(sb: &Sandbox) {
    // A promoted step is added whole: the target's messages show what the source's did.
    let events = sb.json(&["recall", "list", "child"]);
    let step_ids: Vec<String> = array(&events, "events")
        .iter()
        .filter(|e| {
            string(e, "branch") == "child" && ["step:user", "step:action"].contains(&string(e, "kind"))
        })
        .map(|e| int(e, "id").to_string())
        .collect();
    assert_eq!(step_ids.len(), 2, "{events}");
    sb.ok(&["fork", "root", "other"]);
    sb.ok(&["promote", "child", "other", "--event", &step_ids[0], "--event", &step_ids[1]]);
    let contents = |branch: &str| -> Vec<String> {
        let messages = sb.json(&["messages", branch, "--format", "anthropic"]);
        array(&messages, "messages").iter().map(|m| m["content"].to_string().replace("toolu_", "")).collect()
    };
    let (source, target) = (contents("child"), contents("other"));
    // Promoted again, they are skipped: the target already holds them.
    let again = sb.json(&["promote", "child", "other", "--event", &step_ids[0], "--event", &step_ids[1]]);
    assert!(array(&again, "promoted").iter().all(|p| boolean(p, "skipped")), "{again}");
    assert_eq!(contents("other"), target);
    for wanted in ["Try tiles of 64.", "make TILE=64", "exit 2: tile too large"] {
        assert_eq!(
            source.iter().filter(|c| c.contains(wanted)).count(),
            target.iter().filter(|c| c.contains(wanted)).count(),
            "{wanted}: {source:?} against {target:?}"
        );
        assert!(target.iter().any(|c| c.contains(wanted)), "{wanted}: {target:?}");
    }
    // Steps enter only through `step add`: not as plain events, by the CLI or by `apply`, and
    // `apply` cannot summarize them away (`compact` does).
    let refused = sb.run(&["recall", "append", "other", "--kind", " step:user", "hi"]).text_error(1);
    assert!(refused.stderr.contains("taken by conversation steps"), "{}", refused.transcript());
    // Nor as the conversation's summaries: their kind is its own.
    let refused = sb.run(&["recall", "append", "other", "--kind", "conversation", "hi"]).text_error(1);
    assert!(refused.stderr.contains("taken by the conversation's summaries"), "{}", refused.transcript());
    let note = int(&sb.json(&["recall", "append", "other", "--kind", "note", "a note"]), "id");
    let block =
        format!(r#"{{"recall_summarize": {{"kind": "conversation", "summary": "s", "ids": [{note}]}}}}"#);
    sb.run_stdin(&["apply", "other", "-"], &block).text_error(1);
    let block = r#"{"recall": {"kind": "step:bogus", "text": "z"}}"#;
    sb.run_stdin(&["apply", "other", "-"], block).text_error(1);
    let block = format!(r#"{{"recall_summarize": {{"summary": "s", "ids": [{}]}}}}"#, step_ids[0]);
    let refused = sb.run_stdin(&["apply", "child", "-"], &block).text_error(1);
    assert!(refused.stderr.contains("is a conversation step"), "{}", refused.transcript());
    assert_eq!(contents("child"), source, "nothing was written");
    sb.ok(&["messages", "other"]);
}

/// The summarizer is asked outside the write transaction: while a slow one works on a
/// compaction, other writers get the lock at once.
#[test]
fn a_slow_summarizer_holds_up_no_writer() {
    for db in backends("a_slow_summarizer_holds_up_no_writer") {
        a_slow_summarizer_holds_up_no_writer_on(&conversation(&db));
    }
}

fn a_slow_summarizer_holds_up_no_writer_on(sb: &Sandbox) {
    add_rounds(sb, "child", 0..3);
    // It says it started, then answers once `go` exists (or after about ten seconds).
    std::fs::write(
        sb.file("slow.sh"),
        "cat > /dev/null; touch started; i=0\n\
         while [ ! -e go ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done\n\
         echo slow summary",
    )
    .unwrap();
    let summarizer = [("MEMCTL_SUMMARIZER__COMMAND", "sh ./slow.sh")];
    let short_wait = [("MEMCTL_SQLITE__BUSY_TIMEOUT_MS", "300")];
    // The messages that are the summarizer's answers.
    let answered = || {
        let messages = sb.json(&["messages", "child"]);
        let contents = array(&messages, "messages").iter().filter_map(|m| m["content"].as_str());
        contents.filter(|c| c.ends_with("\nslow summary")).count()
    };
    let mut counts = vec![answered()];
    for (n, args) in [
        &["compact", "child", "--budget-tokens", "150"][..],
        // A new run of agent steps: auto-compaction replaces round 2's.
        &["step", "add", "child", "--type", "action", "--tool", "run", "--observation", "round 3"],
    ]
    .into_iter()
    .enumerate()
    {
        if n == 1 {
            sb.ok(&["step", "add", "child", "--type", "user", "--text", "Round 3."]);
        }
        let _ = std::fs::remove_file(sb.file("started"));
        let _ = std::fs::remove_file(sb.file("go"));
        let mut command = sb.command(args);
        command.envs(summarizer).env("MEMCTL_CONVERSATION__AUTO_COMPACT_TOKENS", "150");
        let running = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let waited = Instant::now();
        while !sb.file("started").exists() {
            assert!(waited.elapsed() < Duration::from_secs(30), "the summarizer never started ({n})");
            std::thread::sleep(Duration::from_millis(10));
        }
        sb.run_env(&["core", "set", "root", "during", &format!("compaction {n}")], &short_wait).success();
        std::fs::write(sb.file("go"), "").unwrap();
        let done = running.wait_with_output().unwrap();
        assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
        counts.push(answered());
    }
    // The step's auto-compaction replaced round 2 by the answer asked ahead (the request of a
    // hypothetical last step), found in the cache by the transaction: not by an extract.
    assert!(counts[1] > counts[0] && counts[2] == counts[1] + 1, "answers after each call: {counts:?}");

    // An answer no shorter than the run it would replace gives way to the extract.
    sb.ok(&["fork", "child", "wordy"]);
    add_rounds(sb, "wordy", 4..6);
    std::fs::write(sb.file("wordy.sh"), "cat > /dev/null; python3 -c \"print('Z' * 20000)\"").unwrap();
    let wordy = [("MEMCTL_SUMMARIZER__COMMAND", "sh ./wordy.sh")];
    let compacted = sb.json_env(&["compact", "wordy", "--budget-tokens", "150"], &wordy);
    assert!(!array(&compacted, "summaries").is_empty(), "{compacted}");
    let messages = sb.json(&["messages", "wordy"]).to_string();
    assert!(messages.contains("- action: run") && !messages.contains("ZZZ"), "{messages}");
}

#[test]
fn reductions_keep_the_conversations_order_and_its_texts() {
    for db in backends("reductions_keep_the_conversations_order_and_its_texts") {
        reductions_keep_the_conversations_order_and_its_texts_on(&Sandbox::initialized_on(&db));
    }
}

/// The messages' roles and the start of their contents, in order.
fn roles(sb: &Sandbox, branch: &str) -> Vec<String> {
    let messages = sb.json(&["messages", branch]);
    array(&messages, "messages")
        .iter()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or("");
            format!("{} {}", string(m, "role"), content.split([' ', '\n']).next().unwrap_or(""))
        })
        .collect()
}

fn reductions_keep_the_conversations_order_and_its_texts_on(sb: &Sandbox) {
    let long = "word ".repeat(100);
    // A summary of a run holding a shortened copy (prune) takes the run's place, not the
    // copy's, which was written after the turns that follow.
    sb.ok(&["branch", "create", "a"]);
    sb.ok(&["step", "add", "a", "--type", "task", "--text", "task"]);
    sb.ok(&["step", "add", "a", "--type", "user", "--text", "u1"]);
    let observation = format!("AAA {long}");
    sb.ok(&["step", "add", "a", "--type", "action", "--tool", "run", "--observation", &observation]);
    sb.ok(&["step", "add", "a", "--type", "user", "--text", "u2"]);
    sb.ok(&["step", "add", "a", "--type", "assistant", "--text", &format!("B {long}")]);
    sb.ok(&["step", "add", "a", "--type", "user", "--text", "u3"]);
    sb.ok(&["step", "add", "a", "--type", "assistant", "--text", "C"]);
    sb.ok(&["prune", "a", "--old-observations", "2", "--max-chars", "300"]);
    let compacted = sb.json(&["compact", "a", "--budget-tokens", "10"]);
    assert_eq!(int(&compacted, "steps"), 2, "{compacted}");
    assert_eq!(
        roles(sb, "a"),
        ["user task", "user u1", "assistant [1", "user u2", "assistant [1", "user u3", "assistant C"]
    );
    // The full texts went to archival: the tail of the observation is found there.
    let archived = int(&compacted, "archived");
    let found = sb.json(&["archival", "search", "a", "AAA", "-t", "COMPACTED_STEPS"]);
    let ids: Vec<i64> = array(&found, "results").iter().map(|r| int(r, "id")).collect();
    assert_eq!(ids, [archived], "{found}");

    // A task or system step ends a run as a user turn does: the work for task 2 is not
    // summarized with the work for task 1, nor moved before task 2.
    sb.ok(&["branch", "create", "b"]);
    sb.ok(&["step", "add", "b", "--type", "system", "--text", "sys"]);
    sb.ok(&["step", "add", "b", "--type", "task", "--text", "task1"]);
    sb.ok(&["step", "add", "b", "--type", "assistant", "--text", &format!("A {long}")]);
    sb.ok(&["step", "add", "b", "--type", "task", "--text", "task2"]);
    sb.ok(&["step", "add", "b", "--type", "assistant", "--text", &format!("B {long}")]);
    sb.ok(&["step", "add", "b", "--type", "user", "--text", "u1"]);
    sb.ok(&["step", "add", "b", "--type", "assistant", "--text", "C"]);
    sb.ok(&["compact", "b", "--budget-tokens", "10"]);
    assert_eq!(
        roles(sb, "b"),
        ["system sys", "user task1", "assistant [1", "user task2", "assistant [1", "user u1", "assistant C"]
    );

    // An action's observation and its error both reach the model, the timeline and search.
    sb.ok(&["branch", "create", "c"]);
    let failed = ["--tool", "make", "--observation", "kernel.c:42: undefined reference", "--error", "exit 2"];
    sb.ok(&[&["step", "add", "c", "--type", "action"][..], &failed].concat());
    let messages = sb.json(&["messages", "c"]);
    let tool = &array(&messages, "messages")[1];
    assert_eq!(string(tool, "content"), "kernel.c:42: undefined reference\nError: exit 2", "{messages}");
    let anthropic = sb.json(&["messages", "c", "--format", "anthropic"]);
    let result = &array(&anthropic, "messages")[1]["content"][0];
    assert_eq!(
        (string(result, "content"), boolean(result, "is_error")),
        ("kernel.c:42: undefined reference\nError: exit 2", true)
    );
    assert_eq!(array(&sb.json(&["recall", "search", "c", "undefined"]), "events").len(), 1);

    // Recall eviction leaves the conversation's steps to the conversation: --oldest counts the
    // events besides them, and a step's kind or id is refused.
    sb.ok(&["branch", "create", "d"]);
    sb.ok(&["step", "add", "d", "--type", "system", "--text", "You are careful."]);
    sb.ok(&["step", "add", "d", "--type", "task", "--text", "Tune the kernel."]);
    let note = int(&sb.json(&["recall", "append", "d", "--kind", "note", "note 1"]), "id");
    sb.ok(&["recall", "append", "d", "--kind", "note", "note 2"]);
    let applied =
        sb.run_stdin(&["--json", "apply", "d", "-"], r#"{"recall_evict": {"oldest": 1}}"#).success().json();
    assert_eq!(ints(&applied["results"]["recall_evict"], "evicted"), [note], "{applied}");
    let evicted = sb.json(&["recall", "evict", "d", "--oldest", "5"]);
    assert_eq!(ints(&evicted, "evicted").len(), 1, "only note 2 is left besides the steps: {evicted}");
    assert_eq!(roles(sb, "d"), ["system You", "user Tune"]);
    let kind = sb.run(&["recall", "evict", "d", "--kind", "step:system"]).text_error(1);
    assert!(kind.stderr.contains("conversation's steps"), "{}", kind.stderr);
    let steps = sb.json(&["recall", "list", "d"]);
    let system =
        array(&steps, "events").iter().find(|e| string(e, "kind") == "step:system").map(|e| int(e, "id"));
    let by_id = sb.run(&["recall", "evict", "d", "--id", &system.unwrap().to_string()]).text_error(1);
    assert!(by_id.stderr.contains("is a conversation step"), "{}", by_id.stderr);
    assert_eq!(roles(sb, "d"), ["system You", "user Tune"]);

    // A promoted step is skipped only when the target sees it, or a copy of it, already: a
    // turn repeated ("retry") is another turn.
    sb.ok(&["branch", "create", "e"]);
    sb.ok(&["step", "add", "e", "--type", "user", "--text", "retry"]);
    sb.ok(&["fork", "e", "f"]);
    let retry = int(&sb.json(&["step", "add", "f", "--type", "user", "--text", "retry"]), "id").to_string();
    let first = sb.json(&["promote", "f", "e", "--event", &retry]);
    assert!(!boolean(&array(&first, "promoted")[0], "skipped"), "{first}");
    let again = sb.json(&["promote", "f", "e", "--event", &retry]);
    assert!(boolean(&array(&again, "promoted")[0], "skipped"), "{again}");
    assert_eq!(roles(sb, "e"), ["user retry", "user retry"]);
    // Through any number of promotions: a step promoted up two levels is there when the leaf
    // promotes it again.
    sb.ok(&["fork", "e", "g"]);
    sb.ok(&["fork", "g", "h"]);
    let found = int(&sb.json(&["step", "add", "h", "--type", "assistant", "--text", "found it"]), "id");
    let up = sb.json(&["promote", "h", "g", "--event", &found.to_string()]);
    let copy = int(&array(&up, "promoted")[0], "seq").to_string();
    sb.json(&["promote", "g", "e", "--event", &copy]);
    let again = sb.json(&["promote", "h", "e", "--event", &found.to_string()]);
    assert!(boolean(&array(&again, "promoted")[0], "skipped"), "{again}");
    assert_eq!(roles(sb, "e"), ["user retry", "user retry", "assistant found"]);

    // Pressure counts the steps apart from the events consolidation reduces, as it does.
    for i in 0..30 {
        sb.ok(&["step", "add", "d", "--type", "assistant", "--text", &format!("a{i}")]);
    }
    let pressure = sb.json(&["pressure", "d"]);
    assert_eq!((int(&pressure["recall"], "count"), int(&pressure["recall"], "steps")), (0, 32), "{pressure}");
    assert!(array(&pressure, "recommendations").is_empty(), "{pressure}");
}
