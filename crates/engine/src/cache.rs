//! Cache accounting. Leaves are charged by an estimate of their in-memory size; eviction
//! (engine.rs) keeps the total under the target and the dirty part under the dirty target.

use crate::btree::Leaf;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes charged per entry on top of key and value (map node, lengths, allocator slack).
pub const ENTRY_OVERHEAD: usize = 48;

/// A dirty-queue entry: table id, leaf, tick when queued, whether it had its second chance.
pub type DirtyEntry = (u32, Arc<Leaf>, u64, bool);

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
    /// Resident leaves in the order they became resident (a clock: eviction takes from the
    /// front, giving leaves touched since they were queued a second chance at the back).
    /// Entries are (table id, leaf, tick when queued); a leaf has at most one.
    pub ring: Mutex<VecDeque<(u32, Arc<Leaf>, u64)>>,
    /// Leaves in the order they became dirty: (table id, leaf, tick when queued, whether it
    /// already had its second chance); a leaf has at most one entry.
    pub dirty_queue: Mutex<VecDeque<DirtyEntry>>,
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
            ring: Mutex::new(VecDeque::new()),
            dirty_queue: Mutex::new(VecDeque::new()),
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
    /// Whether the total and the dirty bytes are over their targets, or with `slack`, over
    /// targets lowered by 1 % of the cache and a tenth of the dirty target respectively.
    pub fn over_target_parts(&self, slack: bool) -> (bool, bool) {
        let (t, d) = if slack {
            (
                self.target.saturating_sub(self.budget / 100),
                self.dirty_target - self.dirty_target / 10,
            )
        } else {
            (self.target, self.dirty_target)
        };
        (self.used() > t, self.dirty_bytes() > d)
    }
    pub fn over_target_with_slack(&self) -> bool {
        let (a, b) = self.over_target_parts(true);
        a || b
    }
    /// Application threads must help.
    pub fn over_trigger(&self) -> bool {
        self.used() > self.trigger || self.dirty_bytes() > self.dirty_trigger
    }
    pub fn now(&self) -> u64 {
        self.tick.load(Ordering::Relaxed)
    }
    /// WiredTiger's scrub rule (`__evict_update_work`): while the cache is less than half way
    /// from its target to its trigger, for both the total and the dirty bytes, a dirty page
    /// chosen for eviction is written and kept in memory, clean, instead of being dropped.
    pub fn scrub(&self) -> bool {
        self.used() < (self.target + self.trigger) / 2
            && self.dirty_bytes() < (self.dirty_target + self.dirty_trigger) / 2
    }
    /// Queues a resident leaf on the clock ring unless it is already there. Called under the
    /// leaf's latch.
    pub fn queue_resident(&self, table: u32, leaf: &Arc<Leaf>) {
        if !leaf.in_ring.swap(true, Ordering::AcqRel) {
            self.requeue_resident(table, leaf.clone());
        }
    }
    /// Puts a leaf that already owns its ring entry back at the end of the ring.
    pub fn requeue_resident(&self, table: u32, leaf: Arc<Leaf>) {
        let stamp = self.stamp();
        self.ring.lock().push_back((table, leaf, stamp));
    }
    /// Queues a leaf that just became dirty unless it is already queued. Called under the
    /// leaf's latch.
    pub fn queue_dirty(&self, table: u32, leaf: &Arc<Leaf>) {
        if !leaf.in_dirty_queue.swap(true, Ordering::AcqRel) {
            self.requeue_dirty(table, leaf.clone(), false);
        }
    }
    /// Puts a leaf that already owns its dirty-queue entry back at the end of the queue.
    pub fn requeue_dirty(&self, table: u32, leaf: Arc<Leaf>, second_chance: bool) {
        let stamp = self.stamp();
        self.dirty_queue
            .lock()
            .push_back((table, leaf, stamp, second_chance));
    }
    /// Advances the clock; a leaf touched after this is more recent than the stamp.
    fn stamp(&self) -> u64 {
        self.tick.fetch_add(1, Ordering::Relaxed) + 1
    }
}
