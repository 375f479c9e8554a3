//! Text indexes through the public API: `$text` answered by the index with mongod's scores,
//! phrases and negations, `{$meta: "textScore"}` in projection, sort and pipelines, and the
//! errors for what mongod refuses.
use bson::{doc, Bson, Document};
use docdb::{AggregateOpts, DocDb, DocDbConfig, FindQuery, WriteOpts};
use query::error::DocResult;

fn setup() -> std::sync::Arc<DocDb> {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let docs = vec![
        doc! {"_id": 1, "subject": "coffee", "author": "xyz", "views": 50},
        doc! {"_id": 2, "subject": "Coffee Shopping", "author": "efg", "views": 5},
        doc! {"_id": 3, "subject": "Baking a cake", "author": "abc", "views": 90},
        doc! {"_id": 4, "subject": "baking", "author": "xyz", "views": 100},
        doc! {"_id": 5, "subject": "Café Con Leche", "author": "abc", "views": 200},
        doc! {"_id": 6, "subject": "Сырники", "author": "jkl", "views": 80},
        doc! {"_id": 7, "subject": "coffee and cream", "author": "efg", "views": 10},
        doc! {"_id": 8, "subject": "Cafe con Leche", "author": "xyz", "views": 10},
    ];
    db.insert("t", "articles", docs, WriteOpts::default());
    db.create_indexes("t", "articles", &[doc! {"key": {"subject": "text"}}])
        .unwrap();
    db
}

fn ids(db: &DocDb, q: FindQuery) -> Vec<i32> {
    let mut v: Vec<i32> = db
        .find("t", "articles", &q)
        .unwrap()
        .map(|d| d.unwrap().get_i32("_id").unwrap())
        .collect();
    v.sort();
    v
}

fn text(s: &str) -> FindQuery {
    FindQuery {
        filter: doc! {"$text": {"$search": s}},
        ..Default::default()
    }
}

#[test]
fn text_queries_follow_the_manuals_examples() {
    // The $text page's examples (https://www.mongodb.com/docs/manual/reference/operator/query/text/).
    let db = setup();
    assert_eq!(ids(&db, text("coffee")), vec![1, 2, 7]);
    assert_eq!(ids(&db, text("bake coffee cake")), vec![1, 2, 3, 4, 7]);
    assert_eq!(ids(&db, text("\"coffee shop\"")), vec![2]);
    assert_eq!(ids(&db, text("coffee -shop")), vec![1, 7]);
    // Diacritic-insensitive by default; sensitive on request.
    assert_eq!(ids(&db, text("CAFÉ")), vec![5, 8]);
    let mut q = text("café");
    q.filter = doc! {"$text": {"$search": "café", "$diacriticSensitive": true}};
    assert_eq!(ids(&db, q), vec![5]);
    let q = FindQuery {
        filter: doc! {"$text": {"$search": "Coffee", "$caseSensitive": true}},
        ..Default::default()
    };
    assert_eq!(ids(&db, q), vec![2]);
    // Another language: Spanish stop words and stemming for the query.
    let q = FindQuery {
        filter: doc! {"$text": {"$search": "leche", "$language": "es"}},
        ..Default::default()
    };
    assert_eq!(ids(&db, q), vec![5, 8]);
    // Other predicates combine with $text.
    let q = FindQuery {
        filter: doc! {"$text": {"$search": "coffee"}, "author": "efg"},
        ..Default::default()
    };
    assert_eq!(ids(&db, q), vec![2, 7]);
    assert_eq!(
        db.plan_summary("t", "articles", &text("coffee")).unwrap(),
        "IXSCAN subject_text"
    );
}

#[test]
fn text_score_in_projection_sort_and_pipeline() {
    let db = setup();
    let q = FindQuery {
        filter: doc! {"$text": {"$search": "coffee"}},
        projection: Some(doc! {"score": {"$meta": "textScore"}, "subject": 1}),
        sort: Some(doc! {"score": {"$meta": "textScore"}}),
        ..Default::default()
    };
    let got: Vec<Document> = db
        .find("t", "articles", &q)
        .unwrap()
        .map(|d| d.unwrap())
        .collect();
    // "coffee" alone: 1 × (0.5 × 1/1 + 0.5) = 1 (no whole-string boost: the term is the stem
    // "coffe"); "Coffee Shopping" and "coffee and cream" ("and" is a stop word): 1 of 2 → 0.75.
    assert_eq!(got[0].get_i32("_id").unwrap(), 1);
    assert!(
        (got[0].get_f64("score").unwrap() - 1.0).abs() < 1e-9,
        "{got:?}"
    );
    assert!((got[1].get_f64("score").unwrap() - 0.75).abs() < 1e-9);
    assert!(got
        .iter()
        .all(|d| !d.contains_key("$textScore") && !d.contains_key("author")));
    // Without $text, a text score is an error (40218).
    let bad = FindQuery {
        projection: Some(doc! {"score": {"$meta": "textScore"}}),
        ..Default::default()
    };
    assert_eq!(db.find("t", "articles", &bad).err().unwrap().code, 40218);
    // In a pipeline: $match with $text first, then stages reading the score.
    let pipeline = vec![
        doc! {"$match": {"$text": {"$search": "coffee cake"}}},
        doc! {"$addFields": {"s": {"$meta": "textScore"}}},
        doc! {"$sort": {"s": -1, "_id": 1}},
        doc! {"$project": {"_id": 1, "s": 1, "again": {"$meta": "textScore"}}},
    ];
    let out: Vec<Document> = db
        .aggregate("t", "articles", &pipeline, &AggregateOpts::default())
        .unwrap()
        .map(|d| d.unwrap())
        .collect();
    assert_eq!(out.len(), 4);
    assert!(
        out.iter()
            .all(|d| d.get("s") == d.get("again") && d.len() == 3),
        "{out:?}"
    );
    let late = vec![
        doc! {"$match": {"views": {"$gt": 0}}},
        doc! {"$match": {"$text": {"$search": "x"}}},
    ];
    let e = db
        .aggregate("t", "articles", &late, &AggregateOpts::default())
        .err()
        .unwrap();
    assert_eq!(e.code, 17313);
}

#[test]
fn text_errors_and_index_rules() {
    let db = setup();
    // A second text index (any fields) is refused; so is $text without one.
    let e = db
        .create_indexes("t", "articles", &[doc! {"key": {"author": "text"}}])
        .unwrap_err();
    assert_eq!(e.code, 85);
    let q = FindQuery {
        filter: doc! {"$text": {"$search": "x"}},
        ..Default::default()
    };
    assert_eq!(db.find("t", "other", &q).map(|c| c.count()).unwrap(), 0);
    db.insert("t", "other", vec![doc! {"a": 1}], WriteOpts::default());
    assert_eq!(db.find("t", "other", &q).err().unwrap().code, 27);
    let bad = |f: Document| {
        db.find(
            "t",
            "articles",
            &FindQuery {
                filter: f,
                ..Default::default()
            },
        )
        .err()
        .unwrap()
        .code
    };
    assert_eq!(
        bad(doc! {"$or": [{"$text": {"$search": "x"}}, {"a": 1}]}),
        291
    );
    assert_eq!(bad(doc! {"$nor": [{"$text": {"$search": "x"}}]}), 2);
    assert_eq!(
        bad(doc! {"a": {"$elemMatch": {"$text": {"$search": "x"}}}}),
        2
    );
    assert_eq!(
        bad(doc! {"$and": [{"$text": {"$search": "x"}}, {"$text": {"$search": "y"}}]}),
        2
    );
    assert_eq!(
        bad(doc! {"$text": {"$search": "x", "$language": "klingon"}}),
        2
    );
    // Index specs: weights and languages are checked, listIndexes shows mongod's spec.
    let spec = db
        .list_indexes("t", "articles")
        .unwrap()
        .into_iter()
        .find(|s| s.get_str("name") == Ok("subject_text"))
        .unwrap();
    assert_eq!(
        spec.get_document("key").unwrap(),
        &doc! {"_fts": "text", "_ftsx": 1}
    );
    assert_eq!(spec.get_document("weights").unwrap(), &doc! {"subject": 1});
    assert_eq!(spec.get_str("default_language"), Ok("english"));
    assert_eq!(spec.get_str("language_override"), Ok("language"));
    assert_eq!(spec.get_i32("textIndexVersion"), Ok(3));
    let code = |d: Document| db.create_indexes("t", "x", &[d]).err().map(|e| e.code);
    assert_eq!(
        code(doc! {"key": {"a": "text"}, "default_language": "klingon"}),
        Some(17264)
    );
    assert_eq!(
        code(doc! {"key": {"a": "text"}, "weights": {"a": "x"}}),
        Some(17283)
    );
    assert_eq!(
        code(doc! {"key": {"a": "text"}, "textIndexVersion": 2}),
        Some(17364)
    );
    assert_eq!(code(doc! {"key": {"a": 1}, "weights": {"a": 2}}), Some(197));
    assert_eq!(
        code(doc! {"key": {"a": 1, "b": "text", "c": "text", "d": 1, "e": "text"}}),
        Some(17389)
    );
    // A document in an unknown language cannot be indexed (17262), nothing is written.
    let out = db.insert(
        "t",
        "articles",
        vec![doc! {"_id": 99, "subject": "x", "language": "klingon"}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 17262);
}

#[test]
fn weights_wildcard_and_language_override() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "blog",
        &[doc! {"key": {"$**": "text"}, "weights": {"title": 10}, "name": "all_text"}],
    )
    .unwrap();
    db.insert(
        "t",
        "blog",
        vec![
            doc! {"_id": 1, "title": "flash", "body": "ssd"},
            doc! {"_id": 2, "title": "ssd", "body": "flash", "meta": {"tags": ["flash"]}},
            doc! {"_id": 3, "idioma": "x", "language": "spanish", "body": "las tiendas del flash"},
        ],
        WriteOpts::default(),
    );
    let q = FindQuery {
        filter: doc! {"$text": {"$search": "flash"}},
        projection: Some(doc! {"s": {"$meta": "textScore"}}),
        sort: Some(doc! {"s": {"$meta": "textScore"}}),
        ..Default::default()
    };
    let got: Vec<(i32, f64)> = db
        .find("t", "blog", &q)
        .unwrap()
        .map(|d| {
            let d = d.unwrap();
            (d.get_i32("_id").unwrap(), d.get_f64("s").unwrap())
        })
        .collect();
    assert_eq!(got[0].0, 1);
    assert!((got[0].1 - 11.0).abs() < 1e-9, "{got:?}");
    assert!((got[1].1 - 2.2).abs() < 1e-9, "{got:?}");
    // Spanish: "las" and "del" are stop words there, "tiendas" stems to "tiend".
    let es = FindQuery {
        filter: doc! {"$text": {"$search": "tienda", "$language": "spanish"}},
        ..Default::default()
    };
    let found: Vec<Bson> = db
        .find("t", "blog", &es)
        .unwrap()
        .map(|d| d.unwrap().get("_id").unwrap().clone())
        .collect();
    assert_eq!(found, vec![Bson::Int32(3)]);
}

/// The manual's compound text example ("Limit the Number of Entries Scanned",
/// https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/limit-number-of-items-scanned-for-text-search/).
fn inventory() -> std::sync::Arc<DocDb> {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let docs = vec![
        doc! {"_id": 1, "dept": "tech", "description": "lime green computer"},
        doc! {"_id": 2, "dept": "tech", "description": "wireless red mouse"},
        doc! {"_id": 3, "dept": "kitchen", "description": "green placemat"},
        doc! {"_id": 4, "dept": "kitchen", "description": "red peeler"},
        doc! {"_id": 5, "dept": "food", "description": "green apple"},
        doc! {"_id": 6, "dept": "food", "description": "red potato"},
    ];
    db.insert("t", "inventory", docs, WriteOpts::default());
    db.create_indexes(
        "t",
        "inventory",
        &[doc! {"key": {"dept": 1, "description": "text"}}],
    )
    .unwrap();
    db
}

fn find_ids(db: &DocDb, coll: &str, filter: Document) -> DocResult<Vec<i32>> {
    let q = FindQuery {
        filter,
        ..Default::default()
    };
    let mut v: Vec<i32> = db
        .find("t", coll, &q)?
        .map(|d| d.unwrap().get_i32("_id").unwrap())
        .collect();
    v.sort();
    Ok(v)
}

#[test]
fn compound_text_index_needs_equality_on_its_prefix() {
    let db = inventory();
    let ids = |f: Document| find_ids(&db, "inventory", f);
    assert_eq!(
        ids(doc! {"dept": "kitchen", "$text": {"$search": "green"}}).unwrap(),
        vec![3]
    );
    assert_eq!(
        ids(doc! {"$and": [{"dept": {"$eq": "food"}}, {"$text": {"$search": "red green"}}]})
            .unwrap(),
        vec![5, 6]
    );
    // No equality on the prefix field: mongod's planner fails (291), $in included.
    for f in [
        doc! {"$text": {"$search": "green"}},
        doc! {"dept": {"$in": ["tech"]}, "$text": {"$search": "green"}},
        doc! {"dept": {"$gt": "a"}, "$text": {"$search": "green"}},
        doc! {"dept": {"$regex": "^t"}, "$text": {"$search": "green"}},
    ] {
        assert_eq!(ids(f).unwrap_err().code, 291);
    }
    // Documents with an array in an ordered field are refused (201), nothing is written.
    let out = db.insert(
        "t",
        "inventory",
        vec![doc! {"_id": 7, "dept": ["tech"], "description": "green"}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 201);
    assert_eq!(ids(doc! {"_id": 7}).unwrap(), Vec::<i32>::new());
    // Explain: the TEXT plan's prefix.
    let q = FindQuery {
        filter: doc! {"dept": "kitchen", "$text": {"$search": "green"}},
        hint: Some(Bson::String("dept_1_description_text".into())),
        ..Default::default()
    };
    let plan = db.explain_find("t", "inventory", &q).unwrap();
    let winning = plan
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(winning.get_str("stage"), Ok("TEXT_MATCH"));
    assert_eq!(
        winning.get_document("indexPrefix").unwrap(),
        &doc! {"dept": "kitchen"}
    );
    // A hint naming another index cannot answer $text.
    db.create_indexes("t", "inventory", &[doc! {"key": {"dept": 1}}])
        .unwrap();
    let q = FindQuery {
        hint: Some(Bson::String("dept_1".into())),
        ..q
    };
    assert_eq!(db.find("t", "inventory", &q).err().unwrap().code, 291);
}

#[test]
fn compound_text_suffix_fields_and_wildcard_text() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[doc! {"key": {"a": 1, "$**": "text", "n": -1}, "name": "t"}],
    )
    .unwrap();
    let docs = vec![
        doc! {"_id": 1, "a": 1, "b": "lorem ipsum", "n": 5},
        doc! {"_id": 2, "a": 1, "c": {"d": "lorem"}},
        doc! {"_id": 3, "a": 2, "b": "lorem"},
        doc! {"_id": 4, "b": "lorem"},
    ];
    db.insert("t", "c", docs, WriteOpts::default());
    let ids = |f: Document| find_ids(&db, "c", f).unwrap();
    assert_eq!(
        ids(doc! {"a": 1, "$text": {"$search": "lorem"}}),
        vec![1, 2]
    );
    assert_eq!(
        ids(doc! {"a": 1, "$text": {"$search": "lorem"}, "n": {"$gt": 1}}),
        vec![1]
    );
    assert_eq!(
        ids(doc! {"a": 1, "$text": {"$search": "lorem"}, "n": {"$exists": false}}),
        vec![2]
    );
    // A missing prefix field is indexed as null: equality with null finds it.
    assert_eq!(
        ids(doc! {"a": null, "$text": {"$search": "lorem"}}),
        vec![4]
    );
    let spec = db
        .list_indexes("t", "c")
        .unwrap()
        .into_iter()
        .find(|s| s.get_str("name") == Ok("t"))
        .unwrap();
    assert_eq!(
        spec.get_document("key").unwrap(),
        &doc! {"a": 1, "_fts": "text", "_ftsx": 1, "n": -1}
    );
    assert_eq!(spec.get_document("weights").unwrap(), &doc! {"$**": 1});
}

mod compound_model {
    //! Differential: a compound text index `{cat: 1, body: "text"}` answers `$text` plus an
    //! equality on `cat` with the same documents and scores as a single-field text index
    //! with the equality as a filter.
    use super::*;
    use proptest::prelude::*;

    const WORDS: [&str; 8] = [
        "green", "red", "apple", "apples", "mouse", "the", "computer", "peeler",
    ];

    fn scored(db: &DocDb, coll: &str, filter: Document) -> Vec<(i32, String)> {
        let q = FindQuery {
            filter,
            projection: Some(doc! {"s": {"$meta": "textScore"}}),
            ..Default::default()
        };
        let mut v: Vec<(i32, String)> = db
            .find("t", coll, &q)
            .unwrap()
            .map(|d| {
                let d = d.unwrap();
                let s = d.get_f64("s").unwrap();
                (d.get_i32("_id").unwrap(), format!("{s:.9}"))
            })
            .collect();
        v.sort();
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn compound_equals_single_field_plus_filter(
            docs in prop::collection::vec(
                (prop::option::of(0..3i32), prop::collection::vec(0..WORDS.len(), 0..6)),
                0..30,
            ),
            query in prop::collection::vec((0..WORDS.len(), any::<bool>()), 1..4),
            cat in 0..3i32,
        ) {
            let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
            db.create_indexes("t", "compound", &[doc! {"key": {"cat": 1, "body": "text"}}]).unwrap();
            db.create_indexes("t", "single", &[doc! {"key": {"body": "text"}}]).unwrap();
            let docs: Vec<Document> = docs
                .iter()
                .enumerate()
                .map(|(i, (c, words))| {
                    let body: Vec<&str> = words.iter().map(|w| WORDS[*w]).collect();
                    let mut d = doc! {"_id": i as i32, "body": body.join(" ")};
                    if let Some(c) = c {
                        d.insert("cat", *c);
                    }
                    d
                })
                .collect();
            for coll in ["compound", "single"] {
                let out = db.insert("t", coll, docs.clone(), WriteOpts::default());
                prop_assert!(out.write_errors.is_empty());
            }
            let search: Vec<String> = query
                .iter()
                .map(|(w, neg)| format!("{}{}", if *neg { "-" } else { "" }, WORDS[*w]))
                .collect();
            let filter = doc! {"cat": cat, "$text": {"$search": search.join(" ")}};
            prop_assert_eq!(
                scored(&db, "compound", filter.clone()),
                scored(&db, "single", filter)
            );
        }
    }
}
