//! The aggregation pipeline over documents.
//!
//! Stages: `$match`, `$project`, `$addFields`/`$set`, `$unset`, `$group`, `$sort`, `$skip`,
//! `$limit`, `$unwind`, `$count`, `$lookup` (equality form, optionally with a `pipeline` run on
//! the matches), `$replaceRoot`/`$replaceWith`, `$sortByCount`. Streaming stages are chained
//! lazily; `$group`, `$sort` and `$count` consume their input.

use std::collections::BTreeMap;

use bson::{Bson, Document};

use crate::compare::{bson_equal, compare_bson, shell_repr, type_name, Num, OrdBson};
use crate::error::{DocError, DocResult};
use crate::expr::{parse_expr, Ctx, Expr};
use crate::interrupt::Interrupt;
use crate::matcher::Matcher;
use crate::path::{get_path, remove_path, set_path, split_path};
use crate::projection::Projection;
use crate::sort::SortSpec;

/// A stream of documents between stages (a scan's output, a stage's output).
pub type DocIter = Box<dyn Iterator<Item = DocResult<Document>> + Send>;

/// What a pipeline needs from storage, and the only way `query` reaches it: a stage that reads
/// another collection (`$lookup`) asks its source, and the storage side (docdb's `DocDb`, the
/// router) decides how to read it. Stages that write (`$out`, `$merge`) or report on storage
/// (`$collStats`) are to be added here as further methods, so the pipeline stays BSON-only.
pub trait CollectionSource {
    /// Every document of collection `name` in the pipeline's database.
    fn read_collection(&self, name: &str) -> DocResult<Vec<Document>>;
}

impl<F: Fn(&str) -> DocResult<Vec<Document>>> CollectionSource for F {
    fn read_collection(&self, name: &str) -> DocResult<Vec<Document>> {
        self(name)
    }
}

#[derive(Clone, Debug)]
enum Stage {
    Match(Matcher),
    Project(Projection),
    AddFields(Vec<(Vec<String>, Expr)>),
    Unset(Vec<Vec<String>>),
    Group(Expr, Vec<(String, Acc, Expr)>),
    Sort(SortSpec),
    Skip(u64),
    Limit(u64),
    Unwind {
        path: Vec<String>,
        index: Option<String>,
        preserve: bool,
    },
    Count(String),
    Lookup {
        from: String,
        local: Vec<String>,
        foreign: String,
        as_: Vec<String>,
        pipeline: Option<Vec<Document>>,
    },
    ReplaceRoot(Expr),
    SortByCount(Expr),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Acc {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    Count,
    MergeObjects,
    StdDevPop,
    StdDevSamp,
    /// `$firstN`, `$lastN`, `$maxN`, `$minN`: `{input, n}`.
    FirstN,
    LastN,
    MaxN,
    MinN,
}

fn stage_err(code: i32, msg: impl Into<String>) -> DocError {
    let name: &'static str = match code {
        40323 => "Location40323",
        40324 => "Location40324",
        15955 => "Location15955",
        15952 => "Location15952",
        40234 => "Location40234",
        40235 => "Location40235",
        40238 => "Location40238",
        15956 => "Location15956",
        15957 => "Location15957",
        15958 => "Location15958",
        15959 => "Location15959",
        15976 => "Location15976",
        40156 => "Location40156",
        40158 => "Location40158",
        40160 => "Location40160",
        28812 => "Location28812",
        28811 => "Location28811",
        28818 => "Location28818",
        28809 => "Location28809",
        28810 => "Location28810",
        40228 => "Location40228",
        40319 => "Location40319",
        40321 => "Location40321",
        40272 => "Location40272",
        4822861 => "Location4822861",
        5787900 => "Location5787900",
        5787901 => "Location5787901",
        5787906 => "Location5787906",
        5787907 => "Location5787907",
        5107200 => "Location5107200",
        _ => "Location",
    };
    DocError::with_code(code, name, msg)
}

fn parse_acc(name: &str) -> Option<Acc> {
    Some(match name {
        "$sum" => Acc::Sum,
        "$avg" => Acc::Avg,
        "$min" => Acc::Min,
        "$max" => Acc::Max,
        "$first" => Acc::First,
        "$last" => Acc::Last,
        "$push" => Acc::Push,
        "$addToSet" => Acc::AddToSet,
        "$count" => Acc::Count,
        "$mergeObjects" => Acc::MergeObjects,
        "$stdDevPop" => Acc::StdDevPop,
        "$stdDevSamp" => Acc::StdDevSamp,
        "$firstN" => Acc::FirstN,
        "$lastN" => Acc::LastN,
        "$maxN" => Acc::MaxN,
        "$minN" => Acc::MinN,
        _ => return None,
    })
}

/// The argument of `$firstN` … `$minN` in `$group`, `{input, n}`, as one expression that
/// evaluates to `{input, n}` per document (5787900, 5787901, 5787906, 5787907).
fn n_accumulator_arg(name: &str, arg: &Bson) -> DocResult<Expr> {
    let Bson::Document(d) = arg else {
        return Err(stage_err(
            5787900,
            format!("specification must be an object; found {}", shell_repr(arg)),
        ));
    };
    if let Some(k) = d.keys().find(|k| *k != "input" && *k != "n") {
        return Err(stage_err(
            5787901,
            format!("Unknown argument for 'n' operator: {k}"),
        ));
    }
    for (k, code) in [("n", 5787906), ("input", 5787907)] {
        if !d.contains_key(k) {
            return Err(stage_err(
                code,
                format!("Missing value for '{k}' in {name}"),
            ));
        }
    }
    parse_expr(arg)
}

fn non_negative_int(stage: &str, v: &Bson, allow_zero: bool) -> DocResult<u64> {
    let n = Num::of(v);
    let Some(i) = n.and_then(Num::as_i64_exact) else {
        return Err(if n.is_none() {
            stage_err(
                15957,
                format!(
                    "invalid argument to {stage} stage: Expected a number in: {stage}: {}",
                    shell_repr(v)
                ),
            )
        } else {
            stage_err(
                15957,
                format!(
                    "invalid argument to {stage} stage: Expected an integer: {stage}: {}",
                    shell_repr(v)
                ),
            )
        });
    };
    if i < 0 || (!allow_zero && i == 0) {
        return Err(if stage == "$limit" {
            stage_err(15958, "the limit must be positive")
        } else {
            stage_err(
                5107200,
                format!(
                    "invalid argument to $skip stage: Expected a non-negative number in: $skip: {i}"
                ),
            )
        });
    }
    Ok(i as u64)
}

fn parse_add_fields(d: &Document) -> DocResult<Vec<(Vec<String>, Expr)>> {
    let mut out = Vec::new();
    fn walk(d: &Document, prefix: &[String], out: &mut Vec<(Vec<String>, Expr)>) -> DocResult<()> {
        for (k, v) in d {
            let mut path = prefix.to_vec();
            path.extend(split_path(k)?);
            if path.len() > crate::limits::MAX_PATH_PARTS {
                return Err(DocError::with_code(15, "Overflow", "FieldPath is too long"));
            }
            if k.starts_with('$') {
                return Err(DocError::with_code(
                    16410,
                    "Location16410",
                    format!("FieldPath field names may not start with '$'. Consider using $getField or $setField. ('{k}')"),
                ));
            }
            match v {
                // Nested objects without operators merge into embedded documents.
                Bson::Document(sub)
                    if !sub.is_empty()
                        && !sub.keys().next().is_some_and(|f| f.starts_with('$')) =>
                {
                    walk(sub, &path, out)?
                }
                other => out.push((path, parse_expr(other)?)),
            }
        }
        Ok(())
    }
    walk(d, &[], &mut out)?;
    Ok(out)
}

fn parse_stage(s: &Document) -> DocResult<Stage> {
    if s.len() != 1 {
        return Err(stage_err(
            40323,
            "A pipeline stage specification object must contain exactly one field.",
        ));
    }
    let (name, arg) = s.iter().next().expect("one field");
    let obj = |code: i32, msg: &str| -> DocResult<&Document> {
        match arg {
            Bson::Document(d) => Ok(d),
            _ => Err(stage_err(code, msg.to_string())),
        }
    };
    Ok(match name.as_str() {
        "$match" => Stage::Match(Matcher::new(obj(
            15959,
            "the match filter must be an expression in an object",
        )?)?),
        "$project" => Stage::Project(Projection::parse_aggregation(obj(
            15969,
            "$project specification must be an object",
        )?)?),
        "$addFields" | "$set" => Stage::AddFields(parse_add_fields(obj(
            40272,
            &format!("{name} specification stage must be an object, got {}", type_name(arg)),
        )?)?),
        "$unset" => {
            let fields: Vec<&Bson> = match arg {
                Bson::String(_) => vec![arg],
                Bson::Array(a) if !a.is_empty() => a.iter().collect(),
                _ => {
                    return Err(stage_err(
                        31002,
                        "$unset specification must be a string or an array with at least one field",
                    ))
                }
            };
            let mut paths = Vec::new();
            for f in fields {
                let Bson::String(s) = f else {
                    return Err(stage_err(31120, "$unset specification must be a string or an array containing only string values"));
                };
                paths.push(split_path(s)?);
            }
            Stage::Unset(paths)
        }
        "$group" => {
            let d = obj(15947, "a group's fields must be specified in an object")?;
            let Some(id) = d.get("_id") else {
                return Err(DocError::location_15955("a group specification must include an _id"));
            };
            let id = parse_expr(id)?;
            let mut accs = Vec::new();
            for (k, v) in d {
                if k == "_id" {
                    continue;
                }
                if k.contains('.') {
                    return Err(stage_err(40235, format!("The field name '{k}' cannot contain '.'")));
                }
                if k.starts_with('$') {
                    return Err(stage_err(40236, format!("The field name '{k}' cannot be an operator name")));
                }
                let Bson::Document(ad) = v else {
                    return Err(stage_err(40234, format!("The field '{k}' must be an accumulator object")));
                };
                if ad.len() != 1 {
                    return Err(stage_err(40238, format!("The field '{k}' must specify one accumulator")));
                }
                let (an, aa) = ad.iter().next().expect("one");
                let Some(acc) = parse_acc(an) else {
                    return Err(stage_err(15952, format!("unknown group operator '{an}'")));
                };
                let e = if acc == Acc::Count {
                    if !matches!(aa, Bson::Document(x) if x.is_empty()) {
                        return Err(DocError::type_mismatch("$count takes no arguments, i.e. $count:{}"));
                    }
                    Expr::Lit(Bson::Int32(1))
                } else if matches!(acc, Acc::FirstN | Acc::LastN | Acc::MaxN | Acc::MinN) {
                    n_accumulator_arg(an, aa)?
                } else {
                    if let Bson::Array(_) = aa {
                        return Err(stage_err(40237, format!("The {an} accumulator is a unary operator")));
                    }
                    parse_expr(aa)?
                };
                accs.push((k.clone(), acc, e));
            }
            Stage::Group(id, accs)
        }
        "$sort" => {
            let d = obj(15973, "the $sort key specification must be an object")?;
            if d.is_empty() {
                return Err(stage_err(15976, "$sort stage must have at least one sort key"));
            }
            Stage::Sort(SortSpec::parse(d)?)
        }
        "$skip" => Stage::Skip(non_negative_int("$skip", arg, true)?),
        "$limit" => Stage::Limit(non_negative_int("$limit", arg, false)?),
        "$unwind" => match arg {
            Bson::String(p) => {
                let Some(p) = p.strip_prefix('$') else {
                    return Err(stage_err(28818, format!("path option to $unwind stage should be prefixed with a '$': {p}")));
                };
                Stage::Unwind { path: split_path(p)?, index: None, preserve: false }
            }
            Bson::Document(d) => {
                let mut path = None;
                let mut index = None;
                let mut preserve = false;
                for (k, v) in d {
                    match (k.as_str(), v) {
                        ("path", Bson::String(p)) => {
                            let Some(p) = p.strip_prefix('$') else {
                                return Err(stage_err(28818, format!("path option to $unwind stage should be prefixed with a '$': {p}")));
                            };
                            path = Some(split_path(p)?);
                        }
                        ("path", _) => return Err(stage_err(28808, "expected a string as the path for $unwind stage")),
                        ("includeArrayIndex", Bson::String(s)) => {
                            if s.is_empty() || s.starts_with('$') {
                                return Err(stage_err(28822, format!("includeArrayIndex option to $unwind stage should not be prefixed with a '$': {s}")));
                            }
                            index = Some(s.clone());
                        }
                        ("includeArrayIndex", _) => return Err(stage_err(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage")),
                        ("preserveNullAndEmptyArrays", Bson::Boolean(b)) => preserve = *b,
                        ("preserveNullAndEmptyArrays", _) => return Err(stage_err(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage")),
                        (other, _) => return Err(stage_err(28811, format!("unrecognized option to $unwind stage: {other}"))),
                    }
                }
                let Some(path) = path else {
                    return Err(stage_err(28812, "No path specified to $unwind stage"));
                };
                Stage::Unwind { path, index, preserve }
            }
            _ => return Err(stage_err(15981, format!("expected either a string or an object as specification for $unwind stage, got {}", type_name(arg)))),
        },
        "$count" => {
            let Bson::String(s) = arg else {
                return Err(stage_err(40156, "the count field must be a non-empty string"));
            };
            if s.is_empty() {
                return Err(stage_err(40156, "the count field must be a non-empty string"));
            }
            if s.starts_with('$') {
                return Err(stage_err(40158, "the count field cannot be a $-prefixed path"));
            }
            if s.contains('.') {
                return Err(stage_err(40160, "the count field cannot contain '.'"));
            }
            Stage::Count(s.clone())
        }
        "$lookup" => {
            let d = obj(40319, "the $lookup stage specification must be an object")?;
            let s = |k: &str| -> DocResult<Option<String>> {
                match d.get(k) {
                    None => Ok(None),
                    Some(Bson::String(v)) => Ok(Some(v.clone())),
                    Some(_) => Err(stage_err(4570, format!("$lookup argument '{k}' must be a string"))),
                }
            };
            for k in d.keys() {
                if !matches!(k.as_str(), "from" | "localField" | "foreignField" | "as" | "pipeline" | "let") {
                    return Err(stage_err(40321, format!("unknown argument to $lookup: {k}")));
                }
            }
            if d.contains_key("let") {
                return Err(DocError::with_code(238, "NotImplemented", "$lookup with 'let' is not supported"));
            }
            let pipeline = match d.get("pipeline") {
                None => None,
                Some(Bson::Array(a)) => {
                    let mut stages = Vec::new();
                    for s in a {
                        let Bson::Document(sd) = s else {
                            return Err(DocError::failed_to_parse("'pipeline' option must be specified as an array of objects"));
                        };
                        stages.push(sd.clone());
                    }
                    validate_pipeline(&stages)?;
                    Some(stages)
                }
                Some(_) => return Err(DocError::failed_to_parse("'pipeline' option must be specified as an array")),
            };
            let from = s("from")?.ok_or_else(|| DocError::failed_to_parse("must specify 'from' field for a $lookup"))?;
            let as_ = s("as")?.ok_or_else(|| DocError::failed_to_parse("must specify 'as' field for a $lookup"))?;
            let (local, foreign) = (s("localField")?, s("foreignField")?);
            match (&local, &foreign) {
                (Some(l), Some(f)) => Stage::Lookup {
                    from,
                    local: split_path(l)?,
                    foreign: f.clone(),
                    as_: split_path(&as_)?,
                    pipeline,
                },
                (None, None) if pipeline.is_some() => Stage::Lookup {
                    from,
                    local: Vec::new(),
                    foreign: String::new(),
                    as_: split_path(&as_)?,
                    pipeline,
                },
                _ => return Err(DocError::failed_to_parse("$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")),
            }
        }
        "$replaceRoot" => {
            let d = obj(40228, "expected an object as specification for $replaceRoot stage")?;
            let Some(nr) = d.get("newRoot") else {
                return Err(stage_err(40231, "no newRoot specified for the $replaceRoot stage"));
            };
            if let Some(k) = d.keys().find(|k| *k != "newRoot") {
                return Err(stage_err(40230, format!("unrecognized option to $replaceRoot stage: {k}, only valid option is 'newRoot'.")));
            }
            Stage::ReplaceRoot(parse_expr(nr)?)
        }
        "$replaceWith" => Stage::ReplaceRoot(parse_expr(arg)?),
        "$sortByCount" => {
            let e = match arg {
                Bson::String(s) if s.starts_with('$') => parse_expr(arg)?,
                Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => parse_expr(arg)?,
                _ => return Err(stage_err(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")),
            };
            Stage::SortByCount(e)
        }
        // A standalone has no oplog to stream from; mongod answers the same.
        "$changeStream" => {
            return Err(DocError::with_code(
                40573,
                "Location40573",
                "The $changeStream stage is only supported on replica sets",
            ))
        }
        "$out" | "$merge" | "$facet" | "$bucket" | "$bucketAuto" | "$sample" | "$graphLookup"
        | "$geoNear" | "$indexStats" | "$collStats" | "$currentOp" | "$listSessions"
        | "$densify" | "$fill" | "$setWindowFields" | "$unionWith" | "$redact"
        | "$search" | "$documents" => {
            return Err(DocError::with_code(
                238,
                "NotImplemented",
                format!("{name} is not supported"),
            ))
        }
        other => {
            return Err(stage_err(
                40324,
                format!("Unrecognized pipeline stage name: '{other}'"),
            ))
        }
    })
}

/// Parses every stage of a pipeline (to report errors before running anything).
pub fn validate_pipeline(pipeline: &[Document]) -> DocResult<()> {
    for s in pipeline {
        parse_stage(s)?;
    }
    Ok(())
}

struct GroupState {
    id: Bson,
    accs: Vec<AccState>,
}

enum AccState {
    Sum(Num),
    SumNonNumericOnly,
    Avg(f64, usize, bool),
    MinMax(Option<Bson>),
    FirstLast(Option<Bson>),
    List(Vec<Bson>),
    Merge(Document),
    Std(Vec<f64>),
    /// The kept values of `$firstN` … `$minN` and their `n` (from the group's first document).
    N(Vec<Bson>, usize),
}

impl AccState {
    fn new(a: Acc) -> AccState {
        match a {
            Acc::Sum | Acc::Count => AccState::SumNonNumericOnly,
            Acc::Avg => AccState::Avg(0.0, 0, false),
            Acc::Min | Acc::Max => AccState::MinMax(None),
            Acc::First | Acc::Last => AccState::FirstLast(None),
            Acc::Push | Acc::AddToSet => AccState::List(Vec::new()),
            Acc::MergeObjects => AccState::Merge(Document::new()),
            Acc::StdDevPop | Acc::StdDevSamp => AccState::Std(Vec::new()),
            Acc::FirstN | Acc::LastN | Acc::MaxN | Acc::MinN => AccState::N(Vec::new(), 0),
        }
    }

    fn add(&mut self, a: Acc, v: Option<Bson>, first_seen: bool) -> DocResult<()> {
        match self {
            AccState::SumNonNumericOnly | AccState::Sum(_) => {
                // $sum of an array value sums nothing in $group (arrays are not numbers).
                if let Some(n) = v.as_ref().and_then(Num::of) {
                    let cur = match self {
                        AccState::Sum(c) => *c,
                        _ => Num::I32(0),
                    };
                    *self = AccState::Sum(crate::expr::add_num(cur, n));
                }
            }
            AccState::Avg(sum, n, dec) => {
                if let Some(x) = v.as_ref().and_then(Num::of) {
                    *sum += x.as_f64();
                    *n += 1;
                    *dec |= matches!(x, Num::Dec(_));
                }
            }
            AccState::MinMax(cur) => {
                if let Some(x) = v {
                    if matches!(x, Bson::Null | Bson::Undefined) {
                        return Ok(());
                    }
                    let better = match cur {
                        None => true,
                        Some(c) => {
                            let o = compare_bson(&x, c);
                            if a == Acc::Min {
                                o == std::cmp::Ordering::Less
                            } else {
                                o == std::cmp::Ordering::Greater
                            }
                        }
                    };
                    if better {
                        *cur = Some(x);
                    }
                }
            }
            AccState::FirstLast(cur) => {
                if a == Acc::Last || first_seen {
                    *cur = Some(v.unwrap_or(Bson::Null));
                }
            }
            AccState::List(items) => {
                if let Some(x) = v {
                    if a == Acc::Push || !items.iter().any(|e| bson_equal(e, &x)) {
                        items.push(x);
                    }
                }
            }
            AccState::Merge(d) => match v {
                None | Some(Bson::Null) => {}
                Some(Bson::Document(o)) => {
                    for (k, x) in o {
                        d.insert(k, x);
                    }
                }
                Some(other) => {
                    return Err(DocError::with_code(
                        40400,
                        "Location40400",
                        format!(
                            "$mergeObjects requires object inputs, but input {} is of type {}",
                            shell_repr(&other),
                            type_name(&other)
                        ),
                    ))
                }
            },
            AccState::Std(xs) => {
                if let Some(x) = v.as_ref().and_then(Num::of) {
                    xs.push(x.as_f64());
                }
            }
            AccState::N(items, n) => {
                let Some(Bson::Document(mut d)) = v else {
                    unreachable!("the {{input, n}} object expression evaluates to a document")
                };
                if first_seen {
                    *n = crate::expr::n_of(d.remove("n"))?;
                }
                let x = d.remove("input").unwrap_or(Bson::Null);
                match a {
                    Acc::FirstN if items.len() < *n => items.push(x),
                    Acc::FirstN => {}
                    Acc::LastN => {
                        // Drop the oldest in batches (amortised O(1) per value); `finish`
                        // keeps the last n.
                        items.push(x);
                        if items.len() >= 2 * *n {
                            items.drain(..items.len() - *n);
                        }
                    }
                    _ if matches!(x, Bson::Null | Bson::Undefined) => {}
                    _ => {
                        // Keep the n best, best first: one binary search and one insert.
                        let better = |p: &Bson, q: &Bson| match a {
                            Acc::MaxN => compare_bson(p, q).is_gt(),
                            _ => compare_bson(p, q).is_lt(),
                        };
                        let at = items.partition_point(|kept| !better(&x, kept));
                        if at < *n {
                            items.insert(at, x);
                            items.truncate(*n);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(self, a: Acc) -> Bson {
        match self {
            AccState::SumNonNumericOnly => Bson::Int32(0),
            AccState::Sum(n) => n.to_bson(),
            AccState::Avg(sum, n, dec) => {
                if n == 0 {
                    Bson::Null
                } else if dec {
                    Num::Dec(sum / n as f64).to_bson()
                } else {
                    Bson::Double(sum / n as f64)
                }
            }
            AccState::MinMax(v) => v.unwrap_or(Bson::Null),
            AccState::FirstLast(v) => v.unwrap_or(Bson::Null),
            AccState::List(items) => Bson::Array(items),
            AccState::Merge(d) => Bson::Document(d),
            AccState::N(mut items, n) => {
                items.drain(..items.len().saturating_sub(n));
                Bson::Array(items)
            }
            AccState::Std(xs) => {
                let n = xs.len();
                let samp = a == Acc::StdDevSamp;
                if n == 0 || (samp && n < 2) {
                    return Bson::Null;
                }
                let mean = xs.iter().sum::<f64>() / n as f64;
                let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
                Bson::Double((ss / if samp { (n - 1) as f64 } else { n as f64 }).sqrt())
            }
        }
    }
}

fn run_group(input: DocIter, id: &Expr, accs: &[(String, Acc, Expr)]) -> DocResult<Vec<Document>> {
    let mut index: BTreeMap<OrdBson, usize> = BTreeMap::new();
    let mut groups: Vec<GroupState> = Vec::new();
    for d in input {
        let d = d?;
        let ctx = Ctx::new(&d);
        let key = id.eval(&ctx)?.unwrap_or(Bson::Null);
        let (gi, fresh) = match index.get(&OrdBson(key.clone())) {
            Some(i) => (*i, false),
            None => {
                groups.push(GroupState {
                    id: key.clone(),
                    accs: accs.iter().map(|(_, a, _)| AccState::new(*a)).collect(),
                });
                index.insert(OrdBson(key), groups.len() - 1);
                (groups.len() - 1, true)
            }
        };
        for (i, (_, a, e)) in accs.iter().enumerate() {
            let v = e.eval(&ctx)?;
            groups[gi].accs[i].add(*a, v, fresh)?;
        }
    }
    Ok(groups
        .into_iter()
        .map(|g| {
            let mut out = Document::new();
            out.insert("_id", g.id);
            for ((name, a, _), st) in accs.iter().zip(g.accs) {
                out.insert(name.clone(), st.finish(*a));
            }
            out
        })
        .collect())
}

/// Sets a computed value at a path for `$addFields`, descending into arrays of documents.
fn add_field(doc: &mut Document, path: &[String], v: Bson) -> DocResult<()> {
    if path.len() == 1 {
        doc.insert(path[0].clone(), v);
        return Ok(());
    }
    match doc.get_mut(&path[0]) {
        Some(Bson::Document(sub)) => add_field(sub, &path[1..], v),
        Some(Bson::Array(arr)) => {
            for e in arr.iter_mut() {
                if let Bson::Document(sub) = e {
                    add_field(sub, &path[1..], v.clone())?;
                }
            }
            Ok(())
        }
        _ => {
            let mut sub = Document::new();
            add_field(&mut sub, &path[1..], v)?;
            doc.insert(path[0].clone(), sub);
            Ok(())
        }
    }
}

fn unset_path(doc: &mut Document, path: &[String]) {
    if path.len() == 1 {
        doc.remove(&path[0]);
        return;
    }
    match doc.get_mut(&path[0]) {
        Some(Bson::Document(sub)) => unset_path(sub, &path[1..]),
        Some(Bson::Array(arr)) => {
            for e in arr.iter_mut() {
                if let Bson::Document(sub) = e {
                    unset_path(sub, &path[1..]);
                }
            }
        }
        _ => {}
    }
}

fn unwind_doc(
    d: Document,
    path: &[String],
    index: &Option<String>,
    preserve: bool,
) -> Vec<DocResult<Document>> {
    let with_index = |mut doc: Document, i: Option<usize>| -> DocResult<Document> {
        if let Some(name) = index {
            set_path(
                &mut doc,
                &split_path(name)?,
                i.map(|i| Bson::Int64(i as i64)).unwrap_or(Bson::Null),
            )?;
        }
        Ok(doc)
    };
    match get_path(&d, path).cloned() {
        Some(Bson::Array(a)) if !a.is_empty() => a
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let mut out = d.clone();
                set_path(&mut out, path, e)?;
                with_index(out, Some(i))
            })
            .collect(),
        Some(Bson::Array(_)) => {
            if preserve {
                let mut out = d;
                remove_path(&mut out, path);
                vec![with_index(out, None)]
            } else {
                vec![]
            }
        }
        None | Some(Bson::Null) | Some(Bson::Undefined) => {
            if preserve {
                vec![with_index(d, None)]
            } else {
                vec![]
            }
        }
        Some(_) => vec![with_index(d, None)],
    }
}

/// Runs a pipeline over input documents. `source` reads the other collections of the same
/// database that stages join (`$lookup`).
pub fn run_pipeline(
    pipeline: &[Document],
    input: DocIter,
    source: &dyn CollectionSource,
    interrupt: &Interrupt,
) -> DocResult<Vec<Document>> {
    if pipeline.len() > MAX_PIPELINE_STAGES {
        return Err(DocError::with_code(
            7749501,
            "Location7749501",
            format!("Pipeline length must be no longer than {MAX_PIPELINE_STAGES} stages"),
        ));
    }
    let stages: Vec<Stage> = pipeline.iter().map(parse_stage).collect::<DocResult<_>>()?;
    // Every document leaving a stage is a yield point. The input is not wrapped again: it is
    // a scan that checks the same interrupt per document (aggregate's find), or documents
    // already in memory ($lookup's, an update's one document).
    let mut it: DocIter = input;
    for stage in stages {
        let deepens = stage_may_deepen(&stage);
        it = match stage {
            Stage::Match(m) => Box::new(it.filter(move |r| match r {
                Ok(d) => m.matches(d),
                Err(_) => true,
            })),
            Stage::Project(p) => Box::new(it.map(move |r| r.and_then(|d| project(&p, &d)))),
            Stage::AddFields(fields) => Box::new(it.map(move |r| {
                let mut d = r?;
                let src = d.clone();
                let ctx = Ctx::new(&src);
                for (path, e) in &fields {
                    match e.eval(&ctx)? {
                        Some(v) => add_field(&mut d, path, v)?,
                        // $$REMOVE / missing removes the field.
                        None => unset_path(&mut d, path),
                    }
                }
                Ok(d)
            })),
            Stage::Unset(paths) => Box::new(it.map(move |r| {
                let mut d = r?;
                for p in &paths {
                    unset_path(&mut d, p);
                }
                Ok(d)
            })),
            Stage::Group(id, accs) => Box::new(run_group(it, &id, &accs)?.into_iter().map(Ok)),
            Stage::Sort(spec) => {
                let mut docs: Vec<Document> = it.collect::<DocResult<_>>()?;
                spec.sort(&mut docs);
                Box::new(docs.into_iter().map(Ok))
            }
            Stage::Skip(n) => Box::new(it.skip(n as usize)),
            Stage::Limit(n) => Box::new(it.take(n as usize)),
            Stage::Unwind {
                path,
                index,
                preserve,
            } => Box::new(it.flat_map(move |r| match r {
                Ok(d) => unwind_doc(d, &path, &index, preserve),
                Err(e) => vec![Err(e)],
            })),
            Stage::Count(name) => {
                let mut n: i64 = 0;
                for r in it {
                    r?;
                    n += 1;
                }
                if n == 0 {
                    Box::new(std::iter::empty())
                } else {
                    let v = if n <= i32::MAX as i64 {
                        Bson::Int32(n as i32)
                    } else {
                        Bson::Int64(n)
                    };
                    let mut d = Document::new();
                    d.insert(name, v);
                    Box::new(std::iter::once(Ok(d)))
                }
            }
            Stage::Lookup {
                from,
                local,
                foreign,
                as_,
                pipeline,
            } => {
                let foreign_docs = source.read_collection(&from)?;
                let mut out = Vec::new();
                for r in it {
                    let mut d = r?;
                    let matched: Vec<Document> = if local.is_empty() {
                        foreign_docs.clone()
                    } else {
                        let lv = crate::expr::eval_doc_path(&d, &local);
                        let vals: Vec<Bson> = match lv {
                            None => vec![Bson::Null],
                            Some(Bson::Array(a)) if a.is_empty() => vec![Bson::Null],
                            Some(Bson::Array(a)) => a,
                            Some(v) => vec![v],
                        };
                        let m = Matcher::new(&bson::doc! {foreign.clone(): {"$in": vals}})?;
                        foreign_docs.iter().filter(|f| m.matches(f)).cloned().collect()
                    };
                    let matched = match &pipeline {
                        Some(p) => run_pipeline(
                            p,
                            Box::new(matched.into_iter().map(Ok).collect::<Vec<_>>().into_iter()),
                            source,
                            interrupt,
                        )?,
                        None => matched,
                    };
                    set_path(
                        &mut d,
                        &as_,
                        Bson::Array(matched.into_iter().map(Bson::Document).collect()),
                    )?;
                    out.push(Ok(d));
                }
                Box::new(out.into_iter())
            }
            Stage::ReplaceRoot(e) => Box::new(it.map(move |r| {
                let d = r?;
                match e.eval_root(&d)? {
                    Some(Bson::Document(nd)) => Ok(nd),
                    other => Err(stage_err(
                        40228,
                        format!(
                            "'replacement document' must evaluate to an object, but resulting value was: {}. Type of resulting value: '{}'. Input document: {}",
                            other.as_ref().map(shell_repr).unwrap_or_else(|| "MISSING".into()),
                            other.as_ref().map(type_name).unwrap_or("missing"),
                            crate::compare::doc_repr(&d)
                        ),
                    )),
                }
            })),
            Stage::SortByCount(e) => {
                let mut groups = run_group(it, &e, &[("count".into(), Acc::Sum, Expr::Lit(Bson::Int32(1)))])?;
                let spec = SortSpec {
                    fields: vec![("count".into(), -1)],
                };
                spec.sort(&mut groups);
                Box::new(groups.into_iter().map(Ok))
            }
        };
        if deepens {
            // Stage after stage could wrap a document one level deeper each time.
            it = Box::new(it.map(|r| {
                let d = r?;
                if crate::limits::doc_depth_exceeds(&d, crate::limits::MAX_BSON_DEPTH) {
                    return Err(DocError::with_code(
                        15,
                        "Overflow",
                        format!(
                            "a pipeline stage produced a document nested deeper than {} levels",
                            crate::limits::MAX_BSON_DEPTH
                        ),
                    ));
                }
                Ok(d)
            }));
        }
        it = Box::new(interrupt.wrap(it));
    }
    it.collect()
}

/// mongod's internalPipelineLengthLimit.
const MAX_PIPELINE_STAGES: usize = 1000;

/// Whether a stage can return documents nested deeper than its input.
fn stage_may_deepen(s: &Stage) -> bool {
    matches!(
        s,
        Stage::Project(_)
            | Stage::AddFields(_)
            | Stage::Group(..)
            | Stage::Lookup { .. }
            | Stage::ReplaceRoot(_)
            | Stage::SortByCount(_)
    )
}

fn project(p: &Projection, d: &Document) -> DocResult<Document> {
    p.apply_with_position(d, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn run(pipeline: Vec<Document>, input: Vec<Document>) -> DocResult<Vec<Document>> {
        let foreign = vec![
            doc! {"_id": 10, "k": 1, "name": "one"},
            doc! {"_id": 11, "k": 2, "name": "two"},
            doc! {"_id": 12, "k": 1, "name": "uno"},
            doc! {"_id": 13, "name": "nokey"},
        ];
        run_pipeline(
            &pipeline,
            Box::new(input.into_iter().map(Ok).collect::<Vec<_>>().into_iter()),
            &move |name: &str| {
                if name == "other" {
                    Ok(foreign.clone())
                } else {
                    Ok(vec![])
                }
            },
            &Interrupt::none(),
        )
    }

    fn sample() -> Vec<Document> {
        vec![
            doc! {"_id": 1, "cat": "a", "n": 5, "tags": ["x", "y"]},
            doc! {"_id": 2, "cat": "b", "n": 2.5, "tags": []},
            doc! {"_id": 3, "cat": "a", "n": Bson::Int64(1), "tags": null},
            doc! {"_id": 4, "cat": "c", "tags": "z"},
        ]
    }

    #[test]
    fn match_project_skip_limit_sort() {
        let r = run(
            vec![doc! {"$match": {"cat": "a"}}, doc! {"$project": {"n": 1}}],
            sample(),
        )
        .unwrap();
        assert_eq!(
            r,
            vec![
                doc! {"_id": 1, "n": 5},
                doc! {"_id": 3, "n": Bson::Int64(1)}
            ]
        );
        let r = run(
            vec![
                doc! {"$sort": {"n": -1}},
                doc! {"$skip": 1},
                doc! {"$limit": 2},
                doc! {"$project": {"_id": 1}},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(r, vec![doc! {"_id": 2}, doc! {"_id": 3}]);
        let r = run(
            vec![doc! {"$project": {"_id": 0, "c": {"$concat": ["$cat", "!"]}}}],
            sample(),
        )
        .unwrap();
        assert_eq!(r[0], doc! {"c": "a!"});
        let r = run(vec![doc! {"$project": {"tags": 0, "cat": 0}}], sample()).unwrap();
        assert_eq!(r[0], doc! {"_id": 1, "n": 5});
        assert_eq!(
            run(vec![doc! {"$match": {"$foo": 1}}], sample())
                .unwrap_err()
                .code,
            2
        );
        assert_eq!(
            run(vec![doc! {"$limit": 0}], sample()).unwrap_err().code,
            15958
        );
        assert_eq!(
            run(vec![doc! {"$limit": "x"}], sample()).unwrap_err().code,
            15957
        );
        assert_eq!(
            run(vec![doc! {"$skip": -1}], sample()).unwrap_err().code,
            5107200
        );
        assert_eq!(
            run(vec![doc! {"$sort": {}}], sample()).unwrap_err().code,
            15976
        );
        assert_eq!(
            run(vec![doc! {"$match": 1}], sample()).unwrap_err().code,
            15959
        );
    }

    #[test]
    fn stage_errors() {
        let e = run(vec![doc! {"$foo": {}}], sample()).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (40324, "Unrecognized pipeline stage name: '$foo'")
        );
        assert_eq!(e.code_name, "Location40324");
        let e = run(vec![doc! {"$match": {}, "$limit": 1}], sample()).unwrap_err();
        assert_eq!(e.code, 40323);
        let e = run(vec![doc! {"$project": {"x": {"$foo": 1}}}], sample()).unwrap_err();
        assert_eq!((e.code, e.code_name), (168, "InvalidPipelineOperator"));
        // Errors are reported before any input is consumed.
        let e = run_pipeline(
            &[doc! {"$match": {}}, doc! {"$bar": 1}],
            Box::new(std::iter::once(Err(DocError::internal_error("boom")))),
            &|_: &str| Ok(vec![]),
            &Interrupt::none(),
        )
        .unwrap_err();
        assert_eq!(e.code, 40324);
        // Input errors propagate.
        let e = run_pipeline(
            &[doc! {"$match": {}}],
            Box::new(std::iter::once(Err(DocError::internal_error("boom")))),
            &|_: &str| Ok(vec![]),
            &Interrupt::none(),
        )
        .unwrap_err();
        assert_eq!(e.code, 1);
    }

    #[test]
    fn add_fields_set_unset_replace_root() {
        let r = run(
            vec![
                doc! {"$addFields": {"m": {"$multiply": ["$n", 2]}, "sub.x": 1}},
                doc! {"$limit": 1},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(
            r[0],
            doc! {"_id": 1, "cat": "a", "n": 5, "tags": ["x", "y"], "m": 10, "sub": {"x": 1}}
        );
        let r = run(
            vec![
                doc! {"$set": {"n": "$$REMOVE", "cat": {"$toUpper": "$cat"}}},
                doc! {"$limit": 1},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(r[0], doc! {"_id": 1, "cat": "A", "tags": ["x", "y"]});
        let r = run(
            vec![
                doc! {"$set": {"o": {"a": 1}}},
                doc! {"$set": {"o": {"b": 2}}},
                doc! {"$limit": 1},
                doc! {"$project": {"o": 1, "_id": 0}},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(r[0], doc! {"o": {"a": 1, "b": 2}});
        let r = run(
            vec![doc! {"$unset": ["tags", "cat"]}, doc! {"$limit": 1}],
            sample(),
        )
        .unwrap();
        assert_eq!(r[0], doc! {"_id": 1, "n": 5});
        let r = run(vec![doc! {"$unset": "n"}, doc! {"$limit": 1}], sample()).unwrap();
        assert_eq!(r[0], doc! {"_id": 1, "cat": "a", "tags": ["x", "y"]});
        let r = run(
            vec![
                doc! {"$replaceRoot": {"newRoot": {"c": "$cat"}}},
                doc! {"$limit": 1},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(r[0], doc! {"c": "a"});
        let r = run(
            vec![
                doc! {"$replaceWith": {"$mergeObjects": [{"z": 0}, "$$ROOT"]}},
                doc! {"$limit": 1},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(r[0].keys().next().unwrap(), "z");
        assert_eq!(
            run(vec![doc! {"$replaceRoot": {"newRoot": "$n"}}], sample())
                .unwrap_err()
                .code,
            40228
        );
    }

    #[test]
    fn group_and_accumulators() {
        let r = run(
            vec![
                doc! {"$group": {
                    "_id": "$cat",
                    "sum": {"$sum": "$n"},
                    "count": {"$sum": 1},
                    "cnt": {"$count": {}},
                    "avg": {"$avg": "$n"},
                    "min": {"$min": "$n"},
                    "max": {"$max": "$n"},
                    "first": {"$first": "$n"},
                    "last": {"$last": "$n"},
                    "push": {"$push": "$n"},
                    "set": {"$addToSet": "$cat"},
                }},
                doc! {"$sort": {"_id": 1}},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(
            r[0],
            doc! {"_id": "a", "sum": Bson::Int64(6), "count": 2, "cnt": 2, "avg": 3.0, "min": Bson::Int64(1), "max": 5,
            "first": 5, "last": Bson::Int64(1), "push": [5, Bson::Int64(1)], "set": ["a"]}
        );
        assert_eq!(
            r[2],
            doc! {"_id": "c", "sum": 0, "count": 1, "cnt": 1, "avg": null, "min": null, "max": null,
            "first": null, "last": null, "push": [], "set": ["c"]}
        );
        // countDocuments as drivers send it.
        let r = run(
            vec![
                doc! {"$match": {"cat": "a"}},
                doc! {"$group": {"_id": 1, "n": {"$sum": 1}}},
            ],
            sample(),
        )
        .unwrap();
        assert_eq!(r, vec![doc! {"_id": 1, "n": 2}]);
        // Grouping by null, by compound keys, numbers of different types together.
        let r = run(
            vec![doc! {"$group": {"_id": null, "t": {"$sum": "$n"}}}],
            sample(),
        )
        .unwrap();
        assert_eq!(r, vec![doc! {"_id": null, "t": 8.5}]);
        let r = run(
            vec![doc! {"$group": {"_id": {"v": "$v"}, "c": {"$sum": 1}}}],
            vec![
                doc! {"v": 1},
                doc! {"v": 1.0},
                doc! {"v": Bson::Int64(1)},
                doc! {},
            ],
        )
        .unwrap();
        assert_eq!(
            r,
            vec![doc! {"_id": {"v": 1}, "c": 3}, doc! {"_id": {}, "c": 1}]
        );
        let r = run(vec![doc! {"$group": {"_id": "$missing", "m": {"$mergeObjects": {"x": "$cat"}}, "sd": {"$stdDevPop": "$n"}}}], sample()).unwrap();
        assert_eq!(r[0].get("_id"), Some(&Bson::Null));
        assert_eq!(r[0].get("m"), Some(&bson!({"x": "c"})));
        // The `n` accumulators (firstN/, lastN/, maxN/, minN/ in the manual): nulls count for
        // firstN/lastN, not for maxN/minN.
        let n = |acc: &str| {
            let g = doc! {"$group": {"_id": null, "r": {acc: {"input": "$n", "n": 2}}}};
            run(vec![g], sample()).unwrap()[0].get("r").cloned()
        };
        assert_eq!(n("$firstN"), Some(bson!([5, 2.5])));
        assert_eq!(n("$lastN"), Some(bson!([Bson::Int64(1), null])));
        assert_eq!(n("$maxN"), Some(bson!([5, 2.5])));
        assert_eq!(n("$minN"), Some(bson!([Bson::Int64(1), 2.5])));
        let bad = |spec: Document| {
            run(vec![doc! {"$group": {"_id": null, "r": spec}}], sample())
                .unwrap_err()
                .code
        };
        assert_eq!(bad(doc! {"$firstN": {"input": "$n"}}), 5787906);
        assert_eq!(bad(doc! {"$maxN": {"n": 1}}), 5787907);
        assert_eq!(
            bad(doc! {"$minN": {"n": 1, "input": "$n", "x": 1}}),
            5787901
        );
        assert_eq!(bad(doc! {"$lastN": {"n": 0, "input": "$n"}}), 5787908);
        // No input, no groups.
        assert!(run(
            vec![doc! {"$group": {"_id": null, "c": {"$sum": 1}}}],
            vec![]
        )
        .unwrap()
        .is_empty());
        // Errors.
        assert_eq!(
            run(vec![doc! {"$group": {"c": {"$sum": 1}}}], sample())
                .unwrap_err()
                .code,
            15955
        );
        assert_eq!(
            run(vec![doc! {"$group": {"_id": 1, "c": 1}}], sample())
                .unwrap_err()
                .code,
            40234
        );
        assert_eq!(
            run(
                vec![doc! {"$group": {"_id": 1, "c": {"$foo": 1}}}],
                sample()
            )
            .unwrap_err()
            .code,
            15952
        );
        assert_eq!(
            run(
                vec![doc! {"$group": {"_id": 1, "a.b": {"$sum": 1}}}],
                sample()
            )
            .unwrap_err()
            .code,
            40235
        );
        assert_eq!(
            run(
                vec![doc! {"$group": {"_id": 1, "c": {"$sum": 1, "$avg": 1}}}],
                sample()
            )
            .unwrap_err()
            .code,
            40238
        );
    }

    #[test]
    fn unwind() {
        let r = run(vec![doc! {"$unwind": "$tags"}], sample()).unwrap();
        assert_eq!(
            r,
            vec![
                doc! {"_id": 1, "cat": "a", "n": 5, "tags": "x"},
                doc! {"_id": 1, "cat": "a", "n": 5, "tags": "y"},
                doc! {"_id": 4, "cat": "c", "tags": "z"},
            ]
        );
        let r = run(
            vec![doc! {"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}, doc! {"$project": {"tags": 1, "i": 1}}],
            sample(),
        )
        .unwrap();
        assert_eq!(
            r,
            vec![
                doc! {"_id": 1, "tags": "x", "i": Bson::Int64(0)},
                doc! {"_id": 1, "tags": "y", "i": Bson::Int64(1)},
                doc! {"_id": 2, "i": null},
                doc! {"_id": 3, "tags": null, "i": null},
                doc! {"_id": 4, "tags": "z", "i": null},
            ]
        );
        let r = run(
            vec![doc! {"$unwind": "$a.b"}],
            vec![doc! {"a": {"b": [1, 2]}}],
        )
        .unwrap();
        assert_eq!(r, vec![doc! {"a": {"b": 1}}, doc! {"a": {"b": 2}}]);
        assert_eq!(
            run(vec![doc! {"$unwind": "tags"}], sample())
                .unwrap_err()
                .code,
            28818
        );
        assert_eq!(
            run(vec![doc! {"$unwind": {}}], sample()).unwrap_err().code,
            28812
        );
        assert_eq!(
            run(vec![doc! {"$unwind": {"path": "$t", "x": 1}}], sample())
                .unwrap_err()
                .code,
            28811
        );
    }

    #[test]
    fn count_stage() {
        assert_eq!(
            run(vec![doc! {"$count": "total"}], sample()).unwrap(),
            vec![doc! {"total": 4}]
        );
        assert!(run(
            vec![doc! {"$match": {"cat": "zz"}}, doc! {"$count": "total"}],
            sample()
        )
        .unwrap()
        .is_empty());
        assert_eq!(
            run(vec![doc! {"$count": ""}], sample()).unwrap_err().code,
            40156
        );
        assert_eq!(
            run(vec![doc! {"$count": "$x"}], sample()).unwrap_err().code,
            40158
        );
        assert_eq!(
            run(vec![doc! {"$count": "a.b"}], sample())
                .unwrap_err()
                .code,
            40160
        );
        assert_eq!(
            run(vec![doc! {"$count": 1}], sample()).unwrap_err().code,
            40156
        );
    }

    #[test]
    fn lookup() {
        let input = vec![
            doc! {"_id": 1, "k": 1},
            doc! {"_id": 2, "k": [2, 3]},
            doc! {"_id": 3},
        ];
        let r = run(
            vec![
                doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "as": "m"}},
                doc! {"$project": {"ids": "$m._id"}},
            ],
            input.clone(),
        )
        .unwrap();
        assert_eq!(
            r,
            vec![
                doc! {"_id": 1, "ids": [10, 12]},
                doc! {"_id": 2, "ids": [11]},
                doc! {"_id": 3, "ids": [13]}
            ]
        );
        let r = run(
            vec![doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "as": "m", "pipeline": [{"$project": {"_id": 0, "name": 1}}]}}, doc! {"$limit": 1}],
            input.clone(),
        )
        .unwrap();
        assert_eq!(
            r[0].get("m"),
            Some(&bson!([{"name": "one"}, {"name": "uno"}]))
        );
        let r = run(vec![doc! {"$lookup": {"from": "empty", "localField": "k", "foreignField": "k", "as": "m"}}, doc! {"$limit": 1}], input.clone()).unwrap();
        assert_eq!(r[0], doc! {"_id": 1, "k": 1, "m": []});
        assert_eq!(
            run(
                vec![doc! {"$lookup": {"from": "other", "as": "m"}}],
                input.clone()
            )
            .unwrap_err()
            .code,
            9
        );
        assert_eq!(run(vec![doc! {"$lookup": {"from": "other", "localField": "k", "foreignField": "k", "as": "m", "bogus": 1}}], input).unwrap_err().code, 40321);
    }

    #[test]
    fn sort_by_count() {
        let r = run(vec![doc! {"$sortByCount": "$cat"}], sample()).unwrap();
        assert_eq!(r[0], doc! {"_id": "a", "count": 2});
        assert_eq!(r.len(), 3);
    }
}
