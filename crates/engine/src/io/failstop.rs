//! The engine's sticky write-failed state (PostgreSQL's "fsyncgate" lesson).
//!
//! After a failed fsync the kernel may already have dropped the dirty pages it could not write
//! and marked them clean, so a later fsync of the same file returns success for data that never
//! reached the disk. A failed sync is therefore never retried: the first one — of the journal, a
//! table file, the metadata or a directory — is recorded here with its file, operation and
//! errno, and from then on the seam refuses every write and sync and the engine every write,
//! commit and checkpoint with that cause. Reads go on. A restart recovers from what was durable.
//!
//! ENOSPC from `fsync` is a failed sync like any other: it means writeback could not allocate
//! the blocks of data the kernel had already accepted (a thin-provisioned or network device, or
//! a delayed allocation), so that data is in the same state as after EIO. ENOSPC from a write,
//! an open or an allocation is different: nothing was accepted, and the caller may retry once
//! space is freed (`Error::is_disk_full`).

use parking_lot::Mutex;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The first failure that stopped the engine's writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFailure {
    /// What failed: `fsync`, `fdatasync`, `fsync directory`, or a journal operation.
    pub operation: String,
    pub path: PathBuf,
    /// The operating system's error number, if it came from one.
    pub errno: Option<i32>,
    /// The operating system's message.
    pub message: String,
}

impl WriteFailure {
    pub fn new(operation: &str, path: &Path, e: &std::io::Error) -> WriteFailure {
        WriteFailure {
            operation: operation.to_string(),
            path: path.to_path_buf(),
            errno: e.raw_os_error(),
            message: e.to_string(),
        }
    }

    /// The errno's symbolic name (`EIO`), or its number.
    pub fn errno_name(&self) -> String {
        match self.errno {
            Some(libc::EIO) => "EIO".into(),
            Some(libc::ENOSPC) => "ENOSPC".into(),
            Some(libc::EDQUOT) => "EDQUOT".into(),
            Some(libc::EROFS) => "EROFS".into(),
            Some(libc::EFBIG) => "EFBIG".into(),
            Some(libc::ENODEV) => "ENODEV".into(),
            Some(libc::ENXIO) => "ENXIO".into(),
            Some(n) => format!("errno {n}"),
            None => "no errno".into(),
        }
    }
}

impl fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} failed with {} ({})",
            self.operation,
            self.path.display(),
            self.errno_name(),
            self.message
        )
    }
}

/// The state itself: empty until the first failure, which is kept for good.
#[derive(Default)]
pub(super) struct FailStop {
    /// Set once `first` holds a failure: the write path's check is one load, no lock.
    stopped: AtomicBool,
    first: Mutex<Option<WriteFailure>>,
}

impl FailStop {
    /// Records `failure` unless one is recorded already. Returns the recorded one, and whether
    /// this call recorded it (the caller reports the state's start exactly once).
    pub(super) fn record(&self, failure: WriteFailure) -> (WriteFailure, bool) {
        let mut first = self.first.lock();
        match &*first {
            Some(kept) => (kept.clone(), false),
            None => {
                *first = Some(failure.clone());
                self.stopped.store(true, Ordering::Release);
                (failure, true)
            }
        }
    }

    pub(super) fn get(&self) -> Option<WriteFailure> {
        if !self.stopped.load(Ordering::Acquire) {
            return None;
        }
        self.first.lock().clone()
    }
}
