//! The C library's symbols the shim defines (the variadic ones are in `variadic.c`), and the
//! shim's start-up. Each interposer calls the next definition of its symbol (the C library's,
//! `dlsym(RTLD_NEXT)`) exactly once with the caller's arguments, and returns its result with
//! its `errno`; the bookkeeping around the call never changes what the caller sees.
//!
//! - **Re-entry.** A thread-local flag marks a thread inside the shim: any interposed call the
//!   shim's own code makes (a panic message's `write`, say) passes straight through.
//! - **Failure.** The bookkeeping runs under `catch_unwind`; a panic there turns the shim off
//!   for the rest of the process (every call passes through) and says so once.
//! - **Fork.** A forked child passes every call through: it shares the parent's trace file
//!   descriptor and its copy of the state is stale. An exec'd program starts the shim afresh
//!   from the environment (`%p` in `FLASHDOC_SHIM_TRACE` gives it a trace of its own).

use crate::config::Config;
use crate::hint::HintSlot;
use crate::recorder::{Recorder, Sink};
use crate::sys;
use libc::{c_char, c_int, c_uint, c_void, iovec, mode_t, off_t, size_t, ssize_t};
use placement::FileId;
use std::cell::Cell;
use std::ffi::CStr;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

struct Shim {
    /// The database directory, resolved.
    dir: PathBuf,
    start_ns: u64,
    hints: bool,
    hint_refused: AtomicBool,
    trace_path: Option<PathBuf>,
    rec: Mutex<Recorder>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();
/// Set in a forked child and after an internal error: pass everything through.
static OFF: AtomicBool = AtomicBool::new(false);

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread as inside the shim until dropped.
struct Busy;

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|b| b.set(false));
    }
}

/// The shim, when it is on and this thread is not already inside it.
fn active() -> Option<(&'static Shim, Busy)> {
    if OFF.load(Ordering::Relaxed) {
        return None;
    }
    let shim = SHIM.get()?;
    if BUSY.with(|b| b.replace(true)) {
        return None;
    }
    Some((shim, Busy))
}

/// Runs bookkeeping; a panic turns the shim off instead of unwinding into the C caller.
fn guarded<R>(f: impl FnOnce() -> Option<R>) -> Option<R> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            if !OFF.swap(true, Ordering::Relaxed) {
                sys::say("internal error: the shim passes every call through from now on");
            }
            None
        }
    }
}

impl Shim {
    /// The recorder with the current time, read under its lock so that the trace's times
    /// never go backwards.
    fn with_rec<R>(&self, f: impl FnOnce(&mut Recorder, u64) -> R) -> R {
        let mut rec: MutexGuard<'_, Recorder> = self.rec.lock().unwrap_or_else(|e| e.into_inner());
        let now = sys::monotonic_ns().saturating_sub(self.start_ns);
        f(&mut rec, now)
    }

    fn relative(&self, abs: &Path) -> Option<String> {
        sys::relative(&self.dir, abs)
    }

    fn set_hint(&self, fd: c_int, hint: u64) -> bool {
        if self.hint_refused.load(Ordering::Relaxed) {
            return false;
        }
        if sys::set_rw_hint(fd, hint) {
            return true;
        }
        if !self.hint_refused.swap(true, Ordering::Relaxed) {
            sys::say(&format!(
                "the kernel refused a write-life hint (F_SET_RW_HINT): {}; writes go on without hints",
                std::io::Error::from_raw_os_error(sys::errno())
            ));
        }
        false
    }
}

// ---- start-up and exit ----

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    BUSY.with(|b| b.set(true));
    let started = std::panic::catch_unwind(start).unwrap_or_else(|_| Err("panicked".into()));
    BUSY.with(|b| b.set(false));
    if let Err(msg) = started {
        sys::say(&msg);
        // A setting the shim cannot honour is refused, never ignored.
        // SAFETY: ends the process without running anything of the program.
        unsafe { libc::_exit(2) };
    }
}

fn start() -> Result<(), String> {
    // Only the shim's own variables must be UTF-8.
    let vars = std::env::vars_os().filter_map(|(k, v)| {
        let k = k.into_string().ok()?;
        let v = match v.into_string() {
            Ok(v) => v,
            Err(_) if k.starts_with(crate::config::PREFIX) => "\u{fffd}".into(),
            Err(_) => return None,
        };
        Some((k, v))
    });
    let Some(cfg) = Config::from_vars(vars)? else {
        return Ok(());
    };
    let dir = sys::canonical(Path::new(&cfg.dir))
        .ok_or_else(|| format!("FLASHDOC_SHIM_DIR={}: no such directory", cfg.dir))?;
    let trace_path = cfg
        .trace
        .as_ref()
        .map(|p| PathBuf::from(p.replace("%p", &std::process::id().to_string())));
    let sink: Option<Box<dyn Sink>> = match &trace_path {
        None => None,
        Some(p) => match sys::RawFile::create_new(p) {
            Ok(f) => Some(Box::new(f)),
            Err(_) if sys::errno() == libc::EEXIST => {
                sys::say(&format!(
                    "{} exists: this process (pid {}) is neither traced nor hinted; put %p in \
                     FLASHDOC_SHIM_TRACE for a trace per process",
                    p.display(),
                    std::process::id()
                ));
                return Ok(());
            }
            Err(e) => return Err(e),
        },
    };
    let rec = Recorder::new(&cfg, sink)?;
    if rec.trace_failed() {
        return Err("cannot write the trace header".into());
    }
    let shim = Shim {
        dir,
        start_ns: sys::monotonic_ns(),
        hints: rec.has_policy(),
        hint_refused: AtomicBool::new(false),
        trace_path,
        rec: Mutex::new(rec),
    };
    if SHIM.set(shim).is_err() {
        return Err("started twice".into());
    }
    // SAFETY: plain function pointers that live as long as the process.
    unsafe {
        libc::pthread_atfork(None, None, Some(in_forked_child));
        libc::atexit(at_exit);
    }
    Ok(())
}

extern "C" fn in_forked_child() {
    OFF.store(true, Ordering::Relaxed);
}

extern "C" fn at_exit() {
    let Some((shim, _busy)) = active() else {
        return;
    };
    guarded(|| {
        shim.with_rec(|r, _| {
            r.flush_for_exit();
            if let Some(p) = &shim.trace_path {
                let s = &r.stats;
                sys::say(&format!(
                    "{} writes ({} bytes) to {} files, {} checkpoints{}: {}",
                    s.writes,
                    s.bytes,
                    s.files,
                    s.checkpoints,
                    if r.trace_failed() {
                        "; THE TRACE IS INCOMPLETE (a write to it failed)"
                    } else {
                        ""
                    },
                    p.display()
                ));
            }
        });
        Some(())
    });
}

// ---- the next definition of a symbol ----

macro_rules! next {
    ($name:literal as $ty:ty) => {{
        static SLOT: AtomicUsize = AtomicUsize::new(0);
        let mut p = SLOT.load(Ordering::Acquire);
        if p == 0 {
            // SAFETY: a NUL-terminated symbol name.
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) }
                as usize;
            SLOT.store(p, Ordering::Release);
        }
        // SAFETY: the C library's symbol of this name has this type.
        (p != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(p) })
    }};
}

fn enosys<T: From<i8>>() -> T {
    sys::set_errno(libc::ENOSYS);
    T::from(-1)
}

// ---- hooks the C part calls ----

/// A descriptor was opened (`variadic.c`: open, openat and kin; `creat` below).
#[no_mangle]
pub extern "C" fn flashdoc_shim_opened(fd: c_int, flags: c_int) {
    let Some((shim, _busy)) = active() else {
        return;
    };
    guarded(|| {
        let file = sys::fd_file(fd).and_then(|(inode, abs)| Some((inode, shim.relative(&abs)?)));
        let truncated = flags & libc::O_TRUNC != 0;
        shim.with_rec(|r, now| r.opened(fd, file, truncated, now));
        Some(())
    });
}

/// `fcntl(F_DUPFD*)` made `new` a copy of `old`.
#[no_mangle]
pub extern "C" fn flashdoc_shim_duped(old: c_int, new: c_int) {
    if let Some((shim, _busy)) = active() {
        guarded(|| {
            shim.with_rec(|r, _| r.duped(old, new));
            Some(())
        });
    }
}

extern "C" {
    fn flashdoc_shim_c_anchor();
}

/// Keeps `variadic.c` in the library (nothing else references its object).
#[used]
static C_PART: unsafe extern "C" fn() = flashdoc_shim_c_anchor;

// ---- writes ----

/// What was decided before a followed write.
struct Planned {
    file: FileId,
    stream: u8,
    slot: Option<Arc<HintSlot>>,
}

/// A write of `len` bytes at `offset` (None: the file position) through `call`.
fn write_call(fd: c_int, len: u64, offset: Option<u64>, call: impl FnOnce() -> ssize_t) -> ssize_t {
    let Some((shim, _busy)) = active() else {
        return call();
    };
    let planned = guarded(|| {
        let (file, placed) = shim.with_rec(|r, _| {
            let file = r.file_of(fd)?;
            let placed = if shim.hints {
                offset
                    .or_else(|| sys::position(fd))
                    .and_then(|at| r.place(file, at, len))
            } else {
                None
            };
            Some((file, placed))
        })?;
        let (stream, slot) = match placed {
            Some((stream, slot)) => {
                slot.enter(stream as u64, |hint| shim.set_hint(fd, hint));
                (stream, Some(slot))
            }
            None => (0, None),
        };
        Some(Planned { file, stream, slot })
    });
    let ret = call();
    let err = sys::errno();
    if let Some(p) = planned {
        guarded(|| {
            if let Some(slot) = &p.slot {
                slot.leave();
            }
            if ret > 0 {
                let n = ret as u64;
                let at = offset.or_else(|| sys::position(fd).map(|pos| pos.saturating_sub(n)))?;
                shim.with_rec(|r, now| r.wrote(p.file, at, n, p.stream, now));
            }
            Some(())
        });
    }
    sys::set_errno(err);
    ret
}

/// The bytes an iovec array describes; None for a count the kernel refuses anyway.
///
/// # Safety
/// `iov` points to `cnt` iovecs when `cnt` is in range.
unsafe fn iov_len(iov: *const iovec, cnt: c_int) -> Option<u64> {
    if iov.is_null() || !(0..=libc::UIO_MAXIOV).contains(&cnt) {
        return None;
    }
    // SAFETY: the caller's array of cnt iovecs.
    let v = unsafe { std::slice::from_raw_parts(iov, cnt as usize) };
    Some(v.iter().map(|i| i.iov_len as u64).sum())
}

/// A positioned write's offset, or None for `pwritev2`'s "the file position" (-1).
fn at(off: off_t) -> Option<u64> {
    (off >= 0).then_some(off as u64)
}

/// `write(2)`, recorded.
///
/// # Safety
/// As for the C library's `write`: `buf` points to `n` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    let Some(real) =
        next!("write" as unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t)
    else {
        return enosys();
    };
    // SAFETY: the C library's `write` with the caller's buffer of n bytes (`# Safety`).
    write_call(fd, n as u64, None, || unsafe { real(fd, buf, n) })
}

macro_rules! pwrite_like {
    ($sym:ident, $name:literal) => {
        /// `pwrite(2)`, recorded.
        ///
        /// # Safety
        /// As for the C library's `pwrite`: `buf` points to `n` readable bytes.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            fd: c_int,
            buf: *const c_void,
            n: size_t,
            off: off_t,
        ) -> ssize_t {
            type F = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
            let Some(real) = next!($name as F) else {
                return enosys();
            };
            if off < 0 {
                // SAFETY: the C library's call with the caller's buffer of n bytes (`# Safety`).
                return unsafe { real(fd, buf, n, off) }; // EINVAL, from the kernel
            }
            // SAFETY: the C library's call with the caller's buffer of n bytes (`# Safety`).
            write_call(fd, n as u64, at(off), || unsafe { real(fd, buf, n, off) })
        }
    };
}
pwrite_like!(pwrite, "pwrite");
pwrite_like!(pwrite64, "pwrite64");

/// `writev(2)`, recorded.
///
/// # Safety
/// As for the C library's `writev`: `iov` points to `cnt` iovecs, each of readable bytes.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let Some(real) = next!("writev" as unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t)
    else {
        return enosys();
    };
    // SAFETY: iov points to cnt iovecs when cnt is in range (`# Safety`), as iov_len needs;
    // `real` is the C library's `writev`, given the caller's iovecs.
    match unsafe { iov_len(iov, cnt) } {
        Some(len) => write_call(fd, len, None, || unsafe { real(fd, iov, cnt) }),
        None => unsafe { real(fd, iov, cnt) },
    }
}

macro_rules! pwritev_like {
    ($sym:ident, $name:literal) => {
        /// `pwritev(2)`, recorded.
        ///
        /// # Safety
        /// As for the C library's `pwritev`: `iov` points to `cnt` iovecs of readable bytes.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            fd: c_int,
            iov: *const iovec,
            cnt: c_int,
            off: off_t,
        ) -> ssize_t {
            type F = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
            let Some(real) = next!($name as F) else {
                return enosys();
            };
            // SAFETY: iov points to cnt iovecs when cnt is in range (`# Safety`).
            match unsafe { iov_len(iov, cnt) } {
                Some(len) if off >= 0 => {
                    // SAFETY: the C library's call with the caller's iovecs (`# Safety`).
                    write_call(fd, len, at(off), || unsafe { real(fd, iov, cnt, off) })
                }
                // SAFETY: the C library's call with the caller's iovecs (`# Safety`).
                _ => unsafe { real(fd, iov, cnt, off) },
            }
        }
    };
}
pwritev_like!(pwritev, "pwritev");
pwritev_like!(pwritev64, "pwritev64");

macro_rules! pwritev2_like {
    ($sym:ident, $name:literal) => {
        /// `pwritev2(2)`, recorded.
        ///
        /// # Safety
        /// As for the C library's `pwritev2`: `iov` points to `cnt` iovecs of readable bytes.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            fd: c_int,
            iov: *const iovec,
            cnt: c_int,
            off: off_t,
            flags: c_int,
        ) -> ssize_t {
            type F = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
            let Some(real) = next!($name as F) else {
                return enosys();
            };
            // RWF_APPEND writes at the end whatever the offset: its place is not known before.
            // SAFETY: iov points to cnt iovecs when cnt is in range (`# Safety`).
            match unsafe { iov_len(iov, cnt) } {
                Some(len) if off >= -1 && flags & libc::RWF_APPEND == 0 => {
                    // SAFETY: the C library's call with the caller's iovecs (`# Safety`).
                    write_call(fd, len, at(off), || unsafe {
                        real(fd, iov, cnt, off, flags)
                    })
                }
                // SAFETY: the C library's call with the caller's iovecs (`# Safety`).
                _ => unsafe { real(fd, iov, cnt, off, flags) },
            }
        }
    };
}
pwritev2_like!(pwritev2, "pwritev2");
pwritev2_like!(pwritev64v2, "pwritev64v2");

// ---- syncs, descriptors, names, sizes ----

macro_rules! sync_like {
    ($sym:ident, $name:literal) => {
        /// `fsync(2)` or `fdatasync(2)`, recorded.
        ///
        /// # Safety
        /// None beyond the C library's: the call takes a descriptor only.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int) -> c_int {
            let Some(real) = next!($name as unsafe extern "C" fn(c_int) -> c_int) else {
                return enosys();
            };
            // SAFETY: the C library's sync of a descriptor: no memory is passed.
            after_success(
                fd,
                || unsafe { real(fd) },
                |r, file, now| r.synced(file, now),
            )
        }
    };
}
sync_like!(fsync, "fsync");
sync_like!(fdatasync, "fdatasync");

/// `close(2)`, recorded.
///
/// # Safety
/// None beyond the C library's: the call takes a descriptor only.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let Some(real) = next!("close" as unsafe extern "C" fn(c_int) -> c_int) else {
        return enosys();
    };
    // Forget the descriptor first: once closed, its number can come back from another
    // thread's open before this one could.
    if let Some((shim, _busy)) = active() {
        guarded(|| {
            shim.with_rec(|r, _| r.closed(fd));
            Some(())
        });
    }
    // SAFETY: the C library's close of a descriptor: no memory is passed.
    unsafe { real(fd) }
}

fn dup_call(old: c_int, call: impl FnOnce() -> c_int) -> c_int {
    let ret = call();
    if ret >= 0 {
        let err = sys::errno();
        flashdoc_shim_duped(old, ret);
        sys::set_errno(err);
    }
    ret
}

/// `dup(2)`, recorded.
///
/// # Safety
/// None beyond the C library's: the call takes descriptors only.
#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    let Some(real) = next!("dup" as unsafe extern "C" fn(c_int) -> c_int) else {
        return enosys();
    };
    // SAFETY: the C library's dup of descriptors: no memory is passed.
    dup_call(old, || unsafe { real(old) })
}

/// `dup2(2)`, recorded.
///
/// # Safety
/// None beyond the C library's: the call takes descriptors only.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let Some(real) = next!("dup2" as unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return enosys();
    };
    // SAFETY: the C library's dup2 of descriptors: no memory is passed.
    dup_call(old, || unsafe { real(old, new) })
}

/// `dup3(2)`, recorded.
///
/// # Safety
/// None beyond the C library's: the call takes descriptors only.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let Some(real) = next!("dup3" as unsafe extern "C" fn(c_int, c_int, c_int) -> c_int) else {
        return enosys();
    };
    // SAFETY: the C library's dup3 of descriptors: no memory is passed.
    dup_call(old, || unsafe { real(old, new, flags) })
}

macro_rules! creat_like {
    ($sym:ident, $name:literal) => {
        /// `creat(2)`, recorded.
        ///
        /// # Safety
        /// As for the C library's `creat`: `path` is a C string.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(path: *const c_char, mode: mode_t) -> c_int {
            let Some(real) = next!($name as unsafe extern "C" fn(*const c_char, mode_t) -> c_int)
            else {
                return enosys();
            };
            // SAFETY: the C library's call with the caller's C string (`# Safety`).
            let fd = unsafe { real(path, mode) };
            if fd >= 0 {
                let err = sys::errno();
                flashdoc_shim_opened(fd, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC);
                sys::set_errno(err);
            }
            fd
        }
    };
}
creat_like!(creat, "creat");
creat_like!(creat64, "creat64");

/// # Safety
/// `p` is NULL or a C string.
unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a CStr> {
    // SAFETY: p is not NULL (checked), so a C string, as the caller promises (`# Safety`).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// rename, renameat, renameat2.
///
/// # Safety
/// `old` and `new` are NULL or C strings.
unsafe fn rename_call(
    old_dir: c_int,
    old: *const c_char,
    new_dir: c_int,
    new: *const c_char,
    flags: c_uint,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let Some((shim, _busy)) = active() else {
        return call();
    };
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    // SAFETY: old and new are NULL or C strings, as the caller promises (`# Safety`).
    let (old, new) = unsafe { (cstr(old), cstr(new)) };
    // Under the recorder's lock from the stats to the record (see `unlink_call`): a rename
    // over a file frees the replaced inode, whose number a file another thread creates may
    // take at once.
    shim.with_rec(|r, now| {
        let before = guarded(|| {
            let (old, new) = (old?, new?);
            let source = sys::stat_at(old_dir, old).map(|s| s.0);
            let target = sys::stat_at(new_dir, new).map(|s| s.0);
            let dest = sys::resolve_at(new_dir, new).and_then(|p| shim.relative(&p));
            let src = if exchange {
                sys::resolve_at(old_dir, old).and_then(|p| shim.relative(&p))
            } else {
                None
            };
            Some((source, target, dest, src))
        });
        let ret = call();
        if ret == 0 {
            let err = sys::errno();
            if let Some((source, target, dest, src)) = before {
                guarded(|| {
                    if exchange {
                        r.renamed(source, None, dest, now);
                        r.renamed(target, None, src, now);
                    } else {
                        r.renamed(source, target, dest, now);
                    }
                    Some(())
                });
            }
            sys::set_errno(err);
        }
        ret
    })
}

/// `rename(2)`, recorded.
///
/// # Safety
/// As for the C library's `rename`: `old` and `new` are C strings.
#[no_mangle]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    type F = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    let Some(real) = next!("rename" as F) else {
        return enosys();
    };
    // SAFETY: old and new are C strings (`# Safety`), as rename_call and the C library need.
    unsafe {
        rename_call(libc::AT_FDCWD, old, libc::AT_FDCWD, new, 0, || {
            real(old, new)
        })
    }
}

/// `renameat(2)`, recorded.
///
/// # Safety
/// As for the C library's `renameat`: `old` and `new` are C strings.
#[no_mangle]
pub unsafe extern "C" fn renameat(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
) -> c_int {
    type F = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
    let Some(real) = next!("renameat" as F) else {
        return enosys();
    };
    // SAFETY: old and new are C strings (`# Safety`), as rename_call and the C library need.
    unsafe { rename_call(od, old, nd, new, 0, || real(od, old, nd, new)) }
}

/// `renameat2(2)`, recorded.
///
/// # Safety
/// As for the C library's `renameat2`: `old` and `new` are C strings.
#[no_mangle]
pub unsafe extern "C" fn renameat2(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    flags: c_uint,
) -> c_int {
    type F = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;
    let Some(real) = next!("renameat2" as F) else {
        return enosys();
    };
    // SAFETY: old and new are C strings (`# Safety`), as rename_call and the C library need.
    unsafe { rename_call(od, old, nd, new, flags, || real(od, old, nd, new, flags)) }
}

/// unlink, unlinkat (not with AT_REMOVEDIR: directories are not files here).
///
/// # Safety
/// `path` is NULL or a C string.
unsafe fn unlink_call(
    dir: c_int,
    path: *const c_char,
    flags: c_int,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let Some((shim, _busy)) = active().filter(|_| flags & libc::AT_REMOVEDIR == 0) else {
        return call();
    };
    // SAFETY: path is NULL or a C string, as the caller promises (`# Safety`).
    let path = unsafe { cstr(path) };
    // The stat, the unlink and its record happen under the recorder's lock. Once the unlink
    // has freed the inode, another thread may create a file that gets the same number (WiredTiger
    // removes an old log file while its log server creates the next one). That open must be
    // recorded after this removal: recorded before it, the new file would be taken for the
    // old one, and this removal would then remove it from the trace.
    shim.with_rec(|r, now| {
        let before = guarded(|| sys::stat_at(dir, path?));
        let ret = call();
        if ret == 0 {
            let err = sys::errno();
            if let Some((inode, links)) = before {
                guarded(|| {
                    r.unlinked(inode, links == 1, now);
                    Some(())
                });
            }
            sys::set_errno(err);
        }
        ret
    })
}

/// `unlink(2)`, recorded.
///
/// # Safety
/// As for the C library's `unlink`: `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    let Some(real) = next!("unlink" as unsafe extern "C" fn(*const c_char) -> c_int) else {
        return enosys();
    };
    // SAFETY: path is a C string (`# Safety`), as unlink_call and the C library need.
    unsafe { unlink_call(libc::AT_FDCWD, path, 0, || real(path)) }
}

/// `unlinkat(2)`, recorded.
///
/// # Safety
/// As for the C library's `unlinkat`: `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn unlinkat(dir: c_int, path: *const c_char, flags: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    let Some(real) = next!("unlinkat" as F) else {
        return enosys();
    };
    // SAFETY: path is a C string (`# Safety`), as unlink_call and the C library need.
    unsafe { unlink_call(dir, path, flags, || real(dir, path, flags)) }
}

/// A call on a followed descriptor whose success the recorder notes afterwards.
fn after_success(
    fd: c_int,
    call: impl FnOnce() -> c_int,
    note: impl FnOnce(&mut Recorder, FileId, u64),
) -> c_int {
    let ret = call();
    if ret == 0 {
        let err = sys::errno();
        if let Some((shim, _busy)) = active() {
            guarded(|| {
                shim.with_rec(|r, now| {
                    let file = r.file_of(fd)?;
                    note(r, file, now);
                    Some(())
                })
            });
        }
        sys::set_errno(err);
    }
    ret
}

macro_rules! ftruncate_like {
    ($sym:ident, $name:literal) => {
        /// `ftruncate(2)`, recorded.
        ///
        /// # Safety
        /// None beyond the C library's: the call takes a descriptor and a length only.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, len: off_t) -> c_int {
            let Some(real) = next!($name as unsafe extern "C" fn(c_int, off_t) -> c_int) else {
                return enosys();
            };
            // SAFETY: the C library's truncation of a descriptor: no memory is passed.
            after_success(
                fd,
                || unsafe { real(fd, len) },
                |r, file, now| r.truncated(file, len as u64, now),
            )
        }
    };
}
ftruncate_like!(ftruncate, "ftruncate");
ftruncate_like!(ftruncate64, "ftruncate64");

macro_rules! fallocate_like {
    ($sym:ident, $name:literal) => {
        /// `fallocate(2)`: only a punched hole is an event (`Free`), as an allocation writes
        /// nothing to the device.
        ///
        /// # Safety
        /// None beyond the C library's: the call takes a descriptor and numbers only.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
            type F = unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int;
            let Some(real) = next!($name as F) else {
                return enosys();
            };
            if mode & libc::FALLOC_FL_PUNCH_HOLE == 0 {
                // SAFETY: the C library's fallocate of a descriptor: no memory is passed.
                return unsafe { real(fd, mode, off, len) };
            }
            // SAFETY: the C library's fallocate of a descriptor: no memory is passed.
            after_success(
                fd,
                || unsafe { real(fd, mode, off, len) },
                |r, file, now| r.punched(file, off as u64, len as u64, now),
            )
        }
    };
}
fallocate_like!(fallocate, "fallocate");
fallocate_like!(fallocate64, "fallocate64");
