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
//! - Syncs and reads pass through the backend but are not events: the event vocabulary
//!   (`placement::Event`) has none for them. Punches are the TRIM batcher's output and are
//!   issued under the hub's lock (see `hub.rs`).
//!
//! With no observer and no flash settings, the seam costs one branch and the backend's call
//! per operation: nothing is allocated or locked.

mod backend;
mod direct;
mod fault;
mod file;
mod hub;
mod linux;
mod meter;
mod powerloss;

pub use backend::{
    direct_io_required, probe_direct_io, Backend, OpenMode, OsFiles, ALLOW_NO_ODIRECT,
};
pub use direct::{DirectIo, DIRECT_IO_ALIGN};
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
        })
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
        Io::new(None, &FlashConfig::default(), None).expect("the default flash settings are valid")
    }

    /// A seam that only reports to `observer`.
    pub fn observed(observer: Arc<dyn Observer>) -> Io {
        Io::new(Some(observer), &FlashConfig::default(), None)
            .expect("the default flash settings are valid")
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

    pub fn sync_data(&self, f: &IoFile) -> Result<()> {
        self.backend
            .sync_data(f)
            .map_err(|e| Error::io(format!("fdatasync {}", f.path.display()), e))
    }

    pub fn sync_all(&self, f: &IoFile) -> Result<()> {
        self.backend
            .sync_all(f)
            .map_err(|e| Error::io(format!("fsync {}", f.path.display()), e))
    }

    pub fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.backend
            .sync_dir(dir)
            .map_err(|e| Error::io(format!("fsync directory {}", dir.display()), e))
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

    /// Flushes the observer.
    pub fn flush(&self) {
        self.hub.flush();
    }
}

#[cfg(test)]
mod tests;
