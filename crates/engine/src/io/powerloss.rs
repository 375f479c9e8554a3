//! A power-loss backend: the operating system's files as the page cache, plus a model of what
//! the device holds, so a test can cut the power at any operation and get the disk as it could
//! be after the reboot, as real files that the real engine then opens.
//!
//! Learned from LazyFS (a FUSE file system that keeps unsynced writes in its own page cache and
//! drops them on a "clear cache" fault), ALICE (OSDI'14: an abstract persistence model in which
//! unsynced data and directory operations may persist partly, in any order, at a block
//! granularity) and SQLite's crash-test VFS (test6.c: at a crash each unsynced sector is kept,
//! lost or garbled). The model, per file (inode) and per directory:
//!
//! - **Durable state.** The bytes and size each inode holds on the device, and the directory
//!   entries (name → inode) and directories the device holds. A file's `fsync`/`fdatasync` moves
//!   all its pending data operations (writes, truncations, extensions, punched holes) into its
//!   durable bytes; a directory's `fsync` moves the pending namespace operations *of that
//!   directory* (create, rename, unlink, mkdir) into the durable namespace. Nothing else does:
//!   a new file's name is volatile until its directory is synced, whatever its data.
//! - **Pending operations.** Everything since the last sync, in issue order. The live files (the
//!   page cache) already show them, so reads see them as a program would.
//! - **The crash.** [`PowerLossFiles::crash_after`] arms a crash at the n-th mutating operation:
//!   that operation is *submitted but not completed* (it joins the pending ones and fails with
//!   `EIO`), and every operation after it fails, as if the process had died with the machine.
//!   [`PowerLossFiles::materialise`] then draws, from a seed, one state the device could hold:
//!   each pending namespace operation persists or not (applied in order, an operation whose
//!   source is gone is a no-op); each pending data operation of each inode is kept, dropped or
//!   (a write) torn at 512 B or 4 KiB sectors, each sector kept or not; the kept ones land in
//!   issue order or, with [`CrashOdds::reorder`], shuffled. Direct (`O_DIRECT`) writes are
//!   treated the same: the device's write cache is volatile too.
//!
//! Everything is deterministic from the seeds: the model is a pure function of the operations,
//! and the image of (model, seed).

use super::backend::{Backend, OpenMode, OsFiles};
use super::file::IoFile;
use parking_lot::Mutex;
use placement::FileKind;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// The odds of a crash, per pending operation. A write is kept with `keep`, dropped with
/// `drop`, torn otherwise; any other data operation is kept unless dropped. Each sector of a
/// torn write (512 B or 4 KiB, a coin per inode and crash) is kept with probability 1/2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrashOdds {
    pub keep: f64,
    pub drop: f64,
    /// The chance that an inode's kept data operations land in a shuffled order.
    pub reorder: f64,
    /// The chance that each pending namespace operation persists.
    pub namespace_keep: f64,
}

impl Default for CrashOdds {
    /// keep 0.5, drop 0.3, tear 0.2; reorder 0.5; namespace operations 0.5.
    fn default() -> Self {
        CrashOdds {
            keep: 0.5,
            drop: 0.3,
            reorder: 0.5,
            namespace_keep: 0.5,
        }
    }
}

/// A deliberate bug for the mutation check (docdb's tests/powerloss.rs): the backend treats one kind of
/// `fsync` as if the engine had never called it. Only this test backend has the switch, so no
/// production build can reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    None,
    /// The metadata file's data fsync before its rename over `flashdoc.turtle`.
    SkipMetadataFsync,
    /// The fsync of the database directory after a rename in it (the metadata's commit).
    SkipRootDirFsync,
}

/// One pending data operation of an inode.
#[derive(Clone, Debug)]
enum DataOp {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    /// Truncation or extension (with zeros), including an `fallocate` that grows the file.
    SetLen(u64),
    PunchHole {
        offset: u64,
        len: u64,
    },
}

/// One pending namespace operation, in the directory `dir`.
#[derive(Clone, Debug)]
enum NsOp {
    Link {
        path: PathBuf,
        inode: u64,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        inode: u64,
    },
    Unlink {
        path: PathBuf,
        inode: u64,
    },
    Mkdir {
        path: PathBuf,
    },
}

#[derive(Default)]
struct Inode {
    durable: Vec<u8>,
    pending: Vec<DataOp>,
}

#[derive(Default)]
struct Namespace {
    files: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
}

impl Namespace {
    fn apply(&mut self, op: &NsOp) {
        match op {
            NsOp::Link { path, inode } => {
                self.files.insert(path.clone(), *inode);
            }
            NsOp::Rename { from, to, inode } => {
                if self.files.get(from) == Some(inode) {
                    self.files.remove(from);
                    self.files.insert(to.clone(), *inode);
                }
            }
            NsOp::Unlink { path, inode } => {
                if self.files.get(path) == Some(inode) {
                    self.files.remove(path);
                }
            }
            NsOp::Mkdir { path } => {
                self.dirs.insert(path.clone());
            }
        }
    }

    /// Whether `path`'s directory exists in this namespace (the root always does).
    fn reachable(&self, root: &Path, path: &Path) -> bool {
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == root {
                return true;
            }
            if !self.dirs.contains(d) {
                return false;
            }
            dir = d.parent();
        }
        false
    }
}

#[derive(Default)]
struct Model {
    next_inode: u64,
    inodes: BTreeMap<u64, Inode>,
    /// Which inode each open descriptor reaches (a descriptor number is re-mapped when reused).
    fds: HashMap<RawFd, u64>,
    /// The names as the running program sees them.
    live: BTreeMap<PathBuf, u64>,
    durable: Namespace,
    /// Namespace operations not yet made durable, each with its directory.
    ns_pending: Vec<(PathBuf, NsOp)>,
    /// Mutating operations issued so far.
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
}

/// What [`PowerLossFiles::materialise`] did, for a failing test's message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashImage {
    pub files: usize,
    pub kept: usize,
    pub dropped: usize,
    pub torn: usize,
    pub namespace_kept: usize,
    pub namespace_lost: usize,
}

/// The power-loss backend (module doc). Files live under `root`, which exists and is durable.
pub struct PowerLossFiles {
    os: OsFiles,
    root: PathBuf,
    odds: CrashOdds,
    mutation: Mutation,
    model: Mutex<Model>,
}

fn dead() -> io::Error {
    io::Error::other("simulated power loss: the machine is off")
}

fn parent(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl PowerLossFiles {
    pub fn new(root: &Path, odds: CrashOdds, mutation: Mutation) -> PowerLossFiles {
        PowerLossFiles {
            os: OsFiles,
            root: root.to_path_buf(),
            odds,
            mutation,
            model: Mutex::new(Model::default()),
        }
    }

    /// Takes every file under the root (but `skip`) as durable: a test starts from an earlier
    /// crash's image.
    pub fn adopt(&self, skip: &[&str]) -> io::Result<()> {
        let mut m = self.model.lock();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir)? {
                let p = e?.path();
                if p.is_dir() {
                    m.durable.dirs.insert(p.clone());
                    stack.push(p);
                } else if !skip.iter().any(|s| p.file_name().is_some_and(|n| n == *s)) {
                    let inode = m.new_inode();
                    m.inodes.get_mut(&inode).expect("just made").durable = std::fs::read(&p)?;
                    m.durable.files.insert(p.clone(), inode);
                    m.live.insert(p, inode);
                }
            }
        }
        Ok(())
    }

    /// Cuts the power at the `n`-th mutating operation from now (1: the next one).
    pub fn crash_after(&self, n: u64) {
        assert!(n > 0, "a crash happens at an operation");
        let mut m = self.model.lock();
        m.crash_at = Some(m.ops + n);
    }

    /// Cuts the power now.
    pub fn crash_now(&self) {
        self.model.lock().crashed = true;
    }

    pub fn crashed(&self) -> bool {
        self.model.lock().crashed
    }

    /// Mutating operations issued so far.
    pub fn ops(&self) -> u64 {
        self.model.lock().ops
    }

    /// The files the program created through this backend and has not removed: every file under
    /// the root must be one of them (the seam check).
    pub fn live_files(&self) -> BTreeSet<PathBuf> {
        self.model.lock().live.keys().cloned().collect()
    }

    /// Counts a mutating operation: `Ok(true)` runs it, `Ok(false)` is the crash's in-flight
    /// one (recorded as pending, then failed), `Err` comes after the crash.
    fn tick(m: &mut Model) -> io::Result<bool> {
        if m.crashed {
            return Err(dead());
        }
        m.ops += 1;
        if m.crash_at == Some(m.ops) {
            m.crashed = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn inode_of(m: &Model, f: &IoFile) -> u64 {
        *m.fds
            .get(&f.file().as_raw_fd())
            .expect("every file the engine writes was opened through the seam")
    }

    fn data_op(
        &self,
        f: &IoFile,
        op: DataOp,
        run: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let mut m = self.model.lock();
        let go = Self::tick(&mut m)?;
        let inode = Self::inode_of(&m, f);
        if go {
            run()?;
        }
        m.inodes
            .get_mut(&inode)
            .expect("known inode")
            .pending
            .push(op);
        if go {
            Ok(())
        } else {
            Err(dead())
        }
    }

    fn ns_op(
        &self,
        dir: PathBuf,
        op: NsOp,
        run: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let mut m = self.model.lock();
        let go = Self::tick(&mut m)?;
        if go {
            run()?;
            m.apply_live(&op);
        }
        m.ns_pending.push((dir, op));
        if go {
            Ok(())
        } else {
            Err(dead())
        }
    }

    fn sync_file(&self, f: &IoFile) -> io::Result<()> {
        let mut m = self.model.lock();
        if !Self::tick(&mut m)? {
            return Err(dead());
        }
        if self.mutation == Mutation::SkipMetadataFsync && f.kind() == FileKind::Metadata {
            return Ok(());
        }
        let inode = Self::inode_of(&m, f);
        let node = m.inodes.get_mut(&inode).expect("known inode");
        for op in std::mem::take(&mut node.pending) {
            apply_data(&mut node.durable, &op);
        }
        Ok(())
    }

    /// Writes one state the device could hold after the crash into `target` (an empty
    /// directory), drawn from `seed`. Callable once the power is cut, or at any time (then it
    /// is a crash now); the model is not changed.
    pub fn materialise(&self, seed: u64, target: &Path) -> io::Result<CrashImage> {
        let m = self.model.lock();
        // The root exists whatever else survives.
        std::fs::create_dir_all(target)?;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut img = CrashImage::default();
        let mut ns = Namespace {
            files: m.durable.files.clone(),
            dirs: m.durable.dirs.clone(),
        };
        for (_, op) in &m.ns_pending {
            if rng.gen_bool(self.odds.namespace_keep) {
                ns.apply(op);
                img.namespace_kept += 1;
            } else {
                img.namespace_lost += 1;
            }
        }
        for d in &ns.dirs {
            if ns.reachable(&self.root, d) {
                std::fs::create_dir_all(target.join(self.relative(d)?))?;
            }
        }
        for (path, inode) in &ns.files {
            if !ns.reachable(&self.root, path) {
                continue;
            }
            let node = &m.inodes[inode];
            let bytes = self.draw(&mut rng, node, &mut img);
            let to = target.join(self.relative(path)?);
            std::fs::create_dir_all(parent(&to))?;
            std::fs::write(&to, bytes)?;
            img.files += 1;
        }
        Ok(img)
    }

    fn relative<'a>(&self, p: &'a Path) -> io::Result<&'a Path> {
        p.strip_prefix(&self.root).map_err(|_| {
            io::Error::other(format!(
                "{} lies outside the power-loss root {}",
                p.display(),
                self.root.display()
            ))
        })
    }

    /// The bytes one inode holds after the crash.
    fn draw(&self, rng: &mut StdRng, node: &Inode, img: &mut CrashImage) -> Vec<u8> {
        let sector: u64 = if rng.gen_bool(0.5) { 512 } else { 4096 };
        let mut landed = Vec::new();
        for op in &node.pending {
            let roll: f64 = rng.gen();
            if roll < self.odds.keep {
                landed.push(op.clone());
                img.kept += 1;
            } else if roll < self.odds.keep + self.odds.drop {
                img.dropped += 1;
            } else if let DataOp::Write { offset, data } = op {
                landed.extend(tear(rng, *offset, data, sector));
                img.torn += 1;
            } else {
                landed.push(op.clone());
                img.kept += 1;
            }
        }
        if rng.gen_bool(self.odds.reorder) {
            landed.shuffle(rng);
        }
        let mut bytes = node.durable.clone();
        for op in &landed {
            apply_data(&mut bytes, op);
        }
        bytes
    }
}

/// The sectors of a torn write that reached the device, each kept with probability 1/2 (sector
/// boundaries are the file's, not the write's).
fn tear(rng: &mut StdRng, offset: u64, data: &[u8], sector: u64) -> Vec<DataOp> {
    let end = offset + data.len() as u64;
    let mut out = Vec::new();
    let mut at = offset;
    while at < end {
        let next = ((at / sector) + 1) * sector;
        let stop = next.min(end);
        if rng.gen_bool(0.5) {
            let from = (at - offset) as usize;
            let to = (stop - offset) as usize;
            out.push(DataOp::Write {
                offset: at,
                data: data[from..to].to_vec(),
            });
        }
        at = stop;
    }
    out
}

fn apply_data(bytes: &mut Vec<u8>, op: &DataOp) {
    match op {
        DataOp::Write { offset, data } => {
            let end = *offset as usize + data.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[*offset as usize..end].copy_from_slice(data);
        }
        DataOp::SetLen(len) => bytes.resize(*len as usize, 0),
        DataOp::PunchHole { offset, len } => {
            let start = (*offset as usize).min(bytes.len());
            let end = ((offset + len) as usize).min(bytes.len());
            bytes[start..end].fill(0);
        }
    }
}

impl Model {
    fn new_inode(&mut self) -> u64 {
        self.next_inode += 1;
        self.inodes.insert(self.next_inode, Inode::default());
        self.next_inode
    }

    fn apply_live(&mut self, op: &NsOp) {
        match op {
            NsOp::Link { path, inode } => {
                self.live.insert(path.clone(), *inode);
            }
            NsOp::Rename { from, to, inode } => {
                self.live.remove(from);
                self.live.insert(to.clone(), *inode);
            }
            NsOp::Unlink { path, .. } => {
                self.live.remove(path);
            }
            NsOp::Mkdir { .. } => {}
        }
    }
}

impl Backend for PowerLossFiles {
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<File> {
        let mut m = self.model.lock();
        let known = m.live.get(path).copied();
        if mode == OpenMode::Existing {
            if m.crashed {
                return Err(dead());
            }
            let inode = known.ok_or_else(|| {
                io::Error::other(format!(
                    "{} was not created through the I/O seam",
                    path.display()
                ))
            })?;
            let file = self.os.open(path, mode, direct)?;
            m.fds.insert(file.as_raw_fd(), inode);
            return Ok(file);
        }
        if !Self::tick(&mut m)? {
            return Err(dead());
        }
        let file = self.os.open(path, mode, direct)?;
        let inode = match known {
            Some(inode) => {
                let node = m.inodes.get_mut(&inode).expect("known inode");
                node.pending.push(DataOp::SetLen(0));
                inode
            }
            None => {
                let inode = m.new_inode();
                let op = NsOp::Link {
                    path: path.to_path_buf(),
                    inode,
                };
                m.apply_live(&op);
                m.ns_pending.push((parent(path), op));
                inode
            }
        };
        m.fds.insert(file.as_raw_fd(), inode);
        Ok(file)
    }
    fn write_at(&self, f: &IoFile, buf: &[u8], offset: u64) -> io::Result<()> {
        let op = DataOp::Write {
            offset,
            data: buf.to_vec(),
        };
        self.data_op(f, op, || self.os.write_at(f, buf, offset))
    }
    fn read_at(&self, f: &IoFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.crashed() {
            return Err(dead());
        }
        self.os.read_at(f, buf, offset)
    }
    // The model decides what is durable: the live files are the page cache, never synced.
    fn sync_data(&self, f: &IoFile) -> io::Result<()> {
        self.sync_file(f)
    }
    fn sync_all(&self, f: &IoFile) -> io::Result<()> {
        self.sync_file(f)
    }
    fn set_len(&self, f: &IoFile, len: u64) -> io::Result<()> {
        self.data_op(f, DataOp::SetLen(len), || self.os.set_len(f, len))
    }
    fn allocate(&self, f: &IoFile, len: u64) -> io::Result<()> {
        let size = f.file().metadata()?.len();
        self.data_op(f, DataOp::SetLen(size.max(len)), || {
            self.os.allocate(f, len)
        })
    }
    fn punch_hole(&self, f: &IoFile, offset: u64, len: u64) -> io::Result<()> {
        let op = DataOp::PunchHole { offset, len };
        self.data_op(f, op, || self.os.punch_hole(f, offset, len))
    }
    fn set_write_hint(&self, f: &IoFile, hint: u64) -> io::Result<()> {
        self.os.set_write_hint(f, hint)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let inode = self.model.lock().live.get(from).copied();
        let Some(inode) = inode else {
            return Err(io::Error::other(format!(
                "{} was not created through the I/O seam",
                from.display()
            )));
        };
        debug_assert_eq!(parent(from), parent(to), "renames stay in their directory");
        let op = NsOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            inode,
        };
        self.ns_op(parent(to), op, || self.os.rename(from, to))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let inode = self.model.lock().live.get(path).copied();
        let Some(inode) = inode else {
            // Not ours: the OS says whether it exists (`NotFound` is the common case).
            return self.os.remove(path).and(Err(io::Error::other(format!(
                "{} was not created through the I/O seam",
                path.display()
            ))));
        };
        let op = NsOp::Unlink {
            path: path.to_path_buf(),
            inode,
        };
        self.ns_op(parent(path), op, || self.os.remove(path))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut m = self.model.lock();
        if !Self::tick(&mut m)? {
            return Err(dead());
        }
        let after_rename = m
            .ns_pending
            .iter()
            .rev()
            .find(|(d, _)| d == dir)
            .is_some_and(|(_, op)| matches!(op, NsOp::Rename { .. }));
        if self.mutation == Mutation::SkipRootDirFsync && dir == self.root && after_rename {
            return Ok(());
        }
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut m.ns_pending)
            .into_iter()
            .partition(|(d, _)| d == dir);
        m.ns_pending = later;
        for (_, op) in &now {
            m.durable.apply(op);
        }
        Ok(())
    }
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut d = Some(dir);
        while let Some(p) = d {
            if p.is_dir() {
                break;
            }
            missing.push(p.to_path_buf());
            d = p.parent();
        }
        for p in missing.into_iter().rev() {
            let op = NsOp::Mkdir { path: p.clone() };
            self.ns_op(parent(&p), op, || std::fs::create_dir(&p))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
