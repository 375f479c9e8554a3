//! Multi-document transactions over the engine's snapshots (mongod's multi-statement
//! transactions on WiredTiger; docs/replication.md, "Transactions").
//!
//! A [`Txn`] holds one engine snapshot, taken when it begins (mongod's read timestamp), and a
//! private write set: every engine write its statements make — records and index entries, the
//! batch each document write would have applied — is kept there instead. Its statements run
//! the ordinary code paths (planner, index maintenance, unique checks, update operators)
//! inside [`with_txn`]: the collections' engine is a [`TxnEngine`], which reads a routed table
//! through the transaction on this thread (its own writes over its snapshot, deletes hiding),
//! and the document write primitive stages its batch into the transaction
//! (`Coll::write_doc`).
//!
//! Snapshot isolation, first writer wins (as WiredTiger): a transaction's first write to a key
//! fails at once with WriteConflict (112, labelled TransientTransactionError) and aborts it
//! when another open transaction holds the key (the lock table) or when the key's newest value
//! differs from its snapshot's (a writer committed it since). A plain write to a key an open
//! transaction holds fails the same way, at once, rather than waiting: it would wait holding
//! the document's lock stripe, which the transaction's own next statement may need. Commit
//! shuts plain writes out (the gate), checks every key again and applies the write set, with
//! one `applyOps` oplog entry, in one engine batch.

use crate::oplog::{OpRecord, Oplog};
use crate::storage_error;
use bson::{doc, Document};
use engine::{Direction, KvCursor, KvEngine, Snapshot, TableId, WriteBatch, WriteOptions};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use query::error::{DocError, DocResult};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

mod engine_view;
#[cfg(test)]
mod tests;

use engine_view::Overlay;
pub use engine_view::TxnEngine;

/// mongod's `transactionLifetimeLimitSeconds` default.
pub const DEFAULT_LIFETIME_SECS: u64 = 60;
/// mongod's error label for an error after which the whole transaction may be retried.
pub const TRANSIENT_LABEL: &str = "TransientTransactionError";

/// WriteConflict (112), labelled TransientTransactionError, as mongod answers a statement of a
/// transaction that lost a write race.
pub fn write_conflict(message: impl Into<String>) -> DocError {
    labelled(DocError::with_code(112, "WriteConflict", message))
}

/// NoSuchTransaction (251), labelled TransientTransactionError: the transaction was aborted
/// (or never began) and a statement or a commit names it.
pub fn no_such_transaction(message: impl Into<String>) -> DocError {
    labelled(DocError::with_code(251, "NoSuchTransaction", message))
}

/// OperationNotSupportedInTransaction (263).
pub fn not_in_transaction(message: impl Into<String>) -> DocError {
    DocError::with_code(263, "OperationNotSupportedInTransaction", message)
}

fn labelled(mut e: DocError) -> DocError {
    let extra = e.extra.get_or_insert_with(Box::default);
    extra.insert("errorLabels", vec![TRANSIENT_LABEL]);
    e
}

/// Where a transaction is.
#[derive(Clone, Debug, PartialEq)]
pub enum TxnState {
    Open,
    Committed,
    /// Aborted, and why (the abort command's, a conflict's, the lifetime limit's, a
    /// stepdown's).
    Aborted(String),
}

/// A write set's key: (table, engine key).
type WriteKey = (TableId, Vec<u8>);

/// A document count's totals (`Coll::counts`), shared so a commit can bring them up to date.
pub(crate) type SharedCounts = Arc<Mutex<Option<(i64, i64)>>>;

/// The session a transaction belongs to, as its oplog entry names it.
#[derive(Clone, Debug, PartialEq)]
pub struct TxnSession {
    pub lsid: Document,
    pub txn_number: i64,
}

/// Every open transaction of a database: the key lock table, the commit gate, the limit.
pub struct Txns {
    base: Arc<dyn KvEngine>,
    /// Plain document writes hold it shared from their lock check to their engine write; a
    /// commit holds it exclusively from its recheck to its engine write, so no plain write
    /// lands between the two. Taken before the oplog's tail lock, always.
    gate: RwLock<()>,
    /// Which open transaction holds each key it has written.
    locks: Mutex<HashMap<WriteKey, (u64, Weak<Txn>)>>,
    /// `locks.len()`, read without the lock by plain writes when no key is held.
    held: AtomicUsize,
    open: Mutex<HashMap<u64, Weak<Txn>>>,
    next_id: AtomicU64,
    lifetime_secs: AtomicU64,
}

impl Txns {
    pub fn new(base: Arc<dyn KvEngine>) -> Arc<Txns> {
        Arc::new(Txns {
            base,
            gate: RwLock::new(()),
            locks: Mutex::default(),
            held: AtomicUsize::new(0),
            open: Mutex::default(),
            next_id: AtomicU64::new(1),
            lifetime_secs: AtomicU64::new(DEFAULT_LIFETIME_SECS),
        })
    }

    /// Begins a transaction: its snapshot is taken now.
    pub fn begin(self: &Arc<Self>, session: Option<TxnSession>) -> DocResult<Arc<Txn>> {
        let snap = self.base.snapshot().map_err(storage_error)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let txn = Arc::new(Txn {
            id,
            txns: self.clone(),
            snap: Mutex::new(Some(snap)),
            session,
            deadline: started + Duration::from_secs(self.lifetime_secs.load(Ordering::Relaxed)),
            inner: Mutex::new(TxnInner::default()),
        });
        self.open.lock().insert(id, Arc::downgrade(&txn));
        Ok(txn)
    }

    /// `transactionLifetimeLimitSeconds`: transactions begun from now on are aborted once they
    /// outlive it.
    pub fn set_lifetime_limit(&self, secs: u64) -> DocResult<()> {
        if secs == 0 {
            return Err(DocError::bad_value(
                "transactionLifetimeLimitSeconds must be greater than or equal to 1s",
            ));
        }
        self.lifetime_secs.store(secs, Ordering::Relaxed);
        Ok(())
    }

    pub fn lifetime_limit(&self) -> u64 {
        self.lifetime_secs.load(Ordering::Relaxed)
    }

    /// The open transactions.
    fn open_txns(&self) -> Vec<Arc<Txn>> {
        self.open
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Aborts every open transaction (a stepdown: mongod aborts them, as a new primary will
    /// not know them). Returns how many were aborted.
    pub fn abort_all(&self, why: &str) -> usize {
        self.open_txns()
            .iter()
            .filter(|t| t.abort(why).is_ok())
            .count()
    }

    /// Aborts the open transactions that outlived the lifetime limit (the reaper's pass);
    /// returns how many.
    pub fn reap_expired(&self) -> usize {
        let now = Instant::now();
        self.open_txns()
            .iter()
            .filter(|t| t.deadline <= now && t.abort_expired().is_ok())
            .count()
    }

    /// How many transactions are open.
    pub fn open_count(&self) -> usize {
        self.open_txns()
            .iter()
            .filter(|t| t.state() == TxnState::Open)
            .count()
    }

    /// A plain (non-transaction) write of `batch`: refused with WriteConflict when an open
    /// transaction holds one of its keys; otherwise the returned guard keeps commits out until
    /// the batch is written.
    pub(crate) fn plain_write(&self, batch: &WriteBatch) -> DocResult<RwLockReadGuard<'_, ()>> {
        let gate = self.gate.read();
        if self.held.load(Ordering::Acquire) == 0 {
            return Ok(gate);
        }
        let locks = self.locks.lock();
        for op in &batch.ops {
            if let Some((holder, _)) = locks.get(&(op.table, op.key.clone())) {
                return Err(write_conflict(format!(
                    "a document this write changes is written by open transaction {holder}"
                )));
            }
        }
        Ok(gate)
    }

    /// Takes the locks of `keys` for `txn`: fails, taking none, when another open transaction
    /// holds one (an expired holder is aborted instead, the reaper's work done where it is
    /// needed).
    fn lock_keys(&self, txn: &Arc<Txn>, keys: &[WriteKey]) -> DocResult<()> {
        let mut expired = Vec::new();
        {
            let mut locks = self.locks.lock();
            for key in keys {
                match locks.get(key) {
                    Some((id, _)) if *id == txn.id => {}
                    Some((id, holder)) => match holder.upgrade() {
                        Some(h) if h.deadline <= Instant::now() => expired.push(h),
                        Some(_) => {
                            return Err(write_conflict(format!(
                                "a document this transaction writes is written by open \
                                 transaction {id}"
                            )))
                        }
                        // Dropped: its Drop releases the key.
                        None => expired.clear(),
                    },
                    None => {}
                }
            }
            if expired.is_empty() {
                for key in keys {
                    if locks
                        .insert(key.clone(), (txn.id, Arc::downgrade(txn)))
                        .is_none()
                    {
                        self.held.fetch_add(1, Ordering::AcqRel);
                    }
                }
                return Ok(());
            }
        }
        for h in expired {
            // Another thread may hold its state right now: it is then not idle, and the
            // next conflict tries again.
            let _ = h.abort_expired();
        }
        Err(write_conflict(
            "a document this transaction writes was held by a transaction past its lifetime \
             limit, aborted now; retry",
        ))
    }

    /// Whether transaction `id` holds every one of `keys`.
    fn holds_all<'k>(&self, id: u64, mut keys: impl Iterator<Item = &'k WriteKey>) -> bool {
        let locks = self.locks.lock();
        keys.all(|k| locks.get(k).is_some_and(|(holder, _)| *holder == id))
    }

    /// Releases the keys `txn` holds.
    fn unlock_keys<'k>(&self, id: u64, keys: impl Iterator<Item = &'k WriteKey>) {
        let mut locks = self.locks.lock();
        for key in keys {
            if locks.get(key).is_some_and(|(holder, _)| *holder == id) {
                locks.remove(key);
                self.held.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

#[derive(Default)]
struct TxnInner {
    state: Option<TxnState>,
    writes: BTreeMap<WriteKey, Option<Vec<u8>>>,
    /// The statements' oplog records, in order.
    ops: Vec<OpRecord>,
    /// Count changes to bring the collections' totals up to date at commit.
    counts: Vec<(SharedCounts, i64, i64)>,
}

impl TxnInner {
    fn state(&self) -> TxnState {
        self.state.clone().unwrap_or(TxnState::Open)
    }
}

/// One multi-document transaction.
pub struct Txn {
    id: u64,
    txns: Arc<Txns>,
    /// The engine snapshot it reads at, dropped when it ends (a session keeps its last
    /// transaction, which must not pin the versions it read).
    snap: Mutex<Option<Snapshot>>,
    session: Option<TxnSession>,
    deadline: Instant,
    inner: Mutex<TxnInner>,
}

/// A document write staged by a statement: its engine batch, its oplog record, its change to
/// the collection's totals.
pub(crate) struct StagedWrite<'b> {
    pub batch: &'b WriteBatch,
    pub record: OpRecord,
    pub counts: SharedCounts,
    pub count_delta: (i64, i64),
}

impl Txn {
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn session(&self) -> Option<&TxnSession> {
        self.session.as_ref()
    }

    /// The snapshot it reads at; gone once it has ended (a cursor it opened then fails).
    pub(super) fn snapshot(&self) -> engine::Result<Snapshot> {
        self.snap.lock().clone().ok_or_else(|| {
            engine::Error::SnapshotTooOld(format!("transaction {} has ended", self.id))
        })
    }

    pub fn state(&self) -> TxnState {
        self.inner.lock().state()
    }

    /// Fails unless the transaction is open and within its lifetime (which, passed, aborts
    /// it).
    fn check_open(&self, inner: &mut TxnInner) -> DocResult<()> {
        match inner.state() {
            TxnState::Open if Instant::now() < self.deadline => Ok(()),
            TxnState::Open => {
                self.abort_locked(
                    inner,
                    "the transaction outlived transactionLifetimeLimitSeconds",
                );
                Err(self.aborted_error(inner))
            }
            TxnState::Committed => Err(DocError::with_code(
                256,
                "TransactionCommitted",
                format!("transaction {} has been committed", self.id),
            )),
            TxnState::Aborted(_) => Err(self.aborted_error(inner)),
        }
    }

    fn aborted_error(&self, inner: &TxnInner) -> DocError {
        let why = match inner.state() {
            TxnState::Aborted(why) => why,
            other => format!("{other:?}"),
        };
        no_such_transaction(format!("transaction {} has been aborted: {why}", self.id))
    }

    /// Stages one document write: its keys are locked and checked against the snapshot, then
    /// its batch joins the write set. A conflict aborts the transaction.
    pub(crate) fn stage(self: &Arc<Self>, w: StagedWrite<'_>) -> DocResult<()> {
        let mut inner = self.inner.lock();
        self.check_open(&mut inner)?;
        let first: Vec<WriteKey> = w
            .batch
            .ops
            .iter()
            .map(|op| (op.table, op.key.clone()))
            .filter(|k| !inner.writes.contains_key(k))
            .collect();
        let checked = self
            .txns
            .lock_keys(self, &first)
            .and_then(|()| self.check_unchanged(&first));
        if let Err(e) = checked {
            // Keys locked just now are not in the write set yet: release them with it.
            self.txns.unlock_keys(self.id, first.iter());
            self.abort_locked(&mut inner, &e.message);
            return Err(e);
        }
        for op in &w.batch.ops {
            inner
                .writes
                .insert((op.table, op.key.clone()), op.value.clone());
        }
        inner.ops.push(w.record);
        inner
            .counts
            .push((w.counts, w.count_delta.0, w.count_delta.1));
        Ok(())
    }

    /// Fails with WriteConflict when a key's newest committed value is not its snapshot's.
    fn check_unchanged(&self, keys: &[WriteKey]) -> DocResult<()> {
        for (table, key) in keys {
            let newest = self.txns.base.get(*table, key).map_err(storage_error)?;
            let seen = self
                .txns
                .base
                .get_at(&self.snapshot().map_err(storage_error)?, *table, key)
                .map_err(storage_error)?;
            if newest != seen {
                return Err(write_conflict(
                    "a document this transaction writes was written since it began",
                ));
            }
        }
        Ok(())
    }

    /// Aborts the open transaction: its write set is dropped and its keys released.
    pub fn abort(&self, why: &str) -> DocResult<()> {
        let mut inner = self.inner.lock();
        self.check_open(&mut inner)?;
        self.abort_locked(&mut inner, why);
        Ok(())
    }

    /// Aborts the transaction if it has outlived its limit and no statement holds it now.
    fn abort_expired(&self) -> DocResult<()> {
        let mut inner = self.inner.try_lock().ok_or_else(|| {
            write_conflict(format!("transaction {} is running a statement", self.id))
        })?;
        if inner.state() != TxnState::Open {
            return Err(self.aborted_error(&inner));
        }
        self.abort_locked(
            &mut inner,
            "the transaction outlived transactionLifetimeLimitSeconds",
        );
        Ok(())
    }

    fn abort_locked(&self, inner: &mut TxnInner, why: &str) {
        if inner.state() == TxnState::Open {
            self.release(inner);
            inner.state = Some(TxnState::Aborted(why.to_string()));
        }
    }

    /// Drops the write set and releases its keys; the transaction is no longer open.
    fn release(&self, inner: &mut TxnInner) {
        self.txns.unlock_keys(self.id, inner.writes.keys());
        inner.writes.clear();
        inner.ops.clear();
        inner.counts.clear();
        self.snap.lock().take();
        self.txns.open.lock().remove(&self.id);
    }

    /// Commits: with plain writes shut out, every key is checked again against the snapshot,
    /// then the write set and (on a replica-set member, when a statement wrote anything) one
    /// `applyOps` oplog entry are applied in one engine batch. A conflict aborts instead.
    pub fn commit(&self, oplog: Option<&Oplog>) -> DocResult<()> {
        let session = self.session.clone();
        self.commit_with(
            WriteOptions { sync: true },
            |batch, ops, write| match oplog {
                Some(log) if !ops.is_empty() => {
                    let session = session.as_ref().map(|s| (&s.lsid, s.txn_number));
                    log.write_txn(batch, applyops_entry(ops), session, write)
                }
                _ if batch.is_empty() => Ok(Ok(())),
                _ => Ok(write(batch)),
            },
        )
    }

    /// Commits through `log`, which writes the write set's batch (given with the statements'
    /// records and the engine write) with whatever oplog entry it logs. The outer error of
    /// `log`: nothing was written.
    pub(crate) fn commit_with(
        &self,
        opts: WriteOptions,
        log: impl FnOnce(
            &mut WriteBatch,
            &[OpRecord],
            &dyn Fn(&WriteBatch) -> engine::Result<()>,
        ) -> DocResult<engine::Result<()>>,
    ) -> DocResult<()> {
        let mut inner = self.inner.lock();
        self.check_open(&mut inner)?;
        let _gate = self.txns.gate.write();
        // A key of the write set another transaction (or nobody) holds could have been
        // written since it was checked: applying it would lose that write.
        assert!(
            self.txns.holds_all(self.id, inner.writes.keys()),
            "transaction {} holds every key it commits",
            self.id
        );
        let keys: Vec<WriteKey> = inner.writes.keys().cloned().collect();
        if let Err(e) = self.check_unchanged(&keys) {
            self.abort_locked(&mut inner, &e.message);
            return Err(e);
        }
        let mut batch = WriteBatch::new();
        for ((table, key), value) in &inner.writes {
            match value {
                Some(v) => batch.put(*table, key.clone(), v.clone()),
                None => batch.delete(*table, key.clone()),
            }
        }
        let write = |b: &WriteBatch| self.txns.base.write(b, opts);
        log(&mut batch, &inner.ops, &write)?.map_err(storage_error)?;
        for (counts, dn, dsize) in &inner.counts {
            if let Some((n, size)) = counts.lock().as_mut() {
                *n += dn;
                *size += dsize;
            }
        }
        self.release(&mut inner);
        inner.state = Some(TxnState::Committed);
        Ok(())
    }

    /// The key's value as this transaction sees it: its own write, else its snapshot's.
    pub(super) fn get(&self, table: TableId, key: &[u8]) -> engine::Result<Option<Vec<u8>>> {
        if let Some(v) = self.inner.lock().writes.get(&(table, key.to_vec())) {
            return Ok(v.clone());
        }
        self.txns.base.get_at(&self.snapshot()?, table, key)
    }

    /// The entries in (lower, upper) as this transaction sees them: its snapshot's, merged
    /// with its own writes of that range as they are now (deletes hiding).
    pub(super) fn scan(
        &self,
        table: TableId,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
    ) -> engine::Result<KvCursor> {
        let mut own: Vec<engine_view::OwnEntry> = {
            let inner = self.inner.lock();
            let from = match &lower {
                Bound::Included(k) => Bound::Included((table, k.clone())),
                Bound::Excluded(k) => Bound::Excluded((table, k.clone())),
                Bound::Unbounded => Bound::Included((table, Vec::new())),
            };
            inner
                .writes
                .range((from, Bound::Unbounded))
                .take_while(|((t, k), _)| *t == table && below(k, &upper))
                .map(|((_, k), v)| (k.clone(), v.clone()))
                .collect()
        };
        if direction == Direction::Reverse {
            own.reverse();
        }
        let base = self
            .txns
            .base
            .scan_at(&self.snapshot()?, table, lower, upper, direction)?;
        Ok(Box::new(Overlay::new(base, own, direction)))
    }
}

impl Drop for Txn {
    /// A transaction dropped open (its session gone) releases its keys.
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        if inner.state() == TxnState::Open {
            self.txns.unlock_keys(self.id, inner.writes.keys());
            self.txns.open.lock().remove(&self.id);
        }
    }
}

/// Whether `key` is within the upper bound.
fn below(key: &[u8], upper: &Bound<Vec<u8>>) -> bool {
    match upper {
        Bound::Included(u) => key <= u.as_slice(),
        Bound::Excluded(u) => key < u.as_slice(),
        Bound::Unbounded => true,
    }
}

/// The `o` of a transaction's oplog entry: its statements' entries, in order, as mongod logs
/// them inside `applyOps` (no `ts`, `t` or `wall` of their own).
fn applyops_entry(ops: &[OpRecord]) -> OpRecord {
    let entries: Vec<Document> = ops
        .iter()
        .map(|r| {
            let mut d = doc! {"op": r.op, "ns": &r.ns};
            if let Some(ui) = r.ui {
                d.insert("ui", ui);
            }
            d.insert("o", r.o.clone());
            if let Some(o2) = &r.o2 {
                d.insert("o2", o2.clone());
            }
            if let Some(pre) = &r.pre_image {
                d.insert(crate::oplog::PRE_IMAGE, pre.clone());
            }
            d
        })
        .collect();
    OpRecord::command("admin", None, doc! {"applyOps": entries})
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Txn>>> = const { RefCell::new(None) };
}

/// Runs `body` as a statement of `txn`: the collections' reads on this thread see the
/// transaction's snapshot and own writes, and their document writes join its write set.
/// Fails without running `body` when the transaction is not open (or outlived its limit).
pub fn with_txn<T>(txn: &Arc<Txn>, body: impl FnOnce() -> DocResult<T>) -> DocResult<T> {
    struct Restore(Option<Arc<Txn>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
    }
    txn.check_open(&mut txn.inner.lock())?;
    let prev = CURRENT.with(|c| c.borrow_mut().replace(txn.clone()));
    let _restore = Restore(prev);
    body()
}

/// Until the returned guard is dropped, this thread reads and writes outside its transaction:
/// for what is kept of the committed state whoever reads it (a collection's cached totals).
pub(crate) fn suspend() -> impl Drop {
    struct Resume(Option<Arc<Txn>>);
    impl Drop for Resume {
        fn drop(&mut self) {
            let prev = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
    }
    Resume(CURRENT.with(|c| c.borrow_mut().take()))
}

/// The transaction this thread's statement belongs to, if any.
pub(crate) fn current() -> Option<Arc<Txn>> {
    CURRENT.with(|c| c.borrow().clone())
}
