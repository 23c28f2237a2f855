//! Conversation memory on a branch: the typed steps of the agent inside a node (step.rs),
//! read back as chat messages (messages.rs) and reduced copy-on-write like consolidation
//! (reduce.rs: prune, compact, reset). Steps are recall events of kind `step:<type>`, so a child
//! continues its parent's conversation as of the fork and siblings diverge, by the view rule.

mod messages;
mod reduce;
mod step;

pub use messages::{MessageFormat, Messages, MessagesPayload, ReadOptions};
pub use reduce::{CompactOutcome, PruneOutcome, ResetOutcome, ResetScope};
pub use step::{Step, StepType};

use crate::error::Result;
use crate::rows::AppendOutcome;
use crate::store::{Store, Tx};
use messages::{conversation, Entry};
use reduce::compaction_requests;
use serde_json::json;

/// The event kind of the mark `reset` left in databases of earlier memctls: the conversation
/// starts again after it. (`reset` now retires the summaries the mark held back.)
pub(crate) const RESET_KIND: &str = "step:reset";

/// The summary kind `compact` writes.
const SUMMARY_KIND: &str = crate::rows::CONVERSATION_KIND;

impl Store {
    /// [`Tx::step_add`]; with `[conversation] auto_compact_tokens` and a summarizer set, the
    /// summarizer is first asked what the compaction after the step will ask, outside the write
    /// transaction (as [`Store::compact`] does).
    pub fn step_add(&self, branch: &str, step: &Step) -> Result<AppendOutcome> {
        let auto_compact =
            self.config.conversation.auto_compact_tokens.filter(|_| self.summarizer().is_some());
        if let Some(budget) = auto_compact {
            let encoding = self.config.conversation.encoding.parse()?;
            let requests = self.read(|| {
                let mut entries = conversation(self, &*self.path(branch)?)?;
                entries.push(Entry::new_step(i64::MAX, self.stored_step(step)));
                compaction_requests(&entries, budget, encoding)
            })?;
            self.ask_ahead(&requests)?;
        }
        self.write(|tx| tx.step_add(branch, step))
    }

    /// A step as stored: its payload redacted.
    pub(crate) fn stored_step(&self, step: &Step) -> Step {
        Step { step_type: step.step_type, payload: self.redacted_entries(&step.payload) }
    }
}

impl Tx<'_> {
    /// Adds one step to `branch`'s conversation; then, with `[conversation]
    /// auto_compact_tokens` set, compacts it if its messages exceed that many tokens.
    pub fn step_add(&self, branch: &str, step: &Step) -> Result<AppendOutcome> {
        let bid = self.branch_for_write(branch)?.bid;
        let step = self.stored_step(step);
        let text = step.render();
        let id =
            self.insert_step(bid, &step.step_type.kind(), &text, &serde_json::to_string(&step.payload)?)?;
        self.journal(
            Some(bid),
            "step.add",
            json!({"id": id, "type": step.step_type, "payload": step.payload}),
        )?;
        if let Some(budget) = self.config.conversation.auto_compact_tokens {
            let encoding = self.config.conversation.encoding.parse()?;
            self.compact(branch, budget, encoding)?;
        }
        Ok(AppendOutcome { id, skipped: false })
    }
}
