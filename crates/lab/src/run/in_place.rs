//! The compression experiment's runs of the in-place engine (MMAPv1's design, crates/inplace),
//! beside the copy-on-write engine's runs that `run_engine` makes with the same chapter 10
//! functions (`crate::chapter10`): the work, the saved runs and the points.

use super::{self as run, CountingTrace, EngineRun, Lab, Point, Sizing};
use crate::chapter10;
use crate::experiment::{Experiment, ScaleSpec, IN_PLACE};
use anyhow::{anyhow, Result};
use docdb::{DocDb, DocDbConfig};
use indicatif::ProgressBar;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use workload::measure::PhaseResult;

/// One run of the in-place engine.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct InPlaceWork {
    pub workload: String,
    pub cache_share: f64,
    pub seed: u64,
    pub scale: String,
}

impl InPlaceWork {
    fn key(&self) -> String {
        run::slug(&format!(
            "{}-c{}-{IN_PLACE}-s{}-{}",
            self.workload, self.cache_share, self.seed, self.scale
        ))
    }
}

/// The in-place engine's runs an experiment asks for, in order (none unless its `engines`
/// name it).
pub(crate) fn in_place_work(exp: &Experiment) -> Vec<InPlaceWork> {
    if !exp.engines.iter().any(|e| e == IN_PLACE) {
        return Vec::new();
    }
    let mut v = Vec::new();
    for w in &exp.workloads {
        for &cache_share in &exp.cache_shares {
            for &seed in &exp.seeds {
                v.push(InPlaceWork {
                    workload: w.clone(),
                    cache_share,
                    seed,
                    scale: exp.scale.clone(),
                });
            }
        }
    }
    v
}

/// The saved in-place runs behind an experiment's points (after `run_all`).
pub(crate) fn saved_runs(lab: &Lab) -> Result<Vec<EngineRun>> {
    in_place_work(&lab.exp)
        .iter()
        .map(|w| {
            let key = w.key();
            run::saved_run(&saved_path(lab, &key))
                .ok_or_else(|| anyhow!("engine run {key} is not saved"))
        })
        .collect()
}

fn saved_path(lab: &Lab, key: &str) -> std::path::PathBuf {
    lab.out.join("points").join(format!("engine-{key}.json"))
}

/// Every in-place run of the experiment (from disk when done before) and its replays, one
/// run at a time, as points.
pub(crate) fn in_place_points(lab: &Lab, bar: &ProgressBar) -> Result<Vec<Point>> {
    let mut points = Vec::new();
    for w in in_place_work(&lab.exp) {
        let key = w.key();
        let saved = saved_path(lab, &key);
        let r = match run::saved_run(&saved) {
            Some(r) => r,
            None => {
                bar.set_message(format!("{} seed {}: {IN_PLACE} run", w.workload, w.seed));
                let scale = lab.exp.scale_spec(&w.scale).expect("validated");
                let r = run_in_place(&lab.out, &key, &w, &lab.exp, &scale)?;
                std::fs::write(&saved, serde_json::to_string_pretty(&r)?)?;
                r
            }
        };
        let jobs = lab.replay_jobs();
        for dev in lab.replays(&r, &jobs, bar)? {
            // No dirty budget: the pool writes every dirty page back past half the cache.
            points.push(Point {
                dirty_pct: None,
                ..lab.point(&r, dev)
            });
        }
    }
    Ok(points)
}

/// The in-place engine's configuration: the lab's pinned choices that apply to it (no timed
/// write-back, as the copy-on-write runs have no timed checkpoint; the point's seed for the
/// collections' UUIDs), the chapter's ([`configure`]), no compression, a trace to `obs`.
fn in_place_config(db_path: &Path, seed: u64, obs: Arc<CountingTrace>) -> DocDbConfig {
    let mut cfg = DocDbConfig::disk(db_path);
    cfg.engine_kind = engine::EngineKind::Mmapv1;
    cfg.engine.checkpoint_interval = None;
    cfg.engine.observer = Some(obs);
    cfg.uuid_seed = Some(seed);
    for t in [&mut cfg.collection_table, &mut cfg.index_table] {
        t.compressor = engine::Compressor::None;
    }
    chapter10::configure(&mut cfg);
    cfg
}

/// The chapter's insert job and read job on the in-place engine, traced as the copy-on-write
/// runs are (the insert job is the load; there is no run phase).
fn run_in_place(
    out: &Path,
    key: &str,
    w: &InPlaceWork,
    exp: &Experiment,
    scale: &ScaleSpec,
) -> Result<EngineRun> {
    let started = Instant::now();
    let work = run::new_work_dir(out, key)?;
    let db_dir = work.join("db");
    let trace = out.join("traces").join(format!("{key}.trace"));
    let obs = Arc::new(CountingTrace::create(&trace)?);
    let cfg = in_place_config(&db_dir, w.seed, obs.clone());
    let reopen_cfg = cfg.clone();
    let opening = Instant::now();
    let db = DocDb::open(cfg).map_err(|e| anyhow!("opening the lab database: {e}"))?;
    let startup_s = opening.elapsed().as_secs_f64();
    let inserted = chapter10::insert(&db, scale.chapter10_docs)?;
    db.engine().end_of_load();
    let end_of_load_event = obs.events();
    let stats = db.engine().stats();
    let closing = Instant::now();
    db.shutdown()
        .map_err(|e| anyhow!("shutting the lab database down: {e}"))?;
    let shutdown_s = closing.elapsed().as_secs_f64();
    drop(db);
    let db_path = chapter10::disk_use(&db_dir, &|_| true)?;
    let data_files = chapter10::disk_use(&db_dir, &|name| name.starts_with("mmapv1."))?;
    let mut extra = chapter10::measurements(
        [startup_s, inserted.phase.runtime_ms / 1e3, shutdown_s],
        &inserted,
        db_path,
        chapter10::reads(reopen_cfg, scale.chapter10_docs)?,
    );
    for (name, stat) in [
        ("record_bytes_allocated", "recordBytesAllocated"),
        ("value_bytes_allocated", "valueBytesAllocated"),
    ] {
        let v = stats[stat]
            .as_u64()
            .ok_or_else(|| anyhow!("the {IN_PLACE} engine's stats have no {stat}"))?;
        extra.insert(name.into(), v as f64);
    }
    extra.insert(
        "data_files_allocated_bytes".into(),
        data_files.allocated as f64,
    );
    obs.flush_trace();
    extra.extend(run::chapter10_written(&trace)?);
    let shares = run::write_shares(&trace, end_of_load_event)?;
    let _ = std::fs::remove_dir_all(&work);
    if let Some(parent) = work.parent() {
        // Removed only when empty (another run may share it).
        let _ = std::fs::remove_dir(parent);
    }
    Ok(EngineRun {
        key: key.to_string(),
        trace_version: run::TRACE_VERSION,
        engine: IN_PLACE.into(),
        workload: w.workload.clone(),
        seed: w.seed,
        cache_share: w.cache_share,
        // Its only page size: the index's buckets (8 KiB).
        leaf_kb: 8,
        compressor: "none".into(),
        allocation: IN_PLACE_ALLOCATION.into(),
        dirty_pct: IN_PLACE_DIRTY_PCT,
        scale_name: w.scale.clone(),
        scale: ScaleSpec {
            threads: 1,
            ..scale.clone()
        },
        direct_io: "none".into(),
        // The device is sized from what the data files hold written.
        sizing: Sizing::new(data_files.allocated, exp, w.cache_share),
        load: inserted.phase,
        run: PhaseResult::default(),
        trace,
        end_of_load_event,
        run_write_bytes: shares.by_file.values().sum(),
        events: obs.events(),
        // The data files at their full size: MMAPv1 allocated them whole (it wrote zeros).
        db_bytes: data_files.apparent,
        write_bytes_by_file: shares.by_file,
        write_bytes_by_page: shares.by_page,
        checkpoints: obs.checkpoints(),
        checkpoint_trigger: None,
        intervals: None,
        leaf_changes: None,
        run_checkpoints: shares.checkpoints,
        interval_bytes_mean: shares.interval_bytes_mean,
        wall_s: started.elapsed().as_secs_f64(),
        extra,
    })
}

/// The in-place engine's allocation, as results name it: records in place, padded to a power
/// of two.
pub const IN_PLACE_ALLOCATION: &str = "in-place";

/// Its write-back, as a `[target, trigger]` budget: every dirty page once they pass half the
/// cache.
pub const IN_PLACE_DIRTY_PCT: [u8; 2] = [0, 50];
