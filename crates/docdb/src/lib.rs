//! flashdoc's document layer: catalog, collections, `_id` and secondary indexes, the planner
//! and cursors, over the engine's KV interface (docs/docdb.md). The query language itself
//! (matcher, updates, projection, sort, expressions, aggregation) is the `query` crate; its
//! error and interrupt types are re-exported here because every `DocDb` call takes or returns
//! them.
pub mod catalog;
pub mod collection;
pub mod config;
pub mod cursor;
pub mod db;
mod exec_stats;
pub mod geo_index;
pub mod index;
pub mod keystring;
pub mod partial;
pub mod planner;
pub mod scope;
pub mod validation;
pub use config::{DocDbConfig, StorageSettings};
pub use cursor::DocCursor;
pub use db::{
    AggregateOpts, CollectionInfo, CollectionKind, CompactOpts, CreateIndexesOutcome, CurrentOps,
    DatabaseInfo, DeleteStatement, DocDb, FindAndModify, FindAndModifyOutcome, FindQuery,
    UpdateStatement, WriteError, WriteOpts, WriteOutcome,
};
pub use query::{hash, DocError, DocResult, Interrupt};

/// An engine failure as the command error clients see. It lives here, not as a `From` in
/// `query`, because `query` knows nothing of the engine.
pub fn storage_error(e: engine::Error) -> DocError {
    match e {
        // mongod's code for a read whose snapshot history is gone.
        engine::Error::SnapshotTooOld(what) => {
            DocError::with_code(239, "SnapshotTooOld", format!("storage engine: {what}"))
        }
        // mongod's code for a full disk: recoverable, the write may be retried once space is
        // freed. A sync that failed with ENOSPC is not this (it is `WriteFailed`).
        e if e.is_disk_full() => DocError::with_code(
            DocError::OUT_OF_DISK_SPACE,
            "OutOfDiskSpace",
            format!("storage engine: {e}"),
        ),
        // mongod fasserts on a failed fsync; flashdoc refuses writes until a restart instead
        // (docs/journal.md, "fsync failure and full disk"). Code 8, UnknownError, the code
        // mongod gives a storage failure it has no name for: drivers do not retry it, so a
        // client does not loop; the message names the file, the operation and the errno.
        e @ engine::Error::WriteFailed(_) => DocError::with_code(
            DocError::WRITES_REFUSED,
            "UnknownError",
            format!("storage engine: {e}"),
        ),
        e => DocError::storage_error(format!("storage engine: {e}")),
    }
}
