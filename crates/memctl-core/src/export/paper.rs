//! `export paper`: `final_memory_for_paper.md` and `.json` for the best branch (SPEC §7), with
//! the headings of the Python store (PYTHON_STORE.md §2).
//!
//! Every section is filled from memory without an LLM: the idea markdown in archival (`IDEA_MD`,
//! `ROOT_IDEA`), core facts, result, metric and error events along the best path, and the
//! runner's artifacts index when one is given. With a summarizer configured, each memory-based
//! section with something recorded is rewritten through the `paper_section` prompt from that
//! material (one cached call per section); a section with nothing recorded keeps its note, so
//! the LLM has nothing to invent from. On failure the deterministic text stays and a warning
//! says so.

use crate::clock::utc_datetime;
use crate::error::{Error, Result};
use crate::one_line::one_line;
use crate::path_report::PathReport;
use crate::rows::{Branch, Event, Record};
use crate::store::Store;
use crate::summarizer::{Answer, Mode, Request, Task};
use crate::view::View;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The longest text asked of the summarizer per section.
const SECTION_MAX_CHARS: usize = 4000;

/// The exported paper memory.
#[derive(Debug, Clone, Serialize)]
pub struct PaperMemory {
    pub branch: String,
    pub node_uid: Option<String>,
    pub generated_at: f64,
    pub sections: Vec<PaperSection>,
    /// Root first, the best branch last.
    pub provenance: Vec<Branch>,
    /// The best branch's whole view.
    pub view: View,
    /// Memory along the best path: what each node, root first, contributed to the view.
    pub path: PathReport,
    /// Problems met on the way (a failing summarizer), also worth a warning.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PaperSection {
    /// snake_case name, stable for scripts.
    pub key: String,
    pub heading: String,
    /// 2 for `##`, 3 for the `###` parts of Memory-Based Analysis.
    pub level: u8,
    /// Markdown body.
    pub text: String,
    /// `memory`, `artifacts`, `summarizer` (rewritten by the configured command), or `none`
    /// (no artifacts given for an artifacts-only section: the text is a note saying so).
    pub source: &'static str,
}

impl PaperMemory {
    pub fn markdown(&self) -> String {
        let who = match &self.node_uid {
            Some(uid) => format!("`{uid}` (branch `{}`)", self.branch),
            None => format!("branch `{}`", self.branch),
        };
        let mut out = format!(
            "# Final Memory For Paper\n\n_Best {who}, exported {} by memctl._\n",
            utc_datetime(self.generated_at)
        );
        for section in &self.sections {
            let hashes = "#".repeat(section.level as usize);
            out += &format!("\n{hashes} {}\n", section.heading);
            if !section.text.trim().is_empty() {
                out += &format!("\n{}\n", section.text.trim_end());
            }
        }
        out
    }
}

/// The runner's artifacts index (`best_node_data`, `top_nodes_data`), checked.
#[derive(Debug, Clone, Default)]
pub struct Artifacts {
    best: Option<Value>,
    top: Vec<Value>,
}

impl Artifacts {
    pub fn parse(text: &str) -> Result<Artifacts> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| Error::invalid(format!("artifacts are not JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(Error::invalid(
                "artifacts must be a JSON object with best_node_data and/or top_nodes_data",
            ));
        };
        let best = match map.get("best_node_data") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => return Err(Error::invalid("artifacts: best_node_data must be an object")),
        };
        let top = match map.get("top_nodes_data") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_object) => items.clone(),
            Some(_) => return Err(Error::invalid("artifacts: top_nodes_data must be a list of objects")),
        };
        if best.is_none() && top.is_empty() && !map.is_empty() {
            return Err(Error::invalid("artifacts have neither best_node_data nor top_nodes_data"));
        }
        Ok(Artifacts { best, top })
    }
}

impl Store {
    /// The paper memory of `branch` (the best node of the search).
    pub fn paper_memory(&self, branch: &str, artifacts: Option<&Artifacts>) -> Result<PaperMemory> {
        let view = self.view(branch)?;
        let mut provenance = self.path_branches(&*self.path(branch)?)?;
        provenance.reverse();
        let material = Material::new(&view, &provenance);
        let best = artifacts.and_then(|a| a.best.as_ref());

        let mut sections = Vec::new();
        let mut add = |key: &str, heading: &str, level: u8, text: String, source: &'static str| {
            sections.push(PaperSection { key: key.into(), heading: heading.into(), level, text, source });
        };
        let (summary, source) = match best {
            Some(best) => (executive_from_artifacts(best, &material), "artifacts"),
            None => (material.executive_summary(), "memory"),
        };
        add("executive_summary", "Executive Summary", 2, summary, source);
        let (details, source) = match best {
            Some(best) => (best_node_details(best), "artifacts"),
            None => (material.best_node_from_memory(), "memory"),
        };
        add("best_node_details", "Best Node Details", 2, details, source);
        let from_artifacts = if artifacts.is_some() { "artifacts" } else { "none" };
        add("vlm_analysis", "VLM Analysis & Visual Feedback", 2, vlm_section(artifacts), from_artifacts);
        add("top_nodes_comparison", "Top Nodes Comparison", 2, top_nodes(artifacts), from_artifacts);
        add("memory_based_analysis", "Memory-Based Analysis", 2, String::new(), "memory");
        for (key, heading) in MEMORY_SECTIONS {
            add(key, heading, 3, material.memory_section(key), "memory");
        }
        add("resources_used", "Resources Used", 2, material.resources(), "memory");
        let feedback = best
            .and_then(|b| text_of(b.get("exec_time_feedback")?))
            .map(|t| (t, "artifacts"))
            .unwrap_or_else(|| (material.execution_feedback(), "memory"));
        add("execution_feedback", "Execution Feedback", 2, feedback.0, feedback.1);
        add(
            "negative_results",
            "Negative Results & Lessons Learned",
            2,
            material.negative_results(),
            "memory",
        );
        add("provenance_chain", "Provenance Chain", 2, material.provenance(), "memory");
        let path = self.path_report(branch)?;
        add("memory_along_best_path", "Memory Along the Best Path", 2, path.markdown(), "memory");

        let mut warnings = Vec::new();
        // A section with nothing recorded keeps its note: an LLM given no material would invent.
        let asked = sections.iter().filter(|s| s.level == 3 && s.text != NOT_RECORDED).count();
        self.progress().start("writing the memory sections", asked as u64);
        for section in sections.iter_mut().filter(|s| s.level == 3 && s.text != NOT_RECORDED) {
            let request = Request::new(
                Task::PaperSection,
                section.text.clone(),
                SECTION_MAX_CHARS,
                &[("section", section.heading.clone())],
                json!({"branch": view.branch.id, "section": section.key}),
            );
            match self.ask_summarizer(&request, Mode::Call)? {
                Answer::Text(text) => {
                    section.text = text;
                    section.source = "summarizer";
                }
                Answer::Failed(warning) => {
                    warnings.push(format!("paper section {}: {warning}", section.heading));
                }
                Answer::None => {}
            }
            self.progress().advance(1);
        }
        self.progress().finish();
        // Whatever went in (idea markdown, artifacts, an LLM's answer), no section may leave a
        // code fence open over the headings after it.
        for section in &mut sections {
            section.text = close_fence(&section.text);
        }
        Ok(PaperMemory {
            branch: view.branch.id.clone(),
            node_uid: view.branch.node_uid.clone(),
            generated_at: self.clock().now(),
            sections,
            provenance,
            view,
            path,
            warnings,
        })
    }
}

/// The `###` parts of Memory-Based Analysis, in the Python store's order.
const MEMORY_SECTIONS: [(&str, &str); 13] = [
    ("title_candidates", "Title Candidates"),
    ("abstract_material", "Abstract Material"),
    ("problem_statement", "Problem Statement"),
    ("hypothesis", "Hypothesis"),
    ("method", "Method"),
    ("experimental_setup", "Experimental Setup"),
    ("phase0_internal_info_summary", "Phase0 Internal Info Summary"),
    ("results", "Results"),
    ("ablations_negative", "Ablations Negative"),
    ("failure_modes_timeline", "Failure Modes Timeline"),
    ("threats_to_validity", "Threats To Validity"),
    ("reproducibility_checklist", "Reproducibility Checklist"),
    ("narrative_bullets", "Narrative Bullets"),
];

const NOT_RECORDED: &str = "_Not recorded in memory._";
const NO_ARTIFACTS: &str =
    "_No artifacts given (`--artifacts FILE` with the runner's best_node_data and top_nodes_data)._";

/// What the sections are written from: the best branch's view, read once.
struct Material<'v> {
    view: &'v View,
    path: &'v [Branch],
    /// `## Heading` → body of the idea markdown (IDEA_MD first, then ROOT_IDEA).
    idea: Vec<(String, String)>,
    /// Node names by branch id, for attributing events.
    names: HashMap<&'v str, &'v str>,
    /// Visible events, oldest first.
    events: Vec<&'v Event>,
}

impl<'v> Material<'v> {
    /// The text of one of [`MEMORY_SECTIONS`].
    fn memory_section(&self, key: &str) -> String {
        match key {
            "title_candidates" => self.title_candidates(),
            "abstract_material" => self.abstract_material(),
            "problem_statement" => self.problem_statement(),
            "hypothesis" => self.hypothesis(),
            "method" => self.method(),
            "experimental_setup" => self.experimental_setup(),
            "phase0_internal_info_summary" => self.phase0(),
            "results" => self.results(),
            "ablations_negative" => self.ablations_negative(),
            "failure_modes_timeline" => self.failure_timeline(),
            "threats_to_validity" => self.threats(),
            "reproducibility_checklist" => self.reproducibility(),
            "narrative_bullets" => self.narrative(),
            _ => unreachable!("not a memory section: {key}"),
        }
    }

    fn new(view: &'v View, path: &'v [Branch]) -> Material<'v> {
        let mut idea = Vec::new();
        for tag in ["IDEA_MD", "ROOT_IDEA"] {
            for record in view.archival.iter().filter(|r| has_tag(&r.tags, tag)) {
                idea.extend(markdown_sections(&record.text));
            }
        }
        let names =
            path.iter().map(|b| (b.id.as_str(), b.node_uid.as_deref().unwrap_or(b.id.as_str()))).collect();
        let mut events: Vec<&Event> = view.events.iter().collect();
        events.reverse();
        Material { view, path, idea, names, events }
    }

    /// The first idea section whose heading is one of `headings` (case-insensitive).
    fn idea(&self, headings: &[&str]) -> Option<&str> {
        self.idea
            .iter()
            .find(|(h, body)| headings.iter().any(|w| h.eq_ignore_ascii_case(w)) && !body.trim().is_empty())
            .map(|(_, body)| body.as_str())
    }

    fn core(&self, key: &str) -> Option<&str> {
        self.view.core.iter().find(|e| e.key == key).map(|e| e.value.as_str())
    }

    fn core_matching(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines: Vec<String> = self
            .view
            .core
            .iter()
            .filter(|e| keep(&e.key))
            .map(|e| bullet(&format!("{}: {}", e.key, e.value)))
            .collect();
        lines.sort();
        lines
    }

    fn records(&self, tag: &str) -> Vec<&'v Record> {
        let mut records: Vec<&Record> = self.view.archival.iter().filter(|r| has_tag(&r.tags, tag)).collect();
        records.reverse();
        records
    }

    /// The node an event is about: its `node_id:` tag, else the branch that wrote it.
    fn node_of(&self, event: &Event) -> String {
        event
            .tags
            .iter()
            .find_map(|t| t.strip_prefix("node_id:"))
            .map(str::to_string)
            .unwrap_or_else(|| self.names.get(&*event.branch).copied().unwrap_or(&event.branch).to_string())
    }

    fn events_where(&self, keep: impl Fn(&Event) -> bool) -> Vec<&'v Event> {
        self.events.iter().copied().filter(|e| keep(e)).collect()
    }

    /// Summary texts of the kinds `keep` accepts: what consolidation left of older events.
    fn summaries_where(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        self.view.summaries.iter().filter(|s| keep(&s.kind)).map(|s| bullet(&s.text)).collect()
    }

    fn dated(&self, event: &Event) -> String {
        format!(
            "- {} · {} · [{}] {}",
            utc_datetime(event.ts),
            self.node_of(event),
            event.kind,
            one_line(&event.text)
        )
    }

    fn best_result(&self) -> Option<&'v Event> {
        self.events.iter().rev().copied().find(|e| is_result(&e.kind))
    }

    fn executive_summary(&self) -> String {
        let best = self.path.last().expect("a path has its branch");
        let mut lines = vec![format!(
            "Best node {} at depth {} of the search, reached through {} ancestors.",
            name(best),
            best.depth,
            self.path.len() - 1
        )];
        let facts = self.core_matching(|k| k.starts_with("best_"));
        if !facts.is_empty() {
            lines.push(String::new());
            lines.push("Best-so-far facts (core memory):".into());
            lines.extend(facts);
        }
        if let Some(result) = self.best_result() {
            lines.push(String::new());
            lines.push(format!(
                "Latest result on the path ({}): {}",
                self.node_of(result),
                one_line(&result.text)
            ));
        }
        if let Some(title) = self.idea(&["Title"]) {
            lines.push(String::new());
            lines.push(format!("Idea: {}", one_line(title)));
        }
        lines.join("\n")
    }

    fn best_node_from_memory(&self) -> String {
        let best = self.path.last().expect("a path has its branch");
        let mut lines = vec![
            format!("- branch: `{}`", best.id),
            format!("- node_uid: {}", best.node_uid.as_deref().unwrap_or("(none)")),
            format!("- depth: {}", best.depth),
        ];
        if best.meta.as_object().is_some_and(|m| !m.is_empty()) {
            lines.push(format!("- metadata: `{}`", best.meta));
        }
        let own: Vec<String> = self
            .view
            .core
            .iter()
            .filter(|e| *e.branch == *best.id)
            .map(|e| format!("  - {}: {}", e.key, one_line(&e.value)))
            .collect();
        if !own.is_empty() {
            lines.push("- core values it set:".into());
            lines.extend(own);
        }
        let events = self.events_where(|e| *e.branch == *best.id);
        if !events.is_empty() {
            lines.push("- its events:".into());
            lines.extend(events.iter().map(|e| format!("  - [{}] {}", e.kind, one_line(&e.text))));
        }
        lines.join("\n")
    }

    fn title_candidates(&self) -> String {
        let mut titles: Vec<String> = Vec::new();
        for (heading, body) in &self.idea {
            let title = match heading.as_str() {
                h if h.eq_ignore_ascii_case("title") => one_line(body),
                h if h.to_ascii_lowercase().starts_with("idea:") => h[5..].trim().to_string(),
                _ => continue,
            };
            if !title.is_empty() && !titles.contains(&title) {
                titles.push(title);
            }
        }
        or_none_listed(titles.iter().map(|t| format!("- {t}")).collect())
    }

    fn abstract_material(&self) -> String {
        let mut parts: Vec<String> =
            self.idea(&["Abstract"]).map(|a| a.trim().to_string()).into_iter().collect();
        if let Some(summary) = self.core("idea_md_summary") {
            parts.push(format!("In short: {summary}"));
        }
        or_not_recorded(parts)
    }

    fn problem_statement(&self) -> String {
        let found = self
            .idea(&["Problem Statement", "Problem", "Motivation", "Background"])
            .map(|p| p.trim().to_string())
            .or_else(|| self.core("task").map(str::to_string))
            .or_else(|| self.idea(&["Abstract"]).map(first_paragraph));
        or_not_recorded(found.into_iter().collect())
    }

    fn hypothesis(&self) -> String {
        let mut parts: Vec<String> = self
            .idea(&["Short Hypothesis", "Hypothesis"])
            .map(|h| h.trim().to_string())
            .into_iter()
            .collect();
        if let Some(current) = self.core("current_hypothesis") {
            parts.push(format!("Working hypothesis on the best branch: {current}"));
        }
        or_not_recorded(parts)
    }

    fn method(&self) -> String {
        let mut parts: Vec<String> =
            self.idea(&["Experiments", "Method"]).map(|m| m.trim().to_string()).into_iter().collect();
        let config =
            self.core_matching(|k| !is_setup_key(k) && !k.starts_with("best_") && !k.starts_with("last_"));
        if !config.is_empty() {
            parts.push(format!("Configuration on the best branch (core memory):\n{}", config.join("\n")));
        }
        let changes: Vec<String> = self
            .records("SUCCESS")
            .iter()
            .filter_map(|r| r.text.lines().find_map(|l| l.strip_prefix("Method changes:")).map(|m| (r, m)))
            .map(|(r, m)| format!("- {}: {}", record_node(r), m.trim()))
            .collect();
        if !changes.is_empty() {
            parts.push(format!("Method changes along the path:\n{}", changes.join("\n")));
        }
        or_not_recorded(parts)
    }

    fn experimental_setup(&self) -> String {
        let mut parts = Vec::new();
        if let Some(summary) = self.core("phase0_summary") {
            parts.push(summary.to_string());
        }
        let hardware = self.core_matching(|k| k.starts_with("hardware_"));
        if !hardware.is_empty() {
            parts.push(hardware.join("\n"));
        }
        let installs: Vec<String> =
            self.events_where(|e| &*e.kind == "phase1_complete").iter().map(|e| bullet(&e.text)).collect();
        if !installs.is_empty() {
            parts.push(format!("Environment preparation:\n{}", installs.join("\n")));
        }
        or_not_recorded(parts)
    }

    fn phase0(&self) -> String {
        or_not_recorded(self.records("PHASE0_INTERNAL").iter().map(|r| r.text.trim().to_string()).collect())
    }

    fn results(&self) -> String {
        let mut parts = Vec::new();
        let best = self.core_matching(|k| k.starts_with("best_"));
        if !best.is_empty() {
            parts.push(best.join("\n"));
        }
        let events: Vec<String> = self
            .events_where(|e| is_result(&e.kind) || is_metric(&e.kind))
            .iter()
            .map(|e| self.dated(e))
            .collect();
        if !events.is_empty() {
            parts.push(format!("Results and metrics along the path, oldest first:\n{}", events.join("\n")));
        }
        let earlier = self.summaries_where(|k| is_result(k) || is_metric(k));
        if !earlier.is_empty() {
            parts.push(format!("Earlier results (consolidated):\n{}", earlier.join("\n")));
        }
        or_not_recorded(parts)
    }

    fn ablations_negative(&self) -> String {
        let mut lines: Vec<String> = self.records("ABLATION").iter().map(|r| bullet(&r.text)).collect();
        lines.extend(self.core_matching(|k| k.contains("ablation")));
        lines.extend(self.events_where(|e| e.kind.contains("ablation")).iter().map(|e| self.dated(e)));
        lines.extend(
            self.events_where(|e| is_result(&e.kind) && is_negative(&e.text)).iter().map(|e| self.dated(e)),
        );
        or_none_listed(lines)
    }

    /// The failures on the best path, for the timeline and the negative results alike: the
    /// visible failure events, oldest first, then the summaries that stand in for the failure
    /// events consolidation hid.
    fn failures(&self) -> Vec<String> {
        let mut parts = Vec::new();
        let events: Vec<String> =
            self.events_where(|e| is_failure(&e.kind)).iter().map(|e| self.dated(e)).collect();
        if !events.is_empty() {
            parts.push(events.join("\n"));
        }
        let earlier = self.summaries_where(is_failure);
        if !earlier.is_empty() {
            parts.push(format!("Earlier failures (consolidated):\n{}", earlier.join("\n")));
        }
        parts
    }

    fn failure_timeline(&self) -> String {
        or_not_recorded(self.failures())
    }

    fn threats(&self) -> String {
        let mut parts: Vec<String> = self
            .idea(&["Risk Factors and Limitations", "Risks", "Limitations", "Threats to Validity"])
            .map(|t| t.trim().to_string())
            .into_iter()
            .collect();
        let failures = self.events_where(|e| is_failure(&e.kind)).len();
        if failures > 0 {
            parts.push(format!(
                "{failures} failure events on the best path: results depend on the build and run settings that avoided them."
            ));
        }
        if self.path.len() == 1 {
            parts.push("The best node is the root: no search refinement stands behind it.".into());
        }
        or_not_recorded(parts)
    }

    fn reproducibility(&self) -> String {
        let check = |done: bool, what: String| format!("- [{}] {what}", if done { "x" } else { " " });
        let hardware = self.core_matching(|k| k.starts_with("hardware_"));
        let build: Vec<String> = ["compile_flags", "selected_compiler", "build_notes"]
            .iter()
            .filter_map(|k| self.core(k).map(|v| format!("{k}: {}", one_line(v))))
            .collect();
        let installs = self.events_where(|e| &*e.kind == "phase1_complete").len();
        let results = self.events_where(|e| is_result(&e.kind) || is_metric(&e.kind)).len();
        [
            check(!hardware.is_empty(), format!("Hardware recorded ({})", plural(hardware.len(), "fact"))),
            check(!build.is_empty(), format!("Build settings recorded{}", list_suffix(&build))),
            check(installs > 0, format!("Environment preparation recorded ({})", plural(installs, "event"))),
            check(results > 0, format!("Results with metrics recorded ({})", plural(results, "event"))),
            check(
                true,
                format!("Provenance from the root to the best node ({})", plural(self.path.len(), "node")),
            ),
        ]
        .join("\n")
    }

    fn narrative(&self) -> String {
        let mut lines = Vec::new();
        if let Some(hypothesis) = self.idea(&["Short Hypothesis", "Hypothesis"]) {
            lines.push(format!("- We set out to test: {}", one_line(hypothesis)));
        }
        lines.push(format!(
            "- The search reached the best node after {} refinement steps from the root.",
            self.path.len() - 1
        ));
        if let Some(result) = self.best_result() {
            lines.push(format!("- Best result recorded: {}", one_line(&result.text)));
        }
        let failures = self.events_where(|e| is_failure(&e.kind)).len();
        if failures > 0 {
            lines.push(format!("- {failures} failures along the way shaped the final configuration."));
        }
        for event in self.events_where(|e| matches!(&*e.kind, "discovery" | "llm_insight")) {
            lines.push(format!("- Insight ({}): {}", self.node_of(event), one_line(&event.text)));
        }
        lines.join("\n")
    }

    fn resources(&self) -> String {
        let mut lines = self.core_matching(|k| k.to_ascii_lowercase().starts_with("resource"));
        for record in &self.view.archival {
            if record.tags.iter().any(|t| t.to_ascii_uppercase().starts_with("RESOURCE")) {
                lines.push(format!("{} (tags: {})", bullet(&record.text), record.tags.join(", ")));
            }
        }
        or_none_listed(lines)
    }

    fn execution_feedback(&self) -> String {
        let lines: Vec<String> = ["last_result", "last_error"]
            .iter()
            .filter_map(|k| self.core(k).map(|v| format!("- {k}: {}", one_line(v))))
            .collect();
        or_none_listed(lines)
    }

    fn negative_results(&self) -> String {
        let mut parts = Vec::new();
        let negative: Vec<String> = self
            .events_where(|e| is_result(&e.kind) && is_negative(&e.text))
            .iter()
            .map(|e| self.dated(e))
            .collect();
        if !negative.is_empty() {
            parts.push(format!("Runs that produced no valid result:\n{}", negative.join("\n")));
        }
        let failures = self.failures();
        if !failures.is_empty() {
            parts.push(format!("What failed:\n{}", failures.join("\n\n")));
        }
        let lessons: Vec<String> = self
            .events_where(|e| matches!(&*e.kind, "discovery" | "llm_insight"))
            .iter()
            .map(|e| self.dated(e))
            .chain(self.records("LLM_INSIGHT").iter().map(|r| bullet(&r.text)))
            .collect();
        if !lessons.is_empty() {
            parts.push(format!("Lessons recorded:\n{}", lessons.join("\n")));
        }
        or_not_recorded(parts)
    }

    fn provenance(&self) -> String {
        self.path
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let result = self
                    .events
                    .iter()
                    .rev()
                    .find(|e| *e.branch == *b.id && is_result(&e.kind))
                    .map(|e| format!(" — {}", one_line(&e.text)))
                    .unwrap_or_default();
                format!("{}. {} (branch `{}`, depth {}){result}", i + 1, name(b), b.id, b.depth)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn executive_from_artifacts(best: &Value, material: &Material<'_>) -> String {
    let mut lines = Vec::new();
    let id = best.get("id").and_then(text_of).unwrap_or_else(|| "(unknown)".into());
    lines.push(format!(
        "Best node `{id}`{}.",
        best.get("metric").and_then(metric_text).map(|m| format!(": {m}")).unwrap_or_default()
    ));
    if let Some(analysis) = best.get("analysis").and_then(text_of) {
        lines.push(String::new());
        lines.push(analysis);
    }
    lines.push(String::new());
    lines.push(format!(
        "Memory: the best branch sees {} core facts, {} events and {} archival records over {} nodes of provenance.",
        material.view.core.len(),
        material.view.events.len(),
        material.view.archival.len(),
        material.path.len()
    ));
    lines.join("\n")
}

fn best_node_details(best: &Value) -> String {
    let mut lines = Vec::new();
    for key in [
        "id",
        "branch_id",
        "metric",
        "plan",
        "overall_plan",
        "analysis",
        "exp_results_dir",
        "workspace_path",
        "datasets_successfully_tested",
        "plot_paths",
        "phase_artifacts",
    ] {
        let Some(value) = best.get(key) else { continue };
        let text = if key == "metric" { metric_text(value) } else { text_of(value) };
        match text {
            Some(text) if text.contains('\n') => lines.push(format!("- **{key}**:\n\n{}\n", indent(&text))),
            Some(text) => lines.push(format!("- **{key}**: {text}")),
            None => {}
        }
    }
    if let Some(code) = best.get("code").and_then(text_of) {
        let fence = code_fence(&code);
        lines.push(format!("\n{fence}\n{}\n{fence}", code.trim_end()));
    }
    or_none_listed(lines)
}

fn vlm_section(artifacts: Option<&Artifacts>) -> String {
    let Some(artifacts) = artifacts else { return NO_ARTIFACTS.into() };
    let Some(best) = &artifacts.best else { return "_No best_node_data in the artifacts._".into() };
    let mut parts: Vec<String> =
        best.get("vlm_feedback_summary").and_then(bullets_or_text).into_iter().collect();
    match best.get("plot_analyses") {
        Some(Value::Array(items)) => {
            let lines: Vec<String> =
                items.iter().filter_map(plot_analysis_text).map(|t| bullet(&t)).collect();
            if !lines.is_empty() {
                parts.push(format!("Plot analyses:\n{}", lines.join("\n")));
            }
        }
        Some(value) => parts.extend(text_of(value)),
        None => {}
    }
    if parts.is_empty() {
        "_No visual feedback in the artifacts._".into()
    } else {
        parts.join("\n\n")
    }
}

fn top_nodes(artifacts: Option<&Artifacts>) -> String {
    let Some(artifacts) = artifacts else { return NO_ARTIFACTS.into() };
    if artifacts.top.is_empty() {
        return "_No top_nodes_data in the artifacts._".into();
    }
    // One line each: a line break would end the table's row.
    let cell = |text: Option<String>, max: usize| {
        excerpt(&one_line(&text.unwrap_or_default()), max).replace('|', "\\|")
    };
    let mut lines = vec![
        "| # | node | metric | plan | analysis | visual feedback |".to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    for (i, node) in artifacts.top.iter().enumerate() {
        lines.push(format!(
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            cell(node.get("id").and_then(inline), 40),
            // The metric is what the table compares: never cut.
            cell(node.get("metric").and_then(metric_text), usize::MAX),
            cell(node.get("plan").and_then(inline), 160),
            cell(node.get("analysis").and_then(inline), 160),
            cell(node.get("vlm_feedback_summary").and_then(inline), 160)
        ));
    }
    lines.join("\n")
}

/// A metric as the runner writes it: `{value, name}` where the value is a number or the nested
/// per-metric object, that nested object alone, or a bare value.
fn metric_text(metric: &Value) -> Option<String> {
    let Value::Object(fields) = metric else { return text_of(metric) };
    if let Some(names) = fields.get("metric_names") {
        return metric_names_text(names);
    }
    let Some(value) = fields.get("value") else { return text_of(metric) };
    if value.get("metric_names").is_some() {
        // The nested object names its metrics itself.
        return metric_text(value);
    }
    let value = text_of(value)?;
    Some(match fields.get("name").and_then(text_of) {
        Some(name) => format!("{name} = {value}"),
        None => value,
    })
}

/// The runner's nested metric, `[{metric_name, lower_is_better, data: [{dataset_name,
/// final_value, best_value}]}]`, as `name (lower is better): final X (best Y) on DATASET`, one
/// part per metric; what does not read that way stays JSON rather than being lost.
fn metric_names_text(names: &Value) -> Option<String> {
    let Value::Array(metrics) = names else { return text_of(names) };
    let readable: Option<Vec<String>> = metrics
        .iter()
        .map(|metric| {
            let name = metric.get("metric_name").and_then(text_of)?;
            let direction = match metric.get("lower_is_better").and_then(Value::as_bool) {
                Some(true) => " (lower is better)",
                Some(false) => " (higher is better)",
                None => "",
            };
            let values: Vec<String> =
                metric.get("data")?.as_array()?.iter().filter_map(dataset_value).collect();
            (!values.is_empty()).then(|| format!("{name}{direction}: {}", values.join(", ")))
        })
        .collect();
    match readable {
        Some(parts) if !parts.is_empty() => Some(parts.join("; ")),
        _ if metrics.is_empty() => None,
        _ => Some(names.to_string()),
    }
}

/// One dataset's entry of a nested metric: `final X (best Y) on DATASET`.
fn dataset_value(data: &Value) -> Option<String> {
    let value = match (data.get("final_value").and_then(text_of), data.get("best_value").and_then(text_of)) {
        (Some(last), Some(best)) => format!("final {last} (best {best})"),
        (Some(last), None) => format!("final {last}"),
        (None, Some(best)) => format!("best {best}"),
        (None, None) => return None,
    };
    Some(match data.get("dataset_name").and_then(text_of) {
        Some(dataset) => format!("{value} on {dataset}"),
        None => value,
    })
}

/// One of the runner's plot analyses: a text, or `{plot_path, analysis}`.
fn plot_analysis_text(item: &Value) -> Option<String> {
    let analysis = item.get("analysis").and_then(text_of);
    match (item.get("plot_path").and_then(text_of), analysis) {
        (Some(path), Some(analysis)) => Some(format!("`{path}`: {analysis}")),
        (None, Some(analysis)) => Some(analysis),
        _ => text_of(item),
    }
}

/// A JSON value as text: strings as they are, lists one item per line, the rest as JSON. Empty
/// or blank strings, empty lists and objects are absent, as runners write them for "nothing".
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => (!s.trim().is_empty()).then(|| s.clone()),
        Value::Array(items) => {
            let lines: Vec<String> = items.iter().filter_map(text_of).collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        }
        Value::Object(fields) if fields.is_empty() => None,
        other => Some(other.to_string()),
    }
}

/// A list as bullets, anything else as its text.
fn bullets_or_text(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) => {
            let lines: Vec<String> = items.iter().filter_map(text_of).map(|t| bullet(&t)).collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        }
        other => text_of(other),
    }
}

/// A value on one line, list items separated by `; `.
fn inline(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(text_of).map(|t| one_line(&t)).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        other => text_of(other).map(|t| one_line(&t)),
    }
}

/// A fence longer than any run of backticks in `code`, so no line of the code can close it.
fn code_fence(code: &str) -> String {
    let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Fenced code blocks of markdown read line by line (CommonMark: a run of 3+ backticks or
/// tildes opens one; a run of the same character at least as long, alone on its line, closes it).
#[derive(Default)]
struct Fences {
    /// The open fence's character and length.
    open: Option<(char, usize)>,
}

impl Fences {
    /// Reads the next line; true when it opens, closes or is inside a fenced block.
    fn read(&mut self, line: &str) -> bool {
        let rest = line.trim_start_matches(' ');
        if line.len() - rest.len() > 3 {
            return self.open.is_some();
        }
        let run = |c: char| rest.len() - rest.trim_start_matches(c).len();
        match self.open {
            Some((c, n)) => {
                if run(c) >= n && rest.trim_start_matches(c).trim().is_empty() {
                    self.open = None;
                }
                true
            }
            None => {
                let opened = ['`', '~'].into_iter().map(|c| (c, run(c))).find(|&(c, n)| {
                    // A backtick fence's info string may not hold backticks (that is inline code).
                    n >= 3 && !(c == '`' && rest[n..].contains('`'))
                });
                self.open = opened;
                opened.is_some()
            }
        }
    }

    /// The line that closes the open fence, if one is open.
    fn closing(&self) -> Option<String> {
        self.open.map(|(c, n)| c.to_string().repeat(n))
    }
}

/// `text` with a fence it leaves open closed at its end.
fn close_fence(text: &str) -> String {
    let mut fences = Fences::default();
    for line in text.lines() {
        fences.read(line);
    }
    match fences.closing() {
        Some(closing) => format!("{}\n{closing}", text.trim_end()),
        None => text.to_string(),
    }
}

/// `# ` and `## ` headings with the text under each; lines in fenced code are never headings,
/// and a fence the document leaves open is closed at the end of its section.
fn markdown_sections(text: &str) -> Vec<(String, String)> {
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut fences = Fences::default();
    for line in text.lines() {
        let heading = if fences.read(line) {
            None
        } else {
            line.strip_prefix("## ").or_else(|| line.strip_prefix("# "))
        };
        if let Some(heading) = heading {
            sections.push((heading.trim().to_string(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let (Some(closing), Some((_, body))) = (fences.closing(), sections.last_mut()) {
        body.push_str(&closing);
        body.push('\n');
    }
    sections
}

fn has_tag(tags: &[String], tag: &str) -> bool {
    tags.iter().any(|t| t == tag)
}

fn record_node(record: &Record) -> String {
    record.tags.iter().find_map(|t| t.strip_prefix("node_id:")).unwrap_or(&record.branch).to_string()
}

fn is_result(kind: &str) -> bool {
    kind == "node_result" || kind.ends_with("_result")
}

fn is_metric(kind: &str) -> bool {
    kind.contains("metric")
}

fn is_failure(kind: &str) -> bool {
    kind.contains("error") || kind.contains("fail")
}

/// A result that says the run produced nothing usable.
fn is_negative(text: &str) -> bool {
    text.contains("is_buggy=True") || text.contains("metric=None")
}

fn is_setup_key(key: &str) -> bool {
    key.starts_with("hardware_")
        || key.starts_with("phase0")
        || key.starts_with("idea_md")
        || key.to_ascii_lowercase().starts_with("resource")
}

fn name(branch: &Branch) -> String {
    match &branch.node_uid {
        Some(uid) => format!("`{uid}`"),
        None => format!("`{}`", branch.id),
    }
}

fn bullet(text: &str) -> String {
    format!("- {}", one_line(text))
}

fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    text.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

fn first_paragraph(text: &str) -> String {
    close_fence(text.trim().split("\n\n").next().unwrap_or_default().trim())
}

fn list_suffix(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(": {}", items.join("; "))
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Lines of a list, or the not-recorded note.
fn or_none_listed(lines: Vec<String>) -> String {
    if lines.is_empty() {
        NOT_RECORDED.into()
    } else {
        lines.join("\n")
    }
}

/// Paragraphs, or the not-recorded note.
fn or_not_recorded(parts: Vec<String>) -> String {
    if parts.is_empty() {
        NOT_RECORDED.into()
    } else {
        parts.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_in_fenced_code_are_never_headings() {
        let text =
            "# Idea\n## Method\n```sh\n# a comment\n```\n~~~~\n## code\n~~~\nstill code\n~~~~\nafter\n";
        let sections = markdown_sections(text);
        let headings: Vec<&str> = sections.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(headings, ["Idea", "Method"]);
        assert!(sections[1].1.ends_with("still code\n~~~~\nafter\n"), "{:?}", sections[1].1);
        // An info string with a backtick is inline code, not a fence.
        assert_eq!(markdown_sections("# A\n``` `x` ```\n# B\n").len(), 2);
        // Indented four spaces: code, not a fence.
        assert_eq!(markdown_sections("# A\n    ```\n# B\n").len(), 2);
    }

    #[test]
    fn a_fence_left_open_is_closed_where_its_text_ends() {
        let sections = markdown_sections("# A\n````py\nx = 1\n```\n");
        assert_eq!(sections[0].1, "````py\nx = 1\n```\n````\n", "a shorter run does not close it");
        assert_eq!(close_fence("see\n~~~\ncode\n\n"), "see\n~~~\ncode\n~~~");
        assert_eq!(close_fence("```\ncode\n```\n"), "```\ncode\n```\n", "a closed fence is left as it is");
        assert_eq!(first_paragraph("```\na\n\nb\n```"), "```\na\n```");
    }

    #[test]
    fn a_code_fence_is_longer_than_any_backtick_run_in_the_code() {
        assert_eq!(code_fence("int x;"), "```");
        assert_eq!(code_fence("a ``` b ````` c"), "``````");
    }

    #[test]
    fn blank_artifact_values_are_absent() {
        for blank in [json!(null), json!(""), json!(" \n"), json!([]), json!(["", null]), json!({})] {
            assert_eq!(text_of(&blank), None, "{blank}");
        }
        assert_eq!(text_of(&json!(["a", "", 2])).as_deref(), Some("a\n2"));
    }

    #[test]
    fn metrics_read_as_text() {
        assert_eq!(
            metric_text(&json!({"value": 1.9, "name": "runtime_s"})).as_deref(),
            Some("runtime_s = 1.9")
        );
        assert_eq!(metric_text(&json!(2.4)).as_deref(), Some("2.4"));
        let nested = json!({"metric_names": [
            {"metric_name": "gflops", "lower_is_better": false, "data": [{"dataset_name": "big", "final_value": 160}]},
            {"metric_name": "runtime_s", "data": [{"best_value": 1.8}]}
        ]});
        let text = "gflops (higher is better): final 160 on big; runtime_s: best 1.8";
        assert_eq!(metric_text(&nested).as_deref(), Some(text));
        assert_eq!(metric_text(&json!({"value": nested, "name": "ignored"})).as_deref(), Some(text));
        // What does not read as the runner's shape stays JSON rather than being lost.
        let odd = json!({"metric_names": [{"metric_name": "x"}]});
        assert_eq!(metric_text(&odd).as_deref(), Some(r#"[{"metric_name":"x"}]"#));
    }

    #[test]
    fn plot_analyses_read_as_text() {
        let item = json!({"plot_path": "p.png", "analysis": "flat"});
        assert_eq!(plot_analysis_text(&item).as_deref(), Some("`p.png`: flat"));
        assert_eq!(plot_analysis_text(&json!({"analysis": "flat"})).as_deref(), Some("flat"));
        assert_eq!(plot_analysis_text(&json!("as text")).as_deref(), Some("as text"));
    }
}
