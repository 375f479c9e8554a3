//! The lab's replay of one engine run (`lab::run::replay_run`'s job: the run's sizing, the
//! lab's erase-block size, ρ = 7 %, 8 streams, greedy GC with newest ties, the timing model,
//! the mkfs device state (or `fill`, every LBA valid before the run: the harsher state of
//! `streams-trim`), reads kept, the run phase looped until 24 capacities are written and
//! the last pass measured) for several policies, with TRIM off or the lab's safe TRIM
//! (k = 20 000 scaled to the device, discard on). It reproduces the lab's points bit for bit
//! and runs policies the lab binary at hand may not have (docs/placement.md, "agegroup").
//!
//! `cargo run --release -p placement --features sim --example engine_replay -- ENGINE_JSON
//! TRACE_DIR off|safe mkfs|fill[@SCALE] POLICY...`: ENGINE_JSON is a lab point `points/engine-*.json`, whose
//! trace is looked up by name in TRACE_DIR; `@SCALE` multiplies the device's capacity (whole
//! pages), as the lab's `device_gb` does, for a fuller device. Prints one JSON line per
//! policy.
use placement::policy::PlacementConfig;
use placement::sim::{
    read_events, replay_planned, DevicePlan, ReplayConfig, RunLoops, TraceReplay, TrimConfig,
};
use placement::TrimWhen;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The lab's `warmup_capacities`, and seed 000's device, which the TRIM batch scales from.
const WARMUP_CAPACITIES: f64 = 24.0;
const SEED_DEVICE_BYTES: f64 = 256e9;
const SAFE_TRIM_BATCH: f64 = 20_000.0;

/// `lab::run::pages_per_block`: the largest power of two up to 256 pages leaving ≥ 1024 blocks.
fn pages_per_block(logical_pages: u64) -> u32 {
    let mut ppb = 256u64;
    while ppb > 16 && logical_pages / ppb < 1024 {
        ppb /= 2;
    }
    ppb as u32
}

fn device(logical_pages: u64) -> Result<ssd::SsdConfig, Error> {
    let mut dev = ssd::SsdConfig::with_op(logical_pages, 0.07)?;
    dev.pages_per_block = pages_per_block(logical_pages);
    dev.set_op(0.07)?;
    dev.streams = 8;
    dev.gc = ssd::GcPolicy::parse("greedy")?;
    dev.gc_tie = ssd::GcTie::Newest;
    let mut timing = ssd::TimingConfig::default();
    timing.trim.command_ns = 1_000_000;
    dev.timing = Some(timing);
    dev.validate()?;
    Ok(dev)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [point, trace_dir, trim, state, policies @ ..] = args.as_slice() else {
        return Err(
            "usage: engine_replay ENGINE_JSON TRACE_DIR off|safe mkfs|fill POLICY...".into(),
        );
    };
    let (mode, scale) = match state.split_once('@') {
        Some((m, s)) => (m, s.parse::<f64>()?),
        None => (state.as_str(), 1.0),
    };
    let precondition = ssd::PreconditionConfig {
        mode: ssd::PreconditionMode::parse(mode)?,
        ..ssd::PreconditionConfig::default()
    };
    let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(point)?)?;
    let num = |k: &[&str]| -> Result<u64, Error> {
        let v = k.iter().fold(&run, |v, k| &v[k]);
        v.as_u64()
            .ok_or_else(|| format!("{point}: no {k:?}").into())
    };
    let pages = num(&["sizing", "capacity_bytes"])? / ssd::PAGE_BYTES;
    let capacity = ((pages as f64 * scale).round() as u64).max(1) * ssd::PAGE_BYTES;
    let end_of_load = num(&["end_of_load_event"])?;
    let run_bytes = num(&["run_write_bytes"])? as f64;
    let name = run["trace"].as_str().ok_or("no trace")?;
    let name = std::path::Path::new(name)
        .file_name()
        .ok_or("no trace name")?;
    let trace = std::path::Path::new(trace_dir).join(name);
    let (batch, discard) = match trim.as_str() {
        "off" => (None, false),
        "safe" => {
            let k = (SAFE_TRIM_BATCH * capacity as f64 / SEED_DEVICE_BYTES).round() as usize;
            (Some(k.max(1)), true)
        }
        o => return Err(format!("unknown TRIM {o:?} (off, safe)").into()),
    };
    let logical_pages = capacity / ssd::PAGE_BYTES;
    let per_pass = run_bytes / capacity as f64;
    let loops = (1.0 + (WARMUP_CAPACITIES / per_pass).ceil()).min(64.0) as u32;
    let events = read_events(&trace)?;
    let n = events.len() as u64;
    let placement = PlacementConfig::default();
    let mut job = TraceReplay {
        trace: &trace,
        policy: "file",
        placement: &placement,
        device: device(logical_pages)?,
        precondition: Some(precondition),
        alloc: ssd::AllocPolicy::NextFit,
        fs_discard: discard,
        replay: ReplayConfig {
            trim: TrimConfig {
                batch,
                when: TrimWhen::Free,
            },
            end_of_load_at: Some(end_of_load),
            reset_stats_at: (end_of_load + (loops as u64 - 1) * (n - end_of_load)).max(1),
        },
        loops: RunLoops {
            from: end_of_load,
            times: loops,
        },
    };
    let plan = DevicePlan::new(&job, &events)?;
    let ops = run["run"]["operations"].as_f64().unwrap_or(1.0).max(1.0);
    for policy in policies {
        job.policy = policy;
        let r = replay_planned(&job, &events, &plan, |_, _| {})?.report;
        let flash = r.counters.host_write_pages + r.counters.gc_copy_pages;
        let line = serde_json::json!({
            "key": run["key"], "workload": run["workload"], "seed": run["seed"],
            "policy": policy, "trim": trim, "device_state": state, "trim_batch_extents": batch,
            "waf": r.write_amplification, "flash_write_pages": flash,
            "flash_writes_per_op": flash as f64 / ops, "run_loops": loops,
        });
        println!("{line}");
    }
    Ok(())
}
