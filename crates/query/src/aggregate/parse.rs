//! Parsing a stage's specification into a [`Stage`], with mongod's error codes for bad specs.

use bson::{Bson, Document};

use super::bucket::{Bucket, BucketAuto, Sample};
use super::facet::Facet;
use super::graph::GraphLookup;
use super::group::{parse_accumulators, Acc};
use super::lookup::{Lookup, UnionWith};
use super::out::{Merge, Out};
use super::stats::CollStats;
use super::window::SetWindowFields;
use crate::compare::{shell_repr, type_name, Num};
use crate::error::{DocError, DocResult};
use crate::expr::{parse_expr, Expr};
use crate::matcher::Matcher;
use crate::path::split_path;
use crate::projection::Projection;
use crate::sort::SortSpec;

#[derive(Clone, Debug)]
pub(super) enum Stage {
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
    Lookup(Lookup),
    UnionWith(UnionWith),
    Facet(Facet),
    Bucket(Bucket),
    BucketAuto(BucketAuto),
    Sample(Sample),
    GraphLookup(GraphLookup),
    SetWindowFields(SetWindowFields),
    CollStats(CollStats),
    Out(Out),
    Merge(Merge),
    ReplaceRoot(Expr),
    SortByCount(Expr),
}

pub(super) fn stage_err(code: i32, msg: impl Into<String>) -> DocError {
    let name: &'static str = match code {
        40323 => "Location40323",
        4570 => "Location4570",
        5447000 => "Location5447000",
        51024 => "Location51024",
        40602 => "Location40602",
        5339900 => "Location5339900",
        5339901 => "Location5339901",
        5339902 => "Location5339902",
        5371601 => "Location5371601",
        5371602 => "Location5371602",
        5371603 => "Location5371603",
        5429413 => "Location5429413",
        5429513 => "Location5429513",
        5624900 => "Location5624900",
        5624901 => "Location5624901",
        5423901 => "Location5423901",
        5423902 => "Location5423902",
        40100 => "Location40100",
        40101 => "Location40101",
        40102 => "Location40102",
        40103 => "Location40103",
        40104 => "Location40104",
        40105 => "Location40105",
        40185 => "Location40185",
        40327 => "Location40327",
        16990 => "Location16990",
        17385 => "Location17385",
        31321 => "Location31321",
        51178 => "Location51178",
        51181 => "Location51181",
        51182 => "Location51182",
        51183 => "Location51183",
        51191 => "Location51191",
        51199 => "Location51199",
        51132 => "Location51132",
        13113 => "Location13113",
        51134 => "Location51134",
        31465 => "Location31465",
        51187 => "Location51187",
        51186 => "Location51186",
        40601 => "Location40601",
        51047 => "Location51047",
        31441 => "Location31441",
        40201 => "Location40201",
        40202 => "Location40202",
        40200 => "Location40200",
        40191 => "Location40191",
        40192 => "Location40192",
        40193 => "Location40193",
        40194 => "Location40194",
        40195 => "Location40195",
        40196 => "Location40196",
        40197 => "Location40197",
        40198 => "Location40198",
        40199 => "Location40199",
        40066 => "Location40066",
        40239 => "Location40239",
        40240 => "Location40240",
        40241 => "Location40241",
        40242 => "Location40242",
        40243 => "Location40243",
        40244 => "Location40244",
        40245 => "Location40245",
        40246 => "Location40246",
        40257 => "Location40257",
        40258 => "Location40258",
        40259 => "Location40259",
        40260 => "Location40260",
        40261 => "Location40261",
        11785400 => "Location11785400",
        28745 => "Location28745",
        28746 => "Location28746",
        28747 => "Location28747",
        28748 => "Location28748",
        28749 => "Location28749",
        40169 => "Location40169",
        40170 => "Location40170",
        40171 => "Location40171",
        40600 => "Location40600",
        4031700 => "Location4031700",
        15998 => "Location15998",
        16410 => "Location16410",
        16411 => "Location16411",
        16412 => "Location16412",
        16866 => "Location16866",
        16867 => "Location16867",
        16868 => "Location16868",
        40414 => "Location40414",
        40415 => "Location40415",
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
        5107200 => "Location5107200",
        _ => "Location",
    };
    DocError::with_code(code, name, msg)
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
            let accs = parse_accumulators(d.iter().filter(|(k, _)| *k != "_id"))?;
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
        "$lookup" => Stage::Lookup(Lookup::parse(arg)?),
        "$unionWith" => Stage::UnionWith(UnionWith::parse(arg)?),
        "$facet" => Stage::Facet(Facet::parse(arg)?),
        "$bucket" => Stage::Bucket(Bucket::parse(arg)?),
        "$bucketAuto" => Stage::BucketAuto(BucketAuto::parse(arg)?),
        "$sample" => Stage::Sample(Sample::parse(arg)?),
        "$graphLookup" => Stage::GraphLookup(GraphLookup::parse(arg)?),
        "$setWindowFields" => Stage::SetWindowFields(SetWindowFields::parse(arg)?),
        "$collStats" => Stage::CollStats(CollStats::parse(arg)?),
        "$out" => Stage::Out(Out::parse(arg)?),
        "$merge" => Stage::Merge(Merge::parse(arg)?),
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
        "$geoNear" | "$indexStats" | "$currentOp" | "$listSessions"
        | "$densify" | "$fill" | "$redact"
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

/// Parses the stages of a sub-pipeline (`$lookup`'s, `$facet`'s, `$unionWith`'s).
pub(super) fn parse_sub_pipeline(stages: &[Bson], owner: &str) -> DocResult<Vec<Stage>> {
    if stages.len() > super::MAX_PIPELINE_STAGES {
        return Err(DocError::with_code(
            7749501,
            "Location7749501",
            format!(
                "{owner}: a pipeline must be no longer than {} stages",
                super::MAX_PIPELINE_STAGES
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
    let misplaced = parsed.iter().find_map(|s| match s {
        Stage::CollStats(_) => Some("$collStats"),
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

impl Stage {
    /// The name of a stage that writes (`$out`, `$merge`).
    pub(super) fn writes(&self) -> Option<&'static str> {
        match self {
            Stage::Out(_) => Some("$out"),
            Stage::Merge(_) => Some("$merge"),
            _ => None,
        }
    }
}

/// Where stages may stand: a writing stage last (40601), `$collStats` first (40602).
pub(super) fn check_positions(stages: &[Stage]) -> DocResult<()> {
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
