//! What the applier keeps durable and the shapes of what the log carries: the applier's
//! record, timestamps as ordered numbers, a log entry's oplog entries (one, or a batch), a
//! configuration entry, and a member's snapshot. Apart from the applier so that the rollback,
//! which reads and resets them, and the applier, which installs a snapshot through the
//! rollback's marked reset, do not import each other.

use bson::{Document, Timestamp};
use docdb::db::SnapshotContents;
use engine::{KvEngine, TableConfig, WriteBatch, WriteOptions};
use repl::LogPosition;
use serde::{Deserialize, Serialize};
use std::io::Read;

/// The oplog's `ts` before any entry.
pub const ZERO_TS: Timestamp = Timestamp {
    time: 0,
    increment: 0,
};

/// A timestamp as one ordered number (seconds, then the increment).
pub fn ts_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// The timestamp of an ordered number ([`ts_u64`]'s inverse).
pub fn ts_of(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

/// What the applier keeps durable beside the data: the last Raft position applied, the
/// newest oplog `ts` Raft accounts for (applied from the log, or proposed to it by this member
/// as primary), and the newest `ts` of a committed entry applied (or found here already). The
/// local oplog never holds more than `accounted_ts` unless a write is on its way to the log;
/// if it does otherwise, the member holds writes no majority may have. What it holds past
/// `applied_ts` is this member's own, not yet known committed: a rollback's candidates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub applied: Option<LogPosition>,
    pub accounted_ts: u64,
    #[serde(default)]
    pub applied_ts: u64,
}

pub const RECORD_KEY: &[u8] = b"record";
pub const TABLE: &str = "repl.applier";
/// The key of a log entry that carries a new set configuration (`replSetReconfig`) rather
/// than an oplog entry: `{replSetConfig: <config>}`.
pub const CONFIG_ENTRY: &str = "replSetConfig";
/// The key of a log entry that carries several oplog entries, in `ts` order:
/// `{oplogBatch: [<entry>, …]}`. The primary proposes the entries written since its last
/// proposal as one log entry, so a bulk write costs one synced append, not one per document
/// (openraft 0.9 appends and syncs each proposal on its own). One entry travels bare.
pub const BATCH_ENTRY: &str = "oplogBatch";
/// The most oplog entries one log entry carries, and the most bytes of them (it also bounds
/// the work of one `apply` on every member).
pub const BATCH_MAX_ENTRIES: usize = 256;
pub const BATCH_MAX_BYTES: usize = 1 << 20;

/// The log entry's bytes for `entries` (oldest first): the entry itself if there is one,
/// else a batch.
pub fn batch_bytes(entries: &[Document]) -> Result<Vec<u8>, bson::ser::Error> {
    assert!(!entries.is_empty(), "a proposal carries at least one entry");
    let mut bytes = Vec::new();
    match entries {
        [one] => one.to_writer(&mut bytes)?,
        many => bson::doc! {BATCH_ENTRY: many.to_vec()}.to_writer(&mut bytes)?,
    }
    Ok(bytes)
}

/// The oplog entries a log entry carries (a batch's, or the entry itself), oldest first.
pub fn oplog_entries(raft_entry: Document) -> Result<Vec<Document>, String> {
    let Some(batch) = raft_entry.get(BATCH_ENTRY) else {
        return Ok(vec![raft_entry]);
    };
    let bson::Bson::Array(items) = batch else {
        return Err(format!("{BATCH_ENTRY} is not an array"));
    };
    let entries: Vec<Document> = items
        .iter()
        .map(|b| match b {
            bson::Bson::Document(d) => Ok(d.clone()),
            other => Err(format!("{BATCH_ENTRY} holds a {:?}", other.element_type())),
        })
        .collect::<Result<_, _>>()?;
    if entries.is_empty() {
        return Err(format!("an empty {BATCH_ENTRY}"));
    }
    Ok(entries)
}

/// Sets the applier's record back to nothing applied, while no member runs on `kv` (a
/// rollback's reset). Synced.
pub fn forget(kv: &dyn KvEngine) -> Result<(), String> {
    if kv.table_id(TABLE).is_none() {
        return Ok(());
    }
    set_record(kv, &Record::default())
}

/// Writes the applier's record (creating its table on first use). Synced.
pub fn set_record(kv: &dyn KvEngine, r: &Record) -> Result<(), String> {
    let table = match kv.table_id(TABLE) {
        Some(t) => t,
        None => kv
            .create_table(TABLE, &TableConfig::collection())
            .map_err(|e| e.to_string())?,
    };
    let mut b = WriteBatch::new();
    let bytes = serde_json::to_vec(r).map_err(|e| e.to_string())?;
    b.put(table, RECORD_KEY, bytes);
    kv.write(&b, WriteOptions { sync: true })
        .map_err(|e| e.to_string())
}

impl Record {
    /// The record of a member whose state is a snapshot's: applied up to `pos` in the log,
    /// `ts` in the oplog, and nothing of its own pending.
    pub fn at_snapshot(pos: Option<LogPosition>, ts: Timestamp) -> Record {
        Record {
            applied: pos,
            accounted_ts: ts_u64(ts),
            applied_ts: ts_u64(ts),
        }
    }
}

/// A member's snapshot as the log stores and sends it: the set's configuration as this
/// member had adopted it (`{replSetConfig: <config>}`, or `{}` without one), then docdb's
/// replicated state (docdb's `ReplicatedSnapshot`).
pub fn read_snapshot(data: &mut dyn Read) -> Result<(Option<Document>, SnapshotContents), String> {
    let head = Document::from_reader(&mut *data)
        .map_err(|e| format!("the snapshot's configuration record is damaged: {e}"))?;
    let config = head.get_document(CONFIG_ENTRY).ok().cloned();
    let contents = SnapshotContents::read(data).map_err(|e| e.message)?;
    Ok((config, contents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_malformed_batch_is_refused() {
        for bad in [
            doc! {BATCH_ENTRY: []},
            doc! {BATCH_ENTRY: 1},
            doc! {BATCH_ENTRY: [1]},
        ] {
            assert!(oplog_entries(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    #[should_panic(expected = "at least one entry")]
    fn an_empty_proposal_is_a_bug() {
        let _ = batch_bytes(&[]);
    }
}
