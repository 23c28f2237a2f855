//! memctl-core: MemGPT-style agent memory (core, recall, archival) in SQLite, scoped to the
//! branches of a tree search with copy-on-write by fork point.
//!
//! The engine has no CLI and prints nothing. Open a [`Store`], then read through the view
//! ([`Store::view`], [`Store::core`], [`Store::recall_list`], [`Store::archival_search`], …) and
//! write through [`Store::write`] (one transaction, many operations) or the one-operation helpers.
//!
//! ```
//! use memctl_core::{Clock, Config, CoreWrite, Store};
//! let store = Store::open_in_memory(Config::default(), Clock::Fixed(1.7e9)).unwrap();
//! store.create_root("root").unwrap();
//! store.core_set("root", "goal", "tune the stencil", CoreWrite::default()).unwrap();
//! store.fork("root", Some("child")).unwrap();
//! store.core_set("child", "goal", "tune the GPU kernel", CoreWrite::default()).unwrap();
//! assert_eq!(store.core("root").unwrap()[0].value, "tune the stencil");
//! assert_eq!(store.core("child").unwrap()[0].value, "tune the GPU kernel");
//! ```

mod archival;
mod branch;
mod checkpoint;
mod clock;
mod config;
mod conversation;
mod core_kv;
mod db;
mod diff;
mod error;
mod export;
mod gc;
mod journal;
mod legacy;
mod one_line;
mod path_report;
mod pressure;
mod progress;
mod promote;
mod protocol;
mod query;
mod recall;
mod redact;
mod render;
mod rows;
mod schema;
mod store;
mod stored_text;
mod summarizer;
mod tokens;
mod transfer;
mod view;
mod why;
mod writes;

pub use archival::{Search, UpdateOutcome};
pub use branch::{validate_branch_id, ForkOutcome, MarkOutcome, OwnCounts};
pub use clock::{parse_duration, parse_timestamp, utc_datetime, Clock, UtcDateTime};
pub use config::{
    Config, ConversationConfig, FtsMode, PressureThresholds, RedactionConfig, SearchConfig, SqliteConfig,
    SummarizerConfig, Synchronous,
};
pub use conversation::{
    CompactOutcome, MessageFormat, Messages, MessagesPayload, PruneOutcome, ReadOptions, ResetOutcome,
    ResetScope, Step, StepType,
};
pub use core_kv::{rendered_chars, CoreSetOutcome, CoreWrite, DEFAULT_IMPORTANCE, PINNED};
pub use db::Backend;
pub use diff::{ArchivalDiff, Changed, CommonAncestor, CoreDiff, Diff, Layer, Sides};
pub use error::{Error, ErrorKind, Result, Topic};
pub use export::{viewer_html, Artifacts, JsonlLine, PaperMemory, PaperSection};
pub use gc::{GcReport, GcRequest, Kept, RowsFreed, VacuumOutcome};
pub use journal::{Details, Op};
pub use legacy::{Converted, ImportReport, LegacyDatabase, SkippedRows};
pub use path_report::{
    ArchivalDelta, Consolidation, CoreDelta, KeyWrite, NodeDelta, PathReport, Previous, RecallDelta,
};
pub use pressure::{ArchivalSize, CorePressure, Level, Pressure, RecallPressure};
pub use progress::{Progress, Silent};
pub use promote::{Origin, PromoteOutcome, Promoted, Promotion};
pub use protocol::{
    find_update_block, strip_blocks, ApplyOutcome, Item, Skipped, LLM_IMPORTANCE, LLM_KIND, LLM_TAG,
};
pub use query::words as search_words;
pub use recall::{ConsolidateOutcome, EvictOutcome, EvictSelector, RecallView, SUMMARY_MAX_CHARS};
pub use redact::redact;
pub use render::{tags_suffix, Budget, PromptContext, SectionReport, TagsSuffix};
pub use rows::{
    is_step, AppendOutcome, Branch, BranchPath, BranchStatus, CoreEntry, Event, PathBranch, Record, Summary,
    STEP_KIND,
};
pub use schema::event_rid::SEQ_BITS as EVENT_ROWID_SEQ_BITS;
pub use schema::{PAGE_SIZE, SCHEMA_VERSION};
pub use store::{OpContext, Store, Tx};
pub use stored_text::same_tags;
pub use summarizer::{Request as SummarizerRequest, Task as SummarizerTask};
pub use tokens::{count_tokens, count_tokens_within, Encoding};
pub use transfer::Transfer;
pub use view::{history::Reach, View};
pub use why::{Action, Content, Status, Subject, Verdict, Why, Write};
