//! Seed 001's benchmark (§10.3): its documents, its insert job and read job, its engine
//! configurations, what it measures (startup, insert, shutdown, disk use, cold and warm read
//! passes), and the run of the in-place engine (MMAPv1's design, crates/inplace) beside the
//! copy-on-write engine's runs, which `run::run_engine` makes with the same functions.
//!
//! Both engines get the same documents (the same generator and seed), the same cache (the
//! chapter's `cacheSizeGB: 8`, which held its whole data set), the same durability (a journal
//! group-committed every 100 ms, uncompressed as the chapter configured WiredTiger's, writes
//! acknowledged before their group commit, one write-back or checkpoint at the end of the
//! insert job), the same client (one thread, one document per insert) and the same host, one
//! engine run at a time.

use crate::experiment::{Experiment, ScaleSpec, IN_PLACE};
use crate::run::{self, CountingTrace, EngineRun, Lab, Point, Sizing};
use anyhow::{anyhow, bail, Result};
use docdb::{DocDb, DocDbConfig};
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use workload::measure::PhaseResult;

/// The read job's passes over the collection (the chapter's `NUM_LOOPS`, Table 10.5's rows):
/// the first is cold, the others warm.
pub const READ_PASSES: usize = 16;

/// The cache every engine of the experiment gets: the chapter's WiredTiger `cacheSizeGB: 8`
/// (MMAPv1 had the machine's 16 GB of page cache). It holds the data at every scale, so the
/// warm passes read from memory as the chapter's did.
pub const CACHE_BYTES: u64 = 8 << 30;

/// What the chapter's configurations set beside the block compressor, on an engine
/// configuration the lab made: the cache, an uncompressed journal (`journalCompressor:
/// none`), and index prefix compression only where a block compressor is on (its
/// uncompressed configuration sets `prefixCompression: false`, the others `true`).
pub(crate) fn configure(cfg: &mut DocDbConfig) {
    cfg.engine.cache_size = CACHE_BYTES;
    if let Some(j) = cfg.engine.journal.as_mut() {
        j.compressor = engine::JournalCompressor::None;
    }
    cfg.index_table.prefix_compression =
        cfg.collection_table.compressor != engine::Compressor::None;
}

/// The insert job's result: its phase, and the bytes of the documents it inserted (BSON).
pub(crate) struct Inserted {
    pub phase: PhaseResult,
    pub doc_bytes: u64,
}

/// Inserts `n` documents of the chapter's shape (seed 001 §10.3.2) one by one, then
/// checkpoints (the copy-on-write engine) or writes back (the in-place one).
pub(crate) fn insert(db: &Arc<DocDb>, n: u64) -> Result<Inserted> {
    let mut rng = workload::rng(10);
    let mut doc_bytes = 0u64;
    let started = Instant::now();
    for _ in 0..n {
        let docu = document(&mut rng);
        doc_bytes += bson::to_vec(&docu)?.len() as u64;
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
    let phase = PhaseResult {
        phase: "load".into(),
        runtime_ms: elapsed.as_secs_f64() * 1e3,
        operations: n,
        throughput_ops_sec: n as f64 / elapsed.as_secs_f64().max(1e-9),
        ..PhaseResult::default()
    };
    Ok(Inserted { phase, doc_bytes })
}

/// One document of `insert.js`: four typed fields, an array of eight four-field subdocuments
/// and eight four-field subdocuments `sub8`..`sub15`.
fn document(rng: &mut workload::Rng) -> bson::Document {
    use bson::{doc, Bson, DateTime, Document};
    use rand::Rng;
    let mut fields = || {
        let r: f64 = rng.gen();
        let int = (1e8 * r).floor() as i64;
        // JavaScript's Math.floor(1e64 * r).toString(36): about 40 base-36 digits.
        let s: String = (0..40)
            .map(|_| char::from_digit(rng.gen_range(0..36), 36).unwrap())
            .collect();
        (DateTime::from_millis((1.5e12 * r) as i64), int, s, int % 2)
    };
    let (d, i, s, b) = fields();
    let mut docu = doc! {"random_date": d, "random_int": i, "random_string": s, "random_bool": b};
    let mut arr = Vec::new();
    for k in 0..16 {
        let (d, i, s, b) = fields();
        let sub: Document =
            doc! {"date_field": d, "int_field": i, "string_field": s, "bool_field": b};
        if k < 8 {
            arr.push(Bson::Document(sub));
        } else {
            docu.insert(format!("sub{k}"), sub);
        }
    }
    docu.insert("arr", arr);
    docu
}

/// The chapter's read job (seed 001 §10.3.4): restart on the database the insert job left,
/// fetch every document [`READ_PASSES`] times, shut down. The first pass is cold (nothing in
/// the engine's cache), the others warm. Returns the restart's and the shutdown's seconds,
/// every pass's, the cold pass, the warm passes' mean and the whole job's.
pub(crate) fn reads(mut cfg: DocDbConfig, n: u64) -> Result<BTreeMap<String, f64>> {
    cfg.engine.observer = None;
    let mut extra = BTreeMap::new();
    let opening = Instant::now();
    let db = DocDb::open(cfg).map_err(|e| anyhow!("reopening the lab database: {e}"))?;
    extra.insert("restart_s".into(), opening.elapsed().as_secs_f64());
    let mut passes = Vec::new();
    for _ in 0..READ_PASSES {
        let t = Instant::now();
        let got = db
            .find("bench", "benchmark", &docdb::FindQuery::default())
            .map_err(|e| anyhow!("{e}"))?
            .count();
        if got as u64 != n {
            bail!("read pass returned {got} documents, expected {n}");
        }
        passes.push(t.elapsed().as_secs_f64());
    }
    let closing = Instant::now();
    db.shutdown().map_err(|e| anyhow!("{e}"))?;
    extra.insert("restart_shutdown_s".into(), closing.elapsed().as_secs_f64());
    for (i, s) in passes.iter().enumerate() {
        extra.insert(format!("read_pass_{:02}_s", i + 1), *s);
    }
    let warm = &passes[1..];
    extra.insert("cold_read_s".into(), passes[0]);
    extra.insert(
        "warm_read_s".into(),
        warm.iter().sum::<f64>() / warm.len() as f64,
    );
    extra.insert("read_job_s".into(), passes.iter().sum());
    Ok(extra)
}

/// What a directory takes on disk: the blocks allocated to its files (`du -s
/// --block-size=1`, the chapter's measure), and their sizes (a sparse file's unwritten pages
/// take no block but count in its size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskUse {
    pub allocated: u64,
    pub apparent: u64,
}

/// [`DiskUse`] of every file under `dir` whose name `counts`.
pub fn disk_use(dir: &Path, counts: &dyn Fn(&str) -> bool) -> Result<DiskUse> {
    use std::os::unix::fs::MetadataExt;
    let mut total = DiskUse::default();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        if meta.is_dir() {
            let sub = disk_use(&e.path(), counts)?;
            total.allocated += sub.allocated;
            total.apparent += sub.apparent;
        } else if counts(&e.file_name().to_string_lossy()) {
            total.allocated += meta.blocks() * 512;
            total.apparent += meta.len();
        }
    }
    Ok(total)
}

/// The measurements of the insert job's engine run, as the report reads them: the startup on
/// an empty dbPath, the insert job, the shutdown, the dbPath's disk use after it (every file,
/// journal included, as `du`), the documents' bytes; then the read job's ([`reads`]).
pub(crate) fn measurements(
    timings: [f64; 3],
    inserted: &Inserted,
    db_path: DiskUse,
    reads: BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    let [startup_s, insert_s, shutdown_s] = timings;
    let mut extra = reads;
    extra.insert("startup_s".into(), startup_s);
    extra.insert("insert_s".into(), insert_s);
    extra.insert("shutdown_s".into(), shutdown_s);
    extra.insert("du_bytes".into(), db_path.allocated as f64);
    extra.insert("dbpath_apparent_bytes".into(), db_path.apparent as f64);
    extra.insert("doc_bytes".into(), inserted.doc_bytes as f64);
    extra
}

/// What the traced part of the run (the insert job and its shutdown) wrote: bytes to the
/// journal and to the data files (every other file kind).
pub(crate) fn written(trace: &Path) -> Result<BTreeMap<String, f64>> {
    let shares = run::write_shares(trace, 0)?;
    let journal = shares.by_file.get("journal").copied().unwrap_or(0);
    let all: u64 = shares.by_file.values().sum();
    Ok(BTreeMap::from([
        ("written_journal_bytes".to_string(), journal as f64),
        ("written_data_bytes".to_string(), (all - journal) as f64),
    ]))
}

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
    configure(&mut cfg);
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
    let inserted = insert(&db, scale.chapter10_docs)?;
    db.engine().end_of_load();
    let end_of_load_event = obs.events();
    let stats = db.engine().stats();
    let closing = Instant::now();
    db.shutdown()
        .map_err(|e| anyhow!("shutting the lab database down: {e}"))?;
    let shutdown_s = closing.elapsed().as_secs_f64();
    drop(db);
    let db_path = disk_use(&db_dir, &|_| true)?;
    let data_files = disk_use(&db_dir, &|name| name.starts_with("mmapv1."))?;
    let mut extra = measurements(
        [startup_s, inserted.phase.runtime_ms / 1e3, shutdown_s],
        &inserted,
        db_path,
        reads(reopen_cfg, scale.chapter10_docs)?,
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
    extra.extend(written(&trace)?);
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
