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

pub use crate::error::WriteFailure;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

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
