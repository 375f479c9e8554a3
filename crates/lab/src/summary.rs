//! Numbers the report prints, computed from the points of one run: medians and spreads over
//! the workload seeds, ratios, the gap the online policies close to the oracles, and the
//! seeds' published claims beside ours.

use crate::run::Point;
use std::collections::BTreeMap;

/// The engine whose trace a point replayed: WiredTiger's best-fit allocation (the engine the
/// seeds measured) or flashdoc's sweep (the co-design).
pub const WIREDTIGER: &str = "best";
pub const FLASHDOC: &str = "sweep";

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
    pub trim: String,
    pub ssd: String,
    pub policy: String,
}

impl Cell {
    pub fn of(p: &Point) -> Cell {
        Cell {
            workload: p.workload.clone(),
            cache_permille: (p.cache_share * 1000.0).round() as u64,
            leaf_kb: p.leaf_kb,
            compressor: p.compressor.clone(),
            allocation: p.allocation.clone(),
            trim: p.trim.clone(),
            ssd: p.ssd.clone(),
            policy: p.policy.clone(),
        }
    }
    pub fn with(&self, allocation: &str, policy: &str) -> Cell {
        Cell {
            allocation: allocation.into(),
            policy: policy.into(),
            ..self.clone()
        }
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
/// of `oracles_at`'s engine. All cells are the same except allocation and policy.
pub fn gap_closure(
    t: &Table,
    base: &Cell,
    ours: (&str, &str),
    dsm: (&str, &str),
    oracles_at: &str,
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

#[cfg(test)]
mod tests {
    use super::*;

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
