//! A fault-injecting backend for deterministic in-process fault tests (TigerBeetle's and
//! FoundationDB's style): the real files, except that chosen operations fail with a chosen
//! error after a chosen number of successes. Plugged in with `EngineConfig::backend`.

use super::backend::{Backend, OpenMode, OsFiles};
use super::file::IoFile;
use parking_lot::Mutex;
use placement::FileKind;
use std::fs::File;
use std::io;
use std::path::Path;

/// The operations a fault can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    Write,
    /// A file's fsync or fdatasync.
    Sync,
    /// A directory's fsync (no file kind: a fault on it must leave `kind` unset).
    SyncDir,
}

/// One planned fault: operations `op` on files of `kind` (any kind when `None`) succeed
/// `skip` times, then fail `times` times with `errno`.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub op: FaultOp,
    pub kind: Option<FileKind>,
    pub skip: u64,
    pub times: u64,
    pub errno: i32,
}

/// The OS backend with one armed fault at a time.
#[derive(Default)]
pub struct FaultyFiles {
    os: OsFiles,
    plan: Mutex<Option<Fault>>,
    injected: Mutex<u64>,
}

impl FaultyFiles {
    pub fn new() -> Self {
        Self::default()
    }

    /// Arms `fault`, replacing any armed one.
    pub fn arm(&self, fault: Fault) {
        *self.plan.lock() = Some(fault);
    }

    /// How many operations have been failed so far.
    pub fn injected(&self) -> u64 {
        *self.injected.lock()
    }

    /// Whether this operation on a file of `kind` (`None`: a directory) fails; counts it
    /// against the armed fault.
    fn strike(&self, op: FaultOp, kind: Option<FileKind>) -> io::Result<()> {
        let mut plan = self.plan.lock();
        let Some(p) = plan.as_mut() else {
            return Ok(());
        };
        if p.op != op || p.kind.is_some_and(|k| Some(k) != kind) || p.times == 0 {
            return Ok(());
        }
        if p.skip > 0 {
            p.skip -= 1;
            return Ok(());
        }
        p.times -= 1;
        *self.injected.lock() += 1;
        Err(io::Error::from_raw_os_error(p.errno))
    }
}

impl Backend for FaultyFiles {
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<File> {
        self.os.open(path, mode, direct)
    }
    fn write_at(&self, f: &IoFile, buf: &[u8], offset: u64) -> io::Result<()> {
        self.strike(FaultOp::Write, Some(f.kind()))?;
        self.os.write_at(f, buf, offset)
    }
    fn read_at(&self, f: &IoFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.os.read_at(f, buf, offset)
    }
    fn sync_data(&self, f: &IoFile) -> io::Result<()> {
        self.strike(FaultOp::Sync, Some(f.kind()))?;
        self.os.sync_data(f)
    }
    fn sync_all(&self, f: &IoFile) -> io::Result<()> {
        self.strike(FaultOp::Sync, Some(f.kind()))?;
        self.os.sync_all(f)
    }
    fn set_len(&self, f: &IoFile, len: u64) -> io::Result<()> {
        self.os.set_len(f, len)
    }
    fn allocate(&self, f: &IoFile, len: u64) -> io::Result<()> {
        self.os.allocate(f, len)
    }
    fn punch_hole(&self, f: &IoFile, offset: u64, len: u64) -> io::Result<()> {
        self.os.punch_hole(f, offset, len)
    }
    fn set_write_hint(&self, f: &IoFile, hint: u64) -> io::Result<()> {
        self.os.set_write_hint(f, hint)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.os.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.os.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.strike(FaultOp::SyncDir, None)?;
        self.os.sync_dir(dir)
    }
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        self.os.create_dir(dir)
    }
}
