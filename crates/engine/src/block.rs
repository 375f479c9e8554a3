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

use crate::config::{AllocPolicy, Allocation, Compressor, ALLOC_UNIT};
use crate::error::{Error, IoContext, Result};
use crate::events::Events;
use parking_lot::Mutex;
use placement::{Event, FileId, FileKind, PageKind, WriteCause, WriteEvent};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a block lives and what it must checksum to (WiredTiger's address cookie).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Addr {
    pub offset: u64,
    pub size: u32,
    pub checksum: u32,
}

impl Addr {
    pub const ENCODED_LEN: usize = 16;
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.checksum.to_le_bytes());
    }
    pub fn decode(b: &[u8]) -> Addr {
        Addr {
            offset: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            size: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            checksum: u32::from_le_bytes(b[12..16].try_into().unwrap()),
        }
    }
}

/// What a checkpoint of one file records (in the metadata): its root and its extent lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCheckpoint {
    pub root: Addr,
    pub alloc: Addr,
    pub discard: Option<Addr>,
    pub avail: Addr,
    pub file_size: u64,
}

/// Block header, 24 bytes, in front of every block:
/// magic u32, page kind u8, compressor u8, reserved u16, stored payload length u32,
/// uncompressed payload length u32, crc32c u32 (of the header with this field zero, then the
/// stored payload), reserved u32.
const BLOCK_MAGIC: u32 = 0x4644_424b; // "FDBK"
pub const BLOCK_HEADER: usize = 24;
const DESC_MAGIC: &[u8; 8] = b"FDBFILE1";

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
    fn take_best(&mut self, len: u64) -> Option<u64> {
        let &(sz, off) = self.by_size.range((len, 0)..).next()?;
        debug_assert!(sz >= len);
        self.take_at(off, len);
        Some(off)
    }
    /// Takes `len` bytes from the lowest-offset fitting extent.
    fn take_first(&mut self, len: u64) -> Option<u64> {
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
    fn take_next(&mut self, from: u64, len: u64, max_extents: usize) -> Option<u64> {
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
    fn take_at(&mut self, off: u64, len: u64) {
        let sz = self.raw_remove(off);
        if sz > len {
            self.raw_insert(off + len, sz - len);
        }
    }
    fn last(&self) -> Option<(u64, u64)> {
        self.by_off.iter().next_back().map(|(&o, &l)| (o, l))
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
}

/// How many free extents a sweep allocation looks at before it gives up and appends.
const SWEEP_SCAN: usize = 4096;

/// Counters for statistics.
#[derive(Default)]
pub struct BlockStats {
    pub bytes_written: AtomicU64,
    pub blocks_written: AtomicU64,
    pub bytes_read: AtomicU64,
    pub blocks_read: AtomicU64,
}

/// Identity of a file for events.
#[derive(Clone, Copy, Debug)]
pub struct FileTag {
    pub id: FileId,
    pub kind: FileKind,
    pub table: u32,
    pub id_index: bool,
}

pub struct BlockFile {
    path: PathBuf,
    file: Arc<File>,
    tag: FileTag,
    alloc: Allocation,
    state: Mutex<ExtentState>,
    events: Arc<Events>,
    pub stats: BlockStats,
}

/// A block image ready to be written: header + payload, padded to the allocation unit.
pub struct BlockImage {
    pub buf: Vec<u8>,
    pub checksum: u32,
}

/// Serializes a page into a block image, compressing the payload when that saves at least one
/// allocation unit (WiredTiger keeps the uncompressed image otherwise).
pub fn build_block(kind: PageKind, payload: &[u8], compressor: Compressor) -> Result<BlockImage> {
    let raw_size = round_up(BLOCK_HEADER + payload.len());
    let mut compressed: Option<(u8, Vec<u8>)> = None;
    if compressor != Compressor::None && raw_size > ALLOC_UNIT as usize {
        let c = compress(compressor, payload)?;
        if round_up(BLOCK_HEADER + c.len()) + (ALLOC_UNIT as usize) <= raw_size {
            compressed = Some((compressor_code(compressor), c));
        }
    }
    let (code, stored): (u8, &[u8]) = match &compressed {
        Some((code, c)) => (*code, c.as_slice()),
        None => (0, payload),
    };
    let total = round_up(BLOCK_HEADER + stored.len());
    let mut buf = Vec::with_capacity(total);
    buf.extend_from_slice(&BLOCK_MAGIC.to_le_bytes());
    buf.push(kind as u8);
    buf.push(code);
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]); // checksum, filled below
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(stored);
    let checksum = crc32c::crc32c(&buf);
    buf[16..20].copy_from_slice(&checksum.to_le_bytes());
    buf.resize(total, 0);
    Ok(BlockImage { buf, checksum })
}

fn round_up(n: usize) -> usize {
    n.div_ceil(ALLOC_UNIT as usize) * ALLOC_UNIT as usize
}

fn compressor_code(c: Compressor) -> u8 {
    match c {
        Compressor::None => 0,
        Compressor::Snappy => 1,
        Compressor::Zlib => 2,
        Compressor::Zstd => 3,
    }
}

fn compress(c: Compressor, data: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    let err = |e: std::io::Error| Error::io(format!("{} compression", c.name()), e);
    Ok(match c {
        Compressor::None => data.to_vec(),
        Compressor::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| err(std::io::Error::other(e)))?,
        Compressor::Zlib => {
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
            enc.write_all(data).map_err(err)?;
            enc.finish().map_err(err)?
        }
        // zstd level 6: MongoDB's built-in zstd level.
        Compressor::Zstd => zstd::bulk::compress(data, 6).map_err(err)?,
    })
}

fn decompress(code: u8, data: &[u8], mem_len: usize) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let out = match code {
        0 => data.to_vec(),
        1 => snap::raw::Decoder::new()
            .decompress_vec(data)
            .map_err(|e| format!("snappy: {e}"))?,
        2 => {
            let mut out = Vec::with_capacity(mem_len);
            flate2::read::ZlibDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(|e| format!("zlib: {e}"))?;
            out
        }
        3 => zstd::bulk::decompress(data, mem_len).map_err(|e| format!("zstd: {e}"))?,
        c => return Err(format!("unknown compressor code {c}")),
    };
    if out.len() != mem_len {
        return Err(format!(
            "decompressed to {} bytes, expected {mem_len}",
            out.len()
        ));
    }
    Ok(out)
}

impl BlockFile {
    /// Creates a new file holding only its descriptor block.
    pub fn create(
        path: &Path,
        tag: FileTag,
        alloc: Allocation,
        events: Arc<Events>,
    ) -> Result<BlockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .ctx(|| format!("creating {}", path.display()))?;
        let bf = BlockFile::from_parts(path, file, tag, alloc, ALLOC_UNIT, Vec::new(), events);
        let mut desc = vec![0u8; ALLOC_UNIT as usize];
        desc[..8].copy_from_slice(DESC_MAGIC);
        desc[8..12].copy_from_slice(&1u32.to_le_bytes()); // format version
        desc[12..16].copy_from_slice(&(ALLOC_UNIT as u32).to_le_bytes());
        let sum = crc32c::crc32c(&desc[..16]);
        desc[16..20].copy_from_slice(&sum.to_le_bytes());
        bf.pwrite(&desc, 0, PageKind::Descriptor, 0, WriteCause::Other)?;
        Ok(bf)
    }

    /// Opens an existing file at a checkpoint: the file is cut (or extended) to the
    /// checkpoint's size — anything written after it is garbage — and the free space is the
    /// checkpoint's avail list.
    pub fn open_checkpoint(
        path: &Path,
        tag: FileTag,
        alloc: Allocation,
        ckpt: &FileCheckpoint,
        events: Arc<Events>,
    ) -> Result<BlockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .ctx(|| format!("opening {}", path.display()))?;
        let mut desc = [0u8; 20];
        file.read_exact_at(&mut desc, 0)
            .ctx(|| format!("reading the descriptor of {}", path.display()))?;
        if &desc[..8] != DESC_MAGIC
            || crc32c::crc32c(&desc[..16]) != u32::from_le_bytes(desc[16..20].try_into().unwrap())
        {
            return Err(Error::Corrupt {
                file: path.to_path_buf(),
                offset: 0,
                what: "bad file descriptor block (not a flashdoc table file?)".into(),
            });
        }
        let len = file
            .metadata()
            .ctx(|| format!("stat {}", path.display()))?
            .len();
        if len != ckpt.file_size {
            file.set_len(ckpt.file_size)
                .ctx(|| format!("resizing {} to its checkpoint size", path.display()))?;
        }
        let lists = [Some(ckpt.alloc), ckpt.discard, Some(ckpt.avail)]
            .into_iter()
            .flatten()
            .collect();
        let bf = BlockFile::from_parts(path, file, tag, alloc, ckpt.file_size, lists, events);
        let (_, payload) = bf.read(ckpt.avail)?;
        let (file_size, extents) =
            crate::page::decode_extents(&payload).map_err(|what| Error::Corrupt {
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
        {
            let mut st = bf.state.lock();
            for (o, l) in extents {
                st.avail.insert(o, l);
            }
        }
        Ok(bf)
    }

    /// An open file of `size` bytes whose free space is yet to be filled in; announced to the
    /// event hub (registered for trims, reported as created).
    fn from_parts(
        path: &Path,
        file: File,
        tag: FileTag,
        alloc: Allocation,
        size: u64,
        lists: Vec<Addr>,
        events: Arc<Events>,
    ) -> BlockFile {
        let file = Arc::new(file);
        events.register_file(tag.id, &file);
        events.emit(|t| Event::FileCreate {
            time_ns: t,
            file: tag.id,
            kind: tag.kind,
            name: file_name(path),
        });
        BlockFile {
            path: path.to_path_buf(),
            file,
            tag,
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
            events,
            stats: BlockStats::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn tag(&self) -> FileTag {
        self.tag
    }
    pub fn size(&self) -> u64 {
        self.state.lock().size
    }
    /// Bytes in free extents (reusable now or after the next checkpoint).
    pub fn free_bytes(&self) -> u64 {
        self.state.lock().free_bytes()
    }

    fn pwrite(
        &self,
        buf: &[u8],
        offset: u64,
        kind: PageKind,
        page_id: u64,
        cause: WriteCause,
    ) -> Result<()> {
        let tag = self.tag;
        // Announced before it is issued: the placement policy picks its stream, and a pending
        // trim of this space is cancelled before the data lands.
        self.events
            .before_write(&self.file, buf.len() as u64, |t| WriteEvent {
                time_ns: t,
                file: tag.id,
                file_kind: tag.kind,
                table: tag.table,
                page_kind: kind,
                offset,
                len: buf.len() as u32,
                id_index: tag.id_index,
                stream: 0,
                page_id,
                cause,
            });
        if let Err(e) = self.file.write_all_at(buf, offset) {
            // The announced write did not happen: its space holds nothing anyone can reach.
            self.events.emit(|t| Event::Free {
                time_ns: t,
                file: tag.id,
                offset,
                len: buf.len() as u64,
            });
            return Err(Error::io(
                format!(
                    "writing {} bytes at offset {offset} of {}",
                    buf.len(),
                    self.path.display()
                ),
                e,
            ));
        }
        self.stats
            .bytes_written
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.stats.blocks_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Chooses space for `len` bytes. `first_fit` is forced for roots and extent lists.
    fn allocate(st: &mut ExtentState, alloc: Allocation, len: u64, first_fit: bool) -> u64 {
        let found = match (alloc.policy, first_fit) {
            (AllocPolicy::Append, _) => None,
            (_, true) | (AllocPolicy::First, _) => st.avail.take_first(len),
            (AllocPolicy::Best, false) => st.avail.take_best(len),
            (AllocPolicy::Sweep, false) => Self::sweep(st, len, alloc.sweep_reserve()),
        };
        found.unwrap_or_else(|| {
            let off = st.size;
            st.size += len;
            off
        })
    }

    /// The sweep allocator: the next fitting free extent at or after the cursor; at the end of
    /// the file, wrap to its start only while the file keeps its free reserve, else append.
    fn sweep(st: &mut ExtentState, len: u64, reserve_share: f64) -> Option<u64> {
        let found = st.avail.take_next(st.cursor, len, SWEEP_SCAN).or_else(|| {
            let reserve = (st.size as f64 * reserve_share) as u64;
            (st.free_bytes() >= reserve)
                .then(|| st.avail.take_next(0, len, SWEEP_SCAN))
                .flatten()
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
            let off = Self::allocate(&mut st, self.alloc, len, first_fit);
            st.alloc.insert(off, len);
            off
        };
        if let Err(e) = self.pwrite(&image.buf, offset, kind, page_id, cause) {
            // Give the space back: it was never referenced.
            let mut st = self.state.lock();
            st.alloc.remove_range(offset, len);
            st.avail.insert(offset, len);
            return Err(e);
        }
        Ok(Addr {
            offset,
            size: len as u32,
            checksum: image.checksum,
        })
    }

    /// Frees a block that a newer page image (or a removed value) replaced.
    pub fn free(&self, addr: Addr) {
        let (off, len) = (addr.offset, addr.size as u64);
        let mut st = self.state.lock();
        if st.alloc.remove_range(off, len) {
            // Allocated in this checkpoint interval: no checkpoint can reach it. Announced
            // before the space can be allocated again (the state lock is still held): a TRIM
            // batcher must see this Free before any later Write of the same space, or it would
            // trim that write's data.
            let id = self.tag.id;
            self.events.emit(|t| Event::Free {
                time_ns: t,
                file: id,
                offset: off,
                len,
            });
            st.avail.insert(off, len);
        } else {
            st.discard.insert(off, len);
        }
    }

    /// Reads and verifies a block; returns its page kind and uncompressed payload.
    pub fn read(&self, addr: Addr) -> Result<(PageKind, Vec<u8>)> {
        let mut buf = vec![0u8; addr.size as usize];
        self.file.read_exact_at(&mut buf, addr.offset).ctx(|| {
            format!(
                "reading {} bytes at offset {} of {}",
                addr.size,
                addr.offset,
                self.path.display()
            )
        })?;
        self.stats
            .bytes_read
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.stats.blocks_read.fetch_add(1, Ordering::Relaxed);
        let bad = || Error::Checksum {
            file: self.path.clone(),
            offset: addr.offset,
            size: addr.size as u64,
        };
        if buf.len() < BLOCK_HEADER
            || u32::from_le_bytes(buf[0..4].try_into().unwrap()) != BLOCK_MAGIC
        {
            return Err(bad());
        }
        let stored_len = u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize;
        let mem_len = u32::from_le_bytes(buf[12..16].try_into().unwrap()) as usize;
        let sum = u32::from_le_bytes(buf[16..20].try_into().unwrap());
        if BLOCK_HEADER + stored_len > buf.len() || sum != addr.checksum {
            return Err(bad());
        }
        buf[16..20].copy_from_slice(&[0; 4]);
        if crc32c::crc32c(&buf[..BLOCK_HEADER + stored_len]) != sum {
            return Err(bad());
        }
        let kind = PageKind::from_u8(buf[4]).ok_or_else(bad)?;
        let payload = decompress(
            buf[5],
            &buf[BLOCK_HEADER..BLOCK_HEADER + stored_len],
            mem_len,
        )
        .map_err(|what| Error::Corrupt {
            file: self.path.clone(),
            offset: addr.offset,
            what,
        })?;
        Ok((kind, payload))
    }

    /// Writes this file's part of a checkpoint after the tree's pages (root last) are written:
    /// the extent lists — alloc, discard, then avail (with the file size) — by first-fit, a
    /// truncation of free space at the end of the file, and an fdatasync. Returns what the
    /// metadata must record. Nothing becomes reusable until [`BlockFile::resolve`] is called
    /// after the metadata commit.
    pub fn checkpoint(&self, root: Addr) -> Result<FileCheckpoint> {
        let mut st = self.state.lock();
        // Free space touching the end of the file goes back to the filesystem. Only `avail`
        // qualifies: it holds nothing the durable checkpoint references.
        let old_size = st.size;
        if let Some((off, len)) = st.avail.last() {
            // The sweep allocator keeps its reserve: it gives back only free space beyond it.
            let keep = match self.alloc.policy {
                AllocPolicy::Sweep => {
                    let reserve = (st.size as f64 * self.alloc.sweep_reserve()) as u64;
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
            if let Err(e) = self.file.set_len(st.size) {
                // Put things back; the space simply stays free.
                let (off, len) = (st.size, old_size - st.size);
                st.size = old_size;
                st.avail.insert(off, len);
                return Err(Error::io(format!("truncating {}", self.path.display()), e));
            }
            let (id, new_len) = (self.tag.id, st.size);
            self.events.emit(|t| Event::FileTruncate {
                time_ns: t,
                file: id,
                len: new_len,
            });
        }
        // The previous checkpoint's list blocks are referenced by the durable checkpoint.
        let old_lists = std::mem::take(&mut st.lists);
        for a in &old_lists {
            st.discard.insert(a.offset, a.size as u64);
        }
        // Reserve the list blocks. Each allocation can add at most one extent to a list, so a
        // little headroom makes the estimate safe.
        let est = |n: usize| crate::page::extents_payload_len(n + 4);
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
        let alloc_off = Self::allocate(&mut st, policy, alloc_len, true);
        let disc_off = (disc_len > 0).then(|| Self::allocate(&mut st, policy, disc_len, true));
        let avail_off = Self::allocate(&mut st, policy, avail_len, true);
        // What will be free once this checkpoint is durable: avail now, plus everything the
        // previous checkpoint held that this one no longer does — including `pending`, left by
        // a checkpoint that was written but never committed (resolve not called): without it
        // that space would be in no list after a reopen, leaked for good.
        let mut after = st.avail.clone();
        for (o, l) in st.discard.iter().chain(st.pending.iter()) {
            after.insert(o, l);
        }
        let size = st.size;
        let alloc_img = build_block(
            PageKind::ExtentList,
            &crate::page::encode_extents(size, st.alloc.iter()),
            Compressor::None,
        )?;
        let disc_img = match disc_off {
            Some(_) => Some(build_block(
                PageKind::ExtentList,
                &crate::page::encode_extents(size, st.discard.iter()),
                Compressor::None,
            )?),
            None => None,
        };
        let avail_img = build_block(
            PageKind::ExtentList,
            &crate::page::encode_extents(size, after.iter()),
            Compressor::None,
        )?;
        debug_assert!(alloc_img.buf.len() as u64 <= alloc_len);
        debug_assert!(avail_img.buf.len() as u64 <= avail_len);
        drop(st);

        let result = (|| -> Result<FileCheckpoint> {
            let pad = |img: &BlockImage, len: u64, off: u64| -> Result<Addr> {
                let mut buf = img.buf.clone();
                buf.resize(len as usize, 0);
                self.pwrite(&buf, off, PageKind::ExtentList, 0, WriteCause::Checkpoint)?;
                Ok(Addr {
                    offset: off,
                    size: len as u32,
                    checksum: img.checksum,
                })
            };
            let alloc = pad(&alloc_img, alloc_len, alloc_off)?;
            let discard = match (&disc_img, disc_off) {
                (Some(img), Some(off)) => Some(pad(img, disc_len, off)?),
                _ => None,
            };
            let avail = pad(&avail_img, avail_len, avail_off)?;
            self.file
                .sync_data()
                .ctx(|| format!("fdatasync {}", self.path.display()))?;
            Ok(FileCheckpoint {
                root,
                alloc,
                discard,
                avail,
                file_size: size,
            })
        })();

        let mut st = self.state.lock();
        match result {
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
                Ok(ckpt)
            }
            Err(e) => {
                // The list blocks were never referenced: their space is free again. The old
                // lists stay referenced by the durable checkpoint.
                for (off, len) in [
                    Some((alloc_off, alloc_len)),
                    disc_off.map(|o| (o, disc_len)),
                    Some((avail_off, avail_len)),
                ]
                .into_iter()
                .flatten()
                {
                    st.avail.insert(off, len);
                }
                for a in &old_lists {
                    st.discard.remove_range(a.offset, a.size as u64);
                }
                st.lists = old_lists;
                Err(e)
            }
        }
    }

    /// Called once the checkpoint is durable: what the previous checkpoint held and this one
    /// does not becomes reusable, and is announced as free.
    pub fn resolve(&self) {
        let mut st = self.state.lock();
        let pending = std::mem::take(&mut st.pending);
        // Announce each extent before it becomes allocatable (see `free`).
        let id = self.tag.id;
        for (o, l) in pending.iter() {
            self.events.emit(|t| Event::Free {
                time_ns: t,
                file: id,
                offset: o,
                len: l,
            });
            st.avail.insert(o, l);
        }
    }

    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .ctx(|| format!("fdatasync {}", self.path.display()))
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

    /// Test/verification aid: every free extent (avail, discard, pending).
    pub fn free_extents(&self) -> Vec<(u64, u64)> {
        let st = self.state.lock();
        let mut v: Vec<_> = st
            .avail
            .iter()
            .chain(st.discard.iter())
            .chain(st.pending.iter())
            .collect();
        v.sort();
        v
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

    fn tag() -> FileTag {
        FileTag {
            id: 1,
            kind: FileKind::Collection,
            table: 1,
            id_index: false,
        }
    }

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
    fn reuse_follows_checkpoint_rules() {
        let dir = tempfile::tempdir().unwrap();
        let ev = Arc::new(Events::new(None));
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
        let root = bf
            .write(
                &build_block(PageKind::Root, &[1], Compressor::None).unwrap(),
                PageKind::Root,
                true,
                0,
                WriteCause::Checkpoint,
            )
            .unwrap();
        bf.checkpoint(root).unwrap();
        bf.resolve();
        // Now b belongs to the durable checkpoint: freeing it must not make it reusable.
        bf.free(b);
        let c = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        assert_ne!(c.offset, b.offset);
        let root2 = bf
            .write(
                &build_block(PageKind::Root, &[2], Compressor::None).unwrap(),
                PageKind::Root,
                true,
                0,
                WriteCause::Checkpoint,
            )
            .unwrap();
        bf.free(root);
        bf.checkpoint(root2).unwrap();
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
        let ev = Arc::new(Events::new(None));
        let bf = BlockFile::create(&path, tag(), Allocation::best(), ev.clone()).unwrap();
        let img = build_block(PageKind::Leaf, &[7u8; 5000], Compressor::None).unwrap();
        let root_img = |n: u8| build_block(PageKind::Root, &[n], Compressor::None).unwrap();
        let b = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        let keep = bf
            .write(&img, PageKind::Leaf, false, 0, WriteCause::Other)
            .unwrap();
        let root1 = bf
            .write(
                &root_img(1),
                PageKind::Root,
                true,
                0,
                WriteCause::Checkpoint,
            )
            .unwrap();
        bf.checkpoint(root1).unwrap();
        bf.resolve();
        bf.free(b);
        let root2 = bf
            .write(
                &root_img(2),
                PageKind::Root,
                true,
                0,
                WriteCause::Checkpoint,
            )
            .unwrap();
        bf.free(root1);
        bf.checkpoint(root2).unwrap(); // written, never committed
        let root3 = bf
            .write(
                &root_img(3),
                PageKind::Root,
                true,
                0,
                WriteCause::Checkpoint,
            )
            .unwrap();
        bf.free(root2);
        let c3 = bf.checkpoint(root3).unwrap();
        bf.resolve();
        drop(bf);
        let bf = BlockFile::open_checkpoint(&path, tag(), Allocation::best(), &c3, ev).unwrap();
        let free = bf.free_extents();
        let covered = |a: Addr| {
            free.iter()
                .any(|&(o, l)| o <= a.offset && a.offset + a.size as u64 <= o + l)
        };
        assert!(covered(b), "b {b:?} leaked: free extents {free:?}");
        assert!(!covered(keep) && !covered(root3));
    }

    #[test]
    fn compression_kept_only_when_it_saves_a_unit() {
        let zeros = vec![0u8; 30000];
        for c in Compressor::ALL {
            let img = build_block(PageKind::Leaf, &zeros, c).unwrap();
            if c == Compressor::None {
                assert_eq!(img.buf.len(), 32768);
            } else {
                assert_eq!(img.buf.len(), 4096, "{c:?}");
            }
        }
        // Incompressible data stays uncompressed.
        let mut x = 1u64;
        let noise: Vec<u8> = (0..30000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let img = build_block(PageKind::Leaf, &noise, Compressor::Zstd).unwrap();
        assert_eq!(img.buf[5], 0);
    }

    #[test]
    fn flipped_byte_is_a_checksum_error_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let ev = Arc::new(Events::new(None));
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
