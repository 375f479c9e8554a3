//! `flashdoc bench ycsb|linkbench`: the workload drivers of the `workload` crate against
//! flashdoc in process (`--target inproc`, the default) or any MongoDB-compatible server
//! (`--target mongodb://host:port/db`). Load and run may be separate invocations on a
//! persistent `--db` directory (`--phase load|run|both`). Prints YCSB-style summary lines,
//! optionally writes every parameter and result as JSON (`--json`).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use workload::linkbench::{self, LinkBenchConfig, LinkBenchReport, Mix};
use workload::measure::{PhaseResult, Progress};
use workload::store::{InProc, Store, Wire};
use workload::ycsb::{self, RequestDistribution, Workload, YcsbConfig, YcsbReport};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub bench: Bench,
}

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// YCSB 0.17 CoreWorkload (workloads a–f, update-only, update-heavy).
    Ycsb(YcsbArgs),
    /// LinkBench with LinkBenchX's MongoDB schema (mixes original, mixed, update-only).
    Linkbench(LinkBenchArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    Load,
    Run,
    Both,
}

/// Options shared by both benchmarks.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// `inproc` (flashdoc's document layer in this process) or a mongodb:// connection string.
    #[arg(long, default_value = "inproc")]
    pub target: String,
    /// A mongod.conf-shaped YAML file for the in-process database (storage settings).
    #[arg(long, short = 'f')]
    pub config: Option<PathBuf>,
    /// Database directory for --target inproc (kept; required for separate load and run).
    /// Default: a temporary directory, removed afterwards.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Which phases to run.
    #[arg(long, value_enum, default_value = "both")]
    pub phase: Phase,
    /// Operations in the run phase (default 10000 unless --seconds is given).
    #[arg(long)]
    pub ops: Option<u64>,
    /// Length of the run phase in seconds (instead of, or as well as, --ops).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Target throughput of the run phase in ops/s over all threads (default: unthrottled).
    #[arg(long = "target-rate")]
    pub target_rate: Option<f64>,
    /// Seed of the client RNGs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Interval of the throughput series in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Write every parameter and result as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct YcsbArgs {
    /// a, b, c, d, e, f, update-only (Y-Update-Only) or update-heavy (= a).
    #[arg(long, default_value = "a")]
    pub workload: Workload,
    /// recordcount.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Overrides the workload's requestdistribution: uniform, zipfian, latest, hotspot, or
    /// zipfian-classes (not in YCSB: a zipfian over a fixed number of classes, whose skew does
    /// not grow with the record count).
    #[arg(long)]
    pub distribution: Option<RequestDistribution>,
    /// The class count of `--distribution zipfian-classes` (at most --records; default
    /// 40 000).
    #[arg(long)]
    pub zipfian_classes: Option<u64>,
    /// fieldcount.
    #[arg(long, default_value_t = 10)]
    pub field_count: usize,
    /// fieldlength.
    #[arg(long, default_value_t = 100)]
    pub field_length: usize,
    /// insertorder=ordered instead of hashed.
    #[arg(long)]
    pub ordered: bool,
    /// writeallfields=true.
    #[arg(long)]
    pub write_all_fields: bool,
    /// readallfields=false (reads project the field names).
    #[arg(long)]
    pub no_read_all_fields: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct LinkBenchArgs {
    /// original (12:69:15:4), mixed (12:0:84:4) or update-only (0:0:100:0).
    #[arg(long, default_value = "original")]
    pub mix: Mix,
    /// maxid1 (exclusive; nodes are 1..maxid1).
    #[arg(long, default_value_t = 10_001)]
    pub maxid1: i64,
    /// Loader threads (default: --threads).
    #[arg(long)]
    pub loaders: Option<usize>,
    /// Caps an id1's out-degree (LinkBench's distribution goes up to 961963).
    #[arg(long)]
    pub nlinks_cap: Option<u64>,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(args: BenchArgs) -> Result<()> {
    match args.bench {
        Bench::Ycsb(a) => run_ycsb(a),
        Bench::Linkbench(a) => run_linkbench(a),
    }
}

/// The store a run talks to, and what to clean up afterwards.
struct Target {
    store: Arc<dyn Store>,
    inproc: Option<Arc<InProc>>,
    _tmp: Option<tempfile::TempDir>,
}

fn open_target(c: &Common, dbname: &str) -> Result<Target> {
    if c.target != "inproc" {
        if c.config.is_some() || c.db.is_some() {
            bail!("--config and --db apply to --target inproc only");
        }
        let w = Wire::connect(&c.target, dbname)?;
        return Ok(Target {
            store: Arc::new(w),
            inproc: None,
            _tmp: None,
        });
    }
    let mut cfg = match &c.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            server::config::ServerConfig::from_yaml(&text)
                .with_context(|| format!("in {}", path.display()))?
        }
        None => server::config::ServerConfig::default(),
    };
    let mut tmp = None;
    match &c.db {
        Some(d) => cfg.storage.db_path = d.clone(),
        None => {
            if c.phase != Phase::Both {
                bail!("--phase load|run needs a persistent --db DIR");
            }
            let t = tempfile::Builder::new()
                .prefix("flashdoc-bench-")
                .tempdir()
                .context("creating a temporary database directory")?;
            cfg.storage.db_path = t.path().to_path_buf();
            tmp = Some(t);
        }
    }
    std::fs::create_dir_all(&cfg.storage.db_path)
        .with_context(|| format!("creating {}", cfg.storage.db_path.display()))?;
    let docdb_cfg = cfg.storage.docdb_config().map_err(anyhow::Error::msg)?;
    let ip = Arc::new(InProc::open(docdb_cfg, dbname)?);
    Ok(Target {
        store: ip.clone(),
        inproc: Some(ip),
        _tmp: tmp,
    })
}

impl Target {
    fn close(self) -> Result<()> {
        if let Some(ip) = &self.inproc {
            ip.shutdown()?;
        }
        Ok(())
    }
}

fn progress(c: &Common) -> Progress {
    if c.quiet {
        Progress::Hidden
    } else {
        Progress::Bar
    }
}

fn print_phase(title: &str, r: &PhaseResult) {
    println!("# {title}");
    print!("{}", r.ycsb_text());
}

fn write_json<T: serde::Serialize>(path: &Option<PathBuf>, v: &T) -> Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(v)?)
            .with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn run_limits(c: &Common) -> (Option<u64>, Option<f64>) {
    match (c.ops, c.seconds) {
        (None, None) => (Some(10_000), None),
        x => x,
    }
}

fn run_ycsb(a: YcsbArgs) -> Result<()> {
    let c = &a.common;
    let (ops, secs) = run_limits(c);
    let mut cfg = YcsbConfig::workload(a.workload, a.records, ops.unwrap_or(0));
    cfg.operation_count = ops;
    cfg.max_execution_time_s = secs;
    if let Some(d) = a.distribution {
        cfg.request_distribution = d;
    }
    if let Some(classes) = a.zipfian_classes {
        if cfg.request_distribution != RequestDistribution::ZipfianClasses {
            bail!("--zipfian-classes sets the class count of --distribution zipfian-classes; the distribution here is {:?}", cfg.request_distribution);
        }
        cfg.zipfian_classes = classes;
    }
    cfg.field_count = a.field_count;
    cfg.field_length = a.field_length;
    cfg.insert_hashed = !a.ordered;
    cfg.write_all_fields = a.write_all_fields;
    cfg.read_all_fields = !a.no_read_all_fields;
    cfg.threads = c.threads;
    cfg.target_ops_sec = c.target_rate;
    cfg.seed = c.seed;
    cfg.status_interval_s = c.interval;
    let t = open_target(c, &cfg.database)?;
    eprintln!(
        "ycsb workload {:?} on {}: {} records, {} threads",
        a.workload,
        t.store.describe(),
        cfg.record_count,
        cfg.threads
    );
    let mut report = YcsbReport {
        benchmark: "ycsb".into(),
        target: t.store.describe(),
        config: cfg.clone(),
        load: None,
        run: None,
    };
    if c.phase != Phase::Run {
        ycsb::prepare_load(&cfg, t.store.as_ref())?;
        let r = ycsb::run_load(&cfg, t.store.as_ref(), progress(c))?;
        t.store.flush()?;
        print_phase("load", &r);
        report.load = Some(r);
    }
    if c.phase != Phase::Load {
        let r = ycsb::run_ops(&cfg, t.store.as_ref(), progress(c))?;
        print_phase("run", &r);
        report.run = Some(r);
    }
    t.close()?;
    write_json(&c.json, &report)
}

fn run_linkbench(a: LinkBenchArgs) -> Result<()> {
    let c = &a.common;
    let (ops, secs) = run_limits(c);
    let cfg = LinkBenchConfig {
        maxid1: a.maxid1,
        mix: a.mix.clone(),
        requests: ops,
        maxtime_s: secs,
        requesters: c.threads,
        loaders: a.loaders.unwrap_or(c.threads),
        target_ops_sec: c.target_rate,
        nlinks_cap: a.nlinks_cap,
        seed: c.seed,
        status_interval_s: c.interval,
        ..LinkBenchConfig::default()
    };
    let t = open_target(c, &cfg.database)?;
    eprintln!(
        "linkbench mix {:?} on {}: maxid1 {}, {} requesters",
        a.mix,
        t.store.describe(),
        cfg.maxid1,
        cfg.requesters
    );
    let mut report = LinkBenchReport {
        benchmark: "linkbench".into(),
        target: t.store.describe(),
        config: cfg.clone(),
        nominal_crud_percent: cfg.mix.crud(),
        load: None,
        run: None,
    };
    if c.phase != Phase::Run {
        linkbench::prepare_load(t.store.as_ref())?;
        let r = linkbench::run_load(&cfg, t.store.as_ref(), progress(c))?;
        t.store.flush()?;
        print_phase("load", &r);
        for (k, v) in &r.counters {
            println!("[LOAD], {k}, {v}");
        }
        report.load = Some(r);
    }
    if c.phase != Phase::Load {
        let r = linkbench::run_ops(&cfg, t.store.as_ref(), progress(c))?;
        print_phase("run", &r);
        for (k, v) in &r.counters {
            println!("[DB], {k}, {v}");
        }
        println!(
            "[MIX], nominal C:R:U:D, {}",
            linkbench::format_crud(&cfg.mix.crud())
        );
        if let Some(p) = &r.crud_percent {
            println!("[MIX], measured C:R:U:D, {}", linkbench::format_crud(p));
        }
        report.run = Some(r);
    }
    t.close()?;
    write_json(&c.json, &report)
}
