//! Eviction (WiredTiger `src/evict`): choosing resident leaves to leave memory and making them
//! leave. A clean page is dropped; a dirty one is reconciled (the tree applies the result) and
//! then dropped — through the one drop function, `LeafState::evict`. Eviction never decides
//! where a block goes (the block manager and placement do).

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

/// Candidates, the best last (popped first).
#[derive(Default)]
pub struct Evictor {
    queue: Mutex<Vec<(Arc<Table>, Arc<Leaf>)>>,
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

    /// Evicts up to `n` pages, oldest first. Returns false if nothing could be evicted.
    pub fn evict_some(&self, catalog: &Catalog, cache: &Cache, n: usize) -> Result<bool> {
        let mut evicted = 0;
        let mut tried = 0;
        while evicted < n && tried < n * 8 {
            let next = {
                let mut q = self.queue.lock();
                if q.is_empty() {
                    fill_queue(catalog, cache, &mut q);
                }
                q.pop()
            };
            let Some((table, leaf)) = next else { break };
            tried += 1;
            if evict_one(&table, &leaf, cache)? {
                evicted += 1;
            }
        }
        Ok(evicted > 0)
    }
}

/// Evicts one leaf if no one holds it: drops it if clean, else reconciles it first (under the
/// table's `structure`, which is only tried: a busy tree is skipped).
fn evict_one(table: &Table, leaf: &Arc<Leaf>, cache: &Cache) -> Result<bool> {
    {
        let Some(mut st) = leaf.state.try_lock() else {
            return Ok(false);
        };
        if leaf.is_retired() || st.page.is_none() {
            return Ok(false);
        }
        if !st.dirty {
            return Ok(st.evict(cache));
        }
    }
    // Lock order is structure → leaf: the leaf's latch was let go above.
    let Some(_s) = table.structure.try_lock() else {
        return Ok(false);
    };
    let mut dropped = false;
    for l in table.reconcile(leaf, WriteCause::Eviction)? {
        dropped |= l.state.lock().evict(cache);
    }
    Ok(dropped)
}

/// Collects resident leaves, the least recently used last (popped first). Under dirty
/// pressure, dirty pages go first. Keeps the better half.
fn fill_queue(catalog: &Catalog, cache: &Cache, q: &mut Vec<(Arc<Table>, Arc<Leaf>)>) {
    let dirty_pressure = cache.dirty_bytes() > cache.dirty_target();
    let mut cands: Vec<(bool, u64, Arc<Table>, Arc<Leaf>)> = Vec::new();
    for t in catalog.all() {
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
    cache.advance_clock();
}
