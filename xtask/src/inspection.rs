//! j. Inspection on a deep tree: `diff`, `why` and `path` as whole CLI calls, against `read` of
//! the same branch. 1,000 branches and 100,000 events: a chain of 996 nodes (depth 0..995),
//! each writing 3 core keys, 100 events and 5 archival records, plus four leaves: two siblings
//! forked at depth 900 (a deep pair that differs little) and two forked at depths 400 and 600
//! (a pair 200 levels apart). `--quick` writes 10 events per node. Then `messages` and a recall
//! search of the deepest node's whole timeline, and writes at depth 995: a recall append, a
//! core set and an archival add, on a copy of the database.
//!
//! The database is built once per schema version and kept under `target/bench/inspection/`.

use crate::gen::{bench_config, node_id, Rng, EVENT_KINDS};
use crate::report::{median, millis, percentile, Floor, Row};
use anyhow::{ensure, Context, Result};
use memctl_core::{Clock, CoreWrite, Store, SCHEMA_VERSION};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const CHAIN: usize = 996;
/// Bump when the generated data changes, so a kept database is rebuilt.
const GENERATOR_VERSION: u32 = 1;
/// (spine depth forked at, leaf id)
const LEAVES: [(usize, &str); 4] = [(400, "leaf-400"), (600, "leaf-600"), (900, "sib-a"), (900, "sib-b")];
const RECORDS_PER_NODE: usize = 5;
/// The core key `why` is asked about: every node of the chain writes it.
const WHY_KEY: &str = "key0";
/// The recall search's query: two words of the generated texts and a kind.
const SEARCH: &str = "mpirun cachelat error";

pub fn inspection(quick: bool, out_dir: &Path) -> Result<(Vec<Row>, Value)> {
    let events_per_node = if quick { 10 } else { 100 };
    let runs = if quick { 10 } else { 30 };
    let dir = out_dir.join("inspection");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir
        .join(format!("inspection-{events_per_node}e-schema{SCHEMA_VERSION}-gen{GENERATOR_VERSION}.sqlite"));
    if !path.is_file() {
        let building = path.with_extension("building");
        let _ = std::fs::remove_file(&building);
        build(&building, events_per_node)?;
        std::fs::rename(&building, &path).with_context(|| format!("keeping {}", path.display()))?;
        // The store checkpointed its log on closing; what is left beside the old name is empty.
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", building.display()));
        }
    }
    let store = Store::open_existing(&path, bench_config(), Clock::System)?;
    let deepest = node_id(CHAIN - 1);
    let depth = store.branch(&deepest)?.depth;
    let branches = store.branches()?.len();
    let deepest_view = store.view(&deepest)?;
    let events = deepest_view.events.len();
    // What the calls that print whole views print: every event and record of a view; for a
    // diff, the events and records its sides list (a changed record once), as `diff` reads them.
    let (a, b) = (LEAVES[0].1, LEAVES[1].1);
    let b_view = store.view(b)?;
    let whole = |v: &memctl_core::View| CallFloor::Printing(v.events.len(), v.archival.len());
    let diff = store.diff(a, b, &[])?;
    let differing = {
        let events = diff.recall.as_ref().map_or(0, |r| r.only_a.len() + r.only_b.len());
        let records = diff.archival.as_ref().map_or(0, |r| r.only_a.len() + r.only_b.len() + r.changed.len());
        CallFloor::Printing(events, records)
    };
    let (deepest_prints, b_prints, ab_prints) = (whole(&deepest_view), whole(&b_view), differing);
    ensure!(
        depth as usize == CHAIN - 1 && branches == CHAIN + LEAVES.len(),
        "the tree: depth {depth}, {branches} branches"
    );
    drop((store, deepest_view, b_view, diff));

    let memctl = crate::paths::release_binary("memctl");
    ensure!(memctl.exists(), "{} is missing: run `cargo xtask bench`, which builds it", memctl.display());
    let call_on = |db: &Path, args: &[&str]| -> Result<f64> {
        let t = Instant::now();
        let output = Command::new(&memctl).arg("--db").arg(db).args(args).output()?;
        ensure!(output.status.success(), "memctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        Ok(millis(t.elapsed()))
    };
    let call = |args: &[&str]| call_on(&path, args);
    let (sib_a, sib_b) = (LEAVES[2].1, LEAVES[3].1);
    // Each call, and what its floor does besides starting and opening the database.
    let calls: [(&str, Vec<&str>, CallFloor); 14] = [
        ("read (core, 20 events, 8 records)", vec!["read", &deepest], CallFloor::Insert),
        ("read --all (the whole view)", vec!["read", "--all", &deepest], deepest_prints),
        ("read of a deep sibling", vec!["read", sib_b], CallFloor::Insert),
        ("diff of the deep siblings", vec!["diff", sib_a, sib_b], CallFloor::Insert),
        ("diff --json of the deep siblings", vec!["--json", "diff", sib_a, sib_b], CallFloor::Insert),
        ("read --all of leaf-600", vec!["read", "--all", b], b_prints),
        ("diff of leaves 200 levels apart", vec!["diff", a, b], ab_prints),
        ("why of a key written at every level", vec!["why", &deepest, WHY_KEY], CallFloor::History(WHY_KEY)),
        ("why --json", vec!["--json", "why", &deepest, WHY_KEY], CallFloor::History(WHY_KEY)),
        ("path", vec!["path", &deepest], CallFloor::Path),
        ("path --json", vec!["--json", "path", &deepest], CallFloor::Path),
        // The conversation's read, of a path whose 99,600 events hold no step.
        ("messages, no step among the events", vec!["messages", &deepest], CallFloor::Insert),
        // Calls an agent makes at every step: its core, and how full its memory is (the
        // latter measures every current archival record of the view).
        ("core get", vec!["core", "get", &deepest], CallFloor::Insert),
        ("pressure", vec!["pressure", &deepest], CallFloor::Insert),
    ];
    let label = format!("j inspection, D={depth}, {branches} branches, {events} events");
    let mut rows = Vec::new();
    let mut medians = Vec::new();
    let mut detail = json!({"depth": depth, "branches": branches, "events_in_view": events, "runs": runs});
    // The process floor writes a row, and the writes below write theirs, on a copy: the kept
    // database stays as built.
    let copy_dir = tempfile::Builder::new().prefix("memctl-bench-inspection-").tempdir()?;
    let copy = copy_dir.path().join("memory.sqlite");
    std::fs::copy(&path, &copy)?;
    for (name, args, _) in &calls {
        call(args).with_context(|| name.to_string())?; // warm the page cache
    }
    // In rounds of every call and every floor, so that a ratio (`why / read`, a call to its
    // floor) compares times taken in the same phase of the machine, not minutes apart. A call
    // that prints a whole view is held to a process printing as many rows, `why` to one
    // printing the key's writes with their journal rows, `path` to one printing each node's
    // rows.
    let (mut process_floor, mut timings) = (Vec::with_capacity(runs), vec![Vec::new(); calls.len()]);
    let mut own_floors = vec![Vec::new(); calls.len()];
    for _ in 0..runs {
        process_floor.extend(crate::floor::process(&copy, 1)?);
        for (((name, args, floor), times), own) in calls.iter().zip(&mut timings).zip(&mut own_floors) {
            times.push(call(args).with_context(|| name.to_string())?);
            match *floor {
                CallFloor::Insert => {}
                CallFloor::Printing(events, records) => {
                    own.extend(crate::floor::process_printing(&path, events, records, 1)?)
                }
                CallFloor::History(key) => own.extend(crate::floor::process_history(&path, key, 1)?),
                CallFloor::Path => own.extend(crate::floor::process_path(&path, &deepest, 1)?),
            }
        }
    }
    let floor = Floor::new(median(&process_floor), crate::floor::PROCESS);
    for (((name, _, call_floor), times), own) in calls.iter().zip(timings).zip(own_floors) {
        let floor = match *call_floor {
            CallFloor::Insert => floor.clone(),
            CallFloor::Printing(events, records) => {
                Floor::new(median(&own), crate::floor::printing(events, records))
            }
            CallFloor::History(key) => Floor::new(median(&own), crate::floor::history(key)),
            CallFloor::Path => Floor::new(median(&own), crate::floor::PATH),
        };
        let (row, m) = cli_row(&label, name, &times, &floor);
        rows.push(row);
        detail[*name] = json!({"median_ms": m, "p95_ms": percentile(&times, 95.0)});
        medians.push((*name, m));
    }
    // A recall search of the deepest node's whole timeline, held to a process scanning every
    // event for a query word.
    let name = "recall search of the whole timeline, k=5";
    let search = ["recall", "search", &deepest, SEARCH, "-k", "5"];
    call(&search).with_context(|| name.to_string())?; // warm the page cache
    let (mut times, mut scans) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        times.push(call(&search)?);
        scans.extend(crate::floor::process_scanning(&path, SEARCH, 1)?);
    }
    let scan = Floor::new(median(&scans), crate::floor::SCANNING);
    let (row, m) = cli_row(&label, name, &times, &scan);
    rows.push(row);
    detail[name] = json!({"median_ms": m, "p95_ms": percentile(&times, 95.0)});
    // Writes at the deepest node, which need its branch (and core its path to the nearest
    // anchor), not its whole path: on a copy, so the kept database stays as built; each call
    // writes a new text (an identical one would not be stored again). The first append,
    // untimed, consolidates the 99,600 events the node sees: the database was built with
    // consolidation off, and the CLI's default config has it on.
    let writes: [(&str, [&str; 3]); 3] = [
        ("recall append at the deepest node", ["recall", "append", "--kind=note"]),
        ("core set at the deepest node", ["core", "set", "--importance=3"]),
        ("archival add at the deepest node", ["archival", "add", "--tag=BENCH"]),
    ];
    for (name, [group, command, option]) in writes {
        let mut written = 0;
        let mut write = || {
            written += 1;
            let text = format!("bench write {written}");
            match command {
                "set" => call_on(&copy, &[group, command, option, &deepest, "bench-key", &text]),
                _ => call_on(&copy, &[group, command, option, &deepest, &text]),
            }
        };
        write().with_context(|| name.to_string())?;
        let times = (0..runs).map(|_| write()).collect::<Result<Vec<f64>>>()?;
        let (row, m) = cli_row(&label, name, &times, &floor);
        rows.push(row);
        detail[name] = json!({"median_ms": m, "p95_ms": percentile(&times, 95.0)});
    }
    let by = |name: &str| medians.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, m)| *m);
    let ratios = [
        (
            "diff of the deep siblings / read",
            by("diff of the deep siblings") / by("read of a deep sibling"),
            "target: <= 3x",
        ),
        (
            "diff 200 levels apart / read --all",
            by("diff of leaves 200 levels apart") / by("read --all of leaf-600"),
            "its output is the 20,000 events one leaf sees and the other does not",
        ),
        (
            "why / read",
            by("why of a key written at every level") / by("read (core, 20 events, 8 records)"),
            "target: <= 3x",
        ),
    ];
    for (name, ratio, note) in ratios {
        let mut row = Row::new(label.clone(), name, "x").value(ratio);
        if !note.is_empty() {
            row = row.note(note);
        }
        rows.push(row);
    }
    if let Some(row) = rows.iter_mut().find(|r| r.metric == "one CLI call: path") {
        *row = row.clone().note("target: <= 50 ms at depth 1,000");
    }
    Ok((rows, detail))
}

/// What the floor of a call does besides starting and opening the database.
#[derive(Debug, Clone, Copy)]
enum CallFloor {
    /// Inserts one row ([`crate::floor::process`]).
    Insert,
    /// Prints as many events and records as the call, which prints a whole view or diff.
    Printing(usize, usize),
    /// Prints every write of the core key with its journal row, as `why` of it lists them.
    History(&'static str),
    /// Prints the path of the deepest node with each node's rows, as `path` reads them.
    Path,
}

/// The row of one kind of CLI call timed `times` (ms), and its median.
fn cli_row(label: &str, name: &str, times: &[f64], floor: &Floor) -> (Row, f64) {
    let m = median(times);
    let row = Row::new(label, format!("one CLI call: {name}"), "ms")
        .value(m)
        .p95(percentile(times, 95.0))
        .floor(floor.clone());
    (row, m)
}

fn build(path: &Path, events_per_node: usize) -> Result<()> {
    let store = Store::open(path, bench_config(), Clock::System)?;
    let mut rng = Rng::new(0x1A5);
    let mut event_i = 0usize;
    for i in 0..CHAIN {
        let id = node_id(i);
        store.write(|tx| {
            match i {
                0 => tx.create_root(&id)?,
                _ => tx.fork(&node_id(i - 1), Some(&id))?,
            };
            for k in 0..3 {
                let value = format!("c{i}.{k} {}", rng.words(5, 15));
                tx.core_set(&id, &format!("key{k}"), &value, CoreWrite::default())?;
            }
            for _ in 0..events_per_node {
                let kind = EVENT_KINDS[event_i % EVENT_KINDS.len()];
                tx.recall_append(&id, kind, &format!("e{event_i} {}", rng.words(20, 40)), &[])?;
                event_i += 1;
            }
            for r in 0..RECORDS_PER_NODE {
                tx.archival_add(&id, &format!("a{i}.{r} {}", rng.words(60, 120)), &["BENCH".into()])?;
            }
            for (depth, leaf) in LEAVES {
                if i == depth {
                    tx.fork(&id, Some(leaf))?;
                    tx.core_set(leaf, WHY_KEY, &format!("{leaf} value"), CoreWrite::default())?;
                    for e in 0..events_per_node {
                        tx.recall_append(leaf, "note", &format!("{leaf} event {e}"), &[])?;
                    }
                    tx.archival_add(leaf, &format!("{leaf} record"), &[])?;
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}
