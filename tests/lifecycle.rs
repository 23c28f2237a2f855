//! The life of a search through the real binary: `branch mark`, `promote` and `gc`, snapshotted
//! on a fixed tree (clock pinned), their bad input, and gc while other processes write.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;

/// root ─┬─ good ── good-1
///       ├─ bad ─┬─ bad-1
///       │       └─ bad-2
///       └─ mixed ── mixed-1
fn tree(db: &Db) -> Sandbox {
    let sb = Sandbox::initialized_on(db);
    let steps: &[&[&str]] = &[
        &["branch", "create", "root"],
        &["core", "set", "root", "goal", "tune the stencil"],
        &["fork", "root", "good"],
        &["fork", "good", "good-1"],
        &["core", "set", "good-1", "best_tile", "64"],
        &["recall", "append", "good-1", "--kind", "error", "tile 128 overflows the L2 cache"],
        &["archival", "add", "good-1", "tiling 64x64 beat 32x32 by 18%", "--tag", "result"],
        &["fork", "root", "bad"],
        &["recall", "append", "bad", "--kind", "note", "bad took the GPU route"],
        &["archival", "add", "bad", "CUDA out of memory at 1024^3", "--tag", "negative_result"],
        &["fork", "bad", "bad-1"],
        &["core", "set", "bad-1", "flags", "-O3 -ffast-math"],
        &["fork", "bad", "bad-2"],
        &["fork", "root", "mixed"],
        &["fork", "mixed", "mixed-1"],
    ];
    for step in steps {
        sb.ok(step);
    }
    sb
}

fn ids(list: &Value) -> BTreeSet<String> {
    array(list, "branches").iter().map(|b| string(b, "id").to_string()).collect()
}

#[test]
fn mark_shows_in_list_show_and_paper() {
    for db in backends("mark_shows_in_list_show_and_paper") {
        mark_shows_in_list_show_and_paper_on(&tree(&db));
    }
}

fn mark_shows_in_list_show_and_paper_on(sb: &Sandbox) {
    snap!(
        "mark_text",
        &sb.run(&["branch", "mark", "bad", "dead", "--subtree", "--note", "GPU route failed"]).success(),
    );
    snap!("mark_json", &sb.run(&["--json", "branch", "mark", "good-1", "best", "--note", "1.9 s"]).success());
    sb.ok(&["branch", "mark", "mixed", "pruned"]);
    snap!("list_with_status_text", &sb.run(&["branch", "list"]).success());
    snap!("list_dead_text", &sb.run(&["branch", "list", "--status", "dead"]).success());
    let dead = sb.json(&["branch", "list", "--status", "dead"]);
    assert_eq!(ids(&dead), ["bad", "bad-1", "bad-2"].map(String::from).into());
    snap!("show_status_text", &sb.run(&["branch", "show", "bad-1"]).success());
    // The paper takes the one best branch when not told.
    let paper = sb.json(&["export", "paper", "--out", "paper"]);
    assert_eq!(string(&paper, "branch"), "good-1");
    // One branch is best: the one before becomes alive, and the paper takes the new one.
    snap!("mark_second_best_text", &sb.run(&["branch", "mark", "mixed-1", "best"]).success());
    let good = &sb.json(&["branch", "show", "good-1"])["branch"];
    assert_eq!((string(good, "status"), string(good, "status_note")), ("alive", "1.9 s"), "{good}");
    // Another root's tree is another search: its best stays.
    sb.ok(&["branch", "create", "other-run"]);
    sb.ok(&["branch", "mark", "other-run", "best"]);
    assert_eq!(string(&sb.json(&["branch", "show", "mixed-1"])["branch"], "status"), "best");
    let paper = sb.json(&["export", "paper", "--out", "paper", "--branch", "mixed-1"]);
    assert_eq!(string(&paper, "branch"), "mixed-1");
    sb.run(&["branch", "mark", "good", "best", "--subtree"]).text_error(2);
    // A subtree's mark leaves the best branch under it best, and gc keeps its path.
    let marked = sb.json(&["branch", "mark", "mixed", "dead", "--subtree"]);
    assert_eq!(
        (strings(&marked, "marked"), strings(&marked, "kept_best")),
        (vec!["mixed".to_string()], vec!["mixed-1".to_string()]),
        "{marked}"
    );
    let gc = sb.json(&["gc"]);
    assert!(!strings(&gc, "collected").contains(&"mixed".to_string()), "{gc}");
    let paper = sb.json(&["export", "paper", "--out", "paper", "--branch", "mixed-1"]);
    assert_eq!(string(&paper, "branch"), "mixed-1");
    // The paper's two files go to a directory: stdout is none.
    sb.run(&["export", "paper", "--out", "-"]).text_error(2);
    assert!(!sb.file("-").exists());
    // An empty note is none.
    assert_eq!(sb.json(&["branch", "mark", "good", "alive", "--note", " "])["note"], Value::Null);
    snap!("mark_unknown_status_text", &sb.run(&["branch", "mark", "bad", "zombie"]).exit(2));
    snap!("mark_unknown_branch_text", &sb.run(&["branch", "mark", "nope", "dead"]).exit(3));
    // The note is shown as stored: redacted.
    let secret =
        sb.json(&["branch", "mark", "mixed", "pruned", "--note", "api_key=sk-abcdefabcdefabcdefabcd"]);
    assert_eq!(string(&secret, "note"), "api_key=***", "{secret}");
}

#[test]
fn promote_reaches_the_target_and_later_forks() {
    for db in backends("promote_reaches_the_target_and_later_forks") {
        promote_reaches_the_target_and_later_forks_on(&tree(&db));
    }
}

fn promote_reaches_the_target_and_later_forks_on(sb: &Sandbox) {
    sb.ok(&["fork", "root", "before"]);
    let list = sb.json(&["recall", "list", "good-1"]);
    let event = int(&array(&list, "events")[0], "id").to_string();
    let read = sb.json(&["read", "good-1", "--scope", "archival"]);
    let record = int(&array(&read, "archival")[0], "id").to_string();
    let promote =
        ["promote", "good-1", "root", "--core", "best_tile", "--record", &record, "--event", &event];
    snap!("promote_text", &sb.run(&[&promote[..], &["--note", "every fork should know"]].concat()).success());
    snap!("promote_again_json", &sb.run(&[&["--json"], &promote[..]].concat()).success());
    sb.ok(&["fork", "root", "after"]);
    // root and forks made after see the copies; a fork made before does not.
    for (branch, sees) in [("root", true), ("after", true), ("before", false), ("bad", false)] {
        let view = sb.json(&["read", branch, "--all"]);
        let core = object(&view, "core");
        assert_eq!(core.get("best_tile").and_then(Value::as_str) == Some("64"), sees, "{branch}: core");
        let records = array(&view, "archival").iter().any(|r| string(r, "text").starts_with("tiling 64x64"));
        assert_eq!(records, sees, "{branch}: archival");
        let events =
            array(field(&view, "recall"), "events").iter().any(|e| string(e, "text").contains("L2 cache"));
        assert_eq!(events, sees, "{branch}: recall");
    }
    snap!("promoted_explain_text", &sb.run(&["core", "get", "after", "best_tile", "--explain"]).success());
    let why = sb.json(&["why", "after", "best_tile"]);
    let shown = array(&why, "writes").iter().find(|w| string(w, "status") == "visible").unwrap();
    // The second promote wrote the key again (core writes are not deduplicated), without a note.
    assert_eq!(string(field(shown, "promoted_from"), "branch"), "good-1");
    assert_eq!(opt_string(field(shown, "promoted_from"), "note"), None);
    let first = array(&why, "writes").iter().find(|w| w["promoted_from"].is_object()).unwrap();
    assert_eq!(opt_string(field(first, "promoted_from"), "note"), Some("every fork should know"));
    // A note's own line breaks at the end of the text are trimmed, as any text output's are.
    sb.ok(&["promote", "good-1", "root", "--core", "best_tile", "--note", "kept here\n\n"]);
    let why = sb.ok(&["why", "root", "best_tile"]);
    assert!(why.ends_with(": kept here\n"), "{why:?}");
    // A promoted key expires when the original does: its TTL is not started again.
    let at = |epoch: &'static str| [("MEMCTL_NOW", epoch)];
    sb.run_env(&["core", "set", "good-1", "scratch", "v", "--ttl", "1h"], &at("1000000")).success();
    sb.run_env(&["promote", "good-1", "root", "--core", "scratch"], &at("1003000")).success();
    for (epoch, seen) in [("1003500", true), ("1003700", false)] {
        for branch in ["good-1", "root"] {
            let core = sb.json_env(&["core", "get", branch, "scratch"], &at(epoch));
            assert_eq!(field(&core, "core")["scratch"].is_string(), seen, "{branch} at {epoch}: {core}");
        }
    }
}

#[test]
fn promote_bad_input_writes_nothing() {
    for db in backends("promote_bad_input_writes_nothing") {
        promote_bad_input_writes_nothing_on(&tree(&db));
    }
}

fn promote_bad_input_writes_nothing_on(sb: &Sandbox) {
    let journal = || array(&sb.json(&["log"]), "ops").len();
    let before = (journal(), sb.json(&["read", "root", "--all"]));
    // The record exists, but only bad sees it.
    let read = sb.json(&["read", "bad", "--scope", "archival"]);
    let record = int(&array(&read, "archival")[0], "id").to_string();
    snap!(
        "promote_unseen_record_text",
        &sb.run(&["promote", "good-1", "root", "--core", "best_tile", "--record", &record]).exit(1),
    );
    snap!(
        "promote_unseen_key_json",
        &sb.run(&["--json", "promote", "good-1", "root", "--core", "nope"]).exit(1),
    );
    snap!("promote_nothing_text", &sb.run(&["promote", "good-1", "root"]).exit(2));
    snap!("promote_to_itself_text", &sb.run(&["promote", "good-1", "good-1", "--core", "goal"]).exit(1));
    assert_eq!((journal(), sb.json(&["read", "root", "--all"])), before, "nothing written");
}

#[test]
fn gc_collects_finished_subtrees_and_keeps_every_other_view() {
    for db in backends("gc_collects_finished_subtrees_and_keeps_every_other_view") {
        gc_collects_finished_subtrees_and_keeps_every_other_view_on(&tree(&db));
    }
}

fn gc_collects_finished_subtrees_and_keeps_every_other_view_on(sb: &Sandbox) {
    sb.ok(&["branch", "mark", "bad", "dead", "--subtree"]);
    sb.ok(&["branch", "mark", "mixed", "pruned"]); // mixed-1 is alive: mixed stays
    let survivors = ["root", "good", "good-1", "mixed", "mixed-1"];
    let views: Vec<String> = survivors.iter().map(|b| sb.ok(&["--json", "read", b, "--all"])).collect();
    snap!("gc_dry_run_text", &sb.run(&["gc", "--dry-run"]).success());
    assert_eq!(ids(&sb.json(&["branch", "list"])).len(), 8, "a dry run changes nothing");
    snap!("gc_json", &sb.run(&["--json", "gc"]).success());
    for (branch, view) in survivors.iter().zip(&views) {
        assert_eq!(&sb.ok(&["--json", "read", branch, "--all"]), view, "{branch}'s view, byte for byte");
    }
    snap!("gc_collected_branch_text", &sb.run(&["read", "bad-1"]).exit(3));
    snap!("gc_collected_id_text", &sb.run(&["fork", "root", "bad"]).exit(4));
    // The journal keeps the collected branches' rows, under their names.
    let log = sb.json(&["log", "bad-1"]);
    assert!(array(&log, "ops").iter().all(|op| opt_string(op, "branch") == Some("bad-1")));
    assert!(!array(&log, "ops").is_empty());
    // Search no longer finds the collected record.
    let hits = sb.json(&["archival", "search", "root", "CUDA memory"]);
    assert!(array(&hits, "results").is_empty());
    // A later `gc --journal` deletes the journal rows of branches collected before.
    let purged = sb.json(&["gc", "--journal"]);
    assert!(array(&purged, "collected").is_empty(), "{purged}");
    assert!(int(field(&purged, "rows"), "journal") > 0, "{purged}");
    assert!(array(&sb.json(&["log", "bad-1"]), "ops").is_empty());
    let text = sb.ok(&["log", "bad-1"]);
    assert!(text.starts_with("The journal holds no rows of bad-1"), "{text}");
    snap!("gc_nothing_text", &sb.run(&["gc"]).success());
}

#[test]
fn gc_named_branches_and_vacuum() {
    for db in backends("gc_named_branches_and_vacuum") {
        gc_named_branches_and_vacuum_on(&tree(&db));
    }
}

fn gc_named_branches_and_vacuum_on(sb: &Sandbox) {
    snap!("gc_root_without_subtree_text", &sb.run(&["gc", "--branch", "root"]).exit(4));
    snap!("gc_subtree_needs_branch_text", &sb.run(&["gc", "--subtree"]).exit(2));
    // Enough text in the collected branches that whole pages come free.
    for n in 0..20 {
        let text = format!("{n} {}", "measurements of the GPU route ".repeat(100));
        // Indexed for search as each is written (not in a later batch).
        sb.run_env(&["archival", "add", "bad-1", &text], &[("MEMCTL_SEARCH__FTS_BATCH", "1")]).success();
    }
    let newest =
        |sb: &Sandbox| array(&sb.json(&["log"]), "ops").iter().map(|op| int(op, "seq")).max().unwrap();
    let before = newest(sb);
    // The search index's bytes (SQLite's FTS5).
    let index_bytes = || -> i64 {
        let conn = rusqlite::Connection::open(sb.file("memory.sqlite")).unwrap();
        conn.query_row("SELECT sum(length(block)) FROM archival_fts_data", [], |r| r.get(0)).unwrap()
    };
    let index_before = matches!(sb.db(), Db::Sqlite).then(index_bytes);
    let gc = sb.json(&["gc", "--branch", "bad", "--subtree", "--journal", "--vacuum"]);
    if let Some(index_before) = index_before {
        // The collected records' entries left the index too, not only their rows.
        assert!(index_bytes() < index_before / 2, "{} bytes of {index_before}", index_bytes());
    }
    let collected: Vec<&str> = array(&gc, "collected").iter().map(|b| b.as_str().unwrap()).collect();
    assert_eq!(collected, ["bad", "bad-1", "bad-2"]);
    assert!(int(field(&gc, "rows"), "journal") > 0, "--journal deletes their journal rows");
    let vacuum = field(&gc, "vacuum");
    match sb.db() {
        Db::Sqlite => assert!(int(&gc, "bytes_freed") > 0, "{gc}"),
        // PostgreSQL frees space in its VACUUM, not at the delete.
        Db::Postgres(_) => {
            assert_eq!(int(&gc, "bytes_freed"), 0, "{gc}");
            assert_eq!(string(vacuum, "mode"), "postgres");
        }
    }
    assert!(int(vacuum, "bytes_after") < int(vacuum, "bytes_before"), "the database shrank: {gc}");
    let all = sb.json(&["log"]);
    assert!(!array(&all, "ops").iter().any(|op| opt_string(op, "branch") == Some("bad-1")));
    // The newest journal rows (bad-1's adds) went, but seqs and ids go on past them.
    assert!(newest(sb) > before, "gc's own row comes after what it deleted");
    let id = int(&sb.json(&["archival", "add", "root", "after the gc"]), "id");
    assert!(id > before, "a new id is never one given before: {id} after {before}");
}

/// gc deletes 40 dead branches while 4 processes append to surviving ones: every append lands,
/// none fails, and the dead are gone.
#[test]
fn gc_while_other_processes_write_loses_nothing() {
    const WRITERS: usize = 4;
    const CALLS: usize = 40;
    let sb = Sandbox::with_config("auto_consolidate = false\n");
    sb.ok(&["init"]);
    sb.ok(&["branch", "create", "root"]);
    for w in 0..WRITERS {
        sb.ok(&["fork", "root", &format!("keep-{w}")]);
    }
    for d in 0..40 {
        let dead = format!("dead-{d}");
        sb.ok(&["fork", "root", &dead]);
        sb.ok(&["recall", "append", &dead, "--kind", "note", &format!("dead event {d}")]);
        sb.ok(&["archival", "add", &dead, &format!("dead record {d}")]);
        sb.ok(&["branch", "mark", &dead, "dead"]);
    }
    let barrier = std::sync::Barrier::new(WRITERS + 1);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let mut handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (sb, barrier) = (&sb, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    (0..CALLS)
                        .map(|c| {
                            sb.run(&[
                                "-q",
                                "recall",
                                "append",
                                &format!("keep-{w}"),
                                "--kind",
                                "note",
                                &format!("w{w} c{c}"),
                            ])
                        })
                        .filter(|o| o.code != 0)
                        .map(|o| o.transcript())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let (sb, barrier) = (&sb, &barrier);
        handles.push(scope.spawn(move || {
            barrier.wait();
            let gc = sb.run(&["-q", "gc"]);
            if gc.code == 0 {
                vec![]
            } else {
                vec![gc.transcript()]
            }
        }));
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(failures.is_empty(), "{} calls failed, e.g.:\n{}", failures.len(), failures[0]);
    for w in 0..WRITERS {
        let list = sb.json(&["recall", "list", &format!("keep-{w}"), "--limit", "1000"]);
        let texts: BTreeSet<String> =
            array(&list, "events").iter().map(|e| string(e, "text").to_string()).collect();
        let wanted: BTreeSet<String> = (0..CALLS).map(|c| format!("w{w} c{c}")).collect();
        assert_eq!(texts, wanted, "keep-{w}: every append, once");
    }
    assert_eq!(ids(&sb.json(&["branch", "list"])).len(), 1 + WRITERS, "only the dead are gone");
}
