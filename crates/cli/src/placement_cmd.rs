//! `flashdoc placement …`: run the placement policies offline on an event trace and the
//! simulated SSD (`placement::sim`), and write the synthetic two-region trace.

use anyhow::{bail, Context, Result};
use placement::policy::{DsmConfig, DsmPrediction, PlacementConfig, POLICY_NAMES};
use placement::sim::{
    read_events, replay_planned, scan_events, DevicePlan, ReplayConfig, ReplayOutcome, TraceReplay,
    TrimConfig,
};
use placement::TrimWhen;
use serde_json::{json, Value};
use ssd::{AllocPolicy, GcDest, GcPolicy, GcTie, SsdConfig, TimingConfig};
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
    /// Convert a trace captured outside flashdoc (a CSV of file calls with its file table, or
    /// blkparse text) into the event format that `placement replay` and the lab read.
    Import(ImportArgs),
}

#[derive(clap::Args)]
struct ImportArgs {
    #[command(subcommand)]
    from: ImportFrom,
}

#[derive(clap::Subcommand)]
enum ImportFrom {
    /// A CSV `time_ns,op,file_id,offset,len` of file-level calls, with `--files` (`file_id,path`).
    Csv {
        /// The calls.
        events: PathBuf,
        /// The file table: each id's path relative to the database directory.
        #[arg(long)]
        files: PathBuf,
        /// The event trace to write.
        #[arg(long, short)]
        out: PathBuf,
        /// How checkpoints are found: gap (the first data-file sync after 2 s with none),
        /// gap:SECONDS, turtle (WiredTiger's turtle-file rename, exact) or none.
        #[arg(long, default_value = "gap")]
        checkpoints: String,
        /// File kinds by path: `collection=GLOB[,GLOB…];index=…;journal=…` (first match wins;
        /// the rest is metadata). Default: WiredTiger's and MongoDB's names.
        #[arg(long)]
        kinds: Option<String>,
    },
    /// blkparse's default text output.
    Blkparse {
        /// The blkparse output.
        input: PathBuf,
        /// `path,first_lba,last_lba` (512-byte sectors, inclusive; a path on several lines has
        /// those extents in file order). Without it every write is to one file.
        #[arg(long)]
        file_map: Option<PathBuf>,
        /// The action whose lines are the device's view: D (issued), Q (queued) or C (completed).
        #[arg(long, default_value = "D")]
        action: String,
        /// Only this device (`8,0`); needed when the trace holds more than one.
        #[arg(long)]
        device: Option<String>,
        /// The event trace to write.
        #[arg(long, short)]
        out: PathBuf,
        /// File kinds of the mapped paths, as for `import csv`.
        #[arg(long)]
        kinds: Option<String>,
    },
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
    /// One policy, a comma-separated list, or all: none | file | boundary | dsm |
    /// dsm-skip-primary | lifetime | filelog | oracle | oracle-death | all
    #[arg(long, default_value = "all", value_delimiter = ',')]
    policy: Vec<String>,
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
    /// Declare the end of the load phase here: an event index (0-based, `8397`), a time into
    /// the trace (`12.5s`) or a checkpoint's begin (`checkpoint:3`, the third); default: the
    /// policies' automatic fallback.
    #[arg(long)]
    end_of_load: Option<RunPoint>,
    /// Reset the device counters here (measure the run phase only): an event index, a time or
    /// a checkpoint, as for --end-of-load.
    #[arg(long)]
    warmup_records: Option<RunPoint>,
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
    /// Greedy GC among equally full units: newest (reached that count last) | oldest.
    #[arg(long, default_value = "newest")]
    gc_tie: String,
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
    /// With --size-to-trace: share of the user capacity the files fill at their peak.
    #[arg(long, visible_alias = "fill", default_value_t = 0.8)]
    device_fill: f64,
    /// Age the device first: `--precondition` or `--precondition=fill` (every LBA written
    /// once, in LBA order) or `--precondition=steady` (the fill, then random overwrites until
    /// WA is steady).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "fill")]
    precondition: Option<String>,
    /// The filesystem forwards freed space (punched holes, removed/truncated files) as TRIM:
    /// `--fs-discard` or `--fs-discard=on|off`. On by default here (unlike `ssd replay`), since
    /// TRIM batching is the point.
    #[arg(long, default_value = "on", num_args = 0..=1, require_equals = true, default_missing_value = "on")]
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
        PlacementCommand::Import(a) => import(a),
    }
}

fn import(a: ImportArgs) -> Result<()> {
    use placement::classify::FileClassifier;
    use placement::import::{blkparse, csv, CheckpointRule};
    let classifier = |kinds: &Option<String>| match kinds {
        Some(spec) => FileClassifier::parse(spec).map_err(anyhow::Error::msg),
        None => Ok(FileClassifier::default()),
    };
    let started = Instant::now();
    let (out, summary) = match a.from {
        ImportFrom::Csv {
            events,
            files,
            out,
            checkpoints,
            kinds,
        } => {
            let import = csv::CsvImport {
                classifier: classifier(&kinds)?,
                checkpoints: CheckpointRule::parse(&checkpoints).map_err(anyhow::Error::msg)?,
            };
            let mut w = trace_writer(&out)?;
            let s = import.run(&events, &files, |e| w.write(&e))?;
            w.flush()
                .with_context(|| format!("writing {}", out.display()))?;
            (out, s)
        }
        ImportFrom::Blkparse {
            input,
            file_map,
            action,
            device,
            out,
            kinds,
        } => {
            if !matches!(action.as_str(), "D" | "Q" | "C") {
                bail!("--action {action}: expected D, Q or C");
            }
            let open = |p: &Path| {
                std::fs::File::open(p)
                    .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
                    .with_context(|| format!("opening {}", p.display()))
            };
            let file_map = match &file_map {
                Some(p) => Some(blkparse::FileMap::parse(
                    open(p)?,
                    &p.display().to_string(),
                )?),
                None => None,
            };
            let import = blkparse::BlkparseImport {
                file_map,
                classifier: classifier(&kinds)?,
                action,
                device,
            };
            let mut w = trace_writer(&out)?;
            let s = import.run(open(&input)?, &input.display().to_string(), |e| w.write(&e))?;
            w.flush()
                .with_context(|| format!("writing {}", out.display()))?;
            (out, s)
        }
    };
    print_import_summary(&out, &summary, started.elapsed().as_secs_f64());
    Ok(())
}

/// What an import wrote, and what of its input it could not turn into events.
fn print_import_summary(out: &Path, summary: &placement::import::ImportSummary, seconds: f64) {
    println!(
        "{}: {} events from {} lines in {:.1} s: {} files, {} writes ({:.1} MiB), {} checkpoints, \
         {} renames, {} removes, {} truncates, {} discards",
        out.display(),
        summary.events,
        summary.lines,
        seconds,
        summary.files,
        summary.writes,
        summary.write_bytes as f64 / (1u64 << 20) as f64,
        summary.checkpoints,
        summary.renames,
        summary.removes,
        summary.truncates,
        summary.discards
    );
    let left_out = [
        (
            summary.failed_writes,
            "failed writes (negative length): nothing written",
        ),
        (
            summary.writes_to_removed,
            "writes to a removed file: left out",
        ),
        (
            summary.implicit_opens,
            "descriptors open before the trace began: opened at first use",
        ),
        (
            summary.mmaps,
            "mmap calls: writes through a mapping are invisible",
        ),
        (
            summary.fallocates,
            "fallocate calls: space reserved, nothing written",
        ),
        (
            summary.reordered_times,
            "lines stamped before the line above: kept in file order",
        ),
    ];
    for (n, what) in left_out.into_iter().filter(|(n, _)| *n > 0) {
        println!("  note: {n} {what}");
    }
}

fn trace_writer(out: &Path) -> Result<placement::trace::TraceWriter> {
    placement::trace::TraceWriter::create(out)
        .with_context(|| format!("creating the event trace {}", out.display()))
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
    cfg.gc_tie = GcTie::parse(&a.gc_tie)?;
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

/// A point in a trace, as a user names it: an event index, a time since the trace's first
/// event, or the begin of the n-th checkpoint (1-based).
#[derive(Clone, Copy, Debug, PartialEq)]
enum RunPoint {
    Event(u64),
    Seconds(f64),
    Checkpoint(u64),
}

impl std::str::FromStr for RunPoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "{s:?} is not an event index (8397), a time (12.5s) or a checkpoint (checkpoint:3)"
            )
        };
        if let Some(n) = s.strip_prefix("checkpoint:") {
            return match n.parse::<u64>() {
                Ok(k) if k >= 1 => Ok(RunPoint::Checkpoint(k)),
                _ => Err(bad()),
            };
        }
        if let Some(t) = s.strip_suffix('s') {
            return match t.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(RunPoint::Seconds(x)),
                _ => Err(bad()),
            };
        }
        s.parse::<u64>().map(RunPoint::Event).map_err(|_| bad())
    }
}

impl std::fmt::Display for RunPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            RunPoint::Event(i) => write!(f, "event {i}"),
            RunPoint::Seconds(t) => write!(f, "{t}s"),
            RunPoint::Checkpoint(k) => write!(f, "checkpoint:{k}"),
        }
    }
}

/// Event indices of the asked points, from one pass over the trace. Every point past the
/// trace's end is an error, all named at once, before any replay starts.
fn resolve_points(
    trace: &Path,
    events: &[placement::Event],
    asked: &[(&str, RunPoint)],
) -> Result<Vec<u64>> {
    let mut found: Vec<Option<u64>> = vec![None; asked.len()];
    let (mut events_seen, mut checkpoints, mut first_ns) = (0u64, 0u64, None);
    for ev in events {
        let t0 = *first_ns.get_or_insert(ev.time_ns());
        if matches!(ev, placement::Event::CheckpointBegin { .. }) {
            checkpoints += 1;
        }
        for (slot, (_, point)) in found.iter_mut().zip(asked) {
            let here = match *point {
                RunPoint::Event(i) => i == events_seen,
                RunPoint::Seconds(s) => ev.time_ns().saturating_sub(t0) as f64 >= s * 1e9,
                RunPoint::Checkpoint(k) => {
                    k == checkpoints && matches!(ev, placement::Event::CheckpointBegin { .. })
                }
            };
            if slot.is_none() && here {
                *slot = Some(events_seen);
            }
        }
        events_seen += 1;
    }
    let missing: Vec<String> = found
        .iter()
        .zip(asked)
        .filter(|(slot, _)| slot.is_none())
        .map(|(_, (flag, point))| format!("{flag} {point} is past the trace's end"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} ({}: {events_seen} events, {checkpoints} checkpoints)",
            missing.join("; "),
            trace.display()
        );
    }
    Ok(found
        .into_iter()
        .map(|x| x.expect("checked above"))
        .collect())
}

/// The policies `--policy` names, in the order given (`all`: every one), each once.
fn policy_names(asked: &[String]) -> Result<Vec<&'static str>> {
    let mut names: Vec<&'static str> = Vec::new();
    for name in asked.iter().map(|s| s.trim()) {
        let add: Vec<&'static str> = if name == "all" {
            POLICY_NAMES.to_vec()
        } else {
            let known = POLICY_NAMES.iter().copied().find(|n| *n == name);
            vec![known.ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown policy {name:?} (known: {}, all)",
                    POLICY_NAMES.join(", ")
                )
            })?]
        };
        for n in add {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    if names.is_empty() {
        bail!("--policy names no policy");
    }
    Ok(names)
}

struct Row {
    name: &'static str,
    out: ReplayOutcome,
    /// Wall time charged to this policy: precondition, the oracle's pre-pass and the replay
    /// (not the trace's decoding and device plan, made once for all policies). The oracles'
    /// pre-pass, made once and shared by both, is charged in full to each.
    seconds: f64,
    /// Wall time this policy's replay took (without a pre-pass an earlier oracle made).
    wall_seconds: f64,
}

impl Row {
    /// Replay speed: host page writes the device took (precondition included) per second.
    fn pages_per_s(&self) -> f64 {
        self.out.device_host_pages as f64 / self.seconds.max(1e-9)
    }
}

fn replay(a: ReplayArgs) -> Result<()> {
    let trim_when = TrimWhen::parse(&a.trim_when).map_err(anyhow::Error::msg)?;
    let fs_discard = on_off(&a.fs_discard)?;
    let alloc = AllocPolicy::parse(&a.alloc)?;
    let pc = placement_config(&a)?;
    let names = policy_names(&a.policy)?;
    if !(a.device_fill > 0.0 && a.device_fill <= 1.0) {
        bail!("--device-fill must be in (0, 1]");
    }
    let decode_start = Instant::now();
    let trace_events = read_events(&a.trace).map_err(|e| anyhow::anyhow!("{e}"))?;
    let decode_seconds = decode_start.elapsed().as_secs_f64();
    let rc = replay_config(&a, &trace_events, trim_when)?;
    let (logical_pages, sized_from) = capacity(&a, &trace_events)?;
    let device = device_config(&a, logical_pages)?;
    let precondition = match &a.precondition {
        None => None,
        Some(mode) => Some(ssd::PreconditionConfig {
            mode: ssd::PreconditionMode::parse(mode)?,
            seed: a.seed,
            ..Default::default()
        }),
    };
    let base = TraceReplay {
        trace: &a.trace,
        policy: "",
        placement: &pc,
        device,
        precondition,
        alloc,
        fs_discard,
        replay: rc,
        loops: placement::sim::RunLoops::once(),
    };
    let (rows, plan_seconds) = replay_policies(&a, &base, names, &trace_events)?;

    print_table(&rows);
    let speed = ReplaySpeed::of(&rows, decode_seconds + plan_seconds);
    println!("{}", speed.summary(a.no_timing));
    if let Some(p) = &a.json {
        let times = [decode_seconds, plan_seconds];
        let v = replay_json(&a, &base, sized_from, times, &speed, &rows);
        let mut s = serde_json::to_string_pretty(&v)?;
        s.push('\n');
        std::fs::write(p, s).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// The placement policies' settings from the options, validated.
fn placement_config(a: &ReplayArgs) -> Result<PlacementConfig> {
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
    Ok(pc)
}

/// The replay's TRIM batching and its end-of-load and warm-up points, resolved to event
/// indices of the trace.
fn replay_config(
    a: &ReplayArgs,
    trace_events: &[placement::Event],
    trim_when: TrimWhen,
) -> Result<ReplayConfig> {
    let asked: Vec<(&str, RunPoint)> = [
        ("--end-of-load", a.end_of_load),
        ("--warmup-records", a.warmup_records),
    ]
    .into_iter()
    .filter_map(|(flag, p)| p.map(|p| (flag, p)))
    .collect();
    let mut at = resolve_points(&a.trace, trace_events, &asked)?.into_iter();
    let end_of_load_at = a.end_of_load.map(|_| at.next().expect("resolved"));
    let warmup_at = a.warmup_records.map_or(0, |_| at.next().expect("resolved"));
    Ok(ReplayConfig {
        trim: TrimConfig {
            batch: (!a.no_trim).then_some(a.trim_batch.max(1)),
            when: trim_when,
        },
        end_of_load_at,
        reset_stats_at: warmup_at,
    })
}

/// The device's logical pages, the same for every policy: from a pass over the events with
/// `--size-to-trace` (returned too, for the report), else from `--capacity-gib`.
fn capacity(
    a: &ReplayArgs,
    trace_events: &[placement::Event],
) -> Result<(u64, Option<ssd::replay::TraceExtent>)> {
    if !a.size_to_trace {
        if a.capacity_gib <= 0.0 {
            bail!("--capacity-gib must be > 0");
        }
        let pages = (a.capacity_gib * (1u64 << 30) as f64 / ssd::PAGE_BYTES as f64).round() as u64;
        return Ok((pages, None));
    }
    eprintln!("sizing the device to the trace (one pass)…");
    let ext = scan_events(trace_events.iter().map(Ok::<_, anyhow::Error>), false)?;
    let pages = (ext.peak_file_pages as f64 / a.device_fill).ceil() as u64;
    Ok((pages.max(1), Some(ext)))
}

/// Replays the trace with each policy in `names` on a fresh device set up as `base`; returns
/// a row per policy and the seconds the shared device plan took.
fn replay_policies(
    a: &ReplayArgs,
    base: &TraceReplay<'_>,
    names: Vec<&'static str>,
    trace_events: &[placement::Event],
) -> Result<(Vec<Row>, f64)> {
    let mut rows = Vec::new();
    // The layout's and TRIM batcher's LBA ops, the same for every policy: made once.
    let mut plan: Option<DevicePlan> = None;
    let mut plan_seconds = 0.0;
    for name in names {
        if name.starts_with("oracle") && !rows.iter().any(|r: &Row| r.out.oracle_prepass.is_some())
        {
            eprintln!("{name}: computing every write's death on the device (one pass)…");
        }
        let job = TraceReplay {
            trace: base.trace,
            policy: name,
            placement: base.placement,
            device: base.device.clone(),
            precondition: base.precondition.clone(),
            alloc: base.alloc,
            fs_discard: base.fs_discard,
            replay: base.replay,
            loops: base.loops,
        };
        let plan = match &mut plan {
            Some(p) => p,
            None => {
                let start = Instant::now();
                let p = DevicePlan::new(&job, trace_events).map_err(|e| layout_error(e, a))?;
                plan_seconds = start.elapsed().as_secs_f64();
                plan.insert(p)
            }
        };
        rows.push(replay_one(a, name, &job, trace_events, plan)?);
    }
    Ok((rows, plan_seconds))
}

/// One policy's replay on the shared device plan, with a progress line.
fn replay_one(
    a: &ReplayArgs,
    name: &'static str,
    job: &TraceReplay<'_>,
    trace_events: &[placement::Event],
    plan: &DevicePlan,
) -> Result<Row> {
    let start = Instant::now();
    let mut shown = false;
    let out = replay_planned(job, trace_events, plan, |events, dev| {
        shown = true;
        let s = dev.stats();
        eprint!(
            "\r\x1b[2K{name}: {events} events, {:.2} GiB host writes, WAF {:.3}",
            (s.host_write_pages * ssd::PAGE_BYTES) as f64 / (1u64 << 30) as f64,
            s.write_amplification()
        );
        let _ = std::io::stderr().flush();
    });
    if shown {
        // End the progress line, so what follows (a table or an error) starts a line.
        eprintln!();
    }
    let out = out.map_err(|e| layout_error(e, a))?;
    let wall_seconds = start.elapsed().as_secs_f64();
    let shared_prepass = out
        .oracle_prepass
        .filter(|p| p.shared)
        .map_or(0.0, |p| p.seconds);
    Ok(Row {
        name,
        out,
        seconds: wall_seconds + shared_prepass,
        wall_seconds,
    })
}

/// The JSON report: the parameters of the replay, its timings (`[decode, device plan]`
/// seconds), its speed and a run per policy.
fn replay_json(
    a: &ReplayArgs,
    base: &TraceReplay<'_>,
    sized_from: Option<ssd::replay::TraceExtent>,
    [decode_seconds, plan_seconds]: [f64; 2],
    speed: &ReplaySpeed,
    rows: &[Row],
) -> Value {
    let pc = base.placement;
    let rc = &base.replay;
    json!({
        "tool": "flashdoc placement replay",
        "trace": a.trace.display().to_string(),
        "sized_from": sized_from,
        "parameters": {
            "streams": a.streams,
            "trim": if a.no_trim { Value::Null } else { json!({"batch": a.trim_batch, "when": rc.trim.when.name()}) },
            "end_of_load": rc.end_of_load_at,
            "warmup_records": rc.reset_stats_at,
            "dsm": {"k": a.dsm_k, "alpha": a.dsm_alpha, "threshold1": a.dsm_threshold1,
                    "threshold2": a.dsm_threshold2, "prediction": a.dsm_prediction},
            "lifetime": {"ewma_weight": pc.lifetime.ewma_weight, "low_quantile": pc.lifetime.low_quantile,
                         "high_quantile": pc.lifetime.high_quantile},
            "fs_discard": base.fs_discard,
            "alloc": a.alloc,
            "precondition": a.precondition,
            "device_fill": a.device_fill,
            "size_to_trace": a.size_to_trace,
        },
        "decode_seconds": decode_seconds,
        "device_plan_seconds": plan_seconds,
        "speed": speed,
        "runs": rows.iter().map(|r| row_json(r, rows.iter().find(|x| x.name == "none"))).collect::<Vec<_>>(),
    })
}

/// A replay's error, with the way out when the trace's files do not fit the device.
fn layout_error(e: Box<dyn std::error::Error + Send + Sync>, a: &ReplayArgs) -> anyhow::Error {
    let msg = e.to_string();
    if msg.contains("layout is full") && !a.size_to_trace {
        anyhow::anyhow!(
            "{msg}\n(the device is smaller than the trace's files: size it with \
             --size-to-trace and --device-fill, or give a larger --capacity-gib)"
        )
    } else {
        anyhow::anyhow!("{msg}")
    }
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
        "write_amplification_from_first_checkpoint": r.out.waf_from_first_checkpoint,
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
        "oracle_prepass_seconds": r.out.oracle_prepass.map(|p| p.seconds),
        "device_host_pages": r.out.device_host_pages,
        "host_pages_per_s": r.pages_per_s(),
        "report": r.out.report,
    })
}

/// Replay speed over all policies of one run (issue 15: host page writes per second, the
/// precondition and the oracle's pre-pass included; the timing model should be off).
#[derive(serde::Serialize)]
struct ReplaySpeed {
    /// Decoding the trace and its device plan (layout and TRIM batcher), once for all.
    shared_seconds: f64,
    /// The slowest policy's host page writes per second (its own time; the shared work is
    /// counted in `overall_pages_per_s`).
    min_pages_per_s: f64,
    min_policy: &'static str,
    /// All policies' host page writes over all the time, the shared work (the oracles'
    /// pre-pass once) included.
    overall_pages_per_s: f64,
}

impl ReplaySpeed {
    fn of(rows: &[Row], shared_seconds: f64) -> Self {
        let slowest = rows
            .iter()
            .min_by(|a, b| a.pages_per_s().total_cmp(&b.pages_per_s()))
            .expect("at least one policy");
        let pages: u64 = rows.iter().map(|r| r.out.device_host_pages).sum();
        let seconds = shared_seconds + rows.iter().map(|r| r.wall_seconds).sum::<f64>();
        ReplaySpeed {
            shared_seconds,
            min_pages_per_s: slowest.pages_per_s(),
            min_policy: slowest.name,
            overall_pages_per_s: pages as f64 / seconds.max(1e-9),
        }
    }

    fn summary(&self, no_timing: bool) -> String {
        format!(
            "replay speed{}: trace decoded and laid out once in {:.2} s; slowest policy {} at \
             {:.1} M host page writes/s; all policies {:.1} M/s, that included",
            if no_timing {
                ""
            } else {
                " (timing model on: use --no-timing to measure)"
            },
            self.shared_seconds,
            self.min_policy,
            self.min_pages_per_s / 1e6,
            self.overall_pages_per_s / 1e6
        )
    }
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
        "{:<17} {:>7} {:>6} {:>8} {:>12} {:>6} {:>9} {:>6} {:>9} {:>6} {:>9} {:>6} {:>8}",
        "policy",
        "WAF",
        "×none",
        "WAF ckpt",
        "GC copies",
        "×none",
        "erases",
        "×none",
        "MB/s",
        "×none",
        "p99 µs",
        "×none",
        "M pg/s"
    );
    for r in rows {
        let f = figures(&r.out);
        let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
        println!(
            "{:<17} {:>7.4} {:>6} {:>8} {:>12} {:>6} {:>9} {:>6} {:>9} {:>6} {:>9} {:>6} {:>8.1}",
            r.name,
            f.waf,
            rel(f.waf, base.as_ref().map(|b| b.waf)),
            r.out
                .waf_from_first_checkpoint
                .map_or("-".into(), |w| format!("{w:.4}")),
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
            r.pages_per_s() / 1e6,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::{Event, FileKind};

    #[test]
    fn run_points_parse_as_index_time_or_checkpoint() {
        assert_eq!("8397".parse(), Ok(RunPoint::Event(8397)));
        assert_eq!("12.5s".parse(), Ok(RunPoint::Seconds(12.5)));
        assert_eq!("checkpoint:3".parse(), Ok(RunPoint::Checkpoint(3)));
        for bad in [
            "",
            "-1",
            "checkpoint:0",
            "checkpoint:x",
            "1.5",
            "-2s",
            "NaNs",
            "infs",
        ] {
            assert!(bad.parse::<RunPoint>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn policy_lists_keep_order_and_drop_repeats() {
        let names = |v: &[&str]| policy_names(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(names(&["dsm", "none", "dsm"]).unwrap(), vec!["dsm", "none"]);
        assert_eq!(names(&["all"]).unwrap(), POLICY_NAMES.to_vec());
        let err = names(&["none", "nope"]).unwrap_err().to_string();
        assert!(err.contains("\"nope\"") && err.contains("known:"), "{err}");
    }

    /// A trace: a create at t = 1 s, then checkpoints (begin, end) at 2, 3, 4 s.
    fn small_trace(dir: &Path) -> PathBuf {
        let path = dir.join("t.trace");
        let mut w = placement::trace::TraceWriter::create(&path).unwrap();
        let s = 1_000_000_000;
        w.write(&Event::FileCreate {
            time_ns: s,
            file: 1,
            kind: FileKind::Collection,
            name: "c.fdb".into(),
        });
        for (i, t) in [2, 3, 4].into_iter().enumerate() {
            let id = i as u64 + 1;
            w.write(&Event::CheckpointBegin { time_ns: t * s, id });
            w.write(&Event::CheckpointCommit {
                time_ns: t * s + 1,
                id,
            });
        }
        w.flush().unwrap();
        path
    }

    /// The points in the trace file `t`, decoded as `replay` decodes it.
    fn resolve(t: &Path, asked: &[(&str, RunPoint)]) -> Result<Vec<u64>> {
        let events = read_events(t).map_err(|e| anyhow::anyhow!("{e}"))?;
        resolve_points(t, &events, asked)
    }

    #[test]
    fn points_resolve_to_event_indices_in_one_pass() {
        let dir = tempfile::tempdir().unwrap();
        let t = small_trace(dir.path());
        let asked = [
            ("a", RunPoint::Event(4)),
            ("b", RunPoint::Seconds(2.5)),
            ("c", RunPoint::Checkpoint(2)),
            ("d", RunPoint::Seconds(0.0)),
        ];
        assert_eq!(resolve(&t, &asked).unwrap(), vec![4, 5, 3, 0]);
    }

    #[test]
    fn points_past_the_end_are_all_named_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let t = small_trace(dir.path());
        let asked = [
            ("--end-of-load", RunPoint::Event(7)),
            ("--warmup-records", RunPoint::Checkpoint(4)),
        ];
        let err = resolve(&t, &asked).unwrap_err().to_string();
        assert!(
            err.contains("--end-of-load event 7 is past the trace's end"),
            "{err}"
        );
        assert!(err.contains("--warmup-records checkpoint:4"), "{err}");
        assert!(err.contains("7 events, 3 checkpoints"), "{err}");
        assert_eq!(resolve(&t, &[("x", RunPoint::Event(6))]).unwrap(), vec![6]);
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: PlacementCommand,
    }

    fn cli(args: &[&str]) -> Result<()> {
        use clap::Parser;
        let cli = Cli::try_parse_from(std::iter::once("placement").chain(args.iter().copied()))?;
        run(PlacementArgs {
            command: cli.command,
        })
    }

    /// An imported CSV trace replays like an engine's: its checkpoints are run points, and
    /// every byte it wrote reaches the device.
    #[test]
    fn an_imported_csv_trace_replays_with_its_checkpoints() {
        use std::fmt::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let p = |name: &str| dir.path().join(name).display().to_string();
        std::fs::write(
            p("files.csv"),
            "file_id,path\n1,collection-0-1.wt\n2,journal/WiredTigerLog.1\n",
        )
        .unwrap();
        // A 4 MiB collection overwritten at random 4 KiB pages, a journal appended; a sync
        // burst every 3 s of trace time.
        let mut csv = String::from("time_ns,op,file_id,offset,len\n");
        let mut x: u64 = 7;
        let mut t: u64 = 0;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            t += 1_000_000;
            writeln!(csv, "{t},write,1,{},4096", (x >> 33) % 1024 * 4096).unwrap();
            writeln!(csv, "{t},write,2,{},512", i * 512).unwrap();
            if i % 3000 == 2999 {
                writeln!(csv, "{t},fdatasync,1,0,0").unwrap();
            }
        }
        std::fs::write(p("events.csv"), csv).unwrap();
        let (events, files, trace) = (p("events.csv"), p("files.csv"), p("t.trace"));
        cli(&["import", "csv", &events, "--files", &files, "-o", &trace]).unwrap();
        let points = [("--warmup-records", RunPoint::Checkpoint(2))];
        let at = resolve(Path::new(&trace), &points).unwrap()[0];
        assert!(at > 0);
        let json = p("r.json");
        cli(&[
            "replay",
            &trace,
            "--policy",
            "none,file",
            "--size-to-trace",
            "--no-timing",
            "--no-trim",
            "--fs-discard=off",
            "--precondition",
            "--warmup-records",
            "checkpoint:2",
            "--pages-per-block",
            "16",
            "--json",
            &json,
        ])
        .unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for r in runs {
            assert_eq!(r["event_counts"]["writes"], 40_000, "{r}");
            assert!(r["write_amplification"].as_f64().unwrap() >= 1.0, "{r}");
            let steady = r["write_amplification_from_first_checkpoint"].as_f64();
            assert!(steady.is_some_and(|w| w >= 1.0), "{r}");
        }
        // Bad input names its line.
        std::fs::write(
            p("bad.csv"),
            "time_ns,op,file_id,offset,len\n1,write,1,0,4096\n2,wrte,1,0,1\n",
        )
        .unwrap();
        let bad = p("bad.csv");
        let err = cli(&["import", "csv", &bad, "--files", &files, "-o", &trace]).unwrap_err();
        assert!(
            err.to_string().contains("bad.csv line 3: unknown op"),
            "{err}"
        );
    }
}
