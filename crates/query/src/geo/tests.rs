use super::shape::{parse_geojson, Region, Shape};
use super::sphere::{Cap, EARTH_RADIUS_M, V3};
use super::*;
use bson::{bson, doc, Bson, Document};
use proptest::prelude::*;

fn polygon(rings: Bson) -> Shape {
    parse_geojson(&doc! {"type": "Polygon", "coordinates": rings}).unwrap()
}

fn pt(lng: f64, lat: f64) -> V3 {
    V3::from_lng_lat(lng, lat)
}

fn contains(s: &Shape, lng: f64, lat: f64) -> bool {
    s.covers_point(pt(lng, lat))
}

#[test]
fn polygon_across_the_antimeridian() {
    // A box from 170 E to 170 W (20° wide, across 180), 10 S to 10 N.
    let p = polygon(bson!([[
        [170.0, -10.0],
        [-170.0, -10.0],
        [-170.0, 10.0],
        [170.0, 10.0],
        [170.0, -10.0]
    ]]));
    assert!(contains(&p, 180.0, 0.0));
    assert!(contains(&p, -175.0, 5.0));
    assert!(contains(&p, 175.0, -5.0));
    // A planar lng/lat test would take the 340° box through Greenwich instead.
    assert!(!contains(&p, 0.0, 0.0));
    assert!(!contains(&p, 160.0, 0.0));
}

#[test]
fn winding_does_not_matter() {
    let ccw = polygon(bson!([[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]]));
    let cw = polygon(bson!([[[0, 0], [0, 10], [10, 10], [10, 0], [0, 0]]]));
    for (lng, lat, inside) in [(5.0, 5.0, true), (15.0, 5.0, false), (-5.0, -5.0, false)] {
        assert_eq!(contains(&ccw, lng, lat), inside);
        assert_eq!(contains(&cw, lng, lat), inside);
    }
}

#[test]
fn long_edge_planar_and_spherical_disagree() {
    // The northern edge from (-60, 60) to (60, 60) is a great circle reaching 73.9 N at
    // longitude 0: (0, 70) is inside on the sphere, outside a planar lng/lat polygon.
    let p = polygon(bson!([[[-60, 0], [60, 0], [60, 60], [-60, 60], [-60, 0]]]));
    assert!(contains(&p, 0.0, 70.0));
    assert!(!contains(&p, 0.0, 75.0));
    let flat = FlatRegion::Polygon(vec![(-60.0, 0.0), (60.0, 0.0), (60.0, 60.0), (-60.0, 60.0)]);
    assert!(!flat.contains((0.0, 70.0)));
    // And the southern edge is the equator itself, so (0, -1) is out on both.
    assert!(!contains(&p, 0.0, -1.0));
}

#[test]
fn holes() {
    let p = polygon(bson!([
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]],
    ]));
    assert!(contains(&p, 2.0, 2.0));
    assert!(!contains(&p, 5.0, 5.0));
    let hole_outside = parse_geojson(&doc! {"type": "Polygon", "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[20, 20], [21, 20], [21, 21], [20, 20]],
    ]});
    assert!(hole_outside.unwrap_err().contains("Secondary loops"));
}

#[test]
fn invalid_shapes() {
    let err = |d: Document| parse_geojson(&d).unwrap_err();
    assert!(err(doc! {"type": "Point", "coordinates": [200, 0]}).contains("out of bounds"));
    assert!(
        err(doc! {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 2]]]})
            .contains("not closed")
    );
    assert!(
        err(doc! {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]})
            .contains("at least 4")
    );
    // A bow tie: edges 0 and 2 cross.
    assert!(err(
        doc! {"type": "Polygon", "coordinates": [[[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}
    )
    .contains("cross"));
    assert!(err(doc! {"type": "LineString", "coordinates": [[0, 0]]}).contains("2 vertices"));
    assert!(err(doc! {"type": "Circle", "coordinates": [0, 0]}).contains("unknown"));
}

#[test]
fn intersects_and_within() {
    let sq = polygon(bson!([[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]]));
    let line_through =
        parse_geojson(&doc! {"type": "LineString", "coordinates": [[-5, 5], [15, 5]]}).unwrap();
    let line_outside =
        parse_geojson(&doc! {"type": "LineString", "coordinates": [[-5, 20], [15, 20]]}).unwrap();
    let line_inside =
        parse_geojson(&doc! {"type": "LineString", "coordinates": [[1, 1], [9, 9]]}).unwrap();
    assert!(line_through.intersects(&sq) && sq.intersects(&line_through));
    assert!(!line_outside.intersects(&sq));
    assert!(line_inside.intersects(&sq));
    let r = Region::Shape(sq.clone());
    assert!(line_inside.within(&r));
    assert!(!line_through.within(&r));
    let small = polygon(bson!([[[2, 2], [3, 2], [3, 3], [2, 3], [2, 2]]]));
    assert!(small.within(&r) && small.intersects(&sq) && !sq.within(&Region::Shape(small)));
    let holed = Region::Shape(polygon(bson!([
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]],
    ])));
    let over_hole = polygon(bson!([[[3, 3], [7, 3], [7, 7], [3, 7], [3, 3]]]));
    assert!(!over_hole.within(&holed));
    let mp =
        parse_geojson(&doc! {"type": "MultiPoint", "coordinates": [[1, 1], [50, 50]]}).unwrap();
    assert!(mp.intersects(&sq) && !mp.within(&r));
}

#[test]
fn center_sphere_and_near_distances() {
    // $centerSphere radius in radians: 100 km around (0, 0) holds (0, 0.89) (99 km) but not
    // (0, 0.91) (101 km) on the 6378.1 km sphere.
    let q = GeoQuery::parse_within(&bson!({"$centerSphere": [[0, 0], 100_000.0 / EARTH_RADIUS_M]}))
        .unwrap();
    assert!(q.matches(&bson!({"type": "Point", "coordinates": [0, 0.89]})));
    assert!(!q.matches(&bson!({"type": "Point", "coordinates": [0, 0.91]})));
    assert!(q.matches(&bson!([0, 0.5])));
    let n = GeoQuery::parse_near(
        "$near",
        &doc! {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 1000, "$minDistance": 10}},
    )
    .unwrap();
    let GeoQuery::Near(nq) = &n else { panic!() };
    let one_degree = nq.in_units(nq.distance(&bson!([0, 1])).unwrap());
    assert!((one_degree - 111_319.5).abs() < 1.0, "{one_degree}");
    assert!(n.matches(&bson!({"type": "Point", "coordinates": [0.005, 0]})));
    assert!(!n.matches(&bson!({"type": "Point", "coordinates": [0, 0]})));
    assert!(!n.matches(&bson!({"type": "Point", "coordinates": [0.01, 0]})));
}

#[test]
fn flat_legacy_shapes() {
    let b = GeoQuery::parse_within(&bson!({"$box": [[0, 0], [10, 10]]})).unwrap();
    assert!(b.matches(&bson!([5, 5])) && !b.matches(&bson!([11, 5])));
    assert!(b.matches(&bson!({"x": 10, "y": 0})));
    let c = GeoQuery::parse_within(&bson!({"$center": [[0, 0], 5]})).unwrap();
    assert!(c.matches(&bson!([3, 4])) && !c.matches(&bson!([4, 4])));
    let p = GeoQuery::parse_within(&bson!({"$polygon": [[0, 0], [10, 0], [0, 10]]})).unwrap();
    assert!(p.matches(&bson!([1, 1])) && !p.matches(&bson!([6, 6])));
    assert!(GeoQuery::parse_within(
        &bson!({"$geometry": {"type": "Point", "coordinates": [0, 0]}})
    )
    .is_err());
}

#[test]
fn stored_values() {
    assert_eq!(stored_shapes(&bson!([1, 2])).unwrap().len(), 1);
    assert_eq!(stored_shapes(&bson!([[1, 2], [3, 4]])).unwrap().len(), 2);
    assert!(stored_shapes(&bson!("here")).is_err());
    assert!(stored_shapes(&bson!([200, 0])).is_err());
}

fn arb_point() -> impl Strategy<Value = (f64, f64)> {
    (-179.0f64..179.0, -80.0f64..80.0)
}

proptest! {
    /// A small square: the spherical answer equals the planar one away from its edges (edges
    /// that short bend by far less than the margin).
    #[test]
    fn small_squares_agree_with_planar((lng, lat) in arb_point(), (px, py) in (-1.0f64..1.0, -1.0f64..1.0)) {
        let h = 0.05;
        let s = polygon(bson!([[[lng - h, lat - h], [lng + h, lat - h], [lng + h, lat + h], [lng - h, lat + h], [lng - h, lat - h]]]));
        let (x, y) = (lng + px * 2.0 * h, lat + py * 2.0 * h);
        prop_assume!((x.abs() - h).abs() > 0.0 && (px.abs() - 0.5).abs() > 0.01 && (py.abs() - 0.5).abs() > 0.01);
        prop_assert_eq!(contains(&s, x, y), px.abs() < 0.5 && py.abs() < 0.5);
    }

    /// Reversing a ring changes nothing; a point is in a polygon or its complement ring's
    /// hole-free counterpart exclusively.
    #[test]
    fn orientation_free(pts in proptest::collection::vec(arb_point(), 3), q in arb_point()) {
        let ring: Vec<Bson> = pts.iter().chain(std::iter::once(&pts[0])).map(|p| bson!([p.0, p.1])).collect();
        let rev: Vec<Bson> = ring.iter().rev().cloned().collect();
        let a = parse_geojson(&doc! {"type": "Polygon", "coordinates": [ring]});
        let b = parse_geojson(&doc! {"type": "Polygon", "coordinates": [rev]});
        if let (Ok(a), Ok(b)) = (a, b) {
            prop_assert_eq!(contains(&a, q.0, q.1), contains(&b, q.0, q.1));
        }
    }

    /// A point is within a cap exactly when its distance is at most the radius, and
    /// intersects a polygon exactly when it is contained (points have no extent).
    #[test]
    fn predicates_agree((lng, lat) in (-170.0f64..165.0, -80.0f64..80.0), q in arb_point(), r in 0.0f64..1.5) {
        let cap = Region::Cap(Cap { center: pt(lng, lat), radius: r });
        let p = Shape::Point(pt(q.0, q.1));
        prop_assert_eq!(p.within(&cap), pt(lng, lat).angle(pt(q.0, q.1)) <= r);
        let tri = polygon(bson!([[[lng, lat], [lng + 10.0, lat], [lng, lat + 5.0], [lng, lat]]]));
        prop_assert_eq!(p.intersects(&tri), tri.covers_point(pt(q.0, q.1)));
        prop_assert_eq!(p.within(&Region::Shape(tri.clone())), tri.covers_point(pt(q.0, q.1)));
        prop_assert_eq!(tri.distance_to(pt(q.0, q.1)) <= 1e-15, tri.covers_point(pt(q.0, q.1)));
    }
}

#[test]
fn near_in_the_matcher() {
    use crate::matcher::Matcher;
    let near = bson!({"$near": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}, "$maxDistance": 10});
    let m = Matcher::new_for_find(&doc! {"loc": near.clone(), "a": 1}).unwrap();
    let (path, n) = m.near().unwrap();
    assert_eq!(path, "loc");
    assert!(n.metres && (n.max * EARTH_RADIUS_M - 10.0).abs() < 1e-9);
    let code = |f: Document| Matcher::new_for_find(&f).err().map(|e| e.code);
    assert_eq!(
        code(doc! {"$or": [{"loc": near.clone()}, {"a": 1}]}),
        Some(2)
    );
    assert_eq!(code(doc! {"loc": {"$not": near.clone()}}), Some(2));
    assert_eq!(
        code(doc! {"l": {"$elemMatch": {"loc": near.clone()}}}),
        Some(2)
    );
    assert_eq!(
        code(doc! {"$and": [{"loc": near.clone()}, {"b": near.clone()}]}),
        Some(2)
    );
    assert_eq!(code(doc! {"loc": {"$maxDistance": 3}}), Some(2));
    // Only a find orders by distance.
    let e = Matcher::new_with_text(&doc! {"loc": near}).err().unwrap();
    assert_eq!(e.code, 5626500);
    // $geoWithin is an ordinary predicate anywhere.
    assert!(
        Matcher::new(&doc! {"$or": [{"loc": {"$geoWithin": {"$box": [[0, 0], [1, 1]]}}}]}).is_ok()
    );
}
