//! `$graphLookup`: a recursive search of another collection, from the values `startWith`
//! gives, following `connectFromField` to `connectToField`, breadth first.

use std::collections::BTreeSet;

use bson::{Bson, Document};

use super::budget::{self, doc_bytes, Budget};
use super::common::{check_output_name, stage_err, DocIter};
use super::source::Env;
use crate::compare::{type_name, Num, OrdBson};
use crate::error::DocResult;
use crate::expr::{eval_doc_path, parse_expr, Ctx, Expr};
use crate::matcher::Matcher;
use crate::path::{set_path, split_path};

#[derive(Clone, Debug)]
pub(super) struct GraphLookup {
    from: String,
    start_with: Expr,
    connect_from: Vec<String>,
    connect_to: String,
    as_: Vec<String>,
    max_depth: Option<u64>,
    depth_field: Option<Vec<String>>,
    restrict: Option<Matcher>,
}

/// A path argument: a string, not `$`-prefixed, each component a valid field name.
fn path_arg(k: &str, v: &Bson) -> DocResult<String> {
    let Bson::String(s) = v else {
        return Err(stage_err(
            40103,
            format!(
                "expected string as argument for {k}, found: {}",
                type_name(v)
            ),
        ));
    };
    for part in s.split('.') {
        check_output_name(part)?;
    }
    Ok(s.clone())
}

impl GraphLookup {
    pub(super) fn parse(arg: &Bson) -> DocResult<GraphLookup> {
        let Bson::Document(d) = arg else {
            return Err(stage_err(
                40327,
                format!(
                    "the $graphLookup stage specification must be an object, but found {}",
                    type_name(arg)
                ),
            ));
        };
        let (mut from, mut start_with, mut connect_from, mut connect_to, mut as_) =
            (None, None, None, None, None);
        let (mut max_depth, mut depth_field, mut restrict) = (None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "from" => match v {
                    Bson::String(s) => from = Some(s.clone()),
                    _ => {
                        return Err(stage_err(
                            40103,
                            format!(
                                "expected string as argument for from, found: {}",
                                type_name(v)
                            ),
                        ))
                    }
                },
                "startWith" => start_with = Some(parse_expr(v)?),
                "connectFromField" => connect_from = Some(split_path(&path_arg(k, v)?)?),
                "connectToField" => connect_to = Some(path_arg(k, v)?),
                "as" => as_ = Some(split_path(&path_arg(k, v)?)?),
                "depthField" => depth_field = Some(split_path(&path_arg(k, v)?)?),
                "maxDepth" => {
                    let Some(n) = Num::of(v) else {
                        return Err(stage_err(
                            40100,
                            format!("maxDepth must be numeric, found type: {}", type_name(v)),
                        ));
                    };
                    let x = n.as_f64();
                    if x < 0.0 {
                        return Err(stage_err(
                            40101,
                            format!("maxDepth requires a nonnegative argument, found: {x}"),
                        ));
                    }
                    let Some(i) = n.as_i64_exact() else {
                        return Err(stage_err(
                            40102,
                            format!("maxDepth could not be represented as a long long: {x}"),
                        ));
                    };
                    max_depth = Some(i as u64);
                }
                "restrictSearchWithMatch" => {
                    let Bson::Document(m) = v else {
                        return Err(stage_err(
                            40185,
                            format!(
                                "restrictSearchWithMatch must be an object, found {}",
                                type_name(v)
                            ),
                        ));
                    };
                    restrict = Some(Matcher::new(m)?);
                }
                other => {
                    return Err(stage_err(
                        40104,
                        format!("Unknown argument to $graphLookup: {other}"),
                    ))
                }
            }
        }
        match (from, start_with, connect_from, connect_to, as_) {
            (Some(from), Some(start_with), Some(connect_from), Some(connect_to), Some(as_)) => {
                Ok(GraphLookup {
                    from,
                    start_with,
                    connect_from,
                    connect_to,
                    as_,
                    max_depth,
                    depth_field,
                    restrict,
                })
            }
            _ => Err(stage_err(
                40105,
                "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and 'connectToField' to be specified.",
            )),
        }
    }

    pub(super) fn run(self, input: DocIter, env: Env) -> DocResult<DocIter> {
        let foreign: Vec<Document> = env
            .source
            .read_collection(&self.from)?
            .into_iter()
            .filter(|d| self.restrict.as_ref().is_none_or(|m| m.matches(d)))
            .collect();
        let held: usize = foreign.iter().map(doc_bytes).sum();
        check_memory(held)?;
        let mut out = Vec::new();
        for r in input {
            let mut d = r?;
            let start = self
                .start_with
                .eval(&Ctx::scoped(&d, env.scope))?
                .unwrap_or(Bson::Null);
            let found = self.search(&foreign, start, env, held)?;
            set_path(
                &mut d,
                &self.as_,
                Bson::Array(found.into_iter().map(Bson::Document).collect()),
            )?;
            out.push(Ok(d));
        }
        Ok(Box::new(out.into_iter()))
    }

    /// Breadth first from `start`; each foreign document is reached once (at its smallest
    /// depth), so cycles end, and the depth is bounded by the collection's size.
    /// `held`: the bytes the stage already holds (the foreign documents); what the search
    /// collects is charged on top of them.
    fn search(
        &self,
        foreign: &[Document],
        start: Bson,
        env: Env,
        mut held: usize,
    ) -> DocResult<Vec<Document>> {
        let mut reached = vec![false; foreign.len()];
        let mut out = Vec::new();
        let mut frontier = flatten(start);
        let mut depth: u64 = 0;
        while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
            env.interrupt.check()?;
            let m = Matcher::new(&bson::doc! {self.connect_to.clone(): {"$in": frontier}})?;
            let mut next: BTreeSet<OrdBson> = BTreeSet::new();
            for (i, f) in foreign.iter().enumerate() {
                if reached[i] || !m.matches(f) {
                    continue;
                }
                reached[i] = true;
                if let Some(v) = eval_doc_path(f, &self.connect_from) {
                    next.extend(flatten(v).into_iter().map(OrdBson));
                }
                let mut f = f.clone();
                if let Some(df) = &self.depth_field {
                    set_path(&mut f, df, Bson::Int64(depth as i64))?;
                }
                held += doc_bytes(&f);
                check_memory(held)?;
                out.push(f);
            }
            frontier = next.into_iter().map(|o| o.0).collect();
            depth += 1;
        }
        Ok(out)
    }
}

/// mongod's error (40099) when `$graphLookup` holds more than
/// `internalDocumentSourceGraphLookupMaxMemoryBytes`: it cannot spill, whatever `allowDiskUse`
/// says (as mongod before 8.1).
fn check_memory(held: usize) -> DocResult<()> {
    let limit = budget::limit(Budget::GraphLookup);
    if held > limit {
        return Err(stage_err(
            40099,
            format!(
                "$graphLookup reached maximum memory consumption: more than {limit} bytes ({})",
                budget::parameter_name(Budget::GraphLookup)
            ),
        ));
    }
    Ok(())
}

/// The values an array stands for (its elements), or the one value.
fn flatten(v: Bson) -> Vec<Bson> {
    match v {
        Bson::Array(a) => a,
        other => vec![other],
    }
}
