//! Reading the journal back: every whole record from a start LSN, in LSN order, up to the end of
//! the log (the first torn, truncated, zero or corrupt record that no later session stepped over).

use super::format::{
    self, check_record_header, file_name, padded_len, FileHeader, HeaderCheck, FILE_HEADER_SIZE,
    RECORD_HEADER_SIZE,
};
use super::lsn::Lsn;
use crate::error::{IoContext, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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
    /// for the log, not an error.
    pub torn_tail: Option<String>,
    /// Torn tails of earlier sessions that replay stepped over. Every `Journal::open` starts a
    /// new file, flagged as a session start; the session that wrote it had recovered from the
    /// same log, which ended at that tear, so its records follow on from the records before the
    /// tear and must be replayed too.
    pub skipped_tails: Vec<String>,
}

/// Reads every whole record with lsn >= `from` (in LSN order) in the journal files in `dir`,
/// calling `f(lsn, payload)` with the uncompressed payload.
///
/// The log ends at the first torn, truncated, zero or corrupt record. Replay then goes on into
/// the next file only when that file was started by a new session (see
/// [`ReplayOutcome::skipped_tails`]); a file started by a switch inside the same session
/// is not read, because that session wrote and synced the whole previous file before starting
/// it, so a hole there means lost records, not a crash tail.
///
/// A missing directory or no files gives zero records. An error from `f` aborts and is
/// returned; I/O errors are errors.
pub fn replay(
    dir: &Path,
    from: Lsn,
    mut f: impl FnMut(Lsn, &[u8]) -> Result<()>,
) -> Result<ReplayOutcome> {
    let numbers: Vec<u32> = list_files(dir)?
        .into_iter()
        .filter(|&n| n >= from.file)
        .collect();
    let mut out = ReplayOutcome::default();
    // The first break in the log not yet known to be a crash tail that a later session stepped
    // over.
    let mut pending: Option<String> = None;
    // The previous file read: its number and, if its records ended cleanly, where.
    let mut prev: Option<(u32, Option<u32>)> = None;
    for (i, &n) in numbers.iter().enumerate() {
        let path = dir.join(file_name(n));
        if let Some((pn, _)) = prev {
            if n != pn + 1 && pending.is_none() {
                pending = Some(format!(
                    "journal file {} is missing",
                    dir.join(file_name(pn + 1)).display()
                ));
            }
        }
        let mut reader = Reader::open(&path)?;
        let header = match reader.header(n)? {
            Ok(h) => h,
            Err(why) => {
                pending.get_or_insert(format!("{}: {why}", path.display()));
                prev = Some((n, None));
                continue;
            }
        };
        if let Some((pn, prev_end)) = prev {
            if header.session_start {
                out.skipped_tails.extend(pending.take());
            } else {
                if let (None, Some(end)) = (&pending, prev_end) {
                    let end = Lsn {
                        file: pn,
                        offset: end,
                    };
                    if header.prev_end != end {
                        pending = Some(format!(
                            "{}: the previous file should end at {} but its records end at {end}; \
                             records are missing",
                            path.display(),
                            header.prev_end
                        ));
                    }
                }
                if let Some(why) = pending.take() {
                    let unread = numbers.len() - i;
                    out.torn_tail = Some(format!("{why}; {unread} later journal file(s) not read"));
                    return Ok(out);
                }
            }
        }
        out.end = Lsn {
            file: n,
            offset: FILE_HEADER_SIZE,
        };
        let end = reader.scan(n, from, &mut out, &mut f)?;
        if let Err(why) = &end {
            pending.get_or_insert_with(|| why.clone());
        }
        prev = Some((n, end.ok()));
    }
    out.torn_tail = pending;
    Ok(out)
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

    /// Reads the records of file `number`, passing those at or after `from` to `f`. Returns
    /// where the records end cleanly (end of file or zeros), or where and why they stop at a torn
    /// or corrupt record.
    fn scan(
        &mut self,
        number: u32,
        from: Lsn,
        out: &mut ReplayOutcome,
        f: &mut impl FnMut(Lsn, &[u8]) -> Result<()>,
    ) -> Result<std::result::Result<u32, String>> {
        let mut off = FILE_HEADER_SIZE as u64;
        let path = self.path.display().to_string();
        let torn = |off: u64, why: &str| Err(format!("{path} at offset {off}: {why}"));
        loop {
            let lsn = Lsn {
                file: number,
                offset: off as u32,
            };
            if off + RECORD_HEADER_SIZE as u64 > self.len {
                // Files end on a 128-byte boundary (preallocated ones too), so a few bytes past
                // the last boundary are part of a record cut short, unless they were never
                // written.
                let rest = (self.len - off) as usize;
                if self.read(off, rest)?.iter().all(|&b| b == 0) {
                    return Ok(Ok(lsn.offset));
                }
                return Ok(torn(off, "record header cut short by the end of the file"));
            }
            let header: [u8; RECORD_HEADER_SIZE] =
                self.read(off, RECORD_HEADER_SIZE)?.try_into().unwrap();
            let h = match check_record_header(&header) {
                HeaderCheck::Zero => return Ok(Ok(lsn.offset)),
                HeaderCheck::Bad(why) => return Ok(torn(off, &why)),
                HeaderCheck::Record(h) => h,
            };
            let extent = padded_len(h.len as u64);
            if off + extent > self.len {
                return Ok(torn(
                    off,
                    &format!(
                        "record of {extent} bytes runs past the end of the file ({} bytes)",
                        self.len
                    ),
                ));
            }
            let bytes = self.read(off, extent as usize)?;
            if let Err(why) = format::verify_record(&h, bytes) {
                return Ok(torn(off, &why));
            }
            if lsn >= from && h.flags != format::REC_FILLER {
                let payload = match format::record_payload(&h, bytes) {
                    Ok(p) => p,
                    Err(why) => return Ok(torn(off, &why)),
                };
                f(lsn, &payload)?;
                out.records += 1;
            }
            off += extent;
            out.end = Lsn {
                file: number,
                offset: off as u32,
            };
        }
    }
}
