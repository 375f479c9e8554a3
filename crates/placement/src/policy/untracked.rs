//! `lifetime`'s live `page_id = 0` blocks: disjoint byte ranges of table files, each with its
//! birth clock and class, ended by any write, `Free`, truncation or removal that overlaps
//! them.
//!
//! Two exact representations of the same set:
//! - **paged** while every block starts and ends on a 4 KiB boundary (WiredTiger's
//!   allocation unit; the shim's traces, which carry no page ids, are all such blocks): per
//!   file, each 4 KiB page holds the birth and class of the block covering it. Births are
//!   distinct (`lifetime`'s clock advances with every write; an insert that would touch a
//!   neighbour with the same entry goes to the ordered store), so a block is the run of pages
//!   holding its entry. Finding and ending the blocks a write overlaps reads its pages'
//!   entries, about as cheap as the layout's own page map, with no side table to visit (that
//!   was a cache miss per block ended);
//! - **ordered** (a B-tree by file and offset) from the first block that does not: O(log n)
//!   per lookup, with a cache miss per tree level on a large file.
//!
//! Both end the same blocks in the same order (ascending offset), so `lifetime`'s
//! predictions do not depend on which one holds them.

use crate::event::{FileId, FileKind, PageKind};
use std::collections::BTreeMap;

const PAGE: u64 = 4096;
/// A page no block covers.
const EMPTY: u64 = u64::MAX;
/// Bits of a page entry that hold the class; the birth is above them.
const CLASS_BITS: u32 = 8;

/// A block's class: the file kind and page kind it was written as.
pub type Class = (FileKind, PageKind);

/// What [`UntrackedBlocks::kill`] reports of each block it ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ended {
    pub birth: u64,
    pub class: Class,
}

/// The page entry of a block born at `birth` (`None`: it does not fit one).
fn entry(birth: u64, (file, page): Class) -> Option<u64> {
    let class = file as u64 * PageKind::ALL.len() as u64 + page as u64;
    debug_assert!(class < 1 << CLASS_BITS);
    let e = birth.checked_mul(1 << CLASS_BITS)? | class;
    (e != EMPTY && e >> CLASS_BITS == birth).then_some(e)
}

fn ended(e: u64) -> Ended {
    let class = (e & ((1 << CLASS_BITS) - 1)) as usize;
    Ended {
        birth: e >> CLASS_BITS,
        class: (
            FileKind::ALL[class / PageKind::ALL.len()],
            PageKind::ALL[class % PageKind::ALL.len()],
        ),
    }
}

/// The pages `[start, end)` of the block covering page `p` (its run of equal entries).
fn run_at(pages: &[u64], p: usize) -> (usize, usize) {
    let e = pages[p];
    let start = p - pages[..p].iter().rev().take_while(|&&x| x == e).count();
    let end = p + pages[p..].iter().take_while(|&&x| x == e).count();
    (start, end)
}

/// Ends every block covering a page of `[first, last)` (reported in ascending order).
fn kill_pages(pages: &mut [u64], first: usize, last: usize, out: &mut Vec<Ended>) {
    let mut p = first;
    while p < last {
        let e = pages[p];
        if e == EMPTY {
            p += 1;
            continue;
        }
        let (start, end) = run_at(pages, p);
        pages[start..end].fill(EMPTY);
        out.push(ended(e));
        p = end;
    }
}

#[derive(Clone, Debug)]
enum Store {
    /// Per file: the entry of each page ([`entry`]; `EMPTY`: no block).
    Paged(foldhash::HashMap<FileId, Vec<u64>>),
    /// (file, start) → (end, birth, class).
    Ordered(BTreeMap<(FileId, u64), (u64, u64, Class)>),
}

#[derive(Clone, Debug)]
pub struct UntrackedBlocks {
    store: Store,
    live: usize,
    /// Scratch for the ordered store's kills (kept: no allocation per write).
    dying: Vec<(FileId, u64)>,
}

impl Default for UntrackedBlocks {
    fn default() -> Self {
        UntrackedBlocks {
            store: Store::Paged(Default::default()),
            live: 0,
            dying: Vec::new(),
        }
    }
}

impl UntrackedBlocks {
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Starts loading the entries of the first and the last page of `[off, end)` of `file`
    /// (a kill or an insert there comes soon). A hint only.
    pub fn prefetch(&self, file: FileId, off: u64, end: u64) {
        let Store::Paged(cover) = &self.store else {
            return;
        };
        let Some(pages) = cover.get(&file) else {
            return;
        };
        for p in [off / PAGE, end.saturating_sub(1) / PAGE] {
            if let Some(e) = pages.get(p as usize) {
                crate::cache::prefetch(e);
            }
        }
    }

    /// Every live block of `file` as (start, end), ascending (tests).
    #[cfg(test)]
    pub fn ranges(&self, file: FileId) -> Vec<(u64, u64)> {
        match &self.store {
            Store::Ordered(m) => m
                .range((file, 0)..=(file, u64::MAX))
                .map(|(k, v)| (k.1, v.0))
                .collect(),
            Store::Paged(cover) => {
                let mut v = Vec::new();
                let pages = cover.get(&file).map_or(&[][..], |p| &p[..]);
                let mut p = 0;
                while p < pages.len() {
                    if pages[p] == EMPTY {
                        p += 1;
                        continue;
                    }
                    let (start, end) = run_at(pages, p);
                    v.push((start as u64 * PAGE, end as u64 * PAGE));
                    p = end;
                }
                v
            }
        }
    }

    /// Adds the block `[start, end)` of `file`; nothing live may overlap it (kill first).
    pub fn insert(&mut self, file: FileId, start: u64, end: u64, birth: u64, class: Class) {
        let aligned = start.is_multiple_of(PAGE) && end.is_multiple_of(PAGE) && end > start;
        self.live += 1;
        if let (true, Some(e), Store::Paged(cover)) =
            (aligned, entry(birth, class), &mut self.store)
        {
            let pages = cover.entry(file).or_default();
            let (first, last) = ((start / PAGE) as usize, (end / PAGE) as usize);
            if pages.len() < last {
                pages.resize(last, EMPTY);
            }
            // A neighbour with the same entry would merge with it.
            let merges = (first > 0 && pages[first - 1] == e) || pages.get(last) == Some(&e);
            if !merges {
                for p in &mut pages[first..last] {
                    debug_assert_eq!(*p, EMPTY, "a block overlapping it was killed");
                    *p = e;
                }
                return;
            }
        }
        self.make_ordered();
        let Store::Ordered(m) = &mut self.store else {
            unreachable!("made ordered");
        };
        let overlapped = m.insert((file, start), (end, birth, class));
        debug_assert!(overlapped.is_none(), "a block overlapping it was killed");
    }

    /// Ends every block of `file` overlapping `[off, end)` — with `end <= off`, the block
    /// that holds byte `off` and starts before it — and reports them in ascending offset.
    pub fn kill(&mut self, file: FileId, off: u64, end: u64, out: &mut Vec<Ended>) {
        out.clear();
        match &mut self.store {
            Store::Ordered(m) => {
                // The blocks are disjoint: the ones overlapping are those that start inside
                // the range and at most one that starts before it. One walk down from `end`.
                let dying = &mut self.dying;
                dying.clear();
                for (k, v) in m.range((file, 0)..(file, end)).rev() {
                    if k.1 < off {
                        if v.0 > off {
                            dying.push(*k);
                        }
                        break;
                    }
                    dying.push(*k);
                }
                for k in dying.iter().rev() {
                    let (_, birth, class) = m.remove(k).expect("present");
                    out.push(Ended { birth, class });
                }
            }
            Store::Paged(cover) => {
                let Some(pages) = cover.get_mut(&file) else {
                    return;
                };
                let first = (off / PAGE) as usize;
                // Every block covers whole pages, so the blocks overlapping the bytes are
                // those covering the pages the bytes touch.
                let last = if end > off {
                    (end.div_ceil(PAGE) as usize).min(pages.len())
                } else {
                    // An empty range ends only a block holding `off` that starts before it.
                    match pages.get(first) {
                        Some(&e)
                            if e != EMPTY
                                && (!off.is_multiple_of(PAGE)
                                    || (first > 0 && pages[first - 1] == e)) =>
                        {
                            first + 1
                        }
                        _ => return,
                    }
                };
                kill_pages(pages, first, last, out);
            }
        }
        self.live -= out.len();
    }

    /// [`Self::kill`] of `[start, end)`, then [`Self::insert`] of it: a write's block ends
    /// the blocks it overlaps and takes their place, with one look-up of the file.
    pub fn replace(
        &mut self,
        file: FileId,
        start: u64,
        end: u64,
        birth: u64,
        class: Class,
        out: &mut Vec<Ended>,
    ) {
        let aligned = start.is_multiple_of(PAGE) && end.is_multiple_of(PAGE) && end > start;
        let (Store::Paged(cover), true, Some(e)) = (&mut self.store, aligned, entry(birth, class))
        else {
            self.kill(file, start, end, out);
            return self.insert(file, start, end, birth, class);
        };
        out.clear();
        let pages = cover.entry(file).or_default();
        let (first, last) = ((start / PAGE) as usize, (end / PAGE) as usize);
        if pages.len() < last {
            pages.resize(last, EMPTY);
        }
        kill_pages(pages, first, last, out);
        // A neighbour with the same entry would merge with it: `insert` stores it ordered.
        let merges = (first > 0 && pages[first - 1] == e) || pages.get(last) == Some(&e);
        if !merges {
            pages[first..last].fill(e);
        }
        self.live -= out.len();
        if merges {
            self.insert(file, start, end, birth, class);
        } else {
            self.live += 1;
        }
    }

    /// Moves every block into the ordered store (a block off the 4 KiB grid arrived, or one
    /// whose entry would merge with a neighbour's).
    fn make_ordered(&mut self) {
        let Store::Paged(cover) = &self.store else {
            return;
        };
        let mut m = BTreeMap::new();
        for (&file, pages) in cover {
            let mut p = 0;
            while p < pages.len() {
                if pages[p] == EMPTY {
                    p += 1;
                    continue;
                }
                let (start, end) = run_at(pages, p);
                let e = ended(pages[p]);
                m.insert(
                    (file, start as u64 * PAGE),
                    (end as u64 * PAGE, e.birth, e.class),
                );
                p = end;
            }
        }
        // `live` already counts the block being inserted.
        debug_assert_eq!(m.len() + 1, self.live);
        self.store = Store::Ordered(m);
    }
}
