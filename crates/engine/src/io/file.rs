//! A file as the seam knows it: its trace id, what it holds, its path and the open file.

use placement::{FileId, FileKind};
use std::fs::File;
use std::path::{Path, PathBuf};

/// What a file holds, as its events report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRole {
    pub kind: FileKind,
    /// The table a table file belongs to (0 for the journal and the metadata).
    pub table: u32,
    /// The table is a collection's `_id` index.
    pub id_index: bool,
}

impl FileRole {
    pub fn of(kind: FileKind) -> FileRole {
        FileRole {
            kind,
            table: 0,
            id_index: false,
        }
    }
}

/// A file open through the seam: its trace id, role and path with the open file.
#[derive(Debug)]
pub struct IoFile {
    pub(super) id: FileId,
    pub(super) role: FileRole,
    pub(super) path: PathBuf,
    pub(super) file: File,
    /// Opened with `O_DIRECT`: reads and writes are aligned (see [`super::DirectIo`]).
    pub(super) direct: bool,
}

impl IoFile {
    pub fn id(&self) -> FileId {
        self.id
    }
    pub fn kind(&self) -> FileKind {
        self.role.kind
    }
    pub fn role(&self) -> FileRole {
        self.role
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn is_direct(&self) -> bool {
        self.direct
    }
    /// The open file, for backends.
    pub fn file(&self) -> &File {
        &self.file
    }
}
