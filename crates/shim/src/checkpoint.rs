//! Checkpoints seen from outside the engine.
//!
//! **`turtle` (the default, exact for WiredTiger).** A WiredTiger checkpoint writes every dirty
//! tree, syncs each tree's file, checkpoints and syncs the metadata file `WiredTiger.wt`, then
//! writes `WiredTiger.turtle.set`, syncs it and renames it onto `WiredTiger.turtle`: that
//! rename is the instant the checkpoint becomes the one recovery starts from. So:
//! - **CheckpointBegin** is emitted at the first sync of a checkpointed file
//!   (`FLASHDOC_SHIM_CHECKPOINT_FILES`, default `*.wt,!WiredTiger.wt`) after the previous
//!   commit: the start of the checkpoint's sync phase. Its tree writes came before and cannot
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
//! **`sync-gap=SECONDS`** (the CSV import format's rule). A checkpoint is the first sync of a
//! checkpointed file after at least SECONDS with none; Begin and Commit are emitted together
//! there. It needs no engine-specific file, but it sees one checkpoint per burst of syncs, so
//! it misses every checkpoint that follows the previous one's syncs within SECONDS: with
//! WiredTiger's `checkpoint=(wait=1)` and the usual 2 s gap it finds almost none.
//!
//! **`none`**: no checkpoint events.

use placement::Event;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointRule {
    Turtle { turtle: String },
    SyncGap { gap_ns: u64 },
    Off,
}

impl CheckpointRule {
    pub fn parse(spec: &str, turtle: &str) -> Result<Self, String> {
        match spec {
            "turtle" => Ok(CheckpointRule::Turtle {
                turtle: turtle.to_string(),
            }),
            "none" => Ok(CheckpointRule::Off),
            s => {
                let secs = s
                    .strip_prefix("sync-gap=")
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e6)
                    .ok_or_else(|| {
                        format!("{spec:?}: one of turtle, sync-gap=SECONDS (> 0), none")
                    })?;
                Ok(CheckpointRule::SyncGap {
                    gap_ns: (secs * 1e9) as u64,
                })
            }
        }
    }
}

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

    /// A successful fsync/fdatasync of a checkpointed file (the caller filters by
    /// `FLASHDOC_SHIM_CHECKPOINT_FILES`). Pushes the events it makes.
    pub fn on_sync(&mut self, time_ns: u64, out: &mut Vec<Event>) {
        match self.rule {
            CheckpointRule::Turtle { .. } => {
                if self.open.is_none() {
                    let id = self.take_id();
                    self.open = Some(id);
                    out.push(Event::CheckpointBegin { time_ns, id });
                }
            }
            CheckpointRule::SyncGap { gap_ns } => {
                let quiet = self
                    .last_sync_ns
                    .is_none_or(|last| time_ns.saturating_sub(last) >= gap_ns);
                self.last_sync_ns = Some(time_ns);
                if quiet {
                    let id = self.take_id();
                    out.push(Event::CheckpointBegin { time_ns, id });
                    out.push(Event::CheckpointCommit { time_ns, id });
                }
            }
            CheckpointRule::Off => {}
        }
    }

    /// A successful rename whose destination's base name is `dest_base`.
    pub fn on_rename(&mut self, time_ns: u64, dest_base: &str, out: &mut Vec<Event>) {
        if let CheckpointRule::Turtle { turtle } = &self.rule {
            if dest_base == turtle {
                if let Some(id) = self.open.take() {
                    out.push(Event::CheckpointCommit { time_ns, id });
                }
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
        CheckpointDetector::new(CheckpointRule::parse("turtle", "WiredTiger.turtle").unwrap())
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
        let mut d = CheckpointDetector::new(CheckpointRule::parse("sync-gap=2", "t").unwrap());
        let mut ev = Vec::new();
        for t in [0, s / 2, s, 3 * s + 1, 4 * s, 7 * s] {
            d.on_sync(t, &mut ev);
        }
        d.on_rename(8 * s, "t", &mut ev); // ignored by this rule
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
    fn rules_parse() {
        assert_eq!(
            CheckpointRule::parse("none", "t").unwrap(),
            CheckpointRule::Off
        );
        assert_eq!(
            CheckpointRule::parse("sync-gap=0.5", "t").unwrap(),
            CheckpointRule::SyncGap {
                gap_ns: 500_000_000
            }
        );
        for bad in [
            "",
            "gap",
            "sync-gap=",
            "sync-gap=0",
            "sync-gap=-1",
            "sync-gap=inf",
        ] {
            assert!(CheckpointRule::parse(bad, "t").is_err(), "{bad}");
        }
        let mut off = CheckpointDetector::new(CheckpointRule::Off);
        let mut ev = Vec::new();
        off.on_sync(0, &mut ev);
        off.on_rename(1, "t", &mut ev);
        assert!(ev.is_empty());
    }
}
