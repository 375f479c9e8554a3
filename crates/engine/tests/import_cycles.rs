//! No import circles inside the engine: no module imports one that imports it back, at the
//! level of the crate's modules (`crate::x` paths) and of the files inside a module directory
//! (`super::y` paths). Read from the sources' non-test code, as a reviewer would read the `use`
//! lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().unwrap() != "bin" {
                sources(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") && p.file_name().unwrap() != "tests.rs" {
            out.push(p);
        }
    }
}

/// The code before the first test module.
fn code(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap();
    s.split("#[cfg(test)]").next().unwrap().to_string()
}

/// Identifiers following `prefix` in `src` (`crate::block::…` gives `block`).
fn targets(src: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in src.match_indices(prefix) {
        let before = src[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &src[i + prefix.len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
        // `use super::{a, b::c}`: every item of the group.
        if let Some(group) = rest.strip_prefix('{') {
            for item in group.split('}').next().unwrap().split(',') {
                let first = item.trim().split("::").next().unwrap();
                if !first.is_empty() {
                    out.insert(first.to_string());
                }
            }
        }
    }
    out
}

fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn dfs(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
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

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut siblings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel
            .with_extension("")
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        if parts == ["lib"] {
            continue;
        }
        let module = parts[0].clone();
        let text = code(f);
        let deps = modules.entry(module.clone()).or_default();
        for t in targets(&text, "crate::") {
            // `crate::Error` and the like are the crate root's re-exports.
            if t != module && t.chars().next().unwrap().is_lowercase() {
                deps.insert(t);
            }
        }
        if parts.len() == 2 {
            let me = format!("{module}/{}", parts[1]);
            let deps = siblings.entry(me.clone()).or_default();
            for t in targets(&text, "super::") {
                let sibling = format!("{module}/{t}");
                if sibling != me && src.join(format!("{sibling}.rs")).exists() {
                    deps.insert(sibling);
                }
            }
        }
    }
    assert!(modules.len() > 10, "the sources were found: {modules:?}");
    assert_eq!(cycle(&modules), None, "modules: {modules:?}");
    assert_eq!(cycle(&siblings), None, "files: {siblings:?}");
    // The check can fail: a planted circle is found.
    let mut planted = modules.clone();
    planted
        .entry("io".into())
        .or_default()
        .insert("engine".into());
    assert!(cycle(&planted).is_some());
}
