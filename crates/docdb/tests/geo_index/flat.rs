//! 2d indexes answer what a brute-force scan answers: random points (arrays, embedded
//! documents, several per document, none) in a random `[min, max]²` at a random `bits`,
//! queried with `$box`, `$center`, `$polygon` (and legacy `$within`) through the index and by
//! `$natural` scan; flat `$near` and `$geoNear` return every point within `$maxDistance` in
//! plane-distance order, `$nearSphere` in spherical order; a compound `{loc: "2d", cat: 1}`.
use bson::{doc, Bson, Document};
use docdb::{AggregateOpts, DocDb, DocDbConfig, FindQuery, WriteOpts};
use proptest::prelude::*;
use query::geo::sphere::V3;

const MIN: f64 = -50.0;
const MAX: f64 = 150.0;

fn xy() -> impl Strategy<Value = (f64, f64)> {
    prop_oneof![
        3 => (MIN..=MAX, MIN..=MAX),
        1 => (10.0f64..12.0, 10.0f64..12.0),
    ]
}

/// A document's points and how they are stored.
#[derive(Clone, Debug)]
enum Loc {
    Array((f64, f64)),
    Embedded((f64, f64)),
    Several(Vec<(f64, f64)>),
    Missing,
}

impl Loc {
    fn points(&self) -> Vec<(f64, f64)> {
        match self {
            Loc::Array(p) | Loc::Embedded(p) => vec![*p],
            Loc::Several(v) => v.clone(),
            Loc::Missing => Vec::new(),
        }
    }

    fn bson(&self) -> Option<Bson> {
        let pair = |(x, y): (f64, f64)| Bson::Array(vec![x.into(), y.into()]);
        match self {
            Loc::Array(p) => Some(pair(*p)),
            Loc::Embedded((x, y)) => Some(Bson::Document(doc! {"x": x, "y": y})),
            Loc::Several(v) => Some(Bson::Array(v.iter().map(|p| pair(*p)).collect())),
            Loc::Missing => None,
        }
    }
}

fn loc() -> impl Strategy<Value = Loc> {
    prop_oneof![
        4 => xy().prop_map(Loc::Array),
        2 => xy().prop_map(Loc::Embedded),
        1 => prop::collection::vec(xy(), 1..4).prop_map(Loc::Several),
        1 => Just(Loc::Missing),
    ]
}

fn load(locs: &[(Loc, i32)], bits: i32) -> std::sync::Arc<DocDb> {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[doc! {"key": {"loc": "2d", "cat": 1}, "name": "loc_2d_cat_1", "min": MIN, "max": MAX, "bits": bits}],
    )
    .unwrap();
    let docs: Vec<Document> = locs
        .iter()
        .enumerate()
        .map(|(i, (l, cat))| {
            let mut d = doc! {"_id": i as i64, "cat": cat};
            if let Some(b) = l.bson() {
                d.insert("loc", b);
            }
            d
        })
        .collect();
    let out = db.insert("t", "c", docs, WriteOpts::default());
    assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    db
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

/// A shape query and the brute-force test of one point.
fn shape() -> impl Strategy<Value = (Document, Shape)> {
    prop_oneof![
        (xy(), xy()).prop_map(|(a, b)| (
            doc! {"$box": [[a.0, a.1], [b.0, b.1]]},
            Shape::Box(a, b)
        )),
        (xy(), 0.0f64..60.0).prop_map(|(c, r)| (
            doc! {"$center": [[c.0, c.1], r]},
            Shape::Circle(c, r)
        )),
        prop::collection::vec(xy(), 3..6).prop_map(|v| (
            doc! {"$polygon": v.iter().map(|p| Bson::Array(vec![p.0.into(), p.1.into()])).collect::<Vec<_>>()},
            Shape::Polygon(v)
        )),
    ]
}

#[derive(Clone, Debug)]
enum Shape {
    Box((f64, f64), (f64, f64)),
    Circle((f64, f64), f64),
    Polygon(Vec<(f64, f64)>),
}

impl Shape {
    /// The brute-force answer, away from the boundary (None: too close to tell; the test
    /// skips such points rather than re-implement the boundary rule).
    fn holds(&self, (x, y): (f64, f64)) -> Option<bool> {
        const EPS: f64 = 1e-9;
        match self {
            Shape::Box(a, b) => {
                let d = [
                    x - a.0.min(b.0),
                    a.0.max(b.0) - x,
                    y - a.1.min(b.1),
                    a.1.max(b.1) - y,
                ];
                let m = d.iter().copied().fold(f64::INFINITY, f64::min);
                (m.abs() > EPS).then_some(m > 0.0)
            }
            Shape::Circle(c, r) => {
                let d = r - (x - c.0).hypot(y - c.1);
                (d.abs() > EPS).then_some(d > 0.0)
            }
            Shape::Polygon(v) => {
                let n = v.len();
                let mut inside = false;
                for i in 0..n {
                    let (a, b) = (v[i], v[(i + 1) % n]);
                    let cross = (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0);
                    if cross.abs() < 1e-6 {
                        return None;
                    }
                    if (a.1 > y) != (b.1 > y) && x < a.0 + (y - a.1) * (b.0 - a.0) / (b.1 - a.1) {
                        inside = !inside;
                    }
                }
                Some(inside)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn within_answers_what_brute_force_answers(
        locs in prop::collection::vec((loc(), 0..3i32), 1..60),
        bits in 1..=32i32,
        shapes in prop::collection::vec(shape(), 1..5),
        legacy in any::<bool>(),
    ) {
        let db = load(&locs, bits);
        for (s, model) in &shapes {
            let op = if legacy { "$within" } else { "$geoWithin" };
            let f = doc! {"loc": {op: s.clone()}};
            let plan = db.plan_summary("t", "c", &FindQuery { filter: f.clone(), ..Default::default() }).unwrap();
            prop_assert!(plan.starts_with("IXSCAN"), "{} for {}", plan, f);
            let by_index = ids(&db, &f, doc! {"loc": "2d", "cat": 1});
            let by_scan = ids(&db, &f, doc! {"$natural": 1});
            prop_assert_eq!(&by_index, &by_scan, "filter {}", f);
            for (i, (l, _)) in locs.iter().enumerate() {
                let verdicts: Vec<Option<bool>> = l.points().iter().map(|p| model.holds(*p)).collect();
                if verdicts.contains(&None) {
                    continue;
                }
                let want = verdicts.contains(&Some(true));
                prop_assert_eq!(by_index.contains(&(i as i64)), want, "doc {} {:?} for {}", i, l, f);
            }
            // Compound: the other field filters after the index.
            let with_cat = doc! {"loc": {op: s.clone()}, "cat": 1};
            let by_index = ids(&db, &with_cat, doc! {"loc": "2d", "cat": 1});
            prop_assert_eq!(by_index, ids(&db, &with_cat, doc! {"$natural": 1}));
        }
    }

    #[test]
    fn near_is_every_point_within_reach_in_order(
        locs in prop::collection::vec((loc(), 0..3i32), 1..60),
        bits in 1..=32i32,
        center in (MIN - 20.0..MAX + 20.0, MIN - 20.0..MAX + 20.0),
        max in prop::option::of(0.0f64..300.0),
    ) {
        let db = load(&locs, bits);
        let dist = |i: usize| {
            locs[i].0.points().iter().map(|p| (p.0 - center.0).hypot(p.1 - center.1)).fold(f64::INFINITY, f64::min)
        };
        let mut near = doc! {"$near": [center.0, center.1]};
        if let Some(m) = max {
            near.insert("$maxDistance", m);
        }
        let q = FindQuery { filter: doc! {"loc": near}, ..Default::default() };
        let plan = db.plan_summary("t", "c", &q).unwrap();
        prop_assert!(plan.starts_with("GEO_NEAR_2D "), "{}", plan);
        let got: Vec<usize> = db.find("t", "c", &q).unwrap().map(|d| d.unwrap().get_i64("_id").unwrap() as usize).collect();
        let reach = max.unwrap_or(f64::INFINITY);
        let mut want: Vec<usize> = (0..locs.len()).filter(|&i| dist(i).is_finite() && dist(i) <= reach).collect();
        want.sort_unstable();
        for w in got.windows(2) {
            prop_assert!(dist(w[0]) <= dist(w[1]), "{:?}", got);
        }
        let mut sorted = got.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, want);
        // $geoNear over the 2d index: the same documents, each with its plane distance.
        let mut stage = doc! {"near": [center.0, center.1], "distanceField": "d", "spherical": false};
        if let Some(m) = max {
            stage.insert("maxDistance", m);
        }
        let out: Vec<Document> = db
            .aggregate("t", "c", &[doc! {"$geoNear": stage}], &AggregateOpts::default())
            .unwrap()
            .map(|d| d.unwrap())
            .collect();
        prop_assert_eq!(out.len(), got.len());
        for d in &out {
            let i = d.get_i64("_id").unwrap() as usize;
            prop_assert!((d.get_f64("d").unwrap() - dist(i)).abs() < 1e-9);
        }
    }

    #[test]
    fn near_sphere_orders_by_spherical_distance(
        pts in prop::collection::vec((-180.0f64..180.0, -90.0f64..90.0), 1..40),
        center in (-180.0f64..180.0, -90.0f64..90.0),
    ) {
        let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
        db.create_indexes("t", "c", &[doc! {"key": {"loc": "2d"}, "name": "loc_2d"}]).unwrap();
        let docs: Vec<Document> = pts.iter().enumerate().map(|(i, p)| doc! {"_id": i as i64, "loc": [p.0, p.1]}).collect();
        db.insert("t", "c", docs, WriteOpts::default());
        let q = FindQuery { filter: doc! {"loc": {"$nearSphere": [center.0, center.1]}}, ..Default::default() };
        let c = V3::from_lng_lat(center.0, center.1);
        let dist = |i: usize| c.angle(V3::from_lng_lat(pts[i].0, pts[i].1));
        let got: Vec<usize> = db.find("t", "c", &q).unwrap().map(|d| d.unwrap().get_i64("_id").unwrap() as usize).collect();
        prop_assert_eq!(got.len(), pts.len());
        for w in got.windows(2) {
            prop_assert!(dist(w[0]) <= dist(w[1]) + 1e-12);
        }
        let within = doc! {"loc": {"$geoWithin": {"$centerSphere": [[center.0, center.1], 0.5]}}};
        prop_assert_eq!(ids(&db, &within, doc! {"loc": "2d"}), ids(&db, &within, doc! {"$natural": 1}));
    }
}

#[test]
fn out_of_range_points_are_refused() {
    let db = load(&[(Loc::Array((0.0, 0.0)), 0)], 26);
    for bad in [
        doc! {"_id": 1i64, "loc": [MAX + 1.0, 0]},
        doc! {"_id": 2i64, "loc": {"x": 0, "y": MIN - 0.5}},
    ] {
        let out = db.insert("t", "c", vec![bad], WriteOpts::default());
        assert_eq!(out.write_errors[0].error.code, 13027);
    }
    let out = db.insert(
        "t",
        "c",
        vec![doc! {"_id": 3i64, "loc": [1, "x"]}],
        WriteOpts::default(),
    );
    assert_eq!(out.write_errors[0].error.code, 13026);
    // An existing out-of-range point fails the index build.
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.insert("t", "c", vec![doc! {"loc": [500, 0]}], WriteOpts::default());
    let e = db.create_indexes("t", "c", &[doc! {"key": {"loc": "2d"}, "name": "loc_2d"}]);
    assert_eq!(e.err().unwrap().code, 13027);
    for (key, code) in [
        (doc! {"a": 1, "loc": "2d"}, 16801),
        (doc! {"loc": "2d", "b": "2d"}, 16800),
        (doc! {"loc": "2d", "b": "2dsphere"}, 67),
    ] {
        let e = db.create_indexes("t", "d", &[doc! {"key": key.clone(), "name": "x"}]);
        assert_eq!(e.err().unwrap().code, code, "{key}");
    }
    let e = db.create_indexes(
        "t",
        "d",
        &[doc! {"key": {"loc": "2d"}, "name": "x", "bits": 0}],
    );
    assert_eq!(e.err().unwrap().code, 72);
}
