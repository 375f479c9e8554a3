//! Parsing a stage's specification into a [`Stage`], with mongod's error codes for bad specs.

use bson::{Bson, Document};

use super::bucket::{Bucket, BucketAuto, Sample};
use super::common::{stage_err, MAX_PIPELINE_STAGES};
use super::current_op::{self, CurrentOpSpec};
use super::graph::GraphLookup;
use super::group::parse_accumulators;
use super::out::{Merge, Out};
use super::sessions::{self, ListSessionsSpec};
use super::stage::{Facet, Lookup, Stage, UnionWith};
use super::stats::CollStats;
use super::window::SetWindowFields;
use crate::compare::{shell_repr, type_name, Num};
use crate::error::{DocError, DocResult};
use crate::expr::{parse_expr, Expr};
use crate::matcher::Matcher;
use crate::path::split_path;
use crate::projection::Projection;
use crate::sort::SortSpec;

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

pub(super) fn parse_stage(s: &Document) -> DocResult<Stage> {
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
        "$match" => Stage::Match(match_stage(obj(
            15959,
            "the match filter must be an expression in an object",
        )?)?),
        "$project" => Stage::Project(Projection::parse_aggregation(obj(
            15969,
            "$project specification must be an object",
        )?)?),
        "$addFields" | "$set" => Stage::AddFields(parse_add_fields(obj(
            40272,
            &format!(
                "{name} specification stage must be an object, got {}",
                type_name(arg)
            ),
        )?)?),
        "$unset" => parse_unset(arg)?,
        "$group" => parse_group(obj(
            15947,
            "a group's fields must be specified in an object",
        )?)?,
        "$sort" => {
            let d = obj(15973, "the $sort key specification must be an object")?;
            if d.is_empty() {
                return Err(stage_err(
                    15976,
                    "$sort stage must have at least one sort key",
                ));
            }
            Stage::Sort(SortSpec::parse(d)?)
        }
        "$skip" => Stage::Skip(non_negative_int("$skip", arg, true)?),
        "$limit" => Stage::Limit(non_negative_int("$limit", arg, false)?),
        "$unwind" => parse_unwind(arg)?,
        "$count" => parse_count(arg)?,
        "$lookup" => Stage::Lookup(Lookup::parse(arg)?),
        "$unionWith" => Stage::UnionWith(UnionWith::parse(arg)?),
        "$facet" => Stage::Facet(Facet::parse(arg)?),
        "$bucket" => Stage::Bucket(Bucket::parse(arg)?),
        "$bucketAuto" => Stage::BucketAuto(BucketAuto::parse(arg)?),
        "$sample" => Stage::Sample(Sample::parse(arg)?),
        "$graphLookup" => Stage::GraphLookup(GraphLookup::parse(arg)?),
        "$setWindowFields" => Stage::SetWindowFields(SetWindowFields::parse(arg)?),
        "$collStats" => Stage::CollStats(CollStats::parse(arg)?),
        "$geoNear" => {
            crate::geo::GeoNearSpec::parse(arg)?;
            Stage::GeoNear
        }
        "$currentOp" => Stage::CurrentOp(CurrentOpSpec::parse(arg)?),
        "$listLocalSessions" => Stage::ListLocalSessions(ListSessionsSpec::parse(arg)?),
        "$documents" => Stage::Documents(parse_expr(arg)?),
        "$out" => Stage::Out(Out::parse(arg)?),
        "$merge" => Stage::Merge(Merge::parse(arg, parse_update_pipeline)?),
        "$replaceRoot" => parse_replace_root(obj(
            40228,
            "expected an object as specification for $replaceRoot stage",
        )?)?,
        "$replaceWith" => Stage::ReplaceRoot(parse_expr(arg)?),
        "$sortByCount" => parse_sort_by_count(arg)?,
        // A standalone has no oplog to stream from; mongod answers the same.
        "$changeStream" => {
            return Err(DocError::with_code(
                40573,
                "Location40573",
                "The $changeStream stage is only supported on replica sets",
            ))
        }
        "$indexStats" | "$listSessions" | "$densify" | "$fill" | "$redact" | "$search" => {
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

/// `$unset`: a field path, or an array of them.
fn parse_unset(arg: &Bson) -> DocResult<Stage> {
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
            return Err(stage_err(
                31120,
                "$unset specification must be a string or an array containing only string values",
            ));
        };
        paths.push(split_path(s)?);
    }
    Ok(Stage::Unset(paths))
}

/// `$unwind`: `"$path"`, or `{path, includeArrayIndex, preserveNullAndEmptyArrays}`.
fn parse_unwind(arg: &Bson) -> DocResult<Stage> {
    Ok(match arg {
        Bson::String(p) => {
            let Some(p) = p.strip_prefix('$') else {
                return Err(stage_err(
                    28818,
                    format!("path option to $unwind stage should be prefixed with a '$': {p}"),
                ));
            };
            Stage::Unwind {
                path: split_path(p)?,
                index: None,
                preserve: false,
            }
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
            Stage::Unwind {
                path,
                index,
                preserve,
            }
        }
        _ => {
            return Err(stage_err(
                15981,
                format!(
                "expected either a string or an object as specification for $unwind stage, got {}",
                type_name(arg)
            ),
            ))
        }
    })
}

/// `$count`: the output field's name.
fn parse_count(arg: &Bson) -> DocResult<Stage> {
    let Bson::String(s) = arg else {
        return Err(stage_err(
            40156,
            "the count field must be a non-empty string",
        ));
    };
    if s.is_empty() {
        return Err(stage_err(
            40156,
            "the count field must be a non-empty string",
        ));
    }
    if s.starts_with('$') {
        return Err(stage_err(
            40158,
            "the count field cannot be a $-prefixed path",
        ));
    }
    if s.contains('.') {
        return Err(stage_err(40160, "the count field cannot contain '.'"));
    }
    Ok(Stage::Count(s.clone()))
}

/// `$sortByCount`: a `$`-path or an expression object.
fn parse_sort_by_count(arg: &Bson) -> DocResult<Stage> {
    let e = match arg {
        Bson::String(s) if s.starts_with('$') => parse_expr(arg)?,
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            parse_expr(arg)?
        }
        _ => {
            return Err(stage_err(
                40148,
                "the sortByCount field must be defined as a $-prefixed path or an expression",
            ))
        }
    };
    Ok(Stage::SortByCount(e))
}

/// `$group`: its `_id` expression and its accumulators.
fn parse_group(d: &Document) -> DocResult<Stage> {
    let Some(id) = d.get("_id") else {
        return Err(DocError::location_15955(
            "a group specification must include an _id",
        ));
    };
    let id = parse_expr(id)?;
    let accs = parse_accumulators(d.iter().filter(|(k, _)| *k != "_id"))?;
    Ok(Stage::Group(id, accs))
}

/// `$replaceRoot`: `{newRoot: <expression>}`.
fn parse_replace_root(d: &Document) -> DocResult<Stage> {
    let Some(nr) = d.get("newRoot") else {
        return Err(stage_err(
            40231,
            "no newRoot specified for the $replaceRoot stage",
        ));
    };
    if let Some(k) = d.keys().find(|k| *k != "newRoot") {
        return Err(stage_err(
            40230,
            format!(
                "unrecognized option to $replaceRoot stage: {k}, only valid option is 'newRoot'."
            ),
        ));
    }
    Ok(Stage::ReplaceRoot(parse_expr(nr)?))
}

/// Parses the stages of a sub-pipeline (`$lookup`'s, `$facet`'s, `$unionWith`'s).
pub(super) fn parse_sub_pipeline(stages: &[Bson], owner: &str) -> DocResult<Vec<Stage>> {
    if stages.len() > MAX_PIPELINE_STAGES {
        return Err(DocError::with_code(
            7749501,
            "Location7749501",
            format!(
                "{owner}: a pipeline must be no longer than {} stages",
                MAX_PIPELINE_STAGES
            ),
        ));
    }
    let parsed = stages
        .iter()
        .map(|s| match s {
            Bson::Document(d) => parse_stage(d),
            _ => Err(DocError::failed_to_parse(format!(
                "{owner}: 'pipeline' option must be specified as an array of objects"
            ))),
        })
        .collect::<DocResult<Vec<Stage>>>()?;
    // A sub-pipeline's output goes back to its stage: it cannot write, and it has no
    // collection of its own to report on.
    if parsed.iter().any(Stage::is_text_match) {
        return Err(text_not_first());
    }
    let misplaced = parsed.iter().find_map(|s| match s {
        Stage::CollStats(_) => Some("$collStats"),
        Stage::GeoNear => Some("$geoNear"),
        Stage::CurrentOp(_) => Some("$currentOp"),
        Stage::ListLocalSessions(_) => Some("$listLocalSessions"),
        other => other.writes(),
    });
    if let Some(w) = misplaced {
        let code = if owner == "$unionWith" { 31441 } else { 51047 };
        return Err(stage_err(
            code,
            format!("{w} is not allowed within a {owner}'s sub-pipeline"),
        ));
    }
    Ok(parsed)
}

fn text_not_first() -> DocError {
    stage_err(
        17313,
        "$match with $text is only allowed as the first pipeline stage",
    )
}

/// Where stages may stand: a writing stage last (40601), `$collStats` and `$currentOp` first
/// (40602), a `$text` match first (17313).
pub(super) fn check_positions(stages: &[Stage]) -> DocResult<()> {
    if stages.iter().skip(1).any(Stage::is_text_match) {
        return Err(text_not_first());
    }
    if stages
        .iter()
        .skip(1)
        .any(|s| matches!(s, Stage::CollStats(_)))
    {
        return Err(stage_err(
            40602,
            "$collStats is only valid as the first stage in a pipeline",
        ));
    }
    if stages.iter().skip(1).any(|s| matches!(s, Stage::GeoNear)) {
        return Err(stage_err(
            40602,
            "$geoNear is only valid as the first stage in a pipeline.",
        ));
    }
    if stages
        .iter()
        .skip(1)
        .any(|s| matches!(s, Stage::CurrentOp(_)))
    {
        return Err(current_op::misplaced());
    }
    if stages
        .iter()
        .skip(1)
        .any(|s| matches!(s, Stage::ListLocalSessions(_)))
    {
        return Err(sessions::misplaced());
    }
    if stages
        .iter()
        .skip(1)
        .any(|s| matches!(s, Stage::Documents(_)))
    {
        return Err(stage_err(
            40602,
            "$documents is only valid as the first stage in a pipeline",
        ));
    }
    let before_last = stages.len().saturating_sub(1);
    if let Some(w) = stages[..before_last].iter().find_map(Stage::writes) {
        return Err(stage_err(
            40601,
            format!("{w} can only be the final stage in the pipeline"),
        ));
    }
    Ok(())
}

/// Parses every stage of a pipeline (to report errors before running anything).
pub fn validate_pipeline(pipeline: &[Document]) -> DocResult<()> {
    let stages = pipeline
        .iter()
        .map(parse_stage)
        .collect::<DocResult<Vec<_>>>()?;
    check_positions(&stages)
}

/// Parses an update's pipeline (`update: [...]`, `$merge`'s `whenMatched: [...]`): only the
/// stages that reshape one document may stand in it, each checked now.
pub fn parse_update_pipeline(stages: &[Bson]) -> DocResult<Vec<Document>> {
    let mut docs = Vec::new();
    for s in stages {
        let Bson::Document(d) = s else {
            return Err(DocError::type_mismatch(
                "Each element of the 'pipeline' array must be an object",
            ));
        };
        let name = d.keys().next().map(String::as_str).unwrap_or("");
        if !matches!(
            name,
            "$addFields" | "$set" | "$project" | "$unset" | "$replaceRoot" | "$replaceWith"
        ) {
            return Err(DocError::with_code(
                72,
                "InvalidOptions",
                format!("{name} is not allowed to be used within an update"),
            ));
        }
        docs.push(d.clone());
    }
    validate_pipeline(&docs)?;
    Ok(docs)
}

/// `$match`'s filter: a query filter, which may not hold `$where` (mongod's BadValue).
fn match_stage(filter: &Document) -> DocResult<Matcher> {
    let m = Matcher::new_with_text(filter)?;
    if m.has_where() {
        return Err(DocError::bad_value("$where is not allowed in this context"));
    }
    Ok(m)
}
