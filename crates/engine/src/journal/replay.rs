//! Reading the journal back: every whole record from a start LSN, in LSN order, up to the end of
//! the log (the first torn, truncated, zero or corrupt record that no later session stepped over).
//!
//! A record that fails its checks is a crash's torn tail when nothing valid follows it. A later
//! file of the same session after it means records were lost in the middle of the log:
//! corruption. Strict replay reports corruption as [`ReplayOutcome::corruption`] and stops;
//! salvage ([`ReplayMode::Salvage`], `flashdoc repair`) skips the damaged bytes and goes on at
//! the next record that verifies (found on the 128-byte boundaries after it, so that a damaged
//! length word cannot hide it).
//!
//! # Torn or synced
//!
//! A bad record with records that verify after it in the same file is not always corruption.
//! A flush writes many records and then syncs once, and a device may persist the sectors of
//! unsynced writes in any order, so a crash during a flush can lose a sector in the middle of
//! it and keep the sectors after it. What tells the two apart is whether the bad record was
//! synced, which the records themselves prove: the flusher marks the first record of each
//! write that follows a sync of its file ([`format::REC_FLUSH_START`]), so a marked record
//! that verifies anywhere after the damage proves the damage was synced before that record
//! was written: corruption. Without such proof, the damage lies in the last flush, which a
//! crash may have torn; it is corruption still when no crash could have left it (its header
//! damaged, or no 512-byte sector of it lost: [`Reader::tear_shaped`]), and otherwise the torn
//! tail, ending the log before it.

use super::format::{
    self, check_record_header, file_name, padded_len, FileHeader, HeaderCheck, ALIGN,
    FILE_HEADER_SIZE, RECORD_HEADER_SIZE,
};
use super::lsn::Lsn;
use crate::error::{IoContext, Result};
use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How replay treats damage that is not a crash's torn tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayMode {
    /// Stop at the damage and report it in [`ReplayOutcome::corruption`] (opening a database).
    Strict,
    /// Skip each damaged extent, resynchronising at the next record whose checksum verifies,
    /// and read every file (`flashdoc repair`); the skipped extents are in
    /// [`ReplayOutcome::damaged`].
    Salvage,
}

/// What kind of place a [`Damage`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// A record (or the bytes where one should start) fails its checks.
    Record,
    /// The file header is unusable.
    FileHeader,
    /// The file does not exist, while files after it do.
    MissingFile,
}

/// A place where the journal's records stop: a torn or corrupt record, a bad file header, a
/// missing file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub kind: DamageKind,
    /// The journal file (for a missing file, its name).
    pub file: PathBuf,
    /// Byte offset in `file` where the valid records stop.
    pub offset: u64,
    /// What is wrong there.
    pub why: String,
    /// The next record after the damage whose checksum verifies, if one was found: in the same
    /// file, or the first record position of a later file of the same session.
    pub next_valid: Option<Lsn>,
}

impl Damage {
    /// Bytes of `file` skipped from the damage to the next valid record in the same file (the
    /// rest of the file when there is none).
    pub fn skipped_bytes(&self, file_len: u64) -> u64 {
        let resume = self
            .next_valid
            .filter(|l| Some(l.file) == file_number(&self.file))
            .map_or(file_len, |l| l.offset as u64);
        resume.saturating_sub(self.offset)
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self.file.display();
        match self.kind {
            DamageKind::Record => write!(f, "{file} at offset {}: {}", self.offset, self.why),
            DamageKind::FileHeader => write!(f, "{file}: {}", self.why),
            DamageKind::MissingFile => write!(f, "journal file {file} is missing"),
        }
    }
}

fn file_number(path: &Path) -> Option<u32> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(format::parse_file_name)
}

/// Statistics of a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// Records passed to the callback (those with lsn >= `from`).
    pub records: u64,
    /// Just past the last whole record read: where the valid log ends. `Lsn::default()` when no
    /// journal file with a readable header was found.
    pub end: Lsn,
    /// Where and why replay stopped early, if it did (a torn or corrupt record, a file with a bad
    /// header, a missing file). A crash leaves a torn tail in the last file now and then; this is
    /// for the log, not an error — unless [`ReplayOutcome::corruption`] is set, which says that
    /// this stop is damage with valid records after it.
    pub torn_tail: Option<String>,
    /// Torn tails of earlier sessions that replay stepped over. Every `Journal::open` starts a
    /// new file, flagged as a session start; the session that wrote it had recovered from the
    /// same log, which ended at that tear, so its records follow on from the records before the
    /// tear and must be replayed too.
    pub skipped_tails: Vec<String>,
    /// Strict replay: damage that is not a crash's torn tail (valid records follow it, or a
    /// later file of the same session does). Replay stopped there; the records after it were
    /// not read, and acknowledged writes may be among them.
    pub corruption: Option<Damage>,
    /// Salvage: every damaged extent that replay stepped over to the next valid record.
    pub damaged: Vec<Damage>,
}

/// Reads every whole record with lsn >= `from` (in LSN order) in the journal files in `dir`,
/// calling `f(lsn, payload)` with the uncompressed payload.
///
/// The log ends at the first torn, truncated, zero or corrupt record. Replay then goes on into
/// the next file only when that file was started by a new session (see
/// [`ReplayOutcome::skipped_tails`]); a file started by a switch inside the same session
/// is not read, because that session wrote and synced the whole previous file before starting
/// it, so a hole there means lost records, not a crash tail: that, and a bad record with a
/// valid one after it, is reported in [`ReplayOutcome::corruption`].
///
/// A missing directory or no files gives zero records. An error from `f` aborts and is
/// returned; I/O errors are errors.
pub fn replay(
    dir: &Path,
    from: Lsn,
    f: impl FnMut(Lsn, &[u8]) -> Result<()>,
) -> Result<ReplayOutcome> {
    replay_with(dir, from, ReplayMode::Strict, f)
}

/// [`replay`] in the given mode: [`ReplayMode::Salvage`] passes `f` every record whose
/// checksum verifies, in LSN order, stepping over damage instead of stopping at it.
pub fn replay_with(
    dir: &Path,
    from: Lsn,
    mode: ReplayMode,
    mut f: impl FnMut(Lsn, &[u8]) -> Result<()>,
) -> Result<ReplayOutcome> {
    let numbers: Vec<u32> = list_files(dir)?
        .into_iter()
        .filter(|&n| n >= from.file)
        .collect();
    let mut walk = Walk {
        dir,
        from,
        mode,
        out: ReplayOutcome::default(),
        pending: None,
        prev: None,
    };
    for (i, &n) in numbers.iter().enumerate() {
        if walk.read_file(n, numbers.len() - i, &mut f)?.is_break() {
            return Ok(walk.out);
        }
    }
    walk.out.torn_tail = walk.pending.map(|d| d.to_string());
    Ok(walk.out)
}

/// Replay's position in the log, file by file.
struct Walk<'a> {
    dir: &'a Path,
    from: Lsn,
    mode: ReplayMode,
    out: ReplayOutcome,
    /// The first break in the log not yet known to be a crash tail that a later session
    /// stepped over.
    pending: Option<Damage>,
    /// The previous file read: its number and, if its records ended cleanly, where.
    prev: Option<(u32, Option<u32>)>,
}

impl Walk<'_> {
    /// Reads file `n` (`remaining` files are left, this one included); `Break` when replay
    /// stops here.
    fn read_file(
        &mut self,
        n: u32,
        remaining: usize,
        f: &mut impl FnMut(Lsn, &[u8]) -> Result<()>,
    ) -> Result<ControlFlow<()>> {
        let path = self.dir.join(file_name(n));
        if let Some((pn, _)) = self.prev {
            if n != pn + 1 && self.mode == ReplayMode::Salvage {
                // Salvage reports every break it passes, this one too.
                self.out.damaged.extend(self.pending.take());
            }
            if n != pn + 1 && self.pending.is_none() {
                self.pending = Some(Damage {
                    kind: DamageKind::MissingFile,
                    file: self.dir.join(file_name(pn + 1)),
                    offset: 0,
                    why: "the file is missing".into(),
                    next_valid: None,
                });
            }
        }
        let mut reader = Reader::open(&path)?;
        let start = match reader.header(n)? {
            Ok(header) => {
                if self.enter(n, &header, remaining).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                FILE_HEADER_SIZE as u64
            }
            Err(why) => match self.bad_header(&mut reader, n, why)? {
                ControlFlow::Continue(Some(at)) => at,
                ControlFlow::Continue(None) => {
                    self.prev = Some((n, None));
                    return Ok(ControlFlow::Continue(()));
                }
                ControlFlow::Break(()) => return Ok(ControlFlow::Break(())),
            },
        };
        self.out.end = Lsn {
            file: n,
            offset: start as u32,
        };
        match reader.scan(n, start, self, f)? {
            FileEnd::Clean(at) => self.prev = Some((n, Some(at))),
            FileEnd::Corrupt(d) => {
                self.corrupt(d);
                return Ok(ControlFlow::Break(()));
            }
            FileEnd::Torn(d) => {
                self.pending.get_or_insert(d);
                self.prev = Some((n, None));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// File `n`'s header is unusable. With no valid record after it, it is a break like any
    /// other (a file being created when the crash came has a zero header); with one, the file
    /// was damaged after its records were written. Returns where to read records from, if
    /// anywhere.
    fn bad_header(
        &mut self,
        reader: &mut Reader,
        n: u32,
        why: String,
    ) -> Result<ControlFlow<(), Option<u64>>> {
        let mut damage = Damage {
            kind: DamageKind::FileHeader,
            file: reader.path.clone(),
            offset: 0,
            why,
            next_valid: None,
        };
        damage.next_valid = reader.next_valid(n, FILE_HEADER_SIZE as u64)?;
        let Some(next) = damage.next_valid else {
            self.pending.get_or_insert(damage);
            return Ok(ControlFlow::Continue(None));
        };
        if self.mode == ReplayMode::Strict {
            self.corrupt(damage);
            return Ok(ControlFlow::Break(()));
        }
        // Whether this file started a session is unknown: what came before is damage too.
        self.out.damaged.extend(self.pending.take());
        self.out.damaged.push(damage);
        Ok(ControlFlow::Continue(Some(next.offset as u64)))
    }

    /// Going from the previous file to file `n`, whose header is good: a session start steps
    /// over the previous session's tail; a switch inside a session needs the previous file to
    /// have ended cleanly where the header says.
    fn enter(&mut self, n: u32, header: &FileHeader, remaining: usize) -> ControlFlow<()> {
        let Some((pn, prev_end)) = self.prev else {
            return ControlFlow::Continue(());
        };
        if header.session_start {
            self.out
                .skipped_tails
                .extend(self.pending.take().map(|d| d.to_string()));
            return ControlFlow::Continue(());
        }
        if let (None, Some(end)) = (&self.pending, prev_end) {
            let end = Lsn {
                file: pn,
                offset: end,
            };
            if header.prev_end != end {
                self.pending = Some(Damage {
                    kind: DamageKind::Record,
                    file: self.dir.join(file_name(pn)),
                    offset: end.offset as u64,
                    why: format!(
                        "the next file's header says this file's records end at {}, but they \
                         end at {end}; records are missing",
                        header.prev_end
                    ),
                    next_valid: None,
                });
            }
        }
        let Some(mut damage) = self.pending.take() else {
            return ControlFlow::Continue(());
        };
        damage.next_valid = Some(Lsn {
            file: n,
            offset: FILE_HEADER_SIZE,
        });
        if self.mode == ReplayMode::Salvage {
            self.out.damaged.push(damage);
            return ControlFlow::Continue(());
        }
        self.out.torn_tail = Some(format!(
            "{damage}; {remaining} later journal file(s) not read"
        ));
        damage.why = format!(
            "{}; journal file {} of the same session follows, so this is not a torn tail",
            damage.why,
            file_name(n)
        );
        self.out.corruption = Some(damage);
        ControlFlow::Break(())
    }

    /// Strict replay stops at damage with valid records after it (the caller stops).
    fn corrupt(&mut self, damage: Damage) {
        debug_assert!(damage.next_valid.is_some());
        self.out.torn_tail = Some(damage.to_string());
        self.out.corruption = Some(damage);
    }
}

/// The numbers of the journal files in `dir`, ascending; empty if `dir` does not exist.
pub fn list_files(dir: &Path) -> Result<Vec<u32>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(crate::Error::io(
                format!("listing journal directory {}", dir.display()),
                e,
            ))
        }
    };
    let mut numbers = Vec::new();
    for entry in entries {
        let entry = entry.ctx(|| format!("listing journal directory {}", dir.display()))?;
        if let Some(n) = entry.file_name().to_str().and_then(format::parse_file_name) {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// Reads a journal file through a window of a few MB, so that small records do not each cost a
/// system call.
struct Reader {
    file: File,
    path: PathBuf,
    len: u64,
    window: Vec<u8>,
    window_at: u64,
}

const WINDOW: usize = 4 << 20;

impl Reader {
    fn open(path: &Path) -> Result<Reader> {
        let file = File::open(path).ctx(|| format!("opening journal file {}", path.display()))?;
        let len = file
            .metadata()
            .ctx(|| format!("reading the size of journal file {}", path.display()))?
            .len();
        Ok(Reader {
            file,
            path: path.to_path_buf(),
            len,
            window: Vec::new(),
            window_at: 0,
        })
    }

    /// `len` bytes at `at`, which the caller has checked lie inside the file.
    fn read(&mut self, at: u64, len: usize) -> Result<&[u8]> {
        let window_end = self.window_at + self.window.len() as u64;
        if at < self.window_at || at + len as u64 > window_end {
            let want = (len.max(WINDOW) as u64).min(self.len - at) as usize;
            self.window.resize(want, 0);
            self.file.read_exact_at(&mut self.window, at).ctx(|| {
                format!(
                    "reading journal file {} at offset {at}",
                    self.path.display()
                )
            })?;
            self.window_at = at;
        }
        let start = (at - self.window_at) as usize;
        Ok(&self.window[start..start + len])
    }

    /// The file header, or why it is unusable.
    fn header(&mut self, number: u32) -> Result<std::result::Result<FileHeader, String>> {
        if self.len < FILE_HEADER_SIZE as u64 {
            return Ok(Err(format!(
                "file header is cut short ({} of {FILE_HEADER_SIZE} bytes)",
                self.len
            )));
        }
        let h = match FileHeader::decode(self.read(0, FILE_HEADER_SIZE as usize)?) {
            Ok(h) => h,
            Err(why) => return Ok(Err(why)),
        };
        if h.number != number {
            return Ok(Err(format!(
                "file header says file number {}, the name says {number}",
                h.number
            )));
        }
        Ok(Ok(h))
    }

    /// Reads the records of file `number` from offset `start`, passing those at or after
    /// `walk.from` to `f`. Returns where the records end cleanly (end of file or zeros), or the
    /// damage where they stop, judged by [`Reader::judge`]. Salvage records every damage with a
    /// record that verifies after it in `walk.out.damaged` and goes on from that record, so it
    /// only returns damage that nothing valid follows.
    fn scan(
        &mut self,
        number: u32,
        start: u64,
        walk: &mut Walk<'_>,
        f: &mut impl FnMut(Lsn, &[u8]) -> Result<()>,
    ) -> Result<FileEnd> {
        let mut off = start;
        loop {
            let lsn = Lsn {
                file: number,
                offset: off as u32,
            };
            let why = match self.record_at(off)? {
                Step::End => return Ok(FileEnd::Clean(lsn.offset)),
                Step::Record { header, extent } => {
                    match self.deliver(&header, lsn, extent, walk, f)? {
                        Ok(()) => {
                            off += extent;
                            walk.out.end = Lsn {
                                file: number,
                                offset: off as u32,
                            };
                            continue;
                        }
                        Err(why) => why,
                    }
                }
                Step::Bad(why) => why,
            };
            let damage = Damage {
                kind: DamageKind::Record,
                file: self.path.clone(),
                offset: off,
                why,
                next_valid: self.next_valid(number, off + ALIGN)?,
            };
            match (damage.next_valid, walk.mode) {
                (Some(next), ReplayMode::Salvage) => {
                    off = next.offset as u64;
                    walk.out.damaged.push(damage);
                }
                _ => return self.judge(number, damage),
            }
        }
    }

    /// Strict replay's verdict on a bad record with `damage.next_valid` after it, if any (module
    /// doc, "Torn or synced"). Nothing valid after it: the torn tail. Otherwise it is
    /// corruption when a record written after it was synced verifies ([`Reader::synced_proof`])
    /// or when no crash could have left it ([`Reader::tear_shaped`]); else the records that
    /// verify after it are the rest of the unsynced flush a crash tore, and it is the torn tail.
    fn judge(&mut self, number: u32, mut damage: Damage) -> Result<FileEnd> {
        let Some(next) = damage.next_valid else {
            return Ok(FileEnd::Torn(damage));
        };
        let at = damage.offset;
        if let Some(proof) = self.synced_proof(number, next.offset as u64)? {
            damage.why = format!(
                "{}; the record at offset {proof} was written after a sync of everything \
                 before it, so the damaged record was synced",
                damage.why
            );
            return Ok(FileEnd::Corrupt(damage));
        }
        if let Err(not_a_tear) = self.tear_shaped(at, next.offset as u64)? {
            damage.why = format!("{}; {not_a_tear}", damage.why);
            return Ok(FileEnd::Corrupt(damage));
        }
        damage.why = format!(
            "{}; the records that verify after it, from offset {}, are the rest of the \
             unsynced flush the crash tore",
            damage.why, next.offset
        );
        Ok(FileEnd::Torn(damage))
    }

    /// The offset of the first record at or after `from` (where a record that verifies
    /// starts) that verifies and carries [`format::REC_FLUSH_START`]: proof that everything
    /// before it in the file was synced. Walks record to record, and over damage to the next
    /// record that verifies.
    fn synced_proof(&mut self, number: u32, from: u64) -> Result<Option<u64>> {
        let mut off = from;
        loop {
            match self.record_at(off)? {
                Step::Record { header, .. } if header.flush_start => return Ok(Some(off)),
                Step::Record { extent, .. } => off += extent,
                Step::End | Step::Bad(_) => match self.next_valid(number, off + ALIGN)? {
                    Some(next) => off = next.offset as u64,
                    None => return Ok(None),
                },
            }
        }
    }

    /// Whether the bad record at `at` could be a crash's tear of an unsynced write, given that
    /// the first record that verifies after it starts at `next`. A device writes a 512-byte
    /// sector whole or not at all, and a sector it lost reads as what it held before: zeros,
    /// since a journal file is preallocated (or extended) and no byte of it is written twice.
    /// So a torn record has its header as written (the header's sector arrived, or the header
    /// would read as zeros: the clean end), no other record inside its extent, and a sector
    /// whose part of the record reads as zeros or lies past the end of the file. The error
    /// says which of these fails.
    fn tear_shaped(&mut self, at: u64, next: u64) -> Result<std::result::Result<(), String>> {
        let header: [u8; RECORD_HEADER_SIZE] = match at + RECORD_HEADER_SIZE as u64 {
            end if end <= self.len => self.read(at, RECORD_HEADER_SIZE)?.try_into().unwrap(),
            _ => return Ok(Ok(())),
        };
        let h = match check_record_header(&header) {
            HeaderCheck::Record(h) => h,
            HeaderCheck::Zero => return Ok(Ok(())),
            HeaderCheck::Bad(why) => {
                return Ok(Err(format!(
                    "its header is damaged ({why}), which a tear never does"
                )))
            }
        };
        let end = at + h.len as u64;
        if next < at + padded_len(h.len as u64) {
            return Ok(Err(format!(
                "its length word ({}) covers the record that verifies at offset {next}, so it is \
                 damaged, which a tear never does",
                h.len
            )));
        }
        if end > self.len {
            return Ok(Ok(()));
        }
        let mut sector = at / TEAR_SECTOR * TEAR_SECTOR;
        while sector < end {
            let part = sector.max(at)..(sector + TEAR_SECTOR).min(end);
            if self
                .read(part.start, (part.end - part.start) as usize)?
                .iter()
                .all(|&b| b == 0)
            {
                return Ok(Ok(()));
            }
            sector += TEAR_SECTOR;
        }
        Ok(Err(
            "every 512-byte sector of it holds data, so no sector was lost to a crash".into(),
        ))
    }

    /// Passes a verified record at `lsn` to `f` if it is at or after `walk.from` and carries
    /// data; the error says why its payload is unusable.
    fn deliver(
        &mut self,
        header: &format::RecordHeader,
        lsn: Lsn,
        extent: u64,
        walk: &mut Walk<'_>,
        f: &mut impl FnMut(Lsn, &[u8]) -> Result<()>,
    ) -> Result<std::result::Result<(), String>> {
        if lsn < walk.from || header.flags == format::REC_FILLER {
            return Ok(Ok(()));
        }
        let bytes = self.read(lsn.offset as u64, extent as usize)?;
        let payload = match format::record_payload(header, bytes) {
            Ok(p) => p,
            Err(why) => return Ok(Err(why)),
        };
        f(lsn, &payload)?;
        walk.out.records += 1;
        Ok(Ok(()))
    }

    /// What is at `off`, a 128-byte boundary: the clean end of the records, a record whose
    /// header is plausible and whose checksum verifies (with its padded length), or why not.
    fn record_at(&mut self, off: u64) -> Result<Step> {
        if off + RECORD_HEADER_SIZE as u64 > self.len {
            // Files end on a 128-byte boundary (preallocated ones too), so a few bytes past
            // the last boundary are part of a record cut short, unless they were never
            // written.
            let rest = (self.len - off) as usize;
            if self.read(off, rest)?.iter().all(|&b| b == 0) {
                return Ok(Step::End);
            }
            return Ok(Step::Bad(
                "record header cut short by the end of the file".into(),
            ));
        }
        let header: [u8; RECORD_HEADER_SIZE] =
            self.read(off, RECORD_HEADER_SIZE)?.try_into().unwrap();
        let h = match check_record_header(&header) {
            HeaderCheck::Zero => return Ok(Step::End),
            HeaderCheck::Bad(why) => return Ok(Step::Bad(why)),
            HeaderCheck::Record(h) => h,
        };
        let extent = padded_len(h.len as u64);
        if off + extent > self.len {
            return Ok(Step::Bad(format!(
                "record of {extent} bytes runs past the end of the file ({} bytes)",
                self.len
            )));
        }
        let bytes = self.read(off, extent as usize)?;
        if let Err(why) = format::verify_record(&h, bytes) {
            return Ok(Step::Bad(why));
        }
        Ok(Step::Record { header: h, extent })
    }

    /// The first record at or after `from` (a 128-byte boundary) in file `number` whose
    /// header is plausible and whose checksum verifies. Every boundary is tried, not only
    /// where a damaged record's length word points, so a damaged length cannot hide the
    /// records after it.
    fn next_valid(&mut self, number: u32, from: u64) -> Result<Option<Lsn>> {
        debug_assert!(from.is_multiple_of(ALIGN));
        let mut off = from;
        while off + RECORD_HEADER_SIZE as u64 <= self.len {
            if let Step::Record { .. } = self.record_at(off)? {
                return Ok(Some(Lsn {
                    file: number,
                    offset: off as u32,
                }));
            }
            off += ALIGN;
        }
        Ok(None)
    }
}

/// The smallest unit a device writes whole: a crash loses whole sectors of an unsynced write.
/// Larger sectors (4 KiB) are whole runs of these.
const TEAR_SECTOR: u64 = 512;

/// How a file's records end.
enum FileEnd {
    /// Cleanly, just before this offset: the end of the file or zeros never written.
    Clean(u32),
    /// At damage a crash can leave: the bad record is the last thing in the file, or the
    /// records that verify after it are of the same unsynced flush.
    Torn(Damage),
    /// At damage to synced records, or damage no crash leaves, with a record that verifies
    /// after it (`next_valid`).
    Corrupt(Damage),
}

/// What [`Reader::record_at`] found.
enum Step {
    /// The clean end of a file's records: its end, or zeros never written.
    End,
    /// A whole record that verifies, `extent` bytes long with its padding.
    Record {
        header: format::RecordHeader,
        extent: u64,
    },
    /// Why the bytes there are not a record.
    Bad(String),
}
