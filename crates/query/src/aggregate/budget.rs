//! The memory budgets of the stages that hold documents (mongod's 100 MB each), and whether a
//! stage past its budget may spill to disk (`allowDiskUse`).
//!
//! The budgets are server parameters (mongod's names): the server sets them at startup and on
//! `setParameter` ([`set_limit`]), so a test can lower them. `allowDiskUse` is the command's:
//! the server makes it this thread's while the aggregate runs ([`DiskUseScope`]); without one,
//! `allowDiskUseByDefault` applies ([`set_disk_use_default`], true as in mongod 6.0 and later).
//! `$group` spills sorted runs to files under [`spill_dir`] (mongod's `dbPath/_tmp`); the other
//! stages cannot spill and fail past their budget.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bson::{Bson, Document};
use parking_lot::RwLock;

use crate::error::DocError;

/// mongod's default for each budget: 100 MB.
pub const DEFAULT_BYTES: u64 = 100 * 1024 * 1024;

/// Which budget a stage charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// `internalDocumentSourceGroupMaxMemoryBytes`: `$group`'s groups.
    Group,
    /// `internalDocumentSourceLookupCacheSizeBytes`: the foreign documents `$lookup` and
    /// `$unionWith` hold (flashdoc reads the foreign collection once per stage and keeps it).
    LookupCache,
    /// `internalDocumentSourceGraphLookupMaxMemoryBytes`: what `$graphLookup` holds.
    GraphLookup,
    /// `internalQueryMaxBlockingSortMemoryUsageBytes`: `$sort` and the other blocking stages.
    Blocking,
}

static LIMITS: [AtomicU64; 4] = [
    AtomicU64::new(DEFAULT_BYTES),
    AtomicU64::new(DEFAULT_BYTES),
    AtomicU64::new(DEFAULT_BYTES),
    AtomicU64::new(DEFAULT_BYTES),
];
static DISK_USE_DEFAULT: AtomicBool = AtomicBool::new(true);
static SPILL_DIR: RwLock<Option<PathBuf>> = RwLock::new(None);

thread_local! {
    /// The running aggregate's `allowDiskUse`, when it gave one.
    static DISK_USE: Cell<Option<bool>> = const { Cell::new(None) };
}

fn slot(b: Budget) -> &'static AtomicU64 {
    &LIMITS[b as usize]
}

/// Sets a budget (bytes, at least 1: the server refuses 0).
pub fn set_limit(b: Budget, bytes: u64) {
    assert!(
        bytes > 0,
        "a memory budget of 0 bytes would refuse every document"
    );
    slot(b).store(bytes, Ordering::Relaxed);
}

/// A budget in bytes.
pub fn limit(b: Budget) -> usize {
    usize::try_from(slot(b).load(Ordering::Relaxed)).unwrap_or(usize::MAX)
}

/// `allowDiskUseByDefault`.
pub fn set_disk_use_default(allow: bool) {
    DISK_USE_DEFAULT.store(allow, Ordering::Relaxed);
}

/// Where spilled runs go (the server's `dbPath/_tmp`); the system's temporary directory
/// until set.
pub fn set_spill_dir(dir: PathBuf) {
    *SPILL_DIR.write() = Some(dir);
}

pub(super) fn spill_dir() -> PathBuf {
    SPILL_DIR.read().clone().unwrap_or_else(std::env::temp_dir)
}

/// Whether the running aggregate may spill: its `allowDiskUse`, else the default.
pub fn allow_disk_use() -> bool {
    DISK_USE
        .with(Cell::get)
        .unwrap_or_else(|| DISK_USE_DEFAULT.load(Ordering::Relaxed))
}

/// While alive, this thread's aggregate runs with `allowDiskUse` as given (None: the default).
pub struct DiskUseScope {
    outer: Option<bool>,
}

impl DiskUseScope {
    pub fn enter(allow: Option<bool>) -> DiskUseScope {
        DiskUseScope {
            outer: DISK_USE.with(|c| c.replace(allow)),
        }
    }
}

impl Drop for DiskUseScope {
    fn drop(&mut self) {
        DISK_USE.with(|c| c.set(self.outer));
    }
}

/// mongod's error for a stage past its budget that may not spill (292).
pub(super) fn exceeded(stage: &str, b: Budget, why: &str) -> DocError {
    DocError::with_code(
        292,
        "QueryExceededMemoryLimitNoDiskUseAllowed",
        format!(
            "{stage} exceeded its memory limit of {} bytes ({}): {why}",
            limit(b),
            parameter_name(b)
        ),
    )
}

/// The server parameter that sets a budget.
pub fn parameter_name(b: Budget) -> &'static str {
    match b {
        Budget::Group => "internalDocumentSourceGroupMaxMemoryBytes",
        Budget::LookupCache => "internalDocumentSourceLookupCacheSizeBytes",
        Budget::GraphLookup => "internalDocumentSourceGraphLookupMaxMemoryBytes",
        Budget::Blocking => "internalQueryMaxBlockingSortMemoryUsageBytes",
    }
}

/// What a value costs in memory, roughly: its payload plus a fixed overhead per value (the
/// `Bson` enum and the allocation behind a string, array or document).
pub(super) fn value_bytes(v: &Bson) -> usize {
    const VALUE: usize = 24;
    match v {
        Bson::Document(d) => doc_bytes(d),
        Bson::Array(a) => VALUE + a.iter().map(value_bytes).sum::<usize>(),
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => VALUE + s.len(),
        Bson::Binary(b) => VALUE + b.bytes.len(),
        Bson::RegularExpression(r) => VALUE + r.pattern.len() + r.options.len(),
        _ => VALUE,
    }
}

/// [`value_bytes`] of a document: each field's name and value, and the document's own map.
pub(super) fn doc_bytes(d: &Document) -> usize {
    48 + d
        .iter()
        .map(|(k, v)| 32 + k.len() + value_bytes(v))
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_s_disk_use_wins_over_the_default_and_ends_with_its_scope() {
        let before = allow_disk_use();
        {
            let _s = DiskUseScope::enter(Some(!before));
            assert_eq!(allow_disk_use(), !before);
            {
                let _inner = DiskUseScope::enter(None);
                assert_eq!(allow_disk_use(), DISK_USE_DEFAULT.load(Ordering::Relaxed));
            }
            assert_eq!(allow_disk_use(), !before);
        }
        assert_eq!(allow_disk_use(), before);
    }

    #[test]
    fn sizes_grow_with_content() {
        let small = bson::doc! {"a": 1};
        let big = bson::doc! {"a": "x".repeat(1000)};
        assert!(doc_bytes(&big) >= doc_bytes(&small) + 1000);
        assert!(value_bytes(&Bson::Array(vec![Bson::Document(big.clone())])) > doc_bytes(&big));
    }

    #[test]
    #[should_panic(expected = "budget of 0")]
    fn a_zero_budget_is_refused() {
        set_limit(Budget::Group, 0);
    }
}
