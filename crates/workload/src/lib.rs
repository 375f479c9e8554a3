//! flashdoc's workloads.
//!
//! For now this crate holds the YCSB 0.17.0 generator core ([`ycsb`]): the key hash and key
//! names, and the number generators CoreWorkload draws keys, operations and lengths from. It
//! depends on nothing of ours. Later it will also hold LinkBench's generators and the drivers
//! that run a workload against the engine in process (`docdb`) or over the wire (`server`), with
//! their latency histograms (see DESIGN.md: `workload` → `server` → `docdb`).

pub mod ycsb;

/// The seedable RNG the generators are driven with in our drivers and benchmarks
/// (rand's `SmallRng`: fast, not cryptographic, reproducible for a given seed).
pub type Rng = rand::rngs::SmallRng;

/// A reproducible RNG for `seed`.
pub fn rng(seed: u64) -> Rng {
    use rand::SeedableRng;
    rand::rngs::SmallRng::seed_from_u64(seed)
}
