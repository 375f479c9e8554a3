//! `compact`: each of a collection's tables — the collection's and each index's — rewritten by
//! the engine's compaction (a fresh, dense file swapped in at a checkpoint; engine
//! `compact.rs`) when that would free at least `freeSpaceTargetMB`, as WiredTiger applies its
//! `free_space_target` to each file.

use super::views::not_on_view;
use super::DocDb;
use crate::catalog;
use crate::storage_error;
use bson::{doc, Document};
use engine::TableId;
use query::error::{DocError, DocResult};

/// mongod's default `freeSpaceTargetMB`.
pub const DEFAULT_FREE_SPACE_TARGET_MB: u64 = 20;

/// What `compact` was asked to do.
#[derive(Clone, Copy, Debug)]
pub struct CompactOpts {
    /// Only estimate (`dryRun`, MongoDB 8.0).
    pub dry_run: bool,
    /// A table is rewritten only if that frees at least this many bytes.
    pub free_space_target: u64,
}

impl Default for CompactOpts {
    fn default() -> Self {
        CompactOpts {
            dry_run: false,
            free_space_target: DEFAULT_FREE_SPACE_TARGET_MB << 20,
        }
    }
}

impl DocDb {
    /// Compacts collection `coll` and its indexes. The reply is mongod's (`bytesFreed`: how
    /// much smaller the files are; `estimatedBytesFreed` for a dry run), plus, under
    /// `flashdoc`, what it did to the device: the bytes the rewrite wrote and the bytes of the
    /// old files removed (trimmed on a device with TRIM).
    pub fn compact(&self, db: &str, coll: &str, opts: CompactOpts) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        let ns = catalog::ns(db, coll);
        if self.views.read().contains_key(&ns) {
            return Err(not_on_view(&ns));
        }
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("collection does not exist: {ns}"))
        })?;
        // Shared: writers go on (the engine holds each table's writers only while it copies
        // that table); index builds and drops, and dropping the collection, wait.
        let st = c.state.read();
        let tables: Vec<TableId> = std::iter::once(c.table)
            .chain(st.indexes.iter().map(|i| i.table))
            .collect();
        let (mut estimated, mut freed, mut written, mut trimmed, mut rewritten) =
            (0u64, 0u64, 0u64, 0u64, 0i32);
        for t in tables {
            let est = self.engine.estimate_compaction(t).map_err(compact_error)?;
            if est.bytes_freed < opts.free_space_target {
                continue;
            }
            if opts.dry_run {
                estimated += est.bytes_freed;
                continue;
            }
            let s = self.engine.compact_table(t).map_err(compact_error)?;
            freed += s.bytes_before.saturating_sub(s.bytes_after);
            written += s.bytes_written;
            trimmed += s.bytes_freed;
            rewritten += 1;
        }
        if opts.dry_run {
            return Ok(doc! {"estimatedBytesFreed": estimated as i64});
        }
        Ok(doc! {
            "bytesFreed": freed as i64,
            "flashdoc": {
                "tablesRewritten": rewritten,
                "bytesWritten": written as i64,
                "bytesTrimmed": trimmed as i64,
            },
        })
    }
}

/// An engine that keeps no files (in-memory) cannot compact: mongod's CommandNotSupported.
fn compact_error(e: engine::Error) -> DocError {
    match e {
        engine::Error::Unsupported(what) => DocError::with_code(115, "CommandNotSupported", what),
        e => storage_error(e),
    }
}
