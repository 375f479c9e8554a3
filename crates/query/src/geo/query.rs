//! The geo query operators (`$geoWithin`, `$geoIntersects`, `$near`, `$nearSphere`) parsed
//! into a [`GeoQuery`] and evaluated on a stored value's geometries.

use std::f64::consts::PI;

use bson::{Bson, Document};

use super::flat::FlatBox;
use super::shape::{legacy_pair, lng_lat_point, parse_geojson, Region, Shape};
use super::sphere::{Cap, EARTH_RADIUS_M, V3};
use crate::error::{DocError, DocResult};

/// The geometries a stored value holds for a geo predicate or the 2dsphere index: a GeoJSON
/// object, a legacy pair, or (multikey) an array of those. Ok(empty) for values that are no
/// geometry at all (the matcher's "no match"); Err for a value that tries to be one and is
/// invalid, or a non-geometry (the index's 16755).
pub fn stored_shapes(v: &Bson) -> Result<Vec<Shape>, String> {
    if let Some(s) = stored_shape(v)? {
        return Ok(vec![s]);
    }
    match v {
        Bson::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for e in a {
                match stored_shape(e)? {
                    Some(s) => out.push(s),
                    None => return Err(format!("geo element must be an array or object: {e}")),
                }
            }
            Ok(out)
        }
        other => Err(format!("geo element must be an array or object: {other}")),
    }
}

fn stored_shape(v: &Bson) -> Result<Option<Shape>, String> {
    match v {
        Bson::Document(d) if d.contains_key("type") => parse_geojson(d).map(Some),
        Bson::Document(_) | Bson::Array(_) => match legacy_pair(v) {
            Some((x, y)) => lng_lat_point(x, y).map(|p| Some(Shape::Point(p))),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// A flat (2d) legacy region, on the plane of the coordinates as given.
#[derive(Clone, Debug)]
pub enum FlatRegion {
    /// `$box: [[x1, y1], [x2, y2]]` (corners in any order).
    Box { lo: (f64, f64), hi: (f64, f64) },
    /// `$center: [[x, y], r]`.
    Circle { center: (f64, f64), radius: f64 },
    /// `$polygon: [[x, y], ...]` (closed implicitly).
    Polygon(Vec<(f64, f64)>),
}

impl FlatRegion {
    pub(super) fn contains(&self, (x, y): (f64, f64)) -> bool {
        match self {
            FlatRegion::Box { lo, hi } => lo.0 <= x && x <= hi.0 && lo.1 <= y && y <= hi.1,
            FlatRegion::Circle { center, radius } => (x - center.0).hypot(y - center.1) <= *radius,
            FlatRegion::Polygon(v) => {
                // Even-odd ray casting, boundary points included.
                let n = v.len();
                let mut inside = false;
                for i in 0..n {
                    let (a, b) = (v[i], v[(i + 1) % n]);
                    let cross = (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0);
                    let within_x = x >= a.0.min(b.0) && x <= a.0.max(b.0);
                    let within_y = y >= a.1.min(b.1) && y <= a.1.max(b.1);
                    if cross == 0.0 && within_x && within_y {
                        return true;
                    }
                    if (a.1 > y) != (b.1 > y) && x < a.0 + (y - a.1) * (b.0 - a.0) / (b.1 - a.1) {
                        inside = !inside;
                    }
                }
                inside
            }
        }
    }
}

/// `$near` / `$nearSphere` / the `$geoNear` stage's point and bounds.
#[derive(Clone, Debug)]
pub struct NearQuery {
    pub center: V3,
    /// Bounds in radians on the sphere (converted from metres or kept from radians).
    pub min: f64,
    pub max: f64,
    /// The point was GeoJSON: distances are in metres (else radians, legacy pairs).
    pub metres: bool,
    /// A flat (2d) `$near` with a legacy pair: only a 2d index answers it, and distances and
    /// bounds are on the plane of the coordinates.
    pub flat: bool,
    /// The point as given (`[x, y]`, or a GeoJSON point's `[lng, lat]`).
    pub point: (f64, f64),
}

impl NearQuery {
    /// A distance in the query's unit (metres for GeoJSON, radians for legacy pairs).
    pub fn in_units(&self, radians: f64) -> f64 {
        if self.metres {
            radians * EARTH_RADIUS_M
        } else {
            radians
        }
    }

    /// The angle from the centre to the nearest of a stored value's geometries (for a flat
    /// query, the plane distance to the nearest legacy point).
    pub fn distance(&self, v: &Bson) -> Option<f64> {
        if self.flat {
            let (x, y) = self.point;
            return flat_points(v)
                .into_iter()
                .map(|(px, py)| (px - x).hypot(py - y))
                .reduce(f64::min);
        }
        let shapes = stored_shapes(v).ok()?;
        shapes
            .iter()
            .map(|s| s.distance_to(self.center))
            .reduce(f64::min)
    }

    pub fn in_bounds(&self, radians: f64) -> bool {
        self.min <= radians && radians <= self.max
    }
}

/// A parsed geo predicate on a field.
#[derive(Clone, Debug)]
pub enum GeoQuery {
    Within(Region),
    FlatWithin(FlatRegion),
    Intersects(Shape),
    Near(NearQuery),
}

fn bad(msg: impl Into<String>) -> DocError {
    DocError::bad_value(msg)
}

fn number(v: &Bson, what: &str) -> DocResult<f64> {
    match v {
        Bson::Double(d) => Ok(*d),
        Bson::Int32(i) => Ok(*i as f64),
        Bson::Int64(i) => Ok(*i as f64),
        Bson::Decimal128(d) => d
            .to_string()
            .parse()
            .map_err(|_| bad(format!("{what} must be a number"))),
        _ => Err(bad(format!("{what} must be a number"))),
    }
}

fn flat_pair(v: &Bson, what: &str) -> DocResult<(f64, f64)> {
    match v {
        Bson::Array(_) | Bson::Document(_) => {
            legacy_pair(v).ok_or_else(|| bad(format!("{what}: point must be two numbers")))
        }
        _ => Err(bad(format!("{what}: point must be an array or object"))),
    }
}

fn geometry_operand(d: &Document, op: &str) -> DocResult<Shape> {
    match d.get("$geometry") {
        Some(Bson::Document(g)) => {
            parse_geojson(g).map_err(|e| bad(format!("Invalid {op} geometry: {e}")))
        }
        _ => Err(bad(format!("{op} requires a $geometry object: {d}"))),
    }
}

impl GeoQuery {
    /// `$geoWithin` / `$within`: `$geometry` (Polygon, MultiPolygon), `$centerSphere`, or
    /// the flat `$box`, `$polygon`, `$center`.
    pub fn parse_within(arg: &Bson) -> DocResult<GeoQuery> {
        let Bson::Document(d) = arg else {
            return Err(bad("$geoWithin needs an object"));
        };
        if d.len() != 1 {
            return Err(bad(format!("$geoWithin takes exactly one shape: {d}")));
        }
        let (k, v) = d.iter().next().expect("one field");
        match k.as_str() {
            "$geometry" => match geometry_operand(d, "$geoWithin")? {
                s @ Shape::Polygon(_) => Ok(GeoQuery::Within(Region::Shape(s))),
                Shape::Multi(parts) if parts.iter().all(|p| matches!(p, Shape::Polygon(_))) => {
                    Ok(GeoQuery::Within(Region::Shape(Shape::Multi(parts))))
                }
                _ => Err(bad(
                    "$geoWithin not supported with provided geometry: only Polygon and MultiPolygon",
                )),
            },
            "$centerSphere" => {
                let Some([c, r]) = v.as_array().and_then(|a| <&[Bson; 2]>::try_from(&a[..]).ok())
                else {
                    return Err(bad("$centerSphere needs [[lng, lat], radius]"));
                };
                let (x, y) = flat_pair(c, "$centerSphere")?;
                let center = lng_lat_point(x, y).map_err(bad)?;
                let radius = number(r, "$centerSphere radius")?;
                if radius.is_nan() || radius < 0.0 {
                    return Err(bad("radius must be a non-negative number"));
                }
                Ok(GeoQuery::Within(Region::Cap(Cap { center, radius })))
            }
            "$box" => {
                let Some([a, b]) = v.as_array().and_then(|a| <&[Bson; 2]>::try_from(&a[..]).ok())
                else {
                    return Err(bad("$box needs two corners"));
                };
                let (a, b) = (flat_pair(a, "$box")?, flat_pair(b, "$box")?);
                Ok(GeoQuery::FlatWithin(FlatRegion::Box {
                    lo: (a.0.min(b.0), a.1.min(b.1)),
                    hi: (a.0.max(b.0), a.1.max(b.1)),
                }))
            }
            "$center" => {
                let Some([c, r]) = v.as_array().and_then(|a| <&[Bson; 2]>::try_from(&a[..]).ok())
                else {
                    return Err(bad("$center needs [[x, y], radius]"));
                };
                let radius = number(r, "$center radius")?;
                if radius.is_nan() || radius < 0.0 {
                    return Err(bad("radius must be a non-negative number"));
                }
                Ok(GeoQuery::FlatWithin(FlatRegion::Circle {
                    center: flat_pair(c, "$center")?,
                    radius,
                }))
            }
            "$polygon" => {
                let pts = v
                    .as_array()
                    .ok_or_else(|| bad("$polygon needs an array of points"))?
                    .iter()
                    .map(|p| flat_pair(p, "$polygon"))
                    .collect::<DocResult<Vec<_>>>()?;
                if pts.len() < 3 {
                    return Err(bad("Polygon must have at least 3 points"));
                }
                Ok(GeoQuery::FlatWithin(FlatRegion::Polygon(pts)))
            }
            other => Err(bad(format!("unknown geo specifier: {other}: {v}"))),
        }
    }

    /// `$geoIntersects: {$geometry: <GeoJSON>}`.
    pub fn parse_intersects(arg: &Bson) -> DocResult<GeoQuery> {
        let Bson::Document(d) = arg else {
            return Err(bad("$geoIntersects needs an object"));
        };
        if d.len() != 1 {
            return Err(bad(format!("$geoIntersects takes exactly $geometry: {d}")));
        }
        Ok(GeoQuery::Intersects(geometry_operand(d, "$geoIntersects")?))
    }

    /// `$near` / `$nearSphere` with their sibling `$minDistance` / `$maxDistance` (given in
    /// `ops`, the field's whole operator document).
    pub fn parse_near(op: &str, ops: &Document) -> DocResult<GeoQuery> {
        let sphere = op == "$nearSphere";
        let arg = ops.get(op).expect("caller found the operator");
        let mut min = None;
        let mut max = None;
        let pair: (f64, f64);
        let (point, metres) = match arg {
            Bson::Document(d) if d.contains_key("$geometry") => {
                for (k, v) in d {
                    match k.as_str() {
                        "$geometry" => {}
                        "$maxDistance" => max = Some(v),
                        "$minDistance" => min = Some(v),
                        other => {
                            return Err(bad(format!("invalid argument in geo near query: {other}")))
                        }
                    }
                }
                match geometry_operand(d, op)? {
                    Shape::Point(p) => {
                        pair = p.lng_lat();
                        (p, true)
                    }
                    _ => return Err(bad(format!("{op} must be a Point: {d}"))),
                }
            }
            Bson::Array(_) | Bson::Document(_) => {
                let (x, y) = flat_pair(arg, op)?;
                pair = (x, y);
                let p = if sphere {
                    lng_lat_point(x, y).map_err(bad)?
                } else {
                    // A flat point: its distances are on the plane (`pair`).
                    V3::from_lng_lat(x.clamp(-180.0, 180.0), y.clamp(-90.0, 90.0))
                };
                (p, false)
            }
            other => return Err(bad(format!("invalid argument to {op}: {other}"))),
        };
        for (k, v) in ops {
            match k.as_str() {
                "$maxDistance" => max = Some(v),
                "$minDistance" => min = Some(v),
                k if k == op => {}
                other => {
                    return Err(bad(format!(
                        "{op} cannot be combined with {other} on the same field"
                    )))
                }
            }
        }
        let to_radians = |v: Option<&Bson>, what: &str, default: f64| -> DocResult<f64> {
            let Some(v) = v else { return Ok(default) };
            let d = number(v, what)?;
            if d.is_nan() || d < 0.0 {
                return Err(bad(format!("{what} must be non-negative")));
            }
            Ok(if metres { d / EARTH_RADIUS_M } else { d })
        };
        let flat = !sphere && !metres;
        let max = to_radians(max, "$maxDistance", if flat { f64::INFINITY } else { PI })?;
        let min = to_radians(min, "$minDistance", 0.0)?;
        Ok(GeoQuery::Near(NearQuery {
            center: point,
            min,
            max,
            metres,
            flat,
            point: pair,
        }))
    }

    /// Whether a stored value satisfies the predicate (`$near`: within its bounds; the plan
    /// orders by distance).
    pub fn matches(&self, v: &Bson) -> bool {
        if let GeoQuery::FlatWithin(r) = self {
            return flat_points(v).iter().any(|p| r.contains(*p));
        }
        if let GeoQuery::Near(n) = self {
            return n.distance(v).is_some_and(|d| n.in_bounds(d));
        }
        let Ok(shapes) = stored_shapes(v) else {
            return false;
        };
        match self {
            GeoQuery::Within(r) => !shapes.is_empty() && shapes.iter().any(|s| s.within(r)),
            GeoQuery::Intersects(q) => shapes.iter().any(|s| s.intersects(q)),
            GeoQuery::Near(_) | GeoQuery::FlatWithin(_) => unreachable!("handled above"),
        }
    }

    /// A cap holding every geometry that can match (for the index covering), or None when
    /// the index cannot answer (flat shapes).
    pub fn bound(&self) -> Option<Cap> {
        match self {
            GeoQuery::Within(r) => Some(r.bound()),
            GeoQuery::Intersects(s) => Some(s.bound()),
            GeoQuery::Near(_) | GeoQuery::FlatWithin(_) => None,
        }
    }
}

impl GeoQuery {
    /// Boxes of the plane holding every legacy point that can match, for a 2d index: a flat
    /// shape's bounding box, or a `$centerSphere` cap's longitude/latitude box (two across
    /// the antimeridian). None for the predicates a 2d index cannot bound.
    pub fn flat_boxes(&self) -> Option<Vec<FlatBox>> {
        match self {
            GeoQuery::FlatWithin(r) => Some(vec![r.bounding_box()]),
            GeoQuery::Within(super::shape::Region::Cap(c)) => Some(super::flat::cap_boxes(c)),
            _ => None,
        }
    }
}

impl FlatRegion {
    fn bounding_box(&self) -> FlatBox {
        match self {
            FlatRegion::Box { lo, hi } => FlatBox { lo: *lo, hi: *hi },
            FlatRegion::Circle { center, radius } => FlatBox {
                lo: (center.0 - radius, center.1 - radius),
                hi: (center.0 + radius, center.1 + radius),
            },
            FlatRegion::Polygon(v) => {
                let fold = |f: fn(f64, f64) -> f64, init: f64, pick: fn(&(f64, f64)) -> f64| {
                    v.iter().map(pick).fold(init, f)
                };
                FlatBox {
                    lo: (
                        fold(f64::min, f64::INFINITY, |p| p.0),
                        fold(f64::min, f64::INFINITY, |p| p.1),
                    ),
                    hi: (
                        fold(f64::max, f64::NEG_INFINITY, |p| p.0),
                        fold(f64::max, f64::NEG_INFINITY, |p| p.1),
                    ),
                }
            }
        }
    }
}

/// The legacy points of a value for the flat operators: a pair, or an array of pairs.
pub(crate) fn flat_points(v: &Bson) -> Vec<(f64, f64)> {
    if let Some(p) = legacy_pair(v) {
        return vec![p];
    }
    match v {
        Bson::Array(a) => a.iter().filter_map(legacy_pair).collect(),
        _ => Vec::new(),
    }
}
