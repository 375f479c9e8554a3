//! Command dispatch: every command a driver, mongosh or a tool sends to a standalone mongod,
//! answered in mongod's reply shapes (shared/notes/wire-and-peers.md §2).

use crate::cursors::{CursorEntry, CursorRegistry};
use crate::state::{ConnInfo, ServerState};
use bson::{doc, spec::BinarySubtype, Bson, Document};
use docdb::{
    DeleteStatement, DocCursor, DocError, DocResult, FindAndModify, FindQuery, UpdateStatement,
    WriteOpts, WriteOutcome,
};
use std::sync::Arc;

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
    let res = dispatch(state, &name, &db, cmd, conn);
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
    match name {
        "hello" | "isMaster" | "ismaster" => ok(hello(state, name, cmd, conn)),
        "ping" => ok(doc! {}),
        "buildInfo" | "buildinfo" => ok(build_info()),
        "getParameter" => get_parameter(cmd).map(|d| (d, After::Continue)),
        "getLog" => ok(doc! {"totalLinesWritten": 0, "log": []}),
        "hostInfo" => ok(host_info()),
        "whatsmyuri" => ok(doc! {"you": conn.peer.to_string()}),
        "connectionStatus" => {
            ok(doc! {"authInfo": {"authenticatedUsers": [], "authenticatedUserRoles": []}})
        }
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
            dbx.engine().checkpoint()?;
            ok(doc! {"numFiles": 1})
        }

        // CRUD
        "insert" => {
            let coll = coll_name(cmd, name)?;
            reject_transactions(cmd)?;
            let docs = doc_array(cmd, "documents")?;
            let out = dbx.insert(db, &coll, docs, write_opts(cmd));
            ok(write_reply(out, false))
        }
        "update" => {
            let coll = coll_name(cmd, name)?;
            reject_transactions(cmd)?;
            let stmts = doc_array(cmd, "updates")?
                .into_iter()
                .map(parse_update_statement)
                .collect::<DocResult<Vec<_>>>()?;
            let out = dbx.update(db, &coll, &stmts, write_opts(cmd));
            ok(write_reply(out, true))
        }
        "delete" => {
            let coll = coll_name(cmd, name)?;
            reject_transactions(cmd)?;
            let stmts = doc_array(cmd, "deletes")?
                .into_iter()
                .map(|d| {
                    Ok(DeleteStatement {
                        q: get_doc(&d, "q")?.unwrap_or_default(),
                        limit: get_i64(&d, "limit")?.unwrap_or(0),
                    })
                })
                .collect::<DocResult<Vec<_>>>()?;
            let out = dbx.delete(db, &coll, &stmts, write_opts(cmd));
            ok(write_reply(out, false))
        }
        "find" => {
            let coll = coll_name(cmd, name)?;
            let q = find_query(cmd)?;
            let limit = q.limit;
            let cursor = dbx.find(db, &coll, &q)?;
            let single =
                cmd.get_bool("singleBatch").unwrap_or(false) || limit.is_some_and(|l| l < 0);
            let first = batch_size(cmd, "batchSize")?.unwrap_or(DEFAULT_FIRST_BATCH);
            ok(cursor_reply(
                state,
                &format!("{db}.{coll}"),
                cursor,
                first,
                single,
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
            get_more(state.cursors(), id, db, coll, size).map(|d| (d, After::Continue))
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
                if state.cursors().remove(*id).is_some() {
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
                journal: write_opts(cmd).journal,
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
            let filter = get_doc(cmd, "query")?.unwrap_or_default();
            let skip = get_i64(cmd, "skip")?.unwrap_or(0).max(0) as u64;
            let limit = get_i64(cmd, "limit")?;
            let n = dbx.count(db, &coll, &filter, skip, limit)?;
            ok(doc! {"n": count_bson(n)})
        }
        "distinct" => {
            let coll = coll_name(cmd, name)?;
            let key = cmd
                .get_str("key")
                .map_err(|_| DocError::failed_to_parse("distinct needs a string 'key'"))?;
            let filter = get_doc(cmd, "query")?.unwrap_or_default();
            let values = dbx.distinct(db, &coll, key, &filter)?;
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
                Some(Bson::String(s)) => s.clone(),
                Some(Bson::Int32(1)) | Some(Bson::Int64(1)) | Some(Bson::Double(_)) => {
                    return Err(DocError::invalid_namespace(
                        "database-level aggregation is not supported",
                    ))
                }
                _ => return Err(DocError::type_mismatch("aggregate needs a collection name")),
            };
            if cmd.get_bool("explain").unwrap_or(false) {
                return ok(
                    doc! {"stages": pipeline.into_iter().map(Bson::Document).collect::<Vec<_>>()},
                );
            }
            let cursor_opts = get_doc(cmd, "cursor")?.unwrap_or_default();
            let first = batch_size(&cursor_opts, "batchSize")?.unwrap_or(DEFAULT_FIRST_BATCH);
            let cursor = dbx.aggregate(db, &coll, &pipeline)?;
            ok(cursor_reply(
                state,
                &format!("{db}.{coll}"),
                cursor,
                first,
                false,
                "firstBatch",
            )?)
        }
        "explain" => {
            let inner = get_doc(cmd, "explain")?
                .ok_or_else(|| DocError::failed_to_parse("explain needs a command document"))?;
            let inner_name = inner.keys().next().cloned().unwrap_or_default();
            match inner_name.as_str() {
                "find" => {
                    let coll = coll_name(&inner, "find")?;
                    let q = find_query(&inner)?;
                    ok(dbx.explain_find(db, &coll, &q)?)
                }
                "count" | "distinct" | "aggregate" | "update" | "delete" | "findAndModify" => {
                    let coll = coll_name(&inner, &inner_name)?;
                    let filter = inner
                        .get_document("query")
                        .or_else(|_| inner.get_document("filter"))
                        .cloned()
                        .unwrap_or_default();
                    let q = FindQuery {
                        filter,
                        ..Default::default()
                    };
                    ok(dbx.explain_find(db, &coll, &q)?)
                }
                other => Err(DocError::command_not_found(format!(
                    "Explain is not supported for command '{other}'"
                ))),
            }
        }

        // Catalog
        "create" => {
            let coll = coll_name(cmd, name)?;
            let mut options = cmd.clone();
            for k in [
                "create",
                "$db",
                "lsid",
                "$readPreference",
                "writeConcern",
                "$clusterTime",
                "comment",
                "apiVersion",
                "apiStrict",
                "apiDeprecationErrors",
            ] {
                options.remove(k);
            }
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
            dbx.rename_collection(
                fdb,
                fcoll,
                tdb,
                tcoll,
                cmd.get_bool("dropTarget").unwrap_or(false),
            )?;
            ok(doc! {})
        }
        "listCollections" => {
            let filter = get_doc(cmd, "filter")?.unwrap_or_default();
            let name_only = cmd.get_bool("nameOnly").unwrap_or(false);
            let matcher = docdb::matcher::Matcher::new(&filter)?;
            let mut out = Vec::new();
            for c in dbx.list_collections(db)? {
                let mut d = if name_only {
                    doc! {"name": c.name.clone(), "type": "collection"}
                } else {
                    doc! {
                        "name": c.name.clone(), "type": "collection", "options": c.options.clone(),
                        "info": {"readOnly": false, "uuid": c.uuid},
                        "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"},
                    }
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
                usize::MAX,
                true,
                "firstBatch",
            )?)
        }
        "listDatabases" => {
            let name_only = cmd.get_bool("nameOnly").unwrap_or(false);
            let filter = get_doc(cmd, "filter")?.unwrap_or_default();
            let matcher = docdb::matcher::Matcher::new(&filter)?;
            let mut total = 0i64;
            let mut list = Vec::new();
            for d in dbx.list_databases()? {
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
            let specs = doc_array(cmd, "indexes")?;
            let out = dbx.create_indexes(db, &coll, &specs)?;
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
            let list = dbx.list_indexes(db, &coll)?;
            let cursor = DocCursor::from_docs(list);
            ok(cursor_reply(
                state,
                &format!("{db}.{coll}"),
                cursor,
                usize::MAX,
                true,
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
        "collStats" => {
            let coll = coll_name(cmd, name)?;
            ok(dbx.coll_stats(db, &coll)?)
        }
        "dbStats" => ok(dbx.db_stats(db)?),
        "validate" => {
            let coll = coll_name(cmd, name)?;
            let n = dbx.count(db, &coll, &Document::new(), 0, None)?;
            ok(
                doc! {"ns": format!("{db}.{coll}"), "nrecords": n as i64, "valid": true, "errors": [], "warnings": []},
            )
        }
        _ => Err(DocError::command_not_found(format!(
            "no such command: '{name}'"
        ))),
    }
}

fn hello(state: &ServerState, name: &str, cmd: &Document, conn: &ConnInfo) -> Document {
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
    let _ = state;
    d
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

fn get_parameter(cmd: &Document) -> DocResult<Document> {
    let mut out = Document::new();
    let all = matches!(cmd.get("getParameter"), Some(Bson::String(s)) if s == "*");
    for (k, _) in cmd.iter() {
        if k == "getParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        match k.as_str() {
            "featureCompatibilityVersion" => {
                out.insert(k.clone(), doc! {"version": "7.0"});
            }
            "authenticationMechanisms" => {
                out.insert(k.clone(), Vec::<Bson>::new());
            }
            _ => {
                if !all {
                    return Err(DocError::invalid_options("no option found to get"));
                }
            }
        }
    }
    if all {
        out.insert("featureCompatibilityVersion", doc! {"version": "7.0"});
    }
    if out.is_empty() {
        return Err(DocError::invalid_options("no option found to get"));
    }
    Ok(out)
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

fn list_commands() -> Document {
    let names = [
        "aggregate",
        "buildInfo",
        "collStats",
        "connectionStatus",
        "count",
        "create",
        "createIndexes",
        "dbStats",
        "delete",
        "distinct",
        "drop",
        "dropDatabase",
        "dropIndexes",
        "endSessions",
        "explain",
        "find",
        "findAndModify",
        "fsync",
        "getCmdLineOpts",
        "getLog",
        "getMore",
        "getParameter",
        "hello",
        "hostInfo",
        "insert",
        "isMaster",
        "killCursors",
        "listCollections",
        "listCommands",
        "listDatabases",
        "listIndexes",
        "ping",
        "renameCollection",
        "serverStatus",
        "shutdown",
        "startSession",
        "update",
        "validate",
        "whatsmyuri",
    ];
    let mut cmds = Document::new();
    for n in names {
        cmds.insert(
            n,
            doc! {"help": "", "requiresAuth": false, "secondaryOk": true, "adminOnly": false},
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

fn reject_transactions(cmd: &Document) -> DocResult<()> {
    if cmd.contains_key("txnNumber")
        && (cmd.contains_key("startTransaction") || cmd.contains_key("autocommit"))
    {
        return Err(DocError::illegal_operation(
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    Ok(())
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

fn write_opts(cmd: &Document) -> WriteOpts {
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let journal = cmd
        .get_document("writeConcern")
        .map(|wc| {
            truthy(wc.get("j")) || matches!(wc.get("w"), Some(Bson::String(s)) if s == "majority")
        })
        .unwrap_or(false);
    WriteOpts { ordered, journal }
}

fn parse_update_statement(d: Document) -> DocResult<UpdateStatement> {
    let u = d.get("u").cloned().ok_or_else(|| {
        DocError::failed_to_parse("BSON field 'update.updates.u' is missing but a required field")
    })?;
    Ok(UpdateStatement {
        q: get_doc(&d, "q")?.unwrap_or_default(),
        u,
        upsert: truthy(d.get("upsert")),
        multi: truthy(d.get("multi")),
        array_filters: get_doc_list(&d, "arrayFilters")?,
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
    })
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

/// Fills a batch from the cursor; keeps the cursor for getMore unless it is exhausted.
fn cursor_reply(
    state: &Arc<ServerState>,
    ns: &str,
    mut cursor: DocCursor,
    first: usize,
    single: bool,
    field: &str,
) -> DocResult<Document> {
    let (batch, exhausted) = fill_batch(&mut cursor, first)?;
    let id = if exhausted || single {
        0i64
    } else {
        state
            .cursors()
            .insert(CursorEntry::new(ns.to_string(), cursor))
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

fn get_more(
    reg: &CursorRegistry,
    id: i64,
    db: &str,
    coll: &str,
    size: Option<usize>,
) -> DocResult<Document> {
    let mut entry = reg
        .remove(id)
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
    let (batch, exhausted) = fill_batch(&mut entry.cursor, size.unwrap_or(usize::MAX).max(1))?;
    let ns = entry.ns.clone();
    let out_id = if exhausted {
        0
    } else {
        reg.put_back(id, entry);
        id
    };
    Ok(doc! {"cursor": {"nextBatch": batch, "id": out_id, "ns": ns}})
}
