use super::*;
use crate::db::{
    AggregateOpts, DeleteStatement, DocDb, FindQuery, UpdateStatement, WriteOpts, WriteOutcome,
};
use crate::DocDbConfig;
use bson::doc;
use query::interrupt::Interrupt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ZERO: Timestamp = Timestamp {
    time: 0,
    increment: 0,
};

fn member(size_bytes: i64) -> Arc<DocDb> {
    let mut cfg = DocDbConfig::in_memory();
    cfg.oplog = Some(OplogSettings { size_bytes });
    DocDb::open(cfg).unwrap()
}

fn entries(db: &DocDb) -> Vec<Document> {
    db.oplog()
        .expect("a member")
        .entries_after(ZERO, usize::MAX, usize::MAX)
        .unwrap()
}

fn ok(out: WriteOutcome) -> WriteOutcome {
    assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    out
}

fn set(q: Document, u: Document) -> UpdateStatement {
    UpdateStatement {
        q,
        u: Bson::Document(u),
        ..UpdateStatement::default()
    }
}

/// An entry without the fields every entry has (`ts`, `t`, `v`, `wall`, `ui`), after checking
/// their types as mongod writes them.
fn shape(e: &Document, ui: Option<Uuid>) -> Document {
    assert!(e.get_timestamp("ts").is_ok(), "{e}");
    assert_eq!(e.get_i64("t"), Ok(0), "{e}");
    assert_eq!(e.get_i64("v"), Ok(2), "{e}");
    assert!(e.get_datetime("wall").is_ok(), "{e}");
    if let Some(ui) = ui {
        assert_eq!(e.get("ui"), Some(&Bson::from(ui)), "{e}");
    }
    let mut d = e.clone();
    for k in ["ts", "t", "v", "wall", "ui"] {
        d.remove(k);
    }
    d
}

fn uuid_of(db: &DocDb, d: &str, c: &str) -> Uuid {
    let infos = db.list_collections(d).unwrap();
    infos.iter().find(|i| i.name == c).unwrap().uuid.unwrap()
}

#[test]
fn each_write_kind_is_logged_in_mongods_shape() {
    let db = member(1 << 20);
    let pad = "p".repeat(64);
    ok(db.insert(
        "app",
        "c",
        vec![doc! {"_id": 1, "a": 1, "pad": &pad}],
        WriteOpts::default(),
    ));
    let ui = uuid_of(&db, "app", "c");
    ok(db.update(
        "app",
        "c",
        &[set(doc! {"_id": 1}, doc! {"$inc": {"a": 1}})],
        WriteOpts::default(),
    ));
    ok(db.update(
        "app",
        "c",
        &[set(doc! {"_id": 1}, doc! {"b": 1})],
        WriteOpts::default(),
    ));
    db.create_indexes("app", "c", &[doc! {"key": {"b": 1}, "name": "b_1"}])
        .unwrap();
    db.drop_indexes("app", "c", &Bson::String("b_1".into()))
        .unwrap();
    db.coll_mod("app", "c", &doc! {"validationLevel": "moderate"})
        .unwrap();
    let del = DeleteStatement {
        q: doc! {"_id": 1},
        limit: 1,
        ..DeleteStatement::default()
    };
    ok(db.delete("app", "c", &[del], WriteOpts::default()));
    db.rename_collection("app", "c", "app", "d", false).unwrap();
    db.drop_collection("app", "d").unwrap();
    db.create_collection("app", "e", &doc! {}).unwrap();
    let e_ui = uuid_of(&db, "app", "e");
    db.drop_database("app").unwrap();
    let got = entries(&db);
    let cmd = |o: Document| doc! {"op": "c", "ns": "app.$cmd", "o": o};
    let want = [
        (cmd(doc! {"create": "c"}), Some(ui)),
        (
            doc! {"op": "i", "ns": "app.c", "o": {"_id": 1, "a": 1, "pad": &pad}, "o2": {"_id": 1}},
            Some(ui),
        ),
        (
            doc! {"op": "u", "ns": "app.c", "o": {"$v": 2, "diff": {"u": {"a": 2}}}, "o2": {"_id": 1}},
            Some(ui),
        ),
        (
            doc! {"op": "u", "ns": "app.c", "o": {"_id": 1, "b": 1}, "o2": {"_id": 1}},
            Some(ui),
        ),
        (
            cmd(doc! {"createIndexes": "c", "v": 2, "key": {"b": 1}, "name": "b_1"}),
            Some(ui),
        ),
        (cmd(doc! {"dropIndexes": "c", "index": "b_1"}), Some(ui)),
        (
            cmd(doc! {"collMod": "c", "validationLevel": "moderate"}),
            Some(ui),
        ),
        (doc! {"op": "d", "ns": "app.c", "o": {"_id": 1}}, Some(ui)),
        (
            cmd(
                doc! {"renameCollection": "app.c", "to": "app.d", "stayTemp": false, "dropTarget": false},
            ),
            Some(ui),
        ),
        (cmd(doc! {"drop": "d"}), Some(ui)),
        (cmd(doc! {"create": "e"}), Some(e_ui)),
        (cmd(doc! {"drop": "e"}), Some(e_ui)),
        (cmd(doc! {"dropDatabase": 1}), None),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (e, (w, ui)) in got.iter().zip(want) {
        assert_eq!(shape(e, ui), w, "{e}");
    }
    assert!(got[12].get("ui").is_none());
}

#[test]
fn a_retryable_write_logs_its_session_and_statement_ids() {
    let db = member(1 << 20);
    let lsid = doc! {"id": Uuid::new()};
    let w = RetryableWrite {
        lsid: lsid.clone(),
        txn_number: 7,
        first_stmt_id: 3,
        image: None,
    };
    let docs = vec![doc! {"_id": 1}, doc! {"_id": 2}];
    with_retryable_write(w, || ok(db.insert("app", "c", docs, WriteOpts::default())));
    let got = entries(&db);
    let keys: Vec<&str> = got[1].keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "lsid",
            "txnNumber",
            "op",
            "ns",
            "ui",
            "o",
            "o2",
            "stmtId",
            "ts",
            "t",
            "v",
            "wall"
        ]
    );
    for (e, stmt) in got[1..].iter().zip([3, 4]) {
        assert_eq!(e.get_document("lsid"), Ok(&lsid));
        assert_eq!(e.get_i64("txnNumber"), Ok(7));
        assert_eq!(e.get_i32("stmtId"), Ok(stmt));
    }
    assert!(
        got[0].get("lsid").is_none(),
        "the create is not a statement"
    );
}

#[test]
fn a_standalone_logs_nothing_and_refuses_application() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    ok(db.insert("app", "c", vec![doc! {"_id": 1}], WriteOpts::default()));
    assert!(db.oplog().is_none());
    assert!(db.engine().table_id(OPLOG_TABLE).is_none());
    let e = doc! {"op": "n", "ns": "", "o": {}, "ts": Timestamp {time: 1, increment: 1}};
    assert_eq!(db.apply_oplog_entry(&e).unwrap_err().code, 20);
}

#[test]
fn a_noop_entry_is_logged_alone_and_applied_as_nothing() {
    let db = member(1 << 20);
    db.log_noop(doc! {"msg": "periodic noop"}).unwrap();
    let logged = entries(&db);
    assert_eq!(logged.len(), 1);
    assert_eq!(
        shape(&logged[0], None),
        doc! {"op": "n", "ns": "", "o": {"msg": "periodic noop"}}
    );
    // A secondary applies it: in its oplog, and no collection appears.
    let secondary = member(1 << 20);
    secondary.apply_oplog_entry(&logged[0]).unwrap();
    assert_eq!(entries(&secondary), logged);
    assert!(secondary.list_databases().unwrap().is_empty());
    // A standalone has no oplog to write it to.
    let standalone = DocDb::open(DocDbConfig::in_memory()).unwrap();
    assert_eq!(standalone.log_noop(doc! {}).unwrap_err().code, 20);
}

#[test]
fn writes_to_the_local_database_are_not_logged() {
    let db = member(1 << 20);
    ok(db.insert(
        "local",
        "startup_log",
        vec![doc! {"_id": 1}],
        WriteOpts::default(),
    ));
    assert!(entries(&db).is_empty());
}

#[test]
fn a_databases_profiler_collection_is_not_logged() {
    // Each member profiles its own operations: a secondary's entries must not reach its
    // oplog (they would be writes the set never saw), nor the primary's reach secondaries.
    let db = member(1 << 20);
    let capped = doc! {"capped": true, "size": 4096};
    db.create_collection("app", UNLOGGED_COLL, &capped).unwrap();
    for i in 0..100 {
        ok(db.insert(
            "app",
            UNLOGGED_COLL,
            vec![doc! {"_id": i, "pad": "p".repeat(64)}],
            WriteOpts::default(),
        ));
    }
    db.drop_collection("app", UNLOGGED_COLL).unwrap();
    assert!(entries(&db).is_empty(), "{:?}", entries(&db));
    assert!(!is_replicated("local", "c") && !is_replicated("app", UNLOGGED_COLL));
    assert!(is_replicated("app", "c") && is_replicated("admin", "system.users"));
}

#[test]
fn the_oplog_keeps_its_size_by_removing_the_oldest_entries() {
    let cap = 16 * 1024;
    let db = member(cap);
    let pad = "x".repeat(200);
    for i in 0..400 {
        ok(db.insert(
            "app",
            "c",
            vec![doc! {"_id": i, "pad": &pad}],
            WriteOpts::default(),
        ));
        let (_, bytes) = db.oplog().unwrap().totals();
        assert!(bytes <= cap, "{bytes} bytes after insert {i}");
    }
    let got = entries(&db);
    let (count, bytes) = db.oplog().unwrap().totals();
    assert_eq!(count as usize, got.len());
    let stored: usize = got.iter().map(|e| bson::to_vec(e).unwrap().len()).sum();
    assert_eq!(stored as i64, bytes);
    assert!(bytes > cap - 400, "trimmed no more than needed: {bytes}");
    // The newest entries are kept, in order, and the oldest is the first one held.
    let last = got.last().unwrap();
    assert_eq!(last.get_document("o").unwrap().get_i32("_id"), Ok(399));
    let first_id = got[0].get_document("o").unwrap().get_i32("_id").unwrap();
    assert_eq!(first_id as usize, 400 - got.len());
    let oldest = db.oplog().unwrap().oldest_ts().unwrap().unwrap();
    assert_eq!(got[0].get_timestamp("ts"), Ok(oldest));
}

#[test]
fn ts_is_unique_and_increasing_under_concurrent_writers() {
    let db = member(64 << 20);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..150 {
                    let d = doc! {"_id": i, "t": t};
                    ok(db.insert("app", &format!("c{t}"), vec![d], WriteOpts::default()));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let got = entries(&db);
    assert_eq!(got.len(), 4 * 150 + 4);
    let ts: Vec<u64> = got
        .iter()
        .map(|e| ts_u64(e.get_timestamp("ts").unwrap()))
        .collect();
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
    assert_eq!(db.oplog().unwrap().last_ts(), ts_of(*ts.last().unwrap()));
}

#[test]
fn the_clock_never_goes_back() {
    let t = |time, increment| ts_u64(Timestamp { time, increment });
    let tail = |last| Tail {
        last,
        ..Tail::default()
    };
    assert_eq!(tail(t(10, 5)).next_ts(12), t(12, 1));
    assert_eq!(tail(t(10, 5)).next_ts(10), t(10, 6));
    assert_eq!(tail(t(10, 5)).next_ts(3), t(10, 6), "a clock stepped back");
    assert_eq!(tail(t(10, u32::MAX)).next_ts(10), t(11, 1));
}

#[test]
#[should_panic(expected = "oplog ts strictly increases")]
fn an_entry_at_or_before_the_last_is_refused() {
    let mut tail = Tail {
        last: 5,
        ..Tail::default()
    };
    tail.appended(5, 10, Trimmed::default());
}

#[test]
fn the_reader_is_bounded_by_count_and_bytes() {
    let db = member(1 << 20);
    for i in 0..10 {
        ok(db.insert("app", "c", vec![doc! {"_id": i}], WriteOpts::default()));
    }
    let log = db.oplog().unwrap();
    let all = log.entries_after(ZERO, usize::MAX, usize::MAX).unwrap();
    assert_eq!(all.len(), 11);
    let after = all[4].get_timestamp("ts").unwrap();
    let some = log.entries_after(after, 3, usize::MAX).unwrap();
    assert_eq!(some, all[5..8].to_vec());
    assert_eq!(
        log.entries_after(after, 100, 1).unwrap(),
        all[5..6].to_vec()
    );
    let end = all[10].get_timestamp("ts").unwrap();
    assert!(log.entries_after(end, 100, usize::MAX).unwrap().is_empty());
}

/// Everything a namespace of database `d` holds, for comparing two members: collections with
/// their UUIDs and options, documents (as bytes, in `_id` order), index specs; each collection
/// validated.
fn snapshot(db: &DocDb, d: &str) -> Snapshot {
    let mut out = Vec::new();
    for info in db.list_collections(d).unwrap() {
        let q = FindQuery {
            sort: Some(doc! {"_id": 1}),
            ..FindQuery::default()
        };
        let docs = db
            .find(d, &info.name, &q)
            .unwrap()
            .map(|x| bson::to_vec(&x.unwrap()).unwrap())
            .collect();
        let v = db
            .validate(d, &info.name, true, &Interrupt::none())
            .unwrap();
        assert_eq!(v.get_bool("valid"), Ok(true), "{v}");
        let idx = db.list_indexes(d, &info.name).unwrap();
        out.push((info.name, info.uuid, info.options, docs, idx));
    }
    out
}

type Snapshot = Vec<(String, Option<Uuid>, Document, Vec<Vec<u8>>, Vec<Document>)>;

/// The first thing two snapshots differ in, readably.
fn first_difference(want: &Snapshot, got: &Snapshot) -> String {
    let names = |s: &Snapshot| s.iter().map(|c| (c.0.clone(), c.1)).collect::<Vec<_>>();
    if names(want) != names(got) {
        return format!("collections {:?} vs {:?}", names(want), names(got));
    }
    for (w, g) in want.iter().zip(got) {
        if w.2 != g.2 || w.4 != g.4 {
            return format!(
                "{}: options/indexes {} {:?} vs {} {:?}",
                w.0, w.2, w.4, g.2, g.4
            );
        }
        let docs = |d: &[Vec<u8>]| {
            d.iter()
                .map(|b| bson::from_slice::<Document>(b).unwrap().to_string())
                .collect::<Vec<_>>()
        };
        if w.3 != g.3 {
            return format!(
                "{}: documents\n{:#?}\nvs\n{:#?}",
                w.0,
                docs(&w.3),
                docs(&g.3)
            );
        }
    }
    "nothing".into()
}

fn random_doc(rng: &mut StdRng) -> Document {
    let mut d = doc! {"_id": rng.gen_range(0..24), "x": rng.gen_range(0..50)};
    if rng.gen_bool(0.6) {
        d.insert(
            "e",
            doc! {"y": rng.gen_range(0..5), "z": [1, rng.gen_range(0..3)]},
        );
    }
    if rng.gen_bool(0.3) {
        d.insert("s", "v".repeat(rng.gen_range(0..40)));
    }
    d
}

fn random_update(rng: &mut StdRng) -> Document {
    match rng.gen_range(0..7) {
        0 => doc! {"$set": {"x": rng.gen_range(0..50)}},
        1 => doc! {"$inc": {"x": 1}},
        2 => doc! {"$unset": {"e.y": ""}},
        3 => doc! {"$set": {"e.w": rng.gen_range(0..5), "n": "new"}},
        4 => doc! {"$push": {"e.z": rng.gen_range(0..5)}},
        5 => doc! {"$unset": {"x": "", "s": ""}},
        _ => {
            let mut r = random_doc(rng);
            r.remove("_id");
            r
        }
    }
}

/// One random write on the primary (refusals, such as a duplicate `_id`, are part of the game).
fn random_write(db: &DocDb, rng: &mut StdRng) {
    let colls = ["a", "b", "c"];
    let c = colls[rng.gen_range(0..colls.len())];
    let other = colls[rng.gen_range(0..colls.len())];
    let opts = WriteOpts::default;
    match rng.gen_range(0..100) {
        0..=34 => drop(db.insert("r", c, vec![random_doc(rng)], opts())),
        35..=54 => {
            let mut s = set(doc! {"_id": rng.gen_range(0..24)}, random_update(rng));
            s.upsert = rng.gen_bool(0.2);
            drop(db.update("r", c, &[s], opts()))
        }
        55..=59 => {
            let mut s = set(
                doc! {"x": {"$gt": rng.gen_range(0..50)}},
                doc! {"$inc": {"x": 2}},
            );
            s.multi = true;
            drop(db.update("r", c, &[s], opts()))
        }
        60..=69 => {
            let q = match rng.gen_bool(0.8) {
                true => doc! {"_id": rng.gen_range(0..24)},
                false => doc! {"x": {"$lt": rng.gen_range(0..20)}},
            };
            let limit = i64::from(q.contains_key("_id"));
            let s = DeleteStatement {
                q,
                limit,
                ..DeleteStatement::default()
            };
            drop(db.delete("r", c, &[s], opts()))
        }
        70..=75 => {
            let key = [doc! {"x": 1}, doc! {"e.y": 1}, doc! {"e.z": 1, "x": -1}]
                [rng.gen_range(0..3)]
            .clone();
            let name = key
                .keys()
                .map(|k| k.replace('.', "_"))
                .collect::<Vec<_>>()
                .join("_");
            drop(db.create_indexes("r", c, &[doc! {"key": key, "name": name}]))
        }
        76..=79 => drop(db.drop_indexes("r", c, &Bson::String("*".into()))),
        80..=84 => drop(db.rename_collection("r", c, "r", other, rng.gen_bool(0.5))),
        85..=87 => drop(db.drop_collection("r", c)),
        88 => drop(db.create_collection("r", c, &doc! {})),
        89 => drop(db.create_collection("r", c, &doc! {"capped": true, "size": 1024})),
        90..=92 => {
            let level = ["strict", "moderate"][rng.gen_range(0..2)];
            drop(db.coll_mod("r", c, &doc! {"validationLevel": level}))
        }
        93 => drop(db.drop_database("r")),
        _ => {
            let pipeline = [
                doc! {"$match": {"x": {"$gte": rng.gen_range(0..50)}}},
                doc! {"$out": other},
            ];
            if let Ok(cur) = db.aggregate("r", c, &pipeline, &AggregateOpts::default()) {
                cur.for_each(drop);
            }
        }
    }
}

fn apply_all(db: &DocDb, log: &[Document]) {
    for e in log {
        db.apply_oplog_entry(e)
            .unwrap_or_else(|err| panic!("applying {e}: {err}"));
    }
}

/// A random history on a primary, its oplog applied to a fresh secondary: once, twice, or
/// once and again from a random earlier entry. The two members then hold the same
/// collections (same UUIDs), documents, and indexes, and the secondary's oplog is the
/// primary's.
#[test]
fn a_secondary_applying_the_oplog_matches_the_primary_over_many_seeds() {
    // FLASHDOC_OPLOG_SEEDS=N runs the long form.
    let seeds = std::env::var("FLASHDOC_OPLOG_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300u64);
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let primary = member(64 << 20);
        for _ in 0..rng.gen_range(20..90) {
            random_write(&primary, &mut rng);
        }
        let log = entries(&primary);
        let secondary = member(64 << 20);
        apply_all(&secondary, &log);
        match seed % 3 {
            0 => {}
            1 => apply_all(&secondary, &log),
            _ => apply_all(&secondary, &log[rng.gen_range(0..=log.len())..]),
        }
        let (want, got) = (snapshot(&primary, "r"), snapshot(&secondary, "r"));
        if want != got {
            let brief: Vec<String> = log
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {:?} {}",
                        e.get_str("op").unwrap(),
                        e.get_str("ns").unwrap(),
                        e.get("ui"),
                        e.get_document("o").unwrap()
                    )
                })
                .collect();
            panic!(
                "seed {seed}: {}\n{}",
                first_difference(&want, &got),
                brief.join("\n")
            );
        }
        assert_eq!(
            entries(&secondary),
            log,
            "seed {seed}: the secondary logs what it applied"
        );
    }
}

#[test]
#[should_panic(expected = "oplog totals stay whole")]
fn trimming_more_than_the_oplog_holds_is_refused() {
    let mut tail = Tail::default();
    let trimmed = Trimmed {
        count: 2,
        bytes: 10,
    };
    tail.appended(1, 10, trimmed);
}

#[test]
#[should_panic(expected = "one oplog entry is applied at a time")]
fn an_application_inside_another_is_refused() {
    applying(1, Vec::new(), None, || applying(2, Vec::new(), None, || ()));
}

fn retryable(lsid: &Document, txn_number: i64, first_stmt_id: i32) -> RetryableWrite {
    RetryableWrite {
        lsid: lsid.clone(),
        txn_number,
        first_stmt_id,
        image: None,
    }
}

fn session_of(lsid: &Document) -> Vec<u8> {
    sessions::session_key(lsid)
}

#[test]
fn a_statement_is_recorded_in_its_entrys_batch() {
    let db = member(1 << 20);
    let lsid = doc! {"id": Uuid::new()};
    let docs = vec![doc! {"_id": 1}, doc! {"_id": 2}];
    with_retryable_write(retryable(&lsid, 7, 3), || {
        ok(db.insert("app", "c", docs, WriteOpts::default()))
    });
    let log = db.oplog().unwrap();
    let got = entries(&db);
    for (e, (stmt, id)) in got[1..].iter().zip([(3, 1), (4, 2)]) {
        let rec = log.sessions().lookup(&session_of(&lsid), 7, stmt).unwrap();
        let rec = rec.expect("the statement's record");
        assert_eq!(rec.ts, Some(e.get_timestamp("ts").unwrap()), "{e}");
        assert_eq!((rec.op.as_str(), &rec.id), ("i", &Bson::Int32(id)));
        assert_eq!((rec.txn_number, rec.stmt_id, rec.image), (7, stmt, None));
    }
    let sessions = log.sessions();
    assert!(sessions.lookup(&session_of(&lsid), 7, 5).unwrap().is_none());
    assert!(sessions.lookup(&session_of(&lsid), 6, 3).unwrap().is_none());
    assert_eq!(sessions.newest_txn(&session_of(&lsid)).unwrap(), Some(7));
    // A write outside any retryable write records nothing.
    ok(db.insert("app", "c", vec![doc! {"_id": 3}], WriteOpts::default()));
    assert_eq!(sessions.newest_txn(&session_of(&lsid)).unwrap(), Some(7));
}

#[test]
fn a_secondary_records_the_statements_it_applies_with_their_images() {
    let primary = member(1 << 20);
    let lsid = doc! {"id": Uuid::new()};
    ok(primary.insert(
        "app",
        "c",
        vec![doc! {"_id": 1, "a": 1}],
        WriteOpts::default(),
    ));
    let mut w = retryable(&lsid, 2, 0);
    w.image = Some(RetryImage::Post);
    with_retryable_write(w, || {
        let inc = set(doc! {"_id": 1}, doc! {"$inc": {"a": 1}});
        ok(primary.update("app", "c", &[inc], WriteOpts::default()))
    });
    let log = entries(&primary);
    assert_eq!(
        log.last().unwrap().get_str("needsRetryImage"),
        Ok("postImage")
    );
    let secondary = member(1 << 20);
    apply_all(&secondary, &log);
    let want = primary
        .oplog()
        .unwrap()
        .sessions()
        .lookup(&session_of(&lsid), 2, 0);
    let got = secondary
        .oplog()
        .unwrap()
        .sessions()
        .lookup(&session_of(&lsid), 2, 0);
    let got = got.unwrap().expect("the applied statement's record");
    assert_eq!(Some(got.clone()), want.unwrap());
    assert_eq!(got.image, Some((RetryImage::Post, doc! {"_id": 1, "a": 2})));
    assert_eq!(
        got.ts,
        Some(log.last().unwrap().get_timestamp("ts").unwrap())
    );
    // Applied again (a restart's replay), the entry changes nothing, its record included.
    apply_all(&secondary, &log);
    let again = secondary
        .oplog()
        .unwrap()
        .sessions()
        .lookup(&session_of(&lsid), 2, 0);
    assert_eq!(again.unwrap(), Some(got));
}

#[test]
fn a_newer_txn_number_replaces_the_sessions_records_and_an_older_is_too_old() {
    let db = member(1 << 20);
    let lsid = doc! {"id": Uuid::new()};
    let other = doc! {"id": Uuid::new()};
    let insert = |id: i32| db.insert("app", "c", vec![doc! {"_id": id}], WriteOpts::default());
    with_retryable_write(retryable(&lsid, 7, 0), || ok(insert(1)));
    with_retryable_write(retryable(&other, 1, 0), || ok(insert(2)));
    with_retryable_write(retryable(&lsid, 8, 0), || ok(insert(3)));
    let sessions = db.oplog().unwrap().sessions();
    assert!(sessions.lookup(&session_of(&lsid), 7, 0).unwrap().is_none());
    assert!(sessions.lookup(&session_of(&lsid), 8, 0).unwrap().is_some());
    assert!(sessions
        .lookup(&session_of(&other), 1, 0)
        .unwrap()
        .is_some());
    let before = entries(&db).len();
    let out = with_retryable_write(retryable(&lsid, 7, 1), || insert(4));
    assert_eq!(
        out.write_errors[0].error.code, 225,
        "{:?}",
        out.write_errors
    );
    assert_eq!(entries(&db).len(), before, "nothing is logged");
    let found = db.find(
        "app",
        "c",
        &FindQuery {
            filter: doc! {"_id": 4},
            ..Default::default()
        },
    );
    assert_eq!(found.unwrap().count(), 0, "nothing is written");
    assert_eq!(sessions.newest_txn(&session_of(&lsid)).unwrap(), Some(8));
}

#[test]
fn a_statement_applied_from_the_log_is_never_too_old() {
    // The log is committed history: a member applying a statement older than its session's
    // newest record leaves that record out instead of refusing the entry (which would stop
    // the member for good); a client's write is refused as before.
    let db = member(1 << 20);
    let lsid = doc! {"id": Uuid::new()};
    with_retryable_write(retryable(&lsid, 5, 0), || {
        ok(db.insert("app", "c", vec![doc! {"_id": 1}], WriteOpts::default()))
    });
    let sessions = db.oplog().unwrap().sessions();
    let old = sessions::StatementRecord {
        txn_number: 4,
        stmt_id: 0,
        ts: None,
        op: "i".into(),
        id: Bson::Int32(9),
        image: None,
    };
    let key = session_of(&lsid);
    let mut batch = WriteBatch::new();
    assert_eq!(
        sessions.stage(&key, &old, &mut batch).unwrap_err().code,
        225
    );
    sessions.stage_applied(&key, &old, &mut batch).unwrap();
    assert!(batch.is_empty(), "the older record is left out");
    assert_eq!(sessions.newest_txn(&key).unwrap(), Some(5));
}

#[test]
fn clearing_the_oplog_clears_the_session_records() {
    let db = member(1 << 20);
    let lsid = doc! {"id": Uuid::new()};
    with_retryable_write(retryable(&lsid, 3, 0), || {
        ok(db.insert("app", "c", vec![doc! {"_id": 1}], WriteOpts::default()))
    });
    let log = db.oplog().unwrap();
    log.clear().unwrap();
    assert_eq!(log.sessions().newest_txn(&session_of(&lsid)).unwrap(), None);
}

#[test]
fn a_views_create_collmod_and_drop_are_logged_by_name_and_applied_twice_alike() {
    let db = member(1 << 20);
    db.create_collection("d", "c", &doc! {}).unwrap();
    let pipeline = vec![doc! {"$match": {"a": 1}}];
    db.create_collection(
        "d",
        "v",
        &doc! {"viewOn": "c", "pipeline": pipeline.clone()},
    )
    .unwrap();
    db.coll_mod("d", "v", &doc! {"viewOn": "c", "pipeline": []})
        .unwrap();
    db.create_collection("d", "w", &doc! {"viewOn": "v", "pipeline": []})
        .unwrap();
    db.drop_collection("d", "w").unwrap();
    let logged = entries(&db);
    let views: Vec<Document> = logged[1..].iter().map(|e| shape(e, None)).collect();
    assert!(
        logged[1..].iter().all(|e| !e.contains_key("ui")),
        "a view has no UUID"
    );
    assert_eq!(
        views,
        [
            doc! {"op": "c", "ns": "d.$cmd", "o": {"create": "v", "viewOn": "c", "pipeline": pipeline}},
            doc! {"op": "c", "ns": "d.$cmd", "o": {"collMod": "v", "viewOn": "c", "pipeline": []}},
            doc! {"op": "c", "ns": "d.$cmd", "o": {"create": "w", "viewOn": "v", "pipeline": []}},
            doc! {"op": "c", "ns": "d.$cmd", "o": {"drop": "w"}},
        ]
    );
    // Applied once, and again from the start (a replay): the primary's views, as they ended.
    let secondary = member(1 << 20);
    apply_all(&secondary, &logged);
    apply_all(&secondary, &logged);
    assert_eq!(secondary.view("d", "v").map(|v| v.pipeline), Some(vec![]));
    assert!(secondary.view("d", "w").is_none());
    assert_eq!(entries(&secondary).len(), logged.len());
}

#[test]
fn indexes_on_one_key_with_different_collations_apply_on_a_secondary() {
    let db = member(1 << 20);
    db.create_collection("d", "c", &doc! {}).unwrap();
    db.create_indexes(
        "d",
        "c",
        &[
            doc! {"key": {"f": 1}, "name": "f_1", "collation": {"locale": "en_US"}},
            doc! {"key": {"f": 1}, "name": "ja", "collation": {"locale": "ja"}},
            doc! {"key": {"f": 1}, "name": "simple"},
        ],
    )
    .unwrap();
    db.drop_indexes("d", "c", &Bson::from("f_1")).unwrap();
    let logged = entries(&db);
    let secondary = member(1 << 20);
    apply_all(&secondary, &logged);
    apply_all(&secondary, &logged);
    let names = |db: &DocDb| {
        let mut n: Vec<String> = db
            .list_indexes("d", "c")
            .unwrap()
            .iter()
            .map(|i| i.get_str("name").unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&secondary), names(&db));
}

#[test]
fn documents_with_a_top_level_dollar_field_replicate() {
    let db = member(1 << 20);
    ok(db.insert(
        "d",
        "c",
        vec![doc! {"_id": 1, "a": 1}],
        WriteOpts::default(),
    ));
    let pipeline = UpdateStatement {
        q: doc! {"_id": 1},
        u: Bson::Array(vec![Bson::Document(
            doc! {"$replaceWith": {"$setField": {"field": {"$literal": "$a"}, "input": "$$ROOT", "value": 2}}},
        )]),
        ..UpdateStatement::default()
    };
    ok(db.update("d", "c", &[pipeline], WriteOpts::default()));
    // Inserted with one too (mongod 5.0+ stores such fields as given).
    ok(db.insert(
        "d",
        "c",
        vec![doc! {"_id": 2, "$b": 1}],
        WriteOpts::default(),
    ));
    let secondary = member(1 << 20);
    apply_all(&secondary, &entries(&db));
    let read = |db: &DocDb| {
        db.find("d", "c", &FindQuery::default())
            .unwrap()
            .collect::<Vec<_>>()
    };
    assert_eq!(read(&secondary), read(&db));
}

#[test]
fn a_replayed_index_that_a_later_one_replaced_under_another_name_applies() {
    let db = member(1 << 20);
    db.create_collection("d", "c", &doc! {}).unwrap();
    db.create_indexes("d", "c", &[doc! {"key": {"f": 1}, "name": "y"}])
        .unwrap();
    db.drop_indexes("d", "c", &Bson::from("y")).unwrap();
    db.create_indexes("d", "c", &[doc! {"key": {"f": 1}, "name": "x"}])
        .unwrap();
    let logged = entries(&db);
    let secondary = member(1 << 20);
    apply_all(&secondary, &logged);
    // Replayed from the start: `y` meets `x`, alike under another name, which replaces it.
    apply_all(&secondary, &logged);
    let names: Vec<String> = secondary
        .list_indexes("d", "c")
        .unwrap()
        .iter()
        .map(|i| i.get_str("name").unwrap().to_string())
        .collect();
    assert_eq!(names, ["_id_", "x"]);
}
