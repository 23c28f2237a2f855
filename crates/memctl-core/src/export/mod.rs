//! Exports (SPEC §7, §8): the paper memory, the offline HTML viewer, the journal as JSON lines.

mod html;
mod jsonl;
mod paper;

pub use html::viewer_html;
pub use jsonl::JsonlLine;
pub use paper::{Artifacts, PaperMemory, PaperSection};
