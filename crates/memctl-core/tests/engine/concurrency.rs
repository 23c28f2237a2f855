//! SPEC §10: many processes write one database at once — no lost write, no "database is locked".
//!
//! `eight_processes_write_one_database` creates a database, then re-executes this test binary
//! eight times as `--exact concurrency::concurrency_child`, each child told its index and the database path
//! through environment variables. The children open the store, report ready, wait for a common
//! start signal (a file), then make 1,000 writes each — forks, core sets, recall appends and
//! archival adds, every write its own transaction through the public API — and exit 0 only if
//! no call failed. The parent then reads everything back through the public read API and checks
//! that every write is there exactly once, in each process's order, with unique seqs.

use memctl_core::{Clock, Config, CoreWrite, OpContext, Store};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PROCESSES: usize = 8;
const WRITES: usize = 1_000;
/// Forks happen at these write indexes (the first one creates the process's first branch).
const FORK_EVERY: usize = 250;
const CORE_KEYS: usize = 5;

const ENV_INDEX: &str = "MEMCTL_CONCURRENCY_CHILD";
const ENV_DB: &str = "MEMCTL_CONCURRENCY_DB";
const ENV_DIR: &str = "MEMCTL_CONCURRENCY_DIR";
const CHILD_TEST: &str = "concurrency::concurrency_child";

/// Generous: a child waits this long for the start signal, the parent this long for children.
const PATIENCE: Duration = Duration::from_secs(300);

/// One planned write. Child and parent derive the same plan from (process, index).
#[derive(Debug, Clone, PartialEq)]
enum Write {
    Fork { parent: String, id: String },
    Core { branch: String, key: String, value: String },
    Recall { branch: String, text: String },
    Archival { branch: String, text: String },
}

impl Write {
    fn op_name(&self) -> &'static str {
        match self {
            Write::Fork { .. } => "fork",
            Write::Core { .. } => "core.set",
            Write::Recall { .. } => "recall.append",
            Write::Archival { .. } => "archival.add",
        }
    }

    fn branch(&self) -> &str {
        match self {
            Write::Fork { id, .. } => id,
            Write::Core { branch, .. } | Write::Recall { branch, .. } | Write::Archival { branch, .. } => {
                branch
            }
        }
    }
}

fn own_branch(process: usize, generation: usize) -> String {
    format!("p{process}-b{generation}")
}

fn actor(process: usize) -> String {
    format!("proc-{process}")
}

/// The `n`th write of process `p`: a chain of forks every 250 writes, between them core sets
/// (on the shared root and the process's branch), recall appends (root and own branch) and
/// archival adds (root and own branch).
fn plan(p: usize, n: usize) -> Write {
    let generation = n / FORK_EVERY;
    let own = own_branch(p, generation);
    if n % FORK_EVERY == 0 {
        let parent = match generation {
            0 => "root".to_string(),
            g => own_branch(p, g - 1),
        };
        return Write::Fork { parent, id: own };
    }
    match n % 8 {
        0 => Write::Core {
            branch: "root".into(),
            key: format!("p{p}.k{}", (n / 8) % CORE_KEYS),
            value: format!("p{p} n={n}"),
        },
        4 => Write::Core {
            branch: own,
            key: format!("k{}", (n / 8) % CORE_KEYS),
            value: format!("p{p} n={n}"),
        },
        1 | 5 => Write::Recall { branch: "root".into(), text: format!("p{p} root event n={n}") },
        2 | 6 => Write::Recall { branch: own, text: format!("p{p} own event n={n}") },
        3 => Write::Archival {
            branch: "root".into(),
            text: format!("p{p} root record n={n} mpi cache tuning"),
        },
        _ => Write::Archival { branch: own, text: format!("p{p} own record n={n} gpu kernel") },
    }
}

fn plans() -> Vec<Vec<Write>> {
    (0..PROCESSES).map(|p| (0..WRITES).map(|n| plan(p, n)).collect()).collect()
}

fn open(db: &Path) -> Store {
    // Every appended event must stay visible to be counted: no consolidation.
    let config = Config { auto_consolidate: false, ..Config::default() };
    Store::open(db, config, Clock::System).expect("open the database")
}

fn ready_file(dir: &Path, p: usize) -> PathBuf {
    dir.join(format!("ready-{p}"))
}

fn go_file(dir: &Path) -> PathBuf {
    dir.join("go")
}

/// The child side: does nothing unless started by the parent test.
#[test]
fn concurrency_child() {
    let Ok(index) = std::env::var(ENV_INDEX) else {
        return;
    };
    let p: usize = index.parse().expect("child index");
    let db = PathBuf::from(std::env::var(ENV_DB).expect("db path"));
    let dir = PathBuf::from(std::env::var(ENV_DIR).expect("work dir"));

    let mut store = open(&db);
    store.set_context(OpContext { phase: Some("concurrency".into()), actor: Some(actor(p)) });
    std::fs::write(ready_file(&dir, p), b"").expect("write the ready file");
    let waiting = Instant::now();
    while !go_file(&dir).exists() {
        assert!(waiting.elapsed() < PATIENCE, "process {p}: no start signal");
        std::thread::sleep(Duration::from_micros(200));
    }

    let started = Instant::now();
    let mut last_seq = 0i64;
    let mut slowest = Duration::ZERO;
    let tags = vec![format!("proc:{p}")];
    for n in 0..WRITES {
        let write = plan(p, n);
        let call = Instant::now();
        let result = match &write {
            Write::Fork { parent, id } => store.fork(parent, Some(id)).map(|o| {
                assert!(o.created, "process {p} write {n}: fork of {id} not created");
                o.fork_seq
            }),
            Write::Core { branch, key, value } => {
                store.core_set(branch, key, value, CoreWrite::default()).map(|o| {
                    assert!(
                        o.evicted.is_empty(),
                        "process {p} write {n}: unexpected eviction {:?}",
                        o.evicted
                    );
                    o.seq
                })
            }
            Write::Recall { branch, text } => store.recall_append(branch, "note", text, &tags).map(|o| {
                assert!(!o.skipped, "process {p} write {n}: append skipped");
                o.id
            }),
            Write::Archival { branch, text } => store.archival_add(branch, text, &tags).map(|o| {
                assert!(!o.skipped, "process {p} write {n}: archival add skipped");
                o.id
            }),
        };
        slowest = slowest.max(call.elapsed());
        let seq = result.unwrap_or_else(|e| {
            panic!(
                "process {p} write {n} ({write:?}) failed: kind {:?}: {} (hint: {:?})",
                e.kind(),
                e.message(),
                e.hint()
            )
        });
        assert!(seq > last_seq, "process {p} write {n}: seq {seq} not above the previous {last_seq}");
        last_seq = seq;
    }
    println!("process {p}: {WRITES} writes in {:?}, slowest call {:?}", started.elapsed(), slowest);
}

struct Running {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Running {
    fn output(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!("--- stdout ---\n{}\n--- stderr ---\n{}", read(&self.stdout), read(&self.stderr))
    }
}

fn spawn(p: usize, db: &Path, dir: &Path) -> Running {
    let exe = std::env::current_exe().expect("the test binary's path");
    let stdout = dir.join(format!("child-{p}.stdout"));
    let stderr = dir.join(format!("child-{p}.stderr"));
    let child = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(ENV_INDEX, p.to_string())
        .env(ENV_DB, db)
        .env(ENV_DIR, dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("child stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("child stderr file"))
        .spawn()
        .expect("spawn a child process");
    Running { child, stdout, stderr }
}

fn kill_all(children: &mut [Running]) {
    for running in children.iter_mut() {
        let _ = running.child.kill();
        let _ = running.child.wait();
    }
}

#[test]
fn eight_processes_write_one_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let db = dir.join("memory.sqlite");
    {
        let store = open(&db);
        store.create_root("root").expect("create the root");
    }

    let mut children: Vec<Running> = (0..PROCESSES).map(|p| spawn(p, &db, dir)).collect();

    // Barrier: every child has opened the database and waits; then all start at once.
    let waiting = Instant::now();
    loop {
        let ready = (0..PROCESSES).filter(|&p| ready_file(dir, p).exists()).count();
        if ready == PROCESSES {
            break;
        }
        for (p, running) in children.iter_mut().enumerate() {
            if let Ok(Some(status)) = running.child.try_wait() {
                let output = running.output();
                kill_all(&mut children);
                panic!("child {p} exited before the start with {status}\n{output}");
            }
        }
        if waiting.elapsed() > PATIENCE {
            kill_all(&mut children);
            panic!("only {ready} of {PROCESSES} children became ready");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let started = Instant::now();
    std::fs::write(go_file(dir), b"").expect("write the start signal");

    let mut failures = Vec::new();
    for p in 0..PROCESSES {
        let status = loop {
            match children[p].child.try_wait().expect("wait for a child") {
                Some(status) => break status,
                None if started.elapsed() > PATIENCE => {
                    kill_all(&mut children);
                    panic!("child {p} still running after {PATIENCE:?}");
                }
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        if status.success() {
            let stdout = std::fs::read_to_string(&children[p].stdout).unwrap_or_default();
            if let Some(at) = stdout.find("process ") {
                eprintln!("{}", stdout[at..].lines().next().unwrap_or(""));
            }
        } else {
            failures.push(format!("child {p} exited with {status}\n{}", children[p].output()));
        }
    }
    eprintln!("{PROCESSES} processes x {WRITES} writes: {:?}", started.elapsed());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    verify(&open(&db));
}

/// Reads everything back through the public API and checks it against the plans.
fn verify(store: &Store) {
    let plans = plans();

    // Every write journalled exactly once, under its process's actor, in the process's order
    // (the journal's details are not checked here: the rows themselves are, below).
    let ops = store.ops(None, None).expect("read the journal");
    let mut by_actor: HashMap<String, Vec<&memctl_core::Op>> = HashMap::new();
    for op in &ops {
        if let Some(actor) = &op.actor {
            by_actor.entry(actor.clone()).or_default().push(op);
        }
    }
    assert_eq!(ops.len(), 1 + PROCESSES * WRITES, "journal rows: the root plus one per write");
    for (p, plan) in plans.iter().enumerate() {
        let mine = by_actor.get(&actor(p)).map_or(&[][..], Vec::as_slice);
        assert_eq!(mine.len(), WRITES, "journal rows of process {p}");
        let mut last = 0;
        for (n, (op, write)) in mine.iter().zip(plan).enumerate() {
            assert!(op.seq > last, "process {p}: journal out of order at {n}");
            last = op.seq;
            assert_eq!(op.op, write.op_name(), "process {p} write {n}: op");
            assert_eq!(op.branch.as_deref(), Some(write.branch()), "process {p} write {n}: branch");
        }
    }

    // Every seq seen anywhere must be unique.
    let mut seqs: HashSet<i64> = HashSet::new();
    let mut claim = |seq: i64, what: &str| {
        assert!(seqs.insert(seq), "seq {seq} ({what}) used twice");
    };
    for op in &ops {
        claim(op.seq, "journal");
    }

    // Branches: the root plus every planned fork, with the planned parent.
    let branches = store.branches().expect("list branches");
    assert_eq!(branches.len(), 1 + PROCESSES * WRITES.div_ceil(FORK_EVERY));
    let parents: HashMap<&str, Option<&str>> =
        branches.iter().map(|b| (b.id.as_str(), b.parent.as_deref())).collect();
    for branch in &branches {
        claim(branch.fork_seq, "fork");
    }

    // Expected rows per branch, in write order.
    let mut events: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut records: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut core: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut core_writes = 0usize;
    for (p, plan) in plans.iter().enumerate() {
        for write in plan {
            match write {
                Write::Fork { parent, id } => assert_eq!(
                    parents.get(id.as_str()),
                    Some(&Some(parent.as_str())),
                    "process {p}: branch {id}"
                ),
                Write::Core { branch, key, value } => {
                    core_writes += 1;
                    core.entry(branch.clone()).or_default().insert(key.clone(), value.clone());
                }
                Write::Recall { branch, text } => {
                    events.entry(branch.clone()).or_default().push(text.clone())
                }
                Write::Archival { branch, text } => {
                    records.entry(branch.clone()).or_default().push(text.clone())
                }
            }
        }
    }

    // A process's rows on one branch appear in its write order (seq order = program order).
    let process_of = |text: &str| text.split(' ').next().unwrap_or("").to_string();
    let check_order = |what: &str, branch: &str, mut got: Vec<(i64, String)>| {
        got.sort();
        let mut last: HashMap<String, usize> = HashMap::new();
        for (_, text) in &got {
            let n: usize = text
                .split("n=")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|s| s.parse().ok())
                .expect("n in text");
            if let Some(previous) = last.insert(process_of(text), n) {
                assert!(n > previous, "{what} on {branch}: {text} after n={previous}");
            }
        }
    };

    for (branch, expected) in &events {
        let view = store.recall_list(branch, None).expect("recall list");
        let own: Vec<(i64, String)> =
            view.events.iter().filter(|e| *e.branch == **branch).map(|e| (e.id, e.text.clone())).collect();
        let got: HashSet<&str> = own.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(own.len(), expected.len(), "events on {branch}");
        for text in expected {
            assert!(got.contains(text.as_str()), "event lost on {branch}: {text}");
        }
        for (id, _) in &own {
            claim(*id, "event");
        }
        check_order("events", branch, own);
    }

    for (branch, expected) in &records {
        let list = store.archival_list(branch, None).expect("archival list");
        let own: Vec<(i64, String)> =
            list.iter().filter(|r| *r.branch == **branch).map(|r| (r.id, r.text.clone())).collect();
        let got: HashSet<&str> = own.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(own.len(), expected.len(), "archival records on {branch}");
        for text in expected {
            assert!(got.contains(text.as_str()), "record lost on {branch}: {text}");
        }
        for (id, _) in &own {
            claim(*id, "archival");
        }
        check_order("archival", branch, own);
    }

    let mut visible_core = 0usize;
    for (branch, expected) in &core {
        let entries = store.core(branch).expect("core");
        let own: HashMap<&str, &str> = entries
            .iter()
            .filter(|e| *e.branch == **branch)
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(own.len(), expected.len(), "core keys on {branch}");
        for (key, value) in expected {
            assert_eq!(
                own.get(key.as_str()),
                Some(&value.as_str()),
                "core key {key} on {branch}: the last write must win"
            );
        }
        for entry in entries.iter().filter(|e| *e.branch == **branch) {
            claim(entry.seq, "core");
            visible_core += 1;
        }
    }

    // No gaps: every seq up to the highest is accounted for, counting the overwritten core rows
    // (not visible through any read) that the journal shows were written.
    let highest = seqs.iter().copied().max().unwrap_or(0);
    let overwritten_core = core_writes - visible_core;
    assert_eq!(seqs.len() + overwritten_core, highest as usize, "seqs 1..={highest} allocated without gaps");
    assert_eq!(*seqs.iter().min().unwrap_or(&0), 1);
}
