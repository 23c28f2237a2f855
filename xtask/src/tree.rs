//! The 1,000-branch tree of workload b, shared by the workloads that run on it.

use crate::gen::{node_id, Rng, EVENT_KINDS, PHASES};
use memctl_core::{CoreWrite, Store};

/// One operation of workload b, generated up front so only memctl calls are timed.
pub enum TreeOp {
    Root(String),
    Fork(String, String),
    Core(String, String, String),
    Recall(String, &'static str, String, Vec<String>),
    Archival(String, String, Vec<String>),
}

pub const TREE_BRANCHES: usize = 1000;

pub fn tree_ops() -> Vec<TreeOp> {
    let mut rng = Rng::new(0xB0B);
    let ids: Vec<String> = (0..TREE_BRANCHES).map(node_id).collect();
    let mut ops = Vec::with_capacity(TREE_BRANCHES * 29);
    let (mut core_i, mut event_i, mut record_i) = (0usize, 0usize, 0usize);
    for (i, id) in ids.iter().enumerate() {
        ops.push(match i {
            0 => TreeOp::Root(id.clone()),
            _ => TreeOp::Fork(ids[(i - 1) / 3].clone(), id.clone()),
        });
        for k in 0..3 {
            let value = format!("c{core_i} {}", rng.words(10, 30));
            core_i += 1;
            ops.push(TreeOp::Core(id.clone(), format!("key{k}"), value));
        }
        let phase = PHASES[i % PHASES.len()];
        for _ in 0..20 {
            let kind = EVENT_KINDS[event_i % EVENT_KINDS.len()];
            let text = format!("e{event_i} {}", rng.words(20, 40));
            event_i += 1;
            ops.push(TreeOp::Recall(id.clone(), kind, text, vec![format!("phase:{phase}")]));
        }
        for _ in 0..5 {
            let kind = EVENT_KINDS[record_i % EVENT_KINDS.len()];
            let text = format!("a{record_i} {}", rng.words(60, 120));
            record_i += 1;
            ops.push(TreeOp::Archival(id.clone(), text, vec!["BENCH".into(), format!("kind:{kind}")]));
        }
    }
    ops
}

/// Applies one tree operation; returns its kind's slot (fork, core, recall, archival).
pub fn apply(store: &Store, op: &TreeOp) -> memctl_core::Result<usize> {
    Ok(match op {
        TreeOp::Root(id) => store.create_root(id).map(|_| 0)?,
        TreeOp::Fork(parent, id) => store.fork(parent, Some(id)).map(|_| 0)?,
        TreeOp::Core(branch, key, value) => {
            store.core_set(branch, key, value, CoreWrite::default()).map(|_| 1)?
        }
        TreeOp::Recall(branch, kind, text, t) => store.recall_append(branch, kind, text, t).map(|_| 2)?,
        TreeOp::Archival(branch, text, t) => store.archival_add(branch, text, t).map(|_| 3)?,
    })
}
