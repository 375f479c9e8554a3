//! The system calls the shim makes for itself. None of them goes through an interposed
//! symbol: the trace file is opened and written with raw `syscall(2)`s, hints are set with a
//! raw `fcntl`, and the rest (`fstat`, `fstatat`, `readlink`, `lseek`, `realpath`,
//! `clock_gettime`) are C-library calls the shim does not interpose.

use crate::recorder::{Inode, Sink};
use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// uapi `fcntl.h`: F_LINUX_SPECIFIC_BASE (1024) + 12; the argument points to a u64.
pub const F_SET_RW_HINT: libc::c_int = 1036;

pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno, a live int.
    unsafe { *libc::__errno_location() = e }
}

/// Monotonic nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The six write-life hint values, entry h holding h. `F_SET_RW_HINT` takes a pointer to the
/// value, and the shim always passes one into this constant table: a tracer that does not
/// decode the command (strace 6.1 prints `0x40c /* F_??? */` and the address) can still read
/// the hint from the address, with the library's load address and this symbol's offset
/// (the shim's acceptance test does).
#[no_mangle]
pub static flashdoc_shim_rw_hints: [u64; 6] = [0, 1, 2, 3, 4, 5];

/// Sets the inode's write-life hint with a raw fcntl; whether the kernel took it.
pub fn set_rw_hint(fd: i32, hint: u64) -> bool {
    let value: &u64 = &flashdoc_shim_rw_hints[hint as usize];
    // SAFETY: F_SET_RW_HINT reads one u64 through the pointer.
    unsafe { libc::syscall(libc::SYS_fcntl, fd, F_SET_RW_HINT, value as *const u64) == 0 }
}

/// The current file position (for `write`/`writev`, which take none).
pub fn position(fd: i32) -> Option<u64> {
    // SAFETY: lseek on the caller's descriptor, not moving it.
    let pos = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
    (pos >= 0).then_some(pos as u64)
}

/// A regular file's inode and absolute path, or None for anything else.
pub fn fd_file(fd: i32) -> Option<(Inode, PathBuf)> {
    // SAFETY: a zeroed stat is a valid out value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into st.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let path = read_link(&format!("/proc/self/fd/{fd}"))?;
    Some(((st.st_dev, st.st_ino), path))
}

/// What `path` (relative to `dirfd`) names now, without following a final symlink:
/// (inode, link count), for regular files only.
pub fn stat_at(dirfd: i32, path: &CStr) -> Option<(Inode, u64)> {
    // SAFETY: a zeroed stat is a valid out value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is a valid C string; fstatat writes into st.
    let rc = unsafe { libc::fstatat(dirfd, path.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG)
        .then_some(((st.st_dev, st.st_ino), st.st_nlink))
}

/// The absolute path `path` names relative to `dirfd`, with its directory resolved
/// (symlinks, `.` and `..`) and its last component kept as is.
pub fn resolve_at(dirfd: i32, path: &CStr) -> Option<PathBuf> {
    let p = Path::new(OsStr::from_bytes(path.to_bytes()));
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else if dirfd == libc::AT_FDCWD {
        std::env::current_dir().ok()?.join(p)
    } else {
        read_link(&format!("/proc/self/fd/{dirfd}"))?.join(p)
    };
    let name = match joined.components().next_back()? {
        Component::Normal(n) => n.to_os_string(),
        _ => return None,
    };
    let parent = canonical(joined.parent()?)?;
    Some(parent.join(name))
}

/// `realpath(3)`.
pub fn canonical(path: &Path) -> Option<PathBuf> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: realpath with a NULL buffer mallocs the result, freed below.
    let out = unsafe { libc::realpath(c.as_ptr(), std::ptr::null_mut()) };
    if out.is_null() {
        return None;
    }
    // SAFETY: realpath returned a valid C string.
    let path = PathBuf::from(OsStr::from_bytes(unsafe { CStr::from_ptr(out) }.to_bytes()));
    // SAFETY: allocated by realpath.
    unsafe { libc::free(out.cast()) };
    Some(path)
}

/// `abs` relative to `dir` (both resolved), `/`-separated; None outside it or not UTF-8.
pub fn relative(dir: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(dir).ok()?;
    let s = rel.to_str()?;
    (!s.is_empty()).then(|| s.to_string())
}

fn read_link(path: &str) -> Option<PathBuf> {
    let c = CString::new(path).ok()?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buf has buf.len() bytes.
    let n = unsafe { libc::readlink(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 || n as usize >= buf.len() {
        return None;
    }
    buf.truncate(n as usize);
    Some(PathBuf::from(OsStr::from_bytes(&buf)))
}

/// The trace file, written with raw system calls only.
#[derive(Debug)]
pub struct RawFile {
    fd: i32,
}

impl RawFile {
    /// Creates `path`; an existing file is an error (EEXIST), never overwritten: a process the
    /// traced one execs inherits the same variables, and must not destroy its parent's trace.
    pub fn create_new(path: &Path) -> Result<Self, String> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{}: a path with a NUL byte", path.display()))?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
        // SAFETY: c is a valid C string.
        let fd =
            unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c.as_ptr(), flags, 0o644) };
        if fd < 0 {
            return Err(format!(
                "cannot create the trace {}: {}",
                path.display(),
                std::io::Error::from_raw_os_error(errno())
            ));
        }
        Ok(RawFile { fd: fd as i32 })
    }
}

impl Sink for RawFile {
    fn append(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            // SAFETY: bytes is a valid buffer of bytes.len() bytes.
            let n = unsafe { libc::syscall(libc::SYS_write, self.fd, bytes.as_ptr(), bytes.len()) };
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                return false;
            }
            if n == 0 {
                return false;
            }
            bytes = &bytes[n as usize..];
        }
        true
    }
}

impl Drop for RawFile {
    fn drop(&mut self) {
        // SAFETY: our own descriptor.
        unsafe { libc::syscall(libc::SYS_close, self.fd) };
    }
}

/// Writes a message to standard error with a raw system call (never through the shim).
pub fn say(msg: &str) {
    let line = format!("flashdoc_shim: {msg}\n");
    // SAFETY: a valid buffer; a failed write to stderr is ignored.
    unsafe { libc::syscall(libc::SYS_write, 2, line.as_ptr(), line.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::io::AsRawFd;

    #[test]
    fn paths_resolve_against_directories_and_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let real = canonical(dir.path()).unwrap();
        std::fs::create_dir(real.join("sub")).unwrap();
        let d = std::fs::File::open(real.join("sub")).unwrap();
        let name = CString::new("../sub/x.wt").unwrap();
        assert_eq!(
            resolve_at(d.as_raw_fd(), &name).unwrap(),
            real.join("sub/x.wt")
        );
        let abs = CString::new(real.join("./sub/y").as_os_str().as_bytes()).unwrap();
        assert_eq!(
            resolve_at(libc::AT_FDCWD, &abs).unwrap(),
            real.join("sub/y")
        );
        assert_eq!(
            relative(&real, &real.join("sub/y")).as_deref(),
            Some("sub/y")
        );
        assert_eq!(relative(&real.join("sub"), &real.join("x")), None);
        assert_eq!(relative(&real, &real), None);
    }

    #[test]
    fn descriptors_name_their_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let real = canonical(dir.path()).unwrap();
        let f = std::fs::File::create(real.join("a.wt")).unwrap();
        let ((_, ino), path) = fd_file(f.as_raw_fd()).unwrap();
        assert_eq!(path, real.join("a.wt"));
        let name = CString::new(real.join("a.wt").as_os_str().as_bytes()).unwrap();
        assert_eq!(stat_at(libc::AT_FDCWD, &name).unwrap().0 .1, ino);
        assert_eq!(stat_at(libc::AT_FDCWD, &name).unwrap().1, 1);
        let d = std::fs::File::open(&real).unwrap();
        assert!(fd_file(d.as_raw_fd()).is_none());
    }

    #[test]
    fn the_trace_file_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let mut f = RawFile::create_new(&path).unwrap();
        assert!(f.append(b"abc"));
        assert!(RawFile::create_new(&path).unwrap_err().contains("exists"));
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    }
}
