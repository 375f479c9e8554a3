//! Compaction (MongoDB's `compact`): a table rewritten into a fresh file and swapped in at a
//! checkpoint. WiredTiger's `WT_SESSION::compact` instead moves blocks from the end of the file
//! into free space nearer its start and truncates; a rewrite was chosen here because it is one
//! sequential pass of the live data (each page written once, in key order, densely) and the
//! old file's space goes back whole, as one file removal — on flash, one sequential write
//! stream and one large trim instead of scattered page moves.
//!
//! Order, and why a crash at any point leaves the old table or the new one, never a mix:
//!
//! 1. take the table's `writers` gate exclusively: its writers wait (readers go on reading the
//!    old tree), so the copy sees every acknowledged write and none lands after it was read;
//! 2. bulk-load a copy into `<kind>-<id>.<generation>.fdb` and checkpoint that file (its pages,
//!    extent lists, fdatasync). Nothing refers to it yet: a crash leaves an orphan file that
//!    open removes;
//! 3. put the copy in the catalog in place of the old table (same id and name) and let the
//!    writers go: their batches now reach the copy, and their journal records name the table
//!    id, so replay applies them to whichever file the metadata names;
//! 4. a checkpoint commits metadata naming the new file. Before that commit the durable
//!    metadata names the old file, which still holds everything up to the copy (and the
//!    journal everything after); after it, the new file. The old file is unlinked only after
//!    the commit (a crash in between leaves it an orphan, removed at open) — announced as a
//!    file removal, which is how the lab's TRIM batcher and device model learn the space is
//!    free, as for a dropped table.

use crate::btree::{bulk_load_size, fetch_range, Table, WritersExclusive};
use crate::catalog::Catalog;
use crate::checkpoint::{checkpoint_table, Checkpointer};
use crate::cursor::BatchedCursor;
use crate::error::{Error, Result};
use crate::io::Io;
use crate::kv::{CompactStats, Direction, TableId};
use crate::txn::LATEST;
use placement::WriteCause;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How often (in entries copied) the copy helps eviction: reading the old table fills the
/// cache like any scan.
const EVICT_EVERY: u64 = 1024;

/// A compaction that keeps finding its table replaced by another compaction gives up after this
/// many tries (each try means a whole compaction finished meanwhile).
const MAX_TRIES: u32 = 16;

/// What a compaction needs of the engine.
pub struct Parts<'a> {
    pub catalog: &'a Catalog,
    pub io: &'a Io,
    pub checkpointer: &'a Checkpointer,
    /// Takes a checkpoint (the engine's, with its journal and gates).
    pub checkpoint: &'a dyn Fn() -> Result<()>,
    /// Evicts when the cache is over its trigger.
    pub help_evict: &'a (dyn Fn() -> Result<()> + Sync),
}

/// Compacts table `id` (see the module's comment for the order).
pub fn compact_table(p: &Parts, id: TableId) -> Result<CompactStats> {
    for _ in 0..MAX_TRIES {
        let old = p.catalog.table(id)?;
        let writers = old.writers_exclusive();
        if old.is_replaced() {
            // Another compaction swapped this table while we waited: compact its copy.
            continue;
        }
        let path = p.catalog.compacted_path(&old);
        let copied = copy(p, &old, &writers, &path).and_then(|new| {
            // The source's writers wait, so every batch on it up to now is in the copy.
            new.set_born_at(old.txns.last());
            let dropped = p.catalog.replace_table(&old, new.clone())?;
            Ok((new, dropped))
        });
        let (new, dropped) = match copied {
            Ok(x) => x,
            Err(e) => {
                // Nothing refers to the copy: its file goes, the old table stays as it was.
                let _ = p.io.remove(&path, None);
                return Err(e);
            }
        };
        let bytes_written = new.file.stats.bytes_written.load(Ordering::Relaxed);
        drop(writers);
        // Waits for a checkpoint in progress (it may still record the old file, which stays
        // until a checkpoint without it is durable).
        p.checkpointer.dropped(dropped);
        // Measured once no checkpoint reaches the old file (one in progress at the swap may
        // have shrunk it); eviction may still grow it until its cache is released below, so
        // `bytes_freed >= bytes_before`.
        let bytes_before = old.file.size();
        {
            // No checkpoint reaches the old table any more; eviction may still hold one of its
            // leaves, and reconciles only under `structure`.
            old.release_cache(&old.structure_exclusive());
        }
        (p.checkpoint)()?;
        return Ok(CompactStats {
            bytes_before,
            bytes_after: new.file.size(),
            bytes_written,
            bytes_freed: old.file.size(),
        });
    }
    Err(Error::Busy(format!(
        "compact: table {id} was replaced by {MAX_TRIES} other compactions while this one waited"
    )))
}

/// What compacting table `id` would do now, without writing: its file's size, and the size of
/// a dense copy (every live entry read, encoded and compressed as the copy would be).
/// `bytes_written` is the copy's size and `bytes_freed` the difference — estimates: the
/// table's writers go on meanwhile.
pub fn estimate(p: &Parts, id: TableId) -> Result<CompactStats> {
    let t = p.catalog.table(id)?;
    let before = t.file.size();
    let after = bulk_load_size(&t.cfg, entries_of(p, &t))?;
    Ok(CompactStats {
        bytes_before: before,
        bytes_after: after,
        bytes_written: after,
        bytes_freed: before.saturating_sub(after),
    })
}

/// Every entry of `t` in key order, helping eviction as it goes (reading a table fills the
/// cache like any scan).
fn entries_of<'a>(
    p: &'a Parts,
    t: &Arc<Table>,
) -> impl Iterator<Item = Result<crate::kv::KvPair>> + 'a {
    let src = t.clone();
    let mut n = 0u64;
    BatchedCursor::new(
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
        // Every applied version, newest: the copy replaces the table for all readers.
        move |lo, hi, reverse, limit, out| fetch_range(&src, lo, hi, reverse, limit, LATEST, out),
    )
    .map(move |kv| {
        n += 1;
        if n.is_multiple_of(EVICT_EVERY) {
            (p.help_evict)()?;
        }
        kv
    })
}

/// Bulk-loads a copy of `old` (whose writers wait: `held` is its writers latch) into `path`
/// and checkpoints the copy's file.
fn copy(
    p: &Parts,
    old: &Arc<Table>,
    held: &WritersExclusive,
    path: &std::path::Path,
) -> Result<Arc<Table>> {
    old.assert_writers_excluded(held);
    let new = p
        .catalog
        .bulk_copy(old, path, entries_of(p, old), WriteCause::Other)?;
    checkpoint_table(&new)?;
    Ok(new)
}
