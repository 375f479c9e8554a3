//! Checkpoints (WiredTiger `txn_ckpt.c`, `block_ckpt.c`): when one is due, and how one is
//! taken.
//!
//! A checkpoint is a consistent cut: every table as of one commit number, the cut, which is
//! also a journal position (commit numbers follow the journal's record order, `engine.rs`).
//! Writers, readers and eviction go on while it runs.
//!
//! Order: at one point of the journal's record order, note the next LSN and open the cut at
//! the last commit number (`Txns::begin_cut`: the versions it reads are kept) on every table;
//! wait for the batches at or below the cut to be applied. Per table, write every leaf whose
//! image lacks a version at or below the cut, as the cut sees it, each under its own short hold
//! of the table's `structure` latch; while the cut is open on a table every page of it is
//! written that way, so versions newer than the cut stay in memory (the page stays dirty and
//! is not evicted). Then, under `structure`, write the internal pages bottom-up and the root
//! and the file's extent lists (a table whose images did not change keeps its last
//! checkpoint), and close the cut on the table; fdatasync the file once `structure` is let go,
//! so eviction is not held up by the sync. Close the cut; sync the journal; commit the
//! metadata by rename (the commit point); then resolve (what only the previous checkpoint held
//! becomes reusable), remove journal files wholly before the LSN and unlink dropped tables'
//! files. Recovery replays the journal from the LSN: exactly the batches above the cut. With
//! the journal off, a checkpoint excludes writers (`write_gate`).

use crate::block::FileCheckpoint;
use crate::btree::Table;
use crate::catalog::{Catalog, DroppedFile};
use crate::error::{Error, Result};
use crate::io::Io;
use crate::journal::Journal;
use crate::meta::{self, Metadata};
use crate::txn::Txns;
use parking_lot::{Mutex, RwLock};
use placement::{FileId, WriteCause};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What starts a checkpoint besides a caller (`EngineConfig::checkpoint_*`; changed by
/// `reconfigure`).
#[derive(Clone, Copy, Debug)]
pub struct Triggers {
    pub interval: Option<Duration>,
    pub log_size: Option<u64>,
    pub written_bytes: Option<u64>,
}

/// What a checkpoint needs of the engine.
pub struct Parts<'a> {
    pub db_path: &'a Path,
    pub io: &'a Io,
    pub catalog: &'a Catalog,
    pub journal: Option<&'a Journal>,
    pub txns: &'a Txns,
    /// Writers hold it shared; a checkpoint without a journal holds it exclusively.
    pub write_gate: &'a RwLock<()>,
}

/// Serialized by its own mutex: one checkpoint at a time.
struct State {
    next_id: u64,
    /// Files of dropped tables: unlinked once a checkpoint without them is durable.
    dropped: Vec<DroppedFile>,
    /// The metadata file's trace id.
    meta_file: Option<FileId>,
}

#[derive(Default)]
struct Counters {
    completed: AtomicU64,
    failed: AtomicU64,
    ms_total: AtomicU64,
    ms_last: AtomicU64,
    metadata_bytes: AtomicU64,
}

pub struct Checkpointer {
    state: Mutex<State>,
    triggers: Mutex<Triggers>,
    last_end: Mutex<Instant>,
    journal_bytes_at_last: AtomicU64,
    counters: Counters,
}

impl Checkpointer {
    /// `next_id`: the id the next checkpoint gets (one past the metadata's).
    pub fn new(next_id: u64, triggers: Triggers) -> Checkpointer {
        Checkpointer {
            state: Mutex::new(State {
                next_id,
                dropped: Vec::new(),
                meta_file: None,
            }),
            triggers: Mutex::new(triggers),
            last_end: Mutex::new(Instant::now()),
            journal_bytes_at_last: AtomicU64::new(0),
            counters: Counters::default(),
        }
    }

    /// A dropped table's file, to unlink after the next checkpoint.
    pub fn dropped(&self, file: DroppedFile) {
        self.state.lock().dropped.push(file);
    }

    /// Takes a checkpoint and counts it.
    pub fn run(&self, p: &Parts) -> Result<()> {
        let started = Instant::now();
        // Counted from the begin, as WiredTiger's log_size counts from the checkpoint's LSN:
        // one interval then writes the configured bytes however long the checkpoint takes.
        self.arm_written_trigger(p.io);
        if let Some(j) = p.journal {
            self.journal_bytes_at_last
                .store(j.stats().bytes_appended, Ordering::Relaxed);
        }
        let res = self.take(p);
        let ms = started.elapsed().as_millis() as u64;
        *self.last_end.lock() = Instant::now();
        let c = &self.counters;
        match &res {
            Ok(()) => {
                c.completed.fetch_add(1, Ordering::Relaxed);
                c.ms_last.store(ms, Ordering::Relaxed);
                c.ms_total.fetch_add(ms, Ordering::Relaxed);
            }
            Err(_) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        res
    }

    fn take(&self, p: &Parts) -> Result<()> {
        // After a failed sync no checkpoint may claim durability (io::failstop); the previous
        // one stays the last durable state, with the journal after it.
        p.io.writable()?;
        let mut cs = self.state.lock();
        let _gate = p.journal.is_none().then(|| p.write_gate.write());
        let id = cs.next_id;
        p.io.checkpoint_begins(id);
        let ((lsn, cut), tables) = p.catalog.all_with(|tables| {
            let open = |lsn| {
                let cut = p.txns.begin_cut();
                for t in tables {
                    t.open_cut(cut);
                }
                (lsn, cut)
            };
            match p.journal {
                Some(j) => j.at_next_lsn(|lsn| open(Some(lsn))),
                None => open(None),
            }
        });
        let open_cut = OpenCut {
            txns: p.txns,
            tables: &tables,
        };
        p.txns.wait_applied(cut);
        let mut metas = Vec::with_capacity(tables.len());
        for t in &tables {
            metas.push(Catalog::meta_of(t, checkpoint_table(t)?));
        }
        drop(open_cut);
        // Every batch reflected in a page written above must be replayable after a crash.
        if let Some(j) = p.journal {
            j.sync_all()?;
        }
        let meta = Metadata {
            format: 1,
            checkpoint_id: id,
            journal_lsn: lsn,
            next_table_id: p.catalog.peek_next_id(),
            tables: metas,
        };
        let (meta_file, bytes) = meta::commit(p.io, p.db_path, &meta, cs.meta_file)?;
        cs.meta_file = Some(meta_file);
        self.counters
            .metadata_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        p.io.checkpoint_committed(id);
        cs.next_id += 1;
        // Durable: release what only the previous checkpoint held.
        for t in &tables {
            t.file.resolve();
        }
        if let (Some(j), Some(lsn)) = (p.journal, lsn) {
            j.remove_before(lsn)?;
        }
        let live = p.catalog.owned_files();
        let (gone, keep): (Vec<_>, Vec<_>) =
            cs.dropped.drain(..).partition(|d| !live.contains(&d.path));
        cs.dropped = keep;
        for d in gone {
            match p.io.remove(&d.path, Some(d.id)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("removing {}", d.path.display()), e)),
            }
        }
        Ok(())
    }

    /// The next written-bytes checkpoint is due `written_bytes` after now (called as a
    /// checkpoint begins).
    pub fn arm_written_trigger(&self, io: &Io) {
        let meter = io.meter();
        let every = self.triggers.lock().written_bytes;
        meter.arm(every.map(|n| meter.written().saturating_add(n)));
    }

    /// Whether a background checkpoint is due now.
    pub fn due(&self, io: &Io, journal: Option<&Journal>) -> bool {
        let t = *self.triggers.lock();
        let by_time = t
            .interval
            .is_some_and(|iv| self.last_end.lock().elapsed() >= iv);
        let by_log = match (journal, t.log_size) {
            (Some(j), Some(limit)) => {
                j.stats().bytes_appended - self.journal_bytes_at_last.load(Ordering::Relaxed)
                    >= limit
            }
            _ => false,
        };
        let by_bytes = t.written_bytes.is_some() && io.meter().due();
        by_time || by_log || by_bytes
    }

    /// Changes the triggers (`None` fields stay).
    pub fn set_triggers(
        &self,
        interval: Option<Option<Duration>>,
        log_size: Option<Option<u64>>,
        written_bytes: Option<Option<u64>>,
    ) {
        let mut t = self.triggers.lock();
        if let Some(iv) = interval {
            t.interval = iv;
        }
        if let Some(n) = log_size {
            t.log_size = n;
        }
        if let Some(n) = written_bytes {
            t.written_bytes = n;
        }
    }

    /// Counters for statistics.
    pub fn stats(&self) -> serde_json::Value {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "completed": l(&c.completed),
            "failed": l(&c.failed),
            "last_ms": l(&c.ms_last),
            "total_ms": l(&c.ms_total),
            // The journal's bytes appended when the last checkpoint began.
            "journal_bytes_at_last_begin": l(&self.journal_bytes_at_last),
        })
    }

    /// Bytes of metadata written so far.
    pub fn metadata_bytes(&self) -> u64 {
        self.counters.metadata_bytes.load(Ordering::Relaxed)
    }
}

/// The checkpoint's open cut: closed on every table, and pinning nothing any more, when the
/// checkpoint is done or fails.
struct OpenCut<'a> {
    txns: &'a Txns,
    tables: &'a [std::sync::Arc<Table>],
}

impl Drop for OpenCut<'_> {
    fn drop(&mut self) {
        for t in self.tables {
            t.close_cut(&t.structure_exclusive());
        }
        self.txns.end_cut();
    }
}

/// One table's part of a checkpoint, at the commit number its pages are written at
/// (`Table::write_at`: the checkpoint's cut, or the newest versions for a compaction's copy):
/// the leaves whose images lack a version at or below it, then the internal pages bottom-up
/// and the root (first-fit), then the file's extent lists, and, once the table's `structure`
/// latch is let go, an fdatasync. A table whose images did not change since its last
/// checkpoint keeps it.
///
/// The leaves are written one `structure` hold each, not under one hold for the whole pass, so
/// eviction and forced splits of the table interleave with the pass. Every page written while
/// the cut is open holds the cut's versions, whoever writes it, and a page read in meanwhile
/// holds nothing newer (a page with newer versions is dirty and stays in memory), so when the
/// tree's shape and the extent lists are written, under one hold, every image they name is the
/// cut's.
pub fn checkpoint_table(t: &Table) -> Result<FileCheckpoint> {
    let at = t.write_at();
    for leaf in t.leaves() {
        let unwritten = {
            let st = leaf.latch();
            st.is_dirty() && st.page().is_some_and(|p| p.unwritten_at(at))
        };
        if unwritten {
            t.reconcile(&t.structure_shared(), &leaf, WriteCause::Checkpoint)?;
        }
    }
    let written = {
        let held = t.structure_exclusive();
        // Only a leaf never written (a new table's first) has no image to name yet.
        for leaf in t.leaves() {
            if leaf.latch().addr().is_none() {
                t.reconcile(&held, &leaf, WriteCause::Checkpoint)?;
            }
        }
        let written = match t.write_internal_pages(&held)? {
            None => None,
            Some(root) => Some(t.file.checkpoint(root)?),
        };
        // Written: the table's pages may hold newer versions again.
        t.close_cut(&held);
        written
    };
    // Synced outside the hold, so eviction goes on during the fdatasync (`UnsyncedCheckpoint`).
    let c = match written {
        None => t
            .last_checkpoint()
            .expect("an unchanged table has a checkpoint"),
        Some(unsynced) => unsynced.sync(&t.file)?,
    };
    t.set_last_checkpoint(c);
    Ok(c)
}
