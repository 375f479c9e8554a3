//! Where a chunk splits: the split-point policies (`split.policy`).
//!
//! | policy | trigger | points |
//! |---|---|---|
//! | `default` | MongoDB 3.6's size trigger (router, `autosplit`) | `splitVector`: every k-th key, k = max chunk size / (2 × average document size) |
//! | `hass-static` (`t_s`) | same | the default points, each moved toward the chunk's access mean by the static tuning interval TI_s = range × t_s (seed 004, Algorithm 1, Eq. 1) |
//! | `hass-dynamic` (`t_s`, `t_d`) | same | each moved toward the mean by TI_s × t_d^n, n = other points between it and the mean (Algorithm 2, Eq. 2) |
//! | `oracle` | same | the true access-weighted quantiles of the chunk (as many points as the default), from exact per-key access counts: a reference, not a production policy |
//! | `load` | CockroachDB's and TiKV's: their size trigger (here 3.6's, with the default points), plus the load trigger: the chunk's requests per second above a threshold for a sustained time | on a load trigger, one point: the reservoir-sampled key that best balances requests left and right (|L−R|/(L+R) < 0.25) |
//!
//! ## How HASS is read here (a documented interpretation)
//! The prose and Eq. 2 say every split point moves *toward* the access mean of its chunk;
//! the extracted pseudo-code of Algorithm 2 adds the step to points above the mean and
//! subtracts it from points below (moving them *away*), and uses an undefined `t` (read as
//! `t_s`). Moving away would enlarge the chunk that holds the hot spot, the opposite of the
//! paper's stated goal ("each split point is adjusted to reduce the size of the chunk
//! containing the hotspot") and of Algorithm 1, so the signs of the prose are followed.
//! `range` is the chunk's max key minus its min key among its documents (the paper's
//! "chunk range"), in the numeric projection of `shardkey`. Clamping: a point never moves past
//! the mean, nor past its nearer neighbour's tuned position (processing from the mean
//! outward), nor out of the chunk's key range; points that end up equal are dropped. Points
//! exactly at the mean stay and do not count in n. A tuned point is then snapped to the first
//! key of the chunk whose projection is ≥ it: a boundary there partitions the documents
//! exactly as the numeric point does. A point that snaps to the chunk's first key is dropped
//! (it would leave an empty chunk). Without any recorded access a chunk splits at the default
//! points.

use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};

#[derive(Clone, Debug, PartialEq)]
pub enum SplitPolicy {
    Default,
    HassStatic { ts: f64 },
    HassDynamic { ts: f64, td: f64 },
    Oracle,
    Load(LoadConfig),
}

/// The load trigger's knobs (CockroachDB: 2500 QPS, 10 s; TiKV: 3000 QPS, 10 × 1 s).
#[derive(Clone, Debug, PartialEq)]
pub struct LoadConfig {
    pub qps_threshold: f64,
    /// Consecutive 1-second windows above the threshold before a split.
    pub sustain_secs: u32,
    pub samples: usize,
    /// Requests a sample must have seen on its two sides before it can be chosen.
    pub min_count: u64,
    pub max_imbalance: f64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            qps_threshold: 2500.0,
            sustain_secs: 10,
            samples: 20,
            min_count: 100,
            max_imbalance: 0.25,
        }
    }
}

pub const DEFAULT_TS: f64 = 0.1;
pub const DEFAULT_TD: f64 = 0.5;

impl SplitPolicy {
    pub fn name(&self) -> &'static str {
        match self {
            SplitPolicy::Default => "default",
            SplitPolicy::HassStatic { .. } => "hass-static",
            SplitPolicy::HassDynamic { .. } => "hass-dynamic",
            SplitPolicy::Oracle => "oracle",
            SplitPolicy::Load(_) => "load",
        }
    }

    /// From the `split` settings document `{_id: "split", policy, ts, td, qps, sustainSecs}`.
    pub fn from_doc(d: &Document) -> DocResult<SplitPolicy> {
        let num = |k: &str, default: f64| -> DocResult<f64> {
            match d.get(k) {
                None => Ok(default),
                Some(v) => query::compare::Num::of(v)
                    .map(|n| n.as_f64())
                    .ok_or_else(|| DocError::type_mismatch(format!("split.{k} must be a number"))),
            }
        };
        let ratio = |k: &str, default: f64| -> DocResult<f64> {
            let v = num(k, default)?;
            if !(0.0..=1.0).contains(&v) {
                return Err(DocError::bad_value(format!(
                    "split.{k} must be between 0 and 1, not {v}"
                )));
            }
            Ok(v)
        };
        let policy = d.get_str("policy").unwrap_or("default");
        for k in d.keys() {
            if !matches!(
                k.as_str(),
                "_id" | "policy" | "ts" | "td" | "qps" | "sustainSecs"
            ) {
                return Err(DocError::bad_value(format!("unknown split setting '{k}'")));
            }
        }
        Ok(match policy {
            "default" => SplitPolicy::Default,
            "hass-static" => SplitPolicy::HassStatic {
                ts: ratio("ts", DEFAULT_TS)?,
            },
            "hass-dynamic" => SplitPolicy::HassDynamic {
                ts: ratio("ts", DEFAULT_TS)?,
                td: ratio("td", DEFAULT_TD)?,
            },
            "oracle" => SplitPolicy::Oracle,
            "load" => {
                let qps = num("qps", LoadConfig::default().qps_threshold)?;
                let sustain = num("sustainSecs", 10.0)?;
                if qps <= 0.0 || !(1.0..=3600.0).contains(&sustain) {
                    return Err(DocError::bad_value(
                        "split.qps must be > 0 and split.sustainSecs 1..3600",
                    ));
                }
                SplitPolicy::Load(LoadConfig {
                    qps_threshold: qps,
                    sustain_secs: sustain as u32,
                    ..LoadConfig::default()
                })
            }
            other => {
                return Err(DocError::bad_value(format!(
                "unknown split.policy '{other}' (default, hass-static, hass-dynamic, load, oracle)"
            )))
            }
        })
    }

    pub fn to_doc(&self) -> Document {
        let mut d = doc! {"_id": "split", "policy": self.name()};
        match self {
            SplitPolicy::HassStatic { ts } => {
                d.insert("ts", *ts);
            }
            SplitPolicy::HassDynamic { ts, td } => {
                d.insert("ts", *ts);
                d.insert("td", *td);
            }
            SplitPolicy::Load(c) => {
                d.insert("qps", c.qps_threshold);
                d.insert("sustainSecs", c.sustain_secs as i64);
            }
            SplitPolicy::Default | SplitPolicy::Oracle => {}
        }
        d
    }
}

/// HASS static tuning (Algorithm 1 with clamping): every point moves toward `mean` by
/// `(hi − lo) × ts`.
pub fn hass_static(points: &[f64], lo: f64, hi: f64, mean: f64, ts: f64) -> Vec<f64> {
    tune(points, lo, hi, mean, (hi - lo) * ts, 1.0)
}

/// HASS dynamic tuning (Algorithm 2 as the prose describes it, with clamping): the point
/// with n other points between it and `mean` moves toward it by `(hi − lo) × ts × td^n`.
pub fn hass_dynamic(points: &[f64], lo: f64, hi: f64, mean: f64, ts: f64, td: f64) -> Vec<f64> {
    tune(points, lo, hi, mean, (hi - lo) * ts, td)
}

fn tune(points: &[f64], lo: f64, hi: f64, mean: f64, step: f64, decay: f64) -> Vec<f64> {
    debug_assert!(lo <= hi && step >= 0.0);
    let mut below: Vec<f64> = points.iter().copied().filter(|&p| p < mean).collect();
    let mut above: Vec<f64> = points.iter().copied().filter(|&p| p > mean).collect();
    let mut out: Vec<f64> = points.iter().copied().filter(|&p| p == mean).collect();
    // Nearest to the mean first.
    below.sort_by(|a, b| b.total_cmp(a));
    above.sort_by(|a, b| a.total_cmp(b));
    let mut limit = mean;
    let mut s = step;
    for p in below {
        let moved = (p + s).min(limit).clamp(lo, hi);
        out.push(moved);
        limit = moved;
        s *= decay;
    }
    let mut limit = mean;
    let mut s = step;
    for p in above {
        let moved = (p - s).max(limit).clamp(lo, hi);
        out.push(moved);
        limit = moved;
        s *= decay;
    }
    out.sort_by(|a, b| a.total_cmp(b));
    out.dedup();
    out
}

/// Snaps numeric points onto keys: for each, the index of the first key whose projection is
/// ≥ it (`projected` is non-decreasing). Points past the last key or at the first key are
/// dropped; the result is strictly increasing.
pub fn snap(points: &[f64], projected: &[f64]) -> Vec<usize> {
    debug_assert!(projected.windows(2).all(|w| w[0] <= w[1]));
    let mut out: Vec<usize> = points
        .iter()
        .map(|&v| projected.partition_point(|&p| p < v))
        .filter(|&i| i > 0 && i < projected.len())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// `splitVector`'s choice: every `every`-th key index (1-based positions every, 2·every, …),
/// skipping a point whose key equals the previous point's (a key too frequent to split on).
pub fn every_kth(keys_enc: &[Vec<u8>], every: usize, max_points: usize) -> Vec<usize> {
    assert!(every > 0);
    let mut out: Vec<usize> = Vec::new();
    let mut i = every;
    while i < keys_enc.len() && out.len() < max_points {
        // Move to the first occurrence of this key value past the previous point.
        let mut j = i;
        while j > 0 && keys_enc[j - 1] == keys_enc[j] {
            j -= 1;
        }
        if j > 0 && out.last().is_none_or(|&l| keys_enc[l] != keys_enc[j]) {
            out.push(j);
        }
        i += every;
    }
    out
}

/// The access-weighted quantile points: indices of the keys where the cumulative weight first
/// reaches j/(n+1) of the total, j = 1..n (the oracle; n = 1 is the weighted median).
pub fn weighted_quantiles(weights: &[u64], n: usize) -> Vec<usize> {
    let total: u64 = weights.iter().sum();
    if total == 0 || n == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut acc = 0u64;
    let mut j = 1;
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        while j <= n && acc as f64 >= total as f64 * j as f64 / (n + 1) as f64 {
            // The boundary goes after key i: the next key starts the right piece.
            if i + 1 < weights.len() && out.last() != Some(&(i + 1)) {
                out.push(i + 1);
            }
            j += 1;
        }
    }
    out
}

/// CockroachDB's load-based split finder over one chunk: a reservoir of sampled request keys,
/// each counting the requests that fell left and right of it.
#[derive(Clone, Debug, Default)]
pub struct LoadFinder {
    samples: Vec<Sample>,
    seen: u64,
}

#[derive(Clone, Debug)]
struct Sample {
    pos: Vec<u8>,
    key: Document,
    left: u64,
    right: u64,
}

impl LoadFinder {
    /// Records one request at `pos` (routing key `key`); `r` is a uniform random number.
    pub fn record(&mut self, pos: &[u8], key: &Document, capacity: usize, r: u64) {
        self.seen += 1;
        for s in &mut self.samples {
            if pos < s.pos.as_slice() {
                s.left += 1;
            } else {
                s.right += 1;
            }
        }
        let sample = || Sample {
            pos: pos.to_vec(),
            key: key.clone(),
            left: 0,
            right: 0,
        };
        if self.samples.len() < capacity {
            self.samples.push(sample());
        } else {
            let slot = (r % self.seen) as usize;
            if slot < capacity {
                self.samples[slot] = sample();
            }
        }
    }

    /// The best split key: the sample with at least `min_count` requests on its sides whose
    /// imbalance |L−R|/(L+R) is smallest and below `max_imbalance`.
    pub fn best(&self, min_count: u64, max_imbalance: f64) -> Option<Document> {
        self.samples
            .iter()
            .filter(|s| s.left + s.right >= min_count && s.left > 0)
            .map(|s| {
                let imb = (s.left as f64 - s.right as f64).abs() / (s.left + s.right) as f64;
                (imb, s)
            })
            .filter(|(imb, _)| *imb < max_imbalance)
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, s)| s.key.clone())
    }
}

/// The `splitKeys` reply of `splitVector`: routing keys as documents.
pub fn split_keys_bson(keys: &[Document]) -> Bson {
    Bson::Array(keys.iter().cloned().map(Bson::Document).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's worked example: keys 1…100 000 inserted in order, default split points
    /// 20 000 / 40 000 / 60 000 / 80 000, t_s = 0.1, t_d = 0.5; chunk range 100 000 − 1.
    const POINTS: [f64; 4] = [20_000.0, 40_000.0, 60_000.0, 80_000.0];
    const LO: f64 = 1.0;
    const HI: f64 = 100_000.0;

    fn keys() -> Vec<f64> {
        (1..=100_000).map(|k| k as f64).collect()
    }
    /// The snapped points as key values (key i has value i + 1).
    fn as_keys(points: &[f64]) -> Vec<u64> {
        snap(points, &keys())
            .iter()
            .map(|&i| i as u64 + 1)
            .collect()
    }

    #[test]
    fn static_example_mean_30000() {
        // TI_s = 99 999 × 0.1 = 9 999.9: 20 000 is below the mean and moves up; the others
        // move down.
        let t = hass_static(&POINTS, LO, HI, 30_000.0, 0.1);
        let want = [29_999.9, 30_000.1, 50_000.1, 70_000.1];
        for (a, b) in t.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{t:?}");
        }
        assert_eq!(as_keys(&t), vec![30_000, 30_001, 50_001, 70_001]);
    }

    #[test]
    fn dynamic_example_mean_30000() {
        // n = 0 for 20 000 and 40 000 (no point between them and the mean): step 9 999.9;
        // 60 000 has 40 000 between: 4 999.95; 80 000 has two: 2 499.975.
        let t = hass_dynamic(&POINTS, LO, HI, 30_000.0, 0.1, 0.5);
        let want = [29_999.9, 30_000.1, 55_000.05, 77_500.025];
        for (a, b) in t.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{t:?}");
        }
        assert_eq!(as_keys(&t), vec![30_000, 30_001, 55_001, 77_501]);
    }

    #[test]
    fn a_point_never_crosses_the_mean() {
        // Mean 21 000: 20 000 + 9 999.9 would pass it; it stops at the mean.
        let t = hass_static(&POINTS, LO, HI, 21_000.0, 0.1);
        assert_eq!(t[0], 21_000.0);
        assert_eq!(as_keys(&t), vec![21_000, 30_001, 50_001, 70_001]);
        let d = hass_dynamic(&POINTS, LO, HI, 21_000.0, 0.1, 0.5);
        assert_eq!(as_keys(&d), vec![21_000, 30_001, 55_001, 77_501]);
    }

    #[test]
    fn a_point_never_crosses_its_neighbour_and_duplicates_go() {
        // 20 000 stops at the mean (21 000); 15 000 + 9 999.9 would pass it and stops there
        // too: the duplicate is dropped.
        let t = hass_static(&[15_000.0, 20_000.0, 60_000.0], LO, HI, 21_000.0, 0.1);
        assert_eq!(t, vec![21_000.0, 50_000.1]);
        // Dynamic: 15 000 moves 4 999.95 to 19 999.95, under 20 000's tuned 21 000.
        let d = hass_dynamic(&[15_000.0, 20_000.0, 60_000.0], LO, HI, 21_000.0, 0.1, 0.5);
        assert_eq!(as_keys(&d), vec![20_000, 21_000, 50_001]);
    }

    #[test]
    fn points_stay_inside_the_chunk() {
        // All accesses on the first key: the mean is the chunk's low end. 5 000 − 9 999.9
        // would leave the chunk; it stops at the mean, which snaps to the first key and is
        // dropped (it would leave an empty chunk).
        let t = hass_static(&[5_000.0, 60_000.0], LO, HI, 1.0, 0.1);
        assert_eq!(t, vec![1.0, 50_000.1]);
        assert_eq!(as_keys(&t), vec![50_001]);
        // A point at the mean stays and does not count in n.
        let d = hass_dynamic(&[30_000.0, 40_000.0, 60_000.0], LO, HI, 30_000.0, 0.1, 0.5);
        assert_eq!(as_keys(&d), vec![30_000, 30_001, 55_001]);
    }

    #[test]
    fn without_a_step_points_stay() {
        assert_eq!(hass_static(&POINTS, LO, HI, 50_000.0, 0.0), POINTS.to_vec());
    }

    #[test]
    fn split_vector_every_kth_skips_repeated_keys() {
        let k = |v: &[u8]| v.iter().map(|b| vec![*b]).collect::<Vec<_>>();
        assert_eq!(every_kth(&k(&[1, 2, 3, 4, 5, 6, 7]), 2, 10), vec![2, 4, 6]);
        // Key 3 repeats: the point moves to its first occurrence; 3 is not taken twice.
        assert_eq!(every_kth(&k(&[1, 2, 3, 3, 3, 3, 4]), 2, 10), vec![2, 6]);
        assert_eq!(every_kth(&k(&[1, 2, 3, 4, 5, 6, 7]), 2, 1), vec![2]);
    }

    #[test]
    fn oracle_takes_weighted_quantiles() {
        // Weight concentrated on keys 6..=9: the median lands among them.
        let w = [1, 1, 1, 1, 1, 1, 10, 10, 10, 10];
        assert_eq!(weighted_quantiles(&w, 1), vec![8]);
        assert_eq!(weighted_quantiles(&[1; 10], 1), vec![5]);
        assert_eq!(weighted_quantiles(&[1; 9], 2), vec![3, 6]);
        assert!(weighted_quantiles(&[0; 4], 1).is_empty());
    }

    #[test]
    fn load_finder_balances_requests() {
        let mut f = LoadFinder::default();
        let mut rng = 12345u64;
        for i in 0..10_000u64 {
            // Requests on keys 0..100, with 90..100 nine times as hot.
            let k = if i % 2 == 0 { 90 + i % 10 } else { i % 90 };
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            f.record(&[k as u8], &doc! {"k": k as i64}, 20, rng >> 11);
        }
        let best = f.best(100, 0.25).unwrap();
        let k = best.get_i64("k").unwrap();
        assert!((80..=95).contains(&k), "{k}");
    }

    #[test]
    fn settings_documents() {
        let p = SplitPolicy::from_doc(&doc! {"_id": "split", "policy": "hass-dynamic", "td": 0.25})
            .unwrap();
        assert_eq!(p, SplitPolicy::HassDynamic { ts: 0.1, td: 0.25 });
        assert_eq!(SplitPolicy::from_doc(&p.to_doc()).unwrap(), p);
        assert!(SplitPolicy::from_doc(&doc! {"policy": "hass-static", "ts": 2}).is_err());
        assert!(SplitPolicy::from_doc(&doc! {"policy": "nope"}).is_err());
        assert!(SplitPolicy::from_doc(&doc! {"policy": "default", "bogus": 1}).is_err());
    }
}
