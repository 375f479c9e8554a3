//! Experiment definitions: what to sweep, at which scale, under which conditions. Every
//! experiment is a YAML-able value; the built-in ones mirror the seeds' evaluations.
//!
//! The stream experiments run under the seeds' conditions by default (seed 000 §5.1, seed 003
//! §4): no TRIM of freed extents and no filesystem discard, a device whose file system was
//! made on it (mkfs discards it all, so it holds valid what the files occupy), direct-I/O
//! semantics, and a scale that keeps the seeds' dimensionless ratios (see [`Ratios`]). TRIM is
//! studied in the `trim` experiment (seed 002), and `streams-trim` is `streams` with flashdoc's
//! safe batched TRIM on.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an experiment reports (it decides the plots and tables of its report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Flash writes per operation, throughput, p99 and WAF per placement policy and workload
    /// (seed 000 Fig. 10–11).
    Streams,
    /// dsm vs dsm-skip-primary (seed 000 Fig. 12).
    PrimaryFilter,
    /// 32 KB vs 4 KB leaf pages per policy, with database size (seed 000 Fig. 13).
    LeafSize,
    /// Throughput by TRIM batch (seed 002 Table 3).
    Trim,
    /// Bytes written per file kind and page kind (seed 000 Table 1, seed 002 Table 2).
    WriteShares,
    /// File offset over time per file kind, coloured by stream (seed 000 Fig. 3).
    IoPattern,
    /// Startup, insert, shutdown, disk use and cold/warm reads per block compressor, and on
    /// the in-place engine (`engines: [wiredTiger, mmapv1]`) beside them (seed 001 §10.3).
    Compression,
    /// The stream experiment at several scales: how each headline figure moves with the
    /// database, the device and the run (the converged scale).
    Scale,
    /// Split policies on an in-process sharded cluster, per-shard device load (seed 004);
    /// `workloads` and `policies` name hass workloads and split policies (hass.rs).
    Hass,
    /// A real WiredTiger under the LD_PRELOAD shim, replayed through every policy beside
    /// flashdoc's engine on the same YCSB workload (realwt.rs).
    RealWiredTiger,
    /// The copy-on-write engine against the in-place one (MMAPv1's design), every policy on
    /// each, across `device_fills` (inplace_cow.rs).
    InPlaceVsCow,
}

/// A workload by the seeds' names.
pub const WORKLOADS: &[&str] = &[
    "ycsb-update-heavy",
    "ycsb-update-only",
    "linkbench-original",
    "linkbench-mixed",
    "linkbench-update-only",
];

/// The seeds' drive: a 256 GB Samsung 840 Pro (decimal gigabytes, as sold). Quantities the
/// seeds give per drive (TRIM batches, journal files) are scaled by the lab device's size over
/// this one.
pub const SEED_DEVICE_BYTES: f64 = 256e9;

/// The dimensionless ratios that decide where a block dies relative to the device, as the
/// seeds ran them (seed 000 §5.1, seed 002 §4, seed 003 §4). Scaling down keeps these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// The loaded database's live data ÷ the device's logical capacity. Seeds: about 25 GB
    /// of YCSB documents (23 M × ~1.1 KB) and about 32 GB of LinkBench data (seed 000 §5.2)
    /// on a 256 GB drive: 0.10–0.125. Their files took twice that (51.7 GB and 55 GB, seed
    /// 000 §5.5: a footprint of 0.20–0.21); each run reports its own footprint, which
    /// depends on the allocator.
    pub device_fill: f64,
    /// Bytes written per checkpoint interval ÷ the device's logical capacity. Seeds: 60 s
    /// checkpoints at about 4.5 k updates/s (seed 002 Table 3) of about 25 KB each (a 32 KB
    /// leaf rewritten per update when the cache is far smaller than the data, as measured
    /// here) = 6–7 GB per interval on 256 GB: about 2.5 %.
    pub checkpoint_share: f64,
    /// The cache ÷ the database after the load (its live data). Seeds: 5–30 GB caches for
    /// about 25 GB of YCSB documents (23 M × 1 KB) that took 51.7–55 GB on disk: 0.2–1.2
    /// of the data, 0.1–0.58 of the files. The default is their smallest cache.
    pub cache_share: f64,
}

impl Default for Ratios {
    fn default() -> Self {
        Ratios {
            device_fill: 0.1,
            checkpoint_share: 0.025,
            cache_share: 0.2,
        }
    }
}

/// Journal file size ÷ device capacity: WiredTiger's 100 MB log files on the seeds' drive.
pub const JOURNAL_FILE_SHARE: f64 = 100e6 / SEED_DEVICE_BYTES;

/// TRIM of freed space and discard by the filesystem during the replay: one condition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrimSpec {
    /// Extents per TRIM batch as the seeds counted them on their 256 GB drive ("trim
    /// frequency" k, seed 002 §4.6); the replay scales it to the lab device (`k × capacity /
    /// 256 GB`, at least 1), so a batch frees the same share of the device. `None`: TRIM off.
    pub batch: Option<usize>,
    /// `free` (safe: only what no durable checkpoint reaches) or `replace` (the paper's
    /// trim at address replacement — simulator only).
    #[serde(default = "free")]
    pub when: String,
    /// The filesystem discards (TRIMs) what file removal, truncation and punched holes free
    /// (`-o discard`). Off, a deleted journal file's LBAs stay valid on the device until the
    /// filesystem reuses them. A TRIM batch reaches the device only through discard.
    #[serde(default)]
    pub discard: bool,
}

fn free() -> String {
    "free".into()
}

impl TrimSpec {
    /// The seeds' stream-experiment condition: no TRIM, no discard.
    pub fn off() -> Self {
        TrimSpec {
            batch: None,
            when: free(),
            discard: false,
        }
    }
    /// flashdoc's safe batched TRIM at the seeds' best batch (k = 20 000), with discard.
    pub fn safe(k: usize) -> Self {
        TrimSpec {
            batch: Some(k),
            when: free(),
            discard: true,
        }
    }
    pub fn label(&self) -> String {
        let d = if self.discard { "" } else { "-nodiscard" };
        match self.batch {
            None if self.discard => "off-discard".into(),
            None => "off".into(),
            Some(k) if self.when == "free" => format!("{k}{d}"),
            Some(k) => format!("{k}-{}{d}", self.when),
        }
    }
    /// The batch in extents for a device of `capacity_bytes`.
    pub fn scaled_batch(&self, capacity_bytes: u64) -> Option<usize> {
        self.batch.map(|k| {
            ((k as f64 * capacity_bytes as f64 / SEED_DEVICE_BYTES).round() as usize).max(1)
        })
    }
}

/// The simulated device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SsdSpec {
    pub streams: u8,
    /// Over-provisioning ρ = (physical − logical) / logical.
    pub op: f64,
    /// greedy | cost-benefit | d-choices | fifo
    pub gc: String,
    /// Greedy's choice among equally full units (newest by default).
    #[serde(default)]
    pub gc_tie: ssd::GcTie,
    /// Time of one (non-queued) TRIM command, µs; `ssd::TrimCost` has the sources.
    #[serde(default = "trim_command_us")]
    pub trim_command_us: f64,
    /// Pages per erase block. Unset, the largest power of two from 16 to 256 that leaves the
    /// device at least 1 024 blocks (`run::pages_per_block`), so a larger device has more
    /// blocks of the same size; a number holds the block at that size (a power of two, 16 to
    /// 1 024), to test what the block count does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_per_block: Option<u32>,
    /// Erase blocks per device, held at every scale: the block is the power of two from 16 to
    /// 1 024 pages that gives the device the count nearest this one (`run::pages_for_units`),
    /// so a larger device has larger blocks, not more of them. Unset, the count grows with the
    /// device (see `pages_per_block`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erase_units: Option<u64>,
    /// The simulated device as a drive of this many GB in the seeds' world: the device the
    /// sizing gives (the reference, [`SEED_DEVICE_BYTES`]: 256 GB) scaled by this over 256,
    /// the database, the cache, the checkpoints and the journal files unchanged. Seed 000
    /// does not state its 840 Pro's capacity (sold as 128, 256 and 512 GB), so the
    /// `streams-device-size` experiment runs all three. Unset: the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_gb: Option<u32>,
}

fn trim_command_us() -> f64 {
    ssd::TimingConfig::default().trim.command_ns as f64 / 1e3
}

impl SsdSpec {
    pub fn label(&self) -> String {
        let t = if self.trim_command_us == trim_command_us() {
            String::new()
        } else {
            format!("-trim{}us", self.trim_command_us)
        };
        let tie = match self.gc_tie {
            ssd::GcTie::Newest => String::new(),
            other => format!("-{}", other.name()),
        };
        let block = match (self.pages_per_block, self.erase_units) {
            (Some(p), _) => format!("-ppb{p}"),
            (None, Some(u)) => format!("-eu{u}"),
            (None, None) => String::new(),
        };
        let size = self
            .device_gb
            .map(|gb| format!("-{gb}gb"))
            .unwrap_or_default();
        format!(
            "{}st-op{}-{}{tie}{t}{block}{size}",
            self.streams, self.op, self.gc
        )
    }

    /// The simulated device's capacity over the sizing's (the reference's): `device_gb` ÷ 256.
    pub fn device_scale(&self) -> f64 {
        self.device_gb
            .map_or(1.0, |gb| gb as f64 * 1e9 / SEED_DEVICE_BYTES)
    }
}

/// Sizes of one scale. The device, the cache and the checkpoint interval follow from the
/// database the load leaves and the experiment's [`Ratios`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleSpec {
    pub ycsb_records: u64,
    pub ycsb_ops: u64,
    pub linkbench_maxid1: i64,
    pub linkbench_requests: u64,
    /// Documents of the compression experiment (the chapter inserts 16 × 10,000).
    pub chapter10_docs: u64,
    /// The cache during the load, MB (the run phase's cache is `cache_share` of the loaded
    /// database).
    pub load_cache_mb: u64,
    /// Client threads.
    pub threads: usize,
    /// LinkBench's cap on a node's out-degree: `None` caps it at a tenth of `maxid1` (at least
    /// 100), so it grows with the graph; a number caps it there at every scale
    /// ([`Experiment::linkbench_degree_cap`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linkbench_degree_cap: Option<u64>,
    /// YCSB's keys from `zipfian-classes` with this many classes instead of YCSB's scrambled
    /// zipfian ([`Experiment::ycsb_key_classes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ycsb_key_classes: Option<u64>,
    /// LinkBench's id Zipfs over this many classes ([`Experiment::linkbench_id_classes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linkbench_id_classes: Option<u64>,
}

/// The scales, smallest first.
pub const SCALES: &[&str] = &["tiny", "quick", "medium", "large", "paper"];

impl ScaleSpec {
    /// The named scale with the run phase `run_factor` times longer.
    pub fn with_run_factor(name: &str, run_factor: f64) -> Option<ScaleSpec> {
        let mut s = ScaleSpec::named(name)?;
        s.ycsb_ops = (s.ycsb_ops as f64 * run_factor).round() as u64;
        s.linkbench_requests = (s.linkbench_requests as f64 * run_factor).round() as u64;
        Some(s)
    }

    /// LinkBench's cap on a node's out-degree at this scale.
    pub fn linkbench_nlinks_cap(&self) -> u64 {
        self.linkbench_degree_cap
            .unwrap_or((self.linkbench_maxid1 as u64 / 10).max(100))
    }

    pub fn named(name: &str) -> Option<ScaleSpec> {
        // Run phases write a few times the device's capacity at every scale; the replay loops
        // them until the device is warm (`Experiment::warmup_capacities`), so every scale is
        // measured in the workload's steady state on a device of its own size.
        Some(match name {
            // For the lab's own end-to-end test: seconds, not a measurement.
            "tiny" => ScaleSpec {
                ycsb_records: 3_000,
                ycsb_ops: 9_000,
                linkbench_maxid1: 1_500,
                linkbench_requests: 4_500,
                chapter10_docs: 2_000,
                load_cache_mb: 4,
                threads: 2,
                linkbench_degree_cap: None,
                ycsb_key_classes: None,
                linkbench_id_classes: None,
            },
            "quick" => ScaleSpec {
                ycsb_records: 40_000,
                ycsb_ops: 100_000,
                linkbench_maxid1: 15_000,
                linkbench_requests: 30_000,
                chapter10_docs: 20_000,
                load_cache_mb: 16,
                threads: 2,
                linkbench_degree_cap: None,
                ycsb_key_classes: None,
                linkbench_id_classes: None,
            },
            "medium" => ScaleSpec {
                ycsb_records: 200_000,
                ycsb_ops: 600_000,
                linkbench_maxid1: 75_000,
                linkbench_requests: 300_000,
                chapter10_docs: 80_000,
                load_cache_mb: 64,
                threads: 2,
                linkbench_degree_cap: None,
                ycsb_key_classes: None,
                linkbench_id_classes: None,
            },
            "large" => ScaleSpec {
                ycsb_records: 800_000,
                ycsb_ops: 2_400_000,
                linkbench_maxid1: 300_000,
                linkbench_requests: 1_200_000,
                chapter10_docs: 160_000,
                load_cache_mb: 256,
                threads: 2,
                linkbench_degree_cap: None,
                ycsb_key_classes: None,
                linkbench_id_classes: None,
            },
            "paper" => ScaleSpec {
                ycsb_records: 3_000_000,
                ycsb_ops: 9_000_000,
                linkbench_maxid1: 1_000_000,
                linkbench_requests: 4_000_000,
                chapter10_docs: 160_000,
                load_cache_mb: 1024,
                threads: 4,
                linkbench_degree_cap: None,
                ycsb_key_classes: None,
                linkbench_id_classes: None,
            },
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    pub name: String,
    pub title: String,
    pub kind: Kind,
    /// What the experiment mirrors and why, for the report.
    pub description: String,
    pub workloads: Vec<String>,
    pub policies: Vec<String>,
    /// Run-phase caches as shares of the loaded database (the seeds' caches were far smaller
    /// than their data, so eviction and checkpoints decided what reached the device).
    pub cache_shares: Vec<f64>,
    pub leaf_kb: Vec<u32>,
    #[serde(default = "no_compression")]
    pub compressors: Vec<String>,
    /// The storage engines: `wiredTiger` (flashdoc's copy-on-write engine, which every other
    /// setting here configures) and `mmapv1` (the in-place engine, crates/inplace). The
    /// in-place engine runs in `compression` experiments only, once per workload, cache and
    /// seed: it has no compressor, allocation, leaf size or dirty budget to vary
    /// (crates/lab/src/chapter10.rs).
    #[serde(
        default = "copy_on_write_only",
        skip_serializing_if = "is_copy_on_write_only"
    )]
    pub engines: Vec<String>,
    /// The block manager's allocation for table pages: `best` (WiredTiger's default, the
    /// engine the seeds measured) and/or `sweep` (flashdoc's flash-aware co-design, which
    /// reuses freed space in the order it was written; see engine::AllocPolicy::Sweep).
    #[serde(default = "best_fit")]
    pub allocations: Vec<String>,
    /// The sweep allocation's free reserve, percent of each file (engine default 50).
    #[serde(default = "sweep_reserve_pct")]
    pub sweep_reserve_pct: u8,
    /// Eviction's dirty budget per allocation: `[target, trigger]`, percent of the cache
    /// (engine `eviction_dirty_target`/`eviction_dirty_trigger`). An allocation not named
    /// keeps the engine's defaults, WiredTiger's 5/20. By default the sweep runs with
    /// [`CODESIGN_DIRTY_PCT`]: part of flashdoc's co-design (docs/placement.md, "The dirty
    /// budget"). Every run whose engine differs from the reference (best fit, 5/20) has its
    /// checkpoints triggered by journal bytes so that its intervals hold the reference's
    /// operations (docs/lab.md, "Equal intervals").
    #[serde(default = "codesign_dirty_pct")]
    pub dirty_pct: BTreeMap<String, [u8; 2]>,
    /// The factorial's dirty budgets, `[target, trigger]`: when not empty, every allocation
    /// runs at every one of them (so best fit also runs at flash mode's budget and the sweep at
    /// WiredTiger's), and `dirty_pct` is not used. Empty, each allocation runs at its
    /// `dirty_pct` only (docs/lab.md, "Credit at equal engine settings").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirty_budgets: Vec<[u8; 2]>,
    /// TRIM and discard conditions.
    pub trims: Vec<TrimSpec>,
    pub ssds: Vec<SsdSpec>,
    /// Database after load ÷ device capacity, and bytes per checkpoint interval ÷ device
    /// capacity (the cache share is swept by `cache_shares`).
    pub device_fill: f64,
    pub checkpoint_share: f64,
    /// The device's state before the replay: `mkfs` (the default: the file system made on the
    /// device discarded all of it, so with discard off the device holds valid what the files
    /// have occupied, a deleted journal file's LBAs included until reused — the seeds' drive
    /// as we best read it, docs/lab.md), `fill` (the harsher state: the whole logical space
    /// written once, so every LBA the filesystem hands out still holds data the device counts
    /// as valid), `steady` (the fill, then random overwrites until write amplification is
    /// steady), or `none` (a fresh device, the same state as `mkfs`).
    pub precondition: String,
    /// Replay the engine's reads (its cache's misses) beside its writes: they share the
    /// device's dies, so GC delays them and modeled throughput counts their time. `false`
    /// drops them at the replay (the cause study's run without reads); WAF is the same either
    /// way, since no policy sees a read.
    #[serde(default = "yes")]
    pub reads: bool,
    /// Workload seeds: every point runs once per seed, and the report gives medians and the
    /// spread between seeds.
    pub seeds: Vec<u64>,
    /// Run-phase length as a multiple of the scale's operations (the run-length axis of the
    /// scale study).
    #[serde(default = "one")]
    pub run_factor: f64,
    /// `scale` experiments: the scales to run, smallest first (the others run at `scale`).
    #[serde(default)]
    pub scales: Vec<String>,
    /// Device capacities written to warm the device up before it is measured: the run phase is
    /// replayed back to back until at least this much has been written, then once more, and
    /// that last pass is measured. A device aged by one fill reaches the workload's steady
    /// state only after being rewritten many times (docs/lab.md), and the seeds measured
    /// drives in use.
    #[serde(default = "warmup_capacities")]
    pub warmup_capacities: f64,
    /// LinkBench's cap on a node's out-degree. Unset, a tenth of the scale's `maxid1`: the
    /// distribution's tail does not shrink with the graph, and without a cap a handful of
    /// nodes would hold most links of a lab-sized graph; but then the cap grows with the
    /// scale, and with it the cold links per node (the workload writes a node's links
    /// independently of its degree), so data per node is not the same at every scale. A
    /// number holds the cap, and the degree distribution, equal at every scale whose tenth of
    /// `maxid1` is at least that (docs/placement.md, "Why the absolute figures do not
    /// converge").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linkbench_degree_cap: Option<u64>,
    /// YCSB's request distribution. Unset, YCSB's scrambled zipfian, whose skew grows with the
    /// record count (its ranks come from a fixed 10¹⁰ items), so the hottest leaves receive a
    /// larger share of the updates at every larger scale. A number draws the keys from the
    /// workload crate's `zipfian-classes` with that many classes: the same zipfian over the
    /// classes at every scale, each class spread over its share of the keys, so the skew is
    /// held (docs/placement.md, "Why the absolute figures do not converge"). At most the
    /// smallest scale's record count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ycsb_key_classes: Option<u64>,
    /// LinkBench's id distributions. Unset, LinkBench's Zipfs over every node id, whose head
    /// grows with the node count (for a shape below 1 the share of the hottest 1 % of a
    /// finite Zipf's items grows with them). A number draws every Zipf over that many
    /// classes, each spread over its share of the ids (`LinkBenchConfig::zipf_classes`), so the
    /// skew is held. At most the smallest scale's node count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linkbench_id_classes: Option<u64>,
    /// `in-place-vs-cow`: the storage designs compared (`copy-on-write`, `in-place`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub designs: Vec<String>,
    /// `in-place-vs-cow`: the device fills each engine run is replayed at, each the peak of
    /// the pages its files occupy over the trace ÷ the device's logical capacity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_fills: Vec<f64>,
    pub scale: String,
}

impl Experiment {
    /// The dirty budgets `allocation` runs at: every one of `dirty_budgets` in a factorial,
    /// else its own `dirty_pct` (WiredTiger's 5/20 when it has none).
    pub fn budgets_of(&self, allocation: &str) -> Vec<[u8; 2]> {
        if self.dirty_budgets.is_empty() {
            vec![self
                .dirty_pct
                .get(allocation)
                .copied()
                .unwrap_or(ENGINE_DIRTY_PCT)]
        } else {
            self.dirty_budgets.clone()
        }
    }

    /// The sizes of scale `name` as this experiment runs it: its run-phase length and its
    /// LinkBench degree cap.
    pub fn scale_spec(&self, name: &str) -> Option<ScaleSpec> {
        let mut s = ScaleSpec::with_run_factor(name, self.run_factor)?;
        s.linkbench_degree_cap = self.linkbench_degree_cap;
        s.ycsb_key_classes = self.ycsb_key_classes;
        s.linkbench_id_classes = self.linkbench_id_classes;
        Some(s)
    }
}

fn no_compression() -> Vec<String> {
    vec!["none".into()]
}

/// The designs an inplace-vs-cow experiment compares (`crate::inplace_cow`), in report order:
/// flashdoc's copy-on-write engine with flash mode's settings, and the in-place engine.
pub const DESIGNS: [&str; 2] = ["copy-on-write", "in-place"];
/// The copy-on-write design's allocation under flash mode.
pub const COW_ALLOCATION: &str = "sweep";
/// An inplace-vs-cow experiment's device fills, from the seeds' own (about 20 %) to the study's fullest (90 %).
pub const DEVICE_FILLS: [f64; 5] = [0.2, 0.4, 0.6, 0.8, 0.9];
/// The policies each design of an inplace-vs-cow experiment is replayed with: none, the seeds', ours, and the oracle.
pub const DESIGN_POLICIES: [&str; 6] =
    ["none", "file", "dsm", "boundary", SHIPPED_POLICY, "oracle"];

/// flashdoc's copy-on-write engine, by mongod's name for the engine it follows.
pub const COPY_ON_WRITE: &str = "wiredTiger";
/// The in-place engine in MMAPv1's design.
pub const IN_PLACE: &str = "mmapv1";
const ENGINES: [&str; 2] = [COPY_ON_WRITE, IN_PLACE];

fn copy_on_write_only() -> Vec<String> {
    vec![COPY_ON_WRITE.into()]
}

fn is_copy_on_write_only(engines: &[String]) -> bool {
    engines == [COPY_ON_WRITE]
}

fn one() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

fn warmup_capacities() -> f64 {
    24.0
}

fn sweep_reserve_pct() -> u8 {
    engine::config::DEFAULT_SWEEP_RESERVE_PCT
}

/// The engine's table allocations an experiment can run (engine::AllocPolicy).
const ALLOCATIONS: [&str; 4] = ["best", "first", "append", "sweep"];

/// The co-design's dirty budget, `[target, trigger]` percent of the cache: set on seed 1
/// (docs/placement.md, "The dirty budget").
pub const CODESIGN_DIRTY_PCT: [u8; 2] = [50, 80];

/// The engine's own dirty budget (WiredTiger's defaults).
pub const ENGINE_DIRTY_PCT: [u8; 2] = [5, 20];

/// Flash mode's dirty budget: the co-design's.
pub const FLASH_MODE_DIRTY_PCT: [u8; 2] = CODESIGN_DIRTY_PCT;

/// Eviction's clean-and-dirty budget, `[target, trigger]` percent of the cache: WiredTiger's
/// 80/95, which the lab's engines keep (the engine's default, `EngineConfig::default`).
pub const EVICTION_PCT: [u8; 2] = [80, 95];

/// The placement policy flash mode ships: the engine's, so the lab scores the policy the
/// server runs.
pub const SHIPPED_POLICY: &str = engine::SHIPPED_POLICY;

/// The policies the seeds published (seed 000, seed 003): flash mode's is scored against each.
pub const SEED_POLICIES: &[&str] = &["none", "file", "boundary", "dsm"];

/// The scoring seeds (the policies' parameters were frozen on seed 1) and the fresh seeds
/// scored beside them.
pub const SCORING_SEEDS: [u64; 3] = [2, 3, 4];
pub const FRESH_SEEDS: [u64; 3] = [5, 6, 7];

fn codesign_dirty_pct() -> BTreeMap<String, [u8; 2]> {
    BTreeMap::from([("sweep".to_string(), CODESIGN_DIRTY_PCT)])
}

fn factorial_budgets() -> Vec<[u8; 2]> {
    vec![ENGINE_DIRTY_PCT, FLASH_MODE_DIRTY_PCT]
}

/// The reference scale's settings (docs/placement.md, "The reference scale"): large, with
/// YCSB's skew held over 40 000 key classes and LinkBench's out-degree capped at 7 500.
fn at_reference_scale(e: Experiment) -> Experiment {
    Experiment {
        scale: "large".into(),
        ycsb_key_classes: Some(40_000),
        linkbench_degree_cap: Some(7_500),
        ..e
    }
}

/// The full factorial at the reference scale: {best fit, sweep} × {5/20, flash mode's budget}
/// × every policy × seeds 2–4 × TRIM off and on. `--scale quick` runs it small.
fn factorial(base: &Experiment) -> Experiment {
    at_reference_scale(Experiment {
        name: "factorial".into(),
        title: "Allocation × dirty budget × policy × TRIM, at equal engine settings".into(),
        description: "Both allocations (best fit, sweep) at both dirty budgets (WiredTiger's 5/20 and flash mode's 50/80), every placement policy, with TRIM off (the seeds' conditions) and safe batched TRIM (k = 20 000, discard on): every comparison at equal engine settings, and the decomposition of flash mode's gain over dsm into budget, allocator and policy. At the reference scale (large, YCSB's skew and LinkBench's out-degree cap held).".into(),
        dirty_budgets: factorial_budgets(),
        trims: vec![TrimSpec::off(), TrimSpec::safe(20_000)],
        ..base.clone()
    })
}

/// Scoring seeds 2–4 beside fresh seeds 5–7, every workload, at the reference scale.
fn fresh_seeds(base: &Experiment) -> Experiment {
    at_reference_scale(Experiment {
        name: "fresh-seeds".into(),
        title: "Every workload on the scoring seeds 2–4 and the fresh seeds 5–7".into(),
        description: "The five workloads at flash mode's engine settings and WiredTiger's, every policy, on the scoring seeds 2–4 and on seeds 5–7, which no parameter was tuned on (the policies are frozen on seed 1); the report sets the two groups of seeds side by side. At the reference scale (large, YCSB's skew and LinkBench's out-degree cap held).".into(),
        seeds: SCORING_SEEDS.iter().chain(&FRESH_SEEDS).copied().collect(),
        ..base.clone()
    })
}

fn best_fit() -> Vec<String> {
    vec!["best".into()]
}

fn ssd8() -> SsdSpec {
    SsdSpec {
        streams: 8,
        op: 0.07,
        gc: "greedy".into(),
        gc_tie: ssd::GcTie::Newest,
        trim_command_us: trim_command_us(),
        pages_per_block: None,
        erase_units: None,
        device_gb: None,
    }
}

/// Every policy a stream experiment compares: the seeds', flashdoc's, and both oracles.
pub fn all_policies() -> Vec<String> {
    s(&[
        "none",
        "file",
        "boundary",
        "dsm",
        "dsm-skip-primary",
        "lifetime",
        "filelog",
        "reuse",
        "oracle",
        "oracle-death",
    ])
}

/// Both engines: WiredTiger's best-fit allocation (the engine the seeds measured) and
/// flashdoc's sweep (the co-design `filelog` is built for).
fn both_engines() -> Vec<String> {
    s(&["best", "sweep"])
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The experiments that run the seeds' stream conditions (TRIM and discard off by default).
pub const STREAM_EXPERIMENTS: &[&str] = &[
    "streams",
    "streams-quick",
    "primary-filter",
    "leaf-size",
    "io-pattern",
];

/// The built-in experiments (`flashdoc lab list`).
pub fn builtins() -> Vec<Experiment> {
    let base = builtin_defaults();
    let mut all = stream_builtins(&base);
    all.extend(figure_builtins(&base));
    all.push(inplace_vs_cow_builtin(&base));
    all.extend(other_engine_builtins(base));
    all
}

/// The built-in experiment: the five stream workloads, both designs, six policies, five fills,
/// two of the scoring seeds, at the quick scale (parameters frozen before the run).
fn inplace_vs_cow_builtin(base: &Experiment) -> Experiment {
    Experiment {
        name: "inplace-vs-cow".into(),
        title: "In place against out of place on flash, across device fills".into(),
        kind: Kind::InPlaceVsCow,
        description: "The five stream workloads on the copy-on-write engine with flash mode's engine settings (sweep allocation, 50/80 dirty budget) and on the in-place engine in MMAPv1's design (power-of-two records updated in place, bucket B-tree, page-image journal; crates/inplace), at equal cache and equal operations per checkpoint; each trace replayed through none, file, dsm, boundary, flash mode's policy and the oracle on an 8-stream device (7 % over-provisioning, greedy GC, the erase block held across the fills, the file system made on the device and discarding what removed files free, no TRIM of freed extents, reads included) that the engine's files fill to 20, 40, 60, 80 and 90 % at their peak. The 2026 study \"How to Write to SSDs\" (PVLDB 19) measured an in-place B-tree's device WAF rising from 2.33 at 18 % fill to 4.72 at 90 %, where an out-of-place design with placement held 1.07.".into(),
        policies: DESIGN_POLICIES.iter().map(|p| p.to_string()).collect(),
        allocations: vec![COW_ALLOCATION.into()],
        dirty_pct: BTreeMap::from([(COW_ALLOCATION.to_string(), FLASH_MODE_DIRTY_PCT)]),
        // Filesystem discard on, no TRIM of freed extents: the device holds valid what the
        // files hold, so a fill is what garbage collection finds. Without discard the removed
        // journal files' LBAs stayed valid and the next-fit layout walked them over the whole
        // device: 77–100 % of it valid at every fill (docs/placement.md, "In place against out
        // of place").
        trims: vec![TrimSpec {
            discard: true,
            ..TrimSpec::off()
        }],
        seeds: SCORING_SEEDS[..2].to_vec(),
        designs: DESIGNS.iter().map(|d| d.to_string()).collect(),
        device_fills: DEVICE_FILLS.to_vec(),
        ..base.clone()
    }
}

/// What every built-in experiment shares unless it says otherwise: `streams` at the quick
/// scale.
fn builtin_defaults() -> Experiment {
    let r = Ratios::default();
    Experiment {
        name: String::new(),
        title: String::new(),
        kind: Kind::Streams,
        description: String::new(),
        workloads: s(WORKLOADS),
        policies: all_policies(),
        cache_shares: vec![r.cache_share],
        leaf_kb: vec![32],
        compressors: no_compression(),
        engines: copy_on_write_only(),
        allocations: both_engines(),
        sweep_reserve_pct: sweep_reserve_pct(),
        dirty_pct: codesign_dirty_pct(),
        dirty_budgets: Vec::new(),
        trims: vec![TrimSpec::off()],
        ssds: vec![ssd8()],
        device_fill: r.device_fill,
        checkpoint_share: r.checkpoint_share,
        precondition: "mkfs".into(),
        reads: true,
        // Fresh seeds: `filelog`'s parameters and the sweep's reserve were set on seed 1.
        seeds: vec![2, 3, 4],
        run_factor: 1.0,
        scales: Vec::new(),
        warmup_capacities: warmup_capacities(),
        linkbench_degree_cap: None,
        ycsb_key_classes: None,
        linkbench_id_classes: None,
        designs: Vec::new(),
        device_fills: Vec::new(),
        scale: "quick".into(),
    }
}

/// The stream-placement experiments, and the scale and leaf-size ones that vary them.
fn stream_builtins(base: &Experiment) -> Vec<Experiment> {
    vec![
        Experiment {
            name: "streams-quick".into(),
            title: "Stream placement per policy and workload at equal engine settings (quick)".into(),
            description: "A small `streams`: the five workloads of seed 000 Table 1, every placement policy, on an 8-stream simulated SSD under the seeds' conditions (the file system made on the device, which mkfs discards; then no TRIM, no discard), reads included, on both allocations at both dirty budgets (WiredTiger's 5/20 and flash mode's 50/80): every policy at flash mode's engine settings and at WiredTiger's, and the 2×2×2 cells the decomposition of flash mode's gain needs. The README's main job.".into(),
            dirty_budgets: factorial_budgets(),
            ..base.clone()
        },
        Experiment {
            name: "streams-device-size".into(),
            title: "Stream placement by device size: 128, 256 and 512 GB equivalents".into(),
            description: "Seed 000 ran 51.7–58.4 GB of YCSB files and 55–108.5 GB of LinkBench files on an 840 Pro whose capacity it does not state (sold as 128, 256 and 512 GB). The same engine runs replayed on a device scaled to each: database, cache, checkpoints and journal files unchanged, only the device's capacity relative to the database moves. 256 GB is the reference (docs/lab.md).".into(),
            policies: s(&["none", "file", "boundary", "dsm", "filelog", "oracle"]),
            allocations: best_fit(),
            ssds: [128, 256, 512]
                .map(|gb| SsdSpec { device_gb: Some(gb), ..ssd8() })
                .to_vec(),
            ..base.clone()
        },
        factorial(base),
        Experiment {
            name: "streams".into(),
            title: "Stream placement per policy and workload".into(),
            description: "Flash page writes per operation, modeled throughput, 99th-percentile latency and write amplification per placement policy for the five workloads (seed 000 Fig. 10–11; seed 003 Fig. 3–4), under the seeds' conditions (no TRIM, no discard).".into(),
            scale: "medium".into(),
            ..base.clone()
        },
        Experiment {
            name: "streams-trim".into(),
            title: "Stream placement per policy and workload, with safe TRIM, on a full device".into(),
            description: "`streams` with flashdoc's default: freed extents trimmed in batches of k = 20 000 (seed-equivalent) once no durable checkpoint references them, and filesystem discard on — beside no TRIM on the same device. At the seeds' fill TRIM leaves the device almost nothing to collect (write amplification about 1.01, docs/placement.md), so this runs a device whose live data fills 40% of it (its files up to 80% with the sweep's reserve), where both conditions leave placement something to win.".into(),
            trims: vec![TrimSpec::off(), TrimSpec::safe(20_000)],
            device_fill: 0.4,
            scale: "medium".into(),
            ..base.clone()
        },
        Experiment {
            name: "scale".into(),
            title: "How the headline figures move with scale".into(),
            kind: Kind::Scale,
            description: "`streams` at every scale this machine runs — database, device and run length grow together, the ratios stay — to find where each headline figure stops moving (the converged scale).".into(),
            scales: s(&["quick", "medium", "large"]),
            ..base.clone()
        },
        Experiment {
            name: "primary-filter".into(),
            title: "DSM with and without primary-index filtering".into(),
            kind: Kind::PrimaryFilter,
            description: "dsm vs dsm-skip-primary on the LinkBench workloads, where primary and secondary indexes are separate files (seed 000 Fig. 12).".into(),
            workloads: s(&["linkbench-original", "linkbench-mixed", "linkbench-update-only"]),
            policies: s(&["none", "dsm", "dsm-skip-primary"]),
            allocations: best_fit(),
            ..base.clone()
        },
        Experiment {
            name: "leaf-size".into(),
            title: "32 KB vs 4 KB leaf pages".into(),
            kind: Kind::LeafSize,
            description: "Every policy with the collection's leaf pages at 32 KB (WiredTiger's default) and 4 KB: flash page writes per operation, modeled throughput and the database size each leaves (seed 000 Fig. 13 and §5.5; seed 003 Fig. 5).".into(),
            workloads: s(&["ycsb-update-only", "linkbench-update-only"]),
            policies: s(&["none", "file", "boundary", "dsm", "lifetime", "filelog"]),
            leaf_kb: vec![32, 4],
            ..base.clone()
        },
        fresh_seeds(base),
    ]
}

/// The experiments that measure one of the seeds' figures or tables.
fn figure_builtins(base: &Experiment) -> Vec<Experiment> {
    vec![
        Experiment {
            name: "trim".into(),
            title: "Throughput by TRIM batch".into(),
            kind: Kind::Trim,
            description: "Batched TRIM of freed space at trim frequencies 10k–40k (seed-equivalent), safe (free) and the paper's trim-at-replacement, against no TRIM, with the cost of each TRIM command in the timing model (seed 002 Table 3).".into(),
            workloads: s(&["ycsb-update-heavy"]),
            policies: s(&["none"]),
            allocations: best_fit(),
            ssds: [100.0, 1000.0, 10_000.0]
                .map(|us| SsdSpec { trim_command_us: us, ..ssd8() })
                .to_vec(),
            trims: std::iter::once(TrimSpec::off())
                .chain([10_000, 15_000, 20_000, 30_000, 40_000].map(TrimSpec::safe))
                .chain([TrimSpec { batch: Some(20_000), when: "replace".into(), discard: true }])
                .collect(),
            ..base.clone()
        },
        Experiment {
            name: "write-shares".into(),
            title: "Bytes written per file kind and page kind".into(),
            kind: Kind::WriteShares,
            description: "Where the run phase's bytes go: collection, primary index, secondary indexes, journal, metadata (seed 000 / 003 Table 1), and root, internal, leaf, overflow, extent-list pages (seed 002 Table 2, seed 003 Table 2).".into(),
            policies: s(&["none"]),
            allocations: best_fit(),
            seeds: vec![1],
            ..base.clone()
        },
        Experiment {
            name: "io-pattern".into(),
            title: "Write offsets over time, coloured by stream".into(),
            kind: Kind::IoPattern,
            description: "Every write's file offset against time, per file kind, coloured by the stream DSM gives it, with checkpoint lines (seed 000 Fig. 3, 5, 8; seed 002 Fig. 4–5).".into(),
            workloads: s(&["linkbench-update-only"]),
            policies: s(&["dsm"]),
            allocations: best_fit(),
            seeds: vec![1],
            ..base.clone()
        },
        Experiment {
            name: "compression".into(),
            title: "Block compressors, and MMAPv1 beside them".into(),
            kind: Kind::Compression,
            description: "Startup, insert job, shutdown, disk use, and cold and warm read passes for WiredTiger's block compressors none, snappy, zlib and zstd on flashdoc's copy-on-write engine, and for the in-place engine in MMAPv1's design, with the chapter's document shape (four typed fields, an array of eight four-field subdocuments and eight four-field subdocuments) and its configurations: no journal compression, prefix compression with a block compressor, a cache that holds the data (seed 001 §10.3, Tables 10.3–10.5).".into(),
            workloads: s(&["chapter10"]),
            policies: s(&["none"]),
            compressors: s(&["none", "snappy", "zlib", "zstd"]),
            engines: s(&[COPY_ON_WRITE, IN_PLACE]),
            allocations: best_fit(),
            seeds: vec![1],
            ..base.clone()
        },
    ]
}

/// The experiments beside other engines: a real WiredTiger, and a sharded cluster.
fn other_engine_builtins(base: Experiment) -> Vec<Experiment> {
    vec![
        Experiment {
            name: "real-wiredtiger".into(),
            title: "A real WiredTiger's writes, replayed through every policy beside flashdoc's engine".into(),
            kind: Kind::RealWiredTiger,
            description: "WiredTiger 11.3.1 (crates/shim/wtdriver.c on its C API: mongod's layout of a collection and its _id index, YCSB's scrambled zipfian over 1000-byte documents) runs each YCSB workload, and SecantusDB 0.7.0b3 (a MongoDB-wire server on WiredTiger, from PyPI) runs every workload through the lab's own YCSB and LinkBench over the wire, each under libflashdoc_shim.so and sized as the lab sizes its own engine; their traces and flashdoc's engine's (best-fit and sweep allocation) on the same workload are replayed through every placement policy on the same aged 8-stream device, under the seeds' conditions (no TRIM, no discard) and with filesystem discard. docs/shim.md, crates/lab/src/realwt.rs, crates/lab/src/secantus.rs.".into(),
            workloads: s(&["ycsb-update-heavy", "ycsb-update-only", "linkbench-mixed"]),
            // Real traces are scored on the harsher device, every LBA valid (issue 32 §3).
            precondition: "fill".into(),
            // Beside the seeds' condition, filesystem discard (no TRIM of freed extents): what
            // the space of removed and truncated files costs each engine.
            trims: vec![
                TrimSpec::off(),
                TrimSpec {
                    discard: true,
                    ..TrimSpec::off()
                },
            ],
            seeds: vec![2],
            ..base.clone()
        },
        Experiment {
            name: "hass".into(),
            title: "Hotness-aware chunk splits (HASS) on a sharded cluster".into(),
            kind: Kind::Hass,
            description: "YCSB-A with 1 KB records on an in-process cluster whose shards each run the engine on their own simulated SSD: MongoDB 3.6's split points (default), HASS static and dynamic tuning, CockroachDB/TiKV-style load-based splitting and an access-weighted oracle; the paper's scrambled zipfian over hashed keys, and hotness clustered in key order (seed 004, Fig. 5–9, Tables I–II).".into(),
            workloads: s(crate::hass_spec::WORKLOADS),
            policies: s(crate::hass_spec::POLICIES),
            allocations: best_fit(),
            seeds: vec![1],
            ..base
        },
    ]
}

pub fn find(name: &str) -> Option<Experiment> {
    builtins().into_iter().find(|e| e.name == name)
}

impl Experiment {
    pub fn validate(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        if self.workloads.is_empty() || self.policies.is_empty() || self.seeds.is_empty() {
            bail!("experiment {name}: needs at least one workload, one policy and one seed");
        }
        if self.kind == Kind::Hass {
            return self.validate_hass();
        }
        self.check_classes()?;
        self.check_names()?;
        self.check_engines()?;
        self.check_designs()?;
        self.check_trims()?;
        self.check_engine()?;
        self.check_ssds()?;
        self.check_run()
    }

    /// The key and id classes fit every scale the experiment runs.
    fn check_classes(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        if self.linkbench_degree_cap == Some(0) {
            bail!("experiment {name}: linkbench_degree_cap must be at least 1 (or unset: a tenth of maxid1)");
        }
        let scales = if self.scales.is_empty() {
            std::slice::from_ref(&self.scale)
        } else {
            &self.scales[..]
        };
        for sc in scales {
            let Some(spec) = ScaleSpec::named(sc) else {
                continue;
            };
            if let Some(classes) = self.ycsb_key_classes {
                let records = spec.ycsb_records;
                if classes == 0 || classes > records {
                    bail!("experiment {name}: ycsb_key_classes must be between 1 and the record count of every scale it runs ({records} at {sc}), not {classes}");
                }
            }
            if let Some(classes) = self.linkbench_id_classes {
                // LinkBench's ids run from startid1 = 1 to maxid1 (exclusive).
                let nodes = spec.linkbench_maxid1 as u64 - 1;
                if classes == 0 || classes > nodes {
                    bail!("experiment {name}: linkbench_id_classes must be between 1 and the node count of every scale it runs ({nodes} at {sc}), not {classes}");
                }
            }
        }
        Ok(())
    }

    /// Every workload and policy is one the lab knows.
    fn check_names(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        for w in &self.workloads {
            if self.kind == Kind::RealWiredTiger
                && !(w.starts_with("ycsb-") || w.starts_with("linkbench-"))
            {
                bail!(
                    "experiment {name}: a real WiredTiger runs the YCSB and LinkBench workloads, not '{w}'"
                );
            }
            if !WORKLOADS.contains(&w.as_str()) && w != "chapter10" {
                bail!(
                    "experiment {name}: unknown workload '{w}' (one of {})",
                    WORKLOADS.join(", ")
                );
            }
        }
        for p in &self.policies {
            if !placement::policy::POLICY_NAMES.contains(&p.as_str()) {
                bail!(
                    "experiment {name}: unknown policy '{p}' (one of {})",
                    placement::policy::POLICY_NAMES.join(", ")
                );
            }
        }
        Ok(())
    }

    /// Every engine is one the lab runs, once; the in-place engine only where the lab drives
    /// it (the compression experiment's workload).
    fn check_engines(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        if self.engines.is_empty() {
            bail!(
                "experiment {name}: engines must name at least one of {}",
                ENGINES.join(", ")
            );
        }
        for (i, e) in self.engines.iter().enumerate() {
            if !ENGINES.contains(&e.as_str()) {
                bail!(
                    "experiment {name}: unknown engine '{e}' (one of {})",
                    ENGINES.join(", ")
                );
            }
            if self.engines[..i].contains(e) {
                bail!("experiment {name}: engines names '{e}' twice");
            }
        }
        if self.engines.iter().any(|e| e == IN_PLACE) && self.kind != Kind::Compression {
            bail!(
                "experiment {name}: the {IN_PLACE} engine runs in compression experiments only (kind: compression); the lab does not drive it through {:?} workloads",
                self.kind
            );
        }
        Ok(())
    }

    /// What an `inplace-vs-cow` experiment must hold (and no other may set).
    fn check_designs(&self) -> anyhow::Result<()> {
        let e = self;
        let name = &e.name;
        if e.kind != Kind::InPlaceVsCow {
            if !e.designs.is_empty() || !e.device_fills.is_empty() {
                anyhow::bail!("experiment {name}: designs and device_fills belong to an inplace-vs-cow experiment");
            }
            return Ok(());
        }
        if e.designs.is_empty() || e.device_fills.is_empty() {
            anyhow::bail!("experiment {name}: needs designs and device_fills");
        }
        for d in &e.designs {
            if !DESIGNS.contains(&d.as_str()) {
                anyhow::bail!(
                    "experiment {name}: unknown design '{d}' (one of {})",
                    DESIGNS.join(", ")
                );
            }
        }
        if let Some(f) = e.device_fills.iter().find(|f| !(**f > 0.0 && **f < 1.0)) {
            anyhow::bail!("experiment {name}: a device fill must be in (0, 1), not {f}");
        }
        if e.allocations != [COW_ALLOCATION] || e.leaf_kb.len() != 1 || e.cache_shares.len() != 1 {
            anyhow::bail!("experiment {name}: the copy-on-write design runs the sweep allocation, one leaf size and one cache share");
        }
        if e.trims.len() != 1 || e.trims[0].batch.is_some() || e.ssds.len() != 1 {
            anyhow::bail!(
                "experiment {name}: the in-place engine has no TRIM; one device and one condition with TRIM off (discard on or off)"
            );
        }
        Ok(())
    }

    /// Every TRIM condition is one the device can see.
    fn check_trims(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        for t in &self.trims {
            if t.when != "free" && t.when != "replace" {
                bail!(
                    "experiment {name}: trim.when must be free or replace, not '{}'",
                    t.when
                );
            }
            if t.batch.is_some() && !t.discard {
                bail!(
                    "experiment {name}: a TRIM batch reaches the device only through the filesystem's discard; set discard: true with batch {:?}",
                    t.batch
                );
            }
            if t.batch == Some(0) {
                bail!("experiment {name}: a TRIM batch must be at least 1 extent");
            }
        }
        Ok(())
    }

    /// The device's fill, the checkpoints, the allocations and the engine's cache and eviction.
    fn check_engine(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        if !(self.device_fill > 0.0 && self.device_fill <= 0.9) {
            bail!(
                "experiment {name}: device_fill must be in (0, 0.9] (the database grows in its run phase)"
            );
        }
        if !(self.checkpoint_share > 0.0 && self.checkpoint_share <= 1.0) {
            bail!("experiment {name}: checkpoint_share must be in (0, 1]");
        }
        for a in &self.allocations {
            if !ALLOCATIONS.contains(&a.as_str()) {
                bail!("experiment {name}: unknown allocation '{a}' (best, first, append, sweep)");
            }
        }
        if self.allocations.is_empty()
            || self.cache_shares.is_empty()
            || self.cache_shares.iter().any(|&c| c.is_nan() || c <= 0.0)
        {
            bail!("experiment {name}: needs an allocation, and cache_shares must be positive");
        }
        if !(0.0..=1000.0).contains(&self.warmup_capacities) {
            bail!("experiment {name}: warmup_capacities must be in [0, 1000]");
        }
        if self.sweep_reserve_pct > 90 {
            bail!("experiment {name}: sweep_reserve_pct must be 0–90");
        }
        for (alloc, &[target, trigger]) in &self.dirty_pct {
            if !ALLOCATIONS.contains(&alloc.as_str()) {
                bail!("experiment {name}: dirty_pct names an unknown allocation '{alloc}' (best, first, append, sweep)");
            }
            if let Err(why) = engine::config::check_eviction_pct(target, trigger) {
                bail!("experiment {name}: dirty_pct of {alloc}: {why}");
            }
        }
        for (i, &[target, trigger]) in self.dirty_budgets.iter().enumerate() {
            if let Err(why) = engine::config::check_eviction_pct(target, trigger) {
                bail!("experiment {name}: dirty_budgets[{i}]: {why}");
            }
            if self.dirty_budgets[..i].contains(&[target, trigger]) {
                bail!("experiment {name}: dirty_budgets names {target}/{trigger} twice");
            }
        }
        Ok(())
    }

    /// Every simulated SSD's TRIM cost and erase geometry.
    fn check_ssds(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        if self
            .ssds
            .iter()
            .any(|d| d.trim_command_us.is_nan() || d.trim_command_us < 0.0)
        {
            bail!("experiment {name}: trim_command_us must be ≥ 0");
        }
        for d in &self.ssds {
            if d.device_gb.is_some_and(|gb| !(16..=16_384).contains(&gb)) {
                bail!("experiment {name}: device_gb must be from 16 to 16384");
            }
            match (d.pages_per_block, d.erase_units) {
                (Some(_), Some(_)) => bail!(
                    "experiment {name}: an ssds entry holds either pages_per_block or erase_units, not both"
                ),
                (Some(p), None) if !(p.is_power_of_two() && (16..=1024).contains(&p)) => bail!(
                    "experiment {name}: pages_per_block must be a power of two from 16 to 1024, not {p}"
                ),
                (None, Some(u)) if !(16..=1 << 24).contains(&u) => bail!(
                    "experiment {name}: erase_units must be from 16 to 16777216, not {u}"
                ),
                _ => {}
            }
        }
        Ok(())
    }

    /// The run's length, preconditioning and scales.
    fn check_run(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        let name = &self.name;
        if !(self.run_factor > 0.0 && self.run_factor <= 1000.0) {
            bail!("experiment {name}: run_factor must be in (0, 1000]");
        }
        if !["mkfs", "none", "fill", "steady"].contains(&self.precondition.as_str()) {
            bail!(
                "experiment {name}: precondition must be mkfs, none, fill or steady, not '{}'",
                self.precondition
            );
        }
        for sc in &self.scales {
            if ScaleSpec::named(sc).is_none() {
                bail!("experiment {name}: unknown scale '{sc}' in scales");
            }
        }
        if (self.kind == Kind::Scale) != (self.scales.len() > 1) {
            bail!("experiment {name}: a scale experiment needs two or more scales, and only it takes them");
        }
        if ScaleSpec::named(&self.scale).is_none() {
            bail!(
                "experiment {name}: scale must be one of {}",
                SCALES.join(", ")
            );
        }
        Ok(())
    }
}

impl Experiment {
    fn validate_hass(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        for w in &self.workloads {
            if !crate::hass_spec::WORKLOADS.contains(&w.as_str()) {
                bail!(
                    "experiment {}: unknown hass workload '{w}' (one of {})",
                    self.name,
                    crate::hass_spec::WORKLOADS.join(", ")
                );
            }
        }
        for p in &self.policies {
            if !crate::hass_spec::POLICIES.contains(&p.as_str()) {
                bail!(
                    "experiment {}: unknown split policy '{p}' (one of {})",
                    self.name,
                    crate::hass_spec::POLICIES.join(", ")
                );
            }
        }
        if crate::hass_spec::HassScale::named(&self.scale).is_none() {
            bail!(
                "experiment {}: scale must be tiny, quick, medium or paper",
                self.name
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_round_trip_through_yaml() {
        for e in builtins() {
            e.validate().unwrap();
            let y = serde_yaml::to_string(&e).unwrap();
            let back: Experiment = serde_yaml::from_str(&y).unwrap();
            assert_eq!(back, e);
        }
        assert!(find("streams-quick").is_some());
        for s in SCALES {
            assert!(ScaleSpec::named(s).is_some(), "{s}");
        }
    }

    /// The seeds ran their stream experiments without TRIM and without discard: a silent drift
    /// back to TRIM in these experiments would change every conclusion of the report.
    #[test]
    fn stream_experiments_default_to_the_seeds_conditions() {
        for name in STREAM_EXPERIMENTS {
            let e = find(name).unwrap();
            assert_eq!(e.trims, vec![TrimSpec::off()], "{name}");
            assert!(!e.trims[0].discard && e.trims[0].batch.is_none(), "{name}");
            assert_eq!(
                e.precondition, "mkfs",
                "{name}: the seeds' device had a file system made on it, then no discard"
            );
            assert_eq!(e.device_fill, Ratios::default().device_fill, "{name}");
            assert_eq!(
                e.checkpoint_share,
                Ratios::default().checkpoint_share,
                "{name}"
            );
        }
        // TRIM is studied where it belongs, and with discard (the only way it reaches the
        // device).
        let t = find("trim").unwrap();
        assert!(t.trims.iter().any(|t| t.batch == Some(20_000) && t.discard));
        let st = find("streams-trim").unwrap();
        assert_eq!(st.trims[0], TrimSpec::off(), "the baseline beside it");
        assert!(st.trims[1].discard && st.trims[1].batch.is_some());
    }

    #[test]
    fn the_device_size_sensitivity_scales_the_device_around_the_256_gb_reference() {
        let e = find("streams-device-size").unwrap();
        let gb: Vec<_> = e.ssds.iter().map(|d| d.device_gb).collect();
        assert_eq!(gb, [Some(128), Some(256), Some(512)]);
        let scales: Vec<f64> = e.ssds.iter().map(SsdSpec::device_scale).collect();
        assert_eq!(scales, [0.5, 1.0, 2.0]);
        assert_eq!(e.ssds[0].label(), "8st-op0.07-greedy-128gb");
        assert_eq!(ssd8().device_scale(), 1.0, "unset is the reference");
        let mut bad = e.clone();
        bad.ssds[0].device_gb = Some(4);
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("device_gb"));
        // The real traces keep the harsher device they are scored on.
        assert_eq!(find("real-wiredtiger").unwrap().precondition, "fill");
    }

    #[test]
    fn a_held_erase_block_is_named_and_bounded() {
        let e = find("streams").unwrap();
        assert_eq!(
            e.ssds[0].pages_per_block, None,
            "the committed runs' blocks"
        );
        assert_eq!(e.ssds[0].label(), "8st-op0.07-greedy");
        let with = |p: u32| {
            let mut x = e.clone();
            x.ssds[0].pages_per_block = Some(p);
            x
        };
        assert_eq!(with(64).ssds[0].label(), "8st-op0.07-greedy-ppb64");
        with(64).validate().unwrap();
        for bad in [8, 100, 2048] {
            let why = with(bad).validate().unwrap_err().to_string();
            assert!(why.contains("pages_per_block"), "{why}");
        }
    }

    #[test]
    fn a_held_erase_unit_count_is_named_and_bounded() {
        let e = find("streams").unwrap();
        assert_eq!(e.ssds[0].erase_units, None, "the committed runs' blocks");
        let with = |u: u64, ppb: Option<u32>| {
            let mut x = e.clone();
            x.ssds[0].erase_units = Some(u);
            x.ssds[0].pages_per_block = ppb;
            x
        };
        assert_eq!(with(4096, None).ssds[0].label(), "8st-op0.07-greedy-eu4096");
        with(4096, None).validate().unwrap();
        for bad in [with(8, None), with(1 << 25, None), with(4096, Some(64))] {
            let why = bad.validate().unwrap_err().to_string();
            assert!(why.contains("erase_units"), "{why}");
        }
    }

    #[test]
    fn key_classes_reach_every_scale_and_are_bounded_by_its_size() {
        let e = find("streams").unwrap();
        assert_eq!(
            e.ycsb_key_classes, None,
            "the committed runs draw YCSB's own zipfian"
        );
        let held = Experiment {
            kind: Kind::Scale,
            ycsb_key_classes: Some(40_000),
            scales: vec!["quick".into(), "medium".into(), "large".into()],
            ..e.clone()
        };
        held.validate().unwrap();
        for sc in ["quick", "large"] {
            assert_eq!(held.scale_spec(sc).unwrap().ycsb_key_classes, Some(40_000));
        }
        for bad in [Some(0), Some(40_001)] {
            let e = Experiment {
                ycsb_key_classes: bad,
                ..held.clone()
            };
            let why = e.validate().unwrap_err().to_string();
            assert!(why.contains("ycsb_key_classes"), "{why}");
        }
        // LinkBench's: at most quick's 14 999 nodes here.
        let lb = |c| Experiment {
            linkbench_id_classes: Some(c),
            ..held.clone()
        };
        lb(14_999).validate().unwrap();
        assert_eq!(
            lb(14_999).scale_spec("large").unwrap().linkbench_id_classes,
            Some(14_999)
        );
        for bad in [0, 15_000] {
            let why = lb(bad).validate().unwrap_err().to_string();
            assert!(why.contains("linkbench_id_classes"), "{why}");
        }
    }

    #[test]
    fn the_linkbench_degree_cap_grows_with_the_graph_unless_held() {
        let e = find("streams").unwrap();
        assert_eq!(e.linkbench_degree_cap, None, "the committed runs' cap");
        let caps = |e: &Experiment| -> Vec<u64> {
            ["tiny", "medium", "large"]
                .iter()
                .map(|s| e.scale_spec(s).unwrap().linkbench_nlinks_cap())
                .collect()
        };
        // A tenth of maxid1, at least 100.
        assert_eq!(caps(&e), vec![150, 7_500, 30_000]);
        let held = Experiment {
            linkbench_degree_cap: Some(7_500),
            ..e.clone()
        };
        held.validate().unwrap();
        assert_eq!(caps(&held), vec![7_500, 7_500, 7_500]);
        let zero = Experiment {
            linkbench_degree_cap: Some(0),
            ..e
        };
        assert!(zero.validate().is_err());
    }

    #[test]
    fn trim_batches_scale_with_the_device() {
        let t = TrimSpec::safe(20_000);
        // The seeds' drive: unchanged; a 2.56 GB device: 200 extents; tiny devices: 1.
        assert_eq!(t.scaled_batch(256_000_000_000), Some(20_000));
        assert_eq!(t.scaled_batch(2_560_000_000), Some(200));
        assert_eq!(t.scaled_batch(1 << 20), Some(1));
        assert_eq!(TrimSpec::off().scaled_batch(1 << 30), None);
        assert_eq!(TrimSpec::off().label(), "off");
        assert_eq!(t.label(), "20000");
    }

    #[test]
    fn a_trim_batch_without_discard_is_refused() {
        let mut e = find("streams-quick").unwrap();
        e.trims = vec![TrimSpec {
            batch: Some(20_000),
            when: "free".into(),
            discard: false,
        }];
        let err = e.validate().unwrap_err().to_string();
        assert!(err.contains("discard"), "{err}");
    }

    /// The main job and the factorial run both allocations at both budgets; the factorial
    /// adds TRIM at the reference scale; the fresh-seed spec scores seeds 5–7 beside 2–4.
    #[test]
    fn the_factorial_runs_every_allocation_at_every_budget() {
        for name in ["streams-quick", "factorial"] {
            let e = find(name).unwrap();
            for alloc in ["best", "sweep"] {
                assert_eq!(
                    e.budgets_of(alloc),
                    vec![ENGINE_DIRTY_PCT, FLASH_MODE_DIRTY_PCT],
                    "{name} {alloc}"
                );
            }
            assert_eq!(e.allocations, ["best", "sweep"]);
            assert_eq!(e.policies, all_policies());
            assert_eq!(e.seeds, SCORING_SEEDS);
        }
        let f = find("factorial").unwrap();
        assert_eq!(f.trims, vec![TrimSpec::off(), TrimSpec::safe(20_000)]);
        let reference = find("streams").map(at_reference_scale).unwrap();
        assert_eq!(
            (f.scale.as_str(), f.ycsb_key_classes, f.linkbench_degree_cap),
            (
                "large",
                reference.ycsb_key_classes,
                reference.linkbench_degree_cap
            )
        );
        let fresh = find("fresh-seeds").unwrap();
        assert_eq!(fresh.seeds, [2, 3, 4, 5, 6, 7]);
        assert_eq!(fresh.workloads, WORKLOADS);
        // Without the factorial an allocation runs at its own budget only.
        let streams = find("streams").unwrap();
        assert_eq!(streams.budgets_of("sweep"), vec![CODESIGN_DIRTY_PCT]);
        assert_eq!(streams.budgets_of("best"), vec![ENGINE_DIRTY_PCT]);
        for (budgets, why) in [
            (vec![[20, 10]], "target above trigger"),
            (vec![[5, 20], [5, 20]], "twice"),
        ] {
            let bad = Experiment {
                dirty_budgets: budgets,
                ..streams.clone()
            };
            let err = bad.validate().expect_err(why).to_string();
            assert!(err.contains("dirty_budgets"), "{why}: {err}");
        }
    }

    /// Committed runs whose sweep ran before the co-design's budget existed keep 5/20 on a
    /// rerun of their experiment.yaml (docs/placement.md, "Which committed runs a rerun
    /// reproduces").
    #[test]
    fn committed_runs_from_before_the_budget_pin_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results");
        for dir in [
            "streams-fresh-lbmixed",
            "streams-large-lbmixed",
            "streams-medium",
            "streams-quick-repeat",
            "streams-trim-quick",
            "real-wiredtiger-quick",
        ] {
            let text = std::fs::read_to_string(root.join(dir).join("experiment.yaml")).unwrap();
            let e: Experiment = serde_yaml::from_str(&text).unwrap();
            e.validate().unwrap();
            assert_eq!(e.budgets_of("sweep"), vec![ENGINE_DIRTY_PCT], "{dir}");
        }
    }

    /// Seed 001 §10.3 compares WiredTiger's compressors with MMAPv1: the experiment runs the
    /// in-place engine beside every compressor, and only it may.
    #[test]
    fn the_compression_experiment_runs_mmapv1_beside_every_compressor() {
        let e = find("compression").unwrap();
        assert_eq!(e.engines, [COPY_ON_WRITE, IN_PLACE]);
        assert_eq!(e.compressors, ["none", "snappy", "zlib", "zstd"]);
        assert_eq!(e.workloads, ["chapter10"]);
        let yaml = serde_yaml::to_string(&e).unwrap();
        assert!(
            yaml.contains("- mmapv1"),
            "`lab show compression` lists it: {yaml}"
        );
        // Every other experiment runs the copy-on-write engine only, and says nothing of it.
        for other in builtins().into_iter().filter(|x| x.name != "compression") {
            assert_eq!(other.engines, [COPY_ON_WRITE], "{}", other.name);
            assert!(!serde_yaml::to_string(&other).unwrap().contains("engines"));
        }
        let streams = find("streams").unwrap();
        for (engines, why) in [
            (vec![IN_PLACE], "compression experiments only"),
            (vec!["rocksdb"], "unknown engine"),
            (vec![COPY_ON_WRITE, COPY_ON_WRITE], "twice"),
            (vec![], "at least one"),
        ] {
            let bad = Experiment {
                engines: s(&engines),
                ..streams.clone()
            };
            let err = bad.validate().expect_err(why).to_string();
            assert!(err.contains(why), "{why}: {err}");
        }
        Experiment {
            engines: s(&[IN_PLACE]),
            ..e
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn the_co_design_runs_the_sweep_with_its_dirty_budget_and_bad_budgets_are_refused() {
        let e = find("streams-quick").unwrap();
        assert_eq!(e.dirty_pct.get("sweep"), Some(&CODESIGN_DIRTY_PCT));
        assert_eq!(
            e.dirty_pct.get("best"),
            None,
            "the reference keeps WiredTiger's"
        );
        for (alloc, pct, why) in [
            ("sweep", [80, 50], "target above trigger"),
            ("sweep", [0, 20], "no target"),
            ("sweep", [50, 101], "a trigger past 100"),
            ("sweeps", [50, 80], "an unknown allocation"),
        ] {
            let mut bad = e.clone();
            bad.dirty_pct = BTreeMap::from([(alloc.to_string(), pct)]);
            let err = bad.validate().expect_err(why).to_string();
            assert!(err.contains("dirty_pct"), "{why}: {err}");
        }
    }
}
