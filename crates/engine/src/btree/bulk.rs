//! Bulk loading (WiredTiger's bulk cursor, `bt_bulk.c`): a new table built from entries that
//! arrive in key order. Each leaf is filled to the split size and written once, in key order,
//! so the file ends up as small as its data — what compaction writes into its fresh file. The
//! internal pages are built in memory and written by the table's next checkpoint.

use super::tree::{Child, Internal, Table, TreeShared};
use crate::block::{build_block, Addr, BlockFile};
use crate::config::{TableConfig, ALLOC_UNIT};
use crate::error::Result;
use crate::kv::KvPair;
use crate::leaf::{Leaf, LeafState};
use crate::page::{self, LeafWriter, StoredValue};
use crate::reconcile::separator;
use placement::{PageKind, WriteCause};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Where a bulk load is: the leaf being filled and the leaves written so far.
struct Loader<'a> {
    /// `None`: a dry run, which encodes and compresses every block but writes none.
    file: Option<&'a BlockFile>,
    /// Bytes of the blocks written (or, dry, that would be).
    bytes: u64,
    cfg: &'a TableConfig,
    leaf_split: usize,
    ids: &'a AtomicU64,
    cause: WriteCause,
    page: LeafWriter,
    /// The first and last key of the leaf being filled.
    first: Vec<u8>,
    last: Vec<u8>,
    /// The last key of the previous leaf (separators are cut between neighbours).
    prev_last: Option<Vec<u8>>,
    /// (separator, address, page id) of each leaf in key order; the first separator is unused.
    leaves: Vec<LoadedLeaf>,
}

impl Loader<'_> {
    fn write(&mut self, payload: &[u8], kind: PageKind, page_id: u64) -> Result<Addr> {
        let img = build_block(kind, payload, self.cfg.compressor)?;
        self.bytes += img.buf.len() as u64;
        match self.file {
            Some(f) => f.write(&img, kind, false, page_id, self.cause),
            None => Ok(Addr {
                offset: self.bytes - img.buf.len() as u64,
                size: img.buf.len() as u32,
                checksum: img.checksum,
            }),
        }
    }

    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        debug_assert!(
            self.page.is_empty() || key > self.last.as_slice(),
            "bulk-loaded keys ascend"
        );
        let stored = if value.len() > self.cfg.leaf_value_max as usize {
            let addr = self.write(value, PageKind::Overflow, 0)?;
            StoredValue::Overflow {
                addr,
                len: value.len() as u64,
            }
        } else {
            StoredValue::Inline(value)
        };
        if !self.page.is_empty()
            && self.page.len() + self.page.entry_len(key, &stored) > self.leaf_split
        {
            self.finish_leaf()?;
        }
        if self.page.is_empty() {
            self.first = key.to_vec();
        }
        self.page.push(key, &stored);
        self.last.clear();
        self.last.extend_from_slice(key);
        Ok(())
    }

    /// Writes the leaf being filled (if any) and starts the next.
    fn finish_leaf(&mut self) -> Result<()> {
        if self.page.is_empty() {
            return Ok(());
        }
        let payload =
            std::mem::replace(&mut self.page, LeafWriter::new(self.cfg.prefix_compression))
                .finish();
        let page_id = self.ids.fetch_add(1, Ordering::Relaxed);
        let addr = self.write(&payload, PageKind::Leaf, page_id)?;
        let sep = match &self.prev_last {
            None => Vec::new(),
            Some(prev) => separator(prev, &self.first),
        };
        self.leaves.push((sep, addr, page_id));
        self.prev_last = Some(std::mem::take(&mut self.last));
        Ok(())
    }
}

impl Table {
    /// A new table in `file` holding `entries` (ascending, unique keys). Leaves are written as
    /// they fill (reported with `cause`) and are not resident; the internal pages are dirty,
    /// for the next checkpoint of the table to write. An empty source gives an empty table.
    pub fn bulk_load(
        id: u32,
        name: String,
        cfg: TableConfig,
        file: BlockFile,
        shared: TreeShared,
        entries: impl Iterator<Item = Result<KvPair>>,
        cause: WriteCause,
    ) -> Result<Table> {
        let leaf_ids = shared.leaf_ids.clone();
        let (leaves, _) = load(Some(&file), &cfg, &leaf_ids, entries, cause)?;
        if leaves.is_empty() {
            return Ok(Table::new(id, name, cfg, file, shared));
        }
        let internal_split = cfg.split_size(cfg.internal_page_max);
        let mut level: Vec<(Vec<u8>, Child)> = leaves
            .into_iter()
            .map(|(sep, addr, page_id)| {
                let id = leaf_ids.fetch_add(1, Ordering::Relaxed);
                let leaf = Leaf::new(id, page_id, sep.clone(), LeafState::on_disk(addr));
                (sep, Child::Leaf(leaf))
            })
            .collect();
        // Group each level into nodes up to the internal split size, until one node is left:
        // the root (always internal, even over a single leaf).
        let root = (0u8..)
            .map_while(|depth| {
                let nodes = group(std::mem::take(&mut level), depth, internal_split, &leaf_ids);
                if nodes.len() == 1 {
                    return Some(Some(nodes.into_iter().next().expect("one node").1));
                }
                level = nodes
                    .into_iter()
                    .map(|(sep, n)| (sep, Child::Node(Box::new(n))))
                    .collect();
                Some(None)
            })
            .flatten()
            .next()
            .expect("each level has fewer nodes than the one below");
        Ok(Table::assemble(id, name, cfg, file, shared, root, None))
    }
}

/// The size a bulk load of `entries` would give its file, without writing it: every block
/// encoded and compressed as the load would write it, plus the descriptor, the internal pages
/// (estimated from the separators: one level, each node full) and three extent-list blocks.
pub fn bulk_load_size(
    cfg: &TableConfig,
    entries: impl Iterator<Item = Result<KvPair>>,
) -> Result<u64> {
    let ids = AtomicU64::new(1);
    let (leaves, bytes) = load(None, cfg, &ids, entries, WriteCause::Other)?;
    let unit = ALLOC_UNIT;
    let internal: u64 = leaves
        .iter()
        .map(|(sep, _, _)| page::internal_entry_len(sep.len()) as u64)
        .sum();
    let split = cfg.split_size(cfg.internal_page_max) as u64;
    let internal_blocks = internal.div_ceil(split).max(1) * split.div_ceil(unit) * unit;
    Ok(unit + bytes.max(unit) + internal_blocks + 3 * unit)
}

/// A leaf a load wrote: its separator, address and page id.
type LoadedLeaf = (Vec<u8>, Addr, u64);

/// Writes (or, with no file, sizes) the leaves of `entries`; returns each leaf's
/// [`LoadedLeaf`] and the bytes of the blocks.
fn load(
    file: Option<&BlockFile>,
    cfg: &TableConfig,
    ids: &AtomicU64,
    entries: impl Iterator<Item = Result<KvPair>>,
    cause: WriteCause,
) -> Result<(Vec<LoadedLeaf>, u64)> {
    let mut loader = Loader {
        file,
        bytes: 0,
        cfg,
        leaf_split: cfg.split_size(cfg.leaf_page_max),
        ids,
        cause,
        page: LeafWriter::new(cfg.prefix_compression),
        first: Vec::new(),
        last: Vec::new(),
        prev_last: None,
        leaves: Vec::new(),
    };
    for kv in entries {
        let (k, v) = kv?;
        loader.push(&k, &v)?;
    }
    loader.finish_leaf()?;
    Ok((loader.leaves, loader.bytes))
}

/// Cuts one level's children into internal nodes whose images fit `split`.
fn group(
    children: Vec<(Vec<u8>, Child)>,
    level: u8,
    split: usize,
    ids: &AtomicU64,
) -> Vec<(Vec<u8>, Internal)> {
    assert!(!children.is_empty(), "a level has at least one child");
    let node = |ids: &AtomicU64| Internal {
        keys: Vec::new(),
        children: Vec::new(),
        level,
        addr: None,
        dirty: AtomicBool::new(true),
        page_id: ids.fetch_add(1, Ordering::Relaxed),
    };
    let mut out: Vec<(Vec<u8>, Internal)> = Vec::new();
    let mut cur = node(ids);
    let mut cur_sep = Vec::new();
    let mut acc = 5;
    for (sep, child) in children {
        let e = page::internal_entry_len(sep.len());
        // At least two children per node, so every level shrinks.
        if cur.children.len() >= 2 && acc + e > split {
            out.push((
                std::mem::take(&mut cur_sep),
                std::mem::replace(&mut cur, node(ids)),
            ));
            acc = 5;
        }
        if cur.children.is_empty() {
            cur_sep = sep;
            cur.keys.push(Vec::new());
            acc += page::internal_entry_len(0);
        } else {
            cur.keys.push(sep);
            acc += e;
        }
        cur.children.push(child);
    }
    out.push((cur_sep, cur));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf_addr(l: &Arc<Leaf>) -> Addr {
        l.latch().addr().expect("bulk leaves are written")
    }
    use crate::cache::Cache;
    use crate::config::Allocation;
    use crate::io::{FileRole, Io};
    use placement::FileKind;
    use std::sync::Arc;

    /// Up to `limit` entries of the whole table, in key order.
    fn read_all(t: &Table, limit: usize) -> Vec<KvPair> {
        let mut got = Vec::new();
        crate::btree::fetch_range(
            t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
            limit,
            crate::txn::LATEST,
            &mut got,
        )
        .unwrap();
        got
    }

    fn table(entries: Vec<KvPair>, cfg: TableConfig) -> (tempfile::TempDir, Table) {
        let dir = tempfile::tempdir().unwrap();
        let io = Arc::new(Io::quiet());
        let file = BlockFile::create(
            &dir.path().join("t.fdb"),
            FileRole::of(FileKind::Collection),
            Allocation::best(),
            io,
        )
        .unwrap();
        let cache = Arc::new(Cache::new(64 << 20, 80, 95, 5, 20));
        let t = Table::bulk_load(
            1,
            "t".into(),
            cfg,
            file,
            TreeShared {
                cache,
                txns: Arc::new(crate::txn::Txns::default()),
                leaf_ids: Arc::new(AtomicU64::new(1)),
            },
            entries.into_iter().map(Ok),
            WriteCause::Other,
        )
        .unwrap();
        (dir, t)
    }

    #[test]
    fn a_bulk_load_reads_back_in_order_and_fills_its_leaves() {
        let cfg = TableConfig {
            compressor: crate::config::Compressor::None,
            internal_page_max: 512,
            ..TableConfig::collection().with_leaf_page_max(4096)
        };
        let entries: Vec<KvPair> = (0..5000u32)
            .map(|i| {
                (
                    format!("k{i:06}").into_bytes(),
                    vec![(i % 251) as u8; 40 + (i % 3000) as usize / 100],
                )
            })
            .chain(std::iter::once((b"zz-big".to_vec(), vec![7u8; 20_000])))
            .collect();
        let (_d, t) = table(entries.clone(), cfg.clone());
        let got = read_all(&t, usize::MAX);
        assert_eq!(got, entries);
        let leaves = t.leaves();
        // Every leaf but the last is more than half full (dense: the data, not the history).
        let split = cfg.split_size(cfg.leaf_page_max) as u64;
        for l in &leaves[..leaves.len() - 1] {
            assert!(leaf_addr(l).size as u64 >= split / 2);
        }
        assert!(
            t.shape().0 >= 2,
            "5000 entries under 512-byte internal pages need two levels"
        );
        // The checkpoint writes the internal pages; the tree verifies.
        let root = t
            .write_internal_pages(&t.structure_exclusive())
            .unwrap()
            .unwrap();
        let c = t.file.checkpoint(root).unwrap().sync(&t.file).unwrap();
        t.set_last_checkpoint(c);
        assert_eq!(t.verify().unwrap(), entries.len() as u64);
    }

    #[test]
    fn the_dry_run_sizes_what_the_load_writes() {
        let cfg = TableConfig::collection().with_leaf_page_max(4096);
        let entries: Vec<KvPair> = (0..3000u32)
            .map(|i| {
                (
                    format!("k{i:06}").into_bytes(),
                    format!("value {i}").repeat(8).into_bytes(),
                )
            })
            .collect();
        let est = bulk_load_size(&cfg, entries.clone().into_iter().map(Ok)).unwrap();
        let (_d, t) = table(entries, cfg);
        let root = t
            .write_internal_pages(&t.structure_exclusive())
            .unwrap()
            .unwrap();
        t.file.checkpoint(root).unwrap().sync(&t.file).unwrap();
        let real = t.file.size();
        // Leaves exactly; the internal pages and extent lists within a few blocks.
        assert!(
            est.abs_diff(real) <= 4 * 4096,
            "estimated {est}, real {real}"
        );
    }

    #[test]
    fn an_empty_bulk_load_is_an_empty_table() {
        let (_d, t) = table(Vec::new(), TableConfig::index());
        assert_eq!(t.shape(), (1, 1));
        let got = read_all(&t, 10);
        assert!(got.is_empty());
    }
}
