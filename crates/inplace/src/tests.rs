//! The engine against a model (`BTreeMap`), its parts alone, and crashes.

mod crash;
mod model;
mod parts;
mod snapshots;
mod trace;

use crate::InPlaceEngine;
use engine::{EngineConfig, KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
use std::path::Path;
use std::time::Duration;

/// A test engine: 5 ms group commits, no periodic write-back, a small cache.
pub fn config(dir: &Path) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    if let Some(j) = cfg.journal.as_mut() {
        j.commit_interval = Duration::from_millis(5);
    }
    cfg.checkpoint_interval = None;
    cfg.cache_size = 4 << 20;
    cfg
}

pub fn open(dir: &Path) -> InPlaceEngine {
    InPlaceEngine::open(config(dir)).expect("open")
}

pub fn table_cfg() -> TableConfig {
    TableConfig {
        compressor: engine::Compressor::None,
        ..TableConfig::collection()
    }
}

pub fn put_sync(e: &InPlaceEngine, t: TableId, k: &[u8], v: &[u8]) {
    let mut b = WriteBatch::new();
    b.put(t, k, v);
    e.write(&b, WriteOptions { sync: true }).expect("write");
}
