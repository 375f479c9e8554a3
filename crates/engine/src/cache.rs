//! Cache accounting. Leaves are charged by an estimate of their in-memory size; eviction
//! (engine.rs) keeps the total under the target and the dirty part under the dirty target.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Bytes charged per entry on top of key and value (map node, lengths, allocator slack).
pub const ENTRY_OVERHEAD: usize = 48;

pub struct Cache {
    pub budget: u64,
    pub bytes: AtomicI64,
    pub dirty: AtomicI64,
    /// A coarse clock: eviction advances it; leaves record it when touched (approximate LRU).
    pub tick: AtomicU64,
    pub pages_evicted: AtomicU64,
    pub pages_read: AtomicU64,
    pub dirty_pages_written: AtomicU64,
    pub target: u64,
    pub trigger: u64,
    pub dirty_target: u64,
    pub dirty_trigger: u64,
}

impl Cache {
    pub fn new(budget: u64, target: u8, trigger: u8, dirty_target: u8, dirty_trigger: u8) -> Self {
        let pct = |p: u8| budget * p as u64 / 100;
        Cache {
            budget,
            bytes: AtomicI64::new(0),
            dirty: AtomicI64::new(0),
            tick: AtomicU64::new(1),
            pages_evicted: AtomicU64::new(0),
            pages_read: AtomicU64::new(0),
            dirty_pages_written: AtomicU64::new(0),
            target: pct(target),
            trigger: pct(trigger),
            dirty_target: pct(dirty_target),
            dirty_trigger: pct(dirty_trigger),
        }
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
        self.used() > self.target || self.dirty_bytes() > self.dirty_target
    }
    /// Application threads must help.
    pub fn over_trigger(&self) -> bool {
        self.used() > self.trigger || self.dirty_bytes() > self.dirty_trigger
    }
    pub fn now(&self) -> u64 {
        self.tick.load(Ordering::Relaxed)
    }
}
