//! Checkpoint-driven space reuse, checked from the engine's event stream alone:
//! - no write ever lands on space that is still allocated (written and not yet announced free),
//!   so never on space the last durable checkpoint references;
//! - every write lands either past the file's high-water mark or in space announced free;
//! - in steady random updates, the writes of checkpoint interval k land mostly in the space
//!   released when checkpoint k−1 became durable, so the file's write heat swaps between two
//!   regions at every checkpoint (seed 000 Fig. 3, seed 003 Fig. 2).

use engine::{DiskEngine, EngineConfig, KvEngine, TableConfig};
use placement::{CollectingObserver, Event, FileKind, PageKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

const UNIT: u64 = 4096;

#[derive(Default)]
struct FileModel {
    live: HashSet<u64>,
    /// Free units, with whether they were released by a checkpoint's commit (vs. freed and
    /// reusable at once within the interval).
    free: HashMap<u64, bool>,
    high_water: u64,
}

struct Interval {
    leaf_units: u64,
    from_commit_release: u64,
    from_eof: u64,
    offsets: Vec<u64>,
}

/// Loads a table, then updates about a third of its entries per round with a checkpoint
/// after each, without eviction (only checkpoints write, as in the WiredTiger experiment).
/// Returns the engine's events.
fn load_and_update() -> Vec<Event> {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let mut cfg = EngineConfig::new(dir.path());
    cfg.cache_size = 512 << 20; // no eviction: only checkpoints write, as in the WT experiment
    cfg.checkpoint_interval = None;
    cfg.observer = Some(obs.clone());
    let eng = DiskEngine::open(cfg).unwrap();
    let t = eng
        .create_table(
            "c",
            &TableConfig {
                compressor: engine::Compressor::None,
                ..TableConfig::collection().with_leaf_page_max(4096)
            },
        )
        .unwrap();
    let n = 6000u32;
    let val = vec![7u8; 500];
    for i in 0..n {
        eng.put(t, format!("user{i:08}").as_bytes(), &val).unwrap();
    }
    eng.checkpoint().unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    for _round in 0..8 {
        // Update about every page: the case where WiredTiger shows the two-region swap.
        for i in 0..n {
            if rng.gen_range(0..3) == 0 {
                let v = vec![rng.gen::<u8>(); 500];
                eng.put(t, format!("user{i:08}").as_bytes(), &v).unwrap();
            }
        }
        eng.checkpoint().unwrap();
    }
    eng.close().unwrap();
    obs.events()
}

impl FileModel {
    /// A write: asserts it lands on no live space and, below the
    /// high-water mark, only on space announced free. Returns (units reusing space a
    /// checkpoint's commit released, units past the high-water mark).
    fn write(&mut self, w: &placement::WriteEvent) -> (u64, u64) {
        let (start, end) = (w.offset / UNIT, (w.offset + w.len as u64) / UNIT);
        let mut released = 0;
        let mut eof = 0;
        for u in start..end {
            assert!(
                !self.live.contains(&u),
                "write at unit {u} of file {} overwrote live space ({:?})",
                w.file,
                w.page_kind
            );
            if u * UNIT >= self.high_water {
                eof += 1;
            } else {
                let by_commit = self.free.remove(&u).unwrap_or_else(|| {
                    panic!("write at unit {u} below the high-water mark reused space never freed")
                });
                released += by_commit as u64;
            }
            self.live.insert(u);
        }
        self.high_water = self.high_water.max(w.offset + w.len as u64);
        (released, eof)
    }
}

/// Replays the events against a model of each table file's space (asserting that no write
/// lands on live space, and no free frees space that is not live), and returns the leaf writes
/// of each checkpoint interval.
fn replay(events: Vec<Event>) -> Vec<Interval> {
    let mut files: HashMap<u32, FileModel> = HashMap::new();
    let mut table_files = HashSet::new();
    let mut intervals: Vec<Interval> = vec![];
    let mut after_commit = false;
    for ev in events {
        match ev {
            Event::FileCreate { file, kind, .. } => {
                if matches!(kind, FileKind::Collection | FileKind::Index) {
                    table_files.insert(file);
                    files.insert(file, FileModel::default());
                }
            }
            Event::CheckpointBegin { .. } => after_commit = false,
            Event::CheckpointCommit { .. } => {
                after_commit = true;
                intervals.push(Interval {
                    leaf_units: 0,
                    from_commit_release: 0,
                    from_eof: 0,
                    offsets: vec![],
                });
            }
            Event::FileTruncate { file, len, .. } => {
                if let Some(f) = files.get_mut(&file) {
                    let cut = len / UNIT;
                    assert!(f.live.iter().all(|&u| u < cut), "truncated live space");
                    f.free.retain(|&u, _| u < cut);
                    f.high_water = f.high_water.min(len);
                }
            }
            Event::Free {
                file, offset, len, ..
            } => {
                if let Some(f) = files.get_mut(&file) {
                    for u in offset / UNIT..(offset + len) / UNIT {
                        assert!(
                            f.live.remove(&u),
                            "freed unit {u} of file {file} that was not live"
                        );
                        f.free.insert(u, after_commit);
                    }
                }
            }
            Event::Write(w) if table_files.contains(&w.file) => {
                after_commit = false;
                let (released, eof) = files.get_mut(&w.file).unwrap().write(&w);
                if w.page_kind == PageKind::Leaf {
                    if let Some(iv) = intervals.last_mut() {
                        iv.leaf_units += (w.offset + w.len as u64) / UNIT - w.offset / UNIT;
                        iv.from_commit_release += released;
                        iv.from_eof += eof;
                        iv.offsets.push(w.offset);
                    }
                }
            }
            _ => {}
        }
    }
    intervals
}

#[test]
fn writes_reuse_space_freed_by_the_previous_checkpoint_and_never_live_space() {
    let intervals = replay(load_and_update());
    // Intervals 0 and 1 are the load's first checkpoint and the first update round; steady
    // state follows.
    let steady: Vec<&Interval> = intervals
        .iter()
        .skip(2)
        .filter(|iv| iv.leaf_units > 0)
        .collect();
    assert!(steady.len() >= 5, "{} steady intervals", steady.len());
    for (k, iv) in steady.iter().enumerate() {
        let share = iv.from_commit_release as f64 / iv.leaf_units as f64;
        assert!(
            share > 0.5,
            "interval {k}: only {:.0}% of leaf writes reused space released by the previous checkpoint ({} from EOF)",
            share * 100.0,
            iv.from_eof
        );
    }
    // The two regions: the median write offset flips side of the file's midpoint every interval.
    let medians: Vec<u64> = steady
        .iter()
        .map(|iv| {
            let mut o = iv.offsets.clone();
            o.sort_unstable();
            o[o.len() / 2]
        })
        .collect();
    eprintln!(
        "medians {medians:?} shares {:?}",
        steady
            .iter()
            .map(|iv| (iv.from_commit_release, iv.from_eof, iv.leaf_units))
            .collect::<Vec<_>>()
    );
    let mid = (medians.iter().min().unwrap() + medians.iter().max().unwrap()) / 2;
    let sides: Vec<bool> = medians.iter().map(|&m| m > mid).collect();
    for w in sides.windows(2) {
        assert_ne!(
            w[0], w[1],
            "write regions did not alternate: medians {medians:?}"
        );
    }
}
