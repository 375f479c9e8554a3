//! Offline replay of an event stream with a placement policy and a TRIM mode on the `ssd`
//! crate's simulated device (feature `sim`; `flashdoc placement replay` and the tests).
//!
//! Mapping of events onto the device ([`apply_to_device`], the same as `flashdoc ssd replay`
//! does for event traces): a write goes through the filesystem layout ([`FsReplayer`]) on the
//! stream the policy chose; removing or truncating a file frees its pages (trimmed when the
//! layout was built with discard); creates, renames and checkpoints touch nothing. `Free`
//! events reach the device only through the TRIM batcher: a released extent is punched out of
//! the file (`fallocate(PUNCH_HOLE)`), which the filesystem forwards as TRIM when it discards.

use crate::event::Event;
use crate::policy::{Lifetimes, Policy};
use crate::trim::{ReplaceTrimmer, TrimBatcher, TrimExtent, TrimStats, TrimWhen};
use ssd::replay::{FsReplayer, LayoutStats, PeakUsage, TraceExtent};
use ssd::{BlockDevice, Ssd, SsdError};

/// What the events of a replay were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventCounts {
    pub writes: u64,
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
        self.punch(u64::MAX / 2)?;
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
}

/// Replays events one at a time (so a caller can stream a trace file and show progress).
pub struct Replayer {
    policy: Box<dyn Policy>,
    pipe: FsPipeline<Ssd>,
    cfg: ReplayConfig,
    index: u64,
    /// (host pages, GC copies) at the first checkpoint commit of the run phase.
    at_first_checkpoint: Option<(u64, u64)>,
}

impl Replayer {
    pub fn new(policy: Box<dyn Policy>, dev: Ssd, fs: FsReplayer, cfg: ReplayConfig) -> Self {
        Replayer {
            policy,
            pipe: FsPipeline::new(dev, fs, cfg.trim),
            cfg,
            index: 0,
            at_first_checkpoint: None,
        }
    }

    pub fn device(&self) -> &Ssd {
        self.pipe.device()
    }
    pub fn events(&self) -> u64 {
        self.index
    }

    pub fn apply(&mut self, ev: &Event) -> Result<(), SsdError> {
        if self.cfg.end_of_load_at == Some(self.index) {
            self.policy.end_of_load();
        }
        if self.cfg.reset_stats_at > 0 && self.cfg.reset_stats_at == self.index {
            self.pipe.dev.reset_stats();
        }
        self.index += 1;
        let stream = match ev {
            Event::Write(w) => {
                let s = self.policy.place(w);
                let max = self.pipe.dev.config().streams;
                if s as u32 >= max {
                    return Err(SsdError::Layout(format!(
                        "policy {} chose stream {s} on a device with {max} streams",
                        self.policy.name()
                    )));
                }
                s
            }
            other => {
                self.policy.observe(other);
                0
            }
        };
        self.pipe.apply(ev, stream)?;
        let run_start = self
            .cfg
            .reset_stats_at
            .max(self.cfg.end_of_load_at.unwrap_or(0));
        if self.at_first_checkpoint.is_none()
            && self.index > run_start
            && matches!(ev, Event::CheckpointCommit { .. })
        {
            let s = self.pipe.dev.stats();
            self.at_first_checkpoint = Some((s.host_write_pages, s.gc_copy_pages));
        }
        Ok(())
    }

    /// Releases pending TRIMs and reports.
    pub fn finish(self) -> Result<ReplayOutcome, SsdError> {
        let (trim, layout, counts, dev) = self.pipe.finish()?;
        let waf_from_first_checkpoint = self.at_first_checkpoint.and_then(|(host, gc)| {
            let s = dev.stats();
            let host = s.host_write_pages.checked_sub(host)?;
            let gc = s.gc_copy_pages.checked_sub(gc)?;
            (host > 0).then(|| (host + gc) as f64 / host as f64)
        });
        Ok(ReplayOutcome {
            policy: self.policy.name(),
            events: self.index,
            waf_from_first_checkpoint,
            counts,
            trim,
            layout,
            device_host_pages: dev.ftl().host_pages_ever(),
            report: dev.report(),
        })
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
    /// Per write: pages still holding its data.
    alive: Vec<u32>,
    lifetimes: Lifetimes,
    current: u32,
}

impl DeathTracker {
    pub fn new(logical_pages: u64) -> Self {
        DeathTracker {
            owner: vec![NO_OWNER; logical_pages as usize],
            alive: Vec::new(),
            lifetimes: Lifetimes::default(),
            current: NO_OWNER,
        }
    }

    /// The next writes submitted belong to a new trace write.
    fn begin_write(&mut self) {
        let l = &mut self.lifetimes;
        assert!(
            l.birth.len() < NO_OWNER as usize,
            "too many writes to track"
        );
        self.current = l.birth.len() as u32;
        l.birth.push(l.clock);
        l.death.push(u64::MAX);
        l.pages.push(0);
        self.alive.push(0);
    }

    fn kill(&mut self, lba: usize) {
        let w = std::mem::replace(&mut self.owner[lba], NO_OWNER);
        if w == NO_OWNER {
            return;
        }
        let a = &mut self.alive[w as usize];
        debug_assert!(*a > 0, "write {w} has no live page at LBA {lba}");
        *a -= 1;
        if *a == 0 {
            self.lifetimes.death[w as usize] = self.lifetimes.clock;
        }
    }

    pub fn finish(self) -> Lifetimes {
        self.lifetimes
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
        match op.kind {
            ssd::OpKind::Write => {
                assert_ne!(
                    self.current, NO_OWNER,
                    "a device write outside a trace write"
                );
                for lba in op.lba..end {
                    self.kill(lba as usize);
                    self.owner[lba as usize] = self.current;
                    self.alive[self.current as usize] += 1;
                    self.lifetimes.pages[self.current as usize] += 1;
                    self.lifetimes.clock += 1;
                }
            }
            ssd::OpKind::Trim => {
                for lba in op.lba..end {
                    self.kill(lba as usize);
                }
            }
            ssd::OpKind::Read => {}
        }
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
        track_death(&mut pipe, &ev?)?;
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
    mut progress: impl FnMut(u64, &Ssd),
) -> SimResult<ReplayOutcome> {
    use crate::policy::{make_policy, OracleGrouping, OraclePolicy};
    let policy: Box<dyn Policy> = match OracleGrouping::from_name(job.policy) {
        Some(grouping) => {
            let lifetimes = looped_lifetimes(job, events)?;
            Box::new(OraclePolicy::from_lifetimes(
                &lifetimes,
                job.placement.streams,
                grouping,
            ))
        }
        None => make_policy(job.policy, job.placement)?,
    };
    let mut dev = Ssd::new(job.device.clone())?;
    if let Some(p) = &job.precondition {
        dev.precondition(p)?;
    }
    let fs = FsReplayer::new(dev.logical_pages(), job.alloc, job.fs_discard)?;
    let mut r = Replayer::new(policy, dev, fs, job.replay);
    for_each_looped(events, job.loops, |ev| -> SimResult<()> {
        r.apply(ev).map_err(|e| {
            format!(
                "{}: event {} ({ev:?}): {e}",
                job.trace.display(),
                r.events()
            )
        })?;
        if r.events() & 0xffff == 0 {
            progress(r.events(), r.device());
        }
        Ok(())
    })?;
    Ok(r.finish()?)
}

/// The oracle's pre-pass: every write's device lifetime under the job's layout and TRIM.
fn looped_lifetimes(job: &TraceReplay, events: &[Event]) -> SimResult<Lifetimes> {
    let logical_pages = job.device.logical_pages;
    let fs = FsReplayer::new(logical_pages, job.alloc, job.fs_discard)?;
    let mut pipe = FsPipeline::new(DeathTracker::new(logical_pages), fs, job.replay.trim);
    for_each_looped(events, job.loops, |ev| -> SimResult<()> {
        track_death(&mut pipe, ev)?;
        Ok(())
    })?;
    let (_, _, _, tracker) = pipe.finish()?;
    Ok(tracker.finish())
}

/// One event of the oracle's pre-pass through the pipeline.
fn track_death(pipe: &mut FsPipeline<DeathTracker>, ev: &Event) -> Result<(), SsdError> {
    if matches!(ev, Event::Write(_)) {
        pipe.dev.begin_write();
    }
    pipe.apply(ev, 0)
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
