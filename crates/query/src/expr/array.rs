//! Array operators, `$filter`/`$map`/`$reduce` included.

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::*;

/// `$size`.
pub(super) fn size(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(0) {
        Some(Bson::Array(a)) => Some(Bson::Int32(a.len() as i32)),
        other => {
            return Err(DocError::with_code(
                17124,
                "Location17124",
                format!(
                    "The argument to $size must be an array. Type of argument: {}",
                    tn(other)
                ),
            ))
        }
    })
}

/// `$arrayElemAt`.
pub(super) fn array_elem_at(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let arr = match args.v(0) {
        Some(Bson::Array(a)) => a,
        other => {
            return Err(DocError::with_code(
                28689,
                "Location28689",
                format!(
                    "$arrayElemAt's first argument must be an array, but is {}",
                    tn(other)
                ),
            ))
        }
    };
    let i = to_i64_arg("$arrayElemAt", args.v(1).as_ref().expect("nn"))?;
    let idx = if i < 0 { arr.len() as i64 + i } else { i };
    Ok(if idx < 0 || idx >= arr.len() as i64 {
        None
    } else {
        Some(arr[idx as usize].clone())
    })
}

/// `$first`, `$last`.
pub(super) fn first_last(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    Ok(match args.v(0) {
        None => None,
        Some(Bson::Null) | Some(Bson::Undefined) => Some(Bson::Null),
        Some(Bson::Array(a)) => {
            if op == Op::First {
                a.first().cloned()
            } else {
                a.last().cloned()
            }
        }
        other => {
            return Err(DocError::with_code(
                28689,
                "Location28689",
                format!("{name}'s argument must be an array, but is {}", tn(other)),
            ))
        }
    })
}

/// `$in`.
pub(super) fn in_array(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(1) {
        Some(Bson::Array(a)) => {
            let x = args.v(0).clone().unwrap_or(Bson::Null);
            Some(Bson::Boolean(
                args.v(0).is_some() && a.iter().any(|e| bson_equal(e, &x)),
            ))
        }
        other => {
            return Err(DocError::with_code(
                40081,
                "Location40081",
                format!(
                    "$in requires an array as a second argument, found: {}",
                    tn(other)
                ),
            ))
        }
    })
}

/// `$isArray`.
pub(super) fn is_array(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(Some(Bson::Boolean(matches!(
        args.v(0),
        Some(Bson::Array(_))
    ))))
}

/// `$concatArrays`.
pub(super) fn concat_arrays(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let mut out = Vec::new();
    for x in args.vals {
        match x {
            Some(Bson::Array(a)) => out.extend(a.iter().cloned()),
            other => {
                return Err(DocError::with_code(
                    28664,
                    "Location28664",
                    format!("$concatArrays only supports arrays, not {}", tn(other)),
                ))
            }
        }
    }
    Ok(Some(Bson::Array(out)))
}

/// `$slice`.
pub(super) fn slice(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let arr = require_array("$slice", args.v(0), 28724)?;
    let len = arr.len() as i64;
    let (start, n) = if args.vals.len() == 2 {
        let n = to_i64_arg("$slice", args.v(1).as_ref().expect("nn"))?;
        if n >= 0 {
            (0, n)
        } else {
            ((len + n).max(0), -n)
        }
    } else {
        let p = to_i64_arg("$slice", args.v(1).as_ref().expect("nn"))?;
        let n = to_i64_arg("$slice", args.v(2).as_ref().expect("nn"))?;
        if n <= 0 {
            return Err(DocError::with_code(
                28729,
                "Location28729",
                format!("Third argument to $slice must be positive: {n}"),
            ));
        }
        (if p < 0 { (len + p).max(0) } else { p.min(len) }, n)
    };
    Ok(Some(Bson::Array(
        arr.iter()
            .skip(start as usize)
            .take(n as usize)
            .cloned()
            .collect(),
    )))
}

/// `$reverseArray`.
pub(super) fn reverse_array(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(0) {
        None | Some(Bson::Null) => Some(Bson::Null),
        Some(Bson::Array(a)) => Some(Bson::Array(a.iter().rev().cloned().collect())),
        other => {
            return Err(DocError::with_code(
                34435,
                "Location34435",
                format!(
                    "The argument to $reverseArray must be an array, but was of type: {}",
                    tn(other)
                ),
            ))
        }
    })
}

/// `$range`.
pub(super) fn range(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let g = |i: usize| -> DocResult<i64> {
        match &args.vals[i] {
            Some(b) => to_i64_arg("$range", b),
            None => Err(DocError::with_code(
                34443,
                "Location34443",
                "$range requires a numeric starting value, found value of type: missing",
            )),
        }
    };
    let (s, e) = (g(0)?, g(1)?);
    let step = if args.vals.len() > 2 { g(2)? } else { 1 };
    if step == 0 {
        return Err(DocError::with_code(
            34449,
            "Location34449",
            "$range requires a non-zero step value",
        ));
    }
    // The length first, so a huge range is refused before anything is allocated
    // (mongod: internalQueryMaxRangeBytes, 100 MB).
    let span = if step > 0 {
        e as i128 - s as i128
    } else {
        s as i128 - e as i128
    };
    let length = if span <= 0 {
        0
    } else {
        (span - 1) / (step as i128).abs() + 1
    };
    let mem_needed = length * std::mem::size_of::<Bson>() as i128;
    if mem_needed >= MAX_RANGE_BYTES as i128 {
        return Err(DocError::with_code(
            146,
            "ExceededMemoryLimit",
            format!("$range would use too much memory ({mem_needed} bytes) and cannot spill to disk. Memory limit: {MAX_RANGE_BYTES} bytes"),
        ));
    }
    let out: Vec<Bson> = (0..length as i64)
        .map(|k| Bson::Int32((s + k * step) as i32))
        .collect();
    Ok(Some(Bson::Array(out)))
}

/// `$indexOfArray`.
pub(super) fn index_of_array(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(0) {
        None | Some(Bson::Null) => Some(Bson::Null),
        Some(Bson::Array(a)) => {
            let x = args.v(1).clone().unwrap_or(Bson::Null);
            let st = if args.vals.len() > 2 {
                args.num(2).map(|n| n.as_f64() as usize).unwrap_or(0)
            } else {
                0
            };
            let en = if args.vals.len() > 3 {
                args.num(3).map(|n| n.as_f64() as usize).unwrap_or(a.len())
            } else {
                a.len()
            };
            let found = (st..en.min(a.len())).find(|&i| bson_equal(&a[i], &x));
            Some(Bson::Int32(found.map(|i| i as i32).unwrap_or(-1)))
        }
        other => {
            return Err(DocError::with_code(
                40090,
                "Location40090",
                format!(
                    "$indexOfArray requires an array as a first argument, found: {}",
                    tn(other)
                ),
            ))
        }
    })
}

/// `$filter`, `$map`.
pub(super) fn filter_map(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    {
        let input = args
            .get("input")
            .ok_or_else(|| {
                DocError::failed_to_parse(format!("Missing 'input' parameter to {name}"))
            })?
            .eval(ctx)?;
        let arr = match &input {
            None | Some(Bson::Null) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(a)) => a,
            other => {
                return Err(DocError::with_code(
                    28651,
                    "Location28651",
                    format!("input to {name} must be an array not {}", tn(other)),
                ))
            }
        };
        let var = args.as_name("this");
        let body = args
            .get(if op == Op::Filter { "cond" } else { "in" })
            .ok_or_else(|| DocError::failed_to_parse(format!("Missing parameter to {name}")))?;
        let limit = match args.get("limit") {
            Some(l) => match l.eval(ctx)? {
                Some(v) => Some(to_i64_arg("$filter", &v)?.max(0) as usize),
                None => None,
            },
            None => None,
        };
        let mut out = Vec::new();
        for e in arr {
            let c = ctx.with(&var, e.clone());
            if op == Op::Filter {
                if limit.is_some_and(|l| out.len() >= l) {
                    break;
                }
                if truthy(body.eval(&c)?.as_ref()) {
                    out.push(e.clone());
                }
            } else {
                out.push(body.eval(&c)?.unwrap_or(Bson::Null));
            }
        }
        Ok(Some(Bson::Array(out)))
    }
}

/// `$reduce`.
pub(super) fn reduce(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        let input = args
            .get("input")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let mut acc = args
            .get("initialValue")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let arr = match &input {
            None | Some(Bson::Null) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(a)) => a,
            other => {
                return Err(DocError::with_code(
                    40080,
                    "Location40080",
                    format!(
                        "$reduce requires that 'input' be an array, found: {}",
                        tn(other)
                    ),
                ))
            }
        };
        let body = args
            .get("in")
            .ok_or_else(|| DocError::failed_to_parse("Missing 'in' parameter to $reduce"))?;
        for e in arr {
            let c = ctx
                .with("value", acc.clone().unwrap_or(Bson::Null))
                .with("this", e.clone());
            acc = body.eval(&c)?;
            // `$$value` feeds back into itself: each step could nest one level more.
            if let Some(v @ (Bson::Document(_) | Bson::Array(_))) = &acc {
                crate::limits::check_value_depth(v)?;
            }
        }
        Ok(acc)
    }
}

/// The most memory `$range` may build (mongod's internalQueryMaxRangeBytes).
pub(super) const MAX_RANGE_BYTES: usize = 100 << 20;

pub(super) fn require_array<'b>(
    op: &str,
    v: &'b Option<Bson>,
    code: i32,
) -> DocResult<&'b Vec<Bson>> {
    match v {
        Some(Bson::Array(a)) => Ok(a),
        other => Err(DocError::with_code(
            code,
            "Location",
            format!("{op}'s argument must be an array, but is {}", tn(other)),
        )),
    }
}

/// `$zip`: `{inputs, useLongestLength, defaults}`; null when any input is null or missing.
pub(super) fn zip(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let Some(Expr::Arr(inputs)) = args.get("inputs") else {
        return Err(DocError::with_code(
            34461,
            "Location34461",
            "inputs must be an array of expressions",
        ));
    };
    if inputs.is_empty() {
        return Err(DocError::with_code(
            34465,
            "Location34465",
            "$zip requires at least one input array",
        ));
    }
    let longest = match args.get("useLongestLength") {
        None => false,
        Some(Expr::Lit(Bson::Boolean(b))) => *b,
        Some(_) => {
            return Err(DocError::with_code(
                34463,
                "Location34463",
                "useLongestLength must be a bool",
            ))
        }
    };
    let defaults = match args.get("defaults") {
        None => None,
        Some(Expr::Arr(_)) if !longest => {
            return Err(DocError::with_code(
                34466,
                "Location34466",
                "cannot specify defaults unless useLongestLength is true",
            ));
        }
        Some(Expr::Arr(d)) if d.len() != inputs.len() => {
            return Err(DocError::with_code(
                34467,
                "Location34467",
                "defaults and inputs must have the same length",
            ))
        }
        Some(Expr::Arr(d)) => Some(d),
        Some(_) => {
            return Err(DocError::with_code(
                34462,
                "Location34462",
                "defaults must be an array of expressions",
            ))
        }
    };
    let mut arrays = Vec::with_capacity(inputs.len());
    for e in inputs {
        match e.eval(ctx)? {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(a)) => arrays.push(a),
            Some(other) => {
                return Err(DocError::with_code(
                    34468,
                    "Location34468",
                    format!(
                        "$zip found a non-array expression in input: {}",
                        shell_repr(&other)
                    ),
                ))
            }
        }
    }
    let fill: Vec<Bson> = match defaults {
        Some(d) => d
            .iter()
            .map(|e| Ok(e.eval(ctx)?.unwrap_or(Bson::Null)))
            .collect::<DocResult<_>>()?,
        None => vec![Bson::Null; arrays.len()],
    };
    let lens = arrays.iter().map(Vec::len);
    let n = if longest { lens.max() } else { lens.min() }.unwrap_or(0);
    let rows = (0..n)
        .map(|i| {
            Bson::Array(
                arrays
                    .iter()
                    .zip(&fill)
                    .map(|(a, f)| a.get(i).unwrap_or(f).clone())
                    .collect(),
            )
        })
        .collect();
    Ok(Some(Bson::Array(rows)))
}

/// The `sortBy` of `$sortArray`.
enum ArrayOrder {
    /// Whole values in BSON order, descending when true.
    Values { descending: bool },
    /// A sort document over the elements' fields (an element that is not a document sorts as
    /// one with no fields).
    Fields(crate::sort::SortSpec),
}

impl ArrayOrder {
    fn parse(sort_by: &Bson) -> DocResult<ArrayOrder> {
        if let Bson::Document(d) = sort_by {
            return Ok(ArrayOrder::Fields(crate::sort::SortSpec::parse(d)?));
        }
        match Num::of(sort_by).map(Num::as_f64) {
            Some(1.0) => Ok(ArrayOrder::Values { descending: false }),
            Some(-1.0) => Ok(ArrayOrder::Values { descending: true }),
            _ => Err(DocError::with_code(
                2942506,
                "Location2942506",
                "The $sort element value must be either 1 or -1",
            )),
        }
    }

    fn compare(&self, a: &Bson, b: &Bson) -> Ordering {
        match self {
            ArrayOrder::Values { descending: false } => compare_bson(a, b),
            ArrayOrder::Values { descending: true } => compare_bson(b, a),
            ArrayOrder::Fields(spec) => {
                let empty = Document::new();
                spec.compare(doc_or(a, &empty), doc_or(b, &empty))
            }
        }
    }
}

/// `v` if it is a document, `other` otherwise.
fn doc_or<'a>(v: &'a Bson, other: &'a Document) -> &'a Document {
    match v {
        Bson::Document(d) => d,
        _ => other,
    }
}

/// `$sortArray`: `{input, sortBy}`; `sortBy` is 1 or -1 (whole values in BSON order) or a sort
/// document over the elements' fields.
pub(super) fn sort_array(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let order = ArrayOrder::parse(&args.eval("sortBy", ctx)?.unwrap_or(Bson::Null))?;
    let mut arr = match args.eval("input", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(a)) => a,
        Some(other) => {
            return Err(DocError::with_code(
                2942504,
                "Location2942504",
                format!(
                    "The input argument to $sortArray must be an array, but was of type: {}",
                    type_name(&other)
                ),
            ))
        }
    };
    arr.sort_by(|a, b| order.compare(a, b));
    Ok(Some(Bson::Array(arr)))
}

/// The `n` of `$firstN` … `$minN` (expressions and `$group` accumulators): a positive integer
/// (5787902, 5787908).
pub fn n_of(v: Option<Bson>) -> DocResult<usize> {
    let v = v.unwrap_or(Bson::Null);
    let n = Num::of(&v).and_then(Num::as_i64_exact).ok_or_else(|| {
        DocError::with_code(
            5787902,
            "Location5787902",
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shell_repr(&v)
            ),
        )
    })?;
    if n <= 0 {
        return Err(DocError::with_code(
            5787908,
            "Location5787908",
            format!("'n' must be greater than 0, found {n}"),
        ));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// `$firstN`, `$lastN`, `$maxN`, `$minN` on an array: `{input, n}`. `$maxN`/`$minN` skip null
/// and missing elements and answer largest (smallest) first.
pub(super) fn n_elements(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let n = n_of(args.eval("n", ctx)?)?;
    let arr = match args.eval("input", ctx)? {
        Some(Bson::Array(a)) => a,
        _ => {
            return Err(DocError::with_code(
                5788200,
                "Location5788200",
                "Input must be an array",
            ))
        }
    };
    let out: Vec<Bson> = match op {
        Op::FirstN => arr.into_iter().take(n).collect(),
        Op::LastN => {
            let skip = arr.len().saturating_sub(n);
            arr.into_iter().skip(skip).collect()
        }
        _ => {
            let mut vals: Vec<Bson> = arr
                .into_iter()
                .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                .collect();
            if op == Op::MaxN {
                vals.sort_by(|a, b| compare_bson(b, a));
            } else {
                vals.sort_by(compare_bson);
            }
            vals.truncate(n);
            vals
        }
    };
    Ok(Some(Bson::Array(out)))
}

/// `$rand`: a double in [0, 1).
pub(super) fn rand(_op: Op, _args: &NamedArgs, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(Some(Bson::Double(rand::random::<f64>())))
}
