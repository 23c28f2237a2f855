//! Reductions of a branch's conversation, all copy-on-write in that branch only (exclusions,
//! summaries and new rows of its own, as consolidation writes): `prune` drops old steps or cuts
//! old observations, `compact` replaces the agent's work between user messages by summaries,
//! `reset` starts the conversation again. Full texts stay searchable in archival.

use super::messages::{conversation, shorten_observation, to_messages, tokens, Entry, Item, MessageFormat};
use super::step::StepType;
use super::{RESET_KIND, SUMMARY_KIND};
use crate::archival::ArchivalWrite;
use crate::error::{Error, Result};
use crate::one_line::shortened;
use crate::rows::{BranchPath, Summary};
use crate::store::{Store, Tx};
use crate::summarizer::{Answer, Mode, Request, Task};
use crate::tokens::Encoding;
use crate::view;
use serde::Serialize;
use serde_json::json;

/// What `prune` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneOutcome {
    /// Steps that left the view.
    pub removed: Vec<i64>,
    /// Actions whose observation was cut: (old id, new id).
    pub shortened: Vec<[i64; 2]>,
    /// Compaction summaries that left the view with the steps they stood for.
    pub summaries: Vec<i64>,
    /// The archival record holding the full texts.
    pub archived: Option<i64>,
}

/// What `compact` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactOutcome {
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// The summaries written, one per run of agent steps replaced.
    pub summaries: Vec<i64>,
    /// How many steps they replaced.
    pub steps: usize,
    /// The archival record holding their full texts.
    pub archived: Option<i64>,
}

/// What `reset` hides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResetScope {
    /// The conversation only: core and archival stay.
    Conversation,
    /// The conversation, core and archival.
    All,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResetOutcome {
    /// How many steps left the view.
    pub steps: usize,
    /// The compaction summaries that left the view with them.
    pub summaries: Vec<i64>,
    /// With `All`: the core keys deleted, and how many archival records.
    pub core: Vec<String>,
    pub records: usize,
}

/// The most characters an extract keeps of one step.
const EXTRACT_LINE_CHARS: usize = 80;

/// The most characters of a compaction summary.
const SUMMARY_MAX_CHARS: usize = 2000;

impl Tx<'_> {
    /// Keeps only the last `keep_last` steps (system and task stay), and/or cuts the
    /// observations of actions older than the last `old_observations.0` steps to
    /// `old_observations.1` characters (a shortened copy takes the original's place).
    pub fn prune(
        &self,
        branch: &str,
        keep_last: Option<usize>,
        old_observations: Option<(usize, usize)>,
    ) -> Result<PruneOutcome> {
        if keep_last.is_none() && old_observations.is_none() {
            return Err(Error::invalid("nothing to prune: give --keep-last or --old-observations"));
        }
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let entries = conversation(self, &path)?;
        let loose: Vec<&Entry> = entries.iter().filter(|e| !e.pinned()).collect();
        let mut removed: Vec<i64> = Vec::new();
        let mut full_texts: Vec<String> = Vec::new();
        let mut shortened = Vec::new();
        let mut summaries = Vec::new();
        if let Some(n) = keep_last {
            for entry in &loose[..loose.len().saturating_sub(n)] {
                match &entry.item {
                    Item::Step { id, step } => {
                        let step = step.get();
                        removed.push(*id);
                        full_texts.push(format!("[step:{}] {}", step.step_type.as_str(), step.render()));
                    }
                    Item::Summary { id, text, .. } => {
                        summaries.push(*id);
                        full_texts.push(format!("[summary:{SUMMARY_KIND}] {text}"));
                    }
                }
            }
        }
        if let Some((n, max_chars)) = old_observations {
            for entry in &loose[..loose.len().saturating_sub(n)] {
                let Item::Step { id, step } = &entry.item else { continue };
                if removed.contains(id) {
                    continue;
                }
                let step = step.get();
                let mut short = step.clone();
                if shorten_observation(&mut short, max_chars) {
                    short.payload.insert("at".into(), json!(entry.position));
                    let new_id = self.insert_step(
                        bid,
                        &short.step_type.kind(),
                        &short.render(),
                        &serde_json::to_string(&short.payload)?,
                    )?;
                    removed.push(*id);
                    full_texts.push(format!("[step:action] {}", step.render()));
                    shortened.push([*id, new_id]);
                }
            }
        }
        let archived = match full_texts.is_empty() {
            true => None,
            false => Some(
                self.archival_insert(
                    bid,
                    ArchivalWrite::new(
                        format!("Pruned conversation steps:\n{}", full_texts.join("\n")),
                        ["PRUNED_STEPS".into(), format!("step_count:{}", removed.len())],
                    ),
                )?
                .id,
            ),
        };
        let outcome = PruneOutcome { removed, shortened, summaries, archived };
        if outcome.removed.is_empty() && outcome.summaries.is_empty() {
            return Ok(outcome);
        }
        self.insert_exclusions(bid, as_steps(&outcome.removed))?;
        if let Some(record) = archived.filter(|_| !outcome.summaries.is_empty()) {
            let text = format!(
                "pruned: {} of the conversation left the view (full texts in archival record {record})",
                summaries_of(outcome.summaries.len())
            );
            self.retire_summaries(&path, &outcome.summaries, &text)?;
        }
        self.journal(Some(bid), "conversation.prune", serde_json::to_value(&outcome)?)?;
        Ok(outcome)
    }

    /// When the conversation's messages exceed `budget` tokens: keeps system, task and every
    /// user message verbatim, and replaces each run of agent steps between two of them, all but
    /// the newest run, by one summary (the summarizer's cached answer, else an extract) —
    /// unless neither is shorter than the run; the steps' full texts go to one archival record.
    /// [`Store::compact`] asks the summarizer first.
    pub fn compact(&self, branch: &str, budget: usize, encoding: Encoding) -> Result<CompactOutcome> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let entries = conversation(self, &path)?;
        let (tokens_before, runs) = compaction(&entries, budget, encoding);
        let mut outcome = CompactOutcome {
            tokens_before,
            tokens_after: tokens_before,
            summaries: vec![],
            steps: 0,
            archived: None,
        };
        let mut kept = self.kept_summaries(&path)?;
        let mut full_texts = Vec::new();
        for run in runs {
            let answer = match self.ask_summarizer(&run.request, Mode::CacheOnly)? {
                Answer::Text(answer) => Some(answer),
                Answer::None | Answer::Failed(_) => None,
            };
            // A summary longer than what it replaces (a short run) would only cost tokens.
            let shorter = |text: &String| {
                let summary = Entry {
                    position: 0,
                    item: Item::Summary { id: 0, text: text.clone(), steps: run.steps.clone() },
                };
                tokens(&to_messages(&summary, MessageFormat::Openai, false), encoding) < run.tokens
            };
            let Some(text) = answer.into_iter().chain([run.extract]).find(shorter) else {
                continue;
            };
            // Listed by the steps it replaces, the summary takes the place of the first: still
            // between the same two user messages as the summaries it folds in.
            let seq = self.insert_summary(bid, &mut kept, SUMMARY_KIND, &text, &run.covers, &run.folded)?;
            self.insert_exclusions(bid, as_steps(&run.steps))?;
            outcome.summaries.push(seq);
            outcome.steps += run.steps.len();
            full_texts.extend(run.full_texts);
        }
        if !outcome.summaries.is_empty() {
            let record = ArchivalWrite::new(
                format!("Compacted conversation steps:\n{}", full_texts.join("\n")),
                ["COMPACTED_STEPS".into(), format!("step_count:{}", outcome.steps)],
            );
            outcome.archived = Some(self.archival_insert(bid, record)?.id);
            self.forget();
            outcome.tokens_after = count(&conversation(self, &path)?, encoding);
            self.journal(Some(bid), "conversation.compact", serde_json::to_value(&outcome)?)?;
        }
        Ok(outcome)
    }

    /// Hides the conversation (and with `All`, core and archival) from `branch`'s view: its
    /// steps, and its compaction summaries (retired into one that says so).
    pub fn reset(&self, branch: &str, scope: ResetScope) -> Result<ResetOutcome> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        // The reset marks of earlier memctls go too: nothing is left for them to hold back.
        let steps: Vec<(i64, bool)> =
            view::steps(self, &path)?.into_iter().map(|s| (s.id, s.kind == RESET_KIND)).collect();
        let summaries: Vec<Summary> =
            view::summaries(self, &path)?.into_iter().filter(|s| &*s.kind == SUMMARY_KIND).collect();
        // Those of steps; the others say what became of earlier ones, and go with them.
        let live: Vec<i64> = summaries.iter().filter(|s| !s.event_ids.is_empty()).map(|s| s.id).collect();
        let step_count = steps.iter().filter(|(_, mark)| !mark).count();
        if step_count > 0 || !live.is_empty() {
            self.insert_exclusions(bid, steps.iter().map(|&(id, _)| (id, true)))?;
            if !summaries.is_empty() {
                let text = match live.len() {
                    0 => "conversation reset".to_string(),
                    n => format!("conversation reset: {} of it left the view", summaries_of(n)),
                };
                self.retire_summaries(&path, &live, &text)?;
            }
        }
        let mut outcome = ResetOutcome { steps: step_count, summaries: live, core: vec![], records: 0 };
        if scope == ResetScope::All {
            let keys: Vec<String> = view::core(self, &path)?.into_iter().map(|e| e.key).collect();
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            outcome.core = self.core_delete(branch, &keys)?;
            for record in view::archival(self, &path, &[], None)? {
                self.archival_delete(branch, record.id)?;
                outcome.records += 1;
            }
        }
        // A reset that found nothing to hide leaves no trace, as a prune that cut nothing.
        if outcome.steps > 0
            || !outcome.summaries.is_empty()
            || !outcome.core.is_empty()
            || outcome.records > 0
        {
            self.journal(Some(bid), "conversation.reset", json!({"scope": scope, "outcome": outcome}))?;
        }
        Ok(outcome)
    }
}

impl Tx<'_> {
    /// Takes compaction summaries out of `path`'s view: a summary cannot be excluded, so they
    /// are folded, with the earlier ones this left, into one of no step (so no message) that
    /// says what became of them, newest first, after what the earlier ones said (a prune's
    /// names the archival record of the full texts).
    fn retire_summaries(&self, path: &BranchPath, retired: &[i64], text: &str) -> Result<()> {
        let summaries = view::summaries(self, path)?;
        let earlier: Vec<&Summary> =
            summaries.iter().filter(|s| &*s.kind == SUMMARY_KIND && s.event_ids.is_empty()).collect();
        let mut lines = vec![text];
        for line in earlier.iter().flat_map(|s| s.text.lines()) {
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
        let text = crate::journal::cut(&lines.join("\n"), SUMMARY_MAX_CHARS).into_owned();
        let replaced: Vec<i64> = retired.iter().copied().chain(earlier.iter().map(|s| s.id)).collect();
        let mut kept = summaries.iter().map(|s| s.id).collect();
        self.insert_summary(path.branch().bid, &mut kept, SUMMARY_KIND, &text, &[], &replaced)?;
        Ok(())
    }
}

/// Steps' ids as [`Tx::insert_exclusions`] takes them: each one a step.
fn as_steps(ids: &[i64]) -> impl Iterator<Item = (i64, bool)> + '_ {
    ids.iter().map(|&id| (id, true))
}

impl Store {
    /// [`Tx::compact`], the summarizer asked first, outside the write transaction (it may take
    /// minutes, and other writers wait for the lock only `busy_timeout`); the transaction then
    /// plans again and uses the cached answers.
    pub fn compact(&self, branch: &str, budget: usize, encoding: Encoding) -> Result<CompactOutcome> {
        if self.summarizer().is_some() {
            let requests = self
                .read(|| compaction_requests(&conversation(self, &*self.path(branch)?)?, budget, encoding))?;
            self.ask_ahead(&requests)?;
        }
        self.write(|tx| tx.compact(branch, budget, encoding))
    }

    /// Runs the summarizer on each request not yet answered, caching the answers; a failure is
    /// left to the transaction's fallback, as it would be there.
    pub(super) fn ask_ahead(&self, requests: &[Request]) -> Result<()> {
        for request in requests {
            self.ask_summarizer(request, Mode::Call)?;
        }
        Ok(())
    }
}

/// The requests compacting `entries` to `budget` would send the summarizer.
pub(super) fn compaction_requests(
    entries: &[Entry],
    budget: usize,
    encoding: Encoding,
) -> Result<Vec<Request>> {
    Ok(compaction(entries, budget, encoding).1.into_iter().map(|run| run.request).collect())
}

/// A run of agent steps (and earlier summaries) between two user messages, as compaction
/// would replace it.
struct Run {
    /// The steps it holds.
    steps: Vec<i64>,
    /// The steps the summary stands for, as their places in the conversation: a shortened copy
    /// (`prune --old-observations`) by the step it stands in for, so that the summary, placed
    /// at the first of them, takes the run's place.
    covers: Vec<i64>,
    /// The summaries it holds, folded into the new one.
    folded: Vec<i64>,
    /// Its steps' full texts, for archival.
    full_texts: Vec<String>,
    /// Its messages' tokens.
    tokens: usize,
    /// What the summarizer is asked, and the deterministic summary if it does not answer.
    request: Request,
    extract: String,
}

/// The tokens of `entries`' messages, and the runs compacting them to `budget` would replace
/// (none when they are within it): every run but the newest.
fn compaction(entries: &[Entry], budget: usize, encoding: Encoding) -> (usize, Vec<Run>) {
    let tokens_before = count(entries, encoding);
    if tokens_before <= budget {
        return (tokens_before, vec![]);
    }
    // A user message, a task or a system message ends a run: the agent's work is summarized
    // between the same two of them, never across one.
    let mut runs: Vec<Vec<&Entry>> = vec![vec![]];
    for entry in entries {
        if entry.is_user() || entry.pinned() {
            runs.push(vec![]);
        } else {
            runs.last_mut().expect("a run").push(entry);
        }
    }
    runs.retain(|run| !run.is_empty());
    runs.pop(); // the newest run stays as it is
    let runs = runs
        .into_iter()
        .filter_map(|run| {
            let mut steps = Vec::new();
            let mut covers = Vec::new();
            let mut full_texts = Vec::new();
            let mut folded = Vec::new();
            let mut lines = Vec::new();
            let mut step_lines = Vec::new();
            for entry in &run {
                match &entry.item {
                    Item::Step { id, step } => {
                        let text = step.get().render();
                        steps.push(*id);
                        covers.push(entry.position);
                        step_lines.push(extract_line(step.step_type, &text));
                        full_texts.push(format!("[step:{}] {text}", step.step_type.as_str()));
                    }
                    Item::Summary { id, text, .. } => {
                        folded.push(*id);
                        lines.push(text.clone());
                    }
                }
            }
            if steps.is_empty() {
                return None;
            }
            // Earlier summaries first, then the steps.
            lines.extend(step_lines);
            let text = lines.join("\n");
            let extract = crate::journal::cut(&text, SUMMARY_MAX_CHARS).into_owned();
            let request = Request::new(
                Task::Conversation,
                text,
                SUMMARY_MAX_CHARS,
                &[("count", lines.len().to_string())],
                json!({}),
            );
            let tokens = count(run.iter().copied(), encoding);
            Some(Run { steps, covers, full_texts, folded, tokens, request, extract })
        })
        .collect();
    (tokens_before, runs)
}

/// The tokens of `entries`' messages.
fn count<'a>(entries: impl IntoIterator<Item = &'a Entry>, encoding: Encoding) -> usize {
    let messages: Vec<_> =
        entries.into_iter().flat_map(|e| to_messages(e, MessageFormat::Openai, false)).collect();
    tokens(&messages, encoding)
}

/// "1 summary", "3 summaries".
fn summaries_of(n: usize) -> String {
    match n {
        1 => "1 summary".to_string(),
        n => format!("{n} summaries"),
    }
}

/// One line of the deterministic extract of a step.
fn extract_line(step_type: StepType, text: &str) -> String {
    format!("- {}: {}", step_type.as_str(), shortened(text, EXTRACT_LINE_CHARS))
}
