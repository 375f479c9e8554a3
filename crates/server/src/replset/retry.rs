//! Retryable writes on a member's primary (`retryable` splits and merges): each statement runs
//! inside `docdb::oplog::with_retryable_write`, so its oplog entry carries `lsid`, `txnNumber`
//! and `stmtId` and its record joins the entry's batch; a retry, on this primary or on the one
//! a failover made (whose applier recorded the statement as it applied the entry), is answered
//! from the record. A session is checked out for the command's statements, as mongod checks
//! out a session: a retry that arrives while its first execution still runs waits for it, then
//! finds its records. The write concern is the command's (`concern::acknowledged`): it waits
//! for the newest entry this primary proposed, which is at or after every entry the command's
//! statements wrote; a record found on a new primary is of an entry its applier applied, which
//! Raft applies only once a majority holds it.

use crate::retryable::{self, Session, Split, Statement};
use bson::Document;
use docdb::oplog::{sessions::transaction_too_old, RetryableWrite};
use docdb::{DocDb, DocError, DocResult};
use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;

/// Whether a member runs this command as a retryable write: one of the four write commands with
/// `txnNumber`, outside a transaction (refused by name where the generic fields are checked).
pub fn applies(name: &str, cmd: &Document) -> bool {
    retryable::is_retryable_command(name)
        && cmd.contains_key("txnNumber")
        && !cmd.contains_key("startTransaction")
        && !cmd.contains_key("autocommit")
}

/// The sessions whose retryable writes are running.
#[derive(Default)]
pub struct Checkouts {
    held: Mutex<HashSet<Vec<u8>>>,
    freed: Condvar,
}

/// A session checked out until dropped.
pub struct CheckedOut<'a> {
    checkouts: &'a Checkouts,
    key: Vec<u8>,
}

impl Checkouts {
    /// Checks `key` out, waiting while another command has it.
    pub fn check_out(&self, key: &[u8]) -> CheckedOut<'_> {
        let mut held = self.held.lock();
        while held.contains(key) {
            self.freed.wait(&mut held);
        }
        held.insert(key.to_vec());
        CheckedOut {
            checkouts: self,
            key: key.to_vec(),
        }
    }
}

impl Drop for CheckedOut<'_> {
    fn drop(&mut self) {
        self.checkouts.held.lock().remove(&self.key);
        self.checkouts.freed.notify_all();
    }
}

/// Runs the retryable write `name` on `db` (a member's), each unexecuted statement through
/// `run_one` (the command's built-in, which writes and logs it).
pub fn run(
    db: &DocDb,
    checkouts: &Checkouts,
    name: &str,
    cmd: &Document,
    mut run_one: impl FnMut(&Document) -> Document,
) -> DocResult<Document> {
    let session = Session::of(cmd)?;
    let split = retryable::split(name, cmd)?;
    let log = db
        .oplog()
        .ok_or_else(|| DocError::illegal_operation("retryable writes need a member's oplog"))?;
    let _checked_out = checkouts.check_out(&session.key);
    if let Some(newest) = log.sessions().newest_txn(&session.key)? {
        if newest > session.txn_number {
            return Err(transaction_too_old(session.txn_number, newest));
        }
    }
    let lookup = |stmt| {
        log.sessions()
            .lookup(&session.key, session.txn_number, stmt)
    };
    let write = |s: &Statement| {
        let w = statement_write(&session, &split, s);
        docdb::oplog::with_retryable_write(w, || run_one(&s.cmd))
    };
    Ok(retryable::run_statements(&split, lookup, write))
}

/// The retryable write the statement `s` of `split` logs itself in.
fn statement_write(session: &Session, split: &Split, s: &Statement) -> RetryableWrite {
    let image = match split.kind {
        retryable::WriteKind::FindAndModify(image) => Some(image),
        _ => None,
    };
    RetryableWrite {
        lsid: session.lsid.clone(),
        txn_number: session.txn_number,
        first_stmt_id: s.stmt_id,
        image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, Uuid};
    use docdb::oplog::OplogSettings;
    use docdb::{DocDbConfig, FindQuery, WriteOpts};
    use std::cell::Cell;
    use std::sync::Arc;

    fn member() -> Arc<DocDb> {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings::from_mb(1.0).unwrap());
        DocDb::open(cfg).unwrap()
    }

    /// The built-in insert of a one-statement command, counting its runs.
    fn insert_one<'a>(
        db: &'a DocDb,
        runs: &'a Cell<usize>,
    ) -> impl FnMut(&Document) -> Document + 'a {
        move |one| {
            runs.set(runs.get() + 1);
            let docs = one.get_array("documents").unwrap();
            let docs = docs
                .iter()
                .map(|d| d.as_document().unwrap().clone())
                .collect();
            let out = db.insert("app", "c", docs, WriteOpts::default());
            assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
            doc! {"n": out.n as i32, "ok": 1.0}
        }
    }

    fn count(db: &DocDb) -> usize {
        db.find("app", "c", &FindQuery::default()).unwrap().count()
    }

    fn insert_cmd(lsid: &Document, txn: i64, ids: &[i32]) -> Document {
        let docs: Vec<Bson> = ids
            .iter()
            .map(|i| Bson::Document(doc! {"_id": *i}))
            .collect();
        doc! {"insert": "c", "documents": docs, "lsid": lsid.clone(), "txnNumber": txn}
    }

    #[test]
    fn a_retry_is_answered_from_the_records_and_only_the_rest_runs() {
        let db = member();
        let checkouts = Checkouts::default();
        let lsid = doc! {"id": Uuid::new()};
        let runs = Cell::new(0);
        let first = run(
            &db,
            &checkouts,
            "insert",
            &insert_cmd(&lsid, 1, &[1]),
            insert_one(&db, &runs),
        );
        assert_eq!(first.unwrap(), doc! {"n": 1, "ok": 1.0});
        // The same statement again, then a batch whose first statement ran already.
        let again = run(
            &db,
            &checkouts,
            "insert",
            &insert_cmd(&lsid, 1, &[1]),
            insert_one(&db, &runs),
        );
        assert_eq!(again.unwrap(), doc! {"n": 1, "ok": 1.0});
        assert_eq!(runs.get(), 1, "the retry applies nothing");
        let batch = run(
            &db,
            &checkouts,
            "insert",
            &insert_cmd(&lsid, 1, &[1, 2]),
            insert_one(&db, &runs),
        );
        assert_eq!(batch.unwrap(), doc! {"n": 2, "ok": 1.0});
        assert_eq!((runs.get(), count(&db)), (2, 2), "only statement 1 ran");
        // A new txnNumber runs its statements.
        let next = run(
            &db,
            &checkouts,
            "insert",
            &insert_cmd(&lsid, 2, &[3]),
            insert_one(&db, &runs),
        );
        assert_eq!(next.unwrap(), doc! {"n": 1, "ok": 1.0});
        assert_eq!((runs.get(), count(&db)), (3, 3));
    }

    #[test]
    fn an_older_txn_number_is_too_old() {
        let db = member();
        let checkouts = Checkouts::default();
        let lsid = doc! {"id": Uuid::new()};
        let runs = Cell::new(0);
        run(
            &db,
            &checkouts,
            "insert",
            &insert_cmd(&lsid, 5, &[1]),
            insert_one(&db, &runs),
        )
        .unwrap();
        let old = run(
            &db,
            &checkouts,
            "insert",
            &insert_cmd(&lsid, 4, &[2]),
            insert_one(&db, &runs),
        );
        assert_eq!(old.unwrap_err().code, 225);
        assert_eq!((runs.get(), count(&db)), (1, 1));
    }

    #[test]
    fn multi_statement_writes_and_bad_session_fields_are_refused() {
        let db = member();
        let checkouts = Checkouts::default();
        let lsid = doc! {"id": Uuid::new()};
        let never = |_: &Document| -> Document { panic!("nothing runs") };
        let multi = doc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}, "multi": true}], "lsid": lsid.clone(), "txnNumber": 1_i64};
        assert_eq!(
            run(&db, &checkouts, "update", &multi, never)
                .unwrap_err()
                .code,
            72
        );
        let all = doc! {"delete": "c", "deletes": [{"q": {}, "limit": 0}], "lsid": lsid.clone(), "txnNumber": 1_i64};
        assert_eq!(
            run(&db, &checkouts, "delete", &all, never)
                .unwrap_err()
                .code,
            72
        );
        let no_lsid = doc! {"insert": "c", "documents": [{}], "txnNumber": 1_i64};
        assert_eq!(
            run(&db, &checkouts, "insert", &no_lsid, never)
                .unwrap_err()
                .code,
            72
        );
        let negative = insert_cmd(&lsid, -1, &[1]);
        assert_eq!(
            run(&db, &checkouts, "insert", &negative, never)
                .unwrap_err()
                .code,
            2
        );
        let mut short = insert_cmd(&lsid, 1, &[1, 2]);
        short.insert("stmtIds", vec![Bson::Int32(0)]);
        assert_eq!(
            run(&db, &checkouts, "insert", &short, never)
                .unwrap_err()
                .code,
            2
        );
    }
}
