//! The pieces alone: padding and moves, free lists, bucket splits.

use super::{open, table_cfg};
use crate::btree::{Bucket, Tree, BUCKET_PAYLOAD, MAX_KEY_LEN};
use crate::loc::{class_size, DiskLoc};
use crate::pool::Pool;
use crate::space::{self, Details};
use engine::io::Io;
use engine::KvEngine;
use std::ops::Bound;
use std::sync::Arc;

fn pool(dir: &std::path::Path) -> (Pool, space::Header) {
    let mut pool = Pool::open(Arc::new(Io::quiet()), dir, 1 << 20).unwrap();
    let h = space::format(&mut pool).unwrap();
    (pool, h)
}

#[test]
fn a_freed_record_is_reused_by_its_size_class_only() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, mut h) = pool(d.path());
    let mut t = Details::new(1);
    let a = space::alloc_record(&mut pool, &mut h, &mut t, 7).unwrap();
    let b = space::alloc_record(&mut pool, &mut h, &mut t, 7).unwrap();
    assert_eq!(b.offset - a.offset, class_size(7));
    space::free_record(&mut pool, &mut t, a).unwrap();
    space::free_record(&mut pool, &mut t, b).unwrap();
    // Another class does not take them; the same class takes the newest first.
    let c = space::alloc_record(&mut pool, &mut h, &mut t, 8).unwrap();
    assert!(c != a && c != b);
    assert_eq!(
        space::alloc_record(&mut pool, &mut h, &mut t, 7).unwrap(),
        b
    );
    assert_eq!(
        space::alloc_record(&mut pool, &mut h, &mut t, 7).unwrap(),
        a
    );
    let fresh = space::alloc_record(&mut pool, &mut h, &mut t, 7).unwrap();
    assert!(fresh.offset > c.offset);
}

#[test]
fn extents_double_and_files_double() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, mut h) = pool(d.path());
    let mut t = Details::new(1);
    // 3 MiB of 64 KiB records: the extents grow 64 KiB, 128 KiB, …; file 0 (1 MiB) fills and
    // file 1 (2 MiB) and file 2 (4 MiB) follow.
    for _ in 0..48 {
        space::alloc_record(&mut pool, &mut h, &mut t, 16).unwrap();
    }
    assert!(t.tail_len >= 1 << 20, "extent {}", t.tail_len);
    assert!(h.file_count >= 3, "files {}", h.file_count);
    assert!(d.path().join("mmapv1.2").exists());
}

#[test]
#[should_panic(expected = "a write past data file")]
fn a_write_past_a_files_end_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, _) = pool(d.path());
    pool.write(DiskLoc::new(0, (1 << 20) - 4), &[1; 8]).unwrap();
}

#[test]
#[should_panic(expected = "written into a")]
fn a_value_larger_than_its_record_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, mut h) = pool(d.path());
    let mut t = Details::new(1);
    let a = space::alloc_record(&mut pool, &mut h, &mut t, 5).unwrap();
    space::write_record(&mut pool, a, &[0; 25]).unwrap();
}

#[test]
fn updates_that_fit_stay_in_place_and_others_move() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let t = e.create_table("t", &table_cfg()).unwrap();
    let created = e.counters();
    e.put(t, b"k", &[1; 100]).unwrap(); // a 128-byte record
    e.put(t, b"k", &[2; 120]).unwrap(); // grows into its padding
    e.put(t, b"k", &[3; 10]).unwrap(); // shrinks in place
    assert_eq!(e.counters().in_place, 2);
    e.put(t, b"k", &[4; 200]).unwrap(); // outgrows it: moves
    assert_eq!(e.counters().moves, 1);
    // The 128-byte record it left is on the free list: the next insert of that class takes it
    // instead of growing the extent.
    e.put(t, b"j", &[5; 100]).unwrap();
    let before = e.counters();
    // Records allocated after the table's: k's 128 and 256 bytes (the move) and j's 128, for
    // values of 100, 200 and 100 bytes; the updates in place allocated none.
    assert_eq!(
        before.record_bytes_allocated - created.record_bytes_allocated,
        128 + 256 + 128
    );
    assert_eq!(
        before.value_bytes_allocated - created.value_bytes_allocated,
        100 + 200 + 100
    );
    assert_eq!(e.get(t, b"k").unwrap(), Some(vec![4; 200]));
    assert_eq!(e.get(t, b"j").unwrap(), Some(vec![5; 100]));
    assert_eq!(
        before.inserts, 3,
        "the table's and the two keys' catalog/insert count"
    );
    e.close().unwrap();
}

#[test]
fn buckets_split_into_a_deeper_tree_that_keeps_order() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, mut h) = pool(d.path());
    let mut t = Details::new(1);
    let mut tree = Tree {
        pool: &mut pool,
        header: &mut h,
        details: &mut t,
    };
    tree.create().unwrap();
    let key = |i: u32| {
        let mut k = format!("{:08}", (i * 7919) % 2000).into_bytes();
        k.resize(MAX_KEY_LEN, b'.');
        k
    };
    for i in 0..2000 {
        assert_eq!(tree.upsert(&key(i), DiskLoc::new(0, i)).unwrap(), None);
    }
    assert!(
        tree.depth().unwrap() >= 3,
        "depth {}",
        tree.depth().unwrap()
    );
    let mut all = Vec::new();
    tree.range(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        usize::MAX,
        &mut all,
    )
    .unwrap();
    assert_eq!(all.len(), 2000);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    for i in (0..2000).step_by(3) {
        assert_eq!(tree.remove(&key(i)).unwrap(), Some(DiskLoc::new(0, i)));
    }
    let mut back = Vec::new();
    tree.range(
        Bound::Unbounded,
        Bound::Unbounded,
        true,
        usize::MAX,
        &mut back,
    )
    .unwrap();
    assert_eq!(back.len(), 2000 - 667);
    assert!(back.windows(2).all(|w| w[0].0 > w[1].0));
    assert_eq!(tree.find(&key(1)).unwrap(), Some(DiskLoc::new(0, 1)));
    assert_eq!(tree.find(&key(0)).unwrap(), None);
}

#[test]
fn a_split_leaves_both_halves_within_a_bucket() {
    let mut b = Bucket {
        leaf: true,
        keys: Vec::new(),
        locs: Vec::new(),
    };
    // Small keys then large ones: a split by count would overfill the right half.
    for i in 0..200u32 {
        b.keys.push(format!("{i:04}").into_bytes());
        b.locs.push(DiskLoc::new(0, i));
    }
    for i in 0..7u32 {
        b.keys
            .push(format!("z{i}").repeat(600).into_bytes()[..MAX_KEY_LEN].to_vec());
        b.locs.push(DiskLoc::new(1, i));
    }
    assert!(b.encoded_len() > BUCKET_PAYLOAD);
    let (sep, right) = b.split();
    assert!(b.encoded_len() <= BUCKET_PAYLOAD && right.encoded_len() <= BUCKET_PAYLOAD);
    assert_eq!(right.keys[0], sep);
    assert_eq!(Bucket::decode(&right.encode()), right);
}

#[test]
#[should_panic(expected = "an overfull bucket stored")]
fn an_overfull_bucket_is_never_stored() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, mut h) = pool(d.path());
    let mut t = Details::new(1);
    let mut tree = Tree {
        pool: &mut pool,
        header: &mut h,
        details: &mut t,
    };
    tree.create().unwrap();
    let root = tree.details.root;
    let b = Bucket {
        leaf: true,
        keys: vec![vec![0; MAX_KEY_LEN]; 9],
        locs: vec![DiskLoc::new(0, 0); 9],
    };
    tree.store_for_test(root, &b);
}

#[test]
fn flash_modes_settings_it_lacks_are_reported_not_applicable() {
    let cfg = engine::EngineConfig::new("/tmp/x");
    let r = engine::FlashReport::new(
        engine::EngineKind::Mmapv1,
        &cfg,
        &engine::TableConfig::collection(),
        engine::io::hint_path::HintPath::None,
    );
    let j = serde_json::to_value(&r).unwrap();
    for k in ["allocation", "dirtyTarget", "dirtyTrigger"] {
        assert_eq!(j[k], "n/a", "{k}: {j}");
    }
    assert_eq!(j["placement"], engine::SHIPPED_POLICY);
}

#[test]
#[should_panic(expected = "a change in a data file the header does not count")]
fn removing_a_data_file_with_a_change_in_it_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (mut pool, _) = pool(d.path());
    pool.create_file(1).unwrap();
    pool.write(DiskLoc::new(1, 0), b"changed").unwrap();
    pool.remove_files_from(1).unwrap();
}

/// collStats' `storageSize` on mmapv1: the extents a table holds, used or not. Deletes free
/// records, not extents; a compaction gives the extents back.
#[test]
fn a_tables_extent_bytes_count_its_extents_used_or_not() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path());
    let t = e.create_table("t", &table_cfg()).unwrap();
    let first = u64::from(space::FIRST_EXTENT);
    // A new table: the first extent, holding its root bucket.
    assert_eq!(e.table_extent_bytes(t).unwrap(), first);
    for i in 0..200u32 {
        e.put(t, &i.to_be_bytes(), &[7; 2000]).unwrap();
    }
    let full = e.table_extent_bytes(t).unwrap();
    // Doubling extents on a new database: 64 KiB, 128 KiB, 256 KiB, …, room for 200 records
    // of 2 KiB.
    assert!(
        (full / first + 1).is_power_of_two() && full.is_multiple_of(first),
        "{full}"
    );
    assert!(
        full >= 200 * 2048 && full / 2 < 200 * 2048 + first * 2,
        "{full}"
    );
    for i in 10..200u32 {
        e.delete(t, &i.to_be_bytes()).unwrap();
    }
    assert_eq!(
        e.table_extent_bytes(t).unwrap(),
        full,
        "deletes keep the extents"
    );
    let done = e.compact_table(t).unwrap();
    assert_eq!((done.bytes_before, done.bytes_after), (full, first));
    assert_eq!(e.table_extent_bytes(t).unwrap(), first);
    assert!(matches!(
        e.table_extent_bytes(crate::state::CATALOG),
        Err(engine::Error::NoSuchTable(_))
    ));
}
