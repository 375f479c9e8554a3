//! The in-memory leaf page (WiredTiger's `WT_PAGE` of a row-store leaf) and its latch: what the
//! tree holds, reconciliation reads and eviction drops. A leaf is a shared handle
//! (`Arc<Leaf>`) whose page may be resident or only on disk.

use crate::block::Addr;
use crate::cache::Cache;
use crate::leaf_page::LeafPage;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What the latch protects.
pub struct LeafState {
    /// The resident page, or `None` when only the disk image exists.
    pub page: Option<LeafPage>,
    pub addr: Option<Addr>,
    pub dirty: bool,
    /// Bytes charged to the cache for `page`.
    pub mem: usize,
    /// Overflow blocks the current disk image references but the page no longer does: freed
    /// when the next image is written.
    pub pending_free: Vec<Addr>,
}

impl LeafState {
    /// A page only on disk.
    pub fn on_disk(addr: Addr) -> LeafState {
        LeafState {
            page: None,
            addr: Some(addr),
            dirty: false,
            mem: 0,
            pending_free: Vec::new(),
        }
    }

    /// Drops the page of a clean, written leaf from memory: the one place a page is evicted.
    /// Returns whether it did (a dirty or non-resident page stays as it is, and so does one
    /// holding versions a reader older than `oldest` may still need).
    pub fn evict(&mut self, cache: &Cache, oldest: u64) -> bool {
        match &self.page {
            Some(page) if !self.dirty && self.addr.is_some() && !page.pinned(oldest) => {}
            _ => return false,
        }
        self.page = None;
        cache.page_evicted(self.mem);
        self.mem = 0;
        true
    }
}

pub struct Leaf {
    /// Engine-wide unique: batches latch leaves in id order.
    pub id: u64,
    /// The logical page this leaf holds, kept across its copy-on-write moves (and by the
    /// first piece of a split), reported with every write of it.
    pub page_id: u64,
    /// A key that routes to this leaf (its lower bound when it was created).
    pub route: Vec<u8>,
    pub state: Mutex<LeafState>,
    last_access: AtomicU64,
    retired: AtomicBool,
    /// On its table's dirty list (`Table::take_dirty`): set by the write that lists it, cleared
    /// by the evictor that takes it off, so a leaf is listed at most once.
    listed_dirty: AtomicBool,
}

impl Leaf {
    pub fn new(id: u64, page_id: u64, route: Vec<u8>, st: LeafState) -> Arc<Leaf> {
        Arc::new(Leaf {
            id,
            page_id,
            route,
            state: Mutex::new(st),
            last_access: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            listed_dirty: AtomicBool::new(false),
        })
    }
    /// A split replaced this leaf: whoever latches it looks the key up again.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }
    /// Marks the leaf replaced by a split (under its latch).
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
    /// Marks the leaf listed as dirty; true if it was not yet (the caller then lists it).
    pub fn list_dirty(&self) -> bool {
        !self.listed_dirty.swap(true, Ordering::AcqRel)
    }
    /// The leaf left its table's dirty list.
    pub fn unlist_dirty(&self) {
        self.listed_dirty.store(false, Ordering::Release);
    }
    pub fn touch(&self, now: u64) {
        self.last_access.store(now, Ordering::Relaxed);
    }
    pub fn last_access(&self) -> u64 {
        self.last_access.load(Ordering::Relaxed)
    }
}

/// How many times a lookup that found a retired leaf looks again before it concludes that the
/// tree is broken. A split replaces a retired leaf in its parent right after retiring it, so a
/// handful of retries is the norm.
pub const RETIRED_RETRIES: u32 = 1 << 20;

/// Waits before looking a retired leaf up again (yields first, then sleeps), and asserts the
/// bound: a retired leaf that stays in the tree would make every lookup of its keys spin.
pub fn retired_backoff(attempt: u32) {
    assert!(
        attempt < RETIRED_RETRIES,
        "a retired leaf stayed in the tree for {attempt} lookups"
    );
    if attempt < 64 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}
