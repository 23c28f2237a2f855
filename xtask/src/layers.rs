//! `cargo xtask layers`: the import graph of each crate's top-level modules, checked for
//! circles, and the engine's layering rules (docs/architecture.md) checked on top.
//!
//! An edge `a → b` is any `crate::b…` path written in module `a` (a file `src/a.rs` or a
//! directory `src/a/`), in a `use` or inline. In the library crate a path must name the
//! defining module (`crate::error::ErrorKind`, not the re-export `crate::ErrorKind`), so that
//! every dependency is visible; in a binary crate `crate::item` is an edge to `main`.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module → the modules it refers to.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// What a module of memctl-core may refer to, beyond the modules below every layer.
const ENGINE_RULES: &[(&str, &[&str])] = &[
    // The bottom: the rows every layer reads and writes.
    ("rows", &[]),
    // Where long work reports its progress: a trait the store holds, knowing nothing else.
    ("progress", &[]),
    // The database seam: SQL in, rows out, on SQLite or PostgreSQL; it knows no table.
    ("db", &["error"]),
    // The store knows the schema and the database, and no layer.
    ("store", &["checkpoint", "clock", "config", "db", "error", "progress", "schema"]),
    // The view reads through the store (and its connection) and nothing above it.
    ("view", &["db", "error", "query", "rows", "schema", "store"]),
];

/// The top-level modules of the crate whose sources are in `src` (the root file excluded
/// unless it is a binary's `main.rs`), with their references.
pub fn module_graph(src: &Path) -> Result<Graph> {
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    collect(src, src, &mut files)?;
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let binary = modules.contains("main");
    let mut graph = Graph::new();
    for (module, texts) in &files {
        let edges = graph.entry(module.clone()).or_default();
        for text in texts {
            for name in crate_paths(text) {
                if modules.contains(&name) {
                    if &name != module {
                        edges.insert(name);
                    }
                } else if binary {
                    edges.insert("main".to_string());
                } else {
                    bail!("module {module} refers to crate::{name}: name the module that defines it");
                }
            }
        }
        edges.remove(module);
    }
    Ok(graph)
}

/// Sources by top-level module name: `src/a.rs` and everything under `src/a/` are module `a`.
fn collect(src: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<String>>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(src, &path, files)?;
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(src)?;
        let first = relative.components().next().context("empty path")?;
        let module = Path::new(first.as_os_str()).file_stem().context("no file name")?;
        let module = module.to_string_lossy().to_string();
        if module == "lib" {
            continue;
        }
        let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        files.entry(module).or_default().push(text);
    }
    Ok(())
}

/// The first segment of every `crate::…` path in `text`, outside comments; for a group
/// `crate::{a, b::c}`, each member's first segment.
fn crate_paths(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let preceded_by_ident =
            rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_ident {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = closing_brace(group);
            names.extend(group_members(&group[..end]));
        } else {
            names.push(ident(rest).to_string());
        }
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The index of the `}` that closes a group whose `{` came just before `text`.
fn closing_brace(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    text.len()
}

/// The first segment of each top-level member of a `use` group.
fn group_members(group: &str) -> Vec<String> {
    let mut members = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(ident(group[start..i].trim_start()).to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    members.push(ident(group[start..].trim_start()).to_string());
    members
}

fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The circles of `graph` (strongly connected components of more than one module).
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    // Tarjan's algorithm; the graphs are a few dozen nodes, recursion is fine.
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

/// Which rules beyond "no circle" a crate follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// [`ENGINE_RULES`].
    Engine,
    /// Commands do not refer to each other ([`CLI_SHARED`]).
    Cli,
    None,
}

/// Every problem of the crate in `src`: its circles and breaches of its rules.
pub fn problems(src: &Path, rules: Rules) -> Result<Vec<String>> {
    let graph = module_graph(src)?;
    let mut found: Vec<String> =
        circles(&graph).into_iter().map(|c| format!("import circle: {}", c.join(" ↔ "))).collect();
    if rules == Rules::Cli {
        found.extend(commands_importing_commands(&graph));
    }
    if rules == Rules::Engine {
        for (module, allowed) in ENGINE_RULES {
            for target in graph.get(*module).into_iter().flatten() {
                if !allowed.contains(&target.as_str()) {
                    found.push(format!("{module} must not refer to {target}"));
                }
            }
        }
    }
    Ok(found)
}

/// The CLI's modules that are not commands: what commands share. Every other module but the
/// entry points (`main`, `app`, `cli`) is one command group, which refers only to these.
const CLI_SHARED: &[&str] = &["artifacts", "config", "failure", "input", "invocation", "output"];

/// Commands of the CLI that refer to another command.
fn commands_importing_commands(graph: &Graph) -> Vec<String> {
    let is_command = |m: &str| !CLI_SHARED.contains(&m) && !["main", "app", "cli"].contains(&m);
    let mut found = Vec::new();
    for (module, targets) in graph.iter().filter(|(m, _)| is_command(m)) {
        for target in targets.iter().filter(|t| is_command(t)) {
            found.push(format!("command {module} must not refer to command {target}"));
        }
    }
    found
}

/// The crates checked: source directory and rules.
pub const CRATES: [(&str, Rules); 3] = [
    ("crates/memctl-core/src", Rules::Engine),
    ("crates/memctl-cli/src", Rules::Cli),
    ("xtask/src", Rules::None),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_and_groups() {
        let text = "use crate::a::{X, Y};\nuse crate::{b, c::{D, E}};\n// crate::commented\nfn f() { crate::d::g(); }\nsubcrate::x";
        assert_eq!(crate_paths(text), ["a", "b", "c", "d"]);
    }

    #[test]
    fn finds_circles() {
        let graph: Graph = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
            .collect();
        assert_eq!(circles(&graph), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
    }

    /// The workspace itself: no circle in any crate, and the engine's layers point down.
    #[test]
    fn workspace_layers_point_down() {
        let root = crate::paths::workspace_root();
        for (src, rules) in CRATES {
            let found = problems(&root.join(src), rules).unwrap();
            assert!(found.is_empty(), "{src}:\n{}", found.join("\n"));
        }
    }
}
