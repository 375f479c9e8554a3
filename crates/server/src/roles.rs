//! Authorization's vocabulary: what a command does ([`Action`], one per row of the command
//! table, `commands::table`), the built-in roles, and which role grants which action where
//! ([`role_grants`]). Every built-in role is a set of actions on its database, on every
//! database (`…AnyDatabase`), or on the cluster.

/// The database that holds the users (and where the `…AnyDatabase` roles are defined).
pub const USERS_DB: &str = "admin";
/// The users' collection, in [`USERS_DB`]; only the user commands read and write it.
pub const USERS_COLL: &str = "system.users";

/// What a command does, for authorization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Allowed to anyone, authenticated or not (handshake, ping, authentication).
    Open,
    /// Allowed to any authenticated user (about the session itself).
    Session,
    Find,
    Insert,
    Update,
    Remove,
    CreateCollection,
    DropCollection,
    DropDatabase,
    CreateIndex,
    DropIndex,
    ListCollections,
    ListIndexes,
    CollStats,
    DbStats,
    Validate,
    RenameCollection,
    /// `collMod` (dbAdmin's, as mongod's).
    CollMod,
    /// `compact` (dbAdmin's and hostManager's in mongod; flashdoc has no hostManager).
    Compact,
    /// `profile` (dbAdmin's `enableProfiler`).
    EnableProfiler,
    /// Creating, changing and dropping users and their roles.
    UserAdmin,
    ViewUser,
    /// Cluster-wide: serverStatus, hostInfo, getCmdLineOpts, getLog, getParameter.
    ClusterMonitor,
    /// Cluster-wide: listDatabases (every `…AnyDatabase` role and clusterMonitor have it).
    ListDatabases,
    /// Cluster-wide: shutdown, fsync, setParameter.
    ClusterAdmin,
}

/// Every action on a database (not the session's or the cluster's): holding any of them on a
/// database is a privilege there (what listDatabases' `authorizedDatabases` lists).
pub const DATABASE_ACTIONS: [Action; 19] = [
    Action::Find,
    Action::Insert,
    Action::Update,
    Action::Remove,
    Action::CreateCollection,
    Action::DropCollection,
    Action::DropDatabase,
    Action::CreateIndex,
    Action::DropIndex,
    Action::ListCollections,
    Action::ListIndexes,
    Action::CollStats,
    Action::DbStats,
    Action::Validate,
    Action::RenameCollection,
    Action::CollMod,
    Action::Compact,
    Action::EnableProfiler,
    Action::UserAdmin,
];

/// The built-in roles (the `…AnyDatabase` ones and `clusterMonitor` and `root` exist in
/// `admin` only).
pub const BUILTIN_ROLES: &[&str] = &[
    "read",
    "readWrite",
    "dbAdmin",
    "userAdmin",
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "dbAdminAnyDatabase",
    "userAdminAnyDatabase",
    "clusterMonitor",
    "root",
];

fn read_actions(a: Action) -> bool {
    matches!(
        a,
        Action::Find
            | Action::ListCollections
            | Action::ListIndexes
            | Action::CollStats
            | Action::DbStats
    )
}

fn write_actions(a: Action) -> bool {
    read_actions(a)
        || matches!(
            a,
            Action::Insert
                | Action::Update
                | Action::Remove
                | Action::CreateCollection
                | Action::DropCollection
                | Action::CreateIndex
                | Action::DropIndex
                | Action::RenameCollection
        )
}

fn db_admin_actions(a: Action) -> bool {
    matches!(
        a,
        Action::ListCollections
            | Action::ListIndexes
            | Action::CollStats
            | Action::DbStats
            | Action::Validate
            | Action::CollMod
            | Action::Compact
            | Action::EnableProfiler
            | Action::CreateCollection
            | Action::DropCollection
            | Action::DropDatabase
            | Action::CreateIndex
            | Action::DropIndex
            | Action::RenameCollection
    )
}

fn user_admin_actions(a: Action) -> bool {
    matches!(a, Action::UserAdmin | Action::ViewUser)
}

/// Whether `role` (defined in `role_db`) grants `action` on database `db`.
pub fn role_grants(role: &str, role_db: &str, action: Action, db: &str) -> bool {
    match action {
        Action::Open | Action::Session => return true,
        _ => {}
    }
    let any = role_db == USERS_DB;
    let cluster = matches!(
        action,
        Action::ClusterMonitor | Action::ClusterAdmin | Action::ListDatabases
    );
    let lists_databases = any && action == Action::ListDatabases;
    match role {
        "read" => !cluster && role_db == db && read_actions(action),
        "readWrite" => !cluster && role_db == db && write_actions(action),
        "dbAdmin" => !cluster && role_db == db && db_admin_actions(action),
        "userAdmin" => !cluster && role_db == db && user_admin_actions(action),
        "readAnyDatabase" => lists_databases || (any && read_actions(action)),
        "readWriteAnyDatabase" => lists_databases || (any && write_actions(action)),
        "dbAdminAnyDatabase" => lists_databases || (any && db_admin_actions(action)),
        "userAdminAnyDatabase" => lists_databases || (any && user_admin_actions(action)),
        // mongod's clusterMonitor also reads every database's statistics.
        "clusterMonitor" => {
            any && (matches!(action, Action::ClusterMonitor | Action::ListDatabases)
                || matches!(action, Action::CollStats | Action::DbStats))
        }
        "root" => any,
        // The internal user's role (`keyfile`): cluster members trust each other with
        // everything, as mongod's `__system`; no user can be granted it.
        crate::keyfile::INTERNAL_ROLE => role_db == crate::keyfile::INTERNAL_DB,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every action is a database's, or the session's or the cluster's: a new one must say
    /// which (the match has no catch-all).
    #[test]
    fn every_action_is_placed() {
        for a in DATABASE_ACTIONS {
            assert!(!matches!(
                a,
                Action::Open
                    | Action::Session
                    | Action::ViewUser
                    | Action::ClusterMonitor
                    | Action::ListDatabases
                    | Action::ClusterAdmin
            ));
        }
        let placed = |a: Action| match a {
            Action::Open
            | Action::Session
            | Action::ClusterMonitor
            | Action::ListDatabases
            | Action::ClusterAdmin => true,
            // usersInfo is a privilege on its database too; UserAdmin stands for both.
            Action::ViewUser => true,
            Action::Find
            | Action::Insert
            | Action::Update
            | Action::Remove
            | Action::CreateCollection
            | Action::DropCollection
            | Action::DropDatabase
            | Action::CreateIndex
            | Action::DropIndex
            | Action::ListCollections
            | Action::ListIndexes
            | Action::CollStats
            | Action::DbStats
            | Action::Validate
            | Action::RenameCollection
            | Action::CollMod
            | Action::Compact
            | Action::EnableProfiler
            | Action::UserAdmin => DATABASE_ACTIONS.contains(&a),
        };
        assert!(placed(Action::Find) && placed(Action::UserAdmin));
        assert!(DATABASE_ACTIONS.iter().all(|a| placed(*a)));
    }

    #[test]
    fn role_table() {
        assert!(role_grants("read", "app", Action::Find, "app"));
        assert!(!role_grants("read", "app", Action::Find, "other"));
        assert!(!role_grants("read", "app", Action::Insert, "app"));
        assert!(role_grants("readWrite", "app", Action::Insert, "app"));
        assert!(!role_grants("dbAdmin", "app", Action::Find, "app"));
        assert!(role_grants("dbAdmin", "app", Action::Validate, "app"));
        assert!(role_grants("dbAdmin", "app", Action::Compact, "app"));
        assert!(!role_grants("readWrite", "app", Action::Compact, "app"));
        assert!(role_grants("userAdmin", "app", Action::UserAdmin, "app"));
        assert!(!role_grants("userAdmin", "app", Action::Find, "app"));
        assert!(role_grants("readAnyDatabase", "admin", Action::Find, "x"));
        assert!(!role_grants("readAnyDatabase", "app", Action::Find, "app"));
        assert!(role_grants(
            "clusterMonitor",
            "admin",
            Action::ClusterMonitor,
            "admin"
        ));
        assert!(!role_grants(
            "clusterMonitor",
            "admin",
            Action::Find,
            "admin"
        ));
        assert!(role_grants("root", "admin", Action::ClusterAdmin, "admin"));
        assert!(role_grants(
            "__system",
            "local",
            Action::ClusterAdmin,
            "admin"
        ));
        assert!(role_grants("__system", "local", Action::Insert, "app"));
        assert!(!role_grants("__system", "app", Action::Find, "app"));
        assert!(!BUILTIN_ROLES.contains(&"__system"));
        assert!(!role_grants(
            "readWrite",
            "app",
            Action::ClusterMonitor,
            "app"
        ));
    }
}
