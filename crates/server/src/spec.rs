//! What the command table (`commands::table`) says of a command, apart from its handler: its
//! names, the fields it takes, the action authorization checks, whether it takes a write
//! concern or is in the Stable API, what it reads or writes, and how currentOp, serverStatus
//! and the profiler count it. Kept apart from the handlers so that the parts of the server the
//! handlers use (the operation registry, the profiler, the shared state) can read a row too.

use crate::roles::Action;

/// The fields a command takes after its own name, beyond the generic ones every command may
/// carry (`commands::fields::GENERIC_FIELDS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fields {
    /// Not checked by name: the fields are the command's arguments (currentOp's filter,
    /// getParameter's parameter names, a user's description), which its handler checks.
    Arguments,
    /// These and no others: `known` are taken; `unsupported` are mongod's fields flashdoc
    /// refuses with NotImplemented (238); any other is an unknown field (40415).
    Only {
        known: &'static [&'static str],
        unsupported: &'static [&'static str],
    },
}

/// What a command reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    /// No data: the server, the connection or its session.
    Server,
    /// The command's database as a whole (its listing, its statistics, dropping it).
    Database,
    /// The collection its first field names, in the command's database: the dispatcher reads
    /// the name (`commands::call::Call::coll`) before the handler runs.
    Collection,
    /// The index list of the collection its first field names: the catalog, none of its
    /// documents (so even the users' collection may be listed).
    IndexList,
    /// The collection its first field names, or the database when that field is 1 (an
    /// aggregation without a collection).
    CollectionOrDatabase,
    /// The collections of the cursors it names.
    Cursors,
    /// What the command it explains reads.
    Explained,
    /// Two full namespaces, `db.collection`: its first field and `to`.
    Namespaces,
    /// The users of the command's database, kept in `admin.system.users`.
    Users,
    /// Every database (flushing them).
    Databases,
    /// The databases the connection's users hold a privilege on (listDatabases; every
    /// database for a user with the listDatabases action, unless `authorizedDatabases: true`).
    AuthorizedDatabases,
}

/// How currentOp and the profiler name a command's operation (`op`), and which of
/// serverStatus' `opcounters` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Insert,
    Query,
    Update,
    Remove,
    GetMore,
    Command,
}

impl OpKind {
    /// In the order serverStatus lists its `opcounters`.
    pub const ALL: [OpKind; 6] = [
        OpKind::Insert,
        OpKind::Query,
        OpKind::Update,
        OpKind::Remove,
        OpKind::GetMore,
        OpKind::Command,
    ];

    /// currentOp's and the profiler's `op`.
    pub fn op_name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Query => "query",
            OpKind::Update => "update",
            OpKind::Remove => "remove",
            OpKind::GetMore => "getmore",
            OpKind::Command => "command",
        }
    }

    /// serverStatus' `opcounters` field.
    pub fn counter_name(self) -> &'static str {
        match self {
            OpKind::Remove => "delete",
            other => other.op_name(),
        }
    }

    /// The position in [`OpKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One command's facts.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub name: &'static str,
    /// Other names of the same command (legacy spellings); never in the Stable API.
    pub aliases: &'static [&'static str],
    pub fields: Fields,
    /// What authorization checks (`roles::role_grants`).
    pub action: Action,
    /// Takes a `writeConcern` (the commands that write; mongod refuses it on the others).
    pub write_concern: bool,
    /// In Stable API version 1 (`apiStrict: true` refuses the others).
    pub api_v1: bool,
    pub namespace: Namespace,
    pub op: OpKind,
    /// Written to `system.profile` when its database profiles (not the handshake and the
    /// authentication commands: their payloads carry credentials).
    pub profiled: bool,
    /// The server shuts down once the command has replied.
    pub ends_server: bool,
    /// Exists only with `enableTestCommands` (mongod's test commands); otherwise it is no
    /// command at all (CommandNotFound).
    pub test_only: bool,
}

impl Spec {
    /// A command that takes no field of its own by name, in no API version, with no write
    /// concern, counted as a command and profiled.
    pub const fn new(name: &'static str, action: Action, namespace: Namespace) -> Spec {
        Spec {
            name,
            aliases: &[],
            fields: Fields::Arguments,
            action,
            write_concern: false,
            api_v1: false,
            namespace,
            op: OpKind::Command,
            profiled: true,
            ends_server: false,
            test_only: false,
        }
    }

    /// Every name the command answers to.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }

    /// Whether `name` (one of this command's) is in Stable API version 1.
    pub fn in_api_v1(&self, name: &str) -> bool {
        self.api_v1 && name == self.name
    }
}
