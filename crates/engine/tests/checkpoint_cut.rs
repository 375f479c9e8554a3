//! A checkpoint is a consistent cut (issue 11 §5): taken while writers commit batches that
//! span three tables, each checkpoint, opened on its own (its files copied without the
//! journal, so nothing is replayed), holds every table as of one commit number. The tables are
//! checkpointed one after another while the writers go on, so a checkpoint that wrote each
//! table as it found it would show a batch in one table and not in another.
//!
//! Each writer thread `t` numbers its batches 1, 2, …; batch `n` sets `seq[t] = n` and, for a
//! few keys, `a[k] = b[k] = (t, n)`. A cut at one commit number holds, for each thread, its
//! batches up to `seq[t]` and no later one, so: `a` and `b` agree; every value `(t, n)` has
//! `n <= seq[t]`, and is the last value thread `t` wrote to that key by then; and a key no
//! value names was written by no thread by then.

use engine::{
    Direction, DiskEngine, EngineConfig, KvEngine, TableConfig, WriteBatch, WriteOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WRITERS: u64 = 2;
const KEYS: u32 = 600;

fn config(dir: &Path) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    // A small cache: eviction and scrub write pages all the time, also during checkpoints.
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = None;
    cfg.checkpoint_log_size = None;
    cfg.checkpoint_written_bytes = None;
    cfg
}

fn tables() -> [(&'static str, TableConfig); 3] {
    // `seq` first: checkpointed before the others, so a fuzzy pass would show `a` newer.
    [
        ("seq", TableConfig::index()),
        ("a", TableConfig::collection().with_leaf_page_max(4096)),
        ("b", TableConfig::index().with_leaf_page_max(4096)),
    ]
}

fn encode(t: u64, n: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(16));
    v.extend_from_slice(&t.to_be_bytes());
    v.extend_from_slice(&n.to_be_bytes());
    v.resize(len.max(16), (n % 251) as u8);
    v
}

fn decode(v: &[u8]) -> (u64, u64) {
    let word = |i: usize| u64::from_be_bytes(v[i..i + 8].try_into().unwrap());
    (word(0), word(8))
}

/// What one writer thread did: for each batch number (from 1), the keys it wrote.
type History = Vec<Vec<u32>>;

fn writer(eng: Arc<DiskEngine>, ids: [u32; 3], t: u64, stop: Arc<AtomicBool>) -> History {
    let mut rng = StdRng::seed_from_u64(0xC0 + t);
    let mut history = History::new();
    while !stop.load(Ordering::Relaxed) {
        let n = history.len() as u64 + 1;
        let keys: Vec<u32> = (0..rng.gen_range(1..=3))
            .map(|_| rng.gen_range(0..KEYS))
            .collect();
        let mut b = WriteBatch::new();
        b.put(
            ids[0],
            format!("t{t}").into_bytes(),
            n.to_be_bytes().to_vec(),
        );
        for &k in &keys {
            let key = format!("k{k:05}").into_bytes();
            // Now and then a value past the leaf's value limit: an overflow block.
            let len = if rng.gen_range(0..100) == 0 {
                9000
            } else {
                rng.gen_range(40..300)
            };
            b.put(ids[1], key.clone(), encode(t, n, len));
            b.put(ids[2], key, encode(t, n, 16));
        }
        eng.write(&b, WriteOptions::default()).unwrap();
        history.push(keys);
    }
    history
}

fn read(eng: &DiskEngine, name: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let id = eng.table_id(name).expect("the table is in the checkpoint");
    eng.scan(id, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .unwrap()
        .map(|kv| kv.unwrap())
        .collect()
}

/// The checkpoint in `dir` (opened without a journal) against the writers' histories.
fn check_cut(dir: &Path, histories: &[History]) -> Result<(), String> {
    let eng = DiskEngine::open(config(dir)).map_err(|e| format!("open: {e}"))?;
    let (seq, a, b) = (read(&eng, "seq"), read(&eng, "a"), read(&eng, "b"));
    let upto: Vec<u64> = (0..WRITERS)
        .map(|t| {
            seq.get(format!("t{t}").as_bytes())
                .map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()))
        })
        .collect();
    // The last batch of thread t at or below its cut that wrote key k.
    let last = |t: usize, k: u32| -> Option<u64> {
        (1..=upto[t])
            .rev()
            .find(|&n| histories[t][n as usize - 1].contains(&k))
    };
    let ab_a: Vec<_> = a.iter().map(|(k, v)| (k.clone(), decode(v))).collect();
    let ab_b: Vec<_> = b.iter().map(|(k, v)| (k.clone(), decode(v))).collect();
    if ab_a != ab_b {
        return Err(format!(
            "tables a and b differ ({} and {} keys): the batches that wrote both are split by \
             the checkpoint",
            a.len(),
            b.len()
        ));
    }
    for k in 0..KEYS {
        let key = format!("k{k:05}").into_bytes();
        match a.get(&key).map(|v| decode(v)) {
            Some((t, n)) => {
                let t = t as usize;
                if n > upto[t] {
                    return Err(format!(
                        "key {k} holds batch {n} of writer {t}, whose sequence says {}",
                        upto[t]
                    ));
                }
                if last(t, k) != Some(n) {
                    return Err(format!(
                        "key {k} holds batch {n} of writer {t}, which wrote it again in batch {:?} \
                         at or below its cut {}",
                        last(t, k),
                        upto[t]
                    ));
                }
            }
            None => {
                if let Some(t) = (0..WRITERS as usize).find(|&t| last(t, k).is_some()) {
                    return Err(format!(
                        "key {k} is absent, but writer {t} wrote it in batch {:?} at or below \
                         its cut {}",
                        last(t, k),
                        upto[t]
                    ));
                }
            }
        }
    }
    eng.close().map_err(|e| format!("close: {e}"))?;
    Ok(())
}

/// Copies the database's files, but not its journal: the copy opens at the checkpoint.
fn copy_checkpoint(db: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(db).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn every_checkpoint_holds_all_tables_at_one_commit_number() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let eng = Arc::new(DiskEngine::open(config(&db)).unwrap());
    let mut ids = [0u32; 3];
    for (id, (name, cfg)) in ids.iter_mut().zip(tables()) {
        *id = eng.create_table(name, &cfg).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (eng, stop) = (eng.clone(), stop.clone());
            std::thread::spawn(move || writer(eng, ids, t, stop))
        })
        .collect();
    // No checkpoint starts on its own, so a copy made right after one holds that one: its
    // blocks are not reused before the next is durable.
    let rounds = 12;
    for round in 0..rounds {
        std::thread::sleep(Duration::from_millis(30));
        eng.checkpoint().unwrap();
        copy_checkpoint(&db, &dir.path().join(format!("cut{round}")));
    }
    stop.store(true, Ordering::Relaxed);
    let histories: Vec<History> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(
        histories.iter().all(|h| h.len() > rounds),
        "the writers committed batches between the checkpoints: {:?}",
        histories.iter().map(Vec::len).collect::<Vec<_>>()
    );
    for round in 0..rounds {
        if let Err(e) = check_cut(&dir.path().join(format!("cut{round}")), &histories) {
            panic!("checkpoint {round} is not a cut at one commit number: {e}");
        }
    }
    Arc::try_unwrap(eng).ok().unwrap().close().unwrap();
}
