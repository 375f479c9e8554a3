//! `file`: one stream per file kind (seed 000 Table 2 "File-based"; seed 003 Table 3 gives the
//! same classes with metadata on its own stream 1 and everything shifted by one — flashdoc
//! follows the later paper so that `file`, `boundary` and `dsm` share one table).
//!
//! | streams | metadata | journal | collections | indexes (primary and secondary) |
//! | --- | --- | --- | --- | --- |
//! | ≥ 4 | 0 | 1 | 2 | 3 |
//! | 3 | 0 | 0 | 1 | 2 |
//! | 2 | 0 | 0 | 1 | 1 |
//!
//! Folding merges the two small cold kinds first (metadata is < 0.1 % of writes), then
//! collections with indexes; the journal is the last to leave the table data's streams.

use super::{PlacementConfig, Policy};
use crate::event::{Event, FileKind, WriteEvent};

#[derive(Debug, Clone)]
pub struct FilePolicy {
    map: [u8; 4],
}

impl FilePolicy {
    pub fn new(cfg: &PlacementConfig) -> Self {
        // Indexed by FileKind: Collection, Index, Journal, Metadata.
        let map = match cfg.streams {
            s if s >= 4 => [2, 3, 1, 0],
            3 => [1, 2, 0, 0],
            _ => [1, 1, 0, 0],
        };
        FilePolicy { map }
    }
    pub fn stream_of(&self, kind: FileKind) -> u8 {
        self.map[kind as usize]
    }
}

impl Policy for FilePolicy {
    fn name(&self) -> &'static str {
        "file"
    }
    fn place(&mut self, w: &WriteEvent) -> u8 {
        self.stream_of(w.file_kind)
    }
    fn observe(&mut self, _ev: &Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_follow_table_2_and_fold() {
        let p = |s| {
            FilePolicy::new(&PlacementConfig {
                streams: s,
                ..Default::default()
            })
        };
        let k = [
            FileKind::Metadata,
            FileKind::Journal,
            FileKind::Collection,
            FileKind::Index,
        ];
        let row = |s| k.map(|k| p(s).stream_of(k));
        assert_eq!(row(8), [0, 1, 2, 3]);
        assert_eq!(row(4), [0, 1, 2, 3]);
        assert_eq!(row(3), [0, 0, 1, 2]);
        assert_eq!(row(2), [0, 0, 1, 1]);
    }
}
