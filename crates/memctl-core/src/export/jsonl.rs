//! `export jsonl`: the journal in the Python store's log format, one JSON object per line:
//! `ts, op, layer, memory_type, branch_id, node_id, phase, run_id, details` (extra: `seq`,
//! `actor`, `memctl_op`).

use crate::error::Result;
use crate::journal::{Details, Op};
use crate::store::Store;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonlLine {
    pub ts: f64,
    pub op: String,
    pub layer: String,
    pub memory_type: String,
    pub branch_id: Option<String>,
    pub node_id: Option<String>,
    pub phase: Option<String>,
    pub run_id: Option<String>,
    pub details: Details,
    pub seq: i64,
    pub actor: Option<String>,
    pub memctl_op: String,
}

/// The Python store's name, layer and memory type for a memctl operation; operations it did not
/// have keep memctl's name.
fn python_names(op: &str) -> (&str, &str, &str) {
    match op {
        "fork" | "branch.create" => ("mem_node_fork", "public_api", "node"),
        "branch.set_uid" => ("update_branch_node_uid", "public_api", "node"),
        "core.set" => ("mem_core_set", "public_api", "core"),
        "core.del" => ("mem_core_delete", "public_api", "core"),
        "recall.append" => ("mem_recall_append", "public_api", "recall"),
        "recall.evict" => ("mem_recall_evict", "public_api", "recall"),
        "recall.consolidate" => ("consolidate_inherited_memory", "internal", "consolidation"),
        "archival.add" => ("mem_archival_write", "public_api", "archival"),
        "archival.update" => ("mem_archival_update", "public_api", "archival"),
        "archival.delete" => ("mem_archival_delete", "public_api", "archival"),
        "import.legacy" => ("import_legacy", "system", "import"),
        other => (other, "public_api", other.split('.').next().unwrap_or(other)),
    }
}

impl From<Op> for JsonlLine {
    fn from(op: Op) -> JsonlLine {
        let (name, layer, memory_type) = python_names(&op.op);
        JsonlLine {
            ts: op.ts,
            op: name.to_string(),
            layer: layer.to_string(),
            memory_type: memory_type.to_string(),
            node_id: op.node_uid.clone().or_else(|| op.branch.clone()),
            branch_id: op.branch,
            phase: op.phase,
            run_id: None,
            details: op.details,
            seq: op.seq,
            actor: op.actor,
            memctl_op: op.op,
        }
    }
}

impl Store {
    /// The whole journal, oldest first, as log lines.
    pub fn journal_lines(&self) -> Result<Vec<JsonlLine>> {
        Ok(self.ops(None, None)?.into_iter().map(JsonlLine::from).collect())
    }
}
