//! What the shim knows about the process's files, and the events it makes of their calls.
//!
//! The interposers (`interpose.rs`) gather the facts of each call — an opened descriptor's
//! inode and path, a rename's source and destination inodes — and hand them here; everything
//! from there on (file identity, kinds, checkpoints, the online policy, the trace) is this
//! module's pure logic, unit-tested without a single interposed call.
//!
//! - **A file is an inode** (device, inode number) under the database directory: every
//!   descriptor of it, a rename's new name and a reopen after `close` are the same
//!   [`FileId`]. Its first sight (open) is a `FileCreate` with its path relative to the
//!   directory and its kind; a rename is a `FileRename` (the kind stays); removing its last
//!   name is a `FileRemove`, after which the inode number may come back as a new file.
//! - **Events go in order** to the online policy (`observe`; writes go through `place`) and to
//!   the trace, under the one lock the caller holds.

use crate::checkpoint::{is_tree_file, CheckpointDetector};
use crate::config::Config;
use crate::hint::HintSlot;
use placement::classify::FileClassifier;
use placement::trace::{encode, MAGIC};
use placement::{Event, FileId, FileKind, PageKind, Policy, WriteCause, WriteEvent};
use std::collections::HashMap;
use std::sync::Arc;

/// An inode: (device, inode number).
pub type Inode = (u64, u64);

/// Where encoded events go. The shim's sink writes with raw system calls (`sys::RawFile`), so
/// it never sees its own writes; the tests collect in memory.
pub trait Sink: Send {
    /// Appends whole records; returns false once the sink failed (the trace stops there).
    fn append(&mut self, bytes: &[u8]) -> bool;
}

impl Sink for Vec<u8> {
    fn append(&mut self, bytes: &[u8]) -> bool {
        self.extend_from_slice(bytes);
        true
    }
}

/// Encoded events are buffered up to this many bytes before a write to the sink.
const TRACE_BUFFER: usize = 1 << 20;

struct Trace {
    sink: Box<dyn Sink>,
    buf: Vec<u8>,
    /// After [`Recorder::flush_for_exit`]: every event is written at once.
    unbuffered: bool,
    failed: bool,
}

struct FileState {
    kind: FileKind,
    rel: String,
    inode: Inode,
    removed: bool,
    slot: Arc<HintSlot>,
}

/// Counters for the shim's own report (printed at exit when tracing).
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    pub files: u64,
    pub writes: u64,
    pub bytes: u64,
    pub checkpoints: u64,
    /// Writes to a file after its last name was removed (not traced: the replay has no file).
    pub writes_after_remove: u64,
}

pub struct Recorder {
    kinds: FileClassifier,
    detector: CheckpointDetector,
    policy: Option<Box<dyn Policy>>,
    trace: Option<Trace>,
    fds: HashMap<i32, FileId>,
    inodes: HashMap<Inode, FileId>,
    files: Vec<FileState>,
    scratch: Vec<Event>,
    pub stats: Stats,
}

impl Recorder {
    /// `sink`: where the trace goes (None: no trace). The trace header is written at once.
    pub fn new(cfg: &Config, sink: Option<Box<dyn Sink>>) -> Result<Self, String> {
        let policy = match &cfg.policy {
            Some((name, pc)) => Some(placement::make_policy(name, pc)?),
            None => None,
        };
        let mut rec = Recorder {
            kinds: cfg.kinds.clone(),
            detector: CheckpointDetector::new(cfg.checkpoint.clone()),
            policy,
            trace: sink.map(|sink| Trace {
                sink,
                buf: Vec::with_capacity(TRACE_BUFFER),
                unbuffered: false,
                failed: false,
            }),
            fds: HashMap::new(),
            inodes: HashMap::new(),
            files: Vec::new(),
            scratch: Vec::new(),
            stats: Stats::default(),
        };
        if let Some(t) = &mut rec.trace {
            t.buf.extend_from_slice(MAGIC);
        }
        rec.flush();
        Ok(rec)
    }

    pub fn has_policy(&self) -> bool {
        self.policy.is_some()
    }

    /// Whether the trace stopped on a write error.
    pub fn trace_failed(&self) -> bool {
        self.trace.as_ref().is_some_and(|t| t.failed)
    }

    /// A descriptor was opened. `file`: its inode and path relative to the database directory,
    /// or None when it is not a regular file there (then the descriptor is not followed).
    pub fn opened(&mut self, fd: i32, file: Option<(Inode, String)>, truncated: bool, now: u64) {
        let Some((inode, rel)) = file else {
            self.fds.remove(&fd);
            return;
        };
        let id = match self.inodes.get(&inode) {
            Some(&id) => {
                if truncated {
                    self.emit(Event::FileTruncate {
                        time_ns: now,
                        file: id,
                        len: 0,
                    });
                }
                id
            }
            None => {
                let id = FileId::try_from(self.files.len()).expect("fewer than 2^32 files");
                let kind = self.kinds.classify(&rel);
                self.files.push(FileState {
                    kind,
                    rel: rel.clone(),
                    inode,
                    removed: false,
                    slot: Arc::default(),
                });
                self.inodes.insert(inode, id);
                self.stats.files += 1;
                self.emit(Event::FileCreate {
                    time_ns: now,
                    file: id,
                    kind,
                    name: rel,
                });
                id
            }
        };
        self.fds.insert(fd, id);
    }

    pub fn duped(&mut self, old: i32, new: i32) {
        match self.fds.get(&old).copied() {
            Some(id) => self.fds.insert(new, id),
            None => self.fds.remove(&new),
        };
    }

    pub fn closed(&mut self, fd: i32) {
        self.fds.remove(&fd);
    }

    /// The followed file behind a descriptor.
    pub fn file_of(&self, fd: i32) -> Option<FileId> {
        self.fds.get(&fd).copied()
    }

    /// Asks the online policy for the stream of a write about to be issued; returns it with
    /// the file's hint slot (None without a policy, or for a removed file).
    pub fn place(&mut self, file: FileId, offset: u64, len: u64) -> Option<(u8, Arc<HintSlot>)> {
        let f = &self.files[file as usize];
        if f.removed {
            return None;
        }
        let w = write_event(file, f.kind, offset, len.min(u32::MAX as u64) as u32, 0, 0);
        let slot = f.slot.clone();
        let stream = self.policy.as_mut()?.place(&w);
        Some((stream, slot))
    }

    /// A write of `len` bytes at `offset` completed, on `stream` (0 without a policy).
    pub fn wrote(&mut self, file: FileId, offset: u64, len: u64, stream: u8, now: u64) {
        let f = &self.files[file as usize];
        if f.removed {
            self.stats.writes_after_remove += 1;
            return;
        }
        let kind = f.kind;
        self.stats.writes += 1;
        self.stats.bytes += len;
        // A write longer than a trace record's u32 length is recorded in pieces.
        let (mut at, mut left) = (offset, len);
        while left > 0 {
            let piece = left.min(u32::MAX as u64 & !4095);
            self.push(&Event::Write(write_event(
                file,
                kind,
                at,
                piece as u32,
                stream,
                now,
            )));
            at += piece;
            left -= piece;
        }
    }

    /// A successful fsync/fdatasync.
    pub fn synced(&mut self, file: FileId, now: u64) {
        let f = &self.files[file as usize];
        if f.removed || !is_tree_file(&f.rel) {
            return;
        }
        let mut out = std::mem::take(&mut self.scratch);
        self.detector.on_sync(now, &mut out);
        self.emit_all(&mut out);
        self.scratch = out;
    }

    /// A successful rename. `source`/`replaced`: the inodes at the old and new path before the
    /// call; `dest_rel`: the new path relative to the database directory (None: outside it).
    pub fn renamed(
        &mut self,
        source: Option<Inode>,
        replaced: Option<Inode>,
        dest_rel: Option<String>,
        now: u64,
    ) {
        if let Some(r) = replaced.filter(|r| Some(*r) != source) {
            self.removed(r, now);
        }
        let dest_base = dest_rel
            .as_deref()
            .map(|d| d.rsplit('/').next().unwrap_or(d).to_string());
        if let Some(&id) = source.and_then(|s| self.inodes.get(&s)) {
            match dest_rel {
                Some(rel) => {
                    self.files[id as usize].rel = rel.clone();
                    self.emit(Event::FileRename {
                        time_ns: now,
                        file: id,
                        name: rel,
                    });
                }
                // Moved out of the database directory: gone from the database's view.
                None => self.removed(source.expect("looked up"), now),
            }
        }
        if let Some(base) = dest_base {
            let mut out = std::mem::take(&mut self.scratch);
            self.detector.on_rename(now, &base, &mut out);
            self.emit_all(&mut out);
            self.scratch = out;
        }
    }

    /// A name of `inode` was removed; `last` when it had one link (its data is now garbage).
    pub fn unlinked(&mut self, inode: Inode, last: bool, now: u64) {
        if last {
            self.removed(inode, now);
        }
    }

    pub fn truncated(&mut self, file: FileId, len: u64, now: u64) {
        if !self.files[file as usize].removed {
            self.emit(Event::FileTruncate {
                time_ns: now,
                file,
                len,
            });
        }
    }

    /// `fallocate(FALLOC_FL_PUNCH_HOLE)`: the range's space went back to the filesystem.
    pub fn punched(&mut self, file: FileId, offset: u64, len: u64, now: u64) {
        if !self.files[file as usize].removed {
            self.emit(Event::Free {
                time_ns: now,
                file,
                offset,
                len,
            });
        }
    }

    /// The inode whose path is `rel` (tests).
    #[cfg(test)]
    fn id_of(&self, rel: &str) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| !f.removed && f.rel == rel)
            .map(|i| i as FileId)
    }

    /// Writes out buffered events.
    pub fn flush(&mut self) {
        if let Some(t) = &mut self.trace {
            if !t.failed && !t.buf.is_empty() && !t.sink.append(&t.buf) {
                t.failed = true;
            }
            t.buf.clear();
        }
    }

    /// The process is exiting: flush, and write every later event at once (other threads may
    /// still be writing, and nothing flushes after this).
    pub fn flush_for_exit(&mut self) {
        self.flush();
        if let Some(t) = &mut self.trace {
            t.unbuffered = true;
        }
    }

    fn removed(&mut self, inode: Inode, now: u64) {
        let Some(id) = self.inodes.remove(&inode) else {
            return;
        };
        let f = &mut self.files[id as usize];
        debug_assert_eq!(f.inode, inode);
        f.removed = true;
        self.emit(Event::FileRemove {
            time_ns: now,
            file: id,
        });
    }

    fn emit_all(&mut self, events: &mut Vec<Event>) {
        for ev in events.drain(..) {
            self.emit(ev);
        }
    }

    /// A non-write event: to the policy, then the trace.
    fn emit(&mut self, ev: Event) {
        debug_assert!(!matches!(ev, Event::Write(_)));
        if let Some(p) = &mut self.policy {
            p.observe(&ev);
        }
        let commit = matches!(ev, Event::CheckpointCommit { .. });
        if commit {
            self.stats.checkpoints += 1;
        }
        self.push(&ev);
        if commit {
            // A checkpoint a second is cheap to flush at, and a crash loses less.
            self.flush();
        }
    }

    fn push(&mut self, ev: &Event) {
        let Some(t) = &mut self.trace else {
            return;
        };
        encode(ev, &mut t.buf);
        if t.unbuffered || t.buf.len() >= TRACE_BUFFER {
            self.flush();
        }
    }
}

fn write_event(
    file: FileId,
    kind: FileKind,
    offset: u64,
    len: u32,
    stream: u8,
    now: u64,
) -> WriteEvent {
    WriteEvent {
        time_ns: now,
        file,
        file_kind: kind,
        // Not known from outside the engine: no table ids, page kinds, page ids or causes.
        table: 0,
        page_kind: if kind == FileKind::Journal {
            PageKind::Log
        } else {
            PageKind::Leaf
        },
        offset,
        len,
        id_index: false,
        stream,
        page_id: 0,
        cause: WriteCause::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::trace::TraceReader;
    use std::sync::Mutex;

    /// A sink the test can read after the recorder took it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Sink for Shared {
        fn append(&mut self, bytes: &[u8]) -> bool {
            self.0.lock().unwrap().extend_from_slice(bytes);
            true
        }
    }
    impl Shared {
        fn events(&self) -> Vec<Event> {
            let bytes = self.0.lock().unwrap().clone();
            TraceReader::new(&bytes[..])
                .unwrap()
                .collect::<std::io::Result<_>>()
                .unwrap()
        }
    }

    fn config(extra: &[(&str, &str)]) -> Config {
        let vars = [("DIR", "/db"), ("TRACE", "/t")]
            .iter()
            .chain(extra)
            .map(|(k, v)| (format!("FLASHDOC_SHIM_{k}"), v.to_string()));
        Config::from_vars(vars).unwrap().unwrap()
    }

    fn recorder(extra: &[(&str, &str)]) -> (Recorder, Shared) {
        let sink = Shared::default();
        let rec = Recorder::new(&config(extra), Some(Box::new(sink.clone()))).unwrap();
        (rec, sink)
    }

    #[test]
    fn files_are_inodes_across_descriptors_renames_and_removal() {
        let (mut r, sink) = recorder(&[]);
        let coll = ((1, 10), "collection-0-1.wt".to_string());
        r.opened(5, Some(coll.clone()), false, 1);
        r.duped(5, 9);
        r.opened(6, Some(coll.clone()), false, 2); // a second descriptor: same file
        r.opened(7, None, false, 2); // not followed
        assert_eq!(r.file_of(5), Some(0));
        assert_eq!(r.file_of(9), Some(0));
        assert_eq!(r.file_of(6), Some(0));
        assert_eq!(r.file_of(7), None);
        r.wrote(0, 4096, 8192, 0, 3);
        r.closed(5);
        assert_eq!(r.file_of(5), None);
        // A temporary file renamed onto it: the old inode's data is garbage.
        r.opened(8, Some(((1, 11), "collection-0-1.wt.tmp".into())), false, 4);
        r.renamed(
            Some((1, 11)),
            Some((1, 10)),
            Some("collection-0-1.wt".into()),
            5,
        );
        assert_eq!(r.id_of("collection-0-1.wt"), Some(1));
        // The old inode number comes back as a new file.
        r.opened(4, Some(((1, 10), "index-0-2.wt".into())), false, 6);
        r.unlinked((1, 11), false, 7); // another link remains: nothing
        r.unlinked((1, 11), true, 8);
        r.wrote(1, 0, 10, 0, 9); // after removal: counted, not traced
        r.truncated(2, 0, 10);
        r.flush();
        assert_eq!(r.stats.writes_after_remove, 1);
        let ev = sink.events();
        let expect = vec![
            Event::FileCreate {
                time_ns: 1,
                file: 0,
                kind: FileKind::Collection,
                name: coll.1,
            },
            Event::Write(write_event(0, FileKind::Collection, 4096, 8192, 0, 3)),
            Event::FileCreate {
                time_ns: 4,
                file: 1,
                kind: FileKind::Metadata,
                name: "collection-0-1.wt.tmp".into(),
            },
            Event::FileRemove {
                time_ns: 5,
                file: 0,
            },
            Event::FileRename {
                time_ns: 5,
                file: 1,
                name: "collection-0-1.wt".into(),
            },
            Event::FileCreate {
                time_ns: 6,
                file: 2,
                kind: FileKind::Index,
                name: "index-0-2.wt".into(),
            },
            Event::FileRemove {
                time_ns: 8,
                file: 1,
            },
            Event::FileTruncate {
                time_ns: 10,
                file: 2,
                len: 0,
            },
        ];
        assert_eq!(ev, expect);
    }

    #[test]
    fn reopen_with_truncate_and_moves_out_of_the_directory() {
        let (mut r, sink) = recorder(&[]);
        r.opened(
            3,
            Some(((1, 1), "WiredTigerLog.0000000001".into())),
            false,
            1,
        );
        r.opened(
            4,
            Some(((1, 1), "WiredTigerLog.0000000001".into())),
            true,
            2,
        );
        r.renamed(Some((1, 1)), None, None, 3);
        r.punched(0, 0, 4096, 4); // removed: nothing
        r.flush();
        let ev = sink.events();
        assert_eq!(
            ev[1],
            Event::FileTruncate {
                time_ns: 2,
                file: 0,
                len: 0
            }
        );
        assert_eq!(
            ev[2],
            Event::FileRemove {
                time_ns: 3,
                file: 0
            }
        );
        assert_eq!(ev.len(), 3);
    }

    #[test]
    fn checkpoints_from_syncs_and_the_turtle_rename() {
        let (mut r, sink) = recorder(&[("KINDS", "collection=docs.wt")]);
        r.opened(3, Some(((1, 1), "docs.wt".into())), false, 0);
        r.opened(4, Some(((1, 2), "WiredTiger.wt".into())), false, 0);
        r.opened(5, Some(((1, 3), "WiredTiger.turtle.set".into())), false, 0);
        r.synced(1, 1); // the metadata file: not a checkpointed file
        r.renamed(Some((1, 3)), None, Some("WiredTiger.turtle".into()), 2); // creation
        r.synced(0, 3);
        r.synced(0, 4);
        r.synced(1, 5);
        r.opened(5, Some(((1, 4), "WiredTiger.turtle.set".into())), false, 6);
        r.renamed(
            Some((1, 4)),
            Some((1, 3)),
            Some("WiredTiger.turtle".into()),
            7,
        );
        assert_eq!(r.stats.checkpoints, 1);
        // Flushed at the commit without an explicit flush.
        let ckpt: Vec<Event> = sink
            .events()
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::CheckpointBegin { .. } | Event::CheckpointCommit { .. }
                )
            })
            .collect();
        assert_eq!(
            ckpt,
            vec![
                Event::CheckpointBegin { time_ns: 3, id: 1 },
                Event::CheckpointCommit { time_ns: 7, id: 1 }
            ]
        );
    }

    #[test]
    fn the_policy_places_and_sees_every_event() {
        let (mut r, sink) = recorder(&[
            ("POLICY", "file"),
            (
                "KINDS",
                "collection=docs.wt;index=docs_idx.wt;journal=WiredTigerLog.*",
            ),
        ]);
        assert!(r.has_policy());
        r.opened(3, Some(((1, 1), "docs.wt".into())), false, 0);
        r.opened(4, Some(((1, 2), "docs_idx.wt".into())), false, 0);
        r.opened(5, Some(((1, 3), "WiredTigerLog.1".into())), false, 0);
        r.opened(6, Some(((1, 4), "WiredTiger.wt".into())), false, 0);
        let streams: Vec<u8> = (0..4).map(|f| r.place(f, 0, 4096).unwrap().0).collect();
        assert_eq!(streams, vec![2, 3, 1, 0]); // file policy: collection, index, journal, metadata
        let (s, _) = r.place(0, 0, 4096).unwrap();
        r.wrote(0, 0, 4096, s, 1);
        r.flush();
        let Some(Event::Write(w)) = sink.events().pop() else {
            panic!()
        };
        assert_eq!(w.stream, 2);
        // Without a policy there is nothing to place.
        let (mut plain, _) = recorder(&[]);
        plain.opened(3, Some(((1, 1), "docs.wt".into())), false, 0);
        assert!(plain.place(0, 0, 4096).is_none());
    }

    #[test]
    fn huge_writes_are_split_and_a_failed_sink_stops_the_trace() {
        let (mut r, sink) = recorder(&[]);
        r.opened(3, Some(((1, 1), "a".into())), false, 0);
        r.wrote(0, 0, 5 << 30, 0, 1);
        r.flush();
        let lens: u64 = sink
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Write(w) => Some(w.len as u64),
                _ => None,
            })
            .sum();
        assert_eq!(lens, 5 << 30);
        struct Broken;
        impl Sink for Broken {
            fn append(&mut self, _: &[u8]) -> bool {
                false
            }
        }
        let r = Recorder::new(&config(&[]), Some(Box::new(Broken))).unwrap();
        assert!(r.trace_failed());
    }
}
