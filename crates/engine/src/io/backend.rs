//! The file backend: the system calls behind the announced-I/O seam ([`super::Io`]). The seam
//! decides what to report and in which order; a backend only performs. [`OsFiles`] is the real
//! one; [`super::FaultyFiles`] wraps it to fail chosen operations deterministically (and a
//! direct-I/O backend can take its place later).

use super::file::IoFile;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// How [`Backend::open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create it, or cut an existing one to nothing.
    CreateTruncate,
    /// Create it; an existing file is an error.
    CreateNew,
    /// Open an existing file for reading and writing.
    Existing,
}

/// Every operation the engine performs on its files. Implementations must be thread safe:
/// positioned reads and writes of one file arrive concurrently.
pub trait Backend: Send + Sync {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File>;
    fn write_at(&self, f: &IoFile, buf: &[u8], offset: u64) -> io::Result<()>;
    fn read_at(&self, f: &IoFile, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn sync_data(&self, f: &IoFile) -> io::Result<()>;
    fn sync_all(&self, f: &IoFile) -> io::Result<()>;
    fn set_len(&self, f: &IoFile, len: u64) -> io::Result<()>;
    /// Allocates `len` bytes of disk for the file (fallocate), keeping what it holds.
    fn allocate(&self, f: &IoFile, len: u64) -> io::Result<()>;
    /// Deallocates a range without changing the size (a TRIM reaching the device).
    fn punch_hole(&self, f: &IoFile, offset: u64, len: u64) -> io::Result<()>;
    /// Sets the inode's Linux write-life hint (`F_SET_RW_HINT`).
    fn set_write_hint(&self, f: &IoFile, hint: u64) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The operating system's files (buffered I/O).
#[derive(Debug, Default)]
pub struct OsFiles;

// uapi fcntl.h: F_LINUX_SPECIFIC_BASE (1024) + 12; the argument points to a u64.
const F_SET_RW_HINT: libc::c_int = 1036;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Backend for OsFiles {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        match mode {
            OpenMode::CreateTruncate => o.create(true).truncate(true),
            OpenMode::CreateNew => o.create_new(true),
            OpenMode::Existing => &mut o,
        };
        o.open(path)
    }
    fn write_at(&self, f: &IoFile, buf: &[u8], offset: u64) -> io::Result<()> {
        f.file().write_all_at(buf, offset)
    }
    fn read_at(&self, f: &IoFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
        f.file().read_exact_at(buf, offset)
    }
    fn sync_data(&self, f: &IoFile) -> io::Result<()> {
        f.file().sync_data()
    }
    fn sync_all(&self, f: &IoFile) -> io::Result<()> {
        f.file().sync_all()
    }
    fn set_len(&self, f: &IoFile, len: u64) -> io::Result<()> {
        f.file().set_len(len)
    }
    fn allocate(&self, f: &IoFile, len: u64) -> io::Result<()> {
        // SAFETY: fallocate only reads its integer arguments; the descriptor is open.
        check(unsafe { libc::fallocate(f.file().as_raw_fd(), 0, 0, len as libc::off_t) })
    }
    fn punch_hole(&self, f: &IoFile, offset: u64, len: u64) -> io::Result<()> {
        // SAFETY: fallocate on a descriptor we own.
        check(unsafe {
            libc::fallocate(
                f.file().as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        })
    }
    fn set_write_hint(&self, f: &IoFile, hint: u64) -> io::Result<()> {
        // SAFETY: fcntl with F_SET_RW_HINT reads one u64 through the pointer.
        check(unsafe { libc::fcntl(f.file().as_raw_fd(), F_SET_RW_HINT, &hint as *const u64) })
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir).and_then(|d| d.sync_all())
    }
}
