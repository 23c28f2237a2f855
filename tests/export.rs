//! `memctl export paper` and `export jsonl` (SPEC §7, §8) through the real binary, on a small
//! search built the way runners drive memctl.

mod support;

use serde_json::{json, Value};
use support::*;

const IDEA: &str = "# Idea: tiled stencil\n\n## Title\nCache-Aware Tiling for 3-D Stencils\n\n## Abstract\n\
Tiling the j/k loops for L3 cuts the stencil's runtime.\n\nMeasured on one EPYC node.\n\n## Short Hypothesis\n\
L3-sized tiles give a 2x speed-up at 64 threads.\n\n## Experiments\n1. Thread sweep 1-128.\n2. Tile sweep 16-256.\n\n\
## Risk Factors and Limitations\nOne node type only.\n";

/// root → node-1 (a failed build) → node-3 (the best), and node-2, a failing sibling.
fn search() -> Sandbox {
    let sb = Sandbox::initialized();
    let run = |args: &[&str]| {
        sb.ok(args);
    };
    run(&["branch", "create", "root-branch"]);
    run(&["branch", "set-uid", "root-branch", "root"]);
    run(&["archival", "add", "root", IDEA, "--tag", "IDEA_MD"]);
    run(&["archival", "add", "root", "Phase 0: EPYC 7763, 128 cores, gcc 12.3.", "--tag", "PHASE0_INTERNAL"]);
    run(&["core", "set", "root", "hardware_cpu", "AMD EPYC 7763 x2"]);
    run(&["core", "set", "root", "phase0_summary", "Dual-socket node, 8 NUMA domains."]);
    run(&["core", "set", "root", "RESOURCE_gpu_hours", "0"]);
    run(&["recall", "append", "root", "--kind", "phase1_complete", "installed numactl and likwid"]);
    run(&["fork", "root", "node-1"]);
    run(&["recall", "append", "node-1", "--kind", "compile_failed", "icx rejected -fopenmp-simd"]);
    run(&["recall", "append", "node-1", "--kind", "error_encountered", "build aborted after 3.4 s"]);
    run(&["recall", "append", "node-1", "--kind", "node_result", "node_id=node-1 metric=None is_buggy=True"]);
    run(&["fork", "root", "node-2"]);
    run(&[
        "recall",
        "append",
        "node-2",
        "--kind",
        "error_encountered",
        "sibling crash that node-3 never saw",
    ]);
    run(&["fork", "node-1", "node-3"]);
    run(&["core", "set", "node-3", "best_runtime_s", "1.9", "--importance", "5"]);
    run(&["core", "set", "node-3", "compile_flags", "-O3 -march=znver3"]);
    run(&["recall", "append", "node-3", "--kind", "metrics_extracted", "runtime_s=1.9 gflops=160"]);
    run(&["recall", "append", "node-3", "--kind", "node_result", "node_id=node-3 metric=1.9 is_buggy=False"]);
    run(&["recall", "append", "node-3", "--kind", "llm_insight", "tile 64 beats tile 128 by 12 %"]);
    run(&["archival", "add", "node-3", "without first-touch the runtime doubles", "--tag", "ABLATION"]);
    run(&[
        "archival",
        "add",
        "node-3",
        "Successful node node-3\nMethod changes: tile 64, 32 threads",
        "--tag",
        "SUCCESS",
    ]);
    sb
}

/// The Python store's headings, in its order (PYTHON_STORE.md §2).
const HEADINGS: [&str; 23] = [
    "# Final Memory For Paper",
    "## Executive Summary",
    "## Best Node Details",
    "## VLM Analysis & Visual Feedback",
    "## Top Nodes Comparison",
    "## Memory-Based Analysis",
    "### Title Candidates",
    "### Abstract Material",
    "### Problem Statement",
    "### Hypothesis",
    "### Method",
    "### Experimental Setup",
    "### Phase0 Internal Info Summary",
    "### Results",
    "### Ablations Negative",
    "### Failure Modes Timeline",
    "### Threats To Validity",
    "### Reproducibility Checklist",
    "### Narrative Bullets",
    "## Resources Used",
    "## Execution Feedback",
    "## Negative Results & Lessons Learned",
    "## Provenance Chain",
];

fn headings(markdown: &str) -> Vec<&str> {
    markdown.lines().filter(|l| l.starts_with('#')).collect()
}

/// The body under `heading`, up to the next heading.
fn body<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let start =
        markdown.find(&format!("{heading}\n")).unwrap_or_else(|| panic!("no {heading}")) + heading.len();
    let rest = &markdown[start..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    rest[..end].trim()
}

fn export(sb: &Sandbox, args: &[&str]) -> (String, Value) {
    let mut full = vec!["export", "paper", "--branch", "node-3", "--out", "paper"];
    full.extend_from_slice(args);
    sb.ok(&full);
    let markdown = std::fs::read_to_string(sb.file("paper/final_memory_for_paper.md")).unwrap();
    let json = std::fs::read_to_string(sb.file("paper/final_memory_for_paper.json")).unwrap();
    (markdown, serde_json::from_str(&json).unwrap())
}

#[test]
fn paper_from_memory_alone_has_every_section_filled() {
    let sb = search();
    let (md, json) = export(&sb, &[]);
    assert_eq!(headings(&md), HEADINGS);
    insta::assert_snapshot!("paper_without_artifacts", md);

    assert_eq!(body(&md, "### Title Candidates"), "- tiled stencil\n- Cache-Aware Tiling for 3-D Stencils");
    assert!(body(&md, "### Hypothesis").starts_with("L3-sized tiles give a 2x speed-up"));
    assert!(body(&md, "### Problem Statement").starts_with("Tiling the j/k loops"));
    assert!(body(&md, "### Method").contains("2. Tile sweep 16-256."));
    assert!(body(&md, "### Method").contains("- node-3: tile 64, 32 threads"));
    let setup = body(&md, "### Experimental Setup");
    assert!(
        setup.contains("Dual-socket node") && setup.contains("hardware_cpu: AMD EPYC 7763 x2"),
        "{setup}"
    );
    assert_eq!(body(&md, "### Phase0 Internal Info Summary"), "Phase 0: EPYC 7763, 128 cores, gcc 12.3.");
    let results = body(&md, "### Results");
    assert!(
        results.contains("best_runtime_s: 1.9") && results.contains("node_id=node-3 metric=1.9"),
        "{results}"
    );
    assert!(body(&md, "### Ablations Negative").contains("without first-touch the runtime doubles"));

    // Failures along the best path, oldest first; never the sibling's.
    let timeline = body(&md, "### Failure Modes Timeline");
    let first = timeline.find("icx rejected").expect("compile failure listed");
    let second = timeline.find("build aborted").expect("error listed");
    assert!(first < second, "{timeline}");
    assert!(!md.contains("sibling crash"), "a sibling's memory never reaches the paper");
    assert!(body(&md, "## Negative Results & Lessons Learned").contains("metric=None is_buggy=True"));
    assert!(body(&md, "## Negative Results & Lessons Learned").contains("tile 64 beats tile 128"));
    assert_eq!(body(&md, "## Resources Used"), "- RESOURCE_gpu_hours: 0");
    assert!(body(&md, "### Threats To Validity").starts_with("One node type only."));
    assert!(body(&md, "## Top Nodes Comparison").contains("No artifacts given"));

    let provenance = body(&md, "## Provenance Chain");
    let lines: Vec<&str> = provenance.lines().collect();
    assert_eq!(lines.len(), 3, "{provenance}");
    assert!(lines[0].starts_with("1. `root` (branch `root-branch`, depth 0)"), "{provenance}");
    assert!(lines[1].starts_with("2. `node-1` (branch `node-1`, depth 1) — node_id=node-1 metric=None"));
    assert!(lines[2].starts_with("3. `node-3` (branch `node-3`, depth 2) — node_id=node-3 metric=1.9"));

    // The JSON: every section, in the same order, and the branch's whole view.
    assert_eq!(string(&json, "format"), "memctl-paper/1");
    assert_eq!(string(&json, "branch"), "node-3");
    let sections = array(&json, "sections");
    assert_eq!(sections.len(), HEADINGS.len() - 1);
    for (section, heading) in sections.iter().zip(&HEADINGS[1..]) {
        let hashes = "#".repeat(int(section, "level") as usize);
        assert_eq!(format!("{hashes} {}", string(section, "heading")), *heading);
        assert!(!string(section, "key").is_empty());
    }
    let ids: Vec<&str> = array(&json, "provenance").iter().map(|b| string(b, "id")).collect();
    assert_eq!(ids, ["root-branch", "node-1", "node-3"]);
    let view = field(&json, "view");
    assert_eq!(array(view, "events").len(), 7, "root 1 + node-1 3 + node-3 3");
    assert_eq!(array(view, "core").len(), 5);
    assert_eq!(array(view, "archival").len(), 4);
}

fn artifacts(vlm: Value) -> Value {
    json!({
        "best_node_data": {
            "id": "node-3", "branch_id": "node-3", "plan": "Tile 64 with 32 threads.",
            "overall_plan": "Sweep tiles, then threads.", "code": "int main() { return 0; }",
            "analysis": "Runtime 1.9 s, 5.3x over the baseline.",
            "metric": {"value": 1.9, "name": "runtime_s"}, "exp_results_dir": "results/node-3",
            "plot_analyses": ["speed-up flattens past 32 threads"], "vlm_feedback_summary": vlm,
            "datasets_successfully_tested": ["512^3 grid"], "plot_paths": ["plots/speedup.png"],
            "exec_time_feedback": "Each run took about 2 s.", "workspace_path": "/work/node-3"
        },
        "top_nodes_data": [
            {"id": "node-3", "branch_id": "node-3", "plan": "Tile 64 | 32 threads", "metric": {"value": 1.9, "name": "runtime_s"},
             "analysis": "best", "vlm_feedback_summary": "clean"},
            {"id": "node-9", "branch_id": "node-9", "plan": "Tile 128", "metric": 2.4, "analysis": "close second",
             "vlm_feedback_summary": ["ok"]}
        ]
    })
}

#[test]
fn artifacts_fill_the_summary_best_node_vlm_and_top_nodes() {
    let sb = search();
    for (name, vlm, expected) in [
        ("string", json!("The speed-up plot is clean."), "The speed-up plot is clean."),
        (
            "list",
            json!(["Plot 1 is clean.", "Plot 2 lacks error bars."]),
            "- Plot 1 is clean.\n- Plot 2 lacks error bars.",
        ),
    ] {
        std::fs::write(sb.file("artifacts.json"), artifacts(vlm).to_string()).unwrap();
        let (md, json) = export(&sb, &["--artifacts", "artifacts.json"]);
        assert_eq!(headings(&md), HEADINGS, "{name}");
        let vlm = body(&md, "## VLM Analysis & Visual Feedback");
        assert!(vlm.starts_with(expected), "{name}: {vlm}");
        assert!(vlm.contains("- speed-up flattens past 32 threads"), "{name}");
        assert!(
            body(&md, "## Executive Summary").starts_with("Best node `node-3`: runtime_s = 1.9."),
            "{name}"
        );
        let details = body(&md, "## Best Node Details");
        assert!(
            details.contains("- **plan**: Tile 64 with 32 threads.") && details.contains("int main()"),
            "{name}"
        );
        let top = body(&md, "## Top Nodes Comparison");
        assert!(
            top.contains("| 1 | node-3 | runtime_s = 1.9 | Tile 64 \\| 32 threads | best |"),
            "{name}: {top}"
        );
        assert!(top.contains("| 2 | node-9 | 2.4 | Tile 128 | close second |"), "{name}: {top}");
        assert_eq!(body(&md, "## Execution Feedback"), "Each run took about 2 s.");
        let sources: Vec<&str> = array(&json, "sections").iter().map(|s| string(s, "source")).collect();
        assert_eq!(&sources[..4], ["artifacts"; 4], "{name}");
        if name == "list" {
            insta::assert_snapshot!("paper_with_artifacts", md);
        }
    }
}

#[test]
fn bad_artifacts_and_unknown_branches_write_nothing() {
    let sb = search();
    std::fs::write(sb.file("broken.json"), "{\"best_node_data\": ").unwrap();
    std::fs::write(sb.file("list.json"), "[1, 2]").unwrap();
    std::fs::write(sb.file("wrong.json"), "{\"best_node_data\": \"node-3\"}").unwrap();
    let mut outcomes = Vec::new();
    for (args, code) in [
        (vec!["--artifacts", "broken.json"], 1),
        (vec!["--artifacts", "list.json"], 1),
        (vec!["--artifacts", "wrong.json"], 1),
        (vec!["--artifacts", "missing.json"], 3),
    ] {
        let mut full = vec!["export", "paper", "--branch", "node-3", "--out", "paper"];
        full.extend(args);
        outcomes.push(sb.run(&full).text_error(code));
    }
    outcomes.push(sb.run(&["export", "paper", "--branch", "node-404", "--out", "paper"]).text_error(3));
    insta::assert_snapshot!(
        "paper_errors",
        outcomes.iter().map(Outcome::transcript).collect::<Vec<_>>().join("\n")
    );
    assert!(!sb.file("paper").exists(), "nothing written");
}

const SECTION_SCRIPT: &str = "#!/bin/sh\nrequest=$(cat)\necho x >> calls.txt\n\
section=$(printf '%s' \"$request\" | sed 's/.*\"section\":\"\\([a-z0-9_]*\\)\".*/\\1/')\nprintf 'LLM text for %s' \"$section\"\n";

#[test]
fn a_summarizer_writes_the_memory_sections_once_and_the_cache_serves_them_again() {
    let sb = search();
    std::fs::write(sb.file("summarize.sh"), SECTION_SCRIPT).unwrap();
    let env = [("MEMCTL_SUMMARIZER__COMMAND", "sh ./summarize.sh")];
    let first = sb.exec(&["export", "paper", "--branch", "node-3", "--out", "paper"], None, &env).success();
    assert_eq!(first.stderr, "");
    let calls = || std::fs::read_to_string(sb.file("calls.txt")).unwrap().lines().count();
    assert_eq!(calls(), 13, "one call per Memory-Based Analysis part");
    let md = std::fs::read_to_string(sb.file("paper/final_memory_for_paper.md")).unwrap();
    assert_eq!(headings(&md), HEADINGS);
    assert_eq!(body(&md, "### Hypothesis"), "LLM text for hypothesis");
    assert_eq!(body(&md, "### Failure Modes Timeline"), "LLM text for failure_modes_timeline");
    assert!(body(&md, "## Provenance Chain").starts_with("1. `root`"), "the other sections stay from memory");

    sb.exec(&["export", "paper", "--branch", "node-3", "--out", "again"], None, &env).success();
    assert_eq!(calls(), 13, "an identical export is served from llm_cache");
    let again = std::fs::read_to_string(sb.file("again/final_memory_for_paper.md")).unwrap();
    assert_eq!(again, md);

    let failing = [("MEMCTL_SUMMARIZER__COMMAND", "exit 3")];
    let out = sb.exec(&["export", "paper", "--branch", "node-3", "--out", "plain"], None, &failing).success();
    assert_eq!(out.stderr.lines().count(), 13, "{}", out.stderr);
    assert!(out.stderr.starts_with("warning: paper section Title Candidates: summarizer `exit 3` failed"));
    let plain = std::fs::read_to_string(sb.file("plain/final_memory_for_paper.md")).unwrap();
    assert!(body(&plain, "### Hypothesis").starts_with("L3-sized tiles"), "falls back to memory");
}

#[test]
fn jsonl_lists_the_journal_in_the_python_log_format() {
    let sb = search();
    let ops = array(&sb.json(&["log"]), "ops").len();
    let text = sb.ok(&["export", "jsonl"]);
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), ops);
    for line in &lines {
        for name in ["ts", "op", "layer", "memory_type", "branch_id", "node_id", "phase", "run_id", "details"]
        {
            assert!(line.get(name).is_some(), "{name} in {line}");
        }
    }
    let set = lines.iter().find(|l| l["memctl_op"] == "core.set").unwrap();
    assert_eq!(
        (string(set, "op"), string(set, "layer"), string(set, "memory_type")),
        ("mem_core_set", "public_api", "core")
    );
    assert_eq!(string(set, "node_id"), "root");
    assert_eq!(string(set, "branch_id"), "root-branch");
    let fork = lines.iter().find(|l| l["memctl_op"] == "fork").unwrap();
    assert_eq!(string(fork, "op"), "mem_node_fork");

    let out = sb.json(&["export", "jsonl", "--out", "log/memory_calls.jsonl"]);
    assert_eq!(int(&out, "lines") as usize, ops);
    assert_eq!(std::fs::read_to_string(sb.file("log/memory_calls.jsonl")).unwrap(), text);
}
