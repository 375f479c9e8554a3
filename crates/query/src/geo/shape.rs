//! Geometries on the sphere: GeoJSON (Point, LineString, Polygon with holes, the Multi kinds,
//! GeometryCollection) and legacy coordinate pairs, parsed and validated as mongod does, and
//! the predicates between them — containment, intersection, within, distance — with
//! great-circle edges.
//!
//! A polygon ring is a [`Loop`]: its interior is the smaller of the two regions its edges
//! bound, whatever the winding (mongod normalizes loops the same way, so a ring given
//! clockwise means what it means counter-clockwise). Containment counts edge crossings on an
//! arc from a reference point known to be inside.

use super::sphere::{arcs_cross, arcs_intersect, dist_to_arc, Cap, EPS_ANGLE, V3};
use bson::{Bson, Document};
use std::f64::consts::PI;

/// Vertices at most per geometry (a bound on every loop below; mongod's limit is the 16 MB
/// document, which holds about this many coordinate pairs).
pub const MAX_VERTICES: usize = 1 << 20;

/// A ring of a polygon, oriented so that its interior (the smaller region) is on the left.
#[derive(Clone, Debug)]
pub struct Loop {
    /// The vertices, without the closing repeat of the first.
    pub v: Vec<V3>,
    /// A point known to be inside (just left of the first edge's midpoint).
    inside: V3,
}

#[derive(Clone, Debug)]
pub struct Polygon {
    /// The exterior ring, then the holes.
    pub loops: Vec<Loop>,
}

#[derive(Clone, Debug)]
pub enum Shape {
    Point(V3),
    Line(Vec<V3>),
    Polygon(Polygon),
    /// MultiPoint, MultiLineString, MultiPolygon and GeometryCollection: the union of parts.
    Multi(Vec<Shape>),
}

/// Why a value is not a valid geometry (the caller wraps it in its own error and code).
pub type ShapeError = String;

fn num(v: &Bson) -> Option<f64> {
    match v {
        Bson::Double(d) => Some(*d),
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// A longitude/latitude pair checked against the sphere's bounds.
pub fn lng_lat_point(lng: f64, lat: f64) -> Result<V3, ShapeError> {
    if !(-180.0..=180.0).contains(&lng) || !(-90.0..=90.0).contains(&lat) {
        return Err(format!(
            "longitude/latitude is out of bounds, lng: {lng} lat: {lat}"
        ));
    }
    Ok(V3::from_lng_lat(lng, lat))
}

/// A legacy coordinate pair: `[x, y]` (extra elements ignored) or `{a: x, b: y}` (the first
/// two fields), both numeric. Returns (x, y) unchecked.
pub fn legacy_pair(v: &Bson) -> Option<(f64, f64)> {
    let mut it: Box<dyn Iterator<Item = &Bson>> = match v {
        Bson::Array(a) => Box::new(a.iter()),
        Bson::Document(d) if !d.contains_key("type") => Box::new(d.values()),
        _ => return None,
    };
    let x = num(it.next()?)?;
    let y = num(it.next()?)?;
    Some((x, y))
}

/// A GeoJSON position: `[lng, lat]` of numbers.
fn position(v: &Bson) -> Result<V3, ShapeError> {
    let Bson::Array(a) = v else {
        return Err(format!("GeoJSON coordinates must be an array, found {v}"));
    };
    let coords: Vec<f64> = a.iter().filter_map(num).collect();
    if coords.len() != a.len() || coords.len() < 2 {
        return Err(format!(
            "Point must only contain numeric elements and at least two: {v}"
        ));
    }
    lng_lat_point(coords[0], coords[1])
}

fn positions(v: &Bson, what: &str) -> Result<Vec<V3>, ShapeError> {
    let Bson::Array(a) = v else {
        return Err(format!("{what} coordinates must be an array"));
    };
    if a.len() > MAX_VERTICES {
        return Err(format!("{what} has more than {MAX_VERTICES} vertices"));
    }
    a.iter().map(position).collect()
}

fn array<'a>(v: &'a Bson, what: &str) -> Result<&'a Vec<Bson>, ShapeError> {
    match v {
        Bson::Array(a) => Ok(a),
        _ => Err(format!("{what} coordinates must be an array")),
    }
}

/// Parses a GeoJSON object (`{type, coordinates}` or `{type: "GeometryCollection",
/// geometries}`); `crs` may name the default EPSG:4326 only.
pub fn parse_geojson(d: &Document) -> Result<Shape, ShapeError> {
    parse_geojson_depth(d, 0)
}

fn parse_geojson_depth(d: &Document, depth: usize) -> Result<Shape, ShapeError> {
    if let Some(crs) = d.get("crs") {
        check_crs(crs)?;
    }
    let ty = match d.get("type") {
        Some(Bson::String(s)) => s.as_str(),
        _ => return Err("unknown GeoJSON type: missing or not a string".into()),
    };
    if ty == "GeometryCollection" {
        let Some(Bson::Array(gs)) = d.get("geometries") else {
            return Err("GeometryCollection must have an array 'geometries'".into());
        };
        if depth > 0 {
            return Err("GeometryCollection cannot be nested".into());
        }
        let mut parts = Vec::with_capacity(gs.len());
        for g in gs {
            let Bson::Document(g) = g else {
                return Err("Element of 'geometries' is not an object".into());
            };
            parts.push(parse_geojson_depth(g, depth + 1)?);
        }
        return Ok(Shape::Multi(parts));
    }
    let coords = d
        .get("coordinates")
        .ok_or_else(|| format!("GeoJSON {ty} has no 'coordinates'"))?;
    match ty {
        "Point" => Ok(Shape::Point(position(coords)?)),
        "LineString" => line(positions(coords, "LineString")?),
        "Polygon" => Ok(Shape::Polygon(polygon(coords)?)),
        "MultiPoint" => {
            let pts = positions(coords, "MultiPoint")?;
            if pts.is_empty() {
                return Err("MultiPoint coordinates must have at least 1 element".into());
            }
            Ok(Shape::Multi(pts.into_iter().map(Shape::Point).collect()))
        }
        "MultiLineString" => {
            let ls = array(coords, "MultiLineString")?;
            if ls.is_empty() {
                return Err("MultiLineString coordinates must have at least 1 element".into());
            }
            let parts = ls
                .iter()
                .map(|l| line(positions(l, "LineString")?))
                .collect::<Result<_, _>>()?;
            Ok(Shape::Multi(parts))
        }
        "MultiPolygon" => {
            let ps = array(coords, "MultiPolygon")?;
            if ps.is_empty() {
                return Err("MultiPolygon coordinates must have at least 1 element".into());
            }
            let parts = ps
                .iter()
                .map(|p| polygon(p).map(Shape::Polygon))
                .collect::<Result<_, _>>()?;
            Ok(Shape::Multi(parts))
        }
        other => Err(format!("unknown GeoJSON type: {other}")),
    }
}

fn check_crs(crs: &Bson) -> Result<(), ShapeError> {
    let name = match crs {
        Bson::Document(c) => c
            .get_document("properties")
            .ok()
            .and_then(|p| p.get_str("name").ok()),
        _ => None,
    };
    match name {
        Some("EPSG:4326") | Some("urn:ogc:def:crs:OGC:1.3:CRS84") => Ok(()),
        Some("urn:x-mongodb:crs:strictwinding:EPSG:4326") => Err(
            "the big-polygon crs (strict winding) is not supported by flashdoc: polygons are the smaller region their ring bounds".into(),
        ),
        _ => Err(format!("GeoJSON crs not supported: {crs}")),
    }
}

fn line(pts: Vec<V3>) -> Result<Shape, ShapeError> {
    if pts.len() < 2 {
        return Err("GeoJSON LineString must have at least 2 vertices".into());
    }
    for w in pts.windows(2) {
        if w[0].angle(w[1]) > PI - 1e-9 {
            return Err("GeoJSON LineString has antipodal consecutive vertices (no unique great-circle edge)".into());
        }
    }
    Ok(Shape::Line(pts))
}

fn polygon(v: &Bson) -> Result<Polygon, ShapeError> {
    let rings = array(v, "Polygon")?;
    if rings.is_empty() {
        return Err("Polygon coordinates must be an array of at least one ring".into());
    }
    let mut loops = Vec::with_capacity(rings.len());
    for r in rings {
        loops.push(ring(&positions(r, "Polygon ring")?)?);
    }
    let poly = Polygon { loops };
    let shell = &poly.loops[0];
    for hole in &poly.loops[1..] {
        if hole
            .v
            .iter()
            .any(|p| !shell.contains(*p) && !shell.on_boundary(*p))
        {
            return Err("Secondary loops not contained by first exterior loop - secondary loops must be holes".into());
        }
    }
    Ok(poly)
}

/// A closed ring of at least 4 positions (first = last) with 3 distinct vertices and no
/// crossing edges.
fn ring(pts: &[V3]) -> Result<Loop, ShapeError> {
    if pts.len() < 4 {
        return Err("Loop must have at least 4 vertices (the first repeated last)".into());
    }
    if pts[0] != pts[pts.len() - 1] {
        return Err("Loop is not closed, first vertex does not equal last vertex".into());
    }
    let mut v: Vec<V3> = Vec::with_capacity(pts.len());
    for p in &pts[..pts.len() - 1] {
        // Adjacent duplicates are one vertex (mongod drops them too).
        if v.last().is_none_or(|q| q.angle(*p) > EPS_ANGLE) {
            v.push(*p);
        }
    }
    while v.len() > 1 && v[0].angle(v[v.len() - 1]) <= EPS_ANGLE {
        v.pop();
    }
    if v.len() < 3 {
        return Err("Loop must have at least 3 different vertices".into());
    }
    let n = v.len();
    for i in 0..n {
        let (a, b) = (v[i], v[(i + 1) % n]);
        if a.angle(b) > PI - 1e-9 {
            return Err(format!(
                "Loop is not valid: edge {i} joins antipodal vertices"
            ));
        }
        // Non-adjacent edges must not cross (O(n²): bounded by MAX_VERTICES per geometry,
        // quadratic only for very large rings).
        for j in i + 2..n {
            if i == 0 && j == n - 1 {
                continue;
            }
            if arcs_cross(a, b, v[j], v[(j + 1) % n]) {
                return Err(format!("Loop is not valid: Edges {i} and {j} cross"));
            }
        }
    }
    Ok(Loop::new(v))
}

impl Loop {
    /// Orients the ring so its smaller side is the interior (left of each edge).
    fn new(mut v: Vec<V3>) -> Loop {
        if left_area(&v) > 2.0 * PI {
            v.reverse();
        }
        let (a, b) = (v[0], v[1]);
        let mid = a.plus(b).normalize();
        let left = a.cross(b).normalize();
        let step = (a.angle(b) * 1e-6).max(1e-12);
        let inside = mid.plus(left.scale(step)).normalize();
        Loop { v, inside }
    }

    fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        let n = self.v.len();
        (0..n).map(move |i| (self.v[i], self.v[(i + 1) % n]))
    }

    fn crossings(&self, from: V3, to: V3) -> usize {
        self.edges()
            .filter(|(a, b)| arcs_cross(from, to, *a, *b))
            .count()
    }

    /// Whether p is in the interior (boundary points: whichever side rounding puts them).
    pub fn contains(&self, p: V3) -> bool {
        let m = self.inside;
        let parity = if m.dot(p) > -0.5 {
            self.crossings(m, p)
        } else {
            // Nearly antipodal: go through a point 90° from both.
            let h = m.cross(p).normalize();
            self.crossings(m, h) + self.crossings(h, p)
        };
        parity % 2 == 0
    }

    pub fn on_boundary(&self, p: V3) -> bool {
        self.edges().any(|(a, b)| dist_to_arc(p, a, b) <= EPS_ANGLE)
    }
}

/// The area of the region left of the ring (Girard's theorem: 2π minus the turning angles).
fn left_area(v: &[V3]) -> f64 {
    let n = v.len();
    let mut turning = 0.0;
    for i in 0..n {
        let (a, b, c) = (v[i], v[(i + 1) % n], v[(i + 2) % n]);
        let t1 = a.cross(b).cross(b);
        let t2 = b.cross(c).cross(b);
        turning += t1.cross(t2).dot(b).atan2(t1.dot(t2));
    }
    2.0 * PI - turning
}

impl Polygon {
    pub fn contains(&self, p: V3) -> bool {
        self.loops[0].contains(p) && !self.loops[1..].iter().any(|h| h.contains(p))
    }

    fn on_boundary(&self, p: V3) -> bool {
        self.loops.iter().any(|l| l.on_boundary(p))
    }

    fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        self.loops.iter().flat_map(Loop::edges)
    }
}

/// What a query holds a geometry to: a shape, or a cap (`$centerSphere`).
#[derive(Clone, Debug)]
pub enum Region {
    Shape(Shape),
    Cap(Cap),
}

impl Shape {
    /// Every vertex (a point's one).
    fn vertices(&self) -> Box<dyn Iterator<Item = V3> + '_> {
        match self {
            Shape::Point(p) => Box::new(std::iter::once(*p)),
            Shape::Line(v) => Box::new(v.iter().copied()),
            Shape::Polygon(p) => Box::new(p.loops.iter().flat_map(|l| l.v.iter().copied())),
            Shape::Multi(parts) => Box::new(parts.iter().flat_map(Shape::vertices)),
        }
    }

    /// Every edge (none for points).
    fn edges(&self) -> Box<dyn Iterator<Item = (V3, V3)> + '_> {
        match self {
            Shape::Point(_) => Box::new(std::iter::empty()),
            Shape::Line(v) => Box::new(v.windows(2).map(|w| (w[0], w[1]))),
            Shape::Polygon(p) => Box::new(p.edges()),
            Shape::Multi(parts) => Box::new(parts.iter().flat_map(Shape::edges)),
        }
    }

    /// Whether p is in or on the shape.
    pub fn covers_point(&self, p: V3) -> bool {
        match self {
            Shape::Point(q) => q.angle(p) <= EPS_ANGLE,
            Shape::Line(_) => self.edges().any(|(a, b)| dist_to_arc(p, a, b) <= EPS_ANGLE),
            Shape::Polygon(poly) => poly.contains(p) || poly.on_boundary(p),
            Shape::Multi(parts) => parts.iter().any(|s| s.covers_point(p)),
        }
    }

    /// Whether the two shapes share a point (`$geoIntersects`).
    pub fn intersects(&self, o: &Shape) -> bool {
        if let Shape::Multi(parts) = self {
            return parts.iter().any(|s| s.intersects(o));
        }
        if let Shape::Multi(parts) = o {
            return parts.iter().any(|s| self.intersects(s));
        }
        self.vertices().any(|p| o.covers_point(p))
            || o.vertices().any(|p| self.covers_point(p))
            || self
                .edges()
                .any(|(a, b)| o.edges().any(|(c, d)| arcs_intersect(a, b, c, d)))
    }

    /// The angle from p to the nearest point of the shape (0 inside a polygon).
    pub fn distance_to(&self, p: V3) -> f64 {
        match self {
            Shape::Point(q) => q.angle(p),
            Shape::Polygon(poly) if poly.contains(p) => 0.0,
            Shape::Multi(parts) => parts
                .iter()
                .map(|s| s.distance_to(p))
                .fold(f64::INFINITY, f64::min),
            _ => self
                .edges()
                .map(|(a, b)| dist_to_arc(p, a, b))
                .fold(f64::INFINITY, f64::min),
        }
    }

    /// The angle from p to the farthest point of the shape's boundary or vertices.
    fn max_distance_to(&self, p: V3) -> f64 {
        let far = p.antipode();
        let edge_max = self
            .edges()
            .map(|(a, b)| PI - dist_to_arc(far, a, b))
            .fold(0.0, f64::max);
        self.vertices().map(|v| v.angle(p)).fold(edge_max, f64::max)
    }

    /// Whether the shape lies inside the region (`$geoWithin`).
    pub fn within(&self, r: &Region) -> bool {
        if let Shape::Multi(parts) = self {
            return parts.iter().all(|s| s.within(r));
        }
        match r {
            Region::Cap(cap) => {
                if cap.is_full() {
                    return true;
                }
                if self.max_distance_to(cap.center) > cap.radius {
                    return false;
                }
                // A polygon whose boundary is in the cap is inside it unless it is the
                // complement's side (holding the cap's antipode).
                !matches!(self, Shape::Polygon(p) if p.contains(cap.center.antipode()))
            }
            Region::Shape(Shape::Multi(parts)) => {
                parts.iter().any(|p| self.within(&Region::Shape(p.clone())))
            }
            Region::Shape(Shape::Polygon(poly)) => self.within_polygon(poly),
            // Nothing has area inside a point or a line but what equals it.
            Region::Shape(other) => {
                self.vertices().all(|p| other.covers_point(p))
                    && self
                        .edges()
                        .all(|(a, b)| other.covers_point(a.plus(b).normalize()))
            }
        }
    }

    fn within_polygon(&self, poly: &Polygon) -> bool {
        if !self
            .vertices()
            .all(|p| poly.contains(p) || poly.on_boundary(p))
        {
            return false;
        }
        let crosses = self
            .edges()
            .any(|(a, b)| poly.edges().any(|(c, d)| arcs_cross(a, b, c, d)));
        if crosses {
            return false;
        }
        match self {
            // An edge whose ends are inside and that crosses no boundary edge stays inside,
            // unless it passes over a hole: a hole vertex strictly inside a polygon of ours.
            Shape::Polygon(mine) => !poly
                .loops
                .iter()
                .flat_map(|l| l.v.iter())
                .any(|v| mine.contains(*v) && !mine.on_boundary(*v)),
            _ => true,
        }
    }

    /// A cap holding the whole shape (for the index's cell covering).
    pub fn bound(&self) -> Cap {
        if let Shape::Point(p) = self {
            return Cap {
                center: *p,
                radius: 0.0,
            };
        }
        let sum = self.vertices().fold(V3::new(0.0, 0.0, 0.0), V3::plus);
        let center = if sum.norm() < 1e-9 {
            self.vertices().next().unwrap_or(V3::new(1.0, 0.0, 0.0))
        } else {
            sum.normalize()
        };
        let radius = self.max_distance_to(center) * (1.0 + 1e-9) + 1e-12;
        // A polygon on the far side of its boundary from the center needs the whole sphere.
        let wraps = match self {
            Shape::Polygon(p) => p.contains(center.antipode()),
            Shape::Multi(parts) => parts
                .iter()
                .any(|s| matches!(s, Shape::Polygon(p) if p.contains(center.antipode()))),
            _ => false,
        };
        Cap {
            center,
            radius: if wraps { PI } else { radius.min(PI) },
        }
    }
}

impl Region {
    pub fn bound(&self) -> Cap {
        match self {
            Region::Shape(s) => s.bound(),
            Region::Cap(c) => *c,
        }
    }
}
