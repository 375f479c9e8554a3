//! The read commands: find, count, distinct, aggregate and explain.

use super::args::{
    batch_size, coll_name, count_bson, doc_array, flag, get_doc, get_doc_list, get_i64, hint,
    interrupt_for, let_scope,
};
use super::batch::{cursor_reply, CursorOpts, DEFAULT_FIRST_BATCH};
use super::call::Call;
use super::explain;
use super::fields::check_fields;
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult, FindQuery};
use std::sync::Arc;

pub(crate) fn find(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let q = find_query(cmd)?;
    let limit = q.limit;
    let opts = CursorOpts {
        single: flag(cmd, "singleBatch")? || limit.is_some_and(|l| l < 0),
        no_timeout: flag(cmd, "noCursorTimeout")?,
        tailable: q.tailable,
        await_data: flag(cmd, "awaitData")?,
        interrupt: q.interrupt.clone(),
        resume_token: None,
    };
    if opts.await_data && !opts.tailable {
        return Err(DocError::failed_to_parse(
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    if opts.tailable && opts.single {
        // mongod's rule: a single batch (or a negative limit) closes the cursor.
        return Err(DocError::bad_value(
            "cannot use tailable option with the 'singleBatch' option",
        ));
    }
    let cursor = dbx.find(db, coll, &q)?;
    let first = batch_size(cmd, "batchSize")?.unwrap_or(DEFAULT_FIRST_BATCH);
    cursor_reply(
        state,
        &format!("{db}.{coll}"),
        cursor,
        first,
        opts,
        "firstBatch",
    )
}

pub(crate) fn count(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let q = FindQuery {
        filter: get_doc(cmd, "query")?.unwrap_or_default(),
        skip: match get_i64(cmd, "skip")? {
            Some(s) if s < 0 => {
                return Err(DocError::bad_value("skip value is negative in count query"))
            }
            s => s.unwrap_or(0) as u64,
        },
        limit: get_i64(cmd, "limit")?,
        hint: cmd.get("hint").cloned(),
        collation: get_doc(cmd, "collation")?,
        interrupt: interrupt_for(cmd)?,
        ..Default::default()
    };
    let n = dbx.count(db, coll, &q)?;
    Ok(doc! {"n": count_bson(n)})
}

pub(crate) fn distinct(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let key = cmd
        .get_str("key")
        .map_err(|_| DocError::failed_to_parse("distinct needs a string 'key'"))?;
    let q = FindQuery {
        filter: get_doc(cmd, "query")?.unwrap_or_default(),
        hint: cmd.get("hint").cloned(),
        collation: get_doc(cmd, "collation")?,
        interrupt: interrupt_for(cmd)?,
        ..Default::default()
    };
    let values = dbx.distinct(db, coll, key, &q)?;
    Ok(doc! {"values": values})
}

pub(crate) fn aggregate(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let db = call.db;
    let cmd = call.cmd;
    let conn = call.conn;
    let dbx = call.dbx();
    let pipeline = get_doc_list(cmd, "pipeline")?
        .ok_or_else(|| DocError::failed_to_parse("aggregate needs a 'pipeline' array"))?;
    check_api_strict_stages(cmd, &pipeline)?;
    let coll = match cmd.get("aggregate") {
        Some(Bson::String(s)) => Some(s.clone()),
        Some(n @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)))
            if query::compare::Num::of(n).is_some_and(|n| n.as_f64() == 1.0) =>
        {
            None
        }
        _ => {
            return Err(DocError::type_mismatch(
                "aggregate needs a collection name, or 1 for a pipeline without one",
            ))
        }
    };
    if cmd.get_bool("explain").unwrap_or(false) {
        // `aggregate` with `explain: true` is mongod's queryPlanner verbosity.
        let mut out = explain::aggregate(
            call,
            cmd,
            coll.as_deref(),
            &pipeline,
            explain::Verbosity::QueryPlanner,
        )?;
        let mut command = cmd.clone();
        command.remove("explain");
        command.remove("$db");
        explain::decorate(&mut out, state, db, &command);
        return Ok(out);
    }
    let cursor_opts = get_doc(cmd, "cursor")?.unwrap_or_default();
    check_fields(cursor_opts.keys(), "cursor", &["batchSize"], &[], &[])?;
    let asked = batch_size(&cursor_opts, "batchSize")?;
    if pipeline
        .first()
        .is_some_and(|s| s.contains_key("$changeStream"))
    {
        return super::change_stream::open(call, coll.as_deref(), &pipeline, asked);
    }
    let first = asked.unwrap_or(DEFAULT_FIRST_BATCH);
    // The pipeline runs to its end on this thread: its stages read allowDiskUse from it.
    let disk_use = match cmd.get("allowDiskUse") {
        None => None,
        Some(_) => Some(flag(cmd, "allowDiskUse")?),
    };
    let _disk_use = query::aggregate::budget::DiskUseScope::enter(disk_use);
    let mut opts = docdb::AggregateOpts {
        interrupt: interrupt_for(cmd)?,
        collation: get_doc(cmd, "collation")?,
        current_ops: None,
        hint: cmd.get("hint").cloned(),
        vars: let_scope(cmd)?,
        bypass_validation: flag(cmd, "bypassDocumentValidation")?,
    };
    let (cursor, ns) = match &coll {
        Some(coll) => (
            dbx.aggregate(db, coll, &pipeline, &opts)?,
            format!("{db}.{coll}"),
        ),
        None => {
            opts.current_ops = Some(Arc::new(OpsSource {
                state: state.clone(),
                users: crate::ops::users_of(conn),
            }));
            (
                dbx.aggregate_database(db, &pipeline, &opts)?,
                format!("{db}.$cmd.aggregate"),
            )
        }
    };
    if super::args::write_opts(cmd)?.journal {
        // The write concern asks for the pipeline's writes on disk before the reply.
        dbx.engine().checkpoint().map_err(docdb::storage_error)?;
    }
    cursor_reply(
        state,
        &ns,
        cursor,
        first,
        CursorOpts {
            interrupt: opts.interrupt,
            ..Default::default()
        },
        "firstBatch",
    )
}

/// The stages mongod keeps out of API Version 1 (`AllowedWithApiStrict::kNeverInVersion1`):
/// with `apiStrict: true` a pipeline naming one is refused (APIStrictError).
const STAGES_OUTSIDE_API_V1: &[&str] = &[
    "$collStats",
    "$currentOp",
    "$indexStats",
    "$listLocalSessions",
    "$listSessions",
    "$planCacheStats",
];

fn check_api_strict_stages(cmd: &Document, pipeline: &[Document]) -> DocResult<()> {
    if !flag(cmd, "apiStrict")? {
        return Ok(());
    }
    let outside = pipeline
        .iter()
        .filter_map(|s| s.keys().next())
        .find(|k| STAGES_OUTSIDE_API_V1.contains(&k.as_str()));
    match outside {
        Some(stage) => Err(DocError::with_code(
            323,
            "APIStrictError",
            format!("{stage} is not allowed with 'apiStrict: true' in API Version 1"),
        )),
        None => Ok(()),
    }
}

pub(crate) fn explain(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let inner = get_doc(cmd, "explain")?
        .ok_or_else(|| DocError::failed_to_parse("explain needs a command document"))?;
    let verbosity = match cmd.get("verbosity") {
        None => "allPlansExecution",
        Some(Bson::String(v))
            if ["queryPlanner", "executionStats", "allPlansExecution"]
                .contains(&v.as_str()) =>
        {
            v.as_str()
        }
        Some(_) => {
            return Err(DocError::failed_to_parse(
                "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}",
            ))
        }
    };
    let inner_name = inner.keys().next().cloned().unwrap_or_default();
    if inner_name == "aggregate" {
        return explain_aggregate(call, &inner, verbosity);
    }
    let q = match inner_name.as_str() {
        "find" => find_query(&inner)?,
        "update" | "delete" | "findAndModify" => explained_write_query(&inner_name, &inner)?,
        "count" | "distinct" => {
            let filter = inner
                .get_document("query")
                .or_else(|_| inner.get_document("filter"))
                .cloned()
                .unwrap_or_default();
            FindQuery {
                filter,
                ..Default::default()
            }
        }
        other => {
            return Err(DocError::command_not_found(format!(
                "Explain is not supported for command '{other}'"
            )))
        }
    };
    let coll = coll_name(&inner, &inner_name)?;
    let mut out = dbx.explain_find(db, &coll, &q)?;
    // As mongod: queryPlanner verbosity reports the plan only; the others execute.
    // A view's read is explained as its aggregation, the scan in its `$cursor` stage.
    if verbosity == "queryPlanner" {
        explain::strip_execution(&mut out);
    }
    explain::decorate(&mut out, state, db, &inner);
    Ok(out)
}

/// `explain: {aggregate: ...}`: the pipeline's explain (`explain.rs`).
fn explain_aggregate(call: &Call, inner: &Document, verbosity: &str) -> DocResult<Document> {
    let pipeline = get_doc_list(inner, "pipeline")?
        .ok_or_else(|| DocError::failed_to_parse("aggregate needs a 'pipeline' array"))?;
    let coll = match inner.get("aggregate") {
        Some(Bson::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let verbosity = match verbosity {
        "queryPlanner" => explain::Verbosity::QueryPlanner,
        _ => explain::Verbosity::Executes,
    };
    let mut out = explain::aggregate(call, inner, coll, &pipeline, verbosity)?;
    explain::decorate(&mut out, call.state, call.db, inner);
    Ok(out)
}

/// The query an explained write plans: its one statement's filter and hint (a findAndModify's
/// own, with its sort), with the command's `let`.
fn explained_write_query(name: &str, inner: &Document) -> DocResult<FindQuery> {
    let (stmt, filter_field, what) = match name {
        "findAndModify" => (inner.clone(), "query", name.to_string()),
        _ => {
            let list = if name == "update" {
                "updates"
            } else {
                "deletes"
            };
            let mut stmts = doc_array(inner, list)?;
            if stmts.len() != 1 {
                return Err(DocError::with_code(
                    342,
                    "InvalidLength",
                    "explained write batches must be of size 1",
                ));
            }
            (stmts.remove(0), "q", format!("{name}.{list}"))
        }
    };
    Ok(FindQuery {
        filter: get_doc(&stmt, filter_field)?.unwrap_or_default(),
        sort: if name == "findAndModify" {
            get_doc(inner, "sort")?
        } else {
            None
        },
        hint: hint(&stmt, &what)?,
        vars: let_scope(inner)?,
        ..Default::default()
    })
}

fn find_query(cmd: &Document) -> DocResult<FindQuery> {
    Ok(FindQuery {
        filter: get_doc(cmd, "filter")?.unwrap_or_default(),
        projection: get_doc(cmd, "projection")?,
        sort: get_doc(cmd, "sort")?,
        skip: match get_i64(cmd, "skip")? {
            Some(s) if s < 0 => return Err(DocError::bad_value("skip value must be non-negative")),
            s => s.unwrap_or(0) as u64,
        },
        limit: get_i64(cmd, "limit")?.filter(|&l| l != 0),
        hint: cmd.get("hint").cloned(),
        interrupt: interrupt_for(cmd)?,
        collation: get_doc(cmd, "collation")?,
        tailable: flag(cmd, "tailable")?,
        vars: let_scope(cmd)?,
        min: get_doc(cmd, "min")?.filter(|d| !d.is_empty()),
        max: get_doc(cmd, "max")?.filter(|d| !d.is_empty()),
        return_key: flag(cmd, "returnKey")?,
        show_record_id: flag(cmd, "showRecordId")?,
    })
}

/// What `$currentOp` reads: the server's operation registry, as seen by the caller's users.
struct OpsSource {
    state: Arc<ServerState>,
    users: Vec<(String, String)>,
}

impl docdb::CurrentOps for OpsSource {
    fn current_ops(&self, spec: &query::aggregate::CurrentOpSpec) -> DocResult<Vec<Document>> {
        if spec.idle_cursors {
            return Err(DocError::with_code(
                238,
                "NotImplemented",
                "$currentOp option 'idleCursors: true' is not supported by flashdoc (open cursors are not listed)",
            ));
        }
        // A standalone keeps no server-side sessions (idleSessions has none to add), and
        // every operation is local (localOps changes nothing).
        let listing = crate::ops::Listing {
            only_users: (!spec.all_users).then(|| self.users.clone()),
            idle_connections: spec.idle_connections,
        };
        Ok(self.state.ops.list_with(&listing))
    }

    /// mongod's rule: the caller's own sessions unless `allUsers` or `users` say whose
    /// (listing others' needs the `listSessions` privilege, which the guard checks).
    fn local_sessions(
        &self,
        spec: &query::aggregate::ListSessionsSpec,
    ) -> DocResult<Vec<Document>> {
        let owners: Option<Vec<[u8; 32]>> = if spec.all_users {
            None
        } else if spec.users.is_empty() {
            Some(vec![crate::sessions::user_digest(self.users.first())])
        } else {
            Some(
                spec.users
                    .iter()
                    .map(|u| crate::sessions::user_digest(Some(u)))
                    .collect(),
            )
        };
        Ok(self
            .state
            .sessions
            .list(owners.as_deref(), bson::DateTime::now()))
    }
}
