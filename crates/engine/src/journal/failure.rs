//! How a journal flush fails: for good, or stalled on a full disk until space is freed.
//!
//! - **For good** (a failed fsync or fdatasync, or any failure that is not a full disk): the
//!   kernel may have dropped the pages it could not write, so no later sync may be trusted to
//!   cover them. The seam's fail-stop state holds the cause (`io::failstop`) and every append
//!   and wait gets [`Error::WriteFailed`].
//! - **Stalled** (ENOSPC, EDQUOT or EFBIG from a write, the creation of the next file or its
//!   preallocation): the kernel accepted nothing past the bytes already written, which are
//!   still in the page cache and will be written again with the same content. The records not
//!   yet written stay queued, in order; appends and waits are refused with the disk-full error
//!   while the flusher retries every commit interval; once a retry writes and syncs them, the
//!   journal goes on as before. A record whose wait was refused was not acknowledged, though a
//!   later retry may make it durable, as a write whose write concern failed may be.

use crate::error::Error;
use crate::io::{Io, WriteFailure};
use std::path::Path;

/// A flush stalled on a full disk: the error every append and wait gets until a retry works.
#[derive(Clone)]
pub(super) struct Stall {
    context: String,
    raw_os_error: Option<i32>,
    message: String,
}

impl Stall {
    /// The stall `e` causes, or `None` when `e` is not a full disk (the journal then fails
    /// for good).
    pub(super) fn of(e: &Error) -> Option<Stall> {
        match e {
            Error::Io { context, source } if e.is_disk_full() => Some(Stall {
                context: context.clone(),
                raw_os_error: source.raw_os_error(),
                message: source.to_string(),
            }),
            _ => None,
        }
    }

    pub(super) fn to_error(&self) -> Error {
        let source = match self.raw_os_error {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::other(self.message.clone()),
        };
        Error::io(
            format!(
                "{} (the disk is full: the journal refuses records until space is freed, and \
                 retries writing the records it holds every commit interval)",
                self.context
            ),
            source,
        )
    }
}

/// The cause that stops writes for a flush error that is not a full disk: the seam's own for a
/// failed sync, or `e` recorded as the cause (a failed journal write, EIO). Returns the cause.
pub(super) fn stop_for_good(io: &Io, dir: &Path, e: &Error) -> WriteFailure {
    let failure = match e {
        Error::WriteFailed(cause) => cause.clone(),
        Error::Io { context, source } => WriteFailure {
            operation: format!("the journal's write ({context})"),
            path: dir.to_path_buf(),
            errno: source.raw_os_error(),
            message: source.to_string(),
        },
        other => WriteFailure {
            operation: "the journal's flush".into(),
            path: dir.to_path_buf(),
            errno: None,
            message: other.to_string(),
        },
    };
    io.stop_writes(failure)
}
