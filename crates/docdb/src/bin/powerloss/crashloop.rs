//! The power-loss crash loop through the document layer, shared by the
//! `flashdoc-docdb-powerloss` binary and docdb's `powerloss` test (which includes this file with
//! `#[path]`).
//!
//! A cycle: start from the previous cycle's crash image (a fresh directory every `lineage`
//! cycles), adopt it as durable in a [`PowerLossFiles`] backend armed to cut the power at a
//! random operation, open docdb on it (so recovery itself can be cut), run a random workload
//! (inserts, updates, deletes with and without `j: true`, index builds and drops, collection
//! drops, renames, `$out`, checkpoints), materialise one post-crash image from a seed, and open
//! a copy with the real engine and docdb. The check: the state found is the state after some
//! prefix of the cycle's operations at least as long as the last one acknowledged with
//! `j: true` (the journal is ordered, so nothing else is possible: no acknowledged write lost,
//! nothing half applied); every collection validates (every index matches its collection); the
//! catalog opens. The state found is the next cycle's starting state.

use bson::{doc, Bson, Document};
use docdb::{AggregateOpts, DeleteStatement, DocDb, DocDbConfig, FindQuery, Interrupt};
use docdb::{UpdateStatement, WriteOpts};
use engine::io::{CrashOdds, Mutation, PowerLossFiles};
use engine::{EngineKind, Schedule};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DB: &str = "t";
const COLLS: [&str; 4] = ["c0", "c1", "c2", "c3"];
const FIELDS: [&str; 2] = ["a", "b"];

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    pub seed: u64,
    pub cycles: u64,
    /// Operations per workload.
    pub steps: usize,
    /// Cycles sharing one directory before a fresh one.
    pub lineage: u64,
    pub mutation: Mutation,
    pub odds: CrashOdds,
    /// The storage engine under the document layer: the copy-on-write one (`Disk`) or the
    /// in-place one (`Mmapv1`).
    pub engine: EngineKind,
}

/// A collection as the model holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coll {
    pub docs: BTreeMap<i64, Document>,
    pub indexes: BTreeSet<String>,
}

/// The database as the model holds it: collections of `DB` by name.
pub type State = BTreeMap<String, Coll>;

/// One workload operation.
#[derive(Clone, Debug)]
pub enum Op {
    Insert {
        coll: String,
        doc: Document,
        j: bool,
    },
    Update {
        coll: String,
        id: i64,
        v: i64,
        a: i64,
        j: bool,
    },
    Delete {
        coll: String,
        id: i64,
        j: bool,
    },
    CreateIndex {
        coll: String,
        field: String,
    },
    DropIndex {
        coll: String,
        name: String,
    },
    Drop {
        coll: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Out {
        from: String,
        to: String,
    },
    Checkpoint,
    /// The implicit creation of a collection by an insert: a step of its own (it commits before
    /// the insert's document does), recorded, never performed.
    Create {
        coll: String,
    },
}

impl Op {
    /// Acknowledged as durable when it returns (`j: true`).
    fn journaled(&self) -> bool {
        matches!(
            self,
            Op::Insert { j: true, .. } | Op::Update { j: true, .. } | Op::Delete { j: true, .. }
        )
    }

    /// The state after this operation.
    pub fn apply(&self, s: &mut State) {
        let new_coll = || Coll {
            docs: BTreeMap::new(),
            indexes: BTreeSet::from(["_id_".to_string()]),
        };
        match self {
            Op::Insert { coll, doc, .. } => {
                let id = doc.get_i64("_id").expect("ids are i64");
                s.entry(coll.clone())
                    .or_insert_with(new_coll)
                    .docs
                    .insert(id, doc.clone());
            }
            Op::Update { coll, id, v, a, .. } => {
                if let Some(d) = s.get_mut(coll).and_then(|c| c.docs.get_mut(id)) {
                    d.insert("v", *v);
                    d.insert("a", *a);
                }
            }
            Op::Delete { coll, id, .. } => {
                if let Some(c) = s.get_mut(coll) {
                    c.docs.remove(id);
                }
            }
            Op::CreateIndex { coll, field } => {
                s.entry(coll.clone())
                    .or_insert_with(new_coll)
                    .indexes
                    .insert(format!("{field}_1"));
            }
            Op::DropIndex { coll, name } => {
                if let Some(c) = s.get_mut(coll) {
                    c.indexes.remove(name);
                }
            }
            Op::Drop { coll } => {
                s.remove(coll);
            }
            Op::Rename { from, to } => {
                if let Some(c) = s.remove(from) {
                    s.insert(to.clone(), c);
                }
            }
            Op::Out { from, to } => {
                let docs = s.get(from).map(|c| c.docs.clone()).unwrap_or_default();
                let indexes = s
                    .get(to)
                    .map_or_else(|| new_coll().indexes, |c| c.indexes.clone());
                s.insert(to.clone(), Coll { docs, indexes });
            }
            Op::Create { coll } => {
                s.entry(coll.clone()).or_insert_with(new_coll);
            }
            Op::Checkpoint => {}
        }
    }
}

/// `from` and another collection name drawn after it, for a rename or an `$out`; None when
/// the draw lands on `from` itself.
fn other_coll(rng: &mut StdRng, from: String) -> Option<(String, String)> {
    let to = COLLS
        .iter()
        .find(|c| **c != from && rng.gen_bool(0.5))
        .map_or("c3", |c| c);
    (to != from).then(|| (from, to.to_string()))
}

/// The next operation, drawn against the current state (so none is refused).
fn draw(rng: &mut StdRng, s: &State, step: u64) -> Op {
    let coll = COLLS[rng.gen_range(0..COLLS.len())].to_string();
    let j = rng.gen_bool(0.5);
    let existing: Vec<&String> = s.keys().collect();
    let roll = rng.gen_range(0..100);
    let pick = |rng: &mut StdRng| existing[rng.gen_range(0..existing.len())].clone();
    match roll {
        _ if existing.is_empty() || roll < 40 => {
            let free: Vec<i64> = (0..40)
                .filter(|i| !s.get(&coll).is_some_and(|c| c.docs.contains_key(i)))
                .collect();
            if free.is_empty() {
                return Op::Delete {
                    coll,
                    id: rng.gen_range(0..40),
                    j,
                };
            }
            let id = free[rng.gen_range(0..free.len())];
            let pad = "x".repeat(rng.gen_range(0..600));
            let doc = doc! {"_id": id, "v": step as i64, "a": rng.gen_range(0..10i64), "b": format!("{step}-{pad}")};
            Op::Insert { coll, doc, j }
        }
        40..=59 => Op::Update {
            coll: pick(rng),
            id: rng.gen_range(0..40),
            v: step as i64,
            a: rng.gen_range(0..10),
            j,
        },
        60..=71 => Op::Delete {
            coll: pick(rng),
            id: rng.gen_range(0..40),
            j,
        },
        72..=79 => Op::CreateIndex {
            coll: pick(rng),
            field: FIELDS[rng.gen_range(0..2)].to_string(),
        },
        80..=83 => {
            let c = pick(rng);
            match s[&c].indexes.iter().find(|n| *n != "_id_") {
                Some(name) => Op::DropIndex {
                    coll: c,
                    name: name.clone(),
                },
                None => Op::Checkpoint,
            }
        }
        84..=86 => Op::Drop { coll: pick(rng) },
        87..=90 => {
            let from = pick(rng);
            match other_coll(rng, from) {
                Some((from, to)) => Op::Rename { from, to },
                None => Op::Checkpoint,
            }
        }
        91..=94 => {
            let from = pick(rng);
            match other_coll(rng, from) {
                Some((from, to)) => Op::Out { from, to },
                None => Op::Checkpoint,
            }
        }
        _ => Op::Checkpoint,
    }
}

fn opts(j: bool) -> WriteOpts {
    WriteOpts {
        journal: j,
        ..WriteOpts::default()
    }
}

fn outcome(o: docdb::WriteOutcome) -> Result<(), String> {
    match o.write_errors.first() {
        None => Ok(()),
        Some(e) => Err(format!("{e:?}")),
    }
}

/// Runs one operation against docdb.
fn perform(db: &DocDb, op: &Op) -> Result<(), String> {
    let e = |e: docdb::DocError| format!("{e:?}");
    match op {
        Op::Insert { coll, doc, j } => outcome(db.insert(DB, coll, vec![doc.clone()], opts(*j))),
        Op::Update { coll, id, v, a, j } => {
            let stmt = UpdateStatement {
                q: doc! {"_id": id},
                u: Bson::Document(doc! {"$set": {"v": v, "a": a}}),
                ..Default::default()
            };
            outcome(db.update(DB, coll, &[stmt], opts(*j)))
        }
        Op::Delete { coll, id, j } => {
            let stmt = DeleteStatement {
                q: doc! {"_id": id},
                limit: 1,
                ..Default::default()
            };
            outcome(db.delete(DB, coll, &[stmt], opts(*j)))
        }
        Op::CreateIndex { coll, field } => db
            .create_indexes(
                DB,
                coll,
                &[doc! {"key": {field.as_str(): 1}, "name": format!("{field}_1")}],
            )
            .map(drop)
            .map_err(e),
        Op::DropIndex { coll, name } => db
            .drop_indexes(DB, coll, &Bson::String(name.clone()))
            .map(drop)
            .map_err(e),
        Op::Drop { coll } => db.drop_collection(DB, coll).map_err(e),
        Op::Rename { from, to } => db.rename_collection(DB, from, DB, to, true).map_err(e),
        Op::Out { from, to } => {
            let cursor = db
                .aggregate(
                    DB,
                    from,
                    &[doc! {"$out": to.as_str()}],
                    &AggregateOpts::default(),
                )
                .map_err(e)?;
            cursor.collect::<Result<Vec<_>, _>>().map(drop).map_err(e)
        }
        Op::Checkpoint => db.engine().checkpoint().map_err(|x| x.to_string()),
        Op::Create { .. } => unreachable!("recorded, never performed"),
    }
}

/// The engine settings of every open: the inline schedule (no threads: the operations, and so
/// the crash points, are a function of the seed), small journal files and frequent checkpoints.
pub fn config(dir: &Path, backend: Option<Arc<PowerLossFiles>>, engine: EngineKind) -> DocDbConfig {
    let mut cfg = DocDbConfig::disk(dir);
    cfg.engine_kind = engine;
    cfg.engine.cache_size = 2 << 20;
    cfg.engine.schedule = Schedule::Inline;
    cfg.engine.checkpoint_interval = None;
    cfg.engine.checkpoint_written_bytes = Some(96 << 10);
    if let Some(j) = cfg.engine.journal.as_mut() {
        j.file_max = engine::config::MIN_FILE_MAX;
    }
    if engine == EngineKind::Mmapv1 {
        // It stores records uncompressed (as the server configures it).
        cfg.collection_table.compressor = engine::Compressor::None;
        cfg.index_table.compressor = engine::Compressor::None;
        // The in-place engine has no inline schedule: its group committer is a thread. With an
        // interval no cycle lasts, it commits only when a `j: true` writer waits for it (the
        // writer blocked meanwhile), so the crash points stay a function of the seed.
        if let Some(j) = cfg.engine.journal.as_mut() {
            j.commit_interval = std::time::Duration::from_secs(3600);
        }
    }
    cfg.engine.backend = backend.map(|b| b as Arc<dyn engine::io::Backend>);
    cfg.uuid_seed = Some(1);
    cfg
}

/// What docdb holds, after checking that the catalog opens and every collection validates.
pub fn observe(db: &DocDb) -> Result<State, String> {
    let mut s = State::new();
    let colls = db
        .list_collections(DB)
        .map_err(|e| format!("listCollections: {e:?}"))?;
    for info in colls {
        let name = info.name;
        let v = db
            .validate(DB, &name, true, &Interrupt::none())
            .map_err(|e| format!("validate {name}: {e:?}"))?;
        if v.get_bool("valid") != Ok(true) {
            return Err(format!("validate {name}: {v}"));
        }
        let mut c = Coll::default();
        for d in db
            .find(DB, &name, &FindQuery::default())
            .map_err(|e| format!("find {name}: {e:?}"))?
        {
            let d = d.map_err(|e| format!("find {name}: {e:?}"))?;
            let id = d
                .get_i64("_id")
                .map_err(|_| format!("{name}: a document without an i64 _id: {d}"))?;
            c.docs.insert(id, d);
        }
        for spec in db
            .list_indexes(DB, &name)
            .map_err(|e| format!("listIndexes {name}: {e:?}"))?
        {
            c.indexes
                .insert(spec.get_str("name").unwrap_or("?").to_string());
        }
        s.insert(name, c);
    }
    Ok(s)
}

/// The operations a cycle ran, with whether each was acknowledged as durable.
struct Ran {
    ops: Vec<Op>,
    /// How many leading operations are durable for sure (through the last `j: true` ack).
    durable: usize,
}

fn run_workload(
    db: &DocDb,
    pl: &PowerLossFiles,
    rng: &mut StdRng,
    base: &State,
    steps: usize,
) -> Ran {
    let mut live = base.clone();
    let mut ran = Ran {
        ops: Vec::new(),
        durable: 0,
    };
    for step in 0..steps {
        let op = draw(rng, &live, step as u64);
        if let Op::Insert { coll, .. } = &op {
            if !live.contains_key(coll) {
                let create = Op::Create { coll: coll.clone() };
                create.apply(&mut live);
                ran.ops.push(create);
            }
        }
        let r = perform(db, &op);
        ran.ops.push(op.clone());
        match r {
            Ok(()) => {
                let before = live.clone();
                op.apply(&mut live);
                // A `j: true` write that changed nothing may write (and sync) nothing.
                if op.journaled() && live != before {
                    ran.durable = ran.ops.len();
                }
            }
            Err(_) if pl.crashed() => break,
            Err(e) => panic!("{op:?} failed with the power on: {e}"),
        }
        if pl.crashed() {
            break;
        }
    }
    ran
}

/// Whether `found` is the state after some prefix of `ran` at least `ran.durable` long.
fn explain_mismatch(base: &State, ran: &Ran, found: &State) -> Option<String> {
    let mut s = base.clone();
    for (i, op) in ran.ops.iter().enumerate() {
        if i >= ran.durable && s == *found {
            return None;
        }
        op.apply(&mut s);
    }
    if s == *found {
        return None;
    }
    let mut want = base.clone();
    for op in &ran.ops[..ran.durable] {
        op.apply(&mut want);
    }
    Some(format!(
        "found a state that no prefix of at least {} of the {} operations gives.\nfound: {}\n\
         after the acknowledged prefix: {}\nops: {:?}",
        ran.durable,
        ran.ops.len(),
        summary(found),
        summary(&want),
        ran.ops
    ))
}

fn summary(s: &State) -> String {
    s.iter()
        .map(|(n, c)| {
            format!(
                "{n}{{docs {:?} idx {:?}}}",
                c.docs
                    .iter()
                    .map(|(k, d)| (k, d.get_i64("v").unwrap_or(-1)))
                    .collect::<Vec<_>>(),
                c.indexes
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seam check: every file under the data directory was created through the backend (the
/// lock file is an advisory lock holding a process id, never synced or read back).
pub fn check_seam(pl: &PowerLossFiles, live: &Path) -> Result<(), String> {
    let known = pl.live_files();
    let mut stack = vec![live.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                stack.push(p);
            } else if !known.contains(&p) && p.file_name().is_some_and(|n| n != "flashdoc.lock") {
                return Err(format!("{} was made outside the I/O seam", p.display()));
            }
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let p = e?.path();
        let dest = to.join(p.file_name().expect("an entry has a name"));
        if p.is_dir() {
            copy_dir(&p, &dest)?;
        } else {
            std::fs::copy(&p, &dest)?;
        }
    }
    Ok(())
}

/// The outcome of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub cycles: u64,
    pub ops: u64,
    pub acknowledged: u64,
    pub crashed_in_open: u64,
}

/// Runs `s.cycles` cycles under `work` (emptied first); the first failure ends the run with a
/// message naming the seed and the cycle.
pub fn run(s: &Settings, work: &Path) -> Result<Report, String> {
    let _ = std::fs::remove_dir_all(work);
    let mut report = Report::default();
    let mut base_dir: Option<PathBuf> = None;
    let mut base = State::new();
    let mut est_ops: u64 = 400;
    for cycle in 0..s.cycles {
        if cycle % s.lineage.max(1) == 0 {
            if let Some(old) = base_dir.take() {
                let _ = std::fs::remove_dir_all(old.parent().expect("a cycle directory"));
            }
            base = State::new();
        }
        let mut rng = StdRng::seed_from_u64(s.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ cycle);
        let fail = |what: String| format!("seed {} cycle {cycle}: {what}", s.seed);
        let cdir = work.join(format!("cycle{cycle}"));
        let live = cdir.join("live");
        match &base_dir {
            Some(b) => copy_dir(b, &live).map_err(|e| fail(e.to_string()))?,
            None => std::fs::create_dir_all(&live).map_err(|e| fail(e.to_string()))?,
        }
        let pl = Arc::new(PowerLossFiles::new(&live, s.odds, s.mutation));
        pl.adopt(&["flashdoc.lock"])
            .map_err(|e| fail(e.to_string()))?;
        pl.crash_after(rng.gen_range(1..=est_ops));
        let ran = match DocDb::open(config(&live, Some(pl.clone()), s.engine)) {
            Ok(db) => {
                let ran = run_workload(&db, &pl, &mut rng, &base, s.steps);
                drop(db);
                ran
            }
            Err(_) if pl.crashed() => {
                report.crashed_in_open += 1;
                Ran {
                    ops: Vec::new(),
                    durable: 0,
                }
            }
            Err(e) => return Err(fail(format!("open with the power on: {e:?}"))),
        };
        check_seam(&pl, &live).map_err(&fail)?;
        if !pl.crashed() {
            est_ops = est_ops.max(pl.ops());
            pl.crash_now();
        }
        let img = cdir.join("image");
        pl.materialise(rng.gen(), &img)
            .map_err(|e| fail(e.to_string()))?;
        let check = cdir.join("check");
        copy_dir(&img, &check).map_err(|e| fail(e.to_string()))?;
        let db = DocDb::open(config(&check, None, s.engine))
            .map_err(|e| fail(format!("reopen after the crash: {e:?}")))?;
        let found = observe(&db).map_err(&fail)?;
        drop(db);
        if let Some(why) = explain_mismatch(&base, &ran, &found) {
            return Err(fail(why));
        }
        report.cycles += 1;
        report.ops += ran.ops.len() as u64;
        report.acknowledged += ran.durable as u64;
        if let Some(old) = base_dir.replace(img) {
            let _ = std::fs::remove_dir_all(old.parent().expect("a cycle directory"));
        }
        let _ = std::fs::remove_dir_all(&live);
        let _ = std::fs::remove_dir_all(&check);
        base = found;
    }
    Ok(report)
}
