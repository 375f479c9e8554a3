//! Snapshot reads without blocking writers: every batch gets the next sequence number; a
//! snapshot is a sequence number registered as live. While any snapshot is live, a write
//! keeps the value it replaces (the key's version before that batch) in memory; a read at a
//! snapshot takes the data files' newest value unless a batch after the snapshot changed the
//! key, in which case the oldest such kept version is the snapshot's. Versions no live
//! snapshot can need are dropped.
//!
//! The kept versions have a memory cap ([`History::over_cap`]): past it, the oldest live
//! snapshot is given up, as the copy-on-write engine rolls back its oldest snapshot when old
//! versions fill its cache. Its versions go, and every read at it, or at any snapshot older
//! than the oldest one kept, fails with `SnapshotTooOld` (239) rather than find a newer value.

use engine::{Error, Result, TableId};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

/// The least cap on the kept versions' memory, whatever the cache size.
pub const MIN_CAP: usize = 4 << 20;

/// The cap on the kept versions' memory for a cache of `cache_size` bytes: half of it (the
/// page pool's dirty budget is the other half), at least [`MIN_CAP`].
pub fn cap_for_cache(cache_size: u64) -> usize {
    usize::try_from(cache_size / 2)
        .unwrap_or(usize::MAX)
        .max(MIN_CAP)
}

/// Live snapshots: sequence number → how many.
pub type Live = Arc<Mutex<BTreeMap<u64, usize>>>;

/// A snapshot's state (held in `engine::Snapshot`); dropping the last clone unregisters it.
pub struct SnapState {
    pub seq: u64,
    /// The engine instance it belongs to.
    pub engine: usize,
    live: Live,
}

impl SnapState {
    pub fn register(live: &Live, seq: u64, engine: usize) -> SnapState {
        *live.lock().entry(seq).or_insert(0) += 1;
        SnapState {
            seq,
            engine,
            live: live.clone(),
        }
    }
}

impl Drop for SnapState {
    fn drop(&mut self) {
        let mut l = self.live.lock();
        let n = l.get_mut(&self.seq).expect("a live snapshot is registered");
        *n -= 1;
        if *n == 0 {
            l.remove(&self.seq);
        }
    }
}

/// A key's kept versions: (the batch that replaced it, the value before that batch), oldest
/// batch first.
type Chain = Vec<(u64, Option<Vec<u8>>)>;

/// The memory a kept version is charged beyond its key's and value's bytes (its chain entry,
/// its map node's share).
const VERSION_OVERHEAD: usize = 64;

/// What one kept version costs.
fn version_bytes(key: &[u8], old: Option<&Vec<u8>>) -> usize {
    key.len() + old.map_or(0, Vec::len) + VERSION_OVERHEAD
}

pub struct History {
    tables: HashMap<TableId, BTreeMap<Vec<u8>, Chain>>,
    kept: usize,
    /// The memory the kept versions take, as [`version_bytes`] counts it.
    bytes: usize,
    /// Past this many bytes the oldest live snapshot is given up.
    cap: usize,
    /// Snapshots older than this batch were given up: their versions may be gone.
    horizon: u64,
}

impl History {
    /// No versions, at most `cap` bytes of them.
    pub fn with_cap(cap: usize) -> History {
        History {
            tables: HashMap::new(),
            kept: 0,
            bytes: 0,
            cap,
            horizon: 0,
        }
    }

    /// Keeps `old`, the key's value before batch `seq`.
    pub fn keep(&mut self, table: TableId, key: &[u8], seq: u64, old: Option<Vec<u8>>) {
        let chain = self
            .tables
            .entry(table)
            .or_default()
            .entry(key.to_vec())
            .or_default();
        debug_assert!(chain.last().is_none_or(|l| l.0 <= seq));
        if chain.last().is_some_and(|l| l.0 == seq) {
            return; // The batch changed the key twice: its first old value is the one.
        }
        self.bytes += version_bytes(key, old.as_ref());
        chain.push((seq, old));
        self.kept += 1;
    }

    /// Drops what no snapshot at `oldest` or later needs (everything when `None`); nothing a
    /// snapshot older than the horizon needed is kept, since such a snapshot reads no more.
    pub fn prune(&mut self, oldest: Option<u64>) {
        let Some(oldest) = oldest else {
            self.tables.clear();
            self.kept = 0;
            self.bytes = 0;
            return;
        };
        let oldest = oldest.max(self.horizon);
        let (mut kept, mut bytes) = (0, 0);
        for t in self.tables.values_mut() {
            t.retain(|key, chain| {
                chain.retain(|(seq, _)| *seq > oldest);
                kept += chain.len();
                bytes += chain
                    .iter()
                    .map(|(_, v)| version_bytes(key, v.as_ref()))
                    .sum::<usize>();
                !chain.is_empty()
            });
        }
        self.tables.retain(|_, t| !t.is_empty());
        self.kept = kept;
        self.bytes = bytes;
    }

    /// Whether the kept versions take more than the cap.
    pub fn over_cap(&self) -> bool {
        self.bytes > self.cap
    }

    /// Gives up every snapshot older than `seq` (the caller's next oldest live one, or the
    /// newest batch) and drops the versions only they needed.
    pub fn give_up_before(&mut self, seq: u64) {
        assert!(
            seq >= self.horizon,
            "the snapshot horizon moves forward only ({} to {seq})",
            self.horizon
        );
        self.horizon = seq;
        self.prune(Some(seq));
    }

    /// Fails for a snapshot that was given up: a version it may need is gone.
    pub fn check_snapshot(&self, snap: u64) -> Result<()> {
        if snap < self.horizon {
            return Err(Error::SnapshotTooOld(format!(
                "the mmapv1 engine gave up the snapshot at batch {snap}: the versions kept for \
                 snapshots passed their cap of {} bytes (half the cache, at least {} MiB), and \
                 the oldest snapshots go first",
                self.cap,
                MIN_CAP >> 20
            )));
        }
        Ok(())
    }

    pub fn kept(&self) -> usize {
        self.kept
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The oldest snapshot still served.
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    pub fn drop_table(&mut self, table: TableId) {
        if let Some(t) = self.tables.remove(&table) {
            for (key, chain) in &t {
                self.kept -= chain.len();
                self.bytes -= chain
                    .iter()
                    .map(|(_, v)| version_bytes(key, v.as_ref()))
                    .sum::<usize>();
            }
        }
    }

    /// The key's value at snapshot `snap` if a later batch changed it: `Some(value)`;
    /// `None` when the newest value is the snapshot's.
    pub fn at(&self, table: TableId, key: &[u8], snap: u64) -> Option<Option<Vec<u8>>> {
        let chain = self.tables.get(&table)?.get(key)?;
        chain
            .iter()
            .find(|(seq, _)| *seq > snap)
            .map(|(_, v)| v.clone())
    }

    /// Keys with kept versions in (lo, hi), in order.
    pub fn keys_in(&self, table: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<Vec<u8>> {
        match self.tables.get(&table) {
            Some(t) => t
                .range::<[u8], _>((lo, hi))
                .map(|(k, _)| k.clone())
                .collect(),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_sees_the_value_before_the_first_later_change() {
        let mut h = History::with_cap(MIN_CAP);
        h.keep(1, b"k", 5, Some(b"v4".to_vec()));
        h.keep(1, b"k", 8, Some(b"v5".to_vec()));
        assert_eq!(h.at(1, b"k", 4), Some(Some(b"v4".to_vec())));
        assert_eq!(h.at(1, b"k", 6), Some(Some(b"v5".to_vec())));
        assert_eq!(h.at(1, b"k", 8), None);
        h.prune(Some(6));
        assert_eq!(h.kept(), 1);
        assert_eq!(h.at(1, b"k", 6), Some(Some(b"v5".to_vec())));
        h.prune(None);
        assert_eq!(h.kept(), 0);
    }

    #[test]
    fn a_given_up_snapshot_reads_no_more_and_its_versions_go() {
        let mut h = History::with_cap(1000);
        h.keep(1, b"k", 5, Some(vec![7; 600]));
        assert!(!h.over_cap());
        h.keep(1, b"k", 9, Some(vec![8; 600]));
        assert!(h.over_cap());
        // Snapshots before batch 9 are given up: both versions were only theirs.
        h.give_up_before(9);
        assert!(!h.over_cap());
        assert_eq!((h.kept(), h.bytes()), (0, 0));
        assert!(matches!(h.check_snapshot(4), Err(Error::SnapshotTooOld(_))));
        assert!(matches!(h.check_snapshot(8), Err(Error::SnapshotTooOld(_))));
        h.check_snapshot(9).unwrap();
        assert_eq!(h.at(1, b"k", 9), None);
        // A later prune for a live snapshot older than the horizon keeps nothing for it.
        h.keep(1, b"k", 12, Some(vec![9; 10]));
        h.prune(Some(4));
        assert_eq!(h.at(1, b"k", 10), Some(Some(vec![9; 10])));
        assert_eq!(h.kept(), 1);
        assert_eq!(h.bytes(), version_bytes(b"k", Some(&vec![9; 10])));
        h.drop_table(1);
        assert_eq!((h.kept(), h.bytes()), (0, 0));
    }

    #[test]
    #[should_panic(expected = "the snapshot horizon moves forward only")]
    fn the_horizon_never_moves_back() {
        let mut h = History::with_cap(1000);
        h.give_up_before(9);
        h.give_up_before(8);
    }

    #[test]
    fn the_cap_is_half_the_cache_at_least_the_floor() {
        assert_eq!(cap_for_cache(1 << 20), MIN_CAP);
        assert_eq!(cap_for_cache(1 << 30), 1 << 29);
    }

    #[test]
    fn snapshots_unregister_when_dropped() {
        let live = Live::default();
        let a = SnapState::register(&live, 3, 0);
        let b = SnapState::register(&live, 3, 0);
        assert_eq!(live.lock().get(&3), Some(&2));
        drop(a);
        drop(b);
        assert!(live.lock().is_empty());
    }
}
