//! Event types. Times are nanoseconds on the reporting engine's monotonic clock (zero at open).

/// A file as the engine numbers it: unique for the life of one engine instance's trace.
pub type FileId = u32;

/// What a file holds; placement policies key on this (seed 003 Table 3, seed 000 Table 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    Collection = 0,
    Index = 1,
    Journal = 2,
    Metadata = 3,
}

impl FileKind {
    pub const ALL: [FileKind; 4] = [
        FileKind::Collection,
        FileKind::Index,
        FileKind::Journal,
        FileKind::Metadata,
    ];
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Collection => "collection",
            FileKind::Index => "index",
            FileKind::Journal => "journal",
            FileKind::Metadata => "metadata",
        }
    }
    pub fn from_u8(v: u8) -> Option<FileKind> {
        FileKind::ALL.get(v as usize).copied()
    }
}

/// What a written block holds (seed 002 Table 2, seed 003 Table 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PageKind {
    Root = 0,
    Internal = 1,
    Leaf = 2,
    Overflow = 3,
    ExtentList = 4,
    /// Journal records.
    Log = 5,
    /// File descriptor blocks and the metadata (turtle) file.
    Descriptor = 6,
}

impl PageKind {
    pub const ALL: [PageKind; 7] = [
        PageKind::Root,
        PageKind::Internal,
        PageKind::Leaf,
        PageKind::Overflow,
        PageKind::ExtentList,
        PageKind::Log,
        PageKind::Descriptor,
    ];
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Root => "root",
            PageKind::Internal => "internal",
            PageKind::Leaf => "leaf",
            PageKind::Overflow => "overflow",
            PageKind::ExtentList => "extent-list",
            PageKind::Log => "log",
            PageKind::Descriptor => "descriptor",
        }
    }
    pub fn from_u8(v: u8) -> Option<PageKind> {
        PageKind::ALL.get(v as usize).copied()
    }
}

/// Why the engine wrote a tree page: what it knows at write time about the page's future.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WriteCause {
    /// Not a tree page write (journal, metadata, descriptors), or not said.
    #[default]
    Other,
    /// Eviction: the page leaves the cache (it was the least recently used).
    Eviction,
    /// A checkpoint: the page stays in the cache, clean.
    Checkpoint,
    /// The writer reconciled a page that grew past its in-memory maximum (a hot page).
    Split,
}

impl WriteCause {
    pub const ALL: [WriteCause; 4] = [
        WriteCause::Other,
        WriteCause::Eviction,
        WriteCause::Checkpoint,
        WriteCause::Split,
    ];
    pub fn name(self) -> &'static str {
        match self {
            WriteCause::Other => "other",
            WriteCause::Eviction => "eviction",
            WriteCause::Checkpoint => "checkpoint",
            WriteCause::Split => "split",
        }
    }
    pub fn from_u8(v: u8) -> Option<WriteCause> {
        WriteCause::ALL.get(v as usize).copied()
    }
}

/// One physical write, as issued (a `pwrite` of `len` bytes at `offset` of `file`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteEvent {
    pub time_ns: u64,
    pub file: FileId,
    pub file_kind: FileKind,
    /// The engine's table id (0 for files that are not tables: journal, metadata).
    pub table: u32,
    pub page_kind: PageKind,
    pub offset: u64,
    pub len: u32,
    /// For analysis only: the table is a collection's `_id` (primary) index.
    pub id_index: bool,
    /// The stream the write was issued on (0 = default stream).
    pub stream: u8,
    /// The logical page written, stable across its copy-on-write moves (0: not a tree page,
    /// or unknown). Lets a policy see one page's successive writes at different offsets.
    pub page_id: u64,
    /// Why the engine wrote it.
    pub cause: WriteCause,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    FileCreate {
        time_ns: u64,
        file: FileId,
        kind: FileKind,
        name: String,
    },
    /// The file was renamed (the metadata file is committed by a rename).
    FileRename {
        time_ns: u64,
        file: FileId,
        name: String,
    },
    FileRemove {
        time_ns: u64,
        file: FileId,
    },
    /// The file was cut to `len` bytes; the space past it is returned to the filesystem.
    FileTruncate {
        time_ns: u64,
        file: FileId,
        len: u64,
    },
    Write(WriteEvent),
    /// A read that reached the file (for the engine: a block its cache did not hold). Reads
    /// change nothing on the device but its time: they share its dies with writes and GC.
    Read {
        time_ns: u64,
        file: FileId,
        offset: u64,
        len: u32,
    },
    /// An extent that no durable checkpoint can reach any more. The engine may reuse it at once;
    /// a consumer that batches TRIMs must cancel a pending trim that a later `Write` overlaps.
    Free {
        time_ns: u64,
        file: FileId,
        offset: u64,
        len: u64,
    },
    CheckpointBegin {
        time_ns: u64,
        id: u64,
    },
    /// The checkpoint is durable (its metadata rename and directory sync are done).
    CheckpointCommit {
        time_ns: u64,
        id: u64,
    },
}

impl Event {
    pub fn set_time_ns(&mut self, t: u64) {
        match self {
            Event::FileCreate { time_ns, .. }
            | Event::FileRename { time_ns, .. }
            | Event::FileRemove { time_ns, .. }
            | Event::FileTruncate { time_ns, .. }
            | Event::Read { time_ns, .. }
            | Event::Free { time_ns, .. }
            | Event::CheckpointBegin { time_ns, .. }
            | Event::CheckpointCommit { time_ns, .. } => *time_ns = t,
            Event::Write(w) => w.time_ns = t,
        }
    }

    pub fn time_ns(&self) -> u64 {
        match self {
            Event::FileCreate { time_ns, .. }
            | Event::FileRename { time_ns, .. }
            | Event::FileRemove { time_ns, .. }
            | Event::FileTruncate { time_ns, .. }
            | Event::Read { time_ns, .. }
            | Event::Free { time_ns, .. }
            | Event::CheckpointBegin { time_ns, .. }
            | Event::CheckpointCommit { time_ns, .. } => *time_ns,
            Event::Write(w) => w.time_ns,
        }
    }
}
