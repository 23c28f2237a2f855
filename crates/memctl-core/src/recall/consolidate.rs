//! Consolidation (SPEC §2.1, §4.6): when a branch sees more than `recall_max_events ×
//! recall_consolidation_threshold` events besides its conversation steps (`compact` reduces
//! those), all but the newest `recall_max_events` of them are replaced, per kind, by a summary.
//! One mechanism for own and inherited events: summary and exclusion rows in the consolidating
//! branch, the originals' full text copied to archival. Nothing is deleted; ancestors and
//! earlier descendants keep the originals; descendants forked later inherit the consolidated
//! view. A new summary of a kind folds in the branch's visible summary of that kind, so
//! summaries do not pile up.

use crate::archival::ArchivalWrite;
use crate::clock::utc_datetime;
use crate::error::Result;
use crate::rows::{Branch, BranchPath, Event, Summary};
use crate::store::{Store, Tx};
use crate::summarizer::{Answer, Mode, Request, Task};
use crate::view;
use serde::Serialize;
use serde_json::json;

/// Longest summary text, in characters.
pub const SUMMARY_MAX_CHARS: usize = 800;

/// What a consolidation did.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ConsolidateOutcome {
    /// How many events left the view.
    pub consolidated: usize,
    /// The new summaries' ids.
    pub summaries: Vec<i64>,
    /// Summarizer failures (a deterministic summary was used instead).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The events of one kind to consolidate, and the summary of that kind they extend.
struct Group {
    kind: String,
    /// Oldest first.
    events: Vec<Event>,
    previous: Option<Summary>,
}

impl Group {
    /// What the summarizer is asked; identical in both phases, so the second finds the cache.
    fn request(&self) -> Request {
        let mut text = String::new();
        if let Some(previous) = &self.previous {
            text.push_str(&format!("Earlier summary: {}\n", previous.text));
        }
        for event in &self.events {
            text.push_str(&format!("[{}] {}\n", event.kind, event.text));
        }
        let count = self.events.len();
        Request::new(
            Task::Consolidate,
            text,
            SUMMARY_MAX_CHARS,
            &[("count", count.to_string()), ("kind", self.kind.clone())],
            json!({"kind": self.kind}),
        )
    }

    /// The deterministic summary: count, time span, the first line of each event (newest kept
    /// when cut), after the earlier summary's lines. Folding in an earlier extract adds up the
    /// counts and keeps its start; a summarizer's text is kept whole, under a header that says
    /// it counts the events after it ("N more").
    fn extract(&self) -> String {
        let first = self.events.first().map_or(0.0, |e| e.ts);
        let last = self.events.last().map_or(0.0, |e| e.ts);
        let mut header =
            Header { count: self.events.len(), more: false, since: utc_datetime(first).to_string() };
        let mut lines: Vec<String> = Vec::new();
        if let Some(previous) = &self.previous {
            let mut earlier = previous.text.lines();
            match Header::of(&previous.text, &self.kind) {
                Some(before) => {
                    earlier.next();
                    header = Header { count: before.count + header.count, ..before };
                }
                None => header.more = true,
            }
            lines.extend(earlier.map(str::to_string));
        }
        lines.extend(self.events.iter().map(|e| format!("- {}", e.text.lines().next().unwrap_or("").trim())));
        let more = if header.more { " more" } else { "" };
        let header = format!(
            "{}{more} {} events, {} to {}:",
            header.count,
            self.kind,
            header.since,
            utc_datetime(last)
        );
        let mut kept: Vec<String> = Vec::new();
        let mut used = header.chars().count();
        for line in lines.iter().rev() {
            let line: String = line.chars().take(160).collect();
            if used + 1 + line.chars().count() > SUMMARY_MAX_CHARS {
                break;
            }
            used += 1 + line.chars().count();
            kept.push(line);
        }
        kept.reverse();
        std::iter::once(header).chain(kept).collect::<Vec<_>>().join("\n")
    }
}

/// The first line of an extract: `N KIND events, SINCE to LAST:`, or `N more …` when it
/// follows a summarizer's text, which counts the events before.
struct Header {
    count: usize,
    more: bool,
    since: String,
}

impl Header {
    /// The header of an earlier summary's text; None when a summarizer wrote it (one whose
    /// first line reads like an extract's header is taken for one: it then counts as one).
    fn of(text: &str, kind: &str) -> Option<Header> {
        let (count, rest) = text.lines().next()?.split_once(' ')?;
        let count = count.parse().ok()?;
        let (more, rest) = match rest.strip_prefix("more ") {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        let span = rest.strip_prefix(kind)?.strip_prefix(" events, ")?.strip_suffix(':')?;
        let (since, _) = span.split_once(" to ")?;
        Some(Header { count, more, since: since.to_string() })
    }
}

/// The most events besides its conversation steps a branch may see before consolidation.
fn threshold(store: &Store) -> usize {
    let config = &store.config;
    (config.recall_max_events as f64 * config.recall_consolidation_threshold).floor() as usize
}

/// What a consolidation summarises, per kind, and the ids of the summaries the view keeps
/// before it.
struct Plan {
    groups: Vec<Group>,
    kept: Vec<i64>,
}

/// What consolidating `path`'s branch now would do; None when within bounds.
fn plan(store: &Store, path: &BranchPath) -> Result<Option<Plan>> {
    // Conversation steps are the conversation's to compact (`compact`), not consolidation's.
    let counts = view::event_counts(store, path.branch().bid)?;
    if counts.besides_steps() <= threshold(store) {
        return Ok(None);
    }
    // The counts are exact; reading only that many events stops before the excluded ones that
    // earlier consolidations left behind, however many they are, and at the oldest event
    // besides the steps, however many steps are older.
    let events = view::newest_events_besides_steps(store, path, counts.events, counts.besides_steps())?;
    debug_assert_eq!(events.len(), counts.besides_steps(), "the view's count of steps");
    // Should the counts be wrong, the read (which finds at most the counted events) decides.
    if events.len() <= threshold(store) {
        return Ok(None);
    }
    let summaries = view::summaries(store, path)?;
    let mut groups: Vec<Group> = Vec::new();
    // Newest first in the view: keep the window, take the rest oldest first.
    for event in events.into_iter().skip(store.config.recall_max_events).rev() {
        match groups.iter_mut().find(|g| *g.kind == *event.kind) {
            Some(group) => group.events.push(event),
            None => groups.push(Group {
                kind: event.kind.to_string(),
                previous: summaries.iter().rev().find(|s| s.kind == event.kind).cloned(),
                events: vec![event],
            }),
        }
    }
    Ok(Some(Plan { groups, kept: summaries.iter().map(|s| s.id).collect() }))
}

impl Store {
    /// Consolidates the branch's recall if it is over the threshold. The summarizer, if any, is
    /// asked before the write transaction (it may take a while) and its answers are cached; the
    /// transaction then plans again and uses them.
    pub fn consolidate(&self, branch: &str) -> Result<ConsolidateOutcome> {
        let plan = self.read(|| plan(self, &*self.path(branch)?))?;
        let mut warnings = Vec::new();
        for group in plan.iter().flat_map(|plan| &plan.groups) {
            if let Answer::Failed(warning) = self.ask_summarizer(&group.request(), Mode::Call)? {
                warnings.push(warning);
            }
        }
        let mut outcome = self.write(|tx| tx.consolidate(branch, false))?;
        outcome.warnings = warnings;
        Ok(outcome)
    }
}

impl Tx<'_> {
    /// Consolidates inside this transaction, with cached summarizer answers or extracts.
    /// `auto` marks consolidations run by `recall append` (tag `AUTO_CONSOLIDATE`).
    pub fn consolidate(&self, branch: &str, auto: bool) -> Result<ConsolidateOutcome> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        let mut outcome = ConsolidateOutcome::default();
        let Some(Plan { groups, mut kept }) = plan(self, &path)? else {
            return Ok(outcome);
        };
        for group in groups {
            let text = match self.ask_summarizer(&group.request(), Mode::CacheOnly)? {
                Answer::Text(text) => text,
                Answer::None | Answer::Failed(_) => group.extract(),
            };
            let n = group.events.len();
            let mut tags = vec!["RECALL_CONSOLIDATED".to_string()];
            if auto {
                tags.push("AUTO_CONSOLIDATE".into());
            }
            tags.extend([format!("kind:{}", group.kind), format!("event_count:{n}")]);
            let originals: Vec<String> =
                group.events.iter().map(|e| format!("[{}] {}", e.kind, e.text)).collect();
            self.archival_insert(
                bid,
                ArchivalWrite {
                    text: format!(
                        "Consolidated recall events [{}] ({n} events):\n{}",
                        group.kind,
                        originals.join("\n")
                    ),
                    tags,
                },
            )?;
            let new_ids: Vec<i64> = group.events.iter().map(|e| e.id).collect();
            // The new summary lists the events it newly covers; the ones before are covered by
            // the summary it folds in (copying their ids forward would grow every row).
            let replaced: Vec<i64> = group.previous.iter().map(|p| p.id).collect();
            outcome.summaries.push(self.insert_summary(
                bid,
                &mut kept,
                &group.kind,
                &text,
                &new_ids,
                &replaced,
            )?);
            self.insert_exclusions(bid, super::excluded(&group.events))?;
            outcome.consolidated += n;
        }
        if outcome.consolidated > 0 {
            self.journal(
                Some(bid),
                "recall.consolidate",
                json!({"auto": auto, "events": outcome.consolidated, "summaries": outcome.summaries}),
            )?;
        }
        Ok(outcome)
    }

    /// The check `recall append` runs: consolidates only when the branch is over the threshold,
    /// counted in constant time.
    pub(crate) fn auto_consolidate(&self, branch: &Branch) -> Result<()> {
        if !self.config.auto_consolidate {
            return Ok(());
        }
        if view::event_counts(self, branch.bid)?.besides_steps() > threshold(self) {
            self.consolidate(&branch.id, true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn event(id: i64, ts: f64, text: &str) -> Event {
        Event { branch: "b".into(), id, kind: "note".into(), tags: Arc::from([]), text: text.into(), ts }
    }

    fn group(previous: Option<&str>, events: Vec<Event>) -> Group {
        let previous = previous.map(|text| Summary {
            branch: "b".into(),
            event_ids: vec![],
            id: 1,
            kind: "note".into(),
            text: text.into(),
            ts: 0.0,
        });
        Group { kind: "note".into(), events, previous }
    }

    #[test]
    fn a_folded_extract_counts_every_event_since_the_first() {
        let first = group(None, vec![event(1, 0.0, "a"), event(2, 60.0, "b\nsecond line")]).extract();
        assert_eq!(first, "2 note events, 1970-01-01 00:00:00 to 1970-01-01 00:01:00:\n- a\n- b");
        let folded = group(Some(&first), vec![event(3, 3600.0, "c")]).extract();
        assert_eq!(folded, "3 note events, 1970-01-01 00:00:00 to 1970-01-01 01:00:00:\n- a\n- b\n- c");
    }

    #[test]
    fn a_summarizers_text_is_kept_whole_and_the_header_counts_what_follows() {
        let llm = "Tried three learning rates.\nThe best was 3e-4.";
        let folded = group(Some(llm), vec![event(3, 3600.0, "c")]).extract();
        assert_eq!(
            folded,
            "1 more note events, 1970-01-01 01:00:00 to 1970-01-01 01:00:00:\n\
             Tried three learning rates.\nThe best was 3e-4.\n- c"
        );
        // Folded again, the count adds up and still says "more".
        let again = group(Some(&folded), vec![event(4, 7200.0, "d")]).extract();
        assert!(
            again.starts_with("2 more note events, 1970-01-01 01:00:00 to 1970-01-01 02:00:00:\nTried"),
            "{again}"
        );
    }
}
