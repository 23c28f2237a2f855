//! BENCH.md's workloads a–e, g and i in-process through memctl-core, h and p through the binary
//! (s, the scale workload, is in `scale.rs`; j, inspection, in `inspection.rs`); k runs gc, m
//! reads a conversation.

use crate::floor::{fts_batch, Consolidation, PlainDb, RecordWrite, SummaryWrite};
use crate::gen::{bench_config, node_id, query_words, vocab, Rng, EVENT_KINDS, PHASES};
use crate::options::BenchOptions;
use crate::report::{mean, median, micros, millis, percentile, table, timed, Floor, Python, Row};
use crate::tree::{apply, tree_ops, TreeOp, TREE_BRANCHES};
use anyhow::{ensure, Context, Result};
use memctl_core::{
    BranchStatus, Budget, Clock, Config, CoreWrite, FtsMode, GcRequest, Search, Step, StepType, Store, View,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Repetition counts: the full run and `--quick` differ only here.
struct Reps {
    /// `--quick`: workload s also builds a tenth of its database.
    quick: bool,
    /// Fresh fork chains per depth.
    fork_chains: usize,
    /// Fresh trees (workload b).
    trees: usize,
    /// Fresh 10,000-append runs (workload c).
    recall_runs: usize,
    /// Fresh archival databases per search mode (workload d).
    archival_builds: usize,
    /// Passes of the 100 searches over each archival database.
    search_passes: usize,
    /// Timed view reads on a warm handle, per depth (workload e).
    warm_reads: usize,
    /// Fresh handles, each timing its first (cold) read, per depth.
    cold_reads: usize,
    /// Processes per CLI call kind (workload h).
    cli_calls: usize,
    /// Paper exports and HTML viewers per tree (workload g).
    exports: usize,
    /// Imports of the 1,000-branch legacy database (workload i).
    imports: usize,
    /// CLI calls per process of workload p (BENCH.md: 500).
    parallel_calls: usize,
}

impl Reps {
    fn new(quick: bool) -> Reps {
        if quick {
            Reps {
                quick,
                fork_chains: 2,
                trees: 1,
                recall_runs: 1,
                archival_builds: 1,
                search_passes: 1,
                warm_reads: 20,
                cold_reads: 3,
                cli_calls: 20,
                exports: 5,
                imports: 1,
                parallel_calls: 100,
            }
        } else {
            Reps {
                quick,
                fork_chains: 5,
                trees: 3,
                recall_runs: 3,
                archival_builds: 2,
                search_passes: 2,
                warm_reads: 100,
                cold_reads: 10,
                cli_calls: 50,
                exports: 20,
                imports: 3,
                parallel_calls: 500,
            }
        }
    }
}

/// A fresh file database (default config unless given) in its own temporary directory.
struct Db {
    dir: tempfile::TempDir,
    path: PathBuf,
    store: Store,
}

impl Db {
    fn new(config: Config) -> Result<Db> {
        let dir = tempfile::Builder::new()
            .prefix("memctl-bench-")
            .tempdir()
            .context("creating a temporary directory")?;
        let path = dir.path().join("memory.sqlite");
        let store = Store::open(&path, config, Clock::System)?;
        Ok(Db { dir, path, store })
    }

    /// Closes the store (the last connection checkpoints the WAL) and returns the bytes on disk.
    fn close_and_measure(self) -> Result<u64> {
        let Db { dir, path, store } = self;
        drop(store);
        let mut bytes = 0;
        for suffix in ["", "-wal", "-shm"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            if let Ok(meta) = std::fs::metadata(&file) {
                bytes += meta.len();
            }
        }
        drop(dir);
        Ok(bytes)
    }
}

/// Runs the selected workloads, prints the table and writes `out_dir/bench.json`.
pub fn run(options: &BenchOptions, out_dir: &Path) -> Result<()> {
    let reps = Reps::new(options.quick);
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut details = Map::new();
    type Workload = fn(&Reps) -> Result<(Vec<Row>, Value)>;
    let workloads: [(char, &str, Workload); 14] = [
        ('a', "fork chain", fork_chain),
        ('b', "1000-branch tree", tree),
        ('c', "recall appends", recall_appends),
        ('d', "archival writes and search", archival),
        ('e', "read on a chain", chain_read),
        ('g', "paper export and HTML viewer", exports),
        ('h', "one CLI call", cli_call),
        ('i', "legacy import", legacy_import),
        ('k', "gc of 900 dead branches", gc_tree),
        ('m', "conversation messages", conversation_messages),
        ('j', "inspection: diff, why, path", |reps| {
            crate::inspection::inspection(reps.quick, &crate::paths::target_dir().join("bench"))
        }),
        ('p', "16 parallel CLI processes", parallel),
        ('s', "scale: 1M archival records", |reps| {
            crate::scale::scale(reps.quick, &crate::paths::target_dir().join("bench"))
        }),
        ('q', "PostgreSQL: whole CLI calls", |reps| crate::postgres::cli_calls(reps.cli_calls)),
    ];
    let selected: Vec<_> = workloads.into_iter().filter(|(name, _, _)| options.runs(*name)).collect();
    // On a terminal, a bar over the workloads; elsewhere (CI logs), one line per step.
    let bar = std::io::stderr().is_terminal().then(|| {
        indicatif::ProgressBar::new(selected.len() as u64).with_style(
            indicatif::ProgressStyle::with_template("bench {wide_bar} {pos}/{len} {msg}")
                .expect("a valid template"),
        )
    });
    let say = |line: String| match &bar {
        Some(bar) => bar.println(line),
        None => eprintln!("{line}"),
    };
    for (name, title, workload) in selected {
        say(format!("bench: {name}. {title}…"));
        if let Some(bar) = &bar {
            bar.set_message(format!("{name}. {title}"));
        }
        let t = Instant::now();
        let (mut new_rows, detail) = workload(&reps).with_context(|| format!("workload {name}"))?;
        say(format!("bench: {name} done in {:.1} s", t.elapsed().as_secs_f64()));
        if let Some(bar) = &bar {
            bar.inc(1);
        }
        rows.append(&mut new_rows);
        details.insert(name.to_string(), detail);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }

    let mode = if options.quick { "quick" } else { "full" };
    println!(
        "\nmemctl bench ({mode}, release build, {} CPUs, {:.0} s): medians over repetitions; \
         speedup = Python store / memctl for times, memctl / Python for rates\n",
        cpus(),
        started.elapsed().as_secs_f64()
    );
    print!("{}", table(&rows));

    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let out = out_dir.join("bench.json");
    let report = json!({
        "mode": mode,
        "only": options.only.map(|c| c.to_string()),
        "cpus": cpus(),
        "generated_at": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        "seconds": started.elapsed().as_secs_f64(),
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "details": details,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    println!("\nJSON: {}", out.display());
    if let Some(svg) = crate::plot::depth_svg(&rows) {
        let chart = out_dir.join("depth.svg");
        std::fs::write(&chart, svg).with_context(|| format!("writing {}", chart.display()))?;
        println!("Chart: {}", chart.display());
    }
    Ok(())
}

/// Copies the SQLite file `from`, and its WAL if it has one, to `to`: what a new connection
/// sees, without the checkpoint that would change the original's state. No writer may be at
/// work on `from`.
fn copy_with_wal(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    let wal = |path: &Path| {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        PathBuf::from(wal)
    };
    if wal(from).exists() {
        std::fs::copy(wal(from), wal(to))?;
    }
    Ok(())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// a. Root, then a chain of D forks: the time of each fork, and whether it grows with depth.
fn fork_chain(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    let mut rows = Vec::new();
    let mut detail = Map::new();
    let mut per_depth = Vec::new();
    let plain = PlainDb::new()?;
    let mut commits = Vec::with_capacity(1000);
    for i in 0..1000 {
        let start = Instant::now();
        plain.commit_fork(i, &node_id(i))?;
        commits.push(micros(start.elapsed()));
    }
    let floor = Floor::new(
        median(&commits),
        "plain SQLite commits writing what a fork writes: a row with 4 index entries, a counter, a journal row",
    );
    for depth in [10usize, 100, 1000] {
        let ids: Vec<String> = (0..=depth).map(node_id).collect();
        let (mut medians, mut p95s, mut heads, mut tails) = (vec![], vec![], vec![], vec![]);
        for _ in 0..reps.fork_chains {
            let db = Db::new(bench_config())?;
            db.store.create_root(&ids[0])?;
            let mut times = Vec::with_capacity(depth);
            for i in 1..=depth {
                let (_, t) = timed(|| db.store.fork(&ids[i - 1], Some(&ids[i])))?;
                times.push(micros(t));
            }
            medians.push(median(&times));
            p95s.push(percentile(&times, 95.0));
            let window = (depth / 10).max(1);
            heads.push(median(&times[..window]));
            tails.push(median(&times[depth - window..]));
        }
        let (fork_median, head, tail) = (median(&medians), median(&heads), median(&tails));
        per_depth.push(fork_median);
        rows.push(
            Row::new(format!("a fork chain D={depth}"), "per fork", "µs")
                .value(fork_median)
                .p95(median(&p95s))
                .python(Python::new(750.0, "0.75-1.6 ms"))
                .floor(floor.clone()),
        );
        detail.insert(
            format!("D={depth}"),
            json!({"median_us": fork_median, "p95_us": median(&p95s),
                   "first_tenth_median_us": head, "last_tenth_median_us": tail,
                   "repetitions": reps.fork_chains}),
        );
        if depth == 1000 {
            rows.push(
                Row::new("a fork depth check", "forks 901-1000 / forks 1-100", "x").value(tail / head).note(
                    format!(
                        "per-fork median {:.1} µs at depths 1-100, {:.1} µs at 901-1000; \
                         D=1000 vs D=10 chain medians {:.2}x (about 1 = independent of depth)",
                        head,
                        tail,
                        fork_median / per_depth[0]
                    ),
                ),
            );
        }
    }
    Ok((rows, Value::Object(detail)))
}

/// b. 1000 branches in BFS order, 29 single-transaction operations each.
fn tree(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    let ops = tree_ops();
    ensure!(ops.len() == 29_000, "the tree has {} operations", ops.len());
    let (mut totals, mut rss, mut sizes) = (vec![], vec![], vec![]);
    let mut per_op: [Vec<f64>; 4] = Default::default(); // per-rep medians: fork, core, recall, archival
    let mut visible_events = 0;
    for _ in 0..reps.trees {
        let db = Db::new(bench_config())?;
        let mut times: [Vec<f64>; 4] = Default::default();
        reset_peak_rss();
        let start = Instant::now();
        for op in &ops {
            let t = Instant::now();
            let slot = apply(&db.store, op)?;
            times[slot].push(micros(t.elapsed()));
        }
        totals.push(start.elapsed().as_secs_f64());
        rss.push(peak_rss_mb().unwrap_or(f64::NAN));
        visible_events = db.store.recall_list(&node_id(TREE_BRANCHES - 1), None)?.events.len();
        for (slot, t) in times.iter().enumerate() {
            per_op[slot].push(median(t));
        }
        sizes.push(db.close_and_measure()? as f64 / 1e6);
    }
    let total = median(&totals);
    let (floor, op_floors) = tree_floor(&ops, &BTreeMap::new(), reps.trees)?;
    let floor_what = format!(
        "plain SQLite, the same 29,000 texts, one commit each: a fork's 7 b-trees, a row, a hash \
         index entry and a journal row per core set and append, a row and a journal row per \
         archival add, and FTS5 entries {} records at a time (as memctl's index takes them)",
        fts_batch()
    );
    let mut rows = vec![
        Row::new("b tree 1000 branches", "29,000 ops total", "s")
            .value(total)
            .python(Python::new(6.0, "6.0 s"))
            .floor(Floor::new(floor, &floor_what))
            .note("auto_consolidate off (the variant below has it on); one transaction per operation"),
        Row::new("b tree 1000 branches", "throughput", "ops/s")
            .value(29_000.0 / total)
            .higher_is_better()
            .python(Python::new(4_840.0, "4,840 ops/s"))
            .floor(Floor::new(29_000.0 / floor, &floor_what)),
    ];
    let op_floors_what = [
        "plain SQLite's median commit of a fork's writes: a node row, its 4 index entries, a counter, \
         a journal row",
        "plain SQLite's median commit of a row, its hash index entry and a journal row",
        "plain SQLite's median commit of a row, its hash index entry and a journal row",
        "plain SQLite's median commit of a record and a journal row (FTS5 entries a batch at a time)",
    ];
    for (slot, name) in ["fork", "core set", "recall append", "archival add"].iter().enumerate() {
        rows.push(
            Row::new("b tree 1000 branches", format!("{name}, median"), "µs")
                .value(median(&per_op[slot]))
                .floor(Floor::new(op_floors[slot], op_floors_what[slot])),
        );
    }
    rows.push(
        Row::new("b tree 1000 branches", "peak RSS (process)", "MB")
            .value(median(&rss))
            .python(Python::new(148.0, "148 MB")),
    );
    rows.push(Row::new("b tree 1000 branches", "database size", "MB").value(median(&sizes)));
    // The variant: every append checks the branch's recall bounds and consolidates past them.
    // Its floor adds, to the commit of each append that consolidated, what that consolidation
    // wrote (read back from the database afterwards).
    let mut auto_totals = Vec::new();
    let mut last = None;
    for _ in 0..reps.trees {
        let db = Db::new(Config::default())?;
        let start = Instant::now();
        for op in &ops {
            apply(&db.store, op)?;
        }
        auto_totals.push(start.elapsed().as_secs_f64());
        last = Some(db);
    }
    let db = last.context("no tree was built")?;
    let consolidated = db.store.recall_list(&node_id(TREE_BRANCHES - 1), None)?;
    let consolidations = written_by_consolidation(&db.path, &ops)?;
    let auto_total = median(&auto_totals);
    let (auto_floor, _) = tree_floor(&ops, &consolidations, reps.trees)?;
    rows.push(
        Row::new("b tree 1000 branches", "29,000 ops, auto_consolidate on", "s")
            .value(auto_total)
            .python(Python::new(6.0, "6.0 s"))
            .floor(Floor::new(
                auto_floor,
                format!(
                    "the floor above, and in the commit of each of the {} appends that consolidated, \
                     what the consolidation wrote: its summaries (a row, an index entry, the ids \
                     covered), a row and two index entries per event it hid, the archival copy of \
                     the events (its FTS5 entry with its batch), a journal row",
                    consolidations.len()
                ),
            ))
            .note(format!(
                "with auto-consolidation node 999 sees {} events and {} summaries",
                consolidated.events.len(),
                consolidated.summaries.len()
            )),
    );
    let detail = json!({
        "total_s": totals, "peak_rss_mb": rss, "db_mb": sizes, "floor_s": floor,
        "auto_consolidate_s": auto_totals, "auto_consolidate_floor_s": auto_floor,
        "median_us": {"fork": median(&per_op[0]), "core_set": median(&per_op[1]),
                      "recall_append": median(&per_op[2]), "archival_add": median(&per_op[3])},
        "visible_events_at_node_999": visible_events,
        "repetitions": reps.trees,
    });
    Ok((rows, detail))
}

/// What plain SQLite takes to write the tree's texts, one commit per operation, with what
/// `consolidations` wrote in the commits of the appends they name: the seconds of the whole
/// tree, and the µs of a median commit of each kind of operation, in [`apply`]'s slots (medians
/// of `runs`).
fn tree_floor(
    ops: &[TreeOp],
    consolidations: &BTreeMap<usize, Consolidation>,
    runs: usize,
) -> Result<(f64, [f64; 4])> {
    let mut totals = Vec::new();
    let mut per_op: [Vec<f64>; 4] = Default::default();
    for _ in 0..runs {
        let plain = PlainDb::new()?;
        let mut times: [Vec<f64>; 4] = Default::default();
        let start = Instant::now();
        for (i, op) in ops.iter().enumerate() {
            let t = Instant::now();
            let slot = match op {
                TreeOp::Root(id) | TreeOp::Fork(_, id) => plain.commit_fork(i, id).map(|()| 0)?,
                TreeOp::Core(_, _, text) => plain.commit_row(i, text).map(|()| 1)?,
                TreeOp::Recall(_, _, text, _) => match consolidations.get(&i) {
                    Some(consolidation) => plain.commit_consolidating_row(i, text, consolidation),
                    None => plain.commit_row(i, text),
                }
                .map(|()| 2)?,
                TreeOp::Archival(_, text, tags) => plain.commit_record(i, text, tags).map(|()| 3)?,
            };
            times[slot].push(micros(t.elapsed()));
        }
        totals.push(start.elapsed().as_secs_f64());
        for (slot, t) in times.iter().enumerate() {
            per_op[slot].push(median(t));
        }
    }
    Ok((median(&totals), per_op.map(|medians| median(&medians))))
}

/// What auto-consolidation wrote in the tree database at `path`, keyed by the index in `ops` of
/// the append whose transaction wrote it: the append's event is the newest event older than
/// the consolidation's rows (events are appended in the order of the ops, one per append).
fn written_by_consolidation(path: &Path, ops: &[TreeOp]) -> Result<BTreeMap<usize, Consolidation>> {
    let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let appends: Vec<usize> =
        ops.iter().enumerate().filter(|(_, op)| matches!(op, TreeOp::Recall(..))).map(|(i, _)| i).collect();
    let events: Vec<i64> = conn
        .prepare("SELECT seq FROM events ORDER BY seq")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    ensure!(events.len() == appends.len(), "{} events for {} appends", events.len(), appends.len());
    let append_before = |seq: i64| -> Result<usize> {
        let k = events.partition_point(|&e| e < seq);
        ensure!(k > 0, "a consolidation's row (seq {seq}) before any event");
        Ok(appends[k - 1])
    };
    let mut consolidations: BTreeMap<usize, Consolidation> = BTreeMap::new();
    let mut rows =
        |sql: &str, add: &mut dyn FnMut(&mut Consolidation, &rusqlite::Row) -> Result<()>| -> Result<()> {
            let mut stmt = conn.prepare(sql)?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let consolidation = consolidations.entry(append_before(row.get(0)?)?).or_default();
                add(consolidation, row)?;
            }
            Ok(())
        };
    rows(
        "SELECT seq, summary_text, summarized_event_ids FROM inherited_summaries ORDER BY seq",
        &mut |c, row| {
            let events: String = row.get(2)?;
            let hidden: Vec<i64> = serde_json::from_str(&events)?;
            c.summaries.push(SummaryWrite { text: row.get(1)?, events, hidden });
            Ok(())
        },
    )?;
    rows(
        "SELECT seq, text, tags FROM archival WHERE tags LIKE '%\"RECALL_CONSOLIDATED\"%' ORDER BY seq",
        &mut |c, row| {
            c.records.push(RecordWrite { text: row.get(1)?, tags: row.get(2)? });
            Ok(())
        },
    )?;
    rows("SELECT seq, args FROM ops WHERE op = 'recall.consolidate' ORDER BY seq", &mut |c, row| {
        c.journal = row.get(1)?;
        Ok(())
    })?;
    // Seqs past every op's, a stretch of them per consolidation.
    for (k, (append, consolidation)) in consolidations.iter_mut().enumerate() {
        let (summaries, records) = (consolidation.summaries.len(), consolidation.records.len());
        ensure!(
            summaries == records && records < 16 && !consolidation.journal.is_empty(),
            "the consolidation of op {append}: {summaries} summaries, {records} archival copies, journal {:?}",
            consolidation.journal
        );
        consolidation.seq = (ops.len() + 16 * k) as i64;
    }
    Ok(consolidations)
}

/// g. The paper memory of node 999 on the tree of b, and the HTML viewer of trees of 100, 300
/// and 1,000 branches (its bytes per branch must not grow with the tree).
fn exports(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    let ops = tree_ops();
    let mut rows = Vec::new();
    let mut viewer = Vec::new();
    for branches in [100, 300, TREE_BRANCHES] {
        let db = Db::new(bench_config())?;
        for op in &ops[..branches * 29] {
            apply(&db.store, op)?;
        }
        let mut html_ms = Vec::new();
        let mut bytes = 0;
        for _ in 0..reps.exports {
            let t = Instant::now();
            let page = memctl_core::viewer_html(&db.store.viewer_data("bench")?);
            html_ms.push(millis(t.elapsed()));
            bytes = page.len();
        }
        let per_branch = bytes as f64 / branches as f64;
        rows.push(
            Row::new(format!("g HTML viewer, {branches} branches"), "bytes per branch", "B")
                .value(per_branch)
                .note(format!("{:.1} MB in all, built in {:.0} ms", bytes as f64 / 1e6, median(&html_ms))),
        );
        viewer.push(json!({"branches": branches, "bytes": bytes, "ms": median(&html_ms)}));
        if branches == TREE_BRANCHES {
            let best = node_id(TREE_BRANCHES - 1);
            let mut paper_ms = Vec::new();
            for _ in 0..reps.exports {
                let t = Instant::now();
                let paper = db.store.paper_memory(&best, None)?;
                let markdown = paper.markdown();
                let json = serde_json::to_string_pretty(&paper)?;
                paper_ms.push(millis(t.elapsed()));
                ensure!(markdown.contains("## Provenance Chain") && !json.is_empty());
            }
            rows.push(
                Row::new("g paper export, node 999 of b", "final_memory_for_paper .md + .json", "ms")
                    .value(median(&paper_ms))
                    .note("the Python store crashes here (NameError) and writes nothing; target <= 100 ms"),
            );
            viewer.push(json!({"paper_ms": paper_ms}));
        }
    }
    Ok((rows, json!({ "viewer": viewer })))
}

/// k. `gc` of 900 dead branches out of the tree of b (nodes 100..999, whole subtrees), against a
/// full `export html` of the same database; then `vacuum`, and the file's size before and after.
fn gc_tree(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    const DEAD_FROM: usize = 100;
    let ops = tree_ops();
    let (mut gc_ms, mut html_ms, mut vacuum_ms) = (Vec::new(), Vec::new(), Vec::new());
    let (mut floor_gc_ms, mut floor_vacuum_ms) = (Vec::new(), Vec::new());
    let mut runs = Vec::new();
    for _ in 0..reps.trees {
        let db = Db::new(bench_config())?;
        for op in &ops {
            apply(&db.store, op)?;
        }
        let t = Instant::now();
        let page = memctl_core::viewer_html(&db.store.viewer_data("bench")?);
        html_ms.push(millis(t.elapsed()));
        db.store.write(|tx| {
            for i in DEAD_FROM..TREE_BRANCHES {
                tx.mark_branch(&node_id(i), BranchStatus::Dead, None, false)?;
            }
            Ok(())
        })?;
        // The floor's deletes on a copy of the file as gc finds it.
        let copy = db.dir.path().join("floor.sqlite");
        copy_with_wal(&db.path, &copy)?;
        let floor = crate::floor::collect_dead(&copy)?;
        floor_gc_ms.push(floor.delete_ms);
        floor_vacuum_ms.push(floor.vacuum_ms);
        let t = Instant::now();
        let report = db.store.gc(&GcRequest::default())?;
        gc_ms.push(millis(t.elapsed()));
        ensure!(
            report.collected.len() == TREE_BRANCHES - DEAD_FROM,
            "gc collected {}",
            report.collected.len()
        );
        ensure!(
            floor.rows == report.rows.total(),
            "gc deleted {} rows, its floor {}",
            report.rows.total(),
            floor.rows
        );
        let t = Instant::now();
        let vacuum = db.store.vacuum()?;
        vacuum_ms.push(millis(t.elapsed()));
        runs.push(
            json!({"rows_freed": report.rows.total(), "rows": report.rows, "bytes_freed": report.bytes_freed,
                         "db_bytes_before": vacuum.bytes_before, "db_bytes_after": vacuum.bytes_after,
                         "html_bytes": page.len()}),
        );
    }
    let last = runs.last().cloned().unwrap_or_default();
    let mb = |key: &str| last[key].as_f64().unwrap_or(f64::NAN) / 1e6;
    let label = "k gc, 900 of 1000 branches";
    let rows = vec![
        Row::new(label, "gc (one transaction)", "ms")
            .value(median(&gc_ms))
            .floor(Floor::new(median(&floor_gc_ms), crate::floor::COLLECT_DEAD))
            .note(format!("{} rows freed", last["rows_freed"])),
        Row::new(label, "export html of the same database", "ms").value(median(&html_ms)),
        Row::new(label, "gc / export html", "x")
            .value(median(&gc_ms) / median(&html_ms))
            .note("target: <= 2x"),
        Row::new(label, "vacuum (incremental)", "ms")
            .value(median(&vacuum_ms))
            .floor(Floor::new(median(&floor_vacuum_ms), crate::floor::VACUUM))
            .note(format!(
                "the database went from {:.1} MB to {:.1} MB",
                mb("db_bytes_before"),
                mb("db_bytes_after")
            )),
    ];
    Ok((
        rows,
        json!({"gc_ms": gc_ms, "html_ms": html_ms, "vacuum_ms": vacuum_ms, "runs": runs,
               "floor_gc_ms": floor_gc_ms, "floor_vacuum_ms": floor_vacuum_ms}),
    ))
}

/// m. `messages` of a 500-step conversation inherited over a chain of depth 50, with a token
/// budget, as whole CLI calls, against `context` with the same budget on the same branch.
fn conversation_messages(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    const DEPTH: usize = 50;
    const STEPS_PER_NODE: usize = 10;
    let db = Db::new(bench_config())?;
    let mut rng = Rng::new(0xC0417);
    db.store.write(|tx| {
        tx.create_root(&node_id(0))?;
        let first = |t: StepType, p: Value| tx.step_add(&node_id(0), &Step::new(t, p)?);
        first(StepType::System, json!({"text": "You tune stencil kernels."}))?;
        first(StepType::Task, json!({"text": "Find the fastest tile size."}))?;
        Ok(())
    })?;
    for level in 0..DEPTH {
        let id = node_id(level);
        db.store.write(|tx| {
            if level > 0 {
                tx.fork(&node_id(level - 1), Some(&id))?;
            }
            for n in 0..STEPS_PER_NODE {
                let (t, payload) = match n % 5 {
                    0 => (StepType::User, json!({"text": format!("try {}", rng.words(5, 12))})),
                    1 => (StepType::Planning, json!({"plan": rng.words(10, 30)})),
                    4 => (StepType::Assistant, json!({"text": rng.words(10, 40)})),
                    _ => (
                        StepType::Action,
                        json!({"tool": "run", "thought": rng.words(5, 15), "args": {"n": n},
                               "observation": rng.words(20, 80)}),
                    ),
                };
                tx.step_add(&id, &Step::new(t, payload)?)?;
            }
            Ok(())
        })?;
    }
    let deepest = node_id(DEPTH - 1);
    let Db { dir, path, store } = db;
    drop(store);
    let memctl = crate::paths::release_binary("memctl");
    ensure!(memctl.exists(), "{} is missing: run `cargo xtask bench`, which builds it", memctl.display());
    let call_on = |db: &Path, args: &[&str]| -> Result<f64> {
        let t = Instant::now();
        let output = std::process::Command::new(&memctl).arg("--db").arg(db).args(args).output()?;
        ensure!(output.status.success(), "memctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        Ok(millis(t.elapsed()))
    };
    let call = |args: &[&str]| call_on(&path, args);
    let budget = ["--budget-tokens", "4000", "--encoding", "cl100k_base"];
    let messages = [&["messages", deepest.as_str()][..], &budget[..]].concat();
    let context = [&["context", deepest.as_str()][..], &budget[..]].concat();
    // A note appended where the conversation is, on a copy (as the process floor's rows), so
    // that `messages` and `context` read the database as built. The CLI consolidates by
    // default: past 30 notes (not steps) an append consolidates them.
    let copy_dir = tempfile::Builder::new().prefix("memctl-bench-conversation-").tempdir()?;
    let copy = copy_dir.path().join("memory.sqlite");
    std::fs::copy(&path, &copy)?;
    let append = |i: usize| {
        let text = format!("note {i} beside the conversation");
        call_on(&copy, &["recall", "append", "--kind=note", &deepest, &text])
    };
    call(&messages)?;
    call(&context)?;
    append(0)?;
    // In rounds, the process floor among the calls.
    let (mut times, mut floor_times) = ((Vec::new(), Vec::new(), Vec::new()), Vec::new());
    for i in 1..=reps.cli_calls {
        floor_times.extend(crate::floor::process(&copy, 1)?);
        times.0.push(call(&messages)?);
        times.1.push(call(&context)?);
        times.2.push(append(i)?);
    }
    let floor = Floor::new(median(&floor_times), crate::floor::PROCESS);
    drop((dir, copy_dir));
    let label = "m conversation, 500 steps over depth 50";
    let row = |name: &str, times: &[f64]| {
        Row::new(label, name, "ms").value(median(times)).p95(percentile(times, 95.0)).floor(floor.clone())
    };
    let rows = vec![
        row("one CLI call: messages, 4000 tokens", &times.0),
        row("one CLI call: context, 4000 tokens", &times.1),
        row("one CLI call: recall append", &times.2).note(
            "a note; auto-consolidation's check reads the view's counts of events and steps (the 500 \
                 steps are not consolidation's); the 31st and 42nd notes consolidate (a full run's \
                 rounds reach both, --quick's neither)",
        ),
        Row::new(label, "messages / context", "x")
            .value(median(&times.0) / median(&times.1))
            .note("target: <= 2x"),
    ];
    Ok((rows, json!({"messages_ms": times.0, "context_ms": times.1, "append_ms": times.2})))
}

/// i. Importing the Python store's 1,000-branch database (reference legacy/tree1000). It is not
/// in the repository (21 MB): `MEMCTL_BENCH_LEGACY=PATH`, else `../shared/reference/legacy/
/// tree1000/memory.sqlite` beside the workspace.
fn legacy_import(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    let source = std::env::var_os("MEMCTL_BENCH_LEGACY").map(PathBuf::from).unwrap_or_else(|| {
        crate::paths::workspace_root().join("../shared/reference/legacy/tree1000/memory.sqlite")
    });
    if !source.is_file() {
        let row = Row::new("i import legacy tree1000", "not run", "s").note(format!(
            "no legacy database at {}: set MEMCTL_BENCH_LEGACY to the Python store's tree1000 memory.sqlite",
            source.display()
        ));
        return Ok((vec![row], json!({"skipped": source})));
    }
    let (mut seconds, mut floor_seconds) = (Vec::new(), Vec::new());
    let mut report = Value::Null;
    let mut floor_written = 0;
    for _ in 0..reps.imports {
        let db = Db::new(bench_config())?;
        // A copy: opening the original would leave -wal/-shm files beside it. memctl and the
        // floor both open it immutable, and leave it as it was.
        let copy = db.dir.path().join("legacy.sqlite");
        std::fs::copy(&source, &copy).with_context(|| format!("copying {}", source.display()))?;
        let plain = PlainDb::new()?;
        let t = Instant::now();
        floor_written = plain.import_legacy(&copy)?;
        floor_seconds.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let legacy = memctl_core::LegacyDatabase::read(&copy)?;
        let imported = db.store.import_legacy(legacy)?;
        seconds.push(t.elapsed().as_secs_f64());
        report = serde_json::to_value(&imported)?;
    }
    let converted = &report["converted"];
    let imported: u64 = ["core", "events", "archival"].iter().filter_map(|t| converted[*t].as_u64()).sum();
    let imported = imported + report["branches"].as_u64().unwrap_or(0);
    ensure!(floor_written as u64 == imported, "memctl imported {imported} rows, its floor {floor_written}");
    let rows = vec![Row::new("i import legacy tree1000", "read + import, one transaction", "s")
        .value(median(&seconds))
        .floor(Floor::new(median(&floor_seconds), crate::floor::IMPORT_LEGACY))
        .note(format!(
            "{} branches, {} events, {} archival records; target <= 2 s",
            report["branches"], report["converted"]["events"], report["converted"]["archival"]
        ))];
    Ok((rows, json!({"seconds": seconds, "floor_seconds": floor_seconds, "report": report})))
}

/// p. 16 workers, each making `parallel_calls` sequential `memctl` calls (appends to its own
/// branch and to a shared one, core sets, archival adds, forks, reads) on the tree of b; then
/// every write is counted in the database.
fn parallel(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    const WORKERS: usize = 16;
    let db = Db::new(bench_config())?;
    for op in &tree_ops() {
        apply(&db.store, op)?;
    }
    let shared = node_id(TREE_BRANCHES - 1);
    for w in 0..WORKERS {
        db.store.fork(&node_id(w), Some(&format!("worker-{w}")))?;
    }
    let Db { dir, path, store } = db;
    drop(store);
    // The floor's calls run on a copy of the database as the workers find it.
    let floor_db = dir.path().join("floor.sqlite");
    copy_with_wal(&path, &floor_db)?;
    let memctl = crate::paths::release_binary("memctl");
    ensure!(memctl.exists(), "{} is missing: run `cargo xtask bench`, which builds it", memctl.display());
    let db_arg = path.display().to_string();
    let calls = reps.parallel_calls;
    let call = |w: usize, j: usize| -> Vec<String> {
        let own = format!("worker-{w}");
        let args: Vec<String> = match j % 6 {
            0 => vec![
                "recall".into(),
                "append".into(),
                own,
                "--kind".into(),
                "note".into(),
                format!("par {w} {j}"),
            ],
            1 => vec![
                "recall".into(),
                "append".into(),
                shared.clone(),
                "--kind".into(),
                "note".into(),
                format!("par {w} {j}"),
            ],
            2 => vec!["core".into(), "set".into(), own, format!("k{}", j % 5), format!("{w}.{j}")],
            3 => vec!["archival".into(), "add".into(), own, format!("par record {w} {j}")],
            4 => vec!["fork".into(), own, format!("par-fork-{w}-{j}")],
            _ => vec!["read".into(), own],
        };
        [vec!["--db".to_string(), db_arg.clone(), "--json".to_string()], args].concat()
    };
    /// One call: its index, wall time (ms), exit code and stderr.
    type Call = (usize, f64, i32, String);
    let started = Instant::now();
    let results: Vec<Result<Vec<Call>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (memctl, call) = (&memctl, &call);
                scope.spawn(move || -> Result<Vec<Call>> {
                    let mut out = Vec::with_capacity(calls);
                    for j in 0..calls {
                        let t = Instant::now();
                        let output = std::process::Command::new(memctl)
                            .args(call(w, j))
                            .env("MEMCTL_AUTO_CONSOLIDATE", "false")
                            .output()?;
                        let code = output.status.code().unwrap_or(-1);
                        out.push((
                            j,
                            millis(t.elapsed()),
                            code,
                            String::from_utf8_lossy(&output.stderr).into(),
                        ));
                    }
                    Ok(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker thread")).collect()
    });
    let total = started.elapsed().as_secs_f64();
    let mut times = Vec::new();
    let (mut failures, mut lock_errors) = (0usize, 0usize);
    let mut ok_by_kind = [0usize; 6];
    for worker in results {
        for (j, ms, code, stderr) in worker? {
            times.push(ms);
            if code == 0 {
                ok_by_kind[j % 6] += 1;
            } else {
                failures += 1;
                if code == 5 || stderr.contains("locked") || stderr.contains("busy") {
                    lock_errors += 1;
                }
            }
        }
    }
    // Every successful write must be in the database.
    let conn = rusqlite::Connection::open(&path)?;
    let count =
        |sql: &str| -> Result<usize> { Ok(conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as usize) };
    let events = count("SELECT count(*) FROM events WHERE text LIKE 'par %'")?;
    let records = count("SELECT count(*) FROM archival WHERE text LIKE 'par record %'")?;
    let forks = count("SELECT count(*) FROM branches WHERE id LIKE 'par-fork-%'")?;
    let core =
        count("SELECT count(*) FROM core c JOIN branches b ON b.bid = c.branch WHERE b.id LIKE 'worker-%'")?;
    let lost = (ok_by_kind[0] + ok_by_kind[1]).abs_diff(events)
        + ok_by_kind[3].abs_diff(records)
        + ok_by_kind[4].abs_diff(forks)
        + ok_by_kind[2].abs_diff(core);
    drop(conn);
    let (floor_times, floor_total) = crate::floor::processes_at_once(&floor_db, WORKERS, calls)?;
    drop(dir);
    let n = times.len();
    let worst = |times: &[f64]| times.iter().copied().fold(0.0, f64::max);
    let floor_what = crate::floor::at_once(WORKERS, calls);
    let label = format!("p {WORKERS} processes x {calls} calls");
    let rows = vec![
        Row::new(label.clone(), "total wall time", "s")
            .value(total)
            .floor(Floor::new(floor_total, &floor_what))
            .note(format!(
                "{n} calls (appends to own and shared branches, core sets, archival adds, forks, reads) on the tree of b"
            )),
        Row::new(label.clone(), "one call", "ms")
            .value(median(&times))
            .p95(percentile(&times, 95.0))
            .note(format!(
                "the floor's calls: median {:.1} ms, p95 {:.1} ms, mean {:.1} ms, worst {:.0} ms (memctl's mean \
                 {:.1} ms): most of its one-row inserts never wait, and those that collide sleep on SQLite's \
                 busy handler's back-off (1, 2, 5 … 100 ms), where memctl's short jittered waits share the \
                 lock evenly; its median or worst call says nothing of memctl's, so only the total wall time \
                 (the throughput) has it as a floor",
                median(&floor_times),
                percentile(&floor_times, 95.0),
                mean(&floor_times),
                worst(&floor_times),
                mean(&times)
            )),
        Row::new(label.clone(), "worst single call", "ms").value(worst(&times)),
        Row::new(label.clone(), "lost writes", "").value(lost as f64),
        Row::new(label.clone(), "lock errors", "").value(lock_errors as f64),
        Row::new(label, "failed calls", "").value(failures as f64),
    ];
    let detail = json!({"workers": WORKERS, "calls_per_worker": calls, "total_s": total, "worst_ms": worst(&times),
                        "floor": {"total_s": floor_total, "median_ms": median(&floor_times),
                                  "p95_ms": percentile(&floor_times, 95.0), "worst_ms": worst(&floor_times)},
                        "lost_writes": lost, "lock_errors": lock_errors, "failures": failures,
                        "written": {"events": events, "records": records, "forks": forks, "core": core}});
    Ok((rows, detail))
}

/// c. 10,000 unique appends on one branch: the rate of each 1,000-append window; then the same
/// appends consolidating as they go (the default), their rate and the last window's over the
/// first's.
fn recall_appends(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    const APPENDS: usize = 10_000;
    const WINDOW: usize = 1_000;
    let mut rng = Rng::new(0xCCC);
    let appends: Vec<(&str, String, Vec<String>)> = (0..APPENDS)
        .map(|i| {
            (
                EVENT_KINDS[i % EVENT_KINDS.len()],
                format!("e{i} {}", rng.words(20, 40)),
                vec![format!("phase:{}", PHASES[i % PHASES.len()])],
            )
        })
        .collect();
    let branch = node_id(0);
    let windows = APPENDS / WINDOW;
    let mut window_rates: Vec<Vec<f64>> = vec![vec![]; windows];
    let (mut overall, mut per_append, mut tails) = (vec![], vec![], vec![]);
    // Each append's time in seconds, on a new database with `config`.
    let run = |config: Config| -> Result<Vec<f64>> {
        let db = Db::new(config)?;
        db.store.create_root(&branch)?;
        let mut times = Vec::with_capacity(APPENDS);
        for (kind, text, t) in &appends {
            let (outcome, elapsed) = timed(|| db.store.recall_append(&branch, kind, text, t))?;
            ensure!(!outcome.skipped, "append {text:.20} was skipped as a duplicate");
            times.push(elapsed.as_secs_f64());
        }
        Ok(times)
    };
    let window_rate = |chunk: &[f64]| WINDOW as f64 / chunk.iter().sum::<f64>();
    for _ in 0..reps.recall_runs {
        let times = run(bench_config())?;
        for (w, chunk) in times.chunks(WINDOW).enumerate() {
            window_rates[w].push(window_rate(chunk));
        }
        overall.push(APPENDS as f64 / times.iter().sum::<f64>());
        per_append.push(median(&times) * 1e6);
        let total: f64 = times.iter().sum();
        let slow: Vec<f64> = times.iter().copied().filter(|t| *t > 1e-3).collect();
        tails.push(json!({
            "p90_us": percentile(&times, 90.0) * 1e6,
            "p99_us": percentile(&times, 99.0) * 1e6,
            "max_us": percentile(&times, 100.0) * 1e6,
            "appends_over_1ms": slow.len(),
            "share_of_time_over_1ms": slow.iter().sum::<f64>() / total,
        }));
    }
    let share = |key: &str| -> Vec<f64> { tails.iter().filter_map(|t| t[key].as_f64()).collect() };
    let (stall_shares, stall_counts) = (share("share_of_time_over_1ms"), share("appends_over_1ms"));
    let rates: Vec<f64> = window_rates.iter().map(|r| median(r)).collect();
    let (first, last) = (rates[0], rates[windows - 1]);
    let lowest = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = rates.iter().copied().fold(0.0, f64::max);
    let listing: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    // What the disk and SQLite allow: the same number of single-row commits, each writing as
    // many b-tree pages as an append does, with nothing else done.
    let (mut floor, mut floor_commit) = (Vec::new(), Vec::new());
    for _ in 0..reps.recall_runs {
        let (rate, commit_us) = commit_floor(APPENDS, &appends)?;
        floor.push(rate);
        floor_commit.push(commit_us);
    }
    let (floor, floor_commit) = (median(&floor), median(&floor_commit));
    // The same appends consolidating as they go (the default): a summary every few appends,
    // each folding the one before, which the view must not read again and again.
    let (mut consolidating, mut growth) = (Vec::new(), Vec::new());
    for _ in 0..reps.recall_runs {
        let times = run(Config { auto_consolidate: true, ..bench_config() })?;
        consolidating.push(APPENDS as f64 / times.iter().sum::<f64>());
        growth.push(window_rate(&times[APPENDS - WINDOW..]) / window_rate(&times[..WINDOW]));
    }
    let floor_what = "the same texts inserted by plain SQLite into a table, a hash index and a \
                      journal table, one commit each (2 KiB pages, WAL, synchronous=NORMAL; \
                      SQLite checkpoints inside commits, where memctl checkpoints in a \
                      background thread)";
    let rows = vec![
        Row::new("c recall 10k appends", "overall rate", "/s")
            .value(median(&overall))
            .higher_is_better()
            .python(Python::new(863.0, "863/s"))
            .floor(Floor::new(floor, floor_what)),
        Row::new("c recall 10k appends", "first window (1-1000)", "/s")
            .value(first)
            .higher_is_better()
            .python(Python::new(6_400.0, "6,400/s")),
        Row::new("c recall 10k appends", "last window (9001-10000)", "/s")
            .value(last)
            .higher_is_better()
            .python(Python::new(470.0, "470/s")),
        Row::new("c recall 10k appends", "per append, median", "µs")
            .value(median(&per_append))
            .floor(Floor::new(floor_commit, floor_what)),
        Row::new("c recall 10k appends", "share of time in appends > 1 ms", "%")
            .value(100.0 * median(&stall_shares))
            .note(format!(
                "{} of 10,000 appends took over 1 ms (median over runs): commits that \
                 waited on the disk or checkpointed a WAL past 16,000 pages themselves",
                median(&stall_counts)
            )),
        Row::new("c recall 10k appends", "slowest / fastest window", "x").value(highest / lowest).note(
            format!(
                "rate per 1,000-append window: {} /s (last/first {:.2}x)",
                listing.join(", "),
                last / first
            ),
        ),
        Row::new("c recall 10k appends", "overall rate, auto_consolidate on", "/s")
            .value(median(&consolidating))
            .higher_is_better(),
        Row::new("c recall 10k appends", "last / first window, auto_consolidate on", "x")
            .value(median(&growth))
            .note("the last 1,000 appends' rate over the first's, consolidating as they go: below 1 if they slow"),
    ];
    let detail = json!({
        "window_rates_per_s": rates, "overall_per_s": overall,
        "per_append_median_us": per_append, "tails": tails, "repetitions": reps.recall_runs,
        "floor_per_s": floor, "consolidating_per_s": consolidating, "consolidating_last_over_first": growth,
    });
    Ok((rows, detail))
}

/// Commits per second of `n` plain-SQLite transactions that each write a row, its hash index
/// entry and a journal row — the three b-trees an append writes — and the median commit in µs.
fn commit_floor(n: usize, appends: &[(&str, String, Vec<String>)]) -> Result<(f64, f64)> {
    let plain = PlainDb::new()?;
    let mut commits = Vec::with_capacity(n);
    for (i, (_, text, _)) in appends.iter().cycle().take(n).enumerate() {
        let start = Instant::now();
        plain.commit_row(i, text)?;
        commits.push(start.elapsed().as_secs_f64());
    }
    Ok((n as f64 / commits.iter().sum::<f64>(), median(&commits) * 1e6))
}

/// BENCH.md's search queries (seed 0x5EA): query j is 1 + j mod 3 vocabulary words.
/// d. A 51-branch chain, 10,000 archival writes, 100 searches (k=5) from the deepest branch.
fn archival(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    const CHAIN: usize = 51;
    const RECORDS: usize = 10_000;
    let vocab = vocab();
    let mut rng = Rng::new(0xDDD);
    let records: Vec<(String, Vec<String>)> = (0..RECORDS)
        .map(|i| {
            (
                format!("a{i} {}", rng.words(60, 120)),
                vec!["BENCH".to_string(), format!("topic:{}", vocab[i % vocab.len()])],
            )
        })
        .collect();
    let queries = query_words(100);
    let ids: Vec<String> = (0..CHAIN).map(node_id).collect();
    let deepest = &ids[CHAIN - 1];
    let floors = archival_floor(&records, &queries, reps)?;

    let mut rows = Vec::new();
    let mut detail = Map::new();
    for (mode, fts) in [("FTS5", FtsMode::Auto), ("fallback", FtsMode::Off)] {
        let (mut write_rates, mut medians, mut p95s, mut hits) = (vec![], vec![], vec![], vec![]);
        let mut visible = 0;
        let mut uses_fts = false;
        for _ in 0..reps.archival_builds {
            let mut config = bench_config();
            config.search.fts = fts;
            let db = Db::new(config)?;
            uses_fts = db.store.uses_fts()?;
            // Branch by branch, root first: record i goes to branch i mod 51, written after
            // that branch is forked and before its child is, so the deepest branch sees all
            // 10,000 (as every branch did under the Python store's live inheritance).
            let mut write_time = Duration::ZERO;
            for (b, id) in ids.iter().enumerate() {
                match b {
                    0 => db.store.create_root(id)?,
                    _ => db.store.fork(&ids[b - 1], Some(id))?,
                };
                for (text, t) in records.iter().skip(b).step_by(CHAIN) {
                    let (_, elapsed) = timed(|| db.store.archival_add(id, text, t))?;
                    write_time += elapsed;
                }
            }
            write_rates.push(RECORDS as f64 / write_time.as_secs_f64());
            visible = db.store.archival_list(deepest, None)?.len();
            for _ in 0..reps.search_passes {
                let mut times = Vec::with_capacity(queries.len());
                let mut found = 0;
                for query in &queries {
                    let search = Search { query: query.clone(), k: 5, tags: vec![] };
                    let (results, elapsed) = timed(|| db.store.archival_search(deepest, &search))?;
                    found += results.len();
                    times.push(millis(elapsed));
                }
                medians.push(median(&times));
                p95s.push(percentile(&times, 95.0));
                hits.push(found as f64 / queries.len() as f64);
            }
        }
        ensure!(visible == RECORDS, "the deepest branch sees {visible} records");
        let mut write = Row::new(format!("d archival ({mode})"), "10k writes, rate", "/s")
            .value(median(&write_rates))
            .higher_is_better();
        let mut search = Row::new(format!("d archival ({mode})"), "search k=5 at depth 50", "ms")
            .value(median(&medians))
            .p95(median(&p95s));
        if fts == FtsMode::Auto {
            write = write.python(Python::new(2_260.0, "2,260/s")).floor(floors.write.clone());
            search = search
                .python(Python::new(2.9, "2.9 ms, p95 8.9 ms").with_p95(8.9))
                .floor(floors.search.clone());
            if !uses_fts {
                search = search.note("this SQLite build has no FTS5: the fallback was used");
            }
        } else {
            write = write.note("the FTS5 index is still maintained on write when it exists");
            search = search
                .python(Python::new(77.0, "77 ms, p95 233 ms").with_p95(233.0))
                .floor(floors.scan.clone());
        }
        rows.push(write);
        rows.push(search);
        detail.insert(
            mode.to_string(),
            json!({"uses_fts": uses_fts, "write_rate_per_s": write_rates,
                   "search_median_ms": medians, "search_p95_ms": p95s,
                   "mean_hits_per_query": hits, "visible_records_at_deepest": visible,
                   "builds": reps.archival_builds, "passes_per_build": reps.search_passes}),
        );
    }
    Ok((rows, Value::Object(detail)))
}

/// Plain SQLite on the texts of workload d: the rate of one commit per record writing the
/// record and a journal row, with FTS5 entries a batch at a time; the median time of FTS5's own top-5 for each query
/// over the whole table (its bm25, no view); and of a scan of every text for the query's words,
/// the least a search without an index does.
fn archival_floor(
    records: &[(String, Vec<String>)],
    queries: &[String],
    reps: &Reps,
) -> Result<ArchivalFloors> {
    let (mut rates, mut searches, mut scans) = (vec![], vec![], vec![]);
    for _ in 0..reps.archival_builds {
        let plain = PlainDb::new()?;
        let start = Instant::now();
        for (i, (text, tags)) in records.iter().enumerate() {
            plain.commit_record(i, text, tags)?;
        }
        rates.push(records.len() as f64 / start.elapsed().as_secs_f64());
        // FTS5's own search ranks all 10,000 (memctl's counts the few past its index itself).
        plain.index_waiting()?;
        for _ in 0..reps.search_passes {
            for query in queries {
                let start = Instant::now();
                ensure!(plain.search(query, 5)? == 5, "the floor's search of {query:?} found fewer than 5");
                searches.push(millis(start.elapsed()));
            }
            // Apart from the FTS5 searches, whose pages a scan of every text would push out of
            // the cache between them (memctl's searches run back to back too).
            for query in queries {
                let start = Instant::now();
                ensure!(plain.scan_search(query)? >= 5, "the floor's scan for {query:?} found fewer than 5");
                scans.push(millis(start.elapsed()));
            }
        }
    }
    Ok(ArchivalFloors {
        write: Floor::new(
            median(&rates),
            format!(
                "plain SQLite, one commit per record: the record and a journal row, and the FTS5 \
                 entries of {0} records in every {0}th (as memctl's index takes them)",
                fts_batch()
            ),
        ),
        search: Floor::new(
            median(&searches),
            "FTS5's own top-5 (ORDER BY rank) over all 10,000 records: no view, no versions",
        ),
        scan: Floor::new(
            median(&scans),
            "plain SQLite reading all 10,000 texts in one scan and looking in each for a query word \
             until one is found (no case folding, no word bounds, no ranking, no view)",
        ),
    })
}

/// Workload d's floors: writing, searching with FTS5, searching without an index.
struct ArchivalFloors {
    write: Floor,
    search: Floor,
    scan: Floor,
}

/// e/f. A chain of D levels, each with one core key (`key{i mod 10}`), 2 events and 1 archival
/// record: the full read of the deepest branch's view.
fn chain_read(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    let mut rows = Vec::new();
    let mut detail = Map::new();
    let python = [(10usize, 0.21, "0.21 ms"), (100, 2.4, "2.4 ms"), (1000, 26.0, "26 ms")];
    for (depth, python_ms, python_text) in python {
        let db = Db::new(bench_config())?;
        build_chain(&db.store, depth)?;
        let deepest = node_id(depth);

        // Cold: a new handle's first read (resolves and caches the path), as one CLI call does.
        let mut cold = Vec::with_capacity(reps.cold_reads);
        for _ in 0..reps.cold_reads {
            let store = Store::open(&db.path, Config::default(), Clock::System)?;
            let (_, t) = timed(|| store.view(&deepest))?;
            cold.push(millis(t));
        }
        // Warm: the same handle, path cached.
        let view = db.store.view(&deepest)?;
        // Core evictions (the budget is 2000 chars) add `CORE_EVICT` records of their own.
        let bench_records = view.archival.iter().filter(|r| r.tags.iter().any(|t| t == "BENCH")).count();
        ensure!(
            view.events.len() == 2 * (depth + 1) && bench_records == depth + 1,
            "the deepest view misses rows: {} events, {bench_records} records",
            view.events.len(),
        );
        ensure!((1..=10).contains(&view.core.len()), "core keys {}", view.core.len());
        let mut warm = Vec::with_capacity(reps.warm_reads);
        for _ in 0..reps.warm_reads {
            let (_, t) = timed(|| db.store.view(&deepest))?;
            warm.push(millis(t));
        }
        // The floor: the view's texts as rows of one plain table, read by one scan.
        let plain = PlainDb::new()?;
        plain.fill_rows(texts(&view))?;
        let mut plain_reads = Vec::with_capacity(reps.warm_reads);
        for _ in 0..reps.warm_reads {
            let start = Instant::now();
            plain.read_rows(None)?;
            plain_reads.push(millis(start.elapsed()));
        }
        let mut cold_plain_reads = Vec::with_capacity(reps.cold_reads);
        for _ in 0..reps.cold_reads {
            let start = Instant::now();
            plain.read_rows_on_new_connection()?;
            cold_plain_reads.push(millis(start.elapsed()));
        }
        let read_floor = Floor::new(
            median(&plain_reads),
            "plain SQLite reading the view's texts from one table, one scan, into owned rows \
             (for a new handle: on a new connection)",
        );
        let cold_read_floor = Floor { value: median(&cold_plain_reads), ..read_floor.clone() };
        // Windowed read: what `read` shows by default (core, 20 events, newest 8 records).
        let config = Config::default();
        let mut window = Vec::with_capacity(reps.warm_reads);
        for _ in 0..reps.warm_reads {
            let (_, t) = timed(|| {
                db.store.view_window(&deepest, Some(config.recall_max_events), Some(config.retrieval_k))
            })?;
            window.push(millis(t));
        }
        // Its floor: the same table with the window's texts as its newest rows, those read.
        let shown =
            db.store.view_window(&deepest, Some(config.recall_max_events), Some(config.retrieval_k))?;
        let shown: Vec<&str> = texts(&shown).collect();
        let plain_shown = PlainDb::new()?;
        plain_shown
            .fill_rows(texts(&view).filter(|text| !shown.contains(text)).chain(shown.iter().copied()))?;
        let mut plain_window = Vec::with_capacity(reps.warm_reads);
        for _ in 0..reps.warm_reads {
            let start = Instant::now();
            ensure!(plain_shown.read_rows(Some(shown.len()))? == shown.len(), "the floor's window is short");
            plain_window.push(millis(start.elapsed()));
        }
        let window_floor = |what: &str| {
            Floor::new(
                median(&plain_window),
                format!(
                    "plain SQLite reading the texts `read` shows (the core, 20 events, 8 records) from one \
                     table of the view's texts, where they are the newest, one scan, into owned rows{what}"
                ),
            )
        };
        // The Python store's "read all layers" (mem_node_read) returns the core map, the newest
        // recall_max_events events and the newest retrieval_k records: the windowed read.
        rows.push(
            Row::new(format!("e chain D={depth}"), "read: core, 20 events, 8 records", "ms")
                .value(median(&window))
                .p95(percentile(&window, 95.0))
                .python(Python::new(python_ms, python_text))
                .floor(window_floor("")),
        );
        rows.push(
            Row::new(format!("e chain D={depth}"), "whole view, every row (warm)", "ms")
                .value(median(&warm))
                .p95(percentile(&warm, 95.0))
                .floor(read_floor.clone())
                .note("grows with D: the result holds 3 rows per level"),
        );
        rows.push(
            Row::new(format!("e chain D={depth}"), "whole view, every row (new handle)", "ms")
                .value(median(&cold))
                .p95(percentile(&cold, 95.0))
                .floor(cold_read_floor),
        );
        let mut renders = Vec::new();
        let python_render = [(10, 0.40), (100, 2.4), (1000, 31.0)];
        let python_ms = python_render.iter().find(|(d, _)| *d == depth).map_or(f64::NAN, |(_, ms)| *ms);
        for budget in [4000, 24_000] {
            let mut times = Vec::with_capacity(reps.warm_reads);
            for _ in 0..reps.warm_reads {
                let (_, t) = timed(|| db.store.render_context(&deepest, None, Budget::Chars(budget)))?;
                times.push(millis(t));
            }
            rows.push(
                Row::new(format!("e chain D={depth}"), format!("render, budget {budget} chars"), "ms")
                    .value(median(&times))
                    .p95(percentile(&times, 95.0))
                    .python(Python::new(python_ms, &format!("{python_ms} ms")))
                    .floor(window_floor(" (no text laid out against the budget)")),
            );
            renders.push(json!({"budget_chars": budget, "median_ms": median(&times)}));
        }
        detail.insert(
            format!("D={depth}"),
            json!({"render": renders, "full_view_warm_ms": {"median": median(&warm), "p95": percentile(&warm, 95.0)},
                   "full_view_cold_ms": {"median": median(&cold), "p95": percentile(&cold, 95.0)},
                   "windowed_read_ms": {"median": median(&window), "p95": percentile(&window, 95.0)},
                   "view_rows": {"core": view.core.len(), "events": view.events.len(),
                                 "archival": view.archival.len(),
                                 "archival_core_evict": view.archival.len() - bench_records},
                   "warm_reads": reps.warm_reads, "cold_reads": reps.cold_reads}),
        );
    }
    Ok((rows, Value::Object(detail)))
}

/// The texts of a view's rows: its core values, events and records.
fn texts(view: &View) -> impl Iterator<Item = &str> {
    let core = view.core.iter().map(|c| c.value.as_str());
    core.chain(view.events.iter().map(|e| e.text.as_str()))
        .chain(view.archival.iter().map(|r| r.text.as_str()))
}

/// h. Whole `memctl` processes on the tree of b: one append, one fork, one core set, each a
/// fresh process, against the floor of a process that opens the database and inserts one row.
fn cli_call(reps: &Reps) -> Result<(Vec<Row>, Value)> {
    let db = Db::new(bench_config())?;
    for op in &tree_ops() {
        apply(&db.store, op)?;
    }
    let Db { dir, path, store } = db;
    drop(store);
    let memctl = crate::paths::release_binary("memctl");
    ensure!(memctl.exists(), "{} is missing: run `cargo xtask bench`, which builds it", memctl.display());
    let deepest = node_id(TREE_BRANCHES - 1);
    let db_arg = path.display().to_string();
    let run = |program: &Path, args: Vec<String>| -> Result<f64> {
        let start = Instant::now();
        // As the tree was built: without automatic consolidation.
        let output = std::process::Command::new(program)
            .args(&args)
            .env("MEMCTL_AUTO_CONSOLIDATE", "false")
            .output()?;
        let elapsed = millis(start.elapsed());
        ensure!(
            output.status.success(),
            "{} {args:?}: {}",
            program.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(elapsed)
    };
    // The i-th run's arguments of each call: unique texts and ids so nothing is skipped.
    let arguments = |call: &str, i: usize| -> Vec<String> {
        let words: Vec<String> = match call {
            "recall append" => {
                vec!["recall", "append", &deepest, "--kind", "note", &format!("cli event {i}")]
                    .into_iter()
                    .map(String::from)
                    .collect()
            }
            "fork" => vec!["fork".into(), deepest.clone(), format!("cli-fork-{i}")],
            "core set" => {
                vec!["core".into(), "set".into(), deepest.clone(), format!("cli{}", i % 3), format!("v{i}")]
            }
            "context, 4000 chars" => {
                vec!["context".into(), deepest.clone(), "--budget-chars".into(), "4000".into()]
            }
            "context, 1000 tokens" => {
                ["context", &deepest, "--budget-tokens", "1000", "--encoding", "cl100k_base"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            }
            _ => unreachable!("a call of the list below"),
        };
        [vec!["--db".to_string(), db_arg.clone()], words].concat()
    };
    let mut rows = Vec::new();
    let mut detail = Map::new();
    let mut medians = Vec::new();
    let floor_times = crate::floor::process_on_copy(&path, reps.cli_calls)?;
    let floor = Floor::new(median(&floor_times), crate::floor::PROCESS);
    detail.insert("floor".into(), json!({"median_ms": floor.value, "runs": floor_times.len()}));
    let calls = ["recall append", "fork", "core set", "context, 4000 chars", "context, 1000 tokens"];
    for call in calls {
        let times =
            (0..reps.cli_calls).map(|i| run(&memctl, arguments(call, i))).collect::<Result<Vec<f64>>>()?;
        let (m, p95) = (median(&times), percentile(&times, 95.0));
        let mut row =
            Row::new("h one CLI call, 1000 branches", call, "ms").value(m).p95(p95).floor(floor.clone());
        if !call.starts_with("context") {
            row = row.python(Python::new(150.0, "150 ms to 2.5 s"));
        }
        rows.push(row);
        medians.push((call, m));
        detail.insert(call.to_string(), json!({"median_ms": m, "p95_ms": p95, "runs": times.len()}));
    }
    let by = |name: &str| medians.iter().find(|(call, _)| *call == name).map_or(f64::NAN, |(_, m)| *m);
    rows.push(
        Row::new("h one CLI call, 1000 branches", "context: tokens / chars", "x")
            .value(by("context, 1000 tokens") / by("context, 4000 chars"))
            .note("target: a token-budgeted call costs at most 2x a char-budgeted one"),
    );
    drop(dir);
    Ok((rows, Value::Object(detail)))
}

/// Root (node 0) and D forks (nodes 1..=D); level i writes core `key{i mod 10}`, 2 events and
/// 1 archival record, in that order, before the next fork.
fn build_chain(store: &Store, depth: usize) -> Result<()> {
    let mut rng = Rng::new(0xC4A1 + depth as u64);
    let mut event_i = 0;
    for i in 0..=depth {
        let id = node_id(i);
        match i {
            0 => store.create_root(&id)?,
            _ => store.fork(&node_id(i - 1), Some(&id))?,
        };
        let value = format!("c{i} {}", rng.words(10, 30));
        store.core_set(&id, &format!("key{}", i % 10), &value, CoreWrite::default())?;
        for _ in 0..2 {
            let kind = EVENT_KINDS[event_i % EVENT_KINDS.len()];
            let text = format!("e{event_i} {}", rng.words(20, 40));
            let tag = vec![format!("phase:{}", PHASES[i % PHASES.len()])];
            store.recall_append(&id, kind, &text, &tag)?;
            event_i += 1;
        }
        let text = format!("a{i} {}", rng.words(60, 120));
        store.archival_add(&id, &text, &["BENCH".to_string()])?;
    }
    Ok(())
}

/// Resets the kernel's peak-RSS counter of this process (Linux; a no-op elsewhere).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The peak resident set size of this process since the last reset, in MB (Linux).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
