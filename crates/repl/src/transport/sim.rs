//! The in-process transport for tests: members are handlers in one map, and a seeded random
//! generator decides which messages are dropped (requests and answers apart) and how long each
//! is delayed; tests cut links (partitions), and crash and restart members. The fault
//! *schedule* follows the seed; the threads' interleaving does not, so a run is not replayed
//! exactly (the history checker judges every run on its own).

use super::{RpcFuture, RpcHandler, RpcKind, Transport, TransportError};
use crate::NodeId;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

struct Faults {
    handlers: HashMap<NodeId, Arc<dyn RpcHandler>>,
    /// Directed links that carry nothing.
    cut: HashSet<(NodeId, NodeId)>,
    /// Chance that a request, and separately its answer, is lost.
    drop_rate: f64,
    /// Each delivery waits a uniform time up to this.
    max_delay: Duration,
    rng: StdRng,
}

impl Faults {
    fn connected(&self, a: NodeId, b: NodeId) -> bool {
        self.handlers.contains_key(&b) && !self.cut.contains(&(a, b))
    }
}

#[derive(Clone)]
pub struct SimNet {
    faults: Arc<Mutex<Faults>>,
}

/// What the generator decided for one call.
struct Fate {
    handler: Arc<dyn RpcHandler>,
    delay: Duration,
    lose_request: bool,
    lose_answer: bool,
}

impl SimNet {
    pub fn new(seed: u64) -> SimNet {
        SimNet {
            faults: Arc::new(Mutex::new(Faults {
                handlers: HashMap::new(),
                cut: HashSet::new(),
                drop_rate: 0.0,
                max_delay: Duration::ZERO,
                rng: StdRng::seed_from_u64(seed),
            })),
        }
    }

    /// Puts a member on the network (at start, and again after a restart).
    pub fn register(&self, id: NodeId, handler: Arc<dyn RpcHandler>) {
        self.faults.lock().handlers.insert(id, handler);
    }

    /// Takes a member off the network: it receives nothing (a crash, with `ReplNode::shutdown`).
    pub fn unregister(&self, id: NodeId) {
        self.faults.lock().handlers.remove(&id);
    }

    /// Splits the members into groups that reach only their own group.
    pub fn partition(&self, groups: &[Vec<NodeId>]) {
        let mut f = self.faults.lock();
        f.cut.clear();
        for (i, g) in groups.iter().enumerate() {
            for (j, h) in groups.iter().enumerate() {
                if i == j {
                    continue;
                }
                for &a in g {
                    for &b in h {
                        f.cut.insert((a, b));
                    }
                }
            }
        }
    }

    /// Cuts every link to and from `id` among `all`.
    pub fn isolate(&self, id: NodeId, all: &[NodeId]) {
        let rest: Vec<NodeId> = all.iter().copied().filter(|&n| n != id).collect();
        self.partition(&[vec![id], rest]);
    }

    /// Reconnects every link.
    pub fn heal(&self) {
        self.faults.lock().cut.clear();
    }

    pub fn set_drop_rate(&self, rate: f64) {
        assert!(
            (0.0..1.0).contains(&rate),
            "drop rate {rate} outside [0, 1)"
        );
        self.faults.lock().drop_rate = rate;
    }

    pub fn set_max_delay(&self, d: Duration) {
        self.faults.lock().max_delay = d;
    }

    /// A number from the network's generator, for tests that drive their faults from the seed.
    pub fn random_below(&self, n: u64) -> u64 {
        self.faults.lock().rng.gen_range(0..n)
    }

    fn fate(&self, from: NodeId, to: NodeId) -> Result<Fate, TransportError> {
        let mut f = self.faults.lock();
        if !f.connected(from, to) {
            return Err(TransportError::Unreachable(to));
        }
        let handler = f.handlers[&to].clone();
        let rate = f.drop_rate;
        let max = f.max_delay.as_micros() as u64;
        let delay = Duration::from_micros(if max == 0 {
            0
        } else {
            f.rng.gen_range(0..=max)
        });
        Ok(Fate {
            handler,
            delay,
            lose_request: f.rng.gen_bool(rate),
            lose_answer: f.rng.gen_bool(rate),
        })
    }

    fn still_connected(&self, from: NodeId, to: NodeId) -> bool {
        self.faults.lock().connected(from, to)
    }
}

impl Transport for SimNet {
    fn call(
        &self,
        from: NodeId,
        to: NodeId,
        _addr: &str,
        kind: RpcKind,
        body: Vec<u8>,
    ) -> RpcFuture {
        let net = self.clone();
        Box::pin(async move {
            let fate = net.fate(from, to)?;
            if !fate.delay.is_zero() {
                tokio::time::sleep(fate.delay).await;
            }
            // A partition or crash during the delay catches the message in flight.
            if fate.lose_request || !net.still_connected(from, to) {
                return Err(TransportError::Unreachable(to));
            }
            let answer = fate.handler.handle(kind, body).await?;
            if fate.lose_answer || !net.still_connected(to, from) {
                return Err(TransportError::Unreachable(to));
            }
            Ok(answer)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "outside [0, 1)")]
    fn a_drop_rate_of_one_is_refused() {
        SimNet::new(1).set_drop_rate(1.0);
    }

    struct Echo;
    impl RpcHandler for Echo {
        fn handle(&self, _kind: RpcKind, body: Vec<u8>) -> RpcFuture {
            Box::pin(async move { Ok(body) })
        }
    }

    #[test]
    fn partitions_and_crashes_cut_delivery_and_heal_restores_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let net = SimNet::new(7);
        net.register(1, Arc::new(Echo));
        net.register(2, Arc::new(Echo));
        let call = |from, to| rt.block_on(net.call(from, to, "", RpcKind::Vote, vec![9]));
        assert_eq!(call(1, 2), Ok(vec![9]));
        net.isolate(2, &[1, 2]);
        assert_eq!(call(1, 2), Err(TransportError::Unreachable(2)));
        net.heal();
        assert_eq!(call(1, 2), Ok(vec![9]));
        net.unregister(2);
        assert_eq!(call(1, 2), Err(TransportError::Unreachable(2)));
    }
}
