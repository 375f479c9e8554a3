//! The stages that write: `$out` (replace a collection with the pipeline's output) and `$merge`
//! (merge it into a collection, document by document). Both are the last stage of a pipeline,
//! and both write through the storage side's [`CollectionSink`], that is through its normal
//! write path: its indexes, validators and placement apply as to any other write.

use bson::{Bson, Document};

use super::common::stage_err;
use crate::compare::type_name;
use crate::error::{DocError, DocResult};
use crate::expr::{eval_doc_path, parse_expr, Ctx, Expr};
use crate::path::split_path;
use crate::vars;

/// A collection a stage writes, in the pipeline's database unless `db` names another.
#[derive(Clone, Debug, PartialEq)]
pub struct Namespace {
    pub db: Option<String>,
    pub coll: String,
}

/// Storage as the writing stages need it. Every method writes or reads through the storage
/// side's own paths; none bypasses its checks.
pub trait CollectionSink {
    /// `$out`: replaces the collection with `docs`, atomically for readers (mongod writes a
    /// temporary collection with the target's options and indexes, then renames it over the
    /// target; a failed insert leaves the target as it was).
    fn replace_collection(&self, ns: &Namespace, docs: Vec<Document>) -> DocResult<()>;
    /// Whether the collection has a unique index on exactly `fields` (in any order); `$merge`
    /// needs one for its `on` fields. `_id` always has one.
    fn has_unique_index(&self, ns: &Namespace, fields: &[String]) -> DocResult<bool>;
    /// Inserts one document.
    fn insert(&self, ns: &Namespace, doc: Document) -> DocResult<()>;
    /// One update statement (`update`: operators, a replacement or a pipeline); returns the
    /// number of documents matched (1 for an upsert that inserted).
    fn update(
        &self,
        ns: &Namespace,
        filter: Document,
        update: Bson,
        upsert: bool,
    ) -> DocResult<u64>;
}

fn parse_namespace(v: &Bson, stage: &str, code: i32) -> DocResult<Namespace> {
    match v {
        Bson::String(coll) => Ok(Namespace {
            db: None,
            coll: coll.clone(),
        }),
        Bson::Document(d) => {
            let mut ns = Namespace {
                db: None,
                coll: String::new(),
            };
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("db", Bson::String(s)) => ns.db = Some(s.clone()),
                    ("coll", Bson::String(s)) => ns.coll = s.clone(),
                    ("db" | "coll", other) => {
                        return Err(DocError::type_mismatch(format!(
                        "BSON field '{stage}.{k}' is the wrong type '{}', expected type 'string'",
                        type_name(other)
                    )))
                    }
                    // A time-series $out target: flashdoc has no time-series collections.
                    ("timeseries", _) => {
                        return Err(DocError::with_code(
                            238,
                            "NotImplemented",
                            "$out to a time-series collection is not supported",
                        ))
                    }
                    _ => {
                        return Err(stage_err(
                            40415,
                            format!("BSON field '{stage}.{k}' is an unknown field."),
                        ))
                    }
                }
            }
            if ns.coll.is_empty() {
                return Err(stage_err(
                    40414,
                    format!("BSON field '{stage}.coll' is missing but a required field"),
                ));
            }
            Ok(ns)
        }
        other => Err(stage_err(
            code,
            format!(
                "{stage} only supports a string or object argument, but found {}",
                type_name(other)
            ),
        )),
    }
}

/// Refuses targets mongod refuses: system collections and the internal databases.
fn check_target(ns: &Namespace, stage: &str) -> DocResult<()> {
    if ns.coll.starts_with("system.") {
        return Err(stage_err(
            17385,
            format!("Can't {stage} to special collection: {}", ns.coll),
        ));
    }
    if let Some(db) = &ns.db {
        if matches!(db.as_str(), "admin" | "local" | "config") {
            return Err(stage_err(
                31321,
                format!("Can't {stage} to internal database: {db}"),
            ));
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
pub(super) struct Out {
    pub(super) ns: Namespace,
}

impl Out {
    pub(super) fn parse(arg: &Bson) -> DocResult<Out> {
        let ns = parse_namespace(arg, "$out", 16990)?;
        check_target(&ns, "$out")?;
        Ok(Out { ns })
    }

    pub(super) fn run(self, docs: Vec<Document>, sink: &dyn CollectionSink) -> DocResult<()> {
        sink.replace_collection(&self.ns, docs)
    }
}

#[derive(Clone, Debug)]
enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    /// An update pipeline; `$$new` is the incoming document.
    Pipeline(Vec<Document>),
}

#[derive(Clone, Copy, Debug)]
enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

#[derive(Clone, Debug)]
pub(super) struct Merge {
    ns: Namespace,
    on: Vec<String>,
    let_: Vec<(String, Expr)>,
    matched: WhenMatched,
    not_matched: WhenNotMatched,
}

fn enum_err(field: &str, v: &Bson) -> DocError {
    DocError::bad_value(format!(
        "Enumeration value '{}' for field '$merge.{field}' is not a valid value.",
        crate::compare::shell_repr(v)
    ))
}

/// `$merge`'s `whenMatched`: a strategy's name, or an update pipeline.
fn parse_when_matched(k: &str, v: &Bson) -> DocResult<WhenMatched> {
    Ok(match v {
        Bson::String(s) => match s.as_str() {
            "replace" => WhenMatched::Replace,
            "keepExisting" => WhenMatched::KeepExisting,
            "merge" => WhenMatched::Merge,
            "fail" => WhenMatched::Fail,
            _ => return Err(enum_err(k, v)),
        },
        Bson::Array(a) => {
            let mut stages = Vec::with_capacity(a.len());
            for s in a {
                let Bson::Document(sd) = s else {
                    return Err(DocError::failed_to_parse(
                        "$merge 'whenMatched' pipeline must be an array of objects",
                    ));
                };
                stages.push(sd.clone());
            }
            WhenMatched::Pipeline(stages)
        }
        other => {
            return Err(stage_err(
                51191,
                format!(
                    "'whenMatched' option to $merge must be a string or array, but found {}",
                    type_name(other)
                ),
            ))
        }
    })
}

impl Merge {
    /// Parses `$merge`'s options; a `whenMatched` pipeline is checked by
    /// `check_update_pipeline` (the pipeline parser's, which knows every stage).
    pub(super) fn parse(
        arg: &Bson,
        check_update_pipeline: fn(&[Bson]) -> DocResult<Vec<Document>>,
    ) -> DocResult<Merge> {
        let mut m = Merge {
            ns: Namespace {
                db: None,
                coll: String::new(),
            },
            on: vec!["_id".into()],
            let_: Vec::new(),
            matched: WhenMatched::Merge,
            not_matched: WhenNotMatched::Insert,
        };
        let mut user_let = None;
        match arg {
            Bson::String(_) => m.ns = parse_namespace(arg, "$merge", 51182)?,
            Bson::Document(d) => {
                let mut into = None;
                for (k, v) in d {
                    match k.as_str() {
                        "into" => into = Some(parse_namespace(v, "$merge.into", 51178)?),
                        "on" => m.on = parse_on(v)?,
                        "let" => {
                            let Bson::Document(l) = v else {
                                return Err(DocError::type_mismatch(format!(
                                    "BSON field '$merge.let' is the wrong type '{}', expected type 'object'",
                                    type_name(v)
                                )));
                            };
                            user_let = Some(l.clone());
                        }
                        "whenMatched" => m.matched = parse_when_matched(k, v)?,
                        "whenNotMatched" => {
                            m.not_matched = match v.as_str() {
                                Some("insert") => WhenNotMatched::Insert,
                                Some("discard") => WhenNotMatched::Discard,
                                Some("fail") => WhenNotMatched::Fail,
                                _ => return Err(enum_err(k, v)),
                            }
                        }
                        _ => {
                            return Err(stage_err(
                                40415,
                                format!("BSON field '$merge.{k}' is an unknown field."),
                            ))
                        }
                    }
                }
                m.ns = into.ok_or_else(|| {
                    stage_err(
                        40414,
                        "BSON field '$merge.into' is missing but a required field",
                    )
                })?;
            }
            other => {
                return Err(stage_err(
                    51182,
                    format!(
                        "$merge only supports a string or object argument, but found {}",
                        type_name(other)
                    ),
                ))
            }
        }
        check_target(&m.ns, "$merge")?;
        m.check_strategy()?;
        m.bind_let(user_let, check_update_pipeline)?;
        Ok(m)
    }

    /// Refuses the `whenMatched`/`whenNotMatched` pairs mongod does not support.
    fn check_strategy(&self) -> DocResult<()> {
        // mongod's supported combinations (MergeStrategyDescriptors).
        let supported = matches!(
            (&self.matched, self.not_matched),
            (
                WhenMatched::Replace | WhenMatched::Merge | WhenMatched::Pipeline(_),
                _
            ) | (
                WhenMatched::KeepExisting | WhenMatched::Fail,
                WhenNotMatched::Insert
            )
        );
        if !supported {
            return Err(stage_err(
                51181,
                format!(
                    "Combination of {{whenMatched: {}, whenNotMatched: {}}} is not supported",
                    self.matched_name(),
                    self.not_matched_name()
                ),
            ));
        }
        Ok(())
    }

    /// Binds the variables a `whenMatched` pipeline reads (`$$new` and the user's `let`),
    /// after checking the pipeline; `let` without a pipeline is refused.
    fn bind_let(
        &mut self,
        user_let: Option<Document>,
        check_update_pipeline: fn(&[Bson]) -> DocResult<Vec<Document>>,
    ) -> DocResult<()> {
        if let WhenMatched::Pipeline(p) = &self.matched {
            // The update pipeline's stages and expressions are checked now, not per document.
            check_update_pipeline(&p.iter().cloned().map(Bson::Document).collect::<Vec<_>>())?;
            self.let_
                .push(("new".into(), parse_expr(&Bson::String("$$ROOT".into()))?));
            for (name, e) in user_let.iter().flatten() {
                if name == "new" {
                    self.let_.retain(|(n, _)| n != "new");
                }
                self.let_.push((name.clone(), parse_expr(e)?));
            }
        } else if user_let.is_some() {
            return Err(stage_err(
                51199,
                format!(
                    "Cannot use 'let' variables with 'whenMatched: {}' mode",
                    self.matched_name()
                ),
            ));
        }
        Ok(())
    }

    fn matched_name(&self) -> &'static str {
        match self.matched {
            WhenMatched::Replace => "replace",
            WhenMatched::KeepExisting => "keepExisting",
            WhenMatched::Merge => "merge",
            WhenMatched::Fail => "fail",
            WhenMatched::Pipeline(_) => "pipeline",
        }
    }

    fn not_matched_name(&self) -> &'static str {
        match self.not_matched {
            WhenNotMatched::Insert => "insert",
            WhenNotMatched::Discard => "discard",
            WhenNotMatched::Fail => "fail",
        }
    }

    pub(super) fn run(self, docs: Vec<Document>, sink: &dyn CollectionSink) -> DocResult<()> {
        if !sink.has_unique_index(&self.ns, &self.on)? {
            return Err(stage_err(
                51183,
                "Cannot find index to verify that join fields will be unique",
            ));
        }
        for mut doc in docs {
            if self.on == ["_id"] && !doc.contains_key("_id") {
                // mongod gives a document without `_id` a new one before merging it.
                let mut with_id = bson::doc! {"_id": bson::oid::ObjectId::new()};
                with_id.extend(doc);
                doc = with_id;
            }
            let filter = self.on_filter(&doc)?;
            self.merge_one(sink, filter, doc)?;
        }
        Ok(())
    }

    /// `{on1: value, …}` from the document: each `on` field must hold a single value.
    fn on_filter(&self, doc: &Document) -> DocResult<Document> {
        let mut filter = Document::new();
        for f in &self.on {
            match eval_doc_path(doc, &split_path(f)?) {
                None | Some(Bson::Null) | Some(Bson::Undefined) | Some(Bson::Array(_)) => {
                    return Err(stage_err(
                        51132,
                        "$merge write error: 'on' field cannot be missing, null, undefined or an array",
                    ))
                }
                Some(v) => {
                    filter.insert(f.clone(), v);
                }
            }
        }
        Ok(filter)
    }

    fn merge_one(
        &self,
        sink: &dyn CollectionSink,
        filter: Document,
        doc: Document,
    ) -> DocResult<()> {
        let upsert = matches!(self.not_matched, WhenNotMatched::Insert);
        let matched = match &self.matched {
            WhenMatched::Fail => {
                // The unique index on `on` refuses a matching document (11000).
                return sink.insert(&self.ns, doc);
            }
            WhenMatched::Replace => sink.update(&self.ns, filter, Bson::Document(doc), upsert)?,
            WhenMatched::Merge => {
                sink.update(&self.ns, filter, bson::bson!({"$set": doc}), upsert)?
            }
            WhenMatched::KeepExisting => {
                sink.update(&self.ns, filter, bson::bson!({"$setOnInsert": doc}), upsert)?
            }
            WhenMatched::Pipeline(p) => {
                let ctx = Ctx::new(&doc);
                let mut bound = Vec::with_capacity(self.let_.len());
                for (name, e) in &self.let_ {
                    bound.push((name.clone(), e.eval(&ctx)?));
                }
                let pipeline = Bson::Array(p.iter().cloned().map(Bson::Document).collect());
                let matched = {
                    let _frame = vars::bind(bound);
                    sink.update(&self.ns, filter, pipeline, false)?
                };
                // A pipeline applies to a matched document only; an unmatched one is
                // inserted as it came.
                if matched == 0 && upsert {
                    sink.insert(&self.ns, doc)?;
                    return Ok(());
                }
                matched
            }
        };
        if matched == 0 && matches!(self.not_matched, WhenNotMatched::Fail) {
            return Err(stage_err(
                13113,
                "$merge could not find a matching document in the target collection for at least one document in the source collection",
            ));
        }
        Ok(())
    }
}

/// `on`: a field name or a non-empty array of distinct ones.
fn parse_on(v: &Bson) -> DocResult<Vec<String>> {
    let fields: Vec<String> = match v {
        Bson::String(s) => vec![s.clone()],
        Bson::Array(a) if !a.is_empty() => {
            let mut out = Vec::with_capacity(a.len());
            for f in a {
                let Bson::String(s) = f else {
                    return Err(stage_err(
                        51134,
                        format!(
                            "$merge 'on' array elements must be strings, but found {}",
                            type_name(f)
                        ),
                    ));
                };
                if out.contains(s) {
                    return Err(stage_err(31465, format!("Found a duplicate field '{s}'")));
                }
                out.push(s.clone());
            }
            out
        }
        Bson::Array(_) => {
            return Err(stage_err(
                51187,
                "If explicitly specifying $merge 'on', must include at least one field",
            ))
        }
        other => {
            return Err(stage_err(
                51186,
                format!(
                "$merge 'on' field must be either a string or an array of strings, but found {}",
                type_name(other)
            ),
            ))
        }
    };
    for f in &fields {
        split_path(f)?;
    }
    Ok(fields)
}
