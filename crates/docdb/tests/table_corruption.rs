//! A bad block in a collection's table file (issue 34 §1): the read that reaches it fails naming
//! the file and offset, `validate` reports it (valid: false), and the repair — the engine's
//! salvage, then every index rebuilt from its collection — keeps every document outside the
//! block, counts those lost, and leaves indexes that validate.

use bson::{doc, Bson, Document};
use docdb::{DocDb, DocDbConfig, FindQuery, Interrupt, WriteOpts};
use engine::block::{Addr, BLOCK_HEADER};
use engine::{Compressor, DiskEngine, KvEngine};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const DOCS: i32 = 3000;

/// Uncompressed 4 KB leaves, so the test can walk the collection's tree and pick a leaf.
fn config(dir: &Path) -> DocDbConfig {
    let mut cfg = DocDbConfig::disk(dir);
    cfg.engine.checkpoint_interval = None;
    cfg.collection_table.compressor = Compressor::None;
    cfg.collection_table.leaf_page_max = 4096;
    cfg
}

fn document(i: i32) -> Document {
    doc! {"_id": i, "u": i * 7, "g": i % 13, "pad": "d".repeat(50 + (i % 5) as usize)}
}

/// A cleanly shut down database: `t.c` with DOCS documents, a unique and a non-unique index.
fn build(dir: &Path) {
    let db = DocDb::open(config(dir)).unwrap();
    db.create_indexes(
        "t",
        "c",
        &[
            doc! {"key": {"u": 1}, "name": "u_1", "unique": true},
            doc! {"key": {"g": 1}, "name": "g_1"},
        ],
    )
    .unwrap();
    let out = db.insert(
        "t",
        "c",
        (0..DOCS).map(document).collect(),
        WriteOpts::default(),
    );
    assert!(out.write_errors.is_empty() && out.n == DOCS as u64);
    db.shutdown().unwrap();
}

fn raw_payload(path: &Path, a: Addr) -> Vec<u8> {
    let mut buf = vec![0u8; a.size as usize];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut buf, a.offset)
        .unwrap();
    let stored = u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize;
    buf[BLOCK_HEADER..BLOCK_HEADER + stored].to_vec()
}

/// The collection's table file and the leaves of its checkpoint, walked from the root.
fn collection_leaves(dir: &Path) -> (PathBuf, Vec<Addr>) {
    let meta = engine::meta::read(dir).unwrap().expect("a checkpoint");
    let t = meta
        .tables
        .iter()
        .find(|t| t.name.starts_with("collection-"))
        .expect("the collection's table");
    let file = dir.join(&t.file);
    let mut leaves = Vec::new();
    let mut todo = vec![t.checkpoint.root];
    while let Some(a) = todo.pop() {
        let (level, children) = engine::page::decode_internal(&raw_payload(&file, a)).unwrap();
        for (_, c) in children {
            if level == 0 {
                leaves.push(c);
            } else {
                todo.push(c);
            }
        }
    }
    leaves.sort_by_key(|a| a.offset);
    (file, leaves)
}

fn flip(path: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0xa5], at).unwrap();
}

fn find_all(db: &DocDb, hint: Option<&str>) -> docdb::DocResult<Vec<Document>> {
    let q = FindQuery {
        hint: hint.map(|h| Bson::String(h.into())),
        sort: Some(doc! {"_id": 1}),
        ..Default::default()
    };
    db.find("t", "c", &q)?.collect()
}

fn validate(db: &DocDb) -> Document {
    db.validate("t", "c", true, &Interrupt::none()).unwrap()
}

/// Damages one leaf of the collection; returns its file and offset.
fn damage_a_leaf(dir: &Path) -> (PathBuf, u64) {
    let (file, leaves) = collection_leaves(dir);
    assert!(leaves.len() > 20, "{} leaves", leaves.len());
    let bad = leaves[leaves.len() / 2];
    flip(&file, bad.offset + BLOCK_HEADER as u64 + 100);
    (file, bad.offset)
}

#[test]
fn a_bad_collection_block_fails_reads_and_validate_naming_it_and_repair_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let (file, offset) = damage_a_leaf(dir.path());
    let named = |msg: &str| {
        msg.contains(&file.display().to_string()) && msg.contains(&format!("offset {offset}"))
    };

    let db = DocDb::open(config(dir.path())).unwrap();
    let e = find_all(&db, None).expect_err("a scan over the bad block fails");
    assert!(named(&e.to_string()), "{e}");
    let v = validate(&db);
    assert_eq!(v.get_bool("valid"), Ok(false), "{v}");
    let errors = v.get_array("errors").unwrap();
    assert!(
        errors.iter().any(|e| named(e.as_str().unwrap_or(""))),
        "validate must name the file and offset: {v}"
    );
    db.shutdown().unwrap();
    drop(db);

    // The repair, as `flashdoc repair` runs it.
    let eng = DiskEngine::open(config(dir.path()).engine).unwrap();
    let salvaged = eng.salvage_tables().unwrap();
    assert_eq!(salvaged.len(), 1, "{salvaged:?}");
    assert_eq!(salvaged[0].lost.len(), 1);
    assert_eq!(salvaged[0].lost[0].offset, offset);
    eng.close().unwrap();
    drop(eng);
    let db = DocDb::open(config(dir.path())).unwrap();
    let repaired = db.rebuild_all_indexes().unwrap();
    let c = repaired.iter().find(|c| c.ns == "t.c").unwrap();
    let lost = c
        .documents_lost
        .expect("the _id index counts the documents lost");
    assert!(lost > 0 && lost < 100, "{c:?}");
    assert_eq!(c.documents + lost, DOCS as u64, "{c:?}");

    // Every document left is whole and as written; each index returns exactly them.
    let kept = find_all(&db, None).unwrap();
    assert_eq!(kept.len() as u64, c.documents);
    let by_id: BTreeMap<i32, &Document> = kept
        .iter()
        .map(|d| (d.get_i32("_id").unwrap(), d))
        .collect();
    for (id, d) in &by_id {
        assert_eq!(**d, document(*id));
    }
    // The lost documents are one run of _ids (one leaf holds neighbouring record ids).
    let missing: Vec<i32> = (0..DOCS).filter(|i| !by_id.contains_key(i)).collect();
    assert_eq!(missing.len() as u64, lost);
    assert_eq!(
        missing.last().unwrap() - missing[0] + 1,
        missing.len() as i32
    );
    for hint in ["_id_", "u_1", "g_1"] {
        assert_eq!(find_all(&db, Some(hint)).unwrap(), kept, "through {hint}");
    }
    let v = validate(&db);
    assert_eq!(v.get_bool("valid"), Ok(true), "{v}");
    // The unique index holds only the kept documents: a lost document's `u` is free again.
    let again = document(missing[0]);
    let out = db.insert("t", "c", vec![again], WriteOpts::default());
    assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    db.shutdown().unwrap();
}
