//! The timing model: channels × dies, each with a busy-until clock; a shared host link; a
//! host queue of fixed depth.
//!
//! Every flash operation the FTL performs (host programs and reads, GC copy reads/programs,
//! erases) is placed on the timeline of the die that holds its page, no earlier than the die
//! and (for data transfers) its channel are free. GC runs inside the host write that needed a
//! free unit, so its operations occupy dies before that write's own program: a host I/O that
//! lands on a die busy with GC waits for it, which is how GC shows up in host latency.
//!
//! - program: channel busy t_xfer, then the die busy t_xfer + tPROG (data-in then program).
//! - read: die busy tR, then the page leaves over the channel (t_xfer); the die is held
//!   until its register is drained.
//! - erase: every die the unit spans is busy tBERS.
//! - host link: pages cross it one after another (t_host_xfer each): before the flash
//!   programs for a write, after the flash reads for a read.

use crate::config::{DieStripe, TimingConfig};
use crate::ftl::FlashOp;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A latency histogram with log-linear buckets: 64 sub-buckets per power of two, so any
/// reported percentile is within 1/64 (1.6 %) of the true value. Deterministic and small.
#[derive(Clone, Debug, Default)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

const SUB_BITS: u32 = 6;

const NO_DIE: u8 = u8::MAX;

impl LatencyHistogram {
    fn bucket(v: u64) -> usize {
        if v < (1 << SUB_BITS) {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros();
        let shift = msb - SUB_BITS;
        let sub = (v >> shift) as usize & ((1 << SUB_BITS) - 1);
        (((shift + 1) as usize) << SUB_BITS) + sub
    }
    /// The largest value that falls in bucket `b` (reported percentiles err high, never low).
    fn bucket_high(b: usize) -> u64 {
        if b < (1 << SUB_BITS) {
            return b as u64;
        }
        let shift = (b >> SUB_BITS) as u32 - 1;
        let sub = (b & ((1 << SUB_BITS) - 1)) as u64;
        (((1u64 << SUB_BITS) + sub + 1) << shift) - 1
    }
    pub fn record(&mut self, v: u64) {
        let b = Self::bucket(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }
    pub fn count(&self) -> u64 {
        self.total
    }
    /// The value at quantile `q` (0..=1); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::bucket_high(b).min(self.max);
            }
        }
        self.max
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
}

impl LatencyHistogram {
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            count: self.total,
            p50_us: us(self.quantile(0.5)),
            p99_us: us(self.quantile(0.99)),
            p99_9_us: us(self.quantile(0.999)),
            max_us: us(self.max),
        }
    }
}

/// The timing figures of a run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TimingReport {
    /// First issue to last completion, ns.
    pub makespan_ns: u64,
    /// Mean over dies of the time each die was busy, ns.
    pub die_busy_mean_ns: u64,
    /// die_busy_mean / makespan.
    pub die_utilization: f64,
    /// Host I/Os (reads + writes + trims) per second of makespan.
    pub iops: f64,
    /// Host bytes read + written per second of makespan, in MB/s (10^6).
    pub mb_per_s: f64,
    pub write_latency: LatencySummary,
    pub read_latency: LatencySummary,
    /// `true` when I/Os were issued at their trace times, `false` for closed-loop issue at
    /// the queue depth (then the throughput is the sustainable one).
    pub trace_paced: bool,
    /// TRIM commands, and the time from their issue to their completion (drain included).
    pub trims: u64,
    pub trim_busy_ns: u64,
}

pub struct Timing {
    cfg: TimingConfig,
    unit_pages: u32,
    die_free: Vec<u64>,
    die_busy: Vec<u64>,
    /// With [`DieStripe::Dynamic`]: the die each physical page was programmed on
    /// (`NO_DIE`: before timing started, e.g. preconditioning; then the page's static die).
    die_of: Vec<u8>,
    chan_free: Vec<u64>,
    link_free: u64,
    in_flight: BinaryHeap<Reverse<u64>>,
    last_issue: u64,
    first_issue: Option<u64>,
    last_done: u64,
    /// Trace time of the first I/O: trace times are taken relative to it.
    trace_origin: Option<u64>,
    ios: u64,
    bytes: u64,
    /// TRIM commands and the time they held the device (drain waits included).
    trims: u64,
    trim_busy: u64,
    pub write_hist: LatencyHistogram,
    pub read_hist: LatencyHistogram,
}

impl Timing {
    pub fn new(cfg: &TimingConfig, unit_pages: u32) -> Self {
        let dies = cfg.dies() as usize;
        Timing {
            cfg: cfg.clone(),
            unit_pages,
            die_free: vec![0; dies],
            die_busy: vec![0; dies],
            die_of: Vec::new(),
            chan_free: vec![0; cfg.channels as usize],
            link_free: 0,
            in_flight: BinaryHeap::new(),
            last_issue: 0,
            first_issue: None,
            last_done: 0,
            trace_origin: None,
            ios: 0,
            bytes: 0,
            trims: 0,
            trim_busy: 0,
            write_hist: LatencyHistogram::default(),
            read_hist: LatencyHistogram::default(),
        }
    }

    /// Forgets all busy times and statistics (after preconditioning); where pages live stays.
    pub fn reset(&mut self) {
        let die_of = std::mem::take(&mut self.die_of);
        *self = Timing::new(&self.cfg.clone(), self.unit_pages);
        self.die_of = die_of;
    }

    /// The die that holds physical page `ppn`.
    #[inline]
    fn die_of_page(&self, ppn: u32) -> usize {
        let dies = self.die_free.len() as u32;
        match self.cfg.stripe {
            DieStripe::Dynamic => match self.die_of.get(ppn as usize) {
                Some(&d) if d != NO_DIE => d as usize,
                _ => (ppn % dies) as usize,
            },
            DieStripe::Page => (ppn % dies) as usize,
            DieStripe::Unit => ((ppn / self.unit_pages) % dies) as usize,
        }
    }

    /// The die a program of `ppn` goes to: with dynamic allocation the one that can start
    /// it first (ties: the lowest), remembered for the page's reads and its unit's erase.
    fn die_for_program(&mut self, ppn: u32, ready: u64) -> usize {
        if self.cfg.stripe != DieStripe::Dynamic {
            return self.die_of_page(ppn);
        }
        let mut best = 0;
        let mut best_start = u64::MAX;
        for d in 0..self.die_free.len() {
            let start = ready
                .max(self.die_free[d])
                .max(self.chan_free[self.chan_of_die(d)]);
            if start < best_start {
                best = d;
                best_start = start;
            }
        }
        let i = ppn as usize;
        if self.die_of.len() <= i {
            self.die_of.resize(i + 1, NO_DIE);
        }
        self.die_of[i] = best as u8;
        best
    }
    #[inline]
    fn chan_of_die(&self, die: usize) -> usize {
        die % self.cfg.channels as usize
    }

    /// When the next host I/O (trace time `trace_ns`) enters the device.
    pub fn issue_time(&mut self, trace_ns: u64) -> u64 {
        let mut t = self.last_issue;
        if self.cfg.use_trace_time {
            let origin = *self.trace_origin.get_or_insert(trace_ns);
            t = t.max(trace_ns.saturating_sub(origin));
        }
        if self.in_flight.len() >= self.cfg.queue_depth as usize {
            let Reverse(done) = self.in_flight.pop().expect("queue is full");
            t = t.max(done);
        }
        self.last_issue = t;
        self.first_issue.get_or_insert(t);
        t
    }

    fn busy(&mut self, die: usize, start: u64, end: u64) {
        self.die_free[die] = end;
        self.die_busy[die] += end - start;
    }

    fn program(&mut self, ppn: u32, ready: u64) -> u64 {
        let d = self.die_for_program(ppn, ready);
        let c = self.chan_of_die(d);
        let start = ready.max(self.die_free[d]).max(self.chan_free[c]);
        self.chan_free[c] = start + self.cfg.t_xfer_ns;
        let done = start + self.cfg.t_xfer_ns + self.cfg.t_prog_ns;
        self.busy(d, start, done);
        done
    }

    fn read(&mut self, ppn: u32, ready: u64) -> u64 {
        let d = self.die_of_page(ppn);
        let c = self.chan_of_die(d);
        let start = ready.max(self.die_free[d]);
        let sensed = start + self.cfg.t_read_ns;
        let out = sensed.max(self.chan_free[c]);
        let done = out + self.cfg.t_xfer_ns;
        self.chan_free[c] = done;
        self.busy(d, start, done);
        done
    }

    fn erase(&mut self, unit: u32, ready: u64) -> u64 {
        // Pages of the unit on each die: each die is charged that share of a physical block's
        // erase time (see TimingConfig::block_pages).
        let mut pages_on = vec![0u64; self.die_free.len()];
        let first = unit * self.unit_pages;
        for ppn in first..first + self.unit_pages {
            pages_on[self.die_of_page(ppn)] += 1;
        }
        let mut done = ready;
        for (d, &n) in pages_on.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let t_erase = (self.cfg.t_erase_ns * n / self.cfg.block_pages.max(1) as u64)
                .clamp(1, self.cfg.t_erase_ns);
            let start = ready.max(self.die_free[d]);
            let end = start + t_erase;
            self.busy(d, start, end);
            done = done.max(end);
        }
        done
    }

    /// Schedules the flash operations of one host write of `pages` pages issued at `issue`
    /// (`ops` in FTL order: GC work, then the host programs); returns its completion time.
    pub fn host_write(&mut self, issue: u64, pages: u64, ops: &[FlashOp]) -> u64 {
        // The data crosses the host link first.
        let link_start = issue.max(self.link_free);
        self.link_free = link_start + pages * self.cfg.t_host_xfer_ns;
        let data_ready = self.link_free;
        let done = self.run_ops(issue, data_ready, ops);
        self.finish(issue, done, pages, true)
    }

    /// Schedules one host read; reads of unmapped pages cost only the link.
    pub fn host_read(&mut self, issue: u64, pages: u64, ops: &[FlashOp]) -> u64 {
        let flash_done = self.run_ops(issue, issue, ops);
        let link_start = flash_done.max(self.link_free);
        self.link_free = link_start + pages * self.cfg.t_host_xfer_ns;
        let done = self.link_free;
        self.finish(issue, done, pages, false)
    }

    /// A TRIM of `pages` pages. It costs no flash time (the mapping update is in controller
    /// RAM) but the command's own time (`TrimCost`); a non-queued TRIM first waits for every
    /// I/O in flight, and nothing is issued until it completes.
    pub fn host_trim(&mut self, issue: u64, pages: u64) -> u64 {
        let cost = &self.cfg.trim;
        let work = cost.command_ns + pages * cost.per_page_ns;
        let start = if cost.queued {
            issue
        } else {
            let drained = self
                .in_flight
                .drain()
                .map(|Reverse(d)| d)
                .max()
                .unwrap_or(0);
            issue.max(drained)
        };
        let done = start + work;
        if !cost.queued {
            // Exclusive: the link carries nothing else, and the next I/O issues after it.
            self.link_free = self.link_free.max(done);
            self.last_issue = self.last_issue.max(done);
        }
        self.ios += 1;
        self.trims += 1;
        self.trim_busy += done - issue;
        self.in_flight.push(Reverse(done));
        self.last_done = self.last_done.max(done);
        done
    }

    /// GC operations start when the I/O is issued; host programs start when their data has
    /// crossed the link. A GC copy's program waits for its read; an erase waits for the copies
    /// out of the victim. In a write's list every Read is a GC copy source and is followed by
    /// the Program of its copy; a host program never directly follows a Read.
    fn run_ops(&mut self, issue: u64, data_ready: u64, ops: &[FlashOp]) -> u64 {
        let mut done = issue;
        let mut copies_read = issue;
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                FlashOp::Read(src) => {
                    let r = self.read(src, issue);
                    if let Some(&FlashOp::Program(dst)) = ops.get(i + 1) {
                        self.program(dst, r);
                        copies_read = copies_read.max(r);
                        i += 1;
                    } else {
                        done = done.max(r);
                    }
                }
                FlashOp::Program(ppn) => done = done.max(self.program(ppn, data_ready)),
                FlashOp::Erase(u) => {
                    self.erase(u, copies_read);
                }
            }
            i += 1;
        }
        done
    }

    fn finish(&mut self, issue: u64, done: u64, pages: u64, write: bool) -> u64 {
        self.ios += 1;
        self.bytes += pages * crate::config::PAGE_BYTES;
        self.in_flight.push(Reverse(done));
        self.last_done = self.last_done.max(done);
        let lat = done - issue;
        if write {
            self.write_hist.record(lat);
        } else {
            self.read_hist.record(lat);
        }
        done
    }

    pub fn report(&self) -> TimingReport {
        let makespan = self.last_done.saturating_sub(self.first_issue.unwrap_or(0));
        let busy_mean = if self.die_busy.is_empty() {
            0
        } else {
            self.die_busy.iter().sum::<u64>() / self.die_busy.len() as u64
        };
        let secs = makespan as f64 / 1e9;
        let per_s = |x: f64| if makespan == 0 { 0.0 } else { x / secs };
        TimingReport {
            makespan_ns: makespan,
            die_busy_mean_ns: busy_mean,
            die_utilization: if makespan == 0 {
                0.0
            } else {
                busy_mean as f64 / makespan as f64
            },
            iops: per_s(self.ios as f64),
            mb_per_s: per_s(self.bytes as f64 / 1e6),
            write_latency: self.write_hist.summary(),
            read_latency: self.read_hist.summary(),
            trace_paced: self.cfg.use_trace_time,
            trims: self.trims,
            trim_busy_ns: self.trim_busy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_bucket_precision() {
        let mut h = LatencyHistogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!(
                got >= exact && got <= exact * (1.0 + 1.0 / 64.0),
                "q{q}: {got}"
            );
        }
        assert_eq!(h.quantile(1.0), 100_000);
        assert_eq!(LatencyHistogram::default().quantile(0.5), 0);
    }

    fn one_die() -> TimingConfig {
        TimingConfig {
            channels: 1,
            dies_per_channel: 1,
            t_read_ns: 50,
            t_prog_ns: 500,
            t_erase_ns: 3000,
            t_xfer_ns: 10,
            t_host_xfer_ns: 5,
            queue_depth: 1,
            // Every erase costs a full tBERS (a unit here is one whole physical block).
            block_pages: 1,
            stripe: DieStripe::Page,
            use_trace_time: false,
            trim: crate::config::TrimCost::default(),
        }
    }

    #[test]
    fn a_write_waits_behind_gc_on_its_die() {
        let mut t = Timing::new(&one_die(), 4);
        let i = t.issue_time(0);
        let plain = t.host_write(i, 1, &[FlashOp::Program(0)]);
        assert_eq!(plain, 5 + 10 + 500);
        let i = t.issue_time(0);
        assert_eq!(i, plain, "queue depth 1: the next I/O waits for the first");
        // GC: copy one page (read 50 + xfer 10, then xfer 10 + prog 500), erase 3000, then the
        // host program.
        let ops = [
            FlashOp::Read(1),
            FlashOp::Program(2),
            FlashOp::Erase(0),
            FlashOp::Program(3),
        ];
        let done = t.host_write(i, 1, &ops);
        assert_eq!(done - i, 60 + 510 + 3000 + 510);
        assert!(t.write_hist.quantile(1.0) >= done - i);
    }

    /// Reads and writes share the dies: a read of a page on the die a write's GC keeps busy
    /// waits for that GC (its copy and its erase), and so does its latency.
    #[test]
    fn a_read_waits_behind_gc_on_its_die() {
        let mut cfg = one_die();
        cfg.queue_depth = 2;
        let mut idle = Timing::new(&cfg, 4);
        let i = idle.issue_time(0);
        let alone = idle.host_read(i, 1, &[FlashOp::Read(5)]) - i;
        assert_eq!(alone, 50 + 10 + 5, "sense, channel, host link");
        let mut t = Timing::new(&cfg, 4);
        let w = t.issue_time(0);
        let gc = [
            FlashOp::Read(1),
            FlashOp::Program(2),
            FlashOp::Erase(0),
            FlashOp::Program(3),
        ];
        t.host_write(w, 1, &gc);
        // Issued at once beside the write (queue depth 2), the read finds the die busy with
        // the GC copy (60 + 510) and the erase (3000) and waits for them.
        let r = t.issue_time(0);
        assert_eq!(r, 0);
        let behind = t.host_read(r, 1, &[FlashOp::Read(5)]) - r;
        assert!(behind >= 60 + 510 + 3000 + alone, "read took {behind}");
        assert_eq!(
            t.read_hist.quantile(1.0),
            idle.read_hist.quantile(1.0).max(behind)
        );
        assert!(t.report().read_latency.p99_us > idle.report().read_latency.p99_us);
    }

    #[test]
    fn a_non_queued_trim_drains_the_queue_and_holds_the_device() {
        let mut cfg = one_die();
        cfg.queue_depth = 4;
        cfg.trim = crate::config::TrimCost {
            queued: false,
            command_ns: 100,
            per_page_ns: 2,
        };
        let mut t = Timing::new(&cfg, 4);
        let mut last = 0;
        for p in 0..3 {
            let i = t.issue_time(0);
            last = t.host_write(i, 1, &[FlashOp::Program(p)]);
        }
        // Issued at once (queue depth 4), the TRIM waits for all three writes to finish.
        let i = t.issue_time(0);
        assert_eq!(i, 0);
        let done = t.host_trim(i, 10);
        assert_eq!(done, last + 100 + 20);
        // Nothing issues before it completes.
        assert_eq!(t.issue_time(0), done);
        let r = t.report();
        assert_eq!((r.trims, r.trim_busy_ns), (1, done));
        // Queued, the same TRIM costs only its own time.
        cfg.trim.queued = true;
        let mut q = Timing::new(&cfg, 4);
        let i = q.issue_time(0);
        q.host_write(i, 1, &[FlashOp::Program(0)]);
        let i = q.issue_time(0);
        assert_eq!(q.host_trim(i, 10), 120);
    }

    #[test]
    fn pages_of_a_superblock_use_dies_in_parallel() {
        let mut cfg = one_die();
        cfg.dies_per_channel = 4;
        cfg.queue_depth = 4;
        let mut t = Timing::new(&cfg, 8);
        let mut last = 0;
        for p in 0..4 {
            let i = t.issue_time(0);
            last = t.host_write(i, 1, &[FlashOp::Program(p)]);
        }
        // Four dies program at once; the channel and link only serialise the transfers.
        assert!(last < 2 * 515, "took {last}");
    }
}
