//! Replay speed: host page writes per second of `placement::sim` for every policy, with the
//! timing model off, the device's precondition and the oracle's pre-pass included, on one
//! core (issue 15). Run it pinned to one core:
//!
//!     taskset -c 1 cargo bench -p placement --features sim --bench replay_speed -- \
//!         [TRACE] [--runs 3] [--policy all|a,b] [--precondition fill|steady|none] \
//!         [--device-fill 0.8] [--json OUT.json]
//!
//! Without a TRACE it replays the synthetic two-region trace (`placement::synth`, 2000
//! update windows: 2.8 M events of one page each). The device is sized as `flashdoc placement
//! replay --size-to-trace` sizes it, with that command's defaults (8 streams, 7 %
//! over-provisioning, greedy GC, TRIM batches of 20 000 extents at `Free`, filesystem discard,
//! next-fit). The trace is decoded once, and run once through the filesystem layout and the
//! TRIM batcher (a `DevicePlan`), and both are shared by every policy (as the command does);
//! each policy's figure is its host page writes (precondition included) over its own wall
//! time, and over its thread's CPU time (what a shared machine leaves of a core). Each run of
//! an oracle computes its own pre-pass, inside its time. It prints a table (median of the runs, min and max) and writes JSON with every run.

use placement::policy::PlacementConfig;
use placement::sim::{
    read_events, replay_planned, scan_events, DevicePlan, ReplayConfig, RunLoops, TraceReplay,
};
use placement::Event;
use ssd::{AllocPolicy, PreconditionConfig, PreconditionMode, SsdConfig, SsdError};
use std::path::PathBuf;
use std::time::Instant;

struct Args {
    trace: Option<PathBuf>,
    runs: usize,
    policies: Vec<&'static str>,
    precondition: Option<PreconditionMode>,
    device_fill: f64,
    json: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        trace: None,
        runs: 3,
        policies: placement::policy::POLICY_NAMES.to_vec(),
        precondition: Some(PreconditionMode::Fill),
        device_fill: 0.8,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            "--runs" => {
                a.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
                if a.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
            }
            "--policy" => {
                let v = value("--policy")?;
                if v != "all" {
                    a.policies = v
                        .split(',')
                        .map(|p| {
                            placement::policy::POLICY_NAMES
                                .iter()
                                .copied()
                                .find(|n| *n == p)
                                .ok_or(format!("unknown policy {p:?}"))
                        })
                        .collect::<Result<_, _>>()?;
                }
            }
            "--precondition" => {
                a.precondition = match value("--precondition")?.as_str() {
                    "none" => None,
                    m => Some(PreconditionMode::parse(m).map_err(|e| e.to_string())?),
                }
            }
            "--device-fill" => {
                a.device_fill = value("--device-fill")?
                    .parse()
                    .map_err(|e| format!("--device-fill: {e}"))?;
                if !(a.device_fill > 0.0 && a.device_fill <= 1.0) {
                    return Err("--device-fill must be in (0, 1]".into());
                }
            }
            "--json" => a.json = Some(value("--json")?.into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => a.trace = Some(s.into()),
        }
    }
    Ok(a)
}

/// CPU time of this thread (s): on a shared machine the wall time includes waiting for the
/// core; both are reported.
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The events to replay, their name and the seconds their decoding (or generation) took.
fn load_events(a: &Args) -> BenchResult<(String, Vec<Event>, f64)> {
    let decode_start = Instant::now();
    let (name, events): (String, Vec<Event>) = match &a.trace {
        Some(p) => (p.display().to_string(), read_events(p)?),
        None => {
            let mut cfg = placement::synth::SynthConfig::linkbench_like(7);
            cfg.windows = 2000;
            (
                "synthetic (linkbench_like, seed 7, 2000 windows)".into(),
                placement::synth::generate(&cfg).events,
            )
        }
    };
    Ok((name, events, decode_start.elapsed().as_secs_f64()))
}

fn main() -> BenchResult<()> {
    let a = parse_args()?;
    let (name, events, decode_seconds) = load_events(&a)?;
    let ext = scan_events(events.iter().map(Ok::<_, SsdError>), false)?;
    let logical_pages = ((ext.peak_file_pages as f64 / a.device_fill).ceil() as u64).max(1);
    let mut device = SsdConfig::with_op(logical_pages, 0.07)?;
    device.waf_interval = 262_144;
    let placement = PlacementConfig::default();
    let trace_path = a.trace.clone().unwrap_or_else(|| "synthetic".into());
    eprintln!(
        "{name}: {} events, decoded in {decode_seconds:.2} s; device {logical_pages} pages",
        events.len()
    );
    println!(
        "{:<17} {:>12} {:>9} {:>9} {:>9} {:>10} {:>8}",
        "policy", "host pages", "M pg/s", "min", "max", "M pg/cpu-s", "WAF"
    );
    let mut results = Vec::new();
    let mut plan: Option<(DevicePlan, f64)> = None;
    for &policy in &a.policies {
        let job = TraceReplay {
            trace: &trace_path,
            policy,
            placement: &placement,
            device: device.clone(),
            precondition: a.precondition.map(|mode| PreconditionConfig {
                mode,
                seed: 1,
                ..Default::default()
            }),
            alloc: AllocPolicy::NextFit,
            fs_discard: true,
            replay: ReplayConfig::default(),
            loops: RunLoops::once(),
        };
        let (plan, plan_seconds) = match &mut plan {
            Some(p) => p,
            None => {
                let start = Instant::now();
                let p = DevicePlan::new(&job, &events)?;
                plan.insert((p, start.elapsed().as_secs_f64()))
            }
        };
        results.push(measure_policy(&a, &job, &events, plan, *plan_seconds)?);
    }
    if let Some(p) = &a.json {
        let v = serde_json::json!({
            "bench": "placement replay_speed",
            "trace": name,
            "events": events.len(),
            "decode_seconds": decode_seconds,
            "logical_pages": logical_pages,
            "precondition": a.precondition.map(|m| format!("{m:?}")),
            "runs": a.runs,
            "policies": results,
        });
        std::fs::write(p, serde_json::to_string_pretty(&v)? + "\n")?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

/// `a.runs` replays of one policy: prints its table row and returns its JSON record.
fn measure_policy(
    a: &Args,
    job: &TraceReplay<'_>,
    events: &[Event],
    plan: &mut DevicePlan,
    plan_seconds: f64,
) -> BenchResult<serde_json::Value> {
    let policy = job.policy;
    let (mut rates, mut cpu_rates) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..a.runs {
        // Every oracle run computes its own pre-pass (the command shares one between
        // the two oracles and charges it to each).
        plan.forget_oracle_lifetimes();
        let (start, cpu) = (Instant::now(), thread_cpu_seconds());
        let out = replay_planned(job, events, plan, |_, _| {})?;
        let pages = out.device_host_pages as f64;
        rates.push(pages / start.elapsed().as_secs_f64());
        cpu_rates.push(pages / (thread_cpu_seconds() - cpu));
        last = Some(out);
    }
    let out = last.expect("at least one run");
    let (lo, hi) = (
        rates.iter().copied().fold(f64::INFINITY, f64::min),
        rates.iter().copied().fold(0.0, f64::max),
    );
    println!(
        "{policy:<17} {:>12} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>8.4}",
        out.device_host_pages,
        median(&rates) / 1e6,
        lo / 1e6,
        hi / 1e6,
        median(&cpu_rates) / 1e6,
        out.report.write_amplification
    );
    Ok(serde_json::json!({
        "policy": policy,
        "device_host_pages": out.device_host_pages,
        "trace_host_pages": out.report.counters.host_write_pages,
        "write_amplification": out.report.write_amplification,
        "gc_copy_pages": out.report.counters.gc_copy_pages,
        "pages_per_s": rates,
        "median_pages_per_s": median(&rates),
        "pages_per_cpu_s": cpu_rates,
        "median_pages_per_cpu_s": median(&cpu_rates),
        "device_plan_seconds": plan_seconds,
        "oracle_prepass_seconds": out.oracle_prepass.map(|p| p.seconds),
    }))
}
