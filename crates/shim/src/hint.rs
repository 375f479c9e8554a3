//! Serializing a file's write-life hint with its writes.
//!
//! Linux keeps the hint on the inode (`F_SET_RW_HINT`), and a direct-I/O write takes the
//! inode's hint when it submits its bios, inside the `pwrite` call. One file can take writes
//! of different streams (a region-based policy splits a collection file), from several threads
//! at once. So every file has a [`HintSlot`]: a writer *enters* it with the hint its write
//! needs, and leaves when its `pwrite` returned.
//! - Writers with the hint the inode has now enter together: same-stream writes stay parallel.
//! - A writer that needs another hint queues until the writers inside have left, sets the
//!   hint, and enters. While anyone queues, every arriving writer queues too, and the queue
//!   enters one writer at a time whenever the slot is empty: a hint change is never starved
//!   by a stream of same-hint writers.
//!
//! Hence, for every write, the inode's hint from the moment it entered until its `pwrite`
//! returned is the one its policy chose. The shim's test checks exactly that in an `strace`
//! log of a real WiredTiger.

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
pub struct HintSlot {
    state: Mutex<SlotState>,
    changed: Condvar,
}

#[derive(Default)]
struct SlotState {
    /// The hint the shim last set on the inode (None: not yet set by the shim).
    current: Option<u64>,
    /// Writers between `enter` and `leave`.
    inside: u32,
    /// Writers queued (to change the hint, or behind one that does).
    waiting: u32,
}

impl HintSlot {
    /// Waits until the inode's hint is `hint` (setting it with `set` when needed) and no
    /// writer with another hint is inside. `set` returns whether the kernel took the hint;
    /// when it refused, the write goes ahead anyway (hints are advice) and the slot forgets
    /// the hint so the next writer tries again.
    pub fn enter(&self, hint: u64, set: impl FnOnce(u64) -> bool) {
        let mut s = self.lock();
        if s.current == Some(hint) && s.waiting == 0 {
            s.inside += 1;
            return;
        }
        s.waiting += 1;
        while s.inside > 0 {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiting -= 1;
        if s.current != Some(hint) {
            s.current = set(hint).then_some(hint);
        }
        s.inside += 1;
    }

    pub fn leave(&self) {
        let mut s = self.lock();
        assert!(s.inside > 0, "leave without enter");
        s.inside -= 1;
        if s.inside == 0 && s.waiting > 0 {
            self.changed.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // A panic while holding this lock leaves plain counters: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn same_hint_writers_share_and_a_change_waits_for_them() {
        let slot = HintSlot::default();
        let mut sets = Vec::new();
        slot.enter(2, |h| {
            sets.push(h);
            true
        });
        slot.enter(2, |_| panic!("hint 2 is already set"));
        slot.leave();
        slot.leave();
        slot.enter(3, |h| {
            sets.push(h);
            true
        });
        slot.leave();
        assert_eq!(sets, vec![2, 3]);
        // A refused hint is tried again by the next writer.
        slot.enter(4, |_| false);
        slot.leave();
        let mut tried = false;
        slot.enter(4, |_| {
            tried = true;
            true
        });
        slot.leave();
        assert!(tried);
    }

    /// Many threads with different hints: while a writer is inside, the "inode" hint never
    /// differs from the one it entered with.
    #[test]
    fn the_hint_never_changes_under_a_writer() {
        let slot = Arc::new(HintSlot::default());
        let inode = Arc::new(AtomicU64::new(u64::MAX));
        let threads: Vec<_> = (0..6u64)
            .map(|t| {
                let (slot, inode) = (slot.clone(), inode.clone());
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let hint = (t + i / 7) % 3;
                        slot.enter(hint, |h| {
                            inode.store(h, Ordering::SeqCst);
                            true
                        });
                        for _ in 0..3 {
                            assert_eq!(inode.load(Ordering::SeqCst), hint);
                            std::thread::yield_now();
                        }
                        slot.leave();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
