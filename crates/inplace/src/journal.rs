//! The redo journal (MMAPv1's `journal/j._N` files): one record per write batch holding the
//! bytes the batch left in the data files — the whole page the first time a page changes after
//! a write-back, the changed bytes after that — appended to a buffer and group-committed (one
//! write and one `fdatasync`) every `commit_interval`, or at once when a writer waits for it
//! (`j: true`). Recovery rewrites every record's bytes onto the data files in order; since
//! each record holds bytes rather than operations, replaying one twice is harmless.
//!
//! Record: `len u32 | crc32c u32 | body`, body `seq u64 | n u32 | n × (file u32, offset u64,
//! len u32, bytes)`; the checksum covers the body. The top bit of `seq` ([`FLUSH_START`]) marks
//! the first record of each commit: everything before it in the file was synced before it was
//! written. Reading back (`replay`) tells a crash's torn tail from corruption by it.

use crate::pool::JournalEntry;
use engine::io::{FileRole, Io, IoFile, OpenMode};
use engine::{Error, Result};
use parking_lot::{Condvar, Mutex};
use placement::{FileKind, PageKind, WriteCause};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A journal file's path in the journal directory `dir`.
pub fn journal_path(dir: &Path, gen: u64) -> PathBuf {
    dir.join(format!("j._{gen}"))
}

/// The bit of a record's `seq` that marks the first record of a commit. Batch numbers stay
/// below it (a batch a nanosecond would take 292 years to reach it), and readers from before
/// the mark ignored `seq`, so they read marked files as before.
pub const FLUSH_START: u64 = 1 << 63;

/// Encodes one batch's record.
pub fn encode_record(seq: u64, entries: &[JournalEntry]) -> Vec<u8> {
    assert!(
        (seq & FLUSH_START) == 0,
        "batch {seq} collides with the flush-start mark"
    );
    let mut body = seq.to_le_bytes().to_vec();
    body.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        body.extend_from_slice(&e.file.to_le_bytes());
        body.extend_from_slice(&e.offset.to_le_bytes());
        body.extend_from_slice(&(e.bytes.len() as u32).to_le_bytes());
        body.extend_from_slice(&e.bytes);
    }
    let mut rec = (body.len() as u32).to_le_bytes().to_vec();
    rec.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    rec.extend_from_slice(&body);
    rec
}

/// Marks the record at the start of `records` (a commit's bytes) as the first of its commit,
/// and checksums it again. The whole record must be there: a mark on a record cut short would
/// write a checksum that no reader can verify.
pub fn mark_flush_start(records: &mut [u8]) {
    let len = records.get(..4).map_or(0, |word| {
        u32::from_le_bytes(word.try_into().expect("4 bytes")) as usize
    });
    assert!(
        len >= 12 && 8 + len <= records.len(),
        "marking a record of {len} bytes in {} bytes",
        records.len()
    );
    let body = &mut records[8..8 + len];
    let seq = u64::from_le_bytes(body[..8].try_into().expect("8 bytes")) | FLUSH_START;
    body[..8].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32c::crc32c(body);
    records[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The generations of the journal files in `dir`, oldest first.
pub fn generations(dir: &Path) -> Result<Vec<u64>> {
    let mut gens = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(gens);
    };
    for e in rd {
        let e = e.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        if let Some(g) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("j._"))
            .and_then(|g| g.parse::<u64>().ok())
        {
            gens.push(g);
        }
    }
    gens.sort_unstable();
    Ok(gens)
}

/// Reads a journal file whole through the seam.
pub fn read_generation(io: &Io, dir: &Path, gen: u64) -> Result<Vec<u8>> {
    let path = journal_path(dir, gen);
    let len = std::fs::metadata(&path)
        .map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?
        .len();
    let f = io.open(
        &path,
        OpenMode::Existing,
        FileRole::of(FileKind::Journal),
        format!("journal/j._{gen}"),
    )?;
    let mut buf = vec![0u8; len as usize];
    io.read(&f, &mut buf, 0)?;
    Ok(buf)
}

struct Tail {
    file: Arc<IoFile>,
    gen: u64,
    /// Where the next commit writes.
    offset: u64,
    pending: Vec<u8>,
    /// The newest batch in `pending`.
    pending_seq: u64,
    durable_seq: u64,
    /// A writer waits: commit now rather than at the interval.
    urgent: bool,
    failed: Option<String>,
    /// The last commit found the disk full: its batches wait in `pending` for the next one.
    full: Option<DiskFull>,
}

/// A commit that could not write for lack of space (ENOSPC, EDQUOT, EFBIG): nothing of it
/// reached the file, so it is not a failure of the journal but a refusal of the writes that
/// wait on it; the next commit writes them again at the same offset.
struct DiskFull {
    /// The newest batch of that commit: writers waiting on it or an older one are told.
    seq: u64,
    context: String,
    errno: i32,
}

impl DiskFull {
    fn error(&self) -> Error {
        Error::io(
            self.context.clone(),
            std::io::Error::from_raw_os_error(self.errno),
        )
    }
}

pub struct Journal {
    io: Arc<Io>,
    /// The journal directory.
    dir: PathBuf,
    tail: Mutex<Tail>,
    /// Serializes commits (one write at a time, in order).
    commit_lock: Mutex<()>,
    durable: Condvar,
    wake: Condvar,
    pub interval: Duration,
}

impl Journal {
    /// Starts a new, empty journal file of generation `gen` in `dir`; batches up to `seq` are
    /// durable.
    pub fn create(
        io: Arc<Io>,
        dir: &Path,
        gen: u64,
        seq: u64,
        interval: Duration,
    ) -> Result<Journal> {
        let file = Self::new_file(&io, dir, gen)?;
        Ok(Journal {
            io,
            dir: dir.to_path_buf(),
            tail: Mutex::new(Tail {
                file,
                gen,
                offset: 0,
                pending: Vec::new(),
                pending_seq: seq,
                durable_seq: seq,
                urgent: false,
                failed: None,
                full: None,
            }),
            commit_lock: Mutex::new(()),
            durable: Condvar::new(),
            wake: Condvar::new(),
            interval,
        })
    }

    fn new_file(io: &Io, dir: &Path, gen: u64) -> Result<Arc<IoFile>> {
        io.create_dir(dir)?;
        let f = io.open(
            &journal_path(dir, gen),
            OpenMode::CreateTruncate,
            FileRole::of(FileKind::Journal),
            format!("journal/j._{gen}"),
        )?;
        io.sync_dir(dir)?;
        if let Some(parent) = dir.parent() {
            io.sync_dir(parent)?;
        }
        Ok(f)
    }

    /// Buffers batch `seq`'s record (called in batch order, under the engine's lock).
    pub fn append(&self, seq: u64, entries: &[JournalEntry]) {
        let mut t = self.tail.lock();
        assert!(seq > t.pending_seq, "journal records out of order");
        t.pending.extend_from_slice(&encode_record(seq, entries));
        t.pending_seq = seq;
    }

    /// Writes and syncs what is buffered.
    pub fn commit(&self) -> Result<()> {
        let _one = self.commit_lock.lock();
        let (file, offset, bytes, seq) = {
            let mut t = self.tail.lock();
            if let Some(f) = &t.failed {
                return Err(Error::Closed(format!("the journal failed: {f}")));
            }
            t.urgent = false;
            if t.pending.is_empty() {
                return Ok(());
            }
            let mut bytes = std::mem::take(&mut t.pending);
            // Every commit before this one was synced (or failed the journal for good).
            mark_flush_start(&mut bytes);
            let offset = t.offset;
            t.offset += bytes.len() as u64;
            (t.file.clone(), offset, bytes, t.pending_seq)
        };
        let done = self
            .io
            .write(&file, &bytes, offset, PageKind::Log, 0, WriteCause::Other)
            .and_then(|()| self.io.sync_data(&file));
        // ENOSPC, EDQUOT or EFBIG from the write (a failed sync is never this).
        let full_errno = match &done {
            Err(e @ Error::Io { source, .. }) if e.is_disk_full() => source.raw_os_error(),
            _ => None,
        };
        let mut t = self.tail.lock();
        match (&done, full_errno) {
            (Ok(()), _) => {
                t.durable_seq = t.durable_seq.max(seq);
                t.full = None;
            }
            (Err(Error::Io { context, .. }), Some(errno)) => {
                // Only a commit moves the offset, under `commit_lock`: this one's records go
                // back in front of those appended since, to be written at the same offset.
                t.offset = offset;
                let newer = std::mem::replace(&mut t.pending, bytes);
                t.pending.extend_from_slice(&newer);
                t.full = Some(DiskFull {
                    seq,
                    context: context.clone(),
                    errno,
                });
            }
            (Err(e), _) => t.failed = Some(e.to_string()),
        }
        self.durable.notify_all();
        done
    }

    /// Waits until batch `seq` is in the synced journal.
    pub fn wait_durable(&self, seq: u64) -> Result<()> {
        let mut t = self.tail.lock();
        while t.durable_seq < seq {
            if let Some(f) = &t.failed {
                return Err(Error::Closed(format!("the journal failed: {f}")));
            }
            if let Some(full) = t.full.as_ref().filter(|f| seq <= f.seq) {
                return Err(full.error());
            }
            t.urgent = true;
            self.wake.notify_all();
            self.durable.wait(&mut t);
        }
        Ok(())
    }

    /// The group committer's wait: until the interval passes or a writer waits.
    pub fn wait_for_work(&self) {
        let mut t = self.tail.lock();
        if !t.urgent {
            self.wake.wait_for(&mut t, self.interval);
        }
    }

    /// Wakes the group committer (at shutdown). The flag is set under the lock its wait
    /// checks it under: a notification alone is lost when the committer is between its stop
    /// check and its wait, which then lasts the whole interval (an hour in the power-loss
    /// loop's configuration, whose engine drop hung on it).
    pub fn wake(&self) {
        let mut t = self.tail.lock();
        t.urgent = true;
        self.wake.notify_all();
    }

    /// After a write-back: everything journaled is in the data files, so a new, empty file
    /// takes over and the old one is removed (its records are no longer needed).
    pub fn rotate(&self) -> Result<()> {
        let _one = self.commit_lock.lock();
        let mut t = self.tail.lock();
        assert!(
            t.pending.is_empty(),
            "rotating a journal with uncommitted records"
        );
        let gen = t.gen + 1;
        let file = Self::new_file(&self.io, &self.dir, gen)?;
        let old = std::mem::replace(&mut t.file, file);
        let path = journal_path(&self.dir, t.gen);
        t.gen = gen;
        t.offset = 0;
        self.io
            .remove(&path, Some(old.id()))
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        self.io.sync_dir(&self.dir)
    }

    pub fn durable_seq(&self) -> u64 {
        self.tail.lock().durable_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::io::{Fault, FaultOp, FaultyFiles, FlashConfig};

    /// Linux's ENOSPC ("No space left on device").
    const ENOSPC: i32 = 28;

    fn entry(byte: u8) -> JournalEntry {
        JournalEntry {
            file: 0,
            offset: 4096,
            bytes: vec![byte; 100],
        }
    }

    #[test]
    fn a_full_disk_refuses_the_waiting_writers_and_the_next_commit_writes_their_records() {
        let faults = Arc::new(FaultyFiles::new());
        let backend: Arc<dyn engine::io::Backend> = faults.clone();
        let io = Arc::new(Io::new(None, &FlashConfig::default(), Some(backend)).unwrap());
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        let j = Journal::create(io.clone(), &dir, 1, 0, Duration::from_millis(100)).unwrap();
        j.append(1, &[entry(1)]);
        faults.arm(Fault {
            op: FaultOp::Write,
            kind: Some(FileKind::Journal),
            skip: 0,
            times: 1,
            errno: ENOSPC,
        });
        // Refused as a full disk (OutOfDiskSpace, recoverable), not as a failed journal.
        assert!(j.commit().unwrap_err().is_disk_full());
        assert!(j.wait_durable(1).unwrap_err().is_disk_full());
        assert_eq!(j.durable_seq(), 0);
        j.append(2, &[entry(2)]);
        j.commit().unwrap();
        j.wait_durable(2).unwrap();
        j.wait_durable(1).unwrap();
        let file = crate::replay::read_file(&read_generation(&io, &dir, 1).unwrap());
        assert_eq!(file.end, crate::replay::End::Clean);
        let seqs: Vec<u64> = file.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2], "batch 1 written once, before batch 2");
        assert_eq!(file.records[0].entries[0].bytes, vec![1; 100]);
        // The retried commit's first record is batch 1's, marked once more.
        assert!(file.records[0].flush_start && !file.records[1].flush_start);
    }

    #[test]
    #[should_panic(expected = "collides with the flush-start mark")]
    fn a_batch_number_with_the_flush_start_bit_is_refused() {
        encode_record(FLUSH_START | 5, &[entry(1)]);
    }

    #[test]
    #[should_panic(expected = "marking a record of")]
    fn marking_a_record_cut_short_trips_the_assertion() {
        let rec = encode_record(1, &[entry(1)]);
        mark_flush_start(&mut rec[..rec.len() - 1].to_vec());
    }

    #[test]
    fn each_commit_marks_its_first_record_and_only_that_one() {
        let io = Arc::new(Io::quiet());
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        let j = Journal::create(io.clone(), &dir, 1, 0, Duration::from_millis(100)).unwrap();
        for (seq, commit) in [
            (1, false),
            (2, false),
            (3, true),
            (4, true),
            (5, false),
            (6, true),
        ] {
            j.append(seq, &[entry(seq as u8)]);
            if commit {
                j.commit().unwrap();
            }
        }
        let file = crate::replay::read_file(&read_generation(&io, &dir, 1).unwrap());
        assert_eq!(file.end, crate::replay::End::Clean);
        let marks: Vec<(u64, bool)> = file
            .records
            .iter()
            .map(|r| (r.seq, r.flush_start))
            .collect();
        assert_eq!(
            marks,
            [
                (1, true),
                (2, false),
                (3, false),
                (4, true),
                (5, true),
                (6, false)
            ]
        );
    }

    #[test]
    fn a_failed_sync_fails_the_journal_for_good() {
        let faults = Arc::new(FaultyFiles::new());
        let backend: Arc<dyn engine::io::Backend> = faults.clone();
        let io = Arc::new(Io::new(None, &FlashConfig::default(), Some(backend)).unwrap());
        let tmp = tempfile::tempdir().unwrap();
        let j = Journal::create(io, &tmp.path().join("journal"), 1, 0, Duration::ZERO).unwrap();
        j.append(1, &[entry(1)]);
        faults.arm(Fault {
            op: FaultOp::Sync,
            kind: Some(FileKind::Journal),
            skip: 0,
            times: 1,
            errno: ENOSPC,
        });
        // A sync that failed may have dropped what it covered: never retried, even for ENOSPC.
        assert!(!j.commit().unwrap_err().is_disk_full());
        j.append(2, &[entry(2)]);
        assert!(matches!(j.commit(), Err(Error::Closed(_))));
        assert!(matches!(j.wait_durable(2), Err(Error::Closed(_))));
    }
}
