//! The index: a B-tree of fixed-size buckets (MMAPv1's `BtreeBucket`, 8 KiB) mapping each key
//! to its record's [`DiskLoc`]. A bucket is a record of its table, rewritten in place when it
//! changes; a full bucket splits into itself and a new right sibling, and a full root gets a
//! new parent. Keys live in the leaves; internal buckets hold separators (the smallest key of
//! the child to their right). A delete removes the key from its leaf in place and never
//! merges buckets (MMAPv1 did not rebalance either): an empty leaf stays until its table is
//! dropped or compacted.

use crate::loc::{size_class, DiskLoc};
use crate::pool::Pool;
use crate::space::{self, Details, Header};
use engine::{Error, Result};
use std::ops::Bound;

/// A bucket's record size.
pub const BUCKET_SIZE: usize = 8192;
/// What a bucket's record holds at most (its record header and length take the rest).
pub const BUCKET_PAYLOAD: usize = BUCKET_SIZE - 8;
/// MMAPv1's index key limit (`KeyMax`, 1024 bytes): at least seven keys fit in a bucket, so
/// either half of a split fits.
pub const MAX_KEY_LEN: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub leaf: bool,
    pub keys: Vec<Vec<u8>>,
    /// A leaf: each key's record. Internal: the children, one more than the keys.
    pub locs: Vec<DiskLoc>,
}

impl Bucket {
    pub(crate) fn empty_leaf() -> Bucket {
        Bucket {
            leaf: true,
            keys: Vec::new(),
            locs: Vec::new(),
        }
    }
    fn entry_len(key: &[u8]) -> usize {
        2 + key.len() + DiskLoc::LEN
    }
    pub fn encoded_len(&self) -> usize {
        let extra = if self.leaf { 0 } else { DiskLoc::LEN };
        3 + extra + self.keys.iter().map(|k| Self::entry_len(k)).sum::<usize>()
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.encoded_len());
        b.push(u8::from(self.leaf));
        b.extend_from_slice(&(self.keys.len() as u16).to_le_bytes());
        let mut locs = self.locs.iter();
        if !self.leaf {
            b.extend_from_slice(&locs.next().expect("a child").encode());
        }
        for (k, l) in self.keys.iter().zip(locs) {
            b.extend_from_slice(&(k.len() as u16).to_le_bytes());
            b.extend_from_slice(k);
            b.extend_from_slice(&l.encode());
        }
        b
    }
    pub fn decode(b: &[u8]) -> Bucket {
        let leaf = b[0] == 1;
        let n = u16::from_le_bytes([b[1], b[2]]) as usize;
        let mut at = 3;
        let mut locs = Vec::with_capacity(n + 1);
        if !leaf {
            locs.push(DiskLoc::decode(&b[at..]));
            at += DiskLoc::LEN;
        }
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let len = u16::from_le_bytes([b[at], b[at + 1]]) as usize;
            keys.push(b[at + 2..at + 2 + len].to_vec());
            at += 2 + len;
            locs.push(DiskLoc::decode(&b[at..]));
            at += DiskLoc::LEN;
        }
        Bucket { leaf, keys, locs }
    }
    /// The child of an internal bucket that holds `key`.
    pub(crate) fn child_for(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|s| s.as_slice() <= key)
    }
    /// Splits an overfull bucket at its byte midpoint: it keeps the left half and returns the
    /// separator and the right half.
    pub(crate) fn split(&mut self) -> (Vec<u8>, Bucket) {
        let total: usize = self.keys.iter().map(|k| Self::entry_len(k)).sum();
        let mut acc = 0;
        let mut mid = self.keys.len() / 2;
        for (i, k) in self.keys.iter().enumerate() {
            acc += Self::entry_len(k);
            if acc * 2 >= total {
                mid = i.clamp(1, self.keys.len() - 2);
                break;
            }
        }
        if self.leaf {
            let keys = self.keys.split_off(mid);
            let locs = self.locs.split_off(mid);
            let sep = keys[0].clone();
            (
                sep,
                Bucket {
                    leaf: true,
                    keys,
                    locs,
                },
            )
        } else {
            let mut keys = self.keys.split_off(mid);
            let locs = self.locs.split_off(mid + 1);
            let sep = keys.remove(0);
            (
                sep,
                Bucket {
                    leaf: false,
                    keys,
                    locs,
                },
            )
        }
    }
}

/// Room where buckets are read, written and allocated: the pool, the header and the table's
/// details (a new bucket is a record of the table).
pub struct Tree<'a> {
    pub pool: &'a mut Pool,
    pub header: &'a mut Header,
    pub details: &'a mut Details,
}

impl Tree<'_> {
    fn load(&mut self, loc: DiskLoc) -> Result<Bucket> {
        let b = space::read_record(self.pool, loc)?;
        if b.len() < 3 {
            return Err(Error::Corrupt {
                file: format!("mmapv1.{}", loc.file).into(),
                offset: u64::from(loc.offset),
                what: "a bucket shorter than its header".into(),
            });
        }
        Ok(Bucket::decode(&b))
    }
    fn store(&mut self, loc: DiskLoc, b: &Bucket) -> Result<()> {
        let bytes = b.encode();
        assert!(bytes.len() <= BUCKET_PAYLOAD, "an overfull bucket stored");
        space::write_record(self.pool, loc, &bytes)
    }
    fn alloc(&mut self, b: &Bucket) -> Result<DiskLoc> {
        let class = size_class(BUCKET_PAYLOAD).expect("a bucket fits a class");
        let loc = space::alloc_record(self.pool, self.header, self.details, class)?;
        self.store(loc, b)?;
        Ok(loc)
    }

    /// Gives a new table its empty root.
    pub fn create(&mut self) -> Result<()> {
        assert!(self.details.root.is_null(), "a table with a root already");
        self.details.root = self.alloc(&Bucket::empty_leaf())?;
        Ok(())
    }

    /// The record `key` maps to.
    pub fn find(&mut self, key: &[u8]) -> Result<Option<DiskLoc>> {
        let mut b = self.load(self.details.root)?;
        while !b.leaf {
            let child = b.locs[b.child_for(key)];
            b = self.load(child)?;
        }
        Ok(b.keys
            .binary_search_by(|k| k.as_slice().cmp(key))
            .ok()
            .map(|i| b.locs[i]))
    }

    /// The buckets from the root to the leaf holding `key`: (location, bucket, child index).
    fn path_to(&mut self, key: &[u8]) -> Result<Vec<(DiskLoc, Bucket, usize)>> {
        let mut path = Vec::new();
        let mut loc = self.details.root;
        loop {
            let b = self.load(loc)?;
            if b.leaf {
                path.push((loc, b, 0));
                return Ok(path);
            }
            let i = b.child_for(key);
            let child = b.locs[i];
            path.push((loc, b, i));
            loc = child;
        }
    }

    /// Maps `key` to `rec`; returns the record it mapped to before, if any.
    pub fn upsert(&mut self, key: &[u8], rec: DiskLoc) -> Result<Option<DiskLoc>> {
        assert!(key.len() <= MAX_KEY_LEN, "a {}-byte key", key.len());
        let mut path = self.path_to(key)?;
        let (leaf_loc, mut leaf, _) = path.pop().expect("a path has a leaf");
        match leaf.keys.binary_search_by(|k| k.as_slice().cmp(key)) {
            Ok(i) => {
                let old = std::mem::replace(&mut leaf.locs[i], rec);
                self.store(leaf_loc, &leaf)?;
                return Ok(Some(old));
            }
            Err(i) => {
                leaf.keys.insert(i, key.to_vec());
                leaf.locs.insert(i, rec);
            }
        }
        self.store_splitting(leaf_loc, leaf, path)?;
        Ok(None)
    }

    /// Stores a changed bucket; when it overflows, splits it and inserts the separator into
    /// its parent (up the path), growing a new root when the root splits.
    fn store_splitting(
        &mut self,
        mut loc: DiskLoc,
        mut b: Bucket,
        mut path: Vec<(DiskLoc, Bucket, usize)>,
    ) -> Result<()> {
        while b.encoded_len() > BUCKET_PAYLOAD {
            let (sep, right) = b.split();
            let right_loc = self.alloc(&right)?;
            self.store(loc, &b)?;
            match path.pop() {
                Some((parent_loc, mut parent, i)) => {
                    parent.keys.insert(i, sep);
                    parent.locs.insert(i + 1, right_loc);
                    (loc, b) = (parent_loc, parent);
                }
                None => {
                    let root = Bucket {
                        leaf: false,
                        keys: vec![sep],
                        locs: vec![loc, right_loc],
                    };
                    self.details.root = self.alloc(&root)?;
                    return Ok(());
                }
            }
        }
        self.store(loc, &b)
    }

    /// Removes `key`; returns the record it mapped to.
    pub fn remove(&mut self, key: &[u8]) -> Result<Option<DiskLoc>> {
        let mut path = self.path_to(key)?;
        let (leaf_loc, mut leaf, _) = path.pop().expect("a path has a leaf");
        let Ok(i) = leaf.keys.binary_search_by(|k| k.as_slice().cmp(key)) else {
            return Ok(None);
        };
        leaf.keys.remove(i);
        let rec = leaf.locs.remove(i);
        self.store(leaf_loc, &leaf)?;
        Ok(Some(rec))
    }

    /// Appends up to `limit` entries of (lo, hi) to `out`, ascending or descending.
    pub fn range(
        &mut self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        out: &mut Vec<(Vec<u8>, DiskLoc)>,
    ) -> Result<()> {
        let root = self.details.root;
        self.range_in(root, lo, hi, reverse, limit, out)
    }

    fn range_in(
        &mut self,
        loc: DiskLoc,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        out: &mut Vec<(Vec<u8>, DiskLoc)>,
    ) -> Result<()> {
        let b = self.load(loc)?;
        if b.leaf {
            let inside = |k: &[u8]| std::ops::RangeBounds::<[u8]>::contains(&(lo, hi), k);
            let it = b.keys.iter().zip(&b.locs).filter(|(k, _)| inside(k));
            let room = limit - out.len();
            if reverse {
                out.extend(it.rev().take(room).map(|(k, l)| (k.clone(), *l)));
            } else {
                out.extend(it.take(room).map(|(k, l)| (k.clone(), *l)));
            }
            return Ok(());
        }
        let first = match lo {
            Bound::Included(k) | Bound::Excluded(k) => b.child_for(k),
            Bound::Unbounded => 0,
        };
        let last = match hi {
            Bound::Included(k) | Bound::Excluded(k) => b.child_for(k),
            Bound::Unbounded => b.keys.len(),
        };
        let children: Vec<DiskLoc> = b.locs[first..=last.max(first)].to_vec();
        let order: Box<dyn Iterator<Item = &DiskLoc>> = if reverse {
            Box::new(children.iter().rev())
        } else {
            Box::new(children.iter())
        };
        for &child in order {
            if out.len() >= limit {
                break;
            }
            self.range_in(child, lo, hi, reverse, limit, out)?;
        }
        Ok(())
    }

    /// Stores `b` at `loc` as a batch would (tests of the size check).
    #[cfg(test)]
    pub fn store_for_test(&mut self, loc: DiskLoc, b: &Bucket) {
        self.store(loc, b).expect("store");
    }

    /// The number of bucket levels.
    #[cfg(test)]
    pub fn depth(&mut self) -> Result<usize> {
        let mut b = self.load(self.details.root)?;
        let mut depth = 1;
        while !b.leaf {
            let child = b.locs[0];
            b = self.load(child)?;
            depth += 1;
        }
        Ok(depth)
    }
}
