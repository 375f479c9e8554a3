//! Property test of the hashed index: for random documents and random equality and `$in`
//! queries, the index answers exactly what a collection scan answers — across numeric types
//! that compare equal (whose hashes must agree), values whose hashes collide by truncation
//! (`2` and `2.5`), strings, booleans, null and a missing field — also after updates move
//! documents between keys and deletes remove them.
use bson::{doc, Bson, Document};
use docdb::{DeleteStatement, DocDb, DocDbConfig, FindQuery, UpdateStatement, WriteOpts};
use proptest::prelude::*;

/// A value of field `a` (`None`: the field is missing).
fn value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        (-3i32..3).prop_map(|i| Some(Bson::Int32(i))),
        (-3i64..3).prop_map(|i| Some(Bson::Int64(i))),
        (-6i32..6).prop_map(|h| Some(Bson::Double(h as f64 / 2.0))),
        prop::sample::select(vec!["", "x", "y"]).prop_map(|s| Some(Bson::String(s.into()))),
        any::<bool>().prop_map(|b| Some(Bson::Boolean(b))),
        Just(Some(Bson::Null)),
        Just(None),
    ]
}

fn document(id: usize, a: &Option<Bson>) -> Document {
    let mut d = doc! {"_id": id as i64};
    if let Some(v) = a {
        d.insert("a", v.clone());
    }
    d
}

/// The `_id`s a find returns, sorted.
fn ids(db: &DocDb, filter: Document, hint: Document) -> Vec<i64> {
    let q = FindQuery {
        filter,
        hint: Some(Bson::Document(hint)),
        ..Default::default()
    };
    let mut out: Vec<i64> = db
        .find("t", "c", &q)
        .unwrap()
        .map(|d| d.unwrap().get_i64("_id").unwrap())
        .collect();
    out.sort_unstable();
    out
}

fn assert_index_agrees(db: &DocDb, filter: Document) -> Result<(), TestCaseError> {
    let hinted = FindQuery {
        filter: filter.clone(),
        hint: Some(Bson::Document(doc! {"a": "hashed"})),
        ..Default::default()
    };
    let plan = db.plan_summary("t", "c", &hinted).unwrap();
    prop_assert!(plan.starts_with("IXSCAN"), "{} for {}", plan, filter);
    let by_index = ids(db, filter.clone(), doc! {"a": "hashed"});
    let by_scan = ids(db, filter.clone(), doc! {"$natural": 1});
    prop_assert_eq!(by_index, by_scan, "filter {}", filter);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn hashed_index_answers_what_a_scan_answers(
        docs in prop::collection::vec(value(), 1..40),
        queries in prop::collection::vec((value(), value()), 1..12),
        updates in prop::collection::vec((0usize..40, value()), 0..10),
        deletes in prop::collection::vec(0usize..40, 0..5),
    ) {
        let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
        db.create_indexes("t", "c", &[doc! {"key": {"a": "hashed"}, "name": "a_hashed"}])
            .unwrap();
        let docs: Vec<Document> = docs.iter().enumerate().map(|(i, a)| document(i, a)).collect();
        let out = db.insert("t", "c", docs, WriteOpts::default());
        prop_assert!(out.write_errors.is_empty());
        let check = |db: &DocDb| -> Result<(), TestCaseError> {
            for (q, r) in &queries {
                let q = q.clone().unwrap_or(Bson::Null);
                let r = r.clone().unwrap_or(Bson::Null);
                assert_index_agrees(db, doc! {"a": q.clone()})?;
                assert_index_agrees(db, doc! {"a": {"$in": [q, r]}})?;
            }
            Ok(())
        };
        check(&db)?;
        for (id, a) in &updates {
            let u = match a {
                Some(v) => doc! {"$set": {"a": v.clone()}},
                None => doc! {"$unset": {"a": ""}},
            };
            let st = UpdateStatement {
                q: doc! {"_id": *id as i64},
                u: Bson::Document(u),
                upsert: false,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            };
            prop_assert!(db.update("t", "c", &[st], WriteOpts::default()).write_errors.is_empty());
        }
        for id in &deletes {
            let st = DeleteStatement {
                q: doc! {"_id": *id as i64},
                limit: 1,
                collation: None,
                ..Default::default()
            };
            prop_assert!(db.delete("t", "c", &[st], WriteOpts::default()).write_errors.is_empty());
        }
        check(&db)?;
    }
}
