//! The prompt section a runner injects (SPEC §4.5): `Core Memory:`, `Recall Memory:`,
//! `Archival Memory:`, packed item by item into a budget of characters or tokens.
//!
//! Packing: core lines first, then recall (summaries, then events newest first) and archival
//! (best first) take turns for the rest. An item that does not fit whole is dropped and the
//! next is tried; nothing is ever cut, so the text never exceeds the budget. Rendering reads
//! one snapshot of the view and writes nothing.

use crate::archival::Search;
use crate::error::Result;
use crate::rows::{is_step, Record};
use crate::store::Store;
use crate::tokens::{count_tokens_within, Encoding};
use crate::view::{self, View};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How much text a prompt section may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Chars(usize),
    Tokens { limit: usize, encoding: Encoding },
    Unlimited,
}

impl Budget {
    fn measure(&self, text: &str) -> usize {
        self.measure_within(text, usize::MAX).expect("no size exceeds usize::MAX")
    }

    /// The size of `text` if it is at most `room`, else None (a text of tokens that cannot fit
    /// is not counted to its end).
    fn measure_within(&self, text: &str, room: usize) -> Option<usize> {
        match self {
            Budget::Tokens { encoding, .. } => count_tokens_within(*encoding, text, room),
            Budget::Chars(_) | Budget::Unlimited => Some(text.chars().count()).filter(|&n| n <= room),
        }
    }

    fn limit(&self) -> usize {
        match self {
            Budget::Chars(limit) | Budget::Tokens { limit, .. } => *limit,
            Budget::Unlimited => usize::MAX,
        }
    }
}

/// What went into one section and what did not fit.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SectionReport {
    /// Core keys, or recall/archival ids.
    pub included: Vec<Value>,
    pub dropped: Vec<Value>,
}

/// A rendered prompt section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptContext {
    pub text: String,
    pub chars: usize,
    /// Present when the budget was in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
    /// By section: `core`, `recall`, `archival`.
    pub sections: BTreeMap<&'static str, SectionReport>,
}

#[derive(Debug, Clone, Copy)]
enum Section {
    Core,
    Recall,
    Archival,
}

impl Section {
    const ALL: [Section; 3] = [Section::Core, Section::Recall, Section::Archival];

    fn header(self) -> &'static str {
        match self {
            Section::Core => "Core Memory:",
            Section::Recall => "Recall Memory:",
            Section::Archival => "Archival Memory:",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Section::Core => "core",
            Section::Recall => "recall",
            Section::Archival => "archival",
        }
    }
}

/// One line of the prompt, in display order within its section.
struct Item {
    line: String,
    id: Value,
}

/// ` (tags: a, b)`, or nothing without tags: how tags follow a line in prompts and listings.
pub fn tags_suffix(tags: &[String]) -> TagsSuffix<'_> {
    TagsSuffix(tags)
}

/// The tags a line ends with (see [`tags_suffix`]), written where the line is: a whole view's
/// listing writes thousands.
pub struct TagsSuffix<'a>(&'a [String]);

impl std::fmt::Display for TagsSuffix<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some((first, rest)) = self.0.split_first() else { return Ok(()) };
        f.write_str(" (tags: ")?;
        f.write_str(first)?;
        for tag in rest {
            f.write_str(", ")?;
            f.write_str(tag)?;
        }
        f.write_str(")")
    }
}

/// A text inside an item: its lines after the first indented by two spaces, so that a text of
/// several lines stays within its item and none of its lines reads as a header or an item of
/// its own (a stored `Recall Memory:` or `- [note] …` line, a summary's list of events).
struct Indented<'a>(&'a str);

impl std::fmt::Display for Indented<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every break a reader may take for a new line (`\r`, `\r\n`, a form feed, U+2028, …)
        // is written as one `\n`, followed by the indent.
        let mut lines =
            self.0.split('\n').flat_map(|line| line.strip_suffix('\r').unwrap_or(line).split(BREAKS));
        f.write_str(lines.next().unwrap_or_default())?;
        for line in lines {
            f.write_str(if line.is_empty() { "\n" } else { "\n  " })?;
            f.write_str(line)?;
        }
        Ok(())
    }
}

/// Line breaks besides `\n`.
const BREAKS: [char; 6] = ['\r', '\u{b}', '\u{c}', '\u{85}', '\u{2028}', '\u{2029}'];

/// The candidate lines of each section, in display order, and the core lines' places in the
/// order the budget keeps them: the eviction's order reversed (highest importance, then newest).
fn items(view: &View, records: &[Record]) -> ([Vec<Item>; 3], Vec<usize>) {
    let mut core: Vec<&crate::rows::CoreEntry> = view.core.iter().collect();
    core.sort_by(|a, b| a.key.cmp(&b.key));
    let mut core_rank: Vec<usize> = (0..core.len()).collect();
    core_rank.sort_by_key(|&i| std::cmp::Reverse((core[i].importance, core[i].seq)));
    let core = core
        .into_iter()
        .map(|e| Item { line: format!("- {}: {}", e.key, Indented(&e.value)), id: json!(e.key) })
        .collect();
    let summaries = view
        .summaries
        .iter()
        .rev()
        .map(|s| Item { line: format!("- [summary:{}] {}", s.kind, Indented(&s.text)), id: json!(s.id) });
    let events = view.events.iter().map(|e| Item {
        line: format!("- [{}] {}{}", e.kind, Indented(&e.text), tags_suffix(&e.tags)),
        id: json!(e.id),
    });
    let recall = summaries.chain(events).collect();
    let archival = records
        .iter()
        .map(|r| Item { line: format!("- {}{}", Indented(&r.text), tags_suffix(&r.tags)), id: json!(r.id) })
        .collect();
    ([core, recall, archival], core_rank)
}

/// Core first, then recall and archival in turns: the order items are offered to the budget.
/// Core lines go by `core_rank` (shown by key), so that a pinned fact is kept before a scratch
/// note that sorts before it.
fn priority(sections: &[Vec<Item>; 3], core_rank: &[usize]) -> Vec<(usize, usize)> {
    let [_, recall, archival] = sections;
    let mut order: Vec<(usize, usize)> = core_rank.iter().map(|&i| (0, i)).collect();
    for i in 0..recall.len().max(archival.len()) {
        if i < recall.len() {
            order.push((1, i));
        }
        if i < archival.len() {
            order.push((2, i));
        }
    }
    order
}

/// What `line` adds to a text of `parts` parts, after `header` when it opens its section, each
/// part after the text's first with its separating newline, if that is at most `room`.
fn cost_within(budget: Budget, header: Option<&str>, line: &str, parts: usize, room: usize) -> Option<usize> {
    let mut cost = 0;
    for (n, part) in header.into_iter().chain([line]).enumerate() {
        cost += usize::from(parts + n > 0);
        cost += budget.measure_within(part, room.checked_sub(cost)?)?;
    }
    Some(cost)
}

fn assemble(sections: &[Vec<Item>; 3], included: &[Vec<bool>; 3]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for (s, section) in Section::ALL.iter().enumerate() {
        if included[s].iter().any(|&i| i) {
            parts.push(section.header());
            parts.extend(
                sections[s].iter().zip(&included[s]).filter(|(_, &i)| i).map(|(item, _)| item.line.as_str()),
            );
        }
    }
    parts.join("\n")
}

impl Store {
    /// Renders the prompt section of a branch's view within `budget`. The archival lines are the
    /// best `retrieval_k` records for `query`, or the newest without one. Writes nothing.
    pub fn render_context(&self, branch: &str, query: Option<&str>, budget: Budget) -> Result<PromptContext> {
        let (view, records) = self.read(|| {
            let config = &self.config;
            let mut view = self.view_window(branch, Some(config.recall_max_events), Some(0))?;
            // The conversation's steps are `messages`' to show: a window of them would repeat
            // the chat and push the notes, metrics and results out of the prompt.
            if view.events.iter().any(|e| is_step(&e.kind)) {
                let path = self.path(branch)?;
                let visible = view::event_counts(self, path.branch().bid)?.events;
                view.events =
                    view::newest_events_besides_steps(self, &path, visible, config.recall_max_events)?;
            }
            let search =
                Search { query: query.unwrap_or("").to_string(), k: config.retrieval_k, tags: vec![] };
            Ok((view, self.archival_search(branch, &search)?))
        })?;
        let (sections, core_rank) = items(&view, &records);
        let order = priority(&sections, &core_rank);
        let limit = budget.limit();
        let mut included: [Vec<bool>; 3] = sections.each_ref().map(|s| vec![false; s.len()]);
        // Sizes add up: each part after the first costs its separating newline too. For tokens
        // the sum is an estimate, checked on the assembled text below.
        let mut used = 0usize;
        let mut parts = 0usize;
        for &(s, i) in &order {
            let header = (!included[s].iter().any(|&x| x)).then(|| Section::ALL[s].header());
            // `used` never passes `limit`: a cost is at most the room left.
            if let Some(cost) = cost_within(budget, header, &sections[s][i].line, parts, limit - used) {
                used += cost;
                parts += usize::from(header.is_some()) + 1;
                included[s][i] = true;
            }
        }
        let mut text = assemble(&sections, &included);
        let mut size = budget.measure(&text);
        while size > limit {
            // Token counts do not always add up across a newline: drop the last item offered.
            let Some(&(s, i)) = order.iter().rev().find(|&&(s, i)| included[s][i]) else { break };
            included[s][i] = false;
            text = assemble(&sections, &included);
            size = budget.measure(&text);
        }
        let mut reports = BTreeMap::new();
        for (s, section) in Section::ALL.iter().enumerate() {
            let mut report = SectionReport::default();
            for (item, &inside) in sections[s].iter().zip(&included[s]) {
                if inside { &mut report.included } else { &mut report.dropped }.push(item.id.clone());
            }
            reports.insert(section.name(), report);
        }
        let tokens = matches!(budget, Budget::Tokens { .. }).then_some(size);
        Ok(PromptContext { chars: text.chars().count(), tokens, text, sections: reports })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each part after a text's first costs its separating newline; past the room, nothing.
    #[test]
    fn cost_within_counts_separators_and_stops_past_the_room() {
        let chars = Budget::Chars(100);
        assert_eq!(cost_within(chars, Some("Core Memory:"), "- a: b", 0, 100), Some(12 + 1 + 6));
        assert_eq!(cost_within(chars, Some("Core Memory:"), "- a: b", 0, 19), Some(19));
        assert_eq!(cost_within(chars, Some("Core Memory:"), "- a: b", 0, 18), None);
        assert_eq!(cost_within(chars, Some("Core Memory:"), "- a: b", 2, 20), Some(1 + 12 + 1 + 6));
        assert_eq!(cost_within(chars, Some("Core Memory:"), "- a: b", 2, 19), None);
        assert_eq!(cost_within(chars, None, "- a: b", 3, 7), Some(7));
        assert_eq!(cost_within(chars, None, "- a: b", 3, 6), None);
        assert_eq!(cost_within(chars, None, "x", 1, 0), None);
        let tokens = Budget::Tokens { limit: 100, encoding: Encoding::Cl100kBase };
        assert_eq!(cost_within(tokens, None, "hello world", 0, 2), Some(2));
        assert_eq!(cost_within(tokens, None, "hello world", 0, 1), None);
        assert_eq!(cost_within(tokens, None, "hello world", 1, 2), None);
    }

    proptest! {
        /// The cost within a room is the whole cost when it fits, and nothing when it does not.
        #[test]
        fn cost_within_is_the_whole_cost_up_to_the_room(
            header in prop::option::of("[a-z :]{0,12}"),
            line in "[a-z0-9 ,.\u{2014}]{0,40}",
            parts in 0usize..3,
            room in 0usize..40,
            tokens in any::<bool>(),
        ) {
            let budget = if tokens {
                Budget::Tokens { limit: 0, encoding: Encoding::O200kBase }
            } else {
                Budget::Chars(0)
            };
            let header = header.as_deref();
            let whole: usize = header
                .into_iter()
                .chain([line.as_str()])
                .enumerate()
                .map(|(n, part)| usize::from(parts + n > 0) + budget.measure(part))
                .sum();
            let within = cost_within(budget, header, &line, parts, room);
            prop_assert_eq!(within, Some(whole).filter(|&cost| cost <= room));
        }
    }
}
