//! No import circles in any crate of the workspace: no module names one that names it back.
//!
//! Read from each crate's `src/` as a reviewer reads it: the non-test code of every file (the
//! text before its first `#[cfg(test)]`, comments dropped; `tests.rs` files, `tests/` and `bin/`
//! folders left out), and every path that starts with `crate::`, `super::` or `self::`, `use`
//! groups expanded.
//!
//! A path from a file in module `M` to a target module `T` is an edge between the two children
//! of their lowest common module `L` that contain them: so there is one graph per module folder
//! (and one for the crate root), whose nodes are that folder's files and subfolders plus the
//! folder's own file (`mod.rs` or `name.rs`, the module's face). A path to an item of `L`
//! itself (`super::Stage` from `aggregate/group.rs`) leads to the child `L` re-exports it from
//! (`pub use parse::Stage`), or else to `L`'s own file. At the crate root the root's items
//! (`crate::Error`) are its re-exports and are not followed, as a thin root is all re-exports.
//! A circle in any graph fails the test, named by crate, folder and files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use structure::workspace_crates;

/// A module path inside a crate: `["aggregate", "group"]`; the root is empty.
type ModPath = Vec<String>;

/// The graph of one module folder: node → the nodes it names. A node is a child's name, or
/// `SELF` for the folder's own file.
type Graph = BTreeMap<String, BTreeSet<String>>;

const SELF: &str = "(face)";

/// Every source file below `src` with its module path, leaving out tests and binaries.
fn sources(src: &Path) -> Vec<(PathBuf, ModPath)> {
    fn walk(dir: &Path, at: &ModPath, out: &mut Vec<(PathBuf, ModPath)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if name == "tests" || name == "bin" {
                continue;
            }
            if p.is_dir() {
                let mut inner = at.clone();
                inner.push(name);
                walk(&p, &inner, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let mut path = at.clone();
                if !matches!(name.as_str(), "mod" | "lib" | "main") {
                    path.push(name);
                }
                out.push((p, path));
            }
        }
    }
    let mut out = Vec::new();
    walk(src, &Vec::new(), &mut out);
    out
}

/// The code before the first test module, without comments.
fn code(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap();
    let s = s.split("#[cfg(test)]").next().unwrap();
    s.lines()
        .map(|l| match l.find("//") {
            // `//` inside a string literal ("http://…") is rare in paths' company; a line
            // with a quote before the slashes is kept whole.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Expands the path tree at the start of `s` (after its prefix): `a::{b, c::d}` gives `[a, b]`
/// and `[a, c, d]`.
fn expand(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &[char], i: &mut usize) -> Vec<Vec<String>> {
        let mut path = Vec::new();
        loop {
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if *i < s.len() && s[*i] == '{' {
                *i += 1;
                let mut out = Vec::new();
                loop {
                    for mut p in tree(s, i) {
                        let mut full = path.clone();
                        full.append(&mut p);
                        out.push(full);
                    }
                    while *i < s.len() && s[*i] != ',' && s[*i] != '}' {
                        *i += 1;
                    }
                    if *i >= s.len() || s[*i] == '}' {
                        *i += 1;
                        return out;
                    }
                    *i += 1;
                }
            }
            let start = *i;
            while *i < s.len() && is_ident(s[*i]) {
                *i += 1;
            }
            if *i == start {
                return vec![path];
            }
            path.push(s[start..*i].iter().collect());
            if s.len() > *i + 1 && s[*i] == ':' && s[*i + 1] == ':' {
                *i += 2;
            } else {
                return vec![path];
            }
        }
    }
    let chars: Vec<char> = s.chars().take(4096).collect();
    tree(&chars, &mut 0)
}

/// Every absolute module path the code of a file in `at` names (`crate::`, `super::`,
/// `self::`), each as far as it goes.
fn named_paths(code: &str, at: &ModPath) -> Vec<ModPath> {
    let mut out = Vec::new();
    for prefix in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(prefix) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue;
            }
            // The module this file's `self` is: a face is its folder, a file is itself.
            let base: ModPath = match prefix {
                "crate::" => Vec::new(),
                "self::" => at.clone(),
                _ => at[..at.len().saturating_sub(1)].to_vec(),
            };
            for rel in expand(&code[i + prefix.len()..]) {
                let mut abs = base.clone();
                for seg in rel {
                    if seg == "super" {
                        abs.pop();
                    } else if seg != "self" {
                        abs.push(seg);
                    }
                }
                out.push(abs);
            }
        }
    }
    out
}

/// The crate's module tree: every module path that has a file or folder.
fn modules(files: &[(PathBuf, ModPath)]) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    for (_, m) in files {
        for n in 0..=m.len() {
            out.insert(m[..n].to_vec());
        }
    }
    out
}

/// The child of `folder` that re-exports `item` from one of its children, if its face does.
fn reexport_source(
    faces: &BTreeMap<ModPath, String>,
    folder: &ModPath,
    item: &str,
) -> Option<String> {
    let face = faces.get(folder)?;
    for (i, _) in face.match_indices("use ") {
        let head = &face[..i];
        if !head.trim_end().ends_with("pub") && !head.trim_end().ends_with(')') {
            continue;
        }
        let rest = &face[i + 4..];
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        for p in expand(rest) {
            if p.len() >= 2 && p.last().map(String::as_str) == Some(item) {
                return Some(p[0].clone());
            }
        }
    }
    None
}

/// One graph per module folder of a crate, keyed by the folder's path.
fn graphs(src: &Path) -> BTreeMap<ModPath, Graph> {
    let files = sources(src);
    let mods = modules(&files);
    let faces: BTreeMap<ModPath, String> = files
        .iter()
        .filter(|(p, _)| {
            matches!(
                p.file_stem().unwrap().to_str(),
                Some("mod" | "lib" | "main")
            )
        })
        .map(|(p, m)| (m.clone(), code(p)))
        .chain(
            files
                .iter()
                .filter(|(p, m)| p.with_extension("").is_dir() && !m.is_empty())
                .map(|(p, m)| (m.clone(), code(p))),
        )
        .collect();
    let mut out: BTreeMap<ModPath, Graph> = BTreeMap::new();
    for (path, at) in &files {
        let is_face = faces.contains_key(at);
        for target in named_paths(&code(path), at) {
            let Some(edge) = edge(at, is_face, &target, &mods, &faces) else {
                continue;
            };
            let (folder, from, to) = edge;
            out.entry(folder)
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
    }
    out
}

/// The edge a path from a file at `at` to `target` makes: (the folder whose graph holds it,
/// from, to), or `None` for a path inside one node or to the crate root's own items.
fn edge(
    at: &ModPath,
    at_is_face: bool,
    target: &ModPath,
    mods: &BTreeSet<ModPath>,
    faces: &BTreeMap<ModPath, String>,
) -> Option<(ModPath, String, String)> {
    let mut module = target.clone();
    let mut item = None;
    while !mods.contains(&module) {
        item = module.pop();
    }
    let common = at.iter().zip(&module).take_while(|(a, b)| a == b).count();
    let folder: ModPath = at[..common].to_vec();
    let own_file_is_folder = at.len() == common;
    let from = if own_file_is_folder {
        // A file that is not a folder's face has no children: its own path is a leaf.
        if !at_is_face && !at.is_empty() {
            return None;
        }
        SELF.to_string()
    } else {
        at[common].clone()
    };
    let to = if module.len() > common {
        module[common].clone()
    } else if folder.is_empty() {
        return None;
    } else {
        let item = item?;
        reexport_source(faces, &folder, &item)
            .filter(|c| mods.contains(&[folder.clone(), vec![c.clone()]].concat()))
            .unwrap_or_else(|| SELF.to_string())
    };
    (from != to).then_some((folder, from, to))
}

fn cycle(edges: &Graph) -> Option<Vec<String>> {
    fn dfs(
        n: &str,
        edges: &Graph,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for t in edges.get(n).into_iter().flatten() {
            match state.get(t.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == t).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(t.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = dfs(t, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = dfs(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The nodes reachable from `n` by one edge or more.
fn reachable(n: &str, edges: &Graph) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = vec![n];
    while let Some(x) = todo.pop() {
        for t in edges.get(x).into_iter().flatten() {
            if seen.insert(t.clone()) {
                todo.push(t);
            }
        }
    }
    seen
}

/// The groups of nodes that reach each other (the strongly connected components of more than
/// one node): every file a circle ties, so that one reading shows all there is to untie.
fn tied_groups(edges: &Graph) -> Vec<BTreeSet<String>> {
    let reach: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|n| (n, reachable(n, edges))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for (n, r) in &reach {
        if !r.contains(*n) || groups.iter().any(|g| g.contains(*n)) {
            continue;
        }
        let group = r
            .iter()
            .filter(|m| reach.get(m).is_some_and(|rm| rm.contains(*n)))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
}

/// Every circle in the workspace, one line each: `crate folder: one circle {every file tied}`.
fn circles() -> Vec<String> {
    let mut out = Vec::new();
    for krate in workspace_crates() {
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        for (folder, graph) in graphs(&krate.join("src")) {
            if let Some(c) = cycle(&graph) {
                let tied: Vec<String> = tied_groups(&graph)
                    .iter()
                    .map(|g| format!("{g:?}"))
                    .collect();
                out.push(format!(
                    "{name} src/{}: {}; tied: {}",
                    folder.join("/"),
                    c.join(" -> "),
                    tied.join(" ")
                ));
            }
        }
    }
    out
}

#[test]
fn no_crate_has_an_import_circle() {
    let found = circles();
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_reader_sees_the_engines_modules_and_folders() {
    let g = graphs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src"));
    let root = &g[&Vec::new()];
    assert!(root.len() > 10, "the engine's modules were found: {root:?}");
    assert!(root["journal"].contains("error"), "{root:?}");
    assert!(
        g.contains_key(&vec!["journal".to_string()]),
        "{:?}",
        g.keys()
    );
}

#[test]
fn a_planted_circle_is_found() {
    let g = graphs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src"));
    let mut root = g[&Vec::new()].clone();
    assert_eq!(cycle(&root), None);
    root.entry("io".into()).or_default().insert("engine".into());
    assert!(cycle(&root).is_some());
}

#[test]
fn paths_expand_through_groups() {
    assert_eq!(
        expand("a::{b, c::{d, e}}, x"),
        vec![vec!["a", "b"], vec!["a", "c", "d"], vec!["a", "c", "e"]]
    );
    let at: ModPath = vec!["aggregate".into(), "group".into()];
    assert_eq!(
        named_paths("use super::parse::Stage;", &at),
        vec![vec!["aggregate", "parse", "Stage"]]
    );
    let face: ModPath = vec!["aggregate".into()];
    assert_eq!(
        named_paths("use self::parse::Stage;", &face),
        vec![vec!["aggregate", "parse", "Stage"]]
    );
}
