//! Engine settings (SPEC §9.2). Defaults are the Python store's, and equal `config/memctl.toml`.
//! Loading a file and applying `MEMCTL_*` overrides is the CLI's job; the engine only reads values.

use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Database file used when neither `--db` nor `MEMCTL_DB` is given.
    pub db_path: Option<String>,
    /// Budget of a branch's visible core memory, in characters of its `key: value` lines.
    pub core_max_chars: usize,
    /// Recall window: events shown in prompts and reads.
    pub recall_max_events: usize,
    /// Archival records retrieved for a prompt or a default read.
    pub retrieval_k: usize,
    /// Default prompt budget of `context`, in characters.
    pub memory_budget_chars: usize,
    /// Largest archival text a caller may add.
    pub archival_max_chars: usize,
    /// Consolidate when visible events besides the conversation steps exceed
    /// `recall_max_events` times this.
    pub recall_consolidation_threshold: f64,
    pub auto_consolidate: bool,
    pub pressure_thresholds: PressureThresholds,
    pub search: SearchConfig,
    pub redaction: RedactionConfig,
    pub sqlite: SqliteConfig,
    pub summarizer: SummarizerConfig,
    pub conversation: ConversationConfig,
    /// Every how many levels a fork anchors its view (see view.rs; 0: never). Only a speed
    /// setting, not read from files: whichever value wrote a database, reads stay correct.
    #[serde(skip)]
    pub anchor_every: i64,
}

impl Config {
    /// The values that parse but mean nothing: the first problem found.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.db_path.as_deref().is_some_and(|path| path.trim().is_empty()) {
            return Err("db_path is empty: leave it out for the default, ./memory.sqlite".into());
        }
        let at_least_one = [
            ("recall_max_events", self.recall_max_events),
            ("core_max_chars", self.core_max_chars),
            ("archival_max_chars", self.archival_max_chars),
            ("memory_budget_chars", self.memory_budget_chars),
            ("summarizer.timeout_s", self.summarizer.timeout_s as usize),
        ];
        if let Some((name, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        let threshold = self.recall_consolidation_threshold;
        if !(threshold.is_finite() && threshold > 0.0) {
            return Err(format!("recall_consolidation_threshold must be a positive number, not {threshold}"));
        }
        let PressureThresholds { medium, high, critical } = self.pressure_thresholds;
        let ordered = 0.0 <= medium && medium <= high && high <= critical && critical.is_finite();
        if !ordered {
            return Err(format!(
                "pressure_thresholds must be numbers with medium <= high <= critical, not {medium}, {high}, {critical}"
            ));
        }
        if let Err(e) = self.conversation.encoding.parse::<crate::tokens::Encoding>() {
            return Err(format!("conversation.encoding: {}", e.message()));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            db_path: None,
            core_max_chars: 2000,
            recall_max_events: 20,
            retrieval_k: 8,
            memory_budget_chars: 4000,
            archival_max_chars: 8000,
            recall_consolidation_threshold: 1.5,
            auto_consolidate: true,
            pressure_thresholds: PressureThresholds::default(),
            search: SearchConfig::default(),
            redaction: RedactionConfig::default(),
            sqlite: SqliteConfig::default(),
            summarizer: SummarizerConfig::default(),
            conversation: ConversationConfig::default(),
            anchor_every: 16,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PressureThresholds {
    pub medium: f64,
    pub high: f64,
    pub critical: f64,
}

impl Default for PressureThresholds {
    fn default() -> Self {
        PressureThresholds { medium: 0.70, high: 0.85, critical: 0.95 }
    }
}

/// Whether archival search uses the FTS5 index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FtsMode {
    /// FTS5 when the SQLite build has it, the keyword fallback otherwise.
    #[default]
    Auto,
    /// FTS5 required: opening fails without it.
    On,
    /// Always the keyword fallback.
    Off,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    pub fts: FtsMode,
    /// How many new archival versions the FTS5 index takes at once: one index write for them
    /// all rather than one per version. A search counts the versions not yet indexed itself.
    pub fts_batch: NonZeroU32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig { fts: FtsMode::Auto, fts_batch: NonZeroU32::new(64).expect("not zero") }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedactionConfig {
    pub enabled: bool,
}

impl Default for RedactionConfig {
    fn default() -> Self {
        RedactionConfig { enabled: true }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    #[default]
    Normal,
    Full,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SqliteConfig {
    /// How long a command waits for another process's write lock before failing with exit 5.
    pub busy_timeout_ms: u64,
    pub synchronous: Synchronous,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        SqliteConfig { busy_timeout_ms: 30_000, synchronous: Synchronous::Normal }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummarizerConfig {
    /// Shell command that answers one JSON request on stdin; unset means deterministic summaries.
    pub command: Option<String>,
    pub timeout_s: u64,
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        SummarizerConfig { command: None, timeout_s: 60 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConversationConfig {
    /// Compact a branch's conversation after each `step add` once its messages exceed this
    /// many tokens; unset: only when asked (`memctl compact`).
    pub auto_compact_tokens: Option<usize>,
    /// The tokenizer those tokens are counted in: cl100k_base or o200k_base.
    pub encoding: String,
}

impl Default for ConversationConfig {
    fn default() -> Self {
        ConversationConfig { auto_compact_tokens: None, encoding: "cl100k_base".to_string() }
    }
}
