//! Exports (SPEC §7, §8): the paper memory, the offline HTML viewer, the journal as JSON lines.

mod html;
mod jsonl;

pub use html::viewer_html;
pub use jsonl::JsonlLine;
