//! The event trace file format (version 3). Little-endian throughout.
//!
//! ```text
//! header  : 8 bytes  "FDEVTR03" ("FDEVTR02": version 2, the same records without tag 8)
//! record  : tag u8, then the fields of that tag:
//!   0 FileCreate      time u64, file u32, kind u8, name_len u16, name [name_len] (UTF-8)
//!   1 FileRename      time u64, file u32, name_len u16, name [name_len]
//!   2 FileRemove      time u64, file u32
//!   3 FileTruncate    time u64, file u32, len u64
//!   4 Write           time u64, file u32, file_kind u8, table u32, page_kind u8,
//!                     offset u64, len u32, flags u8 (bit 0: id_index; bits 1–2: cause, the
//!                     discriminant of [`WriteCause`], 0 in traces written before it existed),
//!                     stream u8, page_id u64
//!   5 Free            time u64, file u32, offset u64, len u64
//!   6 CheckpointBegin time u64, id u64
//!   7 CheckpointCommit time u64, id u64
//!   8 Read            time u64, file u32, offset u64, len u32   (version 3 on)
//! ```
//! Version 3 added reads; a version-2 trace (written before) reads as it was, with no reads.
//! `kind`/`file_kind` and `page_kind` use the discriminants of [`FileKind`] and [`PageKind`].
//! A trace cut short (a crashed writer) ends at its last whole record.

use crate::event::{Event, FileKind, PageKind, WriteCause, WriteEvent};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"FDEVTR03";
/// The previous version's header: the same records, without reads (tag 8).
pub const MAGIC_V2: &[u8; 8] = b"FDEVTR02";

pub struct TraceWriter {
    out: BufWriter<File>,
    error: Option<io::Error>,
    buf: Vec<u8>,
}

impl TraceWriter {
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        out.write_all(MAGIC)?;
        Ok(Self {
            out,
            error: None,
            buf: Vec::with_capacity(64),
        })
    }

    /// Appends one event; the first I/O error is kept and returned by [`TraceWriter::flush`].
    pub fn write(&mut self, event: &Event) {
        if self.error.is_some() {
            return;
        }
        self.buf.clear();
        encode(event, &mut self.buf);
        if let Err(e) = self.out.write_all(&self.buf) {
            self.error = Some(e);
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

fn put_name(buf: &mut Vec<u8>, name: &str) {
    let bytes = &name.as_bytes()[..name.len().min(u16::MAX as usize)];
    buf.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    buf.extend_from_slice(bytes);
}

pub fn encode(event: &Event, buf: &mut Vec<u8>) {
    match event {
        Event::FileCreate {
            time_ns,
            file,
            kind,
            name,
        } => {
            buf.push(0);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&file.to_le_bytes());
            buf.push(*kind as u8);
            put_name(buf, name);
        }
        Event::FileRename {
            time_ns,
            file,
            name,
        } => {
            buf.push(1);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&file.to_le_bytes());
            put_name(buf, name);
        }
        Event::FileRemove { time_ns, file } => {
            buf.push(2);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&file.to_le_bytes());
        }
        Event::FileTruncate { time_ns, file, len } => {
            buf.push(3);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&file.to_le_bytes());
            buf.extend_from_slice(&len.to_le_bytes());
        }
        Event::Write(w) => {
            buf.push(4);
            buf.extend_from_slice(&w.time_ns.to_le_bytes());
            buf.extend_from_slice(&w.file.to_le_bytes());
            buf.push(w.file_kind as u8);
            buf.extend_from_slice(&w.table.to_le_bytes());
            buf.push(w.page_kind as u8);
            buf.extend_from_slice(&w.offset.to_le_bytes());
            buf.extend_from_slice(&w.len.to_le_bytes());
            buf.push(w.id_index as u8 | (w.cause as u8) << 1);
            buf.push(w.stream);
            buf.extend_from_slice(&w.page_id.to_le_bytes());
        }
        Event::Free {
            time_ns,
            file,
            offset,
            len,
        } => {
            buf.push(5);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&file.to_le_bytes());
            buf.extend_from_slice(&offset.to_le_bytes());
            buf.extend_from_slice(&len.to_le_bytes());
        }
        Event::CheckpointBegin { time_ns, id } => {
            buf.push(6);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&id.to_le_bytes());
        }
        Event::CheckpointCommit { time_ns, id } => {
            buf.push(7);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&id.to_le_bytes());
        }
        Event::Read {
            time_ns,
            file,
            offset,
            len,
        } => {
            buf.push(8);
            buf.extend_from_slice(&time_ns.to_le_bytes());
            buf.extend_from_slice(&file.to_le_bytes());
            buf.extend_from_slice(&offset.to_le_bytes());
            buf.extend_from_slice(&len.to_le_bytes());
        }
    }
}

/// Reads a trace file event by event.
pub struct TraceReader<R: Read> {
    input: R,
    /// Number of events returned so far (for error messages).
    pub events_read: u64,
    /// The format's version (2 or 3): a version-2 trace has no read records.
    pub version: u8,
}

impl TraceReader<BufReader<File>> {
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::new(BufReader::with_capacity(1 << 20, File::open(path)?))
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl<R: Read> TraceReader<R> {
    pub fn new(mut input: R) -> io::Result<Self> {
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic)?;
        let version = match &magic {
            m if m == MAGIC => 3,
            m if m == MAGIC_V2 => 2,
            _ => 0,
        };
        if version == 0 {
            // The first six bytes name the format, the last two its version.
            return Err(bad(if magic[..6] == MAGIC[..6] {
                format!(
                    "a flashdoc event trace of format {:?}; this build reads only {:?} and \
                     {:?} (record the trace again)",
                    String::from_utf8_lossy(&magic),
                    String::from_utf8_lossy(MAGIC_V2),
                    String::from_utf8_lossy(MAGIC)
                )
            } else {
                "not a flashdoc event trace (bad magic)".into()
            }));
        }
        Ok(Self {
            input,
            events_read: 0,
            version,
        })
    }

    fn u8(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.input.read_exact(&mut b)?;
        Ok(b[0])
    }
    fn u16(&mut self) -> io::Result<u16> {
        let mut b = [0u8; 2];
        self.input.read_exact(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    fn name(&mut self) -> io::Result<String> {
        let n = self.u16()? as usize;
        let mut b = vec![0u8; n];
        self.input.read_exact(&mut b)?;
        String::from_utf8(b).map_err(|_| bad("file name is not UTF-8".into()))
    }

    /// The next event; `Ok(None)` at the end (including a final record cut short).
    pub fn next_event(&mut self) -> io::Result<Option<Event>> {
        let tag = match self.u8() {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        };
        match self.read_body(tag) {
            Ok(ev) => {
                self.events_read += 1;
                Ok(Some(ev))
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_body(&mut self, tag: u8) -> io::Result<Event> {
        // One read of the record's fixed part (two calls per event instead of one per field:
        // decoding was a fifth of a replay's time), then the name if it has one.
        let fixed = match tag {
            0 => 8 + 4 + 1,
            1 => 8 + 4,
            2 => 8 + 4,
            3 => 8 + 4 + 8,
            4 => 8 + 4 + 1 + 4 + 1 + 8 + 4 + 1 + 1 + 8,
            5 => 8 + 4 + 8 + 8,
            6 | 7 => 8 + 8,
            8 if self.version >= 3 => 8 + 4 + 8 + 4,
            t => {
                return Err(bad(format!(
                    "event {}: unknown record tag {t}",
                    self.events_read
                )))
            }
        };
        let mut buf = [0u8; 40];
        self.input.read_exact(&mut buf[..fixed])?;
        let mut f = Fields(&buf[..fixed]);
        let time_ns = f.u64();
        let event = self.events_read;
        let file_kind = |k: u8| {
            FileKind::from_u8(k).ok_or_else(|| bad(format!("event {event}: bad file kind {k}")))
        };
        Ok(match tag {
            0 => {
                let file = f.u32();
                let kind = file_kind(f.u8())?;
                Event::FileCreate {
                    time_ns,
                    file,
                    kind,
                    name: self.name()?,
                }
            }
            1 => Event::FileRename {
                time_ns,
                file: f.u32(),
                name: self.name()?,
            },
            2 => Event::FileRemove {
                time_ns,
                file: f.u32(),
            },
            3 => Event::FileTruncate {
                time_ns,
                file: f.u32(),
                len: f.u64(),
            },
            4 => {
                let file = f.u32();
                let file_kind = file_kind(f.u8())?;
                let table = f.u32();
                let pk = f.u8();
                let page_kind = PageKind::from_u8(pk)
                    .ok_or_else(|| bad(format!("event {event}: bad page kind {pk}")))?;
                let offset = f.u64();
                let len = f.u32();
                let flags = f.u8();
                let cause = WriteCause::from_u8((flags >> 1) & 3).expect("two bits");
                if flags >> 3 != 0 {
                    return Err(bad(format!(
                        "event {event}: unknown write flags {flags:#x}"
                    )));
                }
                Event::Write(WriteEvent {
                    time_ns,
                    file,
                    file_kind,
                    table,
                    page_kind,
                    offset,
                    len,
                    id_index: flags & 1 != 0,
                    stream: f.u8(),
                    page_id: f.u64(),
                    cause,
                })
            }
            5 => Event::Free {
                time_ns,
                file: f.u32(),
                offset: f.u64(),
                len: f.u64(),
            },
            6 => Event::CheckpointBegin {
                time_ns,
                id: f.u64(),
            },
            8 => Event::Read {
                time_ns,
                file: f.u32(),
                offset: f.u64(),
                len: f.u32(),
            },
            _ => Event::CheckpointCommit {
                time_ns,
                id: f.u64(),
            },
        })
    }
}

/// Little-endian fields taken in order from a record's fixed part (its length was checked
/// against the tag before, so a short slice is a bug here).
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .expect("field in the record");
        self.0 = rest;
        *head
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = io::Result<Event>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Event> {
        vec![
            Event::FileCreate {
                time_ns: 1,
                file: 7,
                kind: FileKind::Index,
                name: "index-3-1.fdb".into(),
            },
            Event::Write(WriteEvent {
                time_ns: 2,
                file: 7,
                file_kind: FileKind::Index,
                table: 3,
                page_kind: PageKind::Leaf,
                offset: 4096,
                len: 16384,
                id_index: true,
                stream: 5,
                page_id: 42,
                cause: WriteCause::Eviction,
            }),
            Event::Free {
                time_ns: 3,
                file: 7,
                offset: 4096,
                len: 16384,
            },
            Event::CheckpointBegin { time_ns: 4, id: 1 },
            Event::CheckpointCommit { time_ns: 5, id: 1 },
            Event::FileTruncate {
                time_ns: 6,
                file: 7,
                len: 8192,
            },
            Event::FileRename {
                time_ns: 7,
                file: 7,
                name: "x".into(),
            },
            Event::Read {
                time_ns: 8,
                file: 7,
                offset: 8192,
                len: 32768,
            },
            Event::FileRemove {
                time_ns: 9,
                file: 7,
            },
        ]
    }

    fn written(events: &[Event]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        for e in events {
            encode(e, &mut bytes);
        }
        bytes
    }

    #[test]
    fn a_read_round_trips_with_its_fields() {
        let read = Event::Read {
            time_ns: u64::MAX - 1,
            file: u32::MAX - 2,
            offset: 1 << 40,
            len: 4096 * 9,
        };
        let bytes = written(std::slice::from_ref(&read));
        assert_eq!(bytes.len(), 8 + 1 + 8 + 4 + 8 + 4);
        let got: Vec<Event> = TraceReader::new(&bytes[..])
            .unwrap()
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(got, vec![read]);
    }

    #[test]
    fn a_version_2_trace_reads_as_it_was_and_refuses_a_read_record() {
        let old: Vec<Event> = sample()
            .into_iter()
            .filter(|e| !matches!(e, Event::Read { .. }))
            .collect();
        let mut bytes = written(&old);
        bytes[..8].copy_from_slice(MAGIC_V2);
        let r = TraceReader::new(&bytes[..]).unwrap();
        assert_eq!(r.version, 2);
        let got: Vec<Event> = r.collect::<io::Result<_>>().unwrap();
        assert_eq!(got, old);
        // Tag 8 did not exist in version 2: such a record is corrupt, not a read.
        let mut bytes = written(&sample());
        bytes[..8].copy_from_slice(MAGIC_V2);
        let err = TraceReader::new(&bytes[..])
            .unwrap()
            .collect::<io::Result<Vec<Event>>>()
            .unwrap_err();
        assert!(err.to_string().contains("unknown record tag 8"), "{err}");
    }

    #[test]
    fn round_trip_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.trace");
        {
            let mut w = TraceWriter::create(&path).unwrap();
            for e in sample() {
                w.write(&e);
            }
            w.flush().unwrap();
        }
        let got: Vec<Event> = TraceReader::open(&path)
            .unwrap()
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(got, sample());
        // Cut the last record in half: the reader stops at the last whole one.
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 3).unwrap();
        let got: Vec<Event> = TraceReader::open(&path)
            .unwrap()
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(got, sample()[..sample().len() - 1].to_vec());
    }

    #[test]
    fn bad_magic_is_an_error() {
        let err = TraceReader::new(&b"NOTATRACE"[..]).err().unwrap();
        assert!(err.to_string().contains("bad magic"));
        let err = TraceReader::new(&b"FDEVTR01rest"[..]).err().unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("\"FDEVTR01\"")
                && msg.contains("\"FDEVTR02\"")
                && msg.contains("\"FDEVTR03\""),
            "{msg}"
        );
    }
}
