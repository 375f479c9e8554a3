//! Running a pipeline: its stages parsed, checked for where they stand, then chained over the
//! input, streaming stages lazily and blocking ones within their memory bound.

use bson::{Bson, Document};

use super::common::{stage_err, DocIter, Memory, MAX_PIPELINE_STAGES};
use super::current_op::CurrentOpSpec;
use super::fields::{add_field, unset_path, unwind_doc};
use super::group::count_output;
use super::out::CollectionSink;
use super::parse::{check_positions, parse_stage};
use super::sessions::ListSessionsSpec;
use super::source::{CollectionSource, Env};
use super::spill::run_group;
use super::stage::Stage;
use crate::compare::{shell_repr, type_name};
use crate::error::{DocError, DocResult};
use crate::expr::{Ctx, Expr};
use crate::interrupt::Interrupt;
use crate::projection::Projection;
use crate::sort::SortSpec;
use crate::vars::Scope;

/// Runs a pipeline over input documents. `source` is the storage its stages reach: the other
/// collections of the same database, the writes of `$out`/`$merge`, `$collStats`.
pub fn run_pipeline(
    pipeline: &[Document],
    input: DocIter,
    source: &dyn CollectionSource,
    interrupt: &Interrupt,
) -> DocResult<Vec<Document>> {
    run_pipeline_scoped(pipeline, input, source, interrupt, &crate::vars::EMPTY)
}

/// [`run_pipeline`] with the command's `let` variables in scope for every stage.
pub fn run_pipeline_scoped(
    pipeline: &[Document],
    input: DocIter,
    source: &dyn CollectionSource,
    interrupt: &Interrupt,
    scope: &Scope,
) -> DocResult<Vec<Document>> {
    if pipeline.len() > MAX_PIPELINE_STAGES {
        return Err(DocError::with_code(
            7749501,
            "Location7749501",
            format!("Pipeline length must be no longer than {MAX_PIPELINE_STAGES} stages"),
        ));
    }
    let stages: Vec<Stage> = pipeline.iter().map(parse_stage).collect::<DocResult<_>>()?;
    check_positions(&stages)?;
    run_stages(
        stages,
        input,
        Env {
            source,
            interrupt,
            scope,
        },
    )
}

/// The documents a writing stage stores: a text score is metadata, never a stored field.
fn without_score(it: DocIter) -> DocResult<Vec<Document>> {
    it.map(|r| {
        r.map(|mut d| {
            d.remove(crate::text::SCORE_FIELD);
            d
        })
    })
    .collect()
}

/// Runs parsed stages (a pipeline, or a stage's sub-pipeline) to completion.
pub(super) fn run_stages(stages: Vec<Stage>, input: DocIter, env: Env) -> DocResult<Vec<Document>> {
    let interrupt = env.interrupt;
    // Every document leaving a stage is a yield point. The input is not wrapped again: it is
    // a scan that checks the same interrupt per document (aggregate's find), or documents
    // already in memory ($lookup's, an update's one document).
    let mut it: DocIter = input;
    for stage in stages {
        let deepens = stage_may_deepen(&stage);
        it = run_stage(stage, it, env)?;
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

/// Chains one stage onto the stream `it`: a streaming stage lazily, a blocking one by
/// consuming `it` now.
fn run_stage(stage: Stage, it: DocIter, env: Env) -> DocResult<DocIter> {
    // The lazy stages own their copy of the command's variables (shared, not copied).
    let scope = env.scope.clone();
    Ok(match stage {
        Stage::Match(m) if m.text().is_some() => {
            // The storage side answers a leading $text match with its text index before
            // the pipeline runs; one reaching here has no index to answer it.
            return Err(DocError::index_not_found(
                "text index required for $text query",
            ));
        }
        Stage::Match(m) => {
            let m = m.with_scope(env.scope);
            Box::new(it.filter(move |r| match r {
                Ok(d) => m.matches(d),
                Err(_) => true,
            }))
        }
        Stage::Project(p) => {
            let p = p.with_scope(env.scope);
            Box::new(it.map(move |r| r.and_then(|d| project(&p, &d))))
        }
        Stage::AddFields(fields) => Box::new(it.map(move |r| {
            let mut d = r?;
            let src = d.clone();
            let ctx = Ctx::scoped(&src, &scope);
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
        Stage::Group(id, accs) => {
            let key = |ctx: &Ctx| Ok(id.eval(ctx)?.unwrap_or(Bson::Null));
            Box::new(run_group(it, key, &accs, &scope)?.into_iter().map(Ok))
        }
        Stage::Sort(spec) => {
            let mut docs = Memory::new("$sort").collect(it)?;
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
        Stage::Count(name) => count(it, name)?,
        Stage::Lookup(l) => l.run(it, env)?,
        Stage::UnionWith(u) => u.run(it, env)?,
        Stage::Facet(f) => f.run(it, env)?,
        Stage::Bucket(b) => b.run(it, &scope)?,
        Stage::BucketAuto(b) => b.run(it, &scope)?,
        Stage::Sample(s) => s.run(it)?,
        Stage::GraphLookup(g) => g.run(it, env)?,
        Stage::SetWindowFields(w) => w.run(it, env)?,
        Stage::CollStats(c) => c.run(it, env)?,
        Stage::GeoNear => {
            // The storage crate takes a leading $geoNear off as the pipeline's source.
            return Err(DocError::with_code(
                40602,
                "Location40602",
                "$geoNear is only valid as the first stage in a pipeline.",
            ));
        }
        Stage::CurrentOp(c) => current_ops(&c, env)?,
        Stage::ListLocalSessions(s) => local_sessions(&s, env)?,
        Stage::Documents(e) => documents(&e)?,
        Stage::Out(o) => {
            let docs = without_score(it)?;
            o.run(docs, sink(env, "$out")?)?;
            Box::new(std::iter::empty())
        }
        Stage::Merge(m) => {
            let docs = without_score(it)?;
            m.run(docs, sink(env, "$merge")?)?;
            Box::new(std::iter::empty())
        }
        Stage::ReplaceRoot(e) => replace_root(it, e, scope),
        Stage::SortByCount(e) => sort_by_count(it, &e, &scope)?,
    })
}

/// `$replaceRoot`/`$replaceWith`: each document becomes what `e` evaluates to, which must be
/// an object.
fn replace_root(it: DocIter, e: Expr, scope: Scope) -> DocIter {
    Box::new(it.map(move |r| {
        let d = r?;
        match e.eval(&Ctx::scoped(&d, &scope))? {
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
    }))
}

/// `$count`: one document holding the number of documents, none for an empty input.
fn count(it: DocIter, name: String) -> DocResult<DocIter> {
    let mut n: i64 = 0;
    for r in it {
        r?;
        n += 1;
    }
    if n == 0 {
        Ok(Box::new(std::iter::empty()))
    } else {
        let v = if n <= i32::MAX as i64 {
            Bson::Int32(n as i32)
        } else {
            Bson::Int64(n)
        };
        let mut d = Document::new();
        d.insert(name, v);
        Ok(Box::new(std::iter::once(Ok(d))))
    }
}

/// `$sortByCount`: the groups of an expression's values with their counts, largest first.
fn sort_by_count(it: DocIter, e: &Expr, scope: &Scope) -> DocResult<DocIter> {
    let key = |ctx: &Ctx| Ok(e.eval(ctx)?.unwrap_or(Bson::Null));
    let mut groups = run_group(it, key, &count_output(), scope)?;
    let spec = SortSpec {
        fields: vec![("count".into(), -1)],
    };
    spec.sort(&mut groups);
    Ok(Box::new(groups.into_iter().map(Ok)))
}

/// `$currentOp`'s operations, from the pipeline's source (a server); refused where there is
/// none.
fn current_ops(spec: &CurrentOpSpec, env: Env) -> DocResult<DocIter> {
    let ops = env.source.current_ops(spec).unwrap_or_else(|| {
        Err(DocError::illegal_operation(
            "$currentOp has no server to report on in this pipeline",
        ))
    })?;
    Ok(Box::new(ops.into_iter().map(Ok)))
}

/// `$listLocalSessions`' sessions, from the pipeline's source (a server); refused where there
/// is none.
fn local_sessions(spec: &ListSessionsSpec, env: Env) -> DocResult<DocIter> {
    let sessions = env.source.local_sessions(spec).unwrap_or_else(|| {
        Err(DocError::illegal_operation(
            "$listLocalSessions has no server to report on in this pipeline",
        ))
    })?;
    Ok(Box::new(sessions.into_iter().map(Ok)))
}

/// `$documents`: its expression, evaluated once with no input document, must be an array of
/// objects; they are the pipeline's documents.
fn documents(e: &Expr) -> DocResult<DocIter> {
    let items = match e.eval_root(&Document::new())? {
        Some(Bson::Array(a)) => a,
        other => {
            return Err(stage_err(
                5858203,
                format!(
                    "$documents must evaluate to an array of objects, but it evaluated to: {}",
                    other.as_ref().map(type_name).unwrap_or("missing")
                ),
            ))
        }
    };
    let docs = items
        .into_iter()
        .map(|v| match v {
            Bson::Document(d) => Ok(d),
            other => Err(stage_err(
                40228,
                format!(
                    "'replacement document' must evaluate to an object, but resulting value was: {}. Type of resulting value: '{}'.",
                    shell_repr(&other),
                    type_name(&other)
                ),
            )),
        })
        .collect::<DocResult<Vec<_>>>()?;
    Ok(Box::new(docs.into_iter().map(Ok)))
}

/// The storage a writing stage writes through, or a clear refusal where there is none.
fn sink<'a>(env: Env<'a>, stage: &str) -> DocResult<&'a dyn CollectionSink> {
    env.source.sink().ok_or_else(|| {
        DocError::illegal_operation(format!("{stage} cannot write from this pipeline"))
    })
}

/// Whether a stage can return documents nested deeper than its input.
fn stage_may_deepen(s: &Stage) -> bool {
    matches!(
        s,
        Stage::Project(_)
            | Stage::AddFields(_)
            | Stage::Group(..)
            | Stage::Lookup(_)
            | Stage::Facet(_)
            | Stage::GraphLookup(_)
            | Stage::SetWindowFields(_)
            | Stage::Bucket(_)
            | Stage::BucketAuto(_)
            | Stage::ReplaceRoot(_)
            | Stage::SortByCount(_)
    )
}

fn project(p: &Projection, d: &Document) -> DocResult<Document> {
    p.apply_with_position(d, None)
}
