//! A member of a replica set: openraft on a tokio runtime the member owns, over the storage
//! engine's tables, the user's applier and a transport.

use crate::state_machine::StateMachine;
use crate::status::{election_id, MemberStatus, Role, Status};
use crate::store::{LogStore, Shared};
use crate::transport::{request_election, Contacts, Network, RaftHandler};
use crate::{
    Applier, LogPosition, MemberNode, NodeId, Proposal, Raft, ReplError, Result, RpcHandler,
    Transport,
};
use engine::KvEngine;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A member's settings. Times are in milliseconds.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub id: NodeId,
    pub addr: String,
    /// A follower that hears no leader for a random time in this range campaigns (mongod's
    /// `electionTimeoutMillis`, there one value plus a random offset).
    pub election_timeout: (u64, u64),
    /// mongod's `heartbeatIntervalMillis`.
    pub heartbeat: u64,
    /// Take a snapshot after this many entries since the last one.
    pub snapshot_every: u64,
    /// Entries kept in the log behind the last snapshot (a member this far behind catches up
    /// from the log; further behind, from the snapshot).
    pub keep_behind_snapshot: u64,
    /// Threads of the member's runtime.
    pub threads: usize,
}

/// Log entries in one AppendEntries (see `raft_config`).
pub const MAX_PAYLOAD_ENTRIES: u64 = 2;

impl NodeConfig {
    /// Defaults for one machine that may be loaded: elections after 1.5–3 s of silence,
    /// heartbeats every 300 ms.
    pub fn new(id: NodeId, addr: impl Into<String>) -> NodeConfig {
        NodeConfig {
            id,
            addr: addr.into(),
            election_timeout: (1500, 3000),
            heartbeat: 300,
            snapshot_every: 10_000,
            keep_behind_snapshot: 1000,
            threads: 2,
        }
    }

    fn raft_config(&self) -> Result<Arc<openraft::Config>> {
        let cfg = openraft::Config {
            cluster_name: "flashdoc".into(),
            election_timeout_min: self.election_timeout.0,
            election_timeout_max: self.election_timeout.1,
            heartbeat_interval: self.heartbeat,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.keep_behind_snapshot,
            install_snapshot_timeout: self.election_timeout.1.max(1000),
            // openraft bounds an AppendEntries in entries, not bytes. An entry carries up to
            // 1 MiB of oplog entries, or one larger entry (a document up to 16 MB), so two
            // keep an RPC within the wire's 48 MB message (base64 in JSON: 4/3); catch-up
            // still moves up to 512 oplog entries a round trip.
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            ..Default::default()
        };
        Ok(Arc::new(
            cfg.validate()
                .map_err(|e| ReplError::Config(e.to_string()))?,
        ))
    }
}

/// A member as a set's configuration names it (mongod's `members[n]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub id: NodeId,
    pub addr: String,
    /// 1: a Raft voter; 0: a learner, which copies the log but neither votes nor counts toward
    /// the majority.
    pub votes: u8,
    /// 0: never campaigns. Any positive value: may campaign; values are not compared
    /// (docs/replication.md).
    pub priority: f64,
    pub hidden: bool,
}

impl Member {
    pub fn voter(id: NodeId, addr: impl Into<String>) -> Member {
        Member {
            id,
            addr: addr.into(),
            votes: 1,
            priority: 1.0,
            hidden: false,
        }
    }

    /// Checks the settings as mongod does, and maps them onto what Raft records.
    fn node(&self) -> Result<MemberNode> {
        let bad = |why: String| Err(ReplError::Config(format!("member {}: {why}", self.id)));
        if self.votes > 1 {
            return bad(format!("votes must be 0 or 1, not {}", self.votes));
        }
        if !(0.0..=1000.0).contains(&self.priority) {
            return bad(format!(
                "priority must be between 0 and 1000, not {}",
                self.priority
            ));
        }
        if self.votes == 0 && self.priority > 0.0 {
            return bad("a member with votes 0 must have priority 0".into());
        }
        if self.hidden && self.priority > 0.0 {
            return bad("a hidden member must have priority 0".into());
        }
        Ok(MemberNode {
            addr: self.addr.clone(),
            electable: self.priority > 0.0,
            hidden: self.hidden,
        })
    }
}

/// What the member's background tasks and the futures it hands out share.
struct Inner {
    id: NodeId,
    raft: Raft,
    shared: Arc<Shared>,
    transport: Arc<dyn Transport>,
    contacts: Contacts,
    next_seq: AtomicU64,
    frozen_until: Mutex<Option<Instant>>,
    /// A step-down is under way: writes are refused, as mongod refuses them once
    /// `replSetStepDown` starts.
    stepping_down: AtomicBool,
    /// openraft's leader lease (its longest election timeout): a follower that heard the leader
    /// this recently refuses to vote for anyone else.
    lease: Duration,
}

pub struct ReplNode {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

fn raft_err<E: std::fmt::Display>(e: E) -> ReplError {
    ReplError::Raft(e.to_string())
}

/// openraft's write error, with "not the leader" as mongod's NotWritablePrimary.
fn write_err(e: RaftError<NodeId, ClientWriteError<NodeId, MemberNode>>) -> ReplError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ReplError::NotLeader {
            leader: f.leader_id.zip(f.leader_node.map(|n| n.addr)),
        },
        RaftError::Fatal(openraft::error::Fatal::Stopped) => ReplError::Shutdown,
        e => raft_err(e),
    }
}

impl ReplNode {
    /// Starts a member on its durable state in `kv` (a new member, or one restarting): its own
    /// runtime, the replication tables, openraft. It serves RPCs once the caller hands
    /// [`ReplNode::handler`] to the transport's listening side. Not to be called from inside a
    /// tokio runtime (it blocks on openraft's start).
    pub fn start(
        cfg: &NodeConfig,
        kv: Arc<dyn KvEngine>,
        applier: Arc<dyn Applier>,
        transport: Arc<dyn Transport>,
    ) -> Result<ReplNode> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads.max(1))
            .thread_name(format!("repl-{}", cfg.id))
            .enable_all()
            .build()
            .map_err(|e| ReplError::Config(format!("cannot start the runtime: {e}")))?;
        let shared = Shared::open(cfg.id, kv, applier)?;
        let sm = StateMachine::open(shared.clone()).map_err(raft_err)?;
        let log = LogStore {
            shared: shared.clone(),
        };
        let contacts = Contacts::default();
        let network = Network {
            id: cfg.id,
            transport: transport.clone(),
            contacts: contacts.clone(),
        };
        let raft_cfg = cfg.raft_config()?;
        let raft = runtime
            .block_on(Raft::new(cfg.id, raft_cfg, network, log, sm))
            .map_err(raft_err)?;
        let inner = Arc::new(Inner {
            id: cfg.id,
            raft,
            shared,
            transport,
            contacts,
            // Random, so a restarted member never mistakes an entry its earlier run proposed
            // for one it waits on.
            next_seq: AtomicU64::new(rand::random::<u64>() >> 1),
            frozen_until: Mutex::new(None),
            stepping_down: AtomicBool::new(false),
            lease: Duration::from_millis(cfg.election_timeout.1),
        });
        runtime.spawn(control_elections(Arc::downgrade(&inner)));
        Ok(ReplNode {
            inner,
            runtime: Some(runtime),
        })
    }

    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// The member's receiving side, for the transport's listener.
    pub fn handler(&self) -> Arc<dyn RpcHandler> {
        Arc::new(RaftHandler {
            raft: self.inner.raft.clone(),
        })
    }

    /// The member's runtime, for work that must run on it (a TCP listener).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        self.runtime.as_ref().expect("running").handle()
    }

    /// Runs `fut` on the member's runtime and blocks the calling thread until it ends.
    pub fn run<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime().spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().expect("the member's runtime ran the task")
    }

    /// Starts a new set with these members (`replSetInitiate`), from one member whose log is
    /// empty. Voters form the first configuration; `votes: 0` members join as learners after.
    pub fn initialize(
        &self,
        members: &[Member],
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let inner = self.inner.clone();
        let members = members.to_vec();
        async move {
            let mut voters = BTreeMap::new();
            let mut learners = Vec::new();
            for m in &members {
                if m.votes == 1 {
                    voters.insert(m.id, m.node()?);
                } else {
                    learners.push((m.id, m.node()?));
                }
            }
            if voters.is_empty() {
                return Err(ReplError::Config(
                    "a set needs at least one voting member".into(),
                ));
            }
            inner.raft.initialize(voters).await.map_err(raft_err)?;
            if learners.is_empty() {
                return Ok(());
            }
            inner.lead_first_configuration().await?;
            for (id, node) in learners {
                inner
                    .raft
                    .add_learner(id, node, false)
                    .await
                    .map_err(write_err)?;
            }
            Ok(())
        }
    }

    /// Appends `entry` to the set's log and returns its position once it is committed (on a
    /// majority of voters) and applied here: `w: "majority"`. Fails with `NotLeader` on a
    /// member that is not the leader.
    pub fn propose(
        &self,
        entry: Vec<u8>,
    ) -> impl Future<Output = Result<LogPosition>> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            let p = inner.proposal(entry)?;
            let resp = inner.raft.client_write(p).await.map_err(write_err)?;
            Ok(LogPosition::from_log_id(&resp.log_id))
        }
    }

    /// Appends `entry` and returns its position as soon as it is durable in this member's own
    /// log, before any other member has it: `w: 1`. [`ReplNode::wait_committed`] then waits
    /// for the majority, and tells whether the entry survived.
    pub fn propose_nowait(
        &self,
        entry: Vec<u8>,
    ) -> impl Future<Output = Result<LogPosition>> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            let p = inner.proposal(entry)?;
            let seq = p.seq;
            let (tx, appended) = oneshot::channel();
            inner.shared.appended.lock().insert(seq, tx);
            let res = inner.append_only(p, appended).await;
            inner.shared.appended.lock().remove(&seq);
            res
        }
    }

    /// Waits until the entry at `pos` is committed, for at most `timeout` (`wtimeout`); fails
    /// with `RolledBack` if another entry was committed at its index.
    pub fn wait_committed(
        &self,
        pos: LogPosition,
        timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            let mut committed = inner.shared.committed.subscribe();
            let reached = committed.wait_for(|c| c.is_some_and(|c| c.index >= pos.index));
            // A halted member (a rollback restarts the member on a new node) never moves its
            // commit point again: the wait ends with it.
            let mut metrics = inner.raft.metrics();
            let halted = metrics.wait_for(|m| m.running_state.is_err());
            tokio::select! {
                r = tokio::time::timeout(timeout, reached) => match r {
                    Err(_) => return Err(ReplError::Timeout(timeout)),
                    Ok(Err(_)) => return Err(ReplError::Shutdown),
                    Ok(Ok(_)) => {}
                },
                _ = halted => return Err(ReplError::Shutdown),
            }
            inner.committed_at(pos)
        }
    }

    /// Waits until `n` members applied the entry at `pos` (`w: N`: mongod acknowledges once N
    /// members report an applied optime at or past the write's), for at most `timeout`.
    pub fn wait_applied_by(
        &self,
        pos: LogPosition,
        n: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        self.wait_applied(pos, Arc::new(move |ids: &[NodeId]| ids.len() >= n), timeout)
    }

    /// Waits until the members that applied the entry at `pos` are `enough` (a `w: N` or a
    /// tag set's mode), for at most `timeout`; this member counts once it applied `pos`
    /// itself. First the members whose logs hold it must be enough (the leader's own view of
    /// their progress); then their applied positions are asked for, with a backoff, until
    /// those that applied it are (a follower applies once it learns the commit point, with
    /// the next append or heartbeat). Fails with `NotLeader` once this member stops leading
    /// in `pos`'s term.
    pub fn wait_applied(
        &self,
        pos: LogPosition,
        enough: Enough,
        timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            let deadline = Instant::now() + timeout;
            inner.wait_held(pos, &enough, timeout).await?;
            let mut backoff = Duration::from_millis(1);
            loop {
                if !inner.leads_in(pos.term) {
                    return Err(ReplError::NotLeader { leader: None });
                }
                if enough(&inner.members_applied(pos).await) {
                    return Ok(());
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(ReplError::Timeout(timeout));
                }
                tokio::time::sleep(backoff.min(deadline - now)).await;
                backoff = (backoff * 2).min(APPLIED_POLL_MAX);
            }
        }
    }
}

/// Whether the members named hold (or applied) an entry in the number or the places a write
/// concern asks for.
pub type Enough = Arc<dyn Fn(&[NodeId]) -> bool + Send + Sync>;

/// The longest wait between two rounds of asking the members what they applied (`w: N`).
const APPLIED_POLL_MAX: Duration = Duration::from_millis(20);

impl Inner {
    fn leads_in(&self, term: u64) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_term == term
    }

    /// Waits until the members whose logs hold the entry at `pos`, as this leader sees their
    /// progress, are `enough`; this member counts, since it proposed `pos`
    /// ([`ReplNode::propose_nowait`] returns once it is durable here). By Raft's log matching
    /// a member whose log matches the leader's at a later index holds `pos` too.
    async fn wait_held(&self, pos: LogPosition, enough: &Enough, timeout: Duration) -> Result<()> {
        let me = self.id;
        let leads = |m: &openraft::RaftMetrics<NodeId, MemberNode>| {
            m.state == ServerState::Leader && m.current_term == pos.term
        };
        let mut metrics = self.raft.metrics();
        let settled = async {
            let m = metrics
                .wait_for(|m| !leads(m) || enough(&holding(m, me, pos)))
                .await?;
            Ok::<bool, tokio::sync::watch::error::RecvError>(leads(&m))
        };
        match tokio::time::timeout(timeout, settled).await {
            Err(_) => Err(ReplError::Timeout(timeout)),
            Ok(Err(_)) => Err(ReplError::Shutdown),
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(ReplError::NotLeader { leader: None }),
        }
    }

    /// The members (this one included) that applied the entry at `pos`, asking the others at
    /// once; a member that does not answer within [`APPLIED_ASK_LIMIT`] counts as not yet.
    async fn members_applied(&self, pos: LogPosition) -> Vec<NodeId> {
        let m = self.raft.metrics().borrow().clone();
        let asks: Vec<_> = m
            .membership_config
            .membership()
            .nodes()
            .filter(|(id, _)| **id != self.id)
            .map(|(&id, node)| {
                let (transport, me, addr) = (self.transport.clone(), self.id, node.addr.clone());
                let ask = tokio::spawn(async move {
                    let ask = crate::transport::applied_index(&*transport, me, id, &addr);
                    tokio::time::timeout(APPLIED_ASK_LIMIT, ask).await
                });
                (id, ask)
            })
            .collect();
        let mut applied = Vec::new();
        if m.last_applied.is_some_and(|l| l.index >= pos.index) {
            applied.push(self.id);
        }
        for (id, ask) in asks {
            if let Ok(Ok(Ok(Some(index)))) = ask.await {
                if index >= pos.index {
                    applied.push(id);
                }
            }
        }
        applied
    }
}

/// How long a `w: N` write waits for one member's answer about what it applied.
const APPLIED_ASK_LIMIT: Duration = Duration::from_secs(1);

/// The members whose logs, as the leader `me` last heard, hold the entry at `pos`: `me`,
/// which proposed it, and the others that acknowledged it.
fn holding(
    m: &openraft::RaftMetrics<NodeId, MemberNode>,
    me: NodeId,
    pos: LogPosition,
) -> Vec<NodeId> {
    let others =
        m.replication.iter().flatten().filter_map(|(&id, l)| {
            (id != me && l.is_some_and(|l| l.index >= pos.index)).then_some(id)
        });
    std::iter::once(me).chain(others).collect()
}

impl Inner {
    fn proposal(&self, data: Vec<u8>) -> Result<Proposal> {
        if self.stepping_down.load(Ordering::Acquire) {
            return Err(ReplError::NotLeader { leader: None });
        }
        Ok(Proposal {
            origin: self.id,
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            data,
        })
    }

    /// Submits `p` and waits until the log store reports it appended here, or openraft
    /// answers first (refused, or already committed).
    async fn append_only(
        &self,
        p: Proposal,
        appended: oneshot::Receiver<LogPosition>,
    ) -> Result<LogPosition> {
        let answer = self.raft.client_write_ff(p).await.map_err(raft_err)?;
        tokio::select! {
            pos = appended => pos.map_err(|_| ReplError::Shutdown),
            res = answer => match res {
                Ok(Ok(resp)) => Ok(LogPosition::from_log_id(&resp.log_id)),
                Ok(Err(e)) => Err(write_err(RaftError::APIError(e))),
                Err(_) => Err(ReplError::Shutdown),
            },
        }
    }

    /// With the commit point at or past `pos.index`: whether the entry committed there is the
    /// one at `pos`.
    fn committed_at(&self, pos: LogPosition) -> Result<()> {
        let storage = |e: crate::store::StoreErr| ReplError::Storage(e.to_string());
        let found = match self.shared.entry_at(pos.index).map_err(storage)? {
            Some(e) => Some(LogPosition::from_log_id(&e.log_id)),
            None => match self.shared.purged().map_err(storage)? {
                Some(p) if p.index == pos.index => Some(LogPosition::from_log_id(&p)),
                _ => return Err(ReplError::Compacted(pos)),
            },
        };
        if found == Some(pos) {
            Ok(())
        } else {
            Err(ReplError::RolledBack {
                proposed: pos,
                committed: found,
            })
        }
    }

    /// Waits until this member, which initialized the set, leads it with the first
    /// configuration committed: openraft changes membership only from there. Only the
    /// initializing member knows the configuration, so only it can win the first election.
    async fn lead_first_configuration(&self) -> Result<()> {
        let wait = self.lease * 20;
        let mut metrics = self.raft.metrics();
        let settled = tokio::time::timeout(
            wait,
            metrics.wait_for(|m| {
                let config_at = m.membership_config.log_id().map(|l| l.index);
                m.state == ServerState::Leader && m.last_applied.map(|l| l.index) >= config_at
            }),
        )
        .await
        .map(|r| r.map(|_| ()));
        match settled {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ReplError::Shutdown),
            Err(_) => Err(ReplError::Timeout(wait)),
        }
    }

    /// Whether this member may campaign now: electable in the configuration, and not frozen.
    fn may_campaign(&self) -> bool {
        let frozen = self.frozen_until.lock().is_some_and(|t| Instant::now() < t);
        let metrics = self.raft.metrics().borrow().clone();
        let electable = metrics
            .membership_config
            .membership()
            .get_node(&self.id)
            .is_none_or(|n| n.electable);
        electable && !frozen
    }
}

/// Keeps openraft's election timer in step with the member's priority and freeze: a member
/// with priority 0, or frozen, never campaigns (it still votes).
async fn control_elections(inner: std::sync::Weak<Inner>) {
    let mut enabled = true;
    loop {
        let Some(inner) = inner.upgrade() else { return };
        let want = inner.may_campaign();
        if want != enabled {
            inner.raft.runtime_config().elect(want);
            enabled = want;
        }
        drop(inner);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl ReplNode {
    /// Adds a member (`replSetReconfig`): first as a learner, which copies the log (or a
    /// snapshot) until it has caught up, then, with `votes: 1`, as a voter. Call on the leader.
    pub fn add_member(&self, m: &Member) -> impl Future<Output = Result<()>> + Send + 'static {
        let inner = self.inner.clone();
        let m = m.clone();
        async move {
            let node = m.node()?;
            inner
                .raft
                .add_learner(m.id, node, true)
                .await
                .map_err(write_err)?;
            if m.votes == 1 {
                let ids = BTreeSet::from([m.id]);
                inner
                    .raft
                    .change_membership(ChangeMembers::AddVoterIds(ids), false)
                    .await
                    .map_err(write_err)?;
            }
            Ok(())
        }
    }

    /// Removes a member, voter or learner. Call on the leader.
    pub fn remove_member(&self, id: NodeId) -> impl Future<Output = Result<()>> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            let ids = BTreeSet::from([id]);
            let is_voter = inner
                .raft
                .metrics()
                .borrow()
                .membership_config
                .voter_ids()
                .any(|v| v == id);
            let change = if is_voter {
                ChangeMembers::RemoveVoters(ids)
            } else {
                ChangeMembers::RemoveNodes(ids)
            };
            inner
                .raft
                .change_membership(change, false)
                .await
                .map_err(write_err)?;
            Ok(())
        }
    }

    /// Changes a member's priority or `hidden` (not its votes: remove and add it for that).
    pub fn reconfigure_member(
        &self,
        m: &Member,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let inner = self.inner.clone();
        let m = m.clone();
        async move {
            let change = ChangeMembers::SetNodes(BTreeMap::from([(m.id, m.node()?)]));
            inner
                .raft
                .change_membership(change, false)
                .await
                .map_err(write_err)?;
            Ok(())
        }
    }

    /// Keeps this member from campaigning for `secs` (`replSetFreeze`; 0 unfreezes). Refused
    /// on the leader, as mongod refuses it on the primary.
    pub fn freeze(&self, secs: u64) -> Result<()> {
        if self.inner.raft.metrics().borrow().state == ServerState::Leader {
            return Err(ReplError::Raft(
                "cannot freeze the primary; step it down".into(),
            ));
        }
        *self.inner.frozen_until.lock() =
            (secs > 0).then(|| Instant::now() + Duration::from_secs(secs));
        Ok(())
    }
}

impl Inner {
    /// The caught-up electable voters other than this member, as the leader sees them.
    fn caught_up_successors(&self) -> Vec<(NodeId, String)> {
        let metrics = self.raft.metrics().borrow().clone();
        let last = self.raft.data_metrics().borrow().last_log;
        let Some(progress) = metrics.replication else {
            return Vec::new();
        };
        let membership = metrics.membership_config.membership().clone();
        membership
            .voter_ids()
            .filter(|&id| id != self.id)
            .filter(|id| progress.get(id).is_some_and(|m| *m == last))
            .filter_map(|id| {
                let node = membership.get_node(&id)?;
                node.electable.then(|| (id, node.addr.clone()))
            })
            .collect()
    }

    /// The hand-over of a step-down, writes already refused: wait for a caught-up successor,
    /// stop heartbeats so the followers' leader lease runs out, then ask the successor to
    /// campaign, and wait until this member is no longer the leader.
    async fn hand_over(&self, catch_up: Duration) -> Result<NodeId> {
        let deadline = Instant::now() + catch_up;
        let (target, addr) = loop {
            if let Some(s) = self.caught_up_successors().into_iter().next() {
                break s;
            }
            if Instant::now() >= deadline {
                return Err(ReplError::Timeout(catch_up));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        self.raft.runtime_config().heartbeat(false);
        tokio::time::sleep(self.lease + Duration::from_millis(100)).await;
        request_election(&*self.transport, self.id, target, &addr)
            .await
            .map_err(|e| ReplError::Raft(format!("asking {target} to campaign: {e}")))?;
        let mut metrics = self.raft.metrics();
        let deposed = tokio::time::timeout(
            self.lease * 4,
            metrics.wait_for(|m| m.state != ServerState::Leader),
        )
        .await
        .map(|r| r.map(|_| ()));
        match deposed {
            Ok(Ok(())) => Ok(target),
            Ok(Err(_)) => Err(ReplError::Shutdown),
            Err(_) => Err(ReplError::Timeout(self.lease * 4)),
        }
    }
}

impl ReplNode {
    /// Steps the leader down (`replSetStepDown`): refuses writes, waits up to `catch_up` for an
    /// electable voter to hold the whole log, hands leadership to it, and stays out of
    /// elections for `stay_down`. Returns the member asked to take over. openraft 0.9 has no
    /// leadership transfer; docs/replication.md says what this costs.
    pub fn step_down(
        &self,
        stay_down: Duration,
        catch_up: Duration,
    ) -> impl Future<Output = Result<NodeId>> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            if inner.raft.metrics().borrow().state != ServerState::Leader {
                let leader = inner.raft.current_leader().await;
                return Err(ReplError::NotLeader {
                    leader: leader.map(|l| (l, String::new())),
                });
            }
            inner.stepping_down.store(true, Ordering::Release);
            *inner.frozen_until.lock() = Some(Instant::now() + stay_down.max(inner.lease * 2));
            inner.raft.runtime_config().elect(false);
            let res = inner.hand_over(catch_up).await;
            inner.raft.runtime_config().heartbeat(true);
            inner.stepping_down.store(false, Ordering::Release);
            if res.is_err() {
                *inner.frozen_until.lock() = None;
            } else {
                *inner.frozen_until.lock() = Some(Instant::now() + stay_down);
            }
            res
        }
    }

    /// The set as this member sees it.
    pub fn status(&self) -> Status {
        let inner = &self.inner;
        let m = inner.raft.metrics().borrow().clone();
        let last_log = inner.raft.data_metrics().borrow().last_log;
        let contacts = inner.contacts.lock().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(&id, node)| {
                let matched = if id == inner.id {
                    last_log
                } else {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id).copied().flatten())
                };
                MemberStatus {
                    id,
                    addr: node.addr.clone(),
                    voter: voters.contains(&id),
                    electable: node.electable,
                    hidden: node.hidden,
                    matched: matched.map(|l| LogPosition::from_log_id(&l)),
                    last_heartbeat: contacts.get(&id).map(|t| t.elapsed()),
                }
            })
            .collect();
        let role = match m.state {
            ServerState::Leader => Role::Primary,
            ServerState::Follower if voters.contains(&inner.id) => Role::Secondary,
            ServerState::Candidate => Role::Candidate,
            ServerState::Learner | ServerState::Follower
                if membership.get_node(&inner.id).is_some() =>
            {
                Role::Learner
            }
            _ => Role::Startup,
        };
        let frozen_for = inner
            .frozen_until
            .lock()
            .and_then(|t| t.checked_duration_since(Instant::now()));
        let pos = |l: Option<crate::LogId>| l.map(|l| LogPosition::from_log_id(&l));
        Status {
            id: inner.id,
            role,
            term: m.current_term,
            leader: m.current_leader,
            election_id: election_id(m.current_term),
            last_log: pos(last_log),
            committed: pos(*inner.shared.committed.borrow()),
            last_applied: pos(m.last_applied),
            members,
            frozen_for,
        }
    }

    /// Why openraft's core stopped on its own, if it did: a failure of the log's storage or
    /// of the state machine's apply, which openraft treats as fatal. `None` while it runs and
    /// after a stop that was asked for ([`ReplNode::halt`], [`ReplNode::shutdown`]).
    pub fn failure(&self) -> Option<String> {
        match &self.inner.raft.metrics().borrow().running_state {
            Ok(()) | Err(openraft::error::Fatal::Stopped) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    /// Stops openraft while other handles to this node may still be out (a command waiting
    /// on it): from here the node writes nothing more to its tables, so another node may be
    /// started on them (a rollback's restart). The runtime goes with the last handle.
    pub fn halt(&self) {
        let raft = self.inner.raft.clone();
        let _ = self.run(async move { raft.shutdown().await });
    }

    /// Stops the member: openraft, then the runtime. What it wrote durably stays in the engine
    /// for a restart ([`ReplNode::start`] on the same engine).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            let raft = self.inner.raft.clone();
            let _ = rt.block_on(raft.shutdown());
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for ReplNode {
    fn drop(&mut self) {
        self.stop();
    }
}
