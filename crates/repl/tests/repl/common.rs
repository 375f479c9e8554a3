//! The test harness: an applier that records what it is given, and a set of members on the
//! in-process network.

use engine::{KvEngine, MemEngine};
use parking_lot::Mutex;
use repl::{
    Applier, BoxError, LogPosition, Member, NodeConfig, NodeId, ReplError, ReplNode, Role, SimNet,
};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every entry applied, in order, as (position, bytes); kept across a member's restart as a
/// durable applier would keep its state.
#[derive(Default)]
pub struct Recorder {
    pub applied: Mutex<Vec<(LogPosition, Vec<u8>)>>,
    /// Positions from which the log was truncated under this member.
    pub truncated: Mutex<Vec<LogPosition>>,
    /// Snapshots installed.
    pub installs: Mutex<u32>,
    /// Every entry `apply` was ever given, never rewritten by a snapshot: the history checker
    /// judges these.
    pub ever: Mutex<Vec<(LogPosition, Vec<u8>)>>,
    /// Snapshots to refuse before taking one (an applier that cannot snapshot now).
    pub refuse_snapshots: Mutex<u32>,
    /// Snapshots refused.
    pub refused: Mutex<u32>,
}

impl Recorder {
    pub fn entries(&self) -> Vec<(LogPosition, Vec<u8>)> {
        self.applied.lock().clone()
    }
}

impl Applier for Recorder {
    fn apply(&self, pos: LogPosition, entry: &[u8]) -> Result<(), BoxError> {
        let mut a = self.applied.lock();
        if let Some((last, _)) = a.last() {
            assert!(last.index < pos.index, "applied {pos} after {last}");
        }
        a.push((pos, entry.to_vec()));
        self.ever.lock().push((pos, entry.to_vec()));
        Ok(())
    }
    fn last_applied(&self) -> Option<LogPosition> {
        self.applied.lock().last().map(|x| x.0)
    }
    fn snapshot(&self, out: &mut dyn Write) -> Result<Option<LogPosition>, BoxError> {
        let mut refuse = self.refuse_snapshots.lock();
        if *refuse > 0 {
            *refuse -= 1;
            *self.refused.lock() += 1;
            return Err("not now".into());
        }
        let a = self.applied.lock();
        serde_json::to_writer(out, &*a)?;
        Ok(a.last().map(|x| x.0))
    }
    fn install_snapshot(
        &self,
        _pos: Option<LogPosition>,
        data: &mut dyn Read,
    ) -> Result<(), BoxError> {
        let entries: Vec<(LogPosition, Vec<u8>)> = serde_json::from_reader(data)?;
        *self.applied.lock() = entries;
        *self.installs.lock() += 1;
        Ok(())
    }
    fn log_truncated(&self, from: LogPosition) {
        self.truncated.lock().push(from);
    }
}

pub const WAIT: Duration = Duration::from_secs(60);

/// Short timers: faults make elections often, which the tests want; their waits are long.
pub fn config(id: NodeId) -> NodeConfig {
    NodeConfig {
        election_timeout: (300, 600),
        heartbeat: 100,
        threads: 1,
        ..NodeConfig::new(id, format!("node{id}"))
    }
}

pub struct Cluster {
    pub net: SimNet,
    pub nodes: BTreeMap<NodeId, Option<ReplNode>>,
    pub kvs: BTreeMap<NodeId, Arc<dyn KvEngine>>,
    pub appliers: BTreeMap<NodeId, Arc<Recorder>>,
    pub config: fn(NodeId) -> NodeConfig,
}

impl Cluster {
    /// Members `1..=n`, started but not yet a set.
    pub fn start(seed: u64, n: u64, config: fn(NodeId) -> NodeConfig) -> Cluster {
        let mut c = Cluster {
            net: SimNet::new(seed),
            nodes: BTreeMap::new(),
            kvs: BTreeMap::new(),
            appliers: BTreeMap::new(),
            config,
        };
        for id in 1..=n {
            c.add_node(id);
        }
        c
    }

    /// Starts member `id` on a fresh engine (not yet in the set).
    pub fn add_node(&mut self, id: NodeId) {
        self.kvs.insert(id, Arc::new(MemEngine::new()));
        self.appliers.insert(id, Arc::new(Recorder::default()));
        self.restart(id);
    }

    /// A three-or-more member set with member 1 initiating it; waits for a leader.
    pub fn initiated(seed: u64, n: u64, config: fn(NodeId) -> NodeConfig) -> Cluster {
        let c = Cluster::start(seed, n, config);
        let members: Vec<Member> = (1..=n)
            .map(|id| Member::voter(id, format!("node{id}")))
            .collect();
        let first = c.node(1);
        first.run(first.initialize(&members)).expect("initialize");
        c.wait_leader(WAIT);
        c
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    pub fn node(&self, id: NodeId) -> &ReplNode {
        self.nodes[&id].as_ref().expect("member is running")
    }

    pub fn running(&self) -> impl Iterator<Item = &ReplNode> {
        self.nodes.values().flatten()
    }

    /// Stops member `id` as a crash would: off the network, openraft stopped. Its engine (all
    /// it wrote with sync) and its applier stay for a restart.
    pub fn crash(&mut self, id: NodeId) {
        self.net.unregister(id);
        if let Some(node) = self.nodes.get_mut(&id).and_then(Option::take) {
            node.shutdown();
        }
    }

    /// Starts member `id` again on what it kept.
    pub fn restart(&mut self, id: NodeId) {
        let node = ReplNode::start(
            &(self.config)(id),
            self.kvs[&id].clone(),
            self.appliers[&id].clone(),
            Arc::new(self.net.clone()),
        )
        .expect("start");
        self.net.register(id, node.handler());
        self.nodes.insert(id, Some(node));
    }

    /// The member that is leader with the highest term among running members, if any.
    pub fn leader(&self) -> Option<NodeId> {
        self.running()
            .map(|n| n.status())
            .filter(|s| s.role == Role::Primary)
            .max_by_key(|s| s.term)
            .map(|s| s.id)
    }

    /// Waits until some member leads and every running member that hears it agrees.
    pub fn wait_leader(&self, timeout: Duration) -> NodeId {
        let start = Instant::now();
        loop {
            if let Some(l) = self.leader() {
                return l;
            }
            assert!(start.elapsed() < timeout, "no leader after {timeout:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Proposes on whichever member leads, retrying through elections, until committed.
    pub fn propose(&self, data: &[u8], timeout: Duration) -> LogPosition {
        let start = Instant::now();
        loop {
            let leader = self.wait_leader(timeout);
            let node = self.node(leader);
            match node.run(node.propose(data.to_vec())) {
                Ok(pos) => return pos,
                Err(ReplError::NotLeader { .. }) | Err(ReplError::Raft(_)) => {}
                Err(e) => panic!("propose: {e}"),
            }
            assert!(start.elapsed() < timeout, "no commit after {timeout:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every running member has applied up to `pos`.
    pub fn wait_applied(&self, pos: LogPosition, timeout: Duration) {
        let start = Instant::now();
        for (&id, node) in &self.nodes {
            if node.is_none() {
                continue;
            }
            while self.appliers[&id]
                .last_applied()
                .is_none_or(|a| a.index < pos.index)
            {
                assert!(
                    start.elapsed() < timeout,
                    "member {id} applied only {:?} of {pos} after {timeout:?}",
                    self.appliers[&id].last_applied()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
