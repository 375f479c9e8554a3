//! The journal under a failed sync (for good) and a full disk (stalled, then resumed), with the
//! fault-injecting backend.

use super::test_support::{self, journal_dir, replay_payloads};
use super::*;
use crate::io::{Fault, FaultOp, FaultyFiles, FlashConfig};
use std::time::Duration;

fn faulty_io() -> (Arc<Io>, Arc<FaultyFiles>) {
    let faults = Arc::new(FaultyFiles::new());
    let io = Io::new(None, &FlashConfig::default(), Some(faults.clone())).unwrap();
    (Arc::new(io), faults)
}

fn config(dir: &Path) -> JournalConfig {
    JournalConfig {
        commit_interval: Duration::from_millis(20),
        ..test_support::config(dir, 4 << 20, JournalCompressor::None)
    }
}

fn fault(op: FaultOp, skip: u64, times: u64, errno: i32) -> Fault {
    Fault {
        op,
        kind: Some(FileKind::Journal),
        skip,
        times,
        errno,
    }
}

#[test]
fn a_failed_sync_is_never_retried_and_refuses_every_later_record() {
    for schedule in [Schedule::Background, Schedule::Inline] {
        let (_tmp, dir) = journal_dir();
        let (io, faults) = faulty_io();
        let j = Journal::open_with(config(&dir), io.clone(), schedule).unwrap();
        let kept = j.append(b"acknowledged").unwrap();
        j.sync_to(kept).unwrap();
        faults.arm(fault(FaultOp::Sync, 0, 1, libc::EIO));
        let lost = j.append(b"refused").unwrap();
        let err = j.sync_to(lost).unwrap_err();
        assert!(
            matches!(&err, Error::WriteFailed(c) if c.errno == Some(libc::EIO)),
            "{err}"
        );
        // The fault fired once: a retried sync would succeed now, and must never be asked for.
        for _ in 0..3 {
            assert!(matches!(j.sync_all(), Err(Error::WriteFailed(_))));
            assert!(matches!(j.append(b"after"), Err(Error::WriteFailed(_))));
        }
        assert_eq!(faults.injected(), 1, "{schedule:?}");
        assert!(io.write_failure().is_some());
        assert!(j.close().is_err());
        drop(j);
        let (got, outcome) = replay_payloads(&dir);
        assert_eq!(got[0], b"acknowledged");
        assert!(
            got.len() <= 2 && !got.iter().any(|p| p == b"after"),
            "{got:?}"
        );
        assert!(outcome.corruption.is_none());
    }
}

/// The flusher's guard: nothing is written after the journal failed for good. Called directly,
/// as no path reaches it once `append` and `sync_to` refuse.
#[test]
#[should_panic(expected = "the journal flushes nothing after it failed for good")]
fn a_flush_after_the_journal_failed_trips_its_assertion() {
    let (_tmp, dir) = journal_dir();
    let (io, faults) = faulty_io();
    let j = Journal::open_with(config(&dir), io, Schedule::Inline).unwrap();
    j.append(b"x").unwrap();
    faults.arm(fault(FaultOp::Sync, 0, 1, libc::EIO));
    assert!(j.sync_all().is_err());
    let chunk = Chunk {
        file: 1,
        offset: FILE_HEADER_SIZE,
        cap: 4 << 20,
        bytes: vec![0; 128],
    };
    let target = Lsn {
        file: 1,
        offset: FILE_HEADER_SIZE + 128,
    };
    j.inline
        .as_ref()
        .unwrap()
        .lock()
        .flush((vec![chunk], target));
}

/// A flush larger than a slot fails on a full disk after its first slot reached the file: a
/// record is cut at the slot's end. Until space is freed the journal refuses; a crash then
/// leaves a torn tail (not corruption) after the acknowledged records; after space is freed
/// the same records are written again and replay finds every one.
#[test]
fn a_flush_cut_by_a_full_disk_is_a_torn_tail_then_resumes() {
    let (_tmp, dir) = journal_dir();
    let (io, faults) = faulty_io();
    let j = Journal::open_with(config(&dir), io.clone(), Schedule::Inline).unwrap();
    let kept = j.append(b"acknowledged").unwrap();
    j.sync_to(kept).unwrap();
    // 5 records of 100 KB: the flush is three slot writes; the second fails.
    let big: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i + 1; 100_000]).collect();
    for p in &big {
        j.append(p).unwrap();
    }
    faults.arm(fault(FaultOp::Write, 1, u64::MAX, libc::ENOSPC));
    let err = j.sync_all().unwrap_err();
    assert!(err.is_disk_full(), "{err}");
    assert!(j.append(b"refused").unwrap_err().is_disk_full());
    assert!(io.write_failure().is_none());
    // As after a crash now: the acknowledged record, then at most the whole records of the
    // first slot, then a torn one — a tail, not corruption.
    let (got, outcome) = replay_payloads(&dir);
    assert_eq!(got[0], b"acknowledged");
    assert!(got.len() <= 3, "only records the first slot holds whole");
    assert_eq!(&got[1..], &big[..got.len() - 1]);
    assert!(outcome.corruption.is_none(), "{:?}", outcome.corruption);
    assert!(outcome.torn_tail.is_some());
    // Space is freed: the stalled records are written again, and the journal goes on.
    faults.arm(fault(FaultOp::Write, 0, 0, libc::ENOSPC));
    j.retry_stalled();
    let after = j.append(b"after").unwrap();
    j.sync_to(after).unwrap();
    j.close().unwrap();
    drop(j);
    let (got, outcome) = replay_payloads(&dir);
    let mut want = vec![b"acknowledged".to_vec()];
    want.extend(big);
    want.push(b"after".to_vec());
    assert_eq!(got, want);
    assert!(outcome.torn_tail.is_none() && outcome.corruption.is_none());
}

/// The next file cannot be created or preallocated on a full disk: the half-made file is
/// removed, so the retry creates it afresh and replay finds no headerless file.
#[test]
fn a_new_file_that_a_full_disk_refuses_is_removed_and_made_again() {
    let (_tmp, dir) = journal_dir();
    let (io, faults) = faulty_io();
    let mut cfg = config(&dir);
    cfg.file_max = 64 << 10;
    let j = Journal::open_with(cfg, io, Schedule::Inline).unwrap();
    let first = j.append(&[7u8; 40_000]).unwrap();
    j.sync_to(first).unwrap();
    // The second record starts file 2; its header write fails.
    let second = j.append(&[8u8; 40_000]).unwrap();
    assert_eq!(second.file, first.file + 1);
    faults.arm(fault(FaultOp::Write, 0, 2, libc::ENOSPC));
    assert!(j.sync_to(second).unwrap_err().is_disk_full());
    assert!(!dir.join(file_name(second.file)).exists());
    assert!(j.sync_to(second).unwrap_err().is_disk_full());
    j.sync_to(second).unwrap();
    j.close().unwrap();
    drop(j);
    let (got, outcome) = replay_payloads(&dir);
    assert_eq!(got, vec![vec![7u8; 40_000], vec![8u8; 40_000]]);
    assert!(outcome.torn_tail.is_none(), "{:?}", outcome.torn_tail);
}
