//! Running an experiment: one engine run per (workload, cache, leaf size, compressor) that
//! captures its I/O as an event trace, then one replay of that trace per (policy, TRIM, SSD)
//! on a fresh, aged simulated device. Every finished step is saved as JSON under
//! `OUT/points/`, so a resumed run skips it.
//!
//! Replay, not the device in the loop, is what the lab records ("mode": "trace-replay" in every
//! result): the engine's I/O does not depend on the policy (streams change where data lands
//! on flash, not what the engine writes), so one engine run serves every policy and every
//! device, and all policies see exactly the same writes.

mod in_place;
pub use in_place::{IN_PLACE_ALLOCATION, IN_PLACE_DIRTY_PCT};

use crate::experiment::{
    Experiment, Kind, ScaleSpec, SsdSpec, TrimSpec, COPY_ON_WRITE, ENGINE_DIRTY_PCT,
    JOURNAL_FILE_SHARE,
};
use anyhow::{anyhow, bail, Context, Result};
use docdb::{DocDb, DocDbConfig};
use engine::{Compressor, Reconfigure, Schedule, TableConfig};
use indicatif::{ProgressBar, ProgressStyle};
use placement::policy::PlacementConfig;
use placement::sim::{ReplayConfig, RunLoops, TraceReplay, TrimConfig};
use placement::{Event, Observer, TraceObserver, TrimWhen};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::measure::{PhaseResult, Progress};
use workload::store::{InProc, Store};

/// What one engine run measured on the host, and the device it was sized for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineRun {
    pub key: String,
    /// [`TRACE_VERSION`] of the code that made the run (1 before versions were kept).
    #[serde(default = "first_trace_version")]
    pub trace_version: u32,
    /// The storage engine (`experiment::COPY_ON_WRITE` unless `mmapv1`, the in-place one).
    #[serde(default = "copy_on_write", skip_serializing_if = "is_copy_on_write")]
    pub engine: String,
    pub workload: String,
    /// Workload seed.
    pub seed: u64,
    /// Run-phase cache ÷ loaded database (the experiment's setting).
    pub cache_share: f64,
    pub leaf_kb: u32,
    pub compressor: String,
    #[serde(default = "best")]
    pub allocation: String,
    /// Eviction's dirty budget, `[target, trigger]` percent of the cache.
    #[serde(default = "engine_dirty_pct")]
    pub dirty_pct: [u8; 2],
    #[serde(default)]
    pub scale_name: String,
    pub scale: ScaleSpec,
    /// The engine's `direct_io` (`none`, `data`, `log`, `data,log`). The trace is taken per
    /// write call at the engine's I/O seam (the shim's, for WiredTiger), before any page cache,
    /// whatever this is.
    #[serde(default = "buffered")]
    pub direct_io: String,
    /// The device and the engine settings derived from the loaded database (see
    /// [`Sizing`]).
    pub sizing: Sizing,
    pub load: PhaseResult,
    pub run: PhaseResult,
    pub trace: PathBuf,
    /// The event index where the run phase begins (end of load).
    pub end_of_load_event: u64,
    /// Bytes written in the run phase (every file).
    #[serde(default)]
    pub run_write_bytes: u64,
    pub events: u64,
    /// Bytes of the collection and index files at the end.
    pub db_bytes: u64,
    /// Bytes written in the run phase by file kind (collection, primary index, secondary
    /// index, journal, metadata) and by page kind.
    pub write_bytes_by_file: BTreeMap<String, u64>,
    pub write_bytes_by_page: BTreeMap<String, u64>,
    pub checkpoints: u64,
    /// What began the run phase's checkpoints (`None` for another engine than flashdoc's).
    #[serde(default)]
    pub checkpoint_trigger: Option<CheckpointTrigger>,
    /// The run phase's intervals in terms that do not depend on the engine (`None` for another
    /// engine than flashdoc's, and for a run saved before they were measured).
    #[serde(default)]
    pub intervals: Option<RunIntervals>,
    /// The run phase's changes to leaves that were clean and to leaves already dirty (`None`
    /// for another engine than flashdoc's, and for a run saved before they were counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_changes: Option<LeafChanges>,
    /// Checkpoints begun in the run phase, and the mean bytes written from one begin to the
    /// next (every file: tables, journal, metadata).
    pub run_checkpoints: u64,
    pub interval_bytes_mean: f64,
    pub wall_s: f64,
    /// Workload-specific measurements (the compression experiment's insert, cold-read and
    /// warm-read seconds).
    #[serde(default)]
    pub extra: BTreeMap<String, f64>,
}

/// Key changes (inserts, updates, deletes) the engine applied to leaves in the run phase: to a
/// clean leaf, which the change dirtied, or to a dirty one, where the dirty budget absorbed it
/// (one write of the leaf serves all its changes until it is written). Their shares say how
/// much of the workload the cache's dirty budget absorbs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeafChanges {
    pub to_clean: u64,
    pub to_dirty: u64,
}

impl LeafChanges {
    fn from_stats(db: &DocDb) -> Result<LeafChanges> {
        let stats = db.engine().stats();
        let get = |name: &str| {
            stats["cache"][name]
                .as_u64()
                .ok_or_else(|| anyhow!("the engine's stats have no cache.{name}"))
        };
        Ok(LeafChanges {
            to_clean: get("leaf_changes_to_clean")?,
            to_dirty: get("leaf_changes_to_dirty")?,
        })
    }

    fn since(self, start: LeafChanges) -> LeafChanges {
        assert!(self.to_clean >= start.to_clean && self.to_dirty >= start.to_dirty);
        LeafChanges {
            to_clean: self.to_clean - start.to_clean,
            to_dirty: self.to_dirty - start.to_dirty,
        }
    }

    /// The share of changes that landed on a leaf already dirty.
    pub fn absorbed_share(&self) -> f64 {
        self.to_dirty as f64 / (self.to_clean + self.to_dirty).max(1) as f64
    }
}

fn engine_dirty_pct() -> [u8; 2] {
    ENGINE_DIRTY_PCT
}

fn copy_on_write() -> String {
    COPY_ON_WRITE.into()
}

fn is_copy_on_write(engine: &str) -> bool {
    engine == COPY_ON_WRITE
}

/// What begins a run phase's checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointTrigger {
    /// Every this many bytes written to any file: the reference engine's trigger
    /// ([`Sizing::checkpoint_every_bytes`], a share of the device).
    WrittenBytes(u64),
    /// Every this many bytes appended to the journal: the reference run's mean interval, so
    /// that an engine which writes less per operation does not get longer intervals, and
    /// fewer checkpoints, for it (docs/lab.md, "Equal intervals").
    JournalBytes(u64),
}

/// A run phase's checkpoint intervals measured in the journal (whose bytes are a function of
/// the operations alone: every engine of a point logs the same records): the checkpoints its
/// trigger began (the shutdown's is not one), and the journal bytes appended from the begin of
/// the end-of-load checkpoint to the begin of the last of them, that is over exactly those
/// intervals. And the journal bytes one operation appends, on average over the run phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIntervals {
    pub journal_bytes: u64,
    pub checkpoints: u64,
    pub journal_bytes_per_op: u64,
}

impl RunIntervals {
    /// The journal trigger that gives another engine this run's intervals: the mean interval,
    /// less half an operation's record, since a trigger fires at the first operation past it
    /// (half a record past on average), so that no shortfall builds up over the intervals.
    pub fn journal_bytes_per_checkpoint(&self) -> Result<u64> {
        if self.checkpoints == 0 || self.journal_bytes == 0 {
            bail!(
                "the reference run's checkpoints cannot be matched: it began {} checkpoints over {} journal bytes",
                self.checkpoints,
                self.journal_bytes
            );
        }
        let interval = self.journal_bytes / self.checkpoints;
        Ok(interval
            .saturating_sub(self.journal_bytes_per_op / 2)
            .max(1))
    }
}

/// The simulated device and the engine settings of one engine run, all derived from the
/// database the load phase left (its collection and index files after the end-of-load
/// checkpoint) and the experiment's ratios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sizing {
    /// Live bytes of the collection and index files after the end-of-load checkpoint (their
    /// size less their free extents): the data, whatever the allocator left free around it.
    pub db_load_bytes: u64,
    /// The device's logical capacity: `db_load_bytes / device_fill`, in whole 4 KB pages.
    pub capacity_bytes: u64,
    /// The run phase's cache: `cache_share × db_load_bytes` (at least 1 MB).
    pub cache_bytes: u64,
    /// The written-bytes checkpoint trigger: `checkpoint_share × capacity_bytes`.
    pub checkpoint_every_bytes: u64,
    /// Journal files: [`journal_file_bytes`].
    pub journal_file_bytes: u64,
}

impl Sizing {
    pub fn new(db_load_bytes: u64, exp: &Experiment, cache_share: f64) -> Sizing {
        let page = ssd::PAGE_BYTES;
        let capacity = ((db_load_bytes as f64 / exp.device_fill / page as f64).ceil() as u64)
            .max(16 * 1024)
            * page;
        Sizing {
            db_load_bytes,
            capacity_bytes: capacity,
            cache_bytes: ((db_load_bytes as f64 * cache_share) as u64).max(1 << 20),
            checkpoint_every_bytes: ((capacity as f64 * exp.checkpoint_share) as u64).max(page),
            journal_file_bytes: journal_file_bytes(capacity),
        }
    }
}

/// The smallest journal file the lab gives an engine: 32 of the journal's 256 KiB write slots.
/// In a buffered journal layout each file's header page is written when the file is created
/// and again by its first write, and the older copy stays valid on an aged device until its
/// address is reused: one page in 25 600 on the seeds' 100 MB files, but one in 236 on a medium
/// device's scaled files (0.96 MB), where it cost 1.5 % of the device's write amplification
/// (docs/placement.md, "The journal's write size"). At 8 MiB it is one page in 2 048. The
/// direct-I/O layout the lab's engines use never rewrites the header block; real WiredTiger
/// under the shim (`realwt`) writes its journal buffered.
pub const JOURNAL_FILE_MIN_BYTES: u64 = 32 * engine::journal::SLOT_BYTES;

/// Journal file size on a device of `capacity_bytes`: WiredTiger's 100 MB files on the seeds'
/// 256 GB drive, scaled, but at least [`JOURNAL_FILE_MIN_BYTES`] (and at most an eighth of the
/// device, for the tiny scale's 64 MB device).
pub fn journal_file_bytes(capacity_bytes: u64) -> u64 {
    let scaled = (capacity_bytes as f64 * JOURNAL_FILE_SHARE) as u64;
    scaled
        .max(JOURNAL_FILE_MIN_BYTES)
        .min(capacity_bytes / 8)
        .clamp(engine::journal::MIN_FILE_MAX, 100 << 20)
}

/// What one replay measured on the simulated device.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceRun {
    /// [`TRACE_VERSION`] of the engine run replayed (1 before versions were kept).
    #[serde(default = "first_trace_version")]
    pub trace_version: u32,
    pub policy: String,
    pub trim: TrimSpec,
    /// The TRIM batch in extents on this device (`trim.batch` scaled to its capacity).
    pub trim_batch_extents: Option<usize>,
    pub ssd: SsdSpec,
    pub waf: f64,
    /// Flash page programs of the run phase: host pages plus GC copies.
    pub flash_write_pages: u64,
    /// Flash page writes per run-phase operation (host bytes × WAF ÷ operations, in 4 KB
    /// pages): what the engine and the policy together cost the flash.
    pub flash_writes_per_op: f64,
    pub gc_copies: u64,
    pub erases: u64,
    pub erase_min: u64,
    pub erase_mean: f64,
    pub erase_max: u64,
    pub host_write_pages: u64,
    /// Device time to absorb the run phase's I/O at the queue depth (closed loop), s.
    pub device_s: f64,
    pub device_mb_s: f64,
    pub write_p99_us: f64,
    pub read_p99_us: f64,
    /// Run-phase operations per second of device time: the throughput if the device were
    /// the bottleneck, as it was on the seeds' small-cache runs.
    pub modeled_ops_s: f64,
    pub logical_gib: f64,
    pub trimmed_bytes: u64,
    /// TRIM commands the device received in the run phase, and the device time they took
    /// (queue drains included).
    pub trim_commands: u64,
    pub trim_device_s: f64,
    /// Passes of the run phase replayed (the last one measured).
    #[serde(default = "one_pass")]
    pub run_loops: u32,
    pub replay_wall_s: f64,
    /// The measured pass per stream: host pages written and GC copies of pages written on
    /// it (empty in runs saved before it was recorded).
    #[serde(default)]
    pub streams: Vec<StreamPages>,
}

/// One stream's pages in the measured pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamPages {
    pub stream: u32,
    pub host_pages: u64,
    /// GC copies of pages this stream wrote.
    pub gc_pages: u64,
}

fn one_pass() -> u32 {
    1
}

fn buffered() -> String {
    "none".into()
}

fn best() -> String {
    "best".into()
}

/// One result row: an engine run and one replay of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    pub experiment: String,
    pub mode: String,
    #[serde(default)]
    pub scale: String,
    pub workload: String,
    pub seed: u64,
    pub cache_share: f64,
    pub leaf_kb: u32,
    pub compressor: String,
    pub allocation: String,
    /// The engine run's dirty budget, `[target, trigger]` (`None` in points saved before it
    /// was kept: the experiment's `dirty_pct` of the allocation, `summary::with_budgets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_pct: Option<[u8; 2]>,
    pub policy: String,
    pub trim: String,
    pub ssd: String,
    pub device_fill: f64,
    pub host_ops_s: f64,
    pub host_p50_us: f64,
    pub host_p99_us: f64,
    pub load_docs_s: f64,
    pub db_mb: f64,
    pub device: DeviceRun,
}

/// Counts events on their way to the trace file (the end-of-load index is taken from it).
pub(crate) struct CountingTrace {
    inner: TraceObserver,
    count: AtomicU64,
    checkpoints: AtomicU64,
}

impl CountingTrace {
    pub(crate) fn create(trace: &Path) -> Result<CountingTrace> {
        Ok(CountingTrace {
            inner: TraceObserver::create(trace)
                .with_context(|| format!("creating {}", trace.display()))?,
            count: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
        })
    }
    /// Events so far.
    pub(crate) fn events(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
    /// Checkpoints committed so far.
    pub(crate) fn checkpoints(&self) -> u64 {
        self.checkpoints.load(Ordering::Relaxed)
    }
    pub(crate) fn flush_trace(&self) {
        self.inner.flush();
    }
}

impl Observer for CountingTrace {
    fn observe(&self, event: &Event) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if matches!(event, Event::CheckpointCommit { .. }) {
            self.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.observe(event);
    }
    fn flush(&self) {
        self.inner.flush();
    }
}

pub struct Lab {
    pub out: PathBuf,
    pub exp: Experiment,
    pub scale: ScaleSpec,
    pub quiet: bool,
    /// One lock per engine run key: a run and the runs matched to it may be asked for on two
    /// threads at once, and must run once.
    running: parking_lot::Mutex<BTreeMap<String, Arc<parking_lot::Mutex<()>>>>,
}

pub(crate) fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Lab {
    pub fn new(out: &Path, exp: Experiment, scale_name: Option<&str>, quiet: bool) -> Result<Lab> {
        let mut exp = exp;
        if let Some(s) = scale_name {
            exp.scale = s.to_string();
        }
        exp.validate()?;
        let scale = exp.scale_spec(&exp.scale).expect("validated");
        std::fs::create_dir_all(out.join("points"))
            .with_context(|| format!("creating {}", out.display()))?;
        std::fs::create_dir_all(out.join("traces"))?;
        let y = serde_yaml::to_string(&exp)?;
        std::fs::write(out.join("experiment.yaml"), y)?;
        Ok(Lab {
            out: out.to_path_buf(),
            exp,
            scale,
            quiet,
            running: Default::default(),
        })
    }

    fn engine_key(&self, w: &EngineWork) -> String {
        let e = &self.exp;
        let mut alloc = match w.allocation.as_str() {
            "sweep" => format!("sweep{}", e.sweep_reserve_pct),
            a => a.to_string(),
        };
        if w.dirty_pct != ENGINE_DIRTY_PCT {
            alloc += &format!("-d{}.{}", w.dirty_pct[0], w.dirty_pct[1]);
        }
        if !w.is_reference() {
            alloc += "-ckjournal";
        }
        if let Some(cap) = e.linkbench_degree_cap {
            if w.workload.starts_with("linkbench-") {
                alloc += &format!("-dc{cap}");
            }
        }
        if let Some(classes) = e.ycsb_key_classes {
            if w.workload.starts_with("ycsb-") {
                alloc += &format!("-kc{classes}");
            }
        }
        if let Some(classes) = e.linkbench_id_classes {
            if w.workload.starts_with("linkbench-") {
                alloc += &format!("-ic{classes}");
            }
        }
        slug(&format!(
            "{}-c{}-l{}-{}-{}-f{}-k{}-r{}-s{}-{}",
            w.workload,
            w.cache_share,
            w.leaf_kb,
            w.compressor,
            alloc,
            e.device_fill,
            e.checkpoint_share,
            e.run_factor,
            w.seed,
            w.scale
        ))
    }

    /// The engine runs behind the points, in `engine_work` order (after `run_all`): not the
    /// reference runs only matched against, nor runs of other settings in the same directory.
    pub fn engine_runs(&self) -> Result<Vec<EngineRun>> {
        let mut runs = self
            .engine_work()
            .iter()
            .map(|w| {
                let key = self.engine_key(w);
                saved_run(&self.out.join("points").join(format!("engine-{key}.json")))
                    .ok_or_else(|| anyhow!("engine run {key} is not saved"))
            })
            .collect::<Result<Vec<_>>>()?;
        runs.extend(in_place::saved_runs(self)?);
        Ok(runs)
    }

    /// The scales the experiment runs at.
    fn scales(&self) -> Vec<String> {
        if self.exp.scales.is_empty() {
            vec![self.exp.scale.clone()]
        } else {
            self.exp.scales.clone()
        }
    }

    /// The engine runs the experiment needs, in order.
    fn engine_work(&self) -> Vec<EngineWork> {
        let e = &self.exp;
        let mut v = Vec::new();
        if !e.engines.iter().any(|x| x == COPY_ON_WRITE) {
            return v;
        }
        for scale in self.scales() {
            for w in &e.workloads {
                for &cache_share in &e.cache_shares {
                    for &leaf_kb in &e.leaf_kb {
                        for comp in &e.compressors {
                            let engines = e
                                .allocations
                                .iter()
                                .flat_map(|a| e.budgets_of(a).into_iter().map(move |d| (a, d)));
                            for (alloc, dirty_pct) in engines {
                                for &seed in &e.seeds {
                                    v.push(EngineWork {
                                        workload: w.clone(),
                                        cache_share,
                                        leaf_kb,
                                        compressor: comp.clone(),
                                        allocation: alloc.clone(),
                                        dirty_pct,
                                        seed,
                                        scale: scale.clone(),
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        v
    }

    /// Runs every point not already done and returns all points, in `engine_work` order.
    ///
    /// Engine runs go on as many threads as the machine has cores, each followed by its
    /// replays: an engine run is one thread on the inline schedule, and its trace does not
    /// depend on what else the machine runs (docs/lab.md, "The schedule";
    /// `tests/deterministic.rs`), so running two at once changes every point's host timing
    /// columns and none of its flash figures.
    pub fn run_all(&self) -> Result<Vec<Point>> {
        let e = &self.exp;
        let work = self.engine_work();
        let runs = work.len() + in_place::in_place_work(e).len();
        let replay_total = runs * e.policies.len() * e.trims.len() * e.ssds.len();
        let bar = self.bar(replay_total as u64, "points");
        let order = schedule(&work);
        let scheduled: Vec<&EngineWork> = order.iter().map(|&i| &work[i]).collect();
        // The compression experiment measures the host: its engine runs go one at a time.
        let workers = if e.kind == Kind::Compression {
            1
        } else {
            cores()
        };
        let results = in_parallel(workers, &scheduled, |w| self.engine_points(w, &bar));
        let in_place = in_place::in_place_points(self, &bar);
        bar.finish_and_clear();
        // Back into `engine_work` order. After an error the items not begun are `None`, and
        // the error is returned.
        let mut in_work_order: Vec<_> = order.into_iter().zip(results).collect();
        in_work_order.sort_by_key(|&(i, _)| i);
        let mut points = Vec::new();
        for (_, r) in in_work_order {
            if let Some(r) = r {
                points.extend(r?);
            }
        }
        points.extend(in_place?);
        Ok(points)
    }

    /// One engine run and every replay of it.
    fn engine_points(&self, w: &EngineWork, bar: &ProgressBar) -> Result<Vec<Point>> {
        let run = self.engine_run(w, bar)?;
        let jobs = self.replay_jobs();
        bar.set_message(format!(
            "{} seed {}: {} replays",
            w.workload,
            w.seed,
            jobs.len()
        ));
        Ok(self
            .replays(&run, &jobs, bar)?
            .into_iter()
            .map(|dev| self.point(&run, dev))
            .collect())
    }

    /// Every (policy, TRIM condition, device) an engine run is replayed with.
    pub(crate) fn replay_jobs(&self) -> Vec<(&String, &TrimSpec, &SsdSpec)> {
        let e = &self.exp;
        e.policies
            .iter()
            .flat_map(|p| {
                e.trims
                    .iter()
                    .flat_map(move |t| e.ssds.iter().map(move |d| (p, t, d)))
            })
            .collect()
    }

    /// The replays of one engine run, on as many threads as the machine has cores (each
    /// replay is one thread and independent of the others), in `jobs` order.
    pub(crate) fn replays(
        &self,
        run: &EngineRun,
        jobs: &[(&String, &TrimSpec, &SsdSpec)],
        bar: &ProgressBar,
    ) -> Result<Vec<DeviceRun>> {
        // Items are begun in order, so a `None` (not begun) only follows an error.
        let runs = in_parallel(cores(), jobs, |&(policy, trim, ssd)| {
            let d = self.replay(run, policy, trim, ssd);
            bar.inc(1);
            d
        })
        .into_iter()
        .flatten()
        .collect::<Result<Vec<DeviceRun>>>()?;
        assert_eq!(runs.len(), jobs.len(), "every replay ran");
        Ok(runs)
    }

    fn bar(&self, n: u64, what: &str) -> ProgressBar {
        if self.quiet {
            return ProgressBar::hidden();
        }
        let b = ProgressBar::new(n);
        b.set_style(
            ProgressStyle::with_template(&format!(
                "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} {{msg}}"
            ))
            .expect("template")
            .progress_chars("=> "),
        );
        b.enable_steady_tick(Duration::from_millis(500));
        b
    }

    pub(crate) fn point(&self, run: &EngineRun, device: DeviceRun) -> Point {
        let overall = overall(&run.run);
        Point {
            experiment: self.exp.name.clone(),
            mode: "trace-replay".into(),
            scale: run.scale_name.clone(),
            workload: run.workload.clone(),
            seed: run.seed,
            cache_share: run.cache_share,
            leaf_kb: run.leaf_kb,
            compressor: run.compressor.clone(),
            allocation: run.allocation.clone(),
            dirty_pct: Some(run.dirty_pct),
            policy: device.policy.clone(),
            trim: device.trim.label(),
            ssd: device.ssd.label(),
            // Live data ÷ the replayed device.
            device_fill: self.exp.device_fill / device.ssd.device_scale(),
            host_ops_s: run.run.throughput_ops_sec,
            host_p50_us: overall.0,
            host_p99_us: overall.1,
            load_docs_s: run.load.throughput_ops_sec,
            db_mb: run.db_bytes as f64 / (1 << 20) as f64,
            device,
        }
    }

    /// The engine run for these settings, from disk if it was done before. A run of another
    /// engine than the reference first gets the reference run of its point, for the journal
    /// bytes of its checkpoint intervals.
    pub fn engine_run(&self, w: &EngineWork, bar: &ProgressBar) -> Result<EngineRun> {
        let key = self.engine_key(w);
        let lock = self.running.lock().entry(key.clone()).or_default().clone();
        let _only_run_of_key = lock.lock();
        let saved = self.out.join("points").join(format!("engine-{key}.json"));
        if let Some(r) = saved_run(&saved).filter(|r| r.intervals.is_some()) {
            return Ok(r);
        }
        let checkpoints = if w.is_reference() {
            None
        } else {
            let reference = self.engine_run(&w.reference(), bar)?;
            let intervals = reference.intervals.expect("a saved run has its intervals");
            Some(intervals.journal_bytes_per_checkpoint()?)
        };
        bar.set_message(format!("{} seed {}: engine run", w.workload, w.seed));
        let scale = self.exp.scale_spec(&w.scale).expect("validated");
        let r = run_engine(&self.out, &key, w, &self.exp, &scale, checkpoints)?;
        std::fs::write(&saved, serde_json::to_string_pretty(&r)?)?;
        Ok(r)
    }

    /// One replay, from disk if it was done before.
    pub fn replay(
        &self,
        run: &EngineRun,
        policy: &str,
        trim: &TrimSpec,
        ssd: &SsdSpec,
    ) -> Result<DeviceRun> {
        let key = slug(&format!(
            "replay-{}-{policy}-t{}-{}-p{}-w{}{}",
            run.key,
            trim.label(),
            ssd.label(),
            self.exp.precondition,
            self.exp.warmup_capacities,
            if self.exp.reads { "" } else { "-noreads" }
        ));
        let saved = self.out.join("points").join(format!("{key}.json"));
        if let Ok(text) = std::fs::read_to_string(&saved) {
            match serde_json::from_str::<DeviceRun>(&text) {
                Ok(d) if d.trace_version == run.trace_version => return Ok(d),
                _ => {}
            }
        }
        let d = replay_run(
            run,
            policy,
            trim,
            ssd,
            &self.exp,
            replay_capacity_bytes(run, ssd),
        )?;
        std::fs::write(&saved, serde_json::to_string_pretty(&d)?)?;
        Ok(d)
    }
}

/// The order engine runs begin in, as indices into `work`: reference runs first, each group in
/// `work` order. Every other engine run waits for its point's reference (it keeps the
/// reference's checkpoint intervals), so a worker that took one before its reference had begun
/// would only wait, and the engine runs would go one at a time.
fn schedule(work: &[EngineWork]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..work.len()).collect();
    order.sort_by_key(|&i| !work[i].is_reference());
    order
}

/// The machine's cores.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` of every item, on `workers` threads (at most one per item), in `items` order. After
/// a failure no item is begun (each finished step is saved, so a resumed run keeps the
/// others'); the items not begun are `None`.
fn in_parallel<T: Sync, R: Send>(
    workers: usize,
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Vec<Option<Result<R>>> {
    let workers = workers.min(items.len()).max(1);
    let next = AtomicU64::new(0);
    let results: Vec<parking_lot::Mutex<Option<Result<R>>>> = items
        .iter()
        .map(|_| parking_lot::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(item) = items.get(i) else {
                    return;
                };
                let r = f(item);
                let failed = r.is_err();
                *results[i].lock() = Some(r);
                if failed {
                    next.store(items.len() as u64, Ordering::Relaxed);
                    return;
                }
            });
        }
    });
    results.into_iter().map(|r| r.into_inner()).collect()
}

/// One engine run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineWork {
    pub workload: String,
    pub cache_share: f64,
    pub leaf_kb: u32,
    pub compressor: String,
    /// Table pages' block allocation (engine::AllocPolicy).
    pub allocation: String,
    /// Eviction's dirty budget, `[target, trigger]` percent of the cache.
    pub dirty_pct: [u8; 2],
    pub seed: u64,
    pub scale: String,
}

impl EngineWork {
    /// The run of this point whose checkpoint intervals every other engine keeps: the engine
    /// the seeds measured (best fit, WiredTiger's dirty budget), checkpointed every
    /// [`Sizing::checkpoint_every_bytes`] written.
    pub fn reference(&self) -> EngineWork {
        EngineWork {
            allocation: "best".into(),
            dirty_pct: ENGINE_DIRTY_PCT,
            ..self.clone()
        }
    }

    pub fn is_reference(&self) -> bool {
        *self == self.reference()
    }
}

/// (p50, p99) of all operations of a phase, µs (the operation-weighted mean of per-type
/// percentiles is not a percentile; the largest per-type value bounds it and is what we report
/// for p99, the most frequent type's p50 for p50).
fn overall(p: &PhaseResult) -> (f64, f64) {
    let mut p50 = 0.0;
    let mut most = 0;
    let mut p99: f64 = 0.0;
    for m in p.metrics.values() {
        if m.operations > most {
            most = m.operations;
            p50 = m.p50_us as f64;
        }
        p99 = p99.max(m.p99_us as f64);
    }
    (p50, p99)
}

fn table_template(kind: &str, leaf: u32, comp: &str) -> Result<TableConfig> {
    let c: Compressor = comp.parse().map_err(|e| anyhow!("{e}"))?;
    Ok(match kind {
        // The seeds tune the collection's leaf page size; indexes keep MongoDB's 16 KB.
        "collection" => TableConfig {
            compressor: c,
            ..TableConfig::collection().with_leaf_page_max(leaf * 1024)
        },
        _ => TableConfig::index(),
    })
}

/// Loads and runs one workload on a fresh database, tracing every I/O event. The load runs
/// with the scale's load cache and no timed checkpoints; after its end-of-load checkpoint the
/// database is measured and the run phase gets the device-relative settings of [`Sizing`]:
/// its cache, a written-bytes checkpoint trigger and the journal file size. With
/// `journal_checkpoint_bytes` its checkpoints are begun by journal bytes instead (another
/// engine than the reference, kept to the reference's intervals).
///
/// The run is deterministic (docs/lab.md, "The schedule"): the engine's inline schedule, one
/// client thread and LinkBench's logical clock make the trace a function of the experiment,
/// the point and the seed, whatever else the machine is doing.
pub fn run_engine(
    out: &Path,
    key: &str,
    w: &EngineWork,
    exp: &Experiment,
    scale: &ScaleSpec,
    journal_checkpoint_bytes: Option<u64>,
) -> Result<EngineRun> {
    let started = Instant::now();
    let scale = &ScaleSpec {
        threads: 1,
        ..scale.clone()
    };
    let work = new_work_dir(out, key)?;
    let trace = out.join("traces").join(format!("{key}.trace"));
    let obs = Arc::new(CountingTrace::create(&trace)?);
    let mut cfg = engine_config(&work, w, exp, scale, obs.clone())?;
    let chapter10 = w.workload == "chapter10";
    if chapter10 {
        crate::chapter10::configure(&mut cfg);
    }
    let reopen_cfg = cfg.clone();
    let direct_io = cfg.engine.direct_io.to_string();
    let db_dir = work.join("db");
    let opening = Instant::now();
    let db = DocDb::open(cfg).map_err(|e| anyhow!("opening the lab database: {e}"))?;
    let startup_s = opening.elapsed().as_secs_f64();
    let mut extra = BTreeMap::new();
    let mut at_end_of_load = None;
    let mut end_of_load = |db: &Arc<DocDb>| -> Result<u64> {
        at_end_of_load = Some(EndOfLoad::take(db, exp, w, journal_checkpoint_bytes)?);
        Ok(obs.count.load(Ordering::Relaxed))
    };
    let mut inserted = None;
    let (load, run, eol) = if chapter10 {
        let i = crate::chapter10::insert(&db, scale.chapter10_docs)?;
        let (load, eol) = (i.phase.clone(), end_of_load(&db)?);
        inserted = Some(i);
        (load, PhaseResult::default(), eol)
    } else {
        drive(
            |name| Ok(InProc::new(db.clone(), name)),
            w,
            scale,
            Clients::OneDeterministic,
            || end_of_load(&db).map(Some),
        )?
    };
    let at_end_of_load =
        at_end_of_load.ok_or_else(|| anyhow!("the workload never reached its end of load"))?;
    let intervals = run_intervals(&db, at_end_of_load.journal, &run)?;
    let leaf_changes = Some(LeafChanges::from_stats(&db)?.since(at_end_of_load.leaf_changes));
    let closing = Instant::now();
    db.shutdown()
        .map_err(|e| anyhow!("shutting the lab database down: {e}"))?;
    let shutdown_s = closing.elapsed().as_secs_f64();
    drop(db);
    if let Some(inserted) = &inserted {
        extra = crate::chapter10::measurements(
            [startup_s, load.runtime_ms / 1e3, shutdown_s],
            inserted,
            crate::chapter10::disk_use(&db_dir, &|_| true)?,
            crate::chapter10::reads(reopen_cfg, scale.chapter10_docs)?,
        );
    }
    obs.flush();
    if chapter10 {
        extra.extend(chapter10_written(&trace)?);
    }
    // The whole database is on disk after a clean shutdown; size it from its files.
    let db_bytes = table_bytes(&db_dir)?;
    let shares = write_shares(&trace, eol)?;
    let events = obs.count.load(Ordering::Relaxed);
    remove_work_dir(&work);
    Ok(EngineRun {
        key: key.to_string(),
        trace_version: TRACE_VERSION,
        engine: COPY_ON_WRITE.into(),
        workload: w.workload.clone(),
        seed: w.seed,
        cache_share: w.cache_share,
        leaf_kb: w.leaf_kb,
        compressor: w.compressor.clone(),
        allocation: w.allocation.clone(),
        dirty_pct: w.dirty_pct,
        scale_name: w.scale.clone(),
        scale: scale.clone(),
        direct_io,
        sizing: at_end_of_load.sizing,
        load,
        run,
        trace,
        end_of_load_event: eol,
        run_write_bytes: shares.by_file.values().sum(),
        events,
        db_bytes,
        write_bytes_by_file: shares.by_file,
        write_bytes_by_page: shares.by_page,
        checkpoints: obs.checkpoints.load(Ordering::Relaxed),
        checkpoint_trigger: Some(at_end_of_load.trigger),
        intervals: Some(intervals),
        leaf_changes,
        run_checkpoints: shares.checkpoints,
        interval_bytes_mean: shares.interval_bytes_mean,
        wall_s: started.elapsed().as_secs_f64(),
        extra,
    })
}

/// The lab database's configuration for one engine run: the load's cache, checkpoints by
/// bytes written only, the inline schedule, the direct-I/O journal layout, and the point's
/// allocation, leaf size and compressor; its I/O reported to `obs`.
fn engine_config(
    work: &Path,
    w: &EngineWork,
    exp: &Experiment,
    scale: &ScaleSpec,
    obs: Arc<CountingTrace>,
) -> Result<DocDbConfig> {
    let mut cfg = DocDbConfig::disk(work.join("db"));
    // Every engine setting is the experiment's: start from WiredTiger's (flash mode off), not
    // from the product's defaults, so a change of those never moves the lab's results.
    engine::flash_mode_defaults(engine::FlashMode::Off).apply(
        &mut cfg.engine,
        &mut cfg.collection_table,
        &mut cfg.index_table,
    );
    cfg.engine.cache_size = scale.load_cache_mb << 20;
    // Checkpoints by bytes written only (set after the load): a timed interval would make
    // what one interval writes depend on this machine's speed.
    cfg.engine.checkpoint_interval = None;
    cfg.engine.schedule = Schedule::Inline;
    // The seeds ran WiredTiger with direct I/O, whose log pads each write to a block: no
    // journal page reaches the device twice (docs/lab.md, "Direct-I/O semantics").
    cfg.engine
        .journal
        .as_mut()
        .expect("the lab's engines journal")
        .block_aligned = true;
    cfg.uuid_seed = Some(w.seed);
    // The lab's own constants, which its report names, over mode off's (equal today): every
    // engine loads with WiredTiger's eviction and dirty budget (its own budget is set at the
    // end of the load); mode off places nothing, trims nothing and sets no hints — the replay
    // applies the policies and TRIM conditions.
    cfg.engine.eviction_target = crate::experiment::EVICTION_PCT[0];
    cfg.engine.eviction_trigger = crate::experiment::EVICTION_PCT[1];
    cfg.engine.eviction_dirty_target = ENGINE_DIRTY_PCT[0];
    cfg.engine.eviction_dirty_trigger = ENGINE_DIRTY_PCT[1];
    cfg.engine.observer = Some(obs);
    let alloc: engine::AllocPolicy = w.allocation.parse().map_err(|e| anyhow!("{e}"))?;
    cfg.collection_table = TableConfig {
        allocation: alloc,
        sweep_reserve_pct: exp.sweep_reserve_pct,
        ..table_template("collection", w.leaf_kb, &w.compressor)?
    };
    cfg.index_table = TableConfig {
        allocation: alloc,
        sweep_reserve_pct: exp.sweep_reserve_pct,
        ..table_template("index", w.leaf_kb, &w.compressor)?
    };
    Ok(cfg)
}

/// What the end of the load left: the run phase's sizing and checkpoint trigger, and the
/// journal's and the leaves' counts the run phase is measured from.
struct EndOfLoad {
    sizing: Sizing,
    trigger: CheckpointTrigger,
    /// [`last_checkpoint_in_journal`] at the end of the load.
    journal: (u64, u64, u64),
    leaf_changes: LeafChanges,
}

impl EndOfLoad {
    /// Checkpoints the loaded database, sizes the run phase from it and reconfigures the
    /// engine for it (with `journal_checkpoint_bytes`, checkpoints by journal bytes).
    fn take(
        db: &Arc<DocDb>,
        exp: &Experiment,
        w: &EngineWork,
        journal_checkpoint_bytes: Option<u64>,
    ) -> Result<EndOfLoad> {
        // The seeds start their run phase from a loaded, checkpointed database.
        db.engine()
            .checkpoint()
            .map_err(|e| anyhow!("checkpoint after load: {e}"))?;
        let s = Sizing::new(live_table_bytes(db)?, exp, w.cache_share);
        let t = match journal_checkpoint_bytes {
            None => CheckpointTrigger::WrittenBytes(s.checkpoint_every_bytes),
            Some(n) => CheckpointTrigger::JournalBytes(n),
        };
        let by = |b: bool, n: u64| Some(b.then_some(n));
        db.engine()
            .reconfigure(&Reconfigure {
                cache_size: Some(s.cache_bytes),
                checkpoint_written_bytes: by(
                    journal_checkpoint_bytes.is_none(),
                    s.checkpoint_every_bytes,
                ),
                checkpoint_log_size: by(
                    journal_checkpoint_bytes.is_some(),
                    journal_checkpoint_bytes.unwrap_or(0),
                ),
                journal_file_max: Some(s.journal_file_bytes),
                // The run phase's engine: every engine of a point loads alike, with WiredTiger's
                // budget, so all start their run from the same database.
                eviction_dirty_pct: Some((w.dirty_pct[0], w.dirty_pct[1])),
                ..Reconfigure::default()
            })
            .map_err(|e| anyhow!("sizing the run phase: {e}"))?;
        let journal = last_checkpoint_in_journal(db)?;
        let leaf_changes = LeafChanges::from_stats(db)?;
        db.engine().end_of_load();
        Ok(EndOfLoad {
            sizing: s,
            trigger: t,
            journal,
            leaf_changes,
        })
    }
}

/// The journal's bytes appended when the last checkpoint began, the checkpoints completed, and
/// the journal's bytes appended so far.
/// What the traced part of the run (the insert job and its shutdown) wrote: bytes to the
/// journal and to the data files (every other file kind).
pub(crate) fn chapter10_written(trace: &Path) -> Result<BTreeMap<String, f64>> {
    let shares = write_shares(trace, 0)?;
    let journal = shares.by_file.get("journal").copied().unwrap_or(0);
    let all: u64 = shares.by_file.values().sum();
    Ok(BTreeMap::from([
        ("written_journal_bytes".to_string(), journal as f64),
        ("written_data_bytes".to_string(), (all - journal) as f64),
    ]))
}

/// The run phase's journal bytes, checkpoints and journal bytes per operation, from the
/// journal's figures at the end of the load (`at_load_end`) and now.
fn run_intervals(
    db: &DocDb,
    at_load_end: (u64, u64, u64),
    run: &PhaseResult,
) -> Result<RunIntervals> {
    let (journal0, checkpoints0, appended0) = at_load_end;
    let (journal1, checkpoints1, appended1) = last_checkpoint_in_journal(db)?;
    let ops: u64 = run.metrics.values().map(|m| m.operations).sum();
    Ok(RunIntervals {
        journal_bytes: journal1 - journal0,
        checkpoints: checkpoints1 - checkpoints0,
        journal_bytes_per_op: (appended1 - appended0) / ops.max(1),
    })
}

/// Removes a run's work directory, and its parent when that is empty (another run may share it).
fn remove_work_dir(work: &Path) {
    let _ = std::fs::remove_dir_all(work);
    if let Some(parent) = work.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

fn last_checkpoint_in_journal(db: &DocDb) -> Result<(u64, u64, u64)> {
    let stats = db.engine().stats();
    let get = |path: &str| {
        stats
            .pointer(path)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| anyhow!("the engine's stats have no {path}"))
    };
    Ok((
        get("/checkpoints/journal_bytes_at_last_begin")?,
        get("/checkpoints/completed")?,
        get("/journal/bytes_appended")?,
    ))
}

/// The repository's root (scripts the lab runs live under it).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs one of the repository's setup scripts (which build or install a tool once and print
/// its path as their last line) and returns that path; `what` names the job in errors.
pub(crate) fn setup_script(script: &str, what: &str) -> Result<PathBuf> {
    let o = std::process::Command::new("bash")
        .arg(repo_root().join(script))
        .output()
        .with_context(|| format!("running {script}"))?;
    if !o.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let stdout = String::from_utf8(o.stdout)?;
    Ok(PathBuf::from(stdout.lines().last().unwrap_or("").trim()))
}

/// What the engine writes for a given workload and settings, as a version: bump it with every
/// change that alters the engine's traces, so that a resumed experiment runs again the engine
/// runs (and the replays of them) that older code made instead of mixing them with new ones.
/// 2: the journal writes 256 KiB slots in the direct-I/O layout, in files of at least 8 MiB.
/// 3: eviction stops as soon as the cache is back under the target it serves, instead of
/// after a batch of 16 pages, and takes its candidates from the colder half of the leaves.
/// 4: the engine's reads (its cache's misses) are in the trace (trace format version 3).
pub const TRACE_VERSION: u32 = 4;

fn first_trace_version() -> u32 {
    1
}

/// A run saved by an earlier, interrupted invocation, if its trace is still there and the
/// engine that made it wrote what this one writes ([`TRACE_VERSION`]).
pub(crate) fn saved_run(saved: &Path) -> Option<EngineRun> {
    let r: EngineRun = serde_json::from_str(&std::fs::read_to_string(saved).ok()?).ok()?;
    (r.trace.exists() && r.trace_version == TRACE_VERSION).then_some(r)
}

/// Where engine runs keep their database: `$FLASHDOC_LAB_WORK`, else a RAM filesystem
/// (`/dev/shm`) when there is one, else `OUT/work`. The lab measures the simulated device, not
/// this machine's disk; on RAM, fsyncs are free, so a checkpoint's wall time (during which the
/// clients keep writing) does not depend on the host's disk.
fn work_root(out: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("FLASHDOC_LAB_WORK") {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        static CLEARED: std::sync::Once = std::sync::Once::new();
        CLEARED.call_once(|| remove_stale_work_dirs(shm));
        let probe = shm.join(format!("flashdoc-lab-{}", std::process::id()));
        if std::fs::create_dir_all(&probe).is_ok() {
            return probe;
        }
    }
    out.join("work")
}

/// A new, empty directory for one engine run's database under [`work_root`]. Its name is the
/// point's key and a number unique in this process: two experiments run in one process (the
/// tests do) may run the same point at once, and each must not remove the other's database.
pub(crate) fn new_work_dir(out: &Path, key: &str) -> Result<PathBuf> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let work = work_root(out).join(format!("{key}.{n}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    Ok(work)
}

/// Removes the RAM work directories (`flashdoc-lab-PID`) of lab processes that are gone: an
/// interrupted run leaves its databases there, and a resumed run would otherwise share the RAM
/// with them (gigabytes at paper scale, enough for the kernel to kill it). A directory whose
/// process is alive is kept.
fn remove_stale_work_dirs(shm: &Path) {
    let Ok(entries) = std::fs::read_dir(shm) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("flashdoc-lab-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How a workload's clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clients {
    /// `scale.threads` client threads; LinkBench stamps its documents with the wall clock.
    Threads,
    /// One client thread, and LinkBench's logical clock (1 ms per load chunk and per request):
    /// the operations and the bytes they write are a function of the seed alone.
    OneDeterministic,
}

/// LinkBench's clock starts here under `Clients::OneDeterministic` (ms since the epoch).
const LOGICAL_CLOCK_START_MS: i64 = 1_700_000_000_000;

/// The load phase, `end_of_load` (which checkpoints, sizes the run phase and returns the
/// end-of-load event index, or `None` to stop after the load), then the run phase. The
/// workload reaches its database through `open(database name)`: flashdoc's document layer in
/// this process, or a server over the wire.
pub(crate) fn drive<S: Store>(
    open: impl Fn(&str) -> Result<S>,
    w: &EngineWork,
    scale: &ScaleSpec,
    clients: Clients,
    mut end_of_load: impl FnMut() -> Result<Option<u64>>,
) -> Result<(PhaseResult, PhaseResult, u64)> {
    let threads = match clients {
        Clients::Threads => scale.threads,
        Clients::OneDeterministic => 1,
    };
    let logical_time = clients == Clients::OneDeterministic;
    use workload::linkbench::{self, LinkBenchConfig, Mix};
    use workload::ycsb::{self, Workload, YcsbConfig};
    if let Some(rest) = w.workload.strip_prefix("ycsb-") {
        let kind = match rest {
            "update-heavy" => Workload::UpdateHeavy,
            "update-only" | "load" => Workload::UpdateOnly,
            other => bail!("unknown YCSB workload {other}"),
        };
        let mut cfg = YcsbConfig::workload(kind, scale.ycsb_records, scale.ycsb_ops);
        cfg.threads = threads;
        cfg.seed = w.seed;
        if let Some(classes) = scale.ycsb_key_classes {
            // The skew held at every scale (Experiment::ycsb_key_classes).
            cfg.request_distribution = ycsb::RequestDistribution::ZipfianClasses;
            cfg.zipfian_classes = classes;
        }
        let store = open("ycsb")?;
        ycsb::prepare_load(&cfg, &store)?;
        let load = ycsb::run_load(&cfg, &store, Progress::Hidden)?;
        let Some(eol) = end_of_load()? else {
            return Ok((load, PhaseResult::default(), 0));
        };
        let run = if rest == "load" {
            PhaseResult::default()
        } else {
            ycsb::run_ops(&cfg, &store, Progress::Hidden)?
        };
        return Ok((load, run, eol));
    }
    if let Some(mix) = w.workload.strip_prefix("linkbench-") {
        let cfg = LinkBenchConfig {
            maxid1: scale.linkbench_maxid1,
            requests: Some(scale.linkbench_requests),
            mix: mix.parse::<Mix>().map_err(|e| anyhow!(e))?,
            requesters: threads,
            loaders: threads,
            seed: w.seed,
            fixed_time_ms: logical_time.then_some(LOGICAL_CLOCK_START_MS),
            logical_time,
            // The out-degree distribution's tail does not shrink with the graph: capped
            // (Experiment::linkbench_degree_cap says how).
            nlinks_cap: Some(scale.linkbench_nlinks_cap()),
            // The skew held at every scale (Experiment::linkbench_id_classes), or LinkBench's.
            zipf_classes: scale.linkbench_id_classes.map(|c| c as i64),
            ..LinkBenchConfig::default()
        };
        let store = open(&cfg.database)?;
        linkbench::prepare_load(&store)?;
        let load = linkbench::run_load(&cfg, &store, Progress::Hidden)?;
        let Some(eol) = end_of_load()? else {
            return Ok((load, PhaseResult::default(), 0));
        };
        let run = linkbench::run_ops(&cfg, &store, Progress::Hidden)?;
        return Ok((load, run, eol));
    }
    bail!("unknown workload {}", w.workload)
}

/// Bytes of live blocks in the collection and index files (file sizes less free extents).
fn live_table_bytes(db: &Arc<DocDb>) -> Result<u64> {
    let stats = db.engine().stats();
    let tables = stats["tables"]
        .as_array()
        .ok_or_else(|| anyhow!("the engine reports no tables"))?;
    let mut live = 0u64;
    for t in tables {
        let e = &t["extents"];
        let field = |k: &str| {
            e[k].as_u64()
                .ok_or_else(|| anyhow!("table statistics lack extents.{k}: {e}"))
        };
        live += field("file_size")? - field("avail_bytes")? - field("discard_bytes")?;
    }
    Ok(live)
}

fn table_bytes(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e?;
        if e.path().extension().is_some_and(|x| x == "fdb") {
            n += e.metadata()?.len();
        }
    }
    Ok(n)
}

/// What the run phase wrote: bytes by file kind (the primary index told apart) and by page
/// kind, and its checkpoint intervals.
pub struct RunWrites {
    pub by_file: BTreeMap<String, u64>,
    pub by_page: BTreeMap<String, u64>,
    /// Checkpoints begun after the end of the load.
    pub checkpoints: u64,
    /// Mean bytes written between consecutive checkpoint begins of the run phase (0 with
    /// fewer than two).
    pub interval_bytes_mean: f64,
}

/// Reads the trace from event `from` on.
pub fn write_shares(trace: &Path, from: u64) -> Result<RunWrites> {
    let mut r = RunWrites {
        by_file: BTreeMap::new(),
        by_page: BTreeMap::new(),
        checkpoints: 0,
        interval_bytes_mean: 0.0,
    };
    let mut written = 0u64;
    let mut first_begin = None;
    let mut last_begin = 0u64;
    for (i, ev) in placement::trace::TraceReader::open(trace)?.enumerate() {
        let ev = ev?;
        if (i as u64) < from {
            continue;
        }
        match ev {
            Event::Write(w) => {
                let file = match (w.file_kind, w.id_index) {
                    (placement::FileKind::Index, true) => "primary index",
                    (placement::FileKind::Index, false) => "secondary index",
                    (k, _) => k.name(),
                };
                *r.by_file.entry(file.to_string()).or_default() += w.len as u64;
                *r.by_page.entry(w.page_kind.name().to_string()).or_default() += w.len as u64;
                written += w.len as u64;
            }
            Event::CheckpointBegin { .. } => {
                r.checkpoints += 1;
                first_begin.get_or_insert(written);
                last_begin = written;
            }
            _ => {}
        }
    }
    if let (Some(first), true) = (first_begin, r.checkpoints >= 2) {
        r.interval_bytes_mean = (last_begin - first) as f64 / (r.checkpoints - 1) as f64;
    }
    Ok(r)
}

/// The engine run's events as replayed, and the index of its end of load among them: all of
/// them, or (the cause study's run without reads) the same writes and none of the reads, the
/// end of load moved back by the reads before it.
fn replayed_events(run: &EngineRun, reads: bool) -> Result<(Vec<Event>, u64)> {
    let mut events = placement::sim::read_events(&run.trace).map_err(|e| anyhow!("{e}"))?;
    if reads {
        return Ok((events, run.end_of_load_event));
    }
    let is_read = |e: &Event| matches!(e, Event::Read { .. });
    let eol = (run.end_of_load_event as usize).min(events.len());
    let before = events[..eol].iter().filter(|e| is_read(e)).count();
    events.retain(|e| !is_read(e));
    Ok((events, (eol - before) as u64))
}

/// The simulated device an `ssds` entry describes, of `logical_pages`, with timing.
fn replay_device(logical_pages: u64, ssd: &SsdSpec) -> Result<ssd::SsdConfig> {
    let mut dev = ssd::SsdConfig::with_op(logical_pages, ssd.op)?;
    // A lab-sized device is small; a real one has thousands of erase blocks, so the open
    // block of each stream costs nothing. Keep that true: at least ~1024 blocks, by using
    // smaller blocks (a power of two, 16 to 256 pages), unless the experiment holds the block
    // or the block count.
    dev.pages_per_block = match (ssd.pages_per_block, ssd.erase_units) {
        (Some(p), _) => p,
        (None, Some(units)) => pages_for_units(logical_pages, units),
        (None, None) => pages_per_block(logical_pages),
    };
    dev.set_op(ssd.op)?;
    dev.streams = ssd.streams as u32;
    dev.gc = ssd::GcPolicy::parse(&ssd.gc)?;
    dev.gc_tie = ssd.gc_tie;
    let mut timing = ssd::TimingConfig::default();
    timing.trim.command_ns = (ssd.trim_command_us * 1e3).round() as u64;
    dev.timing = Some(timing);
    dev.validate()?;
    Ok(dev)
}

/// One replay of `run` on a device of `capacity_bytes` (whole 4 KB pages).
pub(crate) fn replay_run(
    run: &EngineRun,
    policy: &str,
    trim: &TrimSpec,
    ssd: &SsdSpec,
    exp: &Experiment,
    capacity_bytes: u64,
) -> Result<DeviceRun> {
    let started = Instant::now();
    let pc = PlacementConfig {
        streams: ssd.streams,
        ..PlacementConfig::default()
    };
    let logical_pages = capacity_bytes / ssd::PAGE_BYTES;
    let dev = replay_device(logical_pages, ssd)?;
    let when = TrimWhen::parse(&trim.when).map_err(|e| anyhow!(e))?;
    let batch = trim.scaled_batch(capacity_bytes);
    let loops = run_loops(run, capacity_bytes, exp.warmup_capacities);
    let (events, end_of_load) = replayed_events(run, exp.reads)?;
    let job = TraceReplay {
        trace: &run.trace,
        policy,
        placement: &pc,
        device: dev,
        // A fresh device is the state mkfs leaves; `mkfs` discards it all again, to the same
        // state.
        precondition: match exp.precondition.as_str() {
            "none" => None,
            mode => Some(ssd::PreconditionConfig {
                mode: ssd::PreconditionMode::parse(mode)?,
                ..ssd::PreconditionConfig::default()
            }),
        },
        alloc: ssd::AllocPolicy::NextFit,
        fs_discard: trim.discard,
        replay: ReplayConfig {
            trim: TrimConfig { batch, when },
            end_of_load_at: Some(end_of_load),
            // The last pass is measured.
            reset_stats_at: (end_of_load
                + (loops as u64 - 1) * (events.len() as u64 - end_of_load))
                .max(1),
        },
        loops: RunLoops {
            from: end_of_load,
            times: loops,
        },
    };
    let out = placement::sim::replay_loaded(&job, &events, |_, _| {}).map_err(|e| {
        anyhow!(
            "{e} (the device holds {} MB: the database grew past it; lower device_fill)",
            capacity_bytes >> 20
        )
    })?;
    let r = &out.report;
    let t = r
        .timing
        .as_ref()
        .ok_or_else(|| anyhow!("the device model has no timing"))?;
    let device_s = t.makespan_ns as f64 / 1e9;
    let ops = (run.run.operations as f64).max(1.0);
    let flash = r.counters.host_write_pages + r.counters.gc_copy_pages;
    Ok(DeviceRun {
        trace_version: run.trace_version,
        policy: policy.to_string(),
        trim: trim.clone(),
        trim_batch_extents: batch,
        ssd: ssd.clone(),
        waf: r.write_amplification,
        flash_write_pages: flash,
        flash_writes_per_op: flash as f64 / ops,
        gc_copies: r.counters.gc_copy_pages,
        erases: r.counters.erases,
        erase_min: r.erase_count.min as u64,
        erase_mean: r.erase_count.mean,
        erase_max: r.erase_count.max as u64,
        host_write_pages: r.counters.host_write_pages,
        device_s,
        device_mb_s: t.mb_per_s,
        write_p99_us: t.write_latency.p99_us,
        read_p99_us: t.read_latency.p99_us,
        modeled_ops_s: if device_s > 0.0 { ops / device_s } else { 0.0 },
        logical_gib: logical_pages as f64 * ssd::PAGE_BYTES as f64 / (1u64 << 30) as f64,
        trimmed_bytes: out.trim.map(|s| s.released_bytes).unwrap_or(0),
        trim_commands: r.host_trim_ios,
        trim_device_s: t.trim_busy_ns as f64 / 1e9,
        run_loops: loops,
        replay_wall_s: started.elapsed().as_secs_f64(),
        streams: r
            .streams
            .iter()
            .map(|s| StreamPages {
                stream: s.stream,
                host_pages: s.host_pages,
                gc_pages: s.gc_pages,
            })
            .collect(),
    })
}

/// The replayed device's capacity: the sizing's, scaled by the `ssds` entry's `device_gb`
/// (whole 4 KB pages).
pub fn replay_capacity_bytes(run: &EngineRun, ssd: &SsdSpec) -> u64 {
    let pages = run.sizing.capacity_bytes / ssd::PAGE_BYTES;
    ((pages as f64 * ssd.device_scale()).round() as u64).max(1) * ssd::PAGE_BYTES
}

/// How many times the run phase is replayed: enough passes before the last to write
/// `warmup_capacities` capacities of a device of `capacity_bytes`, then the measured pass (at
/// most 64 in all).
pub fn run_loops(run: &EngineRun, capacity_bytes: u64, warmup_capacities: f64) -> u32 {
    let per_pass = run.run_write_bytes as f64 / capacity_bytes as f64;
    if per_pass <= 0.0 {
        return 1;
    }
    (1.0 + (warmup_capacities / per_pass).ceil()).min(64.0) as u32
}

/// Erase-block size for a device of `logical_pages`: the largest power of two up to 256
/// pages that leaves at least 1024 blocks (16 pages at least).
pub fn pages_per_block(logical_pages: u64) -> u32 {
    let mut ppb = 256u64;
    while ppb > 16 && logical_pages / ppb < 1024 {
        ppb /= 2;
    }
    ppb as u32
}

/// Erase-block size for a device of `logical_pages` that should have about `units` blocks: the
/// power of two from 16 to 1 024 pages whose block count is nearest `units` by ratio. Holding
/// the count holds the block's share of the device (and of a checkpoint interval's bytes) from
/// one scale to the next, which a fixed block size does not (docs/placement.md, "LinkBench at
/// paper scale").
pub fn pages_for_units(logical_pages: u64, units: u64) -> u32 {
    assert!(units > 0, "a device has at least one erase block");
    let off_by = |ppb: u64| {
        let blocks = (logical_pages / ppb).max(1) as f64;
        (blocks / units as f64).ln().abs()
    };
    let best = (4..=10)
        .map(|shift| 1u64 << shift)
        .min_by(|&a, &b| off_by(a).total_cmp(&off_by(b)))
        .expect("seven sizes");
    best as u32
}

/// Writes `results.json` (every parameter of every point) and `results.csv`.
pub fn write_results(
    out: &Path,
    exp: &Experiment,
    scale: &ScaleSpec,
    points: &[Point],
    runs: &[EngineRun],
) -> Result<()> {
    let doc = json!({
        "experiment": exp,
        "scale": scale,
        "mode": "trace-replay",
        "engine_runs": runs,
        "points": points,
        "generated_by": format!("flashdoc {}", env!("CARGO_PKG_VERSION")),
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&doc)?,
    )?;
    let mut csv = String::from("experiment,scale,workload,seed,cache_share,leaf_kb,compressor,allocation,dirty_pct,policy,trim,ssd,device_fill,host_ops_s,host_p50_us,host_p99_us,load_docs_s,db_mb,flash_writes_per_op,waf,gc_copies,erases,erase_max,device_s,modeled_ops_s,device_mb_s,write_p99_us,read_p99_us,trimmed_bytes,trim_commands\n");
    for p in points {
        let d = &p.device;
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.2},{:.4},{:.4},{},{},{},{:.4},{:.1},{:.2},{:.1},{:.1},{},{}\n",
            p.experiment, p.scale, p.workload, p.seed, p.cache_share, p.leaf_kb, p.compressor, p.allocation, p.dirty_pct.map_or("–".into(), |[t, g]| format!("{t}/{g}")), p.policy, p.trim, p.ssd, p.device_fill,
            p.host_ops_s, p.host_p50_us, p.host_p99_us, p.load_docs_s, p.db_mb, d.flash_writes_per_op, d.waf, d.gc_copies, d.erases, d.erase_max,
            d.device_s, d.modeled_ops_s, d.device_mb_s, d.write_p99_us, d.read_p99_us, d.trimmed_bytes, d.trim_commands
        ));
    }
    std::fs::write(out.join("results.csv"), csv)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_files_hold_at_least_32_slots_and_scale_to_the_seeds_100_mb() {
        let mib = 1u64 << 20;
        // The seeds' drive: WiredTiger's 100 MB.
        assert_eq!(journal_file_bytes(256_000_000_000), 100_000_000);
        // Paper scale: scaled (the bytes its engine runs had before the floor).
        assert_eq!(journal_file_bytes(36961894400), 14438240);
        // Large and medium: held at 8 MiB.
        assert_eq!(journal_file_bytes(9858621440), 8 * mib);
        assert_eq!(journal_file_bytes(2473410560), 8 * mib);
        // The tiny scale's 64 MB device: an eighth of it.
        assert_eq!(journal_file_bytes(64 * mib), 8 * mib);
        assert_eq!(journal_file_bytes(32 * mib), 4 * mib);
        // Never below the engine's minimum, never above 100 MB.
        assert_eq!(journal_file_bytes(256 << 10), engine::journal::MIN_FILE_MAX);
        assert_eq!(journal_file_bytes(u64::MAX / 4), 100 << 20);
    }

    #[test]
    fn a_held_unit_count_gives_the_block_nearest_it_at_every_scale() {
        // The lab's LinkBench devices (cap held) at medium, large and paper: 4 908 blocks, not
        // 2 454; 4 806, not 2 403; 4 003, not 8 006.
        assert_eq!(pages_for_units(314_112, 4096), 64);
        assert_eq!(pages_for_units(1_230_336, 4096), 256);
        assert_eq!(pages_for_units(4_099_072, 4096), 1024);
        // Bounded by the sizes the simulator takes.
        assert_eq!(pages_for_units(1 << 20, 1 << 24), 16);
        assert_eq!(pages_for_units(1 << 30, 1), 1024);
        assert_eq!(pages_for_units(10, 4096), 16);
    }

    #[test]
    fn two_runs_of_one_point_get_their_own_work_dirs() {
        // The suite's two lab tests ran the same tiny point at once in one process, and the
        // second removed the first's database as it started.
        let out = tempfile::tempdir().unwrap();
        let first = new_work_dir(out.path(), "ycsb-update-only-s2-tiny").unwrap();
        std::fs::write(first.join("db"), b"the first run's").unwrap();
        let second = new_work_dir(out.path(), "ycsb-update-only-s2-tiny").unwrap();
        assert_ne!(first, second);
        assert!(
            first.join("db").exists(),
            "the first run's database is still there"
        );
        assert!(second.is_dir() && std::fs::read_dir(&second).unwrap().next().is_none());
        for d in [first, second] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    /// A factorial runs each allocation at each budget, one engine run apiece, and keeps the
    /// keys of the runs an experiment without it made (their saved points are reused).
    #[test]
    fn a_factorial_runs_every_allocation_at_every_budget_under_its_own_key() {
        let out = tempfile::tempdir().unwrap();
        let exp = crate::experiment::find("streams-quick").unwrap();
        let lab = Lab::new(out.path(), exp.clone(), None, true).unwrap();
        let work = lab.engine_work();
        let per_point: Vec<(&str, [u8; 2])> = work
            .iter()
            .filter(|w| w.workload == "ycsb-update-only" && w.seed == 2)
            .map(|w| (w.allocation.as_str(), w.dirty_pct))
            .collect();
        assert_eq!(
            per_point,
            [
                ("best", [5, 20]),
                ("best", [50, 80]),
                ("sweep", [5, 20]),
                ("sweep", [50, 80])
            ]
        );
        let keys: std::collections::BTreeSet<String> =
            work.iter().map(|w| lab.engine_key(w)).collect();
        assert_eq!(keys.len(), work.len(), "one key per engine run");
        // The named rows' runs have the keys the experiment had before the factorial.
        let before = Experiment {
            dirty_budgets: Vec::new(),
            ..exp
        };
        let old = Lab::new(out.path(), before, None, true).unwrap();
        for w in old.engine_work() {
            assert!(keys.contains(&old.engine_key(&w)), "{w:?}");
        }
    }

    #[test]
    fn reference_runs_begin_first_and_each_group_keeps_its_order() {
        let point = |workload: &str, allocation: &str, dirty_pct| EngineWork {
            workload: workload.into(),
            cache_share: 0.2,
            leaf_kb: 32,
            compressor: "none".into(),
            allocation: allocation.into(),
            dirty_pct,
            seed: 2,
            scale: "paper".into(),
        };
        let work = [
            point("a", "best", ENGINE_DIRTY_PCT),
            point("a", "sweep", [50, 80]),
            point("b", "best", ENGINE_DIRTY_PCT),
            point("b", "sweep", [50, 80]),
            // Best fit with another dirty budget is not a reference: it waits for one.
            point("b", "best", [50, 80]),
            point("c", "best", ENGINE_DIRTY_PCT),
        ];
        assert_eq!(schedule(&work), [0, 2, 5, 1, 3, 4]);
        assert!(schedule(&[]).is_empty());
    }

    #[test]
    fn stale_work_dirs_of_dead_processes_are_removed_live_ones_kept() {
        let shm = tempfile::tempdir().unwrap();
        let mine = shm
            .path()
            .join(format!("flashdoc-lab-{}", std::process::id()));
        // PID 1 is always alive; no PID is this large on Linux (pid_max is at most 2^22).
        let live = shm.path().join("flashdoc-lab-1");
        let dead = shm.path().join(format!("flashdoc-lab-{}", u32::MAX - 7));
        let other = shm.path().join("someone-else");
        for d in [&mine, &live, &dead, &other] {
            std::fs::create_dir_all(d.join("db")).unwrap();
        }
        remove_stale_work_dirs(shm.path());
        assert!(mine.exists() && live.exists() && other.exists());
        assert!(!dead.exists());
    }
}
