//! Compound 2dsphere indexes (`{cat: 1, loc: "2dsphere", rank: -1}`, `{loc: "2dsphere", cat: 1}`)
//! answer what a collection scan answers: random points with random other fields (missing,
//! scalars, arrays), `$geoWithin` with equalities or `$in` on the fields before the geo field,
//! and `$near` with and without those equalities, against a brute-force distance order.
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocDbConfig, FindQuery, WriteOpts};
use proptest::prelude::*;
use query::geo::sphere::{EARTH_RADIUS_M, V3};

fn lng_lat() -> impl Strategy<Value = (f64, f64)> {
    prop_oneof![
        (-180.0f64..180.0, -90.0f64..90.0),
        (0.0f64..3.0, 40.0f64..43.0)
    ]
}

fn cat() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        Just(None),
        (0..3i32).prop_map(|c| Some(Bson::Int32(c))),
        prop::collection::vec(0..3i32, 0..3)
            .prop_map(|v| Some(Bson::Array(v.into_iter().map(Bson::Int32).collect()))),
    ]
}

type Row = (Option<(f64, f64)>, Option<Bson>, Option<i32>);

fn load(rows: &[Row]) -> std::sync::Arc<DocDb> {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[
            doc! {"key": {"cat": 1, "loc": "2dsphere", "rank": -1}, "name": "cat_loc"},
            doc! {"key": {"loc": "2dsphere", "cat": 1}, "name": "loc_cat"},
        ],
    )
    .unwrap();
    let docs: Vec<Document> = rows
        .iter()
        .enumerate()
        .map(|(i, (p, c, r))| {
            let mut d = doc! {"_id": i as i64};
            if let Some((x, y)) = p {
                d.insert("loc", doc! {"type": "Point", "coordinates": [x, y]});
            }
            if let Some(c) = c {
                d.insert("cat", c.clone());
            }
            if let Some(r) = r {
                d.insert("rank", *r);
            }
            d
        })
        .collect();
    let out = db.insert("t", "c", docs, WriteOpts::default());
    assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    db
}

fn ids(db: &DocDb, filter: &Document, hint: Option<Bson>) -> Vec<i64> {
    let q = FindQuery {
        filter: filter.clone(),
        hint,
        ..Default::default()
    };
    db.find("t", "c", &q)
        .unwrap()
        .map(|d| d.unwrap().get_i64("_id").unwrap())
        .collect()
}

fn sorted(mut v: Vec<i64>) -> Vec<i64> {
    v.sort_unstable();
    v
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec(
        (
            prop::option::weighted(0.9, lng_lat()),
            cat(),
            prop::option::of(0..3i32),
        ),
        0..50,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn compound_within_answers_what_a_scan_answers(
        rows in rows(),
        (x, y) in lng_lat(),
        r in 0.0f64..0.5,
        c in 0..3i32,
        use_in in any::<bool>(),
    ) {
        let db = load(&rows);
        let cat = if use_in { Bson::Document(doc! {"$in": [c, (c + 1) % 3]}) } else { Bson::Int32(c) };
        let f = doc! {"cat": cat, "loc": {"$geoWithin": {"$centerSphere": [[x, y], r]}}};
        let natural = Some(Bson::Document(doc! {"$natural": 1}));
        let want = sorted(ids(&db, &f, natural));
        for name in ["cat_loc", "loc_cat"] {
            let got = sorted(ids(&db, &f, Some(Bson::String(name.into()))));
            prop_assert_eq!(&got, &want, "{}", name);
        }
        let plan = db.plan_summary("t", "c", &FindQuery { filter: f.clone(), ..Default::default() }).unwrap();
        prop_assert!(plan.starts_with("IXSCAN"), "{}", plan);
    }

    #[test]
    fn compound_near_is_every_matching_document_in_order(
        rows in rows(),
        (x, y) in lng_lat(),
        max_km in 1.0f64..20_000.0,
        c in prop::option::of(0..3i32),
    ) {
        let db = load(&rows);
        let max = max_km * 1000.0;
        let mut f = doc! {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [x, y]}, "$maxDistance": max}}};
        if let Some(c) = c {
            f.insert("cat", c);
        }
        let got = ids(&db, &f, None);
        let center = V3::from_lng_lat(x, y);
        let dist = |i: i64| {
            let (px, py) = rows[i as usize].0.expect("only documents with a location match");
            center.angle(V3::from_lng_lat(px, py)) * EARTH_RADIUS_M
        };
        let has_cat = |i: usize| match (&rows[i].1, c) {
            (_, None) => true,
            (Some(Bson::Int32(v)), Some(c)) => *v == c,
            (Some(Bson::Array(a)), Some(c)) => a.contains(&Bson::Int32(c)),
            _ => false,
        };
        let want: Vec<i64> = (0..rows.len())
            .filter(|&i| rows[i].0.is_some() && has_cat(i))
            .map(|i| i as i64)
            .filter(|&i| dist(i) <= max)
            .collect();
        for w in got.windows(2) {
            prop_assert!(dist(w[0]) <= dist(w[1]));
        }
        prop_assert_eq!(sorted(got), want);
    }
}

/// The manual's compound 2dsphere example ("Create a 2dsphere Index",
/// https://www.mongodb.com/docs/manual/core/indexes/index-types/geospatial/2dsphere/create/).
#[test]
fn compound_specs_keys_and_plans() {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "places",
        &[doc! {"key": {"loc": "2dsphere", "category": -1, "name": 1}}],
    )
    .unwrap();
    let spec = db
        .list_indexes("t", "places")
        .unwrap()
        .into_iter()
        .find(|s| s.get_str("name") == Ok("loc_2dsphere_category_-1_name_1"))
        .unwrap();
    assert_eq!(spec.get_i32("2dsphereIndexVersion"), Ok(3));
    db.insert(
        "t",
        "places",
        vec![
            doc! {"_id": 1, "loc": {"type": "Point", "coordinates": [-73.97, 40.77]}, "name": "Central Park", "category": "Parks"},
            doc! {"_id": 2, "loc": {"type": "Point", "coordinates": [-73.88, 40.78]}, "name": "La Guardia Airport", "category": "Airport"},
            // No location: not in the index (sparse on the geo field), but stored.
            doc! {"_id": 3, "name": "Nowhere", "category": "Parks"},
        ],
        WriteOpts::default(),
    );
    let near = |category: Option<&str>| {
        let mut f = doc! {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [-73.9667, 40.78]}, "$maxDistance": 5000}}};
        if let Some(c) = category {
            f.insert("category", c);
        }
        FindQuery {
            filter: f,
            ..Default::default()
        }
    };
    let got: Vec<i32> = db
        .find("t", "places", &near(None))
        .unwrap()
        .map(|d| d.unwrap().get_i32("_id").unwrap())
        .collect();
    assert_eq!(got, vec![1]);
    let got: Vec<i32> = db
        .find("t", "places", &near(Some("Airport")))
        .unwrap()
        .map(|d| d.unwrap().get_i32("_id").unwrap())
        .collect();
    assert!(got.is_empty());
    assert_eq!(db.count("t", "places", &FindQuery::default()).unwrap(), 3);
    // Other plugins beside 2dsphere are refused (67); a bad geometry is 16755.
    for key in [
        doc! {"loc": "2dsphere", "t": "text"},
        doc! {"loc": "2dsphere", "h": "hashed"},
        doc! {"loc": "2dsphere", "w.$**": 1},
    ] {
        let e = db
            .create_indexes("t", "places", &[doc! {"key": key}])
            .unwrap_err();
        assert_eq!(e.code, 67);
    }
    let out = db.insert(
        "t",
        "places",
        vec![doc! {"_id": 4, "loc": "somewhere", "category": "x"}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 16755);
    // Equality on the leading field bounds a $geoWithin scan of {category: 1, loc: ...}.
    db.create_indexes(
        "t",
        "places",
        &[doc! {"key": {"category": 1, "loc": "2dsphere"}, "name": "cat_loc"}],
    )
    .unwrap();
    let within = FindQuery {
        filter: doc! {"category": "Parks", "loc": {"$geoWithin": {"$centerSphere": [[-73.97, 40.77], 0.001]}}},
        hint: Some(Bson::String("cat_loc".into())),
        ..Default::default()
    };
    let plan = db.explain_find("t", "places", &within).unwrap();
    let bounds = plan
        .get_document("queryPlanner")
        .and_then(|p| p.get_document("winningPlan"))
        .and_then(|p| p.get_document("inputStage"))
        .and_then(|p| p.get_document("indexBounds"))
        .unwrap()
        .clone();
    assert_eq!(
        bounds.get_array("category").unwrap(),
        &vec![Bson::String("[\"Parks\", \"Parks\"]".into())]
    );
    assert!(bounds.contains_key("loc"));
}
