//! Checkpoints seen from outside the engine.
//!
//! **`turtle` (the default, exact for WiredTiger).** A WiredTiger checkpoint writes every dirty
//! tree, syncs each tree's file, checkpoints and syncs the metadata file `WiredTiger.wt`, then
//! writes `WiredTiger.turtle.set`, syncs it and renames it onto `WiredTiger.turtle`: that
//! rename is the instant the checkpoint becomes the one recovery starts from. So:
//! - **CheckpointBegin** is emitted at the first sync of a tree file (a `*.wt` file other than
//!   the metadata file `WiredTiger.wt`, [`is_tree_file`]) after the previous commit: the start
//!   of the checkpoint's sync phase. Its tree writes came before and cannot
//!   be told from eviction writes by their calls.
//! - **CheckpointCommit** is emitted at a rename onto the turtle file, if a Begin is open.
//!
//!   WiredTiger also rewrites the turtle file when it creates a database and when
//!   `conn->close` closes the metadata file after its final checkpoint. Neither syncs a tree
//!   file first, so neither opens a Begin, and neither is counted: the count equals
//!   WiredTiger's own `checkpoints_total_succeed` statistic (tested against a real WiredTiger).
//!   A checkpoint that changed no tree file but the metadata (possible only after schema
//!   changes alone) is missed by this rule.
//!
//! **`gap`, `gap:SECONDS`** (2 s; the CSV import format's rule). A checkpoint is the first sync
//! of a tree file after at least SECONDS with none; Begin and Commit are emitted together
//! there (the importer, which sees the whole trace, commits at the burst's last sync instead;
//! online the end of a burst is known only after it). It needs no engine-specific file, but it sees one checkpoint per burst of syncs, so
//! it misses every checkpoint that follows the previous one's syncs within SECONDS: with
//! WiredTiger's `checkpoint=(wait=1)` and the usual 2 s gap it finds almost none.
//!
//! **`none`**: no checkpoint events.
//!
//! The rules are named and parsed as the importer's (`placement::import::CheckpointRule`).

use placement::import::CheckpointRule;
pub use placement::import::{is_tree_file, TURTLE};
use placement::Event;

#[derive(Debug)]
pub struct CheckpointDetector {
    rule: CheckpointRule,
    /// The id of the checkpoint whose Begin is emitted and whose Commit is not.
    open: Option<u64>,
    next_id: u64,
    last_sync_ns: Option<u64>,
}

impl CheckpointDetector {
    pub fn new(rule: CheckpointRule) -> Self {
        CheckpointDetector {
            rule,
            open: None,
            next_id: 1,
            last_sync_ns: None,
        }
    }

    /// A successful fsync/fdatasync of a tree file (the caller filters with [`is_tree_file`]).
    /// Pushes the events it makes.
    pub fn on_sync(&mut self, time_ns: u64, out: &mut Vec<Event>) {
        match self.rule {
            CheckpointRule::Turtle => {
                if self.open.is_none() {
                    let id = self.take_id();
                    self.open = Some(id);
                    out.push(Event::CheckpointBegin { time_ns, id });
                }
            }
            CheckpointRule::Gap { quiet_ns } => {
                let quiet = self
                    .last_sync_ns
                    .is_none_or(|last| time_ns.saturating_sub(last) >= quiet_ns);
                self.last_sync_ns = Some(time_ns);
                if quiet {
                    let id = self.take_id();
                    out.push(Event::CheckpointBegin { time_ns, id });
                    out.push(Event::CheckpointCommit { time_ns, id });
                }
            }
            CheckpointRule::None => {}
        }
    }

    /// A successful rename whose destination's base name is `dest_base`.
    pub fn on_rename(&mut self, time_ns: u64, dest_base: &str, out: &mut Vec<Event>) {
        if self.rule == CheckpointRule::Turtle && dest_base == TURTLE {
            if let Some(id) = self.open.take() {
                out.push(Event::CheckpointCommit { time_ns, id });
            }
        }
    }

    /// Checkpoints committed so far.
    pub fn committed(&self) -> u64 {
        self.next_id - 1 - self.open.is_some() as u64
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turtle() -> CheckpointDetector {
        CheckpointDetector::new(CheckpointRule::Turtle)
    }

    #[test]
    fn turtle_rule_follows_wiredtigers_sequence() {
        let mut d = turtle();
        let mut ev = Vec::new();
        // Database creation: the turtle is written before any tree file is synced.
        d.on_rename(1, "WiredTiger.turtle", &mut ev);
        assert!(ev.is_empty());
        // A checkpoint: tree syncs, then the turtle rename.
        d.on_sync(10, &mut ev);
        d.on_sync(11, &mut ev);
        d.on_rename(12, "WiredTigerLog.0000000002", &mut ev);
        d.on_rename(13, "WiredTiger.turtle", &mut ev);
        assert_eq!(
            ev,
            vec![
                Event::CheckpointBegin { time_ns: 10, id: 1 },
                Event::CheckpointCommit { time_ns: 13, id: 1 }
            ]
        );
        // conn->close's metadata-only rewrite after its final checkpoint: not a checkpoint.
        ev.clear();
        d.on_rename(20, "WiredTiger.turtle", &mut ev);
        assert!(ev.is_empty());
        assert_eq!(d.committed(), 1);
        d.on_sync(30, &mut ev);
        assert_eq!(d.committed(), 1, "begun, not committed");
        d.on_rename(31, "WiredTiger.turtle", &mut ev);
        assert_eq!(d.committed(), 2);
        assert_eq!(ev[1], Event::CheckpointCommit { time_ns: 31, id: 2 });
    }

    #[test]
    fn sync_gap_rule_sees_one_checkpoint_per_quiet_gap() {
        let s = 1_000_000_000;
        let mut d = CheckpointDetector::new(CheckpointRule::parse("gap").unwrap());
        let mut ev = Vec::new();
        for t in [0, s / 2, s, 3 * s + 1, 4 * s, 7 * s] {
            d.on_sync(t, &mut ev);
        }
        d.on_rename(8 * s, TURTLE, &mut ev); // ignored by this rule
        let commits: Vec<u64> = ev
            .iter()
            .filter_map(|e| match e {
                Event::CheckpointCommit { time_ns, .. } => Some(*time_ns),
                _ => None,
            })
            .collect();
        assert_eq!(commits, vec![0, 3 * s + 1, 7 * s]);
        assert_eq!(d.committed(), 3);
    }

    #[test]
    fn tree_files_and_no_rule() {
        assert!(is_tree_file("collection-0-1.wt") && is_tree_file("db/index-1-2.wt"));
        assert!(is_tree_file("WiredTigerHS.wt") && is_tree_file("sizeStorer.wt"));
        assert!(!is_tree_file("WiredTiger.wt") && !is_tree_file("WiredTiger.turtle"));
        assert!(!is_tree_file("journal/WiredTigerLog.0000000001"));
        let mut off = CheckpointDetector::new(CheckpointRule::None);
        let mut ev = Vec::new();
        off.on_sync(0, &mut ev);
        off.on_rename(1, TURTLE, &mut ev);
        assert!(ev.is_empty());
    }
}
