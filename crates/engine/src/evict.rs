//! Eviction (WiredTiger `src/evict`): choosing resident leaves to leave memory and making them
//! leave. Over the cache's target, the least recently used leaves go: a clean page is dropped;
//! a dirty one is reconciled (the tree applies the result) and then dropped — through the one
//! drop function, `LeafState::evict`. Over only the dirty target, dirty leaves (taken from
//! their tables' dirty lists, never by walking every leaf) are written and kept resident and
//! clean. Eviction never decides where a block goes (the block manager and placement do).

use crate::btree::Table;
use crate::cache::Cache;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::leaf::Leaf;
use parking_lot::Mutex;
use placement::WriteCause;
use std::sync::Arc;

/// How many eviction rounds an application thread runs at most before it goes on with its own
/// work (each round evicts a few pages).
const APP_ROUNDS: u32 = 1000;

/// Candidates, the best last (popped first): `lru` for eviction when the cache is over its
/// target, `dirty` for scrubbing when only the dirty part is.
#[derive(Default)]
pub struct Evictor {
    lru: Mutex<Vec<(Arc<Table>, Arc<Leaf>)>>,
    dirty: Mutex<Vec<(Arc<Table>, Arc<Leaf>)>>,
}

/// What one eviction round does, chosen from the cache's state (WiredTiger's eviction
/// modes): over the target, pages leave memory; over only the dirty target, dirty pages are
/// written and stay resident and clean ("scrub"), because dropping them — or clean pages —
/// while the cache has room only makes the next reader read them back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Evict,
    Scrub,
}

impl Evictor {
    /// Application threads evict when the cache is over its trigger, before they latch
    /// anything. Returns how many rounds it ran.
    pub fn help(&self, catalog: &Catalog, cache: &Cache) -> Result<u32> {
        let mut rounds = 0;
        while cache.over_trigger() && rounds < APP_ROUNDS {
            rounds += 1;
            if !self.evict_some(catalog, cache, 8)? {
                break;
            }
        }
        Ok(rounds)
    }

    /// Evicts (or, with room in the cache, scrubs) up to `n` pages, oldest first, and stops as
    /// soon as the cache is no longer over the target its mode serves. Returns false if nothing
    /// could be done.
    ///
    /// Stopping at the target, not after `n` pages, keeps the dirty part of the cache at its
    /// budget: a fixed batch left it up to a batch under the target after each round, and a
    /// fixed batch is a larger share of a smaller cache's budget (16 leaves were 40 % of
    /// LinkBench's 5 % dirty target at the lab's medium scale, 10 % at large).
    pub fn evict_some(&self, catalog: &Catalog, cache: &Cache, n: usize) -> Result<bool> {
        // The recency clock ticks once per round, as WiredTiger bumps its read generation once
        // per eviction pass: recency then tells apart what was touched since the last round
        // (it used to tick once per fill of the eviction queue, half a cache of evictions).
        cache.advance_clock();
        let mode = if cache.over_total_target() {
            Mode::Evict
        } else {
            Mode::Scrub
        };
        let needed = || match mode {
            Mode::Evict => cache.over_total_target(),
            Mode::Scrub => cache.dirty_bytes() > cache.dirty_target(),
        };
        let queue = match mode {
            Mode::Evict => &self.lru,
            Mode::Scrub => &self.dirty,
        };
        let mut done = 0;
        let mut tried = 0;
        let mut pinned: Option<Arc<Table>> = None;
        while done < n && tried < n * 8 && needed() {
            let next = {
                let mut q = queue.lock();
                if q.is_empty() {
                    match mode {
                        Mode::Evict => fill_lru(catalog, cache, &mut q),
                        Mode::Scrub => fill_dirty(catalog, &mut q),
                    }
                }
                q.pop()
            };
            let Some((table, leaf)) = next else { break };
            tried += 1;
            let ok = match mode {
                Mode::Evict => match evict_one(&table, &leaf, cache)? {
                    Evicted::Yes => true,
                    Evicted::Busy => false,
                    Evicted::Pinned => {
                        pinned = Some(table);
                        false
                    }
                },
                Mode::Scrub => scrub_one(&table, &leaf)?,
            };
            done += ok as usize;
        }
        if let Some(t) = pinned.filter(|_| done == 0 && cache.over_trigger()) {
            // The cache is full and what would leave holds versions only old snapshots read:
            // the oldest snapshot goes (its reads fail with SnapshotTooOld), so that memory
            // can follow.
            return Ok(t.txns.invalidate_oldest());
        }
        Ok(done > 0)
    }
}

/// What became of an eviction candidate.
enum Evicted {
    Yes,
    /// Latched, retired, not resident, or its tree busy: skipped.
    Busy,
    /// It holds versions an open snapshot may still read.
    Pinned,
}

/// Evicts one leaf if no one holds it: drops it if clean, else reconciles it first (under the
/// table's `structure`, shared and only tried: a tree a checkpoint is writing is skipped).
fn evict_one(table: &Table, leaf: &Arc<Leaf>, cache: &Cache) -> Result<Evicted> {
    let oldest = table.oldest();
    let outcome = |dropped: bool, pinned: bool| match (dropped, pinned) {
        (true, _) => Evicted::Yes,
        (false, true) => Evicted::Pinned,
        (false, false) => Evicted::Busy,
    };
    {
        let Some(mut st) = leaf.try_latch() else {
            return Ok(Evicted::Busy);
        };
        let Some(page) = st.page().filter(|_| !leaf.is_retired()) else {
            return Ok(Evicted::Busy);
        };
        let pinned = page.pinned(oldest);
        if !st.is_dirty() {
            return Ok(outcome(st.evict(cache, oldest), pinned));
        }
        if page.unwritten_after(table.write_at()) {
            // A checkpoint's cut is open on the table and the page holds versions newer than
            // it: written now, it would stay dirty; the checkpoint or a later round writes it.
            return Ok(Evicted::Busy);
        }
    }
    // Lock order is structure → leaf: the leaf's latch was let go above.
    let Some(held) = table.try_structure_shared() else {
        return Ok(Evicted::Busy);
    };
    let (mut dropped, mut pinned) = (false, false);
    for l in table.reconcile(&held, leaf, WriteCause::Eviction)? {
        let mut st = l.latch();
        pinned |= st.page().is_some_and(|p| p.pinned(oldest));
        dropped |= st.evict(cache, oldest);
    }
    Ok(outcome(dropped, pinned))
}

/// Writes one dirty leaf and leaves it resident and clean. A leaf that cannot be written now
/// (its tree is busy) goes back on its table's dirty list, so no dirty leaf is lost to
/// eviction's view. Returns whether a page was written.
fn scrub_one(table: &Table, leaf: &Arc<Leaf>) -> Result<bool> {
    let Some(held) = table.try_structure_shared() else {
        table.list_dirty(leaf);
        return Ok(false);
    };
    {
        // A leaf of a dropped table has no page (`Table::release_cache`), whatever its flag.
        let st = leaf.latch();
        let Some(page) = st.page().filter(|_| st.is_dirty() && !leaf.is_retired()) else {
            return Ok(false);
        };
        if page.unwritten_after(table.write_at()) {
            // Newer than a checkpoint's open cut: it would stay dirty. Written after the cut.
            drop(st);
            table.list_dirty(leaf);
            return Ok(false);
        }
    }
    // The pieces stay resident; a writer may dirty them again the moment their latch is free.
    table.reconcile(&held, leaf, WriteCause::Eviction)?;
    Ok(true)
}

/// Collects the colder half of the resident leaves, the least recently used last (popped
/// first); under dirty pressure the dirty ones among them go first. The hotter half is not a
/// candidate, dirty or not, as WiredTiger takes only candidates below a read-generation
/// cutoff: a leaf changed again and again (an append point, a hot counter) would otherwise be
/// written once per pass of the queue and dirtied again at once, and a pass covers the same
/// share of the cache at every size, so a smaller database wrote such leaves more often per
/// operation (docs/engine.md, "Cache and eviction").
fn fill_lru(catalog: &Catalog, cache: &Cache, q: &mut Vec<(Arc<Table>, Arc<Leaf>)>) {
    let dirty_pressure = cache.dirty_bytes() > cache.dirty_target();
    let mut cands: Vec<(u64, bool, Arc<Table>, Arc<Leaf>)> = Vec::new();
    for t in catalog.all() {
        for l in t.leaves() {
            let resident_dirty = l.try_latch().and_then(|s| s.page().map(|_| s.is_dirty()));
            if let Some(d) = resident_dirty {
                cands.push((l.last_access(), d, t.clone(), l));
            }
        }
    }
    drop(split_off_hotter_half(&mut cands, |c| c.0));
    // Pop from the end: best candidates (dirty under pressure, then oldest) go last.
    let first = |c: &(u64, bool, _, _)| (dirty_pressure && c.1, std::cmp::Reverse(c.0));
    cands.sort_by_key(|c| first(c));
    q.extend(cands.into_iter().map(|(_, _, t, l)| (t, l)));
}

/// Takes every table's dirty list and queues its colder half, the least recently used last
/// (popped first, as a page written long ago is the least likely to be written again before
/// the checkpoint); the hotter half goes back on the lists, to be judged again at the next
/// fill.
fn fill_dirty(catalog: &Catalog, q: &mut Vec<(Arc<Table>, Arc<Leaf>)>) {
    debug_assert!(q.is_empty(), "the scrub queue is refilled only when empty");
    // Each leaf's recency is read once, before the sort (`split_off_hotter_half`).
    let mut all: Vec<(u64, Arc<Table>, Arc<Leaf>)> = Vec::new();
    for t in catalog.all() {
        for l in t.take_dirty() {
            all.push((l.last_access(), t.clone(), l));
        }
    }
    for (_, t, l) in split_off_hotter_half(&mut all, |c| c.0) {
        t.list_dirty(&l);
    }
    q.extend(all.into_iter().rev().map(|(_, t, l)| (t, l)));
}

/// Sorts `cands` coldest first by `recency` and splits off the hotter half, which is no
/// eviction candidate in either mode (WiredTiger's read-generation cutoff). `recency` must read
/// a value taken before the sort: writers touch leaves meanwhile, and a key that changes under
/// the sort is not a total order.
fn split_off_hotter_half<T>(cands: &mut Vec<T>, recency: impl Fn(&T) -> u64) -> Vec<T> {
    cands.sort_by_key(|c| recency(c));
    cands.split_off(cands.len().div_ceil(2))
}
