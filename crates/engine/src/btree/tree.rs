//! One table: a copy-on-write B+tree in one block file (WiredTiger `src/btree`): descent,
//! page reads, applying updates, applying reconciliation results, and writing internal pages.
//!
//! In memory, internal nodes are always resident (they are ~1% of a tree) and hold their
//! children; leaves are shared handles (`Arc<Leaf>`, `leaf.rs`) whose page may be resident or
//! only on disk.
//!
//! Latching, chosen so that no lock is held across I/O except a page's own latch:
//! - `root` (RwLock): readers and writers take it only to descend to a leaf, then drop it.
//! - the leaf's latch (`Leaf::latch`, a `LeafLatch`): the page latch. Reading a page from
//!   disk, editing it, and reconciling it happen under it, so writers to other leaves never
//!   wait on that I/O.
//! - `structure` (RwLock): reconciliation (eviction, scrub, forced splits, a checkpoint's
//!   leaves) holds it shared, so pages of one table are written in parallel: each under its own
//!   latch, a split's edit of the tree under `root`. Whoever must see the tree's leaves and
//!   their images hold still holds it exclusively: a checkpoint while it writes the internal
//!   pages and the extent lists, the end of a checkpoint's cut, a compaction or a drop
//!   releasing the old table's pages.
//!
//! The leaf's latch, `structure` and `writers` are taken as guards (`leaf.rs`, `latch.rs`),
//! which the functions bound by these rules take as arguments.
//!
//! Lock order: structure → root → leaf. A leaf is never held while taking `root`.
//! A leaf that was split is *retired*; whoever latches a retired leaf looks it up again.
//! Leaves split only at reconciliation (when their image exceeds the split size, or their
//! in-memory size exceeds `memory_page_max`); internal nodes split when their image would
//! exceed `internal_page_max`.

use super::latch::{
    HoldsStructure, Latches, StructureExclusive, StructureShared, WritersExclusive, WritersShared,
};
use crate::block::{build_block, Addr, BlockFile, FileCheckpoint};
use crate::cache::Cache;
use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::leaf::{retired_backoff, Leaf, LeafLatch, LeafState};
use crate::leaf_page::{ImageError, LeafPage, Value};
use crate::page;
use crate::reconcile::{Piece, Reconciled, Reconciler};
use crate::txn::{Txns, LATEST};
use parking_lot::{Mutex, RwLock};
use placement::{PageKind, WriteCause};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Keys longer than this are refused (an internal page must hold at least a few of them).
pub const MAX_KEY_LEN: usize = 64 * 1024;

pub(super) struct Internal {
    /// `keys[i]` is the lower bound of `children[i]`; `keys[0]` is unused (empty).
    pub(super) keys: Vec<Vec<u8>>,
    pub(super) children: Vec<Child>,
    /// 0: the children are leaves.
    pub(super) level: u8,
    pub(super) addr: Option<Addr>,
    pub(super) dirty: AtomicBool,
    /// The logical page id reported with this node's writes.
    pub(super) page_id: u64,
}

pub(super) enum Child {
    Leaf(Arc<Leaf>),
    Node(Box<Internal>),
}

impl Internal {
    pub(super) fn child_for(&self, key: &[u8]) -> usize {
        self.keys[1..].partition_point(|k| k.as_slice() <= key)
    }
    /// The child holding the greatest key below `key`.
    fn child_before(&self, key: &[u8]) -> usize {
        self.keys[1..].partition_point(|k| k.as_slice() < key)
    }
    pub(super) fn image_len(&self) -> usize {
        5 + self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| page::internal_entry_len(if i == 0 { 0 } else { k.len() }))
            .sum::<usize>()
    }
    pub(super) fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }
}

/// What every table of an engine shares: the cache it is charged to, the commit numbers and
/// snapshots that decide which versions a page keeps, and the engine-wide leaf and logical page
/// ids (batches latch leaves in id order).
#[derive(Clone)]
pub struct TreeShared {
    pub cache: Arc<Cache>,
    pub txns: Arc<Txns>,
    pub leaf_ids: Arc<AtomicU64>,
}

/// Where a lookup landed: the leaf and its key range [lower, upper) (None = unbounded).
pub struct Located {
    pub leaf: Arc<Leaf>,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
}

pub struct Table {
    pub id: u32,
    pub name: String,
    pub cfg: TableConfig,
    pub file: BlockFile,
    pub(super) root: RwLock<Internal>,
    /// `structure` and `writers` (`latch.rs`): taken through their guards only.
    pub(super) latches: Latches,
    cache: Arc<Cache>,
    /// Commit numbers and snapshots: which versions a page must keep.
    pub txns: Arc<Txns>,
    pub(super) leaf_ids: Arc<AtomicU64>,
    leaf_split: usize,
    pub(super) internal_split: usize,
    memory_page_max: usize,
    last_checkpoint: Mutex<Option<FileCheckpoint>>,
    /// Leaves written since they were last clean, each at most once (WiredTiger keeps dirty
    /// pages findable the same way): eviction under dirty pressure takes its candidates here
    /// instead of walking every leaf. A leaf may have gone clean or retired since it was
    /// listed; whoever takes the list looks.
    dirty_leaves: Mutex<Vec<Arc<Leaf>>>,
    /// The table that replaced this one (a compaction's copy): open cursors move to it.
    successor: Mutex<Option<Arc<Table>>>,
    /// For a compaction's copy, the last commit number when it was copied: it holds the
    /// newest versions of that moment only, so older snapshots cannot read it.
    born_at: AtomicU64,
    /// The commit number its pages are written at: a checkpoint's cut while that checkpoint
    /// has not written this table yet, else `LATEST` (each entry's newest version). Read under
    /// a leaf's latch, so a page written meanwhile holds no version newer than the cut.
    write_at: AtomicU64,
}

impl Table {
    /// A new, empty table: a root over one empty leaf, nothing written yet.
    pub fn new(
        id: u32,
        name: String,
        cfg: TableConfig,
        file: BlockFile,
        shared: TreeShared,
    ) -> Table {
        let leaf_id = shared.leaf_ids.fetch_add(1, Ordering::Relaxed);
        let leaf = Leaf::new(leaf_id, leaf_id, Vec::new(), LeafState::new_empty());
        let root = Internal {
            keys: vec![Vec::new()],
            children: vec![Child::Leaf(leaf.clone())],
            level: 0,
            addr: None,
            dirty: AtomicBool::new(true),
            page_id: shared.leaf_ids.fetch_add(1, Ordering::Relaxed),
        };
        let t = Self::assemble(id, name, cfg, file, shared, root, None);
        t.list_dirty(&leaf);
        t
    }

    /// A table over `root`: a new tree, one opened at a checkpoint, or one built in memory
    /// (a bulk load, written by its next checkpoint).
    pub(super) fn assemble(
        id: u32,
        name: String,
        cfg: TableConfig,
        file: BlockFile,
        shared: TreeShared,
        root: Internal,
        ckpt: Option<FileCheckpoint>,
    ) -> Table {
        let TreeShared {
            cache,
            txns,
            leaf_ids,
        } = shared;
        // WiredTiger clamps memory_page_max to a tenth of the dirty trigger and to at least
        // one leaf page (bt_handle.c).
        let clamp = (cache.dirty_trigger() / 10).max(cfg.leaf_page_max as u64);
        let memory_page_max = cfg.memory_page_max.min(clamp).max(cfg.leaf_page_max as u64) as usize;
        Table {
            id,
            name,
            leaf_split: cfg.split_size(cfg.leaf_page_max),
            internal_split: cfg.split_size(cfg.internal_page_max),
            memory_page_max,
            cfg,
            file,
            root: RwLock::new(root),
            latches: Latches::new(id),
            cache,
            txns,
            leaf_ids,
            last_checkpoint: Mutex::new(ckpt),
            dirty_leaves: Mutex::new(Vec::new()),
            successor: Mutex::new(None),
            born_at: AtomicU64::new(0),
            write_at: AtomicU64::new(LATEST),
        }
    }

    /// Takes `structure` shared, waiting for it.
    pub fn structure_shared(&self) -> StructureShared<'_> {
        self.latches.structure_shared()
    }

    /// Takes `structure` shared if no one holds it exclusively (nor waits to).
    pub fn try_structure_shared(&self) -> Option<StructureShared<'_>> {
        self.latches.try_structure_shared()
    }

    /// Takes `structure` exclusively, waiting for it.
    pub fn structure_exclusive(&self) -> StructureExclusive<'_> {
        self.latches.structure_exclusive()
    }

    /// Takes `writers` shared, waiting for it: a batch applying to this table holds it.
    pub fn writers_shared(&self) -> WritersShared {
        self.latches.writers_shared()
    }

    /// Whether `held` is this table's `writers` latch.
    pub fn is_writing(&self, held: &WritersShared) -> bool {
        self.latches.holds_writers(held)
    }

    /// Takes `writers` exclusively, waiting for it: a compaction copying this table holds it.
    pub fn writers_exclusive(&self) -> WritersExclusive {
        self.latches.writers_exclusive()
    }

    /// Asserts that `held` is this table's `writers` latch: its writers wait.
    pub fn assert_writers_excluded(&self, held: &WritersExclusive) {
        assert!(
            self.latches.excludes_writers(held),
            "table {} is copied while its writers go on",
            self.id
        );
    }

    /// Asserts that `held` is this table's `structure` latch.
    pub(super) fn assert_structure(&self, held: &impl HoldsStructure) {
        assert!(
            self.latches.holds_structure(held),
            "table {} is changed under the structure latch of table {}",
            self.id,
            held.table()
        );
    }

    /// Records that `next` replaced this table (in the catalog, under its write latch).
    pub fn set_successor(&self, next: Arc<Table>) {
        let mut s = self.successor.lock();
        assert!(s.is_none(), "a table is replaced once");
        *s = Some(next);
    }

    /// The last commit number when this table was copied from another (0: never).
    pub fn born_at(&self) -> u64 {
        self.born_at.load(Ordering::Acquire)
    }

    /// Records that this table is a copy of its source as of commit `csn`.
    pub fn set_born_at(&self, csn: u64) {
        self.born_at.store(csn, Ordering::Release);
    }

    /// The commit number pages are written at now (`write_at`).
    pub fn write_at(&self) -> u64 {
        self.write_at.load(Ordering::SeqCst)
    }

    /// The oldest commit number a reader of this table may read at (`Txns::oldest`), the open
    /// checkpoint cut included while it has not written this table.
    pub fn oldest(&self) -> u64 {
        if self.write_at() == LATEST {
            self.txns.oldest_reader()
        } else {
            self.txns.oldest()
        }
    }

    /// A checkpoint's cut at commit number `cut` begins for this table: its pages are written
    /// as the cut sees them until the checkpoint has written the table.
    pub fn open_cut(&self, cut: u64) {
        self.write_at.store(cut, Ordering::SeqCst);
    }

    /// The checkpoint's cut ends for this table (it is written, or the checkpoint failed).
    /// Under `structure` held exclusively, as every reconciliation reads `write_at` and
    /// `oldest` under it: the cut does not end under one.
    pub fn close_cut(&self, held: &StructureExclusive<'_>) {
        self.assert_structure(held);
        self.write_at.store(LATEST, Ordering::SeqCst);
    }

    /// Whether a compaction replaced this table.
    pub fn is_replaced(&self) -> bool {
        self.successor.lock().is_some()
    }

    /// The table that holds this one's data now: itself, or the newest of its successors.
    pub fn current(self: &Arc<Self>) -> Arc<Table> {
        let mut t = self.clone();
        // Each hop is one compaction that finished while the holder looked elsewhere.
        loop {
            let next = t.successor.lock().clone();
            match next {
                Some(n) => t = n,
                None => return t,
            }
        }
    }

    /// Opens the table at a checkpoint: reads every internal page (verifying each), leaves
    /// stay on disk until touched.
    pub fn open(
        id: u32,
        name: String,
        cfg: TableConfig,
        file: BlockFile,
        ckpt: FileCheckpoint,
        shared: TreeShared,
    ) -> Result<Table> {
        let root = load_internal(&file, ckpt.root, Vec::new(), &shared.leaf_ids)?;
        Ok(Self::assemble(
            id,
            name,
            cfg,
            file,
            shared,
            root,
            Some(ckpt),
        ))
    }

    /// The leaf whose range holds `key` (the hot path: no bounds copied).
    pub fn leaf_for(&self, key: &[u8]) -> Arc<Leaf> {
        let root = self.root.read();
        let mut n = &*root;
        loop {
            match &n.children[n.child_for(key)] {
                Child::Leaf(l) => return l.clone(),
                Child::Node(c) => n = c,
            }
        }
    }

    /// Descends to a leaf, taking at each node the child `pick` chooses, and returns the leaf
    /// with its key range.
    fn descend(&self, pick: impl Fn(&Internal) -> usize) -> Located {
        let root = self.root.read();
        let (mut lower, mut upper): (Option<&[u8]>, Option<&[u8]>) = (None, None);
        let mut n = &*root;
        loop {
            let i = pick(n);
            if i > 0 {
                lower = Some(&n.keys[i]);
            }
            if i + 1 < n.keys.len() {
                upper = Some(&n.keys[i + 1]);
            }
            match &n.children[i] {
                Child::Leaf(l) => {
                    return Located {
                        leaf: l.clone(),
                        lower: lower.map(|k| k.to_vec()),
                        upper: upper.map(|k| k.to_vec()),
                    }
                }
                Child::Node(c) => n = c,
            }
        }
    }

    /// The leaf whose range holds `key`, with the range's bounds.
    pub fn locate(&self, key: &[u8]) -> Located {
        self.descend(|n| n.child_for(key))
    }

    /// The leaf holding the greatest keys below `key` (for reverse scans).
    pub fn locate_before(&self, key: &[u8]) -> Located {
        self.descend(|n| n.child_before(key))
    }

    /// The rightmost leaf (reverse scans from the end).
    pub fn locate_last(&self) -> Located {
        self.descend(|n| n.children.len() - 1)
    }

    /// Runs `f` on the leaf for `key`, latched and resident. Retries past retired leaves.
    pub fn with_leaf<R>(&self, key: &[u8], f: impl FnOnce(&mut LeafLatch<'_>) -> R) -> Result<R> {
        for attempt in 0.. {
            let leaf = self.leaf_for(key);
            let mut st = leaf.latch();
            if leaf.is_retired() {
                drop(st);
                retired_backoff(attempt);
                continue;
            }
            self.ensure_loaded(&mut st)?;
            return Ok(f(&mut st));
        }
        unreachable!("retired_backoff bounds the retries")
    }

    /// Makes the leaf's page resident, reading and verifying its block (under its latch only).
    pub fn ensure_loaded(&self, st: &mut LeafLatch<'_>) -> Result<()> {
        st.leaf().touch(self.cache.now());
        if st.page().is_some() {
            return Ok(());
        }
        let addr = st.addr().expect("a leaf without a page has a disk image");
        let page = self.read_leaf_page(addr)?;
        self.cache.page_read(st.load(page));
        Ok(())
    }

    /// Reads the leaf image at `addr` and the overflow blocks it references, verifying each.
    pub(super) fn read_leaf_page(&self, addr: Addr) -> Result<LeafPage> {
        let (kind, payload) = self.file.read(addr)?;
        if kind != PageKind::Leaf {
            return Err(self.corrupt(
                addr.offset,
                format!("expected a leaf page, found {}", kind.name()),
            ));
        }
        LeafPage::from_image(payload, |oaddr, len| {
            let (kind, data) = self.file.read(oaddr)?;
            if kind != PageKind::Overflow || data.len() as u64 != len {
                return Err(self.corrupt(oaddr.offset, "bad overflow block".into()));
            }
            Ok(data)
        })
        .map_err(|e| match e {
            ImageError::Malformed(what) => self.corrupt(addr.offset, what),
            ImageError::Overflow(e) => e,
        })
    }

    pub(super) fn corrupt(&self, offset: u64, what: String) -> Error {
        Error::Corrupt {
            file: self.file.path().to_path_buf(),
            offset,
            what,
        }
    }

    /// Puts a dirty leaf on the dirty list unless it is there already (also for a leaf taken
    /// off the list that could not be written then).
    pub fn list_dirty(&self, leaf: &Arc<Leaf>) {
        if leaf.list_dirty() {
            self.dirty_leaves.lock().push(leaf.clone());
        }
    }

    /// Takes the dirty list (every leaf on it is unlisted) and returns the leaves that may
    /// still be dirty: those found dirty, resident and not retired, and those whose latch is
    /// busy (not waited for). A leaf written after it was unlisted is listed again by that
    /// write, so at worst a leaf is both returned and listed.
    pub fn take_dirty(&self) -> Vec<Arc<Leaf>> {
        let mut listed = std::mem::take(&mut *self.dirty_leaves.lock());
        listed.retain(|l| {
            l.unlist_dirty();
            match l.try_latch() {
                Some(st) => st.is_dirty() && st.page().is_some() && !l.is_retired(),
                None => !l.is_retired(),
            }
        });
        listed
    }

    /// Applies a put or delete of commit `csn` to a latched, resident leaf of this table, whose
    /// writers the caller is among; versions below the one a reader at `oldest` sees go.
    pub fn apply(
        &self,
        writing: &WritersShared,
        st: &mut LeafLatch<'_>,
        key: &[u8],
        value: Option<&[u8]>,
        csn: u64,
        oldest: u64,
    ) {
        assert!(
            self.latches.holds_writers(writing),
            "a batch applies to table {} under another table's writers latch",
            self.id
        );
        debug_assert!(
            !st.leaf().is_retired(),
            "a batch is applied to a retired leaf"
        );
        let value = value.map(|v| {
            if v.len() > self.cfg.leaf_value_max as usize {
                Value::Overflow {
                    data: v.to_vec(),
                    addr: None,
                }
            } else {
                Value::Inline(v.to_vec())
            }
        });
        let applied = st.apply(key, value, csn, oldest);
        if applied.dirtied {
            self.cache.leaf_changed(applied.was_dirty);
            self.cache
                .page_changed(applied.delta, st.mem(), applied.was_dirty);
            self.list_dirty(st.leaf());
        }
    }

    /// A leaf grown past `memory_page_max` should be reconciled (split) now.
    pub fn needs_forced_split(&self, st: &LeafState) -> bool {
        st.mem() > self.memory_page_max
    }

    /// Reconciles a leaf of this table (under its `structure` latch, which the caller holds,
    /// shared or exclusively) and applies the result.
    /// Returns the leaves that now hold its entries: itself, or the pieces of a split (none if
    /// it was retired meanwhile).
    ///
    /// During a checkpoint's cut the page is written as the cut sees it (`write_at`); versions
    /// newer than the cut stay in memory and the page stays dirty.
    pub fn reconcile(
        &self,
        held: &impl HoldsStructure,
        leaf: &Arc<Leaf>,
        cause: WriteCause,
    ) -> Result<Vec<Arc<Leaf>>> {
        self.assert_structure(held);
        let mut st = leaf.latch();
        if leaf.is_retired() {
            return Ok(Vec::new());
        }
        let at = self.write_at();
        let (dirty, never_written) = (st.is_dirty(), st.addr().is_none());
        debug_assert!(!dirty || st.page().is_some(), "a dirty leaf is resident");
        debug_assert!(
            !dirty || never_written || st.page().is_some_and(|p| p.unwritten_at(LATEST)),
            "a dirty leaf has versions its image lacks"
        );
        let due = dirty
            && st
                .page()
                .is_some_and(|p| p.unwritten_at(at) || never_written);
        let result = if due {
            st.reconcile_page(|page| self.reconciler().leaf(page, leaf.page_id(), cause, at))
                .expect("a dirty leaf is resident")?
        } else {
            Reconciled::Clean
        };
        Ok(self.apply_reconciled(st, result, at))
    }

    fn reconciler(&self) -> Reconciler<'_> {
        Reconciler {
            file: &self.file,
            cfg: &self.cfg,
            leaf_split: self.leaf_split,
            page_ids: &self.leaf_ids,
        }
    }

    /// Applies what reconciliation at `at` returned to the latched leaf: its page rebuilt from
    /// the new image(s) (`rebuild_pages`), then put back in place, or for a split the leaf
    /// retired and its pieces put in the parent (splitting internal nodes as needed).
    fn apply_reconciled(
        &self,
        mut st: LeafLatch<'_>,
        result: Reconciled,
        at: u64,
    ) -> Vec<Arc<Leaf>> {
        let mut pieces = match result {
            Reconciled::Clean => return vec![st.leaf().clone()],
            Reconciled::Replace(piece) => vec![piece],
            Reconciled::Split(pieces) => pieces,
        };
        let rebuilt = self.rebuild_pages(&mut st, &mut pieces, at);
        debug_assert_eq!(rebuilt.len(), pieces.len(), "a page per piece");
        if pieces.len() == 1 {
            let leaf = st.leaf();
            let piece = pieces.pop().expect("one piece");
            let (page, pending) = rebuilt.into_iter().next().expect("one page");
            st.rebuilt(LeafState::written(page, piece.addr, pending));
            let dirty = st.is_dirty();
            drop(st);
            if dirty {
                self.list_dirty(leaf);
            }
            self.mark_path_dirty(leaf.route());
            return vec![leaf.clone()];
        }
        self.split_leaf(st, pieces, rebuilt)
    }

    /// Rebuilds the latched leaf's page from the new image(s) written at `at`, one page per
    /// piece: the versions the images hold are folded in, the older ones an open snapshot may
    /// read and the newer ones they lack stay beside them. Frees the old image and the
    /// overflow blocks no new image references, and moves the cache's charge to the new
    /// pages. Returns each page with the overflow blocks its image references but it does not
    /// (freed with its next image); the leaf is left with nothing.
    fn rebuild_pages(
        &self,
        st: &mut LeafLatch<'_>,
        pieces: &mut [Piece],
        at: u64,
    ) -> Vec<(LeafPage, Vec<Addr>)> {
        let taken = st.take_for_rebuild();
        if let Some(old) = taken.addr {
            self.file.free(old);
        }
        self.cache.page_written(taken.mem);
        let mut left = taken.page.into_history(self.oldest(), at);
        // Each piece's versions: those from its separator on (pieces are in key order).
        let mut histories: Vec<_> = pieces
            .iter()
            .skip(1)
            .rev()
            .map(|p| left.history.split_off(p.separator.as_slice()))
            .collect();
        histories.push(std::mem::take(&mut left.history));
        histories.reverse();
        let overflow = &left.overflow;
        let mut rebuilt: Vec<(LeafPage, Vec<Addr>)> = pieces
            .iter_mut()
            .zip(histories)
            .map(|(p, history)| {
                let page = LeafPage::from_image(std::mem::take(&mut p.image), |addr, _| {
                    let found = overflow.iter().find(|(a, _)| *a == addr);
                    found.map(|(_, data)| data.clone()).ok_or(addr)
                });
                let mut page = page
                    .expect("a reconciled image indexes, and its page holds its overflow values");
                page.adopt_history(history, at);
                (page, Vec::new())
            })
            .collect();
        // An overflow block the old image alone referenced goes now; one a new image still
        // references (its key has versions newer than the cut) waits for that piece's next
        // image.
        let mut to_free = taken.pending_free;
        to_free.extend(left.superseded);
        to_free.sort_unstable_by_key(|a| a.offset);
        to_free.dedup();
        for a in to_free {
            match rebuilt
                .iter_mut()
                .find(|(page, _)| page.image_overflow().any(|o| o == a))
            {
                Some((_, pending)) => pending.push(a),
                None => self.file.free(a),
            }
        }
        let new_mem: usize = rebuilt.iter().map(|(p, _)| p.mem()).sum();
        self.cache.page_reimaged(taken.mem, new_mem);
        for (page, _) in &rebuilt {
            if page.unwritten_at(LATEST) {
                self.cache.page_changed(0, page.mem(), false);
            }
        }
        rebuilt
    }

    /// A split: the latched leaf retires; one new leaf per piece holds its rebuilt page, and
    /// the pieces take its place in the parent. Returns the new leaves.
    fn split_leaf(
        &self,
        mut st: LeafLatch<'_>,
        pieces: Vec<Piece>,
        rebuilt: Vec<(LeafPage, Vec<Addr>)>,
    ) -> Vec<Arc<Leaf>> {
        let leaf = st.leaf();
        st.retire();
        let mut new_leaves: Vec<(Vec<u8>, Arc<Leaf>)> = Vec::with_capacity(pieces.len());
        for (i, (p, (page, pending))) in pieces.into_iter().zip(rebuilt).enumerate() {
            let route = if i == 0 {
                leaf.route().to_vec()
            } else {
                p.separator.clone()
            };
            let dirty = page.unwritten_at(LATEST);
            let l = Leaf::new(
                self.leaf_ids.fetch_add(1, Ordering::Relaxed),
                p.page_id,
                route,
                LeafState::written(page, p.addr, pending),
            );
            l.touch(leaf.last_access());
            if dirty {
                self.list_dirty(&l);
            }
            new_leaves.push((p.separator, l));
        }
        drop(st);
        let out = new_leaves.iter().map(|(_, l)| l.clone()).collect();
        self.replace_leaf(leaf, new_leaves);
        out
    }

    fn mark_path_dirty(&self, route: &[u8]) {
        let root = self.root.read();
        let mut n = &*root;
        loop {
            n.mark_dirty();
            match &n.children[n.child_for(route)] {
                Child::Leaf(_) => return,
                Child::Node(c) => n = c,
            }
        }
    }

    /// Every leaf, in key order, with whether its page is resident and dirty.
    pub fn leaves(&self) -> Vec<Arc<Leaf>> {
        let root = self.root.read();
        let mut out = Vec::new();
        collect_leaves(&root, &mut out);
        out
    }

    /// Writes the internal pages whose children moved, bottom-up, and the root last
    /// (first-fit), for a checkpoint, under `structure` held exclusively; every leaf must be written already. Returns the root's
    /// address, or `None` when nothing changed since the last checkpoint (which then stands).
    pub fn write_internal_pages(&self, held: &StructureExclusive<'_>) -> Result<Option<Addr>> {
        self.assert_structure(held);
        let mut root = self.root.write();
        if !root.dirty.load(Ordering::Relaxed) && self.last_checkpoint.lock().is_some() {
            return Ok(None);
        }
        self.write_internal(&mut root, true).map(Some)
    }

    /// The table's newest written checkpoint.
    pub fn last_checkpoint(&self) -> Option<FileCheckpoint> {
        *self.last_checkpoint.lock()
    }

    pub fn set_last_checkpoint(&self, c: FileCheckpoint) {
        *self.last_checkpoint.lock() = Some(c);
    }

    fn write_internal(&self, node: &mut Internal, is_root: bool) -> Result<Addr> {
        let mut child_addrs = Vec::with_capacity(node.children.len());
        for c in node.children.iter_mut() {
            let a = match c {
                Child::Node(n) => match n.addr {
                    Some(a) if !n.dirty.load(Ordering::Relaxed) => a,
                    _ => self.write_internal(n, false)?,
                },
                Child::Leaf(l) => l
                    .latch()
                    .addr()
                    .expect("leaves are written before internal pages"),
            };
            child_addrs.push(a);
        }
        if !node.dirty.load(Ordering::Relaxed) {
            if let Some(a) = node.addr {
                return Ok(a);
            }
        }
        let payload = page::encode_internal(
            node.level,
            node.keys
                .iter()
                .enumerate()
                .map(|(i, k)| if i == 0 { &[][..] } else { k.as_slice() })
                .zip(child_addrs),
        );
        let kind = if is_root {
            PageKind::Root
        } else {
            PageKind::Internal
        };
        let img = build_block(kind, &payload, self.cfg.compressor)?;
        // WiredTiger writes roots first-fit (block_ckpt.c).
        let addr = self
            .file
            .write(&img, kind, is_root, node.page_id, WriteCause::Checkpoint)?;
        if let Some(old) = node.addr.replace(addr) {
            self.file.free(old);
        }
        node.dirty.store(false, Ordering::Relaxed);
        Ok(addr)
    }

    /// Bytes of the resident internal nodes (charged to the cache by the engine).
    pub fn internal_bytes(&self) -> usize {
        fn walk(n: &Internal) -> usize {
            n.image_len()
                + n.children
                    .iter()
                    .map(|c| match c {
                        Child::Node(c) => walk(c),
                        Child::Leaf(_) => 0,
                    })
                    .sum::<usize>()
        }
        walk(&self.root.read())
    }

    /// Tree depth (levels of internal nodes) and leaf count, for statistics.
    pub fn shape(&self) -> (u32, usize) {
        // One read of the root for both: a second `read()` while this one is held (as through
        // `leaves()`) deadlocks once a writer queues between them (parking_lot is fair to
        // writers); seen as a 22-minute hang of an engine model test.
        let root = self.root.read();
        let mut leaves = Vec::new();
        collect_leaves(&root, &mut leaves);
        (root.level as u32 + 1, leaves.len())
    }

    /// Drops every resident page (the table is closed, dropped, or replaced by a compaction),
    /// under `structure` held exclusively: no reconciliation is writing one of its leaves.
    pub fn release_cache(&self, held: &StructureExclusive<'_>) {
        self.assert_structure(held);
        for l in self.leaves() {
            if let Some((mem, dirty)) = l.latch().release() {
                self.cache.page_released(mem, dirty);
            }
        }
    }
}

/// The on-disk addresses of every internal page written so far (verify reads them).
pub(super) fn collect_internal_addrs(n: &Internal, out: &mut Vec<Addr>) {
    out.extend(n.addr);
    for c in &n.children {
        if let Child::Node(inner) = c {
            collect_internal_addrs(inner, out);
        }
    }
}

fn collect_leaves(n: &Internal, out: &mut Vec<Arc<Leaf>>) {
    for c in &n.children {
        match c {
            Child::Leaf(l) => out.push(l.clone()),
            Child::Node(c) => collect_leaves(c, out),
        }
    }
}

fn load_internal(
    file: &BlockFile,
    addr: Addr,
    route: Vec<u8>,
    leaf_ids: &AtomicU64,
) -> Result<Internal> {
    let (kind, payload) = file.read(addr)?;
    if kind != PageKind::Root && kind != PageKind::Internal {
        return Err(Error::Corrupt {
            file: file.path().to_path_buf(),
            offset: addr.offset,
            what: format!("expected an internal page, found {}", kind.name()),
        });
    }
    let (level, entries) = page::decode_internal(&payload).map_err(|what| Error::Corrupt {
        file: file.path().to_path_buf(),
        offset: addr.offset,
        what,
    })?;
    let mut keys = Vec::with_capacity(entries.len());
    let mut children = Vec::with_capacity(entries.len());
    for (i, (k, a)) in entries.into_iter().enumerate() {
        let child_route = if i == 0 { route.clone() } else { k.clone() };
        let child = if level == 0 {
            Child::Leaf(Leaf::new(
                leaf_ids.fetch_add(1, Ordering::Relaxed),
                leaf_ids.fetch_add(1, Ordering::Relaxed),
                child_route,
                LeafState::on_disk(a),
            ))
        } else {
            Child::Node(Box::new(load_internal(file, a, child_route, leaf_ids)?))
        };
        keys.push(if i == 0 { Vec::new() } else { k });
        children.push(child);
    }
    Ok(Internal {
        keys,
        children,
        level,
        addr: Some(addr),
        dirty: AtomicBool::new(false),
        page_id: leaf_ids.fetch_add(1, Ordering::Relaxed),
    })
}
