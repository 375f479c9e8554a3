//! `lifetime` (flashdoc's own): each write goes to the stream of its page's *predicted
//! lifetime*, bucketed on a log scale whose boundaries follow the recent predictions.
//!
//! - **Clock**: host bytes written (every write counts), so predictions do not depend on the
//!   device or on wall-clock pauses.
//! - **Pages with history** (`page_id ≠ 0` seen before in the same file): the prediction is a
//!   moving average *in linear space* of the page's inter-write intervals (the newest interval
//!   weighted [`super::LifetimeConfig::ewma_weight`], 0.2 by default), i.e. the inverse of the
//!   page's write rate. In a copy-on-write tree a page's image dies roughly when the page is
//!   next written (its old extent is freed by the following checkpoint). Page writes look
//!   like a Poisson process: one interval has a log₂ spread of ≈ 2 by itself, so a long,
//!   linear memory (a rate estimate) predicts better than the last interval or a log-space
//!   average (measured on the lab traces).
//! - **Checkpoint writes** (between `CheckpointBegin` and `CheckpointCommit`) of tree pages:
//!   predicted [`super::LifetimeConfig::checkpoint_bias`] octaves longer (2 by default): the
//!   image belongs to the new checkpoint and survives at least until the next one commits,
//!   while an eviction write between checkpoints may be superseded and freed sooner.
//! - **A page's first write**: the file's recent typical interval (moving average of the
//!   intervals observed in that file); if the file has none yet (a load), the coldest bucket.
//! - **`page_id = 0` in table files** (extent lists, descriptors, overflow values): per
//!   (file kind, page kind) class, a moving average of the *true* lifetimes observed online —
//!   from the write to the `Free`, overlapping write, truncation or removal that ends it; the
//!   coldest bucket until one is observed.
//! - **Buckets**: at most [`super::LifetimeConfig::buckets`] (2 by default: on the lab's
//!   engine traces more buckets of these noisy predictions only mixed the same lifetimes over
//!   more open blocks), split by boundaries evenly spaced in log₂ between the
//!   `low_quantile` and `high_quantile` (5 %, 95 %) of the predictions made since the previous
//!   checkpoint commit (byte-weighted, older windows decayed by ½ each checkpoint). They are
//!   recomputed at each checkpoint commit; before the first, everything is in the coldest
//!   bucket. Shorter predicted lifetime → lower stream.
//! - **Journal**: sequential, and it dies as a whole file when a checkpoint no longer needs
//!   it: its own stream. **Metadata**: stream 0.
//!
//! Streams: ≥ 4 streams: metadata 0, journal 1, buckets on 2..2+buckets (2, 3 by default; up
//! to 6 buckets on 8 streams with `buckets` raised; the rest unused). 3 streams: metadata and journal 0, buckets 1, 2. 2 streams: metadata and journal
//! 0, one bucket (1).

use super::untracked::{Ended, UntrackedBlocks};
use super::{is_table, LifetimeConfig, PlacementConfig, Policy};
use crate::event::{Event, FileId, FileKind, PageKind, WriteEvent};
use std::collections::{HashMap, HashSet};

/// Histogram bins per power of two of predicted lifetime.
const BINS_PER_OCTAVE: f64 = 4.0;
const BINS: usize = 64 * 4 + 1;
/// Weight of the newest observation in the per-file and per-class log₂ moving averages.
const CLASS_EWMA: f64 = 0.5;

#[derive(Clone, Copy, Debug)]
struct PageState {
    last_clock: u64,
    /// log₂ of the page's mean inter-write interval in bytes, a linear-space moving average
    /// (NaN: no interval yet).
    pred: f64,
}

#[derive(Clone, Debug)]
pub struct LifetimePolicy {
    cfg: LifetimeConfig,
    metadata: u8,
    journal: u8,
    first_bucket: u8,
    buckets: u8,
    clock: u64,
    pages: HashMap<(FileId, u64), PageState>,
    /// Files with a page in `pages`: removing any other file (a journal file, whose writes
    /// have no page ids) skips the scan of `pages`.
    files_with_pages: HashSet<FileId>,
    /// Per file: log₂ moving average of its pages' intervals.
    file_pred: HashMap<FileId, f64>,
    /// Per (file kind, page kind): log₂ moving average of observed true lifetimes of
    /// `page_id = 0` blocks.
    /// Indexed by file kind, then page kind; NaN: none observed yet.
    class_pred: [[f64; PageKind::ALL.len()]; FileKind::ALL.len()],
    /// Live `page_id = 0` blocks of table files.
    untracked: UntrackedBlocks,
    /// Scratch for [`Self::kill_untracked`] (kept: no allocation per write).
    ended: Vec<Ended>,
    /// Byte-weighted histogram of log₂ predictions since the last boundary update (decayed).
    hist: Vec<f64>,
    /// Bucket boundaries, log₂ bytes (buckets − 1 of them); None before the first checkpoint.
    bounds: Option<Vec<f64>>,
    /// Between a `CheckpointBegin` and its `CheckpointCommit`.
    in_checkpoint: bool,
}

impl LifetimePolicy {
    pub fn new(cfg: &PlacementConfig) -> Self {
        let (metadata, journal, first_bucket) = match cfg.streams {
            s if s >= 4 => (0, 1, 2),
            _ => (0, 0, 1),
        };
        LifetimePolicy {
            cfg: cfg.lifetime.clone(),
            metadata,
            journal,
            first_bucket,
            buckets: (cfg.streams - first_bucket).min(cfg.lifetime.buckets.max(1)),
            clock: 0,
            pages: HashMap::new(),
            files_with_pages: HashSet::new(),
            file_pred: HashMap::new(),
            class_pred: [[f64::NAN; PageKind::ALL.len()]; FileKind::ALL.len()],
            untracked: UntrackedBlocks::default(),
            ended: Vec::new(),
            hist: vec![0.0; BINS],
            bounds: None,
            in_checkpoint: false,
        }
    }

    /// The current bucket boundaries (log₂ bytes), for reports and tests.
    pub fn boundaries(&self) -> Option<&[f64]> {
        self.bounds.as_deref()
    }

    /// Log₂-space moving average (per-file and per-class priors).
    fn ewma(old: f64, new: f64) -> f64 {
        if old.is_nan() {
            new
        } else {
            CLASS_EWMA * new + (1.0 - CLASS_EWMA) * old
        }
    }

    /// A page's mean interval: moving average in linear space of intervals given in log₂.
    fn rate_ewma(&self, old: f64, new: f64) -> f64 {
        if old.is_nan() {
            new
        } else {
            let a = self.cfg.ewma_weight;
            (a * new.exp2() + (1.0 - a) * old.exp2()).log2()
        }
    }

    fn bucket(&self, pred: f64) -> u8 {
        let last = self.buckets - 1;
        if pred.is_nan() {
            return last;
        }
        match &self.bounds {
            None => last,
            Some(b) => b.iter().take_while(|&&x| pred >= x).count() as u8,
        }
    }

    fn record(&mut self, pred: f64, bytes: u64) {
        if pred.is_nan() {
            return;
        }
        let bin = ((pred * BINS_PER_OCTAVE).round().max(0.0) as usize).min(BINS - 1);
        self.hist[bin] += bytes as f64;
    }

    fn recompute_bounds(&mut self) {
        let total: f64 = self.hist.iter().sum();
        if total > 0.0 && self.buckets > 1 {
            let q = |p: f64| {
                let target = p * total;
                let mut acc = 0.0;
                for (i, &h) in self.hist.iter().enumerate() {
                    acc += h;
                    if acc >= target && h > 0.0 {
                        return i as f64 / BINS_PER_OCTAVE;
                    }
                }
                (BINS - 1) as f64 / BINS_PER_OCTAVE
            };
            let lo = q(self.cfg.low_quantile);
            let hi = q(self.cfg.high_quantile).max(lo + 1.0 / BINS_PER_OCTAVE);
            let n = self.buckets as usize - 1; // boundaries
                                               // n boundaries evenly spaced from lo to hi (one boundary: their midpoint).
            let b: Vec<f64> = if n == 1 {
                vec![(lo + hi) / 2.0]
            } else {
                (0..n)
                    .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
                    .collect()
            };
            self.bounds = Some(b);
        }
        for h in &mut self.hist {
            *h *= 0.5;
        }
    }

    fn class_pred_mut(&mut self, (file, page): (FileKind, PageKind)) -> &mut f64 {
        &mut self.class_pred[file as usize][page as usize]
    }

    /// Ends the life of `page_id = 0` blocks overlapping `[off, end)` of `file`, in offset
    /// order: each one's true lifetime feeds its class's prediction. O(pages + k) or
    /// O(log n + k) ([`UntrackedBlocks`]), where scanning every block below `end` made a
    /// trace without `Free` events (captured outside an engine) quadratic.
    fn kill_untracked(&mut self, file: FileId, off: u64, end: u64) {
        let mut ended = std::mem::take(&mut self.ended);
        self.untracked.kill(file, off, end, &mut ended);
        self.learn_from(ended);
    }

    /// The blocks in `ended` are over: each one's true lifetime feeds its class's prediction.
    fn learn_from(&mut self, ended: Vec<Ended>) {
        for e in &ended {
            let life = ((self.clock - e.birth).max(1) as f64).log2();
            let pred = self.class_pred_mut(e.class);
            *pred = Self::ewma(*pred, life);
        }
        self.ended = ended;
    }
}

impl Policy for LifetimePolicy {
    fn name(&self) -> &'static str {
        "lifetime"
    }

    fn place(&mut self, w: &WriteEvent) -> u8 {
        let now = self.clock;
        self.clock += w.len as u64;
        match w.file_kind {
            FileKind::Metadata => return self.metadata,
            FileKind::Journal => return self.journal,
            _ => debug_assert!(is_table(w.file_kind)),
        }
        let end = w.offset + w.len as u64;
        let pred = if w.page_id == 0 {
            // Its block ends those it overwrites, and is one itself.
            let class = (w.file_kind, w.page_kind);
            let mut ended = std::mem::take(&mut self.ended);
            self.untracked
                .replace(w.file, w.offset, end, now, class, &mut ended);
            self.learn_from(ended);
            *self.class_pred_mut(class)
        } else {
            if !self.untracked.is_empty() {
                self.kill_untracked(w.file, w.offset, end);
            }
            let key = (w.file, w.page_id);
            match self.pages.get(&key).copied() {
                Some(st) => {
                    let interval = ((now - st.last_clock).max(1) as f64).log2();
                    let pred = self.rate_ewma(st.pred, interval);
                    self.pages.insert(
                        key,
                        PageState {
                            last_clock: now,
                            pred,
                        },
                    );
                    let fp = self.file_pred.get(&w.file).copied().unwrap_or(f64::NAN);
                    let fp = Self::ewma(fp, interval);
                    self.file_pred.insert(w.file, fp);
                    pred
                }
                None => {
                    self.files_with_pages.insert(w.file);
                    self.pages.insert(
                        key,
                        PageState {
                            last_clock: now,
                            pred: f64::NAN,
                        },
                    );
                    self.file_pred.get(&w.file).copied().unwrap_or(f64::NAN)
                }
            }
        };
        let pred = if self.in_checkpoint && w.page_id != 0 {
            pred + self.cfg.checkpoint_bias
        } else {
            pred
        };
        self.record(pred, w.len as u64);
        self.first_bucket + self.bucket(pred)
    }

    fn prefetch(&self, ev: &Event) {
        match ev {
            Event::Write(w) if is_table(w.file_kind) => {
                self.untracked
                    .prefetch(w.file, w.offset, w.offset + w.len as u64)
            }
            Event::Free {
                file, offset, len, ..
            } => self.untracked.prefetch(*file, *offset, offset + len),
            _ => {}
        }
    }

    fn observe(&mut self, ev: &Event) {
        match ev {
            Event::Free {
                file, offset, len, ..
            } => self.kill_untracked(*file, *offset, offset + len),
            Event::FileTruncate { file, len, .. } => self.kill_untracked(*file, *len, u64::MAX),
            Event::FileRemove { file, .. } => {
                self.kill_untracked(*file, 0, u64::MAX);
                if self.files_with_pages.remove(file) {
                    self.pages.retain(|k, _| k.0 != *file);
                }
                self.file_pred.remove(file);
            }
            Event::CheckpointBegin { .. } => self.in_checkpoint = true,
            Event::CheckpointCommit { .. } => {
                self.in_checkpoint = false;
                self.recompute_bounds()
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn w(page_id: u64, offset: u64, len: u32) -> WriteEvent {
        WriteEvent {
            time_ns: 0,
            file: 1,
            file_kind: FileKind::Collection,
            table: 1,
            page_kind: if page_id == 0 {
                PageKind::ExtentList
            } else {
                PageKind::Leaf
            },
            offset,
            len,
            id_index: false,
            stream: 0,
            page_id,
            cause: crate::event::WriteCause::Other,
        }
    }

    #[test]
    fn hot_pages_go_to_lower_streams_than_cold_pages() {
        let mut p = LifetimePolicy::new(&PlacementConfig::default());
        // Load: 100 pages, first writes → coldest bucket (stream 3 with the default 2
        // buckets), journal 1, metadata 0.
        for id in 1..=100 {
            assert_eq!(p.place(&w(id, id * 4096, 4096)), 3);
        }
        let mut j = w(0, 0, 4096);
        j.file_kind = FileKind::Journal;
        assert_eq!(p.place(&j), 1);
        j.file_kind = FileKind::Metadata;
        assert_eq!(p.place(&j), 0);
        // Windows: pages 1..=10 rewritten 10× per window, pages 11..=100 once per window.
        let mut last = (0, 0);
        for win in 0..6 {
            let (mut hot, mut cold) = (vec![], vec![]);
            for r in 0..10 {
                for id in 1..=10 {
                    hot.push(p.place(&w(id, (1000 + id) * 4096, 4096)));
                }
                for id in (11 + r * 9)..(11 + r * 9 + 9) {
                    cold.push(p.place(&w(id, (2000 + id) * 4096, 4096)));
                }
            }
            p.observe(&Event::CheckpointCommit {
                time_ns: 0,
                id: win,
            });
            last = (*hot.last().unwrap(), *cold.last().unwrap());
        }
        assert!(p.boundaries().is_some());
        assert!(last.0 < last.1, "hot {} cold {}", last.0, last.1);
        assert_eq!(last, (2, 3));
    }

    #[test]
    fn untracked_blocks_learn_their_class_lifetime() {
        let mut p = LifetimePolicy::new(&PlacementConfig::default());
        p.place(&w(0, 0, 4096)); // extent list, class unknown → coldest
        for id in 1..=15 {
            p.place(&w(id, id * 4096, 4096));
        }
        // Freed after 16 pages (65536 bytes) of writes: lifetime 2^16 learned.
        p.observe(&Event::Free {
            time_ns: 0,
            file: 1,
            offset: 0,
            len: 4096,
        });
        assert_eq!(
            p.class_pred[FileKind::Collection as usize][PageKind::ExtentList as usize],
            16.0
        );
    }

    #[test]
    fn page_prediction_is_a_linear_space_average_of_intervals() {
        let p = LifetimePolicy::new(&PlacementConfig::default());
        // Weight 0.2: old mean 2^10, new interval 2^20 → 0.2·2^20 + 0.8·2^10 (a log-space
        // average would give 2^12).
        let v = p.rate_ewma(10.0, 20.0);
        assert!((v.exp2() - (0.2 * 1048576.0 + 0.8 * 1024.0)).abs() < 1e-6);
        assert_eq!(p.rate_ewma(f64::NAN, 7.0), 7.0);
    }

    #[test]
    fn checkpoint_writes_are_predicted_longer() {
        let mut p = LifetimePolicy::new(&PlacementConfig::default());
        // Two pages with the same history (interval 2^16); a boundary between 16 and 18.
        for &id in &[1u64, 2] {
            p.place(&w(id, id * 4096, 4096));
        }
        for i in 0..15u64 {
            p.place(&w(100 + i, (100 + i) * 4096, 4096));
        }
        p.bounds = Some(vec![17.0]);
        assert_eq!(p.place(&w(1, 1 << 20, 4096)), 2); // eviction write: 2^16 → short
        p.observe(&Event::CheckpointBegin { time_ns: 0, id: 1 });
        assert!(p.in_checkpoint);
        // Same interval (2^16 + one page) but written by the checkpoint: +2 octaves → long.
        assert_eq!(p.place(&w(2, 2 << 20, 4096)), 3);
        p.observe(&Event::CheckpointCommit { time_ns: 0, id: 1 });
        assert!(!p.in_checkpoint);
    }

    #[test]
    fn folds() {
        for s in 2..=16u8 {
            let mut p = LifetimePolicy::new(&PlacementConfig {
                streams: s,
                ..Default::default()
            });
            assert!(p.place(&w(1, 0, 4096)) < s);
            assert!(p.first_bucket + p.buckets <= s);
            let all = LifetimePolicy::new(&PlacementConfig {
                streams: s,
                lifetime: LifetimeConfig {
                    buckets: 16,
                    ..Default::default()
                },
                ..Default::default()
            });
            assert_eq!(all.first_bucket + all.buckets, s);
        }
    }

    /// The untracked blocks' lives end as a scan of every block would end them: random
    /// writes, frees and truncations of one file, checked against a brute-force model.
    #[test]
    fn untracked_blocks_die_when_anything_overlaps_them() {
        // 4 KiB blocks stay in the paged store, 512-byte ones move to the ordered one; the
        // last run starts on the grid and leaves it half way.
        for (unit, leave_at) in [(4096, None), (512, None), (4096, Some(10_000))] {
            untracked_blocks_die_as_a_model_says(unit, leave_at);
        }
    }

    fn untracked_blocks_die_as_a_model_says(unit: u64, leave_at: Option<u64>) {
        let mut p = LifetimePolicy::new(&PlacementConfig::default());
        let mut model: BTreeMap<u64, u64> = BTreeMap::new(); // offset -> end
        let mut x: u64 = 12345;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for step in 0..20_000 {
            let unit = if leave_at.is_some_and(|s| step >= s) {
                512
            } else {
                unit
            };
            let off = next(4096) * unit;
            let len = (1 + next(64)) * unit;
            let kill = |model: &mut BTreeMap<u64, u64>, a: u64, b: u64| {
                model.retain(|&o, &mut e| !(o < b && e > a));
            };
            match next(10) {
                0 => {
                    p.observe(&Event::Free {
                        time_ns: 0,
                        file: 1,
                        offset: off,
                        len,
                    });
                    kill(&mut model, off, off + len);
                }
                1 if step % 50 == 0 => {
                    p.observe(&Event::FileTruncate {
                        time_ns: 0,
                        file: 1,
                        len: off,
                    });
                    kill(&mut model, off, u64::MAX);
                }
                _ => {
                    p.place(&w(0, off, len as u32));
                    kill(&mut model, off, off + len);
                    model.insert(off, off + len);
                }
            }
            let got: BTreeMap<u64, u64> = p.untracked.ranges(1).into_iter().collect();
            assert_eq!(got, model, "unit {unit}, step {step}");
        }
    }
}
