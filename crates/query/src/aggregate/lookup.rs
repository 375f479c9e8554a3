//! The stages that read another collection of the pipeline's database through its
//! [`CollectionSource`](super::CollectionSource): `$lookup` (equality, pipeline, concise and
//! `let` forms) and `$unionWith`.

use bson::{Bson, Document};

use super::budget::Budget;
use super::common::{stage_err, DocIter, Memory};
use super::parse::parse_sub_pipeline;
use super::run::run_stages;
use super::source::Env;
use super::stage::{Lookup, UnionWith};
use crate::error::{DocError, DocResult};
use crate::expr::{eval_doc_path, parse_expr, Ctx, Expr};
use crate::matcher::Matcher;
use crate::path::{set_path, split_path};
use crate::vars;

impl Lookup {
    pub(super) fn parse(arg: &Bson) -> DocResult<Lookup> {
        let Bson::Document(d) = arg else {
            return Err(stage_err(
                40319,
                "the $lookup stage specification must be an object",
            ));
        };
        for k in d.keys() {
            if !matches!(
                k.as_str(),
                "from" | "localField" | "foreignField" | "as" | "pipeline" | "let"
            ) {
                return Err(stage_err(
                    40321,
                    format!("unknown argument to $lookup: {k}"),
                ));
            }
        }
        let s = |k: &str| -> DocResult<Option<String>> {
            match d.get(k) {
                None => Ok(None),
                Some(Bson::String(v)) => Ok(Some(v.clone())),
                Some(_) => Err(stage_err(
                    4570,
                    format!("$lookup argument '{k}' must be a string"),
                )),
            }
        };
        let pipeline = match d.get("pipeline") {
            None => None,
            Some(Bson::Array(a)) => Some(parse_sub_pipeline(a, "$lookup")?),
            Some(_) => {
                return Err(DocError::failed_to_parse(
                    "'pipeline' option must be specified as an array",
                ))
            }
        };
        let let_ = match d.get("let") {
            None => Vec::new(),
            Some(Bson::Document(l)) => parse_let(l)?,
            Some(_) => {
                return Err(DocError::failed_to_parse(
                    "$lookup argument 'let' must be an object, is type ".to_string()
                        + crate::compare::type_name(&d["let"]),
                ))
            }
        };
        let from = s("from")?
            .ok_or_else(|| DocError::failed_to_parse("must specify 'from' field for a $lookup"))?;
        let as_ = s("as")?
            .ok_or_else(|| DocError::failed_to_parse("must specify 'as' field for a $lookup"))?;
        let equality = match (s("localField")?, s("foreignField")?) {
            (Some(l), Some(f)) => Some((split_path(&l)?, f)),
            (None, None) if pipeline.is_some() => None,
            _ => return Err(DocError::failed_to_parse(
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
            )),
        };
        if !let_.is_empty() && pipeline.is_none() {
            return Err(DocError::failed_to_parse(
                "$lookup with 'let' must also specify 'pipeline'",
            ));
        }
        Ok(Lookup {
            from,
            equality,
            as_: split_path(&as_)?,
            let_,
            pipeline,
        })
    }

    pub(super) fn run(self, input: DocIter, env: Env) -> DocResult<DocIter> {
        let foreign_docs = held_foreign(env.source.read_collection(&self.from)?, "$lookup")?;
        let mut out = Vec::new();
        for r in input {
            let mut d = r?;
            let matched: Vec<Document> = match &self.equality {
                None => foreign_docs.clone(),
                Some((local, foreign)) => {
                    let vals: Vec<Bson> = match eval_doc_path(&d, local) {
                        None => vec![Bson::Null],
                        Some(Bson::Array(a)) if a.is_empty() => vec![Bson::Null],
                        Some(Bson::Array(a)) => a,
                        Some(v) => vec![v],
                    };
                    let m = Matcher::new(&bson::doc! {foreign.clone(): {"$in": vals}})?;
                    foreign_docs
                        .iter()
                        .filter(|f| m.matches(f))
                        .cloned()
                        .collect()
                }
            };
            let matched = match &self.pipeline {
                Some(p) => {
                    let ctx = Ctx::scoped(&d, env.scope);
                    let mut bound = Vec::with_capacity(self.let_.len());
                    for (name, e) in &self.let_ {
                        bound.push((name.clone(), e.eval(&ctx)?));
                    }
                    let _frame = vars::bind(bound);
                    run_stages(p.clone(), Box::new(matched.into_iter().map(Ok)), env)?
                }
                None => matched,
            };
            set_path(
                &mut d,
                &self.as_,
                Bson::Array(matched.into_iter().map(Bson::Document).collect()),
            )?;
            out.push(Ok(d));
        }
        Ok(Box::new(out.into_iter()))
    }
}

/// The foreign collection a stage keeps while it runs, charged to
/// `internalDocumentSourceLookupCacheSizeBytes`: `read_collection` hands over the whole
/// collection, so past the budget the stage fails (292) rather than holding it.
fn held_foreign(docs: Vec<Document>, stage: &'static str) -> DocResult<Vec<Document>> {
    let mut memory = Memory::charged_to(stage, Budget::LookupCache);
    for d in &docs {
        memory.charge(d)?;
    }
    Ok(docs)
}

/// `let: {name: expression, …}`, with mongod's rules for user variable names.
fn parse_let(l: &Document) -> DocResult<Vec<(String, Expr)>> {
    let mut out = Vec::with_capacity(l.len());
    for (name, e) in l {
        crate::vars::check_var_name(name)?;
        out.push((name.clone(), parse_expr(e)?));
    }
    Ok(out)
}

impl UnionWith {
    pub(super) fn parse(arg: &Bson) -> DocResult<UnionWith> {
        match arg {
            Bson::String(coll) => Ok(UnionWith {
                coll: coll.clone(),
                pipeline: Vec::new(),
            }),
            Bson::Document(d) => {
                if let Some(k) = d
                    .keys()
                    .find(|k| !matches!(k.as_str(), "coll" | "pipeline"))
                {
                    return Err(stage_err(
                        40415,
                        format!("BSON field '$unionWith.{k}' is an unknown field."),
                    ));
                }
                let coll = match d.get("coll") {
                    Some(Bson::String(c)) => c.clone(),
                    // mongod reads a pipeline without `coll` from $documents, which flashdoc
                    // does not have.
                    None => return Err(stage_err(
                        40414,
                        "BSON field '$unionWith.coll' is missing but a required field",
                    )),
                    Some(other) => {
                        return Err(DocError::type_mismatch(format!(
                            "BSON field '$unionWith.coll' is the wrong type '{}', expected type 'string'",
                            crate::compare::type_name(other)
                        )))
                    }
                };
                let pipeline = match d.get("pipeline") {
                    None => Vec::new(),
                    Some(Bson::Array(a)) => parse_sub_pipeline(a, "$unionWith")?,
                    Some(other) => {
                        return Err(DocError::type_mismatch(format!(
                            "BSON field '$unionWith.pipeline' is the wrong type '{}', expected type 'array'",
                            crate::compare::type_name(other)
                        )))
                    }
                };
                Ok(UnionWith { coll, pipeline })
            }
            other => Err(DocError::failed_to_parse(format!(
                "the $unionWith stage specification must be an object or string, but found {}",
                crate::compare::type_name(other)
            ))),
        }
    }

    pub(super) fn run(self, input: DocIter, env: Env) -> DocResult<DocIter> {
        let other = held_foreign(env.source.read_collection(&self.coll)?, "$unionWith")?;
        let other = run_stages(self.pipeline, Box::new(other.into_iter().map(Ok)), env)?;
        Ok(Box::new(input.chain(other.into_iter().map(Ok))))
    }
}
