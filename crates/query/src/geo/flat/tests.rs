use super::*;
use bson::bson;
use rand::{Rng, SeedableRng};

#[test]
fn interleave_puts_x_above_y() {
    assert_eq!(interleave(0, 0), 0);
    assert_eq!(interleave(u32::MAX, 0), 0xAAAA_AAAA_AAAA_AAAA);
    assert_eq!(interleave(0, u32::MAX), 0x5555_5555_5555_5555);
    assert_eq!(interleave(1 << 31, 1 << 31), 0b11 << 62);
}

#[test]
fn hashes_keep_bits_per_coordinate() {
    let spec = Flat2dSpec::default();
    // The centre of [-180, 180]² is 2^31 on both axes: the top pair of bits is set.
    assert_eq!(spec.hash(0.0, 0.0).unwrap(), 0b11 << 62);
    assert_eq!(spec.hash(-180.0, -180.0).unwrap(), 0);
    // 26 bits per coordinate: the low 12 bits of the hash are always clear.
    let h = spec.hash(12.345, -67.891).unwrap();
    assert_eq!(h & 0xFFF, 0);
    // Points closer than one cell share the hash.
    let tiny = 360.0 / (1u64 << 27) as f64;
    let cell = |x: f64| spec.hash(x, 1.0).unwrap();
    assert_eq!(cell(10.0 + tiny / 4.0), cell(10.0));
    assert_eq!(spec.hash(181.0, 0.0).unwrap_err().code, 13027);
    assert_eq!(spec.hash(0.0, -180.5).unwrap_err().code, 13027);
    let one_bit = Flat2dSpec { bits: 1, ..spec };
    assert_eq!(one_bit.hash(100.0, -100.0).unwrap(), 0b10 << 62);
}

#[test]
fn options_as_mongod_checks_them() {
    let s = Flat2dSpec::parse(Some(&bson!(0)), Some(&bson!(100.5)), Some(&bson!(8))).unwrap();
    assert_eq!(
        s,
        Flat2dSpec {
            min: 0.0,
            max: 100.5,
            bits: 8
        }
    );
    for (min, max, bits) in [(0, 0, 26), (5, 1, 26), (0, 1, 0), (0, 1, 33)] {
        let e = Flat2dSpec::parse(Some(&bson!(min)), Some(&bson!(max)), Some(&bson!(bits)));
        assert_eq!(e.unwrap_err().code, 72, "{min} {max} {bits}");
    }
    assert_eq!(
        Flat2dSpec::parse(Some(&bson!("a")), None, None)
            .unwrap_err()
            .code,
        14
    );
}

/// Model-based: for random index parameters, boxes and points, a point in the box always
/// hashes into one of the box's ranges (the covering is a superset), and the ranges are
/// sorted and disjoint.
#[test]
fn covering_holds_every_point_of_the_box() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(35);
    for round in 0..300 {
        let min = rng.gen_range(-1000.0..100.0);
        let max = min + rng.gen_range(0.5..2000.0);
        let spec = Flat2dSpec {
            min,
            max,
            bits: rng.gen_range(1..=32),
        };
        let mut coord = || rng.gen_range(min - 5.0..max + 5.0);
        let (a, b, c, d) = (coord(), coord(), coord(), coord());
        let fb = FlatBox {
            lo: (a.min(b), c.min(d)),
            hi: (a.max(b), c.max(d)),
        };
        let ranges = spec.cover_box(&fb, rng.gen_range(1..64));
        assert!(
            ranges.windows(2).all(|w| w[0].1 < w[1].0),
            "round {round}: {ranges:?}"
        );
        for _ in 0..200 {
            let x = rng.gen_range(fb.lo.0..=fb.hi.0).clamp(min, max);
            let y = rng.gen_range(fb.lo.1..=fb.hi.1).clamp(min, max);
            if !(fb.lo.0 <= x && x <= fb.hi.0 && fb.lo.1 <= y && y <= fb.hi.1) {
                continue;
            }
            let h = spec.hash(x, y).unwrap();
            assert!(
                ranges.iter().any(|&(lo, hi)| lo <= h && h <= hi),
                "round {round}: ({x}, {y}) hash {h:#x} outside {ranges:?} for {fb:?} {spec:?}"
            );
        }
    }
}

#[test]
fn a_small_box_is_a_narrow_covering() {
    let spec = Flat2dSpec::default();
    let fb = FlatBox {
        lo: (10.0, 10.0),
        hi: (10.5, 10.5),
    };
    let ranges = spec.cover_box(&fb, 16);
    let width: u128 = ranges.iter().map(|(lo, hi)| (hi - lo) as u128 + 1).sum();
    // The box is 1/518400 of the square; its covering is well under 1/1000 of the hashes.
    assert!(width < (u64::MAX as u128) / 1000, "{ranges:?}");
    let outside = FlatBox {
        lo: (200.0, 0.0),
        hi: (300.0, 1.0),
    };
    assert!(spec.cover_box(&outside, 16).is_empty());
}

/// Model-based: every legacy point a random `$centerSphere` cap holds lies in one of its
/// boxes.
#[test]
fn cap_boxes_hold_the_cap() {
    use crate::geo::sphere::V3;
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    for _ in 0..300 {
        let center = V3::from_lng_lat(rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0));
        let cap = Cap {
            center,
            radius: rng.gen_range(0.0..1.0f64).powi(3) * 2.0,
        };
        let boxes = cap_boxes(&cap);
        for _ in 0..400 {
            let (x, y) = (rng.gen_range(-180.0..=180.0), rng.gen_range(-90.0..=90.0));
            if cap.contains(V3::from_lng_lat(x, y)) {
                assert!(
                    boxes
                        .iter()
                        .any(|b| b.lo.0 <= x && x <= b.hi.0 && b.lo.1 <= y && y <= b.hi.1),
                    "({x}, {y}) in {cap:?} outside {boxes:?}"
                );
            }
        }
    }
}
