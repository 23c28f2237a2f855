//! The one-call writes: each is [`Store::write`] around the [`Tx`] method of the same name, for
//! callers with a single operation. Generated here, once, so the two can never drift; a new
//! write is a `Tx` method plus one line below. (Those that ask the summarizer first, outside the
//! transaction, are written by hand: `consolidate`, `compact`, `step_add`.)

use crate::archival::UpdateOutcome;
use crate::branch::{ForkOutcome, MarkOutcome};
use crate::conversation::{PruneOutcome, ResetOutcome, ResetScope};
use crate::core_kv::{CoreSetOutcome, CoreWrite};
use crate::error::Result;
use crate::gc::{GcReport, GcRequest};
use crate::promote::{PromoteOutcome, Promotion};
use crate::recall::{EvictOutcome, EvictSelector};
use crate::rows::{AppendOutcome, Branch, BranchStatus};
use crate::store::Store;

macro_rules! one_call_writes {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {
        impl Store {
            $(
                #[doc = concat!("[`Tx::", stringify!($name), "`](crate::store::Tx::", stringify!($name), ") in a transaction of its own.")]
                pub fn $name(&self, $($arg: $ty),*) -> Result<$out> {
                    self.write(|tx| tx.$name($($arg),*))
                }
            )*
        }
    };
}

one_call_writes! {
    fn create_root(id: &str) -> ForkOutcome;
    fn fork(parent: &str, id: Option<&str>) -> ForkOutcome;
    fn set_node_uid(name: &str, node_uid: &str) -> Branch;
    fn mark_branch(name: &str, status: BranchStatus, note: Option<&str>, subtree: bool) -> MarkOutcome;
    fn core_set(branch: &str, key: &str, value: &str, options: CoreWrite) -> CoreSetOutcome;
    fn core_delete(branch: &str, keys: &[&str]) -> Vec<String>;
    fn archival_add(branch: &str, text: &str, tags: &[String]) -> AppendOutcome;
    fn archival_update(branch: &str, id: i64, text: Option<&str>, tags: Option<&[String]>) -> UpdateOutcome;
    fn archival_delete(branch: &str, id: i64) -> i64;
    fn recall_append(branch: &str, kind: &str, text: &str, tags: &[String]) -> AppendOutcome;
    fn recall_evict(branch: &str, selector: &EvictSelector) -> EvictOutcome;
    fn recall_exclude(branch: &str, ids: &[i64]) -> ();
    fn recall_summarize(branch: &str, kind: &str, text: &str, ids: &[i64]) -> i64;
    fn promote(src: &str, dst: &str, items: &Promotion, note: Option<&str>) -> PromoteOutcome;
    fn gc(request: &GcRequest) -> GcReport;
    fn prune(branch: &str, keep_last: Option<usize>, old_observations: Option<(usize, usize)>) -> PruneOutcome;
    fn reset(branch: &str, scope: ResetScope) -> ResetOutcome;
}
