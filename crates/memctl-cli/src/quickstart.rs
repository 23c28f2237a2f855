//! `memctl quickstart`: a small simulated tree search (HPC kernel tuning) that shows what memctl
//! keeps: the branch tree, one node's memory, and where the database is.

use crate::artifacts::{write_paper, write_viewer};
use crate::invocation::Context;
use crate::output::{tree, view_text, Scope};
use clap::Args;
use memctl_core::{CoreWrite, Error, OpContext, Store};
use serde_json::json;
use std::path::{Path, PathBuf};

pub const EXAMPLES: &str = "\
Examples:
  memctl quickstart                     # writes ./memctl-quickstart/: memory.sqlite,
                                        # final_memory_for_paper.md/.json, memory_database.html
  memctl quickstart --dir /tmp/demo
  memctl --db memctl-quickstart/memory.sqlite branch list   # then explore it";

#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// Directory for the demo (an earlier quickstart's files there are replaced; a directory
    /// holding other runs' files is refused)
    #[arg(long, default_value = "memctl-quickstart")]
    pub dir: PathBuf,
}

/// One node of the simulated search: what the agent tried and what happened.
struct Node {
    id: &'static str,
    parent: &'static str,
    plan: &'static str,
    /// Runtime in seconds, or None when the attempt failed.
    runtime: Option<f64>,
    outcome: &'static str,
}

const ROOT_IDEA: &str = "## Title
Cache-aware tiling for a 3D 7-point stencil on CPUs and GPUs

## Abstract
We tune a memory-bound Jacobi stencil on a dual-socket EPYC node with an A100, comparing
OpenMP threading, cache tiling and GPU offload under one time budget.

## Short Hypothesis
Tiling for the L2 cache and pinning threads beats naive threading by more than 2x.

## Experiments
Baseline, OpenMP variants, tile sizes 32/64 with vectorisation, CUDA offload.";

const NODES: &[Node] = &[
    Node {
        id: "omp",
        parent: "root",
        plan: "Parallelise the sweep with OpenMP parallel for",
        runtime: Some(14.8),
        outcome: "3.3x over baseline, scaling flattens at 64 threads",
    },
    Node {
        id: "tile",
        parent: "root",
        plan: "Block the grid into cache tiles",
        runtime: Some(11.2),
        outcome: "L2 misses down 61%",
    },
    Node {
        id: "gpu",
        parent: "root",
        plan: "Offload the stencil to the A100 with CUDA",
        runtime: None,
        outcome: "CUDA error: out of memory allocating a 1024^3 grid twice",
    },
    Node {
        id: "omp-pin",
        parent: "omp",
        plan: "Pin threads with OMP_PROC_BIND=close",
        runtime: Some(12.9),
        outcome: "less variance between runs",
    },
    Node {
        id: "omp-numa",
        parent: "omp",
        plan: "First-touch initialisation per NUMA domain",
        runtime: Some(10.4),
        outcome: "remote memory traffic halved",
    },
    Node {
        id: "omp-dynamic",
        parent: "omp",
        plan: "schedule(dynamic, 4) for load balance",
        runtime: Some(16.1),
        outcome: "scheduling overhead dominates",
    },
    Node {
        id: "tile-32",
        parent: "tile",
        plan: "32x32x32 tiles",
        runtime: Some(12.0),
        outcome: "tiles too small, loop overhead",
    },
    Node {
        id: "tile-64",
        parent: "tile",
        plan: "64x64x8 tiles",
        runtime: Some(9.1),
        outcome: "best CPU result so far",
    },
    Node {
        id: "tile-64-simd",
        parent: "tile",
        plan: "64x64x8 tiles with #pragma omp simd",
        runtime: Some(7.6),
        outcome: "vectorised inner loop, 6.3x over baseline",
    },
    Node {
        id: "gpu-half",
        parent: "gpu",
        plan: "Reuse one buffer (in-place ping-pong)",
        runtime: None,
        outcome: "race between neighbouring blocks: wrong results",
    },
    Node {
        id: "gpu-smem",
        parent: "gpu",
        plan: "Shared-memory tiles, separate output buffer on 512^3",
        runtime: Some(2.9),
        outcome: "fast but only a 512^3 grid fits",
    },
    Node {
        id: "gpu-unified",
        parent: "gpu",
        plan: "Unified memory for the full grid",
        runtime: Some(31.5),
        outcome: "page faults dominate",
    },
];

const BEST: &str = "tile-64-simd";

/// The files quickstart writes in its directory, besides the database.
const OUTPUTS: [&str; 3] =
    ["final_memory_for_paper.md", "final_memory_for_paper.json", "memory_database.html"];

/// The actor (and phase) of quickstart's writes in the journal, by which it knows its own
/// database again.
const QUICKSTART: &str = "quickstart";

pub fn run(ctx: &Context, args: QuickstartArgs) -> anyhow::Result<()> {
    crate::artifacts::make_dir(&args.dir)?;
    let db = args.dir.join("memory.sqlite");
    refuse_another_run(ctx, &args.dir, &db)?;
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", db.display()));
        if file.exists() {
            std::fs::remove_file(&file)?;
        }
    }
    let mut store = Store::open(&db, ctx.config.clone(), ctx.clock)?;
    store.set_context(OpContext { phase: Some(QUICKSTART.into()), actor: Some(QUICKSTART.into()) });
    simulate(&store)?;

    let branches = store.branches()?;
    let view =
        store.view_window(BEST, Some(store.config().recall_max_events), Some(store.config().retrieval_k))?;
    let dir = std::fs::canonicalize(&args.dir).unwrap_or(args.dir);
    let paper = write_paper(&store, BEST, None, &dir)?;
    let html = dir.join("memory_database.html");
    write_viewer(&store, "memctl quickstart", &html)?;
    // The database is what the demo is explored through, and copied elsewhere: whole in its file.
    store.checkpoint()?;
    let shown_db = dir.join("memory.sqlite");
    let outputs = json!({"db": shown_db, "branches": branches.len(), "best": BEST,
                         "paper_markdown": paper.markdown, "paper_json": paper.json, "html": html});
    ctx.emit(outputs, || {
        let db = shown_db.display();
        format!(
            "Simulated a tree search over {count} branches (kernel tuning, one failing line of work):\n\n{tree}\n\n\
             What the best node, {BEST}, sees (its own memory plus its ancestors' up to its fork):\n\n{view}\n\n\
             Database: {db}\n\
             Paper memory of {BEST}: {markdown} (and .json)\n\
             Viewer (open in a browser): {html}\n\
             Explore it:\n  memctl --db {db} branch list\n  memctl --db {db} read gpu-half\n  memctl --db {db} log {BEST}",
            count = branches.len(),
            tree = tree(&branches),
            view = view_text(&view, Scope::All),
            markdown = paper.markdown.display(),
            html = html.display(),
        )
    });
    Ok(())
}

/// Quickstart replaces what an earlier quickstart wrote in `dir`, and nothing else: a database
/// holding any write but quickstart's (a run, someone's notes in the demo, a Python store's
/// file), or its output files beside no database, is a conflict, and nothing is touched.
fn refuse_another_run(ctx: &Context, dir: &Path, db: &Path) -> memctl_core::Result<()> {
    let ours = |db: &Path| -> bool {
        let Ok(store) = Store::open_existing(db, ctx.config.clone(), ctx.clock) else { return false };
        store.ops(None, None).is_ok_and(|ops| ops.iter().all(|op| op.actor.as_deref() == Some(QUICKSTART)))
    };
    let found = match db.exists() {
        true if ours(db) => return Ok(()),
        true => Some(db.to_path_buf()),
        false => OUTPUTS.iter().map(|name| dir.join(name)).find(|file| file.exists()),
    };
    match found {
        None => Ok(()),
        Some(file) => Err(Error::conflict(format!(
            "{} holds more than an earlier memctl quickstart wrote: it is left as it is",
            file.display()
        ))
        .with_hint("give quickstart a directory of its own with --dir")),
    }
}

/// Writes the search: the root's task and idea, then each node's plan, result and notes.
fn simulate(store: &Store) -> memctl_core::Result<()> {
    let important = CoreWrite { importance: 4, ttl: None };
    store.create_root("root")?;
    store.set_node_uid("root", "node-0")?;
    store.core_set(
        "root",
        "task",
        "Tune a 3D 7-point Jacobi stencil (1024^3, 100 sweeps)",
        CoreWrite { importance: 5, ttl: None },
    )?;
    store.core_set("root", "hardware_cpu", "2x AMD EPYC 7763, 128 cores, 512 GB", important)?;
    store.core_set("root", "hardware_gpu", "1x NVIDIA A100 40GB", important)?;
    store.core_set("root", "baseline_runtime_s", "48.2", important)?;
    store.archival_add("root", ROOT_IDEA, &["IDEA_MD".into(), "ROOT_IDEA".into()])?;
    store.recall_append(
        "root",
        "plan",
        "Measure the serial baseline, then branch into threading, tiling and GPU offload",
        &["phase:draft".into()],
    )?;
    store.recall_append(
        "root",
        "metric",
        "baseline: 48.2 s, 1.9 GFLOP/s, 11.8 GB/s",
        &["phase:draft".into()],
    )?;

    for (index, node) in NODES.iter().enumerate() {
        store.fork(node.parent, Some(node.id))?;
        store.set_node_uid(node.id, &format!("node-{}", index + 1))?;
        let phase = if store.branch(node.parent)?.depth == 0 { "phase:draft" } else { "phase:improve" };
        store.recall_append(node.id, "plan", node.plan, &[phase.into()])?;
        match node.runtime {
            Some(runtime) => {
                store.recall_append(
                    node.id,
                    "metric",
                    &format!("runtime {runtime:.1} s"),
                    &[phase.into()],
                )?;
                store.recall_append(
                    node.id,
                    "node_result",
                    &format!("ok: {}", node.outcome),
                    &[phase.into()],
                )?;
                store.core_set(node.id, "last_runtime_s", &format!("{runtime:.1}"), important)?;
                store.core_set(node.id, "status", "ok", important)?;
                store.archival_add(
                    node.id,
                    &format!("{}: {} -> {runtime:.1} s ({})", node.id, node.plan, node.outcome),
                    &["node_result".into(), "RESOURCE_cpu_hours".into()],
                )?;
            }
            None => {
                store.recall_append(node.id, "error", node.outcome, &[phase.into(), "failed".into()])?;
                store.recall_append(
                    node.id,
                    "node_result",
                    &format!("failed: {}", node.outcome),
                    &[phase.into()],
                )?;
                store.core_set(node.id, "status", "failed", important)?;
                store.archival_add(
                    node.id,
                    &format!("Negative result — {}: {}", node.plan, node.outcome),
                    &["negative_result".into()],
                )?;
            }
        }
    }
    store.core_set("root", "best_node", BEST, important)?;
    store.core_set(BEST, "best_runtime_s", "7.6", CoreWrite { importance: 5, ttl: None })?;
    Ok(())
}
