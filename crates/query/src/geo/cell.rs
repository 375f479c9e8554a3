//! Cells on the sphere for the 2dsphere index, in S2's layout: the sphere is projected onto
//! the six faces of a cube, each face split as a quadtree to level 30 (leaf cells of about
//! 1 cm). A cell id is `face (3 bits) | position (2 bits per level) | 1 | zeros`, so a cell's
//! descendants are exactly the ids in `[range_min, range_max]` and ordering ids orders the
//! quadtree depth-first. Positions interleave the i/j bits (Z order; S2 uses a Hilbert
//! curve, which only changes locality). Cell edges are great circles (lines of constant u or
//! v on a face are planes through the centre), so every cell is a convex spherical
//! quadrilateral and its corners bound it.

use super::sphere::{Cap, V3};

pub const MAX_LEVEL: u8 = 30;
const POS_BITS: u32 = 2 * MAX_LEVEL as u32 + 1;
const IJ_SIZE: f64 = (1u64 << MAX_LEVEL) as f64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellId(pub u64);

/// S2's quadratic projection (area distortion ~2.1× instead of the linear one's 5.2×).
fn st_to_uv(s: f64) -> f64 {
    if s >= 0.5 {
        (4.0 * s * s - 1.0) / 3.0
    } else {
        (1.0 - 4.0 * (1.0 - s) * (1.0 - s)) / 3.0
    }
}

fn uv_to_st(u: f64) -> f64 {
    if u >= 0.0 {
        0.5 * (1.0 + 3.0 * u).sqrt()
    } else {
        1.0 - 0.5 * (1.0 - 3.0 * u).sqrt()
    }
}

fn xyz_to_face_uv(p: V3) -> (u8, f64, f64) {
    let (ax, ay, az) = (p.x.abs(), p.y.abs(), p.z.abs());
    let mut face = if ax >= ay && ax >= az {
        0
    } else if ay >= az {
        1
    } else {
        2
    };
    let c = [p.x, p.y, p.z][face as usize];
    if c < 0.0 {
        face += 3;
    }
    let (u, v) = match face {
        0 => (p.y / p.x, p.z / p.x),
        1 => (-p.x / p.y, p.z / p.y),
        2 => (-p.x / p.z, -p.y / p.z),
        3 => (p.z / p.x, p.y / p.x),
        4 => (p.z / p.y, -p.x / p.y),
        _ => (-p.y / p.z, -p.x / p.z),
    };
    (face, u, v)
}

fn face_uv_to_xyz(face: u8, u: f64, v: f64) -> V3 {
    match face {
        0 => V3::new(1.0, u, v),
        1 => V3::new(-u, 1.0, v),
        2 => V3::new(-u, -v, 1.0),
        3 => V3::new(-1.0, -v, -u),
        4 => V3::new(v, -1.0, -u),
        _ => V3::new(v, u, -1.0),
    }
}

fn interleave(i: u64, j: u64) -> u64 {
    let spread = |mut x: u64| {
        x &= 0x3fff_ffff;
        x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
        x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
        x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
        x = (x | (x << 2)) & 0x3333_3333_3333_3333;
        (x | (x << 1)) & 0x5555_5555_5555_5555
    };
    (spread(i) << 1) | spread(j)
}

fn deinterleave(pos: u64) -> (u64, u64) {
    let squash = |mut x: u64| {
        x &= 0x5555_5555_5555_5555;
        x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
        x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
        x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
        x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
        (x | (x >> 16)) & 0x0000_0000_ffff_ffff
    };
    (squash(pos >> 1), squash(pos))
}

impl CellId {
    /// The leaf cell holding a unit vector.
    pub fn from_point(p: V3) -> CellId {
        let (face, u, v) = xyz_to_face_uv(p);
        let ij = |x: f64| ((uv_to_st(x) * IJ_SIZE).floor()).clamp(0.0, IJ_SIZE - 1.0) as u64;
        CellId(((face as u64) << POS_BITS) | (interleave(ij(u), ij(v)) << 1) | 1)
    }

    pub fn face_cell(face: u8) -> CellId {
        assert!(face < 6);
        CellId(((face as u64) << POS_BITS) | (1u64 << (POS_BITS - 1)))
    }

    fn lsb(self) -> u64 {
        self.0 & self.0.wrapping_neg()
    }

    pub fn level(self) -> u8 {
        MAX_LEVEL - (self.lsb().trailing_zeros() / 2) as u8
    }

    pub fn face(self) -> u8 {
        (self.0 >> POS_BITS) as u8
    }

    pub fn parent(self, level: u8) -> CellId {
        assert!(level <= self.level());
        let lsb = 1u64 << (2 * (MAX_LEVEL - level) as u32);
        CellId((self.0 & lsb.wrapping_neg()) | lsb)
    }

    pub fn children(self) -> [CellId; 4] {
        assert!(self.level() < MAX_LEVEL);
        let lsb = self.lsb();
        let step = lsb >> 2;
        let first = self.0 - lsb + step;
        [0, 1, 2, 3].map(|k| CellId(first + 2 * k * step))
    }

    pub fn range_min(self) -> u64 {
        self.0 - (self.lsb() - 1)
    }

    pub fn range_max(self) -> u64 {
        self.0 + (self.lsb() - 1)
    }

    pub fn contains(self, o: CellId) -> bool {
        self.range_min() <= o.0 && o.0 <= self.range_max()
    }

    /// The four corners, counter-clockwise.
    pub fn corners(self) -> [V3; 4] {
        let (i, j) = deinterleave((self.range_min() >> 1) & ((1u64 << (POS_BITS - 1)) - 1));
        let size = 1u64 << (MAX_LEVEL - self.level());
        let uv = |k: u64| st_to_uv(k as f64 / IJ_SIZE);
        let (u0, u1, v0, v1) = (uv(i), uv(i + size), uv(j), uv(j + size));
        let f = self.face();
        [(u0, v0), (u1, v0), (u1, v1), (u0, v1)].map(|(u, v)| face_uv_to_xyz(f, u, v).normalize())
    }

    /// A cap holding the cell: the corners' centroid and the farthest corner (a convex
    /// quadrilateral within a hemisphere of that centre is farthest at a corner), padded for
    /// rounding.
    pub fn bound(self) -> Cap {
        let c = self.corners();
        let center = c[0].plus(c[1]).plus(c[2]).plus(c[3]).normalize();
        let radius = c.iter().map(|p| center.angle(*p)).fold(0.0, f64::max);
        Cap {
            center,
            radius: radius * (1.0 + 1e-9) + 1e-15,
        }
    }
}

/// Cells covering a cap: every point of the cap is in one of them (they may hold more). The
/// largest cells are split first while the count stays within `max_cells` and cells are
/// above `max_level`; a cell the cap holds entirely is not split.
pub fn cover(cap: &Cap, max_cells: usize, max_level: u8) -> Vec<CellId> {
    assert!(max_cells >= 6 && max_level <= MAX_LEVEL);
    let mut cells: Vec<CellId> = (0..6)
        .map(CellId::face_cell)
        .filter(|c| cap.may_intersect(&c.bound()))
        .collect();
    // Each round splits every splittable cell once; levels bound the rounds.
    for _ in 0..=MAX_LEVEL {
        let mut next = Vec::with_capacity(cells.len() * 4);
        let mut split_any = false;
        for (k, c) in cells.iter().enumerate() {
            let whole = cap.radius < std::f64::consts::FRAC_PI_2
                && c.corners().iter().all(|p| cap.contains(*p));
            if c.level() >= max_level || whole {
                next.push(*c);
                continue;
            }
            let kids: Vec<CellId> = c
                .children()
                .into_iter()
                .filter(|k| cap.may_intersect(&k.bound()))
                .collect();
            let remaining = cells.len() - k - 1;
            if next.len() + kids.len() + remaining > max_cells {
                next.push(*c);
                continue;
            }
            split_any = true;
            next.extend(kids);
        }
        cells = next;
        if !split_any {
            break;
        }
    }
    cells.sort();
    cells
}

/// The index ranges a covering asks for: each cell's descendants `[range_min, range_max]`
/// and each of its ancestors (an indexed cell holding it), sorted and merged.
pub fn query_ranges(covering: &[CellId]) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for c in covering {
        ranges.push((c.range_min(), c.range_max()));
        for l in 0..c.level() {
            let a = c.parent(l).0;
            ranges.push((a, a));
        }
    }
    ranges.sort();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hierarchy() {
        let leaf = CellId::from_point(V3::from_lng_lat(2.35, 48.85));
        assert_eq!(leaf.level(), 30);
        for l in 0..30 {
            let p = leaf.parent(l);
            assert_eq!(p.level(), l);
            assert!(p.contains(leaf));
            assert!(p.children().iter().any(|k| k.contains(leaf)));
            assert_eq!(p.children().iter().filter(|k| k.contains(leaf)).count(), 1);
        }
        assert_eq!(leaf.parent(0), CellId::face_cell(leaf.face()));
    }

    proptest! {
        #[test]
        fn point_is_in_its_cells(lng in -180f64..180.0, lat in -90f64..90.0, level in 0u8..=30) {
            let p = V3::from_lng_lat(lng, lat);
            let c = CellId::from_point(p).parent(level);
            prop_assert!(c.bound().contains(p), "{:?} level {}", c, level);
        }

        #[test]
        fn covering_holds_the_cap(
            lng in -180f64..180.0, lat in -90f64..90.0, r in 0f64..0.5,
            dl in -1f64..1.0, dt in -1f64..1.0,
        ) {
            let center = V3::from_lng_lat(lng, lat);
            let cap = Cap { center, radius: r };
            let cells = cover(&cap, 16, 30);
            prop_assert!(cells.len() <= 16);
            // A point of the cap (center nudged within r) is in some covering cell.
            let q = center.plus(V3::new(dl, dt, dl * dt).scale(r / 3.0)).normalize();
            if cap.contains(q) {
                let leaf = CellId::from_point(q);
                prop_assert!(cells.iter().any(|c| c.contains(leaf)));
            }
        }
    }
}
