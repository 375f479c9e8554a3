//! The router (mongos). Drivers connect to it as to a mongos: `hello` says
//! `msg: "isdbgrid"`, and every command that touches data is routed to shards; the handshake,
//! session and diagnostic commands are the server's own.
//!
//! It keeps a cached routing table per sharded collection (a [`CollSnapshot`] with its chunk
//! versions) and attaches each shard's version to every request; a shard that answers
//! StaleConfig (13388) or StaleEpoch (150) makes the router reload the table and retry, at
//! most [`MAX_STALE_RETRIES`] times. Unsharded collections live on their database's primary
//! shard (chosen when the database is first used) and are sent the UNSHARDED version.

mod admin;
pub mod autosplit;
pub mod balancer;
mod migrations;
mod read;
mod write;

use crate::meta::{Catalog, CollSnapshot, DatabaseEntry};
use crate::split::SplitPolicy;
use crate::transport::{call_ok, Connector, ShardConn};
use crate::version::{ChunkVersion, STALE_CONFIG, STALE_EPOCH};
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use parking_lot::{Mutex, RwLock};
use server::hook::{CommandCall, CommandHook, HookAccess};
use server::reply::error_reply;
use server::roles::Action;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Attempts of one operation that shards answer with StaleConfig.
pub const MAX_STALE_RETRIES: usize = 10;

pub struct RouterOptions {
    /// This router's name in locks and the changelog.
    pub id: String,
    /// `configureFailPoint` is served (mongod's `enableTestCommands`).
    pub test_commands: bool,
    /// Split checks run on the writing thread (deterministic; the lab) instead of a
    /// background thread.
    pub inline_autosplit: bool,
    /// The balancer's migrations wait for the donor's range deletion (`_waitForDelete`)
    /// instead of leaving it to a background thread (deterministic; the lab).
    pub balancer_waits_for_delete: bool,
}

pub struct Router {
    me: Weak<Router>,
    catalog: Catalog,
    config_db: String,
    connector: Arc<dyn Connector>,
    /// Routing tables by namespace; `None`: known to be unsharded.
    tables: RwLock<HashMap<String, Option<Arc<CollSnapshot>>>>,
    databases: RwLock<HashMap<String, DatabaseEntry>>,
    conns: RwLock<HashMap<String, Arc<dyn ShardConn>>>,
    pub(crate) options: RouterOptions,
    pub autosplit: autosplit::AutoSplit,
    pub balancer: balancer::Balancer,
    failpoint: Mutex<Option<FailPoint>>,
    settings: Mutex<Option<(Instant, Arc<Settings>)>>,
}

/// The cluster settings a router acts on (`config.settings`), cached for a second.
#[derive(Clone, Debug)]
pub struct Settings {
    pub chunk_bytes: i64,
    pub autosplit: bool,
    pub balancer_on: bool,
    pub balancer_policy: balancer::BalancerPolicy,
    pub policy: SplitPolicy,
}

const SETTINGS_TTL: Duration = Duration::from_secs(1);

/// `configureFailPoint: "failCommand"` (test commands only).
struct FailPoint {
    commands: Vec<String>,
    /// `None`: always on.
    times: Option<u64>,
    error_code: Option<i32>,
    write_concern_error: Option<Document>,
    labels: Vec<Bson>,
}

/// Commands the server answers itself on a router (no data involved).
const SERVER_COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "buildinfo",
    "getParameter",
    "getLog",
    "hostInfo",
    "whatsmyuri",
    "connectionStatus",
    "getCmdLineOpts",
    "listCommands",
    "serverStatus",
    "endSessions",
    "startSession",
    "refreshSessions",
    "killSessions",
    "killAllSessions",
    "getMore",
    "killCursors",
    "shutdown",
    "saslStart",
    "saslContinue",
    "logout",
    "getnonce",
    "authenticate",
    // The user commands: the server's, over the cluster's users in the metadata store
    // (`crate::users`, installed as the router's user store).
    "createUser",
    "updateUser",
    "dropUser",
    "usersInfo",
    "grantRolesToUser",
    "revokeRolesFromUser",
];

/// The router's own commands (not a standalone's) and the cluster-wide action each needs
/// with authorization on: changing the cluster is `root`'s, reading its state
/// `clusterMonitor`'s too.
const ROUTER_COMMAND_ACTIONS: &[(&str, Action)] = &[
    ("addShard", Action::ClusterAdmin),
    ("addshard", Action::ClusterAdmin),
    ("removeShard", Action::ClusterAdmin),
    ("removeshard", Action::ClusterAdmin),
    ("enableSharding", Action::ClusterAdmin),
    ("enablesharding", Action::ClusterAdmin),
    ("shardCollection", Action::ClusterAdmin),
    ("shardcollection", Action::ClusterAdmin),
    ("split", Action::ClusterAdmin),
    ("splitVector", Action::ClusterAdmin),
    ("moveChunk", Action::ClusterAdmin),
    ("movechunk", Action::ClusterAdmin),
    ("mergeChunks", Action::ClusterAdmin),
    ("balancerStart", Action::ClusterAdmin),
    ("balancerStop", Action::ClusterAdmin),
    ("flushRouterConfig", Action::ClusterAdmin),
    ("flushrouterconfig", Action::ClusterAdmin),
    ("configureFailPoint", Action::ClusterAdmin),
    ("listShards", Action::ClusterMonitor),
    ("listshards", Action::ClusterMonitor),
    ("balancerStatus", Action::ClusterMonitor),
    ("isdbgrid", Action::ClusterMonitor),
];

impl Router {
    pub fn new(
        catalog: Catalog,
        config_db: &str,
        connector: Arc<dyn Connector>,
        options: RouterOptions,
    ) -> Arc<Router> {
        Arc::new_cyclic(|me| Router {
            me: me.clone(),
            catalog,
            config_db: config_db.to_string(),
            // Shards named `setName/hosts` are reached at their set's primary.
            connector: Arc::new(crate::replset_conn::SetAwareConnector::new(
                connector,
                crate::replset_conn::RetryPolicy::default(),
            )),
            tables: RwLock::new(HashMap::new()),
            databases: RwLock::new(HashMap::new()),
            conns: RwLock::new(HashMap::new()),
            options,
            autosplit: autosplit::AutoSplit::default(),
            balancer: balancer::Balancer::default(),
            failpoint: Mutex::new(None),
            settings: Mutex::new(None),
        })
    }

    pub fn me(&self) -> Weak<Router> {
        self.me.clone()
    }

    /// The settings, from the store at most once a second (or after a change through this
    /// router).
    pub fn settings(&self) -> DocResult<Arc<Settings>> {
        if let Some((at, s)) = self.settings.lock().as_ref() {
            if at.elapsed() < SETTINGS_TTL {
                return Ok(s.clone());
            }
        }
        let mut s = Settings {
            chunk_bytes: autosplit::DEFAULT_CHUNK_MB << 20,
            autosplit: true,
            balancer_on: true,
            balancer_policy: balancer::BalancerPolicy::Count,
            policy: SplitPolicy::Default,
        };
        for d in self.catalog.settings()? {
            match d.get_str("_id").unwrap_or("") {
                "chunksize" => {
                    if let Some(n) = d.get("value").and_then(query::compare::Num::of) {
                        s.chunk_bytes = (n.as_f64() * 1048576.0) as i64;
                    }
                }
                "autosplit" => s.autosplit = d.get_bool("enabled").unwrap_or(true),
                "balancer" => {
                    s.balancer_on = !d.get_bool("stopped").unwrap_or(false);
                    if let Ok(p) = d.get_str("policy") {
                        s.balancer_policy = balancer::BalancerPolicy::parse(p)?;
                    }
                }
                "split" => s.policy = SplitPolicy::from_doc(&d)?,
                _ => {}
            }
        }
        let s = Arc::new(s);
        *self.settings.lock() = Some((Instant::now(), s.clone()));
        Ok(s)
    }

    pub fn forget_database(&self, db: &str) {
        self.databases.write().remove(db);
        self.tables
            .write()
            .retain(|ns, _| ns.split_once('.').map(|(d, _)| d) != Some(db));
    }

    pub fn invalidate_settings(&self) {
        *self.settings.lock() = None;
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    // ------------------------------------------------------------------ routing table

    /// The cached routing table of `ns` (`None`: not sharded). An unsharded answer is cached
    /// too: if the collection becomes sharded, its primary shard answers StaleConfig to the
    /// UNSHARDED version and the router reloads.
    pub fn table(&self, ns: &str) -> DocResult<Option<Arc<CollSnapshot>>> {
        if let Some(t) = self.tables.read().get(ns) {
            return Ok(t.clone());
        }
        self.reload(ns)
    }

    pub fn reload(&self, ns: &str) -> DocResult<Option<Arc<CollSnapshot>>> {
        let snap = self.catalog.collection(ns)?.map(Arc::new);
        self.tables.write().insert(ns.to_string(), snap.clone());
        Ok(snap)
    }

    pub fn forget(&self, ns: &str) {
        self.tables.write().remove(ns);
    }

    /// Forgets every cached table, database and shard address.
    pub fn flush(&self) {
        self.tables.write().clear();
        self.databases.write().clear();
        self.conns.write().clear();
    }

    pub fn shard_conn(&self, shard: &str) -> DocResult<Arc<dyn ShardConn>> {
        if let Some(c) = self.conns.read().get(shard) {
            return Ok(c.clone());
        }
        let (d, _) = self.catalog.shard(shard)?.ok_or_else(|| {
            DocError::with_code(70, "ShardNotFound", format!("shard {shard} not found"))
        })?;
        let conn = self
            .connector
            .connect(d.get_str("host").unwrap_or_default());
        self.conns.write().insert(shard.to_string(), conn.clone());
        Ok(conn)
    }

    pub fn shard_names(&self) -> DocResult<Vec<String>> {
        Ok(self
            .catalog
            .shards()?
            .iter()
            .filter_map(|d| d.get_str("_id").ok().map(String::from))
            .collect())
    }

    /// The database's entry, created (with the shard holding the least data as primary) on
    /// first use when `create`.
    pub fn database(&self, db: &str, create: bool) -> DocResult<Option<DatabaseEntry>> {
        if matches!(db, "admin" | "config") {
            return Err(DocError::illegal_operation(format!(
                "the '{db}' database lives on the router's metadata store and cannot hold user data"
            )));
        }
        if let Some(e) = self.databases.read().get(db) {
            return Ok(Some(e.clone()));
        }
        for _ in 0..MAX_STALE_RETRIES {
            if let Some((e, _)) = self.catalog.database(db)? {
                self.databases.write().insert(db.to_string(), e.clone());
                return Ok(Some(e));
            }
            if !create {
                return Ok(None);
            }
            docdb::catalog::validate_db_name(db)?;
            let primary = self.least_loaded_shard()?;
            let e = DatabaseEntry {
                name: db.to_string(),
                primary,
                partitioned: false,
            };
            if self.catalog.put_database(&e, 0)? {
                self.databases.write().insert(db.to_string(), e.clone());
                return Ok(Some(e));
            }
        }
        Err(DocError::with_code(
            117,
            "ConflictingOperationInProgress",
            format!("could not create database {db}"),
        ))
    }

    fn least_loaded_shard(&self) -> DocResult<String> {
        let shards = self.catalog.shards()?;
        let mut best: Option<(i64, String)> = None;
        for s in shards
            .iter()
            .filter(|s| !s.get_bool("draining").unwrap_or(false))
        {
            let name = s.get_str("_id").unwrap_or_default().to_string();
            let size = self
                .shard_conn(&name)
                .and_then(|c| call_ok(&*c, &doc! {"listDatabases": 1, "$db": "admin"}))
                .ok()
                .and_then(|r| {
                    r.get("totalSize")
                        .and_then(Bson::as_f64)
                        .map(|f| f as i64)
                        .or_else(|| r.get_i64("totalSize").ok())
                })
                .unwrap_or(i64::MAX);
            if best.as_ref().is_none_or(|(b, _)| size < *b) {
                best = Some((size, name));
            }
        }
        best.map(|(_, n)| n).ok_or_else(|| {
            DocError::with_code(
                70,
                "ShardNotFound",
                "the cluster has no shards (addShard first)",
            )
        })
    }

    /// Sends `cmd` to a shard with the version it should have of `ns`.
    pub fn send_versioned(
        &self,
        shard: &str,
        mut cmd: Document,
        table: Option<&CollSnapshot>,
    ) -> DocResult<Document> {
        let v = match table {
            Some(t) => t.shard_version(shard),
            None => ChunkVersion::unsharded(),
        };
        cmd.insert("shardVersion", v.to_bson());
        self.shard_conn(shard)?.call(&cmd)
    }

    // ------------------------------------------------------------------ dispatch

    fn dispatch(&self, call: &CommandCall<'_>) -> DocResult<Document> {
        let cmd = call.cmd;
        match call.name {
            "insert" | "update" | "delete" => write::write(self, call),
            "findAndModify" | "findandmodify" => write::find_and_modify(self, call),
            "find" => read::find(self, call),
            "count" => read::count(self, call),
            "distinct" => read::distinct(self, call),
            "aggregate" => read::aggregate(self, call),
            "explain" => read::explain(self, call),
            "create" | "createIndexes" | "dropIndexes" | "deleteIndexes" | "listIndexes"
            | "collStats" | "validate" | "renameCollection" => {
                admin::collection_command(self, call)
            }
            "drop" => admin::drop(self, call),
            "dropDatabase" => admin::drop_database(self, call),
            "listDatabases" => admin::list_databases(self, call),
            "listCollections" => admin::list_collections(self, call),
            "dbStats" => admin::db_stats(self, call),
            "addShard" | "addshard" => admin::add_shard(self, cmd),
            "listShards" | "listshards" => admin::list_shards(self),
            "removeShard" | "removeshard" => admin::remove_shard(self, cmd),
            "enableSharding" | "enablesharding" => admin::enable_sharding(self, cmd),
            "shardCollection" | "shardcollection" => admin::shard_collection(self, cmd),
            "split" => admin::split(self, cmd),
            "splitVector" => admin::split_vector(self, cmd),
            "moveChunk" | "movechunk" => admin::move_chunk(self, cmd),
            "mergeChunks" => admin::merge_chunks(self, cmd),
            "balancerStart" => admin::balancer_state(self, false),
            "balancerStop" => admin::balancer_state(self, true),
            "balancerStatus" => admin::balancer_status(self),
            "flushRouterConfig" | "flushrouterconfig" => {
                self.flush();
                Ok(doc! {"flushed": true})
            }
            "isdbgrid" => Ok(doc! {"isdbgrid": 1, "hostname": server::commands::hostname()}),
            "configureFailPoint" => self.configure_failpoint(cmd),
            "fsync" => admin::broadcast_admin(self, cmd),
            // mongos has no compact: it runs on each shard's mongod, one at a time.
            "compact" => Err(DocError::command_not_found(
                "no such command: 'compact' (a router does not compact; run compact on each \
                 shard's server directly, as with mongos)",
            )),
            other => Err(DocError::command_not_found(format!(
                "no such command: '{other}' (not available through a flashdoc router)"
            ))),
        }
    }

    fn configure_failpoint(&self, cmd: &Document) -> DocResult<Document> {
        if !self.options.test_commands {
            return Err(DocError::command_not_found(
                "no such command: 'configureFailPoint' (start the router with test commands enabled)",
            ));
        }
        if cmd.get_str("configureFailPoint") != Ok("failCommand") {
            return Err(DocError::bad_value(
                "only the failCommand fail point exists on a flashdoc router",
            ));
        }
        let times = match cmd.get("mode") {
            Some(Bson::String(s)) if s == "off" => {
                *self.failpoint.lock() = None;
                return Ok(doc! {});
            }
            Some(Bson::String(s)) if s == "alwaysOn" => None,
            Some(Bson::Document(m)) => Some(
                m.get("times")
                    .and_then(query::compare::Num::of)
                    .map(|n| n.as_f64() as u64)
                    .ok_or_else(|| {
                        DocError::bad_value("mode must be off, alwaysOn or {times: n}")
                    })?,
            ),
            _ => {
                return Err(DocError::bad_value(
                    "mode must be off, alwaysOn or {times: n}",
                ))
            }
        };
        let data = cmd.get_document("data").cloned().unwrap_or_default();
        for k in data.keys() {
            if !matches!(
                k.as_str(),
                "failCommands" | "errorCode" | "writeConcernError" | "errorLabels"
            ) {
                return Err(DocError::bad_value(format!(
                    "failCommand option '{k}' is not supported by a flashdoc router"
                )));
            }
        }
        *self.failpoint.lock() = Some(FailPoint {
            commands: data
                .get_array("failCommands")
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            times,
            error_code: data.get_i32("errorCode").ok(),
            write_concern_error: data.get_document("writeConcernError").ok().cloned(),
            labels: data.get_array("errorLabels").cloned().unwrap_or_default(),
        });
        Ok(doc! {})
    }

    /// Takes one firing of the fail point for `name`, if it is set for it.
    fn fire(&self, name: &str) -> Option<(Option<i32>, Option<Document>, Vec<Bson>)> {
        let mut fp = self.failpoint.lock();
        let p = fp.as_mut()?;
        if !p.commands.iter().any(|c| c == name) {
            return None;
        }
        let out = (
            p.error_code,
            p.write_concern_error.clone(),
            p.labels.clone(),
        );
        if let Some(t) = p.times.as_mut() {
            *t -= 1;
            if *t == 0 {
                *fp = None;
            }
        }
        Some(out)
    }
}

/// Error codes a driver retries a write on (the retryable-writes spec).
const RETRYABLE_CODES: &[i32] = &[
    6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436,
];

impl CommandHook for Router {
    fn run(&self, call: &CommandCall<'_>) -> Option<Document> {
        if SERVER_COMMANDS.contains(&call.name) {
            return None;
        }
        let fired = self.fire(call.name);
        if let Some((Some(code), _, labels)) = &fired {
            let mut e = error_reply(&DocError::with_code(
                *code,
                "FailPoint",
                "failCommand fail point",
            ));
            let mut labels = labels.clone();
            if labels.is_empty() && RETRYABLE_CODES.contains(code) {
                labels.push(Bson::String("RetryableWriteError".into()));
            }
            if !labels.is_empty() {
                e.insert("errorLabels", labels);
            }
            return Some(e);
        }
        let mut reply = match self.dispatch(call) {
            Ok(mut d) => {
                if !d.contains_key("ok") {
                    d.insert("ok", 1.0);
                }
                d
            }
            Err(e) => {
                let mut r = error_reply(&e);
                if RETRYABLE_CODES.contains(&e.code) && call.cmd.contains_key("txnNumber") {
                    r.insert(
                        "errorLabels",
                        vec![Bson::String("RetryableWriteError".into())],
                    );
                }
                r
            }
        };
        if let Some((None, Some(wce), labels)) = fired {
            let code = wce.get_i32("code").unwrap_or(91);
            reply.insert("writeConcernError", wce);
            let mut labels = labels;
            if labels.is_empty() && RETRYABLE_CODES.contains(&code) {
                labels.push(Bson::String("RetryableWriteError".into()));
            }
            reply.insert("errorLabels", labels);
        }
        Some(reply)
    }

    fn amend_reply(&self, name: &str, reply: &mut Document) {
        if matches!(name, "hello" | "isMaster" | "ismaster") {
            reply.insert("msg", "isdbgrid");
        }
    }

    fn command_access(&self, name: &str) -> Option<HookAccess> {
        ROUTER_COMMAND_ACTIONS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, action)| HookAccess::Cluster(*action))
    }
}

/// The namespace of a command on a collection (`{<name>: "coll", $db}`).
pub(crate) fn namespace(call: &CommandCall<'_>) -> DocResult<(String, String)> {
    match call.cmd.get(call.name) {
        Some(Bson::String(c)) if !c.is_empty() => Ok((call.db.to_string(), c.clone())),
        _ => Err(DocError::invalid_namespace(format!(
            "{} needs a collection name",
            call.name
        ))),
    }
}

pub(crate) fn is_stale(code: i32) -> bool {
    code == STALE_CONFIG || code == STALE_EPOCH
}

/// Reply fields a router copies from a client's command into what it sends shards.
pub(crate) fn forwardable(cmd: &Document, skip: &[&str]) -> Document {
    let mut out = Document::new();
    for (k, v) in cmd {
        if skip.contains(&k.as_str())
            || matches!(
                k.as_str(),
                "$clusterTime"
                    | "$readPreference"
                    | "lsid"
                    | "txnNumber"
                    | "autocommit"
                    | "startTransaction"
                    | "shardVersion"
                    | "apiVersion"
                    | "apiStrict"
                    | "apiDeprecationErrors"
                    | "$audit"
                    | "$client"
            )
        {
            continue;
        }
        out.insert(k.clone(), v.clone());
    }
    out
}
