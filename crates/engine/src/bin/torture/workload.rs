//! The torture workload, shared by the `flashdoc-engine-torture` binary and the engine's
//! robustness tests (crash, corruption, bad input, disk full), which include this file with
//! `#[path]`.
//!
//! A batch is a pure function of (seed, shape, batch number): the writer child and the checking
//! parent both regenerate it, so the child only has to say which batches were acknowledged
//! (`ACK <n> …` lines on stdout). Every stored value starts with `<n>:<table>:<key>:`, so a
//! mismatch names the batch that wrote what was found.
//!
//! What a crash may leave: the batches acknowledged (always, in full) plus at most the one batch
//! that was in flight (in full or not at all). The child writes one batch at a time with
//! `sync: true` and prints `ACK n` before it starts batch n+1, so no other state is possible.
//! [`check_state`] accepts exactly those two states and explains anything else.

#![allow(dead_code)] // each includer uses a different part

use engine::{
    Direction, DiskEngine, EngineConfig, JournalCompressor, KvEngine, TableConfig, WriteBatch,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The two tables: a collection with 4 KB leaves and an index with the default 16 KB leaves.
pub const TABLES: [&str; 2] = ["coll", "idx"];

pub fn table_configs() -> [TableConfig; 2] {
    [
        TableConfig::collection().with_leaf_page_max(4096),
        TableConfig::index(),
    ]
}

/// Keys per table in the `Churn` shape.
const CHURN_KEYS: u32 = 2000;

/// How batches pick keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A bounded key space, rewritten over and over (with deletes): the files churn.
    Churn,
    /// Mostly fresh keys with incompressible values: the files only grow (disk-full tests).
    Grow,
}

/// One operation of a batch on table `TABLES[table]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub table: usize,
    pub key: Vec<u8>,
    /// `None` deletes.
    pub value: Option<Vec<u8>>,
}

/// The operations of batch `n`: a pure function of its arguments.
pub fn batch(seed: u64, shape: Shape, n: u64) -> Vec<Op> {
    let mut rng =
        StdRng::seed_from_u64(seed ^ n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let count = match shape {
        Shape::Churn => rng.gen_range(1..=16),
        Shape::Grow => rng.gen_range(8..=32),
    };
    let mut ops = Vec::with_capacity(count);
    for i in 0..count {
        let table = rng.gen_range(0..2);
        let (key, delete) = match shape {
            Shape::Churn => (
                format!("key{:06}", rng.gen_range(0..CHURN_KEYS) * 7),
                rng.gen_range(0..100) < 15,
            ),
            Shape::Grow if n > 0 && rng.gen_range(0..100) < 5 => {
                (format!("g{:010}-{:02}", rng.gen_range(0..n), 0), true)
            }
            Shape::Grow => (format!("g{n:010}-{i:02}"), false),
        };
        let value = (!delete).then(|| value(&mut rng, shape, n, table, &key));
        ops.push(Op {
            table,
            key: key.into_bytes(),
            value,
        });
    }
    ops
}

fn value(rng: &mut StdRng, shape: Shape, n: u64, table: usize, key: &str) -> Vec<u8> {
    let mut v = format!("{n}:{table}:{key}:").into_bytes();
    let len = match (shape, rng.gen_range(0..100)) {
        (Shape::Grow, _) => rng.gen_range(1000..4000),
        (_, 0) => rng.gen_range(20_000..40_000), // overflow on both tables
        (_, 1..=4) => rng.gen_range(4200..9000), // overflow on the 4 KB-leaf table
        (_, 5..=29) => rng.gen_range(300..1500),
        _ => rng.gen_range(16..300),
    };
    if shape == Shape::Grow {
        v.extend((v.len()..len).map(|_| rng.gen::<u8>()));
    } else {
        let b: u8 = rng.gen();
        v.extend((v.len()..len).map(|i| b.wrapping_add((i % 29) as u8)));
    }
    v
}

/// The batch number a stored value was written by.
pub fn value_batch(v: &[u8]) -> Option<u64> {
    let end = v.iter().position(|&b| b == b':')?;
    std::str::from_utf8(&v[..end]).ok()?.parse().ok()
}

pub fn describe(ops: &[Op]) -> String {
    let dels = ops.iter().filter(|o| o.value.is_none()).count();
    let bytes: usize = ops
        .iter()
        .map(|o| o.key.len() + o.value.as_ref().map_or(0, Vec::len))
        .sum();
    format!(
        "ops={} puts={} dels={dels} bytes={bytes}",
        ops.len(),
        ops.len() - dels
    )
}

pub fn write_batch(ops: &[Op], ids: [u32; 2]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for op in ops {
        match &op.value {
            Some(v) => b.put(ids[op.table], op.key.clone(), v.clone()),
            None => b.delete(ids[op.table], op.key.clone()),
        }
    }
    b
}

/// Per-table contents.
pub type State = [BTreeMap<Vec<u8>, Vec<u8>>; 2];

/// What the database must hold after batches `0..=last` (none when `last` is `None`).
#[derive(Clone, Debug)]
pub struct Model {
    pub seed: u64,
    pub shape: Shape,
    pub state: State,
    /// The last batch applied.
    pub last: Option<u64>,
}

impl Model {
    pub fn new(seed: u64, shape: Shape) -> Model {
        Model {
            seed,
            shape,
            state: Default::default(),
            last: None,
        }
    }

    /// The next batch number.
    pub fn next(&self) -> u64 {
        self.last.map_or(0, |l| l + 1)
    }

    /// Applies batches up to and including `last`.
    pub fn advance_to(&mut self, last: u64) {
        while self.last.is_none_or(|l| l < last) {
            let n = self.next();
            for op in batch(self.seed, self.shape, n) {
                let t = &mut self.state[op.table];
                match op.value {
                    Some(v) => t.insert(op.key, v),
                    None => t.remove(&op.key),
                };
            }
            self.last = Some(n);
        }
    }
}

/// Everything the engine holds, by full forward scans (a missing table is empty).
pub fn read_state(eng: &DiskEngine) -> engine::Result<State> {
    let mut out: State = Default::default();
    for (i, name) in TABLES.iter().enumerate() {
        if let Some(id) = eng.table_id(name) {
            for kv in eng.scan(id, Bound::Unbounded, Bound::Unbounded, Direction::Forward)? {
                let (k, v) = kv?;
                out[i].insert(k, v);
            }
        }
    }
    Ok(out)
}

/// How a checked state relates to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Exactly the acknowledged batches.
    Acked,
    /// The acknowledged batches and, in full, the one in flight.
    AckedPlusInFlight,
}

/// Checks that `got` is the model's state, or the model's state with batch `model.next()` (the
/// one that may have been in flight) applied in full. Anything else (a lost acknowledged
/// batch, a partially applied batch, a value from nowhere) is an error that explains itself.
pub fn check_state(got: &State, model: &Model) -> Result<Found, String> {
    let in_flight_n = model.next();
    let in_flight = batch(model.seed, model.shape, in_flight_n);
    // What the in-flight batch would leave at each key it touches (later ops win).
    let mut overlay: BTreeMap<(usize, &[u8]), Option<&[u8]>> = BTreeMap::new();
    for op in &in_flight {
        overlay.insert((op.table, &op.key), op.value.as_deref());
    }
    // (table, key, expected, found) where the state differs from the acknowledged one.
    type Diff<'a> = (usize, &'a [u8], Option<&'a [u8]>, Option<&'a [u8]>);
    let mut diffs: Vec<Diff> = Vec::new();
    for (t, (g, m)) in got.iter().zip(&model.state).enumerate() {
        let mut keys: Vec<&Vec<u8>> = g.keys().chain(m.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let (gv, mv) = (g.get(k).map(Vec::as_slice), m.get(k).map(Vec::as_slice));
            if gv != mv {
                diffs.push((t, k, mv, gv));
            }
        }
    }
    if diffs.is_empty() {
        return Ok(Found::Acked);
    }
    let whole_in_flight = diffs
        .iter()
        .all(|&(t, k, _, gv)| overlay.get(&(t, k)) == Some(&gv))
        && overlay
            .iter()
            .all(|(&(t, k), &v)| got[t].get(k).map(Vec::as_slice) == v);
    if whole_in_flight {
        return Ok(Found::AckedPlusInFlight);
    }
    let show = |v: Option<&[u8]>| match v {
        None => "absent".to_string(),
        Some(v) => match value_batch(v) {
            Some(b) => format!("value of batch {b} ({} bytes)", v.len()),
            None => format!("unrecognized value ({} bytes)", v.len()),
        },
    };
    let mut msg = format!(
        "the database is neither the acknowledged state (batches 0..={:?}) nor that plus batch \
         {in_flight_n} in full; {} key(s) differ from the acknowledged state:\n",
        model.last,
        diffs.len()
    );
    for &(t, k, mv, gv) in diffs.iter().take(20) {
        let _ = writeln!(
            msg,
            "  {}:{} expected {}, found {}{}",
            TABLES[t],
            String::from_utf8_lossy(k),
            show(mv),
            show(gv),
            if overlay.contains_key(&(t, k)) {
                " (key in the in-flight batch)"
            } else {
                ""
            }
        );
    }
    let applied = overlay
        .iter()
        .filter(|(&(t, k), &v)| got[t].get(k).map(Vec::as_slice) == v)
        .count();
    let _ = write!(
        msg,
        "  in-flight batch {in_flight_n}: {applied} of its {} distinct key(s) show its effect",
        overlay.len()
    );
    Err(msg)
}

/// Settings of the writer child.
#[derive(Clone, Debug)]
pub struct ChildOptions {
    pub shape: Shape,
    /// Stop after this many batches, print `DONE <next>` and idle until killed.
    pub batches: Option<u64>,
    /// No background checkpoints (everything after the first stays in the journal).
    pub no_checkpoint: bool,
    pub journal_file_max: u64,
    pub preallocate: bool,
    pub journal_compressor: JournalCompressor,
    /// On a write error, print `ERR …`, wait 20 ms and retry the same batch, forever (an
    /// application riding out a full disk), instead of exiting.
    pub retry: bool,
    /// Trim freed space in batches of this many extents, punched into the files
    /// (`fallocate(PUNCH_HOLE)`), with DSM placement and Linux write-life hints.
    pub trim_batch: Option<usize>,
    /// Files opened with `O_DIRECT`.
    pub direct_io: engine::DirectIo,
    /// Compact a table (`coll` and `idx` in turn) every this many milliseconds, while the
    /// batches go on (printing `COMPACT <table> <bytes before> <bytes after>`).
    pub compact_ms: Option<u64>,
}

impl Default for ChildOptions {
    fn default() -> Self {
        ChildOptions {
            shape: Shape::Churn,
            batches: None,
            no_checkpoint: false,
            journal_file_max: 1 << 20,
            preallocate: true,
            journal_compressor: JournalCompressor::Snappy,
            retry: false,
            trim_batch: None,
            direct_io: engine::DirectIo::NONE,
            compact_ms: None,
        }
    }
}

impl ChildOptions {
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            "--journal-file-max".to_string(),
            self.journal_file_max.to_string(),
            "--journal-compressor".to_string(),
            self.journal_compressor.to_string(),
        ];
        if self.shape == Shape::Grow {
            a.push("--grow".into());
        }
        if let Some(n) = self.batches {
            a.extend(["--batches".to_string(), n.to_string()]);
        }
        if self.no_checkpoint {
            a.push("--no-checkpoint".into());
        }
        if !self.preallocate {
            a.push("--no-preallocate".into());
        }
        if self.retry {
            a.push("--retry".into());
        }
        if let Some(k) = self.trim_batch {
            a.extend(["--trim".to_string(), k.to_string()]);
        }
        if self.direct_io.any() {
            a.extend(["--direct-io".to_string(), self.direct_io.to_string()]);
        }
        if let Some(ms) = self.compact_ms {
            a.extend(["--compact".to_string(), ms.to_string()]);
        }
        a
    }

    pub fn parse(args: &[String]) -> Result<ChildOptions, String> {
        let mut o = ChildOptions::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
            match a.as_str() {
                "--grow" => o.shape = Shape::Grow,
                "--no-checkpoint" => o.no_checkpoint = true,
                "--no-preallocate" => o.preallocate = false,
                "--retry" => o.retry = true,
                "--batches" => o.batches = Some(val(a)?.parse().map_err(|e| format!("{a}: {e}"))?),
                "--trim" => o.trim_batch = Some(val(a)?.parse().map_err(|e| format!("{a}: {e}"))?),
                "--direct-io" => o.direct_io = val(a)?.parse().map_err(|e| format!("{a}: {e}"))?,
                "--compact" => {
                    o.compact_ms = Some(val(a)?.parse().map_err(|e| format!("{a}: {e}"))?)
                }
                "--journal-file-max" => {
                    o.journal_file_max = val(a)?.parse().map_err(|e| format!("{a}: {e}"))?
                }
                "--journal-compressor" => {
                    o.journal_compressor = val(a)?.parse().map_err(|e| format!("{a}: {e}"))?
                }
                other => return Err(format!("unknown option {other}")),
            }
        }
        Ok(o)
    }

    /// The engine configuration: journal on with small files, a 1 MiB cache (so eviction runs
    /// all the time) and a checkpoint every 200 ms.
    pub fn engine_config(&self, db: &Path) -> EngineConfig {
        let mut cfg = EngineConfig::new(db);
        cfg.cache_size = 1 << 20;
        cfg.checkpoint_interval = (!self.no_checkpoint).then_some(Duration::from_millis(200));
        let j = cfg.journal.as_mut().expect("journal on by default");
        j.file_max = self.journal_file_max;
        j.preallocate = self.preallocate;
        j.compressor = self.journal_compressor;
        cfg.direct_io = self.direct_io;
        if let Some(k) = self.trim_batch {
            cfg.flash = engine::FlashConfig {
                placement: "dsm".parse().unwrap(),
                trim_batch: Some(k),
                hints: engine::settings::Hints::Linux,
                ..engine::FlashConfig::default()
            };
        }
        cfg
    }
}

/// Opens the engine and creates the tables if they are missing; returns their ids.
pub fn open_with_tables(cfg: EngineConfig) -> engine::Result<(DiskEngine, [u32; 2])> {
    let eng = DiskEngine::open(cfg)?;
    let mut ids = [0; 2];
    for ((id, name), tc) in ids.iter_mut().zip(TABLES).zip(table_configs()) {
        *id = match eng.table_id(name) {
            Some(id) => id,
            None => eng.create_table(name, &tc)?,
        };
    }
    Ok((eng, ids))
}

/// The command line of a writer child.
pub fn writer_command(
    exe: &Path,
    db: &Path,
    seed: u64,
    start: u64,
    opts: &ChildOptions,
) -> Command {
    let mut c = Command::new(exe);
    c.arg("write")
        .arg(db)
        .arg(seed.to_string())
        .arg(start.to_string())
        .args(opts.to_args())
        .stdin(Stdio::null());
    c
}

/// The numbers of the `ACK` lines in `out` (whole lines only), checked to run on from `start`.
pub fn parse_acks(out: &str, start: u64) -> Result<Vec<u64>, String> {
    let mut acks = Vec::new();
    let whole = match out.rfind('\n') {
        Some(i) => &out[..=i],
        None => "",
    };
    for line in whole.lines() {
        if let Some(rest) = line.strip_prefix("ACK ") {
            let n: u64 = rest
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad ACK line {line:?}"))?;
            let want = start + acks.len() as u64;
            if n != want {
                return Err(format!("ACK {n} where ACK {want} was expected"));
            }
            acks.push(n);
        }
    }
    Ok(acks)
}

/// The last lines of a text, for failure messages.
pub fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Repeated SIGKILL-and-recover against one database directory. The crash test and the
/// binary's `crash-loop` mode both drive this.
pub struct CrashLoop {
    pub exe: PathBuf,
    pub db: PathBuf,
    pub seed: u64,
    pub opts: ChildOptions,
    /// The schedule (kill delays, which cycles are checked): a pure function of the seed.
    rng: StdRng,
    /// Keys for spot-check reads (kept apart so the schedule does not depend on timing).
    sample_rng: StdRng,
    /// The acknowledged batches so far.
    pub model: Model,
    /// The batches the last checked checkpoint held (checkpoints only move forward).
    cut_model: Model,
    pub stats: CrashStats,
}

#[derive(Clone, Debug, Default)]
pub struct CrashStats {
    pub cycles: u64,
    /// Cycles whose state the parent opened and checked (the others are recovered by the next
    /// child only, and checked later).
    pub verified: u64,
    /// Checks that found the in-flight batch applied (durable before its ACK was printed).
    pub in_flight_applied: u64,
    /// Cycles in which the child acknowledged nothing (killed during start-up or recovery).
    pub no_ack_cycles: u64,
    pub entries_last_verified: u64,
    /// Compactions the children reported finished (`COMPACT` lines).
    pub compactions: u64,
    /// Checks that opened the last checkpoint alone and found it a cut at one batch.
    pub cuts_verified: u64,
    /// Of those, how many batches behind the acknowledged ones the checkpoint was, summed
    /// (the journal replays them).
    pub cut_batches_behind: u64,
}

impl CrashLoop {
    pub fn new(exe: &Path, db: &Path, seed: u64) -> CrashLoop {
        let opts = ChildOptions::default();
        CrashLoop {
            exe: exe.to_path_buf(),
            db: db.to_path_buf(),
            seed,
            rng: StdRng::seed_from_u64(seed),
            sample_rng: StdRng::seed_from_u64(!seed),
            model: Model::new(seed, opts.shape),
            cut_model: Model::new(seed, opts.shape),
            opts,
            stats: CrashStats::default(),
        }
    }

    fn side_file(&self, ext: &str) -> PathBuf {
        let mut p = self.db.clone().into_os_string();
        p.push(ext);
        PathBuf::from(p)
    }

    /// Batches acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.model.next()
    }

    /// One cycle: start a writer child at the next batch, SIGKILL it after 10–300 ms (seeded),
    /// collect its ACKs, and (on two cycles in three, and always with `force_check`) open the
    /// database here and check it. Errors say what was wrong and carry the child's output.
    pub fn cycle(&mut self, force_check: bool) -> Result<(), String> {
        let start = self.model.next();
        let (out_path, err_path) = (
            self.side_file(".child-stdout"),
            self.side_file(".child-stderr"),
        );
        let out =
            File::create(&out_path).map_err(|e| format!("creating {}: {e}", out_path.display()))?;
        let err =
            File::create(&err_path).map_err(|e| format!("creating {}: {e}", err_path.display()))?;
        let mut child: Child = writer_command(&self.exe, &self.db, self.seed, start, &self.opts)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.exe.display()))?;
        let delay = Duration::from_millis(self.rng.gen_range(10..=300));
        let check = force_check || self.rng.gen_range(0..3) != 0;
        std::thread::sleep(delay);
        let exited = child.try_wait().map_err(|e| e.to_string())?;
        if exited.is_none() {
            child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
        }
        child.wait().map_err(|e| e.to_string())?;
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        let ctx = |what: String| {
            format!(
                "{what}\n  child stdout (last lines):\n{}\n  child stderr (last lines):\n{}",
                tail(&stdout, 5),
                tail(&stderr, 10)
            )
        };
        if let Some(st) = exited {
            return Err(ctx(format!(
                "the writer exited by itself ({st}) before it was killed"
            )));
        }
        let acks = parse_acks(&stdout, start).map_err(ctx)?;
        self.stats.compactions +=
            stdout.lines().filter(|l| l.starts_with("COMPACT ")).count() as u64;
        if let Some(&last) = acks.last() {
            self.model.advance_to(last);
        } else {
            self.stats.no_ack_cycles += 1;
        }
        self.stats.cycles += 1;
        if check {
            self.check().map_err(ctx)?;
        }
        Ok(())
    }

    /// Opens the database in this process and checks it against the model: the acknowledged
    /// batches, or those and the in-flight one in full; every block verifies. First, the last
    /// durable checkpoint alone must be a cut ([`CrashLoop::check_cut`]).
    pub fn check(&mut self) -> Result<(), String> {
        self.check_cut()?;
        let eng = DiskEngine::open(self.opts.engine_config(&self.db))
            .map_err(|e| format!("reopening after the crash: {e}"))?;
        let n = eng.verify().map_err(|e| format!("verify: {e}"))?;
        // One file per table: a compaction's copy that was never swapped in, or an old file
        // whose removal the crash cut off, is gone after open.
        let files: Vec<String> = std::fs::read_dir(&self.db)
            .map_err(|e| format!("listing {}: {e}", self.db.display()))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".fdb"))
            .collect();
        if files.len() != eng.tables().len() {
            return Err(format!(
                "{} table files for {} tables after open: {files:?}",
                files.len(),
                eng.tables().len()
            ));
        }
        let got = read_state(&eng).map_err(|e| format!("reading back: {e}"))?;
        match check_state(&got, &self.model)? {
            Found::Acked => {}
            Found::AckedPlusInFlight => self.stats.in_flight_applied += 1,
        }
        // Point reads agree with the scan (a different path to the leaves).
        for (t, name) in TABLES.iter().enumerate() {
            let Some(id) = eng.table_id(name) else {
                continue;
            };
            for _ in 0..20 {
                let k =
                    format!("key{:06}", self.sample_rng.gen_range(0..CHURN_KEYS) * 7).into_bytes();
                let v = eng.get(id, &k).map_err(|e| format!("get: {e}"))?;
                if v.as_ref() != got[t].get(&k) {
                    return Err(format!(
                        "get({name}, {}) disagrees with the scan",
                        String::from_utf8_lossy(&k)
                    ));
                }
            }
        }
        eng.close().map_err(|e| format!("close: {e}"))?;
        self.stats.verified += 1;
        self.stats.entries_last_verified = n;
        Ok(())
    }

    /// Opens the last durable checkpoint without the journal (its files copied aside, so
    /// nothing is replayed) and checks that it is the state after batches `0..=m` for one `m`
    /// no later than the in-flight batch: both tables as of one commit number. A checkpoint
    /// that wrote each table as it found it, while the child went on writing, would hold a
    /// batch in one table and not the other.
    fn check_cut(&mut self) -> Result<(), String> {
        let side = self.side_file(".cut");
        let copy = || -> std::io::Result<()> {
            if side.exists() {
                std::fs::remove_dir_all(&side)?;
            }
            std::fs::create_dir_all(&side)?;
            for e in std::fs::read_dir(&self.db)?.flatten() {
                if e.file_type()?.is_file() {
                    std::fs::copy(e.path(), side.join(e.file_name()))?;
                }
            }
            Ok(())
        };
        copy().map_err(|e| format!("copying the checkpoint to {}: {e}", side.display()))?;
        let eng = DiskEngine::open(self.opts.engine_config(&side))
            .map_err(|e| format!("opening the checkpoint alone: {e}"))?;
        let got = read_state(&eng).map_err(|e| format!("reading the checkpoint: {e}"))?;
        eng.close().map_err(|e| format!("close: {e}"))?;
        let _ = std::fs::remove_dir_all(&side);
        // Batches write values naming themselves: the checkpoint holds at least the newest one
        // it shows.
        let newest = got
            .iter()
            .flat_map(|t| t.values())
            .filter_map(|v| value_batch(v))
            .max();
        if let Some(n) = newest.filter(|&n| self.cut_model.last.is_none_or(|l| l < n)) {
            self.cut_model.advance_to(n);
        }
        let in_flight = self.model.next();
        // Each step applies one more batch: bounded by the batches acknowledged since.
        loop {
            if self.cut_model.state == got {
                self.stats.cuts_verified += 1;
                self.stats.cut_batches_behind += in_flight.saturating_sub(self.cut_model.next());
                return Ok(());
            }
            if self.cut_model.next() > in_flight {
                return Err(format!(
                    "the last checkpoint, opened alone, is not the state after any prefix of \
                     the batches (it shows batch {newest:?}; the in-flight batch is \
                     {in_flight}): its tables are not one cut"
                ));
            }
            let next = self.cut_model.next();
            self.cut_model.advance_to(next);
        }
    }
}
