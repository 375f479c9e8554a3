//! `flashdoc placement …`: run the placement policies offline on an event trace and the
//! simulated SSD (`placement::sim`), and write the synthetic two-region trace.

use anyhow::{bail, Context, Result};
use placement::policy::{DsmConfig, DsmPrediction, PlacementConfig, POLICY_NAMES};
use placement::sim::{
    replay_trace_file, scan_events, ReplayConfig, ReplayOutcome, TraceReplay, TrimConfig,
};
use placement::trace::TraceReader;
use placement::TrimWhen;
use serde_json::{json, Value};
use ssd::{AllocPolicy, GcDest, GcPolicy, SsdConfig, TimingConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct PlacementArgs {
    #[command(subcommand)]
    command: PlacementCommand,
}

#[derive(clap::Subcommand)]
enum PlacementCommand {
    /// Replay an event trace with one placement policy (or all) on a simulated SSD.
    Replay(Box<ReplayArgs>),
    /// Write the synthetic WiredTiger-like two-region event trace (placement::synth).
    Synth(SynthArgs),
}

#[derive(clap::Args)]
struct SynthArgs {
    /// Output event trace.
    out: PathBuf,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Update-phase checkpoint windows.
    #[arg(long, default_value_t = 100)]
    windows: u32,
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The event trace (flashdoc's binary event format).
    trace: PathBuf,
    /// none | file | boundary | dsm | dsm-skip-primary | lifetime | filelog | oracle |
    /// oracle-death | all
    #[arg(long, default_value = "all")]
    policy: String,
    /// Stream budget of the device, stream 0 included (2..=16).
    #[arg(long, default_value_t = 8)]
    streams: u8,
    /// Trim frequency k: freed extents per TRIM batch (seed 002 §4.6).
    #[arg(long, default_value_t = 20_000)]
    trim_batch: usize,
    /// No TRIM of freed space at all.
    #[arg(long)]
    no_trim: bool,
    /// free (at the Free event; safe) | replace (at address replacement; simulator only).
    #[arg(long, default_value = "free")]
    trim_when: String,
    /// Declare the end of the load phase before this event (0-based index); default: the
    /// policies' automatic fallback.
    #[arg(long)]
    end_of_load: Option<u64>,
    /// Reset the device counters before this event (measure the run phase only).
    #[arg(long, default_value_t = 0)]
    warmup_records: u64,
    /// DSM: groups K.
    #[arg(long, default_value_t = 3)]
    dsm_k: u8,
    /// DSM: weight α (integer ≥ 2).
    #[arg(long, default_value_t = 3)]
    dsm_alpha: u32,
    /// DSM: THRESHOLD1 (percent).
    #[arg(long, default_value_t = 5.0)]
    dsm_threshold1: f64,
    /// DSM: THRESHOLD2 (percent).
    #[arg(long, default_value_t = 1.0)]
    dsm_threshold2: f64,
    /// DSM: trend (default) | literal (Fig. A.5 to the letter).
    #[arg(long, default_value = "trend")]
    dsm_prediction: String,
    /// Over-provisioning ρ = (physical − user) / user.
    #[arg(long, default_value_t = 0.07)]
    op: f64,
    /// greedy | cost-benefit | d-choices | fifo | random
    #[arg(long, default_value = "greedy")]
    gc: String,
    #[arg(long, default_value_t = 10)]
    d: u32,
    /// separate | same-stream
    #[arg(long, default_value = "separate")]
    gc_dest: String,
    #[arg(long, default_value_t = 2)]
    gc_low_water: u32,
    #[arg(long, default_value_t = 256)]
    pages_per_block: u32,
    #[arg(long, default_value_t = 1)]
    blocks_per_ru: u32,
    /// User capacity in GiB (ignored with --size-to-trace).
    #[arg(long, default_value_t = 32.0)]
    capacity_gib: f64,
    /// Size the device so the trace's files at their peak fill --device-fill of it.
    #[arg(long)]
    size_to_trace: bool,
    #[arg(long, alias = "fill", default_value_t = 0.8)]
    device_fill: f64,
    /// Age the device first: `fill` (every LBA written once; the bare flag) or `steady` (the
    /// fill, then random overwrites until WA is steady).
    #[arg(long, num_args = 0..=1, default_missing_value = "fill")]
    precondition: Option<String>,
    /// The filesystem forwards freed space (punched holes, removed/truncated files) as TRIM:
    /// on | off. On by default here (unlike `ssd replay`), since TRIM batching is the point.
    #[arg(long, default_value = "on", num_args = 0..=1, default_missing_value = "on")]
    fs_discard: String,
    /// next-fit | first-fit
    #[arg(long, default_value = "next-fit")]
    alloc: String,
    #[arg(long)]
    no_timing: bool,
    #[arg(long, default_value_t = 32)]
    qd: u32,
    #[arg(long)]
    trace_time: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 262_144)]
    waf_interval: u64,
    /// Write the JSON result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(args: PlacementArgs) -> Result<()> {
    match args.command {
        PlacementCommand::Replay(a) => replay(*a),
        PlacementCommand::Synth(a) => synth(a),
    }
}

fn synth(a: SynthArgs) -> Result<()> {
    let mut cfg = placement::synth::SynthConfig::linkbench_like(a.seed);
    cfg.windows = a.windows;
    let t = placement::synth::generate(&cfg);
    let mut w = placement::trace::TraceWriter::create(&a.out)
        .with_context(|| format!("creating {}", a.out.display()))?;
    for ev in &t.events {
        w.write(ev);
    }
    w.flush()?;
    println!(
        "wrote {} ({} events; the load ends before event {}: use --end-of-load {} --warmup-records {})",
        a.out.display(),
        t.events.len(),
        t.end_of_load,
        t.end_of_load,
        t.end_of_load
    );
    Ok(())
}

fn on_off(s: &str) -> Result<bool> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        o => bail!("expected on or off, not {o:?}"),
    }
}

fn device_config(a: &ReplayArgs, logical_pages: u64) -> Result<SsdConfig> {
    let mut cfg = SsdConfig::with_op(logical_pages.max(1), a.op)?;
    cfg.streams = a.streams as u32;
    cfg.gc = GcPolicy::parse(&a.gc)?;
    cfg.d_choices = a.d;
    cfg.gc_dest = match a.gc_dest.as_str() {
        "separate" => GcDest::Separate,
        "same-stream" => GcDest::SameStream,
        o => bail!("unknown --gc-dest {o:?} (separate, same-stream)"),
    };
    cfg.gc_low_water = a.gc_low_water;
    cfg.pages_per_block = a.pages_per_block;
    cfg.blocks_per_ru = a.blocks_per_ru;
    cfg.seed = a.seed;
    cfg.waf_interval = a.waf_interval;
    cfg.set_op(a.op)?;
    if !a.no_timing {
        cfg.timing = Some(TimingConfig {
            queue_depth: a.qd,
            use_trace_time: a.trace_time,
            ..TimingConfig::default()
        });
    }
    cfg.validate()?;
    Ok(cfg)
}

fn events(path: &Path) -> Result<TraceReader<std::io::BufReader<std::fs::File>>> {
    TraceReader::open(path).with_context(|| format!("opening event trace {}", path.display()))
}

struct Row {
    name: &'static str,
    out: ReplayOutcome,
    seconds: f64,
}

fn replay(a: ReplayArgs) -> Result<()> {
    let trim_when = TrimWhen::parse(&a.trim_when).map_err(anyhow::Error::msg)?;
    let fs_discard = on_off(&a.fs_discard)?;
    let alloc = AllocPolicy::parse(&a.alloc)?;
    let pc = PlacementConfig {
        streams: a.streams,
        dsm: DsmConfig {
            groups: a.dsm_k,
            alpha: a.dsm_alpha,
            threshold1: a.dsm_threshold1,
            threshold2: a.dsm_threshold2,
            prediction: DsmPrediction::parse(&a.dsm_prediction).map_err(anyhow::Error::msg)?,
        },
        ..Default::default()
    };
    pc.validate().map_err(anyhow::Error::msg)?;
    let names: Vec<&'static str> = if a.policy == "all" {
        POLICY_NAMES.to_vec()
    } else {
        vec![POLICY_NAMES
            .iter()
            .copied()
            .find(|n| *n == a.policy)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown policy {:?} (known: {}, all)",
                    a.policy,
                    POLICY_NAMES.join(", ")
                )
            })?]
    };
    if !(a.device_fill > 0.0 && a.device_fill <= 1.0) {
        bail!("--device-fill must be in (0, 1]");
    }
    let rc = ReplayConfig {
        trim: TrimConfig {
            batch: (!a.no_trim).then_some(a.trim_batch.max(1)),
            when: trim_when,
        },
        end_of_load_at: a.end_of_load,
        reset_stats_at: a.warmup_records,
    };

    // Capacity: the same for every policy.
    let mut sized_from = None;
    let logical_pages = if a.size_to_trace {
        eprintln!("sizing the device to the trace (one pass)…");
        let ext = scan_events(
            events(&a.trace)?.map(|e| e.map_err(anyhow::Error::from)),
            false,
        )?;
        let pages = (ext.peak_file_pages as f64 / a.device_fill).ceil() as u64;
        sized_from = Some(ext);
        pages.max(1)
    } else {
        if a.capacity_gib <= 0.0 {
            bail!("--capacity-gib must be > 0");
        }
        (a.capacity_gib * (1u64 << 30) as f64 / ssd::PAGE_BYTES as f64).round() as u64
    };
    let dev_cfg = device_config(&a, logical_pages)?;
    let precondition = match &a.precondition {
        None => None,
        Some(mode) => Some(ssd::PreconditionConfig {
            mode: ssd::PreconditionMode::parse(mode)?,
            seed: a.seed,
            ..Default::default()
        }),
    };

    let mut rows = Vec::new();
    for name in names {
        let start = Instant::now();
        if name.starts_with("oracle") {
            eprintln!("{name}: computing every write's death on the device (one pass)…");
        }
        let job = TraceReplay {
            trace: &a.trace,
            policy: name,
            placement: &pc,
            device: dev_cfg.clone(),
            precondition: precondition.clone(),
            alloc,
            fs_discard,
            replay: rc,
            loops: placement::sim::RunLoops::once(),
        };
        let mut shown = false;
        let out = replay_trace_file(&job, |events, dev| {
            shown = true;
            let s = dev.stats();
            eprint!(
                "\r\x1b[2K{name}: {events} events, {:.2} GiB host writes, WAF {:.3}",
                (s.host_write_pages * ssd::PAGE_BYTES) as f64 / (1u64 << 30) as f64,
                s.write_amplification()
            );
            let _ = std::io::stderr().flush();
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        if shown {
            eprintln!();
        }
        if a.warmup_records > 0 && out.events < a.warmup_records {
            bail!(
                "the trace has {} events, fewer than --warmup-records {}",
                out.events,
                a.warmup_records
            );
        }
        rows.push(Row {
            name,
            out,
            seconds: start.elapsed().as_secs_f64(),
        });
    }

    print_table(&rows);
    if let Some(p) = &a.json {
        let v = json!({
            "tool": "flashdoc placement replay",
            "trace": a.trace.display().to_string(),
            "sized_from": sized_from,
            "parameters": {
                "streams": a.streams,
                "trim": if a.no_trim { Value::Null } else { json!({"batch": a.trim_batch, "when": trim_when.name()}) },
                "end_of_load": a.end_of_load,
                "warmup_records": a.warmup_records,
                "dsm": {"k": a.dsm_k, "alpha": a.dsm_alpha, "threshold1": a.dsm_threshold1,
                        "threshold2": a.dsm_threshold2, "prediction": a.dsm_prediction},
                "lifetime": {"ewma_weight": pc.lifetime.ewma_weight, "low_quantile": pc.lifetime.low_quantile,
                             "high_quantile": pc.lifetime.high_quantile},
                "fs_discard": fs_discard,
                "alloc": a.alloc,
                "precondition": a.precondition,
                "device_fill": a.device_fill,
                "size_to_trace": a.size_to_trace,
            },
            "runs": rows.iter().map(|r| row_json(r, rows.iter().find(|x| x.name == "none"))).collect::<Vec<_>>(),
        });
        let mut s = serde_json::to_string_pretty(&v)?;
        s.push('\n');
        std::fs::write(p, s).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote {}", p.display());
    }
    Ok(())
}

struct Figures {
    waf: f64,
    gc: u64,
    erases: u64,
    mbps: Option<f64>,
    p99: Option<f64>,
}

fn figures(o: &ReplayOutcome) -> Figures {
    let r = &o.report;
    Figures {
        waf: r.write_amplification,
        gc: r.counters.gc_copy_pages,
        erases: r.counters.erases,
        mbps: r.timing.as_ref().map(|t| t.mb_per_s),
        p99: r.timing.as_ref().map(|t| t.write_latency.p99_us),
    }
}

fn ratio(x: f64, base: f64) -> Option<f64> {
    (base != 0.0).then(|| x / base)
}

fn row_json(r: &Row, none: Option<&Row>) -> Value {
    let f = figures(&r.out);
    let b = none.map(|n| figures(&n.out));
    let t = r.out.trim;
    json!({
        "policy": r.name,
        "write_amplification": f.waf,
        "gc_copy_pages": f.gc,
        "erases": f.erases,
        "mb_per_s": f.mbps,
        "p99_write_us": f.p99,
        "vs_none": b.map(|b| json!({
            "write_amplification": ratio(f.waf, b.waf),
            "gc_copy_pages": ratio(f.gc as f64, b.gc as f64),
            "erases": ratio(f.erases as f64, b.erases as f64),
            "mb_per_s": f.mbps.zip(b.mbps).and_then(|(x, y)| ratio(x, y)),
            "p99_write_us": f.p99.zip(b.p99).and_then(|(x, y)| ratio(x, y)),
        })),
        "events": r.out.events,
        "event_counts": {
            "writes": r.out.counts.writes, "frees": r.out.counts.frees, "removes": r.out.counts.removes,
            "truncates": r.out.counts.truncates, "creates": r.out.counts.creates, "other": r.out.counts.other,
        },
        "trim": t.map(|t| json!({
            "collected": t.collected, "collected_bytes": t.collected_bytes, "batches": t.batches,
            "released_extents": t.released_extents, "released_bytes": t.released_bytes,
            "cancelled_bytes": t.cancelled_bytes, "dropped_bytes": t.dropped_bytes,
        })),
        "layout": r.out.layout,
        "seconds": r.seconds,
        "report": r.out.report,
    })
}

fn print_table(rows: &[Row]) {
    let base = rows
        .iter()
        .find(|r| r.name == "none")
        .map(|r| figures(&r.out));
    let rel = |x: f64, b: Option<f64>| match b.and_then(|b| ratio(x, b)) {
        Some(v) => format!("{v:.3}"),
        None => "-".into(),
    };
    println!(
        "{:<17} {:>7} {:>6} {:>12} {:>6} {:>9} {:>6} {:>9} {:>6} {:>9} {:>6}",
        "policy",
        "WAF",
        "×none",
        "GC copies",
        "×none",
        "erases",
        "×none",
        "MB/s",
        "×none",
        "p99 µs",
        "×none"
    );
    for r in rows {
        let f = figures(&r.out);
        let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
        println!(
            "{:<17} {:>7.4} {:>6} {:>12} {:>6} {:>9} {:>6} {:>9} {:>6} {:>9} {:>6}",
            r.name,
            f.waf,
            rel(f.waf, base.as_ref().map(|b| b.waf)),
            f.gc,
            rel(f.gc as f64, base.as_ref().map(|b| b.gc as f64)),
            f.erases,
            rel(f.erases as f64, base.as_ref().map(|b| b.erases as f64)),
            opt(f.mbps),
            f.mbps
                .map_or("-".into(), |m| rel(m, base.as_ref().and_then(|b| b.mbps))),
            opt(f.p99),
            f.p99
                .map_or("-".into(), |p| rel(p, base.as_ref().and_then(|b| b.p99))),
        );
    }
}
