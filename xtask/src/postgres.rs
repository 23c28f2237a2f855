//! q. Whole CLI calls against a local PostgreSQL server, beside the same calls against the
//! SQLite file: what moving a run to a server costs per call, and how many round trips a call
//! makes (the statements the server logs for it). Then the same calls through PgBouncer
//! pooling sessions, when it is installed: a call is handed a server session that earlier
//! calls have warmed (its caches of the catalogue), where a direct connection starts a new
//! server process.

use crate::gen::{bench_config, node_id};
use crate::pg_cluster::pooler::{PoolMode, Pooler};
use crate::pg_cluster::Cluster;
use crate::report::{median, millis, percentile, Floor, Row};
use crate::tree::{apply, tree_ops, TREE_BRANCHES};
use anyhow::{ensure, Result};
use memctl_core::{Clock, Store};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::time::Instant;

const WORKLOAD: &str = "q PostgreSQL CLI call, 1000 branches";

/// `runs` timed processes per call kind and database.
pub fn cli_calls(runs: usize) -> Result<(Vec<Row>, Value)> {
    let Some(cluster) = Cluster::start_durable_or_skip("the PostgreSQL bench (q)") else {
        let row = Row::new(WORKLOAD, "skipped", "").note("no PostgreSQL server binaries (initdb, pg_ctl)");
        return Ok((vec![row], json!({"skipped": true})));
    };
    let dir = tempfile::Builder::new().prefix("memctl-bench-").tempdir()?;
    let path = dir.path().join("memory.sqlite");
    let store = Store::open(&path, bench_config(), Clock::System)?;
    for op in &tree_ops() {
        apply(&store, op)?;
    }
    let url = cluster.new_database();
    let started = Instant::now();
    let server = Store::open(Path::new(&url), bench_config(), Clock::System)?;
    let copied = store.copy_to(&server)?;
    let migrate_s = started.elapsed().as_secs_f64();
    drop(server);
    let memctl = crate::paths::release_binary("memctl");
    ensure!(memctl.exists(), "{} is missing: run `cargo xtask bench`, which builds it", memctl.display());
    let deepest = node_id(TREE_BRANCHES - 1);
    let run = |db_arg: &str, args: &[String]| -> Result<f64> {
        let start = Instant::now();
        let output = std::process::Command::new(&memctl)
            .args(["--db", db_arg])
            .args(args)
            .env("MEMCTL_AUTO_CONSOLIDATE", "false")
            .output()?;
        let elapsed = millis(start.elapsed());
        ensure!(output.status.success(), "memctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        Ok(elapsed)
    };
    let arguments = |call: &str, i: usize| -> Vec<String> {
        let words: Vec<String> = match call {
            "recall append" => vec![
                "recall".into(),
                "append".into(),
                deepest.clone(),
                "--kind".into(),
                "note".into(),
                format!("cli event {i}"),
            ],
            "fork" => vec!["fork".into(), deepest.clone(), format!("cli-fork-{i}")],
            "read" => vec!["read".into(), deepest.clone()],
            "archival search" => {
                vec!["archival".into(), "search".into(), deepest.clone(), format!("a{} tiling", i * 7)]
            }
            _ => unreachable!("a call of the list below"),
        };
        words
    };
    let sqlite = path.display().to_string();
    let calls = ["recall append", "fork", "read", "archival search"];
    let mut rows = Vec::new();
    let mut detail = Map::new();
    detail.insert("migrate".into(), json!({"seconds": migrate_s, "rows": copied.rows}));
    // The floor: a process that connects to the server, inserts one row and exits.
    let floor_url = cluster.new_database();
    let floor_times = crate::floor::process(&floor_url, runs)?;
    let floor = Floor::new(median(&floor_times), crate::floor::PROCESS);
    detail.insert("floor".into(), json!({"median_ms": floor.value, "runs": floor_times.len()}));
    let pooler =
        Pooler::start_or_skip("the PostgreSQL bench through PgBouncer (q)", &cluster, PoolMode::Session, 4);
    let pooled = match &pooler {
        Some(pooler) => {
            let floor_times = crate::floor::process(pooler.in_front_of(&floor_url), runs)?;
            let floor =
                Floor::new(median(&floor_times), format!("{}, through PgBouncer", crate::floor::PROCESS));
            detail.insert("floor_through_pgbouncer".into(), json!({"median_ms": floor.value}));
            Some((pooler.in_front_of(&url), floor))
        }
        None => {
            rows.push(Row::new(WORKLOAD, "through PgBouncer", "").note("skipped: no pgbouncer"));
            None
        }
    };
    // Round trips first, with the server logging every statement; then the timed runs, without.
    let trips: Vec<usize> = calls
        .iter()
        .map(|call| round_trips(&cluster, || run(&url, &arguments(call, 1_000_000)).map(drop)))
        .collect::<Result<_>>()?;
    let mut through_pooler = Vec::new();
    for (call, trips) in calls.iter().zip(trips) {
        let (mut on_sqlite, mut on_server, mut on_pooler) = (Vec::new(), Vec::new(), Vec::new());
        // Interleaved, so that all see the same machine.
        for i in 0..runs {
            on_sqlite.push(run(&sqlite, &arguments(call, i))?);
            on_server.push(run(&url, &arguments(call, i))?);
            if let Some((pooled_url, _)) = &pooled {
                on_pooler.push(run(pooled_url, &arguments(call, runs + i))?);
            }
        }
        let (m, p95, lite) = (median(&on_server), percentile(&on_server, 95.0), median(&on_sqlite));
        rows.push(
            Row::new(WORKLOAD, *call, "ms")
                .value(m)
                .p95(p95)
                .floor(floor.clone())
                .note(format!("SQLite {lite:.2} ms ({:.1}x); {trips} round trips", m / lite)),
        );
        let mut figures = json!({"postgres_median_ms": m, "postgres_p95_ms": p95, "sqlite_median_ms": lite,
                                 "round_trips": trips, "runs": on_server.len()});
        if let Some((_, pooled_floor)) = &pooled {
            let (pm, pp95) = (median(&on_pooler), percentile(&on_pooler, 95.0));
            through_pooler.push(
                Row::new(WORKLOAD, format!("{call}, through PgBouncer"), "ms")
                    .value(pm)
                    .p95(pp95)
                    .floor(pooled_floor.clone())
                    .note(format!(
                        "direct {m:.2} ms ({:.2}x); SQLite {lite:.2} ms ({:.1}x)",
                        pm / m,
                        pm / lite
                    )),
            );
            figures["pgbouncer_median_ms"] = json!(pm);
            figures["pgbouncer_p95_ms"] = json!(pp95);
        }
        detail.insert(call.to_string(), figures);
    }
    rows.extend(through_pooler);
    drop(pooler);
    drop(store);
    drop(dir);
    Ok((rows, Value::Object(detail)))
}

/// The statements the server runs for `call`: each is one round trip (a parameterless batch
/// counts once), the connection's start-up aside.
fn round_trips(cluster: &Cluster, call: impl FnOnce() -> Result<()>) -> Result<usize> {
    cluster.psql("postgres", "ALTER SYSTEM SET log_statement = 'all'");
    cluster.psql("postgres", "SELECT pg_reload_conf()");
    // The postmaster takes the new setting on its own time; new backends then have it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let log = cluster.log_file();
    let before = std::fs::read_to_string(&log)?.len();
    let outcome = call();
    // The server writes its log as it goes; a moment for the last lines.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let text = std::fs::read_to_string(&log)?;
    cluster.psql("postgres", "ALTER SYSTEM RESET log_statement");
    cluster.psql("postgres", "SELECT pg_reload_conf()");
    outcome?;
    Ok(text[before..]
        .lines()
        .filter(|l| l.contains("LOG:  execute") || l.contains("LOG:  statement:"))
        .count())
}
