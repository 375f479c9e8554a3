//! Retryable writes on a shard. Through a mongos, drivers send `lsid` and `txnNumber` with
//! every insert, single update, single delete and findAndModify; the router forwards them with
//! the statements' `stmtIds`. The shard runs such a command one statement at a time; the first
//! document write of a statement carries its session record into the same atomic engine batch
//! (write hook), so a statement is either applied with its record or not at all. A retry finds
//! the record and answers from it instead of applying the statement again.
//!
//! Records live in the engine table `flashdoc-sessions`, keyed by
//! `lsid ‖ txnNumber ‖ stmtId`; a newer txnNumber of a session removes the older records in
//! the same batch (mongod keeps one transaction per session). Not done: records do not move
//! with a migrated chunk, so a retry that arrives after its document migrated is applied again;
//! on a replica set's member they are the member's own (the engine table is not in the oplog),
//! and the set's replicated records (server `replset::retry`, which runs first) answer a retry
//! after a failover.

use super::{with_op, CollMeta, OpContext, ShardNode};
use bson::{doc, Bson, Document};
use docdb::scope::with_ownership;
use docdb::{DocDb, DocError, DocResult};
use engine::{Direction, KvEngine, TableId, WriteBatch};
use server::hook::CommandCall;
use std::ops::Bound;
use std::sync::Arc;

const TABLE: &str = "flashdoc-sessions";

pub struct Sessions {
    engine: Arc<dyn KvEngine>,
    table: TableId,
}

/// A retryable write's session.
#[derive(Clone)]
pub struct SessionInfo {
    lsid: Vec<u8>,
    txn: i64,
}

impl SessionInfo {
    pub fn of(cmd: &Document) -> Option<SessionInfo> {
        let txn = match cmd.get("txnNumber")? {
            Bson::Int64(t) => *t,
            Bson::Int32(t) => *t as i64,
            _ => return None,
        };
        let id = match cmd.get_document("lsid").ok()?.get("id")? {
            Bson::Binary(b) => b.bytes.clone(),
            _ => return None,
        };
        Some(SessionInfo { lsid: id, txn })
    }
}

/// The record the next document write of this thread's statement carries.
pub struct Pending {
    key: Vec<u8>,
    lsid: Vec<u8>,
    txn: i64,
    kind: &'static str,
}

fn record_key(lsid: &[u8], txn: i64, stmt: i32) -> Vec<u8> {
    let mut k = Vec::with_capacity(lsid.len() + 13);
    k.push(lsid.len() as u8);
    k.extend_from_slice(lsid);
    k.extend_from_slice(&(txn as u64).to_be_bytes());
    k.extend_from_slice(&(stmt as u32).to_be_bytes());
    k
}

impl Sessions {
    pub fn open(db: &DocDb) -> DocResult<Sessions> {
        let engine = db.engine().clone();
        let table = match engine.table_id(TABLE) {
            Some(t) => t,
            None => engine
                .create_table(TABLE, &db.internal_table_config())
                .map_err(docdb::storage_error)?,
        };
        Ok(Sessions { engine, table })
    }

    fn lookup(&self, s: &SessionInfo, stmt: i32) -> DocResult<Option<Document>> {
        match self
            .engine
            .get(self.table, &record_key(&s.lsid, s.txn, stmt))
            .map_err(docdb::storage_error)?
        {
            Some(v) => Ok(Some(Document::from_reader(v.as_slice()).map_err(|e| {
                DocError::internal_error(format!("corrupt session record: {e}"))
            })?)),
            None => Ok(None),
        }
    }

    /// Adds a statement's record (and the removal of the session's older records) to a batch.
    pub fn add_record(
        &self,
        p: &Pending,
        old: Option<&Document>,
        new: Option<&Document>,
        batch: &mut WriteBatch,
    ) -> DocResult<()> {
        let mut rec =
            doc! {"kind": p.kind, "n": 1, "nModified": (old.is_some() && new.is_some()) as i32};
        if old.is_none() {
            if let Some(id) = new.and_then(|d| d.get("_id")) {
                rec.insert("upserted", id.clone());
            }
        }
        if p.kind == "findAndModify" {
            if let Some(o) = old {
                rec.insert("old", o.clone());
            }
            if let Some(n) = new {
                rec.insert("new", n.clone());
            }
        }
        let mut prefix = vec![p.lsid.len() as u8];
        prefix.extend_from_slice(&p.lsid);
        let lo = prefix.clone();
        let mut hi = prefix;
        hi.extend_from_slice(&(p.txn as u64).to_be_bytes());
        for kv in self
            .engine
            .scan(
                self.table,
                Bound::Included(lo),
                Bound::Excluded(hi),
                Direction::Forward,
            )
            .map_err(docdb::storage_error)?
        {
            batch.delete(self.table, kv.map_err(docdb::storage_error)?.0);
        }
        batch.put(
            self.table,
            p.key.clone(),
            bson::to_vec(&rec).expect("serializes"),
        );
        Ok(())
    }
}

/// Runs a retryable write statement by statement (module docs).
pub fn run_retryable(
    node: &ShardNode,
    call: &CommandCall<'_>,
    ns: &str,
    meta: Option<Arc<CollMeta>>,
    s: SessionInfo,
) -> Document {
    let run_one = |cmd: &Document, stmt: i32, kind: &'static str| -> Document {
        let ctx = OpContext {
            meta: meta.clone(),
            ns: ns.to_string(),
            session: Some(Pending {
                key: record_key(&s.lsid, s.txn, stmt),
                lsid: s.lsid.clone(),
                txn: s.txn,
                kind,
            }),
        };
        with_op(ctx, || match &meta {
            Some(m) => with_ownership(m.filter(), || call.builtin(cmd)),
            None => call.builtin(cmd),
        })
    };
    if matches!(call.name, "findAndModify" | "findandmodify") {
        let stmt = call.cmd.get_i32("stmtId").unwrap_or(0);
        return match node.sessions.lookup(&s, stmt) {
            Ok(Some(rec)) => find_and_modify_reply(call.cmd, &rec)
                .unwrap_or_else(|e| server::reply::error_reply(&e)),
            Ok(None) => run_one(call.cmd, stmt, "findAndModify"),
            Err(e) => server::reply::error_reply(&e),
        };
    }
    let (field, kind) = match call.name {
        "insert" => ("documents", "insert"),
        "update" => ("updates", "update"),
        _ => ("deletes", "delete"),
    };
    let Ok(stmts) = call.cmd.get_array(field) else {
        return call.builtin(call.cmd);
    };
    let ids: Vec<i32> = match call.cmd.get_array("stmtIds") {
        Ok(a) => a.iter().map(|v| v.as_i32().unwrap_or(0)).collect(),
        Err(_) => (0..stmts.len() as i32).collect(),
    };
    let ordered = call.cmd.get_bool("ordered").unwrap_or(true);
    // The command without its statements: a copy of the whole array per statement made a
    // bulk write quadratic.
    let mut base = call.cmd.clone();
    base.remove(field);
    base.remove("stmtIds");
    let mut merged = MergedReplies::default();
    for (i, stmt) in stmts.iter().enumerate() {
        let sid = ids.get(i).copied().unwrap_or(i as i32);
        let reply = match node.sessions.lookup(&s, sid) {
            Ok(Some(rec)) => recorded_reply(&rec),
            Ok(None) => {
                let mut one = base.clone();
                one.insert(field, vec![stmt.clone()]);
                run_one(&one, sid, kind)
            }
            Err(e) => server::reply::error_reply(&e),
        };
        let failed = merged.add(i, &reply);
        if failed && ordered {
            break;
        }
    }
    merged.reply(kind)
}

/// The reply a statement gave, rebuilt from its record.
fn recorded_reply(rec: &Document) -> Document {
    let mut r = doc! {"ok": 1.0, "n": rec.get_i32("n").unwrap_or(0), "nModified": rec.get_i32("nModified").unwrap_or(0)};
    if let Some(id) = rec.get("upserted") {
        r.insert(
            "upserted",
            vec![Bson::Document(doc! {"index": 0, "_id": id.clone()})],
        );
    }
    r
}

/// The one-statement replies of a batch, merged into the batch's reply.
#[derive(Default)]
struct MergedReplies {
    n: i64,
    modified: i64,
    upserted: Vec<Bson>,
    errors: Vec<Bson>,
}

impl MergedReplies {
    /// Adds statement `i`'s reply; true when the statement failed.
    fn add(&mut self, i: usize, reply: &Document) -> bool {
        let ok = crate::transport::is_ok(reply);
        self.n += crate::int_field(reply.get("n"));
        self.modified += crate::int_field(reply.get("nModified"));
        if let Ok(list) = reply.get_array("upserted") {
            for u in list.iter().filter_map(Bson::as_document) {
                let mut u = u.clone();
                u.insert("index", i as i32);
                self.upserted.push(Bson::Document(u));
            }
        }
        let mut failed = false;
        if !ok {
            let mut e = doc! {"index": i as i32};
            for k in ["code", "codeName", "errmsg"] {
                if let Some(v) = reply.get(k) {
                    e.insert(k, v.clone());
                }
            }
            self.errors.push(Bson::Document(e));
            failed = true;
        } else if let Ok(list) = reply.get_array("writeErrors") {
            for w in list.iter().filter_map(Bson::as_document) {
                let mut w = w.clone();
                w.insert("index", i as i32);
                self.errors.push(Bson::Document(w));
                failed = true;
            }
        }
        failed
    }

    /// The batch's reply for a write of `kind`.
    fn reply(self, kind: &str) -> Document {
        let mut out = doc! {"n": self.n as i32};
        if kind == "update" {
            out.insert("nModified", self.modified as i32);
            if !self.upserted.is_empty() {
                out.insert("upserted", self.upserted);
            }
        }
        if !self.errors.is_empty() {
            out.insert("writeErrors", self.errors);
        }
        out.insert("ok", 1.0);
        out
    }
}

/// The reply a findAndModify gave, rebuilt from its record.
fn find_and_modify_reply(cmd: &Document, rec: &Document) -> DocResult<Document> {
    let old = rec.get_document("old").ok();
    let new = rec.get_document("new").ok();
    let want_new = cmd.get_bool("new").unwrap_or(false);
    let image = if want_new { new } else { old };
    let value = match (image, cmd.get_document("fields")) {
        (Some(d), Ok(f)) if !f.is_empty() => {
            Bson::Document(query::projection::Projection::parse(f)?.apply_matched(d, None)?)
        }
        (Some(d), _) => Bson::Document(d.clone()),
        (None, _) => Bson::Null,
    };
    let mut leo = doc! {"n": 1, "updatedExisting": old.is_some() && new.is_some()};
    if old.is_none() {
        if let Some(id) = new.and_then(|d| d.get("_id")) {
            leo.insert("upserted", id.clone());
        }
    }
    Ok(doc! {"lastErrorObject": leo, "value": value, "ok": 1.0})
}
