//! Upserts of the same keys from several threads, on a unique index: an upsert that matched
//! nothing and then lost the insert to another client's upsert is retried once as an update
//! (MongoDB 4.2+), so every one succeeds and no increment is lost. LinkBench's count upserts
//! do exactly this.
use bson::{doc, Bson};
use docdb::{DocDb, DocDbConfig, FindQuery, UpdateStatement, WriteOpts};
use std::sync::Arc;

#[test]
fn racing_upserts_on_a_unique_key_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(DocDb::open(DocDbConfig::disk(dir.path().join("db"))).unwrap());
    db.create_indexes(
        "t",
        "c",
        &[doc! {"key": {"k": 1}, "name": "k_1", "unique": true}],
    )
    .unwrap();
    // Every thread upserts the same new keys in the same order, so each key's first insert is
    // raced by all of them: the window between "matched nothing" and the insert is hit often.
    let (threads, keys) = (4, 10_000);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for k in 0..keys {
                    let st = UpdateStatement {
                        q: doc! {"k": k as i64},
                        u: Bson::Document(doc! {"$inc": {"n": 1}}),
                        upsert: true,
                        multi: false,
                        array_filters: None,
                        collation: None,
                        ..Default::default()
                    };
                    let out = db.update("t", "c", &[st], WriteOpts::default());
                    assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let docs: Vec<bson::Document> = db
        .find("t", "c", &FindQuery::default())
        .unwrap()
        .map(|d| d.unwrap())
        .collect();
    assert_eq!(docs.len(), keys as usize, "one document per key");
    let counts: Vec<i64> = docs
        .iter()
        .map(|d| match d.get("n") {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            other => panic!("n is {other:?}"),
        })
        .collect();
    assert!(
        counts.iter().all(|&n| n == threads as i64),
        "every key incremented once per thread: {:?}",
        counts
            .iter()
            .filter(|&&n| n != threads as i64)
            .take(5)
            .collect::<Vec<_>>()
    );
}
