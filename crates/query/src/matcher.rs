//! The query matcher: MongoDB query filters evaluated against documents.
//!
//! Semantics follow mongod: a field holding an array matches when any element matches or (for
//! equality and comparisons with an array operand) the whole array does; `{f: null}` also
//! matches a missing `f`; negations (`$ne`, `$nin`, `$not`, `$exists: false`) negate the whole
//! path predicate; comparisons only compare values of the same canonical type bracket.

use std::cmp::Ordering;

use bson::{Bson, Document};

use crate::compare::{bson_equal, canonical_type_rank, compare_bson, type_name, Num};
use crate::error::{DocError, DocResult};
use crate::expr::{self, Expr};
use crate::geo::{GeoQuery, NearQuery};
use crate::path::{traverse_path, Reached};
use crate::regex::compile_regex;
use crate::vars::{self, Scope};
use std::sync::Arc;

/// A parsed query filter.
#[derive(Clone, Debug)]
pub struct Matcher {
    root: Node,
    /// The filter's `$text` operand: the planner answers it from the text index (the matcher
    /// itself holds every document to it, as mongod's does: the text stage filtered them).
    text: Option<Box<crate::text::TextOperand>>,
    /// The filter's `$near`/`$nearSphere` (field, operand): the planner answers it from a
    /// 2dsphere index in distance order ([`Matcher::new_for_find`]).
    near: Option<(String, Arc<GeoQuery>)>,
    /// The command's `let` variables, which `$expr` reads.
    scope: Scope,
}

#[derive(Clone, Debug)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Field(String, Pred),
    Expr(Box<Expr>),
    JsonSchema(Box<crate::jsonschema::Schema>),
    Const(bool),
    /// `$text`: true for every document the text index scan returned.
    Text(Box<crate::text::TextOperand>),
    /// `$where`: a JavaScript function of the document (crate::js).
    Where(Box<js::Func>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum CmpOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

#[derive(Clone, Debug)]
enum Pred {
    Eq(Bson),
    Cmp(CmpOp, Bson),
    In(Vec<Bson>, Vec<RegexPred>),
    Exists(bool),
    Type(Vec<TypeSel>),
    Regex(RegexPred),
    Size(i64),
    /// `$all`: every sub-predicate must hold on the path; empty never matches.
    All(Vec<Pred>),
    ElemMatchObj(Box<Node>),
    ElemMatchVal(Vec<Pred>),
    Mod(i64, i64),
    Not(Box<Pred>),
    And(Vec<Pred>),
    /// `$geoWithin`, `$geoIntersects`, `$near`, `$nearSphere` (crate::geo).
    Geo(Arc<GeoQuery>),
}

#[derive(Clone, Debug)]
pub(crate) struct RegexPred {
    re: crate::regex::Regex,
    pattern: String,
    options: String,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum TypeSel {
    Code(i32),
    Number,
}

impl RegexPred {
    fn new(pattern: &str, options: &str) -> DocResult<RegexPred> {
        Ok(RegexPred {
            re: compile_regex(pattern, options)?,
            pattern: pattern.to_string(),
            options: options.to_string(),
        })
    }

    fn matches(&self, v: &Bson) -> bool {
        match v {
            Bson::String(s) | Bson::Symbol(s) => self.re.is_match(s),
            Bson::RegularExpression(r) => r.pattern == self.pattern && r.options == self.options,
            _ => false,
        }
    }
}

fn is_truthy_exists(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        other => match Num::of(other) {
            Some(n) => n.as_f64() != 0.0,
            None => true,
        },
    }
}

/// The BSON type code of a value (`$type`'s numbers).
pub fn bson_type_code(v: &Bson) -> i32 {
    match v {
        Bson::Double(_) => 1,
        Bson::String(_) => 2,
        Bson::Document(_) => 3,
        Bson::Array(_) => 4,
        Bson::Binary(_) => 5,
        Bson::Undefined => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Null => 10,
        Bson::RegularExpression(_) => 11,
        Bson::DbPointer(_) => 12,
        Bson::JavaScriptCode(_) => 13,
        Bson::Symbol(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::Int32(_) => 16,
        Bson::Timestamp(_) => 17,
        Bson::Int64(_) => 18,
        Bson::Decimal128(_) => 19,
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
    }
}

/// Parses one `$type` operand element (number code or alias) into a selector.
fn parse_type_sel(v: &Bson) -> DocResult<TypeSel> {
    match v {
        Bson::String(s) => {
            if s == "number" {
                return Ok(TypeSel::Number);
            }
            crate::compare::TYPE_CODES
                .iter()
                .find(|(n, _)| n == s)
                .map(|(_, c)| TypeSel::Code(*c))
                .ok_or_else(|| DocError::bad_value(format!("Unknown type name alias: {s}")))
        }
        other => match Num::of(other) {
            Some(n) => {
                let code = n.as_i64_exact();
                match code {
                    Some(c) if (1..=19).contains(&c) || c == -1 || c == 127 => {
                        Ok(TypeSel::Code(c as i32))
                    }
                    _ => Err(DocError::bad_value(format!(
                        "Invalid numerical type code: {}",
                        crate::compare::shell_repr(other)
                    ))),
                }
            }
            None => Err(DocError::type_mismatch(
                "type must be represented as a number or a string",
            )),
        },
    }
}

fn is_operator_doc(v: &Bson) -> bool {
    matches!(v, Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')))
}

fn parse_top(filter: &Document) -> DocResult<Node> {
    let mut children = Vec::new();
    for (k, v) in filter {
        if let Some(op) = k.strip_prefix('$') {
            match op {
                "and" | "or" | "nor" => {
                    let Bson::Array(arr) = v else {
                        return Err(DocError::bad_value(format!("{k} must be an array")));
                    };
                    if arr.is_empty() {
                        return Err(DocError::bad_value(
                            "$and/$or/$nor must be a nonempty array",
                        ));
                    }
                    let mut subs = Vec::new();
                    for e in arr {
                        let Bson::Document(d) = e else {
                            return Err(DocError::bad_value(
                                "$or/$and/$nor entries need to be full objects",
                            ));
                        };
                        subs.push(parse_top(d)?);
                    }
                    children.push(match op {
                        "and" => Node::And(subs),
                        "or" => Node::Or(subs),
                        _ => Node::Nor(subs),
                    });
                }
                "comment" => {}
                "expr" => children.push(Node::Expr(Box::new(expr::parse_expr(v)?))),
                "alwaysTrue" => children.push(Node::Const(true)),
                "alwaysFalse" => children.push(Node::Const(false)),
                "jsonSchema" => {
                    let Bson::Document(s) = v else {
                        return Err(DocError::type_mismatch("$jsonSchema must be an object"));
                    };
                    children.push(Node::JsonSchema(Box::new(
                        crate::jsonschema::Schema::parse(s)?,
                    )))
                }
                "text" => children.push(Node::Text(Box::new(crate::text::TextOperand::parse(v)?))),
                "where" => children.push(Node::Where(Box::new(crate::js::parse_where(v)?))),
                "sampleRate" => {
                    return Err(DocError::with_code(
                        238,
                        "NotImplemented",
                        format!("{k} is not supported"),
                    ))
                }
                _ => {
                    return Err(DocError::bad_value(format!(
                        "unknown top level operator: {k}. If you have a field name that starts \
                         with a '$' symbol, consider using $getField or $setField."
                    )))
                }
            }
        } else {
            children.push(parse_field(k, v)?);
        }
    }
    Ok(if children.len() == 1 {
        children.pop().expect("one child")
    } else {
        Node::And(children)
    })
}

fn parse_field(path: &str, v: &Bson) -> DocResult<Node> {
    crate::limits::check_match_path(path)?;
    let pred = match v {
        Bson::RegularExpression(r) => Pred::Regex(RegexPred::new(&r.pattern, &r.options)?),
        Bson::Document(d) if is_operator_doc(v) => parse_operators(d)?,
        other => Pred::Eq(other.clone()),
    };
    Ok(Node::Field(path.to_string(), pred))
}

/// Parses an operator document (`{$gt: 1, $lt: 5}`) into one predicate (a conjunction).
fn parse_operators(d: &Document) -> DocResult<Pred> {
    let mut preds = Vec::new();
    let options = d.get("$options");
    if options.is_some() && !d.contains_key("$regex") {
        return Err(DocError::bad_value("$options needs a $regex"));
    }
    if let Some(op) = ["$near", "$nearSphere"]
        .into_iter()
        .find(|k| d.contains_key(*k))
    {
        // The distance bounds are siblings of the operator, parsed with it.
        return Ok(Pred::Geo(Arc::new(GeoQuery::parse_near(op, d)?)));
    }
    for (op, arg) in d {
        match op.as_str() {
            "$options" => {}
            "$regex" => {
                let opts = match options {
                    None => None,
                    Some(Bson::String(s)) => Some(s.clone()),
                    Some(_) => return Err(DocError::bad_value("$options has to be a string")),
                };
                preds.push(Pred::Regex(parse_regex_operand(arg, opts)?));
            }
            _ => preds.push(parse_operator(op, arg)?),
        }
    }
    Ok(if preds.len() == 1 {
        preds.pop().expect("one")
    } else {
        Pred::And(preds)
    })
}

fn parse_regex_operand(arg: &Bson, opts: Option<String>) -> DocResult<RegexPred> {
    match arg {
        Bson::String(p) => RegexPred::new(p, opts.as_deref().unwrap_or("")),
        Bson::RegularExpression(r) => {
            if opts.is_some() && !r.options.is_empty() {
                return Err(DocError::with_code(
                    51075,
                    "Location51075",
                    "options set in both $regex and $options",
                ));
            }
            RegexPred::new(&r.pattern, opts.as_deref().unwrap_or(&r.options))
        }
        _ => Err(DocError::bad_value("$regex has to be a string")),
    }
}

fn parse_in_list(op: &str, arg: &Bson) -> DocResult<(Vec<Bson>, Vec<RegexPred>)> {
    let Bson::Array(arr) = arg else {
        return Err(DocError::bad_value(format!("{op} needs an array")));
    };
    let mut vals = Vec::new();
    let mut res = Vec::new();
    for e in arr {
        match e {
            Bson::RegularExpression(r) => res.push(RegexPred::new(&r.pattern, &r.options)?),
            e if is_operator_doc(e) => {
                return Err(DocError::bad_value("cannot nest $ under $in"));
            }
            e => vals.push(e.clone()),
        }
    }
    Ok((vals, res))
}

fn parse_operator(op: &str, arg: &Bson) -> DocResult<Pred> {
    Ok(match op {
        "$eq" => Pred::Eq(arg.clone()),
        "$ne" => Pred::Not(Box::new(Pred::Eq(arg.clone()))),
        "$gt" | "$gte" | "$lt" | "$lte" => {
            if let Bson::RegularExpression(_) = arg {
                return Err(DocError::bad_value(format!(
                    "Can't have RegEx as arg to {op}"
                )));
            }
            let c = match op {
                "$gt" => CmpOp::Gt,
                "$gte" => CmpOp::Gte,
                "$lt" => CmpOp::Lt,
                _ => CmpOp::Lte,
            };
            Pred::Cmp(c, arg.clone())
        }
        "$in" => {
            let (v, r) = parse_in_list(op, arg)?;
            Pred::In(v, r)
        }
        "$nin" => {
            let (v, r) = parse_in_list(op, arg)?;
            Pred::Not(Box::new(Pred::In(v, r)))
        }
        "$exists" => Pred::Exists(is_truthy_exists(arg)),
        "$type" => {
            let sels = match arg {
                Bson::Array(a) => a
                    .iter()
                    .map(parse_type_sel)
                    .collect::<DocResult<Vec<_>>>()?,
                other => vec![parse_type_sel(other)?],
            };
            Pred::Type(sels)
        }
        "$size" => parse_size(arg)?,
        "$all" => parse_all(arg)?,
        "$elemMatch" => parse_elem_match(arg)?,
        "$mod" => parse_mod(arg)?,
        "$not" => match arg {
            Bson::RegularExpression(r) => Pred::Not(Box::new(Pred::Regex(RegexPred::new(
                &r.pattern, &r.options,
            )?))),
            Bson::Document(d) => {
                if d.is_empty() {
                    return Err(DocError::bad_value("$not cannot be empty"));
                }
                if let Some(k) = d.keys().find(|k| !k.starts_with('$')) {
                    return Err(DocError::bad_value(format!("unknown operator: {k}")));
                }
                Pred::Not(Box::new(parse_operators(d)?))
            }
            _ => return Err(DocError::bad_value("$not needs a regex or a document")),
        },
        "$comment" => Pred::And(vec![]),
        "$geoWithin" | "$within" => Pred::Geo(Arc::new(GeoQuery::parse_within(arg)?)),
        "$geoIntersects" => Pred::Geo(Arc::new(GeoQuery::parse_intersects(arg)?)),
        "$maxDistance" | "$minDistance" => {
            return Err(DocError::bad_value(format!(
                "{op} is only valid beside $near or $nearSphere"
            )))
        }
        "$bitsAllSet" | "$bitsAnySet" | "$bitsAllClear" | "$bitsAnyClear" => {
            return Err(DocError::with_code(
                238,
                "NotImplemented",
                format!("{op} is not supported"),
            ))
        }
        other => return Err(DocError::bad_value(format!("unknown operator: {other}"))),
    })
}

/// `$all`: values (or regexes) that must all be present, or all `$elemMatch` conditions.
fn parse_all(arg: &Bson) -> DocResult<Pred> {
    let Bson::Array(arr) = arg else {
        return Err(DocError::bad_value("$all needs an array"));
    };
    let mut preds = Vec::new();
    let elem_form = matches!(arr.first(), Some(Bson::Document(d)) if d.keys().next().map(String::as_str) == Some("$elemMatch"));
    for e in arr {
        if elem_form {
            match e {
                Bson::Document(d)
                    if d.len() == 1
                        && d.keys().next().map(String::as_str) == Some("$elemMatch") =>
                {
                    preds.push(parse_operator(
                        "$elemMatch",
                        d.get("$elemMatch").expect("key"),
                    )?)
                }
                _ => return Err(DocError::bad_value("$all/$elemMatch has to be consistent")),
            }
        } else {
            match e {
                Bson::RegularExpression(r) => {
                    preds.push(Pred::Regex(RegexPred::new(&r.pattern, &r.options)?))
                }
                e if is_operator_doc(e) => {
                    return Err(DocError::bad_value("no $ expressions in $all"))
                }
                e => preds.push(Pred::Eq(e.clone())),
            }
        }
    }
    Ok(Pred::All(preds))
}

/// `$elemMatch`: conditions on one element's value, or a query on one element document.
fn parse_elem_match(arg: &Bson) -> DocResult<Pred> {
    let Bson::Document(d) = arg else {
        return Err(DocError::bad_value("$elemMatch needs an Object"));
    };
    let value_form = d.keys().next().is_some_and(|k| {
        k.starts_with('$') && !matches!(k.as_str(), "$and" | "$or" | "$nor" | "$expr" | "$where")
    });
    Ok(if value_form {
        let mut preds = Vec::new();
        for (op, a) in d {
            if op == "$options" {
                continue;
            }
            if op == "$regex" {
                let opts = d.get_str("$options").ok().map(str::to_string);
                preds.push(Pred::Regex(parse_regex_operand(a, opts)?));
            } else {
                preds.push(parse_operator(op, a)?);
            }
        }
        Pred::ElemMatchVal(preds)
    } else {
        let node = parse_top(d)?;
        if node.has_where() {
            return Err(DocError::bad_value(
                "$where is not allowed inside of a $elemMatch",
            ));
        }
        if node.text_nodes().next().is_some() {
            return Err(DocError::bad_value(
                "$text can only be applied to the top-level document",
            ));
        }
        Pred::ElemMatchObj(Box::new(node))
    })
}

/// `$mod`: `[divisor, remainder]`, both truncated to integers.
fn parse_mod(arg: &Bson) -> DocResult<Pred> {
    let Bson::Array(a) = arg else {
        return Err(DocError::bad_value("malformed mod, needs to be an array"));
    };
    if a.len() < 2 {
        return Err(DocError::bad_value("malformed mod, not enough elements"));
    }
    if a.len() > 2 {
        return Err(DocError::bad_value("malformed mod, too many elements"));
    }
    let d =
        Num::of(&a[0]).ok_or_else(|| DocError::bad_value("malformed mod, divisor not a number"))?;
    let r = Num::of(&a[1])
        .ok_or_else(|| DocError::bad_value("malformed mod, remainder not a number"))?;
    let d = d.as_f64().trunc() as i64;
    if d == 0 {
        return Err(DocError::bad_value("divisor cannot be 0"));
    }
    Ok(Pred::Mod(d, r.as_f64().trunc() as i64))
}

/// `$size`: a whole, non-negative number.
fn parse_size(arg: &Bson) -> DocResult<Pred> {
    let Some(n) = Num::of(arg) else {
        return Err(DocError::bad_value("$size needs a number"));
    };
    let Some(i) = n.as_i64_exact() else {
        return Err(DocError::bad_value("$size must be a whole number"));
    };
    if i < 0 {
        return Err(DocError::bad_value("$size may not be negative"));
    }
    Ok(Pred::Size(i))
}

impl Pred {
    /// Whether the predicate, applied to one value as is (no array expansion), holds.
    fn matches_single(&self, v: &Bson) -> bool {
        match self {
            Pred::Eq(x) => match x {
                Bson::Null => matches!(v, Bson::Null),
                x => bson_equal(v, x),
            },
            Pred::Cmp(op, x) => cmp_matches(*op, v, x),
            Pred::In(vals, res) => {
                vals.iter().any(|x| Pred::Eq(x.clone()).matches_single(v))
                    || res.iter().any(|r| r.matches(v))
            }
            Pred::Exists(b) => *b,
            Pred::Type(sels) => {
                let code = bson_type_code(v);
                sels.iter().any(|s| match s {
                    TypeSel::Code(c) => *c == code,
                    TypeSel::Number => matches!(code, 1 | 16 | 18 | 19),
                })
            }
            Pred::Regex(r) => r.matches(v),
            Pred::Size(n) => matches!(v, Bson::Array(a) if a.len() as i64 == *n),
            Pred::All(ps) => !ps.is_empty() && ps.iter().all(|p| p.matches_single(v)),
            Pred::ElemMatchObj(node) => match v {
                Bson::Array(a) => a.iter().any(|e| match e {
                    Bson::Document(d) => node.eval(d, &vars::EMPTY, &mut None),
                    Bson::Array(inner) => node.eval(&array_as_doc(inner), &vars::EMPTY, &mut None),
                    _ => false,
                }),
                _ => false,
            },
            Pred::ElemMatchVal(ps) => match v {
                Bson::Array(a) => a.iter().any(|e| ps.iter().all(|p| p.matches_single(e))),
                _ => false,
            },
            Pred::Mod(d, r) => match Num::of(v) {
                Some(n) => {
                    let f = n.as_f64();
                    if !f.is_finite() {
                        return false;
                    }
                    let i = match n {
                        Num::I32(i) => i as i64,
                        Num::I64(i) => i,
                        _ => f.trunc() as i64,
                    };
                    i.wrapping_rem(*d) == *r
                }
                None => false,
            },
            Pred::Not(p) => !p.matches_single(v),
            Pred::And(ps) => ps.iter().all(|p| p.matches_single(v)),
            Pred::Geo(g) => g.matches(v),
        }
    }

    /// The `$near` operands in the predicate, and whether each is the predicate itself or a
    /// conjunct of it (not under `$not` or `$elemMatch`).
    fn near_operands(&self, direct: bool, out: &mut Vec<(Arc<GeoQuery>, bool)>) {
        match self {
            Pred::Geo(g) if matches!(**g, GeoQuery::Near(_)) => out.push((g.clone(), direct)),
            Pred::And(ps) => ps.iter().for_each(|p| p.near_operands(direct, out)),
            Pred::Not(p) => p.near_operands(false, out),
            Pred::All(ps) | Pred::ElemMatchVal(ps) => {
                ps.iter().for_each(|p| p.near_operands(false, out))
            }
            Pred::ElemMatchObj(node) => {
                let mut inner = Vec::new();
                node.collect_near(false, &mut inner);
                out.extend(inner.into_iter().map(|(_, g, _)| (g, false)));
            }
            _ => {}
        }
    }

    /// For `$elemMatch`, the index of the first matching element.
    fn elem_match_index(&self, v: &Bson) -> Option<usize> {
        let Bson::Array(a) = v else { return None };
        match self {
            Pred::ElemMatchObj(node) => a.iter().position(|e| match e {
                Bson::Document(d) => node.eval(d, &vars::EMPTY, &mut None),
                Bson::Array(inner) => node.eval(&array_as_doc(inner), &vars::EMPTY, &mut None),
                _ => false,
            }),
            Pred::ElemMatchVal(ps) => a
                .iter()
                .position(|e| ps.iter().all(|p| p.matches_single(e))),
            _ => None,
        }
    }

    fn matches_missing(&self) -> bool {
        match self {
            Pred::Eq(Bson::Null) => true,
            Pred::Cmp(CmpOp::Gte | CmpOp::Lte, Bson::Null) => true,
            Pred::In(vals, _) => vals.iter().any(|v| matches!(v, Bson::Null)),
            _ => false,
        }
    }

    /// Whether the predicate looks at the elements of an array at the leaf.
    fn expands_arrays(&self) -> bool {
        !matches!(
            self,
            Pred::Size(_)
                | Pred::ElemMatchObj(_)
                | Pred::ElemMatchVal(_)
                | Pred::Exists(_)
                | Pred::Geo(_)
        )
    }

    /// Evaluates the predicate over everything a path reached.
    fn eval_path(&self, cands: &[Reached], pos: &mut Option<usize>) -> bool {
        match self {
            Pred::Not(p) => !p.eval_path(cands, &mut None),
            Pred::And(ps) => ps.iter().all(|p| p.eval_path(cands, pos)),
            Pred::All(ps) => !ps.is_empty() && ps.iter().all(|p| p.eval_path(cands, pos)),
            Pred::Exists(b) => cands.iter().any(|c| c.value.is_some()) == *b,
            _ => {
                for c in cands {
                    let hit = match c.value {
                        None => self.matches_missing().then_some(c.array_index),
                        Some(v) => {
                            if self.matches_single(v) {
                                Some(c.array_index.or_else(|| self.elem_match_index(v)))
                            } else if let (Bson::Array(a), true) = (v, self.expands_arrays()) {
                                a.iter()
                                    .position(|e| self.matches_single(e))
                                    .map(|i| c.array_index.or(Some(i)))
                            } else {
                                None
                            }
                        }
                    };
                    if let Some(idx) = hit {
                        if pos.is_none() {
                            *pos = idx;
                        }
                        return true;
                    }
                }
                false
            }
        }
    }
}

fn array_as_doc(a: &[Bson]) -> Document {
    a.iter()
        .enumerate()
        .map(|(i, v)| (i.to_string(), v.clone()))
        .collect()
}

fn cmp_matches(op: CmpOp, v: &Bson, x: &Bson) -> bool {
    // NaN only compares (inclusively) equal to NaN.
    let x_nan = Num::of(x).is_some_and(Num::is_nan);
    let v_nan = Num::of(v).is_some_and(Num::is_nan);
    if x_nan || v_nan {
        return x_nan && v_nan && matches!(op, CmpOp::Gte | CmpOp::Lte);
    }
    let o = match x {
        Bson::MinKey | Bson::MaxKey => compare_bson(v, x),
        _ => {
            if canonical_type_rank(v) != canonical_type_rank(x) {
                return false;
            }
            compare_bson(v, x)
        }
    };
    match op {
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Gte => o != Ordering::Less,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Lte => o != Ordering::Greater,
    }
}

impl Node {
    /// Every `$near` in the tree: (field, operand, at the top level).
    fn collect_near(&self, top: bool, out: &mut Vec<(String, Arc<GeoQuery>, bool)>) {
        match self {
            Node::And(ns) => ns.iter().for_each(|n| n.collect_near(top, out)),
            Node::Or(ns) | Node::Nor(ns) => ns.iter().for_each(|n| n.collect_near(false, out)),
            Node::Field(path, pred) => {
                let mut found = Vec::new();
                pred.near_operands(true, &mut found);
                for (g, direct) in found {
                    out.push((path.clone(), g, top && direct));
                }
            }
            _ => {}
        }
    }

    fn eval(&self, doc: &Document, scope: &Scope, pos: &mut Option<usize>) -> bool {
        match self {
            Node::And(ns) => ns.iter().all(|n| n.eval(doc, scope, pos)),
            Node::Or(ns) => ns.iter().any(|n| n.eval(doc, scope, pos)),
            Node::Nor(ns) => !ns.iter().any(|n| n.eval(doc, scope, &mut None)),
            Node::Field(path, pred) => pred.eval_path(&traverse_path(doc, path), pos),
            Node::Expr(e) => e
                .eval(&expr::Ctx::scoped(doc, scope))
                .map(|v| expr::truthy(v.as_ref()))
                .unwrap_or(false),
            Node::JsonSchema(s) => s.matches_doc(doc),
            Node::Const(b) => *b,
            Node::Text(_) => true,
            Node::Where(f) => crate::js::where_matches(f, doc),
        }
    }

    /// Whether the tree holds a `$where`.
    fn has_where(&self) -> bool {
        match self {
            Node::Where(_) => true,
            Node::And(ns) | Node::Or(ns) | Node::Nor(ns) => ns.iter().any(Node::has_where),
            _ => false,
        }
    }

    /// The `$text` nodes of a tree with what encloses each: (under `$or`, under `$nor`).
    fn text_nodes(&self) -> impl Iterator<Item = (&crate::text::TextOperand, bool, bool)> {
        let mut out = Vec::new();
        self.collect_text(false, false, 0, &mut out);
        out.into_iter()
    }

    fn collect_text<'a>(
        &'a self,
        or: bool,
        nor: bool,
        depth: usize,
        out: &mut Vec<(&'a crate::text::TextOperand, bool, bool)>,
    ) {
        // Parsing bounded the nesting already; this walk follows the same tree.
        debug_assert!(depth <= crate::limits::MAX_BSON_DEPTH);
        match self {
            Node::Text(t) => out.push((t, or, nor)),
            Node::And(ns) => ns
                .iter()
                .for_each(|n| n.collect_text(or, nor, depth + 1, out)),
            Node::Or(ns) => ns
                .iter()
                .for_each(|n| n.collect_text(true, nor, depth + 1, out)),
            Node::Nor(ns) => ns
                .iter()
                .for_each(|n| n.collect_text(or, true, depth + 1, out)),
            _ => {}
        }
    }
}

impl Matcher {
    /// Parses a query filter. Unknown operators get BadValue (2), as mongod answers. `$text`
    /// is refused: only a query the planner answers may hold one ([`Matcher::new_with_text`]).
    pub fn new(filter: &Document) -> DocResult<Matcher> {
        let m = Self::new_with_text(filter)?;
        if m.text.is_some() {
            return Err(DocError::bad_value("$text is not allowed in this context"));
        }
        Ok(m)
    }

    /// Parses the filter of a count, update, delete or a pipeline's `$match`, which may hold
    /// one `$text` (at the top level or in `$and`; mongod's errors elsewhere) but no `$near`
    /// (mongod's 5626500: only a find orders by distance).
    pub fn new_with_text(filter: &Document) -> DocResult<Matcher> {
        let m = Self::new_for_find(filter)?;
        if m.near.is_some() {
            return Err(DocError::with_code(
                5626500,
                "Location5626500",
                "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators require sorting geospatial data. If you do not need sort, consider using $geoWithin instead.",
            ));
        }
        Ok(m)
    }

    /// Parses the filter of a find (or explain of one): `$text` as [`Matcher::new_with_text`]
    /// and one `$near`/`$nearSphere`, at the top level (mongod's BadValue elsewhere).
    pub fn new_for_find(filter: &Document) -> DocResult<Matcher> {
        let root = parse_top(filter)?;
        let mut nears = Vec::new();
        root.collect_near(true, &mut nears);
        if nears.len() > 1 {
            return Err(DocError::bad_value("Too many geoNear expressions"));
        }
        let near = match nears.pop() {
            Some((_, _, false)) => {
                return Err(DocError::bad_value("geoNear must be top-level expr"))
            }
            Some((path, g, true)) => Some((path, g)),
            None => None,
        };
        let mut text = None;
        for (t, or, nor) in root.text_nodes() {
            if text.is_some() {
                return Err(DocError::bad_value("Too many text expressions"));
            }
            if nor {
                return Err(DocError::bad_value("text expression not allowed in nor"));
            }
            if or {
                // mongod answers a $text under $or only with an index union over every other
                // clause; flashdoc plans no index unions.
                return Err(DocError::with_code(
                    291,
                    "NoQueryExecutionPlans",
                    "error processing query: planner returned error :: caused by :: Failed to produce a solution for TEXT under OR - other non-TEXT clauses under OR have to be indexed as well.",
                ));
            }
            text = Some(Box::new(t.clone()));
        }
        if text.is_some() && near.is_some() {
            return Err(DocError::bad_value(
                "text and geoNear not allowed in same query",
            ));
        }
        Ok(Matcher {
            root,
            text,
            near,
            scope: Scope::default(),
        })
    }

    /// The filter's `$near` / `$nearSphere`: (field, operand).
    pub fn near(&self) -> Option<(&str, &NearQuery)> {
        match &self.near {
            Some((path, g)) => match &**g {
                GeoQuery::Near(n) => Some((path.as_str(), n)),
                _ => None,
            },
            None => None,
        }
    }

    /// The `$geoWithin` / `$geoIntersects` predicates every match must satisfy (top-level
    /// conjuncts), for the 2dsphere and 2d indexes.
    pub fn geo_conjuncts(&self) -> Vec<(&str, &GeoQuery)> {
        let mut out = Vec::new();
        let tops: Vec<&Node> = match &self.root {
            Node::And(ns) => ns.iter().collect(),
            n => vec![n],
        };
        for n in tops {
            if let Node::Field(path, pred) = n {
                let preds: Vec<&Pred> = match pred {
                    Pred::And(ps) => ps.iter().collect(),
                    p => vec![p],
                };
                for p in preds {
                    if let Pred::Geo(g) = p {
                        if !matches!(**g, GeoQuery::Near(_)) {
                            out.push((path.as_str(), &**g));
                        }
                    }
                }
            }
        }
        out
    }

    /// Whether the filter holds a `$where` (an aggregation's `$match` may not).
    pub fn has_where(&self) -> bool {
        self.root.has_where()
    }

    /// The filter's `$text` operand, if it has one.
    pub fn text(&self) -> Option<&crate::text::TextOperand> {
        self.text.as_deref()
    }

    /// The matcher with the command's `let` variables in scope for its `$expr`.
    pub fn with_scope(mut self, scope: &Scope) -> Matcher {
        self.scope = scope.clone();
        self
    }

    /// The command's `let` variables in scope for its `$expr`.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Whether `doc` matches the filter.
    pub fn matches(&self, doc: &Document) -> bool {
        self.root.eval(doc, &self.scope, &mut None)
    }

    /// Whether `doc` matches, and the array index the match was made at (mongod's
    /// "elemMatchKey", which the positional `$` update and projection operators use).
    pub fn matches_with_position(&self, doc: &Document) -> (bool, Option<usize>) {
        let mut pos = None;
        let m = self.root.eval(doc, &self.scope, &mut pos);
        (m, if m { pos } else { None })
    }

    /// Whether a filter matches a single value that stands for "the element" (used by `$pull`
    /// with an operator condition): the filter is the operator document.
    pub(crate) fn value_condition(cond: &Bson) -> DocResult<ValueCondition> {
        Ok(ValueCondition(match cond {
            Bson::RegularExpression(r) => Pred::Regex(RegexPred::new(&r.pattern, &r.options)?),
            Bson::Document(d) if is_operator_doc(cond) => parse_operators(d)?,
            other => Pred::Eq(other.clone()),
        }))
    }
}

/// A predicate on one value (no path), e.g. `{$gte: 6}` as `$pull` uses it.
#[derive(Clone, Debug)]
pub(crate) struct ValueCondition(Pred);

impl ValueCondition {
    pub(crate) fn matches(&self, v: &Bson) -> bool {
        self.0.matches_single(v)
    }
}

/// The name mongod uses for a value's type in messages ("int", "string", …).
pub fn bson_type_name(v: &Bson) -> &'static str {
    type_name(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc, oid::ObjectId, Regex};

    fn m(filter: Document, d: Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&d)
    }

    fn err(filter: Document) -> DocError {
        Matcher::new(&filter).unwrap_err()
    }

    #[test]
    fn equality_and_arrays() {
        assert!(m(doc! {"a": 1}, doc! {"a": 1}));
        assert!(m(doc! {"a": 1}, doc! {"a": 1.0}));
        assert!(m(doc! {"a": 1}, doc! {"a": Bson::Int64(1)}));
        assert!(!m(doc! {"a": 1}, doc! {"a": "1"}));
        assert!(m(doc! {"a": 2}, doc! {"a": [1, 2, 3]}));
        assert!(m(doc! {"a": [1, 2]}, doc! {"a": [1, 2]}));
        assert!(!m(doc! {"a": [2, 1]}, doc! {"a": [1, 2]}));
        assert!(m(doc! {"a": [1, 2]}, doc! {"a": [[1, 2], 3]}));
        assert!(m(doc! {"a": {"b": 1}}, doc! {"a": {"b": 1}}));
        assert!(!m(doc! {"a": {"b": 1}}, doc! {"a": {"b": 1, "c": 2}}));
        assert!(!m(
            doc! {"a": {"b": 1, "c": 2}},
            doc! {"a": {"c": 2, "b": 1}}
        ));
        assert!(m(doc! {"a.b": 1}, doc! {"a": {"b": 1}}));
        assert!(m(doc! {"a.b": 1}, doc! {"a": [{"b": 2}, {"b": 1}]}));
        assert!(m(doc! {"a.b": 1}, doc! {"a": [{"b": [0, 1]}]}));
        assert!(m(doc! {"a.1": 5}, doc! {"a": [4, 5]}));
        assert!(m(doc! {"a.0.b": 5}, doc! {"a": [{"b": 5}]}));
        assert!(!m(doc! {"a.1.b": 5}, doc! {"a": [{"b": 5}]}));
        assert!(m(doc! {"a": {"$eq": 2}}, doc! {"a": [1, 2]}));
        assert!(m(doc! {}, doc! {"x": 1}));
        assert!(m(doc! {"$comment": "hi", "a": 1}, doc! {"a": 1}));
        assert!(m(
            doc! {"_id": ObjectId::from_bytes([1; 12])},
            doc! {"_id": ObjectId::from_bytes([1; 12])}
        ));
    }

    #[test]
    fn null_semantics() {
        // As jstests/core/null_query_semantics.js.
        let q = doc! {"a": null};
        assert!(m(q.clone(), doc! {"a": null}));
        assert!(m(q.clone(), doc! {}));
        assert!(m(q.clone(), doc! {"a": [1, null]}));
        assert!(!m(q.clone(), doc! {"a": []}));
        assert!(!m(q.clone(), doc! {"a": 0}));
        let q = doc! {"a.b": null};
        assert!(m(q.clone(), doc! {"a": 4}));
        assert!(m(q.clone(), doc! {"a": {}}));
        assert!(m(q.clone(), doc! {"a": [{"b": 3}, {}]}));
        assert!(m(q.clone(), doc! {"a": [{"b": 3}, {"b": null}]}));
        assert!(!m(q.clone(), doc! {"a": [{"b": 1}, {"b": 3}]}));
        assert!(!m(q.clone(), doc! {"a": [null, null]}));
        assert!(!m(q.clone(), doc! {"a": []}));
        assert!(!m(q.clone(), doc! {"a": [[]]}));
        let q = doc! {"a.b": {"$ne": null}};
        assert!(m(q.clone(), doc! {"a": [null, null]}));
        assert!(m(q.clone(), doc! {"a": {"b": "hi"}}));
        assert!(!m(q.clone(), doc! {"a": {"b": null}}));
        assert!(m(doc! {"a": {"$in": [null, 4]}}, doc! {}));
        assert!(!m(doc! {"a": {"$nin": [null, 4]}}, doc! {}));
        assert!(m(doc! {"a": {"$gte": null}}, doc! {}));
        assert!(!m(doc! {"a": {"$gt": null}}, doc! {"a": null}));
        assert!(m(doc! {"a": {"$not": {"$gte": null}}}, doc! {"a": []}));
        assert!(m(
            doc! {"a": {"$elemMatch": {"b": {"$eq": null}}}},
            doc! {"a": [[]]}
        ));
        assert!(!m(
            doc! {"a": {"$elemMatch": {"$eq": null}}},
            doc! {"a": null}
        ));
    }

    #[test]
    fn comparisons_bracketed() {
        assert!(m(doc! {"a": {"$gt": 1}}, doc! {"a": 2}));
        assert!(m(doc! {"a": {"$gt": 1}}, doc! {"a": 1.5}));
        assert!(!m(doc! {"a": {"$gt": 1}}, doc! {"a": "2"}));
        assert!(!m(doc! {"a": {"$lt": "a"}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$gte": 1}}, doc! {"a": 1}));
        assert!(!m(doc! {"a": {"$lt": 1}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$lte": 1}}, doc! {"a": Bson::Int64(1)}));
        assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": [1, 10]}));
        // Each operator may be satisfied by a different element.
        assert!(m(doc! {"a": {"$gt": 5, "$lt": 3}}, doc! {"a": [1, 10]}));
        assert!(!m(
            doc! {"a": {"$elemMatch": {"$gt": 5, "$lt": 3}}},
            doc! {"a": [1, 10]}
        ));
        assert!(m(
            doc! {"a": {"$elemMatch": {"$gt": 5, "$lt": 30}}},
            doc! {"a": [1, 10]}
        ));
        assert!(m(doc! {"a": {"$gt": [1]}}, doc! {"a": [2]}));
        assert!(m(doc! {"a": {"$gt": "a"}}, doc! {"a": "b"}));
        assert!(m(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "b"}));
        assert!(m(doc! {"a": {"$lt": Bson::MaxKey}}, doc! {"a": null}));
        assert!(!m(doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}));
        assert!(!m(doc! {"a": {"$lt": 1}}, doc! {"a": f64::NAN}));
        assert!(m(
            doc! {"a": {"$gt": bson::DateTime::from_millis(0)}},
            doc! {"a": bson::DateTime::from_millis(5)}
        ));
        assert!(!m(doc! {"a": {"$gt": 1}}, doc! {}));
        assert!(m(doc! {"a": {"$ne": 1}}, doc! {}));
        assert!(!m(doc! {"a": {"$ne": 1}}, doc! {"a": [1, 2]}));
        assert!(m(doc! {"a": {"$ne": 3}}, doc! {"a": [1, 2]}));
    }

    #[test]
    fn in_nin_exists_type() {
        assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": 2}));
        assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": [5, 2]}));
        assert!(!m(doc! {"a": {"$in": []}}, doc! {"a": 2}));
        assert!(m(
            doc! {"a": {"$in": [Regex { pattern: "^x".into(), options: "".into() }]}},
            doc! {"a": "xy"}
        ));
        assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": 3}));
        assert!(!m(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [3, 1]}));
        assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {}));
        assert!(m(doc! {"a": {"$exists": true}}, doc! {"a": null}));
        assert!(!m(doc! {"a": {"$exists": true}}, doc! {}));
        assert!(m(doc! {"a": {"$exists": 0}}, doc! {}));
        assert!(m(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [{"c": 1}, {"b": 1}]}
        ));
        assert!(m(doc! {"a.b": {"$exists": false}}, doc! {"a": [1, 2]}));
        assert!(m(doc! {"a": {"$type": "string"}}, doc! {"a": "x"}));
        assert!(m(doc! {"a": {"$type": 2}}, doc! {"a": "x"}));
        assert!(m(doc! {"a": {"$type": 2.0}}, doc! {"a": "x"}));
        assert!(m(
            doc! {"a": {"$type": "number"}},
            doc! {"a": Bson::Int64(5)}
        ));
        assert!(m(doc! {"a": {"$type": ["string", "int"]}}, doc! {"a": 5}));
        assert!(m(doc! {"a": {"$type": "array"}}, doc! {"a": [1]}));
        assert!(m(doc! {"a": {"$type": "int"}}, doc! {"a": ["x", 1]}));
        assert!(!m(doc! {"a": {"$type": "array"}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$type": "null"}}, doc! {"a": null}));
        assert!(!m(doc! {"a": {"$type": "null"}}, doc! {}));
        assert!(m(doc! {"a": {"$type": "minKey"}}, doc! {"a": Bson::MinKey}));
        assert!(m(doc! {"a": {"$type": 127}}, doc! {"a": Bson::MaxKey}));
        assert_eq!(
            err(doc! {"a": {"$type": "foo"}}).message,
            "Unknown type name alias: foo"
        );
        assert_eq!(err(doc! {"a": {"$type": 99}}).code, 2);
        assert_eq!(err(doc! {"a": {"$type": {}}}).code, 14);
        assert_eq!(err(doc! {"a": {"$in": 1}}).message, "$in needs an array");
        assert_eq!(err(doc! {"a": {"$nin": 1}}).message, "$nin needs an array");
    }

    #[test]
    fn logical() {
        let d = doc! {"a": 1, "b": 2};
        assert!(m(doc! {"$and": [{"a": 1}, {"b": 2}]}, d.clone()));
        assert!(!m(doc! {"$and": [{"a": 1}, {"b": 3}]}, d.clone()));
        assert!(m(doc! {"$or": [{"a": 5}, {"b": 2}]}, d.clone()));
        assert!(!m(doc! {"$or": [{"a": 5}, {"b": 5}]}, d.clone()));
        assert!(m(doc! {"$nor": [{"a": 5}, {"b": 5}]}, d.clone()));
        assert!(!m(doc! {"$nor": [{"a": 1}]}, d.clone()));
        assert!(m(doc! {"a": {"$not": {"$gt": 5}}}, d.clone()));
        assert!(m(doc! {"x": {"$not": {"$gt": 5}}}, d.clone()));
        assert!(!m(doc! {"a": {"$not": {"$lt": 5}}}, d.clone()));
        assert!(m(
            doc! {"a": {"$not": Regex{pattern: "x".into(), options: "".into()}}},
            d.clone()
        ));
        assert_eq!(
            err(doc! {"$and": []}).message,
            "$and/$or/$nor must be a nonempty array"
        );
        assert_eq!(err(doc! {"$or": 1}).message, "$or must be an array");
        assert_eq!(err(doc! {"$or": [1]}).code, 2);
        assert_eq!(
            err(doc! {"a": {"$not": 1}}).message,
            "$not needs a regex or a document"
        );
        assert_eq!(
            err(doc! {"a": {"$not": {}}}).message,
            "$not cannot be empty"
        );
        assert_eq!(
            err(doc! {"a": {"$not": {"b": 1}}}).message,
            "unknown operator: b"
        );
    }

    #[test]
    fn unknown_operators() {
        let e = err(doc! {"a": {"$foo": 1}});
        assert_eq!((e.code, e.message.as_str()), (2, "unknown operator: $foo"));
        let e = err(doc! {"$foo": 1});
        assert_eq!(e.code, 2);
        assert!(e.message.starts_with("unknown top level operator: $foo"));
        let e = err(doc! {"a": {"$gt": 1, "b": 1}});
        assert_eq!(e.message, "unknown operator: b");
        // A document whose first key is not an operator is an equality.
        assert!(m(
            doc! {"a": {"b": 1, "$c": 1}},
            doc! {"a": {"b": 1, "$c": 1}}
        ));
    }

    #[test]
    fn regex() {
        let d = doc! {"a": "Hello\nWorld"};
        assert!(m(
            doc! {"a": {"$regex": "^hello", "$options": "i"}},
            d.clone()
        ));
        assert!(!m(doc! {"a": {"$regex": "^hello"}}, d.clone()));
        assert!(m(
            doc! {"a": {"$regex": "^World", "$options": "m"}},
            d.clone()
        ));
        assert!(!m(doc! {"a": {"$regex": "^World"}}, d.clone()));
        assert!(m(
            doc! {"a": Regex{pattern: "o.W".into(), options: "s".into()}},
            d.clone()
        ));
        assert!(m(
            doc! {"a": {"$regex": Regex{pattern: "WORLD".into(), options: "i".into()}}},
            d.clone()
        ));
        assert!(m(doc! {"a": {"$regex": "b"}}, doc! {"a": ["abc", 1]}));
        assert!(!m(doc! {"a": {"$regex": "1"}}, doc! {"a": 1}));
        assert!(m(
            doc! {"a": {"$regex": "x"}},
            doc! {"a": Bson::Symbol("x".into())}
        ));
        // $eq with a regex operand is an exact match on a regex value.
        let re = Regex {
            pattern: "x".into(),
            options: "".into(),
        };
        assert!(m(doc! {"a": {"$eq": re.clone()}}, doc! {"a": re.clone()}));
        assert!(!m(doc! {"a": {"$eq": re.clone()}}, doc! {"a": "x"}));
        assert_eq!(
            err(doc! {"a": {"$options": "i"}}).message,
            "$options needs a $regex"
        );
        assert_eq!(
            err(doc! {"a": {"$regex": "x", "$options": "z"}}).code,
            51108
        );
        assert_eq!(err(doc! {"a": {"$regex": "("}}).code, 51091);
        assert_eq!(err(doc! {"a": {"$regex": 1}}).code, 2);
    }

    #[test]
    fn elem_match_size_all_mod() {
        let d = doc! {"a": [{"x": 1, "y": 2}, {"x": 2, "y": 1}]};
        assert!(m(doc! {"a": {"$elemMatch": {"x": 1, "y": 2}}}, d.clone()));
        assert!(!m(doc! {"a": {"$elemMatch": {"x": 1, "y": 1}}}, d.clone()));
        // Without $elemMatch the conditions may hold on different elements.
        assert!(m(doc! {"a.x": 1, "a.y": 1}, d.clone()));
        assert!(m(
            doc! {"a": {"$elemMatch": {"$or": [{"x": 5}, {"y": 1}]}}},
            d.clone()
        ));
        assert!(!m(
            doc! {"a": {"$elemMatch": {"x": 1}}},
            doc! {"a": {"x": 1}}
        ));
        assert!(m(
            doc! {"a": {"$elemMatch": {"$gte": 2, "$lt": 3}}},
            doc! {"a": [1, 2]}
        ));
        assert!(m(
            doc! {"a": {"$elemMatch": {"$ne": 1}}},
            doc! {"a": [1, 2]}
        ));
        assert!(!m(doc! {"a": {"$elemMatch": {"$ne": 1}}}, doc! {"a": [1]}));
        assert!(m(
            doc! {"a.b": {"$elemMatch": {"$eq": 1}}},
            doc! {"a": {"b": [1]}}
        ));
        assert_eq!(
            err(doc! {"a": {"$elemMatch": 1}}).message,
            "$elemMatch needs an Object"
        );

        assert!(m(doc! {"a": {"$size": 2}}, doc! {"a": [1, 2]}));
        assert!(!m(doc! {"a": {"$size": 1}}, doc! {"a": [1, 2]}));
        assert!(m(doc! {"a": {"$size": 0}}, doc! {"a": []}));
        assert!(!m(doc! {"a": {"$size": 1}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$size": 1}}, doc! {"a": [[1, 2]]}));
        assert_eq!(
            err(doc! {"a": {"$size": "x"}}).message,
            "$size needs a number"
        );
        assert_eq!(err(doc! {"a": {"$size": 1.5}}).code, 2);
        assert_eq!(err(doc! {"a": {"$size": -1}}).code, 2);

        assert!(m(doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3, 1]}));
        assert!(!m(doc! {"a": {"$all": [1, 4]}}, doc! {"a": [2, 3, 1]}));
        assert!(m(doc! {"a": {"$all": [1]}}, doc! {"a": 1}));
        assert!(!m(doc! {"a": {"$all": []}}, doc! {"a": [1]}));
        assert!(m(doc! {"a": {"$all": [[1, 2]]}}, doc! {"a": [1, 2]}));
        assert!(m(
            doc! {"a": {"$all": [{"$elemMatch": {"x": 1}}, {"$elemMatch": {"x": 2}}]}},
            d.clone()
        ));
        assert!(!m(
            doc! {"a": {"$all": [{"$elemMatch": {"x": 1}}, {"$elemMatch": {"x": 3}}]}},
            d.clone()
        ));
        assert_eq!(err(doc! {"a": {"$all": 1}}).message, "$all needs an array");

        assert!(m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9}));
        assert!(m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9.5}));
        assert!(!m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 8}));
        assert!(m(doc! {"a": {"$mod": [4, 0]}}, doc! {"a": [3, 8]}));
        assert_eq!(
            err(doc! {"a": {"$mod": [0, 1]}}).message,
            "divisor cannot be 0"
        );
        assert_eq!(err(doc! {"a": {"$mod": [1]}}).code, 2);
    }

    #[test]
    fn expr_and_position() {
        assert!(m(
            doc! {"$expr": {"$gt": ["$a", "$b"]}},
            doc! {"a": 2, "b": 1}
        ));
        assert!(!m(
            doc! {"$expr": {"$gt": ["$a", "$b"]}},
            doc! {"a": 1, "b": 1}
        ));
        let mm = Matcher::new(&doc! {"a.b": 5}).unwrap();
        assert_eq!(
            mm.matches_with_position(&doc! {"a": [{"b": 1}, {"b": 5}]}),
            (true, Some(1))
        );
        let mm = Matcher::new(&doc! {"a": {"$gt": 2}}).unwrap();
        assert_eq!(
            mm.matches_with_position(&doc! {"a": [1, 2, 3]}),
            (true, Some(2))
        );
        assert_eq!(mm.matches_with_position(&doc! {"a": 3}), (true, None));
        let mm = Matcher::new(&doc! {"a": {"$elemMatch": {"x": 2}}}).unwrap();
        assert_eq!(
            mm.matches_with_position(&doc! {"a": [{"x": 1}, {"x": 2}]}),
            (true, Some(1))
        );
        let _ = bson!(1);
    }

    #[test]
    fn decimals_and_mixed_numbers() {
        let d = |s: &str| Bson::Decimal128(s.parse().unwrap());
        assert!(m(doc! {"a": d("1.0")}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$gt": d("0.5")}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$in": [Bson::Int64(2)]}}, doc! {"a": 2.0}));
        assert!(m(doc! {"a": {"$type": "decimal"}}, doc! {"a": d("1")}));
    }

    #[test]
    fn nested_arrays_and_docs() {
        let d = doc! {"a": [{"b": [{"c": 1}, {"c": 2}]}, {"b": {"c": 3}}]};
        assert!(m(doc! {"a.b.c": 2}, d.clone()));
        assert!(m(doc! {"a.b.c": 3}, d.clone()));
        assert!(m(doc! {"a.b.c": {"$gt": 2}}, d.clone()));
        assert!(!m(doc! {"a.b.c": 4}, d.clone()));
        assert!(m(doc! {"a": {"$elemMatch": {"b.c": 2}}}, d.clone()));
        assert!(m(
            doc! {"a": {"$elemMatch": {"b": {"$elemMatch": {"c": {"$gte": 2}}}}}},
            d.clone()
        ));
        assert!(m(
            doc! {"$and": [{"a.b.c": 1}, {"a.b": {"$size": 2}}]},
            d.clone()
        ));
        assert!(m(doc! {"a.1.b.c": 3}, d.clone()));
        assert!(m(doc! {"a.0.b.1.c": 2}, d.clone()));
        assert!(m(doc! {"a.b": {"c": 3}}, d.clone()));
        assert!(m(
            doc! {"a": {"$size": 2}, "a.b": {"$exists": true}},
            d.clone()
        ));
    }

    use proptest::prelude::*;
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn equality_is_reflexive(v in crate::compare::tests::arb_bson()) {
            let target = doc! {"a": v.clone()};
            let eq = Matcher::new(&doc! {"a": v.clone()}).unwrap().matches(&target);
            let inn = Matcher::new(&doc! {"a": {"$in": [v.clone()]}}).unwrap().matches(&target);
            let ne = Matcher::new(&doc! {"a": {"$ne": v.clone()}}).unwrap().matches(&target);
            prop_assert!(eq, "eq {:?}", v);
            prop_assert!(inn, "in {:?}", v);
            prop_assert!(!ne, "ne {:?}", v);
        }

        #[test]
        fn comparisons_agree_with_compare_bson(v in crate::compare::tests::arb_bson(), w in crate::compare::tests::arb_bson()) {
            let nan = |x: &Bson| Num::of(x).is_some_and(Num::is_nan);
            prop_assume!(!matches!(v, Bson::Array(_)) && !nan(&v) && !nan(&w));
            prop_assume!(!matches!(w, Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::RegularExpression(_)));
            let o = compare_bson(&v, &w);
            let same = canonical_type_rank(&v) == canonical_type_rank(&w);
            let doc = doc! {"a": v.clone()};
            let q = |op: &str| Matcher::new(&doc! {"a": {op: w.clone()}}).unwrap().matches(&doc);
            prop_assert_eq!(q("$gt"), same && o == Ordering::Greater);
            prop_assert_eq!(q("$gte"), same && o != Ordering::Less);
            prop_assert_eq!(q("$lt"), same && o == Ordering::Less);
            prop_assert_eq!(q("$lte"), same && o != Ordering::Greater);
            prop_assert_eq!(q("$eq"), bson_equal(&v, &w));
        }
    }
}
