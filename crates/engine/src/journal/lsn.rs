//! A position in the journal.

use std::fmt;

/// A position in the journal: a record's first byte.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Lsn {
    /// Journal file number, from 1.
    pub file: u32,
    pub offset: u32,
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.file, self.offset)
    }
}
