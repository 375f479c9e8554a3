//! Numbers the report prints, computed from the points of one run: medians and spreads over
//! the workload seeds, ratios, the gap the online policies close to the oracles, and the
//! seeds' published claims beside ours.

use crate::experiment::{Experiment, ENGINE_DIRTY_PCT, FLASH_MODE_DIRTY_PCT};
use crate::run::{EngineRun, Point};
use std::collections::BTreeMap;

/// An engine as the lab runs it: the tables' block allocation and eviction's dirty budget
/// (every other engine setting is the experiment's, the same for every engine of a point).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Engine {
    pub allocation: &'static str,
    /// `[target, trigger]`, percent of the cache.
    pub dirty_pct: [u8; 2],
}

/// WiredTiger's engine settings: best-fit allocation and its 5/20 % dirty budget (the engine
/// the seeds measured, and the lab's reference run).
pub const WIREDTIGER: Engine = Engine {
    allocation: "best",
    dirty_pct: ENGINE_DIRTY_PCT,
};

/// Flash mode's engine settings: the sweep allocation and flash mode's dirty budget.
pub const FLASH_MODE: Engine = Engine {
    allocation: "sweep",
    dirty_pct: FLASH_MODE_DIRTY_PCT,
};

/// The points with their dirty budget filled in. A point saved before the budget was kept ran
/// at its engine run's (one per allocation then; an engine run saved before budgets existed
/// ran at WiredTiger's, its serde default), or, with no engine run at hand, at the experiment's
/// `dirty_pct` of its allocation.
pub fn with_budgets(exp: &Experiment, points: &[Point], runs: &[EngineRun]) -> Vec<Point> {
    let run_budget = |p: &Point| {
        runs.iter()
            .find(|r| {
                (&r.workload, r.seed, &r.allocation, r.leaf_kb, &r.compressor)
                    == (&p.workload, p.seed, &p.allocation, p.leaf_kb, &p.compressor)
                    && r.cache_share == p.cache_share
            })
            .map(|r| r.dirty_pct)
    };
    points
        .iter()
        .map(|p| Point {
            dirty_pct: Some(p.dirty_pct.or_else(|| run_budget(p)).unwrap_or_else(|| {
                exp.dirty_pct
                    .get(&p.allocation)
                    .copied()
                    .unwrap_or(ENGINE_DIRTY_PCT)
            })),
            ..p.clone()
        })
        .collect()
}

/// A metric over the seeds: median, minimum and maximum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }
    /// Half the range, relative to the median (the spread between repeated runs).
    pub fn rel_half_range(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / 2.0 / self.median.abs()
        }
    }
    pub fn fmt(&self, digits: usize) -> String {
        if self.n > 1 {
            format!(
                "{:.d$} [{:.d$}–{:.d$}]",
                self.median,
                self.min,
                self.max,
                d = digits
            )
        } else {
            format!("{:.d$}", self.median, d = digits)
        }
    }
}

/// What identifies a point apart from its seed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    pub workload: String,
    pub cache_permille: u64,
    pub leaf_kb: u32,
    pub compressor: String,
    pub allocation: String,
    /// Eviction's dirty budget, `[target, trigger]`.
    pub dirty_pct: [u8; 2],
    pub trim: String,
    pub ssd: String,
    pub policy: String,
}

impl Cell {
    /// A point's cell; a point without its dirty budget ran at WiredTiger's (fill it in first
    /// with [`with_budgets`] when the experiment gave its allocation another).
    pub fn of(p: &Point) -> Cell {
        Cell {
            workload: p.workload.clone(),
            cache_permille: (p.cache_share * 1000.0).round() as u64,
            leaf_kb: p.leaf_kb,
            compressor: p.compressor.clone(),
            allocation: p.allocation.clone(),
            dirty_pct: p.dirty_pct.unwrap_or(ENGINE_DIRTY_PCT),
            trim: p.trim.clone(),
            ssd: p.ssd.clone(),
            policy: p.policy.clone(),
        }
    }
    /// The same condition on `engine` with `policy`.
    pub fn with(&self, engine: Engine, policy: &str) -> Cell {
        Cell {
            allocation: engine.allocation.into(),
            dirty_pct: engine.dirty_pct,
            policy: policy.into(),
            ..self.clone()
        }
    }
    /// The same condition and engine with `policy`.
    pub fn with_policy(&self, policy: &str) -> Cell {
        Cell {
            policy: policy.into(),
            ..self.clone()
        }
    }
    /// Whether this cell ran on `engine`.
    pub fn on(&self, engine: Engine) -> bool {
        self.allocation == engine.allocation && self.dirty_pct == engine.dirty_pct
    }
}

/// Every point grouped over its seeds.
pub struct Table<'a> {
    pub cells: BTreeMap<Cell, Vec<&'a Point>>,
}

impl<'a> Table<'a> {
    pub fn new(points: &'a [Point]) -> Self {
        let mut cells: BTreeMap<Cell, Vec<&Point>> = BTreeMap::new();
        for p in points {
            cells.entry(Cell::of(p)).or_default().push(p);
        }
        Table { cells }
    }

    pub fn spread(&self, c: &Cell, metric: impl Fn(&Point) -> f64) -> Option<Spread> {
        let ps = self.cells.get(c)?;
        Spread::of(ps.iter().map(|p| metric(p)).collect())
    }

    /// [`Table::spread`] over the points of `seeds` only.
    pub fn spread_over(
        &self,
        c: &Cell,
        seeds: &[u64],
        metric: impl Fn(&Point) -> f64,
    ) -> Option<Spread> {
        let ps = self.cells.get(c)?;
        Spread::of(
            ps.iter()
                .filter(|p| seeds.contains(&p.seed))
                .map(|p| metric(p))
                .collect(),
        )
    }

    /// The metric of `c` over that of `base`, seed by seed, then summarized (ratios of
    /// paired runs: both replayed the same engine trace of the same seed).
    pub fn paired_ratio(
        &self,
        c: &Cell,
        base: &Cell,
        metric: impl Fn(&Point) -> f64,
    ) -> Option<Spread> {
        let a = self.cells.get(c)?;
        let b = self.cells.get(base)?;
        let by_seed: BTreeMap<u64, f64> = b.iter().map(|p| (p.seed, metric(p))).collect();
        Spread::of(
            a.iter()
                .filter_map(|p| by_seed.get(&p.seed).map(|&d| metric(p) / d.max(1e-12)))
                .collect(),
        )
    }
}

pub fn flash_per_op(p: &Point) -> f64 {
    p.device.flash_writes_per_op
}
pub fn waf(p: &Point) -> f64 {
    p.device.waf
}
pub fn modeled(p: &Point) -> f64 {
    p.device.modeled_ops_s
}

/// How much of the gap between `dsm` and the stronger oracle a policy closes, seed by seed:
/// (dsm − ours) / (dsm − oracle), on one metric.
#[derive(Clone, Debug)]
pub struct GapClosure {
    /// dsm's, the oracle's and ours, medians.
    pub dsm: f64,
    pub oracle: f64,
    pub oracle_name: String,
    pub ours: f64,
    pub closed: Spread,
}

/// The gap closure of `ours` against dsm and the stronger oracle (lower median of `metric`)
/// of `oracles_at`'s engine. All cells are the same except engine and policy.
pub fn gap_closure(
    t: &Table,
    base: &Cell,
    ours: (Engine, &str),
    dsm: (Engine, &str),
    oracles_at: Engine,
    metric: impl Fn(&Point) -> f64 + Copy,
) -> Option<GapClosure> {
    let dsm_c = base.with(dsm.0, dsm.1);
    let ours_c = base.with(ours.0, ours.1);
    let (oracle_name, oracle_c) = ["oracle", "oracle-death"]
        .iter()
        .filter_map(|o| {
            let c = base.with(oracles_at, o);
            t.spread(&c, metric).map(|s| (s.median, o.to_string(), c))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n, c)| (n, c))?;
    let d = t.cells.get(&dsm_c)?;
    let o = t.cells.get(&oracle_c)?;
    let u = t.cells.get(&ours_c)?;
    let seed_of =
        |v: &Vec<&Point>| -> BTreeMap<u64, f64> { v.iter().map(|p| (p.seed, metric(p))).collect() };
    let (ds, os, us) = (seed_of(d), seed_of(o), seed_of(u));
    let closed: Vec<f64> = ds
        .iter()
        .filter_map(|(s, &dv)| {
            let (ov, uv) = (os.get(s)?, us.get(s)?);
            let gap = dv - ov;
            (gap.abs() > 1e-9).then(|| (dv - uv) / gap)
        })
        .collect();
    Some(GapClosure {
        dsm: t.spread(&dsm_c, metric)?.median,
        oracle: t.spread(&oracle_c, metric)?.median,
        oracle_name,
        ours: t.spread(&ours_c, metric)?.median,
        closed: Spread::of(closed)?,
    })
}

/// The decomposition's factors, bit `i` of a cell's mask switching factor `i` on: the dirty
/// budget (WiredTiger's 5/20 → flash mode's), the allocator (best fit → sweep) and the policy
/// (dsm → the shipped one).
pub const FACTORS: [&str; 3] = ["budget", "allocator", "policy"];

/// Exact Shapley values of three factors: `v(mask)` is the outcome with the factors of `mask`
/// switched on. Each factor gets its marginal contribution averaged over the 6 orders in which
/// the three can be switched on, so an interaction is shared between the factors in it, and the
/// values sum to `v(0b111) − v(0)`.
pub fn shapley3(v: impl Fn(usize) -> f64) -> [f64; 3] {
    const ORDERS: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let mut phi = [0.0; 3];
    for order in ORDERS {
        let mut mask = 0;
        for i in order {
            let before = v(mask);
            mask |= 1 << i;
            phi[i] += (v(mask) - before) / ORDERS.len() as f64;
        }
    }
    phi
}

/// The change in log flash writes per operation from dsm on WiredTiger's engine to the
/// shipped policy on flash mode's, split into [`FACTORS`] by [`shapley3`].
#[derive(Clone, Debug, PartialEq)]
pub struct Decomposition {
    /// Seeds present in all 8 cells (each cell's value is the mean of their logs).
    pub seeds: usize,
    /// Flash writes per operation at the start and the end (geometric means over the seeds).
    pub from: f64,
    pub to: f64,
    /// ln(to ÷ from), and each factor's Shapley share of it (they sum to it).
    pub total: f64,
    pub shares: [f64; 3],
}

/// The 2×2×2 cell of `mask` (bits: [`FACTORS`]) in `base`'s condition.
pub fn factor_cell(base: &Cell, mask: usize, shipped: &str) -> Cell {
    let pick = |bit: usize, on: Engine| if mask & bit != 0 { on } else { WIREDTIGER };
    let engine = Engine {
        dirty_pct: pick(1, FLASH_MODE).dirty_pct,
        allocation: pick(2, FLASH_MODE).allocation,
    };
    base.with(engine, if mask & 4 != 0 { shipped } else { "dsm" })
}

/// The decomposition in `base`'s condition, over the seeds every one of the 8 cells has; `None`
/// when a cell is missing.
pub fn decompose(t: &Table, base: &Cell, shipped: &str) -> Option<Decomposition> {
    let logs: Vec<BTreeMap<u64, f64>> = (0..8)
        .map(|m| {
            let ps = t.cells.get(&factor_cell(base, m, shipped))?;
            Some(
                ps.iter()
                    .map(|p| (p.seed, p.device.flash_writes_per_op.ln()))
                    .collect(),
            )
        })
        .collect::<Option<_>>()?;
    let seeds: Vec<u64> = logs[0]
        .keys()
        .filter(|s| logs.iter().all(|m| m.get(s).is_some_and(|v| v.is_finite())))
        .copied()
        .collect();
    if seeds.is_empty() {
        return None;
    }
    let v: Vec<f64> = logs
        .iter()
        .map(|m| seeds.iter().map(|s| m[s]).sum::<f64>() / seeds.len() as f64)
        .collect();
    Some(Decomposition {
        seeds: seeds.len(),
        from: v[0].exp(),
        to: v[7].exp(),
        total: v[7] - v[0],
        shares: shapley3(|m| v[m] - v[0]),
    })
}

/// Points made by hand, for the report's tests.
#[cfg(test)]
pub(crate) mod test_points {
    use super::*;

    /// A point of workload `w` in one condition, with the figures the report reads.
    pub(crate) fn point(
        allocation: &str,
        dirty: [u8; 2],
        policy: &str,
        seed: u64,
        flash: f64,
    ) -> Point {
        let mut p: Point = serde_json::from_value(serde_json::json!({
            "experiment": "t", "mode": "trace-replay", "workload": "w", "seed": seed,
            "cache_share": 0.2, "leaf_kb": 32, "compressor": "none", "allocation": allocation,
            "policy": policy, "trim": "off", "ssd": "d", "device_fill": 0.1, "host_ops_s": 0.0,
            "host_p50_us": 0.0, "host_p99_us": 0.0, "load_docs_s": 0.0, "db_mb": 0.0,
            "device": {"policy": policy, "trim": {"batch": null}, "ssd": {"streams": 8, "op": 0.07, "gc": "greedy"},
                "waf": 1.0, "flash_write_pages": 0, "flash_writes_per_op": flash, "gc_copies": 0,
                "erases": 0, "erase_min": 0, "erase_mean": 0.0, "erase_max": 0, "host_write_pages": 0,
                "device_s": 1.0, "device_mb_s": 0.0, "write_p99_us": 0.0, "read_p99_us": 0.0,
                "modeled_ops_s": 1.0, "logical_gib": 0.0, "trimmed_bytes": 0, "trim_commands": 0,
                "trim_device_s": 0.0, "replay_wall_s": 0.0}
        }))
        .expect("a point");
        p.dirty_pct = Some(dirty);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::test_points::point;
    use super::*;

    /// Values built from their interaction terms (v(S) = Σ m(T) over T ⊆ S): budget 1,
    /// allocator 2, policy 3, a budget × allocator interaction of 3 and a three-way one of 6.
    /// Each factor's Shapley value is Σ m(T) ÷ |T| over the terms it is in: budget 1 + 3/2 +
    /// 6/3 = 4.5, allocator 2 + 3/2 + 6/3 = 5.5, policy 3 + 6/3 = 5; they sum to v(all) = 15.
    #[test]
    fn shapley_shares_interactions_between_the_factors_in_them() {
        let v = [0.0, 1.0, 2.0, 6.0, 3.0, 4.0, 5.0, 15.0];
        let phi = shapley3(|m| v[m]);
        for (got, want) in phi.iter().zip([4.5, 5.5, 5.0]) {
            assert!((got - want).abs() < 1e-12, "{phi:?}");
        }
        assert!((phi.iter().sum::<f64>() - 15.0).abs() < 1e-12);
        // Without interactions each factor gets exactly its own effect.
        let additive = |m: usize| {
            (0..3)
                .filter(|i| m & (1 << i) != 0)
                .map(|i| (i + 1) as f64)
                .sum()
        };
        for (got, want) in shapley3(additive).iter().zip([1.0, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-12);
        }
    }

    /// The 8 cells' logs are the hand example's values: the decomposition recovers its shares.
    #[test]
    fn the_decomposition_splits_the_log_change_by_cell() {
        let v = [0.0, 1.0, 2.0, 6.0, 3.0, 4.0, 5.0, 15.0];
        let mut points = Vec::new();
        for (m, &value) in v.iter().enumerate() {
            let dirty = if m & 1 != 0 {
                FLASH_MODE_DIRTY_PCT
            } else {
                ENGINE_DIRTY_PCT
            };
            let alloc = if m & 2 != 0 { "sweep" } else { "best" };
            let policy = if m & 4 != 0 { "filelog" } else { "dsm" };
            // Two seeds whose logs average to the value: the mean of logs is what is split.
            for (seed, d) in [(2, -0.5f64), (3, 0.5)] {
                points.push(point(alloc, dirty, policy, seed, (value + d).exp()));
            }
        }
        let t = Table::new(&points);
        let base = Cell::of(&points[0]);
        let d = decompose(&t, &base, "filelog").expect("all 8 cells");
        assert_eq!(d.seeds, 2);
        assert!((d.total - 15.0).abs() < 1e-9);
        for (got, want) in d.shares.iter().zip([4.5, 5.5, 5.0]) {
            assert!((got - want).abs() < 1e-9, "{:?}", d.shares);
        }
        assert!((d.from - 1.0).abs() < 1e-9 && (d.to - 15f64.exp()).abs() < 1e-3);
        // A missing cell: no decomposition.
        let without: Vec<Point> = points
            .into_iter()
            .filter(|p| p.allocation == "best")
            .collect();
        assert!(decompose(&Table::new(&without), &base, "filelog").is_none());
    }

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert!((s.rel_half_range() - 0.5).abs() < 1e-12);
        assert_eq!(Spread::of(vec![1.0, 3.0]).unwrap().median, 2.0);
        assert!(Spread::of(vec![]).is_none());
        assert_eq!(s.fmt(1), "2.0 [1.0–3.0]");
    }
}
