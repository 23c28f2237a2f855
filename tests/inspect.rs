//! `memctl diff` through the real binary: a fixed tree (clock pinned) snapshotted in text and
//! JSON, and for every pair of its branches the diff checked against the set differences of the
//! two `read --all` views.

use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// root ─┬─ a ── a1
///       └─ b        (root writes between the two forks, so b sees more of it than a)
fn tree(db: &Db) -> Sandbox {
    let sb = Sandbox::initialized_on(db);
    let steps: &[&[&str]] = &[
        &["branch", "create", "root"],
        &["core", "set", "root", "goal", "tune the stencil"],
        &["core", "set", "root", "compiler", "gcc 13"],
        &["recall", "append", "root", "--kind", "note", "baseline 20.1 s"],
        &["archival", "add", "root", "tiling 32x32 is the baseline", "--tag", "result"],
        &["fork", "root", "a"],
        &["core", "set", "root", "late", "written after a was forked"],
        &["recall", "append", "root", "--kind", "note", "root after the fork of a"],
        &["fork", "root", "b"],
        &["core", "set", "a", "goal", "tune the GPU kernel"],
        &["core", "del", "a", "compiler"],
        &["recall", "append", "a", "--kind", "metric", "runtime 12.4 s"],
        &["fork", "a", "a1"],
        &["recall", "append", "a1", "--kind", "metric", "runtime 11.0 s"],
        &["core", "set", "b", "only_b", "b's own key"],
        &["recall", "append", "b", "--kind", "metric", "runtime 15.2 s"],
    ];
    for step in steps {
        sb.ok(step);
    }
    let read = sb.json(&["read", "root", "--scope", "archival"]);
    let id = int(&array(&read, "archival")[0], "id").to_string();
    sb.ok(&["archival", "update", "a", &id, "--text", "tiling 64x64 beat 32x32 by 18%"]);
    sb.ok(&["archival", "add", "b", "b tried loop unrolling"]);
    sb
}

#[test]
fn diff_text_and_json() {
    for db in backends("diff_text_and_json") {
        diff_text_and_json_on(&tree(&db));
    }
}

fn diff_text_and_json_on(sb: &Sandbox) {
    snap!("diff_a_b_text", &sb.run(&["diff", "a", "b"]).success());
    snap!("diff_a_b_json", &sb.run(&["--json", "diff", "a", "b"]).success());
    snap!("diff_core_only_text", &sb.run(&["diff", "a1", "b", "--layer", "core"]).success());
    snap!("diff_parent_child_text", &sb.run(&["diff", "a", "a1"]).success());
    snap!("diff_same_text", &sb.run(&["diff", "a", "a"]).success());
    snap!("diff_unknown_branch_text", &sb.run(&["diff", "a", "nope"]).exit(3));
    snap!("diff_unknown_layer_text", &sb.run(&["diff", "a", "b", "--layer", "events"]).exit(2));
    let same = sb.json(&["diff", "b", "b"]);
    for layer in ["recall", "summaries"] {
        assert!(
            array(field(&same, layer), "only_a").is_empty()
                && array(field(&same, layer), "only_b").is_empty()
        );
    }
}

fn ids(values: &[Value], key: &str) -> BTreeSet<String> {
    values.iter().map(|v| field(v, key).to_string()).collect()
}

/// For every ordered pair (A, B): the diff's sides are exactly the set differences of the two
/// views, and a changed key is one both see with different visible rows.
#[test]
fn diff_is_the_difference_of_the_views() {
    for db in backends("diff_is_the_difference_of_the_views") {
        diff_is_the_difference_of_the_views_on(&tree(&db));
    }
}

fn diff_is_the_difference_of_the_views_on(sb: &Sandbox) {
    let branches = ["root", "a", "a1", "b"];
    let views: Vec<Value> = branches.iter().map(|b| sb.json(&["read", b, "--all"])).collect();
    let explained: Vec<Value> = branches.iter().map(|b| sb.json(&["core", "get", b, "--explain"])).collect();
    for (i, a) in branches.iter().enumerate() {
        for (j, b) in branches.iter().enumerate() {
            let diff = sb.json(&["diff", a, b]);
            let events = |k: usize| ids(array(field(&views[k], "recall"), "events"), "id");
            let (ea, eb) = (events(i), events(j));
            assert_eq!(ids(array(field(&diff, "recall"), "only_a"), "id"), &ea - &eb, "{a} {b}");
            assert_eq!(ids(array(field(&diff, "recall"), "only_b"), "id"), &eb - &ea, "{a} {b}");
            let records = |k: usize| ids(array(&views[k], "archival"), "id");
            let (ra, rb) = (records(i), records(j));
            assert_eq!(ids(array(field(&diff, "archival"), "only_a"), "id"), &ra - &rb, "{a} {b}");
            assert_eq!(ids(array(field(&diff, "archival"), "only_b"), "id"), &rb - &ra, "{a} {b}");
            let keys = |k: usize| -> BTreeSet<String> { object(&views[k], "core").keys().cloned().collect() };
            let (ka, kb) = (keys(i), keys(j));
            let core = field(&diff, "core");
            assert_eq!(ids(array(core, "only_a"), "key"), quoted(&ka - &kb), "{a} {b}");
            assert_eq!(ids(array(core, "only_b"), "key"), quoted(&kb - &ka), "{a} {b}");
            // Changed: another value, importance or TTL, whoever wrote it (the same written
            // twice is none).
            let entry = |k: usize, key: &str| {
                let e = field(field(&explained[k], "core"), key);
                (e["value"].clone(), e["importance"].clone(), e["ttl"].clone())
            };
            let changed: BTreeSet<String> =
                ka.intersection(&kb).filter(|key| entry(i, key) != entry(j, key)).cloned().collect();
            let reported: BTreeSet<String> =
                array(core, "changed").iter().map(|c| string(field(c, "a"), "key").to_string()).collect();
            assert_eq!(reported, changed, "{a} {b}");
            if a == b {
                assert!(array(core, "changed").is_empty());
            }
        }
    }
}

#[test]
fn diff_shows_no_change_where_both_wrote_the_same() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "r"]);
    let record = int(&sb.json(&["archival", "add", "r", "first text"]), "id").to_string();
    for child in ["c1", "c2"] {
        sb.ok(&["fork", "r", child]);
        sb.ok(&["core", "set", child, "status", "ok"]);
        sb.ok(&["archival", "update", child, &record, "--text", "same text"]);
    }
    let diff = sb.json(&["diff", "c1", "c2"]);
    assert!(array(field(&diff, "core"), "changed").is_empty(), "{diff}");
    assert!(array(field(&diff, "archival"), "changed").is_empty(), "{diff}");
    assert!(sb.ok(&["diff", "c1", "c2"]).contains("No differences: c1 and c2 see the same memory."));
    // The same value pinned in one: a change, which the text says.
    sb.ok(&["core", "set", "c2", "status", "ok", "--importance", "5"]);
    let diff = sb.json(&["diff", "c1", "c2"]);
    assert_eq!(array(field(&diff, "core"), "changed").len(), 1, "{diff}");
    assert!(sb.ok(&["diff", "c1", "c2"]).contains("importance 3 → 5"));
}

/// To a reader tags are a set: an update that gives a record's tags again in another order
/// writes nothing, and `diff` shows no change; new tags are a change, and the text diff shows
/// them, as they are all that changed. (The duplicate checks of add and append take tags in the
/// order given: rows already stored carry a hash of that order.)
#[test]
fn tags_in_another_order_are_the_same_tags() {
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "r"]);
    let first = sb.json(&["archival", "add", "r", "rec", "--tag", "a", "--tag", "b"]);
    let record = int(&first, "id").to_string();
    sb.ok(&["fork", "r", "c"]);
    let same = sb.json(&["archival", "update", "c", &record, "--tag", "b", "--tag", "a"]);
    assert_eq!(same, json!({"id": int(&first, "id"), "seq": int(&first, "id"), "unchanged": true}));
    assert!(array(field(&sb.json(&["diff", "r", "c"]), "archival"), "changed").is_empty());
    // A new text with the tags in another order: the text changed, the tags did not.
    let changed =
        sb.json(&["archival", "update", "c", &record, "--text", "rec2", "--tag", "b", "--tag", "a"]);
    let text = sb.ok(&["diff", "r", "c"]);
    let expected = format!("seq {} by r: rec → seq {} by c: rec2", int(&first, "id"), int(&changed, "seq"));
    assert!(text.contains(&expected), "{text}");
    let changed = sb.json(&["archival", "update", "c", &record, "--tag", "c"]);
    assert!(!boolean(&changed, "unchanged"));
    let text = sb.ok(&["diff", "r", "c"]);
    let expected = format!("rec (tags: a, b) → seq {} by c: rec2 (tags: c)", int(&changed, "seq"));
    assert!(text.contains(&expected), "{text}");
}

fn quoted(keys: BTreeSet<String>) -> BTreeSet<String> {
    keys.into_iter().map(|k| Value::String(k).to_string()).collect()
}

#[test]
fn why_text_and_json() {
    for db in backends("why_text_and_json") {
        why_text_and_json_on(&tree(&db));
    }
}

fn why_text_and_json_on(sb: &Sandbox) {
    snap!("why_key_text", &sb.run(&["why", "a1", "goal"]).success());
    snap!("why_key_json", &sb.run(&["--json", "why", "a1", "goal"]).success());
    snap!("why_deleted_key_text", &sb.run(&["why", "a1", "compiler"]).success());
    snap!("why_after_fork_text", &sb.run(&["why", "a", "late"]).success());
    let read = sb.json(&["read", "root", "--scope", "archival"]);
    let record = int(&array(&read, "archival")[0], "id").to_string();
    snap!("why_record_text", &sb.run(&["why", "a1", "--record", &record]).success());
    let events = sb.json(&["recall", "list", "a", "-n", "10"]);
    let baseline = array(&events, "events").iter().find(|e| string(e, "text") == "baseline 20.1 s").unwrap();
    let event = int(baseline, "id").to_string();
    sb.ok(&["recall", "evict", "a", "--id", &event]);
    snap!("why_evicted_event_text", &sb.run(&["why", "a1", "--event", &event]).success());
    snap!("why_hidden_event_text", &sb.run(&["why", "a", "--event", &event]).success());
    snap!("why_event_json", &sb.run(&["--json", "why", "b", "--event", &event]).success());
}

/// A summary folded into a newer one still leads to it: `why` of an event the first names
/// says which summary of the view stands for it, on both backends (the folding is read through
/// the summaries' lists of what they fold in).
#[test]
fn why_follows_a_summary_into_the_one_that_folds_it_in() {
    for db in backends("why_follows_a_summary_into_the_one_that_folds_it_in") {
        let sb = Sandbox::on(&db, "recall_max_events = 2\nauto_consolidate = false\n");
        sb.ok(&["init"]);
        sb.ok(&["branch", "create", "root"]);
        let first = sb.json(&["recall", "append", "root", "--kind", "n", "ev 1"]);
        for text in ["ev 2", "ev 3", "ev 4"] {
            sb.ok(&["recall", "append", "root", "--kind", "n", text]);
        }
        sb.ok(&["fork", "root", "a"]);
        let older = ints(&sb.json(&["consolidate", "a"]), "summaries")[0];
        sb.ok(&["fork", "a", "a1"]);
        for text in ["ev 6", "ev 7"] {
            sb.ok(&["recall", "append", "a1", "--kind", "n", text]);
        }
        let newer = ints(&sb.json(&["consolidate", "a1"]), "summaries")[0];
        let event = int(&first, "id").to_string();
        let why = sb.json(&["why", "a1", "--event", &event]);
        assert!(string(&why, "reason").ends_with(&format!("summary #{newer} stands for it")), "{why}");
        let writes = array(&why, "writes");
        let status = |seq: i64| writes.iter().find(|w| int(w, "seq") == seq).map(|w| string(w, "status"));
        assert_eq!((status(older), status(newer)), (Some("folded"), Some("visible")), "{why}");
        // In the branch that wrote the first, that one.
        let why = sb.json(&["why", "a", "--event", &event]);
        assert!(string(&why, "reason").ends_with(&format!("summary #{older} stands for it")), "{why}");
    }
}

/// `why`'s text names each write's journal row with the phase and actor it was written under
/// (either, both or none), and a promoted row's origin with and without a note.
#[test]
fn why_names_phase_actor_and_origin() {
    for db in backends("why_names_phase_actor_and_origin") {
        let sb = Sandbox::initialized_on(&db);
        sb.ok(&["branch", "create", "root"]);
        sb.ok(&["--phase", "draft", "--actor", "worker-1", "core", "set", "root", "k", "1"]);
        sb.ok(&["--phase", "draft", "core", "set", "root", "k", "2"]);
        sb.ok(&["--actor", "worker-2", "core", "set", "root", "k", "3"]);
        sb.ok(&["fork", "root", "c"]);
        sb.ok(&["core", "set", "c", "k", "4"]);
        sb.ok(&["promote", "c", "root", "--core", "k", "--note", "the best"]);
        sb.ok(&["core", "set", "c", "k", "5"]);
        sb.ok(&["promote", "c", "root", "--core", "k"]);
        snap!("why_phase_actor_origin_text", &sb.run(&["why", "root", "k"]).success());
    }
}

#[test]
fn why_bad_input() {
    for db in backends("why_bad_input") {
        why_bad_input_on(&tree(&db));
    }
}

fn why_bad_input_on(sb: &Sandbox) {
    snap!("why_unknown_key_text", &sb.run(&["why", "a", "no_such_key"]).success());
    let unknown = sb.json(&["why", "a", "no_such_key"]);
    assert_eq!(string(&unknown, "verdict"), "never_written");
    assert!(array(&unknown, "writes").is_empty());
    snap!("why_unknown_record_text", &sb.run(&["why", "a", "--record", "99999"]).exit(3));
    snap!("why_unknown_event_json", &sb.run(&["--json", "why", "a", "--event", "99999"]).exit(3));
    snap!("why_unknown_branch_text", &sb.run(&["why", "nope", "goal"]).exit(3));
    snap!("why_no_subject_text", &sb.run(&["why", "a"]).exit(2));
    snap!("why_two_subjects_text", &sb.run(&["why", "a", "goal", "--record", "3"]).exit(2));
}

/// On every branch of the tree, `why` of every core key shows as visible exactly the write
/// `core get --explain` reports, and says "visible" exactly for the keys `read` shows.
#[test]
fn why_names_the_visible_writer() {
    for db in backends("why_names_the_visible_writer") {
        why_names_the_visible_writer_on(&tree(&db));
    }
}

fn why_names_the_visible_writer_on(sb: &Sandbox) {
    for b in ["root", "a", "a1", "b"] {
        let explained = sb.json(&["core", "get", b, "--explain"]);
        let core = object(&explained, "core");
        for key in ["goal", "compiler", "late", "only_b"] {
            let why = sb.json(&["why", b, key]);
            let shown: Vec<(String, i64)> = array(&why, "writes")
                .iter()
                .filter(|w| string(w, "status") == "visible")
                .map(|w| (string(w, "branch").to_string(), int(w, "seq")))
                .collect();
            let expected: Vec<(String, i64)> =
                core.get(key).map(|e| (string(e, "branch").to_string(), int(e, "seq"))).into_iter().collect();
            assert_eq!(shown, expected, "why {b} {key}");
            assert_eq!(string(&why, "verdict") == "visible", core.contains_key(key), "why {b} {key}");
        }
    }
}

#[test]
fn path_text_json_and_markdown() {
    for db in backends("path_text_json_and_markdown") {
        path_text_json_and_markdown_on(&tree(&db));
    }
}

fn path_text_json_and_markdown_on(sb: &Sandbox) {
    snap!("path_a1_text", &sb.run(&["path", "a1"]).success());
    snap!("path_a1_json", &sb.run(&["--json", "path", "a1"]).success());
    snap!("path_b_md", &sb.run(&["path", "b", "--format", "md"]).success());
    // The same JSON, byte for byte (keys sorted), however it is asked for: --json wins over
    // another format.
    let json = sb.ok(&["--json", "path", "a1"]);
    assert_eq!(sb.ok(&["path", "a1", "--format", "json"]), json);
    assert_eq!(sb.ok(&["--json", "path", "a1", "--format", "md"]), json);
    snap!("path_unknown_branch_text", &sb.run(&["path", "nope"]).exit(3));
}

/// On every branch, the nodes' deltas add up to its view: the events added less those
/// excluded are as many as `read`'s events, and the core writes marked shown are `core get
/// --explain`'s.
#[test]
fn path_deltas_add_up_to_the_view() {
    for db in backends("path_deltas_add_up_to_the_view") {
        path_deltas_add_up_to_the_view_on(&tree(&db));
    }
}

fn path_deltas_add_up_to_the_view_on(sb: &Sandbox) {
    for b in ["root", "a", "a1", "b"] {
        let report = sb.json(&["path", b]);
        let nodes = array(&report, "nodes");
        assert_eq!(string(field(nodes.last().unwrap(), "branch"), "id"), b);
        let view = sb.json(&["read", b, "--all"]);
        let added: i64 = nodes.iter().map(|n| int(field(n, "recall"), "added")).sum();
        let excluded: usize = nodes.iter().map(|n| array(field(n, "recall"), "excluded").len()).sum();
        let events = array(field(&view, "recall"), "events").len();
        assert_eq!(added as usize - excluded, events, "{b}");
        let shown: BTreeSet<(String, i64)> = nodes
            .iter()
            .flat_map(|n| {
                let writer = string(field(n, "branch"), "id").to_string();
                ["set", "overridden"]
                    .into_iter()
                    .flat_map(move |list| array(field(n, "core"), list).iter())
                    .filter(|w| boolean(w, "shown"))
                    .map(move |w| (writer.clone(), int(w, "seq")))
            })
            .collect();
        let explained = sb.json(&["core", "get", b, "--explain"]);
        let core: BTreeSet<(String, i64)> = object(&explained, "core")
            .values()
            .map(|e| (string(e, "branch").to_string(), int(e, "seq")))
            .collect();
        assert_eq!(shown, core, "{b}");
    }
}
