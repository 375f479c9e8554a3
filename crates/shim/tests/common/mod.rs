//! What the shim's integration tests share: the library and a C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `libflashdoc_shim.so`, built now: `cargo test` builds no cdylib for integration tests, so a
/// test that only looked for one could preload a stale library.
pub fn shim() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "flashdoc-shim"])
        .status()
        .unwrap();
    assert!(status.success(), "building the shim failed");
    let exe = std::env::current_exe().unwrap();
    let so = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libflashdoc_shim.so");
    assert!(so.exists(), "{} not built", so.display());
    so
}

/// Compiles the C program `src` into `out` with extra arguments; returns the program.
pub fn compile(src: &Path, out: &Path, extra: &[String]) -> PathBuf {
    let exe = out.join(src.file_stem().unwrap());
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(src)
        .args(extra)
        .arg("-lpthread")
        .status()
        .unwrap();
    assert!(status.success(), "compiling {} failed", src.display());
    exe
}
