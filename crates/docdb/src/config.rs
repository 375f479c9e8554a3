//! The document layer's configuration: which engine, its settings, and the table templates new
//! collections and indexes are created with (what mongod.conf's
//! `storage.wiredTiger.collectionConfig` / `indexConfig` set). The server's config-file parser
//! fills this in.
#![allow(clippy::result_large_err)]

use engine::{EngineConfig, EngineKind, TableConfig};
use std::path::PathBuf;

#[derive(Clone)]
pub struct DocDbConfig {
    pub engine_kind: EngineKind,
    pub engine: EngineConfig,
    /// Template for every collection table (page sizes, block compressor, prefix compression).
    pub collection_table: TableConfig,
    /// Template for every index table (`id_index` is set per table by the catalog).
    pub index_table: TableConfig,
    /// Accepted from `storage.directoryPerDB` and ignored: all tables live in `dbPath`, named by
    /// the engine (`collection-<id>.fdb`, `index-<id>.fdb`).
    pub directory_per_db: bool,
}

impl DocDbConfig {
    /// MongoDB's defaults on the disk engine.
    pub fn disk(db_path: impl Into<PathBuf>) -> Self {
        DocDbConfig {
            engine_kind: EngineKind::Disk,
            engine: EngineConfig::new(db_path),
            collection_table: TableConfig::collection(),
            index_table: TableConfig::index(),
            directory_per_db: false,
        }
    }

    /// The in-memory engine (`storage.engine: inMemory`); the path is not used.
    pub fn in_memory() -> Self {
        DocDbConfig {
            engine_kind: EngineKind::InMemory,
            ..DocDbConfig::disk("/nonexistent-in-memory")
        }
    }
}
