//! End-to-end tests of the `memctl` binary (SPEC §4.1-§4.4, §8, §9, §9.1, §10).
//!
//! Every test runs the real binary in a fresh temporary directory (see `support`): relative
//! database paths, `MEMCTL_NOW` pinned, every other `MEMCTL_*` variable removed and a test-local
//! `memctl.toml`. Each command's exit code, stdout and stderr are snapshotted together in
//! `tests/snapshots/` (update with `INSTA_UPDATE=always cargo test -p memctl-cli --test e2e cli::`);
//! JSON output is also parsed and its binding fields (§9.1) checked.

use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Runs `memctl ARGS`, checks it succeeds and snapshots it.
#[track_caller]
fn snap_ok(sandbox: &Sandbox, name: &str, args: &[&str]) -> Outcome {
    let outcome = sandbox.run(args).success();
    snap!(name, &outcome);
    outcome
}

/// Runs `memctl --json ARGS`, checks it succeeds with one JSON object, snapshots it and returns
/// the object.
#[track_caller]
fn snap_json(sandbox: &Sandbox, name: &str, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let outcome = sandbox.run(&full).success();
    let value = outcome.json();
    assert_eq!(outcome.stderr, "", "--json success prints nothing on stderr");
    snap!(name, &outcome);
    value
}

/// `a` then `b`, as one argument list.
fn cat<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<&'a str> {
    [a, b].concat()
}

fn id_of(value: &Value) -> String {
    int(value, "id").to_string()
}

// ---- init ---------------------------------------------------------------------------------------

#[test]
fn init_creates_the_database_and_reports_it() {
    let sb = Sandbox::new();
    snap_ok(&sb, "init_text", &["init"]);
    assert!(sb.file("memory.sqlite").is_file(), "init writes ./memory.sqlite by default");

    // Again on the existing database: opened (upgraded if older), reported the same way.
    let value = snap_json(&sb, "init_json", &["init"]);
    assert_eq!(string(&value, "db"), "memory.sqlite");
    assert!(int(&value, "schema_version") >= 1);
    boolean(&value, "fts5");

    // --db and MEMCTL_DB choose another file.
    let value = sb.json(&["--db", "other.sqlite", "init"]);
    assert_eq!(string(&value, "db"), "other.sqlite");
    assert!(sb.file("other.sqlite").is_file());
    let value = sb.json_env(&["init"], &[("MEMCTL_DB", "from-env.sqlite")]);
    assert_eq!(string(&value, "db"), "from-env.sqlite");
    assert!(sb.file("from-env.sqlite").is_file());

    // A variable set but empty counts as unset, as MEMCTL_NOW does: the default file, the
    // built-in configuration, no actor (clap took each for its option given empty).
    let empty = [("MEMCTL_DB", ""), ("MEMCTL_CONFIG", ""), ("MEMCTL_ACTOR", "")];
    let value = sb.json_env(&["init"], &empty);
    assert_eq!(string(&value, "db"), "memory.sqlite");
    sb.run_env(&["branch", "create", "root"], &empty).success();
    let log = sb.json(&["log", "root"]);
    assert_eq!(array(&log, "ops")[0]["actor"], Value::Null);
    // Given on the command line, an empty path is still refused.
    sb.run_env(&["--db", "", "branch", "list"], &empty).text_error(2);
    // A blank --actor or --phase is none; a multi-line one is refused, and nothing written.
    sb.ok(&["--actor", " ", "--phase", "", "branch", "create", "r2"]);
    let log = sb.json(&["log", "r2"]);
    let op = &array(&log, "ops")[0];
    assert_eq!((&op["actor"], &op["phase"]), (&Value::Null, &Value::Null));
    sb.run(&["--actor", "a\nb", "branch", "create", "r3"]).text_error(1);
    assert_eq!(array(&sb.json(&["branch", "list"]), "branches").len(), 2);

    // A URL of another kind is refused, not taken for a file named after it.
    for url in ["postgress://ann:pw@db-host/run", "sqlite:///tmp/run.db"] {
        let refused = sb.run(&["--db", url, "init"]).text_error(1);
        assert!(refused.stderr.contains("is not a database URL"), "{}", refused.transcript());
        assert!(!refused.stderr.contains("pw@"), "{}", refused.transcript());
        let scheme = url.split_once("://").unwrap().0;
        assert!(!sb.file(&format!("{scheme}:")).exists(), "{url} made a file or directory");
    }
}

// ---- branches and forks (§4.1) ------------------------------------------------------------------

#[test]
fn branch_create_fork_list_show_set_uid() {
    for db in backends("branch_create_fork_list_show_set_uid") {
        branch_create_fork_list_show_set_uid_on(&Sandbox::initialized_on(&db));
    }
}

fn branch_create_fork_list_show_set_uid_on(sb: &Sandbox) {
    snap_ok(sb, "branch_create_text", &["branch", "create", "root", "--meta", r#"{"task": "stencil"}"#]);
    let created = snap_json(sb, "branch_create_json", &["branch", "create", "second-root"]);
    check_fork(&created);
    assert_eq!(created["parent"], Value::Null);
    assert_eq!(int(&created, "depth"), 0);
    assert!(boolean(&created, "created"));
    let again = snap_json(sb, "branch_create_repeat_json", &["branch", "create", "second-root"]);
    assert!(!boolean(&again, "created"), "creating an existing root is idempotent");
    assert_eq!(int(&again, "fork_seq"), int(&created, "fork_seq"));

    // fork PARENT ID
    snap_ok(sb, "fork_text", &["fork", "root", "omp"]);
    let gpu = snap_json(sb, "fork_json", &["fork", "root", "gpu"]);
    check_fork(&gpu);
    assert_eq!(string(&gpu, "branch"), "gpu");
    assert_eq!(opt_string(&gpu, "parent"), Some("root"));
    assert_eq!(int(&gpu, "depth"), 1);
    assert!(boolean(&gpu, "created"));

    // fork PARENT: a generated id (deterministic for a given database state)
    snap_ok(sb, "fork_generated_id_text", &["fork", "omp"]);
    let generated = snap_json(sb, "fork_generated_id_json", &["fork", "omp"]);
    check_fork(&generated);
    let id = string(&generated, "branch");
    assert!(id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()), "generated id {id}");
    assert_eq!(int(&generated, "depth"), 2);

    // fork - ID: a root
    snap_ok(sb, "fork_dash_root_text", &["fork", "-", "third-root"]);
    let root = snap_json(sb, "fork_dash_root_json", &["fork", "-", "fourth-root"]);
    check_fork(&root);
    assert_eq!(root["parent"], Value::Null);
    assert_eq!(int(&root, "depth"), 0);

    // Idempotent repeat: same parent returns the existing branch.
    snap_ok(sb, "fork_repeat_text", &["fork", "root", "gpu"]);
    let repeat = snap_json(sb, "fork_repeat_json", &["fork", "root", "gpu"]);
    assert!(!boolean(&repeat, "created"));
    assert_eq!(int(&repeat, "fork_seq"), int(&gpu, "fork_seq"), "a repeat keeps the fork point");
    assert_eq!(int(&repeat, "depth"), 1);

    // --meta
    snap_ok(
        sb,
        "fork_meta_text",
        &["fork", "omp", "omp-pin", "--meta", r#"{"score": 0.8, "plan": "pin threads"}"#],
    );
    let meta = snap_json(sb, "fork_meta_json", &["fork", "gpu", "gpu-smem", "--meta", r#"{"score": 0.5}"#]);
    check_fork(&meta);

    // branch list
    snap_ok(sb, "branch_list_text", &["branch", "list"]);
    let list = snap_json(sb, "branch_list_json", &["branch", "list"]);
    let branches = array(&list, "branches");
    branches.iter().for_each(check_branch);
    let ids: Vec<&str> = branches.iter().map(|b| string(b, "id")).collect();
    for expected in ["root", "second-root", "omp", "gpu", "third-root", "fourth-root", "omp-pin", "gpu-smem"]
    {
        assert!(ids.contains(&expected), "{expected} missing from {ids:?}");
    }
    assert_eq!(branches.len(), 10, "8 named branches and 2 generated ones");

    // branch show
    snap_ok(sb, "branch_show_text", &["branch", "show", "omp-pin"]);
    let show = snap_json(sb, "branch_show_json", &["branch", "show", "omp-pin"]);
    let branch = field(&show, "branch");
    check_branch(branch);
    assert_eq!(string(branch, "id"), "omp-pin");
    assert_eq!(branch["meta"], json!({"score": 0.8, "plan": "pin threads"}));
    assert_eq!(strings(&show, "path"), ["root", "omp", "omp-pin"], "path runs root … B");
    let own = field(&show, "own");
    for layer in ["core", "events", "archival"] {
        assert_eq!(int(own, layer), 0);
    }

    // branch set-uid, then the alias works wherever a branch is taken.
    snap_ok(sb, "branch_set_uid_text", &["branch", "set-uid", "omp-pin", "node-7"]);
    let uid = snap_json(sb, "branch_set_uid_json", &["branch", "set-uid", "omp", "node-1"]);
    assert_eq!(string(&uid, "branch"), "omp");
    assert_eq!(string(&uid, "node_uid"), "node-1");
    snap_ok(sb, "branch_show_by_uid_text", &["branch", "show", "node-7"]);
    let forked = sb.json(&["fork", "node-1", "omp-numa"]);
    assert_eq!(opt_string(&forked, "parent"), Some("omp"), "a node_uid works as a parent");
    snap_ok(sb, "branch_list_with_uids_text", &["branch", "list"]);
    let list = sb.json(&["branch", "list"]);
    let pin = array(&list, "branches").iter().find(|b| string(b, "id") == "omp-pin").unwrap();
    assert_eq!(opt_string(pin, "node_uid"), Some("node-7"));
}

#[test]
fn branch_list_of_an_empty_database() {
    let sb = Sandbox::initialized();
    snap_ok(&sb, "branch_list_empty_text", &["branch", "list"]);
    let list = snap_json(&sb, "branch_list_empty_json", &["branch", "list"]);
    assert!(array(&list, "branches").is_empty());
}

/// A runner's float keeps every digit through memctl: read back from the branch and from the
/// journal (through a JSON value by `log`, as stored by `export jsonl`). serde_json's default,
/// best-effort float parser is off by one unit in the last place for the first.
#[test]
fn meta_floats_keep_every_digit() {
    let sb = Sandbox::initialized();
    let floats = ["6.471561653193026e-21", "1.7976931348623157e+308", "2.2250738585072014e-308", "0.1"];
    let meta =
        format!(r#"{{"a": {}, "b": {}, "c": {}, "d": {}}}"#, floats[0], floats[1], floats[2], floats[3]);
    sb.ok(&["branch", "create", "root", "--meta", &meta]);
    let outputs = [
        sb.run(&["--json", "branch", "show", "root"]).success().stdout,
        sb.run(&["--json", "log"]).success().stdout,
        sb.ok(&["export", "jsonl"]),
    ];
    for (output, float) in outputs.iter().flat_map(|o| floats.iter().map(move |f| (o, f))) {
        assert!(output.contains(float), "{float} in {output}");
    }
}

// ---- core (§4.2) --------------------------------------------------------------------------------

#[test]
fn core_set_get_del() {
    for db in backends("core_set_get_del") {
        core_set_get_del_on(&Sandbox::initialized_on(&db));
    }
}

fn core_set_get_del_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);

    snap_ok(
        sb,
        "core_set_text",
        &["core", "set", "root", "task", "Tune a 3D 7-point stencil", "--importance", "5"],
    );
    let set = snap_json(sb, "core_set_json", &["core", "set", "root", "baseline_s", "48.2", "-i", "4"]);
    assert_eq!(string(&set, "branch"), "root");
    assert_eq!(string(&set, "key"), "baseline_s");
    int(&set, "seq");
    assert!(strings(&set, "evicted").is_empty());
    let stdin =
        sb.run_stdin(&["core", "set", "root", "plan", "-"], "threads first,\nthen tiling\n").success();
    snap!("core_set_stdin_text", &stdin);
    snap_ok(sb, "core_set_ttl_text", &["core", "set", "root", "scratch", "try -O3 next", "--ttl", "30m"]);

    sb.ok(&["fork", "root", "child"]);
    sb.ok(&["core", "set", "root", "best_node", "child"]); // after the fork: child never sees it
    let child_set = sb.json(&["core", "set", "child", "baseline_s", "41.0"]);
    assert!(int(&child_set, "seq") > int(&set, "seq"));

    // get: every visible key, inherited ones included
    snap_ok(sb, "core_get_all_text", &["core", "get", "child"]);
    let all = snap_json(sb, "core_get_all_json", &["core", "get", "child"]);
    let core = object(&all, "core");
    assert_eq!(core["task"], "Tune a 3D 7-point stencil");
    assert_eq!(core["baseline_s"], "41.0", "the child's override wins");
    assert_eq!(core["plan"], "threads first,\nthen tiling", "stdin loses only its final newline");
    assert!(!core.contains_key("best_node"), "no late leak from the parent");
    assert!(core.values().all(Value::is_string));

    // get: some keys, one missing
    snap_ok(sb, "core_get_some_text", &["core", "get", "child", "task", "best_node", "baseline_s"]);
    let some = snap_json(sb, "core_get_some_json", &["core", "get", "child", "task", "best_node"]);
    assert_eq!(field(&some, "core"), &json!({"task": "Tune a 3D 7-point stencil", "best_node": null}));

    // get --explain
    snap_ok(sb, "core_get_explain_text", &["core", "get", "child", "--explain"]);
    let explain = snap_json(
        sb,
        "core_get_explain_json",
        &["core", "get", "child", "--explain", "baseline_s", "task", "nope"],
    );
    let core = field(&explain, "core");
    let baseline = field(core, "baseline_s");
    assert_eq!(string(baseline, "value"), "41.0");
    assert_eq!(string(baseline, "branch"), "child");
    assert_eq!(int(baseline, "seq"), int(&child_set, "seq"));
    assert_eq!(int(baseline, "importance"), 3, "importance defaults to 3");
    let task = field(core, "task");
    assert_eq!(string(task, "branch"), "root");
    assert_eq!(int(task, "importance"), 5);
    assert_eq!(core["nope"], Value::Null);

    // the root's own view
    snap_ok(sb, "core_get_root_text", &["core", "get", "root"]);

    // del: a tombstone in the child; the root keeps its keys
    snap_ok(sb, "core_del_text", &["core", "del", "child", "task", "nope"]);
    let deleted = snap_json(sb, "core_del_json", &["core", "del", "child", "baseline_s"]);
    assert_eq!(strings(&deleted, "deleted"), ["baseline_s"]);
    let child = sb.json(&["core", "get", "child", "task", "baseline_s", "plan"]);
    assert_eq!(
        field(&child, "core"),
        &json!({"task": null, "baseline_s": null, "plan": "threads first,\nthen tiling"})
    );
    let root = sb.json(&["core", "get", "root", "task", "baseline_s"]);
    assert_eq!(field(&root, "core"), &json!({"task": "Tune a 3D 7-point stencil", "baseline_s": "48.2"}));
    snap_ok(sb, "core_get_after_del_text", &["core", "get", "child"]);
    // `delete` is `del`, as `archival del` is `archival delete`.
    sb.ok(&["core", "set", "child", "scratch", "x"]);
    assert_eq!(strings(&sb.json(&["core", "delete", "child", "scratch"]), "deleted"), ["scratch"]);

    // TTL: invisible once written_at + ttl < now (MEMCTL_NOW one hour later)
    let later = [("MEMCTL_NOW", "2026-01-02T04:04:05Z")];
    let expired = sb.run_env(&["core", "get", "root", "scratch", "task"], &later).success();
    snap!("core_get_ttl_expired_text", &expired);
    let expired = sb.json_env(&["core", "get", "root", "scratch"], &later);
    assert_eq!(field(&expired, "core"), &json!({"scratch": null}));
    let fresh = sb.json(&["core", "get", "root", "scratch"]);
    assert_eq!(field(&fresh, "core"), &json!({"scratch": "try -O3 next"}));
}

/// Many versions of few keys: the core read then takes one row per branch and key, not every
/// version (the view's `core_by_key`), on both backends; TTLs and the fork's cutoff still hold.
#[test]
fn a_key_set_many_times_reads_its_newest_live_value() {
    for db in backends("a_key_set_many_times_reads_its_newest_live_value") {
        let sb = Sandbox::initialized_on(&db);
        sb.ok(&["branch", "create", "root"]);
        let set_many = |branch: &str, key: &str, from: usize| {
            for i in from..from + 40 {
                sb.ok(&["core", "set", branch, key, &format!("v{i}")]);
            }
        };
        set_many("root", "plan", 0);
        sb.ok(&["fork", "root", "child"]);
        set_many("root", "plan", 40); // after the fork: child never sees these
        set_many("child", "note", 0);
        sb.ok(&["core", "set", "child", "note", "fleeting", "--ttl", "30m"]);
        let core = |branch: &str, env: &[(&str, &str)]| {
            field(&sb.json_env(&["core", "get", branch], env), "core").clone()
        };
        assert_eq!(core("root", &[]), json!({"plan": "v79"}), "{}", db.name());
        assert_eq!(core("child", &[]), json!({"plan": "v39", "note": "fleeting"}), "{}", db.name());
        let later = [("MEMCTL_NOW", "2026-01-02T04:04:05Z")];
        assert_eq!(
            core("child", &later),
            json!({"plan": "v39", "note": "v39"}),
            "{}: the expired value gives way",
            db.name()
        );
    }
}

// ---- recall (§4.3) ------------------------------------------------------------------------------

#[test]
fn recall_append_list_search_evict() {
    for db in backends("recall_append_list_search_evict") {
        recall_append_list_search_evict_on(&Sandbox::initialized_on(&db));
    }
}

fn recall_append_list_search_evict_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);

    snap_ok(
        sb,
        "recall_append_text",
        &[
            "recall",
            "append",
            "root",
            "--kind",
            "plan",
            "Measure the serial baseline",
            "--tag",
            "phase:draft",
        ],
    );
    sb.ok(&["fork", "root", "child"]);
    sb.ok(&["recall", "append", "root", "--kind", "note", "late root note"]); // never reaches child

    let metric_args = [
        "recall",
        "append",
        "child",
        "--kind",
        "metric",
        "runtime 12.4 s with -O3",
        "--tag",
        "phase:tune",
        "-t",
        "gpu",
    ];
    let metric = snap_json(sb, "recall_append_json", &metric_args);
    int(&metric, "id");
    assert!(!boolean(&metric, "skipped"));

    // stdin via `-`, text and JSON
    let stdin = sb
        .run_stdin(&["recall", "append", "child", "--kind", "error", "-"], "make: *** [stencil.o] Error 1\n")
        .success();
    snap!("recall_append_stdin_text", &stdin);
    let args = ["--json", "recall", "append", "child", "--kind", "note", "-", "--tag", "multi"];
    let note = sb.run_stdin(&args, "line one\nline two\n").success();
    snap!("recall_append_stdin_json", &note);
    let note = note.json();
    assert!(!boolean(&note, "skipped"));

    // duplicate: skipped, the existing id reported
    let mut text_args = metric_args.to_vec();
    let duplicate = sb.run(&text_args).success();
    snap!("recall_append_duplicate_text", &duplicate);
    text_args.insert(0, "--json");
    let duplicate = sb.run(&text_args).success();
    snap!("recall_append_duplicate_json", &duplicate);
    let duplicate = duplicate.json();
    assert!(boolean(&duplicate, "skipped"));
    assert_eq!(int(&duplicate, "id"), int(&metric, "id"));

    // list: the view, newest first; the root's later note is not in it
    snap_ok(sb, "recall_list_text", &["recall", "list", "child"]);
    let list = snap_json(sb, "recall_list_json", &["recall", "list", "child"]);
    check_recall(&list);
    assert_eq!(
        event_texts(&list),
        [
            "line one\nline two",
            "make: *** [stencil.o] Error 1",
            "runtime 12.4 s with -O3",
            "Measure the serial baseline"
        ]
    );
    let ids: Vec<i64> = array(&list, "events").iter().map(|e| int(e, "id")).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let first_metric = array(&list, "events").iter().find(|e| string(e, "kind") == "metric").unwrap();
    assert_eq!(strings(first_metric, "tags"), ["phase:tune", "gpu"]);
    assert_eq!(check_ts(first_metric), NOW_EPOCH);
    snap_ok(sb, "recall_list_limit_text", &["recall", "list", "child", "--limit", "2"]);
    let limited = snap_json(sb, "recall_list_limit_json", &["recall", "list", "child", "-n", "1"]);
    assert_eq!(event_texts(&limited), ["line one\nline two"]);
    snap_ok(sb, "recall_list_root_text", &["recall", "list", "root"]);

    // search: words, any characters
    snap_ok(sb, "recall_search_text", &["recall", "search", "child", "runtime baseline"]);
    let found = snap_json(
        sb,
        "recall_search_json",
        &["recall", "search", "child", "Error: 'stencil.o' -O3", "-k", "5"],
    );
    array(&found, "events").iter().for_each(check_event);
    let texts = event_texts(&found);
    assert!(texts.contains(&"make: *** [stencil.o] Error 1".to_string()), "{texts:?}");
    snap_ok(sb, "recall_search_no_match_text", &["recall", "search", "child", "late root"]);
    // A query of emoji and punctuation holds no word: the message says so.
    snap_ok(sb, "recall_search_no_word_text", &["recall", "search", "child", "🚀 ?!"]);
    let none = snap_json(sb, "recall_search_no_match_json", &["recall", "search", "child", "late"]);
    assert!(array(&none, "events").is_empty(), "a sibling's or later parent's events never match");
    // Words that start with '-' come after `--` (else a mistyped option would be searched for).
    let hyphen = sb.json(&["recall", "search", "child", "-k", "1", "--", "-O3"]);
    assert_eq!(event_texts(&hyphen), ["runtime 12.4 s with -O3"]);

    // evict --kind, --oldest, --id
    sb.ok(&["recall", "append", "child", "--kind", "debug", "printf at line 40"]);
    sb.ok(&["recall", "append", "child", "--kind", "debug", "printf at line 41"]);
    snap_ok(sb, "recall_evict_kind_text", &["recall", "evict", "child", "--kind", "debug"]);
    let oldest = snap_json(sb, "recall_evict_oldest_json", &["recall", "evict", "child", "--oldest", "1"]);
    assert_eq!(ints(&oldest, "evicted").len(), 1);
    int(&oldest, "archived");
    let root_view = sb.json(&["recall", "list", "root"]);
    assert!(
        event_texts(&root_view).contains(&"Measure the serial baseline".to_string()),
        "evicting an inherited event only hides it from the child"
    );
    let error_id = int(&sb.json(&["recall", "search", "child", "stencil.o", "-k", "1"])["events"][0], "id");
    snap_ok(sb, "recall_evict_id_text", &["recall", "evict", "child", "--id", &error_id.to_string()]);
    let note_id = int(&note, "id").to_string();
    let metric_id = int(&metric, "id").to_string();
    let by_id = snap_json(
        sb,
        "recall_evict_ids_json",
        &["recall", "evict", "child", "--id", &note_id, "--id", &metric_id],
    );
    let mut evicted = ints(&by_id, "evicted");
    evicted.sort();
    assert_eq!(evicted, [int(&metric, "id"), int(&note, "id")]);
    snap_ok(sb, "recall_evict_nothing_text", &["recall", "evict", "child", "--kind", "plan"]);
    let nothing = snap_json(sb, "recall_evict_nothing_json", &["recall", "evict", "child", "--oldest", "3"]);
    assert!(ints(&nothing, "evicted").is_empty());
    snap_ok(sb, "recall_list_after_evict_text", &["recall", "list", "child"]);
    // and the other way round: --oldest in text, --kind in JSON
    sb.ok(&["recall", "append", "child", "--kind", "debug", "printf at line 42"]);
    sb.ok(&["recall", "append", "child", "--kind", "metric", "runtime 11.9 s"]);
    sb.ok(&["recall", "append", "child", "--kind", "debug", "printf at line 43"]);
    snap_ok(sb, "recall_evict_oldest_text", &["recall", "evict", "child", "--oldest", "1"]);
    let kind = snap_json(sb, "recall_evict_kind_json", &["recall", "evict", "child", "--kind", "debug"]);
    assert_eq!(ints(&kind, "evicted").len(), 1);
    assert_eq!(event_texts(&sb.json(&["recall", "list", "child"])), ["runtime 11.9 s"]);
    // the evicted texts are kept in archival
    snap_ok(
        sb,
        "recall_evicted_in_archival_text",
        &["archival", "search", "child", "--tag", "EVICTED_RECALL"],
    );

    // A kind is taken as `append` stores it: trimmed, and a blank one is refused.
    sb.ok(&["recall", "append", "child", "--kind", " scratch ", "temporary"]);
    assert_eq!(ints(&sb.json(&["recall", "evict", "child", "--kind", "scratch "]), "evicted").len(), 1);
    let blank = sb.run(&["recall", "evict", "child", "--kind", " "]).text_error(1);
    assert!(blank.stderr.contains("invalid event kind"), "{}", blank.transcript());

    // An event that left the view comes back when appended again: an identical one is skipped
    // only while the branch still sees it.
    let again = sb.json(&["recall", "append", "child", "--kind", "debug", "printf at line 42"]);
    assert!(!boolean(&again, "skipped"), "{again}");
    let twice = sb.json(&["recall", "append", "child", "--kind", "debug", "printf at line 42"]);
    assert!(boolean(&twice, "skipped") && int(&twice, "id") == int(&again, "id"), "{twice}");
    assert!(event_texts(&sb.json(&["recall", "list", "child"])).contains(&"printf at line 42".to_string()));
}

#[test]
fn a_nul_character_is_stored_alike_on_both_backends() {
    for db in backends("a_nul_character_is_stored_alike_on_both_backends") {
        let sb = Sandbox::initialized_on(&db);
        sb.ok(&["branch", "create", "r"]);
        // PostgreSQL cannot store NUL: a tool's binary output keeps the rest, U+FFFD in its place.
        sb.run_stdin(&["core", "set", "r", "k", "-"], "before\0after").success();
        sb.run_stdin(&["recall", "append", "r", "--kind", "note", "-"], "before\0after").success();
        sb.run_stdin(&["archival", "add", "r", "-"], "before\0after").success();
        sb.run_stdin(&["step", "add", "r", "--type", "user", "-"], r#"{"text": "a\u0000b"}"#).success();
        let read = sb.json(&["read", "r", "--all"]);
        assert_eq!(string(field(&read, "core"), "k"), "before\u{FFFD}after");
        assert_eq!(event_texts(field(&read, "recall")), ["a\u{FFFD}b", "before\u{FFFD}after"]);
        assert_eq!(string(&array(&read, "archival")[0], "text"), "before\u{FFFD}after");
    }
}

#[test]
fn limits_and_usage_lines() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "r"]);
    // `-n 0` is a usage error for `recall list` as for `log`, and a TTL has bounds.
    sb.run(&["recall", "list", "r", "-n", "0"]).text_error(2);
    let long = sb.run(&["core", "set", "r", "k", "v", "--ttl", "1e99"]).text_error(1);
    assert!(long.stderr.contains("longer than 100 years"), "{}", long.transcript());
    let inf = sb.run(&["core", "set", "r", "k", "v", "--ttl", "1e400"]).text_error(1);
    assert!(inf.stderr.contains("not a finite number"), "{}", inf.transcript());
    // A database named by MEMCTL_DB is not shown in a usage line as if it had to be typed.
    let db = sb.file("memory.sqlite").display().to_string();
    let usage = sb.run_env(&["diff", "r"], &[("MEMCTL_DB", &db)]).text_error(2);
    assert!(usage.stderr.contains("usage: memctl diff <A> <B>"), "{}", usage.transcript());
    // Pressure's overall ratio is shown to 4 places, as its parts are.
    sb.ok(&["core", "set", "r", "k", &"v".repeat(913)]);
    let pressure = sb.json(&["pressure", "r"]);
    let overall = field(&pressure, "overall_ratio").as_f64().unwrap();
    assert_eq!(overall, (overall * 1e4).round() / 1e4, "{pressure}");
}

#[test]
fn redaction_keeps_words_and_masks_credentials() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "r"]);
    // Words holding `sk-` are no keys: stored as written, and found.
    for text in ["mask-rcnn-resnet50-fpn beat yolo", "the task-specific-adapter-module-v2 works"] {
        sb.ok(&["recall", "append", "r", "--kind", "note", text]);
        sb.ok(&["archival", "add", "r", text]);
    }
    let events = event_texts(&sb.json(&["recall", "list", "r"]));
    assert!(events.contains(&"mask-rcnn-resnet50-fpn beat yolo".to_string()), "{events:?}");
    assert_eq!(array(&sb.json(&["archival", "search", "r", "resnet50"]), "results").len(), 1);
    // Credentials by their shape, a URL's password, a value under a secret's name, a key's name.
    sb.ok(&[
        "recall",
        "append",
        "r",
        "--kind",
        "note",
        "pushed with ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ]);
    sb.ok(&["archival", "add", "r", "db at postgres://ann:pgpass77@db/runs, key AKIAIOSFODNN7EXAMPLE"]);
    sb.ok(&["core", "set", "r", "api_key", "Zq8LmN3pRt6VwX9yB2cD"]);
    let core = sb.json(&["core", "get", "r"]);
    assert_eq!(string(field(&core, "core"), "api_key"), "***");
    // Names are stored and printed as given: a key or a branch id holding a secret is refused.
    let key = sb.run(&["core", "set", "r", "key_sk-abc123def456ghi789jkl012", "v"]).text_error(1);
    assert!(key.stderr.contains("looks like a secret"), "{}", key.transcript());
    let all = sb.ok(&["read", "r", "--all"]);
    for secret in ["ghp_abcdefghij", "pgpass77", "AKIAIOSFODNN7EXAMPLE", "Zq8LmN3pRt6VwX9yB2cD", "sk-abc123"]
    {
        assert!(!all.contains(secret), "{secret} in:\n{all}");
    }
    assert!(all.contains("postgres://ann:***@db/runs"), "{all}");
    let id = sb.run(&["fork", "r", "b-sk-abcdefghijklmnop12345"]).text_error(1);
    assert!(id.stderr.contains("looks like a secret"), "{}", id.transcript());
    // A key with a control character or space around it is refused (a tab in a key once broke
    // every later eviction's tag), whether set from the command line or by `apply`.
    for key in ["note\tx", " padded "] {
        let refused = sb.run(&["core", "set", "r", key, "v"]).text_error(1);
        assert!(refused.stderr.contains("invalid core key"), "{}", refused.transcript());
    }
    for key in [r"note\tx", r"nul\u0000"] {
        let block = format!(r#"<memory_update>{{"core": {{"{key}": "v"}}}}</memory_update>"#);
        let applied = sb.run_stdin(&["apply", "r", "-"], &block).text_error(1);
        assert!(applied.stderr.contains("invalid core key"), "{}", applied.transcript());
    }
}

// ---- archival (§4.4) ----------------------------------------------------------------------------

#[test]
fn archival_add_get_update_delete_search() {
    for db in backends("archival_add_get_update_delete_search") {
        archival_add_get_update_delete_search_on(&Sandbox::initialized_on(&db));
    }
}

fn archival_add_get_update_delete_search_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);

    snap_ok(
        sb,
        "archival_add_text",
        &[
            "archival",
            "add",
            "root",
            "Tiling 64x64 beat 32x32 by 18% on A100",
            "--tag",
            "result",
            "--tag",
            "gpu",
        ],
    );
    let args = ["--json", "archival", "add", "root", "-", "--tag", "IDEA_MD"];
    let idea = sb.run_stdin(&args, "## Idea\nCache-aware tiling for a 7-point stencil\n").success();
    snap!("archival_add_stdin_json", &idea);
    let idea = idea.json();
    assert!(!boolean(&idea, "skipped"));
    let idea_id = id_of(&idea);

    // duplicate
    let duplicate_args = [
        "archival",
        "add",
        "root",
        "Tiling 64x64 beat 32x32 by 18% on A100",
        "--tag",
        "result",
        "--tag",
        "gpu",
    ];
    snap_ok(sb, "archival_add_duplicate_text", &duplicate_args);
    let duplicate = snap_json(sb, "archival_add_duplicate_json", &duplicate_args);
    assert!(boolean(&duplicate, "skipped"));
    let tiling_id = id_of(&duplicate);

    sb.ok(&["fork", "root", "child"]);

    // get
    snap_ok(sb, "archival_get_text", &["archival", "get", "child", &tiling_id]);
    let got = snap_json(sb, "archival_get_json", &["archival", "get", "child", &idea_id]);
    let record = field(&got, "record");
    check_record(record, false);
    assert_eq!(string(record, "text"), "## Idea\nCache-aware tiling for a 7-point stencil");
    assert_eq!(string(record, "branch"), "root");

    // update: text (tags kept), tags, --clear-tags; the root keeps its version
    snap_ok(
        sb,
        "archival_update_text_text",
        &["archival", "update", "child", &tiling_id, "--text", "Tiling 64x64: +21% after pinning threads"],
    );
    let updated = sb.json(&["archival", "get", "child", &tiling_id]);
    assert_eq!(string(&updated["record"], "text"), "Tiling 64x64: +21% after pinning threads");
    assert_eq!(strings(&updated["record"], "tags"), ["result", "gpu"], "tags are kept unless given");
    snap_ok(sb, "archival_get_root_version_text", &["archival", "get", "root", &tiling_id]);
    let tags = snap_json(
        sb,
        "archival_update_tags_json",
        &["archival", "update", "child", &tiling_id, "--tag", "result", "--tag", "verified"],
    );
    assert_eq!(id_of(&tags), tiling_id, "a record keeps its id across versions");
    int(&tags, "seq");
    snap_ok(sb, "archival_get_after_tags_text", &["archival", "get", "child", &tiling_id]);
    snap_ok(
        sb,
        "archival_update_tags_text",
        &["archival", "update", "child", &tiling_id, "-t", "result", "-t", "verified", "-t", "a100"],
    );
    let retagged = sb.json(&["archival", "get", "child", &tiling_id]);
    assert_eq!(strings(&retagged["record"], "tags"), ["result", "verified", "a100"]);
    assert_eq!(string(&retagged["record"], "text"), "Tiling 64x64: +21% after pinning threads", "text kept");
    snap_ok(
        sb,
        "archival_update_clear_tags_text",
        &["archival", "update", "child", &tiling_id, "--clear-tags"],
    );
    sb.ok(&["archival", "update", "child", &tiling_id, "--tag", "result"]);
    let clear = snap_json(
        sb,
        "archival_update_clear_tags_json",
        &["archival", "update", "child", &tiling_id, "--clear-tags"],
    );
    assert_eq!(id_of(&clear), tiling_id);
    let cleared = sb.json(&["archival", "get", "child", &tiling_id]);
    assert!(strings(&cleared["record"], "tags").is_empty());
    let root_version = sb.json(&["archival", "get", "root", &tiling_id]);
    assert_eq!(string(&root_version["record"], "text"), "Tiling 64x64 beat 32x32 by 18% on A100");
    assert_eq!(strings(&root_version["record"], "tags"), ["result", "gpu"]);
    let stdin = sb
        .run_stdin(
            &["--json", "archival", "update", "child", &idea_id, "--text", "-"],
            "## Idea\nTiling, revised\n",
        )
        .success();
    snap!("archival_update_stdin_json", &stdin);

    // search: query, tags, empty query
    sb.ok(&[
        "archival",
        "add",
        "child",
        "GPU offload failed: CUDA out of memory",
        "--tag",
        "negative_result",
    ]);
    sb.ok(&["archival", "add", "child", "Memory bandwidth bound: 11.8 GB/s at 64 threads"]);
    snap_ok(sb, "archival_search_text", &["archival", "search", "child", "out of memory"]);
    let found =
        snap_json(sb, "archival_search_json", &["archival", "search", "child", "out of memory", "-k", "5"]);
    let results = array(&found, "results");
    results.iter().for_each(|r| check_record(r, true));
    assert_eq!(
        string(&results[0], "text"),
        "GPU offload failed: CUDA out of memory",
        "more words rank first"
    );
    assert_eq!(results.len(), 2, "only matching records");
    snap_ok(sb, "archival_search_tag_text", &["archival", "search", "child", "--tag", "negative_result"]);
    let tagged = snap_json(
        sb,
        "archival_search_tags_json",
        &["archival", "search", "child", "memory", "-t", "negative_result"],
    );
    assert_eq!(array(&tagged, "results").len(), 1, "tags are AND-ed with the query");
    snap_ok(sb, "archival_search_empty_query_text", &["archival", "search", "child"]);
    let newest =
        snap_json(sb, "archival_search_empty_query_json", &["archival", "search", "child", "-k", "2"]);
    let newest: Vec<&str> = array(&newest, "results").iter().map(|r| string(r, "text")).collect();
    assert_eq!(
        newest,
        ["Memory bandwidth bound: 11.8 GB/s at 64 threads", "GPU offload failed: CUDA out of memory"]
    );
    let syntax =
        sb.run(&["archival", "search", "child", "what's NOT \"working\": -O3? AND/OR NEAR(x)"]).success();
    snap!("archival_search_syntax_chars_text", &syntax);

    // delete: gone from the child's view only
    snap_ok(sb, "archival_delete_text", &["archival", "delete", "child", &tiling_id]);
    let deleted = snap_json(sb, "archival_delete_json", &["archival", "delete", "child", &idea_id]);
    assert_eq!(id_of(&deleted), idea_id);
    assert!(boolean(&deleted, "deleted"));
    let gone = sb.run(&["archival", "get", "child", &tiling_id]).text_error(3);
    snap!("archival_get_deleted_text", &gone);
    sb.ok(&["archival", "get", "root", &tiling_id]);
    snap_ok(sb, "archival_search_after_delete_text", &["archival", "search", "child"]);
    let scratch = id_of(&sb.json(&["archival", "add", "child", "scratch record"]));
    assert!(boolean(&sb.json(&["archival", "del", "child", &scratch]), "deleted"));
}

// ---- a small tree search and what each node sees (§2, read) -------------------------------------

/// root (node-0) with two children, omp (node-1) and gpu (node-2), and a grandchild omp-pin
/// (node-3). The root writes `best_node` after forking its children, so none of them sees it.
fn scenario(db: &Db) -> Sandbox {
    let sb = Sandbox::initialized_on(db);
    let steps: &[&[&str]] = &[
        &["branch", "create", "root", "--meta", r#"{"task": "stencil"}"#],
        &["branch", "set-uid", "root", "node-0"],
        &["core", "set", "root", "task", "Tune a 3D 7-point Jacobi stencil (1024^3)", "--importance", "5"],
        &["core", "set", "root", "baseline_s", "48.2", "--importance", "4"],
        &[
            "recall",
            "append",
            "root",
            "--kind",
            "plan",
            "Measure the baseline, then try threads and GPU",
            "--tag",
            "phase:draft",
        ],
        &[
            "recall",
            "append",
            "root",
            "--kind",
            "metric",
            "baseline: 48.2 s, 1.9 GFLOP/s",
            "--tag",
            "phase:draft",
        ],
        &["archival", "add", "root", "Idea: cache-aware tiling beats naive threading by 2x", "--tag", "IDEA"],
        &["fork", "root", "omp", "--meta", r#"{"score": 0.7}"#],
        &["branch", "set-uid", "omp", "node-1"],
        &["fork", "root", "gpu"],
        &["branch", "set-uid", "gpu", "node-2"],
        &["core", "set", "root", "best_node", "omp", "--importance", "4"],
        &[
            "recall",
            "append",
            "omp",
            "--kind",
            "plan",
            "Parallelise the sweep with OpenMP",
            "--tag",
            "phase:improve",
        ],
        &[
            "recall",
            "append",
            "omp",
            "--kind",
            "metric",
            "runtime 14.8 s with 64 threads",
            "--tag",
            "phase:improve",
        ],
        &["core", "set", "omp", "last_runtime_s", "14.8", "--importance", "4"],
        &[
            "archival",
            "add",
            "omp",
            "omp: 3.3x over baseline, scaling flattens at 64 threads",
            "--tag",
            "node_result",
        ],
        &["recall", "append", "gpu", "--kind", "error", "CUDA error: out of memory", "--tag", "failed"],
        &["core", "set", "gpu", "status", "failed"],
        &[
            "archival",
            "add",
            "gpu",
            "Negative result: the 1024^3 grid does not fit twice on the A100",
            "--tag",
            "negative_result",
        ],
        &["fork", "omp", "omp-pin"],
        &["branch", "set-uid", "omp-pin", "node-3"],
        &[
            "recall",
            "append",
            "omp-pin",
            "--kind",
            "metric",
            "runtime 12.9 s with OMP_PROC_BIND=close",
            "--tag",
            "phase:improve",
        ],
        &["core", "set", "omp-pin", "last_runtime_s", "12.9", "--importance", "4"],
        &[
            "archival",
            "add",
            "omp-pin",
            "Pinning threads cut run-to-run variance to 2%",
            "--tag",
            "node_result",
        ],
    ];
    for step in steps {
        sb.ok(&cat(&["--actor", "runner", "--phase", "draft"], step));
    }
    sb
}

#[test]
fn scenario_reads() {
    for db in backends("scenario_reads") {
        scenario_reads_on(&scenario(&db));
    }
}

fn scenario_reads_on(sb: &Sandbox) {
    snap_ok(sb, "scenario_branch_list_text", &["branch", "list"]);

    // What each node sees, in text.
    snap_ok(sb, "scenario_read_root_text", &["read", "root"]);
    snap_ok(sb, "scenario_read_omp_text", &["read", "omp"]);
    snap_ok(sb, "scenario_read_gpu_text", &["read", "node-2"]);
    snap_ok(sb, "scenario_read_omp_pin_text", &["read", "omp-pin"]);
    snap_ok(sb, "scenario_read_scope_core_text", &["read", "omp-pin", "--scope", "core"]);
    snap_ok(sb, "scenario_read_scope_recall_text", &["read", "omp-pin", "--scope", "recall"]);
    snap_ok(sb, "scenario_read_scope_archival_text", &["read", "omp-pin", "--scope", "archival"]);
    snap_ok(sb, "scenario_core_explain_text", &["core", "get", "omp-pin", "--explain"]);
    snap_ok(sb, "scenario_archival_search_text", &["archival", "search", "omp-pin", "threads memory"]);

    // A small window (config from the environment) against --all.
    let window = [("MEMCTL_RECALL_MAX_EVENTS", "2"), ("MEMCTL_RETRIEVAL_K", "1")];
    snap!("scenario_read_window_text", &sb.run_env(&["read", "omp-pin"], &window).success());
    snap!("scenario_read_all_text", &sb.run_env(&["read", "omp-pin", "--all"], &window).success());
    let windowed = sb.json_env(&["read", "omp-pin"], &window);
    assert_eq!(array(&windowed["recall"], "events").len(), 2);
    assert_eq!(array(&windowed, "archival").len(), 1);
    let all = sb.json_env(&["read", "omp-pin", "--all"], &window);
    assert_eq!(array(&all["recall"], "events").len(), 5);
    assert_eq!(array(&all, "archival").len(), 3);

    // JSON reads and the view's rules.
    let pin = snap_json(sb, "scenario_read_omp_pin_json", &["read", "omp-pin"]);
    assert_eq!(string(&pin, "branch"), "omp-pin");
    check_recall(field(&pin, "recall"));
    array(&pin, "archival").iter().for_each(|r| check_record(r, false));
    assert_eq!(
        field(&pin, "core"),
        &json!({"task": "Tune a 3D 7-point Jacobi stencil (1024^3)", "baseline_s": "48.2", "last_runtime_s": "12.9"}),
        "inherited keys, the nearest override, no best_node (written after the fork)"
    );
    assert_eq!(
        event_texts(&pin["recall"]),
        [
            "runtime 12.9 s with OMP_PROC_BIND=close",
            "runtime 14.8 s with 64 threads",
            "Parallelise the sweep with OpenMP",
            "baseline: 48.2 s, 1.9 GFLOP/s",
            "Measure the baseline, then try threads and GPU",
        ]
    );
    let writers: BTreeSet<&str> = array(&pin, "archival").iter().map(|r| string(r, "branch")).collect();
    assert_eq!(writers, BTreeSet::from(["root", "omp", "omp-pin"]), "never the sibling gpu");

    let gpu = snap_json(sb, "scenario_read_gpu_json", &["read", "gpu", "--all"]);
    assert_eq!(
        field(&gpu, "core"),
        &json!({"task": "Tune a 3D 7-point Jacobi stencil (1024^3)", "baseline_s": "48.2", "status": "failed"})
    );
    let gpu_writers: BTreeSet<&str> =
        array(&gpu["recall"], "events").iter().map(|e| string(e, "branch")).collect();
    assert_eq!(gpu_writers, BTreeSet::from(["root", "gpu"]));

    let root = sb.json(&["read", "root"]);
    assert_eq!(object(&root, "core")["best_node"], "omp", "the parent sees its own later write");
    assert_eq!(array(&root["recall"], "events").len(), 2, "no child's event reaches the parent");

    for (scope, present, absent) in [
        ("core", "core", ["recall", "archival"]),
        ("recall", "recall", ["core", "archival"]),
        ("archival", "archival", ["core", "recall"]),
    ] {
        let name = format!("scenario_read_scope_{scope}_json");
        let value = snap_json(sb, &name, &["read", "omp-pin", "--scope", scope]);
        assert_eq!(string(&value, "branch"), "omp-pin");
        field(&value, present);
        for layer in absent {
            assert!(value.get(layer).is_none(), "--scope {scope} shows no {layer}: {value}");
        }
    }
    let all = snap_json(sb, "scenario_read_all_json", &["read", "omp-pin", "--all", "--scope", "all"]);
    for layer in ["core", "recall", "archival"] {
        field(&all, layer);
    }
}

#[test]
fn read_shows_summaries() {
    let sb = Sandbox::with_config("recall_max_events = 2\nauto_consolidate = false\n");
    sb.ok(&["init"]);
    sb.ok(&["fork", "-", "root"]);
    for text in ["a one", "b two", "c three", "d four", "e five"] {
        sb.ok(&["recall", "append", "root", "--kind", "note", text]);
    }
    sb.ok(&["consolidate", "root"]);
    // The summary's later lines are indented under its first.
    snap_ok(&sb, "read_summaries_text", &["read", "root", "--scope", "recall"]);
    let read = snap_json(&sb, "read_summaries_json", &["read", "root", "--scope", "recall"]);
    let summaries = array(&read["recall"], "summaries");
    assert_eq!(summaries.len(), 1);
    assert_eq!(array(&summaries[0], "event_ids").len(), 3);
    assert_eq!(event_texts(&read["recall"]), ["e five", "d four"]);
}

// ---- the operation journal (§8) -----------------------------------------------------------------

#[test]
fn log_lists_the_journal() {
    for db in backends("log_lists_the_journal") {
        log_lists_the_journal_on(&scenario(&db));
    }
}

fn log_lists_the_journal_on(sb: &Sandbox) {
    sb.ok(&["--phase", "improve", "--actor", "worker-3", "core", "set", "gpu", "status", "retrying"]);
    sb.run_env(
        &["recall", "append", "gpu", "--kind", "note", "retry with 512^3"],
        &[("MEMCTL_ACTOR", "worker-4")],
    )
    .success();

    snap_ok(sb, "log_all_text", &["log"]);
    let all = snap_json(sb, "log_all_json", &["log"]);
    let ops = array(&all, "ops");
    ops.iter().for_each(check_op);
    assert!(ops.len() >= 26, "at least one op per mutating command");
    let seqs: Vec<i64> = ops.iter().map(|op| int(op, "seq")).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "oldest first: {seqs:?}");
    assert!(ops.iter().all(|op| check_ts(op) == NOW_EPOCH));
    let (scenario_ops, later) = ops.split_at(ops.len() - 2);
    assert!(scenario_ops.iter().all(|op| op["actor"] == "runner" && op["phase"] == "draft"));
    assert_eq!(later[0]["actor"], "worker-3");
    assert_eq!(later[0]["phase"], "improve");
    assert_eq!(later[0]["op"], "core.set");
    assert_eq!(later[1]["actor"], "worker-4", "MEMCTL_ACTOR sets the actor");
    assert_eq!(later[1]["phase"], Value::Null);
    assert_eq!(later[1]["op"], "recall.append");

    snap_ok(sb, "log_branch_text", &["log", "omp"]);
    let omp = snap_json(sb, "log_branch_json", &["log", "node-1"]);
    let omp_ops = array(&omp, "ops");
    assert!(!omp_ops.is_empty() && omp_ops.iter().all(|op| op["branch"] == "omp"), "{omp}");

    snap_ok(sb, "log_limit_text", &["log", "-n", "3"]);
    let last = snap_json(sb, "log_limit_json", &["log", "gpu", "--limit", "2"]);
    let last = array(&last, "ops");
    assert_eq!(last.len(), 2);
    assert_eq!(last[1]["actor"], "worker-4", "the newest entries, still oldest first");

    let empty = Sandbox::initialized();
    snap_ok(&empty, "log_empty_text", &["log"]);
    let none = empty.json(&["log"]);
    assert!(array(&none, "ops").is_empty());
}

// ---- completions and quickstart -----------------------------------------------------------------

#[test]
fn completions_for_bash() {
    let sb = Sandbox::new();
    let out = sb.run(&["completions", "bash"]).success();
    assert!(out.stdout.contains("memctl"), "bash completions mention memctl");
    assert!(out.stdout.len() > 1000);
    assert_eq!(out.stderr, "");
}

#[test]
fn quickstart_builds_a_demo() {
    let sb = Sandbox::new();
    // Its output names the database by absolute path: the sandbox shows as [TMP].
    snap_ok(&sb, "quickstart_text", &["quickstart", "--dir", "demo"]);
    assert!(sb.file("demo/memory.sqlite").is_file());

    // Again, in JSON: the directory is replaced, the result the same.
    let value = sb.json(&["quickstart", "--dir", "demo"]);
    assert_eq!(string(&value, "db"), "[TMP]/demo/memory.sqlite");
    assert_eq!(int(&value, "branches"), 13);
    assert_eq!(string(&value, "best"), "tile-64-simd");
    assert_eq!(string(&value, "paper_markdown"), "[TMP]/demo/final_memory_for_paper.md");
    assert_eq!(string(&value, "paper_json"), "[TMP]/demo/final_memory_for_paper.json");
    assert_eq!(string(&value, "html"), "[TMP]/demo/memory_database.html");
    let paper = std::fs::read_to_string(sb.file("demo/final_memory_for_paper.md")).unwrap();
    assert!(
        paper.starts_with("# Final Memory For Paper\n\n_Best `node-9` (branch `tile-64-simd`)"),
        "{paper}"
    );
    assert!(paper.contains("## Provenance Chain\n\n1. `node-0` (branch `root`, depth 0)"), "{paper}");
    assert!(!paper.contains("CUDA error"), "the failing GPU line is not on the best path");
    let page = std::fs::read_to_string(sb.file("demo/memory_database.html")).unwrap();
    assert!(page.contains("\"id\":\"tile-64-simd\""), "the viewer holds the branches");

    // The database it leaves is an ordinary one.
    let list = sb.json(&["--db", "demo/memory.sqlite", "branch", "list"]);
    assert_eq!(array(&list, "branches").len(), 13);
    snap_ok(
        &sb,
        "quickstart_read_gpu_half_text",
        &["--db", "demo/memory.sqlite", "read", "gpu-half", "--scope", "recall"],
    );
    // The file alone holds the demo, to be copied: no frames left in a WAL beside it.
    assert_eq!(std::fs::metadata(sb.file("demo/memory.sqlite-wal")).map_or(0, |m| m.len()), 0);
}

/// Quickstart replaces only what an earlier quickstart wrote: a run's database, a demo someone
/// wrote into, or its output names beside no database are left as they are (exit 4).
#[test]
fn quickstart_leaves_another_run_alone() {
    let sb = Sandbox::new();
    sb.ok(&["--db", "run/memory.sqlite", "init"]);
    sb.ok(&["--db", "run/memory.sqlite", "branch", "create", "precious"]);
    let message = sb.run(&["--json", "quickstart", "--dir", "run"]).json_error(4, "conflict");
    assert!(
        message.contains("run/memory.sqlite holds more than an earlier memctl quickstart wrote"),
        "{message}"
    );
    assert_eq!(array(&sb.json(&["--db", "run/memory.sqlite", "branch", "list"]), "branches").len(), 1);

    sb.ok(&["quickstart", "--dir", "demo"]);
    sb.ok(&["--db", "demo/memory.sqlite", "recall", "append", "root", "--kind", "note", "mine"]);
    sb.run(&["quickstart", "--dir", "demo"]).text_error(4);

    std::fs::create_dir(sb.file("notes")).unwrap();
    std::fs::write(sb.file("notes/memory_database.html"), "my page").unwrap();
    sb.run(&["quickstart", "--dir", "notes"]).text_error(4);
    assert_eq!(std::fs::read_to_string(sb.file("notes/memory_database.html")).unwrap(), "my page");
}

// ---- errors and exit codes (§9) -----------------------------------------------------------------

/// Every command that takes a branch, with an unknown one.
const UNKNOWN_BRANCH_COMMANDS: &[&[&str]] = &[
    &["fork", "nope", "child"],
    &["branch", "show", "nope"],
    &["branch", "set-uid", "nope", "uid-1"],
    &["core", "set", "nope", "k", "v"],
    &["core", "get", "nope"],
    &["core", "del", "nope", "k"],
    &["recall", "append", "nope", "--kind", "note", "text"],
    &["recall", "list", "nope"],
    &["recall", "search", "nope", "words"],
    &["recall", "evict", "nope", "--oldest", "1"],
    &["archival", "add", "nope", "text"],
    &["archival", "get", "nope", "1"],
    &["archival", "update", "nope", "1", "--text", "t"],
    &["archival", "delete", "nope", "1"],
    &["archival", "search", "nope", "words"],
    &["read", "nope"],
    &["log", "nope"],
];

#[test]
fn unknown_branch_is_exit_3_and_writes_nothing() {
    for db in backends("unknown_branch_is_exit_3_and_writes_nothing") {
        unknown_branch_is_exit_3_and_writes_nothing_on(&Sandbox::initialized_on(&db));
    }
}

fn unknown_branch_is_exit_3_and_writes_nothing_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);
    let ops_before = array(&sb.json(&["log"]), "ops").len();

    let mut transcripts = Vec::new();
    for args in UNKNOWN_BRANCH_COMMANDS {
        let text = sb.run(args).text_error(3);
        assert!(text.stderr.contains("'nope'"), "the error names the branch:\n{}", text.transcript());
        transcripts.push(text);
        let json_args = cat(&["--json"], args);
        let json = sb.run(&json_args);
        let message = json.clone().json_error(3, "not_found");
        assert!(message.contains("nope"), "{message}");
        transcripts.push(json);
    }
    snap_all!("errors_unknown_branch", &transcripts);

    assert_eq!(array(&sb.json(&["log"]), "ops").len(), ops_before, "no orphan rows, no journal entry");
    assert_eq!(array(&sb.json(&["branch", "list"]), "branches").len(), 1);
}

#[test]
fn a_stdout_that_cannot_be_written_is_reported_and_the_write_kept() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not a Linux machine: nothing to write into that is always full
    };
    // Exit 1 as for a file an export cannot write, not 255 (a bug of memctl's); the stderr.
    let into_full = |args: &[&str]| -> String {
        let output = sb
            .command(args)
            .stdout(full.try_clone().unwrap())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("cannot write to stdout"), "{stderr}");
        stderr
    };
    for json in [false, true] {
        let text = if json { "appended with --json" } else { "appended" };
        let args =
            [&["--json"][..json as usize], &["recall", "append", "--kind", "note", "root", text]].concat();
        let stderr = into_full(&args);
        if json {
            let error: Value = serde_json::from_str(stderr.trim()).expect("the error as JSON");
            assert_eq!(error["error"]["kind"], "invalid_input");
        }
        let events = array(&sb.json(&["recall", "list", "root"]), "events").clone();
        assert!(events.iter().any(|e| e["text"] == text), "the committed append stays: {events:?}");
    }
    // An export to stdout the same way.
    for export in ["jsonl", "html"] {
        into_full(&["export", export, "--out", "-"]);
    }
}

#[test]
fn a_stderr_that_cannot_be_written_keeps_the_exit_code() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not a Linux machine
    };
    for args in
        [&["core", "set", "root", "k", "v", "--ttl", "0"][..], &["--json", "core", "get", "nope", "k"]]
    {
        let status = sb.command(args).stderr(full.try_clone().unwrap()).status().unwrap();
        let expected = if args[0] == "--json" { 3 } else { 1 };
        assert_eq!(status.code(), Some(expected), "{args:?}: the error's own code, not a panic's");
    }
}

#[test]
fn text_that_is_not_utf8_in_the_environment_or_arguments_is_refused_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let outcome = |command: &mut std::process::Command| {
        let output = command.output().unwrap();
        (output.status.code(), String::from_utf8(output.stderr).unwrap())
    };
    // Another program's variable is none of memctl's business.
    let (code, stderr) = outcome(sb.command(&["--json", "core", "get", "root", "k"]).env("UNRELATED", bad));
    assert_eq!(code, Some(0), "{stderr}");
    // memctl's own: exit 1, named.
    for name in ["MEMCTL_NOW", "MEMCTL_CORE_MAX_CHARS"] {
        let (code, stderr) = outcome(sb.command(&["--json", "core", "get", "root", "k"]).env(name, bad));
        assert_eq!(code, Some(1), "{name}: {stderr}");
        assert!(stderr.contains(&format!("{name} is not valid UTF-8")), "{stderr}");
    }
    // An argument: a usage error, as JSON with --json.
    let (code, stderr) = outcome(sb.command(&["--json", "archival", "search", "root"]).arg(bad));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("invalid UTF-8"), "{stderr}");
    let error: Value = serde_json::from_str(stderr.trim()).expect("the error as JSON");
    assert_eq!(error["error"]["kind"], "usage");
    // A database path need not be UTF-8.
    let (code, stderr) = outcome(sb.command(&["core", "get", "root", "k"]).arg("--db").arg(bad));
    assert_eq!(code, Some(3), "a path like any other, not found here: {stderr}");
}

/// A record's text over `archival_max_chars` is refused however it would be written: add,
/// update, or `apply`'s update; the record keeps its text.
#[test]
fn archival_max_chars_holds_for_every_write() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let id = int(&sb.json(&["archival", "add", "root", "short"]), "id").to_string();
    let small = [("MEMCTL_ARCHIVAL_MAX_CHARS", "10")];
    let long = "a much longer text than ten";
    for (args, stdin) in [
        (vec!["--json", "archival", "add", "root", long], None),
        (vec!["--json", "archival", "update", "root", &id, "--text", long], None),
        (
            vec!["--json", "apply", "root", "-"],
            Some(format!(r#"{{"archival_update": [{{"id": {id}, "text": "{long}"}}]}}"#)),
        ),
    ] {
        let outcome = sb.exec(&args, stdin.as_deref(), &small);
        let message = outcome.json_error(1, "invalid_input");
        assert!(message.contains("more than archival_max_chars = 10"), "{args:?}: {message}");
    }
    assert_eq!(string(field(&sb.json(&["archival", "get", "root", &id]), "record"), "text"), "short");
}

#[test]
fn unknown_record_and_event_are_exit_3() {
    for db in backends("unknown_record_and_event_are_exit_3") {
        unknown_record_and_event_are_exit_3_on(&Sandbox::initialized_on(&db));
    }
}

fn unknown_record_and_event_are_exit_3_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);
    let get = sb.run(&["archival", "get", "root", "999"]).text_error(3);
    snap!("errors_unknown_record_text", &get);
    let json = sb.run(&["--json", "archival", "update", "root", "999", "--text", "x"]);
    snap!("errors_unknown_record_json", &json);
    json.json_error(3, "not_found");
    let evict = sb.run(&["recall", "evict", "root", "--id", "999"]).text_error(3);
    snap!("errors_unknown_event_text", &evict);
    // No id at all, not an unknown one: a usage error, wherever an id is taken.
    for args in [
        &["archival", "get", "root", "0"][..],
        &["archival", "delete", "root", "--", "-1"],
        &["recall", "evict", "root", "--id=-1"],
        &["why", "root", "--record", "0"],
        &["promote", "root", "root", "--event", "0"],
    ] {
        let message = sb.run(&[&["--json"][..], args].concat()).json_error(2, "usage");
        assert!(message.contains("an id is at least 1"), "{args:?}: {message}");
    }
}

#[test]
fn conflicting_fork_is_exit_4() {
    for db in backends("conflicting_fork_is_exit_4") {
        conflicting_fork_is_exit_4_on(&Sandbox::initialized_on(&db));
    }
}

fn conflicting_fork_is_exit_4_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);
    sb.ok(&["fork", "root", "a"]);
    sb.ok(&["fork", "root", "b"]);
    sb.ok(&["branch", "set-uid", "b", "node-2"]);

    let text = sb.run(&["fork", "b", "a"]).text_error(4);
    snap!("errors_conflict_fork_text", &text);
    let json = sb.run(&["--json", "fork", "b", "a"]);
    snap!("errors_conflict_fork_json", &json);
    json.json_error(4, "conflict");
    // an existing child as a root, a root as a child
    sb.run(&["fork", "-", "a"]).text_error(4);
    sb.run(&["branch", "create", "a"]).text_error(4);
    sb.run(&["fork", "a", "root"]).text_error(4);
    // ids and node_uids share one namespace
    let uid = sb.run(&["fork", "a", "node-2"]).text_error(4);
    snap!("errors_conflict_uid_as_id_text", &uid);
    let alias = sb.run(&["--json", "branch", "set-uid", "a", "node-2"]);
    snap!("errors_conflict_uid_taken_json", &alias);
    alias.json_error(4, "conflict");
    // A node_uid that is another branch's id is named as such.
    let taken = sb.run(&["branch", "set-uid", "a", "root"]).text_error(4);
    assert!(taken.stderr.contains("'root' is already the id of branch 'root'"), "{}", taken.transcript());

    let branch = sb.json(&["branch", "show", "a"]);
    assert_eq!(opt_string(&branch["branch"], "parent"), Some("root"), "a conflict changes nothing");
}

#[test]
fn invalid_input_is_exit_1() {
    for db in backends("invalid_input_is_exit_1") {
        invalid_input_is_exit_1_on(&Sandbox::initialized_on(&db));
    }
}

fn invalid_input_is_exit_1_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);

    let too_long = "a".repeat(129);
    let cases: &[(&str, &[&str])] = &[
        ("errors_invalid_branch_id", &["fork", "root", "bad id!"]),
        ("errors_empty_branch_id", &["branch", "create", ""]),
        ("errors_too_long_branch_id", &["fork", "root", &too_long]),
        ("errors_empty_core_key", &["core", "set", "root", "", "value"]),
        ("errors_invalid_meta_json", &["fork", "root", "x", "--meta", "{bad"]),
        ("errors_meta_not_an_object", &["branch", "create", "r2", "--meta", "[1, 2]"]),
        ("errors_invalid_ttl", &["core", "set", "root", "k", "v", "--ttl", "soon"]),
        ("errors_empty_event_text", &["recall", "append", "root", "--kind", "note", ""]),
        ("errors_empty_archival_text", &["archival", "add", "root", ""]),
    ];
    let mut transcripts = Vec::new();
    for (name, args) in cases {
        let text = sb.run(args).text_error(1);
        let json = sb.run(&cat(&["--json"], args));
        json.clone().json_error(1, "invalid_input");
        if name.ends_with("meta_json") || name.ends_with("core_key") || name.ends_with("invalid_branch_id") {
            snap!(&format!("{name}_text"), &text);
            snap!(&format!("{name}_json"), &json);
        } else {
            transcripts.push(text);
            transcripts.push(json);
        }
    }
    snap_all!("errors_invalid_input_more", &transcripts);
    // A negative duration says so.
    for ttl in [&["--ttl=-5s"][..], &["--ttl=-5"]] {
        let refused = sb.run(&cat(&["core", "set", "root", "k", "v"], ttl)).text_error(1);
        assert!(refused.stderr.contains("must be positive"), "{}", refused.transcript());
    }
    // An empty core value, as `apply` refuses one (`core del` removes a key).
    for value in ["", "   "] {
        let refused = sb.run(&["core", "set", "root", "k", value]).text_error(1);
        assert!(refused.stderr.contains("core value of \"k\" is empty"), "{}", refused.transcript());
    }

    let invalid_now = sb.run_env(&["branch", "list"], &[("MEMCTL_NOW", "yesterday")]).text_error(1);
    snap!("errors_invalid_memctl_now_text", &invalid_now);

    // nothing was written
    assert_eq!(array(&sb.json(&["branch", "list"]), "branches").len(), 1);
    assert!(object(&sb.json(&["core", "get", "root"]), "core").is_empty());
}

/// A file of (deterministic) random bytes.
fn random_bytes(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[test]
fn unreadable_database_is_exit_6() {
    let sb = Sandbox::new();
    let junk = random_bytes(16 * 1024);
    std::fs::write(sb.file("junk.sqlite"), &junk).unwrap();

    let text = sb.run(&["--db", "junk.sqlite", "branch", "list"]).text_error(6);
    snap!("errors_unreadable_db_text", &text);
    let json = sb.run(&["--json", "--db", "junk.sqlite", "core", "set", "root", "k", "v"]);
    snap!("errors_unreadable_db_json", &json);
    json.json_error(6, "incompatible_db");
    sb.run(&["--db", "junk.sqlite", "init"]).text_error(6);
    assert_eq!(std::fs::read(sb.file("junk.sqlite")).unwrap(), junk, "never modified");

    // An SQLite database that is not a memctl one.
    {
        let conn = rusqlite::Connection::open(sb.file("other.sqlite")).unwrap();
        conn.execute_batch("CREATE TABLE results (node TEXT, runtime REAL)").unwrap();
    }
    let before = std::fs::read(sb.file("other.sqlite")).unwrap();
    let foreign = sb.run(&["--db", "other.sqlite", "recall", "list", "root"]).text_error(6);
    snap!("errors_foreign_sqlite_db_text", &foreign);
    sb.run(&["--json", "--db", "other.sqlite", "init"]).json_error(6, "incompatible_db");
    assert_eq!(std::fs::read(sb.file("other.sqlite")).unwrap(), before, "never modified");
}

/// A database file that cannot be opened or written is the file's problem, not the database's
/// (exit 6) nor memctl's (exit 255): exit 1, naming the file, with advice. (Permissions are not
/// tried: tests may run as root.)
#[test]
fn a_database_file_that_cannot_be_opened_or_written_is_exit_1() {
    let sb = Sandbox::new();
    let outcome = sb.run(&["--json", "--db", "/dev/null", "init"]);
    let message = outcome.clone().json_error(1, "invalid_input");
    assert!(message.starts_with("/dev/null: "), "{message}");
    assert!(outcome.stderr.contains("permissions of the file and of its directory"), "{}", outcome.stderr);
    std::fs::write(sb.file("afile"), "").unwrap();
    let message = sb.run(&["--json", "--db", "afile/memory.sqlite", "init"]).json_error(1, "invalid_input");
    assert!(message.contains("afile"), "{message}");
}

#[test]
fn database_from_a_newer_memctl_is_exit_6_and_untouched() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let db = sb.file("memory.sqlite");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = std::fs::read(&db).unwrap();

    let text = sb.run(&["branch", "list"]).text_error(6);
    snap!("errors_newer_db_text", &text);
    let json = sb.run(&["--json", "init"]);
    snap!("errors_newer_db_json", &json);
    json.json_error(6, "incompatible_db");
    sb.run(&["core", "set", "root", "k", "v"]).text_error(6);

    assert_eq!(std::fs::read(&db).unwrap(), before, "a newer database is never modified");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
    assert_eq!(version, 99);
}

#[test]
fn database_of_schema_1_is_upgraded_with_its_counts() {
    // Written by the first release's memctl: forks, evictions and a consolidation.
    let sb = Sandbox::new();
    let db = sb.file("memory.sqlite");
    std::fs::copy(fixture("schema_v1.sqlite"), &db).unwrap();
    // Each branch's events and summaries as the first release listed them.
    let before = [("root", 5, 0), ("a", 2, 2), ("g", 8, 0), ("b", 5, 0), ("g2", 2, 2)];
    for (branch, events, summaries) in before {
        let list = sb.json(&["recall", "list", branch, "--limit", "100"]);
        assert_eq!(array(&list, "events").len(), events, "{branch}");
        assert_eq!(array(&list, "summaries").len(), summaries, "{branch}");
        let pressure = sb.json(&["pressure", branch]);
        assert_eq!(
            int(field(&pressure, "recall"), "count"),
            events as i64,
            "{branch}: counted after the upgrade"
        );
    }
    // The search index was rebuilt with each record's branch: still found, only where visible.
    let found = |branch: &str, query: &str| -> Vec<i64> {
        let hits = sb.json(&["archival", "search", branch, query]);
        array(&hits, "results").iter().map(|r| int(r, "id")).collect()
    };
    assert_eq!(found("root", "evicted"), vec![15]);
    // "evicted" is in one of the three matches, "consolidated" in two: the rarer word ranks first.
    assert_eq!(found("g2", "consolidated evicted"), vec![15, 41, 35]);
    assert_eq!(found("b", "consolidated"), Vec::<i64>::new());
    // The records' lengths, counted by the upgrade, score as the keyword fallback counts them.
    for (branch, query) in [("g2", "consolidated evicted"), ("root", "evicted")] {
        let args = ["archival", "search", branch, query];
        let fts = sb.json(&args);
        let fallback = sb.json_env(&args, &[("MEMCTL_SEARCH__FTS", "off")]);
        assert!(!array(&fts, "results").is_empty(), "{branch}");
        assert_eq!(fts, fallback, "{branch}: the same records and scores either way");
    }
    sb.ok(&["recall", "append", "g2", "--kind", "note", "after the upgrade"]);
    sb.ok(&["fork", "g2", "g3"]);
    for branch in ["g2", "g3"] {
        assert_eq!(int(field(&sb.json(&["pressure", branch]), "recall"), "count"), 3, "{branch}");
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
    assert_eq!(version, memctl_core::SCHEMA_VERSION);
}

#[test]
fn database_of_schema_11_is_upgraded_with_its_step_counts() {
    // Written by schema 11's memctl: conversations pruned, reset, evicted and consolidated
    // across forks (tests/fixtures/README.md).
    let sb = Sandbox::new();
    std::fs::copy(fixture("schema_v11.sqlite"), sb.file("memory.sqlite")).unwrap();
    let counts = |branch: &str| {
        let list = sb.json(&["recall", "list", branch, "--limit", "1000"]);
        let events = array(&list, "events");
        let steps = events.iter().filter(|e| string(e, "kind").starts_with("step:")).count();
        (events.len(), steps, array(&list, "summaries").len())
    };
    let before = [("root", 10, 6), ("a", 8, 4), ("a1", 9, 5), ("b", 7, 2), ("b1", 9, 4), ("c", 62, 35)];
    for (branch, events, steps) in before {
        let (listed, listed_steps, summaries) = counts(branch);
        assert_eq!((listed, listed_steps), (events, steps), "{branch}: as schema 11 listed them");
        // Auto-consolidation counts the events besides the steps from the upgrade's counts: 30
        // are within the default threshold, the 31st is past it.
        for i in events - steps..30 {
            sb.ok(&[
                "recall",
                "append",
                branch,
                "--kind",
                "note",
                &format!("{branch} note {i} after the upgrade"),
            ]);
        }
        assert_eq!(counts(branch), (30 + steps, steps, summaries), "{branch}: at the threshold");
        sb.ok(&["recall", "append", branch, "--kind", "note", "past it"]);
        // Consolidated: the newest 20 stay (their summaries depend on the kinds consolidated
        // and on the summaries they fold in).
        let (listed, listed_steps, _) = counts(branch);
        assert_eq!((listed, listed_steps), (20 + steps, steps), "{branch}: past it");
    }
}

#[test]
fn upgraded_search_index_takes_only_the_new_records_in_its_batches() {
    // Schema 11's memctl indexed every record as it wrote it: the upgrade notes that the index
    // holds them all, and the batches that follow index only the records written after it.
    let sb = Sandbox::new();
    let db = sb.file("memory.sqlite");
    std::fs::copy(fixture("schema_v11.sqlite"), &db).unwrap();
    let found = |args: &[&str], env: &[(&str, &str)]| -> Vec<i64> {
        let hits = sb.json_env(&[&["archival", "search"][..], args].concat(), env);
        array(&hits, "results").iter().map(|r| int(r, "id")).collect()
    };
    let fallback = [("MEMCTL_SEARCH__FTS", "off")];
    assert_eq!(found(&["c", "evicted consolidated"], &[]), found(&["c", "evicted consolidated"], &fallback));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let until = || -> i64 {
        conn.query_row("SELECT value FROM meta WHERE key = 'fts_indexed_until'", [], |r| r.get(0)).unwrap()
    };
    assert_eq!(until(), 232, "the newest record schema 11 wrote (and indexed)");
    // Batches of two: five new records, four of them indexed in two batches, one past the end.
    for i in 0..5 {
        let add = ["archival", "add", "c", &format!("evicted again {i}")];
        sb.run_env(&add, &[("MEMCTL_SEARCH__FTS_BATCH", "2")]).success();
    }
    assert!(until() > 232);
    conn.execute("INSERT INTO archival_fts(archival_fts) VALUES ('integrity-check')", []).unwrap();
    let (fts, keywords) =
        (found(&["c", "evicted", "-k", "10"], &[]), found(&["c", "evicted", "-k", "10"], &fallback));
    assert_eq!(fts.len(), 6, "the upgraded record and the five new ones");
    assert_eq!(fts, keywords);
}

#[test]
fn upgraded_records_are_measured_in_characters_as_a_write_measures_them() {
    // The schema-1 fixture with, in g2 (bid 5), a delete of record 35 and a record of
    // characters of two to four bytes around a NUL character, where SQLite's length() stops.
    let sb = Sandbox::new();
    let db = sb.file("memory.sqlite");
    std::fs::copy(fixture("schema_v1.sqlite"), &db).unwrap();
    let text = "na\u{ef}ve\u{0}caf\u{e9} \u{2713} \u{1f680}";
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "INSERT INTO archival(seq, record_id, branch, text, tags, text_hash, created_at)
         VALUES (47, 35, 5, NULL, '[]', NULL, 0), (48, 48, 5, ?1, '[]', NULL, 0)",
        [text],
    )
    .unwrap();
    conn.execute("UPDATE meta SET value = 49 WHERE key = 'next_seq'", []).unwrap();
    drop(conn);
    // The upgrade measured every version as a write does: pressure counts what the view shows.
    let pressure = sb.json(&["pressure", "g2"]);
    let view = sb.json(&["read", "--all", "g2"]);
    let records = array(&view, "archival");
    let shown: usize = records.iter().map(|r| string(r, "text").chars().count()).sum();
    assert_eq!(records.len(), 3, "records 15, 41 and 48; 35 deleted");
    assert_eq!(pressure["archival"], json!({"count": 3, "chars": shown}));
    assert_eq!(shown, 62 + 64 + text.chars().count());
    // Stored: each version's characters, NULL for the delete alone.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(stored("SELECT chars FROM archival WHERE seq = 48"), 14);
    assert_eq!(stored("SELECT count(*) FROM archival WHERE (chars IS NULL) != (text IS NULL)"), 0);
    assert_eq!(stored("SELECT count(*) FROM archival WHERE chars IS NULL"), 1);
}

#[test]
fn upgraded_search_index_holds_no_deleted_versions() {
    // A schema-1 database with a delete: record 35 deleted in g2 (bid 5) at seq 47.
    let sb = Sandbox::new();
    let db = fixture_with_a_delete(&sb, "schema_v1.sqlite", Delete { seq: 47, record: 35, bid: 5 });
    let hits = sb.json(&["archival", "search", "g2", "consolidated"]);
    assert_eq!(array(&hits, "results").iter().map(|r| int(r, "id")).collect::<Vec<_>>(), vec![41]);
    // The upgrade indexed what a write indexes: versions with text, none for g2's delete.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let entries = |bid: i64| -> i64 {
        let phrase = format!("branch: \"{bid}\"");
        conn.query_row("SELECT count(*) FROM archival_fts WHERE archival_fts MATCH ?1", [phrase], |r| {
            r.get(0)
        })
        .unwrap()
    };
    assert_eq!((entries(1), entries(2), entries(5)), (1, 2, 0));
    assert_eq!(lengths_and_indexed_versions(&conn), (3, 3), "the lengths of those three alone");
}

#[test]
fn upgraded_lengths_are_those_of_the_indexed_versions() {
    // Schema 15 kept a length for every version; from schema 16 only for those the index holds,
    // so the upgrade drops the delete's. Schema 11's memctl indexed every record it wrote.
    let sb = Sandbox::new();
    let db = fixture_with_a_delete(&sb, "schema_v11.sqlite", Delete { seq: 233, record: 188, bid: 6 });
    sb.ok(&["branch", "list"]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    assert_eq!(lengths_and_indexed_versions(&conn), (5, 5));
    let hits = sb.json(&["archival", "search", "c", "consolidated"]);
    assert!(array(&hits, "results").iter().all(|r| int(r, "id") != 188), "the deleted record");
}

#[test]
fn upgraded_lengths_leave_out_the_versions_past_the_index() {
    // Schema 15 kept a length for every version, those past the index's end too (fewer than a
    // batch): the upgrade drops theirs, which the next batch writes.
    let sb = Sandbox::new();
    std::fs::copy(fixture("schema_v15.sqlite"), sb.file("memory.sqlite")).unwrap();
    let conn = rusqlite::Connection::open(sb.file("memory.sqlite")).unwrap();
    assert_eq!(lengths_and_indexed_versions(&conn), (3, 2), "as schema 15 left them");
    // The upgrade, then a batch of the third record and a fourth.
    let batch = [("MEMCTL_SEARCH__FTS_BATCH", "2")];
    sb.run_env(&["archival", "add", "root", "tiling note 3"], &batch).success();
    assert_eq!(lengths_and_indexed_versions(&conn), (4, 4));
    let hits = sb.json(&["archival", "search", "root", "tiling", "-k", "10"]);
    assert_eq!(array(&hits, "results").len(), 4);
}

/// A delete version written by hand: record `record` deleted in branch `bid` at seq `seq`.
struct Delete {
    seq: i64,
    record: i64,
    bid: i64,
}

/// A copy of fixture `name` as the sandbox's database, with `delete` added (the next seq after
/// it), as the memctl that wrote the fixture would have written it; the database's path.
fn fixture_with_a_delete(sb: &Sandbox, name: &str, delete: Delete) -> std::path::PathBuf {
    let db = sb.file("memory.sqlite");
    std::fs::copy(fixture(name), &db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "INSERT INTO archival(seq, record_id, branch, text, tags, text_hash, created_at)
         VALUES (?1, ?2, ?3, NULL, '[]', NULL, 0)",
        [delete.seq, delete.record, delete.bid],
    )
    .unwrap();
    conn.execute("UPDATE meta SET value = ?1 WHERE key = 'next_seq'", [delete.seq + 1]).unwrap();
    db
}

/// How many rows `archival_lengths` holds, and how many of them are the branch and length of
/// a version the FTS5 index holds (those with text up to its end).
fn lengths_and_indexed_versions(conn: &rusqlite::Connection) -> (i64, i64) {
    conn.query_row(
        "SELECT (SELECT count(*) FROM archival_lengths),
                (SELECT count(*) FROM archival_lengths l JOIN archival a USING (seq, branch, tokens)
                 WHERE a.text IS NOT NULL
                   AND a.seq <= (SELECT value FROM meta WHERE key = 'fts_indexed_until'))",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

#[test]
fn missing_database_is_exit_3_with_a_hint() {
    let sb = Sandbox::new();
    let text = sb.run(&["branch", "list"]).text_error(3);
    assert!(text.stderr.contains("hint: ") && text.stderr.contains("memctl init"), "{}", text.transcript());
    snap!("errors_missing_db_text", &text);
    let json = sb.run(&["--json", "--db", "elsewhere.sqlite", "core", "get", "root"]);
    snap!("errors_missing_db_json", &json);
    let message = json.json_error(3, "not_found");
    assert!(message.contains("elsewhere.sqlite"), "{message}");
    assert!(!sb.file("memory.sqlite").exists() && !sb.file("elsewhere.sqlite").exists(), "nothing created");
}

#[test]
fn usage_errors_are_exit_2() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let cases: &[(&str, &[&str])] = &[
        ("unknown_command", &["bogus"]),
        ("missing_arguments", &["core", "set", "root"]),
        ("importance_out_of_range", &["core", "set", "root", "k", "v", "--importance", "9"]),
        ("evict_without_selector", &["recall", "evict", "root"]),
        ("conflicting_flags", &["archival", "update", "root", "1", "--tag", "a", "--clear-tags"]),
        ("not_a_number", &["archival", "get", "root", "first"]),
        ("new_root_without_id", &["fork", "-"]),
    ];
    for (name, args) in cases {
        // Text: clap's message on stderr, nothing on stdout.
        let text = sb.run(args).exit(2);
        assert_eq!(text.stdout, "", "{}", text.transcript());
        assert!(!text.stderr.is_empty());
        snap!(&format!("errors_usage_{name}_text"), &text);
        // JSON: the error object on stderr, wherever --json is on the line.
        let json = sb.run(&cat(&["--json"], args));
        json.clone().json_error(2, "usage");
        snap!(&format!("errors_usage_{name}_json"), &json);
        sb.run(&cat(args, &["--json"])).json_error(2, "usage");
    }
    // A count of zero is refused, as `apply` refuses it.
    for args in [
        &["recall", "search", "root", "x", "-k", "0"][..],
        &["archival", "search", "root", "x", "-k", "0"],
        &["recall", "evict", "root", "--oldest", "0"],
        &["log", "-n", "0"],
    ] {
        let refused = sb.run(args).exit(2);
        assert!(refused.stderr.contains("must be at least 1"), "{}", refused.transcript());
    }
    // The error of the binary itself (not clap's) follows §9 exactly.
    sb.run(&["fork", "-"]).text_error(2);
    assert_eq!(array(&sb.json(&["branch", "list"]), "branches").len(), 1);
}

#[test]
fn busy_database_is_exit_5() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    sb.ok(&["core", "set", "root", "k", "before"]);

    let conn = rusqlite::Connection::open(sb.file("memory.sqlite")).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let short_wait = [("MEMCTL_SQLITE__BUSY_TIMEOUT_MS", "200")];

    let started = Instant::now();
    let text = sb.run_env(&["core", "set", "root", "k", "during"], &short_wait).text_error(5);
    let waited = started.elapsed();
    snap!("errors_busy_text", &text);
    assert!(waited >= Duration::from_millis(150), "it waited for the lock ({waited:?})");
    assert!(waited < Duration::from_secs(10), "and gave up after busy_timeout ({waited:?})");
    let json = sb.exec(&["--json", "recall", "append", "root", "--kind", "note", "x"], None, &short_wait);
    snap!("errors_busy_json", &json);
    json.json_error(5, "busy");
    // Readers are not blocked by a writer (WAL).
    let read = sb.json_env(&["core", "get", "root", "k"], &short_wait);
    assert_eq!(field(&read, "core"), &json!({"k": "before"}));

    conn.execute_batch("ROLLBACK").unwrap();
    sb.run_env(&["core", "set", "root", "k", "after"], &short_wait).success();
    assert_eq!(field(&sb.json(&["core", "get", "root", "k"]), "core"), &json!({"k": "after"}));
}

// ---- --help ------------------------------------------------------------------------------------

/// The subcommands listed in the `Commands:` section of a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let Some((_, after)) = help.split_once("\nCommands:\n") else { return Vec::new() };
    after
        .lines()
        .take_while(|line| !line.trim().is_empty())
        // `  name  description`; wrapped descriptions are indented further
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Command groups whose own `--help` shows no example yet (their subcommands all do). Reported
/// as a CLI problem; the test fails if any other command lacks one.
const GROUPS_WITHOUT_EXAMPLES: &[&str] = &[];

/// `memctl completions SHELL` for the five shells clap_complete knows: a script that names
/// every top-level command.
#[test]
fn completions_for_every_shell() {
    let sb = Sandbox::new();
    let help = sb.run(&["--help"]).success();
    let commands = subcommands(&help.stdout);
    assert!(commands.len() > 20, "{commands:?}");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = sb.run(&["completions", shell]).success().stdout;
        for command in &commands {
            assert!(script.contains(command.as_str()), "{shell} completions lack {command}");
        }
    }
    sb.run(&["completions", "tcsh"]).exit(2);
}

#[test]
fn every_command_has_help_with_an_example() {
    let sb = Sandbox::new();
    let mut pending: Vec<Vec<String>> = vec![vec![]];
    let mut seen = Vec::new();
    let mut without_example = Vec::new();
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = sb.run(&args).success();
        assert_eq!(help.stderr, "", "{}", help.transcript());
        if !help.stdout.contains("Example") {
            without_example.push(path.join(" "));
        }
        for name in subcommands(&help.stdout) {
            let mut child = path.clone();
            child.push(name);
            pending.push(child);
        }
        seen.push(path.join(" "));
    }
    seen.sort();
    let expected = [
        "",
        "apply",
        "archival",
        "archival add",
        "archival delete",
        "archival get",
        "archival search",
        "archival update",
        "branch",
        "branch create",
        "branch list",
        "branch mark",
        "branch set-uid",
        "branch show",
        "compact",
        "completions",
        "consolidate",
        "context",
        "core",
        "core del",
        "core get",
        "core set",
        "diff",
        "export",
        "export html",
        "export jsonl",
        "export paper",
        "fork",
        "gc",
        "import",
        "import legacy",
        "init",
        "log",
        "man",
        "messages",
        "migrate",
        "path",
        "pressure",
        "promote",
        "prune",
        "quickstart",
        "read",
        "recall",
        "recall append",
        "recall evict",
        "recall list",
        "recall search",
        "reset",
        "step",
        "step add",
        "strip",
        "why",
    ];
    assert_eq!(seen, expected, "the command tree");
    // The reference documents every command.
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let reference = std::fs::read_to_string(docs).expect("docs/cli.md");
    for path in seen.iter().filter(|p| !p.is_empty()) {
        assert!(
            reference.contains(&format!("### `memctl {path}`")),
            "docs/cli.md has no section for `memctl {path}`"
        );
    }
    for path in &without_example {
        assert!(GROUPS_WITHOUT_EXAMPLES.contains(&path.as_str()), "`memctl {path} --help` shows no example");
    }
    if !without_example.is_empty() {
        eprintln!("note: command groups without an example in --help: {without_example:?}");
    }
    // Every command has a man page, generated from the same definitions.
    sb.ok(&["man", "--out", "man"]);
    let mut pages: Vec<String> = std::fs::read_dir(sb.file("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut wanted: Vec<String> = seen
        .iter()
        .map(|p| if p.is_empty() { "memctl.1".into() } else { format!("memctl-{}.1", p.replace(' ', "-")) })
        .collect();
    wanted.sort();
    assert_eq!(pages, wanted, "one man page per command");
    let page = std::fs::read_to_string(sb.file("man/memctl-branch-mark.1")).unwrap();
    assert!(page.starts_with(".ie") || page.contains(".TH memctl-branch-mark 1"), "{page}");
    assert!(page.contains("subtree"), "the page holds the command's options");
    // Examples keep their lines (no fill), a backslash shown as one.
    let page = std::fs::read_to_string(sb.file("man/memctl-core-set.1")).unwrap();
    let examples = page.split(".SH EXAMPLES\n.nf\n").nth(1).expect("an examples section, not filled");
    assert!(examples.starts_with("Examples:\n  memctl core set node-1 best_runtime_s 12.4"), "{page}");
    let page = std::fs::read_to_string(sb.file("man/memctl-strip.1")).unwrap();
    assert!(page.contains("(<\\e/memory_update>)"), "{page}");
    // A directory that cannot be made is invalid input naming it, not an internal error.
    std::fs::write(sb.file("taken"), "").unwrap();
    for args in [&["man", "--out", "taken"][..], &["quickstart", "--dir", "taken"]] {
        let refused = sb.run(args).text_error(1);
        assert!(refused.stderr.contains("cannot create directory taken"), "{}", refused.transcript());
    }
    // -h works too, and the version.
    sb.run(&["core", "set", "-h"]).success();
    let version = sb.run(&["--version"]).success();
    assert!(version.stdout.starts_with("memctl "), "{}", version.transcript());
}

// ---- configuration (§9.2) -----------------------------------------------------------------------

#[test]
fn core_max_chars_from_the_environment_changes_eviction() {
    let writes: &[&[&str]] = &[
        &["core", "set", "root", "pinned", "keep me", "--importance", "5"],
        &["core", "set", "root", "low", "expendable value", "--importance", "1"],
        &["core", "set", "root", "mid", "middle importance", "--importance", "3"],
    ];
    let last: &[&str] = &["core", "set", "root", "new", "a new thing to remember"];

    // Default budget (2000): nothing is evicted.
    let roomy = Sandbox::initialized();
    roomy.ok(&["branch", "create", "root"]);
    for args in writes {
        roomy.ok(args);
    }
    assert!(strings(&roomy.json(last), "evicted").is_empty());
    assert_eq!(object(&roomy.json(&["core", "get", "root"]), "core").len(), 4);

    // core_max_chars = 60: the least important, then oldest, keys go to archival; pinned stays.
    let tight = Sandbox::initialized();
    let budget = [("MEMCTL_CORE_MAX_CHARS", "60")];
    tight.ok(&["branch", "create", "root"]);
    for args in writes {
        tight.run_env(args, &budget).success();
    }
    let evicting = tight.run_env(last, &budget).success();
    snap!("config_core_max_chars_evicts_text", &evicting);
    assert!(evicting.stdout.contains("low, mid"), "{}", evicting.transcript());
    let core = tight.json(&["core", "get", "root"]);
    let keys: Vec<&String> = object(&core, "core").keys().collect();
    assert_eq!(keys.len(), 2);
    assert!(object(&core, "core").contains_key("pinned") && object(&core, "core").contains_key("new"));
    let evicted = tight.run(&["archival", "search", "root", "--tag", "CORE_EVICT"]).success();
    snap!("config_core_max_chars_archived_text", &evicted);
    let records = tight.json(&["archival", "search", "root", "--tag", "CORE_EVICT"]);
    let texts: BTreeSet<&str> = array(&records, "results").iter().map(|r| string(r, "text")).collect();
    assert_eq!(
        texts,
        BTreeSet::from(["Core evicted: low\nexpendable value", "Core evicted: mid\nmiddle importance"])
    );

    // A value larger than the whole budget: archival keeps it in full, core a head naming it.
    let big = "x".repeat(100);
    let oversize = tight.exec(&["--json", "core", "set", "root", "big", &big], None, &budget).success();
    snap!("config_core_max_chars_oversize_json", &oversize);
    let oversize = tight.run_env(&["core", "set", "root", "big2", &big], &budget).success();
    snap!("config_core_max_chars_oversize_text", &oversize);
    snap!(
        "config_core_max_chars_after_oversize_text",
        &tight.run_env(&["core", "get", "root"], &budget).success(),
    );
}

#[test]
fn unknown_config_key_is_exit_1_naming_it() {
    let sb = Sandbox::initialized();
    std::fs::write(sb.file("bad.toml"), "core_max_charz = 5\n").unwrap();
    let text = sb.run(&["--config", "bad.toml", "branch", "list"]).text_error(1);
    assert!(text.stderr.contains("core_max_charz"), "{}", text.transcript());
    snap!("config_unknown_key_text", &text);
    let json = sb.run(&["--json", "--config", "bad.toml", "branch", "list"]);
    snap!("config_unknown_key_json", &json);
    let message = json.json_error(1, "invalid_input");
    assert!(message.contains("core_max_charz"), "{message}");

    std::fs::write(sb.file("nested.toml"), "[search]\nftz = \"off\"\n").unwrap();
    let nested = sb.run(&["--config", "nested.toml", "branch", "list"]).text_error(1);
    assert!(nested.stderr.contains("ftz"), "{}", nested.transcript());
    let env = sb.run_env(&["branch", "list"], &[("MEMCTL_CORE_MAX_CHARZ", "5")]).text_error(1);
    assert!(env.stderr.contains("MEMCTL_CORE_MAX_CHARZ") && env.stderr.contains("core_max_charz"));
    snap!("config_unknown_env_key_text", &env);
    // Values that parse but mean nothing are refused when loaded, naming where they came from.
    for (name, value, says) in [
        ("MEMCTL_RECALL_MAX_EVENTS", "0", "recall_max_events must be at least 1"),
        ("MEMCTL_RECALL_CONSOLIDATION_THRESHOLD", "nan", "recall_consolidation_threshold"),
        ("MEMCTL_PRESSURE_THRESHOLDS__HIGH", "0.5", "medium <= high <= critical"),
        ("MEMCTL_CONVERSATION__ENCODING", "gpt2", "unknown token encoding \"gpt2\""),
        ("MEMCTL_CORE_MAX_CHARS", "0", "core_max_chars must be at least 1"),
        ("MEMCTL_ARCHIVAL_MAX_CHARS", "0", "archival_max_chars must be at least 1"),
        ("MEMCTL_MEMORY_BUDGET_CHARS", "0", "memory_budget_chars must be at least 1"),
        ("MEMCTL_SUMMARIZER__TIMEOUT_S", "0", "summarizer.timeout_s must be at least 1"),
    ] {
        let refused = sb.run_env(&["branch", "list"], &[(name, value)]).text_error(1);
        assert!(refused.stderr.contains(name) && refused.stderr.contains(says), "{}", refused.transcript());
    }
    // A file's errors name their line; an empty db_path is none of the defaults.
    for (file, says) in [
        ("\n[search]\nfts_batch = \"x\"\n", "line 3, `fts_batch = \"x\"`: invalid type"),
        ("[search]\n[search]\n", "is not valid TOML: line 2, `[search]`: duplicate key"),
        ("db_path = \"\"\n", "db_path is empty"),
    ] {
        std::fs::write(sb.file("wrong.toml"), file).unwrap();
        let refused = sb.run(&["--config", "wrong.toml", "branch", "list"]).text_error(1);
        assert!(refused.stderr.contains(says), "{}", refused.transcript());
    }
    // Set but empty is unset; the bench's and the Python client's variables are not keys.
    let set_aside = [("MEMCTL_CORE_MAX_CHARS", ""), ("MEMCTL_BENCH_LEGACY", "/x"), ("MEMCTL_BIN", "/y")];
    sb.run_env(&["branch", "list"], &set_aside).success();
    // MEMCTL_CONFIG names the file too, and ./memctl.toml is read when present.
    sb.run_env(&["branch", "list"], &[("MEMCTL_CONFIG", "bad.toml")]).text_error(1);
    std::fs::copy(sb.file("bad.toml"), sb.file("memctl.toml")).unwrap();
    let local = sb.run(&["branch", "list"]).text_error(1);
    assert!(local.stderr.contains("memctl.toml") && local.stderr.contains("core_max_charz"));
}

#[test]
fn fts_off_finds_the_same_records() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    let records = [
        ("GPU offload failed: CUDA out of memory", "negative_result"),
        ("Tiling helped the CPU version a lot", "result"),
        ("Memory bandwidth bound kernel at 11.8 GB/s", "result"),
        ("NOT a \"syntax\" error: -O3 AND OR NEAR", "note"),
    ];
    for (text, tag) in records {
        sb.ok(&["archival", "add", "root", text, "--tag", tag]);
        sb.ok(&["recall", "append", "root", "--kind", tag, text]);
    }
    let off = [("MEMCTL_SEARCH__FTS", "off")];
    let init_off = sb.json_env(&["init"], &off);
    assert!(!boolean(&init_off, "fts5"), "search.fts = off is reported by init");

    let ids = |value: &Value, list: &str| -> BTreeSet<i64> {
        array(value, list).iter().map(|r| int(r, "id")).collect()
    };
    for query in
        ["out of memory", "memory", "tiling CPU", "syntax -O3", "what's \"NOT\" AND: this?", "absent words"]
    {
        let fts = sb.json(&["archival", "search", "root", query, "-k", "10"]);
        let keyword = sb.json_env(&["archival", "search", "root", query, "-k", "10"], &off);
        array(&keyword, "results").iter().for_each(|r| check_record(r, true));
        assert_eq!(ids(&fts, "results"), ids(&keyword, "results"), "archival search {query:?}");
        let fts = sb.json(&["recall", "search", "root", query, "-k", "10"]);
        let keyword = sb.json_env(&["recall", "search", "root", query, "-k", "10"], &off);
        assert_eq!(ids(&fts, "events"), ids(&keyword, "events"), "recall search {query:?}");
    }
    let tagged = sb.json_env(&["archival", "search", "root", "memory", "--tag", "result"], &off);
    assert_eq!(array(&tagged, "results").len(), 1);
    let memory = sb.json_env(&["archival", "search", "root", "out of memory"], &off);
    assert_eq!(string(&array(&memory, "results")[0], "text"), "GPU offload failed: CUDA out of memory");
    snap!(
        "config_fts_off_search_text",
        &sb.run_env(&["archival", "search", "root", "out of memory"], &off).success(),
    );
}

// ---- concurrency (§10) --------------------------------------------------------------------------

#[test]
fn concurrent_writers_lose_nothing() {
    for db in backends("concurrent_writers_lose_nothing") {
        // Processes at once: 16 against a server, as many as the issue's test asks for.
        let workers = match db {
            Db::Sqlite => 8,
            Db::Postgres(_) => 16,
        };
        concurrent_writers_on(&db, workers);
    }
}

pub(crate) fn concurrent_writers_on(db: &Db, workers: usize) {
    const CALLS: usize = 200;
    const BRANCHES: [&str; 3] = ["c0", "c1", "c2"];
    // A budget large enough for every key, and no consolidation: all rows stay visible.
    let sb = Sandbox::on(db, "core_max_chars = 1000000\nauto_consolidate = false\n");
    sb.ok(&["init"]);
    sb.ok(&["branch", "create", "root"]);
    for branch in BRANCHES {
        sb.ok(&["fork", "root", branch]);
    }

    let started = Instant::now();
    let barrier = std::sync::Barrier::new(workers);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let (sb, barrier) = (&sb, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let mut failures = Vec::new();
                    for call in 0..CALLS {
                        let branch = BRANCHES[(worker + call) % BRANCHES.len()];
                        let (text, key) = (format!("w{worker} c{call}"), format!("w{worker}_c{call}"));
                        let outcome = if call % 2 == 0 {
                            sb.run(&["-q", "recall", "append", branch, "--kind", "note", &text])
                        } else {
                            sb.run(&["-q", "core", "set", branch, &key, &text])
                        };
                        if outcome.code != 0 {
                            failures.push(outcome.transcript());
                        }
                    }
                    failures
                })
            })
            .collect();
        handles.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();
    eprintln!(
        "{}: {} memctl calls from {workers} processes at once: {elapsed:?}",
        db.name(),
        workers * CALLS
    );
    assert!(failures.is_empty(), "{} calls failed, e.g.:\n{}", failures.len(), failures[0]);

    for (index, branch) in BRANCHES.iter().enumerate() {
        let mut events = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for worker in 0..workers {
            for call in (0..CALLS).filter(|call| (worker + call) % BRANCHES.len() == index) {
                if call % 2 == 0 {
                    events.insert(format!("w{worker} c{call}"));
                } else {
                    keys.insert(format!("w{worker}_c{call}"));
                }
            }
        }
        let list = sb.json(&["recall", "list", branch, "--limit", "100000"]);
        let listed = event_texts(&list);
        assert_eq!(listed.len(), events.len(), "{branch}: every event once");
        assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), events, "{branch}: events");
        let core = sb.json(&["core", "get", branch]);
        let core = object(&core, "core");
        assert_eq!(core.keys().cloned().collect::<BTreeSet<_>>(), keys, "{branch}: core keys");
        for (key, value) in core {
            assert_eq!(value.as_str().unwrap(), key.replace('_', " "), "{branch}: value of {key}");
        }
    }
    let ops = sb.json(&["log"]);
    assert_eq!(array(&ops, "ops").len(), 1 + BRANCHES.len() + workers * CALLS, "one journal row per call");
}

// ---- the README's Python snippet ----------------------------------------------------------------

#[test]
fn readme_python_snippet_runs() {
    let sb = Sandbox::new();
    let Some((snippet, output)) = run_python_block(&sb, "README.md") else { return };
    let db = sb.file("memory.sqlite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the README snippet failed:\n{stdout}\n{stderr}");
    let expected = [
        "tune the stencil ['runtime 12.4 s with -O3']",
        "['result']",
        "not_found 3 unknown branch 'no-such-node'",
    ];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected, "stderr:\n{stderr}");
    // The snippet's comment shows the same error line.
    assert!(snippet.contains(&format!("# {}", expected[2])), "the README's comment is out of date");
    assert!(db.is_file(), "the snippet used MEMCTL_DB");
}

// ---- progress on a terminal --------------------------------------------------------------------

/// Long work shows a progress bar when stderr is a terminal (here a pseudo-terminal made by
/// util-linux's `script`), and nothing with --quiet, --json or when stderr is not a terminal.
#[test]
fn progress_bars_only_on_a_terminal() {
    if std::process::Command::new("script").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no `script` (util-linux): CI must check the progress bars"
        );
        eprintln!("note: `script` not found, skipping the progress bar check");
        return;
    }
    let sb = Sandbox::new();
    std::fs::copy(fixture("legacy/search_run/memory.sqlite"), sb.file("legacy.sqlite")).unwrap();
    let on_terminal = |args: &str| -> String {
        let command = format!("{BIN} --db {} {args}", sb.file("memory.sqlite").display());
        let out = std::process::Command::new("script")
            .args(["-q", "-e", "-c", &command, "/dev/null"])
            .current_dir(sb.path())
            .env("MEMCTL_NOW", NOW)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args}: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let import = on_terminal("import legacy legacy.sqlite");
    assert!(import.contains("importing branches") && import.contains("/60 "), "{import}");
    let html = on_terminal("export html --out page.html");
    assert!(html.contains("reading the layers"), "{html}");
    assert!(!on_terminal("--quiet export html --out page.html").contains("reading the layers"));
    assert!(!on_terminal("--json export html --out page.html").contains("reading the layers"));
    let piped = sb.run(&["export", "html", "--out", "page.html"]).success();
    assert!(!piped.stderr.contains("reading the layers"), "{}", piped.stderr);
    let migrate =
        on_terminal(&format!("migrate --from {} --to copy.sqlite", sb.file("memory.sqlite").display()));
    assert!(migrate.contains("copying rows") && migrate.contains("verifying views"), "{migrate}");
    let piped = sb.run(&["migrate", "--from", "memory.sqlite", "--to", "copy2.sqlite"]).success();
    assert!(!piped.stderr.contains("copying rows"), "{}", piped.stderr);
    // The copy is whole in its file, to be taken away without its WAL.
    assert_eq!(std::fs::metadata(sb.file("copy2.sqlite-wal")).map_or(0, |m| m.len()), 0);
    std::fs::copy(sb.file("copy2.sqlite"), sb.file("alone.sqlite")).unwrap();
    assert_eq!(
        sb.json(&["--db", "alone.sqlite", "branch", "list"]),
        sb.json(&["--db", "memory.sqlite", "branch", "list"])
    );
    // A missing source is named by --from, not by --db.
    let missing = sb.run(&["migrate", "--from", "gone.sqlite", "--to", "copy3.sqlite"]).text_error(3);
    assert!(missing.stderr.contains("hint: --from names the database"), "{}", missing.transcript());
    assert!(!sb.file("copy3.sqlite").exists());
}
