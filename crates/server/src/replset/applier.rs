//! The document layer as Raft's state machine: committed oplog entries applied through
//! `DocDb::apply_oplog_entry`, skipping those this member already holds (its own writes as
//! primary, or entries applied before a restart), and the bookkeeping that tells a member
//! whose data went past what Raft holds (docs/replication.md, "The server's replica set").

use bson::{Document, Timestamp};
use docdb::DocDb;
use engine::{KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
use parking_lot::Mutex;
use repl::{Applier, BoxError, LogPosition};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::sync::Arc;

/// The oplog's `ts` before any entry.
pub const ZERO_TS: Timestamp = Timestamp {
    time: 0,
    increment: 0,
};

/// A timestamp as one ordered number (seconds, then the increment).
pub fn ts_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// What the applier keeps durable beside the data: the last Raft position applied, and the
/// newest oplog `ts` Raft accounts for (applied from the log, or proposed to it by this member
/// as primary). The local oplog never holds more than that unless a write is on its way to
/// the log; if it does otherwise, the member holds writes no majority may have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub applied: Option<LogPosition>,
    pub accounted_ts: u64,
}

const RECORD_KEY: &[u8] = b"record";
const TABLE: &str = "repl.applier";

/// Why the member stopped serving data, once it has (never cleared while the process runs).
#[derive(Default)]
pub struct Divergence {
    reason: Mutex<Option<String>>,
}

impl Divergence {
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().clone()
    }
    /// Records the first reason and logs it; later ones add nothing.
    pub fn diverge(&self, why: String) {
        let mut r = self.reason.lock();
        if r.is_none() {
            crate::log::error(
                "REPL",
                &format!("{why}: this member refuses reads and writes until it is resynced (rollback is not available yet; docs/replication.md)"),
            );
            *r = Some(why);
        }
    }
}

pub struct DocApplier {
    db: Arc<DocDb>,
    kv: Arc<dyn KvEngine>,
    table: TableId,
    /// Held across an entry's application and its record, so the divergence check never sees
    /// an entry in the oplog that the record does not yet account for.
    record: Mutex<Record>,
    pub divergence: Arc<Divergence>,
    /// The highest log index this member proposed as primary (0: none).
    shipped_index: Mutex<u64>,
}

fn boxed(e: impl std::fmt::Display) -> BoxError {
    e.to_string().into()
}

impl DocApplier {
    /// Opens the applier's record in the database's engine; a member whose oplog holds entries
    /// past what its record accounts for (a primary that crashed between a write and its
    /// proposal, or before the record caught up) is diverged from the start.
    pub fn open(db: Arc<DocDb>, divergence: Arc<Divergence>) -> Result<DocApplier, String> {
        let kv = db.engine().clone();
        let table = match kv.table_id(TABLE) {
            Some(t) => t,
            None => kv
                .create_table(TABLE, &TableConfig::collection())
                .map_err(|e| e.to_string())?,
        };
        let record: Record = match kv.get(table, RECORD_KEY).map_err(|e| e.to_string())? {
            Some(b) => serde_json::from_slice(&b).map_err(|e| e.to_string())?,
            None => Record::default(),
        };
        let applier = DocApplier {
            db,
            kv,
            table,
            record: Mutex::new(record),
            divergence,
            shipped_index: Mutex::new(0),
        };
        let local = ts_u64(applier.oplog_last_ts());
        if local > record.accounted_ts {
            applier.divergence.diverge(format!(
                "the oplog holds entries up to {local:#x} that the replicated log does not account for (up to {:#x})",
                record.accounted_ts
            ));
        }
        Ok(applier)
    }

    fn oplog_last_ts(&self) -> Timestamp {
        self.db.oplog().map_or(ZERO_TS, |o| o.last_ts())
    }

    fn save(&self, r: &Record) -> Result<(), BoxError> {
        let mut b = WriteBatch::new();
        b.put(
            self.table,
            RECORD_KEY,
            serde_json::to_vec(r).map_err(boxed)?,
        );
        self.kv
            .write(&b, WriteOptions { sync: false })
            .map_err(boxed)
    }

    /// This member proposed the oplog entry with `ts` at `pos` (as primary).
    pub fn shipped(&self, pos: LogPosition, ts: Timestamp) -> Result<(), BoxError> {
        let mut r = self.record.lock();
        r.accounted_ts = r.accounted_ts.max(ts_u64(ts));
        let mut shipped = self.shipped_index.lock();
        *shipped = (*shipped).max(pos.index);
        self.save(&r)
    }

    /// Checks that the oplog holds nothing Raft does not account for, when no write of this
    /// member's can be on its way to the log (it is not the primary).
    pub fn check_accounted(&self) {
        let r = self.record.lock();
        let local = ts_u64(self.oplog_last_ts());
        if local > r.accounted_ts {
            self.divergence.diverge(format!(
                "this member is no longer primary and its oplog holds writes up to {local:#x} that were never proposed to the set (proposed up to {:#x})",
                r.accounted_ts
            ));
        }
    }

    fn apply_entry(&self, r: &mut Record, entry: &Document) -> Result<(), BoxError> {
        let ts = entry.get_timestamp("ts").map_err(boxed)?;
        let local = self.oplog_last_ts();
        if ts_u64(ts) > r.accounted_ts && ts_u64(local) > r.accounted_ts {
            self.divergence.diverge(format!(
                "an entry of another primary ({ts:?}) arrived while this member's oplog holds writes never proposed to the set (up to {local:?})"
            ));
        }
        if self.divergence.reason().is_some() {
            return Ok(());
        }
        // Already here: this member wrote it as primary, or applied it before a restart.
        if ts_u64(ts) <= ts_u64(local) {
            return Ok(());
        }
        self.db.apply_oplog_entry(entry).map_err(boxed)?;
        r.accounted_ts = r.accounted_ts.max(ts_u64(ts));
        Ok(())
    }
}

impl Applier for DocApplier {
    fn apply(&self, pos: LogPosition, bytes: &[u8]) -> Result<(), BoxError> {
        let entry = Document::from_reader(bytes).map_err(boxed)?;
        let mut r = self.record.lock();
        self.apply_entry(&mut r, &entry)?;
        debug_assert!(r.applied.is_none_or(|a| a.index < pos.index));
        r.applied = Some(pos);
        self.save(&r)
    }

    fn last_applied(&self) -> Option<LogPosition> {
        self.record.lock().applied
    }

    fn snapshot(&self, _out: &mut dyn Write) -> Result<Option<LogPosition>, BoxError> {
        Err("initial sync from a snapshot is not available yet: members keep the whole log (docs/replication.md)".into())
    }

    fn install_snapshot(
        &self,
        _pos: Option<LogPosition>,
        _data: &mut dyn Read,
    ) -> Result<(), BoxError> {
        Err("initial sync from a snapshot is not available yet: members keep the whole log (docs/replication.md)".into())
    }

    fn log_truncated(&self, from: LogPosition) {
        let shipped = *self.shipped_index.lock();
        if shipped >= from.index {
            self.divergence.diverge(format!(
                "entries this member wrote as primary (up to index {shipped}) were never replicated to a majority and were removed from the log from {from} on"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use docdb::db::WriteOpts;
    use docdb::oplog::OplogSettings;
    use docdb::DocDbConfig;

    fn member() -> Arc<DocDb> {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings::from_mb(16.0).unwrap());
        DocDb::open(cfg).unwrap()
    }

    fn write(db: &DocDb, ids: &[i32]) -> Vec<Document> {
        let docs = ids.iter().map(|i| doc! {"_id": *i}).collect();
        let out = db.insert("app", "c", docs, WriteOpts::default());
        assert!(out.write_errors.is_empty());
        entries(db)
    }

    fn entries(db: &DocDb) -> Vec<Document> {
        db.oplog()
            .unwrap()
            .entries_after(ZERO_TS, usize::MAX, usize::MAX)
            .unwrap()
    }

    fn bytes(d: &Document) -> Vec<u8> {
        let mut b = Vec::new();
        d.to_writer(&mut b).unwrap();
        b
    }

    fn count(db: &DocDb) -> usize {
        db.find("app", "c", &Default::default()).unwrap().count()
    }

    fn pos(index: u64) -> LogPosition {
        LogPosition { term: 1, index }
    }

    fn ts(e: &Document) -> Timestamp {
        e.get_timestamp("ts").unwrap()
    }

    #[test]
    fn a_secondary_applies_each_entry_once() {
        let log = write(&member(), &[1, 2]);
        assert!(log.len() >= 3, "the create and two inserts: {log:?}");
        let secondary = member();
        let applier = DocApplier::open(secondary.clone(), Arc::default()).unwrap();
        for (i, e) in log.iter().enumerate() {
            applier.apply(pos(i as u64 + 1), &bytes(e)).unwrap();
        }
        assert_eq!(count(&secondary), 2);
        assert_eq!(entries(&secondary), log);
        // Given again (a restart that lost the record): nothing is applied twice.
        for (i, e) in log.iter().enumerate() {
            applier.apply(pos(i as u64 + 10), &bytes(e)).unwrap();
        }
        assert_eq!(entries(&secondary), log);
        assert_eq!(applier.last_applied(), Some(pos(log.len() as u64 + 9)));
        applier.check_accounted();
        assert!(applier.divergence.reason().is_none());
    }

    #[test]
    fn the_primary_skips_its_own_entries_and_diverges_when_the_log_drops_one() {
        let primary = member();
        let applier = DocApplier::open(primary.clone(), Arc::default()).unwrap();
        let log = write(&primary, &[1, 2]);
        for (i, e) in log.iter().enumerate() {
            applier.shipped(pos(i as u64 + 1), ts(e)).unwrap();
            applier.apply(pos(i as u64 + 1), &bytes(e)).unwrap();
        }
        assert_eq!((count(&primary), entries(&primary)), (2, log.clone()));
        applier.check_accounted();
        applier.log_truncated(pos(log.len() as u64 + 1));
        assert!(
            applier.divergence.reason().is_none(),
            "nothing of ours removed"
        );
        applier.log_truncated(pos(log.len() as u64));
        let why = applier.divergence.reason().expect("diverged");
        assert!(why.contains("never replicated"), "{why}");
    }

    #[test]
    fn writes_never_proposed_make_the_member_refuse_service() {
        // At start: the oplog holds entries the record does not account for.
        let crashed = member();
        write(&crashed, &[1]);
        let at_start = DocApplier::open(crashed, Arc::default()).unwrap();
        assert!(at_start.divergence.reason().is_some());
        // A deposed primary's unproposed write, then another primary's entry.
        let deposed = member();
        let applier = DocApplier::open(deposed.clone(), Arc::default()).unwrap();
        write(&deposed, &[1]);
        let other = write(&member(), &[7]);
        applier.apply(pos(1), &bytes(&other[0])).unwrap();
        let why = applier.divergence.reason().expect("diverged");
        assert!(why.contains("another primary"), "{why}");
        assert_eq!(count(&deposed), 1, "nothing applied once diverged");
        // The background check finds the same without new entries.
        let idle = member();
        let applier = DocApplier::open(idle.clone(), Arc::default()).unwrap();
        write(&idle, &[1]);
        applier.check_accounted();
        assert!(applier.divergence.reason().is_some());
    }
}
