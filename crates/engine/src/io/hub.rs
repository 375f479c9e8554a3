//! The reporting side of the announced-I/O seam: a clock, file numbering, the observer, and
//! flash placement (streams, hints, TRIM). Only [`super::Io`] calls it, so every event is
//! reported from one place.
//!
//! With neither an observer nor a flash configuration, nothing is built (one branch per
//! write). With a placement policy, each write gets its stream *before* it is issued; with
//! `hints: linux` the file's write-life hint is set for that stream; with TRIM on, `Free`
//! events go to the TRIM batcher, whose batches are punched out of the files.
//!
//! Trims and writes are ordered by the hub's lock: a write announces itself (cancelling any
//! pending trim it overlaps) under the lock before its `pwrite`, and a batch is punched under
//! the same lock, so a punch can never land on space a write has just reused.

use super::backend::Backend;
use super::file::IoFile;
use super::hint_path::{HintPath, Hints};
use super::linux::{hint_for_stream, LinuxIo};
use super::meter::WriteMeter;
use crate::flash_mode::FlashMode;
use parking_lot::Mutex;
use placement::policy::{make_policy, PlacementConfig, Policy, PolicyName};
use placement::trim::{TrimBatcher, TrimExtent};
use placement::{Event, FileId, Observer, WriteEvent};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Flash placement, hints and TRIM for a running engine (`storage.flash`).
#[derive(Clone, Debug, PartialEq)]
pub struct FlashConfig {
    /// The mode these settings started from (reported; explicit keys may differ from it).
    pub mode: FlashMode,
    /// Any online policy (`PolicyName::is_online`).
    pub placement: PolicyName,
    pub placement_config: PlacementConfig,
    /// Release freed extents as trims in batches of this many (None: no trims).
    pub trim_batch: Option<usize>,
    /// Write-life hints: none, the detected path (`auto`), or `F_SET_RW_HINT` regardless
    /// (`linux`). Trims are punched into the files unless hints are `none`.
    pub hints: Hints,
}

// `Default` (flash mode's) and `off()` are in `settings`, beside the defaults they take.
impl FlashConfig {
    /// True when the settings leave nothing to do on the write path.
    fn is_inert(&self) -> bool {
        self.placement == PolicyName::NONE && self.trim_batch.is_none() && self.hints == Hints::None
    }
}

struct FlashState {
    policy: Box<dyn Policy>,
    trim: Option<TrimBatcher>,
    /// Open files by trace id: trims are punched into them.
    files: HashMap<FileId, Arc<IoFile>>,
    /// The last hint set on each file (the call is skipped when it would not change).
    hints: HashMap<FileId, u64>,
    out: Vec<TrimExtent>,
}

struct Flash {
    streams: u8,
    /// Linux calls (hints as `hints` says, punched trims) are made: hints are not `none`.
    linux_io: bool,
    hints: Hints,
    /// The detected path (`Hub::detect_hint_path`); `None` until then.
    hint_path: HintPath,
    state: Mutex<FlashState>,
    io: LinuxIo,
}

impl Flash {
    /// Whether writes set the file's write-life hint: always with `linux`, with `auto` only
    /// when the detected path is `rw-hint`.
    fn sets_hints(&self) -> bool {
        match self.hints {
            Hints::None => false,
            Hints::Linux => true,
            Hints::Auto => self.hint_path == HintPath::RwHint,
        }
    }
}

/// What an event's `time_ns` counts.
enum Clock {
    /// Nanoseconds since the engine opened.
    Wall(Instant),
    /// Bytes announced for writing since the engine opened, as if the host wrote 1 GB/s: a
    /// clock that depends on what was written, not on how fast (`Schedule::Inline`).
    Written,
}

pub(super) struct Hub {
    observer: Option<Arc<dyn Observer>>,
    flash: Option<Flash>,
    clock: Clock,
    next_file: AtomicU32,
    meter: WriteMeter,
}

impl Hub {
    fn new(observer: Option<Arc<dyn Observer>>) -> Self {
        Hub {
            observer,
            flash: None,
            clock: Clock::Wall(Instant::now()),
            next_file: AtomicU32::new(1),
            meter: WriteMeter::new(),
        }
    }

    /// The written-bytes meter (checkpoint trigger, statistics).
    pub fn meter(&self) -> &WriteMeter {
        &self.meter
    }

    /// An event hub that also places writes on streams, sets hints and trims.
    pub fn with_flash(
        observer: Option<Arc<dyn Observer>>,
        flash: &FlashConfig,
    ) -> Result<Self, String> {
        let mut e = Hub::new(observer);
        if !flash.is_inert() {
            let policy = make_policy(flash.placement.as_str(), &flash.placement_config)?;
            e.flash = Some(Flash {
                streams: flash.placement_config.streams,
                linux_io: flash.hints != Hints::None,
                hints: flash.hints,
                hint_path: HintPath::None,
                state: Mutex::new(FlashState {
                    policy,
                    trim: flash.trim_batch.map(TrimBatcher::new),
                    files: HashMap::new(),
                    hints: HashMap::new(),
                    out: Vec::new(),
                }),
                io: LinuxIo::default(),
            });
        }
        Ok(e)
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.observer.is_some() || self.flash.is_some()
    }

    /// Stamps events with bytes written instead of wall time from now on.
    pub fn use_written_clock(&mut self) {
        self.clock = Clock::Written;
    }

    /// The events' time: nanoseconds since the engine opened, or bytes written (`Clock`).
    pub fn now_ns(&self) -> u64 {
        match &self.clock {
            Clock::Wall(start) => start.elapsed().as_nanos() as u64,
            Clock::Written => self.meter.written(),
        }
    }

    /// A fresh file number for the trace (numbers are per engine instance, never reused).
    pub fn new_file_id(&self) -> FileId {
        self.next_file.fetch_add(1, Ordering::Relaxed)
    }

    /// Remembers an open file so trims can be punched into it.
    pub fn register_file(&self, file: &Arc<IoFile>) {
        if let Some(f) = &self.flash {
            let mut st = f.state.lock();
            if st.trim.is_some() && f.linux_io {
                st.files.insert(file.id(), file.clone());
            }
        }
    }

    /// Announces a write of `len` bytes about to be issued to `file` and returns its stream.
    /// Must be called before the `pwrite` (see the module doc).
    #[inline]
    pub fn before_write(
        &self,
        backend: &dyn Backend,
        file: &IoFile,
        len: u64,
        make: impl FnOnce(u64) -> WriteEvent,
    ) -> u8 {
        self.meter.add(len);
        if !self.enabled() {
            return 0;
        }
        let mut w = make(self.now_ns());
        debug_assert_eq!(w.len as u64, len, "the announced length is the event's");
        if let Some(f) = &self.flash {
            let mut st = f.state.lock();
            w.stream = st.policy.place(&w).min(f.streams.saturating_sub(1));
            let ev = Event::Write(w.clone());
            let FlashState { trim, out, .. } = &mut *st;
            if let Some(t) = trim {
                t.observe(&ev, out);
                debug_assert!(out.is_empty(), "a write never releases a trim batch");
            }
            if f.sets_hints() {
                let hint = hint_for_stream(w.stream, f.streams);
                if st.hints.get(&w.file) != Some(&hint) {
                    f.io.hinted(backend.set_write_hint(file, hint));
                    st.hints.insert(w.file, hint);
                }
            }
        }
        let stream = w.stream;
        if let Some(o) = &self.observer {
            o.observe(&Event::Write(w));
        }
        stream
    }

    /// Reports the event built by `make(now_ns)`, if anyone listens.
    #[inline]
    pub fn emit(&self, backend: &dyn Backend, make: impl FnOnce(u64) -> Event) {
        if !self.enabled() {
            return;
        }
        let ev = make(self.now_ns());
        if let Some(f) = &self.flash {
            let mut st = f.state.lock();
            st.policy.observe(&ev);
            let FlashState {
                trim, out, files, ..
            } = &mut *st;
            if let Some(t) = trim {
                t.observe(&ev, out);
                // Punch under the lock: no write can reuse this space until we are done.
                for x in out.drain(..) {
                    if f.linux_io {
                        if let Some(file) = files.get(&x.file) {
                            f.io.punched(x.len, backend.punch_hole(file, x.offset, x.len));
                        }
                    }
                }
            }
            if let Event::FileRemove { file, .. } = ev {
                st.files.remove(&file);
                st.hints.remove(&file);
            }
        }
        if let Some(o) = &self.observer {
            o.observe(&ev);
        }
    }

    /// Reports the event built by `make(now_ns)` to the observer alone: flash placement and
    /// its TRIM batcher never see it (reads).
    #[inline]
    pub fn observe_only(&self, make: impl FnOnce(u64) -> Event) {
        if let Some(o) = &self.observer {
            o.observe(&make(self.now_ns()));
        }
    }

    /// The load phase is over (the boundary policy takes each file's size as its boundary).
    pub fn end_of_load(&self) {
        if let Some(f) = &self.flash {
            f.state.lock().policy.end_of_load();
        }
    }

    /// Detects the hint path for files under `dir` ([`super::hint_path::detect`]): `probe`
    /// sets a hint on a file there. Without flash settings, or with hints `none`, the path is
    /// `none` and nothing is probed.
    pub fn detect_hint_path(
        &mut self,
        target: super::hint_path::Target,
        sysfs: &std::path::Path,
        probe: impl FnOnce() -> std::io::Result<()>,
    ) {
        if let Some(f) = &mut self.flash {
            f.hint_path = super::hint_path::detect(f.hints, target, sysfs, probe);
        }
    }

    /// The hint path in use: the detected one when writes set hints, else `none`.
    pub fn hint_path(&self) -> HintPath {
        match &self.flash {
            Some(f) if f.hints != Hints::None => f.hint_path,
            _ => HintPath::None,
        }
    }

    /// Placement, hint and trim counters for statistics.
    pub fn flash_stats(&self) -> serde_json::Value {
        match &self.flash {
            None => serde_json::json!({"placement": "none"}),
            Some(f) => {
                let st = f.state.lock();
                let trim = st.trim.as_ref().map(|t| {
                    let s = t.stats();
                    serde_json::json!({
                        "collected_extents": s.collected, "collected_bytes": s.collected_bytes,
                        "batches": s.batches, "released_extents": s.released_extents,
                        "released_bytes": s.released_bytes,
                        "cancelled_bytes": s.cancelled_bytes, "dropped_bytes": s.dropped_bytes,
                        "pending_extents": t.pending(),
                    })
                });
                serde_json::json!({
                    "placement": st.policy.name(),
                    "streams": f.streams,
                    "hint_path": f.hint_path.as_str(),
                    "linux": f.io.stats(),
                    "trim": trim,
                })
            }
        }
    }

    pub fn flush(&self) {
        if let Some(o) = &self.observer {
            o.flush();
        }
    }
}
