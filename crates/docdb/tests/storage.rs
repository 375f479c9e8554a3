//! Storage side of docdb: catalog, CRUD on both engines, indexes, planner/explain, restart
//! persistence, concurrency, bad input.

use bson::{doc, Bson, Document};
use docdb::{
    DeleteStatement, DocDb, DocDbConfig, FindAndModify, FindQuery, UpdateStatement, WriteOpts,
};
use engine::{Direction, KvEngine};
use rand::{Rng, SeedableRng};
use std::ops::Bound;
use std::sync::Arc;

fn small_disk(dir: &std::path::Path) -> DocDbConfig {
    let mut cfg = DocDbConfig::disk(dir);
    cfg.engine.cache_size = 64 << 20;
    cfg.engine.checkpoint_interval = None;
    cfg
}

fn engines() -> Vec<(Arc<DocDb>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    vec![
        (DocDb::open(DocDbConfig::in_memory()).unwrap(), None),
        (DocDb::open(small_disk(dir.path())).unwrap(), Some(dir)),
    ]
}

fn all(db: &DocDb, c: &str, q: FindQuery) -> Vec<Document> {
    db.find("t", c, &q)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn filter(f: Document) -> FindQuery {
    FindQuery {
        filter: f,
        ..Default::default()
    }
}

fn ins(db: &DocDb, c: &str, docs: Vec<Document>) -> docdb::WriteOutcome {
    db.insert("t", c, docs, WriteOpts::default())
}

fn table_len(e: &Arc<dyn KvEngine>, name: &str) -> usize {
    let t = e.table_id(name).unwrap();
    e.scan(t, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .unwrap()
        .count()
}

fn winning_stage(explain: &Document) -> String {
    let mut p = explain
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap()
        .clone();
    loop {
        let s = p.get_str("stage").unwrap().to_string();
        if s == "FETCH" || s == "COLLSCAN" || s == "EOF" {
            if s == "FETCH" {
                let ix = p.get_document("inputStage").unwrap();
                return format!("IXSCAN {}", ix.get_str("indexName").unwrap());
            }
            return s;
        }
        p = p.get_document("inputStage").unwrap().clone();
    }
}

#[test]
fn crud_round_trip_both_engines() {
    for (db, _dir) in engines() {
        let out = ins(
            &db,
            "c",
            vec![
                doc! {"x": 1},
                doc! {"_id": 7, "x": 2},
                doc! {"x": 3, "_id": "s"},
            ],
        );
        assert_eq!(out.n, 3, "{:?}", out.write_errors);
        let docs = all(&db, "c", FindQuery::default());
        assert_eq!(docs.len(), 3);
        for d in &docs {
            assert_eq!(d.keys().next().unwrap(), "_id", "_id first: {d}");
        }
        assert!(matches!(docs[0].get("_id"), Some(Bson::ObjectId(_))));
        // Duplicate _id.
        let out = ins(&db, "c", vec![doc! {"_id": 7}]);
        assert_eq!(out.write_errors[0].error.code, 11000);
        assert!(out.write_errors[0]
            .error
            .message
            .contains("index: _id_ dup key: { _id: 7 }"));
        // Update, then delete.
        let out = db.update(
            "t",
            "c",
            &[UpdateStatement {
                q: doc! {"_id": 7},
                u: Bson::Document(doc! {"$set": {"x": 20}}),
                upsert: false,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        );
        assert_eq!((out.n, out.n_modified), (1, 1));
        assert_eq!(
            all(&db, "c", filter(doc! {"_id": 7}))[0]
                .get_i32("x")
                .unwrap(),
            20
        );
        let out = db.delete(
            "t",
            "c",
            &[DeleteStatement {
                q: doc! {"x": {"$gte": 3}},
                limit: 0,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        );
        assert_eq!(out.n, 2);
        assert_eq!(db.count("t", "c", &FindQuery::default()).unwrap(), 1);
        assert_eq!(db.list_databases().unwrap()[0].name, "t");
        assert_eq!(db.list_collections("t").unwrap()[0].name, "c");
        let stats = db.coll_stats("t", "c").unwrap();
        assert_eq!(stats.get_i64("count").unwrap(), 1);
        assert_eq!(stats.get_i32("nindexes").unwrap(), 1);
        assert!(db.db_stats("t").unwrap().get_i64("objects").unwrap() == 1);
        assert!(!db.storage_stats().is_empty());
    }
}

#[test]
fn unique_violation_leaves_nothing_behind() {
    for (db, _dir) in engines() {
        db.create_indexes(
            "t",
            "u",
            &[
                doc! {"key": {"a": 1}, "name": "a_1", "unique": true},
                doc! {"key": {"b": 1, "c": -1}, "name": "bc"},
                doc! {"key": {"tags": 1}, "name": "tags"},
            ],
        )
        .unwrap();
        ins(
            &db,
            "u",
            vec![doc! {"_id": 1, "a": 1, "b": 1, "c": 1, "tags": ["x", "y"]}],
        );
        let e = db.engine().clone();
        let names: Vec<String> = e
            .tables()
            .into_iter()
            .map(|t| t.0)
            .filter(|n| n.starts_with("collection-") || n.starts_with("index-"))
            .collect();
        let before: Vec<usize> = names.iter().map(|n| table_len(&e, n)).collect();
        let out = ins(
            &db,
            "u",
            vec![doc! {"_id": 2, "a": 1, "b": 2, "c": 2, "tags": ["z", "w", "v"]}],
        );
        let err = &out.write_errors[0].error;
        assert_eq!(err.code, 11000);
        let extra = err.extra.as_ref().unwrap();
        assert_eq!(extra.get_document("keyPattern").unwrap(), &doc! {"a": 1});
        assert_eq!(extra.get_document("keyValue").unwrap(), &doc! {"a": 1});
        let after: Vec<usize> = names.iter().map(|n| table_len(&e, n)).collect();
        assert_eq!(before, after, "tables {names:?}");
        // An update into a duplicate also leaves everything as it was.
        ins(&db, "u", vec![doc! {"_id": 3, "a": 3, "tags": ["q"]}]);
        let before: Vec<usize> = names.iter().map(|n| table_len(&e, n)).collect();
        let out = db.update(
            "t",
            "u",
            &[UpdateStatement {
                q: doc! {"_id": 3},
                u: Bson::Document(doc! {"$set": {"a": 1, "tags": ["r", "s"]}}),
                upsert: false,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        );
        assert_eq!(out.write_errors[0].error.code, 11000);
        let after: Vec<usize> = names.iter().map(|n| table_len(&e, n)).collect();
        assert_eq!(before, after);
        assert_eq!(
            all(&db, "u", filter(doc! {"_id": 3}))[0]
                .get_i32("a")
                .unwrap(),
            3
        );
        // Unordered inserts continue past the failure.
        let out = db.insert(
            "t",
            "u",
            vec![doc! {"a": 1}, doc! {"a": 10}, doc! {"a": 3}, doc! {"a": 11}],
            WriteOpts {
                ordered: false,
                journal: true,
                ..WriteOpts::default()
            },
        );
        assert_eq!(out.n, 2);
        let idx: Vec<usize> = out.write_errors.iter().map(|w| w.index).collect();
        assert_eq!(idx, vec![0, 2]);
        // Building a unique index over duplicates fails and leaves no table.
        ins(&db, "u", vec![doc! {"d": 5}, doc! {"d": 5}]);
        let tables = e.tables().len();
        let err = db
            .create_indexes(
                "t",
                "u",
                &[doc! {"key": {"d": 1}, "name": "d", "unique": true}],
            )
            .unwrap_err();
        assert_eq!(err.code, 11000);
        assert_eq!(e.tables().len(), tables);
        assert_eq!(db.list_indexes("t", "u").unwrap().len(), 4);
    }
}

#[test]
fn multikey_compound_descending_and_explain() {
    for (db, _dir) in engines() {
        db.create_indexes(
            "t",
            "m",
            &[
                doc! {"key": {"tags": 1}, "name": "tags_1"},
                doc! {"key": {"a": 1, "b": -1}, "name": "a_1_b_-1"},
            ],
        )
        .unwrap();
        let mut docs = Vec::new();
        for i in 0..50 {
            docs.push(doc! {"_id": i, "a": i % 5, "b": i, "tags": [format!("t{}", i % 3), "all"]});
        }
        assert_eq!(ins(&db, "m", docs).n, 50);
        // Multikey: each document once.
        let r = all(&db, "m", filter(doc! {"tags": "all"}));
        assert_eq!(r.len(), 50);
        let r = all(&db, "m", filter(doc! {"tags": {"$in": ["t1", "all"]}}));
        assert_eq!(r.len(), 50);
        let ex = db
            .explain_find("t", "m", &filter(doc! {"tags": "t1"}))
            .unwrap();
        assert_eq!(winning_stage(&ex), "IXSCAN tags_1");
        assert_eq!(
            ex.get_document("executionStats")
                .unwrap()
                .get_i64("nReturned")
                .unwrap(),
            17
        );
        // Parallel arrays are refused.
        let out = ins(&db, "m", vec![doc! {"a": [1, 2], "b": [3, 4]}]);
        assert_eq!(out.write_errors[0].error.code, 171);
        compound_descending_plans(&db);
        // Sort-only use of an index; COLLSCAN when nothing applies.
        let ex = db
            .explain_find(
                "t",
                "m",
                &FindQuery {
                    sort: Some(doc! {"a": -1, "b": 1}),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(winning_stage(&ex), "IXSCAN a_1_b_-1");
        let ex = db.explain_find("t", "m", &filter(doc! {"b": 3})).unwrap();
        assert_eq!(winning_stage(&ex), "COLLSCAN");
        let ex = db.explain_find("t", "m", &filter(doc! {"_id": 3})).unwrap();
        assert_eq!(winning_stage(&ex), "IXSCAN _id_");
        // Hints.
        let ex = db
            .explain_find(
                "t",
                "m",
                &FindQuery {
                    filter: doc! {"a": 1},
                    hint: Some(Bson::Document(doc! {"$natural": 1})),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(winning_stage(&ex), "COLLSCAN");
        let err = db
            .find(
                "t",
                "m",
                &FindQuery {
                    hint: Some(Bson::String("nope".into())),
                    ..Default::default()
                },
            )
            .err()
            .unwrap();
        assert_eq!(err.code, 2);
    }
}

#[test]
fn index_plans_match_collscan_on_random_data() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "r",
        &[
            doc! {"key": {"a": 1}, "name": "a"},
            doc! {"key": {"b": -1, "a": 1}, "name": "b_a"},
            doc! {"key": {"s": 1}, "name": "s"},
        ],
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut docs = Vec::new();
    for i in 0..400 {
        let mut d = doc! {"_id": i};
        if rng.gen_bool(0.9) {
            d.insert("a", random_value(&mut rng));
        }
        d.insert("b", Bson::Int32(rng.gen_range(0..6)));
        d.insert("s", Bson::String(format!("k{}", rng.gen_range(0..30))));
        docs.push(d);
    }
    assert_eq!(ins(&db, "r", docs).n, 400);
    let mut used_index = 0;
    for _ in 0..300 {
        let op = ["$gt", "$gte", "$lt", "$lte", "$eq"][rng.gen_range(0..5)];
        let mut f = Document::new();
        match rng.gen_range(0..5) {
            0 => {
                f.insert("a", doc! {op: random_value(&mut rng)});
            }
            1 => {
                f.insert("b", rng.gen_range(0..6));
                f.insert("a", doc! {op: random_value(&mut rng)});
            }
            2 => {
                f.insert(
                    "a",
                    doc! {"$gte": random_value(&mut rng), "$lt": random_value(&mut rng)},
                );
            }
            3 => {
                f.insert(
                    "b",
                    doc! {"$in": [rng.gen_range(0..6), rng.gen_range(0..6)]},
                );
            }
            _ => {
                f.insert("s", doc! {op: format!("k{}", rng.gen_range(0..30))});
                f.insert("b", doc! {"$lte": rng.gen_range(0..6)});
            }
        }
        let sort = if rng.gen_bool(0.3) {
            Some(doc! {"b": -1, "a": 1})
        } else {
            None
        };
        let q = FindQuery {
            filter: f.clone(),
            sort: sort.clone(),
            ..Default::default()
        };
        let forced = FindQuery {
            hint: Some(Bson::Document(doc! {"$natural": 1})),
            ..q.clone()
        };
        if db.plan_summary("t", "r", &q).unwrap() != "COLLSCAN" {
            used_index += 1;
        }
        let mut got = all(&db, "r", q.clone());
        let mut want = all(&db, "r", forced);
        if sort.is_none() {
            got.sort_by_key(|d| d.get_i32("_id").unwrap());
            want.sort_by_key(|d| d.get_i32("_id").unwrap());
        } else {
            // Equal sort keys may come in any order: compare ids per sort key group.
            let key = |d: &Document| format!("{:?}{:?}", d.get("b"), d.get("a"));
            got.sort_by(|x, y| {
                key(x)
                    .cmp(&key(y))
                    .then(x.get_i32("_id").unwrap().cmp(&y.get_i32("_id").unwrap()))
            });
            want.sort_by(|x, y| {
                key(x)
                    .cmp(&key(y))
                    .then(x.get_i32("_id").unwrap().cmp(&y.get_i32("_id").unwrap()))
            });
        }
        assert_eq!(got, want, "filter {f} sort {sort:?}");
    }
    assert!(used_index > 150, "index used {used_index} times");
}

#[test]
fn restart_keeps_catalog_indexes_and_data() {
    let dir = tempfile::tempdir().unwrap();
    fill_before_restart(dir.path());
    let db = DocDb::open(small_disk(dir.path())).unwrap();
    let names: Vec<String> = db
        .list_databases()
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, vec!["app", "app2"]);
    assert_eq!(db.list_indexes("app", "users").unwrap().len(), 3);
    assert_eq!(db.count("app2", "moved", &FindQuery::default()).unwrap(), 1);
    assert_eq!(
        db.count("app", "users", &FindQuery::default()).unwrap(),
        300
    );
    let q = filter(doc! {"email": "u42@x"});
    assert_eq!(
        db.plan_summary("app", "users", &q).unwrap(),
        "IXSCAN email_1"
    );
    let r: Vec<Document> = db
        .find("app", "users", &q)
        .unwrap()
        .map(|d| d.unwrap())
        .collect();
    assert_eq!(r[0].get_i32("_id").unwrap(), 42);
    // The multikey flag survived: tags index still dedupes.
    let n = db
        .find("app", "users", &filter(doc! {"tags": {"$gte": 0}}))
        .unwrap()
        .count();
    assert_eq!(n, 300);
    let ex = db
        .explain_find("app", "users", &filter(doc! {"tags": 1}))
        .unwrap();
    let wp = ex
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert!(wp
        .get_document("inputStage")
        .unwrap()
        .get_bool("isMultiKey")
        .unwrap());
    // Unique constraint still enforced, RecordIds continue.
    let out = db.insert(
        "app",
        "users",
        vec![doc! {"email": "u1@x"}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 11000);
    let out = db.insert(
        "app",
        "users",
        vec![doc! {"_id": 1000, "email": "new"}],
        WriteOpts::default(),
    );
    assert_eq!(out.n, 1);
    assert_eq!(
        db.count("app", "users", &FindQuery::default()).unwrap(),
        301
    );
    db.drop_collection("app", "users").unwrap();
    db.shutdown().unwrap();
    drop(db);
    let db = DocDb::open(small_disk(dir.path())).unwrap();
    assert!(db.list_collections("app").unwrap().is_empty());
    let tables: Vec<String> = db.engine().tables().into_iter().map(|t| t.0).collect();
    assert_eq!(
        tables.len(),
        3,
        "catalog + moved collection + its _id index: {tables:?}"
    );
}

#[test]
fn upsert_multi_replacement_and_find_and_modify() {
    for (db, _dir) in engines() {
        ins(
            &db,
            "w",
            (0..10)
                .map(|i| doc! {"_id": i, "g": i % 2, "v": 0})
                .collect(),
        );
        let upd = |q: Document, u: Document, upsert: bool, multi: bool| UpdateStatement {
            q,
            u: Bson::Document(u),
            upsert,
            multi,
            array_filters: None,
            collation: None,
            ..Default::default()
        };
        let out = db.update(
            "t",
            "w",
            &[upd(doc! {"g": 1}, doc! {"$inc": {"v": 5}}, false, true)],
            WriteOpts::default(),
        );
        assert_eq!((out.n, out.n_modified), (5, 5));
        let out = db.update(
            "t",
            "w",
            &[upd(doc! {"g": 0}, doc! {"$inc": {"v": 1}}, false, false)],
            WriteOpts::default(),
        );
        assert_eq!((out.n, out.n_modified), (1, 1));
        // Replacement keeps _id.
        let out = db.update(
            "t",
            "w",
            &[upd(doc! {"_id": 3}, doc! {"replaced": true}, false, false)],
            WriteOpts::default(),
        );
        assert_eq!(out.n_modified, 1);
        let d = &all(&db, "w", filter(doc! {"_id": 3}))[0];
        assert_eq!(d, &doc! {"_id": 3, "replaced": true});
        // Changing _id is refused.
        let out = db.update(
            "t",
            "w",
            &[upd(doc! {"_id": 3}, doc! {"_id": 4, "x": 1}, false, false)],
            WriteOpts::default(),
        );
        assert_eq!(out.write_errors[0].error.code, 66);
        // Upserts: operator style seeds from the filter; replacement takes the filter's _id.
        let out = db.update(
            "t",
            "w",
            &[
                upd(doc! {"name": "new"}, doc! {"$set": {"v": 9}}, true, false),
                upd(doc! {"_id": 77}, doc! {"k": 1}, true, false),
            ],
            WriteOpts::default(),
        );
        assert_eq!(out.n, 2, "{:?}", out.write_errors);
        assert_eq!(out.upserted.len(), 2);
        assert_eq!(out.upserted[1], (1, Bson::Int32(77)));
        let d = &all(&db, "w", filter(doc! {"name": "new"}))[0];
        assert_eq!(d.get_i32("v").unwrap(), 9);
        assert_eq!(
            all(&db, "w", filter(doc! {"_id": 77}))[0],
            doc! {"_id": 77, "k": 1}
        );
        find_and_modify_picks_by_sort(&db);
        // distinct, count with skip/limit, aggregate with a leading $match.
        let g = db.distinct("t", "w", "g", &FindQuery::default()).unwrap();
        assert_eq!(g, vec![Bson::Int32(0), Bson::Int32(1)]);
        assert_eq!(
            db.count(
                "t",
                "w",
                &FindQuery {
                    filter: doc! {"g": 1},
                    skip: 1,
                    limit: Some(2),
                    ..Default::default()
                }
            )
            .unwrap(),
            2
        );
        let agg: Vec<Document> = db
            .aggregate(
                "t",
                "w",
                &[doc! {"$match": {"g": 1}}, doc! {"$count": "n"}],
                &Default::default(),
            )
            .unwrap()
            .map(|d| d.unwrap())
            .collect();
        // g: 1 is on 1, 5, 7, 9 (3 was replaced by a document without g).
        assert_eq!(agg, vec![doc! {"n": 4}]);
    }
}

#[test]
fn concurrent_inserts_never_admit_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    for db in [
        DocDb::open(DocDbConfig::in_memory()).unwrap(),
        DocDb::open(small_disk(dir.path())).unwrap(),
    ] {
        db.create_indexes(
            "t",
            "k",
            &[doc! {"key": {"k": 1}, "name": "k", "unique": true}],
        )
        .unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut ok = 0;
                    for i in 0..200 {
                        let out = db.insert(
                            "t",
                            "k",
                            vec![doc! {"k": i, "who": t}],
                            WriteOpts::default(),
                        );
                        ok += out.n;
                        // Concurrent $inc on one shared document: no lost updates.
                        db.update(
                            "t",
                            "k",
                            &[UpdateStatement {
                                q: doc! {"_id": "counter"},
                                u: Bson::Document(doc! {"$inc": {"n": 1}}),
                                upsert: true,
                                multi: false,
                                array_filters: None,
                                collation: None,
                                ..Default::default()
                            }],
                            WriteOpts::default(),
                        );
                    }
                    ok
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, 200);
        let ks: Vec<Document> = all(&db, "k", filter(doc! {"k": {"$gte": 0}}));
        let mut seen = std::collections::HashSet::new();
        for d in &ks {
            assert!(seen.insert(d.get_i32("k").unwrap()), "duplicate k in {d}");
        }
        assert_eq!(
            ks.len(),
            200,
            "{:?}",
            ks.iter()
                .filter(|d| !d.contains_key("who"))
                .collect::<Vec<_>>()
        );
        let c = all(&db, "k", filter(doc! {"_id": "counter"}));
        // The counter's upsert may race once between two threads (both see no document);
        // the _id index then refuses the second insert, whose $inc is lost with an error.
        let n = c[0].get_i32("n").unwrap();
        assert!((797..=800).contains(&n), "n = {n}");
        let e = db.engine().clone();
        let idx = e
            .tables()
            .into_iter()
            .map(|t| t.0)
            .filter(|n| n.starts_with("index-") && n.ends_with("-1"))
            .collect::<Vec<_>>();
        // 200 keys plus the counter document's null key.
        assert_eq!(table_len(&e, &idx[0]), 201);
    }
}

#[test]
fn bad_input_errors() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let code = |o: docdb::WriteOutcome| o.write_errors[0].error.code;
    assert_eq!(
        code(db.insert("bad db", "c", vec![doc! {}], WriteOpts::default())),
        73
    );
    assert_eq!(
        code(db.insert("t", "a$b", vec![doc! {}], WriteOpts::default())),
        73
    );
    assert_eq!(
        db.create_collection("t", "", &doc! {}).unwrap_err().code,
        73
    );
    // MongoDB 5.0+ stores top-level `$` names; inside `_id` they stay refused (52).
    assert_eq!(code(ins(&db, "c", vec![doc! {"_id": {"$set": 1}}])), 52);
    assert_eq!(code(ins(&db, "c", vec![doc! {"_id": [1, 2]}])), 2);
    let big = "x".repeat(17 * 1024 * 1024);
    assert_eq!(code(ins(&db, "c", vec![doc! {"big": big}])), 10334);
    assert_eq!(db.count("t", "c", &FindQuery::default()).unwrap(), 0);
    db.create_collection("t", "x", &doc! {}).unwrap();
    assert_eq!(
        db.create_collection("t", "x", &doc! {}).unwrap_err().code,
        48
    );
    assert_eq!(
        db.create_collection("t", "y", &doc! {"bogus": 1})
            .unwrap_err()
            .code,
        72
    );
    assert_eq!(db.drop_collection("t", "nope").unwrap_err().code, 26);
    let ci = |spec: Document| db.create_indexes("t", "x", &[spec]).unwrap_err().code;
    assert_eq!(ci(doc! {"key": {"a": 0}, "name": "a"}), 67);
    assert_eq!(ci(doc! {"key": {"a": "geoHaystack"}, "name": "a"}), 67);
    assert_eq!(ci(doc! {"name": "a"}), 9);
    assert_eq!(ci(doc! {"key": {"a": 1}, "name": "a", "foo": 1}), 197);
    db.create_indexes("t", "x", &[doc! {"key": {"a": 1}, "name": "a"}])
        .unwrap();
    assert_eq!(ci(doc! {"key": {"b": 1}, "name": "a"}), 86);
    assert_eq!(ci(doc! {"key": {"a": 1}, "name": "other"}), 85);
    let again = db
        .create_indexes("t", "x", &[doc! {"key": {"a": 1}, "name": "a"}])
        .unwrap();
    assert_eq!(again.num_indexes_before, again.num_indexes_after);
    assert_eq!(
        db.drop_indexes("t", "x", &Bson::String("_id_".into()))
            .unwrap_err()
            .code,
        72
    );
    assert_eq!(
        db.drop_indexes("t", "x", &Bson::String("zz".into()))
            .unwrap_err()
            .code,
        27
    );
    assert_eq!(
        db.drop_indexes("t", "x", &Bson::String("*".into()))
            .unwrap(),
        2
    );
    assert_eq!(db.list_indexes("t", "x").unwrap().len(), 1);
    let out = db.delete(
        "t",
        "x",
        &[DeleteStatement {
            q: doc! {},
            limit: 5,
            collation: None,
            ..Default::default()
        }],
        WriteOpts::default(),
    );
    assert_eq!(code(out), 9);
    assert_eq!(
        db.rename_collection("t", "nope", "t", "z", false)
            .unwrap_err()
            .code,
        26
    );
    db.create_collection("t", "z", &doc! {}).unwrap();
    assert_eq!(
        db.rename_collection("t", "x", "t", "z", false)
            .unwrap_err()
            .code,
        48
    );
    db.rename_collection("t", "x", "t", "z", true).unwrap();
    assert_eq!(db.list_collections("t").unwrap().len(), 2);
    db.drop_database("t").unwrap();
    assert!(db.list_databases().unwrap().is_empty());
}

/// Replaces every `locale: from` in a document, at any depth.
fn swap_locale(d: &mut Document, from: &str, to: &str) {
    for (k, v) in d.iter_mut() {
        match v {
            Bson::String(s) if k == "locale" && s == from => *s = to.to_string(),
            Bson::Document(inner) => swap_locale(inner, from, to),
            Bson::Array(a) => {
                for x in a.iter_mut() {
                    if let Bson::Document(inner) = x {
                        swap_locale(inner, from, to);
                    }
                }
            }
            _ => {}
        }
    }
}

#[test]
fn stored_collations_refused_today_still_open_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = DocDb::open(small_disk(dir.path())).unwrap();
        let en2 = doc! {"locale": "en", "strength": 2};
        db.create_collection("t", "c", &doc! {"collation": en2.clone()})
            .unwrap();
        db.create_indexes("t", "c", &[doc! {"key": {"s": 1}, "name": "s_1"}])
            .unwrap();
        ins(
            &db,
            "c",
            vec![doc! {"_id": 1, "s": "a"}, doc! {"_id": 2, "s": "A"}],
        );
        assert!(db.startup_warnings().is_empty());
        // What an earlier flashdoc stored for {locale: "kl"} (it served it from root).
        let e = db.engine().clone();
        let cat = e.table_id(docdb::catalog::CATALOG_TABLE).unwrap();
        let key = b"t.c".to_vec();
        let mut entry = Document::from_reader(&e.get(cat, &key).unwrap().unwrap()[..]).unwrap();
        swap_locale(&mut entry, "en", "kl");
        let mut bytes = Vec::new();
        entry.to_writer(&mut bytes).unwrap();
        e.put(cat, &key, &bytes).unwrap();
        db.shutdown().unwrap();
    }
    let db = DocDb::open(small_disk(dir.path())).unwrap();
    let w = db.startup_warnings();
    assert_eq!(w.len(), 3, "default, _id and s_1: {w:?}");
    assert!(
        w.iter().all(|m| m.contains("t.c") && m.contains("kl")),
        "{w:?}"
    );
    // The collection keeps working under the collator it was built with (strength 2).
    assert_eq!(all(&db, "c", filter(doc! {"s": "a"})).len(), 2);
    // A request with that locale is still refused.
    let err = db
        .create_collection("t", "d", &doc! {"collation": {"locale": "kl"}})
        .unwrap_err();
    assert_eq!(err.code, 2, "{err:?}");
}

/// `$out`'s temporary collection left behind (a crash before its rename) is dropped at open
/// with its tables, and a rename over an existing target replaces it in one catalog batch.
#[test]
fn stale_out_temporaries_are_dropped_at_open_and_renames_replace_whole() {
    let dir = tempfile::tempdir().unwrap();
    let tables_before;
    {
        let db = DocDb::open(small_disk(dir.path())).unwrap();
        tables_before = db.engine().tables().len();
        ins(
            &db,
            "tmp.agg_out.1234",
            vec![doc! {"_id": 1}, doc! {"_id": 2}],
        );
        ins(&db, "target", vec![doc! {"_id": "old"}]);
        ins(&db, "source", vec![doc! {"_id": "new"}]);
        db.rename_collection("t", "source", "t", "target", true)
            .unwrap();
        db.shutdown().unwrap();
    }
    let db = DocDb::open(small_disk(dir.path())).unwrap();
    let names: Vec<String> = db
        .list_collections("t")
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, vec!["target".to_string()], "{names:?}");
    assert_eq!(
        all(&db, "target", FindQuery::default()),
        vec![doc! {"_id": "new"}]
    );
    assert_eq!(
        db.engine().tables().len(),
        tables_before + 2,
        "only the target's tables (documents and _id) are left beside an empty database's"
    );
}

/// A compound index with a descending field answers equality, range and sort, and backwards the reverse sort.
fn compound_descending_plans(db: &DocDb) {
    // Compound with descending second field: equality + range + sort from the index.
    let q = FindQuery {
        filter: doc! {"a": 2, "b": {"$gt": 10, "$lte": 40}},
        sort: Some(doc! {"a": 1, "b": -1}),
        ..Default::default()
    };
    let r: Vec<i32> = all(db, "m", q.clone())
        .iter()
        .map(|d| d.get_i32("b").unwrap())
        .collect();
    assert_eq!(r, vec![37, 32, 27, 22, 17, 12]);
    let ex = db.explain_find("t", "m", &q).unwrap();
    assert_eq!(winning_stage(&ex), "IXSCAN a_1_b_-1");
    let wp = ex
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(
        wp.get_str("stage").unwrap(),
        "FETCH",
        "sort provided by the index: {wp}"
    );
    let stats = ex.get_document("executionStats").unwrap();
    assert_eq!(stats.get_i64("totalKeysExamined").unwrap(), 6);
    // Reverse sort uses the index backwards.
    let q = FindQuery {
        filter: doc! {"a": 2},
        sort: Some(doc! {"b": 1}),
        ..Default::default()
    };
    let r: Vec<i32> = all(db, "m", q.clone())
        .iter()
        .map(|d| d.get_i32("b").unwrap())
        .collect();
    assert_eq!(r, vec![2, 7, 12, 17, 22, 27, 32, 37, 42, 47]);
    let ex = db.explain_find("t", "m", &q).unwrap();
    let wp = ex
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(
        wp.get_document("inputStage")
            .unwrap()
            .get_str("direction")
            .unwrap(),
        "backward"
    );
}

/// findAndModify: the sort picks the document, `new` returns it updated.
fn find_and_modify_picks_by_sort(db: &DocDb) {
    // findAndModify: sort picks the document, new returns the update.
    let r = db
        .find_and_modify(
            "t",
            "w",
            &FindAndModify {
                query: doc! {"g": 1},
                sort: Some(doc! {"_id": -1}),
                update: Some(Bson::Document(doc! {"$set": {"picked": true}})),
                new: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.value.as_ref().unwrap().get_i32("_id").unwrap(), 9);
    assert!(r.value.unwrap().get_bool("picked").unwrap());
    assert!(r.updated_existing);
    let r = db
        .find_and_modify(
            "t",
            "w",
            &FindAndModify {
                query: doc! {"_id": 0},
                remove: true,
                fields: Some(doc! {"g": 1}),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.value.unwrap(), doc! {"_id": 0, "g": 0});
    let r = db
        .find_and_modify(
            "t",
            "w",
            &FindAndModify {
                query: doc! {"_id": 500},
                update: Some(Bson::Document(doc! {"$set": {"z": 1}})),
                upsert: true,
                new: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.upserted, Some(Bson::Int32(500)));
    assert_eq!(r.value.unwrap(), doc! {"_id": 500, "z": 1});
    let err = db
        .find_and_modify("t", "w", &FindAndModify::default())
        .unwrap_err();
    assert_eq!(err.code, 9);
}

/// A value of a random type for the random-data test (numbers, strings, null, arrays, booleans).
fn random_value(rng: &mut rand::rngs::StdRng) -> Bson {
    match rng.gen_range(0..7) {
        0 => Bson::Int32(rng.gen_range(-5..5)),
        1 => Bson::Int64(rng.gen_range(-5..5)),
        2 => Bson::Double(rng.gen_range(-5.0..5.0f64).round() / 2.0),
        3 => Bson::String(["a", "b", "ab", ""][rng.gen_range(0..4)].into()),
        4 => Bson::Null,
        5 => Bson::Array(vec![
            Bson::Int32(rng.gen_range(-5..5)),
            Bson::Int32(rng.gen_range(-5..5)),
        ]),
        _ => Bson::Boolean(rng.gen()),
    }
}

/// The state the restart must keep: a unique and a multikey index, 300 users, a renamed collection.
fn fill_before_restart(dir: &std::path::Path) {
    let db = DocDb::open(small_disk(dir)).unwrap();
    db.create_collection("app", "users", &doc! {}).unwrap();
    db.create_indexes(
        "app",
        "users",
        &[doc! {"key": {"email": 1}, "name": "email_1", "unique": true}],
    )
    .unwrap();
    let docs: Vec<Document> = (0..300)
        .map(|i| doc! {"_id": i, "email": format!("u{i}@x"), "tags": [i % 2, 5]})
        .collect();
    assert_eq!(db.insert("app", "users", docs, WriteOpts::default()).n, 300);
    db.create_indexes(
        "app",
        "users",
        &[doc! {"key": {"tags": 1}, "name": "tags_1"}],
    )
    .unwrap();
    db.insert(
        "app",
        "other",
        vec![doc! {"x": 1}],
        WriteOpts {
            ordered: true,
            journal: true,
            ..WriteOpts::default()
        },
    );
    db.rename_collection("app", "other", "app2", "moved", false)
        .unwrap();
    db.shutdown().unwrap();
}

#[test]
fn a_table_kept_beside_the_collections_opens_on_every_engine() {
    // A shard's session records live in such a table: created with a collection table's
    // defaults (snappy), the in-place engine refused it and a shard on mmapv1 did not start.
    let dir = tempfile::tempdir().unwrap();
    let mut mmapv1 = small_disk(dir.path());
    mmapv1.engine_kind = engine::EngineKind::Mmapv1;
    let in_place = DocDb::open(mmapv1).unwrap();
    assert!(in_place
        .engine()
        .create_table("refused", &engine::TableConfig::collection())
        .is_err());
    let (dbs, _dirs): (Vec<_>, Vec<_>) = engines().into_iter().unzip();
    for db in dbs.iter().chain([&in_place]) {
        let cfg = db.internal_table_config();
        let t = db.engine().create_table("kept", &cfg).unwrap();
        db.engine().put(t, b"k", b"v").unwrap();
        assert_eq!(
            db.engine().get(t, b"k").unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }
}

/// collStats' storageSize on the in-place engine is MMAPv1's: the extents the collection's
/// table holds, used or not. Deletes leave it; `compact` hands the extents back.
#[test]
fn storage_size_on_mmapv1_is_the_extents_the_collection_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_disk(dir.path());
    cfg.engine_kind = engine::EngineKind::Mmapv1;
    // As `storage.engine: mmapv1` makes them: no compression of any kind.
    for t in [&mut cfg.collection_table, &mut cfg.index_table] {
        t.compressor = engine::Compressor::None;
        t.prefix_compression = false;
    }
    let db = DocDb::open(cfg).unwrap();
    // Records of 256 bytes (a 222-byte document and its header, padded to a power of two).
    let docs = (0..2000)
        .map(|i| doc! {"_id": i, "s": "x".repeat(200)})
        .collect();
    assert_eq!(ins(&db, "c", docs).n, 2000);
    let size = |db: &DocDb| {
        db.coll_stats("t", "c")
            .unwrap()
            .get_i64("storageSize")
            .unwrap()
    };
    let full = size(&db);
    // Extents double from 64 KiB on a new database: 64 KiB × (2^k - 1), room for the records.
    let first = 64 << 10;
    assert!(
        full % first == 0 && (full / first + 1).count_ones() == 1 && full >= 2000 * 256,
        "{full}"
    );
    let out = db.delete(
        "t",
        "c",
        &[DeleteStatement {
            q: doc! {"_id": {"$gte": 100}},
            limit: 0,
            collation: None,
            ..Default::default()
        }],
        WriteOpts::default(),
    );
    assert_eq!(out.n, 1900);
    assert_eq!(size(&db), full, "deletes free records, not extents");
    let done = db
        .compact(
            "t",
            "c",
            docdb::CompactOpts {
                dry_run: false,
                free_space_target: 1,
            },
        )
        .unwrap();
    assert!(done.get_i64("bytesFreed").unwrap() > 0, "{done}");
    assert_eq!(size(&db), first, "100 records fit the first extent");
    let db_stats = db.db_stats("t").unwrap();
    assert!(db_stats.get_f64("storageSize").unwrap() >= first as f64);
    db.shutdown().unwrap();
}

/// A damaged journal on the in-place engine refuses the open with the engine's own way out,
/// not `flashdoc repair`'s, which does not handle that engine.
#[test]
fn a_damaged_mmapv1_journal_is_refused_without_pointing_at_repair() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_disk(dir.path());
    cfg.engine_kind = engine::EngineKind::Mmapv1;
    for t in [&mut cfg.collection_table, &mut cfg.index_table] {
        t.compressor = engine::Compressor::None;
        t.prefix_compression = false;
    }
    {
        let db = DocDb::open(cfg.clone()).unwrap();
        let e = db.engine().clone();
        let t = e.create_table("kept", &db.internal_table_config()).unwrap();
        for i in 0..200u32 {
            e.put(t, &i.to_be_bytes(), &[1; 300]).unwrap();
            e.sync().unwrap();
        }
        // Dropped without a shutdown: the journal is all there is of the writes.
    }
    let jdir = dir.path().join("journal");
    let path = std::fs::read_dir(&jdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0xFF;
    std::fs::write(&path, &bytes).unwrap();
    let err = DocDb::open(cfg).err().expect("refused").to_string();
    assert!(err.contains("not a crash's torn tail"), "{err}");
    assert!(err.contains("truncate"), "{err}");
    assert!(!err.contains("flashdoc repair --dbpath"), "{err}");
}
