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
mod doc_codec;
mod exec_stats;
pub mod geo_index;
pub mod index;
pub mod keystring;
pub mod oplog;
pub mod partial;
pub mod planner;
pub mod scope;
mod tail;
pub mod txn;
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
        // A damaged block: the message names it and says how to get past it.
        engine::Error::Checksum { ref file, .. } | engine::Error::Corrupt { ref file, .. } => {
            let dir = db_path_of(file);
            DocError::storage_error(format!(
                "storage engine: {e}; `validate` lists the damage; with the server stopped, \
                 flashdoc repair --dbpath {} keeps what the checksums prove",
                dir.display()
            ))
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

/// The dbPath a damaged file belongs to, the directory `flashdoc repair --dbpath` takes: the
/// nearest directory above the file that holds the engine's lock file (held while the server
/// runs) or its metadata. A table file lives in dbPath itself, a journal file in
/// dbPath/journal, so the file's parent is not always it. The parent if neither is found.
fn db_path_of(file: &std::path::Path) -> &std::path::Path {
    let holds_engine = |d: &std::path::Path| {
        d.join(engine::meta::LOCK).exists() || d.join(engine::meta::TURTLE).exists()
    };
    file.ancestors()
        .skip(1)
        .find(|d| holds_engine(d))
        .or_else(|| file.parent())
        .unwrap_or(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal file's damage names the dbPath, not the journal directory under it; so does a
    /// table file's, in a dbPath that happens to be called `journal`.
    #[test]
    fn the_repair_command_names_the_db_path_for_journal_and_table_files() {
        let root = tempfile::tempdir().unwrap();
        let db_path = root.path().join("journal");
        std::fs::create_dir_all(db_path.join("journal")).unwrap();
        std::fs::write(db_path.join(engine::meta::LOCK), b"").unwrap();
        let repair = |file: std::path::PathBuf| {
            storage_error(engine::Error::Corrupt {
                file,
                offset: 512,
                what: "bad record".into(),
            })
            .to_string()
        };
        let expected = format!("flashdoc repair --dbpath {} ", db_path.display());
        let msg = repair(db_path.join("journal").join("FlashdocLog.0000000001"));
        assert!(msg.contains(&expected), "{msg}");
        let msg = repair(db_path.join("collection-3.fdb"));
        assert!(msg.contains(&expected), "{msg}");
    }

    #[test]
    fn a_damaged_block_names_the_file_the_offset_and_the_repair() {
        let e = storage_error(engine::Error::Checksum {
            file: "/data/db/collection-3.fdb".into(),
            offset: 8192,
            size: 4096,
        });
        let msg = e.to_string();
        assert!(
            msg.contains("/data/db/collection-3.fdb at offset 8192")
                && msg.contains("flashdoc repair --dbpath /data/db "),
            "{msg}"
        );
    }
}
