//! `memctl import legacy`: databases written by the Python store (tests/fixtures/legacy, each
//! with the `expected.json` of what that store reports per branch) imported through the binary
//! and compared branch by branch; malformed legacy files; refusals.

use crate::support::*;
use rusqlite::Connection;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// Copies a legacy fixture into the sandbox (opening it in place would leave `-wal` files).
fn copy_legacy(sb: &Sandbox, name: &str) -> Value {
    std::fs::copy(fixture(&format!("legacy/{name}/memory.sqlite")), sb.file("legacy.sqlite")).unwrap();
    let text = std::fs::read_to_string(fixture(&format!("legacy/{name}/expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Rows converted plus rows left out, for one legacy table.
fn accounted(report: &Value, table: &str, converted: &str) -> i64 {
    let left_out: i64 = array(report, "skipped")
        .iter()
        .filter(|s| string(s, "table") == table)
        .map(|s| int(s, "count"))
        .sum();
    int(field(report, "converted"), converted) + left_out
}

fn texts(items: &[Value], name: &str) -> Vec<String> {
    items.iter().map(|item| string(item, name).to_string()).collect()
}

/// Imports a fixture, on each backend, and checks every branch's view against what the Python
/// store reported.
fn check_fixture(name: &str) {
    for db in backends(&format!("importing {name}")) {
        check_fixture_on(&Sandbox::on(&db, DEFAULT_CONFIG), name);
    }
}

fn check_fixture_on(sb: &Sandbox, name: &str) {
    let expected = copy_legacy(sb, name);
    let report = sb.json(&["import", "legacy", "legacy.sqlite"]);

    let counts = &expected["db"]["table_row_counts"];
    assert_eq!(int(&report, "branches"), int(counts, "branches"));
    for (table, converted) in [
        ("core_kv", "core"),
        ("events", "events"),
        ("archival", "archival"),
        ("inherited_exclusions", "exclusions"),
        ("inherited_summaries", "summaries"),
    ] {
        assert_eq!(
            accounted(&report, table, converted),
            int(counts, table),
            "{table}: every row accounted for"
        );
    }

    // Where two ancestors wrote a key, the Python store showed the latest write and memctl the
    // nearest one (SPEC §2): the reference lists exactly those pairs.
    let nearest: HashMap<(String, String), String> = array(&expected["notes_evidence"], "latest_vs_nearest")
        .iter()
        .map(|d| {
            let key = (string(d, "branch_id").to_string(), string(d, "key").to_string());
            (key, string(d, "nearest_ancestor_value (NOT used)").to_string())
        })
        .collect();
    let listed = sb.json(&["branch", "list"]);
    let uids: HashMap<String, Option<String>> = array(&listed, "branches")
        .iter()
        .map(|b| (string(b, "id").to_string(), opt_string(b, "node_uid").map(str::to_string)))
        .collect();

    let mut differing = 0;
    for branch in array(&expected, "branches") {
        let id = string(branch, "branch_id");
        assert_eq!(uids[id].as_deref(), opt_string(branch, "node_uid"), "{id}: node_uid");
        let view = sb.json(&["read", id, "--all"]);
        let reference = &branch["mem_node_read_all"];

        let core = object(&view, "core");
        let want = object(reference, "core");
        assert_eq!(
            core.keys().collect::<BTreeSet<_>>(),
            want.keys().collect::<BTreeSet<_>>(),
            "{id}: core keys"
        );
        for (key, value) in want {
            let value = match nearest.get(&(id.to_string(), key.clone())) {
                Some(near) => {
                    differing += 1;
                    near.as_str()
                }
                None => value.as_str().unwrap(),
            };
            assert_eq!(core[key].as_str(), Some(value), "{id}: core {key}");
        }

        let recall = field(&view, "recall");
        let events = texts(array(recall, "events"), "text");
        let summaries = texts(array(recall, "summaries"), "text");
        for item in array(reference, "recall") {
            let text = string(item, "summary");
            assert!(
                events.iter().any(|e| e == text) || summaries.iter().any(|s| s.contains(text)),
                "{id}: recall event {text:?} is in the view, as an event or inside a summary"
            );
        }
        let archival = texts(array(&view, "archival"), "text");
        for record in array(reference, "archival") {
            let text = string(record, "text");
            assert!(archival.iter().any(|a| a == text), "{id}: archival {text:?}");
        }
    }
    assert_eq!(differing, nearest.len(), "every listed latest-vs-nearest pair was checked");

    // Nothing the redactor would still change, and every redaction of the legacy file kept.
    let legacy = Connection::open(sb.file("legacy.sqlite")).unwrap();
    let all_texts = |conn: &Connection, sql: &str| -> Vec<String> {
        conn.prepare(sql).unwrap().query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
    };
    let stored = texts_of(
        sb,
        "SELECT value FROM core WHERE value IS NOT NULL UNION ALL SELECT text FROM events
         UNION ALL SELECT text FROM archival WHERE text IS NOT NULL
         UNION ALL SELECT summary_text FROM inherited_summaries",
    );
    for text in &stored {
        assert_eq!(memctl_core::redact(text), text.as_str(), "stored unredacted: {text:?}");
    }
    let masked = |texts: &[String]| texts.iter().filter(|t| t.contains("***")).count();
    let legacy_texts = all_texts(
        &legacy,
        "SELECT value FROM core_kv UNION ALL SELECT text FROM events UNION ALL SELECT text FROM archival",
    );
    assert!(masked(&legacy_texts) > 0, "the fixture has redacted secrets");
    assert!(masked(&stored) >= masked(&legacy_texts), "redacted values stay redacted");

    // Search works at once, with the index (FTS5, or PostgreSQL's words) and without alike.
    let deepest = array(&expected, "branches").iter().max_by_key(|b| int(b, "depth")).unwrap();
    let id = string(deepest, "branch_id");
    let fts = sb.json(&["archival", "search", id, "runtime", "-k", "5"]);
    assert!(!array(&fts, "results").is_empty(), "the index finds records after the import");
    let fallback =
        sb.json_env(&["archival", "search", id, "runtime", "-k", "5"], &[("MEMCTL_SEARCH__FTS", "off")]);
    let ids = |v: &Value| array(v, "results").iter().map(|r| int(r, "id")).collect::<BTreeSet<_>>();
    assert_eq!(ids(&fts), ids(&fallback), "same records with and without FTS5");

    // The import indexes every record it wrote, in one go at its end: none waits past the
    // FTS5 index's end, and the index (FTS5's check against the content, with rank 1) and its
    // lengths match the table.
    if matches!(sb.db(), Db::Sqlite) {
        let conn = Connection::open(sb.file("memory.sqlite")).unwrap();
        let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        let indexed_until = one("SELECT value FROM meta WHERE key = 'fts_indexed_until'");
        assert_eq!(indexed_until, one("SELECT max(seq) FROM archival"), "nothing past the index's end");
        conn.execute("INSERT INTO archival_fts(archival_fts, rank) VALUES ('integrity-check', 1)", [])
            .unwrap();
        assert_eq!(
            one("SELECT count(*) FROM archival_lengths"),
            one("SELECT count(*) FROM archival WHERE text IS NOT NULL"),
            "a length for every indexed version"
        );
    }
}

#[test]
fn tiny_fixture_imports_with_every_branch_view() {
    check_fixture("tiny");
}

#[test]
fn search_run_fixture_imports_with_every_branch_view() {
    check_fixture("search_run");
}

#[test]
fn tiny_import_reports_in_text() {
    let sb = Sandbox::new();
    copy_legacy(&sb, "tiny");
    let outcome = sb.run(&["import", "legacy", "legacy.sqlite"]).success();
    insta::assert_snapshot!("import_tiny_text", outcome.transcript());
    // node-3 as the Python store's reference render shows it, but with memctl's semantics:
    // node-1's own `status` wins over root's later write, and the window is not cut to 2.
    let context = sb.run(&["context", "node-3", "--no-limit"]).success();
    insta::assert_snapshot!("import_tiny_context", context.transcript());
}

/// A file with the Python store's schema (PYTHON_STORE.md §1).
fn python_store(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE branches (id TEXT PRIMARY KEY, parent_id TEXT NULL, node_uid TEXT NULL, created_at REAL);
         CREATE TABLE core_kv (branch_id TEXT, key TEXT, value TEXT, updated_at REAL, PRIMARY KEY (branch_id, key));
         CREATE TABLE core_meta (branch_id TEXT, key TEXT, importance INTEGER, ttl TEXT, updated_at REAL,
                                 PRIMARY KEY (branch_id, key));
         CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, branch_id TEXT, kind TEXT, text TEXT,
                              tags TEXT, created_at REAL, task_hint TEXT, memory_size INTEGER);
         CREATE TABLE archival (id INTEGER PRIMARY KEY AUTOINCREMENT, branch_id TEXT, text TEXT, tags TEXT,
                                created_at REAL);
         CREATE TABLE inherited_exclusions (branch_id TEXT, excluded_event_id INTEGER, excluded_at REAL,
                                            PRIMARY KEY (branch_id, excluded_event_id));
         CREATE TABLE inherited_summaries (id INTEGER PRIMARY KEY AUTOINCREMENT, branch_id TEXT,
                                           summary_text TEXT, summarized_event_ids TEXT, kind TEXT, created_at REAL);",
    )
    .unwrap();
    conn
}

#[test]
fn a_careless_legacy_file_is_imported_with_everything_accounted_for() {
    let sb = Sandbox::new();
    let conn = python_store(&sb.file("legacy.sqlite"));
    conn.execute_batch(
        "INSERT INTO branches VALUES ('r', NULL, 'root', 1), ('a', 'r', 'node-a', 2), ('lost', 'gone', NULL, 3),
                                     ('b', 'r', 'root', 4);
         INSERT INTO core_kv VALUES ('r', 'db_password', 'password: hunter2', 1.1), ('a', 'flags', '-O3', 2.1),
                                    ('ghost', 'k', 'v', 9);
         INSERT INTO core_meta VALUES ('r', 'db_password', 9, NULL, 1.1), ('a', 'flags', 'high', '1h', 2.1);
         INSERT INTO events(branch_id, kind, text, tags, created_at) VALUES
             ('r', 'note', 'uploaded with token=abc123', '[\"RECALL_EVENT\"]', 1.2),
             ('r', 'note', 'kept twice', '[]', 1.3),
             ('r', 'note', 'kept twice', '[]', 1.4),
             ('r', 'llm_insight', '', '[\"LLM_INSIGHT\"]', 1.5),
             ('a', 'result', 'runtime 2.5 s', 'not json', 2.2),
             ('a', 'result', 'runtime 2.4 s', '[\"line\\none\", \"\"]', 2.3),
             ('a', 'result', 'runtime 2.3 s', '[1, \"x\"]', 2.35),
             ('ghost', 'note', 'orphan', '[]', 9);
         INSERT INTO archival(branch_id, text, tags, created_at) VALUES
             ('r', 'key sk-abcdefghijklmnopqrstuvwxyz0123 in the log', '[\"LOG\"]', 1.6),
             ('lost', 'parent gone', '[]', 3.1);
         INSERT INTO inherited_exclusions VALUES ('a', 1, 2.4), ('a', 99, 2.4);
         INSERT INTO inherited_summaries(branch_id, summary_text, summarized_event_ids, kind, created_at)
             VALUES ('a', 'two notes', '[2, 999]', 'note', 2.5);",
    )
    .unwrap();
    drop(conn);
    let report = sb.json(&["import", "legacy", "legacy.sqlite"]);
    let mut shown = report.clone();
    shown["source"] = "[source]".into();
    insta::assert_snapshot!("import_careless_report", serde_json::to_string_pretty(&shown).unwrap());

    let root = sb.json(&["read", "root", "--all"]);
    assert_eq!(field(&root, "core")["db_password"], "***", "a value under a secret's name masked whole");
    let events = texts(array(field(&root, "recall"), "events"), "text");
    assert_eq!(events, ["kept twice", "uploaded with token=***"], "empty and duplicate events left out");
    let records = texts(array(&root, "archival"), "text");
    assert_eq!(records, ["key *** in the log"]);

    let a = sb.json(&["read", "node-a", "--all"]);
    assert_eq!(field(&a, "core")["db_password"], "***", "inherited");
    let events = array(field(&a, "recall"), "events");
    let expected = ["runtime 2.3 s", "runtime 2.4 s", "runtime 2.5 s", "kept twice"];
    assert_eq!(texts(events, "text"), expected, "exclusion applied");
    assert_eq!(strings(&events[0], "tags"), ["1", "x"]);
    assert_eq!(strings(&events[1], "tags"), ["line one"]);
    assert_eq!(strings(&events[2], "tags"), ["not json"]);
    // Every silent change is counted: a non-numeric importance, a tag that was no text, a
    // summary's ids of events not imported.
    let adjusted = report["adjusted"].to_string();
    for what in ["importance not a number", "tags that were not text", "ids of events not imported"] {
        assert!(adjusted.contains(what), "{what}: {report}");
    }
    let lost = sb.json(&["read", "lost", "--all"]);
    assert_eq!(
        texts(array(&lost, "archival"), "text"),
        ["parent gone"],
        "a branch with a lost parent is a root"
    );
    let b = sb.json(&["branch", "show", "b"]);
    assert_eq!(field(field(&b, "branch"), "node_uid"), &Value::Null, "a node_uid already taken is dropped");
}

/// A branch that names itself as its parent is a root (its subtree comes along); kinds that are
/// memctl's own (a conversation's) are imported as plain ones, and both are counted.
#[test]
fn a_self_parented_branch_and_memctls_own_kinds_are_imported_and_reported() {
    let sb = Sandbox::new();
    let conn = python_store(&sb.file("legacy.sqlite"));
    conn.execute_batch(
        "INSERT INTO branches VALUES ('r', 'r', NULL, 1), ('c', 'r', NULL, 2);
         INSERT INTO events(branch_id, kind, text, tags, created_at) VALUES
             ('c', 'step:user', 'not a step', '[]', 2.1), ('c', 'conversation', 'not a summary', '[]', 2.2);
         INSERT INTO inherited_summaries(branch_id, summary_text, summarized_event_ids, kind, created_at)
             VALUES ('c', 'a summary', '[]', 'conversation', 2.3);",
    )
    .unwrap();
    drop(conn);
    let report = sb.json(&["import", "legacy", "legacy.sqlite"]);
    let adjusted = report["adjusted"].to_string();
    assert!(adjusted.contains("its own parent: imported as a root"), "{report}");
    assert!(adjusted.contains("memctl's own: imported as 'event'"), "{report}");
    assert!(adjusted.contains("memctl's own: imported as 'summary'"), "{report}");
    assert_eq!(array(&sb.json(&["branch", "list"]), "branches").len(), 2, "{report}");
    let kinds: Vec<String> = array(&sb.json(&["recall", "list", "c"]), "events")
        .iter()
        .map(|e| string(e, "kind").to_string())
        .collect();
    assert_eq!(kinds, ["event", "event"]);
    assert!(array(&sb.json(&["messages", "c"]), "messages").is_empty(), "no step, no conversation summary");
}

#[test]
fn unreadable_timestamps_and_null_values_are_converted_and_reported() {
    let sb = Sandbox::new();
    let conn = python_store(&sb.file("legacy.sqlite"));
    conn.execute_batch(
        "INSERT INTO branches VALUES ('r', NULL, 'root', 1), ('a', 'r', 'node-a', 'notanumber'),
                                     ('q', NULL, NULL, NULL), ('b', 'r', NULL, '3.5');
         INSERT INTO core_kv VALUES ('r', 'task', 'tune the stencil', 'soon'), ('a', 'unset', NULL, 2.1);
         INSERT INTO events(branch_id, kind, text, tags, created_at) VALUES
             ('a', 'note', 'written at an unknown time', '[]', 'notanumber'),
             ('a', 'note', 'written at 7.5', '[]', 7.5),
             ('q', 'note', 'in a root of unknown time', '[]', X'00');
         INSERT INTO inherited_exclusions VALUES ('a', 'first', 8);",
    )
    .unwrap();
    drop(conn);
    let outcome = sb.run(&["import", "legacy", "legacy.sqlite"]).success();
    insta::assert_snapshot!("import_unreadable_values_text", outcome.transcript());

    // A branch of unknown time takes its parent's, a row its branch's; a root's is 0.
    let ts = |branch: &str| field(field(&sb.json(&["branch", "show", branch]), "branch"), "ts").as_f64();
    assert_eq!((ts("a"), ts("b"), ts("q")), (Some(1.0), Some(3.5), Some(0.0)));
    let events = array(field(&sb.json(&["read", "node-a", "--all"]), "recall"), "events").clone();
    let times: Vec<(&str, f64)> =
        events.iter().map(|e| (string(e, "text"), e["ts"].as_f64().unwrap())).collect();
    assert_eq!(times, [("written at 7.5", 7.5), ("written at an unknown time", 1.0)]);
    assert_eq!(field(&sb.json(&["core", "get", "node-a"]), "core")["task"], "tune the stencil");
}

#[test]
fn files_that_are_not_python_store_databases_are_refused_untouched() {
    let sb = Sandbox::new();
    std::fs::write(sb.file("notes.txt"), "not a database at all, just some text\n".repeat(200)).unwrap();
    let other = Connection::open(sb.file("other.sqlite")).unwrap();
    other.execute_batch("CREATE TABLE branches (id TEXT); CREATE TABLE things (x);").unwrap();
    drop(other);
    sb.ok(&["--db", "memctl.sqlite", "init"]);
    std::fs::create_dir(sb.file("run")).unwrap();

    for (file, code, message) in [
        ("notes.txt", 6, "not a database of the Python memory store"),
        ("other.sqlite", 6, "table branches has no column parent_id"),
        ("memctl.sqlite", 6, "it is a memctl database already"),
        ("missing.sqlite", 3, "no such file"),
        ("run", 1, "run: is a directory, not a database file"),
    ] {
        let before = std::fs::read(sb.file(file)).ok();
        let outcome = sb.run(&["--db", "new.sqlite", "import", "legacy", file]).text_error(code);
        assert!(outcome.stderr.contains(message), "{}", outcome.transcript());
        assert_eq!(std::fs::read(sb.file(file)).ok(), before, "{file} unchanged");
        assert!(!sb.file("new.sqlite").exists(), "no database created for a refused import");
    }
    let json = sb.run(&["--json", "--db", "new.sqlite", "import", "legacy", "other.sqlite"]);
    json.json_error(6, "incompatible_db");

    copy_legacy(&sb, "tiny");
    std::fs::copy(sb.file("legacy.sqlite"), sb.file("run/memory.sqlite")).unwrap();
    let directory = sb.run(&["--db", "new.sqlite", "import", "legacy", "run"]).text_error(1);
    assert!(
        directory.stderr.contains("memctl import legacy run/memory.sqlite"),
        "{}",
        directory.transcript()
    );
    let same = sb.run(&["--db", "legacy.sqlite", "import", "legacy", "legacy.sqlite"]).text_error(1);
    insta::assert_snapshot!("import_same_file", same.transcript());
    // Any other command on a Python store's file says what to do with it, and leaves it alone.
    let before = std::fs::read(sb.file("legacy.sqlite")).unwrap();
    for command in [&["init"][..], &["branch", "list"]] {
        let outcome = sb.run(&[&["--db", "legacy.sqlite"][..], command].concat()).text_error(6);
        assert!(outcome.stderr.contains("a database of the Python memory store"), "{}", outcome.transcript());
        assert!(
            outcome.stderr.contains("hint: import it into a new memctl database"),
            "{}",
            outcome.transcript()
        );
    }
    assert_eq!(std::fs::read(sb.file("legacy.sqlite")).unwrap(), before);
}

#[test]
fn importing_into_a_database_that_has_the_branches_is_a_conflict_and_changes_nothing() {
    let sb = Sandbox::new();
    copy_legacy(&sb, "tiny");
    sb.ok(&["import", "legacy", "legacy.sqlite"]);
    let before = dump(&sb);
    let outcome = sb.run(&["import", "legacy", "legacy.sqlite"]).text_error(4);
    assert!(outcome.stderr.contains("already exists"), "{}", outcome.transcript());
    assert_eq!(dump(&sb), before, "nothing written by the refused import");
}

/// Another run's node_uids (`root`, `node-1` …) in the database: importing would leave the
/// runner's uids pointing at the first run's branches, so nothing is imported (exit 4).
#[test]
fn importing_a_second_run_whose_node_uids_are_taken_is_a_conflict_and_changes_nothing() {
    let sb = Sandbox::new();
    copy_legacy(&sb, "tiny");
    sb.ok(&["import", "legacy", "legacy.sqlite"]);
    let before = dump(&sb);
    copy_legacy(&sb, "search_run");
    let outcome = sb.run(&["import", "legacy", "legacy.sqlite"]).text_error(4);
    assert!(
        outcome.stderr.contains("node_uid 'root'") && outcome.stderr.contains("is taken"),
        "{}",
        outcome.transcript()
    );
    assert_eq!(dump(&sb), before, "nothing written by the refused import");
}
