//! The oplog across a power loss, and what generating it costs a write.
//!
//! - A replica-set member loses power in the middle of a random write workload (the engine's
//!   power-loss file backend: unsynced writes are kept, dropped or torn at random). After
//!   recovery, a fresh secondary that applies the recovered oplog holds exactly the recovered
//!   data: no write is in the data without its entry, nor an entry without its write.
//! - `oplog_insert_cost` (ignored; run it by name) times single-document inserts with and
//!   without the oplog.

use bson::{doc, Bson, Document, Timestamp};
use docdb::oplog::OplogSettings;
use docdb::{DeleteStatement, DocDb, DocDbConfig, FindQuery, UpdateStatement, WriteOpts};
use engine::io::{CrashOdds, Mutation, PowerLossFiles};
use engine::Schedule;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const MEMBER: Option<OplogSettings> = Some(OplogSettings {
    size_bytes: 64 << 20,
});

fn config(dir: &Path, backend: Option<Arc<PowerLossFiles>>) -> DocDbConfig {
    let mut cfg = DocDbConfig::disk(dir);
    cfg.engine.cache_size = 4 << 20;
    cfg.engine.schedule = Schedule::Inline;
    cfg.engine.checkpoint_interval = None;
    cfg.engine.checkpoint_written_bytes = Some(64 << 10);
    cfg.engine.backend = backend.map(|b| b as Arc<dyn engine::io::Backend>);
    cfg.oplog = MEMBER;
    cfg
}

/// The collection's documents, as bytes, in `_id` order.
fn documents(db: &DocDb) -> Vec<Vec<u8>> {
    let q = FindQuery {
        sort: Some(doc! {"_id": 1}),
        ..FindQuery::default()
    };
    match db.find("app", "c", &q) {
        Ok(cur) => cur.map(|d| bson::to_vec(&d.unwrap()).unwrap()).collect(),
        Err(e) => {
            assert_eq!(e.code, 26, "{e}");
            Vec::new()
        }
    }
}

/// Random writes until the power is cut (or `n` are done); returns how many were acknowledged.
fn workload(db: &DocDb, pl: &PowerLossFiles, rng: &mut StdRng, n: usize) -> usize {
    let mut acked = 0;
    for i in 0..n {
        let id = rng.gen_range(0..40);
        let opts = WriteOpts {
            journal: rng.gen_bool(0.1),
            ..WriteOpts::default()
        };
        let out = match rng.gen_range(0..10) {
            0..=4 => db.insert("app", "c", vec![doc! {"_id": id, "v": i as i64}], opts),
            5..=7 => {
                let s = UpdateStatement {
                    q: doc! {"_id": id},
                    u: Bson::Document(doc! {"$inc": {"v": 1}, "$set": {"w": i as i64}}),
                    ..UpdateStatement::default()
                };
                db.update("app", "c", &[s], opts)
            }
            _ => {
                let s = DeleteStatement {
                    q: doc! {"_id": id},
                    limit: 1,
                    ..DeleteStatement::default()
                };
                db.delete("app", "c", &[s], opts)
            }
        };
        if pl.crashed() {
            break;
        }
        acked += usize::from(out.write_errors.iter().all(|e| e.error.code == 11000));
    }
    acked
}

#[test]
fn after_a_power_loss_the_oplog_and_the_data_agree() {
    let mut entries_seen = 0;
    for seed in 0..8u64 {
        let work = tempfile::tempdir().unwrap();
        let live = work.path().join("live");
        std::fs::create_dir_all(&live).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let pl = Arc::new(PowerLossFiles::new(
            &live,
            CrashOdds::default(),
            Mutation::None,
        ));
        pl.adopt(&["flashdoc.lock"]).unwrap();
        pl.crash_after(rng.gen_range(40..1500));
        if let Ok(db) = DocDb::open(config(&live, Some(pl.clone()))) {
            workload(&db, &pl, &mut rng, 600);
            drop(db);
        }
        if !pl.crashed() {
            pl.crash_now();
        }
        let img = work.path().join("image");
        pl.materialise(rng.gen(), &img).unwrap();
        let db = DocDb::open(config(&img, None)).unwrap();
        let log = db
            .oplog()
            .unwrap()
            .entries_after(
                Timestamp {
                    time: 0,
                    increment: 0,
                },
                usize::MAX,
                usize::MAX,
            )
            .unwrap();
        entries_seen += log.len();
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = MEMBER;
        let secondary = DocDb::open(cfg).unwrap();
        for e in &log {
            secondary.apply_oplog_entry(e).unwrap();
        }
        let (recovered, replayed) = (documents(&db), documents(&secondary));
        let show = |v: &[Vec<u8>]| {
            v.iter()
                .map(|b| bson::from_slice::<Document>(b).unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            show(&recovered),
            show(&replayed),
            "seed {seed}: the recovered data is what its oplog makes"
        );
    }
    assert!(
        entries_seen > 100,
        "the crashes kept some history: {entries_seen}"
    );
}

/// Microseconds per single-document insert, with the oplog off (a standalone) and on.
fn insert_cost(dir: &Path, oplog: Option<OplogSettings>, n: usize) -> f64 {
    let mut cfg = DocDbConfig::disk(dir);
    cfg.oplog = oplog;
    let db = DocDb::open(cfg).unwrap();
    db.create_collection("app", "c", &doc! {}).unwrap();
    let start = Instant::now();
    for i in 0..n {
        let d = doc! {"_id": i as i64, "name": format!("user{i}"), "n": i as i64, "pad": "x".repeat(100)};
        let out = db.insert("app", "c", vec![d], WriteOpts::default());
        assert!(out.write_errors.is_empty());
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    db.shutdown().unwrap();
    per
}

/// The middle value.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement, not a test: cargo test -p docdb --test oplog -- --ignored --nocapture"]
fn oplog_insert_cost() {
    let n = 30_000;
    let (mut offs, mut ons) = (Vec::new(), Vec::new());
    for round in 0..7 {
        let off = insert_cost(tempfile::tempdir().unwrap().path(), None, n);
        let on = insert_cost(tempfile::tempdir().unwrap().path(), MEMBER, n);
        println!("round {round}: {n} inserts, oplog off {off:.2} us/insert, on {on:.2} us/insert");
        offs.push(off);
        ons.push(on);
    }
    let (off, on) = (median(offs), median(ons));
    println!(
        "median: oplog off {off:.2} us/insert, on {on:.2} us/insert ({:+.1} %)",
        (on / off - 1.0) * 100.0
    );
}

#[test]
fn a_reopened_member_keeps_its_oplog_and_its_clock_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let mut cfg = DocDbConfig::disk(dir.path());
        cfg.oplog = Some(OplogSettings { size_bytes: 4096 });
        DocDb::open(cfg).unwrap()
    };
    let db = open();
    for i in 0..100 {
        let d = doc! {"_id": i, "pad": "x".repeat(50)};
        assert!(db
            .insert("app", "c", vec![d], WriteOpts::default())
            .write_errors
            .is_empty());
    }
    let log = db.oplog().unwrap();
    let (last, totals) = (log.last_ts(), log.totals());
    assert!(totals.1 <= 4096 && totals.0 < 100, "capped: {totals:?}");
    db.shutdown().unwrap();
    drop(db);
    let db = open();
    let log = db.oplog().unwrap();
    assert_eq!((log.last_ts(), log.totals()), (last, totals));
    assert!(db
        .insert("app", "c", vec![doc! {"_id": 100}], WriteOpts::default())
        .write_errors
        .is_empty());
    let newest = log.entries_after(last, 10, usize::MAX).unwrap();
    assert_eq!(newest.len(), 1);
    assert!(newest[0].get_timestamp("ts").unwrap() > last);
}
