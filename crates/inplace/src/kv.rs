//! The engine's face: `KvEngine` for [`InPlaceEngine`], over the database state (`db`), its
//! compaction (`compact`) and statistics (`stats`), so that those modules name `db` and
//! nothing names them back.

use crate::btree::MAX_KEY_LEN;
use crate::db::{InPlaceEngine, ReadAt};
use crate::loc::max_value_len;
use crate::state::CATALOG;
use engine::cursor::BatchedCursor;
use engine::{
    CompactStats, Compressor, Direction, Error, KvCursor, KvEngine, KvPair, Result, Snapshot,
    TableConfig, TableId, WriteBatch, WriteOptions,
};
use std::ops::Bound;

impl InPlaceEngine {
    /// The bytes of the extents table `table` holds, used or not: collStats' `storageSize`
    /// (and an index's size) as MMAPv1 reported them.
    pub fn table_extent_bytes(&self, table: TableId) -> Result<u64> {
        crate::stats::extent_bytes(&self.inner, table)
    }
}

impl KvEngine for InPlaceEngine {
    fn create_table(&self, name: &str, cfg: &TableConfig) -> Result<TableId> {
        cfg.validate()?;
        if cfg.compressor != Compressor::None {
            return Err(Error::Config(format!(
                "block compression ({}): the mmapv1 engine stores records uncompressed",
                cfg.compressor.name()
            )));
        }
        let inner = &self.inner;
        let (id, seq) = inner.batch(|st, seq, _| {
            if st.table_named(name).is_some() {
                return Err(Error::TableExists(name.into()));
            }
            st.create_table(name, cfg, seq)
        })?;
        inner.after_batch(seq, true)?;
        Ok(id)
    }

    fn drop_table(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        let ((), seq) = inner.batch(|st, seq, _| {
            let id = st
                .table_named(name)
                .ok_or_else(|| Error::NoSuchTable(name.into()))?;
            st.drop_table(id, seq)
        })?;
        inner.after_batch(seq, true)
    }

    fn table_id(&self, name: &str) -> Option<TableId> {
        self.inner.state().table_named(name)
    }

    fn tables(&self) -> Vec<(String, TableId, TableConfig)> {
        let st = self.inner.state();
        let mut v: Vec<_> = st
            .tables
            .iter()
            .filter(|(&id, _)| id != CATALOG)
            .map(|(&id, t)| (t.name.clone(), id, t.cfg.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.check_open()?;
        let mut st = self.inner.state();
        self.inner.user_table(&st, table)?;
        st.get(table, key)
    }

    fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        for op in &batch.ops {
            if op.key.len() > MAX_KEY_LEN {
                return Err(Error::KeyTooLarge {
                    len: op.key.len(),
                    max: MAX_KEY_LEN,
                });
            }
            if op.value.as_ref().is_some_and(|v| v.len() > max_value_len()) {
                return Err(Error::Config(format!(
                    "a value of {} bytes: the mmapv1 engine's records hold at most {}",
                    op.value.as_ref().map_or(0, Vec::len),
                    max_value_len()
                )));
            }
        }
        let inner = &self.inner;
        let ((), seq) = inner.batch(|st, seq, keep| {
            for op in &batch.ops {
                inner.user_table(st, op.table)?;
            }
            batch.ops.iter().try_for_each(|op| st.apply(op, seq, keep))
        })?;
        inner.after_batch(seq, opts.sync)
    }

    fn snapshot(&self) -> Result<Snapshot> {
        self.inner.snapshot()
    }

    fn get_at(&self, snap: &Snapshot, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get_at(snap, table, key)
    }

    fn scan_at(
        &self,
        snap: &Snapshot,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> Result<KvCursor> {
        self.inner.check_open()?;
        let seq = self.inner.snap_seq(snap)?;
        self.inner.user_table(&self.inner.state(), table)?;
        let inner = self.inner.clone();
        let held = snap.clone();
        Ok(Box::new(BatchedCursor::new(
            lower,
            upper,
            direction,
            move |lo, hi, reverse, limit, out: &mut Vec<KvPair>| {
                let _pinned = &held;
                inner.fetch(ReadAt { seq, table }, lo, hi, reverse, limit, out)
            },
        )))
    }

    fn compact_table(&self, table: TableId) -> Result<CompactStats> {
        crate::compact::compact(&self.inner, table)
    }

    fn estimate_compaction(&self, table: TableId) -> Result<CompactStats> {
        crate::compact::estimate(&self.inner, table)
    }

    fn checkpoint(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.checkpoint()
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn stats(&self) -> serde_json::Value {
        crate::stats::stats(&self.inner)
    }

    fn close(&self) -> Result<()> {
        self.shut_down()
    }

    fn write_failure(&self) -> Option<engine::io::WriteFailure> {
        self.inner.io().write_failure()
    }

    fn hint_path(&self) -> engine::io::hint_path::HintPath {
        self.inner.io().hint_path()
    }

    fn end_of_load(&self) {
        self.inner.io().end_of_load();
    }
}
