//! Server-side cursors kept between `find`/`aggregate` and `getMore`. Ids are random non-zero
//! Int64s (zero means "exhausted" on the wire). Idle cursors time out after 10 minutes, as in
//! mongod (`cursorTimeoutMillis`).

use docdb::DocCursor;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

pub struct CursorEntry {
    pub ns: String,
    pub cursor: DocCursor,
    last_used: Instant,
}

impl CursorEntry {
    pub fn new(ns: String, cursor: DocCursor) -> Self {
        CursorEntry {
            ns,
            cursor,
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
            let id = (rand_u64() >> 1) as i64;
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
    /// Drops cursors idle for longer than the timeout; returns how many.
    pub fn reap(&self) -> usize {
        let mut map = self.map.lock();
        let before = map.len();
        map.retain(|_, e| e.last_used.elapsed() < IDLE_TIMEOUT);
        before - map.len()
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}
