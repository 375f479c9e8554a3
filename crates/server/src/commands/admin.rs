//! The server's own commands: the handshake, diagnostics, parameters, operations in progress,
//! sessions and transactions (which a standalone refuses), shutdown and fsync.

use super::args::flag;
use super::call::Call;
use super::fields::GENERIC_FIELDS;
use crate::auth;
use crate::build_info::{build_info, hostname};
use crate::config::ParamError;
use crate::state::{ConnInfo, ServerState};
use bson::{doc, spec::BinarySubtype, Bson, Document};
use docdb::{DocError, DocResult};

pub(crate) fn hello(call: &Call) -> DocResult<Document> {
    handshake(call.state, call.name, call.cmd, call.conn)
}

pub(crate) fn repl_set_initiate(call: &Call) -> DocResult<Document> {
    crate::replset::commands::initiate(call.state.replset(), call.cmd)
}

pub(crate) fn repl_set_get_status(call: &Call) -> DocResult<Document> {
    crate::replset::commands::get_status(call.state.replset())
}

pub(crate) fn repl_set_get_config(call: &Call) -> DocResult<Document> {
    crate::replset::commands::get_config(call.state.replset())
}

pub(crate) fn repl_set_step_down(call: &Call) -> DocResult<Document> {
    crate::replset::control::step_down(call.state.replset(), call.cmd)
}

pub(crate) fn repl_set_freeze(call: &Call) -> DocResult<Document> {
    crate::replset::control::freeze(call.state.replset(), call.cmd)
}

pub(crate) fn repl_set_reconfig(call: &Call) -> DocResult<Document> {
    crate::replset::control::reconfig(call.state.replset(), call.cmd)
}

pub(crate) fn get_default_rw_concern(call: &Call) -> DocResult<Document> {
    crate::replset::commands::get_default_rw_concern(call.state.replset(), call.db, call.cmd)
}

pub(crate) fn set_default_rw_concern(call: &Call) -> DocResult<Document> {
    crate::replset::commands::set_default_rw_concern(call.state.replset(), call.db, call.cmd)
}

pub(crate) fn ping(_: &Call) -> DocResult<Document> {
    Ok(doc! {})
}

pub(crate) fn build_info_cmd(_: &Call) -> DocResult<Document> {
    Ok(build_info())
}

pub(crate) fn get_log(_: &Call) -> DocResult<Document> {
    Ok(doc! {"totalLinesWritten": 0, "log": []})
}

pub(crate) fn whatsmyuri(call: &Call) -> DocResult<Document> {
    Ok(doc! {"you": call.conn.peer.to_string()})
}

pub(crate) fn get_cmd_line_opts(call: &Call) -> DocResult<Document> {
    Ok(doc! {"argv": std::env::args().collect::<Vec<_>>(), "parsed": call.state.parsed_options()})
}

pub(crate) fn server_status(call: &Call) -> DocResult<Document> {
    Ok(call.state.server_status())
}

pub(crate) fn current_op_cmd(call: &Call) -> DocResult<Document> {
    current_op(call.state, call.cmd, call.conn)
}

pub(crate) fn get_parameter_cmd(call: &Call) -> DocResult<Document> {
    get_parameter(call.state, call.cmd)
}

pub(crate) fn set_parameter_cmd(call: &Call) -> DocResult<Document> {
    set_parameter(call.state, call.cmd)
}

pub(crate) fn host_info_cmd(_: &Call) -> DocResult<Document> {
    Ok(host_info())
}

pub(crate) fn start_session(_: &Call) -> DocResult<Document> {
    let id = bson::Binary {
        subtype: BinarySubtype::Uuid,
        bytes: new_uuid().to_vec(),
    };
    Ok(doc! {"id": {"id": id}, "timeoutMinutes": 30})
}

/// `endSessions`: the sessions named leave the logical session cache (an id that is not a
/// session's is refused, as mongod's parser refuses it).
pub(crate) fn end_sessions(call: &Call) -> DocResult<Document> {
    let Ok(list) = call.cmd.get_array("endSessions") else {
        return Err(DocError::type_mismatch(
            "BSON field 'endSessions' is the wrong type, expected type 'array'",
        ));
    };
    let ids = list
        .iter()
        .map(|lsid| {
            crate::sessions::session_id(lsid).ok_or_else(|| {
                DocError::type_mismatch(
                    "BSON field 'endSessions' must hold session ids: {id: UUID}",
                )
            })
        })
        .collect::<DocResult<Vec<_>>>()?;
    call.state.sessions.end(&ids);
    Ok(doc! {})
}

/// refreshSessions, killSessions, killAllSessions: a standalone's sessions hold no
/// transaction or server-side state to refresh or kill.
pub(crate) fn sessions_noop(_: &Call) -> DocResult<Document> {
    Ok(doc! {})
}

pub(crate) fn transaction(_: &Call) -> DocResult<Document> {
    Err(DocError::illegal_operation(
        "Transaction numbers are only allowed on a replica set member or mongos",
    ))
}

/// Replies; the server then shuts down (the row's `ends_server`).
pub(crate) fn shutdown(_: &Call) -> DocResult<Document> {
    Ok(doc! {})
}

pub(crate) fn kill_op(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let cmd = call.cmd;
    let opid = match cmd.get("op") {
        Some(Bson::Int32(n)) => *n,
        Some(Bson::Int64(n)) => {
            i32::try_from(*n).map_err(|_| DocError::bad_value(format!("op out of range: {n}")))?
        }
        Some(Bson::Double(f)) if f.fract() == 0.0 && f.abs() <= i32::MAX as f64 => *f as i32,
        Some(_) => return Err(DocError::type_mismatch("op must be a number")),
        None => {
            return Err(DocError::failed_to_parse(
                "BSON field 'killOp.op' is missing but a required field",
            ))
        }
    };
    state.ops.kill(opid);
    Ok(doc! {"info": "attempting to kill op"})
}

pub(crate) fn fsync(call: &Call) -> DocResult<Document> {
    let dbx = call.dbx();
    dbx.engine().checkpoint().map_err(docdb::storage_error)?;
    Ok(doc! {"numFiles": 1})
}

fn handshake(
    state: &ServerState,
    name: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<Document> {
    let mut d = Document::new();
    let writable_key = if name == "hello" {
        "isWritablePrimary"
    } else {
        "ismaster"
    };
    match state.replset() {
        Some(rs) => crate::replset::commands::hello_fields(rs, cmd, writable_key, &mut d),
        None => {
            d.insert(writable_key, true);
        }
    }
    if cmd.contains_key("helloOk") {
        d.insert("helloOk", true);
    }
    let app_name = cmd
        .get_document("client")
        .and_then(|c| c.get_document("application"))
        .and_then(|a| a.get_str("name"));
    if let Ok(app_name) = app_name {
        conn.set_app_name(app_name);
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

/// The parameters `getParameter` knows, as they are now.
fn parameters(state: &ServerState) -> Document {
    let p = state.params();
    doc! {
        "featureCompatibilityVersion": {"version": "7.0"},
        "authenticationMechanisms": ["SCRAM-SHA-1", "SCRAM-SHA-256"],
        "ttlMonitorSleepSecs": p.ttl_monitor_sleep_secs as i64,
        "cursorTimeoutMillis": p.cursor_timeout_millis as i64,
        "enableLocalhostAuthBypass": p.enable_localhost_auth_bypass,
        "enableTestCommands": p.enable_test_commands,
        "unauthenticatedConnectionTimeoutSecs": p.unauthenticated_connection_timeout_secs as i64,
        "idleConnectionTimeoutSecs": p.idle_connection_timeout_secs as i64,
        "maxCursorsPerConnection": p.max_cursors_per_connection as i64,
        "internalDocumentSourceGroupMaxMemoryBytes": p.internal_document_source_group_max_memory_bytes as i64,
        "internalDocumentSourceLookupCacheSizeBytes": p.internal_document_source_lookup_cache_size_bytes as i64,
        "internalDocumentSourceGraphLookupMaxMemoryBytes": p.internal_document_source_graph_lookup_max_memory_bytes as i64,
        "internalQueryMaxBlockingSortMemoryUsageBytes": p.internal_query_max_blocking_sort_memory_usage_bytes as i64,
        "allowDiskUseByDefault": p.allow_disk_use_by_default,
        "transactionLifetimeLimitSeconds": p.transaction_lifetime_limit_seconds as i64,
        // Commands without an API version are always served (setting it is refused as an
        // unknown parameter).
        "requireApiVersion": false,
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

/// `setParameter` at run time: every parameter but `enableLocalhostAuthBypass` and
/// `enableTestCommands` (startup-only, as in mongod); values are checked by `Parameters::set_value`.
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
    let mem = crate::sizing::machine_memory_bytes().unwrap_or(0);
    doc! {
        "system": {"currentTime": bson::DateTime::now(), "hostname": hostname(), "cpuAddrSize": 64, "memSizeMB": (mem >> 20) as i64, "numCores": cores, "cpuArch": std::env::consts::ARCH},
        "os": {"type": "Linux", "name": std::env::consts::OS},
        "extra": {},
    }
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
