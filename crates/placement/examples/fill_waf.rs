//! The `inplace-vs-cow` experiment's replay of one engine run at each device fill
//! (`lab::inplace_cow::replays`: the device sized so the files' peak fills it to F, the lab's
//! erase-block size, ρ = 7 %, 8 streams, greedy GC with newest ties, the timing model, reads
//! kept, TRIM off, the run phase looped until 24 capacities are written and the last pass
//! measured), with one setting varied at a time, and what the device held: it measures why a
//! design's WAF moves with fill (docs/placement.md, "In place against out of place").
//!
//! `cargo run -p placement --features sim --example fill_waf -- ENGINE_JSON TRACE_DIR
//! [KEY=VALUE…]`: ENGINE_JSON is a lab point `points/engine-*.json`, whose trace is looked up
//! by name in TRACE_DIR. Settings (the lab's by default): `policy=none`, `pre=mkfs|fill|none`,
//! `alloc=next-fit|first-fit`, `discard=off|on` (the file system discards what removed and
//! truncated files free), `op=0.07`, `ppb=N` (erase-block pages; default the lab's, which
//! grows with the device), `fills=0.2,0.4,0.6,0.8,0.9`. One JSON line per fill:
//! - `waf`, `host_pages`, `gc_copies`: the measured (last) pass, as the lab reports them;
//! - `files_peak_share`: the files' peak pages ÷ the device's logical pages (the fill);
//! - `lbas_written_share`: distinct LBAs the replay ever wrote ÷ logical pages, after the load
//!   (`_load`), after the first run pass (`_pass1`) and at the end;
//! - `valid_share_at_first_gc`, `valid_share_measured`: the LBAs the device holds valid ÷
//!   logical pages when garbage collection first copies a page, and averaged over the
//!   measured pass (sampled every 2^16 events).
use placement::policy::PlacementConfig;
use placement::sim::{
    apply_to_device, read_events, replay_loaded, scan_events, EventCounts, ReplayConfig, RunLoops,
    TraceReplay, TrimConfig,
};
use placement::{Event, TrimWhen};
use ssd::replay::FsReplayer;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The lab's `warmup_capacities` and its smallest device (`inplace_cow::MIN_DEVICE_PAGES`).
const WARMUP_CAPACITIES: f64 = 24.0;
const MIN_DEVICE_PAGES: u64 = 1024;

/// What one invocation varies.
struct Settings {
    policy: String,
    precondition: String,
    alloc: ssd::AllocPolicy,
    discard: bool,
    op: f64,
    ppb: Option<u32>,
    fills: Vec<f64>,
}

fn settings(args: &[String]) -> Result<Settings, Error> {
    let mut s = Settings {
        policy: "none".into(),
        precondition: "mkfs".into(),
        alloc: ssd::AllocPolicy::NextFit,
        discard: false,
        op: 0.07,
        ppb: None,
        fills: vec![0.2, 0.4, 0.6, 0.8, 0.9],
    };
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("{a:?}: settings are KEY=VALUE"))?;
        match k {
            "policy" => s.policy = v.into(),
            "pre" => s.precondition = v.into(),
            "alloc" => s.alloc = ssd::AllocPolicy::parse(v)?,
            "discard" => {
                s.discard = match v {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("discard={v:?}: on or off").into()),
                }
            }
            "op" => s.op = v.parse()?,
            "ppb" => s.ppb = Some(v.parse()?),
            "fills" => s.fills = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            _ => return Err(format!("unknown setting {k:?}").into()),
        }
    }
    Ok(s)
}

/// `lab::run::pages_per_block`: the largest power of two up to 256 pages leaving ≥ 1024 blocks.
fn lab_pages_per_block(logical_pages: u64) -> u32 {
    let mut ppb = 256u64;
    while ppb > 16 && logical_pages / ppb < 1024 {
        ppb /= 2;
    }
    ppb as u32
}

fn device(logical_pages: u64, s: &Settings) -> Result<ssd::SsdConfig, Error> {
    let mut dev = ssd::SsdConfig::with_op(logical_pages, s.op)?;
    dev.pages_per_block = s.ppb.unwrap_or_else(|| lab_pages_per_block(logical_pages));
    dev.set_op(s.op)?;
    dev.streams = 8;
    dev.gc = ssd::GcPolicy::parse("greedy")?;
    dev.gc_tie = ssd::GcTie::Newest;
    let mut timing = ssd::TimingConfig::default();
    timing.trim.command_ns = 1_000_000;
    dev.timing = Some(timing);
    dev.validate()?;
    Ok(dev)
}

/// The LBAs a replay's file system writes and trims, as a device would hold them.
struct LbaMap {
    written: Vec<bool>,
    valid: Vec<bool>,
    written_count: u64,
}

impl ssd::BlockDevice for LbaMap {
    fn submit(&mut self, op: &ssd::HostOp) -> Result<Option<u64>, ssd::SsdError> {
        let range = op.lba as usize..(op.lba + op.pages) as usize;
        match op.kind {
            ssd::OpKind::Write => {
                for l in range {
                    if !self.written[l] {
                        self.written[l] = true;
                        self.written_count += 1;
                    }
                    self.valid[l] = true;
                }
            }
            ssd::OpKind::Trim => self.valid[range].fill(false),
            ssd::OpKind::Read => {}
        }
        Ok(None)
    }
}

/// Distinct LBAs written after the load, after the first run pass and at the end of `loops`
/// passes, as shares of `pages`.
fn lbas_written(
    events: &[Event],
    end_of_load: usize,
    loops: u32,
    pages: u64,
    s: &Settings,
) -> Result<[f64; 3], Error> {
    let mut fs = FsReplayer::new(pages, s.alloc, s.discard)?;
    let mut map = LbaMap {
        written: vec![false; pages as usize],
        valid: vec![false; pages as usize],
        written_count: 0,
    };
    let mut n = EventCounts::default();
    let mut shares = [0.0; 3];
    for ev in &events[..end_of_load] {
        apply_to_device(&mut fs, &mut map, ev, 0, false, &mut n)?;
    }
    shares[0] = map.written_count as f64 / pages as f64;
    for pass in 0..loops {
        for ev in &events[end_of_load..] {
            apply_to_device(&mut fs, &mut map, ev, 0, false, &mut n)?;
        }
        if pass == 0 {
            shares[1] = map.written_count as f64 / pages as f64;
        }
    }
    shares[2] = map.written_count as f64 / pages as f64;
    Ok(shares)
}

/// One fill's replay and what the device held; one JSON line.
fn replay_at(
    run: &serde_json::Value,
    trace: &std::path::Path,
    events: &[Event],
    peak: u64,
    fill: f64,
    s: &Settings,
) -> Result<serde_json::Value, Error> {
    let end_of_load = run["end_of_load_event"]
        .as_u64()
        .ok_or("no end_of_load_event")?;
    let run_bytes = run["run_write_bytes"]
        .as_f64()
        .ok_or("no run_write_bytes")?;
    let pages = ((peak as f64 / fill).ceil() as u64).max(MIN_DEVICE_PAGES);
    let per_pass = run_bytes / (pages * ssd::PAGE_BYTES) as f64;
    let loops = (1.0 + (WARMUP_CAPACITIES / per_pass).ceil()).min(64.0) as u32;
    let n = events.len() as u64;
    let reset_at = (end_of_load + (loops as u64 - 1) * (n - end_of_load)).max(1);
    let placement = PlacementConfig::default();
    let job = TraceReplay {
        trace,
        policy: &s.policy,
        placement: &placement,
        device: device(pages, s)?,
        precondition: match s.precondition.as_str() {
            "none" => None,
            mode => Some(ssd::PreconditionConfig {
                mode: ssd::PreconditionMode::parse(mode)?,
                ..ssd::PreconditionConfig::default()
            }),
        },
        alloc: s.alloc,
        fs_discard: s.discard,
        replay: ReplayConfig {
            trim: TrimConfig {
                batch: None,
                when: TrimWhen::Free,
            },
            end_of_load_at: Some(end_of_load),
            reset_stats_at: reset_at,
        },
        loops: RunLoops {
            from: end_of_load,
            times: loops,
        },
    };
    let mut at_first_gc = None;
    let (mut measured_sum, mut measured_samples) = (0.0, 0u64);
    let out = replay_loaded(&job, events, |i, dev| {
        let valid = dev.ftl().mapped_pages() as f64 / pages as f64;
        if at_first_gc.is_none() && dev.stats().gc_copy_pages > 0 {
            at_first_gc = Some(valid);
        }
        if i >= reset_at {
            measured_sum += valid;
            measured_samples += 1;
        }
    })?;
    let written = lbas_written(events, end_of_load as usize, loops, pages, s)?;
    let r = &out.report;
    Ok(serde_json::json!({
        "key": run["key"], "policy": s.policy, "pre": s.precondition,
        "alloc": format!("{:?}", s.alloc), "discard": s.discard, "op": s.op,
        "fill": fill, "logical_pages": pages, "pages_per_block": job.device.pages_per_block,
        "run_loops": loops,
        "waf": r.write_amplification, "host_pages": r.counters.host_write_pages,
        "gc_copies": r.counters.gc_copy_pages,
        "files_peak_share": peak as f64 / pages as f64,
        "lbas_written_share_load": written[0], "lbas_written_share_pass1": written[1],
        "lbas_written_share": written[2],
        "valid_share_at_first_gc": at_first_gc,
        "valid_share_measured": measured_sum / measured_samples.max(1) as f64,
    }))
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [point, trace_dir, rest @ ..] = args.as_slice() else {
        return Err("usage: fill_waf ENGINE_JSON TRACE_DIR [KEY=VALUE…]".into());
    };
    let s = settings(rest)?;
    let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(point)?)?;
    let name = run["trace"].as_str().ok_or("no trace")?;
    let name = std::path::Path::new(name)
        .file_name()
        .ok_or("no trace name")?;
    let trace = std::path::Path::new(trace_dir).join(name);
    let events = read_events(&trace)?;
    // `lab::inplace_cow::peak_file_pages`: the load, then the run phase twice.
    let eol = (run["end_of_load_event"]
        .as_u64()
        .ok_or("no end_of_load_event")? as usize)
        .min(events.len());
    let replayed = events.iter().chain(&events[eol..]);
    let peak = scan_events(replayed.map(Ok::<_, Error>), false)?.peak_file_pages;
    for &fill in &s.fills {
        println!("{}", replay_at(&run, &trace, &events, peak, fill, &s)?);
    }
    Ok(())
}
