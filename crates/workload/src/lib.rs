//! flashdoc's workloads: YCSB 0.17.0's CoreWorkload ([`ycsb`]) and LinkBench as LinkBenchX
//! runs it on MongoDB ([`linkbench`]), driven against a [`store::Store`]: the document layer
//! in process ([`store::InProc`]) or any MongoDB-compatible server over the wire
//! ([`store::Wire`]), with HdrHistogram latencies per operation ([`measure`]).
//! See docs/workloads.md.

pub mod linkbench;
pub mod measure;
pub mod store;
pub mod ycsb;

pub use measure::{PhaseResult, Progress};
pub use store::{InProc, Store, Wire};

/// The seedable RNG the generators are driven with in our drivers and benchmarks
/// (rand's `SmallRng`: fast, not cryptographic, reproducible for a given seed).
pub type Rng = rand::rngs::SmallRng;

/// A reproducible RNG for `seed`.
pub fn rng(seed: u64) -> Rng {
    use rand::SeedableRng;
    rand::rngs::SmallRng::seed_from_u64(seed)
}
