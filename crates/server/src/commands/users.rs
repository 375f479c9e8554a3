//! Authentication and the user commands (the work is `auth`'s).

use super::call::Call;
use crate::auth;
use bson::{doc, Document};
use docdb::{DocError, DocResult};

pub(crate) fn connection_status(call: &Call) -> DocResult<Document> {
    Ok(auth::auth_info(call.conn))
}

pub(crate) fn sasl_start(call: &Call) -> DocResult<Document> {
    auth::sasl_start(call.state, call.conn, call.db, call.cmd)
}

pub(crate) fn sasl_continue(call: &Call) -> DocResult<Document> {
    auth::sasl_continue(call.state, call.conn, call.cmd)
}

pub(crate) fn authenticate(_: &Call) -> DocResult<Document> {
    Err(DocError::with_code(
        334,
        "MechanismUnavailable",
        "only SCRAM-SHA-1 and SCRAM-SHA-256 (saslStart) are supported",
    ))
}

pub(crate) fn logout(call: &Call) -> DocResult<Document> {
    call.conn.auth.lock().users.retain(|u| u.db != call.db);
    Ok(doc! {})
}

pub(crate) fn create_user(call: &Call) -> DocResult<Document> {
    auth::create_user(call.state.users(), call.db, call.cmd)
}

pub(crate) fn update_user(call: &Call) -> DocResult<Document> {
    auth::update_user(call.state.users(), call.db, call.cmd)
}

pub(crate) fn drop_user(call: &Call) -> DocResult<Document> {
    auth::drop_user(call.state.users(), call.db, call.cmd)
}

pub(crate) fn users_info(call: &Call) -> DocResult<Document> {
    auth::users_info(call.state.users(), call.db, call.cmd)
}

pub(crate) fn grant_roles(call: &Call) -> DocResult<Document> {
    auth::change_roles(call.state.users(), call.db, call.cmd, true)
}

pub(crate) fn revoke_roles(call: &Call) -> DocResult<Document> {
    auth::change_roles(call.state.users(), call.db, call.cmd, false)
}
