//! `why`: how a core key, an archival record or an event came to be what a branch sees. Every
//! write of it, wherever made, is placed against the branch's path (view::history) and told
//! apart: the row the view shows — taken from the view's own readers — the rows it overrides,
//! and the rows the branch cannot see, with the reason for each.

use crate::clock::utc_datetime;
use crate::error::{Error, Result};
use crate::journal::Op;
use crate::promote::Origin;
use crate::rows::{BranchPath, Summary};
use crate::store::Store;
use crate::view;
use crate::view::history::{self, CoreRow, Placed, Reach, Version};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::collections::HashSet;

/// What `why` is asked about.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// A core key.
    Key(String),
    /// An archival record, by id.
    Record(i64),
    /// A recall event, by id.
    Event(i64),
}

/// A unit enum whose variants each have a name, given once: `as_str` gives it, and serde writes it.
macro_rules! named {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$doc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$doc])* $variant,)+
        }

        impl $name {
            /// Its name, as written in JSON.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}

named! {
    /// What the branch sees of the subject.
    pub enum Verdict {
        /// The view shows it (`decided_by` is the write shown).
        Visible = "visible",
        /// The newest write the view holds deletes it.
        Deleted = "deleted",
        /// Every write the view holds has run out its TTL (core).
        Expired = "expired",
        /// The event is in the view's rows but an exclusion the view holds hides it.
        Hidden = "hidden",
        /// Written, but not by the branch or its ancestors within their cutoffs.
        NotInView = "not_in_view",
        /// No branch ever wrote this core key.
        NeverWritten = "never_written",
    }
}

named! {
    /// What one write is to the branch's view.
    pub enum Status {
        /// The row the view shows.
        Visible = "visible",
        /// A delete that decides: the key or record is gone from the view.
        Deletes = "deletes",
        /// In the view, but a newer write there decides.
        Overridden = "overridden",
        /// In the view, but its TTL ran out.
        Expired = "expired",
        /// An event in the view's rows that an exclusion hides.
        Hidden = "hidden",
        /// An exclusion in the view: it hides the event.
        Hides = "hides",
        /// A summary in the view that a newer summary folds in.
        Folded = "folded",
        /// Written to an ancestor after the path left it.
        AfterFork = "after_fork",
        /// Written in a branch that is not the branch or an ancestor of it.
        OffPath = "off_path",
    }
}

named! {
    /// What a write did.
    pub enum Action {
        Set = "set",
        Delete = "delete",
        Add = "add",
        Update = "update",
        Append = "append",
        Exclude = "exclude",
        Summarize = "summarize",
    }
}

/// The row a write left, by layer.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Core { value: Option<String>, importance: u8, ttl: Option<f64>, expires_at: Option<f64> },
    Version { text: Option<String>, tags: Vec<String> },
    Event { kind: String, text: String, tags: Vec<String> },
    Exclusion { event_id: i64 },
    Summary { kind: String, text: String, event_ids: Vec<i64> },
}

/// One write of the subject and what it is to the branch's view. Written as JSON with the
/// content's fields among its own (see the `Serialize` below).
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub action: Action,
    pub branch: String,
    pub seq: i64,
    pub ts: f64,
    pub content: Content,
    pub reach: Reach,
    pub status: Status,
    pub reason: String,
    /// The journal row of the mutation that made it.
    pub journal: Option<Op>,
    /// For a row `promote` wrote: the branch and seq it was copied from.
    pub promoted_from: Option<Origin>,
}

/// The history of a subject along a branch's path, and the verdict. Written as JSON with the
/// subject as one key (`key`, `record` or `event`) among its own (see the `Serialize` below).
#[derive(Debug, Clone, PartialEq)]
pub struct Why {
    pub branch: String,
    pub subject: Subject,
    pub verdict: Verdict,
    pub reason: String,
    /// The seq of the write that decides the verdict (shown, deleting or hiding), if one does.
    pub decided_by: Option<i64>,
    /// Every write of the subject in any branch, oldest first.
    pub writes: Vec<Write>,
}

// `why --json` is written straight, not through a `serde_json::Value` (a key written at every
// level of a deep path has thousands of writes, each with its journal row): its keys are
// written here in the sorted order a `Value` would give them, the subject's and the content's
// among the others. `json_keys_sorted_and_complete` holds both to it.

impl Serialize for Why {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("branch", &self.branch)?;
        map.serialize_entry("decided_by", &self.decided_by)?;
        match &self.subject {
            Subject::Event(id) => map.serialize_entry("event", id)?,
            Subject::Key(key) => map.serialize_entry("key", key)?,
            Subject::Record(_) => {}
        }
        map.serialize_entry("reason", &self.reason)?;
        if let Subject::Record(id) = &self.subject {
            map.serialize_entry("record", id)?;
        }
        map.serialize_entry("verdict", &self.verdict)?;
        map.serialize_entry("writes", &self.writes)?;
        map.end()
    }
}

impl Serialize for Write {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("action", &self.action)?;
        map.serialize_entry("branch", &self.branch)?;
        match &self.content {
            Content::Exclusion { event_id } => map.serialize_entry("event_id", event_id)?,
            Content::Summary { event_ids, .. } => map.serialize_entry("event_ids", event_ids)?,
            Content::Core { expires_at, importance, .. } => {
                map.serialize_entry("expires_at", expires_at)?;
                map.serialize_entry("importance", importance)?;
            }
            Content::Version { .. } | Content::Event { .. } => {}
        }
        map.serialize_entry("journal", &self.journal)?;
        if let Content::Event { kind, .. } | Content::Summary { kind, .. } = &self.content {
            map.serialize_entry("kind", kind)?;
        }
        map.serialize_entry("promoted_from", &self.promoted_from)?;
        map.serialize_entry("reach", &self.reach)?;
        map.serialize_entry("reason", &self.reason)?;
        map.serialize_entry("seq", &self.seq)?;
        map.serialize_entry("status", &self.status)?;
        match &self.content {
            Content::Version { text, tags } => {
                map.serialize_entry("tags", tags)?;
                map.serialize_entry("text", text)?;
            }
            Content::Event { text, tags, .. } => {
                map.serialize_entry("tags", tags)?;
                map.serialize_entry("text", text)?;
            }
            Content::Summary { text, .. } => map.serialize_entry("text", text)?,
            Content::Core { .. } | Content::Exclusion { .. } => {}
        }
        map.serialize_entry("ts", &self.ts)?;
        if let Content::Core { ttl, value, .. } = &self.content {
            map.serialize_entry("ttl", ttl)?;
            map.serialize_entry("value", value)?;
        }
        map.end()
    }
}

impl Store {
    /// Why `branch` sees what it sees of `subject`. An unknown record or event is a not-found
    /// error; a core key nobody wrote has an empty history.
    pub fn why(&self, branch: &str, subject: &Subject) -> Result<Why> {
        self.read(|| {
            let path = self.path(branch)?;
            let explained = match subject {
                Subject::Key(key) => self.why_key(&path, key)?,
                Subject::Record(id) => self.why_record(&path, *id)?,
                Subject::Event(id) => self.why_event(&path, *id)?,
            };
            let (verdict, reason, decided_by, writes) = explained;
            let mut writes: Vec<Write> = writes;
            let seqs: Vec<i64> = writes.iter().map(|w| w.seq).collect();
            let mut origins = self.origins(&seqs)?;
            for (write, entry) in writes.iter_mut().zip(self.journal_entries_of(&seqs)?) {
                write.journal = entry;
                write.promoted_from = origins.remove(&write.seq);
            }
            Ok(Why {
                branch: path.branch().id.clone(),
                subject: subject.clone(),
                verdict,
                reason,
                decided_by,
                writes,
            })
        })
    }

    fn why_key(&self, path: &BranchPath, key: &str) -> Result<Explained> {
        let rows = history::core_key(self, path, key)?;
        let me = &path.branch().id;
        let now = self.clock.now();
        let shown = view::core(self, path)?.into_iter().find(|e| e.key == key);
        let live = |r: &&Placed<CoreRow>| r.reach == Reach::InView && !r.row.expired(r.ts, now);
        let decider = match &shown {
            Some(entry) => rows.iter().find(|r| r.seq == entry.seq),
            // Nothing shown: the newest live write the view holds, if any, is a delete.
            None => rows.iter().rfind(live),
        };
        let (verdict, reason) = match (decider, &shown) {
            (Some(d), Some(entry)) => (
                Verdict::Visible,
                format!("{me} sees {key} = {}, written by {} at seq {}", entry.value, d.branch, d.seq),
            ),
            (Some(d), None) => (
                Verdict::Deleted,
                format!("{key} is deleted in {me}'s view: {} deleted it at seq {}", d.branch, d.seq),
            ),
            (None, _) if rows.iter().any(|r| r.reach == Reach::InView) => (
                Verdict::Expired,
                format!("{key} has expired in {me}'s view: the TTL of every write of it there has run out"),
            ),
            (None, _) if rows.is_empty() => {
                (Verdict::NeverWritten, format!("no branch has written core key '{key}'"))
            }
            (None, _) => (Verdict::NotInView, not_in_view(me, &format!("core key {key}"), rows.len())),
        };
        let decided_by = decider.map(|d| d.seq);
        // One text for every write the decider overrides: a key written at every level of a
        // deep path has thousands.
        let overridden = overridden_by(decider);
        let writes = rows
            .into_iter()
            .map(|mut r| {
                let expires_at = r.row.ttl.map(|ttl| r.ts + ttl);
                let (status, reason) = match r.reach {
                    Reach::InView if Some(r.seq) == decided_by => {
                        if r.row.value.is_some() {
                            (Status::Visible, newest_in_view(path, &r, "live write"))
                        } else {
                            (Status::Deletes, format!("a delete, {}", newest_in_view(path, &r, "live write")))
                        }
                    }
                    Reach::InView if r.row.expired(r.ts, now) => (
                        Status::Expired,
                        format!(
                            "its TTL of {} s ran out at {}",
                            r.row.ttl.unwrap_or_default(),
                            utc_datetime(expires_at.unwrap_or_default())
                        ),
                    ),
                    Reach::InView => (Status::Overridden, overridden.clone()),
                    _ => out_of_view(path, &r),
                };
                let action = if r.row.value.is_some() { Action::Set } else { Action::Delete };
                let content = Content::Core {
                    value: r.row.value.take(),
                    importance: r.row.importance,
                    ttl: r.row.ttl,
                    expires_at,
                };
                write(&r, action, content, status, reason)
            })
            .collect();
        Ok((verdict, reason, decided_by, writes))
    }

    fn why_record(&self, path: &BranchPath, id: i64) -> Result<Explained> {
        let rows = history::record(self, path, id)?;
        if rows.is_empty() {
            return Err(Error::not_found(format!("archival record {id} does not exist in any branch")));
        }
        let me = &path.branch().id;
        let shown = view::archival_record(self, path, id)?;
        let decider = match &shown {
            Some(record) => rows.iter().find(|r| r.seq == record.seq),
            // Nothing shown: the newest version the view holds, if any, is a delete.
            None => rows.iter().rfind(|r| r.reach == Reach::InView),
        };
        let (verdict, reason) = match (decider, &shown) {
            (Some(d), Some(_)) => (
                Verdict::Visible,
                format!("{me} sees record {id} as version seq {}, written by {}", d.seq, d.branch),
            ),
            (Some(d), None) => (
                Verdict::Deleted,
                format!("record {id} is deleted in {me}'s view: {} deleted it at seq {}", d.branch, d.seq),
            ),
            (None, _) => (Verdict::NotInView, not_in_view(me, &format!("record {id}"), rows.len())),
        };
        let writes = rows
            .iter()
            .map(|r| {
                let (status, reason) = match r.reach {
                    Reach::InView if Some(r.seq) == decider.map(|d| d.seq) => match r.row.text {
                        Some(_) => (Status::Visible, newest_in_view(path, r, "version")),
                        None => {
                            (Status::Deletes, format!("a delete, {}", newest_in_view(path, r, "version")))
                        }
                    },
                    Reach::InView => (Status::Overridden, overridden_by(decider)),
                    _ => out_of_view(path, r),
                };
                let action = match (&r.row.text, r.seq == id) {
                    (None, _) => Action::Delete,
                    (Some(_), true) => Action::Add,
                    (Some(_), false) => Action::Update,
                };
                let Version { text, tags } = r.row.clone();
                write(r, action, Content::Version { text, tags }, status, reason)
            })
            .collect();
        Ok((verdict, reason, decider.map(|d| d.seq), writes))
    }

    fn why_event(&self, path: &BranchPath, id: i64) -> Result<Explained> {
        let Some(event) = history::event(self, path, id)? else {
            return Err(Error::not_found(format!("event {id} does not exist in any branch")));
        };
        let me = &path.branch().id;
        let visible = !view::events_among(self, path, &[id])?.is_empty();
        let exclusions = history::exclusions(self, path, id)?;
        let summaries = history::summaries(self, path, id)?;
        let shown_summaries: HashSet<i64> = view::summaries(self, path)?.iter().map(|s| s.id).collect();
        // A summary that names the event may be folded into a newer one, which names only the
        // events it added: the summaries of the view that fold it in, however many times over.
        let folding = self.summaries_folding(path, &summaries, &shown_summaries)?;
        let hider = exclusions.iter().find(|x| x.reach == Reach::InView);
        let standing_in =
            summaries.iter().chain(folding.iter().map(|(s, _)| s)).find(|s| shown_summaries.contains(&s.seq));
        let (verdict, reason, decided_by) = match (visible, hider) {
            (true, _) => (
                Verdict::Visible,
                format!(
                    "{me} sees event {id} ({}), written by {} at seq {}",
                    event.row.kind, event.branch, event.seq
                ),
                Some(event.seq),
            ),
            (false, Some(x)) => {
                let summary =
                    standing_in.map_or(String::new(), |s| format!("; summary #{} stands for it", s.seq));
                (
                    Verdict::Hidden,
                    format!(
                        "event {id} is hidden in {me}'s view: {} excluded it at seq {}{summary}",
                        x.branch, x.seq
                    ),
                    Some(x.seq),
                )
            }
            (false, None) => (
                Verdict::NotInView,
                format!("{me}'s view does not hold event {id}: {}", out_of_view(path, &event).1),
                None,
            ),
        };
        let mut writes = vec![{
            let (status, reason) = match (event.reach, hider) {
                (Reach::InView, None) => {
                    (Status::Visible, format!("in the view and not excluded: {}", held(path, &event)))
                }
                (Reach::InView, Some(x)) => {
                    (Status::Hidden, format!("hidden by the exclusion at seq {} ({})", x.seq, x.branch))
                }
                _ => out_of_view(path, &event),
            };
            let e = &event.row;
            let content =
                Content::Event { kind: e.kind.to_string(), text: e.text.clone(), tags: e.tags.to_vec() };
            write(&event, Action::Append, content, status, reason)
        }];
        writes.extend(exclusions.iter().map(|x| {
            let (status, reason) = match x.reach {
                Reach::InView => (Status::Hides, format!("an exclusion in {me}'s view: it hides event {id}")),
                _ => out_of_view(path, x),
            };
            write(x, Action::Exclude, Content::Exclusion { event_id: id }, status, reason)
        }));
        let naming = summaries.into_iter().map(|s| (s, None));
        writes.extend(naming.chain(folding.into_iter().map(|(s, folds)| (s, Some(folds)))).map(
            |(s, folds)| {
                let (status, reason) = match (s.reach, folds) {
                    (Reach::InView, None) if shown_summaries.contains(&s.seq) => (
                        Status::Visible,
                        format!("{me}'s view shows this summary in place of the events it names"),
                    ),
                    (Reach::InView, Some(folded)) if shown_summaries.contains(&s.seq) => (
                        Status::Visible,
                        format!("{me}'s view shows this summary, which folds in summary #{folded}"),
                    ),
                    (Reach::InView, None) => {
                        (Status::Folded, "folded into a newer summary in the view".to_string())
                    }
                    (Reach::InView, Some(folded)) => {
                        (Status::Folded, format!("folds in summary #{folded}; folded into a newer one"))
                    }
                    _ => out_of_view(path, &s),
                };
                let content = Content::Summary {
                    kind: s.row.kind.to_string(),
                    text: s.row.text.clone(),
                    event_ids: s.row.event_ids.clone(),
                };
                write(&s, Action::Summarize, content, status, reason)
            },
        ));
        writes.sort_by_key(|w| w.seq);
        Ok((verdict, reason, decided_by, writes))
    }
}

impl Store {
    /// The summaries in `path`'s view that fold in one of `naming` (the summaries that name an
    /// event), then those that fold in those, until one the view shows: each with the summary
    /// it folds in.
    fn summaries_folding(
        &self,
        path: &BranchPath,
        naming: &[Placed<Summary>],
        shown: &HashSet<i64>,
    ) -> Result<Vec<(Placed<Summary>, i64)>> {
        let in_view = |s: &&Placed<Summary>| s.reach == Reach::InView;
        let mut folding = Vec::new();
        let mut folded: Vec<i64> = naming.iter().filter(in_view).map(|s| s.seq).collect();
        while !folded.is_empty() && !folded.iter().any(|seq| shown.contains(seq)) {
            let mut next = Vec::new();
            for seq in folded {
                for s in history::summaries_folding(self, path, seq)?.into_iter().filter(|s| in_view(&s)) {
                    next.push(s.seq);
                    folding.push((s, seq));
                }
            }
            folded = next;
        }
        Ok(folding)
    }
}

/// A verdict, its reason, the deciding seq, and every write.
type Explained = (Verdict, String, Option<i64>, Vec<Write>);

fn write<T>(r: &Placed<T>, action: Action, content: Content, status: Status, reason: String) -> Write {
    Write {
        action,
        branch: r.branch.clone(),
        seq: r.seq,
        ts: r.ts,
        content,
        reach: r.reach,
        status,
        reason,
        journal: None,
        promoted_from: None,
    }
}

/// Why the deciding write decides: the newest of its kind the view holds.
fn newest_in_view<T>(path: &BranchPath, r: &Placed<T>, what: &str) -> String {
    format!("the newest {what} in the view: {}", held(path, r))
}

/// How a row in the view got there: the branch's own, or an ancestor's up to the cutoff.
fn held<T>(path: &BranchPath, r: &Placed<T>) -> String {
    let me = &path.branch().id;
    if r.branch == *me {
        format!("{me}'s own row")
    } else {
        format!("{me} sees {}'s rows up to seq {}", r.branch, r.cutoff.unwrap_or_default())
    }
}

fn overridden_by<T>(decider: Option<&Placed<T>>) -> String {
    match decider {
        Some(d) => format!("overridden by seq {} ({})", d.seq, d.branch),
        None => "overridden by a newer write in the view".to_string(),
    }
}

/// Status and reason of a row the view does not hold.
fn out_of_view<T>(path: &BranchPath, r: &Placed<T>) -> (Status, String) {
    let me = &path.branch().id;
    match r.reach {
        Reach::AfterFork => (
            Status::AfterFork,
            format!(
                "written to {} after {me}'s path left it: {me} sees {}'s rows up to seq {}",
                r.branch,
                r.branch,
                r.cutoff.unwrap_or_default()
            ),
        ),
        _ => {
            let origin =
                r.parent.as_ref().map_or("a root of its own".to_string(), |p| format!("forked from {p}"));
            (Status::OffPath, format!("{} is not {me} or an ancestor of it ({origin})", r.branch))
        }
    }
}

fn not_in_view(me: &str, what: &str, writes: usize) -> String {
    let times = if writes == 1 { "once".to_string() } else { format!("{writes} times") };
    format!("{me}'s view holds no write of {what}: written {times}, never on its path within the cutoffs")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_kv::CoreWrite;
    use crate::promote::Promotion;
    use crate::rows::tests::keys_sorted;
    use serde_json::Value;

    /// The keys of a write's JSON: the write's own and, by layer, its content's.
    fn keys_of(write: &Write) -> Vec<&'static str> {
        let mut keys =
            vec!["action", "branch", "journal", "promoted_from", "reach", "reason", "seq", "status", "ts"];
        keys.extend(match write.content {
            Content::Core { .. } => &["expires_at", "importance", "ttl", "value"][..],
            Content::Version { .. } => &["tags", "text"],
            Content::Event { .. } => &["kind", "tags", "text"],
            Content::Exclusion { .. } => &["event_id"],
            Content::Summary { .. } => &["event_ids", "kind", "text"],
        });
        keys.sort_unstable();
        keys
    }

    /// `why`'s JSON, written straight, reads as through a `Value` (keys sorted), and holds every
    /// field: of every subject, and of writes of every layer with their journal rows and origins.
    #[test]
    fn json_keys_sorted_and_complete() {
        let store = Store::scratch();
        store.create_root("root").unwrap();
        store.fork("root", Some("a")).unwrap();
        store.core_set("a", "k", "1", CoreWrite::default()).unwrap();
        let promotion = Promotion { core: vec!["k".into()], records: vec![], events: vec![] };
        store.write(|tx| tx.promote("a", "root", &promotion, Some("best"))).unwrap();
        store.core_set("a", "other", "2", CoreWrite::default()).unwrap();
        store.core_delete("a", &["k", "other"]).unwrap();
        let record = store.archival_add("a", "first text", &["t".to_string()]).unwrap().id;
        store.archival_update("a", record, Some("second text"), None).unwrap();
        store.archival_delete("a", record).unwrap();
        let event = store.recall_append("a", "note", "seen", &["t".to_string()]).unwrap().id;
        // The summary excludes the event it stands for.
        store.recall_summarize("a", "digest", "the gist", &[event]).unwrap();

        let (mut layers, mut promoted) = (HashSet::new(), 0);
        for (branch, subject) in [
            ("a", Subject::Key("k".into())),
            ("root", Subject::Key("k".into())),
            ("a", Subject::Record(record)),
            ("a", Subject::Event(event)),
        ] {
            let why = store.why(branch, &subject).unwrap();
            keys_sorted(&why);
            let json = serde_json::to_value(&why).unwrap();
            let subject_key = match subject {
                Subject::Key(_) => "key",
                Subject::Record(_) => "record",
                Subject::Event(_) => "event",
            };
            let subject_value = match &subject {
                Subject::Key(key) => Value::from(key.as_str()),
                Subject::Record(id) | Subject::Event(id) => Value::from(*id),
            };
            assert_eq!(json[subject_key], subject_value);
            let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
            keys.retain(|k| *k != subject_key);
            assert_eq!(keys, ["branch", "decided_by", "reason", "verdict", "writes"]);
            for (write, json) in why.writes.iter().zip(json["writes"].as_array().unwrap()) {
                let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
                assert_eq!(keys, keys_of(write), "{write:?}");
                // Its own mutation's journal row: at the next seq for a mutation's last row,
                // else (a summary before its exclusion, a key deleted before another) the
                // first after it.
                let op = match (write.action, &write.content) {
                    (Action::Set, _) => "core.set",
                    (Action::Delete, Content::Core { .. }) => "core.del",
                    (Action::Add, _) => "archival.add",
                    (Action::Update, _) => "archival.update",
                    (Action::Delete, _) => "archival.delete",
                    (Action::Append, _) => "recall.append",
                    (Action::Summarize | Action::Exclude, _) => "recall.summarize",
                };
                assert_eq!(json["journal"]["op"], Value::from(op), "{write:?}");
                layers.insert(std::mem::discriminant(&write.content));
                if write.promoted_from.is_some() {
                    assert_eq!(json["promoted_from"]["note"], Value::from("best"));
                    promoted += 1;
                }
            }
        }
        assert_eq!(layers.len(), 5, "a write of every layer");
        assert!(promoted > 0, "a promoted write");
    }
}
