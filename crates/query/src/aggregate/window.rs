//! `$setWindowFields`: per partition (`partitionBy`), in `sortBy` order, each output field is a
//! window function of the documents in a window around the current one (`documents: [lo, hi]`
//! positions, or `range: [lo, hi]` of the sort value, in `unit`s for dates).

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::common::{check_output_name, stage_err, DocIter, Memory};
use super::fields::add_field;
use super::group::{accumulate_windows, parse_window_acc, Acc};
use super::source::Env;
use crate::compare::{compare_bson, type_name, Num};
use crate::error::{DocError, DocResult};
use crate::expr::{eval_doc_path, parse_expr, Ctx, Expr};
use crate::path::split_path;
use crate::sort::SortSpec;

/// A window bound: relative to the current document (positions, or sort values).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bound {
    Unbounded,
    Current,
    Offset(f64),
}

/// A date unit: a fixed length in milliseconds, or a number of calendar months.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Fixed(f64),
    Months(i64),
}

#[derive(Clone, Copy, Debug)]
enum Window {
    Documents(Bound, Bound),
    /// Bounds on the sort value; with a unit over dates.
    Range(Bound, Bound, Option<Unit>),
}

#[derive(Clone, Debug)]
enum Func {
    Acc(Acc, Expr),
    Covariance {
        samp: bool,
        x: Expr,
        y: Expr,
    },
    Rank,
    DenseRank,
    DocumentNumber,
    Shift {
        output: Expr,
        by: i64,
        default: Bson,
    },
    Derivative {
        input: Expr,
        unit: Option<f64>,
    },
    Integral {
        input: Expr,
        unit: Option<f64>,
    },
    ExpMovingAvg {
        input: Expr,
        alpha: f64,
    },
    Locf(Expr),
    LinearFill(Expr),
}

#[derive(Clone, Debug)]
struct Output {
    path: Vec<String>,
    func: Func,
    window: Option<Window>,
}

#[derive(Clone, Debug)]
pub(super) struct SetWindowFields {
    partition_by: Option<Expr>,
    sort_by: Option<SortSpec>,
    outputs: Vec<Output>,
}

fn fail(msg: impl Into<String>) -> DocError {
    DocError::failed_to_parse(msg)
}

fn parse_unit(v: &Bson) -> DocResult<Unit> {
    Ok(match v.as_str() {
        Some("week") => Unit::Fixed(604_800_000.0),
        Some("day") => Unit::Fixed(86_400_000.0),
        Some("hour") => Unit::Fixed(3_600_000.0),
        Some("minute") => Unit::Fixed(60_000.0),
        Some("second") => Unit::Fixed(1_000.0),
        Some("millisecond") => Unit::Fixed(1.0),
        Some("month") => Unit::Months(1),
        Some("quarter") => Unit::Months(3),
        Some("year") => Unit::Months(12),
        _ => {
            return Err(fail(format!(
                "unknown time unit value: {}",
                crate::compare::shell_repr(v)
            )))
        }
    })
}

/// `$derivative` and `$integral` divide by a unit's length, so they take fixed units only.
fn fixed_unit_ms(v: &Bson) -> DocResult<f64> {
    match parse_unit(v)? {
        Unit::Fixed(ms) => Ok(ms),
        Unit::Months(_) => Err(fail(format!(
            "unit must be 'week' or smaller, got {}",
            crate::compare::shell_repr(v)
        ))),
    }
}

/// `t` (milliseconds since the epoch) moved by `n` units; calendar months keep the day of the
/// month, clamped to the target month's length (as `$dateAdd`).
fn shift_time(t: f64, n: f64, unit: Unit) -> f64 {
    match unit {
        Unit::Fixed(ms) => t + n * ms,
        Unit::Months(per) => {
            const DAY: i64 = 86_400_000;
            let t = t as i64;
            let (days, in_day) = (t.div_euclid(DAY), t.rem_euclid(DAY));
            let (y, m, d) = civil_from_days(days);
            let months = y * 12 + (m as i64 - 1) + n as i64 * per;
            let (ny, nm) = (months.div_euclid(12), months.rem_euclid(12) as u32 + 1);
            let nd = d.min(days_in_month(ny, nm));
            (days_from_civil(ny, nm, nd) * DAY + in_day) as f64
        }
    }
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Howard Hinnant's days_from_civil: days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn parse_bound(v: &Bson, documents: bool) -> DocResult<Bound> {
    match v {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        other => match Num::of(other) {
            Some(n) if !documents || n.as_i64_exact().is_some() => Ok(Bound::Offset(n.as_f64())),
            _ => Err(stage_err(
                5339900,
                format!(
                    "Window bounds must be 'unbounded', 'current', or a {}: {}",
                    if documents { "integer" } else { "number" },
                    crate::compare::shell_repr(other)
                ),
            )),
        },
    }
}

fn parse_window(w: &Bson) -> DocResult<Window> {
    let Bson::Document(d) = w else {
        return Err(fail("'window' field must be an object"));
    };
    let pair = |k: &str, v: &Bson| -> DocResult<(Bound, Bound)> {
        let Bson::Array(a) = v else {
            return Err(fail(format!(
                "Window bounds must be a 2-element array: {k}"
            )));
        };
        if a.len() != 2 {
            return Err(fail(format!(
                "Window bounds must be a 2-element array: {k}"
            )));
        }
        let (lo, hi) = (
            parse_bound(&a[0], k == "documents")?,
            parse_bound(&a[1], k == "documents")?,
        );
        let offset = |b: Bound| match b {
            Bound::Current => Some(0.0),
            Bound::Offset(x) => Some(x),
            Bound::Unbounded => None,
        };
        if let (Some(l), Some(h)) = (offset(lo), offset(hi)) {
            if l > h {
                return Err(stage_err(
                    5339900,
                    "Lower bound must not exceed upper bound",
                ));
            }
        }
        Ok((lo, hi))
    };
    let unit = match d.get("unit") {
        None => None,
        Some(u) => Some(parse_unit(u)?),
    };
    match (d.get("documents"), d.get("range")) {
        (Some(v), None) if unit.is_none() => {
            let (lo, hi) = pair("documents", v)?;
            Ok(Window::Documents(lo, hi))
        }
        (None, Some(v)) => {
            let (lo, hi) = pair("range", v)?;
            Ok(Window::Range(lo, hi, unit))
        }
        (Some(_), None) => Err(fail(
            "Window bounds can only specify 'unit' with range-based bounds.",
        )),
        _ => Err(fail(
            "'window' field must specify exactly one of 'documents' or 'range'",
        )),
    }
}

/// `{input, unit}` of `$derivative` and `$integral`.
fn input_and_unit(op: &str, arg: &Bson) -> DocResult<(Expr, Option<f64>)> {
    let Bson::Document(d) = arg else {
        return Err(fail(format!("{op} expects an object argument")));
    };
    let mut input = None;
    let mut unit = None;
    for (k, v) in d {
        match k.as_str() {
            "input" => input = Some(parse_expr(v)?),
            "unit" => unit = Some(fixed_unit_ms(v)?),
            other => return Err(fail(format!("{op} got unexpected argument: {other}"))),
        }
    }
    Ok((
        input.ok_or_else(|| fail(format!("{op} requires an 'input' expression")))?,
        unit,
    ))
}

/// `$shift`: `{output, by, default}`.
fn parse_shift(arg: &Bson) -> DocResult<Func> {
    let Bson::Document(d) = arg else {
        return Err(fail("Argument to $shift must be an object"));
    };
    let (mut output, mut by, mut default) = (None, None, Bson::Null);
    for (k, v) in d {
        match k.as_str() {
            "output" => output = Some(parse_expr(v)?),
            "by" => {
                by = Some(Num::of(v).and_then(Num::as_i64_exact).ok_or_else(|| {
                    fail(
                        "'$shift:by' field must be an integer, but found ".to_string()
                            + &crate::compare::shell_repr(v),
                    )
                })?)
            }
            "default" => {
                default = match parse_expr(v)? {
                    Expr::Lit(b) => b,
                    _ => {
                        return Err(fail(
                            "'$shift:default' expression must yield a constant value.",
                        ))
                    }
                }
            }
            other => return Err(fail(format!("Unknown argument in $shift: {other}"))),
        }
    }
    let (Some(output), Some(by)) = (output, by) else {
        return Err(fail(
            "$shift requires an 'output' expression and a 'by' integer",
        ));
    };
    Ok(Func::Shift {
        output,
        by,
        default,
    })
}

/// `$expMovingAvg`: `{input, N}` or `{input, alpha}`.
fn parse_exp_moving_avg(arg: &Bson) -> DocResult<Func> {
    let Bson::Document(d) = arg else {
        return Err(fail(
            "$expMovingAvg must have exactly one argument that is an object",
        ));
    };
    let (mut input, mut alpha) = (None, None);
    for (k, v) in d {
        match k.as_str() {
            "input" => input = Some(parse_expr(v)?),
            "N" => {
                let n = Num::of(v)
                    .and_then(Num::as_i64_exact)
                    .filter(|n| *n > 0)
                    .ok_or_else(|| fail("'N' field must be an integer greater than zero"))?;
                if alpha.is_some() {
                    return Err(fail("$expMovingAvg takes either 'N' or 'alpha', not both"));
                }
                alpha = Some(2.0 / (n as f64 + 1.0));
            }
            "alpha" => {
                let a = Num::of(v)
                    .map(Num::as_f64)
                    .filter(|a| *a > 0.0 && *a < 1.0)
                    .ok_or_else(|| fail("'alpha' must be between 0 and 1 (exclusive)"))?;
                if alpha.is_some() {
                    return Err(fail("$expMovingAvg takes either 'N' or 'alpha', not both"));
                }
                alpha = Some(a);
            }
            other => {
                return Err(fail(format!(
                    "Got unrecognized field in $expMovingAvg: {other}"
                )))
            }
        }
    }
    let (Some(input), Some(alpha)) = (input, alpha) else {
        return Err(fail(
            "$expMovingAvg requires 'input' and one of 'N' or 'alpha'",
        ));
    };
    Ok(Func::ExpMovingAvg { input, alpha })
}

impl SetWindowFields {
    pub(super) fn parse(arg: &Bson) -> DocResult<SetWindowFields> {
        let Bson::Document(d) = arg else {
            return Err(fail(
                "the $setWindowFields stage specification must be an object",
            ));
        };
        let mut partition_by = None;
        let mut sort_by: Option<SortSpec> = None;
        let mut output = None;
        for (k, v) in d {
            match k.as_str() {
                "partitionBy" => {
                    if let Bson::Array(_) = v {
                        return Err(DocError::type_mismatch(
                            "An expression used to partition cannot evaluate to value of type array",
                        ));
                    }
                    partition_by = Some(parse_expr(v)?)
                }
                "sortBy" => {
                    let Bson::Document(s) = v else {
                        return Err(DocError::type_mismatch(format!(
                            "BSON field '$setWindowFields.sortBy' is the wrong type '{}', expected type 'object'",
                            type_name(v)
                        )));
                    };
                    sort_by = Some(SortSpec::parse(s)?);
                }
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(DocError::type_mismatch(format!(
                            "BSON field '$setWindowFields.output' is the wrong type '{}', expected type 'object'",
                            type_name(v)
                        )));
                    };
                    output = Some(o.clone());
                }
                other => {
                    return Err(stage_err(
                        40415,
                        format!("BSON field '$setWindowFields.{other}' is an unknown field."),
                    ))
                }
            }
        }
        let output = output.ok_or_else(|| {
            stage_err(
                40414,
                "BSON field '$setWindowFields.output' is missing but a required field",
            )
        })?;
        let single_sort = sort_by.as_ref().is_some_and(|s| s.fields.len() == 1);
        let mut outputs = Vec::with_capacity(output.len());
        for (name, spec) in &output {
            outputs.push(Self::parse_output(
                name,
                spec,
                sort_by.is_some(),
                single_sort,
            )?);
        }
        Ok(SetWindowFields {
            partition_by,
            sort_by,
            outputs,
        })
    }

    /// One `output` field: its path, its window function and its window, checked against the
    /// stage's sort (`sorted`, on one field: `single_sort`).
    fn parse_output(name: &str, spec: &Bson, sorted: bool, single_sort: bool) -> DocResult<Output> {
        for part in name.split('.') {
            check_output_name(part)?;
        }
        let Bson::Document(spec) = spec else {
            return Err(fail(format!("The field '{name}' must be an object")));
        };
        let window = spec.get("window").map(parse_window).transpose()?;
        let mut funcs = spec.iter().filter(|(k, _)| *k != "window");
        let (Some((fname, farg)), None) = (funcs.next(), funcs.next()) else {
            return Err(fail(format!(
                "The field '{name}' must specify exactly one window function"
            )));
        };
        let func = Self::parse_func(fname, farg)?;
        Self::check_func(fname, &func, window.as_ref(), sorted, single_sort)?;
        if let Some(w) = &window {
            match w {
                Window::Documents(..)
                    if !sorted
                        && !matches!(w, Window::Documents(Bound::Unbounded, Bound::Unbounded)) =>
                {
                    return Err(stage_err(5339901, "Document-based bounds require a sortBy"))
                }
                Window::Range(..) if !single_sort => {
                    return Err(stage_err(
                        5339902,
                        "Range-based window require sortBy a single field",
                    ))
                }
                _ => {}
            }
        }
        Ok(Output {
            path: split_path(name)?,
            func,
            window,
        })
    }

    fn parse_func(name: &str, arg: &Bson) -> DocResult<Func> {
        let empty_obj = |op: &str| -> DocResult<()> {
            match arg {
                Bson::Document(d) if d.is_empty() => Ok(()),
                _ => Err(stage_err(
                    5371603,
                    format!("{op} must be specified with '{{}}' as the value"),
                )),
            }
        };
        Ok(match name {
            "$rank" => {
                empty_obj(name)?;
                Func::Rank
            }
            "$denseRank" => {
                empty_obj(name)?;
                Func::DenseRank
            }
            "$documentNumber" => {
                empty_obj(name)?;
                Func::DocumentNumber
            }
            "$covariancePop" | "$covarianceSamp" => {
                let Bson::Array(a) = arg else {
                    return Err(fail(format!("{name} requires an array of two expressions")));
                };
                if a.len() != 2 {
                    return Err(fail(format!("{name} requires an array of two expressions")));
                }
                Func::Covariance {
                    samp: name == "$covarianceSamp",
                    x: parse_expr(&a[0])?,
                    y: parse_expr(&a[1])?,
                }
            }
            "$shift" => parse_shift(arg)?,
            "$derivative" => {
                let (input, unit) = input_and_unit(name, arg)?;
                Func::Derivative { input, unit }
            }
            "$integral" => {
                let (input, unit) = input_and_unit(name, arg)?;
                Func::Integral { input, unit }
            }
            "$expMovingAvg" => parse_exp_moving_avg(arg)?,
            "$locf" => Func::Locf(parse_expr(arg)?),
            "$linearFill" => Func::LinearFill(parse_expr(arg)?),
            other => match parse_window_acc(other, arg)? {
                Some((acc, e)) => Func::Acc(acc, e),
                None => return Err(fail(format!("Unrecognized window function, {other}"))),
            },
        })
    }

    /// mongod's rules for which functions take a window and which need a sort.
    fn check_func(
        name: &str,
        f: &Func,
        window: Option<&Window>,
        sorted: bool,
        single_sort: bool,
    ) -> DocResult<()> {
        match f {
            Func::Rank | Func::DenseRank | Func::DocumentNumber => {
                if window.is_some() {
                    return Err(stage_err(
                        5371601,
                        "Rank style window functions take no other arguments",
                    ));
                }
                if !single_sort {
                    return Err(stage_err(5371602, format!("{name} must be specified with a top level sortBy expression with exactly one element")));
                }
            }
            Func::Shift { .. }
            | Func::ExpMovingAvg { .. }
            | Func::Locf(_)
            | Func::LinearFill(_) => {
                if window.is_some() {
                    return Err(fail(format!("{name} does not accept a 'window' field")));
                }
                if !sorted {
                    return Err(fail(format!("{name} requires a sortBy")));
                }
                if matches!(f, Func::LinearFill(_)) && !single_sort {
                    return Err(fail("$linearFill requires a sortBy with exactly one field"));
                }
            }
            Func::Derivative { .. } | Func::Integral { .. } => {
                if !single_sort {
                    return Err(fail(format!(
                        "{name} requires a sortBy with exactly one field"
                    )));
                }
                if matches!(f, Func::Derivative { .. }) && window.is_none() {
                    return Err(fail("$derivative requires explicit window bounds"));
                }
            }
            Func::Acc(..) | Func::Covariance { .. } => {}
        }
        Ok(())
    }

    pub(super) fn run(self, input: DocIter, env: Env) -> DocResult<DocIter> {
        let mut keyed: Vec<(Bson, Document)> = Vec::new();
        let mut memory = Memory::new("$setWindowFields");
        for d in input {
            let d = d?;
            memory.charge(&d)?;
            let key = match &self.partition_by {
                None => Bson::Null,
                Some(e) => match e.eval(&Ctx::scoped(&d, env.scope))? {
                    Some(Bson::Array(_)) => return Err(DocError::type_mismatch(
                        "An expression used to partition cannot evaluate to value of type array",
                    )),
                    other => other.unwrap_or(Bson::Null),
                },
            };
            keyed.push((key, d));
        }
        // Partitions in partition-key order (mongod sorts on it), each in sortBy order; both
        // sorts are stable.
        if self.partition_by.is_some() {
            keyed.sort_by(|a, b| compare_bson(&a.0, &b.0));
        }
        let mut out = Vec::with_capacity(keyed.len());
        let mut rest = keyed.into_iter().peekable();
        while let Some((key, first)) = rest.next() {
            let mut part = vec![first];
            while let Some((k, _)) = rest.peek() {
                if compare_bson(k, &key) != Ordering::Equal {
                    break;
                }
                part.push(rest.next().expect("peeked").1);
            }
            if let Some(s) = &self.sort_by {
                s.sort(&mut part);
            }
            out.extend(self.fill_partition(part, env)?);
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }

    fn fill_partition(&self, docs: Vec<Document>, env: Env) -> DocResult<Vec<Document>> {
        let mut columns = Vec::with_capacity(self.outputs.len());
        for o in &self.outputs {
            columns.push(self.compute(o, &docs, env)?);
        }
        let mut out = docs;
        for (o, col) in self.outputs.iter().zip(columns) {
            for (d, v) in out.iter_mut().zip(col) {
                add_field(d, &o.path, v)?;
            }
        }
        Ok(out)
    }

    /// The single sort field's values as numbers (dates as milliseconds, in `unit`s when
    /// given), for range windows and the calculus functions.
    fn sort_numbers(&self, docs: &[Document], unit: Option<f64>, who: &str) -> DocResult<Vec<f64>> {
        let spec = self.sort_by.as_ref().expect("checked at parse");
        let (path, _) = &spec.fields[0];
        let parts = split_path(path)?;
        docs.iter()
            .map(|d| match (eval_doc_path(d, &parts), unit) {
                (Some(Bson::DateTime(t)), Some(u)) => Ok(t.timestamp_millis() as f64 / u),
                (Some(v), None) if Num::of(&v).is_some() => {
                    Ok(Num::of(&v).expect("number").as_f64())
                }
                (v, Some(_)) => Err(stage_err(
                    5429513,
                    format!(
                        "Invalid range: Expected the sortBy field to be a Date, but it was {}",
                        v.as_ref().map(type_name).unwrap_or("missing")
                    ),
                )),
                (v, None) => {
                    Err(stage_err(
                        5429413,
                        format!(
                    "Invalid range: Expected the sortBy field to be a number, but it was {}{}",
                    v.as_ref().map(type_name).unwrap_or("missing"),
                    if who.is_empty() { String::new() } else { format!(" ({who})") }),
                    ))
                }
            })
            .collect()
    }

    /// The window of each document, as an index range into the partition.
    fn windows(
        &self,
        w: Option<&Window>,
        docs: &[Document],
    ) -> DocResult<Vec<std::ops::Range<usize>>> {
        let n = docs.len();
        match w {
            None | Some(Window::Documents(Bound::Unbounded, Bound::Unbounded)) => Ok(vec![0..n; n]),
            Some(Window::Documents(lo, hi)) => Ok((0..n)
                .map(|i| {
                    let at = |b: Bound, unbounded: i64| match b {
                        Bound::Unbounded => unbounded,
                        Bound::Current => i as i64,
                        Bound::Offset(x) => i as i64 + x as i64,
                    };
                    let a = at(*lo, 0).clamp(0, n as i64) as usize;
                    let b = (at(*hi, n as i64 - 1) + 1).clamp(0, n as i64) as usize;
                    a..b.max(a)
                })
                .collect()),
            Some(Window::Range(lo, hi, unit)) => {
                // Dates in milliseconds when there is a unit; bounds move them by units.
                let xs = self.sort_numbers(docs, unit.map(|_| 1.0), "")?;
                let unit = unit.unwrap_or(Unit::Fixed(1.0));
                let desc = self.sort_by.as_ref().is_some_and(|s| s.fields[0].1 < 0);
                Ok((0..n)
                    .map(|i| {
                        // Offsets go along the sort order: on a descending sort, "before" is
                        // larger values.
                        let at = |b: Bound| match b {
                            Bound::Offset(x) => shift_time(xs[i], if desc { -x } else { x }, unit),
                            _ => xs[i],
                        };
                        let (lo_v, hi_v) = if desc {
                            (at(*hi), at(*lo))
                        } else {
                            (at(*lo), at(*hi))
                        };
                        let (lo_open, hi_open) = if desc {
                            (*hi == Bound::Unbounded, *lo == Bound::Unbounded)
                        } else {
                            (*lo == Bound::Unbounded, *hi == Bound::Unbounded)
                        };
                        // The sort values are monotonic along the partition.
                        let (a, b) = if desc {
                            (
                                if hi_open {
                                    0
                                } else {
                                    xs.partition_point(|x| *x > hi_v)
                                },
                                if lo_open {
                                    n
                                } else {
                                    xs.partition_point(|x| *x >= lo_v)
                                },
                            )
                        } else {
                            (
                                if lo_open {
                                    0
                                } else {
                                    xs.partition_point(|x| *x < lo_v)
                                },
                                if hi_open {
                                    n
                                } else {
                                    xs.partition_point(|x| *x <= hi_v)
                                },
                            )
                        };
                        a..b.max(a)
                    })
                    .collect())
            }
        }
    }

    /// `$rank` (`dense`: `$denseRank`): each document's rank in the sort order, ties equal.
    fn ranks(&self, docs: &[Document], dense: bool) -> Vec<Bson> {
        let n = docs.len();
        let spec = self.sort_by.as_ref().expect("checked at parse");
        let keys: Vec<Vec<Bson>> = docs.iter().map(|d| spec.keys(d)).collect();
        let mut out = Vec::with_capacity(n);
        let mut rank = 0usize;
        for i in 0..n {
            if i == 0 || spec.compare_keys(&keys[i - 1], &keys[i]) != Ordering::Equal {
                rank = if dense { rank + 1 } else { i + 1 };
            }
            out.push(int(rank as i64));
        }
        out
    }

    /// `$linearFill`: each null or missing value interpolated between the known values around
    /// it, along the sort field.
    fn linear_fill(&self, docs: &[Document], vals: &[Option<Bson>]) -> DocResult<Vec<Bson>> {
        let xs = self.sort_numbers(docs, date_sort(docs, self).then_some(1.0), "$linearFill")?;
        let known: Vec<(usize, f64)> = vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| match v {
                Some(v) if !is_nullish_value(v) => number(v).map(|y| Ok((i, y))).or_else(|| {
                    Some(Err(fail(format!(
                        "$linearFill only supports numeric types, found {}",
                        type_name(v)
                    ))))
                }),
                _ => None,
            })
            .collect::<DocResult<_>>()?;
        Ok((0..docs.len())
            .map(|i| {
                if let Some(v) = vals[i].as_ref().filter(|v| !is_nullish_value(v)) {
                    return v.clone();
                }
                let before = known.iter().rev().find(|(k, _)| *k < i);
                let after = known.iter().find(|(k, _)| *k > i);
                match (before, after) {
                    (Some(&(a, ya)), Some(&(b, yb))) if xs[b] != xs[a] => {
                        Bson::Double(ya + (xs[i] - xs[a]) * (yb - ya) / (xs[b] - xs[a]))
                    }
                    _ => Bson::Null,
                }
            })
            .collect())
    }

    fn compute(&self, o: &Output, docs: &[Document], env: Env) -> DocResult<Vec<Bson>> {
        let (interrupt, scope) = (env.interrupt, env.scope);
        let n = docs.len();
        let eval_all = |e: &Expr| -> DocResult<Vec<Option<Bson>>> {
            docs.iter()
                .map(|d| e.eval(&Ctx::scoped(d, scope)))
                .collect()
        };
        Ok(match &o.func {
            Func::DocumentNumber => (1..=n as i64).map(int).collect(),
            Func::Rank => self.ranks(docs, false),
            Func::DenseRank => self.ranks(docs, true),
            Func::Acc(acc, e) => {
                let windows = self.windows(o.window.as_ref(), docs)?;
                accumulate_windows(*acc, &eval_all(e)?, windows, interrupt)?
            }
            Func::Covariance { samp, x, y } => {
                let (xs, ys) = (eval_all(x)?, eval_all(y)?);
                let mut out = Vec::with_capacity(n);
                for w in self.windows(o.window.as_ref(), docs)? {
                    interrupt.check()?;
                    let pairs: Vec<(f64, f64)> = w
                        .filter_map(|j| Some((number(xs[j].as_ref()?)?, number(ys[j].as_ref()?)?)))
                        .collect();
                    out.push(covariance(&pairs, *samp));
                }
                out
            }
            Func::Shift {
                output,
                by,
                default,
            } => (0..n as i64)
                .map(|i| {
                    let j = i + by;
                    if j < 0 || j >= n as i64 {
                        return Ok(default.clone());
                    }
                    Ok(output
                        .eval(&Ctx::scoped(&docs[j as usize], scope))?
                        .unwrap_or(Bson::Null))
                })
                .collect::<DocResult<_>>()?,
            Func::Derivative { input, unit } | Func::Integral { input, unit } => {
                let derivative = matches!(o.func, Func::Derivative { .. });
                let who = if derivative {
                    "$derivative"
                } else {
                    "$integral"
                };
                self.check_calculus_sort(docs, *unit, derivative)?;
                let xs = self.sort_numbers(docs, *unit, who)?;
                let ys: Vec<Option<f64>> = eval_all(input)?
                    .iter()
                    .map(|v| v.as_ref().and_then(number))
                    .collect();
                let mut out = Vec::with_capacity(n);
                for w in self.windows(o.window.as_ref(), docs)? {
                    interrupt.check()?;
                    let pts: Vec<(f64, f64)> = w.filter_map(|j| Some((xs[j], ys[j]?))).collect();
                    out.push(if derivative {
                        derivative_of(&pts)
                    } else {
                        integral_of(&pts)
                    });
                }
                out
            }
            Func::ExpMovingAvg { input, alpha } => exp_moving_avg(eval_all(input)?, *alpha),
            Func::Locf(e) => locf(eval_all(e)?),
            Func::LinearFill(e) => self.linear_fill(docs, &eval_all(e)?)?,
        })
    }

    /// mongod: with a `unit` the sort field must hold dates (5624900/5423901), without one it
    /// must not (5624901/5423902).
    fn check_calculus_sort(
        &self,
        docs: &[Document],
        unit: Option<f64>,
        derivative: bool,
    ) -> DocResult<()> {
        let dates = date_sort(docs, self);
        match (unit.is_some(), dates, derivative) {
            (true, false, true) => Err(stage_err(
                5624900,
                "$derivative with unit expects the sortBy field to be a Date",
            )),
            (false, true, true) => Err(stage_err(
                5624901,
                "$derivative where the sortBy is a Date requires an 'unit'",
            )),
            (true, false, false) => Err(stage_err(
                5423901,
                "$integral with unit expects the sortBy field to be a Date",
            )),
            (false, true, false) => Err(stage_err(
                5423902,
                "$integral where the sortBy is a Date requires an 'unit'",
            )),
            _ => Ok(()),
        }
    }
}

/// Whether the partition's single sort field holds dates (judged by its first document).
/// `$expMovingAvg`: each value weighted by `alpha` against the average before it.
fn exp_moving_avg(vals: Vec<Option<Bson>>, alpha: f64) -> Vec<Bson> {
    let mut prev: Option<f64> = None;
    vals.into_iter()
        .map(|v| match v.as_ref().and_then(Num::of) {
            Some(x) => {
                let next = match prev {
                    None => x.as_f64(),
                    Some(p) => x.as_f64() * alpha + p * (1.0 - alpha),
                };
                prev = Some(next);
                if matches!(x, Num::Dec(_)) {
                    Num::Dec(next).to_bson()
                } else {
                    Bson::Double(next)
                }
            }
            None => Bson::Null,
        })
        .collect()
}

/// `$locf`: each null or missing value replaced by the last value before it.
fn locf(vals: Vec<Option<Bson>>) -> Vec<Bson> {
    let mut last = Bson::Null;
    vals.into_iter()
        .map(|v| {
            if let Some(v) = v.filter(|v| !is_nullish_value(v)) {
                last = v;
            }
            last.clone()
        })
        .collect()
}

fn date_sort(docs: &[Document], s: &SetWindowFields) -> bool {
    let Some(spec) = &s.sort_by else { return false };
    let Ok(parts) = split_path(&spec.fields[0].0) else {
        return false;
    };
    docs.first()
        .and_then(|d| eval_doc_path(d, &parts))
        .is_some_and(|v| matches!(v, Bson::DateTime(_)))
}

fn is_nullish_value(v: &Bson) -> bool {
    matches!(v, Bson::Null | Bson::Undefined)
}

fn int(n: i64) -> Bson {
    match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(n),
    }
}

/// A number, or a date as its milliseconds (covariance and the calculus functions take both).
fn number(v: &Bson) -> Option<f64> {
    match v {
        Bson::DateTime(t) => Some(t.timestamp_millis() as f64),
        other => Num::of(other).map(Num::as_f64),
    }
}

fn covariance(pairs: &[(f64, f64)], samp: bool) -> Bson {
    let n = pairs.len();
    if n == 0 || (samp && n < 2) {
        return Bson::Null;
    }
    let mx = pairs.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let my = pairs.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let c: f64 = pairs.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    Bson::Double(c / if samp { (n - 1) as f64 } else { n as f64 })
}

/// (last − first) of y over x across the window; null for fewer than two points.
fn derivative_of(pts: &[(f64, f64)]) -> Bson {
    match (pts.first(), pts.last()) {
        (Some(a), Some(b)) if pts.len() >= 2 && b.0 != a.0 => {
            Bson::Double((b.1 - a.1) / (b.0 - a.0))
        }
        _ => Bson::Null,
    }
}

/// The trapezoidal rule over the window's points; null for an empty window.
fn integral_of(pts: &[(f64, f64)]) -> Bson {
    if pts.is_empty() {
        return Bson::Null;
    }
    Bson::Double(
        pts.windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
            .sum(),
    )
}
