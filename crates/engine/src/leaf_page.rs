//! The in-memory leaf page (WiredTiger's row-store `WT_PAGE`: the disk image with its `WT_ROW`
//! slots, plus insert lists and update chains): the page's image as it was read from disk, or
//! as reconciliation last wrote it, searched in place through an offset index built once when
//! the page comes into memory, and beside it the changes made since, as per-key chains of
//! versions stamped with commit numbers (`txn.rs`). Reading an unchanged record copies no page
//! and allocates nothing; reconciliation merges the image and each key's newest version
//! (`entries`) into new images, and the page is rebuilt from them (`from_image`), keeping the
//! older versions an open snapshot may still read (`into_history`, `adopt_history`).
//!
//! A key's versions: a read at commit number `at` sees the newest version numbered `at` or
//! below; if every version is newer, it sees the image's entry. So the image's entry must be
//! what the oldest reader sees whenever a chain has no version at or below `oldest`: true for
//! an image read from disk or written before the chain's first version, and kept true when a
//! page is rebuilt, by putting the old entry at the chain's bottom (numbered 0).

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
    /// Versions since the image, by key.
    mods: BTreeMap<Vec<u8>, Chain>,
    /// Bytes `mods` is charged: key, value and `ENTRY_OVERHEAD` per version.
    mods_mem: usize,
    /// The newest commit number in `mods` (0 if none): while an open snapshot reads below it,
    /// the page holds versions only it may need and must not leave memory.
    newest_csn: u64,
    /// The oldest commit number in `mods` that the image does not hold (0 if the image holds
    /// every version): a checkpoint at commit `c` must write the page if this is in 1..=c.
    unwritten_from: u64,
}

/// One key's versions, oldest first (WiredTiger's update chain, kept in the other order).
pub type Chain = Vec<Update>;

/// The chains a rebuilt page keeps, by key.
pub type History = BTreeMap<Vec<u8>, Chain>;

/// Overflow values by the block they were written to.
pub type OverflowValues = Vec<(Addr, Vec<u8>)>;

/// A put (`Some`) or delete (`None`) at a commit number.
#[derive(Clone, Debug)]
pub struct Update {
    pub csn: u64,
    pub value: Option<Value>,
}

/// What a reader at some commit number sees of a chain.
enum Seen<'a> {
    Version(Option<&'a Value>),
    /// Every version is newer: the image's entry.
    Image,
}

fn seen(chain: &[Update], at: u64) -> Seen<'_> {
    match chain.iter().rev().find(|u| u.csn <= at) {
        Some(u) => Seen::Version(u.value.as_ref()),
        None => Seen::Image,
    }
}

fn charge(key: &[u8], u: &Update) -> usize {
    key.len() + ENTRY_OVERHEAD + u.value.as_ref().map_or(0, |v| v.bytes().len())
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
            newest_csn: 0,
            unwritten_from: 0,
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
            newest_csn: 0,
            unwritten_from: 0,
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

    /// The value of `key` a reader at commit number `at` sees.
    pub fn get(&self, key: &[u8], at: u64) -> Option<ValueRef<'_>> {
        if let Some(chain) = self.mods.get(key) {
            if let Seen::Version(v) = seen(chain, at) {
                return v.map(ValueRef::of);
            }
        }
        self.find(key).ok().map(|i| self.value(i))
    }

    /// Whether the page holds versions a reader at `oldest` or later may not see: then only
    /// older readers need the older versions beside them, and the page must stay in memory.
    pub fn pinned(&self, oldest: u64) -> bool {
        self.newest_csn > oldest
    }

    /// Whether the image lacks a version numbered `at` or below: an image written at `at` would
    /// differ from this one.
    pub fn unwritten_at(&self, at: u64) -> bool {
        self.unwritten_from != 0 && self.unwritten_from <= at
    }

    /// Whether the page holds a version newer than `at` that its image does not: an image
    /// written at `at` would leave the page dirty.
    pub fn unwritten_after(&self, at: u64) -> bool {
        self.unwritten_from != 0 && self.newest_csn > at
    }

    /// The overflow blocks the image references.
    pub fn image_overflow(&self) -> impl Iterator<Item = Addr> + '_ {
        self.overflow.iter().map(|(a, _)| *a)
    }

    /// Puts (`Some`) or deletes (`None`) `key` as commit `csn`, dropping the versions below
    /// the one a reader at `oldest` sees. Returns the change in charged bytes and the overflow
    /// block that the key's previous newest value alone referenced (freed once the next image
    /// is written; a version still read keeps its bytes in memory).
    pub fn apply(
        &mut self,
        key: &[u8],
        value: Option<Value>,
        csn: u64,
        oldest: u64,
    ) -> (i64, Option<Addr>) {
        debug_assert!(csn >= self.newest_csn, "commit numbers never fall per page");
        let in_image = self.find(key).ok();
        let update = Update { csn, value };
        let added = charge(key, &update);
        let mut removed = 0;
        let freed = match self.mods.get_mut(key) {
            Some(chain) => {
                let newest = chain.last_mut().expect("a chain has a version");
                if update.value.is_none() && newest.value.is_none() {
                    return (0, None);
                }
                let freed = match &mut newest.value {
                    Some(Value::Overflow { addr, .. }) => addr.take(),
                    _ => None,
                };
                // Versions below the one the oldest reader sees are read by no one.
                if let Some(base) = chain.iter().rposition(|u| u.csn <= oldest) {
                    removed = chain.drain(..base).map(|u| charge(key, &u)).sum();
                }
                chain.push(update);
                freed
            }
            None => {
                if update.value.is_none() && in_image.is_none() {
                    return (0, None);
                }
                self.mods.insert(key.to_vec(), vec![update]);
                in_image.and_then(|i| match self.value(i) {
                    ValueRef::Overflow { addr, .. } => addr,
                    ValueRef::Inline(_) => None,
                })
            }
        };
        self.newest_csn = csn;
        if self.unwritten_from == 0 {
            self.unwritten_from = csn;
        }
        self.mods_mem = self.mods_mem + added - removed;
        (added as i64 - removed as i64, freed)
    }

    /// The overflow values a reader at `at` sees that are not written yet: reconciliation at
    /// `at` writes each and records its block.
    pub fn unwritten_overflow(
        &mut self,
        at: u64,
    ) -> impl Iterator<Item = (&[u8], &mut Option<Addr>)> {
        self.mods.values_mut().filter_map(move |chain| {
            match chain.iter_mut().rev().find(|u| u.csn <= at) {
                Some(Update {
                    value:
                        Some(Value::Overflow {
                            data,
                            addr: a @ None,
                        }),
                    ..
                }) => Some((data.as_slice(), a)),
                _ => None,
            }
        })
    }

    /// Every entry as a reader at `at` sees it, in key order: what reconciliation at `at`
    /// writes.
    pub fn entries(&self, at: u64) -> Merge<'_> {
        self.range(Bound::Unbounded, Bound::Unbounded, false, at)
    }

    /// The entries in (lo, hi) as a reader at commit number `at` sees them, forward or in
    /// reverse. The range must not be empty or inverted (`cursor::empty_range` says).
    pub fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, reverse: bool, at: u64) -> Merge<'_> {
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
            at,
        }
    }

    /// Takes the page apart after reconciliation wrote each entry as a reader at `written`
    /// sees it (`LATEST`: its newest version; a checkpoint's commit number: that cut). What
    /// the page rebuilt from the new image(s) needs is returned as [`Leftover`]: the chains an
    /// open snapshot may still read (a version newer than `oldest`) or that hold versions the
    /// images lack (newer than `written`), each cut to the version the oldest reader sees and
    /// the newer ones, that version made explicit when it was the image's.
    pub fn into_history(mut self, oldest: u64, written: u64) -> Leftover {
        assert!(
            oldest <= written,
            "a cut at {written} is older than the oldest reader {oldest}: the cut must pin"
        );
        let mut out = Leftover::default();
        for (key, mut chain) in std::mem::take(&mut self.mods) {
            // The version the new image holds, if not the old image's entry.
            let in_image = chain.iter().rposition(|u| u.csn <= written);
            let newest = chain.last().expect("a chain has a version").csn;
            if let Some(w) = in_image {
                if let Some(Value::Overflow {
                    data,
                    addr: Some(a),
                }) = &chain[w].value
                {
                    out.overflow.push((*a, data.clone()));
                    if newest > written {
                        out.superseded.push(*a);
                    }
                }
            }
            if newest <= oldest {
                continue;
            }
            let in_image = match chain.iter().rposition(|u| u.csn <= oldest) {
                Some(base) => {
                    drop(chain.drain(..base));
                    in_image.map(|w| w - base)
                }
                None => {
                    let old = self.find(&key).ok().map(|i| match self.value(i) {
                        ValueRef::Inline(b) => Value::Inline(b.to_vec()),
                        // Read from memory only: its block is not this version's any more.
                        ValueRef::Overflow { data, .. } => Value::Overflow {
                            data: data.to_vec(),
                            addr: None,
                        },
                    });
                    chain.insert(0, Update { csn: 0, value: old });
                    in_image.map(|w| w + 1)
                }
            };
            // Only the version in the image keeps its block; the others are read from memory
            // (or, newer than `written`, written by a later reconciliation).
            for (i, u) in chain.iter_mut().enumerate() {
                if let (false, Some(Value::Overflow { addr, .. })) =
                    (Some(i) == in_image, &mut u.value)
                {
                    *addr = None;
                }
            }
            out.history.insert(key, chain);
        }
        out.overflow.extend(self.overflow);
        out
    }

    /// Gives a page rebuilt from its new image, written at `written`, the versions that open
    /// snapshots still read and those the image lacks.
    pub fn adopt_history(&mut self, history: History, written: u64) {
        debug_assert!(self.mods.is_empty(), "a rebuilt page has no versions yet");
        self.mods_mem = history
            .iter()
            .flat_map(|(k, c)| c.iter().map(move |u| charge(k, u)))
            .sum();
        self.newest_csn = history
            .values()
            .filter_map(|c| c.last().map(|u| u.csn))
            .max()
            .unwrap_or(0);
        self.unwritten_from = history
            .values()
            .filter_map(|c| c.iter().find(|u| u.csn > written).map(|u| u.csn))
            .min()
            .unwrap_or(0);
        self.mods = history;
    }
}

/// What a page taken apart after reconciliation leaves for the page(s) rebuilt from the new
/// image(s).
#[derive(Default)]
pub struct Leftover {
    /// Overflow values the new images may reference, by block.
    pub overflow: OverflowValues,
    /// The chains the rebuilt pages keep, by key.
    pub history: History,
    /// Overflow blocks the new images reference for keys with newer versions they lack: free
    /// once a later image no longer references them.
    pub superseded: Vec<Addr>,
}

/// The image's entries and the changes merged in key order (a change replaces the image's
/// entry of its key; a delete hides it), in one direction.
pub struct Merge<'a> {
    page: &'a LeafPage,
    /// Image slots not yet yielded: [first, end).
    first: usize,
    end: usize,
    mods: btree_map::Range<'a, Vec<u8>, Chain>,
    /// A chain taken from `mods` but not yet used.
    pending: Option<(&'a [u8], &'a Chain)>,
    reverse: bool,
    /// The commit number the entries are seen at.
    at: u64,
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
                (Some(i), Some((mk, chain))) => {
                    let order = self.page.key(i).cmp(mk);
                    if order.is_eq() {
                        // The chain decides: a version hides the image's entry, or the
                        // reader is older than every version and sees the entry.
                        self.pending = None;
                        match seen(chain, self.at) {
                            Seen::Image => true,
                            Seen::Version(v) => {
                                self.step_slot();
                                if let Some(v) = v {
                                    return Some((mk, ValueRef::of(v)));
                                }
                                continue;
                            }
                        }
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
            let (k, chain) = self.pending.take().expect("a chain to use");
            if let Seen::Version(Some(v)) = seen(chain, self.at) {
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
    use crate::txn::LATEST;
    use proptest::prelude::*;

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    fn image_of(entries: &Model, prefix_compression: bool) -> Vec<u8> {
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

    /// What a test does to a page next.
    #[derive(Clone, Debug)]
    enum Step {
        /// A put or delete, the next commit.
        Change(Vec<u8>, Option<Vec<u8>>),
        /// A reader takes a snapshot now.
        Snapshot,
        /// Reconciliation: the page is rebuilt from its entries as the checkpoint's cut sees
        /// them (its newest versions if no cut is open) and the chains it keeps.
        Reconcile,
        /// A checkpoint's cut at the newest commit opens (pinning it as a snapshot would) or,
        /// if one is open, closes.
        Cut,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (key(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)))
                .prop_map(|(k, v)| Step::Change(k, v)),
            1 => Just(Step::Snapshot),
            1 => Just(Step::Reconcile),
            1 => Just(Step::Cut),
        ]
    }

    fn read_all(
        page: &LeafPage,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        at: u64,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        page.range(lo, hi, reverse, at)
            .map(|(k, v)| (k.to_vec(), v.bytes().to_vec()))
            .collect()
    }

    proptest! {
        /// The page (image + version chains) reads as the model at every snapshot taken while
        /// changes were applied and the page was reconciled and rebuilt: by key, and by every
        /// range in both directions; and its newest versions read as the final model.
        #[test]
        fn a_page_reads_as_its_model_at_every_snapshot(
            image in proptest::collection::btree_map(key(), proptest::collection::vec(any::<u8>(), 0..20), 0..40),
            steps in proptest::collection::vec(step(), 0..60),
            prefix_compression in any::<bool>(),
            ranges in proptest::collection::vec((a_bound(), a_bound()), 1..6),
        ) {
            let mut page = LeafPage::from_image(image_of(&image, prefix_compression), no_overflow).unwrap();
            let mut model = image.clone();
            let mut snapshots: Vec<(u64, Model)> = Vec::new();
            let mut csn = 0u64;
            let mut keys: Vec<Vec<u8>> = image.keys().cloned().collect();
            let mut cut: Option<(u64, Model)> = None;
            for s in &steps {
                // Every snapshot stays open: the oldest reader is the first one, else now; an
                // open cut pins like a snapshot.
                let oldest = snapshots.first().map_or(csn, |(at, _)| *at);
                let oldest = cut.as_ref().map_or(oldest, |(at, _)| oldest.min(*at));
                match s {
                    Step::Change(k, v) => {
                        csn += 1;
                        let before = page.mem() as i64;
                        let (delta, freed) = page.apply(k, v.clone().map(Value::Inline), csn, oldest);
                        prop_assert_eq!(page.mem() as i64, before + delta);
                        prop_assert_eq!(freed, None);
                        if delta != 0 {
                            prop_assert!(page.unwritten_at(csn) && page.unwritten_after(csn - 1));
                        }
                        match v {
                            Some(v) => { model.insert(k.clone(), v.clone()); }
                            None => { model.remove(k); }
                        }
                        keys.push(k.clone());
                    }
                    Step::Snapshot => snapshots.push((csn, model.clone())),
                    Step::Reconcile => {
                        let at = cut.as_ref().map_or(LATEST, |(at, _)| *at);
                        let written: BTreeMap<_, _> = read_all(&page, Bound::Unbounded, Bound::Unbounded, false, at).into_iter().collect();
                        if let Some((_, want)) = &cut {
                            prop_assert_eq!(&written, want, "the cut's image is the model at the cut");
                        }
                        let history = std::mem::replace(&mut page, LeafPage::empty()).into_history(oldest, at).history;
                        page = LeafPage::from_image(image_of(&written, prefix_compression), no_overflow).unwrap();
                        page.adopt_history(history, at);
                        prop_assert!(!page.unwritten_at(at), "the image holds every version up to {}", at);
                        if at == LATEST {
                            prop_assert!(!page.unwritten_after(0));
                        }
                    }
                    Step::Cut => {
                        cut = match cut {
                            None => Some((csn, model.clone())),
                            Some(_) => None,
                        };
                    }
                }
            }
            snapshots.push((LATEST, model.clone()));
            for (at, want) in &snapshots {
                for k in &keys {
                    prop_assert_eq!(page.get(k, *at).map(|v| v.bytes().to_vec()), want.get(k).cloned(), "key {:?} at {}", k, at);
                }
                prop_assert_eq!(&read_all(&page, Bound::Unbounded, Bound::Unbounded, false, *at), &want.clone().into_iter().collect::<Vec<_>>());
                for (lo, hi) in &ranges {
                    if crate::cursor::empty_range(bound(lo), bound(hi)) {
                        continue;
                    }
                    let expect: Vec<_> = want.range::<[u8], _>((bound(lo), bound(hi))).map(|(k, v)| (k.clone(), v.clone())).collect();
                    let mut rev = read_all(&page, bound(lo), bound(hi), true, *at);
                    rev.reverse();
                    prop_assert_eq!(&read_all(&page, bound(lo), bound(hi), false, *at), &expect);
                    prop_assert_eq!(&rev, &expect);
                }
            }
            prop_assert_eq!(page.pinned(LATEST), false);
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
            page.get(b"big", LATEST),
            Some(ValueRef::Overflow {
                data: b"xyz",
                addr: Some(ovfl)
            })
        );
        let (_, freed) = page.apply(b"big", Some(Value::Inline(b"small".to_vec())), 1, 0);
        assert_eq!(
            freed,
            Some(ovfl),
            "the image's overflow block is freed once"
        );
        let (_, freed) = page.apply(b"big", None, 2, 1);
        assert_eq!(freed, None);
        assert_eq!(
            page.apply(b"absent", None, 3, 2),
            (0, None),
            "deleting nothing changes nothing"
        );
        assert_eq!(page.entries(LATEST).count(), 1);
        assert_eq!(
            page.get(b"big", 0).map(|v| v.bytes()),
            Some(&b"xyz"[..]),
            "a reader older than both changes still sees the overflow value"
        );
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
