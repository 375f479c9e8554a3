//! Multi-document transactions on a member's primary (docdb's `txn`; docs/replication.md,
//! "Transactions"). A session's transaction is kept here by `lsid` with its `txnNumber`:
//! `startTransaction: true` (with `autocommit: false`) begins it, later statements carrying
//! `autocommit: false` run inside it (`docdb::txn::with_txn`), `commitTransaction` and
//! `abortTransaction` end it. The session is checked out for each of its commands, as for a
//! retryable write. Errors are mongod's: NoSuchTransaction (251) and WriteConflict (112)
//! labelled TransientTransactionError, TransactionTooOld (225), a commit whose write concern
//! failed labelled UnknownTransactionCommitResult.

use crate::replset::concern::{self, Admitted};
use crate::replset::ReplSet;
use crate::reply::error_reply;
use crate::retryable::Session;
use crate::spec::Spec;
use bson::{doc, Bson, Document};
use docdb::oplog::sessions::transaction_too_old;
use docdb::txn::{self, no_such_transaction, Txn, TxnSession, TxnState};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The commands a transaction may run, as mongod allows them (no DDL, no `count`).
const STATEMENTS: &[&str] = &[
    "find",
    "getMore",
    "killCursors",
    "insert",
    "update",
    "delete",
    "findAndModify",
    "aggregate",
    "distinct",
];

/// The label of a commit whose outcome the client cannot know.
const UNKNOWN_COMMIT_LABEL: &str = "UnknownTransactionCommitResult";

/// Whether the command belongs to a transaction: `commitTransaction`, `abortTransaction`, or a
/// command with `autocommit` or `startTransaction`.
pub fn applies(name: &str, cmd: &Document) -> bool {
    matches!(name, "commitTransaction" | "abortTransaction")
        || cmd.contains_key("autocommit")
        || cmd.contains_key("startTransaction")
}

/// Each session's newest transaction, by session key.
#[derive(Default)]
pub struct SessionTxns {
    by_session: Mutex<HashMap<Vec<u8>, KeptTxn>>,
}

/// A session's transaction and its `txnNumber`.
struct KeptTxn {
    number: i64,
    txn: Arc<Txn>,
}

fn invalid(message: impl Into<String>) -> DocError {
    DocError::invalid_options(message)
}

/// A transaction command's session and whether it starts the transaction.
struct TxnFields {
    session: Session,
    start: bool,
}

fn parse(cmd: &Document) -> DocResult<TxnFields> {
    let session = Session::of(cmd)?;
    match cmd.get("autocommit") {
        Some(Bson::Boolean(false)) => {}
        Some(Bson::Boolean(true)) => return Err(invalid("autocommit must be false")),
        Some(_) => return Err(DocError::type_mismatch("autocommit must be a boolean")),
        None => return Err(invalid("a transaction's commands carry autocommit: false")),
    }
    let start = match cmd.get("startTransaction") {
        None => false,
        Some(Bson::Boolean(true)) => true,
        Some(Bson::Boolean(false)) => return Err(invalid("startTransaction must be true")),
        Some(_) => {
            return Err(DocError::type_mismatch(
                "startTransaction must be a boolean",
            ))
        }
    };
    Ok(TxnFields { session, start })
}

/// Runs a transaction command on `rs` (its primary): a statement through `run_one` (the
/// command's built-in, given the command without the transaction fields), or the commit or
/// abort. `writes_collections`: an aggregate's `$out` or `$merge`, refused.
pub fn run(
    rs: &ReplSet,
    spec: Option<&Spec>,
    name: &str,
    db: &str,
    cmd: &Document,
    writes_collections: bool,
    run_one: impl FnOnce(&Document) -> Document,
) -> Document {
    rs.db.txns().reap_expired();
    let result = match name {
        "commitTransaction" => with_write_concern(rs, spec, db, cmd, true, || commit(rs, cmd)),
        "abortTransaction" => with_write_concern(rs, spec, db, cmd, false, || abort(rs, cmd)),
        _ => statement(rs, name, cmd, writes_collections, run_one),
    };
    result.unwrap_or_else(|e| error_reply(&e))
}

/// Runs a commit or abort as a write: refused off the primary, then acknowledged as its write
/// concern asks. A commit whose write concern failed is labelled
/// UnknownTransactionCommitResult, as mongod labels it.
fn with_write_concern(
    rs: &ReplSet,
    spec: Option<&Spec>,
    db: &str,
    cmd: &Document,
    commit: bool,
    body: impl FnOnce() -> DocResult<()>,
) -> DocResult<Document> {
    // No read concern, so no `afterClusterTime` to wait for: no time limit to pass.
    let Admitted::Write(gate, ack) = concern::admit(rs, spec, true, db, cmd, None)? else {
        return Err(invalid(
            "commitTransaction and abortTransaction run on admin",
        ));
    };
    body()?;
    let mut reply = doc! {"ok": 1.0};
    concern::acknowledged(rs, gate, ack, &mut reply);
    if commit && reply.contains_key("writeConcernError") {
        reply.insert("errorLabels", vec![UNKNOWN_COMMIT_LABEL]);
    }
    Ok(reply)
}

/// The session's transaction `number`, if it is the one kept.
fn kept(rs: &ReplSet, s: &Session) -> Option<Arc<Txn>> {
    match rs.txns.by_session.lock().get(&s.key) {
        Some(k) if k.number == s.txn_number => Some(k.txn.clone()),
        _ => None,
    }
}

/// A newer transaction of the session (kept, or recorded) makes `s`'s too old.
fn check_not_too_old(rs: &ReplSet, s: &Session) -> DocResult<()> {
    let kept = rs.txns.by_session.lock().get(&s.key).map(|k| k.number);
    let log = rs.db.oplog().expect("a member has its oplog");
    let recorded = log.sessions().newest_txn(&s.key)?;
    match kept.into_iter().chain(recorded).max() {
        Some(newest) if newest > s.txn_number => Err(transaction_too_old(s.txn_number, newest)),
        _ => Ok(()),
    }
}

fn commit(rs: &ReplSet, cmd: &Document) -> DocResult<()> {
    let f = parse(cmd)?;
    let _checked_out = rs.checkouts.check_out(&f.session.key);
    let Some(t) = kept(rs, &f.session) else {
        // A retry on a later primary: the session records the commit with the entry.
        let log = rs.db.oplog().expect("a member has its oplog");
        let rec = log.sessions().lookup(
            &f.session.key,
            f.session.txn_number,
            docdb::oplog::TXN_COMMITTED_STMT,
        )?;
        if rec.is_some() {
            return Ok(());
        }
        check_not_too_old(rs, &f.session)?;
        return Err(no_such_transaction(format!(
            "Given transaction number {} does not match any in-progress transactions",
            f.session.txn_number
        )));
    };
    match t.state() {
        // A retried commit answers as the first did.
        TxnState::Committed => Ok(()),
        _ => rs.db.commit_txn(&t),
    }
}

fn abort(rs: &ReplSet, cmd: &Document) -> DocResult<()> {
    let f = parse(cmd)?;
    let _checked_out = rs.checkouts.check_out(&f.session.key);
    match kept(rs, &f.session) {
        Some(t) => t.abort("abortTransaction"),
        None => {
            check_not_too_old(rs, &f.session)?;
            Err(no_such_transaction(format!(
                "Given transaction number {} does not match any in-progress transactions",
                f.session.txn_number
            )))
        }
    }
}

/// A statement of a transaction: begun by it or continuing it, run inside it.
fn statement(
    rs: &ReplSet,
    name: &str,
    cmd: &Document,
    writes_collections: bool,
    run_one: impl FnOnce(&Document) -> Document,
) -> DocResult<Document> {
    let f = parse(cmd)?;
    if !STATEMENTS.contains(&name) {
        return Err(txn::not_in_transaction(format!(
            "Cannot run '{name}' in a multi-document transaction."
        )));
    }
    // `$out` and `$merge` create and rename collections: DDL, not transactional.
    if writes_collections {
        return Err(txn::not_in_transaction(
            "$out and $merge are not allowed in a multi-document transaction",
        ));
    }
    if cmd.contains_key("writeConcern") {
        return Err(invalid(
            "Cannot set write concern after starting a transaction.",
        ));
    }
    if f.start {
        wait_for_cluster_time(rs, cmd)?;
    }
    let _gate = rs.write_gate().ok_or_else(concern::not_writable_primary)?;
    let _checked_out = rs.checkouts.check_out(&f.session.key);
    let t = if f.start {
        begin(rs, &f.session, cmd)?
    } else {
        if cmd.contains_key("readConcern") {
            return Err(invalid(
                "Only the first command in a transaction may specify a readConcern",
            ));
        }
        continuing(rs, &f.session)?
    };
    let mut one = cmd.clone();
    for field in ["txnNumber", "autocommit", "startTransaction", "readConcern"] {
        one.remove(field);
    }
    let reply = txn::with_txn(&t, || Ok(run_one(&one)))?;
    Ok(after_statement(&t, reply))
}

/// A causally consistent session's first statement carries `readConcern.afterClusterTime`:
/// the transaction's snapshot must hold what the session saw, so the statement waits for the
/// member to reach that time (bounded by `maxTimeMS`) before its snapshot is taken, outside
/// the write licence (the wait may write a no-op).
fn wait_for_cluster_time(rs: &ReplSet, cmd: &Document) -> DocResult<()> {
    let Some(t) = super::causal::after_cluster_time(cmd)? else {
        return Ok(());
    };
    let max_time_ms = match cmd.get("maxTimeMS") {
        Some(Bson::Int32(ms)) => i64::from(*ms),
        Some(Bson::Int64(ms)) => *ms,
        Some(Bson::Double(ms)) => *ms as i64,
        _ => 0,
    };
    let limit = match u64::try_from(max_time_ms) {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => concern::MAJORITY_WAIT_LIMIT,
    };
    super::causal::wait_after(rs, t, Instant::now() + limit)
}

/// Begins the session's transaction `s.txn_number` (an older one of the session is aborted).
fn begin(rs: &ReplSet, s: &Session, cmd: &Document) -> DocResult<Arc<Txn>> {
    if let Ok(rc) = cmd.get_document("readConcern") {
        let level = rc.get_str("level").unwrap_or("local");
        if !matches!(level, "local" | "majority" | "snapshot") {
            return Err(invalid(format!(
                "The readConcern level must be either 'local' (default), 'majority' or \
                 'snapshot' in a transaction, not '{level}'"
            )));
        }
    }
    check_not_too_old(rs, s)?;
    let mut sessions = rs.txns.by_session.lock();
    if let Some(old) = sessions.get(&s.key) {
        if old.number == s.txn_number {
            return Err(DocError::with_code(
                117,
                "ConflictingOperationInProgress",
                format!(
                    "transaction {} has already been started on this session",
                    old.number
                ),
            ));
        }
        // Ended already, or left open by the client: a newer one replaces it.
        let _ = old.txn.abort("a newer transaction started on the session");
    }
    let t = rs.db.begin_txn(Some(TxnSession {
        lsid: s.lsid.clone(),
        txn_number: s.txn_number,
    }))?;
    sessions.insert(
        s.key.clone(),
        KeptTxn {
            number: s.txn_number,
            txn: t.clone(),
        },
    );
    Ok(t)
}

fn continuing(rs: &ReplSet, s: &Session) -> DocResult<Arc<Txn>> {
    if let Some(t) = kept(rs, s) {
        return Ok(t);
    }
    check_not_too_old(rs, s)?;
    Err(no_such_transaction(format!(
        "Given transaction number {} does not match any in-progress transactions",
        s.txn_number
    )))
}

/// A statement's reply as mongod gives it in a transaction: a write conflict is the command's
/// error, labelled TransientTransactionError (the transaction is aborted); any other error
/// aborts the transaction too.
fn after_statement(t: &Txn, reply: Document) -> Document {
    let first_write_error = reply
        .get_array("writeErrors")
        .ok()
        .and_then(|w| w.first())
        .and_then(Bson::as_document)
        .cloned();
    if let Some(we) = &first_write_error {
        if we.get_i32("code") == Ok(112) {
            let message = we.get_str("errmsg").unwrap_or("write conflict");
            return error_reply(&txn::write_conflict(message));
        }
    }
    let ok = reply
        .get("ok")
        .and_then(query::compare::Num::of)
        .is_some_and(|n| n.as_f64() == 1.0);
    if !ok || first_write_error.is_some() {
        let _ = t.abort("a statement of the transaction failed");
    }
    reply
}
