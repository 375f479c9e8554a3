//! The `inplace-vs-cow` report: per workload, design, policy and fill, flash page writes per
//! operation, WAF and modeled throughput (median and the range over seeds), and the
//! conclusions each computed from those points.

use super::{COPY_ON_WRITE, COW_ALLOCATION, IN_PLACE, IN_PLACE_ALLOCATION};
use crate::experiment::SHIPPED_POLICY;
use crate::report::Report;
use crate::run::{EngineRun, Lab, Point};
use crate::summary::{flash_per_op, modeled, waf, Spread};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// The study's in-place B-tree WAF at its lowest and highest fill, and its out-of-place design
/// with placement ("How to Write to SSDs", PVLDB 19).
const STUDY: (f64, f64, f64) = (2.33, 4.72, 1.07);

/// A design's `allocation` in the points.
fn allocation_of(design: &str) -> &'static str {
    if design == IN_PLACE {
        IN_PLACE_ALLOCATION
    } else {
        COW_ALLOCATION
    }
}

/// One (workload, design, policy, fill) over the seeds.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    pub(super) workload: &'a str,
    pub(super) design: &'a str,
    pub(super) policy: &'a str,
    pub(super) fill: f64,
}

/// A metric of the points at `at`, over the seeds.
pub(super) fn spread(points: &[Point], at: At, metric: impl Fn(&Point) -> f64) -> Option<Spread> {
    Spread::of(
        points
            .iter()
            .filter(|p| {
                p.workload == at.workload
                    && p.allocation == allocation_of(at.design)
                    && p.policy == at.policy
                    && p.device_fill == at.fill
            })
            .map(metric)
            .collect(),
    )
}

/// Writes `report.md` and `report.html` into `out`.
pub(super) fn write(
    out: &Path,
    lab: &Lab,
    points: &[Point],
    runs: &[EngineRun],
) -> Result<PathBuf> {
    let e = &lab.exp;
    let mut r = Report::new(format!("flashdoc lab: {}", e.title));
    r.p(e.description.clone());
    r.p(format!(
        "Scale `{}` ({} YCSB records and {} operations; LinkBench {} nodes and {} requests), seeds {:?} (parameters frozen before the run), one client thread. Reproduce: `flashdoc lab run {} --scale {} --out DIR`.",
        e.scale, lab.scale.ycsb_records, lab.scale.ycsb_ops, lab.scale.linkbench_maxid1,
        lab.scale.linkbench_requests, e.seeds, e.name, e.scale
    ));
    r.p("Held equal: the operations (same workload and seed), the cache (the in-place engine's page pool gets the copy-on-write run's cache bytes), and the checkpoint interval in operations (the in-place engine writes its dirty pages back after as many of the workload's operations as the reference run's checkpoint interval holds, counted as store calls and converted with a counting pass on the in-memory engine). Each design's device is sized so that its own files, at their peak over the trace, fill it to the given share (`flashdoc placement replay --size-to-trace --device-fill`'s definition). Not equal, by design: the in-place engine also writes every dirty page back once they pass half its cache, its journal is group-committed every 100 ms of wall time, and its clean pages leave its pool in hash order, so its journal writes and reads are not a function of the seed alone.");
    runs_section(&mut r, e.workloads.as_slice(), runs)?;
    conclusions(&mut r, lab, points);
    for (title, metric, digits) in [
        (
            "Flash page writes per operation",
            flash_per_op as fn(&Point) -> f64,
            2,
        ),
        ("Write amplification (WAF)", waf as fn(&Point) -> f64, 2),
        (
            "Modeled throughput, operations/s (reads included)",
            modeled as fn(&Point) -> f64,
            0,
        ),
    ] {
        metric_table(&mut r, lab, points, title, metric, digits);
    }
    r.save(out)
}

/// Each engine run: its files' peak against the loaded data, host pages per operation, and
/// the checkpoints (write-backs) of its run phase.
fn runs_section(r: &mut Report, workloads: &[String], runs: &[EngineRun]) -> Result<()> {
    r.h2("The engine runs");
    r.p("Per run (medians over seeds): the peak of the pages the engine's files occupy on the device over the trace, in MB and against the copy-on-write reference's live data after the load; host pages (4 KB) written per run-phase operation, and the journal's share of them; checkpoints (in-place: write-backs) begun in the run phase.");
    let mut rows = Vec::new();
    for w in workloads {
        for design in super::DESIGNS {
            let mine: Vec<&EngineRun> = runs
                .iter()
                .filter(|x| &x.workload == w && x.allocation == allocation_of(design))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let mut peak = Vec::new();
            for x in &mine {
                peak.push(super::peak_file_pages(x)? as f64 * ssd::PAGE_BYTES as f64);
            }
            let med = |v: Vec<f64>| Spread::of(v).map_or(f64::NAN, |s| s.median);
            let live = med(mine.iter().map(|x| x.sizing.db_load_bytes as f64).collect());
            let host = med(mine.iter().map(|x| host_pages_per_op(x)).collect());
            let journal = med(mine.iter().map(|x| journal_share(x)).collect());
            let ckpts = med(mine.iter().map(|x| x.run_checkpoints as f64).collect());
            let peak = med(peak);
            rows.push(vec![
                w.clone(),
                design.to_string(),
                format!("{:.1}", peak / 1e6),
                format!("{:.2}", peak / live),
                format!("{host:.2}"),
                format!("{:.0} %", journal * 100.0),
                format!("{ckpts:.0}"),
            ]);
        }
    }
    r.table(
        &[
            "workload",
            "design",
            "files' peak, MB",
            "÷ live data",
            "host pages/op",
            "journal",
            "checkpoints",
        ],
        rows,
    );
    Ok(())
}

/// Host pages written per run-phase operation.
pub(super) fn host_pages_per_op(x: &EngineRun) -> f64 {
    x.run_write_bytes as f64 / ssd::PAGE_BYTES as f64 / x.run.operations.max(1) as f64
}

fn journal_share(x: &EngineRun) -> f64 {
    let j = x.write_bytes_by_file.get("journal").copied().unwrap_or(0);
    j as f64 / x.run_write_bytes.max(1) as f64
}

/// One metric's table: a row per workload, design and policy, a column per fill.
fn metric_table(
    r: &mut Report,
    lab: &Lab,
    points: &[Point],
    title: &str,
    metric: fn(&Point) -> f64,
    digits: usize,
) {
    let e = &lab.exp;
    r.h2(title);
    r.p("Median over seeds, [min–max] beside it.");
    let fills: Vec<String> = e
        .device_fills
        .iter()
        .map(|f| format!("fill {:.0} %", f * 100.0))
        .collect();
    let mut head = vec!["workload", "design", "policy"];
    head.extend(fills.iter().map(String::as_str));
    let mut rows = Vec::new();
    for w in &e.workloads {
        for design in &e.designs {
            for policy in &e.policies {
                let mut row = vec![w.clone(), design.clone(), policy.clone()];
                for &fill in &e.device_fills {
                    let at = At {
                        workload: w,
                        design,
                        policy,
                        fill,
                    };
                    row.push(spread(points, at, metric).map_or("—".into(), |s| s.fmt(digits)));
                }
                rows.push(row);
            }
        }
    }
    r.table(&head, rows);
}

/// Two spreads differ when their seed ranges do not overlap.
pub(super) fn apart(a: &Spread, b: &Spread) -> bool {
    a.max < b.min || b.max < a.min
}

/// Where each design wins, and why, from the points.
fn conclusions(r: &mut Report, lab: &Lab, points: &[Point]) {
    let e = &lab.exp;
    r.h2("Where each design wins, and why");
    r.p(format!("Each design with flash mode's policy (`{SHIPPED_POLICY}`) and with none; a difference is claimed only where the two designs' ranges over the seeds do not overlap. Flash page writes per operation are host pages per operation × WAF: the line says which factor decides."));
    for w in &e.workloads {
        for policy in ["none", SHIPPED_POLICY] {
            let mut parts = Vec::new();
            for &fill in &e.device_fills {
                if let Some(s) = verdict(points, w, policy, fill) {
                    parts.push(s);
                }
            }
            if !parts.is_empty() {
                r.p(format!("**{w}**, `{policy}`: {}.", parts.join("; ")));
            }
        }
    }
    r.h3("WAF as the device fills");
    for w in &e.workloads {
        let mut parts = Vec::new();
        for design in &e.designs {
            for policy in ["none", SHIPPED_POLICY] {
                let at = |fill| At {
                    workload: w,
                    design,
                    policy,
                    fill,
                };
                let first = e
                    .device_fills
                    .first()
                    .and_then(|&f| spread(points, at(f), waf));
                let last = e
                    .device_fills
                    .last()
                    .and_then(|&f| spread(points, at(f), waf));
                if let (Some(a), Some(b)) = (first, last) {
                    parts.push(format!(
                        "{design} `{policy}` {:.2} → {:.2}",
                        a.median, b.median
                    ));
                }
            }
        }
        r.p(format!(
            "**{w}**, WAF from {:.0} % to {:.0} % fill: {} (the study: in place {} → {}, out of place with placement {}).",
            e.device_fills.first().copied().unwrap_or(0.0) * 100.0,
            e.device_fills.last().copied().unwrap_or(0.0) * 100.0,
            parts.join(", "),
            STUDY.0,
            STUDY.1,
            STUDY.2
        ));
    }
}

/// The two designs at one workload, policy and fill: who writes fewer flash pages per
/// operation, by how much, whether beyond the seed spread, and which factor decides.
pub(super) fn verdict(points: &[Point], w: &str, policy: &str, fill: f64) -> Option<String> {
    let at = |design| At {
        workload: w,
        design,
        policy,
        fill,
    };
    let (cow, inp) = (at(COPY_ON_WRITE), at(IN_PLACE));
    let (fc, fi) = (
        spread(points, cow, flash_per_op)?,
        spread(points, inp, flash_per_op)?,
    );
    let (wc, wi) = (spread(points, cow, waf)?, spread(points, inp, waf)?);
    let (tc, ti) = (spread(points, cow, modeled)?, spread(points, inp, modeled)?);
    let host = |f: &Spread, w: &Spread| f.median / w.median;
    let (hc, hi) = (host(&fc, &wc), host(&fi, &wi));
    let fill = fill * 100.0;
    if !apart(&fc, &fi) {
        return Some(format!(
            "{fill:.0} %: no difference beyond the seeds ({:.2} vs {:.2} flash pages/op)",
            fc.median, fi.median
        ));
    }
    let (winner, ratio) = if fc.median < fi.median {
        (COPY_ON_WRITE, fi.median / fc.median)
    } else {
        (IN_PLACE, fc.median / fi.median)
    };
    // Which factor of flash/op = host/op × WAF moves the ratio more.
    let by_host = (hc / hi).ln().abs();
    let by_waf = (wc.median / wi.median).ln().abs();
    let why = if by_host >= by_waf {
        format!(
            "the engine's writes decide (host pages/op {hc:.2} vs {hi:.2}; WAF {:.2} vs {:.2})",
            wc.median, wi.median
        )
    } else {
        format!("the device's amplification decides (WAF {:.2} vs {:.2}; host pages/op {hc:.2} vs {hi:.2})", wc.median, wi.median)
    };
    let thr = if apart(&tc, &ti) {
        let faster = if tc.median > ti.median {
            COPY_ON_WRITE
        } else {
            IN_PLACE
        };
        format!(
            ", {faster} faster ({:.0} vs {:.0} ops/s)",
            tc.median, ti.median
        )
    } else {
        ", throughput within the seeds".to_string()
    };
    Some(format!(
        "{fill:.0} %: {winner} {ratio:.2}× fewer flash pages/op ({:.2} vs {:.2}), {why}{thr}",
        fc.median, fi.median
    ))
}
