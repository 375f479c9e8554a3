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
