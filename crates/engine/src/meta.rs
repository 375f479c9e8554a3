//! The metadata ("turtle") file and the process lock.
//!
//! `flashdoc.turtle` names every table with its configuration and its checkpoint (root and
//! extent-list addresses, file size) plus the journal position the checkpoint covers. A
//! checkpoint commits by writing `flashdoc.turtle.set`, fdatasync, fsync of the directory (so
//! the names of the table files the checkpoint refers to are durable before anything refers to
//! them: a file system may persist directory operations out of order), rename over
//! `flashdoc.turtle`, fsync of the directory: the rename is the atomic commit point, as in
//! WiredTiger (meta_turtle.c). The file is JSON followed by a line `crc32c=XXXXXXXX`.

use crate::block::FileCheckpoint;
use crate::config::TableConfig;
use crate::error::{Error, IoContext, Result};
use crate::io::{FileRole, Io, OpenMode};
use crate::journal::Lsn;
use placement::{FileId, FileKind, PageKind, WriteCause};
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

/// Writes the metadata and commits it atomically, through the I/O seam: create
/// `flashdoc.turtle.set`, write it (announced, placed and hinted like any write), fsync, fsync
/// the directory, rename over `flashdoc.turtle` (`replaced` is the trace id of the file it
/// replaces), fsync the directory. Returns the new file's trace id and the bytes written.
pub fn commit(
    io: &Io,
    dir: &Path,
    meta: &Metadata,
    replaced: Option<FileId>,
) -> Result<(FileId, usize)> {
    let body = serde_json::to_string_pretty(meta).expect("metadata serializes");
    let text = format!("{body}\ncrc32c={:08x}\n", crc32c::crc32c(body.as_bytes()));
    let tmp = dir.join(TURTLE_SET);
    let f = io.open(
        &tmp,
        OpenMode::CreateTruncate,
        FileRole::of(FileKind::Metadata),
        TURTLE_SET.into(),
    )?;
    io.write(
        &f,
        text.as_bytes(),
        0,
        PageKind::Descriptor,
        0,
        WriteCause::Other,
    )?;
    io.sync_all(&f)?;
    // The table files created since the last commit get durable names before the new metadata
    // can name them (the power-loss loop, seed 6 cycle 6: a rename persisted, a create did not).
    io.sync_dir(dir)?;
    io.rename(&f, &dir.join(TURTLE), TURTLE.into(), replaced)?;
    io.sync_dir(dir)?;
    Ok((f.id(), text.len()))
}

/// How long [`ProcessLock::acquire`] waits for a held lock before it reports it.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

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
        // A lock is held by an open file description, and a process that forks copies its
        // descriptors (close-on-exec ones too) until the child execs: a lock this process
        // released a moment ago can still be held by a child it is starting, for as long as
        // that child takes to reach exec. So a held lock is retried for a bounded time
        // (`LOCK_WAIT`) before it is reported.
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: flock on a valid descriptor we own.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(Error::io(format!("locking {}", path.display()), e));
            }
            if std::time::Instant::now() >= deadline {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    lock: path,
                });
            }
            std::thread::sleep(LOCK_RETRY);
        }
        file.set_len(0)
            .ctx(|| format!("writing {}", path.display()))?;
        (&file)
            .write_all(format!("{}\n", std::process::id()).as_bytes())
            .ctx(|| format!("writing {}", path.display()))?;
        Ok(ProcessLock { _file: file, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::Duration;

    /// The flake this wait fixes, made deterministic: a child between its fork and its exec
    /// (another thread is inside `Command::spawn`) holds a copy of the lock's descriptor, so
    /// the lock outlives its release here until the child execs.
    #[test]
    fn a_lock_held_by_a_starting_child_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let lock = ProcessLock::acquire(dir.path()).unwrap();
        let mut fds = [0; 2];
        // SAFETY: a pipe into a valid two-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (read_fd, write_fd) = (fds[0], fds[1]);
        let spawner = std::thread::spawn(move || {
            let mut cmd = std::process::Command::new("true");
            // SAFETY: the closure only calls write and nanosleep (async-signal-safe).
            unsafe {
                cmd.pre_exec(move || {
                    libc::write(write_fd, b"f".as_ptr().cast(), 1);
                    std::thread::sleep(Duration::from_millis(300));
                    Ok(())
                });
            }
            cmd.status().unwrap()
        });
        // The child has forked (it holds the lock's descriptor) and sleeps before its exec.
        let mut byte = 0u8;
        // SAFETY: reads one byte into a valid buffer.
        assert_eq!(
            unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) },
            1
        );
        drop(lock);
        let probe = File::open(dir.path().join(LOCK)).unwrap();
        // SAFETY: flock on a valid descriptor we own.
        let rc = unsafe { libc::flock(probe.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_ne!(rc, 0, "the starting child should still hold the lock");
        drop(probe);
        let again = ProcessLock::acquire(dir.path());
        assert!(spawner.join().unwrap().success());
        // SAFETY: closing the pipe's two descriptors, which this test owns.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
        }
        assert!(again.is_ok(), "{:?}", again.err());
    }
}
