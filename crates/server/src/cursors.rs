//! Server-side cursors kept between `find`/`aggregate` and `getMore`. Ids are random non-zero
//! Int64s (zero means "exhausted" on the wire). Idle cursors are closed after
//! `cursorTimeoutMillis` (10 minutes by default, as in mongod) unless opened with
//! `noCursorTimeout`. A cursor remembers who opened it ([`CursorEntry::owner`]): getMore and
//! killCursors from other users are refused (`auth::may_use_cursor`).

use docdb::DocCursor;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A change stream's resume token, updated as the stream is read.
pub type ResumeToken = std::sync::Arc<Mutex<bson::Document>>;

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
    /// The users (user, db) authenticated on the connection that opened it; empty when
    /// nobody was.
    pub owner: Vec<(String, String)>,
    /// A change stream's position (`postBatchResumeToken`).
    pub resume_token: Option<ResumeToken>,
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
            owner: Vec::new(),
            resume_token: None,
            last_used: Instant::now(),
        }
    }
}

/// What killCursors did to one cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    Killed,
    NotFound,
    /// Another user's: left alone.
    NotOwner,
}

#[derive(Default)]
pub struct CursorRegistry {
    map: Mutex<Cursors>,
}

#[derive(Default)]
struct Cursors {
    /// Cursors waiting for a getMore.
    idle: HashMap<i64, CursorEntry>,
    /// Cursors a getMore is reading, with their interruption (so killCursors can stop it)
    /// and their owner.
    busy: HashMap<i64, (docdb::Interrupt, Vec<(String, String)>)>,
    /// The connection that opened each cursor registered with [`CursorRegistry::insert_for`],
    /// and how many each connection has open (`maxCursorsPerConnection`).
    opener: HashMap<i64, i32>,
    open_by: HashMap<i32, usize>,
}

impl Cursors {
    /// Makes `id` an idle cursor. An id names one cursor: registering one that is already
    /// idle or in use would hand one client's cursor to another.
    fn register(&mut self, id: i64, entry: CursorEntry) {
        assert!(id > 0, "cursor id {id}: 0 means exhausted on the wire");
        assert!(
            !self.busy.contains_key(&id) && self.idle.insert(id, entry).is_none(),
            "cursor id {id} registered twice"
        );
    }

    /// Cursor `id` is closed: its connection has one fewer open.
    fn forget(&mut self, id: i64) {
        let Some(conn) = self.opener.remove(&id) else {
            return;
        };
        let n = self
            .open_by
            .get_mut(&conn)
            .expect("a connection with a cursor open has a count");
        assert!(
            *n > 0,
            "connection {conn} closes more cursors than it opened"
        );
        *n -= 1;
        if *n == 0 {
            self.open_by.remove(&conn);
        }
    }

    /// Ends a getMore's use of cursor `id`, which it took: a cursor is given back once, by the
    /// getMore that took it, and it was not idle meanwhile.
    fn end_use(&mut self, id: i64) {
        assert!(
            self.busy.remove(&id).is_some(),
            "cursor {id} given back but not taken"
        );
        assert!(
            !self.idle.contains_key(&id),
            "cursor {id} idle while a getMore had it"
        );
    }
}

impl CursorRegistry {
    /// Registers a cursor and returns its id.
    pub fn insert(&self, entry: CursorEntry) -> i64 {
        let mut map = self.map.lock();
        loop {
            let id = (rand::random::<u64>() >> 1) as i64;
            if id != 0 && !map.idle.contains_key(&id) && !map.busy.contains_key(&id) {
                map.register(id, entry);
                return id;
            }
        }
    }
    /// Registers a cursor opened by connection `conn`, unless that connection already has `cap`
    /// open: then the cursor is dropped and the error says why.
    pub fn insert_for(&self, conn: i32, cap: usize, entry: CursorEntry) -> Result<i64, String> {
        let mut map = self.map.lock();
        let open = map.open_by.get(&conn).copied().unwrap_or(0);
        if open >= cap {
            return Err(format!(
                "this connection has {open} cursors open, the most maxCursorsPerConnection allows; exhaust or kill some (killCursors) first"
            ));
        }
        let id = loop {
            let id = (rand::random::<u64>() >> 1) as i64;
            if id != 0 && !map.idle.contains_key(&id) && !map.busy.contains_key(&id) {
                break id;
            }
        };
        map.register(id, entry);
        map.opener.insert(id, conn);
        *map.open_by.entry(conn).or_default() += 1;
        Ok(id)
    }

    /// Takes a cursor out while a getMore uses it (a concurrent getMore on it then fails);
    /// give it back with [`CursorRegistry::put_back`] or [`CursorRegistry::release`].
    pub fn take(&self, id: i64) -> Option<CursorEntry> {
        let mut map = self.map.lock();
        let entry = map.idle.remove(&id)?;
        map.busy
            .insert(id, (entry.interrupt.clone(), entry.owner.clone()));
        Some(entry)
    }
    /// Returns a cursor after a getMore; one killed meanwhile is dropped.
    pub fn put_back(&self, id: i64, mut entry: CursorEntry) {
        let mut map = self.map.lock();
        map.end_use(id);
        if !entry.interrupt.cursor_killed() {
            entry.last_used = Instant::now();
            map.register(id, entry);
        } else {
            map.forget(id);
        }
    }
    /// Ends a getMore that closes its cursor (exhausted or failed).
    pub fn release(&self, id: i64) {
        let mut map = self.map.lock();
        map.end_use(id);
        map.forget(id);
    }
    /// killCursors: closes an idle cursor, or stops the getMore reading it (which then fails
    /// with CursorKilled and closes it), when `may_use` allows the cursor's owner.
    pub fn kill(&self, id: i64, may_use: impl Fn(&[(String, String)]) -> bool) -> Kill {
        let mut map = self.map.lock();
        if let Some(entry) = map.idle.get(&id) {
            if !may_use(&entry.owner) {
                return Kill::NotOwner;
            }
            map.idle.remove(&id);
            map.forget(id);
            return Kill::Killed;
        }
        match map.busy.get(&id) {
            Some((_, owner)) if !may_use(owner) => Kill::NotOwner,
            Some((interrupt, _)) => {
                interrupt.kill_cursor();
                Kill::Killed
            }
            None => Kill::NotFound,
        }
    }
    /// Whether the idle cursor `id` runs under its command's `maxTimeMS` (what a getMore on it
    /// is limited by; the fail point `maxTimeAlwaysTimeOut` asks).
    pub fn has_time_budget(&self, id: i64) -> bool {
        let map = self.map.lock();
        map.idle.get(&id).is_some_and(|e| e.interrupt.has_budget())
    }
    pub fn len(&self) -> usize {
        let map = self.map.lock();
        map.idle.len() + map.busy.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Drops cursors idle for longer than `timeout`, except `noCursorTimeout` ones; returns
    /// how many.
    pub fn reap(&self, timeout: Duration) -> usize {
        let mut map = self.map.lock();
        let expired: Vec<i64> = map
            .idle
            .iter()
            .filter(|(_, e)| !e.no_timeout && e.last_used.elapsed() >= timeout)
            .map(|(id, _)| *id)
            .collect();
        for id in &expired {
            map.idle.remove(id);
            map.forget(*id);
        }
        expired.len()
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
        assert!(reg.take(a).is_none());
        assert!(reg.take(b).is_some());
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn a_cursor_id_is_registered_once() {
        let mut map = Cursors::default();
        map.register(7, CursorEntry::new("d.c".into(), DocCursor::empty()));
        map.register(7, CursorEntry::new("d.c".into(), DocCursor::empty()));
    }

    #[test]
    #[should_panic(expected = "0 means exhausted")]
    fn cursor_id_zero_is_never_registered() {
        Cursors::default().register(0, CursorEntry::new("d.c".into(), DocCursor::empty()));
    }

    #[test]
    #[should_panic(expected = "given back but not taken")]
    fn a_cursor_not_taken_cannot_be_put_back() {
        let reg = CursorRegistry::default();
        reg.put_back(5, CursorEntry::new("d.c".into(), DocCursor::empty()));
    }

    #[test]
    #[should_panic(expected = "given back but not taken")]
    fn a_cursor_is_released_once() {
        let reg = CursorRegistry::default();
        let id = reg.insert(CursorEntry::new("d.c".into(), DocCursor::empty()));
        reg.take(id).unwrap();
        reg.release(id);
        reg.release(id);
    }

    #[test]
    #[should_panic(expected = "idle while a getMore had it")]
    fn a_taken_cursor_is_not_idle() {
        let mut map = Cursors::default();
        map.idle
            .insert(3, CursorEntry::new("d.c".into(), DocCursor::empty()));
        map.busy.insert(3, (docdb::Interrupt::none(), Vec::new()));
        map.end_use(3);
    }

    #[test]
    fn kill_stops_a_cursor_in_use() {
        let reg = CursorRegistry::default();
        let mut e = CursorEntry::new("d.c".into(), DocCursor::empty());
        e.interrupt = docdb::Interrupt::new(None);
        let id = reg.insert(e);
        let e = reg.take(id).unwrap();
        assert_eq!(reg.kill(id, |_| true), Kill::Killed);
        assert_eq!(e.interrupt.check().unwrap_err().code, 237);
        reg.put_back(id, e);
        assert!(reg.is_empty());
        assert_eq!(reg.kill(id, |_| true), Kill::NotFound);
    }

    #[test]
    fn a_connection_opens_at_most_its_cap_and_closing_one_makes_room() {
        let reg = CursorRegistry::default();
        let open =
            |conn| reg.insert_for(conn, 2, CursorEntry::new("d.c".into(), DocCursor::empty()));
        let a = open(1).unwrap();
        let b = open(1).unwrap();
        assert!(open(1).unwrap_err().contains("maxCursorsPerConnection"));
        open(2).expect("another connection has its own count");
        assert_eq!(reg.kill(a, |_| true), Kill::Killed);
        let c = open(1).expect("killed: room for one");
        reg.take(b).unwrap();
        reg.release(b);
        let d = open(1).expect("exhausted: room for one");
        assert_eq!(reg.reap(Duration::ZERO), 3);
        for _ in 0..2 {
            open(1).expect("reaped: room again");
        }
        assert!(reg.take(c).is_none() && reg.take(d).is_none());
    }

    #[test]
    #[should_panic(expected = "closes more cursors than it opened")]
    fn a_connection_never_closes_more_than_it_opened() {
        let mut map = Cursors::default();
        map.opener.insert(9, 4);
        map.open_by.insert(4, 0);
        map.forget(9);
    }

    #[test]
    fn only_its_owner_kills_a_cursor() {
        let reg = CursorRegistry::default();
        let mut e = CursorEntry::new("d.c".into(), DocCursor::empty());
        e.owner = vec![("ann".into(), "admin".into())];
        e.interrupt = docdb::Interrupt::new(None);
        let id = reg.insert(e);
        let ann = |o: &[(String, String)]| o.iter().any(|(u, _)| u == "ann");
        assert_eq!(reg.kill(id, |_| false), Kill::NotOwner);
        let taken = reg.take(id).unwrap();
        assert_eq!(reg.kill(id, |_| false), Kill::NotOwner);
        assert!(taken.interrupt.check().is_ok());
        reg.put_back(id, taken);
        assert_eq!(reg.kill(id, ann), Kill::Killed);
        assert!(reg.is_empty());
    }
}
