//! `flashdoc engine-bench`: the storage engine alone under a YCSB-style workload, the same one
//! `bench/wiredtiger/wtbench.c` runs on WiredTiger, so the two can be compared side by side.
//!
//! Load: N records, one `put` each from one thread (as YCSB's MongoDB binding inserts one
//! document per call, and as wtbench inserts one cursor item per call), key
//! `"user" + fnvhash64(i)` (YCSB's hashed insert order), 1000-byte value; then a checkpoint
//! (wtbench counts it in the load time, and so do we). Run: T threads for D seconds, each draws
//! a record from YCSB's scrambled zipfian (θ 0.99) over the N records and reads it (`get`) or
//! overwrites it with a fresh 1000-byte value (`put`), read share `--read-pct`. Journal on,
//! group-committed (synced) every 100 ms, no journal compression (WiredTiger's log default);
//! a checkpoint every `--checkpoint-secs`. The engine runs `--flash-mode` (flash, the default,
//! as `flashdoc serve`), and the JSON records its effective flash settings (`flash`). Latency is the engine call alone (key and value are
//! built before the clock starts, as in wtbench), recorded in ns in an HdrHistogram; throughput
//! is also counted in one-second windows, with the checkpoints over them (`bench_windows`).

use crate::bench_windows::{self, Sample};
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::{
    flash_mode_defaults, Compressor, DirectIo, DiskEngine, EngineConfig, EngineKind, FlashMode,
    FlashReport, JournalCompressor, JournalConfig, KvEngine, TableConfig, TableId,
};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, RngCore};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use workload::ycsb::{write_key_name, KeyOrder, NumberGenerator, ScrambledZipfianGenerator};

/// Value size of every record (YCSB's 10 fields × 100 bytes).
const VALUE_LEN: usize = 1000;
const TABLE: &str = "usertable";
/// Run threads add to the shared operation count every this many operations.
const DONE_BATCH: u64 = 16;
/// The run phase samples the operation count and the checkpoint counters this often.
const SAMPLE_MS: u64 = 100;

#[derive(Args, Debug, Clone)]
pub struct EngineBenchArgs {
    /// Records loaded before the run.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Threads in the run phase (the load is single-threaded).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Length of the run phase in seconds.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Percentage of reads in the run phase; the rest are updates.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub read_pct: u8,
    /// Cache size in MB.
    #[arg(long, default_value_t = 256)]
    pub cache_mb: u64,
    /// Maximum leaf page size in KB.
    #[arg(long, default_value_t = 32)]
    pub leaf_kb: u32,
    /// Maximum internal page size in KB.
    #[arg(long, default_value_t = 4)]
    pub internal_kb: u32,
    /// Block compressor: none, snappy, zlib or zstd.
    #[arg(long, default_value = "none")]
    pub compressor: String,
    /// Journal compressor: none (WiredTiger's log default, as in wtbench), snappy or zstd.
    #[arg(long, default_value = "none")]
    pub journal_compressor: String,
    /// Seconds between checkpoints.
    #[arg(long, default_value_t = 60)]
    pub checkpoint_secs: u64,
    /// Eviction threads (default: the engine's, half the cores from 1 to 4).
    #[arg(long)]
    pub eviction_threads: Option<usize>,
    /// Files opened with O_DIRECT: none (buffered, MongoDB's default), data, log or data,log
    /// (WiredTiger's `direct_io`).
    #[arg(long, default_value = "none")]
    pub direct_io: String,
    /// Database directory (must not exist yet). Default: a fresh temporary directory under
    /// ./target (or the system temp dir), removed afterwards unless --keep.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Keep the database directory afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Seed of the run's random streams (thread i uses seed + i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// storage.flash.mode the engine runs: flash (the default, as `flashdoc serve`) or off
    /// (WiredTiger's behaviour: best fit, 5/20 dirty, no placement, hints or TRIM).
    #[arg(long, default_value = "flash")]
    pub flash_mode: String,
    /// Eviction's dirty target and trigger, percent of the cache (default: the mode's), as
    /// wtbench's two optional last arguments: for a row at equal dirty budget.
    #[arg(long, num_args = 2, value_names = ["TARGET", "TRIGGER"])]
    pub dirty_pct: Option<Vec<u8>>,
    /// Write the parameters and results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Latency histograms of one thread, in ns.
struct Hists {
    read: Histogram<u64>,
    update: Histogram<u64>,
}

impl Hists {
    fn new() -> Result<Self> {
        // 1 ns .. 100 s, 3 significant digits (YCSB's precision).
        let h = || Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3);
        Ok(Hists {
            read: h()?,
            update: h()?,
        })
    }
}

pub fn run(args: EngineBenchArgs) -> Result<()> {
    if args.threads == 0 || args.records == 0 || args.seconds == 0 {
        bail!("--records, --threads and --seconds must be positive");
    }
    let compressor: Compressor = args.compressor.parse()?;
    let journal_compressor: JournalCompressor = args.journal_compressor.parse()?;
    let direct_io: DirectIo = args.direct_io.parse()?;

    // The database directory.
    let (db, _tmp) = match &args.db {
        Some(d) => {
            if d.exists() {
                bail!(
                    "--db {} already exists; give a fresh directory",
                    d.display()
                );
            }
            (d.clone(), None)
        }
        None => {
            let base = if Path::new("target").is_dir() {
                PathBuf::from("target")
            } else {
                std::env::temp_dir()
            };
            let t = tempfile::Builder::new()
                .prefix("engine-bench-")
                .tempdir_in(&base)
                .with_context(|| format!("creating a temporary directory in {}", base.display()))?;
            let p = t.path().to_path_buf();
            (p, Some(t))
        }
    };
    let mut tmp = _tmp;
    let result = bench(&args, &db, compressor, journal_compressor, direct_io);
    if args.keep {
        if let Some(t) = tmp.take() {
            let _ = t.keep();
        }
        eprintln!("database kept in {}", db.display());
    } else if tmp.is_none() {
        std::fs::remove_dir_all(&db).with_context(|| format!("removing {}", db.display()))?;
    }
    drop(tmp);
    result
}

/// What the load phase measured.
struct Loaded {
    /// Seconds of the puts alone.
    insert_s: f64,
    /// Seconds of the puts and the final checkpoint.
    total_s: f64,
    stats: serde_json::Value,
}

/// What the run phase measured.
struct Ran {
    read: Histogram<u64>,
    update: Histogram<u64>,
    all: Histogram<u64>,
    run_s: f64,
    /// One-second throughput windows and the checkpoints over them (`bench_windows`).
    windows: serde_json::Value,
}

/// The engine's figures once the run is over.
struct Closed {
    stats: serde_json::Value,
    close_s: f64,
}

fn bench(
    args: &EngineBenchArgs,
    db: &Path,
    compressor: Compressor,
    journal_compressor: JournalCompressor,
    direct_io: DirectIo,
) -> Result<()> {
    let (engine, table, eviction_threads, flash) =
        open_engine(args, db, compressor, journal_compressor, direct_io)?;
    eprintln!("engine-bench: {}", flash.log_line());
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "engine-bench: {} records, {} threads, {} s, {}% reads, cache {} MB, leaf {} KB, internal {} KB, compressor {}, direct_io {direct_io}, db {}",
        args.records, args.threads, args.seconds, args.read_pct, args.cache_mb, args.leaf_kb,
        args.internal_kb, compressor.name(), db.display()
    );
    let loaded = load_phase(args, &engine, table)?;
    let ran = run_phase(args, &engine, table)?;
    let stats = engine.stats();
    let tc = Instant::now();
    engine.close()?;
    let closed = Closed {
        stats,
        close_s: tc.elapsed().as_secs_f64(),
    };
    print_report(args, &loaded, &ran, &closed);
    if let Some(out) = &args.json {
        let doc = json!({
            "bench": "engine-bench",
            "engine": "flashdoc",
            "timestamp": rfc3339_now(),
            "params": {
                "records": args.records, "threads": args.threads, "seconds": args.seconds,
                "read_pct": args.read_pct, "cache_mb": args.cache_mb, "leaf_kb": args.leaf_kb,
                "internal_kb": args.internal_kb, "compressor": compressor.name(),
                "journal_compressor": journal_compressor.to_string(),
                "journal_commit_interval_ms": 100, "checkpoint_secs": args.checkpoint_secs,
                "eviction_threads": eviction_threads,
                "direct_io": direct_io.to_string(),
                "seed": args.seed, "db": db.display().to_string(), "value_len": VALUE_LEN,
                "key": "user + fnvhash64(record) (YCSB hashed insertorder)",
                "distribution": "YCSB ScrambledZipfianGenerator, theta 0.99",
                "load": "single thread, one put per record, then a checkpoint",
                "build": if cfg!(debug_assertions) { "debug" } else { "release" },
            },
            "flash": flash,
            "results": results_json(args, &loaded, &ran, &closed),
            "engine_stats": closed.stats,
            "engine_stats_after_load": loaded.stats,
            "machine": machine_info(nproc),
        });
        if let Some(dir) = out.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        std::fs::write(out, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", out.display()))?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// Opens the engine with the journal and checkpoints wtbench uses and creates the table;
/// returns them with the eviction thread count and the flash settings in force.
fn open_engine(
    args: &EngineBenchArgs,
    db: &Path,
    compressor: Compressor,
    journal_compressor: JournalCompressor,
    direct_io: DirectIo,
) -> Result<(Arc<DiskEngine>, TableId, usize, FlashReport)> {
    let mode: FlashMode = args.flash_mode.parse()?;
    let mut cfg = EngineConfig::with_mode(db, mode);
    if let Some(pct) = &args.dirty_pct {
        cfg.eviction_dirty_target = pct[0];
        cfg.eviction_dirty_trigger = pct[1];
    }
    cfg.cache_size = args.cache_mb << 20;
    cfg.direct_io = direct_io;
    if let Some(n) = args.eviction_threads {
        cfg.eviction_threads = n;
    }
    let eviction_threads = cfg.eviction_threads;
    cfg.journal = Some(JournalConfig {
        dir: db.join("journal"),
        file_max: 100 << 20,
        commit_interval: Duration::from_millis(100),
        compressor: journal_compressor,
        preallocate: true,
        block_aligned: false,
    });
    cfg.checkpoint_interval = Some(Duration::from_secs(args.checkpoint_secs));
    let report_cfg = cfg.clone();
    let engine = Arc::new(DiskEngine::open(cfg).context("opening the engine")?);
    let mut tcfg = TableConfig::collection().with_leaf_page_max(args.leaf_kb * 1024);
    tcfg.internal_page_max = args.internal_kb * 1024;
    tcfg.compressor = compressor;
    tcfg.allocation = flash_mode_defaults(mode).allocation;
    let table = engine.create_table(TABLE, &tcfg)?;
    let flash = FlashReport::new(EngineKind::Disk, &report_cfg, &tcfg, engine.hint_path());
    Ok((engine, table, eviction_threads, flash))
}

/// The load phase: one put per record from one thread, then a checkpoint.
fn load_phase(args: &EngineBenchArgs, engine: &DiskEngine, table: TableId) -> Result<Loaded> {
    let bar = progress(args.quiet, args.records, "load");
    let mut rng = workload::rng(args.seed ^ 0x10AD);
    let mut key = String::with_capacity(32);
    let mut value = vec![0u8; VALUE_LEN];
    let t0 = Instant::now();
    for i in 0..args.records {
        write_key_name(&mut key, i as i64, KeyOrder::Hashed, 1);
        fill_value(&mut rng, &mut value);
        engine
            .put(table, key.as_bytes(), &value)
            .with_context(|| format!("loading record {i}"))?;
        if i.is_multiple_of(4096) {
            bar.set_position(i);
        }
    }
    let load_insert_s = t0.elapsed().as_secs_f64();
    bar.set_message("checkpoint");
    engine.checkpoint()?;
    let load_s = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let stats_after_load = engine.stats();
    eprintln!(
        "load: {} records in {:.2} s ({:.0} docs/s; inserts alone {:.2} s, {:.0} docs/s)",
        args.records,
        load_s,
        args.records as f64 / load_s,
        load_insert_s,
        args.records as f64 / load_insert_s
    );
    Ok(Loaded {
        insert_s: load_insert_s,
        total_s: load_s,
        stats: stats_after_load,
    })
}

/// One run thread: zipfian reads and updates until `stop`, counting done operations by 256.
fn run_thread(
    engine: &DiskEngine,
    table: TableId,
    records: i64,
    seed: u64,
    read_frac: f64,
    stop: &AtomicBool,
    done_ops: &AtomicU64,
) -> Result<Hists> {
    let mut h = Hists::new()?;
    let mut rng = workload::rng(seed);
    let mut zipf = ScrambledZipfianGenerator::from_items(records);
    let mut key = String::with_capacity(32);
    let mut value = vec![0u8; VALUE_LEN];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let k = zipf.next_value(&mut rng);
        write_key_name(&mut key, k, KeyOrder::Hashed, 1);
        if rng.gen::<f64>() < read_frac {
            let t = Instant::now();
            let v = engine.get(table, key.as_bytes())?;
            let ns = t.elapsed().as_nanos() as u64;
            match v {
                Some(v) if v.len() == VALUE_LEN => {}
                Some(v) => bail!("record {k} ({key}) has {} bytes", v.len()),
                None => bail!("record {k} ({key}) is missing"),
            }
            h.read.saturating_record(ns.max(1));
        } else {
            fill_value(&mut rng, &mut value);
            let t = Instant::now();
            engine.put(table, key.as_bytes(), &value)?;
            let ns = t.elapsed().as_nanos() as u64;
            h.update.saturating_record(ns.max(1));
        }
        n += 1;
        if n.is_multiple_of(DONE_BATCH) {
            done_ops.fetch_add(DONE_BATCH, Ordering::Relaxed);
        }
    }
    Ok(h)
}

/// The run phase: `args.threads` threads for `args.seconds` seconds; their histograms merged.
fn run_phase(args: &EngineBenchArgs, engine: &Arc<DiskEngine>, table: TableId) -> Result<Ran> {
    let stop = Arc::new(AtomicBool::new(false));
    let done_ops = Arc::new(AtomicU64::new(0));
    let read_frac = args.read_pct as f64 / 100.0;
    let mut handles = Vec::new();
    for t in 0..args.threads {
        let engine = engine.clone();
        let stop = stop.clone();
        let done_ops = done_ops.clone();
        let records = args.records as i64;
        let seed = args.seed.wrapping_add(t as u64);
        handles.push(std::thread::spawn(move || -> Result<Hists> {
            run_thread(&engine, table, records, seed, read_frac, &stop, &done_ops)
        }));
    }
    let bar = progress(args.quiet, args.seconds, "run");
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(args.seconds);
    let mut last = (t0, 0u64);
    let mut samples = vec![Sample { at_s: 0.0, ops: 0 }];
    let (done0, ms0) = engine.checkpoint_counters();
    let mut checkpoints = vec![(0.0, done0, ms0)];
    let mut tick = 0u32;
    while Instant::now() < end {
        // Ticks on a fixed grid (every SAMPLE_MS from t0), so whole seconds fall on samples.
        tick += 1;
        let due = t0 + Duration::from_millis(SAMPLE_MS * tick as u64);
        std::thread::sleep(due.min(end).saturating_duration_since(Instant::now()));
        let now = Instant::now();
        let ops = done_ops.load(Ordering::Relaxed);
        let at_s = now.duration_since(t0).as_secs_f64();
        samples.push(Sample { at_s, ops });
        let (done, ms) = engine.checkpoint_counters();
        checkpoints.push((at_s, done, ms));
        if now.duration_since(last.0) >= Duration::from_secs(1) {
            let rate = (ops - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
            bar.set_message(format!("{rate:.0} ops/s"));
            last = (now, ops);
        }
        bar.set_position(now.duration_since(t0).as_secs());
        if handles.iter().any(|h| h.is_finished()) {
            break; // a thread failed; collect its error below
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut read = Hists::new()?.read;
    let mut update = Hists::new()?.update;
    let mut errors = Vec::new();
    for h in handles {
        match h.join().expect("bench thread panicked") {
            Ok(hs) => {
                read.add(&hs.read)?;
                update.add(&hs.update)?;
            }
            Err(e) => errors.push(e),
        }
    }
    let run_s = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    if let Some(e) = errors.into_iter().next() {
        return Err(e.context("run phase"));
    }
    let mut all = read.clone();
    all.add(&update)?;
    let windows = bench_windows::report(
        &bench_windows::windows(&samples),
        &bench_windows::checkpoint_spans(&checkpoints),
    );
    Ok(Ran {
        read,
        update,
        all,
        run_s,
        windows,
    })
}

/// The report on stdout: throughput, a latency table, load and close times, engine figures.
fn print_report(args: &EngineBenchArgs, loaded: &Loaded, ran: &Ran, closed: &Closed) {
    let (read, update, all, run_s) = (&ran.read, &ran.update, &ran.all, ran.run_s);
    let total = all.len();
    let ops_s = total as f64 / run_s;
    println!(
        "run: {total} ops in {run_s:.2} s = {ops_s:.0} ops/s ({} reads, {} updates)",
        read.len(),
        update.len()
    );
    println!(
        "{:<8} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "op", "count", "ops/s", "mean µs", "p50 µs", "p95 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    for (name, h) in [("read", read), ("update", update), ("overall", all)] {
        if h.is_empty() {
            continue;
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
        println!(
            "{:<8} {:>10} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>10.1}",
            name,
            h.len(),
            h.len() as f64 / run_s,
            h.mean() / 1000.0,
            q(0.50),
            q(0.95),
            q(0.99),
            q(0.999),
            h.max() as f64 / 1000.0
        );
    }
    println!(
        "load: {:.0} docs/s ({:.2} s incl. final checkpoint); close {:.2} s",
        args.records as f64 / loaded.total_s,
        loaded.total_s,
        closed.close_s
    );
    let stats = &closed.stats;
    println!(
        "engine: cache {} / {} MB ({} MB dirty), pages read {}, evicted {}, checkpoints {}, bytes written by kind {}",
        stats["cache"]["bytes"].as_u64().unwrap_or(0) >> 20,
        args.cache_mb,
        stats["cache"]["dirty_bytes"].as_u64().unwrap_or(0) >> 20,
        stats["cache"]["pages_read"],
        stats["cache"]["pages_evicted"],
        stats["checkpoints"]["completed"],
        stats["bytes_written_by_file_kind"]
    );
}

/// The `results` object of the JSON report.
fn results_json(
    args: &EngineBenchArgs,
    loaded: &Loaded,
    ran: &Ran,
    closed: &Closed,
) -> serde_json::Value {
    let run_s = ran.run_s;
    let lat = |h: &Histogram<u64>| {
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
        json!({
            "count": h.len(),
            "ops_per_s": h.len() as f64 / run_s,
            "mean_us": h.mean() / 1000.0,
            "p50_us": q(0.50), "p95_us": q(0.95), "p99_us": q(0.99), "p99_9_us": q(0.999),
            "max_us": h.max() as f64 / 1000.0,
        })
    };
    let total = ran.all.len();
    json!({
        "load_s": loaded.total_s, "load_docs_per_s": args.records as f64 / loaded.total_s,
        "load_inserts_s": loaded.insert_s,
        "load_inserts_docs_per_s": args.records as f64 / loaded.insert_s,
        "run_s": run_s, "ops": total, "ops_per_s": total as f64 / run_s,
        "read": lat(&ran.read), "update": lat(&ran.update), "overall": lat(&ran.all),
        "throughput_windows": ran.windows,
        "close_s": closed.close_s,
    })
}

/// A fresh value: printable bytes as YCSB's RandomByteIterator makes them (' ' + 0..=94),
/// six bytes per 32-bit draw. Irrelevant without block compression; keeps it honest with one.
fn fill_value(rng: &mut workload::Rng, v: &mut [u8]) {
    for chunk in v.chunks_mut(6) {
        let mut r = rng.next_u32();
        for b in chunk {
            *b = b' ' + (r % 95) as u8;
            r /= 95;
        }
    }
}

fn progress(quiet: bool, len: u64, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let tmpl = if what == "load" {
        "load [{elapsed_precise}] {wide_bar} {pos}/{len} records ({per_sec}) {msg}"
    } else {
        "run  [{elapsed_precise}] {wide_bar} {pos}/{len} s {msg}"
    };
    bar.set_style(ProgressStyle::with_template(tmpl).expect("valid template"));
    bar
}

fn machine_info(nproc: usize) -> serde_json::Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok();
    json!({
        "nproc": nproc,
        "mem_total_bytes": mem_kb.map(|k| k * 1024),
        "cpu_model": cpu,
        "hostname": host,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// The current UTC time as RFC 3339 (no date crate needed).
fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
