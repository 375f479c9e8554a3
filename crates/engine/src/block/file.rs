//! The block manager: one per file. It hands out extents for new blocks, frees old ones under
//! WiredTiger's checkpoint rules, and reads, writes, checksums and (de)compresses blocks.
//!
//! Free space lives in three extent lists (seed 002 §2.3, notes/wiredtiger.md §1):
//! - `alloc`: extents allocated since the last checkpoint. Freeing one of them makes it
//!   reusable at once: no checkpoint references it.
//! - `discard`: extents freed since the last checkpoint that the last durable checkpoint still
//!   references. They become reusable only once the *next* checkpoint is durable.
//! - `avail`: free extents, reusable now.
//!
//! A checkpoint writes the lists (alloc, discard, then avail last, with the file size), moves
//! `discard` to `pending`, and after the commit `resolve` merges `pending` into `avail`. This
//! delay is what makes a B-tree file ping-pong between two regions (seed 000 Fig. 3).

use super::extent::{
    check_disjoint, decode_extents, encode_extents, extents_payload_len, ExtentSet,
};
use super::image::{
    build_block, descriptor_block, descriptor_ok, parse_block, round_up, Addr, BadBlock,
    BlockImage, BLOCK_HEADER, DESC_CHECKED,
};
use crate::config::{AllocPolicy, Allocation, Compressor, ALLOC_UNIT};
use crate::error::{Error, IoContext, Result};
use crate::io::{FileRole, FsSpace, Io, IoFile, OpenMode, DIRECT_IO_ALIGN};
use parking_lot::Mutex;
use placement::{FileId, PageKind, WriteCause};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a checkpoint of one file records (in the metadata): its root and its extent lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCheckpoint {
    pub root: Addr,
    pub alloc: Addr,
    pub discard: Option<Addr>,
    pub avail: Addr,
    pub file_size: u64,
}

/// A file's checkpoint whose blocks are written but not yet synced: [`BlockFile::checkpoint`]
/// returns it, and only [`UnsyncedCheckpoint::sync`] turns it into the [`FileCheckpoint`] that
/// metadata may record. The two are apart so that the fdatasync, the longest step of a table's
/// checkpoint, runs after the caller has let go of the table's `structure` latch: during it,
/// eviction and scrub may write the table's pages again (they take free space that neither
/// this checkpoint nor the durable one references, and the sync covers their writes too).
#[must_use = "a checkpoint is not durable until it is synced"]
#[derive(Debug)]
pub struct UnsyncedCheckpoint(FileCheckpoint);

impl UnsyncedCheckpoint {
    /// The fdatasync that makes every block the checkpoint names durable. A failure stops
    /// every later write (the fail-stop rule), so no checkpoint is committed after it.
    pub fn sync(self, file: &BlockFile) -> Result<FileCheckpoint> {
        file.io.sync_data(&file.file)?;
        Ok(self.0)
    }
}

struct ExtentState {
    /// The logical end of the file: allocation past it grows the file.
    size: u64,
    avail: ExtentSet,
    alloc: ExtentSet,
    discard: ExtentSet,
    /// Discarded extents of a checkpoint that is written but not yet known durable.
    pending: ExtentSet,
    /// The extent-list blocks of the newest written checkpoint: freed by the next one.
    lists: Vec<Addr>,
    /// The sweep allocator's position (`AllocPolicy::Sweep`).
    cursor: u64,
}

impl ExtentState {
    /// Free bytes, reusable now or after the next checkpoint.
    fn free_bytes(&self) -> u64 {
        self.avail.bytes() + self.discard.bytes() + self.pending.bytes()
    }

    /// The lists are pairwise disjoint and lie between the descriptor and the end of the file.
    fn check(&self) -> std::result::Result<(), String> {
        check_disjoint(
            &[
                ("alloc", &self.alloc),
                ("avail", &self.avail),
                ("discard", &self.discard),
                ("pending", &self.pending),
            ],
            ALLOC_UNIT,
            self.size,
        )
    }
}

// Every block offset and length is a multiple of the allocation unit, so table files can be
// opened with O_DIRECT without rewriting a block's layout.
const _: () = assert!(ALLOC_UNIT.is_multiple_of(DIRECT_IO_ALIGN));

/// How many free extents a sweep allocation looks at before it gives up and appends.
const SWEEP_SCAN: usize = 4096;

/// Free space the sweep leaves the file system: with less, it reuses a free extent (best fit)
/// rather than grow the file for its reserve.
pub const ENOSPC_MARGIN: u64 = 64 << 20;

/// The sweep's reserve share of the file, given the configured share and the file system's
/// space (`None`: as configured). A reserve of r makes the file about 1/(1 − r) of best fit's
/// bytes; so the share is as configured while the file system is at most half full, falls
/// linearly to 0.2 (at most 1.25× best fit's bytes) at 80 % full, and to nothing at 95 %.
pub fn adapted_reserve(configured: f64, space: Option<FsSpace>) -> f64 {
    let Some(space) = space else {
        return configured;
    };
    let fill = space.fill();
    let cap = if fill <= 0.5 {
        1.0
    } else if fill <= 0.8 {
        0.5 - (fill - 0.5) / 0.3 * 0.3
    } else if fill < 0.95 {
        0.2 * (0.95 - fill) / 0.15
    } else {
        0.0
    };
    configured.min(cap)
}

/// Counters for statistics.
#[derive(Default)]
pub struct BlockStats {
    pub bytes_written: AtomicU64,
    pub blocks_written: AtomicU64,
    pub bytes_read: AtomicU64,
    pub blocks_read: AtomicU64,
}

/// One extent-list block of a checkpoint: encoded, and its space reserved, under the state
/// lock; written after it is let go.
struct ListBlock {
    image: BlockImage,
    offset: u64,
    /// The reserved length: the image padded with zeros.
    len: u64,
}

impl ListBlock {
    fn new(image: BlockImage, offset: u64, len: u64) -> ListBlock {
        // The reservation's estimate has headroom: an image past it would overwrite the next
        // block.
        debug_assert!(
            image.buf.len() as u64 <= len,
            "an extent list ({} bytes) fits its reserved block ({len} bytes)",
            image.buf.len()
        );
        ListBlock { image, offset, len }
    }
}

/// What a checkpoint writes of a file's extent lists, planned under the state lock.
struct ListPlan {
    alloc: ListBlock,
    discard: Option<ListBlock>,
    avail: ListBlock,
    /// The file size the lists record.
    size: u64,
    /// The previous checkpoint's list blocks, moved to `discard` (put back if this one fails).
    old_lists: Vec<Addr>,
}

pub struct BlockFile {
    file: Arc<IoFile>,
    alloc: Allocation,
    state: Mutex<ExtentState>,
    io: Arc<Io>,
    pub stats: BlockStats,
}

impl BlockFile {
    /// Creates a new file holding only its descriptor block.
    pub fn create(
        path: &Path,
        role: FileRole,
        alloc: Allocation,
        io: Arc<Io>,
    ) -> Result<BlockFile> {
        let file = io.open(path, OpenMode::CreateTruncate, role, file_name(path))?;
        let bf = BlockFile::from_parts(file, alloc, ALLOC_UNIT, Vec::new(), io);
        bf.pwrite(
            &descriptor_block(),
            0,
            PageKind::Descriptor,
            0,
            WriteCause::Other,
        )?;
        Ok(bf)
    }

    /// Opens an existing file at a checkpoint: the file is cut (or extended) to the
    /// checkpoint's size — anything written after it is garbage — and the free space is the
    /// checkpoint's avail list.
    pub fn open_checkpoint(
        path: &Path,
        role: FileRole,
        alloc: Allocation,
        ckpt: &FileCheckpoint,
        io: Arc<Io>,
    ) -> Result<BlockFile> {
        let file = io.open(path, OpenMode::Existing, role, file_name(path))?;
        let mut desc = [0u8; DESC_CHECKED];
        io.read(&file, &mut desc, 0)?;
        if !descriptor_ok(&desc) {
            return Err(Error::Corrupt {
                file: path.to_path_buf(),
                offset: 0,
                what: "bad file descriptor block (not a flashdoc table file?)".into(),
            });
        }
        let len = file
            .file()
            .metadata()
            .ctx(|| format!("stat {}", path.display()))?
            .len();
        if len != ckpt.file_size {
            io.set_len(&file, ckpt.file_size, len)?;
        }
        let lists = [Some(ckpt.alloc), ckpt.discard, Some(ckpt.avail)]
            .into_iter()
            .flatten()
            .collect();
        let bf = BlockFile::from_parts(file, alloc, ckpt.file_size, lists, io);
        let (_, payload) = bf.read(ckpt.avail)?;
        let (file_size, extents) = decode_extents(&payload).map_err(|what| Error::Corrupt {
            file: path.to_path_buf(),
            offset: ckpt.avail.offset,
            what,
        })?;
        if file_size != ckpt.file_size {
            return Err(Error::Corrupt {
                file: path.to_path_buf(),
                offset: ckpt.avail.offset,
                what: format!(
                    "avail list records file size {file_size}, metadata says {}",
                    ckpt.file_size
                ),
            });
        }
        // Read from disk: a list that breaks the invariant is corrupt data, not a bug.
        let mut end = ALLOC_UNIT;
        for &(o, l) in &extents {
            if o < end {
                return Err(Error::Corrupt {
                    file: path.to_path_buf(),
                    offset: ckpt.avail.offset,
                    what: format!(
                        "avail extent [{o}, +{l}) overlaps the descriptor or the extent before it"
                    ),
                });
            }
            end = o + l;
        }
        let mut st = bf.state.lock();
        for (o, l) in extents {
            st.avail.insert(o, l);
        }
        bf.check(&st, "open");
        drop(st);
        Ok(bf)
    }

    /// An open file of `size` bytes whose free space is yet to be filled in.
    fn from_parts(
        file: Arc<IoFile>,
        alloc: Allocation,
        size: u64,
        lists: Vec<Addr>,
        io: Arc<Io>,
    ) -> BlockFile {
        BlockFile {
            file,
            alloc,
            state: Mutex::new(ExtentState {
                size,
                avail: ExtentSet::default(),
                alloc: ExtentSet::default(),
                discard: ExtentSet::default(),
                pending: ExtentSet::default(),
                lists,
                cursor: 0,
            }),
            io,
            stats: BlockStats::default(),
        }
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
    /// The file's trace id.
    pub fn id(&self) -> FileId {
        self.file.id()
    }
    pub fn size(&self) -> u64 {
        self.state.lock().size
    }

    /// Asserts (debug builds) that the extent lists are disjoint and inside the file: called at
    /// the entry and exit of write, free and checkpoint. It walks every extent, hence debug only.
    #[inline]
    fn check(&self, st: &ExtentState, at: &str) {
        if cfg!(debug_assertions) {
            if let Err(e) = st.check() {
                panic!(
                    "{}: extent lists broken at {at}: {e}",
                    self.path().display()
                );
            }
        }
    }

    /// WiredTiger's "misplaced block" check (debug builds): a block read or freed must not be
    /// free space already, and must lie inside the file.
    #[inline]
    fn check_placed(&self, addr: Addr, at: &str) {
        if cfg!(debug_assertions) {
            let st = self.state.lock();
            let (off, len) = addr.extent();
            let free = [
                ("avail", &st.avail),
                ("discard", &st.discard),
                ("pending", &st.pending),
            ]
            .into_iter()
            .find(|(_, s)| s.overlaps(off, len));
            assert!(
                free.is_none() && off >= ALLOC_UNIT && off + len <= st.size,
                "{}: misplaced block at {at}: [{off}, +{len}) is {} (file size {})",
                self.path().display(),
                free.map_or("outside the file", |(n, _)| n),
                st.size
            );
        }
    }

    fn pwrite(
        &self,
        buf: &[u8],
        offset: u64,
        kind: PageKind,
        page_id: u64,
        cause: WriteCause,
    ) -> Result<()> {
        self.io
            .write(&self.file, buf, offset, kind, page_id, cause)?;
        self.stats
            .bytes_written
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.stats.blocks_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Chooses space for `len` bytes. `first_fit` is forced for roots and extent lists.
    /// `space` is the file system's, when the sweep's reserve follows it ([`adapted_reserve`]).
    fn allocate(
        st: &mut ExtentState,
        alloc: Allocation,
        len: u64,
        first_fit: bool,
        space: Option<FsSpace>,
    ) -> u64 {
        let found = match (alloc.policy, first_fit) {
            (AllocPolicy::Append, _) => None,
            (_, true) | (AllocPolicy::First, _) => st.avail.take_first(len),
            (AllocPolicy::Best, false) => st.avail.take_best(len),
            (AllocPolicy::Sweep, false) => Self::sweep(st, len, alloc, space),
        };
        found.unwrap_or_else(|| {
            let off = st.size;
            st.size += len;
            off
        })
    }

    /// The sweep allocator: the next fitting free extent at or after the cursor; at the end of
    /// the file, wrap to its start only while the file keeps its free reserve, else append.
    /// The reserve is never the cause of ENOSPC: when appending would leave the file system
    /// less than [`ENOSPC_MARGIN`], a fitting free extent is taken best-fit instead.
    fn sweep(
        st: &mut ExtentState,
        len: u64,
        alloc: Allocation,
        space: Option<FsSpace>,
    ) -> Option<u64> {
        let reserve_share = adapted_reserve(alloc.sweep_reserve(), space);
        let found = st.avail.take_next(st.cursor, len, SWEEP_SCAN).or_else(|| {
            let reserve = (st.size as f64 * reserve_share) as u64;
            (st.free_bytes() >= reserve)
                .then(|| st.avail.take_next(0, len, SWEEP_SCAN))
                .flatten()
        });
        let found = found.or_else(|| {
            let no_room = space.is_some_and(|s| s.avail < len + ENOSPC_MARGIN);
            no_room.then(|| st.avail.take_best(len)).flatten()
        });
        // Appending moves the cursor to the end too: the sweep then goes on from there.
        st.cursor = found.unwrap_or(st.size) + len;
        found
    }

    /// Writes a page as a new block and returns its address. Never overwrites a live block.
    /// `page_id` names the logical page (see `placement::WriteEvent::page_id`); `cause` says
    /// why it is written.
    pub fn write(
        &self,
        image: &BlockImage,
        kind: PageKind,
        first_fit: bool,
        page_id: u64,
        cause: WriteCause,
    ) -> Result<Addr> {
        let len = image.buf.len() as u64;
        let offset = {
            let mut st = self.state.lock();
            self.check(&st, "write entry");
            let off = Self::allocate(&mut st, self.alloc, len, first_fit, self.io.fs_space());
            st.alloc.insert(off, len);
            off
        };
        if let Err(e) = self.pwrite(&image.buf, offset, kind, page_id, cause) {
            // Give the space back: it was never referenced (the seam has announced it free).
            let mut st = self.state.lock();
            st.alloc.remove_range(offset, len);
            st.avail.insert(offset, len);
            self.check(&st, "write failure");
            return Err(e);
        }
        if cfg!(debug_assertions) {
            let st = self.state.lock();
            debug_assert!(
                st.alloc.contains(offset, len),
                "a written block is allocated"
            );
            self.check(&st, "write exit");
        }
        Ok(Addr {
            offset,
            size: len as u32,
            checksum: image.checksum,
        })
    }

    /// Frees a block that a newer page image (or a removed value) replaced.
    pub fn free(&self, addr: Addr) {
        self.check_placed(addr, "free");
        let (off, len) = addr.extent();
        let mut st = self.state.lock();
        self.check(&st, "free entry");
        if st.alloc.remove_range(off, len) {
            // Allocated in this checkpoint interval: no checkpoint can reach it. Announced
            // before the space can be allocated again (the state lock is still held): a TRIM
            // batcher must see this Free before any later Write of the same space, or it would
            // trim that write's data.
            self.io.free(&self.file, off, len);
            st.avail.insert(off, len);
        } else {
            st.discard.insert(off, len);
        }
        self.check(&st, "free exit");
    }

    /// Reads and verifies a block; returns its page kind and uncompressed payload.
    pub fn read(&self, addr: Addr) -> Result<(PageKind, Vec<u8>)> {
        self.check_placed(addr, "read");
        let mut buf = vec![0u8; addr.size as usize];
        self.io.read(&self.file, &mut buf, addr.offset)?;
        self.stats
            .bytes_read
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.stats.blocks_read.fetch_add(1, Ordering::Relaxed);
        parse_block(&mut buf, addr).map_err(|bad| match bad {
            BadBlock::Checksum => Error::Checksum {
                file: self.path().to_path_buf(),
                offset: addr.offset,
                size: addr.size as u64,
            },
            BadBlock::Payload(what) => Error::Corrupt {
                file: self.path().to_path_buf(),
                offset: addr.offset,
                what,
            },
        })
    }

    /// Writes this file's part of a checkpoint after the tree's pages (root last) are written:
    /// the extent lists — alloc, discard, then avail (with the file size) — by first-fit, and a
    /// truncation of free space at the end of the file. Returns what the metadata must record
    /// once [`UnsyncedCheckpoint::sync`] has made it durable. Nothing becomes reusable until
    /// [`BlockFile::resolve`] is called after the metadata commit.
    pub fn checkpoint(&self, root: Addr) -> Result<UnsyncedCheckpoint> {
        self.check_placed(root, "checkpoint root");
        let plan = {
            let mut st = self.state.lock();
            self.check(&st, "checkpoint entry");
            self.give_back_tail(&mut st)?;
            self.plan_lists(&mut st)?
        };
        let written = self.write_lists(&plan, root);
        let mut st = self.state.lock();
        match written {
            Ok(ckpt) => {
                st.lists = [Some(ckpt.alloc), ckpt.discard, Some(ckpt.avail)]
                    .into_iter()
                    .flatten()
                    .collect();
                let discard = std::mem::take(&mut st.discard);
                for (o, l) in discard.iter() {
                    st.pending.insert(o, l);
                }
                st.alloc = ExtentSet::default();
                self.check(&st, "checkpoint exit");
                Ok(UnsyncedCheckpoint(ckpt))
            }
            Err(e) => {
                // The list blocks were never referenced: their space is free again. The old
                // lists stay referenced by the durable checkpoint.
                for block in [Some(&plan.alloc), plan.discard.as_ref(), Some(&plan.avail)]
                    .into_iter()
                    .flatten()
                {
                    st.avail.insert(block.offset, block.len);
                }
                for a in &plan.old_lists {
                    st.discard.remove_range(a.offset, a.size as u64);
                }
                st.lists = plan.old_lists;
                self.check(&st, "checkpoint failure");
                Err(e)
            }
        }
    }

    /// Free space touching the end of the file goes back to the filesystem. Only `avail`
    /// qualifies: it holds nothing the durable checkpoint references.
    fn give_back_tail(&self, st: &mut ExtentState) -> Result<()> {
        let old_size = st.size;
        if let Some((off, len)) = st.avail.last() {
            // The sweep allocator keeps its reserve: it gives back only free space beyond it.
            let keep = match self.alloc.policy {
                AllocPolicy::Sweep => {
                    let share = adapted_reserve(self.alloc.sweep_reserve(), self.io.fs_space());
                    let reserve = (st.size as f64 * share) as u64;
                    st.free_bytes().saturating_sub(len) < reserve
                }
                _ => false,
            };
            if off + len == st.size && !keep {
                st.avail.remove_range(off, len);
                st.size = off;
            }
        }
        if st.size != old_size {
            if let Err(e) = self.io.set_len(&self.file, st.size, old_size) {
                // Put things back; the space simply stays free.
                let (off, len) = (st.size, old_size - st.size);
                st.size = old_size;
                st.avail.insert(off, len);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Moves the previous checkpoint's list blocks to `discard`, reserves this checkpoint's
    /// list blocks (first-fit) and encodes the lists: what is written outside the state lock.
    fn plan_lists(&self, st: &mut ExtentState) -> Result<ListPlan> {
        // The previous checkpoint's list blocks are referenced by the durable checkpoint.
        let old_lists = std::mem::take(&mut st.lists);
        for a in &old_lists {
            st.discard.insert(a.offset, a.size as u64);
        }
        // Reserve the list blocks. Each allocation can add at most one extent to a list, so a
        // little headroom makes the estimate safe.
        let est = |n: usize| extents_payload_len(n + 4);
        let alloc_len = round_up(BLOCK_HEADER + est(st.alloc.len())) as u64;
        let disc_len = if st.discard.is_empty() {
            0
        } else {
            round_up(BLOCK_HEADER + est(st.discard.len())) as u64
        };
        let avail_len =
            round_up(BLOCK_HEADER + est(st.avail.len() + st.discard.len() + st.pending.len() + 3))
                as u64;
        let policy = self.alloc;
        let alloc_off = Self::allocate(st, policy, alloc_len, true, None);
        let disc_off = (disc_len > 0).then(|| Self::allocate(st, policy, disc_len, true, None));
        let avail_off = Self::allocate(st, policy, avail_len, true, None);
        // What will be free once this checkpoint is durable: avail now, plus everything the
        // previous checkpoint held that this one no longer does — including `pending`, left by
        // a checkpoint that was written but never committed (resolve not called): without it
        // that space would be in no list after a reopen, leaked for good.
        let mut after = st.avail.clone();
        for (o, l) in st.discard.iter().chain(st.pending.iter()) {
            after.insert(o, l);
        }
        let size = st.size;
        let list = |extents: &mut dyn Iterator<Item = (u64, u64)>| {
            build_block(
                PageKind::ExtentList,
                &encode_extents(size, extents),
                Compressor::None,
            )
        };
        let alloc = ListBlock::new(list(&mut st.alloc.iter())?, alloc_off, alloc_len);
        let discard = match disc_off {
            Some(off) => Some(ListBlock::new(list(&mut st.discard.iter())?, off, disc_len)),
            None => None,
        };
        let avail = ListBlock::new(list(&mut after.iter())?, avail_off, avail_len);
        Ok(ListPlan {
            alloc,
            discard,
            avail,
            size,
            old_lists,
        })
    }

    /// Writes the planned list blocks (each padded to its reserved length) and syncs the file.
    fn write_lists(&self, plan: &ListPlan, root: Addr) -> Result<FileCheckpoint> {
        let pad = |block: &ListBlock| -> Result<Addr> {
            let mut buf = block.image.buf.clone();
            buf.resize(block.len as usize, 0);
            self.pwrite(
                &buf,
                block.offset,
                PageKind::ExtentList,
                0,
                WriteCause::Checkpoint,
            )?;
            Ok(Addr {
                offset: block.offset,
                size: block.len as u32,
                checksum: block.image.checksum,
            })
        };
        let alloc = pad(&plan.alloc)?;
        let discard = match &plan.discard {
            Some(block) => Some(pad(block)?),
            None => None,
        };
        let avail = pad(&plan.avail)?;
        Ok(FileCheckpoint {
            root,
            alloc,
            discard,
            avail,
            file_size: plan.size,
        })
    }

    /// Called once the checkpoint is durable: what the previous checkpoint held and this one
    /// does not becomes reusable, and is announced as free.
    pub fn resolve(&self) {
        let mut st = self.state.lock();
        let pending = std::mem::take(&mut st.pending);
        // Announce each extent before it becomes allocatable (see `free`).
        for (o, l) in pending.iter() {
            self.io.free(&self.file, o, l);
            st.avail.insert(o, l);
        }
        self.check(&st, "resolve");
    }

    pub fn sync(&self) -> Result<()> {
        self.io.sync_data(&self.file)
    }

    /// A snapshot of the extent lists: (size, avail, alloc, discard, pending) in bytes.
    pub fn extent_summary(&self) -> ExtentSummary {
        let st = self.state.lock();
        ExtentSummary {
            file_size: st.size,
            avail_bytes: st.avail.bytes(),
            avail_extents: st.avail.len() as u64,
            alloc_bytes: st.alloc.bytes(),
            discard_bytes: st.discard.bytes() + st.pending.bytes(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ExtentSummary {
    pub file_size: u64,
    pub avail_bytes: u64,
    pub avail_extents: u64,
    pub alloc_bytes: u64,
    pub discard_bytes: u64,
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::image::build_block;
    use placement::FileKind;
    use std::fs::OpenOptions;
    use std::os::unix::fs::FileExt;

    /// Every free extent of the file (avail, discard, pending), in order.
    fn free_extents(bf: &BlockFile) -> Vec<(u64, u64)> {
        let st = bf.state.lock();
        let mut v: Vec<_> = st
            .avail
            .iter()
            .chain(st.discard.iter())
            .chain(st.pending.iter())
            .collect();
        v.sort();
        v
    }

    /// Writes a one-byte root page as a checkpoint would (first-fit).
    fn write_root(bf: &BlockFile, n: u8) -> Addr {
        let img = build_block(PageKind::Root, &[n], Compressor::None).unwrap();
        bf.write(&img, PageKind::Root, true, 0, WriteCause::Checkpoint)
            .unwrap()
    }

    fn tag() -> FileRole {
        FileRole {
            kind: FileKind::Collection,
            table: 1,
            id_index: false,
        }
    }

    /// A file of `size` bytes whose free space is the extents `free`, the cursor at its end.
    fn state_with_free(size: u64, free: &[(u64, u64)]) -> ExtentState {
        let mut st = ExtentState {
            size,
            avail: ExtentSet::default(),
            alloc: ExtentSet::default(),
            discard: ExtentSet::default(),
            pending: ExtentSet::default(),
            lists: Vec::new(),
            cursor: size,
        };
        for &(off, len) in free {
            st.avail.insert(off, len);
        }
        st
    }

    fn fs(total_gb: u64, used_pct: u64) -> Option<FsSpace> {
        let total = total_gb << 30;
        Some(FsSpace {
            total,
            avail: total / 100 * (100 - used_pct),
        })
    }

    fn sweep50() -> Allocation {
        Allocation {
            policy: AllocPolicy::Sweep,
            sweep_reserve_pct: 50,
        }
    }

    #[test]
    fn the_sweeps_reserve_shrinks_as_the_file_system_fills() {
        assert_eq!(adapted_reserve(0.5, None), 0.5, "no figure: as configured");
        assert_eq!(adapted_reserve(0.5, fs(100, 10)), 0.5);
        assert_eq!(adapted_reserve(0.5, fs(100, 50)), 0.5);
        assert!((adapted_reserve(0.5, fs(100, 65)) - 0.35).abs() < 1e-9);
        // At 80 % full the file costs at most 1.25× best fit's bytes: 1 / (1 − r) ≤ 1.25.
        for used in 80..=100 {
            let r = adapted_reserve(0.5, fs(100, used));
            assert!(1.0 / (1.0 - r) <= 1.25 + 1e-9, "{used} % full: reserve {r}");
        }
        assert_eq!(adapted_reserve(0.5, fs(100, 95)), 0.0);
        assert_eq!(
            adapted_reserve(0.1, fs(100, 70)),
            0.1,
            "never above the configured share"
        );
        // Monotone: a fuller file system never gets a larger reserve.
        let shares: Vec<f64> = (0..=100)
            .map(|u| adapted_reserve(0.9, fs(100, u)))
            .collect();
        assert!(
            shares.windows(2).all(|w| w[1] <= w[0] + 1e-12),
            "{shares:?}"
        );
    }

    #[test]
    fn a_fuller_file_system_makes_the_sweep_wrap_instead_of_growing_the_file() {
        // 1 MB file, 300 KB free at its start (30 %): under a 50 % reserve the sweep appends;
        // at 85 % full (reserve 0.13) it wraps and reuses the free space.
        let free = [(4096, 300 << 10)];
        let mut st = state_with_free(1 << 20, &free);
        let off = BlockFile::allocate(&mut st, sweep50(), 4096, false, fs(100, 10));
        assert_eq!(
            off,
            1 << 20,
            "an empty file system: the reserve holds, the file grows"
        );
        let mut st = state_with_free(1 << 20, &free);
        let off = BlockFile::allocate(&mut st, sweep50(), 4096, false, fs(100, 85));
        assert_eq!(off, 4096, "85 % full: the sweep wraps");
        assert_eq!(st.size, 1 << 20);
    }

    #[test]
    fn the_reserve_never_causes_enospc_the_sweep_falls_back_to_best_fit() {
        // A small file system, 60 % full: the reserve stays 0.4, and growing the file would
        // leave it less than the margin.
        let tight = Some(FsSpace {
            total: 100 << 20,
            avail: 40 << 20,
        });
        assert!(adapted_reserve(0.5, tight) > 0.3);
        let free = [(4096, 8192), (64 << 10, 4096)];
        let mut st = state_with_free(1 << 20, &free);
        st.cursor = 128 << 10;
        let off = BlockFile::allocate(&mut st, sweep50(), 4096, false, fs(1024, 10));
        assert_eq!(off, 1 << 20, "room left: the reserve makes the file grow");
        let mut st = state_with_free(1 << 20, &free);
        st.cursor = 128 << 10;
        let off = BlockFile::allocate(&mut st, sweep50(), 4096, false, tight);
        assert_eq!(off, 64 << 10, "no room: best fit among the free extents");
        assert_eq!(st.size, 1 << 20, "the file did not grow");
        // Nothing free that fits: then the file grows (the reserve is not the cause).
        let mut st = state_with_free(1 << 20, &[]);
        let off = BlockFile::allocate(&mut st, sweep50(), 4096, false, tight);
        assert_eq!(off, 1 << 20);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "fits its reserved block")]
    fn an_extent_list_past_its_reservation_is_refused() {
        let img = build_block(PageKind::ExtentList, &[0u8; 5000], Compressor::None).unwrap();
        ListBlock::new(img, 4096, ALLOC_UNIT);
    }

    #[test]
    fn reuse_follows_checkpoint_rules() {
        let dir = tempfile::tempdir().unwrap();
        let ev = Arc::new(Io::quiet());
        let bf = BlockFile::create(&dir.path().join("f"), tag(), Allocation::best(), ev).unwrap();
        let img = build_block(PageKind::Leaf, &[7u8; 5000], Compressor::None).unwrap();
        let a = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        assert_eq!(a.offset, 4096);
        // Freed in the interval it was allocated in: reusable at once.
        bf.free(a);
        let b = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        assert_eq!(b.offset, 4096);
        let root = write_root(&bf, 1);
        bf.checkpoint(root).unwrap().sync(&bf).unwrap();
        bf.resolve();
        // Now b belongs to the durable checkpoint: freeing it must not make it reusable.
        bf.free(b);
        let c = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        assert_ne!(c.offset, b.offset);
        let root2 = write_root(&bf, 2);
        bf.free(root);
        bf.checkpoint(root2).unwrap().sync(&bf).unwrap();
        // Written but not yet durable: still not reusable.
        let d = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        assert_ne!(d.offset, b.offset);
        bf.resolve();
        let e = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        assert_eq!(
            e.offset, b.offset,
            "after the next durable checkpoint, b's space is reused"
        );
        assert_eq!(bf.read(e).unwrap().1, vec![7u8; 5000]);
    }

    #[test]
    fn space_freed_before_an_uncommitted_checkpoint_is_in_the_next_avail_list() {
        // C1 is durable and references b. b is freed; checkpoint C2 is written but its commit
        // fails (another table or the metadata write failed: no resolve). C3 commits. b is
        // free once C3 is durable, so C3's avail list must hold it: a reopen from C3 must not
        // leak it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let ev = Arc::new(Io::quiet());
        let bf = BlockFile::create(&path, tag(), Allocation::best(), ev.clone()).unwrap();
        let img = build_block(PageKind::Leaf, &[7u8; 5000], Compressor::None).unwrap();
        let b = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        let keep = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        let root1 = write_root(&bf, 1);
        bf.checkpoint(root1).unwrap().sync(&bf).unwrap();
        bf.resolve();
        bf.free(b);
        let root2 = write_root(&bf, 2);
        bf.free(root1);
        bf.checkpoint(root2).unwrap().sync(&bf).unwrap(); // written, never committed
        let root3 = write_root(&bf, 3);
        bf.free(root2);
        let c3 = bf.checkpoint(root3).unwrap().sync(&bf).unwrap();
        bf.resolve();
        drop(bf);
        let bf = BlockFile::open_checkpoint(&path, tag(), Allocation::best(), &c3, ev).unwrap();
        let free = free_extents(&bf);
        let covered = |a: Addr| {
            free.iter()
                .any(|&(o, l)| o <= a.offset && a.offset + a.size as u64 <= o + l)
        };
        assert!(covered(b), "b {b:?} leaked: free extents {free:?}");
        assert!(!covered(keep) && !covered(root3));
    }

    #[test]
    fn an_avail_list_over_the_descriptor_is_corrupt_data_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let io = Arc::new(Io::quiet());
        let bf = BlockFile::create(&path, tag(), Allocation::best(), io.clone()).unwrap();
        let root = write_root(&bf, 1);
        let mut c = bf.checkpoint(root).unwrap().sync(&bf).unwrap();
        // A well-checksummed avail list whose extent covers the descriptor block.
        let bad = build_block(
            PageKind::ExtentList,
            &encode_extents(c.file_size + 4096, [(0u64, 4096u64)].into_iter()),
            Compressor::None,
        )
        .unwrap();
        c.avail = bf
            .write(&bad, PageKind::ExtentList, true, 0, WriteCause::Checkpoint)
            .unwrap();
        c.file_size = bf.size();
        drop(bf);
        let err = BlockFile::open_checkpoint(&path, tag(), Allocation::best(), &c, io)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("overlaps the descriptor"), "{err}");
    }

    #[test]
    fn flipped_byte_is_a_checksum_error_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let ev = Arc::new(Io::quiet());
        let bf = BlockFile::create(&path, tag(), Allocation::best(), ev).unwrap();
        let a = bf
            .write(
                &build_block(PageKind::Leaf, b"hello", Compressor::None).unwrap(),
                PageKind::Leaf,
                false,
                0,
                WriteCause::Other,
            )
            .unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(b"J", a.offset + BLOCK_HEADER as u64)
            .unwrap();
        let err = bf.read(a).unwrap_err().to_string();
        assert!(
            err.contains("checksum")
                && err.contains("offset 4096")
                && err.contains(&path.display().to_string()),
            "{err}"
        );
    }
}
