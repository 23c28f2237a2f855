//! Project tasks: `cargo xtask <task>`.
//!
//! `cargo xtask bench` builds this crate with `--release` and re-runs itself as
//! `target/release/xtask bench-inner …`, so every timing is of optimised code.

mod floor;
mod gen;
mod inspection;
mod layers;
mod options;
mod paths;
/// A throwaway PostgreSQL cluster, and a PgBouncer in front of it, shared with the tests.
#[path = "../../tests/support/postgres.rs"]
#[allow(dead_code)]
mod pg_cluster;
mod plot;
mod postgres;
mod report;
mod scale;
mod tree;
mod workloads;

use anyhow::{bail, Context, Result};
use options::BenchOptions;
use paths::{release_binary, target_dir, workspace_root};
use std::process::{Command, ExitCode};

const HELP: &str = "\
cargo xtask <task>

Tasks:
  bench [--quick] [--only NAME]   run the benchmark workloads of shared/reference/BENCH.md
  layers                          check that no crate has an import circle and that the
                                  engine's layers point down (docs/architecture.md)
  docs                            a man page per memctl command, from its clap definitions,
                                  into target/man (memctl man --out target/man)
  help                            this text

Run `cargo xtask bench --help` for the benchmark's options.
";

const BENCH_HELP: &str = "\
cargo xtask bench [--quick] [--only NAME]

Runs BENCH.md's workloads — in-process against memctl-core, and whole `memctl` processes —
on file databases (default config) in temporary directories, and prints one table: memctl's median (and p95 where BENCH.md asks for
it), the Python store's figure from PYTHON_STORE.md section 4, and how many times better memctl
is (>1: memctl is faster). The same results are written as JSON to target/bench/bench.json.

`bench` first runs `cargo build --release -p xtask`, then executes
`target/release/xtask bench-inner [OPTIONS]` so the timings are of optimised code.
Medians are taken over repetitions; nothing here asserts on time.

With workloads a and e it also draws target/bench/depth.svg: cost per call by branch depth,
beside the Python store's figures (docs/performance-depth.svg is a copy from a full run).

Workloads (NAME for --only):
  a   fork chain of D = 10, 100, 1000 forks: per-fork time, and whether it grows with depth
  b   1000-branch tree (BFS, parent (i-1)/3), 29,000 single-transaction operations:
      total, ops/s, per-operation medians, peak RSS, database size
  c   10,000 recall appends on one branch: rate per 1,000-append window (should be flat),
      beside the floor of plain SQLite commits writing the same three b-trees
  d   archival: 51-branch chain, 10,000 writes, 100 searches (k=5) from the deepest branch;
      write rate, search median and p95, with FTS5 and with the keyword fallback (fts = off)
  e   chain of D = 10, 100, 1000 (one core key, 2 events, 1 archival record per level):
      reads and renders of the deepest branch's view (alias: f)
  g   on the tree of b: the paper export of node 999, and the HTML viewer's size per branch
      for trees of 100, 300 and 1,000 branches
  h   one CLI call on the tree of b: fresh `memctl` processes appending, forking, setting a
      core key (50 each), against the floor of a process that opens the database and inserts
      one row
  p   16 processes x 500 mixed CLI calls on the tree of b: total time, one call (median,
      p95), worst call, lost writes and lock errors (both must be 0)
  s   scale: 1,000,000 archival records and 100,000 events on the tree of b: archival
      search (k=5, with and without a tag) and render at node 999, whole CLI calls (search,
      append, fork, core set) on a copy, and the database size. The database is built once
      (about a minute) and kept in target/bench/scale/; --quick builds a tenth of it
  j   inspection on a chain of 996 nodes (3 core keys, 100 events, 5 records each) with
      four leaves, 1,000 branches and 100,000 events: `diff` of two deep siblings and of two
      leaves 200 levels apart, `why` of a key written at every level, `path` at depth 995,
      as whole CLI calls (in rounds, each call and its floor once a round) against `read`
      (`why` also against a process printing the key's writes with their journal rows);
      `messages` (no step among the events), `core get` and `pressure` at depth 995; a
      recall search of the whole timeline at depth 995 against a process scanning every
      event; and a recall append, core set and archival add at depth 995 (on a copy). Kept
      in target/bench/inspection/ (--quick: 10 events)
  k   gc of 900 dead branches (whole subtrees) of the tree of b, against a full export html
      of the same database (target: at most 2x), then vacuum and the file size before/after
  m   a 500-step conversation inherited over depth 50: `messages` with a 4,000-token budget
      against `context` with the same budget, as whole CLI calls (target: at most 2x), and a
      recall append beside the conversation (on a copy)
  q   PostgreSQL: the tree of b copied to a throwaway local cluster (initdb + pg_ctl, Unix
      socket; skipped with a note without the server binaries), then whole CLI calls
      (recall append, fork, read, archival search) against it and against the SQLite file:
      medians side by side, and the round trips of one call (statements in the server's log)
  i   import of the Python store's 1,000-branch database (MEMCTL_BENCH_LEGACY=PATH, default
      ../shared/reference/legacy/tree1000/memory.sqlite; not in the repository)

Options:
  --quick       fewer repetitions (same workloads and sizes, except s at a tenth); well
                under two minutes
  --only NAME   run one workload (a, b, c, d, e, g, h, i, j, k, m, p, q or s)
  -h, --help    this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode> {
    let Some((task, rest)) = args.split_first() else {
        eprint!("{HELP}");
        return Ok(ExitCode::from(2));
    };
    match task.as_str() {
        "help" | "-h" | "--help" => {
            print!("{HELP}");
            Ok(ExitCode::SUCCESS)
        }
        "bench" => {
            if wants_help(rest) {
                print!("{BENCH_HELP}");
                return Ok(ExitCode::SUCCESS);
            }
            BenchOptions::parse(rest)?; // fail on bad options before building
            build_release_and_run(rest)
        }
        "bench-inner" => {
            if wants_help(rest) {
                print!("{BENCH_HELP}");
                return Ok(ExitCode::SUCCESS);
            }
            let options = BenchOptions::parse(rest)?;
            workloads::run(&options, &target_dir().join("bench"))?;
            Ok(ExitCode::SUCCESS)
        }
        "layers" => {
            let mut failed = false;
            for (src, rules) in layers::CRATES {
                let problems = layers::problems(&workspace_root().join(src), rules)?;
                for problem in &problems {
                    eprintln!("{src}: {problem}");
                }
                if problems.is_empty() {
                    println!("{src}: no import circle, {rules:?} rules kept");
                }
                failed |= !problems.is_empty();
            }
            Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        "docs" => {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let built = Command::new(&cargo)
                .current_dir(workspace_root())
                .args(["build", "--quiet", "-p", "memctl-cli"])
                .status()
                .context("running cargo build")?;
            if !built.success() {
                bail!("cargo build failed ({built})");
            }
            let memctl = target_dir().join("debug").join(format!("memctl{}", std::env::consts::EXE_SUFFIX));
            let out = target_dir().join("man");
            let status = Command::new(memctl)
                .arg("man")
                .arg("--out")
                .arg(&out)
                .status()
                .context("running memctl man")?;
            Ok(if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        // The process floor of whole CLI calls (workloads h, j, m, p, q, s): start, open the
        // database (an SQLite file or a PostgreSQL URL), insert one row, exit.
        "floor-insert" => {
            let db = rest.first().context("floor-insert needs a database path or URL")?;
            if db.starts_with("postgres") {
                let mut client = db.parse::<::postgres::Config>()?.connect(::postgres::NoTls)?;
                client.batch_execute(
                    "CREATE TABLE IF NOT EXISTS bench_floor(x int); INSERT INTO bench_floor VALUES (1);",
                )?;
            } else {
                let conn = rusqlite::Connection::open(db)?;
                // Waiting for the lock as long as memctl does, with SQLite's own busy handler
                // (workload p runs many at once).
                let wait = memctl_core::SqliteConfig::default().busy_timeout_ms;
                conn.busy_timeout(std::time::Duration::from_millis(wait))?;
                conn.execute_batch(
                    "CREATE TABLE IF NOT EXISTS bench_floor(x); INSERT INTO bench_floor VALUES (1);",
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        // The floor of a CLI call that prints many rows (workload j): start, open the
        // database, print as many events and records as the call prints, exit.
        "floor-print" => {
            let [db, events, records] = rest else {
                bail!("floor-print needs a database path, an event count and a record count")
            };
            floor::print_rows(db.as_ref(), events.parse()?, records.parse()?)?;
            Ok(ExitCode::SUCCESS)
        }
        // The floor of `why` of a core key (workload j): start, open the database, print every
        // write of the key with its journal row, exit.
        "floor-history" => {
            let [db, key] = rest else { bail!("floor-history needs a database path and a core key") };
            floor::print_history(db.as_ref(), key)?;
            Ok(ExitCode::SUCCESS)
        }
        // The floor of `path` (workload j): start, open the database, print the path's nodes
        // and the rows each wrote up to the next one's fork, exit.
        "floor-path" => {
            let [db, branch] = rest else { bail!("floor-path needs a database path and a branch id") };
            floor::print_path(db.as_ref(), branch)?;
            Ok(ExitCode::SUCCESS)
        }
        // The floor of a recall search of a whole timeline (workload j): start, open the
        // database, scan every event for a query word, exit.
        "floor-scan" => {
            let [db, query] = rest else { bail!("floor-scan needs a database path and a query") };
            floor::scan_events(db.as_ref(), query)?;
            Ok(ExitCode::SUCCESS)
        }
        other => {
            eprint!("xtask: unknown task '{other}'\n\n{HELP}");
            Ok(ExitCode::from(2))
        }
    }
}

fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| matches!(a.as_str(), "-h" | "--help" | "help"))
}

/// `cargo build --release -p xtask -p memctl-cli`, then `target/release/xtask bench-inner ARGS`.
fn build_release_and_run(args: &[String]) -> Result<ExitCode> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("xtask: building the release profile (cargo build --release -p xtask -p memctl-cli)…");
    let status = Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["build", "--release", "--quiet", "-p", "xtask", "-p", "memctl-cli"])
        .status()
        .context("running cargo build --release")?;
    if !status.success() {
        bail!("cargo build --release failed ({status})");
    }
    let exe = release_binary("xtask");
    let status = Command::new(&exe)
        .current_dir(workspace_root())
        .arg("bench-inner")
        .args(args)
        .status()
        .with_context(|| format!("running {}", exe.display()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(code.clamp(1, 255) as u8),
        None => ExitCode::FAILURE,
    })
}
