//! `compact`: a table rewritten densely into fresh extents (MMAPv1's `compact` command): every
//! live record copied once, in key order, into new records of its size class, the index
//! rebuilt bucket by bucket, then the old extents handed to the free extent list. The table's
//! writers wait meanwhile (the engine's lock); a snapshot reader's next batch finds the same
//! values at their new locations.

use crate::btree::{Bucket, Tree, BUCKET_PAYLOAD};
use crate::db::Inner;
use crate::loc::{class_size, size_class, DiskLoc};
use crate::space::{self, Details, EXTENT_HEADER};
use crate::state::{State, CATALOG};
use engine::{CompactStats, Error, Result, TableId};
use std::ops::Bound;

fn entries(st: &mut State, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if table == CATALOG || !st.tables.contains_key(&table) {
        return Err(Error::NoSuchTable(format!("id {table}")));
    }
    let mut locs = Vec::new();
    st.tree(table)?.range(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        usize::MAX,
        &mut locs,
    )?;
    locs.into_iter()
        .map(|(k, loc)| Ok((k, space::read_record(&mut st.pool, loc)?)))
        .collect()
}

/// Rewrites the table and returns what it did.
pub(crate) fn compact(inner: &Inner, table: TableId) -> Result<CompactStats> {
    let (stats, seq) = inner.batch(|st, _, _| {
        let live = entries(st, table)?;
        let old = st.tables[&table].details.clone();
        let bytes_before = space::extent_bytes(&mut st.pool, &old)?;
        let mut fresh = Details::new(table);
        let mut tree = Tree {
            pool: &mut st.pool,
            header: &mut st.header,
            details: &mut fresh,
        };
        tree.create()?;
        for (k, v) in &live {
            let class = size_class(v.len()).expect("a stored value fits a class");
            let loc = space::alloc_record(tree.pool, tree.header, tree.details, class)?;
            space::write_record(tree.pool, loc, v)?;
            tree.upsert(k, loc)?;
            tree.details.entries += 1;
        }
        let bytes_after = space::extent_bytes(&mut st.pool, &fresh)?;
        space::release_extents(&mut st.pool, &mut st.header, &old)?;
        let t = st.tables.get_mut(&table).expect("checked");
        t.details = fresh;
        t.details_dirty = true;
        Ok(CompactStats {
            bytes_before,
            bytes_after,
            bytes_written: bytes_after,
            bytes_freed: bytes_before,
        })
    })?;
    inner.after_batch(seq, true)?;
    Ok(stats)
}

/// The size classes a dense copy allocates, in the order `compact` allocates them: the
/// root's bucket, then for each entry in key order its record and the buckets its insertion
/// splits off. The tree is modeled in memory with the buckets' own split, so the count is
/// the copy's, not a fill factor's guess.
fn copy_allocations(live: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let bucket = size_class(BUCKET_PAYLOAD).expect("a bucket fits a class");
    let mut allocs = vec![bucket];
    let mut tree = ModelTree {
        buckets: vec![Bucket::empty_leaf()],
        root: 0,
    };
    for (k, v) in live {
        allocs.push(size_class(v.len()).expect("a stored value fits a class"));
        allocs.extend(std::iter::repeat_n(bucket, tree.insert(k)));
    }
    allocs
}

/// A tree's buckets in memory while it is built: a location is an index into `buckets`.
struct ModelTree {
    buckets: Vec<Bucket>,
    root: usize,
}

impl ModelTree {
    fn loc(i: usize) -> DiskLoc {
        DiskLoc::new(
            0,
            u32::try_from(i).expect("a model tree's bucket count fits u32"),
        )
    }

    /// Inserts a new key as `Tree::upsert` does; returns how many buckets it allocated.
    fn insert(&mut self, key: &[u8]) -> usize {
        let mut path = Vec::new();
        let mut at = self.root;
        while !self.buckets[at].leaf {
            let i = self.buckets[at].child_for(key);
            path.push((at, i));
            at = self.buckets[at].locs[i].offset as usize;
        }
        let leaf = &mut self.buckets[at];
        let i = leaf.keys.partition_point(|k| k.as_slice() < key);
        leaf.keys.insert(i, key.to_vec());
        leaf.locs.insert(i, DiskLoc::NULL);
        let mut allocated = 0;
        while self.buckets[at].encoded_len() > BUCKET_PAYLOAD {
            let (sep, right) = self.buckets[at].split();
            self.buckets.push(right);
            allocated += 1;
            let right = Self::loc(self.buckets.len() - 1);
            if let Some((parent, i)) = path.pop() {
                self.buckets[parent].keys.insert(i, sep);
                self.buckets[parent].locs.insert(i + 1, right);
                at = parent;
            } else {
                self.buckets.push(Bucket {
                    leaf: false,
                    keys: vec![sep],
                    locs: vec![Self::loc(at), right],
                });
                allocated += 1;
                self.root = self.buckets.len() - 1;
            }
        }
        allocated
    }
}

/// The bytes of the extents a table making `allocs` (size classes, in order) is given, the
/// free extents `free` (their lengths, in list order) tried first: `alloc_record`'s tail
/// extent and `alloc_extent`'s first fit, step by step.
fn copy_extent_bytes(allocs: &[u8], mut free: Vec<u32>) -> u64 {
    let (mut tail_len, mut tail_used, mut total) = (0u32, 0u32, 0u64);
    for &class in allocs {
        let size = class_size(class);
        if tail_len == 0 || tail_used + size > tail_len {
            let len = space::next_extent_len(tail_len, size);
            tail_len = match free.iter().position(|&f| f >= len) {
                Some(i) => {
                    let taken = space::taken_of_free(free[i], len);
                    if taken < free[i] {
                        free[i] -= taken;
                    } else {
                        free.remove(i);
                    }
                    taken
                }
                None => len,
            };
            tail_used = EXTENT_HEADER;
            total += u64::from(tail_len);
        }
        tail_used += size;
    }
    total
}

/// What `compact` would do: the table's extents now, and the extents of the same copy,
/// allocation by allocation (exact while nothing changes in between; when another table's
/// compaction frees extents first, the copy may take one whole that is less than a first
/// extent larger than it asked for).
pub(crate) fn estimate(inner: &Inner, table: TableId) -> Result<CompactStats> {
    let mut guard = inner.state();
    let st = &mut *guard;
    let live = entries(st, table)?;
    let d = st.tables[&table].details.clone();
    let bytes_before = space::extent_bytes(&mut st.pool, &d)?;
    let free = space::free_extent_lens(&mut st.pool, &st.header)?;
    let bytes_after = copy_extent_bytes(&copy_allocations(&live), free);
    Ok(CompactStats {
        bytes_before,
        bytes_after,
        bytes_written: 0,
        bytes_freed: bytes_before.saturating_sub(bytes_after),
    })
}
