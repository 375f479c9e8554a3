//! Cache accounting. Leaves are charged by an estimate of their in-memory size; eviction
//! (engine.rs) keeps the total under the target and the dirty part under the dirty target.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Bytes charged per entry on top of key and value (map node, lengths, allocator slack).
pub const ENTRY_OVERHEAD: usize = 48;

pub struct Cache {
    pub bytes: AtomicI64,
    pub dirty: AtomicI64,
    /// A coarse clock: eviction advances it; leaves record it when touched (approximate LRU).
    pub tick: AtomicU64,
    pub pages_evicted: AtomicU64,
    pub pages_read: AtomicU64,
    pub dirty_pages_written: AtomicU64,
    /// The budget and the thresholds derived from it (they change together on a resize).
    budget: AtomicU64,
    target: AtomicU64,
    trigger: AtomicU64,
    dirty_target: AtomicU64,
    dirty_trigger: AtomicU64,
    /// Eviction thresholds in percent of the budget: target, trigger, dirty target, dirty
    /// trigger.
    pct: [u8; 4],
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
            budget: AtomicU64::new(0),
            target: AtomicU64::new(0),
            trigger: AtomicU64::new(0),
            dirty_target: AtomicU64::new(0),
            dirty_trigger: AtomicU64::new(0),
            pct: [target, trigger, dirty_target, dirty_trigger],
        };
        c.resize(budget);
        c
    }
    /// Sets a new budget; the thresholds keep their percentages. Eviction brings the cache
    /// under a smaller budget as it runs.
    pub fn resize(&self, budget: u64) {
        let pct = |p: u8| budget * p as u64 / 100;
        self.target.store(pct(self.pct[0]), Ordering::Relaxed);
        self.trigger.store(pct(self.pct[1]), Ordering::Relaxed);
        self.dirty_target.store(pct(self.pct[2]), Ordering::Relaxed);
        self.dirty_trigger
            .store(pct(self.pct[3]), Ordering::Relaxed);
        self.budget.store(budget, Ordering::Relaxed);
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
        self.bytes.load(Ordering::Relaxed).max(0) as u64
    }
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty.load(Ordering::Relaxed).max(0) as u64
    }
    pub fn add(&self, bytes: i64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    pub fn add_dirty(&self, bytes: i64) {
        self.dirty.fetch_add(bytes, Ordering::Relaxed);
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
