//! Explain of an aggregation, in mongod's shape (what Compass's explain plan reads): the
//! collection's scan as the `$cursor` stage (`queryPlanner`, and `executionStats` unless the
//! verbosity is `queryPlanner`), then the pipeline's other stages, each with the documents it
//! returned when the verbosity executes; a pipeline the scan answers whole (nothing but a
//! `$match`) is explained as a find, with a top-level `queryPlanner`. The server's own fields
//! (`explainVersion`, `command`, `serverInfo`) are added by [`decorate`].

use super::args::{get_doc, interrupt_for, let_scope};
use super::call::Call;
use crate::build_info::{hostname, VERSION};
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use docdb::{DocResult, FindQuery};
use std::time::Instant;

/// The explain verbosities, as mongod names them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verbosity {
    QueryPlanner,
    Executes,
}

/// The explain of `aggregate` command `agg` on the collection `coll` (None: a pipeline on the
/// database, which has no scan).
pub(crate) fn aggregate(
    call: &Call,
    agg: &Document,
    coll: Option<&str>,
    pipeline: &[Document],
    verbosity: Verbosity,
) -> DocResult<Document> {
    let Some(coll) = coll else {
        let stages = pipeline
            .iter()
            .cloned()
            .map(Bson::Document)
            .collect::<Vec<_>>();
        return Ok(doc! {"stages": stages});
    };
    query::aggregate::validate_pipeline(pipeline)?;
    let (filter, rest) = match pipeline.first().and_then(|s| s.get_document("$match").ok()) {
        Some(f) if pipeline[0].len() == 1 => (f.clone(), &pipeline[1..]),
        _ => (Document::new(), pipeline),
    };
    let q = FindQuery {
        filter,
        hint: agg.get("hint").cloned(),
        collation: get_doc(agg, "collation")?,
        interrupt: interrupt_for(agg)?,
        ..Default::default()
    };
    let mut scan = call.dbx().explain_find(call.db, coll, &q)?;
    if verbosity == Verbosity::QueryPlanner {
        strip_execution(&mut scan);
    }
    if rest.is_empty() {
        // The whole pipeline is the scan's: mongod explains it as a find.
        return Ok(scan);
    }
    let mut stages = match scan.remove("stages") {
        // A view: its own resolved stages come first.
        Some(Bson::Array(view_stages)) => view_stages,
        _ => vec![Bson::Document(doc! {"$cursor": scan})],
    };
    let counts = match verbosity {
        Verbosity::QueryPlanner => Vec::new(),
        Verbosity::Executes => {
            stage_counts(call, agg, coll, pipeline, pipeline.len() - rest.len())?
        }
    };
    for (i, stage) in rest.iter().enumerate() {
        let mut shown = stage.clone();
        if let Some((n, ms)) = counts.get(i) {
            shown.insert("nReturned", *n);
            shown.insert("executionTimeMillisEstimate", *ms);
        }
        stages.push(Bson::Document(shown));
    }
    Ok(doc! {"stages": stages})
}

/// For each stage after the first `skip`, the documents the pipeline up to it returns and the
/// time that took, from running each prefix (a stage that writes, `$out` or `$merge`, is
/// never run by an explain: it and what follows get no figures).
fn stage_counts(
    call: &Call,
    agg: &Document,
    coll: &str,
    pipeline: &[Document],
    skip: usize,
) -> DocResult<Vec<(i64, i64)>> {
    let mut out = Vec::new();
    for end in skip + 1..=pipeline.len() {
        let last = &pipeline[end - 1];
        if last.contains_key("$out") || last.contains_key("$merge") {
            break;
        }
        let opts = docdb::AggregateOpts {
            interrupt: interrupt_for(agg)?,
            collation: get_doc(agg, "collation")?,
            current_ops: None,
            hint: agg.get("hint").cloned(),
            vars: let_scope(agg)?,
            bypass_validation: false,
        };
        let started = Instant::now();
        let mut n = 0i64;
        for d in call
            .dbx()
            .aggregate(call.db, coll, &pipeline[..end], &opts)?
        {
            d?;
            n += 1;
        }
        let ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        out.push((n, ms));
    }
    Ok(out)
}

/// queryPlanner verbosity: the plan only, as mongod (a view's `$cursor` stage too).
pub(crate) fn strip_execution(out: &mut Document) {
    out.remove("executionStats");
    if let Ok(stages) = out.get_array_mut("stages") {
        if let Some(Bson::Document(first)) = stages.first_mut() {
            if let Ok(scan) = first.get_document_mut("$cursor") {
                scan.remove("executionStats");
            }
        }
    }
}

/// Adds what every explain reply carries: `explainVersion`, the explained `command` (with its
/// `$db`) and `serverInfo`.
pub(crate) fn decorate(out: &mut Document, state: &ServerState, db: &str, command: &Document) {
    let mut command = command.clone();
    command.insert("$db", db);
    out.insert("command", command);
    out.insert(
        "serverInfo",
        doc! {
            "host": hostname(),
            "port": i32::from(state.config().net.port),
            "version": VERSION,
            "gitVersion": "flashdoc",
        },
    );
    out.insert("explainVersion", "1");
}
