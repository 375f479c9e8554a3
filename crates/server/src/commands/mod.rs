//! Command dispatch: every command a driver, mongosh or a tool sends to a standalone mongod,
//! answered in mongod's reply shapes (shared/notes/wire-and-peers.md §2). Which commands there
//! are, and everything about each, is the command table (`table`); the handlers are grouped by
//! family (`crud`, `read`, `cursor`, `catalog`, `admin`, `users`, `testing`). Every command
//! passes the fail points (`crate::failpoint`) on its way to its handler.

mod admin;
mod args;
pub(crate) mod batch;
mod call;
mod catalog;
mod change_stream;
mod crud;
mod cursor;
mod explain;
pub(crate) mod fields;
mod map_reduce;
mod read;
pub(crate) mod table;
mod testing;
mod users;

#[cfg(test)]
mod tests;

pub use crate::build_info::{hostname, VERSION};
pub use fields::GENERIC_FIELDS;
pub use table::names as command_names;

use crate::config::Authorization;
use crate::failpoint;
use crate::replset::concern::Admitted;
use crate::reply::error_reply;
use crate::spec::{Namespace, OpKind, Spec};
use crate::state::{CommandCall, ConnInfo, ServerState};
use crate::{access, auth};
use args::{coll_name, flag, get_i64, max_time};
use bson::{Bson, Document};
use call::Call;
use docdb::{DocError, DocResult, Interrupt};
use std::sync::Arc;
use std::time::Instant;

/// What the connection loop should do after a reply.
pub enum After {
    Continue,
    Shutdown,
    /// Close the connection without sending the reply (a `failCommand` fail point's
    /// `closeConnection`).
    Close,
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
    // A replica set's members authenticate their own commands with the cluster key.
    if let Some(reply) =
        crate::replset::commands::internal(state.replset(), &name, cmd, conn, &state.failpoints)
    {
        return (reply, After::Continue);
    }
    let spec = row(state, &name).map(|c| &c.spec);
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
    let checked =
        gossip_in(state, cmd, conn).and_then(|()| guard(state, &name, spec, &db, cmd, conn));
    let (mut reply, after) = match checked {
        Err(e) => (error_reply(&e), After::Continue),
        Ok(()) => answer(state, &name, &db, cmd, conn),
    };
    state.log_write_failure_once();
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
    if let Some(rs) = state.replset() {
        crate::replset::causal::gossip_out(rs, &mut reply);
    }
    (reply, after)
}

/// A member takes the cluster time a command gossips (`$clusterTime`): unsigned, so with
/// authorization on only from an authenticated connection (`replset::causal`).
fn gossip_in(state: &ServerState, cmd: &Document, conn: &ConnInfo) -> DocResult<()> {
    let Some(rs) = state.replset() else {
        return Ok(());
    };
    let trusted = state.config().security.authorization != Authorization::Enabled
        || !conn.auth.lock().users.is_empty();
    crate::replset::causal::gossip_in_now(rs, cmd, trusted)
}

/// The reply to a command that passed the guard: from the fail points, the hook or the
/// command's handler.
fn answer(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> (Document, After) {
    let action = meet_fail_points(state, name, cmd, conn);
    let labels_given = action.gives_labels();
    let (mut reply, after) = act(state, action, name, db, cmd, conn);
    // A transaction command's or a retryable write's error gets mongod's labels, a fail
    // point's error too, unless the fail point was told which labels to give.
    let labelled = crate::replset::txn::applies(name, cmd)
        || crate::replset::labels::is_retryable_write(name, cmd);
    if !labels_given && state.replset().is_some() && labelled {
        crate::replset::labels::label(name, cmd, &mut reply);
    }
    (reply, after)
}

/// The reply the fail points' `action` leads to.
fn act(
    state: &Arc<ServerState>,
    action: failpoint::Action,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> (Document, After) {
    match action {
        failpoint::Action::Run => run_command(state, name, db, cmd, conn),
        failpoint::Action::Fail(reply) => (reply, After::Continue),
        failpoint::Action::Close => {
            // Never sent: what the profiler and the log see of the dropped command.
            let dropped = DocError::with_code(
                50985,
                "Location50985",
                "Failing command due to 'failCommand' failpoint",
            );
            (error_reply(&dropped), After::Close)
        }
        failpoint::Action::RunThenWriteConcernError { error, labels } => {
            let (mut reply, after) = run_command(state, name, db, cmd, conn);
            reply.insert("writeConcernError", error);
            if let Some(labels) = labels {
                reply.insert("errorLabels", labels);
            }
            (reply, after)
        }
    }
}

/// What the fail points do to this command (one atomic load while they are all off).
fn meet_fail_points(
    state: &ServerState,
    name: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> failpoint::Action {
    if !state.failpoints.armed() {
        return failpoint::Action::Run;
    }
    let app_name = conn.app_name();
    // A getMore runs under its cursor's maxTimeMS, as in mongod.
    let cursor_budget = || {
        name == "getMore"
            && get_i64(cmd, "getMore")
                .ok()
                .flatten()
                .is_some_and(|id| state.cursors().has_time_budget(id))
    };
    let has_max_time = max_time(cmd).ok().flatten().is_some() || cursor_budget();
    state.failpoints.on_command(&failpoint::Command {
        name,
        app_name: app_name.as_deref(),
        has_max_time,
    })
}

/// On a replica-set member, the command as its role allows (`replset::concern`): refused,
/// or run and, for a write, acknowledged as its write concern asks; for a read, answered
/// once its read concern holds.
fn run_command(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> (Document, After) {
    let Some(rs) = state.replset() else {
        return run_here(state, name, db, cmd, conn);
    };
    let spec = row(state, name).map(|c| &c.spec);
    if crate::replset::txn::applies(name, cmd) {
        let run_one = |one: &Document| run_here(state, name, db, one, conn).0;
        let out = fields::pipeline_writes(name, cmd);
        let reply = crate::replset::txn::run(rs, spec, name, db, cmd, out, run_one);
        return (reply, After::Continue);
    }
    let writes = spec.is_some_and(|s| s.write_concern) || fields::pipeline_writes(name, cmd);
    let max_time = max_time(cmd).ok().flatten();
    match crate::replset::concern::admit(rs, spec, writes, db, cmd, max_time) {
        Err(e) => (error_reply(&e), After::Continue),
        Ok(Admitted::Read(wait)) => {
            let (mut reply, after) = run_here(state, name, db, cmd, conn);
            crate::replset::concern::settled(rs, wait, max_time, &mut reply);
            (reply, after)
        }
        Ok(Admitted::Write(gate, ack)) if crate::replset::retry::applies(name, cmd) => {
            let run_one = |one: &Document| run_here(state, name, db, one, conn).0;
            let retried = crate::replset::retry::run(state.db(), &rs.checkouts, name, cmd, run_one);
            let mut reply = retried.unwrap_or_else(|e| error_reply(&e));
            crate::replset::concern::acknowledged(rs, gate, ack, &mut reply);
            (reply, After::Continue)
        }
        Ok(Admitted::Write(gate, ack)) => {
            let (mut reply, after) = run_here(state, name, db, cmd, conn);
            crate::replset::concern::acknowledged(rs, gate, ack, &mut reply);
            (reply, after)
        }
    }
}

/// The hook's reply, or the built-in one amended by the hook.
fn run_here(
    state: &Arc<ServerState>,
    name: &str,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> (Document, After) {
    if let Some(reply) = run_hook(state, name, db, cmd, conn) {
        return (reply, After::Continue);
    }
    let (mut reply, after) = finish(dispatch(state, name, db, cmd, conn));
    if let Some(hook) = state.hook() {
        hook.amend_reply(name, &mut reply);
    }
    (reply, after)
}

/// The row of the command `name`, if the server has it: a test command only with
/// `enableTestCommands` (otherwise mongod has no such command either).
fn row(state: &ServerState, name: &str) -> Option<&'static table::Command> {
    table::lookup(name).filter(|c| !c.spec.test_only || state.test_commands())
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

/// Checks before a command runs, over everything it reaches (`access::accesses`, from its row
/// `spec` and its fields): nobody reads or writes the users' and roles' collections except
/// through the user commands, and with authorization on, each access needs its action.
fn guard(
    state: &Arc<ServerState>,
    name: &str,
    spec: Option<&Spec>,
    db: &str,
    cmd: &Document,
    conn: &ConnInfo,
) -> DocResult<()> {
    let enforce = state.config().security.authorization == Authorization::Enabled;
    // With authorization on, nothing runs that neither the table nor the hook names.
    if enforce && spec.is_none() {
        let access = state.hook().and_then(|h| h.command_access(name));
        return auth::check_hook_command(
            state,
            conn,
            name,
            access.ok_or_else(|| no_such_command(name))?,
        );
    }
    let rows = |n: &str| table::lookup(n).map(|c| &c.spec);
    let accesses = access::accesses(state.db().as_ref(), &rows, spec, name, db, cmd);
    let enforce = enforce && !lists_authorized_collections(name, db, cmd, conn)?;
    auth::check_accesses(state, conn, name, &accesses, enforce)
}

fn no_such_command(name: &str) -> DocError {
    DocError::command_not_found(format!("no such command: '{name}'"))
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
    let row = row(state, name);
    let member = state.replset().is_some();
    fields::check_generic_fields(name, row.map(|c| &c.spec), cmd, hook_fields, member)?;
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
