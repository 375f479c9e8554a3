//! Direct I/O: which files bypass the page cache, and the alignment that asks for.

use crate::error::{Error, Result};
use placement::FileKind;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which files bypass the page cache with `O_DIRECT` (WiredTiger's `direct_io=[data,log]`).
///
/// With buffered I/O (MongoDB's default) a write lands in the page cache and reaches the device
/// at writeback, carrying the write-life hint the inode has *then*; with direct I/O every write
/// reaches the device as issued, with the hint set just before it. The seeds ran MongoDB with
/// direct I/O. Direct writes and reads must be aligned to [`DIRECT_IO_ALIGN`] in offset,
/// length and memory: table blocks already are (the allocation unit), the journal pads each
/// flush to it (`docs/journal.md`), and the backend copies through an aligned buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectIo {
    /// Table files (collections and indexes).
    pub data: bool,
    /// Journal files.
    pub log: bool,
}

/// Offset, length and memory alignment of direct I/O: 4 KiB, the allocation unit, which is also the
/// largest logical block size of common devices (512 B or 4 KiB).
pub const DIRECT_IO_ALIGN: u64 = 4096;

impl DirectIo {
    pub const NONE: DirectIo = DirectIo {
        data: false,
        log: false,
    };
    pub fn any(self) -> bool {
        self.data || self.log
    }
    /// Whether files of `kind` are opened with `O_DIRECT` (the metadata never is: it is
    /// written once per checkpoint, in small pieces).
    pub fn for_kind(self, kind: FileKind) -> bool {
        match kind {
            FileKind::Collection | FileKind::Index => self.data,
            FileKind::Journal => self.log,
            FileKind::Metadata => false,
        }
    }
}

impl FromStr for DirectIo {
    type Err = Error;
    /// `data`, `log`, `data,log` (brackets allowed, as WiredTiger writes them), or `none`.
    fn from_str(s: &str) -> Result<Self> {
        let mut d = DirectIo::NONE;
        let list = s.trim().trim_start_matches('[').trim_end_matches(']');
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item {
                "data" => d.data = true,
                "log" => d.log = true,
                "none" => {}
                _ => {
                    return Err(Error::Config(format!(
                        "unknown direct_io file type {item:?} (expected data, log or none)"
                    )))
                }
            }
        }
        Ok(d)
    }
}

impl fmt::Display for DirectIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [(self.data, "data"), (self.log, "log")]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        let both = "[data, log]".parse::<DirectIo>().unwrap();
        assert!(both.data && both.log);
        assert_eq!(both.to_string(), "data,log");
        assert_eq!("none".parse::<DirectIo>().unwrap(), DirectIo::NONE);
        assert_eq!("".parse::<DirectIo>().unwrap().to_string(), "none");
        assert!("checkpoint".parse::<DirectIo>().is_err());
        assert!(!DirectIo::NONE.for_kind(FileKind::Journal));
        assert!(both.for_kind(FileKind::Index) && !both.for_kind(FileKind::Metadata));
    }
}
