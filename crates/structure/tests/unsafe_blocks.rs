//! Unsafe code says why it is sound, where it is: every `unsafe` block and `unsafe impl` in
//! the workspace has a `// SAFETY:` comment within the 4 lines above it, naming the invariant
//! that holds at that site, and every `unsafe fn` has a `# Safety` section in its doc comment
//! (what its callers must promise).
//!
//! Read from every Rust file of every crate (`src/`, `tests/`, `benches/`, `examples/`,
//! `build.rs`), tests included: the keyword is found in the code with comments, strings and
//! character literals blanked, so that `unsafe` in prose or a message is not taken for code.
//! A function pointer type (`unsafe extern "C" fn(c_int) -> c_int`) is neither a block nor a
//! declaration and needs neither.

use std::path::{Path, PathBuf};
use structure::workspace_crates;

/// How many lines above an unsafe block its `SAFETY:` comment may start.
const SAFETY_REACH: usize = 4;

/// Every `.rs` file of a crate, build outputs left out.
fn rust_files(krate: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy();
            if p.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&p, out);
                }
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(krate, &mut out);
    out
}

/// The source with every comment, string literal and character literal replaced by spaces
/// (line breaks kept, so line numbers hold).
fn blank_non_code(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let at = |j: usize| s.get(j).copied();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            '/' if at(i + 1) == Some('/') => {
                while i < s.len() && s[i] != '\n' {
                    out.push(' ');
                    i += 1;
                }
            }
            '/' if at(i + 1) == Some('*') => {
                let mut depth = 0;
                while i < s.len() {
                    if s[i] == '/' && at(i + 1) == Some('*') {
                        depth += 1;
                        out.push_str("  ");
                        i += 2;
                    } else if s[i] == '*' && at(i + 1) == Some('/') {
                        depth -= 1;
                        out.push_str("  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(blank(s[i]));
                        i += 1;
                    }
                }
            }
            'r' if (at(i + 1) == Some('"') || at(i + 1) == Some('#'))
                && !s[..i]
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_') =>
            {
                // A raw string: r"…", r#"…"#, …
                let hashes = s[i + 1..].iter().take_while(|c| **c == '#').count();
                if s.get(i + 1 + hashes) != Some(&'"') {
                    out.push(s[i]);
                    i += 1;
                    continue;
                }
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                out.push_str(&" ".repeat(2 + hashes));
                i += 2 + hashes;
                while i < s.len() && !s[i..].starts_with(&close) {
                    out.push(blank(s[i]));
                    i += 1;
                }
                out.push_str(&" ".repeat(close.len()));
                i += close.len();
            }
            '"' => {
                out.push(' ');
                i += 1;
                while i < s.len() && s[i] != '"' {
                    if s[i] == '\\' {
                        out.push(' ');
                        i += 1;
                    }
                    if i < s.len() {
                        out.push(blank(s[i]));
                        i += 1;
                    }
                }
                out.push(' ');
                i += 1;
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), left as is.
                let len = if at(i + 1) == Some('\\') {
                    s[i + 2..].iter().position(|c| *c == '\'').map(|p| p + 3)
                } else if at(i + 2) == Some('\'') {
                    Some(3)
                } else {
                    None
                };
                match len {
                    Some(n) => {
                        out.push_str(&" ".repeat(n));
                        i += n;
                    }
                    None => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of code after byte `at`, as words and single punctuation characters.
fn tokens_after(code: &str, at: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = code[at..].chars().peekable();
    while let Some(c) = it.next() {
        if out.len() >= 6 {
            break;
        }
        if c.is_whitespace() {
            continue;
        }
        if is_ident(c) || c == '$' {
            let mut w = c.to_string();
            while let Some(&n) = it.peek().filter(|n| is_ident(**n)) {
                w.push(n);
                it.next();
            }
            out.push(w);
        } else {
            out.push(c.to_string());
        }
    }
    out
}

/// What an `unsafe` keyword opens.
#[derive(Debug, PartialEq)]
enum Site {
    /// An unsafe block, an `unsafe impl` or an `unsafe extern` block: needs `SAFETY:` above.
    Block,
    /// An `unsafe fn` declaration: needs `# Safety` in its doc comment.
    Function,
    /// A function pointer type: needs nothing.
    Type,
}

/// Classifies the `unsafe` whose following tokens are `next`.
fn site(next: &[String]) -> Site {
    let mut t = next.iter().map(String::as_str).peekable();
    if t.peek() == Some(&"extern") {
        t.next();
        // The ABI string, blanked to its quotes.
        if t.peek() == Some(&"\"") {
            t.next();
            t.next();
        }
    }
    match t.next() {
        Some("fn") => match t.next() {
            Some(name) if name.starts_with(|c: char| is_ident(c) || c == '$') => Site::Function,
            _ => Site::Type,
        },
        _ => Site::Block,
    }
}

/// The comment text of a line, if it is a line comment.
fn comment(line: &str) -> Option<&str> {
    let t = line.trim_start();
    t.strip_prefix("//")
}

/// Whether one of the `SAFETY_REACH` lines above `line` is a comment saying `SAFETY:` and
/// something after it.
fn has_safety_comment(lines: &[&str], line: usize) -> bool {
    (line.saturating_sub(SAFETY_REACH)..line).any(|l| {
        lines[l].find("// SAFETY:").is_some_and(|at| {
            let said = lines[l][at + "// SAFETY:".len()..].trim();
            let more = lines.get(l + 1).and_then(|n| comment(n)).unwrap_or("");
            !said.is_empty() || !more.trim().is_empty()
        })
    })
}

/// Whether the doc comment above the declaration on `line` (attributes between them
/// skipped) has a `# Safety` section.
fn has_safety_section(lines: &[&str], line: usize) -> bool {
    let mut l = line;
    while l > 0 {
        l -= 1;
        let t = lines[l].trim_start();
        if t.starts_with("///") {
            if t.trim_start_matches('/').trim() == "# Safety" {
                return true;
            }
        } else if !t.starts_with("#[") {
            return false;
        }
    }
    false
}

/// Every unsafe site of `src` that lacks its reason, as `line: what`.
fn missing_reasons(src: &str) -> Vec<String> {
    let code = blank_non_code(src);
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (at, _) in code.match_indices("unsafe") {
        let before = code[..at].chars().next_back();
        let after = code[at + "unsafe".len()..].chars().next();
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            continue;
        }
        let line = code[..at].matches('\n').count();
        match site(&tokens_after(&code, at + "unsafe".len())) {
            Site::Block if !has_safety_comment(&lines, line) => out.push(format!(
                "{}: an unsafe block with no `// SAFETY:` comment in the {SAFETY_REACH} lines above",
                line + 1
            )),
            Site::Function if !has_safety_section(&lines, line) => out.push(format!(
                "{}: an unsafe fn with no `# Safety` section in its doc comment",
                line + 1
            )),
            _ => {}
        }
    }
    out
}

/// Every unsafe site of the workspace that lacks its reason, as `path:line: what`.
fn workspace_missing_reasons() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    let mut out = Vec::new();
    for krate in workspace_crates() {
        for file in rust_files(&krate) {
            let src = std::fs::read_to_string(&file).unwrap();
            let shown = file.canonicalize().unwrap();
            let shown = shown
                .strip_prefix(&root)
                .unwrap_or(&shown)
                .display()
                .to_string();
            out.extend(
                missing_reasons(&src)
                    .into_iter()
                    .map(|m| format!("{shown}:{m}")),
            );
        }
    }
    out
}

#[test]
fn every_unsafe_site_says_why_it_is_sound() {
    let missing = workspace_missing_reasons();
    assert!(
        missing.is_empty(),
        "{} unsafe sites without their reason:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_reader_finds_the_shims_unsafe_code() {
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shim/src/interpose.rs");
    let src = std::fs::read_to_string(shim).unwrap();
    let code = blank_non_code(&src);
    let n = code
        .match_indices("unsafe")
        .filter(|(at, _)| site(&tokens_after(&code, at + 6)) != Site::Type)
        .count();
    assert!(n > 40, "found {n} unsafe sites in the shim's interposers");
}

#[test]
fn a_block_without_its_comment_is_found() {
    let src = "fn f(p: *const u8) -> u8 {\n    let x = 1;\n    unsafe { *p }\n}\n";
    assert_eq!(missing_reasons(src).len(), 1, "{:?}", missing_reasons(src));
    let commented =
        "fn f(p: *const u8) -> u8 {\n    // SAFETY: p points to a live u8.\n    unsafe { *p }\n}\n";
    assert!(missing_reasons(commented).is_empty());
    // Too far above: five lines.
    let far = "// SAFETY: p points to a live u8.\n\n\n\n\nunsafe { *p }\n";
    assert_eq!(missing_reasons(far).len(), 1);
    // An empty reason is none.
    let empty = "// SAFETY:\nunsafe { *p }\n";
    assert_eq!(missing_reasons(empty).len(), 1);
    let imp = "struct S;\nunsafe impl Send for S {}\n";
    assert_eq!(missing_reasons(imp).len(), 1);
}

#[test]
fn an_unsafe_fn_without_its_section_is_found() {
    let bare = "/// Reads p.\npub unsafe fn read(p: *const u8) -> u8 {\n    // SAFETY: as the caller promises (see `# Safety`), p is live.\n    unsafe { *p }\n}\n";
    assert_eq!(
        missing_reasons(bare).len(),
        1,
        "{:?}",
        missing_reasons(bare)
    );
    let documented = "/// Reads p.\n///\n/// # Safety\n/// p points to a live u8.\n#[inline]\npub unsafe extern \"C\" fn read(p: *const u8) -> u8 {\n    // SAFETY: p is live, as the caller promises.\n    unsafe { *p }\n}\n";
    assert!(
        missing_reasons(documented).is_empty(),
        "{:?}",
        missing_reasons(documented)
    );
    let in_macro = "macro_rules! m {\n    ($sym:ident) => {\n        pub unsafe extern \"C\" fn $sym() {}\n    };\n}\n";
    assert_eq!(missing_reasons(in_macro).len(), 1);
}

#[test]
fn prose_strings_and_pointer_types_are_not_unsafe_code() {
    let src = "// unsafe { in a comment }\n/* unsafe { */\nconst S: &str = \"unsafe { }\";\nconst R: &str = r#\"unsafe {\"#;\nstatic F: unsafe extern \"C\" fn() = g;\ntype G = unsafe fn(u8) -> u8;\nfn not_unsafe_code() {}\nlet c = '\"'; let d = unsafe_name;\n";
    assert!(
        missing_reasons(src).is_empty(),
        "{:?}",
        missing_reasons(src)
    );
}
