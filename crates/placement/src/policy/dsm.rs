//! `dsm` and `dsm-skip-primary`: seed 000 §4 (dynamic stream mapping), in full.
//!
//! - **Write path** (Fig. 7): a collection/index write below its file's boundary (see
//!   [`super::Boundaries`]; no boundary yet = below) is region 1, else region 2; it goes on the
//!   region's predicted stream `sid1`/`sid2`, and the region's statistics (number of writes,
//!   lowest and highest offset) are updated. Metadata and journal writes go on fixed streams.
//! - **At each checkpoint commit** (Fig. 9) — the window is commit-to-commit, because the
//!   space a window writes into is the space the previous commit released:
//!   ProcessStat (Fig. A.1), ComputeHotness (Eq. 1–2, Fig. A.2), ComputePivots (Eq. 3,
//!   Fig. A.3) for collections and for indexes, MapSIDByHotness (Eq. 4, Fig. A.4), the
//!   primary-index filter (THRESHOLD1/THRESHOLD2, Fig. 9 line 16; `dsm-skip-primary` skips
//!   it), PredictStream (Eq. 5, Fig. A.5). Then the statistics restart.
//!
//! Ambiguities, and what this code does (also in `docs/placement.md`):
//! 1. Eq. 1 `range_i`: the region's *written* range in the window, `off_max − off_min`, from
//!    the statistics Fig. 7 collects; plus one page (offsets are block starts, and a region
//!    written at one offset would otherwise have range 0): `range = off_max − off_min + 4096`.
//! 2. Eq. 2 and Fig. A.2 divide by the window length twice (Fig. A.2 line 4 divides density by
//!    `t2 − t1`, line 6 again by `t`): done once. `lg` = log₂; time in seconds.
//!    `hotness = log₂(numw · 4096 / range / Δt)`. Neither the base nor the time unit changes a
//!    grouping: they scale or shift every hotness of the window alike, and the pivots with
//!    them.
//! 3. A region with no write in the window has hotness −∞: it is left out of min/max (which
//!    it would make infinite) and maps to group 1, the coldest (it is `≤ p1`).
//! 4. A file with no write at all in the window keeps its streams (there is no evidence; the
//!    primary-index filter would otherwise flag every idle index as primary).
//! 5. Min/max per file type include primary-index files (Fig. 9 computes hotness before the
//!    filter).
//! 6. Pivots (Fig. A.3) with K = 2: lines 2 and 3 write the same slot and line 4 divides by
//!    zero; the one pivot is Eq. 3's p1 = min + (max − min)/α (equal to p(K−1) when α = 2).
//!    With K = 1 there is no pivot and every region is group 1.
//! 7. min = max (all written regions of a type equally hot): all pivots equal min and every
//!    region is group 1 (Fig. A.4 tests `hotness ≤ pivots[0]` first). A tie on a pivot goes
//!    to the lower group for the same reason.
//! 8. Global percentages with a zero denominator (no region-i write on that file type) are 0.
//! 9. THRESHOLD1/2 are not given in the paper: 5 % and 1 % (`DsmConfig`). Fig. 9 compares
//!    percentages although §4.4's prose says "number of writes": percentages are used.
//! 10. PredictStream. Eq. 5 as printed is garbled ("sid_i = cursid1 if sid_i == cursid1,
//!     group_K otherwise") and disagrees with Fig. A.5; Fig. A.5 keeps a region's stream if
//!     the newly computed one equals the stream *predicted* at the previous checkpoint, else
//!     gives it the *other* region's newly computed stream. Taken to the letter
//!     ([`DsmPrediction::Literal`]) that comparison has two consequences, tested below: when
//!     the old and new streams of a file are the same two distinct streams — a perfect swap
//!     — the prediction changes nothing, so the regions keep their initial streams (with one
//!     file and K = 2: boundary-based exactly); and when both regions fall in one group
//!     (e.g. every load checkpoint, where nothing is above the boundary yet) both collapse
//!     onto it and stay there while either region keeps computing that group, i.e. for good
//!     on a file whose cold region is in the coldest group. The prose of §4.4 says what the
//!     test is for — "the hot-cold trend is unchanged" — so the default
//!     ([`DsmPrediction::Trend`]) compares the newly computed stream with the one *computed*
//!     at the previous checkpoint: unchanged → keep it; changed → predict the swap (take the
//!     other region's newly computed stream, Fig. A.5's else branch). At a file's first
//!     checkpoint there is no previous computation: the trend counts as unchanged.
//! 12. `end_of_load` restarts the current window's statistics: they were collected with no
//!     boundary (every write in region 1) and say nothing about the two regions.
//! 11. Initial streams (before the first checkpoint, "set by initial values"): region 1 →
//!     group 1 (coldest), region 2 → group K (hottest); primary-index detection only starts at
//!     the first checkpoint.
//!
//! Streams: metadata 0, journal and primary indexes 1, collections K streams from 2,
//! secondary indexes the next K (seed 000 Table 2; 2 + 2K streams, 8 with K = 3). With fewer
//! streams, D = streams − 2 data streams give collections min(K, ⌈D/2⌉) groups and indexes
//! min(K, ⌊D/2⌋) (at least one each); with 3 streams metadata, journal and primary indexes
//! share stream 0, collections get 1 and indexes 2; with 2 streams everything but metadata,
//! journal and primary indexes is on stream 1. Streams beyond 2 + 2K are unused.

use super::{is_table, Boundaries, DsmPrediction, PlacementConfig, Policy, PAGE_SIZE};
use crate::event::{Event, FileId, FileKind, WriteEvent};
use std::collections::BTreeMap;

/// One region's statistics in the current checkpoint window (Fig. 7).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct RegionStat {
    pub numw: u64,
    pub off_min: u64,
    pub off_max: u64,
}

impl RegionStat {
    fn add(&mut self, offset: u64) {
        if self.numw == 0 {
            self.off_min = offset;
            self.off_max = offset;
        } else {
            self.off_min = self.off_min.min(offset);
            self.off_max = self.off_max.max(offset);
        }
        self.numw += 1;
    }
    /// Eq. 1's range_i (ambiguity 1).
    pub fn range(&self) -> u64 {
        self.off_max - self.off_min + PAGE_SIZE
    }
    /// Eq. 1–2 (ambiguities 1–3): log₂(numw · 4096 / range / Δt), −∞ with no write.
    pub fn hotness(&self, dt_secs: f64) -> f64 {
        if self.numw == 0 {
            return f64::NEG_INFINITY;
        }
        let density = self.numw as f64 * PAGE_SIZE as f64 / self.range() as f64;
        (density / dt_secs).log2()
    }
}

/// Fig. A.3 / Eq. 3: `n` = K − 1 pivots over [min, max] with weight α (ambiguity 6).
pub fn compute_pivots(n: usize, min: f64, max: f64, alpha: u32) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let a = alpha as f64;
    let first = min + (max - min) / a;
    if n == 1 {
        return vec![first];
    }
    let last = min + (max - min) * (a - 1.0) / a;
    let step = (last - first) / (n - 1) as f64;
    let mut p: Vec<f64> = (0..n).map(|i| first + step * i as f64).collect();
    p[n - 1] = last;
    p
}

/// Fig. A.4 / Eq. 4: the stream of a region of this hotness (`initsid` + group − 1).
pub fn map_sid_by_hotness(hotness: f64, pivots: &[f64], initsid: u8) -> u8 {
    let n = pivots.len();
    if n == 0 || hotness <= pivots[0] {
        return initsid;
    }
    if pivots[n - 1] <= hotness {
        return initsid + n as u8;
    }
    for j in 0..n - 1 {
        if pivots[j] <= hotness && hotness <= pivots[j + 1] {
            return initsid + (j + 1) as u8;
        }
    }
    unreachable!("pivots are sorted and hotness is inside them")
}

/// Fig. A.5: the streams of the two regions for the next window. `sid` is what the regions
/// are compared with: the previous prediction ([`DsmPrediction::Literal`]) or the previous
/// computation ([`DsmPrediction::Trend`]).
pub fn predict_stream(sid: (u8, u8), cur: (u8, u8)) -> (u8, u8) {
    let s1 = if sid.0 == cur.0 { cur.0 } else { cur.1 };
    let s2 = if sid.1 == cur.1 { cur.1 } else { cur.0 };
    (s1, s2)
}

#[derive(Clone, Debug)]
struct DsmFile {
    kind: FileKind,
    stat: [RegionStat; 2],
    sid: (u8, u8),
    /// The streams computed (MapSIDByHotness) at the previous checkpoint.
    prev_cur: Option<(u8, u8)>,
    /// Classified a primary index at the last checkpoint (for reports and tests).
    primary: bool,
}

/// The stream layout for a stream budget.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Layout {
    metadata: u8,
    journal: u8,
    primary: u8,
    coll_init: u8,
    coll_groups: u8,
    idx_init: u8,
    idx_groups: u8,
}

impl Layout {
    fn new(streams: u8, k: u8) -> Layout {
        match streams {
            2 => Layout {
                metadata: 0,
                journal: 0,
                primary: 0,
                coll_init: 1,
                coll_groups: 1,
                idx_init: 1,
                idx_groups: 1,
            },
            3 => Layout {
                metadata: 0,
                journal: 0,
                primary: 0,
                coll_init: 1,
                coll_groups: 1,
                idx_init: 2,
                idx_groups: 1,
            },
            s => {
                let d = s - 2;
                let kc = k.min(d.div_ceil(2)).max(1);
                let ki = k.min(d / 2).max(1);
                Layout {
                    metadata: 0,
                    journal: 1,
                    primary: 1,
                    coll_init: 2,
                    coll_groups: kc,
                    idx_init: 2 + kc,
                    idx_groups: ki,
                }
            }
        }
    }
}

/// (file, hotness r1, hotness r2, global pct r1, global pct r2, primary, new streams)
pub type FileOutcome = (FileId, f64, f64, f64, f64, bool, (u8, u8));

/// Result of one checkpoint's computation (for tests and `--explain`-style reports).
#[derive(Clone, Debug, PartialEq)]
pub struct DsmCheckpoint {
    pub coll_pivots: Vec<f64>,
    pub idx_pivots: Vec<f64>,
    /// (file, hotness r1, hotness r2, global pct r1, global pct r2, primary, new streams)
    pub files: Vec<FileOutcome>,
}

#[derive(Clone, Debug)]
pub struct DsmPolicy {
    cfg: super::DsmConfig,
    filter_primary: bool,
    layout: Layout,
    bounds: Boundaries,
    files: BTreeMap<FileId, DsmFile>,
    window_start_ns: u64,
    last: Option<DsmCheckpoint>,
}

impl DsmPolicy {
    /// `filter_primary = false` is `dsm-skip-primary` (seed 000 §5.3 "DSMSkipPriIdx").
    pub fn new(cfg: &PlacementConfig, filter_primary: bool) -> Self {
        DsmPolicy {
            cfg: cfg.dsm.clone(),
            filter_primary,
            layout: Layout::new(cfg.streams, cfg.dsm.groups),
            bounds: Boundaries::default(),
            files: BTreeMap::new(),
            window_start_ns: 0,
            last: None,
        }
    }

    /// The computation of the last checkpoint.
    pub fn last_checkpoint(&self) -> Option<&DsmCheckpoint> {
        self.last.as_ref()
    }

    /// The streams regions 1 and 2 of `file` will be written on.
    pub fn streams_of(&self, file: FileId) -> Option<(u8, u8)> {
        self.files.get(&file).map(|f| f.sid)
    }

    fn init_sids(&self, kind: FileKind) -> (u8, u8) {
        let l = &self.layout;
        match kind {
            FileKind::Collection => (l.coll_init, l.coll_init + l.coll_groups - 1),
            _ => (l.idx_init, l.idx_init + l.idx_groups - 1),
        }
    }

    /// Fig. 9, at a checkpoint commit at `t_ns`.
    fn checkpoint(&mut self, t_ns: u64) {
        let dt = (t_ns.saturating_sub(self.window_start_ns)).max(1) as f64 / 1e9;
        self.window_start_ns = t_ns;
        let l = self.layout;
        // ProcessStat (Fig. A.1), phase 1: totals per file type and region.
        let mut count = [[0u64; 2]; 2]; // [collection, index][region]
        for f in self.files.values() {
            let t = (f.kind != FileKind::Collection) as usize;
            count[t][0] += f.stat[0].numw;
            count[t][1] += f.stat[1].numw;
        }
        // ComputeHotness (Fig. A.2) and min/max per type.
        let mut min = [f64::INFINITY; 2];
        let mut max = [f64::NEG_INFINITY; 2];
        let mut hot: BTreeMap<FileId, [f64; 2]> = BTreeMap::new();
        for (&id, f) in &self.files {
            if f.stat[0].numw + f.stat[1].numw == 0 {
                continue;
            }
            let t = (f.kind != FileKind::Collection) as usize;
            let h = [f.stat[0].hotness(dt), f.stat[1].hotness(dt)];
            for &x in &h {
                if x.is_finite() {
                    min[t] = min[t].min(x);
                    max[t] = max[t].max(x);
                }
            }
            hot.insert(id, h);
        }
        // ComputePivots (Fig. A.3).
        let piv = |t: usize, groups: u8| {
            if min[t].is_finite() {
                compute_pivots(groups as usize - 1, min[t], max[t], self.cfg.alpha)
            } else {
                Vec::new()
            }
        };
        let cp = piv(0, l.coll_groups);
        let ip = piv(1, l.idx_groups);
        let mut report = DsmCheckpoint {
            coll_pivots: cp.clone(),
            idx_pivots: ip.clone(),
            files: Vec::new(),
        };
        for (id, h) in hot {
            let f = self.files.get_mut(&id).expect("file with stats");
            let t = (f.kind != FileKind::Collection) as usize;
            // ProcessStat phase 2: global percentages (ambiguity 8).
            let pct = |r: usize| {
                if count[t][r] == 0 {
                    0.0
                } else {
                    f.stat[r].numw as f64 / count[t][r] as f64 * 100.0
                }
            };
            let (g1, g2) = (pct(0), pct(1));
            let mut primary = false;
            let cur = if t == 0 {
                (
                    map_sid_by_hotness(h[0], &cp, l.coll_init),
                    map_sid_by_hotness(h[1], &cp, l.coll_init),
                )
            } else if self.filter_primary
                && (g1 + g2 <= self.cfg.threshold1
                    || g1 <= self.cfg.threshold2
                    || g2 <= self.cfg.threshold2)
            {
                primary = true;
                (l.primary, l.primary)
            } else {
                (
                    map_sid_by_hotness(h[0], &ip, l.idx_init),
                    map_sid_by_hotness(h[1], &ip, l.idx_init),
                )
            };
            let basis = match self.cfg.prediction {
                DsmPrediction::Literal => f.sid,
                DsmPrediction::Trend => f.prev_cur.unwrap_or(cur),
            };
            f.sid = predict_stream(basis, cur);
            f.prev_cur = Some(cur);
            f.primary = primary;
            report.files.push((id, h[0], h[1], g1, g2, primary, f.sid));
        }
        for f in self.files.values_mut() {
            f.stat = [RegionStat::default(); 2];
        }
        self.last = Some(report);
    }
}

impl Policy for DsmPolicy {
    fn name(&self) -> &'static str {
        if self.filter_primary {
            "dsm"
        } else {
            "dsm-skip-primary"
        }
    }

    fn place(&mut self, w: &WriteEvent) -> u8 {
        match w.file_kind {
            FileKind::Metadata => self.layout.metadata,
            FileKind::Journal => self.layout.journal,
            kind => {
                debug_assert!(is_table(kind));
                self.bounds.on_write(w);
                let r = self.bounds.region(w.file, w.offset);
                let init = self.init_sids(kind);
                let f = self.files.entry(w.file).or_insert(DsmFile {
                    kind,
                    stat: [RegionStat::default(); 2],
                    sid: init,
                    prev_cur: None,
                    primary: false,
                });
                f.stat[r].add(w.offset);
                if r == 0 {
                    f.sid.0
                } else {
                    f.sid.1
                }
            }
        }
    }

    fn observe(&mut self, ev: &Event) {
        self.bounds.observe(ev);
        match ev {
            Event::CheckpointCommit { time_ns, .. } => self.checkpoint(*time_ns),
            Event::FileRemove { file, .. } => {
                self.files.remove(file);
            }
            _ => {}
        }
    }

    fn end_of_load(&mut self) {
        self.bounds.end_of_load();
        for f in self.files.values_mut() {
            f.stat = [RegionStat::default(); 2];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::PageKind;
    use crate::policy::{BoundaryPolicy, DsmConfig};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn eq_1_2_hotness_worked_example() {
        // 64 writes between offsets 1 MiB and 1 MiB + 252 KiB over a 2 s window:
        // range = 252 KiB + 4 KiB = 256 KiB = 262144 B = 64 pages,
        // density = 64 · 4096 / 262144 = 1 write per page, per second 1 / 2 = 0.5,
        // hotness = log2(0.5) = −1.
        let mut r = RegionStat::default();
        for i in 0..64u64 {
            r.add((1 << 20) + (63 - i) * 4096);
        }
        assert_eq!(r.range(), 262_144);
        assert!(close(r.hotness(2.0), -1.0));
        // 8 writes all at one offset, 0.5 s: range = 4096, density = 8 · 4096 / 4096 = 8,
        // / 0.5 = 16, log2 16 = 4.
        let mut one = RegionStat::default();
        for _ in 0..8 {
            one.add(40960);
        }
        assert!(close(one.hotness(0.5), 4.0));
        // No write: −∞.
        assert_eq!(RegionStat::default().hotness(1.0), f64::NEG_INFINITY);
    }

    #[test]
    fn eq_3_pivots_worked_examples() {
        // K = 3, α = 3 over [−3, 6]: p1 = −3 + 9/3 = 0, p2 = −3 + 9·2/3 = 3.
        assert_eq!(compute_pivots(2, -3.0, 6.0, 3), vec![0.0, 3.0]);
        // K = 5, α = 4 over [0, 8]: p1 = 0 + 8/4 = 2, p4 = 8·3/4 = 6,
        // step = (6 − 2)/(4 − 1) = 4/3: p2 = 10/3, p3 = 14/3.
        let p = compute_pivots(4, 0.0, 8.0, 4);
        assert!(close(p[0], 2.0) && close(p[1], 10.0 / 3.0));
        assert!(close(p[2], 14.0 / 3.0) && close(p[3], 6.0));
        // K = 2, α = 2 over [1, 5]: p1 = 1 + 4/2 = 3 (ambiguity 6).
        assert_eq!(compute_pivots(1, 1.0, 5.0, 2), vec![3.0]);
        // K = 2, α = 4: p1 = 1 + 4/4 = 2.
        assert_eq!(compute_pivots(1, 1.0, 5.0, 4), vec![2.0]);
        // K = 1: none. min = max: all pivots at min.
        assert!(compute_pivots(0, 1.0, 5.0, 3).is_empty());
        assert_eq!(compute_pivots(2, 7.0, 7.0, 3), vec![7.0, 7.0]);
    }

    #[test]
    fn eq_4_map_sid_worked_examples() {
        // Pivots [0, 3], initsid 2 (collections on an 8-stream device).
        let p = [0.0, 3.0];
        assert_eq!(map_sid_by_hotness(-3.0, &p, 2), 2); // ≤ p1: group 1
        assert_eq!(map_sid_by_hotness(0.0, &p, 2), 2); // tie on p1: lower group
        assert_eq!(map_sid_by_hotness(1.5, &p, 2), 3); // p1 ≤ h ≤ p2: group 2
        assert_eq!(map_sid_by_hotness(3.0, &p, 2), 4); // p(K−1) ≤ h: group K
        assert_eq!(map_sid_by_hotness(6.0, &p, 2), 4);
        assert_eq!(map_sid_by_hotness(f64::NEG_INFINITY, &p, 2), 2); // unwritten region
                                                                     // min = max = 7: everything group 1 (ambiguity 7).
        assert_eq!(map_sid_by_hotness(7.0, &[7.0, 7.0], 5), 5);
        // K = 1.
        assert_eq!(map_sid_by_hotness(9.0, &[], 2), 2);
    }

    #[test]
    fn eq_5_predict_stream_worked_examples() {
        // Kept when the computed stream equals the predicted one.
        assert_eq!(predict_stream((2, 4), (2, 4)), (2, 4));
        // Same two streams swapped: sid1 = 2 ≠ cur1 = 4 → cur2 = 2; sid2 = 4 ≠ 2 → cur1 = 4.
        // The prediction is unchanged (ambiguity 10).
        assert_eq!(predict_stream((2, 4), (4, 2)), (2, 4));
        // New groups: sid1 = 2 ≠ 3 → cur2 = 4; sid2 = 4 == 4 → 4: collapse onto 4.
        assert_eq!(predict_stream((2, 4), (3, 4)), (4, 4));
        // Collapsed (4, 4), computed (2, 4): sid1 4 ≠ 2 → cur2 = 4; sid2 4 == 4 → 4.
        assert_eq!(predict_stream((4, 4), (2, 4)), (4, 4));
        // Collapsed (4, 4), computed (2, 3): neither matches → (3, 2).
        assert_eq!(predict_stream((4, 4), (2, 3)), (3, 2));
    }

    fn write(file: FileId, kind: FileKind, offset: u64, t: u64) -> WriteEvent {
        WriteEvent {
            time_ns: t,
            file,
            file_kind: kind,
            table: file,
            page_kind: PageKind::Leaf,
            offset,
            len: 4096,
            id_index: false,
            stream: 0,
            page_id: 0,
            cause: crate::event::WriteCause::Other,
        }
    }

    fn commit(t: u64) -> Event {
        Event::CheckpointCommit { time_ns: t, id: t }
    }

    fn fig_9_scenario(prediction: DsmPrediction) -> DsmPolicy {
        // Two collections (files 1, 2), a secondary index (3) and a primary index (4); boundary
        // of each at 1 MiB (end of load, which also restarts the window's statistics).
        // A window of 1 s (window start 0).
        let cfg = PlacementConfig {
            dsm: DsmConfig {
                prediction,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut p = DsmPolicy::new(&cfg, true);
        for f in 1..=4 {
            let k = if f <= 2 {
                FileKind::Collection
            } else {
                FileKind::Index
            };
            p.place(&write(f, k, (1 << 20) - 4096, 0));
        }
        p.end_of_load();
        // Initial streams: collections (2, 4), indexes (5, 7).
        // File 1 region 1: 16 writes over offsets 0..60 KiB → range 64 KiB = 16 pages,
        //   density 16·4096/65536 = 1 → hotness log2(1/1 s) = 0.
        for i in 0..16 {
            p.place(&write(1, FileKind::Collection, i * 4096, 1));
        }
        // File 1 region 2: 64 writes within 1 MiB..1 MiB+12 KiB → range 16 KiB,
        //   density 64·4096/16384 = 16 → hotness 4.
        for i in 0..64 {
            p.place(&write(
                1,
                FileKind::Collection,
                (1 << 20) + (i % 4) * 4096,
                1,
            ));
        }
        // File 2 region 1: 2 writes at 0 and 124 KiB → range 128 KiB,
        //   density 2·4096/131072 = 1/16 → hotness −4. Region 2: no write → −∞.
        p.place(&write(2, FileKind::Collection, 0, 1));
        p.place(&write(2, FileKind::Collection, 124 << 10, 1));
        // Index 3: r1 8 writes over 0..28 KiB → range 32 KiB, density 1 → 0;
        //   r2 8 writes at one offset → range 4 KiB, density 8 → 3.
        for i in 0..8 {
            p.place(&write(3, FileKind::Index, i * 4096, 1));
            p.place(&write(3, FileKind::Index, 1 << 20, 1));
        }
        // Index 4: r2 only, 1 write → density 1 → hotness 0; r1 −∞.
        p.place(&write(4, FileKind::Index, 2 << 20, 1));
        p.observe(&commit(1_000_000_000));
        p
    }

    #[test]
    fn fig_9_checkpoint_worked_example() {
        // Collections: min −4, max 4; K = 3, α = 3: p1 = −4 + 8/3 = −4/3, p2 = −4 + 16/3 = 4/3.
        //   f1: r1 0 → group 2 (stream 3), r2 4 → group 3 (stream 4): cur (3, 4);
        //   f2: r1 −4 → group 1 (stream 2), r2 −∞ → group 1: cur (2, 2).
        // ProcessStat, indexes: count1 = 8 + 0 = 8, count2 = 8 + 1 = 9.
        //   f3: pct1 = 100, pct2 = 8/9·100 = 88.9 → secondary;
        //   f4: pct1 = 0 ≤ THRESHOLD2 (1) → primary: cur (1, 1).
        // Index min 0, max 3 (the primary included, ambiguity 5): p1 = 1, p2 = 2.
        //   f3: r1 0 → stream 5, r2 3 → stream 7: cur (5, 7).
        // Trend prediction, first checkpoint (no previous computation: unchanged): sid = cur.
        let p = fig_9_scenario(DsmPrediction::Trend);
        let c = p.last_checkpoint().unwrap().clone();
        assert!(close(c.coll_pivots[0], -4.0 / 3.0) && close(c.coll_pivots[1], 4.0 / 3.0));
        assert_eq!(c.idx_pivots, vec![1.0, 2.0]);
        assert_eq!(p.streams_of(1), Some((3, 4)));
        assert_eq!(p.streams_of(2), Some((2, 2)));
        assert_eq!(p.streams_of(3), Some((5, 7)));
        assert_eq!(p.streams_of(4), Some((1, 1)));
        let f4 = c.files.iter().find(|f| f.0 == 4).unwrap();
        assert!(f4.5 && close(f4.3, 0.0) && close(f4.4, 100.0 / 9.0));
        let f3 = c.files.iter().find(|f| f.0 == 3).unwrap();
        assert!(!f3.5 && close(f3.1, 0.0) && close(f3.2, 3.0) && close(f3.4, 800.0 / 9.0));
        // Literal Fig. A.5 against the initial predictions:
        //   f1: sid (2, 4), cur (3, 4): 2 ≠ 3 → cur2 = 4; 4 == 4 → 4: (4, 4).
        //   f2: sid (2, 4), cur (2, 2): 2 == 2 → 2; 4 ≠ 2 → cur1 = 2: (2, 2).
        //   f3: (5, 7) vs (5, 7): kept. f4: (5, 7) vs (1, 1): → (1, 1).
        let mut l = fig_9_scenario(DsmPrediction::Literal);
        assert_eq!(l.streams_of(1), Some((4, 4)));
        assert_eq!(l.streams_of(2), Some((2, 2)));
        assert_eq!(l.streams_of(3), Some((5, 7)));
        assert_eq!(l.streams_of(4), Some((1, 1)));
        // The write path uses the predicted streams; journal 1, metadata 0.
        assert_eq!(l.place(&write(1, FileKind::Collection, 0, 2)), 4);
        assert_eq!(l.place(&write(4, FileKind::Index, 0, 2)), 1);
        assert_eq!(l.place(&write(9, FileKind::Journal, 0, 2)), 1);
        assert_eq!(l.place(&write(9, FileKind::Metadata, 0, 2)), 0);
        // dsm-skip-primary maps the primary index by hotness instead.
        let mut s = DsmPolicy::new(&PlacementConfig::default(), false);
        s.place(&write(4, FileKind::Index, (1 << 20) - 4096, 0));
        s.end_of_load();
        s.place(&write(4, FileKind::Index, 2 << 20, 1));
        s.observe(&commit(1_000_000_000));
        // Only f4 r2 = 0 is finite: min = max = 0, pivots (0, 0); r1 −∞ → group 1,
        // r2 0 ≤ p1 → group 1: (5, 5).
        assert_eq!(s.streams_of(4), Some((5, 5)));
    }

    #[test]
    fn trend_prediction_follows_a_swap_and_literal_does_not() {
        // One collection, K = 3. Windows alternate: region 1 hot (16 writes in 16 KiB →
        // density 4 → hotness 2) and region 2 cold (1 write → density 1 → hotness 0), then the
        // reverse. min 0, max 2, pivots 2/3, 4/3: hot → stream 4, cold → stream 2.
        for (prediction, expect) in [
            // Trend: window 1 computes (4, 2), first → sid (4, 2) — region 1 is predicted hot
            // but window 2 has it cold: computed (2, 4) ≠ (4, 2) → swap predicted: (4, 2),
            // right for window 3; and so on: from window 2 on, every prediction is right.
            (
                DsmPrediction::Trend,
                [(4, 2), (4, 2), (2, 4), (4, 2), (2, 4)],
            ),
            // Literal: window 1 from the initial (2, 4) and (4, 2): 2 ≠ 4 → cur2 = 2; 4 ≠ 2 →
            // cur1 = 4: (2, 4); every later window computes the same two streams: unchanged.
            (
                DsmPrediction::Literal,
                [(2, 4), (2, 4), (2, 4), (2, 4), (2, 4)],
            ),
        ] {
            let cfg = PlacementConfig {
                dsm: DsmConfig {
                    prediction,
                    ..Default::default()
                },
                ..Default::default()
            };
            let mut p = DsmPolicy::new(&cfg, true);
            p.place(&write(1, FileKind::Collection, (1 << 20) - 4096, 0));
            p.end_of_load();
            for win in 1..=5u64 {
                let (hot, cold) = if win % 2 == 1 {
                    (0, 1 << 20)
                } else {
                    (1 << 20, 0)
                };
                for i in 0..16 {
                    p.place(&write(1, FileKind::Collection, hot + (i % 4) * 4096, 0));
                }
                p.place(&write(1, FileKind::Collection, cold, 0));
                p.observe(&commit(win * 1_000_000_000));
                assert_eq!(
                    p.streams_of(1),
                    Some(expect[win as usize - 1]),
                    "{prediction:?} window {win}"
                );
            }
        }
    }

    #[test]
    fn folds_onto_fewer_streams() {
        let l = |s| Layout::new(s, 3);
        assert_eq!(
            (l(8).coll_groups, l(8).idx_init, l(8).idx_groups),
            (3, 5, 3)
        );
        assert_eq!(
            (l(7).coll_groups, l(7).idx_init, l(7).idx_groups),
            (3, 5, 2)
        );
        assert_eq!(
            (l(6).coll_groups, l(6).idx_init, l(6).idx_groups),
            (2, 4, 2)
        );
        assert_eq!(
            (l(4).coll_groups, l(4).idx_init, l(4).idx_groups),
            (1, 3, 1)
        );
        assert_eq!((l(3).coll_init, l(3).idx_init, l(3).journal), (1, 2, 0));
        assert_eq!((l(2).coll_init, l(2).idx_init, l(2).primary), (1, 1, 0));
        assert_eq!(Layout::new(16, 3), l(8)); // streams beyond 2 + 2K unused
        for s in 2..=16u8 {
            let l = l(s);
            assert!(l.idx_init + l.idx_groups <= s.max(2));
            assert!(l.coll_init + l.coll_groups <= s);
        }
    }

    /// Seed 000 §4: "the boundary-based approach is a particular case of DSM where K is equal
    /// to two." It holds exactly — same stream for every write — for DSM with K = 2 without
    /// primary-index filtering as long as no checkpoint window puts both regions of a file in
    /// the same group (then PredictStream never changes the initial region 1 → group 1,
    /// region 2 → group 2 mapping). It fails as soon as one does: a window in which one
    /// region of a file is not written, or, with several files of a type, a file whose two
    /// regions both fall on one side of the shared pivot; and primary filtering (`dsm`) moves
    /// primary indexes to stream 1 in any case.
    #[test]
    fn boundary_is_dsm_with_k_2_only_when_no_window_groups_both_regions_together() {
        let cfg = PlacementConfig {
            dsm: DsmConfig {
                groups: 2,
                alpha: 2,
                prediction: DsmPrediction::Literal,
                ..Default::default()
            },
            ..Default::default()
        };
        // A run where it holds: one collection and one index, both regions written every
        // window, heat swapping between them at each checkpoint.
        let run = |second_file_cold: bool| {
            let mut b = BoundaryPolicy::new(&cfg);
            let mut d = DsmPolicy::new(&cfg, false);
            let mut same = true;
            let mut both = |w: &WriteEvent, b: &mut BoundaryPolicy, d: &mut DsmPolicy| {
                let (x, y) = (b.place(w), d.place(w));
                same &= x == y;
            };
            for (f, k) in [
                (1, FileKind::Collection),
                (2, FileKind::Index),
                (3, FileKind::Collection),
            ] {
                both(&write(f, k, (1 << 20) - 4096, 0), &mut b, &mut d);
            }
            b.end_of_load();
            d.end_of_load();
            for win in 1..=10u64 {
                let t = win * 1_000_000_000;
                let hot_low = win % 2 == 0;
                for i in 0..40u64 {
                    for (f, k) in [(1, FileKind::Collection), (2, FileKind::Index)] {
                        let hot = (i % 4 != 0) == hot_low;
                        let off = if hot {
                            (i % 16) * 4096
                        } else {
                            (1 << 20) + (i % 16) * 4096
                        };
                        both(&write(f, k, off, t - 1), &mut b, &mut d);
                    }
                }
                if second_file_cold {
                    // File 3: both regions much colder than file 1 → both below the pivot.
                    both(&write(3, FileKind::Collection, 0, t - 1), &mut b, &mut d);
                    both(
                        &write(3, FileKind::Collection, 1 << 20, t - 1),
                        &mut b,
                        &mut d,
                    );
                }
                let c = commit(t);
                b.observe(&c);
                d.observe(&c);
            }
            same
        };
        assert!(
            run(false),
            "identical when every window separates each file's regions"
        );
        assert!(
            !run(true),
            "differs once a file's two regions share a group"
        );
    }
}
