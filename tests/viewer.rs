//! The offline viewer of `memctl export html`, checked in headless Chromium: a small tree is built
//! through the binary, the page is opened at every branch (`#branch=ID`) and the DOM that
//! Chromium dumps after running the page's script must show each branch's view exactly as
//! `memctl read --all` computes it, with own and inherited rows told apart; in compare mode
//! (`#compare=A&with=B`) the page's diff and per-key histories must be `memctl diff` and `memctl why`'s.
//!
//! Without a Chromium binary the test prints a notice and passes, unless `CI` is set: then it
//! fails, so CI never skips it silently.

use crate::support::*;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Consolidation keeps the newest 2 events; it runs only when asked (`memctl consolidate`).
const CONFIG: &str = "\
core_max_chars = 2000
recall_max_events = 2
retrieval_k = 8
auto_consolidate = false

[search]
fts = \"auto\"

[sqlite]
busy_timeout_ms = 30000
";

/// How long one page load may take before Chromium is killed.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

// ---- Chromium -----------------------------------------------------------------------------------

fn find_chromium() -> Option<PathBuf> {
    let fixed = Path::new("/usr/bin/chromium");
    if fixed.is_file() {
        return Some(fixed.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Chromium, or None with a notice when it is missing; with CI set, a missing Chromium fails
/// the test instead.
fn chromium_or_skip() -> Option<PathBuf> {
    let found = find_chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Chromium (/usr/bin/chromium or chromium on PATH): CI must run the viewer test"
        );
        eprintln!(
            "NOTICE: viewer test skipped: no Chromium found (/usr/bin/chromium or chromium on PATH). \
             Install it (e.g. apt-get install chromium) to check the HTML viewer; CI=1 makes this a failure."
        );
    }
    found
}

/// The DOM of `page#branch=BRANCH` once its script has run.
fn dump_dom(chromium: &Path, page: &Path, branch: &str) -> String {
    dump_dom_at(chromium, page, &format!("branch={branch}"))
}

/// The DOM of `page#FRAGMENT` once its script has run.
fn dump_dom_at(chromium: &Path, page: &Path, fragment: &str) -> String {
    let profile = tempfile::Builder::new().prefix("memctl-chromium-").tempdir().expect("profile dir");
    let url = format!("file://{}#{fragment}", page.display());
    let mut command = Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().unwrap_or_else(|e| panic!("start {}: {e}", chromium.display()));
    let mut stdout = child.stdout.take().expect("stdout pipe");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let deadline = Instant::now() + CHROMIUM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            // The whole process group: Chromium's helpers too.
            #[cfg(unix)]
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within {CHROMIUM_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let dom = reader.join().expect("reader thread").expect("chromium prints UTF-8");
    assert!(status.success(), "chromium failed on {url}: {status}");
    assert!(dom.contains("data-testid=\"view\""), "no view in the DOM of {url}:\n{dom}");
    dom
}

// ---- A small reader for the dumped DOM ----------------------------------------------------------

/// A start or end tag of the DOM: where it starts and ends, its name and attributes.
#[derive(Debug)]
struct Tag {
    start: usize,
    end: usize,
    name: String,
    closing: bool,
    attrs: BTreeMap<String, String>,
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Every tag, in order. Text is escaped in a serialized DOM, so a `<` outside an attribute value
/// starts a tag, except inside `<script>` and `<style>`, whose raw text is skipped.
fn tags(dom: &str) -> Vec<Tag> {
    let bytes = dom.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(offset) = dom[i..].find('<') {
        let start = i + offset;
        let closing = bytes.get(start + 1) == Some(&b'/');
        let name_start = start + 1 + usize::from(closing);
        let name_len = dom[name_start..].find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(0);
        if name_len == 0 {
            // A comment or doctype.
            i = start + dom[start..].find('>').expect("tag end") + 1;
            continue;
        }
        let name = dom[name_start..name_start + name_len].to_ascii_lowercase();
        let mut attrs = BTreeMap::new();
        let mut j = name_start + name_len;
        loop {
            while bytes[j].is_ascii_whitespace() || bytes[j] == b'/' {
                j += 1;
            }
            if bytes[j] == b'>' {
                j += 1;
                break;
            }
            let key_len = dom[j..].find(|c: char| c == '=' || c == '>' || c.is_ascii_whitespace()).unwrap();
            let key = dom[j..j + key_len].to_string();
            j += key_len;
            let mut value = String::new();
            if bytes[j] == b'=' {
                let quote = bytes[j + 1];
                assert!(quote == b'"', "unquoted attribute at {j}");
                let len = dom[j + 2..].find('"').expect("closing quote");
                value = unescape(&dom[j + 2..j + 2 + len]);
                j += 2 + len + 1;
            }
            attrs.insert(key, value);
        }
        let raw_text = !closing && (name == "script" || name == "style");
        out.push(Tag { start, end: j, name: name.clone(), closing, attrs });
        i = j;
        if raw_text {
            i += dom[j..].find(&format!("</{name}")).expect("raw text end");
        }
    }
    out
}

const VOID: [&str; 8] = ["br", "hr", "img", "input", "meta", "link", "wbr", "col"];

/// An element of the DOM: its attributes and the markup inside it.
#[derive(Debug)]
struct Element<'a> {
    attrs: BTreeMap<String, String>,
    inner: &'a str,
}

impl Element<'_> {
    #[track_caller]
    fn attr(&self, name: &str) -> &str {
        self.attrs.get(name).unwrap_or_else(|| panic!("no {name} in {:?}", self.attrs))
    }

    /// The text inside, tags removed and entities decoded.
    fn text(&self) -> String {
        let mut text = String::new();
        let mut rest = self.inner;
        while let Some(open) = rest.find('<') {
            text += &rest[..open];
            rest = &rest[open + rest[open..].find('>').expect("tag end") + 1..];
        }
        unescape(&(text + rest))
    }

    /// The elements inside marked `data-testid="TESTID"`.
    fn find(&self, testid: &str) -> Vec<Element<'_>> {
        find(self.inner, testid)
    }

    #[track_caller]
    fn find_one(&self, testid: &str) -> Element<'_> {
        let mut found = self.find(testid);
        assert_eq!(found.len(), 1, "one {testid} expected in {}", self.inner);
        found.remove(0)
    }
}

/// The elements of `dom` marked `data-testid="TESTID"`, in document order.
fn find<'a>(dom: &'a str, testid: &str) -> Vec<Element<'a>> {
    let all = tags(dom);
    let mut found = Vec::new();
    for (k, tag) in all.iter().enumerate() {
        if tag.closing || tag.attrs.get("data-testid").map(String::as_str) != Some(testid) {
            continue;
        }
        let inner = if VOID.contains(&tag.name.as_str()) {
            ""
        } else {
            let mut depth = 0;
            let close = all[k + 1..]
                .iter()
                .filter(|t| t.name == tag.name)
                .find(|t| {
                    depth += if t.closing { -1 } else { 1 };
                    depth < 0
                })
                .unwrap_or_else(|| panic!("no end of <{}> at {}", tag.name, tag.start));
            &dom[tag.end..close.start]
        };
        found.push(Element { attrs: tag.attrs.clone(), inner });
    }
    found
}

#[track_caller]
fn find_one<'a>(dom: &'a str, testid: &str) -> Element<'a> {
    let mut found = find(dom, testid);
    assert_eq!(found.len(), 1, "one {testid} expected");
    found.remove(0)
}

// ---- The tree under test ------------------------------------------------------------------------

/// A text longer than the journal keeps (its arguments are cut at 80 characters), ending in
/// `tail`: the tail is in the file only if the row itself is, and once if the row is there once.
fn long_text(intro: &str, tail: &str) -> String {
    format!("{intro}: {} {tail}", "cache-aware tiling for a 3D 7-point stencil; ".repeat(3))
}

/// An hour before [`NOW`].
const HOUR_AGO: &str = "2026-01-02T02:04:05Z";

const TRICKY: &str = "x < y && \"quoted\" </script><b data-testid=\"injected\">bold</b> & done";

struct Tree {
    sb: Sandbox,
    /// The generated id of b's child.
    g: String,
    /// The archival record a updates.
    updated_record: i64,
}

fn build() -> Tree {
    let sb = Sandbox::with_config(CONFIG);
    sb.ok(&["init"]);
    sb.ok(&["branch", "create", "root"]);
    sb.ok(&["core", "set", "root", "task", "Tune the 3D stencil", "--importance", "5"]);
    sb.ok(&["core", "set", "root", "best_runtime_s", "48.2", "--importance", "4"]);
    sb.ok(&["core", "set", "root", "obsolete", "deleted in a"]);
    sb.ok(&["core", "set", "root", "tricky", TRICKY]);
    // TTLs: a newer value that ran out before the export leaves the older one; a live one shows.
    sb.ok(&["core", "set", "root", "status", "stable"]);
    sb.exec(
        &["core", "set", "root", "status", "temporary", "--ttl", "30m"],
        None,
        &[("MEMCTL_NOW", HOUR_AGO)],
    )
    .success();
    sb.ok(&["core", "set", "root", "lease", "held", "--ttl", "2h"]);
    sb.ok(&["recall", "append", "root", "--kind", "plan", "root plan: measure the baseline"]);
    sb.ok(&[
        "recall",
        "append",
        "root",
        "--kind",
        "metric",
        "root metric: baseline 48.2 s",
        "--tag",
        "phase:draft",
    ]);
    sb.ok(&["archival", "add", "root", &long_text("Idea", "ROOT-RECORD-TAIL"), "--tag", "IDEA_MD"]);
    let record = sb.json(&["archival", "add", "root", "root draft record, to be updated by a"]);
    let updated_record = int(&record, "id");

    // a: overrides a key, deletes one, writes events, updates a record, consolidates twice.
    sb.ok(&["fork", "root", "a"]);
    sb.ok(&["branch", "set-uid", "a", "node-a"]);
    sb.ok(&["core", "set", "a", "best_runtime_s", "12.4", "--importance", "4"]);
    sb.ok(&["core", "del", "a", "obsolete"]);
    sb.ok(&["recall", "append", "a", "--kind", "metric", "a metric one"]);
    sb.ok(&["recall", "append", "a", "--kind", "metric", "a metric two", "--tag", "phase:improve"]);
    sb.ok(&["recall", "append", "a", "--kind", "note", "a note three"]);
    sb.ok(&["archival", "update", "a", &updated_record.to_string(), "--text", "record updated by a"]);
    sb.ok(&["consolidate", "a"]);
    sb.ok(&["recall", "append", "a", "--kind", "metric", "a metric four"]);
    sb.ok(&["recall", "append", "a", "--kind", "metric", "a metric five"]);
    sb.ok(&["consolidate", "a"]);

    // a1: a child of a, forked after both consolidations.
    sb.ok(&["fork", "a", "a1"]);
    sb.ok(&["core", "set", "a1", "a1_key", "grandchild value"]);
    sb.ok(&["recall", "append", "a1", "--kind", "note", "a1 own note"]);

    // b: a's sibling; none of its rows may show in a's view, nor a's in b's.
    sb.ok(&["fork", "root", "b"]);
    sb.ok(&["core", "set", "b", "sibling_key", "b only"]);
    sb.ok(&["recall", "append", "b", "--kind", "note", &long_text("b secret event", "B-EVENT-TAIL")]);
    sb.ok(&["archival", "add", "b", "b secret record"]);

    // The root writes after a, a1 and b were forked: none of them sees it.
    sb.ok(&["core", "set", "root", "late", "written after the forks"]);
    sb.ok(&["recall", "append", "root", "--kind", "note", "root late note"]);
    sb.ok(&["archival", "add", "root", "root late record"]);

    // g: b's child with a generated (long) id, forked after the root's late writes; c: the
    // root's child forked after them, which does see them.
    let g = string(&sb.json(&["fork", "b"]), "branch").to_string();
    sb.ok(&["core", "set", &g, "best_runtime_s", "30.1"]);
    sb.ok(&["fork", "root", "c"]);
    Tree { sb, g, updated_record }
}

/// The data the page carries.
fn page_data(html: &str) -> Value {
    let open = "<script id=\"memctl-data\" type=\"application/json\">";
    let start = html.find(open).expect("data element") + open.len();
    let len = html[start..].find("</script>").expect("end of data");
    serde_json::from_str(&html[start..start + len]).expect("data is JSON")
}

/// What the page shows for one branch.
#[derive(Debug)]
struct Shown {
    /// key -> (value, origin, from)
    core: BTreeMap<String, (String, String, String)>,
    /// (event id, origin, from), in page order
    events: Vec<(i64, String, String)>,
    /// event id -> branch whose exclusion hides it
    excluded: BTreeMap<i64, String>,
    /// summary id -> (kind text, events covered, origin)
    summaries: BTreeMap<i64, (String, usize, String)>,
    /// (record id, origin, text), in page order
    archival: Vec<(i64, String, String)>,
    ops: usize,
    /// The view's text.
    text: String,
}

fn id_attr(element: &Element<'_>, name: &str) -> i64 {
    element.attr(name).parse().unwrap_or_else(|_| panic!("{name} is not a number in {:?}", element.attrs))
}

/// The view panel of `dom`, which must be for `branch`.
#[track_caller]
fn shown(dom: &str, branch: &str) -> Shown {
    let view = find_one(dom, "view");
    assert_eq!(view.attr("data-branch"), branch, "the view is for the branch of the URL");
    let origin = |e: &Element<'_>| (e.attr("data-origin").to_string(), e.attr("data-from").to_string());
    let core = view
        .find("core-row")
        .iter()
        .map(|row| {
            let (o, f) = origin(row);
            (row.attr("data-key").to_string(), (row.find_one("core-value").text(), o, f))
        })
        .collect();
    let events = view
        .find("event-row")
        .iter()
        .map(|row| {
            let (o, f) = origin(row);
            (id_attr(row, "data-event-id"), o, f)
        })
        .collect();
    let excluded = view
        .find("excluded-row")
        .iter()
        .map(|row| (id_attr(row, "data-event-id"), row.attr("data-by").into()))
        .collect();
    let summaries = view
        .find("summary-row")
        .iter()
        .map(|row| {
            let covers = row.attr("data-covers").parse().expect("data-covers");
            (id_attr(row, "data-summary-id"), (row.text(), covers, row.attr("data-origin").to_string()))
        })
        .collect();
    let archival = view
        .find("archival-row")
        .iter()
        .map(|row| (id_attr(row, "data-record-id"), row.attr("data-origin").into(), row.text()))
        .collect();
    Shown { core, events, excluded, summaries, archival, ops: view.find("op-row").len(), text: view.text() }
}

/// The page shows exactly what the engine computes for `branch` (`core get --explain`, `read
/// --all`): core keys, values and writers, events in order, summaries, archival records in order,
/// each marked own or inherited.
#[track_caller]
fn matches_the_engine(sb: &Sandbox, branch: &str, shown: &Shown) {
    let origin = |from: &str| if from == branch { "own" } else { "inherited" }.to_string();
    let explained = sb.json(&["core", "get", branch, "--explain"]);
    let core: BTreeMap<String, (String, String, String)> = object(&explained, "core")
        .iter()
        .map(|(key, entry)| {
            let from = string(entry, "branch");
            (key.clone(), (string(entry, "value").to_string(), origin(from), from.to_string()))
        })
        .collect();
    assert_eq!(shown.core, core, "core of {branch}: values and the branch that wrote each");
    let view = sb.json(&["read", "--all", branch]);
    let recall = field(&view, "recall");
    let events: Vec<(i64, String, String)> = array(recall, "events")
        .iter()
        .map(|e| {
            let from = string(e, "branch");
            (int(e, "id"), origin(from), from.to_string())
        })
        .collect();
    assert_eq!(shown.events, events, "events of {branch}, newest first");
    let summaries: BTreeSet<i64> = array(recall, "summaries").iter().map(|s| int(s, "id")).collect();
    assert_eq!(shown.summaries.keys().copied().collect::<BTreeSet<_>>(), summaries, "summaries of {branch}");
    let records: Vec<(i64, String)> =
        array(&view, "archival").iter().map(|r| (int(r, "id"), origin(string(r, "branch")))).collect();
    let shown_records: Vec<(i64, String)> =
        shown.archival.iter().map(|(id, o, _)| (*id, o.clone())).collect();
    assert_eq!(shown_records, records, "archival of {branch}, newest first");
}

#[track_caller]
fn core_is(shown: &Shown, expected: &[(&str, &str, &str)], branch: &str) {
    let expected: BTreeMap<String, (String, String, String)> = expected
        .iter()
        .map(|(key, value, from)| {
            let origin = if *from == branch { "own" } else { "inherited" };
            (key.to_string(), (value.to_string(), origin.to_string(), from.to_string()))
        })
        .collect();
    assert_eq!(shown.core, expected, "core rows of {branch}");
}

#[test]
fn the_page_shows_each_branch_view_in_chromium() {
    let tree = build();
    let sb = &tree.sb;
    sb.ok(&["export", "html", "--out", "page.html"]);
    let page = std::fs::canonicalize(sb.file("page.html")).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();

    // The file holds every row once: a text written once is in it once (the journal keeps only
    // the first 80 characters of a text, so these tails are not in it).
    for tail in ["ROOT-RECORD-TAIL", "B-EVENT-TAIL"] {
        assert_eq!(html.matches(tail).count(), 1, "{tail} once in the file");
    }
    assert_eq!(html.matches("<script").count(), 2, "one data element and the viewer's script");
    assert!(!html.contains("<b data-testid"), "texts cannot end the data element");
    let data = page_data(&html);
    assert_eq!(string(&data, "format"), "memctl-viewer/1");
    let branches: Vec<String> = array(&sb.json(&["branch", "list"]), "branches")
        .iter()
        .map(|b| string(b, "id").to_string())
        .collect();
    assert_eq!(branches.len(), 6);
    let exclusions_of_a: BTreeSet<i64> = array(&data, "branches")
        .iter()
        .find(|b| string(b, "id") == "a")
        .map(|b| array(b, "exclusions").iter().map(|x| int(x, "event_id")).collect())
        .unwrap();
    assert_eq!(exclusions_of_a.len(), 5, "two consolidations of a hid 3 + 2 events");

    let Some(chromium) = chromium_or_skip() else { return };

    // a, by its node_uid: the child override, the deleted key gone, the root's late write and
    // the sibling's rows absent, excluded events and summaries from the consolidations.
    let dom = dump_dom(&chromium, &page, "node-a");
    assert!(find(&dom, "injected").is_empty(), "a text became markup");
    let tree_el = find_one(&dom, "tree");
    let nodes = tree_el.find("tree-node");
    let listed: BTreeSet<&str> = nodes.iter().map(|n| n.attr("data-branch")).collect();
    assert_eq!(listed, branches.iter().map(String::as_str).collect(), "one tree node per branch");
    assert_eq!(nodes.len(), branches.len());
    let node = |id: &str| nodes.iter().find(|n| n.attr("data-branch") == id).unwrap();
    let nested = |parent: &str, child: &str| {
        node(parent).find("tree-node").iter().any(|n| n.attr("data-branch") == child)
    };
    assert!(nested("root", "a") && nested("a", "a1") && nested("b", &tree.g) && nested("root", &tree.g));
    assert!(!nested("a", "b") && !nested("b", "a1") && !nested("a1", "a"), "the tree nests by parent");
    assert!(node(&tree.g).text().contains('\u{2026}') || tree.g.len() <= 16, "long ids are shortened");
    assert!(node("a").text().contains("node-a"), "the node_uid labels its branch");

    let a = shown(&dom, "a");
    core_is(
        &a,
        &[
            ("task", "Tune the 3D stencil", "root"),
            ("best_runtime_s", "12.4", "a"),
            ("tricky", TRICKY, "root"),
            ("status", "stable", "root"),
            ("lease", "held", "root"),
        ],
        "a",
    );
    matches_the_engine(sb, "a", &a);
    let view = find_one(&dom, "view");
    let rows = view.find("core-row");
    let ttl = |key: &str| rows.iter().find(|r| r.attr("data-key") == key).unwrap().find("core-ttl");
    assert!(ttl("lease")[0].text().starts_with("ttl 7200 s"), "a TTL is shown");
    assert!(ttl("status").is_empty() && ttl("task").is_empty());
    let path: Vec<String> =
        find_one(&dom, "path").find("path-node").iter().map(|n| n.attr("data-branch").to_string()).collect();
    assert_eq!(path, ["root", "a"], "path, root first");
    assert_eq!(a.events.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["own", "own"]);
    assert_eq!(
        a.excluded.keys().copied().collect::<BTreeSet<_>>(),
        exclusions_of_a,
        "every event a's consolidations hid is listed as excluded"
    );
    assert!(a.excluded.values().all(|by| by == "a"), "hidden by a's own exclusions: {:?}", a.excluded);
    let kinds: BTreeMap<String, usize> = a
        .summaries
        .values()
        .map(|(text, covers, origin)| {
            assert_eq!(origin, "own");
            let kind =
                ["plan", "metric", "note"].into_iter().find(|k| text.contains(&format!(" {k} events")));
            (kind.unwrap_or_else(|| panic!("summary kind in {text}")).to_string(), *covers)
        })
        .collect();
    // The second metric summary folds in the first: it stands for root's metric and a's first two.
    assert_eq!(kinds, BTreeMap::from([("metric".into(), 3), ("note".into(), 1), ("plan".into(), 1)]));
    let updated = a.archival.iter().find(|r| r.0 == tree.updated_record).expect("the updated record");
    assert_eq!(updated.1, "own", "a's version of root's record is a's");
    assert!(updated.2.contains("record updated by a") && !updated.2.contains("to be updated"));
    for absent in ["b secret", "b only", "root late", "written after the forks", "deleted in a"] {
        assert!(!a.text.contains(absent), "{absent:?} must not be in a's view");
    }
    assert!(a.ops >= 10, "a's journal: {} rows", a.ops);

    // a1: everything inherited from a and root, its own key, nothing of the root's late writes.
    let a1 = shown(&dump_dom(&chromium, &page, "a1"), "a1");
    core_is(
        &a1,
        &[
            ("task", "Tune the 3D stencil", "root"),
            ("best_runtime_s", "12.4", "a"),
            ("tricky", TRICKY, "root"),
            ("status", "stable", "root"),
            ("lease", "held", "root"),
            ("a1_key", "grandchild value", "a1"),
        ],
        "a1",
    );
    matches_the_engine(sb, "a1", &a1);
    assert_eq!(a1.excluded, a.excluded, "a1 inherits a's exclusions");
    assert!(a1.summaries.values().all(|s| s.2 == "inherited"));
    assert!(!a1.text.contains("root late") && !a1.text.contains("b secret"));

    // g, by its generated id: b's rows inherited, its own override, not the root's late writes.
    let dom = dump_dom(&chromium, &page, &tree.g);
    let g = shown(&dom, &tree.g);
    core_is(
        &g,
        &[
            ("task", "Tune the 3D stencil", "root"),
            ("best_runtime_s", "30.1", &tree.g),
            ("obsolete", "deleted in a", "root"),
            ("tricky", TRICKY, "root"),
            ("status", "stable", "root"),
            ("lease", "held", "root"),
            ("sibling_key", "b only", "b"),
        ],
        &tree.g,
    );
    matches_the_engine(sb, &tree.g, &g);
    assert!(g.text.contains("B-EVENT-TAIL") && g.text.contains("b secret record"));
    for absent in ["a metric", "a note", "record updated by a", "root late", "written after the forks"] {
        assert!(!g.text.contains(absent), "{absent:?} must not be in g's view");
    }
    assert!(g.excluded.is_empty() && g.summaries.is_empty());
    assert_eq!(g.ops, 2, "g's journal: its fork and its core write");

    // c, forked after the root's late writes, sees them.
    let c = shown(&dump_dom(&chromium, &page, "c"), "c");
    matches_the_engine(sb, "c", &c);
    assert_eq!(c.core.get("late").map(|v| v.1.as_str()), Some("inherited"));
    assert!(c.text.contains("root late note") && c.text.contains("root late record"));

    // An unknown branch: a notice, and the first root.
    let dom = dump_dom(&chromium, &page, "no-such-branch");
    assert!(find_one(&dom, "notice").text().contains("no-such-branch"));
    shown(&dom, "root");

    // The page's JavaScript is a derived implementation of the view rule: every branch's view
    // in the page equals the engine's.
    for branch in &branches {
        let page_view = shown(&dump_dom(&chromium, &page, branch), branch);
        matches_the_engine(sb, branch, &page_view);
    }
}

#[test]
fn the_page_matches_the_engine_on_an_imported_search() {
    let Some(chromium) = chromium_or_skip() else { return };
    let sb = Sandbox::new();
    std::fs::copy(fixture("legacy/search_run/memory.sqlite"), sb.file("legacy.sqlite")).unwrap();
    sb.ok(&["import", "legacy", "legacy.sqlite"]);
    sb.ok(&["export", "html", "--out", "page.html"]);
    let page = std::fs::canonicalize(sb.file("page.html")).unwrap();
    // The deepest branches: long paths with exclusions and summaries from several ancestors.
    let listed = sb.json(&["branch", "list"]);
    let mut branches: Vec<&Value> = array(&listed, "branches").iter().collect();
    branches.sort_by_key(|b| -int(b, "depth"));
    for branch in branches.iter().take(2) {
        let id = string(branch, "id");
        let name = opt_string(branch, "node_uid").unwrap_or(id);
        let shown = shown(&dump_dom(&chromium, &page, name), id);
        matches_the_engine(&sb, id, &shown);
        assert!(!shown.summaries.is_empty() && !shown.excluded.is_empty(), "{name}: {shown:?}");
    }
}

/// The frame of a probe: a script that runs after the viewer's, with constants (`/*SETUP*/`)
/// and an async body (`/*STEPS*/`) that fills `record` (`settle()` waits for the page). The
/// record, or the error that stopped the steps, goes into `<pre data-testid="probe">` as JSON.
const PROBE_FRAME: &str = r#"<script>
/*SETUP*/
(async () => {
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
  const record = {};
  try {
/*STEPS*/
  } catch (error) {
    record.error = String(error && error.stack || error);
  }
  const out = document.createElement('pre');
  out.dataset.testid = 'probe';
  out.textContent = JSON.stringify(record);
  document.body.append(out);
})();
</script>"#;

/// The page `html` with a probe (see [`PROBE_FRAME`]) at the end of its body.
fn probed_page(html: &str, setup: &str, steps: &str) -> String {
    let end = html.rfind("</body>").expect("end of body");
    let probe = PROBE_FRAME.replace("/*SETUP*/", setup).replace("/*STEPS*/", steps);
    format!("{}{probe}{}", &html[..end], &html[end..])
}

/// Types each of `QUERIES` (`[name,
/// text]`, set before it) into the tree's search box and presses Enter, clears the search, then
/// folds and unfolds subtrees, recording after each step which tree nodes are displayed, which
/// match and which branch the view shows (a body for [`probed_page`]).
const SEARCH_AND_FOLD: &str = r#"
  const $ = (id) => document.getElementById(id);
  const tree = $('tree');
  const search = $('search');
  const ids = (selector) => Array.from(tree.querySelectorAll(selector)).map((li) => li.dataset.branch);
  const displayed = () => ids('li.tnode').filter((id) =>
    tree.querySelector('li.tnode[data-branch="' + CSS.escape(id) + '"]').getClientRects().length > 0).sort();
    for (const [name, text] of QUERIES) {
      search.value = text;
      search.dispatchEvent(new Event('input'));
      await settle();
      record[name] = { displayed: displayed(), hits: ids('li.tnode.hit').sort(), count: $('search-count').textContent };
      search.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
      await settle();
      record[name].selected = $('view').dataset.branch;
    }
    search.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' }));
    await settle();
    record.cleared = displayed();
    const fold = (id) => tree.querySelector('button[data-toggle="' + CSS.escape(id) + '"]').click();
    fold('a');
    record.folded_a = displayed();
    fold('a');
    record.unfolded_a = displayed();
    fold('root');
    record.folded_root = displayed();
    $('collapse-all').click();
    record.collapsed_all = displayed();
    $('expand-all').click();
    record.expanded_all = displayed();
"#;

#[test]
fn the_tree_search_and_fold_controls_work_in_chromium() {
    let Some(chromium) = chromium_or_skip() else { return };
    let tree = build();
    let sb = &tree.sb;
    let g = tree.g.as_str();
    sb.ok(&["export", "html", "--out", "page.html"]);
    let html = std::fs::read_to_string(sb.file("page.html")).unwrap();
    // The generated id by its tail alone, in capitals: the search ignores case.
    let g_tail = g[g.len() - 8..].to_uppercase();
    let queries = serde_json::json!([["node_uid", "node-a"], ["id", "a1"], ["generated_id", g_tail]]);
    let probed = probed_page(&html, &format!("const QUERIES = {queries};"), SEARCH_AND_FOLD);
    std::fs::write(sb.file("probe.html"), probed).unwrap();
    let page = std::fs::canonicalize(sb.file("probe.html")).unwrap();
    let dom = dump_dom(&chromium, &page, "root");
    let record: Value = serde_json::from_str(&find_one(&dom, "probe").text()).expect("probe record");
    assert!(record.get("error").is_none(), "the probe failed: {record}");
    let list = |value: &Value| -> BTreeSet<String> {
        value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    let set = |items: &[&str]| -> BTreeSet<String> { items.iter().map(|s| s.to_string()).collect() };

    // A search keeps the branches whose id or node_uid holds the text (any case) and their
    // ancestors, nothing else; Enter selects a match. Generated ids are random hex, so which
    // branches hold "a1" is worked out from the branch list.
    let listed = sb.json(&["branch", "list"]);
    let branches = array(&listed, "branches");
    let parent_of = |id: &str| {
        let branch = branches.iter().find(|b| string(b, "id") == id).unwrap();
        opt_string(branch, "parent").map(str::to_string)
    };
    for (name, text, wanted) in
        [("node_uid", "node-a", "a"), ("id", "a1", "a1"), ("generated_id", &g_tail, g)]
    {
        let text = text.to_lowercase();
        let holds = |field: Option<&str>| field.is_some_and(|f| f.to_lowercase().contains(&text));
        let hits: BTreeSet<String> = branches
            .iter()
            .filter(|b| holds(Some(string(b, "id"))) || holds(opt_string(b, "node_uid")))
            .map(|b| string(b, "id").to_string())
            .collect();
        assert!(hits.contains(wanted), "{name}: {hits:?}");
        let mut displayed = BTreeSet::new();
        for hit in &hits {
            let mut at = Some(hit.clone());
            while let Some(id) = at {
                at = parent_of(&id);
                displayed.insert(id);
            }
        }
        let step = &record[name];
        assert_eq!(list(&step["hits"]), hits, "{name}: {step}");
        assert_eq!(list(&step["displayed"]), displayed, "{name}: {step}");
        let count = if hits.len() == 1 { "1 match".to_string() } else { format!("{} matches", hits.len()) };
        assert_eq!(string(step, "count"), count, "{name}");
        assert!(hits.contains(string(step, "selected")), "{name}: Enter shows a match's view: {step}");
    }
    assert_eq!(list(&record["node_uid"]["hits"]), set(&["a"]), "node-a is a's node_uid only");
    assert_eq!(string(&record["node_uid"], "selected"), "a");
    assert_eq!(list(&record["generated_id"]["displayed"]), set(&["root", "b", g]));
    let all = set(&["root", "a", "a1", "b", g, "c"]);
    assert_eq!(list(&record["cleared"]), all, "Escape clears the filter");
    // Folding hides a node's descendants only, and unfolding brings them back.
    assert_eq!(list(&record["folded_a"]), set(&["root", "a", "b", g, "c"]));
    assert_eq!(list(&record["unfolded_a"]), all);
    assert_eq!(list(&record["folded_root"]), set(&["root"]));
    // Collapse all keeps the path to the selected branch (g) open.
    assert_eq!(list(&record["collapsed_all"]), set(&["root", "a", "b", g, "c"]));
    assert_eq!(list(&record["expanded_all"]), all);
}

// ---- Compare mode ------------------------------------------------------------------------------

/// Picks `PICK` in the compare control of the branch shown and clicks "compare", then records
/// which pair the view compares (a body for [`probed_page`]).
const COMPARE: &str = r#"
    await settle();
    const pick = document.querySelector('[data-testid="compare-with"]');
    record.options = Array.from(pick.options).map((o) => o.value).sort();
    pick.value = PICK;
    document.querySelector('[data-testid="compare-go"]').click();
    await settle();
    record.compare = document.getElementById('view').dataset.compare;
    record.hash = location.hash;
"#;

/// The page's compare mode shows, for pairs of branches, exactly `memctl diff A B` (every layer,
/// each side, the common ancestor) and, per differing core key, the statuses `memctl why` gives
/// each write for A and for B; picking a branch in a view's compare control opens the pair.
#[test]
fn the_compare_mode_matches_diff_and_why_in_chromium() {
    let Some(chromium) = chromium_or_skip() else { return };
    let tree = build();
    let sb = &tree.sb;
    // Statuses change no view; the tree shows them.
    sb.ok(&["branch", "mark", "b", "dead", "--subtree", "--note", "sibling route failed"]);
    sb.ok(&["branch", "mark", "a1", "best"]);
    sb.ok(&["export", "html", "--out", "page.html"]);
    let page = std::fs::canonicalize(sb.file("page.html")).unwrap();
    let g = tree.g.as_str();
    for (a, b) in [("a1", "b"), ("a", "a1"), ("c", g), ("root", "a"), ("b", "b")] {
        let dom = dump_dom_at(&chromium, &page, &format!("compare={a}&with={b}"));
        let view = find_one(&dom, "view");
        assert_eq!(view.attr("data-compare"), format!("{a} {b}"));
        let diff = sb.json(&["diff", a, b]);

        let mut shown: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for row in view.find("diff-row") {
            let place = (row.attr("data-layer").to_string(), row.attr("data-side").to_string());
            shown.entry(place).or_default().insert(row.attr("data-id").to_string());
        }
        let mut expected: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for layer in ["core", "recall", "summaries", "archival"] {
            for side in ["only_a", "only_b", "changed"] {
                let Some(rows) = field(&diff, layer).get(side) else { continue };
                let ids: BTreeSet<String> = rows
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let r = if side == "changed" { &r["a"] } else { r };
                        match layer {
                            "core" => string(r, "key").to_string(),
                            _ => int(r, "id").to_string(),
                        }
                    })
                    .collect();
                if !ids.is_empty() {
                    expected.insert((layer.to_string(), side.to_string()), ids);
                }
            }
        }
        assert_eq!(shown, expected, "compare {a} {b}");
        assert_eq!(view.find("diff-empty").len(), usize::from(expected.is_empty()), "compare {a} {b}");

        let common = view.find_one("diff-common");
        let ancestor = field(&diff, "common_ancestor");
        assert_eq!(common.attr("data-branch"), string(ancestor, "branch"), "compare {a} {b}");
        for (attr, key) in [("data-a-sees", "a_sees_up_to"), ("data-b-sees", "b_sees_up_to")] {
            let engine = ancestor[key].as_i64().map_or(String::new(), |seq| seq.to_string());
            assert_eq!(common.attr(attr), engine, "compare {a} {b}: {key}");
        }

        let differing: BTreeSet<String> = expected
            .iter()
            .filter(|((layer, _), _)| layer == "core")
            .flat_map(|(_, keys)| keys.clone())
            .collect();
        let whys = view.find("why-key");
        assert_eq!(whys.iter().map(|w| w.attr("data-key").to_string()).collect::<BTreeSet<_>>(), differing);
        for why in &whys {
            let key = why.attr("data-key");
            let statuses = |branch: &str| -> BTreeMap<String, String> {
                array(&sb.json(&["why", branch, key]), "writes")
                    .iter()
                    .map(|w| (int(w, "seq").to_string(), string(w, "status").to_string()))
                    .collect()
            };
            let rows = why.find("why-row");
            let page = |attr: &str| -> BTreeMap<String, String> {
                rows.iter().map(|r| (r.attr("data-seq").to_string(), r.attr(attr).to_string())).collect()
            };
            assert_eq!(page("data-status-a"), statuses(a), "why {a} {key}");
            assert_eq!(page("data-status-b"), statuses(b), "why {b} {key}");
        }
    }

    // The tree marks each branch's status; the view of a marked branch names it and its note.
    let dom = dump_dom(&chromium, &page, "b");
    let statuses: BTreeMap<String, String> = find(&dom, "tree-node")
        .iter()
        .map(|n| (n.attr("data-branch").to_string(), n.attr("data-status").to_string()))
        .collect();
    let expected: BTreeMap<String, String> =
        [("root", "alive"), ("a", "alive"), ("a1", "best"), ("b", "dead"), (g, "dead"), ("c", "alive")]
            .iter()
            .map(|(b, s)| (b.to_string(), s.to_string()))
            .collect();
    assert_eq!(statuses, expected);
    let status = find_one(&dom, "status");
    assert_eq!(status.attr("data-status"), "dead");
    assert!(status.text().contains("sibling route failed"), "{}", status.text());

    // The control: a view offers every other branch, and "compare" opens the pair.
    let html = std::fs::read_to_string(&page).unwrap();
    let probed = probed_page(&html, "const PICK = 'b';", COMPARE);
    std::fs::write(sb.file("compare.html"), probed).unwrap();
    let probe_page = std::fs::canonicalize(sb.file("compare.html")).unwrap();
    let record: Value =
        serde_json::from_str(&find_one(&dump_dom(&chromium, &probe_page, "a1"), "probe").text()).unwrap();
    assert!(record.get("error").is_none(), "the probe failed: {record}");
    let options: Vec<&str> =
        record["options"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let mut others = vec!["root", "a", "b", g, "c"];
    others.sort();
    assert_eq!(options, others);
    assert_eq!(record["compare"], "a1 b");
    assert_eq!(record["hash"], "#compare=a1&with=b");
}
