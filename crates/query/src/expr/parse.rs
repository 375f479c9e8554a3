//! Parsing: a BSON value to an [`Expr`], resolving each operator name to its [`Op`] once.

use bson::{Bson, Document};

use super::op::{Arity, Op};
use super::Expr;
use crate::error::{DocError, DocResult};

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

/// mongod's codes for a named operator's argument errors: an argument that is not an object,
/// an unknown argument, and each required argument that is absent.
struct NamedRules {
    not_object: (i32, &'static str),
    unknown: (i32, &'static str),
    required: &'static [(&'static str, i32, &'static str)],
}

/// The rules of a named operator: a date operator's, or another family's.
fn named_rules(op: Op) -> NamedRules {
    date_named_rules(op).unwrap_or_else(|| other_named_rules(op))
}

fn rules(
    not_object: (i32, &'static str),
    unknown: (i32, &'static str),
    required: &'static [(&'static str, i32, &'static str)],
) -> NamedRules {
    NamedRules {
        not_object,
        unknown,
        required,
    }
}

/// The date operators' rules; `None` for another operator.
fn date_named_rules(op: Op) -> Option<NamedRules> {
    Some(match op {
        Op::DateToString => rules(
            (18629, "Location18629"),
            (18534, "Location18534"),
            &[("date", 18628, "Location18628")],
        ),
        Op::DateFromString => rules(
            (40540, "Location40540"),
            (40541, "Location40541"),
            &[("dateString", 40542, "Location40542")],
        ),
        Op::DateFromParts => rules((40519, "Location40519"), (40518, "Location40518"), &[]),
        Op::DateToParts => rules(
            (40524, "Location40524"),
            (40520, "Location40520"),
            &[("date", 40522, "Location40522")],
        ),
        Op::DateAdd | Op::DateSubtract => rules(
            (5166400, "Location5166400"),
            (5166401, "Location5166401"),
            &[
                ("startDate", 5166402, "Location5166402"),
                ("unit", 5166402, "Location5166402"),
                ("amount", 5166402, "Location5166402"),
            ],
        ),
        Op::DateDiff => rules(
            (5166301, "Location5166301"),
            (5166302, "Location5166302"),
            &[
                ("startDate", 5166303, "Location5166303"),
                ("endDate", 5166304, "Location5166304"),
                ("unit", 5166305, "Location5166305"),
            ],
        ),
        Op::DateTrunc => rules(
            (5439007, "Location5439007"),
            (5439008, "Location5439008"),
            &[
                ("date", 5439009, "Location5439009"),
                ("unit", 5439010, "Location5439010"),
            ],
        ),
        _ => return None,
    })
}

/// The other named operators' rules (string, array, object, conversion, statistics).
fn other_named_rules(op: Op) -> NamedRules {
    match op {
        Op::RegexMatch | Op::RegexFind | Op::RegexFindAll => rules(
            (51103, "Location51103"),
            (31024, "Location31024"),
            &[
                ("input", 31022, "Location31022"),
                ("regex", 31023, "Location31023"),
            ],
        ),
        Op::ReplaceOne | Op::ReplaceAll => rules(
            (51751, "Location51751"),
            (51750, "Location51750"),
            &[
                ("input", 51749, "Location51749"),
                ("find", 51748, "Location51748"),
                ("replacement", 51747, "Location51747"),
            ],
        ),
        Op::Zip => rules(
            (34460, "Location34460"),
            (34464, "Location34464"),
            &[("inputs", 34465, "Location34465")],
        ),
        Op::SortArray => rules(
            (2942500, "Location2942500"),
            (2942501, "Location2942501"),
            &[
                ("input", 2942502, "Location2942502"),
                ("sortBy", 2942503, "Location2942503"),
            ],
        ),
        Op::FirstN | Op::LastN => rules(
            (5788001, "Location5788001"),
            (5788002, "Location5788002"),
            &[
                ("n", 5788003, "Location5788003"),
                ("input", 5788004, "Location5788004"),
            ],
        ),
        Op::MaxN | Op::MinN => rules(
            (5787900, "Location5787900"),
            (5787901, "Location5787901"),
            &[
                ("n", 5787906, "Location5787906"),
                ("input", 5787907, "Location5787907"),
            ],
        ),
        Op::GetField => rules(
            (3041700, "Location3041700"),
            (3041701, "Location3041701"),
            &[("field", 3041702, "Location3041702")],
        ),
        Op::SetField => rules(
            (4161100, "Location4161100"),
            (4161101, "Location4161101"),
            &[
                ("field", 4161102, "Location4161102"),
                ("input", 4161109, "Location4161109"),
                ("value", 4161103, "Location4161103"),
            ],
        ),
        Op::UnsetField => rules(
            (4161100, "Location4161100"),
            (4161101, "Location4161101"),
            &[
                ("field", 4161102, "Location4161102"),
                ("input", 4161109, "Location4161109"),
            ],
        ),
        Op::Convert => rules(
            (9, "FailedToParse"),
            (9, "FailedToParse"),
            &[("input", 9, "FailedToParse"), ("to", 9, "FailedToParse")],
        ),
        Op::Median => rules(
            (14, "TypeMismatch"),
            (40415, "Location40415"),
            &[
                ("input", 40414, "Location40414"),
                ("method", 40414, "Location40414"),
            ],
        ),
        Op::Percentile => rules(
            (14, "TypeMismatch"),
            (40415, "Location40415"),
            &[
                ("input", 40414, "Location40414"),
                ("p", 40414, "Location40414"),
                ("method", 40414, "Location40414"),
            ],
        ),
        Op::Rand => rules(
            (3040501, "Location3040501"),
            (3040501, "Location3040501"),
            &[],
        ),
        _ => rules((9, "FailedToParse"), (9, "FailedToParse"), &[]),
    }
}

fn named_args(op: Op, name: &str, arg: &Bson, allowed: &[&str]) -> DocResult<Vec<(String, Expr)>> {
    let rules = named_rules(op);
    let Bson::Document(d) = arg else {
        return Err(DocError::with_code(
            rules.not_object.0,
            rules.not_object.1,
            format!("{name} only supports an object as its argument"),
        ));
    };
    let mut out = Vec::new();
    for (k, v) in d {
        if !allowed.contains(&k.as_str()) {
            return Err(DocError::with_code(
                rules.unknown.0,
                rules.unknown.1,
                match rules.unknown.0 {
                    9 => format!("{name} found an unknown argument: {k}"),
                    40415 => format!("BSON field '{name}.{k}' is an unknown field."),
                    _ => format!("Unrecognized argument to {name}: {k}"),
                },
            ));
        }
        // `as` names, `vars` and sort specifications keep their raw form.
        let e = match (name, k.as_str()) {
            (_, "as") => Expr::Lit(v.clone()),
            ("$let", "vars") | ("$switch", "branches") | ("$sortArray", "sortBy") => {
                Expr::Lit(v.clone())
            }
            _ => parse_expr(v)?,
        };
        out.push((k.clone(), e));
    }
    for (k, code, code_name) in rules.required {
        if !d.contains_key(k) {
            let msg = match code {
                5166402 => format!("{name} requires startDate, unit, and amount to be present"),
                40414 => format!("BSON field '{name}.{k}' is missing but a required field"),
                _ => format!("Missing '{k}' parameter to {name}"),
            };
            return Err(DocError::with_code(*code, code_name, msg));
        }
    }
    if op == Op::DateFromParts {
        super::date::check_date_from_parts(&out)?;
    }
    Ok(out)
}

/// An object of named arguments, as opposed to an operator expression (`{$literal: …}`).
fn is_named_object(arg: &Bson) -> bool {
    matches!(arg, Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')))
}

/// A date part operator's argument: `date`, `[date]` (40536 for another length) or
/// `{date, timezone}` (40535 for another field, 40539 without `date`).
fn parse_date_part(op: Op, name: &str, arg: &Bson) -> DocResult<Expr> {
    let args = match arg {
        Bson::Array(a) if a.len() != 1 => {
            return Err(DocError::with_code(
                40536,
                "Location40536",
                format!(
                    "{name} accepts exactly one argument if given an array, but was given {}",
                    a.len()
                ),
            ))
        }
        Bson::Array(a) => vec![parse_expr(&a[0])?],
        Bson::Document(d) if is_named_object(arg) => {
            let (mut date, mut tz) = (None, None);
            for (k, v) in d {
                match k.as_str() {
                    "date" => date = Some(parse_expr(v)?),
                    "timezone" => tz = Some(parse_expr(v)?),
                    _ => {
                        return Err(DocError::with_code(
                            40535,
                            "Location40535",
                            format!("unrecognized option to {name}: \"{k}\""),
                        ))
                    }
                }
            }
            let date = date.ok_or_else(|| {
                DocError::with_code(
                    40539,
                    "Location40539",
                    format!(
                        "missing 'date' argument to {name}, provided: {}",
                        crate::compare::doc_repr(d)
                    ),
                )
            })?;
            std::iter::once(date).chain(tz).collect()
        }
        other => vec![parse_expr(other)?],
    };
    Ok(Expr::Op(op, args))
}

/// `$cond`'s object form: `{if, then, else}`.
fn parse_cond_object(d: &Document) -> DocResult<Expr> {
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
    Ok(Expr::Op(
        Op::Cond,
        vec![get("if")?, get("then")?, get("else")?],
    ))
}

/// `$switch`'s `branches`, each parsed into its `case<i>` and `then<i>` arguments.
fn parse_switch_branches(args: Vec<(String, Expr)>) -> DocResult<Vec<(String, Expr)>> {
    // Parse the branches now.
    let mut parsed = Vec::new();
    for (k, v) in args {
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
    Ok(parsed)
}

/// `$let`'s `vars`, each parsed into a `var:<name>` argument.
fn parse_let_vars(args: Vec<(String, Expr)>) -> DocResult<Vec<(String, Expr)>> {
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
    Ok(parsed)
}

fn parse_op(name: &str, arg: &Bson) -> DocResult<Expr> {
    if name == "$literal" {
        return Ok(Expr::Lit(arg.clone()));
    }
    if name == "$meta" {
        return parse_meta(arg);
    }
    if name == "$cond" {
        if let Bson::Document(d) = arg {
            return parse_cond_object(d);
        }
    }
    let Some(op) = Op::from_name(name) else {
        return Err(DocError::with_code(
            168,
            "InvalidPipelineOperator",
            format!("Unrecognized expression '{name}'"),
        ));
    };
    if let Arity::DatePart = op.spec().arity {
        return parse_date_part(op, name, arg);
    }
    if op == Op::Function {
        return Ok(Expr::Named(op, super::script::parse_function(arg)?));
    }
    if op == Op::GetField && !is_named_object(arg) {
        // `{$getField: "name"}` (or an expression such as `{$literal: "$name"}`) is the field.
        return Ok(Expr::Named(
            op,
            vec![("field".to_string(), parse_expr(arg)?)],
        ));
    }
    if let Arity::Named(allowed) = op.spec().arity {
        let mut args = named_args(op, name, arg, allowed)?;
        if op == Op::Switch {
            args = parse_switch_branches(args)?;
        }
        if op == Op::Let {
            args = parse_let_vars(args)?;
        }
        return Ok(Expr::Named(op, args));
    }
    let args: Vec<Expr> = match arg {
        Bson::Array(a) => a.iter().map(parse_expr).collect::<DocResult<_>>()?,
        other => vec![parse_expr(other)?],
    };
    if let Arity::Positional(lo, hi) = op.spec().arity {
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

/// `{$meta: "textScore"}`: the score the text scan put on the document (missing without one).
/// mongod's other metadata (search, geo, sort keys, record ids) do not exist here.
fn parse_meta(arg: &Bson) -> DocResult<Expr> {
    const OTHERS: &[&str] = &[
        "randVal",
        "searchScore",
        "searchHighlights",
        "searchScoreDetails",
        "searchSequenceToken",
        "vectorSearchScore",
        "geoNearDistance",
        "geoNearPoint",
        "recordId",
        "indexKey",
        "sortKey",
        "score",
        "scoreDetails",
    ];
    match arg {
        Bson::String(s) if s == "textScore" => {
            Ok(Expr::Field(vec![crate::text::SCORE_FIELD.to_string()]))
        }
        Bson::String(s) if OTHERS.contains(&s.as_str()) => Err(DocError::with_code(
            238,
            "NotImplemented",
            format!("$meta \"{s}\" is not supported by flashdoc (only \"textScore\")"),
        )),
        other => Err(DocError::with_code(
            17308,
            "Location17308",
            format!(
                "Unsupported argument to $meta: {}",
                crate::compare::shell_repr(other)
            ),
        )),
    }
}
