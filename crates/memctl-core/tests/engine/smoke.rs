use memctl_core::*;

fn store() -> Store {
    Store::open_in_memory(Config::default(), Clock::Fixed(1_700_000_000.0)).unwrap()
}

#[test]
fn copy_on_write_smoke() {
    let s = store();
    s.create_root("root").unwrap();
    s.core_set("root", "a", "1", CoreWrite::default()).unwrap();
    s.recall_append("root", "note", "first event", &[]).unwrap();
    let r1 = s.archival_add("root", "mpi tuning notes", &["BENCH".into()]).unwrap();
    s.fork("root", Some("c1")).unwrap();
    s.fork("root", Some("c2")).unwrap();
    s.core_set("root", "a", "late", CoreWrite::default()).unwrap();
    s.core_set("c1", "b", "2", CoreWrite::default()).unwrap();
    s.archival_update("c1", r1.id, Some("gpu tuning notes"), None).unwrap();
    let v1 = s.view("c1").unwrap();
    let v2 = s.view("c2").unwrap();
    assert_eq!(
        v1.core.iter().map(|e| (&*e.key, &*e.value)).collect::<Vec<_>>(),
        vec![("a", "1"), ("b", "2")]
    );
    assert_eq!(v2.core.len(), 1);
    assert_eq!(v2.core[0].value, "1");
    assert_eq!(v1.archival[0].text, "gpu tuning notes");
    assert_eq!(*v1.archival[0].tags, vec!["BENCH"]);
    assert_eq!(v2.archival[0].text, "mpi tuning notes");
    let hits = s.archival_search("c1", &Search { query: "gpu".into(), k: 5, tags: vec![] }).unwrap();
    assert_eq!(hits.len(), 1);
    let hits = s.archival_search("c2", &Search { query: "gpu".into(), k: 5, tags: vec![] }).unwrap();
    assert_eq!(hits.len(), 0);
    assert!(!s.fork("root", Some("c1")).unwrap().created);
    assert_eq!(s.fork("c2", Some("c1")).unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(s.core_set("nope", "a", "1", CoreWrite::default()).unwrap_err().kind(), ErrorKind::NotFound);
    let e = s.recall_append("c1", "note", "second", &[]).unwrap();
    s.recall_evict("c1", &EvictSelector::Ids(vec![e.id])).unwrap();
    assert_eq!(s.recall_list("c1", None).unwrap().events.len(), 1);
    assert!(!s.ops(None, None).unwrap().is_empty());
}

/// A database file in a new directory, and the configuration to open it with.
fn file_db() -> (tempfile::TempDir, std::path::PathBuf, Config) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    (dir, path, Config { auto_consolidate: false, ..Config::default() })
}

/// The file stays an ordinary SQLite database: plain SQLite reads every committed row while
/// memctl keeps writing, and finds the file intact.
#[test]
fn plain_sqlite_reads_what_memctl_writes() {
    let (_dir, path, config) = file_db();
    let s = Store::open(&path, config.clone(), Clock::Fixed(1_700_000_000.0)).unwrap();
    s.create_root("root").unwrap();
    let plain = rusqlite::Connection::open(&path).unwrap();
    let count = |table: &str| -> i64 {
        plain.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
    };
    for round in 1..=3i64 {
        for i in 0..200 {
            s.recall_append("root", "note", &format!("round {round} event {i}"), &[]).unwrap();
        }
        s.archival_add("root", &format!("record of round {round}"), &[]).unwrap();
        assert_eq!(count("events"), 200 * round, "plain SQLite sees every committed event");
        assert_eq!(count("archival"), round);
    }
    let check: String = plain.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(s);
    let reopened = Store::open_existing(&path, config, Clock::System).unwrap();
    assert_eq!(reopened.recall_list("root", None).unwrap().events.len(), 600);
}

/// Two handles on one file, writing in turns and in runs: each finds the other's commits
/// before it hands out a seq, so event ids and journal seqs never repeat and keep rising.
#[test]
fn handles_taking_turns_never_reuse_a_seq() {
    let (_dir, path, config) = file_db();
    let a = Store::open(&path, config.clone(), Clock::Fixed(1_700_000_000.0)).unwrap();
    let b = Store::open(&path, config, Clock::Fixed(1_700_000_000.0)).unwrap();
    a.create_root("root").unwrap();
    let mut ids = Vec::new();
    for i in 0..300 {
        let writer = if (i / 7) % 2 == 0 || i % 3 == 0 { &a } else { &b };
        ids.push(writer.recall_append("root", "note", &format!("event {i}"), &[]).unwrap().id);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids rise: {ids:?}");
    let seqs: Vec<i64> = a.ops(None, None).unwrap().iter().map(|op| op.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "journal seqs rise");
    assert!(seqs.iter().all(|seq| !ids.contains(seq)), "events and journal rows share no seq");
}
