//! The command table: every command the server runs, one row each, in the spirit of
//! WiredTiger's `dist/api_data.py` and the query crate's operator table (`expr/ops.rs`). A row
//! is a command's facts ([`Spec`]: names, fields, authorization action, write concern, Stable
//! API, what it reads or writes, how it is counted and profiled) and its handler. The
//! dispatcher, the field checks, authorization, `listCommands`, currentOp, serverStatus and the
//! profiler read this table and nothing else: adding a command is one row and one handler.

use super::call::Call;
use super::{admin, catalog, crud, cursor, map_reduce, read, testing, users};
use crate::roles::Action;
use crate::spec::{Fields, Namespace, OpKind, Spec};
use bson::{doc, Document};
use docdb::DocResult;

/// A command's implementation: its reply (without `ok`, which the dispatcher adds), or its
/// error.
pub(crate) type Handler = fn(&Call<'_>) -> DocResult<Document>;

/// One row.
pub(crate) struct Command {
    pub spec: Spec,
    pub run: Handler,
}

/// A row: the command `name`, run by `run`, checked by authorization as `action`, reading or
/// writing `namespace`; the defaults of [`Spec::new`] until a builder below says otherwise.
const fn command(name: &'static str, run: Handler, action: Action, ns: Namespace) -> Command {
    Command {
        spec: Spec::new(name, action, ns),
        run,
    }
}

impl Command {
    const fn aliases(mut self, aliases: &'static [&'static str]) -> Command {
        self.spec.aliases = aliases;
        self
    }
    /// Takes these fields and no others (`unsupported`: mongod's, refused as NotImplemented).
    const fn fields(
        mut self,
        known: &'static [&'static str],
        unsupported: &'static [&'static str],
    ) -> Command {
        self.spec.fields = Fields::Only { known, unsupported };
        self
    }
    /// Writes, so takes a `writeConcern`.
    const fn writes(mut self) -> Command {
        self.spec.write_concern = true;
        self
    }
    const fn api_v1(mut self) -> Command {
        self.spec.api_v1 = true;
        self
    }
    const fn op(mut self, op: OpKind) -> Command {
        self.spec.op = op;
        self
    }
    /// Never profiled (its payload may carry credentials).
    const fn unprofiled(mut self) -> Command {
        self.spec.profiled = false;
        self
    }
    const fn ends_server(mut self) -> Command {
        self.spec.ends_server = true;
        self
    }
    /// Served only with `enableTestCommands`.
    const fn test_only(mut self) -> Command {
        self.spec.test_only = true;
        self
    }
}

use Action as A;
use Namespace as Ns;

/// Every command, in `listCommands`' order.
pub(crate) static COMMANDS: &[Command] = &[
    // The handshake and authentication: open to anyone.
    command("hello", admin::hello, A::Open, Ns::Server)
        .api_v1()
        .unprofiled(),
    command("isMaster", admin::hello, A::Open, Ns::Server)
        .aliases(&["ismaster"])
        .unprofiled(),
    command("ping", admin::ping, A::Open, Ns::Server).api_v1(),
    command("saslStart", users::sasl_start, A::Open, Ns::Users)
        .api_v1()
        .unprofiled(),
    command("saslContinue", users::sasl_continue, A::Open, Ns::Users)
        .api_v1()
        .unprofiled(),
    command("authenticate", users::authenticate, A::Open, Ns::Server)
        .api_v1()
        .unprofiled(),
    command("logout", users::logout, A::Open, Ns::Server).unprofiled(),
    // About the session itself: any authenticated user.
    command("buildInfo", admin::build_info_cmd, A::Session, Ns::Server).aliases(&["buildinfo"]),
    command(
        "connectionStatus",
        users::connection_status,
        A::Session,
        Ns::Server,
    ),
    command("whatsmyuri", admin::whatsmyuri, A::Session, Ns::Server),
    command("listCommands", list_commands, A::Session, Ns::Server),
    command("endSessions", admin::end_sessions, A::Session, Ns::Server).api_v1(),
    command("startSession", admin::start_session, A::Session, Ns::Server),
    command(
        "refreshSessions",
        admin::sessions_noop,
        A::Session,
        Ns::Server,
    )
    .api_v1(),
    command("killSessions", admin::sessions_noop, A::Session, Ns::Server),
    command(
        "killAllSessions",
        admin::sessions_noop,
        A::Session,
        Ns::Server,
    ),
    command(
        "commitTransaction",
        admin::transaction,
        A::Session,
        Ns::Server,
    )
    .writes()
    .api_v1(),
    command(
        "abortTransaction",
        admin::transaction,
        A::Session,
        Ns::Server,
    )
    .writes()
    .api_v1(),
    // Reads.
    command("getMore", cursor::get_more, A::Find, Ns::Cursors)
        .fields(
            &["collection", "batchSize"],
            &["term", "lastKnownCommittedOpTime"],
        )
        .api_v1()
        .op(OpKind::GetMore),
    command("killCursors", cursor::kill_cursors, A::Find, Ns::Cursors)
        .fields(&["cursors"], &[])
        .api_v1(),
    command("find", read::find, A::Find, Ns::Collection)
        .fields(
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
                "let",
                "min",
                "max",
                "returnKey",
                "showRecordId",
            ],
            &["readOnce", "term"],
        )
        .api_v1()
        .op(OpKind::Query),
    command("count", read::count, A::Find, Ns::Collection)
        .fields(&["query", "skip", "limit", "hint", "collation"], &[])
        .api_v1(),
    // Not in the Stable API's version 1 (mongod's APIStrictError under apiStrict).
    command("distinct", read::distinct, A::Find, Ns::Collection)
        .fields(&["key", "query", "collation", "hint"], &[]),
    command("mapReduce", map_reduce::map_reduce, A::Find, Ns::Collection)
        .aliases(&["mapreduce"])
        .fields(
            &[
                "map",
                "reduce",
                "out",
                "query",
                "sort",
                "limit",
                "finalize",
                "scope",
                "collation",
            ],
            &["jsMode", "verbose", "bypassDocumentValidation"],
        )
        .writes(),
    command(
        "aggregate",
        read::aggregate,
        A::Find,
        Ns::CollectionOrDatabase,
    )
    .fields(
        &[
            "pipeline",
            "cursor",
            "explain",
            "allowDiskUse",
            "collation",
            "hint",
            "let",
            "bypassDocumentValidation",
        ],
        &[],
    )
    .api_v1(),
    command("explain", read::explain, A::Find, Ns::Explained).api_v1(),
    // Writes.
    command("insert", crud::insert, A::Insert, Ns::Collection)
        .fields(&["documents", "ordered", "bypassDocumentValidation"], &[])
        .writes()
        .api_v1()
        .op(OpKind::Insert),
    command("update", crud::update, A::Update, Ns::Collection)
        .fields(
            &["updates", "ordered", "bypassDocumentValidation", "let"],
            &[],
        )
        .writes()
        .api_v1()
        .op(OpKind::Update),
    command(
        "findAndModify",
        crud::find_and_modify,
        A::Update,
        Ns::Collection,
    )
    .aliases(&["findandmodify"])
    .fields(
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
            "hint",
            "let",
        ],
        &[],
    )
    .writes()
    .api_v1(),
    command("delete", crud::delete, A::Remove, Ns::Collection)
        .fields(&["deletes", "ordered", "let"], &[])
        .writes()
        .api_v1()
        .op(OpKind::Remove),
    // The catalog.
    command(
        "create",
        catalog::create,
        A::CreateCollection,
        Ns::Collection,
    )
    .writes()
    .api_v1(),
    command(
        "drop",
        catalog::drop_collection,
        A::DropCollection,
        Ns::Collection,
    )
    .fields(&[], &[])
    .writes()
    .api_v1(),
    command(
        "dropDatabase",
        catalog::drop_database,
        A::DropDatabase,
        Ns::Database,
    )
    .writes()
    .api_v1(),
    command(
        "renameCollection",
        catalog::rename_collection,
        A::RenameCollection,
        Ns::Namespaces,
    )
    .fields(&["to", "dropTarget"], &["stayTemp"])
    .writes(),
    command(
        "createIndexes",
        catalog::create_indexes,
        A::CreateIndex,
        Ns::Collection,
    )
    .fields(&["indexes", "commitQuorum"], &[])
    .writes()
    .api_v1(),
    command(
        "dropIndexes",
        catalog::drop_indexes,
        A::DropIndex,
        Ns::Collection,
    )
    .aliases(&["deleteIndexes"])
    .fields(&["index"], &[])
    .writes()
    .api_v1(),
    command(
        "listCollections",
        catalog::list_collections,
        A::ListCollections,
        Ns::Database,
    )
    .fields(
        &["filter", "nameOnly", "authorizedCollections", "cursor"],
        &[],
    )
    .api_v1(),
    command(
        "listIndexes",
        catalog::list_indexes,
        A::ListIndexes,
        Ns::IndexList,
    )
    .fields(&["cursor"], &[])
    .api_v1(),
    command(
        "collStats",
        catalog::coll_stats,
        A::CollStats,
        Ns::Collection,
    )
    .fields(&["scale"], &[]),
    command("dbStats", catalog::db_stats, A::DbStats, Ns::Database)
        .fields(&["scale"], &["freeStorage"]),
    command("validate", catalog::validate, A::Validate, Ns::Collection).fields(
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
    // The document layer refuses the options it does not implement, with the reason.
    command("collMod", catalog::coll_mod, A::CollMod, Ns::Collection)
        .fields(
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
        )
        .writes(),
    command("compact", catalog::compact, A::Compact, Ns::Collection)
        .fields(&["force", "freeSpaceTargetMB", "dryRun"], &[]),
    command("profile", catalog::profile, A::EnableProfiler, Ns::Database)
        .fields(&["slowms", "sampleRate", "filter"], &[]),
    // Users.
    command("createUser", users::create_user, A::UserAdmin, Ns::Users).writes(),
    command("updateUser", users::update_user, A::UserAdmin, Ns::Users).writes(),
    command("dropUser", users::drop_user, A::UserAdmin, Ns::Users).writes(),
    command(
        "grantRolesToUser",
        users::grant_roles,
        A::UserAdmin,
        Ns::Users,
    )
    .writes(),
    command(
        "revokeRolesFromUser",
        users::revoke_roles,
        A::UserAdmin,
        Ns::Users,
    )
    .writes(),
    command("usersInfo", users::users_info, A::ViewUser, Ns::Users),
    // The cluster: every database, the server's state and its operations.
    // Any user lists the databases they hold a privilege on; the listDatabases action shows
    // every one (mongod's `authorizedDatabases`).
    command(
        "listDatabases",
        catalog::list_databases,
        A::ListDatabases,
        Ns::AuthorizedDatabases,
    )
    .fields(&["filter", "nameOnly", "authorizedDatabases"], &[])
    .api_v1(),
    command(
        "serverStatus",
        admin::server_status,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command(
        "hostInfo",
        admin::host_info_cmd,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command(
        "getCmdLineOpts",
        admin::get_cmd_line_opts,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command("getLog", admin::get_log, A::ClusterMonitor, Ns::Server),
    // Replica sets (`--replSet`; a standalone answers NoReplicationEnabled, as mongod).
    command(
        "replSetInitiate",
        admin::repl_set_initiate,
        A::ClusterAdmin,
        Ns::Server,
    ),
    command(
        "replSetGetStatus",
        admin::repl_set_get_status,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command(
        "replSetGetConfig",
        admin::repl_set_get_config,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command(
        "replSetStepDown",
        admin::repl_set_step_down,
        A::ClusterAdmin,
        Ns::Server,
    )
    .fields(&["secondaryCatchUpPeriodSecs", "force"], &[]),
    command(
        "replSetFreeze",
        admin::repl_set_freeze,
        A::ClusterAdmin,
        Ns::Server,
    )
    .fields(&[], &[]),
    command(
        "replSetReconfig",
        admin::repl_set_reconfig,
        A::ClusterAdmin,
        Ns::Server,
    )
    .fields(&["force"], &[]),
    command(
        "getDefaultRWConcern",
        admin::get_default_rw_concern,
        A::ClusterMonitor,
        Ns::Server,
    )
    .fields(&["inMemory"], &[]),
    command(
        "setDefaultRWConcern",
        admin::set_default_rw_concern,
        A::ClusterAdmin,
        Ns::Server,
    )
    .fields(&["defaultReadConcern", "defaultWriteConcern"], &[])
    .writes(),
    command(
        "getParameter",
        admin::get_parameter_cmd,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command(
        "currentOp",
        admin::current_op_cmd,
        A::ClusterMonitor,
        Ns::Server,
    ),
    command(
        "setParameter",
        admin::set_parameter_cmd,
        A::ClusterAdmin,
        Ns::Server,
    ),
    command("killOp", admin::kill_op, A::ClusterAdmin, Ns::Server).fields(&["op"], &[]),
    command("fsync", admin::fsync, A::ClusterAdmin, Ns::Databases),
    command("shutdown", admin::shutdown, A::ClusterAdmin, Ns::Server).ends_server(),
    // Test commands (mongod's enableTestCommands).
    command(
        "configureFailPoint",
        testing::configure_fail_point,
        A::ClusterAdmin,
        Ns::Server,
    )
    .fields(&["mode", "data"], &[])
    .test_only(),
    command(
        "waitForFailPoint",
        testing::wait_for_fail_point,
        A::ClusterAdmin,
        Ns::Server,
    )
    .fields(&["timesEntered"], &[])
    .test_only(),
    command("sleep", testing::sleep, A::ClusterAdmin, Ns::Server)
        .fields(&["millis", "secs", "lock"], &[])
        .test_only(),
    command(
        "testVersion2",
        testing::test_version,
        A::Session,
        Ns::Server,
    )
    .fields(&[], &[])
    .test_only(),
];

/// The row of the command called `name` (by its name or an alias).
pub(crate) fn lookup(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.spec.names().any(|n| n == name))
}

/// Every name of every command but the test commands (what listCommands lists without
/// `enableTestCommands`).
pub fn names() -> impl Iterator<Item = &'static str> {
    COMMANDS
        .iter()
        .filter(|c| !c.spec.test_only)
        .flat_map(|c| c.spec.names())
}

/// Every command's action, for a check over all of them (`auth::has_privilege_on_db`).
pub(crate) fn actions() -> impl Iterator<Item = Action> {
    COMMANDS.iter().map(|c| c.spec.action)
}

/// listCommands: every name of every row (the test commands only when they exist).
fn list_commands(call: &Call) -> DocResult<Document> {
    let test_commands = call.state.params().enable_test_commands;
    let mut cmds = Document::new();
    for c in COMMANDS
        .iter()
        .filter(|c| test_commands || !c.spec.test_only)
    {
        let requires_auth = c.spec.action != Action::Open;
        for n in c.spec.names() {
            cmds.insert(
                n,
                doc! {"help": "", "requiresAuth": requires_auth, "secondaryOk": true, "adminOnly": false},
            );
        }
    }
    Ok(doc! {"commands": cmds})
}
