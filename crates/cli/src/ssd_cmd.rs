//! `flashdoc ssd …`: replay traces on the simulated SSD, validate the model against theory,
//! measure the simulator's speed. The model itself lives in the `ssd` crate; this file maps
//! the `placement` crate's event traces onto it through `ssd`'s filesystem layout.

use anyhow::{bail, Context, Result};
use placement::sim::EventCounts;
use serde::Serialize;
use ssd::replay::{FsReplayer, LayoutStats};
use ssd::trace::{self, Format, Record};
use ssd::{AllocPolicy, GcDest, GcPolicy, GcTie, Ssd, SsdConfig, TimingConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct SsdArgs {
    #[command(subcommand)]
    command: SsdCommand,
}

#[derive(clap::Subcommand)]
enum SsdCommand {
    /// Replay a trace (binary, CSV, blkparse text, or a flashdoc event trace) on a simulated SSD.
    Replay(Box<ReplayArgs>),
    /// Compare simulated write amplification with the analytical models, side by side.
    Validate(ValidateArgs),
    /// Measure simulated host page writes per second at steady state.
    Bench(BenchArgs),
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The trace file.
    trace: PathBuf,
    /// auto | binary | csv | blkparse | events
    #[arg(long, default_value = "auto")]
    format: String,
    /// Host streams (stream 0 is the default stream).
    #[arg(long, default_value_t = 8)]
    streams: u32,
    /// Over-provisioning ρ = (physical − user) / user.
    #[arg(long, default_value_t = 0.07)]
    op: f64,
    /// greedy | cost-benefit | d-choices | fifo | random
    #[arg(long, default_value = "greedy")]
    gc: String,
    /// Greedy GC among equally full units: newest (reached that count last) | oldest.
    #[arg(long, default_value = "newest")]
    gc_tie: String,
    /// Sample size for d-choices.
    #[arg(long, default_value_t = 10)]
    d: u32,
    /// Where GC copies go: separate (own destination unit) | same-stream.
    #[arg(long, default_value = "separate")]
    gc_dest: String,
    /// GC runs while fewer than this many reclaim units are free.
    #[arg(long, default_value_t = 2)]
    gc_low_water: u32,
    #[arg(long, default_value_t = 256)]
    pages_per_block: u32,
    /// Erase blocks per reclaim unit (FDP-style GC granularity).
    #[arg(long, default_value_t = 1)]
    blocks_per_ru: u32,
    /// User capacity in GiB (ignored with --size-to-trace).
    #[arg(long, default_value_t = 32.0)]
    capacity_gib: f64,
    /// Size the device to the trace: block traces to the highest LBA, file traces so the
    /// files' peak footprint fills --device-fill of the device.
    #[arg(long)]
    size_to_trace: bool,
    /// With --size-to-trace on a file-level trace: share of the user capacity the files fill
    /// at their peak.
    #[arg(long = "device-fill", visible_alias = "fill", default_value_t = 0.8)]
    fill: f64,
    /// Age the device first: `--precondition` or `--precondition=fill` (every LBA written
    /// once, in LBA order) or `--precondition=steady` (the fill, then random overwrites until
    /// WA is steady).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "fill")]
    precondition: Option<String>,
    /// Reset all counters after this many trace records (a warm-up part of the trace).
    #[arg(long, default_value_t = 0)]
    warmup_records: u64,
    /// File-level traces: trim the LBAs the filesystem frees (online discard).
    #[arg(long)]
    fs_discard: bool,
    /// File-level traces: LBA allocation, next-fit | first-fit.
    #[arg(long, default_value = "next-fit")]
    alloc: String,
    /// Event traces: punch a hole for every `Free` event (the application TRIMs freed
    /// extents; they reach the device with --fs-discard).
    #[arg(long)]
    punch_frees: bool,
    /// blkparse: the action to replay (D issued, Q queued, C completed).
    #[arg(long, default_value = "D")]
    blkparse_action: String,
    /// Count pages only; no timing model.
    #[arg(long)]
    no_timing: bool,
    /// Host queue depth.
    #[arg(long, default_value_t = 32)]
    qd: u32,
    /// Issue I/Os at their trace times (default: as fast as the queue depth allows, which
    /// gives the sustainable throughput).
    #[arg(long)]
    trace_time: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A point of the WAF time series every this many host page writes.
    #[arg(long, default_value_t = 262_144)]
    waf_interval: u64,
    /// Write the JSON result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ValidateArgs {
    /// The small size the test suite uses (seconds instead of about a minute).
    #[arg(long)]
    quick: bool,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// User capacity of the benchmark device in GiB.
    #[arg(long, default_value_t = 4.0)]
    gib: f64,
    /// Random overwrites timed, as a multiple of the logical pages.
    #[arg(long, default_value_t = 3.0)]
    factor: f64,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(args: SsdArgs) -> Result<()> {
    match args.command {
        SsdCommand::Replay(a) => replay(*a),
        SsdCommand::Validate(a) => validate(a),
        SsdCommand::Bench(a) => bench(a),
    }
}

/// A one-line progress display on stderr, redrawn at most a few times a second.
struct Progress {
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        Progress {
            last: Instant::now(),
            shown: false,
        }
    }
    fn tick(&mut self, msg: impl FnOnce() -> String) {
        if self.last.elapsed().as_millis() >= 250 {
            self.last = Instant::now();
            self.shown = true;
            eprint!("\r\x1b[2K{}", msg());
            let _ = std::io::stderr().flush();
        }
    }
    fn done(&self) {
        if self.shown {
            eprintln!();
        }
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

#[derive(Serialize)]
struct TraceInfo {
    path: String,
    format: &'static str,
    records: u64,
    warmup_records: u64,
    /// What --size-to-trace found (if used).
    sized_from: Option<ssd::replay::TraceExtent>,
}

#[derive(Serialize)]
struct ReplayOutput {
    tool: &'static str,
    trace: TraceInfo,
    layout: Option<LayoutStats>,
    /// Event traces: what the events were and what was done with them.
    events: Option<EventCounts>,
    result: ssd::Report,
}

fn replay(a: ReplayArgs) -> Result<()> {
    let format = trace_format(&a)?;
    let file_level = matches!(format, Format::CsvFile | Format::PlacementEvents);
    if a.fill.is_nan() || a.fill <= 0.0 || a.fill > 1.0 {
        bail!("--device-fill must be in (0, 1], not {}", a.fill);
    }
    let alloc = AllocPolicy::parse(&a.alloc)?;
    let (logical_pages, sized_from) = capacity(&a, format, file_level)?;
    let mut dev = build_device(&a, logical_pages)?;
    let mut fs = if file_level {
        Some(FsReplayer::new(dev.logical_pages(), alloc, a.fs_discard)?)
    } else {
        None
    };
    let (records, events) = feed(&a, format, &mut dev, fs.as_mut())?;
    let warm = a.warmup_records;
    if warm > 0 && records < warm {
        bail!("the trace has {records} records, fewer than --warmup-records {warm}");
    }

    let report = dev.report();
    print_summary(&report);
    let out = ReplayOutput {
        tool: "flashdoc ssd replay",
        trace: TraceInfo {
            path: a.trace.display().to_string(),
            format: format.name(),
            records,
            warmup_records: warm,
            sized_from,
        },
        layout: fs.as_ref().map(|f| f.stats()),
        events: (format == Format::PlacementEvents).then_some(events),
        result: report,
    };
    if let Some(p) = &a.json {
        write_json(p, &out)?;
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// The trace's format from `--format`, detected from the file for `auto` and `csv`.
fn trace_format(a: &ReplayArgs) -> Result<Format> {
    Ok(match a.format.as_str() {
        "auto" => trace::detect(&a.trace)?,
        "binary" => Format::Binary,
        "blkparse" => Format::Blkparse,
        "events" => Format::PlacementEvents,
        // Block or file level is told by the header.
        "csv" => match trace::detect(&a.trace)? {
            f @ (Format::CsvBlock | Format::CsvFile) => f,
            _ => bail!(
                "{}: a CSV trace starts with the header time_ns,op,lba,pages,stream or time_ns,op,file,offset,bytes,stream",
                a.trace.display()
            ),
        },
        f => bail!("unknown trace format {f:?} (auto, binary, csv, blkparse, events)"),
    })
}

/// The device's logical pages: from a pass over the trace with `--size-to-trace` (returned
/// too, for the report), else from `--capacity-gib`.
fn capacity(
    a: &ReplayArgs,
    format: Format,
    file_level: bool,
) -> Result<(u64, Option<ssd::replay::TraceExtent>)> {
    if !a.size_to_trace {
        if a.capacity_gib.is_nan() || a.capacity_gib <= 0.0 {
            bail!("--capacity-gib must be > 0");
        }
        let pages = (a.capacity_gib * (1u64 << 30) as f64 / ssd::PAGE_BYTES as f64).round() as u64;
        return Ok((pages, None));
    }
    eprintln!("sizing the device to the trace (one pass)…");
    let ext = if format == Format::PlacementEvents {
        // The event → layout mapping is shared with `placement replay` (placement::sim).
        placement::sim::scan_events(
            placement::trace::TraceReader::open(&a.trace)
                .with_context(|| format!("opening {}", a.trace.display()))?
                .map(|e| e.map_err(anyhow::Error::from)),
            a.punch_frees,
        )?
    } else {
        ssd::replay::scan(open_reader(&a.trace, format, &a.blkparse_action)?)?
    };
    let pages = if file_level {
        (ext.peak_file_pages as f64 / a.fill).ceil() as u64
    } else {
        ext.lba_end
    };
    Ok((pages.max(1), Some(ext)))
}

/// The simulated device the options describe, preconditioned if asked.
fn build_device(a: &ReplayArgs, logical_pages: u64) -> Result<Ssd> {
    let mut cfg = SsdConfig::with_op(logical_pages.max(1), a.op)?;
    cfg.streams = a.streams;
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
    let mut dev = Ssd::new(cfg)?;
    if let Some(mode) = &a.precondition {
        eprintln!("preconditioning {} logical pages…", dev.logical_pages());
        let r = dev.precondition(&ssd::PreconditionConfig {
            mode: ssd::PreconditionMode::parse(mode)?,
            seed: a.seed,
            ..Default::default()
        })?;
        eprintln!(
            "preconditioned: {} overwrites, WAF {:.3}, steady state {}",
            r.overwrite_pages,
            r.final_window_waf,
            if r.steady { "reached" } else { "NOT reached" }
        );
    }
    Ok(dev)
}

/// After each record: zero the device's counters at the end of the warm-up, show progress.
fn after_record(records: u64, warm: u64, dev: &mut Ssd, progress: &mut Progress) {
    if warm > 0 && records == warm {
        dev.reset_stats();
    }
    progress.tick(|| {
        let s = dev.stats();
        format!(
            "{records} records, {:.2} GiB host writes, WAF {:.3}",
            (s.host_write_pages * ssd::PAGE_BYTES) as f64 / (1u64 << 30) as f64,
            s.write_amplification()
        )
    });
}

/// Replays the whole trace on `dev` (through the filesystem layout `fs` at file level);
/// returns the records read and, for event traces, what was done with the events.
fn feed(
    a: &ReplayArgs,
    format: Format,
    dev: &mut Ssd,
    mut fs: Option<&mut FsReplayer>,
) -> Result<(u64, EventCounts)> {
    let mut progress = Progress::new();
    let mut records = 0u64;
    let mut events = EventCounts::default();
    let warm = a.warmup_records;
    if format == Format::PlacementEvents {
        let fs = fs.expect("file level");
        let reader = placement::trace::TraceReader::open(&a.trace)
            .with_context(|| format!("opening event trace {}", a.trace.display()))?;
        for ev in reader {
            let ev = ev.with_context(|| format!("{}: event {}", a.trace.display(), records))?;
            let stream = match &ev {
                placement::Event::Write(w) => w.stream,
                _ => 0,
            };
            placement::sim::apply_to_device(fs, dev, &ev, stream, a.punch_frees, &mut events)
                .with_context(|| format!("{}: event {} ({:?})", a.trace.display(), records, ev))?;
            records += 1;
            after_record(records, warm, dev, &mut progress);
        }
    } else {
        let reader = open_reader(&a.trace, format, &a.blkparse_action)?;
        for rec in reader {
            let rec = rec?;
            match (&rec, fs.as_deref_mut()) {
                (Record::Host(h), _) => dev.submit(h).map(|_| ()),
                (Record::File(f), Some(fs)) => fs.apply(dev, f),
                (Record::File(_), None) => {
                    unreachable!("file records come from file-level formats")
                }
            }
            .with_context(|| {
                format!("{}: record {} ({:?})", a.trace.display(), records + 1, rec)
            })?;
            records += 1;
            after_record(records, warm, dev, &mut progress);
        }
    }
    progress.done();
    Ok((records, events))
}

fn open_reader(path: &Path, format: Format, action: &str) -> Result<trace::Reader> {
    let mut r = trace::Reader::open(path, format)?;
    r.set_blkparse_action(action);
    Ok(r)
}

fn print_summary(r: &ssd::Report) {
    let g = &r.geometry;
    println!(
        "device: {} logical pages ({:.2} GiB), ρ = {:.4} (sf {:.4}), {} reclaim units of {} pages, {} streams, GC {} ({:?} destination)",
        g.logical_pages,
        g.logical_bytes as f64 / (1u64 << 30) as f64,
        g.op,
        g.spare_factor,
        g.reclaim_units,
        g.pages_per_reclaim_unit,
        r.config.streams,
        r.config.gc.name(),
        r.config.gc_dest
    );
    if let Some(p) = &r.precondition {
        println!(
            "precondition: steady state {}, WAF {:.3}",
            if p.steady { "reached" } else { "NOT reached" },
            p.final_window_waf
        );
    }
    let c = &r.counters;
    println!(
        "host: {} page writes, {} page reads, {} pages trimmed ({} were mapped)",
        c.host_write_pages, c.host_read_pages, c.host_trim_pages, c.trim_invalidated_pages
    );
    println!(
        "write amplification {:.4}: {} GC page copies, {} erases; erase count min/mean/max {}/{:.2}/{}",
        r.write_amplification, c.gc_copy_pages, c.erases, r.erase_count.min, r.erase_count.mean, r.erase_count.max
    );
    for s in r
        .streams
        .iter()
        .filter(|s| s.host_pages > 0 || s.gc_pages > 0)
    {
        println!(
            "  stream {}: {} host pages, {} GC copies",
            s.stream, s.host_pages, s.gc_pages
        );
    }
    if let Some(t) = &r.timing {
        println!(
            "timing ({}): makespan {:.3} s, die utilisation {:.1}%, {:.0} IOPS, {:.1} MB/s",
            if t.trace_paced {
                "trace-paced"
            } else {
                "closed loop"
            },
            t.makespan_ns as f64 / 1e9,
            t.die_utilization * 100.0,
            t.iops,
            t.mb_per_s
        );
        for (name, l) in [("write", &t.write_latency), ("read", &t.read_latency)] {
            if l.count > 0 {
                println!(
                    "  {name} latency µs: p50 {:.0}, p99 {:.0}, p99.9 {:.0}, max {:.0} ({} I/Os)",
                    l.p50_us, l.p99_us, l.p99_9_us, l.max_us, l.count
                );
            }
        }
    }
}

fn validate(a: ValidateArgs) -> Result<()> {
    let size = if a.quick {
        ssd::validate::Size::quick()
    } else {
        ssd::validate::Size::full()
    };
    let start = Instant::now();
    let mut progress = Progress::new();
    let report = ssd::validate::run(&size, a.seed, &mut |i, n, label| {
        progress.last = Instant::now() - std::time::Duration::from_secs(1);
        progress.tick(|| format!("[{i}/{n}] {label} ({:.0} s)", start.elapsed().as_secs_f64()));
    });
    progress.done();
    print!("{}", ssd::validate::render(&report));
    if let Some(p) = &a.json {
        write_json(p, &report)?;
        println!("wrote {}", p.display());
    }
    if !report.all_pass {
        bail!("validation failed");
    }
    Ok(())
}

#[derive(Serialize)]
struct BenchOutput {
    tool: &'static str,
    note: &'static str,
    runs: Vec<ssd::bench::BenchResult>,
}

fn bench(a: BenchArgs) -> Result<()> {
    let pages = (a.gib * (1u64 << 30) as f64 / ssd::PAGE_BYTES as f64).round() as u64;
    let mut runs = Vec::new();
    let plan: [(&str, f64, GcPolicy, bool); 4] = [
        ("greedy, ρ=0.07, no timing", 0.07, GcPolicy::Greedy, false),
        ("greedy, ρ=0.28, no timing", 0.28, GcPolicy::Greedy, false),
        ("fifo, ρ=0.07, no timing", 0.07, GcPolicy::Fifo, false),
        (
            "greedy, ρ=0.07, timing model on",
            0.07,
            GcPolicy::Greedy,
            true,
        ),
    ];
    for (label, op, gc, timing) in plan {
        let mut cfg = SsdConfig::with_op(pages, op)?;
        cfg.gc = gc;
        if timing {
            cfg.timing = Some(TimingConfig::default());
        }
        eprintln!("bench: {label} ({pages} logical pages)…");
        let r = ssd::bench::run(label, cfg, a.factor, a.seed)?;
        println!(
            "{label}: {:.2} M host page writes/s (WAF {:.3}, {} writes in {:.2} s)",
            r.host_page_writes_per_sec / 1e6,
            r.write_amplification,
            r.host_page_writes,
            r.seconds
        );
        runs.push(r);
    }
    if let Some(p) = &a.json {
        write_json(
            p,
            &BenchOutput {
                tool: "flashdoc ssd bench",
                note: "uniform random 4 KiB overwrites after preconditioning, one thread; wall-clock figures vary with the machine",
                runs,
            },
        )?;
        println!("wrote {}", p.display());
    }
    Ok(())
}
