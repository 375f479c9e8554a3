//! Partial indexes through the public API: entries only for documents the filter matches, a
//! unique constraint among those only, and the planner using the index only when the query
//! implies the filter.
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocDbConfig, FindQuery, UpdateStatement, WriteOpts};

fn q(filter: Document) -> FindQuery {
    FindQuery {
        filter,
        ..Default::default()
    }
}

#[test]
fn unique_email_where_not_deleted() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "users",
        &[
            doc! {"key": {"email": 1}, "name": "email_live", "unique": true,
            "partialFilterExpression": {"deleted": false}},
        ],
    )
    .unwrap();
    let ins = |d: Document| db.insert("t", "users", vec![d], WriteOpts::default());
    assert!(ins(doc! {"_id": 1, "email": "a@x", "deleted": false})
        .write_errors
        .is_empty());
    // Duplicates among deleted documents (and documents without the field) are allowed.
    assert!(ins(doc! {"_id": 2, "email": "a@x", "deleted": true})
        .write_errors
        .is_empty());
    assert!(ins(doc! {"_id": 3, "email": "a@x", "deleted": true})
        .write_errors
        .is_empty());
    assert!(ins(doc! {"_id": 4, "email": "a@x"}).write_errors.is_empty());
    // A second live one is a duplicate.
    let out = ins(doc! {"_id": 5, "email": "a@x", "deleted": false});
    assert_eq!(out.write_errors[0].error.code, 11000);
    // Undeleting a copy while the live one exists is a duplicate too; deleting the live one
    // first frees the email.
    let undelete = |id: i32| {
        db.update(
            "t",
            "users",
            &[UpdateStatement {
                q: doc! {"_id": id},
                u: Bson::Document(doc! {"$set": {"deleted": false}}),
                upsert: false,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        )
    };
    assert_eq!(undelete(2).write_errors[0].error.code, 11000);
    db.update(
        "t",
        "users",
        &[UpdateStatement {
            q: doc! {"_id": 1},
            u: Bson::Document(doc! {"$set": {"deleted": true}}),
            upsert: false,
            multi: false,
            array_filters: None,
            collation: None,
            ..Default::default()
        }],
        WriteOpts::default(),
    );
    assert!(undelete(2).write_errors.is_empty());

    // The planner: the index only answers queries that imply `deleted: false`.
    let live = q(doc! {"email": "a@x", "deleted": false});
    assert_eq!(
        db.plan_summary("t", "users", &live).unwrap(),
        "IXSCAN email_live"
    );
    let ids: Vec<Bson> = db
        .find("t", "users", &live)
        .unwrap()
        .map(|d| d.unwrap().get("_id").unwrap().clone())
        .collect();
    assert_eq!(ids, vec![Bson::Int32(2)]);
    let any = q(doc! {"email": "a@x"});
    assert_eq!(db.plan_summary("t", "users", &any).unwrap(), "COLLSCAN");
    assert_eq!(db.count("t", "users", &any).unwrap(), 4);
    let explain = db.explain_find("t", "users", &live).unwrap();
    let ixscan = explain
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap()
        .get_document("inputStage")
        .unwrap();
    assert_eq!(ixscan.get_bool("isPartial"), Ok(true));
    let spec = db
        .list_indexes("t", "users")
        .unwrap()
        .into_iter()
        .find(|s| s.get_str("name") == Ok("email_live"))
        .unwrap();
    assert_eq!(
        spec.get_document("partialFilterExpression").unwrap(),
        &doc! {"deleted": false}
    );
}

#[test]
fn range_filter_and_index_build_over_existing_documents() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let docs: Vec<Document> = (0..20)
        .map(|i| doc! {"_id": i, "cuisine": if i % 2 == 0 { "thai" } else { "fr" }, "rating": i})
        .collect();
    db.insert("t", "r", docs, WriteOpts::default());
    db.create_indexes(
        "t",
        "r",
        &[doc! {"key": {"cuisine": 1}, "partialFilterExpression": {"rating": {"$gt": 5}}}],
    )
    .unwrap();
    let used = q(doc! {"cuisine": "thai", "rating": {"$gte": 8}});
    assert_eq!(
        db.plan_summary("t", "r", &used).unwrap(),
        "IXSCAN cuisine_1"
    );
    assert_eq!(db.count("t", "r", &used).unwrap(), 6);
    let explain = db.explain_find("t", "r", &used).unwrap();
    // Only documents with rating > 5 have entries: 7 of them are thai (6..=18 even).
    assert_eq!(
        explain
            .get_document("executionStats")
            .unwrap()
            .get_i64("totalKeysExamined")
            .unwrap(),
        7
    );
    for not_implied in [
        doc! {"cuisine": "thai"},
        doc! {"cuisine": "thai", "rating": {"$gte": 5}},
        doc! {"cuisine": "thai", "rating": {"$lt": 8}},
    ] {
        let q = q(not_implied);
        assert_eq!(db.plan_summary("t", "r", &q).unwrap(), "COLLSCAN");
    }
    // A spec error: sparse and partial together.
    let e = db
        .create_indexes(
            "t",
            "r",
            &[doc! {"key": {"x": 1}, "sparse": true, "partialFilterExpression": {"x": 1}}],
        )
        .unwrap_err();
    assert_eq!(e.code, 67);
    // Same key, another filter, another name: both exist.
    db.create_indexes(
        "t",
        "r",
        &[doc! {"key": {"cuisine": 1}, "name": "c_low", "partialFilterExpression": {"rating": {"$lt": 3}}}],
    )
    .unwrap();
    assert_eq!(
        db.plan_summary("t", "r", &q(doc! {"cuisine": "fr", "rating": 1}))
            .unwrap(),
        "IXSCAN c_low"
    );
}
