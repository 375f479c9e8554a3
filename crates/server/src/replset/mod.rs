//! A replica-set member (`--replSet`, issue 36): docdb with its oplog, a Raft member
//! (crates/repl) that carries the oplog entries, and the server's side of it: the set's
//! commands (`commands`), write concern and the member's role in front of every command
//! (`concern`), members' RPCs over the mongo port (`wire`), and the applier that applies
//! committed entries on every member (`applier`). docs/replication.md, "The server's replica
//! set", tells how the pieces meet.

pub mod applier;
pub mod causal;
pub mod commands;
pub mod concern;
pub mod config;
pub mod control;
pub mod defaults;
pub mod labels;
pub mod retry;
pub mod rollback;
pub mod stored;
pub mod tags;
pub mod txn;
pub mod wire;

use applier::{Divergence, DocApplier};
use bson::{oid::ObjectId, Document, Timestamp};
use docdb::{DocDb, DocError, DocResult};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use repl::{LogPosition, ReplNode, Role, Status};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wire::WireTransport;

/// The file in the database directory that names this member and the set's configuration
/// once the set is initiated (mongod keeps it in `local.system.replset`).
const STATE_FILE: &str = "replset.bson";

/// How often the member's background task proposes writes made outside a command (the TTL
/// monitor's deletes), checks that a former primary holds nothing unreplicated, and rolls a
/// diverged member back.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// A primary that wrote nothing for this many seconds writes a no-op (mongod's
/// `periodicNoopIntervalSecs`, 10 s): the commit point then moves on, so a `w: "majority"`
/// write whose entry was truncated gets its verdict (docs/replication.md, "Write concern").
const PERIODIC_NOOP_SECS: u32 = 10;

/// The part of the set that exists once it is initiated: the Raft member and its applier.
pub struct Joined {
    pub id: u64,
    /// The set's configuration, as `replSetGetConfig` shows it.
    pub config: Arc<SetConfig>,
    pub node: ReplNode,
    pub applier: Arc<DocApplier>,
    shipper: Mutex<Shipper>,
}

/// The set's configuration on this member: the one it joined with, then each newer one that a
/// `replSetReconfig` put in the log (the applier adopts it), kept durable in the database
/// directory with the member's id so a restarted member rejoins as itself.
pub struct SetConfig {
    dir: PathBuf,
    id: u64,
    current: RwLock<Document>,
}

/// A configuration's `version`.
pub fn config_version(config: &Document) -> i32 {
    config.get_i32("version").unwrap_or(1)
}

impl SetConfig {
    fn new(dir: PathBuf, id: u64, config: Document) -> SetConfig {
        SetConfig {
            dir,
            id,
            current: RwLock::new(config),
        }
    }

    /// Makes the current configuration durable (once the member has started on it).
    fn save(&self) -> DocResult<()> {
        save_state(&self.dir, self.id, &self.current.read())
    }

    pub fn get(&self) -> Document {
        self.current.read().clone()
    }

    /// Takes `next` if its version is newer (an entry applied again after a restart is not);
    /// whether it did.
    pub fn adopt(&self, next: &Document) -> DocResult<bool> {
        let mut current = self.current.write();
        if config_version(next) <= config_version(&current) {
            return Ok(false);
        }
        save_state(&self.dir, self.id, next)?;
        *current = next.clone();
        Ok(true)
    }
}

fn save_state(dir: &std::path::Path, id: u64, config: &Document) -> DocResult<()> {
    let mut bytes = Vec::new();
    bson::doc! {"id": id as i64, "config": config.clone()}
        .to_writer(&mut bytes)
        .map_err(repl_err)?;
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(STATE_FILE))?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(repl_err)
}

/// The primary's proposer: the oplog entries after `after` are not yet in the Raft log.
struct Shipper {
    /// The term this member last became primary in (0: never).
    term: u64,
    after: Timestamp,
    /// Proposed log entries not yet known committed, oldest first.
    pending: VecDeque<Proposed>,
    /// The last entry proposed, and the newest known committed.
    last: Option<(LogPosition, Timestamp)>,
    majority: Option<Timestamp>,
}

/// A log entry the primary proposed: its position, and the `ts` of the first and last oplog
/// entries it carries.
#[derive(Clone, Copy)]
struct Proposed {
    pos: LogPosition,
    first: Timestamp,
    last: Timestamp,
}

impl Default for Shipper {
    fn default() -> Self {
        Shipper {
            term: 0,
            after: stored::ZERO_TS,
            pending: VecDeque::new(),
            last: None,
            majority: None,
        }
    }
}

pub struct ReplSet {
    pub name: String,
    port: u16,
    bind_ips: Vec<std::net::IpAddr>,
    db: Arc<DocDb>,
    dir: PathBuf,
    key: Option<Arc<[u8]>>,
    transport: WireTransport,
    member: RwLock<Option<Arc<Joined>>>,
    divergence: Arc<Divergence>,
    /// `topologyVersion.processId`: new for every run of the process.
    pub process_id: ObjectId,
    stop: Arc<AtomicBool>,
    /// Serializes initiation and joining (each starts the Raft member once).
    starting: Mutex<()>,
    /// Held shared by every write from its admission until its oplog entries are proposed
    /// (`WriteGate`), and exclusively by a step-down while it waits for those under way.
    gate: RwLock<()>,
    /// A step-down is under way: writes are refused (NotWritablePrimary), as in mongod.
    stepping_down: AtomicBool,
    /// A rollback in place is under way (state 9, ROLLBACK): the configuration of the member
    /// it stopped, which it starts again afterwards.
    rolling_back: Mutex<Option<Arc<SetConfig>>>,
    /// A rollback was refused or failed: the member refuses service until it is resynced (or
    /// restarted, which finishes an interrupted reset).
    rollback_failed: AtomicBool,
    /// The sessions whose retryable writes are running (`retry`).
    pub checkouts: retry::Checkouts,
    /// The newest cluster time clients gossiped (`causal`).
    clock: causal::ClusterClock,
    /// Log entries between two snapshots (`replication.snapshotEvery`).
    snapshot_every: u64,
    /// Each session's multi-document transaction (`txn`).
    pub txns: txn::SessionTxns,
}

/// A write's licence, from its admission until its oplog entries are proposed: a step-down
/// waits for every licence out before it hands the set over, so no write of this primary is
/// left in its oplog unproposed.
pub struct WriteGate<'a> {
    pub joined: Arc<Joined>,
    _open: RwLockReadGuard<'a, ()>,
}

fn repl_err(e: impl std::fmt::Display) -> DocError {
    DocError::with_code(1, "InternalError", format!("replication: {e}"))
}

impl ReplSet {
    /// The member for `name` on `db` (opened with an oplog): if the set was initiated before,
    /// its Raft member starts at once. Call outside any tokio runtime.
    pub fn open(
        name: &str,
        db: Arc<DocDb>,
        cfg: &crate::config::ServerConfig,
        key: Option<&crate::keyfile::KeyFile>,
    ) -> Result<Arc<ReplSet>, String> {
        if db.oplog().is_none() {
            return Err("a replica-set member needs the database opened with its oplog".into());
        }
        let key: Option<Arc<[u8]>> = key.map(|k| Arc::from(k.password().as_bytes()));
        let bind_ips = cfg
            .bind_addrs()
            .map_err(|e| e.to_string())?
            .iter()
            .map(std::net::SocketAddr::ip)
            .collect();
        let rs = Arc::new(ReplSet {
            name: name.to_string(),
            port: cfg.net.port,
            bind_ips,
            dir: cfg.storage.db_path.clone(),
            transport: WireTransport::new(key.clone()),
            key,
            db,
            member: RwLock::new(None),
            divergence: Arc::default(),
            process_id: ObjectId::new(),
            stop: Arc::default(),
            starting: Mutex::new(()),
            gate: RwLock::new(()),
            stepping_down: AtomicBool::new(false),
            rolling_back: Mutex::new(None),
            rollback_failed: AtomicBool::new(false),
            checkouts: retry::Checkouts::default(),
            clock: causal::ClusterClock::default(),
            snapshot_every: cfg
                .replication
                .snapshot_every
                .unwrap_or(crate::config::DEFAULT_SNAPSHOT_EVERY),
            txns: txn::SessionTxns::default(),
        });
        rollback::finish_interrupted(&rs.db, &rs.dir)?;
        if let Some((id, config)) = rs.load_state()? {
            rs.start_member(id, config)
                .map_err(|e| format!("restarting the replica-set member: {}", e.message))?;
        }
        let watcher = Arc::downgrade(&rs);
        let stop = rs.stop.clone();
        std::thread::Builder::new()
            .name("flashdoc-repl-watch".into())
            .spawn(move || watch(watcher, stop))
            .map_err(|e| e.to_string())?;
        Ok(rs)
    }

    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    pub fn member(&self) -> Option<Arc<Joined>> {
        self.member.read().clone()
    }

    /// The newest oplog `ts` (as a `u64`) a majority of the set holds, as far as this member
    /// knows: what a change stream may show. 0 before the set is initiated.
    pub fn majority_visible_ts(&self) -> u64 {
        let last = self.db.oplog().map_or(0, |o| stored::ts_u64(o.last_ts()));
        self.member().map_or(0, |j| j.visible_ts(&j.status(), last))
    }

    /// Whether this member takes writes in `status`: a writable primary (`Joined::is_writable`)
    /// that holds nothing unreplicated and is not stepping down.
    pub fn writable(&self, status: &Status) -> bool {
        self.diverged().is_none()
            && !self.stepping_down.load(Ordering::Acquire)
            && Joined::is_writable(status)
    }

    /// The licence to write now, if this member is writable; its proposer is then ready for
    /// this term's writes. Never taken twice on one thread (a waiting step-down would block
    /// the second).
    pub fn write_gate(&self) -> Option<WriteGate<'_>> {
        let open = self.gate.read();
        let joined = self.member()?;
        let status = joined.status();
        if !self.writable(&status) {
            return None;
        }
        joined.begin_term(&self.db, &status);
        Some(WriteGate {
            joined,
            _open: open,
        })
    }

    /// Runs `write`, a write made outside any command (the TTL monitor's), as this member's
    /// primary and proposes its entries; `None` (not run) unless the member is writable.
    pub fn as_primary<T>(&self, write: impl FnOnce() -> T) -> Option<T> {
        let gate = self.write_gate()?;
        let out = write();
        if let Err(e) = gate.joined.ship(&self.db) {
            crate::log::warn("REPL", &format!("proposing writes: {}", e.message));
        }
        Some(out)
    }

    /// `replSetStepDown`'s work: refuses new writes, waits for those under way to propose
    /// their entries, proposes what was written outside commands, then has the Raft member
    /// hand the set to a caught-up secondary (`ReplNode::step_down`).
    pub fn step_down(
        &self,
        j: &Joined,
        stay_down: Duration,
        catch_up: Duration,
    ) -> DocResult<repl::NodeId> {
        if self.stepping_down.swap(true, Ordering::AcqRel) {
            return Err(DocError::with_code(
                117,
                "ConflictingOperationInProgress",
                "a step-down is already in progress",
            ));
        }
        // A new primary will not know this one's open transactions: they end here.
        self.db.txns().abort_all("the primary stepped down");
        let handed = self.hand_over(j, stay_down, catch_up);
        self.stepping_down.store(false, Ordering::Release);
        handed
    }

    fn hand_over(
        &self,
        j: &Joined,
        stay_down: Duration,
        catch_up: Duration,
    ) -> DocResult<repl::NodeId> {
        // Every write admitted before the flag has proposed its entries once this is free.
        drop(self.gate.write());
        if j.status().role != Role::Primary {
            return Err(control::not_primary_to_step_down());
        }
        j.ship(&self.db)?;
        j.node
            .run(j.node.step_down(stay_down, catch_up))
            .map_err(|e| control::step_down_error(&e, catch_up))
    }

    /// Why this member refuses reads and writes, if it does: it holds writes the set does
    /// not have, or is rolling back.
    pub fn diverged(&self) -> Option<String> {
        if self.rolling_back() {
            return Some("this member is rolling back".into());
        }
        self.divergence.reason()
    }

    /// Whether a rollback in place is under way (mongod's ROLLBACK state).
    pub fn rolling_back(&self) -> bool {
        self.rolling_back.lock().is_some()
    }

    /// The set's configuration while a rollback in place has the member stopped.
    pub fn rollback_config(&self) -> Option<Arc<SetConfig>> {
        self.rolling_back.lock().clone()
    }

    /// Whether `host` (`name:port`) names this server.
    pub fn is_me(&self, host: &str) -> bool {
        let Some((h, port)) = host.rsplit_once(':') else {
            return false;
        };
        if port.parse::<u16>().ok() != Some(self.port) {
            return false;
        }
        let h = h.trim_start_matches('[').trim_end_matches(']');
        if h == "localhost" || h == crate::build_info::hostname() {
            return true;
        }
        h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || self.bind_ips.contains(&ip))
    }

    fn load_state(&self) -> Result<Option<(u64, Document)>, String> {
        let path = self.dir.join(STATE_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let d = Document::from_reader(bytes.as_slice())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let id = d.get_i64("id").map_err(|e| e.to_string())?;
        let config = d.get_document("config").map_err(|e| e.to_string())?;
        Ok(Some((id as u64, config.clone())))
    }

    /// Starts this member's Raft node as member `id` of `config` (already checked), and keeps
    /// both durable for a restart. Runs on a thread of its own: starting a node blocks on a
    /// runtime, which a command's thread may already be inside of.
    fn start_member(&self, id: u64, config: Document) -> DocResult<Arc<Joined>> {
        let node_cfg = config::node_config(id, &config, self.snapshot_every)?;
        let set_config = Arc::new(SetConfig::new(self.dir.clone(), id, config));
        let applier = Arc::new(
            self.open_applier()?
                .with_config(set_config.clone())
                .with_marker_dir(self.dir.clone()),
        );
        let (kv, app, transport) = (
            self.db.engine().clone(),
            applier.clone() as Arc<dyn repl::Applier>,
            Arc::new(self.transport.clone()) as Arc<dyn repl::Transport>,
        );
        let node = std::thread::spawn(move || ReplNode::start(&node_cfg, kv, app, transport))
            .join()
            .map_err(|_| repl_err("the Raft member panicked while starting"))?
            .map_err(repl_err)?;
        set_config.save()?;
        let joined = Arc::new(Joined {
            id,
            config: set_config,
            node,
            applier,
            shipper: Mutex::default(),
        });
        *self.member.write() = Some(joined.clone());
        crate::log::info(
            "REPL",
            &format!("member {id} of replica set {} started", self.name),
        );
        Ok(joined)
    }

    /// The applier on this member's data; a member that restarted diverged (its oplog
    /// holds writes never proposed) rolls back first, before its Raft member starts.
    fn open_applier(&self) -> DocResult<DocApplier> {
        let applier =
            DocApplier::open(self.db.clone(), self.divergence.clone()).map_err(repl_err)?;
        if self.divergence.reason().is_none() {
            return Ok(applier);
        }
        match rollback::roll_back(&self.db, &self.dir, &applier.record()) {
            Ok(()) => {
                self.divergence.clear();
                DocApplier::open(self.db.clone(), self.divergence.clone()).map_err(repl_err)
            }
            Err(why) => {
                self.refuse_rollback(&why);
                Ok(applier)
            }
        }
    }

    fn refuse_rollback(&self, why: &str) {
        self.rollback_failed.store(true, Ordering::Release);
        crate::log::error(
            "ROLLBACK",
            &format!("cannot roll back: {why}; this member refuses reads and writes"),
        );
    }

    /// Rolls a diverged member back without the process exiting: stops its Raft member,
    /// writes are held off (the write gate, exclusively), the rollback runs, and the Raft
    /// member starts again on the same storage, applying the committed log from its start.
    fn roll_back_in_place(&self) {
        if let Some(why) = rollback::refusal(&self.db) {
            return self.refuse_rollback(&why);
        }
        let _writes = self.gate.write();
        let Some(joined) = self.member.write().take() else {
            return;
        };
        *self.rolling_back.lock() = Some(joined.config.clone());
        let (id, config) = (joined.id, joined.config.get());
        joined.node.halt();
        let record = joined.applier.record();
        stop_member(joined);
        match rollback::roll_back(&self.db, &self.dir, &record) {
            Ok(()) => self.divergence.clear(),
            Err(why) => self.refuse_rollback(&why),
        }
        if !self.stop.load(Ordering::Acquire) && !self.rollback_failed.load(Ordering::Acquire) {
            if let Err(e) = self.start_member(id, config) {
                self.refuse_rollback(&format!("restarting the member: {}", e.message));
            }
        }
        *self.rolling_back.lock() = None;
    }

    /// Stops the Raft member (before the database shuts down). Call outside any runtime.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(j) = self.member.write().take() {
            stop_member(j);
        }
    }
}

/// Shuts the member's Raft node down once no one else holds it: a command or the background
/// task may hold it a moment longer.
fn stop_member(mut j: Arc<Joined>) {
    for _ in 0..100 {
        match Arc::try_unwrap(j) {
            Ok(joined) => return joined.node.shutdown(),
            Err(still) => j = still,
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::log::warn("REPL", "the Raft member is still in use as it stops");
}

impl Joined {
    pub fn status(&self) -> Status {
        self.node.status()
    }

    /// The member may take writes: it leads, and has applied every entry before its term
    /// (mongod's drain mode: a new primary applies what it has before it writes).
    pub fn is_writable(status: &Status) -> bool {
        status.role == Role::Primary && status.last_applied.is_some_and(|p| p.term == status.term)
    }

    /// Readies the proposer for writes in `status.term`, the first time this term: entries
    /// after the oplog's current end are this primary's own and go to the log.
    pub fn begin_term(&self, db: &DocDb, status: &Status) {
        let mut s = self.shipper.lock();
        if s.term != status.term {
            if s.term != 0 {
                // Writes of an earlier term that never reached the log are not this term's.
                self.applier.check_accounted();
            }
            let oplog = db.oplog().expect("a member has an oplog");
            s.term = status.term;
            s.after = oplog.last_ts();
            // An entry proposed in an earlier term is no longer this primary's newest: the
            // entries before this term are applied here, hence committed.
            s.last = None;
            oplog.set_term(status.term as i64);
        }
    }

    /// Proposes the oplog entries written since the last call, in `ts` order, up to
    /// [`stored::BATCH_MAX_ENTRIES`] to a log entry, each once it is durable in this member's
    /// log (`w: 1`); returns the newest log entry proposed so far.
    pub fn ship(&self, db: &DocDb) -> DocResult<Option<LogPosition>> {
        let mut s = self.shipper.lock();
        if s.term == 0 {
            return Ok(None);
        }
        let oplog = db.oplog().expect("a member has an oplog");
        loop {
            let batch =
                oplog.entries_after(s.after, stored::BATCH_MAX_ENTRIES, stored::BATCH_MAX_BYTES)?;
            let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
                return Ok(s.last.map(|(p, _)| p));
            };
            let first = first.get_timestamp("ts").map_err(repl_err)?;
            let last = last.get_timestamp("ts").map_err(repl_err)?;
            assert!(
                stored::ts_u64(s.after) < stored::ts_u64(first),
                "the proposer moves forward"
            );
            let bytes = stored::batch_bytes(&batch).map_err(repl_err)?;
            self.applier.proposing(last).map_err(repl_err)?;
            let pos = self
                .node
                .run(self.node.propose_nowait(bytes))
                .map_err(|e| {
                    self.applier.divergence.diverge(format!(
                        "writes from {first:?} to {last:?} are in this member's oplog but could not be proposed to the set: {e}"
                    ));
                    concern::repl_state_changed(&e.to_string())
                })?;
            s.after = last;
            s.last = Some((pos, last));
            s.pending.push_back(Proposed { pos, first, last });
        }
    }

    /// The newest oplog `ts` this member knows a majority holds, given its newest (`last`):
    /// everything on a secondary, which applies committed entries only; on a primary, every
    /// entry before the oldest it proposed that is not yet committed, and none it has not
    /// proposed yet.
    pub fn visible_ts(&self, status: &Status, last: u64) -> u64 {
        if status.role != Role::Primary {
            return last;
        }
        self.majority_ts(status.committed);
        let s = self.shipper.lock();
        if s.term != status.term {
            // Not yet primary for writes this term: its oplog holds applied entries only.
            return last;
        }
        match s.pending.front() {
            Some(p) => stored::ts_u64(p.first) - 1,
            None => stored::ts_u64(s.after),
        }
    }

    /// The `ts` of the newest entry this primary knows a majority holds (`majorityOpTime`).
    pub fn majority_ts(&self, committed: Option<LogPosition>) -> Option<Timestamp> {
        let mut s = self.shipper.lock();
        while let Some(&p) = s.pending.front() {
            if committed.is_none_or(|c| c.index < p.pos.index) {
                break;
            }
            s.majority = Some(p.last);
            s.pending.pop_front();
        }
        s.majority
    }
}

/// Runs `fut` to its end on a runtime of its own, on a thread of its own: a command's thread
/// may be inside the server's runtime, where blocking on another is not allowed. `None` if
/// the runtime could not be made.
pub fn run_async<F>(fut: F) -> Option<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(rt.block_on(fut))
    })
    .join()
    .ok()
    .flatten()
}

/// The member's background task: proposes what the primary wrote outside commands, finds
/// a former primary that holds writes the set never got, and rolls a diverged member back.
fn watch(rs: std::sync::Weak<ReplSet>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(WATCH_EVERY);
        let Some(rs) = rs.upgrade() else { return };
        let Some(j) = rs.member() else { continue };
        if let Some(why) = j.node.failure() {
            fail_stop(&why);
        }
        if rs.diverged().is_some() {
            drop(j);
            if !rs.rollback_failed.load(Ordering::Acquire) {
                rs.roll_back_in_place();
            }
            continue;
        }
        let idle_noop = || {
            if let Err(e) = periodic_noop(&rs.db, now_secs()) {
                crate::log::warn(
                    "REPL",
                    &format!("writing the periodic no-op: {}", e.message),
                );
            }
        };
        if rs.as_primary(idle_noop).is_none() && j.status().role != Role::Primary {
            j.applier.check_accounted();
        }
    }
}

/// The member's replication stopped for good (openraft's core failed): the process exits,
/// as mongod's `fassert` does, rather than keep serving as a member that no longer takes part
/// in the set. What it acknowledged is durable; a restart recovers from its tables, and a
/// failure that recurs then is reported again at once.
fn fail_stop(why: &str) -> ! {
    crate::log::error(
        "REPL",
        &format!("this member's replication stopped: {why}; exiting so that a restart recovers it"),
    );
    std::process::exit(14)
}

fn now_secs() -> u32 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

/// Writes the periodic no-op (`{msg: "periodic noop"}`, as mongod's) if the oplog's newest
/// entry is `PERIODIC_NOOP_SECS` old at `now` (seconds); whether it wrote one.
fn periodic_noop(db: &DocDb, now: u32) -> DocResult<bool> {
    let oplog = db.oplog().expect("a member has an oplog");
    if now.saturating_sub(oplog.last_ts().time) < PERIODIC_NOOP_SECS {
        return Ok(false);
    }
    db.log_noop(bson::doc! {"msg": "periodic noop"})?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docdb::oplog::OplogSettings;
    use docdb::DocDbConfig;

    #[test]
    fn an_idle_primary_writes_a_noop_every_interval() {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings::from_mb(16.0).unwrap());
        let db = DocDb::open(cfg).unwrap();
        let oplog = db.oplog().unwrap().clone();
        let now = now_secs();
        // An empty oplog is as idle as can be.
        assert!(periodic_noop(&db, now).unwrap());
        let first = oplog.last_ts();
        // Nothing until the interval has passed since the newest entry (the hybrid clock
        // runs on the wall clock's seconds).
        assert!(!periodic_noop(&db, first.time + PERIODIC_NOOP_SECS - 1).unwrap());
        assert_eq!(oplog.last_ts(), first);
        assert!(periodic_noop(&db, first.time + PERIODIC_NOOP_SECS).unwrap());
        let entries = oplog.entries_after(first, 10, 1 << 20).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].get_str("op"), Ok("n"));
        assert_eq!(
            entries[0].get_document("o").unwrap(),
            &bson::doc! {"msg": "periodic noop"}
        );
    }
}
