//! Points on the unit sphere and the great-circle primitives every geo predicate is built
//! from: angles, arc crossings, the distance from a point to an arc, spherical caps.
//!
//! Why our own math: no well-kept Rust crate does polygon containment with great-circle edges
//! (`geo` is planar or works per geodesic line, `s2` 0.0.x has cells and caps but no polygons,
//! `geographiclib-rs` does geodesic distances on the ellipsoid, which is not mongod's sphere).
//! The primitives are the textbook unit-vector ones (S2's "simple crossing" for arcs), a few
//! lines each, and property-tested in `tests.rs`.

/// mongod's `kRadiusOfEarthInMeters` (src/mongo/db/geo/geoconstants.h): 6378.1 km.
pub const EARTH_RADIUS_M: f64 = 6_378_100.0;

/// A point on (or, before normalizing, near) the unit sphere.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct V3 {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

impl V3 {
    pub const fn new(x: f64, y: f64, z: f64) -> V3 {
        V3 { x, y, z }
    }

    /// The unit vector of a longitude/latitude pair in degrees.
    pub fn from_lng_lat(lng: f64, lat: f64) -> V3 {
        let (lng, lat) = (lng.to_radians(), lat.to_radians());
        V3::new(lat.cos() * lng.cos(), lat.cos() * lng.sin(), lat.sin())
    }

    /// (longitude, latitude) in degrees.
    pub fn lng_lat(self) -> (f64, f64) {
        (
            self.y.atan2(self.x).to_degrees(),
            self.z
                .atan2((self.x * self.x + self.y * self.y).sqrt())
                .to_degrees(),
        )
    }

    pub fn dot(self, o: V3) -> f64 {
        self.x * o.x + self.y * o.y + self.z * o.z
    }

    pub fn cross(self, o: V3) -> V3 {
        V3::new(
            self.y * o.z - self.z * o.y,
            self.z * o.x - self.x * o.z,
            self.x * o.y - self.y * o.x,
        )
    }

    pub fn plus(self, o: V3) -> V3 {
        V3::new(self.x + o.x, self.y + o.y, self.z + o.z)
    }

    pub fn scale(self, k: f64) -> V3 {
        V3::new(self.x * k, self.y * k, self.z * k)
    }

    pub fn antipode(self) -> V3 {
        self.scale(-1.0)
    }

    pub fn norm(self) -> f64 {
        self.dot(self).sqrt()
    }

    /// The unit vector in this direction (the zero vector stays zero).
    pub fn normalize(self) -> V3 {
        let n = self.norm();
        if n == 0.0 {
            self
        } else {
            self.scale(1.0 / n)
        }
    }

    /// The angle between two unit vectors in radians, accurate near 0 and π (atan2 of the
    /// cross and dot products rather than acos of the dot).
    pub fn angle(self, o: V3) -> f64 {
        self.cross(o).norm().atan2(self.dot(o))
    }
}

/// The sign of the orientation of (a, b, c): positive when c is left of the arc a → b.
pub fn orient(a: V3, b: V3, c: V3) -> f64 {
    a.cross(b).dot(c)
}

/// Whether arcs a→b and c→d cross at a point interior to both (S2's `SimpleCrossing`):
/// touching at a vertex or overlapping collinearly is not a crossing.
pub fn arcs_cross(a: V3, b: V3, c: V3, d: V3) -> bool {
    let ab = a.cross(b);
    let acb = -ab.dot(c);
    let bda = ab.dot(d);
    if acb * bda <= 0.0 {
        return false;
    }
    let cd = c.cross(d);
    let cbd = -cd.dot(b);
    let dac = cd.dot(a);
    acb * cbd > 0.0 && acb * dac > 0.0
}

/// Angles below this (about 6 nm on the Earth) count as zero: a point on an arc, two equal
/// points. Float rounding of unit vectors is ~1e-16.
pub const EPS_ANGLE: f64 = 1e-15;

/// The angle from p to the nearest point of the shorter great-circle arc a→b.
pub fn dist_to_arc(p: V3, a: V3, b: V3) -> f64 {
    let n = a.cross(b);
    if n.norm() < 1e-300 {
        return p.angle(a).min(p.angle(b));
    }
    let n = n.normalize();
    // The foot of p on the great circle; it is on the arc when a → q → b turns neither way.
    let q = p.plus(n.scale(-p.dot(n)));
    if q.norm() > 1e-300 {
        let q = q.normalize();
        if a.cross(q).dot(n) >= 0.0 && q.cross(b).dot(n) >= 0.0 {
            return p.angle(q);
        }
    }
    p.angle(a).min(p.angle(b))
}

/// Whether two arcs share a point (a proper crossing, or a vertex of one on the other).
pub fn arcs_intersect(a: V3, b: V3, c: V3, d: V3) -> bool {
    arcs_cross(a, b, c, d)
        || dist_to_arc(a, c, d) <= EPS_ANGLE
        || dist_to_arc(b, c, d) <= EPS_ANGLE
        || dist_to_arc(c, a, b) <= EPS_ANGLE
        || dist_to_arc(d, a, b) <= EPS_ANGLE
}

/// A spherical cap: every point within `radius` radians of `center`. A radius ≥ π is the
/// whole sphere.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cap {
    pub center: V3,
    pub radius: f64,
}

impl Cap {
    pub fn contains(&self, p: V3) -> bool {
        self.center.angle(p) <= self.radius
    }

    pub fn is_full(&self) -> bool {
        self.radius >= std::f64::consts::PI
    }

    /// Whether two caps may share a point (exact up to float rounding, which it errs for).
    pub fn may_intersect(&self, o: &Cap) -> bool {
        self.center.angle(o.center) <= self.radius + o.radius + 1e-12
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn distance_london_paris_on_mongod_sphere() {
        // Haversine on a 6378.1 km sphere: 344.0 km (London 51.5074 N 0.1278 W, Paris
        // 48.8566 N 2.3522 E).
        let d = V3::from_lng_lat(-0.1278, 51.5074).angle(V3::from_lng_lat(2.3522, 48.8566))
            * EARTH_RADIUS_M;
        assert!((d - 343_923.0).abs() < 200.0, "{d}");
    }

    #[test]
    fn crossing_and_touching() {
        let p = V3::from_lng_lat;
        assert!(arcs_cross(
            p(-1.0, 0.0),
            p(1.0, 0.0),
            p(0.0, -1.0),
            p(0.0, 1.0)
        ));
        assert!(!arcs_cross(
            p(-1.0, 0.0),
            p(1.0, 0.0),
            p(0.0, 0.0),
            p(0.0, 1.0)
        ));
        assert!(arcs_intersect(
            p(-1.0, 0.0),
            p(1.0, 0.0),
            p(0.0, 0.0),
            p(0.0, 1.0)
        ));
        assert!(!arcs_intersect(
            p(-1.0, 0.0),
            p(1.0, 0.0),
            p(2.0, -1.0),
            p(2.0, 1.0)
        ));
    }

    #[test]
    fn long_edge_bulges_towards_the_pole() {
        // The great circle from (-60, 60) to (60, 60) passes north of latitude 60: at
        // longitude 0 it reaches ~73.9 N, so (0, 70) is on the equator side of the edge
        // (south of it), where a planar lng/lat edge would put it north.
        let (a, b) = (V3::from_lng_lat(-60.0, 60.0), V3::from_lng_lat(60.0, 60.0));
        let top = dist_to_arc(V3::from_lng_lat(0.0, 90.0), a, b);
        assert!(
            (90.0 - top.to_degrees() - 73.898).abs() < 0.01,
            "{}",
            top.to_degrees()
        );
        assert!(orient(a, b, V3::from_lng_lat(0.0, 70.0)) < 0.0);
    }

    proptest! {
        #[test]
        fn lng_lat_round_trip(lng in -179.9f64..179.9, lat in -89.9f64..89.9) {
            let (l2, t2) = V3::from_lng_lat(lng, lat).lng_lat();
            prop_assert!((l2 - lng).abs() < 1e-9 && (t2 - lat).abs() < 1e-9);
        }

        #[test]
        fn arc_distance_is_at_most_the_endpoints(
            a in (-180f64..180.0, -89f64..89.0),
            b in (-180f64..180.0, -89f64..89.0),
            p in (-180f64..180.0, -89f64..89.0),
            t in 0f64..1.0,
        ) {
            let (a, b, p) = (V3::from_lng_lat(a.0, a.1), V3::from_lng_lat(b.0, b.1), V3::from_lng_lat(p.0, p.1));
            prop_assume!(a.angle(b) < 3.1);
            let d = dist_to_arc(p, a, b);
            prop_assert!(d <= p.angle(a) + 1e-12 && d <= p.angle(b) + 1e-12);
            // Any point of the arc (slerp) is no nearer than the minimum.
            let w = a.angle(b);
            let s = if w < 1e-12 { a } else {
                a.scale(((1.0 - t) * w).sin() / w.sin()).plus(b.scale((t * w).sin() / w.sin()))
            };
            prop_assert!(d <= p.angle(s) + 1e-9);
        }
    }
}
