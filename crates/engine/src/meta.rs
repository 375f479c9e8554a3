//! The metadata ("turtle") file and the process lock.
//!
//! `flashdoc.turtle` names every table with its configuration and its checkpoint (root and
//! extent-list addresses, file size) plus the journal position the checkpoint covers. A
//! checkpoint commits by writing `flashdoc.turtle.set`, fdatasync, rename over
//! `flashdoc.turtle`, fsync of the directory: the rename is the atomic commit point, as in
//! WiredTiger (meta_turtle.c). The file is JSON followed by a line `crc32c=XXXXXXXX`.

use crate::block::FileCheckpoint;
use crate::config::TableConfig;
use crate::error::{Error, IoContext, Result};
use crate::journal::Lsn;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

pub const TURTLE: &str = "flashdoc.turtle";
pub const TURTLE_SET: &str = "flashdoc.turtle.set";
pub const LOCK: &str = "flashdoc.lock";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableMeta {
    pub id: u32,
    pub name: String,
    pub file: String,
    pub config: TableConfig,
    pub checkpoint: FileCheckpoint,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Metadata {
    pub format: u32,
    pub checkpoint_id: u64,
    /// Replay the journal from here on open (`None`: the journal was off).
    pub journal_lsn: Option<Lsn>,
    pub next_table_id: u32,
    pub tables: Vec<TableMeta>,
}

pub fn read(dir: &Path) -> Result<Option<Metadata>> {
    let path = dir.join(TURTLE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let corrupt = |what: String| Error::Corrupt {
        file: path.clone(),
        offset: 0,
        what,
    };
    let (body, sum) = text
        .trim_end()
        .rsplit_once("\ncrc32c=")
        .ok_or_else(|| corrupt("no checksum line".into()))?;
    let want = u32::from_str_radix(sum, 16).map_err(|_| corrupt("bad checksum line".into()))?;
    if crc32c::crc32c(body.as_bytes()) != want {
        return Err(corrupt("checksum mismatch".into()));
    }
    let meta: Metadata =
        serde_json::from_str(body).map_err(|e| corrupt(format!("unreadable metadata: {e}")))?;
    if meta.format != 1 {
        return Err(corrupt(format!("unknown metadata format {}", meta.format)));
    }
    Ok(Some(meta))
}

/// Writes the metadata and commits it atomically. Returns the bytes written.
pub fn commit(dir: &Path, meta: &Metadata) -> Result<usize> {
    let body = serde_json::to_string_pretty(meta).expect("metadata serializes");
    let text = format!("{body}\ncrc32c={:08x}\n", crc32c::crc32c(body.as_bytes()));
    let tmp = dir.join(TURTLE_SET);
    let mut f = File::create(&tmp).ctx(|| format!("creating {}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .ctx(|| format!("writing {}", tmp.display()))?;
    f.sync_all().ctx(|| format!("fsync {}", tmp.display()))?;
    drop(f);
    let dst = dir.join(TURTLE);
    std::fs::rename(&tmp, &dst)
        .ctx(|| format!("renaming {} to {}", tmp.display(), dst.display()))?;
    sync_dir(dir)?;
    Ok(text.len())
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx(|| format!("fsync directory {}", dir.display()))
}

/// An exclusive advisory lock on `dbPath/flashdoc.lock`, held for the engine's life.
pub struct ProcessLock {
    _file: File,
    pub path: PathBuf,
}

impl ProcessLock {
    pub fn acquire(dir: &Path) -> Result<ProcessLock> {
        let path = dir.join(LOCK);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .ctx(|| format!("opening the lock file {}", path.display()))?;
        // SAFETY: flock on a valid descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    lock: path,
                });
            }
            return Err(Error::io(format!("locking {}", path.display()), e));
        }
        file.set_len(0)
            .ctx(|| format!("writing {}", path.display()))?;
        (&file)
            .write_all(format!("{}\n", std::process::id()).as_bytes())
            .ctx(|| format!("writing {}", path.display()))?;
        Ok(ProcessLock { _file: file, path })
    }
}
