//! The seam's failure rule, with the fault-injecting backend.

use super::*;
use placement::{CollectingObserver, FileKind};

#[test]
fn a_failed_write_is_announced_then_freed_and_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let faults = Arc::new(FaultyFiles::new());
    let io = Io::new(
        Some(obs.clone()),
        &FlashConfig::default(),
        Some(faults.clone()),
    )
    .unwrap();
    for kind in [FileKind::Collection, FileKind::Journal, FileKind::Metadata] {
        let f = io
            .open(
                &dir.path().join(kind.name()),
                OpenMode::CreateTruncate,
                FileRole::of(kind),
                kind.name().into(),
            )
            .unwrap();
        faults.arm(Fault {
            op: FaultOp::Write,
            kind: Some(kind),
            skip: 1,
            times: 1,
            errno: libc::EIO,
        });
        io.write(&f, &[1; 4096], 0, PageKind::Leaf, 7, WriteCause::Other)
            .unwrap();
        let err = io
            .write(&f, &[2; 8192], 4096, PageKind::Leaf, 8, WriteCause::Other)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("writing 8192 bytes at offset 4096"),
            "{err}"
        );
        let evs: Vec<Event> = obs
            .events()
            .into_iter()
            .filter(|e| {
                matches!(e, Event::Write(w) if w.file == f.id())
                    || matches!(e, Event::Free { file, .. } if *file == f.id())
            })
            .collect();
        assert_eq!(evs.len(), 3, "{kind:?}: {evs:?}");
        assert!(matches!(&evs[0], Event::Write(w) if w.offset == 0 && w.len == 4096));
        assert!(matches!(&evs[1], Event::Write(w) if w.offset == 4096 && w.len == 8192));
        assert!(
            matches!(
                evs[2],
                Event::Free {
                    offset: 4096,
                    len: 8192,
                    ..
                }
            ),
            "{kind:?}: the failed write's range is freed: {evs:?}"
        );
    }
    assert_eq!(faults.injected(), 3);
    assert_eq!(
        io.meter().written(),
        3 * (4096 + 8192),
        "announced writes are counted"
    );
}

#[test]
fn renames_and_removes_are_reported_after_they_happen_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let io = Io::observed(obs.clone());
    let f = io
        .open(
            &dir.path().join("a"),
            OpenMode::CreateTruncate,
            FileRole::of(FileKind::Metadata),
            "a".into(),
        )
        .unwrap();
    io.rename(&f, &dir.path().join("b"), "b".into(), Some(99))
        .unwrap();
    assert!(io.remove(&dir.path().join("missing"), None).is_err());
    io.remove(&dir.path().join("b"), Some(f.id())).unwrap();
    let kinds: Vec<String> = obs
        .events()
        .iter()
        .map(|e| match e {
            Event::FileCreate { .. } => "create".to_string(),
            Event::FileRemove { file, .. } => format!("remove {file}"),
            Event::FileRename { name, .. } => format!("rename {name}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "create".to_string(),
            "remove 99".into(),
            "rename b".into(),
            format!("remove {}", f.id())
        ]
    );
}

/// `O_DIRECT` as the kernel sees it on the open descriptor (`/proc/self/fdinfo` flags, octal).
fn opened_direct(f: &IoFile) -> bool {
    use std::os::unix::io::AsRawFd;
    let info =
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", f.file().as_raw_fd())).unwrap();
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .map(|v| i64::from_str_radix(v.trim(), 8).unwrap())
        .unwrap();
    flags & libc::O_DIRECT as i64 != 0
}

/// `direct_io=data` opens table files with `O_DIRECT` and nothing else; a direct file takes
/// aligned writes from unaligned memory (through a bounce buffer), reads any range back, and
/// refuses an unaligned write with an error that says why.
#[test]
fn direct_io_opens_the_chosen_files_direct_and_keeps_writes_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let io = Io::quiet().with_direct_io(DirectIo {
        data: true,
        log: false,
    });
    let open = |kind: FileKind| {
        io.open(
            &dir.path().join(kind.name()),
            OpenMode::CreateTruncate,
            FileRole::of(kind),
            kind.name().into(),
        )
    };
    let data = match open(FileKind::Collection) {
        Ok(f) => f,
        Err(e) => {
            // tmpfs: the error must say what to do, and the test fails unless allowed.
            assert!(e.to_string().contains("refuses O_DIRECT"), "{e}");
            assert!(!crate::io::direct_io_required(dir.path()));
            return;
        }
    };
    assert!(data.is_direct() && opened_direct(&data));
    for kind in [FileKind::Journal, FileKind::Metadata] {
        let f = open(kind).unwrap();
        assert!(!f.is_direct() && !opened_direct(&f), "{kind:?}");
    }
    // Memory one byte past an aligned start: never aligned for the kernel.
    let backing = vec![7u8; 3 * 4096 + 1];
    io.write(
        &data,
        &backing[1..],
        4096,
        PageKind::Leaf,
        1,
        WriteCause::Other,
    )
    .unwrap();
    let mut back = vec![0u8; 100];
    io.read(&data, &mut back, 4096 + 10).unwrap();
    assert_eq!(back, vec![7u8; 100]);
    let err = io
        .write(
            &data,
            &[1u8; 100],
            4096,
            PageKind::Leaf,
            2,
            WriteCause::Other,
        )
        .unwrap_err();
    assert!(err.to_string().contains("not aligned to 4096"), "{err}");
}

/// The directory fsync is a seam operation the fault backend can fail: a metadata commit whose
/// directory sync fails reports it (the rename is not yet durable, so the commit has not
/// happened).
#[test]
fn a_failed_directory_fsync_fails_the_metadata_commit() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultyFiles::new());
    let io = Io::new(None, &FlashConfig::default(), Some(faults.clone())).unwrap();
    faults.arm(Fault {
        op: FaultOp::SyncDir,
        kind: None,
        skip: 0,
        times: 1,
        errno: libc::EIO,
    });
    let meta = crate::meta::Metadata {
        format: 1,
        checkpoint_id: 1,
        journal_lsn: None,
        next_table_id: 1,
        tables: Vec::new(),
    };
    let err = crate::meta::commit(&io, dir.path(), &meta, None).unwrap_err();
    assert!(err.to_string().contains("fsync directory"), "{err}");
    assert_eq!(faults.injected(), 1);
}

/// A read through the seam reaches the observer as a read event (the trace's cache misses),
/// after the write it reads.
#[test]
fn a_read_is_reported_to_the_observer() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let io = Io::new(Some(obs.clone()), &FlashConfig::default(), None).unwrap();
    let f = io
        .open(
            &dir.path().join("c"),
            OpenMode::CreateTruncate,
            FileRole::of(FileKind::Collection),
            "c".into(),
        )
        .unwrap();
    io.write(&f, &[3; 8192], 0, PageKind::Leaf, 1, WriteCause::Other)
        .unwrap();
    let mut back = vec![0u8; 4096];
    io.read(&f, &mut back, 4096).unwrap();
    assert_eq!(back, vec![3u8; 4096]);
    let events = obs.events();
    let last = events.last().expect("events");
    assert_eq!(
        *last,
        Event::Read {
            time_ns: last.time_ns(),
            file: f.id(),
            offset: 4096,
            len: 4096,
        }
    );
    assert!(matches!(events[events.len() - 2], Event::Write(_)));
}
