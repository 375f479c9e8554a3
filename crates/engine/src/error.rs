//! The engine's error type. Every error names what failed (file, offset, table) in plain words.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("checksum mismatch in {file} at offset {offset} (size {size}): the block is corrupt")]
    Checksum {
        file: PathBuf,
        offset: u64,
        size: u64,
    },
    #[error("corrupt data in {file} at offset {offset}: {what}")]
    Corrupt {
        file: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("database directory {path} is locked by another process (lock file {lock})")]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("no such table: {0}")]
    NoSuchTable(String),
    #[error("table already exists: {0}")]
    TableExists(String),
    #[error("key too large: {len} bytes (the limit is {max})")]
    KeyTooLarge { len: usize, max: usize },
    #[error("the engine is shut down or has failed: {0}")]
    Closed(String),
    #[error("busy: {0}")]
    Busy(String),
    #[error("not supported by this storage engine: {0}")]
    Unsupported(String),
    /// A snapshot was discarded because the versions it pinned filled the cache (MongoDB's
    /// SnapshotTooOld, 239).
    #[error("snapshot too old: {0}")]
    SnapshotTooOld(String),
    /// A sync failed earlier: writes are refused until a restart (`io::failstop`).
    #[error(
        "writes are refused: {0}; after a failed sync the kernel may have dropped the data it \
         covered, so nothing more is acknowledged or retried; restart to recover from what is \
         durable"
    )]
    WriteFailed(WriteFailure),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// True for "no space left on device" and "file too large" (quota) errors of a write, an
    /// open or an allocation: recoverable once space is freed. Not for a failed sync, even with
    /// ENOSPC ([`Error::WriteFailed`]).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Io { source, .. } => matches!(
                source.raw_os_error(),
                Some(libc::ENOSPC) | Some(libc::EFBIG) | Some(libc::EDQUOT)
            ),
            _ => false,
        }
    }
}

/// Shorthand: `.ctx(|| format!("writing {path}"))` on an `io::Result`.
pub trait IoContext<T> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T> {
        self.map_err(|e| Error::io(f(), e))
    }
}

/// The first failure that stopped the engine's writes (`io::failstop` keeps it).
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
