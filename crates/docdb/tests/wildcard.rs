//! Wildcard indexes through the public API: keys for every covered leaf, the planner using
//! one for equality or a range on a single covered field (never for nulls, documents, arrays,
//! positions or sorts), `wildcardProjection`, and the spec errors.
use bson::{doc, Document};
use docdb::{DocDb, DocDbConfig, FindQuery, WriteOpts};

fn q(filter: Document) -> FindQuery {
    FindQuery {
        filter,
        ..Default::default()
    }
}

fn ids(db: &DocDb, coll: &str, filter: Document) -> Vec<i32> {
    let mut v: Vec<i32> = db
        .find("t", coll, &q(filter))
        .unwrap()
        .map(|d| d.unwrap().get_i32("_id").unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn wildcard_answers_single_field_predicates() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.insert(
        "t",
        "products",
        vec![
            doc! {"_id": 1, "attributes": {"color": "red", "size": 10}, "tags": ["a", "b"]},
            doc! {"_id": 2, "attributes": {"color": "blue", "dims": {"h": 3}}, "tags": []},
            doc! {"_id": 3, "attributes": {"color": null}, "price": 7},
            doc! {"_id": 4, "attributes": [{"color": "red"}, {"color": "green"}]},
        ],
        WriteOpts::default(),
    );
    db.create_indexes("t", "products", &[doc! {"key": {"$**": 1}}])
        .unwrap();
    let plan = |f: Document| db.plan_summary("t", "products", &q(f)).unwrap();
    assert_eq!(plan(doc! {"attributes.color": "red"}), "IXSCAN $**_1");
    assert_eq!(
        ids(&db, "products", doc! {"attributes.color": "red"}),
        vec![1, 4]
    );
    assert_eq!(plan(doc! {"attributes.dims.h": {"$gt": 1}}), "IXSCAN $**_1");
    assert_eq!(
        ids(&db, "products", doc! {"attributes.dims.h": {"$gt": 1}}),
        vec![2]
    );
    assert_eq!(ids(&db, "products", doc! {"tags": "b"}), vec![1]);
    assert_eq!(ids(&db, "products", doc! {"price": {"$lte": 7}}), vec![3]);
    // Not answered by the index: null, documents, arrays, positions, _id.
    for f in [
        doc! {"attributes.color": null},
        doc! {"attributes": {"color": "red", "size": 10}},
        doc! {"tags": ["a", "b"]},
        doc! {"tags.0": "a"},
        doc! {"_id": 1},
        doc! {"attributes.color": {"$exists": false}},
    ] {
        assert_ne!(plan(f.clone()), "IXSCAN $**_1", "{f}");
    }
    // The results stay right whatever the plan.
    assert_eq!(
        ids(&db, "products", doc! {"attributes.color": null}),
        vec![3]
    );
    // A sort is never provided by the index.
    let sorted = FindQuery {
        filter: doc! {"attributes.color": {"$gt": "a"}},
        sort: Some(doc! {"attributes.color": 1}),
        ..Default::default()
    };
    let explain = db.explain_find("t", "products", &sorted).unwrap();
    let stage = explain
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(stage.get_str("stage"), Ok("SORT"));
    // Updates move keys.
    db.update(
        "t",
        "products",
        &[docdb::UpdateStatement {
            q: doc! {"_id": 2},
            u: bson::Bson::Document(doc! {"$set": {"attributes.color": "red"}}),
            upsert: false,
            multi: false,
            array_filters: None,
            collation: None,
            ..Default::default()
        }],
        WriteOpts::default(),
    );
    assert_eq!(
        ids(&db, "products", doc! {"attributes.color": "red"}),
        vec![1, 2, 4]
    );
    assert_eq!(
        ids(&db, "products", doc! {"attributes.color": "blue"}),
        Vec::<i32>::new()
    );
}

#[test]
fn subtree_and_projection() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.insert(
        "t",
        "w",
        vec![
            doc! {"_id": 1, "a": {"x": 1, "y": 2}, "b": {"x": 1}, "c": 5},
            doc! {"_id": 2, "a": {"x": 2}, "b": {"x": 2}, "c": 6},
        ],
        WriteOpts::default(),
    );
    db.create_indexes("t", "w", &[doc! {"key": {"a.$**": 1}}])
        .unwrap();
    let plan = |f: Document| db.plan_summary("t", "w", &q(f)).unwrap();
    assert_eq!(plan(doc! {"a.x": 2}), "IXSCAN a.$**_1");
    assert_eq!(plan(doc! {"b.x": 2}), "COLLSCAN");
    db.create_indexes(
        "t",
        "w",
        &[doc! {"key": {"$**": 1}, "wildcardProjection": {"b": 1, "_id": 1}}],
    )
    .unwrap();
    assert_eq!(plan(doc! {"b.x": 2}), "IXSCAN $**_1");
    assert_eq!(plan(doc! {"_id": {"$gt": 1}, "c": 5}), "IXSCAN _id_");
    assert_eq!(plan(doc! {"c": 5}), "COLLSCAN");
    assert_eq!(ids(&db, "w", doc! {"b.x": {"$gte": 1}}), vec![1, 2]);
    let code = |d: Document| db.create_indexes("t", "z", &[d]).err().map(|e| e.code);
    assert_eq!(code(doc! {"key": {"$**": 1}, "unique": true}), Some(67));
    assert_eq!(code(doc! {"key": {"$**": 1}, "sparse": true}), Some(67));
    assert_eq!(
        code(doc! {"key": {"a.$**": 1}, "wildcardProjection": {"a": 1}}),
        Some(9)
    );
    assert_eq!(
        code(doc! {"key": {"$**": 1}, "wildcardProjection": {"a": 1, "b": 0}}),
        Some(31254)
    );
    assert_eq!(code(doc! {"key": {"$**": 1, "a": 1}}), Some(67));
    assert_eq!(
        code(doc! {"key": {"a": 1}, "wildcardProjection": {"a": 1}}),
        Some(9)
    );
}

/// The manual's compound wildcard example ("Compound Wildcard Indexes",
/// https://www.mongodb.com/docs/manual/core/indexes/index-types/index-wildcard/index-wildcard-compound/).
#[test]
fn compound_wildcard_bounds_the_regular_fields_and_one_covered_field() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[
            doc! {"key": {"tenantId": 1, "customFields.$**": 1}, "name": "cwi"},
            doc! {"key": {"$**": 1, "score": -1}, "wildcardProjection": {"score": 0, "tenantId": 0, "customFields": 0}, "name": "all"},
        ],
    )
    .unwrap();
    db.insert(
        "t",
        "c",
        vec![
            doc! {"_id": 1, "tenantId": 1, "customFields": {"addr": "x", "n": 3}},
            doc! {"_id": 2, "tenantId": 1, "customFields": {"addr": "y", "n": 5}},
            doc! {"_id": 3, "tenantId": 2, "customFields": {"addr": "x", "n": [3, 9]}},
            doc! {"_id": 4, "customFields": {"addr": "x"}},
            doc! {"_id": 5, "tenantId": 1, "other": {"k": 1}, "score": 2},
        ],
        WriteOpts::default(),
    );
    let plan = |f: Document| db.plan_summary("t", "c", &q(f)).unwrap();
    let f = doc! {"tenantId": 1, "customFields.addr": "x"};
    assert_eq!(plan(f.clone()), "IXSCAN cwi");
    assert_eq!(ids(&db, "c", f), vec![1]);
    assert_eq!(
        ids(
            &db,
            "c",
            doc! {"tenantId": {"$in": [1, 2]}, "customFields.n": {"$gte": 4}}
        ),
        vec![2, 3]
    );
    // The leading field alone (or a range on it) bounds the scan when a covered field is
    // constrained; a missing tenantId is indexed as null.
    assert_eq!(
        ids(
            &db,
            "c",
            doc! {"tenantId": {"$gt": 1}, "customFields.addr": "x"}
        ),
        vec![3]
    );
    assert_eq!(
        ids(&db, "c", doc! {"tenantId": null, "customFields.addr": "x"}),
        vec![4]
    );
    // The leading field alone (mongod 7's compound_wildcard_index_prefix.js): documents
    // without covered fields are found through their marker key.
    assert_eq!(plan(doc! {"tenantId": 1}), "IXSCAN cwi");
    assert_eq!(ids(&db, "c", doc! {"tenantId": 1}), vec![1, 2, 5]);
    assert_eq!(plan(doc! {"customFields": {"$exists": true}}), "COLLSCAN");
    assert_eq!(plan(doc! {"other.k": 1}), "IXSCAN all");
    assert_eq!(ids(&db, "c", doc! {"other.k": 1, "score": 2}), vec![5]);
    // Regular fields hold one value per document: an array is refused (201), nothing written.
    let out = db.insert(
        "t",
        "c",
        vec![doc! {"_id": 6, "tenantId": [1, 2], "customFields": {"addr": "z"}}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 201);
    assert!(ids(&db, "c", doc! {"_id": 6}).is_empty());
    let explain = db
        .explain_find("t", "c", &q(doc! {"tenantId": 1, "customFields.addr": "x"}))
        .unwrap();
    let bounds = explain
        .get_document("queryPlanner")
        .and_then(|p| p.get_document("winningPlan"))
        .and_then(|p| p.get_document("inputStage"))
        .and_then(|p| p.get_document("indexBounds"))
        .unwrap()
        .clone();
    assert_eq!(
        bounds,
        doc! {
            "tenantId": ["[1, 1]"],
            "$_path": ["[\"customFields.addr\", \"customFields.addr\"]"],
            "customFields.addr": ["[\"x\", \"x\"]"],
        }
    );
    let keys = explain
        .get_document("executionStats")
        .and_then(|s| {
            s.get_i64("totalKeysExamined")
                .or(s.get_i32("totalKeysExamined").map(i64::from))
        })
        .unwrap();
    assert_eq!(keys, 1);
}

mod compound_model {
    //! Differential: a compound wildcard index plan returns what a collection scan returns.
    use super::*;
    use bson::Bson;
    use proptest::prelude::*;

    fn scan(db: &DocDb, filter: &Document, hint: Option<Bson>) -> Vec<i32> {
        let q = FindQuery {
            filter: filter.clone(),
            hint,
            ..Default::default()
        };
        let mut v: Vec<i32> = db
            .find("t", "m", &q)
            .unwrap()
            .map(|d| d.unwrap().get_i32("_id").unwrap())
            .collect();
        v.sort();
        v
    }

    fn value() -> impl Strategy<Value = Option<Bson>> {
        prop_oneof![
            Just(None),
            (0..4i32).prop_map(|i| Some(Bson::Int32(i))),
            prop::collection::vec(0..4i32, 0..3)
                .prop_map(|v| Some(Bson::Array(v.into_iter().map(Bson::Int32).collect()))),
            Just(Some(Bson::String("s".into()))),
        ]
    }

    fn predicate() -> impl Strategy<Value = Bson> {
        prop_oneof![
            (0..4i32).prop_map(Bson::Int32),
            (0..4i32).prop_map(|i| Bson::Document(doc! {"$gt": i})),
            (0..4i32, 0..4i32).prop_map(|(a, b)| Bson::Document(doc! {"$in": [a, b]})),
            (0..4i32).prop_map(|i| Bson::Document(doc! {"$lte": i})),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn compound_wildcard_plan_equals_collscan(
            docs in prop::collection::vec(
                (prop::option::of(0..3i32), value(), value(), prop::option::of(0..3i32)),
                0..25,
            ),
            tenant in prop::option::of(predicate()),
            field in 0..3usize,
            pred in predicate(),
            rank in prop::option::of(predicate()),
        ) {
            let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
            db.create_indexes(
                "t",
                "m",
                &[doc! {"key": {"tenant": 1, "attrs.$**": 1, "rank": -1}, "name": "cwi"}],
            )
            .unwrap();
            let docs: Vec<Document> = docs
                .iter()
                .enumerate()
                .map(|(i, (t, a, b, r))| {
                    let mut attrs = Document::new();
                    if let Some(a) = a { attrs.insert("a", a.clone()); }
                    if let Some(b) = b { attrs.insert("b", doc! {"c": b.clone()}); }
                    // Some documents have no covered leaf at all (the marker key's case).
                    let mut d = doc! {"_id": i as i32};
                    if !attrs.is_empty() { d.insert("attrs", attrs); }
                    if let Some(t) = t { d.insert("tenant", *t); }
                    if let Some(r) = r { d.insert("rank", *r); }
                    d
                })
                .collect();
            let out = db.insert("t", "m", docs, WriteOpts::default());
            prop_assert!(out.write_errors.is_empty());
            let mut filter = Document::new();
            if let Some(t) = tenant { filter.insert("tenant", t); }
            // field 2: no predicate on a covered field (the leading regular field alone).
            if let Some(path) = ["attrs.a", "attrs.b.c"].get(field) {
                filter.insert(*path, pred);
            }
            if let Some(r) = rank { filter.insert("rank", r); }
            let natural = Some(Bson::Document(doc! {"$natural": 1}));
            let plan = db.plan_summary("t", "m", &q(filter.clone())).unwrap();
            prop_assert_eq!(scan(&db, &filter, None), scan(&db, &filter, natural), "{}", plan);
        }
    }
}
