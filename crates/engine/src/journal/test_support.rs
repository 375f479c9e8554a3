//! Fixtures shared by the journal's test files: a configuration, a fresh directory, and a
//! replay that collects what it reads.

use super::*;
use std::path::PathBuf;
use std::time::Duration;

pub(super) fn config(dir: &Path, file_max: u64, compressor: JournalCompressor) -> JournalConfig {
    JournalConfig {
        dir: dir.to_path_buf(),
        file_max,
        commit_interval: Duration::from_millis(100),
        compressor,
        preallocate: true,
        block_aligned: false,
    }
}

/// A temporary directory and, inside it, the journal's directory (not yet created).
pub(super) fn journal_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    (tmp, dir)
}

/// Replays `dir` from `from`, collecting every record's LSN and payload.
pub(super) fn replay_all(dir: &Path, from: Lsn) -> (Vec<(Lsn, Vec<u8>)>, ReplayOutcome) {
    let mut got = Vec::new();
    let outcome = replay(dir, from, |lsn, p| {
        got.push((lsn, p.to_vec()));
        Ok(())
    })
    .unwrap();
    (got, outcome)
}

/// Replays `dir` from its start, collecting the payloads only.
pub(super) fn replay_payloads(dir: &Path) -> (Vec<Vec<u8>>, ReplayOutcome) {
    let (got, outcome) = replay_all(dir, Lsn::default());
    (got.into_iter().map(|(_, p)| p).collect(), outcome)
}
