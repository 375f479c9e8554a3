//! Bad input to `DiskEngine::open`: a clear error that names what is wrong, and nothing changed
//! on disk. Tests may run as root (CI does), where permissions do not stop writes, so real OS
//! errors come from paths whose parent is a regular file.

#[path = "../src/bin/torture/workload.rs"]
mod workload;

use engine::{DiskEngine, EngineConfig, Error, KvEngine, TableConfig};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use workload::ChildOptions;

const EXE: &str = env!("CARGO_BIN_EXE_flashdoc-engine-torture");

/// Every file under `root` with its bytes (directories as `None`).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let md = std::fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            out.insert(p.clone(), None);
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        } else {
            out.insert(p.clone(), Some(std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn small(db: &Path) -> EngineConfig {
    let mut cfg = EngineConfig::new(db);
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = None;
    cfg
}

#[test]
fn db_path_that_is_a_regular_file_is_a_config_error_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"precious").unwrap();
    let before = snapshot(dir.path());
    let e = DiskEngine::open(small(&file))
        .err()
        .expect("open must fail");
    let msg = e.to_string();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    assert!(
        msg.contains("not a directory") && msg.contains(&file.display().to_string()),
        "{msg}"
    );
    assert_eq!(snapshot(dir.path()), before, "nothing may change on disk");
}

#[test]
fn db_path_under_a_regular_file_is_an_os_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let before = snapshot(dir.path());
    for db in [
        file.join("db"),
        PathBuf::from("/proc/flashdoc-no-such-dir/db"),
    ] {
        let e = DiskEngine::open(small(&db)).err().expect("open must fail");
        let msg = e.to_string();
        assert!(matches!(e, Error::Io { .. }), "{db:?}: {e:?}");
        assert!(
            msg.contains(&db.display().to_string()),
            "{db:?}: the message must name the path: {msg}"
        );
    }
    assert_eq!(snapshot(dir.path()), before, "nothing may change on disk");
}

#[test]
fn journal_directory_that_is_a_regular_file_is_an_error_naming_it_and_data_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let eng = DiskEngine::open(small(&db)).unwrap();
    let t = eng.create_table("t", &TableConfig::collection()).unwrap();
    eng.put(t, b"k", b"v").unwrap();
    eng.close().unwrap();
    drop(eng);
    let jdir = dir.path().join("jfile");
    std::fs::write(&jdir, b"not a journal").unwrap();
    let mut cfg = small(&db);
    cfg.journal.as_mut().unwrap().dir = jdir.clone();
    let before = snapshot(dir.path());
    let e = DiskEngine::open(cfg).err().expect("open must fail");
    assert!(e.to_string().contains(&jdir.display().to_string()), "{e}");
    // Only the lock file's pid may change.
    let strip = |mut s: BTreeMap<PathBuf, Option<Vec<u8>>>| {
        s.remove(&db.join(engine::meta::LOCK));
        s
    };
    assert_eq!(
        strip(snapshot(dir.path())),
        strip(before),
        "nothing may change on disk"
    );
    let eng = DiskEngine::open(small(&db)).unwrap();
    assert_eq!(eng.get(t, b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn invalid_configuration_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut bad_cache = small(&db);
    bad_cache.cache_size = 1000;
    let mut bad_journal = small(&db);
    bad_journal.journal.as_mut().unwrap().file_max = 10;
    let mut bad_interval = small(&db);
    bad_interval.journal.as_mut().unwrap().commit_interval = std::time::Duration::ZERO;
    for (what, cfg) in [
        ("cache", bad_cache),
        ("journal file_max", bad_journal),
        ("commit interval", bad_interval),
    ] {
        let e = DiskEngine::open(cfg).err().expect("open must fail");
        assert!(matches!(e, Error::Config(_)), "{what}: {e:?}");
        assert!(
            !db.exists(),
            "{what}: a refused configuration must not create {}",
            db.display()
        );
    }
}

#[test]
fn db_path_locked_by_another_process_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut child = workload::writer_command(Path::new(EXE), &db, 1, 0, &ChildOptions::default())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the child's first acknowledged batch: it holds the lock by then.
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first_ack = lines
        .by_ref()
        .map(|l| l.unwrap())
        .find(|l| l.starts_with("ACK ") || l.starts_with("ERR"));
    let result = DiskEngine::open(small(&db));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        first_ack
            .as_deref()
            .is_some_and(|l| l.starts_with("ACK 0 ")),
        "{first_ack:?}"
    );
    let e = result
        .err()
        .expect("a second process must not open a locked dbPath");
    let msg = e.to_string();
    assert!(matches!(e, Error::Locked { .. }), "{e:?}");
    assert!(
        msg.contains("locked by another process")
            && msg.contains(&db.display().to_string())
            && msg.contains(engine::meta::LOCK),
        "{msg}"
    );
    // Once the holder is gone, the database opens.
    let eng = DiskEngine::open(small(&db)).unwrap();
    assert!(eng.table_id("coll").is_some());
}

#[test]
fn a_second_open_in_the_same_process_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    let eng = DiskEngine::open(small(dir.path())).unwrap();
    let e = DiskEngine::open(small(dir.path()))
        .err()
        .expect("must fail");
    assert!(matches!(e, Error::Locked { .. }), "{e:?}");
    eng.close().unwrap();
}

/// `direct_io` on a file system that refuses `O_DIRECT` (tmpfs: /dev/shm) fails the open with
/// a configuration error naming the option, the dbPath and what to do — before any table or
/// journal file exists.
#[test]
fn direct_io_on_a_file_system_without_o_direct_is_refused_clearly() {
    let shm = Path::new("/dev/shm");
    // No /dev/shm fails the test unless FLASHDOC_ALLOW_NO_TMPFS=1 says this machine has none.
    let Ok(dir) = tempfile::tempdir_in(shm) else {
        assert!(
            std::env::var("FLASHDOC_ALLOW_NO_TMPFS").is_ok_and(|v| v == "1"),
            "this test needs /dev/shm (tmpfs); set FLASHDOC_ALLOW_NO_TMPFS=1 to state that \
             this machine has none"
        );
        eprintln!("not run: no /dev/shm (FLASHDOC_ALLOW_NO_TMPFS=1)");
        return;
    };
    if engine::io::probe_direct_io(dir.path()).is_ok() {
        // tmpfs takes O_DIRECT since Linux 6.6: then the probe's other branch is what there is
        // to check, and it must let the engine open.
        eprintln!("/dev/shm takes O_DIRECT on this kernel: checking that direct_io opens there");
        let mut cfg = small(&dir.path().join("db"));
        cfg.direct_io = "data,log".parse().unwrap();
        DiskEngine::open(cfg).expect("a file system taking O_DIRECT opens with direct_io");
        return;
    }
    let db = dir.path().join("db");
    let mut cfg = small(&db);
    cfg.direct_io = "data,log".parse().unwrap();
    let e = DiskEngine::open(cfg).err().expect("open must fail");
    let msg = e.to_string();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    assert!(
        msg.contains("direct_io=data,log")
            && msg.contains(&db.display().to_string())
            && msg.contains("refuses O_DIRECT"),
        "{msg}"
    );
    let files: Vec<_> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "flashdoc.lock")
        .collect();
    assert!(files.is_empty(), "{files:?}");
}
