//! The announced-I/O seam, end to end: metadata writes are announced like any write (before
//! they are issued, so before their commit), and a write that fails — injected by the
//! fault-injecting backend — is announced, then freed, and loses nothing acknowledged.

use engine::io::{Fault, FaultOp, FaultyFiles};
use engine::{DiskEngine, EngineConfig, KvEngine, TableConfig};
use placement::{CollectingObserver, Event, FileKind};
use std::sync::Arc;

fn config(dir: &std::path::Path, obs: &Arc<CollectingObserver>) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = None;
    cfg.observer = Some(obs.clone());
    cfg
}

#[test]
fn a_metadata_write_is_announced_before_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let eng = DiskEngine::open(config(dir.path(), &obs)).unwrap();
    let t = eng.create_table("c", &TableConfig::collection()).unwrap();
    eng.put(t, b"k", b"v").unwrap();
    eng.checkpoint().unwrap();
    let evs = obs.events();
    let pos = |f: &dyn Fn(&Event) -> bool| evs.iter().rposition(f).unwrap();
    let commit = pos(&|e| matches!(e, Event::CheckpointCommit { .. }));
    let rename = pos(&|e| matches!(e, Event::FileRename { .. }));
    let meta_write = pos(&|e| matches!(e, Event::Write(w) if w.file_kind == FileKind::Metadata));
    let Event::Write(w) = &evs[meta_write] else {
        unreachable!()
    };
    let create = pos(&|e| matches!(e, Event::FileCreate { file, .. } if *file == w.file));
    assert!(
        create < meta_write && meta_write < rename && rename < commit,
        "create {create}, write {meta_write}, rename {rename}, commit {commit}"
    );
    let Event::FileRename { file, .. } = &evs[rename] else {
        unreachable!()
    };
    assert_eq!(*file, w.file, "the written file is the one renamed");
    let writes = evs
        .iter()
        .filter(|e| matches!(e, Event::Write(x) if x.file == w.file))
        .count();
    assert_eq!(writes, 1, "reported exactly once");
}

#[test]
fn a_failed_leaf_write_is_freed_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let faults = Arc::new(FaultyFiles::new());
    let mut cfg = config(dir.path(), &obs);
    cfg.backend = Some(faults.clone());
    let eng = DiskEngine::open(cfg).unwrap();
    let t = eng
        .create_table("c", &TableConfig::collection().with_leaf_page_max(4096))
        .unwrap();
    for i in 0..2000u32 {
        eng.put(t, format!("k{i:06}").as_bytes(), &[i as u8; 100])
            .unwrap();
    }
    // The checkpoint's third collection write fails with EIO.
    faults.arm(Fault {
        op: FaultOp::Write,
        kind: Some(FileKind::Collection),
        skip: 2,
        times: 1,
        errno: libc::EIO,
    });
    let err = eng.checkpoint().unwrap_err().to_string();
    assert!(
        err.contains("Input/output error") || err.contains("os error 5"),
        "{err}"
    );
    assert_eq!(faults.injected(), 1);
    let evs = obs.events();
    let failed = evs
        .iter()
        .rposition(|e| matches!(e, Event::Write(w) if w.file_kind == FileKind::Collection))
        .unwrap();
    let (file, offset, len) = match &evs[failed] {
        Event::Write(w) => (w.file, w.offset, w.len as u64),
        _ => unreachable!(),
    };
    assert!(
        evs[failed + 1..].iter().any(|e| matches!(e,
            Event::Free { file: f, offset: o, len: l, .. } if (*f, *o, *l) == (file, offset, len))),
        "the failed write's range is announced free"
    );
    // The engine goes on: the next checkpoint succeeds, and everything is there after a reopen.
    eng.checkpoint().unwrap();
    eng.close().unwrap();
    drop(eng);
    let mut cfg = EngineConfig::new(dir.path());
    cfg.checkpoint_interval = None;
    let eng = DiskEngine::open(cfg).unwrap();
    for i in 0..2000u32 {
        assert_eq!(
            eng.get(t, format!("k{i:06}").as_bytes()).unwrap(),
            Some(vec![i as u8; 100])
        );
    }
    assert_eq!(eng.verify().unwrap(), 2000);
}
