//! Commit numbers and snapshots (WiredTiger `src/txn`). Every write batch gets a commit
//! number when it is applied. A snapshot is the highest number at or below which every batch
//! has been applied in full; a read at a snapshot sees exactly those batches, in every table.
//! Pages keep the versions an open snapshot may still need (`leaf_page.rs`); `oldest` says
//! which those are. A snapshot that pins too much of the cache is invalidated, oldest first
//! (WiredTiger rolls back the oldest transaction when eviction is stuck on history): its
//! reads then fail with `Error::SnapshotTooOld` instead of the cache growing without bound.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The snapshot of reads that want each key's newest value.
pub const LATEST: u64 = u64::MAX;

#[derive(Default)]
pub struct Txns {
    state: Mutex<State>,
    /// `State::oldest`, republished under the lock at every change, so that the hot paths
    /// (every batch, every eviction candidate) read it without taking the lock.
    oldest: AtomicU64,
    /// `State::oldest_reader`, published the same way.
    oldest_reader: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The last commit number handed out.
    last: u64,
    /// Batches numbered but not yet applied in full.
    applying: BTreeSet<u64>,
    /// Open, valid snapshots by (commit number, serial), each with its invalidation flag.
    open: BTreeMap<(u64, u64), Arc<AtomicBool>>,
    serial: u64,
    /// The open checkpoint's cut: pinned like a snapshot, but never invalidated.
    cut: Option<u64>,
}

impl State {
    fn visible(&self) -> u64 {
        self.applying.first().map_or(self.last, |&first| first - 1)
    }
    fn oldest_reader(&self) -> u64 {
        let visible = self.visible();
        self.open
            .keys()
            .next()
            .map_or(visible, |&(csn, _)| csn.min(visible))
    }
    fn oldest(&self) -> u64 {
        let readers = self.oldest_reader();
        self.cut.map_or(readers, |cut| cut.min(readers))
    }
}

impl Txns {
    /// Numbers a batch about to be applied (its leaves latched, so per key the numbers follow
    /// the order the changes are applied in).
    pub fn begin_commit(&self) -> u64 {
        let mut st = self.state.lock();
        st.last += 1;
        let csn = st.last;
        st.applying.insert(csn);
        self.publish(&st);
        csn
    }

    /// Republishes `oldest` after a change of `st` (called under the lock, so publications
    /// are in the order of the changes).
    fn publish(&self, st: &State) {
        self.oldest.store(st.oldest(), Ordering::Release);
        self.oldest_reader
            .store(st.oldest_reader(), Ordering::Release);
    }

    /// The batch is applied in full: snapshots from now on see it.
    pub fn end_commit(&self, csn: u64) {
        let mut st = self.state.lock();
        let removed = st.applying.remove(&csn);
        assert!(removed, "commit {csn} ended twice or never began");
        self.publish(&st);
    }

    /// A snapshot of everything applied in full so far; it pins the versions it reads until
    /// it is dropped or invalidated.
    pub fn snapshot(self: &Arc<Self>) -> TxnSnapshot {
        let mut st = self.state.lock();
        let csn = st.visible();
        st.serial += 1;
        let key = (csn, st.serial);
        let invalid = Arc::new(AtomicBool::new(false));
        st.open.insert(key, invalid.clone());
        self.publish(&st);
        TxnSnapshot {
            key,
            invalid,
            txns: self.clone(),
        }
    }

    /// The oldest commit number a reader may read at: the oldest valid snapshot's, or what a
    /// snapshot opened now would read at (batches still being applied are not visible yet).
    /// A version newer than this may not be the one such a reader needs, so the version below
    /// it is kept beside it.
    pub fn oldest(&self) -> u64 {
        self.oldest.load(Ordering::Acquire)
    }

    /// [`Txns::oldest`] for a table the open checkpoint cut, if any, has written already: its
    /// pages need not keep what the cut reads.
    pub fn oldest_reader(&self) -> u64 {
        self.oldest_reader.load(Ordering::Acquire)
    }

    /// Invalidates the oldest valid snapshot (eviction found the cache full of versions only
    /// old snapshots need). Returns whether there was one older than the open checkpoint cut
    /// (which pins as much until the checkpoint ends, and is never invalidated).
    pub fn invalidate_oldest(&self) -> bool {
        let mut st = self.state.lock();
        let first = st.open.keys().next().map(|&(csn, _)| csn);
        if first.is_some_and(|csn| st.cut.is_some_and(|cut| cut <= csn)) {
            return false;
        }
        match st.open.pop_first() {
            Some((_, invalid)) => {
                invalid.store(true, Ordering::SeqCst);
                self.publish(&st);
                true
            }
            None => false,
        }
    }

    /// Opens a checkpoint's cut at the last commit number handed out, and returns it. Called
    /// where no batch can be numbered meanwhile (under the journal's append lock, or with
    /// writers shut out), so that every batch journaled before this point is at or below the
    /// cut and every later one above it. The versions the cut reads are kept until
    /// [`Txns::end_cut`]; batches at or below it may still be being applied
    /// ([`Txns::wait_applied`]).
    pub fn begin_cut(&self) -> u64 {
        let mut st = self.state.lock();
        assert!(st.cut.is_none(), "one checkpoint cut at a time");
        let cut = st.last;
        st.cut = Some(cut);
        self.publish(&st);
        cut
    }

    /// Waits until every batch numbered `csn` or below is applied in full. A batch numbered
    /// is applying under its leaves' latches without I/O, so this is short; the bound says a
    /// batch that never ends is a bug.
    pub fn wait_applied(&self, csn: u64) {
        for attempt in 0u32.. {
            if self.state.lock().visible() >= csn {
                return;
            }
            assert!(
                attempt < 1 << 20,
                "batch {} was numbered and never applied",
                csn
            );
            if attempt < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// The checkpoint's cut closes: its versions may go.
    pub fn end_cut(&self) {
        let mut st = self.state.lock();
        assert!(st.cut.take().is_some(), "no checkpoint cut was open");
        self.publish(&st);
    }

    /// The last commit number handed out.
    pub fn last(&self) -> u64 {
        self.state.lock().last
    }

    /// Commit numbers handed out, and open valid snapshots, for statistics.
    pub fn counts(&self) -> (u64, usize) {
        let st = self.state.lock();
        (st.last, st.open.len())
    }
}

/// An open snapshot of the disk engine: reads at `csn()`, and pins what they need until it is
/// dropped or invalidated.
pub struct TxnSnapshot {
    key: (u64, u64),
    invalid: Arc<AtomicBool>,
    txns: Arc<Txns>,
}

impl TxnSnapshot {
    pub fn csn(&self) -> u64 {
        self.key.0
    }

    /// Fails if the snapshot was invalidated. Checked after a read: versions are dropped only
    /// after an invalidation is published, so a read that passes this check afterwards read
    /// versions that were still there.
    pub fn check(&self) -> Result<()> {
        if self.invalid.load(Ordering::SeqCst) {
            return Err(Error::SnapshotTooOld(format!(
                "the snapshot at commit {} was discarded to free the cache",
                self.key.0
            )));
        }
        Ok(())
    }
}

impl Drop for TxnSnapshot {
    fn drop(&mut self) {
        let mut st = self.txns.state.lock();
        st.open.remove(&self.key);
        self.txns.publish(&st);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_sees_only_batches_applied_in_full() {
        let t = Arc::new(Txns::default());
        let a = t.begin_commit();
        let b = t.begin_commit();
        t.end_commit(b);
        assert_eq!(t.snapshot().csn(), a - 1, "batch a is still being applied");
        assert_eq!(t.oldest(), a - 1, "a's versions are not visible yet");
        t.end_commit(a);
        let s = t.snapshot();
        assert_eq!(s.csn(), b);
        assert_eq!(t.oldest(), b);
        let c = t.begin_commit();
        t.end_commit(c);
        assert_eq!(t.oldest(), b, "the open snapshot still reads at b");
        drop(s);
        assert_eq!(
            t.oldest(),
            c,
            "no snapshot open: the newest applied is the oldest needed"
        );
    }

    #[test]
    fn a_cut_pins_its_versions_and_outlives_invalidations() {
        let t = Arc::new(Txns::default());
        t.end_commit(t.begin_commit());
        let applying = t.begin_commit();
        let cut = t.begin_cut();
        assert_eq!(cut, applying, "the cut covers batches numbered before it");
        assert_eq!(
            t.oldest(),
            applying - 1,
            "the batch being applied is not visible"
        );
        t.end_commit(applying);
        t.wait_applied(cut);
        t.end_commit(t.begin_commit());
        assert_eq!(t.oldest(), cut, "the cut pins what it reads");
        assert!(
            !t.invalidate_oldest(),
            "a cut is not a snapshot to invalidate"
        );
        let newer = t.snapshot();
        assert!(
            !t.invalidate_oldest(),
            "a snapshot newer than the cut frees nothing the cut does not pin"
        );
        assert!(newer.check().is_ok());
        assert_eq!(t.oldest(), cut);
        assert_eq!(
            t.oldest_reader(),
            newer.csn(),
            "written tables ignore the cut"
        );
        drop(newer);
        t.end_cut();
        assert_eq!(t.oldest(), cut + 1);
    }

    #[test]
    fn invalidated_snapshots_fail_their_reads_and_stop_pinning() {
        let t = Arc::new(Txns::default());
        t.end_commit(t.begin_commit());
        let old = t.snapshot();
        t.end_commit(t.begin_commit());
        let new = t.snapshot();
        assert_eq!(t.oldest(), old.csn());
        assert!(t.invalidate_oldest());
        assert!(old.check().is_err());
        assert!(new.check().is_ok());
        assert_eq!(t.oldest(), new.csn());
        drop(old);
        let again = t.snapshot();
        assert!(
            again.check().is_ok(),
            "a snapshot opened after an invalidation is valid"
        );
        drop(new);
        drop(again);
        assert!(!t.invalidate_oldest());
    }
}
