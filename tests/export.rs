//! `memctl export paper` and `export jsonl` (SPEC §7, §8) through the real binary, on a small
//! search built the way runners drive memctl.

use crate::support::*;
use serde_json::{json, Value};

const IDEA: &str = "# Idea: tiled stencil\n\n## Title\nCache-Aware Tiling for 3-D Stencils\n\n## Abstract\n\
Tiling the j/k loops for L3 cuts the stencil's runtime.\n\nMeasured on one EPYC node.\n\n## Short Hypothesis\n\
L3-sized tiles give a 2x speed-up at 64 threads.\n\n## Experiments\n1. Thread sweep 1-128.\n2. Tile sweep 16-256.\n\n\
## Risk Factors and Limitations\nOne node type only.\n";

/// root → node-1 (a failed build) → node-3 (the best), and node-2, a failing sibling.
fn search(db: &Db) -> Sandbox {
    let sb = Sandbox::initialized_on(db);
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
const HEADINGS: [&str; 24] = [
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
    "## Memory Along the Best Path",
];

/// The lines of `markdown`, each with whether it is in a fenced code block (CommonMark: a fence
/// closes on a run of its character at least as long as the opening one).
fn fenced_lines(markdown: &str) -> Vec<(&str, bool)> {
    let mut open: Option<(char, usize)> = None;
    let run = |line: &str, c: char| line.len() - line.trim_start_matches(c).len();
    markdown
        .lines()
        .map(|line| match open {
            Some((c, n)) => {
                if run(line, c) >= n && line.trim_start_matches(c).trim().is_empty() {
                    open = None;
                }
                (line, true)
            }
            None => {
                open = ['`', '~'].into_iter().map(|c| (c, run(line, c))).find(|&(_, n)| n >= 3);
                (line, open.is_some())
            }
        })
        .collect()
}

/// The headings, never a `#` line inside a code block; a fence left open hides all after it.
fn headings(markdown: &str) -> Vec<&str> {
    fenced_lines(markdown)
        .into_iter()
        .filter(|(l, fenced)| !fenced && l.starts_with('#'))
        .map(|(l, _)| l)
        .collect()
}

/// The body under `heading`, up to the next heading.
fn body(markdown: &str, heading: &str) -> String {
    let lines = fenced_lines(markdown);
    let start = lines
        .iter()
        .position(|(l, fenced)| !fenced && *l == heading)
        .unwrap_or_else(|| panic!("no {heading}"));
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|(l, fenced)| *fenced || !l.starts_with('#'))
        .map(|(l, _)| *l)
        .collect();
    body.join("\n").trim().to_string()
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
    for db in backends("paper_from_memory_alone_has_every_section_filled") {
        paper_from_memory_alone_has_every_section_filled_on(&search(&db));
    }
}

fn paper_from_memory_alone_has_every_section_filled_on(sb: &Sandbox) {
    let (md, json) = export(sb, &[]);
    assert_eq!(headings(&md), HEADINGS);
    insta::assert_snapshot!("paper_without_artifacts", md);

    // The appendix: the best path's nodes and their deltas, never a sibling's.
    let appendix = body(&md, "## Memory Along the Best Path");
    assert!(appendix.contains("**1. `root-branch`** (node `root`)"), "{appendix}");
    assert!(appendix.contains("- Core set: hardware_cpu = AMD EPYC 7763 x2"), "{appendix}");
    assert!(appendix.contains("**3. `node-3`**"), "{appendix}");
    assert!(!appendix.contains("node-2"), "{appendix}");
    let nodes: Vec<&str> = json["path"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["branch"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["root-branch", "node-1", "node-3"]);

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
    let source = |key: &str| {
        let section = array(&json, "sections").iter().find(|s| string(s, "key") == key).unwrap();
        string(section, "source").to_string()
    };
    assert_eq!(source("vlm_analysis"), "none", "nothing to write it from without artifacts");
    assert_eq!(source("top_nodes_comparison"), "none");
    assert_eq!(source("results"), "memory");

    let provenance = body(&md, "## Provenance Chain");
    let lines: Vec<&str> = provenance.lines().collect();
    assert_eq!(lines.len(), 3, "{provenance}");
    assert!(lines[0].starts_with("1. `root` (branch `root-branch`, depth 0)"), "{provenance}");
    assert!(lines[1].starts_with("2. `node-1` (branch `node-1`, depth 1) — node_id=node-1 metric=None"));
    assert!(lines[2].starts_with("3. `node-3` (branch `node-3`, depth 2) — node_id=node-3 metric=1.9"));
    // A multi-line core value is one line of its section, as everywhere else: no heading of its own.
    sb.ok(&["core", "set", "node-3", "tile_note", "a | b\n# not a heading"]);
    let (with_note, _) = export(sb, &[]);
    assert_eq!(headings(&with_note), HEADINGS);
    assert!(body(&with_note, "### Method").contains("- tile_note: a | b # not a heading"), "{with_note}");

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
            {"id": "node-9", "branch_id": "node-9", "plan": "Tile 128", "metric": 2.4, "analysis": "close\nsecond",
             "vlm_feedback_summary": ["ok"]}
        ]
    })
}

#[test]
fn artifacts_fill_the_summary_best_node_vlm_and_top_nodes() {
    for db in backends("artifacts_fill_the_summary_best_node_vlm_and_top_nodes") {
        artifacts_fill_the_summary_best_node_vlm_and_top_nodes_on(&search(&db));
    }
}

fn artifacts_fill_the_summary_best_node_vlm_and_top_nodes_on(sb: &Sandbox) {
    for (name, vlm, expected) in [
        ("string", json!("The speed-up plot is clean."), "The speed-up plot is clean."),
        (
            "list",
            json!(["Plot 1 is clean.", "Plot 2 lacks error bars."]),
            "- Plot 1 is clean.\n- Plot 2 lacks error bars.",
        ),
    ] {
        std::fs::write(sb.file("artifacts.json"), artifacts(vlm).to_string()).unwrap();
        let (md, json) = export(sb, &["--artifacts", "artifacts.json"]);
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
        // A cell is one line: a line break would end the row.
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
    for db in backends("bad_artifacts_and_unknown_branches_write_nothing") {
        bad_artifacts_and_unknown_branches_write_nothing_on(&search(&db));
    }
}

fn bad_artifacts_and_unknown_branches_write_nothing_on(sb: &Sandbox) {
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
    // The .json cannot be written: neither is the .md, nor is an earlier one replaced.
    std::fs::create_dir_all(sb.file("pair/final_memory_for_paper.json")).unwrap();
    std::fs::write(sb.file("pair/final_memory_for_paper.md"), "earlier").unwrap();
    let refused = sb.run(&["export", "paper", "--branch", "node-3", "--out", "pair"]).text_error(1);
    assert!(refused.stderr.contains("is a directory"), "{}", refused.transcript());
    assert_eq!(std::fs::read_to_string(sb.file("pair/final_memory_for_paper.md")).unwrap(), "earlier");
    assert_eq!(std::fs::read_dir(sb.file("pair")).unwrap().count(), 2, "no temporary file left");
}

/// Answers with the section's key and logs the key of each call to calls.txt.
const SECTION_SCRIPT: &str = "#!/bin/sh\nrequest=$(cat)\n\
section=$(printf '%s' \"$request\" | sed 's/.*\"section\":\"\\([a-z0-9_]*\\)\".*/\\1/')\n\
echo \"$section\" >> calls.txt\nprintf 'LLM text for %s' \"$section\"\n";

#[test]
fn a_summarizer_writes_the_memory_sections_once_and_the_cache_serves_them_again() {
    for db in backends("a_summarizer_writes_the_memory_sections_once_and_the_cache_serves_them_again") {
        a_summarizer_writes_the_memory_sections_once_and_the_cache_serves_them_again_on(&search(&db));
    }
}

fn a_summarizer_writes_the_memory_sections_once_and_the_cache_serves_them_again_on(sb: &Sandbox) {
    std::fs::write(sb.file("summarize.sh"), SECTION_SCRIPT).unwrap();
    let env = [("MEMCTL_SUMMARIZER__COMMAND", "sh ./summarize.sh")];
    let first = sb.exec(&["export", "paper", "--branch", "node-3", "--out", "paper"], None, &env).success();
    assert_eq!(first.stderr, "");
    let sent = || -> Vec<String> {
        std::fs::read_to_string(sb.file("calls.txt")).unwrap().lines().map(str::to_string).collect()
    };
    let calls = || sent().len();
    assert_eq!(calls(), 13, "one call per Memory-Based Analysis part: node-3 has material for each");
    let md = std::fs::read_to_string(sb.file("paper/final_memory_for_paper.md")).unwrap();
    assert_eq!(headings(&md), HEADINGS);
    assert_eq!(body(&md, "### Hypothesis"), "LLM text for hypothesis");
    assert_eq!(body(&md, "### Failure Modes Timeline"), "LLM text for failure_modes_timeline");
    assert!(body(&md, "## Provenance Chain").starts_with("1. `root`"), "the other sections stay from memory");

    sb.exec(&["export", "paper", "--branch", "node-3", "--out", "again"], None, &env).success();
    assert_eq!(calls(), 13, "an identical export is served from llm_cache");
    let again = std::fs::read_to_string(sb.file("again/final_memory_for_paper.md")).unwrap();
    assert_eq!(again, md);

    // node-2, the failing sibling, has no result and no ablation: those parts keep their note
    // and are never sent (an LLM given nothing would invent them).
    let out = sb.exec(&["export", "paper", "--branch", "node-2", "--out", "sparse"], None, &env).success();
    assert_eq!(out.stderr, "");
    let sparse_calls = sent()[13..].to_vec();
    assert_eq!(sparse_calls.len(), 11, "{sparse_calls:?}");
    for key in ["results", "ablations_negative"] {
        assert!(!sparse_calls.iter().any(|k| k == key), "{key} sent: {sparse_calls:?}");
    }
    let sparse = std::fs::read_to_string(sb.file("sparse/final_memory_for_paper.md")).unwrap();
    assert_eq!(body(&sparse, "### Results"), "_Not recorded in memory._");
    assert_eq!(body(&sparse, "### Ablations Negative"), "_Not recorded in memory._");
    assert_eq!(body(&sparse, "### Failure Modes Timeline"), "LLM text for failure_modes_timeline");

    let failing = [("MEMCTL_SUMMARIZER__COMMAND", "exit 3")];
    let out = sb.exec(&["export", "paper", "--branch", "node-3", "--out", "plain"], None, &failing).success();
    assert_eq!(out.stderr.lines().count(), 13, "{}", out.stderr);
    assert!(out.stderr.starts_with("warning: paper section Title Candidates: summarizer `exit 3` failed"));
    let plain = std::fs::read_to_string(sb.file("plain/final_memory_for_paper.md")).unwrap();
    assert!(body(&plain, "### Hypothesis").starts_with("L3-sized tiles"), "falls back to memory");
}

#[test]
fn jsonl_lists_the_journal_in_the_python_log_format() {
    for db in backends("jsonl_lists_the_journal_in_the_python_log_format") {
        jsonl_lists_the_journal_in_the_python_log_format_on(&search(&db));
    }
}

fn jsonl_lists_the_journal_in_the_python_log_format_on(sb: &Sandbox) {
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

const FENCED_IDEA: &str = "# Idea: fenced steps\n\n## Experiments\nBuild, then sweep:\n```bash\n\
# build with 64-wide tiles\nmake TILE=64\n## not a heading either\n```\nThen sweep the threads.\n\n\
## Risk Factors and Limitations\nOne node type only.\n~~~\nleft open by its writer\n";

#[test]
fn fenced_code_in_the_idea_is_never_a_heading_and_never_left_open() {
    for db in backends("fenced_code_in_the_idea_is_never_a_heading_and_never_left_open") {
        fenced_code_in_the_idea_is_never_a_heading_and_never_left_open_on(&Sandbox::initialized_on(&db));
    }
}

fn fenced_code_in_the_idea_is_never_a_heading_and_never_left_open_on(sb: &Sandbox) {
    sb.ok(&["branch", "create", "root"]);
    sb.ok(&["archival", "add", "root", FENCED_IDEA, "--tag", "IDEA_MD"]);
    sb.ok(&["export", "paper", "--branch", "root", "--out", "paper"]);
    let md = std::fs::read_to_string(sb.file("paper/final_memory_for_paper.md")).unwrap();
    assert_eq!(headings(&md), HEADINGS, "{md}");
    assert!(
        body(&md, "### Method").starts_with(
            "Build, then sweep:\n```bash\n# build with 64-wide tiles\nmake TILE=64\n## not a heading either\n```\n\
             Then sweep the threads."
        ),
        "{md}"
    );
    assert_eq!(body(&md, "### Title Candidates"), "- fenced steps", "a `#` line in code is no title");
    // The writer's unclosed fence is closed inside its own section.
    assert!(
        body(&md, "### Threats To Validity").starts_with(
            "One node type only.\n~~~\nleft open by its writer\n~~~\n\nThe best node is the root"
        ),
        "{md}"
    );
    assert!(!fenced_lines(&md).last().unwrap().1, "the document ends outside any fence");
}

#[test]
fn negative_results_list_the_failures_consolidation_folded_into_summaries() {
    let sb = Sandbox::new();
    std::fs::copy(fixture("legacy/search_run/memory.sqlite"), sb.file("legacy.sqlite")).unwrap();
    sb.ok(&["import", "legacy", "legacy.sqlite"]);
    // node-16's path met 10 failures, all consolidated: the view has only their summaries.
    sb.ok(&["export", "paper", "--branch", "node-16", "--out", "paper"]);
    let md = std::fs::read_to_string(sb.file("paper/final_memory_for_paper.md")).unwrap();
    let timeline = body(&md, "### Failure Modes Timeline");
    assert!(timeline.starts_with("Earlier failures (consolidated):"), "{timeline}");
    let negative = body(&md, "## Negative Results & Lessons Learned");
    assert!(negative.contains(&format!("What failed:\n{timeline}")), "the timeline's failures: {negative}");
    for failure in ["Build attempt 3 of 3 aborted", "cannot find -lnuma"] {
        assert!(negative.contains(failure), "{failure}: {negative}");
    }
}

fn write_artifacts(sb: &Sandbox, artifacts: &Value) {
    std::fs::write(sb.file("artifacts.json"), artifacts.to_string()).unwrap();
}

#[test]
fn empty_artifact_fields_count_as_absent() {
    for db in backends("empty_artifact_fields_count_as_absent") {
        empty_artifact_fields_count_as_absent_on(&search(&db));
    }
}

fn empty_artifact_fields_count_as_absent_on(sb: &Sandbox) {
    sb.ok(&["core", "set", "node-3", "last_result", "runtime 1.9 s at 32 threads"]);
    write_artifacts(
        sb,
        &json!({"best_node_data": {
            "id": "node-3", "analysis": "  ", "plan": "", "plot_paths": [], "plot_analyses": [],
            "datasets_successfully_tested": [""], "vlm_feedback_summary": "", "exec_time_feedback": "",
            "metric": {"value": 1.9, "name": ""}, "phase_artifacts": {}, "code": "\n"
        }}),
    );
    let (md, json) = export(sb, &["--artifacts", "artifacts.json"]);
    assert_eq!(body(&md, "## Execution Feedback"), "- last_result: runtime 1.9 s at 32 threads");
    let feedback =
        array(&json, "sections").iter().find(|s| string(s, "key") == "execution_feedback").unwrap();
    assert_eq!(string(feedback, "source"), "memory");
    assert_eq!(body(&md, "## Best Node Details"), "- **id**: node-3\n- **metric**: 1.9");
    assert_eq!(body(&md, "## VLM Analysis & Visual Feedback"), "_No visual feedback in the artifacts._");
    assert!(body(&md, "## Executive Summary").starts_with("Best node `node-3`: 1.9.\n\nMemory:"), "{md}");
}

/// The artifacts index as the runner writes it: nested metrics, plot analyses as objects, code
/// with its own fences.
fn runner_artifacts() -> Value {
    let metric = |best: f64, last: f64| {
        json!({"value": {"metric_names": [{
            "metric_name": "runtime_s", "lower_is_better": true, "description": "Wall time of one sweep.",
            "data": [{"dataset_name": "512^3 grid", "final_value": last, "best_value": best},
                     {"dataset_name": "128^3 grid", "final_value": 0.31, "best_value": 0.3}]
        }]}, "maximize": false, "name": null, "description": null})
    };
    json!({
        "best_node_data": {
            "id": "node-3", "branch_id": "node-3", "plan": "Tile 64 with 32 threads.",
            "code": "/* Build:\n```\ncc -O3 stencil.c\n```\n*/\nint main() { return 0; }",
            "metric": metric(1.8, 1.9), "analysis": "Runtime 1.9 s.",
            "plot_analyses": [{"plot_path": "plots/speedup.png", "analysis": "Speed-up flattens past 32 threads."},
                              {"plot_path": "plots/tiles.png", "analysis": "Tile 64 is best."}],
            "vlm_feedback_summary": "The plots are clean and labelled.", "exec_time_feedback": ""
        },
        "top_nodes_data": [
            {"id": "node-3", "metric": metric(1.8, 1.9), "plan": "Tile 64", "analysis": "best",
             "vlm_feedback_summary": "clean plots"},
            {"id": "node-9", "metric": metric(2.3, 2.4), "plan": "Tile 128", "analysis": "close second",
             "vlm_feedback_summary": ["axis unlabelled", "no error bars"]}
        ]
    })
}

#[test]
fn runner_artifacts_read_as_text_not_json() {
    for db in backends("runner_artifacts_read_as_text_not_json") {
        runner_artifacts_read_as_text_not_json_on(&search(&db));
    }
}

fn runner_artifacts_read_as_text_not_json_on(sb: &Sandbox) {
    write_artifacts(sb, &runner_artifacts());
    let (md, _) = export(sb, &["--artifacts", "artifacts.json"]);
    assert_eq!(headings(&md), HEADINGS, "the code's own fence does not break the document");
    assert!(!md.contains("{\""), "no raw JSON: {md}");
    let metric = "runtime_s (lower is better): final 1.9 (best 1.8) on 512^3 grid, final 0.31 (best 0.3) on 128^3 grid";
    assert!(body(&md, "## Executive Summary").starts_with(&format!("Best node `node-3`: {metric}.")), "{md}");
    let details = body(&md, "## Best Node Details");
    assert!(details.contains(&format!("- **metric**: {metric}")), "{details}");
    assert!(
        details.ends_with("````\n/* Build:\n```\ncc -O3 stencil.c\n```\n*/\nint main() { return 0; }\n````")
    );
    assert_eq!(
        body(&md, "## VLM Analysis & Visual Feedback"),
        "The plots are clean and labelled.\n\nPlot analyses:\n\
         - `plots/speedup.png`: Speed-up flattens past 32 threads.\n- `plots/tiles.png`: Tile 64 is best."
    );
    let top = body(&md, "## Top Nodes Comparison");
    assert!(top.contains(&format!("| 1 | node-3 | {metric} | Tile 64 | best | clean plots |")), "{top}");
    assert!(top.contains("| close second | axis unlabelled; no error bars |"), "{top}");
    insta::assert_snapshot!("paper_with_runner_artifacts", md);
}

#[test]
fn html_to_stdout_and_help_that_fits_80_columns() {
    for db in backends("html_to_stdout_and_help_that_fits_80_columns") {
        html_to_stdout_and_help_that_fits_80_columns_on(&search(&db));
    }
}

fn html_to_stdout_and_help_that_fits_80_columns_on(sb: &Sandbox) {
    let page = sb.ok(&["export", "html", "--out", "-"]);
    assert!(page.starts_with("<!doctype html>") && page.contains("memctl-viewer/1"));
    assert!(!sb.file("-").exists(), "`-` is stdout, not a file");
    assert_eq!(sb.ok(&["export", "jsonl", "--out", "-"]), sb.ok(&["export", "jsonl"]));
    assert!(!sb.file("-").exists());

    // The examples are hard-wrapped: an 80-column terminal shows them as a wide one does.
    let examples = |command: &str, columns: &str| {
        let help = sb.run_env(&["export", command, "--help"], &[("COLUMNS", columns)]).success().stdout;
        help.split_once("Examples:\n").unwrap().1.to_string()
    };
    for command in ["paper", "html", "jsonl"] {
        assert_eq!(examples(command, "80"), examples(command, "200"), "export {command} --help");
    }
    assert!(examples("html", "80").contains("--out - |"), "`-` is documented");
}

/// An export's `--out` writes the file a link names (the link stays), and into a FIFO in place,
/// as a shell's redirection would; a directory is refused.
#[cfg(unix)]
#[test]
fn export_writes_through_links_and_into_fifos() {
    use std::os::unix::fs::FileTypeExt;
    let sb = Sandbox::initialized();
    sb.ok(&["branch", "create", "root"]);
    std::fs::write(sb.file("target.jsonl"), "").unwrap();
    std::os::unix::fs::symlink("target.jsonl", sb.file("link.jsonl")).unwrap();
    sb.ok(&["export", "jsonl", "--out", "link.jsonl"]);
    assert!(sb.file("link.jsonl").symlink_metadata().unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(sb.file("target.jsonl")).unwrap().contains("\"branch.create\""));
    // A link whose file is not there yet: the file is made where it points.
    std::os::unix::fs::symlink("out/view.html", sb.file("view.html")).unwrap();
    sb.ok(&["export", "html", "--out", "view.html"]);
    assert!(sb.file("out/view.html").is_file());
    assert!(sb.file("view.html").symlink_metadata().unwrap().file_type().is_symlink());

    let fifo = sb.file("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap());
    sb.ok(&["export", "jsonl", "--out", "pipe"]);
    assert!(reader.join().unwrap().contains("\"branch.create\""));
    assert!(sb.file("pipe").metadata().unwrap().file_type().is_fifo(), "the FIFO stays one");

    std::fs::create_dir(sb.file("dir")).unwrap();
    let refused = sb.run(&["export", "jsonl", "--out", "dir"]).text_error(1);
    assert!(refused.stderr.contains("is a directory"), "{}", refused.transcript());
}
