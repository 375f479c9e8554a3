//! The oplog, `local.oplog.rs`: one entry per write, in mongod's shape, appended in the same
//! engine batch as the write itself (so after a crash the oplog and the data agree), read by a
//! secondary's fetcher in `ts` order, and applied idempotently on a secondary (`apply.rs`).
//! Generated only when the database is opened with [`OplogSettings`] (a replica-set member): a
//! standalone's writes skip all of this. See docs/replication.md, "The oplog".
//!
//! Entries are stored in their own engine table, keyed by `ts` (8 bytes, big-endian: seconds
//! then increment), as mongod's oplog is clustered by `ts`; the table is capped by bytes.
//! Appends are serialized (the tail lock is held from choosing `ts` to the engine write), so
//! commit order is `ts` order and a reader never sees a later entry before an earlier one:
//! the oplog has no holes.

pub mod change_stream;
pub mod diff;
pub mod sessions;
#[cfg(test)]
mod tests;

use crate::storage_error;
use bson::{doc, Bson, Document, Timestamp, Uuid};
use engine::{Direction, KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
use parking_lot::Mutex;
use query::error::{DocError, DocResult};
pub use sessions::{RetryImage, SessionTable, StatementRecord, TXN_COMMITTED_STMT};
use std::cell::RefCell;
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The oplog's namespace, as mongod names it.
pub const OPLOG_NS: &str = "local.oplog.rs";
/// The engine table holding it (not a `collection-` table: the catalog does not list it).
pub const OPLOG_TABLE: &str = "oplog-local.oplog.rs";
/// The engine table of the executed statements of retryable writes (`sessions`), mongod's
/// `config.transactions`.
pub const SESSIONS_TABLE: &str = "sessions-config.transactions";
/// The database whose writes are never logged (mongod's `local`).
pub const UNLOGGED_DB: &str = "local";
/// The collection every database may hold that each member keeps for itself: the profiler's
/// (a secondary profiles its own reads), never logged, as mongod does not replicate it.
pub const UNLOGGED_COLL: &str = "system.profile";

/// Whether writes to `db.coll` are logged and replicated (mongod's
/// `NamespaceString::isReplicated`): not the `local` database, and not `system.profile`.
pub fn is_replicated(db: &str, coll: &str) -> bool {
    db != UNLOGGED_DB && coll != UNLOGGED_COLL
}

/// The oplog of a replica-set member (`replication.oplogSizeMB`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OplogSettings {
    /// Bytes of entries kept; the oldest are removed past it.
    pub size_bytes: i64,
}

impl OplogSettings {
    /// From `oplogSizeMB` (mongod's option; any positive size).
    pub fn from_mb(mb: f64) -> DocResult<OplogSettings> {
        if !(mb.is_finite() && mb > 0.0) {
            return Err(DocError::bad_value(format!(
                "replication.oplogSizeMB must be a positive number, got {mb}"
            )));
        }
        Ok(OplogSettings {
            size_bytes: (mb * 1024.0 * 1024.0) as i64,
        })
    }
}

/// A `ts` as its table key: ordered as the timestamps are.
pub fn ts_key(ts: Timestamp) -> [u8; 8] {
    ts_u64(ts).to_be_bytes()
}

pub(crate) fn ts_u64(ts: Timestamp) -> u64 {
    ((ts.time as u64) << 32) | ts.increment as u64
}

fn ts_of(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

fn ts_from_key(k: &[u8]) -> DocResult<u64> {
    let b: [u8; 8] = k
        .try_into()
        .map_err(|_| DocError::internal_error(format!("oplog key of {} bytes", k.len())))?;
    Ok(u64::from_be_bytes(b))
}

/// How an update's entry records it, as mongod logs each kind of update: change streams
/// tell an update from a replacement by it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateStyle {
    /// A `$`-operator update: a `$v: 2` diff (the document whole only when a diff cannot say
    /// it, e.g. fields reordered).
    Operators,
    /// A replacement-style update: the new document whole.
    Replacement,
    /// A pipeline update, or a write outside an update statement: whichever is smaller, as
    /// mongod logs a pipeline update.
    Smaller,
}

thread_local! {
    static UPDATE_STYLE: std::cell::Cell<UpdateStyle> =
        const { std::cell::Cell::new(UpdateStyle::Smaller) };
}

/// The style this thread's updates are logged in until the scope ends.
pub struct UpdateStyleScope(UpdateStyle);

impl UpdateStyle {
    /// The style of an update statement's `modifier`.
    pub fn of(modifier: &query::update::Update) -> UpdateStyle {
        if modifier.is_replacement() {
            UpdateStyle::Replacement
        } else if modifier.is_pipeline() {
            UpdateStyle::Smaller
        } else {
            UpdateStyle::Operators
        }
    }

    /// Logs this thread's updates in this style until the returned scope is dropped.
    pub fn enter(self) -> UpdateStyleScope {
        UpdateStyleScope(UPDATE_STYLE.with(|s| s.replace(self)))
    }
}

impl Drop for UpdateStyleScope {
    fn drop(&mut self) {
        UPDATE_STYLE.with(|s| s.set(self.0));
    }
}

/// The field of an update or delete entry that holds the document before it, when its
/// collection keeps change streams' pre-images (mongod keeps them in a collection of their own,
/// `config.system.preimages`; in the entry they replicate, and are trimmed, with it).
pub const PRE_IMAGE: &str = "preImage";

/// What one write logs, before the oplog gives it `ts`, `t` and `wall`.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRecord {
    pub op: &'static str,
    pub ns: String,
    pub ui: Option<Uuid>,
    pub o: Document,
    pub o2: Option<Document>,
    /// An update's or delete's document before it, when the collection keeps change streams'
    /// pre-images (`changeStreamPreAndPostImages`): logged as the entry's `preImage`.
    pub pre_image: Option<Document>,
}

impl OpRecord {
    /// The entry of a document write (insert: `old` none; delete: `new` none); with
    /// `pre_image`, an update's or delete's keeps `old` for change streams.
    pub fn for_write(
        ns: &str,
        ui: Uuid,
        (old, new): (Option<&Document>, Option<&Document>),
        pre_image: bool,
    ) -> OpRecord {
        let id_of = |d: &Document| doc! {"_id": d.get("_id").cloned().unwrap_or(Bson::Null)};
        let (op, o, o2) = match (old, new) {
            (None, Some(n)) => ("i", n.clone(), Some(id_of(n))),
            (Some(was), Some(n)) => {
                let style = UPDATE_STYLE.with(|s| s.get());
                ("u", diff::update_object(was, n, style), Some(id_of(n)))
            }
            (Some(was), None) => ("d", id_of(was), None),
            (None, None) => unreachable!("a write stores or removes a document"),
        };
        OpRecord {
            op,
            ns: ns.to_string(),
            ui: Some(ui),
            o,
            o2,
            pre_image: old.filter(|_| pre_image).cloned(),
        }
    }

    /// A no-op entry (`op: "n"`, empty namespace, `o: msg`), as mongod's primary writes to
    /// learn that its term's entries commit.
    pub fn noop(msg: Document) -> OpRecord {
        OpRecord {
            op: "n",
            ns: String::new(),
            ui: None,
            o: msg,
            o2: None,
            pre_image: None,
        }
    }

    /// A command entry (`op: "c"`, namespace `<db>.$cmd`).
    pub fn command(db: &str, ui: Option<Uuid>, o: Document) -> OpRecord {
        OpRecord {
            op: "c",
            ns: format!("{db}.$cmd"),
            ui,
            o,
            o2: None,
            pre_image: None,
        }
    }
}

/// The retryable write a thread's writes belong to: its entries carry `lsid`, `txnNumber` and
/// a `stmtId` counting up from the first statement's, and each is recorded in the session
/// table in its entry's batch (`sessions`).
#[derive(Clone, Debug, PartialEq)]
pub struct RetryableWrite {
    pub lsid: Document,
    pub txn_number: i64,
    pub first_stmt_id: i32,
    /// A findAndModify's: the image its record keeps (the entries say `needsRetryImage`).
    pub image: Option<RetryImage>,
}

/// The session fields of one entry.
#[derive(Clone, Debug)]
struct SessionFields {
    lsid: Document,
    txn_number: i64,
    stmt_id: i32,
    image: Option<RetryImage>,
}

/// An entry a secondary is applying: its writes log this entry instead of new ones.
struct Applying {
    ts: u64,
    bytes: Vec<u8>,
    /// Appended already (by the first write of the application), or not to be appended.
    done: bool,
    /// The entry, when it is a retryable write's statement (its record joins its batch).
    statement: Option<Document>,
}

thread_local! {
    static SESSION: RefCell<Option<(RetryableWrite, i32)>> = const { RefCell::new(None) };
    static APPLYING: RefCell<Option<Applying>> = const { RefCell::new(None) };
}

/// Runs `body` with its writes logged as the statements of retryable write `w` (the server
/// wraps a write command with `lsid` and `txnNumber` in this).
pub fn with_retryable_write<T>(w: RetryableWrite, body: impl FnOnce() -> T) -> T {
    struct Restore(Option<(RetryableWrite, i32)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            SESSION.with(|s| *s.borrow_mut() = prev);
        }
    }
    let first = w.first_stmt_id;
    let prev = SESSION.with(|s| s.borrow_mut().replace((w, first)));
    let _restore = Restore(prev);
    body()
}

/// The session fields of the next entry, if the thread is in a retryable write.
fn next_session_fields() -> Option<SessionFields> {
    SESSION.with(|s| {
        let mut s = s.borrow_mut();
        let (w, next) = s.as_mut()?;
        let stmt_id = *next;
        *next += 1;
        Some(SessionFields {
            lsid: w.lsid.clone(),
            txn_number: w.txn_number,
            stmt_id,
            image: w.image,
        })
    })
}

/// The end of the oplog: the last `ts` given out and the entries' totals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Tail {
    last: u64,
    count: i64,
    bytes: i64,
}

impl Tail {
    /// The hybrid logical clock: `ts` is the wall clock's second when it moved on, else the
    /// last second with the next increment; strictly increasing whatever the clock does.
    fn next_ts(&self, now_secs: u32) -> u64 {
        let last = ts_of(self.last);
        let next = if now_secs > last.time {
            Timestamp {
                time: now_secs,
                increment: 1,
            }
        } else if last.increment < u32::MAX {
            Timestamp {
                time: last.time,
                increment: last.increment + 1,
            }
        } else {
            Timestamp {
                time: last.time + 1,
                increment: 1,
            }
        };
        ts_u64(next)
    }

    /// Records an appended entry (and the entries its batch trimmed).
    fn appended(&mut self, ts: u64, len: usize, trimmed: Trimmed) {
        // An entry at or before the last would overwrite one, or break the order readers
        // rely on.
        assert!(
            ts > self.last,
            "oplog ts strictly increases: {ts:#x} after {:#x}",
            self.last
        );
        self.last = ts;
        self.count += 1 - trimmed.count;
        self.bytes += len as i64 - trimmed.bytes;
        assert!(
            self.count >= 0 && self.bytes >= 0,
            "oplog totals stay whole: {self:?}"
        );
    }
}

/// Entries a batch removes from the oplog's start.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Trimmed {
    count: i64,
    bytes: i64,
}

/// A replica-set member's oplog.
pub struct Oplog {
    engine: Arc<dyn KvEngine>,
    table: TableId,
    cap_bytes: i64,
    term: AtomicI64,
    tail: Mutex<Tail>,
    /// Told of every append: a change stream's awaitData getMore sleeps on it.
    signal: Arc<crate::tail::TailSignal>,
    sessions: SessionTable,
}

/// The document a write replaces and the one it stores, when the write is a document's (for a
/// findAndModify's retry image).
pub(crate) type Images<'a> = (Option<&'a Document>, Option<&'a Document>);

impl std::fmt::Debug for Oplog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oplog")
            .field("cap_bytes", &self.cap_bytes)
            .field("tail", &*self.tail.lock())
            .finish()
    }
}

impl Oplog {
    /// Opens (creating if missing) the oplog table and reads its totals.
    pub(crate) fn open(engine: Arc<dyn KvEngine>, settings: OplogSettings) -> DocResult<Oplog> {
        let table = match engine.table_id(OPLOG_TABLE) {
            Some(t) => t,
            None => engine
                .create_table(OPLOG_TABLE, &TableConfig::collection())
                .map_err(storage_error)?,
        };
        let mut tail = Tail::default();
        for kv in engine.scan_all(table).map_err(storage_error)? {
            let (k, v) = kv.map_err(storage_error)?;
            tail.last = ts_from_key(&k)?;
            tail.count += 1;
            tail.bytes += v.len() as i64;
        }
        let sessions = SessionTable::open(engine.clone(), SESSIONS_TABLE)?;
        Ok(Oplog {
            engine,
            table,
            sessions,
            cap_bytes: settings.size_bytes,
            term: AtomicI64::new(0),
            tail: Mutex::new(tail),
            signal: Arc::default(),
        })
    }

    /// The term new entries carry (`t`): the consensus layer sets it when it elects this
    /// member.
    pub fn set_term(&self, term: i64) {
        self.term.store(term, Ordering::Release);
    }

    pub fn term(&self) -> i64 {
        self.term.load(Ordering::Acquire)
    }

    /// The `ts` of the newest entry (`Timestamp(0, 0)` when empty).
    pub fn last_ts(&self) -> Timestamp {
        ts_of(self.tail.lock().last)
    }

    /// Removes every entry and sets the clock back to before the first (a rollback's reset:
    /// the member rebuilds its oplog from the replicated log). One batch, synced: a crash
    /// leaves the oplog whole or empty, and running it again finishes it.
    pub(crate) fn clear(&self) -> DocResult<()> {
        let mut tail = self.tail.lock();
        let mut batch = WriteBatch::new();
        for kv in self.engine.scan_all(self.table).map_err(storage_error)? {
            batch.delete(self.table, kv.map_err(storage_error)?.0);
        }
        // The records come from the entries: applying the log again records them again.
        self.sessions.stage_clear(&mut batch)?;
        self.engine
            .write(&batch, WriteOptions { sync: true })
            .map_err(storage_error)?;
        *tail = Tail::default();
        Ok(())
    }

    /// The newest entry as stored (key and bytes) in the engine snapshot `snap`, if any: a
    /// snapshot's position (docs/replication.md, "Snapshots").
    pub(crate) fn last_at(&self, snap: &engine::Snapshot) -> DocResult<Option<(u64, Vec<u8>)>> {
        let mut scan = self
            .engine
            .scan_at(
                snap,
                self.table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Reverse,
            )
            .map_err(storage_error)?;
        match scan.next().transpose().map_err(storage_error)? {
            Some((k, v)) => Ok(Some((ts_from_key(&k)?, v))),
            None => Ok(None),
        }
    }

    /// Starts an empty oplog at a snapshot's last entry (`ts`, its stored bytes), as mongod's
    /// initial sync starts the oplog at its sync point: the clock goes on from it, and what
    /// is applied next follows it. Synced.
    pub(crate) fn start_at(&self, ts: u64, entry: &[u8]) -> DocResult<()> {
        let mut tail = self.tail.lock();
        assert_eq!(
            (tail.count, tail.last),
            (0, 0),
            "an oplog starts at a snapshot only when empty"
        );
        let mut batch = WriteBatch::new();
        batch.put(self.table, ts_key(ts_of(ts)).to_vec(), entry.to_vec());
        self.engine
            .write(&batch, WriteOptions { sync: true })
            .map_err(storage_error)?;
        tail.appended(ts, entry.len(), Trimmed::default());
        Ok(())
    }

    /// (entries, bytes) held.
    pub fn totals(&self) -> (i64, i64) {
        let t = self.tail.lock();
        (t.count, t.bytes)
    }

    pub fn cap_bytes(&self) -> i64 {
        self.cap_bytes
    }

    /// The executed statements of retryable writes.
    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// The `ts` of the oldest entry still held, if any: a fetcher that needs an earlier one
    /// has fallen off the oplog.
    pub fn oldest_ts(&self) -> DocResult<Option<Timestamp>> {
        let first = self
            .engine
            .scan_all(self.table)
            .map_err(storage_error)?
            .next();
        match first.transpose().map_err(storage_error)? {
            Some((k, _)) => Ok(Some(ts_of(ts_from_key(&k)?))),
            None => Ok(None),
        }
    }

    /// The entries with `ts` after `after`, in `ts` order, at most `limit` of them and no
    /// more bytes than `max_bytes` (at least one entry if any): a secondary's fetch, and later
    /// a change stream's.
    pub fn entries_after(
        &self,
        after: Timestamp,
        limit: usize,
        max_bytes: usize,
    ) -> DocResult<Vec<Document>> {
        let from = Bound::Excluded(ts_key(after).to_vec());
        let scan = self
            .engine
            .scan(self.table, from, Bound::Unbounded, Direction::Forward)
            .map_err(storage_error)?;
        let mut out = Vec::new();
        let mut bytes = 0;
        for kv in scan.take(limit) {
            let (_, v) = kv.map_err(storage_error)?;
            bytes += v.len();
            if bytes > max_bytes && !out.is_empty() {
                break;
            }
            out.push(crate::doc_codec::decode_doc(&v)?);
        }
        Ok(out)
    }

    /// The entry document of `rec` at `ts`, in mongod's field order.
    fn entry_doc(&self, rec: OpRecord, ts: u64, session: Option<&SessionFields>) -> Document {
        let mut d = Document::new();
        if let Some(s) = session {
            d.insert("lsid", s.lsid.clone());
            d.insert("txnNumber", s.txn_number);
        }
        d.insert("op", rec.op);
        d.insert("ns", rec.ns);
        if let Some(ui) = rec.ui {
            d.insert("ui", ui);
        }
        d.insert("o", rec.o);
        if let Some(o2) = rec.o2 {
            d.insert("o2", o2);
        }
        if let Some(pre) = rec.pre_image {
            d.insert(PRE_IMAGE, pre);
        }
        if let Some(s) = session {
            d.insert("stmtId", s.stmt_id);
            if let Some(image) = s.image {
                d.insert("needsRetryImage", image.name());
            }
        }
        d.insert("ts", ts_of(ts));
        d.insert("t", self.term());
        d.insert("v", 2i64);
        d.insert("wall", bson::DateTime::now());
        d
    }

    /// Stages in `batch` the removal of the oldest entries, so that with `incoming` bytes more
    /// the oplog stays within its size (caller holds the tail lock).
    fn stage_trim(
        &self,
        tail: &Tail,
        incoming: usize,
        batch: &mut WriteBatch,
    ) -> DocResult<Trimmed> {
        let mut trimmed = Trimmed::default();
        let excess = |t: &Trimmed| tail.bytes + incoming as i64 - t.bytes > self.cap_bytes;
        if !excess(&trimmed) {
            return Ok(trimmed);
        }
        for kv in self.engine.scan_all(self.table).map_err(storage_error)? {
            let (k, v) = kv.map_err(storage_error)?;
            batch.delete(self.table, k);
            trimmed.count += 1;
            trimmed.bytes += v.len() as i64;
            if !excess(&trimmed) {
                break;
            }
        }
        Ok(trimmed)
    }

    /// Writes `batch` through `write` with its oplog entry: the one a secondary is applying,
    /// or a new one made of `record` (not called when this thread's application has logged
    /// its entry already). An entry of a retryable write's statement brings the statement's
    /// record into the batch (`sessions`; `images`: the write's documents). The outer error:
    /// nothing was written; the inner: the engine's.
    pub(crate) fn write_logged(
        &self,
        batch: &mut WriteBatch,
        record: impl FnOnce() -> OpRecord,
        images: Images<'_>,
        write: impl FnOnce(&WriteBatch) -> engine::Result<()>,
    ) -> DocResult<engine::Result<()>> {
        let mut tail = self.tail.lock();
        let applying = APPLYING.with(|a| {
            a.borrow().as_ref().map(|a| {
                (!a.done && a.ts > tail.last).then(|| (a.ts, a.bytes.clone(), a.statement.clone()))
            })
        });
        // An entry being applied is committed history: its statement's record never refuses it.
        let replaying = applying.is_some();
        let (ts, bytes, statement) = match applying {
            // In the oplog already (or logged by an earlier write of this application).
            Some(None) => {
                mark_applied_logged();
                return Ok(if batch.is_empty() {
                    Ok(())
                } else {
                    write(batch)
                });
            }
            Some(Some(given)) => given,
            None => {
                let ts = tail.next_ts(now_secs());
                let rec = record();
                // A command a retryable write makes (an implicit create) is not one of its
                // statements.
                let session = (rec.op != "c").then(next_session_fields).flatten();
                let entry = self.entry_doc(rec, ts, session.as_ref());
                let bytes = crate::doc_codec::encode_doc(&entry)?;
                (ts, bytes, session.map(|_| entry))
            }
        };
        if let Some(entry) = &statement {
            if let Some((lsid, rec)) = StatementRecord::of_entry(entry, images.0, images.1) {
                let key = sessions::session_key(&lsid);
                if replaying {
                    self.sessions.stage_applied(&key, &rec, batch)?;
                } else {
                    self.sessions.stage(&key, &rec, batch)?;
                }
            }
        }
        let trimmed = self.stage_trim(&tail, bytes.len(), batch)?;
        let len = bytes.len();
        batch.put(self.table, ts_key(ts_of(ts)).to_vec(), bytes);
        let written = write(batch);
        if written.is_ok() {
            tail.appended(ts, len, trimmed);
            mark_applied_logged();
            self.signal.notify_insert();
        }
        Ok(written)
    }
}

impl Oplog {
    /// Writes a committed transaction's `batch` through `write` with its one entry (`record`,
    /// an `applyOps` command), in mongod's shape: the session's `lsid` and `txnNumber`
    /// (`session`), and `prevOpTime` null (the transaction's only entry). The outer error: nothing was written;
    /// the inner: the engine's.
    pub(crate) fn write_txn(
        &self,
        batch: &mut WriteBatch,
        record: OpRecord,
        session: Option<(&Document, i64)>,
        write: impl FnOnce(&WriteBatch) -> engine::Result<()>,
    ) -> DocResult<engine::Result<()>> {
        assert_eq!(record.op, "c", "a transaction logs one command entry");
        let mut tail = self.tail.lock();
        let ts = tail.next_ts(now_secs());
        let mut entry = Document::new();
        if let Some((lsid, txn_number)) = session {
            entry.insert("lsid", lsid.clone());
            entry.insert("txnNumber", txn_number);
        }
        for (k, v) in self.entry_doc(record, ts, None) {
            entry.insert(k, v);
        }
        entry.insert(
            "prevOpTime",
            doc! {"ts": Timestamp { time: 0, increment: 0 }, "t": -1i64},
        );
        // The session's record says the transaction committed, in the same batch: a retried
        // commitTransaction is answered from it, on this member or a later primary.
        if let Some((lsid, rec)) = StatementRecord::of_entry(&entry, None, None) {
            self.sessions
                .stage(&sessions::session_key(&lsid), &rec, batch)?;
        }
        let bytes = crate::doc_codec::encode_doc(&entry)?;
        let trimmed = self.stage_trim(&tail, bytes.len(), batch)?;
        let len = bytes.len();
        batch.put(self.table, ts_key(ts_of(ts)).to_vec(), bytes);
        let written = write(batch);
        if written.is_ok() {
            tail.appended(ts, len, trimmed);
            self.signal.notify_insert();
        }
        Ok(written)
    }
}

/// The entry this thread is applying is in the oplog: its other writes log nothing.
fn mark_applied_logged() {
    APPLYING.with(|a| {
        if let Some(a) = a.borrow_mut().as_mut() {
            a.done = true;
        }
    });
}

/// Whether this thread is applying an entry not yet in the oplog.
pub(crate) fn applied_unlogged() -> bool {
    APPLYING.with(|a| a.borrow().as_ref().is_some_and(|a| !a.done))
}

fn now_secs() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    u32::try_from(now).unwrap_or(u32::MAX)
}

/// Runs `body` as the application of the entry at `ts` (encoded: `bytes`): the writes it
/// makes log that entry (once, unless the oplog has reached `ts` already) instead of entries of
/// their own.
pub(crate) fn applying<T>(
    ts: u64,
    bytes: Vec<u8>,
    statement: Option<Document>,
    body: impl FnOnce() -> T,
) -> T {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            APPLYING.with(|a| *a.borrow_mut() = None);
        }
    }
    let nested = APPLYING.with(|a| {
        a.borrow_mut()
            .replace(Applying {
                ts,
                bytes,
                done: false,
                statement,
            })
            .is_some()
    });
    // An inner application would log its entry in place of the outer one's.
    assert!(!nested, "one oplog entry is applied at a time on a thread");
    let _restore = Restore;
    body()
}
