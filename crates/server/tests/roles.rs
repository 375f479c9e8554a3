//! Role enforcement walks the whole command table: for every built-in role, every command
//! `listCommands` returns is run (on an application database and on `admin`) by a connection
//! holding only that role, and it is refused with Unauthorized (13) exactly when MongoDB's
//! built-in role reference says the role lacks it there. The expectation is written out below,
//! command by command, from that reference, not computed with the server's own table.

use bson::{doc, Bson, Document};
use server::client::AuthedUser;
use server::config::{Authorization, ServerConfig};
use server::roles::BUILTIN_ROLES;
use server::state::{ConnInfo, ServerState};
use std::sync::Arc;

fn state() -> Arc<ServerState> {
    let db = docdb::DocDb::open(docdb::DocDbConfig::in_memory()).unwrap();
    let mut cfg = ServerConfig::default();
    cfg.security.authorization = Authorization::Enabled;
    Arc::new(ServerState::new(db, &cfg))
}

fn conn(st: &ServerState, roles: &[(&str, &str)]) -> ConnInfo {
    let c = st.new_connection("10.0.0.7:4000".parse().unwrap()).unwrap();
    if !roles.is_empty() {
        c.auth.lock().users.push(AuthedUser {
            user: "u".into(),
            db: "admin".into(),
            roles: roles
                .iter()
                .map(|(r, d)| (r.to_string(), d.to_string()))
                .collect(),
        });
    }
    c
}

// MongoDB's built-in roles (manual, "Built-In Roles"), as commands.
/// Any client, authenticated or not.
const OPEN: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "saslStart",
    "saslContinue",
    "authenticate",
    "logout",
];
/// Any authenticated user: about the session itself, and listDatabases (which lists the
/// databases the user holds a privilege on, mongod's `authorizedDatabases`).
const SESSION: &[&str] = &[
    "listDatabases",
    "buildInfo",
    "buildinfo",
    "connectionStatus",
    "whatsmyuri",
    "listCommands",
    "endSessions",
    "startSession",
    "refreshSessions",
    "killSessions",
    "killAllSessions",
    "commitTransaction",
    "abortTransaction",
];
/// `read`: find, listCollections, listIndexes, collStats, dbStats (and the cursors' commands).
const READ: &[&str] = &[
    "find",
    "count",
    "distinct",
    "aggregate",
    // mapReduce inline; its `out` to a collection also needs the target's write actions.
    "mapReduce",
    "mapreduce",
    "explain",
    "getMore",
    "killCursors",
    "listCollections",
    "listIndexes",
    "collStats",
    "dbStats",
];
/// `readWrite`: `read` and insert, update, remove, createCollection, dropCollection,
/// createIndex, dropIndex, renameCollectionSameDB.
const WRITE: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "create",
    "drop",
    "createIndexes",
    "dropIndexes",
    "deleteIndexes",
    "renameCollection",
];
/// `dbAdmin`: collStats, dbStats, listCollections, listIndexes, validate, createCollection,
/// dropCollection, dropDatabase, createIndex, dropIndex, renameCollectionSameDB, collMod,
/// compact, enableProfiler; no find.
const DB_ADMIN: &[&str] = &[
    "listCollections",
    "listIndexes",
    "collStats",
    "dbStats",
    "validate",
    "create",
    "drop",
    "dropDatabase",
    "createIndexes",
    "dropIndexes",
    "deleteIndexes",
    "renameCollection",
    "collMod",
    "compact",
    "profile",
];
/// `userAdmin`: createUser, dropUser, changePassword/changeCustomData (updateUser), grantRole,
/// revokeRole, viewUser.
const USER_ADMIN: &[&str] = &[
    "createUser",
    "updateUser",
    "dropUser",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "usersInfo",
];
/// `clusterMonitor`'s cluster actions (and collStats and dbStats on every database).
const CLUSTER_MONITOR: &[&str] = &[
    "serverStatus",
    "hostInfo",
    "getCmdLineOpts",
    "getLog",
    "getParameter",
    "currentOp",
    "replSetGetStatus",
    "replSetGetConfig",
    "getDefaultRWConcern",
];
/// `clusterAdmin`'s, which only `root` has among the roles flashdoc has.
const CLUSTER_ADMIN: &[&str] = &[
    "setParameter",
    "fsync",
    "shutdown",
    "killOp",
    "replSetInitiate",
    "replSetStepDown",
    "replSetFreeze",
    "replSetReconfig",
    "setDefaultRWConcern",
];

/// Whether `role` (the database roles defined in `app`, the others in `admin`) may run `name`
/// on `db`.
fn expected(role: &str, name: &str, db: &str) -> bool {
    let is = |list: &[&str]| list.contains(&name);
    let on_app = db == "app";
    if is(OPEN) || is(SESSION) {
        return true;
    }
    match role {
        "read" => on_app && is(READ),
        "readWrite" => on_app && (is(READ) || is(WRITE)),
        "dbAdmin" => on_app && is(DB_ADMIN),
        "userAdmin" => on_app && is(USER_ADMIN),
        // Each …AnyDatabase role also lists the databases.
        "readAnyDatabase" => is(READ) || name == "listDatabases",
        "readWriteAnyDatabase" => is(READ) || is(WRITE) || name == "listDatabases",
        "dbAdminAnyDatabase" => is(DB_ADMIN) || name == "listDatabases",
        "userAdminAnyDatabase" => is(USER_ADMIN) || name == "listDatabases",
        "clusterMonitor" => is(CLUSTER_MONITOR) || name == "collStats" || name == "dbStats",
        "root" => true,
        other => panic!("no expectation written for role {other}"),
    }
}

fn code(r: &Document) -> Option<i32> {
    r.get_i32("code").ok()
}

fn run(st: &Arc<ServerState>, c: &ConnInfo, name: &str, db: &str) -> Document {
    // `c` as the target collection or value: enough for every command to reach its check.
    let arg = match name {
        "getMore" => Bson::Int64(1),
        "usersInfo" | "listCommands" | "hello" | "ping" => Bson::Int32(1),
        _ => Bson::String("c".into()),
    };
    let cmd = doc! {name: arg, "$db": db};
    server::commands::run(st, &cmd, c).0
}

#[test]
fn every_listed_command_for_every_builtin_role() {
    let st = state();
    let listed = run(
        &st,
        &conn(&st, &[("root", "admin")]),
        "listCommands",
        "admin",
    );
    let names: Vec<String> = listed
        .get_document("commands")
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(names.len(), server::commands::command_names().count());
    // Every listed command is in the expectation, so a new command needs a line above.
    let all = [
        OPEN,
        SESSION,
        READ,
        WRITE,
        DB_ADMIN,
        USER_ADMIN,
        CLUSTER_MONITOR,
        CLUSTER_ADMIN,
    ];
    for name in &names {
        assert!(
            all.iter().any(|l| l.contains(&name.as_str())),
            "{name} has no expectation"
        );
    }
    for &role in BUILTIN_ROLES {
        let role_db = if matches!(role, "read" | "readWrite" | "dbAdmin" | "userAdmin") {
            "app"
        } else {
            "admin"
        };
        let c = conn(&st, &[(role, role_db)]);
        for name in &names {
            if name == "shutdown" || name == "logout" {
                continue; // would end the test's own session or server loop
            }
            for db in ["app", "admin"] {
                let r = run(&st, &c, name, db);
                let granted = expected(role, name, db);
                assert_eq!(
                    code(&r) == Some(13),
                    !granted,
                    "{role}@{role_db} running {name} on {db}: {r}"
                );
            }
        }
    }
}

#[test]
fn unauthenticated_clients_may_only_handshake_and_authenticate() {
    let st = state();
    let c = conn(&st, &[]);
    for name in ["hello", "isMaster", "ping", "saslStart"] {
        assert_ne!(code(&run(&st, &c, name, "admin")), Some(13), "{name}");
    }
    for name in [
        "find",
        "insert",
        "listDatabases",
        "buildInfo",
        "createUser",
        "serverStatus",
    ] {
        assert_eq!(code(&run(&st, &c, name, "admin")), Some(13), "{name}");
    }
    // The localhost exception: only over loopback, only createUser in admin, only while no
    // user exists.
    let local = st
        .new_connection("127.0.0.1:5000".parse().unwrap())
        .unwrap();
    let create = doc! {"createUser": "boss", "pwd": "pw", "roles": ["root"], "$db": "admin"};
    let far = conn(&st, &[]);
    assert_eq!(code(&server::commands::run(&st, &create, &far).0), Some(13));
    assert_eq!(code(&run(&st, &local, "find", "admin")), Some(13));
    let r = server::commands::run(&st, &create, &local).0;
    assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
    let again = doc! {"createUser": "second", "pwd": "pw", "roles": ["root"], "$db": "admin"};
    assert_eq!(
        code(&server::commands::run(&st, &again, &local).0),
        Some(13)
    );
}

#[test]
fn spot_checks_independent_of_the_table() {
    let st = state();
    let reader = conn(&st, &[("read", "app")]);
    assert_ne!(code(&run(&st, &reader, "find", "app")), Some(13));
    assert_eq!(code(&run(&st, &reader, "insert", "app")), Some(13));
    assert_eq!(code(&run(&st, &reader, "find", "other")), Some(13));
    let admin = conn(&st, &[("dbAdmin", "app")]);
    assert_eq!(code(&run(&st, &admin, "find", "app")), Some(13));
    assert_ne!(code(&run(&st, &admin, "validate", "app")), Some(13));
    let monitor = conn(&st, &[("clusterMonitor", "admin")]);
    assert_ne!(code(&run(&st, &monitor, "serverStatus", "admin")), Some(13));
    assert_eq!(code(&run(&st, &monitor, "find", "admin")), Some(13));
    let root = conn(&st, &[("root", "admin")]);
    for name in [
        "find",
        "insert",
        "serverStatus",
        "setParameter",
        "createUser",
    ] {
        assert_ne!(code(&run(&st, &root, name, "app")), Some(13), "{name}");
    }
    // Nobody touches admin.system.users directly.
    let r = server::commands::run(&st, &doc! {"find": "system.users", "$db": "admin"}, &root).0;
    assert_eq!(code(&r), Some(13));
}

/// A view on the users' collection that exists already (created below the server, as a
/// catalog from before the check would hold it) is refused when read, by any path, to root
/// too: the check follows views at read time, not only when they are defined.
#[test]
fn a_stored_view_on_the_users_collection_is_refused_when_read() {
    let st = state();
    st.db()
        .create_collection(
            "admin",
            "leak",
            &doc! {"viewOn": "system.users", "pipeline": []},
        )
        .unwrap();
    st.db()
        .create_collection("admin", "leak2", &doc! {"viewOn": "leak", "pipeline": []})
        .unwrap();
    let out = st.db().insert(
        "admin",
        "notes",
        vec![doc! {"_id": 1}],
        docdb::WriteOpts::default(),
    );
    assert!(out.write_errors.is_empty());
    let root = conn(&st, &[("root", "admin")]);
    let rw = conn(&st, &[("readWrite", "admin")]);
    let reads = [
        doc! {"find": "leak2", "$db": "admin"},
        doc! {"count": "leak2", "$db": "admin"},
        doc! {"aggregate": "leak2", "pipeline": [], "cursor": {}, "$db": "admin"},
        doc! {"explain": {"find": "leak2"}, "$db": "admin"},
        doc! {"aggregate": "notes", "pipeline": [
        {"$lookup": {"from": "leak2", "as": "x", "pipeline": []}}], "cursor": {}, "$db": "admin"},
        doc! {"aggregate": "notes", "pipeline": [{"$unionWith": "leak"}], "cursor": {}, "$db": "admin"},
    ];
    for c in [&root, &rw] {
        for cmd in &reads {
            let r = server::commands::run(&st, cmd, c).0;
            assert_eq!(code(&r), Some(13), "{cmd}: {r}");
        }
    }
    // The same commands on a harmless collection run.
    let r = server::commands::run(&st, &doc! {"find": "notes", "$db": "admin"}, &rw).0;
    assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
}
