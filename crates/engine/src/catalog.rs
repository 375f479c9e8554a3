//! The table catalog: which tables exist, by id and by name, and their files (WiredTiger keeps
//! this in its metadata B-tree; flashdoc's is in memory and committed by the checkpoint's
//! metadata file, `meta.rs`).

use crate::block::{BlockFile, FileCheckpoint};
use crate::btree::{Table, TreeShared};
use crate::cache::Cache;
use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::io::{FileRole, Io};
use crate::kv::{KvPair, TableId};
use crate::meta::TableMeta;
use crate::txn::Txns;
use parking_lot::{RwLock, RwLockWriteGuard};
use placement::{FileId, WriteCause};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The extension of table files.
pub const TABLE_EXT: &str = "fdb";

#[derive(Default)]
pub struct Tables {
    by_id: HashMap<TableId, Arc<Table>>,
    by_name: BTreeMap<String, TableId>,
}

impl Tables {
    pub fn contains(&self, id: TableId) -> bool {
        self.by_id.contains_key(&id)
    }
    pub fn id_of(&self, name: &str) -> Option<TableId> {
        self.by_name.get(name).copied()
    }
    pub fn insert(&mut self, t: Arc<Table>) {
        self.by_name.insert(t.name.clone(), t.id);
        self.by_id.insert(t.id, t);
    }
}

/// A dropped table's file: unlinked once a checkpoint without it is durable.
pub struct DroppedFile {
    pub path: PathBuf,
    pub id: FileId,
}

pub struct Catalog {
    dir: PathBuf,
    io: Arc<Io>,
    /// What its tables share: cache, commit numbers, leaf ids.
    shared: TreeShared,
    tables: RwLock<Tables>,
    next_table_id: AtomicU32,
}

impl Catalog {
    pub fn new(dir: &Path, io: Arc<Io>, cache: Arc<Cache>, txns: Arc<Txns>) -> Catalog {
        Catalog {
            dir: dir.to_path_buf(),
            io,
            shared: TreeShared {
                cache,
                txns,
                leaf_ids: Arc::new(AtomicU64::new(1)),
            },
            tables: RwLock::new(Tables::default()),
            next_table_id: AtomicU32::new(1),
        }
    }

    /// The file name of table `id`.
    pub fn file_name(cfg: &TableConfig, id: TableId) -> String {
        format!("{}-{id}.{TABLE_EXT}", cfg.kind.name())
    }

    pub fn table(&self, id: TableId) -> Result<Arc<Table>> {
        self.tables
            .read()
            .by_id
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("id {id}")))
    }

    /// The tables of `ids`, in that order.
    pub fn tables_of(&self, ids: impl Iterator<Item = TableId>) -> Result<Vec<Arc<Table>>> {
        let t = self.tables.read();
        ids.map(|id| {
            t.by_id
                .get(&id)
                .cloned()
                .ok_or_else(|| Error::NoSuchTable(format!("id {id}")))
        })
        .collect()
    }

    pub fn id_of(&self, name: &str) -> Option<TableId> {
        self.tables.read().id_of(name)
    }

    /// Every table, by id.
    pub fn all(&self) -> Vec<Arc<Table>> {
        let mut v: Vec<Arc<Table>> = self.tables.read().by_id.values().cloned().collect();
        v.sort_by_key(|t| t.id);
        v
    }

    /// Every table, by id, and what `f` computes from them under the same latch: a create or
    /// drop is wholly before or wholly after both (a checkpoint opens its cut so).
    pub fn all_with<R>(&self, f: impl FnOnce(&[Arc<Table>]) -> R) -> (R, Vec<Arc<Table>>) {
        let t = self.tables.read();
        let mut v: Vec<Arc<Table>> = t.by_id.values().cloned().collect();
        v.sort_by_key(|t| t.id);
        let r = f(&v);
        (r, v)
    }

    /// Every table by name: (name, id, config).
    pub fn list(&self) -> Vec<(String, TableId, TableConfig)> {
        let t = self.tables.read();
        t.by_name
            .iter()
            .map(|(n, id)| (n.clone(), *id, t.by_id[id].cfg.clone()))
            .collect()
    }

    /// The catalog, latched for a create or drop.
    pub fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables.write()
    }

    /// A fresh table id.
    pub fn next_id(&self) -> TableId {
        self.next_table_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Fresh ids start at `next` or later (a table or the metadata used those below).
    pub fn fresh_from(&self, next: TableId) {
        self.next_table_id.fetch_max(next, Ordering::Relaxed);
    }

    /// The next fresh id, without taking it (recorded in the metadata).
    pub fn peek_next_id(&self) -> TableId {
        self.next_table_id.load(Ordering::Relaxed)
    }

    /// Creates table `id`'s file and its empty tree (not yet in the catalog).
    pub fn create_table(&self, id: TableId, name: &str, cfg: &TableConfig) -> Result<Arc<Table>> {
        let path = self.dir.join(Self::file_name(cfg, id));
        let file = BlockFile::create(
            &path,
            file_role(id, cfg),
            cfg.block_allocation(),
            self.io.clone(),
        )?;
        Ok(Arc::new(Table::new(
            id,
            name.to_string(),
            cfg.clone(),
            file,
            self.shared.clone(),
        )))
    }

    /// Opens table `m` at its checkpoint and adds it (recovery).
    pub fn open_table(&self, m: &TableMeta) -> Result<()> {
        let file = BlockFile::open_checkpoint(
            &self.dir.join(&m.file),
            file_role(m.id, &m.config),
            m.config.block_allocation(),
            &m.checkpoint,
            self.io.clone(),
        )?;
        let table = Table::open(
            m.id,
            m.name.clone(),
            m.config.clone(),
            file,
            m.checkpoint,
            self.shared.clone(),
        )?;
        self.tables.write().insert(Arc::new(table));
        self.fresh_from(m.id + 1);
        Ok(())
    }

    /// Removes table `id` from `tables`, releasing its pages; returns its file, to be unlinked
    /// after the next checkpoint.
    pub fn drop_table(&self, tables: &mut Tables, id: TableId) -> Option<DroppedFile> {
        let t = tables.by_id.remove(&id)?;
        tables.by_name.remove(&t.name);
        // Under `structure`, exclusively: an eviction may still be writing one of its leaves.
        t.release_cache(&t.structure_exclusive());
        Some(DroppedFile {
            path: t.file.path().to_path_buf(),
            id: t.file.id(),
        })
    }

    /// The files of every table in the catalog.
    pub fn owned_files(&self) -> HashSet<PathBuf> {
        self.tables
            .read()
            .by_id
            .values()
            .map(|t| t.file.path().to_path_buf())
            .collect()
    }

    /// The file a compaction of `t` writes: the next generation of its file name
    /// (`collection-7.fdb` → `collection-7.1.fdb` → `collection-7.2.fdb`). A file left there by
    /// a compaction that crashed was removed at open (no table owned it).
    pub fn compacted_path(&self, t: &Table) -> PathBuf {
        let stem = Self::file_name(&t.cfg, t.id);
        let stem = stem
            .strip_suffix(&format!(".{TABLE_EXT}"))
            .expect("a table file name");
        let current = t
            .file
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(stem))
            .and_then(|rest| rest.strip_suffix(&format!(".{TABLE_EXT}")))
            .and_then(|g| g.strip_prefix('.'))
            .and_then(|g| g.parse::<u64>().ok())
            .unwrap_or(0);
        self.dir.join(format!("{stem}.{}.{TABLE_EXT}", current + 1))
    }

    /// A copy of `t` in a fresh file at `path`, bulk-loaded from `entries` (in key order); not
    /// in the catalog, and its internal pages not written yet (its checkpoint writes them).
    pub fn bulk_copy(
        &self,
        t: &Table,
        path: &Path,
        entries: impl Iterator<Item = Result<KvPair>>,
        cause: WriteCause,
    ) -> Result<Arc<Table>> {
        let file = BlockFile::create(
            path,
            file_role(t.id, &t.cfg),
            t.cfg.block_allocation(),
            self.io.clone(),
        )?;
        Ok(Arc::new(Table::bulk_load(
            t.id,
            t.name.clone(),
            t.cfg.clone(),
            file,
            self.shared.clone(),
            entries,
            cause,
        )?))
    }

    /// Puts `new` in the catalog in place of `old` (same id and name): from now on writers
    /// find `new`, and cursors on `old` move to it. Returns `old`'s file, to unlink once a
    /// checkpoint without it is durable. Fails if `old` is no longer the table (dropped).
    pub fn replace_table(&self, old: &Arc<Table>, new: Arc<Table>) -> Result<DroppedFile> {
        let mut t = self.tables.write();
        match t.by_id.get(&old.id) {
            Some(cur) if Arc::ptr_eq(cur, old) => {}
            _ => {
                return Err(Error::NoSuchTable(format!(
                    "{} (dropped during compaction)",
                    old.name
                )))
            }
        }
        assert_eq!(
            (new.id, &new.name),
            (old.id, &old.name),
            "a copy replaces its own table"
        );
        t.by_id.insert(new.id, new.clone());
        old.set_successor(new);
        Ok(DroppedFile {
            path: old.file.path().to_path_buf(),
            id: old.file.id(),
        })
    }

    /// What the metadata records of table `t` at checkpoint `ckpt`.
    pub fn meta_of(t: &Table, ckpt: FileCheckpoint) -> TableMeta {
        TableMeta {
            id: t.id,
            name: t.name.clone(),
            file: t
                .file
                .path()
                .file_name()
                .expect("a table file has a name")
                .to_string_lossy()
                .into_owned(),
            config: t.cfg.clone(),
            checkpoint: ckpt,
        }
    }
}

/// How a table's file is reported to the observer.
fn file_role(id: TableId, cfg: &TableConfig) -> FileRole {
    FileRole {
        kind: cfg.kind.file_kind(),
        table: id,
        id_index: cfg.id_index,
    }
}
