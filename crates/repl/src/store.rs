//! The Raft log and vote, durable in the storage engine's tables (`KvEngine`).
//!
//! Tables: `repl.log` (index, big-endian → the entry, JSON), `repl.meta` (the vote, the last
//! purged log id, the commit point, and the state machine's record, see state_machine.rs) and
//! `repl.snapshot` (the last snapshot: its metadata and its bytes in chunks).
//!
//! Durability: an append and a vote are written with `sync: true` before openraft is told they
//! are done, because Raft counts a follower's acknowledgement and a granted vote as promises
//! that survive a crash. With `sync: true` a batch goes first to the engine's journal, synced,
//! so on flash mode's streams (docs/placement.md, `filelog`) the log's writes fall into the
//! **journal's stream**; at the next checkpoint the pages of `repl.log` are written to that
//! table's own file, which `filelog` gives a stream of its own once the file is busy (an
//! append-only, purge-from-the-front table: its blocks die in the order they were written, the
//! pattern the sweep allocator reuses best).

use crate::{Applier, Entry, LogId, LogPosition, NodeId, TypeConfig};
use engine::{Direction, KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, RaftLogReader, StorageError, StorageIOError, Vote};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use tokio::sync::{oneshot, watch};

pub const LOG_TABLE: &str = "repl.log";
pub const META_TABLE: &str = "repl.meta";
pub const SNAPSHOT_TABLE: &str = "repl.snapshot";

const VOTE_KEY: &[u8] = b"vote";
const PURGED_KEY: &[u8] = b"purged";
const COMMITTED_KEY: &[u8] = b"committed";

const SYNC: WriteOptions = WriteOptions { sync: true };
const NO_SYNC: WriteOptions = WriteOptions { sync: false };

/// Runs `work`, which blocks (a synced write waits for the journal's fsync; an apply writes
/// documents), so that the runtime's other tasks are not held up behind it: on a
/// multi-threaded runtime the worker hands its queue to another thread first. Without this,
/// a run of synced appends on the member's two worker threads delayed its heartbeats past the
/// election timeout (docs/replication.md, "A write's entries").
pub fn blocking<R>(work: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// What the log, the state machine and the node share: the engine and its tables, the applier,
/// the commit point as it moves, and the proposals waiting to learn their position.
pub struct Shared {
    pub id: NodeId,
    pub kv: Arc<dyn KvEngine>,
    pub log: TableId,
    pub meta: TableId,
    pub snapshot: TableId,
    pub applier: Arc<dyn Applier>,
    pub committed: watch::Sender<Option<LogId>>,
    /// This node's proposals by sequence, answered when the entry is in the local log.
    pub appended: Mutex<HashMap<u64, oneshot::Sender<LogPosition>>>,
}

impl Shared {
    /// Opens (creating on first use) the replication tables in `kv`.
    pub fn open(
        id: NodeId,
        kv: Arc<dyn KvEngine>,
        applier: Arc<dyn Applier>,
    ) -> crate::Result<Arc<Shared>> {
        let table = |name: &str| -> crate::Result<TableId> {
            match kv.table_id(name) {
                Some(t) => Ok(t),
                None => Ok(kv.create_table(name, &TableConfig::collection())?),
            }
        };
        let (log, meta, snapshot) = (
            table(LOG_TABLE)?,
            table(META_TABLE)?,
            table(SNAPSHOT_TABLE)?,
        );
        let shared = Shared {
            id,
            log,
            meta,
            snapshot,
            applier,
            committed: watch::channel(None).0,
            appended: Mutex::new(HashMap::new()),
            kv,
        };
        let committed: Option<LogId> = shared.get_meta(COMMITTED_KEY).map_err(se)?;
        shared.committed.send_replace(committed);
        Ok(Arc::new(shared))
    }

    /// Moves the commit point this member reports forward to `to` (never back). openraft
    /// calls `save_committed` before it applies entries, but not when a snapshot brings the
    /// state past them; what is applied is committed.
    pub fn advance_committed(&self, to: LogId) {
        self.committed.send_if_modified(|c| {
            let ahead = c.is_none_or(|c| c.index < to.index);
            if ahead {
                *c = Some(to);
            }
            ahead
        });
    }

    pub fn get_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
    ) -> Result<Option<T>, StoreErr> {
        match self
            .kv
            .get(self.meta, key)
            .map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Read, &e))?
        {
            None => Ok(None),
            Some(v) => Ok(Some(decode(&v)?)),
        }
    }

    /// The entry at `index`, if the log holds it.
    pub fn entry_at(&self, index: u64) -> Result<Option<Entry>, StoreErr> {
        match self
            .kv
            .get(self.log, &index.to_be_bytes())
            .map_err(read_err)?
        {
            None => Ok(None),
            Some(v) => Ok(Some(decode(&v)?)),
        }
    }

    /// The last purged log id (the log holds nothing at or before it).
    pub fn purged(&self) -> Result<Option<LogId>, StoreErr> {
        self.get_meta(PURGED_KEY)
    }

    fn last_entry(&self) -> Result<Option<Entry>, StoreErr> {
        let mut cur = self
            .kv
            .scan(
                self.log,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Reverse,
            )
            .map_err(read_err)?;
        match cur.next() {
            None => Ok(None),
            Some(kv) => Ok(Some(decode(&kv.map_err(read_err)?.1)?)),
        }
    }
}

/// The data of the log's normal entries after `index`, oldest first, read straight from the
/// engine while no member runs on it (a rollback finds what of its oplog the log still holds).
pub fn entries_after(kv: &dyn KvEngine, index: u64) -> crate::Result<Vec<Vec<u8>>> {
    let Some(log) = kv.table_id(LOG_TABLE) else {
        return Ok(Vec::new());
    };
    let from = Bound::Excluded(index.to_be_bytes().to_vec());
    let mut out = Vec::new();
    for kv in kv.scan(log, from, Bound::Unbounded, Direction::Forward)? {
        let entry: Entry = decode(&kv?.1).map_err(se)?;
        if let openraft::EntryPayload::Normal(p) = entry.payload {
            out.push(p.data);
        }
    }
    Ok(out)
}

/// The last log position purged (the log holds nothing at or before it), read while no
/// member runs on the engine: a member whose log starts after index 1 cannot rebuild its
/// state from the log alone.
pub fn purged_position(kv: &dyn KvEngine) -> crate::Result<Option<LogPosition>> {
    let Some(meta) = kv.table_id(META_TABLE) else {
        return Ok(None);
    };
    match kv.get(meta, PURGED_KEY)? {
        None => Ok(None),
        Some(v) => {
            let purged: Option<LogId> = decode(&v).map_err(se)?;
            Ok(purged.map(|p| LogPosition::from_log_id(&p)))
        }
    }
}

/// The log store openraft drives; clones share the same tables (the reader openraft asks for
/// is a clone).
#[derive(Clone)]
pub struct LogStore {
    pub shared: Arc<Shared>,
}

fn read_err(e: engine::Error) -> StorageError<NodeId> {
    io_err(ErrorSubject::Logs, ErrorVerb::Read, &e)
}

fn write_err(e: engine::Error) -> StorageError<NodeId> {
    io_err(ErrorSubject::Logs, ErrorVerb::Write, &e)
}

pub fn io_err<E: std::error::Error + 'static>(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: &E,
) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, openraft::AnyError::new(e)).into()
}

fn se(e: StoreErr) -> crate::ReplError {
    crate::ReplError::Storage(e.to_string())
}

/// openraft's storage error, boxed for the helpers here (it is over 200 bytes); `?` turns it
/// back into openraft's at the trait methods.
pub struct StoreErr(Box<StorageError<NodeId>>);

impl From<StorageError<NodeId>> for StoreErr {
    fn from(e: StorageError<NodeId>) -> Self {
        StoreErr(Box::new(e))
    }
}

impl From<StoreErr> for StorageError<NodeId> {
    fn from(e: StoreErr) -> Self {
        *e.0
    }
}

impl std::fmt::Display for StoreErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl std::fmt::Debug for StoreErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

pub fn encode<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("replication records serialize")
}

pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreErr> {
    serde_json::from_slice(bytes)
        .map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Read, &e).into())
}

fn bound_key(b: Bound<&u64>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(i) => Bound::Included(i.to_be_bytes().to_vec()),
        Bound::Excluded(i) => Bound::Excluded(i.to_be_bytes().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl LogStore {
    /// Deletes every entry with index in `range` in one batch, with `extra` written alongside.
    fn delete_range(
        &self,
        lower: Bound<u64>,
        upper: Bound<u64>,
        extra: Option<(&[u8], Vec<u8>)>,
        opts: WriteOptions,
    ) -> Result<(), StoreErr> {
        let s = &self.shared;
        let cur =
            s.kv.scan(
                s.log,
                bound_key(lower.as_ref()),
                bound_key(upper.as_ref()),
                Direction::Forward,
            )
            .map_err(read_err)?;
        let mut batch = WriteBatch::new();
        for kv in cur {
            batch.delete(s.log, kv.map_err(read_err)?.0);
        }
        if let Some((key, value)) = extra {
            batch.put(s.meta, key, value);
        }
        s.kv.write(&batch, opts).map_err(write_err)?;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let s = &self.shared;
        let cur =
            s.kv.scan(
                s.log,
                bound_key(range.start_bound()),
                bound_key(range.end_bound()),
                Direction::Forward,
            )
            .map_err(read_err)?;
        let mut out = Vec::new();
        for kv in cur {
            out.push(decode(&kv.map_err(read_err)?.1)?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last_purged_log_id = self.shared.purged()?;
        let last_log_id = match self.shared.last_entry()? {
            Some(e) => Some(e.log_id),
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut batch = WriteBatch::new();
        batch.put(self.shared.meta, VOTE_KEY, encode(vote));
        // A granted vote is a promise: durable before the reply goes out.
        blocking(|| self.shared.kv.write(&batch, SYNC))
            .map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Write, &e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.shared.get_meta(VOTE_KEY)?)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut batch = WriteBatch::new();
        batch.put(self.shared.meta, COMMITTED_KEY, encode(&committed));
        // Not synced: a lost commit point is learned again from the leader.
        self.shared.kv.write(&batch, NO_SYNC).map_err(write_err)?;
        self.shared.committed.send_replace(committed);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError<NodeId>> {
        Ok(self.shared.get_meta(COMMITTED_KEY)?)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let s = &self.shared;
        let mut batch = WriteBatch::new();
        let mut mine = Vec::new();
        for entry in entries {
            if let openraft::EntryPayload::Normal(p) = &entry.payload {
                if p.origin == s.id {
                    mine.push((p.seq, LogPosition::from_log_id(&entry.log_id)));
                }
            }
            batch.put(s.log, entry.log_id.index.to_be_bytes(), encode(&entry));
        }
        // An acknowledged append is counted toward the majority: durable first.
        let res = blocking(|| s.kv.write(&batch, SYNC));
        callback.log_io_completed(
            res.as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        res.map_err(write_err)?;
        let mut waiting = s.appended.lock();
        for (seq, pos) in mine {
            if let Some(tx) = waiting.remove(&seq) {
                let _ = tx.send(pos);
            }
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<NodeId>> {
        let from = self
            .shared
            .entry_at(log_id.index)?
            .map(|e| LogPosition::from_log_id(&e.log_id));
        let committed = *self.shared.committed.borrow();
        // Raft never removes a committed entry; doing so would lose a majority write.
        assert!(
            committed.is_none_or(|c| c.index < log_id.index),
            "truncating the log at {log_id} below the commit point {committed:?}"
        );
        blocking(|| {
            self.delete_range(Bound::Included(log_id.index), Bound::Unbounded, None, SYNC)
        })?;
        if let Some(from) = from {
            self.shared.applier.log_truncated(from);
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<NodeId>> {
        let purged = self.shared.purged()?;
        assert!(
            purged.is_none_or(|p| p.index <= log_id.index),
            "purge moves backward"
        );
        // Purge and its record in one batch; not synced: after a crash the purge is redone.
        Ok(self.delete_range(
            Bound::Unbounded,
            Bound::Included(log_id.index),
            Some((PURGED_KEY, encode(&Some(log_id)))),
            NO_SYNC,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_machine::StateMachine;
    use crate::BoxError;
    use engine::MemEngine;
    use openraft::storage::RaftStateMachine;
    use openraft::testing::{StoreBuilder, Suite};
    use std::io::{Read, Write};

    /// An applier that keeps its entries in memory.
    #[derive(Default)]
    struct Entries(Mutex<Vec<(LogPosition, Vec<u8>)>>);

    impl Applier for Entries {
        fn apply(&self, pos: LogPosition, entry: &[u8]) -> Result<(), BoxError> {
            self.0.lock().push((pos, entry.to_vec()));
            Ok(())
        }
        fn last_applied(&self) -> Option<LogPosition> {
            self.0.lock().last().map(|e| e.0)
        }
        fn snapshot(&self, out: &mut dyn Write) -> Result<Option<LogPosition>, BoxError> {
            serde_json::to_writer(out, &*self.0.lock())?;
            Ok(self.last_applied())
        }
        fn install_snapshot(
            &self,
            _: Option<LogPosition>,
            data: &mut dyn Read,
        ) -> Result<(), BoxError> {
            *self.0.lock() = serde_json::from_reader(data)?;
            Ok(())
        }
    }

    struct Builder;

    impl StoreBuilder<TypeConfig, LogStore, StateMachine> for Builder {
        async fn build(&self) -> Result<((), LogStore, StateMachine), StorageError<NodeId>> {
            let shared = Shared::open(1, Arc::new(MemEngine::new()), Arc::new(Entries::default()))
                .expect("open");
            let sm = StateMachine::open(shared.clone())?;
            Ok(((), LogStore { shared }, sm))
        }
    }

    /// openraft's own storage conformance suite, run on the engine-backed log and state machine.
    #[test]
    fn openraft_storage_suite_passes() {
        Suite::test_all(Builder).expect("openraft's storage suite");
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn log_id(term: u64, index: u64) -> LogId {
        LogPosition { term, index }.to_log_id()
    }

    fn store() -> LogStore {
        let shared = Shared::open(1, Arc::new(MemEngine::new()), Arc::new(Entries::default()))
            .expect("open");
        LogStore { shared }
    }

    #[test]
    #[should_panic(expected = "below the commit point")]
    fn truncating_a_committed_entry_is_refused() {
        let mut s = store();
        block_on(async {
            s.save_committed(Some(log_id(1, 5))).await.unwrap();
            s.truncate(log_id(1, 3)).await.unwrap();
        });
    }

    #[test]
    #[should_panic(expected = "purge moves backward")]
    fn purging_backward_is_refused() {
        let mut s = store();
        block_on(async {
            s.purge(log_id(1, 5)).await.unwrap();
            s.purge(log_id(1, 3)).await.unwrap();
        });
    }

    #[test]
    #[should_panic(expected = "applied out of order")]
    fn applying_out_of_order_is_refused() {
        let s = store();
        let mut sm = StateMachine::open(s.shared.clone()).unwrap();
        let entry = |i| Entry {
            log_id: log_id(1, i),
            payload: openraft::EntryPayload::Blank,
        };
        block_on(async {
            sm.apply([entry(5)]).await.unwrap();
            sm.apply([entry(3)]).await.unwrap();
        });
    }

    #[test]
    fn the_vote_and_log_survive_reopening_the_tables() {
        let kv: Arc<dyn KvEngine> = Arc::new(MemEngine::new());
        let applier: Arc<dyn Applier> = Arc::new(Entries::default());
        let vote = Vote::new(3, 2);
        block_on(async {
            let mut s = LogStore {
                shared: Shared::open(1, kv.clone(), applier.clone()).unwrap(),
            };
            s.save_vote(&vote).await.unwrap();
            s.save_committed(Some(log_id(3, 7))).await.unwrap();
            let mut again = LogStore {
                shared: Shared::open(1, kv, applier).unwrap(),
            };
            assert_eq!(again.read_vote().await.unwrap(), Some(vote));
            assert_eq!(again.read_committed().await.unwrap(), Some(log_id(3, 7)));
            assert_eq!(*again.shared.committed.borrow(), Some(log_id(3, 7)));
        });
    }
}
