//! `boundary`: seed 003 Algorithm 1 (seed 000 Fig. 4). Each collection and index file is split
//! at its boundary — its size at the end of the load phase ([`Policy::end_of_load`]), or the
//! automatic fallback of [`super::Boundaries`] — and each side gets a stream per file kind.
//! Primary and secondary indexes share the index streams (seed 003 §5.2).
//!
//! Streams (seed 000 Table 2 "Boundary-based"; region 1 = offsets below the boundary):
//!
//! | streams | metadata | journal | collection r1, r2 | index r1, r2 |
//! | --- | --- | --- | --- | --- |
//! | ≥ 6 | 0 | 1 | 2, 3 | 4, 5 |
//! | 5 | 0 | 1 | 2, 3 | 4, 4 |
//! | 4 | 0 | 0 | 1, 2 | 3, 3 |
//! | 3 | 0 | 0 | 1, 2 | 1, 2 |
//! | 2 | 0 | 0 | 1, 1 | 1, 1 |
//!
//! Folding gives up, in order: the index split, metadata/journal separation, the collection/
//! index separation (keeping the region split, the point of the method), the region split.

use super::{Boundaries, PlacementConfig, Policy};
use crate::event::{Event, FileKind, WriteEvent};

#[derive(Debug, Clone)]
pub struct BoundaryPolicy {
    bounds: Boundaries,
    /// [metadata, journal, coll r1, coll r2, idx r1, idx r2]
    map: [u8; 6],
}

impl BoundaryPolicy {
    pub fn new(cfg: &PlacementConfig) -> Self {
        let map = match cfg.streams {
            s if s >= 6 => [0, 1, 2, 3, 4, 5],
            5 => [0, 1, 2, 3, 4, 4],
            4 => [0, 0, 1, 2, 3, 3],
            3 => [0, 0, 1, 2, 1, 2],
            _ => [0, 0, 1, 1, 1, 1],
        };
        BoundaryPolicy {
            bounds: Boundaries::default(),
            map,
        }
    }
    /// The boundary of `file` (None until known).
    pub fn boundary(&self, file: crate::event::FileId) -> Option<u64> {
        self.bounds.boundary(file)
    }
}

impl Policy for BoundaryPolicy {
    fn name(&self) -> &'static str {
        "boundary"
    }
    fn place(&mut self, w: &WriteEvent) -> u8 {
        self.bounds.on_write(w);
        match w.file_kind {
            FileKind::Metadata => self.map[0],
            FileKind::Journal => self.map[1],
            FileKind::Collection => self.map[2 + self.bounds.region(w.file, w.offset)],
            FileKind::Index => self.map[4 + self.bounds.region(w.file, w.offset)],
        }
    }
    fn observe(&mut self, ev: &Event) {
        self.bounds.observe(ev);
    }
    fn end_of_load(&mut self) {
        self.bounds.end_of_load();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::w;

    #[test]
    fn algorithm_1() {
        let mut p = BoundaryPolicy::new(&PlacementConfig::default());
        let c = FileKind::Collection;
        let i = FileKind::Index;
        // Load: no boundary yet → region 1.
        assert_eq!(p.place(&w(1, c, 0, 4096)), 2);
        assert_eq!(p.place(&w(1, c, 4096, 4096)), 2);
        assert_eq!(p.place(&w(2, i, 0, 8192)), 4);
        p.end_of_load(); // boundaries: file 1 at 8192, file 2 at 8192
        assert_eq!(p.boundary(1), Some(8192));
        assert_eq!(p.place(&w(1, c, 4096, 4096)), 2);
        assert_eq!(p.place(&w(1, c, 8192, 4096)), 3);
        assert_eq!(p.place(&w(2, i, 8191, 1)), 4);
        assert_eq!(p.place(&w(2, i, 1 << 20, 4096)), 5);
        assert_eq!(p.place(&w(3, FileKind::Journal, 0, 4096)), 1);
        assert_eq!(p.place(&w(4, FileKind::Metadata, 0, 4096)), 0);
        // A file created after the load has no boundary until the fallback finds one.
        assert_eq!(p.place(&w(5, c, 1 << 20, 4096)), 2);
    }
}
