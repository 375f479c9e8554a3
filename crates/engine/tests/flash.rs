//! The engine's flash path online: writes placed on streams by a policy before they are
//! issued, Linux write-life hints set, freed space trimmed (punched) in batches — and nothing
//! acknowledged lost across the trims.

use engine::{DiskEngine, EngineConfig, FlashConfig, KvEngine, TableConfig};
use placement::{CollectingObserver, Event, FileKind};
use std::collections::HashSet;
use std::sync::Arc;

fn run(
    dir: &std::path::Path,
    flash: FlashConfig,
    obs: Option<Arc<CollectingObserver>>,
) -> serde_json::Value {
    let mut cfg = EngineConfig::new(dir);
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = None;
    cfg.flash = flash;
    cfg.observer = obs.map(|o| o as _);
    let eng = DiskEngine::open(cfg).unwrap();
    let c = eng
        .create_table("c", &TableConfig::collection().with_leaf_page_max(4096))
        .unwrap();
    let i = eng
        .create_table(
            "i",
            &TableConfig {
                id_index: true,
                ..TableConfig::index()
            },
        )
        .unwrap();
    for round in 0..6u32 {
        for k in 0..3000u32 {
            let key = format!("key{:06}", (k * 7919) % 3000);
            let val = vec![(round + k) as u8; 300];
            let mut b = engine::WriteBatch::new();
            b.put(c, key.as_bytes(), val);
            b.put(i, key.as_bytes(), round.to_le_bytes());
            eng.write(&b, Default::default()).unwrap();
        }
        if round == 0 {
            eng.end_of_load();
        }
        eng.checkpoint().unwrap();
    }
    let stats = eng.stats();
    eng.close().unwrap();
    drop(eng);
    // Everything acknowledged is there, and every block still verifies after the punches.
    let mut cfg = EngineConfig::new(dir);
    cfg.checkpoint_interval = None;
    let eng = DiskEngine::open(cfg).unwrap();
    let c = eng.table_id("c").unwrap();
    // Round 5 wrote value byte (5 + k') to key (k'·7919 mod 3000).
    for kp in 0..3000u32 {
        let key = format!("key{:06}", (kp * 7919) % 3000);
        let v = eng.get(c, key.as_bytes()).unwrap().unwrap();
        assert_eq!(v, vec![(5 + kp) as u8; 300], "{key}");
    }
    assert_eq!(eng.verify().unwrap(), 6000);
    stats
}

#[test]
fn file_policy_places_writes_before_they_are_issued() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let flash = FlashConfig {
        placement: "file".parse().unwrap(),
        ..FlashConfig::default()
    };
    run(dir.path(), flash, Some(obs.clone()));
    let mut by_kind: std::collections::HashMap<FileKind, HashSet<u8>> = Default::default();
    for e in obs.events() {
        if let Event::Write(w) = e {
            by_kind.entry(w.file_kind).or_default().insert(w.stream);
        }
    }
    let coll = &by_kind[&FileKind::Collection];
    let journal = &by_kind[&FileKind::Journal];
    assert_eq!(coll.len(), 1, "{by_kind:?}");
    assert!(
        coll.is_disjoint(journal),
        "collection and journal share a stream: {by_kind:?}"
    );
    assert!(!coll.contains(&0) || !journal.contains(&0));
}

#[test]
fn linux_hints_and_batched_punch_holes_are_issued_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let flash = FlashConfig {
        placement: "dsm".parse().unwrap(),
        trim_batch: Some(64),
        hints: engine::settings::Hints::Linux,
        ..FlashConfig::default()
    };
    let stats = run(dir.path(), flash, None);
    let f = &stats["flash"];
    assert_eq!(f["placement"], "dsm");
    assert!(f["linux"]["hint_calls"].as_u64().unwrap() > 0, "{f}");
    assert!(f["linux"]["punch_hole_calls"].as_u64().unwrap() > 0, "{f}");
    assert!(f["trim"]["batches"].as_u64().unwrap() > 0, "{f}");
}

#[test]
fn an_offline_policy_fails_before_touching_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut cfg = EngineConfig::new(&db);
    cfg.flash.placement = "oracle".parse().unwrap(); // offline only
    let err = DiskEngine::open(cfg).err().unwrap().to_string();
    assert!(err.contains("storage.flash.placement"), "{err}");
    assert!(!db.exists());
}
