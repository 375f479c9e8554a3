//! The cap on the versions kept for snapshots: past it the oldest snapshot is given up and its
//! reads fail with `SnapshotTooOld` (239); the snapshots kept still read their own values.

use super::{open, table_cfg};
use engine::{Direction, Error, KvEngine, WriteBatch, WriteOptions};
use std::ops::Bound;

/// 48 KiB values: 100 overwrites keep about 4.7 MiB of old versions, past the test engine's
/// cap (its 4 MiB cache gives half, 2 MiB, raised to the 4 MiB floor).
fn overwrite_all(e: &crate::InPlaceEngine, t: engine::TableId, keys: u32, round: u8) {
    for k in 0..keys {
        let mut b = WriteBatch::new();
        b.put(t, k.to_be_bytes(), vec![round; 48 << 10]);
        e.write(&b, WriteOptions { sync: false }).unwrap();
    }
}

fn too_old(r: engine::Result<Option<Vec<u8>>>) -> bool {
    matches!(r, Err(Error::SnapshotTooOld(ref m)) if m.contains("cap"))
}

#[test]
fn past_the_cap_the_oldest_snapshot_is_given_up_and_never_reads_a_newer_value() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let t = e.create_table("t", &table_cfg()).unwrap();
    overwrite_all(&e, t, 60, 1);
    let oldest = e.snapshot().unwrap();
    // 60 × 48 KiB kept for `oldest`: under the cap, it still reads round 1.
    overwrite_all(&e, t, 60, 2);
    assert_eq!(
        e.get_at(&oldest, t, &7u32.to_be_bytes()).unwrap(),
        Some(vec![1; 48 << 10])
    );
    let newer = e.snapshot().unwrap();
    // 60 more for `newer`: past the cap. Giving up `oldest` frees round 1's versions and is
    // enough; `newer` keeps round 2.
    overwrite_all(&e, t, 60, 3);
    assert!(too_old(e.get_at(&oldest, t, &7u32.to_be_bytes())));
    let mut scan = e
        .scan_at(
            &oldest,
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .unwrap();
    assert!(matches!(scan.next(), Some(Err(Error::SnapshotTooOld(_)))));
    assert_eq!(
        e.get_at(&newer, t, &7u32.to_be_bytes()).unwrap(),
        Some(vec![2; 48 << 10])
    );
    let all: Vec<_> = e
        .scan_at(
            &newer,
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .unwrap()
        .collect::<engine::Result<_>>()
        .unwrap();
    assert_eq!(all.len(), 60);
    assert!(all.iter().all(|(_, v)| *v == vec![2; 48 << 10]));
    let stats = e.stats();
    let kept = stats["keptVersionBytes"].as_u64().unwrap();
    assert!(kept <= 4 << 20, "kept {kept} bytes past the cap");
    // The newest values are untouched, and a new snapshot reads them.
    let now = e.snapshot().unwrap();
    assert_eq!(
        e.get_at(&now, t, &59u32.to_be_bytes()).unwrap(),
        Some(vec![3; 48 << 10])
    );
}

#[test]
fn when_one_snapshot_alone_passes_the_cap_it_is_given_up_and_nothing_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let t = e.create_table("t", &table_cfg()).unwrap();
    overwrite_all(&e, t, 100, 1);
    let snap = e.snapshot().unwrap();
    overwrite_all(&e, t, 100, 2);
    assert!(too_old(e.get_at(&snap, t, &0u32.to_be_bytes())));
    assert_eq!(e.stats()["keptVersionBytes"].as_u64(), Some(0));
    assert_eq!(
        e.get(t, &99u32.to_be_bytes()).unwrap(),
        Some(vec![2; 48 << 10])
    );
}
