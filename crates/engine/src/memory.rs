//! The in-memory engine (`storage.engine: inMemory`): the same KV interface, nothing on disk.

use crate::config::TableConfig;
use crate::cursor::{copy_from_map, BatchedCursor};
use crate::error::{Error, Result};
use crate::kv::{
    CompactStats, Direction, KvCursor, KvEngine, KvPair, TableId, WriteBatch, WriteOptions,
};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

type Map = Arc<RwLock<BTreeMap<Vec<u8>, Vec<u8>>>>;

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
    fn scan(
        &self,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> Result<KvCursor> {
        let map = self.map(table)?;
        Ok(Box::new(BatchedCursor::new(
            lower,
            upper,
            direction,
            move |lo, hi, reverse, limit, out: &mut Vec<KvPair>| {
                copy_from_map(&map.read(), lo, hi, reverse, limit, out);
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
