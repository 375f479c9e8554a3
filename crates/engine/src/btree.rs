//! One table: a copy-on-write B+tree in one block file.
//!
//! In memory, internal nodes are always resident (they are ~1% of a tree) and hold their
//! children; leaves are shared handles (`Arc<Leaf>`) whose page may be resident or only on disk.
//!
//! Latching, chosen so that no lock is held across I/O except a page's own latch:
//! - `root` (RwLock): readers and writers take it only to descend to a leaf, then drop it.
//! - `Leaf::state` (Mutex): the page latch. Reading a page from disk, editing it, and
//!   reconciling it happen under it, so writers to other leaves never wait on that I/O.
//! - `structure` (Mutex): whoever changes leaf addresses or the tree's shape (reconciliation
//!   by eviction or a checkpoint) holds it; a checkpoint holds it for its whole pass over the
//!   table, so the tree it writes is one consistent tree.
//!
//! Lock order: structure → root → leaf. A leaf is never held while taking `root`.
//! A leaf that was split is *retired*; whoever latches a retired leaf looks it up again.
//! Leaves split only at reconciliation (when their image exceeds the split size, or their
//! in-memory size exceeds `memory_page_max`); internal nodes split when their image would
//! exceed `internal_page_max`.

use crate::block::{build_block, Addr, BlockFile, FileCheckpoint};
use crate::cache::{Cache, ENTRY_OVERHEAD};
use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::page::{self, LeafWriter, StoredValue};
use parking_lot::{Mutex, RwLock};
use placement::{PageKind, WriteCause};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Keys longer than this are refused (an internal page must hold at least a few of them).
pub const MAX_KEY_LEN: usize = 64 * 1024;

#[derive(Clone, Debug)]
pub enum Value {
    Inline(Vec<u8>),
    /// Longer than `leaf_value_max`: kept in its own block; `addr` once written.
    Overflow {
        data: Vec<u8>,
        addr: Option<Addr>,
    },
}

impl Value {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Value::Inline(v) => v,
            Value::Overflow { data, .. } => data,
        }
    }
}

pub type PageMap = BTreeMap<Vec<u8>, Value>;

pub struct LeafState {
    /// The resident page, or `None` when only the disk image exists.
    pub page: Option<PageMap>,
    pub addr: Option<Addr>,
    pub dirty: bool,
    /// Bytes charged to the cache for `page`.
    pub mem: usize,
    /// Overflow blocks the current disk image references but the page no longer does: freed
    /// when the next image is written.
    pending_free: Vec<Addr>,
}

pub struct Leaf {
    /// Engine-wide unique: batches latch leaves in id order.
    pub id: u64,
    /// The logical page this leaf holds, kept across its copy-on-write moves (and by the
    /// first piece of a split), reported with every write of it.
    pub page_id: u64,
    /// A key that routes to this leaf (its lower bound when it was created).
    route: Vec<u8>,
    pub state: Mutex<LeafState>,
    last_access: AtomicU64,
    retired: AtomicBool,
}

impl Leaf {
    fn new(id: u64, page_id: u64, route: Vec<u8>, st: LeafState) -> Arc<Leaf> {
        Arc::new(Leaf {
            id,
            page_id,
            route,
            state: Mutex::new(st),
            last_access: AtomicU64::new(0),
            retired: AtomicBool::new(false),
        })
    }
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }
    pub fn touch(&self, now: u64) {
        self.last_access.store(now, Ordering::Relaxed);
    }
    pub fn last_access(&self) -> u64 {
        self.last_access.load(Ordering::Relaxed)
    }
}

struct Internal {
    /// `keys[i]` is the lower bound of `children[i]`; `keys[0]` is unused (empty).
    keys: Vec<Vec<u8>>,
    children: Vec<Child>,
    /// 0: the children are leaves.
    level: u8,
    addr: Option<Addr>,
    dirty: AtomicBool,
    /// The logical page id reported with this node's writes.
    page_id: u64,
}

enum Child {
    Leaf(Arc<Leaf>),
    Node(Box<Internal>),
}

impl Internal {
    fn child_for(&self, key: &[u8]) -> usize {
        self.keys[1..].partition_point(|k| k.as_slice() <= key)
    }
    /// The child holding the greatest key below `key`.
    fn child_before(&self, key: &[u8]) -> usize {
        self.keys[1..].partition_point(|k| k.as_slice() < key)
    }
    fn image_len(&self) -> usize {
        5 + self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| page::internal_entry_len(if i == 0 { 0 } else { k.len() }))
            .sum::<usize>()
    }
    fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }
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
    root: RwLock<Internal>,
    pub structure: Mutex<()>,
    cache: Arc<Cache>,
    leaf_ids: Arc<AtomicU64>,
    leaf_split: usize,
    internal_split: usize,
    memory_page_max: usize,
    last_checkpoint: Mutex<Option<FileCheckpoint>>,
}

impl Table {
    /// A new, empty table: a root over one empty leaf, nothing written yet.
    pub fn new(
        id: u32,
        name: String,
        cfg: TableConfig,
        file: BlockFile,
        cache: Arc<Cache>,
        leaf_ids: Arc<AtomicU64>,
    ) -> Table {
        let leaf_id = leaf_ids.fetch_add(1, Ordering::Relaxed);
        let leaf = Leaf::new(
            leaf_id,
            leaf_id,
            Vec::new(),
            LeafState {
                page: Some(PageMap::new()),
                addr: None,
                dirty: true,
                mem: 0,
                pending_free: Vec::new(),
            },
        );
        let root = Internal {
            keys: vec![Vec::new()],
            children: vec![Child::Leaf(leaf)],
            level: 0,
            addr: None,
            dirty: AtomicBool::new(true),
            page_id: leaf_ids.fetch_add(1, Ordering::Relaxed),
        };
        Self::assemble(id, name, cfg, file, cache, leaf_ids, root, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        id: u32,
        name: String,
        cfg: TableConfig,
        file: BlockFile,
        cache: Arc<Cache>,
        leaf_ids: Arc<AtomicU64>,
        root: Internal,
        ckpt: Option<FileCheckpoint>,
    ) -> Table {
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
            structure: Mutex::new(()),
            cache,
            leaf_ids,
            last_checkpoint: Mutex::new(ckpt),
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
        cache: Arc<Cache>,
        leaf_ids: Arc<AtomicU64>,
    ) -> Result<Table> {
        let root = load_internal(&file, ckpt.root, Vec::new(), &leaf_ids)?;
        Ok(Self::assemble(
            id,
            name,
            cfg,
            file,
            cache,
            leaf_ids,
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
    pub fn with_leaf<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&Leaf, &mut LeafState) -> R,
    ) -> Result<R> {
        loop {
            let leaf = self.leaf_for(key);
            let mut st = leaf.state.lock();
            if leaf.is_retired() {
                drop(st);
                std::thread::yield_now();
                continue;
            }
            self.ensure_loaded(&leaf, &mut st)?;
            return Ok(f(&leaf, &mut st));
        }
    }

    /// Makes the leaf's page resident, reading and verifying its block (under its latch only).
    pub fn ensure_loaded(&self, leaf: &Leaf, st: &mut LeafState) -> Result<()> {
        leaf.last_access.store(self.cache.now(), Ordering::Relaxed);
        if st.page.is_some() {
            return Ok(());
        }
        let addr = st.addr.expect("a leaf without a page has a disk image");
        let (kind, payload) = self.file.read(addr)?;
        if kind != PageKind::Leaf {
            return Err(self.corrupt(
                addr.offset,
                format!("expected a leaf page, found {}", kind.name()),
            ));
        }
        let mut map = PageMap::new();
        let mut mem = 0usize;
        let mut overflow = Vec::new();
        page::decode_leaf(&payload, |k, v| match v {
            StoredValue::Inline(b) => {
                mem += k.len() + b.len() + ENTRY_OVERHEAD;
                map.insert(k, Value::Inline(b.to_vec()));
            }
            StoredValue::Overflow { addr, len } => overflow.push((k, addr, len)),
        })
        .map_err(|what| self.corrupt(addr.offset, what))?;
        for (k, oaddr, len) in overflow {
            let (kind, data) = self.file.read(oaddr)?;
            if kind != PageKind::Overflow || data.len() as u64 != len {
                return Err(self.corrupt(oaddr.offset, "bad overflow block".into()));
            }
            mem += k.len() + data.len() + ENTRY_OVERHEAD;
            map.insert(
                k,
                Value::Overflow {
                    data,
                    addr: Some(oaddr),
                },
            );
        }
        self.cache.add(mem as i64);
        self.cache.pages_read.fetch_add(1, Ordering::Relaxed);
        st.mem = mem;
        st.page = Some(map);
        Ok(())
    }

    fn corrupt(&self, offset: u64, what: String) -> Error {
        Error::Corrupt {
            file: self.file.path().to_path_buf(),
            offset,
            what,
        }
    }

    /// Applies a put or delete to a latched, resident leaf.
    pub fn apply(&self, st: &mut LeafState, key: &[u8], value: Option<&[u8]>) {
        let page = st.page.as_mut().expect("resident");
        let mut delta: i64 = 0;
        let old = match value {
            Some(v) => {
                let val = if v.len() > self.cfg.leaf_value_max as usize {
                    Value::Overflow {
                        data: v.to_vec(),
                        addr: None,
                    }
                } else {
                    Value::Inline(v.to_vec())
                };
                delta += (key.len() + v.len() + ENTRY_OVERHEAD) as i64;
                page.insert(key.to_vec(), val)
            }
            None => page.remove(key),
        };
        if let Some(old) = old {
            delta -= (key.len() + old.bytes().len() + ENTRY_OVERHEAD) as i64;
            if let Value::Overflow { addr: Some(a), .. } = old {
                st.pending_free.push(a);
            }
        }
        st.mem = (st.mem as i64 + delta).max(0) as usize;
        self.cache.add(delta);
        if st.dirty {
            self.cache.add_dirty(delta);
        } else {
            st.dirty = true;
            self.cache.add_dirty(st.mem as i64);
        }
    }

    /// A leaf grown past `memory_page_max` should be reconciled (split) now.
    pub fn needs_forced_split(&self, st: &LeafState) -> bool {
        st.mem > self.memory_page_max
    }

    /// Writes a dirty leaf as new block(s), freeing its old image; splits it if it no longer
    /// fits one page. With `evict`, the page leaves memory afterwards. The caller holds
    /// `structure`.
    pub fn reconcile(&self, leaf: &Arc<Leaf>, cause: WriteCause) -> Result<()> {
        let evict = cause == WriteCause::Eviction;
        let mut st = leaf.state.lock();
        if leaf.is_retired() {
            return Ok(());
        }
        if !st.dirty {
            if evict && st.page.is_some() && st.addr.is_some() {
                st.page = None;
                self.cache.add(-(st.mem as i64));
                st.mem = 0;
                self.cache.pages_evicted.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(());
        }
        let page = st.page.as_mut().expect("a dirty leaf is resident");
        // Overflow values are written once and referenced by every later image.
        for v in page.values_mut() {
            if let Value::Overflow {
                data,
                addr: a @ None,
            } = v
            {
                let img = build_block(PageKind::Overflow, data, self.cfg.compressor)?;
                *a = Some(self.file.write(&img, PageKind::Overflow, false, 0, cause)?);
            }
        }
        let chunks = self.chunk(page);
        // The first piece keeps the page's identity; further pieces are new pages.
        let page_ids: Vec<u64> = (0..chunks.len())
            .map(|i| {
                if i == 0 {
                    leaf.page_id
                } else {
                    self.leaf_ids.fetch_add(1, Ordering::Relaxed)
                }
            })
            .collect();
        let mut written: Vec<Addr> = Vec::with_capacity(chunks.len());
        for ((_, payload), &pid) in chunks.iter().zip(&page_ids) {
            let res = build_block(PageKind::Leaf, payload, self.cfg.compressor)
                .and_then(|img| self.file.write(&img, PageKind::Leaf, false, pid, cause));
            match res {
                Ok(a) => written.push(a),
                Err(e) => {
                    for a in written {
                        self.file.free(a);
                    }
                    return Err(e);
                }
            }
        }
        if let Some(old) = st.addr.take() {
            self.file.free(old);
        }
        for a in std::mem::take(&mut st.pending_free) {
            self.file.free(a);
        }
        self.cache.add_dirty(-(st.mem as i64));
        self.cache
            .dirty_pages_written
            .fetch_add(1, Ordering::Relaxed);
        st.dirty = false;
        if written.len() == 1 {
            st.addr = Some(written[0]);
            if evict {
                st.page = None;
                self.cache.add(-(st.mem as i64));
                st.mem = 0;
                self.cache.pages_evicted.fetch_add(1, Ordering::Relaxed);
            }
            drop(st);
            self.mark_path_dirty(&leaf.route);
            return Ok(());
        }
        // Split: the old leaf retires; its entries move to one new leaf per chunk.
        let mut page = st.page.take().expect("resident");
        self.cache.add(-(st.mem as i64));
        st.mem = 0;
        leaf.retired.store(true, Ordering::Release);
        let mut new_leaves: Vec<(Vec<u8>, Arc<Leaf>)> = Vec::with_capacity(chunks.len());
        for (i, ((sep, _), addr)) in chunks.iter().zip(&written).enumerate().rev() {
            let part = if i == 0 {
                std::mem::take(&mut page)
            } else {
                page.split_off(sep.as_slice())
            };
            let (resident, mem) = if evict {
                (None, 0)
            } else {
                let mem: usize = part
                    .iter()
                    .map(|(k, v)| k.len() + v.bytes().len() + ENTRY_OVERHEAD)
                    .sum();
                self.cache.add(mem as i64);
                (Some(part), mem)
            };
            let route = if i == 0 {
                leaf.route.clone()
            } else {
                sep.clone()
            };
            let l = Leaf::new(
                self.leaf_ids.fetch_add(1, Ordering::Relaxed),
                page_ids[i],
                route,
                LeafState {
                    page: resident,
                    addr: Some(*addr),
                    dirty: false,
                    mem,
                    pending_free: Vec::new(),
                },
            );
            l.last_access.store(leaf.last_access(), Ordering::Relaxed);
            new_leaves.push((sep.clone(), l));
        }
        new_leaves.reverse();
        if evict {
            self.cache.pages_evicted.fetch_add(1, Ordering::Relaxed);
        }
        drop(st);
        self.replace_leaf(leaf, new_leaves);
        Ok(())
    }

    /// Cuts a page into payloads of about equal size, each at most the split size (unless a
    /// single entry is larger). Returns (separator, payload); the first separator is unused.
    fn chunk(&self, page: &PageMap) -> Vec<(Vec<u8>, Vec<u8>)> {
        let pc = self.cfg.prefix_compression;
        fn stored(v: &Value) -> StoredValue<'_> {
            match v {
                Value::Inline(b) => StoredValue::Inline(b),
                Value::Overflow { data, addr } => StoredValue::Overflow {
                    addr: addr.expect("overflow written before its leaf"),
                    len: data.len() as u64,
                },
            }
        }
        // Size without prefix compression bounds the real size from above.
        let probe = LeafWriter::new(false);
        let total: usize = 4 + page
            .iter()
            .map(|(k, v)| probe.entry_len(k, &stored(v)))
            .sum::<usize>();
        let pieces = total.div_ceil(self.leaf_split).max(1);
        let target = total.div_ceil(pieces);
        let mut out = Vec::with_capacity(pieces);
        let mut w = LeafWriter::new(pc);
        let mut sep: Vec<u8> = Vec::new();
        let mut prev_key: &[u8] = &[];
        for (k, v) in page {
            let sv = stored(v);
            if !w.is_empty()
                && (w.len() >= target || w.len() + w.entry_len(k, &sv) > self.leaf_split)
                && out.len() + 1 < pieces * 2
            {
                out.push((
                    std::mem::take(&mut sep),
                    std::mem::replace(&mut w, LeafWriter::new(pc)).finish(),
                ));
                sep = separator(prev_key, k);
            }
            w.push(k, &sv);
            prev_key = k;
        }
        out.push((sep, w.finish()));
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

    /// Puts `new` in place of the retired `old` in its parent, then splits internal nodes
    /// that grew past their maximum, up to the root.
    fn replace_leaf(&self, old: &Arc<Leaf>, new: Vec<(Vec<u8>, Arc<Leaf>)>) {
        let mut root = self.root.write();
        let split = self.internal_split;
        let max = self.cfg.internal_page_max as usize;
        let mut siblings = replace_in(&mut root, old, new, split, max, &self.leaf_ids);
        // While the root splits (a very wide split can leave even a new root too large), grow
        // the tree by one level over the old root and its new siblings.
        while let Some(pieces) = siblings {
            let old_root = std::mem::replace(
                &mut *root,
                Internal {
                    keys: Vec::new(),
                    children: Vec::new(),
                    level: 0,
                    addr: None,
                    dirty: AtomicBool::new(true),
                    page_id: 0,
                },
            );
            let level = old_root.level + 1;
            let mut keys = vec![Vec::new()];
            let mut children = vec![Child::Node(Box::new(old_root))];
            for (k, n) in pieces {
                keys.push(k);
                children.push(Child::Node(n));
            }
            *root = Internal {
                keys,
                children,
                level,
                addr: None,
                dirty: AtomicBool::new(true),
                page_id: self.leaf_ids.fetch_add(1, Ordering::Relaxed),
            };
            siblings = (root.image_len() > max && root.children.len() > 2)
                .then(|| split_node(&mut root, split, &self.leaf_ids));
        }
    }

    /// Every leaf, in key order, with whether its page is resident and dirty.
    pub fn leaves(&self) -> Vec<Arc<Leaf>> {
        let root = self.root.read();
        let mut out = Vec::new();
        collect_leaves(&root, &mut out);
        out
    }

    /// This table's part of a checkpoint: dirty leaves, then internal pages bottom-up, the root
    /// last (first-fit), then the extent lists and an fdatasync. A clean table is skipped.
    /// The caller holds `structure`.
    pub fn checkpoint(&self) -> Result<FileCheckpoint> {
        for leaf in self.leaves() {
            if leaf.state.lock().dirty {
                self.reconcile(&leaf, WriteCause::Checkpoint)?;
            }
        }
        let mut root = self.root.write();
        if !root.dirty.load(Ordering::Relaxed) {
            if let Some(c) = *self.last_checkpoint.lock() {
                return Ok(c);
            }
        }
        let root_addr = self.write_internal(&mut root, true)?;
        drop(root);
        let ckpt = self.file.checkpoint(root_addr)?;
        *self.last_checkpoint.lock() = Some(ckpt);
        Ok(ckpt)
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
                    .state
                    .lock()
                    .addr
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
        let root = self.root.read();
        (root.level as u32 + 1, self.leaves().len())
    }

    /// Drops every resident page (used on close) and returns the bytes released.
    pub fn release_cache(&self) {
        for l in self.leaves() {
            let mut st = l.state.lock();
            if st.page.is_some() {
                self.cache.add(-(st.mem as i64));
                if st.dirty {
                    self.cache.add_dirty(-(st.mem as i64));
                }
                st.page = None;
                st.mem = 0;
            }
        }
    }

    /// Reads every block of the tree from the file and checks it: checksums, page kinds, key
    /// order. Internal pages and the on-disk image of resident leaves are read too, so a
    /// corrupted block is found even while its page is cached. Returns the number of entries.
    pub fn verify(&self) -> Result<u64> {
        let mut internal = Vec::new();
        collect_internal_addrs(&self.root.read(), &mut internal);
        for addr in internal {
            let (kind, _) = self.file.read(addr)?;
            if kind == PageKind::Leaf {
                return Err(self.corrupt(addr.offset, "expected an internal page".into()));
            }
        }
        let mut n = 0u64;
        let mut prev: Option<Vec<u8>> = None;
        for leaf in self.leaves() {
            let st = leaf.state.lock();
            if let (Some(_), Some(addr)) = (&st.page, st.addr) {
                let (kind, _) = self.file.read(addr)?;
                if kind != PageKind::Leaf {
                    return Err(self.corrupt(addr.offset, "expected a leaf".into()));
                }
            }
            let mut check_keys = |keys: &mut dyn Iterator<Item = Vec<u8>>| -> Result<()> {
                for k in keys {
                    if let Some(p) = &prev {
                        if *p >= k {
                            return Err(self.corrupt(0, "keys out of order".into()));
                        }
                    }
                    prev = Some(k);
                    n += 1;
                }
                Ok(())
            };
            match (&st.page, st.addr) {
                (Some(p), _) => check_keys(&mut p.keys().cloned())?,
                (None, Some(addr)) => {
                    let (kind, payload) = self.file.read(addr)?;
                    if kind != PageKind::Leaf {
                        return Err(self.corrupt(addr.offset, "expected a leaf".into()));
                    }
                    let mut keys = Vec::new();
                    let mut ovfl = Vec::new();
                    page::decode_leaf(&payload, |k, v| {
                        if let StoredValue::Overflow { addr, .. } = v {
                            ovfl.push(addr);
                        }
                        keys.push(k);
                    })
                    .map_err(|w| self.corrupt(addr.offset, w))?;
                    for a in ovfl {
                        self.file.read(a)?;
                    }
                    check_keys(&mut keys.into_iter())?;
                }
                (None, None) => unreachable!("a leaf is resident or on disk"),
            }
        }
        Ok(n)
    }
}

/// The shortest key `s` with `prev < s <= next` (WiredTiger's internal-key truncation).
fn separator(prev: &[u8], next: &[u8]) -> Vec<u8> {
    let common = prev.iter().zip(next).take_while(|(a, b)| a == b).count();
    next[..(common + 1).min(next.len())].to_vec()
}

/// The on-disk addresses of every internal page written so far (verify reads them).
fn collect_internal_addrs(n: &Internal, out: &mut Vec<Addr>) {
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

/// Replaces `old` under `node`; returns new right siblings of `node` if it had to split.
fn replace_in(
    node: &mut Internal,
    old: &Arc<Leaf>,
    new: Vec<(Vec<u8>, Arc<Leaf>)>,
    split: usize,
    max: usize,
    ids: &AtomicU64,
) -> Option<Vec<(Vec<u8>, Box<Internal>)>> {
    node.mark_dirty();
    let i = node.child_for(&old.route);
    match &mut node.children[i] {
        Child::Node(c) => {
            let siblings = replace_in(c, old, new, split, max, ids)?;
            for (j, (k, n)) in siblings.into_iter().enumerate() {
                node.keys.insert(i + 1 + j, k);
                node.children.insert(i + 1 + j, Child::Node(n));
            }
        }
        Child::Leaf(l) => {
            assert!(
                Arc::ptr_eq(l, old),
                "the retired leaf is where its route leads"
            );
            let mut it = new.into_iter();
            let (_, first) = it.next().expect("at least one replacement");
            node.children[i] = Child::Leaf(first);
            for (j, (k, l)) in it.enumerate() {
                node.keys.insert(i + 1 + j, k);
                node.children.insert(i + 1 + j, Child::Leaf(l));
            }
        }
    }
    (node.image_len() > max && node.children.len() > 1).then(|| split_node(node, split, ids))
}

/// Cuts an oversized node: keeps the first piece in place, returns the others.
fn split_node(node: &mut Internal, split: usize, ids: &AtomicU64) -> Vec<(Vec<u8>, Box<Internal>)> {
    let total = node.image_len();
    let pieces = total.div_ceil(split).max(2);
    let target = total.div_ceil(pieces);
    let mut cuts = Vec::new();
    let mut acc = 5;
    for (i, k) in node.keys.iter().enumerate() {
        let e = page::internal_entry_len(k.len());
        if i > 0 && acc + e > target && cuts.len() + 1 < pieces {
            cuts.push(i);
            acc = 5;
        }
        acc += e;
    }
    let mut out = Vec::new();
    for &c in cuts.iter().rev() {
        let mut keys = node.keys.split_off(c);
        let children = node.children.split_off(c);
        let sep = std::mem::take(&mut keys[0]);
        out.push((
            sep,
            Box::new(Internal {
                keys,
                children,
                level: node.level,
                addr: None,
                dirty: AtomicBool::new(true),
                page_id: ids.fetch_add(1, Ordering::Relaxed),
            }),
        ));
    }
    out.reverse();
    node.mark_dirty();
    out
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
                LeafState {
                    page: None,
                    addr: Some(a),
                    dirty: false,
                    mem: 0,
                    pending_free: Vec::new(),
                },
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

/// Copies the entries of a latched leaf that fall in (lo, hi), in the given direction, at
/// most `limit` of them.
pub fn copy_range(
    page: &PageMap,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) {
    if crate::cursor::empty_range(lo, hi) || limit == 0 {
        return;
    }
    let it = page
        .range::<[u8], _>((lo, hi))
        .map(|(k, v)| (k.clone(), v.bytes().to_vec()));
    if reverse {
        out.extend(it.rev().take(limit));
    } else {
        out.extend(it.take(limit));
    }
}
