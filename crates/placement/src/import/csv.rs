//! The CSV of file-level calls (`time_ns,op,file_id,offset,len`) and its file table
//! (`file_id,path`), as captured by a syscall tracer or an interposer outside the engine.
//!
//! - `op` is one of `open` (offset = the open flags, len = the size at open), `write` (offset
//!   and bytes written; a negative len is −errno, a failed write), `fdatasync`, `fsync`, `sfr`
//!   (sync_file_range), `trunc` (len = the new size), `falloc` (offset and len), `close`,
//!   `unlink`, `rename` (file_id = the source path's id, offset = the destination path's id),
//!   `mmap` and `mmapw`.
//! - The file table gives each id a path relative to the database directory; `.` is the
//!   directory itself (its syncs are not file events).
//! - An id names the path a descriptor was opened with, and an open descriptor keeps its id
//!   across a rename: writes through it go to the file it opened, wherever that file is now.
//! - Times are rebased so the first line is at 0, and kept non-decreasing (`Clock`).
//!
//! The events file is read twice: once to find the checkpoints (a rule may need to see the end
//! of a sync burst before it can place the commit), once to write the events.

use super::{
    data_lines, emit_write, is_tree_file, CheckpointRule, Clock, ImportError, ImportSummary,
};
use crate::classify::FileClassifier;
use crate::event::{Event, FileId, FileKind};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

pub const EVENTS_HEADER: &str = "time_ns,op,file_id,offset,len";
pub const FILES_HEADER: &str = "file_id,path";

/// Linux's `O_TRUNC`: an open with it empties the file.
const O_TRUNC: i64 = 0o1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Open,
    Write,
    Fdatasync,
    Fsync,
    SyncFileRange,
    Trunc,
    Falloc,
    Close,
    Unlink,
    Rename,
    Mmap,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "open" => Op::Open,
            "write" => Op::Write,
            "fdatasync" => Op::Fdatasync,
            "fsync" => Op::Fsync,
            "sfr" => Op::SyncFileRange,
            "trunc" => Op::Trunc,
            "falloc" => Op::Falloc,
            "close" => Op::Close,
            "unlink" => Op::Unlink,
            "rename" => Op::Rename,
            "mmap" | "mmapw" => Op::Mmap,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Row {
    time_ns: u64,
    op: Op,
    id: u64,
    offset: i64,
    len: i64,
}

pub struct CsvImport {
    pub classifier: FileClassifier,
    pub checkpoints: CheckpointRule,
}

impl CsvImport {
    /// Converts `events` (with its file table `files`), handing each event to `out` in order.
    pub fn run(
        &self,
        events: &Path,
        files: &Path,
        out: impl FnMut(Event),
    ) -> Result<ImportSummary, ImportError> {
        let paths = parse_files(open(files)?, &files.display().to_string())?;
        let name = events.display().to_string();
        let plan = checkpoint_plan(
            &self.checkpoints,
            &paths,
            rows(open(events)?, &name, &paths),
        )?;
        let mut conv = Converter::new(&self.classifier, &paths, plan, out);
        for row in rows(open(events)?, &name, &paths) {
            let (line, row) = row?;
            conv.row(line, row);
        }
        Ok(conv.summary)
    }
}

fn open(path: &Path) -> Result<BufReader<File>, ImportError> {
    File::open(path)
        .map(|f| BufReader::with_capacity(1 << 20, f))
        .map_err(|e| ImportError {
            input: path.display().to_string(),
            line: 0,
            message: e.to_string(),
        })
}

fn parse_files(input: impl BufRead, name: &str) -> Result<HashMap<u64, String>, ImportError> {
    let mut paths: HashMap<u64, String> = HashMap::new();
    for item in data_lines(input, name, FILES_HEADER) {
        let (line, text) = item?;
        let err = |message: String| ImportError {
            input: name.to_string(),
            line,
            message,
        };
        let (id, path) = text
            .split_once(',')
            .ok_or_else(|| err(format!("expected file_id,path, found {text:?}")))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| err(format!("file_id {id:?} is not a non-negative integer")))?;
        let path = unquote(path.trim()).map_err(&err)?;
        if path.is_empty() || path.starts_with('/') {
            return Err(err(format!(
                "path {path:?} must be relative to the database directory"
            )));
        }
        if paths.insert(id, path).is_some() {
            return Err(err(format!("file_id {id} is given twice")));
        }
    }
    Ok(paths)
}

/// A path may be quoted as CSV quotes it (`"a,b"`, with `""` for a quote).
fn unquote(s: &str) -> Result<String, String> {
    match s.strip_prefix('"') {
        None => Ok(s.to_string()),
        Some(rest) => {
            let inner = rest
                .strip_suffix('"')
                .ok_or_else(|| format!("unterminated quoted path {s:?}"))?;
            Ok(inner.replace("\"\"", "\""))
        }
    }
}

fn rows<'a, R: BufRead + 'a>(
    input: R,
    name: &'a str,
    paths: &'a HashMap<u64, String>,
) -> impl Iterator<Item = Result<(u64, Row), ImportError>> + 'a {
    data_lines(input, name, EVENTS_HEADER).map(move |item| {
        let (line, text) = item?;
        parse_row(&text, paths)
            .map(|r| (line, r))
            .map_err(|message| ImportError {
                input: name.to_string(),
                line,
                message,
            })
    })
}

fn parse_row(text: &str, paths: &HashMap<u64, String>) -> Result<Row, String> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    let [time, op, id, offset, len] = fields[..] else {
        return Err(format!(
            "expected 5 fields ({EVENTS_HEADER}), found {}",
            fields.len()
        ));
    };
    let int = |what: &str, s: &str| -> Result<i64, String> {
        s.parse()
            .map_err(|_| format!("{what} {s:?} is not an integer"))
    };
    let time_ns = time
        .parse()
        .map_err(|_| format!("time_ns {time:?} is not a non-negative integer"))?;
    let op = Op::parse(op).ok_or_else(|| {
        format!(
            "unknown op {op:?} (open, write, fdatasync, fsync, sfr, trunc, falloc, close, \
             unlink, rename, mmap, mmapw)"
        )
    })?;
    let id = id
        .parse()
        .map_err(|_| format!("file_id {id:?} is not a non-negative integer"))?;
    if !paths.contains_key(&id) {
        return Err(format!("file_id {id} is not in the file table"));
    }
    let row = Row {
        time_ns,
        op,
        id,
        offset: int("offset", offset)?,
        len: int("len", len)?,
    };
    let non_negative = |what: &str, v: i64| {
        if v < 0 {
            Err(format!("{what} {v} is negative"))
        } else {
            Ok(())
        }
    };
    match op {
        Op::Write => non_negative("offset", row.offset)?,
        Op::Open | Op::Trunc => non_negative("len", row.len)?,
        Op::Falloc => {
            non_negative("offset", row.offset)?;
            non_negative("len", row.len)?;
        }
        Op::Rename if row.offset < 0 || !paths.contains_key(&(row.offset as u64)) => {
            return Err(format!(
                "rename's destination file_id {} (the offset field) is not in the file table",
                row.offset
            ));
        }
        _ => {}
    }
    Ok(row)
}

/// The lines after which a checkpoint begins and commits, in order.
#[derive(Debug, Default)]
struct CheckpointPlan {
    marks: Vec<(u64, u64)>,
}

fn checkpoint_plan(
    rule: &CheckpointRule,
    paths: &HashMap<u64, String>,
    rows: impl Iterator<Item = Result<(u64, Row), ImportError>>,
) -> Result<CheckpointPlan, ImportError> {
    let mut marks: Vec<(u64, u64)> = Vec::new();
    // Turtle: the first data-file sync since the last commit, if any.
    let mut open_begin: Option<u64> = None;
    let mut last_sync_ns: Option<u64> = None;
    for row in rows {
        let (line, row) = row?;
        match rule {
            CheckpointRule::None => {}
            CheckpointRule::Gap { quiet_ns } => {
                if row.is_data_sync(paths) {
                    let quiet = last_sync_ns.is_none_or(|t| row.time_ns >= t + quiet_ns);
                    match marks.last_mut() {
                        Some(last) if !quiet => last.1 = line,
                        _ => marks.push((line, line)),
                    }
                    last_sync_ns = Some(row.time_ns);
                }
            }
            CheckpointRule::Turtle => {
                if row.is_data_sync(paths) && open_begin.is_none() {
                    open_begin = Some(line);
                }
                if row.op == Op::Rename && row.destination_is_turtle(paths) {
                    if let Some(begin) = open_begin.take() {
                        marks.push((begin, line));
                    }
                }
            }
        }
    }
    Ok(CheckpointPlan { marks })
}

impl Row {
    fn is_data_sync(&self, paths: &HashMap<u64, String>) -> bool {
        matches!(self.op, Op::Fdatasync | Op::Fsync) && is_tree_file(&paths[&self.id])
    }
    fn destination_is_turtle(&self, paths: &HashMap<u64, String>) -> bool {
        let dst = &paths[&(self.offset as u64)];
        dst.rsplit('/').next() == Some(super::TURTLE)
    }
}

struct FileState {
    kind: FileKind,
    size: u64,
    removed: bool,
}

/// The second pass: file identity across opens, renames and removals, and the events.
struct Converter<'a, F: FnMut(Event)> {
    classifier: &'a FileClassifier,
    paths: &'a HashMap<u64, String>,
    plan: std::vec::IntoIter<(u64, u64)>,
    next_mark: Option<(u64, u64)>,
    checkpoint_open: Option<u64>,
    out: F,
    summary: ImportSummary,
    files: Vec<FileState>,
    at_path: HashMap<String, FileId>,
    descriptors: HashMap<u64, FileId>,
    clock: Clock,
}

impl<'a, F: FnMut(Event)> Converter<'a, F> {
    fn new(
        classifier: &'a FileClassifier,
        paths: &'a HashMap<u64, String>,
        plan: CheckpointPlan,
        out: F,
    ) -> Self {
        let mut plan = plan.marks.into_iter();
        let next_mark = plan.next();
        Converter {
            classifier,
            paths,
            plan,
            next_mark,
            checkpoint_open: None,
            out,
            summary: ImportSummary::default(),
            files: Vec::new(),
            at_path: HashMap::new(),
            descriptors: HashMap::new(),
            clock: Clock::default(),
        }
    }

    fn emit(&mut self, e: Event) {
        self.summary.events += 1;
        (self.out)(e);
    }

    fn row(&mut self, line: u64, row: Row) {
        self.summary.lines += 1;
        let t = self.clock.stamp(row.time_ns, &mut self.summary);
        if let Some((begin, _)) = self.next_mark.filter(|m| m.0 == line) {
            let id = self.summary.checkpoints + 1;
            self.emit(Event::CheckpointBegin { time_ns: t, id });
            self.checkpoint_open = Some(id);
            debug_assert_eq!(begin, line);
        }
        self.apply(t, row);
        if let Some((_, commit)) = self.next_mark.filter(|m| m.1 == line) {
            let id = self
                .checkpoint_open
                .take()
                .expect("a commit follows its begin");
            self.emit(Event::CheckpointCommit { time_ns: t, id });
            self.summary.checkpoints += 1;
            debug_assert_eq!(commit, line);
            self.next_mark = self.plan.next();
        }
    }

    fn apply(&mut self, t: u64, row: Row) {
        let path = &self.paths[&row.id];
        if path == "." {
            return; // the directory: its syncs order renames, they are not file events
        }
        match row.op {
            Op::Open => {
                let f = self.file_at(t, row.id, row.len as u64);
                self.descriptors.insert(row.id, f);
                if row.offset & O_TRUNC != 0 {
                    self.truncate(t, f, 0);
                }
            }
            Op::Write => {
                if row.len < 0 {
                    self.summary.failed_writes += 1;
                    return;
                }
                let f = self.descriptor(t, row.id);
                if self.files[f as usize].removed {
                    self.summary.writes_to_removed += 1;
                    return;
                }
                let (offset, len) = (row.offset as u64, row.len as u64);
                let state = &mut self.files[f as usize];
                state.size = state.size.max(offset + len);
                let kind = state.kind;
                emit_write(&mut self.out, &mut self.summary, t, f, kind, offset, len);
            }
            Op::Trunc => {
                let f = self.descriptor(t, row.id);
                self.truncate(t, f, row.len as u64);
            }
            Op::Falloc => self.summary.fallocates += 1,
            Op::Close => {
                self.descriptors.remove(&row.id);
            }
            Op::Unlink => {
                if let Some(f) = self.at_path.remove(path.as_str()) {
                    self.remove(t, f);
                }
            }
            Op::Rename => self.rename(t, row.id, row.offset as u64),
            Op::Mmap => self.summary.mmaps += 1,
            Op::Fdatasync | Op::Fsync | Op::SyncFileRange => {}
        }
    }

    /// The file now at `id`'s path, created (with `size` bytes already in it) if none is.
    fn file_at(&mut self, t: u64, id: u64, size: u64) -> FileId {
        let path = &self.paths[&id];
        if let Some(&f) = self.at_path.get(path.as_str()) {
            return f;
        }
        let f = self.files.len() as FileId;
        let kind = self.classifier.classify(path);
        self.files.push(FileState {
            kind,
            size,
            removed: false,
        });
        self.at_path.insert(path.clone(), f);
        self.summary.files += 1;
        self.emit(Event::FileCreate {
            time_ns: t,
            file: f,
            kind,
            name: path.clone(),
        });
        f
    }

    /// The file a descriptor opened; a descriptor the trace never opened was open before it
    /// began, and names the file at its path.
    fn descriptor(&mut self, t: u64, id: u64) -> FileId {
        if let Some(&f) = self.descriptors.get(&id) {
            return f;
        }
        self.summary.implicit_opens += 1;
        let f = self.file_at(t, id, 0);
        self.descriptors.insert(id, f);
        f
    }

    fn truncate(&mut self, t: u64, f: FileId, len: u64) {
        let state = &mut self.files[f as usize];
        if state.removed {
            return;
        }
        let shrinks = len < state.size;
        state.size = len;
        if shrinks {
            self.summary.truncates += 1;
            self.emit(Event::FileTruncate {
                time_ns: t,
                file: f,
                len,
            });
        }
    }

    fn remove(&mut self, t: u64, f: FileId) {
        self.files[f as usize].removed = true;
        self.summary.removes += 1;
        self.emit(Event::FileRemove {
            time_ns: t,
            file: f,
        });
    }

    fn rename(&mut self, t: u64, from: u64, to: u64) {
        let (src, dst) = (&self.paths[&from], &self.paths[&to]);
        let moved = self.at_path.remove(src.as_str());
        let replaced = match moved {
            Some(f) => self.at_path.insert(dst.clone(), f),
            // A file the trace never saw: whatever was at the destination is gone.
            None => self.at_path.remove(dst.as_str()),
        };
        if let Some(old) = replaced.filter(|&old| Some(old) != moved) {
            self.remove(t, old);
        }
        if let Some(f) = moved {
            self.summary.renames += 1;
            let name = dst.clone();
            self.emit(Event::FileRename {
                time_ns: t,
                file: f,
                name,
            });
        }
    }
}
