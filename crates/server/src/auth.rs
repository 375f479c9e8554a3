//! Users, built-in roles and authorization (`security.authorization: enabled`).
//!
//! - Users live in `admin.system.users` in mongod's shape: `{_id: "db.user", userId, user, db,
//!   credentials: {"SCRAM-SHA-1": {...}, "SCRAM-SHA-256": {...}}, roles: [{role, db}],
//!   customData?}`, with salted keys only ([`crate::scram`]). Clients cannot read or write that
//!   collection directly; the user commands do.
//! - Authorization is table-driven: every command's row in the command table
//!   (`commands::table`) names its [`Action`], and every built-in role is a set of actions
//!   ([`crate::roles`]); [`check_accesses`] checks every namespace a command reaches
//!   (`crate::access`), each against the action it needs there, for the connection's users.
//! - With authorization on, an unauthenticated client may only run `hello` (and its legacy
//!   names), `ping`, `saslStart`, `saslContinue`, `authenticate` and `logout`; anything else is
//!   Unauthorized (13). The localhost exception: while no user exists, a client on a loopback
//!   address may create the first user in `admin`.

use crate::access::Access;
use crate::client::{AuthedUser, ConnInfo};
use crate::config::Authorization;
use crate::keyfile;
use crate::roles::{Action, BUILTIN_ROLES, USERS_DB};
use crate::scram::{self, Conversation, Credential, Mechanism};
use crate::state::{HookAccess, ServerState};
use crate::users::UserStore;
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};

fn user_id(db: &str, user: &str) -> String {
    format!("{db}.{user}")
}

/// A user's stored document.
pub fn find_user(users: &dyn UserStore, db: &str, user: &str) -> DocResult<Option<Document>> {
    users.get(&user_id(db, user))
}

fn is_internal_user(db: &str, user: &str) -> bool {
    db == keyfile::INTERNAL_DB && user == keyfile::INTERNAL_USER
}

/// The credentials of a user for a mechanism (None: no such user or no such credential). The
/// internal user's come from the key file, when the server has one, and from nowhere else.
pub fn credential(
    state: &ServerState,
    db: &str,
    user: &str,
    mech: Mechanism,
) -> DocResult<Option<Credential>> {
    if is_internal_user(db, user) {
        return Ok(state.internal_credential(mech));
    }
    Ok(find_user(state.users(), db, user)?.and_then(|u| {
        let c = u.get_document("credentials").ok()?;
        Credential::from_doc(c.get_document(mech.name()).ok()?)
    }))
}

pub fn roles_of(u: &Document) -> Vec<(String, String)> {
    u.get_array("roles")
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    let r = r.as_document()?;
                    Some((r.get_str("role").ok()?.into(), r.get_str("db").ok()?.into()))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn mechanisms_of(u: &Document) -> Vec<String> {
    u.get_document("credentials")
        .map(|c| c.keys().cloned().collect())
        .unwrap_or_default()
}

/// Parses a `roles` argument: names (in `db`) or `{role, db}`; every role must be built in
/// and exist in its database.
pub fn parse_roles(v: &Bson, db: &str) -> DocResult<Vec<(String, String)>> {
    let Bson::Array(a) = v else {
        return Err(DocError::type_mismatch("roles must be an array"));
    };
    let mut out = Vec::new();
    for r in a {
        let (role, rdb) = match r {
            Bson::String(s) => (s.clone(), db.to_string()),
            Bson::Document(d) => (
                d.get_str("role")
                    .map_err(|_| DocError::bad_value("a role document needs a string 'role'"))?
                    .to_string(),
                d.get_str("db")
                    .map_err(|_| DocError::bad_value("a role document needs a string 'db'"))?
                    .to_string(),
            ),
            _ => {
                return Err(DocError::type_mismatch(
                    "roles must be strings or documents",
                ))
            }
        };
        let admin_only = !matches!(
            role.as_str(),
            "read" | "readWrite" | "dbAdmin" | "userAdmin"
        );
        if !BUILTIN_ROLES.contains(&role.as_str()) || (admin_only && rdb != USERS_DB) {
            return Err(DocError::with_code(
                31,
                "RoleNotFound",
                format!("Could not find role: {role}@{rdb}"),
            ));
        }
        if !out.contains(&(role.clone(), rdb.clone())) {
            out.push((role, rdb));
        }
    }
    Ok(out)
}

fn roles_bson(roles: &[(String, String)]) -> Vec<Bson> {
    roles
        .iter()
        .map(|(r, d)| Bson::Document(doc! {"role": r.clone(), "db": d.clone()}))
        .collect()
}

fn mechanisms_arg(cmd: &Document) -> DocResult<Vec<Mechanism>> {
    match cmd.get("mechanisms") {
        None => Ok(vec![Mechanism::Sha1, Mechanism::Sha256]),
        Some(Bson::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|m| {
                m.as_str()
                    .and_then(Mechanism::parse)
                    .ok_or_else(|| DocError::bad_value(format!("Unknown auth mechanism '{m}'")))
            })
            .collect(),
        Some(_) => Err(DocError::bad_value("mechanisms must be a non-empty array")),
    }
}

fn password_arg(cmd: &Document) -> DocResult<Option<String>> {
    if matches!(cmd.get("digestPassword"), Some(Bson::Boolean(false))) {
        return Err(DocError::bad_value(
            "digestPassword: false is not supported (the server digests passwords itself)",
        ));
    }
    match cmd.get("pwd") {
        None => Ok(None),
        Some(Bson::String(p)) if !p.is_empty() => Ok(Some(p.clone())),
        Some(Bson::String(_)) => Err(DocError::bad_value("Password cannot be empty")),
        Some(_) => Err(DocError::type_mismatch("pwd must be a string")),
    }
}

fn credentials(user: &str, pwd: &str, mechs: &[Mechanism]) -> DocResult<Document> {
    let mut d = Document::new();
    for m in mechs {
        let c = Credential::derive(*m, user, pwd).map_err(DocError::bad_value)?;
        d.insert(m.name(), c.to_doc());
    }
    Ok(d)
}

/// createUser.
pub fn create_user(users: &dyn UserStore, db: &str, cmd: &Document) -> DocResult<Document> {
    let user = cmd
        .get_str("createUser")
        .map_err(|_| DocError::type_mismatch("createUser must be a string"))?;
    if user.is_empty() {
        return Err(DocError::bad_value(
            "User document needs 'user' field to be non-empty",
        ));
    }
    let pwd = password_arg(cmd)?.ok_or_else(|| {
        DocError::bad_value("Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
    })?;
    let roles = parse_roles(
        cmd.get("roles").ok_or_else(|| {
            DocError::failed_to_parse("\"createUser\" command requires a \"roles\" array")
        })?,
        db,
    )?;
    let mechs = mechanisms_arg(cmd)?;
    let mut u = doc! {
        "_id": user_id(db, user),
        "userId": bson::Uuid::new(),
        "user": user,
        "db": db,
        "credentials": credentials(user, &pwd, &mechs)?,
        "roles": roles_bson(&roles),
    };
    if let Some(c) = cmd.get("customData") {
        u.insert("customData", c.clone());
    }
    if !users.insert(u)? {
        return Err(DocError::with_code(
            51003,
            "Location51003",
            format!("User \"{user}@{db}\" already exists"),
        ));
    }
    Ok(doc! {})
}

fn modify_user(users: &dyn UserStore, db: &str, user: &str, set: Document) -> DocResult<()> {
    if !users.set_fields(&user_id(db, user), set)? {
        return Err(user_not_found(user, db));
    }
    Ok(())
}

fn user_not_found(user: &str, db: &str) -> DocError {
    DocError::with_code(
        11,
        "UserNotFound",
        format!("Could not find user \"{user}\" for db \"{db}\""),
    )
}

fn existing(users: &dyn UserStore, db: &str, user: &str) -> DocResult<Document> {
    find_user(users, db, user)?.ok_or_else(|| user_not_found(user, db))
}

/// updateUser.
pub fn update_user(users: &dyn UserStore, db: &str, cmd: &Document) -> DocResult<Document> {
    let user = cmd
        .get_str("updateUser")
        .map_err(|_| DocError::type_mismatch("updateUser must be a string"))?;
    let u = existing(users, db, user)?;
    let mut set = Document::new();
    if let Some(pwd) = password_arg(cmd)? {
        let mechs = match cmd.get("mechanisms") {
            Some(_) => mechanisms_arg(cmd)?,
            None => mechanisms_of(&u)
                .iter()
                .filter_map(|m| Mechanism::parse(m))
                .collect(),
        };
        set.insert("credentials", credentials(user, &pwd, &mechs)?);
    } else if cmd.contains_key("mechanisms") {
        return Err(DocError::bad_value(
            "mechanisms can only be changed together with the password",
        ));
    }
    if let Some(r) = cmd.get("roles") {
        set.insert("roles", roles_bson(&parse_roles(r, db)?));
    }
    if let Some(c) = cmd.get("customData") {
        set.insert("customData", c.clone());
    }
    if set.is_empty() {
        return Err(DocError::bad_value(
            "Must specify at least one field to update in updateUser",
        ));
    }
    modify_user(users, db, user, set)?;
    Ok(doc! {})
}

/// dropUser.
pub fn drop_user(users: &dyn UserStore, db: &str, cmd: &Document) -> DocResult<Document> {
    let user = cmd
        .get_str("dropUser")
        .map_err(|_| DocError::type_mismatch("dropUser must be a string"))?;
    if !users.remove(&user_id(db, user))? {
        return Err(user_not_found(user, db));
    }
    Ok(doc! {})
}

/// grantRolesToUser / revokeRolesFromUser.
pub fn change_roles(
    users: &dyn UserStore,
    db: &str,
    cmd: &Document,
    grant: bool,
) -> DocResult<Document> {
    let key = if grant {
        "grantRolesToUser"
    } else {
        "revokeRolesFromUser"
    };
    let user = cmd
        .get_str(key)
        .map_err(|_| DocError::type_mismatch(format!("{key} must be a string")))?;
    let change = parse_roles(
        cmd.get("roles").ok_or_else(|| {
            DocError::failed_to_parse(format!("{key} requires a \"roles\" array"))
        })?,
        db,
    )?;
    let u = existing(users, db, user)?;
    let mut roles = roles_of(&u);
    for r in change {
        if grant {
            if !roles.contains(&r) {
                roles.push(r);
            }
        } else {
            roles.retain(|x| *x != r);
        }
    }
    modify_user(users, db, user, doc! {"roles": roles_bson(&roles)})?;
    Ok(doc! {})
}

/// usersInfo: `1` (every user of the database), a name, `{user, db}`, or an array of these;
/// `showCredentials` adds the stored (salted) credentials.
pub fn users_info(users: &dyn UserStore, db: &str, cmd: &Document) -> DocResult<Document> {
    let show_credentials = matches!(cmd.get("showCredentials"), Some(Bson::Boolean(true)));
    if matches!(cmd.get("showPrivileges"), Some(Bson::Boolean(true))) {
        return Err(DocError::with_code(
            238,
            "NotImplemented",
            "usersInfo showPrivileges is not supported by flashdoc",
        ));
    }
    let one = |v: &Bson| -> DocResult<(String, String)> {
        match v {
            Bson::String(u) => Ok((db.to_string(), u.clone())),
            Bson::Document(d) => Ok((
                d.get_str("db").unwrap_or(db).to_string(),
                d.get_str("user")
                    .map_err(|_| DocError::bad_value("usersInfo entries need 'user'"))?
                    .to_string(),
            )),
            _ => Err(DocError::bad_value(
                "usersInfo expects a name, {user, db} or an array",
            )),
        }
    };
    let wanted: Option<Vec<String>> = match cmd.get("usersInfo") {
        Some(Bson::Int32(1)) | Some(Bson::Int64(1)) | Some(Bson::Double(_)) => None,
        Some(Bson::Array(a)) => Some(
            a.iter()
                .map(|v| one(v).map(|(d, u)| user_id(&d, &u)))
                .collect::<DocResult<_>>()?,
        ),
        Some(v) => {
            let (d, u) = one(v)?;
            Some(vec![user_id(&d, &u)])
        }
        None => return Err(DocError::bad_value("usersInfo needs an argument")),
    };
    let mut found = Vec::new();
    for mut u in users.all()? {
        let picked = match &wanted {
            None => u.get_str("db") == Ok(db),
            Some(ids) => u.get_str("_id").is_ok_and(|id| ids.iter().any(|w| w == id)),
        };
        if !picked {
            continue;
        }
        let mechs: Vec<Bson> = mechanisms_of(&u).into_iter().map(Bson::String).collect();
        if !show_credentials {
            u.remove("credentials");
        }
        u.insert("mechanisms", mechs);
        found.push(Bson::Document(u));
    }
    Ok(doc! {"users": found})
}

// ------------------------------------------------------------------ authentication

fn auth_failed() -> DocError {
    DocError::with_code(18, "AuthenticationFailed", "Authentication failed.")
}

fn payload_bytes(cmd: &Document) -> DocResult<Vec<u8>> {
    match cmd.get("payload") {
        Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
        Some(Bson::String(s)) => Ok(s.as_bytes().to_vec()),
        _ => Err(DocError::bad_value(
            "saslStart/saslContinue need a BinData 'payload'",
        )),
    }
}

/// saslStart (also run for hello's speculativeAuthenticate): the client-first message.
pub fn sasl_start(
    state: &ServerState,
    conn: &ConnInfo,
    db: &str,
    cmd: &Document,
) -> DocResult<Document> {
    let mech_name = cmd
        .get_str("mechanism")
        .map_err(|_| DocError::bad_value("saslStart needs a string 'mechanism'"))?;
    let Some(mech) = Mechanism::parse(mech_name) else {
        return Err(DocError::with_code(
            334,
            "MechanismUnavailable",
            format!("Received authentication for mechanism {mech_name} which is not enabled"),
        ));
    };
    let payload = payload_bytes(cmd)?;
    let user = scram::client_first_user(&payload).map_err(DocError::bad_value)?;
    let Some(cred) = credential(state, db, &user, mech)? else {
        return Err(auth_failed());
    };
    let (conv, server_first) =
        Conversation::start(mech, db, &payload, cred).map_err(DocError::bad_value)?;
    let skip_empty = cmd
        .get_document("options")
        .ok()
        .and_then(|o| o.get_bool("skipEmptyExchange").ok())
        .unwrap_or(false);
    let mut a = conn.auth.lock();
    a.conversation = Some(conv);
    a.skip_empty_exchange = skip_empty;
    Ok(doc! {"conversationId": 1, "done": false, "payload": scram::bin(server_first)})
}

/// saslContinue: the client-final message (the proof), then, without skipEmptyExchange, the
/// client's empty last step.
pub fn sasl_continue(state: &ServerState, conn: &ConnInfo, cmd: &Document) -> DocResult<Document> {
    let mut a = conn.auth.lock();
    let Some(mut conv) = a.conversation.take() else {
        return Err(DocError::with_code(
            17,
            "ProtocolError",
            "No SASL session state found",
        ));
    };
    if !matches!(
        cmd.get("conversationId"),
        Some(Bson::Int32(1)) | Some(Bson::Int64(1))
    ) {
        return Err(DocError::bad_value("unknown SASL conversationId"));
    }
    if conv.verified {
        return Ok(doc! {"conversationId": 1, "done": true, "payload": scram::bin(Vec::new())});
    }
    let server_final = conv
        .finish(&payload_bytes(cmd)?)
        .map_err(|_| auth_failed())?;
    let roles = if is_internal_user(&conv.db, &conv.user) {
        vec![(keyfile::INTERNAL_ROLE.to_string(), conv.db.clone())]
    } else {
        roles_of(&find_user(state.users(), &conv.db, &conv.user)?.ok_or_else(auth_failed)?)
    };
    let authed = AuthedUser {
        user: conv.user.clone(),
        db: conv.db.clone(),
        roles,
    };
    a.users
        .retain(|x| !(x.user == authed.user && x.db == authed.db));
    a.users.push(authed);
    crate::log::info(
        "ACCESS",
        &format!(
            "Successfully authenticated as principal {} on {} from client {} ({})",
            conv.user,
            conv.db,
            conn.peer,
            conv.mech.name()
        ),
    );
    let done = a.skip_empty_exchange;
    if !done {
        a.conversation = Some(conv);
    }
    Ok(doc! {"conversationId": 1, "done": done, "payload": scram::bin(server_final)})
}

/// hello's `saslSupportedMechs: "db.user"`: the user's mechanisms (none if no such user).
pub fn supported_mechs(state: &ServerState, ns_user: &str) -> Option<Vec<Bson>> {
    let (db, user) = ns_user.split_once('.')?;
    let u = find_user(state.users(), db, user).ok()??;
    Some(mechanisms_of(&u).into_iter().map(Bson::String).collect())
}

/// connectionStatus's authInfo.
pub fn auth_info(conn: &ConnInfo) -> Document {
    let a = conn.auth.lock();
    let users: Vec<Bson> = a
        .users
        .iter()
        .map(|u| Bson::Document(doc! {"user": u.user.clone(), "db": u.db.clone()}))
        .collect();
    let roles: Vec<Bson> = a.users.iter().flat_map(|u| roles_bson(&u.roles)).collect();
    doc! {"authInfo": {"authenticatedUsers": users, "authenticatedUserRoles": roles}}
}

/// The check before a command runs, over everything it reaches (`access::accesses`): no
/// access may name the users' or roles' collection (whatever the user, authorization on or
/// off: only the user commands reach them); with `enforce` (`security.authorization`), the
/// connection must be authenticated (or use the localhost exception to create the first user)
/// and its users must hold each access's action on its database.
pub fn check_accesses(
    state: &ServerState,
    conn: &ConnInfo,
    name: &str,
    accesses: &[Access],
    enforce: bool,
) -> DocResult<()> {
    if let Some(a) = accesses
        .iter()
        .find(|a| a.coll.as_deref().is_some_and(crate::access::is_protected))
    {
        return Err(DocError::with_code(
            13,
            "Unauthorized",
            format!(
                "not authorized on {} to execute command {{ {name}: ... }}: {} is reached only through the user commands (createUser, updateUser, dropUser, usersInfo), not by {}",
                a.db,
                a.namespace(),
                a.via
            ),
        ));
    }
    if !enforce || accesses.iter().all(|a| a.action == Action::Open) {
        return Ok(());
    }
    let users = conn.auth.lock();
    if !users.is_authenticated() {
        drop(users);
        let creates_first_user = name == "createUser"
            && accesses.iter().all(|a| a.db == USERS_DB)
            && localhost_exception(state, conn)?;
        if creates_first_user {
            return Ok(());
        }
        return Err(DocError::with_code(
            13,
            "Unauthorized",
            format!("Command {name} requires authentication"),
        ));
    }
    match accesses.iter().find(|a| !users.allows(a.action, &a.db)) {
        None => Ok(()),
        Some(a) => Err(DocError::with_code(
            13,
            "Unauthorized",
            format!(
                "not authorized on {} to execute command {{ {name}: ... }} ({} needs {:?} on {})",
                a.db,
                a.via,
                a.action,
                a.namespace()
            ),
        )),
    }
}

/// The check of a hook's own command with authorization on (`HookAccess`): a cluster-wide
/// action on `admin`, or the internal user only.
pub fn check_hook_command(
    state: &ServerState,
    conn: &ConnInfo,
    name: &str,
    access: HookAccess,
) -> DocResult<()> {
    let action = match access {
        HookAccess::Cluster(action) => action,
        HookAccess::Internal => {
            let internal = conn
                .auth
                .lock()
                .users
                .iter()
                .any(|u| is_internal_user(&u.db, &u.user));
            if internal {
                return Ok(());
            }
            return Err(DocError::with_code(
                13,
                "Unauthorized",
                format!("{name} is run only by members of the cluster (the internal user of security.keyFile)"),
            ));
        }
    };
    let access = Access {
        db: USERS_DB.to_string(),
        coll: None,
        action,
        via: name.to_string(),
    };
    check_accesses(state, conn, name, &[access], true)
}

/// Whether the connection may use (getMore, killCursors) a cursor opened by `owner`, as
/// mongod's `isCoauthorizedWith`: anyone with authorization off; with it on, a connection
/// with nobody authenticated a cursor opened so, and otherwise one sharing a user with it.
pub fn may_use_cursor(state: &ServerState, conn: &ConnInfo, owner: &[(String, String)]) -> bool {
    if state.config().security.authorization != Authorization::Enabled {
        return true;
    }
    let a = conn.auth.lock();
    if a.users.is_empty() {
        return owner.is_empty();
    }
    a.users.iter().any(|u| {
        owner
            .iter()
            .any(|(user, db)| *user == u.user && *db == u.db)
    })
}

/// The error for a cursor another user opened.
pub fn not_cursor_owner(id: i64) -> DocError {
    DocError::with_code(
        13,
        "Unauthorized",
        format!("cursor id {id} was not created by the authenticated user"),
    )
}

/// Whether the connection's users hold some privilege on `db` (an action on it, or on every
/// database, other than the session's and the cluster's): what lets `listCollections` run with
/// `authorizedCollections` and `nameOnly` without its own action, as in mongod. Roles grant
/// whole databases, so such a user has a privilege on every collection of `db`.
/// `actions` are every command's (the command table's).
pub fn has_privilege_on_db(
    conn: &ConnInfo,
    db: &str,
    mut actions: impl Iterator<Item = Action>,
) -> bool {
    let a = conn.auth.lock();
    a.is_authenticated()
        && actions.any(|action| {
            !matches!(
                action,
                Action::Open
                    | Action::Session
                    | Action::ClusterMonitor
                    | Action::ClusterAdmin
                    | Action::ListDatabases
            ) && a.allows(action, db)
        })
}

/// Whether `listDatabases` lists only the databases the connection's users hold a privilege
/// on (mongod's rule): with authorization on, as `authorizedDatabases` asks, or by default
/// unless the users hold the listDatabases action. A router lists its databases by it too.
pub fn lists_only_authorized_databases(
    state: &ServerState,
    conn: &ConnInfo,
    asked: Option<bool>,
) -> bool {
    let enforced = state.config().security.authorization == Authorization::Enabled;
    enforced && asked.unwrap_or_else(|| !conn.auth.lock().allows(Action::ListDatabases, USERS_DB))
}

/// The localhost exception: a loopback client may create the first user while none exists.
fn localhost_exception(state: &ServerState, conn: &ConnInfo) -> DocResult<bool> {
    Ok(state.params().enable_localhost_auth_bypass
        && conn.peer.ip().is_loopback()
        && !state.users().any()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_built_in_and_in_their_database() {
        assert!(parse_roles(&bson::bson!(["root"]), "app").is_err());
        assert!(parse_roles(&bson::bson!([{"role": "root", "db": "admin"}]), "app").is_ok());
        assert!(parse_roles(&bson::bson!(["nope"]), "app").is_err());
    }
}
