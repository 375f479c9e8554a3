//! The in-memory engine (`storage.engine: inMemory`): the same KV interface, nothing on disk.
//! Tables are persistent ordered maps (`imbl::OrdMap`, which shares structure between
//! versions), so a snapshot is a copy of every table's map taken under their latches: O(1)
//! per table, and writers after it copy only the nodes they change.

use crate::config::TableConfig;
use crate::cursor::{empty_range, BatchedCursor};
use crate::error::{Error, Result};
use crate::kv::{
    CompactStats, Direction, KvCursor, KvEngine, KvPair, Snapshot, TableId, WriteBatch,
    WriteOptions,
};
use imbl::OrdMap;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

type Entries = OrdMap<Vec<u8>, Vec<u8>>;
type Map = Arc<RwLock<Entries>>;

/// Every table's entries at one moment; a table created later reads as empty.
struct MemSnapshot(HashMap<TableId, Entries>);

impl MemSnapshot {
    fn table(&self, t: TableId) -> Entries {
        self.0.get(&t).cloned().unwrap_or_default()
    }
}

/// Copies up to `limit` entries of (lo, hi) from `map`, in the given direction.
fn copy_from(
    map: &Entries,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
    out: &mut Vec<KvPair>,
) {
    if empty_range(lo, hi) {
        return;
    }
    let it = map
        .range::<_, [u8]>((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        out.extend(it.rev().take(limit));
    } else {
        out.extend(it.take(limit));
    }
}

#[derive(Default)]
pub struct MemEngine {
    tables: RwLock<HashMap<TableId, (String, TableConfig, Map)>>,
    next_id: AtomicU32,
    closed: AtomicBool,
}

impl MemEngine {
    pub fn new() -> Self {
        MemEngine {
            next_id: AtomicU32::new(1),
            ..Default::default()
        }
    }
    fn map(&self, t: TableId) -> Result<Map> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed("closed".into()));
        }
        self.tables
            .read()
            .get(&t)
            .map(|x| x.2.clone())
            .ok_or_else(|| Error::NoSuchTable(format!("id {t}")))
    }
}

impl KvEngine for MemEngine {
    fn create_table(&self, name: &str, cfg: &TableConfig) -> Result<TableId> {
        cfg.validate()?;
        let mut t = self.tables.write();
        if t.values().any(|x| x.0 == name) {
            return Err(Error::TableExists(name.into()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        t.insert(id, (name.to_string(), cfg.clone(), Map::default()));
        Ok(id)
    }
    fn drop_table(&self, name: &str) -> Result<()> {
        let mut t = self.tables.write();
        let id = t
            .iter()
            .find(|(_, x)| x.0 == name)
            .map(|(&id, _)| id)
            .ok_or_else(|| Error::NoSuchTable(name.into()))?;
        t.remove(&id);
        Ok(())
    }
    fn table_id(&self, name: &str) -> Option<TableId> {
        self.tables
            .read()
            .iter()
            .find(|(_, x)| x.0 == name)
            .map(|(&id, _)| id)
    }
    fn tables(&self) -> Vec<(String, TableId, TableConfig)> {
        let mut v: Vec<_> = self
            .tables
            .read()
            .iter()
            .map(|(&id, x)| (x.0.clone(), id, x.1.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
    fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map(table)?.read().get(key).cloned())
    }
    fn write(&self, batch: &WriteBatch, _opts: WriteOptions) -> Result<()> {
        // Latch every table of the batch in id order, then apply: all or nothing is visible.
        let mut ids: Vec<TableId> = batch.ops.iter().map(|o| o.table).collect();
        ids.sort_unstable();
        ids.dedup();
        let maps = ids
            .iter()
            .map(|&t| self.map(t))
            .collect::<Result<Vec<_>>>()?;
        let mut guards: Vec<_> = maps.iter().map(|m| m.write()).collect();
        for op in &batch.ops {
            let g = &mut guards[ids.binary_search(&op.table).unwrap()];
            match &op.value {
                Some(v) => {
                    g.insert(op.key.clone(), v.clone());
                }
                None => {
                    g.remove(&op.key);
                }
            }
        }
        Ok(())
    }
    fn snapshot(&self) -> Result<Snapshot> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed("closed".into()));
        }
        let tables = self.tables.read();
        // Every map latched at once (in id order, as writers latch them): no batch is half in.
        let mut ids: Vec<TableId> = tables.keys().copied().collect();
        ids.sort_unstable();
        let guards: Vec<_> = ids.iter().map(|id| tables[id].2.read()).collect();
        let maps = ids.iter().zip(&guards).map(|(&id, g)| (id, (**g).clone()));
        Ok(Snapshot::new(MemSnapshot(maps.collect())))
    }
    fn get_at(&self, snap: &Snapshot, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.map(table)?;
        Ok(snap.state::<MemSnapshot>()?.table(table).get(key).cloned())
    }
    fn scan_at(
        &self,
        snap: &Snapshot,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> Result<KvCursor> {
        self.map(table)?;
        let map = snap.state::<MemSnapshot>()?.table(table);
        Ok(Box::new(BatchedCursor::new(
            lower,
            upper,
            direction,
            move |lo, hi, reverse, limit, out: &mut Vec<KvPair>| {
                copy_from(&map, lo, hi, reverse, limit, out);
                Ok(())
            },
        )))
    }
    fn compact_table(&self, table: TableId) -> Result<CompactStats> {
        self.map(table)?;
        // A map in memory has no file and no free space inside one: there is nothing to give
        // back, and pretending to rewrite it would report numbers that mean nothing.
        Err(Error::Unsupported(
            "compact: the in-memory engine keeps no files, so it has no free space to return"
                .into(),
        ))
    }
    fn estimate_compaction(&self, table: TableId) -> Result<CompactStats> {
        self.compact_table(table)
    }
    fn checkpoint(&self) -> Result<()> {
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn stats(&self) -> serde_json::Value {
        let t = self.tables.read();
        serde_json::json!({
            "engine": "inMemory",
            "tables": t.len(),
            "entries": t.values().map(|x| x.2.read().len()).sum::<usize>(),
        })
    }
    fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Relaxed);
        Ok(())
    }
}
