//! `import legacy`: a `memory.sqlite` of the Python store (reference PYTHON_STORE.md §1) into
//! memctl, in one transaction.
//!
//! Branches are created parents first and each branch's rows are written before its children are
//! forked, so every child sees everything its ancestors ever wrote (the Python store's end-of-run
//! view); where two ancestors wrote one core key, the nearest wins (SPEC §2). Rows keep their
//! original timestamps; one missing or not a number becomes its branch's creation time (a
//! branch's own, its parent's) and is reported. The Python store did not inherit exclusions and
//! summaries, so each level re-summarised its ancestors' events: an exclusion of an event an
//! ancestor already excluded is dropped, and a summary that covers all the events of a visible
//! summary of its kind folds it in.

use crate::archival::ArchivalWrite;
use crate::branch::validate_branch_id;
use crate::core_kv::{validate_key, CoreWrite, DEFAULT_IMPORTANCE, PINNED};
use crate::error::{Error, Result, Topic};
use crate::rows::Branch;
use crate::store::{Store, Tx};
use crate::stored_text::normalize_tags;
use crate::view;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What an import converted and what it left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportReport {
    pub source: String,
    /// Branches created.
    pub branches: usize,
    /// Rows written per memctl table.
    pub converted: Converted,
    /// Rows not written, by table and reason.
    pub skipped: Vec<SkippedRows>,
    /// Things converted with a change worth knowing, by what changed.
    pub adjusted: Vec<SkippedRows>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Converted {
    pub core: usize,
    pub events: usize,
    pub archival: usize,
    pub exclusions: usize,
    pub summaries: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedRows {
    pub table: String,
    pub reason: String,
    pub count: usize,
}

/// Columns `import legacy` reads, per table; the optional tables may be missing.
const REQUIRED: &[(&str, &[&str])] = &[
    ("branches", &["id", "parent_id", "node_uid", "created_at"]),
    ("core_kv", &["branch_id", "key", "value", "updated_at"]),
    ("events", &["id", "branch_id", "kind", "text", "tags", "created_at"]),
    ("archival", &["id", "branch_id", "text", "tags", "created_at"]),
];
const OPTIONAL: &[(&str, &[&str])] = &[
    ("core_meta", &["branch_id", "key", "importance", "ttl"]),
    ("inherited_exclusions", &["branch_id", "excluded_event_id", "excluded_at"]),
    (
        "inherited_summaries",
        &["id", "branch_id", "summary_text", "summarized_event_ids", "kind", "created_at"],
    ),
];

struct LegacyBranch {
    id: String,
    parent: Option<String>,
    node_uid: Option<String>,
    /// None when missing or not a number.
    created_at: Option<f64>,
}

/// One row of a legacy branch, in the order it is written. An exclusion's `event_id` is None when
/// the column holds no integer.
enum LegacyRow {
    /// `importance`: None when NULL, Some(None) when not an integer (`'high'`).
    Core {
        key: String,
        value: Option<String>,
        importance: Option<Option<i64>>,
        ttl: Option<String>,
    },
    Event {
        id: i64,
        kind: String,
        text: String,
        tags: Option<String>,
    },
    Archival {
        text: String,
        tags: Option<String>,
    },
    Exclusion {
        event_id: Option<i64>,
    },
    Summary {
        kind: String,
        text: String,
        event_ids: Option<String>,
    },
}

impl LegacyRow {
    fn table(&self) -> &'static str {
        match self {
            LegacyRow::Core { .. } => "core_kv",
            LegacyRow::Event { .. } => "events",
            LegacyRow::Archival { .. } => "archival",
            LegacyRow::Exclusion { .. } => "inherited_exclusions",
            LegacyRow::Summary { .. } => "inherited_summaries",
        }
    }

    /// Exclusions and summaries name events, so they come after the branch's own rows.
    fn rank(&self) -> u8 {
        match self {
            LegacyRow::Exclusion { .. } => 1,
            LegacyRow::Summary { .. } => 2,
            _ => 0,
        }
    }
}

/// A database of the Python store, read whole and checked, ready to import.
pub struct LegacyDatabase {
    source: PathBuf,
    branches: Vec<LegacyBranch>,
    /// Per branch id: (timestamp if readable, legacy id, row), unsorted.
    rows: HashMap<String, Vec<(Option<f64>, i64, LegacyRow)>>,
}

#[derive(Default)]
struct Tally {
    converted: Converted,
    skipped: BTreeMap<(&'static str, &'static str), usize>,
    adjusted: BTreeMap<(&'static str, &'static str), usize>,
}

impl Tally {
    fn skip(&mut self, table: &'static str, reason: &'static str) {
        *self.skipped.entry((table, reason)).or_default() += 1;
    }

    fn adjust(&mut self, table: &'static str, what: &'static str) {
        *self.adjusted.entry((table, what)).or_default() += 1;
    }
}

fn rows_of(map: BTreeMap<(&'static str, &'static str), usize>) -> Vec<SkippedRows> {
    map.into_iter()
        .map(|((table, reason), count)| SkippedRows { table: table.into(), reason: reason.into(), count })
        .collect()
}

impl LegacyDatabase {
    /// Reads the Python store's database at `source`, which is never modified. A file that is
    /// not such a database is an `incompatible_db` error naming what is missing.
    pub fn read(source: &Path) -> Result<LegacyDatabase> {
        read_legacy(source)
    }

    pub fn branch_count(&self) -> usize {
        self.branches.len()
    }
}

impl Store {
    /// Imports a legacy database into this one, in one transaction: on any error (a branch id
    /// that already exists here, say) nothing is written.
    pub fn import_legacy(&self, legacy: LegacyDatabase) -> Result<ImportReport> {
        self.write(|tx| tx.indexing_at_end(|| tx.import_legacy(legacy)))
    }
}

impl Tx<'_> {
    fn import_legacy(&self, mut legacy: LegacyDatabase) -> Result<ImportReport> {
        let finished_at = self.now();
        let mut tally = Tally::default();
        let order = tree_order(&legacy.branches, &mut tally);
        let mut created: HashMap<&str, Branch> = HashMap::new();
        let mut event_ids: HashMap<i64, i64> = HashMap::new();
        self.progress().start("importing branches", order.len() as u64);
        for index in order {
            let branch = &legacy.branches[index];
            let parent = branch.parent.as_deref().and_then(|p| created.get(p));
            // No branch is older than its parent: the nearest time known to be on its side.
            let created_at = branch.created_at.unwrap_or_else(|| {
                tally.adjust(
                    "branches",
                    "created_at missing or not a number: its parent's creation time used (0 for a root)",
                );
                parent.map_or(0.0, |p| p.created_at)
            });
            self.set_now(created_at);
            let outcome = self.create_branch(parent, &branch.id)?;
            if !outcome.created {
                return Err(Error::conflict(format!(
                    "branch '{}' already exists in this database; nothing was imported",
                    branch.id
                ))
                .with_topic(Topic::ImportTargetInUse));
            }
            if let Some(uid) = branch.node_uid.as_deref().filter(|uid| *uid != branch.id) {
                let holder = self.find_branch(uid)?;
                // A uid another run's branch answers to: a runner would read and write that run
                // (one file holds one run); a uid twice in the legacy file keeps the first.
                if let Some(holder) = holder.as_ref().filter(|h| !created.contains_key(h.id.as_str())) {
                    return Err(Error::conflict(format!(
                        "node_uid '{uid}' of legacy branch '{}' is taken by branch '{}' of this database; \
                         nothing was imported",
                        branch.id, holder.id
                    ))
                    .with_topic(Topic::ImportTargetInUse));
                }
                if holder.is_none() && validate_branch_id(uid, "node_uid").is_ok() {
                    self.set_node_uid(&branch.id, uid)?;
                } else {
                    tally.adjust("branches", "node_uid invalid or taken by another branch: dropped");
                }
            }
            let mut rows: Vec<(f64, i64, LegacyRow)> = legacy
                .rows
                .remove(&branch.id)
                .unwrap_or_default()
                .into_iter()
                .map(|(ts, id, row)| {
                    let ts = ts.unwrap_or_else(|| {
                        tally.adjust(
                            row.table(),
                            "timestamp missing or not a number: its branch's creation time used",
                        );
                        created_at
                    });
                    (ts, id, row)
                })
                .collect();
            rows.sort_by(|a, b| (a.2.rank(), a.0, a.1).partial_cmp(&(b.2.rank(), b.0, b.1)).unwrap());
            self.import_rows(&branch.id, rows, &mut event_ids, &mut tally)?;
            created.insert(&branch.id, self.branch(&branch.id)?);
            self.progress().advance(1);
        }
        self.progress().finish();
        // What is left belongs to branches that do not exist (or sat in a cycle).
        for (_, _, row) in legacy.rows.values().flatten() {
            tally.skip(row.table(), "its branch does not exist");
        }
        self.set_now(finished_at);
        let report = ImportReport {
            source: legacy.source.display().to_string(),
            branches: created.len(),
            converted: tally.converted,
            skipped: rows_of(tally.skipped),
            adjusted: rows_of(tally.adjusted),
        };
        self.journal(None, "import.legacy", serde_json::to_value(&report)?)?;
        Ok(report)
    }

    fn import_rows(
        &self,
        branch: &str,
        rows: Vec<(f64, i64, LegacyRow)>,
        event_ids: &mut HashMap<i64, i64>,
        tally: &mut Tally,
    ) -> Result<()> {
        let path = self.path(branch)?;
        let bid = path.branch().bid;
        // The events this branch's view shows, read when its first exclusion needs them: each
        // id, and whether it is a step.
        let mut visible: Option<HashMap<i64, bool>> = None;
        for (ts, _, row) in rows {
            self.set_now(ts);
            match row {
                LegacyRow::Core { key, value, importance, ttl } => {
                    let Some(value) = value else {
                        tally.skip("core_kv", "value is NULL");
                        continue;
                    };
                    if validate_key(&key).is_err() {
                        tally.skip("core_kv", "invalid key");
                        continue;
                    }
                    let importance = match importance {
                        Some(Some(i)) if (1..=PINNED as i64).contains(&i) => i as u8,
                        Some(Some(i)) => {
                            tally.adjust("core_kv", "importance clamped to 1..5");
                            i.clamp(1, PINNED as i64) as u8
                        }
                        Some(None) => {
                            tally.adjust("core_kv", "importance not a number: imported as 3");
                            DEFAULT_IMPORTANCE
                        }
                        None => DEFAULT_IMPORTANCE,
                    };
                    // The Python store never enforced TTLs (and wrote words like "stage"):
                    // carrying them over would hide values its runs showed.
                    if ttl.is_some() {
                        tally.adjust("core_kv", "ttl dropped (never enforced by the Python store)");
                    }
                    // As `core set` takes them, but a key holding a secret is kept masked (a
                    // run's values cannot be refused after the fact).
                    let value = self.redacted_named(&key, &value);
                    let masked_key = self.redacted(&key);
                    if masked_key != key {
                        tally.adjust("core_kv", "key held a secret: masked");
                    }
                    self.insert_core_row(bid, &masked_key, &value, CoreWrite { importance, ttl: None })?;
                    tally.converted.core += 1;
                }
                LegacyRow::Event { id, kind, text, tags } => {
                    if text.trim().is_empty() {
                        tally.skip("events", "empty text");
                        continue;
                    }
                    let kind = self.recall_kind(&kind).unwrap_or_else(|_| {
                        tally.adjust("events", "kind empty, multi-line or memctl's own: imported as 'event'");
                        "event".into()
                    });
                    let tags = self.legacy_tags("events", tags, tally)?;
                    let outcome = self.insert_event(path.branch(), &kind, &self.redacted(&text), &tags)?;
                    event_ids.insert(id, outcome.id);
                    if outcome.skipped {
                        tally.skip("events", "duplicate of an event of the same branch");
                    } else {
                        tally.converted.events += 1;
                    }
                }
                LegacyRow::Archival { text, tags } => {
                    if text.trim().is_empty() {
                        tally.skip("archival", "empty text");
                        continue;
                    }
                    let tags = self.legacy_tags("archival", tags, tally)?;
                    if self.archival_insert(bid, ArchivalWrite { text, tags })?.skipped {
                        tally.skip("archival", "duplicate of a record of the same branch");
                    } else {
                        tally.converted.archival += 1;
                    }
                }
                LegacyRow::Exclusion { event_id } => {
                    let Some(event_id) = event_id else {
                        tally.skip("inherited_exclusions", "excluded_event_id not a number");
                        continue;
                    };
                    let Some(&id) = event_ids.get(&event_id) else {
                        tally.skip("inherited_exclusions", "event deleted or not imported");
                        continue;
                    };
                    let shown = match &mut visible {
                        Some(shown) => shown,
                        None => visible
                            .insert(crate::recall::excluded(&view::events(self, &path, None)?).collect()),
                    };
                    let Some(step) = shown.remove(&id) else {
                        tally.skip("inherited_exclusions", "event already excluded by an ancestor");
                        continue;
                    };
                    self.insert_exclusions(bid, [(id, step)])?;
                    tally.converted.exclusions += 1;
                }
                LegacyRow::Summary { kind, text, event_ids: ids } => {
                    if text.trim().is_empty() {
                        tally.skip("inherited_summaries", "empty text");
                        continue;
                    }
                    let kind = self.recall_kind(&kind).unwrap_or_else(|_| {
                        tally.adjust(
                            "inherited_summaries",
                            "kind empty, multi-line or memctl's own: imported as 'summary'",
                        );
                        "summary".into()
                    });
                    let legacy_ids: Vec<i64> =
                        ids.as_deref().and_then(|raw| serde_json::from_str(raw).ok()).unwrap_or_else(|| {
                            tally.adjust("inherited_summaries", "unreadable event ids dropped");
                            Vec::new()
                        });
                    let covered: Vec<i64> =
                        legacy_ids.iter().filter_map(|id| event_ids.get(id).copied()).collect();
                    if covered.len() < legacy_ids.len() {
                        tally.adjust("inherited_summaries", "ids of events not imported dropped");
                    }
                    let shown = view::summaries(self, &path)?;
                    let mut kept: Vec<i64> = shown.iter().map(|s| s.id).collect();
                    let folded: Vec<i64> = shown
                        .into_iter()
                        .filter(|s| {
                            *s.kind == *kind
                                && !s.event_ids.is_empty()
                                && s.event_ids.iter().all(|id| covered.contains(id))
                        })
                        .map(|s| s.id)
                        .collect();
                    self.insert_summary(bid, &mut kept, &kind, &text, &covered, &folded)?;
                    tally.converted.summaries += 1;
                }
            }
        }
        Ok(())
    }

    /// A legacy tags column as memctl tags. The Python store wrote a JSON array of strings;
    /// anything else is read as it would have (a non-list becomes one tag) and counted.
    fn legacy_tags(
        &self,
        table: &'static str,
        raw: Option<String>,
        tally: &mut Tally,
    ) -> Result<Vec<String>> {
        let raw = raw.unwrap_or_default();
        let parsed: Vec<String> = match serde_json::from_str::<Value>(&raw) {
            Ok(Value::Array(items)) => {
                if items.iter().any(|item| !item.is_string()) {
                    tally.adjust(table, "tags that were not text kept as their JSON");
                }
                items
                    .into_iter()
                    .map(|item| match item {
                        Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .collect()
            }
            _ if raw.trim().is_empty() => Vec::new(),
            _ => {
                tally.adjust(table, "tags not a JSON array: kept as one tag");
                vec![raw]
            }
        };
        // Most tags are clean: only those with control characters are copied.
        let mut changed = false;
        let cleaned: Vec<String> = parsed
            .into_iter()
            .filter_map(|tag| {
                let tag = if tag.contains(char::is_control) {
                    changed = true;
                    tag.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
                } else {
                    tag
                };
                let empty = tag.trim().is_empty();
                changed |= empty;
                (!empty).then_some(tag)
            })
            .collect();
        if changed {
            tally.adjust(table, "empty or multi-line tags cleaned");
        }
        normalize_tags(self, &cleaned)
    }
}

/// Branch indexes parents first (children by creation time). A branch whose parent is missing,
/// or is itself, becomes a root; branches caught in a longer parent cycle are skipped.
fn tree_order(branches: &[LegacyBranch], tally: &mut Tally) -> Vec<usize> {
    let index: HashMap<&str, usize> = branches.iter().enumerate().map(|(i, b)| (b.id.as_str(), i)).collect();
    let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    for (i, branch) in branches.iter().enumerate() {
        let parent = branch.parent.as_deref().and_then(|p| index.get(p).copied());
        if branch.parent.is_some() && parent.is_none() {
            tally.adjust("branches", "parent missing: imported as a root");
        }
        let parent = parent.filter(|&p| p != i);
        if branch.parent.as_deref() == Some(branch.id.as_str()) {
            tally.adjust("branches", "its own parent: imported as a root");
        }
        children.entry(parent).or_default().push(i);
    }
    for list in children.values_mut() {
        list.sort_by(|&a, &b| {
            (branches[a].created_at, &branches[a].id)
                .partial_cmp(&(branches[b].created_at, &branches[b].id))
                .unwrap()
        });
    }
    let mut order = Vec::with_capacity(branches.len());
    let mut stack: Vec<usize> = children.get(&None).cloned().unwrap_or_default();
    stack.reverse();
    while let Some(i) = stack.pop() {
        order.push(i);
        if let Some(kids) = children.get(&Some(i)) {
            stack.extend(kids.iter().rev());
        }
    }
    for _ in order.len()..branches.len() {
        tally.skip("branches", "in a parent cycle");
    }
    order
}

/// Opens the legacy file read-only. Without a `-wal` file beside it, it is opened immutable so
/// that reading it creates no `-wal`/`-shm` files; with one, SQLite must read the WAL too.
fn open_legacy(source: &Path) -> Result<Connection> {
    if source.is_dir() {
        let inside = source.join("memory.sqlite");
        let error = Error::invalid(format!("{}: is a directory, not a database file", source.display()));
        return Err(if inside.is_file() {
            error.with_topic(Topic::LegacyDirectory(inside))
        } else {
            error.with_hint(
                "give the memory.sqlite file the Python store wrote, e.g. run/memory/memory.sqlite",
            )
        });
    }
    if !source.is_file() {
        return Err(Error::not_found(format!("{}: no such file", source.display())));
    }
    let mut wal = source.as_os_str().to_owned();
    wal.push("-wal");
    let flags =
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let encoded: String = source
        .to_string_lossy()
        .chars()
        .map(|c| match c {
            '%' => "%25".to_string(),
            '?' => "%3f".to_string(),
            '#' => "%23".to_string(),
            c => c.to_string(),
        })
        .collect();
    let uri = if Path::new(&wal).exists() {
        format!("file:{encoded}")
    } else {
        format!("file:{encoded}?immutable=1")
    };
    let conn = Connection::open_with_flags(uri, flags).map_err(|e| not_legacy(source, &e.to_string()))?;
    Ok(conn)
}

fn not_legacy(source: &Path, why: &str) -> Error {
    Error::incompatible(format!("{}: not a database of the Python memory store ({why})", source.display()))
        .with_hint("import legacy reads the memory.sqlite that AI-Scientist-v2-HPC's MemoryManager writes")
}

fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = stmt.query_map([table], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(names)
}

/// Which optional tables the file has, after checking the required ones.
fn check_schema(conn: &Connection, source: &Path) -> Result<HashSet<&'static str>> {
    let application_id: i64 = conn
        .query_row("SELECT application_id FROM pragma_application_id", [], |r| r.get(0))
        .map_err(|e| not_legacy(source, &crate::error::sqlite_reason(&e)))?;
    if application_id == crate::schema::APPLICATION_ID {
        return Err(not_legacy(source, "it is a memctl database already"));
    }
    for (table, wanted) in REQUIRED {
        let have = columns(conn, table)?;
        if have.is_empty() {
            return Err(not_legacy(source, &format!("no table {table}")));
        }
        if let Some(missing) = wanted.iter().find(|c| !have.iter().any(|h| h == *c)) {
            return Err(not_legacy(source, &format!("table {table} has no column {missing}")));
        }
    }
    let mut present = HashSet::new();
    for (table, wanted) in OPTIONAL {
        let have = columns(conn, table)?;
        if !have.is_empty() && wanted.iter().all(|c| have.iter().any(|h| h == *c)) {
            present.insert(*table);
        }
    }
    Ok(present)
}

fn read_legacy(source: &Path) -> Result<LegacyDatabase> {
    let conn = open_legacy(source)?;
    let optional = check_schema(&conn, source)?;
    let mut branches = Vec::new();
    query_each(
        &conn,
        source,
        "branches",
        "SELECT id, parent_id, node_uid, created_at FROM branches ORDER BY rowid",
        |row| {
            branches.push(LegacyBranch {
                id: text(row, 0)?,
                parent: optional_text(row, 1)?,
                node_uid: optional_text(row, 2)?,
                created_at: timestamp(row, 3)?,
            });
            Ok(())
        },
    )?;
    let mut seen = HashSet::new();
    if let Some(bad) =
        branches.iter().find(|b| !seen.insert(&b.id) || validate_branch_id(&b.id, "branch id").is_err())
    {
        return Err(not_legacy(
            source,
            &format!("branch id {:?} is duplicated or not usable as a memctl id", bad.id),
        ));
    }

    let mut legacy = LegacyDatabase { source: source.to_path_buf(), branches, rows: HashMap::new() };
    let mut push = |row: &rusqlite::Row<'_>, legacy_row: LegacyRow| -> rusqlite::Result<()> {
        let ts = timestamp(row, 1)?;
        let id = row.get(2)?;
        legacy.rows.entry(text(row, 0)?).or_default().push((ts, id, legacy_row));
        Ok(())
    };
    // Every query reads the branch id, the timestamp and the legacy id first.
    let core_sql = if optional.contains("core_meta") {
        "SELECT k.branch_id, k.updated_at, k.rowid, k.key, k.value, m.importance, m.ttl
         FROM core_kv k LEFT JOIN core_meta m ON m.branch_id = k.branch_id AND m.key = k.key"
    } else {
        "SELECT branch_id, updated_at, rowid, key, value, NULL, NULL FROM core_kv"
    };
    query_each(&conn, source, "core_kv", core_sql, |r| {
        let row = LegacyRow::Core {
            key: text(r, 3)?,
            value: optional_text(r, 4)?,
            importance: match r.get_ref(5)? {
                ValueRef::Null => None,
                ValueRef::Integer(i) => Some(Some(i)),
                _ => Some(None),
            },
            ttl: optional_text(r, 6)?,
        };
        push(r, row)
    })?;
    query_each(
        &conn,
        source,
        "events",
        "SELECT branch_id, created_at, id, kind, text, tags FROM events",
        |r| {
            let row = LegacyRow::Event {
                id: r.get(2)?,
                kind: text(r, 3)?,
                text: text(r, 4)?,
                tags: optional_text(r, 5)?,
            };
            push(r, row)
        },
    )?;
    query_each(
        &conn,
        source,
        "archival",
        "SELECT branch_id, created_at, id, text, tags FROM archival",
        |r| push(r, LegacyRow::Archival { text: text(r, 3)?, tags: optional_text(r, 4)? }),
    )?;
    if optional.contains("inherited_exclusions") {
        query_each(
            &conn,
            source,
            "inherited_exclusions",
            "SELECT branch_id, excluded_at, rowid, excluded_event_id FROM inherited_exclusions",
            |r| {
                let event_id = match r.get_ref(3)? {
                    ValueRef::Integer(id) => Some(id),
                    _ => None,
                };
                push(r, LegacyRow::Exclusion { event_id })
            },
        )?;
    }
    if optional.contains("inherited_summaries") {
        query_each(
            &conn,
            source,
            "inherited_summaries",
            "SELECT branch_id, created_at, id, kind, summary_text, summarized_event_ids FROM inherited_summaries",
            |r| {
                let row = LegacyRow::Summary {
                    kind: optional_text(r, 3)?.unwrap_or_else(|| "event".into()),
                    text: text(r, 4)?,
                    event_ids: optional_text(r, 5)?,
                };
                push(r, row)
            },
        )?;
    }
    Ok(legacy)
}

/// A text column that may hold NULL or, from a careless writer, a number.
fn optional_text(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Option<String>> {
    Ok(match row.get_ref(index)? {
        ValueRef::Null => None,
        // Checked first the fast way: `from_utf8_lossy` reads valid text at a quarter the speed.
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(match std::str::from_utf8(t) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

/// [`optional_text`] with NULL read as empty.
fn text(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<String> {
    Ok(optional_text(row, index)?.unwrap_or_default())
}

/// A timestamp column (float epoch seconds): a number, or text holding one; None otherwise.
fn timestamp(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Option<f64>> {
    let ts = match row.get_ref(index)? {
        ValueRef::Integer(i) => Some(i as f64),
        ValueRef::Real(f) => Some(f),
        ValueRef::Text(t) => std::str::from_utf8(t).ok().and_then(|t| t.trim().parse().ok()),
        ValueRef::Null | ValueRef::Blob(_) => None,
    };
    Ok(ts.filter(|ts: &f64| ts.is_finite()))
}

/// Runs `sql` on the legacy file and hands each row to `each`. The readers above take any value
/// SQLite may hold; what still fails (an id that is no integer) is an `incompatible_db` error
/// naming the table and the column.
fn query_each(
    conn: &Connection,
    source: &Path,
    table: &str,
    sql: &str,
    mut each: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        each(row).map_err(|e| not_legacy(source, &format!("table {table}: a row cannot be read ({e})")))?;
    }
    Ok(())
}
