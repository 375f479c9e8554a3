//! Randomized fault runs with a history checker, in the spirit of etcd's robustness tests: per
//! seed, a set of 3 or 5 members on the in-process network suffers partitions, message drops
//! and delays, crashes and restarts while clients propose; then the network heals, every
//! member restarts, and the checker judges what each member applied.
//!
//! 200 seeds in the unit run; `REPL_SEEDS=N` runs N (the long form), `REPL_SEED_BASE` moves the
//! first seed.

use crate::common::{Cluster, WAIT};
use repl::{LogPosition, NodeConfig, NodeId, ReplError, Role};
use std::collections::BTreeMap;
use std::time::Duration;

const ROUNDS: usize = 3;
const PROPOSALS_PER_ROUND: usize = 4;
const THREADS: u64 = 8;

fn fast(id: NodeId) -> NodeConfig {
    NodeConfig {
        election_timeout: (150, 300),
        heartbeat: 50,
        // Snapshots often, few entries kept behind: restarted members catch up by snapshot.
        snapshot_every: 12,
        keep_behind_snapshot: 3,
        threads: 1,
        ..NodeConfig::new(id, format!("node{id}"))
    }
}

/// What clients were told.
#[derive(Default)]
struct History {
    /// Majority-committed, acknowledged: must be applied everywhere, at this position.
    acked: Vec<(LogPosition, Vec<u8>)>,
    /// Reported rolled back: must be applied nowhere.
    rolled_back: Vec<(LogPosition, Vec<u8>)>,
    /// No verdict before the client gave up waiting; asked again once the set converges.
    pending: Vec<(NodeId, LogPosition, Vec<u8>)>,
}

/// One fault, drawn from the network's seeded generator.
fn inject_fault(c: &mut Cluster, round: usize) {
    let ids = c.ids();
    let pick = |c: &Cluster, n: usize| ids[c.net.random_below(n as u64) as usize];
    match c.net.random_below(6) {
        0 => {
            let cut = 1 + c.net.random_below(ids.len() as u64 - 1) as usize;
            c.net.partition(&[ids[..cut].to_vec(), ids[cut..].to_vec()]);
        }
        1 => {
            if let Some(l) = c.leader() {
                c.net.isolate(l, &ids);
            }
        }
        2 => {
            let victim = pick(c, ids.len());
            // Crash at most a minority at once, so that the run keeps making progress.
            let down = c.nodes.values().filter(|n| n.is_none()).count();
            if down < (ids.len() - 1) / 2 {
                c.crash(victim);
            }
        }
        3 => {
            let down: Vec<NodeId> = ids
                .iter()
                .copied()
                .filter(|id| c.nodes[id].is_none())
                .collect();
            if let Some(&id) = down.first() {
                c.restart(id);
            }
        }
        4 => c.net.set_drop_rate(c.net.random_below(30) as f64 / 100.0),
        _ => c.net.heal(),
    }
    c.net
        .set_max_delay(Duration::from_millis(c.net.random_below(15)));
    let _ = round;
}

/// Clients propose on whichever member claims to lead (w: 1), then wait briefly for the
/// majority and record the verdict.
fn propose_round(c: &Cluster, seed: u64, round: usize, h: &mut History) {
    for k in 0..PROPOSALS_PER_ROUND {
        let data = format!("{seed}-{round}-{k}").into_bytes();
        let target = c
            .running()
            .map(|n| n.status())
            .find(|s| s.role == Role::Primary)
            .map(|s| s.id);
        let Some(node) = target.map(|id| c.node(id)) else {
            std::thread::sleep(Duration::from_millis(30));
            continue;
        };
        let appended = node.run({
            let f = node.propose_nowait(data.clone());
            async move { tokio::time::timeout(Duration::from_secs(2), f).await }
        });
        let Ok(Ok(pos)) = appended else { continue };
        match node.run(node.wait_committed(pos, Duration::from_millis(250))) {
            Ok(()) => h.acked.push((pos, data)),
            Err(ReplError::RolledBack { .. }) => h.rolled_back.push((pos, data)),
            Err(_) => h.pending.push((node.id(), pos, data)),
        }
    }
}

/// Heals everything and waits until every member has applied a last committed entry.
fn converge(c: &mut Cluster) -> LogPosition {
    c.net.heal();
    c.net.set_drop_rate(0.0);
    c.net.set_max_delay(Duration::ZERO);
    let down: Vec<NodeId> = c
        .ids()
        .into_iter()
        .filter(|id| c.nodes[id].is_none())
        .collect();
    for id in down {
        c.restart(id);
    }
    let last = c.propose(b"final", WAIT);
    c.wait_applied(last, WAIT);
    last
}

/// Asks the proposing member again about every entry without a verdict: after convergence
/// each is either committed at its position or rolled back.
fn settle_pending(c: &Cluster, seed: u64, h: &mut History) {
    // A verdict needs the commit point at the entry's index: write no-ops until it is there
    // (mongod's primary writes one every `periodicNoopIntervalSecs` for the same reason).
    let highest = h.pending.iter().map(|p| p.1.index).max().unwrap_or(0);
    let mut last = c.propose(b"noop", WAIT);
    while last.index < highest {
        last = c.propose(b"noop", WAIT);
    }
    c.wait_applied(last, WAIT);
    for (id, pos, data) in std::mem::take(&mut h.pending) {
        let node = c.node(id);
        match node.run(node.wait_committed(pos, WAIT)) {
            Ok(()) => h.acked.push((pos, data)),
            Err(ReplError::RolledBack { .. }) => h.rolled_back.push((pos, data)),
            Err(ReplError::Compacted(_)) => {}
            Err(e) => panic!(
                "seed {seed}: no verdict for {pos} after convergence: {e}; member {id}: {:?}",
                node.status()
            ),
        }
    }
}

/// The checker: one agreed sequence of applied entries; everything any member ever applied is
/// in it at the same index; every acknowledged entry is in it at its position; no entry
/// reported rolled back is.
fn check(c: &Cluster, seed: u64, h: &History) {
    let agreed = c.appliers[&1].entries();
    assert!(
        agreed.windows(2).all(|w| w[0].0.index < w[1].0.index),
        "seed {seed}: order"
    );
    let by_index: BTreeMap<u64, &(LogPosition, Vec<u8>)> =
        agreed.iter().map(|e| (e.0.index, e)).collect();
    for (&id, applier) in &c.appliers {
        assert_eq!(
            applier.entries(),
            agreed,
            "seed {seed}: member {id} ends elsewhere"
        );
        for e in applier.ever.lock().iter() {
            assert_eq!(
                by_index.get(&e.0.index).copied(),
                Some(e),
                "seed {seed}: member {id} applied {:?} at index {}",
                String::from_utf8_lossy(&e.1),
                e.0.index
            );
        }
    }
    for e in &h.acked {
        assert_eq!(
            by_index.get(&e.0.index).copied(),
            Some(e),
            "seed {seed}: acknowledged entry lost"
        );
    }
    for e in &h.rolled_back {
        assert!(
            !agreed.contains(e),
            "seed {seed}: a rolled-back entry was applied"
        );
    }
}

fn run_seed(seed: u64) -> (usize, usize) {
    let n = if seed % 4 == 3 { 5 } else { 3 };
    let mut c = Cluster::initiated(seed, n, fast);
    let mut h = History::default();
    for round in 0..ROUNDS {
        inject_fault(&mut c, round);
        propose_round(&c, seed, round, &mut h);
    }
    converge(&mut c);
    settle_pending(&c, seed, &mut h);
    check(&c, seed, &h);
    (h.acked.len(), h.rolled_back.len())
}

#[test]
fn random_faults_never_lose_or_reorder_a_committed_entry() {
    let seeds: u64 = std::env::var("REPL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let base: u64 = std::env::var("REPL_SEED_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let mut totals = (0, 0);
                for seed in (base + t..base + seeds).step_by(THREADS as usize) {
                    let (a, r) = run_seed(seed);
                    totals.0 += a;
                    totals.1 += r;
                }
                totals
            })
        })
        .collect();
    let (mut acked, mut rolled) = (0, 0);
    for w in workers {
        let (a, r) = w
            .join()
            .expect("a seed failed (its number is in the panic above)");
        acked += a;
        rolled += r;
    }
    eprintln!(
        "{seeds} seeds from {base}: {acked} entries acknowledged, {rolled} reported rolled back"
    );
    // The faults must leave the clients something to check.
    assert!(
        acked > seeds as usize,
        "only {acked} acknowledged entries over {seeds} seeds"
    );
}
