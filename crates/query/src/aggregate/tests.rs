//! The pipeline's unit tests.

use super::*;
use bson::{bson, doc, Bson, Document};

use crate::error::{DocError, DocResult};
use crate::interrupt::Interrupt;

fn run(pipeline: Vec<Document>, input: Vec<Document>) -> DocResult<Vec<Document>> {
    let foreign = vec![
        doc! {"_id": 10, "k": 1, "name": "one"},
        doc! {"_id": 11, "k": 2, "name": "two"},
        doc! {"_id": 12, "k": 1, "name": "uno"},
        doc! {"_id": 13, "name": "nokey"},
    ];
    run_pipeline(
        &pipeline,
        Box::new(input.into_iter().map(Ok).collect::<Vec<_>>().into_iter()),
        &move |name: &str| {
            if name == "other" {
                Ok(foreign.clone())
            } else {
                Ok(vec![])
            }
        },
        &Interrupt::none(),
    )
}

fn sample() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "cat": "a", "n": 5, "tags": ["x", "y"]},
        doc! {"_id": 2, "cat": "b", "n": 2.5, "tags": []},
        doc! {"_id": 3, "cat": "a", "n": Bson::Int64(1), "tags": null},
        doc! {"_id": 4, "cat": "c", "tags": "z"},
    ]
}

#[test]
fn match_project_skip_limit_sort() {
    let r = run(
        vec![doc! {"$match": {"cat": "a"}}, doc! {"$project": {"n": 1}}],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1, "n": 5},
            doc! {"_id": 3, "n": Bson::Int64(1)}
        ]
    );
    let r = run(
        vec![
            doc! {"$sort": {"n": -1}},
            doc! {"$skip": 1},
            doc! {"$limit": 2},
            doc! {"$project": {"_id": 1}},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(r, vec![doc! {"_id": 2}, doc! {"_id": 3}]);
    let r = run(
        vec![doc! {"$project": {"_id": 0, "c": {"$concat": ["$cat", "!"]}}}],
        sample(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"c": "a!"});
    let r = run(vec![doc! {"$project": {"tags": 0, "cat": 0}}], sample()).unwrap();
    assert_eq!(r[0], doc! {"_id": 1, "n": 5});
    assert_eq!(
        run(vec![doc! {"$match": {"$foo": 1}}], sample())
            .unwrap_err()
            .code,
        2
    );
    assert_eq!(
        run(vec![doc! {"$limit": 0}], sample()).unwrap_err().code,
        15958
    );
    assert_eq!(
        run(vec![doc! {"$limit": "x"}], sample()).unwrap_err().code,
        15957
    );
    assert_eq!(
        run(vec![doc! {"$skip": -1}], sample()).unwrap_err().code,
        5107200
    );
    assert_eq!(
        run(vec![doc! {"$sort": {}}], sample()).unwrap_err().code,
        15976
    );
    assert_eq!(
        run(vec![doc! {"$match": 1}], sample()).unwrap_err().code,
        15959
    );
}

#[test]
fn stage_errors() {
    let e = run(vec![doc! {"$foo": {}}], sample()).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (40324, "Unrecognized pipeline stage name: '$foo'")
    );
    assert_eq!(e.code_name, "Location40324");
    let e = run(vec![doc! {"$match": {}, "$limit": 1}], sample()).unwrap_err();
    assert_eq!(e.code, 40323);
    let e = run(vec![doc! {"$project": {"x": {"$foo": 1}}}], sample()).unwrap_err();
    assert_eq!((e.code, e.code_name), (168, "InvalidPipelineOperator"));
    // Errors are reported before any input is consumed.
    let e = run_pipeline(
        &[doc! {"$match": {}}, doc! {"$bar": 1}],
        Box::new(std::iter::once(Err(DocError::internal_error("boom")))),
        &|_: &str| Ok(vec![]),
        &Interrupt::none(),
    )
    .unwrap_err();
    assert_eq!(e.code, 40324);
    // Input errors propagate.
    let e = run_pipeline(
        &[doc! {"$match": {}}],
        Box::new(std::iter::once(Err(DocError::internal_error("boom")))),
        &|_: &str| Ok(vec![]),
        &Interrupt::none(),
    )
    .unwrap_err();
    assert_eq!(e.code, 1);
}

#[test]
fn add_fields_set_unset_replace_root() {
    let r = run(
        vec![
            doc! {"$addFields": {"m": {"$multiply": ["$n", 2]}, "sub.x": 1}},
            doc! {"$limit": 1},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r[0],
        doc! {"_id": 1, "cat": "a", "n": 5, "tags": ["x", "y"], "m": 10, "sub": {"x": 1}}
    );
    let r = run(
        vec![
            doc! {"$set": {"n": "$$REMOVE", "cat": {"$toUpper": "$cat"}}},
            doc! {"$limit": 1},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"_id": 1, "cat": "A", "tags": ["x", "y"]});
    let r = run(
        vec![
            doc! {"$set": {"o": {"a": 1}}},
            doc! {"$set": {"o": {"b": 2}}},
            doc! {"$limit": 1},
            doc! {"$project": {"o": 1, "_id": 0}},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"o": {"a": 1, "b": 2}});
    let r = run(
        vec![doc! {"$unset": ["tags", "cat"]}, doc! {"$limit": 1}],
        sample(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"_id": 1, "n": 5});
    let r = run(vec![doc! {"$unset": "n"}, doc! {"$limit": 1}], sample()).unwrap();
    assert_eq!(r[0], doc! {"_id": 1, "cat": "a", "tags": ["x", "y"]});
    let r = run(
        vec![
            doc! {"$replaceRoot": {"newRoot": {"c": "$cat"}}},
            doc! {"$limit": 1},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"c": "a"});
    let r = run(
        vec![
            doc! {"$replaceWith": {"$mergeObjects": [{"z": 0}, "$$ROOT"]}},
            doc! {"$limit": 1},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(r[0].keys().next().unwrap(), "z");
    assert_eq!(
        run(vec![doc! {"$replaceRoot": {"newRoot": "$n"}}], sample())
            .unwrap_err()
            .code,
        40228
    );
}

#[test]
fn group_and_accumulators() {
    let r = run(
        vec![
            doc! {"$group": {
                "_id": "$cat",
                "sum": {"$sum": "$n"},
                "count": {"$sum": 1},
                "cnt": {"$count": {}},
                "avg": {"$avg": "$n"},
                "min": {"$min": "$n"},
                "max": {"$max": "$n"},
                "first": {"$first": "$n"},
                "last": {"$last": "$n"},
                "push": {"$push": "$n"},
                "set": {"$addToSet": "$cat"},
            }},
            doc! {"$sort": {"_id": 1}},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r[0],
        doc! {"_id": "a", "sum": Bson::Int64(6), "count": 2, "cnt": 2, "avg": 3.0, "min": Bson::Int64(1), "max": 5,
        "first": 5, "last": Bson::Int64(1), "push": [5, Bson::Int64(1)], "set": ["a"]}
    );
    assert_eq!(
        r[2],
        doc! {"_id": "c", "sum": 0, "count": 1, "cnt": 1, "avg": null, "min": null, "max": null,
        "first": null, "last": null, "push": [], "set": ["c"]}
    );
    // countDocuments as drivers send it.
    let r = run(
        vec![
            doc! {"$match": {"cat": "a"}},
            doc! {"$group": {"_id": 1, "n": {"$sum": 1}}},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(r, vec![doc! {"_id": 1, "n": 2}]);
    // Grouping by null, by compound keys, numbers of different types together.
    let r = run(
        vec![doc! {"$group": {"_id": null, "t": {"$sum": "$n"}}}],
        sample(),
    )
    .unwrap();
    assert_eq!(r, vec![doc! {"_id": null, "t": 8.5}]);
    let r = run(
        vec![doc! {"$group": {"_id": {"v": "$v"}, "c": {"$sum": 1}}}],
        vec![
            doc! {"v": 1},
            doc! {"v": 1.0},
            doc! {"v": Bson::Int64(1)},
            doc! {},
        ],
    )
    .unwrap();
    assert_eq!(
        r,
        vec![doc! {"_id": {"v": 1}, "c": 3}, doc! {"_id": {}, "c": 1}]
    );
    let r = run(vec![doc! {"$group": {"_id": "$missing", "m": {"$mergeObjects": {"x": "$cat"}}, "sd": {"$stdDevPop": "$n"}}}], sample()).unwrap();
    assert_eq!(r[0].get("_id"), Some(&Bson::Null));
    assert_eq!(r[0].get("m"), Some(&bson!({"x": "c"})));
}

#[test]
fn group_n_accumulators() {
    // The `n` accumulators (firstN/, lastN/, maxN/, minN/ in the manual): nulls count for
    // firstN/lastN, not for maxN/minN.
    let n = |acc: &str| {
        let g = doc! {"$group": {"_id": null, "r": {acc: {"input": "$n", "n": 2}}}};
        run(vec![g], sample()).unwrap()[0].get("r").cloned()
    };
    assert_eq!(n("$firstN"), Some(bson!([5, 2.5])));
    assert_eq!(n("$lastN"), Some(bson!([Bson::Int64(1), null])));
    assert_eq!(n("$maxN"), Some(bson!([5, 2.5])));
    assert_eq!(n("$minN"), Some(bson!([Bson::Int64(1), 2.5])));
    let bad = |spec: Document| {
        run(vec![doc! {"$group": {"_id": null, "r": spec}}], sample())
            .unwrap_err()
            .code
    };
    assert_eq!(bad(doc! {"$firstN": {"input": "$n"}}), 5787906);
    assert_eq!(bad(doc! {"$maxN": {"n": 1}}), 5787907);
    assert_eq!(
        bad(doc! {"$minN": {"n": 1, "input": "$n", "x": 1}}),
        5787901
    );
    assert_eq!(bad(doc! {"$lastN": {"n": 0, "input": "$n"}}), 5787908);
}

#[test]
fn group_errors() {
    // No input, no groups.
    assert!(run(
        vec![doc! {"$group": {"_id": null, "c": {"$sum": 1}}}],
        vec![]
    )
    .unwrap()
    .is_empty());
    // Errors.
    assert_eq!(
        run(vec![doc! {"$group": {"c": {"$sum": 1}}}], sample())
            .unwrap_err()
            .code,
        15955
    );
    assert_eq!(
        run(vec![doc! {"$group": {"_id": 1, "c": 1}}], sample())
            .unwrap_err()
            .code,
        40234
    );
    assert_eq!(
        run(
            vec![doc! {"$group": {"_id": 1, "c": {"$foo": 1}}}],
            sample()
        )
        .unwrap_err()
        .code,
        15952
    );
    assert_eq!(
        run(
            vec![doc! {"$group": {"_id": 1, "a.b": {"$sum": 1}}}],
            sample()
        )
        .unwrap_err()
        .code,
        40235
    );
    assert_eq!(
        run(
            vec![doc! {"$group": {"_id": 1, "c": {"$sum": 1, "$avg": 1}}}],
            sample()
        )
        .unwrap_err()
        .code,
        40238
    );
}

#[test]
fn unwind() {
    let r = run(vec![doc! {"$unwind": "$tags"}], sample()).unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1, "cat": "a", "n": 5, "tags": "x"},
            doc! {"_id": 1, "cat": "a", "n": 5, "tags": "y"},
            doc! {"_id": 4, "cat": "c", "tags": "z"},
        ]
    );
    let r = run(
        vec![doc! {"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}, doc! {"$project": {"tags": 1, "i": 1}}],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1, "tags": "x", "i": Bson::Int64(0)},
            doc! {"_id": 1, "tags": "y", "i": Bson::Int64(1)},
            doc! {"_id": 2, "i": null},
            doc! {"_id": 3, "tags": null, "i": null},
            doc! {"_id": 4, "tags": "z", "i": null},
        ]
    );
    let r = run(
        vec![doc! {"$unwind": "$a.b"}],
        vec![doc! {"a": {"b": [1, 2]}}],
    )
    .unwrap();
    assert_eq!(r, vec![doc! {"a": {"b": 1}}, doc! {"a": {"b": 2}}]);
    assert_eq!(
        run(vec![doc! {"$unwind": "tags"}], sample())
            .unwrap_err()
            .code,
        28818
    );
    assert_eq!(
        run(vec![doc! {"$unwind": {}}], sample()).unwrap_err().code,
        28812
    );
    assert_eq!(
        run(vec![doc! {"$unwind": {"path": "$t", "x": 1}}], sample())
            .unwrap_err()
            .code,
        28811
    );
}

#[test]
fn count_stage() {
    assert_eq!(
        run(vec![doc! {"$count": "total"}], sample()).unwrap(),
        vec![doc! {"total": 4}]
    );
    assert!(run(
        vec![doc! {"$match": {"cat": "zz"}}, doc! {"$count": "total"}],
        sample()
    )
    .unwrap()
    .is_empty());
    assert_eq!(
        run(vec![doc! {"$count": ""}], sample()).unwrap_err().code,
        40156
    );
    assert_eq!(
        run(vec![doc! {"$count": "$x"}], sample()).unwrap_err().code,
        40158
    );
    assert_eq!(
        run(vec![doc! {"$count": "a.b"}], sample())
            .unwrap_err()
            .code,
        40160
    );
    assert_eq!(
        run(vec![doc! {"$count": 1}], sample()).unwrap_err().code,
        40156
    );
}

#[test]
fn lookup() {
    let input = vec![
        doc! {"_id": 1, "k": 1},
        doc! {"_id": 2, "k": [2, 3]},
        doc! {"_id": 3},
    ];
    let r = run(
        vec![
            doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "as": "m"}},
            doc! {"$project": {"ids": "$m._id"}},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1, "ids": [10, 12]},
            doc! {"_id": 2, "ids": [11]},
            doc! {"_id": 3, "ids": [13]}
        ]
    );
    let r = run(
        vec![doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "as": "m", "pipeline": [{"$project": {"_id": 0, "name": 1}}]}}, doc! {"$limit": 1}],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        r[0].get("m"),
        Some(&bson!([{"name": "one"}, {"name": "uno"}]))
    );
    let r = run(
        vec![
            doc! {"$lookup": {"from": "empty", "localField": "k", "foreignField": "k", "as": "m"}},
            doc! {"$limit": 1},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"_id": 1, "k": 1, "m": []});
    assert_eq!(
        run(
            vec![doc! {"$lookup": {"from": "other", "as": "m"}}],
            input.clone()
        )
        .unwrap_err()
        .code,
        9
    );
    assert_eq!(run(vec![doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "as": "m", "bogus": 1}}], input).unwrap_err().code, 40321);
}

#[test]
fn sort_by_count() {
    let r = run(vec![doc! {"$sortByCount": "$cat"}], sample()).unwrap();
    assert_eq!(r[0], doc! {"_id": "a", "count": 2});
    assert_eq!(r.len(), 3);
}

/// The "page plus total" pattern and mongod's spec errors.
/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/facet/
#[test]
fn facet() {
    let r = run(
        vec![doc! {"$facet": {
            "page": [{"$sort": {"_id": -1}}, {"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}],
            "total": [{"$count": "n"}],
            "byCat": [{"$sortByCount": "$cat"}, {"$limit": 1}],
        }}],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![doc! {
            "page": [{"_id": 3}, {"_id": 2}],
            "total": [{"n": 4}],
            "byCat": [{"_id": "a", "count": 2}],
        }]
    );
    // One document even over no input; stages after $facet see it.
    let r = run(
        vec![
            doc! {"$facet": {"a": [{"$match": {"x": 1}}]}},
            doc! {"$project": {"n": {"$size": "$a"}}},
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(r, vec![doc! {"n": 0}]);
    let code = |spec: Bson| run(vec![doc! {"$facet": spec}], sample()).unwrap_err().code;
    assert_eq!(code(bson!({})), 40169);
    assert_eq!(code(bson!(1)), 40169);
    assert_eq!(code(bson!({"a": 1})), 40170);
    assert_eq!(code(bson!({"a": [1]})), 40171);
    assert_eq!(code(bson!({"a": [{}]})), 40171);
    assert_eq!(code(bson!({"a": [{"$facet": {"b": []}}]})), 40600);
    assert_eq!(code(bson!({"a": [{"$out": "x"}]})), 40600);
    assert_eq!(code(bson!({"$a": []})), 16410);
    assert_eq!(code(bson!({"a.b": []})), 16412);
    assert_eq!(code(bson!({"a": [{"$bogus": 1}]})), 40324);
}

/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/lookup/ ("Join Conditions
/// and Subqueries on a Joined Collection").
#[test]
fn lookup_let() {
    let input = vec![
        doc! {"_id": 1, "k": 1, "min": 11},
        doc! {"_id": 2, "k": 2, "min": 0},
    ];
    let r = run(
        vec![
            doc! {"$lookup": {"from": "other", "let": {"key": "$k", "lo": "$min"}, "pipeline": [
                {"$match": {"$expr": {"$and": [{"$eq": ["$k", "$$key"]}, {"$gte": ["$_id", "$$lo"]}]}}},
                {"$project": {"_id": 0, "name": 1, "key": "$$key"}},
            ], "as": "m"}},
            doc! {"$project": {"m": 1}},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1, "m": [{"name": "uno", "key": 1}]},
            doc! {"_id": 2, "m": [{"name": "two", "key": 2}]},
        ]
    );
    // Nested lookups see the outer variables; a missing field binds "missing".
    let r = run(
        vec![
            doc! {"$lookup": {"from": "other", "let": {"key": "$k", "gone": "$nope"}, "pipeline": [
                {"$match": {"$expr": {"$eq": ["$k", "$$key"]}}},
                {"$lookup": {"from": "other", "let": {"me": "$_id"}, "pipeline": [
                    {"$match": {"$expr": {"$eq": ["$_id", "$$me"]}}},
                    {"$project": {"_id": 0, "outer": "$$key", "gone": "$$gone"}},
                ], "as": "self"}},
                {"$project": {"_id": 0, "self": 1}},
            ], "as": "m"}},
            doc! {"$limit": 1},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        r[0].get("m"),
        Some(&bson!([{"self": [{"outer": 1}]}, {"self": [{"outer": 1}]}]))
    );
    // Concise form: equality and a pipeline with let.
    let r = run(
        vec![doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "let": {"lo": "$min"},
            "pipeline": [{"$match": {"$expr": {"$gte": ["$_id", "$$lo"]}}}, {"$project": {"_id": 1}}], "as": "m"}},
            doc! {"$project": {"m": 1}}],
        input.clone(),
    )
    .unwrap();
    assert_eq!(r[0], doc! {"_id": 1, "m": [{"_id": 12}]});
    // Outside the sub-pipeline the variables are gone.
    let code = |p: Vec<Document>| run(p, input.clone()).unwrap_err().code;
    assert_eq!(
        code(vec![
            doc! {"$lookup": {"from": "other", "let": {"key": "$k"}, "pipeline": [], "as": "m"}},
            doc! {"$project": {"x": "$$key"}}
        ]),
        17276
    );
    assert_eq!(
        code(vec![
            doc! {"$lookup": {"from": "other", "let": {"Key": 1}, "pipeline": [], "as": "m"}}
        ]),
        16867
    );
    assert_eq!(
        code(vec![
            doc! {"$lookup": {"from": "other", "let": {"k-y": 1}, "pipeline": [], "as": "m"}}
        ]),
        16868
    );
    assert_eq!(
        code(vec![
            doc! {"$lookup": {"from": "other", "let": 1, "pipeline": [], "as": "m"}}
        ]),
        9
    );
}

/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/unionWith/
#[test]
fn union_with() {
    let input = vec![doc! {"_id": 1}];
    let r = run(
        vec![doc! {"$unionWith": "other"}, doc! {"$project": {"_id": 1}}],
        input.clone(),
    )
    .unwrap();
    let ids: Vec<i32> = r.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![1, 10, 11, 12, 13]);
    let r = run(
        vec![
            doc! {"$unionWith": {"coll": "other", "pipeline": [{"$match": {"k": 1}}, {"$project": {"name": 1}}]}},
            doc! {"$unionWith": {"coll": "empty"}},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1},
            doc! {"_id": 10, "name": "one"},
            doc! {"_id": 12, "name": "uno"}
        ]
    );
    let code = |spec: Bson| {
        run(vec![doc! {"$unionWith": spec}], input.clone())
            .unwrap_err()
            .code
    };
    assert_eq!(code(bson!(1)), 9);
    assert_eq!(code(bson!({"pipeline": []})), 40414);
    assert_eq!(code(bson!({"coll": "other", "x": 1})), 40415);
    assert_eq!(code(bson!({"coll": 1})), 14);
    assert_eq!(
        code(bson!({"coll": "other", "pipeline": [{"$nope": 1}]})),
        40324
    );
}

/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/bucket/
#[test]
fn bucket() {
    let years = [1868, 1861, 1871, 1853, 1868, 1863, 1840, 1855, 1901];
    let input: Vec<Document> = years
        .iter()
        .enumerate()
        .map(|(i, y)| doc! {"_id": i as i32, "year": y})
        .collect();
    let r = run(
        vec![doc! {"$bucket": {"groupBy": "$year", "boundaries": [1840, 1850, 1860, 1870, 1880], "default": "Other",
            "output": {"n": {"$sum": 1}, "ids": {"$push": "$_id"}}}}],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": 1840, "n": 1, "ids": [6]},
            doc! {"_id": 1850, "n": 2, "ids": [3, 7]},
            doc! {"_id": 1860, "n": 4, "ids": [0, 1, 4, 5]},
            doc! {"_id": 1870, "n": 1, "ids": [2]},
            doc! {"_id": "Other", "n": 1, "ids": [8]},
        ]
    );
    // Default output is a count; mixed numeric types are one type; a missing value goes to
    // the default.
    let r = run(
        vec![
            doc! {"$bucket": {"groupBy": "$n", "boundaries": [0, 2.5, Bson::Int64(10)], "default": -1}},
        ],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": -1, "count": 1},
            doc! {"_id": 0, "count": 1},
            doc! {"_id": 2.5, "count": 2}
        ]
    );
    let code = |spec: Bson| {
        run(vec![doc! {"$bucket": spec}], input.clone())
            .unwrap_err()
            .code
    };
    // A value outside every bucket with no default.
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1850, 1900]})),
        40066
    );
    assert_eq!(code(bson!(1)), 40201);
    assert_eq!(
        code(bson!({"groupBy": "year", "boundaries": [1, 2]})),
        40202
    );
    assert_eq!(code(bson!({"groupBy": "$year", "boundaries": 1})), 40200);
    assert_eq!(code(bson!({"groupBy": "$year", "boundaries": [1]})), 40192);
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1, "a"]})),
        40193
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [2, 1]})),
        40194
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1, 1]})),
        40194
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": ["$x", 1]})),
        40191
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1, 5], "default": 3})),
        40199
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1, 5], "default": "$x"})),
        40195
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1, 5], "output": 1})),
        40196
    );
    assert_eq!(
        code(bson!({"groupBy": "$year", "boundaries": [1, 5], "x": 1})),
        40197
    );
    assert_eq!(code(bson!({"groupBy": "$year"})), 40198);
}

/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/bucketAuto/ (granularity
/// boundaries as mongod's BucketAutoStage computes them).
#[test]
fn bucket_auto() {
    let things: Vec<Document> = (0..100).map(|i| doc! {"_id": i}).collect();
    let r = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 5}}],
        things.clone(),
    )
    .unwrap();
    let expect: Vec<Document> = (0..5)
        .map(|b| doc! {"_id": {"min": b * 20, "max": if b == 4 { 99 } else { b * 20 + 20 }}, "count": 20})
        .collect();
    assert_eq!(r, expect);
    let r = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 5, "granularity": "R5"}}],
        things.clone(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": {"min": 0, "max": 25.0}, "count": 25},
            doc! {"_id": {"min": 25.0, "max": 63.0}, "count": 38},
            doc! {"_id": {"min": 63.0, "max": 100.0}, "count": 37},
        ]
    );
    let r = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 5, "granularity": "POWERSOF2"}}],
        things.clone(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": {"min": 0, "max": 32}, "count": 32},
            doc! {"_id": {"min": 32, "max": 64}, "count": 32},
            doc! {"_id": {"min": 64, "max": 128}, "count": 36},
        ]
    );
    // Equal keys stay in one bucket; more buckets than keys gives one per key; output fields.
    let r = run(
        vec![doc! {"$bucketAuto": {"groupBy": "$cat", "buckets": 10, "output": {"ids": {"$push": "$_id"}}}}],
        sample(),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            doc! {"_id": {"min": "a", "max": "b"}, "ids": [1, 3]},
            doc! {"_id": {"min": "b", "max": "c"}, "ids": [2]},
            doc! {"_id": {"min": "c", "max": "c"}, "ids": [4]},
        ]
    );
    let code = |spec: Bson| {
        run(vec![doc! {"$bucketAuto": spec}], sample())
            .unwrap_err()
            .code
    };
    assert_eq!(code(bson!(1)), 40240);
    assert_eq!(code(bson!({"groupBy": "n", "buckets": 2})), 40239);
    assert_eq!(code(bson!({"groupBy": "$n", "buckets": "2"})), 40241);
    assert_eq!(code(bson!({"groupBy": "$n", "buckets": 2.5})), 40242);
    assert_eq!(code(bson!({"groupBy": "$n", "buckets": 0})), 40243);
    assert_eq!(
        code(bson!({"groupBy": "$n", "buckets": 2, "output": 1})),
        40244
    );
    assert_eq!(code(bson!({"groupBy": "$n", "buckets": 2, "x": 1})), 40245);
    assert_eq!(code(bson!({"groupBy": "$n"})), 40246);
    assert_eq!(
        code(bson!({"groupBy": "$n", "buckets": 2, "granularity": "R7"})),
        40257
    );
    assert_eq!(
        code(bson!({"groupBy": "$n", "buckets": 2, "granularity": 1})),
        40261
    );
    assert_eq!(
        code(bson!({"groupBy": "$cat", "buckets": 2, "granularity": "R5"})),
        40258
    );
    assert_eq!(
        run(
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "E6"}}],
            vec![doc! {"v": -1}]
        )
        .unwrap_err()
        .code,
        40260
    );
}

#[test]
fn sample_stage() {
    let input: Vec<Document> = (0..50).map(|i| doc! {"_id": i}).collect();
    for size in [0usize, 1, 7, 50, 80] {
        let r = run(vec![doc! {"$sample": {"size": size as i64}}], input.clone()).unwrap();
        assert_eq!(r.len(), size.min(50));
        let mut ids: Vec<i32> = r.iter().map(|d| d.get_i32("_id").unwrap()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), size.min(50), "no document twice");
        assert!(ids.iter().all(|i| (0..50).contains(i)));
    }
    // Every document can be drawn: over many draws of one, all 50 show up (the chance that
    // one is missed in 2000 draws is 50 * (49/50)^2000, about 1e-16).
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        let r = run(vec![doc! {"$sample": {"size": 1}}], input.clone()).unwrap();
        seen.insert(r[0].get_i32("_id").unwrap());
    }
    assert_eq!(seen.len(), 50);
    let code = |spec: Bson| {
        run(vec![doc! {"$sample": spec}], input.clone())
            .unwrap_err()
            .code
    };
    assert_eq!(code(bson!(1)), 28745);
    assert_eq!(code(bson!({"size": "a"})), 28746);
    assert_eq!(code(bson!({"size": -1})), 28747);
    assert_eq!(code(bson!({"size": 1, "x": 1})), 28748);
    assert_eq!(code(bson!({})), 28749);
}

/// Spec errors of the writing stages, and their refusal where the pipeline has no sink (the
/// writes themselves are tested end to end, through docdb's write path).
#[test]
fn out_and_merge_specs() {
    let code = |p: Vec<Document>| run(p, sample()).unwrap_err().code;
    assert_eq!(code(vec![doc! {"$out": "t"}]), 20);
    assert_eq!(code(vec![doc! {"$merge": "t"}]), 20);
    assert_eq!(code(vec![doc! {"$out": "t"}, doc! {"$limit": 1}]), 40601);
    assert_eq!(code(vec![doc! {"$merge": "t"}, doc! {"$match": {}}]), 40601);
    assert_eq!(code(vec![doc! {"$out": 1}]), 16990);
    assert_eq!(code(vec![doc! {"$out": {"db": "x"}}]), 40414);
    assert_eq!(code(vec![doc! {"$out": {"coll": "t", "x": 1}}]), 40415);
    assert_eq!(code(vec![doc! {"$out": "system.js"}]), 17385);
    assert_eq!(
        code(vec![doc! {"$out": {"db": "admin", "coll": "t"}}]),
        31321
    );
    assert_eq!(code(vec![doc! {"$merge": 1}]), 51182);
    assert_eq!(code(vec![doc! {"$merge": {"on": "_id"}}]), 40414);
    assert_eq!(
        code(vec![doc! {"$merge": {"into": "t", "whenMatched": "x"}}]),
        2
    );
    assert_eq!(
        code(vec![doc! {"$merge": {"into": "t", "whenNotMatched": "x"}}]),
        2
    );
    assert_eq!(
        code(vec![
            doc! {"$merge": {"into": "t", "whenMatched": "keepExisting", "whenNotMatched": "fail"}}
        ]),
        51181
    );
    assert_eq!(
        code(vec![
            doc! {"$merge": {"into": "t", "whenMatched": "merge", "let": {"a": 1}}}
        ]),
        51199
    );
    assert_eq!(code(vec![doc! {"$merge": {"into": "t", "on": []}}]), 51187);
    assert_eq!(code(vec![doc! {"$merge": {"into": "t", "on": 1}}]), 51186);
    assert_eq!(
        code(vec![
            doc! {"$merge": {"into": "t", "whenMatched": [{"$group": {"_id": 1}}]}}
        ]),
        72
    );
    // Sub-pipelines cannot write.
    assert_eq!(
        code(vec![
            doc! {"$lookup": {"from": "other", "pipeline": [{"$out": "t"}], "as": "x"}}
        ]),
        51047
    );
    assert_eq!(
        code(vec![
            doc! {"$unionWith": {"coll": "other", "pipeline": [{"$merge": "t"}]}}
        ]),
        31441
    );
    assert_eq!(code(vec![doc! {"$facet": {"a": [{"$merge": "t"}]}}]), 40600);
    assert!(validate_pipeline(&[doc! {"$out": "t"}, doc! {"$match": {}}]).is_err());
}

/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/graphLookup/ (the
/// airports example: maxDepth, depthField, and a cycle JFK <-> BOS).
#[test]
fn graph_lookup() {
    let airports = vec![
        doc! {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]},
        doc! {"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]},
        doc! {"_id": 2, "airport": "ORD", "connects": ["JFK"]},
        doc! {"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]},
        doc! {"_id": 4, "airport": "LHR", "connects": ["PWM"]},
    ];
    let go = |stage: Document, input: Vec<Document>| {
        let airports = airports.clone();
        run_pipeline(
            &[stage],
            Box::new(input.into_iter().map(Ok).collect::<Vec<_>>().into_iter()),
            &move |_: &str| Ok(airports.clone()),
            &Interrupt::none(),
        )
    };
    let depths = |r: &Document| -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = r
            .get_array("d")
            .unwrap()
            .iter()
            .map(|a| {
                let a = a.as_document().unwrap();
                (
                    a.get_str("airport").unwrap().to_string(),
                    a.get_i64("n").unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let spec = doc! {"$graphLookup": {"from": "airports", "startWith": "$near", "connectFromField": "connects",
    "connectToField": "airport", "maxDepth": 2, "depthField": "n", "as": "d"}};
    let r = go(
        spec.clone(),
        vec![doc! {"near": "JFK"}, doc! {"near": "BOS"}],
    )
    .unwrap();
    let s = |x: &str| x.to_string();
    assert_eq!(
        depths(&r[0]),
        vec![(s("BOS"), 1), (s("JFK"), 0), (s("ORD"), 1), (s("PWM"), 2)]
    );
    assert_eq!(
        depths(&r[1]),
        vec![
            (s("BOS"), 0),
            (s("JFK"), 1),
            (s("LHR"), 2),
            (s("ORD"), 2),
            (s("PWM"), 1)
        ]
    );
    // No maxDepth: everything reachable; restrictSearchWithMatch prunes the walk.
    let r = go(
        doc! {"$graphLookup": {"from": "a", "startWith": "$near", "connectFromField": "connects",
        "connectToField": "airport", "depthField": "n", "as": "d", "restrictSearchWithMatch": {"airport": {"$ne": "BOS"}}}},
        vec![doc! {"near": ["JFK", "LHR"]}],
    )
    .unwrap();
    assert_eq!(
        depths(&r[0]),
        vec![(s("JFK"), 0), (s("LHR"), 0), (s("ORD"), 1), (s("PWM"), 1)]
    );
    let code = |spec: Bson| {
        go(doc! {"$graphLookup": spec}, vec![doc! {}])
            .unwrap_err()
            .code
    };
    let base = doc! {"from": "a", "startWith": "$x", "connectFromField": "c", "connectToField": "t", "as": "d"};
    let with = |k: &str, v: Bson| {
        let mut d = base.clone();
        d.insert(k, v);
        Bson::Document(d)
    };
    assert_eq!(code(bson!({"from": "a"})), 40105);
    assert_eq!(code(with("maxDepth", bson!(-1))), 40101);
    assert_eq!(code(with("maxDepth", bson!("x"))), 40100);
    assert_eq!(code(with("maxDepth", bson!(1.5))), 40102);
    assert_eq!(code(with("as", bson!(1))), 40103);
    assert_eq!(code(with("as", bson!("$d"))), 16410);
    assert_eq!(code(with("restrictSearchWithMatch", bson!(1))), 40185);
    assert_eq!(code(with("bogus", bson!(1))), 40104);
}

fn series(vals: &[Option<i32>]) -> Vec<Document> {
    vals.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Some(v) => doc! {"_id": i as i32, "t": i as i32 * 10, "g": (i % 2) as i32, "v": v},
            None => doc! {"_id": i as i32, "t": i as i32 * 10, "g": (i % 2) as i32, "v": null},
        })
        .collect()
}

fn column(r: &[Document], f: &str) -> Vec<Bson> {
    r.iter()
        .map(|d| d.get(f).cloned().unwrap_or(Bson::Null))
        .collect()
}

/// https://www.mongodb.com/docs/manual/reference/operator/aggregation/setWindowFields/
#[test]
fn set_window_fields() {
    let input = series(&[Some(1), Some(2), Some(3), Some(4), Some(5)]);
    let swf = |output: Document| {
        run(
            vec![doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": output}}],
            input.clone(),
        )
        .unwrap()
    };
    let r = swf(doc! {
        "cum": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
        "mov": {"$avg": "$v", "window": {"documents": [-1, 1]}},
        "all": {"$max": "$v"},
        "near": {"$push": "$v", "window": {"range": [-10, 0]}},
        "n": {"$documentNumber": {}},
        "prev": {"$shift": {"output": "$v", "by": -1, "default": "none"}},
        "cnt": {"$count": {}, "window": {"documents": ["current", "unbounded"]}},
        "firsts": {"$first": "$v", "window": {"documents": ["unbounded", "current"]}},
        "seen": {"$push": "$v", "window": {"documents": ["unbounded", "current"]}},
        "lasts": {"$last": "$v", "window": {"range": ["unbounded", 10]}},
    });
    // Growing windows extend one running state; it must give what a fresh one would.
    assert_eq!(column(&r, "firsts"), vec![bson!(1); 5]);
    assert_eq!(column(&r, "seen")[3], bson!([1, 2, 3, 4]));
    assert_eq!(
        column(&r, "lasts"),
        vec![bson!(2), bson!(3), bson!(4), bson!(5), bson!(5)]
    );
    assert_eq!(
        column(&r, "cum"),
        vec![bson!(1), bson!(3), bson!(6), bson!(10), bson!(15)]
    );
    assert_eq!(
        column(&r, "mov"),
        vec![bson!(1.5), bson!(2.0), bson!(3.0), bson!(4.0), bson!(4.5)]
    );
    assert_eq!(column(&r, "all"), vec![bson!(5); 5]);
    assert_eq!(column(&r, "near")[2], bson!([2, 3]));
    assert_eq!(
        column(&r, "n"),
        vec![bson!(1), bson!(2), bson!(3), bson!(4), bson!(5)]
    );
    assert_eq!(
        column(&r, "prev"),
        vec![bson!("none"), bson!(1), bson!(2), bson!(3), bson!(4)]
    );
    assert_eq!(
        column(&r, "cnt"),
        vec![bson!(5), bson!(4), bson!(3), bson!(2), bson!(1)]
    );
    // Calculus: v rises by 1 per 10 of t.
    let r = swf(doc! {
        "d": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}},
        "i": {"$integral": {"input": "$v"}, "window": {"documents": ["unbounded", "current"]}},
        "e": {"$expMovingAvg": {"input": "$v", "N": 3}},
        "cov": {"$covariancePop": ["$t", "$v"]},
    });
    assert_eq!(
        column(&r, "d"),
        vec![Bson::Null, bson!(0.1), bson!(0.1), bson!(0.1), bson!(0.1)]
    );
    assert_eq!(
        column(&r, "i"),
        vec![
            bson!(0.0),
            bson!(15.0),
            bson!(40.0),
            bson!(75.0),
            bson!(120.0)
        ]
    );
    assert_eq!(column(&r, "e")[..3], [bson!(1.0), bson!(1.5), bson!(2.25)]);
    assert_eq!(column(&r, "cov")[0], bson!(20.0));
}

#[test]
fn set_window_fields_partitions_and_gaps() {
    // Partitions, ranks with ties, gaps filled.
    let gaps = series(&[Some(1), None, Some(1), None, None, Some(7)]);
    let r = run(
        vec![
            doc! {"$setWindowFields": {"partitionBy": "$g", "sortBy": {"v": -1}, "output": {
            "rank": {"$rank": {}}, "dense": {"$denseRank": {}}}}},
        ],
        gaps.clone(),
    )
    .unwrap();
    // Partition g=0: v 1, 1, null (ids 0, 2, 4); g=1: 7, null, null (ids 5, 1, 3).
    assert_eq!(
        column(&r, "_id"),
        vec![bson!(0), bson!(2), bson!(4), bson!(5), bson!(1), bson!(3)]
    );
    assert_eq!(
        column(&r, "rank"),
        vec![bson!(1), bson!(1), bson!(3), bson!(1), bson!(2), bson!(2)]
    );
    assert_eq!(
        column(&r, "dense"),
        vec![bson!(1), bson!(1), bson!(2), bson!(1), bson!(2), bson!(2)]
    );
    let r = run(
        vec![doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": {
        "locf": {"$locf": "$v"}, "lin": {"$linearFill": "$v"}}}}],
        gaps,
    )
    .unwrap();
    assert_eq!(
        column(&r, "locf"),
        vec![bson!(1), bson!(1), bson!(1), bson!(1), bson!(1), bson!(7)]
    );
    assert_eq!(
        column(&r, "lin"),
        vec![
            bson!(1),
            bson!(1.0),
            bson!(1),
            bson!(3.0),
            bson!(5.0),
            bson!(7)
        ]
    );
}

#[test]
fn set_window_fields_parse_errors() {
    let input = series(&[Some(1), Some(2), Some(3), Some(4), Some(5)]);
    // mongod's parse errors.
    let code = |spec: Bson| {
        run(vec![doc! {"$setWindowFields": spec}], input.clone())
            .unwrap_err()
            .code
    };
    assert_eq!(code(bson!({"output": {"x": {"$rank": {}}}})), 5371602);
    assert_eq!(
        code(
            bson!({"sortBy": {"t": 1}, "output": {"x": {"$rank": {}, "window": {"documents": [0, 1]}}}})
        ),
        5371601
    );
    assert_eq!(
        code(bson!({"output": {"x": {"$sum": "$v", "window": {"documents": [-1, 0]}}}})),
        5339901
    );
    assert_eq!(
        code(
            bson!({"sortBy": {"t": 1, "v": 1}, "output": {"x": {"$sum": "$v", "window": {"range": [-1, 0]}}}})
        ),
        5339902
    );
    assert_eq!(
        code(
            bson!({"sortBy": {"t": 1}, "output": {"x": {"$sum": "$v", "window": {"documents": [1, 0]}}}})
        ),
        5339900
    );
    assert_eq!(
        code(bson!({"sortBy": {"t": 1}, "output": {"x": {"$derivative": {"input": "$v"}}}})),
        9
    );
    assert_eq!(
        code(bson!({"output": {"x": {"$shift": {"output": "$v", "by": 1}}}})),
        9
    );
    assert_eq!(
        code(
            bson!({"sortBy": {"t": 1}, "output": {"x": {"$expMovingAvg": {"input": "$v", "N": 2}, "window": {"documents": [0, 0]}}}})
        ),
        9
    );
    assert_eq!(
        code(
            bson!({"sortBy": {"t": 1}, "output": {"x": {"$derivative": {"input": "$v", "unit": "hour"}, "window": {"documents": [0, 1]}}}})
        ),
        5624900
    );
    assert_eq!(
        code(bson!({"partitionBy": [1], "output": {"x": {"$sum": 1}}})),
        14
    );
    let dynamic = run(
        vec![doc! {"$setWindowFields": {"partitionBy": "$a", "output": {"x": {"$sum": 1}}}}],
        vec![doc! {"a": [1]}],
    );
    assert_eq!(dynamic.unwrap_err().code, 14);
    assert_eq!(code(bson!({"output": {"x": {"$foo": 1}}})), 9);
    assert_eq!(
        code(bson!({"sortBy": {"t": 1}, "output": {"x": {"$sum": 1}}, "bogus": 1})),
        40415
    );
}

/// Calendar units move dates by months, clamping the day (Jan 31 + 1 month = Feb 29 in 2024).
#[test]
fn window_range_in_months() {
    let d = |s: &str| Bson::DateTime(bson::DateTime::parse_rfc3339_str(s).unwrap());
    let input = vec![
        doc! {"_id": 1, "at": d("2024-01-31T00:00:00Z")},
        doc! {"_id": 2, "at": d("2024-02-29T00:00:00Z")},
        doc! {"_id": 3, "at": d("2024-03-01T00:00:00Z")},
    ];
    let r = run(
        vec![doc! {"$setWindowFields": {"sortBy": {"at": 1}, "output": {
        "ids": {"$push": "$_id", "window": {"range": ["current", 1], "unit": "month"}}}}}],
        input,
    )
    .unwrap();
    assert_eq!(
        column(&r, "ids"),
        vec![bson!([1, 2]), bson!([2, 3]), bson!([3])]
    );
}

#[test]
fn coll_stats_specs() {
    let code = |p: Vec<Document>| run(p, sample()).unwrap_err().code;
    // Without a collection of its own (a router's merge, an update) it is refused.
    assert_eq!(code(vec![doc! {"$collStats": {"count": {}}}]), 20);
    assert_eq!(
        code(vec![doc! {"$match": {}}, doc! {"$collStats": {}}]),
        40602
    );
    assert_eq!(code(vec![doc! {"$collStats": 1}]), 5447000);
    assert_eq!(code(vec![doc! {"$collStats": {"bogus": {}}}]), 40415);
    assert_eq!(code(vec![doc! {"$collStats": {"latencyStats": {}}}]), 238);
    assert_eq!(
        code(vec![doc! {"$collStats": {"storageStats": {"scale": 0}}}]),
        51024
    );
    assert_eq!(code(vec![doc! {"$collStats": {"count": 1}}]), 14);
    assert_eq!(
        code(vec![
            doc! {"$lookup": {"from": "other", "pipeline": [{"$collStats": {}}], "as": "x"}}
        ]),
        51047
    );
    assert_eq!(
        code(vec![doc! {"$facet": {"a": [{"$collStats": {}}]}}]),
        40600
    );
}

/// Blocking stages stop at mongod's 100 MB instead of growing without bound (292).
#[test]
fn blocking_stages_hold_100_mb() {
    let big = "x".repeat(1024 * 1024);
    let input: Vec<Document> = (0..101)
        .map(|i| doc! {"_id": i, "s": big.clone()})
        .collect();
    for stage in [
        doc! {"$sort": {"_id": -1}},
        doc! {"$bucketAuto": {"groupBy": "$_id", "buckets": 2}},
        doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"n": {"$documentNumber": {}}}}},
        doc! {"$sample": {"size": 200}},
    ] {
        let e = run(vec![stage.clone()], input.clone()).unwrap_err();
        assert_eq!(
            (e.code, e.code_name),
            (292, "QueryExceededMemoryLimitNoDiskUseAllowed"),
            "{stage}"
        );
    }
    // Under the bound they run.
    assert_eq!(
        run(vec![doc! {"$sort": {"_id": -1}}], input[..90].to_vec())
            .unwrap()
            .len(),
        90
    );
}

/// `$accumulator`: init once per group, accumulate per document, finalize per group.
#[test]
fn js_accumulator_folds_each_group() {
    let acc = doc! {"$accumulator": {
        "init": "function(start) { return {count: start, sum: 0}; }",
        "initArgs": [0],
        "accumulate": Bson::JavaScriptCode(
            "function(state, qty) { return {count: state.count + 1, sum: state.sum + qty}; }".into()),
        "accumulateArgs": ["$qty"],
        "merge": "function(a, b) { return {count: a.count + b.count, sum: a.sum + b.sum}; }",
        "finalize": "function(state) { return state.sum / state.count; }",
        "lang": "js",
    }};
    let input = vec![
        doc! {"k": "a", "qty": 2},
        doc! {"k": "b", "qty": 10},
        doc! {"k": "a", "qty": 4},
    ];
    let out = run(
        vec![
            doc! {"$group": {"_id": "$k", "avg": acc.clone()}},
            doc! {"$sort": {"_id": 1}},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            doc! {"_id": "a", "avg": 3.0},
            doc! {"_id": "b", "avg": 10.0}
        ]
    );
    // Without finalize the state is the output.
    let mut plain = acc.get_document("$accumulator").unwrap().clone();
    plain.remove("finalize");
    let out = run(
        vec![doc! {"$group": {"_id": null, "s": {"$accumulator": plain}}}],
        input,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![doc! {"_id": null, "s": {"count": 3.0, "sum": 16.0}}]
    );
}

#[test]
fn js_accumulator_operands_are_checked() {
    let code = |spec: Document| {
        run(
            vec![doc! {"$group": {"_id": null, "s": {"$accumulator": spec}}}],
            vec![],
        )
        .unwrap_err()
        .code
    };
    let f = "function() { return 1; }";
    let full = doc! {"init": f, "accumulate": f, "accumulateArgs": [], "merge": f, "lang": "js"};
    let without = |k: &str| {
        let mut d = full.clone();
        d.remove(k);
        d
    };
    assert_eq!(code(without("merge")), 4544706);
    assert_eq!(code(without("lang")), 4544707);
    let mut bad = full.clone();
    bad.insert("init", "function( {");
    assert_eq!(code(bad), 139);
    let mut extra = full.clone();
    extra.insert("other", 1);
    assert_eq!(code(extra), 4544701);
    // A throwing accumulate fails the pipeline with JSInterpreterFailure.
    let mut throws = full;
    throws.insert("accumulate", "function() { throw new Error('no'); }");
    let e = run(
        vec![doc! {"$group": {"_id": null, "s": {"$accumulator": throws}}}],
        vec![doc! {"x": 1}],
    )
    .unwrap_err();
    assert_eq!(e.code, 139);
    assert!(e.message.contains("Error: no"), "{}", e.message);
}

#[test]
fn where_is_refused_in_match() {
    let e = run(vec![doc! {"$match": {"$where": "true"}}], vec![]).unwrap_err();
    assert_eq!(e.code, 2);
}
