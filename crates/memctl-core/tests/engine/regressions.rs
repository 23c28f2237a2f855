//! Regression tests: one named test per engine defect of the Python store that memctl replaces
//! (reference/PYTHON_STORE.md §3), each asserting memctl's corrected behaviour, plus redaction
//! (SPEC §5), the journal (SPEC §8), database compatibility (SPEC §3, §9), forks and node_uids
//! (SPEC §4.1).

use memctl_core::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const T0: f64 = 1_700_000_000.0;

fn config_with(edit: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config::default();
    edit(&mut config);
    config
}

fn mem() -> Store {
    Store::open_in_memory(Config::default(), Clock::Fixed(T0)).unwrap()
}

fn mem_with(edit: impl FnOnce(&mut Config)) -> Store {
    Store::open_in_memory(config_with(edit), Clock::Fixed(T0)).unwrap()
}

fn tags(list: &[&str]) -> Vec<String> {
    list.iter().map(|t| t.to_string()).collect()
}

fn imp(importance: u8) -> CoreWrite {
    CoreWrite { importance, ttl: None }
}

fn core_map(s: &Store, branch: &str) -> BTreeMap<String, String> {
    s.core(branch).unwrap().into_iter().map(|e| (e.key, e.value)).collect()
}

fn pairs(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Visible event ids, newest first.
fn event_ids(s: &Store, branch: &str) -> Vec<i64> {
    s.recall_list(branch, None).unwrap().events.iter().map(|e| e.id).collect()
}

/// Visible archival texts, newest first.
fn archival_texts(s: &Store, branch: &str) -> Vec<String> {
    s.archival_list(branch, None).unwrap().into_iter().map(|r| r.text).collect()
}

fn search(s: &Store, branch: &str, query: &str, k: usize, with_tags: &[&str]) -> Vec<Record> {
    s.archival_search(branch, &Search { query: query.to_string(), k, tags: tags(with_tags) }).unwrap()
}

fn search_ids(s: &Store, branch: &str, query: &str, k: usize, with_tags: &[&str]) -> Vec<i64> {
    search(s, branch, query, k, with_tags).iter().map(|r| r.id).collect()
}

fn kind_of<T: std::fmt::Debug>(result: Result<T>) -> ErrorKind {
    match result {
        Ok(value) => panic!("expected an error, got Ok({value:?})"),
        Err(e) => e.kind(),
    }
}

/// A memctl database file in a temporary directory, with an independent SQLite connection to
/// observe it.
struct FileDb {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl FileDb {
    fn new() -> FileDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.sqlite");
        FileDb { _dir: dir, path }
    }

    fn open(&self) -> Store {
        self.open_with(Config::default())
    }

    fn open_with(&self, config: Config) -> Store {
        Store::open(&self.path, config, Clock::Fixed(T0)).unwrap()
    }

    fn observer(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.path).unwrap()
    }
}

/// Every row of every ordinary table (FTS shadow tables included), as text, sorted per table.
fn dump(conn: &rusqlite::Connection) -> BTreeMap<String, Vec<String>> {
    let names: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table'
             AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(names.iter().any(|n| n == "core"), "not a memctl db: {names:?}");
    let mut out = BTreeMap::new();
    for name in names {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{name}\"")).unwrap();
        let columns = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |row| {
                let values: Vec<rusqlite::types::Value> =
                    (0..columns).map(|i| row.get(i)).collect::<rusqlite::Result<_>>()?;
                Ok(format!("{values:?}"))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        rows.sort();
        out.insert(name, rows);
    }
    out
}

fn data_version(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0)).unwrap()
}

fn file_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

// ---------------------------------------------------------------------------------------------
// PYTHON_STORE.md §3, item 2: inheritance is live.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_02_inheritance_is_by_fork_point_not_live() {
    let s = mem();
    s.create_root("root").unwrap();
    s.core_set("root", "a", "before", CoreWrite::default()).unwrap();
    let e_before = s.recall_append("root", "note", "root event before", &[]).unwrap().id;
    let r_before = s.archival_add("root", "root record before", &[]).unwrap().id;

    let c1 = s.fork("root", Some("c1")).unwrap();
    assert!(c1.created);

    // The parent keeps writing, in every layer, after the fork.
    s.core_set("root", "a", "after", CoreWrite::default()).unwrap();
    s.core_set("root", "late", "yes", CoreWrite::default()).unwrap();
    let e_after = s.recall_append("root", "note", "root event after", &[]).unwrap().id;
    s.archival_add("root", "root record after", &[]).unwrap();
    s.archival_update("root", r_before, Some("root record edited"), None).unwrap();
    s.recall_summarize("root", "note", "root summary after", &[e_before]).unwrap();

    // A grandchild forked from c1 after all of that still sees root only up to c1's fork point.
    s.fork("c1", Some("g1")).unwrap();
    let c2 = s.fork("root", Some("c2")).unwrap();
    assert!(c2.fork_seq > c1.fork_seq);

    for branch in ["c1", "g1"] {
        assert_eq!(core_map(&s, branch), pairs(&[("a", "before")]), "{branch}");
        assert_eq!(event_ids(&s, branch), vec![e_before], "{branch}");
        assert!(s.recall_list(branch, None).unwrap().summaries.is_empty());
        assert_eq!(archival_texts(&s, branch), vec!["root record before"]);
        assert_eq!(s.archival_get(branch, r_before).unwrap().text, "root record before");
        assert!(search(&s, branch, "after edited late", 10, &[]).is_empty());
    }
    // A child forked later sees the parent as it was then.
    assert_eq!(core_map(&s, "c2"), pairs(&[("a", "after"), ("late", "yes")]));
    assert_eq!(event_ids(&s, "c2"), vec![e_after]);
    assert_eq!(s.recall_list("c2", None).unwrap().summaries.len(), 1);
    assert_eq!(archival_texts(&s, "c2"), vec!["root record edited", "root record after"]);

    // Siblings never see each other, and children never leak upwards.
    s.core_set("c1", "only_c1", "x", CoreWrite::default()).unwrap();
    s.recall_append("c1", "note", "c1 event", &[]).unwrap();
    s.archival_add("c1", "c1 record", &[]).unwrap();
    for branch in ["root", "c2"] {
        assert!(!core_map(&s, branch).contains_key("only_c1"));
        assert!(!s.recall_list(branch, None).unwrap().events.iter().any(|e| e.text == "c1 event"));
        assert!(!archival_texts(&s, branch).contains(&"c1 record".to_string()));
    }
    // g1 was forked from c1 before c1 wrote those rows.
    assert!(!core_map(&s, "g1").contains_key("only_c1"));

    let path: Vec<String> = s.path("g1").unwrap().branches().iter().map(|b| b.id.to_string()).collect();
    assert_eq!(path, vec!["g1", "c1", "root"]);
}

// ---------------------------------------------------------------------------------------------
// Item 3: core precedence differs by reader; deletes cannot hide inherited keys.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_03_core_precedence_is_nearest_branch_for_every_reader() {
    let s = mem();
    s.create_root("root").unwrap();
    s.core_set("root", "goal", "tune the stencil", CoreWrite::default()).unwrap();
    s.core_set("root", "model", "gpt", CoreWrite::default()).unwrap();
    s.core_set("root", "budget", "10 GPU hours", CoreWrite::default()).unwrap();
    s.fork("root", Some("sib")).unwrap();
    s.fork("root", Some("child")).unwrap();
    s.core_set("child", "goal", "tune the GPU kernel", CoreWrite::default()).unwrap();
    // A later parent write never shadows the child's override …
    s.core_set("root", "goal", "root changed its mind", CoreWrite::default()).unwrap();
    assert_eq!(core_map(&s, "child")["goal"], "tune the GPU kernel");
    // … not even for a grandchild forked after it.
    s.fork("child", Some("grand")).unwrap();
    assert_eq!(core_map(&s, "grand")["goal"], "tune the GPU kernel");
    assert_eq!(core_map(&s, "root")["goal"], "root changed its mind");

    // What the LLM's core_get reads (`core`) includes inherited keys, and agrees with the view.
    let core = s.core("child").unwrap();
    let model = core.iter().find(|e| e.key == "model").unwrap();
    assert_eq!(model.value, "gpt");
    assert_eq!(&*model.branch, "root");
    let goal = core.iter().find(|e| e.key == "goal").unwrap();
    assert_eq!(&*goal.branch, "child");
    assert_eq!(s.view("child").unwrap().core, core);
    assert_eq!(
        core_map(&s, "child"),
        pairs(&[("goal", "tune the GPU kernel"), ("model", "gpt"), ("budget", "10 GPU hours")])
    );

    // A delete in the child hides an inherited key in the child (and later descendants) only.
    s.fork("child", Some("early")).unwrap();
    assert_eq!(s.core_delete("child", &["model", "not-there"]).unwrap(), vec!["model"]);
    s.fork("child", Some("late")).unwrap();
    assert!(!core_map(&s, "child").contains_key("model"));
    assert!(!core_map(&s, "late").contains_key("model"));
    assert_eq!(core_map(&s, "early")["model"], "gpt");
    assert_eq!(core_map(&s, "root")["model"], "gpt");
    assert_eq!(core_map(&s, "sib")["model"], "gpt");
    // Deleting what is no longer visible deletes nothing.
    assert!(s.core_delete("child", &["model"]).unwrap().is_empty());
    // Setting it again brings it back in the child only.
    s.core_set("child", "model", "claude", CoreWrite::default()).unwrap();
    assert_eq!(core_map(&s, "child")["model"], "claude");
    assert_eq!(core_map(&s, "root")["model"], "gpt");
    assert!(!core_map(&s, "late").contains_key("model"));
}

// ---------------------------------------------------------------------------------------------
// Item 4: exclusions and summaries are not inherited.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_04_exclusions_and_summaries_are_inherited_by_later_descendants() {
    let s = mem();
    s.create_root("root").unwrap();
    let e: Vec<i64> =
        (1..=4).map(|i| s.recall_append("root", "note", &format!("event {i}"), &[]).unwrap().id).collect();
    s.fork("root", Some("p")).unwrap();
    s.fork("p", Some("early")).unwrap();
    let summary = s.recall_summarize("p", "note", "events 1 and 2 in short", &[e[0], e[1]]).unwrap();
    s.recall_exclude("p", &[e[2]]).unwrap();
    s.fork("p", Some("late")).unwrap();
    s.fork("late", Some("later")).unwrap();

    for branch in ["p", "late", "later"] {
        let recall = s.recall_list(branch, None).unwrap();
        assert_eq!(recall.summaries.len(), 1, "{branch}");
        let sum = &recall.summaries[0];
        assert_eq!(sum.id, summary);
        assert_eq!(&*sum.branch, "p");
        assert_eq!(&*sum.kind, "note");
        assert_eq!(sum.text, "events 1 and 2 in short");
        assert_eq!(sum.event_ids, vec![e[0], e[1]]);
        assert_eq!(event_ids(&s, branch), vec![e[3]], "{branch}");
        assert_eq!(s.view(branch).unwrap().summaries, recall.summaries);
    }
    // Earlier descendants and ancestors keep the original events and no summary.
    for branch in ["root", "early"] {
        let recall = s.recall_list(branch, None).unwrap();
        assert!(recall.summaries.is_empty(), "{branch}");
        assert_eq!(event_ids(&s, branch), vec![e[3], e[2], e[1], e[0]]);
    }
    // Summaries do not pile up: a further level adds its own only to itself.
    s.recall_summarize("later", "note", "event 4 in short", &[e[3]]).unwrap();
    assert_eq!(s.recall_list("later", None).unwrap().summaries.len(), 2);
    assert!(event_ids(&s, "later").is_empty());
    assert_eq!(s.recall_list("late", None).unwrap().summaries.len(), 1);
    assert_eq!(event_ids(&s, "late"), vec![e[3]]);
    // Summarising events already summarised away is refused.
    assert_eq!(kind_of(s.recall_summarize("late", "note", "again", &[e[0]])), ErrorKind::NotFound);
}

// ---------------------------------------------------------------------------------------------
// Item 5: recall_evict hard-deletes rows descendants still show, reaches other branches, and
// archives an empty body.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_05_evicting_an_inherited_event_only_hides_it_in_the_evicting_branch() {
    let db = FileDb::new();
    let s = db.open();
    s.create_root("root").unwrap();
    let long_text: String =
        (0..120).map(|i| format!("line {i}: loss plateaued at step {}\n", i * 100)).collect();
    let e1 = s.recall_append("root", "result", &long_text, &tags(&["run-1"])).unwrap().id;
    let e2 = s.recall_append("root", "note", "second event", &[]).unwrap().id;
    s.fork("root", Some("a")).unwrap();
    s.fork("root", Some("b")).unwrap();
    let eb = s.recall_append("b", "note", "b's own event", &[]).unwrap().id;

    let out = s.recall_evict("a", &EvictSelector::Ids(vec![e1])).unwrap();
    assert_eq!(out.evicted, vec![e1]);
    let archived = out.archived.expect("evicted text is archived");

    assert_eq!(event_ids(&s, "a"), vec![e2]);
    assert_eq!(event_ids(&s, "root"), vec![e2, e1]);
    assert_eq!(event_ids(&s, "b"), vec![eb, e2, e1]);
    // Descendants of the parent forked afterwards still see it too.
    s.fork("root", Some("c")).unwrap();
    assert_eq!(event_ids(&s, "c"), vec![e2, e1]);
    // Descendants of the evicting branch forked afterwards inherit the eviction.
    s.fork("a", Some("a1")).unwrap();
    assert_eq!(event_ids(&s, "a1"), vec![e2]);

    // The full text lands in the evicting branch's archival.
    let record = s.archival_get("a", archived).unwrap();
    assert!(record.tags.contains(&"EVICTED_RECALL".to_string()));
    assert!(
        record.text.contains(long_text.trim_end()),
        "archived text lost the event's body: {:?}",
        record.text
    );
    assert_eq!(&*record.branch, "a");
    for branch in ["root", "b"] {
        assert_eq!(kind_of(s.archival_get(branch, archived)), ErrorKind::NotFound);
    }
    let hits = search_ids(&s, "a", "plateaued", 5, &["EVICTED_RECALL"]);
    assert_eq!(hits, vec![archived]);

    // Ids outside the view: another branch's event, an unknown id, one past what an event's
    // rowid holds (2^40), a negative one, an already evicted one, or a list mixing a valid id
    // with an invalid one — not found, and nothing written.
    let obs = db.observer();
    let before = dump(&obs);
    for ids in [vec![eb], vec![999_999], vec![1 << 41], vec![-4], vec![e1], vec![e2, eb]] {
        assert_eq!(
            kind_of(s.recall_evict("a", &EvictSelector::Ids(ids.clone()))),
            ErrorKind::NotFound,
            "{ids:?}"
        );
    }
    assert_eq!(dump(&obs), before);
    assert_eq!(event_ids(&s, "a"), vec![e2]);
    assert_eq!(event_ids(&s, "b"), vec![eb, e2, e1]);

    // The other selectors also act on the evicting branch's view only.
    let out = s.recall_evict("b", &EvictSelector::Oldest(1)).unwrap();
    assert_eq!(out.evicted, vec![e1]);
    let out = s.recall_evict("b", &EvictSelector::Kind("note".into())).unwrap();
    assert_eq!(out.evicted, vec![e2, eb]);
    let text = s.archival_get("b", out.archived.unwrap()).unwrap().text;
    assert!(text.contains("second event") && text.contains("b's own event"));
    assert!(event_ids(&s, "b").is_empty());
    assert_eq!(event_ids(&s, "root"), vec![e2, e1]);
    assert_eq!(event_ids(&s, "a"), vec![e2]);
}

// ---------------------------------------------------------------------------------------------
// Item 7: updating an archival record's text wipes its tags; FTS tags go stale.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_07_archival_text_update_keeps_tags_and_reindexes() {
    for fts in [FtsMode::Auto, FtsMode::Off] {
        let s = mem_with(|c| c.search.fts = fts);
        assert_eq!(s.uses_fts().unwrap(), fts == FtsMode::Auto);
        s.create_root("root").unwrap();
        let other = s.archival_add("root", "unrelated notes about plotting", &[]).unwrap().id;
        let r = s
            .archival_add("root", "baseline uses openmpi collectives", &tags(&["experiment-gpu", "BENCH"]))
            .unwrap()
            .id;
        s.archival_update("root", r, Some("switched to nccl allreduce"), None).unwrap();
        let record = s.archival_get("root", r).unwrap();
        assert_eq!(record.text, "switched to nccl allreduce");
        assert_eq!(*record.tags, tags(&["experiment-gpu", "BENCH"]), "{fts:?}");

        assert_eq!(search_ids(&s, "root", "nccl", 10, &[]), vec![r], "{fts:?}");
        assert!(search_ids(&s, "root", "openmpi", 10, &[]).is_empty());
        assert!(search_ids(&s, "root", "collectives baseline", 10, &[]).is_empty());
        // Tag words are searchable, and the tags follow the new version.
        assert_eq!(search_ids(&s, "root", "experiment", 10, &[]), vec![r]);
        assert_eq!(search_ids(&s, "root", "bench", 10, &[]), vec![r]);
        assert_eq!(search_ids(&s, "root", "allreduce", 10, &["BENCH"]), vec![r]);
        let hit = &search(&s, "root", "nccl", 10, &[])[0];
        assert_eq!(*hit.tags, tags(&["experiment-gpu", "BENCH"]));

        // Updating only the tags keeps the text; the old tags stop matching.
        s.archival_update("root", r, None, Some(&tags(&["RESULT"]))).unwrap();
        let record = s.archival_get("root", r).unwrap();
        assert_eq!(record.text, "switched to nccl allreduce");
        assert_eq!(*record.tags, tags(&["RESULT"]));
        assert!(search_ids(&s, "root", "bench experiment", 10, &[]).is_empty());
        assert!(search_ids(&s, "root", "", 10, &["BENCH"]).is_empty());
        assert_eq!(search_ids(&s, "root", "result", 10, &[]), vec![r]);
        assert_eq!(search_ids(&s, "root", "nccl", 10, &["RESULT"]), vec![r]);
        assert_eq!(search_ids(&s, "root", "plotting", 10, &[]), vec![other]);
    }
}

// ---------------------------------------------------------------------------------------------
// Item 8: limit before tag filter; query syntax errors; operators; non-matching fallback rows;
// tags as a JSON string.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_08_tag_filter_applies_before_the_limit() {
    for fts in [FtsMode::Auto, FtsMode::Off] {
        let s = mem_with(|c| c.search.fts = fts);
        s.create_root("root").unwrap();
        let mut tagged = Vec::new();
        for i in 0..4 {
            tagged.push(
                s.archival_add(
                    "root",
                    &format!("cache note {i} with several unrelated filler words here"),
                    &tags(&["GPU"]),
                )
                .unwrap()
                .id,
            );
        }
        // Many untagged records that match better (the word repeated, short texts, more words).
        for i in 0..30 {
            s.archival_add("root", &format!("cache cache miss {i}"), &[]).unwrap();
        }
        let hits = search(&s, "root", "cache miss", 3, &["GPU"]);
        assert_eq!(hits.len(), 3, "{fts:?}: tagged search came back short");
        assert!(hits.iter().all(|h| *h.tags == tags(&["GPU"])));
        let mut all: Vec<i64> = search_ids(&s, "root", "cache miss", 100, &["GPU"]);
        all.sort();
        assert_eq!(all, tagged, "{fts:?}");
        // Tag filters are AND-ed.
        assert!(search(&s, "root", "cache", 10, &["GPU", "CPU"]).is_empty());
    }
}

#[test]
fn defect_08_query_syntax_characters_and_operators_are_words() {
    for fts in [FtsMode::Auto, FtsMode::Off] {
        let s = mem_with(|c| c.search.fts = fts);
        s.create_root("root").unwrap();
        let add = |text: &str| s.archival_add("root", text, &[]).unwrap().id;
        let gate = add("the NOT gate inverts its input");
        let near = add("near field probe");
        let and = add("cache AND buffer");
        let or = add("either OR neither");
        let version = add("release v1.2 shipped");
        let colon = add("col:val pair");
        let slash = add("io/uring path");
        let call = add("fn(x) call site");
        let star = add("wild*card glob");
        let quote = add("don't \"quote\" me");
        let comma = add("alpha,beta list");
        let control = add("plain control record");

        let cases: Vec<(&str, Vec<i64>)> = vec![
            ("NOT", vec![gate]),
            ("NEAR", vec![near]),
            ("AND", vec![and]),
            ("OR", vec![or]),
            ("NEAR(field probe)", vec![near]),
            ("gate NOT", vec![gate]),
            ("cache AND", vec![and]),
            ("v1.2", vec![version]),
            ("col:val", vec![colon]),
            ("uring/io", vec![slash]),
            ("-uring", vec![slash]),
            ("fn(", vec![call]),
            ("(x", vec![call]),
            ("wild*", vec![star]),
            ("*card", vec![star]),
            ("\"quote", vec![quote]),
            ("don't", vec![quote]),
            ("'quote'", vec![quote]),
            ("alpha,", vec![comma]),
            ("beta.", vec![comma]),
            ("control:", vec![control]),
        ];
        for (query, expected) in cases {
            let mut got = search_ids(&s, "root", query, 20, &[]);
            got.sort();
            assert_eq!(got, expected, "{fts:?}: query {query:?}");
        }
        // Punctuation alone, or broken syntax, is never an error.
        for query in [
            ".",
            ",",
            "'",
            "\"",
            "-",
            ":",
            "/",
            "(",
            ")",
            "*",
            "^",
            "\"\"\"",
            "a:",
            "NEAR(",
            "AND OR NOT",
            "OR",
            "(((",
            "- - -",
            "x\"y",
            "{}[]",
        ] {
            let result = s.archival_search("root", &Search { query: query.into(), k: 5, tags: vec![] });
            assert!(result.is_ok(), "{fts:?}: query {query:?}: {result:?}");
        }
        assert!(search(&s, "root", ".", 5, &[]).is_empty());
        let recall = s.recall_search("root", "NEAR(\"x\" AND y*)", 5);
        assert!(recall.is_ok(), "{recall:?}");
    }
}

#[test]
fn defect_08_keyword_fallback_never_returns_non_matching_records() {
    let s = mem_with(|c| c.search.fts = FtsMode::Off);
    assert!(!s.uses_fts().unwrap());
    s.create_root("root").unwrap();
    let words = ["gpu", "cache", "stencil", "mpi", "loss", "plot"];
    for i in 0..40 {
        let text = format!("{} {} record {i}", words[i % 6], words[(i * 5 + 1) % 6]);
        let t = if i % 3 == 0 { tags(&["x-ray"]) } else { vec![] };
        s.archival_add("root", &text, &t).unwrap();
    }
    assert!(search(&s, "root", "zebra", 100, &[]).is_empty());
    assert!(search(&s, "root", "zebra", 100, &["x-ray"]).is_empty());
    for query in ["gpu", "stencil loss", "ray", "mpi zebra", "record"] {
        let qwords: Vec<String> = query.split(' ').map(str::to_string).collect();
        let hits = search(&s, "root", query, 100, &[]);
        assert!(!hits.is_empty(), "{query}");
        for hit in &hits {
            let haystack = format!("{} {}", hit.text, hit.tags.join(" ")).to_lowercase();
            let found: Vec<&str> =
                haystack.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
            assert!(
                qwords.iter().any(|w| found.contains(&w.as_str())),
                "{query:?} returned a non-matching record {hit:?}"
            );
        }
    }
    // Results carry tags as a list.
    let hit = &search(&s, "root", "ray", 1, &[])[0];
    assert_eq!(*hit.tags, vec!["x-ray".to_string()]);
    assert!(hit.score.is_some());
}

// ---------------------------------------------------------------------------------------------
// Item 9: one oversize core value evicts the whole core; TTL is never enforced.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_09_oversize_core_value_does_not_evict_the_whole_core() {
    let s = mem();
    s.create_root("root").unwrap();
    for key in ["goal", "dataset", "metric"] {
        s.core_set("root", key, "short", imp(4)).unwrap();
    }
    let out = s.core_set("root", "log", &"x".repeat(5000), CoreWrite::default()).unwrap();
    assert!(out.oversize_record.is_some());
    // 45 chars of unrelated importance-4 keys fit easily next to a truncated head.
    assert_eq!(out.evicted, Vec::<String>::new(), "an oversize value evicted the rest of the core");
    let core = core_map(&s, "root");
    assert_eq!(core.len(), 4, "{core:?}");
    assert!(s.core_chars("root").unwrap() <= s.config().core_max_chars);
}

#[test]
fn defect_09_oversize_core_value_alone_is_archived_and_truncated_within_budget() {
    let s = mem();
    s.create_root("root").unwrap();
    let big = "x".repeat(5000);
    let out = s.core_set("root", "blob", &big, CoreWrite::default()).unwrap();
    let id = out.oversize_record.unwrap();
    let record = s.archival_get("root", id).unwrap();
    assert!(record.text.contains(&big));
    assert!(record.tags.contains(&"CORE_OVERSIZE".to_string()));
    let core = s.core("root").unwrap();
    assert_eq!(core.len(), 1);
    assert!(core[0].value.starts_with("xxxxxxxxxx"));
    assert!(core[0].value.contains(&id.to_string()));
    assert!(s.core_chars("root").unwrap() <= s.config().core_max_chars);
}

#[test]
fn defect_09_core_ttl_is_enforced() {
    let mut s = mem();
    s.create_root("root").unwrap();
    s.core_set("root", "tmp", "expires soon", CoreWrite { importance: 3, ttl: Some(60.0) }).unwrap();
    s.core_set("root", "perm", "stays", CoreWrite::default()).unwrap();
    s.fork("root", Some("child")).unwrap();
    s.set_clock(Clock::Fixed(T0 + 59.0));
    for branch in ["root", "child"] {
        assert_eq!(core_map(&s, branch), pairs(&[("tmp", "expires soon"), ("perm", "stays")]));
    }
    s.set_clock(Clock::Fixed(T0 + 61.0));
    for branch in ["root", "child"] {
        assert_eq!(core_map(&s, branch), pairs(&[("perm", "stays")]), "{branch}");
        assert_eq!(s.view(branch).unwrap().core.len(), 1);
        assert_eq!(s.core_chars(branch).unwrap(), "perm: stays".len());
    }
    // A value written now with a TTL lives for its TTL from now.
    s.core_set("child", "tmp", "again", CoreWrite { importance: 3, ttl: Some(10.0) }).unwrap();
    assert_eq!(core_map(&s, "child")["tmp"], "again");
    s.set_clock(Clock::Fixed(T0 + 72.0));
    assert!(!core_map(&s, "child").contains_key("tmp"));
}

#[test]
fn defect_09_core_budget_evicts_lowest_importance_then_oldest_never_pinned() {
    let s = mem_with(|c| c.core_max_chars = 100);
    s.create_root("root").unwrap();
    let ten = "0123456789";
    s.core_set("root", "p", &"P".repeat(20), imp(5)).unwrap(); // 23 chars
    s.core_set("root", "a", ten, imp(2)).unwrap(); // 13
    s.core_set("root", "b", ten, imp(1)).unwrap(); // 13
    s.core_set("root", "c", ten, imp(2)).unwrap(); // 13
    s.core_set("root", "d", ten, imp(3)).unwrap(); // 13: 75, plus 4 newlines between the lines
    assert_eq!(s.core_chars("root").unwrap(), 79);

    // Over by 13 (79 + newline + 33): the lowest importance goes first.
    let out = s.core_set("root", "e", &"e".repeat(30), imp(1)).unwrap(); // 33
    assert_eq!(out.evicted, vec!["b"]);
    assert_eq!(s.core_chars("root").unwrap(), 99);

    // The key just written is never evicted, even at importance 1.
    s.fork("root", Some("child")).unwrap();
    let out = s.core_set("child", "f", &"f".repeat(20), imp(1)).unwrap(); // 23 -> 123
    assert_eq!(out.evicted, vec!["e"]);
    // Eviction of inherited keys happens in the writing branch only.
    assert!(core_map(&s, "root").contains_key("e"));

    // Same importance: the oldest goes first.
    let out = s.core_set("child", "g", &"g".repeat(40), imp(4)).unwrap(); // 43 -> 133
    assert_eq!(out.evicted, vec!["f", "a"]);
    assert_eq!(core_map(&s, "child").keys().collect::<Vec<_>>(), vec!["c", "d", "g", "p"]);
    assert_eq!(s.core_chars("child").unwrap(), 95);

    // Pinned keys are never evicted, even when the budget cannot be met.
    let out = s.core_set("child", "q", &"q".repeat(80), imp(5)).unwrap(); // 83 -> 179
    assert_eq!(out.evicted, vec!["c", "d", "g"]);
    assert_eq!(core_map(&s, "child").keys().collect::<Vec<_>>(), vec!["p", "q"]);
    assert_eq!(s.core_chars("child").unwrap(), 107);

    // Every evicted value is in archival as `Core evicted: KEY\nVALUE`.
    let evicted: BTreeMap<String, (String, Vec<String>)> = search(&s, "child", "", 100, &["CORE_EVICT"])
        .into_iter()
        .map(|r| {
            let key = r.tags.iter().find_map(|t| t.strip_prefix("core_key:")).unwrap().to_string();
            (key, (r.text, r.tags.to_vec()))
        })
        .collect();
    assert_eq!(evicted.keys().collect::<Vec<_>>(), vec!["a", "b", "c", "d", "e", "f", "g"]);
    assert_eq!(evicted["a"], (format!("Core evicted: a\n{ten}"), tags(&["CORE_EVICT", "core_key:a"])));
    assert_eq!(evicted["g"].0, format!("Core evicted: g\n{}", "g".repeat(40)));
    // The parent's view keeps its own keys and only its own eviction record.
    assert_eq!(search(&s, "root", "", 100, &["CORE_EVICT"]).len(), 1);
    assert_eq!(core_map(&s, "root").keys().collect::<Vec<_>>(), vec!["a", "c", "d", "e", "p"]);
}

// ---------------------------------------------------------------------------------------------
// Item 12: unknown branch ids sleep, then silently write to the root.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_12_unknown_branch_is_not_found_everywhere_and_writes_nothing() {
    let db = FileDb::new();
    let s = db.open();
    s.create_root("root").unwrap();
    s.fork("root", Some("child")).unwrap();
    s.core_set("root", "k", "v", CoreWrite::default()).unwrap();
    let e = s.recall_append("root", "note", "an event", &[]).unwrap().id;
    let r = s.archival_add("root", "a record", &[]).unwrap().id;
    s.set_node_uid("child", "node-1").unwrap();

    let obs = db.observer();
    let before = dump(&obs);
    let ghost = "ghost";
    let one = tags(&["t"]);
    let q = Search { query: "record".into(), k: 5, tags: vec![] };
    type Check<'a> = (&'a str, Box<dyn Fn() -> Result<()> + 'a>);
    let checks: Vec<Check<'_>> = vec![
        ("view", Box::new(|| s.view(ghost).map(drop))),
        ("branch", Box::new(|| s.branch(ghost).map(drop))),
        ("path", Box::new(|| s.path(ghost).map(drop))),
        ("children", Box::new(|| s.children(ghost).map(drop))),
        ("ops", Box::new(|| s.ops(Some(ghost), None).map(drop))),
        ("core", Box::new(|| s.core(ghost).map(drop))),
        ("core_chars", Box::new(|| s.core_chars(ghost).map(drop))),
        ("recall_list", Box::new(|| s.recall_list(ghost, None).map(drop))),
        ("recall_search", Box::new(|| s.recall_search(ghost, "event", 5).map(drop))),
        ("archival_get", Box::new(|| s.archival_get(ghost, r).map(drop))),
        ("archival_list", Box::new(|| s.archival_list(ghost, None).map(drop))),
        ("archival_search", Box::new(|| s.archival_search(ghost, &q).map(drop))),
        ("fork", Box::new(|| s.fork(ghost, Some("new")).map(drop))),
        ("fork generated", Box::new(|| s.fork(ghost, None).map(drop))),
        ("set_node_uid", Box::new(|| s.set_node_uid(ghost, "uid-x").map(drop))),
        ("core_set", Box::new(|| s.core_set(ghost, "k", "v", CoreWrite::default()).map(drop))),
        ("core_delete", Box::new(|| s.core_delete(ghost, &["k"]).map(drop))),
        ("recall_append", Box::new(|| s.recall_append(ghost, "note", "text", &one).map(drop))),
        ("recall_evict ids", Box::new(|| s.recall_evict(ghost, &EvictSelector::Ids(vec![e])).map(drop))),
        ("recall_evict oldest", Box::new(|| s.recall_evict(ghost, &EvictSelector::Oldest(1)).map(drop))),
        (
            "recall_evict kind",
            Box::new(|| s.recall_evict(ghost, &EvictSelector::Kind("note".into())).map(drop)),
        ),
        ("recall_exclude", Box::new(|| s.recall_exclude(ghost, &[e]))),
        ("recall_summarize", Box::new(|| s.recall_summarize(ghost, "note", "sum", &[e]).map(drop))),
        ("archival_add", Box::new(|| s.archival_add(ghost, "text", &one).map(drop))),
        ("archival_update", Box::new(|| s.archival_update(ghost, r, Some("new text"), None).map(drop))),
        ("archival_delete", Box::new(|| s.archival_delete(ghost, r).map(drop))),
        (
            "write: a valid op then an unknown branch",
            Box::new(|| {
                s.write(|tx| {
                    tx.core_set("root", "k", "changed", CoreWrite::default())?;
                    tx.archival_add("child", "written first", &[])?;
                    tx.recall_append(ghost, "note", "text", &[])?;
                    Ok(())
                })
            }),
        ),
    ];
    for (name, check) in &checks {
        let started = Instant::now();
        let result = check();
        let elapsed = started.elapsed();
        assert_eq!(result.as_ref().err().map(Error::kind), Some(ErrorKind::NotFound), "{name}: {result:?}");
        assert!(elapsed < Duration::from_millis(300), "{name} took {elapsed:?}");
    }
    assert_eq!(dump(&obs), before, "a failed call wrote something");
    assert_eq!(core_map(&s, "root")["k"], "v");
    // The node_uid of a branch is known, a mis-typed one is not.
    assert!(s.core("node-1").is_ok());
    assert_eq!(kind_of(s.core("node-2")), ErrorKind::NotFound);
    // Nothing was written to the root in place of the unknown branch.
    assert_eq!(archival_texts(&s, "root"), vec!["a record"]);
    assert_eq!(event_ids(&s, "root"), vec![e]);
    assert_eq!(dump(&obs), before);
}

// ---------------------------------------------------------------------------------------------
// Item 13: rendering writes, so reading a prompt changes memory.
// ---------------------------------------------------------------------------------------------

#[test]
fn defect_13_reading_writes_nothing() {
    let db = FileDb::new();
    {
        let s = db.open();
        s.create_root("root").unwrap();
        s.core_set("root", "goal", "stencil", CoreWrite::default()).unwrap();
        let e = s.recall_append("root", "note", "first event", &tags(&["x"])).unwrap().id;
        s.recall_append("root", "note", "second event", &[]).unwrap();
        let r = s.archival_add("root", "mpi tuning notes", &tags(&["BENCH"])).unwrap().id;
        s.fork("root", Some("child")).unwrap();
        s.set_node_uid("child", "node-7").unwrap();
        s.recall_summarize("child", "note", "first in short", &[e]).unwrap();
        s.archival_update("child", r, Some("gpu tuning notes"), None).unwrap();
        s.core_set("child", "tmp", "short-lived", CoreWrite { importance: 2, ttl: Some(5.0) }).unwrap();
    }
    let obs = db.observer();
    let before = dump(&obs);
    let version = data_version(&obs);
    let ops_before = obs.query_row("SELECT count(*) FROM ops", [], |r| r.get::<_, i64>(0)).unwrap();

    // A fresh handle (cold caches), reading everything, including after its TTLs ran out.
    let mut s = db.open();
    let q = |query: &str| Search { query: query.into(), k: 5, tags: vec![] };
    for round in 0..2 {
        if round == 1 {
            s.set_clock(Clock::Fixed(T0 + 3600.0));
        }
        for branch in ["root", "child", "node-7"] {
            let view = s.view(branch).unwrap();
            assert!(!view.core.is_empty());
            s.core(branch).unwrap();
            s.core_chars(branch).unwrap();
            s.recall_list(branch, Some(1)).unwrap();
            s.recall_list(branch, None).unwrap();
            s.recall_search(branch, "event", 5).unwrap();
            s.recall_search(branch, "", 5).unwrap();
            s.archival_list(branch, None).unwrap();
            let id = view.archival[0].id;
            s.archival_get(branch, id).unwrap();
            s.archival_search(branch, &q("tuning")).unwrap();
            s.archival_search(branch, &q("")).unwrap();
            s.archival_search(branch, &Search { query: "notes".into(), k: 3, tags: tags(&["BENCH"]) })
                .unwrap();
            s.path(branch).unwrap();
            s.branch(branch).unwrap();
            s.children(branch).unwrap();
            s.ops(Some(branch), None).unwrap();
        }
        s.branches().unwrap();
        s.ops(None, None).unwrap();
        // A read inside a write transaction that writes nothing.
        s.write(|tx| tx.view("child").map(drop)).unwrap();
    }
    // Reads that fail write nothing either.
    assert!(s.archival_get("root", 987_654).is_err());
    drop(s);

    assert_eq!(data_version(&obs), version, "a read committed a write");
    assert_eq!(dump(&obs), before);
    let ops_after = obs.query_row("SELECT count(*) FROM ops", [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(ops_after, ops_before);
}

// ---------------------------------------------------------------------------------------------
// Redaction (SPEC §5).
// ---------------------------------------------------------------------------------------------

const SECRETS: [&str; 15] = [
    "abc123secret",
    "hunter2",
    "s3cr3tvalue",
    "sk-abcdefghijklmnop1234",
    "hf_abcdefghijk1",
    "tok987xyz",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "pgpass77",
    "sk-zyxwvutsrqponmlk9876",
    "plainvalue42",
    "MIIEpAIBAAKCAQEA",
    "escapedpw9",
    "dbpass55",
    "jsonpass7",
];

fn write_secrets(s: &mut Store) -> (i64, i64) {
    // A runner that passed a key where its name goes.
    s.set_context(OpContext {
        phase: Some("token=tok987xyz".into()),
        actor: Some("sk-abcdefghijklmnop1234".into()),
    });
    s.create_root("root").unwrap();
    // A runner's metadata: a key that names a secret, and secrets among its texts.
    let meta =
        serde_json::json!({"api_key": "abc123secret", "seen": ["sk-abcdefghijklmnop1234"], "score": 0.5});
    s.write(|tx| tx.set_branch_meta("root", &meta)).unwrap();
    // A tool call whose arguments name a secret, in a child's conversation.
    s.fork("root", Some("agent")).unwrap();
    let call = serde_json::json!({"tool": "login", "args": {"user": "ann", "password": "s3cr3tvalue", "pass": "jsonpass7"}});
    s.step_add("agent", &Step::new(StepType::Action, call).unwrap()).unwrap();
    s.recall_append("agent", "hf_abcdefghijk1", "an event whose kind is a key", &[]).unwrap();
    s.core_set("root", "creds", "API_KEY=abc123secret and sk-abcdefghijklmnop1234", CoreWrite::default())
        .unwrap();
    let e = s
        .recall_append("root", "note", "login with password: hunter2", &tags(&["token=tok987xyz"]))
        .unwrap()
        .id;
    let r = s.archival_add("root", "hf_abcdefghijk1 and secret: s3cr3tvalue", &tags(&["keys"])).unwrap().id;
    s.recall_summarize("root", "note", "used Password = hunter2 again", &[e]).unwrap();
    s.archival_update("root", r, Some("rotated: token: tok987xyz"), None).unwrap();
    // Credentials known by their shape, a URL's password, a key's name holding one, and a value
    // under a key that names a secret.
    s.recall_append("root", "note", "pushed with ghp_abcdefghijklmnopqrstuvwxyz0123456789", &[]).unwrap();
    s.archival_add(
        "root",
        "aws AKIAIOSFODNN7EXAMPLE\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA",
        &[],
    )
    .unwrap();
    s.core_set("root", "db", "postgres://ann:pgpass77@db/runs", CoreWrite::default()).unwrap();
    s.core_set("root", "openai_api_key", "plainvalue42", CoreWrite::default()).unwrap();
    // A tool's JSON output held in a JSON string, and an environment dump.
    s.fork("root", Some("tools")).unwrap();
    s.recall_append("tools", "tool", r#"{"stdout": "{\"password\": \"escapedpw9\"}"}"#, &[]).unwrap();
    s.archival_add("tools", "env: DB_HOST=db DB_PASS=dbpass55", &[]).unwrap();
    (e, r)
}

#[test]
fn redaction_masks_secrets_before_storage_in_every_layer_and_the_journal() {
    let db = FileDb::new();
    let (e, r) = {
        let mut s = db.open();
        let ids = write_secrets(&mut s);
        // A key is named as given: one holding a secret is refused.
        let key = s.core_set("root", "key_sk-zyxwvutsrqponmlk9876", "v", CoreWrite::default());
        assert_eq!(kind_of(key), ErrorKind::InvalidInput);
        let core = core_map(&s, "root");
        assert_eq!(core["creds"], "API_KEY=*** and ***", "core value");
        assert_eq!(core["db"], "postgres://ann:***@db/runs");
        assert_eq!(core["openai_api_key"], "***");
        let recall = s.recall_list("root", None).unwrap();
        assert_eq!(recall.events.len(), 1);
        assert_eq!(recall.events[0].text, "pushed with ***");
        assert_eq!(recall.summaries[0].text, "used Password = *** again");
        assert_eq!(s.archival_get("root", ids.1).unwrap().text, "rotated: token: ***");
        let meta = s.branch("root").unwrap().meta;
        assert_eq!(meta, serde_json::json!({"api_key": "***", "seen": ["***"], "score": 0.5}), "branch meta");
        // Nothing searchable holds a secret.
        for secret in SECRETS {
            assert!(search(&s, "root", secret, 10, &[]).is_empty(), "{secret}");
        }
        let journal = serde_json::to_string(&s.ops(None, None).unwrap()).unwrap();
        for secret in SECRETS {
            assert!(!journal.contains(secret), "journal holds {secret}: {journal}");
        }
        let op = &s.ops(Some("root"), Some(1)).unwrap()[0];
        assert_eq!((op.actor.as_deref(), op.phase.as_deref()), (Some("***"), Some("token=***")));
        assert_eq!(s.recall_list("agent", None).unwrap().events[0].kind.as_ref(), "***", "event kind");
        ids
    };
    // The summarised event and the record's first version, as stored in the file.
    let obs = db.observer();
    let (text, tags_json): (String, String) = obs
        .query_row("SELECT text, tags FROM events WHERE seq = ?1", [e], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap();
    assert_eq!(text, "login with password: ***");
    assert_eq!(tags_json, r#"["token=***"]"#);
    let first: String =
        obs.query_row("SELECT text FROM archival WHERE seq = ?1", [r], |row| row.get(0)).unwrap();
    assert_eq!(first, "*** and secret: ***");
    // No secret anywhere in the file (tables, FTS index, journal).
    drop(obs);
    let mut bytes = file_bytes(&db.path);
    let wal = db.path.with_extension("sqlite-wal");
    if wal.exists() {
        bytes.extend(file_bytes(&wal));
    }
    for secret in SECRETS {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{secret} is in the database file"
        );
    }
}

#[test]
fn redaction_can_be_disabled() {
    let mut s = mem_with(|c| c.redaction.enabled = false);
    let (_, r) = write_secrets(&mut s);
    assert_eq!(core_map(&s, "root")["creds"], "API_KEY=abc123secret and sk-abcdefghijklmnop1234");
    assert_eq!(core_map(&s, "root")["openai_api_key"], "plainvalue42");
    assert!(s.core_set("root", "key_sk-zyxwvutsrqponmlk9876", "v", CoreWrite::default()).is_ok());
    assert_eq!(s.recall_list("root", None).unwrap().summaries[0].text, "used Password = hunter2 again");
    assert_eq!(s.archival_get("root", r).unwrap().text, "rotated: token: tok987xyz");
    assert_eq!(s.branch("root").unwrap().meta["api_key"], "abc123secret");
    assert_eq!(search_ids(&s, "root", "tok987xyz", 5, &[]), vec![r]);
    let journal = serde_json::to_string(&s.ops(None, None).unwrap()).unwrap();
    assert!(journal.contains("abc123secret"), "{journal}");
    assert_eq!(s.ops(None, Some(1)).unwrap()[0].actor.as_deref(), Some("sk-abcdefghijklmnop1234"));
    assert_eq!(s.recall_list("agent", None).unwrap().events[0].kind.as_ref(), "hf_abcdefghijk1");
}

// ---------------------------------------------------------------------------------------------
// The journal (SPEC §8).
// ---------------------------------------------------------------------------------------------

#[test]
fn journal_has_one_row_per_mutation_with_phase_and_actor() {
    let mut s = mem();
    s.set_context(OpContext { phase: Some("phase-1".into()), actor: Some("agent-7".into()) });
    let mut expected: Vec<(&str, &str)> = Vec::new(); // (branch, layer word in the op name)
    s.create_root("root").unwrap();
    expected.push(("root", "branch"));
    s.fork("root", Some("c")).unwrap();
    expected.push(("c", "fork"));
    s.set_node_uid("c", "node-c").unwrap();
    expected.push(("c", "uid"));
    s.core_set("c", "k", "v", CoreWrite::default()).unwrap();
    expected.push(("c", "core"));
    s.core_delete("c", &["k"]).unwrap();
    expected.push(("c", "core"));
    let e1 = s.recall_append("c", "note", "one", &[]).unwrap().id;
    expected.push(("c", "recall"));
    let e2 = s.recall_append("c", "note", "two", &[]).unwrap().id;
    expected.push(("c", "recall"));
    let e3 = s.recall_append("c", "note", "three", &[]).unwrap().id;
    expected.push(("c", "recall"));
    s.recall_exclude("c", &[e1]).unwrap();
    expected.push(("c", "recall"));
    s.recall_summarize("c", "note", "two in short", &[e2]).unwrap();
    expected.push(("c", "recall"));
    s.recall_evict("c", &EvictSelector::Ids(vec![e3])).unwrap();
    expected.push(("c", "recall"));
    let r = s.archival_add("c", "record", &[]).unwrap().id;
    expected.push(("c", "archival"));
    s.archival_update("c", r, Some("record v2"), None).unwrap();
    expected.push(("c", "archival"));
    s.archival_delete("c", r).unwrap();
    expected.push(("c", "archival"));
    s.recall_append("c", "note", "four", &[]).unwrap();
    expected.push(("c", "recall"));

    // No-ops and failures write no row.
    assert!(!s.fork("root", Some("c")).unwrap().created);
    assert!(s.recall_append("c", "note", "four", &[]).unwrap().skipped);
    assert!(s.core_delete("c", &["never-set"]).unwrap().is_empty());
    assert!(s.core_set("c", "", "v", CoreWrite::default()).is_err());
    assert!(s.archival_update("c", r, Some("gone"), None).is_err());

    s.set_context(OpContext { phase: Some("phase-2".into()), actor: None });
    s.write(|tx| {
        tx.core_set("root", "a", "1", CoreWrite::default())?;
        tx.archival_add("root", "two ops in one transaction", &[])?;
        Ok(())
    })
    .unwrap();
    expected.push(("root", "core"));
    expected.push(("root", "archival"));

    let ops = s.ops(None, None).unwrap();
    assert_eq!(ops.len(), expected.len(), "{ops:#?}");
    for (i, (op, (branch, word))) in ops.iter().zip(&expected).enumerate() {
        assert_eq!(op.branch.as_deref(), Some(*branch), "row {i}: {op:?}");
        assert!(op.op.contains(word), "row {i}: {:?} lacks {word}", op.op);
        assert_eq!(op.ts, T0);
        if i < expected.len() - 2 {
            assert_eq!(op.phase.as_deref(), Some("phase-1"), "row {i}");
            assert_eq!(op.actor.as_deref(), Some("agent-7"), "row {i}");
        } else {
            assert_eq!(op.phase.as_deref(), Some("phase-2"), "row {i}");
            assert_eq!(op.actor, None, "row {i}");
        }
    }
    assert!(ops.windows(2).all(|w| w[0].seq < w[1].seq));
    // Per-branch listing, by id or node_uid.
    let of_c = s.ops(Some("node-c"), None).unwrap();
    assert_eq!(of_c.len(), expected.iter().filter(|e| e.0 == "c").count());
    assert_eq!(of_c, s.ops(Some("c"), None).unwrap());
    assert!(of_c.iter().all(|o| o.node_uid.as_deref() == Some("node-c")));
}

// ---------------------------------------------------------------------------------------------
// Database compatibility (SPEC §3, §9 exit code 6).
// ---------------------------------------------------------------------------------------------

#[test]
fn newer_schema_database_is_refused_and_left_untouched() {
    let db = FileDb::new();
    {
        let s = db.open();
        s.create_root("root").unwrap();
        s.core_set("root", "k", "v", CoreWrite::default()).unwrap();
    }
    {
        let conn = db.observer();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        // Fold the WAL into the main file so the file alone is the database.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    }
    let before = file_bytes(&db.path);
    let err = Store::open(&db.path, Config::default(), Clock::Fixed(T0))
        .err()
        .expect("a newer database must be refused");
    assert_eq!(err.kind(), ErrorKind::IncompatibleDb);
    assert_eq!(file_bytes(&db.path), before, "the newer database was modified");
    let wal = db.path.with_extension("sqlite-wal");
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0, "refusing wrote to the WAL");
    let conn = db.observer();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION + 1);
}

fn foreign_sqlite_file(path: &Path, user_version: i64) -> Vec<u8> {
    {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch(
            "CREATE TABLE branches(id TEXT PRIMARY KEY, parent_id TEXT);
             CREATE TABLE events(id INTEGER PRIMARY KEY, branch_id TEXT, text TEXT);
             INSERT INTO branches VALUES ('root', NULL);
             INSERT INTO events(branch_id, text) VALUES ('root', 'hello');",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", user_version).unwrap();
    }
    file_bytes(path)
}

#[test]
fn non_memctl_sqlite_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("legacy.sqlite");
    let before = foreign_sqlite_file(&path, 0);
    let err = Store::open(&path, Config::default(), Clock::Fixed(T0))
        .err()
        .expect("a foreign SQLite file must be refused");
    assert_eq!(err.kind(), ErrorKind::IncompatibleDb);
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn non_memctl_sqlite_file_with_a_user_version_is_refused() {
    // Other applications set user_version too; 1 is also memctl's current schema version.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other-app.sqlite");
    let before = foreign_sqlite_file(&path, SCHEMA_VERSION);
    let result = Store::open(&path, Config::default(), Clock::Fixed(T0));
    assert_eq!(
        result.as_ref().err().map(Error::kind),
        Some(ErrorKind::IncompatibleDb),
        "a foreign file with user_version {SCHEMA_VERSION} was opened"
    );
    drop(result);
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn non_sqlite_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let content = "these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &content).unwrap();
    let err =
        Store::open(&path, Config::default(), Clock::Fixed(T0)).err().expect("a text file must be refused");
    assert_eq!(err.kind(), ErrorKind::IncompatibleDb);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
}

// ---------------------------------------------------------------------------------------------
// Forks and node_uids (SPEC §4.1).
// ---------------------------------------------------------------------------------------------

#[test]
fn fork_is_idempotent_and_conflicts_on_another_parent() {
    let db = FileDb::new();
    let s = db.open();
    let root = s.create_root("root").unwrap();
    assert!(root.created);
    assert_eq!((root.parent.clone(), root.depth), (None, 0));
    s.create_root("other").unwrap();
    let c = s.fork("root", Some("c")).unwrap();
    assert_eq!((c.branch.as_str(), c.parent.as_deref(), c.depth, c.created), ("c", Some("root"), 1, true));
    s.core_set("c", "k", "v", CoreWrite::default()).unwrap();

    let obs = db.observer();
    let before = dump(&obs);
    let again = s.fork("root", Some("c")).unwrap();
    assert!(!again.created);
    assert_eq!((again.fork_seq, again.depth, again.parent.as_deref()), (c.fork_seq, 1, Some("root")));
    assert!(!s.create_root("root").unwrap().created);
    assert_eq!(dump(&obs), before, "an idempotent repeat wrote something");

    for (result, what) in [
        (s.fork("other", Some("c")), "fork c under another parent"),
        (s.fork("c", Some("c")), "fork c under itself"),
        (s.fork("c", Some("root")), "fork the root under its child"),
        (s.create_root("c"), "make the child a root"),
        (s.fork("root", Some("other")), "fork a root under a root"),
    ] {
        assert_eq!(kind_of(result), ErrorKind::Conflict, "{what}");
    }
    for bad in ["", "has space", "semi;colon", &"x".repeat(129), "-"] {
        assert_eq!(kind_of(s.fork("root", Some(bad))), ErrorKind::InvalidInput, "{bad:?}");
    }
    assert_eq!(dump(&obs), before, "a refused fork wrote something");
    assert_eq!(core_map(&s, "c")["k"], "v");

    // Generated ids: valid, distinct, under the right parent.
    let g1 = s.fork("c", None).unwrap();
    let g2 = s.fork("c", None).unwrap();
    assert_ne!(g1.branch, g2.branch);
    for g in [&g1, &g2] {
        assert!(g.created);
        validate_branch_id(&g.branch, "id").unwrap();
        assert_eq!(s.branch(&g.branch).unwrap().parent.as_deref(), Some("c"));
        assert_eq!(g.depth, 2);
    }
    assert_eq!(
        s.children("c").unwrap().into_iter().map(|b| b.id).collect::<Vec<_>>(),
        vec![g1.branch.clone(), g2.branch.clone()]
    );
    assert!(!s.fork("c", Some(&g1.branch)).unwrap().created);
}

#[test]
fn node_uid_resolves_everywhere_a_branch_is_taken() {
    let s = mem();
    s.create_root("root").unwrap();
    s.fork("root", Some("c1")).unwrap();
    s.fork("root", Some("c2")).unwrap();
    let b = s.set_node_uid("c1", "node-abc").unwrap();
    assert_eq!((b.id.as_str(), b.node_uid.as_deref()), ("c1", Some("node-abc")));
    s.set_node_uid("root", "root-uid").unwrap();

    let u = "node-abc";
    s.core_set(u, "k", "v", CoreWrite::default()).unwrap();
    let e = s.recall_append(u, "note", "via uid", &[]).unwrap().id;
    let r = s.archival_add(u, "record via uid", &[]).unwrap().id;
    assert_eq!(s.branch(u).unwrap().id, "c1");
    assert_eq!(s.view(u).unwrap(), s.view("c1").unwrap());
    assert_eq!(s.view(u).unwrap().branch.node_uid.as_deref(), Some(u));
    assert_eq!(core_map(&s, "c1")["k"], "v");
    assert_eq!(event_ids(&s, "c1"), vec![e]);
    assert_eq!(&*s.archival_get(u, r).unwrap().branch, "c1");
    assert_eq!(search_ids(&s, u, "uid", 5, &[]), vec![r]);
    assert_eq!(s.recall_search(u, "uid", 5).unwrap()[0].id, e);
    s.archival_update(u, r, Some("updated via uid"), None).unwrap();
    s.recall_exclude(u, &[e]).unwrap();
    assert!(event_ids(&s, "c1").is_empty());
    assert_eq!(s.core_delete(u, &["k"]).unwrap(), vec!["k"]);
    assert_eq!(s.path(u).unwrap().branch().id, "c1");
    assert_eq!(s.ops(Some(u), None).unwrap(), s.ops(Some("c1"), None).unwrap());

    // Forking under a uid, and the idempotent repeat through the parent's id or uid.
    let g = s.fork(u, Some("g")).unwrap();
    assert_eq!(g.parent.as_deref(), Some("c1"));
    assert!(!s.fork("c1", Some("g")).unwrap().created);
    assert!(!s.fork(u, Some("g")).unwrap().created);
    assert!(!s.fork("root-uid", Some("c2")).unwrap().created);
    assert_eq!(
        s.children("root-uid").unwrap().into_iter().map(|b| b.id).collect::<Vec<_>>(),
        vec!["c1", "c2"]
    );
    assert_eq!(
        s.branches().unwrap().into_iter().find(|b| b.id == "c1").unwrap().node_uid.as_deref(),
        Some(u)
    );

    // Conflicts: a uid naming another branch (by uid or by id), a new branch named like a uid.
    assert_eq!(kind_of(s.set_node_uid("c2", u)), ErrorKind::Conflict);
    assert_eq!(kind_of(s.set_node_uid("c2", "c1")), ErrorKind::Conflict);
    assert_eq!(kind_of(s.fork("root", Some(u))), ErrorKind::Conflict);
    assert_eq!(kind_of(s.create_root(u)), ErrorKind::Conflict);
    assert_eq!(kind_of(s.set_node_uid("c2", "bad uid")), ErrorKind::InvalidInput);
    assert_eq!(s.branch("c2").unwrap().node_uid, None);
    // Setting the same uid again is fine; renaming frees the old uid.
    s.set_node_uid("c1", u).unwrap();
    s.set_node_uid("c1", "node-def").unwrap();
    assert_eq!(kind_of(s.core(u)), ErrorKind::NotFound);
    assert_eq!(s.branch("node-def").unwrap().id, "c1");
    s.set_node_uid("c2", u).unwrap();
    assert_eq!(s.branch(u).unwrap().id, "c2");
}

/// Two handles on one new database file, and a chain root → level-1 → … → level-`levels`
/// written through the first; the file's directory and the deepest level's id.
fn two_handles_on_a_chain(levels: usize) -> (tempfile::TempDir, Store, Store, String) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, parent) = two_handles_on_a_chain_at(&dir.path().join("memory.sqlite"), levels);
    (dir, a, b, parent)
}

/// [`two_handles_on_a_chain`] on the database at `location` (a file, or a PostgreSQL URL).
fn two_handles_on_a_chain_at(location: &Path, levels: usize) -> (Store, Store, String) {
    let a = Store::open(location, Config::default(), Clock::Fixed(T0)).unwrap();
    let b = Store::open(location, Config::default(), Clock::Fixed(T0)).unwrap();
    a.create_root("root").unwrap();
    let mut parent = "root".to_string();
    for depth in 1..=levels {
        a.fork(&parent, Some(&format!("level-{depth}"))).unwrap();
        parent = format!("level-{depth}");
    }
    (a, b, parent)
}

/// A handle that read a deep chain's path from a scan of every branch, and kept the scan for
/// its next such path, reads a sibling's path afresh once another handle has marked the
/// sibling: the kept scan does not outlive another connection's commit.
#[test]
fn a_kept_branch_scan_does_not_outlive_another_handles_mark() {
    let (_dir, a, b, parent) = two_handles_on_a_chain(8);
    // Each leaf's path holds 10 of the 11 branches: read from a scan of them all.
    a.fork(&parent, Some("leaf-a")).unwrap();
    a.fork(&parent, Some("leaf-b")).unwrap();
    assert_eq!(b.view("leaf-a").unwrap().branch.status, BranchStatus::Alive);
    a.mark_branch("leaf-b", BranchStatus::Dead, Some("a dead end"), false).unwrap();
    let leaf_b = b.view("leaf-b").unwrap().branch;
    assert_eq!((leaf_b.status, leaf_b.status_note.as_deref()), (BranchStatus::Dead, Some("a dead end")));
    assert_eq!(b.path("leaf-b").unwrap().branch().status, BranchStatus::Dead);
}

/// A handle that kept a branch's path, its path to an anchor or the branch alone (for its
/// writes) learns that another handle's gc collected the branch: its next write there is
/// not-found, never rows in a collected branch. Its own commits in between do not hide the
/// other handle's collection, nor does one made before its first check. On SQLite and on
/// PostgreSQL (which has no data version: each check but the first reads the collection count;
/// the first takes the count the handle's first batch read, which a collection made before
/// that check leaves behind).
#[test]
fn a_cached_path_does_not_outlive_another_handles_gc() {
    cached_paths_do_not_outlive_another_handles_gc(|| {
        let (dir, a, b, parent) = two_handles_on_a_chain(16);
        (Some(dir), a, b, parent)
    });
    if let Some(cluster) = crate::pg_cluster::Cluster::shared("the two-handle gc regression") {
        cached_paths_do_not_outlive_another_handles_gc(|| {
            let (a, b, parent) = two_handles_on_a_chain_at(&PathBuf::from(cluster.new_database()), 16);
            (None, a, b, parent)
        });
    }
}

/// [`a_cached_path_does_not_outlive_another_handles_gc`] on the chains of 16 levels that
/// `handles` makes, a new one for each thing kept.
fn cached_paths_do_not_outlive_another_handles_gc(
    handles: impl Fn() -> (Option<tempfile::TempDir>, Store, Store, String),
) {
    let step = Step::new(StepType::User, serde_json::json!({"text": "too late"})).unwrap();
    // What b keeps of the branch, and b's first write after the gc, which goes through it (a
    // write that fails rolls back, and a rollback clears all b keeps).
    let cases = ["whole path", "branch", "path to its anchor"]
        .into_iter()
        .flat_map(|keep| [(keep, false), (keep, true)]);
    for (keep, collected_first) in cases {
        // Below the anchor that every 16th level keeps (depth 16).
        let (_dir, a, b, parent) = handles();
        if collected_first {
            // Before b's first check: b's count from its start is behind from then on.
            a.fork(&parent, Some("early")).unwrap();
            a.mark_branch("early", BranchStatus::Dead, None, false).unwrap();
            assert_eq!(a.gc(&GcRequest::default()).unwrap().collected, ["early"]);
        }
        a.fork(&parent, Some("doomed")).unwrap();
        let core_write = || b.core_set("doomed", "k", "too late", CoreWrite::default()).map(drop);
        let append = || b.recall_append("doomed", "note", "too late", &[]).map(drop);
        match keep {
            "whole path" => b.view("doomed").map(drop),
            "branch" => b.recall_append("doomed", "note", "kept", &[]).map(drop),
            _ => b.core_set("doomed", "k", "kept", CoreWrite::default()).map(drop),
        }
        .unwrap();
        b.recall_append("root", "note", "b's own commit", &[]).unwrap();
        a.mark_branch("doomed", BranchStatus::Dead, None, false).unwrap();
        assert_eq!(a.gc(&GcRequest::default()).unwrap().collected, ["doomed"]);
        b.recall_append("root", "note", "another own commit", &[]).unwrap();
        let kinds = [
            if keep == "path to its anchor" { core_write() } else { append() },
            b.archival_add("doomed", "too late", &[]).map(drop),
            b.step_add("doomed", &step).map(drop),
            b.apply_update("doomed", r#"{"recall": [{"kind": "note", "text": "too late"}]}"#, true).map(drop),
            core_write(),
            b.core_delete("doomed", &["k"]).map(drop),
            b.recall_exclude("doomed", &[1]).map(drop),
            b.view("doomed").map(drop),
        ]
        .map(|call| call.map_err(|err| err.kind()));
        assert_eq!(
            kinds,
            [Err(ErrorKind::NotFound); 8],
            "kept its {keep} (a collection before its first check: {collected_first}): the first \
             write, archival add, step add, apply, core set, core del, recall exclude, view"
        );
    }
}
