//! The in-memory leaf page (WiredTiger's `WT_PAGE` of a row-store leaf) and its latch: what the
//! tree holds, reconciliation reads and eviction drops. A leaf is a shared handle
//! (`Arc<Leaf>`) whose page may be resident or only on disk.

use crate::block::Addr;
use crate::cache::Cache;
use crate::leaf_page::{LeafPage, Value};
use crate::txn::LATEST;
use parking_lot::{Mutex, MutexGuard};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What the latch protects. Its fields change only through its methods, which keep these
/// invariants (checked in debug builds whenever the latch is let go, `LeafState::check`):
/// - a page not resident is charged nothing and is clean;
/// - a resident page is charged its size, unless a released table keeps it uncharged
///   (`LeafState::release`);
/// - overflow blocks wait to be freed only beside the disk image that references them.
pub struct LeafState {
    /// The resident page, or `None` when only the disk image exists.
    page: Option<LeafPage>,
    addr: Option<Addr>,
    dirty: bool,
    /// Bytes charged to the cache for `page`.
    mem: usize,
    /// Overflow blocks the current disk image references but the page no longer does: freed
    /// when the next image is written.
    pending_free: Vec<Addr>,
}

/// What a change to a leaf's page did, for the cache's accounting.
pub struct Applied {
    /// The change in the page's charge, in bytes.
    pub delta: i64,
    /// Whether the leaf was dirty before the change.
    pub was_dirty: bool,
    /// Whether the change made (or kept) the leaf dirty: false for a change that changes
    /// nothing an image holds.
    pub dirtied: bool,
}

/// A leaf's page taken out for reconciliation's rebuild (`LeafState::take_for_rebuild`).
pub struct Taken {
    pub page: LeafPage,
    /// The image the page was read from or last written as.
    pub addr: Option<Addr>,
    /// What the cache charged for the page.
    pub mem: usize,
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

    /// A new tree's first leaf: empty, never written, and dirty (its first image is owed).
    pub fn new_empty() -> LeafState {
        let page = LeafPage::empty();
        debug_assert_eq!(page.mem(), 0, "an empty page is charged nothing");
        LeafState {
            page: Some(page),
            addr: None,
            dirty: true,
            mem: 0,
            pending_free: Vec::new(),
        }
    }

    /// A page just rebuilt from its image at `addr`: dirty if it holds versions the image
    /// lacks; `pending_free` are overflow blocks that image references and the page does not.
    pub fn written(page: LeafPage, addr: Addr, pending_free: Vec<Addr>) -> LeafState {
        LeafState {
            dirty: page.unwritten_at(LATEST),
            mem: page.mem(),
            page: Some(page),
            addr: Some(addr),
            pending_free,
        }
    }

    /// The resident page, if any.
    pub fn page(&self) -> Option<&LeafPage> {
        self.page.as_ref()
    }
    /// The disk image, if the page was ever written.
    pub fn addr(&self) -> Option<Addr> {
        self.addr
    }
    /// Whether the page holds changes its image lacks.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }
    /// Bytes charged to the cache for the page.
    pub fn mem(&self) -> usize {
        self.mem
    }

    /// Makes `page`, read from this leaf's image, resident. Returns its charge.
    pub fn load(&mut self, page: LeafPage) -> usize {
        assert!(
            self.page.is_none() && self.addr.is_some(),
            "a page is read only for a leaf that is on disk and not resident"
        );
        self.mem = page.mem();
        self.page = Some(page);
        self.mem
    }

    /// Applies a put or delete of commit `csn` to the resident page; versions below the one a
    /// reader at `oldest` sees go.
    pub fn apply(&mut self, key: &[u8], value: Option<Value>, csn: u64, oldest: u64) -> Applied {
        let page = self
            .page
            .as_mut()
            .expect("a latched leaf is resident when a batch is applied");
        let (delta, freed) = page.apply(key, value, csn, oldest);
        self.pending_free.extend(freed);
        debug_assert_eq!(
            self.mem as i64 + delta,
            page.mem() as i64,
            "a leaf's charge follows its page"
        );
        self.mem = page.mem();
        let was_dirty = self.dirty;
        let dirtied = was_dirty || page.unwritten_at(LATEST);
        if dirtied {
            self.dirty = true;
        } else {
            debug_assert_eq!(
                delta, 0,
                "a change that changes nothing leaves the page clean"
            );
        }
        Applied {
            delta,
            was_dirty,
            dirtied,
        }
    }

    /// Gives up a leaf whose disk image failed its checks (`Table::salvage`): the leaf becomes
    /// an empty page never written, so the next checkpoint writes an image for it. Returns the
    /// blocks to free: the bad image and the overflow blocks waiting beside it.
    pub fn salvage_empty(&mut self) -> Vec<Addr> {
        // A resident page is what the leaf holds now: emptying it would drop good entries.
        assert!(
            self.page.is_none(),
            "only a leaf that is not resident is given up"
        );
        let bad = self.addr.take().expect("a leaf not resident has an image");
        let mut free = std::mem::take(&mut self.pending_free);
        free.push(bad);
        *self = LeafState::new_empty();
        free
    }

    /// Runs reconciliation's `f` on the resident page, which it may annotate (overflow
    /// blocks' addresses) but not grow or shrink.
    pub fn reconcile_page<R>(&mut self, f: impl FnOnce(&mut LeafPage) -> R) -> Option<R> {
        let page = self.page.as_mut()?;
        let r = f(page);
        debug_assert_eq!(page.mem(), self.mem, "reconciliation leaves a page's size");
        Some(r)
    }

    /// Takes the page, its image and its pending frees out, leaving the leaf with nothing
    /// (reconciliation rebuilds it from the new image(s)).
    pub fn take_for_rebuild(&mut self) -> Taken {
        let page = self.page.take().expect("a reconciled page is resident");
        self.dirty = false;
        Taken {
            page,
            addr: self.addr.take(),
            mem: std::mem::take(&mut self.mem),
            pending_free: std::mem::take(&mut self.pending_free),
        }
    }

    /// Puts a page rebuilt from its new image in place of the one taken out.
    pub fn rebuilt(&mut self, rebuilt: LeafState) {
        assert!(
            self.page.is_none() && self.addr.is_none(),
            "a rebuilt page replaces one taken out"
        );
        *self = rebuilt;
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

    /// The table is gone (closed, dropped, or replaced by a compaction): the page's charge
    /// and its changes are given up. A page never written stays readable, uncharged, for a
    /// reader still on the table. Returns (the charge, whether it was dirty) of a resident
    /// page.
    pub fn release(&mut self) -> Option<(usize, bool)> {
        let page = self.page.take()?;
        let released = (std::mem::take(&mut self.mem), self.dirty);
        // Its changes are not to be written any more (the table is gone, or a compaction's
        // copy holds them): eviction, which may still hold the leaf in a queue, finds nothing
        // to write.
        self.dirty = false;
        if self.addr.is_none() {
            self.page = Some(page);
        }
        Some(released)
    }

    /// The invariants of the type's comment.
    fn check(&self) {
        assert!(
            self.page.is_some() || (self.mem == 0 && !self.dirty),
            "a leaf not resident is charged nothing and is clean (charged {}, dirty {})",
            self.mem,
            self.dirty
        );
        assert!(
            self.pending_free.is_empty() || self.addr.is_some(),
            "overflow blocks wait to be freed only beside an image"
        );
    }
}

pub struct Leaf {
    /// Engine-wide unique: batches latch leaves in id order.
    id: u64,
    /// The logical page this leaf holds, kept across its copy-on-write moves (and by the
    /// first piece of a split), reported with every write of it.
    page_id: u64,
    /// A key that routes to this leaf (its lower bound when it was created).
    route: Vec<u8>,
    state: Mutex<LeafState>,
    last_access: AtomicU64,
    retired: AtomicBool,
    /// On its table's dirty list (`Table::take_dirty`): set by the write that lists it, cleared
    /// by the evictor that takes it off, so a leaf is listed at most once.
    listed_dirty: AtomicBool,
}

/// Proof that the holder has a leaf's latch (WiredTiger's `WT_ASSERT_SPINLOCK_OWNED`, made a
/// type): the functions that read or change a leaf's page take it, so none runs unlatched,
/// and it names its leaf, so no page is changed under another leaf's latch. Let go when
/// dropped.
pub struct LeafLatch<'a> {
    leaf: &'a Arc<Leaf>,
    state: MutexGuard<'a, LeafState>,
}

impl<'a> LeafLatch<'a> {
    /// The latched leaf.
    pub fn leaf(&self) -> &'a Arc<Leaf> {
        self.leaf
    }
    /// Marks the leaf replaced by a split: whoever latches it next looks its key up again.
    pub fn retire(&mut self) {
        self.leaf.retired.store(true, Ordering::Release);
    }
}

impl Deref for LeafLatch<'_> {
    type Target = LeafState;
    fn deref(&self) -> &LeafState {
        &self.state
    }
}

impl DerefMut for LeafLatch<'_> {
    fn deref_mut(&mut self) -> &mut LeafState {
        &mut self.state
    }
}

impl Drop for LeafLatch<'_> {
    fn drop(&mut self) {
        if cfg!(debug_assertions) && !std::thread::panicking() {
            self.state.check();
        }
    }
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
    /// Engine-wide unique: batches latch leaves in id order.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// The logical page this leaf holds.
    pub fn page_id(&self) -> u64 {
        self.page_id
    }
    /// A key that routes to this leaf.
    pub fn route(&self) -> &[u8] {
        &self.route
    }
    /// Takes the leaf's latch, waiting for it.
    pub fn latch(self: &Arc<Self>) -> LeafLatch<'_> {
        LeafLatch {
            leaf: self,
            state: self.state.lock(),
        }
    }
    /// Takes the leaf's latch if no one holds it.
    pub fn try_latch(self: &Arc<Self>) -> Option<LeafLatch<'_>> {
        Some(LeafLatch {
            leaf: self,
            state: self.state.try_lock()?,
        })
    }
    /// A split replaced this leaf: whoever latches it looks the key up again.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
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

#[cfg(test)]
mod tests {
    //! The state's invariants, each broken on purpose.

    use super::*;

    fn addr() -> Addr {
        Addr {
            offset: 4096,
            size: 4096,
            checksum: 0,
        }
    }

    #[test]
    #[should_panic(expected = "only a leaf that is not resident is given up")]
    fn a_resident_leaf_is_never_given_up() {
        let mut st = LeafState::on_disk(addr());
        st.load(LeafPage::empty());
        st.salvage_empty();
    }

    #[test]
    fn a_given_up_leaf_is_empty_dirty_and_frees_its_image() {
        let mut st = LeafState::on_disk(addr());
        assert_eq!(st.salvage_empty(), vec![addr()]);
        assert!(st.is_dirty() && st.addr().is_none());
        assert_eq!(st.page().map(|p| p.entries(LATEST).count()), Some(0));
        st.check();
    }

    #[test]
    #[should_panic(expected = "on disk and not resident")]
    fn a_resident_page_is_not_read_again() {
        LeafState::new_empty().load(LeafPage::empty());
    }

    #[test]
    #[should_panic(expected = "replaces one taken out")]
    fn a_rebuilt_page_replaces_only_one_taken_out() {
        let mut st = LeafState::on_disk(addr());
        st.rebuilt(LeafState::written(LeafPage::empty(), addr(), Vec::new()));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "leaves a page's size")]
    fn reconciliation_does_not_resize_a_page() {
        let mut st = LeafState::new_empty();
        st.reconcile_page(|p| p.apply(b"k", Some(Value::Inline(b"v".to_vec())), 1, 0));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "is charged nothing and is clean")]
    fn the_latch_checks_a_page_not_resident_is_uncharged() {
        let mut st = LeafState::on_disk(addr());
        st.mem = 10;
        let leaf = Leaf::new(1, 1, Vec::new(), st);
        drop(leaf.latch());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "only beside an image")]
    fn the_latch_checks_pending_frees_have_an_image() {
        let mut st = LeafState::new_empty();
        st.pending_free.push(addr());
        let leaf = Leaf::new(1, 1, Vec::new(), st);
        drop(leaf.latch());
    }

    #[test]
    fn a_rebuild_leaves_nothing_and_takes_a_written_page() {
        let leaf = Leaf::new(1, 1, Vec::new(), LeafState::new_empty());
        let mut st = leaf.latch();
        let taken = st.take_for_rebuild();
        assert!(st.page().is_none() && st.addr().is_none() && !st.is_dirty());
        st.rebuilt(LeafState::written(taken.page, addr(), Vec::new()));
        assert_eq!(st.addr(), Some(addr()));
        assert!(!st.is_dirty(), "an empty page's image holds all it has");
    }
}
