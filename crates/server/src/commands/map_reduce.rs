//! `mapReduce`, as mongod 7/8 runs it: the documents `query`, `sort` and `limit` select go
//! through `map` (which `emit`s key/value pairs), each key's values through `reduce` (only keys
//! with more than one value, as mongod), each result through `finalize`; the results are
//! `{_id: key, value}` documents in key order, returned inline or written to a collection
//! (`replace`, `merge`, `reduce`). The JavaScript runs in the query crate's engine
//! (`query::js`), under the command's interrupt (maxTimeMS, killOp).

use std::collections::BTreeMap;

use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult, UpdateStatement, WriteOutcome};
use query::compare::OrdBson;
use query::js::{Call as JsCall, Func, Kind};

use super::args::{get_doc, get_i64, interrupt_for, write_opts};
use super::call::Call;

/// Where the results go.
#[derive(Clone, Debug, PartialEq)]
enum Out {
    Inline,
    /// (mode, database, collection).
    Collection(OutMode, String, String),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum OutMode {
    Replace,
    Merge,
    Reduce,
}

/// The command, parsed.
struct Spec {
    map: Func,
    reduce: Func,
    finalize: Option<Func>,
    scope: Option<Document>,
    pipeline: Vec<Document>,
    out: Out,
    /// Whether `out` named its database (the reply names it back).
    out_names_db: bool,
}

/// How many values a key gathers before they are reduced to one (mongod reduces as it goes,
/// so one hot key does not hold every value it was emitted with).
const REDUCE_EVERY: usize = 1000;

pub(crate) fn map_reduce(call: &Call) -> DocResult<Document> {
    query::js::require_enabled()?;
    let spec = parse(call)?;
    let interrupt = interrupt_for(call.cmd)?;
    let opts = docdb::AggregateOpts {
        interrupt: interrupt.clone(),
        collation: get_doc(call.cmd, "collation")?,
        ..Default::default()
    };
    let input = call
        .dbx()
        .aggregate(call.db, call.coll(), &spec.pipeline, &opts)?;
    let mut groups = BTreeMap::new();
    for d in input {
        let d = d?;
        interrupt.check()?;
        map_one(&spec, &d, &mut groups)?;
    }
    let results = reduce_all(&spec, groups)?;
    match &spec.out {
        Out::Inline => {
            Ok(doc! {"results": results.into_iter().map(Bson::Document).collect::<Vec<_>>()})
        }
        Out::Collection(mode, db, coll) => {
            write_out(call, *mode, db, coll, &spec, results)?;
            Ok(if spec.out_names_db {
                doc! {"result": {"db": db.clone(), "collection": coll.clone()}}
            } else {
                doc! {"result": coll.clone()}
            })
        }
    }
}

fn function(cmd: &Document, key: &str) -> DocResult<Option<Func>> {
    match cmd.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => {
            let source = query::js::source_of(v, &format!("mapReduce's '{key}'"))?;
            Ok(Some(query::js::compiled(&source, Kind::Function)?))
        }
    }
}

fn required(cmd: &Document, key: &str) -> DocResult<Func> {
    function(cmd, key)?.ok_or_else(|| {
        DocError::with_code(
            40414,
            "Location40414",
            format!("BSON field 'mapReduce.{key}' is missing but a required field"),
        )
    })
}

/// Reads the command's fields into a [`Spec`].
fn parse(call: &Call) -> DocResult<Spec> {
    let cmd = call.cmd;
    let (map, reduce, finalize) = (
        required(cmd, "map")?,
        required(cmd, "reduce")?,
        function(cmd, "finalize")?,
    );
    let scope = match cmd.get("scope") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(d)) => Some(d.clone()),
        Some(_) => {
            return Err(DocError::type_mismatch(
                "mapReduce's 'scope' must be an object",
            ))
        }
    };
    let mut pipeline = Vec::new();
    if let Some(q) = get_doc(cmd, "query")? {
        pipeline.push(doc! {"$match": q});
    }
    if let Some(s) = get_doc(cmd, "sort")?.filter(|s| !s.is_empty()) {
        pipeline.push(doc! {"$sort": s});
    }
    match get_i64(cmd, "limit")? {
        None | Some(0) => {}
        Some(n) if n < 0 => {
            return Err(DocError::bad_value(
                "mapReduce's 'limit' must be non-negative",
            ))
        }
        Some(n) => pipeline.push(doc! {"$limit": n}),
    }
    let (out, out_names_db) = parse_out(cmd.get("out"), call.db)?;
    Ok(Spec {
        map,
        reduce,
        finalize,
        scope,
        pipeline,
        out,
        out_names_db,
    })
}

/// `out`: a collection name (replace), `{inline: 1}`, or `{replace|merge|reduce: name, db}`.
fn parse_out(out: Option<&Bson>, db: &str) -> DocResult<(Out, bool)> {
    let bad = |m: &str| DocError::bad_value(format!("mapReduce 'out': {m}"));
    let d = match out {
        None => {
            return Err(DocError::with_code(
                40414,
                "Location40414",
                "BSON field 'mapReduce.out' is missing but a required field",
            ))
        }
        Some(Bson::String(name)) => {
            return Ok((
                Out::Collection(OutMode::Replace, db.to_string(), name.clone()),
                false,
            ))
        }
        Some(Bson::Document(d)) => d,
        Some(_) => return Err(bad("must be a string or an object")),
    };
    if d.contains_key("inline") {
        if d.len() != 1 {
            return Err(bad("'inline' takes no other option"));
        }
        return Ok((Out::Inline, false));
    }
    let mut found = None;
    for (k, v) in d {
        let mode = match k.as_str() {
            "replace" => OutMode::Replace,
            "merge" => OutMode::Merge,
            "reduce" => OutMode::Reduce,
            "db" | "nonAtomic" => continue,
            "sharded" => return Err(bad("'sharded' needs a sharded cluster")),
            other => return Err(bad(&format!("unknown option '{other}'"))),
        };
        let Bson::String(name) = v else {
            return Err(bad("the output collection must be a string"));
        };
        if found.replace((mode, name.clone())).is_some() {
            return Err(bad("name one of replace, merge, reduce or inline"));
        }
    }
    let (mode, name) = found.ok_or_else(|| bad("name one of replace, merge, reduce or inline"))?;
    let out_db = match d.get("db") {
        None => db.to_string(),
        Some(Bson::String(s)) => s.clone(),
        Some(_) => return Err(bad("'db' must be a string")),
    };
    Ok((Out::Collection(mode, out_db, name), d.contains_key("db")))
}

/// Runs `map` over one document, adding what it emits to `groups` (reducing a key's values
/// once it holds [`REDUCE_EVERY`]).
fn map_one(spec: &Spec, d: &Document, groups: &mut BTreeMap<OrdBson, Vec<Bson>>) -> DocResult<()> {
    let call = JsCall {
        this: Some(d),
        scope: spec.scope.as_ref(),
        emit: true,
        ..JsCall::default()
    };
    for (key, value) in query::js::run(&spec.map, &call)?.emitted {
        let key = OrdBson(key);
        let values = groups.entry(key.clone()).or_default();
        values.push(value);
        if values.len() >= REDUCE_EVERY {
            let all = std::mem::take(values);
            values.push(reduce_values(spec, &key, all)?);
        }
    }
    Ok(())
}

/// `reduce(key, values)`.
fn reduce_values(spec: &Spec, key: &OrdBson, values: Vec<Bson>) -> DocResult<Bson> {
    let args = [key.0.clone(), Bson::Array(values)];
    let call = JsCall {
        args: &args,
        scope: spec.scope.as_ref(),
        ..JsCall::default()
    };
    Ok(query::js::run(&spec.reduce, &call)?.value)
}

/// `finalize(key, value)`, when given.
fn finalize(spec: &Spec, key: &Bson, value: Bson) -> DocResult<Bson> {
    let Some(f) = &spec.finalize else {
        return Ok(value);
    };
    let args = [key.clone(), value];
    let call = JsCall {
        args: &args,
        scope: spec.scope.as_ref(),
        ..JsCall::default()
    };
    Ok(query::js::run(f, &call)?.value)
}

/// Every key's `{_id, value}`, in key order.
fn reduce_all(spec: &Spec, groups: BTreeMap<OrdBson, Vec<Bson>>) -> DocResult<Vec<Document>> {
    let mut out = Vec::with_capacity(groups.len());
    for (key, mut values) in groups {
        let value = match values.len() {
            1 => values.pop().expect("one value"),
            _ => reduce_values(spec, &key, values)?,
        };
        let value = finalize(spec, &key.0, value)?;
        out.push(doc! {"_id": key.0, "value": value});
    }
    Ok(out)
}

fn first_error(outcome: WriteOutcome) -> DocResult<()> {
    match outcome.write_errors.into_iter().next() {
        Some(e) => Err(e.error),
        None => Ok(()),
    }
}

/// Writes the results to `db.coll`: `replace` its contents, `merge` over it (a result
/// replaces the document with its `_id`), or `reduce` into it (a result and the document
/// with its `_id` are reduced together, then finalized).
fn write_out(
    call: &Call,
    mode: OutMode,
    db: &str,
    coll: &str,
    spec: &Spec,
    results: Vec<Document>,
) -> DocResult<()> {
    let dbx = call.dbx();
    let opts = write_opts(call.cmd)?;
    if mode == OutMode::Replace {
        match dbx.drop_collection(db, coll) {
            Err(e) if e.code != 26 => return Err(e),
            _ => {}
        }
        if results.is_empty() {
            return dbx.create_collection(db, coll, &Document::new());
        }
        return first_error(dbx.insert(db, coll, results, opts));
    }
    let existing = match mode {
        OutMode::Reduce => existing_values(call, db, coll)?,
        _ => BTreeMap::new(),
    };
    let mut stmts = Vec::with_capacity(results.len());
    for mut r in results {
        let id = r.get("_id").cloned().unwrap_or(Bson::Null);
        if let Some(old) = existing.get(&OrdBson(id.clone())) {
            let new = r.remove("value").unwrap_or(Bson::Null);
            let reduced = reduce_values(spec, &OrdBson(id.clone()), vec![old.clone(), new])?;
            r.insert("value", finalize(spec, &id, reduced)?);
        }
        stmts.push(UpdateStatement {
            q: doc! {"_id": id},
            u: Bson::Document(r),
            upsert: true,
            ..Default::default()
        });
    }
    first_error(dbx.update(db, coll, &stmts, opts))
}

/// The `value` of every document of the output collection, by `_id` (for `reduce`).
fn existing_values(call: &Call, db: &str, coll: &str) -> DocResult<BTreeMap<OrdBson, Bson>> {
    let opts = docdb::AggregateOpts {
        interrupt: interrupt_for(call.cmd)?,
        ..Default::default()
    };
    let mut out = BTreeMap::new();
    for d in call.dbx().aggregate(db, coll, &[], &opts)? {
        let mut d = d?;
        let id = d.remove("_id").unwrap_or(Bson::Null);
        out.insert(OrdBson(id), d.remove("value").unwrap_or(Bson::Null));
    }
    Ok(out)
}
