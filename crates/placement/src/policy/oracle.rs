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

/// Every write's birth and death on the device, in host pages written.
#[derive(Clone, Debug, Default)]
pub struct Lifetimes {
    pub birth: Vec<u64>,
    /// `u64::MAX`: still alive at the end of the trace.
    pub death: Vec<u64>,
    /// Pages the write put on the device.
    pub pages: Vec<u32>,
    /// Host pages written at the end.
    pub clock: u64,
}

impl Lifetimes {
    pub fn len(&self) -> usize {
        self.birth.len()
    }
    pub fn is_empty(&self) -> bool {
        self.birth.is_empty()
    }
    /// Finite lifetimes (host pages) with their page counts, in write order.
    fn finite(&self) -> Vec<(u64, u32)> {
        (0..self.len())
            .filter(|&i| self.death[i] != u64::MAX)
            .map(|i| (self.death[i] - self.birth[i], self.pages[i]))
            .collect()
    }
}

/// The page-weighted `q` quantile of (value, weight) pairs: the first value, in ascending
/// order, at which the running weight reaches ⌈q × total⌉ (the largest value if it never
/// does). Found by selection, O(n) on average instead of a sort: the oracles need two
/// quantiles of millions of writes. Reorders `v`.
fn quantile(v: &mut [(u64, u32)], q: f64) -> Option<u64> {
    let total: u64 = v.iter().map(|x| x.1 as u64).sum();
    let mut target = (q * total as f64).ceil() as u64;
    if target > total {
        return v.iter().map(|x| x.0).max();
    }
    let mut s = v;
    // Invariant: the answer is the first element of `s` in ascending order at which the
    // running weight over `s` reaches `target`.
    loop {
        match s.len() {
            0 => return None,
            1 => return Some(s[0].0),
            n => {
                let (left, pivot, right) = s.select_nth_unstable(n / 2);
                let below: u64 = left.iter().map(|x| x.1 as u64).sum();
                if below >= target {
                    s = left;
                } else if below + pivot.1 as u64 >= target {
                    return Some(pivot.0);
                } else {
                    target -= below + pivot.1 as u64;
                    s = right;
                }
            }
        }
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
        let mut finite = l.finite();
        let s = match grouping {
            OracleGrouping::Lifetime => by_lifetime(l, &mut finite, streams),
            OracleGrouping::DeathTime => by_death_time(l, &mut finite, streams),
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

fn by_lifetime(l: &Lifetimes, finite: &mut [(u64, u32)], streams: u8) -> Vec<u8> {
    let last = streams - 1;
    let log = |x: u64| (x.max(1) as f64).log2();
    let (lo, hi) = match (quantile(finite, 0.01), quantile(finite, 0.99)) {
        (Some(a), Some(b)) => (log(a), log(b)),
        _ => (0.0, 0.0),
    };
    let nb = last as usize; // finite buckets
    (0..l.len())
        .map(|i| {
            if l.death[i] == u64::MAX {
                return last;
            }
            if nb <= 1 || hi <= lo {
                return 0;
            }
            let x = ((log(l.death[i] - l.birth[i]) - lo) / (hi - lo) * nb as f64).floor();
            x.clamp(0.0, (nb - 1) as f64) as u8
        })
        .collect()
}

fn by_death_time(l: &Lifetimes, finite: &mut [(u64, u32)], streams: u8) -> Vec<u8> {
    let never = streams - 1;
    let classes = ((streams - 1) / 2) as usize;
    if classes == 0 {
        return l.death.iter().map(|&d| (d == u64::MAX) as u8).collect();
    }
    let log = |x: u64| (x.max(1) as f64).log2();
    let (lo, hi) = match (quantile(finite, 0.01), quantile(finite, 0.99)) {
        (Some(a), Some(b)) => (log(a), log(b).max(log(a) + 1.0)),
        _ => (0.0, 1.0),
    };
    let width = |c: usize| {
        (lo + (hi - lo) * (c + 1) as f64 / classes as f64)
            .exp2()
            .max(1.0) as u64
    };
    (0..l.len())
        .map(|i| {
            let d = l.death[i];
            if d == u64::MAX {
                return never;
            }
            let x = ((log(d - l.birth[i]) - lo) / (hi - lo) * classes as f64).floor();
            let c = x.clamp(0.0, (classes - 1) as f64) as usize;
            (2 * c + ((d / width(c)) % 2) as usize) as u8
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

    fn lifetimes(v: &[(u64, u64)]) -> Lifetimes {
        Lifetimes {
            birth: v.iter().map(|x| x.0).collect(),
            death: v.iter().map(|x| x.1).collect(),
            pages: vec![1; v.len()],
            clock: 1000,
        }
    }

    #[test]
    fn lifetime_buckets_are_log_spaced_and_never_dying_writes_go_last() {
        // Lifetimes 1, 2, 4, … 512 and one that never dies, 4 streams: 3 finite buckets
        // between log2 1 = 0 and log2 512 = 9 (the 1st and 99th percentiles).
        let mut v: Vec<(u64, u64)> = (0..10).map(|k| (0, 1u64 << k)).collect();
        v.push((5, u64::MAX));
        let o = OraclePolicy::from_lifetimes(&lifetimes(&v), 4, OracleGrouping::Lifetime);
        assert_eq!(o.streams(), &[0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3]);
    }

    #[test]
    fn death_time_classes_split_by_death_parity() {
        // 5 streams: 2 classes (streams 0–1 and 2–3), never on 4. Lifetimes 4 and 64 (log2 2
        // and 6): lo = 2, hi = 6, class widths 2^4 = 16 and 2^6 = 64. Born 0 dying 4: class 0,
        // ⌊4/16⌋ = 0 → 0; born 30 dying 34: class 0, ⌊34/16⌋ = 2 → 0; born 10 dying 26:
        // lifetime 16 (log2 4) → class 1, ⌊26/64⌋ = 0 → 2; born 0 dying 64: class 1, 1 → 3.
        let v = [(0, 4), (30, 34), (10, 26), (0, 64), (3, u64::MAX)];
        let o = OraclePolicy::from_lifetimes(&lifetimes(&v), 5, OracleGrouping::DeathTime);
        assert_eq!(o.streams(), &[0, 0, 2, 3, 4]);
        // Equal lifetimes, deaths a class width apart: together in the lifetime oracle,
        // apart in the death-time oracle.
        let v = [(0, 4), (16, 20), (0, 64)];
        let l = lifetimes(&v);
        let by_life = OraclePolicy::from_lifetimes(&l, 5, OracleGrouping::Lifetime);
        assert_eq!(by_life.streams()[0], by_life.streams()[1]);
        let by_death = OraclePolicy::from_lifetimes(&l, 5, OracleGrouping::DeathTime);
        assert_ne!(by_death.streams()[0], by_death.streams()[1]);
    }

    #[test]
    fn quantile_by_selection_is_the_sorted_walk() {
        // The walk over sorted pairs that `quantile` replaces.
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
                let v: Vec<(u64, u32)> =
                    (0..n).map(|_| (next() % 50, (next() % 4) as u32)).collect();
                for q in [0.0, 0.01, 0.5, 0.99, 1.0] {
                    assert_eq!(
                        quantile(&mut v.clone(), q),
                        walked(&v, q),
                        "n {n} q {q} {v:?}"
                    );
                }
            }
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
