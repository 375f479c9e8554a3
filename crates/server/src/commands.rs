//! Command dispatch: every command a driver, mongosh or a tool sends to a standalone mongod,
//! answered in mongod's reply shapes (shared/notes/wire-and-peers.md §2).

use crate::auth;
use crate::config::{Authorization, ParamError};
use crate::cursors::CursorEntry;
use crate::hook::CommandCall;
use crate::state::{ConnInfo, ServerState};
use bson::{doc, spec::BinarySubtype, Bson, Document};
use docdb::db::{scaled, COLL_STATS_SIZES, DB_STATS_SIZES};
use docdb::Interrupt;
use docdb::{
    DeleteStatement, DocCursor, DocError, DocResult, FindAndModify, FindQuery, UpdateStatement,
    WriteOpts, WriteOutcome,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default first batch: 101 documents (or 16 MB), as mongod.
const DEFAULT_FIRST_BATCH: usize = 101;
/// Reply batches stop growing past this many bytes.
const BATCH_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;

pub const VERSION: &str = "7.0.14";

/// What the connection loop should do after a reply.
pub enum After {
    Continue,
    Shutdown,
}

/// Runs one command and returns its reply document (errors become `ok: 0` replies).
pub fn run(state: &Arc<ServerState>, cmd: &Document, conn: &ConnInfo) -> (Document, After) {
    let name = match cmd.keys().next() {
        Some(n) => n.clone(),
        None => {
            return (
                error_reply(&DocError::failed_to_parse("empty command document")),
                After::Continue,
            )
        }
    };
    let db = match cmd.get("$db") {
        Some(Bson::String(s)) => s.clone(),
        Some(_) => {
            return (
                error_reply(&DocError::type_mismatch("$db must be a string")),
                After::Continue,
            )
        }
        None => "admin".to_string(),
    };
    state.count_command(&name);
    crate::log::debug(1, "COMMAND", &format!("conn{} {db}: {name}", conn.id));
    let started = Instant::now();
    // Listed in currentOp until it replies; a bad maxTimeMS is the command's own error.
    let budget = max_time(cmd).ok().flatten();
    let _running = state
        .ops
        .begin(&name, &db, cmd, conn, Interrupt::new(budget));
    // What the command's scans examine, for the profiler.
    let scans = docdb::cursor::watch();
    let (reply, after) = match guard(state, &name, &db, cmd, conn) {
        Err(e) => (error_reply(&e), After::Continue),
        Ok(()) => match run_hook(state, &name, &db, cmd, conn) {
            Some(reply) => (reply, After::Continue),
            None => {
                let (mut reply, after) = finish(dispatch(state, &name, &db, cmd, conn));
                if let Some(hook) = state.hook() {
                    hook.amend_reply(&name, &mut reply);
                }
                (reply, after)
            }
        },
    };
    let ms = started.elapsed().as_millis().min(i64::MAX as u128) as i64;
    if state.profiler.is_slow_sampled(ms) {
        crate::log::info(
            "COMMAND",
            &format!("Slow query: conn{} {db}: {name} took {ms} ms", conn.id),
        );
    }
    let finished = crate::profile::Finished {
        name: &name,
        db: &db,
        cmd,
        reply: &reply,
        conn,
        millis: ms,
        scans: scans.totals(),
    };
    drop(scans);
    state.profiler.record(state.db(), &finished);
    (reply, after)
}

/// The hook's answer to a command that passed the guard, if it answers it.
fn run_hook(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> Option<Document> {
    let call = CommandCall {
        name,
        db,
        cmd,
        state,
        conn,
    };
    state.hook()?.run(&call)
}

/// The built-in implementation of one command, for a hook that wraps it (the guard has run).
pub(crate) fn run_builtin(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> Document {
    finish(dispatch(state, name, db, cmd, conn)).0
}

fn finish(res: DocResult<(Document, After)>) -> (Document, After) {
    match res {
        Ok((mut reply, after)) => {
            if !reply.contains_key("ok") {
                reply.insert("ok", 1.0);
            }
            (reply, after)
        }
        Err(e) => (error_reply(&e), After::Continue),
    }
}

/// Checks before a command runs: authorization (when enabled), and that nobody reads or
/// writes the user collection except through the user commands.
fn guard(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<()> {
    if state.config().security.authorization == Authorization::Enabled
        && !lists_authorized_collections(name, db, cmd, conn)?
    {
        auth::authorize(state, conn, name, db)?;
        if name == "aggregate" {
            auth::authorize_pipeline_writes(conn, db, cmd)?;
            if lists_all_users_ops(cmd) {
                // Other users' operations need the `inprog` privilege, as `currentOp`'s.
                auth::authorize(state, conn, "currentOp", db)?;
            }
        }
    }
    let target = cmd.get(name).and_then(Bson::as_str);
    let users_ns = format!("{}.{}", auth::USERS_DB, auth::USERS_COLL);
    let renames_users = name == "renameCollection"
        && (target == Some(users_ns.as_str()) || cmd.get_str("to").ok() == Some(users_ns.as_str()));
    if renames_users
        || (db == auth::USERS_DB && target == Some(auth::USERS_COLL) && name != "listIndexes")
    {
        return Err(DocError::with_code(
            13,
            "Unauthorized",
            format!("{db}.{} is managed by the user commands (createUser, updateUser, dropUser, usersInfo)", auth::USERS_COLL),
        ));
    }
    Ok(())
}

/// Whether an aggregate starts with `$currentOp: {allUsers: true}`.
fn lists_all_users_ops(cmd: &Document) -> bool {
    let first = cmd
        .get_array("pipeline")
        .ok()
        .and_then(|p| p.first())
        .and_then(Bson::as_document);
    first
        .and_then(|s| s.get_document("$currentOp").ok())
        .is_some_and(|o| o.get_bool("allUsers") == Ok(true))
}

/// `listCollections` with `authorizedCollections` and `nameOnly` needs no listCollections
/// action, only some privilege on the database; it then lists every collection of it (roles
/// grant whole databases). Without authorization the option has nothing to filter.
fn lists_authorized_collections(
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<bool> {
    Ok(name == "listCollections"
        && flag(cmd, "authorizedCollections")?
        && flag(cmd, "nameOnly")?
        && auth::has_privilege_on_db(conn, db))
}

pub fn error_reply(e: &DocError) -> Document {
    let mut d =
        doc! {"ok": 0.0, "errmsg": e.message.clone(), "code": e.code, "codeName": e.code_name};
    if let Some(extra) = &e.extra {
        for (k, v) in extra.iter() {
            d.insert(k.clone(), v.clone());
        }
    }
    d
}

fn dispatch(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<(Document, After)> {
    let ok = |d: Document| Ok((d, After::Continue));
    let dbx = state.db();
    let hook_fields = state.hook().map_or(&[][..], |h| h.command_fields(name));
    check_generic_fields(name, cmd, hook_fields)?;
    if let Some((known, not_implemented)) = command_fields(name) {
        let generic: &[&[&str]] = &[GENERIC_FIELDS, hook_fields];
        check_fields(cmd.keys().skip(1), name, known, not_implemented, generic)?;
    }
    match name {
        "hello" | "isMaster" | "ismaster" => ok(hello(state, name, cmd, conn)?),
        "ping" => ok(doc! {}),
        "buildInfo" | "buildinfo" => ok(build_info()),
        "getParameter" => get_parameter(state, cmd).map(|d| (d, After::Continue)),
        "setParameter" => set_parameter(state, cmd).map(|d| (d, After::Continue)),
        "getLog" => ok(doc! {"totalLinesWritten": 0, "log": []}),
        "currentOp" => ok(current_op(state, cmd, conn)?),
        "killOp" => {
            let opid = match cmd.get("op") {
                Some(Bson::Int32(n)) => *n,
                Some(Bson::Int64(n)) => i32::try_from(*n)
                    .map_err(|_| DocError::bad_value(format!("op out of range: {n}")))?,
                Some(Bson::Double(f)) if f.fract() == 0.0 && f.abs() <= i32::MAX as f64 => {
                    *f as i32
                }
                Some(_) => return Err(DocError::type_mismatch("op must be a number")),
                None => {
                    return Err(DocError::failed_to_parse(
                        "BSON field 'killOp.op' is missing but a required field",
                    ))
                }
            };
            state.ops.kill(opid);
            ok(doc! {"info": "attempting to kill op"})
        }
        "hostInfo" => ok(host_info()),
        "whatsmyuri" => ok(doc! {"you": conn.peer.to_string()}),
        "connectionStatus" => ok(auth::auth_info(conn)),
        "saslStart" => ok(auth::sasl_start(state, conn, db, cmd)?),
        "saslContinue" => ok(auth::sasl_continue(state, conn, cmd)?),
        "authenticate" => Err(DocError::with_code(
            334,
            "MechanismUnavailable",
            "only SCRAM-SHA-1 and SCRAM-SHA-256 (saslStart) are supported",
        )),
        "logout" => {
            conn.auth.lock().users.retain(|u| u.db != db);
            ok(doc! {})
        }
        "createUser" => ok(auth::create_user(dbx, db, cmd)?),
        "updateUser" => ok(auth::update_user(dbx, db, cmd)?),
        "dropUser" => ok(auth::drop_user(dbx, db, cmd)?),
        "usersInfo" => ok(auth::users_info(dbx, db, cmd)?),
        "grantRolesToUser" => ok(auth::change_roles(dbx, db, cmd, true)?),
        "revokeRolesFromUser" => ok(auth::change_roles(dbx, db, cmd, false)?),
        "getCmdLineOpts" => ok(
            doc! {"argv": std::env::args().collect::<Vec<_>>(), "parsed": state.parsed_options()},
        ),
        "listCommands" => ok(list_commands()),
        "serverStatus" => ok(state.server_status()),
        "endSessions" | "startSession" | "refreshSessions" | "killSessions" | "killAllSessions" => {
            if name == "startSession" {
                let id = bson::Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: new_uuid().to_vec(),
                };
                return ok(doc! {"id": {"id": id}, "timeoutMinutes": 30});
            }
            ok(doc! {})
        }
        "commitTransaction" | "abortTransaction" => Err(DocError::illegal_operation(
            "Transaction numbers are only allowed on a replica set member or mongos",
        )),
        "shutdown" => Ok((doc! {}, After::Shutdown)),
        "fsync" => {
            dbx.engine().checkpoint().map_err(docdb::storage_error)?;
            ok(doc! {"numFiles": 1})
        }

        // CRUD
        "insert" => {
            let coll = coll_name(cmd, name)?;
            let docs = doc_array(cmd, "documents")?;
            let out = dbx.insert(db, &coll, docs, write_opts(cmd)?);
            ok(write_reply(out, false))
        }
        "update" => {
            let coll = coll_name(cmd, name)?;
            let stmts = doc_array(cmd, "updates")?
                .into_iter()
                .map(parse_update_statement)
                .collect::<DocResult<Vec<_>>>()?;
            let out = dbx.update(db, &coll, &stmts, write_opts(cmd)?);
            ok(write_reply(out, true))
        }
        "delete" => {
            let coll = coll_name(cmd, name)?;
            let stmts = doc_array(cmd, "deletes")?
                .into_iter()
                .map(parse_delete_statement)
                .collect::<DocResult<Vec<_>>>()?;
            let out = dbx.delete(db, &coll, &stmts, write_opts(cmd)?);
            ok(write_reply(out, false))
        }
        "find" => {
            let coll = coll_name(cmd, name)?;
            let q = find_query(cmd)?;
            let limit = q.limit;
            let opts = CursorOpts {
                single: flag(cmd, "singleBatch")? || limit.is_some_and(|l| l < 0),
                no_timeout: flag(cmd, "noCursorTimeout")?,
                tailable: q.tailable,
                await_data: flag(cmd, "awaitData")?,
                interrupt: q.interrupt.clone(),
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
            let cursor = dbx.find(db, &coll, &q)?;
            let first = batch_size(cmd, "batchSize")?.unwrap_or(DEFAULT_FIRST_BATCH);
            ok(cursor_reply(
                state,
                &format!("{db}.{coll}"),
                cursor,
                first,
                opts,
                "firstBatch",
            )?)
        }
        "getMore" => {
            let id = match cmd.get("getMore") {
                Some(Bson::Int64(i)) => *i,
                _ => return Err(DocError::type_mismatch("getMore cursor id must be a long")),
            };
            let coll = cmd
                .get_str("collection")
                .map_err(|_| DocError::type_mismatch("collection must be a string"))?;
            let size = batch_size(cmd, "batchSize")?;
            let await_ms = max_time(cmd)?;
            get_more(state, id, db, coll, size, await_ms).map(|d| (d, After::Continue))
        }
        "killCursors" => {
            let ids = cmd
                .get_array("cursors")
                .map_err(|_| DocError::type_mismatch("cursors must be an array"))?;
            let (mut killed, mut not_found) = (vec![], vec![]);
            for id in ids {
                let Bson::Int64(id) = id else {
                    return Err(DocError::type_mismatch("cursor ids must be longs"));
                };
                if state.cursors().kill(*id) {
                    killed.push(Bson::Int64(*id));
                } else {
                    not_found.push(Bson::Int64(*id));
                }
            }
            ok(
                doc! {"cursorsKilled": killed, "cursorsNotFound": not_found, "cursorsAlive": [], "cursorsUnknown": []},
            )
        }
        "findAndModify" | "findandmodify" => {
            let coll = coll_name(cmd, name)?;
            let spec = FindAndModify {
                query: get_doc(cmd, "query")?.unwrap_or_default(),
                sort: get_doc(cmd, "sort")?,
                remove: truthy(cmd.get("remove")),
                update: cmd.get("update").cloned(),
                new: truthy(cmd.get("new")),
                fields: get_doc(cmd, "fields")?,
                upsert: truthy(cmd.get("upsert")),
                array_filters: get_doc_list(cmd, "arrayFilters")?,
                journal: write_opts(cmd)?.journal,
                collation: get_doc(cmd, "collation")?,
                interrupt: interrupt_for(cmd)?,
                bypass_validation: flag(cmd, "bypassDocumentValidation")?,
            };
            if spec.remove == spec.update.is_some() {
                return Err(DocError::failed_to_parse(
                    "Either an update or remove=true must be specified",
                ));
            }
            let out = dbx.find_and_modify(db, &coll, &spec)?;
            let mut leo = doc! {"n": count_bson(out.n), "updatedExisting": out.updated_existing};
            if let Some(id) = out.upserted {
                leo.insert("upserted", id);
            }
            ok(
                doc! {"lastErrorObject": leo, "value": out.value.map(Bson::Document).unwrap_or(Bson::Null)},
            )
        }
        "count" => {
            let coll = coll_name(cmd, name)?;
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
            let n = dbx.count(db, &coll, &q)?;
            ok(doc! {"n": count_bson(n)})
        }
        "distinct" => {
            let coll = coll_name(cmd, name)?;
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
            let values = dbx.distinct(db, &coll, key, &q)?;
            ok(doc! {"values": values})
        }
        "aggregate" => {
            let pipeline = get_doc_list(cmd, "pipeline")?
                .ok_or_else(|| DocError::failed_to_parse("aggregate needs a 'pipeline' array"))?;
            if pipeline
                .first()
                .is_some_and(|s| s.contains_key("$changeStream"))
            {
                // A standalone has no oplog; mongod answers 40573 whatever the target.
                return Err(DocError::with_code(
                    40573,
                    "Location40573",
                    "The $changeStream stage is only supported on replica sets",
                ));
            }
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
                return ok(
                    doc! {"stages": pipeline.into_iter().map(Bson::Document).collect::<Vec<_>>()},
                );
            }
            let cursor_opts = get_doc(cmd, "cursor")?.unwrap_or_default();
            check_fields(cursor_opts.keys(), "cursor", &["batchSize"], &[], &[])?;
            let first = batch_size(&cursor_opts, "batchSize")?.unwrap_or(DEFAULT_FIRST_BATCH);
            let mut opts = docdb::AggregateOpts {
                interrupt: interrupt_for(cmd)?,
                collation: get_doc(cmd, "collation")?,
                current_ops: None,
                hint: cmd.get("hint").cloned(),
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
            ok(cursor_reply(
                state,
                &ns,
                cursor,
                first,
                CursorOpts {
                    interrupt: opts.interrupt,
                    ..Default::default()
                },
                "firstBatch",
            )?)
        }
        "explain" => {
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
            let q = match inner_name.as_str() {
                "find" => find_query(&inner)?,
                "count" | "distinct" | "aggregate" | "update" | "delete" | "findAndModify" => {
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
                out.remove("executionStats");
                if let Ok(stages) = out.get_array_mut("stages") {
                    if let Some(Bson::Document(first)) = stages.first_mut() {
                        if let Ok(scan) = first.get_document_mut("$cursor") {
                            scan.remove("executionStats");
                        }
                    }
                }
            }
            let mut command = inner.clone();
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
            ok(out)
        }

        // Catalog
        "create" => {
            let coll = coll_name(cmd, name)?;
            let options = command_options(cmd, hook_fields);
            // Bounded work (one catalog entry): its budget is checked once, before it starts.
            interrupt_for(cmd)?.check()?;
            dbx.create_collection(db, &coll, &options)?;
            ok(doc! {})
        }
        "drop" => {
            let coll = coll_name(cmd, name)?;
            let before = dbx.list_indexes(db, &coll).map(|v| v.len() as i32);
            match dbx.drop_collection(db, &coll) {
                Ok(()) => {
                    ok(doc! {"ns": format!("{db}.{coll}"), "nIndexesWas": before.unwrap_or(0)})
                }
                // Recent servers answer ok for a missing collection.
                Err(e) if e.code == 26 => ok(doc! {}),
                Err(e) => Err(e),
            }
        }
        "dropDatabase" => {
            dbx.drop_database(db)?;
            ok(doc! {"dropped": db})
        }
        "renameCollection" => {
            let from = cmd.get_str("renameCollection").map_err(|_| {
                DocError::type_mismatch("renameCollection must be a namespace string")
            })?;
            let to = cmd
                .get_str("to")
                .map_err(|_| DocError::type_mismatch("'to' must be a namespace string"))?;
            let (fdb, fcoll) = split_ns(from)?;
            let (tdb, tcoll) = split_ns(to)?;
            dbx.rename_collection(fdb, fcoll, tdb, tcoll, flag(cmd, "dropTarget")?)?;
            ok(doc! {})
        }
        "listCollections" => {
            let filter = get_doc(cmd, "filter")?.unwrap_or_default();
            let name_only = flag(cmd, "nameOnly")?;
            // authorizedCollections was read by the guard (it filters nothing: see there).
            flag(cmd, "authorizedCollections")?;
            let matcher = query::matcher::Matcher::new(&filter)?;
            let first = listing_first_batch(cmd)?;
            let interrupt = interrupt_for(cmd)?;
            let mut out = Vec::new();
            for c in dbx.list_collections(db)? {
                interrupt.check()?;
                let kind = c.kind.name();
                let mut d = match (name_only, c.kind) {
                    (true, _) => doc! {"name": c.name.clone(), "type": kind},
                    (false, docdb::CollectionKind::Collection) => {
                        // `system.views` is a listing with no storage of its own: no uuid.
                        let mut info = doc! {"readOnly": false};
                        if let Some(uuid) = c.uuid {
                            info.insert("uuid", uuid);
                        }
                        doc! {
                            "name": c.name.clone(), "type": kind, "options": c.options.clone(),
                            "info": info,
                            "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"},
                        }
                    }
                    // A view: no storage, so no uuid and no _id index.
                    (false, docdb::CollectionKind::View) => doc! {
                        "name": c.name.clone(), "type": kind, "options": c.options.clone(),
                        "info": {"readOnly": true},
                    },
                };
                if matcher.matches(&d) {
                    out.push(std::mem::take(&mut d));
                }
            }
            let cursor = DocCursor::from_docs(out);
            ok(cursor_reply(
                state,
                &format!("{db}.$cmd.listCollections"),
                cursor,
                first,
                CursorOpts::default(),
                "firstBatch",
            )?)
        }
        "listDatabases" => {
            let name_only = flag(cmd, "nameOnly")?;
            flag(cmd, "authorizedDatabases")?; // filters nothing (see command_fields)
            let filter = get_doc(cmd, "filter")?.unwrap_or_default();
            let matcher = query::matcher::Matcher::new(&filter)?;
            let interrupt = interrupt_for(cmd)?;
            let mut total = 0i64;
            let mut list = Vec::new();
            for d in dbx.list_databases()? {
                interrupt.check()?;
                let entry = if name_only {
                    doc! {"name": d.name.clone()}
                } else {
                    doc! {"name": d.name.clone(), "sizeOnDisk": d.size_on_disk as i64, "empty": d.empty}
                };
                if matcher.matches(&entry) {
                    total += d.size_on_disk as i64;
                    list.push(Bson::Document(entry));
                }
            }
            if name_only {
                ok(doc! {"databases": list})
            } else {
                ok(doc! {"databases": list, "totalSize": total, "totalSizeMb": total >> 20})
            }
        }
        "createIndexes" => {
            let coll = coll_name(cmd, name)?;
            if cmd.contains_key("commitQuorum") {
                // A standalone has no replica set members to wait for (mongod's answer).
                return Err(DocError::bad_value(
                    "Standalones can't specify commitQuorum",
                ));
            }
            let specs = doc_array(cmd, "indexes")?;
            let out = dbx.create_indexes_until(db, &coll, &specs, &interrupt_for(cmd)?)?;
            let mut d = doc! {
                "numIndexesBefore": out.num_indexes_before,
                "numIndexesAfter": out.num_indexes_after,
                "createdCollectionAutomatically": out.created_collection_automatically,
            };
            if let Some(n) = out.note {
                d.insert("note", n);
            }
            ok(d)
        }
        "listIndexes" => {
            let coll = coll_name(cmd, name)?;
            let first = listing_first_batch(cmd)?;
            let list = dbx.list_indexes(db, &coll)?;
            let cursor = DocCursor::from_docs(list);
            ok(cursor_reply(
                state,
                &format!("{db}.{coll}"),
                cursor,
                first,
                CursorOpts::default(),
                "firstBatch",
            )?)
        }
        "dropIndexes" | "deleteIndexes" => {
            let coll = coll_name(cmd, name)?;
            let which = cmd
                .get("index")
                .cloned()
                .ok_or_else(|| DocError::failed_to_parse("dropIndexes needs 'index'"))?;
            let was = dbx.drop_indexes(db, &coll, &which)?;
            ok(doc! {"nIndexesWas": was})
        }
        "profile" => ok(state.profiler.command(db, cmd)?),
        "collMod" => {
            let coll = coll_name(cmd, name)?;
            let options = command_options(cmd, hook_fields);
            ok(dbx.coll_mod(db, &coll, &options)?)
        }
        "compact" => {
            let coll = coll_name(cmd, name)?;
            ok(dbx.compact(db, &coll, compact_opts(cmd)?)?)
        }
        "collStats" => {
            let coll = coll_name(cmd, name)?;
            let scale = stats_scale(cmd)?;
            let stats = dbx.coll_stats(db, &coll)?;
            ok(scaled(stats, scale, COLL_STATS_SIZES))
        }
        "dbStats" => {
            let scale = stats_scale(cmd)?;
            ok(scaled(dbx.db_stats(db)?, scale, DB_STATS_SIZES))
        }
        "validate" => {
            let coll = coll_name(cmd, name)?;
            for opt in [
                "full",
                "repair",
                "metadata",
                "checkBSONConformance",
                "background",
            ] {
                if flag(cmd, opt)? && opt != "full" {
                    return Err(DocError::with_code(
                        238,
                        "NotImplemented",
                        format!("validate option '{opt}' is not supported by flashdoc"),
                    ));
                }
            }
            // Every validate is full: every block, checksum and index entry is read. So the
            // legacy `scandata: true` is what it does, and `scandata: false` (skip the data)
            // cannot be honoured.
            if cmd.contains_key("scandata") && !flag(cmd, "scandata")? {
                return Err(DocError::with_code(
                    238,
                    "NotImplemented",
                    "validate option 'scandata: false' is not supported by flashdoc: every validate reads all the data",
                ));
            }
            ok(dbx.validate(db, &coll, &interrupt_for(cmd)?)?)
        }
        _ => Err(DocError::command_not_found(format!(
            "no such command: '{name}'"
        ))),
    }
}

fn hello(state: &ServerState, name: &str, cmd: &Document, conn: &ConnInfo) -> DocResult<Document> {
    let mut d = Document::new();
    if name == "hello" {
        d.insert("isWritablePrimary", true);
    } else {
        d.insert("ismaster", true);
    }
    if cmd.contains_key("helloOk") {
        d.insert("helloOk", true);
    }
    d.insert("maxBsonObjectSize", crate::wire::MAX_BSON_OBJECT_SIZE);
    d.insert("maxMessageSizeBytes", crate::wire::MAX_MESSAGE_SIZE);
    d.insert("maxWriteBatchSize", crate::wire::MAX_WRITE_BATCH_SIZE);
    d.insert("localTime", bson::DateTime::now());
    d.insert("logicalSessionTimeoutMinutes", 30);
    d.insert("connectionId", conn.id);
    d.insert("minWireVersion", 0);
    d.insert("maxWireVersion", 21);
    d.insert("readOnly", false);
    // Offer the client's compressors that we support, in its order of preference.
    if let Ok(list) = cmd.get_array("compression") {
        let ours: Vec<Bson> = list
            .iter()
            .filter_map(|c| c.as_str())
            .filter(|c| matches!(*c, "snappy" | "zlib" | "zstd"))
            .map(|c| Bson::String(c.to_string()))
            .collect();
        if !ours.is_empty() {
            d.insert("compression", ours);
        }
    }
    // What the driver needs to pick SCRAM-SHA-256 for this user.
    if let Ok(ns_user) = cmd.get_str("saslSupportedMechs") {
        if let Some(m) = auth::supported_mechs(state, ns_user) {
            d.insert("saslSupportedMechs", m);
        }
    }
    // Speculative authentication: the first step of SCRAM rides on the handshake.
    if let Ok(spec) = cmd.get_document("speculativeAuthenticate") {
        if spec.contains_key("saslStart") {
            let sdb = spec.get_str("db").unwrap_or("admin");
            if let Ok(r) = auth::sasl_start(state, conn, sdb, spec) {
                d.insert("speculativeAuthenticate", r);
            }
        }
    }
    Ok(d)
}

/// `currentOp`: the operations in progress, filtered by the command's other fields (a query
/// on the operation documents, as mongod's), this one included; `$ownOps: true` lists only
/// the caller's users' operations, `$all: true` adds the idle connections.
fn current_op(state: &ServerState, cmd: &Document, conn: &ConnInfo) -> DocResult<Document> {
    let mut filter = Document::new();
    for (k, v) in cmd.iter().skip(1) {
        if GENERIC_FIELDS.contains(&k.as_str()) || k == "$all" || k == "$ownOps" {
            continue;
        }
        filter.insert(k.clone(), v.clone());
    }
    let matcher = query::matcher::Matcher::new(&filter)?;
    let listing = crate::ops::Listing {
        only_users: flag(cmd, "$ownOps")?.then(|| crate::ops::users_of(conn)),
        idle_connections: flag(cmd, "$all")?,
    };
    let inprog: Vec<Bson> = state
        .ops
        .list_with(&listing)
        .into_iter()
        .filter(|op| matcher.matches(op))
        .map(Bson::Document)
        .collect();
    Ok(doc! {"inprog": inprog})
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
}

fn build_info() -> Document {
    let parts: Vec<i32> = VERSION.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    doc! {
        "version": VERSION,
        "gitVersion": "flashdoc",
        "versionArray": [parts[0], parts[1], parts[2], 0],
        "bits": 64,
        "debug": false,
        "maxBsonObjectSize": crate::wire::MAX_BSON_OBJECT_SIZE,
        "modules": [],
        "storageEngines": ["wiredTiger", "inMemory"],
        "javascriptEngine": "none",
        "flashdoc": env!("CARGO_PKG_VERSION"),
    }
}

/// The parameters `getParameter` knows, as they are now.
fn parameters(state: &ServerState) -> Document {
    let p = state.params();
    doc! {
        "featureCompatibilityVersion": {"version": "7.0"},
        "authenticationMechanisms": ["SCRAM-SHA-1", "SCRAM-SHA-256"],
        "ttlMonitorSleepSecs": p.ttl_monitor_sleep_secs as i64,
        "cursorTimeoutMillis": p.cursor_timeout_millis as i64,
        "enableLocalhostAuthBypass": p.enable_localhost_auth_bypass,
        "maxBSONDepth": query::limits::MAX_BSON_DEPTH as i32,
    }
}

fn get_parameter(state: &ServerState, cmd: &Document) -> DocResult<Document> {
    let all = parameters(state);
    if matches!(cmd.get("getParameter"), Some(Bson::String(s)) if s == "*") {
        return Ok(all);
    }
    let mut out = Document::new();
    for k in cmd.keys().skip(1) {
        if GENERIC_FIELDS.contains(&k.as_str()) {
            continue;
        }
        match all.get(k) {
            Some(v) => {
                out.insert(k.clone(), v.clone());
            }
            None => return Err(DocError::invalid_options("no option found to get")),
        }
    }
    if out.is_empty() {
        return Err(DocError::invalid_options("no option found to get"));
    }
    Ok(out)
}

/// `setParameter` at run time: `ttlMonitorSleepSecs` and `cursorTimeoutMillis` (the others
/// are startup-only, as in mongod); values are checked by `Parameters::set_value`.
fn set_parameter(state: &ServerState, cmd: &Document) -> DocResult<Document> {
    let mut p = state.params();
    let mut was = Document::new();
    for (k, v) in cmd.iter().skip(1) {
        if GENERIC_FIELDS.contains(&k.as_str()) {
            continue;
        }
        let old = p.set_value(k, v, false).map_err(|e| match e {
            ParamError::Unknown(m) => DocError::invalid_options(m),
            ParamError::BadValue(m) => DocError::bad_value(m),
        })?;
        was.insert(k.clone(), old);
    }
    if was.is_empty() {
        return Err(DocError::invalid_options("no option found to set"));
    }
    state.set_params(p);
    Ok(doc! {"was": was})
}

fn host_info() -> Document {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as i32)
        .unwrap_or(1);
    // SAFETY: sysconf has no preconditions.
    let mem = unsafe { libc_sysconf_mem() };
    doc! {
        "system": {"currentTime": bson::DateTime::now(), "hostname": hostname(), "cpuAddrSize": 64, "memSizeMB": (mem >> 20) as i64, "numCores": cores, "cpuArch": std::env::consts::ARCH},
        "os": {"type": "Linux", "name": std::env::consts::OS},
        "extra": {},
    }
}

unsafe fn libc_sysconf_mem() -> u64 {
    let pages = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                })
        })
        .unwrap_or(0);
    pages * 1024
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// listCommands: exactly the commands of the authorization table (auth::COMMANDS).
fn list_commands() -> Document {
    let mut cmds = Document::new();
    for (n, action) in auth::COMMANDS {
        let requires_auth = !matches!(action, auth::Action::Open);
        cmds.insert(
            *n,
            doc! {"help": "", "requiresAuth": requires_auth, "secondaryOk": true, "adminOnly": false},
        );
    }
    doc! {"commands": cmds}
}

fn new_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    let oid = bson::oid::ObjectId::new().bytes();
    b[..12].copy_from_slice(&oid);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    b[12..].copy_from_slice(&t.to_le_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// A command's own options (the fields after its name, without the generic ones and the
/// hook's): what the document layer sees of `create` and `collMod`.
fn command_options(cmd: &Document, hook_fields: &[&str]) -> Document {
    cmd.iter()
        .skip(1)
        .filter(|(k, _)| {
            !GENERIC_FIELDS.contains(&k.as_str()) && !hook_fields.contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn truthy(v: Option<&Bson>) -> bool {
    match v {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        _ => false,
    }
}

fn coll_name(cmd: &Document, name: &str) -> DocResult<String> {
    match cmd.get(name) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Bson::String(_)) => Err(DocError::invalid_namespace(
            "Invalid namespace specified: empty collection name",
        )),
        _ => Err(DocError::type_mismatch(format!(
            "collection name has invalid type {}",
            cmd.get(name)
                .map(|b| format!("{:?}", b.element_type()))
                .unwrap_or_else(|| "missing".into())
        ))),
    }
}

fn split_ns(ns: &str) -> DocResult<(&str, &str)> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .ok_or_else(|| DocError::invalid_namespace(format!("Invalid namespace specified '{ns}'")))
}

fn doc_array(cmd: &Document, field: &str) -> DocResult<Vec<Document>> {
    match cmd.get(field) {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(DocError::type_mismatch(format!(
                    "{field} must be an array of objects"
                ))),
            })
            .collect(),
        Some(_) => Err(DocError::type_mismatch(format!("{field} must be an array"))),
        None => Err(DocError::failed_to_parse(format!(
            "BSON field '{field}' is missing but a required field"
        ))),
    }
}

fn get_doc(cmd: &Document, field: &str) -> DocResult<Option<Document>> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d.clone())),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field '{field}' must be an object"
        ))),
    }
}

fn get_doc_list(cmd: &Document, field: &str) -> DocResult<Option<Vec<Document>>> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(_) => doc_array(cmd, field).map(Some),
    }
}

fn get_i64(d: &Document, field: &str) -> DocResult<Option<i64>> {
    match d.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Int32(i)) => Ok(Some(*i as i64)),
        Some(Bson::Int64(i)) => Ok(Some(*i)),
        Some(Bson::Double(f)) if f.fract() == 0.0 => Ok(Some(*f as i64)),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field '{field}' must be a number"
        ))),
    }
}

fn batch_size(d: &Document, field: &str) -> DocResult<Option<usize>> {
    match get_i64(d, field)? {
        Some(n) if n < 0 => Err(DocError::bad_value(format!("{field} must be non-negative"))),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

fn write_opts(cmd: &Document) -> DocResult<WriteOpts> {
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let journal = cmd
        .get_document("writeConcern")
        .map(|wc| {
            truthy(wc.get("j")) || matches!(wc.get("w"), Some(Bson::String(s)) if s == "majority")
        })
        .unwrap_or(false);
    Ok(WriteOpts {
        ordered,
        journal,
        interrupt: interrupt_for(cmd)?,
        bypass_validation: flag(cmd, "bypassDocumentValidation")?,
    })
}

/// A boolean option (mongod also takes numbers); absent is false.
fn flag(cmd: &Document, field: &str) -> DocResult<bool> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(false),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => Ok(truthy(Some(v))),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected a boolean"
        ))),
    }
}

/// collStats' and dbStats' `scale`: a number of at least 1 (a fraction is dropped); 1 if absent.
fn stats_scale(cmd: &Document) -> DocResult<i64> {
    let scale = match cmd.get("scale") {
        None | Some(Bson::Null) => return Ok(1),
        Some(Bson::Int32(n)) => *n as i64,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) if f.is_finite() => f.trunc() as i64,
        Some(_) => return Err(DocError::type_mismatch("scale has to be a number")),
    };
    if scale < 1 {
        return Err(DocError::with_code(
            51024,
            "Location51024",
            "scale has to be >= 1",
        ));
    }
    Ok(scale)
}

/// compact's options. `force` is checked and has nothing to change: it makes a replica set's
/// primary compact, and flashdoc is a standalone or a shard, where compact always runs.
fn compact_opts(cmd: &Document) -> DocResult<docdb::CompactOpts> {
    flag(cmd, "force")?;
    let mb = match cmd.get("freeSpaceTargetMB") {
        None | Some(Bson::Null) => docdb::db::DEFAULT_FREE_SPACE_TARGET_MB as i64,
        Some(Bson::Int32(n)) => *n as i64,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) if f.fract() == 0.0 && f.is_finite() => *f as i64,
        Some(_) => {
            return Err(DocError::type_mismatch(
                "BSON field 'compact.freeSpaceTargetMB' is the wrong type, expected an integer",
            ))
        }
    };
    if !(1..=(1 << 30)).contains(&mb) {
        return Err(DocError::bad_value(format!(
            "freeSpaceTargetMB must be between 1 and 1073741824 (MB), got {mb}"
        )));
    }
    Ok(docdb::CompactOpts {
        dry_run: flag(cmd, "dryRun")?,
        free_space_target: (mb as u64) << 20,
    })
}

/// A listing's (listCollections, listIndexes) first batch: `cursor.batchSize`, else all of it
/// (the rest, if any, is for getMore).
fn listing_first_batch(cmd: &Document) -> DocResult<usize> {
    let opts = get_doc(cmd, "cursor")?.unwrap_or_default();
    check_fields(opts.keys(), "cursor", &["batchSize"], &[], &[])?;
    Ok(batch_size(&opts, "batchSize")?.unwrap_or(usize::MAX))
}

/// `maxTimeMS`: a non-negative integer; 0 or absent is no limit.
fn max_time(cmd: &Document) -> DocResult<Option<Duration>> {
    match get_i64(cmd, "maxTimeMS")? {
        None | Some(0) => Ok(None),
        Some(n) if n < 0 || n > i32::MAX as i64 => Err(DocError::bad_value(format!(
            "{n} value for maxTimeMS is out of range [0, {}]",
            i32::MAX
        ))),
        Some(n) => Ok(Some(Duration::from_millis(n as u64))),
    }
}

/// The command's interruption (killable; with its `maxTimeMS` as budget): the one its
/// listing in `currentOp` holds (`ops::current`), so `killOp` reaches it.
fn interrupt_for(cmd: &Document) -> DocResult<Interrupt> {
    let max_time = max_time(cmd)?;
    Ok(crate::ops::current().unwrap_or_else(|| Interrupt::new(max_time)))
}

fn parse_update_statement(d: Document) -> DocResult<UpdateStatement> {
    check_fields(
        d.keys(),
        "update.updates",
        &["q", "u", "upsert", "multi", "arrayFilters", "collation"],
        &["hint", "c", "sort", "upsertSupplied"],
        &[],
    )?;
    let u = d.get("u").cloned().ok_or_else(|| {
        DocError::failed_to_parse("BSON field 'update.updates.u' is missing but a required field")
    })?;
    Ok(UpdateStatement {
        q: get_doc(&d, "q")?.unwrap_or_default(),
        u,
        upsert: truthy(d.get("upsert")),
        multi: truthy(d.get("multi")),
        array_filters: get_doc_list(&d, "arrayFilters")?,
        collation: get_doc(&d, "collation")?,
    })
}

fn parse_delete_statement(d: Document) -> DocResult<DeleteStatement> {
    check_fields(
        d.keys(),
        "delete.deletes",
        &["q", "limit", "collation"],
        &["hint"],
        &[],
    )?;
    Ok(DeleteStatement {
        q: get_doc(&d, "q")?.unwrap_or_default(),
        limit: get_i64(&d, "limit")?.unwrap_or(0),
        collation: get_doc(&d, "collation")?,
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
    })
}

/// Fields every command may carry: mongod's generic arguments, the one list of them (the
/// document layer never sees them). [`check_generic_fields`] checks their values: `maxTimeMS`
/// bounds every command, `readConcern` is checked on every command, `writeConcern` is taken
/// only by commands that write; the others (session, cluster time, API version, comment)
/// change nothing on a standalone.
pub const GENERIC_FIELDS: &[&str] = &[
    "$db",
    "lsid",
    "$readPreference",
    "$clusterTime",
    "writeConcern",
    "readConcern",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
];

/// Transaction fields: a standalone has neither retryable writes nor transactions, so they are
/// refused unless a hook implements them (a shard's retryable writes declare `txnNumber`).
const TRANSACTION_FIELDS: &[&str] = &["txnNumber", "autocommit", "startTransaction"];

/// The commands that write and so take a `writeConcern` (mongod refuses it on the others).
const WRITE_CONCERN_COMMANDS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "create",
    "drop",
    "dropDatabase",
    "renameCollection",
    "createIndexes",
    "dropIndexes",
    "deleteIndexes",
    "collMod",
    "createUser",
    "updateUser",
    "dropUser",
    "grantRolesToUser",
    "revokeRolesFromUser",
];

/// Stable API version 1's commands among flashdoc's (mongod's list; the SASL commands are in
/// it so that a strict client can authenticate).
const API_V1_COMMANDS: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "authenticate",
    "commitTransaction",
    "count",
    "create",
    "createIndexes",
    "delete",
    "distinct",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "endSessions",
    "explain",
    "find",
    "findAndModify",
    "getMore",
    "hello",
    "insert",
    "killCursors",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "ping",
    "refreshSessions",
    "saslContinue",
    "saslStart",
    "update",
];

/// The Stable API fields: `apiVersion` must be "1"; `apiStrict: true` refuses a command
/// outside version 1 (APIStrictError, 323); `apiDeprecationErrors` has nothing to refuse
/// (no command of version 1 that flashdoc has is deprecated).
fn check_api_version(name: &str, cmd: &Document) -> DocResult<()> {
    let strict = flag(cmd, "apiStrict")?;
    flag(cmd, "apiDeprecationErrors")?;
    match cmd.get("apiVersion") {
        None if cmd.contains_key("apiStrict") || cmd.contains_key("apiDeprecationErrors") => {
            Err(DocError::with_code(
                4886600,
                "Location4886600",
                "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
            ))
        }
        None => Ok(()),
        Some(Bson::String(v)) if v == "1" => {
            if strict && !API_V1_COMMANDS.contains(&name) {
                return Err(DocError::with_code(
                    323,
                    "APIStrictError",
                    format!(
                        "Provided apiStrict:true, but the command {name} is not in API Version 1"
                    ),
                ));
            }
            Ok(())
        }
        Some(v) => Err(DocError::with_code(
            322,
            "APIVersionError",
            format!("API version must be \"1\", not {v}"),
        )),
    }
}

/// Checks the generic fields every command may carry, whatever the command: so none of them
/// is accepted and ignored, on any command.
fn check_generic_fields(name: &str, cmd: &Document, hook_fields: &[&str]) -> DocResult<()> {
    read_concern(cmd)?;
    check_api_version(name, cmd)?;
    max_time(cmd)?;
    if cmd.contains_key("writeConcern") && !WRITE_CONCERN_COMMANDS.contains(&name) {
        return Err(DocError::invalid_options(format!(
            "Command {name} does not support writeConcern"
        )));
    }
    if let Some(f) = TRANSACTION_FIELDS
        .iter()
        .find(|f| cmd.contains_key(f) && !hook_fields.contains(f))
    {
        return Err(DocError::illegal_operation(format!(
            "Transaction numbers are only allowed on a replica set member or mongos ('{f}' on {name})"
        )));
    }
    Ok(())
}

/// Refuses a field the command does not know (40415, as mongod) and one flashdoc knows but
/// does not implement (NotImplemented, 238): nothing is accepted and ignored. `accepted` are
/// further lists of fields taken (the generic ones, a hook's).
fn check_fields<'a>(
    keys: impl Iterator<Item = &'a String>,
    what: &str,
    known: &[&str],
    not_implemented: &[&str],
    accepted: &[&[&str]],
) -> DocResult<()> {
    for k in keys {
        if known.contains(&k.as_str()) || accepted.iter().any(|l| l.contains(&k.as_str())) {
            continue;
        }
        if not_implemented.contains(&k.as_str()) {
            return Err(DocError::with_code(
                238,
                "NotImplemented",
                format!("BSON field '{what}.{k}' is not supported by flashdoc"),
            ));
        }
        return Err(DocError::with_code(
            40415,
            "Location40415",
            format!("BSON field '{what}.{k}' is an unknown field."),
        ));
    }
    Ok(())
}

/// The options of each command that takes options (the first key is the command itself):
/// (known, known but not implemented).
fn command_fields(name: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match name {
        "find" => (
            &[
                "filter",
                "sort",
                "projection",
                "hint",
                "skip",
                "limit",
                "batchSize",
                "singleBatch",
                "collation",
                "tailable",
                "awaitData",
                "noCursorTimeout",
                "allowDiskUse",
                "allowPartialResults",
                "oplogReplay",
            ],
            &[
                "let",
                "min",
                "max",
                "returnKey",
                "showRecordId",
                "readOnce",
                "term",
            ],
        ),
        "killOp" => (&["op"], &[]),
        "getMore" => (
            &["collection", "batchSize"],
            &["term", "lastKnownCommittedOpTime"],
        ),
        "insert" => (&["documents", "ordered", "bypassDocumentValidation"], &[]),
        "update" => (
            &["updates", "ordered", "bypassDocumentValidation"],
            &["let"],
        ),
        "delete" => (&["deletes", "ordered"], &["let"]),
        "findAndModify" | "findandmodify" => (
            &[
                "query",
                "sort",
                "remove",
                "update",
                "new",
                "fields",
                "upsert",
                "arrayFilters",
                "collation",
                "bypassDocumentValidation",
            ],
            &["hint", "let"],
        ),
        "count" => (&["query", "skip", "limit", "hint", "collation"], &[]),
        "distinct" => (&["key", "query", "collation", "hint"], &[]),
        "aggregate" => (
            &[
                "pipeline",
                "cursor",
                "explain",
                "allowDiskUse",
                "collation",
                "hint",
            ],
            &["let", "bypassDocumentValidation"],
        ),
        "killCursors" => (&["cursors"], &[]),
        "createIndexes" => (&["indexes", "commitQuorum"], &[]),
        "listIndexes" => (&["cursor"], &[]),
        "listCollections" => (
            &["filter", "nameOnly", "authorizedCollections", "cursor"],
            &[],
        ),
        "dropIndexes" | "deleteIndexes" => (&["index"], &[]),
        "renameCollection" => (&["to", "dropTarget"], &["stayTemp"]),
        "collStats" => (&["scale"], &[]),
        "compact" => (&["force", "freeSpaceTargetMB", "dryRun"], &[]),
        "profile" => (&["slowms", "sampleRate", "filter"], &[]),
        // The document layer refuses the options it does not implement, with the reason.
        "collMod" => (
            &[
                "validator",
                "validationLevel",
                "validationAction",
                "index",
                "viewOn",
                "pipeline",
                "expireAfterSeconds",
                "cappedSize",
                "cappedMax",
                "changeStreamPreAndPostImages",
                "timeseries",
                "timeseriesBucketsMayHaveMixedSchemaData",
                "dryRun",
                "collectionUUID",
            ],
            &[],
        ),
        "dbStats" => (&["scale"], &["freeStorage"]),
        // authorizedDatabases filters nothing: every role that may list databases holds a
        // privilege on all of them (or authorization is off).
        "listDatabases" => (&["filter", "nameOnly", "authorizedDatabases"], &[]),
        "drop" => (&[], &[]),
        "validate" => (
            &[
                "full",
                "repair",
                "metadata",
                "checkBSONConformance",
                "background",
                "scandata",
            ],
            &[],
        ),
        _ => return None,
    })
}

/// `readConcern`: `local`, `available` and `majority` read the same on a standalone (every
/// acknowledged write is the majority's); `snapshot` and `linearizable`, and
/// `afterClusterTime`, are refused.
fn read_concern(cmd: &Document) -> DocResult<()> {
    let Some(rc) = cmd.get("readConcern") else {
        return Ok(());
    };
    let Bson::Document(rc) = rc else {
        return Err(DocError::type_mismatch("readConcern must be an object"));
    };
    for (k, v) in rc {
        match (k.as_str(), v) {
            ("level", Bson::String(l))
                if matches!(l.as_str(), "local" | "available" | "majority") => {}
            ("level", Bson::String(l)) => {
                return Err(DocError::with_code(
                    238,
                    "NotImplemented",
                    format!("readConcern level '{l}' is not supported by flashdoc"),
                ))
            }
            _ => {
                return Err(DocError::with_code(
                    238,
                    "NotImplemented",
                    format!("readConcern.{k} is not supported by flashdoc"),
                ))
            }
        }
    }
    Ok(())
}

/// A count as mongod appends it (`appendNumber`): Int32 when it fits, else Int64. Drivers
/// rely on it: mongosh shows an Int64 `n` as a Long object or a string.
fn count_bson(n: u64) -> Bson {
    match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(n as i64),
    }
}

fn write_reply(out: WriteOutcome, is_update: bool) -> Document {
    let mut d = doc! {"n": count_bson(out.n)};
    if is_update {
        d.insert("nModified", count_bson(out.n_modified));
        if !out.upserted.is_empty() {
            let ups: Vec<Bson> = out
                .upserted
                .into_iter()
                .map(|(i, id)| Bson::Document(doc! {"index": i as i32, "_id": id}))
                .collect();
            d.insert("upserted", ups);
        }
    }
    if !out.write_errors.is_empty() {
        let errs: Vec<Bson> = out
            .write_errors
            .into_iter()
            .map(|we| {
                let mut e = doc! {"index": we.index as i32, "code": we.error.code, "errmsg": we.error.message.clone()};
                if let Some(extra) = we.error.extra {
                    for (k, v) in *extra {
                        e.insert(k, v);
                    }
                }
                Bson::Document(e)
            })
            .collect();
        d.insert("writeErrors", errs);
    }
    d
}

/// How a cursor is kept between batches.
#[derive(Default)]
pub(crate) struct CursorOpts {
    pub single: bool,
    pub no_timeout: bool,
    pub tailable: bool,
    pub await_data: bool,
    pub interrupt: Interrupt,
}

/// Fills a batch from the cursor; keeps the cursor for getMore unless it is exhausted (a
/// tailable cursor is kept at the end of the data too).
pub(crate) fn cursor_reply(
    state: &Arc<ServerState>,
    ns: &str,
    mut cursor: DocCursor,
    first: usize,
    opts: CursorOpts,
    field: &str,
) -> DocResult<Document> {
    let (batch, exhausted) = fill_batch(&mut cursor, first)?;
    let id = if (exhausted && (!opts.tailable || cursor.is_done())) || opts.single {
        0i64
    } else {
        // Time waiting for the next getMore is not charged to maxTimeMS.
        opts.interrupt.pause();
        let mut entry = CursorEntry::new(ns.to_string(), cursor);
        entry.no_timeout = opts.no_timeout;
        entry.tailable = opts.tailable;
        entry.await_data = opts.await_data;
        // Every kept cursor can be killed, even one opened without an interrupt of its own (a
        // listing, a router's merged cursor): killCursors must stop a getMore reading it.
        entry.interrupt = if opts.interrupt == Interrupt::none() {
            Interrupt::new(None)
        } else {
            opts.interrupt
        };
        state.cursors().insert(entry)
    };
    Ok(doc! {"cursor": {field: batch, "id": id, "ns": ns}})
}

fn fill_batch(cursor: &mut DocCursor, n: usize) -> DocResult<(Vec<Bson>, bool)> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while out.len() < n && bytes < BATCH_BYTES {
        match cursor.next() {
            Some(Ok(d)) => {
                bytes += bson::to_vec(&d).map(|v| v.len()).unwrap_or(0);
                out.push(Bson::Document(d));
            }
            Some(Err(e)) => return Err(e),
            None => return Ok((out, true)),
        }
    }
    Ok((out, false))
}

/// How long a getMore on an awaitData cursor waits for new documents by default.
const DEFAULT_AWAIT: Duration = Duration::from_secs(1);
/// The longest an awaitData getMore waits for documents, whatever its maxTimeMS: the client
/// gets an empty batch and asks again (the wait holds one of the blocking pool's threads).
const MAX_AWAIT: Duration = Duration::from_secs(10);
/// How often an awaiting getMore looks for new documents.
const AWAIT_POLL: Duration = Duration::from_millis(10);

fn get_more(
    state: &ServerState,
    id: i64,
    db: &str,
    coll: &str,
    size: Option<usize>,
    await_time: Option<Duration>,
) -> DocResult<Document> {
    let reg = state.cursors();
    let mut entry = reg
        .take(id)
        .ok_or_else(|| DocError::cursor_not_found(format!("cursor id {id} not found")))?;
    let ns = format!("{db}.{coll}");
    if entry.ns != ns && !entry.ns.starts_with(&format!("{db}.$cmd")) {
        let msg = format!(
            "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}",
            entry.ns
        );
        reg.put_back(id, entry);
        return Err(DocError::with_code(13, "Unauthorized", msg));
    }
    if await_time.is_some() && !entry.await_data {
        reg.put_back(id, entry);
        return Err(DocError::bad_value(
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    let n = size.unwrap_or(usize::MAX).max(1);
    // killOp on this getMore reaches the cursor's read.
    state.ops.adopt(&entry.interrupt);
    entry.interrupt.resume();
    entry.cursor.watch_scan();
    let mut result = fill_batch(&mut entry.cursor, n);
    if entry.await_data {
        // Wait for documents inserted into the capped collection, up to the getMore's
        // maxTimeMS (1 s by default), looking every few milliseconds.
        // The wait holds a worker thread, so it is capped (MAX_AWAIT) and stops when the
        // cursor's operation is interrupted.
        let wait = await_time.unwrap_or(DEFAULT_AWAIT).min(MAX_AWAIT);
        let deadline = Instant::now() + wait;
        while matches!(&result, Ok((b, _)) if b.is_empty()) && Instant::now() < deadline {
            if let Err(e) = entry.interrupt.check() {
                result = Err(e);
                break;
            }
            std::thread::sleep(AWAIT_POLL);
            result = fill_batch(&mut entry.cursor, n);
        }
    }
    entry.interrupt.pause();
    // A failed cursor (maxTimeMS spent, killed, an error) is closed: it is not put back.
    let (batch, exhausted) = match result {
        Ok(r) => r,
        Err(e) => {
            reg.release(id);
            return Err(e);
        }
    };
    let ns = entry.ns.clone();
    let out_id = if exhausted && (!entry.tailable || entry.cursor.is_done()) {
        reg.release(id);
        0
    } else {
        reg.put_back(id, entry);
        id
    };
    Ok(doc! {"cursor": {"nextBatch": batch, "id": out_id, "ns": ns}})
}
