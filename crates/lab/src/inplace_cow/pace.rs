//! Pacing the in-place engine's write-backs by the workload's operations: a store that counts
//! the run phase's calls and writes the dirty pages back every so many, and the counting pass
//! that converts operations into calls.

use crate::run::{self, Clients, EngineWork, Lab};
use anyhow::{anyhow, Result};
use bson::Document;
use docdb::{DocDb, DocDbConfig};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use workload::store::{InProc, IndexSpec, Query, Store, Update, UpdateResult};

/// The run phase's store calls and the write-backs they began.
pub(super) struct Pace {
    db: Arc<DocDb>,
    /// Calls between two write-backs (0: count only).
    every: u64,
    armed: AtomicBool,
    calls: AtomicU64,
    write_backs: AtomicU64,
}

impl Pace {
    pub(super) fn new(db: Arc<DocDb>, every: u64) -> Pace {
        Pace {
            db,
            every,
            armed: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            write_backs: AtomicU64::new(0),
        }
    }

    /// The run phase begins: calls count from here.
    pub(super) fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    pub(super) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    pub(super) fn write_backs(&self) -> u64 {
        self.write_backs.load(Ordering::Relaxed)
    }

    /// After one call: counts it, and writes back when an interval is complete.
    fn tick(&self) -> Result<()> {
        if !self.armed.load(Ordering::Acquire) {
            return Ok(());
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if self.every > 0 && n.is_multiple_of(self.every) {
            self.db
                .engine()
                .checkpoint()
                .map_err(|e| anyhow!("paced write-back: {e}"))?;
            self.write_backs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// A store whose calls are paced by a [`Pace`].
pub(super) struct Paced {
    inner: InProc,
    pace: Arc<Pace>,
}

impl Paced {
    pub(super) fn new(inner: InProc, pace: Arc<Pace>) -> Paced {
        Paced { inner, pace }
    }

    fn after<T>(&self, r: Result<T>) -> Result<T> {
        let v = r?;
        self.pace.tick()?;
        Ok(v)
    }
}

impl Store for Paced {
    fn describe(&self) -> String {
        format!("{} (paced)", self.inner.describe())
    }
    fn drop_collection(&self, coll: &str) -> Result<()> {
        self.after(self.inner.drop_collection(coll))
    }
    fn create_indexes(&self, coll: &str, specs: &[IndexSpec]) -> Result<()> {
        self.after(self.inner.create_indexes(coll, specs))
    }
    fn insert_one(&self, coll: &str, doc: Document) -> Result<()> {
        self.after(self.inner.insert_one(coll, doc))
    }
    fn insert_many(&self, coll: &str, docs: Vec<Document>) -> Result<u64> {
        self.after(self.inner.insert_many(coll, docs))
    }
    fn find(&self, coll: &str, q: &Query) -> Result<Vec<Document>> {
        self.after(self.inner.find(coll, q))
    }
    fn find_one(&self, coll: &str, filter: Document) -> Result<Option<Document>> {
        self.after(self.inner.find_one(coll, filter))
    }
    fn update_one(&self, coll: &str, u: Update) -> Result<UpdateResult> {
        self.after(self.inner.update_one(coll, u))
    }
    fn update_bulk(&self, coll: &str, us: Vec<Update>) -> Result<()> {
        self.after(self.inner.update_bulk(coll, us))
    }
    fn delete_one(&self, coll: &str, filter: Document) -> Result<u64> {
        self.after(self.inner.delete_one(coll, filter))
    }
    fn count(&self, coll: &str, filter: Document, skip: u64, limit: i64) -> Result<u64> {
        self.after(self.inner.count(coll, filter, skip, limit))
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

/// The run phase's store calls and operations of one workload and seed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Calls {
    pub(super) run_calls: u64,
    pub(super) run_ops: u64,
}

impl Calls {
    /// Store calls per operation (1 for YCSB; LinkBench's requests make one or more).
    pub(super) fn per_op(&self) -> f64 {
        assert!(self.run_ops > 0, "a run phase has operations");
        self.run_calls as f64 / self.run_ops as f64
    }
}

/// Counts `w`'s run-phase store calls on the in-memory engine: the document layer answers as
/// on any engine, so the workload makes the same calls (saved, and reused on a resumed run).
pub(super) fn count_calls(lab: &Lab, w: &EngineWork) -> Result<Calls> {
    let saved = lab
        .out
        .join("points")
        .join(format!("calls-{}-s{}-{}.json", w.workload, w.seed, w.scale));
    if let Some(c) = std::fs::read_to_string(&saved)
        .ok()
        .and_then(|t| serde_json::from_str::<Calls>(&t).ok())
    {
        return Ok(c);
    }
    let cfg = DocDbConfig {
        uuid_seed: Some(w.seed),
        ..DocDbConfig::in_memory()
    };
    let db = DocDb::open(cfg).map_err(|e| anyhow!("opening the counting database: {e}"))?;
    let pace = Arc::new(Pace::new(db.clone(), 0));
    let scale = lab.exp.scale_spec(&w.scale).expect("validated");
    let (_, ran, _) = run::drive(
        |name| Ok(Paced::new(InProc::new(db.clone(), name), pace.clone())),
        w,
        &scale,
        Clients::OneDeterministic,
        || {
            pace.arm();
            Ok(Some(0))
        },
    )?;
    db.shutdown().map_err(|e| anyhow!("{e}"))?;
    let c = Calls {
        run_calls: pace.calls(),
        run_ops: ran.operations,
    };
    std::fs::write(&saved, serde_json::to_string_pretty(&c)?)?;
    Ok(c)
}
