use super::*;
use crate::db::{DeleteStatement, DocDb, FindQuery, UpdateStatement, WriteOpts, WriteOutcome};
use crate::oplog::OplogSettings;
use crate::DocDbConfig;
use bson::{doc, Bson};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A database with `t.c`, indexed on `v` (and `u`, unique, sparse).
fn open(oplog: bool) -> Arc<DocDb> {
    let mut cfg = DocDbConfig::in_memory();
    if oplog {
        cfg.oplog = Some(OplogSettings {
            size_bytes: 1 << 30,
        });
    }
    let db = DocDb::open(cfg).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[
            doc! {"key": {"v": 1}, "name": "v_1"},
            doc! {"key": {"u": 1}, "name": "u_1", "unique": true, "sparse": true},
        ],
    )
    .unwrap();
    db
}

fn first_error(out: WriteOutcome) -> DocResult<u64> {
    match out.write_errors.into_iter().next() {
        Some(e) => Err(e.error),
        None => Ok(out.n),
    }
}

fn insert(db: &DocDb, d: Document) -> DocResult<u64> {
    first_error(db.insert("t", "c", vec![d], WriteOpts::default()))
}

fn set_v(db: &DocDb, id: i32, v: i64) -> DocResult<u64> {
    let s = UpdateStatement {
        q: doc! {"_id": id},
        u: Bson::Document(doc! {"$set": {"v": v}}),
        ..UpdateStatement::default()
    };
    first_error(db.update("t", "c", &[s], WriteOpts::default()))
}

fn delete(db: &DocDb, id: i32) -> DocResult<u64> {
    let s = DeleteStatement {
        q: doc! {"_id": id},
        limit: 1,
        ..DeleteStatement::default()
    };
    first_error(db.delete("t", "c", &[s], WriteOpts::default()))
}

/// The documents as (`_id`, `v`), by `_id` (a collection scan) or by `v` (the index).
fn read(db: &DocDb, by_v: bool, reverse: bool) -> DocResult<Vec<(i32, i64)>> {
    let dir = if reverse { -1 } else { 1 };
    let q = FindQuery {
        sort: Some(if by_v {
            doc! {"v": dir}
        } else {
            doc! {"_id": dir}
        }),
        hint: Some(if by_v {
            Bson::String("v_1".into())
        } else {
            Bson::Document(doc! {"$natural": dir})
        }),
        ..FindQuery::default()
    };
    let mut out = Vec::new();
    for d in db.find("t", "c", &q)? {
        let d = d?;
        out.push((d.get_i32("_id").unwrap(), d.get_i64("v").unwrap()));
    }
    Ok(out)
}

fn all(db: &DocDb) -> Vec<(i32, i64)> {
    read(db, false, false).unwrap()
}

fn in_txn<T>(t: &Arc<Txn>, body: impl FnOnce() -> DocResult<T>) -> DocResult<T> {
    with_txn(t, body)
}

fn assert_conflict(e: &DocError) {
    assert_eq!(e.code, 112, "{e:?}");
    let labels = e
        .extra
        .as_ref()
        .and_then(|x| x.get_array("errorLabels").ok());
    assert_eq!(
        labels,
        Some(&vec![Bson::String(TRANSIENT_LABEL.into())]),
        "{e:?}"
    );
}

#[test]
fn own_writes_are_seen_inside_and_nothing_outside_until_commit() {
    let db = open(false);
    insert(&db, doc! {"_id": 1, "v": 10i64}).unwrap();
    let t = db.begin_txn(None).unwrap();
    in_txn(&t, || {
        insert(&db, doc! {"_id": 2, "v": 20i64})?;
        set_v(&db, 1, 11)?;
        assert_eq!(all(&db), vec![(1, 11), (2, 20)]);
        Ok(())
    })
    .unwrap();
    assert_eq!(all(&db), vec![(1, 10)], "uncommitted writes are private");
    let count = |db: &DocDb| db.count("t", "c", &FindQuery::default()).unwrap();
    assert_eq!(count(&db), 1);
    assert_eq!(
        in_txn(&t, || db.count("t", "c", &FindQuery::default())),
        Ok(2)
    );
    db.commit_txn(&t).unwrap();
    assert_eq!(all(&db), vec![(1, 11), (2, 20)]);
    assert_eq!(count(&db), 2, "the totals follow the commit");
    assert_eq!(t.state(), TxnState::Committed);
    assert!(
        t.snapshot().is_err(),
        "an ended transaction pins no versions"
    );
}

#[test]
fn a_transaction_reads_its_snapshot_not_later_commits() {
    let db = open(false);
    insert(&db, doc! {"_id": 1, "v": 1i64}).unwrap();
    let t = db.begin_txn(None).unwrap();
    insert(&db, doc! {"_id": 2, "v": 2i64}).unwrap();
    set_v(&db, 1, 5).unwrap();
    let seen = in_txn(&t, || read(&db, true, false)).unwrap();
    assert_eq!(seen, vec![(1, 1)]);
    db.commit_txn(&t).unwrap();
}

#[test]
fn abort_drops_the_writes_and_later_statements_fail() {
    let db = open(false);
    let t = db.begin_txn(None).unwrap();
    in_txn(&t, || insert(&db, doc! {"_id": 1, "v": 1i64})).unwrap();
    t.abort("abortTransaction").unwrap();
    assert_eq!(all(&db), vec![]);
    let e = in_txn(&t, || insert(&db, doc! {"_id": 2, "v": 2i64})).unwrap_err();
    assert_eq!(e.code, 251, "{e:?}");
    assert_eq!(db.commit_txn(&t).unwrap_err().code, 251);
    insert(&db, doc! {"_id": 1, "v": 3i64}).expect("the aborted keys are free");
}

#[test]
fn concurrent_writers_of_a_document_conflict_and_the_first_wins() {
    let db = open(false);
    insert(&db, doc! {"_id": 1, "v": 1i64}).unwrap();
    let (a, b) = (db.begin_txn(None).unwrap(), db.begin_txn(None).unwrap());
    in_txn(&a, || set_v(&db, 1, 2)).unwrap();
    let e = in_txn(&b, || set_v(&db, 1, 3)).unwrap_err();
    assert_conflict(&e);
    assert!(matches!(b.state(), TxnState::Aborted(_)));
    let plain = set_v(&db, 1, 4).unwrap_err();
    assert_conflict(&plain);
    db.commit_txn(&a).unwrap();
    assert_eq!(all(&db), vec![(1, 2)]);
    set_v(&db, 1, 4).expect("the commit released the document");
}

#[test]
fn a_write_to_a_document_committed_since_the_snapshot_conflicts() {
    let db = open(false);
    insert(&db, doc! {"_id": 1, "v": 1i64}).unwrap();
    let t = db.begin_txn(None).unwrap();
    set_v(&db, 1, 2).unwrap();
    assert_conflict(&in_txn(&t, || delete(&db, 1)).unwrap_err());
    assert_eq!(all(&db), vec![(1, 2)]);
}

#[test]
fn two_transactions_inserting_one_unique_value_conflict() {
    let db = open(false);
    let (a, b) = (db.begin_txn(None).unwrap(), db.begin_txn(None).unwrap());
    in_txn(&a, || insert(&db, doc! {"_id": 1, "v": 1i64, "u": "x"})).unwrap();
    let e = in_txn(&b, || insert(&db, doc! {"_id": 2, "v": 2i64, "u": "x"})).unwrap_err();
    assert_conflict(&e);
    db.commit_txn(&a).unwrap();
    let dup = insert(&db, doc! {"_id": 3, "v": 3i64, "u": "x"}).unwrap_err();
    assert_eq!(dup.code, 11000);
}

#[test]
fn scans_merge_own_inserts_and_deletes_in_order() {
    let db = open(false);
    for (id, v) in [(1, 10i64), (3, 30), (5, 50), (7, 70)] {
        insert(&db, doc! {"_id": id, "v": v}).unwrap();
    }
    let t = db.begin_txn(None).unwrap();
    in_txn(&t, || {
        insert(&db, doc! {"_id": 4, "v": 40i64})?;
        insert(&db, doc! {"_id": 8, "v": 5i64})?;
        delete(&db, 3)?;
        set_v(&db, 5, 75)?;
        Ok(())
    })
    .unwrap();
    let by_rid = vec![(1, 10), (5, 75), (7, 70), (4, 40), (8, 5)];
    let natural = in_txn(&t, || {
        let q = FindQuery::default();
        db.find("t", "c", &q)?
            .map(|d| d.map(|d| (d.get_i32("_id").unwrap(), d.get_i64("v").unwrap())))
            .collect::<DocResult<Vec<_>>>()
    });
    assert_eq!(natural.unwrap(), by_rid, "RecordId order: own inserts last");
    let by_v = vec![(8, 5), (1, 10), (4, 40), (7, 70), (5, 75)];
    assert_eq!(in_txn(&t, || read(&db, true, false)).unwrap(), by_v);
    let mut rev = by_v.clone();
    rev.reverse();
    assert_eq!(in_txn(&t, || read(&db, true, true)).unwrap(), rev);
    let by_id = vec![(1, 10), (4, 40), (5, 75), (7, 70), (8, 5)];
    assert_eq!(in_txn(&t, || read(&db, false, false)).unwrap(), by_id);
}

#[test]
fn a_cursor_opened_in_a_transaction_keeps_reading_it_on_another_thread() {
    let db = open(false);
    for id in 1..=3 {
        insert(&db, doc! {"_id": id, "v": id as i64}).unwrap();
    }
    let t = db.begin_txn(None).unwrap();
    let cursor = in_txn(&t, || {
        delete(&db, 2)?;
        db.find("t", "c", &FindQuery::default())
    })
    .unwrap();
    let ids: Vec<i32> =
        std::thread::spawn(move || cursor.map(|d| d.unwrap().get_i32("_id").unwrap()).collect())
            .join()
            .unwrap();
    assert_eq!(ids, vec![1, 3]);
}

#[test]
fn the_commit_logs_one_applyops_entry_with_the_session() {
    let db = open(true);
    insert(&db, doc! {"_id": 1, "v": 1i64}).unwrap();
    let log = db.oplog().unwrap().clone();
    let before = log.totals().0;
    let session = TxnSession {
        lsid: doc! {"id": 7},
        txn_number: 3,
    };
    let t = db.begin_txn(Some(session)).unwrap();
    in_txn(&t, || {
        insert(&db, doc! {"_id": 2, "v": 2i64})?;
        set_v(&db, 1, 5)?;
        delete(&db, 2)
    })
    .unwrap();
    assert_eq!(
        log.totals().0,
        before,
        "nothing is logged before the commit"
    );
    db.commit_txn(&t).unwrap();
    assert_eq!(
        log.totals().0,
        before + 1,
        "one entry for the whole transaction"
    );
    let zero = bson::Timestamp {
        time: 0,
        increment: 0,
    };
    let entry = log.entries_after(zero, usize::MAX, usize::MAX).unwrap();
    let entry = entry.last().unwrap();
    assert_eq!(entry.get_str("op").unwrap(), "c");
    assert_eq!(entry.get_str("ns").unwrap(), "admin.$cmd");
    assert_eq!(entry.get_document("lsid").unwrap(), &doc! {"id": 7});
    assert_eq!(entry.get_i64("txnNumber").unwrap(), 3);
    assert!(entry.get_document("prevOpTime").is_ok());
    let ops = entry
        .get_document("o")
        .unwrap()
        .get_array("applyOps")
        .unwrap();
    let kinds: Vec<&str> = ops
        .iter()
        .map(|o| o.as_document().unwrap().get_str("op").unwrap())
        .collect();
    assert_eq!(kinds, vec!["i", "u", "d"]);
    assert_eq!(all(&db), vec![(1, 5)]);
}

#[test]
fn a_transaction_past_its_lifetime_is_aborted() {
    let db = open(false);
    db.txns().set_lifetime_limit(1).unwrap();
    assert_eq!(db.txns().set_lifetime_limit(0).unwrap_err().code, 2);
    let t = db.begin_txn(None).unwrap();
    in_txn(&t, || insert(&db, doc! {"_id": 1, "v": 1i64})).unwrap();
    let idle = db.begin_txn(None).unwrap();
    in_txn(&idle, || insert(&db, doc! {"_id": 2, "v": 2i64})).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let e = in_txn(&t, || insert(&db, doc! {"_id": 3, "v": 3i64})).unwrap_err();
    assert_eq!(e.code, 251, "{e:?}");
    assert_eq!(db.txns().reap_expired(), 1, "the idle one is reaped");
    assert!(matches!(idle.state(), TxnState::Aborted(_)));
    insert(&db, doc! {"_id": 2, "v": 2i64}).expect("its keys are released");
}

#[test]
fn a_stepdown_aborts_every_open_transaction() {
    let db = open(false);
    let t = db.begin_txn(None).unwrap();
    in_txn(&t, || insert(&db, doc! {"_id": 1, "v": 1i64})).unwrap();
    let committed = db.begin_txn(None).unwrap();
    db.commit_txn(&committed).unwrap();
    assert_eq!(db.txns().open_count(), 1);
    assert_eq!(db.txns().abort_all("stepdown"), 1);
    assert_eq!(db.txns().open_count(), 0);
    assert_eq!(db.commit_txn(&t).unwrap_err().code, 251);
    assert_eq!(all(&db), vec![]);
}

#[test]
fn capped_and_unreplicated_collections_refuse_writes_in_a_transaction() {
    let db = open(false);
    db.create_collection("t", "capped", &doc! {"capped": true, "size": 4096})
        .unwrap();
    let t = db.begin_txn(None).unwrap();
    let e = in_txn(&t, || {
        first_error(db.insert("t", "capped", vec![doc! {"a": 1}], WriteOpts::default()))
    })
    .unwrap_err();
    assert_eq!(e.code, 263, "{e:?}");
    let e = in_txn(&t, || {
        first_error(db.insert("local", "c", vec![doc! {"a": 1}], WriteOpts::default()))
    })
    .unwrap_err();
    assert_eq!(e.code, 263, "the local database is not replicated: {e:?}");
}

/// The model: committed documents, and per open transaction its snapshot and own writes.
#[derive(Default)]
struct Model {
    committed: BTreeMap<i32, i64>,
    txns: Vec<ModelTxn>,
}

struct ModelTxn {
    real: Arc<Txn>,
    snap: BTreeMap<i32, i64>,
    writes: BTreeMap<i32, Option<i64>>,
}

impl ModelTxn {
    fn view(&self) -> BTreeMap<i32, i64> {
        let mut v = self.snap.clone();
        for (k, w) in &self.writes {
            match w {
                Some(x) => v.insert(*k, *x),
                None => v.remove(k),
            };
        }
        v
    }
}

impl Model {
    /// Whether another open transaction holds `k`.
    fn held_by_other(&self, me: Option<usize>, k: i32) -> bool {
        self.txns
            .iter()
            .enumerate()
            .any(|(i, t)| Some(i) != me && t.writes.contains_key(&k))
    }

    /// What a transaction's write of `k` to `w` should do: Ok(changed) or the error code.
    fn txn_write(&mut self, i: usize, k: i32, w: Option<i64>, insert: bool) -> Result<u64, i32> {
        let present = self.txns[i].view().contains_key(&k);
        if insert && present {
            return Err(11000);
        }
        if !insert && !present {
            return Ok(0);
        }
        let t = &self.txns[i];
        let first = !t.writes.contains_key(&k);
        if first && (self.held_by_other(Some(i), k) || self.committed.get(&k) != t.snap.get(&k)) {
            self.txns.remove(i);
            return Err(112);
        }
        self.txns[i].writes.insert(k, w);
        Ok(1)
    }

    /// What a plain write of `k` to `w` should do.
    fn plain_write(&mut self, k: i32, w: Option<i64>, insert: bool) -> Result<u64, i32> {
        let present = self.committed.contains_key(&k);
        if insert && present {
            return Err(11000);
        }
        if !insert && !present {
            return Ok(0);
        }
        if self.held_by_other(None, k) {
            return Err(112);
        }
        match w {
            Some(x) => self.committed.insert(k, x),
            None => self.committed.remove(&k),
        };
        Ok(1)
    }
}

/// One random write (insert, update or delete of key `k` to a fresh value) against the
/// database, in transaction `i` or plain; checked against the model.
fn random_write(db: &DocDb, model: &mut Model, rng: &mut StdRng, i: Option<usize>, v: i64) {
    let k = rng.gen_range(0..6);
    let kind = rng.gen_range(0..3);
    let run = || match kind {
        0 => insert(db, doc! {"_id": k, "v": v}),
        1 => set_v(db, k, v),
        _ => delete(db, k),
    };
    let (w, ins) = match kind {
        0 => (Some(v), true),
        1 => (Some(v), false),
        _ => (None, false),
    };
    let (got, want) = match i {
        Some(i) => {
            let real = model.txns[i].real.clone();
            (in_txn(&real, run), model.txn_write(i, k, w, ins))
        }
        None => (run(), model.plain_write(k, w, ins)),
    };
    assert_eq!(
        got.map_err(|e| e.code),
        want,
        "write kind {kind} of {k} in {i:?}"
    );
}

/// One random step of the interleaving: begin, write, commit or abort.
fn random_step(db: &DocDb, model: &mut Model, rng: &mut StdRng, v: i64) {
    let n = model.txns.len();
    let pick = |rng: &mut StdRng| (n > 0).then(|| rng.gen_range(0..n));
    match rng.gen_range(0..10) {
        0 | 1 if n < 4 => {
            let real = db.begin_txn(None).unwrap();
            let snap = model.committed.clone();
            model.txns.push(ModelTxn {
                real,
                snap,
                writes: BTreeMap::new(),
            });
        }
        2..=5 => {
            let i = pick(rng);
            random_write(db, model, rng, i, v)
        }
        6 => {
            let Some(i) = pick(rng) else { return };
            let t = model.txns.remove(i);
            t.real.abort("test").unwrap();
        }
        7 => {
            let Some(i) = pick(rng) else { return };
            let t = model.txns.remove(i);
            db.commit_txn(&t.real).unwrap();
            for (k, w) in t.writes {
                match w {
                    Some(x) => model.committed.insert(k, x),
                    None => model.committed.remove(&k),
                };
            }
        }
        // A full house of transactions, or a pause: the reads after every step are checked.
        _ => {}
    }
}

#[test]
fn interleaved_transactions_match_a_model() {
    for seed in 0..40u64 {
        let db = open(false);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model = Model::default();
        for step in 0..150i64 {
            random_step(&db, &mut model, &mut rng, step);
            check_reads(&db, &model);
        }
        for t in std::mem::take(&mut model.txns) {
            db.commit_txn(&t.real).unwrap();
            for (k, w) in t.writes {
                match w {
                    Some(x) => model.committed.insert(k, x),
                    None => model.committed.remove(&k),
                };
            }
        }
        check_reads(&db, &model);
    }
}

/// Every transaction reads its snapshot with its own writes, by `_id` and by index; a plain
/// read sees the committed documents.
fn check_reads(db: &DocDb, model: &Model) {
    let sorted = |m: BTreeMap<i32, i64>| {
        let by_id: Vec<(i32, i64)> = m.into_iter().collect();
        let mut by_v = by_id.clone();
        by_v.sort_by_key(|&(id, v)| (v, id));
        (by_id, by_v)
    };
    let (id, v) = sorted(model.committed.clone());
    assert_eq!(read(db, false, false).unwrap(), id);
    assert_eq!(read(db, true, false).unwrap(), v);
    for t in &model.txns {
        let (id, v) = sorted(t.view());
        assert_eq!(in_txn(&t.real, || read(db, false, false)).unwrap(), id);
        assert_eq!(in_txn(&t.real, || read(db, true, false)).unwrap(), v);
    }
}

#[test]
fn a_secondary_applies_the_transaction_entry_whole_and_idempotently() {
    let primary = open(true);
    insert(&primary, doc! {"_id": 1, "v": 1i64}).unwrap();
    let lsid =
        doc! {"id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![7; 16] }};
    let session = TxnSession {
        lsid: lsid.clone(),
        txn_number: 4,
    };
    let t = primary.begin_txn(Some(session)).unwrap();
    in_txn(&t, || {
        insert(&primary, doc! {"_id": 2, "v": 2i64})?;
        set_v(&primary, 1, 10)?;
        insert(&primary, doc! {"_id": 3, "v": 3i64})?;
        delete(&primary, 3)
    })
    .unwrap();
    primary.commit_txn(&t).unwrap();
    let mut cfg = DocDbConfig::in_memory();
    cfg.oplog = Some(OplogSettings {
        size_bytes: 1 << 30,
    });
    let secondary = DocDb::open(cfg).unwrap();
    let zero = bson::Timestamp {
        time: 0,
        increment: 0,
    };
    let entries = primary
        .oplog()
        .unwrap()
        .entries_after(zero, usize::MAX, usize::MAX)
        .unwrap();
    for e in &entries {
        secondary.apply_oplog_entry(e).unwrap();
    }
    assert_eq!(all(&secondary), vec![(1, 10), (2, 2)]);
    assert_eq!(
        read(&secondary, true, false).unwrap(),
        vec![(2, 2), (1, 10)]
    );
    secondary
        .apply_oplog_entry(entries.last().unwrap())
        .unwrap();
    assert_eq!(
        all(&secondary),
        vec![(1, 10), (2, 2)],
        "applied again: the same"
    );
    let key = crate::oplog::sessions::session_key(&lsid);
    for member in [&primary, &secondary] {
        let rec = member
            .oplog()
            .unwrap()
            .sessions()
            .lookup(&key, 4, crate::oplog::TXN_COMMITTED_STMT)
            .unwrap()
            .expect("the session records the commit");
        assert_eq!(rec.op, "c");
    }
    assert_eq!(
        secondary.oplog().unwrap().last_ts(),
        primary.oplog().unwrap().last_ts()
    );
}

#[test]
#[should_panic(expected = "holds every key it commits")]
fn a_commit_refuses_a_key_it_does_not_hold() {
    let db = open(false);
    let t = db.begin_txn(None).unwrap();
    in_txn(&t, || insert(&db, doc! {"_id": 1, "v": 1i64})).unwrap();
    let keys: Vec<WriteKey> = t.inner.lock().writes.keys().cloned().collect();
    db.txns().unlock_keys(t.id(), keys.iter());
    let _ = db.commit_txn(&t);
}

#[test]
#[should_panic(expected = "a transaction logs one command entry")]
fn the_oplog_refuses_a_transaction_entry_that_is_not_a_command() {
    let db = open(true);
    let record = OpRecord::noop(doc! {"msg": "not applyOps"});
    let _ = db
        .oplog()
        .unwrap()
        .write_txn(&mut WriteBatch::new(), record, None, |_| Ok(()));
}
