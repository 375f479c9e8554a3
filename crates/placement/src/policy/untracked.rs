//! `lifetime`'s live `page_id = 0` blocks: disjoint byte ranges of table files, each with its
//! birth clock and class, ended by any write, `Free`, truncation or removal that overlaps
//! them.
//!
//! Two exact representations of the same set:
//! - **paged** while every block starts and ends on a 4 KiB boundary (WiredTiger's
//!   allocation unit; the shim's traces, which carry no page ids, are all such blocks): per
//!   file, the block covering each 4 KiB page. Finding and ending the blocks a write
//!   overlaps reads its pages' slots, about as cheap as the layout's own page map;
//! - **ordered** (a B-tree by file and offset) from the first block that does not: O(log n)
//!   per lookup, with a cache miss per tree level on a large file.
//!
//! Both end the same blocks in the same order (ascending offset), so `lifetime`'s
//! predictions do not depend on which one holds them.

use crate::event::{FileId, FileKind, PageKind};
use std::collections::{BTreeMap, HashMap};

const PAGE: u64 = 4096;
const NO_SLOT: u32 = u32::MAX;

/// A block's class: the file kind and page kind it was written as.
pub type Class = (FileKind, PageKind);

/// What [`UntrackedBlocks::kill`] reports of each block it ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ended {
    pub birth: u64,
    pub class: Class,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    start: u64,
    end: u64,
    birth: u64,
    class: Class,
}

#[derive(Clone, Debug)]
enum Store {
    Paged {
        /// Per file: the slot of the block covering each page (`NO_SLOT`: none).
        cover: HashMap<FileId, Vec<u32>>,
        slots: Vec<Block>,
        free_slots: Vec<u32>,
    },
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
            store: Store::Paged {
                cover: HashMap::new(),
                slots: Vec::new(),
                free_slots: Vec::new(),
            },
            live: 0,
            dying: Vec::new(),
        }
    }
}

impl UntrackedBlocks {
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Every live block of `file` as (start, end), ascending (tests).
    #[cfg(test)]
    pub fn ranges(&self, file: FileId) -> Vec<(u64, u64)> {
        match &self.store {
            Store::Ordered(m) => m
                .range((file, 0)..=(file, u64::MAX))
                .map(|(k, v)| (k.1, v.0))
                .collect(),
            Store::Paged { cover, slots, .. } => {
                let mut v: Vec<(u64, u64)> = cover
                    .get(&file)
                    .into_iter()
                    .flatten()
                    .filter(|&&s| s != NO_SLOT)
                    .map(|&s| (slots[s as usize].start, slots[s as usize].end))
                    .collect();
                v.dedup();
                v
            }
        }
    }

    /// Adds the block `[start, end)` of `file`; nothing live may overlap it (kill first).
    pub fn insert(&mut self, file: FileId, start: u64, end: u64, birth: u64, class: Class) {
        let aligned = start.is_multiple_of(PAGE) && end.is_multiple_of(PAGE) && end > start;
        if !aligned {
            self.make_ordered();
        }
        self.live += 1;
        match &mut self.store {
            Store::Ordered(m) => {
                let overlapped = m.insert((file, start), (end, birth, class));
                debug_assert!(overlapped.is_none(), "a block overlapping it was killed");
            }
            Store::Paged {
                cover,
                slots,
                free_slots,
            } => {
                let block = Block {
                    start,
                    end,
                    birth,
                    class,
                };
                let slot = match free_slots.pop() {
                    Some(s) => {
                        slots[s as usize] = block;
                        s
                    }
                    None => {
                        slots.push(block);
                        u32::try_from(slots.len() - 1).expect("fewer than 2^32 live blocks")
                    }
                };
                let pages = cover.entry(file).or_default();
                let (first, last) = ((start / PAGE) as usize, (end / PAGE) as usize);
                if pages.len() < last {
                    pages.resize(last, NO_SLOT);
                }
                for p in &mut pages[first..last] {
                    debug_assert_eq!(*p, NO_SLOT, "a block overlapping it was killed");
                    *p = slot;
                }
            }
        }
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
            Store::Paged {
                cover,
                slots,
                free_slots,
            } => {
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
                        Some(&s) if s != NO_SLOT && slots[s as usize].start < off => first + 1,
                        _ => return,
                    }
                };
                let mut p = first;
                while p < last {
                    let s = pages[p];
                    if s == NO_SLOT {
                        p += 1;
                        continue;
                    }
                    let b = slots[s as usize];
                    pages[(b.start / PAGE) as usize..(b.end / PAGE) as usize].fill(NO_SLOT);
                    free_slots.push(s);
                    out.push(Ended {
                        birth: b.birth,
                        class: b.class,
                    });
                    p = (b.end / PAGE) as usize;
                }
            }
        }
        self.live -= out.len();
    }

    /// Moves every block into the ordered store (a block off the 4 KiB grid arrived).
    fn make_ordered(&mut self) {
        let Store::Paged { slots, cover, .. } = &self.store else {
            return;
        };
        let mut m = BTreeMap::new();
        for (&file, pages) in cover {
            let mut p = 0;
            while p < pages.len() {
                let s = pages[p];
                if s == NO_SLOT {
                    p += 1;
                    continue;
                }
                let b = slots[s as usize];
                m.insert((file, b.start), (b.end, b.birth, b.class));
                p = (b.end / PAGE) as usize;
            }
        }
        debug_assert_eq!(m.len(), self.live);
        self.store = Store::Ordered(m);
    }
}
