//! Trace formats the simulator replays. All documented in `docs/ssd.md`.
//!
//! **Binary host trace** (little-endian): header `FDSSDT01`, then 24-byte records
//! `time_ns u64, lba u64, pages u32, op u8 (0 read, 1 write, 2 trim), stream u8, reserved u16`.
//! LBAs and lengths count 4 KiB pages.
//!
//! **CSV**, block level — header `time_ns,op,lba,pages,stream`; `op` is read|write|trim.
//!
//! **CSV**, file level — header `time_ns,op,file,offset,bytes,stream`; `op` is
//! read|write|trim (punch a hole)|truncate (`offset` is the new length)|remove; files are
//! placed on LBAs by [`crate::fs_layout::FsLayout`].
//!
//! In both CSV forms blank lines and lines starting with `#` are skipped and an empty
//! `stream` means 0.
//!
//! **blkparse** text output (default format), e.g.
//! `8,0    3        1     0.000000000   697  D  WS 3751520 + 8 [jbd2/sda1-8]`: records with
//! the chosen action (default `D`, issued to the device) are kept; RWBS containing `D` is a
//! discard (trim), `W` a write, `R` a read; others (flushes) are skipped. 512-byte sectors are
//! rounded out to whole 4 KiB pages. Lines that are not event lines (the per-CPU summaries)
//! are skipped; an event line with the chosen action that does not parse is an error.

use crate::device::{HostOp, OpKind};
use crate::error::SsdError;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"FDSSDT01";
/// The placement crate's event trace header, without its two version digits (the placement
/// crate's reader checks the version; this crate only recognises the format).
pub const EVENT_TRACE_MAGIC_PREFIX: &[u8; 6] = b"FDEVTR";
const RECORD: usize = 24;

/// File-level operations (CSV file form; the cli maps placement events onto the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOpKind {
    Read,
    Write,
    /// Punch a hole (the pages wholly inside are freed).
    Trim,
    /// Cut the file to `offset` bytes.
    Truncate,
    Remove,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOp {
    pub time_ns: u64,
    pub kind: FileOpKind,
    pub file: u64,
    pub offset: u64,
    pub bytes: u64,
    pub stream: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    Host(HostOp),
    File(FileOp),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Binary,
    CsvBlock,
    CsvFile,
    Blkparse,
    /// The placement crate's event trace; not read here (see the cli).
    PlacementEvents,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Binary => "binary",
            Format::CsvBlock => "csv-block",
            Format::CsvFile => "csv-file",
            Format::Blkparse => "blkparse",
            Format::PlacementEvents => "events",
        }
    }
}

const CSV_BLOCK_HEADER: &str = "time_ns,op,lba,pages,stream";
const CSV_FILE_HEADER: &str = "time_ns,op,file,offset,bytes,stream";

/// Guesses the format from the first bytes / first meaningful line.
pub fn detect(path: &Path) -> Result<Format, SsdError> {
    let mut f = File::open(path).map_err(|e| trace_err(path, format!("cannot open: {e}")))?;
    let mut head = [0u8; 8];
    let n = f.read(&mut head)?;
    if n == 8 && &head == MAGIC {
        return Ok(Format::Binary);
    }
    if n == 8 && head.starts_with(EVENT_TRACE_MAGIC_PREFIX) {
        return Ok(Format::PlacementEvents);
    }
    let r = BufReader::new(File::open(path)?);
    for line in r.lines() {
        let line = line.map_err(|e| trace_err(path, format!("not a text trace: {e}")))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let norm: String = t.chars().filter(|c| !c.is_whitespace()).collect();
        return Ok(if norm == CSV_BLOCK_HEADER {
            Format::CsvBlock
        } else if norm == CSV_FILE_HEADER {
            Format::CsvFile
        } else {
            Format::Blkparse
        });
    }
    Err(trace_err(path, "empty trace".into()))
}

fn trace_err(path: &Path, msg: String) -> SsdError {
    SsdError::Trace {
        path: path.display().to_string(),
        msg,
    }
}

/// Writes binary host traces.
pub struct BinaryWriter<W: Write> {
    out: W,
}

impl BinaryWriter<BufWriter<File>> {
    pub fn create(path: &Path) -> Result<Self, SsdError> {
        Self::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> BinaryWriter<W> {
    pub fn new(mut out: W) -> Result<Self, SsdError> {
        out.write_all(MAGIC)?;
        Ok(BinaryWriter { out })
    }
    pub fn write(&mut self, op: &HostOp) -> Result<(), SsdError> {
        if op.pages > u32::MAX as u64 || op.stream > u8::MAX as u32 {
            return Err(SsdError::Layout(format!(
                "record does not fit the binary format: {op:?}"
            )));
        }
        let mut b = [0u8; RECORD];
        b[0..8].copy_from_slice(&op.time_ns.to_le_bytes());
        b[8..16].copy_from_slice(&op.lba.to_le_bytes());
        b[16..20].copy_from_slice(&(op.pages as u32).to_le_bytes());
        b[20] = match op.kind {
            OpKind::Read => 0,
            OpKind::Write => 1,
            OpKind::Trim => 2,
        };
        b[21] = op.stream as u8;
        self.out.write_all(&b)?;
        Ok(())
    }
    pub fn finish(mut self) -> Result<W, SsdError> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Reads any trace format except placement events, record by record.
pub struct Reader {
    path: String,
    format: Format,
    input: BufReader<File>,
    line_no: u64,
    record_no: u64,
    header_seen: bool,
    line: String,
    /// blkparse: the action letter that marks records to keep.
    blk_action: String,
}

impl Reader {
    pub fn open(path: &Path, format: Format) -> Result<Self, SsdError> {
        if format == Format::PlacementEvents {
            return Err(trace_err(
                path,
                "placement event traces are replayed through a filesystem layout".into(),
            ));
        }
        let mut input = BufReader::with_capacity(
            1 << 20,
            File::open(path).map_err(|e| trace_err(path, format!("cannot open: {e}")))?,
        );
        if format == Format::Binary {
            let mut m = [0u8; 8];
            input
                .read_exact(&mut m)
                .map_err(|_| trace_err(path, "too short for a binary trace".into()))?;
            if &m != MAGIC {
                return Err(trace_err(
                    path,
                    "not a binary host trace (bad magic)".into(),
                ));
            }
        }
        Ok(Reader {
            path: path.display().to_string(),
            format,
            input,
            line_no: 0,
            record_no: 0,
            header_seen: false,
            line: String::new(),
            blk_action: "D".into(),
        })
    }

    /// blkparse: keep records of this action (`D` issued, `Q` queued, `C` completed).
    pub fn set_blkparse_action(&mut self, action: &str) {
        self.blk_action = action.to_string();
    }

    fn line_err(&self, msg: String) -> SsdError {
        SsdError::TraceLine {
            path: self.path.clone(),
            line: self.line_no,
            msg,
        }
    }

    pub fn next_record(&mut self) -> Result<Option<Record>, SsdError> {
        if self.format == Format::Binary {
            return self.next_binary();
        }
        loop {
            self.line.clear();
            let n = self
                .input
                .read_line(&mut self.line)
                .map_err(|e| self.line_err(format!("unreadable: {e}")))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            let t = self.line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let r = match self.format {
                Format::CsvBlock | Format::CsvFile if !self.header_seen => {
                    self.header_seen = true;
                    continue;
                }
                Format::CsvBlock => parse_csv_block(t).map(Some),
                Format::CsvFile => parse_csv_file(t).map(Some),
                Format::Blkparse => parse_blkparse(t, &self.blk_action),
                Format::Binary | Format::PlacementEvents => unreachable!(),
            };
            match r {
                Ok(Some(rec)) => return Ok(Some(rec)),
                Ok(None) => continue,
                Err(msg) => return Err(self.line_err(msg)),
            }
        }
    }

    fn next_binary(&mut self) -> Result<Option<Record>, SsdError> {
        let mut b = [0u8; RECORD];
        let mut got = 0;
        while got < RECORD {
            let n = self.input.read(&mut b[got..])?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            return Ok(None);
        }
        let rec = self.record_no;
        self.record_no += 1;
        let err = |msg: String| SsdError::Trace {
            path: self.path.clone(),
            msg: format!("record {rec}: {msg}"),
        };
        if got < RECORD {
            return Err(err(format!("cut short ({got} of {RECORD} bytes)")));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let kind = match b[20] {
            0 => OpKind::Read,
            1 => OpKind::Write,
            2 => OpKind::Trim,
            k => return Err(err(format!("bad op {k} (0 read, 1 write, 2 trim)"))),
        };
        Ok(Some(Record::Host(HostOp {
            time_ns: u64_at(0),
            kind,
            lba: u64_at(8),
            pages: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")) as u64,
            stream: b[21] as u32,
        })))
    }
}

impl Iterator for Reader {
    type Item = Result<Record, SsdError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

fn num(field: &str, what: &str) -> Result<u64, String> {
    field
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{what} {field:?} is not a non-negative integer"))
}

fn stream_field(field: Option<&str>) -> Result<u32, String> {
    match field.map(str::trim) {
        None | Some("") => Ok(0),
        Some(s) => s
            .parse::<u32>()
            .map_err(|_| format!("stream {s:?} is not a non-negative integer")),
    }
}

fn parse_csv_block(line: &str) -> Result<Record, String> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() < 4 || f.len() > 5 {
        return Err(format!(
            "expected {CSV_BLOCK_HEADER}, got {} fields",
            f.len()
        ));
    }
    let kind = match f[1].trim() {
        "read" => OpKind::Read,
        "write" => OpKind::Write,
        "trim" => OpKind::Trim,
        o => return Err(format!("op {o:?} is not read|write|trim")),
    };
    Ok(Record::Host(HostOp {
        time_ns: num(f[0], "time_ns")?,
        kind,
        lba: num(f[2], "lba")?,
        pages: num(f[3], "pages")?,
        stream: stream_field(f.get(4).copied())?,
    }))
}

fn parse_csv_file(line: &str) -> Result<Record, String> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() < 5 || f.len() > 6 {
        return Err(format!(
            "expected {CSV_FILE_HEADER}, got {} fields",
            f.len()
        ));
    }
    let kind = match f[1].trim() {
        "read" => FileOpKind::Read,
        "write" => FileOpKind::Write,
        "trim" => FileOpKind::Trim,
        "truncate" => FileOpKind::Truncate,
        "remove" => FileOpKind::Remove,
        o => return Err(format!("op {o:?} is not read|write|trim|truncate|remove")),
    };
    Ok(Record::File(FileOp {
        time_ns: num(f[0], "time_ns")?,
        kind,
        file: num(f[2], "file")?,
        offset: num(f[3], "offset")?,
        bytes: num(f[4], "bytes")?,
        stream: stream_field(f.get(5).copied())?,
    }))
}

/// `Ok(None)` for lines to skip.
fn parse_blkparse(line: &str, action: &str) -> Result<Option<Record>, String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    // Event lines start with "major,minor" and a CPU number.
    let is_event = t.len() >= 6
        && t[0]
            .split_once(',')
            .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
        && t[1].parse::<u32>().is_ok();
    if !is_event || t[5] != action {
        return Ok(None);
    }
    let rwbs = t.get(6).copied().unwrap_or("");
    let kind = if rwbs.contains('D') {
        OpKind::Trim
    } else if rwbs.contains('W') {
        OpKind::Write
    } else if rwbs.contains('R') {
        OpKind::Read
    } else {
        // Flushes and other data-less requests.
        return Ok(None);
    };
    if t.len() < 10 || t[8] != "+" {
        return Err(format!(
            "blkparse {action} record without 'sector + count': {line:?}"
        ));
    }
    let secs: f64 = t[3]
        .parse()
        .map_err(|_| format!("time {:?} is not a number", t[3]))?;
    let sector = num(t[7], "sector")?;
    let count = num(t[9], "sector count")?;
    if count == 0 {
        return Ok(None);
    }
    let first = sector / 8;
    let end = (sector + count).div_ceil(8);
    Ok(Some(Record::Host(HostOp {
        time_ns: (secs * 1e9).round() as u64,
        kind,
        lba: first,
        pages: end - first,
        stream: 0,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        p
    }

    fn read_all(p: &Path) -> Result<Vec<Record>, SsdError> {
        Reader::open(p, detect(p)?)?.collect()
    }

    #[test]
    fn binary_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        let ops = [
            HostOp {
                time_ns: 5,
                kind: OpKind::Write,
                lba: 7,
                pages: 3,
                stream: 2,
            },
            HostOp {
                time_ns: 9,
                kind: OpKind::Trim,
                lba: 7,
                pages: 1,
                stream: 0,
            },
            HostOp {
                time_ns: 11,
                kind: OpKind::Read,
                lba: 8,
                pages: 2,
                stream: 0,
            },
        ];
        let mut w = BinaryWriter::create(&p).unwrap();
        for o in &ops {
            w.write(o).unwrap();
        }
        w.finish().unwrap();
        let got = read_all(&p).unwrap();
        assert_eq!(
            got,
            ops.iter().map(|o| Record::Host(*o)).collect::<Vec<_>>()
        );
        // A cut-short record is an error naming the record.
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&p, &bytes).unwrap();
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("record 2") && e.contains("cut short"), "{e}");
    }

    #[test]
    fn csv_block_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_file(
            &dir,
            "b.csv",
            "# comment\ntime_ns,op,lba,pages,stream\n0,write,10,2,1\n\n5,trim,10,1,\n6,read,11,1\n",
        );
        let got = read_all(&p).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0],
            Record::Host(HostOp {
                time_ns: 0,
                kind: OpKind::Write,
                lba: 10,
                pages: 2,
                stream: 1
            })
        );
        assert_eq!(
            got[1],
            Record::Host(HostOp {
                time_ns: 5,
                kind: OpKind::Trim,
                lba: 10,
                pages: 1,
                stream: 0
            })
        );
        let p = write_file(
            &dir,
            "f.csv",
            "time_ns, op, file, offset, bytes, stream\n1,write,3,4096,8192,2\n2,remove,3,0,0,\n",
        );
        let got = read_all(&p).unwrap();
        assert_eq!(
            got[0],
            Record::File(FileOp {
                time_ns: 1,
                kind: FileOpKind::Write,
                file: 3,
                offset: 4096,
                bytes: 8192,
                stream: 2
            })
        );
        assert!(matches!(
            got[1],
            Record::File(FileOp {
                kind: FileOpKind::Remove,
                ..
            })
        ));
    }

    #[test]
    fn malformed_csv_line_reports_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_file(
            &dir,
            "bad.csv",
            "time_ns,op,lba,pages,stream\n0,write,1,1,0\n1,erase,1,1,0\n",
        );
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("erase"), "{e}");
        let p = write_file(
            &dir,
            "bad2.csv",
            "time_ns,op,lba,pages,stream\n0,write,x,1,0\n",
        );
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("lba"), "{e}");
    }

    #[test]
    fn blkparse_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text = "  8,0    3        1     0.000000000   697  Q  WS 3751520 + 8 [jbd2/sda1-8]\n\
                    8,0    3        2     0.000001000   697  D  WS 3751520 + 9 [jbd2/sda1-8]\n\
                    8,0    0        3     0.000002000     0  C  WS 3751520 + 8 [0]\n\
                    8,0    1        4     0.000010000   700  D   R 16 + 8 [cat]\n\
                    8,0    1        5     0.000020000   700  D   D 0 + 2048 [fstrim]\n\
                    8,0    1        6     0.000030000   700  D  FN [kworker]\n\
                    CPU0 (8,0):\n Reads Queued:           0,        0KiB\n";
        let p = write_file(&dir, "t.blk", text);
        assert_eq!(detect(&p).unwrap(), Format::Blkparse);
        let got = read_all(&p).unwrap();
        let ops: Vec<HostOp> = got
            .into_iter()
            .map(|r| match r {
                Record::Host(h) => h,
                _ => panic!(),
            })
            .collect();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            (ops[0].kind, ops[0].lba, ops[0].pages, ops[0].time_ns),
            (OpKind::Write, 468940, 2, 1000)
        );
        assert_eq!(
            (ops[1].kind, ops[1].lba, ops[1].pages),
            (OpKind::Read, 2, 1)
        );
        assert_eq!(
            (ops[2].kind, ops[2].lba, ops[2].pages),
            (OpKind::Trim, 0, 256)
        );
        let p = write_file(&dir, "bad.blk", "8,0 1 1 0.1 5 D W 100 8\n");
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}
