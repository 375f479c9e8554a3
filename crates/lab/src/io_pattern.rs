//! The `io-pattern` experiment's measurement: each engine run's trace replayed through one
//! placement policy, keeping where each write of the run phase landed and which stream the
//! policy gave it. The run phase measures it and keeps it in [`FILE`] beside `results.json`;
//! the report only reads that file.

use crate::experiment::{Experiment, Kind};
use crate::run::EngineRun;
use anyhow::{anyhow, Context, Result};
use placement::policy::PlacementConfig;
use placement::Event;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The file the patterns are kept in, in the run's directory.
pub const FILE: &str = "io-patterns.json";

/// At most this many writes per file kind are kept (evenly thinned): enough for the plot and
/// the swap rates.
const MAX_PER_KIND: usize = 15_000;

/// Writes per file kind label, as (time s, offset MB, stream).
pub type Samples = BTreeMap<String, Vec<(f64, f64, u8)>>;

/// One engine run's run-phase writes and checkpoint commit times (s from the first write).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IoPattern {
    pub workload: String,
    /// The policy whose streams colour the writes.
    pub policy: String,
    pub samples: Samples,
    pub checkpoints: Vec<f64>,
}

/// The policy and stream count an `io-pattern` experiment colours its writes with: its first
/// policy (DSM if it names none) on its first SSD's streams.
fn policy_of(exp: &Experiment) -> (String, u8) {
    let policy = exp
        .policies
        .first()
        .cloned()
        .unwrap_or_else(|| "dsm".into());
    let streams = exp.ssds.first().map(|s| s.streams).unwrap_or(8);
    (policy, streams)
}

/// Replays every engine run's trace and keeps its pattern; for any other kind of experiment,
/// nothing.
pub fn measure(exp: &Experiment, runs: &[EngineRun]) -> Result<Vec<IoPattern>> {
    if exp.kind != Kind::IoPattern {
        return Ok(Vec::new());
    }
    let (policy, streams) = policy_of(exp);
    runs.iter()
        .map(|run| {
            let (samples, checkpoints) = replay(run, &policy, streams, MAX_PER_KIND)
                .with_context(|| format!("replaying {}", run.trace.display()))?;
            Ok(IoPattern {
                workload: run.workload.clone(),
                policy: policy.clone(),
                samples,
                checkpoints,
            })
        })
        .collect()
}

/// Measures the patterns of `runs` and writes them into `out`, for an `io-pattern` experiment.
pub fn record(out: &Path, exp: &Experiment, runs: &[EngineRun]) -> Result<()> {
    if exp.kind != Kind::IoPattern {
        return Ok(());
    }
    let patterns = measure(exp, runs)?;
    std::fs::write(out.join(FILE), serde_json::to_string(&patterns)?)
        .with_context(|| format!("writing {}", out.join(FILE).display()))
}

/// The patterns a run kept in `dir`.
pub fn read(dir: &Path) -> Result<Vec<IoPattern>> {
    let file = dir.join(FILE);
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading {} (an io-pattern run's writes)", file.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))
}

/// Every write of the run phase as (time s, offset MB, stream `policy` gives it) per file kind
/// label, at most `max_per_kind` per kind (evenly thinned), and checkpoint commit times.
fn replay(
    run: &EngineRun,
    policy: &str,
    streams: u8,
    max_per_kind: usize,
) -> Result<(Samples, Vec<f64>)> {
    let pc = PlacementConfig {
        streams,
        ..PlacementConfig::default()
    };
    let mut p = placement::policy::make_policy(policy, &pc).map_err(|e| anyhow!(e))?;
    let mut all: BTreeMap<String, Vec<(f64, f64, u8)>> = BTreeMap::new();
    let mut ckpts = Vec::new();
    let mut t0 = None;
    for (i, ev) in placement::trace::TraceReader::open(&run.trace)?.enumerate() {
        let ev = ev?;
        if i as u64 == run.end_of_load_event {
            p.end_of_load();
        }
        let in_run = i as u64 >= run.end_of_load_event;
        match &ev {
            Event::Write(w) => {
                let stream = p.place(w);
                if in_run {
                    let t = *t0.get_or_insert(w.time_ns);
                    let kind = match (w.file_kind, w.id_index) {
                        (placement::FileKind::Index, true) => "primary index",
                        (placement::FileKind::Index, false) => "secondary index",
                        (k, _) => k.name(),
                    };
                    if kind != "metadata" {
                        all.entry(kind.to_string()).or_default().push((
                            (w.time_ns - t) as f64 / 1e9,
                            w.offset as f64 / (1 << 20) as f64,
                            stream,
                        ));
                    }
                }
            }
            other => {
                p.observe(other);
                if let (Event::CheckpointCommit { time_ns, .. }, true, Some(t)) =
                    (other, in_run, t0)
                {
                    ckpts.push((*time_ns - t) as f64 / 1e9);
                }
            }
        }
    }
    for v in all.values_mut() {
        if v.len() > max_per_kind {
            let step = v.len() as f64 / max_per_kind as f64;
            *v = (0..max_per_kind)
                .map(|k| v[(k as f64 * step) as usize])
                .collect();
        }
    }
    Ok((all, ckpts))
}
