//! The in-memory leaf page (WiredTiger's row-store `WT_PAGE`: the disk image with its `WT_ROW`
//! slots, plus insert lists and update chains): the page's image as it was read from disk, or
//! as reconciliation last wrote it, searched in place through an offset index built once when
//! the page comes into memory, and beside it the changes made since. Reading an unchanged
//! record copies no page and allocates nothing; reconciliation merges the image and the changes
//! (`entries`) into new images, and the page is rebuilt from them (`from_image`).

use crate::block::Addr;
use crate::cache::ENTRY_OVERHEAD;
use crate::page::{self, RawValue};
use std::collections::btree_map::{self, BTreeMap};
use std::ops::Bound;

#[derive(Clone, Debug)]
/// A value as a change holds it.
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

pub struct LeafPage {
    /// A leaf payload (`page.rs`); never changed while the page is in memory.
    image: Box<[u8]>,
    /// One per image entry, in key order.
    slots: Vec<Slot>,
    /// The whole keys of entries the image stores prefix-compressed (index pages): a key is
    /// compared at every step of a search, and rebuilding it each time would cost more than
    /// these bytes.
    keys: Vec<u8>,
    /// The image's overflow values, read with the page, in the order the slots name them.
    overflow: Vec<(Addr, Vec<u8>)>,
    /// Changes since the image, by key: a put (`Some`) or a delete (`None`).
    mods: BTreeMap<Vec<u8>, Option<Value>>,
    /// Bytes `mods` is charged: key, value and `ENTRY_OVERHEAD` per change.
    mods_mem: usize,
}

#[derive(Clone, Copy)]
struct Slot {
    /// The key's bytes: in `keys` if `KEY_IN_ARENA`, else in the image.
    key_at: u32,
    key_len: u32,
    /// Inline: the value's offset in the image; overflow: its index in `overflow`.
    value_at: u32,
    value_len: u32,
    flags: u8,
}

const KEY_IN_ARENA: u8 = 1;
const OVERFLOW: u8 = 2;

/// A value as a page holds it: inline bytes, or an overflow value with its block once written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRef<'a> {
    Inline(&'a [u8]),
    Overflow { data: &'a [u8], addr: Option<Addr> },
}

impl<'a> ValueRef<'a> {
    pub fn bytes(&self) -> &'a [u8] {
        match *self {
            ValueRef::Inline(b) | ValueRef::Overflow { data: b, .. } => b,
        }
    }
    fn of(v: &'a Value) -> ValueRef<'a> {
        match v {
            Value::Inline(b) => ValueRef::Inline(b),
            Value::Overflow { data, addr } => ValueRef::Overflow { data, addr: *addr },
        }
    }
}

/// Why an image could not become a page.
#[derive(Debug)]
pub enum ImageError<E> {
    /// The payload does not parse (the text says where).
    Malformed(String),
    /// Reading an overflow value failed.
    Overflow(E),
}

impl LeafPage {
    /// A page with no entries (a new tree's first leaf).
    pub fn empty() -> LeafPage {
        LeafPage {
            // Never parsed: the page has no slots.
            image: Box::new([]),
            slots: Vec::new(),
            keys: Vec::new(),
            overflow: Vec::new(),
            mods: BTreeMap::new(),
            mods_mem: 0,
        }
    }

    /// Indexes a leaf payload in place. `read_overflow(addr, len)` supplies each overflow value
    /// (from its block, or from the page the image was reconciled from).
    pub fn from_image<E>(
        image: Vec<u8>,
        mut read_overflow: impl FnMut(Addr, u64) -> Result<Vec<u8>, E>,
    ) -> Result<LeafPage, ImageError<E>> {
        let image = image.into_boxed_slice();
        let mut slots: Vec<Slot> = Vec::new();
        let mut keys: Vec<u8> = Vec::new();
        let mut overflow_at: Vec<(Addr, u64)> = Vec::new();
        let mut bad: Option<String> = None;
        let walked = page::walk_leaf(&image, |e| {
            if bad.is_some() {
                return;
            }
            let (key_at, flags) = if e.prefix == 0 {
                (e.suffix.start, 0)
            } else {
                let Some(prev) = slots.last() else {
                    bad = Some("the first key of a leaf has a prefix".into());
                    return;
                };
                if e.prefix > prev.key_len as usize {
                    bad = Some(format!(
                        "key prefix {} longer than the previous key",
                        e.prefix
                    ));
                    return;
                }
                let at = keys.len();
                let from = prev.key_at as usize..prev.key_at as usize + e.prefix;
                if prev.flags & KEY_IN_ARENA != 0 {
                    keys.extend_from_within(from);
                } else {
                    keys.extend_from_slice(&image[from]);
                }
                keys.extend_from_slice(&image[e.suffix.clone()]);
                (at, KEY_IN_ARENA)
            };
            let (value_at, value_len, flags) = match e.value {
                RawValue::Inline(v) => (v.start, v.len(), flags),
                RawValue::Overflow { addr, len } => {
                    overflow_at.push((addr, len));
                    (overflow_at.len() - 1, 0, flags | OVERFLOW)
                }
            };
            slots.push(Slot {
                key_at: key_at as u32,
                key_len: (e.prefix + e.suffix.len()) as u32,
                value_at: value_at as u32,
                value_len: value_len as u32,
                flags,
            });
        });
        if let Some(what) = walked.err().or(bad) {
            return Err(ImageError::Malformed(what));
        }
        let mut overflow = Vec::with_capacity(overflow_at.len());
        for (addr, len) in overflow_at {
            let data = read_overflow(addr, len).map_err(ImageError::Overflow)?;
            overflow.push((addr, data));
        }
        let page = LeafPage {
            image,
            slots,
            keys,
            overflow,
            mods: BTreeMap::new(),
            mods_mem: 0,
        };
        debug_assert!(page.slots_in_order(), "a leaf image's keys are in order");
        Ok(page)
    }

    fn slots_in_order(&self) -> bool {
        (1..self.slots.len()).all(|i| self.key(i - 1) < self.key(i))
    }

    /// Bytes the page is charged in the cache.
    pub fn mem(&self) -> usize {
        self.image.len()
            + self.keys.len()
            + self.slots.len() * std::mem::size_of::<Slot>()
            + self.overflow.iter().map(|(_, d)| d.len()).sum::<usize>()
            + self.mods_mem
    }

    fn key(&self, i: usize) -> &[u8] {
        let s = &self.slots[i];
        let r = s.key_at as usize..(s.key_at + s.key_len) as usize;
        if s.flags & KEY_IN_ARENA != 0 {
            &self.keys[r]
        } else {
            &self.image[r]
        }
    }

    fn value(&self, i: usize) -> ValueRef<'_> {
        let s = &self.slots[i];
        if s.flags & OVERFLOW != 0 {
            let (addr, data) = &self.overflow[s.value_at as usize];
            ValueRef::Overflow {
                data,
                addr: Some(*addr),
            }
        } else {
            ValueRef::Inline(&self.image[s.value_at as usize..(s.value_at + s.value_len) as usize])
        }
    }

    /// The image slot holding `key`, if any.
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.slots.binary_search_by(|s| {
            let r = s.key_at as usize..(s.key_at + s.key_len) as usize;
            let k = if s.flags & KEY_IN_ARENA != 0 {
                &self.keys[r]
            } else {
                &self.image[r]
            };
            k.cmp(key)
        })
    }

    /// The value of `key`: its newest change, else the image's.
    pub fn get(&self, key: &[u8]) -> Option<ValueRef<'_>> {
        match self.mods.get(key) {
            Some(change) => change.as_ref().map(ValueRef::of),
            None => self.find(key).ok().map(|i| self.value(i)),
        }
    }

    /// Puts (`Some`) or deletes (`None`) `key`. Returns the change in charged bytes and the
    /// overflow block that the key's previous value alone referenced (freed once the next
    /// image is written).
    pub fn apply(&mut self, key: &[u8], value: Option<Value>) -> (i64, Option<Addr>) {
        let charge = |v: &Option<Value>| {
            key.len() + ENTRY_OVERHEAD + v.as_ref().map_or(0, |v| v.bytes().len())
        };
        let in_image = self.find(key).ok();
        if value.is_none() && in_image.is_none() && !self.mods.contains_key(key) {
            return (0, None);
        }
        let added = charge(&value);
        let (removed, freed) = match self.mods.insert(key.to_vec(), value) {
            Some(old) => {
                let freed = match &old {
                    Some(Value::Overflow { addr, .. }) => *addr,
                    _ => None,
                };
                (charge(&old), freed)
            }
            None => {
                let freed = in_image.and_then(|i| match self.value(i) {
                    ValueRef::Overflow { addr, .. } => addr,
                    ValueRef::Inline(_) => None,
                });
                (0, freed)
            }
        };
        self.mods_mem = self.mods_mem + added - removed;
        (added as i64 - removed as i64, freed)
    }

    /// The changes' overflow values not written yet: reconciliation writes each and records
    /// its block.
    pub fn unwritten_overflow(&mut self) -> impl Iterator<Item = (&[u8], &mut Option<Addr>)> {
        self.mods.values_mut().filter_map(|v| match v {
            Some(Value::Overflow {
                data,
                addr: a @ None,
            }) => Some((data.as_slice(), a)),
            _ => None,
        })
    }

    /// Every entry in key order: the image merged with the changes.
    pub fn entries(&self) -> Merge<'_> {
        self.range(Bound::Unbounded, Bound::Unbounded, false)
    }

    /// The entries in (lo, hi), forward or in reverse. The range must not be empty or
    /// inverted (`cursor::empty_range` says).
    pub fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, reverse: bool) -> Merge<'_> {
        let first = match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) => self.find(k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => self.find(k).map_or_else(|i| i, |i| i + 1),
        };
        let end = match hi {
            Bound::Unbounded => self.slots.len(),
            Bound::Included(k) => self.find(k).map_or_else(|i| i, |i| i + 1),
            Bound::Excluded(k) => self.find(k).unwrap_or_else(|i| i),
        };
        Merge {
            page: self,
            first,
            end: end.max(first),
            mods: self.mods.range::<[u8], _>((lo, hi)),
            pending: None,
            reverse,
        }
    }

    /// The overflow values the page holds (the image's and the changes' written ones), by
    /// block: what a page rebuilt from this page's reconciled images reads them from.
    pub fn into_overflow(self) -> Vec<(Addr, Vec<u8>)> {
        let mut out = self.overflow;
        for v in self.mods.into_values() {
            if let Some(Value::Overflow {
                data,
                addr: Some(a),
            }) = v
            {
                out.push((a, data));
            }
        }
        out
    }
}

/// The image's entries and the changes merged in key order (a change replaces the image's
/// entry of its key; a delete hides it), in one direction.
pub struct Merge<'a> {
    page: &'a LeafPage,
    /// Image slots not yet yielded: [first, end).
    first: usize,
    end: usize,
    mods: btree_map::Range<'a, Vec<u8>, Option<Value>>,
    /// A change taken from `mods` but not yet yielded.
    pending: Option<(&'a [u8], &'a Option<Value>)>,
    reverse: bool,
}

impl<'a> Iterator for Merge<'a> {
    type Item = (&'a [u8], ValueRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        // Each step yields or consumes one change or slot: bounded by their number.
        loop {
            if self.pending.is_none() {
                let m = if self.reverse {
                    self.mods.next_back()
                } else {
                    self.mods.next()
                };
                self.pending = m.map(|(k, v)| (k.as_slice(), v));
            }
            let slot = if self.first < self.end {
                Some(if self.reverse {
                    self.end - 1
                } else {
                    self.first
                })
            } else {
                None
            };
            let take_slot = match (slot, self.pending) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(i), Some((mk, _))) => {
                    let order = self.page.key(i).cmp(mk);
                    if order.is_eq() {
                        // The change shadows the image's entry.
                        self.step_slot();
                        false
                    } else {
                        order.is_lt() != self.reverse
                    }
                }
            };
            if take_slot {
                let i = slot.expect("a slot to take");
                self.step_slot();
                return Some((self.page.key(i), self.page.value(i)));
            }
            let (k, change) = self.pending.take().expect("a change to take");
            if let Some(v) = change {
                return Some((k, ValueRef::of(v)));
            }
        }
    }
}

impl Merge<'_> {
    fn step_slot(&mut self) {
        if self.reverse {
            self.end -= 1;
        } else {
            self.first += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{LeafWriter, StoredValue};
    use proptest::prelude::*;

    fn image_of(entries: &BTreeMap<Vec<u8>, Vec<u8>>, prefix_compression: bool) -> Vec<u8> {
        let mut w = LeafWriter::new(prefix_compression);
        for (k, v) in entries {
            w.push(k, &StoredValue::Inline(v));
        }
        w.finish()
    }

    fn no_overflow(_: Addr, _: u64) -> Result<Vec<u8>, ()> {
        Err(())
    }

    fn bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        match b {
            Bound::Included(k) => Bound::Included(k),
            Bound::Excluded(k) => Bound::Excluded(k),
            Bound::Unbounded => Bound::Unbounded,
        }
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        // Short keys over a small alphabet share prefixes (prefix compression) and collide.
        proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'c')], 0..7).prop_map(
            |mut k| {
                let mut full = b"key-".to_vec();
                full.append(&mut k);
                full
            },
        )
    }

    fn a_bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
        prop_oneof![
            Just(Bound::Unbounded),
            key().prop_map(Bound::Included),
            key().prop_map(Bound::Excluded),
        ]
    }

    proptest! {
        /// The page (image + changes) reads as the model (a map with the changes applied), by
        /// key and by every range in both directions, and its reconciled image reads the same.
        #[test]
        fn a_page_reads_as_its_model(
            image in proptest::collection::btree_map(key(), proptest::collection::vec(any::<u8>(), 0..20), 0..40),
            changes in proptest::collection::vec((key(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20))), 0..40),
            prefix_compression in any::<bool>(),
            ranges in proptest::collection::vec((a_bound(), a_bound()), 1..8),
        ) {
            let mut page = LeafPage::from_image(image_of(&image, prefix_compression), no_overflow).unwrap();
            let mut model = image.clone();
            prop_assert_eq!(page.mods_mem, 0);
            for (k, v) in &changes {
                let before = page.mem() as i64;
                let (delta, freed) = page.apply(k, v.clone().map(Value::Inline));
                prop_assert_eq!(page.mem() as i64, before + delta);
                prop_assert_eq!(freed, None);
                match v {
                    Some(v) => { model.insert(k.clone(), v.clone()); }
                    None => { model.remove(k); }
                }
            }
            for k in image.keys().chain(changes.iter().map(|(k, _)| k)) {
                prop_assert_eq!(page.get(k).map(|v| v.bytes().to_vec()), model.get(k).cloned());
            }
            let all: Vec<(Vec<u8>, Vec<u8>)> = page.entries().map(|(k, v)| (k.to_vec(), v.bytes().to_vec())).collect();
            prop_assert_eq!(&all, &model.clone().into_iter().collect::<Vec<_>>());
            for (lo, hi) in &ranges {
                if crate::cursor::empty_range(bound(lo), bound(hi)) {
                    continue;
                }
                let want: Vec<_> = model.range::<[u8], _>((bound(lo), bound(hi))).map(|(k, v)| (k.clone(), v.clone())).collect();
                let fwd: Vec<_> = page.range(bound(lo), bound(hi), false).map(|(k, v)| (k.to_vec(), v.bytes().to_vec())).collect();
                let mut rev: Vec<_> = page.range(bound(lo), bound(hi), true).map(|(k, v)| (k.to_vec(), v.bytes().to_vec())).collect();
                rev.reverse();
                prop_assert_eq!(&fwd, &want);
                prop_assert_eq!(&rev, &want);
            }
            let rebuilt = LeafPage::from_image(image_of(&model, prefix_compression), no_overflow).unwrap();
            let again: Vec<(Vec<u8>, Vec<u8>)> = rebuilt.entries().map(|(k, v)| (k.to_vec(), v.bytes().to_vec())).collect();
            prop_assert_eq!(again, all);
        }
    }

    #[test]
    fn overflow_values_come_with_the_page_and_are_freed_when_replaced() {
        let ovfl = Addr {
            offset: 8192,
            size: 4096,
            checksum: 7,
        };
        let mut w = LeafWriter::new(false);
        w.push(b"a", &StoredValue::Inline(b"1"));
        w.push(b"big", &StoredValue::Overflow { addr: ovfl, len: 3 });
        let mut page = LeafPage::from_image(w.finish(), |addr, len| {
            assert_eq!((addr, len), (ovfl, 3));
            Ok::<_, ()>(b"xyz".to_vec())
        })
        .unwrap();
        assert_eq!(
            page.get(b"big"),
            Some(ValueRef::Overflow {
                data: b"xyz",
                addr: Some(ovfl)
            })
        );
        let (_, freed) = page.apply(b"big", Some(Value::Inline(b"small".to_vec())));
        assert_eq!(
            freed,
            Some(ovfl),
            "the image's overflow block is freed once"
        );
        let (_, freed) = page.apply(b"big", None);
        assert_eq!(freed, None);
        assert_eq!(
            page.apply(b"absent", None),
            (0, None),
            "deleting nothing changes nothing"
        );
        assert_eq!(page.entries().count(), 1);
    }

    #[test]
    fn malformed_images_are_errors() {
        let mut w = LeafWriter::new(true);
        w.push(b"abcdefgh", &StoredValue::Inline(b"v"));
        w.push(b"abcdefgz", &StoredValue::Inline(b"w"));
        let buf = w.finish();
        for cut in 0..buf.len() {
            assert!(matches!(
                LeafPage::from_image(buf[..cut].to_vec(), no_overflow),
                Err(ImageError::Malformed(_))
            ));
        }
    }
}
