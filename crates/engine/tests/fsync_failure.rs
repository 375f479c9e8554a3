//! A failed sync stops the engine's writes for good (fsyncgate, `io::failstop`); a full disk
//! does not. Faults come from the fault-injecting backend; each test reopens the database on
//! the plain OS backend and checks that every acknowledged write is there and nothing refused
//! is.

use engine::io::{Fault, FaultOp, FaultyFiles};
use engine::{DiskEngine, EngineConfig, Error, KvEngine, TableConfig, TableId, WriteBatch};
use engine::{Schedule, WriteOptions};
use placement::FileKind;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const J: WriteOptions = WriteOptions { sync: true };

fn config(dir: &Path, faults: Option<&Arc<FaultyFiles>>) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    cfg.cache_size = 4 << 20;
    cfg.checkpoint_interval = None;
    cfg.backend = faults.map(|f| f.clone() as Arc<dyn engine::io::Backend>);
    cfg
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn put_j(eng: &DiskEngine, t: TableId, i: u32) -> engine::Result<()> {
    let mut b = WriteBatch::new();
    b.put(t, key(i), vec![i as u8; 64]);
    eng.write(&b, J)
}

/// Opens on the fault backend, creates table `c` and writes `acked` keys with `j: true`.
fn faulty_engine(dir: &Path, acked: u32) -> (DiskEngine, TableId, Arc<FaultyFiles>) {
    let faults = Arc::new(FaultyFiles::new());
    let eng = DiskEngine::open(config(dir, Some(&faults))).unwrap();
    let t = eng.create_table("c", &TableConfig::collection()).unwrap();
    for i in 0..acked {
        put_j(&eng, t, i).unwrap();
    }
    (eng, t, faults)
}

fn arm(faults: &FaultyFiles, op: FaultOp, kind: Option<FileKind>, errno: i32, times: u64) {
    faults.arm(Fault {
        op,
        kind,
        skip: 0,
        times,
        errno,
    });
}

/// The refusal's cause, or a panic naming what came instead.
fn refused(res: engine::Result<()>) -> engine::io::WriteFailure {
    match res {
        Err(Error::WriteFailed(cause)) => cause,
        other => panic!("expected the write-failed refusal, got {other:?}"),
    }
}

/// After the failure: writes, table creation and checkpoints are refused with the same cause,
/// reads of acknowledged keys work, and the engine reports the cause.
fn assert_stopped(eng: &DiskEngine, t: TableId, acked: u32, cause: &engine::io::WriteFailure) {
    assert_eq!(&refused(put_j(eng, t, 900_000)), cause);
    let mut b = WriteBatch::new();
    b.put(t, b"no-sync".to_vec(), b"v".to_vec());
    assert_eq!(&refused(eng.write(&b, WriteOptions::default())), cause);
    assert_eq!(&refused(eng.checkpoint()), cause);
    assert_eq!(&refused(eng.sync()), cause);
    assert_eq!(
        &refused(eng.create_table("d", &TableConfig::collection()).map(drop)),
        cause
    );
    for i in 0..acked {
        assert_eq!(eng.get(t, &key(i)).unwrap(), Some(vec![i as u8; 64]));
    }
    assert_eq!(eng.write_failure().as_ref(), Some(cause));
    let stats = eng.stats();
    assert_eq!(
        stats["write_failure"]["errno"].as_i64(),
        cause.errno.map(i64::from),
        "{stats}"
    );
}

/// Reopens on the OS backend: every acknowledged key is there, no refused one is.
fn assert_recovers(dir: &Path, t: TableId, acked: u32) {
    let eng = DiskEngine::open(config(dir, None)).unwrap();
    for i in 0..acked {
        assert_eq!(
            eng.get(t, &key(i)).unwrap(),
            Some(vec![i as u8; 64]),
            "acknowledged key {i}"
        );
    }
    assert_eq!(eng.get(t, &key(900_000)).unwrap(), None);
    assert_eq!(eng.get(t, b"no-sync").unwrap(), None);
    assert!(eng.write_failure().is_none());
    put_j(&eng, t, 900_001).unwrap();
    eng.verify().unwrap();
}

#[test]
fn a_failed_journal_fdatasync_is_not_acknowledged_and_stops_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let (eng, t, faults) = faulty_engine(dir.path(), 200);
    arm(
        &faults,
        FaultOp::Sync,
        Some(FileKind::Journal),
        libc::EIO,
        1,
    );
    let cause = refused(put_j(&eng, t, 200));
    assert_eq!(cause.errno, Some(libc::EIO));
    assert_eq!(cause.operation, "fdatasync");
    assert!(
        cause.path.to_string_lossy().contains("FlashdocLog."),
        "{cause}"
    );
    assert_eq!(faults.injected(), 1);
    // The backend would sync again now (the fault fired once): nothing may ask it to and
    // report success (fsyncgate).
    assert_stopped(&eng, t, 200, &cause);
    assert!(eng.close().is_err(), "a close cannot checkpoint either");
    drop(eng);
    assert_recovers(dir.path(), t, 200);
}

#[test]
fn a_failed_table_file_sync_in_a_checkpoint_stops_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let (eng, t, faults) = faulty_engine(dir.path(), 300);
    arm(
        &faults,
        FaultOp::Sync,
        Some(FileKind::Collection),
        libc::EIO,
        1,
    );
    let cause = refused(eng.checkpoint());
    assert!(
        cause.path.starts_with(dir.path()) && cause.path.is_file(),
        "{cause}"
    );
    assert_stopped(&eng, t, 300, &cause);
    drop(eng);
    assert_recovers(dir.path(), t, 300);
}

#[test]
fn a_failed_metadata_sync_stops_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let (eng, t, faults) = faulty_engine(dir.path(), 100);
    arm(
        &faults,
        FaultOp::Sync,
        Some(FileKind::Metadata),
        libc::EIO,
        1,
    );
    let cause = refused(eng.checkpoint());
    assert_eq!(cause.operation, "fsync");
    assert!(cause.path.to_string_lossy().contains("turtle"), "{cause}");
    assert_stopped(&eng, t, 100, &cause);
    drop(eng);
    assert_recovers(dir.path(), t, 100);
}

#[test]
fn a_failed_directory_sync_stops_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let (eng, t, faults) = faulty_engine(dir.path(), 100);
    arm(&faults, FaultOp::SyncDir, None, libc::EIO, 1);
    let cause = refused(eng.checkpoint());
    assert_eq!(cause.operation, "fsync directory");
    assert_eq!(cause.path, dir.path());
    assert_stopped(&eng, t, 100, &cause);
    drop(eng);
    assert_recovers(dir.path(), t, 100);
}

#[test]
fn enospc_from_fsync_is_a_failed_sync_not_a_full_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (eng, t, faults) = faulty_engine(dir.path(), 50);
    arm(
        &faults,
        FaultOp::Sync,
        Some(FileKind::Journal),
        libc::ENOSPC,
        1,
    );
    let res = put_j(&eng, t, 50);
    assert!(!res.as_ref().unwrap_err().is_disk_full(), "{res:?}");
    let cause = refused(res);
    assert_eq!(cause.errno, Some(libc::ENOSPC));
    assert!(cause.to_string().contains("ENOSPC"), "{cause}");
    assert_stopped(&eng, t, 50, &cause);
    drop(eng);
    assert_recovers(dir.path(), t, 50);
}

/// Retries `j: true` writes of key `i` until one is acknowledged; returns how many were refused
/// with a full disk first. Any other error fails the test.
fn put_until_acknowledged(eng: &DiskEngine, t: TableId, i: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut refusals = 0;
    loop {
        match put_j(eng, t, i) {
            Ok(()) => return refusals,
            Err(e) if e.is_disk_full() => refusals += 1,
            Err(e) => panic!("a full disk must not fail writes for good: {e}"),
        }
        assert!(Instant::now() < deadline, "writes never resumed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_journal_write_on_a_full_disk_is_refused_then_writes_resume() {
    for schedule in [Schedule::Background, Schedule::Inline] {
        let dir = tempfile::tempdir().unwrap();
        let faults = Arc::new(FaultyFiles::new());
        let mut cfg = config(dir.path(), Some(&faults));
        cfg.schedule = schedule;
        let eng = DiskEngine::open(cfg).unwrap();
        let t = eng.create_table("c", &TableConfig::collection()).unwrap();
        for i in 0..100 {
            put_j(&eng, t, i).unwrap();
        }
        arm(
            &faults,
            FaultOp::Write,
            Some(FileKind::Journal),
            libc::ENOSPC,
            5,
        );
        let err = put_j(&eng, t, 100).unwrap_err();
        assert!(err.is_disk_full(), "{err}");
        assert!(eng.write_failure().is_none(), "a full disk is not sticky");
        for i in 0..100 {
            assert_eq!(eng.get(t, &key(i)).unwrap(), Some(vec![i as u8; 64]));
        }
        put_until_acknowledged(&eng, t, 101);
        assert_eq!(faults.injected(), 5, "{schedule:?}");
        for i in 102..150 {
            put_j(&eng, t, i).unwrap();
        }
        eng.checkpoint().unwrap();
        drop(eng);
        let eng = DiskEngine::open(config(dir.path(), None)).unwrap();
        for i in (0..100).chain(101..150) {
            assert_eq!(
                eng.get(t, &key(i)).unwrap(),
                Some(vec![i as u8; 64]),
                "key {i}"
            );
        }
        eng.verify().unwrap();
    }
}

/// A checkpoint that fails on a full disk (a table file's write, or the metadata's) leaves the
/// previous checkpoint as the durable one: with every later checkpoint failing too (even the
/// close's), a reopen finds the previous checkpoint and the journal after it.
#[test]
fn a_checkpoint_failing_on_a_full_disk_leaves_the_previous_one_intact() {
    for kind in [FileKind::Collection, FileKind::Metadata] {
        let dir = tempfile::tempdir().unwrap();
        let (eng, t, faults) = faulty_engine(dir.path(), 500);
        eng.checkpoint().unwrap();
        for i in 500..1000 {
            put_j(&eng, t, i).unwrap();
        }
        arm(&faults, FaultOp::Write, Some(kind), libc::ENOSPC, u64::MAX);
        let err = eng.checkpoint().unwrap_err();
        assert!(err.is_disk_full(), "{kind:?}: {err}");
        assert!(eng.write_failure().is_none());
        // Journal writes still land: the engine takes writes while checkpoints fail.
        put_j(&eng, t, 1000).unwrap();
        drop(eng);
        let eng = DiskEngine::open(config(dir.path(), None)).unwrap();
        for i in 0..=1000 {
            assert_eq!(
                eng.get(t, &key(i)).unwrap(),
                Some(vec![i as u8; 64]),
                "key {i}"
            );
        }
        eng.verify().unwrap();
    }
}
