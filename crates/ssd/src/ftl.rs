//! The flash translation layer: page-level mapping, reclaim units, streams, GC, TRIM, wear.
//!
//! All state lives in flat vectors indexed by logical page (LBA), physical page number (PPN)
//! or reclaim unit, so one host page write is a few array updates (the simulator must reach
//! ~10 M host page writes per second). The unit GC works on is the *reclaim unit* (RU) of
//! `blocks_per_ru` erase blocks; with the default of 1 it is simply the erase block.
//!
//! Invariants (checked by [`Ftl::check_invariants`] in tests):
//! - `l2p[lba] == ppn` iff page `ppn` is live (its bit in `live` is set), and then
//!   `p2l[ppn] == lba`; unmapped LBAs hold `NONE`. A dead page's `p2l` entry is stale: an
//!   overwrite or TRIM clears only the page's bit in `live` (a 1/32 as large table that stays
//!   in cache) and leaves `p2l` alone, which saved a cache miss per host page write.
//! - `valid[u]` is the number of mapped pages in unit `u`.
//! - A unit is Free (erased, in its pool's free list), Open (a host stream's or the GC's write
//!   point) or Full (a GC candidate, present in exactly the victim index of its pool).
//!
//! GC runs when a unit is needed and the pool has fewer than `gc_low_water` free units. Each GC
//! step picks one victim, copies its valid pages to the GC destination and erases it. At most
//! one new destination unit is needed per victim (a victim holds at most one unit of valid
//! pages), so with `gc_low_water ≥ 2` a free unit is always there to copy into.

use crate::config::{GcDest, GcPolicy, GcTie, SsdConfig};
use crate::error::SsdError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::VecDeque;

/// A hint to start loading `*p` into the cache.
#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it reads nothing the program sees and never
    // faults, and `p` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((p as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// "No page / no unit" in the u32 tables.
pub const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnitState {
    Free,
    Open,
    Full,
}

/// A flash operation, recorded for the timing model when recording is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashOp {
    /// Read of a physical page (host read or GC copy source).
    Read(u32),
    /// Program of a physical page (host write or GC copy destination).
    Program(u32),
    /// Erase of a reclaim unit.
    Erase(u32),
}

#[derive(Clone, Copy, Debug)]
struct WritePoint {
    unit: u32,
    /// Next page index inside the unit; always < unit_pages while the write point exists.
    next: u32,
}

/// Reclaim units that share a free list and GC (all streams by default; one per stream when
/// spare capacity is split).
struct Pool {
    free: VecDeque<u32>,
    gc_open: Option<WritePoint>,
    /// Greedy: head unit of the list of Full units with exactly v valid pages (the next
    /// victim among them).
    heads: Vec<u32>,
    /// Greedy: last unit of each such list (where [`GcTie::Oldest`] appends).
    tails: Vec<u32>,
    /// Greedy: no Full unit has fewer valid pages than this.
    min_valid: u32,
    /// FIFO: Full units in the order they were sealed.
    fifo: VecDeque<u32>,
    /// Random / d-choices / cost-benefit: all Full units (order: insertion, swap-remove).
    members: Vec<u32>,
}

/// Old copies that an op's consecutive pages replace (or TRIM), counted against their unit
/// once per run of pages in the same unit: a sequential rewrite moves the unit down its
/// greedy buckets once, not page by page. The lists end the same either way: a unit moved
/// to a list's end and at once out of it again leaves that list as it was.
#[derive(Default)]
struct DyingRun {
    unit: u32,
    pages: u32,
}

impl DyingRun {
    #[inline(always)]
    fn add(&mut self, ftl: &mut Ftl, ppn: u32) {
        debug_assert!(ftl.is_live(ppn));
        ftl.clear_live(ppn);
        let u = ftl.unit_of(ppn);
        if u != self.unit {
            self.flush(ftl);
            self.unit = u;
        }
        self.pages += 1;
    }

    #[inline(always)]
    fn flush(&mut self, ftl: &mut Ftl) {
        if self.pages > 0 {
            ftl.unit_loses(self.unit, self.pages);
            self.pages = 0;
        }
    }
}

/// Counters since the last [`Ftl::reset_stats`].
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FtlStats {
    pub host_write_pages: u64,
    pub host_read_pages: u64,
    /// Host reads of LBAs that hold no data (never written or trimmed): no flash read.
    pub host_read_unmapped_pages: u64,
    pub host_trim_pages: u64,
    /// Trimmed pages that were mapped (the ones TRIM actually invalidated).
    pub trim_invalidated_pages: u64,
    pub gc_copy_pages: u64,
    pub erases: u64,
    /// GC victims erased with no valid page (nothing to copy).
    pub gc_empty_victims: u64,
    pub per_stream_host_pages: Vec<u64>,
    /// GC copies, by the stream that originally wrote the copied page.
    pub per_stream_gc_pages: Vec<u64>,
}

impl FtlStats {
    /// Flash page programs / host page writes (0 when nothing was written).
    pub fn write_amplification(&self) -> f64 {
        if self.host_write_pages == 0 {
            0.0
        } else {
            (self.host_write_pages + self.gc_copy_pages) as f64 / self.host_write_pages as f64
        }
    }
}

/// One point of the write-amplification time series.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct WafPoint {
    /// Host page writes since the stats were reset.
    pub host_pages: u64,
    /// WAF over the last interval.
    pub interval: f64,
    /// WAF since the stats were reset.
    pub cumulative: f64,
}

pub struct Ftl {
    unit_pages: u32,
    /// log2(unit_pages) when it is a power of two (the default 256): a shift instead of a
    /// division on every page.
    unit_shift: Option<u32>,
    units: u32,
    logical_pages: u32,
    l2p: Vec<u32>,
    /// The LBA a physical page was last programmed with (meaningful while the page is live).
    p2l: Vec<u32>,
    /// One bit per physical page: set while it holds its LBA's current data.
    live: Vec<u64>,
    /// The host stream that wrote each physical page (for per-stream GC counts and
    /// [`GcDest::SameStream`]).
    page_stream: Vec<u8>,
    valid: Vec<u32>,
    state: Vec<UnitState>,
    erase_count: Vec<u32>,
    /// Host page clock when the unit was sealed (cost-benefit age).
    sealed_at: Vec<u64>,
    unit_pool: Vec<u16>,
    /// Greedy bucket list links, by unit.
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Index in the pool's `members`, by unit.
    member_pos: Vec<u32>,
    pools: Vec<Pool>,
    host_open: Vec<Option<WritePoint>>,
    stream_pool: Vec<u16>,
    gc: GcPolicy,
    gc_tie: GcTie,
    d_choices: u32,
    gc_dest: GcDest,
    low_water: usize,
    rng: StdRng,
    /// Host page writes ever (never reset: the age clock).
    clock: u64,
    stats: FtlStats,
    record: bool,
    ops: Vec<FlashOp>,
    waf_interval: u64,
    waf_series: Vec<WafPoint>,
    waf_mark: (u64, u64),
}

impl Ftl {
    pub fn new(cfg: &SsdConfig) -> Result<Self, SsdError> {
        cfg.validate()?;
        let unit_pages = cfg.unit_pages() as u32;
        let units = cfg.units() as u32;
        let phys = cfg.physical_pages() as usize;
        let streams = cfg.streams as usize;
        let pool_sizes: Vec<u64> = if cfg.pool_units.len() > 1 {
            cfg.pool_units.clone()
        } else {
            vec![units as u64]
        };
        let mut pools = Vec::with_capacity(pool_sizes.len());
        let mut unit_pool = vec![0u16; units as usize];
        let mut first = 0u32;
        for (p, &n) in pool_sizes.iter().enumerate() {
            let free: VecDeque<u32> = (first..first + n as u32).collect();
            for &u in &free {
                unit_pool[u as usize] = p as u16;
            }
            first += n as u32;
            pools.push(Pool {
                free,
                gc_open: None,
                heads: if cfg.gc == GcPolicy::Greedy {
                    vec![NONE; unit_pages as usize + 1]
                } else {
                    Vec::new()
                },
                tails: if cfg.gc == GcPolicy::Greedy {
                    vec![NONE; unit_pages as usize + 1]
                } else {
                    Vec::new()
                },
                min_valid: unit_pages + 1,
                fifo: VecDeque::new(),
                members: Vec::new(),
            });
        }
        let stream_pool = (0..streams)
            .map(|s| if pools.len() > 1 { s as u16 } else { 0 })
            .collect();
        let per_unit = units as usize;
        let greedy = cfg.gc == GcPolicy::Greedy;
        Ok(Ftl {
            unit_pages,
            unit_shift: unit_pages
                .is_power_of_two()
                .then(|| unit_pages.trailing_zeros()),
            units,
            logical_pages: cfg.logical_pages as u32,
            l2p: vec![NONE; cfg.logical_pages as usize],
            p2l: vec![NONE; phys],
            live: vec![0; phys.div_ceil(64)],
            page_stream: vec![0; phys],
            valid: vec![0; per_unit],
            state: vec![UnitState::Free; per_unit],
            erase_count: vec![0; per_unit],
            sealed_at: vec![0; per_unit],
            unit_pool,
            next: if greedy {
                vec![NONE; per_unit]
            } else {
                Vec::new()
            },
            prev: if greedy {
                vec![NONE; per_unit]
            } else {
                Vec::new()
            },
            member_pos: vec![NONE; per_unit],
            pools,
            host_open: vec![None; streams],
            stream_pool,
            gc: cfg.gc,
            gc_tie: cfg.gc_tie,
            d_choices: cfg.d_choices,
            gc_dest: cfg.gc_dest,
            low_water: cfg.gc_low_water as usize,
            rng: StdRng::seed_from_u64(cfg.seed),
            clock: 0,
            stats: FtlStats {
                per_stream_host_pages: vec![0; streams],
                per_stream_gc_pages: vec![0; streams],
                ..Default::default()
            },
            record: false,
            ops: Vec::new(),
            waf_interval: cfg.waf_interval,
            waf_series: Vec::new(),
            waf_mark: (0, 0),
        })
    }

    pub fn logical_pages(&self) -> u64 {
        self.logical_pages as u64
    }
    pub fn unit_pages(&self) -> u32 {
        self.unit_pages
    }
    pub fn units(&self) -> u32 {
        self.units
    }
    pub fn streams(&self) -> u32 {
        self.host_open.len() as u32
    }
    pub fn stats(&self) -> &FtlStats {
        &self.stats
    }
    /// Host page writes since the device was made, preconditioning included (never reset):
    /// what replay speed is counted in.
    pub fn host_pages_ever(&self) -> u64 {
        self.clock
    }
    pub fn waf_series(&self) -> &[WafPoint] {
        &self.waf_series
    }
    /// Erase count of every reclaim unit (each of its blocks was erased as often).
    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }
    /// Mapped logical pages.
    pub fn mapped_pages(&self) -> u64 {
        self.valid.iter().map(|&v| v as u64).sum()
    }
    /// Starts loading what a write or TRIM of `lba` will touch: its mapping entry (far), or
    /// the live bit and unit of the page it maps to now (near). A hint only.
    #[inline]
    pub fn prefetch(&self, lba: u64, near: bool) {
        let Some(entry) = self.l2p.get(lba as usize) else {
            return;
        };
        if !near {
            prefetch(entry);
        } else if *entry != NONE {
            prefetch(&self.live[(*entry / 64) as usize]);
            prefetch(&self.valid[self.unit_of(*entry) as usize]);
        }
    }

    /// Physical page holding `lba`, if any.
    pub fn lookup(&self, lba: u64) -> Option<u32> {
        self.l2p.get(lba as usize).copied().filter(|&p| p != NONE)
    }

    /// Zeroes the counters and the WAF series (the device state stays: used after
    /// preconditioning).
    pub fn reset_stats(&mut self) {
        let streams = self.host_open.len();
        self.stats = FtlStats {
            per_stream_host_pages: vec![0; streams],
            per_stream_gc_pages: vec![0; streams],
            ..Default::default()
        };
        self.waf_series.clear();
        self.waf_mark = (0, 0);
    }

    /// Turns recording of flash operations (for the timing model) on or off.
    pub fn set_recording(&mut self, on: bool) {
        self.record = on;
        self.ops.clear();
    }
    /// The operations recorded since the last call, oldest first.
    pub fn take_ops(&mut self, out: &mut Vec<FlashOp>) {
        out.clear();
        std::mem::swap(out, &mut self.ops);
    }

    fn check_lba(&self, lba: u64, pages: u64) -> Result<(), SsdError> {
        if lba
            .checked_add(pages)
            .is_none_or(|end| end > self.logical_pages as u64)
        {
            return Err(SsdError::OutOfRange {
                lba,
                pages,
                capacity: self.logical_pages as u64,
            });
        }
        Ok(())
    }
    fn check_stream(&self, stream: u32) -> Result<(), SsdError> {
        if stream as usize >= self.host_open.len() {
            return Err(SsdError::BadStream {
                stream,
                streams: self.host_open.len() as u32,
            });
        }
        Ok(())
    }

    /// Writes `pages` logical pages from `lba` on `stream`, as runs: the pages that fit in the
    /// stream's open unit are placed in one tight loop (no GC can run inside a unit, so this
    /// is page-by-page writing with the allocation and counters hoisted out of the loop).
    pub fn write(&mut self, lba: u64, pages: u64, stream: u32) -> Result<(), SsdError> {
        self.check_lba(lba, pages)?;
        self.check_stream(stream)?;
        let (mut l, end) = (lba as u32, (lba + pages) as u32);
        while l < end {
            if self.host_open[stream as usize].is_none() {
                // Opening a unit may run GC: the first page goes the page-by-page way.
                self.write_page_unchecked(l, stream as u8)?;
                l += 1;
                continue;
            }
            l = self.write_run(l, end, stream as u8);
        }
        Ok(())
    }

    /// Writes pages `l..end` (or as many as fit) into `stream`'s open unit; returns the first
    /// page not written.
    #[inline]
    fn write_run(&mut self, l: u32, end: u32, stream: u8) -> u32 {
        let s = stream as usize;
        let wp = self.host_open[s].expect("an open unit");
        let n = (end - l).min(self.unit_pages - wp.next);
        let first = wp.unit * self.unit_pages + wp.next;
        let mut dying = DyingRun::default();
        for i in 0..n {
            let (lba, ppn) = (l + i, first + i);
            // Invalidate first, as write_page_unchecked does.
            let old = self.l2p[lba as usize];
            if old != NONE {
                dying.add(self, old);
            }
            self.l2p[lba as usize] = ppn;
            self.p2l[ppn as usize] = lba;
            self.page_stream[ppn as usize] = stream;
            self.set_live(ppn);
            if self.record {
                self.ops.push(FlashOp::Program(ppn));
            }
        }
        dying.flush(self);
        // The run's pages are all in the open unit (no GC list holds it), counted at once.
        self.valid[wp.unit as usize] += n;
        let before = self.stats.host_write_pages;
        let st = &mut self.stats;
        st.host_write_pages += n as u64;
        st.per_stream_host_pages[s] += n as u64;
        self.clock += n as u64;
        if wp.next + n == self.unit_pages {
            self.host_open[s] = None;
            self.seal(wp.unit);
        } else {
            self.host_open[s] = Some(WritePoint {
                unit: wp.unit,
                next: wp.next + n,
            });
        }
        // The WAF points the run passed (no GC copy happened inside it).
        if let Some(passed) = before.checked_div(self.waf_interval) {
            let mut k = passed + 1;
            while k * self.waf_interval <= self.stats.host_write_pages {
                self.push_waf_point_at(k * self.waf_interval);
                k += 1;
            }
        }
        l + n
    }

    /// Writes one logical page (the hot path; `lba` and `stream` must be in range).
    #[inline]
    pub fn write_page(&mut self, lba: u32, stream: u32) -> Result<(), SsdError> {
        self.check_lba(lba as u64, 1)?;
        self.check_stream(stream)?;
        self.write_page_unchecked(lba, stream as u8)
    }

    #[inline]
    fn write_page_unchecked(&mut self, lba: u32, stream: u8) -> Result<(), SsdError> {
        // Invalidate first: GC triggered by this write must not copy the page it replaces.
        let old = self.l2p[lba as usize];
        if old != NONE {
            self.invalidate(old);
        }
        let ppn = self.alloc_host(stream)?;
        self.place(ppn, lba, stream);
        if self.record {
            self.ops.push(FlashOp::Program(ppn));
        }
        let s = &mut self.stats;
        s.host_write_pages += 1;
        s.per_stream_host_pages[stream as usize] += 1;
        self.clock += 1;
        if self.is_last_page(ppn) {
            self.host_open[stream as usize] = None;
            self.seal(self.unit_of(ppn));
        }
        if self.waf_interval != 0
            && self
                .stats
                .host_write_pages
                .is_multiple_of(self.waf_interval)
        {
            self.push_waf_point();
        }
        Ok(())
    }

    fn push_waf_point(&mut self) {
        self.push_waf_point_at(self.stats.host_write_pages);
    }

    /// The WAF point when `host` host pages were written (the current GC copy count).
    fn push_waf_point_at(&mut self, host: u64) {
        let flash = host + self.stats.gc_copy_pages;
        let (h0, f0) = self.waf_mark;
        self.waf_series.push(WafPoint {
            host_pages: host,
            interval: (flash - f0) as f64 / (host - h0) as f64,
            cumulative: flash as f64 / host as f64,
        });
        self.waf_mark = (host, flash);
    }

    /// Reads `pages` logical pages from `lba`.
    pub fn read(&mut self, lba: u64, pages: u64) -> Result<(), SsdError> {
        self.check_lba(lba, pages)?;
        for l in lba..lba + pages {
            let ppn = self.l2p[l as usize];
            if ppn == NONE {
                self.stats.host_read_unmapped_pages += 1;
            } else if self.record {
                self.ops.push(FlashOp::Read(ppn));
            }
            self.stats.host_read_pages += 1;
        }
        Ok(())
    }

    /// TRIM: the pages' contents are dead; GC will never copy them.
    pub fn trim(&mut self, lba: u64, pages: u64) -> Result<(), SsdError> {
        self.check_lba(lba, pages)?;
        let mut dying = DyingRun::default();
        for l in lba..lba + pages {
            let ppn = self.l2p[l as usize];
            if ppn != NONE {
                dying.add(self, ppn);
                self.l2p[l as usize] = NONE;
                self.stats.trim_invalidated_pages += 1;
            }
        }
        dying.flush(self);
        self.stats.host_trim_pages += pages;
        Ok(())
    }

    #[inline]
    fn unit_of(&self, ppn: u32) -> u32 {
        match self.unit_shift {
            Some(s) => ppn >> s,
            None => ppn / self.unit_pages,
        }
    }

    #[inline]
    fn is_last_page(&self, ppn: u32) -> bool {
        self.unit_of(ppn + 1) != self.unit_of(ppn)
    }

    #[inline]
    fn place(&mut self, ppn: u32, lba: u32, stream: u8) {
        self.l2p[lba as usize] = ppn;
        self.p2l[ppn as usize] = lba;
        self.page_stream[ppn as usize] = stream;
        self.set_live(ppn);
        let u = self.unit_of(ppn);
        self.valid[u as usize] += 1;
    }

    #[inline]
    fn is_live(&self, ppn: u32) -> bool {
        self.live[(ppn / 64) as usize] & (1 << (ppn % 64)) != 0
    }
    #[inline]
    fn set_live(&mut self, ppn: u32) {
        self.live[(ppn / 64) as usize] |= 1 << (ppn % 64);
    }
    #[inline]
    fn clear_live(&mut self, ppn: u32) {
        self.live[(ppn / 64) as usize] &= !(1 << (ppn % 64));
    }

    /// The first live page at or after `ppn` (there must be one).
    #[inline]
    fn next_live(&self, mut ppn: u32) -> u32 {
        loop {
            let bits = self.live[(ppn / 64) as usize] >> (ppn % 64);
            if bits != 0 {
                return ppn + bits.trailing_zeros();
            }
            ppn = (ppn / 64 + 1) * 64;
        }
    }

    /// The page no longer holds its LBA's data: only its live bit and its unit's count
    /// change (`p2l` keeps a stale entry, see the invariants).
    #[inline(always)]
    fn invalidate(&mut self, ppn: u32) {
        debug_assert!(self.is_live(ppn));
        self.clear_live(ppn);
        self.unit_loses(self.unit_of(ppn), 1);
    }

    /// Unit `u` holds `k` valid pages fewer (their live bits are already clear); a Full unit
    /// moves down `k` greedy buckets at once.
    #[inline(always)]
    fn unit_loses(&mut self, u: u32, k: u32) {
        let v = self.valid[u as usize];
        self.valid[u as usize] = v - k;
        if self.gc == GcPolicy::Greedy && self.state[u as usize] == UnitState::Full {
            let p = self.unit_pool[u as usize] as usize;
            self.bucket_unlink(p, u, v);
            self.bucket_push(p, u, v - k);
        }
    }

    /// Files unit `u` under `v` valid pages: first in its list (the next victim) for
    /// [`GcTie::Newest`], last for [`GcTie::Oldest`].
    #[inline(always)]
    fn bucket_push(&mut self, p: usize, u: u32, v: u32) {
        let pool = &mut self.pools[p];
        let (head, tail) = (pool.heads[v as usize], pool.tails[v as usize]);
        match self.gc_tie {
            GcTie::Newest => {
                self.next[u as usize] = head;
                self.prev[u as usize] = NONE;
                if head == NONE {
                    pool.tails[v as usize] = u;
                } else {
                    self.prev[head as usize] = u;
                }
                pool.heads[v as usize] = u;
            }
            GcTie::Oldest => {
                self.prev[u as usize] = tail;
                self.next[u as usize] = NONE;
                if tail == NONE {
                    pool.heads[v as usize] = u;
                } else {
                    self.next[tail as usize] = u;
                }
                pool.tails[v as usize] = u;
            }
        }
        if v < pool.min_valid {
            pool.min_valid = v;
        }
    }

    #[inline(always)]
    fn bucket_unlink(&mut self, p: usize, u: u32, v: u32) {
        let (n, pr) = (self.next[u as usize], self.prev[u as usize]);
        if pr == NONE {
            self.pools[p].heads[v as usize] = n;
        } else {
            self.next[pr as usize] = n;
        }
        if n == NONE {
            self.pools[p].tails[v as usize] = pr;
        } else {
            self.prev[n as usize] = pr;
        }
    }

    /// A write point's unit is full: it becomes a GC candidate.
    fn seal(&mut self, u: u32) {
        debug_assert_eq!(self.state[u as usize], UnitState::Open);
        self.state[u as usize] = UnitState::Full;
        self.sealed_at[u as usize] = self.clock;
        let p = self.unit_pool[u as usize] as usize;
        match self.gc {
            GcPolicy::Greedy => self.bucket_push(p, u, self.valid[u as usize]),
            GcPolicy::Fifo => self.pools[p].fifo.push_back(u),
            GcPolicy::Random | GcPolicy::DChoices | GcPolicy::CostBenefit => {
                let m = &mut self.pools[p].members;
                self.member_pos[u as usize] = m.len() as u32;
                m.push(u);
            }
        }
    }

    fn member_remove(&mut self, p: usize, u: u32) {
        let m = &mut self.pools[p].members;
        let i = self.member_pos[u as usize] as usize;
        let last = m.pop().expect("member list holds the unit");
        if last != u {
            m[i] = last;
            self.member_pos[last as usize] = i as u32;
        }
        self.member_pos[u as usize] = NONE;
    }

    /// Picks a victim in pool `p` and removes it from the victim index.
    fn select_victim(&mut self, p: usize) -> Option<u32> {
        match self.gc {
            GcPolicy::Greedy => {
                let pool = &mut self.pools[p];
                let mut v = pool.min_valid;
                while (v as usize) < pool.heads.len() && pool.heads[v as usize] == NONE {
                    v += 1;
                }
                if v as usize >= pool.heads.len() {
                    pool.min_valid = self.unit_pages + 1;
                    return None;
                }
                pool.min_valid = v;
                let u = pool.heads[v as usize];
                self.bucket_unlink(p, u, v);
                Some(u)
            }
            GcPolicy::Fifo => self.pools[p].fifo.pop_front(),
            GcPolicy::Random => {
                let n = self.pools[p].members.len();
                if n == 0 {
                    return None;
                }
                let u = self.pools[p].members[self.rng.gen_range(0..n)];
                self.member_remove(p, u);
                Some(u)
            }
            GcPolicy::DChoices => {
                let n = self.pools[p].members.len();
                if n == 0 {
                    return None;
                }
                let mut best = NONE;
                for _ in 0..self.d_choices {
                    let u = self.pools[p].members[self.rng.gen_range(0..n)];
                    if best == NONE || self.valid[u as usize] < self.valid[best as usize] {
                        best = u;
                    }
                }
                self.member_remove(p, best);
                Some(best)
            }
            GcPolicy::CostBenefit => {
                let mut best = NONE;
                let mut best_score = f64::NEG_INFINITY;
                let up = self.unit_pages as f64;
                for &u in &self.pools[p].members {
                    let util = self.valid[u as usize] as f64 / up;
                    let age = (self.clock - self.sealed_at[u as usize]) as f64 + 1.0;
                    let score = (1.0 - util) * age / (1.0 + util);
                    if score > best_score {
                        best_score = score;
                        best = u;
                    }
                }
                if best == NONE {
                    return None;
                }
                self.member_remove(p, best);
                Some(best)
            }
        }
    }

    /// A physical page for a host write on `stream`, running GC first if the pool is low.
    #[inline]
    fn alloc_host(&mut self, stream: u8) -> Result<u32, SsdError> {
        let s = stream as usize;
        loop {
            if let Some(wp) = &mut self.host_open[s] {
                let ppn = wp.unit * self.unit_pages + wp.next;
                wp.next += 1;
                return Ok(ppn);
            }
            let p = self.stream_pool[s] as usize;
            self.collect(p)?;
            // With GcDest::SameStream the GC may have opened this stream's unit meanwhile.
            if self.host_open[s].is_some() {
                continue;
            }
            let u = self.take_free(p);
            self.host_open[s] = Some(WritePoint { unit: u, next: 0 });
        }
    }

    fn take_free(&mut self, p: usize) -> u32 {
        let u = self.pools[p]
            .free
            .pop_front()
            .expect("GC keeps at least one free unit per pool");
        debug_assert_eq!(self.state[u as usize], UnitState::Free);
        self.state[u as usize] = UnitState::Open;
        u
    }

    /// GC in pool `p` until it has `low_water` free units.
    fn collect(&mut self, p: usize) -> Result<(), SsdError> {
        let mut steps_without_gain = 0u64;
        while self.pools[p].free.len() < self.low_water {
            let before = self.pools[p].free.len();
            let victim = self
                .select_victim(p)
                .ok_or(SsdError::NoVictim { pool: p })?;
            self.clean(victim);
            if self.pools[p].free.len() <= before {
                // A fully valid victim gains nothing; FIFO/random may meet a few in a row,
                // but a whole pool of them means the device cannot make room.
                steps_without_gain += 1;
                if steps_without_gain > self.units as u64 {
                    return Err(SsdError::NoVictim { pool: p });
                }
            }
        }
        Ok(())
    }

    /// Copies the victim's valid pages out and erases it.
    fn clean(&mut self, victim: u32) {
        let p = self.unit_pool[victim as usize] as usize;
        let base = victim * self.unit_pages;
        let mut left = self.valid[victim as usize];
        if left == 0 {
            self.stats.gc_empty_victims += 1;
        }
        // The copies write their LBAs' mapping entries, scattered over the table: a cursor
        // runs GC_AHEAD live pages ahead and starts loading each one's entry.
        const GC_AHEAD: u32 = 8;
        let (mut ahead, mut ahead_left) = (base, left);
        let mut look_ahead = |ftl: &Self| {
            if ahead_left > 0 {
                let a = ftl.next_live(ahead);
                prefetch(&ftl.l2p[ftl.p2l[a as usize] as usize]);
                (ahead, ahead_left) = (a + 1, ahead_left - 1);
            }
        };
        for _ in 0..GC_AHEAD {
            look_ahead(self);
        }
        let mut from = base;
        while left > 0 {
            look_ahead(self);
            // `left` live pages remain in the victim, so the next one is inside it.
            let src = self.next_live(from);
            debug_assert!(src < base + self.unit_pages);
            from = src + 1;
            let lba = self.p2l[src as usize];
            left -= 1;
            let stream = self.page_stream[src as usize];
            let dst = self.alloc_gc(p, stream);
            self.clear_live(src);
            self.place(dst, lba, stream);
            if self.record {
                self.ops.push(FlashOp::Read(src));
                self.ops.push(FlashOp::Program(dst));
            }
            self.stats.gc_copy_pages += 1;
            self.stats.per_stream_gc_pages[stream as usize] += 1;
            if self.is_last_page(dst) {
                match self.gc_dest {
                    GcDest::Separate => self.pools[p].gc_open = None,
                    GcDest::SameStream => self.host_open[stream as usize] = None,
                }
                self.seal(self.unit_of(dst));
            }
        }
        self.valid[victim as usize] = 0;
        self.state[victim as usize] = UnitState::Free;
        self.erase_count[victim as usize] += 1;
        self.stats.erases += 1;
        if self.record {
            self.ops.push(FlashOp::Erase(victim));
        }
        // Free units are reused oldest-erased first, which spreads erases evenly.
        self.pools[p].free.push_back(victim);
    }

    fn alloc_gc(&mut self, p: usize, stream: u8) -> u32 {
        let wp = match self.gc_dest {
            GcDest::Separate => self.pools[p].gc_open,
            GcDest::SameStream => self.host_open[stream as usize],
        };
        let mut wp = match wp {
            Some(w) => w,
            None => WritePoint {
                unit: self.take_free(p),
                next: 0,
            },
        };
        let ppn = wp.unit * self.unit_pages + wp.next;
        wp.next += 1;
        match self.gc_dest {
            GcDest::Separate => self.pools[p].gc_open = Some(wp),
            GcDest::SameStream => self.host_open[stream as usize] = Some(wp),
        }
        ppn
    }

    /// Checks every invariant listed at the top of this file (O(pages); tests only).
    pub fn check_invariants(&self) {
        let mut valid = vec![0u32; self.units as usize];
        for (lba, &ppn) in self.l2p.iter().enumerate() {
            if ppn != NONE {
                assert!(self.is_live(ppn), "lba {lba} maps to dead page {ppn}");
                assert_eq!(
                    self.p2l[ppn as usize], lba as u32,
                    "p2l/l2p disagree at lba {lba}"
                );
                valid[self.unit_of(ppn) as usize] += 1;
            }
        }
        let live: u64 = self.live.iter().map(|w| w.count_ones() as u64).sum();
        assert_eq!(
            live,
            valid.iter().map(|&v| v as u64).sum::<u64>(),
            "live pages"
        );
        assert_eq!(valid, self.valid, "valid counts");
        let mut seen = vec![0u8; self.units as usize];
        for (p, pool) in self.pools.iter().enumerate() {
            for &u in &pool.free {
                assert_eq!(self.state[u as usize], UnitState::Free);
                assert_eq!(self.valid[u as usize], 0);
                assert_eq!(self.unit_pool[u as usize] as usize, p);
                seen[u as usize] += 1;
            }
            let full: Vec<u32> = match self.gc {
                GcPolicy::Greedy => {
                    let mut v = Vec::new();
                    for (cnt, &h) in pool.heads.iter().enumerate() {
                        let (mut u, mut last) = (h, NONE);
                        while u != NONE {
                            assert_eq!(
                                self.valid[u as usize] as usize, cnt,
                                "greedy bucket of unit {u}"
                            );
                            assert!(cnt as u32 >= pool.min_valid);
                            assert_eq!(self.prev[u as usize], last, "greedy list links");
                            v.push(u);
                            (last, u) = (u, self.next[u as usize]);
                        }
                        assert_eq!(pool.tails[cnt], last, "greedy list tail, count {cnt}");
                    }
                    v
                }
                GcPolicy::Fifo => pool.fifo.iter().copied().collect(),
                _ => pool.members.clone(),
            };
            for u in full {
                assert_eq!(self.state[u as usize], UnitState::Full);
                seen[u as usize] += 1;
            }
            if let Some(w) = pool.gc_open {
                assert_eq!(self.state[w.unit as usize], UnitState::Open);
                seen[w.unit as usize] += 1;
            }
        }
        for w in self.host_open.iter().flatten() {
            assert_eq!(self.state[w.unit as usize], UnitState::Open);
            assert!(w.next < self.unit_pages);
            seen[w.unit as usize] += 1;
        }
        for (u, &n) in seen.iter().enumerate() {
            assert_eq!(
                n, 1,
                "unit {u} is in {n} places (state {:?})",
                self.state[u]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn small(gc: GcPolicy, dest: GcDest) -> SsdConfig {
        let mut c = SsdConfig::from_physical(64, 16, 0.25).unwrap();
        c.streams = 3;
        c.gc = gc;
        c.gc_dest = dest;
        c.d_choices = 3;
        c
    }

    #[test]
    fn random_ops_keep_invariants_for_every_policy() {
        for gc in [
            GcPolicy::Greedy,
            GcPolicy::Fifo,
            GcPolicy::Random,
            GcPolicy::DChoices,
            GcPolicy::CostBenefit,
        ] {
            let ties: &[GcTie] = match gc {
                GcPolicy::Greedy => &[GcTie::Newest, GcTie::Oldest],
                _ => &[GcTie::Newest],
            };
            for (dest, &tie) in [GcDest::Separate, GcDest::SameStream]
                .into_iter()
                .flat_map(|d| ties.iter().map(move |t| (d, t)))
            {
                let mut cfg = small(gc, dest);
                cfg.gc_tie = tie;
                let mut f = Ftl::new(&cfg).unwrap();
                let mut rng = StdRng::seed_from_u64(7);
                let n = f.logical_pages();
                for i in 0..20_000u64 {
                    let lba = rng.gen_range(0..n);
                    match rng.gen_range(0..10) {
                        0 => f.trim(lba, 1).unwrap(),
                        1 => f.read(lba, 1).unwrap(),
                        _ => f.write(lba, 1, rng.gen_range(0..3)).unwrap(),
                    }
                    if i % 2000 == 0 {
                        f.check_invariants();
                    }
                }
                f.check_invariants();
                let s = f.stats();
                assert!(s.gc_copy_pages > 0 && s.erases > 0, "{gc:?}: GC never ran");
                assert_eq!(s.per_stream_gc_pages.iter().sum::<u64>(), s.gc_copy_pages);
                assert_eq!(
                    s.per_stream_host_pages.iter().sum::<u64>(),
                    s.host_write_pages
                );
            }
        }
    }

    #[test]
    fn multi_page_ops_end_as_page_by_page_ops() {
        // Runs (one bucket move per unit a run's old copies lie in) against the same writes
        // and TRIMs page by page: same counters, victims, erase counts and WAF series.
        for tie in [GcTie::Newest, GcTie::Oldest] {
            let mut cfg = small(GcPolicy::Greedy, GcDest::Separate);
            cfg.gc_tie = tie;
            cfg.waf_interval = 64;
            let (mut runs, mut pages) = (Ftl::new(&cfg).unwrap(), Ftl::new(&cfg).unwrap());
            let mut rng = StdRng::seed_from_u64(11);
            let n = runs.logical_pages();
            for _ in 0..5_000 {
                let len = rng.gen_range(1..24u64);
                let lba = rng.gen_range(0..n - len);
                let stream = rng.gen_range(0..3);
                if rng.gen_range(0..8) == 0 {
                    runs.trim(lba, len).unwrap();
                    for l in lba..lba + len {
                        pages.trim(l, 1).unwrap();
                    }
                } else {
                    runs.write(lba, len, stream).unwrap();
                    for l in lba..lba + len {
                        pages.write_page(l as u32, stream).unwrap();
                    }
                }
            }
            runs.check_invariants();
            assert_eq!(runs.stats(), pages.stats(), "{tie:?}");
            assert_eq!(runs.erase_counts(), pages.erase_counts(), "{tie:?}");
            assert_eq!(runs.waf_series(), pages.waf_series(), "{tie:?}");
            assert_eq!(runs.l2p, pages.l2p, "{tie:?}");
            assert!(runs.stats().gc_copy_pages > 0, "GC ran");
        }
    }

    #[test]
    fn greedy_ties_go_to_the_newest_or_the_oldest_unit() {
        for (tie, want) in [(GcTie::Newest, [9, 5, 7]), (GcTie::Oldest, [5, 9, 7])] {
            let mut cfg = small(GcPolicy::Greedy, GcDest::Separate);
            cfg.gc_tie = tie;
            let mut f = Ftl::new(&cfg).unwrap();
            // Units 5 then 9 reach 3 valid pages; unit 7 has 4.
            f.bucket_push(0, 5, 3);
            f.bucket_push(0, 7, 4);
            f.bucket_push(0, 9, 3);
            let got: Vec<u32> = (0..3).map(|_| f.select_victim(0).unwrap()).collect();
            assert_eq!(got, want, "{tie:?}");
            assert_eq!(f.select_victim(0), None);
        }
    }

    #[test]
    fn data_survives_gc() {
        let cfg = small(GcPolicy::Greedy, GcDest::Separate);
        let mut f = Ftl::new(&cfg).unwrap();
        let n = f.logical_pages();
        // Write everything, then hammer a small range so GC moves the cold rest repeatedly.
        f.write(0, n, 0).unwrap();
        for i in 0..50_000u64 {
            f.write(i % 37, 1, 1).unwrap();
        }
        for lba in 0..n {
            assert!(f.lookup(lba).is_some(), "lba {lba} lost");
        }
        assert_eq!(f.mapped_pages(), n);
        f.check_invariants();
    }

    #[test]
    fn trimmed_pages_are_never_copied() {
        let cfg = small(GcPolicy::Greedy, GcDest::Separate);
        let mut f = Ftl::new(&cfg).unwrap();
        let n = f.logical_pages();
        f.write(0, n, 0).unwrap();
        f.trim(0, n).unwrap();
        assert_eq!(f.mapped_pages(), 0);
        assert_eq!(f.stats().trim_invalidated_pages, n);
        f.reset_stats();
        // Every victim is now empty of valid data until the new writes wrap around.
        f.write(0, n / 2, 0).unwrap();
        assert_eq!(f.stats().gc_copy_pages, 0);
        assert_eq!(f.stats().write_amplification(), 1.0);
    }

    #[test]
    fn same_stream_gc_keeps_units_single_stream() {
        let cfg = small(GcPolicy::Greedy, GcDest::SameStream);
        let mut f = Ftl::new(&cfg).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        let n = f.logical_pages();
        for _ in 0..30_000 {
            let lba = rng.gen_range(0..n);
            // Each LBA always goes to the same stream, so every unit must hold one stream.
            f.write(lba, 1, (lba % 3) as u32).unwrap();
        }
        for u in 0..f.units() {
            let base = (u * f.unit_pages) as usize;
            let streams: std::collections::BTreeSet<u8> = (base..base + f.unit_pages as usize)
                .filter(|&p| f.is_live(p as u32))
                .map(|p| f.page_stream[p])
                .collect();
            assert!(streams.len() <= 1, "unit {u} mixes streams {streams:?}");
        }
    }

    #[test]
    fn out_of_range_and_bad_stream_are_errors() {
        let cfg = small(GcPolicy::Greedy, GcDest::Separate);
        let mut f = Ftl::new(&cfg).unwrap();
        let n = f.logical_pages();
        assert!(matches!(f.write(n, 1, 0), Err(SsdError::OutOfRange { .. })));
        assert!(matches!(
            f.write(n - 1, 2, 0),
            Err(SsdError::OutOfRange { .. })
        ));
        assert!(matches!(
            f.trim(u64::MAX, 2),
            Err(SsdError::OutOfRange { .. })
        ));
        assert!(matches!(f.write(0, 1, 3), Err(SsdError::BadStream { .. })));
    }

    #[test]
    fn waf_series_has_a_point_per_interval() {
        let mut cfg = small(GcPolicy::Greedy, GcDest::Separate);
        cfg.waf_interval = 100;
        let mut f = Ftl::new(&cfg).unwrap();
        for i in 0..1050u64 {
            f.write(i % f.logical_pages(), 1, 0).unwrap();
        }
        assert_eq!(f.waf_series().len(), 10);
        assert_eq!(f.waf_series()[9].host_pages, 1000);
    }
}
