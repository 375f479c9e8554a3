//! The disk engine: it composes the rooms behind the [`KvEngine`] interface and owns the write
//! path and the background threads.
//!
//! | part | room |
//! | --- | --- |
//! | `io` | the announced-I/O seam every file operation goes through |
//! | `catalog` | tables by id and name, their files |
//! | `cache` + `evict` | accounting and eviction |
//! | `journal` | the write-ahead log |
//! | `checkpoint` | when checkpoints are due and how one is taken |
//! | `recovery` | open = last checkpoint + journal replay |
//!
//! Background work — eviction down to the cache's target, checkpoints, journal flushes — runs
//! on the engine's threads (`Schedule::Background`), or, under `Schedule::Inline`, in the calling
//! thread at the end of each write or read ([`Inner::inline_duties`]), with the same functions
//! and at the same thresholds.
//!
//! Write path: locate the leaves of a batch, latch them in leaf-id order, append the batch to
//! the journal (a memory copy; the journal's flusher does the I/O) and number it in the same
//! step, apply, unlatch. Commit numbers follow the journal's record order, so a checkpoint —
//! the tables as of one commit number, its cut — is also a journal position: replaying the
//! journal from there over the checkpoint's pages rebuilds exactly the acknowledged state.

use crate::btree::{fetch_range, Table, WritersShared, MAX_KEY_LEN};
use crate::cache::Cache;
use crate::catalog::Catalog;
use crate::checkpoint::{self, Checkpointer, Triggers};
use crate::compact;
use crate::config::{EngineConfig, Schedule, TableConfig};
use crate::cursor::BatchedCursor;
use crate::error::{Error, Result};
use crate::evict::Evictor;
use crate::io::Io;
use crate::journal::record::{self, Record};
use crate::journal::{self, Journal, Lsn, ReplayMode};
use crate::kv::{
    CompactStats, Direction, KvCursor, KvEngine, Reconfigure, Snapshot, TableId, WriteBatch,
    WriteOptions,
};
use crate::leaf::{retired_backoff, Leaf, LeafLatch};
use crate::meta::ProcessLock;
use crate::recovery;
use crate::txn::{TxnSnapshot, Txns, LATEST};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Pages one eviction server round evicts at most before it looks at the cache again.
const EVICT_BATCH: usize = 16;

/// A batch whose pages keep leaving memory while it waits for them is applied with them read
/// under its latches after this many attempts (correct either way; this bounds the retries).
const LOAD_ATTEMPTS: u32 = 4;

#[derive(Default)]
struct Counters {
    batches: AtomicU64,
    ops: AtomicU64,
    forced_splits: AtomicU64,
    app_evictions: AtomicU64,
}

struct Inner {
    cfg: EngineConfig,
    io: Arc<Io>,
    cache: Arc<Cache>,
    txns: Arc<Txns>,
    catalog: Catalog,
    journal: Option<Arc<Journal>>,
    evictor: Evictor,
    checkpointer: Checkpointer,
    /// Writers hold it shared; a checkpoint without a journal holds it exclusively.
    write_gate: RwLock<()>,
    shutdown: AtomicBool,
    closed: AtomicBool,
    wake: Condvar,
    wake_lock: Mutex<()>,
    counters: Counters,
    _lock: ProcessLock,
}

/// What `DiskEngine::salvage_tables` gave up of one table.
#[derive(Clone, Debug)]
pub struct TableSalvage {
    pub table: String,
    pub file: std::path::PathBuf,
    pub lost: Vec<crate::btree::LostLeaf>,
}

/// The on-disk engine. Cloning shares it.
pub struct DiskEngine {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl DiskEngine {
    /// Checkpoints completed so far and how long the last one took (ms): cheap enough to read
    /// many times a second (engine-bench's stall instruments).
    pub fn checkpoint_counters(&self) -> (u64, u64) {
        let s = self.inner.checkpointer.stats();
        (
            s["completed"].as_u64().unwrap_or(0),
            s["last_ms"].as_u64().unwrap_or(0),
        )
    }

    /// Opens (creating if needed) the database at `cfg.db_path`: the last durable checkpoint,
    /// then the journal replayed after it. Damage in the journal that is not a crash's torn
    /// tail fails the open (`Error::Corrupt`, naming `flashdoc repair`), before anything is
    /// checkpointed or removed.
    pub fn open(cfg: EngineConfig) -> Result<DiskEngine> {
        Self::open_recovering(cfg, ReplayMode::Strict).map(|(engine, _)| engine)
    }

    /// `flashdoc repair`: opens as [`DiskEngine::open`] does, but salvages the journal —
    /// every record whose checksum verifies is replayed, damaged extents are skipped — and
    /// checkpoints the result, so the damaged journal files are no longer needed. The outcome
    /// lists what was skipped.
    pub fn open_salvaging(cfg: EngineConfig) -> Result<(DiskEngine, journal::ReplayOutcome)> {
        Self::open_recovering(cfg, ReplayMode::Salvage)
    }

    fn open_recovering(
        cfg: EngineConfig,
        mode: ReplayMode,
    ) -> Result<(DiskEngine, journal::ReplayOutcome)> {
        cfg.validate()?;
        let dir = cfg.db_path.clone();
        if dir.exists() && !dir.is_dir() {
            return Err(Error::Config(format!(
                "dbPath {} exists and is not a directory",
                dir.display()
            )));
        }
        let mut io = Io::new(cfg.observer.clone(), &cfg.flash, cfg.backend.clone())
            .map_err(|e| Error::Config(format!("storage.flash: {e}")))?
            .with_direct_io(cfg.direct_io);
        io.create_dir(&dir)?;
        let lock = ProcessLock::acquire(&dir)?;
        io.detect_hint_path(&dir, std::path::Path::new(crate::io::hint_path::SYSFS))?;
        if cfg.direct_io.any() {
            crate::io::probe_direct_io(&dir).map_err(|e| {
                Error::Config(format!(
                    "direct_io={}: dbPath {}: {e}",
                    cfg.direct_io,
                    dir.display()
                ))
            })?;
        }
        if cfg.schedule == Schedule::Inline {
            io = io.with_written_clock();
        } else {
            // The sweep's reserve shrinks as the file system fills; never under the inline
            // schedule, whose writes must be a function of the calls alone.
            io = io.with_space_of(&dir);
        }
        let io = Arc::new(io);
        let cache = Arc::new(Cache::new(
            cfg.cache_size,
            cfg.eviction_target,
            cfg.eviction_trigger,
            cfg.eviction_dirty_target,
            cfg.eviction_dirty_trigger,
        ));
        let txns = Arc::new(Txns::default());
        let catalog = Catalog::new(&dir, io.clone(), cache.clone(), txns.clone());
        let meta = recovery::open_checkpoint(&dir, &io, &catalog)?;
        let triggers = Triggers {
            interval: cfg.checkpoint_interval,
            log_size: cfg.checkpoint_log_size,
            written_bytes: cfg.checkpoint_written_bytes,
        };
        let next_checkpoint = meta.as_ref().map_or(0, |m| m.checkpoint_id + 1);
        let mut inner = Arc::new(Inner {
            journal: None,
            io,
            cache,
            txns,
            catalog,
            evictor: Evictor::default(),
            checkpointer: Checkpointer::new(next_checkpoint, triggers),
            write_gate: RwLock::new(()),
            shutdown: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
            counters: Counters::default(),
            _lock: lock,
            cfg,
        });
        // Replay applies records through the engine, then the journal opens for appends.
        let jdir = inner
            .cfg
            .journal
            .as_ref()
            .map(|j| j.dir.clone())
            .unwrap_or_else(|| dir.join("journal"));
        let from = meta
            .as_ref()
            .and_then(|m| m.journal_lsn)
            .unwrap_or_default();
        let outcome = recovery::replay(&dir, &jdir, from, mode, |rec| inner.replay_record(rec))?;
        if let Some(jcfg) = inner.cfg.journal.clone() {
            let j = Journal::open_with(jcfg, inner.io.clone(), inner.cfg.schedule)?;
            Arc::get_mut(&mut inner)
                .expect("no other reference during open")
                .journal = Some(j);
        }
        let engine = DiskEngine {
            inner,
            threads: Mutex::new(Vec::new()),
        };
        // Make the replayed state durable now: the next crash must not depend on old files
        // (after a salvage, on the damaged ones).
        if outcome.records > 0 || meta.is_none() || mode == ReplayMode::Salvage {
            engine.inner.checkpoint()?;
        }
        // Only now: a table the replay dropped is still named by the durable metadata until
        // the checkpoint above commits, so removing its file earlier let a power loss leave
        // metadata naming a missing file (the power-loss loop, seed 1 cycle 15).
        recovery::remove_orphans(&dir, &engine.inner.io, &engine.inner.catalog)?;
        match engine.inner.cfg.schedule {
            Schedule::Background => engine.start_threads(),
            Schedule::Inline => engine
                .inner
                .checkpointer
                .arm_written_trigger(&engine.inner.io),
        }
        Ok((engine, outcome))
    }

    fn start_threads(&self) {
        let mut threads = self.threads.lock();
        for i in 0..self.inner.cfg.eviction_threads {
            let weak = Arc::downgrade(&self.inner);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("flashdoc-evict-{i}"))
                    .spawn(move || evict_server(weak))
                    .expect("spawn eviction thread"),
            );
        }
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
        let mut n = 0;
        for t in self.inner.catalog.all() {
            n += t.verify()?;
        }
        Ok(n)
    }

    /// `flashdoc repair`: salvages every table (`Table::salvage`): each leaf whose image fails
    /// its checks is given up, the rest kept; the next checkpoint makes the result durable.
    /// Returns, per table that lost leaves, its name, its file and the leaves lost.
    pub fn salvage_tables(&self) -> Result<Vec<TableSalvage>> {
        self.inner.check_open()?;
        let mut out = Vec::new();
        for t in self.inner.catalog.all() {
            let lost = t.salvage()?;
            if !lost.is_empty() {
                out.push(TableSalvage {
                    table: t.name.clone(),
                    file: t.file.path().to_path_buf(),
                    lost,
                });
            }
        }
        Ok(out)
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
        Ok(())
    }

    fn replay_record(&self, rec: Record) -> Result<()> {
        match rec {
            Record::Batch(batch) => {
                // A batch on a table dropped later in the log is skipped, as the drop will be.
                let mut b = WriteBatch::new();
                {
                    let t = self.catalog.write();
                    b.ops = batch
                        .ops
                        .into_iter()
                        .filter(|o| t.contains(o.table))
                        .collect();
                }
                self.help_evict()?;
                self.apply_batch(&b, false).map(|_| ())
            }
            Record::Create { id, name, config } => {
                let mut tables = self.catalog.write();
                self.catalog.fresh_from(id + 1);
                if !tables.contains(id) {
                    tables.insert(self.catalog.create_table(id, &name, &config)?);
                }
                Ok(())
            }
            Record::Drop { id } => {
                self.drop_table(id);
                Ok(())
            }
        }
    }

    /// Removes table `id`; its file goes once a checkpoint without it is durable.
    fn drop_table(&self, id: TableId) {
        let mut tables = self.catalog.write();
        let dropped = self.catalog.drop_table(&mut tables, id);
        drop(tables);
        // Handed over with the catalog's latch let go, as `KvEngine::drop_table` does.
        if let Some(file) = dropped {
            self.checkpointer.dropped(file);
        }
    }

    /// The write path. Returns the batch's journal position, if journaled.
    fn apply_batch(&self, batch: &WriteBatch, journal: bool) -> Result<Option<Lsn>> {
        let (tables, writing) = self.writable_tables(batch)?;
        let _gate = self.write_gate.read();
        let record = match (journal, &self.journal) {
            (true, Some(_)) => Some(record::encode_batch(batch)),
            _ => None,
        };
        let mut split_candidates: Vec<(Arc<Table>, Arc<Leaf>)> = Vec::new();
        let mut retired = 0;
        let mut attempts = 0;
        let (lsn, csn) = loop {
            attempts += 1;
            let mut leaves: Vec<Arc<Leaf>> = batch
                .ops
                .iter()
                .zip(&tables)
                .map(|(op, t)| t.leaf_for(&op.key))
                .collect();
            let op_leaf: Vec<u64> = leaves.iter().map(|l| l.id()).collect();
            let table_of =
                |leaf: &Leaf| &tables[op_leaf.iter().position(|&id| id == leaf.id()).unwrap()];
            leaves.sort_by_key(|l| l.id());
            leaves.dedup_by_key(|l| l.id());
            let mut guards: Vec<LeafLatch<'_>> = leaves.iter().map(|l| l.latch()).collect();
            if leaves.iter().any(|l| l.is_retired()) {
                drop(guards);
                retired_backoff(retired);
                retired += 1;
                continue;
            }
            // Pages not in memory: load them one at a time without holding the others, unless
            // that keeps failing (then load under the latches; correctness is the same).
            let missing: Vec<usize> = (0..leaves.len())
                .filter(|&i| guards[i].page().is_none())
                .collect();
            if !missing.is_empty() {
                if attempts < LOAD_ATTEMPTS {
                    drop(guards);
                    for i in missing {
                        let leaf = &leaves[i];
                        let mut st = leaf.latch();
                        if !leaf.is_retired() {
                            table_of(leaf).ensure_loaded(&mut st)?;
                        }
                    }
                    continue;
                }
                for i in missing {
                    table_of(&leaves[i]).ensure_loaded(&mut guards[i])?;
                }
            }
            // Numbered under the leaves' latches (per key, numbers follow the order the changes
            // are applied in) and in the journal's record order (a checkpoint's cut at a commit
            // number is then a journal position too).
            let oldest = self.txns.oldest();
            let (lsn, csn) = match (&record, &self.journal) {
                (Some(rec), Some(j)) => {
                    let (lsn, csn) = j.append_then(rec, || self.txns.begin_commit())?;
                    (Some(lsn), csn)
                }
                _ => (None, self.txns.begin_commit()),
            };
            for ((op, t), leaf_id) in batch.ops.iter().zip(&tables).zip(&op_leaf) {
                let i = leaves.binary_search_by_key(leaf_id, |l| l.id()).unwrap();
                let held = writing
                    .iter()
                    .find(|w| t.is_writing(w))
                    .expect("a batch holds the writers latch of every table it writes");
                t.apply(
                    held,
                    &mut guards[i],
                    &op.key,
                    op.value.as_deref(),
                    csn,
                    oldest,
                );
            }
            self.txns.end_commit(csn);
            for (i, g) in guards.iter().enumerate() {
                let t = table_of(&leaves[i]);
                if t.needs_forced_split(g) {
                    split_candidates.push((t.clone(), leaves[i].clone()));
                }
                leaves[i].touch(self.cache.now());
            }
            break (lsn, csn);
        };
        drop(_gate);
        drop(writing);
        // A snapshot reads a prefix of commit numbers: until every batch numbered below this
        // one is applied, this one is invisible to new snapshots. Do not acknowledge it before
        // then, or a read (or a migration's `_transferMods`) that starts after the
        // acknowledgement may not see it. Those batches are applying under their latches
        // without I/O, so the wait is short.
        self.txns.wait_applied(csn);
        for (t, leaf) in split_candidates {
            // A page grown past memory_page_max is reconciled (and split) by the thread that
            // grew it, as WiredTiger forces eviction of large pages. Skip if a checkpoint is writing
            // the tree's internal pages (it holds `structure` exclusively): the next write will
            // try again.
            if let Some(held) = t.try_structure_shared() {
                t.reconcile(&held, &leaf, placement::WriteCause::Split)?;
                self.counters.forced_splits.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters
            .ops
            .fetch_add(batch.ops.len() as u64, Ordering::Relaxed);
        Ok(lsn)
    }

    /// The tables of a batch's ops (in op order), with each distinct table's `writers` gate held
    /// shared (taken in id order): a compaction holds it exclusively while it copies a table,
    /// and a table it replaced is looked up again.
    fn writable_tables(&self, batch: &WriteBatch) -> Result<(Vec<Arc<Table>>, Vec<WritersShared>)> {
        for attempt in 0.. {
            let tables = self.catalog.tables_of(batch.ops.iter().map(|o| o.table))?;
            let mut distinct: Vec<&Arc<Table>> = tables.iter().collect();
            distinct.sort_by_key(|t| t.id);
            distinct.dedup_by_key(|t| t.id);
            let guards: Vec<WritersShared> = distinct.iter().map(|t| t.writers_shared()).collect();
            if !distinct.iter().any(|t| t.is_replaced()) {
                return Ok((tables, guards));
            }
            // A compaction swapped a table in while this batch waited for it.
            drop(guards);
            retired_backoff(attempt);
        }
        unreachable!("retired_backoff bounds the retries")
    }

    /// A point read of the key's value in a snapshot, or of its newest value: the read path.
    fn point_read(
        &self,
        table: TableId,
        key: &[u8],
        txn: Option<&TxnSnapshot>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        // A read goes on when eviction cannot write (a full disk, a failed sync): it may take
        // the cache past its budget by the pages it reads, but reads keep working. The eviction
        // server reports the failure; writers get it at their admission.
        let _ = self.help_evict();
        let t = self.catalog.table(table)?;
        let at = match txn {
            Some(txn) => {
                txn_table_current(&t, txn)?;
                txn.csn()
            }
            None => LATEST,
        };
        let got = t.with_leaf(key, |st| {
            let page = st.page().expect("a loaded leaf is resident");
            page.get(key, at).map(|v| v.bytes().to_vec())
        });
        if let (Ok(_), Some(txn)) = (&got, txn) {
            txn.check()?;
        }
        if self.cfg.schedule == Schedule::Inline {
            // A read brings pages in: the eviction server would take the cache back to its
            // target.
            self.inline_duties();
        }
        got
    }

    /// Application threads evict when the cache is over its trigger, before taking latches.
    fn help_evict(&self) -> Result<()> {
        let rounds = self.evictor.help(&self.catalog, &self.cache)?;
        self.counters
            .app_evictions
            .fetch_add(rounds as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Evicts until the cache is under its target (the eviction server's round).
    fn evict_to_target(&self) -> Result<()> {
        while self.cache.over_target() && !self.shutdown.load(Ordering::Relaxed) {
            if !self
                .evictor
                .evict_some(&self.catalog, &self.cache, EVICT_BATCH)?
            {
                break;
            }
        }
        Ok(())
    }

    /// `Schedule::Inline`: the engine threads' work, done by the caller at the end of a write or
    /// read, outside every latch: eviction to the target, then a checkpoint if its trigger is
    /// due. Failures are handled as the threads handle them: reported, and retried later (a
    /// write failure during eviction reaches writers when they must evict themselves; a
    /// failed checkpoint is retried when its trigger is next due), so the caller's committed
    /// work is not reported as failed.
    fn inline_duties(&self) {
        debug_assert_eq!(self.cfg.schedule, Schedule::Inline);
        if let Err(e) = self.evict_to_target() {
            eprintln!("flashdoc: eviction failed: {e}");
        }
        if self.checkpointer.due(&self.io, self.journal.as_deref()) {
            if let Err(e) = self.checkpoint() {
                eprintln!("flashdoc: checkpoint failed (will retry): {e}");
            }
        }
    }

    fn checkpoint(&self) -> Result<()> {
        self.checkpointer.run(&checkpoint::Parts {
            db_path: &self.cfg.db_path,
            io: &self.io,
            catalog: &self.catalog,
            journal: self.journal.as_deref(),
            txns: &self.txns,
            write_gate: &self.write_gate,
        })
    }

    fn with_compact_parts<R>(&self, f: impl FnOnce(&compact::Parts) -> R) -> R {
        f(&compact::Parts {
            catalog: &self.catalog,
            io: &self.io,
            checkpointer: &self.checkpointer,
            checkpoint: &|| self.checkpoint(),
            help_evict: &|| self.help_evict(),
        })
    }

    /// Wakes the eviction servers (a write found the cache over its target). The checkpoint
    /// server is not woken here: its triggers wake it themselves (the written-bytes meter) or
    /// are looked at on its timer, and waking it on every write over the target cost a context
    /// switch per write (5 % of an update-only run's samples).
    fn wake_evictors(&self) {
        let _g = self.wake_lock.lock();
        self.wake.notify_all();
    }

    /// Wakes every engine thread: the triggers changed, or the engine is closing.
    fn wake_threads(&self) {
        self.wake_evictors();
        self.io.meter().signal();
    }
}

/// Fails if `t` is a compaction's copy made after the snapshot was taken: a copy holds only
/// the newest versions of its moment.
fn txn_table_current(t: &Table, txn: &TxnSnapshot) -> Result<()> {
    if txn.csn() < t.born_at() {
        return Err(Error::SnapshotTooOld(format!(
            "table {} was compacted after the snapshot at commit {}",
            t.name,
            txn.csn()
        )));
    }
    Ok(())
}

fn evict_server(weak: Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.shutdown.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = inner.evict_to_target() {
            // A write failure (disk full): pages stay dirty in memory; writers will see the
            // error when they must evict themselves.
            eprintln!("flashdoc: eviction failed: {e}");
        }
        let mut g = inner.wake_lock.lock();
        if !inner.shutdown.load(Ordering::Relaxed) {
            inner.wake.wait_for(&mut g, Duration::from_millis(10));
        }
    }
}

fn checkpoint_server(weak: Weak<Inner>) {
    if let Some(inner) = weak.upgrade() {
        inner.checkpointer.arm_written_trigger(&inner.io);
    }
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.shutdown.load(Ordering::Relaxed) {
            return;
        }
        if inner.checkpointer.due(&inner.io, inner.journal.as_deref()) {
            if let Err(e) = inner.checkpoint() {
                eprintln!("flashdoc: checkpoint failed (will retry): {e}");
            }
        }
        let io = inner.io.clone();
        drop(inner);
        // The written-bytes trigger wakes this wait the moment it fires; the time and journal
        // triggers are looked at every 50 ms.
        io.meter().wait(Duration::from_millis(50));
    }
}

impl KvEngine for DiskEngine {
    fn create_table(&self, name: &str, cfg: &TableConfig) -> Result<TableId> {
        let inner = &self.inner;
        inner.check_open()?;
        inner.io.writable()?;
        cfg.validate()?;
        {
            let mut tables = inner.catalog.write();
            if tables.id_of(name).is_some() {
                return Err(Error::TableExists(name.into()));
            }
            let id = inner.catalog.next_id();
            let t = inner.catalog.create_table(id, name, cfg)?;
            if let Some(j) = &inner.journal {
                let lsn = j.append(&record::encode_create(id, name, cfg))?;
                tables.insert(t);
                drop(tables);
                j.sync_to(lsn)?;
                return Ok(id);
            }
            tables.insert(t);
        }
        // Without a journal, a checkpoint is the only way to make the table durable.
        inner.checkpoint()?;
        Ok(self.table_id(name).expect("just created"))
    }

    fn drop_table(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        inner.check_open()?;
        inner.io.writable()?;
        let mut tables = inner.catalog.write();
        let id = tables
            .id_of(name)
            .ok_or_else(|| Error::NoSuchTable(name.into()))?;
        let lsn = match &inner.journal {
            Some(j) => Some(j.append(&record::encode_drop(id))?),
            None => None,
        };
        let dropped = inner.catalog.drop_table(&mut tables, id);
        drop(tables);
        // After the catalog's latch is let go: a running checkpoint holds its state until it
        // ends and reads the catalog before that (`owned_files`), so handing the file over
        // under the latch deadlocked the two. Waiting here for the checkpoint to end is what
        // keeps the file until one that began after the drop has committed.
        if let Some(file) = dropped {
            inner.checkpointer.dropped(file);
        }
        match (&inner.journal, lsn) {
            (Some(j), Some(lsn)) => j.sync_to(lsn),
            _ => inner.checkpoint(),
        }
    }

    fn table_id(&self, name: &str) -> Option<TableId> {
        self.inner.catalog.id_of(name)
    }

    fn verify_table(&self, table: TableId) -> Result<u64> {
        self.inner.check_open()?;
        self.inner.catalog.table(table)?.verify()
    }

    fn tables(&self) -> Vec<(String, TableId, TableConfig)> {
        self.inner.catalog.list()
    }

    fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.point_read(table, key, None)
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
        // Admission: after a failed sync nothing more is committed (io::failstop), and a journal
        // stalled on a full disk is retried first under the inline schedule.
        inner.io.writable()?;
        if let Some(j) = &inner.journal {
            j.retry_stalled();
        }
        // Evict before latching, so a full disk fails the write before it applies.
        inner.help_evict()?;
        let lsn = inner.apply_batch(batch, true)?;
        if let (Some(j), Some(lsn)) = (&inner.journal, lsn) {
            j.throttle();
            if opts.sync {
                j.sync_to(lsn)?;
            }
        }
        match inner.cfg.schedule {
            Schedule::Background if inner.cache.over_target() => inner.wake_evictors(),
            Schedule::Background => {}
            Schedule::Inline => inner.inline_duties(),
        }
        Ok(())
    }

    fn snapshot(&self) -> Result<Snapshot> {
        self.inner.check_open()?;
        Ok(Snapshot::new(Arc::new(self.inner.txns.snapshot())))
    }

    fn get_at(&self, snap: &Snapshot, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = snap.state::<Arc<TxnSnapshot>>()?;
        self.inner.point_read(table, key, Some(txn))
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
        let txn = snap.state::<Arc<TxnSnapshot>>()?.clone();
        let t = self.inner.catalog.table(table)?;
        Ok(Box::new(BatchedCursor::new(
            lower,
            upper,
            direction,
            // A compaction may replace the table under an open cursor: each batch reads the
            // table that holds the data now, if its copy is not newer than the snapshot.
            move |lo, hi, reverse, limit, out| {
                let t = t.current();
                txn_table_current(&t, &txn)?;
                fetch_range(&t, lo, hi, reverse, limit, txn.csn(), out)?;
                txn.check()
            },
        )))
    }

    fn compact_table(&self, table: TableId) -> Result<CompactStats> {
        self.inner.check_open()?;
        self.inner
            .with_compact_parts(|p| compact::compact_table(p, table))
    }

    fn estimate_compaction(&self, table: TableId) -> Result<CompactStats> {
        self.inner.check_open()?;
        self.inner
            .with_compact_parts(|p| compact::estimate(p, table))
    }

    fn checkpoint(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.checkpoint()
    }

    fn sync(&self) -> Result<()> {
        // Nothing is reported synced after a failed sync, even with nothing left to sync.
        self.inner.io.writable()?;
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
        let tables = inner.catalog.all();
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
        by_kind.insert("metadata".into(), inner.checkpointer.metadata_bytes());
        let (pages_read, pages_evicted, dirty_pages_written) = c.page_counts();
        let (leaf_changes_to_clean, leaf_changes_to_dirty) = c.leaf_change_counts();
        serde_json::json!({
            "engine": "wiredTiger-style (flashdoc)",
            "cache": {
                "budget_bytes": c.budget(),
                "bytes": c.used(),
                "dirty_bytes": c.dirty_bytes(),
                "internal_bytes": internal,
                "pages_read": pages_read,
                "pages_evicted": pages_evicted,
                "dirty_pages_written": dirty_pages_written,
                "leaf_changes_to_clean": leaf_changes_to_clean,
                "leaf_changes_to_dirty": leaf_changes_to_dirty,
                "app_thread_evictions": ld(&n.app_evictions),
                "forced_splits": ld(&n.forced_splits),
            },
            "checkpoints": inner.checkpointer.stats(),
            "journal": journal,
            "writes": { "batches": ld(&n.batches), "ops": ld(&n.ops) },
            "write_failure": inner.io.write_failure().map(|f| serde_json::json!({
                "operation": f.operation,
                "file": f.path.display().to_string(),
                "errno": f.errno,
                "errno_name": f.errno_name(),
                "message": f.message,
            })),
            "bytes_written_by_file_kind": by_kind,
            "flash": inner.io.flash_stats(),
            "tables": per_table,
        })
    }

    fn end_of_load(&self) {
        self.inner.io.end_of_load();
    }

    fn write_failure(&self) -> Option<crate::io::WriteFailure> {
        self.inner.io.write_failure()
    }
    fn hint_path(&self) -> crate::io::hint_path::HintPath {
        self.inner.io.hint_path()
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
        if inner.cfg.schedule == Schedule::Inline && matches!(r.checkpoint_interval, Some(Some(_)))
        {
            return Err(Error::Config(
                "schedule=inline: a timed checkpoint_interval depends on the host's speed".into(),
            ));
        }
        if [r.checkpoint_log_size, r.checkpoint_written_bytes].contains(&Some(Some(0))) {
            return Err(Error::Config(
                "checkpoint byte triggers must be at least 1 byte".into(),
            ));
        }
        if let Some((target, trigger)) = r.eviction_dirty_pct {
            crate::config::check_eviction_pct(target, trigger)
                .map_err(|why| Error::Config(format!("eviction_dirty_pct: {why}")))?;
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
        if let Some((target, trigger)) = r.eviction_dirty_pct {
            inner.cache.set_dirty_pct(target, trigger);
        }
        inner.checkpointer.set_triggers(
            r.checkpoint_interval,
            r.checkpoint_log_size,
            r.checkpoint_written_bytes,
        );
        if r.checkpoint_written_bytes.is_some() {
            inner.checkpointer.arm_written_trigger(&inner.io);
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
        let res = inner.checkpoint();
        if let Some(j) = &inner.journal {
            j.close()?;
        }
        inner.io.flush();
        res
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
        // The in-place engine depends on this crate, so this crate cannot build it.
        crate::config::EngineKind::Mmapv1 => {
            return Err(Error::Config(
                "storage engine mmapv1: open it with inplace::InPlaceEngine::open".into(),
            ))
        }
    })
}
