//! The leaf-size and TRIM experiments' sections; their readings are computed from the run.

use super::{pct, Report};
use crate::plot::{self, Bars};
use crate::run::Point;
use crate::summary::{flash_per_op, modeled, waf, Cell, Spread, Table};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// 32 KB vs 4 KB leaves: flash writes per operation, throughput and database size per policy
/// and engine, and the 4 KB gain against the seeds' figures.
pub fn leaf(r: &mut Report, out: &Path, points: &[Point]) -> Result<()> {
    r.h2("32 KB vs 4 KB leaf pages");
    let t = Table::new(points);
    let mut workloads: Vec<String> = Vec::new();
    let mut policies: Vec<(String, String)> = Vec::new();
    for c in t.cells.keys() {
        if !workloads.contains(&c.workload) {
            workloads.push(c.workload.clone());
        }
        let pa = (c.allocation.clone(), c.policy.clone());
        if !policies.contains(&pa) {
            policies.push(pa);
        }
    }
    let mut reading = String::new();
    for w in &workloads {
        let Some(LeafRows {
            rows,
            cats,
            s32,
            s4,
        }) = leaf_rows(&t, w, &policies)
        else {
            continue;
        };
        r.h3(w.clone());
        r.table(
            &[
                "policy (engine)",
                "leaf",
                "flash page writes / op",
                "WAF",
                "modeled throughput vs none 32 KB",
                "database MB",
            ],
            rows,
        );
        let best4 = cats
            .iter()
            .zip(&s4)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(c, v)| (c.clone(), *v));
        if let Some((c, v)) = best4 {
            write!(
                reading,
                "On {w}, the best policy with 4 KB leaves is {c} at {v:.2}× none with 32 KB. "
            )
            .unwrap();
        }
        let name = format!("leaf-{w}");
        plot::bars(
            &out.join(&name),
            &Bars {
                title: &format!("{w}: modeled throughput relative to none with 32 KB leaves"),
                x_label: "policy (engine)",
                y_label: "throughput / none-32KB (×)",
                categories: &cats,
                series: &[
                    ("32 KB leaves".to_string(), s32),
                    ("4 KB leaves".to_string(), s4),
                ],
                reference: Some(1.0),
                stacked: false,
            },
        )?;
        r.img(&format!("{name}.png"), "leaf size");
    }
    r.p(reading);
    r.p("Paper: boundary with 4 KB leaves up to 3.37× (Y-Update-Only) and 2.14× (LB-Update-Only) the throughput of original WiredTiger with 32 KB (seed 003 §4.3, Fig. 5); DSM-4KB 1.6×–2.1× (seed 000 §5.5). A 4 KB leaf turns an update of a 1 KB document into one 4 KB page write instead of a 28 KB one; the price is a larger tree (the database MB column).");
    Ok(())
}

/// One workload's rows of the leaf-size table, and each policy's throughput against none
/// with 32 KB leaves at 32 KB and at 4 KB (for the plot).
struct LeafRows {
    rows: Vec<Vec<String>>,
    cats: Vec<String>,
    s32: Vec<f64>,
    s4: Vec<f64>,
}

/// [`LeafRows`] of workload `w`, or `None` if it has no best-fit `none` run with 32 KB leaves.
fn leaf_rows(t: &Table, w: &str, policies: &[(String, String)]) -> Option<LeafRows> {
    let find = |alloc: &str, pol: &str, leaf: u32| {
        t.cells
            .keys()
            .find(|c| {
                c.workload == w && c.allocation == alloc && c.policy == pol && c.leaf_kb == leaf
            })
            .cloned()
    };
    let base = find("best", "none", 32)?;
    let mut rows = Vec::new();
    let (mut s32, mut s4, mut cats) = (Vec::new(), Vec::new(), Vec::new());
    for (alloc, pol) in policies {
        let label = format!("{pol} ({})", super::streams::allocation_name(alloc));
        let mut pair = [None, None];
        for (i, leaf) in [32u32, 4].into_iter().enumerate() {
            let Some(c) = find(alloc, pol, leaf) else {
                continue;
            };
            let (Some(fl), Some(wa), Some(ratio), Some(db)) = (
                t.spread(&c, flash_per_op),
                t.spread(&c, waf),
                t.paired_ratio(&c, &base, modeled),
                t.spread(&c, |p| p.db_mb),
            ) else {
                continue;
            };
            rows.push(vec![
                label.clone(),
                format!("{leaf} KB"),
                fl.fmt(2),
                wa.fmt(3),
                format!("{:.2}×", ratio.median),
                db.fmt(1),
            ]);
            pair[i] = Some(ratio.median);
        }
        if let [Some(a), Some(b)] = pair {
            cats.push(label);
            s32.push(a);
            s4.push(b);
        }
    }
    Some(LeafRows {
        rows,
        cats,
        s32,
        s4,
    })
}

/// Throughput by TRIM batch, for each TRIM command cost, with the best batch found and the
/// share of device time TRIMs took.
pub fn trim(r: &mut Report, out: &Path, points: &[Point]) -> Result<()> {
    r.h2("Throughput by TRIM batch");
    let t = Table::new(points);
    let mut costs: Vec<String> = t.cells.keys().map(|c| c.ssd.clone()).collect();
    costs.dedup();
    let mut series = Vec::new();
    let mut cats: Vec<String> = Vec::new();
    let mut reading = String::new();
    for ssd in &costs {
        let Some(TrimRows { rows, vals, best }) = trim_rows(&t, points, ssd, &mut cats) else {
            continue;
        };
        r.h3(format!("TRIM command cost: {ssd}"));
        r.table(
            &[
                "TRIM batch (seed-equivalent extents)",
                "extents per batch on this device",
                "WAF",
                "modeled throughput vs no TRIM",
                "trimmed MB",
                "device time in TRIM commands",
            ],
            rows,
        );
        if let Some((b, v)) = best {
            let interior = optimum_inside(&vals);
            write!(
                reading,
                "With {ssd}: the best batch is {b} ({}), {}. ",
                pct(v),
                if interior {
                    "an optimum inside the range, as the paper found"
                } else {
                    "at an end of the range: no interior optimum"
                }
            )
            .unwrap();
        }
        series.push((ssd.clone(), vals));
    }
    plot::bars(
        &out.join("trim"),
        &Bars {
            title: "Modeled throughput by TRIM batch, relative to no TRIM",
            x_label: "TRIM batch (extents per batch, seed-equivalent; -replace: trim at address replacement)",
            y_label: "throughput / no TRIM (×)",
            categories: &cats,
            series: &series,
            reference: Some(1.0),
            stacked: false,
        },
    )?;
    r.img("trim.png", "TRIM batches");
    r.table(
        &["paper (seed 002 Table 3)", "OPS/s", "improved"],
        vec![
            vec!["Original".into(), "3950".into(), "0".into()],
            vec!["TRIM-10000".into(), "4159".into(), "+5.29%".into()],
            vec!["TRIM-15000".into(), "4489".into(), "+13.6%".into()],
            vec!["TRIM-20000".into(), "4531".into(), "+14.7%".into()],
            vec!["TRIM-30000".into(), "4173".into(), "+5.64%".into()],
            vec!["TRIM-40000".into(), "3714".into(), "−5.9%".into()],
        ],
    );
    r.p(reading);
    r.p("Each TRIM is charged as a non-queued SATA command: it waits for the queue to drain, then holds the device for its command time plus 40 ns per page (docs/ssd.md). Batches are scaled to the device (k × capacity / 256 GB), so a batch frees the same share of the device as the paper's; a batch's extents are issued back to back, so only its first waits for a drain. `-replace` trims at address replacement as the paper did: it frees more (it does not wait for the next checkpoint) but would destroy blocks the last durable checkpoint still needs, so flashdoc allows it only in the simulator.");
    Ok(())
}

/// One TRIM command cost's rows of the table, each condition's throughput against no TRIM
/// (for the plot), and the best batch.
struct TrimRows {
    rows: Vec<Vec<String>>,
    vals: Vec<f64>,
    best: Option<(String, f64)>,
}

/// [`TrimRows`] of the device `ssd` (adding its conditions to `cats`), or `None` if it has no
/// run without TRIM.
fn trim_rows(t: &Table, points: &[Point], ssd: &str, cats: &mut Vec<String>) -> Option<TrimRows> {
    let cells: Vec<&Cell> = t.cells.keys().filter(|c| c.ssd == ssd).collect();
    let base = cells
        .iter()
        .find(|c| c.trim == "off")
        .map(|c| (*c).clone())?;
    let mut rows = Vec::new();
    let mut vals = Vec::new();
    let mut best: Option<(String, f64)> = None;
    for c in &cells {
        let (Some(wa), Some(ratio), Some(trimmed), Some(share)) = (
            t.spread(c, waf),
            t.paired_ratio(c, &base, modeled),
            t.spread(c, |p| p.device.trimmed_bytes as f64 / (1 << 20) as f64),
            t.spread(c, |p| p.device.trim_device_s / p.device.device_s.max(1e-12)),
        ) else {
            continue;
        };
        let batch = points
            .iter()
            .find(|p| Cell::of(p) == **c)
            .and_then(|p| p.device.trim_batch_extents);
        rows.push(vec![
            c.trim.clone(),
            batch.map(|b| b.to_string()).unwrap_or_else(|| "–".into()),
            wa.fmt(3),
            pct(ratio.median),
            format!("{:.1}", trimmed.median),
            format!("{:.1}%", share.median * 100.0),
        ]);
        if !cats.contains(&c.trim) {
            cats.push(c.trim.clone());
        }
        vals.push(ratio.median);
        if c.trim != "off" && best.as_ref().is_none_or(|b| ratio.median > b.1) {
            best = Some((c.trim.clone(), ratio.median));
        }
    }
    Some(TrimRows { rows, vals, best })
}

/// Whether the best of the TRIM batches (`vals` after the first, no TRIM) lies inside their
/// range: above both ends by more than half a percent.
fn optimum_inside(vals: &[f64]) -> bool {
    let free_ones: Vec<f64> = vals.iter().skip(1).copied().collect();
    Spread::of(free_ones.clone()).is_some_and(|s| {
        let first = free_ones.first().copied().unwrap_or(0.0);
        let last = free_ones.last().copied().unwrap_or(0.0);
        s.max > first.max(last) + 0.005
    })
}
