//! Extents: the free-space sets of the block manager and the extent-list codec that a
//! checkpoint writes them with (WiredTiger `block_ext.c`).
//!
//! ```text
//! extent list payload: u64 file size, u32 count, then per extent u64 offset, u64 length
//! ```

use crate::codec::Reader;
use std::collections::{BTreeMap, BTreeSet};

/// An ordered set of disjoint, non-touching extents, indexed by offset and by size.
#[derive(Default, Debug, Clone)]
pub struct ExtentSet {
    by_off: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
    bytes: u64,
}

impl ExtentSet {
    pub fn len(&self) -> usize {
        self.by_off.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_off.is_empty()
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_off.iter().map(|(&o, &l)| (o, l))
    }
    fn raw_remove(&mut self, off: u64) -> u64 {
        let len = self.by_off.remove(&off).expect("extent present");
        self.by_size.remove(&(len, off));
        self.bytes -= len;
        len
    }
    fn raw_insert(&mut self, off: u64, len: u64) {
        self.by_off.insert(off, len);
        self.by_size.insert((len, off));
        self.bytes += len;
    }
    /// Adds `[off, off+len)`, merging with neighbours. The range must not overlap the set.
    pub fn insert(&mut self, mut off: u64, mut len: u64) {
        debug_assert!(len > 0);
        if let Some((&p, &pl)) = self.by_off.range(..=off).next_back() {
            assert!(
                p + pl <= off,
                "extent [{off}, +{len}) overlaps [{p}, +{pl})"
            );
            if p + pl == off {
                self.raw_remove(p);
                off = p;
                len += pl;
            }
        }
        if let Some((&n, &nl)) = self.by_off.range(off + 1..).next() {
            assert!(
                off + len <= n,
                "extent [{off}, +{len}) overlaps [{n}, +{nl})"
            );
            if off + len == n {
                self.raw_remove(n);
                len += nl;
            }
        }
        self.raw_insert(off, len);
    }
    /// Whether some extent of the set shares a byte with `[off, off+len)`.
    pub fn overlaps(&self, off: u64, len: u64) -> bool {
        let before = self.by_off.range(..off).next_back();
        before.is_some_and(|(&o, &l)| o + l > off)
            || self.by_off.range(off..off + len).next().is_some()
    }
    /// Whether one extent of the set holds all of `[off, off+len)`.
    pub fn contains(&self, off: u64, len: u64) -> bool {
        self.by_off
            .range(..=off)
            .next_back()
            .is_some_and(|(&o, &l)| o + l >= off + len)
    }
    /// Removes `[off, off+len)` if the set holds all of it; returns whether it did.
    pub fn remove_range(&mut self, off: u64, len: u64) -> bool {
        let Some((&p, &pl)) = self.by_off.range(..=off).next_back() else {
            return false;
        };
        if p + pl < off + len {
            return false;
        }
        self.raw_remove(p);
        if p < off {
            self.raw_insert(p, off - p);
        }
        if off + len < p + pl {
            self.raw_insert(off + len, p + pl - (off + len));
        }
        true
    }
    /// Takes `len` bytes from the smallest fitting extent (lowest offset among equals).
    pub fn take_best(&mut self, len: u64) -> Option<u64> {
        let &(sz, off) = self.by_size.range((len, 0)..).next()?;
        debug_assert!(sz >= len);
        self.take_at(off, len);
        Some(off)
    }
    /// Takes `len` bytes from the lowest-offset fitting extent.
    pub fn take_first(&mut self, len: u64) -> Option<u64> {
        let off = self
            .by_off
            .iter()
            .find(|(_, &l)| l >= len)
            .map(|(&o, _)| o)?;
        self.take_at(off, len);
        Some(off)
    }
    /// Takes `len` bytes at the first place at or after `from` where they fit (inside an
    /// extent that starts before `from`, from `from` on). Looks at `max_extents` extents at
    /// most.
    pub fn take_next(&mut self, from: u64, len: u64, max_extents: usize) -> Option<u64> {
        let straddling = self
            .by_off
            .range(..from)
            .next_back()
            .filter(|(&o, &l)| o + l >= from + len)
            .map(|_| from);
        let off = straddling.or_else(|| {
            self.by_off
                .range(from..)
                .take(max_extents)
                .find(|(_, &l)| l >= len)
                .map(|(&o, _)| o)
        })?;
        let carved = self.remove_range(off, len);
        debug_assert!(carved);
        Some(off)
    }
    pub fn take_at(&mut self, off: u64, len: u64) {
        let sz = self.raw_remove(off);
        if sz > len {
            self.raw_insert(off + len, sz - len);
        }
    }
    pub fn last(&self) -> Option<(u64, u64)> {
        self.by_off.iter().next_back().map(|(&o, &l)| (o, l))
    }
}

/// Whether the sets are pairwise disjoint and every extent lies in `[start, end)`: the
/// invariant the block manager asserts at the entry and exit of write, free and checkpoint
/// (debug builds: it walks every extent). Returns the first violation found.
pub fn check_disjoint(sets: &[(&str, &ExtentSet)], start: u64, end: u64) -> Result<(), String> {
    let mut all: Vec<(u64, u64, &str)> = Vec::new();
    for (name, s) in sets {
        all.extend(s.iter().map(|(o, l)| (o, l, *name)));
    }
    all.sort_unstable();
    let mut prev: Option<(u64, u64, &str)> = None;
    for &(o, l, name) in &all {
        if l == 0 || o < start || o + l > end {
            return Err(format!(
                "{name} extent [{o}, +{l}) outside [{start}, {end})"
            ));
        }
        if let Some((po, pl, pn)) = prev {
            if po + pl > o {
                return Err(format!(
                    "{pn} extent [{po}, +{pl}) overlaps {name} extent [{o}, +{l})"
                ));
            }
        }
        prev = Some((o, l, name));
    }
    Ok(())
}

pub fn extents_payload_len(n: usize) -> usize {
    12 + 16 * n
}

pub fn encode_extents(file_size: u64, extents: impl Iterator<Item = (u64, u64)>) -> Vec<u8> {
    let mut buf = Vec::new();
    buf.extend_from_slice(&file_size.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    let mut n = 0u32;
    for (o, l) in extents {
        buf.extend_from_slice(&o.to_le_bytes());
        buf.extend_from_slice(&l.to_le_bytes());
        n += 1;
    }
    buf[8..12].copy_from_slice(&n.to_le_bytes());
    buf
}

pub type Extents = Vec<(u64, u64)>;

pub fn decode_extents(payload: &[u8]) -> Result<(u64, Extents), String> {
    let mut r = Reader::new(payload);
    let size = r.u64()?;
    let n = r.u32()?;
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let o = r.u64()?;
        let l = r.u64()?;
        if l == 0 || o.checked_add(l).is_none_or(|e| e > size) {
            return Err(format!("extent [{o}, +{l}) outside the file size {size}"));
        }
        v.push((o, l));
    }
    Ok((size, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_set_merges_and_splits() {
        let mut s = ExtentSet::default();
        s.insert(0, 4096);
        s.insert(8192, 4096);
        s.insert(4096, 4096);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(0, 12288)]);
        assert!(s.remove_range(4096, 4096));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(0, 4096), (8192, 4096)]);
        assert!(!s.remove_range(4096, 4096));
        assert_eq!(s.bytes(), 8192);
    }

    #[test]
    fn best_fit_takes_smallest_then_lowest() {
        let mut s = ExtentSet::default();
        s.insert(0, 16384);
        s.insert(40960, 8192);
        s.insert(81920, 8192);
        assert_eq!(s.take_best(8192), Some(40960));
        assert_eq!(s.take_first(4096), Some(0));
        assert_eq!(s.take_best(32768), None);
    }

    #[test]
    fn disjointness_check_finds_overlaps_and_strays() {
        let mut a = ExtentSet::default();
        let mut b = ExtentSet::default();
        a.insert(4096, 4096);
        b.insert(12288, 4096);
        assert!(check_disjoint(&[("a", &a), ("b", &b)], 4096, 16384).is_ok());
        assert!(
            check_disjoint(&[("a", &a), ("b", &b)], 4096, 12288).is_err(),
            "past the end"
        );
        b.insert(6144, 1024);
        let err = check_disjoint(&[("a", &a), ("b", &b)], 4096, 16384).unwrap_err();
        assert!(err.contains("overlaps"), "{err}");
    }

    #[test]
    fn extent_list_round_trip_and_bounds() {
        let buf = encode_extents(65536, [(4096u64, 4096u64), (16384, 8192)].into_iter());
        assert_eq!(buf.len(), extents_payload_len(2));
        assert_eq!(
            decode_extents(&buf).unwrap(),
            (65536, vec![(4096, 4096), (16384, 8192)])
        );
        let ext = encode_extents(100, [(4096u64, 4096u64)].into_iter());
        assert!(decode_extents(&ext).is_err(), "extent past the file size");
        for cut in 0..buf.len() - 1 {
            assert!(decode_extents(&buf[..cut]).is_err());
        }
    }
}
