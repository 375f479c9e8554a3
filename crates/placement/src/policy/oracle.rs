//! The oracles (offline only): from the whole trace, each write's true death on the device,
//! then streams chosen with that knowledge. They are the bounds an online policy can approach,
//! not policies the engine can run.
//!
//! - **Death** of a write: the moment its *last* 4 KB page stops holding valid data on the
//!   device — when its LBA is written again (by any file: the filesystem reuses freed LBAs) or
//!   trimmed. It is computed by a pre-pass through the same TRIM batcher and filesystem layout
//!   as the replay (`sim::device_lifetimes`), so it follows the replay's conditions exactly:
//!   without discard, a deleted journal file's pages stay valid until their LBAs are reused;
//!   with TRIM, a freed extent dies when its batch is released, not at its `Free`.
//! - **Clock**: host pages written to the device. Writes still alive at the end of the trace
//!   never die.
//! - **`oracle`** groups by **lifetime** (death − birth): with S streams, the finite lifetimes
//!   go to S − 1 buckets evenly spaced in log₂ between the 1st and 99th percentile
//!   (page-weighted), shortest on stream 0; writes that never die on stream S − 1.
//! - **`oracle-death`** groups by **death time** within lifetime classes: the finite
//!   lifetimes form `n = ⌊(S − 1) / 2⌋` log-spaced classes (between the 1st and 99th
//!   percentile), and each class is split in two by the parity of `⌊death / W_c⌋`, where
//!   `W_c` is the class's longest lifetime: two writes of the same class whose deaths lie a
//!   class-width apart land in different streams, so a stream's open block holds writes
//!   that die together, not merely writes that live equally long. Streams `2c` and `2c + 1`
//!   take class c; writes that never die go to S − 1. (A rotation of absolute death-time bins
//!   without classes was measured too: with 8 streams it mixes short and long lifetimes in
//!   one bin and lost to both, so the classes stay.) Two writes with equal lifetimes written
//!   at different times die at different times; this bound keeps them apart, the lifetime
//!   bound does not.
//!
//! The lab reports both and measures gap closure against the stronger (lower WAF) one.

use super::Policy;
use crate::event::{Event, WriteEvent};

/// One trace write's life on the device, in host pages written. Its birth is not kept: it
/// is the sum of the pages of the writes before it (16 bytes a write instead of 24: the
/// oracles stream millions of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteLife {
    /// When its last page stopped holding its data; `u64::MAX`: alive at the end.
    pub death: u64,
    /// Pages the write put on the device.
    pub pages: u32,
    /// Of those, the pages still holding its data (the pre-pass's count; 0 once dead).
    pub live: u32,
}

/// Every write's death on the device, in trace order: one record per write, so the pre-pass
/// touches one cache line when a write loses pages.
#[derive(Clone, Debug, Default)]
pub struct Lifetimes {
    pub writes: Vec<WriteLife>,
    /// Host pages written at the end.
    pub clock: u64,
}

impl Lifetimes {
    pub fn len(&self) -> usize {
        self.writes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
    /// Every write with its birth, in write order.
    pub fn with_births(&self) -> impl Iterator<Item = (u64, &WriteLife)> + '_ {
        self.writes.iter().scan(0u64, |clock, w| {
            let birth = *clock;
            *clock += w.pages as u64;
            Some((birth, w))
        })
    }
    /// Finite lifetimes (host pages) with their page counts, in write order.
    fn finite(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.with_births()
            .filter(|(_, w)| w.death != u64::MAX)
            .map(|(birth, w)| (w.death - birth, w.pages))
    }
}

/// A histogram bin of a value: monotone, exact below 256, then 128 bins per octave (the top
/// 8 significant bits).
fn bin_of(x: u64) -> usize {
    if x < 256 {
        return x as usize;
    }
    let msb = 63 - x.leading_zeros() as usize; // ≥ 8
    256 + (msb - 8) * 128 + ((x >> (msb - 7)) as usize - 128)
}
const QUANTILE_BINS: usize = 256 + 56 * 128;

/// The page-weighted `q` quantile of each of `qs` over (value, weight) pairs: the first
/// value, in ascending order, at which the running weight reaches ⌈q × total⌉ (the largest
/// value if it never does; `None` without pairs). Two passes, no sort of the millions of
/// writes: a histogram of monotone bins finds the bin each quantile falls in, then only that
/// bin's pairs are sorted and walked.
fn quantiles<I>(pairs: impl Fn() -> I, qs: [f64; 2]) -> [Option<u64>; 2]
where
    I: Iterator<Item = (u64, u32)>,
{
    let mut weight = vec![0u64; QUANTILE_BINS];
    let mut count = vec![0u32; QUANTILE_BINS];
    let (mut total, mut max) = (0u64, None::<u64>);
    for (v, w) in pairs() {
        let b = bin_of(v);
        weight[b] += w as u64;
        count[b] += 1;
        total += w as u64;
        max = Some(max.map_or(v, |m| m.max(v)));
    }
    // Per quantile: the bin holding it and the weight to reach inside that bin.
    let find = |q: f64| -> Option<(usize, u64)> {
        let target = (q * total as f64).ceil() as u64;
        if target > total {
            return None;
        }
        let mut below = 0u64;
        for b in 0..QUANTILE_BINS {
            if count[b] > 0 && below + weight[b] >= target {
                return Some((b, target - below));
            }
            below += weight[b];
        }
        None
    };
    let found = qs.map(find);
    let mut members: [Vec<(u64, u32)>; 2] = [Vec::new(), Vec::new()];
    let wanted: Vec<usize> = found.iter().flatten().map(|f| f.0).collect();
    if !wanted.is_empty() {
        for (v, w) in pairs() {
            let b = bin_of(v);
            for (k, f) in found.iter().enumerate() {
                if f.is_some_and(|f| f.0 == b) {
                    members[k].push((v, w));
                }
            }
        }
    }
    let mut out = [None, None];
    for k in 0..2 {
        out[k] = match found[k] {
            None => max,
            Some((_, mut target)) => {
                let m = &mut members[k];
                m.sort_unstable();
                let mut at = m.last().map(|x| x.0);
                for &(v, w) in m.iter() {
                    if w as u64 >= target {
                        at = Some(v);
                        break;
                    }
                    target -= w as u64;
                }
                at
            }
        };
    }
    out
}

/// A non-decreasing step function of a lifetime (a float formula floored to a bucket in
/// `0..=top`), evaluated per write by comparing the lifetime with the first lifetime of each
/// step instead of by the formula: the formula (a `log2` per write) is evaluated only for
/// lifetimes within a hair of a step, where float rounding could decide differently.
struct Steps<F> {
    f: F,
    /// `starts[k - 1]`: the smallest lifetime the formula puts in bucket `k` or above
    /// (`u64::MAX` when none does).
    starts: Vec<u64>,
}

impl<F: Fn(u64) -> usize> Steps<F> {
    fn new(f: F, top: usize) -> Self {
        let starts = (1..=top)
            .map(|k| {
                if f(u64::MAX - 1) < k {
                    return u64::MAX;
                }
                let (mut lo, mut hi) = (0u64, u64::MAX - 1); // f(hi) ≥ k
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if f(mid) >= k {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                lo
            })
            .collect();
        Steps { f, starts }
    }

    #[inline]
    fn bucket(&self, x: u64) -> usize {
        let mut k = 0;
        for &s in &self.starts {
            // Near a step: the formula itself (a few integers, relatively 2^-30 for huge
            // lifetimes, far more than a log2 rounding error spans).
            let hair = 2 + (s >> 30);
            if x.abs_diff(s) <= hair {
                return (self.f)(x);
            }
            k += (x >= s) as usize;
        }
        k
    }
}

/// How an oracle groups writes by their known deaths (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleGrouping {
    /// `oracle`: log-spaced lifetime buckets.
    Lifetime,
    /// `oracle-death`: rotating death-time bins.
    DeathTime,
}

impl OracleGrouping {
    /// The grouping of an oracle policy name; `None` for online policies.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "oracle" => Some(OracleGrouping::Lifetime),
            "oracle-death" => Some(OracleGrouping::DeathTime),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            OracleGrouping::Lifetime => "oracle",
            OracleGrouping::DeathTime => "oracle-death",
        }
    }
}

#[derive(Clone, Debug)]
pub struct OraclePolicy {
    grouping: OracleGrouping,
    streams: Vec<u8>,
    next: usize,
}

impl OraclePolicy {
    /// Streams for every write of `l`, in trace order (the same writes must then be replayed
    /// in the same order).
    pub fn from_lifetimes(l: &Lifetimes, streams: u8, grouping: OracleGrouping) -> Self {
        assert!((2..=16).contains(&streams), "streams must be in 2..=16");
        let [p1, p99] = quantiles(|| l.finite(), [0.01, 0.99]);
        let s = match grouping {
            OracleGrouping::Lifetime => by_lifetime(l, p1.zip(p99), streams),
            OracleGrouping::DeathTime => by_death_time(l, p1.zip(p99), streams),
        };
        debug_assert!(s.iter().all(|&x| x < streams));
        OraclePolicy {
            grouping,
            streams: s,
            next: 0,
        }
    }

    /// Streams of all writes, in trace order.
    pub fn streams(&self) -> &[u8] {
        &self.streams
    }
}

fn log(x: u64) -> f64 {
    (x.max(1) as f64).log2()
}

/// `quantiles`: the 1st and 99th percentiles of the finite lifetimes.
fn by_lifetime(l: &Lifetimes, quantiles: Option<(u64, u64)>, streams: u8) -> Vec<u8> {
    let last = streams - 1;
    let (lo, hi) = quantiles.map_or((0.0, 0.0), |(a, b)| (log(a), log(b)));
    let nb = last as usize; // finite buckets
    if nb <= 1 || hi <= lo {
        return l
            .writes
            .iter()
            .map(|w| if w.death == u64::MAX { last } else { 0 })
            .collect();
    }
    let steps = Steps::new(
        |life| {
            let x = ((log(life) - lo) / (hi - lo) * nb as f64).floor();
            x.clamp(0.0, (nb - 1) as f64) as usize
        },
        nb - 1,
    );
    l.with_births()
        .map(|(birth, w)| {
            if w.death == u64::MAX {
                last
            } else {
                steps.bucket(w.death - birth) as u8
            }
        })
        .collect()
}

fn by_death_time(l: &Lifetimes, quantiles: Option<(u64, u64)>, streams: u8) -> Vec<u8> {
    let never = streams - 1;
    let classes = ((streams - 1) / 2) as usize;
    if classes == 0 {
        return l
            .writes
            .iter()
            .map(|w| (w.death == u64::MAX) as u8)
            .collect();
    }
    let (lo, hi) = quantiles.map_or((0.0, 1.0), |(a, b)| (log(a), log(b).max(log(a) + 1.0)));
    let width: Vec<u64> = (0..classes)
        .map(|c| {
            (lo + (hi - lo) * (c + 1) as f64 / classes as f64)
                .exp2()
                .max(1.0) as u64
        })
        .collect();
    let steps = Steps::new(
        |life| {
            let x = ((log(life) - lo) / (hi - lo) * classes as f64).floor();
            x.clamp(0.0, (classes - 1) as f64) as usize
        },
        classes - 1,
    );
    l.with_births()
        .map(|(birth, w)| {
            let d = w.death;
            if d == u64::MAX {
                return never;
            }
            let c = steps.bucket(d - birth);
            (2 * c + ((d / width[c]) % 2) as usize) as u8
        })
        .collect()
}

impl Policy for OraclePolicy {
    fn name(&self) -> &'static str {
        self.grouping.name()
    }
    fn place(&mut self, _w: &WriteEvent) -> u8 {
        let s = self.streams.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        s
    }
    fn observe(&mut self, _ev: &Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes born and dying at (birth, death): births must not decrease, as each write's
    /// pages are the gap to the next birth (the last write has 1 page).
    fn lifetimes(v: &[(u64, u64)]) -> Lifetimes {
        let births: Vec<u64> = v
            .iter()
            .map(|x| x.0)
            .chain([v.last().unwrap().0 + 1])
            .collect();
        let l = Lifetimes {
            writes: v
                .iter()
                .zip(births.windows(2))
                .map(|(&(_, death), b)| WriteLife {
                    death,
                    pages: (b[1] - b[0]) as u32,
                    live: 0,
                })
                .collect(),
            clock: births[births.len() - 1],
        };
        let got: Vec<u64> = l.with_births().map(|(b, _)| b).collect();
        assert_eq!(got, births[..v.len()], "births must not decrease");
        l
    }

    #[test]
    fn lifetime_buckets_are_log_spaced_and_never_dying_writes_go_last() {
        // Lifetimes 1, 2, 4, … 512 (a page each) and one that never dies, 4 streams: 3
        // finite buckets between log2 1 = 0 and log2 512 = 9 (the 1st and 99th percentiles).
        let mut v: Vec<(u64, u64)> = (0..10).map(|k| (k, k + (1u64 << k))).collect();
        v.push((10, u64::MAX));
        let o = OraclePolicy::from_lifetimes(&lifetimes(&v), 4, OracleGrouping::Lifetime);
        assert_eq!(o.streams(), &[0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3]);
    }

    #[test]
    fn death_time_classes_split_by_death_parity() {
        // 5 streams: 2 classes (streams 0–1 and 2–3), never on 4. Lifetimes 4 and 64 (log2 2
        // and 6): lo = 2, hi = 6 (pages 0, 3, 7, 20, 1: the 1st and 99th percentiles are 4
        // and 64), class widths 2^4 = 16 and 2^6 = 64. Born 0 dying 4: class 0, ⌊4/16⌋ = 0 →
        // 0; born 0 dying 64: class 1, ⌊64/64⌋ = 1 → 3; born 10 dying 26: lifetime 16 (log2
        // 4) → class 1, ⌊26/64⌋ = 0 → 2; born 30 dying 34: class 0, ⌊34/16⌋ = 2 → 0.
        let v = [(0, 4), (0, 64), (3, u64::MAX), (10, 26), (30, 34)];
        let o = OraclePolicy::from_lifetimes(&lifetimes(&v), 5, OracleGrouping::DeathTime);
        assert_eq!(o.streams(), &[0, 3, 4, 2, 0]);
        // Equal lifetimes, deaths a class width apart: together in the lifetime oracle,
        // apart in the death-time oracle.
        let v = [(0, 4), (0, 64), (16, 20)];
        let l = lifetimes(&v);
        let by_life = OraclePolicy::from_lifetimes(&l, 5, OracleGrouping::Lifetime);
        assert_eq!(by_life.streams()[0], by_life.streams()[2]);
        let by_death = OraclePolicy::from_lifetimes(&l, 5, OracleGrouping::DeathTime);
        assert_ne!(by_death.streams()[0], by_death.streams()[2]);
    }

    #[test]
    fn quantiles_are_the_sorted_walk() {
        // The walk over sorted pairs that `quantiles` replaces.
        fn walked(v: &[(u64, u32)], q: f64) -> Option<u64> {
            let mut sorted = v.to_vec();
            sorted.sort_unstable();
            let total: u64 = sorted.iter().map(|x| x.1 as u64).sum();
            let target = (q * total as f64).ceil() as u64;
            let mut acc = 0u64;
            for &(v, n) in &sorted {
                acc += n as u64;
                if acc >= target {
                    return Some(v);
                }
            }
            sorted.last().map(|x| x.0)
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [0usize, 1, 2, 3, 10, 100, 1000] {
            for _ in 0..20 {
                // Small values (one histogram bin each) and large ones (many per bin).
                let v: Vec<(u64, u32)> = (0..n)
                    .map(|_| {
                        let v = match next() % 3 {
                            0 => next() % 50,
                            1 => 1000 + next() % 64,
                            _ => next() >> (next() % 64),
                        };
                        (v, (next() % 4) as u32)
                    })
                    .collect();
                for q in [0.0, 0.01, 0.5, 0.99, 1.0] {
                    let got = quantiles(|| v.iter().copied(), [q, 0.5]);
                    assert_eq!(got[0], walked(&v, q), "n {n} q {q} {v:?}");
                    assert_eq!(got[1], walked(&v, 0.5), "n {n} q 0.5 {v:?}");
                }
            }
        }
    }

    #[test]
    fn steps_are_the_formula() {
        let (lo, hi, nb) = (3.7f64, 31.2f64, 7usize);
        let f = |life: u64| {
            let x = ((log(life) - lo) / (hi - lo) * nb as f64).floor();
            x.clamp(0.0, (nb - 1) as f64) as usize
        };
        let steps = Steps::new(f, nb - 1);
        let mut probes: Vec<u64> = (0..5000).chain([u64::MAX - 1, u64::MAX]).collect();
        for &s in &steps.starts {
            probes.extend((s.saturating_sub(100)..s.saturating_add(100)).take(200));
        }
        for k in 0..64 {
            probes.extend([(1u64 << k) - 1, 1 << k, (1 << k) + 1, (1 << k) / 3 * 2]);
        }
        for x in probes {
            assert_eq!(steps.bucket(x), f(x), "lifetime {x}");
        }
    }

    #[test]
    fn two_streams_separate_only_never_dying_writes() {
        let v = [(0, 5), (1, u64::MAX)];
        for g in [OracleGrouping::Lifetime, OracleGrouping::DeathTime] {
            let o = OraclePolicy::from_lifetimes(&lifetimes(&v), 2, g);
            assert_eq!(o.streams(), &[0, 1], "{g:?}");
        }
    }
}
