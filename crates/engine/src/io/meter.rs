//! The written-bytes meter: every announced write is counted here.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counts the bytes of every announced write (table files and journal) and wakes the
/// checkpoint server when the written-bytes trigger is reached: a checkpoint interval measured
/// in bytes, which keeps what one interval writes a fixed share of a device whatever the
/// machine's speed (`EngineConfig::checkpoint_written_bytes`).
pub struct WriteMeter {
    written: AtomicU64,
    /// The `written` count at which a checkpoint is due (`u64::MAX`: no byte trigger).
    due_at: AtomicU64,
    /// Set when the trigger fires (or on shutdown), cleared by the waiter.
    signalled: Mutex<bool>,
    cv: Condvar,
}

impl WriteMeter {
    pub(super) fn new() -> Self {
        WriteMeter {
            written: AtomicU64::new(0),
            due_at: AtomicU64::new(u64::MAX),
            signalled: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Bytes written since the engine opened.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    pub(super) fn add(&self, bytes: u64) {
        let before = self.written.fetch_add(bytes, Ordering::Relaxed);
        let due = self.due_at.load(Ordering::Relaxed);
        if before < due && before + bytes >= due {
            self.signal();
        }
    }

    /// Makes a checkpoint due once `written()` reaches `at` (`None`: never by bytes).
    pub fn arm(&self, at: Option<u64>) {
        self.due_at.store(at.unwrap_or(u64::MAX), Ordering::Relaxed);
        if at.is_some_and(|a| self.written() >= a) {
            self.signal();
        }
    }

    /// True once the armed count has been reached.
    pub fn due(&self) -> bool {
        self.written() >= self.due_at.load(Ordering::Relaxed)
    }

    /// Wakes a waiter now (shutdown, reconfiguration).
    pub fn signal(&self) {
        *self.signalled.lock() = true;
        self.cv.notify_all();
    }

    /// Waits until signalled or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        let mut s = self.signalled.lock();
        if !*s {
            self.cv.wait_for(&mut s, timeout);
        }
        *s = false;
    }
}
