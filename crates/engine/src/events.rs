//! The engine's side of event reporting: a clock, file numbering, and an emitter that builds an
//! event only when an observer is attached (so the default costs one branch).

use placement::{Event, FileId, Observer};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub struct Events {
    observer: Option<Arc<dyn Observer>>,
    start: Instant,
    next_file: AtomicU32,
}

impl Events {
    pub fn new(observer: Option<Arc<dyn Observer>>) -> Self {
        Self {
            observer,
            start: Instant::now(),
            next_file: AtomicU32::new(1),
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.observer.is_some()
    }

    /// Nanoseconds since the engine opened.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// A fresh file number for the trace (numbers are per engine instance, never reused).
    pub fn new_file_id(&self) -> FileId {
        self.next_file.fetch_add(1, Ordering::Relaxed)
    }

    /// Reports the event built by `make(now_ns)`, if anyone listens.
    #[inline]
    pub fn emit(&self, make: impl FnOnce(u64) -> Event) {
        if let Some(o) = &self.observer {
            o.observe(&make(self.now_ns()));
        }
    }

    pub fn flush(&self) {
        if let Some(o) = &self.observer {
            o.flush();
        }
    }
}
