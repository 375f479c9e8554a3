//! Members' settings (priority 0, votes 0), step-down and freeze, and a restart from the
//! storage engine's files.

use crate::common::{config, Cluster, Recorder, WAIT};
use engine::{DiskEngine, EngineConfig, KvEngine};
use repl::{Member, NodeId, ReplNode, Role, SimNet};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn initiate(c: &Cluster, members: &[Member]) {
    let first = c.node(1);
    first.run(first.initialize(members)).expect("initialize");
}

#[test]
fn a_priority_zero_member_votes_but_never_leads() {
    let mut c = Cluster::start(11, 3, config);
    let mut members: Vec<Member> = (1..=3)
        .map(|id| Member::voter(id, format!("node{id}")))
        .collect();
    members[2].priority = 0.0;
    initiate(&c, &members);
    for round in 0..3 {
        let leader = c.wait_leader(WAIT);
        assert_ne!(leader, 3, "round {round}: the priority-0 member leads");
        let pos = c.propose(&[round], WAIT);
        c.wait_applied(pos, WAIT);
        // Two of three: the survivor needs member 3's vote, which it gets.
        c.crash(leader);
        let next = c.wait_leader(WAIT);
        assert_ne!(next, 3, "round {round}: the priority-0 member leads");
        c.restart(leader);
    }
}

#[test]
fn a_member_with_votes_zero_is_a_learner_that_still_applies() {
    let mut c = Cluster::start(12, 4, config);
    let mut members: Vec<Member> = (1..=4)
        .map(|id| Member::voter(id, format!("node{id}")))
        .collect();
    members[3].votes = 0;
    members[3].priority = 0.0;
    initiate(&c, &members);
    let pos = c.propose(b"a", WAIT);
    c.wait_applied(pos, WAIT);
    assert_eq!(c.node(4).status().role, Role::Learner);
    let s = c.node(c.wait_leader(WAIT)).status();
    assert!(s.members.iter().any(|m| m.id == 4 && !m.voter), "{s:?}");
    // A learner does not count toward the majority: with it and one voter down, two voters of
    // three still commit.
    c.crash(4);
    let voter = (1..=3).find(|&id| Some(id) != c.leader()).unwrap();
    c.crash(voter);
    let pos = c.propose(b"b", WAIT);
    c.wait_applied(pos, WAIT);
}

#[test]
fn votes_zero_with_priority_is_refused() {
    let c = Cluster::start(13, 1, config);
    let mut m = Member::voter(1, "node1");
    m.votes = 0;
    let err = c.node(1).run(c.node(1).initialize(&[m])).unwrap_err();
    assert!(
        err.to_string().contains("votes 0 must have priority 0"),
        "{err}"
    );
}

#[test]
fn step_down_hands_over_and_the_old_leader_stays_out() {
    let c = Cluster::initiated(14, 3, config);
    let pos = c.propose(b"a", WAIT);
    c.wait_applied(pos, WAIT);
    let old = c.wait_leader(WAIT);
    let node = c.node(old);
    let successor = node
        .run(node.step_down(Duration::from_secs(60), Duration::from_secs(10)))
        .expect("step down");
    assert_ne!(successor, old);
    let new = c.wait_leader(WAIT);
    assert_ne!(new, old);
    assert!(c.node(old).status().frozen_for.is_some());
    let pos = c.propose(b"b", WAIT);
    c.wait_applied(pos, WAIT);
    // A secondary refuses to step down.
    let err = node.run(node.step_down(Duration::from_secs(1), Duration::from_secs(1)));
    assert!(
        matches!(err, Err(repl::ReplError::NotLeader { .. })),
        "{err:?}"
    );
}

#[test]
fn a_frozen_member_does_not_campaign_and_the_leader_refuses_to_freeze() {
    let mut c = Cluster::initiated(15, 3, config);
    let leader = c.wait_leader(WAIT);
    assert!(c.node(leader).freeze(10).is_err());
    let others: Vec<NodeId> = c.ids().into_iter().filter(|&id| id != leader).collect();
    c.node(others[0]).freeze(600).expect("freeze");
    c.crash(leader);
    let next = c.wait_leader(WAIT);
    assert_eq!(next, others[1], "only the unfrozen member may campaign");
    c.restart(leader);
    c.node(others[0]).freeze(0).expect("unfreeze");
    assert!(c.node(others[0]).status().frozen_for.is_none());
}

fn disk(dir: &std::path::Path) -> Arc<dyn KvEngine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.cache_size = 16 << 20;
    Arc::new(DiskEngine::open(cfg).expect("open engine"))
}

fn start_on_disk(
    net: &SimNet,
    id: NodeId,
    kv: Arc<dyn KvEngine>,
    applier: Arc<Recorder>,
) -> ReplNode {
    let node = ReplNode::start(&config(id), kv, applier, Arc::new(net.clone())).expect("start");
    net.register(id, node.handler());
    node
}

fn leader_of(nodes: &[ReplNode]) -> Option<&ReplNode> {
    nodes.iter().find(|n| n.status().role == Role::Primary)
}

fn commit_on(nodes: &[ReplNode], data: &[u8]) -> repl::LogPosition {
    let start = Instant::now();
    loop {
        if let Some(l) = leader_of(nodes) {
            if let Ok(p) = l.run(l.propose(data.to_vec())) {
                return p;
            }
        }
        assert!(start.elapsed() < WAIT, "nothing committed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_set_restarted_from_its_files_keeps_its_term_log_and_entries() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let appliers: Vec<Arc<Recorder>> = (0..3).map(|_| Arc::default()).collect();
    let net = SimNet::new(16);
    let nodes: Vec<ReplNode> = (0..3)
        .map(|i| {
            start_on_disk(
                &net,
                i as u64 + 1,
                disk(dirs[i].path()),
                appliers[i].clone(),
            )
        })
        .collect();
    let members: Vec<Member> = (1..=3)
        .map(|id| Member::voter(id, format!("node{id}")))
        .collect();
    nodes[0].run(nodes[0].initialize(&members)).unwrap();
    let mut committed = Vec::new();
    for i in 0..10u8 {
        committed.push(commit_on(&nodes, &[i]));
    }
    let term = nodes.iter().map(|n| n.status().term).max().unwrap();
    for (i, n) in nodes.into_iter().enumerate() {
        net.unregister(i as u64 + 1);
        n.shutdown();
    }
    // Reopen every engine from its files: the log, the vote and the membership come back.
    let nodes: Vec<ReplNode> = (0..3)
        .map(|i| {
            start_on_disk(
                &net,
                i as u64 + 1,
                disk(dirs[i].path()),
                appliers[i].clone(),
            )
        })
        .collect();
    let after = commit_on(&nodes, b"after");
    // The vote is durable: no member goes back to an older term (a leader whose committed vote
    // was for itself resumes its term, as openraft allows).
    assert!(
        after.term >= term,
        "term went back after the restart: {after} vs {term}"
    );
    assert!(after.index > committed.last().unwrap().index);
    let start = Instant::now();
    while appliers
        .iter()
        .any(|a| a.entries().last().map(|e| e.0) != Some(after))
    {
        assert!(start.elapsed() < WAIT, "not every member applied {after}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = appliers[0].entries();
    for a in &appliers {
        assert_eq!(a.entries(), first);
    }
    for pos in committed {
        assert!(first.iter().any(|(p, _)| *p == pos), "{pos} lost");
    }
}
