//! `agegroup` (flashdoc's own, after SepBIT, FAST'22, and MiDAS, FAST'24): a table write goes
//! to the group of the *age of the block it invalidates*, the time since its page was last
//! written; the groups' boundaries follow the recent ages, and adjacent groups merge while
//! their ages do not differ.
//!
//! Why: on flashdoc's engine the policy sees page ids, so SepBIT's signal is exact: a page's
//! new version invalidates its old block, and that block's age is the page's last rewrite
//! interval. SepBIT's observation is that, under skew, a block that invalidates a young block
//! is likely to be invalidated young itself. The signal reaches the device only where frees
//! do — with TRIM, the engine's `Free` of the old block becomes the block's death on the
//! device — so this policy is meant for TRIM on; without TRIM a block dies when the
//! filesystem hands its address out again, which its page's history does not predict
//! (docs/placement.md, "What predicts a block's death").
//!
//! - **Clock**: 4 KB table pages written (SepBIT's user-write clock; the journal's steady
//!   stream would only rescale it).
//! - **Age** of a table write: clock − the clock at its page's previous write. The page is
//!   the write's page id; a trace without page ids (a shim trace of a real WiredTiger) keys
//!   by the file offset instead, which is SepBIT's logical block address. A write whose page
//!   was never written (or whose file was removed since) is *fresh*.
//! - **Groups** (SepBIT's classes with adaptive thresholds, MiDAS's adaptive groups): at
//!   each checkpoint commit the page-weighted histogram of recent ages (quarter-octave bins,
//!   × `decay` per commit, so it follows a workload that changes) is cut into log-spaced
//!   groups between its 1st and 99th percentiles, as many as there are data streams but
//!   none narrower than `min_octaves`. MiDAS adapts the number of groups to the workload:
//!   a group that draws under `min_share` of the recent pages joins its younger neighbour,
//!   since an open stream that takes a trickle holds a partly written erase block for
//!   nothing. A trace whose ages are tight therefore gets one group: a single table
//!   stream.
//! - **Fresh writes** join the oldest group, as SepBIT's new writes do (a page with no
//!   history is most often a load or a new page that stays).
//! - **Before the first commit** every table write is in the single group.
//!
//! | streams | metadata | journal | age groups (youngest first) |
//! | --- | --- | --- | --- |
//! | ≥ 3 | 0 | 1 | 2..S−1 |
//! | 2 | 0 | 0 | 1 |
//!
//! GC-rewritten blocks are the device's own: the simulator's collector, like a drive's,
//! relocates into its own write point, which no host policy steers, so SepBIT's GC classes
//! are not available here.
//!
//! **Measured** (docs/placement.md, "agegroup, TRIM in flash mode, and the feature oracle"):
//! even with TRIM a page's last interval explains 3–14 % of the variance of its next block's
//! log lifetime on the lab's engine traces; with TRIM on every policy reaches WAF 1.000 at the
//! lab's sizing, and with TRIM off `agegroup` loses 18–31 % of the file→oracle gap to `file`.
//! It is kept as the measured SepBIT baseline, not as flash mode's policy.
//!
//! Deterministic and online: its state is a function of the events it has seen, in order
//! (tested: its choices on a prefix of a trace are those it makes on the whole trace).

use super::{is_table, AgeGroupConfig, PlacementConfig, Policy, PAGE_SIZE};
use crate::event::{Event, FileId, FileKind, WriteEvent};
use std::collections::HashMap;

/// Histogram bins per octave of age.
const BINS_PER_OCTAVE: usize = 4;
/// Bins: ages up to 2^64 pages.
const BINS: usize = 64 * BINS_PER_OCTAVE;
/// Marks a page key made from a file offset (no page id), so it never meets a page id.
const OFFSET_KEY: u64 = 1 << 63;

/// The quarter-octave bin of an age in pages (≥ 1): ⌊4·log₂ age⌋ from the top three bits.
fn bin_of(age: u64) -> usize {
    let age = age.max(1);
    let msb = 63 - age.leading_zeros() as usize;
    let frac = if msb >= 2 {
        ((age >> (msb - 2)) & 0b11) as usize
    } else {
        ((age << (2 - msb)) & 0b11) as usize
    };
    msb * BINS_PER_OCTAVE + frac
}

#[derive(Clone, Debug)]
pub struct AgeGroupPolicy {
    cfg: AgeGroupConfig,
    metadata: u8,
    journal: u8,
    first_group: u8,
    /// Data streams: the most groups there can be.
    groups: usize,
    clock: u64,
    /// Each file's pages: the clock at their last write.
    pages: HashMap<FileId, HashMap<u64, u64>>,
    /// Page-weighted ages of recent writes, by bin (decayed at each commit).
    ages: Vec<f64>,
    /// The bins at which a group starts (ascending; group k holds bins from `cuts[k-1]`).
    cuts: Vec<usize>,
}

impl AgeGroupPolicy {
    pub fn new(cfg: &PlacementConfig) -> Self {
        let (metadata, journal, first_group) = match cfg.streams {
            2 => (0, 0, 1),
            _ => (0, 1, 2),
        };
        assert!(
            first_group < cfg.streams,
            "agegroup needs at least 2 streams"
        );
        AgeGroupPolicy {
            cfg: cfg.agegroup.clone(),
            metadata,
            journal,
            first_group,
            groups: (cfg.streams - first_group) as usize,
            clock: 0,
            pages: HashMap::new(),
            ages: vec![0.0; BINS],
            cuts: Vec::new(),
        }
    }

    /// The bins at which the groups start (for reports and tests).
    pub fn cuts(&self) -> &[usize] {
        &self.cuts
    }

    /// The page a write is known by: its page id, else its first 4 KB page in the file.
    fn key(w: &WriteEvent) -> u64 {
        if w.page_id != 0 {
            w.page_id
        } else {
            OFFSET_KEY | (w.offset / PAGE_SIZE)
        }
    }

    /// The age of the block `w` invalidates (`None`: fresh), and the clock moves on.
    fn age(&mut self, w: &WriteEvent) -> Option<u64> {
        let pages = w.len.div_ceil(PAGE_SIZE as u32).max(1) as u64;
        let now = self.clock;
        self.clock += pages;
        let last = self
            .pages
            .entry(w.file)
            .or_default()
            .insert(Self::key(w), now);
        if let Some(t) = last {
            assert!(
                t <= now,
                "a page written in the future (clock {now}, page {t})"
            );
        }
        let age = last.map(|t| (now - t).max(1));
        if let Some(a) = age {
            self.ages[bin_of(a)] += pages as f64;
        }
        age
    }

    /// The group of an age: the number of cuts at or below its bin.
    fn group(&self, age: Option<u64>) -> usize {
        match age {
            Some(a) => {
                let b = bin_of(a);
                self.cuts.iter().take_while(|&&c| c <= b).count()
            }
            None => self.cuts.len(),
        }
    }

    /// Cuts the recent ages into log-spaced groups between their 1st and 99th percentiles
    /// (no closer than `min_octaves`), merges every group lighter than `min_share` into its
    /// younger neighbour, then decays the histogram.
    fn regroup(&mut self) {
        self.cuts = self.spaced_cuts();
        self.merge_light_groups();
        debug_assert!(self.cuts.len() < self.groups.max(1));
        debug_assert!(self.cuts.windows(2).all(|c| c[0] < c[1]));
        for x in &mut self.ages {
            *x *= self.cfg.decay;
        }
    }

    /// The bin at each page-weighted quantile q: the first bin where the running weight
    /// reaches q · total.
    fn quantile_bin(&self, q: f64, total: f64) -> usize {
        let target = q * total;
        let mut run = 0.0;
        for (b, &x) in self.ages.iter().enumerate() {
            run += x;
            if x > 0.0 && run >= target {
                return b;
            }
        }
        BINS - 1
    }

    fn spaced_cuts(&self) -> Vec<usize> {
        let total: f64 = self.ages.iter().sum();
        if total <= 0.0 || self.groups < 2 {
            return Vec::new();
        }
        let (lo, hi) = (
            self.quantile_bin(0.01, total),
            self.quantile_bin(0.99, total) + 1,
        );
        let min_bins = ((self.cfg.min_octaves * BINS_PER_OCTAVE as f64).ceil() as usize).max(1);
        let n = self.groups.min((hi - lo) / min_bins).max(1);
        (1..n).map(|k| lo + (hi - lo) * k / n).collect()
    }

    /// MiDAS keeps a group only while it pays: a group with under `min_share` of the recent
    /// pages holds an open erase block for a trickle, so it joins its younger neighbour (the
    /// youngest joins the next).
    fn merge_light_groups(&mut self) {
        let total: f64 = self.ages.iter().sum();
        loop {
            let mut weights = vec![0.0; self.cuts.len() + 1];
            for (b, &x) in self.ages.iter().enumerate() {
                weights[self.cuts.iter().take_while(|&&c| c <= b).count()] += x;
            }
            let light = weights.iter().position(|&w| w < self.cfg.min_share * total);
            match light {
                Some(g) if !self.cuts.is_empty() => {
                    self.cuts
                        .remove(g.saturating_sub(1).min(self.cuts.len() - 1));
                }
                _ => return,
            }
        }
    }
}

impl Policy for AgeGroupPolicy {
    fn name(&self) -> &'static str {
        "agegroup"
    }

    fn place(&mut self, w: &WriteEvent) -> u8 {
        match w.file_kind {
            FileKind::Metadata => self.metadata,
            FileKind::Journal => self.journal,
            _ => {
                debug_assert!(is_table(w.file_kind));
                let age = self.age(w);
                self.first_group + self.group(age) as u8
            }
        }
    }

    fn observe(&mut self, ev: &Event) {
        match ev {
            Event::CheckpointCommit { .. } => self.regroup(),
            Event::FileRemove { file, .. } => {
                self.pages.remove(file);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::{commit, config, streams_of_policy, w};
    use crate::policy::{make_policy, PlacementConfig};
    use crate::synth::{generate, SynthConfig};

    fn streams_of(events: &[Event], cfg: &PlacementConfig) -> Vec<Option<u8>> {
        streams_of_policy("agegroup", events, cfg)
    }

    /// A collection of 64 pages (page ids 1..=64): pages 1..=32 rewritten every round,
    /// pages 33..=64 once every 16 rounds; a commit after each round.
    fn hot_and_cold(rounds: u64) -> Vec<Event> {
        let mut events = Vec::new();
        for round in 0..rounds {
            for page in 1..=64u64 {
                if page <= 32 || round % 16 == page % 16 {
                    let mut x = w(1, FileKind::Collection, page * PAGE_SIZE, 4096);
                    x.page_id = page;
                    events.push(Event::Write(x));
                }
            }
            events.push(commit());
        }
        events
    }

    #[test]
    fn quarter_octave_bins_are_monotone() {
        assert_eq!(bin_of(1), 0);
        assert_eq!(bin_of(2), 4);
        assert_eq!(bin_of(3), 6);
        assert_eq!(bin_of(4), 8);
        assert_eq!(bin_of(5), 9);
        assert_eq!(bin_of(7), 11);
        let mut last = 0;
        for a in 1..5000u64 {
            let b = bin_of(a);
            assert!(b >= last && b < BINS, "age {a}");
            last = b;
        }
        assert_eq!(bin_of(u64::MAX), BINS - 1);
    }

    #[test]
    fn young_and_old_blocks_take_different_streams() {
        let events = hot_and_cold(64);
        let s = streams_of(&events, &config(8));
        // The last round: 32 hot writes, then the 2 cold pages whose turn it is.
        let last: Vec<u8> = s[events.len() - 35..events.len() - 1]
            .iter()
            .map(|x| x.unwrap())
            .collect();
        assert!(last[..32].iter().all(|&x| x == last[0]), "{last:?}");
        assert!(last[32..].iter().all(|&x| x > last[0]), "{last:?}");
        // The first two rounds, before any age is known: one group.
        assert!(s[..64].iter().flatten().all(|&x| x == 2));
    }

    #[test]
    fn ages_that_do_not_differ_make_one_group() {
        // Every page rewritten every round: one age for all.
        let mut events = Vec::new();
        for _ in 0..50 {
            for page in 1..=64u64 {
                let mut x = w(1, FileKind::Collection, page * PAGE_SIZE, 4096);
                x.page_id = page;
                events.push(Event::Write(x));
            }
            events.push(Event::Write(w(3, FileKind::Journal, 0, 4096)));
            events.push(Event::Write(w(4, FileKind::Metadata, 0, 4096)));
            events.push(commit());
        }
        let s = streams_of(&events, &config(8));
        let tables: Vec<u8> = events
            .iter()
            .zip(&s)
            .filter_map(|(ev, s)| match ev {
                Event::Write(x) if is_table(x.file_kind) => *s,
                _ => None,
            })
            .collect();
        assert!(tables.iter().all(|&x| x == 2));
        let mut p = AgeGroupPolicy::new(&config(8));
        for ev in &events {
            match ev {
                Event::Write(x) => {
                    p.place(x);
                }
                other => p.observe(other),
            }
        }
        assert!(p.cuts().is_empty());
    }

    #[test]
    fn choices_on_a_prefix_are_the_choices_on_the_whole_trace() {
        let traces = [
            generate(&SynthConfig::linkbench_like(7)).events,
            hot_and_cold(100),
        ];
        for events in &traces {
            for streams in [2, 4, 8] {
                let whole = streams_of(events, &config(streams));
                for cut in [1, events.len() / 3, events.len() / 2, events.len() - 1] {
                    let prefix = streams_of(&events[..cut], &config(streams));
                    assert_eq!(prefix[..], whole[..cut], "{streams} streams, cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn deterministic_and_inside_the_budget() {
        let traces = [
            generate(&SynthConfig::linkbench_like(3)).events,
            hot_and_cold(100),
        ];
        for events in &traces {
            for streams in 2..=16u8 {
                let a = streams_of(events, &config(streams));
                assert_eq!(a, streams_of(events, &config(streams)), "{streams}");
                for s in a.into_iter().flatten() {
                    assert!(s < streams, "stream {s} on a budget of {streams}");
                }
            }
        }
        // With 2 streams the journal and metadata share stream 0, the tables take 1.
        let mut p = AgeGroupPolicy::new(&config(2));
        assert_eq!(p.place(&w(1, FileKind::Journal, 0, 4096)), 0);
        assert_eq!(p.place(&w(2, FileKind::Index, 0, 4096)), 1);
    }

    #[test]
    fn without_page_ids_the_offset_is_the_page_and_removal_forgets_it() {
        let mut p = AgeGroupPolicy::new(&config(8));
        p.place(&w(1, FileKind::Collection, 0, 4096));
        p.place(&w(1, FileKind::Collection, 0, 4096));
        assert_eq!(
            p.ages[bin_of(1)],
            1.0,
            "the second write overwrote a 1-page-old block"
        );
        p.observe(&Event::FileRemove {
            time_ns: 0,
            file: 1,
        });
        assert!(!p.pages.contains_key(&1));
    }

    #[test]
    fn bad_settings_are_refused() {
        for bad in [
            AgeGroupConfig {
                decay: 1.5,
                ..Default::default()
            },
            AgeGroupConfig {
                min_octaves: -1.0,
                ..Default::default()
            },
        ] {
            let cfg = PlacementConfig {
                agegroup: bad,
                ..Default::default()
            };
            assert!(make_policy("agegroup", &cfg).is_err());
        }
    }

    /// A page stamped later than the clock is a corrupted slot: its age would wrap.
    #[test]
    #[should_panic(expected = "written in the future")]
    fn a_page_from_the_future_trips_the_assertion() {
        let mut p = AgeGroupPolicy::new(&config(8));
        p.pages.entry(1).or_default().insert(OFFSET_KEY, 100);
        p.place(&w(1, FileKind::Collection, 0, 4096));
    }
}
