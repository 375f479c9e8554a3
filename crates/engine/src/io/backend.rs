//! The file backend: the system calls behind the announced-I/O seam ([`super::Io`]). The seam
//! decides what to report and in which order; a backend only performs. [`OsFiles`] is the real
//! one, buffered or direct per file; [`super::FaultyFiles`] wraps it to fail chosen operations
//! deterministically.

use super::direct::DIRECT_IO_ALIGN;
use super::file::IoFile;
use aligned_vec::{AVec, ConstAlign};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
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
    /// Opens `path`; with `direct`, bypassing the page cache (`O_DIRECT`): then every read and
    /// write of the file is aligned to [`DIRECT_IO_ALIGN`] in offset and length.
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<File>;
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
    /// Makes the directory's entries (creates, renames, removes in it) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates `dir` and any missing parent (`mkdir -p`); an existing directory is no error.
    /// Each new directory is an entry of its parent: durable once the parent is synced.
    fn create_dir(&self, dir: &Path) -> io::Result<()>;
    /// The size and free space of the file system holding `dir` (`statvfs`): the sweep's
    /// reserve shrinks as it fills.
    fn fs_space(&self, dir: &Path) -> io::Result<FsSpace> {
        statvfs(dir)
    }
}

/// A file system's size and the bytes an unprivileged writer may still use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsSpace {
    pub total: u64,
    pub avail: u64,
}

impl FsSpace {
    /// The share of the file system in use, 0.0..=1.0 (what `df` shows as Use%).
    pub fn fill(self) -> f64 {
        if self.total == 0 {
            return 1.0;
        }
        1.0 - self.avail.min(self.total) as f64 / self.total as f64
    }
}

/// `statvfs(dir)`: the file system's size and its space available to unprivileged writers.
pub fn statvfs(dir: &Path) -> io::Result<FsSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` points to a statvfs buffer we own.
    check(unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statvfs returned 0, so it filled the buffer.
    let st = unsafe { st.assume_init() };
    let frsize = st.f_frsize;
    Ok(FsSpace {
        total: st.f_blocks * frsize,
        avail: st.f_bavail * frsize,
    })
}

/// The operating system's files: buffered, or direct for files opened so.
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
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<File> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        match mode {
            OpenMode::CreateTruncate => o.create(true).truncate(true),
            OpenMode::CreateNew => o.create_new(true),
            OpenMode::Existing => &mut o,
        };
        o.open(path).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) if direct => io::Error::new(
                e.kind(),
                format!(
                    "{e}: the file system refuses O_DIRECT (direct_io); tmpfs and some network \
                     file systems do: put the database on one that supports it (ext4, xfs) \
                     or turn direct_io off"
                ),
            ),
            _ => e,
        })
    }
    fn write_at(&self, f: &IoFile, buf: &[u8], offset: u64) -> io::Result<()> {
        if !f.is_direct() {
            return f.file().write_all_at(buf, offset);
        }
        check_aligned(offset, buf.len(), "write")?;
        if is_aligned_memory(buf) {
            return f.file().write_all_at(buf, offset);
        }
        f.file().write_all_at(
            &AlignedBuf::from_slice(DIRECT_IO_ALIGN as usize, buf),
            offset,
        )
    }
    fn read_at(&self, f: &IoFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if !f.is_direct() {
            return f.file().read_exact_at(buf, offset);
        }
        read_direct(f.file(), buf, offset)
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
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
}

/// Whether the file system under `dir` takes `O_DIRECT` (tmpfs and some network file systems
/// do not): opens and removes a probe file there. The error says what to do.
pub fn probe_direct_io(dir: &Path) -> io::Result<()> {
    let probe = dir.join(".direct-io-probe");
    let opened = OsFiles.open(&probe, OpenMode::CreateTruncate, true);
    let _ = std::fs::remove_file(&probe);
    opened.map(drop)
}

/// The environment variable that lets a durability test pass on a machine whose file system has
/// no `O_DIRECT` (tmpfs): without it such a test fails rather than skip unseen.
pub const ALLOW_NO_ODIRECT: &str = "FLASHDOC_ALLOW_NO_ODIRECT";

/// For tests that need `O_DIRECT` under `dir`: true when the file system takes it. When it does
/// not, the test fails (a panic naming the cause and the way out) unless
/// `FLASHDOC_ALLOW_NO_ODIRECT=1` says this machine lacks it; then it prints why and returns false.
pub fn direct_io_required(dir: &Path) -> bool {
    let Err(e) = probe_direct_io(dir) else {
        return true;
    };
    let allowed = std::env::var(ALLOW_NO_ODIRECT).is_ok_and(|v| v == "1");
    assert!(
        allowed,
        "this durability test needs O_DIRECT under {}, which refuses it ({e}); run the tests on \
         ext4 or xfs, or set {ALLOW_NO_ODIRECT}=1 to state that this machine has no O_DIRECT",
        dir.display()
    );
    eprintln!("not run: {e} ({ALLOW_NO_ODIRECT}=1)");
    false
}

/// Memory aligned for direct I/O.
type AlignedBuf = AVec<u8, ConstAlign<{ DIRECT_IO_ALIGN as usize }>>;

fn is_aligned_memory(buf: &[u8]) -> bool {
    (buf.as_ptr() as usize).is_multiple_of(DIRECT_IO_ALIGN as usize)
}

/// A direct write must cover whole aligned blocks: the callers (block manager, journal) lay
/// their writes out so, and anything else is a bug reported rather than left to `EINVAL`.
fn check_aligned(offset: u64, len: usize, what: &str) -> io::Result<()> {
    if offset.is_multiple_of(DIRECT_IO_ALIGN) && (len as u64).is_multiple_of(DIRECT_IO_ALIGN) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "direct I/O {what} of {len} bytes at offset {offset} is not aligned to \
             {DIRECT_IO_ALIGN} bytes"
        ),
    ))
}

/// Reads `buf.len()` bytes at `offset` from a direct file: through an aligned buffer covering
/// the enclosing aligned blocks, so a small read (a file's descriptor) works too. The file's
/// end may fall inside the last block: only the bytes asked for must exist.
fn read_direct(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let align = DIRECT_IO_ALIGN;
    let start = offset / align * align;
    let end = (offset + buf.len() as u64).div_ceil(align) * align;
    if start == offset && end == offset + buf.len() as u64 && is_aligned_memory(buf) {
        return file.read_exact_at(buf, offset);
    }
    let mut bounce = AlignedBuf::with_capacity(align as usize, (end - start) as usize);
    bounce.resize((end - start) as usize, 0);
    let mut got = 0usize;
    let want = (offset - start) as usize + buf.len();
    // Bounded: every pass reads at least one byte or returns.
    while got < want {
        match file.read_at(&mut bounce[got..], start + got as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            // A short direct read ends at the file's end, which need not be aligned; the next
            // read would start unaligned, so it is the last one.
            Ok(n) if !(got + n).is_multiple_of(align as usize) => {
                got += n;
                if got < want {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "failed to fill whole buffer",
                    ));
                }
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let from = (offset - start) as usize;
    buf.copy_from_slice(&bounce[from..from + buf.len()]);
    Ok(())
}
