//! flashdoc's storage engine: a WiredTiger-style copy-on-write B+tree over an extent block
//! manager, with a cache and eviction, checkpoints, a journal and recovery, behind a pluggable
//! KV interface. See docs/engine.md.
//!
//! Modules follow WiredTiger's rooms (docs/engine.md, "Rooms", maps file → job): `io` (the
//! announced-I/O seam), `block` (extents, block images, the block manager), `page` and `codec`
//! (formats), `leaf` (the in-memory page), `reconcile`, `btree` (tree, splits, scans, verify),
//! `cache` and `evict`, `catalog`, `checkpoint`, `compact`, `recovery`, `journal`, `meta`, `engine` (which
//! composes them), `memory` (the in-memory engine).

pub mod block;
pub mod btree;
pub mod cache;
pub mod catalog;
pub mod checkpoint;
pub mod codec;
pub mod compact;
pub mod config;
pub mod cursor;
pub mod engine;
pub mod error;
pub mod evict;
pub mod flash_mode;
pub mod io;
pub mod journal;
pub mod kv;
pub mod leaf;
pub mod leaf_page;
pub mod memory;
pub mod meta;
pub mod page;
pub mod reconcile;
pub mod recovery;
pub mod settings;
pub mod txn;

pub use config::{
    AllocPolicy, Allocation, Compressor, EngineConfig, EngineKind, Schedule, TableConfig, TableKind,
};
pub use engine::{open_engine, DiskEngine, TableSalvage};
pub use error::{Error, Result};
pub use io::{DirectIo, FlashConfig};
pub use journal::{JournalCompressor, JournalConfig, Lsn};
pub use kv::{
    CompactStats, Direction, KvCursor, KvEngine, KvPair, Reconfigure, Snapshot, TableId,
    WriteBatch, WriteOp, WriteOptions,
};
pub use memory::MemEngine;
pub use settings::{
    flash_mode_defaults, FlashMode, FlashReport, FlashSettings, WiredTigerSettings, SHIPPED_POLICY,
};
