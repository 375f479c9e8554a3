//! Retryable writes, statement by statement: the part a replica-set member and a shard share.
//! A write command with `lsid` and `txnNumber` (insert, update, delete, findAndModify) is split
//! into one-statement commands, each with its `stmtId` (`stmtIds`, or the statement's index);
//! a statement whose record says it was executed is answered from the record, the others run
//! (where each node records them is its own: a member in its oplog entry's batch, a shard in
//! its write hook's), and the one-statement replies are merged into the command's reply. See
//! docs/replication.md, "Retryable writes".

use bson::{doc, Bson, Document};
use docdb::oplog::{RetryImage, StatementRecord};
use docdb::{DocError, DocResult};

/// The write commands that are retryable writes when they carry `txnNumber`.
pub fn is_retryable_command(name: &str) -> bool {
    matches!(
        name,
        "insert" | "update" | "delete" | "findAndModify" | "findandmodify"
    )
}

/// A retryable write's session: its `lsid` and `txnNumber`.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub lsid: Document,
    /// The session table's key of `lsid`.
    pub key: Vec<u8>,
    pub txn_number: i64,
}

impl Session {
    /// From a command with `txnNumber`: it needs an `lsid`, and a number not below zero.
    pub fn of(cmd: &Document) -> DocResult<Session> {
        let txn_number = match cmd.get("txnNumber") {
            Some(Bson::Int64(t)) => *t,
            Some(Bson::Int32(t)) => i64::from(*t),
            _ => {
                return Err(DocError::type_mismatch(
                    "txnNumber must be a 64-bit integer",
                ))
            }
        };
        if txn_number < 0 {
            return Err(DocError::bad_value(format!(
                "txnNumber may not be negative, got {txn_number}"
            )));
        }
        let lsid = cmd.get_document("lsid").map_err(|_| {
            DocError::invalid_options(
                "Transaction number requires a session ID (lsid) to also be specified",
            )
        })?;
        Ok(Session {
            key: docdb::oplog::sessions::session_key(lsid),
            lsid: lsid.clone(),
            txn_number,
        })
    }
}

/// Which write a retryable command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Insert,
    Update,
    Delete,
    /// A findAndModify, and the image its reply's `value` is.
    FindAndModify(RetryImage),
}

/// One statement of a retryable write: its id and its one-statement command.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    pub stmt_id: i32,
    pub cmd: Document,
}

/// A retryable write split into its statements.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub kind: WriteKind,
    pub ordered: bool,
    pub statements: Vec<Statement>,
}

fn refuse_multi(kind: WriteKind, stmt: &Document) -> DocResult<()> {
    let multi = match kind {
        WriteKind::Update => stmt.get_bool("multi").unwrap_or(false),
        WriteKind::Delete => stmt
            .get("limit")
            .and_then(query::compare::Num::of)
            .is_some_and(|n| n.as_f64() == 0.0),
        _ => false,
    };
    if multi {
        let what = if kind == WriteKind::Update {
            "multi=true"
        } else {
            "limit=0"
        };
        return Err(DocError::invalid_options(format!(
            "Cannot use (or request) retryable writes with {what}"
        )));
    }
    Ok(())
}

/// The statement ids of `n` statements: `stmtIds` when the command has them, else 0, 1, ….
fn statement_ids(cmd: &Document, n: usize) -> DocResult<Vec<i32>> {
    let Some(ids) = cmd.get("stmtIds") else {
        return Ok((0..n as i32).collect());
    };
    let ids: Option<Vec<i32>> = match ids {
        Bson::Array(a) => a.iter().map(Bson::as_i32).collect(),
        _ => None,
    };
    match ids {
        Some(ids) if ids.len() == n => Ok(ids),
        _ => Err(DocError::bad_value(
            "stmtIds must be an array of 32-bit integers, one per statement",
        )),
    }
}

/// Splits a retryable write command (`name`, one of [`is_retryable_command`]'s) into its
/// statements; each one-statement command keeps the command's fields but the session's
/// statement fields (`txnNumber`, `stmtIds`, `stmtId`). A multi-document update or delete is
/// refused, as mongod refuses it: it is not one statement.
pub fn split(name: &str, cmd: &Document) -> DocResult<Split> {
    let mut base = cmd.clone();
    for k in ["txnNumber", "stmtIds", "stmtId"] {
        base.remove(k);
    }
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let (field, kind) = match name {
        "insert" => ("documents", WriteKind::Insert),
        "update" => ("updates", WriteKind::Update),
        "delete" => ("deletes", WriteKind::Delete),
        _ => {
            let post =
                cmd.get_bool("new").unwrap_or(false) && !cmd.get_bool("remove").unwrap_or(false);
            let image = if post {
                RetryImage::Post
            } else {
                RetryImage::Pre
            };
            let stmt_id = match cmd.get("stmtId") {
                None => 0,
                Some(v) => v
                    .as_i32()
                    .ok_or_else(|| DocError::type_mismatch("stmtId must be a 32-bit integer"))?,
            };
            let statements = vec![Statement { stmt_id, cmd: base }];
            let kind = WriteKind::FindAndModify(image);
            return Ok(Split {
                kind,
                ordered,
                statements,
            });
        }
    };
    let stmts = cmd
        .get_array(field)
        .map_err(|_| DocError::type_mismatch(format!("{name}.{field} must be an array")))?;
    let ids = statement_ids(cmd, stmts.len())?;
    // Without the statements: each statement's command is the base plus itself, so a copy
    // of the whole array in each made a bulk write quadratic (3 000 inserts, 10 s).
    base.remove(field);
    let mut statements = Vec::with_capacity(stmts.len());
    for (stmt, stmt_id) in stmts.iter().zip(ids) {
        if let Bson::Document(d) = stmt {
            refuse_multi(kind, d)?;
        }
        let mut one = base.clone();
        one.insert(field, vec![stmt.clone()]);
        statements.push(Statement { stmt_id, cmd: one });
    }
    Ok(Split {
        kind,
        ordered,
        statements,
    })
}

/// The reply the statement `rec` records gave the first time, rebuilt (a one-statement reply;
/// `cmd`: the retry's, whose `fields` a findAndModify's value is projected by).
pub fn recorded_reply(
    kind: WriteKind,
    cmd: &Document,
    rec: &StatementRecord,
) -> DocResult<Document> {
    let upserted = rec.op == "i";
    Ok(match kind {
        WriteKind::Insert | WriteKind::Delete => doc! {"n": 1, "ok": 1.0},
        WriteKind::Update if upserted => {
            let up = doc! {"index": 0, "_id": rec.id.clone()};
            doc! {"n": 1, "nModified": 0, "upserted": [up], "ok": 1.0}
        }
        WriteKind::Update => doc! {"n": 1, "nModified": 1, "ok": 1.0},
        WriteKind::FindAndModify(_) => {
            let image = rec.image.as_ref().map(|(_, d)| d);
            let value = match (image, cmd.get_document("fields")) {
                (Some(d), Ok(f)) if !f.is_empty() => {
                    Bson::Document(query::projection::Projection::parse(f)?.apply_matched(d, None)?)
                }
                (Some(d), _) => Bson::Document(d.clone()),
                (None, _) => Bson::Null,
            };
            let mut leo = doc! {"n": 1, "updatedExisting": rec.op == "u"};
            if upserted {
                leo.insert("upserted", rec.id.clone());
            }
            doc! {"lastErrorObject": leo, "value": value, "ok": 1.0}
        }
    })
}

/// Whether a reply is a success (`ok: 1`).
pub fn is_ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(d)) => *d == 1.0,
        Some(Bson::Int32(i)) => *i == 1,
        Some(Bson::Int64(i)) => *i == 1,
        Some(Bson::Boolean(b)) => *b,
        _ => false,
    }
}

fn count(reply: &Document, field: &str) -> i64 {
    reply
        .get(field)
        .and_then(query::compare::Num::of)
        .map_or(0, |n| n.as_f64() as i64)
}

/// The one-statement replies of a command, merged into the command's reply.
#[derive(Default)]
pub struct MergedReplies {
    n: i64,
    modified: i64,
    upserted: Vec<Bson>,
    errors: Vec<Bson>,
}

impl MergedReplies {
    /// Adds statement `i`'s reply; true when the statement failed.
    pub fn add(&mut self, i: usize, reply: &Document) -> bool {
        self.n += count(reply, "n");
        self.modified += count(reply, "nModified");
        if let Ok(list) = reply.get_array("upserted") {
            for u in list.iter().filter_map(Bson::as_document) {
                let mut u = u.clone();
                u.insert("index", i as i32);
                self.upserted.push(Bson::Document(u));
            }
        }
        let mut failed = false;
        if !is_ok(reply) {
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

    /// The command's reply for a write of `kind`.
    pub fn reply(self, kind: WriteKind) -> Document {
        let mut out = doc! {"n": self.n as i32};
        if kind == WriteKind::Update {
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

/// Statement `s`'s reply: from its record if `lookup` finds one, else from `run_one`.
fn answer(
    kind: WriteKind,
    s: &Statement,
    lookup: &mut impl FnMut(i32) -> DocResult<Option<StatementRecord>>,
    run_one: &mut impl FnMut(&Statement) -> Document,
) -> Document {
    match lookup(s.stmt_id) {
        Ok(Some(rec)) => {
            recorded_reply(kind, &s.cmd, &rec).unwrap_or_else(|e| crate::reply::error_reply(&e))
        }
        Ok(None) => run_one(s),
        Err(e) => crate::reply::error_reply(&e),
    }
}

/// Runs a split retryable write: each statement `lookup` finds a record of is answered from
/// it; the others go to `run_one` (which runs the one-statement command and records it).
/// An ordered write stops at its first failed statement. A command error (`ok: 0`) of the
/// first statement is the command's, as it would be unsplit (a driver retries on it); one of
/// a later statement is that statement's write error, after those that ran.
pub fn run_statements(
    split: &Split,
    mut lookup: impl FnMut(i32) -> DocResult<Option<StatementRecord>>,
    mut run_one: impl FnMut(&Statement) -> Document,
) -> Document {
    if let WriteKind::FindAndModify(_) = split.kind {
        let s = &split.statements[0];
        return answer(split.kind, s, &mut lookup, &mut run_one);
    }
    let mut merged = MergedReplies::default();
    for (i, s) in split.statements.iter().enumerate() {
        let reply = answer(split.kind, s, &mut lookup, &mut run_one);
        if i == 0 && !is_ok(&reply) {
            return reply;
        }
        if merged.add(i, &reply) && split.ordered {
            break;
        }
    }
    merged.reply(split.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(op: &str, image: Option<(RetryImage, Document)>) -> StatementRecord {
        StatementRecord {
            txn_number: 1,
            stmt_id: 0,
            ts: None,
            op: op.to_string(),
            id: Bson::Int32(7),
            image,
        }
    }

    #[test]
    fn a_command_splits_into_its_statements_without_the_session_fields() {
        let cmd = doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}], "ordered": false, "txnNumber": 3_i64, "stmtIds": [5, 9]};
        let split = split("insert", &cmd).unwrap();
        assert_eq!((split.kind, split.ordered), (WriteKind::Insert, false));
        let ids: Vec<i32> = split.statements.iter().map(|s| s.stmt_id).collect();
        assert_eq!(ids, [5, 9]);
        assert_eq!(
            split.statements[1].cmd,
            doc! {"insert": "c", "documents": [{"_id": 2}], "ordered": false}
        );
        let fam = doc! {"findAndModify": "c", "remove": true, "new": true, "txnNumber": 3_i64};
        let split = super::split("findAndModify", &fam).unwrap();
        assert_eq!(split.kind, WriteKind::FindAndModify(RetryImage::Pre));
        assert_eq!(split.statements[0].stmt_id, 0);
    }

    #[test]
    fn a_reply_is_rebuilt_from_its_record() {
        let upsert = recorded_reply(WriteKind::Update, &doc! {}, &record("i", None)).unwrap();
        assert_eq!(
            upsert.get_array("upserted").unwrap()[0],
            Bson::Document(doc! {"index": 0, "_id": 7})
        );
        let image = doc! {"_id": 7, "a": 1, "b": 2};
        let rec = record("u", Some((RetryImage::Post, image)));
        let cmd = doc! {"findAndModify": "c", "fields": {"a": 1}};
        let fam = recorded_reply(WriteKind::FindAndModify(RetryImage::Post), &cmd, &rec).unwrap();
        assert_eq!(fam.get_document("value").unwrap(), &doc! {"_id": 7, "a": 1});
        assert_eq!(
            fam.get_document("lastErrorObject").unwrap(),
            &doc! {"n": 1, "updatedExisting": true}
        );
    }

    #[test]
    fn an_ordered_write_stops_at_its_first_failed_statement() {
        let cmd = doc! {"insert": "c", "documents": [{}, {}, {}], "txnNumber": 1_i64};
        let split = split("insert", &cmd).unwrap();
        let dup = doc! {"n": 0, "writeErrors": [{"index": 0, "code": 11000}], "ok": 1.0};
        let mut ran = Vec::new();
        let reply = run_statements(
            &split,
            |_| Ok(None),
            |s| {
                ran.push(s.stmt_id);
                if s.stmt_id == 1 {
                    dup.clone()
                } else {
                    doc! {"n": 1, "ok": 1.0}
                }
            },
        );
        assert_eq!(ran, [0, 1]);
        assert_eq!(
            reply,
            doc! {"n": 1, "writeErrors": [{"index": 1, "code": 11000}], "ok": 1.0}
        );
        let refused = doc! {"ok": 0.0, "code": 10107, "codeName": "NotWritablePrimary"};
        let first = run_statements(&split, |_| Ok(None), |_| refused.clone());
        assert_eq!(
            first, refused,
            "the first statement's command error is the command's"
        );
    }
}
