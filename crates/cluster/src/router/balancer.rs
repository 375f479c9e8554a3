//! The balancer. One router at a time runs it (a lease-like lock in the metadata store).
//! Each round looks at every sharded collection, moves chunks off draining shards first, then
//! at most one chunk per shard:
//!
//! - `count` (MongoDB 3.6): when the shard with the most chunks has at least 2 more than the
//!   ideal (total / shards, rounded up), its first chunk in shard-key order moves to the shard
//!   with the fewest;
//! - `size` (MongoDB 6.0+): when the collection's data on the largest shard exceeds the
//!   smallest by 3 × the chunk size, the largest shard's first chunk moves to the smallest.
//!
//! Neither looks at load: that is the point the HASS experiment makes about placement.

use super::migrations::{self, Migration};
use super::Router;
use crate::meta::CollSnapshot;
use crate::transport::call_ok;
use bson::{doc, Document};
use docdb::{DocError, DocResult};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BalancerPolicy {
    Count,
    Size,
}

impl BalancerPolicy {
    pub fn parse(s: &str) -> DocResult<BalancerPolicy> {
        match s {
            "count" => Ok(BalancerPolicy::Count),
            "size" => Ok(BalancerPolicy::Size),
            other => Err(DocError::bad_value(format!(
                "balancer policy must be count or size, not '{other}'"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            BalancerPolicy::Count => "count",
            BalancerPolicy::Size => "size",
        }
    }
}

/// 3.6's imbalance threshold (chunks above the ideal).
const COUNT_THRESHOLD: usize = 2;

#[derive(Default)]
pub struct Balancer {
    rounds: AtomicU64,
    in_round: AtomicBool,
    pub moves: AtomicU64,
    pub docs_moved: AtomicU64,
    pub bytes_moved: AtomicU64,
    pub failed_moves: AtomicU64,
}

impl Balancer {
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }
    pub fn in_round(&self) -> bool {
        self.in_round.load(Ordering::Relaxed)
    }

    /// One balancing round; returns the number of chunks moved.
    pub fn round(&self, r: &Router) -> DocResult<usize> {
        let settings = r.settings()?;
        if !settings.balancer_on {
            return Ok(0);
        }
        self.in_round.store(true, Ordering::Relaxed);
        let out = self.round_inner(r, settings.balancer_policy, settings.chunk_bytes);
        self.in_round.store(false, Ordering::Relaxed);
        self.rounds.fetch_add(1, Ordering::Relaxed);
        out
    }

    fn round_inner(
        &self,
        r: &Router,
        policy: BalancerPolicy,
        chunk_bytes: i64,
    ) -> DocResult<usize> {
        let Some(shards) = ShardStates::read(r)? else {
            return Ok(0);
        };
        // A shard takes part in one migration per round, across collections.
        let mut busy: Vec<String> = Vec::new();
        let mut moved = 0;
        for c in r.catalog.collections()? {
            if c.get_bool("noBalance").unwrap_or(false) {
                continue;
            }
            let ns = c.get_str("_id").unwrap_or_default().to_string();
            let Some(t) = r.reload(&ns)? else { continue };
            let plan = choose(r, &ns, &t, &shards, &mut busy, policy, chunk_bytes);
            let outcomes =
                migrations::carry_out(r, &ns, &plan, r.options.balancer_waits_for_delete);
            for (m, outcome) in plan.iter().zip(outcomes) {
                moved += usize::from(self.record(&ns, m, outcome));
            }
        }
        r.catalog.trim_changelog(10_000)?;
        Ok(moved)
    }

    /// Counts one migration's outcome; true when the chunk moved.
    fn record(&self, ns: &str, m: &Migration, outcome: DocResult<Document>) -> bool {
        match outcome {
            Ok(rep) => {
                self.moves.fetch_add(1, Ordering::Relaxed);
                self.docs_moved
                    .fetch_add(rep.get_i64("cloned").unwrap_or(0) as u64, Ordering::Relaxed);
                self.bytes_moved.fetch_add(
                    rep.get_i64("clonedBytes").unwrap_or(0) as u64,
                    Ordering::Relaxed,
                );
                true
            }
            Err(e) => {
                self.failed_moves.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "flashdoc: balancer move of {ns} {} failed: {e}",
                    m.chunk.min
                );
                false
            }
        }
    }
}

/// The shards by role: draining ones give their chunks away, active ones take them.
struct ShardStates {
    active: Vec<String>,
    draining: Vec<String>,
}

impl ShardStates {
    /// The shards from the catalog; `None` when no shard can take a chunk.
    fn read(r: &Router) -> DocResult<Option<ShardStates>> {
        let shards = r.catalog.shards()?;
        let draining: Vec<String> = shards
            .iter()
            .filter(|s| s.get_bool("draining").unwrap_or(false))
            .filter_map(|s| s.get_str("_id").ok().map(String::from))
            .collect();
        let active: Vec<String> = shards
            .iter()
            .filter_map(|s| s.get_str("_id").ok().map(String::from))
            .filter(|s| !draining.contains(s))
            .collect();
        if active.is_empty() {
            return Ok(None);
        }
        Ok(Some(ShardStates { active, draining }))
    }
}

/// The active shard not yet busy this round with the fewest chunks of the collection.
fn least(busy: &[String], count: &BTreeMap<String, usize>) -> Option<String> {
    count
        .iter()
        .filter(|(s, _)| !busy.contains(s))
        .min_by_key(|(s, n)| (**n, (*s).clone()))
        .map(|(s, _)| s.clone())
}

/// This round's migrations for one collection: chunks off draining shards first, else at most
/// one move the policy asks for. Marks the shards it uses busy.
fn choose(
    r: &Router,
    ns: &str,
    t: &CollSnapshot,
    shards: &ShardStates,
    busy: &mut Vec<String>,
    policy: BalancerPolicy,
    chunk_bytes: i64,
) -> Vec<Migration> {
    let mut count: BTreeMap<String, usize> = shards.active.iter().map(|s| (s.clone(), 0)).collect();
    for ch in &t.chunks {
        if let Some(n) = count.get_mut(&ch.shard) {
            *n += 1;
        }
    }
    let mut plan: Vec<Migration> = Vec::new();
    for ch in t
        .chunks
        .iter()
        .filter(|c| shards.draining.contains(&c.shard) && !c.jumbo)
    {
        if busy.contains(&ch.shard) {
            continue;
        }
        if let Some(to) = least(busy, &count) {
            busy.push(ch.shard.clone());
            busy.push(to.clone());
            plan.push(Migration {
                chunk: ch.clone(),
                to,
            });
        }
    }
    if !plan.is_empty() {
        return plan;
    }
    let from_to = match policy {
        BalancerPolicy::Count => count_choice(&count, shards.active.len(), busy),
        BalancerPolicy::Size => size_choice(r, ns, &shards.active, busy, chunk_bytes),
    };
    if let Some((from, to)) = from_to {
        if let Some(ch) = t.chunks.iter().find(|c| c.shard == from && !c.jumbo) {
            busy.push(from);
            busy.push(to.clone());
            plan.push(Migration {
                chunk: ch.clone(),
                to,
            });
        }
    }
    plan
}

/// `count`: from the shard with the most chunks to the one with the fewest, when the most is
/// at least [`COUNT_THRESHOLD`] above the ideal.
fn count_choice(
    count: &BTreeMap<String, usize>,
    active: usize,
    busy: &[String],
) -> Option<(String, String)> {
    let total: usize = count.values().sum();
    let ideal = total.div_ceil(active);
    let from = count
        .iter()
        .filter(|(s, _)| !busy.contains(s))
        .max_by_key(|(s, n)| (**n, std::cmp::Reverse((*s).clone())))
        .map(|(s, n)| (s.clone(), *n));
    match (from, least(busy, count)) {
        (Some((f, n)), Some(to)) if n >= ideal + COUNT_THRESHOLD && f != to => Some((f, to)),
        _ => None,
    }
}

/// `size`: from the shard holding the most of the collection's data to the one holding the
/// least, when they differ by 3 chunk sizes or more.
fn size_choice(
    r: &Router,
    ns: &str,
    active: &[String],
    busy: &[String],
    chunk_bytes: i64,
) -> Option<(String, String)> {
    let mut sizes: BTreeMap<String, i64> = BTreeMap::new();
    let (db, coll) = ns.split_once('.').expect("namespace");
    for s in active {
        let size = r
            .shard_conn(s)
            .and_then(|c| call_ok(&*c, &doc! {"collStats": coll, "$db": db}))
            .ok()
            .and_then(|rep| {
                rep.get_i64("size")
                    .ok()
                    .or_else(|| rep.get_i32("size").ok().map(i64::from))
            })
            .unwrap_or(0);
        sizes.insert(s.clone(), size);
    }
    let max = sizes
        .iter()
        .filter(|(s, _)| !busy.contains(s))
        .max_by_key(|(_, v)| **v);
    let min = sizes
        .iter()
        .filter(|(s, _)| !busy.contains(s))
        .min_by_key(|(_, v)| **v);
    match (max, min) {
        (Some((f, a)), Some((to, b))) if a - b >= 3 * chunk_bytes && f != to => {
            Some((f.clone(), to.clone()))
        }
        _ => None,
    }
}
