//! Seed 001's benchmark (§10.3): its documents, its insert job and read job, its engine
//! configurations, what it measures (startup, insert, shutdown, disk use, cold and warm read
//! passes). `run::run_engine` runs it on the copy-on-write engine, and `run::in_place` on the
//! in-place engine (MMAPv1's design, crates/inplace), with the same functions.
//!
//! Both engines get the same documents (the same generator and seed), the same cache (the
//! chapter's `cacheSizeGB: 8`, which held its whole data set), the same durability (a journal
//! group-committed every 100 ms, uncompressed as the chapter configured WiredTiger's, writes
//! acknowledged before their group commit, one write-back or checkpoint at the end of the
//! insert job), the same client (one thread, one document per insert) and the same host, one
//! engine run at a time.

use anyhow::{anyhow, bail, Result};
use docdb::{DocDb, DocDbConfig};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use workload::measure::PhaseResult;

/// The read job's passes over the collection (the chapter's `NUM_LOOPS`, Table 10.5's rows):
/// the first is cold, the others warm.
pub const READ_PASSES: usize = 16;

/// The cache every engine of the experiment gets: the chapter's WiredTiger `cacheSizeGB: 8`
/// (MMAPv1 had the machine's 16 GB of page cache). It holds the data at every scale, so the
/// warm passes read from memory as the chapter's did.
pub const CACHE_BYTES: u64 = 8 << 30;

/// What the chapter's configurations set beside the block compressor, on an engine
/// configuration the lab made: the cache, an uncompressed journal (`journalCompressor:
/// none`), and index prefix compression only where a block compressor is on (its
/// uncompressed configuration sets `prefixCompression: false`, the others `true`).
pub(crate) fn configure(cfg: &mut DocDbConfig) {
    cfg.engine.cache_size = CACHE_BYTES;
    if let Some(j) = cfg.engine.journal.as_mut() {
        j.compressor = engine::JournalCompressor::None;
    }
    cfg.index_table.prefix_compression =
        cfg.collection_table.compressor != engine::Compressor::None;
}

/// The insert job's result: its phase, and the bytes of the documents it inserted (BSON).
pub(crate) struct Inserted {
    pub phase: PhaseResult,
    pub doc_bytes: u64,
}

/// Inserts `n` documents of the chapter's shape (seed 001 §10.3.2) one by one, then
/// checkpoints (the copy-on-write engine) or writes back (the in-place one).
pub(crate) fn insert(db: &Arc<DocDb>, n: u64) -> Result<Inserted> {
    let mut rng = workload::rng(10);
    let mut doc_bytes = 0u64;
    let started = Instant::now();
    for _ in 0..n {
        let docu = document(&mut rng);
        doc_bytes += bson::to_vec(&docu)?.len() as u64;
        let out = db.insert(
            "bench",
            "benchmark",
            vec![docu],
            docdb::WriteOpts::default(),
        );
        if let Some(e) = out.write_errors.first() {
            bail!("insert failed: {}", e.error);
        }
    }
    db.engine().checkpoint().map_err(|e| anyhow!("{e}"))?;
    let elapsed = started.elapsed();
    let phase = PhaseResult {
        phase: "load".into(),
        runtime_ms: elapsed.as_secs_f64() * 1e3,
        operations: n,
        throughput_ops_sec: n as f64 / elapsed.as_secs_f64().max(1e-9),
        ..PhaseResult::default()
    };
    Ok(Inserted { phase, doc_bytes })
}

/// One document of `insert.js`: four typed fields, an array of eight four-field subdocuments
/// and eight four-field subdocuments `sub8`..`sub15`.
fn document(rng: &mut workload::Rng) -> bson::Document {
    use bson::{doc, Bson, DateTime, Document};
    use rand::Rng;
    let mut fields = || {
        let r: f64 = rng.gen();
        let int = (1e8 * r).floor() as i64;
        // JavaScript's Math.floor(1e64 * r).toString(36): about 40 base-36 digits.
        let s: String = (0..40)
            .map(|_| char::from_digit(rng.gen_range(0..36), 36).unwrap())
            .collect();
        (DateTime::from_millis((1.5e12 * r) as i64), int, s, int % 2)
    };
    let (d, i, s, b) = fields();
    let mut docu = doc! {"random_date": d, "random_int": i, "random_string": s, "random_bool": b};
    let mut arr = Vec::new();
    for k in 0..16 {
        let (d, i, s, b) = fields();
        let sub: Document =
            doc! {"date_field": d, "int_field": i, "string_field": s, "bool_field": b};
        if k < 8 {
            arr.push(Bson::Document(sub));
        } else {
            docu.insert(format!("sub{k}"), sub);
        }
    }
    docu.insert("arr", arr);
    docu
}

/// The chapter's read job (seed 001 §10.3.4): restart on the database the insert job left,
/// fetch every document [`READ_PASSES`] times, shut down. The first pass is cold (nothing in
/// the engine's cache), the others warm. Returns the restart's and the shutdown's seconds,
/// every pass's, the cold pass, the warm passes' mean and the whole job's.
pub(crate) fn reads(mut cfg: DocDbConfig, n: u64) -> Result<BTreeMap<String, f64>> {
    cfg.engine.observer = None;
    let mut extra = BTreeMap::new();
    let opening = Instant::now();
    let db = DocDb::open(cfg).map_err(|e| anyhow!("reopening the lab database: {e}"))?;
    extra.insert("restart_s".into(), opening.elapsed().as_secs_f64());
    let mut passes = Vec::new();
    for _ in 0..READ_PASSES {
        let t = Instant::now();
        let got = db
            .find("bench", "benchmark", &docdb::FindQuery::default())
            .map_err(|e| anyhow!("{e}"))?
            .count();
        if got as u64 != n {
            bail!("read pass returned {got} documents, expected {n}");
        }
        passes.push(t.elapsed().as_secs_f64());
    }
    let closing = Instant::now();
    db.shutdown().map_err(|e| anyhow!("{e}"))?;
    extra.insert("restart_shutdown_s".into(), closing.elapsed().as_secs_f64());
    for (i, s) in passes.iter().enumerate() {
        extra.insert(format!("read_pass_{:02}_s", i + 1), *s);
    }
    let warm = &passes[1..];
    extra.insert("cold_read_s".into(), passes[0]);
    extra.insert(
        "warm_read_s".into(),
        warm.iter().sum::<f64>() / warm.len() as f64,
    );
    extra.insert("read_job_s".into(), passes.iter().sum());
    Ok(extra)
}

/// What a directory takes on disk: the blocks allocated to its files (`du -s
/// --block-size=1`, the chapter's measure), and their sizes (a sparse file's unwritten pages
/// take no block but count in its size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskUse {
    pub allocated: u64,
    pub apparent: u64,
}

/// [`DiskUse`] of every file under `dir` whose name `counts`.
pub fn disk_use(dir: &Path, counts: &dyn Fn(&str) -> bool) -> Result<DiskUse> {
    use std::os::unix::fs::MetadataExt;
    let mut total = DiskUse::default();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        if meta.is_dir() {
            let sub = disk_use(&e.path(), counts)?;
            total.allocated += sub.allocated;
            total.apparent += sub.apparent;
        } else if counts(&e.file_name().to_string_lossy()) {
            total.allocated += meta.blocks() * 512;
            total.apparent += meta.len();
        }
    }
    Ok(total)
}

/// The measurements of the insert job's engine run, as the report reads them: the startup on
/// an empty dbPath, the insert job, the shutdown, the dbPath's disk use after it (every file,
/// journal included, as `du`), the documents' bytes; then the read job's ([`reads`]).
pub(crate) fn measurements(
    timings: [f64; 3],
    inserted: &Inserted,
    db_path: DiskUse,
    reads: BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    let [startup_s, insert_s, shutdown_s] = timings;
    let mut extra = reads;
    extra.insert("startup_s".into(), startup_s);
    extra.insert("insert_s".into(), insert_s);
    extra.insert("shutdown_s".into(), shutdown_s);
    extra.insert("du_bytes".into(), db_path.allocated as f64);
    extra.insert("dbpath_apparent_bytes".into(), db_path.apparent as f64);
    extra.insert("doc_bytes".into(), inserted.doc_bytes as f64);
    extra
}
