//! YCSB 0.17.0's `CoreWorkload` and `Client` as a driver: configuration (workloads A–F and
//! the seeds' variants), the per-thread operation generator, the load and run phases, and the
//! operations as YCSB's MongoDB binding (`MongoDbClient`) sends them:
//!
//! | YCSB op | command |
//! |---|---|
//! | insert | `insert` of `{_id: key, field0: BinData(0), …}` (insertOne) |
//! | read | `find {_id: key}` limit 1, singleBatch; a projection only if `readallfields=false` |
//! | update | `update {_id: key} {$set: {fieldN: BinData}}` (one field, or all with `writeallfields`) |
//! | scan | `find {_id: {$gte: startkey}}` sort `{_id: 1}` limit len |
//! | read-modify-write | the read, then the update, on the same key |

use crate::measure::{run_threads, Measurements, PhaseResult, Progress, RunLimits, Status, Step};
use crate::store::{Query, Store, Update};
use crate::ycsb::generator::{
    build_key_name, AcknowledgedCounterGenerator, ClassZipfianGenerator, CounterGenerator,
    DiscreteGenerator, HotspotIntegerGenerator, KeyCounter, KeyOrder, NumberGenerator,
    ScrambledZipfianGenerator, SkewedLatestGenerator, UniformLongGenerator, ZipfianGenerator,
};
use crate::Rng;
use anyhow::{bail, Result};
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The workloads: YCSB's A–F exactly as its `workloads/workload[a-f]` files define them, and
/// the seeds' `update-only` (Y-Update-Only: 100 % updates, zipfian) and `update-heavy`
/// (Y-Update-Heavy, = A).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
    UpdateOnly,
    UpdateHeavy,
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "a" | "workloada" => Workload::A,
            "b" | "workloadb" => Workload::B,
            "c" | "workloadc" => Workload::C,
            "d" | "workloadd" => Workload::D,
            "e" | "workloade" => Workload::E,
            "f" | "workloadf" => Workload::F,
            "update-only" | "updateonly" | "y-update-only" => Workload::UpdateOnly,
            "update-heavy" | "updateheavy" | "y-update-heavy" => Workload::UpdateHeavy,
            _ => {
                return Err(format!(
                    "unknown workload '{s}' (a, b, c, d, e, f, update-only, update-heavy)"
                ))
            }
        })
    }
}

/// `requestdistribution`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestDistribution {
    Uniform,
    /// Scrambled zipfian, θ = 0.99.
    Zipfian,
    /// Skewed latest over the acknowledged insert counter.
    Latest,
    /// Hotspot (`hotspotdatafraction`, `hotspotopnfraction`).
    Hotspot,
    /// Not in YCSB: the scrambled zipfian over a fixed number of classes
    /// (`zipfian_classes`), each spread uniformly over its share of the keys, so the skew is
    /// the same at every record count ([`ClassZipfianGenerator`]).
    #[serde(rename = "zipfian-classes")]
    ZipfianClasses,
}

impl std::str::FromStr for RequestDistribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "uniform" => Self::Uniform,
            "zipfian" => Self::Zipfian,
            "latest" => Self::Latest,
            "hotspot" => Self::Hotspot,
            "zipfian-classes" => Self::ZipfianClasses,
            _ => {
                return Err(format!(
                "unknown distribution '{s}' (uniform, zipfian, latest, hotspot, zipfian-classes)"
            ))
            }
        })
    }
}

/// `scanlengthdistribution`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScanLengthDistribution {
    Uniform,
    Zipfian,
}

/// Every CoreWorkload and Client property the driver uses, with YCSB's names in the docs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct YcsbConfig {
    /// Which workload the proportions came from (for reports).
    pub workload: Option<Workload>,
    /// The database (`mongodb.url`'s path; YCSB's default "ycsb").
    pub database: String,
    /// `table` (the collection), "usertable".
    pub table: String,
    /// `recordcount`.
    pub record_count: u64,
    /// `operationcount` (None: run for `max_execution_time_s`).
    pub operation_count: Option<u64>,
    /// `maxexecutiontime` in seconds.
    pub max_execution_time_s: Option<f64>,
    /// `fieldcount` (10), `fieldlength` (100, constant), `fieldnameprefix` ("field").
    pub field_count: usize,
    pub field_length: usize,
    pub field_name_prefix: String,
    /// `readallfields` (true: no projection), `writeallfields` (false: one field per update).
    pub read_all_fields: bool,
    pub write_all_fields: bool,
    pub read_proportion: f64,
    pub update_proportion: f64,
    pub insert_proportion: f64,
    pub scan_proportion: f64,
    pub read_modify_write_proportion: f64,
    pub request_distribution: RequestDistribution,
    /// The class count of `zipfian-classes` (not in YCSB): at most the record count.
    #[serde(default = "default_zipfian_classes")]
    pub zipfian_classes: u64,
    pub min_scan_length: u64,
    pub max_scan_length: u64,
    pub scan_length_distribution: ScanLengthDistribution,
    /// `insertorder`: hashed (true, default) or ordered.
    pub insert_hashed: bool,
    /// `zeropadding` (1).
    pub zero_padding: usize,
    pub hotspot_data_fraction: f64,
    pub hotspot_opn_fraction: f64,
    /// `insertstart` (0), `insertcount` (None: recordcount − insertstart).
    pub insert_start: u64,
    pub insert_count: Option<u64>,
    /// `threadcount`.
    pub threads: usize,
    /// `target`: total ops/s, None = unthrottled.
    pub target_ops_sec: Option<f64>,
    /// Seed of the client threads' RNGs (thread i uses `seed + i`).
    pub seed: u64,
    /// Sampling interval of the throughput series, seconds.
    pub status_interval_s: f64,
}

/// `zipfian_classes`' default: quick scale's record count, so that at quick scale
/// `zipfian-classes` is YCSB's own zipfian, and above it has quick's skew.
pub const DEFAULT_ZIPFIAN_CLASSES: u64 = 40_000;

fn default_zipfian_classes() -> u64 {
    DEFAULT_ZIPFIAN_CLASSES
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            workload: None,
            database: "ycsb".into(),
            table: "usertable".into(),
            record_count: 1000,
            operation_count: Some(1000),
            max_execution_time_s: None,
            field_count: 10,
            field_length: 100,
            field_name_prefix: "field".into(),
            read_all_fields: true,
            write_all_fields: false,
            read_proportion: 0.95,
            update_proportion: 0.05,
            insert_proportion: 0.0,
            scan_proportion: 0.0,
            read_modify_write_proportion: 0.0,
            request_distribution: RequestDistribution::Uniform,
            zipfian_classes: DEFAULT_ZIPFIAN_CLASSES,
            min_scan_length: 1,
            max_scan_length: 1000,
            scan_length_distribution: ScanLengthDistribution::Uniform,
            insert_hashed: true,
            zero_padding: 1,
            hotspot_data_fraction: 0.2,
            hotspot_opn_fraction: 0.8,
            insert_start: 0,
            insert_count: None,
            threads: 1,
            target_ops_sec: None,
            seed: 1,
            status_interval_s: 1.0,
        }
    }
}

impl YcsbConfig {
    /// A workload as YCSB's file defines it, with the given record and operation counts.
    pub fn workload(w: Workload, record_count: u64, operation_count: u64) -> YcsbConfig {
        let mut c = YcsbConfig {
            workload: Some(w),
            record_count,
            operation_count: Some(operation_count),
            request_distribution: RequestDistribution::Zipfian,
            read_proportion: 0.0,
            update_proportion: 0.0,
            ..YcsbConfig::default()
        };
        match w {
            Workload::A | Workload::UpdateHeavy => {
                c.read_proportion = 0.5;
                c.update_proportion = 0.5;
            }
            Workload::B => {
                c.read_proportion = 0.95;
                c.update_proportion = 0.05;
            }
            Workload::C => c.read_proportion = 1.0,
            Workload::D => {
                c.read_proportion = 0.95;
                c.insert_proportion = 0.05;
                c.request_distribution = RequestDistribution::Latest;
            }
            Workload::E => {
                c.scan_proportion = 0.95;
                c.insert_proportion = 0.05;
                c.max_scan_length = 100;
            }
            Workload::F => {
                c.read_proportion = 0.5;
                c.read_modify_write_proportion = 0.5;
            }
            Workload::UpdateOnly => c.update_proportion = 1.0,
        }
        c
    }

    pub fn key_order(&self) -> KeyOrder {
        if self.insert_hashed {
            KeyOrder::Hashed
        } else {
            KeyOrder::Ordered
        }
    }

    /// `insertcount`, defaulted.
    pub fn insert_count(&self) -> u64 {
        self.insert_count
            .unwrap_or(self.record_count.saturating_sub(self.insert_start))
    }

    /// The key of key number `keynum` (`buildKeyName`).
    pub fn key(&self, keynum: i64) -> String {
        build_key_name(keynum, self.key_order(), self.zero_padding)
    }

    pub fn field_name(&self, i: usize) -> String {
        format!("{}{}", self.field_name_prefix, i)
    }

    fn validate(&self) -> Result<()> {
        if self.record_count == 0 {
            bail!("recordcount must be > 0");
        }
        if self.field_count == 0 {
            bail!("fieldcount must be > 0");
        }
        let sum = self.read_proportion
            + self.update_proportion
            + self.insert_proportion
            + self.scan_proportion
            + self.read_modify_write_proportion;
        if sum <= 0.0 {
            bail!("all operation proportions are 0");
        }
        if self.min_scan_length == 0 || self.max_scan_length < self.min_scan_length {
            bail!("bad scan lengths");
        }
        if self.request_distribution == RequestDistribution::ZipfianClasses
            && !(1..=self.insert_count()).contains(&self.zipfian_classes)
        {
            bail!(
                "zipfian-classes needs between 1 and insertcount ({}) classes, not {}",
                self.insert_count(),
                self.zipfian_classes
            );
        }
        Ok(())
    }
}

/// YCSB's operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl OpKind {
    /// The metric name YCSB prints.
    pub fn metric(self) -> &'static str {
        match self {
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Insert => "INSERT",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }
}

/// `RandomByteIterator`: printable bytes, six from each random 32-bit int.
pub fn random_bytes(len: usize, rng: &mut dyn RngCore) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let b = rng.next_u32();
        for x in [
            b & 31,
            (b >> 5) & 63,
            (b >> 10) & 95,
            (b >> 15) & 31,
            (b >> 20) & 63,
            (b >> 25) & 95,
        ] {
            if out.len() < len {
                out.push(b' ' + x as u8);
            }
        }
    }
    out
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

/// State shared by all client threads of a run: the insert counters.
pub struct Shared {
    /// Load: `keysequence`.
    pub key_sequence: CounterGenerator,
    /// Run: `transactioninsertkeysequence`.
    pub insert_sequence: Arc<AcknowledgedCounterGenerator>,
}

impl Shared {
    pub fn new(cfg: &YcsbConfig) -> Shared {
        Shared {
            key_sequence: CounterGenerator::new(cfg.insert_start as i64),
            insert_sequence: Arc::new(AcknowledgedCounterGenerator::new(cfg.record_count as i64)),
        }
    }
}

enum KeyChooser {
    Uniform(UniformLongGenerator),
    Zipfian(ScrambledZipfianGenerator),
    Latest(SkewedLatestGenerator),
    Hotspot(HotspotIntegerGenerator),
    ZipfianClasses(ClassZipfianGenerator),
}

/// One concrete operation, as the driver will issue it (for tests and traces).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Read { key: String },
    Update { key: String, fields: Document },
    Insert { keynum: i64, doc: Document },
    Scan { start: String, len: i64 },
    ReadModifyWrite { key: String, fields: Document },
}

/// One client thread's `CoreWorkload` state: its generators and RNG.
pub struct ThreadWorkload {
    cfg: Arc<YcsbConfig>,
    shared: Arc<Shared>,
    pub rng: Rng,
    ops: DiscreteGenerator<OpKind>,
    keys: KeyChooser,
    scan_len: Result<UniformLongGenerator, ZipfianGenerator>,
    field_names: Vec<String>,
}

impl ThreadWorkload {
    pub fn new(cfg: Arc<YcsbConfig>, shared: Arc<Shared>, thread: usize) -> ThreadWorkload {
        let mut ops = DiscreteGenerator::new();
        for (w, k) in [
            (cfg.read_proportion, OpKind::Read),
            (cfg.update_proportion, OpKind::Update),
            (cfg.insert_proportion, OpKind::Insert),
            (cfg.scan_proportion, OpKind::Scan),
            (cfg.read_modify_write_proportion, OpKind::ReadModifyWrite),
        ] {
            if w > 0.0 {
                ops.add_value(w, k);
            }
        }
        let lb = cfg.insert_start as i64;
        let count = cfg.insert_count() as i64;
        let keys = match cfg.request_distribution {
            RequestDistribution::Uniform => {
                KeyChooser::Uniform(UniformLongGenerator::new(lb, lb + count - 1))
            }
            RequestDistribution::Zipfian => {
                let ops = cfg.operation_count.unwrap_or(0) as f64;
                let expected_new_keys = (ops * cfg.insert_proportion * 2.0) as i64;
                KeyChooser::Zipfian(ScrambledZipfianGenerator::new(
                    lb,
                    lb + count + expected_new_keys,
                ))
            }
            RequestDistribution::Latest => {
                KeyChooser::Latest(SkewedLatestGenerator::new(shared.insert_sequence.clone()))
            }
            RequestDistribution::Hotspot => KeyChooser::Hotspot(HotspotIntegerGenerator::new(
                lb,
                lb + count - 1,
                cfg.hotspot_data_fraction,
                cfg.hotspot_opn_fraction,
            )),
            // Over the loaded keys only: the classes are fixed, and a run's inserts are
            // not in any class (a workload with inserts draws them from the counter).
            RequestDistribution::ZipfianClasses => KeyChooser::ZipfianClasses(
                ClassZipfianGenerator::new(lb, count, cfg.zipfian_classes as i64),
            ),
        };
        let (mn, mx) = (cfg.min_scan_length as i64, cfg.max_scan_length as i64);
        let scan_len = match cfg.scan_length_distribution {
            ScanLengthDistribution::Uniform => Ok(UniformLongGenerator::new(mn, mx)),
            ScanLengthDistribution::Zipfian => Err(ZipfianGenerator::new(mn, mx)),
        };
        let field_names = (0..cfg.field_count).map(|i| cfg.field_name(i)).collect();
        ThreadWorkload {
            rng: crate::rng(cfg.seed.wrapping_add(thread as u64)),
            cfg,
            shared,
            ops,
            keys,
            scan_len,
            field_names,
        }
    }

    /// `nextKeynum`: a draw from the request distribution, redrawn while above the
    /// acknowledged insert limit.
    pub fn next_keynum(&mut self) -> i64 {
        let limit = self.shared.insert_sequence.last_value();
        loop {
            let k = match &mut self.keys {
                KeyChooser::Uniform(g) => g.next_value(&mut self.rng),
                KeyChooser::Zipfian(g) => g.next_value(&mut self.rng),
                KeyChooser::Latest(g) => g.next_value(&mut self.rng),
                KeyChooser::Hotspot(g) => g.next_value(&mut self.rng),
                KeyChooser::ZipfianClasses(g) => g.next_value(&mut self.rng),
            };
            if k <= limit {
                return k;
            }
        }
    }

    /// All fields of a new record (`buildValues`).
    pub fn record(&mut self, key: &str) -> Document {
        let mut d = Document::new();
        d.insert("_id", key);
        for f in &self.field_names {
            d.insert(
                f.clone(),
                binary(random_bytes(self.cfg.field_length, &mut self.rng)),
            );
        }
        d
    }

    /// The fields an update writes: one random field, or all (`writeallfields`).
    fn update_fields(&mut self) -> Document {
        let mut d = Document::new();
        if self.cfg.write_all_fields {
            for f in &self.field_names {
                d.insert(
                    f.clone(),
                    binary(random_bytes(self.cfg.field_length, &mut self.rng)),
                );
            }
        } else {
            let i = (self.rng.next_u64() as i64).wrapping_abs() as usize % self.field_names.len();
            let name = self.field_names[i].clone();
            d.insert(
                name,
                binary(random_bytes(self.cfg.field_length, &mut self.rng)),
            );
        }
        d
    }

    /// The next operation of the transaction phase (the insert's key number is taken from the
    /// shared counter; the caller must acknowledge it once the insert is done).
    pub fn next_op(&mut self) -> Op {
        match self.ops.next_value(&mut self.rng) {
            OpKind::Read => {
                let k = self.next_keynum();
                Op::Read {
                    key: self.cfg.key(k),
                }
            }
            OpKind::Update => {
                let k = self.next_keynum();
                let fields = self.update_fields();
                Op::Update {
                    key: self.cfg.key(k),
                    fields,
                }
            }
            OpKind::Insert => {
                let keynum = self.shared.insert_sequence.next_value();
                let key = self.cfg.key(keynum);
                let doc = self.record(&key);
                Op::Insert { keynum, doc }
            }
            OpKind::Scan => {
                let k = self.next_keynum();
                let len = match &mut self.scan_len {
                    Ok(g) => g.next_value(&mut self.rng),
                    Err(g) => g.next_value(&mut self.rng),
                };
                Op::Scan {
                    start: self.cfg.key(k),
                    len,
                }
            }
            OpKind::ReadModifyWrite => {
                let k = self.next_keynum();
                let fields = self.update_fields();
                Op::ReadModifyWrite {
                    key: self.cfg.key(k),
                    fields,
                }
            }
        }
    }

    fn read_query(&self, key: &str) -> Document {
        doc! {"_id": key}
    }

    fn do_read(&self, store: &dyn Store, key: &str, m: &mut Measurements) {
        let coll = &self.cfg.table;
        m.time("READ", || {
            let r = if self.cfg.read_all_fields {
                store.find_one(coll, self.read_query(key))
            } else {
                let mut p = Document::new();
                for f in &self.field_names {
                    p.insert(f.clone(), 1);
                }
                store
                    .find(
                        coll,
                        &Query {
                            filter: self.read_query(key),
                            projection: Some(p),
                            limit: 1,
                            ..Default::default()
                        },
                    )
                    .map(|v| v.into_iter().next())
            };
            match r {
                Ok(Some(_)) => (Status::Ok, ()),
                Ok(None) => (Status::NotFound, ()),
                Err(_) => (Status::Error, ()),
            }
        })
    }

    fn do_update(&self, store: &dyn Store, key: &str, fields: Document, m: &mut Measurements) {
        let coll = &self.cfg.table;
        m.time("UPDATE", || {
            match store.update_one(
                coll,
                Update {
                    q: doc! {"_id": key},
                    u: doc! {"$set": fields},
                    upsert: false,
                },
            ) {
                Ok(r) if r.matched == 0 => (Status::NotFound, ()),
                Ok(_) => (Status::Ok, ()),
                Err(_) => (Status::Error, ()),
            }
        })
    }

    /// Issues `op` against `store`, timing it as YCSB's DBWrapper does.
    pub fn execute(&mut self, store: &dyn Store, op: Op, m: &mut Measurements) {
        let coll = self.cfg.table.clone();
        match op {
            Op::Read { key } => self.do_read(store, &key, m),
            Op::Update { key, fields } => self.do_update(store, &key, fields, m),
            Op::Insert { keynum, doc } => {
                m.time("INSERT", || match store.insert_one(&coll, doc) {
                    Ok(()) => (Status::Ok, ()),
                    Err(_) => (Status::Error, ()),
                });
                // Acknowledged in a `finally` in YCSB: successful or not.
                if let Err(e) = self.shared.insert_sequence.acknowledge(keynum) {
                    m.bump(&format!("ack-error: {e}"), 1);
                }
            }
            Op::Scan { start, len } => {
                m.time("SCAN", || {
                    match store.find(
                        &coll,
                        &Query {
                            filter: doc! {"_id": {"$gte": start}},
                            sort: Some(doc! {"_id": 1}),
                            limit: len,
                            ..Default::default()
                        },
                    ) {
                        Ok(v) if v.is_empty() => (Status::Error, ()),
                        Ok(_) => (Status::Ok, ()),
                        Err(_) => (Status::Error, ()),
                    }
                });
            }
            Op::ReadModifyWrite { key, fields } => {
                let t0 = std::time::Instant::now();
                self.do_read(store, &key, m);
                self.do_update(store, &key, fields, m);
                m.record(
                    "READ-MODIFY-WRITE",
                    Status::Ok,
                    t0.elapsed().as_micros() as u64,
                );
            }
        }
    }
}

/// The result of `flashdoc bench ycsb`: every parameter and each phase that ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct YcsbReport {
    pub benchmark: String,
    pub target: String,
    pub config: YcsbConfig,
    pub load: Option<PhaseResult>,
    pub run: Option<PhaseResult>,
}

fn limits(cfg: &YcsbConfig, ops: Option<u64>) -> RunLimits {
    RunLimits {
        ops,
        duration: cfg.max_execution_time_s.map(Duration::from_secs_f64),
        threads: cfg.threads,
        target_ops_sec: cfg.target_ops_sec,
        interval: Duration::from_secs_f64(cfg.status_interval_s.max(0.01)),
    }
}

/// Prepares the collection for a load: drops it (a fresh load, as a new YCSB table).
pub fn prepare_load(cfg: &YcsbConfig, store: &dyn Store) -> Result<()> {
    store.drop_collection(&cfg.table)
}

/// The load phase (`-load`): `insertcount` records, key numbers from the shared counter
/// starting at `insertstart`, spread over the threads.
pub fn run_load(cfg: &YcsbConfig, store: &dyn Store, progress: Progress) -> Result<PhaseResult> {
    cfg.validate()?;
    let cfg = Arc::new(cfg.clone());
    let shared = Arc::new(Shared::new(&cfg));
    let lim = RunLimits {
        duration: None,
        target_ops_sec: None,
        ..limits(&cfg, Some(cfg.insert_count()))
    };
    let (_, r) = run_threads("load", &lim, progress, |i| {
        let mut w = ThreadWorkload::new(cfg.clone(), shared.clone(), i);
        move |m: &mut Measurements| {
            let keynum = w.shared.key_sequence.next_value();
            let key = w.cfg.key(keynum);
            let doc = w.record(&key);
            let coll = &w.cfg.table;
            m.time("INSERT", || match store.insert_one(coll, doc) {
                Ok(()) => (Status::Ok, ()),
                Err(_) => (Status::Error, ()),
            });
            Step::Done
        }
    });
    Ok(r)
}

/// The transaction phase (`-t`): `operationcount` operations (or `maxexecutiontime`).
pub fn run_ops(cfg: &YcsbConfig, store: &dyn Store, progress: Progress) -> Result<PhaseResult> {
    cfg.validate()?;
    if cfg.operation_count.is_none() && cfg.max_execution_time_s.is_none() {
        bail!("set an operation count or a run time");
    }
    let cfg = Arc::new(cfg.clone());
    let shared = Arc::new(Shared::new(&cfg));
    let (_, r) = run_threads("run", &limits(&cfg, cfg.operation_count), progress, |i| {
        let mut w = ThreadWorkload::new(cfg.clone(), shared.clone(), i);
        move |m: &mut Measurements| {
            let op = w.next_op();
            w.execute(store, op, m);
            Step::Done
        }
    });
    Ok(r)
}
