//! What all connections share: the database, the cursors, the server parameters, counters for
//! serverStatus, the background TTL monitor, and the command hook (declared here with the
//! call it receives, since each names the other: `hook` has the rest of it).

use crate::config::{Parameters, ServerConfig};
use crate::cursors::CursorRegistry;
use crate::spec::OpKind;
use bson::{doc, Bson, Document};
use docdb::DocDb;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Every command runs for a connection (`server::state::ConnInfo` is where callers that build
/// a state find it).
pub use crate::client::ConnInfo;

/// The server's one extension point for commands. A hook sees every command before the
/// built-in dispatch and may answer it itself, wrap the built-in implementation (run its own
/// checks, then [`CommandCall::builtin`], possibly with a rewritten command), or decline. The
/// `cluster` crate's shard and router plug in here; the server knows nothing about them.
pub trait CommandHook: Send + Sync {
    /// `Some(reply)` answers the command; `None` leaves it to the built-in dispatch.
    fn run(&self, call: &CommandCall<'_>) -> Option<Document>;
    /// Adds fields to the reply of a command the hook left to the built-in dispatch (a router
    /// marks `hello` with `msg: "isdbgrid"`).
    fn amend_reply(&self, _name: &str, _reply: &mut Document) {}
    /// Fields of its own the hook reads from the commands it wraps (a shard's
    /// `shardVersion`): the built-in commands' strict field check accepts them, so the hook
    /// hands the command on as it came, without copying it to remove them.
    fn command_fields(&self, _name: &str) -> &'static [&'static str] {
        &[]
    }
    /// How authorization checks a command the hook answers that the command table lacks (a
    /// router's `shardCollection`, a shard's `_recvChunkStart`). None: with authorization on,
    /// there is no such command.
    fn command_access(&self, _name: &str) -> Option<HookAccess> {
        None
    }
}

/// The authorization of a hook's own command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookAccess {
    /// Needs this cluster-wide action (on `admin`).
    Cluster(crate::roles::Action),
    /// Only the internal user (another member of the cluster, `keyfile`) may run it.
    Internal,
}

/// One command as the hook sees it.
pub struct CommandCall<'a> {
    pub name: &'a str,
    pub db: &'a str,
    pub cmd: &'a Document,
    pub state: &'a Arc<ServerState>,
    pub conn: &'a ConnInfo,
}

/// Stops the background threads promptly (they wait on it between passes), and wakes them
/// early when a parameter they run by changes.
#[derive(Default)]
struct StopSignal {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl StopSignal {
    /// Waits up to `d`, or until woken; true when asked to stop.
    fn wait(&self, d: Duration) -> bool {
        let mut s = self.stopped.lock();
        if !*s {
            self.cv.wait_for(&mut s, d);
        }
        *s
    }

    fn wake(&self) {
        let _s = self.stopped.lock();
        self.cv.notify_all();
    }
}

pub struct ServerState {
    db: Arc<DocDb>,
    cursors: CursorRegistry,
    started: Instant,
    next_conn: AtomicI32,
    pub connections_current: AtomicI64,
    /// The most connections open at once since the housekeeping task last looked (it swaps
    /// in the current number; `burst`).
    pub connections_most: AtomicI64,
    pub connections_total: AtomicI64,
    /// Plain-TCP connection threads still running (`conn.rs`): shutdown lets them finish
    /// their command before the database closes.
    pub conn_threads: AtomicUsize,
    /// Bytes and requests the connections moved, and the commands that failed.
    pub traffic: crate::traffic::Traffic,
    /// The operations in progress (`currentOp`, `killOp`).
    pub ops: crate::ops::Ops,
    /// The logical sessions commands carried (`$listLocalSessions`, `endSessions`).
    pub sessions: crate::sessions::Sessions,
    /// The database profiler (`profile`, `system.profile`).
    pub profiler: crate::profile::Profiler,
    commands: Mutex<BTreeMap<String, u64>>,
    /// serverStatus' `opcounters`, by [`OpKind::index`].
    opcounters: [AtomicU64; OpKind::ALL.len()],
    config: ServerConfig,
    /// Configuration sections the server does not own (see `serve_with_hook`).
    other_options: Document,
    /// The server parameters as they are now (`setParameter` changes them at run time).
    params: Arc<RwLock<Parameters>>,
    stop: Arc<StopSignal>,
    ttl_thread: Mutex<Option<JoinHandle<()>>>,
    hook: Option<Arc<dyn CommandHook>>,
    /// The fail points (`configureFailPoint`), checked before every command.
    pub failpoints: crate::failpoint::FailPoints,
    /// Where the users live (`admin.system.users` unless a router puts its own store here).
    users: Arc<dyn crate::users::UserStore>,
    /// The cluster's shared key (`security.keyFile`): the internal user authenticates with it.
    internal_key: Option<crate::keyfile::KeyFile>,
    /// The engine's write failure has been logged (once, at error level).
    write_failure_logged: AtomicBool,
    /// The replica set this server is a member of (`--replSet`).
    replset: Option<Arc<crate::replset::ReplSet>>,
}

impl ServerState {
    /// The shared state. The TTL monitor is started by whoever serves
    /// ([`ServerState::start_ttl_monitor`]), not by every in-process state.
    pub fn new(db: Arc<DocDb>, config: &ServerConfig) -> Self {
        let state = ServerState {
            cursors: CursorRegistry::default(),
            started: Instant::now(),
            next_conn: AtomicI32::new(1),
            connections_current: AtomicI64::new(0),
            connections_most: AtomicI64::new(0),
            connections_total: AtomicI64::new(0),
            conn_threads: AtomicUsize::new(0),
            traffic: Default::default(),
            ops: Default::default(),
            sessions: Default::default(),
            profiler: crate::profile::Profiler::new(&config.operation_profiling),
            commands: Mutex::new(BTreeMap::new()),
            opcounters: Default::default(),
            params: Arc::new(RwLock::new(config.set_parameter.clone())),
            config: config.clone(),
            other_options: Document::new(),
            stop: Arc::new(StopSignal::default()),
            ttl_thread: Mutex::new(None),
            hook: None,
            failpoints: Default::default(),
            users: Arc::new(crate::users::DocDbUsers(db.clone())),
            internal_key: None,
            db,
            write_failure_logged: AtomicBool::new(false),
            replset: None,
        };
        state.apply_txn_lifetime(&config.set_parameter);
        state
    }
    /// Makes the server a member of `rs`.
    pub fn with_replset(mut self, rs: Option<Arc<crate::replset::ReplSet>>) -> Self {
        self.replset = rs;
        self
    }
    pub fn replset(&self) -> Option<&Arc<crate::replset::ReplSet>> {
        self.replset.as_ref()
    }
    /// Keeps the users in `users` instead of `admin.system.users` (a router's cluster users).
    pub fn with_user_store(mut self, users: Arc<dyn crate::users::UserStore>) -> Self {
        self.users = users;
        self
    }
    /// Lets the internal user authenticate with `key` (`security.keyFile`).
    pub fn with_internal_key(mut self, key: Option<crate::keyfile::KeyFile>) -> Self {
        self.internal_key = key;
        self
    }
    pub fn users(&self) -> &dyn crate::users::UserStore {
        self.users.as_ref()
    }
    /// The internal user's credential for `mech`, when the server has a key file.
    pub fn internal_credential(
        &self,
        mech: crate::scram::Mechanism,
    ) -> Option<crate::scram::Credential> {
        self.internal_key.as_ref().map(|k| k.credential(mech))
    }
    /// Puts a command hook in front of the built-in commands; `other_options` are shown by
    /// getCmdLineOpts.
    pub fn with_hook(
        mut self,
        hook: Option<Arc<dyn CommandHook>>,
        other_options: Document,
    ) -> Self {
        self.hook = hook;
        self.other_options = other_options;
        self
    }
    pub fn hook(&self) -> Option<&Arc<dyn CommandHook>> {
        self.hook.as_ref()
    }
    pub fn db(&self) -> &Arc<DocDb> {
        &self.db
    }
    pub fn cursors(&self) -> &CursorRegistry {
        &self.cursors
    }
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
    pub fn parsed_options(&self) -> Document {
        let mut d = self.config.as_document();
        d.extend(self.other_options.clone());
        d
    }
    pub fn params(&self) -> Parameters {
        self.params.read().clone()
    }
    /// Replaces the parameters; a background thread whose period changed recomputes its next
    /// pass at once (a shorter `ttlMonitorSleepSecs` takes effect now, not after the old one).
    pub fn set_params(&self, p: Parameters) {
        crate::limits::apply_budgets(&p);
        self.apply_txn_lifetime(&p);
        let ttl_changed = {
            let mut cur = self.params.write();
            let changed = cur.ttl_monitor_sleep_secs != p.ttl_monitor_sleep_secs;
            *cur = p;
            changed
        };
        if ttl_changed {
            self.stop.wake();
        }
    }
    /// `transactionLifetimeLimitSeconds` for the transactions begun from now on (checked at
    /// least 1 by `Parameters::check`, as the transactions' layer requires).
    fn apply_txn_lifetime(&self, p: &Parameters) {
        let set = self
            .db
            .txns()
            .set_lifetime_limit(p.transaction_lifetime_limit_seconds);
        debug_assert!(set.is_ok(), "a checked limit is at least 1");
    }
    /// Whether the test commands exist (`enableTestCommands`, fixed at startup).
    pub fn test_commands(&self) -> bool {
        self.config.set_parameter.enable_test_commands
    }
    pub fn cursor_timeout(&self) -> Duration {
        Duration::from_millis(self.params.read().cursor_timeout_millis)
    }

    /// The TTL monitor (mongod's TTLMonitor): every `ttlMonitorSleepSecs` it deletes the
    /// expired documents of every TTL index, batch by batch. Started once, by the server.
    pub fn start_ttl_monitor(&self) {
        let db = Arc::downgrade(&self.db);
        // On a replica set only the primary deletes; its secondaries apply its deletes.
        let replset = self.replset.as_ref().map(Arc::downgrade);
        let stop = self.stop.clone();
        let params = self.params.clone();
        let mut last_pass = Instant::now();
        let handle = std::thread::Builder::new()
            .name("flashdoc-ttl".into())
            .stack_size(crate::THREAD_STACK_BYTES)
            .spawn(move || loop {
                let secs = params.read().ttl_monitor_sleep_secs.max(1);
                let due = last_pass + Duration::from_secs(secs);
                let now = Instant::now();
                if now < due {
                    // Woken early (a new period) or on time: look at the period again.
                    if stop.wait(due - now) {
                        return;
                    }
                    continue;
                }
                last_pass = now;
                let Some(db) = db.upgrade() else { return };
                let pass = || db.ttl_pass();
                let passed = match &replset {
                    None => pass(),
                    Some(rs) => match rs.upgrade().and_then(|rs| rs.as_primary(pass)) {
                        Some(passed) => passed,
                        None => continue,
                    },
                };
                match passed {
                    Ok(0) => {}
                    Ok(n) => crate::log::info(
                        "INDEX",
                        &format!("TTL monitor deleted {n} expired documents"),
                    ),
                    Err(e) => crate::log::warn("INDEX", &format!("TTL monitor: {e}")),
                }
            })
            .expect("spawn the TTL monitor");
        let previous = self.ttl_thread.lock().replace(handle);
        assert!(previous.is_none(), "the TTL monitor is started once");
    }

    /// Stops the background threads (before the database shuts down).
    pub fn stop_background(&self) {
        *self.stop.stopped.lock() = true;
        self.stop.cv.notify_all();
        if let Some(h) = self.ttl_thread.lock().take() {
            let _ = h.join();
        }
    }

    /// Registers a connection, or refuses it (None) past `net.maxIncomingConnections`.
    pub fn new_connection(&self, peer: SocketAddr) -> Option<ConnInfo> {
        let max = self.config.net.max_incoming_connections as i64;
        let now = self.connections_current.fetch_add(1, Ordering::AcqRel) + 1;
        if now > max {
            self.connections_current.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        self.connections_total.fetch_add(1, Ordering::Relaxed);
        self.connections_most.fetch_max(now, Ordering::Relaxed);
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        self.ops.connect(id, peer.to_string());
        Some(ConnInfo::new(id, peer))
    }
    pub fn end_connection(&self, id: i32) {
        self.ops.disconnect(id);
        self.connections_current.fetch_sub(1, Ordering::AcqRel);
    }
    /// Counts a command by name, and its operation's kind (`op`, from its row in the command
    /// table; a command the server does not have counts as a command).
    pub fn count_command(&self, name: &str, op: OpKind) {
        *self.commands.lock().entry(name.to_string()).or_default() += 1;
        self.opcounters[op.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// serverStatus' `storageEngine`, with `writesRefused` and, once a sync failed, the cause
    /// that stopped writes until a restart.
    fn storage_engine_status(&self) -> Document {
        let name = docdb::config::engine_kind_name(self.db.config().engine_kind);
        let mut d = doc! {
            "name": name,
            "supportsCommittedReads": false,
            "persistent": name != "inMemory",
            "writesRefused": false,
        };
        if let Some(f) = self.db.engine().write_failure() {
            d.insert("writesRefused", true);
            d.insert(
                "writeFailure",
                doc! {
                    "operation": f.operation.clone(),
                    "file": f.path.display().to_string(),
                    "errno": f.errno.map(Bson::Int32).unwrap_or(Bson::Null),
                    "errnoName": f.errno_name(),
                    "message": f.message.clone(),
                    "reason": f.to_string(),
                },
            );
        }
        d
    }

    /// Logs, once and at error level, that the engine refuses writes after a failed sync.
    /// Called after every command: one atomic load while nothing failed.
    pub fn log_write_failure_once(&self) {
        if self.write_failure_logged.load(Ordering::Relaxed) {
            return;
        }
        let Some(cause) = self.db.engine().write_failure() else {
            return;
        };
        if !self.write_failure_logged.swap(true, Ordering::Relaxed) {
            crate::log::error(
                "STORAGE",
                &format!(
                    "{cause}: every write is refused from now on (code {}); reads go on; \
                     restart the server to recover from what is durable",
                    query::DocError::WRITES_REFUSED
                ),
            );
        }
    }

    pub fn server_status(&self) -> Document {
        let up = self.started.elapsed();
        let cmds = self.commands.lock();
        let opcounters: Document = OpKind::ALL
            .iter()
            .map(|op| {
                let n = self.opcounters[op.index()].load(Ordering::Relaxed);
                (op.counter_name().to_string(), Bson::Int64(n as i64))
            })
            .collect();
        let per_command: Document = cmds
            .iter()
            .map(|(k, v)| (k.clone(), Bson::Int64(*v as i64)))
            .collect();
        let current = self.connections_current.load(Ordering::Relaxed);
        doc! {
            "host": crate::build_info::hostname(),
            "version": crate::build_info::VERSION,
            "process": "flashdoc",
            "pid": std::process::id() as i64,
            "uptime": up.as_secs_f64().floor(),
            "uptimeMillis": up.as_millis() as i64,
            "uptimeEstimate": up.as_secs() as i64,
            "localTime": bson::DateTime::now(),
            "connections": {
                "current": current as i32,
                "available": (self.config.net.max_incoming_connections as i64 - current) as i32,
                "totalCreated": self.connections_total.load(Ordering::Relaxed),
            },
            "network": self.traffic.network(),
            "asserts": self.traffic.asserts(),
            "mem": crate::traffic::memory(),
            "opcounters": opcounters,
            "metrics": {"commands": per_command, "cursor": {"open": {"total": self.cursors.len() as i64}}},
            "storageEngine": self.storage_engine_status(),
            // mongod's section; the open ones only (its totals are not kept).
            "transactions": {"currentOpen": self.db.txns().open_count() as i64},
            "flash": self.db.flash_status(),
            "flashdoc": self.db.storage_stats(),
        }
    }
}
