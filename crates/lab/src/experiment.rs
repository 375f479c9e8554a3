//! Experiment definitions: what to sweep, at which scale. Every experiment is a YAML-able
//! value; the built-in ones mirror the seeds' evaluations.

use serde::{Deserialize, Serialize};

/// What an experiment reports (it decides the plots and tables of its report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Throughput, p99 and WAF per placement policy and workload (seed 000 Fig. 10–11).
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
    /// Insert time, cold/warm reads and disk use per block compressor (seed 001 §10.6).
    Compression,
    /// Split policies on an in-process sharded cluster, per-shard device load (seed 004);
    /// `workloads` and `policies` name hass workloads and split policies (hass.rs).
    Hass,
}

/// A workload by the seeds' names.
pub const WORKLOADS: &[&str] = &[
    "ycsb-update-heavy",
    "ycsb-update-only",
    "linkbench-original",
    "linkbench-mixed",
    "linkbench-update-only",
];

/// TRIM of freed space during the replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrimSpec {
    /// Extents per TRIM batch (the seeds' "trim frequency"); `None`: TRIM off.
    pub batch: Option<usize>,
    /// `free` (safe: only what no durable checkpoint reaches) or `replace` (the paper's
    /// trim at address replacement — simulator only).
    #[serde(default = "free")]
    pub when: String,
}

fn free() -> String {
    "free".into()
}

impl TrimSpec {
    pub fn label(&self) -> String {
        match self.batch {
            None => "off".into(),
            Some(k) if self.when == "free" => format!("{k}"),
            Some(k) => format!("{k}-{}", self.when),
        }
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
}

impl SsdSpec {
    pub fn label(&self) -> String {
        format!("{}st-op{}-{}", self.streams, self.op, self.gc)
    }
}

/// Sizes of one scale.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleSpec {
    pub ycsb_records: u64,
    pub ycsb_ops: u64,
    pub linkbench_maxid1: i64,
    pub linkbench_requests: u64,
    /// Documents of the compression experiment (the chapter inserts 16 × 10,000).
    pub chapter10_docs: u64,
    /// Checkpoint interval of the engine runs, seconds. The seeds' 60 s matches runs of hours;
    /// lab runs are minutes, so the interval shrinks with them to keep several checkpoints per
    /// run (what the placement policies learn from).
    pub checkpoint_secs: f64,
    /// Client threads.
    pub threads: usize,
}

impl ScaleSpec {
    pub fn named(name: &str) -> Option<ScaleSpec> {
        Some(match name {
            // For the lab's own end-to-end test: seconds, not a measurement.
            "tiny" => ScaleSpec {
                ycsb_records: 3_000,
                ycsb_ops: 6_000,
                linkbench_maxid1: 1_500,
                linkbench_requests: 3_000,
                chapter10_docs: 2_000,
                checkpoint_secs: 0.5,
                threads: 2,
            },
            "quick" => ScaleSpec {
                ycsb_records: 40_000,
                ycsb_ops: 120_000,
                linkbench_maxid1: 15_000,
                linkbench_requests: 60_000,
                chapter10_docs: 20_000,
                checkpoint_secs: 2.0,
                threads: 2,
            },
            "medium" => ScaleSpec {
                ycsb_records: 300_000,
                ycsb_ops: 1_000_000,
                linkbench_maxid1: 100_000,
                linkbench_requests: 500_000,
                chapter10_docs: 80_000,
                checkpoint_secs: 5.0,
                threads: 2,
            },
            "paper" => ScaleSpec {
                ycsb_records: 3_000_000,
                ycsb_ops: 10_000_000,
                linkbench_maxid1: 1_000_000,
                linkbench_requests: 5_000_000,
                chapter10_docs: 160_000,
                checkpoint_secs: 60.0,
                threads: 4,
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
    /// Engine cache sizes, MB. Small on purpose: the seeds' caches were far smaller than their
    /// data, so eviction and checkpoints, not the cache, decided what reached the device.
    pub cache_mb: Vec<u64>,
    pub leaf_kb: Vec<u32>,
    #[serde(default = "no_compression")]
    pub compressors: Vec<String>,
    pub trims: Vec<TrimSpec>,
    pub ssds: Vec<SsdSpec>,
    /// The database's peak footprint as a share of the device's logical capacity.
    pub device_fill: f64,
    /// Age the device (fill, then random overwrites until WA is steady) before the replay.
    pub precondition: bool,
    pub scale: String,
}

fn no_compression() -> Vec<String> {
    vec!["none".into()]
}

fn ssd8() -> SsdSpec {
    SsdSpec {
        streams: 8,
        op: 0.07,
        gc: "greedy".into(),
    }
}

fn trim_default() -> TrimSpec {
    TrimSpec {
        batch: Some(20_000),
        when: "free".into(),
    }
}

fn all_policies() -> Vec<String> {
    [
        "none",
        "file",
        "boundary",
        "dsm",
        "dsm-skip-primary",
        "lifetime",
        "oracle",
    ]
    .map(String::from)
    .to_vec()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The built-in experiments (`flashdoc lab list`).
pub fn builtins() -> Vec<Experiment> {
    let base = Experiment {
        name: String::new(),
        title: String::new(),
        kind: Kind::Streams,
        description: String::new(),
        workloads: s(WORKLOADS),
        policies: all_policies(),
        cache_mb: vec![16],
        leaf_kb: vec![32],
        compressors: no_compression(),
        trims: vec![trim_default()],
        ssds: vec![ssd8()],
        device_fill: 0.8,
        precondition: true,
        scale: "quick".into(),
    };
    vec![
        Experiment {
            name: "streams-quick".into(),
            title: "Stream placement per policy and workload (quick)".into(),
            description: "A small `streams`: the five workloads of seed 000 Table 1, every placement policy, on an aged 8-stream simulated SSD. The README's main job.".into(),
            ..base.clone()
        },
        Experiment {
            name: "streams".into(),
            title: "Stream placement per policy and workload".into(),
            description: "Throughput, 99th-percentile latency and write amplification per placement policy for the five workloads (seed 000 Fig. 10–11; seed 003 Fig. 3–4), at two cache sizes.".into(),
            cache_mb: vec![16, 64],
            scale: "medium".into(),
            ..base.clone()
        },
        Experiment {
            name: "primary-filter".into(),
            title: "DSM with and without primary-index filtering".into(),
            kind: Kind::PrimaryFilter,
            description: "dsm vs dsm-skip-primary on the LinkBench workloads, where primary and secondary indexes are separate files (seed 000 Fig. 12).".into(),
            workloads: s(&["linkbench-original", "linkbench-mixed", "linkbench-update-only"]),
            policies: s(&["none", "dsm", "dsm-skip-primary"]),
            ..base.clone()
        },
        Experiment {
            name: "leaf-size".into(),
            title: "32 KB vs 4 KB leaf pages".into(),
            kind: Kind::LeafSize,
            description: "Every policy with the collection's leaf pages at 32 KB (WiredTiger's default) and 4 KB, with the database size each leaves (seed 000 Fig. 13 and §5.5; seed 003 Fig. 5).".into(),
            workloads: s(&["ycsb-update-only", "linkbench-update-only"]),
            policies: s(&["none", "file", "boundary", "dsm", "lifetime"]),
            leaf_kb: vec![32, 4],
            ..base.clone()
        },
        Experiment {
            name: "trim".into(),
            title: "Throughput by TRIM batch".into(),
            kind: Kind::Trim,
            description: "Batched TRIM of freed space at trim frequencies 10k–40k, safe (free) and the paper's trim-at-replacement, against no TRIM (seed 002 Table 3).".into(),
            workloads: s(&["ycsb-update-heavy"]),
            policies: s(&["none"]),
            trims: [None, Some(10_000), Some(15_000), Some(20_000), Some(30_000), Some(40_000)]
                .into_iter()
                .map(|b| TrimSpec { batch: b, when: "free".into() })
                .chain([TrimSpec { batch: Some(20_000), when: "replace".into() }])
                .collect(),
            ..base.clone()
        },
        Experiment {
            name: "write-shares".into(),
            title: "Bytes written per file kind and page kind".into(),
            kind: Kind::WriteShares,
            description: "Where the run phase's bytes go: collection, primary index, secondary indexes, journal, metadata (seed 000 / 003 Table 1), and root, internal, leaf, overflow, extent-list pages (seed 002 Table 2, seed 003 Table 2).".into(),
            policies: s(&["none"]),
            ..base.clone()
        },
        Experiment {
            name: "io-pattern".into(),
            title: "Write offsets over time, coloured by stream".into(),
            kind: Kind::IoPattern,
            description: "Every write's file offset against time, per file kind, coloured by the stream DSM gives it, with checkpoint lines (seed 000 Fig. 3, 5, 8; seed 002 Fig. 4–5).".into(),
            workloads: s(&["linkbench-update-only"]),
            policies: s(&["dsm"]),
            ..base.clone()
        },
        Experiment {
            name: "compression".into(),
            title: "Block compressors".into(),
            kind: Kind::Compression,
            description: "Insert time, cold and warm read time and disk use for none, snappy, zlib and zstd, with the chapter's document shape: four typed fields, an array of eight four-field subdocuments and eight four-field subdocuments (seed 001 §10.3, Tables 10.3–10.5).".into(),
            workloads: s(&["chapter10"]),
            policies: s(&["none"]),
            compressors: s(&["none", "snappy", "zlib", "zstd"]),
            ..base.clone()
        },
        Experiment {
            name: "hass".into(),
            title: "Hotness-aware chunk splits (HASS) on a sharded cluster".into(),
            kind: Kind::Hass,
            description: "YCSB-A with 1 KB records on an in-process cluster whose shards each run the engine on their own simulated SSD: MongoDB 3.6's split points (default), HASS static and dynamic tuning, CockroachDB/TiKV-style load-based splitting and an access-weighted oracle; the paper's scrambled zipfian over hashed keys, and hotness clustered in key order (seed 004, Fig. 5–9, Tables I–II).".into(),
            workloads: s(crate::hass::WORKLOADS),
            policies: s(crate::hass::POLICIES),
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
        if self.workloads.is_empty() || self.policies.is_empty() {
            bail!(
                "experiment {}: needs at least one workload and one policy",
                self.name
            );
        }
        if self.kind == Kind::Hass {
            return self.validate_hass();
        }
        for w in &self.workloads {
            if !WORKLOADS.contains(&w.as_str()) && w != "chapter10" {
                bail!(
                    "experiment {}: unknown workload '{w}' (one of {})",
                    self.name,
                    WORKLOADS.join(", ")
                );
            }
        }
        for p in &self.policies {
            if p != "oracle" && !placement::policy::POLICY_NAMES.contains(&p.as_str()) {
                bail!("experiment {}: unknown policy '{p}'", self.name);
            }
        }
        for t in &self.trims {
            if t.when != "free" && t.when != "replace" {
                bail!(
                    "experiment {}: trim.when must be free or replace, not '{}'",
                    self.name,
                    t.when
                );
            }
        }
        if !(self.device_fill > 0.0 && self.device_fill <= 1.0) {
            bail!("experiment {}: device_fill must be in (0, 1]", self.name);
        }
        if ScaleSpec::named(&self.scale).is_none() {
            bail!(
                "experiment {}: scale must be tiny, quick, medium or paper",
                self.name
            );
        }
        Ok(())
    }
}

impl Experiment {
    fn validate_hass(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        for w in &self.workloads {
            if !crate::hass::WORKLOADS.contains(&w.as_str()) {
                bail!(
                    "experiment {}: unknown hass workload '{w}' (one of {})",
                    self.name,
                    crate::hass::WORKLOADS.join(", ")
                );
            }
        }
        for p in &self.policies {
            if !crate::hass::POLICIES.contains(&p.as_str()) {
                bail!(
                    "experiment {}: unknown split policy '{p}' (one of {})",
                    self.name,
                    crate::hass::POLICIES.join(", ")
                );
            }
        }
        if crate::hass::HassScale::named(&self.scale).is_none() {
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
    }
}
