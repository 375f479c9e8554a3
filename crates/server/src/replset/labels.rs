//! The error labels a member puts on a transaction command's failed reply, by mongod's rules
//! (its `ErrorLabelBuilder`; docs/replication.md, "Transactions"): TransientTransactionError
//! on an error after which the whole transaction may be retried, else RetryableWriteError on a
//! commit or abort that failed the way a retryable write may be retried. They are computed from
//! the reply's code, so a `failCommand` error gets them as the command's own error would.
//! UnknownTransactionCommitResult is the driver's label, added on its side to a commit it
//! cannot know the outcome of (mongod's SERVER-41125): the server never needs it to retry.

use bson::{Bson, Document};
use docdb::txn::TRANSIENT_LABEL;

/// The label of an error a driver may retry the commit or abort after.
pub const RETRYABLE_WRITE_LABEL: &str = "RetryableWriteError";

/// mongod's NoSuchTransaction.
const NO_SUCH_TRANSACTION: i32 = 251;

/// Codes after which a transaction had no lasting effect: WriteConflict, LockTimeout,
/// PreparedTransactionInProgress, the snapshot errors (SnapshotTooOld, SnapshotUnavailable,
/// StaleChunkHistory, MigrationConflict), the retargeting ones (StaleShardVersion, StaleEpoch,
/// StaleConfig) and StaleDbVersion. NoSuchTransaction is decided apart.
const TRANSIENT_CODES: &[i32] = &[112, 24, 267, 239, 246, 287, 288, 63, 150, 13388, 249];

/// mongod's retriable errors (the retryable writes spec's list): HostUnreachable,
/// HostNotFound, NetworkTimeout, ShutdownInProgress, PrimarySteppedDown, ExceededTimeLimit,
/// ReadConcernMajorityNotAvailableYet, SocketException, NotWritablePrimary,
/// InterruptedAtShutdown, InterruptedDueToReplStateChange, NotPrimaryNoSecondaryOk,
/// NotPrimaryOrSecondary.
const RETRIABLE_CODES: &[i32] = &[
    6, 7, 89, 91, 189, 262, 134, 9001, 10107, 11600, 11602, 13435, 13436,
];

/// The commands a session's `txnNumber` makes retryable outside a transaction (retryable
/// writes).
const RETRYABLE_WRITE_COMMANDS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
];

/// Whether `cmd` is a retryable write: a write command with a `txnNumber`, outside a
/// transaction (no `autocommit`).
pub fn is_retryable_write(name: &str, cmd: &Document) -> bool {
    cmd.contains_key("txnNumber")
        && !cmd.contains_key("autocommit")
        && RETRYABLE_WRITE_COMMANDS.contains(&name)
}

/// Adds the labels mongod gives `reply`, the answer to the transaction command `cmd`
/// (`name`), to those it carries already; nothing to a reply that succeeded outright.
pub fn label(name: &str, cmd: &Document, reply: &mut Document) {
    if !cmd.contains_key("txnNumber") {
        return;
    }
    let labels = labels_for(name, cmd, reply);
    if labels.is_empty() {
        return;
    }
    let mut all = match reply.remove("errorLabels") {
        Some(Bson::Array(given)) => given,
        _ => Vec::new(),
    };
    for l in labels {
        if !all.iter().any(|g| g.as_str() == Some(l)) {
            all.push(l.into());
        }
    }
    reply.insert("errorLabels", all);
}

fn labels_for(name: &str, cmd: &Document, reply: &Document) -> Vec<&'static str> {
    let code = error_code(reply);
    let wc_code = reply
        .get_document("writeConcernError")
        .ok()
        .and_then(|w| code_of(w.get("code")));
    let commit_or_abort = matches!(name, "commitTransaction" | "abortTransaction");
    let in_transaction = cmd.contains_key("autocommit");
    if in_transaction && code.is_some_and(|c| is_transient(c, wc_code.is_some(), commit_or_abort)) {
        return vec![TRANSIENT_LABEL];
    }
    let retriable = |c: Option<i32>| c.is_some_and(|c| RETRIABLE_CODES.contains(&c));
    // A commit or abort, or a retryable write, that failed the way a retry may mend: the
    // driver retries it only with this label (from 4.4 servers on).
    let retryable = (in_transaction && commit_or_abort) || is_retryable_write(name, cmd);
    if retryable && (retriable(code) || retriable(wc_code)) {
        return vec![RETRYABLE_WRITE_LABEL];
    }
    Vec::new()
}

/// mongod's `isTransientTransactionError`: a commit's or abort's NoSuchTransaction only when
/// no write concern error came with it (else the commit may have happened and be rolled back).
fn is_transient(code: i32, has_write_concern_error: bool, commit_or_abort: bool) -> bool {
    if code == NO_SUCH_TRANSACTION {
        return !(commit_or_abort && has_write_concern_error);
    }
    TRANSIENT_CODES.contains(&code)
}

/// The code of a failed reply (`ok` not 1), if it has one.
fn error_code(reply: &Document) -> Option<i32> {
    let ok = reply
        .get("ok")
        .and_then(query::compare::Num::of)
        .is_some_and(|n| n.as_f64() == 1.0);
    if ok {
        return None;
    }
    code_of(reply.get("code"))
}

fn code_of(v: Option<&Bson>) -> Option<i32> {
    match v? {
        Bson::Int32(c) => Some(*c),
        Bson::Int64(c) => i32::try_from(*c).ok(),
        Bson::Double(c) => Some(*c as i32),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_retryable_write_that_failed_retriably_is_labelled_and_no_other() {
        let write = doc! {"insert": "c", "lsid": {"id": 1}, "txnNumber": 3_i64};
        let mut reply = doc! {"ok": 0.0, "code": 10107, "errmsg": "not primary"};
        label("insert", &write, &mut reply);
        assert_eq!(
            reply.get_array("errorLabels").unwrap(),
            &vec![Bson::from(RETRYABLE_WRITE_LABEL)]
        );
        let mut wce =
            doc! {"ok": 1.0, "n": 1, "writeConcernError": {"code": 189, "errmsg": "stepped down"}};
        label("insert", &write, &mut wce);
        assert!(wce.get_array("errorLabels").is_ok(), "{wce}");
        // Not retriable (a duplicate key), or not a retryable write (no txnNumber, or a read).
        let mut dup = doc! {"ok": 0.0, "code": 11000};
        label("insert", &write, &mut dup);
        let mut plain = doc! {"ok": 0.0, "code": 10107};
        label("insert", &doc! {"insert": "c"}, &mut plain);
        let mut read = doc! {"ok": 0.0, "code": 10107};
        label("find", &doc! {"find": "c", "txnNumber": 1_i64}, &mut read);
        for r in [dup, plain, read] {
            assert!(!r.contains_key("errorLabels"), "{r}");
        }
    }

    fn txn_cmd(name: &str) -> Document {
        doc! {name: 1, "lsid": {"id": 1}, "txnNumber": 1_i64, "autocommit": false}
    }

    fn labelled(name: &str, reply: Document) -> Option<Vec<Bson>> {
        let mut reply = reply;
        label(name, &txn_cmd(name), &mut reply);
        reply.get_array("errorLabels").ok().cloned()
    }

    #[test]
    fn transient_codes_in_a_statement_and_a_commit() {
        for code in [112, 24, 251, 246] {
            let reply = doc! {"ok": 0.0, "code": code};
            assert_eq!(
                labelled("insert", reply.clone()),
                Some(vec![TRANSIENT_LABEL.into()])
            );
            assert_eq!(
                labelled("commitTransaction", reply),
                Some(vec![TRANSIENT_LABEL.into()])
            );
        }
    }

    #[test]
    fn labels_join_those_the_reply_carries_once() {
        let reply = doc! {"ok": 0.0, "code": 112, "errorLabels": ["Mine", TRANSIENT_LABEL]};
        let want = vec![Bson::from("Mine"), TRANSIENT_LABEL.into()];
        assert_eq!(labelled("insert", reply), Some(want));
    }

    #[test]
    fn a_commits_no_such_transaction_with_a_write_concern_error_is_not_transient() {
        let reply = doc! {"ok": 0.0, "code": 251, "writeConcernError": {"code": 64}};
        assert_eq!(labelled("commitTransaction", reply), None);
    }

    #[test]
    fn a_commit_answered_not_writable_primary_may_be_retried() {
        let reply = doc! {"ok": 0.0, "code": 10107};
        let want = Some(vec![RETRYABLE_WRITE_LABEL.into()]);
        assert_eq!(labelled("commitTransaction", reply.clone()), want);
        assert_eq!(labelled("abortTransaction", reply.clone()), want);
        // A statement is not retried on its own: the driver retries the transaction.
        assert_eq!(labelled("insert", reply), None);
        let wce = doc! {"ok": 1.0, "writeConcernError": {"code": 91, "errmsg": "x"}};
        assert_eq!(labelled("commitTransaction", wce), want);
    }

    #[test]
    fn success_and_other_codes_are_left_alone() {
        assert_eq!(labelled("insert", doc! {"ok": 1.0}), None);
        assert_eq!(labelled("insert", doc! {"ok": 0.0, "code": 11000}), None);
        let mut no_txn = doc! {"ok": 0.0, "code": 112};
        label("insert", &doc! {"insert": "c"}, &mut no_txn);
        assert!(!no_txn.contains_key("errorLabels"));
    }
}
