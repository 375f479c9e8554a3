//! Writes an event trace of flashdoc's engine under a small update-heavy workload, for
//! `flashdoc placement replay`:
//!
//! ```text
//! cargo run -p flashdoc --example engine_trace -- OUT [DOCS] [UPDATES] [CHECKPOINT_EVERY]
//! ```
//!
//! One collection with its `_id` index and a secondary index on a field every update changes
//! (delete the old index key, insert the new one, like LinkBench's link updates). Load DOCS
//! documents (300 bytes, keys in order), checkpoint, then UPDATES updates whose document is
//! drawn with a skew (id = DOCS · u³: the lowest 10 % of ids get 46 % of the updates), with a
//! checkpoint every CHECKPOINT_EVERY updates (stand-in for "every second", so the trace does
//! not depend on the machine's speed). Cache 16 MB, so eviction writes between checkpoints.
//! Prints the event index where the load ends (for --end-of-load/--warmup-records).

use engine::{DiskEngine, EngineConfig, KvEngine, TableConfig, WriteBatch, WriteOptions};
use placement::{Event, Observer, TraceObserver};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

struct Counting {
    inner: TraceObserver,
    n: AtomicU64,
}
impl Observer for Counting {
    fn observe(&self, ev: &Event) {
        self.n.fetch_add(1, Ordering::Relaxed);
        self.inner.observe(ev);
    }
    fn flush(&self) {
        self.inner.flush();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let out = args
        .get(1)
        .ok_or("usage: engine_trace OUT [DOCS] [UPDATES] [CHECKPOINT_EVERY]")?;
    let arg = |i: usize, d: u64| args.get(i).map_or(Ok(d), |s| s.parse::<u64>());
    let docs = arg(2, 100_000)?;
    let updates = arg(3, 400_000)?;
    let every = arg(4, 20_000)?.max(1);
    let dir = tempfile::tempdir()?;
    let obs = Arc::new(Counting {
        inner: TraceObserver::create(std::path::Path::new(out))?,
        n: AtomicU64::new(0),
    });
    // WiredTiger's engine (flash mode off): the figures docs/placement.md quotes were made so.
    let off = engine::FlashMode::Off;
    let mut cfg = EngineConfig::with_mode(dir.path(), off);
    let (mut collection, mut index) = (TableConfig::collection(), TableConfig::index());
    engine::flash_mode_defaults(off).apply(&mut cfg, &mut collection, &mut index);
    cfg.cache_size = 16 << 20;
    cfg.checkpoint_interval = None;
    cfg.observer = Some(obs.clone());
    let eng = DiskEngine::open(cfg)?;
    let coll = eng.create_table("collection-usertable", &collection)?;
    let id_idx = eng.create_table(
        "index-usertable-_id",
        &TableConfig {
            id_index: true,
            ..index.clone()
        },
    )?;
    let sec = eng.create_table("index-usertable-field1", &index)?;
    let mut rng = StdRng::seed_from_u64(42);
    let mut field: Vec<u32> = Vec::with_capacity(docs as usize);
    let key = |i: u64| format!("user{i:010}");
    let skey = |f: u32, i: u64| format!("{f:08}:{i:010}");
    for i in 0..docs {
        let f = rng.gen::<u32>() % 1_000_000;
        field.push(f);
        let mut b = WriteBatch::new();
        b.put(coll, key(i), vec![rng.gen::<u8>(); 300]);
        b.put(id_idx, key(i), i.to_be_bytes().to_vec());
        b.put(sec, skey(f, i), Vec::new());
        eng.write(&b, WriteOptions::default())?;
    }
    eng.checkpoint()?;
    let end_of_load = obs.n.load(Ordering::Relaxed);
    for u in 0..updates {
        let x: f64 = rng.gen();
        let i = ((docs as f64) * x * x * x) as u64 % docs;
        let f = rng.gen::<u32>() % 1_000_000;
        let mut b = WriteBatch::new();
        b.put(coll, key(i), vec![rng.gen::<u8>(); 300]);
        b.delete(sec, skey(field[i as usize], i));
        b.put(sec, skey(f, i), Vec::new());
        field[i as usize] = f;
        eng.write(&b, WriteOptions::default())?;
        if (u + 1) % every == 0 {
            eng.checkpoint()?;
        }
    }
    eng.close()?;
    obs.flush();
    println!(
        "wrote {out}: {} events; the load ends before event {end_of_load} (--end-of-load {end_of_load} --warmup-records {end_of_load})",
        obs.n.load(Ordering::Relaxed)
    );
    Ok(())
}
