//! The files a run leaves behind, written whole (never half) by `export` and `quickstart`.

use memctl_core::{viewer_html, Artifacts, Error, Store};
use serde_json::json;
use std::path::{Path, PathBuf};

/// What [`write_paper`] wrote.
pub struct WrittenPaper {
    pub branch: String,
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub sections: usize,
    pub warnings: Vec<String>,
}

/// Writes final_memory_for_paper.md and .json for `branch` into `dir`.
pub fn write_paper(
    store: &Store,
    branch: &str,
    artifacts: Option<&Artifacts>,
    dir: &Path,
) -> anyhow::Result<WrittenPaper> {
    let paper = store.paper_memory(branch, artifacts)?;
    let markdown = dir.join("final_memory_for_paper.md");
    let json_path = dir.join("final_memory_for_paper.json");
    let mut document = serde_json::to_value(&paper)?;
    document["format"] = json!("memctl-paper/1");
    write_file(&markdown, paper.markdown().as_bytes())?;
    write_file(&json_path, (serde_json::to_string_pretty(&document)? + "\n").as_bytes())?;
    Ok(WrittenPaper {
        branch: paper.branch,
        markdown,
        json: json_path,
        sections: paper.sections.len(),
        warnings: paper.warnings,
    })
}

/// Writes the HTML viewer of the whole database to `out`: its size in bytes and branch count.
pub fn write_viewer(store: &Store, title: &str, out: &Path) -> anyhow::Result<(usize, usize)> {
    let (page, branches) = viewer_page(store, title)?;
    write_file(out, page.as_bytes())?;
    Ok((page.len(), branches))
}

/// The HTML viewer of the whole database and its branch count.
pub fn viewer_page(store: &Store, title: &str) -> anyhow::Result<(String, usize)> {
    let data = store.viewer_data(title)?;
    let branches = data["branches"].as_array().map_or(0, Vec::len);
    Ok((viewer_html(&data), branches))
}

/// Writes a whole file through a temporary sibling, so a reader never sees half of it.
pub fn write_file(path: &Path, bytes: &[u8]) -> memctl_core::Result<()> {
    let fail = |e: std::io::Error| Error::invalid(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}
