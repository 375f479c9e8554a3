//! `$bucket` (documents into ranges given by boundaries), `$bucketAuto` (into a number of ranges
//! of about equal counts, optionally on a preferred-number series) and `$sample`.

use std::cmp::Ordering;

use bson::{Bson, Document};
use rand::Rng;

use super::common::stage_err;
use super::common::{DocIter, Memory};
use super::group::{count_output, parse_accumulators, Accumulating, Accumulators};
use super::spill::run_group;
use crate::compare::{compare_bson, shell_repr, type_name, Num};
use crate::error::DocResult;
use crate::expr::{parse_expr, Ctx, Expr};
use crate::vars::Scope;

/// `groupBy` must be a `$`-path or an operator expression (`code` is the stage's).
fn parse_group_by(v: &Bson, code: i32, stage: &str) -> DocResult<Expr> {
    let ok = match v {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !ok {
        return Err(stage_err(
            code,
            format!(
                "The {stage} 'groupBy' field must be defined as a $-prefixed path or an expression, but found: {}.",
                shell_repr(v)
            ),
        ));
    }
    parse_expr(v)
}

/// BSON's canonical type classes: numbers compare as one type (mongod's canonicalizeBSONType).
fn same_class(a: &Bson, b: &Bson) -> bool {
    match (Num::of(a), Num::of(b)) {
        (Some(_), Some(_)) => true,
        (None, None) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => false,
    }
}

#[derive(Clone, Debug)]
pub(super) struct Bucket {
    group_by: Expr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Accumulators,
}

impl Bucket {
    pub(super) fn parse(arg: &Bson) -> DocResult<Bucket> {
        let Bson::Document(d) = arg else {
            return Err(stage_err(
                40201,
                format!(
                    "Argument to $bucket stage must be an object, but found type: {}.",
                    type_name(arg)
                ),
            ));
        };
        let (mut group_by, mut boundaries, mut default, mut output) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => group_by = Some(parse_group_by(v, 40202, "$bucket")?),
                "boundaries" => boundaries = Some(parse_boundaries(v)?),
                "default" => {
                    default = Some(constant(
                        v,
                        40195,
                        "The $bucket 'default' field must be a constant expression",
                    )?)
                }
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(stage_err(
                            40196,
                            format!(
                                "The $bucket 'output' field must be an object, but found type: {}.",
                                type_name(v)
                            ),
                        ));
                    };
                    output = Some(parse_accumulators(o.iter())?);
                }
                other => {
                    return Err(stage_err(
                        40197,
                        format!("Unrecognized option to $bucket: {other}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
            return Err(stage_err(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        if let Some(dv) = &default {
            let (lo, hi) = (&boundaries[0], boundaries.last().expect("at least two"));
            if same_class(dv, lo)
                && compare_bson(dv, lo) != Ordering::Less
                && compare_bson(dv, hi) == Ordering::Less
            {
                return Err(stage_err(40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary."));
            }
        }
        Ok(Bucket {
            group_by,
            boundaries,
            default,
            output: output.unwrap_or_else(count_output),
        })
    }

    /// Groups by the bucket each value falls in (its lower boundary), then sorts by `_id`, as
    /// mongod's rewrite into `$group` with a `$switch` and `$sort` does.
    pub(super) fn run(self, input: DocIter, scope: &Scope) -> DocResult<DocIter> {
        let Bucket {
            group_by,
            boundaries,
            default,
            output,
        } = self;
        let key = |ctx: &Ctx| -> DocResult<Bson> {
            let v = group_by.eval(ctx)?;
            // The first boundary above the value; the bucket is the one before it. A missing
            // value is below every boundary.
            let above = match &v {
                None => 0,
                Some(v) => boundaries.partition_point(|b| compare_bson(b, v) != Ordering::Greater),
            };
            let inside = v.as_ref().is_some_and(|v| same_class(v, &boundaries[0]));
            if inside && above > 0 && above < boundaries.len() {
                return Ok(boundaries[above - 1].clone());
            }
            default.clone().ok_or_else(|| {
                stage_err(40066, "$switch could not find a matching branch for an input, and no default was specified.")
            })
        };
        let mut groups = run_group(input, key, &output, scope)?;
        groups.sort_by(|a, b| compare_bson(&a["_id"], &b["_id"]));
        Ok(Box::new(groups.into_iter().map(Ok)))
    }
}

/// A value mongod accepts as a constant: a literal, or `{$literal: …}`.
fn constant(v: &Bson, code: i32, what: &str) -> DocResult<Bson> {
    match v {
        Bson::Document(d) if d.len() == 1 && d.contains_key("$literal") => {
            Ok(d["$literal"].clone())
        }
        Bson::Document(d) if d.keys().any(|k| k.starts_with('$')) => Err(stage_err(
            code,
            format!("{what}, but found: {}.", shell_repr(v)),
        )),
        Bson::String(s) if s.starts_with('$') => Err(stage_err(
            code,
            format!("{what}, but found: {}.", shell_repr(v)),
        )),
        other => Ok(other.clone()),
    }
}

fn parse_boundaries(v: &Bson) -> DocResult<Vec<Bson>> {
    let Bson::Array(a) = v else {
        return Err(stage_err(
            40200,
            format!(
                "The $bucket 'boundaries' field must be an array, but found type: {}.",
                type_name(v)
            ),
        ));
    };
    let mut out = Vec::with_capacity(a.len());
    for b in a {
        out.push(constant(
            b,
            40191,
            "The $bucket 'boundaries' field must be an array of constant values",
        )?);
    }
    if out.len() < 2 {
        return Err(stage_err(40192, format!("The $bucket 'boundaries' field must have at least 2 values, but found {} value(s).", out.len())));
    }
    for (i, w) in out.windows(2).enumerate() {
        if !same_class(&w[0], &w[1]) {
            return Err(stage_err(40193, format!("All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types {} and {}.", type_name(&w[0]), type_name(&w[1]))));
        }
        if compare_bson(&w[0], &w[1]) != Ordering::Less {
            return Err(stage_err(40194, format!("The 'boundaries' option to $bucket must be sorted, but elements {} and {} are not in ascending order ({} is not less than {}).", i, i + 1, shell_repr(&w[0]), shell_repr(&w[1]))));
        }
    }
    Ok(out)
}

/// A `granularity`: a preferred-number series (scaled by powers of ten) or the powers of two.
#[derive(Clone, Copy, Debug)]
enum Granularity {
    Series(&'static [f64]),
    PowersOf2,
}

/// The series as mongod has them (granularity_rounder_preferred_numbers.cpp, after Wikipedia's
/// "Preferred number"), R40's and R80's irregularities included.
const SERIES: &[(&str, &[f64])] = &[
    ("R5", &[10.0, 16.0, 25.0, 40.0, 63.0]),
    (
        "R10",
        &[
            100.0, 125.0, 160.0, 200.0, 250.0, 315.0, 400.0, 500.0, 630.0, 800.0,
        ],
    ),
    (
        "R20",
        &[
            100.0, 112.0, 125.0, 140.0, 160.0, 180.0, 200.0, 224.0, 250.0, 280.0, 315.0, 355.0,
            400.0, 450.0, 500.0, 560.0, 630.0, 710.0, 800.0, 900.0,
        ],
    ),
    (
        "R40",
        &[
            100.0, 106.0, 112.0, 118.0, 125.0, 132.0, 140.0, 150.0, 160.0, 170.0, 180.0, 190.0,
            200.0, 212.0, 224.0, 236.0, 250.0, 265.0, 280.0, 300.0, 315.0, 355.0, 375.0, 400.0,
            425.0, 450.0, 475.0, 500.0, 530.0, 560.0, 600.0, 630.0, 670.0, 710.0, 750.0, 800.0,
            850.0, 900.0, 950.0,
        ],
    ),
    (
        "R80",
        &[
            103.0, 109.0, 115.0, 122.0, 128.0, 136.0, 145.0, 155.0, 165.0, 175.0, 185.0, 195.0,
            206.0, 218.0, 230.0, 243.0, 258.0, 272.0, 290.0, 307.0, 325.0, 345.0, 365.0, 387.0,
            412.0, 437.0, 462.0, 487.0, 515.0, 545.0, 575.0, 615.0, 650.0, 690.0, 730.0, 775.0,
            825.0, 875.0, 925.0, 975.0,
        ],
    ),
    ("1-2-5", &[10.0, 20.0, 50.0]),
    ("E6", &[10.0, 15.0, 22.0, 33.0, 47.0, 68.0]),
    (
        "E12",
        &[
            10.0, 12.0, 15.0, 18.0, 22.0, 27.0, 33.0, 39.0, 47.0, 56.0, 68.0, 82.0,
        ],
    ),
    (
        "E24",
        &[
            10.0, 11.0, 12.0, 13.0, 15.0, 16.0, 18.0, 20.0, 22.0, 24.0, 27.0, 30.0, 33.0, 36.0,
            39.0, 43.0, 47.0, 51.0, 56.0, 62.0, 68.0, 75.0, 82.0, 91.0,
        ],
    ),
    (
        "E48",
        &[
            100.0, 105.0, 110.0, 115.0, 121.0, 127.0, 133.0, 140.0, 147.0, 154.0, 162.0, 169.0,
            178.0, 187.0, 196.0, 205.0, 215.0, 226.0, 237.0, 249.0, 261.0, 274.0, 287.0, 301.0,
            316.0, 332.0, 348.0, 365.0, 383.0, 402.0, 422.0, 442.0, 464.0, 487.0, 511.0, 536.0,
            562.0, 590.0, 619.0, 649.0, 681.0, 715.0, 750.0, 787.0, 825.0, 866.0, 909.0, 953.0,
        ],
    ),
    (
        "E96",
        &[
            100.0, 102.0, 105.0, 107.0, 110.0, 113.0, 115.0, 118.0, 121.0, 124.0, 127.0, 130.0,
            133.0, 137.0, 140.0, 143.0, 147.0, 150.0, 154.0, 158.0, 162.0, 165.0, 169.0, 174.0,
            178.0, 182.0, 187.0, 191.0, 196.0, 200.0, 205.0, 210.0, 215.0, 221.0, 226.0, 232.0,
            237.0, 243.0, 249.0, 255.0, 261.0, 267.0, 274.0, 280.0, 287.0, 294.0, 301.0, 309.0,
            316.0, 324.0, 332.0, 340.0, 348.0, 357.0, 365.0, 374.0, 383.0, 392.0, 402.0, 412.0,
            422.0, 432.0, 442.0, 453.0, 464.0, 475.0, 487.0, 499.0, 511.0, 523.0, 536.0, 549.0,
            562.0, 576.0, 590.0, 604.0, 619.0, 634.0, 649.0, 665.0, 681.0, 698.0, 715.0, 732.0,
            750.0, 768.0, 787.0, 806.0, 825.0, 845.0, 866.0, 887.0, 909.0, 931.0, 953.0, 976.0,
        ],
    ),
    (
        "E192",
        &[
            100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 109.0, 110.0, 111.0, 113.0, 114.0,
            115.0, 117.0, 118.0, 120.0, 121.0, 123.0, 124.0, 126.0, 127.0, 129.0, 130.0, 132.0,
            133.0, 135.0, 137.0, 138.0, 140.0, 142.0, 143.0, 145.0, 147.0, 149.0, 150.0, 152.0,
            154.0, 156.0, 158.0, 160.0, 162.0, 164.0, 165.0, 167.0, 169.0, 172.0, 174.0, 176.0,
            178.0, 180.0, 182.0, 184.0, 187.0, 189.0, 191.0, 193.0, 196.0, 198.0, 200.0, 203.0,
            205.0, 208.0, 210.0, 213.0, 215.0, 218.0, 221.0, 223.0, 226.0, 229.0, 232.0, 234.0,
            237.0, 240.0, 243.0, 246.0, 249.0, 252.0, 255.0, 258.0, 261.0, 264.0, 267.0, 271.0,
            274.0, 277.0, 280.0, 284.0, 287.0, 291.0, 294.0, 298.0, 301.0, 305.0, 309.0, 312.0,
            316.0, 320.0, 324.0, 328.0, 332.0, 336.0, 340.0, 344.0, 348.0, 352.0, 357.0, 361.0,
            365.0, 370.0, 374.0, 379.0, 383.0, 388.0, 392.0, 397.0, 402.0, 407.0, 412.0, 417.0,
            422.0, 427.0, 432.0, 437.0, 442.0, 448.0, 453.0, 459.0, 464.0, 470.0, 475.0, 481.0,
            487.0, 493.0, 499.0, 505.0, 511.0, 517.0, 523.0, 530.0, 536.0, 542.0, 549.0, 556.0,
            562.0, 569.0, 576.0, 583.0, 590.0, 597.0, 604.0, 612.0, 619.0, 626.0, 634.0, 642.0,
            649.0, 657.0, 665.0, 673.0, 681.0, 690.0, 698.0, 706.0, 715.0, 723.0, 732.0, 741.0,
            750.0, 759.0, 768.0, 777.0, 787.0, 796.0, 806.0, 816.0, 825.0, 835.0, 845.0, 856.0,
            866.0, 876.0, 887.0, 898.0, 909.0, 920.0, 931.0, 942.0, 953.0, 965.0, 976.0, 988.0,
        ],
    ),
];

/// The scale bound of the rounding loops: 10^±330 covers every finite double.
const MAX_DECADES: usize = 700;

impl Granularity {
    fn parse(v: &Bson) -> DocResult<Granularity> {
        let Bson::String(name) = v else {
            return Err(stage_err(
                40261,
                format!(
                    "The $bucketAuto 'granularity' field must be a string, but found type: {}",
                    type_name(v)
                ),
            ));
        };
        if name == "POWERSOF2" {
            return Ok(Granularity::PowersOf2);
        }
        SERIES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| Granularity::Series(s))
            .ok_or_else(|| stage_err(40257, format!("Unknown rounding granularity '{name}'")))
    }

    /// The smallest value of the granularity strictly above `v` (0 stays 0).
    fn round_up(self, v: &Bson) -> Bson {
        let x = Num::of(v).expect("checked numeric").as_f64();
        if x == 0.0 {
            return v.clone();
        }
        match self {
            Granularity::PowersOf2 => pow2(v, x, true),
            Granularity::Series(s) => same_num_type(v, series_up(s, x)),
        }
    }

    /// The largest value of the granularity strictly below `v` (0 stays 0).
    fn round_down(self, v: &Bson) -> Bson {
        let x = Num::of(v).expect("checked numeric").as_f64();
        if x == 0.0 {
            return v.clone();
        }
        match self {
            Granularity::PowersOf2 => pow2(v, x, false),
            Granularity::Series(s) => same_num_type(v, series_down(s, x)),
        }
    }
}

/// A rounded series value: a double, or a decimal for a decimal input (as mongod's rounders).
fn same_num_type(v: &Bson, x: f64) -> Bson {
    match v {
        Bson::Decimal128(_) => Num::Dec(x).to_bson(),
        _ => Bson::Double(x),
    }
}

/// mongod's preferred-number `roundUp`: scale the series by powers of ten until it spans `x`.
fn series_up(s: &[f64], x: f64) -> f64 {
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut m = 1.0;
    for _ in 0..MAX_DECADES {
        if x < last * m {
            break;
        }
        m *= 10.0;
    }
    for _ in 0..MAX_DECADES {
        if x >= first * m {
            break;
        }
        let previous_min = first * m;
        m /= 10.0;
        if x >= last * m {
            return previous_min;
        }
    }
    s.iter()
        .map(|v| v * m)
        .find(|v| *v > x)
        .unwrap_or(first * m * 10.0)
}

/// mongod's preferred-number `roundDown`.
fn series_down(s: &[f64], x: f64) -> f64 {
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut m = 1.0;
    for _ in 0..MAX_DECADES {
        if x > first * m {
            break;
        }
        m /= 10.0;
    }
    for _ in 0..MAX_DECADES {
        if x <= last * m {
            break;
        }
        let previous_max = last * m;
        m *= 10.0;
        if x <= first * m {
            return previous_max;
        }
    }
    s.iter()
        .map(|v| v * m)
        .rev()
        .find(|v| *v < x)
        .unwrap_or(last * m / 10.0)
}

/// The next power of two above (`up`) or below `x`, typed as mongod's `$pow: [2, exponent]`
/// gives it: an integer for a non-negative exponent that fits, else a double.
fn pow2(v: &Bson, x: f64, up: bool) -> Bson {
    let exp: i32 = match v {
        Bson::Int32(_) | Bson::Int64(_) => {
            let n = Num::of(v).and_then(Num::as_i64_exact).expect("integer") as u64;
            let top = 63 - n.leading_zeros() as i32;
            match (up, n.is_power_of_two()) {
                (true, _) => top + 1,
                (false, true) => top - 1,
                (false, false) => top,
            }
        }
        _ if up => x.log2().floor() as i32 + 1,
        _ => x.log2().ceil() as i32 - 1,
    };
    if matches!(v, Bson::Decimal128(_)) {
        return Num::Dec(2f64.powi(exp)).to_bson();
    }
    if exp < 0 {
        return Bson::Double(2f64.powi(exp));
    }
    if exp < 31 {
        Bson::Int32(1 << exp)
    } else if exp < 63 {
        Bson::Int64(1 << exp)
    } else {
        Bson::Double(2f64.powi(exp))
    }
}

#[derive(Clone, Debug)]
pub(super) struct BucketAuto {
    group_by: Expr,
    buckets: usize,
    output: Accumulators,
    granularity: Option<Granularity>,
}

impl BucketAuto {
    pub(super) fn parse(arg: &Bson) -> DocResult<BucketAuto> {
        let Bson::Document(d) = arg else {
            return Err(stage_err(
                40240,
                format!(
                    "The argument to $bucketAuto must be an object, but found type: {}",
                    type_name(arg)
                ),
            ));
        };
        let (mut group_by, mut buckets, mut output, mut granularity) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => group_by = Some(parse_group_by(v, 40239, "$bucketAuto")?),
                "buckets" => {
                    let Some(n) = Num::of(v) else {
                        return Err(stage_err(40241, format!("The $bucketAuto 'buckets' field must be a numeric value, but found type: {}", type_name(v))));
                    };
                    let n = n.as_i64_exact().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| {
                        stage_err(40242, format!("The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found {}", shell_repr(v)))
                    })?;
                    if n <= 0 {
                        return Err(stage_err(40243, format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {n}")));
                    }
                    buckets = Some(n as usize);
                }
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(stage_err(40244, format!("The $bucketAuto 'output' field must be an object, but found type: {}", type_name(v))));
                    };
                    output = Some(parse_accumulators(o.iter())?);
                }
                "granularity" => granularity = Some(Granularity::parse(v)?),
                other => {
                    return Err(stage_err(
                        40245,
                        format!("Unrecognized option to $bucketAuto: {other}"),
                    ))
                }
            }
        }
        let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
            return Err(stage_err(
                40246,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        };
        Ok(BucketAuto {
            group_by,
            buckets,
            output: output.unwrap_or_else(count_output),
            granularity,
        })
    }

    /// Sorts the input by its key, then fills `buckets` buckets of about equal counts; equal
    /// keys never straddle two buckets, and with a granularity the boundaries are rounded to it
    /// (mongod's BucketAutoStage).
    pub(super) fn run(self, input: DocIter, scope: &Scope) -> DocResult<DocIter> {
        let mut keyed: Vec<(Bson, Document)> = Vec::new();
        let mut memory = Memory::new("$bucketAuto");
        for d in input {
            let d = d?;
            memory.charge(&d)?;
            let key = self
                .group_by
                .eval(&Ctx::scoped(&d, scope))?
                .unwrap_or(Bson::Null);
            if self.granularity.is_some() {
                check_roundable(&key)?;
            }
            keyed.push((key, d));
        }
        keyed.sort_by(|a, b| compare_bson(&a.0, &b.0));
        let per_bucket = ((keyed.len() as f64 / self.buckets as f64).round() as usize).max(1);
        let mut out = Vec::new();
        let mut rest = keyed.into_iter().peekable();
        let mut previous_max: Option<Bson> = None;
        while let Some((first_key, first_doc)) = rest.next() {
            let last_bucket = out.len() + 1 == self.buckets;
            let mut acc = Accumulating::new(&self.output);
            acc.add(&self.output, &Ctx::scoped(&first_doc, scope))?;
            let min = match (self.granularity, &previous_max) {
                (Some(_), Some(p)) => p.clone(),
                (Some(g), None) => g.round_down(&first_key),
                (None, _) => first_key.clone(),
            };
            let mut max = first_key;
            let output = &self.output;
            let take = |rest: &mut Sorted, acc: &mut Accumulating, max: &mut Bson| {
                let (k, d) = rest.next().expect("peeked");
                *max = k;
                acc.add(output, &Ctx::scoped(&d, scope))
            };
            // The bucket's share (the last takes everything left).
            let mut taken = 1;
            while rest.peek().is_some() && (last_bucket || taken < per_bucket) {
                take(&mut rest, &mut acc, &mut max)?;
                taken += 1;
            }
            // Then the keys equal to its largest, and with a granularity those below its
            // rounded-up boundary, so no key straddles two buckets.
            let boundary = self.granularity.map(|g| g.round_up(&max));
            while let Some((k, _)) = rest.peek() {
                let absorb = compare_bson(k, &max) == Ordering::Equal
                    || boundary
                        .as_ref()
                        .is_some_and(|b| compare_bson(b, k) == Ordering::Greater);
                if !absorb {
                    break;
                }
                take(&mut rest, &mut acc, &mut max)?;
            }
            let next = rest.peek().map(|(k, _)| k);
            max = match (self.granularity, boundary, next) {
                // A first bucket ending at zero ends where the next one's rounded-down start
                // is, so the boundary stays exclusive.
                (Some(g), Some(b), Some(n)) if Num::of(&b).is_some_and(|u| u.as_f64() == 0.0) => {
                    g.round_down(n)
                }
                (Some(_), Some(b), _) => b,
                // Without a granularity a bucket ends where the next begins (the last one's
                // maximum is its largest key, inclusive).
                (_, _, Some(n)) => n.clone(),
                _ => max,
            };
            previous_max = Some(max.clone());
            out.push(acc.finish(bson::doc! {"min": min, "max": max}.into(), &self.output)?);
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }
}

type Sorted = std::iter::Peekable<std::vec::IntoIter<(Bson, Document)>>;

/// A granularity rounds only non-negative finite numbers (mongod: 40258, 40259, 40260).
fn check_roundable(key: &Bson) -> DocResult<()> {
    let Some(n) = Num::of(key) else {
        return Err(stage_err(40258, format!("$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value with type: {}", type_name(key))));
    };
    let x = n.as_f64();
    if x.is_nan() {
        return Err(stage_err(
            40259,
            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN",
        ));
    }
    if x < 0.0 {
        return Err(stage_err(40260, "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a negative number"));
    }
    if x.is_infinite() {
        return Err(stage_err(
            11785400,
            "A granularity rounder can only round finite numbers",
        ));
    }
    Ok(())
}

/// `$sample: {size: n}`: `n` documents drawn uniformly without replacement, in random order.
#[derive(Clone, Debug)]
pub(super) struct Sample {
    size: usize,
}

impl Sample {
    pub(super) fn parse(arg: &Bson) -> DocResult<Sample> {
        let Bson::Document(d) = arg else {
            return Err(stage_err(
                28745,
                "the $sample stage specification must be an object",
            ));
        };
        let mut size = None;
        for (k, v) in d {
            if k != "size" {
                return Err(stage_err(
                    28748,
                    format!("unrecognized option to $sample: {k}"),
                ));
            }
            let Some(n) = Num::of(v) else {
                return Err(stage_err(
                    28746,
                    "size argument to $sample must be a number",
                ));
            };
            let n = n.as_f64();
            if n < 0.0 {
                return Err(stage_err(
                    28747,
                    "size argument to $sample must not be negative",
                ));
            }
            size = Some(n.min(usize::MAX as f64) as usize);
        }
        let Some(size) = size else {
            return Err(stage_err(28749, "$sample stage must specify a size"));
        };
        Ok(Sample { size })
    }

    /// Reservoir sampling (Algorithm R): memory is bounded by the sample, not the input.
    pub(super) fn run(self, input: DocIter) -> DocResult<DocIter> {
        let mut rng = rand::thread_rng();
        let mut reservoir: Vec<Document> = Vec::new();
        // The reservoir's first fill is charged; later draws replace its documents.
        let mut memory = Memory::new("$sample");
        for (seen, d) in input.enumerate() {
            let d = d?;
            if reservoir.len() < self.size {
                memory.charge(&d)?;
                reservoir.push(d);
            } else {
                let j = rng.gen_range(0..=seen);
                if j < self.size {
                    reservoir[j] = d;
                }
            }
        }
        // The reservoir keeps input order for its first fill; the output order is random.
        rand::seq::SliceRandom::shuffle(reservoir.as_mut_slice(), &mut rng);
        Ok(Box::new(reservoir.into_iter().map(Ok)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounders_match_mongods() {
        let e6 = Granularity::parse(&Bson::String("E6".into())).unwrap();
        // The series times a power of ten in doubles, as mongod multiplies (68 * 0.1 is not 6.8).
        assert_eq!(e6.round_up(&Bson::Int32(5)), Bson::Double(68.0 * 0.1));
        assert_eq!(e6.round_up(&Bson::Double(0.8)), Bson::Double(1.0));
        assert_eq!(e6.round_down(&Bson::Double(0.8)), Bson::Double(68.0 * 0.01));
        assert_eq!(e6.round_up(&Bson::Int32(68)), Bson::Double(100.0));
        assert_eq!(e6.round_down(&Bson::Int32(10)), Bson::Double(68.0 * 0.1));
        assert_eq!(e6.round_up(&Bson::Int32(0)), Bson::Int32(0));
        let p2 = Granularity::PowersOf2;
        assert_eq!(p2.round_up(&Bson::Int32(5)), Bson::Int32(8));
        assert_eq!(p2.round_up(&Bson::Int32(8)), Bson::Int32(16));
        assert_eq!(p2.round_down(&Bson::Int32(8)), Bson::Int32(4));
        assert_eq!(p2.round_down(&Bson::Int32(9)), Bson::Int32(8));
        assert_eq!(p2.round_up(&Bson::Double(0.3)), Bson::Double(0.5));
        assert_eq!(p2.round_up(&Bson::Double(3.5)), Bson::Int32(4));
        let r5 = Granularity::parse(&Bson::String("R5".into())).unwrap();
        assert_eq!(r5.round_up(&Bson::Int32(1)), Bson::Double(16.0 * 0.1));
        assert_eq!(r5.round_down(&Bson::Double(1.6)), Bson::Double(10.0 * 0.1));
        assert_eq!(
            Granularity::parse(&Bson::String("E7".into()))
                .unwrap_err()
                .code,
            40257
        );
        for (name, s) in SERIES {
            assert!(s.windows(2).all(|w| w[0] < w[1]), "{name} is sorted");
        }
    }
}
