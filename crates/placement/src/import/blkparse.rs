//! `blkparse`'s default text output: one line per block-layer action,
//!
//! ```text
//!   8,0    3        7     0.000012900   697  D   W 223490 + 8 [kworker/3:1]
//! ```
//!
//! (device, CPU, sequence, seconds, pid, action, RWBS, sector `+` sectors, process). One action
//! is taken as the device's view (default `D`, issued to the driver: after merging, as the
//! device receives it); the others are checked for shape and skipped. An RWBS of `W` (after an
//! optional `F` preflush) is a write, `D` a discard (written as a `Free`), `R` a read and `N`
//! none. blkparse's closing summary (`CPU0 (8,0):`, `Total (8,0):` …) ends the input.
//!
//! Sectors are 512 bytes. With a file map (`path,first_lba,last_lba`, inclusive sectors; a
//! path on several lines has those extents in file order) a write lands in the files it
//! covers, and a sector no extent maps lands in a file named `(unmapped)`. Without a map every
//! write is to one file, `device`, a collection file at the sector's byte offset. A block trace
//! marks no checkpoints.

use super::{data_lines, emit_write, Clock, ImportError, ImportSummary};
use crate::classify::FileClassifier;
use crate::event::{Event, FileId, FileKind};
use std::collections::HashMap;
use std::io::BufRead;

pub const FILE_MAP_HEADER: &str = "path,first_lba,last_lba";
const SECTOR_BYTES: u64 = 512;

/// One extent of a mapped file: sectors `first..=last` hold the file's bytes from `file_offset`.
#[derive(Clone, Debug)]
struct Extent {
    first: u64,
    last: u64,
    file: usize,
    file_offset: u64,
}

/// The files of a block device, by sector.
#[derive(Clone, Debug, Default)]
pub struct FileMap {
    /// Sorted by `first`, disjoint.
    extents: Vec<Extent>,
    paths: Vec<String>,
}

impl FileMap {
    pub fn parse(input: impl BufRead, name: &str) -> Result<FileMap, ImportError> {
        let mut map = FileMap::default();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut next_offset: Vec<u64> = Vec::new();
        let mut lines = HashMap::new();
        for item in data_lines(input, name, FILE_MAP_HEADER) {
            let (line, text) = item?;
            let err = |message: String| ImportError {
                input: name.to_string(),
                line,
                message,
            };
            // The path may hold commas; the two numbers are the last fields.
            let mut fields = text.rsplitn(3, ',');
            let (Some(last), Some(first), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(err(format!("expected {FILE_MAP_HEADER}, found {text:?}")));
            };
            let sector = |what: &str, s: &str| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|_| err(format!("{what} {s:?} is not a sector number")))
            };
            let (first, last) = (sector("first_lba", first)?, sector("last_lba", last)?);
            if last < first {
                return Err(err(format!("last_lba {last} is before first_lba {first}")));
            }
            let path = path.trim().to_string();
            let file = *index.entry(path.clone()).or_insert_with(|| {
                map.paths.push(path);
                next_offset.push(0);
                map.paths.len() - 1
            });
            map.extents.push(Extent {
                first,
                last,
                file,
                file_offset: next_offset[file],
            });
            lines.insert(first, line);
            next_offset[file] += (last - first + 1) * SECTOR_BYTES;
        }
        map.extents.sort_by_key(|e| e.first);
        for pair in map.extents.windows(2) {
            if pair[1].first <= pair[0].last {
                return Err(ImportError {
                    input: name.to_string(),
                    line: lines[&pair[1].first],
                    message: format!(
                        "sectors {}..={} overlap {}..={} of {}",
                        pair[1].first,
                        pair[1].last,
                        pair[0].first,
                        pair[0].last,
                        map.paths[pair[0].file]
                    ),
                });
            }
        }
        Ok(map)
    }

    /// Splits sectors `sector..sector + count` into (file, byte offset, bytes) pieces; `None`
    /// for a piece no extent maps (its byte offset is then the device's).
    fn pieces(&self, sector: u64, count: u64, out: &mut Vec<(Option<usize>, u64, u64)>) {
        out.clear();
        let end = sector + count;
        let mut at = sector;
        // The first extent that ends at or after `at`.
        let mut i = self.extents.partition_point(|e| e.last < at);
        while at < end {
            match self.extents.get(i) {
                Some(e) if e.first <= at => {
                    let stop = end.min(e.last + 1);
                    let offset = e.file_offset + (at - e.first) * SECTOR_BYTES;
                    out.push((Some(e.file), offset, (stop - at) * SECTOR_BYTES));
                    at = stop;
                    i += 1;
                }
                next => {
                    let stop = next.map_or(end, |e| e.first.min(end));
                    out.push((None, at * SECTOR_BYTES, (stop - at) * SECTOR_BYTES));
                    at = stop;
                }
            }
        }
    }
}

pub struct BlkparseImport {
    /// `None`: every write is to one file.
    pub file_map: Option<FileMap>,
    /// Classifies the mapped files by path.
    pub classifier: FileClassifier,
    /// The action whose lines are the device's view (`D`, `Q` or `C`).
    pub action: String,
    /// Only this device (`8,0`); `None`: the trace must hold one device.
    pub device: Option<String>,
}

enum Line<'a> {
    Action {
        device: &'a str,
        time_ns: u64,
        action: &'a str,
        rwbs: &'a str,
        rest: Vec<&'a str>,
    },
    /// blkparse's closing summary begins.
    Summary,
}

impl BlkparseImport {
    pub fn run(
        &self,
        input: impl BufRead,
        name: &str,
        mut out: impl FnMut(Event),
    ) -> Result<ImportSummary, ImportError> {
        let mut summary = ImportSummary::default();
        let mut created: HashMap<Option<usize>, FileId> = HashMap::new();
        let mut device = self.device.clone();
        let mut clock = Clock::default();
        let mut pieces = Vec::new();
        for (i, line) in input.lines().enumerate() {
            let line_no = i as u64 + 1;
            let err = |message: String| ImportError {
                input: name.to_string(),
                line: line_no,
                message,
            };
            let text = line.map_err(|e| err(e.to_string()))?;
            if text.trim().is_empty() {
                continue;
            }
            summary.lines += 1;
            let (dev, time_ns, action, rwbs, rest) = match parse_line(&text).map_err(&err)? {
                Line::Summary => break,
                Line::Action {
                    device,
                    time_ns,
                    action,
                    rwbs,
                    rest,
                } => (device, time_ns, action, rwbs, rest),
            };
            match &device {
                Some(d) if d != dev => {
                    if self.device.is_some() {
                        continue;
                    }
                    return Err(err(format!(
                        "a second device {dev} (the trace began with {d}): choose one with \
                         --device"
                    )));
                }
                Some(_) => {}
                None => device = Some(dev.to_string()),
            }
            if action != self.action {
                continue;
            }
            let op = rwbs.trim_start_matches('F').chars().next();
            let is_write = op == Some('W');
            let is_discard = op == Some('D');
            if !is_write && !is_discard {
                continue;
            }
            let (sector, count) = sectors(&rest).map_err(&err)?;
            let t = clock.stamp(time_ns, &mut summary);
            match &self.file_map {
                Some(map) => map.pieces(sector, count, &mut pieces),
                None => {
                    pieces.clear();
                    pieces.push((None, sector * SECTOR_BYTES, count * SECTOR_BYTES));
                }
            }
            for &(file, offset, len) in &pieces {
                let (f, kind) = self.file(file, t, &mut created, &mut summary, &mut out);
                if is_write {
                    emit_write(&mut out, &mut summary, t, f, kind, offset, len);
                } else {
                    summary.discards += 1;
                    summary.events += 1;
                    out(Event::Free {
                        time_ns: t,
                        file: f,
                        offset,
                        len,
                    });
                }
            }
        }
        Ok(summary)
    }

    /// The event file of a mapped file (`Some`), or of the unmapped space (`None`), created at
    /// its first use.
    fn file(
        &self,
        mapped: Option<usize>,
        t: u64,
        created: &mut HashMap<Option<usize>, FileId>,
        summary: &mut ImportSummary,
        out: &mut impl FnMut(Event),
    ) -> (FileId, FileKind) {
        let (name, kind) = match (&self.file_map, mapped) {
            (Some(map), Some(i)) => {
                let path = &map.paths[i];
                (path.clone(), self.classifier.classify(path))
            }
            (Some(_), None) => ("(unmapped)".to_string(), FileKind::Metadata),
            (None, _) => ("device".to_string(), FileKind::Collection),
        };
        if let Some(&f) = created.get(&mapped) {
            return (f, kind);
        }
        let f = created.len() as FileId;
        created.insert(mapped, f);
        summary.files += 1;
        summary.events += 1;
        out(Event::FileCreate {
            time_ns: t,
            file: f,
            kind,
            name,
        });
        (f, kind)
    }
}

fn parse_line(text: &str) -> Result<Line<'_>, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let first = fields[0];
    if first.starts_with("CPU") || first == "Total" {
        return Ok(Line::Summary);
    }
    let bad = || {
        format!(
            "not a blkparse action line (device cpu sequence seconds pid action rwbs …): \
             {text:?}"
        )
    };
    if fields.len() < 7 {
        return Err(bad());
    }
    let device = fields[0];
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let dev_ok = device
        .split_once(',')
        .is_some_and(|(a, b)| numeric(a) && numeric(b));
    if !dev_ok || !numeric(fields[1]) || !numeric(fields[2]) || !numeric(fields[4]) {
        return Err(bad());
    }
    let time_ns = seconds_to_ns(fields[3]).ok_or_else(bad)?;
    Ok(Line::Action {
        device,
        time_ns,
        action: fields[5],
        rwbs: fields[6],
        rest: fields[7..].to_vec(),
    })
}

/// `S.NNNNNNNNN` seconds, exactly (a float would lose nanoseconds past a few hours).
fn seconds_to_ns(s: &str) -> Option<u64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let frac: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32)
    };
    whole.checked_mul(1_000_000_000)?.checked_add(frac)
}

/// `SECTOR + COUNT` at the start of an action's payload.
fn sectors(rest: &[&str]) -> Result<(u64, u64), String> {
    match rest {
        [sector, "+", count, ..] => match (sector.parse(), count.parse()) {
            (Ok(s), Ok(c)) if c > 0 => Ok((s, c)),
            _ => Err(format!("{sector} + {count} is not a sector range")),
        },
        _ => Err(format!(
            "a write or discard without its sector range ({:?})",
            rest.join(" ")
        )),
    }
}
