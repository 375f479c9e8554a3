//! The engine against a `BTreeMap`: random puts (new keys, updates that grow, shrink or move
//! records), deletes, batches across two tables, scans both ways with random bounds, snapshots
//! held across writes, write-backs, and reopening after close.

use super::{open, table_cfg};
use crate::InPlaceEngine;
use engine::{Direction, KvEngine, Snapshot, TableId, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;

type Model = BTreeMap<(TableId, Vec<u8>), Vec<u8>>;

fn key(rng: &mut StdRng) -> Vec<u8> {
    // Mostly short keys over a small space (many updates), sometimes long ones (splits).
    let n: u32 = rng.gen_range(0..400);
    let mut k = format!("k{n:05}").into_bytes();
    if n.is_multiple_of(7) {
        k.resize(300 + (n as usize % 500), b'x');
    }
    k
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => rng.gen_range(2000..20_000),
        1..=3 => rng.gen_range(100..1000),
        _ => rng.gen_range(0..100),
    };
    let b: u8 = rng.gen();
    vec![b; len]
}

fn bound(rng: &mut StdRng) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng)),
        _ => Bound::Excluded(key(rng)),
    }
}

fn model_range(
    m: &Model,
    t: TableId,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    dir: Direction,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = m
        .iter()
        .filter(|((tt, k), _)| {
            *tt == t && std::ops::RangeBounds::<Vec<u8>>::contains(&(lo.as_ref(), hi.as_ref()), k)
        })
        .map(|((_, k), v)| (k.clone(), v.clone()))
        .collect();
    if dir == Direction::Reverse {
        v.reverse();
    }
    v
}

fn check_scan(e: &InPlaceEngine, snap: &Snapshot, m: &Model, t: TableId, rng: &mut StdRng) {
    let (lo, hi) = (bound(rng), bound(rng));
    let dir = if rng.gen() {
        Direction::Forward
    } else {
        Direction::Reverse
    };
    let got: Vec<_> = e
        .scan_at(snap, t, lo.clone(), hi.clone(), dir)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        model_range(m, t, &lo, &hi, dir),
        "scan {lo:?}..{hi:?} {dir:?}"
    );
}

fn random_batch(rng: &mut StdRng, tables: &[TableId], m: &mut Model) -> WriteBatch {
    let mut b = WriteBatch::new();
    for _ in 0..rng.gen_range(1..6) {
        let t = tables[rng.gen_range(0..tables.len())];
        let k = key(rng);
        if rng.gen_range(0..4) == 0 {
            b.delete(t, k.clone());
            m.remove(&(t, k));
        } else {
            let v = value(rng);
            b.put(t, k.clone(), v.clone());
            m.insert((t, k), v);
        }
    }
    b
}

fn run(seed: u64, steps: usize) {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut e = open(d.path());
    let tables = [
        e.create_table("a", &table_cfg()).unwrap(),
        e.create_table("b", &table_cfg()).unwrap(),
    ];
    let mut m = Model::new();
    let mut held: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..steps {
        let b = random_batch(&mut rng, &tables, &mut m);
        let sync = rng.gen_range(0..8) == 0;
        e.write(&b, WriteOptions { sync }).unwrap();
        match rng.gen_range(0..40) {
            0..=2 => held.push((e.snapshot().unwrap(), m.clone())),
            3..=5 if !held.is_empty() => {
                held.remove(rng.gen_range(0..held.len()));
            }
            6 => e.checkpoint().unwrap(),
            7 if step % 3 == 0 => {
                held.clear();
                e.close().unwrap();
                drop(e);
                e = open(d.path());
            }
            _ => {}
        }
        let t = tables[rng.gen_range(0..2)];
        let k = key(&mut rng);
        assert_eq!(e.get(t, &k).unwrap(), m.get(&(t, k.clone())).cloned());
        check_scan(&e, &e.snapshot().unwrap(), &m, t, &mut rng);
        for (snap, old) in &held {
            assert_eq!(
                e.get_at(snap, t, &k).unwrap(),
                old.get(&(t, k.clone())).cloned()
            );
            if rng.gen_range(0..4) == 0 {
                check_scan(&e, snap, old, t, &mut rng);
            }
        }
    }
    held.clear();
    e.close().unwrap();
    drop(e);
    let e = open(d.path());
    for &t in &tables {
        let all: Vec<_> = e.scan_all(t).unwrap().map(Result::unwrap).collect();
        let want = model_range(
            &m,
            t,
            &Bound::Unbounded,
            &Bound::Unbounded,
            Direction::Forward,
        );
        assert_eq!(all, want);
    }
    assert_eq!(e.stats()["keptVersions"], 0);
    e.close().unwrap();
}

#[test]
fn the_engine_matches_a_btreemap() {
    for seed in 0..3 {
        run(seed, 700);
    }
}

#[test]
fn a_compacted_table_keeps_its_entries_and_shrinks() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let t = e.create_table("t", &table_cfg()).unwrap();
    for i in 0..3000u32 {
        e.put(t, format!("{i:06}").as_bytes(), &[7; 300]).unwrap();
    }
    for i in (0..3000u32).filter(|i| i % 10 != 0) {
        e.delete(t, format!("{i:06}").as_bytes()).unwrap();
    }
    let snap = e.snapshot().unwrap();
    let est = e.estimate_compaction(t).unwrap();
    assert!(est.bytes_after < est.bytes_before / 2, "{est:?}");
    let stats = e.compact_table(t).unwrap();
    assert!(stats.bytes_after < stats.bytes_before / 2, "{stats:?}");
    // The estimate is the copy's own allocations, step by step: exact.
    assert_eq!(
        est.bytes_after, stats.bytes_after,
        "estimate {est:?}, compact {stats:?}"
    );
    let all: Vec<_> = e.scan_all(t).unwrap().map(Result::unwrap).collect();
    assert_eq!(all.len(), 300);
    assert_eq!(
        e.scan_at(
            &snap,
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward
        )
        .unwrap()
        .count(),
        300
    );
    e.close().unwrap();
    drop(e);
    let e = open(d.path());
    assert_eq!(e.scan_all(t).unwrap().count(), 300);
    assert_eq!(e.get(t, b"000010").unwrap(), Some(vec![7; 300]));
    e.close().unwrap();
}

/// A table filled with 3 000 entries of `value` bytes, then nine in ten of them deleted.
fn fill_and_thin(e: &InPlaceEngine, t: TableId, value: usize) {
    for i in 0..3000u32 {
        e.put(t, format!("{i:06}").as_bytes(), &vec![7; value])
            .unwrap();
    }
    for i in (0..3000u32).filter(|i| i % 10 != 0) {
        e.delete(t, format!("{i:06}").as_bytes()).unwrap();
    }
}

/// docdb compacts a collection's tables one after another, and its dry run estimates them all
/// first: the extents the first compaction frees are there for the second's copy. A free
/// extent is split to the size the copy asks for, so the estimate made before still holds
/// (each extent at most a first extent larger than asked). Before, the copy took a freed
/// extent whole and the estimate was 17 % off in test_compact.py.
#[test]
fn estimates_made_before_another_tables_compaction_still_hold() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let big = e.create_table("big", &table_cfg()).unwrap();
    let small = e.create_table("small", &table_cfg()).unwrap();
    fill_and_thin(&e, big, 1000);
    fill_and_thin(&e, small, 40);
    let est_big = e.estimate_compaction(big).unwrap();
    let est_small = e.estimate_compaction(small).unwrap();
    let done_big = e.compact_table(big).unwrap();
    let done_small = e.compact_table(small).unwrap();
    assert_eq!(est_big.bytes_after, done_big.bytes_after);
    let extents = done_small.bytes_after.div_ceil(64 << 10);
    assert!(
        done_small.bytes_after.abs_diff(est_small.bytes_after) < extents * (64 << 10),
        "estimate {est_small:?}, compact {done_small:?}"
    );
    assert_eq!(e.scan_all(small).unwrap().count(), 300);
    assert_eq!(e.get(big, b"000010").unwrap(), Some(vec![7; 1000]));
}

#[test]
fn dropped_tables_give_their_extents_back() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let t = e.create_table("t", &table_cfg()).unwrap();
    for i in 0..500u32 {
        e.put(t, format!("{i:06}").as_bytes(), &[1; 1000]).unwrap();
    }
    let files = e.stats()["dataFiles"].clone();
    e.drop_table("t").unwrap();
    assert!(e.get(t, b"000001").is_err());
    let u = e.create_table("u", &table_cfg()).unwrap();
    for i in 0..500u32 {
        e.put(u, format!("{i:06}").as_bytes(), &[2; 1000]).unwrap();
    }
    assert_eq!(
        e.stats()["dataFiles"],
        files,
        "the new table reused the dropped extents"
    );
    assert!(e.create_table("u", &table_cfg()).is_err());
    e.close().unwrap();
}
