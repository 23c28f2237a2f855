//! Where the workspace and its build outputs are.

use std::path::PathBuf;

pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// A binary of this workspace's release build.
pub fn release_binary(name: &str) -> PathBuf {
    target_dir().join("release").join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        None => workspace_root().join("target"),
    }
}
