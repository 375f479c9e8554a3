//! Cache accounting: the only writer of the cache's counters. Leaves are charged by an
//! estimate of their in-memory size (keys, values, `ENTRY_OVERHEAD` per entry); the tree
//! reports what happens to a page (read in, changed, written, split, evicted, released) and
//! this file turns that into bytes, dirty bytes and page counts. Eviction (`evict.rs`) keeps the
//! total under the target and the dirty part under the dirty target.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Bytes charged per entry on top of key and value (map node, lengths, allocator slack).
pub const ENTRY_OVERHEAD: usize = 48;

pub struct Cache {
    bytes: AtomicI64,
    dirty: AtomicI64,
    /// A coarse clock: eviction advances it; leaves record it when touched (approximate LRU).
    tick: AtomicU64,
    pages_evicted: AtomicU64,
    pages_read: AtomicU64,
    dirty_pages_written: AtomicU64,
    /// Changes applied to a leaf that was clean (it becomes dirty) and to one already dirty
    /// (the change is absorbed: the leaf is written once for all of them).
    leaf_changes_to_clean: AtomicU64,
    leaf_changes_to_dirty: AtomicU64,
    /// The budget and the thresholds derived from it (they change together on a resize).
    budget: AtomicU64,
    target: AtomicU64,
    trigger: AtomicU64,
    dirty_target: AtomicU64,
    dirty_trigger: AtomicU64,
    /// Eviction thresholds in percent of the budget: target, trigger, dirty target, dirty
    /// trigger.
    pct: parking_lot::Mutex<[u8; 4]>,
}

impl Cache {
    pub fn new(budget: u64, target: u8, trigger: u8, dirty_target: u8, dirty_trigger: u8) -> Self {
        let c = Cache {
            bytes: AtomicI64::new(0),
            dirty: AtomicI64::new(0),
            tick: AtomicU64::new(1),
            pages_evicted: AtomicU64::new(0),
            pages_read: AtomicU64::new(0),
            dirty_pages_written: AtomicU64::new(0),
            leaf_changes_to_clean: AtomicU64::new(0),
            leaf_changes_to_dirty: AtomicU64::new(0),
            budget: AtomicU64::new(0),
            target: AtomicU64::new(0),
            trigger: AtomicU64::new(0),
            dirty_target: AtomicU64::new(0),
            dirty_trigger: AtomicU64::new(0),
            pct: parking_lot::Mutex::new([target, trigger, dirty_target, dirty_trigger]),
        };
        c.resize(budget);
        c
    }
    /// Sets a new budget; the thresholds keep their percentages. Eviction brings the cache
    /// under a smaller budget as it runs.
    pub fn resize(&self, budget: u64) {
        let p = self.pct.lock();
        let pct = |i: usize| budget * p[i] as u64 / 100;
        self.target.store(pct(0), Ordering::Relaxed);
        self.trigger.store(pct(1), Ordering::Relaxed);
        self.dirty_target.store(pct(2), Ordering::Relaxed);
        self.dirty_trigger.store(pct(3), Ordering::Relaxed);
        self.budget.store(budget, Ordering::Relaxed);
    }
    /// Sets the dirty target and trigger, percent of the budget (the caller has checked them
    /// with `config::check_eviction_pct`). Eviction brings the dirty bytes under a lower target
    /// as it runs.
    pub fn set_dirty_pct(&self, target: u8, trigger: u8) {
        assert!(
            crate::config::check_eviction_pct(target, trigger).is_ok(),
            "dirty thresholds {target}/{trigger}"
        );
        {
            let mut p = self.pct.lock();
            p[2] = target;
            p[3] = trigger;
        }
        self.resize(self.budget());
    }
    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }
    pub fn dirty_target(&self) -> u64 {
        self.dirty_target.load(Ordering::Relaxed)
    }
    pub fn dirty_trigger(&self) -> u64 {
        self.dirty_trigger.load(Ordering::Relaxed)
    }
    pub fn used(&self) -> u64 {
        let b = self.bytes.load(Ordering::Relaxed);
        debug_assert!(b >= 0, "cache bytes went negative: {b}");
        b.max(0) as u64
    }
    pub fn dirty_bytes(&self) -> u64 {
        let d = self.dirty.load(Ordering::Relaxed);
        debug_assert!(d >= 0, "dirty cache bytes went negative: {d}");
        d.max(0) as u64
    }

    fn add(&self, bytes: i64) {
        let before = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        debug_assert!(before + bytes >= 0, "cache bytes {before} {bytes:+}");
    }
    fn add_dirty(&self, bytes: i64) {
        let before = self.dirty.fetch_add(bytes, Ordering::Relaxed);
        debug_assert!(before + bytes >= 0, "dirty cache bytes {before} {bytes:+}");
    }

    /// A page of `mem` bytes was read in from its block.
    pub fn page_read(&self, mem: usize) {
        self.add(mem as i64);
        self.pages_read.fetch_add(1, Ordering::Relaxed);
    }
    /// A resident page changed by `delta` bytes and is now `mem` bytes; it was dirty before
    /// (`was_dirty`) or has just become dirty.
    pub fn page_changed(&self, delta: i64, mem: usize, was_dirty: bool) {
        self.add(delta);
        self.add_dirty(if was_dirty { delta } else { mem as i64 });
    }
    /// One change (a key's insert, update or delete) was applied to a leaf that was dirty
    /// already (`was_dirty`) or was clean.
    pub fn leaf_changed(&self, was_dirty: bool) {
        let counter = if was_dirty {
            &self.leaf_changes_to_dirty
        } else {
            &self.leaf_changes_to_clean
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    /// Changes applied to clean leaves and to dirty ones, since the cache was made.
    pub fn leaf_change_counts(&self) -> (u64, u64) {
        (
            self.leaf_changes_to_clean.load(Ordering::Relaxed),
            self.leaf_changes_to_dirty.load(Ordering::Relaxed),
        )
    }
    /// A dirty page of `mem` bytes was written: it is clean now.
    pub fn page_written(&self, mem: usize) {
        self.add_dirty(-(mem as i64));
        self.dirty_pages_written.fetch_add(1, Ordering::Relaxed);
    }
    /// A page of `old` bytes, just written, was rebuilt in memory from its new image(s): clean
    /// resident pages of `new` bytes in all (one, or the pieces of a split).
    pub fn page_reimaged(&self, old: usize, new: usize) {
        self.add(new as i64 - old as i64);
    }
    /// A clean page of `mem` bytes left memory (evicted).
    pub fn page_evicted(&self, mem: usize) {
        self.add(-(mem as i64));
        self.pages_evicted.fetch_add(1, Ordering::Relaxed);
    }
    /// A page of `mem` bytes left memory without being evicted (its table closed or dropped).
    pub fn page_released(&self, mem: usize, dirty: bool) {
        self.add(-(mem as i64));
        if dirty {
            self.add_dirty(-(mem as i64));
        }
    }
    /// Advances the recency clock (once per eviction round).
    pub fn advance_clock(&self) {
        self.tick.fetch_add(1, Ordering::Relaxed);
    }
    /// Page counters for statistics: (read, evicted, dirty written).
    pub fn page_counts(&self) -> (u64, u64, u64) {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (
            l(&self.pages_read),
            l(&self.pages_evicted),
            l(&self.dirty_pages_written),
        )
    }
    /// The whole cache (not just its dirty part) is over the eviction target: pages must
    /// leave memory.
    pub fn over_total_target(&self) -> bool {
        self.used() > self.target.load(Ordering::Relaxed)
    }
    /// Background eviction should run.
    pub fn over_target(&self) -> bool {
        self.used() > self.target.load(Ordering::Relaxed)
            || self.dirty_bytes() > self.dirty_target()
    }
    /// Application threads must help.
    pub fn over_trigger(&self) -> bool {
        self.used() > self.trigger.load(Ordering::Relaxed)
            || self.dirty_bytes() > self.dirty_trigger()
    }
    pub fn now(&self) -> u64 {
        self.tick.load(Ordering::Relaxed)
    }
}
