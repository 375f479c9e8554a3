//! Update documents: modifiers (`$set`, `$inc`, …), replacements and pipeline updates, plus the
//! seed document of an upsert.
//!
//! Modifier paths may use the positional operators `$` (the array index the query matched at,
//! see [`Update::apply_with_position`]), `$[]` (every element) and `$[<id>]` (elements matching
//! the array filter `<id>`).

use std::cmp::Ordering;

use bson::{Bson, DateTime, Document, Timestamp};

use crate::compare::{bson_equal, compare_bson, doc_repr, shell_repr, type_name, Num};
use crate::error::{DocError, DocResult};
use crate::expr::{add_num, mul_num};
use crate::matcher::{Matcher, ValueCondition};
use crate::path::{array_index, get_path, path_crosses_array, remove_path, set_path, split_path};
use crate::sort::SortSpec;

/// A parsed update.
#[derive(Clone, Debug)]
pub struct Update {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Replacement(Document),
    Modifiers(Vec<ModOp>, Vec<(String, Matcher)>),
    /// The stages, and the command's `let` variables they read.
    Pipeline(Vec<Document>, crate::vars::Scope),
}

#[derive(Clone, Debug)]
struct ModOp {
    path: Vec<String>,
    op: Op,
}

#[derive(Clone, Debug)]
enum Op {
    Set(Bson),
    SetOnInsert(Bson),
    Unset,
    Inc(Num, Bson),
    Mul(Num, Bson),
    Min(Bson),
    Max(Bson),
    Rename(Vec<String>),
    Push(PushSpec),
    AddToSet(Vec<Bson>),
    Pop(bool),
    Pull(PullCond),
    PullAll(Vec<Bson>),
    CurrentDate(bool),
    Bit(Vec<(String, i64)>),
}

#[derive(Clone, Debug)]
struct PushSpec {
    each: Vec<Bson>,
    slice: Option<i64>,
    sort: Option<PushSort>,
    position: Option<i64>,
}

#[derive(Clone, Debug)]
enum PushSort {
    Whole(i32),
    Fields(SortSpec),
}

#[derive(Clone, Debug)]
enum PullCond {
    Value(ValueCondition),
    Query(Box<Matcher>),
}

const MODIFIERS: &[&str] = &[
    "$set",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$rename",
    "$push",
    "$addToSet",
    "$pop",
    "$pull",
    "$pullAll",
    "$currentDate",
    "$setOnInsert",
    "$bit",
];

fn arg_repr(field: &str, v: &Bson) -> String {
    format!("{{{field}: {}}}", shell_repr(v))
}

fn int_arg(op: &str, v: &Bson) -> DocResult<i64> {
    Num::of(v).and_then(Num::as_i64_exact).ok_or_else(|| {
        DocError::bad_value(format!(
            "The value for {op} must be an integer value but was given type: {}",
            type_name(v)
        ))
    })
}

fn parse_push(field: &str, v: &Bson) -> DocResult<PushSpec> {
    let d = match v {
        Bson::Document(d) if d.contains_key("$each") => d,
        other => {
            return Ok(PushSpec {
                each: vec![other.clone()],
                slice: None,
                sort: None,
                position: None,
            })
        }
    };
    let mut spec = PushSpec {
        each: Vec::new(),
        slice: None,
        sort: None,
        position: None,
    };
    for (k, a) in d {
        match k.as_str() {
            "$each" => match a {
                Bson::Array(arr) => spec.each = arr.clone(),
                other => {
                    return Err(DocError::bad_value(format!(
                        "The argument to $each in $push must be an array but it was of type: {}",
                        type_name(other)
                    )))
                }
            },
            "$slice" => spec.slice = Some(int_arg("$slice", a)?),
            "$position" => spec.position = Some(int_arg("$position", a)?),
            "$sort" => {
                let bad = || {
                    DocError::bad_value(
                        "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields",
                    )
                };
                spec.sort = Some(match a {
                    Bson::Document(sd) => {
                        if sd.is_empty() {
                            return Err(DocError::bad_value(
                                "The $sort pattern is empty when it should be a set of fields.",
                            ));
                        }
                        PushSort::Fields(SortSpec::parse(sd).map_err(|_| bad())?)
                    }
                    other => match Num::of(other).map(|n| n.as_f64()) {
                        Some(1.0) => PushSort::Whole(1),
                        Some(-1.0) => PushSort::Whole(-1),
                        _ => return Err(bad()),
                    },
                });
            }
            other => {
                return Err(DocError::bad_value(format!(
                    "Unrecognized clause in $push: {other}"
                )))
            }
        }
    }
    let _ = field;
    Ok(spec)
}

fn parse_op(modifier: &str, field: &str, v: &Bson) -> DocResult<Op> {
    Ok(match modifier {
        "$set" => Op::Set(v.clone()),
        "$setOnInsert" => Op::SetOnInsert(v.clone()),
        "$unset" => Op::Unset,
        "$inc" | "$mul" => {
            let Some(n) = Num::of(v) else {
                let verb = if modifier == "$inc" {
                    "increment"
                } else {
                    "multiply"
                };
                return Err(DocError::type_mismatch(format!(
                    "Cannot {verb} with non-numeric argument: {}",
                    arg_repr(field, v)
                )));
            };
            if modifier == "$inc" {
                Op::Inc(n, v.clone())
            } else {
                Op::Mul(n, v.clone())
            }
        }
        "$min" => Op::Min(v.clone()),
        "$max" => Op::Max(v.clone()),
        "$rename" => parse_rename(field, v)?,
        "$push" => Op::Push(parse_push(field, v)?),
        "$addToSet" => parse_add_to_set(v)?,
        "$pop" => match Num::of(v).map(|n| n.as_f64()) {
            Some(1.0) => Op::Pop(true),
            Some(-1.0) => Op::Pop(false),
            _ => {
                return Err(DocError::failed_to_parse(format!(
                    "$pop expects 1 or -1, found: {}",
                    shell_repr(v)
                )))
            }
        },
        "$pull" => match v {
            Bson::Document(d)
                if !d.is_empty() && !d.keys().next().is_some_and(|k| k.starts_with('$')) =>
            {
                Op::Pull(PullCond::Query(Box::new(Matcher::new(d)?)))
            }
            other => Op::Pull(PullCond::Value(Matcher::value_condition(other)?)),
        },
        "$pullAll" => match v {
            Bson::Array(a) => Op::PullAll(a.clone()),
            other => {
                return Err(DocError::bad_value(format!(
                    "$pullAll requires an array argument but was given a {}",
                    type_name(other)
                )))
            }
        },
        "$currentDate" => parse_current_date(v)?,
        "$bit" => parse_bit(v)?,
        _ => unreachable!("checked by caller"),
    })
}

/// `$rename`'s target: a different, static path, not on the source's own path.
fn parse_rename(field: &str, v: &Bson) -> DocResult<Op> {
    let Bson::String(to) = v else {
        return Err(DocError::bad_value(format!(
            "The 'to' field for $rename must be a string: {field}: {}",
            shell_repr(v)
        )));
    };
    if to == field {
        return Err(DocError::bad_value(format!(
            "The source and target field for $rename must differ: {field}: {}",
            shell_repr(v)
        )));
    }
    if to.starts_with(&format!("{field}.")) || field.starts_with(&format!("{to}.")) {
        return Err(DocError::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {field}: {}",
            shell_repr(v)
        )));
    }
    if to.split('.').any(|p| p.starts_with('$')) || field.split('.').any(|p| p.starts_with('$')) {
        return Err(DocError::bad_value(format!(
            "The source field for $rename may not be dynamic: {field}"
        )));
    }
    check_path(to)?;
    Ok(Op::Rename(split_path(to)?))
}

/// `$addToSet`'s values: one, or `{$each: [...]}`.
fn parse_add_to_set(v: &Bson) -> DocResult<Op> {
    Ok(match v {
        Bson::Document(d) if d.contains_key("$each") => match d.get("$each") {
            Some(Bson::Array(a)) => {
                if let Some(k) = d.keys().find(|k| *k != "$each") {
                    return Err(DocError::bad_value(format!(
                        "Found unexpected fields after $each in $addToSet: {k}"
                    )));
                }
                Op::AddToSet(a.clone())
            }
            Some(other) => {
                return Err(DocError::type_mismatch(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {}",
                    type_name(other)
                )))
            }
            None => unreachable!(),
        },
        other => Op::AddToSet(vec![other.clone()]),
    })
}

/// `$currentDate`: `true` or `{$type: "date"}` for a date, `{$type: "timestamp"}` for a
/// timestamp.
fn parse_current_date(v: &Bson) -> DocResult<Op> {
    Ok(match v {
    Bson::Boolean(_) => Op::CurrentDate(false),
    Bson::Document(d) => {
        let bad = || {
            DocError::bad_value(
                "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
            )
        };
        if d.len() != 1 {
            return Err(bad());
        }
        match d.get("$type") {
            Some(Bson::String(t)) if t == "date" => Op::CurrentDate(false),
            Some(Bson::String(t)) if t == "timestamp" => Op::CurrentDate(true),
            _ => return Err(bad()),
        }
    }
    other => {
        return Err(DocError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
            type_name(other)
        )))
    }
})
}

/// `$bit`'s operations (`and`, `or`, `xor`) with their integer operands.
fn parse_bit(v: &Bson) -> DocResult<Op> {
    let Bson::Document(d) = v else {
        return Err(DocError::bad_value(format!(
        "The $bit modifier is not compatible with a {}. You must pass in an embedded document: {{$bit: {{field: {{and/or/xor: #}}}}",
        type_name(v)
    )));
    };
    let mut ops = Vec::new();
    for (k, a) in d {
        if !matches!(k.as_str(), "and" | "or" | "xor") {
            return Err(DocError::bad_value(format!(
            "The $bit modifier only supports 'and', 'or', and 'xor', not '{k}' which is an unknown operator: {{{k}: {}}}",
            shell_repr(a)
        )));
        }
        let n = match a {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        other => {
            return Err(DocError::bad_value(format!(
                "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported here: {{{k}: {}}}",
                type_name(other),
                shell_repr(other)
            )))
        }
    };
        ops.push((k.clone(), n));
    }
    Ok(Op::Bit(ops))
}

fn check_path(path: &str) -> DocResult<()> {
    crate::limits::check_path(path)?;
    if path.contains('\0') {
        // A field name is a C string in BSON.
        return Err(DocError::bad_value(format!(
            "The update path '{}' contains a null byte, which is not allowed.",
            path.escape_default()
        )));
    }
    if path.is_empty() {
        return Err(DocError::empty_field_name(
            "An empty update path is not valid.",
        ));
    }
    if path.split('.').any(str::is_empty) {
        return Err(DocError::empty_field_name(format!(
            "The update path '{path}' contains an empty field name, which is not allowed."
        )));
    }
    Ok(())
}

/// mongod's (5.0+) refusal of a `$`-prefixed field an update writes at the top level of a
/// document by a replacement or a modifier; a pipeline's output and nested fields are stored as
/// given.
fn top_level_dollar_field(k: &str) -> DocError {
    DocError::dollar_prefixed_field_name(format!(
        "The dollar ($) prefixed field '{k}' in '{k}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
    ))
}

fn invalid_dbref(message: impl Into<String>) -> DocError {
    DocError::with_code(55, "InvalidDBRef", message)
}

/// A replacement document's top-level fields, as mongod's storage validation checks them: a
/// `$`-prefixed name is refused unless it is part of a DBRef (`$ref` a string followed by
/// `$id`, then optionally `$db` a string), which mongod still accepts there.
fn check_replacement_fields(d: &Document) -> DocResult<()> {
    let fields: Vec<(&String, &Bson)> = d.iter().collect();
    for (i, (k, _)) in fields.iter().enumerate() {
        if k.starts_with('$') {
            check_dbref_field(&fields, i)?;
        }
    }
    Ok(())
}

/// Walks back from a `$db` or `$id` field to its `$ref`, checking each link of the DBRef.
fn check_dbref_field(fields: &[(&String, &Bson)], at: usize) -> DocResult<()> {
    let name_at = |i: Option<usize>| i.and_then(|i| fields.get(i)).map(|(k, _)| k.as_str());
    let mut i = at;
    if fields[i].0 == "$db" {
        if !matches!(fields[i].1, Bson::String(_)) {
            return Err(invalid_dbref(format!(
                "The DBRef $db field must be a String, not a {}",
                type_name(fields[i].1)
            )));
        }
        if name_at(i.checked_sub(1)) != Some("$id") {
            return Err(invalid_dbref(
                "Found $db field without a $id before it, which is invalid.",
            ));
        }
        i -= 1;
    }
    if fields[i].0 == "$id" {
        if name_at(i.checked_sub(1)) != Some("$ref") {
            return Err(invalid_dbref(
                "Found $id field without a $ref before it, which is invalid.",
            ));
        }
        i -= 1;
    }
    if fields[i].0 != "$ref" {
        return Err(top_level_dollar_field(fields[at].0));
    }
    if !matches!(fields[i].1, Bson::String(_)) {
        return Err(invalid_dbref(format!(
            "The DBRef $ref field must be a String, not a {}",
            type_name(fields[i].1)
        )));
    }
    if name_at(Some(i + 1)) != Some("$id") {
        return Err(invalid_dbref(
            "The DBRef $ref field must be followed by a $id field",
        ));
    }
    Ok(())
}

fn is_prefix(a: &[String], b: &[String]) -> bool {
    a.len() <= b.len() && a.iter().zip(b.iter()).all(|(x, y)| x == y)
}

fn is_prefix_str(a: &[&str], b: &[&str]) -> bool {
    a.len() <= b.len() && a.iter().zip(b.iter()).all(|(x, y)| x == y)
}

fn identifier_of(part: &str) -> Option<&str> {
    part.strip_prefix("$[")?.strip_suffix(']')
}

impl Update {
    /// Parses an update: a modifier document, a replacement document, or a pipeline (array of
    /// stages `$set`/`$addFields`/`$project`/`$unset`/`$replaceRoot`/`$replaceWith`).
    pub fn parse(u: &Bson, array_filters: Option<&[Document]>) -> DocResult<Update> {
        match u {
            Bson::Array(stages) => {
                if array_filters.is_some_and(|f| !f.is_empty()) {
                    return Err(DocError::failed_to_parse(
                        "arrayFilters may not be specified for pipeline-style updates",
                    ));
                }
                let docs = crate::aggregate::parse_update_pipeline(stages)?;
                Ok(Update {
                    kind: Kind::Pipeline(docs, crate::vars::Scope::default()),
                })
            }
            Bson::Document(d) => {
                let first_dollar = d.keys().next().is_some_and(|k| k.starts_with('$'));
                if !first_dollar {
                    if array_filters.is_some_and(|f| !f.is_empty()) {
                        return Err(DocError::failed_to_parse(
                            "Cannot use array filters with a replacement-style update",
                        ));
                    }
                    check_replacement_fields(d)?;
                    return Ok(Update {
                        kind: Kind::Replacement(d.clone()),
                    });
                }
                Self::parse_modifiers(d, array_filters.unwrap_or(&[]))
            }
            other => Err(DocError::failed_to_parse(format!(
                "Update argument must be either an object or an array, not {}",
                type_name(other)
            ))),
        }
    }

    fn parse_modifiers(d: &Document, filters: &[Document]) -> DocResult<Update> {
        let mut ops = Vec::new();
        for (m, spec) in d {
            if !MODIFIERS.contains(&m.as_str()) {
                return Err(DocError::failed_to_parse(format!(
                    "Unknown modifier: {m}. Expected a valid update modifier or pipeline-style update specified as an array"
                )));
            }
            let Bson::Document(fields) = spec else {
                return Err(DocError::failed_to_parse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{m}: {}}}",
                    type_name(spec),
                    shell_repr(spec)
                )));
            };
            for (field, v) in fields {
                check_path(field)?;
                let op = parse_op(m, field, v)?;
                ops.push(ModOp {
                    path: split_path(field)?,
                    op,
                });
            }
        }
        // Conflicts: no path may equal or prefix another (rename counts both ends).
        let mut targets: Vec<&[String]> = Vec::new();
        for o in &ops {
            targets.push(&o.path);
            if let Op::Rename(to) = &o.op {
                targets.push(to);
            }
        }
        // Sorted by components, a path is immediately followed by one it prefixes if any
        // path extends it, so adjacent pairs find every conflict in O(n log n) (an update may
        // name a hundred thousand fields).
        targets.sort();
        for w in targets.windows(2) {
            let (short, long) = (w[0], w[1]);
            if is_prefix(short, long) {
                return Err(DocError::conflicting_update_operators(format!(
                    "Updating the path '{}' would create a conflict at '{}'",
                    long.join("."),
                    short.join(".")
                )));
            }
        }
        // Array filters: one per identifier, each used.
        let mut parsed_filters: Vec<(String, Matcher)> = Vec::new();
        for f in filters {
            let Some(first) = f.keys().next() else {
                return Err(DocError::failed_to_parse(
                    "Cannot use an expression without a top-level field name in arrayFilters",
                ));
            };
            let id = first.split('.').next().unwrap_or("").to_string();
            if !id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                || !id.chars().all(|c| c.is_ascii_alphanumeric())
            {
                return Err(DocError::bad_value(format!(
                    "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{id}'"
                )));
            }
            for k in f.keys() {
                if k.split('.').next() != Some(id.as_str()) {
                    return Err(DocError::failed_to_parse(format!(
                        "Error parsing array filter :: caused by :: Expected a single top-level field name, found '{id}' and '{}'",
                        k.split('.').next().unwrap_or("")
                    )));
                }
            }
            if parsed_filters.iter().any(|(i, _)| *i == id) {
                return Err(DocError::failed_to_parse(format!(
                    "Found multiple array filters with the same top-level field name {id}"
                )));
            }
            parsed_filters.push((id, Matcher::new(f)?));
        }
        let mut used = vec![false; parsed_filters.len()];
        for o in &ops {
            for part in &o.path {
                if let Some(id) = identifier_of(part) {
                    if id.is_empty() {
                        continue;
                    }
                    match parsed_filters.iter().position(|(i, _)| i == id) {
                        Some(p) => used[p] = true,
                        None => {
                            return Err(DocError::bad_value(format!(
                                "No array filter found for identifier '{id}' in path '{}'",
                                o.path.join(".")
                            )))
                        }
                    }
                }
            }
        }
        if let Some(p) = used.iter().position(|u| !u) {
            return Err(DocError::failed_to_parse(format!(
                "The array filter for identifier '{}' was not used in the update {}",
                parsed_filters[p].0,
                doc_repr(d)
            )));
        }
        Ok(Update {
            kind: Kind::Modifiers(ops, parsed_filters),
        })
    }

    /// The update with the command's `let` variables in scope for its pipeline (the other
    /// forms hold no expressions).
    pub fn with_scope(mut self, scope: &crate::vars::Scope) -> Update {
        if let Kind::Pipeline(_, s) = &mut self.kind {
            *s = scope.clone();
        }
        self
    }

    /// Whether this is a replacement document.
    pub fn is_replacement(&self) -> bool {
        matches!(self.kind, Kind::Replacement(_))
    }

    /// Whether this is a pipeline-style update.
    pub fn is_pipeline(&self) -> bool {
        matches!(self.kind, Kind::Pipeline(..))
    }

    /// mongod's storage rule for the top-level fields a modifier update wrote (5.0+): one whose
    /// name starts with `$` and whose value the update set or changed is refused, while such
    /// fields the document already held, and every nested one, are stored as given. A
    /// replacement was checked when it was parsed, and a pipeline's output may hold any name.
    pub fn check_written_fields(&self, old: &Document, new: &Document) -> DocResult<()> {
        let Kind::Modifiers(ops, _) = &self.kind else {
            return Ok(());
        };
        for o in ops {
            let target = match &o.op {
                Op::Rename(to) => to,
                _ => &o.path,
            };
            let [name] = target.as_slice() else {
                continue;
            };
            if !name.starts_with('$') {
                continue;
            }
            if let Some(v) = new.get(name) {
                if old.get(name) != Some(v) {
                    return Err(top_level_dollar_field(name));
                }
            }
        }
        Ok(())
    }

    /// Applies to `doc` in place; returns whether anything changed.
    pub fn apply(&self, doc: &mut Document, inserting: bool) -> DocResult<bool> {
        self.apply_with_position(doc, inserting, None)
    }

    /// As [`Update::apply`], with the array index the query matched at (for the positional `$`;
    /// see [`Matcher::matches_with_position`]).
    pub fn apply_with_position(
        &self,
        doc: &mut Document,
        inserting: bool,
        matched: Option<usize>,
    ) -> DocResult<bool> {
        let before = bson::to_vec(doc).unwrap_or_default();
        let old_id = doc.get("_id").cloned();
        match &self.kind {
            Kind::Replacement(r) => {
                let mut out = Document::new();
                match (&old_id, r.get("_id")) {
                    (Some(id), _) | (None, Some(id)) => {
                        out.insert("_id", id.clone());
                    }
                    _ => {}
                }
                for (k, v) in r {
                    if k == "_id" {
                        if let Some(id) = &old_id {
                            if !same_id(id, v) {
                                return Err(id_altered(v));
                            }
                        }
                        continue;
                    }
                    out.insert(k.clone(), v.clone());
                }
                *doc = out;
            }
            Kind::Pipeline(stages, scope) => {
                let input = doc.clone();
                let out = crate::aggregate::run_pipeline_scoped(
                    stages,
                    Box::new(std::iter::once(Ok(input))),
                    &|_: &str| Ok(Vec::new()),
                    &crate::interrupt::Interrupt::none(),
                    scope,
                )?;
                let mut new = out.into_iter().next().unwrap_or_default();
                match (&old_id, new.get("_id")) {
                    (Some(id), Some(nid)) if !same_id(id, nid) => return Err(id_altered(nid)),
                    (Some(id), None) => {
                        let mut with_id = Document::new();
                        with_id.insert("_id", id.clone());
                        with_id.extend(new);
                        new = with_id;
                    }
                    _ => {}
                }
                *doc = new;
            }
            Kind::Modifiers(ops, filters) => {
                let mut apps: Vec<(Vec<String>, &Op)> = Vec::new();
                for o in ops {
                    if matches!(o.op, Op::SetOnInsert(_)) && !inserting {
                        continue;
                    }
                    let mut concrete = Vec::new();
                    expand_positional(
                        doc,
                        &o.path,
                        0,
                        &mut Vec::new(),
                        filters,
                        matched,
                        &mut concrete,
                    )?;
                    for c in concrete {
                        apps.push((c, &o.op));
                    }
                }
                // mongod applies modifications in field-name order (new fields appear sorted).
                apps.sort_by(|a, b| cmp_paths(&a.0, &b.0));
                for (path, op) in apps {
                    apply_op(doc, &path, op)?;
                }
                if let Some(id) = &old_id {
                    match doc.get("_id") {
                        Some(nid) if same_id(id, nid) => {}
                        _ => {
                            return Err(DocError::immutable_field(
                                "Performing an update on the path '_id' would modify the immutable field '_id'",
                            ))
                        }
                    }
                }
            }
        }
        Ok(bson::to_vec(doc).unwrap_or_default() != before)
    }
}

/// `_id` must stay binary-identical (same type and value).
fn same_id(a: &Bson, b: &Bson) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b) && bson_equal(a, b)
}

fn id_altered(v: &Bson) -> DocError {
    DocError::immutable_field(format!(
        "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}",
        shell_repr(v)
    ))
}

fn cmp_paths(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = match (array_index(x), array_index(y)) {
            (Some(i), Some(j)) => i.cmp(&j),
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Resolves positional components of `path` against `doc` into concrete paths.
fn expand_positional(
    doc: &Document,
    path: &[String],
    i: usize,
    prefix: &mut Vec<String>,
    filters: &[(String, Matcher)],
    matched: Option<usize>,
    out: &mut Vec<Vec<String>>,
) -> DocResult<()> {
    if i == path.len() {
        out.push(prefix.clone());
        return Ok(());
    }
    let part = &path[i];
    let is_positional = part == "$" || identifier_of(part).is_some();
    if !is_positional {
        prefix.push(part.clone());
        expand_positional(doc, path, i + 1, prefix, filters, matched, out)?;
        prefix.pop();
        return Ok(());
    }
    if part == "$" {
        let Some(m) = matched else {
            return Err(DocError::bad_value(
                "The positional operator did not find the match needed from the query.",
            ));
        };
        prefix.push(m.to_string());
        expand_positional(doc, path, i + 1, prefix, filters, matched, out)?;
        prefix.pop();
        return Ok(());
    }
    let current = if prefix.is_empty() {
        None
    } else {
        get_path(doc, prefix)
    };
    let arr = match current {
        Some(Bson::Array(a)) => a,
        None => {
            return Err(DocError::bad_value(format!(
                "The path '{}' must exist in the document in order to apply array updates.",
                prefix.join(".")
            )))
        }
        Some(other) => {
            return Err(DocError::bad_value(format!(
                "Cannot apply array updates to non-array element {}: {}",
                prefix.last().map(String::as_str).unwrap_or(""),
                shell_repr(other)
            )))
        }
    };
    let id = identifier_of(part).expect("positional");
    let matcher = filters.iter().find(|(n, _)| n == id).map(|(_, m)| m);
    for (idx, e) in arr.iter().enumerate() {
        if let Some(m) = matcher {
            let mut wrapper = Document::new();
            wrapper.insert(id.to_string(), e.clone());
            if !m.matches(&wrapper) {
                continue;
            }
        }
        prefix.push(idx.to_string());
        expand_positional(doc, path, i + 1, prefix, filters, matched, out)?;
        prefix.pop();
    }
    Ok(())
}

fn id_for_messages(doc: &Document) -> String {
    match doc.get("_id") {
        Some(id) => format!("{{_id: {}}}", shell_repr(id)),
        None => "{}".to_string(),
    }
}

fn apply_op(doc: &mut Document, path: &[String], op: &Op) -> DocResult<()> {
    let dotted = path.join(".");
    let current = get_path(doc, path).cloned();
    match op {
        Op::Set(v) | Op::SetOnInsert(v) => set_path(doc, path, v.clone()),
        Op::Unset => {
            remove_path(doc, path);
            Ok(())
        }
        Op::Inc(n, raw) | Op::Mul(n, raw) => {
            let new = inc_or_mul(doc, path, op, *n, raw, current.as_ref())?;
            set_path(doc, path, new)
        }
        Op::Min(v) | Op::Max(v) => {
            let want = if matches!(op, Op::Min(_)) {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            match &current {
                Some(cur) if compare_bson(v, cur) != want => Ok(()),
                _ => set_path(doc, path, v.clone()),
            }
        }
        Op::Rename(to) => {
            let Some(v) = current else { return Ok(()) };
            if path_crosses_array(doc, path) {
                return Err(DocError::bad_value(format!(
                    "The source field cannot be an array element, '{dotted}' in doc with {} fields",
                    doc.len()
                )));
            }
            if path_crosses_array(doc, to) {
                return Err(DocError::bad_value(format!(
                    "The destination field cannot be an array element, '{}' in doc with {} fields",
                    to.join("."),
                    doc.len()
                )));
            }
            remove_path(doc, path);
            set_path(doc, to, v)
        }
        Op::Push(spec) => {
            let arr = pushed(doc, &dotted, current, spec)?;
            set_path(doc, path, Bson::Array(arr))
        }
        Op::AddToSet(vals) => {
            let arr = added_to_set(path, current, vals)?;
            set_path(doc, path, Bson::Array(arr))
        }
        Op::Pop(last) => match current {
            None => Ok(()),
            Some(Bson::Array(mut a)) => {
                if a.is_empty() {
                    return Ok(());
                }
                if *last {
                    a.pop();
                } else {
                    a.remove(0);
                }
                set_path(doc, path, Bson::Array(a))
            }
            Some(other) => Err(DocError::type_mismatch(format!(
                "Path '{dotted}' contains an element of non-array type '{}'",
                type_name(&other)
            ))),
        },

        Op::Pull(_) | Op::PullAll(_) => match current {
            None => Ok(()),
            Some(Bson::Array(a)) => set_path(doc, path, Bson::Array(pulled(a, op))),
            Some(_) => Err(DocError::bad_value(
                "Cannot apply $pull to a non-array value",
            )),
        },
        Op::CurrentDate(ts) => {
            let now = DateTime::now();
            let v = if *ts {
                Bson::Timestamp(Timestamp {
                    time: (now.timestamp_millis() / 1000) as u32,
                    increment: 1,
                })
            } else {
                Bson::DateTime(now)
            };
            set_path(doc, path, v)
        }
        Op::Bit(ops) => {
            let new = bitwise(doc, path, ops, current.as_ref())?;
            set_path(doc, path, new)
        }
    }
}

/// What `$pull` or `$pullAll` (`op`) keeps of an array.
fn pulled(a: Vec<Bson>, op: &Op) -> Vec<Bson> {
    a.into_iter()
        .filter(|e| match op {
            Op::Pull(PullCond::Value(c)) => !c.matches(e),
            Op::Pull(PullCond::Query(m)) => match e {
                Bson::Document(d) => !m.matches(d),
                _ => true,
            },
            Op::PullAll(vals) => !vals.iter().any(|v| bson_equal(e, v)),
            _ => unreachable!("only $pull and $pullAll pull"),
        })
        .collect()
}

/// The array `$addToSet` leaves at a field holding `current`.
fn added_to_set(path: &[String], current: Option<Bson>, vals: &[Bson]) -> DocResult<Vec<Bson>> {
    let mut arr = match current {
        None => Vec::new(),
        Some(Bson::Array(a)) => a,
        Some(other) => {
            return Err(DocError::bad_value(format!(
                "Cannot apply $addToSet to non-array field. Field named '{}' has non-array type {}",
                path.last().expect("non-empty"),
                type_name(&other)
            )))
        }
    };
    for v in vals {
        if !arr.iter().any(|e| bson_equal(e, v)) {
            arr.push(v.clone());
        }
    }
    Ok(arr)
}

/// The value `$inc` or `$mul` (`op`, by `n`, given as `raw`) leaves at `path`.
fn inc_or_mul(
    doc: &Document,
    path: &[String],
    op: &Op,
    n: Num,
    raw: &Bson,
    current: Option<&Bson>,
) -> DocResult<Bson> {
    let is_inc = matches!(op, Op::Inc(..));
    Ok(match current {
        None => {
            if is_inc {
                raw.clone()
            } else {
                mul_num(n, Num::I32(0)).to_bson()
            }
        }
        Some(cur) => match Num::of(cur) {
            Some(c) => {
                if is_inc {
                    add_num(c, n).to_bson()
                } else {
                    mul_num(c, n).to_bson()
                }
            }
            None => {
                return Err(DocError::type_mismatch(format!(
                    "Cannot apply {} to a value of non-numeric type. {} has the field '{}' of non-numeric type {}",
                    if is_inc { "$inc" } else { "$mul" },
                    id_for_messages(doc),
                    path.last().expect("non-empty"),
                    type_name(cur)
                )))
            }
        },
    })
}

/// The array `$push` leaves at a field holding `current`.
fn pushed(
    doc: &Document,
    dotted: &str,
    current: Option<Bson>,
    spec: &PushSpec,
) -> DocResult<Vec<Bson>> {
    let mut arr = match current {
        None => Vec::new(),
        Some(Bson::Array(a)) => a,
        Some(other) => {
            return Err(DocError::bad_value(format!(
                "The field '{dotted}' must be an array but is of type {} in document {}",
                type_name(&other),
                id_for_messages(doc)
            )))
        }
    };
    let at = match spec.position {
        None => arr.len(),
        Some(p) if p >= 0 => (p as usize).min(arr.len()),
        Some(p) => (arr.len() as i64 + p).max(0) as usize,
    };
    for (k, e) in spec.each.iter().enumerate() {
        arr.insert(at + k, e.clone());
    }
    if let Some(s) = &spec.sort {
        match s {
            PushSort::Whole(dir) => arr.sort_by(|a, b| {
                let o = compare_bson(a, b);
                if *dir < 0 {
                    o.reverse()
                } else {
                    o
                }
            }),
            PushSort::Fields(spec) => {
                let empty = Document::new();
                arr.sort_by(|a, b| {
                    let da = if let Bson::Document(d) = a { d } else { &empty };
                    let db = if let Bson::Document(d) = b { d } else { &empty };
                    spec.compare(da, db)
                })
            }
        }
    }
    if let Some(n) = spec.slice {
        if n >= 0 {
            arr.truncate(n as usize);
        } else {
            let keep = (-n) as usize;
            if arr.len() > keep {
                arr.drain(..arr.len() - keep);
            }
        }
    }
    Ok(arr)
}

/// The integer `$bit`'s operations leave at a field holding `current`: 32 bits unless the
/// field or an operand is 64.
fn bitwise(
    doc: &Document,
    path: &[String],
    ops: &[(String, i64)],
    current: Option<&Bson>,
) -> DocResult<Bson> {
    let (mut x, wide) = match current {
        None => (0i64, false),
        Some(Bson::Int32(i)) => (*i as i64, false),
        Some(Bson::Int64(i)) => (*i, true),
        Some(other) => {
            return Err(DocError::bad_value(format!(
                "Cannot apply $bit to a value of non-integral type.{} has the field {} of non-integer type {}",
                id_for_messages(doc),
                path.last().expect("non-empty"),
                type_name(other)
            )))
        }
    };
    let mut wide = wide;
    for (k, n) in ops {
        x = match k.as_str() {
            "and" => x & n,
            "or" => x | n,
            _ => x ^ n,
        };
        if *n > i32::MAX as i64 || *n < i32::MIN as i64 {
            wide = true;
        }
    }
    Ok(if wide {
        Bson::Int64(x)
    } else {
        Bson::Int32(x as i32)
    })
}

/// The document an upsert starts from: the equality fields of the query (`{a: 1}`,
/// `{a: {$eq: 1}}`, through `$and`), built into nested documents, `_id` first.
pub fn upsert_seed(filter: &Document) -> DocResult<Document> {
    let mut eqs: Vec<(String, Bson)> = Vec::new();
    collect_equalities(filter, &mut eqs)?;
    // Adjacent pairs of the component-wise sorted paths find every duplicate and prefix.
    let mut paths: Vec<Vec<&str>> = eqs.iter().map(|(p, _)| p.split('.').collect()).collect();
    paths.sort();
    for w in paths.windows(2) {
        let (a, b) = (w[0].join("."), w[1].join("."));
        if a == b {
            return Err(DocError::with_code(
                54,
                "NotSingleValueField",
                format!("cannot infer query fields to set, path '{a}' is matched twice"),
            ));
        }
        if is_prefix_str(&w[0], &w[1]) {
            return Err(DocError::with_code(
                54,
                "NotSingleValueField",
                format!("cannot infer query fields to set, both paths '{b}' and '{a}' are matched"),
            ));
        }
    }
    let mut doc = Document::new();
    if let Some((_, id)) = eqs.iter().find(|(p, _)| p == "_id") {
        doc.insert("_id", id.clone());
    }
    for (p, v) in eqs {
        if p == "_id" {
            continue;
        }
        set_path(&mut doc, &split_path(&p)?, v)?;
    }
    Ok(doc)
}

fn collect_equalities(filter: &Document, out: &mut Vec<(String, Bson)>) -> DocResult<()> {
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(a) = v {
                for e in a {
                    if let Bson::Document(d) = e {
                        collect_equalities(d, out)?;
                    }
                }
            }
            continue;
        }
        if k == "$or" {
            // A single-clause $or is its clause.
            if let Bson::Array(a) = v {
                if let [Bson::Document(d)] = a.as_slice() {
                    collect_equalities(d, out)?;
                }
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        crate::limits::check_match_path(k)?;
        match v {
            Bson::RegularExpression(_) => {}
            Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')) => {
                if let Some(e) = d.get("$eq") {
                    out.push((k.clone(), e.clone()));
                } else if let Some(Bson::Array(a)) = d.get("$in") {
                    if a.len() == 1 && !matches!(a[0], Bson::RegularExpression(_)) {
                        out.push((k.clone(), a[0].clone()));
                    }
                }
            }
            other => out.push((k.clone(), other.clone())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn upd(u: Bson, mut d: Document) -> Document {
        Update::parse(&u, None)
            .unwrap()
            .apply(&mut d, false)
            .unwrap();
        d
    }

    fn upd_err(u: Bson, mut d: Document) -> DocError {
        match Update::parse(&u, None) {
            Err(e) => e,
            Ok(x) => x.apply(&mut d, false).unwrap_err(),
        }
    }

    fn parse_err(u: Bson) -> DocError {
        Update::parse(&u, None).unwrap_err()
    }

    #[test]
    fn a_replacement_refuses_top_level_dollar_fields_but_not_nested_ones() {
        let e = parse_err(bson!({"_id": 1, "$a": 1}));
        assert_eq!((e.code, e.code_name), (52, "DollarPrefixedFieldName"));
        assert_eq!(
            e.message,
            "The dollar ($) prefixed field '$a' in '$a' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
        );
        for ok in [
            bson!({"_id": 1, "a": {"$b": 1}}),
            bson!({"_id": 1, "a.b": 1, "c": {"d.e": {"$f": 1}}}),
            bson!({"a": {"$ref": 1}, "b": {"$id": 1}, "c": {"$db": 1}}),
        ] {
            assert!(Update::parse(&ok, None).unwrap().is_replacement());
        }
    }

    #[test]
    fn a_replacement_accepts_a_top_level_dbref_in_order_only() {
        // A document whose first field is `$`-prefixed is a modifier update, not a replacement.
        let ok = bson!({"x": 1, "$ref": "c", "$id": 1, "$db": "d"});
        assert!(Update::parse(&ok, None).unwrap().is_replacement());
        assert_eq!(parse_err(bson!({"$ref": "c", "$id": 1})).code, 9);
        let refused = [
            (
                bson!({"_id": 1, "$ref": 1}),
                "The DBRef $ref field must be a String, not a int",
            ),
            (
                bson!({"_id": 1, "$ref": "c"}),
                "The DBRef $ref field must be followed by a $id field",
            ),
            (
                bson!({"_id": 1, "$id": 1}),
                "Found $id field without a $ref before it, which is invalid.",
            ),
            (
                bson!({"_id": 1, "$db": "d"}),
                "Found $db field without a $id before it, which is invalid.",
            ),
            (
                bson!({"x": 1, "$ref": "c", "$id": 1, "$db": 2}),
                "The DBRef $db field must be a String, not a int",
            ),
        ];
        for (u, msg) in refused {
            let e = parse_err(u);
            assert_eq!(
                (e.code, e.code_name, e.message.as_str()),
                (55, "InvalidDBRef", msg)
            );
        }
    }

    #[test]
    fn written_fields_are_checked_for_modifiers_only() {
        let old = doc! {"_id": 1, "$a": 1};
        let set = Update::parse(&bson!({"$set": {"$a": 2}}), None).unwrap();
        let mut new = old.clone();
        set.apply(&mut new, false).unwrap();
        assert_eq!(set.check_written_fields(&old, &new).unwrap_err().code, 52);
        assert!(set.check_written_fields(&old, &old).is_ok());
        let rename = Update::parse(&bson!({"$rename": {"x": "$y"}}), None);
        assert!(rename.is_err());
        let pipe =
            Update::parse(&bson!([{"$replaceWith": {"$literal": {"$b": 1}}}]), None).unwrap();
        assert!(pipe.check_written_fields(&old, &doc! {"$b": 1}).is_ok());
    }

    #[test]
    fn set_unset() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 1}};
        assert_eq!(
            upd(bson!({"$set": {"a": 2}}), d.clone()),
            doc! {"_id": 1, "a": 2, "b": {"c": 1}}
        );
        assert_eq!(
            upd(bson!({"$set": {"b.d": 2}}), d.clone()),
            doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}}
        );
        assert_eq!(
            upd(bson!({"$set": {"x.y.z": 2}}), d.clone()),
            doc! {"_id": 1, "a": 1, "b": {"c": 1}, "x": {"y": {"z": 2}}}
        );
        // New fields are created in field-name order.
        assert_eq!(
            upd(bson!({"$set": {"z": 1, "m": 1}}), doc! {"_id": 1}),
            doc! {"_id": 1, "m": 1, "z": 1}
        );
        assert_eq!(
            upd(bson!({"$unset": {"a": ""}}), d.clone()),
            doc! {"_id": 1, "b": {"c": 1}}
        );
        assert_eq!(
            upd(bson!({"$unset": {"b.c": 1, "nope": 1}}), d.clone()),
            doc! {"_id": 1, "a": 1, "b": {}}
        );
        assert_eq!(
            upd(bson!({"$unset": {"arr.1": 1}}), doc! {"arr": [1, 2, 3]}),
            doc! {"arr": [1, null, 3]}
        );
        assert_eq!(
            upd(bson!({"$set": {"arr.1": 9}}), doc! {"arr": [1, 2, 3]}),
            doc! {"arr": [1, 9, 3]}
        );
        assert_eq!(
            upd(bson!({"$set": {"arr.4": 9}}), doc! {"arr": [1]}),
            doc! {"arr": [1, null, null, null, 9]}
        );
        let e = upd_err(bson!({"$set": {"a.b": 1}}), d.clone());
        assert_eq!(
            (e.code, e.message.as_str()),
            (28, "Cannot create field 'b' in element {a: 1}")
        );
        assert_eq!(
            upd_err(bson!({"$set": {"arr.x": 1}}), doc! {"arr": [1]}).code,
            28
        );
        // Empty modifier documents are accepted (no-op).
        assert_eq!(upd(bson!({"$set": {}}), d.clone()), d.clone());
    }

    #[test]
    fn changed_flag() {
        let u = Update::parse(&bson!({"$set": {"a": 1}}), None).unwrap();
        let mut d = doc! {"_id": 1, "a": 1};
        assert!(!u.apply(&mut d, false).unwrap());
        let mut d = doc! {"_id": 1, "a": 1.0};
        assert!(u.apply(&mut d, false).unwrap());
        let mut d = doc! {"_id": 1};
        assert!(u.apply(&mut d, false).unwrap());
    }

    #[test]
    fn inc_mul() {
        let d = doc! {"_id": 1, "i": 1, "l": Bson::Int64(2), "f": 1.5, "s": "x", "big": i32::MAX};
        assert_eq!(
            upd(bson!({"$inc": {"i": 2}}), d.clone()).get("i"),
            Some(&bson!(3))
        );
        assert_eq!(
            upd(bson!({"$inc": {"i": 0.5}}), d.clone()).get("i"),
            Some(&bson!(1.5))
        );
        assert_eq!(
            upd(bson!({"$inc": {"l": 1}}), d.clone()).get("l"),
            Some(&Bson::Int64(3))
        );
        assert_eq!(
            upd(bson!({"$inc": {"big": 1}}), d.clone()).get("big"),
            Some(&Bson::Int64(i32::MAX as i64 + 1))
        );
        assert_eq!(
            upd(bson!({"$inc": {"new": Bson::Int64(5)}}), d.clone()).get("new"),
            Some(&Bson::Int64(5))
        );
        assert_eq!(
            upd(bson!({"$inc": {"i": -1}}), d.clone()).get("i"),
            Some(&bson!(0))
        );
        assert_eq!(
            upd(bson!({"$mul": {"f": 2}}), d.clone()).get("f"),
            Some(&bson!(3.0))
        );
        assert_eq!(
            upd(bson!({"$mul": {"i": Bson::Int64(3)}}), d.clone()).get("i"),
            Some(&Bson::Int64(3))
        );
        assert_eq!(
            upd(bson!({"$mul": {"new": 2.5}}), d.clone()).get("new"),
            Some(&bson!(0.0))
        );
        assert_eq!(
            upd(bson!({"$mul": {"new": 2}}), d.clone()).get("new"),
            Some(&bson!(0))
        );
        let e = upd_err(bson!({"$inc": {"s": 1}}), d.clone());
        assert_eq!(e.code, 14);
        assert_eq!(
            e.message,
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 's' of non-numeric type string"
        );
        let e = parse_err(bson!({"$inc": {"i": "x"}}));
        assert_eq!(
            (e.code, e.message.as_str()),
            (14, "Cannot increment with non-numeric argument: {i: \"x\"}")
        );
        assert_eq!(parse_err(bson!({"$mul": {"i": "x"}})).code, 14);
        assert_eq!(upd_err(bson!({"$mul": {"s": 2}}), d.clone()).code, 14);
    }

    #[test]
    fn min_max_current_date_bit() {
        let d = doc! {"_id": 1, "a": 5};
        assert_eq!(
            upd(bson!({"$min": {"a": 3}}), d.clone()).get("a"),
            Some(&bson!(3))
        );
        assert_eq!(
            upd(bson!({"$min": {"a": 7}}), d.clone()).get("a"),
            Some(&bson!(5))
        );
        assert_eq!(
            upd(bson!({"$max": {"a": 7}}), d.clone()).get("a"),
            Some(&bson!(7))
        );
        assert_eq!(
            upd(bson!({"$max": {"a": "str"}}), d.clone()).get("a"),
            Some(&bson!("str"))
        );
        assert_eq!(
            upd(bson!({"$min": {"a": null}}), d.clone()).get("a"),
            Some(&Bson::Null)
        );
        assert_eq!(
            upd(bson!({"$max": {"b": 1}}), d.clone()).get("b"),
            Some(&bson!(1))
        );
        let r = upd(
            bson!({"$currentDate": {"d": true, "t": {"$type": "timestamp"}, "e": {"$type": "date"}}}),
            d.clone(),
        );
        assert!(matches!(r.get("d"), Some(Bson::DateTime(_))));
        assert!(matches!(r.get("e"), Some(Bson::DateTime(_))));
        assert!(matches!(r.get("t"), Some(Bson::Timestamp(_))));
        assert_eq!(
            parse_err(bson!({"$currentDate": {"d": {"$type": "x"}}})).code,
            2
        );
        assert_eq!(parse_err(bson!({"$currentDate": {"d": 1}})).code, 2);
        assert_eq!(
            upd(bson!({"$bit": {"a": {"and": 4}}}), d.clone()).get("a"),
            Some(&bson!(4))
        );
        assert_eq!(
            upd(bson!({"$bit": {"a": {"or": 2}}}), d.clone()).get("a"),
            Some(&bson!(7))
        );
        assert_eq!(
            upd(bson!({"$bit": {"a": {"xor": 1}}}), d.clone()).get("a"),
            Some(&bson!(4))
        );
    }

    #[test]
    fn rename() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 2}, "arr": [{"x": 1}]};
        assert_eq!(
            upd(bson!({"$rename": {"a": "z"}}), d.clone()),
            doc! {"_id": 1, "b": {"c": 2}, "arr": [{"x": 1}], "z": 1}
        );
        assert_eq!(
            upd(bson!({"$rename": {"b.c": "b.d"}}), d.clone()),
            doc! {"_id": 1, "a": 1, "b": {"d": 2}, "arr": [{"x": 1}]}
        );
        assert_eq!(upd(bson!({"$rename": {"nope": "z"}}), d.clone()), d.clone());
        assert_eq!(parse_err(bson!({"$rename": {"a": 1}})).code, 2);
        assert_eq!(parse_err(bson!({"$rename": {"a": "a"}})).code, 2);
        assert_eq!(parse_err(bson!({"$rename": {"a": "a.b"}})).code, 2);
        assert_eq!(
            upd_err(bson!({"$rename": {"arr.0.x": "y"}}), d.clone()).code,
            2
        );
        assert_eq!(
            parse_err(bson!({"$rename": {"a": "b"}, "$set": {"b": 1}})).code,
            40
        );
    }

    #[test]
    fn push() {
        let d = doc! {"_id": 1, "a": [3, 1], "n": 5};
        assert_eq!(
            upd(bson!({"$push": {"a": 2}}), d.clone()).get("a"),
            Some(&bson!([3, 1, 2]))
        );
        assert_eq!(
            upd(bson!({"$push": {"b": 2}}), d.clone()).get("b"),
            Some(&bson!([2]))
        );
        assert_eq!(
            upd(bson!({"$push": {"a": [7]}}), d.clone()).get("a"),
            Some(&bson!([3, 1, [7]]))
        );
        assert_eq!(
            upd(bson!({"$push": {"a": {"$each": [5, 4]}}}), d.clone()).get("a"),
            Some(&bson!([3, 1, 5, 4]))
        );
        assert_eq!(
            upd(
                bson!({"$push": {"a": {"$each": [5, 4], "$sort": 1}}}),
                d.clone()
            )
            .get("a"),
            Some(&bson!([1, 3, 4, 5]))
        );
        assert_eq!(
            upd(
                bson!({"$push": {"a": {"$each": [5, 4], "$sort": -1, "$slice": 2}}}),
                d.clone()
            )
            .get("a"),
            Some(&bson!([5, 4]))
        );
        assert_eq!(
            upd(
                bson!({"$push": {"a": {"$each": [5, 4], "$slice": -3}}}),
                d.clone()
            )
            .get("a"),
            Some(&bson!([1, 5, 4]))
        );
        assert_eq!(
            upd(
                bson!({"$push": {"a": {"$each": [9], "$position": 0}}}),
                d.clone()
            )
            .get("a"),
            Some(&bson!([9, 3, 1]))
        );
        assert_eq!(
            upd(
                bson!({"$push": {"a": {"$each": [9], "$position": -1}}}),
                d.clone()
            )
            .get("a"),
            Some(&bson!([3, 9, 1]))
        );
        assert_eq!(
            upd(
                bson!({"$push": {"a": {"$each": [], "$slice": 0}}}),
                d.clone()
            )
            .get("a"),
            Some(&bson!([]))
        );
        let docs = doc! {"_id": 1, "s": [{"k": 2}, {"k": 1}]};
        assert_eq!(
            upd(
                bson!({"$push": {"s": {"$each": [{"k": 0}], "$sort": {"k": 1}}}}),
                docs
            )
            .get("s"),
            Some(&bson!([{"k": 0}, {"k": 1}, {"k": 2}]))
        );
        let e = upd_err(bson!({"$push": {"n": 1}}), d.clone());
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                2,
                "The field 'n' must be an array but is of type int in document {_id: 1}"
            )
        );
        assert_eq!(parse_err(bson!({"$push": {"a": {"$each": 1}}})).code, 2);
        assert_eq!(
            parse_err(bson!({"$push": {"a": {"$each": [1], "$slice": "x"}}})).code,
            2
        );
        assert_eq!(
            parse_err(bson!({"$push": {"a": {"$each": [1], "$sort": 2}}})).code,
            2
        );
        assert_eq!(
            parse_err(bson!({"$push": {"a": {"$each": [1], "$foo": 2}}})).code,
            2
        );
    }

    #[test]
    fn add_to_set_pop_pull() {
        let d = doc! {"_id": 1, "a": [1, 2, 3, 2], "n": 5, "docs": [{"x": 1, "y": 1}, {"x": 2}]};
        assert_eq!(
            upd(bson!({"$addToSet": {"a": 2}}), d.clone()).get("a"),
            Some(&bson!([1, 2, 3, 2]))
        );
        assert_eq!(
            upd(bson!({"$addToSet": {"a": 2.0}}), d.clone()).get("a"),
            Some(&bson!([1, 2, 3, 2]))
        );
        assert_eq!(
            upd(bson!({"$addToSet": {"a": 4}}), d.clone()).get("a"),
            Some(&bson!([1, 2, 3, 2, 4]))
        );
        assert_eq!(
            upd(bson!({"$addToSet": {"a": {"$each": [4, 4, 5]}}}), d.clone()).get("a"),
            Some(&bson!([1, 2, 3, 2, 4, 5]))
        );
        assert_eq!(
            upd(bson!({"$addToSet": {"b": 1}}), d.clone()).get("b"),
            Some(&bson!([1]))
        );
        assert_eq!(upd_err(bson!({"$addToSet": {"n": 1}}), d.clone()).code, 2);
        assert_eq!(
            parse_err(bson!({"$addToSet": {"a": {"$each": 1}}})).code,
            14
        );
        assert_eq!(
            upd(bson!({"$pop": {"a": 1}}), d.clone()).get("a"),
            Some(&bson!([1, 2, 3]))
        );
        assert_eq!(
            upd(bson!({"$pop": {"a": -1}}), d.clone()).get("a"),
            Some(&bson!([2, 3, 2]))
        );
        assert_eq!(upd(bson!({"$pop": {"zz": 1}}), d.clone()), d.clone());
        assert_eq!(parse_err(bson!({"$pop": {"a": 2}})).code, 9);
        assert_eq!(upd_err(bson!({"$pop": {"n": 1}}), d.clone()).code, 14);
        assert_eq!(
            upd(bson!({"$pull": {"a": 2}}), d.clone()).get("a"),
            Some(&bson!([1, 3]))
        );
        assert_eq!(
            upd(bson!({"$pull": {"a": {"$gte": 2}}}), d.clone()).get("a"),
            Some(&bson!([1]))
        );
        assert_eq!(
            upd(bson!({"$pull": {"a": {"$in": [1, 3]}}}), d.clone()).get("a"),
            Some(&bson!([2, 2]))
        );
        assert_eq!(
            upd(bson!({"$pull": {"docs": {"x": 1}}}), d.clone()).get("docs"),
            Some(&bson!([{"x": 2}]))
        );
        assert_eq!(
            upd(bson!({"$pull": {"docs": {"x": {"$gt": 0}}}}), d.clone()).get("docs"),
            Some(&bson!([]))
        );
        assert_eq!(upd(bson!({"$pull": {"zz": 1}}), d.clone()), d.clone());
        assert_eq!(upd_err(bson!({"$pull": {"n": 1}}), d.clone()).code, 2);
        assert_eq!(
            upd(bson!({"$pullAll": {"a": [2, 3]}}), d.clone()).get("a"),
            Some(&bson!([1]))
        );
        assert_eq!(parse_err(bson!({"$pullAll": {"a": 2}})).code, 2);
    }

    #[test]
    fn parse_errors_and_conflicts() {
        let e = parse_err(bson!({"$foo": {"a": 1}}));
        assert_eq!(e.code, 9);
        assert!(e.message.starts_with("Unknown modifier: $foo"));
        let e = parse_err(bson!({"$set": 5}));
        assert_eq!(e.code, 9);
        assert!(e
            .message
            .starts_with("Modifiers operate on fields but we found type int instead"));
        let e = parse_err(bson!({"$set": {"a": 1}, "$inc": {"a": 1}}));
        assert_eq!(
            (e.code, e.message.as_str()),
            (40, "Updating the path 'a' would create a conflict at 'a'")
        );
        let e = parse_err(bson!({"$set": {"a.b": 1, "a": 1}}));
        assert_eq!(
            (e.code, e.message.as_str()),
            (40, "Updating the path 'a.b' would create a conflict at 'a'")
        );
        assert!(Update::parse(&bson!({"$set": {"a.b": 1, "a.c": 1, "ab": 1}}), None).is_ok());
        assert_eq!(parse_err(bson!({"$set": {"a..b": 1}})).code, 56);
        // Found by fuzz/fuzz_targets/update.rs: a $rename target with a NUL byte made a
        // document BSON cannot encode.
        assert_eq!(parse_err(bson!({"$rename": {"y": "\0"}})).code, 2);
        assert_eq!(parse_err(bson!({"$set": {"": 1}})).code, 56);
        let e = parse_err(bson!({"a": 1, "$set": {"b": 1}}));
        assert_eq!(e.code, 52);
        assert_eq!(parse_err(bson!({"$set": {"a": 1}, "b": 1})).code, 9);
        assert_eq!(parse_err(bson!(5)).code, 9);
    }

    #[test]
    fn immutable_id() {
        let d = doc! {"_id": 1, "a": 1};
        let e = upd_err(bson!({"$set": {"_id": 2}}), d.clone());
        assert_eq!(e.code, 66);
        assert_eq!(
            e.message,
            "Performing an update on the path '_id' would modify the immutable field '_id'"
        );
        assert_eq!(upd(bson!({"$set": {"_id": 1}}), d.clone()), d.clone());
        assert_eq!(upd_err(bson!({"$unset": {"_id": 1}}), d.clone()).code, 66);
        assert_eq!(upd_err(bson!({"b": 1, "_id": 5}), d.clone()).code, 66);
        assert_eq!(upd_err(bson!({"$set": {"_id": 1.0}}), d.clone()).code, 66);
        let d2 = doc! {"_id": {"x": 1}};
        assert_eq!(upd_err(bson!({"$set": {"_id.x": 2}}), d2).code, 66);
    }

    #[test]
    fn replacement() {
        let u = Update::parse(&bson!({"b": 2, "c": 3}), None).unwrap();
        assert!(u.is_replacement());
        let mut d = doc! {"_id": 1, "a": 1};
        assert!(u.apply(&mut d, false).unwrap());
        assert_eq!(d, doc! {"_id": 1, "b": 2, "c": 3});
        // _id stays first; an equal _id in the replacement is fine.
        assert_eq!(
            upd(bson!({"b": 2, "_id": 1}), doc! {"_id": 1}),
            doc! {"_id": 1, "b": 2}
        );
        assert_eq!(upd(bson!({}), doc! {"_id": 1, "a": 1}), doc! {"_id": 1});
        let e = upd_err(bson!({"_id": 2}), doc! {"_id": 1});
        assert_eq!(e.code, 66);
        assert!(!Update::parse(&bson!({"$set": {"a": 1}}), None)
            .unwrap()
            .is_replacement());
    }

    #[test]
    fn set_on_insert_and_upsert_seed() {
        let u = Update::parse(
            &bson!({"$set": {"a": 1}, "$setOnInsert": {"created": true}}),
            None,
        )
        .unwrap();
        let mut d = doc! {"_id": 1};
        u.apply(&mut d, false).unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": 1});
        let mut seed =
            upsert_seed(&doc! {"x": 5, "y": {"$gt": 1}, "$and": [{"z.w": 2}], "_id": 9}).unwrap();
        assert_eq!(seed, doc! {"_id": 9, "x": 5, "z": {"w": 2}});
        u.apply(&mut seed, true).unwrap();
        assert_eq!(
            seed,
            doc! {"_id": 9, "x": 5, "z": {"w": 2}, "a": 1, "created": true}
        );
        assert_eq!(
            upsert_seed(&doc! {"a": {"$eq": 1}, "b": {"$in": [2]}, "c": {"$in": [1, 2]}}).unwrap(),
            doc! {"a": 1, "b": 2}
        );
        assert_eq!(
            upsert_seed(&doc! {"a": {"b": 1}}).unwrap(),
            doc! {"a": {"b": 1}}
        );
        assert_eq!(
            upsert_seed(&doc! {"a": 1, "$and": [{"a": 2}]})
                .unwrap_err()
                .code,
            54
        );
        assert_eq!(upsert_seed(&doc! {"a": 1, "a.b": 2}).unwrap_err().code, 54);
        assert_eq!(
            upsert_seed(&doc! {"$or": [{"a": 1}, {"b": 1}]}).unwrap(),
            doc! {}
        );
        // A replacement upsert keeps the query's _id.
        let r = Update::parse(&bson!({"v": 1}), None).unwrap();
        let mut seed = upsert_seed(&doc! {"_id": 3, "v": 0}).unwrap();
        r.apply(&mut seed, true).unwrap();
        assert_eq!(seed, doc! {"_id": 3, "v": 1});
    }

    #[test]
    fn positional() {
        let u = Update::parse(&bson!({"$set": {"a.$": 9}}), None).unwrap();
        let mut d = doc! {"_id": 1, "a": [1, 2, 3]};
        u.apply_with_position(&mut d, false, Some(1)).unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": [1, 9, 3]});
        assert_eq!(u.apply(&mut d, false).unwrap_err().code, 2);
        let u = Update::parse(&bson!({"$inc": {"a.$[].n": 1}}), None).unwrap();
        let mut d = doc! {"_id": 1, "a": [{"n": 1}, {"n": 2}]};
        u.apply(&mut d, false).unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": [{"n": 2}, {"n": 3}]});
        let filters = [doc! {"e.n": {"$gte": 3}}];
        let u = Update::parse(&bson!({"$set": {"a.$[e].big": true}}), Some(&filters)).unwrap();
        u.apply(&mut d, false).unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": [{"n": 2}, {"n": 3, "big": true}]});
        let filters = [doc! {"x": {"$gt": 1}}];
        let u = Update::parse(&bson!({"$set": {"s.$[x]": 0}}), Some(&filters)).unwrap();
        let mut d = doc! {"s": [1, 2, 3]};
        u.apply(&mut d, false).unwrap();
        assert_eq!(d, doc! {"s": [1, 0, 0]});
        assert_eq!(
            Update::parse(&bson!({"$set": {"s.$[y]": 0}}), Some(&filters))
                .unwrap_err()
                .code,
            2
        );
        assert_eq!(
            Update::parse(&bson!({"$set": {"s": 0}}), Some(&filters))
                .unwrap_err()
                .code,
            9
        );
        let u = Update::parse(&bson!({"$set": {"s.$[].x": 0}}), None).unwrap();
        assert_eq!(u.apply(&mut doc! {"t": 1}, false).unwrap_err().code, 2);
    }

    #[test]
    fn pipeline_update() {
        let u = Update::parse(
            &bson!([{"$set": {"b": {"$add": ["$a", 1]}}}, {"$unset": "a"}]),
            None,
        )
        .unwrap();
        assert!(u.is_pipeline());
        let mut d = doc! {"_id": 1, "a": 1};
        assert!(u.apply(&mut d, false).unwrap());
        assert_eq!(d, doc! {"_id": 1, "b": 2});
        let u = Update::parse(&bson!([{"$replaceWith": {"x": 1}}]), None).unwrap();
        let mut d = doc! {"_id": 1, "a": 1};
        u.apply(&mut d, false).unwrap();
        assert_eq!(d, doc! {"_id": 1, "x": 1});
        assert_eq!(
            Update::parse(&bson!([{"$match": {}}]), None)
                .unwrap_err()
                .code,
            72
        );
        let u = Update::parse(&bson!([{"$set": {"_id": 5}}]), None).unwrap();
        assert_eq!(u.apply(&mut doc! {"_id": 1}, false).unwrap_err().code, 66);
    }
}
