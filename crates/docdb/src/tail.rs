//! The signal a tailable cursor waits on: a capped collection's, or the oplog's for change
//! streams. A module of its own so that both the cursors and the oplog can use it.

/// What a capped collection tells its tailable cursors: that documents were inserted (an
/// awaitData getMore sleeps on it instead of polling), and that the collection is gone.
#[derive(Default)]
pub struct TailSignal {
    state: parking_lot::Mutex<TailState>,
    inserted: parking_lot::Condvar,
}

#[derive(Default)]
struct TailState {
    /// Counts inserts: a waiter sleeps until it moves past the value it read before its scan.
    generation: u64,
    /// Why the collection's cursors die (it was dropped or renamed away).
    closed: Option<&'static str>,
}

impl TailSignal {
    /// The insert count now; read it before a scan, wait past it after an empty one.
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }
    /// Documents were inserted: wakes every waiting cursor.
    pub fn notify_insert(&self) {
        self.state.lock().generation += 1;
        self.inserted.notify_all();
    }
    /// The collection is gone (`why`: "dropped" or "renamed"): its cursors fail at their next
    /// read, and waiters wake now.
    pub fn close(&self, why: &'static str) {
        self.state.lock().closed.get_or_insert(why);
        self.inserted.notify_all();
    }
    pub fn closed(&self) -> Option<&'static str> {
        self.state.lock().closed
    }
    /// Sleeps until an insert moves the count past `seen`, the collection closes, or
    /// `timeout` passes.
    pub fn wait_past(&self, seen: u64, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut st = self.state.lock();
        while st.generation == seen && st.closed.is_none() {
            if self.inserted.wait_until(&mut st, deadline).timed_out() {
                return;
            }
        }
    }
}
