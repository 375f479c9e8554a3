//! Compiles the shim's C part (the variadic `open`/`openat`/`fcntl` family, which stable Rust
//! cannot define) and exports its symbols from the cdylib.
//!
//! rustc gives a cdylib a version script that exports only Rust's `#[no_mangle]` items and
//! makes every other symbol local, so the C interposers would be linked but invisible to the
//! dynamic linker. A second version script naming them (the linker merges the two) exports them.

use std::path::PathBuf;

/// Every symbol `src/variadic.c` defines for the dynamic linker.
const C_EXPORTS: &[&str] = &[
    "open",
    "open64",
    "openat",
    "openat64",
    "__open_2",
    "__open64_2",
    "__openat_2",
    "__openat64_2",
    "fcntl",
    "fcntl64",
];

fn main() {
    println!("cargo:rerun-if-changed=src/variadic.c");
    cc::Build::new()
        .file("src/variadic.c")
        .flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .warnings_into_errors(true)
        .compile("flashdoc_shim_c");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let map = out.join("c_exports.map");
    let body: String = C_EXPORTS.iter().map(|s| format!("    {s};\n")).collect();
    std::fs::write(&map, format!("{{\n  global:\n{body}}};\n")).expect("write the version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
}
