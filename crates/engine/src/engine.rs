//! The disk engine: tables, the write path (journal + page edits), eviction, checkpoints and
//! recovery, behind the [`KvEngine`] interface.
//!
//! Write path: locate the leaves of a batch, latch them in leaf-id order, append the batch to
//! the journal (a memory copy; the journal's flusher does the I/O), apply, unlatch. Because a
//! key's leaf is latched while its record gets its LSN, a key's updates reach the pages in
//! journal order, so replaying the journal from a checkpoint's LSN over that checkpoint's pages
//! (which may already hold some later updates) rebuilds exactly the acknowledged state.
//!
//! Checkpoint: note the journal's next LSN, then for each table (holding its `structure`
//! latch) write dirty leaves, internal pages and the root, the extent lists, fdatasync; sync
//! the journal (every batch reflected in a written page is then replayable); commit the
//! metadata by rename; release what the previous checkpoint held; delete old journal files.
//! With the journal off, a checkpoint excludes writers instead, so it is a consistent snapshot.

use crate::block::BlockFile;
use crate::btree::{copy_range, Leaf, Table, MAX_KEY_LEN};
use crate::cache::Cache;
use crate::config::{EngineConfig, TableConfig};
use crate::cursor::BatchedCursor;
use crate::error::{Error, IoContext, Result};
use crate::io::{FileRole, Io};
use crate::journal::record::{self, Record};
use crate::journal::{self, Journal, Lsn};
use crate::kv::{
    Direction, KvCursor, KvEngine, KvPair, Reconfigure, TableId, WriteBatch, WriteOptions,
};
use crate::meta::{self, Metadata, ProcessLock, TableMeta};
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const TABLE_EXT: &str = "fdb";

#[derive(Default)]
struct Tables {
    by_id: HashMap<TableId, Arc<Table>>,
    by_name: BTreeMap<String, TableId>,
}

#[derive(Default)]
struct CheckpointState {
    next_id: u64,
    /// Files of dropped tables: unlinked once a checkpoint without them is durable.
    dropped: Vec<(PathBuf, u32)>,
    /// The metadata file's id in the event trace.
    meta_file: Option<u32>,
}

/// The background checkpoint's triggers (`EngineConfig::checkpoint_*`).
#[derive(Clone, Copy, Debug)]
struct Triggers {
    interval: Option<Duration>,
    log_size: Option<u64>,
    written_bytes: Option<u64>,
}

#[derive(Default)]
struct Counters {
    checkpoints: AtomicU64,
    checkpoint_ms_total: AtomicU64,
    checkpoint_ms_last: AtomicU64,
    checkpoint_failures: AtomicU64,
    metadata_bytes: AtomicU64,
    batches: AtomicU64,
    ops: AtomicU64,
    forced_splits: AtomicU64,
    app_evictions: AtomicU64,
}

struct Inner {
    cfg: EngineConfig,
    io: Arc<Io>,
    cache: Arc<Cache>,
    tables: RwLock<Tables>,
    journal: Option<Arc<Journal>>,
    leaf_ids: Arc<AtomicU64>,
    next_table_id: AtomicU32,
    checkpoint: Mutex<CheckpointState>,
    /// Writers hold it shared; a checkpoint without a journal holds it exclusively.
    write_gate: RwLock<()>,
    /// Eviction candidates, oldest first.
    evict_queue: Mutex<Vec<(Arc<Table>, Arc<Leaf>)>>,
    shutdown: AtomicBool,
    closed: AtomicBool,
    /// Set when a background write failed such that writes can no longer be acknowledged.
    failed: Mutex<Option<String>>,
    wake: Condvar,
    wake_lock: Mutex<()>,
    last_checkpoint_end: Mutex<Instant>,
    journal_bytes_at_checkpoint: AtomicU64,
    /// What starts a checkpoint besides a caller (changed by `reconfigure`).
    triggers: Mutex<Triggers>,
    counters: Counters,
    _lock: ProcessLock,
}

/// The on-disk engine. Cloning shares it.
pub struct DiskEngine {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl DiskEngine {
    /// Opens (creating if needed) the database at `cfg.db_path`: the last durable checkpoint,
    /// then the journal replayed after it.
    pub fn open(cfg: EngineConfig) -> Result<DiskEngine> {
        cfg.validate()?;
        let dir = cfg.db_path.clone();
        if dir.exists() && !dir.is_dir() {
            return Err(Error::Config(format!(
                "dbPath {} exists and is not a directory",
                dir.display()
            )));
        }
        std::fs::create_dir_all(&dir).ctx(|| format!("creating dbPath {}", dir.display()))?;
        let lock = ProcessLock::acquire(&dir)?;
        let io = Arc::new(
            Io::new(cfg.observer.clone(), &cfg.flash, cfg.backend.clone())
                .map_err(|e| Error::Config(format!("storage.flash: {e}")))?,
        );
        let cache = Arc::new(Cache::new(
            cfg.cache_size,
            cfg.eviction_target,
            cfg.eviction_trigger,
            cfg.eviction_dirty_target,
            cfg.eviction_dirty_trigger,
        ));
        let leaf_ids = Arc::new(AtomicU64::new(1));
        let meta = meta::read(&dir)?;
        // A half-written metadata file from a crash mid-commit is not the commit.
        let _ = io.remove(&dir.join(meta::TURTLE_SET), None);

        let mut tables = Tables::default();
        let mut next_table_id = 1;
        let mut ckpt_state = CheckpointState::default();
        let mut replay_from = Lsn::default();
        if let Some(m) = &meta {
            next_table_id = m.next_table_id;
            ckpt_state.next_id = m.checkpoint_id + 1;
            if let Some(l) = m.journal_lsn {
                replay_from = l;
            }
            for t in &m.tables {
                let path = dir.join(&t.file);
                let file = BlockFile::open_checkpoint(
                    &path,
                    file_role(t.id, &t.config),
                    t.config.block_allocation(),
                    &t.checkpoint,
                    io.clone(),
                )?;
                let table = Table::open(
                    t.id,
                    t.name.clone(),
                    t.config.clone(),
                    file,
                    t.checkpoint,
                    cache.clone(),
                    leaf_ids.clone(),
                )?;
                tables.by_name.insert(t.name.clone(), t.id);
                tables.by_id.insert(t.id, Arc::new(table));
            }
        }
        let inner = Arc::new(Inner {
            journal: None,
            io,
            cache,
            tables: RwLock::new(tables),
            leaf_ids,
            next_table_id: AtomicU32::new(next_table_id),
            checkpoint: Mutex::new(ckpt_state),
            write_gate: RwLock::new(()),
            evict_queue: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            failed: Mutex::new(None),
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
            last_checkpoint_end: Mutex::new(Instant::now()),
            journal_bytes_at_checkpoint: AtomicU64::new(0),
            triggers: Mutex::new(Triggers {
                interval: cfg.checkpoint_interval,
                log_size: cfg.checkpoint_log_size,
                written_bytes: cfg.checkpoint_written_bytes,
            }),
            counters: Counters::default(),
            _lock: lock,
            cfg,
        });
        // Replay needs `inner` to apply records, then gets the journal to append to.
        let jdir = inner
            .cfg
            .journal
            .as_ref()
            .map(|j| j.dir.clone())
            .unwrap_or_else(|| dir.join("journal"));
        let outcome = journal::replay(&jdir, replay_from, |_, rec| inner.replay_record(rec))?;
        if let Some(why) = &outcome.torn_tail {
            eprintln!("flashdoc: journal replay stopped at its torn tail: {why}");
        }
        let mut inner = inner;
        if let Some(jcfg) = inner.cfg.journal.clone() {
            let j = Journal::open(jcfg, inner.io.clone())?;
            Arc::get_mut(&mut inner)
                .expect("no other reference during open")
                .journal = Some(j);
        }
        inner.remove_orphans()?;
        let engine = DiskEngine {
            inner,
            threads: Mutex::new(Vec::new()),
        };
        // Make the replayed state durable now: the next crash must not depend on old files.
        if outcome.records > 0 || meta.is_none() {
            engine.inner.checkpoint()?;
        }
        engine.start_threads();
        Ok(engine)
    }

    fn start_threads(&self) {
        let mut threads = self.threads.lock();
        let weak = Arc::downgrade(&self.inner);
        threads.push(
            std::thread::Builder::new()
                .name("flashdoc-evict".into())
                .spawn(move || evict_server(weak))
                .expect("spawn eviction thread"),
        );
        let weak = Arc::downgrade(&self.inner);
        threads.push(
            std::thread::Builder::new()
                .name("flashdoc-checkpoint".into())
                .spawn(move || checkpoint_server(weak))
                .expect("spawn checkpoint thread"),
        );
    }

    /// Reads every block of every table and checks checksums and key order; returns the
    /// number of entries.
    pub fn verify(&self) -> Result<u64> {
        let tables: Vec<_> = self.inner.tables.read().by_id.values().cloned().collect();
        let mut n = 0;
        for t in tables {
            n += t.verify()?;
        }
        Ok(n)
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.cfg.db_path
    }
}

impl Drop for DiskEngine {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed("the engine is closed".into()));
        }
        if let Some(why) = &*self.failed.lock() {
            return Err(Error::Closed(why.clone()));
        }
        Ok(())
    }

    fn table(&self, id: TableId) -> Result<Arc<Table>> {
        self.tables
            .read()
            .by_id
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("id {id}")))
    }

    fn file_name(cfg: &TableConfig, id: u32) -> String {
        format!("{}-{id}.{TABLE_EXT}", cfg.kind.name())
    }

    /// Creates the table's file and registers it (also used by replay).
    fn create_table_inner(&self, id: u32, name: &str, cfg: &TableConfig) -> Result<Arc<Table>> {
        let path = self.cfg.db_path.join(Self::file_name(cfg, id));
        let file = BlockFile::create(
            &path,
            file_role(id, cfg),
            cfg.block_allocation(),
            self.io.clone(),
        )?;
        let t = Arc::new(Table::new(
            id,
            name.to_string(),
            cfg.clone(),
            file,
            self.cache.clone(),
            self.leaf_ids.clone(),
        ));
        Ok(t)
    }

    fn drop_table_inner(&self, tables: &mut Tables, id: TableId) {
        if let Some(t) = tables.by_id.remove(&id) {
            tables.by_name.remove(&t.name);
            t.release_cache();
            self.checkpoint
                .lock()
                .dropped
                .push((t.file.path().to_path_buf(), t.file.id()));
        }
    }

    fn replay_record(&self, rec: &[u8]) -> Result<()> {
        let record = record::decode(rec).map_err(|what| Error::Corrupt {
            file: self.cfg.db_path.join("journal"),
            offset: 0,
            what: format!("journal record: {what}"),
        })?;
        match record {
            Record::Batch(batch) => {
                // A batch on a table dropped later in the log is skipped, as the drop will be.
                let known: Vec<_> = {
                    let t = self.tables.read();
                    batch
                        .ops
                        .iter()
                        .map(|o| t.by_id.contains_key(&o.table))
                        .collect()
                };
                let mut b = WriteBatch::new();
                for (op, ok) in batch.ops.into_iter().zip(known) {
                    if ok {
                        b.ops.push(op);
                    }
                }
                self.help_evict()?;
                self.apply_batch(&b, false).map(|_| ())
            }
            Record::Create { id, name, config } => {
                let mut tables = self.tables.write();
                self.next_table_id.fetch_max(id + 1, Ordering::Relaxed);
                if tables.by_id.contains_key(&id) {
                    return Ok(());
                }
                let t = self.create_table_inner(id, &name, &config)?;
                tables.by_name.insert(name, id);
                tables.by_id.insert(id, t);
                Ok(())
            }
            Record::Drop { id } => {
                let mut tables = self.tables.write();
                self.drop_table_inner(&mut tables, id);
                Ok(())
            }
        }
    }

    /// Removes table files that no table owns (a crash between a drop's checkpoint and the
    /// unlink, or a create whose record never became durable).
    fn remove_orphans(&self) -> Result<()> {
        let owned: std::collections::HashSet<PathBuf> = self
            .tables
            .read()
            .by_id
            .values()
            .map(|t| t.file.path().to_path_buf())
            .collect();
        let rd = std::fs::read_dir(&self.cfg.db_path)
            .ctx(|| format!("listing {}", self.cfg.db_path.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            let is_table = p.extension().is_some_and(|x| x == TABLE_EXT);
            if is_table && !owned.contains(&p) {
                self.io
                    .remove(&p, None)
                    .ctx(|| format!("removing orphan {}", p.display()))?;
            }
        }
        Ok(())
    }

    /// The write path. Returns the batch's journal position, if journaled.
    fn apply_batch(&self, batch: &WriteBatch, journal: bool) -> Result<Option<Lsn>> {
        let _gate = self.write_gate.read();
        let tables: Vec<Arc<Table>> = {
            let t = self.tables.read();
            batch
                .ops
                .iter()
                .map(|o| {
                    t.by_id
                        .get(&o.table)
                        .cloned()
                        .ok_or_else(|| Error::NoSuchTable(format!("id {}", o.table)))
                })
                .collect::<Result<_>>()?
        };
        let record = match (journal, &self.journal) {
            (true, Some(_)) => Some(record::encode_batch(batch)),
            _ => None,
        };
        let mut attempts = 0;
        let mut split_candidates: Vec<(Arc<Table>, Arc<Leaf>)> = Vec::new();
        let lsn = loop {
            attempts += 1;
            let mut leaves: Vec<Arc<Leaf>> = batch
                .ops
                .iter()
                .zip(&tables)
                .map(|(op, t)| t.leaf_for(&op.key))
                .collect();
            let op_leaf: Vec<u64> = leaves.iter().map(|l| l.id).collect();
            leaves.sort_by_key(|l| l.id);
            leaves.dedup_by_key(|l| l.id);
            let mut guards: Vec<MutexGuard<'_, _>> =
                leaves.iter().map(|l| l.state.lock()).collect();
            if leaves.iter().any(|l| l.is_retired()) {
                drop(guards);
                std::thread::yield_now();
                continue;
            }
            // Pages not in memory: load them one at a time without holding the others, unless
            // that keeps failing (then load under the latches; correctness is the same).
            let missing: Vec<usize> = (0..leaves.len())
                .filter(|&i| guards[i].page.is_none())
                .collect();
            if !missing.is_empty() {
                if attempts < 4 {
                    drop(guards);
                    for i in missing {
                        let leaf = &leaves[i];
                        let t = &tables[op_leaf.iter().position(|&id| id == leaf.id).unwrap()];
                        let mut st = leaf.state.lock();
                        if !leaf.is_retired() {
                            t.ensure_loaded(leaf, &mut st)?;
                        }
                    }
                    continue;
                }
                for i in missing {
                    let t = &tables[op_leaf.iter().position(|&id| id == leaves[i].id).unwrap()];
                    t.ensure_loaded(&leaves[i], &mut guards[i])?;
                }
            }
            let lsn = match (&record, &self.journal) {
                (Some(rec), Some(j)) => Some(j.append(rec)?),
                _ => None,
            };
            for ((op, t), leaf_id) in batch.ops.iter().zip(&tables).zip(&op_leaf) {
                let i = leaves.binary_search_by_key(leaf_id, |l| l.id).unwrap();
                t.apply(&mut guards[i], &op.key, op.value.as_deref());
            }
            for (i, g) in guards.iter().enumerate() {
                let t = &tables[op_leaf.iter().position(|&id| id == leaves[i].id).unwrap()];
                if t.needs_forced_split(g) {
                    split_candidates.push((t.clone(), leaves[i].clone()));
                }
                leaves[i].touch(self.cache.now());
            }
            break lsn;
        };
        drop(_gate);
        for (t, leaf) in split_candidates {
            // A page grown past memory_page_max is reconciled (and split) by the thread that
            // grew it, as WiredTiger forces eviction of large pages. Skip if a checkpoint or
            // eviction is busy with the tree: the next write will try again.
            if let Some(_s) = t.structure.try_lock() {
                t.reconcile(&leaf, placement::WriteCause::Split)?;
                self.counters.forced_splits.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters
            .ops
            .fetch_add(batch.ops.len() as u64, Ordering::Relaxed);
        Ok(lsn)
    }

    /// Application threads evict when the cache is over its trigger, before taking latches.
    fn help_evict(&self) -> Result<()> {
        let mut rounds = 0;
        while self.cache.over_trigger() && rounds < 1000 {
            rounds += 1;
            self.counters.app_evictions.fetch_add(1, Ordering::Relaxed);
            if !self.evict_some(8)? {
                break;
            }
        }
        Ok(())
    }

    /// Evicts up to `n` pages, oldest first. Returns false if nothing could be evicted.
    fn evict_some(&self, n: usize) -> Result<bool> {
        let mut evicted = 0;
        let mut tried = 0;
        while evicted < n && tried < n * 8 {
            let next = {
                let mut q = self.evict_queue.lock();
                if q.is_empty() {
                    self.fill_evict_queue(&mut q);
                    if q.is_empty() {
                        break;
                    }
                }
                q.pop()
            };
            let Some((table, leaf)) = next else { break };
            tried += 1;
            if self.evict_one(&table, &leaf)? {
                evicted += 1;
            }
        }
        Ok(evicted > 0)
    }

    fn evict_one(&self, table: &Arc<Table>, leaf: &Arc<Leaf>) -> Result<bool> {
        let dirty = {
            let Some(mut st) = leaf.state.try_lock() else {
                return Ok(false);
            };
            if leaf.is_retired() || st.page.is_none() {
                return Ok(false);
            }
            if !st.dirty {
                // Clean: just drop it.
                let mem = st.mem as i64;
                st.page = None;
                st.mem = 0;
                self.cache.add(-mem);
                self.cache.pages_evicted.fetch_add(1, Ordering::Relaxed);
                return Ok(true);
            }
            true
        };
        debug_assert!(dirty);
        let Some(_s) = table.structure.try_lock() else {
            return Ok(false);
        };
        table.reconcile(leaf, placement::WriteCause::Eviction)?;
        Ok(true)
    }

    /// Collects resident leaves, the least recently used last (popped first). Under dirty
    /// pressure, dirty pages go first.
    fn fill_evict_queue(&self, q: &mut Vec<(Arc<Table>, Arc<Leaf>)>) {
        let tables: Vec<_> = self.tables.read().by_id.values().cloned().collect();
        let dirty_pressure = self.cache.dirty_bytes() > self.cache.dirty_target();
        let mut cands: Vec<(bool, u64, Arc<Table>, Arc<Leaf>)> = Vec::new();
        for t in tables {
            for l in t.leaves() {
                let resident_dirty = l
                    .state
                    .try_lock()
                    .and_then(|s| s.page.as_ref().map(|_| s.dirty));
                if let Some(d) = resident_dirty {
                    cands.push((dirty_pressure && d, l.last_access(), t.clone(), l));
                }
            }
        }
        // Pop from the end: best candidates (dirty under pressure, then oldest) go last.
        cands.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let keep = cands.len().div_ceil(2).max(1).min(cands.len());
        let start = cands.len() - keep;
        q.extend(cands.drain(start..).map(|(_, _, t, l)| (t, l)));
        self.cache.tick.fetch_add(1, Ordering::Relaxed);
    }

    fn checkpoint(&self) -> Result<()> {
        let started = Instant::now();
        // Counted from the begin, as WiredTiger's log_size counts from the checkpoint's LSN:
        // one interval then writes the configured bytes however long the checkpoint takes.
        self.arm_written_trigger();
        let res = self.checkpoint_inner();
        let ms = started.elapsed().as_millis() as u64;
        *self.last_checkpoint_end.lock() = Instant::now();
        if let Some(j) = &self.journal {
            self.journal_bytes_at_checkpoint
                .store(j.stats().bytes_appended, Ordering::Relaxed);
        }
        match &res {
            Ok(()) => {
                self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .checkpoint_ms_last
                    .store(ms, Ordering::Relaxed);
                self.counters
                    .checkpoint_ms_total
                    .fetch_add(ms, Ordering::Relaxed);
            }
            Err(_) => {
                self.counters
                    .checkpoint_failures
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        res
    }

    fn checkpoint_inner(&self) -> Result<()> {
        let mut cs = self.checkpoint.lock();
        let _gate = self.journal.is_none().then(|| self.write_gate.write());
        let id = cs.next_id;
        self.io.checkpoint_begins(id);
        let (lsn, tables) = {
            let t = self.tables.read();
            let lsn = self.journal.as_ref().map(|j| j.next_lsn());
            let mut v: Vec<Arc<Table>> = t.by_id.values().cloned().collect();
            v.sort_by_key(|t| t.id);
            (lsn, v)
        };
        let mut metas = Vec::with_capacity(tables.len());
        for t in &tables {
            let _s = t.structure.lock();
            let ckpt = t.checkpoint()?;
            metas.push(TableMeta {
                id: t.id,
                name: t.name.clone(),
                file: Self::file_name(&t.cfg, t.id),
                config: t.cfg.clone(),
                checkpoint: ckpt,
            });
        }
        // Every batch reflected in a page written above must be replayable after a crash.
        if let Some(j) = &self.journal {
            j.sync_all()?;
        }
        let meta = Metadata {
            format: 1,
            checkpoint_id: id,
            journal_lsn: lsn,
            next_table_id: self.next_table_id.load(Ordering::Relaxed),
            tables: metas,
        };
        let (meta_file, bytes) = meta::commit(&self.io, &self.cfg.db_path, &meta, cs.meta_file)?;
        cs.meta_file = Some(meta_file);
        self.counters
            .metadata_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.io.checkpoint_committed(id);
        cs.next_id += 1;
        // Durable: release what only the previous checkpoint held.
        for t in &tables {
            t.file.resolve();
        }
        if let (Some(j), Some(lsn)) = (&self.journal, lsn) {
            j.remove_before(lsn)?;
        }
        let live: std::collections::HashSet<PathBuf> =
            tables.iter().map(|t| t.file.path().to_path_buf()).collect();
        let (gone, keep): (Vec<_>, Vec<_>) =
            cs.dropped.drain(..).partition(|(p, _)| !live.contains(p));
        cs.dropped = keep;
        for (path, fid) in gone {
            match self.io.remove(&path, Some(fid)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("removing {}", path.display()), e)),
            }
        }
        Ok(())
    }

    /// The next written-bytes checkpoint is due `written_bytes` after now (called as a
    /// checkpoint begins).
    fn arm_written_trigger(&self) {
        let meter = self.io.meter();
        let every = self.triggers.lock().written_bytes;
        meter.arm(every.map(|n| meter.written().saturating_add(n)));
    }

    /// Whether a background checkpoint is due now.
    fn checkpoint_due(&self) -> bool {
        let t = *self.triggers.lock();
        let by_time = t
            .interval
            .is_some_and(|iv| self.last_checkpoint_end.lock().elapsed() >= iv);
        let by_log = match (&self.journal, t.log_size) {
            (Some(j), Some(limit)) => {
                j.stats().bytes_appended - self.journal_bytes_at_checkpoint.load(Ordering::Relaxed)
                    >= limit
            }
            _ => false,
        };
        let by_bytes = t.written_bytes.is_some() && self.io.meter().due();
        by_time || by_log || by_bytes
    }

    fn wake_threads(&self) {
        let _g = self.wake_lock.lock();
        self.wake.notify_all();
        self.io.meter().signal();
    }
}

fn evict_server(weak: Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.shutdown.load(Ordering::Relaxed) {
            return;
        }
        while inner.cache.over_target() && !inner.shutdown.load(Ordering::Relaxed) {
            match inner.evict_some(16) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    // A write failure (disk full): pages stay dirty in memory; writers will see
                    // the error when they must evict themselves.
                    eprintln!("flashdoc: eviction failed: {e}");
                    break;
                }
            }
        }
        let mut g = inner.wake_lock.lock();
        if !inner.shutdown.load(Ordering::Relaxed) {
            inner.wake.wait_for(&mut g, Duration::from_millis(10));
        }
    }
}

fn checkpoint_server(weak: Weak<Inner>) {
    if let Some(inner) = weak.upgrade() {
        inner.arm_written_trigger();
    }
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.shutdown.load(Ordering::Relaxed) {
            return;
        }
        if inner.checkpoint_due() {
            if let Err(e) = inner.checkpoint() {
                eprintln!("flashdoc: checkpoint failed (will retry): {e}");
            }
        }
        let events = inner.io.clone();
        drop(inner);
        // The written-bytes trigger wakes this wait the moment it fires; the time and journal
        // triggers are looked at every 50 ms.
        events.meter().wait(Duration::from_millis(50));
    }
}

impl KvEngine for DiskEngine {
    fn create_table(&self, name: &str, cfg: &TableConfig) -> Result<TableId> {
        let inner = &self.inner;
        inner.check_open()?;
        cfg.validate()?;
        {
            let mut tables = inner.tables.write();
            if tables.by_name.contains_key(name) {
                return Err(Error::TableExists(name.into()));
            }
            let id = inner.next_table_id.fetch_add(1, Ordering::Relaxed);
            let t = inner.create_table_inner(id, name, cfg)?;
            if let Some(j) = &inner.journal {
                let lsn = j.append(&record::encode_create(id, name, cfg))?;
                tables.by_name.insert(name.to_string(), id);
                tables.by_id.insert(id, t);
                drop(tables);
                j.sync_to(lsn)?;
                return Ok(id);
            }
            tables.by_name.insert(name.to_string(), id);
            tables.by_id.insert(id, t);
        }
        // Without a journal, a checkpoint is the only way to make the table durable.
        inner.checkpoint()?;
        Ok(self.table_id(name).expect("just created"))
    }

    fn drop_table(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        inner.check_open()?;
        let mut tables = inner.tables.write();
        let id = *tables
            .by_name
            .get(name)
            .ok_or_else(|| Error::NoSuchTable(name.into()))?;
        if let Some(j) = &inner.journal {
            let lsn = j.append(&record::encode_drop(id))?;
            inner.drop_table_inner(&mut tables, id);
            drop(tables);
            return j.sync_to(lsn);
        }
        inner.drop_table_inner(&mut tables, id);
        drop(tables);
        inner.checkpoint()
    }

    fn table_id(&self, name: &str) -> Option<TableId> {
        self.inner.tables.read().by_name.get(name).copied()
    }

    fn verify_table(&self, table: TableId) -> Result<u64> {
        self.inner.check_open()?;
        let t = self
            .inner
            .tables
            .read()
            .by_id
            .get(&table)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("table id {table}")))?;
        t.verify()
    }

    fn tables(&self) -> Vec<(String, TableId, TableConfig)> {
        let t = self.inner.tables.read();
        t.by_name
            .iter()
            .map(|(n, id)| (n.clone(), *id, t.by_id[id].cfg.clone()))
            .collect()
    }

    fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed("the engine is closed".into()));
        }
        inner.help_evict()?;
        let t = inner.table(table)?;
        t.with_leaf(key, |_, st| {
            st.page
                .as_ref()
                .expect("resident")
                .get(key)
                .map(|v| v.bytes().to_vec())
        })
    }

    fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> Result<()> {
        let inner = &self.inner;
        inner.check_open()?;
        if batch.is_empty() {
            return Ok(());
        }
        if let Some(op) = batch.ops.iter().find(|o| o.key.len() > MAX_KEY_LEN) {
            return Err(Error::KeyTooLarge {
                len: op.key.len(),
                max: MAX_KEY_LEN,
            });
        }
        // Admission: evict before latching, so a full disk fails the write before it applies.
        inner.help_evict()?;
        let lsn = inner.apply_batch(batch, true)?;
        if let (Some(j), Some(lsn)) = (&inner.journal, lsn) {
            j.throttle();
            if opts.sync {
                j.sync_to(lsn)?;
            }
        }
        if inner.cache.over_target() {
            inner.wake_threads();
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
        let t = self.inner.table(table)?;
        Ok(Box::new(BatchedCursor::new(
            lower,
            upper,
            direction,
            move |lo, hi, reverse, limit, out| fetch_range(&t, lo, hi, reverse, limit, out),
        )))
    }

    fn checkpoint(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.checkpoint()
    }

    fn sync(&self) -> Result<()> {
        match &self.inner.journal {
            Some(j) => j.sync_all(),
            None => self.inner.checkpoint(),
        }
    }

    fn stats(&self) -> serde_json::Value {
        let inner = &self.inner;
        let c = &inner.cache;
        let n = &inner.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let tables: Vec<_> = inner.tables.read().by_id.values().cloned().collect();
        let internal: usize = tables.iter().map(|t| t.internal_bytes()).sum();
        let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
        let per_table: Vec<_> = tables
            .iter()
            .map(|t| {
                let (levels, leaves) = t.shape();
                let written = ld(&t.file.stats.bytes_written);
                *by_kind.entry(t.cfg.kind.name().to_string()).or_default() += written;
                serde_json::json!({
                    "name": t.name, "id": t.id, "file": t.file.path().file_name().map(|f| f.to_string_lossy().into_owned()),
                    "levels": levels, "leaves": leaves,
                    "extents": t.file.extent_summary(),
                    "bytes_written": written,
                    "blocks_written": ld(&t.file.stats.blocks_written),
                    "bytes_read": ld(&t.file.stats.bytes_read),
                })
            })
            .collect();
        let journal = inner.journal.as_ref().map(|j| j.stats());
        if let Some(j) = &journal {
            by_kind.insert("journal".into(), j.bytes_written);
        }
        by_kind.insert("metadata".into(), ld(&n.metadata_bytes));
        serde_json::json!({
            "engine": "wiredTiger-style (flashdoc)",
            "cache": {
                "budget_bytes": c.budget(),
                "bytes": c.used(),
                "dirty_bytes": c.dirty_bytes(),
                "internal_bytes": internal,
                "pages_read": ld(&c.pages_read),
                "pages_evicted": ld(&c.pages_evicted),
                "dirty_pages_written": ld(&c.dirty_pages_written),
                "app_thread_evictions": ld(&n.app_evictions),
                "forced_splits": ld(&n.forced_splits),
            },
            "checkpoints": {
                "completed": ld(&n.checkpoints),
                "failed": ld(&n.checkpoint_failures),
                "last_ms": ld(&n.checkpoint_ms_last),
                "total_ms": ld(&n.checkpoint_ms_total),
            },
            "journal": journal,
            "writes": { "batches": ld(&n.batches), "ops": ld(&n.ops) },
            "bytes_written_by_file_kind": by_kind,
            "flash": inner.io.flash_stats(),
            "tables": per_table,
        })
    }

    fn end_of_load(&self) {
        self.inner.io.end_of_load();
    }

    fn settle_background_io(&self) {
        if let Some(j) = &self.inner.journal {
            j.settle();
        }
    }

    fn reconfigure(&self, r: &Reconfigure) -> Result<()> {
        let inner = &self.inner;
        if let Some(bytes) = r.cache_size {
            if bytes < 64 * 1024 {
                return Err(Error::Config(format!(
                    "cache size {bytes} bytes is too small (minimum 64 KiB)"
                )));
            }
        }
        if [r.checkpoint_log_size, r.checkpoint_written_bytes].contains(&Some(Some(0))) {
            return Err(Error::Config(
                "checkpoint byte triggers must be at least 1 byte".into(),
            ));
        }
        if let Some(bytes) = r.journal_file_max {
            let j = inner
                .journal
                .as_ref()
                .ok_or_else(|| Error::Config("journal_file_max: the journal is disabled".into()))?;
            j.set_file_max(bytes)?;
        }
        if let Some(bytes) = r.cache_size {
            inner.cache.resize(bytes);
        }
        {
            let mut t = inner.triggers.lock();
            if let Some(iv) = r.checkpoint_interval {
                t.interval = iv;
            }
            if let Some(n) = r.checkpoint_log_size {
                t.log_size = n;
            }
            if let Some(n) = r.checkpoint_written_bytes {
                t.written_bytes = n;
            }
        }
        if r.checkpoint_written_bytes.is_some() {
            inner.arm_written_trigger();
        }
        inner.wake_threads();
        Ok(())
    }

    fn close(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        inner.shutdown.store(true, Ordering::SeqCst);
        inner.wake_threads();
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
        // A clean close leaves a checkpoint, so the next open replays nothing.
        let res = if inner.failed.lock().is_none() {
            inner.checkpoint()
        } else {
            Ok(())
        };
        if let Some(j) = &inner.journal {
            j.close()?;
        }
        inner.io.flush();
        res
    }
}

/// Copies up to `limit` entries of (lo, hi) starting from the proper end, leaf by leaf.
fn fetch_range(
    t: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
    out: &mut Vec<KvPair>,
) -> Result<()> {
    if reverse {
        let mut pos: Bound<Vec<u8>> = own(hi);
        loop {
            let loc = match &pos {
                Bound::Unbounded => t.locate_last(),
                Bound::Included(k) => t.locate(k),
                Bound::Excluded(k) => t.locate_before(k),
            };
            {
                let mut st = loc.leaf.state.lock();
                if loc.leaf.is_retired() {
                    continue;
                }
                t.ensure_loaded(&loc.leaf, &mut st)?;
                let page = st.page.as_ref().expect("resident");
                copy_range(page, lo, as_ref(&pos), true, limit - out.len(), out);
            }
            if out.len() >= limit {
                return Ok(());
            }
            match loc.lower {
                None => return Ok(()),
                Some(l) => {
                    let below_range = match lo {
                        Bound::Unbounded => false,
                        Bound::Included(a) | Bound::Excluded(a) => a >= l.as_slice(),
                    };
                    if below_range {
                        return Ok(());
                    }
                    pos = Bound::Excluded(l);
                }
            }
        }
    } else {
        let mut pos: Bound<Vec<u8>> = own(lo);
        loop {
            let loc = match &pos {
                Bound::Unbounded => t.locate(&[]),
                Bound::Included(k) | Bound::Excluded(k) => t.locate(k),
            };
            {
                let mut st = loc.leaf.state.lock();
                if loc.leaf.is_retired() {
                    continue;
                }
                t.ensure_loaded(&loc.leaf, &mut st)?;
                let page = st.page.as_ref().expect("resident");
                copy_range(page, as_ref(&pos), hi, false, limit - out.len(), out);
            }
            if out.len() >= limit {
                return Ok(());
            }
            match loc.upper {
                None => return Ok(()),
                Some(u) => {
                    let past_range = match hi {
                        Bound::Unbounded => false,
                        Bound::Included(b) => u.as_slice() > b,
                        Bound::Excluded(b) => u.as_slice() >= b,
                    };
                    if past_range {
                        return Ok(());
                    }
                    pos = Bound::Included(u);
                }
            }
        }
    }
}

fn own(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
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

/// Opens the engine the configuration names.
pub fn open_engine(
    kind: crate::config::EngineKind,
    cfg: EngineConfig,
) -> Result<Arc<dyn KvEngine>> {
    Ok(match kind {
        crate::config::EngineKind::Disk => Arc::new(DiskEngine::open(cfg)?),
        crate::config::EngineKind::InMemory => Arc::new(crate::memory::MemEngine::new()),
    })
}
