//! Validation of the FTL against the analytical models of [`crate::theory`].
//!
//! Each case builds a device, fills the logical space in LBA order, runs `warm_factor · U`
//! host page writes of the case's workload to reach steady state, zeroes the counters and
//! measures write amplification over the next `measure_factor · U` host page writes.
//!
//! The theory counts pages that hold data (valid or stale). The simulator also holds units
//! that hold none: free units (GC refills the pool to `gc_low_water` when a unit is taken, so
//! between allocations `gc_low_water − 1` are free) and the write points (the GC destination
//! and each host stream's open unit, half full on average). Each validation pool therefore
//! gets `(gc_low_water − 1) + (1 + host streams)/2` units on top of the α·U pages the theory
//! is given (rounded to whole units), so both describe the same amount of space for data.
//!
//! Groups:
//! - (a) uniform random overwrites at several ρ: FIFO against the Lambert-W closed form;
//!   greedy and cost-benefit must not exceed it; d-choices (d = 10) between greedy (simulated)
//!   and FIFO.
//! - (b) hot/cold (90 % of writes to 10 % of LBAs): one stream (FIFO against the two-class
//!   FIFO model; greedy between the separated optimum and that); two streams in one pool
//!   (greedy, below one stream); two streams in two pools with proportional and with optimal
//!   spare split (FIFO against Σ rᵢ·WA(αᵢ)).
//! - (c) TRIM: 20 % of the LBAs static (never rewritten) without TRIM (FIFO against the model
//!   with a static class) and trimmed before the overwrites (against α/(1−t)); random TRIMs as
//!   10 % of operations (against α/(1−q)).

use crate::config::{GcPolicy, SsdConfig};
use crate::ftl::Ftl;
use crate::theory::{self, Class};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// How large the validation devices are and how long they run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Size {
    pub name: &'static str,
    pub logical_pages: u64,
    pub pages_per_block: u32,
    pub warm_factor: f64,
    pub measure_factor: f64,
    /// Relative tolerance for "≈" rows.
    pub tolerance: f64,
    pub rhos: Vec<f64>,
}

impl Size {
    /// Seconds in a debug build: for the test suite.
    pub fn quick() -> Self {
        Size {
            name: "quick",
            logical_pages: 1 << 16,
            pages_per_block: 64,
            warm_factor: 4.0,
            measure_factor: 3.0,
            tolerance: 0.05,
            rhos: vec![0.07, 0.2, 0.5],
        }
    }
    /// 8 GiB of logical space in 256-page blocks (about a minute in release).
    pub fn full() -> Self {
        Size {
            name: "full",
            logical_pages: 1 << 21,
            pages_per_block: 256,
            warm_factor: 5.0,
            measure_factor: 4.0,
            tolerance: 0.02,
            rhos: vec![0.07, 0.1, 0.2, 0.3, 0.5],
        }
    }
}

/// How a simulated value is judged.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub enum Relation {
    /// Within the tolerance of the reference.
    Approx,
    /// At most the reference (plus the tolerance).
    AtMost,
    /// Between `low` and the reference (each with the tolerance).
    Between,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    pub group: &'static str,
    pub case: String,
    pub gc: &'static str,
    pub op_rho: f64,
    pub simulated_waf: f64,
    /// The value compared with (analytical unless `reference_kind` says "simulated").
    pub reference: f64,
    pub reference_kind: String,
    pub relation: Relation,
    pub low: Option<f64>,
    pub rel_diff: f64,
    pub tolerance: f64,
    pub pass: bool,
    pub note: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ValidationReport {
    pub size: Size,
    pub seed: u64,
    pub rows: Vec<Row>,
    pub all_pass: bool,
}

/// A class of the workload: LBAs `start..start+len`, a share of host writes, a stream.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    len: u64,
    writes: f64,
    stream: u32,
}

#[derive(Clone, Debug)]
struct Case {
    gc: GcPolicy,
    alpha: f64,
    regions: Vec<Region>,
    /// LBAs `0..static_pages` are written once at fill and never again.
    static_pages: u64,
    /// Trim the static LBAs after the fill.
    trim_static: bool,
    /// Share of operations that are TRIMs of random LBAs of the active regions.
    trim_ops: f64,
    /// Per-stream pools: α of each stream's pool (empty: one shared pool).
    pool_alphas: Vec<f64>,
    streams: u32,
}

/// Units holding no data on average (see the module comment).
fn reserve_units(low_water: u32, host_streams: u32) -> f64 {
    (low_water - 1) as f64 + (1 + host_streams) as f64 / 2.0
}

/// The device for a case, and for per-stream pools the α each pool really got
/// (data pages / pages of its data), after rounding to whole units.
fn build(case: &Case, size: &Size, seed: u64) -> (SsdConfig, Vec<f64>) {
    let u = size.logical_pages;
    let ppb = size.pages_per_block as u64;
    let mut cfg = SsdConfig::from_physical(1024, size.pages_per_block, 0.5).expect("template");
    cfg.logical_pages = u;
    cfg.streams = case.streams;
    cfg.gc = case.gc;
    cfg.seed = seed;
    let lw = cfg.gc_low_water;
    let mut realized = Vec::new();
    if case.pool_alphas.is_empty() {
        let units = case.alpha * u as f64 / ppb as f64 + reserve_units(lw, case.streams);
        cfg.physical_blocks = units.round() as u64;
    } else {
        // Pool i holds the LBAs of the regions on stream i.
        let mut pools = Vec::new();
        for (s, &a) in case.pool_alphas.iter().enumerate() {
            let pages: u64 = case
                .regions
                .iter()
                .filter(|r| r.stream == s as u32)
                .map(|r| r.len)
                .sum();
            let units = (a * pages as f64 / ppb as f64 + reserve_units(lw, 1)).round();
            pools.push(units as u64);
            realized.push((units - reserve_units(lw, 1)) * ppb as f64 / pages as f64);
        }
        cfg.physical_blocks = pools.iter().sum();
        cfg.pool_units = pools;
    }
    cfg.validate().expect("validation device");
    (cfg, realized)
}

/// Runs one case; returns the measured write amplification and the realized pool α's.
fn simulate(case: &Case, size: &Size, seed: u64) -> (f64, Vec<f64>) {
    let (cfg, realized) = build(case, size, seed);
    let mut ftl = Ftl::new(&cfg).expect("validation device");
    let u = cfg.logical_pages;
    let stream_of = |lba: u64| -> u32 {
        case.regions
            .iter()
            .find(|r| lba >= r.start && lba < r.start + r.len)
            .map_or(0, |r| r.stream)
    };
    for lba in 0..u {
        ftl.write_page(lba as u32, stream_of(lba)).expect("fill");
    }
    if case.trim_static && case.static_pages > 0 {
        ftl.trim(0, case.static_pages).expect("trim");
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let active: u64 = case.regions.iter().map(|r| r.len).sum();
    let mut cum = Vec::new();
    let mut acc = 0.0;
    for r in &case.regions {
        acc += r.writes;
        cum.push(acc);
    }
    // Uniform in 0..n without division: the high half of a 64×64-bit product.
    let below = |x: u64, n: u64| ((x as u128 * n as u128) >> 64) as u64;
    let mut run = |ftl: &mut Ftl, host_writes: u64| {
        let mut done = 0;
        while done < host_writes {
            if case.trim_ops > 0.0 && rng.gen::<f64>() < case.trim_ops {
                // A random active LBA: pick a region by size, then an LBA in it.
                let mut k = below(rng.gen(), active);
                let r = case.regions.iter().find(|r| {
                    if k < r.len {
                        true
                    } else {
                        k -= r.len;
                        false
                    }
                });
                let r = r.expect("k < active");
                ftl.trim(r.start + k, 1).expect("trim");
                continue;
            }
            let x: f64 = rng.gen();
            let i = cum.iter().position(|&c| x < c).unwrap_or(cum.len() - 1);
            let r = case.regions[i];
            let lba = r.start + below(rng.gen(), r.len);
            ftl.write_page(lba as u32, r.stream).expect("write");
            done += 1;
        }
    };
    run(&mut ftl, (size.warm_factor * active as f64) as u64);
    ftl.reset_stats();
    run(&mut ftl, (size.measure_factor * active as f64) as u64);
    (ftl.stats().write_amplification(), realized)
}

fn judge(sim: f64, reference: f64, rel: Relation, low: Option<f64>, tol: f64) -> bool {
    match rel {
        Relation::Approx => (sim / reference - 1.0).abs() <= tol,
        Relation::AtMost => sim <= reference * (1.0 + tol),
        Relation::Between => {
            sim <= reference * (1.0 + tol) && sim >= low.expect("low bound") * (1.0 - tol)
        }
    }
}

/// The reference a planned row is judged against.
enum Ref {
    Theory(f64, String),
    /// Σ rᵢ·WA_FIFO(αᵢ) at the α each stream's pool really got.
    Pooled(String),
    Sim(usize, String),
}

/// A planned row: its group, label, case and how to judge it.
struct Plan {
    group: &'static str,
    label: String,
    case: Case,
    reference: Ref,
    relation: Relation,
    low: Option<f64>,
    /// The low bound is the simulated value of this earlier row.
    low_sim: Option<usize>,
    note: String,
}

/// Uniform random overwrites of all `u` logical pages on one stream.
fn uniform(u: u64, gc: GcPolicy, rho: f64) -> Case {
    Case {
        gc,
        alpha: 1.0 + rho,
        regions: vec![Region {
            start: 0,
            len: u,
            writes: 1.0,
            stream: 0,
        }],
        static_pages: 0,
        trim_static: false,
        trim_ops: 0.0,
        pool_alphas: vec![],
        streams: 1,
    }
}

/// The spare factor of groups (b) and (c): sf = 0.1.
fn sf_alpha() -> f64 {
    1.0 / 0.9
}

/// Runs every validation case. `progress(done, total, label)` is called before each case.
pub fn run(
    size: &Size,
    seed: u64,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> ValidationReport {
    let mut plan = plan_uniform(size);
    plan_hot_cold(size.logical_pages, &mut plan);
    plan_trim(size.logical_pages, &mut plan);
    let rows = measure(&plan, size, seed, progress);
    let all_pass = rows.iter().all(|r| r.pass);
    ValidationReport {
        size: size.clone(),
        seed,
        rows,
        all_pass,
    }
}

/// Group (a): uniform overwrites at each ρ of the size.
fn plan_uniform(size: &Size) -> Vec<Plan> {
    let u = size.logical_pages;
    let mut plan: Vec<Plan> = Vec::new();
    for &rho in &size.rhos {
        let a = 1.0 + rho;
        let lw = theory::wa_fifo(a);
        let agarwal = format!("Agarwal-Marrow (1+ρ)/(2ρ) = {:.3}", theory::wa_agarwal(rho));
        plan.push(Plan {
            group: "a-uniform",
            label: format!("uniform overwrites, ρ={rho}"),
            case: uniform(u, GcPolicy::Fifo, rho),
            reference: Ref::Theory(lw, "Lambert-W FIFO/LRU (Desnoyers; Xiang-Kurkoski)".into()),
            relation: Relation::Approx,
            low: None,
            low_sim: None,
            note: agarwal.clone(),
        });
        plan.push(Plan {
            group: "a-uniform",
            label: format!("uniform overwrites, ρ={rho}"),
            case: uniform(u, GcPolicy::Greedy, rho),
            reference: Ref::Theory(lw, "Lambert-W FIFO/LRU: greedy ≤ FIFO".into()),
            relation: Relation::AtMost,
            low: None,
            low_sim: None,
            note: agarwal,
        });
    }
    let greedy_row = |plan: &Vec<Plan>, rho: f64| {
        plan.iter().position(|p| {
            p.case.gc == GcPolicy::Greedy
                && p.group == "a-uniform"
                && (p.case.alpha - 1.0 - rho).abs() < 1e-12
        })
    };
    for &rho in [size.rhos[0], *size.rhos.last().expect("rhos")].iter() {
        if let Some(g) = greedy_row(&plan, rho) {
            plan.push(Plan {
                group: "a-uniform",
                label: format!("uniform overwrites, ρ={rho}, d=10"),
                case: uniform(u, GcPolicy::DChoices, rho),
                reference: Ref::Theory(
                    theory::wa_fifo(1.0 + rho),
                    "greedy (simulated) ≤ d=10 ≤ Lambert-W FIFO (Van Houdt 2013: d=10 close to greedy)".into(),
                ),
                relation: Relation::Between,
                low: None,
                low_sim: Some(g),
                note: String::new(),
            });
        }
    }
    let cb_rho = size.rhos[size.rhos.len() / 2];
    plan.push(Plan {
        group: "a-uniform",
        label: format!("uniform overwrites, ρ={cb_rho}"),
        case: uniform(u, GcPolicy::CostBenefit, cb_rho),
        reference: Ref::Theory(
            theory::wa_fifo(1.0 + cb_rho),
            "Lambert-W FIFO/LRU: cost-benefit ≤ FIFO".into(),
        ),
        relation: Relation::AtMost,
        low: None,
        low_sim: None,
        note: String::new(),
    });
    plan
}

const HOT: Class = Class {
    share: 0.1,
    writes: 0.9,
};
const COLD: Class = Class {
    share: 0.9,
    writes: 0.1,
};

/// A hot/cold 90/10 case at sf = 0.1: the hot tenth of the LBAs on `hot_stream`.
fn hot_cold(u: u64, gc: GcPolicy, hot_stream: u32, streams: u32, pools: Vec<f64>) -> Case {
    let hot_len = (u as f64 * HOT.share) as u64;
    Case {
        gc,
        alpha: sf_alpha(),
        regions: vec![
            Region {
                start: 0,
                len: hot_len,
                writes: HOT.writes,
                stream: hot_stream,
            },
            Region {
                start: hot_len,
                len: u - hot_len,
                writes: COLD.writes,
                stream: 0,
            },
        ],
        static_pages: 0,
        trim_static: false,
        trim_ops: 0.0,
        pool_alphas: pools,
        streams,
    }
}

/// Group (b): hot/cold 90/10 at sf = 0.1, on one and two streams.
fn plan_hot_cold(u: u64, plan: &mut Vec<Plan>) {
    let alpha = sf_alpha();
    let mixed_fifo = theory::wa_fifo_mixed(alpha, &[HOT, COLD]);
    let (opt, a_hot, a_cold, hot_spare) = theory::wa_separated_optimal(alpha, HOT, COLD);
    plan.push(Plan {
        group: "b-hot-cold",
        label: "90/10 mixed on 1 stream".into(),
        case: hot_cold(u, GcPolicy::Fifo, 0, 1, vec![]),
        reference: Ref::Theory(mixed_fifo, "two-class FIFO model".into()),
        relation: Relation::Approx,
        low: None,
        low_sim: None,
        note: format!(
            "uniform would be {:.3}: skew hurts FIFO",
            theory::wa_fifo(alpha)
        ),
    });
    let mixed_greedy_idx = plan.len();
    plan.push(Plan {
        group: "b-hot-cold",
        label: "90/10 mixed on 1 stream".into(),
        case: hot_cold(u, GcPolicy::Greedy, 0, 1, vec![]),
        reference: Ref::Theory(
            mixed_fifo,
            "between separated-optimal and mixed FIFO".into(),
        ),
        relation: Relation::Between,
        low: Some(opt),
        low_sim: None,
        note: format!("low bound = separated, optimal spare = {opt:.3}"),
    });
    plan.push(Plan {
        group: "b-hot-cold",
        label: "90/10 on 2 streams, shared spare".into(),
        case: hot_cold(u, GcPolicy::Greedy, 1, 2, vec![]),
        reference: Ref::Sim(
            mixed_greedy_idx,
            "mixed greedy (simulated): separation helps".into(),
        ),
        relation: Relation::AtMost,
        low: None,
        low_sim: None,
        note: String::new(),
    });
    plan.push(Plan {
        group: "b-hot-cold",
        label: "90/10 on 2 streams, spare split proportionally".into(),
        case: hot_cold(u, GcPolicy::Fifo, 1, 2, vec![alpha, alpha]),
        reference: Ref::Pooled("Σ rᵢ·WA_FIFO(αᵢ), αᵢ = α: the uniform value".into()),
        relation: Relation::Approx,
        low: None,
        low_sim: None,
        note: String::new(),
    });
    plan.push(Plan {
        group: "b-hot-cold",
        label: "90/10 on 2 streams, spare split optimally".into(),
        case: hot_cold(u, GcPolicy::Fifo, 1, 2, vec![a_cold, a_hot]),
        reference: Ref::Pooled("Σ rᵢ·WA_FIFO(αᵢ), optimal αᵢ".into()),
        relation: Relation::Approx,
        low: None,
        low_sim: None,
        note: format!(
            "optimum {opt:.3}: hot pool gets {:.0}% of the spare (α_hot {a_hot:.3}, α_cold {a_cold:.3})",
            hot_spare * 100.0
        ),
    });
}

/// Group (c): TRIM at sf = 0.1, of a static fifth of the LBAs and as random operations.
fn plan_trim(u: u64, plan: &mut Vec<Plan>) {
    let alpha = sf_alpha();
    let rho_b = alpha - 1.0;
    let t = 0.2;
    let static_len = (u as f64 * t) as u64;
    let trim_case = |gc, trim_static| Case {
        gc,
        alpha,
        regions: vec![Region {
            start: static_len,
            len: u - static_len,
            writes: 1.0,
            stream: 0,
        }],
        static_pages: static_len,
        trim_static,
        trim_ops: 0.0,
        pool_alphas: vec![],
        streams: 1,
    };
    plan.push(Plan {
        group: "c-trim",
        label: "20% of LBAs static, not trimmed".into(),
        case: trim_case(GcPolicy::Fifo, false),
        reference: Ref::Theory(
            theory::wa_fifo_mixed(
                alpha,
                &[
                    Class {
                        share: t,
                        writes: 0.0,
                    },
                    Class {
                        share: 1.0 - t,
                        writes: 1.0,
                    },
                ],
            ),
            "FIFO model with a static class".into(),
        ),
        relation: Relation::Approx,
        low: None,
        low_sim: None,
        note: String::new(),
    });
    plan.push(Plan {
        group: "c-trim",
        label: "20% of LBAs trimmed before overwrites".into(),
        case: trim_case(GcPolicy::Fifo, true),
        reference: Ref::Theory(
            theory::wa_fifo_trim(alpha, t),
            "Lambert-W at α/(1−t)".into(),
        ),
        relation: Relation::Approx,
        low: None,
        low_sim: None,
        note: String::new(),
    });
    plan.push(Plan {
        group: "c-trim",
        label: "20% of LBAs trimmed before overwrites".into(),
        case: trim_case(GcPolicy::Greedy, true),
        reference: Ref::Theory(
            theory::wa_fifo_trim(alpha, t),
            "Lambert-W at α/(1−t): greedy ≤ FIFO".into(),
        ),
        relation: Relation::AtMost,
        low: None,
        low_sim: None,
        note: String::new(),
    });
    let q = 0.1;
    plan.push(Plan {
        group: "c-trim",
        label: "random TRIMs, 10% of operations".into(),
        case: Case {
            trim_ops: q,
            ..uniform(u, GcPolicy::Fifo, rho_b)
        },
        reference: Ref::Theory(
            theory::wa_fifo_trim(alpha, q),
            "Lambert-W at α/(1−q)".into(),
        ),
        relation: Relation::Approx,
        low: None,
        low_sim: None,
        note: String::new(),
    });
}

/// Simulates every planned case in order (case `i` with seed `seed + i`) and judges it.
fn measure(
    plan: &[Plan],
    size: &Size,
    seed: u64,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Vec<Row> {
    let tol = size.tolerance;
    let total = plan.len();
    let mut sims: Vec<f64> = Vec::with_capacity(total);
    let mut rows = Vec::with_capacity(total);
    for (i, p) in plan.iter().enumerate() {
        progress(i, total, &p.label);
        let (sim, realized) = simulate(&p.case, size, seed.wrapping_add(i as u64));
        sims.push(sim);
        let (reference, kind) = match &p.reference {
            Ref::Theory(v, k) => (*v, k.clone()),
            Ref::Sim(j, k) => (sims[*j], k.clone()),
            Ref::Pooled(k) => pooled_reference(&p.case, size.logical_pages, &realized, k),
        };
        let low = p.low.or(p.low_sim.map(|j| sims[j]));
        let pass = judge(sim, reference, p.relation, low, tol);
        rows.push(Row {
            group: p.group,
            case: p.label.clone(),
            gc: p.case.gc.name(),
            op_rho: p.case.alpha - 1.0,
            simulated_waf: sim,
            reference,
            reference_kind: kind,
            relation: p.relation,
            low,
            rel_diff: sim / reference - 1.0,
            tolerance: tol,
            pass,
            note: p.note.clone(),
        });
    }
    progress(total, total, "done");
    rows
}

/// Σ rᵢ·WA_FIFO(αᵢ) at the α each stream's pool really got, and the reference's label.
fn pooled_reference(case: &Case, u: u64, realized: &[f64], kind: &str) -> (f64, String) {
    // Pool i serves stream i; its write share is that of its regions.
    let classes: Vec<Class> = (0..realized.len())
        .map(|s| {
            let rs = case.regions.iter().filter(|r| r.stream == s as u32);
            let (len, w) = rs.fold((0u64, 0.0), |(l, w), r| (l + r.len, w + r.writes));
            Class {
                share: len as f64 / u as f64,
                writes: w,
            }
        })
        .collect();
    let alphas: Vec<String> = realized.iter().map(|a| format!("{a:.4}")).collect();
    (
        theory::wa_separated(&classes, realized),
        format!("{kind} (realized αᵢ {})", alphas.join(", ")),
    )
}

pub fn render(r: &ValidationReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "SSD model validation ({} size: {} logical pages, {}-page blocks, warm-up {}×U, measured {}×U, seed {})",
        r.size.name, r.size.logical_pages, r.size.pages_per_block, r.size.warm_factor, r.size.measure_factor, r.seed
    );
    let _ = writeln!(
        s,
        "{:<10} {:<48} {:<12} {:>6} {:>9} {:>9} {:>8}  {:<4} reference",
        "group", "case", "gc", "ρ", "simulated", "reference", "diff", "ok"
    );
    for row in &r.rows {
        let rel = match row.relation {
            Relation::Approx => format!("≈ ±{:.0}%", row.tolerance * 100.0),
            Relation::AtMost => "≤".to_string(),
            Relation::Between => format!("≥ {:.3} and ≤", row.low.unwrap_or(0.0)),
        };
        let _ = writeln!(
            s,
            "{:<10} {:<48} {:<12} {:>6.3} {:>9.3} {:>9.3} {:>+7.1}%  {:<4} {} [{}]{}",
            row.group,
            row.case,
            row.gc,
            row.op_rho,
            row.simulated_waf,
            row.reference,
            row.rel_diff * 100.0,
            if row.pass { "ok" } else { "FAIL" },
            row.reference_kind,
            rel,
            if row.note.is_empty() {
                String::new()
            } else {
                format!("; {}", row.note)
            }
        );
    }
    let _ = writeln!(
        s,
        "{}",
        if r.all_pass {
            "all cases pass"
        } else {
            "SOME CASES FAIL"
        }
    );
    s
}
