//! Scenario tests of a replica set's log, in the manner of openraft's and etcd's suites:
//! elections, ordered application, failover, rollback, restart, initial sync, membership.

use crate::common::{config, Cluster, WAIT};
use repl::{LogPosition, Member, NodeConfig, NodeId, ReplError, Role};
use std::time::Duration;

#[test]
fn three_members_elect_one_leader_that_all_acknowledge() {
    let c = Cluster::initiated(1, 3, config);
    let leader = c.wait_leader(WAIT);
    let status = c.node(leader).status();
    assert_eq!(status.role, Role::Primary);
    assert_eq!(status.leader, Some(leader));
    assert_eq!(status.election_id, repl::status::election_id(status.term));
    assert_eq!(status.members.len(), 3);
    // Followers learn the leader and its term from its heartbeats.
    let pos = c.propose(b"x", WAIT);
    c.wait_applied(pos, WAIT);
    let leader_now = c.wait_leader(WAIT);
    for node in c.running() {
        let s = node.status();
        if s.id != leader_now {
            assert_eq!(s.role, Role::Secondary, "member {}", s.id);
        }
    }
    // The leader tracks every member's progress (the slowest member's acknowledgement may
    // arrive after the commit) and hears from each.
    let start = std::time::Instant::now();
    let caught_up = |s: &repl::Status| {
        s.members
            .iter()
            .all(|m| m.matched.is_some_and(|p| p.index >= pos.index))
    };
    let mut s = c.node(leader_now).status();
    while !caught_up(&s) && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(20));
        s = c.node(c.wait_leader(WAIT)).status();
    }
    let leader_now = s.id;
    for m in &s.members {
        assert!(m.voter);
        assert!(m.matched.is_some_and(|p| p.index >= pos.index), "{m:?}");
        if m.id != leader_now {
            assert!(m.last_heartbeat.is_some(), "{m:?}");
        }
    }
    assert!(s.committed.is_some_and(|p| p.index >= pos.index));
}

#[test]
fn committed_entries_apply_in_the_same_order_on_every_member() {
    let c = Cluster::initiated(2, 3, config);
    let mut positions = Vec::new();
    for i in 0..40u32 {
        positions.push((c.propose(&i.to_be_bytes(), WAIT), i.to_be_bytes().to_vec()));
    }
    assert!(
        positions.windows(2).all(|w| w[0].0 < w[1].0),
        "positions increase"
    );
    c.wait_applied(positions.last().unwrap().0, WAIT);
    for (id, applier) in &c.appliers {
        assert_eq!(applier.entries(), positions, "member {id}");
    }
}

#[test]
fn a_new_leader_after_the_leader_dies_keeps_every_committed_entry() {
    let mut c = Cluster::initiated(3, 3, config);
    let mut committed = Vec::new();
    for i in 0..10u32 {
        committed.push((c.propose(&i.to_be_bytes(), WAIT), i.to_be_bytes().to_vec()));
    }
    let old = c.wait_leader(WAIT);
    let old_term = c.node(old).status().term;
    c.crash(old);
    let new = c.wait_leader(WAIT);
    assert_ne!(new, old);
    assert!(c.node(new).status().term > old_term);
    for i in 10..20u32 {
        committed.push((c.propose(&i.to_be_bytes(), WAIT), i.to_be_bytes().to_vec()));
    }
    c.restart(old);
    c.wait_applied(committed.last().unwrap().0, WAIT);
    for (id, applier) in &c.appliers {
        assert_eq!(applier.entries(), committed, "member {id}");
    }
}

#[test]
fn a_partitioned_leaders_uncommitted_entries_are_truncated_never_applied() {
    let c = Cluster::initiated(4, 3, config);
    let base = c.propose(b"before", WAIT);
    c.wait_applied(base, WAIT);
    let old = c.wait_leader(WAIT);
    c.net.isolate(old, &c.ids());
    // Durable in the old leader's log (w: 1), never on a majority.
    let node = c.node(old);
    let lost: Vec<LogPosition> = (0..3u8)
        .map(|i| {
            node.run(node.propose_nowait(vec![b'L', i]))
                .expect("appended locally")
        })
        .collect();
    let short = node.run(node.wait_committed(lost[0], Duration::from_millis(300)));
    assert!(matches!(short, Err(ReplError::Timeout(_))), "{short:?}");
    // The majority side moves on.
    let survivor = *c.ids().iter().find(|&&id| id != old).unwrap();
    let mut kept = Vec::new();
    let start = std::time::Instant::now();
    while kept.len() < 3 {
        assert!(start.elapsed() < WAIT, "the majority never committed");
        let leader = c
            .running()
            .map(|n| n.status())
            .find(|s| s.role == Role::Primary && s.id != old);
        let Some(leader) = leader else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let n = c.node(leader.id);
        if let Ok(p) = n.run(n.propose(vec![b'K', kept.len() as u8])) {
            kept.push(p);
        }
    }
    c.net.heal();
    c.wait_applied(*kept.last().unwrap(), WAIT);
    let applied = c.appliers[&old].entries();
    assert!(
        applied.iter().all(|(_, e)| e[0] != b'L'),
        "an uncommitted entry was applied"
    );
    assert_eq!(applied, c.appliers[&survivor].entries());
    let truncated = c.appliers[&old].truncated.lock().clone();
    assert!(
        truncated.iter().any(|t| t.index <= lost[0].index),
        "{truncated:?} vs {lost:?}"
    );
    for pos in lost {
        match node.run(node.wait_committed(pos, WAIT)) {
            Err(ReplError::RolledBack {
                proposed,
                committed,
            }) => {
                assert_eq!(proposed, pos);
                assert!(committed.is_some_and(|c| c.term > pos.term));
            }
            other => panic!("{pos}: {other:?}"),
        }
    }
}

fn snapshotting(id: NodeId) -> NodeConfig {
    NodeConfig {
        snapshot_every: 20,
        keep_behind_snapshot: 5,
        ..config(id)
    }
}

#[test]
fn an_applier_that_cannot_snapshot_now_is_asked_again_and_the_member_goes_on() {
    // A refused snapshot must not stop the member (openraft treats a failed build as
    // fatal): the log is kept, and the next applied entries ask again.
    let mut c = Cluster::initiated(3, 3, snapshotting);
    for a in c.appliers.values() {
        *a.refuse_snapshots.lock() = 3;
    }
    let mut last = LogPosition::default();
    for i in 0..80u32 {
        last = c.propose(&i.to_be_bytes(), WAIT);
    }
    c.wait_applied(last, WAIT);
    for a in c.appliers.values() {
        assert_eq!(*a.refused.lock(), 3, "asked again after each refusal");
    }
    c.add_node(4);
    let leader = c.wait_leader(WAIT);
    let node = c.node(leader);
    node.run(node.add_member(&Member::voter(4, "node4")))
        .expect("add member 4");
    let more = c.propose(b"after", WAIT);
    c.wait_applied(more, WAIT);
    assert!(
        *c.appliers[&4].installs.lock() >= 1,
        "the log was compacted once the snapshots were taken"
    );
    assert_eq!(c.appliers[&4].entries(), c.appliers[&1].entries());
}

#[test]
fn a_new_member_catches_up_from_a_snapshot_then_votes() {
    let mut c = Cluster::initiated(5, 3, snapshotting);
    let mut last = LogPosition::default();
    for i in 0..80u32 {
        last = c.propose(&i.to_be_bytes(), WAIT);
    }
    c.wait_applied(last, WAIT);
    c.add_node(4);
    let leader = c.wait_leader(WAIT);
    let node = c.node(leader);
    node.run(node.add_member(&Member::voter(4, "node4")))
        .expect("add member 4");
    let more = c.propose(b"after", WAIT);
    c.wait_applied(more, WAIT);
    assert!(
        *c.appliers[&4].installs.lock() >= 1,
        "member 4 did not start from a snapshot"
    );
    assert_eq!(c.appliers[&4].entries(), c.appliers[&1].entries());
    let s = c.node(c.wait_leader(WAIT)).status();
    assert!(s.members.iter().any(|m| m.id == 4 && m.voter), "{s:?}");
    // Removing a member takes it out of the configuration.
    let leader = c.wait_leader(WAIT);
    let node = c.node(leader);
    let victim = if leader == 4 { 3 } else { 4 };
    node.run(node.remove_member(victim)).expect("remove");
    let s = c.node(c.wait_leader(WAIT)).status();
    assert!(s.members.iter().all(|m| m.id != victim), "{s:?}");
}

#[test]
fn w_n_answers_once_n_members_applied_the_entry() {
    let mut c = Cluster::initiated(11, 3, config);
    let leader = c.wait_leader(WAIT);
    let node = c.node(leader);
    let pos = node.run(node.propose_nowait(b"w3".to_vec())).unwrap();
    node.run(node.wait_applied_by(pos, 3, WAIT)).unwrap();
    // Answered: every member has applied it already, with no further wait.
    for (id, applier) in &c.appliers {
        let applied = applier.entries().last().map(|e| e.0);
        assert!(
            applied.is_some_and(|a| a.index >= pos.index),
            "member {id}: {applied:?}"
        );
    }
    // With a member down, two can still apply a write; three cannot.
    let follower = c.ids().into_iter().find(|&id| id != leader).unwrap();
    c.crash(follower);
    let node = c.node(leader);
    let pos = node.run(node.propose_nowait(b"w2".to_vec())).unwrap();
    node.run(node.wait_applied_by(pos, 2, WAIT)).unwrap();
    let short = Duration::from_millis(300);
    let three = node.run(node.wait_applied_by(pos, 3, short));
    assert!(matches!(three, Err(ReplError::Timeout(_))), "{three:?}");
}

#[test]
fn a_wait_for_the_commit_point_ends_when_the_member_halts() {
    let mut c = Cluster::initiated(12, 3, config);
    let leader = c.wait_leader(WAIT);
    for id in c.ids().into_iter().filter(|&id| id != leader) {
        c.crash(id);
    }
    let node = c.node(leader);
    let pos = node.run(node.propose_nowait(b"never".to_vec())).unwrap();
    // A rollback halts the member while a write still waits on it: the wait must not outlive
    // it (it waited for the full write concern limit before).
    std::thread::scope(|s| {
        let waiter = s.spawn(|| node.run(node.wait_committed(pos, Duration::from_secs(3600))));
        std::thread::sleep(Duration::from_millis(100));
        node.halt();
        let waited = waiter.join().unwrap();
        assert!(matches!(waited, Err(ReplError::Shutdown)), "{waited:?}");
    });
}
