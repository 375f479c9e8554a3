//! Reading a journal file back: its records up to where they stop, and whether that stop is a
//! crash's torn tail or corruption — the copy-on-write journal's rule (docs/journal.md, "Torn
//! tail or corruption"), applied to this journal's format (`journal`).
//!
//! A record that does not verify is the **torn tail** of the last group commit when nothing
//! that verifies follows it: nothing in it was acknowledged, and the log ends before it. When
//! records that verify follow it, it may still be a tear: a commit is one write and one
//! `fdatasync`, and a crash during it can lose any 512-byte sector of the write and keep those
//! after it, so the records after the hole are the rest of the same unsynced commit. It is
//! **corruption** (acknowledged writes may follow it: open refuses) when
//!
//! - a record that verifies and is marked *flush start* follows it: the committer marks the
//!   first record of every commit, which it writes only after everything before it in the file
//!   was synced ([`crate::journal::Journal::commit`]), so the bad record was synced; or
//! - no crash could have left it. A device writes a sector whole or not at all, and a sector
//!   it lost reads as what it held before: zeros, since a journal file is only ever appended
//!   to (a commit retried after a full disk writes the same bytes again). So a torn record has
//!   its length word as written (or reading as zeros), its length does not cover the next
//!   record that verifies, and a 512-byte sector's part of it reads as zeros or lies past the
//!   end of the file. A length word over the next record, or data in every sector, is
//!   corruption.
//!
//! Records are not aligned here (the copy-on-write journal pads them to 128 bytes), so the
//! record after a bad one is looked for at every byte after it rather than where its length
//! word points: a damaged length cannot hide the records after it. A candidate must have a
//! plausible length, a batch number above the last good record's, a checksum that verifies
//! over its whole body, and a body that decodes exactly.
//!
//! What the rule cannot catch (as the copy-on-write journal's cannot): damage to a record of
//! the last commit, with no later commit after it, where a sector's part of the record reads
//! as zeros anyway. Page images hold runs of zeros, so this window is wider here than there.

use crate::journal::FLUSH_START;
use crate::pool::JournalEntry;

/// A record header: `len u32 | crc32c u32`.
const HEADER: usize = 8;
/// The body's fixed part: `seq u64 | n u32`.
const BODY_FIXED: usize = 12;
/// A body entry's fixed part: `file u32 | offset u64 | len u32`.
const ENTRY_FIXED: usize = 16;
/// The smallest unit a device writes whole: a crash loses whole sectors of an unsynced write.
const TEAR_SECTOR: usize = 512;

/// One batch's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    /// The first record of a group commit (the committer's mark).
    pub flush_start: bool,
    pub entries: Vec<JournalEntry>,
}

/// Where a journal file's records stop, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Break {
    /// Where the record that does not verify starts.
    pub offset: u64,
    pub why: String,
    /// The first record after it that verifies, if any.
    pub next_valid: Option<u64>,
}

/// How a journal file's records end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// At the end of the file, right after a whole record.
    Clean,
    /// At a crash's torn tail: the log ends there (nothing past it is replayed).
    Torn(Break),
    /// At damage to synced records, or damage no crash leaves, with records that verify after
    /// it: acknowledged writes may be among them.
    Corrupt(Break),
}

/// A journal file's records, in order, up to where they end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecords {
    pub records: Vec<Record>,
    pub end: End,
}

/// A record that verifies, without its entries decoded.
struct Frame {
    seq: u64,
    flush_start: bool,
    /// Its body: `bytes[body.0..body.1]`.
    body: (usize, usize),
}

/// Reads a journal file's bytes: every record up to the first that does not verify, and how
/// they end there (module doc).
pub fn read_file(bytes: &[u8]) -> FileRecords {
    let mut records = Vec::new();
    let mut at = 0;
    let mut last_seq = 0;
    while at < bytes.len() {
        match frame_at(bytes, at, last_seq) {
            Ok(f) => {
                last_seq = f.seq;
                records.push(Record {
                    seq: f.seq,
                    flush_start: f.flush_start,
                    entries: entries(&bytes[f.body.0..f.body.1])
                        .expect("a frame's body decodes (frame_at checked it)"),
                });
                at = f.body.1;
            }
            Err(why) => {
                let damage = Break {
                    offset: at as u64,
                    why,
                    next_valid: next_valid(bytes, at + 1, last_seq).map(|n| n as u64),
                };
                return FileRecords {
                    records,
                    end: judge(bytes, damage, last_seq),
                };
            }
        }
    }
    FileRecords {
        records,
        end: End::Clean,
    }
}

/// The verdict on a record that does not verify (module doc): nothing after it that verifies,
/// the torn tail; a flush start after it, or a shape no tear has, corruption; otherwise the
/// torn tail with the rest of its commit after it.
fn judge(bytes: &[u8], mut damage: Break, last_seq: u64) -> End {
    let Some(next) = damage.next_valid else {
        return End::Torn(damage);
    };
    let next = next as usize;
    if let Some(proof) = synced_proof(bytes, next, last_seq) {
        damage.why = format!(
            "{}; the record at offset {proof} begins a commit written after a sync of \
             everything before it, so the damaged record was synced",
            damage.why
        );
        return End::Corrupt(damage);
    }
    if let Err(not_a_tear) = tear_shaped(bytes, damage.offset as usize, next) {
        damage.why = format!("{}; {not_a_tear}", damage.why);
        return End::Corrupt(damage);
    }
    damage.why = format!(
        "{}; the records that verify after it, from offset {next}, are the rest of the \
         unsynced commit the crash tore",
        damage.why
    );
    End::Torn(damage)
}

/// The offset of the first record at or after `from` (where a record that verifies starts)
/// that verifies and is marked flush start, walking record to record and over damage.
fn synced_proof(bytes: &[u8], from: usize, mut last_seq: u64) -> Option<usize> {
    let mut at = from;
    loop {
        match frame_at(bytes, at, last_seq) {
            Ok(f) if f.flush_start => return Some(at),
            Ok(f) => {
                last_seq = f.seq;
                at = f.body.1;
            }
            Err(_) => at = next_valid(bytes, at + 1, last_seq)?,
        }
    }
}

/// Whether the record that does not verify at `at` could be a crash's tear of an unsynced
/// write, the first record that verifies after it starting at `next`; the error says which
/// sign of damage it has.
fn tear_shaped(bytes: &[u8], at: usize, next: usize) -> Result<(), String> {
    let Some(word) = bytes.get(at..at + 4) else {
        return Ok(());
    };
    let len = u32::from_le_bytes(word.try_into().expect("4 bytes")) as usize;
    let end = at + HEADER + len;
    if len < BODY_FIXED || end > next {
        // Not the length written: only a lost sector reads other than what was written.
        if lost_sector(bytes, at, at + 4) {
            return Ok(());
        }
        let wrong = if len < BODY_FIXED {
            "is impossible".to_string()
        } else {
            format!("covers the record that verifies at offset {next}")
        };
        return Err(format!(
            "its length word ({len}) {wrong}, so it is damaged, which a tear never does"
        ));
    }
    if lost_sector(bytes, at, end) {
        return Ok(());
    }
    Err("every 512-byte sector of it holds data, so no sector was lost to a crash".into())
}

/// Whether some 512-byte sector's part of `bytes[from..to]` reads as zeros or lies past the
/// end of the file: what a sector a crash lost leaves.
fn lost_sector(bytes: &[u8], from: usize, to: usize) -> bool {
    if to > bytes.len() {
        return true;
    }
    let mut sector = from / TEAR_SECTOR * TEAR_SECTOR;
    while sector < to {
        let part = sector.max(from)..(sector + TEAR_SECTOR).min(to);
        if bytes[part].iter().all(|&b| b == 0) {
            return true;
        }
        sector += TEAR_SECTOR;
    }
    false
}

/// The first offset at or after `from` where a record that verifies starts, its batch after
/// `last_seq`.
fn next_valid(bytes: &[u8], from: usize, last_seq: u64) -> Option<usize> {
    (from..bytes.len().saturating_sub(HEADER + BODY_FIXED - 1))
        .find(|&at| plausible(bytes, at, last_seq) && frame_at(bytes, at, last_seq).is_ok())
}

/// A cheap first look at a candidate record (before its checksum): a length that fits, a
/// batch after `last_seq`, an entry count its length can hold.
fn plausible(bytes: &[u8], at: usize, last_seq: u64) -> bool {
    let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let len = word(at) as usize;
    if len < BODY_FIXED || at + HEADER + len > bytes.len() {
        return false;
    }
    let seq = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8 bytes"));
    let n = word(at + 16) as usize;
    (seq & !FLUSH_START) > last_seq && n <= (len - BODY_FIXED) / ENTRY_FIXED
}

/// The record at `at`, if it verifies: a length that fits, its checksum, a body that decodes
/// exactly and a batch number after `last_seq`; else why not.
fn frame_at(bytes: &[u8], at: usize, last_seq: u64) -> Result<Frame, String> {
    let Some(header) = bytes.get(at..at + HEADER) else {
        return Err(format!(
            "record header cut short by the end of the file ({} of {HEADER} bytes)",
            bytes.len() - at
        ));
    };
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    if header.iter().all(|&b| b == 0) {
        return Err("zeros where a record should start".into());
    }
    if len < BODY_FIXED {
        return Err(format!("impossible record length {len}"));
    }
    let Some(body) = bytes.get(at + HEADER..at + HEADER + len) else {
        return Err(format!(
            "a record of {len} bytes runs past the end of the file ({} bytes)",
            bytes.len()
        ));
    };
    if crc32c::crc32c(body) != crc {
        return Err("record checksum mismatch (torn or corrupt write)".into());
    }
    if !decodes_exactly(body) {
        return Err("the record's checksum verifies but its body does not decode".into());
    }
    let stored = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    let seq = stored & !FLUSH_START;
    if seq <= last_seq {
        return Err(format!(
            "batch {seq} after batch {last_seq}: records out of order"
        ));
    }
    Ok(Frame {
        seq,
        flush_start: (stored & FLUSH_START) != 0,
        body: (at + HEADER, at + HEADER + len),
    })
}

/// Whether a body's entries account for every byte of it (without copying them).
fn decodes_exactly(body: &[u8]) -> bool {
    let Some(n) = body.get(8..BODY_FIXED) else {
        return false;
    };
    let n = u32::from_le_bytes(n.try_into().expect("4 bytes"));
    let mut at = BODY_FIXED;
    for _ in 0..n {
        let Some(h) = body.get(at..at + ENTRY_FIXED) else {
            return false;
        };
        at += ENTRY_FIXED + u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")) as usize;
    }
    at == body.len()
}

/// A body's entries, if it decodes exactly (every byte of it belongs to an entry).
fn entries(body: &[u8]) -> Option<Vec<JournalEntry>> {
    let n = u32::from_le_bytes(body.get(8..BODY_FIXED)?.try_into().ok()?);
    let mut at = BODY_FIXED;
    let mut out = Vec::new();
    for _ in 0..n {
        let h = body.get(at..at + ENTRY_FIXED)?;
        let file = u32::from_le_bytes(h[..4].try_into().ok()?);
        let offset = u64::from_le_bytes(h[4..12].try_into().ok()?);
        let len = u32::from_le_bytes(h[12..16].try_into().ok()?) as usize;
        let bytes = body.get(at + ENTRY_FIXED..at + ENTRY_FIXED + len)?.to_vec();
        out.push(JournalEntry {
            file,
            offset,
            bytes,
        });
        at += ENTRY_FIXED + len;
    }
    (at == body.len()).then_some(out)
}

#[cfg(test)]
mod tests;
