//! `inplace-vs-cow`: in place against out of place on flash (issue 37). The stream workloads
//! run on the copy-on-write engine with flash mode's engine settings (sweep allocation, 50/80
//! dirty budget) and on the in-place engine (MMAPv1's design, `crates/inplace`); each trace is
//! replayed through the placement policies on devices the engine's files fill from 20 % to
//! 90 %.
//!
//! What is held equal between the two designs, and how:
//! - **the workload**: the same operations from the same seed, one client thread;
//! - **the cache**: the in-place engine's page pool gets the bytes of the copy-on-write run's
//!   cache (`cache_share` of the loaded data). It cannot be resized, so it loads with it too;
//! - **the checkpoint interval in operations**: the copy-on-write engine checkpoints at the
//!   reference run's interval (run.rs, "Equal intervals"); the in-place engine writes its dirty
//!   pages back after as many operations. Operations are counted as the workload's store calls
//!   (a LinkBench request makes one or more), converted with the calls per operation of a
//!   counting pass on the in-memory engine, whose answers, and so whose calls, are the same;
//! - **the device fill**: for each engine run, the peak of the pages its files occupy over the
//!   trace (load and run, as the device's file system maps them: pages are allocated when first
//!   written) ÷ the device's logical capacity — `flashdoc placement replay --size-to-trace
//!   --device-fill F`'s definition. Each design's device is sized to its own files, so a
//!   fill compares the devices' garbage collection under equal pressure; the files' size
//!   against the loaded data is reported beside it.
//!
//! What is not equal, by design: the in-place engine writes every dirty page back once they
//! pass half its cache (its own rule), its journal is group-committed every 100 ms of wall time
//! (MMAPv1's `commitIntervalMs`), and its clean pages leave the pool in hash order, so its
//! trace's journal writes and reads are not a function of the seed alone; its data pages are.

use crate::experiment::{
    Experiment, ScaleSpec, SsdSpec, COW_ALLOCATION, DESIGNS, FLASH_MODE_DIRTY_PCT,
};
use crate::run::{self, Clients, DeviceRun, EngineRun, EngineWork, Lab, Point, Sizing};
use anyhow::{anyhow, Context, Result};
use docdb::{DocDb, DocDbConfig};
use placement::{Event, Observer, TraceObserver};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use workload::store::InProc;

mod pace;
mod report;

/// The copy-on-write engine (flashdoc's own) with flash mode's engine settings.
pub const COPY_ON_WRITE: &str = DESIGNS[0];
/// The in-place engine (`storage.engine: mmapv1`).
pub const IN_PLACE: &str = DESIGNS[1];
// How the in-place engine's runs are named in their points' `allocation`, and its write-back
// budget: the compression experiment's (`run::in_place`).
use crate::run::{IN_PLACE_ALLOCATION, IN_PLACE_DIRTY_PCT};

/// Runs (or resumes) the experiment into `out` and writes its results and report.
pub fn run(exp: Experiment, scale: Option<&str>, out: &Path, quiet: bool) -> Result<PathBuf> {
    let lab = Lab::new(out, exp, scale, quiet)?;
    let mut points = Vec::new();
    let mut runs = Vec::new();
    for w in lab.exp.workloads.clone() {
        for &seed in &lab.exp.seeds {
            let pair = EnginePair::run(&lab, &w, seed)?;
            for design in &lab.exp.designs {
                let r = pair.of(design);
                points.extend(replays(&lab, design, r)?);
                runs.push(r.clone());
            }
        }
    }
    run::write_results(out, &lab.exp, &lab.scale, &points, &runs)?;
    report::write(out, &lab, &points, &runs)
}

/// One workload and seed on both designs.
struct EnginePair {
    cow: EngineRun,
    in_place: EngineRun,
}

impl EnginePair {
    fn run(lab: &Lab, workload: &str, seed: u64) -> Result<EnginePair> {
        let e = &lab.exp;
        let w = EngineWork {
            workload: workload.into(),
            cache_share: e.cache_shares[0],
            leaf_kb: e.leaf_kb[0],
            compressor: "none".into(),
            allocation: COW_ALLOCATION.into(),
            dirty_pct: FLASH_MODE_DIRTY_PCT,
            seed,
            scale: e.scale.clone(),
        };
        let bar = indicatif::ProgressBar::hidden();
        if !lab.quiet {
            eprintln!("{workload} seed {seed}: copy-on-write engine runs");
        }
        let cow = lab.engine_run(&w, &bar)?;
        let reference = lab.engine_run(&w.reference(), &bar)?;
        let intervals = reference
            .intervals
            .ok_or_else(|| anyhow!("the reference run {} has no intervals", reference.key))?;
        let ops_per_interval = intervals.journal_bytes_per_checkpoint()? as f64
            / intervals.journal_bytes_per_op.max(1) as f64;
        if !lab.quiet {
            eprintln!("{workload} seed {seed}: in-place engine run");
        }
        let calls = pace::count_calls(lab, &w)?;
        let every = (ops_per_interval * calls.per_op()).round().max(1.0) as u64;
        let in_place = in_place_run(lab, &w, &cow.sizing, every)?;
        Ok(EnginePair { cow, in_place })
    }

    fn of(&self, design: &str) -> &EngineRun {
        if design == IN_PLACE {
            &self.in_place
        } else {
            &self.cow
        }
    }
}

/// Every (policy, fill) replay of one engine run, each saved and reused on a resumed run.
fn replays(lab: &Lab, design: &str, r: &EngineRun) -> Result<Vec<Point>> {
    let peak = peak_file_pages(r)?;
    let e = &lab.exp;
    let ssd = &held_block(&e.ssds[0], peak, &e.device_fills);
    let trim = &e.trims[0];
    let mut points = Vec::new();
    for policy in &e.policies {
        for &fill in &e.device_fills {
            let capacity = device_bytes(peak, fill);
            let key = format!(
                "replay-{}-{policy}-fill{fill}-{}-{}-p{}-w{}",
                r.key,
                ssd.label(),
                trim.label(),
                e.precondition,
                e.warmup_capacities
            );
            let saved = lab.out.join("points").join(format!("{key}.json"));
            let device = match std::fs::read_to_string(&saved)
                .ok()
                .and_then(|t| serde_json::from_str::<DeviceRun>(&t).ok())
            {
                Some(d) => d,
                None => {
                    let d = run::replay_run(r, policy, trim, ssd, e, capacity)
                        .with_context(|| key.clone())?;
                    std::fs::write(&saved, serde_json::to_string_pretty(&d)?)?;
                    d
                }
            };
            points.push(point(lab, design, r, fill, device));
        }
    }
    Ok(points)
}

/// The device whose logical capacity the engine's files fill to `fill` at their peak (at
/// least [`MIN_DEVICE_PAGES`]).
pub fn device_bytes(peak_file_pages: u64, fill: f64) -> u64 {
    assert!(fill > 0.0 && fill < 1.0, "a fill in (0, 1)");
    let pages = (peak_file_pages as f64 / fill).ceil() as u64;
    pages.max(MIN_DEVICE_PAGES) * ssd::PAGE_BYTES
}

/// The `ssds` entry with its erase block held across a run's fills: the lab's block
/// (`run::pages_per_block`, at least 1 024 blocks) for the device of the fullest fill, the
/// smallest. Left to the lab, the block would shrink with the device (128 pages at 20 % to 32
/// at 90 % on YCSB), and a smaller block alone lowered `none`'s WAF (docs/placement.md). An
/// entry that sets its block or block count keeps it.
pub fn held_block(ssd: &SsdSpec, peak_file_pages: u64, fills: &[f64]) -> SsdSpec {
    if ssd.pages_per_block.is_some() || ssd.erase_units.is_some() {
        return ssd.clone();
    }
    let fullest = fills.iter().copied().fold(f64::MIN, f64::max);
    let pages = device_bytes(peak_file_pages, fullest) / ssd::PAGE_BYTES;
    SsdSpec {
        pages_per_block: Some(run::pages_per_block(pages)),
        ..ssd.clone()
    }
}

/// The smallest device replayed: 64 erase blocks of 16 pages. Below the stream experiments'
/// 64 MB floor so that the tiny scale's files (a few MB) still fill their device as asked.
pub const MIN_DEVICE_PAGES: u64 = 1024;

/// The peak of the pages the run's files occupy over its trace as the replay plays it (no
/// hole punched: TRIM off): the load, then the run phase twice, since a pass that begins where
/// the last one ended can hold one more journal file than the first (later passes repeat it).
pub fn peak_file_pages(r: &EngineRun) -> Result<u64> {
    let events = placement::sim::read_events(&r.trace).map_err(|e| anyhow!("{e}"))?;
    let eol = (r.end_of_load_event as usize).min(events.len());
    let replayed = events.iter().chain(&events[eol..]);
    let extent = placement::sim::scan_events(replayed.map(Ok::<_, anyhow::Error>), false)?;
    Ok(extent.peak_file_pages)
}

fn point(lab: &Lab, design: &str, r: &EngineRun, fill: f64, device: DeviceRun) -> Point {
    let mut p = lab.point(r, device);
    p.device_fill = fill;
    p.allocation = if design == IN_PLACE {
        IN_PLACE_ALLOCATION.into()
    } else {
        COW_ALLOCATION.into()
    };
    p
}

/// Counts events, and the checkpoints among them, on their way to the trace file.
struct CountedTrace {
    inner: TraceObserver,
    events: AtomicU64,
    commits: AtomicU64,
}

impl Observer for CountedTrace {
    fn observe(&self, event: &Event) {
        self.events.fetch_add(1, Ordering::Relaxed);
        if matches!(event, Event::CheckpointCommit { .. }) {
            self.commits.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.observe(event);
    }
    fn flush(&self) {
        self.inner.flush();
    }
}

/// The in-place engine's database for one run: the copy-on-write run's cache, no timed
/// write-back (the lab paces it), MMAPv1's 100 ms group commit, uncompressed tables.
fn in_place_config(dir: &Path, seed: u64, cache_bytes: u64, obs: Arc<CountedTrace>) -> DocDbConfig {
    let mut cfg = DocDbConfig::disk(dir);
    cfg.engine_kind = engine::EngineKind::Mmapv1;
    engine::flash_mode_defaults(engine::FlashMode::Off).apply(
        &mut cfg.engine,
        &mut cfg.collection_table,
        &mut cfg.index_table,
    );
    cfg.engine.cache_size = cache_bytes;
    cfg.engine.checkpoint_interval = None;
    cfg.engine.observer = Some(obs);
    cfg.collection_table.compressor = engine::Compressor::None;
    cfg.index_table.compressor = engine::Compressor::None;
    cfg.uuid_seed = Some(seed);
    cfg
}

/// The in-place engine's run of `w`'s workload, its dirty pages written back every
/// `calls_per_write_back` store calls of the run phase (and whenever they pass half its cache).
fn in_place_run(
    lab: &Lab,
    w: &EngineWork,
    cow: &Sizing,
    calls_per_write_back: u64,
) -> Result<EngineRun> {
    let key = run_key(w);
    let saved = lab.out.join("points").join(format!("engine-{key}.json"));
    if let Some(r) = run::saved_run(&saved) {
        return Ok(r);
    }
    let started = Instant::now();
    let work = run::new_work_dir(&lab.out, &key)?;
    let trace = lab.out.join("traces").join(format!("{key}.trace"));
    let obs = Arc::new(CountedTrace {
        inner: TraceObserver::create(&trace)
            .with_context(|| format!("creating {}", trace.display()))?,
        events: AtomicU64::new(0),
        commits: AtomicU64::new(0),
    });
    let db_dir = work.join("db");
    let db = DocDb::open(in_place_config(
        &db_dir,
        w.seed,
        cow.cache_bytes,
        obs.clone(),
    ))
    .map_err(|e| anyhow!("opening the in-place database: {e}"))?;
    let pace = Arc::new(pace::Pace::new(db.clone(), calls_per_write_back));
    let scale = lab.exp.scale_spec(&w.scale).expect("validated");
    let (load, ran, eol) = run::drive(
        |name| {
            Ok(pace::Paced::new(
                InProc::new(db.clone(), name),
                pace.clone(),
            ))
        },
        w,
        &scale,
        Clients::OneDeterministic,
        || {
            db.engine()
                .checkpoint()
                .map_err(|e| anyhow!("write-back after load: {e}"))?;
            db.engine().end_of_load();
            pace.arm();
            Ok(Some(obs.events.load(Ordering::Relaxed)))
        },
    )?;
    let write_backs = pace.write_backs();
    db.shutdown()
        .map_err(|e| anyhow!("shutting the in-place database down: {e}"))?;
    drop(db);
    obs.flush();
    let db_bytes = data_file_bytes(&db_dir)?;
    let _ = std::fs::remove_dir_all(&work);
    let shares = run::write_shares(&trace, eol)?;
    let r = EngineRun {
        key,
        engine: crate::experiment::IN_PLACE.into(),
        trace_version: run::TRACE_VERSION,
        workload: w.workload.clone(),
        seed: w.seed,
        cache_share: w.cache_share,
        leaf_kb: w.leaf_kb,
        compressor: "none".into(),
        allocation: IN_PLACE_ALLOCATION.into(),
        dirty_pct: IN_PLACE_DIRTY_PCT,
        scale_name: w.scale.clone(),
        scale: ScaleSpec {
            threads: 1,
            ..scale
        },
        direct_io: "none".into(),
        // The copy-on-write run's: the same loaded data, and the cache both were given (the
        // replays size each design's device from its own trace, `device_bytes`).
        sizing: cow.clone(),
        load,
        run: ran,
        trace,
        end_of_load_event: eol,
        run_write_bytes: shares.by_file.values().sum(),
        events: obs.events.load(Ordering::Relaxed),
        db_bytes,
        write_bytes_by_file: shares.by_file,
        write_bytes_by_page: shares.by_page,
        checkpoints: obs.commits.load(Ordering::Relaxed),
        checkpoint_trigger: None,
        intervals: None,
        leaf_changes: None,
        run_checkpoints: shares.checkpoints,
        interval_bytes_mean: shares.interval_bytes_mean,
        wall_s: started.elapsed().as_secs_f64(),
        extra: BTreeMap::from([
            ("calls_per_write_back".into(), calls_per_write_back as f64),
            ("paced_write_backs".into(), write_backs as f64),
        ]),
    };
    std::fs::write(&saved, serde_json::to_string_pretty(&r)?)?;
    Ok(r)
}

/// The in-place run's key (its settings beside the copy-on-write run's).
fn run_key(w: &EngineWork) -> String {
    format!(
        "{}-c{}-inplace-s{}-{}",
        w.workload, w.cache_share, w.seed, w.scale
    )
}

/// Bytes the in-place engine's data files hold on disk (they are sparse: pages never written
/// take no space).
fn data_file_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut n = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with("mmapv1.") {
            n += e.metadata()?.blocks() * 512;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests;
