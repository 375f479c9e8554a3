//! Command dispatch: every command a driver, mongosh or a tool sends to a standalone mongod,
//! answered in mongod's reply shapes (shared/notes/wire-and-peers.md §2). Which commands there
//! are, and everything about each, is the command table (`table`); the handlers are grouped by
//! family (`crud`, `read`, `cursor`, `catalog`, `admin`, `users`).

mod admin;
mod args;
pub(crate) mod batch;
mod call;
mod catalog;
mod crud;
mod cursor;
pub(crate) mod fields;
mod read;
pub(crate) mod table;
mod users;

#[cfg(test)]
mod tests;

pub use crate::build_info::{hostname, VERSION};
pub use fields::GENERIC_FIELDS;
pub use table::names as command_names;

use crate::auth;
use crate::config::Authorization;
use crate::roles::{USERS_COLL, USERS_DB};
use crate::spec::{Namespace, OpKind, Spec};
use crate::state::{CommandCall, ConnInfo, ServerState};
use args::{coll_name, flag, max_time};
use bson::{doc, Bson, Document};
use call::Call;
use docdb::{DocError, DocResult, Interrupt};
use std::sync::Arc;
use std::time::Instant;

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
    let spec = table::lookup(&name).map(|c| &c.spec);
    let op = spec.map_or(OpKind::Command, |s| s.op);
    state.count_command(&name, op);
    crate::log::debug(1, "COMMAND", &format!("conn{} {db}: {name}", conn.id));
    let started = Instant::now();
    // Listed in currentOp until it replies; a bad maxTimeMS is the command's own error.
    let budget = max_time(cmd).ok().flatten();
    let _running = state
        .ops
        .begin(&name, op, &db, cmd, conn, Interrupt::new(budget));
    // What the command's scans examine, for the profiler.
    let scans = docdb::cursor::watch();
    let (reply, after) = match guard(state, &name, spec, &db, cmd, conn) {
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
        spec,
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
/// writes the user collection except through the user commands. `spec` is the command's row.
fn guard(
    state: &Arc<ServerState>,
    name: &str,
    spec: Option<&Spec>,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<()> {
    if state.config().security.authorization == Authorization::Enabled
        && !lists_authorized_collections(name, db, cmd, conn)?
    {
        // With authorization on, nothing runs that the table does not name.
        let Some(spec) = spec else {
            return Err(no_such_command(name));
        };
        auth::authorize(state, conn, name, spec.action, db)?;
        if name == "aggregate" {
            auth::authorize_pipeline_writes(conn, db, cmd)?;
            if lists_all_users_ops(cmd) {
                // Other users' operations need the `inprog` privilege, as `currentOp`'s.
                let current_op = table::lookup("currentOp").expect("currentOp has a row");
                auth::authorize(state, conn, "currentOp", current_op.spec.action, db)?;
            }
        }
    }
    if touches_users_collection(name, spec.map(|s| s.namespace), db, cmd) {
        return Err(DocError::with_code(
            13,
            "Unauthorized",
            format!("{db}.{USERS_COLL} is managed by the user commands (createUser, updateUser, dropUser, usersInfo)"),
        ));
    }
    Ok(())
}

/// Whether a command names the users' collection other than through the user commands: as
/// a namespace it renames from or to, or as the collection its first field names (any
/// command's, a hook's too, except one that lists only the collection's indexes).
fn touches_users_collection(
    name: &str,
    namespace: Option<Namespace>,
    db: &str,
    cmd: &Document,
) -> bool {
    let target = cmd.get(name).and_then(Bson::as_str);
    let users_ns = format!("{USERS_DB}.{USERS_COLL}");
    let renames_users = namespace == Some(Namespace::Namespaces)
        && (target == Some(users_ns.as_str()) || cmd.get_str("to").ok() == Some(users_ns.as_str()));
    renames_users
        || (db == USERS_DB && target == Some(USERS_COLL) && namespace != Some(Namespace::IndexList))
}

fn no_such_command(name: &str) -> DocError {
    DocError::command_not_found(format!("no such command: '{name}'"))
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
        && auth::has_privilege_on_db(conn, db, table::actions()))
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

/// Runs a command's handler from its row, after the checks every command passes: the generic
/// fields, the row's own fields, and the collection it names when it names one.
fn dispatch(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<(Document, After)> {
    let hook_fields = state.hook().map_or(&[][..], |h| h.command_fields(name));
    let row = table::lookup(name);
    fields::check_generic_fields(name, row.map(|c| &c.spec), cmd, hook_fields)?;
    let Some(row) = row else {
        return Err(no_such_command(name));
    };
    fields::check_command_fields(name, &row.spec, cmd, hook_fields)?;
    if let Some(id) = cmd.get("lsid").and_then(crate::sessions::session_id) {
        let owner = crate::ops::users_of(conn).into_iter().next();
        let now = bson::DateTime::now();
        state.sessions.touch(id, owner.as_ref(), now)?;
    }
    let coll = match row.spec.namespace {
        Namespace::Collection | Namespace::IndexList => Some(coll_name(cmd, name)?),
        _ => None,
    };
    let call = Call {
        state,
        name,
        db,
        cmd,
        conn,
        hook_fields,
        coll,
    };
    let reply = (row.run)(&call)?;
    let after = if row.spec.ends_server {
        After::Shutdown
    } else {
        After::Continue
    };
    Ok((reply, after))
}
