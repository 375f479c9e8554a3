//! A filesystem-like layout: turns file-level I/O (file, byte offset, length) into LBA ranges.
//!
//! Each file is a map from its 4 KiB pages to LBAs, allocated on demand the first time a page
//! is written (so files grow, and sparse writes fill holes later). Freed pages (truncate,
//! remove, punched holes) return to a free-extent map and are reported to the caller, who
//! trims them when the filesystem runs with online discard (`-o discard`: "only discards
//! blocks transitioning from used to free").
//!
//! Allocation policy (it changes results: first-fit instead of next-fit raised a measured WA
//! from 1.53 to 2.06, `notes/placement-findings.md`):
//! - **next-fit** (default): continue from where the last allocation ended, wrapping at the
//!   end of the device. Freed space is reused only after the cursor comes round, like a
//!   log-ish allocator (ext4's per-inode goal and XFS's rotor both keep moving forward); the
//!   device then sees writes sweep the LBA space.
//! - **first-fit**: always the lowest free LBA; freed space is reused at once.

use crate::error::SsdError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const PAGE: u64 = crate::config::PAGE_BYTES;
const UNMAPPED: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocPolicy {
    NextFit,
    FirstFit,
}

impl AllocPolicy {
    pub fn parse(s: &str) -> Result<Self, SsdError> {
        match s {
            "next-fit" => Ok(AllocPolicy::NextFit),
            "first-fit" => Ok(AllocPolicy::FirstFit),
            _ => Err(SsdError::Layout(format!(
                "unknown allocation policy {s:?} (next-fit, first-fit)"
            ))),
        }
    }
}

/// An LBA range: (first LBA, pages).
pub type Extent = (u64, u64);

pub struct FsLayout {
    capacity: u64,
    policy: AllocPolicy,
    /// Free LBA extents: start → length, never adjacent (coalesced).
    free: BTreeMap<u64, u64>,
    free_pages: u64,
    cursor: u64,
    files: BTreeMap<u64, Vec<u32>>,
    peak_used: u64,
}

impl FsLayout {
    pub fn new(capacity_pages: u64, policy: AllocPolicy) -> Result<Self, SsdError> {
        if capacity_pages == 0 || capacity_pages >= UNMAPPED as u64 {
            return Err(SsdError::Layout(format!(
                "layout capacity must be 1..2^32−1 pages, not {capacity_pages}"
            )));
        }
        let mut free = BTreeMap::new();
        free.insert(0, capacity_pages);
        Ok(FsLayout {
            capacity: capacity_pages,
            policy,
            free,
            free_pages: capacity_pages,
            cursor: 0,
            files: BTreeMap::new(),
            peak_used: 0,
        })
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    pub fn used_pages(&self) -> u64 {
        self.capacity - self.free_pages
    }
    /// The most pages ever allocated at once.
    pub fn peak_used_pages(&self) -> u64 {
        self.peak_used
    }
    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// The LBA ranges that hold bytes `offset..offset+len` of `file`, allocating pages not
    /// yet allocated (the file is created on first write). Ranges are appended to `out` in
    /// file order, adjacent LBAs merged.
    pub fn write(
        &mut self,
        file: u64,
        offset: u64,
        len: u64,
        out: &mut Vec<Extent>,
    ) -> Result<(), SsdError> {
        out.clear();
        if len == 0 {
            return Ok(());
        }
        let first = offset / PAGE;
        let end = offset
            .checked_add(len)
            .map(|e| e.div_ceil(PAGE))
            .filter(|&e| e < UNMAPPED as u64)
            .ok_or_else(|| {
                SsdError::Layout(format!(
                    "file {file}: offset {offset} + {len} bytes is beyond 16 TiB"
                ))
            })?;
        let map = self.files.entry(file).or_default();
        if map.len() < end as usize {
            map.resize(end as usize, UNMAPPED);
        }
        let pages = &map[first as usize..end as usize];
        let missing = pages.iter().filter(|&&l| l == UNMAPPED).count() as u64;
        if missing == 0 {
            // An overwrite, the common case: nothing to allocate.
            push_ranges(pages, out);
            return Ok(());
        }
        if missing > self.free_pages {
            return Err(SsdError::LayoutFull {
                needed: missing - self.free_pages,
                capacity: self.capacity,
            });
        }
        // Out of the file table while `take` borrows the free map; back in below.
        let mut map = std::mem::take(map);
        self.allocate_holes(&mut map[first as usize..end as usize]);
        push_ranges(&map[first as usize..end as usize], out);
        self.files.insert(file, map);
        self.peak_used = self.peak_used.max(self.used_pages());
        Ok(())
    }

    /// Gives every unmapped page of `pages` an LBA, a run of holes at a time.
    fn allocate_holes(&mut self, pages: &mut [u32]) {
        let mut i = 0;
        while i < pages.len() {
            if pages[i] != UNMAPPED {
                i += 1;
                continue;
            }
            let run_end = pages[i..]
                .iter()
                .position(|&l| l != UNMAPPED)
                .map_or(pages.len(), |n| i + n);
            while i < run_end {
                let (start, got) = self.take((run_end - i) as u64);
                for (k, lba) in pages[i..i + got as usize].iter_mut().enumerate() {
                    *lba = (start + k as u64) as u32;
                }
                i += got as usize;
            }
        }
    }

    /// The LBA ranges currently mapped for bytes `offset..offset+len` (for reads); pages never
    /// written are skipped.
    pub fn mapped(&self, file: u64, offset: u64, len: u64, out: &mut Vec<Extent>) {
        out.clear();
        let Some(map) = self.files.get(&file) else {
            return;
        };
        let first = (offset / PAGE) as usize;
        let end = (offset.saturating_add(len).div_ceil(PAGE) as usize).min(map.len());
        if first < end {
            push_ranges(&map[first..end], out);
        }
    }

    /// Punches a hole: pages wholly inside `offset..offset+len` are freed (partial pages at
    /// the edges keep their data). Freed LBA ranges go to `out`.
    pub fn punch(&mut self, file: u64, offset: u64, len: u64, out: &mut Vec<Extent>) {
        let first = offset.div_ceil(PAGE);
        let end = offset.saturating_add(len) / PAGE;
        self.release(file, first, end, out);
    }

    /// Cuts the file to `len` bytes; pages past the new end are freed into `out`.
    pub fn truncate(&mut self, file: u64, len: u64, out: &mut Vec<Extent>) {
        self.release(file, len.div_ceil(PAGE), u64::MAX, out);
        if let Some(map) = self.files.get_mut(&file) {
            map.truncate(len.div_ceil(PAGE) as usize);
        }
    }

    /// Deletes the file; all its pages are freed into `out`.
    pub fn remove(&mut self, file: u64, out: &mut Vec<Extent>) {
        self.release(file, 0, u64::MAX, out);
        self.files.remove(&file);
    }

    fn release(&mut self, file: u64, first: u64, end: u64, out: &mut Vec<Extent>) {
        out.clear();
        let Some(map) = self.files.get_mut(&file) else {
            return;
        };
        let end = end.min(map.len() as u64);
        if first >= end {
            return;
        }
        let slice = &mut map[first as usize..end as usize];
        push_ranges(slice, out);
        slice.fill(UNMAPPED);
        for &(s, n) in out.iter() {
            self.give_back(s, n);
        }
    }

    /// Takes up to `want` contiguous free pages by the policy; returns (start, pages).
    fn take(&mut self, want: u64) -> (u64, u64) {
        debug_assert!(self.free_pages > 0);
        let (start, len) = match self.policy {
            AllocPolicy::FirstFit => {
                let (&s, &l) = self.free.iter().next().expect("free space");
                (s, l)
            }
            AllocPolicy::NextFit => {
                let c = self.cursor;
                match self.free.range(..=c).next_back() {
                    Some((&s, &l)) if s + l > c => (c, s + l - c),
                    _ => match self.free.range(c..).next() {
                        Some((&s, &l)) => (s, l),
                        None => {
                            let (&s, &l) = self.free.iter().next().expect("free space");
                            (s, l)
                        }
                    },
                }
            }
        };
        let got = want.min(len);
        self.carve(start, got);
        self.cursor = start + got;
        if self.cursor >= self.capacity {
            self.cursor = 0;
        }
        (start, got)
    }

    /// Removes `start..start+n` (inside one free extent) from the free map.
    fn carve(&mut self, start: u64, n: u64) {
        let (&s, &l) = self
            .free
            .range(..=start)
            .next_back()
            .expect("carved range is free");
        debug_assert!(s <= start && start + n <= s + l);
        self.free.remove(&s);
        if s < start {
            self.free.insert(s, start - s);
        }
        if start + n < s + l {
            self.free.insert(start + n, s + l - (start + n));
        }
        self.free_pages -= n;
    }

    fn give_back(&mut self, mut start: u64, mut n: u64) {
        self.free_pages += n;
        if let Some((&s, &l)) = self.free.range(..start).next_back() {
            debug_assert!(s + l <= start, "double free at LBA {start}");
            if s + l == start {
                self.free.remove(&s);
                start = s;
                n += l;
            }
        }
        if let Some(&l) = self.free.get(&(start + n)) {
            self.free.remove(&(start + n));
            n += l;
        }
        self.free.insert(start, n);
    }
}

/// Appends the mapped pages of `map` as merged LBA ranges.
fn push_ranges(map: &[u32], out: &mut Vec<Extent>) {
    for &l in map {
        if l == UNMAPPED {
            continue;
        }
        match out.last_mut() {
            Some((s, n)) if *s + *n == l as u64 => *n += 1,
            _ => out.push((l as u64, 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_grow_on_demand_and_next_fit_moves_forward() {
        let mut fs = FsLayout::new(100, AllocPolicy::NextFit).unwrap();
        let mut out = Vec::new();
        fs.write(1, 0, 3 * PAGE, &mut out).unwrap();
        assert_eq!(out, vec![(0, 3)]);
        fs.write(2, 0, 1, &mut out).unwrap();
        assert_eq!(out, vec![(3, 1)]);
        // File 1 grows: its 4th page comes after file 2's page.
        fs.write(1, 2 * PAGE + 10, PAGE, &mut out).unwrap();
        assert_eq!(out, vec![(2, 1), (4, 1)]);
        // Removing file 1 frees LBAs 0..3 and 4; next-fit does not go back to them yet.
        fs.remove(1, &mut out);
        assert_eq!(out, vec![(0, 3), (4, 1)]);
        fs.write(3, 0, PAGE, &mut out).unwrap();
        assert_eq!(out, vec![(5, 1)]);
        assert_eq!(fs.used_pages(), 2);
        assert_eq!(fs.peak_used_pages(), 5);
    }

    #[test]
    fn first_fit_reuses_the_lowest_hole() {
        let mut fs = FsLayout::new(100, AllocPolicy::FirstFit).unwrap();
        let mut out = Vec::new();
        fs.write(1, 0, 4 * PAGE, &mut out).unwrap();
        fs.write(2, 0, 4 * PAGE, &mut out).unwrap();
        fs.punch(1, PAGE, 2 * PAGE, &mut out);
        assert_eq!(out, vec![(1, 2)]);
        fs.write(3, 0, 3 * PAGE, &mut out).unwrap();
        assert_eq!(out, vec![(1, 2), (8, 1)]);
    }

    #[test]
    fn next_fit_wraps_and_full_is_an_error() {
        let mut fs = FsLayout::new(10, AllocPolicy::NextFit).unwrap();
        let mut out = Vec::new();
        fs.write(1, 0, 8 * PAGE, &mut out).unwrap();
        fs.truncate(1, 2 * PAGE + 1, &mut out);
        assert_eq!(out, vec![(3, 5)]);
        fs.write(2, 0, 4 * PAGE, &mut out).unwrap();
        assert_eq!(out, vec![(8, 2), (3, 2)]);
        let e = fs.write(3, 0, 5 * PAGE, &mut out).unwrap_err();
        assert!(matches!(e, SsdError::LayoutFull { .. }), "{e}");
        assert_eq!(fs.used_pages(), 7);
    }

    #[test]
    fn punch_frees_only_whole_pages_and_reads_see_mappings() {
        let mut fs = FsLayout::new(50, AllocPolicy::NextFit).unwrap();
        let mut out = Vec::new();
        fs.write(7, 0, 4 * PAGE, &mut out).unwrap();
        fs.punch(7, 100, 2 * PAGE, &mut out);
        assert_eq!(out, vec![(1, 1)]);
        fs.mapped(7, 0, 4 * PAGE, &mut out);
        assert_eq!(out, vec![(0, 1), (2, 2)]);
        fs.remove(99, &mut out);
        assert!(out.is_empty());
    }
}
