//! docs/DESIGN.md's map of the crates is the truth: each line `crate ──> a, b` of its first
//! code block names exactly the workspace crates that crate's `Cargo.toml` lists under
//! `[dependencies]` (a crate's folder name under `crates/`; dev-dependencies are for tests and
//! are not arrows). A new dependency without its arrow, or an arrow left behind, fails here.

use std::collections::{BTreeMap, BTreeSet};
use structure::{workspace_crates, workspace_root};

/// The folder names of the workspace's crates.
fn crates() -> BTreeSet<String> {
    workspace_crates()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The workspace crates under a crate's `[dependencies]` (by `path`, or `.workspace = true`
/// for a name the workspace maps to a crate folder).
fn dependencies(krate: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let toml = std::fs::read_to_string(
        workspace_root()
            .join("crates")
            .join(krate)
            .join("Cargo.toml"),
    )
    .unwrap();
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if known.contains(name) {
            out.insert(name.to_string());
        }
    }
    out
}

/// The map's arrows: crate → the crates it may use.
fn map() -> BTreeMap<String, BTreeSet<String>> {
    let design = std::fs::read_to_string(workspace_root().join("docs/DESIGN.md")).unwrap();
    let block = design
        .split("```")
        .nth(1)
        .expect("DESIGN.md has a code block");
    let mut out = BTreeMap::new();
    for line in block.lines() {
        let Some((from, to)) = line.split_once("──>") else {
            continue;
        };
        let to = to.split("  ").next().unwrap();
        let targets: BTreeSet<String> = to
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty() && !t.starts_with("nothing"))
            .collect();
        for name in from.split(',') {
            out.insert(name.trim().to_string(), targets.clone());
        }
    }
    out
}

#[test]
fn every_crate_uses_exactly_what_the_design_map_says() {
    let known = crates();
    let map = map();
    let mut wrong = Vec::new();
    for krate in &known {
        let actual = dependencies(krate, &known);
        match map.get(krate) {
            None => wrong.push(format!("{krate}: not in DESIGN.md's map (uses {actual:?})")),
            Some(drawn) if drawn != &actual => wrong.push(format!(
                "{krate}: the map says {drawn:?}, Cargo.toml says {actual:?}"
            )),
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/DESIGN.md's map is not the code:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_map_reader_finds_the_arrows() {
    let map = map();
    assert!(map["docdb"].contains("engine"), "{map:?}");
    assert!(map["js"].is_empty(), "{map:?}");
    assert!(map["query"].contains("js"), "{map:?}");
    let known = crates();
    assert!(dependencies("docdb", &known).contains("query"));
}
