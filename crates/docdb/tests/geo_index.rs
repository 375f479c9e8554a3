//! The 2dsphere index answers what a collection scan answers: random points (some as legacy
//! pairs, some clustered near the antimeridian and the poles), lines and polygons, queried with
//! random `$geoWithin` polygons and caps and `$geoIntersects` shapes, through the index and by
//! `$natural` scan; and `$near` returns every document within `$maxDistance` in distance order.
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocDbConfig, FindQuery, WriteOpts};
use proptest::prelude::*;
use query::geo::sphere::{EARTH_RADIUS_M, V3};

/// Compound 2dsphere indexes (in this binary: one test target links faster than two).
#[path = "geo_index/compound.rs"]
mod compound;

/// 2d indexes.
#[path = "geo_index/flat.rs"]
mod flat;

fn lng_lat() -> impl Strategy<Value = (f64, f64)> {
    prop_oneof![
        (-180.0f64..180.0, -90.0f64..90.0),
        (170.0f64..190.0, -20.0f64..20.0)
            .prop_map(|(x, y)| (if x > 180.0 { x - 360.0 } else { x }, y)),
        (-180.0f64..180.0, 80.0f64..90.0),
        (0.0f64..2.0, 40.0f64..42.0),
    ]
}

fn geometry() -> impl Strategy<Value = Bson> {
    prop_oneof![
        4 => lng_lat().prop_map(|(x, y)| Bson::Document(doc! {"type": "Point", "coordinates": [x, y]})),
        2 => lng_lat().prop_map(|(x, y)| Bson::Array(vec![x.into(), y.into()])),
        1 => (lng_lat(), -3.0f64..3.0, -3.0f64..3.0).prop_map(|((x, y), dx, dy)| {
            let x2 = (x + dx).clamp(-180.0, 180.0);
            let y2 = (y + dy).clamp(-90.0, 90.0);
            Bson::Document(doc! {"type": "LineString", "coordinates": [[x, y], [x2, y2]]})
        }),
        1 => (lng_lat(), 0.1f64..4.0).prop_map(|(c, h)| square(c, h)),
    ]
}

/// A square of half-side h degrees around c (clamped away from the poles' degeneracy).
fn square((x, y): (f64, f64), h: f64) -> Bson {
    let y = y.clamp(h - 88.0, 88.0 - h);
    let x = x.clamp(h - 179.0, 179.0 - h);
    Bson::Document(doc! {"type": "Polygon", "coordinates": [[
        [x - h, y - h], [x + h, y - h], [x + h, y + h], [x - h, y + h], [x - h, y - h]
    ]]})
}

fn query() -> impl Strategy<Value = Document> {
    prop_oneof![
        (lng_lat(), 0.5f64..20.0)
            .prop_map(|(c, h)| doc! {"loc": {"$geoWithin": {"$geometry": square(c, h)}}}),
        (lng_lat(), 0.0f64..0.3)
            .prop_map(|((x, y), r)| doc! {"loc": {"$geoWithin": {"$centerSphere": [[x, y], r]}}}),
        (lng_lat(), 0.5f64..20.0)
            .prop_map(|(c, h)| doc! {"loc": {"$geoIntersects": {"$geometry": square(c, h)}}}),
        geometry()
            .prop_filter("GeoJSON", |g| g.as_document().is_some())
            .prop_map(|g| doc! {"loc": {"$geoIntersects": {"$geometry": g}}}),
    ]
}

fn ids(db: &DocDb, filter: &Document, hint: Document) -> Vec<i64> {
    let q = FindQuery {
        filter: filter.clone(),
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

fn load(geoms: &[Bson]) -> std::sync::Arc<DocDb> {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[doc! {"key": {"loc": "2dsphere"}, "name": "loc_2dsphere"}],
    )
    .unwrap();
    let mut docs: Vec<Document> = geoms
        .iter()
        .enumerate()
        .map(|(i, g)| doc! {"_id": i as i64, "loc": g.clone()})
        .collect();
    docs.push(doc! {"_id": -1i64, "other": 1});
    let out = db.insert("t", "c", docs, WriteOpts::default());
    assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    db
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn index_answers_what_a_scan_answers(
        geoms in prop::collection::vec(geometry(), 1..60),
        queries in prop::collection::vec(query(), 1..6),
    ) {
        let db = load(&geoms);
        for f in &queries {
            let plan = db.plan_summary("t", "c", &FindQuery { filter: f.clone(), ..Default::default() }).unwrap();
            prop_assert!(plan.starts_with("IXSCAN"), "{} for {}", plan, f);
            let by_index = ids(&db, f, doc! {"loc": "2dsphere"});
            let by_scan = ids(&db, f, doc! {"$natural": 1});
            prop_assert_eq!(by_index, by_scan, "filter {}", f);
        }
    }

    #[test]
    fn near_is_every_document_within_reach_in_order(
        pts in prop::collection::vec(lng_lat(), 1..80),
        center in lng_lat(),
        max_km in 1.0f64..20_000.0,
    ) {
        let geoms: Vec<Bson> = pts.iter().map(|(x, y)| Bson::Document(doc! {"type": "Point", "coordinates": [x, y]})).collect();
        let db = load(&geoms);
        let max = max_km * 1000.0;
        let q = FindQuery {
            filter: doc! {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [center.0, center.1]}, "$maxDistance": max}}},
            ..Default::default()
        };
        let got: Vec<i64> = db.find("t", "c", &q).unwrap().map(|d| d.unwrap().get_i64("_id").unwrap()).collect();
        let c = V3::from_lng_lat(center.0, center.1);
        let dist = |i: i64| c.angle(V3::from_lng_lat(pts[i as usize].0, pts[i as usize].1)) * EARTH_RADIUS_M;
        let mut want: Vec<i64> = (0..pts.len() as i64).filter(|&i| dist(i) <= max).collect();
        want.sort_by(|a, b| dist(*a).total_cmp(&dist(*b)).then(a.cmp(b)));
        prop_assert_eq!(got.len(), want.len());
        for w in got.windows(2) {
            prop_assert!(dist(w[0]) <= dist(w[1]));
        }
        let mut g2 = got.clone();
        g2.sort_unstable();
        let mut w2 = want.clone();
        w2.sort_unstable();
        prop_assert_eq!(g2, w2);
    }
}

#[test]
fn errors_and_plans() {
    let db = load(&[Bson::Document(
        doc! {"type": "Point", "coordinates": [1, 1]},
    )]);
    let out = db.insert(
        "t",
        "c",
        vec![doc! {"_id": 100i64, "loc": {"type": "Point", "coordinates": [500, 1]}}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 16755);
    let out = db.insert(
        "t",
        "c",
        vec![doc! {"_id": 101i64, "loc": "nowhere"}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 16755);
    // A flat $near needs a 2d index; no geo index at all is 291 too.
    let flat = FindQuery {
        filter: doc! {"loc": {"$near": [1, 1]}},
        ..Default::default()
    };
    assert_eq!(db.find("t", "c", &flat).err().unwrap().code, 291);
    let other = FindQuery {
        filter: doc! {"x": {"$nearSphere": [1, 1]}},
        ..Default::default()
    };
    assert_eq!(db.find("t", "c", &other).err().unwrap().code, 291);
    let near = doc! {"loc": {"$nearSphere": [1, 1]}};
    let q = FindQuery {
        filter: near.clone(),
        ..Default::default()
    };
    let plan = db.plan_summary("t", "c", &q).unwrap();
    assert!(plan.starts_with("GEO_NEAR_2DSPHERE"), "{plan}");
    assert_eq!(db.count("t", "c", &q).err().unwrap().code, 5626500);
    let in_or = FindQuery {
        filter: doc! {"$or": [near, {"a": 1}]},
        ..Default::default()
    };
    assert_eq!(db.find("t", "c", &in_or).err().unwrap().code, 2);
    // A flat $near on a field with only a 2dsphere index has no 2d index to use: 291 (above).
    let two_d = db.create_indexes("t", "c", &[doc! {"key": {"p": "2d"}, "name": "p_2d"}]);
    assert!(two_d.is_ok());
}
