//! Converting traces captured outside flashdoc's engine into its event format, so that
//! `placement replay` and the lab can replay them: a CSV of file-level calls with a file table
//! ([`csv`]), and `blkparse` text ([`blkparse`]). The LD_PRELOAD shim records the event format
//! directly and needs no import.
//!
//! What such traces cannot say, and what the events then carry:
//! - no `Free` events: a copy-on-write engine's freed blocks are invisible from outside, so the
//!   device learns of a dead block only when its LBA is written again (or from a discard in a
//!   block trace);
//! - no page ids, tables or write causes: every table write is a `Leaf` write with `page_id` 0
//!   and `table` = the file's id, so policies that need page ids (`lifetime`) fall back to their
//!   file rules;
//! - checkpoints only as a rule finds them ([`CheckpointRule`]).
//!
//! Bad input is an error naming its line (1-based, the header included).

pub mod blkparse;
pub mod csv;

use crate::event::{Event, FileId, FileKind, PageKind, WriteCause, WriteEvent};
use std::fmt;
use std::io::BufRead;

/// A bad line, or an I/O error reading the input.
#[derive(Debug)]
pub struct ImportError {
    /// The input the line is in (a file name, as the caller gave it).
    pub input: String,
    /// 1-based; 0 when the error is not on one line.
    pub line: u64,
    pub message: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.input, self.message)
        } else {
            write!(f, "{} line {}: {}", self.input, self.line, self.message)
        }
    }
}

impl std::error::Error for ImportError {}

/// What an import read and wrote, and what it had to leave out (printed by the CLI, so that
/// nothing is dropped silently).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub lines: u64,
    pub events: u64,
    pub files: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub checkpoints: u64,
    pub removes: u64,
    pub renames: u64,
    pub truncates: u64,
    /// Discards of a block trace, written as `Free` events.
    pub discards: u64,
    /// Writes that failed (a negative length): not written to the device.
    pub failed_writes: u64,
    /// Writes through a descriptor the trace never opened: the file is created at its first
    /// write (the trace began with it open).
    pub implicit_opens: u64,
    /// Writes through a descriptor whose file was removed: the bytes go to an inode that no
    /// path names and the trace cannot place; left out.
    pub writes_to_removed: u64,
    /// `mmap` calls: writes through a mapping are invisible to the trace.
    pub mmaps: u64,
    /// `fallocate` calls: space reserved but not written; nothing reaches the device.
    pub fallocates: u64,
    /// Lines stamped earlier than the line before (threads that take the time before they
    /// serialize): kept in file order, at the earlier line's time.
    pub reordered_times: u64,
}

/// How checkpoints are found in a trace that does not mark them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointRule {
    /// A checkpoint begins at the first `fdatasync`/`fsync` of a tree file ([`is_tree_file`])
    /// after at least `quiet_ns` with none, and commits at the last such sync before the
    /// next quiet gap. WiredTiger syncs its data files only in a checkpoint (the journal
    /// carries durability between them), so a burst of data-file syncs is one checkpoint.
    Gap {
        quiet_ns: u64,
    },
    /// WiredTiger's own commit point, exact: the rename of `WiredTiger.turtle.set` onto
    /// `WiredTiger.turtle` commits a checkpoint, which began at the first tree-file sync after
    /// the previous commit. A turtle rename with no such sync before it (WiredTiger rewrites
    /// the turtle when it creates a database and when it closes) is not a checkpoint, so the
    /// count equals WiredTiger's own statistic.
    Turtle,
    None,
}

impl CheckpointRule {
    /// `gap` (2 s, the rule), `gap:SECONDS`, `turtle` or `none`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let quiet = |secs: &str| -> Result<Self, String> {
            let v: f64 = secs
                .trim_end_matches('s')
                .parse()
                .map_err(|_| format!("checkpoint rule gap:{secs}: not a number of seconds"))?;
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!(
                    "checkpoint rule gap:{secs}: the gap must be positive"
                ));
            }
            Ok(CheckpointRule::Gap {
                quiet_ns: (v * 1e9) as u64,
            })
        };
        match s {
            "gap" => quiet("2"),
            "turtle" => Ok(CheckpointRule::Turtle),
            "none" => Ok(CheckpointRule::None),
            _ => match s.strip_prefix("gap:") {
                Some(secs) => quiet(secs),
                None => Err(format!(
                    "checkpoint rule {s:?}: expected gap, gap:SECONDS, turtle or none"
                )),
            },
        }
    }
}

/// Trace times rebased to the first line and kept non-decreasing: a line stamped earlier than
/// the one before (threads that take the time before they serialize) stays in file order at
/// the earlier line's time, and is counted.
#[derive(Debug, Default)]
struct Clock {
    first_ns: Option<u64>,
    last_raw_ns: u64,
}

impl Clock {
    fn stamp(&mut self, raw_ns: u64, summary: &mut ImportSummary) -> u64 {
        let first = *self.first_ns.get_or_insert(raw_ns);
        if raw_ns < self.last_raw_ns {
            summary.reordered_times += 1;
        }
        self.last_raw_ns = self.last_raw_ns.max(raw_ns);
        self.last_raw_ns.saturating_sub(first)
    }
}

/// The file a WiredTiger checkpoint commit renames onto.
pub const TURTLE: &str = "WiredTiger.turtle";

/// Is the file at `rel_path` a WiredTiger tree file, whose sync belongs to a checkpoint? Every
/// `*.wt` file but the metadata file `WiredTiger.wt`, which WiredTiger also syncs outside
/// checkpoints (the checkpoint rules' "data file"; the shim uses the same rule).
pub fn is_tree_file(rel_path: &str) -> bool {
    let base = rel_path.rsplit('/').next().unwrap_or(rel_path);
    base.ends_with(".wt") && base != "WiredTiger.wt"
}

fn page_kind_of(kind: FileKind) -> PageKind {
    match kind {
        FileKind::Collection | FileKind::Index => PageKind::Leaf,
        FileKind::Journal => PageKind::Log,
        FileKind::Metadata => PageKind::Descriptor,
    }
}

/// Emits one call's write as `Write` events (one per 4 GiB, the event's length limit).
fn emit_write(
    out: &mut impl FnMut(Event),
    summary: &mut ImportSummary,
    time_ns: u64,
    file: FileId,
    kind: FileKind,
    offset: u64,
    len: u64,
) {
    const MAX_LEN: u64 = 1 << 31;
    summary.writes += 1;
    summary.write_bytes += len;
    let mut done = 0;
    while done < len {
        let part = (len - done).min(MAX_LEN);
        let table = if matches!(kind, FileKind::Collection | FileKind::Index) {
            file
        } else {
            0
        };
        out(Event::Write(WriteEvent {
            time_ns,
            file,
            file_kind: kind,
            table,
            page_kind: page_kind_of(kind),
            offset: offset + done,
            len: part as u32,
            id_index: false,
            stream: 0,
            page_id: 0,
            cause: WriteCause::Other,
        }));
        summary.events += 1;
        done += part;
    }
}

/// The lines of a CSV after its header, numbered from 1 (the header), blank lines skipped.
fn data_lines<'a, R: BufRead + 'a>(
    input: R,
    name: &'a str,
    header: &'static str,
) -> impl Iterator<Item = Result<(u64, String), ImportError>> + 'a {
    let mut lines = input.lines().enumerate();
    let mut header_seen = false;
    std::iter::from_fn(move || loop {
        let (i, line) = lines.next()?;
        let line_no = i as u64 + 1;
        let err = |message: String| ImportError {
            input: name.to_string(),
            line: line_no,
            message,
        };
        let line = match line {
            Ok(l) => l,
            Err(e) => return Some(Err(err(e.to_string()))),
        };
        let text = line.trim();
        if !header_seen {
            header_seen = true;
            if text != header {
                return Some(Err(err(format!(
                    "expected the header {header:?}, found {text:?}"
                ))));
            }
            continue;
        }
        if !text.is_empty() {
            return Some(Ok((line_no, text.to_string())));
        }
    })
}

#[cfg(test)]
mod tests;
