//! Running an experiment: one engine run per (workload, cache, leaf size, compressor) that
//! captures its I/O as an event trace, then one replay of that trace per (policy, TRIM, SSD)
//! on a fresh, aged simulated device. Every finished step is saved as JSON under
//! `OUT/points/`, so a resumed run skips it.
//!
//! Replay, not the device in the loop, is what the lab records ("mode": "trace-replay" in every
//! result): the engine's I/O does not depend on the policy (streams change where data lands
//! on flash, not what the engine writes), so one engine run serves every policy and every
//! device, and all policies see exactly the same writes.

use crate::experiment::{Experiment, ScaleSpec, SsdSpec, TrimSpec};
use anyhow::{anyhow, bail, Context, Result};
use docdb::{DocDb, DocDbConfig};
use engine::{Compressor, TableConfig};
use indicatif::{ProgressBar, ProgressStyle};
use placement::policy::PlacementConfig;
use placement::sim::{ReplayConfig, TraceReplay, TrimConfig};
use placement::{Event, Observer, TraceObserver, TrimWhen};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::measure::{PhaseResult, Progress};
use workload::store::InProc;

/// What one engine run measured on the host.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineRun {
    pub key: String,
    pub workload: String,
    pub cache_mb: u64,
    pub leaf_kb: u32,
    pub compressor: String,
    pub scale: ScaleSpec,
    pub load: PhaseResult,
    pub run: PhaseResult,
    pub trace: PathBuf,
    /// The event index where the run phase begins (end of load).
    pub end_of_load_event: u64,
    pub events: u64,
    /// Bytes of the collection and index files at the end.
    pub db_bytes: u64,
    /// Bytes written in the run phase by file kind (collection, primary index, secondary
    /// index, journal, metadata) and by page kind.
    pub write_bytes_by_file: BTreeMap<String, u64>,
    pub write_bytes_by_page: BTreeMap<String, u64>,
    pub checkpoints: u64,
    pub wall_s: f64,
    /// Workload-specific measurements (the compression experiment's insert, cold-read and
    /// warm-read seconds).
    #[serde(default)]
    pub extra: BTreeMap<String, f64>,
}

/// What one replay measured on the simulated device.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceRun {
    pub policy: String,
    pub trim: TrimSpec,
    pub ssd: SsdSpec,
    pub waf: f64,
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
    pub replay_wall_s: f64,
}

/// One result row: an engine run and one replay of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    pub experiment: String,
    pub mode: String,
    pub workload: String,
    pub cache_mb: u64,
    pub leaf_kb: u32,
    pub compressor: String,
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
struct CountingTrace {
    inner: TraceObserver,
    count: AtomicU64,
    checkpoints: AtomicU64,
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
}

fn slug(s: &str) -> String {
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
        let scale = ScaleSpec::named(&exp.scale).expect("validated");
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
        })
    }

    fn engine_key(&self, workload: &str, cache: u64, leaf: u32, comp: &str) -> String {
        slug(&format!(
            "{workload}-c{cache}-l{leaf}-{comp}-{}",
            self.exp.scale
        ))
    }

    /// Runs every point not already done and returns all points.
    pub fn run_all(&self) -> Result<Vec<Point>> {
        let mut points = Vec::new();
        let e = &self.exp;
        let engine_total =
            e.workloads.len() * e.cache_mb.len() * e.leaf_kb.len() * e.compressors.len();
        let replay_total = engine_total * e.policies.len() * e.trims.len() * e.ssds.len();
        let bar = self.bar(replay_total as u64, "points");
        for w in &e.workloads {
            for &cache in &e.cache_mb {
                for &leaf in &e.leaf_kb {
                    for comp in &e.compressors {
                        let run = self.engine_run(w, cache, leaf, comp, &bar)?;
                        for policy in &e.policies {
                            for trim in &e.trims {
                                for ssd in &e.ssds {
                                    bar.set_message(format!(
                                        "{w} c{cache} l{leaf}: replay {policy} trim {} {}",
                                        trim.label(),
                                        ssd.label()
                                    ));
                                    let dev = self.replay(&run, policy, trim, ssd)?;
                                    points.push(self.point(&run, dev));
                                    bar.inc(1);
                                }
                            }
                        }
                    }
                }
            }
        }
        bar.finish_and_clear();
        Ok(points)
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

    fn point(&self, run: &EngineRun, device: DeviceRun) -> Point {
        let overall = overall(&run.run);
        Point {
            experiment: self.exp.name.clone(),
            mode: "trace-replay".into(),
            workload: run.workload.clone(),
            cache_mb: run.cache_mb,
            leaf_kb: run.leaf_kb,
            compressor: run.compressor.clone(),
            policy: device.policy.clone(),
            trim: device.trim.label(),
            ssd: device.ssd.label(),
            device_fill: self.exp.device_fill,
            host_ops_s: run.run.throughput_ops_sec,
            host_p50_us: overall.0,
            host_p99_us: overall.1,
            load_docs_s: run.load.throughput_ops_sec,
            db_mb: run.db_bytes as f64 / (1 << 20) as f64,
            device,
        }
    }

    /// The engine run for these settings, from disk if it was done before.
    pub fn engine_run(
        &self,
        workload: &str,
        cache: u64,
        leaf: u32,
        comp: &str,
        bar: &ProgressBar,
    ) -> Result<EngineRun> {
        let key = self.engine_key(workload, cache, leaf, comp);
        let saved = self.out.join("points").join(format!("engine-{key}.json"));
        if let Ok(text) = std::fs::read_to_string(&saved) {
            if let Ok(r) = serde_json::from_str::<EngineRun>(&text) {
                if r.trace.exists() {
                    return Ok(r);
                }
            }
        }
        bar.set_message(format!("{workload} c{cache} l{leaf} {comp}: engine run"));
        let r = run_engine(&self.out, &key, workload, cache, leaf, comp, &self.scale)?;
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
            "replay-{}-{policy}-t{}-{}-f{}-p{}",
            run.key,
            trim.label(),
            ssd.label(),
            self.exp.device_fill,
            self.exp.precondition
        ));
        let saved = self.out.join("points").join(format!("{key}.json"));
        if let Ok(text) = std::fs::read_to_string(&saved) {
            if let Ok(d) = serde_json::from_str::<DeviceRun>(&text) {
                return Ok(d);
            }
        }
        let d = replay_run(
            run,
            policy,
            trim,
            ssd,
            self.exp.device_fill,
            self.exp.precondition,
        )?;
        std::fs::write(&saved, serde_json::to_string_pretty(&d)?)?;
        Ok(d)
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

/// Loads and runs one workload on a fresh database, tracing every I/O event.
pub fn run_engine(
    out: &Path,
    key: &str,
    workload: &str,
    cache_mb: u64,
    leaf_kb: u32,
    comp: &str,
    scale: &ScaleSpec,
) -> Result<EngineRun> {
    let started = Instant::now();
    let work = out.join("work").join(key);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let trace = out.join("traces").join(format!("{key}.trace"));
    let obs = Arc::new(CountingTrace {
        inner: TraceObserver::create(&trace)
            .with_context(|| format!("creating {}", trace.display()))?,
        count: AtomicU64::new(0),
        checkpoints: AtomicU64::new(0),
    });
    let mut cfg = DocDbConfig::disk(work.join("db"));
    cfg.engine.cache_size = cache_mb << 20;
    cfg.engine.checkpoint_interval = Some(Duration::from_secs_f64(scale.checkpoint_secs));
    cfg.engine.observer = Some(obs.clone());
    cfg.collection_table = table_template("collection", leaf_kb, comp)?;
    cfg.index_table = table_template("index", leaf_kb, comp)?;
    let reopen_cfg = cfg.clone();
    let db = DocDb::open(cfg).map_err(|e| anyhow!("opening the lab database: {e}"))?;
    let mut extra = BTreeMap::new();
    let (load, run, eol) = if workload == "chapter10" {
        let (load, eol) = chapter10_insert(&db, scale.chapter10_docs, &obs.count)?;
        (load, PhaseResult::default(), eol)
    } else {
        drive(&db, workload, scale, &obs.count)?
    };
    db.shutdown()
        .map_err(|e| anyhow!("shutting the lab database down: {e}"))?;
    drop(db);
    if workload == "chapter10" {
        extra.insert("insert_s".into(), load.runtime_ms / 1e3);
        // The chapter's read job: restart, then fetch every document 12 times; the first
        // pass is cold (nothing cached), the rest warm.
        let mut c = reopen_cfg;
        c.engine.observer = None;
        let db = DocDb::open(c).map_err(|e| anyhow!("reopening the lab database: {e}"))?;
        let mut passes = Vec::new();
        for _ in 0..12 {
            let t = Instant::now();
            let n = db
                .find("bench", "benchmark", &docdb::FindQuery::default())
                .map_err(|e| anyhow!("{e}"))?
                .count();
            if n as u64 != scale.chapter10_docs {
                bail!(
                    "read pass returned {n} documents, expected {}",
                    scale.chapter10_docs
                );
            }
            passes.push(t.elapsed().as_secs_f64());
        }
        db.shutdown().map_err(|e| anyhow!("{e}"))?;
        extra.insert("cold_read_s".into(), passes[0]);
        extra.insert("warm_read_s".into(), passes[1..].iter().sum::<f64>() / 11.0);
    }
    obs.flush();
    // The whole database is on disk after a clean shutdown; size it from its files.
    let db_bytes = table_bytes(&work.join("db"))?;
    let (by_file, by_page) = write_shares(&trace, eol)?;
    let events = obs.count.load(Ordering::Relaxed);
    let _ = std::fs::remove_dir_all(&work);
    Ok(EngineRun {
        key: key.to_string(),
        workload: workload.to_string(),
        cache_mb,
        leaf_kb,
        compressor: comp.to_string(),
        scale: scale.clone(),
        load,
        run,
        trace,
        end_of_load_event: eol,
        events,
        db_bytes,
        write_bytes_by_file: by_file,
        write_bytes_by_page: by_page,
        checkpoints: obs.checkpoints.load(Ordering::Relaxed),
        wall_s: started.elapsed().as_secs_f64(),
        extra,
    })
}

/// Inserts `n` documents of the chapter's shape (seed 001 §10.3.2) one by one, then
/// checkpoints. Returns the insert phase and the end-of-load event index.
fn chapter10_insert(db: &Arc<DocDb>, n: u64, events: &AtomicU64) -> Result<(PhaseResult, u64)> {
    use bson::{doc, Bson, DateTime, Document};
    use rand::Rng;
    let mut rng = workload::rng(10);
    let fields = |rng: &mut workload::Rng| {
        let r: f64 = rng.gen();
        let int = (1e8 * r).floor() as i64;
        // JavaScript's Math.floor(1e64 * r).toString(36): about 40 base-36 digits.
        let s: String = (0..40)
            .map(|_| char::from_digit(rng.gen_range(0..36), 36).unwrap())
            .collect();
        (DateTime::from_millis((1.5e12 * r) as i64), int, s, int % 2)
    };
    let started = Instant::now();
    for _ in 0..n {
        let (d, i, s, b) = fields(&mut rng);
        let mut docu =
            doc! {"random_date": d, "random_int": i, "random_string": s, "random_bool": b};
        let mut arr = Vec::new();
        for k in 0..16 {
            let (d, i, s, b) = fields(&mut rng);
            let sub: Document =
                doc! {"date_field": d, "int_field": i, "string_field": s, "bool_field": b};
            if k < 8 {
                arr.push(Bson::Document(sub));
            } else {
                docu.insert(format!("sub{k}"), sub);
            }
        }
        docu.insert("arr", arr);
        let out = db.insert(
            "bench",
            "benchmark",
            vec![docu],
            docdb::WriteOpts::default(),
        );
        if let Some(e) = out.write_errors.first() {
            bail!("insert failed: {}", e.error);
        }
    }
    db.engine().checkpoint().map_err(|e| anyhow!("{e}"))?;
    let elapsed = started.elapsed();
    let load = PhaseResult {
        phase: "load".into(),
        runtime_ms: elapsed.as_secs_f64() * 1e3,
        operations: n,
        throughput_ops_sec: n as f64 / elapsed.as_secs_f64().max(1e-9),
        ..PhaseResult::default()
    };
    db.engine().end_of_load();
    Ok((load, events.load(Ordering::Relaxed)))
}

/// Every write of the run phase as (time s, file kind label, offset MB, stream `policy` gives
/// it), at most `max_per_kind` per file kind (evenly thinned), and checkpoint commit times.
pub type IoSamples = (BTreeMap<String, Vec<(f64, f64, u8)>>, Vec<f64>);

pub fn io_pattern(
    run: &EngineRun,
    policy: &str,
    streams: u8,
    max_per_kind: usize,
) -> Result<IoSamples> {
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

/// The load phase, a checkpoint and the end-of-load mark (its event index is returned), then
/// the run phase.
fn drive(
    db: &Arc<DocDb>,
    workload: &str,
    scale: &ScaleSpec,
    events: &AtomicU64,
) -> Result<(PhaseResult, PhaseResult, u64)> {
    use workload::linkbench::{self, LinkBenchConfig, Mix};
    use workload::ycsb::{self, Workload, YcsbConfig};
    let end_of_load = || -> Result<u64> {
        // The seeds start their run phase from a loaded, checkpointed database.
        db.engine()
            .checkpoint()
            .map_err(|e| anyhow!("checkpoint after load: {e}"))?;
        db.engine().end_of_load();
        Ok(events.load(Ordering::Relaxed))
    };
    if let Some(rest) = workload.strip_prefix("ycsb-") {
        let w = match rest {
            "update-heavy" => Workload::UpdateHeavy,
            "update-only" | "load" => Workload::UpdateOnly,
            other => bail!("unknown YCSB workload {other}"),
        };
        let mut cfg = YcsbConfig::workload(w, scale.ycsb_records, scale.ycsb_ops);
        cfg.threads = scale.threads;
        cfg.seed = 1;
        let store = InProc::new(db.clone(), "ycsb");
        ycsb::prepare_load(&cfg, &store)?;
        let load = ycsb::run_load(&cfg, &store, Progress::Hidden)?;
        let eol = end_of_load()?;
        let run = if rest == "load" {
            PhaseResult::default()
        } else {
            ycsb::run_ops(&cfg, &store, Progress::Hidden)?
        };
        return Ok((load, run, eol));
    }
    if let Some(mix) = workload.strip_prefix("linkbench-") {
        let cfg = LinkBenchConfig {
            maxid1: scale.linkbench_maxid1,
            requests: Some(scale.linkbench_requests),
            mix: mix.parse::<Mix>().map_err(|e| anyhow!(e))?,
            requesters: scale.threads,
            loaders: scale.threads,
            seed: 1,
            // LinkBench's out-degree distribution has a tail that does not shrink with the
            // graph: at lab scale a handful of nodes would hold most links. Cap the degree at
            // a tenth of the node count so a small graph keeps the shape of a large one.
            nlinks_cap: Some((scale.linkbench_maxid1 as u64 / 10).max(100)),
            ..LinkBenchConfig::default()
        };
        let store = InProc::new(db.clone(), cfg.database.clone());
        linkbench::prepare_load(&store)?;
        let load = linkbench::run_load(&cfg, &store, Progress::Hidden)?;
        let eol = end_of_load()?;
        let run = linkbench::run_ops(&cfg, &store, Progress::Hidden)?;
        return Ok((load, run, eol));
    }
    bail!("unknown workload {workload}")
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

/// Bytes written after event `from`, by file kind (the primary index told apart) and by page
/// kind.
pub fn write_shares(
    trace: &Path,
    from: u64,
) -> Result<(BTreeMap<String, u64>, BTreeMap<String, u64>)> {
    let mut by_file = BTreeMap::new();
    let mut by_page = BTreeMap::new();
    for (i, ev) in placement::trace::TraceReader::open(trace)?.enumerate() {
        if let Event::Write(w) = ev? {
            if (i as u64) < from {
                continue;
            }
            let file = match (w.file_kind, w.id_index) {
                (placement::FileKind::Index, true) => "primary index",
                (placement::FileKind::Index, false) => "secondary index",
                (k, _) => k.name(),
            };
            *by_file.entry(file.to_string()).or_default() += w.len as u64;
            *by_page.entry(w.page_kind.name().to_string()).or_default() += w.len as u64;
        }
    }
    Ok((by_file, by_page))
}

fn replay_run(
    run: &EngineRun,
    policy: &str,
    trim: &TrimSpec,
    ssd: &SsdSpec,
    fill: f64,
    precondition: bool,
) -> Result<DeviceRun> {
    let started = Instant::now();
    let pc = PlacementConfig {
        streams: ssd.streams,
        ..PlacementConfig::default()
    };
    // Device capacity: the trace's peak file footprint is `fill` of it.
    let ext = placement::sim::scan_events(
        placement::trace::TraceReader::open(&run.trace)?.map(|e| e.map_err(anyhow::Error::from)),
        false,
    )?;
    // At least 64 MiB, so even the tiny test scale has enough erase units for 8 open streams.
    let logical_pages = ((ext.peak_file_pages as f64 / fill).ceil() as u64).max(16 * 1024);
    let mut dev = ssd::SsdConfig::with_op(logical_pages, ssd.op)?;
    // A lab-sized device is small; a real one has thousands of erase blocks, so the open
    // block of each stream costs nothing. Keep that true: at least ~1024 blocks, by using
    // smaller blocks (a power of two, 16 to 256 pages).
    dev.pages_per_block = pages_per_block(logical_pages);
    dev.set_op(ssd.op)?;
    dev.streams = ssd.streams as u32;
    dev.gc = ssd::GcPolicy::parse(&ssd.gc)?;
    dev.timing = Some(ssd::TimingConfig::default());
    dev.validate()?;
    let when = TrimWhen::parse(&trim.when).map_err(|e| anyhow!(e))?;
    let job = TraceReplay {
        trace: &run.trace,
        policy,
        placement: &pc,
        device: dev,
        precondition: precondition.then(ssd::PreconditionConfig::default),
        alloc: ssd::AllocPolicy::NextFit,
        fs_discard: true,
        replay: ReplayConfig {
            trim: TrimConfig {
                batch: trim.batch,
                when,
            },
            end_of_load_at: Some(run.end_of_load_event),
            reset_stats_at: run.end_of_load_event.max(1),
        },
    };
    let out = placement::sim::replay_trace_file(&job, |_, _| {}).map_err(|e| anyhow!("{e}"))?;
    let r = &out.report;
    let t = r
        .timing
        .as_ref()
        .ok_or_else(|| anyhow!("the device model has no timing"))?;
    let device_s = t.makespan_ns as f64 / 1e9;
    Ok(DeviceRun {
        policy: policy.to_string(),
        trim: trim.clone(),
        ssd: ssd.clone(),
        waf: r.write_amplification,
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
        modeled_ops_s: if device_s > 0.0 {
            run.run.operations as f64 / device_s
        } else {
            0.0
        },
        logical_gib: logical_pages as f64 * ssd::PAGE_BYTES as f64 / (1u64 << 30) as f64,
        trimmed_bytes: out.trim.map(|s| s.released_bytes).unwrap_or(0),
        replay_wall_s: started.elapsed().as_secs_f64(),
    })
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
    let mut csv = String::from("experiment,workload,cache_mb,leaf_kb,compressor,policy,trim,ssd,device_fill,host_ops_s,host_p50_us,host_p99_us,load_docs_s,db_mb,waf,gc_copies,erases,erase_max,device_s,modeled_ops_s,device_mb_s,write_p99_us,read_p99_us,trimmed_bytes\n");
    for p in points {
        let d = &p.device;
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.2},{:.4},{},{},{},{:.4},{:.1},{:.2},{:.1},{:.1},{}\n",
            p.experiment, p.workload, p.cache_mb, p.leaf_kb, p.compressor, p.policy, p.trim, p.ssd, p.device_fill,
            p.host_ops_s, p.host_p50_us, p.host_p99_us, p.load_docs_s, p.db_mb, d.waf, d.gc_copies, d.erases, d.erase_max,
            d.device_s, d.modeled_ops_s, d.device_mb_s, d.write_p99_us, d.read_p99_us, d.trimmed_bytes
        ));
    }
    std::fs::write(out.join("results.csv"), csv)?;
    Ok(())
}

/// The engine runs behind the points, in order.
pub fn engine_runs(lab: &Lab) -> Result<Vec<EngineRun>> {
    let mut v: Vec<EngineRun> = Vec::new();
    for e in std::fs::read_dir(lab.out.join("points"))? {
        let p = e?.path();
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("engine-"))
        {
            v.push(serde_json::from_str(&std::fs::read_to_string(&p)?)?);
        }
    }
    v.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(v)
}
