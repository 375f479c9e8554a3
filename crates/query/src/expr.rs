//! Aggregation expressions: field paths (`"$a.b"`), variables (`"$$ROOT"`), literals, object and
//! array expressions, and the common operators.
//!
//! Values are `Option<Bson>`: `None` is "missing", which differs from null (it is dropped from
//! objects, and `{$eq: ["$missing", null]}` is false).

use std::cmp::Ordering;

use bson::{Bson, DateTime, Document};

use crate::compare::{bson_equal, compare_bson, shell_repr, type_name, Num};
use crate::error::{DocError, DocResult};

/// A parsed aggregation expression.
#[derive(Clone, Debug)]
pub enum Expr {
    Lit(Bson),
    /// A field path relative to `$$CURRENT`.
    Field(Vec<String>),
    /// `$$name.path…`
    Var(String, Vec<String>),
    Obj(Vec<(String, Expr)>),
    Arr(Vec<Expr>),
    Op(&'static str, Vec<Expr>),
    /// Operators with named arguments (`$cond` object form is normalised to `Op`).
    Named(&'static str, Vec<(String, Expr)>),
}

/// Variables in scope while evaluating.
#[derive(Clone, Debug)]
pub struct Ctx<'a> {
    pub root: &'a Document,
    pub current: &'a Document,
    pub vars: Vec<(String, Bson)>,
}

impl<'a> Ctx<'a> {
    pub fn new(doc: &'a Document) -> Ctx<'a> {
        Ctx {
            root: doc,
            current: doc,
            vars: Vec::new(),
        }
    }

    fn with(&self, name: &str, v: Bson) -> Ctx<'a> {
        let mut c = self.clone();
        c.vars.push((name.to_string(), v));
        c
    }
}

const OPS: &[&str] = &[
    "$add",
    "$subtract",
    "$multiply",
    "$divide",
    "$mod",
    "$abs",
    "$ceil",
    "$floor",
    "$sqrt",
    "$pow",
    "$exp",
    "$ln",
    "$log10",
    "$trunc",
    "$round",
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$cmp",
    "$and",
    "$or",
    "$not",
    "$cond",
    "$ifNull",
    "$concat",
    "$toUpper",
    "$toLower",
    "$substr",
    "$substrBytes",
    "$substrCP",
    "$strLenBytes",
    "$strLenCP",
    "$split",
    "$strcasecmp",
    "$size",
    "$arrayElemAt",
    "$first",
    "$last",
    "$in",
    "$isArray",
    "$concatArrays",
    "$slice",
    "$reverseArray",
    "$range",
    "$indexOfArray",
    "$mergeObjects",
    "$objectToArray",
    "$arrayToObject",
    "$sum",
    "$avg",
    "$min",
    "$max",
    "$type",
    "$toString",
    "$toInt",
    "$toLong",
    "$toDouble",
    "$toDecimal",
    "$toBool",
    "$toObjectId",
    "$toDate",
    "$isNumber",
    "$year",
    "$month",
    "$dayOfMonth",
    "$hour",
    "$minute",
    "$second",
    "$millisecond",
    "$dayOfWeek",
    "$dayOfYear",
    "$setUnion",
    "$setIntersection",
    "$setDifference",
    "$setEquals",
    "$setIsSubset",
    "$allElementsTrue",
    "$anyElementTrue",
];

const NAMED: &[&str] = &[
    "$switch",
    "$let",
    "$filter",
    "$map",
    "$reduce",
    "$trim",
    "$ltrim",
    "$rtrim",
    "$regexMatch",
];

fn arity(name: &str) -> Option<(usize, usize)> {
    Some(match name {
        "$subtract" | "$divide" | "$mod" | "$pow" | "$cmp" | "$eq" | "$ne" | "$gt" | "$gte"
        | "$lt" | "$lte" | "$arrayElemAt" | "$in" | "$split" | "$strcasecmp" | "$setDifference"
        | "$setIsSubset" => (2, 2),
        "$cond" | "$substr" | "$substrBytes" | "$substrCP" => (3, 3),
        "$abs" | "$ceil" | "$floor" | "$sqrt" | "$exp" | "$ln" | "$log10" | "$not" | "$toUpper"
        | "$toLower" | "$strLenBytes" | "$strLenCP" | "$size" | "$first" | "$last" | "$isArray"
        | "$reverseArray" | "$objectToArray" | "$arrayToObject" | "$type" | "$toString"
        | "$toInt" | "$toLong" | "$toDouble" | "$toDecimal" | "$toBool" | "$toObjectId"
        | "$toDate" | "$isNumber" | "$year" | "$month" | "$dayOfMonth" | "$hour" | "$minute"
        | "$second" | "$millisecond" | "$dayOfWeek" | "$dayOfYear" | "$allElementsTrue"
        | "$anyElementTrue" => (1, 1),
        "$trunc" | "$round" => (1, 2),
        "$ifNull" => (2, usize::MAX),
        "$slice" => (2, 3),
        "$range" => (2, 3),
        "$indexOfArray" => (2, 4),
        "$setEquals" => (2, usize::MAX),
        _ => return None,
    })
}

/// A field name built from a string value: BSON names cannot hold a NUL byte (mongod: 4940400).
fn check_key(k: &str) -> DocResult<()> {
    if k.contains('\0') {
        return Err(DocError::with_code(
            4940400,
            "Location4940400",
            "Key field cannot contain an embedded null byte",
        ));
    }
    Ok(())
}

/// The most memory `$range` may build (mongod's internalQueryMaxRangeBytes).
const MAX_RANGE_BYTES: usize = 100 << 20;

fn parse_path_parts(s: &str) -> DocResult<Vec<String>> {
    if s.is_empty() {
        return Err(DocError::with_code(
            16872,
            "Location16872",
            "'$' by itself is not a valid FieldPath",
        ));
    }
    crate::limits::check_path(s)?;
    let parts: Vec<String> = s.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(DocError::with_code(
            15998,
            "Location15998",
            "FieldPath field names may not be empty strings.",
        ));
    }
    Ok(parts)
}

/// Parses an aggregation expression.
pub fn parse_expr(v: &Bson) -> DocResult<Expr> {
    match v {
        Bson::String(s) if s.starts_with("$$") => {
            let mut parts = parse_path_parts(&s[2..])?;
            let name = parts.remove(0);
            Ok(Expr::Var(name, parts))
        }
        Bson::String(s) if s.starts_with('$') => Ok(Expr::Field(parse_path_parts(&s[1..])?)),
        Bson::Array(a) => Ok(Expr::Arr(
            a.iter().map(parse_expr).collect::<DocResult<_>>()?,
        )),
        Bson::Document(d) => parse_doc_expr(d),
        other => Ok(Expr::Lit(other.clone())),
    }
}

fn parse_doc_expr(d: &Document) -> DocResult<Expr> {
    let Some(first) = d.keys().next() else {
        return Ok(Expr::Obj(Vec::new()));
    };
    if first.starts_with('$') {
        if d.len() != 1 {
            return Err(DocError::with_code(
                15983,
                "Location15983",
                format!(
                    "an expression specification must contain exactly one field, the name of \
                     the expression. Found {} fields in {}",
                    d.len(),
                    crate::compare::doc_repr(d)
                ),
            ));
        }
        let arg = d.get(first).expect("key");
        return parse_op(first, arg);
    }
    let mut fields = Vec::new();
    for (k, v) in d {
        if k.starts_with('$') {
            return Err(DocError::with_code(
                16410,
                "Location16410",
                format!("FieldPath field names may not start with '$'. Consider using $getField or $setField. ('{k}')"),
            ));
        }
        if k.contains('.') {
            return Err(DocError::with_code(
                16412,
                "Location16412",
                format!("FieldPath field names may not contain '.'. ('{k}')"),
            ));
        }
        fields.push((k.clone(), parse_expr(v)?));
    }
    Ok(Expr::Obj(fields))
}

fn named_args(name: &str, arg: &Bson, allowed: &[&str]) -> DocResult<Vec<(String, Expr)>> {
    let Bson::Document(d) = arg else {
        return Err(DocError::failed_to_parse(format!(
            "{name} only supports an object as its argument"
        )));
    };
    let mut out = Vec::new();
    for (k, v) in d {
        if !allowed.contains(&k.as_str()) {
            return Err(DocError::failed_to_parse(format!(
                "{name} found an unknown argument: {k}"
            )));
        }
        // `as` names and `vars` keep their raw form.
        let e = match (name, k.as_str()) {
            (_, "as") => Expr::Lit(v.clone()),
            ("$let", "vars") | ("$switch", "branches") => Expr::Lit(v.clone()),
            _ => parse_expr(v)?,
        };
        out.push((k.clone(), e));
    }
    Ok(out)
}

fn parse_op(name: &str, arg: &Bson) -> DocResult<Expr> {
    if name == "$literal" {
        return Ok(Expr::Lit(arg.clone()));
    }
    if name == "$cond" {
        if let Bson::Document(d) = arg {
            let get = |k: &str| -> DocResult<Expr> {
                match d.get(k) {
                    Some(v) => parse_expr(v),
                    None => Err(DocError::with_code(
                        17080,
                        "Location17080",
                        format!("Missing '{k}' parameter to $cond"),
                    )),
                }
            };
            if let Some(k) = d
                .keys()
                .find(|k| !matches!(k.as_str(), "if" | "then" | "else"))
            {
                return Err(DocError::with_code(
                    17083,
                    "Location17083",
                    format!("Unrecognized parameter to $cond: {k}"),
                ));
            }
            return Ok(Expr::Op(
                "$cond",
                vec![get("if")?, get("then")?, get("else")?],
            ));
        }
    }
    if let Some(n) = NAMED.iter().find(|n| **n == name) {
        let allowed: &[&str] = match name {
            "$switch" => &["branches", "default"],
            "$let" => &["vars", "in"],
            "$filter" => &["input", "as", "cond", "limit"],
            "$map" => &["input", "as", "in"],
            "$reduce" => &["input", "initialValue", "in"],
            "$regexMatch" => &["input", "regex", "options"],
            _ => &["input", "chars"],
        };
        let mut args = named_args(name, arg, allowed)?;
        if name == "$switch" {
            // Parse the branches now.
            let mut parsed = Vec::new();
            for (k, v) in args.drain(..) {
                if k == "branches" {
                    let Expr::Lit(Bson::Array(bs)) = v else {
                        return Err(DocError::with_code(
                            40061,
                            "Location40061",
                            "$switch expected an array for 'branches'",
                        ));
                    };
                    for (i, b) in bs.iter().enumerate() {
                        let Bson::Document(bd) = b else {
                            return Err(DocError::with_code(
                                40062,
                                "Location40062",
                                "$switch expected each branch to be an object",
                            ));
                        };
                        let case = bd.get("case").ok_or_else(|| {
                            DocError::with_code(
                                40064,
                                "Location40064",
                                "$switch requires each branch have a 'case' expression",
                            )
                        })?;
                        let then = bd.get("then").ok_or_else(|| {
                            DocError::with_code(
                                40065,
                                "Location40065",
                                "$switch requires each branch have a 'then' expression.",
                            )
                        })?;
                        parsed.push((format!("case{i}"), parse_expr(case)?));
                        parsed.push((format!("then{i}"), parse_expr(then)?));
                    }
                } else {
                    parsed.push((k, v));
                }
            }
            args = parsed;
        }
        if name == "$let" {
            let mut parsed = Vec::new();
            for (k, v) in args {
                if k == "vars" {
                    let Expr::Lit(Bson::Document(vd)) = v else {
                        return Err(DocError::failed_to_parse(
                            "invalid parameter: expected an object (vars)",
                        ));
                    };
                    for (vn, ve) in &vd {
                        parsed.push((format!("var:{vn}"), parse_expr(ve)?));
                    }
                } else {
                    parsed.push((k, v));
                }
            }
            args = parsed;
        }
        return Ok(Expr::Named(n, args));
    }
    let Some(op) = OPS.iter().find(|o| **o == name) else {
        return Err(DocError::with_code(
            168,
            "InvalidPipelineOperator",
            format!("Unrecognized expression '{name}'"),
        ));
    };
    let args: Vec<Expr> = match arg {
        Bson::Array(a) => a.iter().map(parse_expr).collect::<DocResult<_>>()?,
        other => vec![parse_expr(other)?],
    };
    if let Some((lo, hi)) = arity(name) {
        if args.len() < lo || args.len() > hi {
            let msg = if lo == hi {
                format!(
                    "Expression {name} takes exactly {lo} arguments. {} were passed in.",
                    args.len()
                )
            } else {
                format!(
                    "Expression {name} takes at least {lo} arguments, and at most {hi}. {} were passed in.",
                    args.len()
                )
            };
            return Err(DocError::with_code(16020, "Location16020", msg));
        }
    }
    Ok(Expr::Op(op, args))
}

/// Truthiness in aggregation: false, null, missing, undefined and zero are false.
pub fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => match Num::of(other) {
            Some(n) => n.as_f64() != 0.0,
            None => true,
        },
    }
}

fn is_nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// Evaluates a field path on a value with aggregation semantics (arrays map over their
/// elements, missing elements are dropped).
pub fn eval_path(v: &Bson, parts: &[String]) -> Option<Bson> {
    if parts.is_empty() {
        return Some(v.clone());
    }
    match v {
        Bson::Document(d) => eval_path(d.get(&parts[0])?, &parts[1..]),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| eval_path(e, parts))
                .collect(),
        )),
        _ => None,
    }
}

/// Field path on a document.
pub fn eval_doc_path(d: &Document, parts: &[String]) -> Option<Bson> {
    eval_path(d.get(&parts[0])?, &parts[1..])
}

// ---- arithmetic shared with update operators ----

fn fits_i32(i: i64) -> bool {
    i >= i32::MIN as i64 && i <= i32::MAX as i64
}

fn int_of(n: Num) -> Option<i64> {
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

fn neg_num(a: Num) -> Num {
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

fn tn(v: &Option<Bson>) -> &'static str {
    match v {
        None => "missing",
        Some(b) => type_name(b),
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
    if n == 0 {
        Bson::Null
    } else if dec {
        Num::Dec(sum / n as f64).to_bson()
    } else {
        Bson::Double(sum / n as f64)
    }
}

fn cmp_opt(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare_bson(x, y),
    }
}

fn to_i64_arg(op: &str, v: &Bson) -> DocResult<i64> {
    Num::of(v).and_then(Num::as_i64_exact).ok_or_else(|| {
        DocError::with_code(
            28690,
            "Location28690",
            format!(
                "{op}'s argument must be an integral value, found {}",
                shell_repr(v)
            ),
        )
    })
}

// ---- dates ----

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn date_part(op: &str, v: &Bson) -> DocResult<Bson> {
    let ms = match v {
        Bson::DateTime(d) => d.timestamp_millis(),
        Bson::Timestamp(t) => t.time as i64 * 1000,
        Bson::ObjectId(o) => o.timestamp().timestamp_millis(),
        other => {
            return Err(DocError::with_code(
                16006,
                "Location16006",
                format!("can't convert from BSON type {} to Date", type_name(other)),
            ))
        }
    };
    let days = ms.div_euclid(86_400_000);
    let msd = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    Ok(Bson::Int32(match op {
        "$year" => y as i32,
        "$month" => m as i32,
        "$dayOfMonth" => d as i32,
        "$hour" => (msd / 3_600_000) as i32,
        "$minute" => (msd / 60_000 % 60) as i32,
        "$second" => (msd / 1000 % 60) as i32,
        "$millisecond" => (msd % 1000) as i32,
        // 1 = Sunday; 1970-01-01 was a Thursday.
        "$dayOfWeek" => ((days + 4).rem_euclid(7) + 1) as i32,
        _ => {
            let (y0, _, _) = civil_from_days(days);
            let jan1 = days_from_civil(y0, 1, 1);
            (days - jan1 + 1) as i32
        }
    }))
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn conversion_failure(msg: String) -> DocError {
    DocError::with_code(241, "ConversionFailure", msg)
}

fn to_string_value(v: &Bson) -> DocResult<String> {
    Ok(match v {
        Bson::String(s) | Bson::Symbol(s) => s.clone(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(f) => {
            if f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{}", *f as i64)
            } else {
                f.to_string()
            }
        }
        Bson::Decimal128(d) => d.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::ObjectId(o) => o.to_hex(),
        Bson::DateTime(d) => d
            .try_to_rfc3339_string()
            .unwrap_or_else(|_| d.timestamp_millis().to_string()),
        other => {
            return Err(conversion_failure(format!(
                "Unsupported conversion from {} to string in $convert with no onError value",
                type_name(other)
            )))
        }
    })
}

fn convert(op: &str, v: &Bson) -> DocResult<Bson> {
    let target = match op {
        "$toInt" => "int",
        "$toLong" => "long",
        "$toDouble" => "double",
        "$toDecimal" => "decimal",
        "$toBool" => "bool",
        "$toObjectId" => "objectId",
        "$toDate" => "date",
        _ => "string",
    };
    let unsupported = || {
        conversion_failure(format!(
            "Unsupported conversion from {} to {target} in $convert with no onError value",
            type_name(v)
        ))
    };
    let parse_num = |s: &str| -> DocResult<Num> {
        if let Ok(i) = s.parse::<i64>() {
            return Ok(Num::I64(i));
        }
        s.parse::<f64>().map(Num::F64).map_err(|_| {
            conversion_failure(format!(
                "Failed to parse number '{s}' in $convert with no onError value: Did not consume whole string."
            ))
        })
    };
    let num = match v {
        Bson::String(s)
            if target != "string"
                && target != "objectId"
                && target != "bool"
                && target != "date" =>
        {
            Some(parse_num(s)?)
        }
        Bson::Boolean(b) => Some(Num::I32(*b as i32)),
        Bson::DateTime(d) if target != "date" => Some(Num::I64(d.timestamp_millis())),
        other => Num::of(other),
    };
    Ok(match target {
        "string" => Bson::String(to_string_value(v)?),
        "bool" => Bson::Boolean(truthy(Some(v))),
        "objectId" => match v {
            Bson::ObjectId(_) => v.clone(),
            Bson::String(s) => Bson::ObjectId(bson::oid::ObjectId::parse_str(s).map_err(|_| {
                conversion_failure(format!(
                    "Failed to parse objectId '{s}' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found {}",
                    s.len()
                ))
            })?),
            _ => return Err(unsupported()),
        },
        "date" => match v {
            Bson::DateTime(_) => v.clone(),
            Bson::ObjectId(o) => Bson::DateTime(o.timestamp()),
            Bson::Timestamp(t) => Bson::DateTime(DateTime::from_millis(t.time as i64 * 1000)),
            Bson::String(s) => Bson::DateTime(DateTime::parse_rfc3339_str(s).map_err(|_| {
                conversion_failure(format!(
                    "Error parsing date string '{s}'"
                ))
            })?),
            other => match Num::of(other) {
                Some(Num::I32(_)) | None => return Err(unsupported()),
                Some(n) => Bson::DateTime(DateTime::from_millis(n.as_f64() as i64)),
            },
        },
        _ => {
            let Some(n) = num else {
                return Err(unsupported());
            };
            match target {
                "int" => {
                    let f = n.as_f64();
                    let i = int_of(n).unwrap_or(f.trunc() as i64);
                    if !f.is_finite() || !fits_i32(i) {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type in $convert with no onError value: {}",
                            shell_repr(v)
                        )));
                    }
                    Bson::Int32(i as i32)
                }
                "long" => {
                    let f = n.as_f64();
                    if !f.is_finite() && int_of(n).is_none() {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type in $convert with no onError value: {}",
                            shell_repr(v)
                        )));
                    }
                    Bson::Int64(int_of(n).unwrap_or(f.trunc() as i64))
                }
                "double" => Bson::Double(n.as_f64()),
                _ => Num::Dec(n.as_f64()).to_bson(),
            }
        }
    })
}

fn require_array<'b>(op: &str, v: &'b Option<Bson>, code: i32) -> DocResult<&'b Vec<Bson>> {
    match v {
        Some(Bson::Array(a)) => Ok(a),
        other => Err(DocError::with_code(
            code,
            "Location",
            format!("{op}'s argument must be an array, but is {}", tn(other)),
        )),
    }
}

fn set_of(op: &str, v: &Option<Bson>) -> DocResult<Vec<Bson>> {
    let a = match v {
        Some(Bson::Array(a)) => a,
        other => {
            return Err(DocError::with_code(
                17044,
                "Location17044",
                format!(
                    "All operands of {op} must be arrays. One argument is of type: {}",
                    tn(other)
                ),
            ))
        }
    };
    let mut out: Vec<Bson> = Vec::new();
    for e in a {
        if !out.iter().any(|x| bson_equal(x, e)) {
            out.push(e.clone());
        }
    }
    Ok(out)
}

impl Expr {
    /// Evaluates against a document as both `$$ROOT` and `$$CURRENT`.
    pub fn eval_root(&self, doc: &Document) -> DocResult<Option<Bson>> {
        self.eval(&Ctx::new(doc))
    }

    /// Evaluates in a context.
    pub fn eval(&self, ctx: &Ctx) -> DocResult<Option<Bson>> {
        match self {
            Expr::Lit(v) => Ok(Some(v.clone())),
            Expr::Field(parts) => Ok(eval_doc_path(ctx.current, parts)),
            Expr::Var(name, parts) => {
                let base: Bson = match name.as_str() {
                    "ROOT" => Bson::Document(ctx.root.clone()),
                    "CURRENT" => Bson::Document(ctx.current.clone()),
                    "REMOVE" => return Ok(None),
                    "NOW" => Bson::DateTime(DateTime::now()),
                    _ => match ctx.vars.iter().rev().find(|(n, _)| n == name) {
                        Some((_, v)) => v.clone(),
                        None => {
                            return Err(DocError::with_code(
                                17276,
                                "Location17276",
                                format!("Use of undefined variable: {name}"),
                            ))
                        }
                    },
                };
                Ok(eval_path(&base, parts))
            }
            Expr::Obj(fields) => {
                let mut d = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(ctx)? {
                        d.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(d)))
            }
            Expr::Arr(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    // Missing values become null inside arrays.
                    out.push(e.eval(ctx)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Op(name, args) => self.eval_op(name, args, ctx),
            Expr::Named(name, args) => self.eval_named(name, args, ctx),
        }
    }

    fn eval_named(
        &self,
        name: &str,
        args: &[(String, Expr)],
        ctx: &Ctx,
    ) -> DocResult<Option<Bson>> {
        let get = |k: &str| args.iter().find(|(n, _)| n == k).map(|(_, e)| e);
        let as_name = |default: &str| -> String {
            match get("as") {
                Some(Expr::Lit(Bson::String(s))) => s.clone(),
                _ => default.to_string(),
            }
        };
        match name {
            "$switch" => {
                let mut i = 0;
                while let Some(case) = get(&format!("case{i}")) {
                    if truthy(case.eval(ctx)?.as_ref()) {
                        return get(&format!("then{i}")).expect("then").eval(ctx);
                    }
                    i += 1;
                }
                match get("default") {
                    Some(d) => d.eval(ctx),
                    None => Err(DocError::with_code(
                        40066,
                        "Location40066",
                        "$switch could not find a matching branch for an input, and no default was specified.",
                    )),
                }
            }
            "$let" => {
                let mut c = ctx.clone();
                for (k, e) in args {
                    if let Some(vn) = k.strip_prefix("var:") {
                        let v = e.eval(ctx)?.unwrap_or(Bson::Null);
                        c.vars.push((vn.to_string(), v));
                    }
                }
                match get("in") {
                    Some(e) => e.eval(&c),
                    None => Err(DocError::with_code(
                        16711,
                        "Location16711",
                        "Missing 'in' parameter to $let",
                    )),
                }
            }
            "$filter" | "$map" => {
                let input = get("input")
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
                let var = as_name("this");
                let body = get(if name == "$filter" { "cond" } else { "in" }).ok_or_else(|| {
                    DocError::failed_to_parse(format!("Missing parameter to {name}"))
                })?;
                let limit = match get("limit") {
                    Some(l) => match l.eval(ctx)? {
                        Some(v) => Some(to_i64_arg("$filter", &v)?.max(0) as usize),
                        None => None,
                    },
                    None => None,
                };
                let mut out = Vec::new();
                for e in arr {
                    let c = ctx.with(&var, e.clone());
                    if name == "$filter" {
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
            "$reduce" => {
                let input = get("input").map(|e| e.eval(ctx)).transpose()?.flatten();
                let mut acc = get("initialValue")
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
                let body = get("in").ok_or_else(|| {
                    DocError::failed_to_parse("Missing 'in' parameter to $reduce")
                })?;
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
            "$regexMatch" => {
                let input = get("input").map(|e| e.eval(ctx)).transpose()?.flatten();
                let re = get("regex").map(|e| e.eval(ctx)).transpose()?.flatten();
                let opts = get("options").map(|e| e.eval(ctx)).transpose()?.flatten();
                let (pat, mut o) = match re {
                    Some(Bson::String(s)) => (s, String::new()),
                    Some(Bson::RegularExpression(r)) => (r.pattern, r.options),
                    None | Some(Bson::Null) => return Ok(Some(Bson::Boolean(false))),
                    Some(other) => {
                        return Err(DocError::with_code(
                            51105,
                            "Location51105",
                            format!(
                                "$regexMatch needs 'regex' to be of type string or regex, found {}",
                                type_name(&other)
                            ),
                        ))
                    }
                };
                if let Some(Bson::String(s)) = opts {
                    o.push_str(&s);
                }
                let re = crate::matcher::compile_regex(&pat, &o)?;
                Ok(Some(Bson::Boolean(match input {
                    Some(Bson::String(s)) => re.is_match(&s),
                    None | Some(Bson::Null) => false,
                    Some(other) => {
                        return Err(DocError::with_code(
                            51104,
                            "Location51104",
                            format!(
                                "$regexMatch needs 'input' to be of type string, found {}",
                                type_name(&other)
                            ),
                        ))
                    }
                })))
            }
            _ => {
                // $trim family
                let input = get("input").map(|e| e.eval(ctx)).transpose()?.flatten();
                let chars = get("chars").map(|e| e.eval(ctx)).transpose()?.flatten();
                let s = match input {
                    None | Some(Bson::Null) => return Ok(Some(Bson::Null)),
                    Some(Bson::String(s)) => s,
                    Some(other) => {
                        return Err(DocError::with_code(
                            50699,
                            "Location50699",
                            format!("{name} requires its input to be a string, got {} (of type {}) instead.", shell_repr(&other), type_name(&other)),
                        ))
                    }
                };
                let set: Vec<char> = match chars {
                    Some(Bson::String(c)) => c.chars().collect(),
                    _ => vec![' ', '\t', '\n', '\r', '\u{0b}', '\u{0c}', '\0'],
                };
                let f = |c: char| set.contains(&c);
                Ok(Some(Bson::String(match name {
                    "$ltrim" => s.trim_start_matches(f).to_string(),
                    "$rtrim" => s.trim_end_matches(f).to_string(),
                    _ => s.trim_matches(f).to_string(),
                })))
            }
        }
    }

    fn eval_op(&self, name: &str, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
        // Short-circuiting operators first.
        match name {
            "$cond" => {
                let c = truthy(args[0].eval(ctx)?.as_ref());
                return args[if c { 1 } else { 2 }].eval(ctx);
            }
            "$and" => {
                for a in args {
                    if !truthy(a.eval(ctx)?.as_ref()) {
                        return Ok(Some(Bson::Boolean(false)));
                    }
                }
                return Ok(Some(Bson::Boolean(true)));
            }
            "$or" => {
                for a in args {
                    if truthy(a.eval(ctx)?.as_ref()) {
                        return Ok(Some(Bson::Boolean(true)));
                    }
                }
                return Ok(Some(Bson::Boolean(false)));
            }
            "$ifNull" => {
                for a in &args[..args.len() - 1] {
                    let v = a.eval(ctx)?;
                    if !is_nullish(&v) {
                        return Ok(v);
                    }
                }
                return args[args.len() - 1].eval(ctx);
            }
            _ => {}
        }
        let vals: Vec<Option<Bson>> = args.iter().map(|a| a.eval(ctx)).collect::<DocResult<_>>()?;
        let any_null = vals.iter().any(is_nullish);
        let num = |i: usize| vals[i].as_ref().and_then(Num::of);
        let v = |i: usize| -> &Option<Bson> { &vals[i] };
        let out: Option<Bson> = match name {
            "$add" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let mut acc = Num::I32(0);
                let mut date: Option<i64> = None;
                for x in &vals {
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
                Some(match date {
                    Some(ms) => {
                        Bson::DateTime(DateTime::from_millis(ms + acc.as_f64().round() as i64))
                    }
                    None => acc.to_bson(),
                })
            }
            "$subtract" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let (a, b) = (v(0).as_ref().expect("nn"), v(1).as_ref().expect("nn"));
                match (a, b, Num::of(a), Num::of(b)) {
                    (_, _, Some(x), Some(y)) => Some(add_num(x, neg_num(y)).to_bson()),
                    (Bson::DateTime(x), Bson::DateTime(y), _, _) => {
                        Some(Bson::Int64(x.timestamp_millis() - y.timestamp_millis()))
                    }
                    (Bson::DateTime(x), _, _, Some(y)) => Some(Bson::DateTime(
                        DateTime::from_millis(x.timestamp_millis() - y.as_f64().round() as i64),
                    )),
                    _ => {
                        return Err(DocError::type_mismatch(format!(
                            "can't $subtract {} from {}",
                            type_name(b),
                            type_name(a)
                        )))
                    }
                }
            }
            "$multiply" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let mut acc = Num::I32(1);
                for x in &vals {
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
                Some(acc.to_bson())
            }
            "$divide" | "$mod" | "$pow" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let (Some(a), Some(b)) = (num(0), num(1)) else {
                    return Err(DocError::with_code(
                        16609,
                        "Location16609",
                        format!(
                            "{name} only supports numeric types, not {} and {}",
                            tn(v(0)),
                            tn(v(1))
                        ),
                    ));
                };
                let dec = matches!(a, Num::Dec(_)) || matches!(b, Num::Dec(_));
                match name {
                    "$divide" => {
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
                    "$mod" => {
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
                }
            }
            "$abs" | "$ceil" | "$floor" | "$sqrt" | "$exp" | "$ln" | "$log10" | "$trunc"
            | "$round" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let Some(n) = num(0) else {
                    return Err(DocError::with_code(
                        28765,
                        "Location28765",
                        format!("{name} only supports numeric types, not {}", tn(v(0))),
                    ));
                };
                let places = if args.len() > 1 {
                    num(1).map(|p| p.as_f64() as i32).unwrap_or(0)
                } else {
                    0
                };
                let f = n.as_f64();
                let keep = |r: f64| -> Bson {
                    match n {
                        Num::I32(_) if r.fract() == 0.0 && fits_i32(r as i64) => {
                            Bson::Int32(r as i32)
                        }
                        Num::I64(_) | Num::I32(_) if r.fract() == 0.0 => Bson::Int64(r as i64),
                        Num::Dec(_) => Num::Dec(r).to_bson(),
                        _ => Bson::Double(r),
                    }
                };
                Some(match name {
                    "$abs" => match n {
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
                    "$ceil" => keep(f.ceil()),
                    "$floor" => keep(f.floor()),
                    "$trunc" | "$round" => {
                        let m = 10f64.powi(places);
                        let r = if name == "$trunc" {
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
                    "$sqrt" => {
                        if f < 0.0 {
                            return Err(DocError::with_code(
                                28714,
                                "Location28714",
                                "$sqrt's argument must be greater than or equal to 0",
                            ));
                        }
                        Bson::Double(f.sqrt())
                    }
                    "$exp" => Bson::Double(f.exp()),
                    "$ln" => {
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
                })
            }
            "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$cmp" => {
                let o = cmp_opt(v(0), v(1));
                Some(match name {
                    "$eq" => Bson::Boolean(o == Ordering::Equal),
                    "$ne" => Bson::Boolean(o != Ordering::Equal),
                    "$gt" => Bson::Boolean(o == Ordering::Greater),
                    "$gte" => Bson::Boolean(o != Ordering::Less),
                    "$lt" => Bson::Boolean(o == Ordering::Less),
                    "$lte" => Bson::Boolean(o != Ordering::Greater),
                    _ => Bson::Int32(o as i32),
                })
            }
            "$not" => Some(Bson::Boolean(!truthy(v(0).as_ref()))),
            "$concat" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let mut s = String::new();
                for x in &vals {
                    match x {
                        Some(Bson::String(p)) => s.push_str(p),
                        other => {
                            return Err(DocError::with_code(
                                16702,
                                "Location16702",
                                format!("$concat only supports strings, not {}", tn(other)),
                            ))
                        }
                    }
                }
                Some(Bson::String(s))
            }
            "$toUpper" | "$toLower" => {
                let s = match v(0) {
                    None | Some(Bson::Null) => String::new(),
                    Some(Bson::String(s)) => s.clone(),
                    Some(
                        other @ (Bson::Int32(_)
                        | Bson::Int64(_)
                        | Bson::Double(_)
                        | Bson::Decimal128(_)
                        | Bson::DateTime(_)),
                    ) => to_string_value(other)?,
                    Some(other) => {
                        return Err(DocError::with_code(
                            16007,
                            "Location16007",
                            format!(
                                "can't convert from BSON type {} to String",
                                type_name(other)
                            ),
                        ))
                    }
                };
                Some(Bson::String(if name == "$toUpper" {
                    s.to_uppercase()
                } else {
                    s.to_lowercase()
                }))
            }
            "$substr" | "$substrBytes" | "$substrCP" => {
                let s = match v(0) {
                    None | Some(Bson::Null) => String::new(),
                    Some(Bson::String(s)) => s.clone(),
                    Some(other) => to_string_value(other)?,
                };
                let start = num(1).map(|n| n.as_f64() as i64).ok_or_else(|| {
                    DocError::with_code(
                        16034,
                        "Location16034",
                        format!(
                            "{name}:  starting index must be a numeric type (is BSON type {})",
                            tn(v(1))
                        ),
                    )
                })?;
                let len = num(2).map(|n| n.as_f64() as i64).ok_or_else(|| {
                    DocError::with_code(
                        16035,
                        "Location16035",
                        format!(
                            "{name}:  length must be a numeric type (is BSON type {})",
                            tn(v(2))
                        ),
                    )
                })?;
                let start = start.max(0) as usize;
                let out = if name == "$substrCP" {
                    let it = s.chars().skip(start);
                    if len < 0 {
                        it.collect()
                    } else {
                        it.take(len as usize).collect()
                    }
                } else {
                    let b = s.as_bytes();
                    let st = start.min(b.len());
                    let en = if len < 0 {
                        b.len()
                    } else {
                        (st + len as usize).min(b.len())
                    };
                    if !s.is_char_boundary(st) || !s.is_char_boundary(en) {
                        return Err(DocError::with_code(28656, "Location28656", format!("{name}:  Invalid range, starting index is a UTF-8 continuation byte.")));
                    }
                    s[st..en].to_string()
                };
                Some(Bson::String(out))
            }
            "$strLenBytes" | "$strLenCP" => match v(0) {
                Some(Bson::String(s)) => Some(Bson::Int32(if name == "$strLenBytes" {
                    s.len()
                } else {
                    s.chars().count()
                } as i32)),
                other => {
                    return Err(DocError::with_code(
                        34473,
                        "Location34473",
                        format!("{name} requires a string argument, found: {}", tn(other)),
                    ))
                }
            },
            "$split" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                match (v(0), v(1)) {
                    (Some(Bson::String(s)), Some(Bson::String(d))) => {
                        if d.is_empty() {
                            return Err(DocError::with_code(40087, "Location40087", "$split requires a non-empty separator"));
                        }
                        Some(Bson::Array(s.split(d.as_str()).map(|p| Bson::String(p.to_string())).collect()))
                    }
                    (a, _) => {
                        return Err(DocError::with_code(
                            40085,
                            "Location40085",
                            format!("$split requires an expression that evaluates to a string as a first argument, found: {}", tn(a)),
                        ))
                    }
                }
            }
            "$strcasecmp" => {
                let s = |x: &Option<Bson>| -> DocResult<String> {
                    Ok(match x {
                        None | Some(Bson::Null) => String::new(),
                        Some(b) => to_string_value(b)?,
                    })
                };
                let (a, b) = (s(v(0))?.to_lowercase(), s(v(1))?.to_lowercase());
                Some(Bson::Int32(a.cmp(&b) as i32))
            }
            "$size" => match v(0) {
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
            },
            "$arrayElemAt" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let arr = match v(0) {
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
                let i = to_i64_arg("$arrayElemAt", v(1).as_ref().expect("nn"))?;
                let idx = if i < 0 { arr.len() as i64 + i } else { i };
                if idx < 0 || idx >= arr.len() as i64 {
                    None
                } else {
                    Some(arr[idx as usize].clone())
                }
            }
            "$first" | "$last" => match v(0) {
                None => None,
                Some(Bson::Null) | Some(Bson::Undefined) => Some(Bson::Null),
                Some(Bson::Array(a)) => {
                    if name == "$first" {
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
            },
            "$in" => match v(1) {
                Some(Bson::Array(a)) => {
                    let x = v(0).clone().unwrap_or(Bson::Null);
                    Some(Bson::Boolean(
                        v(0).is_some() && a.iter().any(|e| bson_equal(e, &x)),
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
            },
            "$isArray" => Some(Bson::Boolean(matches!(v(0), Some(Bson::Array(_))))),
            "$isNumber" => Some(Bson::Boolean(num(0).is_some())),
            "$concatArrays" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let mut out = Vec::new();
                for x in &vals {
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
                Some(Bson::Array(out))
            }
            "$slice" => {
                if any_null {
                    return Ok(Some(Bson::Null));
                }
                let arr = require_array("$slice", v(0), 28724)?;
                let len = arr.len() as i64;
                let (start, n) = if vals.len() == 2 {
                    let n = to_i64_arg("$slice", v(1).as_ref().expect("nn"))?;
                    if n >= 0 {
                        (0, n)
                    } else {
                        ((len + n).max(0), -n)
                    }
                } else {
                    let p = to_i64_arg("$slice", v(1).as_ref().expect("nn"))?;
                    let n = to_i64_arg("$slice", v(2).as_ref().expect("nn"))?;
                    if n <= 0 {
                        return Err(DocError::with_code(
                            28729,
                            "Location28729",
                            format!("Third argument to $slice must be positive: {n}"),
                        ));
                    }
                    (if p < 0 { (len + p).max(0) } else { p.min(len) }, n)
                };
                Some(Bson::Array(
                    arr.iter()
                        .skip(start as usize)
                        .take(n as usize)
                        .cloned()
                        .collect(),
                ))
            }
            "$reverseArray" => match v(0) {
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
            },
            "$range" => {
                let g = |i: usize| -> DocResult<i64> {
                    match &vals[i] {
                        Some(b) => to_i64_arg("$range", b),
                        None => Err(DocError::with_code(34443, "Location34443", "$range requires a numeric starting value, found value of type: missing")),
                    }
                };
                let (s, e) = (g(0)?, g(1)?);
                let step = if vals.len() > 2 { g(2)? } else { 1 };
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
                Some(Bson::Array(out))
            }
            "$indexOfArray" => match v(0) {
                None | Some(Bson::Null) => Some(Bson::Null),
                Some(Bson::Array(a)) => {
                    let x = v(1).clone().unwrap_or(Bson::Null);
                    let st = if vals.len() > 2 {
                        num(2).map(|n| n.as_f64() as usize).unwrap_or(0)
                    } else {
                        0
                    };
                    let en = if vals.len() > 3 {
                        num(3).map(|n| n.as_f64() as usize).unwrap_or(a.len())
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
            },
            "$mergeObjects" => {
                let mut d = Document::new();
                let items: Vec<&Option<Bson>> = vals.iter().collect();
                for (i, x) in items.into_iter().enumerate() {
                    match x {
                        None | Some(Bson::Null) => {}
                        Some(Bson::Document(o)) => {
                            for (k, val) in o {
                                d.insert(k.clone(), val.clone());
                            }
                        }
                        other => {
                            return Err(DocError::with_code(
                                40400,
                                "Location40400",
                                format!(
                                "$mergeObjects requires object inputs, but input {} is of type {}",
                                i,
                                tn(other)
                            ),
                            ))
                        }
                    }
                }
                Some(Bson::Document(d))
            }
            "$objectToArray" => match v(0) {
                None | Some(Bson::Null) => Some(Bson::Null),
                Some(Bson::Document(d)) => Some(Bson::Array(
                    d.iter()
                        .map(|(k, val)| {
                            Bson::Document(bson::doc! {"k": k.clone(), "v": val.clone()})
                        })
                        .collect(),
                )),
                other => {
                    return Err(DocError::with_code(
                        40390,
                        "Location40390",
                        format!(
                            "$objectToArray requires a document input, found: {}",
                            tn(other)
                        ),
                    ))
                }
            },
            "$arrayToObject" => match v(0) {
                None | Some(Bson::Null) => Some(Bson::Null),
                Some(Bson::Array(a)) => {
                    let mut d = Document::new();
                    for e in a {
                        match e {
                            Bson::Array(kv) if kv.len() == 2 => {
                                let Bson::String(k) = &kv[0] else {
                                    return Err(DocError::with_code(40395, "Location40395", "$arrayToObject requires an array of key-value pairs, where the key must be of type string"));
                                };
                                check_key(k)?;
                                d.insert(k.clone(), kv[1].clone());
                            }
                            Bson::Document(kv) if kv.len() == 2 => {
                                match (kv.get("k"), kv.get("v")) {
                                    (Some(Bson::String(k)), Some(val)) => {
                                        check_key(k)?;
                                        d.insert(k.clone(), val.clone());
                                    }
                                    _ => return Err(DocError::with_code(
                                        40393,
                                        "Location40393",
                                        "$arrayToObject requires an object with keys 'k' and 'v'",
                                    )),
                                }
                            }
                            _ => {
                                return Err(DocError::with_code(
                                    40398,
                                    "Location40398",
                                    "Unrecognised input type format for $arrayToObject",
                                ))
                            }
                        }
                    }
                    Some(Bson::Document(d))
                }
                other => {
                    return Err(DocError::with_code(
                        40386,
                        "Location40386",
                        format!(
                            "$arrayToObject requires an array input, found: {}",
                            tn(other)
                        ),
                    ))
                }
            },
            "$sum" | "$avg" | "$min" | "$max" => {
                let items: Vec<Bson> = if vals.len() == 1 {
                    match &vals[0] {
                        Some(Bson::Array(a)) => a.clone(),
                        Some(x) => vec![x.clone()],
                        None => vec![],
                    }
                } else {
                    vals.iter().flatten().cloned().collect()
                };
                Some(match name {
                    "$sum" => sum_values(items.iter()),
                    "$avg" => avg_values(items.iter()),
                    _ => {
                        let it = items
                            .into_iter()
                            .filter(|x| !matches!(x, Bson::Null | Bson::Undefined));
                        let r = if name == "$min" {
                            it.min_by(compare_bson)
                        } else {
                            it.max_by(compare_bson)
                        };
                        r.unwrap_or(Bson::Null)
                    }
                })
            }
            "$type" => Some(Bson::String(tn(v(0)).to_string())),
            "$toString" | "$toInt" | "$toLong" | "$toDouble" | "$toDecimal" | "$toBool"
            | "$toObjectId" | "$toDate" => match v(0) {
                None | Some(Bson::Null) | Some(Bson::Undefined) => Some(Bson::Null),
                Some(x) => Some(convert(name, x)?),
            },
            "$year" | "$month" | "$dayOfMonth" | "$hour" | "$minute" | "$second"
            | "$millisecond" | "$dayOfWeek" | "$dayOfYear" => {
                match v(0) {
                    None | Some(Bson::Null) => Some(Bson::Null),
                    Some(Bson::Document(d)) if d.contains_key("date") => {
                        // {date: <expr>} form: evaluate the inner expression.
                        let inner = parse_expr(d.get("date").expect("key"))?.eval(ctx)?;
                        match inner {
                            None | Some(Bson::Null) => Some(Bson::Null),
                            Some(x) => Some(date_part(name, &x)?),
                        }
                    }
                    Some(x) => Some(date_part(name, x)?),
                }
            }
            "$setUnion" | "$setIntersection" | "$setDifference" | "$setEquals" | "$setIsSubset" => {
                if any_null && matches!(name, "$setUnion" | "$setIntersection" | "$setDifference") {
                    return Ok(Some(Bson::Null));
                }
                let sets: Vec<Vec<Bson>> = vals
                    .iter()
                    .map(|x| set_of(name, x))
                    .collect::<DocResult<_>>()?;
                let contains = |s: &Vec<Bson>, x: &Bson| s.iter().any(|y| bson_equal(x, y));
                Some(match name {
                    "$setUnion" => {
                        let mut out: Vec<Bson> = Vec::new();
                        for s in &sets {
                            for x in s {
                                if !contains(&out, x) {
                                    out.push(x.clone());
                                }
                            }
                        }
                        Bson::Array(out)
                    }
                    "$setIntersection" => {
                        let mut out = sets.first().cloned().unwrap_or_default();
                        for s in &sets[1..] {
                            out.retain(|x| contains(s, x));
                        }
                        Bson::Array(out)
                    }
                    "$setDifference" => Bson::Array(
                        sets[0]
                            .iter()
                            .filter(|x| !contains(&sets[1], x))
                            .cloned()
                            .collect(),
                    ),
                    "$setIsSubset" => Bson::Boolean(sets[0].iter().all(|x| contains(&sets[1], x))),
                    _ => Bson::Boolean(sets.windows(2).all(|w| {
                        w[0].iter().all(|x| contains(&w[1], x))
                            && w[1].iter().all(|x| contains(&w[0], x))
                    })),
                })
            }
            "$allElementsTrue" | "$anyElementTrue" => {
                let a = match v(0) {
                    Some(Bson::Array(a)) => a,
                    other => {
                        return Err(DocError::with_code(
                            17040,
                            "Location17040",
                            format!("{name}'s argument must be an array, but is {}", tn(other)),
                        ))
                    }
                };
                Some(Bson::Boolean(if name == "$allElementsTrue" {
                    a.iter().all(|x| truthy(Some(x)))
                } else {
                    a.iter().any(|x| truthy(Some(x)))
                }))
            }
            other => {
                return Err(DocError::with_code(
                    168,
                    "InvalidPipelineOperator",
                    format!("Unrecognized expression '{other}'"),
                ))
            }
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn ev(e: Bson, d: Document) -> Option<Bson> {
        parse_expr(&e).unwrap().eval_root(&d).unwrap()
    }

    fn ev_err(e: Bson, d: Document) -> DocError {
        match parse_expr(&e) {
            Err(e) => e,
            Ok(x) => x.eval_root(&d).unwrap_err(),
        }
    }

    #[test]
    fn paths_and_literals() {
        let d = doc! {"a": {"b": 5}, "arr": [{"x": 1}, {"y": 2}, {"x": 3}, 7]};
        assert_eq!(ev(bson!("$a.b"), d.clone()), Some(bson!(5)));
        assert_eq!(ev(bson!("$nope"), d.clone()), None);
        assert_eq!(ev(bson!("$arr.x"), d.clone()), Some(bson!([1, 3])));
        assert_eq!(ev(bson!("$$ROOT.a"), d.clone()), Some(bson!({"b": 5})));
        assert_eq!(ev(bson!("$$CURRENT.a.b"), d.clone()), Some(bson!(5)));
        assert_eq!(ev(bson!({"$literal": "$a"}), d.clone()), Some(bson!("$a")));
        assert_eq!(ev(bson!(7), d.clone()), Some(bson!(7)));
        assert_eq!(
            ev(
                bson!({"x": "$a.b", "y": "$nope", "z": ["$nope", 1]}),
                d.clone()
            ),
            Some(bson!({"x": 5, "z": [null, 1]}))
        );
        assert_eq!(ev_err(bson!("$$nope"), d.clone()).code, 17276);
        assert_eq!(ev_err(bson!({"$foo": 1}), d.clone()).code, 168);
        assert_eq!(ev_err(bson!({"$add": 1, "$sub": 2}), d.clone()).code, 15983);
        assert_eq!(ev_err(bson!({"$eq": [1]}), d.clone()).code, 16020);
        assert_eq!(ev_err(bson!("$"), d.clone()).code, 16872);
    }

    #[test]
    fn arithmetic() {
        let d = doc! {"i": 2, "l": Bson::Int64(3), "f": 1.5, "big": i32::MAX, "n": null};
        assert_eq!(ev(bson!({"$add": ["$i", 3]}), d.clone()), Some(bson!(5)));
        assert_eq!(
            ev(bson!({"$add": ["$i", "$l"]}), d.clone()),
            Some(Bson::Int64(5))
        );
        assert_eq!(
            ev(bson!({"$add": ["$i", "$f"]}), d.clone()),
            Some(bson!(3.5))
        );
        assert_eq!(
            ev(bson!({"$add": ["$big", 1]}), d.clone()),
            Some(Bson::Int64(i32::MAX as i64 + 1))
        );
        assert_eq!(
            ev(bson!({"$add": ["$i", "$n"]}), d.clone()),
            Some(Bson::Null)
        );
        assert_eq!(
            ev(bson!({"$add": ["$i", "$missing"]}), d.clone()),
            Some(Bson::Null)
        );
        assert_eq!(
            ev(bson!({"$add": [DateTime::from_millis(1000), 5]}), d.clone()),
            Some(Bson::DateTime(DateTime::from_millis(1005)))
        );
        assert_eq!(ev_err(bson!({"$add": ["a", 1]}), d.clone()).code, 14);
        assert_eq!(
            ev(bson!({"$subtract": [10, "$i"]}), d.clone()),
            Some(bson!(8))
        );
        assert_eq!(
            ev(
                bson!({"$subtract": [DateTime::from_millis(10), DateTime::from_millis(4)]}),
                d.clone()
            ),
            Some(Bson::Int64(6))
        );
        assert_eq!(
            ev(bson!({"$multiply": ["$i", "$f", 2]}), d.clone()),
            Some(bson!(6.0))
        );
        assert_eq!(ev(bson!({"$divide": [9, 2]}), d.clone()), Some(bson!(4.5)));
        assert_eq!(
            ev_err(bson!({"$divide": [9, 0]}), d.clone()).message,
            "can't $divide by zero"
        );
        assert_eq!(ev(bson!({"$mod": [9, 4]}), d.clone()), Some(bson!(1)));
        assert_eq!(ev(bson!({"$abs": -3}), d.clone()), Some(bson!(3)));
        assert_eq!(ev(bson!({"$ceil": 1.2}), d.clone()), Some(bson!(2.0)));
        assert_eq!(ev(bson!({"$floor": 1.8}), d.clone()), Some(bson!(1.0)));
        assert_eq!(ev(bson!({"$round": [2.5]}), d.clone()), Some(bson!(2.0)));
        assert_eq!(
            ev(bson!({"$round": [1.256, 2]}), d.clone()),
            Some(bson!(1.26))
        );
        assert_eq!(ev(bson!({"$trunc": 1.9}), d.clone()), Some(bson!(1.0)));
        assert_eq!(ev(bson!({"$pow": [2, 10]}), d.clone()), Some(bson!(1024)));
        assert_eq!(ev(bson!({"$sqrt": 16}), d.clone()), Some(bson!(4.0)));
    }

    #[test]
    fn comparison_logic_cond() {
        let d = doc! {"a": 1, "s": "x", "n": null};
        assert_eq!(
            ev(bson!({"$eq": ["$a", 1.0]}), d.clone()),
            Some(bson!(true))
        );
        assert_eq!(
            ev(bson!({"$eq": ["$missing", null]}), d.clone()),
            Some(bson!(false))
        );
        assert_eq!(
            ev(bson!({"$eq": ["$n", null]}), d.clone()),
            Some(bson!(true))
        );
        assert_eq!(ev(bson!({"$gt": ["$s", 5]}), d.clone()), Some(bson!(true)));
        assert_eq!(
            ev(bson!({"$lt": ["$missing", null]}), d.clone()),
            Some(bson!(true))
        );
        assert_eq!(ev(bson!({"$cmp": [1, 2]}), d.clone()), Some(bson!(-1)));
        assert_eq!(ev(bson!({"$ne": ["$a", 2]}), d.clone()), Some(bson!(true)));
        assert_eq!(
            ev(bson!({"$and": [1, "$s", true]}), d.clone()),
            Some(bson!(true))
        );
        assert_eq!(
            ev(bson!({"$and": [1, "$n"]}), d.clone()),
            Some(bson!(false))
        );
        assert_eq!(
            ev(bson!({"$or": [0, "$missing"]}), d.clone()),
            Some(bson!(false))
        );
        assert_eq!(ev(bson!({"$not": [0]}), d.clone()), Some(bson!(true)));
        assert_eq!(
            ev(
                bson!({"$cond": [{"$eq": ["$a", 1]}, "yes", "no"]}),
                d.clone()
            ),
            Some(bson!("yes"))
        );
        assert_eq!(
            ev(
                bson!({"$cond": {"if": "$n", "then": "yes", "else": "no"}}),
                d.clone()
            ),
            Some(bson!("no"))
        );
        assert_eq!(
            ev_err(bson!({"$cond": {"if": 1, "then": 2}}), d.clone()).code,
            17080
        );
        assert_eq!(
            ev(bson!({"$ifNull": ["$n", "$missing", "d"]}), d.clone()),
            Some(bson!("d"))
        );
        assert_eq!(
            ev(bson!({"$ifNull": ["$a", "d"]}), d.clone()),
            Some(bson!(1))
        );
        assert_eq!(
            ev(
                bson!({"$switch": {"branches": [{"case": {"$eq": ["$a", 2]}, "then": "two"}, {"case": {"$eq": ["$a", 1]}, "then": "one"}], "default": "other"}}),
                d.clone()
            ),
            Some(bson!("one"))
        );
        assert_eq!(
            ev_err(bson!({"$switch": {"branches": []}}), d.clone()).code,
            40066
        );
    }

    #[test]
    fn strings() {
        let d = doc! {"s": "Hello", "n": null};
        assert_eq!(
            ev(bson!({"$concat": ["$s", " ", "World"]}), d.clone()),
            Some(bson!("Hello World"))
        );
        assert_eq!(
            ev(bson!({"$concat": ["$s", "$n"]}), d.clone()),
            Some(Bson::Null)
        );
        assert_eq!(ev_err(bson!({"$concat": ["$s", 1]}), d.clone()).code, 16702);
        assert_eq!(
            ev(bson!({"$toUpper": "$s"}), d.clone()),
            Some(bson!("HELLO"))
        );
        assert_eq!(
            ev(bson!({"$toLower": "$s"}), d.clone()),
            Some(bson!("hello"))
        );
        assert_eq!(ev(bson!({"$toLower": "$n"}), d.clone()), Some(bson!("")));
        assert_eq!(
            ev(bson!({"$substr": ["$s", 1, 3]}), d.clone()),
            Some(bson!("ell"))
        );
        assert_eq!(
            ev(bson!({"$substrCP": ["$s", 1, -1]}), d.clone()),
            Some(bson!("ello"))
        );
        assert_eq!(ev(bson!({"$strLenCP": "héllo"}), d.clone()), Some(bson!(5)));
        assert_eq!(
            ev(bson!({"$strLenBytes": "héllo"}), d.clone()),
            Some(bson!(6))
        );
        assert_eq!(
            ev(bson!({"$split": ["a,b", ","]}), d.clone()),
            Some(bson!(["a", "b"]))
        );
        assert_eq!(
            ev(bson!({"$trim": {"input": "  x "}}), d.clone()),
            Some(bson!("x"))
        );
        assert_eq!(
            ev(bson!({"$ltrim": {"input": "xxy", "chars": "x"}}), d.clone()),
            Some(bson!("y"))
        );
        assert_eq!(
            ev(bson!({"$strcasecmp": ["ab", "AB"]}), d.clone()),
            Some(bson!(0))
        );
        assert_eq!(
            ev(
                bson!({"$regexMatch": {"input": "$s", "regex": "^h", "options": "i"}}),
                d.clone()
            ),
            Some(bson!(true))
        );
        assert_eq!(ev(bson!({"$toString": 5}), d.clone()), Some(bson!("5")));
        assert_eq!(ev(bson!({"$toInt": "42"}), d.clone()), Some(bson!(42)));
        assert_eq!(ev(bson!({"$toLong": 4.7}), d.clone()), Some(Bson::Int64(4)));
        assert_eq!(ev(bson!({"$toDouble": "1.5"}), d.clone()), Some(bson!(1.5)));
        assert_eq!(ev(bson!({"$toBool": 0}), d.clone()), Some(bson!(false)));
        assert_eq!(ev_err(bson!({"$toInt": "x"}), d.clone()).code, 241);
        assert_eq!(ev(bson!({"$type": "$s"}), d.clone()), Some(bson!("string")));
        assert_eq!(
            ev(bson!({"$type": "$missing"}), d.clone()),
            Some(bson!("missing"))
        );
    }

    #[test]
    fn arrays_and_objects() {
        let d = doc! {"a": [1, 2, 3], "o": {"x": 1}};
        assert_eq!(ev(bson!({"$size": "$a"}), d.clone()), Some(bson!(3)));
        assert_eq!(ev_err(bson!({"$size": "$missing"}), d.clone()).code, 17124);
        assert_eq!(
            ev(bson!({"$arrayElemAt": ["$a", 0]}), d.clone()),
            Some(bson!(1))
        );
        assert_eq!(
            ev(bson!({"$arrayElemAt": ["$a", -1]}), d.clone()),
            Some(bson!(3))
        );
        assert_eq!(ev(bson!({"$arrayElemAt": ["$a", 5]}), d.clone()), None);
        assert_eq!(ev(bson!({"$first": "$a"}), d.clone()), Some(bson!(1)));
        assert_eq!(ev(bson!({"$last": "$a"}), d.clone()), Some(bson!(3)));
        assert_eq!(ev(bson!({"$in": [2, "$a"]}), d.clone()), Some(bson!(true)));
        assert_eq!(
            ev_err(bson!({"$in": [2, "$missing"]}), d.clone()).code,
            40081
        );
        assert_eq!(ev(bson!({"$isArray": "$a"}), d.clone()), Some(bson!(true)));
        assert_eq!(
            ev(bson!({"$concatArrays": ["$a", [4]]}), d.clone()),
            Some(bson!([1, 2, 3, 4]))
        );
        assert_eq!(
            ev(bson!({"$slice": ["$a", -2]}), d.clone()),
            Some(bson!([2, 3]))
        );
        assert_eq!(
            ev(bson!({"$slice": ["$a", 1, 1]}), d.clone()),
            Some(bson!([2]))
        );
        assert_eq!(
            ev(bson!({"$reverseArray": "$a"}), d.clone()),
            Some(bson!([3, 2, 1]))
        );
        assert_eq!(
            ev(bson!({"$range": [0, 6, 2]}), d.clone()),
            Some(bson!([0, 2, 4]))
        );
        assert_eq!(
            ev(bson!({"$indexOfArray": ["$a", 3]}), d.clone()),
            Some(bson!(2))
        );
        assert_eq!(
            ev(
                bson!({"$filter": {"input": "$a", "as": "x", "cond": {"$gt": ["$$x", 1]}}}),
                d.clone()
            ),
            Some(bson!([2, 3]))
        );
        assert_eq!(
            ev(
                bson!({"$map": {"input": "$a", "in": {"$multiply": ["$$this", 10]}}}),
                d.clone()
            ),
            Some(bson!([10, 20, 30]))
        );
        assert_eq!(
            ev(
                bson!({"$reduce": {"input": "$a", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}),
                d.clone()
            ),
            Some(bson!(6))
        );
        assert_eq!(
            ev(
                bson!({"$let": {"vars": {"t": 5}, "in": {"$add": ["$$t", 1]}}}),
                d.clone()
            ),
            Some(bson!(6))
        );
        assert_eq!(
            ev(bson!({"$mergeObjects": ["$o", {"y": 2}, null]}), d.clone()),
            Some(bson!({"x": 1, "y": 2}))
        );
        assert_eq!(
            ev(bson!({"$objectToArray": "$o"}), d.clone()),
            Some(bson!([{"k": "x", "v": 1}]))
        );
        assert_eq!(
            ev(bson!({"$arrayToObject": [[["a", 1]]]}), d.clone()),
            Some(bson!({"a": 1}))
        );
        assert_eq!(
            ev_err(bson!({"$arrayToObject": [[["a\0", 1]]]}), d.clone()).code,
            4940400
        );
        assert_eq!(ev(bson!({"$sum": "$a"}), d.clone()), Some(bson!(6)));
        assert_eq!(ev(bson!({"$avg": "$a"}), d.clone()), Some(bson!(2.0)));
        assert_eq!(ev(bson!({"$max": "$a"}), d.clone()), Some(bson!(3)));
        assert_eq!(ev(bson!({"$min": [5, 2, null]}), d.clone()), Some(bson!(2)));
        assert_eq!(
            ev(bson!({"$setUnion": [[1, 2], [2, 3]]}), d.clone()),
            Some(bson!([1, 2, 3]))
        );
        assert_eq!(
            ev(bson!({"$setIntersection": [[1, 2], [2, 3]]}), d.clone()),
            Some(bson!([2]))
        );
    }

    #[test]
    fn dates() {
        // 2021-03-04T05:06:07.089Z
        let d = doc! {"t": DateTime::from_millis(1614834367089)};
        assert_eq!(ev(bson!({"$year": "$t"}), d.clone()), Some(bson!(2021)));
        assert_eq!(ev(bson!({"$month": "$t"}), d.clone()), Some(bson!(3)));
        assert_eq!(ev(bson!({"$dayOfMonth": "$t"}), d.clone()), Some(bson!(4)));
        assert_eq!(ev(bson!({"$hour": "$t"}), d.clone()), Some(bson!(5)));
        assert_eq!(ev(bson!({"$minute": "$t"}), d.clone()), Some(bson!(6)));
        assert_eq!(ev(bson!({"$second": "$t"}), d.clone()), Some(bson!(7)));
        assert_eq!(
            ev(bson!({"$millisecond": "$t"}), d.clone()),
            Some(bson!(89))
        );
        assert_eq!(ev(bson!({"$dayOfWeek": "$t"}), d.clone()), Some(bson!(5))); // Thursday
        assert_eq!(ev(bson!({"$dayOfYear": "$t"}), d.clone()), Some(bson!(63)));
    }
}
