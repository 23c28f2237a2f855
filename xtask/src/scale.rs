//! s. Scale: 1,000,000 archival records and 100,000 events over the 1,000-branch tree of b
//! (BFS, parent (i-1)/3): archival search, render, whole CLI calls (SPEC §11's "one call on
//! 1,000 branches and 100k events") and the database's size.
//!
//! The database takes minutes to build, so it is built once per schema version and kept under
//! `target/bench/scale/`; later runs reuse it. `--quick` builds a tenth of it (100 records and
//! 10 events per branch).

use crate::floor::PlainDb;
use crate::gen::{bench_config, node_id, query_words, vocab, Rng, EVENT_KINDS, PHASES};
use crate::report::{median, millis, percentile, Floor, Python, Row};
use anyhow::{ensure, Context, Result};
use memctl_core::{Budget, Clock, Search, Store, SCHEMA_VERSION};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BRANCHES: usize = 1000;
/// Bump when the generated data or the file's layout changes, so a kept database is rebuilt.
const GENERATOR_VERSION: u32 = 2;

/// What one build holds, per branch.
#[derive(Debug, Clone, Copy)]
struct Scale {
    records_per_branch: usize,
    events_per_branch: usize,
}

impl Scale {
    fn new(quick: bool) -> Scale {
        if quick {
            Scale { records_per_branch: 100, events_per_branch: 10 }
        } else {
            Scale { records_per_branch: 1000, events_per_branch: 100 }
        }
    }

    fn records(self) -> usize {
        self.records_per_branch * BRANCHES
    }

    fn label(self) -> String {
        format!("s scale {}k records", self.records() / 1000)
    }

    fn file_name(self) -> String {
        format!(
            "scale-{}r-{}e-schema{SCHEMA_VERSION}-gen{GENERATOR_VERSION}.sqlite",
            self.records(),
            self.events_per_branch * BRANCHES
        )
    }
}

/// The kept database, built first if missing. Returns its path and the build time (None: reused).
fn database(scale: Scale, dir: &Path) -> Result<(PathBuf, Option<f64>)> {
    let path = dir.join(scale.file_name());
    if path.is_file() {
        return Ok((path, None));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Builds for another schema or generator are dead weight of up to two gigabytes each.
    let current = format!("-schema{SCHEMA_VERSION}-gen{GENERATOR_VERSION}.sqlite");
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("scale-") && !name.ends_with(&current) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let partial = dir.join(format!("{}.partial", scale.file_name()));
    remove_with_wal(&partial);
    eprintln!("bench: s. building {} (kept for later runs)…", path.display());
    let start = Instant::now();
    build(scale, &partial)?;
    std::fs::rename(&partial, &path)?;
    remove_with_wal(&partial);
    Ok((path, Some(start.elapsed().as_secs_f64())))
}

/// One transaction per branch: its fork, its events, its records.
fn build(scale: Scale, path: &Path) -> Result<()> {
    let store = Store::open(path, bench_config(), Clock::System)?;
    let vocab = vocab();
    let mut rng = Rng::new(0x5CA1E);
    let (mut event_i, mut record_i) = (0usize, 0usize);
    for i in 0..BRANCHES {
        let id = node_id(i);
        let phase = PHASES[i % PHASES.len()];
        store.write(|tx| {
            match i {
                0 => tx.create_root(&id)?,
                _ => tx.fork(&node_id((i - 1) / 3), Some(&id))?,
            };
            for _ in 0..scale.events_per_branch {
                let kind = EVENT_KINDS[event_i % EVENT_KINDS.len()];
                let text = format!("e{event_i} {}", rng.words(20, 40));
                event_i += 1;
                tx.recall_append(&id, kind, &text, &[format!("phase:{phase}")])?;
            }
            for _ in 0..scale.records_per_branch {
                let kind = EVENT_KINDS[record_i % EVENT_KINDS.len()];
                let text = format!("a{record_i} {}", rng.words(60, 120));
                let topic = &vocab[record_i % vocab.len()];
                record_i += 1;
                tx.archival_add(
                    &id,
                    &text,
                    &["BENCH".into(), format!("kind:{kind}"), format!("topic:{topic}")],
                )?;
            }
            Ok(())
        })?;
        if i % 100 == 99 {
            eprintln!("bench: s. {} of {BRANCHES} branches", i + 1);
        }
    }
    Ok(())
}

/// Removes a database file and the `-wal` and `-shm` files SQLite keeps beside it.
fn remove_with_wal(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn file_bytes(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| m.len())
        .sum()
}

/// Times `f` over every query; returns the milliseconds and the mean number of hits.
fn time_queries(queries: &[String], mut f: impl FnMut(&str) -> Result<usize>) -> Result<(Vec<f64>, f64)> {
    let mut times = Vec::with_capacity(queries.len());
    let mut hits = 0;
    for query in queries {
        let start = Instant::now();
        hits += f(query)?;
        times.push(millis(start.elapsed()));
    }
    Ok((times, hits as f64 / queries.len() as f64))
}

pub fn scale(quick: bool, out_dir: &Path) -> Result<(Vec<Row>, Value)> {
    let scale = Scale::new(quick);
    let (path, built_s) = database(scale, &out_dir.join("scale"))?;
    let store = Store::open_existing(&path, bench_config(), Clock::System)?;
    let deepest = node_id(BRANCHES - 1);
    let depth = store.branch(&deepest)?.depth;
    let view_records = store.archival_list(&deepest, None)?;
    let visible = view_records.len();
    ensure!(
        visible == scale.records_per_branch * (depth as usize + 1),
        "node 999 sees {visible} records at depth {depth}"
    );
    let queries = query_words(100);
    let label = scale.label();
    let mut rows = Vec::new();
    let mut detail = json!({
        "records": scale.records(), "events": scale.events_per_branch * BRANCHES,
        "db_bytes": file_bytes(&path), "built_s": built_s, "depth_of_node_999": depth,
        "visible_records_at_node_999": visible,
    });

    // Two passes over the queries: the first warms the page cache as a busy run would have.
    let search = |tags: Vec<String>| {
        let store = &store;
        let deepest = &deepest;
        move |query: &str| {
            let search = Search { query: query.to_string(), k: 5, tags: tags.clone() };
            Ok(store.archival_search(deepest, &search)?.len())
        }
    };
    for (name, tags) in
        [("search k=5", vec![]), ("search k=5, tag kind:error", vec!["kind:error".to_string()])]
    {
        time_queries(&queries, search(tags.clone()))?;
        let (times, hits) = time_queries(&queries, search(tags.clone()))?;
        // The floor: FTS5's own search over the records the search may return, alone in a
        // database of their own, as if the view had been cut out of the million beforehand.
        let plain = PlainDb::new()?;
        let kept = view_records.iter().filter(|r| tags.iter().all(|t| r.tags.contains(t)));
        let kept: Vec<(&str, String)> =
            kept.map(|r| Ok((r.text.as_str(), serde_json::to_string(&r.tags)?))).collect::<Result<_>>()?;
        plain.fill_records(kept.iter().map(|(text, tags)| (*text, tags.as_str())))?;
        time_queries(&queries, |query| plain.search(query, 5))?;
        let (floor_times, floor_hits) = time_queries(&queries, |query| plain.search(query, 5))?;
        ensure!(floor_hits == hits, "{name}: memctl found {hits} records a query, its floor {floor_hits}");
        let mut row = Row::new(label.clone(), format!("{name} at node 999"), "ms")
            .value(median(&times))
            .p95(percentile(&times, 95.0))
            .floor(Floor::new(
                median(&floor_times),
                format!(
                    "FTS5's own top-5 (ORDER BY rank) over only the {} records the search may return, in a \
                     database of their own (FTS5's default tokenizer, with its sizes table)",
                    kept.len()
                ),
            ));
        if tags.is_empty() {
            row = row.note(format!(
                "node 999 (depth {depth}) sees {visible} of {} records; SPEC target: median <= 10 ms, p95 <= 30 ms",
                scale.records()
            ));
        }
        rows.push(row);
        detail[name] = json!({"median_ms": median(&times), "p95_ms": percentile(&times, 95.0), "mean_hits": hits,
                              "floor": {"median_ms": median(&floor_times), "records": kept.len()}});
    }

    let (times, _) = time_queries(&queries, |query| {
        Ok(store.render_context(&deepest, Some(query), Budget::Chars(4000))?.chars)
    })?;
    rows.push(
        Row::new(label.clone(), "render with a query, 4000 chars", "ms")
            .value(median(&times))
            .p95(percentile(&times, 95.0)),
    );
    detail["render_ms"] = json!({"median": median(&times), "p95": percentile(&times, 95.0)});
    drop(store);

    // Whole calls as a runner makes them: a fresh process, its open, the work, the JSON. The
    // writes go to a copy, so the kept database stays as built.
    let memctl = crate::paths::release_binary("memctl");
    ensure!(memctl.exists(), "{} is missing: run `cargo xtask bench`, which builds it", memctl.display());
    let copy_dir = tempfile::Builder::new().prefix("memctl-bench-scale-").tempdir()?;
    let copy = copy_dir.path().join("memory.sqlite");
    std::fs::copy(&path, &copy).with_context(|| format!("copying {}", path.display()))?;
    let runs = if quick { 10 } else { 30 };
    let call = |args: Vec<String>| -> Result<f64> {
        let t = Instant::now();
        let output = Command::new(&memctl)
            .arg("--db")
            .arg(&copy)
            .arg("--json")
            .args(&args)
            .env("MEMCTL_AUTO_CONSOLIDATE", "false")
            .output()?;
        ensure!(
            output.status.success(),
            "memctl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(millis(t.elapsed()))
    };
    let strings = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    type Args<'a> = Box<dyn Fn(usize) -> Vec<String> + 'a>;
    let calls: [(&str, Args); 4] = [
        ("archival search", Box::new(|i| strings(&["archival", "search", &deepest, &queries[i], "-k", "5"]))),
        (
            "recall append",
            Box::new(|i| {
                strings(&["recall", "append", &deepest, "--kind", "note", &format!("cli event {i}")])
            }),
        ),
        ("fork", Box::new(|i| strings(&["fork", &deepest, &format!("cli-fork-{i}")]))),
        (
            "core set",
            Box::new(|i| strings(&["core", "set", &deepest, &format!("cli{}", i % 3), &format!("v{i}")])),
        ),
    ];
    let floor = Floor::new(median(&crate::floor::process(&copy, runs)?), crate::floor::PROCESS);
    for (name, args) in calls {
        let times = (0..runs).map(|i| call(args(i))).collect::<Result<Vec<f64>>>()?;
        let mut row = Row::new(label.clone(), format!("one CLI call: {name}"), "ms")
            .value(median(&times))
            .p95(percentile(&times, 95.0))
            .floor(floor.clone());
        if name != "archival search" {
            row = row.python(Python::new(150.0, "150 ms to 2.5 s"));
        }
        if name == "recall append" {
            row = row.note(format!(
                "SPEC target: one call on 1,000 branches and 100k events <= 5 ms (this database: {} events)",
                scale.events_per_branch * BRANCHES
            ));
        }
        rows.push(row);
        detail[format!("cli_{}_ms", name.replace(' ', "_"))] =
            json!({"median": median(&times), "p95": percentile(&times, 95.0)});
    }
    drop(copy_dir);

    rows.push(Row::new(label, "database size", "MB").value(file_bytes(&path) as f64 / 1e6).note(
        match built_s {
            Some(s) => format!("built in {s:.0} s, one transaction per branch; kept at {}", path.display()),
            None => format!("reused from an earlier run: {}", path.display()),
        },
    ));
    Ok((rows, detail))
}
