//! Observers receive the engine's events. The engine keeps an `Option<Arc<dyn Observer>>` and
//! builds no event at all when it has none, so the default costs nothing.

use crate::event::Event;
use crate::trace::TraceWriter;
use parking_lot::Mutex;
use std::path::Path;

pub trait Observer: Send + Sync {
    fn observe(&self, event: &Event);
    /// Called when the engine closes cleanly: flush buffers.
    fn flush(&self) {}
}

/// Discards every event.
pub struct NoopObserver;

impl Observer for NoopObserver {
    fn observe(&self, _event: &Event) {}
}

/// Keeps every event in memory (tests and small analyses).
#[derive(Default)]
pub struct CollectingObserver {
    events: Mutex<Vec<Event>>,
}

impl CollectingObserver {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().clone()
    }
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock())
    }
}

impl Observer for CollectingObserver {
    fn observe(&self, event: &Event) {
        self.events.lock().push(event.clone());
    }
}

/// Writes every event to a trace file (format in [`crate::trace`]).
pub struct TraceObserver {
    writer: Mutex<TraceWriter>,
}

impl TraceObserver {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            writer: Mutex::new(TraceWriter::create(path)?),
        })
    }
}

impl Observer for TraceObserver {
    fn observe(&self, event: &Event) {
        // A trace that cannot be written is a lost measurement, not a database error: the
        // writer remembers the first error and reports it on flush.
        self.writer.lock().write(event);
    }
    fn flush(&self) {
        if let Err(e) = self.writer.lock().flush() {
            eprintln!("flashdoc: event trace could not be written: {e}");
        }
    }
}

/// Sends every event to several observers (e.g. a trace file and a simulated SSD at once).
pub struct Tee(pub Vec<std::sync::Arc<dyn Observer>>);

impl Observer for Tee {
    fn observe(&self, event: &Event) {
        for o in &self.0 {
            o.observe(event);
        }
    }
    fn flush(&self) {
        for o in &self.0 {
            o.flush();
        }
    }
}
