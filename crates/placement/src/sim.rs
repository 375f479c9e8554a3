//! Offline replay of an event stream with a placement policy and a TRIM mode on the `ssd`
//! crate's simulated device (feature `sim`; `flashdoc placement replay` and the tests).
//!
//! Mapping of events onto the device ([`apply_to_device`], the same as `flashdoc ssd replay`
//! does for event traces): a write goes through the filesystem layout ([`FsReplayer`]) on the
//! stream the policy chose; removing or truncating a file frees its pages (trimmed when the
//! layout was built with discard); a read reads the LBAs the file's range is mapped to (it
//! costs device time, not writes); creates, renames and checkpoints touch nothing. `Free`
//! events reach the device only through the TRIM batcher: a released extent is punched out of
//! the file (`fallocate(PUNCH_HOLE)`), which the filesystem forwards as TRIM when it discards.

use crate::cache::prefetch;
use crate::event::Event;
use crate::policy::{Lifetimes, Policy, WriteLife};
use crate::trim::{ReplaceTrimmer, TrimBatcher, TrimExtent, TrimStats, TrimWhen};
use ssd::replay::{FsReplayer, LayoutStats, PeakUsage, TraceExtent};
use ssd::{BlockDevice, Ssd, SsdError};

/// What the events of a replay were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventCounts {
    pub writes: u64,
    pub reads: u64,
    pub frees: u64,
    pub removes: u64,
    pub truncates: u64,
    pub creates: u64,
    pub other: u64,
}

/// Applies one event to the device through the layout, the write on `stream`. `Free` punches
/// a hole only with `punch_frees` (the TRIM batcher normally decides).
pub fn apply_to_device(
    fs: &mut FsReplayer,
    dev: &mut impl BlockDevice,
    ev: &Event,
    stream: u8,
    punch_frees: bool,
    n: &mut EventCounts,
) -> Result<(), SsdError> {
    match ev {
        Event::Write(w) => {
            n.writes += 1;
            fs.write(
                dev,
                w.time_ns,
                w.file as u64,
                w.offset,
                w.len as u64,
                stream as u32,
            )
        }
        Event::Read {
            time_ns,
            file,
            offset,
            len,
        } => {
            n.reads += 1;
            fs.read(dev, *time_ns, *file as u64, *offset, *len as u64)
        }
        Event::Free {
            time_ns,
            file,
            offset,
            len,
        } => {
            n.frees += 1;
            if punch_frees {
                fs.punch(dev, *time_ns, *file as u64, *offset, *len)
            } else {
                Ok(())
            }
        }
        Event::FileRemove { time_ns, file } => {
            n.removes += 1;
            fs.remove(dev, *time_ns, *file as u64)
        }
        Event::FileTruncate { time_ns, file, len } => {
            n.truncates += 1;
            fs.truncate(dev, *time_ns, *file as u64, *len)
        }
        Event::FileCreate { .. } => {
            n.creates += 1;
            Ok(())
        }
        Event::FileRename { .. }
        | Event::CheckpointBegin { .. }
        | Event::CheckpointCommit { .. } => {
            n.other += 1;
            Ok(())
        }
    }
}

/// The peak footprint of an event stream's files (for sizing a device to a trace). With
/// `punch_frees`, freed extents count as deallocated. Events by value or by reference.
pub fn scan_events<I, B, E>(events: I, punch_frees: bool) -> Result<TraceExtent, E>
where
    I: IntoIterator<Item = Result<B, E>>,
    B: std::borrow::Borrow<Event>,
    E: From<SsdError>,
{
    let mut peak = PeakUsage::new();
    let mut records = 0;
    for ev in events {
        let ev = ev?;
        records += 1;
        match *ev.borrow() {
            Event::Write(ref w) => peak.write(w.file as u64, w.offset, w.len as u64)?,
            Event::Free {
                file, offset, len, ..
            } if punch_frees => peak.punch(file as u64, offset, len),
            Event::FileRemove { file, .. } => peak.remove(file as u64),
            Event::FileTruncate { file, len, .. } => peak.truncate(file as u64, len),
            _ => {}
        }
    }
    Ok(TraceExtent {
        records,
        lba_end: 0,
        peak_file_pages: peak.peak_pages(),
    })
}

/// TRIM of freed space during a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimConfig {
    /// Trim frequency k (extents per batch); `None`: no TRIM at all.
    pub batch: Option<usize>,
    pub when: TrimWhen,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    pub trim: TrimConfig,
    /// Call the policy's `end_of_load` before the event of this index (0-based); `None`: the
    /// policies' automatic fallback.
    pub end_of_load_at: Option<u64>,
    /// Reset the device's counters before the event of this index (0: never).
    pub reset_stats_at: u64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            trim: TrimConfig {
                batch: Some(20_000),
                when: TrimWhen::Free,
            },
            end_of_load_at: None,
            reset_stats_at: 0,
        }
    }
}

enum Trimmer {
    Off,
    Free(TrimBatcher),
    Replace(ReplaceTrimmer),
}

impl Trimmer {
    fn new(cfg: TrimConfig) -> Self {
        match cfg.batch {
            None => Trimmer::Off,
            Some(k) => match cfg.when {
                TrimWhen::Free => Trimmer::Free(TrimBatcher::new(k)),
                TrimWhen::Replace => Trimmer::Replace(ReplaceTrimmer::new(k)),
            },
        }
    }
}

/// The policy-independent half of a replay: the TRIM batcher, the filesystem layout and the
/// block device behind them. The replay runs it with the simulated SSD; the oracle's pre-pass
/// runs the very same pipeline with a [`DeathTracker`], so both see every LBA written and
/// trimmed at the same moment.
pub struct FsPipeline<D> {
    fs: FsReplayer,
    dev: D,
    trimmer: Trimmer,
    counts: EventCounts,
    buf: Vec<TrimExtent>,
}

impl<D: BlockDevice> FsPipeline<D> {
    pub fn new(dev: D, fs: FsReplayer, trim: TrimConfig) -> Self {
        FsPipeline {
            fs,
            dev,
            trimmer: Trimmer::new(trim),
            counts: EventCounts::default(),
            buf: Vec::new(),
        }
    }

    pub fn device(&self) -> &D {
        &self.dev
    }

    /// One event, a write on `stream`: the batcher sees it first (a write cancels pending
    /// trims it overlaps), then the layout and the device, then the trims it released.
    pub fn apply(&mut self, ev: &Event, stream: u8) -> Result<(), SsdError> {
        self.buf.clear();
        match &mut self.trimmer {
            Trimmer::Off => {}
            Trimmer::Free(t) => t.observe(ev, &mut self.buf),
            Trimmer::Replace(t) => t.observe(ev, &mut self.buf),
        }
        apply_to_device(
            &mut self.fs,
            &mut self.dev,
            ev,
            stream,
            false,
            &mut self.counts,
        )?;
        self.punch(ev.time_ns())
    }

    fn punch(&mut self, time_ns: u64) -> Result<(), SsdError> {
        for e in std::mem::take(&mut self.buf) {
            self.fs
                .punch(&mut self.dev, time_ns, e.file as u64, e.offset, e.len)?;
        }
        Ok(())
    }

    /// Releases pending TRIMs; returns the batcher's statistics, the layout's and the device.
    pub fn finish(mut self) -> Result<(Option<TrimStats>, LayoutStats, EventCounts, D), SsdError> {
        self.buf.clear();
        let trim = match &mut self.trimmer {
            Trimmer::Off => None,
            Trimmer::Free(t) => {
                t.flush(&mut self.buf);
                Some(t.stats())
            }
            Trimmer::Replace(t) => {
                t.flush(&mut self.buf);
                Some(t.stats())
            }
        };
        self.punch(FINAL_TRIM_NS)?;
        Ok((trim, self.fs.stats(), self.counts, self.dev))
    }
}

/// The result of one replay.
#[derive(Clone, Debug)]
pub struct ReplayOutcome {
    pub policy: &'static str,
    pub events: u64,
    /// Write amplification from the first checkpoint commit at or after the run phase's start
    /// (the later of `reset_stats_at` and `end_of_load_at`) to the end: the whole-run WAF
    /// includes the device's start-up transient (a preconditioned device's first GC passes,
    /// the load's tail), this one leaves it out. `None` without such a checkpoint or writes
    /// after it.
    pub waf_from_first_checkpoint: Option<f64>,
    pub counts: EventCounts,
    pub trim: Option<TrimStats>,
    pub layout: LayoutStats,
    /// Every host page the device was written, preconditioning and passes before a stats
    /// reset included (the report's counters may start later): replay speed counts these.
    pub device_host_pages: u64,
    pub report: ssd::Report,
    /// The oracles' pre-pass this replay used (`None` for online policies).
    pub oracle_prepass: Option<OraclePrepass>,
}

/// What an oracle's pre-pass cost: computed once per device plan and shared by `oracle` and
/// `oracle-death`. Replay speed charges its whole time to each oracle that uses it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OraclePrepass {
    /// Wall time of the pre-pass (every write's death, the oracle's streams not included).
    pub seconds: f64,
    /// An earlier replay on the same plan computed it: this replay's own time does not
    /// include it.
    pub shared: bool,
}

/// The policy's side of a replay, the same whether the device ops come from the layout as
/// the events arrive ([`Replayer`]) or from a [`DevicePlan`]: asks the policy for each
/// write's stream, shows it the other events, calls `end_of_load` and resets the device's
/// counters at their events, and notes the counters at the run phase's first checkpoint.
struct PolicyDriver {
    policy: Box<dyn Policy>,
    cfg: ReplayConfig,
    index: u64,
    /// (host pages, GC copies) at the first checkpoint commit of the run phase.
    at_first_checkpoint: Option<(u64, u64)>,
}

impl PolicyDriver {
    fn new(policy: Box<dyn Policy>, cfg: ReplayConfig) -> Self {
        PolicyDriver {
            policy,
            cfg,
            index: 0,
            at_first_checkpoint: None,
        }
    }

    /// Before the event's device ops: its stream (0 for events that are not writes).
    #[inline]
    fn before(&mut self, ev: &Event, dev: &mut Ssd) -> Result<u8, SsdError> {
        if self.cfg.end_of_load_at == Some(self.index) {
            self.policy.end_of_load();
        }
        if self.cfg.reset_stats_at > 0 && self.cfg.reset_stats_at == self.index {
            dev.reset_stats();
        }
        self.index += 1;
        match ev {
            // A read changes no page's life: no policy is shown one, so reads in a trace
            // leave every policy's choices (and so its WAF) as they were without them.
            Event::Read { .. } => Ok(0),
            Event::Write(w) => {
                let s = self.policy.place(w);
                let max = dev.config().streams;
                if s as u32 >= max {
                    return Err(SsdError::Layout(format!(
                        "policy {} chose stream {s} on a device with {max} streams",
                        self.policy.name()
                    )));
                }
                Ok(s)
            }
            other => {
                self.policy.observe(other);
                Ok(0)
            }
        }
    }

    /// After the event's device ops.
    #[inline]
    fn after(&mut self, ev: &Event, dev: &Ssd) {
        let run_start = self
            .cfg
            .reset_stats_at
            .max(self.cfg.end_of_load_at.unwrap_or(0));
        if self.at_first_checkpoint.is_none()
            && self.index > run_start
            && matches!(ev, Event::CheckpointCommit { .. })
        {
            let s = dev.stats();
            self.at_first_checkpoint = Some((s.host_write_pages, s.gc_copy_pages));
        }
    }

    fn outcome(
        self,
        trim: Option<TrimStats>,
        layout: LayoutStats,
        counts: EventCounts,
        dev: &Ssd,
    ) -> ReplayOutcome {
        let waf_from_first_checkpoint = self.at_first_checkpoint.and_then(|(host, gc)| {
            let s = dev.stats();
            let host = s.host_write_pages.checked_sub(host)?;
            let gc = s.gc_copy_pages.checked_sub(gc)?;
            (host > 0).then(|| (host + gc) as f64 / host as f64)
        });
        ReplayOutcome {
            policy: self.policy.name(),
            events: self.index,
            waf_from_first_checkpoint,
            counts,
            trim,
            layout,
            device_host_pages: dev.ftl().host_pages_ever(),
            report: dev.report(),
            oracle_prepass: None,
        }
    }
}

/// Replays events one at a time (so a caller can stream a trace file and show progress).
pub struct Replayer {
    driver: PolicyDriver,
    pipe: FsPipeline<Ssd>,
}

impl Replayer {
    pub fn new(policy: Box<dyn Policy>, dev: Ssd, fs: FsReplayer, cfg: ReplayConfig) -> Self {
        Replayer {
            driver: PolicyDriver::new(policy, cfg),
            pipe: FsPipeline::new(dev, fs, cfg.trim),
        }
    }

    pub fn device(&self) -> &Ssd {
        self.pipe.device()
    }
    pub fn events(&self) -> u64 {
        self.driver.index
    }

    pub fn apply(&mut self, ev: &Event) -> Result<(), SsdError> {
        let stream = self.driver.before(ev, &mut self.pipe.dev)?;
        self.pipe.apply(ev, stream)?;
        self.driver.after(ev, &self.pipe.dev);
        Ok(())
    }

    /// Releases pending TRIMs and reports.
    pub fn finish(self) -> Result<ReplayOutcome, SsdError> {
        let (trim, layout, counts, dev) = self.pipe.finish()?;
        Ok(self.driver.outcome(trim, layout, counts, &dev))
    }
}

/// Replays an in-memory event list (tests, synthetic traces).
pub fn replay_events(
    events: &[Event],
    policy: Box<dyn Policy>,
    dev: Ssd,
    fs: FsReplayer,
    cfg: ReplayConfig,
) -> Result<ReplayOutcome, SsdError> {
    let mut r = Replayer::new(policy, dev, fs, cfg);
    for ev in events {
        r.apply(ev)?;
    }
    r.finish()
}

const NO_OWNER: u32 = u32::MAX;

/// A block device that keeps no data but knows, for every LBA, which write holds it, and so
/// when each write dies on the device: when its last page is overwritten (by any file: the
/// filesystem reuses freed LBAs) or trimmed. Without discard, a deleted file's pages stay
/// valid on the device until their LBAs are written again — exactly what the device counts.
///
/// The clock is host pages written to the device.
pub struct DeathTracker {
    owner: Vec<u32>,
    lifetimes: Lifetimes,
    current: u32,
}

impl DeathTracker {
    pub fn new(logical_pages: u64) -> Self {
        DeathTracker {
            owner: vec![NO_OWNER; logical_pages as usize],
            lifetimes: Lifetimes::default(),
            current: NO_OWNER,
        }
    }

    /// The next writes submitted belong to a new trace write.
    fn begin_write(&mut self) {
        let l = &mut self.lifetimes;
        assert!(
            l.writes.len() < NO_OWNER as usize,
            "too many writes to track"
        );
        self.current = l.writes.len() as u32;
        l.writes.push(WriteLife {
            death: u64::MAX,
            pages: 0,
            live: 0,
        });
    }

    /// The pages `lbas` stop holding their writes' data, page `i` of them at `clock(i)`;
    /// they then hold write `now` (`NO_OWNER`: nothing). A run of pages of the same old
    /// write costs one visit to that write's record (a cache miss: it was written long
    /// ago), not one per page; its count can only reach zero at the run's last page.
    #[inline]
    fn kill_range(&mut self, lbas: std::ops::Range<usize>, now: u32, clock: impl Fn(usize) -> u64) {
        let owner = &mut self.owner[lbas.clone()];
        let mut i = 0;
        while i < owner.len() {
            let w = owner[i];
            let run = owner[i..].iter().take_while(|&&o| o == w).count();
            owner[i..i + run].fill(now);
            i += run;
            if w == NO_OWNER {
                continue;
            }
            let life = &mut self.lifetimes.writes[w as usize];
            debug_assert!(
                life.live as usize >= run,
                "write {w} has too few live pages"
            );
            life.live -= run as u32;
            if life.live == 0 {
                life.death = clock(i - 1);
            }
        }
    }

    /// Room for this many more trace writes (the pre-pass knows how many come).
    fn reserve(&mut self, writes: usize) {
        self.lifetimes.writes.reserve(writes);
    }

    pub fn finish(self) -> Lifetimes {
        self.lifetimes
    }

    /// One planned op: a write (of the current trace write) or a TRIM; a read changes
    /// nothing.
    #[inline]
    fn apply(&mut self, op: &PlannedOp) {
        let lbas = op.lba as usize..(op.lba + op.pages) as usize;
        let clock = self.lifetimes.clock;
        if op.kind == ssd::OpKind::Read {
            return;
        }
        if op.kind == ssd::OpKind::Write {
            let w = self.current;
            assert_ne!(w, NO_OWNER, "a device write outside a trace write");
            // Page i of the op is written at clock + i; a write's own pages are distinct
            // LBAs, so none of them kills another.
            self.kill_range(lbas, w, |i| clock + i as u64);
            let life = &mut self.lifetimes.writes[w as usize];
            life.live += op.pages;
            life.pages += op.pages;
            self.lifetimes.clock += op.pages as u64;
        } else {
            self.kill_range(lbas, NO_OWNER, |_| clock);
        }
    }

    /// Starts loading the record of the write that holds `lba` (a cache miss otherwise
    /// paid when an op `lba` begins kills it); `owner[lba]` itself is loaded by
    /// [`prefetch`] further ahead.
    #[inline]
    fn prefetch_owner(&self, lba: u32) {
        let w = self.owner[lba as usize];
        if let Some(life) = self.lifetimes.writes.get(w as usize) {
            prefetch(life);
        }
    }
}

impl BlockDevice for DeathTracker {
    fn submit(&mut self, op: &ssd::HostOp) -> Result<Option<u64>, SsdError> {
        let end = op.lba + op.pages;
        if end > self.owner.len() as u64 {
            return Err(SsdError::Layout(format!(
                "LBA {} is past the device's {} pages",
                end - 1,
                self.owner.len()
            )));
        }
        if op.kind == ssd::OpKind::Read {
            return Ok(None);
        }
        // In range, so below the device's size (a u32: see `OpRecorder`).
        self.apply(&PlannedOp {
            lba: op.lba as u32,
            pages: op.pages as u32,
            kind: op.kind,
        });
        Ok(None)
    }
}

/// Every write's device lifetime: the events through the same TRIM batcher and filesystem
/// layout as a replay with this configuration (neither depends on the policy).
pub fn device_lifetimes<I, E>(
    events: I,
    logical_pages: u64,
    alloc: ssd::AllocPolicy,
    fs_discard: bool,
    trim: TrimConfig,
) -> Result<Lifetimes, E>
where
    I: IntoIterator<Item = Result<Event, E>>,
    E: From<SsdError>,
{
    let fs = FsReplayer::new(logical_pages, alloc, fs_discard)?;
    let mut pipe = FsPipeline::new(DeathTracker::new(logical_pages), fs, trim);
    for ev in events {
        let ev = ev?;
        if matches!(ev, Event::Write(_)) {
            pipe.dev.begin_write();
        }
        pipe.apply(&ev, 0)?;
    }
    let (_, _, _, tracker) = pipe.finish()?;
    Ok(tracker.finish())
}

#[cfg(test)]
mod tests;

/// One replay of a trace file: a policy (the oracle included) on a fresh device.
pub struct TraceReplay<'a> {
    pub trace: &'a std::path::Path,
    pub policy: &'a str,
    pub placement: &'a crate::policy::PlacementConfig,
    pub device: ssd::SsdConfig,
    /// Age the device first (fill, then random overwrites until WA is steady).
    pub precondition: Option<ssd::PreconditionConfig>,
    /// How the filesystem lays files out on LBAs.
    pub alloc: ssd::AllocPolicy,
    /// The filesystem discards (TRIMs) what file removal, truncation and punched holes free.
    pub fs_discard: bool,
    pub replay: ReplayConfig,
    /// Replay the run phase (events from `RunLoops::from`) this many times back to back.
    pub loops: RunLoops,
}

/// The run phase of a trace replayed several times in a row: the events before `from` once,
/// then the events from `from` to the end `times` times. A device aged by one fill reaches
/// the steady state of the workload only after it has been rewritten many times; looping a
/// stationary run phase gets it there without running the engine that much longer (validated
/// against long runs in docs/lab.md). Event indices (`ReplayConfig::reset_stats_at`,
/// `end_of_load_at`) count events as they are replayed, loops included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLoops {
    pub from: u64,
    pub times: u32,
}

impl RunLoops {
    /// The trace once, as written.
    pub fn once() -> Self {
        RunLoops { from: 0, times: 1 }
    }
}

pub type SimResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A trace file's events, decoded once: every policy of a replay and the oracle's pre-pass
/// walk the same slice instead of decoding the file again.
pub fn read_events(trace: &std::path::Path) -> SimResult<Vec<Event>> {
    let reader = crate::trace::TraceReader::open(trace)
        .map_err(|e| format!("opening event trace {}: {e}", trace.display()))?;
    let mut events = Vec::new();
    for ev in reader {
        let ev = ev.map_err(|e| format!("{}: event {}: {e}", trace.display(), events.len()))?;
        events.push(ev);
    }
    Ok(events)
}

/// Calls `f` on every event of `events` with its run phase looped (see [`RunLoops`]), in
/// replay order. Times are shifted so they keep increasing from one pass to the next; the
/// first pass is passed as it is (no copy), later passes as shifted copies.
pub fn for_each_looped<E>(
    events: &[Event],
    loops: RunLoops,
    mut f: impl FnMut(&Event) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<String>,
{
    if loops.times == 0 {
        return Err("the run phase must be replayed at least once"
            .to_string()
            .into());
    }
    let mut shift = Shift::default();
    for ev in events {
        shift.apply(0, &mut ev.time_ns());
        f(ev)?;
    }
    let from = (loops.from as usize).min(events.len());
    for pass in 1..loops.times as usize {
        for ev in &events[from..] {
            let mut ev = ev.clone();
            let mut t = ev.time_ns();
            shift.apply(pass, &mut t);
            ev.set_time_ns(t);
            f(&ev)?;
        }
    }
    Ok(())
}

/// Event `i` of the replay of `events` with `loops` (times aside), if there is one.
fn looped_event(events: &[Event], loops: RunLoops, i: usize) -> Option<&Event> {
    if let Some(ev) = events.get(i) {
        return Some(ev);
    }
    let from = (loops.from as usize).min(events.len());
    let k = i - events.len();
    let pass = 1 + k.checked_div(events.len() - from)?;
    (pass < loops.times as usize).then(|| &events[from + k % (events.len() - from)])
}

/// How many events ahead a replay tells its policy of an event ([`Policy::prefetch`]).
const POLICY_AHEAD: usize = 8;

/// Keeps event times increasing across passes: a pass's times are moved past the previous
/// pass's last.
#[derive(Default)]
struct Shift {
    pass: usize,
    offset: u64,
    last: u64,
}

impl Shift {
    /// Moves `t`, a time of pass `pass`, past the previous pass's times.
    fn apply(&mut self, pass: usize, t: &mut u64) {
        if pass != self.pass {
            self.pass = pass;
            self.offset = (self.last + 1).saturating_sub(*t);
        }
        *t += self.offset;
        self.last = self.last.max(*t);
    }
}

/// Replays `job.trace` with `job.policy`; `progress(events, device)` is called every 2^16
/// events. The oracle is built from a first pass over the same trace.
pub fn replay_trace_file(
    job: &TraceReplay,
    progress: impl FnMut(u64, &Ssd),
) -> SimResult<ReplayOutcome> {
    replay_loaded(job, &read_events(job.trace)?, progress)
}

/// [`replay_trace_file`] on the trace's events read before ([`read_events`]): a replay of
/// several policies decodes the file once.
pub fn replay_loaded(
    job: &TraceReplay,
    events: &[Event],
    progress: impl FnMut(u64, &Ssd),
) -> SimResult<ReplayOutcome> {
    let plan = DevicePlan::new(job, events)?;
    replay_planned(job, events, &plan, progress)
}

/// One device op of a [`DevicePlan`]: a write (on the stream the policy chooses), a TRIM or
/// a read.
#[derive(Clone, Copy, Debug)]
struct PlannedOp {
    lba: u32,
    pages: u32,
    kind: ssd::OpKind,
}

/// What the filesystem layout and the TRIM batcher send the device for a trace's events:
/// neither depends on the stream a write takes, so it is the same for every policy, and a
/// replay of several policies (and the oracle's pre-pass) computes it once. Each policy's
/// replay then only asks its policy and drives the device.
pub struct DevicePlan {
    ops: Vec<PlannedOp>,
    /// Per replayed event (loops included): the end of its ops in `ops`; the ops after the
    /// last event's are the TRIMs released at the end.
    ends: Vec<u32>,
    /// One bit per replayed event: set for writes (the oracle's pre-pass walks the ops
    /// without the events).
    write_events: Vec<u64>,
    /// The oracles' pre-pass on this plan and its time, once one oracle needed it.
    oracle_lifetimes: std::sync::OnceLock<(Lifetimes, f64)>,
    trim: Option<TrimStats>,
    layout: LayoutStats,
    counts: EventCounts,
    /// The job's device size, layout and TRIM the plan was made for.
    made_for: (u64, ssd::AllocPolicy, bool, TrimConfig, RunLoops),
}

/// Records the LBA ops a layout submits (the device side of a [`DevicePlan`]).
#[derive(Default)]
struct OpRecorder {
    ops: Vec<PlannedOp>,
}

impl BlockDevice for OpRecorder {
    fn submit(&mut self, op: &ssd::HostOp) -> Result<Option<u64>, SsdError> {
        // The layout's LBAs are below its capacity, which is below 2^32 pages.
        let (lba, pages) = (u32::try_from(op.lba), u32::try_from(op.pages));
        let (Ok(lba), Ok(pages)) = (lba, pages) else {
            return Err(SsdError::Layout(format!(
                "LBA range {}+{} does not fit a device plan",
                op.lba, op.pages
            )));
        };
        self.ops.push(PlannedOp {
            lba,
            pages,
            kind: op.kind,
        });
        Ok(None)
    }
}

impl DevicePlan {
    /// Runs the events (with the job's loops) through the job's TRIM batcher and layout.
    pub fn new(job: &TraceReplay, events: &[Event]) -> SimResult<Self> {
        let pages = job.device.logical_pages;
        let fs = FsReplayer::new(pages, job.alloc, job.fs_discard)?;
        let mut pipe = FsPipeline::new(OpRecorder::default(), fs, job.replay.trim);
        let mut ends = Vec::with_capacity(events.len());
        let mut write_events = Vec::with_capacity(events.len().div_ceil(64));
        let mut index = 0u64;
        for_each_looped(events, job.loops, |ev| -> SimResult<()> {
            if index.is_multiple_of(64) {
                write_events.push(0u64);
            }
            if matches!(ev, Event::Write(_)) {
                *write_events.last_mut().expect("pushed") |= 1 << (index % 64);
            }
            pipe.apply(ev, 0)
                .map_err(|e| format!("{}: event {index} ({ev:?}): {e}", job.trace.display()))?;
            index += 1;
            let end =
                u32::try_from(pipe.dev.ops.len()).map_err(|_| "a device plan of over 2^32 ops")?;
            ends.push(end);
            Ok(())
        })?;
        let (trim, layout, counts, recorder) = pipe.finish()?;
        Ok(DevicePlan {
            ops: recorder.ops,
            ends,
            write_events,
            oracle_lifetimes: std::sync::OnceLock::new(),
            trim,
            layout,
            counts,
            made_for: (pages, job.alloc, job.fs_discard, job.replay.trim, job.loops),
        })
    }

    /// Every write's death for this plan's job (the oracles' pre-pass), computed the first
    /// time an oracle asks, and what it cost.
    pub fn oracle_lifetimes(&self, job: &TraceReplay) -> (&Lifetimes, OraclePrepass) {
        let mut shared = true;
        let (l, seconds) = self.oracle_lifetimes.get_or_init(|| {
            shared = false;
            let start = std::time::Instant::now();
            let l = planned_lifetimes(job, self);
            (l, start.elapsed().as_secs_f64())
        });
        let seconds = *seconds;
        (l, OraclePrepass { seconds, shared })
    }

    /// Drops the oracles' pre-pass, so the next oracle replay computes (and is charged) it
    /// again: a benchmark's repeated runs.
    pub fn forget_oracle_lifetimes(&mut self) {
        self.oracle_lifetimes = std::sync::OnceLock::new();
    }

    fn check(&self, job: &TraceReplay) -> SimResult<()> {
        let want = (
            job.device.logical_pages,
            job.alloc,
            job.fs_discard,
            job.replay.trim,
            job.loops,
        );
        if self.made_for != want {
            return Err(
                "the device plan was made for another device size, layout, TRIM or loops".into(),
            );
        }
        Ok(())
    }

    /// Submits event `i`'s ops (`i == ends.len()`: the final TRIMs) from op `*next` on.
    #[inline]
    fn submit(
        &self,
        i: usize,
        next: &mut usize,
        time_ns: u64,
        stream: u8,
        dev: &mut impl BlockDevice,
    ) -> Result<(), SsdError> {
        /// How many ops ahead the device is told of an op (far hint, then near).
        const FAR: usize = 24;
        const NEAR: usize = 8;
        let end = self.ends.get(i).map_or(self.ops.len(), |&e| e as usize);
        for (j, op) in self.ops[*next..end].iter().enumerate() {
            let j = *next + j;
            if let Some(ahead) = self.ops.get(j + FAR) {
                dev.prefetch(ahead.lba as u64, false);
            }
            if let Some(ahead) = self.ops.get(j + NEAR) {
                dev.prefetch(ahead.lba as u64, true);
            }
            let stream = match op.kind {
                ssd::OpKind::Write => stream as u32,
                ssd::OpKind::Trim | ssd::OpKind::Read => 0,
            };
            dev.submit(&ssd::HostOp {
                time_ns,
                kind: op.kind,
                lba: op.lba as u64,
                pages: op.pages as u64,
                stream,
            })?;
        }
        *next = end;
        Ok(())
    }
}

/// Time of the TRIMs released after the last event (as [`FsPipeline::finish`] gives them).
const FINAL_TRIM_NS: u64 = u64::MAX / 2;

/// One policy's replay of `events` on the device ops of `plan` (made for this job by
/// [`DevicePlan::new`]); the oracle's pre-pass runs on the same plan.
pub fn replay_planned(
    job: &TraceReplay,
    events: &[Event],
    plan: &DevicePlan,
    progress: impl FnMut(u64, &Ssd),
) -> SimResult<ReplayOutcome> {
    use crate::policy::{make_policy, OracleGrouping, OraclePolicy};
    plan.check(job)?;
    let mut prepass = None;
    let policy: Box<dyn Policy> = match OracleGrouping::from_name(job.policy) {
        Some(grouping) => {
            let (lifetimes, cost) = plan.oracle_lifetimes(job);
            prepass = Some(cost);
            Box::new(OraclePolicy::from_lifetimes(
                lifetimes,
                job.placement.streams,
                grouping,
            ))
        }
        None => make_policy(job.policy, job.placement)?,
    };
    let mut out = replay_planned_with(job, events, plan, policy, progress)?;
    out.oracle_prepass = prepass;
    Ok(out)
}

/// [`replay_planned`] with a policy built by the caller (`job.policy` only names it in
/// errors): an offline bound made from the plan's lifetimes some other way than the oracles
/// do, such as the feature oracle of `examples/feature_oracle.rs`.
pub fn replay_planned_with(
    job: &TraceReplay,
    events: &[Event],
    plan: &DevicePlan,
    policy: Box<dyn Policy>,
    mut progress: impl FnMut(u64, &Ssd),
) -> SimResult<ReplayOutcome> {
    plan.check(job)?;
    let mut dev = Ssd::new(job.device.clone())?;
    if let Some(p) = &job.precondition {
        dev.precondition(p)?;
    }
    let mut driver = PolicyDriver::new(policy, job.replay);
    let mut next = 0usize;
    for_each_looped(events, job.loops, |ev| -> SimResult<()> {
        let i = driver.index as usize;
        if let Some(ahead) = looped_event(events, job.loops, i + POLICY_AHEAD) {
            driver.policy.prefetch(ahead);
        }
        driver
            .before(ev, &mut dev)
            .and_then(|stream| plan.submit(i, &mut next, ev.time_ns(), stream, &mut dev))
            .map_err(|e| format!("{}: event {i} ({ev:?}): {e}", job.trace.display()))?;
        driver.after(ev, &dev);
        if driver.index & 0xffff == 0 {
            progress(driver.index, &dev);
        }
        Ok(())
    })?;
    plan.submit(plan.ends.len(), &mut next, FINAL_TRIM_NS, 0, &mut dev)?;
    Ok(driver.outcome(plan.trim, plan.layout.clone(), plan.counts, &dev))
}

/// The oracle's pre-pass: every write's device lifetime, from the plan's ops (the events
/// themselves are not needed: the plan knows which are writes).
fn planned_lifetimes(job: &TraceReplay, plan: &DevicePlan) -> Lifetimes {
    /// How many ops ahead the pre-pass loads an op's first owner, and its record.
    const OWNER_AHEAD: usize = 32;
    const RECORD_AHEAD: usize = 16;
    let mut tracker = DeathTracker::new(job.device.logical_pages);
    let writes = plan
        .write_events
        .iter()
        .map(|w| w.count_ones() as usize)
        .sum();
    tracker.reserve(writes);
    let ops = &plan.ops;
    let mut next = 0usize;
    let ends = plan.ends.iter().map(|&e| e as usize).chain([ops.len()]);
    for (i, end) in ends.enumerate() {
        if plan
            .write_events
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
        {
            tracker.begin_write();
        }
        for j in next..end {
            if let Some(op) = ops.get(j + OWNER_AHEAD) {
                prefetch(&tracker.owner[op.lba as usize]);
            }
            if let Some(op) = ops.get(j + RECORD_AHEAD) {
                tracker.prefetch_owner(op.lba);
            }
            tracker.apply(&ops[j]);
        }
        next = end;
    }
    tracker.finish()
}

/// Keeps the stream a write already carries: for a device in the loop of an engine that
/// placed its writes online.
pub struct RecordedStreams;

impl Policy for RecordedStreams {
    fn name(&self) -> &'static str {
        "recorded"
    }
    fn place(&mut self, w: &crate::event::WriteEvent) -> u8 {
        w.stream
    }
    fn observe(&mut self, _ev: &Event) {}
}

/// The simulated SSD in the engine's loop: an observer that applies every event, as it
/// happens, to a device, on the stream the engine's own placement chose.
pub struct SimObserver {
    state: parking_lot::Mutex<(Option<Replayer>, Option<String>)>,
}

impl SimObserver {
    pub fn new(dev: Ssd, fs: FsReplayer, cfg: ReplayConfig) -> Self {
        SimObserver {
            state: parking_lot::Mutex::new((
                Some(Replayer::new(Box::new(RecordedStreams), dev, fs, cfg)),
                None,
            )),
        }
    }

    /// Ends the replay and reports (the first device error, if the device refused an event).
    pub fn finish(&self) -> SimResult<ReplayOutcome> {
        let mut st = self.state.lock();
        if let Some(e) = st.1.take() {
            return Err(e.into());
        }
        let r =
            st.0.take()
                .ok_or("the simulated device was already finished")?;
        Ok(r.finish()?)
    }
}

impl crate::observer::Observer for SimObserver {
    fn observe(&self, event: &Event) {
        let mut st = self.state.lock();
        let (rep, err) = &mut *st;
        if err.is_some() {
            return;
        }
        if let Some(r) = rep {
            if let Err(e) = r.apply(event) {
                *err = Some(format!("simulated device: event {}: {e}", r.events()));
            }
        }
    }
}
