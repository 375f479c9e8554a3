//! The journal (write-ahead log), after WiredTiger's log as MongoDB runs it.
//!
//! Records go to numbered files `journal/FlashdocLog.NNNNNNNNNN` of `file_max` bytes (100 MiB),
//! preallocated when created. An [`Lsn`] is (file number, byte offset). Appending only copies the
//! framed record into an in-memory group-commit buffer, because the engine appends while holding
//! page latches; a flusher thread writes the buffer with positioned writes and fdatasyncs it every
//! `commit_interval` (MongoDB's JournalFlusher: 100 ms), or at once when someone waits in
//! [`Journal::sync_to`] (`j:true`). Under `Schedule::Inline` there is no thread and no timer: the
//! callers run the same flush when the buffer holds a slot (`SLOT_BYTES`, [`Journal::throttle`])
//! and when they sync, so what is written when depends only on what was appended. No write is
//! larger than a slot, as in WiredTiger. Every open starts
//! a new file, so an old, possibly torn, tail is never appended to. Whole files older than a checkpoint's LSN are removed by
//! [`Journal::remove_before`]. The on-disk format is in `docs/journal.md` and `journal/format.rs`.

mod failure;
#[cfg(test)]
mod failure_tests;
mod format;
mod lsn;
pub mod record;
mod replay;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod torn_flush_tests;

pub use crate::config::{JournalCompressor, JournalConfig, MAX_FILE_MAX, MIN_FILE_MAX};
pub use format::file_name;
pub use lsn::Lsn;
pub use replay::{replay, replay_with, Damage, DamageKind, ReplayMode, ReplayOutcome};

use crate::config::Schedule;
use crate::error::{Error, IoContext, Result};
use crate::io::{FileRole, Io, IoFile, OpenMode, WriteFailure, DIRECT_IO_ALIGN};
use failure::Stall;
use format::{EncodedRecord, FileHeader, FILE_HEADER_SIZE, MAX_PAYLOAD};
use parking_lot::{Condvar, Mutex};
use placement::{FileId, FileKind, PageKind, WriteCause};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Counters for serverStatus.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct JournalStats {
    pub records: u64,
    /// Payload bytes appended, before compression.
    pub bytes_appended: u64,
    /// Bytes written to journal files (records with headers and padding, file headers).
    pub bytes_written: u64,
    pub writes: u64,
    pub syncs: u64,
    pub files_created: u64,
    pub files_removed: u64,
    pub current_file: u64,
}

/// Wake the flusher early once this much is buffered, so a write burst turns into a few
/// flushes instead of one huge one every commit interval.
const FLUSH_BYTES: u64 = 4 << 20;
/// The largest single journal write: WiredTiger's log slot buffer (256 KB; a full slot is one
/// `pwrite`). A flush writes its bytes in slot-aligned pieces of the file, and under
/// `Schedule::Inline` the buffer is written as soon as it holds a slot. The size must not
/// follow the file size or the device: a journal write larger than an erase block fills blocks
/// with journal alone, a smaller one shares them with table pages, and when the inline journal
/// wrote whole files the lab's WAF under one stream fell from 3.8 to 3.0 as the device grew
/// (docs/placement.md, "The journal's write size").
pub const SLOT_BYTES: u64 = 256 << 10;
/// `throttle` blocks while more than this is appended but not yet written.
const MAX_BUFFERED: u64 = 32 << 20;
/// Initial capacity of a group-commit buffer.
const CHUNK_CAPACITY: usize = 1 << 20;
/// Emptied buffers kept for reuse, so appends rarely grow a buffer under the mutex.
const SPARE_BUFFERS: usize = 2;
/// A buffer grown by a huge record is freed rather than kept.
const MAX_SPARE_CAPACITY: usize = 16 << 20;

pub struct Journal {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// `Schedule::Inline`: the flusher's state, run by the callers (no thread).
    inline: Option<Mutex<Flusher>>,
}

/// What the appenders and the flusher thread share.
struct Shared {
    cfg: JournalConfig,
    /// Where each file's first record starts, and what every write is aligned to: the file
    /// header's end and 128 bytes, or one direct-I/O block for both (see [`Layout`]).
    layout: Layout,
    /// Size of files created from now on (`cfg.file_max` until `set_file_max`).
    file_max: AtomicU64,
    io: Arc<Io>,
    state: Mutex<State>,
    /// Wakes the flusher: a sync was asked for, the buffer is large, or close.
    flusher_wake: Condvar,
    /// Signalled when `durable` advances, the journal fails or the flusher exits.
    durable_changed: Condvar,
    /// Signalled when buffered bytes have been written (for `throttle`).
    written: Condvar,
    /// Trace ids of journal files, by file number.
    file_ids: Mutex<HashMap<u32, FileId>>,
    stats: Counters,
}

struct State {
    /// The LSN of the next record.
    next: Lsn,
    /// Size of file `next.file`: `file_max`, or more for a file holding one oversized record.
    cur_cap: u64,
    /// Appended records not yet handed to the flusher, one buffer per file.
    pending: Vec<Chunk>,
    spare: Vec<Vec<u8>>,
    /// Appended bytes not yet written.
    buffered: u64,
    /// Every record with an lsn below this is written and synced.
    durable: Lsn,
    sync_requested: bool,
    closing: bool,
    flusher_exited: bool,
    /// The journal failed for good (journal/failure.rs): the cause every caller gets.
    failure: Option<WriteFailure>,
    /// A flush stalled on a full disk: its records are queued again, appends and waits are
    /// refused with this error until a retry writes them (journal/failure.rs).
    stalled: Option<Stall>,
}

/// Records bound for one file, contiguous from `offset`.
struct Chunk {
    file: u32,
    offset: u32,
    /// Size to create the file with, if the flusher has to create it.
    cap: u64,
    bytes: Vec<u8>,
}

impl State {
    /// The error appends and waits get: the journal's failure, else its stall.
    fn refusal(&self) -> Option<Error> {
        if let Some(cause) = &self.failure {
            return Some(Error::WriteFailed(cause.clone()));
        }
        self.stalled.as_ref().map(Stall::to_error)
    }

    /// Whether buffered bytes still drain (`throttle` and `settle` wait only then).
    fn flowing(&self) -> bool {
        self.failure.is_none() && self.stalled.is_none() && !self.flusher_exited
    }
}

/// A flush's error with the chunks it did not write in full, in order.
type Unwritten = (Error, Vec<Chunk>);

/// How a flush ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flushed {
    /// Written, synced, durable.
    Done,
    /// A full disk: the records not written are queued again (journal/failure.rs).
    Stalled,
    /// For good: the seam's fail-stop state holds the cause.
    Failed,
}

#[derive(Default)]
struct Counters {
    records: AtomicU64,
    bytes_appended: AtomicU64,
    bytes_written: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    files_created: AtomicU64,
    files_removed: AtomicU64,
    current_file: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Where records go in a file. Buffered, records follow the 128-byte header and a flush writes
/// exactly the records it has. With direct I/O (`direct_io=log`) every write covers whole
/// blocks: the header's block is filled out by a filler record, so records start at the second
/// block, and a flush that ends inside a block is padded to its end by a filler record, so the
/// next flush starts on a fresh block and no durable block is ever rewritten (WiredTiger pads
/// its log slots the same way under direct I/O).
#[derive(Clone, Copy, Debug)]
struct Layout {
    first_record: u32,
    align: u64,
}

impl Layout {
    fn new(direct: bool) -> Layout {
        if direct {
            Layout {
                first_record: DIRECT_IO_ALIGN as u32,
                align: DIRECT_IO_ALIGN,
            }
        } else {
            Layout {
                first_record: FILE_HEADER_SIZE,
                align: format::ALIGN,
            }
        }
    }
    fn direct(self) -> bool {
        self.align > format::ALIGN
    }
    fn round_up(self, n: u64) -> u64 {
        n.div_ceil(self.align) * self.align
    }
    /// The usable size of a journal file: `file_max` rounded down to the alignment, so that every
    /// file ends on a record boundary and a partial record at the end is always a tear.
    fn capacity(self, file_max: u64) -> u64 {
        file_max / self.align * self.align
    }
    fn first_lsn(self, file: u32) -> Lsn {
        Lsn {
            file,
            offset: self.first_record,
        }
    }
}

impl Journal {
    /// Opens for appending: starts a new file numbered one past the highest existing file (an old
    /// file's tail may be torn, so it is never appended to), and starts the flusher thread.
    pub fn open(cfg: JournalConfig, io: Arc<Io>) -> Result<Arc<Journal>> {
        Journal::open_with(cfg, io, Schedule::Background)
    }

    /// [`Journal::open`], with the flushes done by a thread (`Background`) or by the callers
    /// (`Inline`: no thread, no timer).
    pub fn open_with(cfg: JournalConfig, io: Arc<Io>, schedule: Schedule) -> Result<Arc<Journal>> {
        cfg.validate()?;
        if !cfg.dir.is_dir() {
            io.create_dir(&cfg.dir)?;
            // The directory's name is volatile until its parent is synced: without this, a
            // power loss could take the whole journal, synced files and all (found by the
            // journal's own power-loss test, torn_flush_tests.rs).
            if let Some(parent) = cfg.dir.parent() {
                io.sync_dir(parent)?;
            }
        }
        let number = replay::list_files(&cfg.dir)?.last().map_or(1, |n| n + 1);
        let layout = Layout::new(io.direct_io().log || cfg.block_aligned);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next: layout.first_lsn(number),
                cur_cap: layout.capacity(cfg.file_max),
                pending: Vec::new(),
                spare: Vec::new(),
                buffered: 0,
                durable: layout.first_lsn(number),
                sync_requested: false,
                closing: false,
                flusher_exited: false,
                failure: None,
                stalled: None,
            }),
            file_max: AtomicU64::new(cfg.file_max),
            layout,
            cfg,
            io,
            flusher_wake: Condvar::new(),
            durable_changed: Condvar::new(),
            written: Condvar::new(),
            file_ids: Mutex::new(HashMap::new()),
            stats: Counters::default(),
        });
        let header = FileHeader {
            number,
            file_max: shared.cfg.file_max,
            session_start: true,
            prev_end: Lsn::default(),
        };
        let first = shared.create_file(header, layout.capacity(shared.cfg.file_max))?;
        let flusher = Flusher::new(Arc::clone(&shared), first);
        if schedule == Schedule::Inline {
            return Ok(Arc::new(Journal {
                shared,
                flusher: Mutex::new(None),
                inline: Some(Mutex::new(flusher)),
            }));
        }
        let thread = std::thread::Builder::new()
            .name("journal-flusher".into())
            .spawn(move || flusher.run())
            .ctx(|| "starting the journal flusher thread".to_string())?;
        Ok(Arc::new(Journal {
            shared,
            flusher: Mutex::new(Some(thread)),
            inline: None,
        }))
    }

    /// `Schedule::Inline`: writes and syncs everything appended so far in the calling thread,
    /// as one round of the flusher thread would. Returns the journal's failure, if it failed.
    fn flush_inline(&self, flusher: &Mutex<Flusher>) -> Result<()> {
        let mut f = flusher.lock();
        let chunks = {
            let mut st = self.shared.state.lock();
            if let Some(cause) = &st.failure {
                return Err(Error::WriteFailed(cause.clone()));
            }
            take_pending(&mut st, self.shared.layout)
        };
        match f.flush(chunks) {
            Flushed::Done => Ok(()),
            Flushed::Stalled | Flushed::Failed => Err(self
                .shared
                .state
                .lock()
                .refusal()
                .expect("a flush that did not finish left its error")),
        }
    }

    /// Under `Schedule::Inline`, retries a flush stalled on a full disk (the flusher thread
    /// retries on its own every commit interval). Call it before appending, without latches.
    pub fn retry_stalled(&self) {
        if let Some(flusher) = &self.inline {
            if self.shared.state.lock().stalled.is_some() {
                let _ = self.flush_inline(flusher);
            }
        }
    }

    /// `Schedule::Inline`: flushes once a slot is full (`SLOT_BYTES` buffered), as WiredTiger
    /// writes a log slot when it fills. A failure is kept for the next append.
    fn flush_inline_if_full(&self, flusher: &Mutex<Flusher>) {
        if self.shared.state.lock().buffered >= SLOT_BYTES {
            let _ = self.flush_inline(flusher);
        }
    }

    /// Appends one record and returns its LSN. Does no file I/O: the record is framed and
    /// compressed before the mutex is taken, then copied into the group-commit buffer. A record
    /// never spans files: if it does not fit in the rest of the current file it starts the next
    /// one, and a record larger than `file_max` gets a file of its own sized to fit.
    pub fn append(&self, payload: &[u8]) -> Result<Lsn> {
        self.append_then(payload, || ()).map(|(lsn, ())| lsn)
    }

    /// [`Journal::append`], then `then` run while no other record can be appended: what it
    /// does is ordered with the records exactly as this one is (a batch's commit number).
    pub fn append_then<T>(&self, payload: &[u8], then: impl FnOnce() -> T) -> Result<(Lsn, T)> {
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::Config(format!(
                "journal record of {} bytes is larger than the {MAX_PAYLOAD}-byte limit",
                payload.len()
            )));
        }
        let record = EncodedRecord::encode(payload, self.shared.cfg.compressor);
        let disk_len = record.disk_len();
        let sh = &*self.shared;
        let mut st = sh.state.lock();
        if let Some(refused) = st.refusal() {
            return Err(refused);
        }
        if st.closing {
            return Err(Error::Closed("the journal is closed".into()));
        }
        if st.next.offset as u64 + disk_len > st.cur_cap {
            let layout = sh.layout;
            st.cur_cap = layout
                .capacity(sh.file_max.load(Ordering::Relaxed))
                .max(layout.round_up(layout.first_record as u64 + disk_len));
            st.next = layout.first_lsn(st.next.file + 1);
        }
        let lsn = st.next;
        let cap = st.cur_cap;
        let st = &mut *st;
        match st.pending.last_mut() {
            Some(chunk) if chunk.file == lsn.file => record.write_to(&mut chunk.bytes),
            _ => {
                let mut bytes = st
                    .spare
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(CHUNK_CAPACITY));
                record.write_to(&mut bytes);
                st.pending.push(Chunk {
                    file: lsn.file,
                    offset: lsn.offset,
                    cap,
                    bytes,
                });
            }
        }
        st.next.offset += disk_len as u32;
        let before = st.buffered;
        st.buffered += disk_len;
        if before < FLUSH_BYTES && st.buffered >= FLUSH_BYTES {
            sh.flusher_wake.notify_one();
        }
        bump(&sh.stats.records, 1);
        bump(&sh.stats.bytes_appended, payload.len() as u64);
        Ok((lsn, then()))
    }

    /// Sets the file size from now on (64 KiB to 2 GiB). A current file larger than that ends
    /// where it is written up to: the next record starts a new file of the new size.
    pub fn set_file_max(&self, bytes: u64) -> Result<()> {
        if !(MIN_FILE_MAX..=MAX_FILE_MAX).contains(&bytes) {
            return Err(Error::Config(format!(
                "journal file_max {bytes} is out of range ({MIN_FILE_MAX} to {MAX_FILE_MAX} bytes)"
            )));
        }
        let mut st = self.shared.state.lock();
        self.shared.file_max.store(bytes, Ordering::Relaxed);
        let layout = self.shared.layout;
        let cap = layout.capacity(bytes);
        if st.cur_cap > cap {
            st.cur_cap = cap.max(layout.round_up(st.next.offset as u64));
        }
        Ok(())
    }

    /// The LSN the next append will get, or a lower bound of it: every record appended before
    /// this call has a smaller LSN.
    pub fn next_lsn(&self) -> Lsn {
        self.at_next_lsn(|lsn| lsn)
    }

    /// Runs `f` with the next LSN while no record can be appended: a checkpoint's journal
    /// position and its cut, taken at one point of the record order.
    pub fn at_next_lsn<T>(&self, f: impl FnOnce(Lsn) -> T) -> T {
        let st = self.shared.state.lock();
        f(st.next)
    }

    /// Blocks until every record with lsn <= `lsn` is written and fdatasync'ed (`j:true`). Asks
    /// the flusher for an immediate flush; concurrent callers share one sync.
    pub fn sync_to(&self, lsn: Lsn) -> Result<()> {
        self.wait_durable(Some(lsn))
    }

    /// Flushes and syncs everything appended so far.
    pub fn sync_all(&self) -> Result<()> {
        self.wait_durable(None)
    }

    fn wait_durable(&self, lsn: Option<Lsn>) -> Result<()> {
        let sh = &*self.shared;
        let mut st = sh.state.lock();
        // Records appended after this call are not waited for.
        let appended_end = st.next;
        let durable =
            |st: &State| st.durable >= appended_end || lsn.is_some_and(|l| st.durable > l);
        if let Some(flusher) = &self.inline {
            if durable(&st) {
                return Ok(());
            }
            drop(st);
            self.flush_inline(flusher)?;
            debug_assert!(
                durable(&sh.state.lock()),
                "an inline flush syncs all appended"
            );
            return Ok(());
        }
        loop {
            if durable(&st) {
                return Ok(());
            }
            if let Some(refused) = st.refusal() {
                return Err(refused);
            }
            if st.flusher_exited {
                return Err(Error::Closed(
                    "the journal is closed with records not yet synced".into(),
                ));
            }
            st.sync_requested = true;
            sh.flusher_wake.notify_one();
            sh.durable_changed.wait(&mut st);
        }
    }

    /// Backpressure: blocks while more than 32 MiB are appended but not yet written. Call it
    /// without latches held. Returns at once if the journal has failed (the next append reports
    /// it).
    ///
    /// Under `Schedule::Inline` nothing waits: the caller writes the buffer itself once it holds
    /// a slot (`SLOT_BYTES`, so the buffer never grows past one slot's worth of appends).
    pub fn throttle(&self) {
        if let Some(flusher) = &self.inline {
            return self.flush_inline_if_full(flusher);
        }
        let sh = &*self.shared;
        let mut st = sh.state.lock();
        while st.buffered > MAX_BUFFERED && st.flowing() {
            sh.flusher_wake.notify_one();
            sh.written.wait(&mut st);
        }
    }

    /// Blocks until an early flush that appends made due (the buffer passed `FLUSH_BYTES`) has
    /// written its bytes: the flusher's write then happened before this returns, whatever the
    /// thread scheduling. Returns at once if the journal has failed or stopped.
    pub fn settle(&self) {
        if let Some(flusher) = &self.inline {
            return self.flush_inline_if_full(flusher);
        }
        let sh = &*self.shared;
        let mut st = sh.state.lock();
        while st.buffered >= FLUSH_BYTES && st.flowing() {
            sh.flusher_wake.notify_one();
            sh.written.wait(&mut st);
        }
    }

    /// Deletes every whole journal file all of whose records have lsn < `lsn`, that is every file
    /// numbered below `lsn.file`. Files the flusher may still write to are kept for a later call.
    pub fn remove_before(&self, lsn: Lsn) -> Result<()> {
        let sh = &*self.shared;
        let limit = lsn.file.min(sh.state.lock().durable.file);
        let dir = &sh.cfg.dir;
        let mut removed = false;
        for n in replay::list_files(dir)? {
            if n >= limit {
                break;
            }
            let path = dir.join(format::file_name(n));
            // A file from an earlier run has no trace id yet; the seam gives it one so that
            // the removal (space given back) is still reported.
            let id = sh.file_ids.lock().get(&n).copied();
            match sh.io.remove(&path, id) {
                Ok(()) => {}
                // Someone else removed it: the goal is met.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Error::io(
                        format!("removing journal file {}", path.display()),
                        e,
                    ))
                }
            }
            removed = true;
            bump(&sh.stats.files_removed, 1);
            sh.file_ids.lock().remove(&n);
        }
        if removed {
            // Not needed for correctness (replay starts at the checkpoint's file), but it keeps
            // removed files from reappearing after a crash and being removed twice.
            sh.io.sync_dir(dir)?;
        }
        Ok(())
    }

    /// Stops the flusher after a final flush and sync. Idempotent; also called on drop. Returns
    /// the journal's failure, if it failed.
    pub fn close(&self) -> Result<()> {
        if let Some(flusher) = &self.inline {
            let res = self.flush_inline(flusher);
            let mut st = self.shared.state.lock();
            st.closing = true;
            st.flusher_exited = true;
            return res;
        }
        let handle = self.flusher.lock().take();
        if let Some(handle) = handle {
            self.shared.state.lock().closing = true;
            self.shared.flusher_wake.notify_one();
            if handle.join().is_err() {
                return Err(Error::Closed("the journal flusher thread panicked".into()));
            }
        }
        match self.shared.state.lock().refusal() {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    pub fn stats(&self) -> JournalStats {
        let c = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        JournalStats {
            records: get(&c.records),
            bytes_appended: get(&c.bytes_appended),
            bytes_written: get(&c.bytes_written),
            writes: get(&c.writes),
            syncs: get(&c.syncs),
            files_created: get(&c.files_created),
            files_removed: get(&c.files_removed),
            current_file: get(&c.current_file),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.shared.cfg.dir
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // A failure here was already reported to every append and sync after it happened.
        let _ = self.close();
    }
}

/// A journal file open for writing.
struct OpenFile {
    number: u32,
    file: Arc<IoFile>,
}

impl Shared {
    /// Creates a journal file, preallocates it and makes its header and its name durable, so that
    /// replay never finds a gap in the numbering or a file without a header before a later file.
    /// A full disk removes the new file again: the retry creates it afresh (`O_EXCL`).
    fn create_file(&self, header: FileHeader, cap: u64) -> Result<OpenFile> {
        let name = format::file_name(header.number);
        let path = self.cfg.dir.join(&name);
        let file = self.io.open(
            &path,
            OpenMode::CreateNew,
            FileRole::of(FileKind::Journal),
            trace_name(&self.cfg.dir, &name),
        )?;
        self.file_ids.lock().insert(header.number, file.id());
        bump(&self.stats.files_created, 1);
        self.stats
            .current_file
            .store(header.number as u64, Ordering::Relaxed);
        let open = OpenFile {
            number: header.number,
            file,
        };
        match self.make_durable(&open, header, cap) {
            Ok(()) => Ok(open),
            Err(e) if e.is_disk_full() => {
                let _ = self.io.remove(&path, Some(open.file.id()));
                self.file_ids.lock().remove(&header.number);
                self.io.sync_dir(&self.cfg.dir)?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// A new file's preallocation and header, synced with its name.
    fn make_durable(&self, open: &OpenFile, header: FileHeader, cap: u64) -> Result<()> {
        if self.cfg.preallocate {
            self.preallocate(&open.file, cap)?;
        }
        let mut first = header.encode().to_vec();
        let filler = self.layout.first_record as usize - first.len();
        if filler > 0 {
            format::write_filler(&mut first, filler);
        }
        self.write_at(open, &first, 0)?;
        self.io.sync_all(&open.file)?;
        bump(&self.stats.syncs, 1);
        self.io.sync_dir(&self.cfg.dir)
    }

    /// Allocates `len` bytes of disk for `file`. Falls back to extending the size (a sparse
    /// file, which still reads as zeros) where the filesystem cannot allocate ahead, and where
    /// the disk has not `len` bytes left: preallocation only saves work, and a journal that
    /// refused to start a file until a whole `file_max` is free would stop writes on a disk
    /// with room for many records. A write into the sparse file then meets the full disk
    /// itself (journal/failure.rs: stalled, retried once space is freed).
    fn preallocate(&self, file: &IoFile, len: u64) -> Result<()> {
        let context = || {
            format!(
                "preallocating {len} bytes for journal file {}",
                file.path().display()
            )
        };
        if let Err(e) = self.io.allocate(file, len) {
            if !matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL | libc::ENOSPC | libc::EDQUOT)
            ) {
                return Err(Error::io(context(), e));
            }
            if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                // A failed fallocate keeps the blocks it got before the disk ran out: give
                // them back, or they hold the last free space and the header cannot be written.
                self.io.set_len(file, 0, 0)?;
            }
            self.io.set_len(file, len, 0)?;
        }
        Ok(())
    }

    fn write_at(&self, f: &OpenFile, bytes: &[u8], offset: u64) -> Result<()> {
        // Through the seam: announced before it is issued, so a placement policy can choose
        // its stream; a failure is announced as a Free of the range.
        self.io
            .write(&f.file, bytes, offset, PageKind::Log, 0, WriteCause::Other)?;
        bump(&self.stats.writes, 1);
        bump(&self.stats.bytes_written, bytes.len() as u64);
        Ok(())
    }

    /// Writes `bytes` at `offset` in `pwrite`s that never cross a multiple of `SLOT_BYTES` in
    /// the file, so no write is larger than a slot and two writes of one flush never share a
    /// 4 KiB page (a page they shared would reach the device twice).
    fn write_slots(&self, f: &OpenFile, bytes: &[u8], offset: u64) -> Result<()> {
        let (mut at, mut rest) = (offset, bytes);
        while !rest.is_empty() {
            let slot_end = (at / SLOT_BYTES + 1) * SLOT_BYTES;
            let n = rest.len().min((slot_end - at) as usize);
            debug_assert!(n > 0 && n as u64 <= SLOT_BYTES);
            self.write_at(f, &rest[..n], at)?;
            at += n as u64;
            rest = &rest[n..];
        }
        debug_assert_eq!(at, offset + bytes.len() as u64);
        Ok(())
    }

    fn sync_data(&self, f: &OpenFile) -> Result<()> {
        self.io.sync_data(&f.file)?;
        bump(&self.stats.syncs, 1);
        Ok(())
    }
}

/// The file's name as the trace shows it: relative to the database directory.
fn trace_name(dir: &Path, name: &str) -> String {
    match dir.file_name() {
        Some(d) => format!("{}/{name}", d.to_string_lossy()),
        None => name.to_string(),
    }
}

/// The flusher thread: takes the group-commit buffer, writes it, syncs, and advances `durable`.
/// It is the only thread that writes records, so records reach their files in LSN order.
struct Flusher {
    shared: Arc<Shared>,
    file: OpenFile,
    /// Just past the last record written.
    written_end: Lsn,
    /// Every byte of `file` before this is synced: the next write that starts here marks its
    /// first record [`format::REC_FLUSH_START`].
    synced_end: Lsn,
}

impl Flusher {
    fn new(shared: Arc<Shared>, file: OpenFile) -> Flusher {
        let written_end = shared.layout.first_lsn(file.number);
        Flusher {
            shared,
            file,
            written_end,
            synced_end: written_end,
        }
    }

    /// Syncs the open file: everything written to it is durable.
    fn sync(&mut self) -> Result<()> {
        self.shared.sync_data(&self.file)?;
        if self.written_end.file == self.file.number {
            self.synced_end = self.written_end;
        }
        Ok(())
    }

    fn run(mut self) {
        let sh = Arc::clone(&self.shared);
        loop {
            let (chunks, closing) = {
                let mut st = sh.state.lock();
                wait_for_work(&sh, &mut st);
                (take_pending(&mut st, sh.layout), st.closing)
            };
            match self.flush(chunks) {
                Flushed::Failed => return,
                _ if closing => {
                    let mut st = sh.state.lock();
                    st.flusher_exited = true;
                    sh.durable_changed.notify_all();
                    sh.written.notify_all();
                    return;
                }
                Flushed::Done | Flushed::Stalled => {}
            }
        }
    }

    /// Writes and syncs what [`take_pending`] took and makes it durable; a full disk queues
    /// the records not written again, any other failure stops the journal for good
    /// (journal/failure.rs).
    fn flush(&mut self, (chunks, target): (Vec<Chunk>, Lsn)) -> Flushed {
        if chunks.is_empty() {
            return Flushed::Done;
        }
        let sh = Arc::clone(&self.shared);
        // After a failed sync the kernel may have dropped the pages it could not write: a
        // later write and sync of the file could report durable what is lost (fsyncgate).
        assert!(
            sh.state.lock().failure.is_none(),
            "the journal flushes nothing after it failed for good"
        );
        let bytes: u64 = chunks.iter().map(|c| c.bytes.len() as u64).sum();
        let written = self.write_chunks(chunks);
        {
            // The bytes are in the kernel now; appenders held back by `throttle` may go on.
            let unwritten: u64 = match &written {
                Ok(_) => 0,
                Err((_, rest)) => rest.iter().map(|c| c.bytes.len() as u64).sum(),
            };
            let mut st = sh.state.lock();
            st.buffered -= bytes - unwritten;
            sh.written.notify_all();
        }
        let result = written.and_then(|buffers| match self.sync() {
            Ok(()) => Ok(buffers),
            Err(e) => Err((e, Vec::new())),
        });
        let mut st = sh.state.lock();
        let ended = match result {
            Ok(buffers) => {
                st.durable = target;
                st.stalled = None;
                for b in buffers {
                    if st.spare.len() < SPARE_BUFFERS && b.capacity() <= MAX_SPARE_CAPACITY {
                        st.spare.push(b);
                    }
                }
                Flushed::Done
            }
            Err((e, unwritten)) => match Stall::of(&e) {
                Some(stall) => {
                    debug_assert!(!unwritten.is_empty(), "a full disk fails a write: {e}");
                    requeue(&mut st, unwritten);
                    st.stalled = Some(stall);
                    Flushed::Stalled
                }
                None => {
                    st.failure = Some(failure::stop_for_good(&sh.io, &sh.cfg.dir, &e));
                    st.flusher_exited = true;
                    Flushed::Failed
                }
            },
        };
        sh.durable_changed.notify_all();
        sh.written.notify_all();
        ended
    }

    /// Writes the chunks in order, creating files as the LSNs cross into them. Returns the
    /// emptied buffers for reuse; on failure, the error with the chunks not written in full.
    fn write_chunks(&mut self, chunks: Vec<Chunk>) -> std::result::Result<Vec<Vec<u8>>, Unwritten> {
        let mut buffers = Vec::with_capacity(chunks.len());
        let mut rest = chunks.into_iter();
        while let Some(mut chunk) = rest.next() {
            if let Err(e) = self.write_chunk(&mut chunk) {
                let mut unwritten = vec![chunk];
                unwritten.extend(rest);
                return Err((e, unwritten));
            }
            chunk.bytes.clear();
            buffers.push(chunk.bytes);
        }
        Ok(buffers)
    }

    /// Writes one chunk at its LSN, first creating its file if the LSNs crossed into the next.
    /// The chunk is left as it was (its records, unpadded), so a retry writes it again.
    fn write_chunk(&mut self, chunk: &mut Chunk) -> Result<()> {
        let sh = Arc::clone(&self.shared);
        if chunk.file != self.file.number {
            debug_assert_eq!(chunk.file, self.file.number + 1);
            // Replay reads a file started inside a session only if the previous one ended
            // cleanly, so the previous file must be durable before the next one exists.
            self.sync()?;
            let header = FileHeader {
                number: chunk.file,
                file_max: chunk.cap,
                session_start: false,
                prev_end: self.written_end,
            };
            self.file = sh.create_file(header, chunk.cap)?;
            // The header (and the filler of its block) is synced with the file's name.
            self.synced_end = sh.layout.first_lsn(chunk.file);
        }
        let at = Lsn {
            file: chunk.file,
            offset: chunk.offset,
        };
        let file_written = if self.written_end.file == chunk.file {
            self.written_end
        } else {
            sh.layout.first_lsn(chunk.file)
        };
        // Records reach their file in LSN order, each byte once: a chunk (a retried one too)
        // starts exactly where the file's records written so far end.
        assert_eq!(
            at, file_written,
            "a journal write starts where its file's records end"
        );
        if at == self.synced_end {
            format::mark_flush_start(&mut chunk.bytes);
        }
        let records_len = chunk.bytes.len();
        let records_end = Lsn {
            file: chunk.file,
            offset: chunk.offset + records_len as u32,
        };
        if sh.layout.direct() {
            // The last chunk ends on a block (`pad_to_block`); an earlier one ends its
            // file, whose rest reads as zeros: the clean end of its records.
            debug_assert!((chunk.offset as u64).is_multiple_of(sh.layout.align));
            let end = sh.layout.round_up(records_len as u64) as usize;
            chunk.bytes.resize(end, 0);
        }
        let written = sh.write_slots(&self.file, &chunk.bytes, chunk.offset as u64);
        chunk.bytes.truncate(records_len);
        written?;
        self.written_end = records_end;
        Ok(())
    }
}

/// The flusher's wait: until a sync is asked for, the buffer is large, the journal closes or
/// the commit interval passes; while stalled on a full disk, one commit interval between
/// retries (a sync asked for retries at once), never a busy loop.
fn wait_for_work(sh: &Shared, st: &mut parking_lot::MutexGuard<'_, State>) {
    if st.stalled.is_some() {
        if !st.closing {
            sh.flusher_wake.wait_for(st, sh.cfg.commit_interval);
        }
        return;
    }
    while !(st.closing || st.sync_requested || st.buffered >= FLUSH_BYTES) {
        if sh
            .flusher_wake
            .wait_for(st, sh.cfg.commit_interval)
            .timed_out()
        {
            break;
        }
    }
}

/// Puts the chunks a stalled flush did not write back before those appended since, in order.
fn requeue(st: &mut State, mut unwritten: Vec<Chunk>) {
    debug_assert!(unwritten
        .windows(2)
        .all(|w| (w[0].file, w[0].offset) < (w[1].file, w[1].offset)));
    unwritten.append(&mut st.pending);
    st.pending = unwritten;
}

/// Takes every appended record not yet handed to a flush, with the LSN just past them (the
/// flush's durable point), padding to a block first under direct I/O. Called with the state
/// locked.
fn take_pending(st: &mut State, layout: Layout) -> (Vec<Chunk>, Lsn) {
    st.sync_requested = false;
    if layout.direct() {
        pad_to_block(st, layout);
    }
    (std::mem::take(&mut st.pending), st.next)
}

/// Direct I/O: ends the pending records on a block boundary with a filler record, so the flush
/// about to be taken writes whole blocks and the next one starts a fresh block. Called with the
/// state locked, before the flusher takes the pending chunks.
fn pad_to_block(st: &mut State, layout: Layout) {
    let end = layout.round_up(st.next.offset as u64);
    let gap = (end - st.next.offset as u64) as usize;
    let Some(chunk) = st.pending.last_mut() else {
        return;
    };
    if gap == 0 {
        return;
    }
    debug_assert_eq!(chunk.file, st.next.file);
    debug_assert!(end <= st.cur_cap);
    format::write_filler(&mut chunk.bytes, gap);
    st.next.offset = end as u32;
    st.buffered += gap as u64;
}
