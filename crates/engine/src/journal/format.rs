//! The bytes of a journal file: the 128-byte file header and the framing of one record.
//! Both the writer and replay use these functions, so the layout lives in one place
//! (and in `docs/journal.md`).

use super::lsn::Lsn;
use crate::config::JournalCompressor;
use std::borrow::Cow;
use std::cell::RefCell;

/// Size of the file header; the first record starts right after it.
pub const FILE_HEADER_SIZE: u32 = 128;
/// Size of a record header.
pub const RECORD_HEADER_SIZE: usize = 16;
/// Records start and end on multiples of this (WiredTiger's `WT_LOG_ALIGN`).
pub const ALIGN: u64 = 128;
/// The largest payload `append` accepts, before compression.
pub const MAX_PAYLOAD: usize = 1 << 30;
/// Payloads shorter than this are stored as they are: compressing them saves less than the
/// padding to 128 bytes would give back.
pub const MIN_COMPRESS: usize = 128;

const MAGIC: [u8; 8] = *b"FDOCLOG\0";
/// Version 2 added [`REC_FLUSH_START`]. Version 1 files (no record carries it) are still read.
const VERSION: u32 = 2;
const OLDEST_VERSION: u32 = 1;
const HEADER_CRC_AT: usize = 124;
/// File header flag: the file was started by `Journal::open`, so whatever follows the last whole
/// record of the previous file is a crash tail that this session's recovery already discarded.
const FILE_SESSION_START: u32 = 1;

/// Record flags: at most one of snappy, zstd and filler is set ([`RecordHeader::flags`]), and
/// [`REC_FLUSH_START`] may be set with any of them.
pub const REC_SNAPPY: u16 = 1;
pub const REC_ZSTD: u16 = 2;
/// A filler record: zeros that carry the records to the next direct-I/O block boundary when a
/// flush ends inside a block (direct I/O writes whole blocks, and durable blocks are never
/// rewritten). Replay verifies and skips it.
pub const REC_FILLER: u16 = 4;
/// The first record a flush wrote to its file, set by the flusher as it writes it: every byte of
/// the file before this record was synced before this record was written. Replay uses it to
/// tell a crash's torn flush from damage to synced records (`replay.rs`, "Torn or synced").
pub const REC_FLUSH_START: u16 = 8;

/// The zstd level used for records: fast, and what the brief and MongoDB's zstd option use.
const ZSTD_LEVEL: i32 = 3;

const FILE_PREFIX: &str = "FlashdocLog.";

pub fn file_name(number: u32) -> String {
    format!("{FILE_PREFIX}{number:010}")
}

/// The file number of a journal file name, or None for any other name (temporary files,
/// editor backups and the like are ignored rather than misread).
pub fn parse_file_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(FILE_PREFIX)?;
    if digits.len() != 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n >= 1)
}

pub fn padded_len(len: u64) -> u64 {
    len.div_ceil(ALIGN) * ALIGN
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    pub number: u32,
    /// The configured maximum file size when the file was created (a file holding one oversized
    /// record is larger).
    pub file_max: u64,
    pub session_start: bool,
    /// Where the previous file's records end, for a file started by a switch inside one session
    /// (`Lsn::default()` for a session start). Replay checks it to detect lost records.
    pub prev_end: Lsn,
}

impl FileHeader {
    pub fn encode(&self) -> [u8; FILE_HEADER_SIZE as usize] {
        let mut b = [0u8; FILE_HEADER_SIZE as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.number.to_le_bytes());
        b[16..24].copy_from_slice(&self.file_max.to_le_bytes());
        let flags = if self.session_start {
            FILE_SESSION_START
        } else {
            0
        };
        b[24..28].copy_from_slice(&flags.to_le_bytes());
        b[28..32].copy_from_slice(&self.prev_end.file.to_le_bytes());
        b[32..36].copy_from_slice(&self.prev_end.offset.to_le_bytes());
        let crc = crc32c::crc32c(&b[..HEADER_CRC_AT]);
        b[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header; the error says what is wrong with it.
    pub fn decode(b: &[u8]) -> std::result::Result<FileHeader, String> {
        if b.len() < FILE_HEADER_SIZE as usize {
            return Err(format!(
                "file header is cut short ({} of 128 bytes)",
                b.len()
            ));
        }
        if b[..FILE_HEADER_SIZE as usize].iter().all(|&x| x == 0) {
            return Err("file header is all zeros (the file was being created)".into());
        }
        if b[0..8] != MAGIC {
            return Err("bad magic: not a flashdoc journal file".into());
        }
        let stored = u32_at(b, HEADER_CRC_AT);
        if crc32c::crc32c(&b[..HEADER_CRC_AT]) != stored {
            return Err("file header checksum mismatch".into());
        }
        let version = u32_at(b, 8);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(format!(
                "unsupported journal version {version} (this build reads {OLDEST_VERSION} to \
                 {VERSION})"
            ));
        }
        let flags = u32_at(b, 24);
        if flags & !FILE_SESSION_START != 0 {
            return Err(format!("unknown file header flags {flags:#x}"));
        }
        Ok(FileHeader {
            number: u32_at(b, 12),
            file_max: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            session_start: flags & FILE_SESSION_START != 0,
            prev_end: Lsn {
                file: u32_at(b, 28),
                offset: u32_at(b, 32),
            },
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

/// One record, framed and checksummed, ready to be copied into the group-commit buffer. Built
/// before the append mutex is taken so that compression and checksumming run in parallel.
pub struct EncodedRecord<'a> {
    header: [u8; RECORD_HEADER_SIZE],
    stored: Cow<'a, [u8]>,
    pad: usize,
}

impl<'a> EncodedRecord<'a> {
    pub fn encode(payload: &'a [u8], compressor: JournalCompressor) -> EncodedRecord<'a> {
        let (stored, flags) = match compress(payload, compressor) {
            Some((bytes, flag)) => (Cow::Owned(bytes), flag),
            None => (Cow::Borrowed(payload), 0),
        };
        let len = (RECORD_HEADER_SIZE + stored.len()) as u32;
        let pad = (padded_len(len as u64) - len as u64) as usize;
        let mut header = [0u8; RECORD_HEADER_SIZE];
        header[0..4].copy_from_slice(&len.to_le_bytes());
        header[8..10].copy_from_slice(&flags.to_le_bytes());
        header[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = record_crc(&header, &stored, pad);
        header[4..8].copy_from_slice(&crc.to_le_bytes());
        EncodedRecord {
            header,
            stored,
            pad,
        }
    }

    /// Bytes the record takes on disk, padding included.
    pub fn disk_len(&self) -> u64 {
        (RECORD_HEADER_SIZE + self.stored.len() + self.pad) as u64
    }

    pub fn write_to(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.header);
        buf.extend_from_slice(&self.stored);
        buf.resize(buf.len() + self.pad, 0);
    }
}

/// Appends a filler record of exactly `extent` bytes (a multiple of [`ALIGN`]).
pub fn write_filler(buf: &mut Vec<u8>, extent: usize) {
    assert!(extent >= ALIGN as usize && (extent as u64).is_multiple_of(ALIGN));
    let mut header = [0u8; RECORD_HEADER_SIZE];
    header[0..4].copy_from_slice(&(extent as u32).to_le_bytes());
    header[8..10].copy_from_slice(&REC_FILLER.to_le_bytes());
    let zeros = vec![0u8; extent - RECORD_HEADER_SIZE];
    let crc = record_crc(&header, &zeros, 0);
    header[4..8].copy_from_slice(&crc.to_le_bytes());
    buf.extend_from_slice(&header);
    buf.extend_from_slice(&zeros);
}

/// The checksum covers the header (with the checksum field as zero), the stored payload and the
/// padding: the whole extent the record occupies, so a torn write anywhere in it is caught.
fn record_crc(header: &[u8; RECORD_HEADER_SIZE], stored: &[u8], pad: usize) -> u32 {
    let mut h = *header;
    h[4..8].fill(0);
    let mut crc = crc32c::crc32c(&h);
    crc = crc32c::crc32c_append(crc, stored);
    const ZEROS: [u8; ALIGN as usize] = [0; ALIGN as usize];
    crc32c::crc32c_append(crc, &ZEROS[..pad])
}

thread_local! {
    // A zstd context costs hundreds of KB to set up; keep one per appending thread.
    static ZSTD: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// The compressed payload and its flag, or None when it should be stored as it is.
fn compress(payload: &[u8], compressor: JournalCompressor) -> Option<(Vec<u8>, u16)> {
    if payload.len() < MIN_COMPRESS {
        return None;
    }
    let (bytes, flag) = match compressor {
        JournalCompressor::None => return None,
        JournalCompressor::Snappy => (
            snap::raw::Encoder::new().compress_vec(payload).ok()?,
            REC_SNAPPY,
        ),
        JournalCompressor::Zstd => {
            let bytes = ZSTD.with(|cell| {
                let mut cell = cell.borrow_mut();
                if cell.is_none() {
                    *cell = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
                }
                cell.as_mut()?.compress(payload).ok()
            })?;
            (bytes, REC_ZSTD)
        }
    };
    // Only a smaller padded record is worth the decompression on replay.
    let stored_disk = padded_len((RECORD_HEADER_SIZE + bytes.len()) as u64);
    let plain_disk = padded_len((RECORD_HEADER_SIZE + payload.len()) as u64);
    (stored_disk < plain_disk).then_some((bytes, flag))
}

/// What a record header says, once checked for plausibility (the checksum is checked separately,
/// when the whole record has been read).
#[derive(Clone, Copy, Debug)]
pub struct RecordHeader {
    /// Header plus stored payload, unpadded.
    pub len: u32,
    pub crc: u32,
    /// How the payload is stored: 0, [`REC_SNAPPY`], [`REC_ZSTD`] or [`REC_FILLER`].
    pub flags: u16,
    pub uncompressed_len: u32,
    /// [`REC_FLUSH_START`] is set: every byte before this record was synced before it was written.
    pub flush_start: bool,
}

pub enum HeaderCheck {
    Record(RecordHeader),
    /// Sixteen zero bytes: the preallocated, never written part of a file.
    Zero,
    Bad(String),
}

pub fn check_record_header(b: &[u8; RECORD_HEADER_SIZE]) -> HeaderCheck {
    if b.iter().all(|&x| x == 0) {
        return HeaderCheck::Zero;
    }
    let flags = u16_at(b, 8);
    let h = RecordHeader {
        len: u32_at(b, 0),
        crc: u32_at(b, 4),
        flags: flags & !REC_FLUSH_START,
        uncompressed_len: u32_at(b, 12),
        flush_start: flags & REC_FLUSH_START != 0,
    };
    let stored = (h.len as usize).wrapping_sub(RECORD_HEADER_SIZE);
    if (h.len as usize) < RECORD_HEADER_SIZE || stored > MAX_PAYLOAD {
        return HeaderCheck::Bad(format!("impossible record length {}", h.len));
    }
    if !matches!(h.flags, 0 | REC_SNAPPY | REC_ZSTD | REC_FILLER) {
        return HeaderCheck::Bad(format!("bad record flags {flags:#x}"));
    }
    if h.flags == REC_FILLER && h.uncompressed_len != 0 {
        return HeaderCheck::Bad("a filler record with a payload length".into());
    }
    if u16_at(b, 10) != 0 {
        return HeaderCheck::Bad("nonzero reserved bytes in record header".into());
    }
    let ulen = h.uncompressed_len as usize;
    if ulen > MAX_PAYLOAD || (h.flags == 0 && ulen != stored) {
        return HeaderCheck::Bad(format!(
            "impossible uncompressed length {ulen} for {stored} stored bytes"
        ));
    }
    HeaderCheck::Record(h)
}

/// Sets [`REC_FLUSH_START`] on the record that starts `bytes` (a chunk about to be written) and
/// checksums it again. The flusher calls it with the first record of each write that follows a
/// sync of its file, so the flag is true of every record that carries it.
pub fn mark_flush_start(bytes: &mut [u8]) {
    let len = u32_at(bytes, 0) as usize;
    assert!(
        len >= RECORD_HEADER_SIZE && padded_len(len as u64) as usize <= bytes.len(),
        "a chunk starts with a whole record"
    );
    let flags = u16_at(bytes, 8) | REC_FLUSH_START;
    bytes[8..10].copy_from_slice(&flags.to_le_bytes());
    let extent = padded_len(len as u64) as usize;
    let header: [u8; RECORD_HEADER_SIZE] = bytes[..RECORD_HEADER_SIZE].try_into().unwrap();
    let pad = extent - len;
    let crc = record_crc(&header, &bytes[RECORD_HEADER_SIZE..len], pad);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Checks the checksum of a whole record extent (`bytes` = header, stored payload, padding).
pub fn verify_record(h: &RecordHeader, bytes: &[u8]) -> std::result::Result<(), String> {
    let mut header: [u8; RECORD_HEADER_SIZE] = bytes[..RECORD_HEADER_SIZE].try_into().unwrap();
    header[4..8].fill(0);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header), &bytes[RECORD_HEADER_SIZE..]);
    if crc != h.crc {
        return Err("record checksum mismatch (torn or corrupt write)".into());
    }
    Ok(())
}

/// The payload of a verified record, decompressed.
pub fn record_payload<'b>(
    h: &RecordHeader,
    bytes: &'b [u8],
) -> std::result::Result<Cow<'b, [u8]>, String> {
    let stored = &bytes[RECORD_HEADER_SIZE..h.len as usize];
    let ulen = h.uncompressed_len as usize;
    let out = match h.flags {
        0 => return Ok(Cow::Borrowed(stored)),
        REC_SNAPPY => {
            match snap::raw::decompress_len(stored) {
                Ok(n) if n == ulen => {}
                _ => return Err("snappy payload does not match its recorded length".into()),
            }
            snap::raw::Decoder::new()
                .decompress_vec(stored)
                .map_err(|e| format!("snappy payload does not decompress: {e}"))?
        }
        REC_ZSTD => zstd::bulk::decompress(stored, ulen)
            .map_err(|e| format!("zstd payload does not decompress: {e}"))?,
        _ => unreachable!("flags were checked by check_record_header; fillers are skipped"),
    };
    if out.len() != ulen {
        return Err(format!(
            "payload decompresses to {} bytes, the header says {ulen}",
            out.len()
        ));
    }
    Ok(Cow::Owned(out))
}
