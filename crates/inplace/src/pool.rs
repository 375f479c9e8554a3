//! The page pool: MMAPv1 mapped its data files and let the kernel page them; here the engine
//! keeps 4 KiB pages of the data files in memory, keyed by file offset, and writes dirty ones
//! back in place through the I/O seam (so placement, traces and the power-loss backend see
//! every write). Every change made through the pool is remembered as a write intent (MMAPv1's
//! term) until the batch's journal record is built from it ([`Pool::take_journal_entries`]).

use crate::loc::DiskLoc;
use engine::io::{FileRole, IoFile, OpenMode};
use engine::{Error, Result};
use placement::{FileKind, PageKind, WriteCause};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const PAGE: u64 = 4096;
/// The first data file's size; each next one doubles, up to [`MAX_FILE_SIZE`] (MMAPv1: 64 MiB
/// doubling to 2 GiB; smaller here so an empty database is small).
pub const FIRST_FILE_SIZE: u64 = 1 << 20;
pub const MAX_FILE_SIZE: u64 = 1 << 31;

/// The size of data file `n`.
pub fn file_size(n: u32) -> u64 {
    (FIRST_FILE_SIZE << n.min(11)).min(MAX_FILE_SIZE)
}

/// The trace's page id of page `page` of data file `file`: one id per place, since a page
/// never moves (recovery's writes name the same ids as write-backs).
pub fn page_id(file: u32, page: u32) -> u64 {
    (u64::from(file) << 32) | u64::from(page)
}

/// A data file's path.
pub fn data_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("mmapv1.{n}"))
}

/// One change to a data file, as the journal carries it: the bytes now at `offset` of `file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    pub file: u32,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

struct Page {
    data: Box<[u8]>,
    dirty: bool,
    /// The page's offset on the device holds an earlier version (an overwrite kills it).
    on_disk: bool,
}

pub struct Pool {
    io: Arc<engine::io::Io>,
    dir: PathBuf,
    files: Vec<Arc<IoFile>>,
    pages: HashMap<(u32, u32), Page>,
    dirty: BTreeSet<(u32, u32)>,
    /// Regions changed since the last journal record: (file, offset, len).
    intents: Vec<(u32, u64, u64)>,
    /// Pages whose full image is in the journal since the last write-back.
    imaged: HashSet<(u32, u32)>,
    /// Clean pages beyond this many are dropped (dirty ones wait for the write-back).
    max_pages: usize,
}

impl Pool {
    /// A pool over the data files already in `dir` (none in a new database).
    pub fn open(io: Arc<engine::io::Io>, dir: &Path, cache_bytes: u64) -> Result<Pool> {
        let mut pool = Pool {
            io,
            dir: dir.to_path_buf(),
            files: Vec::new(),
            pages: HashMap::new(),
            dirty: BTreeSet::new(),
            intents: Vec::new(),
            imaged: HashSet::new(),
            max_pages: (cache_bytes / PAGE).max(256) as usize,
        };
        for n in 0.. {
            let path = data_path(dir, n);
            if !path.exists() {
                break;
            }
            pool.open_file(n, OpenMode::Existing)?;
        }
        Ok(pool)
    }

    fn open_file(&mut self, n: u32, mode: OpenMode) -> Result<()> {
        assert_eq!(n as usize, self.files.len(), "data files open in order");
        let path = data_path(&self.dir, n);
        let f = self.io.open(
            &path,
            mode,
            FileRole::of(FileKind::Collection),
            format!("mmapv1.{n}"),
        )?;
        let len = std::fs::metadata(&path)
            .map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?
            .len();
        if len < file_size(n) {
            // Sparse: the file's pages read as zeros until written.
            self.io.set_len(&f, file_size(n), len)?;
        }
        self.files.push(f);
        Ok(())
    }

    /// Creates data file `n` (the next one), at its full size.
    pub fn create_file(&mut self, n: u32) -> Result<()> {
        self.open_file(n, OpenMode::CreateTruncate)?;
        self.io.sync_dir(&self.dir)
    }

    /// Removes data files `n` and after: files a crash left from a growth that no durable
    /// batch recorded (the header, replayed from the journal, counts `n`). Kept open, such a
    /// file would be created again when the database next grows.
    pub fn remove_files_from(&mut self, n: u32) -> Result<()> {
        if self.file_count() <= n {
            return Ok(());
        }
        assert!(
            self.dirty.iter().all(|&(f, _)| f < n) && self.intents.iter().all(|&(f, ..)| f < n),
            "a change in a data file the header does not count"
        );
        let extra = self.files.split_off(n as usize);
        self.pages.retain(|&(f, _), _| f < n);
        self.imaged.retain(|&(f, _)| f < n);
        for (i, f) in extra.iter().enumerate().rev() {
            let path = data_path(&self.dir, n + i as u32);
            self.io
                .remove(&path, Some(f.id()))
                .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        }
        self.io.sync_dir(&self.dir)
    }

    pub fn file_count(&self) -> u32 {
        self.files.len() as u32
    }

    fn page(&mut self, file: u32, page: u32) -> Result<&mut Page> {
        if !self.pages.contains_key(&(file, page)) {
            let f = self
                .files
                .get(file as usize)
                .ok_or_else(|| Error::Corrupt {
                    file: data_path(&self.dir, file),
                    offset: u64::from(page) * PAGE,
                    what: "a location in a data file that does not exist".into(),
                })?;
            let mut data = vec![0u8; PAGE as usize].into_boxed_slice();
            self.io.read(f, &mut data, u64::from(page) * PAGE)?;
            let on_disk = data.iter().any(|&b| b != 0);
            self.evict_clean();
            self.pages.insert(
                (file, page),
                Page {
                    data,
                    dirty: false,
                    on_disk,
                },
            );
        }
        Ok(self.pages.get_mut(&(file, page)).expect("just loaded"))
    }

    fn evict_clean(&mut self) {
        if self.pages.len() < self.max_pages {
            return;
        }
        let keep = self.max_pages * 9 / 10;
        let clean: Vec<_> = self
            .pages
            .iter()
            .filter(|(_, p)| !p.dirty)
            .map(|(k, _)| *k)
            .take(self.pages.len().saturating_sub(keep))
            .collect();
        for k in clean {
            self.pages.remove(&k);
        }
    }

    /// `len` bytes at `loc`.
    pub fn read(&mut self, loc: DiskLoc, len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        let mut off = u64::from(loc.offset);
        let end = off + len as u64;
        while off < end {
            let (page, within) = ((off / PAGE) as u32, (off % PAGE) as usize);
            let take = ((PAGE as usize - within) as u64).min(end - off) as usize;
            let p = self.page(loc.file, page)?;
            out.extend_from_slice(&p.data[within..within + take]);
            off += take as u64;
        }
        Ok(out)
    }

    /// A u32 at `loc`.
    pub fn read_u32(&mut self, loc: DiskLoc) -> Result<u32> {
        let b = self.read(loc, 4)?;
        Ok(u32::from_le_bytes(b[..4].try_into().expect("4 bytes")))
    }

    /// Writes `bytes` at `loc` in the pool (in place), remembering the change for the journal.
    pub fn write(&mut self, loc: DiskLoc, bytes: &[u8]) -> Result<()> {
        let start = u64::from(loc.offset);
        let end = start + bytes.len() as u64;
        assert!(
            (loc.file as usize) < self.files.len() && end <= file_size(loc.file),
            "a write past data file {}'s end ({end} bytes)",
            loc.file
        );
        let mut off = start;
        while off < end {
            let (page, within) = ((off / PAGE) as u32, (off % PAGE) as usize);
            let take = ((PAGE as usize - within) as u64).min(end - off) as usize;
            let from = (off - start) as usize;
            let p = self.page(loc.file, page)?;
            p.data[within..within + take].copy_from_slice(&bytes[from..from + take]);
            p.dirty = true;
            self.dirty.insert((loc.file, page));
            off += take as u64;
        }
        self.intents.push((loc.file, start, bytes.len() as u64));
        Ok(())
    }

    /// The journal record's body for the changes since the last call: the full image of
    /// every page changed for the first time since the last write-back (so a torn in-place
    /// write of it can be repaired), and the changed bytes of the others.
    pub fn take_journal_entries(&mut self) -> Vec<JournalEntry> {
        let intents = std::mem::take(&mut self.intents);
        let mut imaged_now = BTreeSet::new();
        let mut regions = Vec::new();
        for (file, start, len) in intents {
            let (first, last) = (start / PAGE, (start + len - 1) / PAGE);
            // The region's bytes on pages imaged by an earlier record need the region itself;
            // an image taken now already holds them.
            let mut on_imaged_page = false;
            for page in first..=last {
                let key = (file, page as u32);
                if self.imaged.insert(key) {
                    imaged_now.insert(key);
                } else if !imaged_now.contains(&key) {
                    on_imaged_page = true;
                }
            }
            if on_imaged_page {
                regions.push((file, start, len));
            }
        }
        let mut out: Vec<JournalEntry> = imaged_now
            .iter()
            .map(|&(file, page)| JournalEntry {
                file,
                offset: u64::from(page) * PAGE,
                bytes: self.pages[&(file, page)].data.to_vec(),
            })
            .collect();
        for (file, start, len) in regions {
            let bytes = self
                .read(DiskLoc::new(file, start as u32), len as usize)
                .expect("a region just written is in the pool (dirty pages stay)");
            out.push(JournalEntry {
                file,
                offset: start,
                bytes,
            });
        }
        out
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.dirty.len() as u64 * PAGE
    }

    /// Writes every dirty page back in place and syncs the data files. An overwrite of a page
    /// that held an earlier version is announced as that version's death (a `Free` of the
    /// range) before the write. Returns the pages written. A write that fails (a full disk)
    /// leaves its page and those after it dirty, for the next write-back: the journal, not
    /// rotated until one succeeds, still holds them.
    pub fn write_back(&mut self) -> Result<usize> {
        let dirty: Vec<(u32, u32)> = self.dirty.iter().copied().collect();
        let mut synced = BTreeSet::new();
        for &(file, page) in &dirty {
            let f = self.files[file as usize].clone();
            let offset = u64::from(page) * PAGE;
            let p = self.pages.get_mut(&(file, page)).expect("dirty pages stay");
            if p.on_disk {
                self.io.free(&f, offset, PAGE);
            }
            let kind = if (file, page) == (0, 0) {
                PageKind::Descriptor
            } else {
                PageKind::Leaf
            };
            self.io.write(
                &f,
                &p.data,
                offset,
                kind,
                page_id(file, page),
                WriteCause::Checkpoint,
            )?;
            p.dirty = false;
            p.on_disk = true;
            self.dirty.remove(&(file, page));
            synced.insert(file);
        }
        for file in synced {
            self.io.sync_data(&self.files[file as usize])?;
        }
        self.imaged.clear();
        Ok(dirty.len())
    }

    /// Applies a journal entry straight to its data file (recovery, before any page is loaded,
    /// so the pool holds no stale copy), creating or growing the file as needed.
    pub fn replay_entry(&mut self, e: &JournalEntry) -> Result<()> {
        while self.file_count() <= e.file {
            let n = self.file_count();
            let mode = if data_path(&self.dir, n).exists() {
                OpenMode::Existing
            } else {
                OpenMode::CreateTruncate
            };
            self.open_file(n, mode)?;
        }
        let f = self.files[e.file as usize].clone();
        self.io.write(
            &f,
            &e.bytes,
            e.offset,
            PageKind::Leaf,
            page_id(e.file, (e.offset / PAGE) as u32),
            WriteCause::Other,
        )
    }

    /// Syncs every data file and their directory (after recovery).
    pub fn sync_all(&self) -> Result<()> {
        for f in &self.files {
            self.io.sync_data(f)?;
        }
        self.io.sync_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::io::{Fault, FaultOp, FaultyFiles, FlashConfig, Io};

    /// Linux's ENOSPC ("No space left on device").
    const ENOSPC: i32 = 28;

    #[test]
    fn a_write_back_that_finds_the_disk_full_keeps_the_pages_it_did_not_write_dirty() {
        let faults = Arc::new(FaultyFiles::new());
        let backend: Arc<dyn engine::io::Backend> = faults.clone();
        let io = Arc::new(Io::new(None, &FlashConfig::default(), Some(backend)).unwrap());
        let tmp = tempfile::tempdir().unwrap();
        let mut pool = Pool::open(io, tmp.path(), 1 << 20).unwrap();
        pool.open_file(0, OpenMode::CreateTruncate).unwrap();
        for page in 1..=3u32 {
            pool.write(DiskLoc::new(0, page * PAGE as u32), &[page as u8; 64])
                .unwrap();
        }
        assert_eq!(pool.dirty_bytes(), 3 * PAGE);
        faults.arm(Fault {
            op: FaultOp::Write,
            kind: None,
            skip: 1,
            times: 1,
            errno: ENOSPC,
        });
        assert!(pool.write_back().unwrap_err().is_disk_full());
        // The first page reached its file; the second (refused) and third wait.
        assert_eq!(pool.dirty_bytes(), 2 * PAGE);
        assert_eq!(pool.write_back().unwrap(), 2);
        assert_eq!(pool.dirty_bytes(), 0);
        let reopened_io = Arc::new(Io::quiet());
        let mut reopened = Pool::open(reopened_io, tmp.path(), 1 << 20).unwrap();
        for page in 1..=3u32 {
            let got = reopened
                .read(DiskLoc::new(0, page * PAGE as u32), 64)
                .unwrap();
            assert_eq!(got, vec![page as u8; 64], "page {page}");
        }
    }
}
