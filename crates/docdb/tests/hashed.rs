//! Hashed indexes through the public API, the ownership scope and the write hook.
use bson::{doc, Bson, Document};
use docdb::scope::{with_ownership, OwnershipFilter, WriteHook, WriteToken};
use docdb::{DocDb, DocDbConfig, FindQuery, UpdateStatement, WriteOpts};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn all(db: &DocDb, q: FindQuery) -> Vec<Document> {
    db.find("t", "c", &q).unwrap().map(|d| d.unwrap()).collect()
}

#[test]
fn hashed_index_answers_equality_and_scans_in_hash_order() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes("t", "c", &[doc! {"key": {"k": "hashed"}}])
        .unwrap();
    let docs: Vec<Document> = (0..50).map(|i| doc! {"_id": i, "k": i * 10}).collect();
    assert_eq!(db.insert("t", "c", docs, WriteOpts::default()).n, 50);
    let q = FindQuery {
        filter: doc! {"k": {"$in": [30, 70.5, 70]}},
        ..Default::default()
    };
    assert_eq!(db.plan_summary("t", "c", &q).unwrap(), "IXSCAN k_hashed");
    let mut got: Vec<i32> = all(&db, q)
        .iter()
        .map(|d| d.get_i32("k").unwrap())
        .collect();
    got.sort();
    assert_eq!(got, vec![30, 70]);
    // A range cannot use it.
    let q = FindQuery {
        filter: doc! {"k": {"$gt": 30}},
        ..Default::default()
    };
    assert_eq!(db.plan_summary("t", "c", &q).unwrap(), "COLLSCAN");
    // Scanning the index walks documents by hash.
    let scanned: Vec<i64> = db
        .scan_index(
            "t",
            "c",
            &doc! {"k": "hashed"},
            Bound::Unbounded,
            Bound::Unbounded,
        )
        .unwrap()
        .map(|d| docdb::hash::hash_value(d.unwrap().get("k").unwrap()))
        .collect();
    assert_eq!(scanned.len(), 50);
    assert!(scanned.windows(2).all(|w| w[0] <= w[1]));
    // Arrays are refused, as mongod does.
    let out = db.insert("t", "c", vec![doc! {"k": [1, 2]}], WriteOpts::default());
    assert_eq!(out.write_errors[0].error.code, 16766);
}

#[test]
fn ownership_scope_hides_documents_from_reads_and_writes() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let docs: Vec<Document> = (0..10).map(|i| doc! {"_id": i, "x": 1}).collect();
    db.insert("t", "c", docs, WriteOpts::default());
    let even = OwnershipFilter::new(|d| d.get_i32("_id").unwrap() % 2 == 0);
    let (n, found, upd) = with_ownership(even, || {
        let n = db.count("t", "c", &filter(doc! {})).unwrap();
        let found = all(
            &db,
            FindQuery {
                sort: Some(doc! {"_id": -1}),
                limit: Some(2),
                ..Default::default()
            },
        );
        let upd = db.update(
            "t",
            "c",
            &[UpdateStatement {
                q: doc! {},
                u: Bson::Document(doc! {"$inc": {"x": 1}}),
                upsert: false,
                multi: true,
                array_filters: None,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        );
        (n, found, upd)
    });
    assert_eq!(n, 5);
    let ids: Vec<i32> = found.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![8, 6]);
    assert_eq!(upd.n, 5);
    assert_eq!(db.count("t", "c", &filter(doc! {"x": 2})).unwrap(), 5);
    assert_eq!(db.count("t", "c", &filter(doc! {})).unwrap(), 10);
}

struct Counting {
    applied: Arc<AtomicUsize>,
}
struct Token(Arc<AtomicUsize>);
impl WriteToken for Token {
    fn finish(self: Box<Self>, applied: bool) {
        if applied {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}
impl WriteHook for Counting {
    fn before(
        &self,
        _ns: &str,
        _old: Option<&Document>,
        new: Option<&Document>,
        _batch: &mut engine::WriteBatch,
    ) -> docdb::DocResult<Option<Box<dyn WriteToken>>> {
        if new.is_some_and(|d| d.get_bool("refuse").unwrap_or(false)) {
            return Err(docdb::DocError::with_code(66, "ImmutableField", "refused"));
        }
        Ok(Some(Box::new(Token(self.applied.clone()))))
    }
}

#[test]
fn write_hook_sees_and_can_refuse_writes() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let applied = Arc::new(AtomicUsize::new(0));
    db.set_write_hook(Some(Arc::new(Counting {
        applied: applied.clone(),
    })));
    let out = db.insert(
        "t",
        "c",
        vec![doc! {"_id": 1}, doc! {"_id": 2, "refuse": true}],
        WriteOpts::default(),
    );
    assert_eq!(out.n, 1);
    assert_eq!(out.write_errors[0].error.code, 66);
    assert_eq!(applied.load(Ordering::SeqCst), 1);
    assert_eq!(db.count("t", "c", &filter(doc! {})).unwrap(), 1);
}

fn filter(f: Document) -> FindQuery {
    FindQuery {
        filter: f,
        ..Default::default()
    }
}
