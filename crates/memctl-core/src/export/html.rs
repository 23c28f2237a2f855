//! `export html`: one self-contained page. The database goes in once, per branch, as the rows it
//! wrote itself; the page computes any branch's view from its path (SPEC §2), so the file grows
//! with the data, not with branches × depth.

use crate::db::{params, Row};
use crate::error::Result;
use crate::store::Store;
use serde_json::{json, Map, Value};

/// The page, with `/*MEMCTL_DATA*/null` where the data goes.
const TEMPLATE: &str = include_str!("viewer.html");
const DATA_SLOT: &str = "/*MEMCTL_DATA*/null";

/// Longest text kept from a journal row's arguments: the page shows the full text from the row
/// the operation wrote, so the data is not stored twice.
const OP_TEXT_CHARS: usize = 80;

/// The page for `data` (from [`Store::viewer_data`]).
pub fn viewer_html(data: &Value) -> String {
    // Inside <script>, "</script" or "<!--" in a text would end or confuse the element; "<"
    // only occurs inside JSON strings, where \u003c means the same.
    let json = data.to_string().replace('<', "\\u003c");
    TEMPLATE.replacen(DATA_SLOT, &json, 1)
}

impl Store {
    /// Every branch with its own rows, and the journal: what the viewer needs, nothing twice.
    pub fn viewer_data(&self, title: &str) -> Result<Value> {
        self.read(|| {
            let mut branches: Vec<Value> = Vec::new();
            let mut by_bid: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
            for b in self.branches()? {
                by_bid.insert(b.bid, branches.len());
                branches.push(json!({
                    "id": b.id, "node_uid": b.node_uid, "parent": b.parent, "depth": b.depth,
                    "fork_seq": b.fork_seq, "ts": b.created_at, "meta": b.meta,
                    "status": b.status, "status_note": b.status_note,
                    "core": [], "events": [], "archival": [], "exclusions": [], "summaries": [], "ops": [],
                }));
            }
            let mut unscoped_ops = Vec::new();
            self.progress().start("reading the layers", LAYERS.len() as u64);
            for (layer, sql) in LAYERS {
                self.conn.query(sql, params![], |r| {
                    let bid: Option<i64> = r.get(0)?;
                    let row = layer_row(layer, r)?;
                    match bid.and_then(|bid| by_bid.get(&bid)) {
                        Some(&i) => branches[i][layer].as_array_mut().expect("layer list").push(row),
                        None => unscoped_ops.push(row),
                    }
                    Ok(())
                })?;
                self.progress().advance(1);
            }
            self.progress().finish();
            Ok(json!({
                "format": "memctl-viewer/1",
                "title": title,
                "generated_at": self.clock().now(),
                "schema_version": crate::schema::SCHEMA_VERSION,
                "branches": branches,
                "ops": unscoped_ops,
            }))
        })
    }
}

/// Per layer, its rows oldest first, the branch's bid in the first column.
const LAYERS: [(&str, &str); 6] = [
    ("core", "SELECT branch, seq, key, value, importance, ttl_s, created_at FROM core ORDER BY seq"),
    ("events", "SELECT branch, seq, kind, text, tags, created_at FROM events ORDER BY seq"),
    ("archival", "SELECT branch, seq, record_id, text, tags, created_at FROM archival ORDER BY seq"),
    ("exclusions", "SELECT branch, seq, event_id, created_at FROM inherited_exclusions ORDER BY seq"),
    (
        "summaries",
        "SELECT branch, seq, kind, summary_text, summarized_event_ids, replaced_summary_ids, created_at
         FROM inherited_summaries ORDER BY seq",
    ),
    ("ops", "SELECT branch, seq, op, phase, actor, args, created_at FROM ops ORDER BY seq"),
];

fn json_column(r: &Row<'_>, i: usize) -> Result<Value> {
    Ok(serde_json::from_str(&r.get::<String>(i)?).unwrap_or(Value::Null))
}

fn layer_row(layer: &str, r: &Row<'_>) -> Result<Value> {
    let mut row = Map::new();
    let mut put = |name: &str, value: Value| {
        row.insert(name.to_string(), value);
    };
    put("seq", json!(r.get::<i64>(1)?));
    match layer {
        "core" => {
            put("key", json!(r.get::<String>(2)?));
            put("value", json!(r.get::<Option<String>>(3)?));
            put("importance", json!(r.get::<i64>(4)?));
            put("ttl_s", json!(r.get::<Option<f64>>(5)?));
            put("ts", json!(r.get::<f64>(6)?));
        }
        "events" => {
            put("kind", json!(r.get::<String>(2)?));
            put("text", json!(r.get::<String>(3)?));
            put("tags", json_column(r, 4)?);
            put("ts", json!(r.get::<f64>(5)?));
        }
        "archival" => {
            put("id", json!(r.get::<i64>(2)?));
            put("text", json!(r.get::<Option<String>>(3)?));
            put("tags", json_column(r, 4)?);
            put("ts", json!(r.get::<f64>(5)?));
        }
        "exclusions" => {
            put("event_id", json!(r.get::<i64>(2)?));
            put("ts", json!(r.get::<f64>(3)?));
        }
        "summaries" => {
            put("kind", json!(r.get::<String>(2)?));
            put("text", json!(r.get::<String>(3)?));
            put("event_ids", json_column(r, 4)?);
            put("replaces", json_column(r, 5)?);
            put("ts", json!(r.get::<f64>(6)?));
        }
        _ => {
            put("op", json!(r.get::<String>(2)?));
            put("phase", json!(r.get::<Option<String>>(3)?));
            put("actor", json!(r.get::<Option<String>>(4)?));
            // The rows themselves hold the texts: the journal's copies are cut short here.
            let mut details = json_column(r, 5)?;
            crate::journal::cap_strings(&mut details, OP_TEXT_CHARS);
            put("details", details);
            put("ts", json!(r.get::<f64>(6)?));
        }
    }
    Ok(Value::Object(row))
}
