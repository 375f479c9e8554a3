//! Arithmetic: `$add` … `$round`, `$log`, trigonometry, the bitwise operators, and
//! `$sum`/`$avg`/`$min`/`$max`/`$stdDevPop`/`$stdDevSamp`/`$median`/`$percentile` as
//! expressions; MongoDB's numeric type promotion.

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::*;

/// `$add`.
pub(super) fn add(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let mut acc = Num::I32(0);
    let mut date: Option<i64> = None;
    for x in args.vals {
        let x = x.as_ref().expect("not null");
        match x {
            Bson::DateTime(d) => {
                if date.is_some() {
                    return Err(DocError::with_code(
                        16612,
                        "Location16612",
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(d.timestamp_millis());
            }
            other => match Num::of(other) {
                Some(n) => acc = add_num(acc, n),
                None => {
                    return Err(DocError::type_mismatch(format!(
                        "$add only supports numeric or date types, not {}",
                        type_name(other)
                    )))
                }
            },
        }
    }
    Ok(Some(match date {
        Some(ms) => Bson::DateTime(DateTime::from_millis(ms + acc.as_f64().round() as i64)),
        None => acc.to_bson(),
    }))
}

/// `$subtract`.
pub(super) fn subtract(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let (a, b) = (
        args.v(0).as_ref().expect("nn"),
        args.v(1).as_ref().expect("nn"),
    );
    Ok(match (a, b, Num::of(a), Num::of(b)) {
        (_, _, Some(x), Some(y)) => Some(add_num(x, neg_num(y)).to_bson()),
        (Bson::DateTime(x), Bson::DateTime(y), _, _) => {
            Some(Bson::Int64(x.timestamp_millis() - y.timestamp_millis()))
        }
        (Bson::DateTime(x), _, _, Some(y)) => Some(Bson::DateTime(DateTime::from_millis(
            x.timestamp_millis() - y.as_f64().round() as i64,
        ))),
        _ => {
            return Err(DocError::type_mismatch(format!(
                "can't $subtract {} from {}",
                type_name(b),
                type_name(a)
            )))
        }
    })
}

/// `$multiply`.
pub(super) fn multiply(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let mut acc = Num::I32(1);
    for x in args.vals {
        let x = x.as_ref().expect("nn");
        match Num::of(x) {
            Some(n) => acc = mul_num(acc, n),
            None => {
                return Err(DocError::type_mismatch(format!(
                    "$multiply only supports numeric types, not {}",
                    type_name(x)
                )))
            }
        }
    }
    Ok(Some(acc.to_bson()))
}

/// `$divide`, `$mod`, `$pow`.
pub(super) fn divide_mod_pow(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let (Some(a), Some(b)) = (args.num(0), args.num(1)) else {
        return Err(DocError::with_code(
            16609,
            "Location16609",
            format!(
                "{name} only supports numeric types, not {} and {}",
                tn(args.v(0)),
                tn(args.v(1))
            ),
        ));
    };
    let dec = matches!(a, Num::Dec(_)) || matches!(b, Num::Dec(_));
    Ok(match op {
        Op::Divide => {
            if b.as_f64() == 0.0 {
                return Err(DocError::bad_value("can't $divide by zero"));
            }
            let q = a.as_f64() / b.as_f64();
            Some(if dec {
                Num::Dec(q).to_bson()
            } else {
                Bson::Double(q)
            })
        }
        Op::Mod => {
            if b.as_f64() == 0.0 {
                return Err(DocError::with_code(
                    16610,
                    "Location16610",
                    "can't $mod by zero",
                ));
            }
            match (int_of(a), int_of(b)) {
                (Some(x), Some(y)) => {
                    let r = x.wrapping_rem(y);
                    Some(if matches!((a, b), (Num::I32(_), Num::I32(_))) {
                        Bson::Int32(r as i32)
                    } else {
                        Bson::Int64(r)
                    })
                }
                _ => {
                    let r = a.as_f64() % b.as_f64();
                    Some(if dec {
                        Num::Dec(r).to_bson()
                    } else {
                        Bson::Double(r)
                    })
                }
            }
        }
        _ => {
            let p = a.as_f64().powf(b.as_f64());
            Some(match (int_of(a), int_of(b)) {
                (Some(_), Some(e)) if e >= 0 && p.abs() < 9.2e18 => {
                    let r = p as i64;
                    if matches!((a, b), (Num::I32(_), Num::I32(_))) && fits_i32(r) {
                        Bson::Int32(r as i32)
                    } else {
                        Bson::Int64(r)
                    }
                }
                _ if dec => Num::Dec(p).to_bson(),
                _ => Bson::Double(p),
            })
        }
    })
}

/// `$abs`, `$ceil`, `$floor`, `$sqrt`, `$exp`, `$ln`, `$log10`, `$trunc`, `$round`.
pub(super) fn unary_math(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let Some(n) = args.num(0) else {
        return Err(DocError::with_code(
            28765,
            "Location28765",
            format!("{name} only supports numeric types, not {}", tn(args.v(0))),
        ));
    };
    let places = if args.vals.len() > 1 {
        args.num(1).map(|p| p.as_f64() as i32).unwrap_or(0)
    } else {
        0
    };
    let f = n.as_f64();
    let keep = |r: f64| -> Bson {
        match n {
            Num::I32(_) if r.fract() == 0.0 && fits_i32(r as i64) => Bson::Int32(r as i32),
            Num::I64(_) | Num::I32(_) if r.fract() == 0.0 => Bson::Int64(r as i64),
            Num::Dec(_) => Num::Dec(r).to_bson(),
            _ => Bson::Double(r),
        }
    };
    Ok(Some(match op {
        Op::Abs => match n {
            Num::I32(i) => match i.checked_abs() {
                Some(a) => Bson::Int32(a),
                None => Bson::Int64((i as i64).abs()),
            },
            Num::I64(i) => match i.checked_abs() {
                Some(a) => Bson::Int64(a),
                None => {
                    return Err(DocError::with_code(
                        28680,
                        "Location28680",
                        "can't take $abs of long long min",
                    ))
                }
            },
            _ => keep(f.abs()),
        },
        Op::Ceil => keep(f.ceil()),
        Op::Floor => keep(f.floor()),
        Op::Trunc | Op::Round => {
            let m = 10f64.powi(places);
            let r = if op == Op::Trunc {
                (f * m).trunc() / m
            } else {
                // Round half to even, as mongod.
                let x = f * m;
                let r = x.round();
                let r = if (x - x.trunc()).abs() == 0.5 {
                    2.0 * (x / 2.0).round()
                } else {
                    r
                };
                r / m
            };
            keep(r)
        }
        Op::Sqrt => {
            if f < 0.0 {
                return Err(DocError::with_code(
                    28714,
                    "Location28714",
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            Bson::Double(f.sqrt())
        }
        Op::Exp => Bson::Double(f.exp()),
        Op::Ln => {
            if f <= 0.0 {
                return Err(DocError::with_code(
                    28766,
                    "Location28766",
                    format!("$ln's argument must be a positive number, but is {f}"),
                ));
            }
            Bson::Double(f.ln())
        }
        _ => {
            if f <= 0.0 {
                return Err(DocError::with_code(
                    28761,
                    "Location28761",
                    format!("$log10's argument must be a positive number, but is {f}"),
                ));
            }
            Bson::Double(f.log10())
        }
    }))
}

/// `$sum`, `$avg`, `$min`, `$max`.
pub(super) fn sum_avg_min_max(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let items: Vec<Bson> = if args.vals.len() == 1 {
        match &args.vals[0] {
            Some(Bson::Array(a)) => a.clone(),
            Some(x) => vec![x.clone()],
            None => vec![],
        }
    } else {
        args.vals.iter().flatten().cloned().collect()
    };
    Ok(Some(match op {
        Op::Sum => sum_values(items.iter()),
        Op::Avg => avg_values(items.iter()),
        _ => {
            let it = items
                .into_iter()
                .filter(|x| !matches!(x, Bson::Null | Bson::Undefined));
            let r = if op == Op::Min {
                it.min_by(compare_bson)
            } else {
                it.max_by(compare_bson)
            };
            r.unwrap_or(Bson::Null)
        }
    }))
}

/// `$stdDevPop`, `$stdDevSamp` as expressions: over one array argument or several values;
/// non-numbers are ignored, and too few numbers give null.
pub(super) fn std_dev(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let items: Vec<&Bson> = match args.vals {
        [Some(Bson::Array(a))] => a.iter().collect(),
        vals => vals.iter().flatten().collect(),
    };
    let xs: Vec<f64> = items
        .into_iter()
        .filter_map(Num::of)
        .map(Num::as_f64)
        .collect();
    let samp = op == Op::StdDevSamp;
    if xs.is_empty() || (samp && xs.len() < 2) {
        return Ok(Some(Bson::Null));
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    Ok(Some(Bson::Double(
        (ss / if samp { n - 1.0 } else { n }).sqrt(),
    )))
}

/// `$median` (`{input, method}`) and `$percentile` (`{input, p, method}`): exact
/// percentiles, as mongod computes them for the expression forms even with `method:
/// "approximate"` (the only method it accepts): the value at rank ⌈p·n⌉ of the sorted numbers,
/// as a double; non-numbers are ignored and no numbers give null.
pub(super) fn percentile(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    match args.eval("method", ctx)? {
        Some(Bson::String(m)) if m == "approximate" => {}
        other => {
            return Err(DocError::bad_value(format!(
                "Enumeration value '{}' for field '{}.method' is not a valid value.",
                other.as_ref().map(shell_repr).unwrap_or_default(),
                op.name()
            )))
        }
    }
    let ps: Vec<f64> = if op == Op::Median {
        vec![0.5]
    } else {
        let bad = |v: &Bson| {
            DocError::with_code(
                7750301,
                "Location7750301",
                format!(
                    "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: {}",
                    shell_repr(v)
                ),
            )
        };
        match args.eval("p", ctx)?.unwrap_or(Bson::Null) {
            Bson::Array(a) if !a.is_empty() => a
                .iter()
                .map(|v| {
                    Num::of(v)
                        .map(Num::as_f64)
                        .filter(|p| (0.0..=1.0).contains(p))
                        .ok_or_else(|| bad(v))
                })
                .collect::<DocResult<_>>()?,
            other => return Err(bad(&other)),
        }
    };
    let mut xs: Vec<f64> = match args.eval("input", ctx)? {
        Some(Bson::Array(a)) => a.iter().filter_map(Num::of).map(Num::as_f64).collect(),
        Some(v) => Num::of(&v).map(Num::as_f64).into_iter().collect(),
        None => Vec::new(),
    };
    xs.retain(|x| !x.is_nan());
    xs.sort_by(f64::total_cmp);
    let at = |p: f64| -> Bson {
        if xs.is_empty() {
            return Bson::Null;
        }
        let rank = (p * xs.len() as f64).ceil() as usize;
        Bson::Double(xs[rank.clamp(1, xs.len()) - 1])
    };
    Ok(Some(if op == Op::Median {
        at(0.5)
    } else {
        Bson::Array(ps.into_iter().map(at).collect())
    }))
}

/// The numeric argument `i`, or mongod's 28765 (`None` when it is null or missing).
fn numeric_arg(op: Op, args: &Args, i: usize) -> DocResult<Option<Num>> {
    if is_nullish(args.v(i)) {
        return Ok(None);
    }
    args.num(i).map(Some).ok_or_else(|| {
        DocError::with_code(
            28765,
            "Location28765",
            format!(
                "{} only supports numeric types, not {}",
                op.name(),
                tn(args.v(i))
            ),
        )
    })
}

/// The trigonometric operators and `$degreesToRadians`/`$radiansToDegrees`: a double (a
/// decimal for a decimal input); an input outside the function's domain is 50989.
pub(super) fn trig(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let Some(n) = numeric_arg(op, args, 0)? else {
        return Ok(Some(Bson::Null));
    };
    let x = n.as_f64();
    let (domain, lo, hi, lo_open, hi_open): (bool, f64, f64, bool, bool) = match op {
        Op::Acos | Op::Asin | Op::Atanh => ((-1.0..=1.0).contains(&x), -1.0, 1.0, false, false),
        Op::Acosh => (x >= 1.0, 1.0, f64::INFINITY, false, false),
        Op::Sin | Op::Cos | Op::Tan => {
            (x.is_finite(), f64::NEG_INFINITY, f64::INFINITY, true, true)
        }
        _ => (true, 0.0, 0.0, false, false),
    };
    if !domain && !x.is_nan() {
        let (l, r) = (
            if lo_open { '(' } else { '[' },
            if hi_open { ')' } else { ']' },
        );
        return Err(DocError::with_code(
            50989,
            "Location50989",
            format!(
                "cannot apply {} to {x}, value must be in {l}{lo},{hi}{r}",
                op.name()
            ),
        ));
    }
    let r = match op {
        Op::Sin => x.sin(),
        Op::Cos => x.cos(),
        Op::Tan => x.tan(),
        Op::Asin => x.asin(),
        Op::Acos => x.acos(),
        Op::Atan => x.atan(),
        Op::Sinh => x.sinh(),
        Op::Cosh => x.cosh(),
        Op::Tanh => x.tanh(),
        Op::Asinh => x.asinh(),
        Op::Acosh => x.acosh(),
        Op::Atanh => x.atanh(),
        Op::DegreesToRadians => x.to_radians(),
        _ => x.to_degrees(),
    };
    Ok(Some(match n {
        Num::Dec(_) => Num::Dec(r).to_bson(),
        _ => Bson::Double(r),
    }))
}

/// `$atan2`: `[y, x]`.
pub(super) fn atan2(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let (Some(y), Some(x)) = (numeric_arg(op, args, 0)?, numeric_arg(op, args, 1)?) else {
        return Ok(Some(Bson::Null));
    };
    let r = y.as_f64().atan2(x.as_f64());
    Ok(Some(match (y, x) {
        (Num::Dec(_), _) | (_, Num::Dec(_)) => Num::Dec(r).to_bson(),
        _ => Bson::Double(r),
    }))
}

/// `$log`: `[number, base]`.
pub(super) fn log(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let err = |code, name, msg: String| Err(DocError::with_code(code, name, msg));
    let Some(n) = args.num(0) else {
        return err(
            28756,
            "Location28756",
            format!("$log's argument must be numeric, not {}", tn(args.v(0))),
        );
    };
    let Some(b) = args.num(1) else {
        return err(
            28757,
            "Location28757",
            format!("$log's base must be numeric, not {}", tn(args.v(1))),
        );
    };
    let (x, base) = (n.as_f64(), b.as_f64());
    if x <= 0.0 {
        return err(
            28758,
            "Location28758",
            format!("$log's argument must be a positive number, but is {x}"),
        );
    }
    if base <= 0.0 || base == 1.0 {
        return err(
            28759,
            "Location28759",
            format!("$log's base must be a positive number not equal to 1, but is {base}"),
        );
    }
    let r = x.ln() / base.ln();
    Ok(Some(match (n, b) {
        (Num::Dec(_), _) | (_, Num::Dec(_)) => Num::Dec(r).to_bson(),
        _ => Bson::Double(r),
    }))
}

/// `$bitAnd`, `$bitOr`, `$bitXor` (over ints and longs: a long if any operand is one) and
/// `$bitNot`.
pub(super) fn bitwise(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let mut acc: i64 = match op {
        Op::BitAnd => -1,
        _ => 0,
    };
    let mut long = false;
    for v in args.vals.iter().flatten() {
        let x = match v {
            Bson::Int32(i) => *i as i64,
            Bson::Int64(i) => {
                long = true;
                *i
            }
            _ => {
                return Err(DocError::type_mismatch(format!(
                    "{} only supports int and long operands.",
                    op.name()
                )))
            }
        };
        acc = match op {
            Op::BitAnd => acc & x,
            Op::BitOr => acc | x,
            Op::BitXor => acc ^ x,
            _ => !x,
        };
    }
    Ok(Some(if long {
        Bson::Int64(acc)
    } else {
        Bson::Int32(acc as i32)
    }))
}

pub(super) fn fits_i32(i: i64) -> bool {
    i >= i32::MIN as i64 && i <= i32::MAX as i64
}

pub(super) fn int_of(n: Num) -> Option<i64> {
    match n {
        Num::I32(i) => Some(i as i64),
        Num::I64(i) => Some(i),
        _ => None,
    }
}

/// Adds two numbers with MongoDB's type promotion (int32 overflows to int64, int64 to double).
pub fn add_num(a: Num, b: Num) -> Num {
    match (a, b) {
        (Num::Dec(_), _) | (_, Num::Dec(_)) => Num::Dec(a.as_f64() + b.as_f64()),
        (Num::F64(_), _) | (_, Num::F64(_)) => Num::F64(a.as_f64() + b.as_f64()),
        _ => {
            let (x, y) = (int_of(a).expect("int"), int_of(b).expect("int"));
            let both32 = matches!((a, b), (Num::I32(_), Num::I32(_)));
            match x.checked_add(y) {
                Some(s) if both32 && fits_i32(s) => Num::I32(s as i32),
                Some(s) => Num::I64(s),
                None => Num::F64(x as f64 + y as f64),
            }
        }
    }
}

/// Multiplies two numbers with MongoDB's type promotion.
pub fn mul_num(a: Num, b: Num) -> Num {
    match (a, b) {
        (Num::Dec(_), _) | (_, Num::Dec(_)) => Num::Dec(a.as_f64() * b.as_f64()),
        (Num::F64(_), _) | (_, Num::F64(_)) => Num::F64(a.as_f64() * b.as_f64()),
        _ => {
            let (x, y) = (int_of(a).expect("int"), int_of(b).expect("int"));
            let both32 = matches!((a, b), (Num::I32(_), Num::I32(_)));
            match x.checked_mul(y) {
                Some(s) if both32 && fits_i32(s) => Num::I32(s as i32),
                Some(s) => Num::I64(s),
                None => Num::F64(x as f64 * y as f64),
            }
        }
    }
}

pub(super) fn neg_num(a: Num) -> Num {
    match a {
        Num::I32(i) => match i.checked_neg() {
            Some(n) => Num::I32(n),
            None => Num::I64(-(i as i64)),
        },
        Num::I64(i) => match i.checked_neg() {
            Some(n) => Num::I64(n),
            None => Num::F64(-(i as f64)),
        },
        Num::F64(f) => Num::F64(-f),
        Num::Dec(f) => Num::Dec(-f),
    }
}

/// Sum of numbers with promotion, ignoring non-numbers (the `$sum` accumulator).
pub fn sum_values<'a>(vals: impl Iterator<Item = &'a Bson>) -> Bson {
    let mut acc = Num::I32(0);
    for v in vals {
        if let Some(n) = Num::of(v) {
            acc = add_num(acc, n);
        }
    }
    acc.to_bson()
}

/// Average of the numbers among `vals` (null if none).
pub fn avg_values<'a>(vals: impl Iterator<Item = &'a Bson>) -> Bson {
    let mut sum = 0.0;
    let mut n = 0usize;
    let mut dec = false;
    for v in vals {
        if let Some(x) = Num::of(v) {
            dec |= matches!(x, Num::Dec(_));
            sum += x.as_f64();
            n += 1;
        }
    }
    mean(sum, n, dec)
}

/// The mean of `n` numbers summing to `sum` as `$avg` returns it: null for none, a decimal
/// when a decimal was among them, else a double.
pub fn mean(sum: f64, n: usize, dec: bool) -> Bson {
    if n == 0 {
        Bson::Null
    } else if dec {
        Num::Dec(sum / n as f64).to_bson()
    } else {
        Bson::Double(sum / n as f64)
    }
}
