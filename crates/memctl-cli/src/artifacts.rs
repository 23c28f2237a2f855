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
    // Both or neither: a paper's .md and .json describe the same branch.
    let staged_markdown = stage_file(&markdown, paper.markdown().as_bytes())?;
    let staged_json = stage_file(&json_path, (serde_json::to_string_pretty(&document)? + "\n").as_bytes())?;
    staged_markdown.commit()?;
    staged_json.commit()?;
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

/// Creates `dir` and its parents if missing; a path that cannot be one is invalid input.
pub fn make_dir(dir: &Path) -> memctl_core::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::invalid(format!("cannot create directory {}: {e}", dir.display())))
}

/// Writes a whole file through a temporary sibling, so a reader never sees half of it. Through
/// a symbolic link the file it names is written (the link stays); a FIFO or a device, which
/// cannot be replaced, is written in place, as a shell's redirection would.
pub fn write_file(path: &Path, bytes: &[u8]) -> memctl_core::Result<()> {
    stage_file(path, bytes)?.commit()
}

/// A file's new content written beside it, put in its place by [`Staged::commit`] (dropped
/// uncommitted, it is removed): files that go together are all staged before any is replaced.
pub struct Staged {
    path: PathBuf,
    target: PathBuf,
    /// The temporary sibling; None for a FIFO or a device, written in place.
    tmp: Option<PathBuf>,
}

/// Writes `bytes` beside `path` (see [`write_file`]).
pub fn stage_file(path: &Path, bytes: &[u8]) -> memctl_core::Result<Staged> {
    let target = link_target(path);
    let mut staged = Staged { path: path.to_path_buf(), target, tmp: None };
    match std::fs::metadata(&staged.target) {
        Ok(found) if found.is_dir() => {
            return Err(Error::invalid(format!("{} is a directory", path.display())))
        }
        Ok(found) if !found.is_file() => {
            std::fs::write(&staged.target, bytes).map_err(|e| staged.failed(e))?;
            return Ok(staged);
        }
        _ => {}
    }
    if let Some(dir) = staged.target.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    let mut tmp = staged.target.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| staged.failed(e))?;
    staged.tmp = Some(tmp);
    Ok(staged)
}

impl Staged {
    pub fn commit(mut self) -> memctl_core::Result<()> {
        match self.tmp.take() {
            Some(tmp) => std::fs::rename(&tmp, &self.target).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                self.failed(e)
            }),
            None => Ok(()),
        }
    }

    fn failed(&self, e: std::io::Error) -> Error {
        Error::invalid(format!("cannot write {}: {e}", self.path.display()))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The path a write of `path` lands on: the file its chain of links names (where the last link
/// dangles, the path it names), else `path`.
fn link_target(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut target = path.to_path_buf();
    // A dangling chain: follow it as far as it goes (a bounded number of hops, as the kernel).
    for _ in 0..40 {
        match std::fs::read_link(&target) {
            Ok(next) => target = target.parent().map_or(next.clone(), |dir| dir.join(&next)),
            Err(_) => break,
        }
    }
    target
}
