//! Every file the engine and docdb write, sync, create, rename or remove goes through the I/O
//! seam (`engine::io`): a source scan of their non-test code outside `io/`. Each exception is
//! listed with why it is safe. (The power-loss loop checks the same at run time: every file in
//! its data directory was created through the seam.)

use std::path::{Path, PathBuf};

/// Calls that touch a file or a directory behind the seam's back.
const FORBIDDEN: [&str; 11] = [
    "File::open(",
    "File::create(",
    "OpenOptions::new(",
    ".sync_all()",
    ".sync_data()",
    "fs::rename(",
    "fs::remove_file(",
    "fs::create_dir",
    "fs::write(",
    "fs::remove_dir",
    ".set_len(",
];

/// (file under crates/, call, why it may stay).
const ALLOWED: [(&str, &str, &str); 5] = [
    (
        "engine/src/journal/replay.rs",
        "File::open(",
        "replay only reads journal files, and reads see the page cache the seam wrote",
    ),
    (
        "engine/src/meta.rs",
        "OpenOptions::new(",
        "the process lock file: an advisory flock and a pid, never synced, read back or recovered",
    ),
    (
        "engine/src/meta.rs",
        ".set_len(",
        "the process lock file, cut before the pid is written",
    ),
    (
        "engine/src/engine.rs",
        ".sync_all()",
        "Journal::sync_all, which syncs through the seam",
    ),
    (
        "engine/src/checkpoint.rs",
        ".sync_all()",
        "Journal::sync_all, which syncs through the seam",
    ),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            // The seam itself, the binaries (test tools) and test directories.
            if !matches!(name.as_str(), "io" | "bin" | "tests") {
                sources(&p, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            // test modules
            out.push(p);
        }
    }
}

/// A call is the seam's when made on the `Io` (`io.set_len(`, `self.io.sync_all()`...).
fn through_seam(line: &str, call: &str) -> bool {
    call.starts_with('.') && line.contains(&format!("io{call}"))
}

/// A match of `File::…` must not be the tail of a longer name (`BlockFile::create(`).
fn finds(line: &str, call: &str) -> bool {
    line.match_indices(call).any(|(at, _)| {
        !call.starts_with("File::")
            || !line[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn engine_and_docdb_touch_files_only_through_the_seam() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    sources(&crates.join("engine/src"), &mut files);
    sources(&crates.join("docdb/src"), &mut files);
    assert!(files.len() > 20, "the scan found the sources");
    let mut found = Vec::new();
    let mut used = vec![false; ALLOWED.len()];
    for f in &files {
        let rel = f
            .strip_prefix(crates)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests sit at the end of a file, after `#[cfg(test)]`.
        let code = text.split("\n#[cfg(test)]").next().unwrap();
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for call in FORBIDDEN {
                if !finds(line, call) || through_seam(line, call) {
                    continue;
                }
                match ALLOWED
                    .iter()
                    .position(|(file, c, _)| *file == rel && *c == call)
                {
                    Some(i) => used[i] = true,
                    None => found.push(format!("{rel}:{}: {call} {}", n + 1, line.trim())),
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "file operations outside the I/O seam:\n{}",
        found.join("\n")
    );
    for (i, (file, call, why)) in ALLOWED.iter().enumerate() {
        assert!(used[i], "stale allow-list entry {file} {call} ({why})");
    }
}
