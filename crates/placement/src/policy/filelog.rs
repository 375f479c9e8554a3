//! `filelog` (flashdoc's own): every busy table file writes into a stream of its own, in the
//! order it writes; rarely written table files share one stream; the journal has its own.
//!
//! Why: without TRIM the device learns that a block is dead only when its LBA is written
//! again, so what decides write amplification is *the order in which the engine reuses the
//! space of dead blocks*. flashdoc's engine co-designs that order: its sweep allocator
//! (`engine::AllocPolicy::Sweep`) reuses a file's free space in the order it was last
//! written, as a log does. A block then dies when its file's sweep comes round to it — if
//! its page has been rewritten by then — so the blocks a file wrote together die together.
//! An erase block keeps that property only if it holds *one* file's consecutive writes:
//! another file sweeps at another speed, and a stream shared with it mixes two death clocks.
//! Splitting one file's writes further (by predicted lifetime) slows each stream's fill, so
//! an erase block spans a longer stretch of the sweep and its pages die further apart; on
//! the lab's traces that cost more than the prediction bought, because a leaf's next rewrite
//! is close to unpredictable from its history (docs/placement.md, "what predicts a death").
//!
//! **The journal is not long-lived.** On an aged device without discard a removed journal
//! file's pages die when the filesystem hands its LBAs to the next journal file, which is
//! soon: the journal is a short, steady clock of its own. An earlier layout put rare table
//! files on the journal's stream as "long-lived"; on the medium LinkBench traces that mix
//! cost 60 % more flash writes per operation than `file` (which never mixes them), and
//! giving the journal its own stream took filelog from 49.9 to 30.6 flash writes per
//! operation on linkbench-mixed (docs/placement.md, "the journal's stream").
//!
//! - **Busy and rare files.** At each checkpoint commit every table file's bytes written are
//!   folded into a moving sum (`decay` = ½ per commit: older checkpoints weigh less). A file
//!   whose share of all table bytes is below `cold_share` (2 %) is *rare*: its blocks are
//!   rewritten seldom and live long — rare files share one stream. The others are *busy*,
//!   ranked by bytes: the busiest gets the first busy stream, the next the second, and so
//!   on; when busy files outnumber the busy streams, the least busy ones share the last.
//! - **Until the first commit** a file has no rank and goes to the last busy stream.
//! - **Extent lists, descriptors and overflow blocks** go with their file.
//! - **Metadata** (the turtle file, < 0.1 % of writes) has its own stream where the budget
//!   allows, else it joins the rare files.
//!
//! | streams | metadata | journal | rare table files | busy table files |
//! | --- | --- | --- | --- | --- |
//! | ≥ 5 | 0 | 1 | 2 | 3..S−1 (5 on an 8-stream device) |
//! | 4 | 0 | 1 | 0 | 2, 3 |
//! | 3 | 0 | 1 | 0 | 2 |
//! | 2 | 0 | 0 | 1 | 1 |
//!
//! Deterministic: its state is a function of the events it saw (tested), it never uses
//! wall-clock time or the write's offset, so the engine can choose a write's stream before it
//! chooses where the write goes.

use super::{is_table, FileLogConfig, PlacementConfig, Policy};
use crate::event::{Event, FileId, FileKind, WriteEvent};
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct FileLogPolicy {
    cfg: FileLogConfig,
    metadata: u8,
    journal: u8,
    /// The stream that rarely written table files share.
    rare: u8,
    first_busy: u8,
    busy: u8,
    /// Bytes each table file wrote since the last commit.
    written: HashMap<FileId, u64>,
    /// The decayed sum of each table file's bytes at the last commit.
    weight: HashMap<FileId, f64>,
    /// Each ranked file's stream.
    stream: HashMap<FileId, u8>,
}

impl FileLogPolicy {
    pub fn new(cfg: &PlacementConfig) -> Self {
        // (metadata, journal, rare, first busy): the table in the module docs.
        let (metadata, journal, rare, first_busy) = match cfg.streams {
            s if s >= 5 => (0, 1, 2, 3),
            3 | 4 => (0, 1, 0, 2),
            _ => (0, 0, 1, 1),
        };
        assert!(first_busy < cfg.streams, "filelog needs at least 2 streams");
        FileLogPolicy {
            cfg: cfg.filelog.clone(),
            metadata,
            journal,
            rare,
            first_busy,
            busy: cfg.streams - first_busy,
            written: HashMap::new(),
            weight: HashMap::new(),
            stream: HashMap::new(),
        }
    }

    /// The stream of each ranked table file (for reports and tests).
    pub fn file_streams(&self) -> &HashMap<FileId, u8> {
        &self.stream
    }

    /// Folds the window's bytes into the weights and ranks the files again.
    fn rank(&mut self) {
        for (f, w) in self.weight.iter_mut() {
            *w *= self.cfg.decay;
            *w += self.written.remove(f).unwrap_or(0) as f64;
        }
        for (f, b) in self.written.drain() {
            self.weight.insert(f, b as f64);
        }
        let total: f64 = self.weight.values().sum();
        let mut order: Vec<(f64, FileId)> = self.weight.iter().map(|(&f, &w)| (w, f)).collect();
        // Busiest first; equal weights by file id, so the ranking is deterministic.
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        self.stream.clear();
        let mut next = 0u8;
        for (w, f) in order {
            let s = if total > 0.0 && w < self.cfg.cold_share * total {
                self.rare
            } else {
                let s = self.first_busy + next.min(self.busy - 1);
                next = next.saturating_add(1);
                s
            };
            self.stream.insert(f, s);
        }
    }
}

impl Policy for FileLogPolicy {
    fn name(&self) -> &'static str {
        "filelog"
    }

    fn place(&mut self, w: &WriteEvent) -> u8 {
        match w.file_kind {
            FileKind::Metadata => self.metadata,
            FileKind::Journal => self.journal,
            _ => {
                debug_assert!(is_table(w.file_kind));
                *self.written.entry(w.file).or_default() += w.len as u64;
                self.stream
                    .get(&w.file)
                    .copied()
                    .unwrap_or(self.first_busy + self.busy - 1)
            }
        }
    }

    fn observe(&mut self, ev: &Event) {
        match ev {
            Event::CheckpointCommit { .. } => self.rank(),
            Event::FileRemove { file, .. } => {
                self.written.remove(file);
                self.weight.remove(file);
                self.stream.remove(file);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::{commit, w};

    #[test]
    fn busy_files_get_streams_by_rank_and_rare_files_share_one() {
        let mut p = FileLogPolicy::new(&PlacementConfig::default());
        // Before any commit: the last busy stream (7).
        assert_eq!(p.place(&w(1, FileKind::Collection, 0, 4096)), 7);
        // File 1: 60 %, file 2: 39 %, file 3: 1 % (rare) of the window's table bytes.
        for _ in 0..59 {
            p.place(&w(1, FileKind::Collection, 0, 4096));
        }
        for _ in 0..39 {
            p.place(&w(2, FileKind::Index, 0, 4096));
        }
        p.place(&w(3, FileKind::Index, 0, 4096));
        p.observe(&commit());
        assert_eq!(p.place(&w(1, FileKind::Collection, 0, 4096)), 3);
        assert_eq!(p.place(&w(2, FileKind::Index, 0, 4096)), 4);
        assert_eq!(p.place(&w(3, FileKind::Index, 0, 4096)), 2);
        assert_eq!(p.place(&w(9, FileKind::Journal, 0, 4096)), 1);
        assert_eq!(p.place(&w(8, FileKind::Metadata, 0, 4096)), 0);
    }

    #[test]
    fn older_windows_weigh_half_as_much() {
        let mut p = FileLogPolicy::new(&PlacementConfig::default());
        // Window 1: file 1 writes 100 pages, file 2 none. Window 2: file 2 writes 60, file 1
        // 0. Weights: file 1 100 · ½ = 50, file 2 60 → file 2 ranks first.
        for _ in 0..100 {
            p.place(&w(1, FileKind::Collection, 0, 4096));
        }
        p.observe(&commit());
        for _ in 0..60 {
            p.place(&w(2, FileKind::Collection, 0, 4096));
        }
        p.observe(&commit());
        assert_eq!(p.file_streams()[&2], 3);
        assert_eq!(p.file_streams()[&1], 4);
    }

    #[test]
    fn more_busy_files_than_streams_share_the_last() {
        let mut p = FileLogPolicy::new(&PlacementConfig {
            streams: 4,
            ..Default::default()
        });
        for f in 1..=4u32 {
            for _ in 0..(10 - f) {
                p.place(&w(f, FileKind::Collection, 0, 4096));
            }
        }
        p.observe(&commit());
        let s: Vec<u8> = (1..=4).map(|f| p.file_streams()[&f]).collect();
        assert_eq!(s, vec![2, 3, 3, 3]);
    }

    /// The module's table, and its rule: from 3 streams up the journal never shares a stream
    /// with a table file (a rare one included), and every stream is inside the budget.
    #[test]
    fn layout_per_stream_budget_keeps_the_journal_apart() {
        for streams in 2..=16u8 {
            let mut p = FileLogPolicy::new(&PlacementConfig {
                streams,
                ..Default::default()
            });
            // One busy file (1) and one rare file (2: 1 % of the table bytes).
            for _ in 0..99 {
                p.place(&w(1, FileKind::Collection, 0, 4096));
            }
            p.place(&w(2, FileKind::Index, 0, 4096));
            p.observe(&commit());
            let journal = p.place(&w(9, FileKind::Journal, 0, 4096));
            let meta = p.place(&w(8, FileKind::Metadata, 0, 4096));
            let busy = p.place(&w(1, FileKind::Collection, 0, 4096));
            let rare = p.place(&w(2, FileKind::Index, 0, 4096));
            for s in [journal, meta, busy, rare] {
                assert!(s < streams, "{streams} streams: stream {s}");
            }
            let want = match streams {
                2 => (0, 0, 1, 1),
                3 | 4 => (1, 0, 2, 0),
                _ => (1, 0, 3, 2),
            };
            assert_eq!((journal, meta, busy, rare), want, "{streams} streams");
            if streams >= 3 {
                assert!(journal != busy && journal != rare);
            }
        }
    }
}
