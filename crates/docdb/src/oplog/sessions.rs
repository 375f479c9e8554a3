//! The statements of retryable writes that a node has executed (mongod's
//! `config.transactions`): one record per statement of a session's newest `txnNumber`, keyed
//! `lsid ‖ txnNumber ‖ stmtId`. A replica-set member stages a record in the very engine batch
//! of the statement's oplog entry, as primary when it writes the entry and as secondary when it
//! applies it, so a record survives a crash and a failover exactly as its write does. A record
//! of a newer `txnNumber` removes the session's older ones in the same batch (mongod keeps one
//! transaction per session). A retry finds the record and is answered from it
//! (`StatementRecord`) instead of being applied again. See docs/replication.md, "Retryable
//! writes".

use crate::storage_error;
use bson::{doc, Bson, Document, Timestamp};
use engine::{Direction, KvEngine, TableId, WriteBatch};
use query::error::{DocError, DocResult};
use std::ops::Bound;
use std::sync::Arc;

/// Which image of the document a findAndModify returned (mongod's `needsRetryImage`): the
/// record keeps it so that a retry returns the same `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryImage {
    Pre,
    Post,
}

impl RetryImage {
    /// The entry field's value, as mongod writes it.
    pub fn name(self) -> &'static str {
        match self {
            RetryImage::Pre => "preImage",
            RetryImage::Post => "postImage",
        }
    }

    fn of(name: &str) -> Option<RetryImage> {
        match name {
            "preImage" => Some(RetryImage::Pre),
            "postImage" => Some(RetryImage::Post),
            _ => None,
        }
    }
}

/// A session's key: its `lsid.id` (the UUID drivers generate), or the whole `lsid` encoded
/// when it has no binary id.
pub fn session_key(lsid: &Document) -> Vec<u8> {
    match lsid.get("id") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => bson::to_vec(lsid).expect("a document encodes"),
    }
}

/// The key prefix of every record of a session.
fn session_prefix(session: &[u8]) -> Vec<u8> {
    let len = u16::try_from(session.len()).expect("an lsid is far below 64 KiB");
    let mut k = len.to_be_bytes().to_vec();
    k.extend_from_slice(session);
    k
}

/// Ordered as the signed numbers are.
fn ordered_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

fn record_key(session: &[u8], txn: i64, stmt: i32) -> Vec<u8> {
    let mut k = session_prefix(session);
    k.extend_from_slice(&ordered_i64(txn));
    k.extend_from_slice(&(((stmt as u32) ^ (1 << 31)).to_be_bytes()));
    k
}

/// The `txnNumber` of a record key of `session`.
fn txn_of_key(session: &[u8], key: &[u8]) -> DocResult<i64> {
    let at = 2 + session.len();
    let bytes: [u8; 8] = key
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| DocError::internal_error("a session record key is cut short"))?;
    Ok((u64::from_be_bytes(bytes) ^ (1 << 63)) as i64)
}

/// The statement number of a transaction's record (mongod's `config.transactions` entry with
/// `state: "committed"`): below every statement's, which count up from 0.
pub const TXN_COMMITTED_STMT: i32 = -1;

/// A statement's record: what a retry's reply is rebuilt from.
#[derive(Clone, Debug, PartialEq)]
pub struct StatementRecord {
    pub txn_number: i64,
    pub stmt_id: i32,
    /// The `ts` of the statement's oplog entry (`None` on a node without an oplog).
    pub ts: Option<Timestamp>,
    /// The entry's `op`: "i" (an insert, or an update's upsert), "u" or "d".
    pub op: String,
    /// The `_id` of the document written.
    pub id: Bson,
    /// The image a findAndModify returned, when it asked for one and there was a document.
    pub image: Option<(RetryImage, Document)>,
}

impl StatementRecord {
    fn to_doc(&self) -> Document {
        let mut d = doc! {"txnNumber": self.txn_number, "stmtId": self.stmt_id, "op": &self.op, "_id": self.id.clone()};
        if let Some(ts) = self.ts {
            d.insert("ts", ts);
        }
        if let Some((kind, image)) = &self.image {
            d.insert("imageKind", kind.name());
            d.insert("image", image.clone());
        }
        d
    }

    fn from_doc(d: &Document) -> DocResult<StatementRecord> {
        let bad = || DocError::internal_error(format!("corrupt session record: {d}"));
        let image = match (d.get_str("imageKind"), d.get_document("image")) {
            (Ok(k), Ok(image)) => Some((RetryImage::of(k).ok_or_else(bad)?, image.clone())),
            _ => None,
        };
        Ok(StatementRecord {
            txn_number: d.get_i64("txnNumber").map_err(|_| bad())?,
            stmt_id: d.get_i32("stmtId").map_err(|_| bad())?,
            ts: d.get_timestamp("ts").ok(),
            op: d.get_str("op").map_err(|_| bad())?.to_string(),
            id: d.get("_id").cloned().ok_or_else(bad)?,
            image,
        })
    }

    /// The record of the oplog entry `entry` of a retryable write's statement (`None` for an
    /// entry of no statement); `old`/`new` are the document before and after, where the write
    /// is at hand, for the image the entry asks for.
    pub fn of_entry(
        entry: &Document,
        old: Option<&Document>,
        new: Option<&Document>,
    ) -> Option<(Document, StatementRecord)> {
        let lsid = entry.get_document("lsid").ok()?;
        let op = entry.get_str("op").ok()?;
        if op == "c" {
            // A committed transaction's one entry: its record says it committed.
            entry.get_document("o").ok()?.get_array("applyOps").ok()?;
            let rec = StatementRecord {
                txn_number: entry.get_i64("txnNumber").ok()?,
                stmt_id: TXN_COMMITTED_STMT,
                ts: entry.get_timestamp("ts").ok(),
                op: op.to_string(),
                id: Bson::Null,
                image: None,
            };
            return Some((lsid.clone(), rec));
        }
        let id = match op {
            "d" => entry.get_document("o").ok()?.get("_id")?,
            _ => entry.get_document("o2").ok()?.get("_id")?,
        };
        let kind = entry
            .get_str("needsRetryImage")
            .ok()
            .and_then(RetryImage::of);
        let image = kind.and_then(|k| {
            let d = if k == RetryImage::Pre { old } else { new };
            d.map(|d| (k, d.clone()))
        });
        let rec = StatementRecord {
            txn_number: entry.get_i64("txnNumber").ok()?,
            stmt_id: entry.get_i32("stmtId").ok()?,
            ts: entry.get_timestamp("ts").ok(),
            op: op.to_string(),
            id: id.clone(),
            image,
        };
        Some((lsid.clone(), rec))
    }
}

/// The engine table of the records.
pub struct SessionTable {
    engine: Arc<dyn KvEngine>,
    table: TableId,
}

impl std::fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTable").finish_non_exhaustive()
    }
}

/// The error of a statement whose session has moved on to a newer `txnNumber` (mongod's
/// TransactionTooOld, 225).
pub fn transaction_too_old(txn: i64, newest: i64) -> DocError {
    DocError::with_code(
        225,
        "TransactionTooOld",
        format!("Retryable write with txnNumber {txn} is prohibited on this session because a newer retryable write with txnNumber {newest} has already started on it"),
    )
}

impl SessionTable {
    /// Opens (creating if missing) the table `name`.
    pub fn open(engine: Arc<dyn KvEngine>, name: &str) -> DocResult<SessionTable> {
        let table = match engine.table_id(name) {
            Some(t) => t,
            None => engine
                .create_table(name, &engine::TableConfig::collection())
                .map_err(storage_error)?,
        };
        Ok(SessionTable { engine, table })
    }

    /// The record of statement `stmt` of `txn` on `session`, if it was executed.
    pub fn lookup(
        &self,
        session: &[u8],
        txn: i64,
        stmt: i32,
    ) -> DocResult<Option<StatementRecord>> {
        let key = record_key(session, txn, stmt);
        match self.engine.get(self.table, &key).map_err(storage_error)? {
            Some(v) => Ok(Some(StatementRecord::from_doc(
                &crate::doc_codec::decode_doc(&v)?,
            )?)),
            None => Ok(None),
        }
    }

    /// The newest `txnNumber` the session has records of.
    pub fn newest_txn(&self, session: &[u8]) -> DocResult<Option<i64>> {
        let prefix = session_prefix(session);
        let mut hi = prefix.clone();
        hi.extend_from_slice(&[0xff; 13]);
        let newest = self
            .engine
            .scan(
                self.table,
                Bound::Included(prefix),
                Bound::Included(hi),
                Direction::Reverse,
            )
            .map_err(storage_error)?
            .next()
            .transpose()
            .map_err(storage_error)?;
        newest.map(|(k, _)| txn_of_key(session, &k)).transpose()
    }

    /// Stages the record of a statement a member applies from the log (committed history, on
    /// a secondary or when the log is applied again): as [`SessionTable::stage`], but a record
    /// older than the session's newest is superseded history and is left out, never refused,
    /// as mongod's secondaries move `config.transactions` only forward.
    pub fn stage_applied(
        &self,
        session: &[u8],
        rec: &StatementRecord,
        batch: &mut WriteBatch,
    ) -> DocResult<()> {
        match self.newest_txn(session)? {
            Some(newest) if newest > rec.txn_number => Ok(()),
            _ => self.stage(session, rec, batch),
        }
    }

    /// Stages the removal of every record (a rollback's reset).
    pub(crate) fn stage_clear(&self, batch: &mut WriteBatch) -> DocResult<()> {
        for kv in self.engine.scan_all(self.table).map_err(storage_error)? {
            batch.delete(self.table, kv.map_err(storage_error)?.0);
        }
        Ok(())
    }

    /// Stages `rec` in `batch`, with the removal of the session's records of older
    /// `txnNumber`s. Refused (TransactionTooOld, nothing staged) when the session has a newer
    /// one: the caller holds the lock that orders its writes (the oplog's tail), so the check
    /// and the write are one step.
    pub fn stage(
        &self,
        session: &[u8],
        rec: &StatementRecord,
        batch: &mut WriteBatch,
    ) -> DocResult<()> {
        if let Some(newest) = self.newest_txn(session)? {
            if newest > rec.txn_number {
                return Err(transaction_too_old(rec.txn_number, newest));
            }
        }
        let lo = session_prefix(session);
        let mut hi = lo.clone();
        hi.extend_from_slice(&ordered_i64(rec.txn_number));
        let older = self
            .engine
            .scan(
                self.table,
                Bound::Included(lo),
                Bound::Excluded(hi),
                Direction::Forward,
            )
            .map_err(storage_error)?;
        for kv in older {
            batch.delete(self.table, kv.map_err(storage_error)?.0);
        }
        let key = record_key(session, rec.txn_number, rec.stmt_id);
        batch.put(
            self.table,
            key,
            crate::doc_codec::encode_doc(&rec.to_doc())?,
        );
        Ok(())
    }
}
