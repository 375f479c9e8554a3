//! `real-wiredtiger`: the stream experiment's replay on a real WiredTiger's writes, beside
//! flashdoc's engine on the same workload.
//!
//! For each YCSB workload and seed, WiredTiger 11.3.1 runs `crates/shim/wtdriver.c` (mongod's
//! layout: a collection and its `_id` index; YCSB's scrambled zipfian over 1000-byte documents,
//! the workload's read/update mix, the scale's records, operations and threads) under
//! `libflashdoc_shim.so`, which records its writes as an event trace. The run is sized as the
//! lab sizes its own engine ([`Sizing`]: the device from the loaded tables and `device_fill`,
//! the run's cache from `cache_share`, a checkpoint every `checkpoint_share` of the device in
//! bytes written — the driver polls WiredTiger's own counts of bytes written). flashdoc's
//! engine runs the same workload through the lab as in
//! `streams`. Every trace is replayed through every policy on the same simulated device, as
//! the stream experiments do ([`Lab::replay`]); the shim's traces carry no `Free` events and no
//! page ids, so the experiment runs without TRIM (the seeds' condition) and `lifetime` falls
//! back to its file rules there.
//!
//! Needs: a WiredTiger build (`FLASHDOC_WIREDTIGER`, else `scripts/build-wiredtiger.sh` builds
//! one), the shim (`FLASHDOC_SHIM`, else `libflashdoc_shim.so` beside the running program:
//! `cargo build --release -p flashdoc-shim`), a C compiler.

use crate::experiment::{Experiment, ScaleSpec, ENGINE_DIRTY_PCT};
use crate::report::Report;
use crate::run::{self, EngineRun, Lab, Point, Sizing};
use crate::secantus;
use crate::tools::Tools;
use anyhow::{anyhow, bail, Context, Result};
use placement::trace::TraceReader;
use placement::{Event, FileKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use workload::measure::PhaseResult;

/// The allocation label of WiredTiger's runs in results (flashdoc's are `best` and `sweep`).
pub const WIREDTIGER: &str = "wiredtiger";

/// The driver's file kinds for the shim (`placement::classify` syntax).
const KINDS: &str = "collection=collection.wt;index=index.wt;\
                     journal=WiredTigerLog.*,WiredTigerPreplog.*,WiredTigerTmplog.*";

/// The file whose creation marks the run phase in the driver's trace.
const RUN_MARKER: &str = "flashdoc-run-phase";

fn tools(out: &Path, quiet: bool) -> Result<Tools> {
    let wt = match std::env::var_os("FLASHDOC_WIREDTIGER") {
        Some(d) => PathBuf::from(d),
        None => {
            if !quiet {
                eprintln!("real-wiredtiger: building WiredTiger 11.3.1 (once; about 5 minutes)");
            }
            run::setup_script("scripts/build-wiredtiger.sh", "building WiredTiger")?
        }
    };
    if !wt.join("libwiredtiger.so").exists() {
        bail!(
            "no libwiredtiger.so in {} (FLASHDOC_WIREDTIGER)",
            wt.display()
        );
    }
    let shim = match std::env::var_os("FLASHDOC_SHIM") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()?
            .parent()
            .ok_or_else(|| anyhow!("the running program has no directory"))?
            .join("libflashdoc_shim.so"),
    };
    if !shim.exists() {
        bail!(
            "no shim at {}: build it with `cargo build --release -p flashdoc-shim` (or set FLASHDOC_SHIM)",
            shim.display()
        );
    }
    let dir = out.join("tools");
    std::fs::create_dir_all(&dir)?;
    let driver = dir.join("wtdriver");
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&driver)
        .arg(run::repo_root().join("crates/shim/wtdriver.c"))
        .arg(format!("-I{}", wt.join("include").display()))
        .arg(format!("-L{}", wt.display()))
        .arg(format!("-Wl,-rpath,{}", wt.display()))
        .args(["-lwiredtiger", "-lpthread", "-lm"])
        .status()
        .context("running cc")?;
    if !status.success() {
        bail!("compiling crates/shim/wtdriver.c failed");
    }
    Ok(Tools {
        driver,
        shim,
        secantusd: secantus::program(quiet)?,
    })
}

/// The workload's share of reads (flashdoc's YCSB definitions: update-heavy is YCSB-A), or
/// `None` for a workload `wtdriver` does not run (LinkBench needs a document layer: SecantusDB
/// runs it).
fn read_pct(workload: &str) -> Option<u32> {
    match workload {
        "ycsb-update-heavy" => Some(50),
        "ycsb-update-only" => Some(0),
        _ => None,
    }
}

/// What the driver printed.
#[derive(serde::Deserialize)]
struct DriverReport {
    records: u64,
    load_s: f64,
    run_ops: u64,
    run_s: f64,
    db_load_bytes: u64,
    run_cache_bytes: u64,
    checkpoint_bytes: u64,
}

fn phase(name: &str, operations: u64, seconds: f64) -> PhaseResult {
    PhaseResult {
        phase: name.into(),
        runtime_ms: seconds * 1e3,
        operations,
        throughput_ops_sec: operations as f64 / seconds.max(1e-9),
        ..PhaseResult::default()
    }
}

/// Runs `wtdriver` under the shim into `work`, its trace into `trace`, and checks that it
/// sized the run as the lab does. Returns its report and the run's sizing.
fn drive(
    lab: &Lab,
    tools: &Tools,
    workload: &str,
    seed: u64,
    cache_share: f64,
    work: &Path,
    trace: &Path,
) -> Result<(DriverReport, Sizing)> {
    let exp = &lab.exp;
    let scale: &ScaleSpec = &lab.scale;
    // WiredTiger's journal file size is fixed when it opens, before the load tells the
    // database's size: sized from the documents' raw bytes instead (at least its 100 KB).
    let journal = Sizing::new(scale.ycsb_records * 1000, exp, cache_share).journal_file_bytes;
    let o = Command::new(&tools.driver)
        .arg(work)
        .arg(format!("records={}", scale.ycsb_records))
        .arg(format!("ops={}", scale.ycsb_ops))
        .arg(format!("threads={}", scale.threads))
        .arg(format!(
            "read_pct={}",
            read_pct(workload).ok_or_else(|| anyhow!("wtdriver runs YCSB only, not {workload}"))?
        ))
        .arg(format!("seed={seed}"))
        .arg(format!("load_cache_mb={}", scale.load_cache_mb))
        .arg(format!("log_file_kb={}", (journal >> 10).max(100)))
        .arg(format!("device_fill={}", exp.device_fill))
        .arg(format!("cache_share={cache_share}"))
        .arg(format!("checkpoint_share={}", exp.checkpoint_share))
        .env("LD_PRELOAD", &tools.shim)
        .env("FLASHDOC_SHIM_DIR", work)
        .env("FLASHDOC_SHIM_TRACE", trace)
        .env("FLASHDOC_SHIM_KINDS", KINDS)
        .output()
        .context("running the WiredTiger driver")?;
    if !o.status.success() {
        bail!(
            "the WiredTiger driver failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let d: DriverReport = serde_json::from_slice(&o.stdout).with_context(|| {
        format!(
            "the driver's report {:?}",
            String::from_utf8_lossy(&o.stdout)
        )
    })?;
    let sizing = Sizing::new(d.db_load_bytes, exp, cache_share);
    if (d.run_cache_bytes, d.checkpoint_bytes)
        != (sizing.cache_bytes, sizing.checkpoint_every_bytes)
    {
        bail!(
            "wtdriver.c sized the run (cache {} B, checkpoint every {} B) unlike the lab ({} B, {} B)",
            d.run_cache_bytes,
            d.checkpoint_bytes,
            sizing.cache_bytes,
            sizing.checkpoint_every_bytes
        );
    }
    Ok((d, sizing))
}

/// Runs WiredTiger under the shim for one workload and seed (or reads the run done before).
fn wiredtiger_run(
    lab: &Lab,
    tools: &Tools,
    workload: &str,
    seed: u64,
    cache_share: f64,
) -> Result<EngineRun> {
    let exp = &lab.exp;
    let scale: &ScaleSpec = &lab.scale;
    let key = format!(
        "{WIREDTIGER}-{workload}-c{cache_share}-f{}-k{}-r{}-s{seed}-{}",
        exp.device_fill, exp.checkpoint_share, exp.run_factor, exp.scale
    );
    let saved = lab.out.join("points").join(format!("engine-{key}.json"));
    if let Some(r) = run::saved_run(&saved) {
        return Ok(r);
    }
    let work = run::new_work_dir(&lab.out, &key)?;
    let trace = lab.out.join("traces").join(format!("{key}.trace"));
    let _ = std::fs::remove_file(&trace);
    let started = std::time::Instant::now();
    let (d, sizing) = drive(lab, tools, workload, seed, cache_share, &work, &trace)?;
    let (end_of_load_event, events, checkpoints) = scan(&trace)?;
    let db_bytes = ["collection.wt", "index.wt"]
        .iter()
        .map(|f| std::fs::metadata(work.join(f)).map(|m| m.len()))
        .sum::<std::io::Result<u64>>()?;
    let _ = std::fs::remove_dir_all(&work);
    let shares = run::write_shares(&trace, end_of_load_event)?;
    let r = EngineRun {
        trace_version: run::TRACE_VERSION,
        engine: crate::experiment::COPY_ON_WRITE.into(),
        key: key.clone(),
        workload: workload.to_string(),
        seed,
        cache_share,
        leaf_kb: 32,
        compressor: "none".into(),
        allocation: WIREDTIGER.into(),
        // WiredTiger's own dirty budget.
        dirty_pct: ENGINE_DIRTY_PCT,
        scale_name: exp.scale.clone(),
        scale: scale.clone(),
        // Buffered: neither driver opens its files with O_DIRECT.
        direct_io: "none".into(),
        sizing,
        load: phase("load", d.records, d.load_s),
        run: phase("run", d.run_ops, d.run_s),
        trace,
        end_of_load_event,
        run_write_bytes: shares.by_file.values().sum(),
        events,
        db_bytes,
        write_bytes_by_file: shares.by_file,
        write_bytes_by_page: shares.by_page,
        checkpoints,
        checkpoint_trigger: None,
        intervals: None,
        leaf_changes: None,
        run_checkpoints: shares.checkpoints,
        interval_bytes_mean: shares.interval_bytes_mean,
        wall_s: started.elapsed().as_secs_f64(),
        extra: BTreeMap::new(),
    };
    std::fs::write(&saved, serde_json::to_string_pretty(&r)?)?;
    Ok(r)
}

/// The run-phase marker's event index, the events, and the checkpoints committed.
fn scan(trace: &Path) -> Result<(u64, u64, u64)> {
    let (mut marker, mut events, mut commits) = (None, 0u64, 0u64);
    for ev in TraceReader::open(trace)? {
        match ev? {
            Event::FileCreate { name, .. } if name == RUN_MARKER => marker = Some(events),
            Event::CheckpointCommit { .. } => commits += 1,
            _ => {}
        }
        events += 1;
    }
    let marker = marker.ok_or_else(|| anyhow!("{}: no run-phase marker", trace.display()))?;
    Ok((marker, events, commits))
}

/// The two-region pattern of seed 003 in one trace's run phase: each collection file is split
/// at its size at the end of the load; per checkpoint window, the share of the collection's
/// bytes written above that boundary, and how often the busier region changes from one window
/// to the next (the seeds' "heat swaps at every checkpoint").
#[derive(Debug, Default, serde::Serialize)]
pub struct TwoRegions {
    pub windows: u64,
    pub above_share_median: f64,
    pub swap_rate: f64,
}

pub fn two_regions(trace: &Path, end_of_load_event: u64) -> Result<TwoRegions> {
    let mut boundary: BTreeMap<u32, u64> = BTreeMap::new();
    let mut window = [0u64; 2];
    let mut shares = Vec::new();
    for (i, ev) in TraceReader::open(trace)?.enumerate() {
        match ev? {
            Event::Write(w) if w.file_kind == FileKind::Collection => {
                let end = w.offset + w.len as u64;
                if (i as u64) < end_of_load_event {
                    let b = boundary.entry(w.file).or_default();
                    *b = (*b).max(end);
                } else {
                    let above = boundary.get(&w.file).is_none_or(|&b| w.offset >= b);
                    window[above as usize] += w.len as u64;
                }
            }
            Event::CheckpointBegin { .. } if (i as u64) >= end_of_load_event => {
                let total = window[0] + window[1];
                if total > 0 {
                    shares.push(window[1] as f64 / total as f64);
                }
                window = [0, 0];
            }
            _ => {}
        }
    }
    if shares.is_empty() {
        return Ok(TwoRegions::default());
    }
    let swaps = shares
        .windows(2)
        .filter(|p| (p[0] > 0.5) != (p[1] > 0.5))
        .count();
    let mut sorted = shares.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(TwoRegions {
        windows: shares.len() as u64,
        above_share_median: sorted[sorted.len() / 2],
        swap_rate: if shares.len() > 1 {
            swaps as f64 / (shares.len() - 1) as f64
        } else {
            0.0
        },
    })
}

/// Runs the experiment into `out`; returns the report's path.
pub fn run(exp: Experiment, scale: Option<&str>, out: &Path, quiet: bool) -> Result<PathBuf> {
    let lab = Lab::new(out, exp, scale, quiet)?;
    let tools = tools(out, quiet)?;
    // flashdoc's engine, as in `streams`.
    let mut points = lab.run_all()?;
    let mut all_runs = lab.engine_runs()?;
    let cache_share = lab.exp.cache_shares[0];
    let e = &lab.exp;
    let jobs = lab.replay_jobs();
    for w in &e.workloads {
        for &seed in &e.seeds {
            let mut runs = Vec::new();
            if read_pct(w).is_some() {
                if !quiet {
                    eprintln!("real-wiredtiger: {w} seed {seed}: WiredTiger under the shim");
                }
                runs.push(
                    wiredtiger_run(&lab, &tools, w, seed, cache_share)
                        .with_context(|| format!("WiredTiger, {w} seed {seed}"))?,
                );
            }
            if !quiet {
                eprintln!("real-wiredtiger: {w} seed {seed}: SecantusDB under the shim");
            }
            runs.push(
                secantus::secantus_run(&lab, &tools, w, seed, cache_share)
                    .with_context(|| format!("SecantusDB, {w} seed {seed}"))?,
            );
            for r in &runs {
                for dev in lab.replays(r, &jobs, &indicatif::ProgressBar::hidden())? {
                    points.push(lab.point(r, dev));
                }
            }
            all_runs.extend(runs);
        }
    }
    run::write_results(out, &lab.exp, &lab.scale, &points, &all_runs)?;
    report(out, &lab, &points, &all_runs)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |x| format!("{x:.digits$}"))
}

/// Engines in report order, with their labels.
const ENGINES: &[(&str, &str)] = &[
    (WIREDTIGER, "WiredTiger 11.3.1"),
    (secantus::SECANTUSDB, "SecantusDB 0.7.0b3 (WiredTiger)"),
    ("best", "flashdoc (best-fit)"),
    ("sweep", "flashdoc (sweep)"),
];

fn report(out: &Path, lab: &Lab, points: &[Point], runs: &[EngineRun]) -> Result<PathBuf> {
    let e = &lab.exp;
    let mut r = Report::new(format!("flashdoc lab: {}", e.title));
    r.p(e.description.clone());
    r.p(format!(
        "Scale `{}`: {} records, {} operations, {} threads; device {} full of loaded data, a checkpoint every {} of it, run cache {} of the data; medians over seeds {:?}. Reproduce: `flashdoc lab run {} --scale {} --out DIR`.",
        e.scale, lab.scale.ycsb_records, lab.scale.ycsb_ops, lab.scale.threads, e.device_fill,
        e.checkpoint_share, cache_share_text(e), e.seeds, e.name, e.scale
    ));
    policy_tables(&mut r, lab, points);
    written_section(&mut r, runs)?;
    r.h2("Where the engines differ, from the traces");
    r.p("Per workload and engine, policy `none`, medians over seeds: host pages written per operation and the journal's share of them; the file space the engine released in the run phase by removing and by truncating files, as a share of what it wrote; write amplification without and with filesystem discard. Without discard, released space stays valid on the aged device until the filesystem's next-fit cursor reuses its addresses, and the device copies it in garbage collection; with discard it is trimmed when released.");
    for w in &e.workloads {
        for line in differences(lab, w, points, runs)? {
            r.p(line);
        }
    }
    r.save(out)
}

/// Per TRIM condition, each policy's write amplification and flash writes per operation on
/// every engine.
fn policy_tables(r: &mut Report, lab: &Lab, points: &[Point]) {
    let e = &lab.exp;
    let value = |w: &str, alloc: &str, policy: &str, trim: &str, f: &dyn Fn(&Point) -> f64| {
        median(
            points
                .iter()
                .filter(|p| {
                    p.workload == w && p.allocation == alloc && p.policy == policy && p.trim == trim
                })
                .map(f)
                .collect(),
        )
    };
    let mut head = vec!["workload", "policy"];
    for (_, label) in ENGINES {
        head.push(label);
    }
    for (title, digits, metric) in [
        (
            "Write amplification per policy (device, run phase)",
            2,
            &(|p: &Point| p.device.waf) as &dyn Fn(&Point) -> f64,
        ),
        (
            "Flash page writes per operation (host pages × WAF ÷ operations)",
            1,
            &|p: &Point| p.device.flash_writes_per_op,
        ),
    ] {
        for trim in &e.trims {
            r.h2(format!("{title}; {}", trim_text(trim)));
            let mut rows = Vec::new();
            for w in &e.workloads {
                for p in &e.policies {
                    let mut row = vec![w.clone(), p.clone()];
                    for (alloc, _) in ENGINES {
                        row.push(cell(value(w, alloc, p, &trim.label(), metric), digits));
                    }
                    rows.push(row);
                }
            }
            r.table(&head, rows);
        }
    }
}

/// What each engine wrote in the run phase, one row per engine run.
fn written_section(r: &mut Report, runs: &[EngineRun]) -> Result<()> {
    r.h2("What each engine wrote in the run phase");
    r.p("Shares of the run phase's bytes by file kind; host 4 KB pages per operation; mean bytes between checkpoint begins; seed 003's two-region pattern: the share of the collection's writes above its end-of-load size (median over checkpoint windows) and how often the busier region changes between consecutive windows; files removed and truncations in the run phase, and the share of journal writes not aligned to 4 KB pages (each rewrites a page already written).");
    let mut rows = Vec::new();
    for run in runs {
        let total = run.run_write_bytes.max(1) as f64;
        let share =
            |k: &str| run.write_bytes_by_file.get(k).copied().unwrap_or(0) as f64 / total * 100.0;
        let regions = two_regions(&run.trace, run.end_of_load_event)?;
        let files = file_calls(&run.trace, run.end_of_load_event)?;
        let label = ENGINES
            .iter()
            .find(|(a, _)| *a == run.allocation)
            .map_or(run.allocation.as_str(), |(_, l)| l);
        rows.push(vec![
            run.workload.clone(),
            label.to_string(),
            run.seed.to_string(),
            format!("{:.1}", share("collection")),
            format!("{:.1}", share("primary index") + share("secondary index")),
            format!("{:.1}", share("journal")),
            format!("{:.1}", share("metadata")),
            format!(
                "{:.2}",
                run.run_write_bytes as f64 / 4096.0 / run.run.operations.max(1) as f64
            ),
            format!("{:.1}", run.interval_bytes_mean / (1 << 20) as f64),
            format!("{}", regions.windows),
            format!("{:.0} %", regions.above_share_median * 100.0),
            format!("{:.2}", regions.swap_rate),
            format!(
                "{} ({:.0} MB)",
                files.removed,
                files.removed_bytes as f64 / 1e6
            ),
            format!(
                "{} ({:.0} MB)",
                files.truncated,
                files.truncated_bytes as f64 / 1e6
            ),
            format!(
                "{:.0} %",
                files.journal_unaligned as f64 / files.journal_writes.max(1) as f64 * 100.0
            ),
        ]);
    }
    r.table(
        &[
            "workload",
            "engine",
            "seed",
            "collection %",
            "index %",
            "journal %",
            "metadata %",
            "host pages/op",
            "MB per checkpoint",
            "windows",
            "above boundary",
            "swap rate",
            "files removed",
            "truncations",
            "unaligned journal writes",
        ],
        rows,
    );
    Ok(())
}

/// One engine's run-phase figures on one workload (medians over seeds), for [`differences`].
struct Facts {
    host_pages_per_op: f64,
    journal_share: f64,
    /// Bytes released by removing and by truncating files, per byte written.
    removed_share: f64,
    truncated_share: f64,
    growth_share: f64,
    /// Pages written in the run phase ÷ the device's logical pages.
    footprint: f64,
    /// The share of page writes that went to the most-written tenth of the pages written.
    top_tenth_share: f64,
    /// Page writes per sequential run.
    run_pages: f64,
    waf: f64,
    waf_discard: f64,
}

fn facts(
    lab: &Lab,
    w: &str,
    alloc: &str,
    points: &[Point],
    runs: &[EngineRun],
) -> Result<Option<Facts>> {
    let runs: Vec<_> = runs
        .iter()
        .filter(|r| r.workload == w && r.allocation == alloc)
        .collect();
    let calls = runs
        .iter()
        .map(|r| file_calls(&r.trace, r.end_of_load_event))
        .collect::<Result<Vec<_>>>()?;
    let of_runs = |f: &dyn Fn(&EngineRun, &FileCalls) -> f64| {
        median(runs.iter().zip(&calls).map(|(r, c)| f(r, c)).collect())
    };
    let of_points = |discard: bool, f: &dyn Fn(&Point) -> f64| {
        let trim = lab
            .exp
            .trims
            .iter()
            .find(|t| t.batch.is_none() && t.discard == discard)?
            .label();
        median(
            points
                .iter()
                .filter(|p| {
                    p.workload == w && p.allocation == alloc && p.policy == "none" && p.trim == trim
                })
                .map(f)
                .collect(),
        )
    };
    let facts = || {
        Some(Facts {
            host_pages_per_op: of_runs(&|r, _| {
                r.run_write_bytes as f64 / 4096.0 / r.run.operations.max(1) as f64
            })?,
            journal_share: of_runs(&|r, _| {
                r.write_bytes_by_file.get("journal").copied().unwrap_or(0) as f64
                    / r.run_write_bytes.max(1) as f64
            })?,
            removed_share: of_runs(&|r, c| {
                c.removed_bytes as f64 / r.run_write_bytes.max(1) as f64
            })?,
            truncated_share: of_runs(&|r, c| {
                c.truncated_bytes as f64 / r.run_write_bytes.max(1) as f64
            })?,
            growth_share: of_runs(&|r, c| c.growth_bytes as f64 / r.run_write_bytes.max(1) as f64)?,
            footprint: of_runs(&|r, c| {
                c.pages_touched as f64 * 4096.0 / r.sizing.capacity_bytes.max(1) as f64
            })?,
            top_tenth_share: of_runs(&|_, c| {
                c.top_tenth_page_writes as f64 / c.page_writes.max(1) as f64
            })?,
            run_pages: of_runs(&|_, c| c.page_writes as f64 / c.runs.max(1) as f64)?,
            waf: of_points(false, &|p| p.device.waf)?,
            waf_discard: of_points(true, &|p| p.device.waf)?,
        })
    };
    Ok(facts())
}

/// Sentences computed from the run's data: how each engine's writes differ from flashdoc's
/// (best-fit) on one workload, and how much file space it released without discard.
fn differences(lab: &Lab, w: &str, points: &[Point], runs: &[EngineRun]) -> Result<Vec<String>> {
    let Some(ours) = facts(lab, w, "best", points, runs)? else {
        return Ok(Vec::new());
    };
    let mut lines = Vec::new();
    for (alloc, label) in ENGINES {
        let Some(f) = facts(lab, w, alloc, points, runs)? else {
            continue;
        };
        let size = format!(
            "{:.2} host pages per operation ({:.2}× flashdoc best-fit's)",
            f.host_pages_per_op,
            f.host_pages_per_op / ours.host_pages_per_op.max(1e-9)
        );
        lines.push(format!(
            "**{w}, {label}:** {size}, {:.0} % of them journal; {:.0} % of its bytes grew a file (new addresses); its page writes touched {:.1}× the device's pages, the most-written tenth of those pages took {:.0} % of them, and its writes came in sequential runs of {:.1} pages on average; it released {:.0} % of what it wrote by removing files and {:.0} % by truncating them; write amplification {:.2} without discard, {:.2} with it.",
            f.journal_share * 100.0,
            f.growth_share * 100.0,
            f.footprint,
            f.top_tenth_share * 100.0,
            f.run_pages,
            f.removed_share * 100.0,
            f.truncated_share * 100.0,
            f.waf,
            f.waf_discard
        ));
    }
    Ok(lines)
}

fn trim_text(t: &crate::experiment::TrimSpec) -> String {
    match (t.batch, t.discard) {
        (None, false) => "no TRIM, no discard (the seeds' condition)".into(),
        (None, true) => "no TRIM, filesystem discard on".into(),
        _ => format!("TRIM {}", t.label()),
    }
}

/// File-level facts of a trace's run phase.
#[derive(Debug, Default, PartialEq)]
struct FileCalls {
    removed: u64,
    truncated: u64,
    /// Bytes the removals and the truncations released (a file's size is the end of its
    /// furthest write since it was created or last cut).
    removed_bytes: u64,
    truncated_bytes: u64,
    /// Bytes written past a file's end: new file space, which the filesystem gives new
    /// addresses (the rest overwrite addresses the file already holds).
    growth_bytes: u64,
    /// 4 KB file pages written (a re-created file's pages are new ones), and the page writes
    /// that went to the most-written tenth of them.
    pages_touched: u64,
    page_writes: u64,
    top_tenth_page_writes: u64,
    /// Sequential runs: a write starts a new one unless it begins where the previous write
    /// to any file ended, in the same file.
    runs: u64,
    journal_writes: u64,
    journal_unaligned: u64,
}

fn file_calls(trace: &Path, end_of_load_event: u64) -> Result<FileCalls> {
    let mut c = FileCalls::default();
    let mut size: BTreeMap<u32, u64> = BTreeMap::new();
    // Page writes per (file, generation, page): a removed file's id may come back as a new file.
    let mut generation: BTreeMap<u32, u32> = BTreeMap::new();
    let mut writes: std::collections::HashMap<(u32, u32, u64), u32> = Default::default();
    let mut last_end = None;
    for (i, ev) in TraceReader::open(trace)?.enumerate() {
        let in_run = (i as u64) >= end_of_load_event;
        match ev? {
            Event::FileRemove { file, .. } => {
                *generation.entry(file).or_default() += 1;
                let freed = size.remove(&file).unwrap_or(0);
                if in_run {
                    c.removed += 1;
                    c.removed_bytes += freed;
                }
            }
            Event::FileTruncate { file, len, .. } => {
                let s = size.entry(file).or_default();
                let freed = s.saturating_sub(len);
                *s = len;
                if in_run {
                    c.truncated += 1;
                    c.truncated_bytes += freed;
                }
            }
            Event::Write(w) => {
                let s = size.entry(w.file).or_default();
                let end = w.offset + w.len as u64;
                if in_run {
                    c.growth_bytes += end.saturating_sub((*s).max(w.offset));
                    let g = generation.get(&w.file).copied().unwrap_or(0);
                    c.runs += (last_end != Some((w.file, g, w.offset))) as u64;
                    last_end = Some((w.file, g, end));
                    for page in w.offset / 4096..end.div_ceil(4096) {
                        *writes.entry((w.file, g, page)).or_default() += 1;
                    }
                }
                *s = (*s).max(end);
                if in_run && w.file_kind == FileKind::Journal {
                    c.journal_writes += 1;
                    c.journal_unaligned += (w.offset % 4096 != 0 || w.len % 4096 != 0) as u64;
                }
            }
            _ => {}
        }
    }
    let mut counts: Vec<u32> = writes.into_values().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    c.pages_touched = counts.len() as u64;
    c.page_writes = counts.iter().map(|&n| n as u64).sum();
    c.top_tenth_page_writes = counts[..counts.len().div_ceil(10)]
        .iter()
        .map(|&n| n as u64)
        .sum();
    Ok(c)
}

fn cache_share_text(e: &Experiment) -> String {
    e.cache_shares
        .iter()
        .map(|c| format!("{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::trace::TraceWriter;
    use placement::{PageKind, WriteCause, WriteEvent};

    fn write(offset: u64) -> Event {
        Event::Write(WriteEvent {
            time_ns: 0,
            file: 1,
            file_kind: FileKind::Collection,
            table: 0,
            page_kind: PageKind::Leaf,
            offset,
            len: 4096,
            id_index: false,
            stream: 0,
            page_id: 0,
            cause: WriteCause::Other,
        })
    }

    #[test]
    fn two_regions_splits_at_the_end_of_load_size_and_counts_swaps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let mut w = TraceWriter::create(&path).unwrap();
        let begin = Event::CheckpointBegin { time_ns: 0, id: 0 };
        // Load: the file reaches 8192 bytes. Event 2 starts the run phase.
        let mut events = vec![write(0), write(4096)];
        // Window 1: mostly above (3 of 4); window 2: mostly below (1 of 4); window 3: above.
        events.extend([
            begin.clone(),
            write(8192),
            write(12288),
            write(16384),
            write(0),
        ]);
        events.extend([begin.clone(), write(0), write(4096), write(0), write(8192)]);
        events.extend([begin.clone(), write(8192), begin]);
        for e in &events {
            w.write(e);
        }
        w.flush().unwrap();
        drop(w);
        let r = two_regions(&path, 2).unwrap();
        assert_eq!(r.windows, 3, "{r:?}");
        assert_eq!(r.above_share_median, 0.75);
        assert_eq!(r.swap_rate, 1.0);
        // Writes before the run phase are never counted.
        assert_eq!(two_regions(&path, events.len() as u64).unwrap().windows, 0);
    }

    #[test]
    fn file_calls_count_the_run_phase_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let mut w = TraceWriter::create(&path).unwrap();
        let journal = |offset, len| {
            let Event::Write(mut x) = write(offset) else {
                unreachable!()
            };
            x.file_kind = FileKind::Journal;
            x.len = len;
            Event::Write(x)
        };
        let Event::Write(mut other) = write(0) else {
            unreachable!()
        };
        other.file = 2;
        other.len = 8192;
        // The load: file 9 goes, file 1 (journal) and file 2 are written.
        let events = [
            Event::FileRemove {
                time_ns: 0,
                file: 9,
            },
            journal(0, 100),
            Event::Write(other),
            // The run phase.
            Event::FileRemove {
                time_ns: 0,
                file: 1,
            },
            Event::FileTruncate {
                time_ns: 0,
                file: 2,
                len: 4096,
            },
            journal(4096, 4096),
            journal(8192, 100),
            write(0),
        ];
        for e in &events {
            w.write(e);
        }
        w.flush().unwrap();
        drop(w);
        let c = file_calls(&path, 3).unwrap();
        assert_eq!(
            c,
            FileCalls {
                removed: 1,
                truncated: 1,
                removed_bytes: 100,
                truncated_bytes: 4096,
                // Past the re-created journal's end (a hole below an end is not counted).
                growth_bytes: 4096 + 100,
                // The new journal's pages 1 and 2 and page 0 of file 1 (a new file), then
                // file 2 is not written; the top tenth (one page of three) has one write.
                pages_touched: 3,
                page_writes: 3,
                top_tenth_page_writes: 1,
                // 4096..8192 then 8192..8292 continue; write(0) starts anew.
                runs: 2,
                journal_writes: 2,
                journal_unaligned: 1
            }
        );
    }

    #[test]
    fn wtdriver_runs_ycsb_and_the_experiment_runs_linkbench_too() {
        assert_eq!(read_pct("ycsb-update-heavy"), Some(50));
        assert_eq!(read_pct("ycsb-update-only"), Some(0));
        assert_eq!(read_pct("linkbench-mixed"), None);
        let mut e = crate::experiment::find("real-wiredtiger").unwrap();
        e.validate().unwrap();
        assert!(e.workloads.iter().any(|w| w.starts_with("linkbench-")));
        e.workloads.push("chapter10".into());
        assert!(e.validate().unwrap_err().to_string().contains("chapter10"));
    }
}
