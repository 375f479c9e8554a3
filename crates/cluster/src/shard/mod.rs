//! The shard side: a flashdoc server with `--shardsvr` runs a [`ShardNode`] as its command
//! hook and its database's write hook.
//!
//! - **Identity.** `addShard` (through a router) sends `_addShard {shardName, configDB}`; the
//!   shard keeps it in `admin.system.version` (`_id: "shardIdentity"`, as mongod) and reads its
//!   metadata from that store from then on.
//! - **Versions.** A request carrying `shardVersion` is checked against the shard's cached
//!   metadata for the collection: epoch and major must agree (3.6's write compatibility). A
//!   newer or unknown version makes the shard refresh from the store first; an older one gets
//!   StaleConfig (13388), and the router refreshes and retries.
//! - **Orphans.** Versioned reads and writes run under an ownership filter (`docdb::scope`):
//!   documents in ranges the shard does not own (a migration's clone before it commits, a
//!   donor's copy before range deletion) are invisible to them.
//! - **Access statistics.** Every versioned read and update that pins the shard key records
//!   its routing key against the owning chunk: HASS's running mean (sum and count, O(1)),
//!   exact per-key counts when the policy is `oracle`, the load finder when it is `load`.
//! - **Writes.** Every document write passes the write hook: a versioned write may not change
//!   a document's shard key (66) nor insert outside the shard's chunks (13388); a retryable
//!   write's session record joins the same atomic batch; a running migration records the
//!   `_id`s it must send again.
//! - **Replica sets.** On a member of a set (`--shardsvr --replSet`), the internal commands,
//!   migrations and range deletion run on the primary only, and a migration waits for a
//!   majority of the set to hold its writes before its points of no return (docs/replication.md,
//!   "Replica-set shards").

pub mod migrate;
mod sessions;
mod splitvector;

use crate::meta::{Catalog, Chunk, CollSnapshot, DEFAULT_ROOT};
use crate::shardkey::ShardKey;
use crate::split::{LoadFinder, SplitPolicy};
use crate::store::MetaStore;
use crate::transport::Connector;
use crate::version::{stale_config, ChunkVersion};
use bson::{doc, Bson, Document};
use docdb::scope::{with_ownership, OwnershipFilter, WriteHook, WriteToken};
use docdb::{DocDb, DocError, DocResult, FindQuery, UpdateStatement, WriteOpts};
use engine::WriteBatch;
use parking_lot::{Condvar, Mutex, RwLock};
use server::hook::{CommandCall, CommandHook, HookAccess};
use server::replset::ReplSet;
use server::reply::error_reply;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

/// Milliseconds for the load trigger's windows: the system clock, or the lab's simulated one.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// Opens the metadata store a `configDB` string names (etcd in production).
pub type StoreOpener = Arc<dyn Fn(&str) -> DocResult<Arc<dyn MetaStore>> + Send + Sync>;

pub struct Identity {
    pub name: String,
    pub config_db: String,
    pub catalog: Catalog,
}

/// What a shard knows of one sharded collection.
pub struct CollMeta {
    pub snap: CollSnapshot,
    /// The chunks this shard owns, in key order.
    pub owned: Vec<Chunk>,
    /// This shard's version of the collection.
    pub version: ChunkVersion,
}

impl CollMeta {
    fn new(snap: CollSnapshot, shard: &str) -> CollMeta {
        let owned: Vec<Chunk> = snap
            .chunks
            .iter()
            .filter(|c| c.shard == shard)
            .cloned()
            .collect();
        CollMeta {
            version: snap.shard_version(shard),
            snap,
            owned,
        }
    }
    pub fn key(&self) -> &ShardKey {
        &self.snap.key
    }
    /// The owned chunk holding `pos`.
    pub fn owned_chunk(&self, pos: &[u8]) -> Option<&Chunk> {
        let i = self.owned.partition_point(|c| c.min_enc.as_slice() <= pos);
        i.checked_sub(1)
            .map(|i| &self.owned[i])
            .filter(|c| c.contains(pos))
    }
    pub fn owns_doc(&self, doc: &Document) -> bool {
        self.owned_chunk(&self.key().position_of_doc(doc)).is_some()
    }
    /// The ownership filter of reads planned now; it keeps this metadata alive for as long as
    /// a cursor uses it (range deletion waits for that).
    fn filter(self: &Arc<Self>) -> OwnershipFilter {
        let me = self.clone();
        OwnershipFilter::new(move |d| me.owns_doc(d))
    }
}

/// Per-chunk access statistics (keyed by the chunk's min KeyString).
#[derive(Default)]
pub struct ChunkStats {
    pub sum: f64,
    pub count: u64,
    /// Exact per-key access counts (policy `oracle` only): KeyString → (routing key, count).
    pub per_key: Option<BTreeMap<Vec<u8>, (Document, u64)>>,
    pub load: Option<LoadState>,
}

#[derive(Default)]
pub struct LoadState {
    finder: LoadFinder,
    window: u64,
    in_window: u64,
    hot_windows: u32,
}

impl ChunkStats {
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// A chunk's access mean, access count, and per-key counts (policy `oracle`).
pub type AccessStats = (Option<f64>, u64, Option<Vec<(Vec<u8>, u64)>>);

/// A migration's critical section: writes to the collection wait while it is closed.
#[derive(Default)]
pub struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    in_flight: u32,
}

/// How long a write waits for a critical section, and a critical section for writes in
/// flight, before giving up.
const GATE_WAIT: Duration = Duration::from_secs(60);

/// How long a migration waits for a majority of its set to hold its writes.
const MAJORITY_WAIT: Duration = Duration::from_secs(60);

pub struct GatePass<'a>(&'a Gate);

impl Drop for GatePass<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.in_flight -= 1;
        self.0.cv.notify_all();
    }
}

impl Gate {
    pub fn enter(&self) -> DocResult<GatePass<'_>> {
        let mut s = self.state.lock();
        let deadline = std::time::Instant::now() + GATE_WAIT;
        while s.closed {
            if self.cv.wait_until(&mut s, deadline).timed_out() {
                return Err(DocError::with_code(
                    262,
                    "ExceededTimeLimit",
                    "timed out waiting for a migration's critical section",
                ));
            }
        }
        s.in_flight += 1;
        Ok(GatePass(self))
    }
    /// Closes the gate and waits for the writes in flight.
    pub fn close(&self) -> DocResult<()> {
        let mut s = self.state.lock();
        s.closed = true;
        let deadline = std::time::Instant::now() + GATE_WAIT;
        while s.in_flight > 0 {
            if self.cv.wait_until(&mut s, deadline).timed_out() {
                s.closed = false;
                self.cv.notify_all();
                return Err(DocError::with_code(
                    262,
                    "ExceededTimeLimit",
                    "timed out waiting for writes to drain before a critical section",
                ));
            }
        }
        Ok(())
    }
    pub fn open(&self) {
        self.state.lock().closed = false;
        self.cv.notify_all();
    }
}

/// What the write hook needs to know of the command running on this thread.
struct OpContext {
    meta: Option<Arc<CollMeta>>,
    ns: String,
    session: Option<sessions::Pending>,
}

thread_local! {
    static OP: RefCell<Option<OpContext>> = const { RefCell::new(None) };
}

fn with_op<T>(ctx: OpContext, body: impl FnOnce() -> T) -> T {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            OP.with(|o| *o.borrow_mut() = None);
        }
    }
    OP.with(|o| *o.borrow_mut() = Some(ctx));
    let _clear = Clear;
    body()
}

pub struct ShardNode {
    db: Arc<DocDb>,
    me: Weak<ShardNode>,
    /// The host routers and other shards reach this node at.
    host: String,
    identity: RwLock<Option<Arc<Identity>>>,
    open_store: StoreOpener,
    /// What the shard knows per namespace; `None`: known to be unsharded (a router ahead of
    /// that makes it refresh).
    colls: RwLock<HashMap<String, Option<Arc<CollMeta>>>>,
    stats: Mutex<HashMap<String, HashMap<Vec<u8>, ChunkStats>>>,
    policy: RwLock<SplitPolicy>,
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    captures: RwLock<Vec<Arc<migrate::Capture>>>,
    migrations: migrate::Migrations,
    sessions: sessions::Sessions,
    clock: Arc<dyn Clock>,
    connector: Arc<dyn Connector>,
    rng: Mutex<u64>,
    /// The replica set this node is a member of (`--shardsvr --replSet`), learned from the
    /// server's state on the first command (the server opens the set after the hook).
    replset: OnceLock<Option<Arc<ReplSet>>>,
}

const IDENTITY_DB: &str = "admin";
const IDENTITY_COLL: &str = "system.version";

impl ShardNode {
    /// Opens the shard side over `db`. With a stored identity the shard reconnects to its
    /// metadata store, removes orphans that a crash left (documents outside its chunks) and
    /// resolves a migration it was part of.
    pub fn open(
        db: Arc<DocDb>,
        host: &str,
        open_store: StoreOpener,
        connector: Arc<dyn Connector>,
        clock: Arc<dyn Clock>,
    ) -> DocResult<Arc<ShardNode>> {
        let sessions = sessions::Sessions::open(&db)?;
        let node = Arc::new_cyclic(|me| ShardNode {
            db: db.clone(),
            me: me.clone(),
            host: host.to_string(),
            identity: RwLock::new(None),
            open_store,
            colls: RwLock::new(HashMap::new()),
            stats: Mutex::new(HashMap::new()),
            policy: RwLock::new(SplitPolicy::Default),
            gates: Mutex::new(HashMap::new()),
            captures: RwLock::new(Vec::new()),
            migrations: migrate::Migrations::default(),
            sessions,
            clock,
            // Other shards named `setName/hosts` are reached at their set's primary.
            connector: Arc::new(crate::replset_conn::SetAwareConnector::new(
                connector,
                crate::replset_conn::RetryPolicy::default(),
            )),
            rng: Mutex::new(0x9E37_79B9_7F4A_7C15),
            replset: OnceLock::new(),
        });
        db.set_write_hook(Some(Arc::new(ShardWriteHook(Arc::downgrade(&node)))));
        let stored = stored_identity_doc(&db)?;
        if let Some(d) = stored {
            node.adopt_identity(&d)?;
            // A replica set's member may be a secondary: it writes nothing of its own, and
            // the set's primary owns the shard's recovery (docs/replication.md, "Replica-set
            // shards").
            if db.oplog().is_none() {
                node.recover()?;
            }
        }
        Ok(node)
    }

    fn adopt_identity(&self, stored: &Document) -> DocResult<()> {
        let name = stored.get_str("shardName").unwrap_or_default().to_string();
        let config_db = stored
            .get_str("configsvrConnectionString")
            .unwrap_or_default()
            .to_string();
        self.set_identity(&name, &config_db)
    }

    /// The identity stored in the database, if any: a set's member that was a secondary when
    /// `_addShard` ran on the primary has it by replication only.
    fn stored_identity(&self) -> DocResult<Option<Arc<Identity>>> {
        let stored = stored_identity_doc(&self.db)?;
        match stored {
            Some(d) => {
                self.adopt_identity(&d)?;
                Ok(self.identity.read().clone())
            }
            None => Ok(None),
        }
    }

    /// Where this node's writes go: `Some` on a replica set's member.
    fn replset(&self) -> Option<&Arc<ReplSet>> {
        self.replset.get().and_then(Option::as_ref)
    }

    /// Work that writes outside a client's command (migrations, range and orphan deletion)
    /// runs on the set's primary only: NotWritablePrimary elsewhere.
    pub fn check_primary(&self) -> DocResult<()> {
        match self.replset() {
            Some(rs) => server::replset::concern::check_primary(rs),
            // A member (its database keeps an oplog) whose set is not known yet: no command
            // reached it, so it cannot know it is the primary.
            None if self.db.oplog().is_some() => {
                Err(server::replset::concern::not_writable_primary())
            }
            None => Ok(()),
        }
    }

    /// Waits until a majority of the set holds everything this primary wrote (a migration's
    /// writes, before its commit to the metadata store); nothing to wait for off a set.
    pub fn replicate_to_majority(&self) -> DocResult<()> {
        match self.replset() {
            Some(rs) => server::replset::concern::replicate_to_majority(rs, MAJORITY_WAIT),
            None => self.check_primary(),
        }
    }

    pub fn db(&self) -> &Arc<DocDb> {
        &self.db
    }
    pub fn name(&self) -> Option<String> {
        self.identity.read().as_ref().map(|i| i.name.clone())
    }
    pub fn host(&self) -> &str {
        &self.host
    }
    fn arc(&self) -> Arc<ShardNode> {
        self.me.upgrade().expect("the node outlives its calls")
    }

    fn identity(&self) -> DocResult<Arc<Identity>> {
        if let Some(id) = self.identity.read().clone() {
            return Ok(id);
        }
        self.stored_identity()?.ok_or_else(|| {
            DocError::with_code(
                193,
                "ShardingStateNotInitialized",
                "this shard has not been added to a cluster (addShard) yet",
            )
        })
    }

    fn set_identity(&self, name: &str, config_db: &str) -> DocResult<()> {
        let store = (self.open_store)(config_db)?;
        let catalog = Catalog::new(store, DEFAULT_ROOT);
        if let Some(d) = catalog.setting("split")? {
            *self.policy.write() = SplitPolicy::from_doc(&d)?;
        }
        *self.identity.write() = Some(Arc::new(Identity {
            name: name.to_string(),
            config_db: config_db.to_string(),
            catalog,
        }));
        Ok(())
    }

    fn add_shard_identity(&self, cmd: &Document) -> DocResult<Document> {
        let name = cmd
            .get_str("shardName")
            .map_err(|_| DocError::failed_to_parse("_addShard needs shardName"))?;
        let config_db = cmd
            .get_str("configDB")
            .map_err(|_| DocError::failed_to_parse("_addShard needs configDB"))?;
        if let Some(cur) = self.identity.read().clone() {
            if cur.name == name && cur.config_db == config_db {
                return Ok(doc! {});
            }
            return Err(DocError::with_code(
                96,
                "OperationFailed",
                format!(
                    "this node is already shard '{}' of the cluster at {}",
                    cur.name, cur.config_db
                ),
            ));
        }
        self.set_identity(name, config_db)?;
        let out = self.db.update(
            IDENTITY_DB,
            IDENTITY_COLL,
            &[UpdateStatement {
                q: doc! {"_id": "shardIdentity"},
                u: Bson::Document(doc! {"shardName": name, "configsvrConnectionString": config_db}),
                upsert: true,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            }],
            WriteOpts {
                ordered: true,
                journal: true,
                ..WriteOpts::default()
            },
        );
        if let Some(e) = out.write_errors.into_iter().next() {
            return Err(e.error);
        }
        Ok(doc! {})
    }

    /// After a restart: resolve migrations this shard took part in, then delete documents
    /// outside its chunks in every sharded collection it holds.
    fn recover(&self) -> DocResult<()> {
        let id = self.identity()?;
        for (rec, rev) in id.catalog.migrations()? {
            let ns = rec.get_str("ns").unwrap_or_default().to_string();
            let involved = rec.get_str("from").ok() == Some(id.name.as_str())
                || rec.get_str("to").ok() == Some(id.name.as_str());
            if involved {
                // Whoever restarts aborts: the commit needs both sides alive, and deleting
                // the record first makes a late commit impossible.
                id.catalog.abort_migration(&ns, rev)?;
            }
        }
        let colls: Vec<String> = id
            .catalog
            .collections()?
            .iter()
            .filter_map(|d| d.get_str("_id").ok().map(String::from))
            .collect();
        for ns in colls {
            if let Some(meta) = self.refresh(&ns)? {
                migrate::delete_orphans(self, &ns, &meta)?;
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ metadata

    /// Re-reads a collection's metadata from the store.
    pub fn refresh(&self, ns: &str) -> DocResult<Option<Arc<CollMeta>>> {
        let id = self.identity()?;
        let snap = id.catalog.collection(ns)?;
        let meta = snap.map(|s| Arc::new(CollMeta::new(s, &id.name)));
        self.colls.write().insert(ns.to_string(), meta.clone());
        Ok(meta)
    }

    /// The cached metadata: `None` if nothing is cached, `Some(None)` if known unsharded.
    fn cached_entry(&self, ns: &str) -> Option<Option<Arc<CollMeta>>> {
        self.colls.read().get(ns).cloned()
    }

    fn cached(&self, ns: &str) -> Option<Arc<CollMeta>> {
        self.cached_entry(ns).flatten()
    }

    /// The metadata a request at version `received` may use, or StaleConfig.
    pub fn check_version(
        &self,
        ns: &str,
        received: &ChunkVersion,
    ) -> DocResult<Option<Arc<CollMeta>>> {
        let mut meta = match self.cached_entry(ns) {
            Some(m) => m,
            None => self.refresh(ns)?,
        };
        for attempt in 0..2 {
            let wanted = meta
                .as_ref()
                .map(|m| m.version)
                .unwrap_or_else(ChunkVersion::unsharded);
            let compatible = match &meta {
                None => received.is_unsharded(),
                Some(_) => !received.is_unsharded() && received.is_write_compatible(&wanted),
            };
            if compatible {
                return Ok(meta);
            }
            // Refresh when the router may know more than we do; an older router is just stale.
            let router_ahead = received.epoch != wanted.epoch || wanted.older_than(received);
            if attempt == 0 && router_ahead {
                meta = self.refresh(ns)?;
                continue;
            }
            return Err(stale_config(ns, received, &wanted));
        }
        unreachable!("two attempts")
    }

    pub fn gate(&self, ns: &str) -> Arc<Gate> {
        self.gates.lock().entry(ns.to_string()).or_default().clone()
    }

    // ------------------------------------------------------------------ statistics

    fn next_random(&self) -> u64 {
        let mut r = self.rng.lock();
        *r ^= *r << 13;
        *r ^= *r >> 7;
        *r ^= *r << 17;
        *r
    }

    /// Records an access (read or update) to routing key `key` of `ns`.
    fn record_access(&self, ns: &str, meta: &CollMeta, key: &Document) {
        let pos = meta.key().encode(key);
        let Some(chunk) = meta.owned_chunk(&pos) else {
            return;
        };
        let proj = meta.key().project(key, &chunk.min, &chunk.max);
        let policy = self.policy.read().clone();
        let r = self.next_random();
        let now = self.clock.now_ms();
        let mut stats = self.stats.lock();
        let s = stats
            .entry(ns.to_string())
            .or_default()
            .entry(chunk.min_enc.clone())
            .or_default();
        if let Some(p) = proj {
            s.sum += p;
            s.count += 1;
        }
        match &policy {
            SplitPolicy::Oracle => {
                let e = s
                    .per_key
                    .get_or_insert_with(BTreeMap::new)
                    .entry(pos.clone())
                    .or_insert_with(|| (key.clone(), 0));
                e.1 += 1;
            }
            SplitPolicy::Load(cfg) => {
                let l = s.load.get_or_insert_with(LoadState::default);
                let window = now / 1000;
                if window != l.window {
                    let was_hot = l.in_window as f64 >= cfg.qps_threshold;
                    l.hot_windows = if was_hot && window == l.window + 1 {
                        l.hot_windows + 1
                    } else {
                        0
                    };
                    if l.hot_windows == 0 {
                        l.finder = LoadFinder::default();
                    }
                    l.window = window;
                    l.in_window = 0;
                }
                l.in_window += 1;
                l.finder.record(&pos, key, cfg.samples, r);
            }
            _ => {}
        }
    }

    /// A chunk's statistics start over when its bounds change.
    fn reset_stats(&self, ns: &str, min_enc: &[u8]) {
        if let Some(m) = self.stats.lock().get_mut(ns) {
            m.remove(min_enc);
        }
    }

    fn access_stats(&self, ns: &str, min_enc: &[u8]) -> AccessStats {
        let stats = self.stats.lock();
        match stats.get(ns).and_then(|m| m.get(min_enc)) {
            Some(s) => (
                s.mean(),
                s.count,
                s.per_key
                    .as_ref()
                    .map(|m| m.iter().map(|(k, (_, n))| (k.clone(), *n)).collect()),
            ),
            None => (None, 0, None),
        }
    }

    /// `_flashdocLoadSplits`: chunks whose load has stayed above the threshold long enough,
    /// each with the key the finder chose (their finders start over).
    fn load_splits(&self) -> DocResult<Document> {
        let SplitPolicy::Load(cfg) = self.policy.read().clone() else {
            return Ok(doc! {"splits": []});
        };
        let mut out = Vec::new();
        let colls: Vec<(String, Arc<CollMeta>)> = self
            .colls
            .read()
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        let mut stats = self.stats.lock();
        for (ns, meta) in colls {
            let Some(per) = stats.get_mut(&ns) else {
                continue;
            };
            for c in &meta.owned {
                let Some(l) = per.get_mut(&c.min_enc).and_then(|s| s.load.as_mut()) else {
                    continue;
                };
                if l.hot_windows < cfg.sustain_secs {
                    continue;
                }
                if let Some(k) = l.finder.best(cfg.min_count, cfg.max_imbalance) {
                    out.push(Bson::Document(
                        doc! {"ns": ns.clone(), "min": c.min.clone(), "max": c.max.clone(), "splitKey": k},
                    ));
                }
                *l = LoadState::default();
            }
        }
        Ok(doc! {"splits": out})
    }

    fn set_policy(&self) -> DocResult<()> {
        let id = self.identity()?;
        let p = match id.catalog.setting("split")? {
            Some(d) => SplitPolicy::from_doc(&d)?,
            None => SplitPolicy::Default,
        };
        let changed = *self.policy.read() != p;
        if changed {
            *self.policy.write() = p;
            self.stats.lock().clear();
        }
        Ok(())
    }

    /// `_flushRoutingTableCacheUpdates {ns}`: refresh one collection (and the split policy).
    fn flush(&self, cmd: &Document) -> DocResult<Document> {
        self.set_policy()?;
        if let Ok(ns) = cmd.get_str("_flushRoutingTableCacheUpdates") {
            self.refresh(ns)?;
        }
        Ok(doc! {})
    }

    // ------------------------------------------------------------------ CRUD

    fn crud(&self, call: &CommandCall<'_>) -> Option<Document> {
        let is_write = matches!(
            call.name,
            "insert" | "update" | "delete" | "findAndModify" | "findandmodify"
        );
        let coll = call.cmd.get_str(call.name).ok()?;
        let ns = format!("{}.{coll}", call.db);
        // The version is this hook's to check (declared in `command_fields`, so the built-in
        // command takes the document as it is).
        let received = match call.cmd.get("shardVersion") {
            Some(v) => match ChunkVersion::from_bson(v) {
                Ok(v) => Some(v),
                Err(e) => return Some(error_reply(&e)),
            },
            None => None,
        };
        let Some(received) = received else {
            if !is_write {
                return None;
            }
            // Unversioned writes (a client talking to the shard directly) still respect a
            // migration's critical section.
            let gate = self.gate(&ns);
            let _pass = match gate.enter() {
                Ok(p) => p,
                Err(e) => return Some(error_reply(&e)),
            };
            return Some(self.run_write(call, &ns, None));
        };
        let result = (|| -> DocResult<Document> {
            let mut meta = self.check_version(&ns, &received)?;
            let gate = self.gate(&ns);
            let _pass = if is_write { Some(gate.enter()?) } else { None };
            if is_write {
                // A critical section may have ended while we waited: check again.
                meta = self.check_version(&ns, &received)?;
            }
            if let Some(m) = &meta {
                self.record_accesses(call, &ns, m);
            }
            Ok(match (&meta, is_write) {
                (_, true) => self.run_write(call, &ns, meta.clone()),
                (Some(m), false) => with_ownership(m.filter(), || call.builtin(call.cmd)),
                (None, false) => call.builtin(call.cmd),
            })
        })();
        Some(result.unwrap_or_else(|e| error_reply(&e)))
    }

    /// Runs a write command (per statement when it is a retryable write).
    fn run_write(&self, call: &CommandCall<'_>, ns: &str, meta: Option<Arc<CollMeta>>) -> Document {
        if let Some(s) = sessions::SessionInfo::of(call.cmd) {
            return sessions::run_retryable(self, call, ns, meta, s);
        }
        let ctx = OpContext {
            meta: meta.clone(),
            ns: ns.to_string(),
            session: None,
        };
        with_op(ctx, || match &meta {
            Some(m) => with_ownership(m.filter(), || call.builtin(call.cmd)),
            None => call.builtin(call.cmd),
        })
    }

    /// HASS counts reads and updates: the routing keys a command pins by equality.
    fn record_accesses(&self, call: &CommandCall<'_>, ns: &str, meta: &CollMeta) {
        let key = meta.key();
        let mut filters: Vec<Document> = Vec::new();
        match call.name {
            "find" | "count" | "distinct" => {
                let field = if call.name == "find" {
                    "filter"
                } else {
                    "query"
                };
                if let Ok(f) = call.cmd.get_document(field) {
                    filters.push(f.clone());
                }
            }
            "findAndModify" | "findandmodify" => {
                if let Ok(f) = call.cmd.get_document("query") {
                    filters.push(f.clone());
                }
            }
            "update" => {
                if let Ok(list) = call.cmd.get_array("updates") {
                    for u in list.iter().filter_map(Bson::as_document) {
                        if let Ok(q) = u.get_document("q") {
                            filters.push(q.clone());
                        }
                    }
                }
            }
            "aggregate" => {
                if let Some(Bson::Document(m)) = call
                    .cmd
                    .get_array("pipeline")
                    .ok()
                    .and_then(|p| p.first())
                    .and_then(Bson::as_document)
                    .and_then(|s| s.get("$match"))
                {
                    filters.push(m.clone());
                }
            }
            _ => {}
        }
        for f in filters {
            if let Some(values) = key.equality(&f) {
                self.record_access(ns, meta, &key.routing_key(&values));
            }
        }
    }
}

/// The commands a shard answers that a standalone does not have, sent by routers (version
/// refreshes, `splitVector`, `_addShard`, a migration's start) and by other shards (a
/// migration's clone, modifications, status, commit and abort).
const INTERNAL_COMMANDS: &[&str] = &[
    "_addShard",
    "splitVector",
    "_flashdocLoadSplits",
    "_flushRoutingTableCacheUpdates",
    "_shardsvrMoveChunk",
    "_recvChunkStart",
    "_migrateClone",
    "_transferMods",
    "_recvChunkStatus",
    "_recvChunkCommit",
    "_recvChunkAbort",
];

impl CommandHook for ShardNode {
    /// A router's `shardVersion` on the commands it routes, and a retryable write's
    /// `txnNumber` and statement ids (module docs; `sessions`).
    fn command_fields(&self, name: &str) -> &'static [&'static str] {
        match name {
            "insert" | "update" | "delete" => &["shardVersion", "txnNumber", "stmtIds"],
            "findAndModify" | "findandmodify" => &["shardVersion", "txnNumber", "stmtId"],
            "find" | "count" | "distinct" | "aggregate" => &["shardVersion"],
            _ => &[],
        }
    }

    /// The shard's own commands come from routers and other shards only: with authorization
    /// on (a key file), the internal user alone runs them.
    fn command_access(&self, name: &str) -> Option<HookAccess> {
        INTERNAL_COMMANDS
            .contains(&name)
            .then_some(HookAccess::Internal)
    }

    fn run(&self, call: &CommandCall<'_>) -> Option<Document> {
        self.replset.get_or_init(|| call.state.replset().cloned());
        if INTERNAL_COMMANDS.contains(&call.name) {
            // Routers and other shards talk to a set's primary; the shard's own steps write.
            if let Err(e) = self.check_primary() {
                return Some(error_reply(&e));
            }
        }
        let result = match call.name {
            "_addShard" => self.add_shard_identity(call.cmd),
            "splitVector" => splitvector::split_vector(self, call.cmd),
            "_flashdocLoadSplits" => self.load_splits(),
            "_flushRoutingTableCacheUpdates" => self.flush(call.cmd),
            "_shardsvrMoveChunk" => migrate::move_chunk(&self.arc(), call.cmd),
            "_recvChunkStart" => migrate::recv_chunk_start(&self.arc(), call.cmd),
            "_migrateClone" => migrate::migrate_clone(self, call.cmd),
            "_transferMods" => migrate::transfer_mods(self, call.cmd),
            "_recvChunkStatus" => migrate::recv_chunk_status(self, call.cmd),
            "_recvChunkCommit" => migrate::recv_chunk_commit(self, call.cmd),
            "_recvChunkAbort" => migrate::recv_chunk_abort(self, call.cmd),
            "insert" | "update" | "delete" | "findAndModify" | "findandmodify" | "find"
            | "count" | "distinct" | "aggregate" => return self.crud(call),
            _ => return None,
        };
        Some(match result {
            Ok(mut d) => {
                d.insert("ok", 1.0);
                d
            }
            Err(e) => error_reply(&e),
        })
    }
}

/// The database's write hook on a shard (module docs).
struct ShardWriteHook(Weak<ShardNode>);

impl WriteHook for ShardWriteHook {
    fn before(
        &self,
        ns: &str,
        old: Option<&Document>,
        new: Option<&Document>,
        batch: &mut WriteBatch,
    ) -> DocResult<Option<Box<dyn WriteToken>>> {
        let Some(node) = self.0.upgrade() else {
            return Ok(None);
        };
        let pending = OP.with(|o| -> DocResult<Option<sessions::Pending>> {
            let mut o = o.borrow_mut();
            let Some(ctx) = o.as_mut().filter(|c| c.ns == ns) else {
                return Ok(None);
            };
            if let Some(meta) = &ctx.meta {
                check_versioned_write(meta, old, new)?;
            }
            Ok(ctx.session.take())
        })?;
        if let Some(p) = pending {
            node.sessions.add_record(&p, old, new, batch)?;
        }
        let captures: Vec<Arc<migrate::Capture>> = node
            .captures
            .read()
            .iter()
            .filter(|c| c.ns == ns)
            .cloned()
            .collect();
        if captures.is_empty() {
            return Ok(None);
        }
        let ids: Vec<Bson> = [old, new]
            .into_iter()
            .flatten()
            .filter_map(|d| d.get("_id").cloned())
            .collect();
        let positions: Vec<Vec<u8>> = [old, new]
            .into_iter()
            .flatten()
            .map(|d| captures[0].key.position_of_doc(d))
            .collect();
        Ok(Some(Box::new(migrate::CaptureToken {
            captures,
            positions,
            ids,
        })))
    }
}

/// A versioned write keeps the document's shard key and stays inside the shard's chunks.
fn check_versioned_write(
    meta: &CollMeta,
    old: Option<&Document>,
    new: Option<&Document>,
) -> DocResult<()> {
    let key = meta.key();
    match (old, new) {
        (Some(o), Some(n)) if key.position_of_doc(o) != key.position_of_doc(n) => {
            Err(DocError::immutable_field(format!(
                "After applying the update, the (immutable) field(s) of the shard key {} were found to have been altered",
                key.pattern
            )))
        }
        (None, Some(n)) if !meta.owns_doc(n) => Err(stale_config(
            &meta.snap.ns,
            &ChunkVersion::unsharded(),
            &meta.version,
        )),
        _ => Ok(()),
    }
}

/// The shard identity document `_addShard` stored (`admin.system.version`), if any.
fn stored_identity_doc(db: &DocDb) -> DocResult<Option<Document>> {
    db.find(
        IDENTITY_DB,
        IDENTITY_COLL,
        &FindQuery {
            filter: doc! {"_id": "shardIdentity"},
            ..Default::default()
        },
    )?
    .next()
    .transpose()
}
