//! Flat (2d) geometry for the `2d` index, as mongod's `GeoHashConverter` does it: a point
//! `[x, y]` in the index's square `[min, max]²` is scaled to two 32-bit integers, and its key
//! is their bits interleaved (x first), cut to the index's `bits` per coordinate — a
//! geohash. Each hash prefix is a square cell of a quadtree, and every point in a cell has a
//! hash in that cell's contiguous range, so a box of the plane is a short list of hash ranges
//! ([`Flat2dSpec::cover_box`]).

use std::f64::consts::FRAC_PI_2;

use bson::Bson;

use super::sphere::Cap;
use crate::error::{DocError, DocResult};

/// A 2d index's `min`, `max` and `bits` (mongod's defaults: -180, 180, 26).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flat2dSpec {
    pub min: f64,
    pub max: f64,
    pub bits: u32,
}

/// An axis-aligned box of the plane, corners included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlatBox {
    pub lo: (f64, f64),
    pub hi: (f64, f64),
}

impl Default for Flat2dSpec {
    fn default() -> Self {
        Flat2dSpec {
            min: -180.0,
            max: 180.0,
            bits: 26,
        }
    }
}

fn option_number(v: &Bson, what: &str) -> DocResult<f64> {
    crate::compare::Num::of(v)
        .map(|n| n.as_f64())
        .ok_or_else(|| {
            DocError::type_mismatch(format!(
                "geo index parameter '{what}' must be a number, found {v}"
            ))
        })
}

impl Flat2dSpec {
    /// The index options `min`, `max`, `bits` (absent: mongod's defaults), checked as mongod's
    /// `GeoHashConverter::parseParameters` checks them (InvalidOptions).
    pub fn parse(
        min: Option<&Bson>,
        max: Option<&Bson>,
        bits: Option<&Bson>,
    ) -> DocResult<Flat2dSpec> {
        let mut spec = Flat2dSpec::default();
        if let Some(v) = min {
            spec.min = option_number(v, "min")?;
        }
        if let Some(v) = max {
            spec.max = option_number(v, "max")?;
        }
        if let Some(v) = bits {
            let b = option_number(v, "bits")?;
            if !(1.0..=32.0).contains(&b) {
                return Err(DocError::invalid_options(format!(
                    "bits for hash must be > 0 and <= 32, but {b} bits were specified"
                )));
            }
            spec.bits = b as u32;
        }
        if spec.min >= spec.max || !spec.min.is_finite() || !spec.max.is_finite() {
            return Err(DocError::invalid_options(format!(
                "region for hash must be valid and have positive area, but [{}, {}] was specified",
                spec.min, spec.max
            )));
        }
        Ok(spec)
    }

    /// A coordinate on the 32-bit grid (the caller checked it is in `[min, max]`).
    fn scale(&self, v: f64) -> u32 {
        let scaled = (v - self.min) * (4_294_967_296.0 / (self.max - self.min));
        scaled.clamp(0.0, u32::MAX as f64) as u32
    }

    /// The hash bits a cell at the index's precision keeps (the top `2 * bits`).
    fn mask(&self) -> u64 {
        u64::MAX << (64 - 2 * self.bits)
    }

    /// The hash of `[x, y]`, or mongod's 13027 when the point is outside `[min, max]²`.
    pub fn hash(&self, x: f64, y: f64) -> DocResult<u64> {
        let inside = |v: f64| self.min <= v && v <= self.max;
        if !inside(x) || !inside(y) {
            return Err(DocError::with_code(
                13027,
                "Location13027",
                format!(
                    "point not in interval of [ {}, {} ) :: caused by :: {{ 0: {x}, 1: {y} }}",
                    self.min, self.max
                ),
            ));
        }
        Ok(interleave(self.scale(x), self.scale(y)) & self.mask())
    }

    /// Hash ranges (inclusive, sorted, disjoint) holding the hash of every point of `b` in
    /// the index's square: the quadtree cells meeting the box, split while at most
    /// `max_cells` cells result, down to the index's precision. A superset: the matcher
    /// re-checks what the ranges fetch.
    pub fn cover_box(&self, b: &FlatBox, max_cells: usize) -> Vec<(u64, u64)> {
        let clamp = |v: f64| v.clamp(self.min, self.max);
        let (x0, x1) = (clamp(b.lo.0), clamp(b.hi.0));
        let (y0, y1) = (clamp(b.lo.1), clamp(b.hi.1));
        if b.lo.0 > self.max || b.hi.0 < self.min || b.lo.1 > self.max || b.hi.1 < self.min {
            return Vec::new();
        }
        let grid = GridBox {
            x: (self.scale(x0), self.scale(x1)),
            y: (self.scale(y0), self.scale(y1)),
        };
        let mut done: Vec<Cell> = Vec::new();
        let mut partial = vec![Cell {
            level: 0,
            x: 0,
            y: 0,
        }];
        while !partial.is_empty() {
            let can_split =
                partial[0].level < self.bits && done.len() + partial.len() * 4 <= max_cells.max(4);
            if !can_split {
                done.append(&mut partial);
                break;
            }
            let mut next = Vec::with_capacity(partial.len() * 4);
            for c in partial.drain(..) {
                for child in c.children() {
                    match grid.relation(&child) {
                        Relation::Disjoint => {}
                        Relation::Inside => done.push(child),
                        Relation::Partial => next.push(child),
                    }
                }
            }
            partial = next;
        }
        merge(done.iter().map(Cell::range).collect())
    }
}

/// The longitude/latitude boxes (degrees) holding a spherical cap (`$centerSphere`), for a
/// 2d index of legacy `[lng, lat]` points: the cap's latitude band, and the widest longitude
/// span of a cap that holds no pole (`asin(sin r / cos lat)`), split in two across the
/// antimeridian. Widened by a hair so that rounding cannot drop a point on the rim.
pub fn cap_boxes(cap: &Cap) -> Vec<FlatBox> {
    const HAIR: f64 = 1e-7;
    let (lng, lat) = cap.center.lng_lat();
    let r = cap.radius.to_degrees() + HAIR;
    let (lat_lo, lat_hi) = ((lat - r).max(-90.0), (lat + r).min(90.0));
    let full = |lo: f64, hi: f64| FlatBox {
        lo: (-180.0, lo),
        hi: (180.0, hi),
    };
    let sin_r = cap.radius.sin();
    let cos_lat = lat.to_radians().cos();
    if lat_lo <= -90.0 || lat_hi >= 90.0 || cap.radius >= FRAC_PI_2 || sin_r >= cos_lat {
        return vec![full(lat_lo, lat_hi)];
    }
    let dlng = (sin_r / cos_lat).asin().to_degrees() + HAIR;
    let (lo, hi) = (lng - dlng, lng + dlng);
    let band = |lo: f64, hi: f64| FlatBox {
        lo: (lo, lat_lo),
        hi: (hi, lat_hi),
    };
    if lo < -180.0 {
        vec![band(lo + 360.0, 180.0), band(-180.0, hi)]
    } else if hi > 180.0 {
        vec![band(lo, 180.0), band(-180.0, hi - 360.0)]
    } else {
        vec![band(lo, hi)]
    }
}

/// Bits of `x` and `y` interleaved, x's in the higher position of each pair.
pub fn interleave(x: u32, y: u32) -> u64 {
    let spread = |v: u32| -> u64 {
        let mut v = v as u64;
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    };
    (spread(x) << 1) | spread(y)
}

/// A quadtree cell: `level` bits of each coordinate (`x`, `y` hold them in their low bits).
#[derive(Clone, Copy, Debug)]
struct Cell {
    level: u32,
    x: u32,
    y: u32,
}

impl Cell {
    fn children(&self) -> [Cell; 4] {
        let c = |dx: u32, dy: u32| Cell {
            level: self.level + 1,
            x: (self.x << 1) | dx,
            y: (self.y << 1) | dy,
        };
        [c(0, 0), c(0, 1), c(1, 0), c(1, 1)]
    }

    /// The grid span `[lo, hi]` of one coordinate of the cell.
    fn span(&self, v: u32) -> (u32, u32) {
        if self.level == 0 {
            return (0, u32::MAX);
        }
        let shift = 32 - self.level;
        let lo = v << shift;
        (lo, lo | (u32::MAX >> self.level))
    }

    /// The cell's hash range: every hash whose top `2 * level` bits are the cell's.
    fn range(&self) -> (u64, u64) {
        if self.level == 0 {
            return (0, u64::MAX);
        }
        let lo = interleave(self.span(self.x).0, self.span(self.y).0);
        (lo, lo | (u64::MAX >> (2 * self.level)))
    }
}

/// A box on the 32-bit grid, bounds included.
struct GridBox {
    x: (u32, u32),
    y: (u32, u32),
}

enum Relation {
    Disjoint,
    Inside,
    Partial,
}

impl GridBox {
    fn relation(&self, c: &Cell) -> Relation {
        let (cx, cy) = (c.span(c.x), c.span(c.y));
        if cx.1 < self.x.0 || cx.0 > self.x.1 || cy.1 < self.y.0 || cy.0 > self.y.1 {
            Relation::Disjoint
        } else if self.x.0 <= cx.0 && cx.1 <= self.x.1 && self.y.0 <= cy.0 && cy.1 <= self.y.1 {
            Relation::Inside
        } else {
            Relation::Partial
        }
    }
}

/// Sorted ranges with touching or overlapping ones joined.
fn merge(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
