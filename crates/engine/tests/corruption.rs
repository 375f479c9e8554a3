//! Corruption tests: a flipped byte in any block the last checkpoint references is an error that
//! names the file and the block's offset, never a wrong answer; a journal cut short anywhere in
//! its last records recovers exactly the whole records before the cut.
//! Seeded; a failure prints the seed and the case.

#[path = "../src/bin/torture/workload.rs"]
mod workload;

use engine::block::{Addr, BLOCK_HEADER};
use engine::journal::{self, Lsn};
use engine::{
    Compressor, Direction, DiskEngine, EngineConfig, Error, KvEngine, TableConfig, WriteBatch,
    WriteOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use workload::{ChildOptions, Model};

const EXE: &str = env!("CARGO_BIN_EXE_flashdoc-engine-torture");

fn config(dir: &Path) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = None;
    cfg
}

/// Opens the database at `dir` (`ProcessLock::acquire` waits out a lock that a child another
/// test of this binary is starting still holds).
fn open(dir: &Path) -> DiskEngine {
    DiskEngine::open(config(dir)).unwrap()
}

/// A checkpointed, closed database with one table of 3000 entries on 4 KB leaves, stored
/// uncompressed so the test can walk its pages. Returns the model.
fn build_db(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let eng = open(dir);
    let tc = TableConfig {
        compressor: Compressor::None,
        ..TableConfig::collection().with_leaf_page_max(4096)
    };
    let t = eng.create_table("t", &tc).unwrap();
    let mut model = BTreeMap::new();
    for chunk in (0..3000u32).collect::<Vec<_>>().chunks(100) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            let (k, v) = (
                format!("key{i:06}").into_bytes(),
                format!("value-{i}-")
                    .repeat(1 + i as usize % 9)
                    .into_bytes(),
            );
            b.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        eng.write(&b, WriteOptions::default()).unwrap();
    }
    eng.checkpoint().unwrap();
    eng.close().unwrap();
    model
}

/// Reads a block's bytes and its uncompressed payload (tables here are uncompressed).
fn raw_block(path: &Path, a: Addr) -> (Vec<u8>, Vec<u8>) {
    let mut buf = vec![0u8; a.size as usize];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut buf, a.offset)
        .unwrap();
    assert_eq!(buf[5], 0, "block at {} is compressed", a.offset);
    let stored = u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize;
    let payload = buf[BLOCK_HEADER..BLOCK_HEADER + stored].to_vec();
    (buf, payload)
}

/// The table file, its checkpoint, and the addresses of its internal pages and leaves, found by
/// walking the tree from the root the metadata names.
struct Layout {
    file: PathBuf,
    root: Addr,
    avail: Addr,
    internal: Vec<Addr>,
    leaves: Vec<Addr>,
}

fn layout(dir: &Path) -> Layout {
    let meta = engine::meta::read(dir).unwrap().expect("a checkpoint");
    let t = &meta.tables[0];
    let file = dir.join(&t.file);
    let (mut internal, mut leaves) = (Vec::new(), Vec::new());
    let mut todo = vec![t.checkpoint.root];
    while let Some(a) = todo.pop() {
        internal.push(a);
        let (_, payload) = raw_block(&file, a);
        let (level, children) = engine::page::decode_internal(&payload).unwrap();
        for (_, c) in children {
            if level == 0 {
                leaves.push(c);
            } else {
                todo.push(c);
            }
        }
    }
    Layout {
        file,
        root: t.checkpoint.root,
        avail: t.checkpoint.avail,
        internal,
        leaves,
    }
}

fn flip(path: &Path, at: u64) -> u8 {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    let old = b[0];
    f.write_all_at(&[old ^ 0x5a], at).unwrap();
    f.sync_all().unwrap();
    old
}

fn restore(path: &Path, at: u64, byte: u8) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&[byte], at).unwrap();
}

/// The error names the file and the block's offset and says it is corrupt.
fn assert_names_block(e: &Error, file: &Path, offset: u64, case: &str) {
    let msg = e.to_string();
    match e {
        Error::Checksum {
            file: f, offset: o, ..
        }
        | Error::Corrupt {
            file: f, offset: o, ..
        } => {
            assert_eq!((f.as_path(), *o), (file, offset), "{case}: {msg}");
        }
        _ => panic!("{case}: expected a checksum error, got {e:?}"),
    }
    assert!(
        msg.contains(&file.display().to_string()) && msg.contains(&format!("offset {offset}")),
        "{case}: the message must name the file and offset: {msg}"
    );
}

#[test]
fn flipped_byte_in_a_leaf_is_an_error_naming_file_and_offset_never_a_wrong_answer() {
    let seed = 11u64;
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let model = build_db(dir.path());
    let lay = layout(dir.path());
    assert!(lay.leaves.len() > 10, "{} leaves", lay.leaves.len());
    for case in 0..8 {
        let leaf = lay.leaves[rng.gen_range(0..lay.leaves.len())];
        let (buf, _) = raw_block(&lay.file, leaf);
        let stored = u32::from_le_bytes(buf[8..12].try_into().unwrap()) as u64;
        // Any byte of the header or the stored payload (the padding after it carries nothing).
        let at = leaf.offset + rng.gen_range(0..BLOCK_HEADER as u64 + stored);
        let case = format!(
            "seed {seed} case {case}: byte {at} of the leaf at {}",
            leaf.offset
        );
        let old = flip(&lay.file, at);

        let eng = open(dir.path());
        let t = eng.table_id("t").unwrap();
        // Every point read: the right value, or an error naming the block. Never a wrong value.
        let mut errors = 0;
        for (k, v) in &model {
            match eng.get(t, k) {
                Ok(got) => assert_eq!(got.as_ref(), Some(v), "{case}: wrong answer for {k:?}"),
                Err(e) => {
                    assert_names_block(&e, &lay.file, leaf.offset, &case);
                    errors += 1;
                }
            }
        }
        assert!(errors > 0, "{case}: the corrupted leaf's keys must fail");
        // A scan returns a correct prefix, then the error.
        for d in [Direction::Forward, Direction::Reverse] {
            let want: Vec<_> = match d {
                Direction::Forward => model.iter().collect(),
                Direction::Reverse => model.iter().rev().collect(),
            };
            let mut n = 0;
            let mut failed = false;
            for kv in eng.scan(t, Bound::Unbounded, Bound::Unbounded, d).unwrap() {
                match kv {
                    Ok((k, v)) => {
                        assert_eq!((&k, &v), want[n], "{case}: scan {d:?} entry {n}");
                        n += 1;
                    }
                    Err(e) => {
                        assert_names_block(&e, &lay.file, leaf.offset, &case);
                        failed = true;
                        break;
                    }
                }
            }
            assert!(failed, "{case}: scan {d:?} read {n} entries and no error");
        }
        let e = eng.verify().unwrap_err();
        assert_names_block(&e, &lay.file, leaf.offset, &case);
        // A write lands (or, on the bad leaf, fails naming it) and the engine closes cleanly
        // without rewriting the bad block, so the corruption stays detectable.
        let wrote = match eng.put(t, b"zzz-after", b"x") {
            Ok(()) => true,
            Err(e) => {
                assert_names_block(&e, &lay.file, leaf.offset, &case);
                false
            }
        };
        eng.close().unwrap();
        drop(eng);
        let eng = open(dir.path());
        assert_names_block(&eng.verify().unwrap_err(), &lay.file, leaf.offset, &case);
        drop(eng);
        restore(&lay.file, at, old);
        // Undo the extra key so the next case starts from the model.
        let eng = open(dir.path());
        if wrote {
            eng.delete(t, b"zzz-after").unwrap();
        }
        assert_eq!(
            eng.verify().unwrap(),
            model.len() as u64,
            "{case}: after restoring the byte"
        );
        eng.close().unwrap();
    }
}

#[test]
fn flipped_byte_in_an_internal_page_or_extent_list_fails_the_open_naming_the_block() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path());
    let lay = layout(dir.path());
    for (what, block) in [("root", lay.root), ("avail extent list", lay.avail)] {
        let at = block.offset + BLOCK_HEADER as u64 + 3;
        let old = flip(&lay.file, at);
        match DiskEngine::open(config(dir.path())) {
            Ok(_) => panic!("{what}: open succeeded over a corrupt block"),
            Err(e) => assert_names_block(&e, &lay.file, block.offset, what),
        }
        restore(&lay.file, at, old);
    }
    assert!(lay.internal.contains(&lay.root));
    let eng = open(dir.path());
    assert_eq!(eng.verify().unwrap(), 3000);
}

#[test]
fn flipped_byte_in_the_metadata_file_fails_the_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path());
    let turtle = dir.path().join(engine::meta::TURTLE);
    let len = std::fs::metadata(&turtle).unwrap().len();
    flip(&turtle, len / 2);
    let e = DiskEngine::open(config(dir.path()))
        .err()
        .expect("open must fail");
    let msg = e.to_string();
    assert!(
        matches!(e, Error::Corrupt { .. }) && msg.contains(&turtle.display().to_string()),
        "{msg}"
    );
}

/// Starts a writer child that writes `batches` batches with no checkpoint after its first one,
/// waits for `DONE`, and SIGKILLs it: every batch is then in the journal only.
fn journal_only_db(db: &Path, seed: u64, batches: u64) {
    use std::io::BufRead;
    let opts = ChildOptions {
        batches: Some(batches),
        no_checkpoint: true,
        ..ChildOptions::default()
    };
    let mut child = workload::writer_command(Path::new(EXE), db, seed, 0, &opts)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut acks = 0;
    for line in out.lines() {
        let line = line.unwrap();
        if line.starts_with("ACK ") {
            acks += 1;
        }
        if line.starts_with("DONE") || line.starts_with("ERR") {
            assert_eq!(line, format!("DONE {batches}"));
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(acks, batches);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn truncated_journal_tail_recovers_exactly_the_whole_records_before_the_cut() {
    let seed = 23u64;
    let batches = 60;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    journal_only_db(&db, seed, batches);
    let jdir = db.join("journal");
    // Every record: its position, and the batch it holds (records are two table creates, then
    // batches 0, 1, … in order: the child writes one at a time). Record tag 1 is a batch.
    let mut recs: Vec<(Lsn, Option<u64>)> = Vec::new();
    let mut next_batch = 0;
    let outcome = journal::replay(&jdir, Lsn::default(), |lsn, payload| {
        let b = (payload[0] == 1).then(|| {
            next_batch += 1;
            next_batch - 1
        });
        recs.push((lsn, b));
        Ok(())
    })
    .unwrap();
    assert_eq!(next_batch, batches, "every batch is in the journal");
    assert!(outcome.torn_tail.is_none(), "{outcome:?}");
    let last_file = recs.last().unwrap().0.file;
    let last_path = jdir.join(format!("FlashdocLog.{last_file:010}"));
    // Each record's extent ends where the next begins (or at the end of the valid log).
    let ends: Vec<Lsn> = recs
        .iter()
        .skip(1)
        .map(|r| r.0)
        .chain([outcome.end])
        .collect();
    let in_last: Vec<usize> = (0..recs.len())
        .filter(|&i| recs[i].0.file == last_file)
        .collect();
    assert!(
        in_last.len() >= 8,
        "the last file holds {} records",
        in_last.len()
    );

    let mut rng = StdRng::seed_from_u64(seed);
    let mut cases: Vec<(usize, u64)> = Vec::new(); // (record cut, cut offset)
    for _ in 0..6 {
        let i = in_last[in_last.len() - 1 - rng.gen_range(0..in_last.len().min(6))];
        let (start, end) = (recs[i].0.offset as u64, ends[i].offset as u64);
        cases.push((i, rng.gen_range(start + 1..end)));
    }
    let i = in_last[in_last.len() - 1];
    cases.push((i, recs[i].0.offset as u64 + 8)); // inside the record header
    cases.push((i, recs[i].0.offset as u64)); // exactly at a record boundary
    cases.push((i, ends[i].offset as u64 - 1)); // the last byte of its padding

    for (case, (cut_rec, cut)) in cases.into_iter().enumerate() {
        let ctx = format!(
            "seed {seed} case {case}: cut {last_path:?} at {cut} (record {cut_rec} starts at {})",
            recs[cut_rec].0
        );
        let copy = dir.path().join(format!("case{case}"));
        copy_dir(&db, &copy);
        let target = copy.join("journal").join(last_path.file_name().unwrap());
        OpenOptions::new()
            .write(true)
            .open(&target)
            .unwrap()
            .set_len(cut)
            .unwrap();
        // Whole records before the cut survive; the cut record and all after it are gone.
        let whole_batches = recs[..cut_rec].iter().filter(|r| r.1.is_some()).count() as u64;
        let mut model = Model::new(seed, opts_shape());
        if whole_batches > 0 {
            model.advance_to(whole_batches - 1);
        }
        let eng = DiskEngine::open(ChildOptions::default().engine_config(&copy))
            .unwrap_or_else(|e| panic!("{ctx}: recovery failed: {e}"));
        let got = workload::read_state(&eng).unwrap();
        let expect_tables = recs[..cut_rec].iter().filter(|r| r.1.is_none()).count();
        let tables = workload::TABLES
            .iter()
            .filter(|n| eng.table_id(n).is_some())
            .count();
        assert_eq!(tables, expect_tables, "{ctx}: tables");
        if got != model.state {
            // check_state accepts the next batch too; here recovery must be exact.
            let e = workload::check_state(&got, &model)
                .err()
                .unwrap_or_else(|| format!("batch {} (cut) is visible", model.next()));
            panic!("{ctx}: expected exactly batches 0..{whole_batches}: {e}");
        }
        eng.verify().unwrap();
        eng.close().unwrap();
        drop(eng);
        // The recovered state is durable: a second open sees the same.
        let eng = DiskEngine::open(ChildOptions::default().engine_config(&copy)).unwrap();
        assert_eq!(
            workload::read_state(&eng).unwrap(),
            model.state,
            "{ctx}: second open"
        );
    }
}

fn opts_shape() -> workload::Shape {
    ChildOptions::default().shape
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn a_flipped_byte_mid_journal_fails_the_open_naming_it_and_salvage_recovers_the_rest() {
    let seed = 29u64;
    let batches = 60;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    journal_only_db(&db, seed, batches);
    let jdir = db.join("journal");
    let mut lsns = Vec::new();
    journal::replay(&jdir, Lsn::default(), |lsn, _| {
        lsns.push(lsn);
        Ok(())
    })
    .unwrap();
    // A third of the way into the records: valid records follow it.
    let hit = lsns[lsns.len() / 3];
    let path = jdir.join(journal::file_name(hit.file));
    flip(&path, hit.offset as u64 + 20);
    let before = snapshot(&jdir);
    let cfg = ChildOptions::default().engine_config(&db);
    match DiskEngine::open(cfg.clone()) {
        Err(Error::Corrupt { file, offset, what }) => {
            assert_eq!((file, offset), (path.clone(), hit.offset as u64));
            let repair = format!("flashdoc repair --dbpath {}", db.display());
            assert!(what.contains(&repair), "{what}");
        }
        Err(e) => panic!("expected a corruption error, got {e}"),
        Ok(_) => panic!("the open must fail on a damaged journal"),
    }
    assert_eq!(
        snapshot(&jdir),
        before,
        "nothing in the journal is removed or written"
    );

    let (eng, outcome) = DiskEngine::open_salvaging(cfg.clone()).unwrap();
    assert_eq!(outcome.records as usize, lsns.len() - 1, "{outcome:?}");
    assert_eq!(outcome.damaged.len(), 1);
    assert_eq!(outcome.damaged[0].offset, hit.offset as u64);
    eng.verify().unwrap();
    let salvaged = workload::read_state(&eng).unwrap();
    eng.close().unwrap();
    drop(eng);
    assert!(
        !path.exists(),
        "the salvage's checkpoint removed the damaged file"
    );
    let eng = DiskEngine::open(cfg).unwrap();
    assert_eq!(workload::read_state(&eng).unwrap(), salvaged);
}

/// The keys a leaf image holds (tables here are uncompressed).
fn leaf_keys(path: &Path, a: Addr) -> Vec<Vec<u8>> {
    let (_, payload) = raw_block(path, a);
    let mut keys = Vec::new();
    engine::page::decode_leaf(&payload, |k, _| keys.push(k)).unwrap();
    keys
}

#[test]
fn salvage_gives_up_only_the_damaged_leaf_and_the_result_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = build_db(dir.path());
    let lay = layout(dir.path());
    let bad = lay.leaves[lay.leaves.len() / 2];
    let lost_keys = leaf_keys(&lay.file, bad);
    assert!(!lost_keys.is_empty());
    flip(&lay.file, bad.offset + BLOCK_HEADER as u64 + 40);

    let eng = open(dir.path());
    assert_names_block(&eng.verify().unwrap_err(), &lay.file, bad.offset, "before");
    let salvaged = eng.salvage_tables().unwrap();
    assert_eq!(salvaged.len(), 1, "{salvaged:?}");
    assert_eq!(
        (salvaged[0].table.as_str(), &salvaged[0].file),
        ("t", &lay.file)
    );
    let lost: Vec<_> = salvaged[0]
        .lost
        .iter()
        .map(|l| (l.offset, l.size))
        .collect();
    assert_eq!(lost, vec![(bad.offset, bad.size)]);
    assert!(
        salvaged[0].lost[0]
            .why
            .contains(&format!("offset {}", bad.offset)),
        "{:?}",
        salvaged[0].lost[0]
    );
    for k in &lost_keys {
        model.remove(k);
    }
    // A second salvage finds nothing more; every other entry reads back, the lost ones are gone.
    assert!(eng.salvage_tables().unwrap().is_empty());
    let check = |eng: &DiskEngine, model: &BTreeMap<Vec<u8>, Vec<u8>>, when: &str| {
        let t = eng.table_id("t").unwrap();
        assert_eq!(eng.verify().unwrap(), model.len() as u64, "{when}");
        let got: BTreeMap<Vec<u8>, Vec<u8>> = eng
            .scan(t, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .unwrap()
            .map(|kv| kv.unwrap())
            .collect();
        assert!(
            got == *model,
            "{when}: the salvaged table differs from the model"
        );
    };
    check(&eng, &model, "after the salvage");
    // The table takes writes where the lost leaf was.
    let t = eng.table_id("t").unwrap();
    eng.put(t, &lost_keys[0], b"rewritten").unwrap();
    model.insert(lost_keys[0].clone(), b"rewritten".to_vec());
    eng.close().unwrap();
    drop(eng);
    let eng = open(dir.path());
    check(&eng, &model, "after a reopen");
}
