//! Core memory (SPEC §4.2): small key/value facts with importance and optional TTL, kept within
//! a character budget by evicting the least important, oldest keys to archival.

use crate::archival::ArchivalWrite;
use crate::db::params;
use crate::error::{Error, Result};
use crate::rows::{line_chars, CoreEntry};
use crate::store::{Store, Tx};
use crate::view;
use serde::Serialize;
use serde_json::json;

/// The budget's measure of a core: its `key: value` lines joined by newlines, as rendered (and
/// as the Python store counts it).
pub fn rendered_chars<'a>(entries: impl IntoIterator<Item = &'a CoreEntry>) -> usize {
    let (chars, lines): (usize, usize) =
        entries.into_iter().fold((0, 0), |(chars, lines), e| (chars + e.chars(), lines + 1));
    chars + lines.saturating_sub(1)
}

/// Options of a core write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreWrite {
    /// 1..=5; 5 pins the key (never evicted automatically).
    pub importance: u8,
    /// Seconds until the value expires.
    pub ttl: Option<f64>,
}

impl Default for CoreWrite {
    fn default() -> Self {
        CoreWrite { importance: DEFAULT_IMPORTANCE, ttl: None }
    }
}

pub const DEFAULT_IMPORTANCE: u8 = 3;
pub const PINNED: u8 = 5;

/// What a core write did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreSetOutcome {
    pub branch: String,
    pub key: String,
    pub seq: i64,
    /// Keys evicted to archival to bring the core back within budget.
    pub evicted: Vec<String>,
    /// When the value alone exceeded the budget: the archival record holding it in full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oversize_record: Option<i64>,
}

impl Store {
    /// The visible core of a branch, oldest write first: read down to the nearest anchor, as a
    /// write's budget check reads it, with the writers above the anchor named. (Paths and
    /// writers' ids never change, and the core is one statement: no snapshot to hold.)
    pub fn core(&self, branch: &str) -> Result<Vec<CoreEntry>> {
        view::named_core(self, &*self.near_path(branch, 1)?)
    }

    /// The visible core chars of a branch (the budget's measure, see [`rendered_chars`]).
    pub fn core_chars(&self, branch: &str) -> Result<usize> {
        Ok(rendered_chars(&self.core(branch)?))
    }
}

/// The longest TTL, 100 years: a longer one means no expiry, which no TTL says better.
pub(crate) const MAX_TTL_SECS: f64 = 100.0 * 365.25 * 86_400.0;

/// The tag naming a key's archival copies: a tag is one line, and a key an earlier memctl
/// stored may hold a tab.
fn key_tag(key: &str) -> String {
    format!("core_key:{}", key.replace(char::is_control, " "))
}

/// A core key is one line of at most 256 characters, no control character in it (a key names
/// its archival copies in a tag, `core_key:KEY`), nor space around it (`get` would not find
/// it by the word).
pub(crate) fn validate_key(key: &str) -> Result<()> {
    if key.trim().is_empty() {
        return Err(Error::invalid("core key must not be empty"));
    }
    if key.chars().count() > 256 || key.chars().any(char::is_control) || key.trim() != key {
        return Err(Error::invalid(format!(
            "invalid core key {:?}: keys are one line of at most 256 characters, without control \
             characters or space around them",
            key.chars().take(40).collect::<String>()
        )));
    }
    Ok(())
}

impl Tx<'_> {
    pub fn core_set(
        &self,
        branch: &str,
        key: &str,
        value: &str,
        options: CoreWrite,
    ) -> Result<CoreSetOutcome> {
        validate_key(key)?;
        self.refuse_secret_name(key, "core key")?;
        if value.trim().is_empty() {
            return Err(Error::invalid(format!("core value of {key:?} is empty"))
                .with_hint("remove a key with `memctl core del`"));
        }
        if !(1..=PINNED).contains(&options.importance) {
            return Err(Error::invalid(format!("importance {} is outside 1..5", options.importance)));
        }
        if let Some(ttl) = options.ttl {
            if !ttl.is_finite() || ttl <= 0.0 {
                return Err(Error::invalid("ttl must be a positive number of seconds"));
            }
            if ttl > MAX_TTL_SECS {
                return Err(Error::invalid(
                    "ttl is longer than 100 years: leave it out for a key that does not expire",
                ));
            }
        }
        let path = self.near_path(branch, 1)?;
        let bid = path.branch().bid;
        let budget = self.config.core_max_chars;
        let full_value = self.redacted_named(key, value);

        // A value that cannot fit even alone goes to archival whole; core keeps a head naming it,
        // as long as the room the other keys leave allows, so that no other key is evicted for it.
        let mut oversize_record = None;
        let mut stored_value = full_value.clone();
        if line_chars(key, &full_value) > budget {
            let record = self.archival_insert(
                bid,
                ArchivalWrite::new(
                    format!("Core value: {key}\n{full_value}"),
                    ["CORE_OVERSIZE".into(), key_tag(key)],
                ),
            )?;
            let marker = format!(" … [full text: archival #{}]", record.id);
            let bare_line = line_chars(key, &marker);
            if bare_line > budget {
                return Err(Error::invalid(format!(
                    "core_max_chars = {budget} cannot hold key '{key}' even with its value moved to archival \
                     (its line would take {bare_line} characters)"
                )));
            }
            let others: usize = rendered_chars(view::core(self, &path)?.iter().filter(|e| e.key != key));
            // The new line and, when other lines exist, the newline joining it to them.
            let others = if others > 0 { others + 1 } else { 0 };
            let room = budget.saturating_sub(others).saturating_sub(bare_line);
            let head: String = full_value.chars().take(room).collect();
            stored_value = if head.is_empty() {
                format!("[full text: archival #{}]", record.id)
            } else {
                head + &marker
            };
            oversize_record = Some(record.id);
        }

        let seq = self.insert_core_row(bid, key, &stored_value, options)?;
        let evicted = self.enforce_core_budget(&path, key)?;
        self.journal(
            Some(bid),
            "core.set",
            json!({"key": key, "value": stored_value, "importance": options.importance,
                   "ttl": options.ttl, "evicted": evicted, "oversize_record": oversize_record}),
        )?;
        Ok(CoreSetOutcome {
            branch: path.branch().id.clone(),
            key: key.to_string(),
            seq,
            evicted,
            oversize_record,
        })
    }

    /// Writes one core row as given (the value already redacted); no budget check.
    pub(crate) fn insert_core_row(
        &self,
        bid: i64,
        key: &str,
        value: &str,
        options: CoreWrite,
    ) -> Result<i64> {
        let seq = self.next_seq()?;
        self.conn.execute(
            "INSERT INTO core(seq, branch, key, value, importance, ttl_s, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![seq, bid, key, value, options.importance, options.ttl, self.now()],
        )?;
        Ok(seq)
    }

    /// Evicts visible keys other than `written` — lowest importance first, then oldest, never
    /// pinned ones — until the core fits its budget. Each goes to archival, then a tombstone.
    fn enforce_core_budget(&self, path: &crate::rows::BranchPath, written: &str) -> Result<Vec<String>> {
        let entries = view::core(self, path)?;
        let mut used = rendered_chars(&entries);
        let budget = self.config.core_max_chars;
        let mut candidates: Vec<&CoreEntry> =
            entries.iter().filter(|e| e.key != written && e.importance < PINNED).collect();
        candidates.sort_by_key(|e| (e.importance, e.seq));
        let mut evicted = Vec::new();
        for entry in candidates {
            if used <= budget {
                break;
            }
            let bid = path.branch().bid;
            self.archival_insert(
                bid,
                ArchivalWrite::new(
                    format!("Core evicted: {}\n{}", entry.key, entry.value),
                    ["CORE_EVICT".into(), key_tag(&entry.key)],
                ),
            )?;
            self.core_tombstone(bid, &entry.key)?;
            used -= entry.chars() + 1;
            evicted.push(entry.key.clone());
        }
        Ok(evicted)
    }

    fn core_tombstone(&self, bid: i64, key: &str) -> Result<()> {
        let seq = self.next_seq()?;
        self.conn.execute(
            "INSERT INTO core(seq, branch, key, value, importance, ttl_s, created_at)
                 VALUES (?1, ?2, ?3, NULL, ?4, NULL, ?5)",
            params![seq, bid, key, DEFAULT_IMPORTANCE, self.now()],
        )?;
        Ok(())
    }

    /// Deletes visible keys from the branch's view (tombstones); returns those that were visible.
    /// Keys are not validated: one that no write could store is not visible, and one an
    /// earlier memctl stored must still go.
    pub fn core_delete(&self, branch: &str, keys: &[&str]) -> Result<Vec<String>> {
        let path = self.near_path(branch, 1)?;
        let visible = view::core(self, &path)?;
        let mut deleted = Vec::new();
        for &key in keys {
            if visible.iter().any(|e| e.key == key) && !deleted.iter().any(|d| d == key) {
                self.core_tombstone(path.branch().bid, key)?;
                deleted.push(key.to_string());
            }
        }
        if !deleted.is_empty() {
            self.journal(Some(path.branch().bid), "core.del", json!({"keys": deleted}))?;
        }
        Ok(deleted)
    }
}
