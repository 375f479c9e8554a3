//! Snapshot reads without blocking writers: every batch gets the next sequence number; a
//! snapshot is a sequence number registered as live. While any snapshot is live, a write
//! keeps the value it replaces (the key's version before that batch) in memory; a read at a
//! snapshot takes the data files' newest value unless a batch after the snapshot changed the
//! key, in which case the oldest such kept version is the snapshot's. Versions no live
//! snapshot can need are dropped.

use engine::TableId;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

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

#[derive(Default)]
pub struct History {
    tables: HashMap<TableId, BTreeMap<Vec<u8>, Chain>>,
    kept: usize,
}

impl History {
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
        chain.push((seq, old));
        self.kept += 1;
    }

    /// Drops what no snapshot at `oldest` or later needs (everything when `None`).
    pub fn prune(&mut self, oldest: Option<u64>) {
        let Some(oldest) = oldest else {
            self.tables.clear();
            self.kept = 0;
            return;
        };
        let mut kept = 0;
        for t in self.tables.values_mut() {
            t.retain(|_, chain| {
                chain.retain(|(seq, _)| *seq > oldest);
                kept += chain.len();
                !chain.is_empty()
            });
        }
        self.tables.retain(|_, t| !t.is_empty());
        self.kept = kept;
    }

    pub fn kept(&self) -> usize {
        self.kept
    }

    pub fn drop_table(&mut self, table: TableId) {
        self.tables.remove(&table);
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
        let mut h = History::default();
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
