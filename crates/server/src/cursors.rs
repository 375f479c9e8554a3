//! Server-side cursors kept between `find`/`aggregate` and `getMore`. Ids are random non-zero
//! Int64s (zero means "exhausted" on the wire). Idle cursors are closed after
//! `cursorTimeoutMillis` (10 minutes by default, as in mongod) unless opened with
//! `noCursorTimeout`.

use docdb::DocCursor;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub struct CursorEntry {
    pub ns: String,
    pub cursor: DocCursor,
    /// Opened with `noCursorTimeout`: never reaped for idleness.
    pub no_timeout: bool,
    /// A tailable cursor stays open when it runs out (capped collections).
    pub tailable: bool,
    /// With `tailable`: getMore waits for new documents up to its `maxTimeMS` (default 1 s).
    pub await_data: bool,
    /// The originating command's interruption: its maxTimeMS budget runs while a getMore
    /// reads, and the cursor can be killed.
    pub interrupt: docdb::Interrupt,
    last_used: Instant,
}

impl CursorEntry {
    pub fn new(ns: String, cursor: DocCursor) -> Self {
        CursorEntry {
            ns,
            cursor,
            no_timeout: false,
            tailable: false,
            await_data: false,
            interrupt: docdb::Interrupt::none(),
            last_used: Instant::now(),
        }
    }
}

#[derive(Default)]
pub struct CursorRegistry {
    map: Mutex<HashMap<i64, CursorEntry>>,
}

impl CursorRegistry {
    /// Registers a cursor and returns its id.
    pub fn insert(&self, entry: CursorEntry) -> i64 {
        let mut map = self.map.lock();
        loop {
            let id = (rand::random::<u64>() >> 1) as i64;
            if id != 0 && !map.contains_key(&id) {
                map.insert(id, entry);
                return id;
            }
        }
    }
    /// Takes a cursor out while a getMore uses it (a concurrent getMore on it then fails).
    pub fn remove(&self, id: i64) -> Option<CursorEntry> {
        self.map.lock().remove(&id)
    }
    pub fn put_back(&self, id: i64, mut entry: CursorEntry) {
        entry.last_used = Instant::now();
        self.map.lock().insert(id, entry);
    }
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Drops cursors idle for longer than `timeout`, except `noCursorTimeout` ones; returns
    /// how many.
    pub fn reap(&self, timeout: Duration) -> usize {
        let mut map = self.map.lock();
        let before = map.len();
        map.retain(|_, e| e.no_timeout || e.last_used.elapsed() < timeout);
        before - map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_cursors_are_reaped_unless_no_timeout() {
        let reg = CursorRegistry::default();
        let a = reg.insert(CursorEntry::new("d.c".into(), DocCursor::empty()));
        let mut keep = CursorEntry::new("d.c".into(), DocCursor::empty());
        keep.no_timeout = true;
        let b = reg.insert(keep);
        assert_eq!(reg.reap(Duration::from_secs(3600)), 0);
        assert_eq!(reg.reap(Duration::ZERO), 1);
        assert!(reg.remove(a).is_none());
        assert!(reg.remove(b).is_some());
    }
}
