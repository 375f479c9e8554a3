//! Checks on the workspace's source structure (the tests in `tests/`); this library only finds
//! what they read.

use std::path::{Path, PathBuf};

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every crate's folder under `crates/` (those with a `Cargo.toml`), sorted.
pub fn workspace_crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(workspace_root().join("crates"))
        .expect("the workspace's crates folder")
        .map(|e| e.expect("a crates folder entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    out
}
