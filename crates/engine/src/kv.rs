//! The pluggable KV interface (seed 001 §10.5.1): tables of ordered byte keys → byte values,
//! point reads, range cursors both ways, and atomic write batches across tables.

use crate::config::TableConfig;
use crate::error::{Error, Result};
use std::any::Any;
use std::ops::Bound;
use std::sync::Arc;

pub type TableId = u32;
pub type KvPair = (Vec<u8>, Vec<u8>);
pub type KvCursor = Box<dyn Iterator<Item = Result<KvPair>> + Send>;

/// A consistent view of every table at one moment: reads through it see exactly the write
/// batches applied in full before it was taken, each batch whole. It pins what it reads until
/// dropped (clones share it); an engine may discard a snapshot that pins too much, and its
/// reads then fail with `Error::SnapshotTooOld`.
#[derive(Clone)]
pub struct Snapshot(Arc<dyn Any + Send + Sync>);

impl Snapshot {
    /// Wraps an engine's own snapshot state.
    pub fn new(state: impl Any + Send + Sync) -> Snapshot {
        Snapshot(Arc::new(state))
    }
    /// The engine's own state, if this snapshot is of that engine's kind.
    pub fn state<T: Any>(&self) -> Result<&T> {
        self.0
            .downcast_ref()
            .ok_or_else(|| Error::Config("a snapshot taken from another engine".into()))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOp {
    pub table: TableId,
    pub key: Vec<u8>,
    /// `None` deletes the key.
    pub value: Option<Vec<u8>>,
}

/// Updates that commit together or not at all (a document and its index entries).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub ops: Vec<WriteOp>,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn put(&mut self, table: TableId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(WriteOp {
            table,
            key: key.into(),
            value: Some(value.into()),
        });
    }
    pub fn delete(&mut self, table: TableId, key: impl Into<Vec<u8>>) {
        self.ops.push(WriteOp {
            table,
            key: key.into(),
            value: None,
        });
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Wait until the batch is in the synced journal (MongoDB `j: true`).
    pub sync: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Reverse,
}

/// Settings a running engine can change (WiredTiger's `WT_CONNECTION::reconfigure`). `None`
/// leaves a setting as it is; `Some(None)` turns an optional trigger off.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reconfigure {
    /// Cache budget in bytes (the eviction thresholds keep their percentages).
    pub cache_size: Option<u64>,
    pub checkpoint_interval: Option<Option<std::time::Duration>>,
    pub checkpoint_log_size: Option<Option<u64>>,
    pub checkpoint_written_bytes: Option<Option<u64>>,
    /// Size of journal files created from now on.
    pub journal_file_max: Option<u64>,
    /// Eviction's dirty target and trigger, percent of the cache (WiredTiger's
    /// `eviction_dirty_target` and `eviction_dirty_trigger`).
    pub eviction_dirty_pct: Option<(u8, u8)>,
}

impl Reconfigure {
    pub fn is_empty(&self) -> bool {
        *self == Reconfigure::default()
    }
}

/// What a compaction did to a table's file, in the lab's terms: the bytes the rewrite wrote
/// (every live page once, plus the new file's descriptor, internal pages and extent lists), and
/// the bytes given back to the file system by removing the old file (the space a device with
/// TRIM learns is free).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactStats {
    /// The old file's size.
    pub bytes_before: u64,
    /// The new file's size once it is checkpointed.
    pub bytes_after: u64,
    /// Bytes the rewrite wrote to the new file.
    pub bytes_written: u64,
    /// Bytes of the old file removed after the swap-in checkpoint (its whole size).
    pub bytes_freed: u64,
}

pub trait KvEngine: Send + Sync {
    fn create_table(&self, name: &str, cfg: &TableConfig) -> Result<TableId>;
    fn drop_table(&self, name: &str) -> Result<()>;
    fn table_id(&self, name: &str) -> Option<TableId>;
    /// Every table: (name, id, config), by name.
    fn tables(&self) -> Vec<(String, TableId, TableConfig)>;
    /// The key's newest value.
    fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> Result<()>;
    /// A snapshot of every table now.
    fn snapshot(&self) -> Result<Snapshot>;
    /// The key's value in `snap`.
    fn get_at(&self, snap: &Snapshot, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Entries with keys in (lower, upper) in `snap`, ascending or descending. The cursor
    /// holds the snapshot until it is dropped.
    fn scan_at(
        &self,
        snap: &Snapshot,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> Result<KvCursor>;
    /// Entries with keys in (lower, upper), ascending or descending, in a snapshot taken now.
    fn scan(
        &self,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> Result<KvCursor> {
        self.scan_at(&self.snapshot()?, table, lower, upper, direction)
    }
    /// Every entry of a table, ascending.
    fn scan_all(&self, table: TableId) -> Result<KvCursor> {
        self.scan(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
    }
    /// Rewrites a table into a fresh file — every live entry once, densely, in key order — and
    /// swaps it in at a checkpoint; the old file is removed once that checkpoint is durable
    /// (MongoDB's `compact`). The table's writers wait while it is copied; readers go on.
    fn compact_table(&self, table: TableId) -> Result<CompactStats>;
    /// What `compact_table` would do now, estimated without writing anything: the file's size
    /// and the size of a dense copy (every live entry encoded and compressed as the copy would
    /// be); `bytes_freed` is the difference.
    fn estimate_compaction(&self, table: TableId) -> Result<CompactStats>;
    /// Makes everything written so far durable as a checkpoint.
    fn checkpoint(&self) -> Result<()>;
    /// Waits until everything written so far is in the synced journal.
    fn sync(&self) -> Result<()>;
    /// Statistics for serverStatus / benchmarks.
    fn stats(&self) -> serde_json::Value;
    /// Flushes and releases the database; further calls fail.
    fn close(&self) -> Result<()>;

    /// The failed sync that stopped this engine's writes until a restart (io::failstop), if
    /// one did.
    fn write_failure(&self) -> Option<crate::io::WriteFailure> {
        None
    }
    /// Reads every entry of a table, checking whatever the engine can check (the disk engine
    /// reads every block and verifies checksums, page kinds and key order); returns the number
    /// of entries.
    fn verify_table(&self, table: TableId) -> Result<u64> {
        let mut n = 0;
        for kv in self.scan_all(table)? {
            kv?;
            n += 1;
        }
        Ok(n)
    }
    /// Changes settings of the running engine. Engines that have none of them refuse any
    /// change.
    fn reconfigure(&self, r: &Reconfigure) -> Result<()> {
        if r.is_empty() {
            return Ok(());
        }
        Err(crate::Error::Config(format!(
            "this storage engine cannot be reconfigured ({r:?})"
        )))
    }
    /// The path write-life hints take to the device (`none` for an engine without files).
    fn hint_path(&self) -> crate::io::hint_path::HintPath {
        crate::io::hint_path::HintPath::None
    }
    /// Declares the end of the load phase (the boundary placement policy sizes its regions
    /// from it). Engines without placement ignore it.
    fn end_of_load(&self) {}
    /// Waits until background I/O that the writes so far made due has been issued — the
    /// journal's early flush once its buffer passes the flush threshold — so a single-threaded
    /// simulation that charges each operation the I/O it caused does not depend on when a
    /// background thread gets to run. Engines without background I/O return at once.
    fn settle_background_io(&self) {}

    fn put(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(table, key, value);
        self.write(&b, WriteOptions::default())
    }
    fn delete(&self, table: TableId, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(table, key);
        self.write(&b, WriteOptions::default())
    }
}
