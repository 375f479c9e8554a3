//! What a `hass` experiment may name: its workloads, its split policies and its scales. Kept
//! apart from the runner (hass.rs) so that an experiment can be checked without it.

use serde::{Deserialize, Serialize};

/// The workloads: the paper's scrambled zipfian over hashed keys, and hotness clustered in
/// key order (ordered inserts): YCSB's hotspot, an unscrambled zipfian, two hot spots, and a
/// hot spot that moves halfway through the run.
pub const WORKLOADS: &[&str] = &[
    "zipfian-hashed",
    "hotspot-ordered",
    "zipfian-ordered",
    "two-hotspots",
    "moving-hotspot",
];
pub const POLICIES: &[&str] = &["default", "hass-static", "hass-dynamic", "load", "oracle"];

/// Sizes of one scale.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HassScale {
    pub records: u64,
    pub ops: u64,
    pub shards: usize,
    pub clients: usize,
    /// The run phase's chunk size is the data size divided by this.
    pub run_chunk_div: u64,
    pub checkpoint_ms: u64,
    /// The load policy's threshold (requests per second per chunk) and sustain time.
    pub load_qps: f64,
    pub load_secs: u32,
}

impl HassScale {
    pub fn named(name: &str) -> Option<HassScale> {
        Some(match name {
            "tiny" => HassScale {
                records: 3_000,
                ops: 8_000,
                shards: 3,
                clients: 6,
                run_chunk_div: 30,
                checkpoint_ms: 250,
                load_qps: 300.0,
                load_secs: 1,
            },
            "quick" => HassScale {
                records: 20_000,
                ops: 150_000,
                shards: 3,
                clients: 12,
                run_chunk_div: 40,
                checkpoint_ms: 500,
                load_qps: 1000.0,
                load_secs: 2,
            },
            "medium" => HassScale {
                records: 200_000,
                ops: 400_000,
                shards: 8,
                clients: 32,
                run_chunk_div: 80,
                checkpoint_ms: 2000,
                load_qps: 1500.0,
                load_secs: 5,
            },
            "paper" => HassScale {
                records: 300_000,
                ops: 1_000_000,
                shards: 3,
                clients: 16,
                run_chunk_div: 40,
                checkpoint_ms: 5000,
                load_qps: 2500.0,
                load_secs: 10,
            },
            _ => return None,
        })
    }
}
