//! The announced-I/O seam. Every write, free, punch, sync, create, rename and remove the
//! engine performs on its files and directories — table files, the journal and the metadata —
//! goes through [`Io`], which reports it to the observer and to flash placement exactly once
//! and then performs it through the [`Backend`].
//!
//! Rules (docs/engine.md, "The I/O seam"):
//! - A write is announced *before* it is issued, so placement picks its stream and the file's
//!   write-life hint is set first, and a pending trim of its space is cancelled first.
//! - Everything else is reported once it has happened (a create, rename, remove or truncate
//!   that fails is not reported). A `Free` is reported while the block manager still holds the
//!   space, before it can be allocated again.
//! - **The failure rule:** a write that fails after its announcement is followed at once by a
//!   `Free` of its range, whatever the file: the announced bytes never landed, so the space
//!   holds nothing anyone can reach. Then the error goes to the caller (the block manager
//!   returns the space to its free list; the journal fails for good).
//! - **The fail-stop rule:** the first failed sync (file or directory) stops every later write
//!   and sync through the seam, with that failure as the cause ([`failstop`]); a caller may
//!   also stop them ([`Io::stop_writes`]) for a failure it cannot recover from. Reads go on.
//! - Syncs and reads pass through the backend but are not events: the event vocabulary
//!   (`placement::Event`) has none for them. Punches are the TRIM batcher's output and are
//!   issued under the hub's lock (see `hub.rs`).
//!
//! With no observer and no flash settings, the seam costs one branch and the backend's call
//! per operation: nothing is allocated or locked.

mod backend;
mod direct;
mod failstop;
mod fault;
mod file;
pub mod hint_path;
mod hub;
mod linux;
mod meter;
mod powerloss;

pub use backend::{
    direct_io_required, probe_direct_io, statvfs, Backend, FsSpace, OpenMode, OsFiles,
    ALLOW_NO_ODIRECT,
};
pub use direct::{DirectIo, DIRECT_IO_ALIGN};
pub use failstop::WriteFailure;
pub use fault::{Fault, FaultOp, FaultyFiles};
pub use file::{FileRole, IoFile};
pub use hub::FlashConfig;
pub use linux::hint_for_stream;
pub use meter::WriteMeter;
pub use powerloss::{CrashImage, CrashOdds, Mutation, PowerLossFiles};

use crate::error::{Error, Result};
use placement::{Event, FileId, Observer, PageKind, WriteCause, WriteEvent};
use std::path::Path;
use std::sync::Arc;

/// The seam: one per engine, shared by the block manager, the journal and the metadata.
pub struct Io {
    backend: Arc<dyn Backend>,
    hub: hub::Hub,
    direct: DirectIo,
    failstop: failstop::FailStop,
    /// Where the sweep's reserve learns how full the file system is (`None`: it does not
    /// adapt, as under the inline schedule, whose writes must not depend on the host).
    space: Option<SpaceWatch>,
}

/// A source of the file system's fill: the database directory's `statvfs` through the
/// backend, or a figure a test injects.
pub trait FreeSpace: Send + Sync {
    fn space(&self) -> Option<FsSpace>;
}

/// The file system's space, read at most once per [`SPACE_REFRESH`] (allocations are many).
struct SpaceWatch {
    source: Box<dyn FreeSpace>,
    last: parking_lot::Mutex<Option<(std::time::Instant, Option<FsSpace>)>>,
}

/// How long a reading of the file system's space is used before it is read again.
const SPACE_REFRESH: std::time::Duration = std::time::Duration::from_millis(500);

/// `statvfs` of a directory through the backend; `None` when the call fails (the reserve then
/// stays as configured).
struct DirSpace {
    backend: Arc<dyn Backend>,
    dir: std::path::PathBuf,
}

impl FreeSpace for DirSpace {
    fn space(&self) -> Option<FsSpace> {
        self.backend.fs_space(&self.dir).ok()
    }
}

impl Io {
    /// A seam reporting to `observer`, placing writes as `flash` says, performing through
    /// `backend` (the operating system's files when `None`).
    pub fn new(
        observer: Option<Arc<dyn Observer>>,
        flash: &FlashConfig,
        backend: Option<Arc<dyn Backend>>,
    ) -> std::result::Result<Io, String> {
        Ok(Io {
            backend: backend.unwrap_or_else(|| Arc::new(OsFiles)),
            hub: hub::Hub::with_flash(observer, flash)?,
            direct: DirectIo::NONE,
            failstop: failstop::FailStop::default(),
            space: None,
        })
    }

    /// Lets the sweep's reserve follow the fill of the file system holding `dir`.
    pub fn with_space_of(self, dir: &Path) -> Io {
        let source = DirSpace {
            backend: self.backend.clone(),
            dir: dir.to_path_buf(),
        };
        self.with_free_space(Box::new(source))
    }

    /// Lets the sweep's reserve follow the fill `source` reports (tests inject a figure).
    pub fn with_free_space(mut self, source: Box<dyn FreeSpace>) -> Io {
        self.space = Some(SpaceWatch {
            source,
            last: parking_lot::Mutex::new(None),
        });
        self
    }

    /// The file system's space as last read (at most [`SPACE_REFRESH`] old), or `None` when
    /// the reserve does not adapt.
    pub fn fs_space(&self) -> Option<FsSpace> {
        let w = self.space.as_ref()?;
        let mut last = w.last.lock();
        match *last {
            Some((at, space)) if at.elapsed() < SPACE_REFRESH => space,
            _ => {
                let space = w.source.space();
                *last = Some((std::time::Instant::now(), space));
                space
            }
        }
    }

    /// Opens the files of the kinds `direct` names with `O_DIRECT` from now on.
    pub fn with_direct_io(mut self, direct: DirectIo) -> Io {
        self.direct = direct;
        self
    }

    /// Stamps events with the bytes written so far instead of the wall clock (1 ns per byte),
    /// so a trace's times depend on what the engine wrote, not on the host's speed.
    pub fn with_written_clock(mut self) -> Io {
        self.hub.use_written_clock();
        self
    }

    /// Which files this seam opens with `O_DIRECT`.
    pub fn direct_io(&self) -> DirectIo {
        self.direct
    }

    /// No observer, no placement, the operating system's files.
    pub fn quiet() -> Io {
        Io::new(None, &FlashConfig::off(), None).expect("flash mode off is valid")
    }

    /// A seam that only reports to `observer`.
    pub fn observed(observer: Arc<dyn Observer>) -> Io {
        Io::new(Some(observer), &FlashConfig::off(), None).expect("flash mode off is valid")
    }

    /// Whether anyone listens (callers skip building what only an event would use).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.hub.enabled()
    }

    /// The written-bytes meter (checkpoint trigger, statistics).
    pub fn meter(&self) -> &WriteMeter {
        self.hub.meter()
    }

    /// Opens (or creates) a file and reports it as created under `name` (the trace's name).
    pub fn open(
        &self,
        path: &Path,
        mode: OpenMode,
        role: FileRole,
        name: String,
    ) -> Result<Arc<IoFile>> {
        let what = match mode {
            OpenMode::Existing => "opening",
            _ => "creating",
        };
        let direct = self.direct.for_kind(role.kind);
        let file = self
            .backend
            .open(path, mode, direct)
            .map_err(|e| Error::io(format!("{what} {}", path.display()), e))?;
        let f = Arc::new(IoFile {
            id: self.hub.new_file_id(),
            role,
            path: path.to_path_buf(),
            file,
            direct,
        });
        self.hub.register_file(&f);
        self.hub.emit(&*self.backend, |t| Event::FileCreate {
            time_ns: t,
            file: f.id,
            kind: role.kind,
            name,
        });
        Ok(f)
    }

    /// Writes `buf` at `offset`: announced first (placed, hinted, counted), then issued. On
    /// failure the range is announced free (the failure rule, module doc).
    #[inline]
    pub fn write(
        &self,
        f: &IoFile,
        buf: &[u8],
        offset: u64,
        page_kind: PageKind,
        page_id: u64,
        cause: WriteCause,
    ) -> Result<()> {
        self.writable()?;
        let len = buf.len() as u64;
        let role = f.role;
        self.hub
            .before_write(&*self.backend, f, len, |time_ns| WriteEvent {
                time_ns,
                file: f.id,
                file_kind: role.kind,
                table: role.table,
                page_kind,
                offset,
                len: buf.len() as u32,
                id_index: role.id_index,
                stream: 0,
                page_id,
                cause,
            });
        if let Err(e) = self.backend.write_at(f, buf, offset) {
            self.free(f, offset, len);
            return Err(Error::io(
                format!(
                    "writing {len} bytes at offset {offset} of {}",
                    f.path.display()
                ),
                e,
            ));
        }
        Ok(())
    }

    /// Reads exactly `buf.len()` bytes at `offset`, reported to the observer only (a read
    /// places nothing). The engine reads a block only when its cache does not hold it, so a
    /// trace's reads are the cache's misses.
    pub fn read(&self, f: &IoFile, buf: &mut [u8], offset: u64) -> Result<()> {
        self.hub.observe_only(|t| Event::Read {
            time_ns: t,
            file: f.id,
            offset,
            len: buf.len() as u32,
        });
        self.backend.read_at(f, buf, offset).map_err(|e| {
            Error::io(
                format!(
                    "reading {} bytes at offset {offset} of {}",
                    buf.len(),
                    f.path.display()
                ),
                e,
            )
        })
    }

    /// Reports `[offset, offset+len)` of `f` as reachable by no durable checkpoint. The caller
    /// still holds the space: it becomes allocatable only after this returns.
    pub fn free(&self, f: &IoFile, offset: u64, len: u64) {
        self.hub.emit(&*self.backend, |t| Event::Free {
            time_ns: t,
            file: f.id,
            offset,
            len,
        });
    }

    /// fdatasync. A failure stops every later write and sync (the fail-stop rule).
    pub fn sync_data(&self, f: &IoFile) -> Result<()> {
        self.writable()?;
        self.backend
            .sync_data(f)
            .map_err(|e| self.sync_failed("fdatasync", &f.path, &e))
    }

    /// fsync. A failure stops every later write and sync (the fail-stop rule).
    pub fn sync_all(&self, f: &IoFile) -> Result<()> {
        self.writable()?;
        self.backend
            .sync_all(f)
            .map_err(|e| self.sync_failed("fsync", &f.path, &e))
    }

    /// A directory's fsync. A failure stops every later write and sync (the fail-stop rule).
    pub fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.writable()?;
        self.backend
            .sync_dir(dir)
            .map_err(|e| self.sync_failed("fsync directory", dir, &e))
    }

    /// Records a failed sync as the cause that stops writes, and returns the refusal.
    fn sync_failed(&self, operation: &str, path: &Path, e: &std::io::Error) -> Error {
        Error::WriteFailed(self.stop_writes(WriteFailure::new(operation, path, e)))
    }

    /// Stops every later write and sync with `failure` as the cause, unless an earlier failure
    /// stopped them already (that one stays the cause). The state's start is logged once, at
    /// error level, on the engine's standard error. Returns the cause writers are refused with.
    pub fn stop_writes(&self, failure: WriteFailure) -> WriteFailure {
        let (cause, first) = self.failstop.record(failure);
        if first {
            eprintln!(
                "flashdoc: ERROR: {cause}: every write, commit and checkpoint is refused from \
                 now on; reads go on; restart to recover from what is durable"
            );
        }
        cause
    }

    /// The failure that stopped writes, if one did.
    pub fn write_failure(&self) -> Option<WriteFailure> {
        self.failstop.get()
    }

    /// Ok while writes are allowed; the refusal, with its cause, once a failure stopped them.
    pub fn writable(&self) -> Result<()> {
        match self.failstop.get() {
            Some(cause) => Err(Error::WriteFailed(cause)),
            None => Ok(()),
        }
    }

    /// Creates a directory and its missing parents (not an event: placement has no
    /// directories). A new directory is durable once its parent is synced ([`Io::sync_dir`]).
    pub fn create_dir(&self, dir: &Path) -> Result<()> {
        self.backend
            .create_dir(dir)
            .map_err(|e| Error::io(format!("creating directory {}", dir.display()), e))
    }

    /// Sets the file's size; reported as a truncation when it shrinks the file.
    pub fn set_len(&self, f: &IoFile, len: u64, old_len: u64) -> Result<()> {
        self.backend
            .set_len(f, len)
            .map_err(|e| Error::io(format!("resizing {} to {len} bytes", f.path.display()), e))?;
        if len < old_len {
            self.hub.emit(&*self.backend, |t| Event::FileTruncate {
                time_ns: t,
                file: f.id,
                len,
            });
        }
        Ok(())
    }

    /// Allocates disk for the first `len` bytes (not an event: nothing is written).
    pub fn allocate(&self, f: &IoFile, len: u64) -> std::io::Result<()> {
        self.backend.allocate(f, len)
    }

    /// Renames `f` over `to` (which may exist: `replaced` is then its trace id, reported
    /// removed) and reports the new name.
    pub fn rename(
        &self,
        f: &IoFile,
        to: &Path,
        name: String,
        replaced: Option<FileId>,
    ) -> Result<()> {
        self.backend.rename(&f.path, to).map_err(|e| {
            Error::io(
                format!("renaming {} to {}", f.path.display(), to.display()),
                e,
            )
        })?;
        if let Some(old) = replaced {
            self.hub.emit(&*self.backend, |t| Event::FileRemove {
                time_ns: t,
                file: old,
            });
        }
        self.hub.emit(&*self.backend, |t| Event::FileRename {
            time_ns: t,
            file: f.id,
            name,
        });
        Ok(())
    }

    /// Removes a file and reports it under `id`, or under a fresh id for a file this engine
    /// never opened (an earlier run's journal file, an orphan). A missing file is not removed
    /// and not reported: the error (`NotFound`) goes to the caller.
    pub fn remove(&self, path: &Path, id: Option<FileId>) -> std::io::Result<()> {
        self.backend.remove(path)?;
        let file = id.unwrap_or_else(|| self.hub.new_file_id());
        self.hub
            .emit(&*self.backend, |t| Event::FileRemove { time_ns: t, file });
        Ok(())
    }

    pub fn checkpoint_begins(&self, id: u64) {
        self.hub.emit(&*self.backend, |t| Event::CheckpointBegin {
            time_ns: t,
            id,
        });
    }

    pub fn checkpoint_committed(&self, id: u64) {
        self.hub.emit(&*self.backend, |t| Event::CheckpointCommit {
            time_ns: t,
            id,
        });
    }

    /// The load phase is over (the boundary policy takes each file's size as its boundary).
    pub fn end_of_load(&self) {
        self.hub.end_of_load();
    }

    /// Placement, hint and trim counters for statistics.
    pub fn flash_stats(&self) -> serde_json::Value {
        self.hub.flash_stats()
    }

    /// Detects which path hints take for files under `dir` (the database's directory): sets a
    /// write-life hint on a probe file there through the backend, then removes it. Done once,
    /// when the engine opens, before any file is written.
    pub fn detect_hint_path(&mut self, dir: &Path, sysfs: &Path) -> Result<()> {
        let target = hint_path::Target::of(dir)
            .map_err(|e| Error::io(format!("inspecting {}", dir.display()), e))?;
        let probe = dir.join(".hint-probe");
        let backend = self.backend.clone();
        let direct = false;
        self.hub.detect_hint_path(target, sysfs, || {
            let file = backend.open(&probe, OpenMode::CreateTruncate, direct)?;
            let f = IoFile {
                id: 0,
                role: FileRole::of(placement::FileKind::Metadata),
                path: probe.clone(),
                file,
                direct,
            };
            let set = backend.set_write_hint(&f, linux::RWH_EXTREME);
            drop(f);
            backend.remove(&probe)?;
            set
        });
        Ok(())
    }

    /// The hint path in use (`none` when hints are off or the probe was refused).
    pub fn hint_path(&self) -> hint_path::HintPath {
        self.hub.hint_path()
    }

    /// Flushes the observer.
    pub fn flush(&self) {
        self.hub.flush();
    }
}

#[cfg(test)]
mod tests;
