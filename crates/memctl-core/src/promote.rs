//! `promote`: copies items a branch sees into another branch as new rows of that branch — a
//! finding made in one node, given to an ancestor so that every later fork knows it. The copies
//! are ordinary writes of the target (redaction, duplicate suppression, the core budget and the
//! journal apply; a conversation step is added as a step, its payload whole), so the view rule
//! decides who sees them: the target and branches forked from it afterwards, not its existing
//! descendants. Each copy records where it came from.

use crate::conversation::{Step, StepType, RESET_KIND};
use crate::core_kv::{CoreWrite, MAX_TTL_SECS};
use crate::db::params;
use crate::error::{Error, Result};
use crate::rows::{is_step, AppendOutcome, BranchPath, Event, STEP_KIND};
use crate::store::{Store, Tx};
use crate::view::{self, StoredStep};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// What to promote: core keys, archival records and events of the source's view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Promotion {
    pub core: Vec<String>,
    pub records: Vec<i64>,
    pub events: Vec<i64>,
}

/// One promoted item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Promoted {
    /// `core`, `record` or `event`.
    pub layer: &'static str,
    /// The key, or the id in the source's view.
    pub item: serde_json::Value,
    /// The seq of the row copied, in the source's view.
    pub from_seq: i64,
    /// The new row's seq (the new record or event id); for a duplicate the target already
    /// held, that row's id.
    pub seq: i64,
    /// The target already held the same text: nothing was written.
    pub skipped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromoteOutcome {
    pub src: String,
    pub dst: String,
    pub promoted: Vec<Promoted>,
}

/// Where a promoted row came from. Fields in sorted order (`why --json` writes it straight).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    /// The branch it was promoted from.
    pub branch: String,
    pub note: Option<String>,
    /// The seq of the row copied, in that branch's view.
    pub seq: i64,
}

impl Tx<'_> {
    /// Promotes `items` of `src`'s view into `dst`. Every item must be in `src`'s view; if one
    /// is not, nothing is written.
    pub fn promote(
        &self,
        src: &str,
        dst: &str,
        items: &Promotion,
        note: Option<&str>,
    ) -> Result<PromoteOutcome> {
        let src_path = self.path(src)?;
        let (src_branch, dst_branch) = (src_path.branch().clone(), self.branch(dst)?);
        if src_branch.bid == dst_branch.bid {
            return Err(Error::invalid(format!("cannot promote from '{src}' to itself")));
        }
        if items.core.is_empty() && items.records.is_empty() && items.events.is_empty() {
            return Err(Error::invalid("nothing to promote: give --core, --record or --event"));
        }
        // Everything is looked up before anything is written.
        let seen = |what: &str, wanted: &[String], have: Vec<(String, usize)>| -> Result<Vec<usize>> {
            wanted
                .iter()
                .map(|w| {
                    have.iter().find(|(k, _)| k == w).map(|(_, i)| *i).ok_or_else(|| {
                        Error::invalid(format!("{what} {w} is not in the view of '{}'", src_branch.id))
                            .with_hint(format!("`memctl read {} --all` shows what it sees", src_branch.id))
                    })
                })
                .collect()
        };
        let names = |ids: &[i64]| -> Vec<String> { ids.iter().map(i64::to_string).collect() };
        let core = view::core(self, &src_path)?;
        // Keys are matched and named quoted, ids bare.
        let quoted: Vec<String> = items.core.iter().map(|k| format!("'{k}'")).collect();
        let have = core.iter().enumerate().map(|(i, e)| (format!("'{}'", e.key), i)).collect();
        let picked = seen("core key", &quoted, have)?;
        let core: Vec<_> = picked.into_iter().map(|i| core[i].clone()).collect();
        let records = view::records_among(self, &src_path, &items.records)?;
        let have = records.iter().enumerate().map(|(i, r)| (r.id.to_string(), i)).collect();
        let records: Vec<_> = seen("archival record", &names(&items.records), have)?
            .into_iter()
            .map(|i| records[i].clone())
            .collect();
        let events = view::events_among(self, &src_path, &items.events)?;
        let have = events.iter().enumerate().map(|(i, e)| (e.id.to_string(), i)).collect();
        let events: Vec<_> =
            seen("event", &names(&items.events), have)?.into_iter().map(|i| events[i].clone()).collect();
        let steps = self.promoted_steps(&src_path, &events)?;

        let note = note.map(|n| self.redacted(n));
        let mut promoted = Vec::new();
        for entry in core {
            // The copy expires when the original does: a TTL runs from its write. One over 100
            // years (an earlier memctl took them) is none.
            let ttl = entry.ttl.map(|ttl| entry.ts + ttl - self.now()).filter(|&ttl| ttl <= MAX_TTL_SECS);
            let write = CoreWrite { importance: entry.importance, ttl };
            let out = self.core_set(&dst_branch.id, &entry.key, &entry.value, write)?;
            promoted.push(Promoted {
                layer: "core",
                item: json!(entry.key),
                from_seq: entry.seq,
                seq: out.seq,
                skipped: false,
            });
        }
        for record in records {
            let out = self.archival_add(&dst_branch.id, &record.text, &record.tags)?;
            promoted.push(Promoted {
                layer: "record",
                item: json!(record.id),
                from_seq: record.seq,
                seq: out.id,
                skipped: out.skipped,
            });
        }
        // A step is skipped when DST sees it already, or a copy of the step it was first
        // copied from, through any promotions. Steps are never matched by content: "retry"
        // twice is two turns.
        let sources = match steps.is_empty() {
            true => HashMap::new(),
            false => self.promotion_sources()?,
        };
        let mut held: HashMap<i64, i64> = match steps.is_empty() {
            true => HashMap::new(),
            false => view::steps(self, &*self.path(&dst_branch.id)?)?
                .iter()
                .map(|s| (original(&sources, s.id), s.id))
                .collect(),
        };
        for event in events {
            let out = match steps.get(&event.id) {
                Some(step) => match held.get(&original(&sources, event.id)) {
                    Some(&id) => AppendOutcome { id, skipped: true },
                    None => {
                        let out = self.step_add(&dst_branch.id, &self.stored_step(step))?;
                        held.insert(original(&sources, event.id), out.id);
                        out
                    }
                },
                None => self.recall_append(&dst_branch.id, &event.kind, &event.text, &event.tags)?,
            };
            promoted.push(Promoted {
                layer: "event",
                item: json!(event.id),
                from_seq: event.id,
                seq: out.id,
                skipped: out.skipped,
            });
        }
        for p in promoted.iter().filter(|p| !p.skipped) {
            self.conn.execute(
                "INSERT INTO promoted(seq, branch, src_branch, src_seq, note) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![p.seq, dst_branch.bid, src_branch.bid, p.from_seq, &note],
            )?;
        }
        self.journal(
            Some(dst_branch.bid),
            "promote",
            json!({"from": src_branch.id, "note": note, "items": promoted}),
        )?;
        Ok(PromoteOutcome { src: src_branch.id, dst: dst_branch.id, promoted })
    }
}

impl Tx<'_> {
    /// Every promoted row's source: seq → the seq it was copied from.
    fn promotion_sources(&self) -> Result<HashMap<i64, i64>> {
        let rows = self
            .conn
            .query("SELECT seq, src_seq FROM promoted", params![], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.into_iter().collect())
    }

    /// The conversation steps among `events` of `path`'s view, whole (their payloads), to be
    /// added to the target as steps: a new step at the end of its conversation, so without the
    /// `at` of a shortened copy. A reset mark is refused: it would end the target's conversation.
    fn promoted_steps(&self, path: &BranchPath, events: &[Event]) -> Result<HashMap<i64, Step>> {
        if !events.iter().any(|e| is_step(&e.kind)) {
            return Ok(HashMap::new());
        }
        let stored: HashMap<i64, StoredStep> =
            view::steps(self, path)?.into_iter().map(|s| (s.id, s)).collect();
        let mut steps = HashMap::new();
        for event in events.iter().filter(|e| is_step(&e.kind)) {
            let step = stored.get(&event.id).ok_or_else(|| {
                Error::internal(format!("step {} is in the view's events but not its steps", event.id))
            })?;
            if step.kind == RESET_KIND {
                return Err(Error::invalid(format!(
                    "event {} is a conversation reset mark: it cannot be promoted",
                    event.id
                )));
            }
            let unreadable = |e: Error| {
                let message = format!("step {} cannot be promoted: {}", event.id, e.message());
                e.with_message(message)
            };
            let step_type = StepType::parse(step.kind.strip_prefix(STEP_KIND).unwrap_or(&step.kind))
                .map_err(unreadable)?;
            let payload = Value::Object(content(step)?);
            steps.insert(event.id, Step::new(step_type, payload).map_err(unreadable)?);
        }
        Ok(steps)
    }
}

/// The row `seq` was first copied from, through every promotion (`sources`): itself when it
/// is no copy. A copy is written after its source, so the chain ends.
fn original(sources: &HashMap<i64, i64>, seq: i64) -> i64 {
    let mut seq = seq;
    while let Some(&source) = sources.get(&seq).filter(|&&source| source < seq) {
        seq = source;
    }
    seq
}

/// A stored step's payload (a JSON object; none for a reset mark) without the `at` of a
/// shortened copy: what a copy of it holds.
fn content(step: &StoredStep) -> Result<Map<String, Value>> {
    let mut payload: Map<String, Value> = serde_json::from_str(step.payload.as_deref().unwrap_or("{}"))?;
    payload.remove("at");
    Ok(payload)
}

impl Store {
    /// Where the rows at `seqs` were promoted from, for those that were.
    pub fn origins(&self, seqs: &[i64]) -> Result<HashMap<i64, Origin>> {
        let sql = format!(
            "SELECT p.seq, b.id, p.src_seq, p.note FROM {} j
             JOIN promoted p ON p.seq = j.value JOIN branches b ON b.bid = p.src_branch",
            self.backend().json_ints("?1")
        );
        let origins = self.conn.query(&sql, [serde_json::to_string(seqs)?], |r| {
            Ok((r.get(0)?, Origin { branch: r.get(1)?, seq: r.get(2)?, note: r.get(3)? }))
        })?;
        Ok(origins.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Databases of earlier memctls hold reset marks: promoting one would end the target's
    /// conversation.
    #[test]
    fn a_reset_mark_is_not_promoted() {
        let s = Store::scratch();
        s.create_root("root").unwrap();
        s.fork("root", Some("a")).unwrap();
        let bid = s.branch("a").unwrap().bid;
        let mark = s.write(|tx| tx.insert_step(bid, RESET_KIND, "conversation reset", "{}")).unwrap();
        let items = Promotion { events: vec![mark], ..Promotion::default() };
        let refused = s.promote("a", "root", &items, None).unwrap_err();
        assert!(refused.message().contains("reset mark"), "{}", refused.message());
    }
}
