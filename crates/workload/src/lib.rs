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

/// One of the `items` members of class `class` of `classes`, uniformly: class `c` holds
/// `c, c + classes, c + 2·classes, …` below `items` (`1 ≤ classes ≤ items`, `0 ≤ c < classes`).
/// Both workloads' skew-holding distributions (YCSB's `zipfian-classes`, LinkBench's
/// `zipf_classes`) draw a class from their own Zipf, then a member with this, so the skew
/// over the classes is the same whatever `items` is.
pub fn class_member(class: i64, classes: i64, items: i64, rng: &mut dyn rand::RngCore) -> i64 {
    use rand::Rng as _;
    debug_assert!((1..=items).contains(&classes) && (0..classes).contains(&class));
    let size = (items - class + classes - 1) / classes;
    let member = class + classes * rng.gen_range(0..size);
    debug_assert!((0..items).contains(&member));
    member
}
