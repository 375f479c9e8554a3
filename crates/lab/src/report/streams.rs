//! The stream experiments' report: the headline (flash page writes per operation and modeled
//! throughput per policy and engine), the gap the online policies close to the oracles, the
//! secondary device figures, and the seeds' published claims beside ours. Every sentence
//! that concludes something is computed from the points of this run.

use super::condition::{base_cell, conditions, Condition};
use super::credit;
use super::settings::{comparable_cells, Compared};
use super::Report;
use crate::experiment::Experiment;
use crate::plot::{self, Bars};
use crate::run::{EngineRun, Point};
use crate::summary::{
    flash_per_op, gap_closure, modeled, waf, Cell, Engine, GapClosure, Spread, Table, FLASH_MODE,
    WIREDTIGER,
};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// One row of the plots and of the comparison with a reference run: a policy on an engine.
struct Row {
    label: &'static str,
    engine: Engine,
    policy: &'static str,
}

const fn row(label: &'static str, engine: Engine, policy: &'static str) -> Row {
    Row {
        label,
        engine,
        policy,
    }
}

/// The plots' rows: the seeds' policies and ours on the engine the seeds measured, ours on
/// flash mode's engine settings, and the oracles on both engines.
const HEADLINE: &[Row] = &[
    row("none", WIREDTIGER, "none"),
    row("file", WIREDTIGER, "file"),
    row("boundary", WIREDTIGER, "boundary"),
    row("dsm", WIREDTIGER, "dsm"),
    row("dsm-skip-primary", WIREDTIGER, "dsm-skip-primary"),
    row("lifetime", WIREDTIGER, "lifetime"),
    row("filelog", WIREDTIGER, "filelog"),
    row(
        "**flash mode** (filelog, sweep, 50/80 dirty)",
        FLASH_MODE,
        "filelog",
    ),
    row("oracle", WIREDTIGER, "oracle"),
    row("oracle-death", WIREDTIGER, "oracle-death"),
    row("oracle, flash mode's engine", FLASH_MODE, "oracle"),
    row(
        "oracle-death, flash mode's engine",
        FLASH_MODE,
        "oracle-death",
    ),
];

pub fn section(
    r: &mut Report,
    out: &Path,
    exp: &Experiment,
    points: &[Point],
    runs: &[EngineRun],
) -> Result<()> {
    let t = Table::new(points);
    let seeds = exp.seeds.len();
    // In the experiment's order of TRIM conditions: the first (the seeds' conditions in the
    // stream experiments) leads the report.
    let trims: Vec<String> = exp.trims.iter().map(|t| t.label()).collect();
    let mut conds: Vec<_> = conditions(&t).into_iter().collect();
    conds.sort_by_key(|(k, _)| trims.iter().position(|x| *x == k.3));
    let claims_at = claims_condition(&conds);
    for (k, mut workloads) in conds {
        workloads.sort_by_key(|w| exp.workloads.iter().position(|x| x == w));
        let tag = format!("c{}-l{}-{}-t{}-{}", k.0, k.1, k.2, k.3, k.4).replace('.', "_");
        r.h2(format!(
            "Flash page writes per operation and modeled throughput (TRIM {}, cache {:.0}% of the data, leaf {} KB, {})",
            k.3,
            k.0 as f64 / 10.0,
            k.1,
            k.4
        ));
        r.p(format!(
            "Each cell: median over {seeds} workload seed(s), [min–max] when there are several. **Flash page writes per operation** = host pages written × the device's write amplification ÷ run-phase operations: what one operation costs the flash, engine and placement together. **Modeled throughput** = the measured pass's operations ÷ the simulated device's time to absorb them. The first tables hold every engine setting equal and vary the placement only; *flash mode* is {}; *WiredTiger's defaults* are `none` on best fit with a 5/20 % dirty budget and 80/95 % eviction, TRIM off. Rows that change more than one setting come after them, labelled, with the decomposition.",
            codesign_words()
        ));
        credit::headline(r, exp, &t, &k, &workloads)?;
        let rows = headline_rows(&t, &k, &workloads);
        gap_section(r, exp, &t, &k, &workloads)?;
        if !k.3.starts_with("off") {
            trim_cost(r, exp, &t, &k, &workloads)?;
        }
        plots(r, out, &tag, &rows, &workloads)?;
        secondary(r, &t, &k, &workloads);
    }
    if let Some(k) = claims_at {
        claims(r, exp, &t, &k, runs)?;
    }
    Ok(())
}

/// The condition the seeds' claims are set beside: their stream runs had no TRIM and no
/// discard, so that condition when the run has it, else the experiment's first.
fn claims_condition(conds: &[(Condition, Vec<String>)]) -> Option<Condition> {
    conds
        .iter()
        .find(|(k, _)| k.3 == "off")
        .or(conds.first())
        .map(|(k, _)| k.clone())
}

/// A headline cell.
struct Value {
    flash: Spread,
    ops_vs_none: Spread,
}

fn headline_rows(
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Vec<(&'static str, Vec<Option<Value>>)> {
    HEADLINE
        .iter()
        .filter_map(|row| {
            let vals: Vec<Option<Value>> = workloads
                .iter()
                .map(|w| {
                    let base = base_cell(k, w);
                    let c = base.with(row.engine, row.policy);
                    Some(Value {
                        flash: t.spread(&c, flash_per_op)?,
                        ops_vs_none: t.paired_ratio(&c, &base, modeled)?,
                    })
                })
                .collect();
            vals.iter()
                .any(|v| v.is_some())
                .then_some((row.label, vals))
        })
        .collect()
}

/// Whether a dsm→oracle gap is too small for a closure to mean anything: no larger than 1 %
/// of dsm's figure, nor than the half-range of dsm's figure between seeds. A ratio of two
/// differences of that size is noise (with safe TRIM at the seeds' fill the gap is 0–1 %).
fn no_gap(
    t: &Table,
    base: &Cell,
    engine: Engine,
    g: &GapClosure,
    metric: fn(&Point) -> f64,
) -> bool {
    let spread = t
        .spread(&base.with(engine, "dsm"), metric)
        .map_or(0.0, |s| s.rel_half_range());
    (g.dsm - g.oracle) <= g.dsm.abs() * spread.max(0.01)
}

/// A gap closure's cell when there is none to compute: "no gap to close" when dsm and the
/// oracle (on `oracles_at`) are equal on every seed, "–" when a figure is missing.
fn equal_figures(
    t: &Table,
    base: &Cell,
    dsm_at: Engine,
    oracles_at: Engine,
    metric: fn(&Point) -> f64,
    label: &str,
) -> String {
    let dsm = t.spread(&base.with(dsm_at, "dsm"), metric);
    let oracle = t.spread(&base.with(oracles_at, "oracle"), metric);
    match (dsm, oracle) {
        // WAF with three decimals, flash writes per operation with two, as in the table.
        (Some(d), Some(o)) => {
            let digits = if label.is_empty() { 2 } else { 3 };
            format!(
                "{label}dsm {:.digits$} = oracle {:.digits$}: no gap to close",
                d.median, o.median
            )
        }
        _ => "–".into(),
    }
}

/// " (flash mode writes N% less than the oracle)" when the co-design writes less than the oracle
/// on WiredTiger's engine: it changed what is written, which no placement of the same writes
/// can.
fn below_oracle(ours: f64, oracle: f64) -> String {
    if ours < oracle * 0.99 {
        format!(
            " (flash mode writes {:.0}% less than the oracle)",
            (1.0 - ours / oracle) * 100.0
        )
    } else {
        String::new()
    }
}

/// The gap to the oracle `filelog` closes: on each engine's own trace (WAF), and the
/// co-design against dsm and the oracle on WiredTiger's engine (flash writes per operation).
fn gap_section(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Result<()> {
    r.h3("The gap to the oracle that flash mode closes");
    let mut rows = Vec::new();
    let mut codesign = Vec::new();
    let mut same_trace = Vec::new();
    for w in workloads {
        let base = base_cell(k, w);
        let mut row = vec![w.clone()];
        for engine in [WIREDTIGER, FLASH_MODE] {
            for rival in ["dsm", "oracle", "oracle-death"] {
                let ours = base.with(engine, "filelog");
                comparable_cells(
                    exp,
                    &ours,
                    &base.with(engine, rival),
                    Compared::One("placement"),
                )?;
            }
            let (cell, closed) = same_trace_cell(t, &base, engine);
            row.push(cell);
            if let Some(c) = closed {
                same_trace.push((w.clone(), engine, c));
            }
        }
        comparable_cells(
            exp,
            &base.with(FLASH_MODE, "filelog"),
            &base.with(WIREDTIGER, "dsm"),
            Compared::MultiSetting,
        )?;
        let (cell, closed) = codesign_cell(t, &base);
        row.push(cell);
        if let Some(c) = closed {
            codesign.push((w.clone(), c));
        }
        rows.push(row);
    }
    if rows.iter().all(|r| r[1..].iter().all(|c| c == "–")) {
        return Ok(());
    }
    let gapless = rows
        .iter()
        .flat_map(|r| r[1..].iter())
        .filter(|c| c.ends_with("no gap to close"))
        .count();
    r.table(
        &[
            "workload",
            "same trace, WiredTiger's engine settings: filelog",
            "same trace, flash mode's engine settings: filelog",
            "multi-setting (allocation, dirty budget, placement), flash writes per op: flash mode vs dsm and the oracle on WiredTiger's engine settings",
        ],
        rows,
    );
    r.p("Gap closed = (dsm − ours) / (dsm − oracle), seed by seed, against the stronger oracle (the lower of `oracle` and `oracle-death`); median [min–max]. *No gap to close*: the oracle is within 1 % of dsm, or within dsm's spread between seeds, so a closure would be a ratio of noise.");
    r.p(gap_reading(&codesign, &same_trace, gapless));
    Ok(())
}

/// A gap closure's median [min–max], in percent.
fn closed_text(g: &GapClosure) -> String {
    format!(
        "{:.0}% [{:.0}–{:.0}]",
        g.closed.median * 100.0,
        g.closed.min * 100.0,
        g.closed.max * 100.0
    )
}

/// The WAF gap `filelog` closes on `engine`'s own trace: the cell, and the median closed if
/// there was a gap.
fn same_trace_cell(t: &Table, base: &Cell, engine: Engine) -> (String, Option<f64>) {
    match gap_closure(t, base, (engine, "filelog"), (engine, "dsm"), engine, waf) {
        Some(g) if no_gap(t, base, engine, &g, waf) => (
            format!(
                "WAF dsm {:.3} → {} {:.3}; filelog {:.3}: no gap to close",
                g.dsm, g.oracle_name, g.oracle, g.ours
            ),
            None,
        ),
        Some(g) => (
            format!(
                "WAF dsm {:.3} → {} {:.3}; filelog {:.3}: **{}**",
                g.dsm,
                g.oracle_name,
                g.oracle,
                g.ours,
                closed_text(&g)
            ),
            Some(g.closed.median),
        ),
        None => (equal_figures(t, base, engine, engine, waf, "WAF "), None),
    }
}

/// The flash-writes gap between dsm and the oracle on WiredTiger's engine that the co-design
/// closes: the cell, and the median closed if there was a gap.
fn codesign_cell(t: &Table, base: &Cell) -> (String, Option<f64>) {
    match gap_closure(
        t,
        base,
        (FLASH_MODE, "filelog"),
        (WIREDTIGER, "dsm"),
        WIREDTIGER,
        flash_per_op,
    ) {
        Some(g) if no_gap(t, base, WIREDTIGER, &g, flash_per_op) => (
            format!(
                "dsm {:.2} → {} {:.2}; flash mode {:.2}: no gap to close{}",
                g.dsm,
                g.oracle_name,
                g.oracle,
                g.ours,
                below_oracle(g.ours, g.oracle)
            ),
            None,
        ),
        Some(g) => (
            format!(
                "dsm {:.2} → {} {:.2}; flash mode {:.2}: **{}**",
                g.dsm,
                g.oracle_name,
                g.oracle,
                g.ours,
                closed_text(&g)
            ),
            Some(g.closed.median),
        ),
        None => {
            let mut cell = equal_figures(t, base, WIREDTIGER, WIREDTIGER, flash_per_op, "");
            let ours = t.spread(&base.with(FLASH_MODE, "filelog"), flash_per_op);
            let oracle = t.spread(&base.with(WIREDTIGER, "oracle"), flash_per_op);
            if let (Some(f), Some(o), false) = (ours, oracle, cell == "–") {
                write!(
                    cell,
                    "; flash mode {:.2}{}",
                    f.median,
                    below_oracle(f.median, o.median)
                )
                .expect("a String takes any write");
            }
            (cell, None)
        }
    }
}

/// What the gap table says: how often the co-design and `filelog` alone close half the gap,
/// and how many cells had none.
fn gap_reading(
    codesign: &[(String, f64)],
    same_trace: &[(String, Engine, f64)],
    gapless: usize,
) -> String {
    let mut s = String::new();
    let meets = |v: &[(String, f64)]| v.iter().filter(|x| x.1 >= 0.5).count();
    if !codesign.is_empty() {
        let worst = codesign
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("non-empty");
        write!(s, "Across settings (a multi-setting comparison: the decomposition above splits it), in flash page writes per operation, flash mode ({}) closes at least half of the gap between dsm and the oracle on WiredTiger's engine settings on {} of {} workloads (least: {:.0}% on {}). ", codesign_words(), meets(codesign), codesign.len(), worst.1 * 100.0, worst.0).unwrap();
    }
    for engine in [WIREDTIGER, FLASH_MODE] {
        let v: Vec<(String, f64)> = same_trace
            .iter()
            .filter(|x| x.1 == engine)
            .map(|x| (x.0.clone(), x.2))
            .collect();
        if v.is_empty() {
            continue;
        }
        let med = Spread::of(v.iter().map(|x| x.1).collect()).expect("non-empty");
        write!(s, "On the {} engine's own trace, filelog alone closes a median {:.0}% of the WAF gap (half or more on {} of {} workloads). ", if engine == WIREDTIGER { "WiredTiger" } else { "flash mode" }, med.median * 100.0, meets(&v), v.len()).unwrap();
    }
    if gapless > 0 {
        write!(s, "{gapless} of the table's cells have no gap to close: there the oracle is no better than dsm by more than 1 % or the seed spread, so no policy can be credited with closing anything.").unwrap();
    }
    s
}

/// What the TRIM commands cost each engine: commands per 1 000 operations and their share of
/// the device's time, with `filelog` on both (the policy does not change what is trimmed).
fn trim_cost(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Result<()> {
    // Run-phase operations: modeled throughput is operations ÷ device time.
    let per_kop = |p: &Point| {
        p.device.trim_commands as f64 * 1e3 / (p.device.modeled_ops_s * p.device.device_s).max(1.0)
    };
    let share = |p: &Point| p.device.trim_device_s / p.device.device_s.max(1e-12);
    let mut rows = Vec::new();
    let mut sweep_sends_fewer = Vec::new();
    for w in workloads {
        let base = base_cell(k, w);
        let (best, sweep) = (
            base.with(WIREDTIGER, "filelog"),
            base.with(FLASH_MODE, "filelog"),
        );
        let dsm = base.with(FLASH_MODE, "dsm");
        comparable_cells(exp, &sweep, &dsm, Compared::One("placement"))?;
        if let (Some(b), Some(s)) = (t.spread(&best, per_kop), t.spread(&sweep, per_kop)) {
            sweep_sends_fewer.push(s.median < b.median);
        }
        let cell =
            |c: &Cell, m: &dyn Fn(&Point) -> f64| t.spread(c, m).map_or("–".into(), |s| s.fmt(1));
        let pct = |c: &Cell| {
            t.spread(c, share)
                .map_or("–".into(), |s| format!("{:.0}%", s.median * 100.0))
        };
        let speed = t
            .paired_ratio(&sweep, &dsm, modeled)
            .map_or("–".into(), |s| format!("{:.2}×", s.median));
        rows.push(vec![
            w.clone(),
            cell(&best, &per_kop),
            cell(&sweep, &per_kop),
            pct(&best),
            pct(&sweep),
            speed,
        ]);
    }
    r.h3("What the TRIM commands cost");
    r.table(
        &[
            "workload",
            "TRIM commands per 1 000 ops, WiredTiger's engine settings",
            "same, flash mode's",
            "TRIM share of device time, WiredTiger's engine settings",
            "same, flash mode's",
            "flash mode's modeled throughput ÷ dsm's at flash mode's engine settings",
        ],
        rows,
    );
    r.p(format!(
        "Both engines with `filelog`; median [min–max] over seeds. The sweep engine sends fewer TRIM commands per operation than best fit on {} of {} workloads. Two things decide it: a pending TRIM is cancelled when the engine writes its space again before the batch goes out, and best fit reuses freed space soon while the sweep reuses it a lap later (more commands for the sweep); and an engine that writes fewer pages frees fewer extents (fewer commands for the engine that writes less).",
        sweep_sends_fewer.iter().filter(|&&f| f).count(),
        sweep_sends_fewer.len()
    ));
    Ok(())
}

fn plots(
    r: &mut Report,
    out: &Path,
    tag: &str,
    rows: &[(&'static str, Vec<Option<Value>>)],
    workloads: &[String],
) -> Result<()> {
    let series = |pick: &dyn Fn(&Value) -> f64| -> Vec<(String, Vec<f64>)> {
        rows.iter()
            .map(|(label, vals)| {
                (
                    label.replace("**", ""),
                    vals.iter()
                        .map(|v| v.as_ref().map(pick).unwrap_or(0.0))
                        .collect(),
                )
            })
            .collect()
    };
    let name = format!("flash-per-op-{tag}");
    plot::bars(
        &out.join(&name),
        &Bars {
            title: "Flash page writes per operation (median over seeds)",
            x_label: "workload",
            y_label: "flash page writes / operation",
            categories: workloads,
            series: &series(&|v| v.flash.median),
            reference: None,
            stacked: false,
        },
    )?;
    r.img(&format!("{name}.png"), "flash page writes per operation");
    let name = format!("throughput-{tag}");
    plot::bars(
        &out.join(&name),
        &Bars {
            title: "Modeled throughput relative to none on WiredTiger's engine",
            x_label: "workload",
            y_label: "throughput / none (×)",
            categories: workloads,
            series: &series(&|v| v.ops_vs_none.median),
            reference: Some(1.0),
            stacked: false,
        },
    )?;
    r.img(&format!("{name}.png"), "modeled throughput");
    Ok(())
}

/// WAF, GC copies and device write and read p99, every policy on every engine.
fn secondary(r: &mut Report, t: &Table, k: &Condition, workloads: &[String]) {
    r.h3("Write amplification, GC copies and device write and read p99");
    let mut rows = Vec::new();
    for w in workloads {
        let base = base_cell(k, w);
        for engine in credit::engines(t, &base) {
            let mut policies: Vec<&Cell> = t
                .cells
                .keys()
                .filter(|c| {
                    c.workload == *w
                        && (&c.allocation, c.dirty_pct) == (&engine.allocation, engine.dirty_pct)
                        && (c.cache_permille, c.leaf_kb, &c.compressor, &c.trim, &c.ssd)
                            == (k.0, k.1, &k.2, &k.3, &k.4)
                })
                .collect();
            policies.sort_by_key(|c| {
                crate::experiment::all_policies()
                    .iter()
                    .position(|p| *p == c.policy)
            });
            for c in policies {
                let (Some(wa), Some(gc), Some(p99)) = (
                    t.spread(c, waf),
                    t.spread(c, |p| p.device.gc_copies as f64 / 1e3),
                    t.spread(c, |p| p.device.write_p99_us / 1e3),
                ) else {
                    continue;
                };
                let vs = t
                    .paired_ratio(c, &c.with_policy("none"), |p| p.device.write_p99_us)
                    .map(|s| format!("{:.2}×", s.median))
                    .unwrap_or_default();
                // Traces made before reads were recorded have none: no figure, not a zero.
                let read = t
                    .spread(c, |p| p.device.read_p99_us / 1e3)
                    .filter(|s| s.max > 0.0)
                    .map(|p99| {
                        let vs = t
                            .paired_ratio(c, &base, |p| p.device.read_p99_us)
                            .map(|s| format!(" ({:.2}×)", s.median))
                            .unwrap_or_default();
                        format!("{}{vs}", p99.fmt(2))
                    })
                    .unwrap_or_else(|| "–".into());
                rows.push(vec![
                    w.clone(),
                    credit::engine_words(&engine),
                    c.policy.clone(),
                    wa.fmt(3),
                    gc.fmt(0),
                    format!("{} ({vs})", p99.fmt(2)),
                    read,
                ]);
            }
        }
    }
    r.table(
        &[
            "workload",
            "engine",
            "policy",
            "WAF",
            "GC copies (k pages)",
            "device write p99, ms (× none)",
            "device read p99, ms (× none)",
        ],
        rows,
    );
}

/// What flashdoc's co-design is in this experiment: the sweep allocator, its dirty budget when
/// it is not the engine's default, and `filelog` placement.
pub fn codesign_words() -> String {
    let [target, trigger] = FLASH_MODE.dirty_pct;
    format!(
        "the sweep allocator with a {target}/{trigger} % dirty budget and 80/95 % eviction, and `{}` placement",
        crate::experiment::SHIPPED_POLICY
    )
}

/// An allocation's engine in words (for reports whose engines differ in allocation only).
pub fn allocation_name(allocation: &str) -> &'static str {
    match allocation {
        "sweep" => "sweep (flashdoc)",
        _ => "WiredTiger (best fit)",
    }
}

/// An engine run's engine in words, by its allocation and dirty budget.
pub fn engine_name(allocation: &str, dirty_pct: [u8; 2]) -> String {
    let alloc = match allocation {
        "best" => "best fit",
        a => a,
    };
    let name = if (allocation, dirty_pct) == (FLASH_MODE.allocation, FLASH_MODE.dirty_pct) {
        "flash mode: "
    } else if (allocation, dirty_pct) == (WIREDTIGER.allocation, WIREDTIGER.dirty_pct) {
        "WiredTiger: "
    } else {
        ""
    };
    format!("{name}{alloc}, {}/{} dirty", dirty_pct[0], dirty_pct[1])
}

/// One published claim: which policy against which, on which workloads, and the paper's
/// numbers (throughput change in percent, or p99 change for `p99`).
struct Claim {
    what: &'static str,
    source: &'static str,
    ours: &'static str,
    against: &'static str,
    p99: bool,
    paper: &'static [(&'static str, f64)],
}

const CLAIMS: &[Claim] = &[
    Claim {
        what: "boundary vs original, throughput",
        source: "seed 003 §4, Fig. 3",
        ours: "boundary",
        against: "none",
        p99: false,
        paper: &[
            ("ycsb-update-heavy", 23.0),
            ("ycsb-update-only", 44.0),
            ("linkbench-original", 23.26),
            ("linkbench-mixed", 28.12),
            ("linkbench-update-only", 43.73),
        ],
    },
    Claim {
        what: "boundary vs file-based, throughput",
        source: "seed 003 §4",
        ours: "boundary",
        against: "file",
        p99: false,
        paper: &[
            ("ycsb-update-heavy", 14.0),
            ("ycsb-update-only", 24.4),
            ("linkbench-original", 6.84),
            ("linkbench-mixed", 11.0),
            ("linkbench-update-only", 18.8),
        ],
    },
    Claim {
        what: "DSM vs original, throughput",
        source: "seed 000 §5.2, Fig. 10",
        ours: "dsm",
        against: "none",
        p99: false,
        paper: &[
            ("linkbench-original", 36.5),
            ("linkbench-mixed", 50.7),
            ("linkbench-update-only", 65.0),
        ],
    },
    Claim {
        what: "DSM vs original, 99th-percentile latency",
        source: "seed 000 §5.2, Fig. 11",
        ours: "dsm",
        against: "none",
        p99: true,
        paper: &[
            ("linkbench-original", -27.6),
            ("linkbench-mixed", -31.8),
            ("linkbench-update-only", -46.2),
        ],
    },
    Claim {
        what: "DSM vs boundary, throughput",
        source: "seed 000 §5.2",
        ours: "dsm",
        against: "boundary",
        p99: false,
        paper: &[
            ("linkbench-original", 10.8),
            ("linkbench-mixed", 19.2),
            ("linkbench-update-only", 23.0),
        ],
    },
    Claim {
        what: "DSM vs DSM without primary-index filtering, throughput",
        source: "seed 000 §5.3, Fig. 12",
        ours: "dsm",
        against: "dsm-skip-primary",
        p99: false,
        paper: &[
            ("linkbench-original", 5.9),
            ("linkbench-mixed", 9.0),
            ("linkbench-update-only", 11.7),
        ],
    },
];

/// The seeds' published numbers beside ours (WiredTiger engine, condition `k`), with the
/// direction and, where they differ in direction or size, the causes measured in this run.
fn claims(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    runs: &[EngineRun],
) -> Result<()> {
    let mut rows = Vec::new();
    for claim in CLAIMS {
        for &(w, paper) in claim.paper {
            let base = base_cell(k, w);
            if !t.cells.contains_key(&base) {
                continue;
            }
            let ours_c = base.with(WIREDTIGER, claim.ours);
            let vs_c = base.with(WIREDTIGER, claim.against);
            comparable_cells(exp, &ours_c, &vs_c, Compared::One("placement"))?;
            let metric = |p: &Point| {
                if claim.p99 {
                    p.device.write_p99_us
                } else {
                    p.device.modeled_ops_s
                }
            };
            let Some(ratio) = t.paired_ratio(&ours_c, &vs_c, metric) else {
                continue;
            };
            let ours = (ratio.median - 1.0) * 100.0;
            let spread = (ratio.max - ratio.min) / 2.0 * 100.0;
            let direction = if ours.abs() <= spread.max(0.5) {
                "flat (within the spread)"
            } else if ours.signum() == paper.signum() {
                "right"
            } else {
                "wrong"
            };
            // The same direction and a size within a factor 1.25 of the paper's is agreement;
            // anything else is a difference this run must explain.
            let agrees = direction == "right"
                && ours.abs() >= paper.abs() / 1.25
                && ours.abs() <= paper.abs() * 1.25;
            let cause = if agrees {
                "—".to_string()
            } else {
                let larger = direction == "right" && ours.abs() > paper.abs() * 1.25;
                cause(t, &base, claim, runs, larger)
            };
            rows.push(vec![
                format!("paper: {} ({})", claim.what, claim.source),
                w.to_string(),
                format!("{paper:+.1}%"),
                format!("{ours:+.1}% (±{spread:.1})"),
                direction.to_string(),
                cause,
            ]);
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    r.h2("The seeds' published numbers beside ours");
    r.table(
        &[
            "claim",
            "workload",
            "paper",
            "ours",
            "direction",
            "measured cause of the difference",
        ],
        rows,
    );
    r.p(format!("Ours: median of the seed-paired ratios on WiredTiger's engine, ± half their range, under {} (cache {:.0}% of the data, leaf {} KB, {}). Agreement is the paper's direction and a size within a factor of 1.25 of the paper's; every other row is explained by quantities measured in this run: the oracle's headroom over the baseline, how much of it the claimed policy takes, the WAF of both, and the write share of the streams it separates.", trim_words(&k.3), k.0 as f64 / 10.0, k.1, k.4));
    Ok(())
}

/// A TRIM condition's label in words.
fn trim_words(label: &str) -> String {
    match label {
        "off" => "the seeds' conditions (no TRIM, no discard)".into(),
        "off-discard" => "no TRIM, with filesystem discard".into(),
        k => format!("TRIM {k}"),
    }
}

/// What this run measured that explains a claim's difference; `larger` when ours has the
/// paper's direction but a larger size.
fn cause(t: &Table, base: &Cell, claim: &Claim, runs: &[EngineRun], larger: bool) -> String {
    let ops = |p: &str| {
        t.spread(&base.with(WIREDTIGER, p), modeled)
            .map(|s| s.median)
    };
    let (Some(none), Some(ours), Some(against)) =
        (ops("none"), ops(claim.ours), ops(claim.against))
    else {
        return "not measured".into();
    };
    let oracle = ["oracle", "oracle-death"]
        .iter()
        .filter_map(|o| ops(o))
        .fold(f64::NAN, f64::max);
    let mut s = if oracle.is_finite() {
        headroom(t, base, claim, [none, ours, against, oracle])
    } else {
        String::new()
    };
    s.push_str(&waf_clause(t, base, claim, larger));
    s.push_str(&filter_clause(t, base, claim, runs));
    s
}

/// Whether the oracle leaves headroom over `none`, and how much of it the claimed policy
/// takes; `ops` holds the modeled throughput of none, the claimed policy, the one it is
/// claimed against and the oracle.
fn headroom(t: &Table, base: &Cell, claim: &Claim, ops: [f64; 4]) -> String {
    let [none, ours, against, oracle] = ops;
    let mut s = String::new();
    // No headroom: the oracle is within 1 % of `none`, or of `none`'s seed spread.
    let none_spread = t
        .spread(&base.with(WIREDTIGER, "none"), modeled)
        .map_or(0.0, |x| x.rel_half_range());
    let head = oracle / none - 1.0;
    if head <= none_spread.max(0.01) {
        write!(
            s,
            "no headroom: the oracle is {:+.1}% over none, so no placement of these writes can gain here",
            head * 100.0
        )
        .unwrap();
    } else {
        let taken = if oracle > against {
            (ours - against) / (oracle - against)
        } else {
            0.0
        };
        write!(
            s,
            "the oracle is {:+.0}% over none, so the headroom exists; {} takes {:.0}% of the oracle's lead over {}",
            head * 100.0,
            claim.ours,
            taken * 100.0,
            claim.against
        )
        .unwrap();
    }
    s
}

/// The write amplification behind a claim: why a gain is larger than the paper's, or the WAF
/// of both policies where the claim separates streams.
fn waf_clause(t: &Table, base: &Cell, claim: &Claim, larger: bool) -> String {
    let mut s = String::new();
    let separated = matches!(
        (claim.ours, claim.against),
        (_, "none") | ("boundary", "file") | ("dsm", "boundary")
    );
    if larger {
        // A gain larger than the paper's comes from a baseline that loses more to GC here:
        // the flash each operation costs on both sides says by how much.
        let flash = |p: &str| {
            t.spread(&base.with(WIREDTIGER, p), flash_per_op)
                .map(|s| s.median)
        };
        let waf_of = |p: &str| t.spread(&base.with(WIREDTIGER, p), waf).map(|s| s.median);
        if let (Some(fa), Some(fb), Some(a), Some(b)) = (
            flash(claim.ours),
            flash(claim.against),
            waf_of(claim.ours),
            waf_of(claim.against),
        ) {
            write!(
                s,
                "; larger than the paper's because {} loses more here: it writes {:.2}× the flash pages per operation of {} (WAF {b:.2} against {a:.2})",
                claim.against,
                fb / fa,
                claim.ours
            )
            .unwrap();
        }
    } else if separated || claim.against == "dsm-skip-primary" {
        let waf_of = |p: &str| t.spread(&base.with(WIREDTIGER, p), waf).map(|s| s.median);
        if let (Some(a), Some(b)) = (waf_of(claim.ours), waf_of(claim.against)) {
            write!(s, "; WAF {a:.2} against {b:.2}").unwrap();
        }
    }
    s
}

/// What DSM's primary-index filter and the journal's stream account for.
fn filter_clause(t: &Table, base: &Cell, claim: &Claim, runs: &[EngineRun]) -> String {
    let mut s = String::new();
    if claim.ours == "dsm" && claim.against != "dsm-skip-primary" {
        // Which part of DSM makes the difference: the same policy without its filter.
        if let Some(w) = t.spread(&base.with(WIREDTIGER, "dsm-skip-primary"), waf) {
            write!(
                s,
                "; without its primary-index filter dsm's WAF is {:.2}",
                w.median
            )
            .unwrap();
        }
    }
    if claim.against == "dsm-skip-primary" {
        // The filter moves the files it takes for primary indexes onto the journal's stream:
        // how much the engine writes to primary indexes bounds what that can change.
        if let Some(p) = file_share(runs, &base.workload, "primary index") {
            write!(s, "; primary indexes take {p:.1}% of the bytes").unwrap();
        }
        // What it costs the GC, on that stream and on the others (runs that recorded streams).
        let gc = |policy: &str, journal: bool| {
            let ps = t.cells.get(&base.with(WIREDTIGER, policy))?;
            let v: Option<Vec<f64>> = ps
                .iter()
                .map(|p| gc_per_host_page(p, |stream| (stream == JOURNAL_STREAM) == journal))
                .collect();
            Spread::of(v?).map(|s| s.median)
        };
        if let (Some(a), Some(b), Some(c), Some(d)) = (
            gc("dsm", true),
            gc("dsm-skip-primary", true),
            gc("dsm", false),
            gc("dsm-skip-primary", false),
        ) {
            write!(
                s,
                "; GC copies per host page on the journal's stream {a:.2} against {b:.2}, on the other streams {c:.2} against {d:.2}"
            )
            .unwrap();
        }
    }
    if claim.against == "none" {
        // What separating the journal alone can buy: its share of the bytes.
        if let Some(j) = file_share(runs, &base.workload, "journal") {
            let paper = crate::report::PAPER_JOURNAL_SHARE
                .iter()
                .find(|x| x.0 == base.workload)
                .map(|x| format!(" (paper {:.1}%)", x.1))
                .unwrap_or_default();
            write!(s, "; the journal takes {j:.1}% of the bytes{paper}").unwrap();
        }
    }
    s
}

/// The stream dsm's map gives the journal and the indexes its filter takes for primary ones
/// (`placement::policy::dsm`, seed 000 Table 2).
const JOURNAL_STREAM: u32 = 1;

/// GC copies per host page written on the streams `counted` selects, in the measured pass;
/// `None` for a run saved before streams were recorded.
fn gc_per_host_page(p: &Point, counted: impl Fn(u32) -> bool) -> Option<f64> {
    let streams: Vec<_> = p
        .device
        .streams
        .iter()
        .filter(|s| counted(s.stream))
        .collect();
    let host: u64 = streams.iter().map(|s| s.host_pages).sum();
    let gc: u64 = streams.iter().map(|s| s.gc_pages).sum();
    (host > 0).then(|| gc as f64 / host as f64)
}

/// The median share, in percent, of the run phase's bytes that files of `kind` took on
/// WiredTiger's engine.
fn file_share(runs: &[EngineRun], workload: &str, kind: &str) -> Option<f64> {
    let shares: Vec<f64> = runs
        .iter()
        .filter(|e| {
            e.workload == workload
                && (e.allocation.as_str(), e.dirty_pct)
                    == (WIREDTIGER.allocation, WIREDTIGER.dirty_pct)
        })
        .map(|e| {
            let total: u64 = e.write_bytes_by_file.values().sum();
            *e.write_bytes_by_file.get(kind).unwrap_or(&0) as f64 * 100.0 / total.max(1) as f64
        })
        .collect();
    Spread::of(shares).map(|s| s.median)
}

/// This run's headline beside an earlier run's (the committed larger-scale run): flash writes per
/// operation per policy and workload, and how far this run's lie from it.
pub fn compare(r: &mut Report, exp: &Experiment, points: &[Point], rf: &crate::Reference) {
    let here = Table::new(points);
    let theirs = crate::summary::with_budgets(&rf.experiment, &rf.points, &[]);
    let there = Table::new(&theirs);
    let mut rows = Vec::new();
    let mut worst: f64 = 0.0;
    for w in &exp.workloads {
        for row in HEADLINE {
            // The same cell in both runs: workload, policy, engine and every condition
            // (TRIM, device, cache, leaf size) equal, so a figure is only set beside its own.
            let cells = here
                .cells
                .keys()
                .filter(|c| &c.workload == w && c.on(row.engine) && c.policy == row.policy);
            for c in cells {
                let (Some(a), Some(b)) =
                    (here.spread(c, flash_per_op), there.spread(c, flash_per_op))
                else {
                    continue;
                };
                let d = a.median / b.median - 1.0;
                worst = worst.max(d.abs());
                rows.push(vec![
                    w.clone(),
                    row.label.to_string(),
                    c.trim.clone(),
                    format!("{:.2}", a.median),
                    format!("{:.2}", b.median),
                    format!("{:+.1}%", d * 100.0),
                ]);
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    r.h2(format!(
        "This run beside the reference run ({}, scale {})",
        rf.dir.display(),
        rf.experiment.scale
    ));
    r.table(
        &[
            "workload",
            "policy",
            "TRIM",
            "flash writes/op here",
            "reference run",
            "difference",
        ],
        rows,
    );
    r.p(format!(
        "This run is at scale `{}`; the reference run at `{}`. The largest difference in flash page writes per operation is {:.1}%.",
        exp.scale,
        rf.experiment.scale,
        worst * 100.0
    ));
    let differ = settings_that_differ(exp, &rf.experiment);
    if !differ.is_empty() {
        r.p(format!(
            "Settings that differ (this run → the reference run): {}.",
            differ.join("; ")
        ));
    }
}

/// The settings that shape a stream experiment's figures and differ between two runs, each as
/// "what: this run's → the other's": the named ones of [`shaping_settings`] in words, then every
/// other field of the experiment that differs (its allocations, dirty budgets, the sweep's
/// reserve, precondition, warm-up, and any field added later), by its name. Names,
/// descriptions, workloads, policies, TRIM conditions and devices are not listed: the
/// comparison only sets a cell beside the same cell.
fn settings_that_differ(a: &Experiment, b: &Experiment) -> Vec<String> {
    let (x, y) = (shaping_settings(a), shaping_settings(b));
    let mut differ: Vec<String> = x
        .into_iter()
        .zip(y)
        .filter(|((_, x), (_, y))| x != y)
        .map(|((what, x), (_, y))| format!("{what}: {x} → {y}"))
        .collect();
    let fields = |e: &Experiment| match serde_json::to_value(e) {
        Ok(serde_json::Value::Object(m)) => m,
        other => unreachable!("an experiment serializes to an object, not {other:?}"),
    };
    let (x, y) = (fields(a), fields(b));
    for (key, va) in &x {
        let vb = y.get(key).unwrap_or(&serde_json::Value::Null);
        if va != vb && !NOT_SHAPING.contains(&key.as_str()) && !IN_WORDS.contains(&key.as_str()) {
            differ.push(format!("{key}: {va} → {vb}"));
        }
    }
    for (key, vb) in &y {
        if !x.contains_key(key)
            && !NOT_SHAPING.contains(&key.as_str())
            && !IN_WORDS.contains(&key.as_str())
        {
            differ.push(format!("{key}: unset → {vb}"));
        }
    }
    differ
}

/// An experiment's fields that do not shape a compared cell's figures.
const NOT_SHAPING: &[&str] = &[
    "name",
    "title",
    "kind",
    "description",
    "workloads",
    "policies",
    "trims",
    "ssds",
    "scales",
];

/// The fields [`shaping_settings`] names in words.
const IN_WORDS: &[&str] = &[
    "scale",
    "run_factor",
    "ycsb_key_classes",
    "linkbench_degree_cap",
    "device_fill",
    "checkpoint_share",
    "cache_shares",
    "seeds",
];

/// An experiment's settings that shape a stream experiment's figures, named and shown.
fn shaping_settings(e: &Experiment) -> [(&'static str, String); 8] {
    let seeds: Vec<String> = e.seeds.iter().map(u64::to_string).collect();
    [
        ("scale", e.scale.clone()),
        ("run length ×", e.run_factor.to_string()),
        (
            "YCSB's keys",
            match e.ycsb_key_classes {
                None => "YCSB's scrambled zipfian".to_string(),
                Some(n) => format!("a zipfian over {n} classes"),
            },
        ),
        (
            "LinkBench's out-degree cap",
            match e.linkbench_degree_cap {
                None => "a tenth of the nodes".to_string(),
                Some(n) => n.to_string(),
            },
        ),
        ("live data ÷ device", e.device_fill.to_string()),
        (
            "bytes per checkpoint interval ÷ device",
            e.checkpoint_share.to_string(),
        ),
        ("cache ÷ data", format!("{:?}", e.cache_shares)),
        ("seeds", seeds.join(", ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn streams() -> Experiment {
        crate::experiment::builtins()
            .into_iter()
            .find(|e| e.name == "streams")
            .expect("the built-in streams experiment")
    }

    #[test]
    fn the_settings_that_differ_are_named_with_both_values_and_nothing_else() {
        let a = streams();
        assert!(settings_that_differ(&a, &a).is_empty());
        let mut b = a.clone();
        b.scale = "large".into();
        b.ycsb_key_classes = Some(40_000);
        b.linkbench_degree_cap = Some(7_500);
        let d = settings_that_differ(&a, &b);
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(d[0], format!("scale: {} → large", a.scale));
        assert_eq!(
            d[1],
            "YCSB's keys: YCSB's scrambled zipfian → a zipfian over 40000 classes"
        );
        assert_eq!(
            d[2],
            "LinkBench's out-degree cap: a tenth of the nodes → 7500"
        );
    }

    /// The engine's settings are named too: the allocations, the dirty budgets and the
    /// sweep's reserve, and a field the words do not cover by its name.
    #[test]
    fn the_engine_settings_that_differ_between_experiments_are_named() {
        let a = streams();
        let b = Experiment {
            allocations: vec!["best".into()],
            sweep_reserve_pct: 30,
            dirty_budgets: vec![[5, 20], [50, 80]],
            linkbench_id_classes: Some(100),
            ..a.clone()
        };
        let d = settings_that_differ(&a, &b);
        for name in [
            "allocations",
            "sweep_reserve_pct",
            "dirty_budgets",
            "linkbench_id_classes",
        ] {
            assert!(d.iter().any(|x| x.starts_with(name)), "{name}: {d:?}");
        }
        assert_eq!(d.len(), 4, "{d:?}");
        let budget = Experiment {
            dirty_pct: BTreeMap::from([("sweep".to_string(), [40, 70])]),
            ..a.clone()
        };
        assert_eq!(settings_that_differ(&a, &budget).len(), 1);
    }
}
