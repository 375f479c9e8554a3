//! The engine the collections read through ([`TxnEngine`]): a transaction's reads are its
//! snapshot's entries merged with its own writes ([`Overlay`]).

use super::{current, Txn};
use engine::{
    CompactStats, Direction, KvCursor, KvEngine, KvPair, Reconfigure, Snapshot, TableConfig,
    TableId, WriteBatch, WriteOptions,
};
use std::ops::Bound;
use std::sync::Arc;

/// A key a transaction wrote, and its value (`None`: deleted).
pub(super) type OwnEntry = (Vec<u8>, Option<Vec<u8>>);

/// A snapshot's entries merged with a transaction's own writes, both in the scan's order; on
/// a key both have, the transaction's write wins, and a delete hides the key.
pub(super) struct Overlay {
    base: std::iter::Peekable<KvCursor>,
    own: std::iter::Peekable<std::vec::IntoIter<OwnEntry>>,
    direction: Direction,
}

impl Iterator for Overlay {
    type Item = engine::Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let own_first = match (self.base.peek(), self.own.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(Ok(_)), None) => false,
                (None, Some(_)) => true,
                (Some(Ok((b, _))), Some((o, _))) => {
                    let ord = match self.direction {
                        Direction::Forward => o.cmp(b),
                        Direction::Reverse => b.cmp(o),
                    };
                    if ord == std::cmp::Ordering::Equal {
                        self.base.next();
                    }
                    ord != std::cmp::Ordering::Greater
                }
            };
            if !own_first {
                return self.base.next();
            }
            match self.own.next() {
                Some((k, Some(v))) => return Some(Ok((k, v))),
                Some((_, None)) => continue,
                None => unreachable!("peeked"),
            }
        }
    }
}

impl Overlay {
    pub(super) fn new(base: KvCursor, own: Vec<OwnEntry>, direction: Direction) -> Overlay {
        Overlay {
            base: base.peekable(),
            own: own.into_iter().peekable(),
            direction,
        }
    }
}

/// A transaction's view as an engine snapshot: what a cursor planned inside the transaction
/// keeps reading through, on whatever thread its getMore runs.
struct TxnView(Arc<Txn>);

/// The engine the collections read through: a routed table's reads go through the
/// transaction of the thread's statement (or of the snapshot given); everything else, and
/// every write, goes to the engine beneath unchanged.
pub struct TxnEngine {
    base: Arc<dyn KvEngine>,
    /// Tables never read through a transaction (the catalog: DDL reads its newest state).
    unrouted: Vec<TableId>,
}

impl TxnEngine {
    pub fn new(base: Arc<dyn KvEngine>, unrouted: Vec<TableId>) -> TxnEngine {
        TxnEngine { base, unrouted }
    }

    fn txn_for(&self, table: TableId) -> Option<Arc<Txn>> {
        if self.unrouted.contains(&table) {
            return None;
        }
        current()
    }

    /// The transaction a snapshot is the view of, or the engine's own snapshot.
    fn view<'s>(&self, snap: &'s Snapshot) -> Result<&'s Arc<Txn>, &'s Snapshot> {
        snap.state::<TxnView>().map(|v| &v.0).map_err(|_| snap)
    }
}

impl KvEngine for TxnEngine {
    fn create_table(&self, name: &str, cfg: &TableConfig) -> engine::Result<TableId> {
        self.base.create_table(name, cfg)
    }
    fn drop_table(&self, name: &str) -> engine::Result<()> {
        self.base.drop_table(name)
    }
    fn table_id(&self, name: &str) -> Option<TableId> {
        self.base.table_id(name)
    }
    fn tables(&self) -> Vec<(String, TableId, TableConfig)> {
        self.base.tables()
    }
    fn get(&self, table: TableId, key: &[u8]) -> engine::Result<Option<Vec<u8>>> {
        match self.txn_for(table) {
            Some(t) => t.get(table, key),
            None => self.base.get(table, key),
        }
    }
    fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> engine::Result<()> {
        self.base.write(batch, opts)
    }
    fn snapshot(&self) -> engine::Result<Snapshot> {
        match current() {
            Some(t) => Ok(Snapshot::new(TxnView(t))),
            None => self.base.snapshot(),
        }
    }
    fn get_at(
        &self,
        snap: &Snapshot,
        table: TableId,
        key: &[u8],
    ) -> engine::Result<Option<Vec<u8>>> {
        match self.view(snap) {
            Ok(t) if !self.unrouted.contains(&table) => t.get(table, key),
            Ok(t) => self.base.get_at(&t.snapshot()?, table, key),
            Err(snap) => self.base.get_at(snap, table, key),
        }
    }
    fn scan_at(
        &self,
        snap: &Snapshot,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> engine::Result<KvCursor> {
        match self.view(snap) {
            Ok(t) if !self.unrouted.contains(&table) => t.scan(table, lower, upper, direction),
            Ok(t) => self
                .base
                .scan_at(&t.snapshot()?, table, lower, upper, direction),
            Err(snap) => self.base.scan_at(snap, table, lower, upper, direction),
        }
    }
    fn scan(
        &self,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> engine::Result<KvCursor> {
        match self.txn_for(table) {
            Some(t) => t.scan(table, lower, upper, direction),
            None => self.base.scan(table, lower, upper, direction),
        }
    }
    fn compact_table(&self, table: TableId) -> engine::Result<CompactStats> {
        self.base.compact_table(table)
    }
    fn estimate_compaction(&self, table: TableId) -> engine::Result<CompactStats> {
        self.base.estimate_compaction(table)
    }
    fn checkpoint(&self) -> engine::Result<()> {
        self.base.checkpoint()
    }
    fn sync(&self) -> engine::Result<()> {
        self.base.sync()
    }
    fn stats(&self) -> serde_json::Value {
        self.base.stats()
    }
    fn close(&self) -> engine::Result<()> {
        self.base.close()
    }
    fn write_failure(&self) -> Option<engine::io::WriteFailure> {
        self.base.write_failure()
    }
    fn verify_table(&self, table: TableId) -> engine::Result<u64> {
        self.base.verify_table(table)
    }
    fn reconfigure(&self, r: &Reconfigure) -> engine::Result<()> {
        self.base.reconfigure(r)
    }
    fn hint_path(&self) -> engine::io::hint_path::HintPath {
        self.base.hint_path()
    }
    fn end_of_load(&self) {
        self.base.end_of_load()
    }
    fn settle_background_io(&self) {
        self.base.settle_background_io()
    }
}
