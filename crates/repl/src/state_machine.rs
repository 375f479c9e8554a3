//! openraft's state machine over the user's [`Applier`](crate::Applier): committed entries go
//! to it in order; the group's membership and the last snapshot are kept here, durably, in the
//! replication tables.

use crate::store::{decode, encode, io_err, Shared, StoreErr};
use crate::{Entry, LogId, LogPosition, MemberNode, NodeId, TypeConfig};
use engine::{TableId, WriteBatch, WriteOptions};
use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, RaftSnapshotBuilder, StorageError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::sync::Arc;

const RECORD_KEY: &[u8] = b"state_machine";
const SNAPSHOT_META_KEY: &[u8] = b"meta";
const SNAPSHOT_CHUNK: usize = 32 * 1024;

type Membership = StoredMembership<NodeId, MemberNode>;

/// What the state machine keeps besides the applier's state: the last entry it consumed (a
/// blank or membership entry moves it without calling the applier) and the membership.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Record {
    applied: Option<LogId>,
    membership: Membership,
}

pub struct StateMachine {
    shared: Arc<Shared>,
    record: Record,
    snapshots_built: u64,
}

fn sm_err<E: std::error::Error + 'static>(verb: ErrorVerb, e: &E) -> StorageError<NodeId> {
    io_err(ErrorSubject::StateMachine, verb, e)
}

fn boxed_err(verb: ErrorVerb, e: crate::BoxError) -> StorageError<NodeId> {
    sm_err(verb, &std::io::Error::other(e.to_string()))
}

fn later(a: Option<LogId>, b: Option<LogId>) -> Option<LogId> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.index > x.index { y } else { x }),
        (x, y) => x.or(y),
    }
}

impl StateMachine {
    /// Opens the state machine: the durable record, advanced to the applier's own last
    /// position when the applier is ahead (it persisted entries the record did not see).
    pub fn open(shared: Arc<Shared>) -> Result<StateMachine, StoreErr> {
        let mut record: Record = shared.get_meta(RECORD_KEY)?.unwrap_or_default();
        let by_applier = shared.applier.last_applied().map(LogPosition::to_log_id);
        record.applied = later(record.applied, by_applier);
        Ok(StateMachine {
            shared,
            record,
            snapshots_built: 0,
        })
    }

    fn save_record(&self) -> Result<(), StoreErr> {
        let mut batch = WriteBatch::new();
        batch.put(self.shared.meta, RECORD_KEY, encode(&self.record));
        self.shared
            .kv
            .write(&batch, WriteOptions { sync: true })
            .map_err(|e| sm_err(ErrorVerb::Write, &e))?;
        Ok(())
    }

    /// Gives one committed entry to the applier (or records a membership change).
    fn apply_one(&mut self, entry: Entry, already: Option<LogPosition>) -> Result<(), StoreErr> {
        let pos = LogPosition::from_log_id(&entry.log_id);
        assert!(
            self.record.applied.is_none_or(|a| a.index < pos.index),
            "entry {pos} applied out of order after {:?}",
            self.record.applied
        );
        match entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Normal(p) => {
                // An applier that persisted entries past our record already has this one.
                if already.is_none_or(|a| a.index < pos.index) {
                    self.shared
                        .applier
                        .apply(pos, &p.data)
                        .map_err(|e| boxed_err(ErrorVerb::Write, e))?;
                }
            }
            EntryPayload::Membership(m) => {
                self.record.membership = StoredMembership::new(Some(entry.log_id), m);
                self.record.applied = Some(entry.log_id);
                return self.save_record();
            }
        }
        self.record.applied = Some(entry.log_id);
        Ok(())
    }
}

/// Forgets what the state machine applied, while no member runs on `kv`: the next start
/// applies the committed log again from its first entry, and finds the membership in it (a
/// rollback rebuilds the applier's state that way; docs/replication.md, "Rollback"). Synced.
pub fn forget_applied(kv: &dyn engine::KvEngine) -> crate::Result<()> {
    let Some(meta) = kv.table_id(crate::store::META_TABLE) else {
        return Ok(());
    };
    let mut batch = WriteBatch::new();
    batch.delete(meta, RECORD_KEY);
    kv.write(&batch, WriteOptions { sync: true })?;
    Ok(())
}

/// Stores a snapshot (metadata and bytes) in the snapshot table, replacing the previous one.
fn store_snapshot(
    shared: &Shared,
    meta: &SnapshotMeta<NodeId, MemberNode>,
    data: &[u8],
) -> Result<(), StoreErr> {
    let werr = |e: &engine::Error| {
        io_err(
            ErrorSubject::Snapshot(Some(meta.signature())),
            ErrorVerb::Write,
            e,
        )
    };
    let mut batch = WriteBatch::new();
    for kv in shared.kv.scan_all(shared.snapshot).map_err(|e| werr(&e))? {
        batch.delete(shared.snapshot, kv.map_err(|e| werr(&e))?.0);
    }
    for (i, chunk) in data.chunks(SNAPSHOT_CHUNK).enumerate() {
        let mut key = b"data".to_vec();
        key.extend_from_slice(&(i as u32).to_be_bytes());
        batch.put(shared.snapshot, key, chunk);
    }
    batch.put(shared.snapshot, SNAPSHOT_META_KEY, encode(meta));
    shared
        .kv
        .write(&batch, WriteOptions { sync: true })
        .map_err(|e| werr(&e))?;
    Ok(())
}

type StoredSnapshot = (SnapshotMeta<NodeId, MemberNode>, Vec<u8>);

/// The snapshot stored in `table` (metadata and bytes), if there is one.
fn read_stored(
    kv: &dyn engine::KvEngine,
    table: TableId,
) -> Result<Option<StoredSnapshot>, StoreErr> {
    let rerr = |e: &engine::Error| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Read, e);
    let Some(meta) = kv.get(table, SNAPSHOT_META_KEY).map_err(|e| rerr(&e))? else {
        return Ok(None);
    };
    let meta: SnapshotMeta<NodeId, MemberNode> = decode(&meta)?;
    let mut data = Vec::new();
    for kv in kv.scan_all(table).map_err(|e| rerr(&e))? {
        let (key, value) = kv.map_err(|e| rerr(&e))?;
        if key.starts_with(b"data") {
            data.extend_from_slice(&value);
        }
    }
    Ok(Some((meta, data)))
}

/// The stored snapshot, if there is one.
fn load_snapshot(shared: &Shared) -> Result<Option<Snapshot<TypeConfig>>, StoreErr> {
    Ok(
        read_stored(shared.kv.as_ref(), shared.snapshot)?.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }),
    )
}

/// This member's last snapshot (its position and the applier's bytes), read while no member
/// runs on `kv`: a rollback restores it and applies the committed log after it
/// (docs/replication.md, "Rollback").
pub fn stored_snapshot(
    kv: &dyn engine::KvEngine,
) -> crate::Result<Option<(Option<LogPosition>, Vec<u8>)>> {
    let Some(table) = kv.table_id(crate::store::SNAPSHOT_TABLE) else {
        return Ok(None);
    };
    let stored = read_stored(kv, table).map_err(|e| crate::ReplError::Storage(e.to_string()))?;
    Ok(stored.map(|(meta, data)| {
        let pos = meta.last_log_id.map(|l| LogPosition::from_log_id(&l));
        (pos, data)
    }))
}

/// Sets what the state machine applied back to the stored snapshot's position and
/// membership, while no member runs on `kv` (a rollback that restored the applier's state from
/// it): the next start applies the committed log after it. Without a stored snapshot, as
/// [`forget_applied`]. Synced.
pub fn rewind_to_snapshot(kv: &dyn engine::KvEngine) -> crate::Result<()> {
    let (Some(meta_table), Some(snap_table)) = (
        kv.table_id(crate::store::META_TABLE),
        kv.table_id(crate::store::SNAPSHOT_TABLE),
    ) else {
        return forget_applied(kv);
    };
    let stored =
        read_stored(kv, snap_table).map_err(|e| crate::ReplError::Storage(e.to_string()))?;
    let Some((meta, _)) = stored else {
        return forget_applied(kv);
    };
    let record = Record {
        applied: meta.last_log_id,
        membership: meta.last_membership,
    };
    let mut batch = WriteBatch::new();
    batch.put(meta_table, RECORD_KEY, encode(&record));
    kv.write(&batch, WriteOptions { sync: true })?;
    Ok(())
}

/// A snapshot already taken from the applier (between two applies), waiting to be stored.
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
    meta: SnapshotMeta<NodeId, MemberNode>,
    data: Result<Vec<u8>, String>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let data = match std::mem::replace(&mut self.data, Ok(Vec::new())) {
            Ok(data) => data,
            // The applier could not snapshot now (docs/replication.md, "Snapshots"): openraft
            // is given the snapshot it has (or none), which is not newer, so it keeps its log
            // and asks again after the next applied entries. Failing here would stop the
            // member (openraft treats a failed build as fatal).
            Err(_) => return Ok(self.unchanged()?),
        };
        store_snapshot(&self.shared, &self.meta, &data)?;
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl SnapshotBuilder {
    /// The snapshot stored already, or an empty one at no position (openraft takes neither
    /// for newer than what it has).
    fn unchanged(&self) -> Result<Snapshot<TypeConfig>, StoreErr> {
        if let Some(stored) = load_snapshot(&self.shared)? {
            return Ok(stored);
        }
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id: None,
                last_membership: self.meta.last_membership.clone(),
                snapshot_id: format!("{}-deferred", self.meta.snapshot_id),
            },
            snapshot: Box::new(Cursor::new(Vec::new())),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError<NodeId>> {
        Ok((self.record.applied, self.record.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let already = self.shared.applier.last_applied();
        let mut out = Vec::new();
        crate::store::blocking(|| {
            for entry in entries {
                self.apply_one(entry, already)?;
                out.push(());
            }
            Ok::<_, StoreErr>(())
        })?;
        if let Some(applied) = self.record.applied {
            self.shared.advance_committed(applied);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Taken here, between two applies, so the bytes are the state at `applied`; entries
        // after the applier's own position up to `applied` are blank or membership ones.
        let mut data = Vec::new();
        let taken = self.shared.applier.snapshot(&mut data);
        let data = match taken {
            Ok(pos) if pos.map(|p| p.index) <= self.record.applied.map(|a| a.index) => Ok(data),
            Ok(pos) => Err(format!(
                "the applier's snapshot at {pos:?} is past the log's {:?}",
                self.record.applied
            )),
            Err(e) => Err(e.to_string()),
        };
        self.snapshots_built += 1;
        let applied = self
            .record
            .applied
            .map(|a| LogPosition::from_log_id(&a))
            .unwrap_or_default();
        SnapshotBuilder {
            shared: self.shared.clone(),
            meta: SnapshotMeta {
                last_log_id: self.record.applied,
                last_membership: self.record.membership.clone(),
                snapshot_id: format!(
                    "{}-{}-{}",
                    applied.term, applied.index, self.snapshots_built
                ),
            },
            data,
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, MemberNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let pos = meta.last_log_id.map(|l| LogPosition::from_log_id(&l));
        self.shared
            .applier
            .install_snapshot(pos, &mut Cursor::new(&data))
            .map_err(|e| boxed_err(ErrorVerb::Write, e))?;
        self.record = Record {
            applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
        };
        store_snapshot(&self.shared, meta, &data)?;
        if let Some(applied) = meta.last_log_id {
            self.shared.advance_committed(applied);
        }
        Ok(self.save_record()?)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(load_snapshot(&self.shared)?)
    }
}
