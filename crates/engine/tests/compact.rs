//! Compaction: a table rewritten into a fresh file and swapped in at a checkpoint gives the
//! free space back, keeps every entry (also across a reopen), loses or duplicates no write made
//! while it runs, and leaves one file per table.

use engine::{DiskEngine, EngineConfig, KvEngine, TableConfig, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn config(dir: &Path) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = Some(std::time::Duration::from_millis(50));
    cfg
}

fn table_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".fdb"))
        .collect();
    v.sort();
    v
}

fn all(eng: &DiskEngine, t: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    eng.scan_all(t)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[test]
fn compaction_returns_the_free_space_and_keeps_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let eng = DiskEngine::open(config(dir.path())).unwrap();
    let t = eng
        .create_table("coll", &TableConfig::collection().with_leaf_page_max(4096))
        .unwrap();
    let mut model = BTreeMap::new();
    for chunk in 0..40u32 {
        let mut b = WriteBatch::new();
        for i in chunk * 500..(chunk + 1) * 500 {
            let (k, v) = (format!("k{i:07}").into_bytes(), vec![(i % 200) as u8; 300]);
            b.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        eng.write(&b, WriteOptions::default()).unwrap();
    }
    // Delete nine in ten: the file keeps its size, mostly free space.
    let mut b = WriteBatch::new();
    for i in 0..20_000u32 {
        if i % 10 != 0 {
            let k = format!("k{i:07}").into_bytes();
            b.delete(t, k.clone());
            model.remove(&k);
        }
    }
    eng.write(&b, WriteOptions::default()).unwrap();
    eng.checkpoint().unwrap();
    let files_before = table_files(dir.path());
    let on_disk_before = std::fs::metadata(dir.path().join(&files_before[0]))
        .unwrap()
        .len();

    let est = eng.estimate_compaction(t).unwrap();
    assert_eq!(
        table_files(dir.path()),
        files_before,
        "an estimate writes nothing"
    );
    let s = eng.compact_table(t).unwrap();
    assert!(s.bytes_after * 4 < s.bytes_before, "{s:?}");
    assert!(
        est.bytes_after.abs_diff(s.bytes_after) <= 4 * 4096,
        "estimated {est:?}, did {s:?}"
    );
    assert!(
        s.bytes_freed >= s.bytes_before && s.bytes_before >= on_disk_before / 2,
        "{s:?}"
    );
    assert!(s.bytes_written >= s.bytes_after / 2, "{s:?}");
    let files = table_files(dir.path());
    assert_eq!(
        files,
        vec!["collection-1.1.fdb".to_string()],
        "the old file is gone"
    );
    let on_disk = std::fs::metadata(dir.path().join(&files[0])).unwrap().len();
    assert_eq!(on_disk, s.bytes_after);
    assert_eq!(all(&eng, t), model.clone().into_iter().collect::<Vec<_>>());
    assert_eq!(eng.verify().unwrap() as usize, model.len());

    // Writes after the swap land in the copy; a second compaction takes the next name.
    eng.put(t, b"k9999999", b"after").unwrap();
    model.insert(b"k9999999".to_vec(), b"after".to_vec());
    eng.compact_table(t).unwrap();
    assert_eq!(
        table_files(dir.path()),
        vec!["collection-1.2.fdb".to_string()]
    );
    eng.close().unwrap();
    drop(eng);
    let eng = DiskEngine::open(config(dir.path())).unwrap();
    assert_eq!(all(&eng, t), model.into_iter().collect::<Vec<_>>());
    eng.verify().unwrap();
}

#[test]
fn writes_during_compactions_are_neither_lost_nor_duplicated() {
    let dir = tempfile::tempdir().unwrap();
    let eng = Arc::new(DiskEngine::open(config(dir.path())).unwrap());
    let coll = eng
        .create_table("coll", &TableConfig::collection().with_leaf_page_max(4096))
        .unwrap();
    let idx = eng.create_table("idx", &TableConfig::index()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Two writers put and overwrite their own keys in both tables in one batch; a reader
    // scans; the main thread compacts both tables over and over.
    let writers: Vec<_> = (0..2u32)
        .map(|w| {
            let eng = eng.clone();
            std::thread::spawn(move || {
                let mut last = BTreeMap::new();
                for n in 0..3000u32 {
                    let k = format!("w{w}-{:05}", (n * 7) % 1000).into_bytes();
                    let v = format!("{n:08}").into_bytes();
                    let mut b = WriteBatch::new();
                    b.put(coll, k.clone(), v.clone());
                    b.put(idx, [v.as_slice(), b"|", k.as_slice()].concat(), Vec::new());
                    if let Some(old) = last.insert(k.clone(), v.clone()) {
                        b.delete(idx, [old.as_slice(), b"|", k.as_slice()].concat());
                    }
                    eng.write(&b, WriteOptions { sync: n % 64 == 0 }).unwrap();
                }
                last
            })
        })
        .collect();
    let reader = {
        let (eng, stop) = (eng.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Relaxed) {
                // A scan's snapshot cannot be read in a copy made after it: such a scan fails
                // with SnapshotTooOld (and the reader scans again), never with a mixed result.
                let got = eng.scan_all(coll).unwrap().collect::<Result<Vec<_>, _>>();
                match got {
                    Ok(got) => {
                        assert!(
                            got.windows(2).all(|w| w[0].0 < w[1].0),
                            "a scan in key order"
                        );
                        scans += 1;
                    }
                    Err(engine::Error::SnapshotTooOld(_)) => {}
                    Err(e) => panic!("scan failed: {e}"),
                }
            }
            scans
        })
    };
    let mut compactions = 0;
    while writers.iter().any(|w| !w.is_finished()) || compactions < 4 {
        eng.compact_table(if compactions % 2 == 0 { coll } else { idx })
            .unwrap();
        compactions += 1;
    }
    let mut want = BTreeMap::new();
    for w in writers {
        want.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let check = |eng: &DiskEngine| {
        let got: BTreeMap<_, _> = all(eng, coll).into_iter().collect();
        assert_eq!(got, want, "every key holds its last value");
        let entries: Vec<Vec<u8>> = all(eng, idx).into_iter().map(|(k, _)| k).collect();
        let mut expect: Vec<Vec<u8>> = want
            .iter()
            .map(|(k, v)| [v.as_slice(), b"|", k.as_slice()].concat())
            .collect();
        expect.sort();
        assert_eq!(entries, expect, "one index entry per key, the last one");
    };
    check(&eng);
    assert_eq!(table_files(dir.path()).len(), 2);
    eng.close().unwrap();
    drop(eng);
    let eng = DiskEngine::open(config(dir.path())).unwrap();
    check(&eng);
    eng.verify().unwrap();
}

#[test]
fn an_empty_table_compacts_and_the_in_memory_engine_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let eng = DiskEngine::open(config(dir.path())).unwrap();
    let t = eng.create_table("e", &TableConfig::index()).unwrap();
    eng.compact_table(t).unwrap();
    eng.put(t, b"a", b"1").unwrap();
    assert_eq!(all(&eng, t), vec![(b"a".to_vec(), b"1".to_vec())]);
    assert!(matches!(
        eng.compact_table(999),
        Err(engine::Error::NoSuchTable(_))
    ));
    let mem = engine::MemEngine::new();
    let t = mem.create_table("m", &TableConfig::collection()).unwrap();
    let e = mem.compact_table(t).unwrap_err();
    assert!(e.to_string().contains("in-memory engine"), "{e}");
}
