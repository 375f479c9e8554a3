//! LinkBench (facebookarchive/linkbench) as LinkBenchX (Percona-Lab/linkbenchX,
//! `LinkStoreMongoDBv2`) runs it on MongoDB: the `node`, `link` and `count` collections with
//! LinkBench's fields and LinkBenchX's indexes, the ten operations with LinkBench's default
//! mix (or the seeds' `mixed` and `update-only` mixes), id distributions and log-normal
//! payload sizes, and **correct** count maintenance (LinkBenchX's command sequence, without its
//! count-wiping replacement and lost `$inc`). See docs/workloads.md for every choice.

pub mod dist;

use crate::measure::{run_threads, Measurements, PhaseResult, Progress, RunLimits, Status, Step};
use crate::store::{IndexSpec, Query, Store, Update};
use anyhow::{bail, Result};
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use dist::{geometric, lognormal, nlinks_at, LbZipf, MotifGen, Shuffler};
use rand::{Rng as _, RngCore};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `LinkStore.DEFAULT_LINK_TYPE`; link types are this + i.
pub const DEFAULT_LINK_TYPE: i64 = 123_456_789;
/// `NodeStore.DEFAULT_NODE_TYPE`.
pub const DEFAULT_NODE_TYPE: i32 = 2048;
/// getlinklist's range limit (`DEFAULT_LIMIT`).
pub const DEFAULT_LIMIT: i64 = 10_000;
/// `MAX_LINK_DATA`, `MAX_NODE_DATA`.
pub const MAX_LINK_DATA: u64 = 255;
pub const MAX_NODE_DATA: u64 = 1 << 20;
/// Shuffle seeds of `RealDistribution`.
pub const SEED_NLINKS: u64 = 20_343_988_438_726_021;
pub const SEED_UNCORR: u64 = 53_238_253_823_453;
pub const SEED_NODE: u64 = 4_766_565_305_853_767_165;

pub const NODE: &str = "node";
pub const LINK: &str = "link";
pub const COUNT: &str = "count";

/// LinkBench's ten operations, in the order its request generator walks the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LinkOp {
    AddLink,
    DeleteLink,
    UpdateLink,
    CountLink,
    MultigetLink,
    GetLinkList,
    AddNode,
    UpdateNode,
    DeleteNode,
    GetNode,
}

impl LinkOp {
    pub const ALL: [LinkOp; 10] = [
        LinkOp::AddLink,
        LinkOp::DeleteLink,
        LinkOp::UpdateLink,
        LinkOp::CountLink,
        LinkOp::MultigetLink,
        LinkOp::GetLinkList,
        LinkOp::AddNode,
        LinkOp::UpdateNode,
        LinkOp::DeleteNode,
        LinkOp::GetNode,
    ];

    /// LinkBench's `LinkBenchOp` name (the metric name).
    pub fn metric(self) -> &'static str {
        match self {
            LinkOp::AddLink => "ADD_LINK",
            LinkOp::DeleteLink => "DELETE_LINK",
            LinkOp::UpdateLink => "UPDATE_LINK",
            LinkOp::CountLink => "COUNT_LINK",
            LinkOp::MultigetLink => "MULTIGET_LINK",
            LinkOp::GetLinkList => "GET_LINKS_LIST",
            LinkOp::AddNode => "ADD_NODE",
            LinkOp::UpdateNode => "UPDATE_NODE",
            LinkOp::DeleteNode => "DELETE_NODE",
            LinkOp::GetNode => "GET_NODE",
        }
    }

    /// The C:R:U:D class (0..4) the seeds count the operation in.
    pub fn class(self) -> usize {
        match self {
            LinkOp::AddLink | LinkOp::AddNode => 0,
            LinkOp::CountLink | LinkOp::MultigetLink | LinkOp::GetLinkList | LinkOp::GetNode => 1,
            LinkOp::UpdateLink | LinkOp::UpdateNode => 2,
            LinkOp::DeleteLink | LinkOp::DeleteNode => 3,
        }
    }
}

/// The operation mixes: percentages in [`LinkOp::ALL`] order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// FBWorkload.properties' default mix, C:R:U:D = 11.56 : 69.06 : 15.38 : 4.00 (the seeds'
    /// LB-Original 12:69:15:4).
    Original,
    /// LB-Mixed 12:0:84:4 exactly, keeping the stock link:node ratio inside each class.
    Mixed,
    /// LB-Update-Only 0:0:100:0: updatelink and updatenode in their stock ratio.
    UpdateOnly,
    /// Any other mix (percentages summing to 100).
    Custom([f64; 10]),
}

impl Mix {
    pub fn percentages(&self) -> [f64; 10] {
        match self {
            Mix::Original => [
                8.9886601, 2.9907664, 8.0122125, 4.8863567, 0.5261142, 50.7119145, 2.5732789,
                7.366437, 1.0115914, 12.9326683,
            ],
            Mix::Mixed => [
                9.3292242, 2.9890045, 43.763651, 0.0, 0.0, 0.0, 2.6707758, 40.236349, 1.0109955,
                0.0,
            ],
            Mix::UpdateOnly => [
                0.0, 0.0, 52.0995846, 0.0, 0.0, 0.0, 0.0, 47.9004154, 0.0, 0.0,
            ],
            Mix::Custom(p) => *p,
        }
    }

    /// The nominal C:R:U:D percentages.
    pub fn crud(&self) -> [f64; 4] {
        let mut c = [0.0; 4];
        for (op, p) in LinkOp::ALL.iter().zip(self.percentages()) {
            c[op.class()] += p;
        }
        c
    }
}

impl std::str::FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "original" | "lb-original" => Ok(Mix::Original),
            "mixed" | "lb-mixed" => Ok(Mix::Mixed),
            "update-only" | "lb-update-only" => Ok(Mix::UpdateOnly),
            _ => Err(format!("unknown mix '{s}' (original, mixed, update-only)")),
        }
    }
}

/// Every LinkBench parameter the driver uses (FBWorkload.properties' names in the docs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LinkBenchConfig {
    /// LinkBenchX's `dbid` ("graph-linkbench"; we use "linkbench").
    pub database: String,
    /// `startid1` (1, inclusive) and `maxid1` (exclusive).
    pub startid1: i64,
    pub maxid1: i64,
    /// `link_type_count` (2).
    pub link_type_count: i64,
    /// Medians of the log-normal payload sizes (`link_datasize` 8, `node_datasize` 128), σ 1.
    pub link_datasize: f64,
    pub node_datasize: f64,
    pub datasize_sigma: f64,
    pub mix: Mix,
    /// `requests` in total (None: run for `maxtime_s`).
    pub requests: Option<u64>,
    /// `maxtime` in seconds.
    pub maxtime_s: Option<f64>,
    /// `requesters` (client threads) and `loaders`.
    pub requesters: usize,
    pub loaders: usize,
    /// Total target requests/s (None: unthrottled, LinkBenchX's `requestrate = 0`).
    pub target_ops_sec: Option<f64>,
    /// Zipf shapes and blends of the id1 distributions.
    pub read_shape: f64,
    pub read_uncorr_shape: f64,
    /// Percent of link reads drawn from the uncorrelated distribution.
    pub read_uncorr_blend: f64,
    pub write_shape: f64,
    /// LinkBench's bug: link writes read the `read_uncorr_*` settings (blend 99.5, shape 0.8)
    /// instead of `write_uncorr_*` (95, 0.741). True reproduces it (default).
    pub write_uses_read_uncorr: bool,
    pub write_uncorr_shape: f64,
    pub write_uncorr_blend: f64,
    pub node_read_shape: f64,
    pub node_update_shape: f64,
    /// Geometric parameter and bounds of the getlink (multiget) id2 count.
    pub multiget_p: f64,
    pub multiget_max: u64,
    /// Caps the per-id1 out-degree (None: LinkBench's distribution up to 961 963).
    pub nlinks_cap: Option<u64>,
    /// Not in LinkBench: every id distribution's Zipf over this many classes, each spread
    /// over its share of the ids ([`dist::LbZipf::with_classes`]), so the skew does not grow
    /// with `maxid1`. None: LinkBench's own Zipfs over all ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf_classes: Option<i64>,
    /// Bulk batch size of the load (`mongo_bulk_insert_batch`, 1024).
    pub bulk_batch: usize,
    /// Seed of the client RNGs (the load's chunks and the requesters).
    pub seed: u64,
    /// A fixed clock (ms since the epoch) for reproducible data; None: the wall clock.
    pub fixed_time_ms: Option<i64>,
    /// With `fixed_time_ms` as its start: the clock advances 1 ms per load chunk and per
    /// request, so timestamps still grow as the run goes on (the link index's `time` key keeps
    /// its insertion order, as under the wall clock) without depending on the host's speed.
    /// Upserted links and counts then also carry an `_id` the driver makes (see
    /// [`Model::object_id`]) instead of the server's random ObjectId.
    #[serde(default)]
    pub logical_time: bool,
    /// Sampling interval of the throughput series, seconds.
    pub status_interval_s: f64,
}

impl Default for LinkBenchConfig {
    fn default() -> Self {
        LinkBenchConfig {
            database: "linkbench".into(),
            startid1: 1,
            maxid1: 10_001,
            link_type_count: 2,
            link_datasize: 8.0,
            node_datasize: 128.0,
            datasize_sigma: 1.0,
            mix: Mix::Original,
            requests: Some(10_000),
            maxtime_s: None,
            requesters: 1,
            loaders: 1,
            target_ops_sec: None,
            read_shape: 0.8,
            read_uncorr_shape: 0.8,
            read_uncorr_blend: 99.5,
            write_shape: 0.741,
            write_uses_read_uncorr: true,
            write_uncorr_shape: 0.741,
            write_uncorr_blend: 95.0,
            node_read_shape: 0.625,
            node_update_shape: 0.606,
            multiget_p: 0.382,
            multiget_max: 128,
            nlinks_cap: None,
            zipf_classes: None,
            bulk_batch: 1024,
            seed: 1,
            fixed_time_ms: None,
            logical_time: false,
            status_interval_s: 1.0,
        }
    }
}

/// The probability that a chosen id2 exists, per operation (`ID2Chooser`'s P_*_EXIST).
const P_ADD_EXIST: f64 = 0.05;
const P_UPDATE_EXIST: f64 = 0.9;
const P_DELETE_EXIST: f64 = 0.9;
const P_GET_EXIST: f64 = 0.5;

/// The graph model: out-degrees and id distributions, shared by the load and the requesters.
pub struct Model {
    pub cfg: LinkBenchConfig,
    n: i64,
    nlinks_shuffle: Shuffler,
    uncorr_shuffle: Shuffler,
    node_shuffle: Shuffler,
    read_corr: LbZipf,
    read_uncorr: LbZipf,
    write_corr: LbZipf,
    write_uncorr: LbZipf,
    node_read: LbZipf,
    node_update: LbZipf,
    /// Requests issued so far (the logical clock's ticks in the request phase).
    requests: AtomicI64,
    /// ObjectIds made so far (`object_id`).
    object_ids: AtomicU32,
}

impl Model {
    pub fn new(cfg: &LinkBenchConfig) -> Result<Model> {
        let n = cfg.maxid1 - cfg.startid1;
        if cfg.startid1 < 1 || n < 1 {
            bail!("need 1 <= startid1 < maxid1");
        }
        if cfg.logical_time && cfg.fixed_time_ms.is_none() {
            bail!("logical_time needs fixed_time_ms as the clock's start");
        }
        let sum: f64 = cfg.mix.percentages().iter().sum();
        if (sum - 100.0).abs() > 1e-5 {
            bail!("the mix's percentages sum to {sum}, not 100");
        }
        if let Some(c) = cfg.zipf_classes {
            if !(1..=n).contains(&c) {
                bail!("zipf_classes must be between 1 and maxid1 − startid1 ({n}), not {c}");
            }
        }
        let zipf = |shape: f64| match cfg.zipf_classes {
            Some(c) => LbZipf::with_classes(n, shape, c),
            None => LbZipf::new(n, shape),
        };
        let (wu_shape, _) = if cfg.write_uses_read_uncorr {
            (cfg.read_uncorr_shape, cfg.read_uncorr_blend)
        } else {
            (cfg.write_uncorr_shape, cfg.write_uncorr_blend)
        };
        Ok(Model {
            cfg: cfg.clone(),
            n,
            nlinks_shuffle: Shuffler::new(SEED_NLINKS, n),
            uncorr_shuffle: Shuffler::new(SEED_UNCORR, n),
            node_shuffle: Shuffler::new(SEED_NODE, n),
            read_corr: zipf(cfg.read_shape),
            read_uncorr: zipf(cfg.read_uncorr_shape),
            write_corr: zipf(cfg.write_shape),
            write_uncorr: zipf(wu_shape),
            node_read: zipf(cfg.node_read_shape),
            node_update: zipf(cfg.node_update_shape),
            requests: AtomicI64::new(0),
            object_ids: AtomicU32::new(0),
        })
    }

    /// Under `logical_time`, the `_id` of an upserted document, shaped as a server's
    /// ObjectId (seconds of `now_ms`, 5 bytes fixed per process, a 3-byte counter) so ids
    /// still grow in insertion order, but drawn from the seed instead of the wall clock and
    /// the system's random source. `phase` (0 load, 1 requests) keeps the two phases' ids
    /// apart, as two server processes' would be. `None`: the server makes the id.
    fn object_id(&self, now_ms: i64, phase: u8) -> Option<Bson> {
        if !self.cfg.logical_time {
            return None;
        }
        let n = self.object_ids.fetch_add(1, Ordering::Relaxed);
        let mut b = [0u8; 12];
        b[..4].copy_from_slice(&((now_ms / 1000) as u32).to_be_bytes());
        b[4..8].copy_from_slice(&(self.cfg.seed as u32).to_be_bytes());
        b[8] = phase;
        b[9..].copy_from_slice(&(n & 0x00ff_ffff).to_be_bytes()[1..]);
        Some(Bson::ObjectId(bson::oid::ObjectId::from_bytes(b)))
    }

    /// The clock for load chunk `chunk` (ms since the epoch).
    fn load_time_ms(&self, chunk: i64) -> i64 {
        match (self.cfg.fixed_time_ms, self.cfg.logical_time) {
            (Some(start), true) => start + chunk,
            _ => now_ms(&self.cfg),
        }
    }

    /// The clock for the next request: under `logical_time`, one tick past the load's last
    /// chunk and one more per request.
    fn request_time_ms(&self) -> i64 {
        match (self.cfg.fixed_time_ms, self.cfg.logical_time) {
            (Some(start), true) => {
                let chunks = (self.n + LOAD_CHUNK - 1) / LOAD_CHUNK;
                start + chunks + self.requests.fetch_add(1, Ordering::Relaxed)
            }
            _ => now_ms(&self.cfg),
        }
    }

    /// Total out-degree of `id1` in the initial graph: its popularity rank under the nlinks
    /// shuffle, mapped through the degree CDF (rank 0 gets the largest degree).
    pub fn nlinks(&self, id1: i64) -> u64 {
        let rank = self.nlinks_shuffle.invert(id1 - self.cfg.startid1);
        let u = 1.0 - rank as f64 / self.n as f64;
        let d = nlinks_at(u);
        self.cfg.nlinks_cap.map_or(d, |c| d.min(c))
    }

    /// Links of `id1` of type index `t` (LinkBench's split, quirk included: ⌊tot/2⌋ each, +1
    /// for type indexes below tot − ⌊tot/2⌋).
    pub fn nlinks_of_type(&self, id1: i64, t: i64) -> u64 {
        let tot = self.nlinks(id1);
        let types = self.cfg.link_type_count as u64;
        let each = tot / types;
        // LinkBench's remainder test compares the type index with tot − ⌊tot/types⌋ instead
        // of tot mod types: with 2 types, tot ≥ 3 gives both types ⌊tot/2⌋ + 1.
        let extra = tot - each;
        each + u64::from((t as u64) < extra)
    }

    fn blend(&self, p_uncorr: f64, corr: &LbZipf, uncorr: &LbZipf, rng: &mut dyn RngCore) -> i64 {
        let s = self.cfg.startid1;
        if rng.gen::<f64>() * 100.0 < p_uncorr {
            s + self.uncorr_shuffle.permute(uncorr.sample(rng))
        } else {
            s + self.nlinks_shuffle.permute(corr.sample(rng))
        }
    }

    pub fn link_read_id1(&self, rng: &mut dyn RngCore) -> i64 {
        self.blend(
            self.cfg.read_uncorr_blend,
            &self.read_corr,
            &self.read_uncorr,
            rng,
        )
    }

    pub fn link_write_id1(&self, rng: &mut dyn RngCore) -> i64 {
        let blend = if self.cfg.write_uses_read_uncorr {
            self.cfg.read_uncorr_blend
        } else {
            self.cfg.write_uncorr_blend
        };
        self.blend(blend, &self.write_corr, &self.write_uncorr, rng)
    }

    pub fn node_read_id(&self, rng: &mut dyn RngCore) -> i64 {
        self.cfg.startid1 + self.node_shuffle.permute(self.node_read.sample(rng))
    }

    pub fn node_update_id(&self, rng: &mut dyn RngCore) -> i64 {
        self.cfg.startid1 + self.node_shuffle.permute(self.node_update.sample(rng))
    }

    pub fn node_delete_id(&self, rng: &mut dyn RngCore) -> i64 {
        rng.gen_range(self.cfg.startid1..self.cfg.maxid1)
    }

    pub fn link_type(&self, rng: &mut dyn RngCore) -> (i64, i64) {
        let t = rng.gen_range(0..self.cfg.link_type_count);
        (t, DEFAULT_LINK_TYPE + t)
    }

    /// `ID2Chooser`: id1 + U[0, ⌈nlinks / pExist⌉).
    pub fn id2(&self, id1: i64, t: i64, p_exist: f64, rng: &mut dyn RngCore) -> i64 {
        let nl = self.nlinks_of_type(id1, t);
        let range = ((nl as f64 / p_exist).ceil() as i64).max(1);
        id1 + rng.gen_range(0..range)
    }
}

/// `[link_type, id1, id2]`, the unique key of a link.
fn link_key(id1: i64, ltype: i64, id2: i64) -> Document {
    doc! {"link_type": ltype, "id1": id1, "id2": id2}
}

fn bin(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

/// LinkBenchX's indexes: `link` unique {link_type, id1, id2} and the covering
/// {id1, link_type, visibility, time, id2, version, data}; `count` unique {id, link_type};
/// `node` only `_id`.
pub fn indexes() -> Vec<(&'static str, Vec<IndexSpec>)> {
    vec![
        (
            LINK,
            vec![
                IndexSpec {
                    keys: doc! {"link_type": 1, "id1": 1, "id2": 1},
                    name: "link_type_1_id1_1_id2_1".into(),
                    unique: true,
                },
                IndexSpec {
                    keys: doc! {"id1": 1, "link_type": 1, "visibility": 1, "time": 1, "id2": 1, "version": 1, "data": 1},
                    name: "id1_1_link_type_1_visibility_1_time_1_id2_1_version_1_data_1".into(),
                    unique: false,
                },
            ],
        ),
        (
            COUNT,
            vec![IndexSpec {
                keys: doc! {"id": 1, "link_type": 1},
                name: "id_1_link_type_1".into(),
                unique: true,
            }],
        ),
    ]
}

fn now_ms(cfg: &LinkBenchConfig) -> i64 {
    cfg.fixed_time_ms.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    })
}

/// The result of `flashdoc bench linkbench`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkBenchReport {
    pub benchmark: String,
    pub target: String,
    pub config: LinkBenchConfig,
    pub nominal_crud_percent: [f64; 4],
    pub load: Option<PhaseResult>,
    pub run: Option<PhaseResult>,
}

/// Drops the three collections and creates LinkBenchX's indexes.
pub fn prepare_load(store: &dyn Store) -> Result<()> {
    for c in [NODE, LINK, COUNT] {
        store.drop_collection(c)?;
    }
    for (c, specs) in indexes() {
        store.create_indexes(c, &specs)?;
    }
    Ok(())
}

const LOAD_CHUNK: i64 = 2048;

/// The load phase: nodes startid1..maxid1 and each id1's links and counts, in chunks of 2048
/// id1s handed to `loaders` threads. Each chunk draws from its own RNG (seed, chunk), so the
/// data does not depend on the thread count. Nodes go in unordered bulk inserts, links in
/// unordered bulk upserts of addlink's shape, counts in bulk replacement upserts, as
/// LinkBenchX loads them. The result counts documents written (`operations`, throughput);
/// each chunk's time is the `LOAD_CHUNK` metric.
pub fn run_load(
    cfg: &LinkBenchConfig,
    store: &dyn Store,
    progress: Progress,
) -> Result<PhaseResult> {
    let model = Arc::new(Model::new(cfg)?);
    let chunks = (model.n + LOAD_CHUNK - 1) / LOAD_CHUNK;
    let next_chunk = AtomicI64::new(0);
    let limits = RunLimits {
        ops: Some(chunks as u64),
        duration: None,
        threads: cfg.loaders.max(1),
        target_ops_sec: None,
        interval: Duration::from_secs_f64(cfg.status_interval_s.max(0.01)),
    };
    let (_, mut r) = run_threads("load", &limits, progress, |_| {
        let model = model.clone();
        let next_chunk = &next_chunk;
        move |m: &mut Measurements| {
            let c = next_chunk.fetch_add(1, Ordering::SeqCst);
            if c >= chunks {
                return Step::Finished;
            }
            let t0 = std::time::Instant::now();
            let st = match load_chunk(&model, store, c, m) {
                Ok(()) => Status::Ok,
                Err(e) => {
                    m.bump(&format!("load error: {e}"), 1);
                    Status::Error
                }
            };
            m.record("LOAD_CHUNK", st, t0.elapsed().as_micros() as u64);
            Step::Done
        }
    });
    // Report the load in documents written (nodes + links + counts), as LinkBench reports
    // links/s, rather than in chunks.
    let docs: u64 = ["nodes", "links", "counts"]
        .iter()
        .map(|k| r.counters.get(*k).copied().unwrap_or(0))
        .sum();
    r.operations = docs;
    r.throughput_ops_sec = if r.runtime_ms > 0.0 {
        docs as f64 * 1000.0 / r.runtime_ms
    } else {
        0.0
    };
    r.phase = "load".into();
    Ok(r)
}

fn load_chunk(model: &Model, store: &dyn Store, chunk: i64, m: &mut Measurements) -> Result<()> {
    let cfg = &model.cfg;
    let mut rng = crate::rng(cfg.seed ^ (chunk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let node_gen = MotifGen::node(&mut rng);
    let link_gen = MotifGen::link(&mut rng);
    let lo = cfg.startid1 + chunk * LOAD_CHUNK;
    let hi = (lo + LOAD_CHUNK).min(cfg.maxid1);
    let now = model.load_time_ms(chunk);
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    let mut counts = Vec::new();
    let batch = cfg.bulk_batch.max(1);
    for id1 in lo..hi {
        let len = lognormal(
            cfg.node_datasize,
            cfg.datasize_sigma,
            MAX_NODE_DATA,
            &mut rng,
        );
        nodes.push(doc! {
            "_id": id1,
            "type": DEFAULT_NODE_TYPE,
            "version": 1i64,
            "time": (now / 1000) as i32,
            "data": bin(node_gen.fill(len as usize, &mut rng)),
        });
        if nodes.len() >= batch {
            m.bump(
                "nodes",
                store.insert_many(NODE, std::mem::take(&mut nodes))?,
            );
        }
        for t in 0..cfg.link_type_count {
            let ltype = DEFAULT_LINK_TYPE + t;
            let nl = model.nlinks_of_type(id1, t);
            for j in 0..nl as i64 {
                let id2 = id1 + j;
                let len = lognormal(
                    cfg.link_datasize,
                    cfg.datasize_sigma,
                    MAX_LINK_DATA,
                    &mut rng,
                );
                // now − 2³¹ + nextInt(): uniform over the 2³² ms before and after now − 2³¹.
                let time = now - (1i64 << 31) + i64::from(rng.next_u32() as i32);
                let mut insert = doc! {
                    "id1": id1, "id2": id2, "link_type": ltype,
                    "data": bin(link_gen.fill(len as usize, &mut rng)),
                    "time": time, "version": 0i32,
                };
                if let Some(id) = model.object_id(now, 0) {
                    insert.insert("_id", id);
                }
                links.push(Update {
                    q: link_key(id1, ltype, id2),
                    u: doc! {"$setOnInsert": insert, "$set": {"visibility": 1i32}},
                    upsert: true,
                });
                if links.len() >= batch {
                    let n = links.len() as u64;
                    store.update_bulk(LINK, std::mem::take(&mut links))?;
                    m.bump("links", n);
                }
            }
            if nl > 0 {
                let mut count = doc! {"id": id1, "link_type": ltype, "count": nl as i64, "time": now, "version": 0i64};
                if let Some(id) = model.object_id(now, 0) {
                    count.insert("_id", id);
                }
                counts.push(Update {
                    q: doc! {"id": id1, "link_type": ltype},
                    u: count,
                    upsert: true,
                });
                if counts.len() >= batch {
                    let n = counts.len() as u64;
                    store.update_bulk(COUNT, std::mem::take(&mut counts))?;
                    m.bump("counts", n);
                }
            }
        }
    }
    if !nodes.is_empty() {
        m.bump("nodes", store.insert_many(NODE, nodes)?);
    }
    if !links.is_empty() {
        let n = links.len() as u64;
        store.update_bulk(LINK, links)?;
        m.bump("links", n);
    }
    if !counts.is_empty() {
        let n = counts.len() as u64;
        store.update_bulk(COUNT, counts)?;
        m.bump("counts", n);
    }
    Ok(())
}

/// State shared by the requesters: the node id counter (LinkBenchX's NodeAutoIncrement).
pub struct Shared {
    pub next_node_id: AtomicI64,
}

/// One requester: its RNG, payload generators and the op chooser.
pub struct Requester {
    model: Arc<Model>,
    shared: Arc<Shared>,
    pub rng: crate::Rng,
    cumulative: [f64; 10],
    node_gen: MotifGen,
    link_gen: MotifGen,
}

type OpOutcome = Result<Status>;

impl Requester {
    pub fn new(model: Arc<Model>, shared: Arc<Shared>, thread: usize) -> Requester {
        let mut rng = crate::rng(model.cfg.seed.wrapping_add(1_000_003 * (thread as u64 + 1)));
        let mut cumulative = [0.0; 10];
        let mut acc = 0.0;
        for (i, p) in model.cfg.mix.percentages().iter().enumerate() {
            acc += p;
            cumulative[i] = acc;
        }
        let node_gen = MotifGen::node(&mut rng);
        let link_gen = MotifGen::link(&mut rng);
        Requester {
            model,
            shared,
            rng,
            cumulative,
            node_gen,
            link_gen,
        }
    }

    /// LinkBench's op choice: r = U·100 against the cumulative percentages.
    pub fn next_op(&mut self) -> LinkOp {
        let r = self.rng.gen::<f64>() * 100.0;
        for (i, c) in self.cumulative.iter().enumerate() {
            if r < *c {
                return LinkOp::ALL[i];
            }
        }
        // Rounding: the last op with a non-zero share.
        let i = (0..10)
            .rev()
            .find(|&i| self.model.cfg.mix.percentages()[i] > 0.0)
            .unwrap_or(0);
        LinkOp::ALL[i]
    }

    /// Chooses and runs one operation, recording its latency.
    pub fn step(&mut self, store: &dyn Store, m: &mut Measurements) -> LinkOp {
        let op = self.next_op();
        let t0 = std::time::Instant::now();
        let st = match self.execute(store, op, m) {
            Ok(s) => s,
            Err(e) => {
                m.bump(&format!("error: {e}"), 1);
                Status::Error
            }
        };
        m.record(op.metric(), st, t0.elapsed().as_micros() as u64);
        op
    }

    fn link_data(&mut self) -> Bson {
        let cfg = &self.model.cfg;
        let len = lognormal(
            cfg.link_datasize,
            cfg.datasize_sigma,
            MAX_LINK_DATA,
            &mut self.rng,
        );
        bin(self.link_gen.fill(len as usize, &mut self.rng))
    }

    fn node_data(&mut self) -> Bson {
        let cfg = &self.model.cfg;
        let len = lognormal(
            cfg.node_datasize,
            cfg.datasize_sigma,
            MAX_NODE_DATA,
            &mut self.rng,
        );
        bin(self.node_gen.fill(len as usize, &mut self.rng))
    }

    /// Issues `op` against `store`: the commands LinkBenchX sends, with correct count bodies.
    pub fn execute(&mut self, store: &dyn Store, op: LinkOp, m: &mut Measurements) -> OpOutcome {
        let model = self.model.clone();
        let now = model.request_time_ms();
        match op {
            LinkOp::AddLink | LinkOp::UpdateLink => {
                let id1 = model.link_write_id1(&mut self.rng);
                let (t, ltype) = model.link_type(&mut self.rng);
                let p = if op == LinkOp::AddLink {
                    P_ADD_EXIST
                } else {
                    P_UPDATE_EXIST
                };
                let id2 = model.id2(id1, t, p, &mut self.rng);
                let data = self.link_data();
                self.add_link(store, (id1, ltype, id2), data, now, m)
            }
            LinkOp::DeleteLink => {
                let id1 = model.link_write_id1(&mut self.rng);
                let (t, ltype) = model.link_type(&mut self.rng);
                let id2 = model.id2(id1, t, P_DELETE_EXIST, &mut self.rng);
                self.delete_link(store, id1, ltype, id2, now, m)
            }
            LinkOp::CountLink => {
                let id1 = model.link_read_id1(&mut self.rng);
                let (_, ltype) = model.link_type(&mut self.rng);
                let c = store.find_one(COUNT, doc! {"id": id1, "link_type": ltype})?;
                let n = c.and_then(|d| d.get_i64("count").ok()).unwrap_or(0);
                m.bump("count_link_total", n.max(0) as u64);
                Ok(Status::Ok)
            }
            LinkOp::MultigetLink => self.multiget_link(store, &model, m),
            LinkOp::GetLinkList => self.get_link_list(store, &model, m),
            LinkOp::AddNode | LinkOp::UpdateNode | LinkOp::DeleteNode | LinkOp::GetNode => {
                self.node_op(store, op, &model, now, m)
            }
        }
    }

    /// multigetLink: a `count` of up to `multiget_max` links of one id1, then their find.
    fn multiget_link(
        &mut self,
        store: &dyn Store,
        model: &Model,
        m: &mut Measurements,
    ) -> OpOutcome {
        let id1 = model.link_read_id1(&mut self.rng);
        let (t, ltype) = model.link_type(&mut self.rng);
        let k = geometric(
            model.cfg.multiget_p,
            1,
            model.cfg.multiget_max,
            &mut self.rng,
        );
        let nl = model.nlinks_of_type(id1, t);
        let range = ((nl as f64 / P_GET_EXIST).ceil() as i64).max(1);
        let ids: Vec<i64> = if range <= k as i64 {
            (0..k as i64).map(|j| id1 + j).collect()
        } else {
            let mut v = Vec::with_capacity(k as usize);
            while v.len() < k as usize {
                let id2 = id1 + self.rng.gen_range(0..range);
                if !v.contains(&id2) {
                    v.push(id2);
                }
            }
            v
        };
        let filter = doc! {"id1": id1, "link_type": ltype, "id2": {"$in": ids}};
        // LinkBenchX: DBCursor.count() first (a `count` command), then the find.
        store.count(LINK, filter.clone(), 0, 0)?;
        let found = store.find(LINK, &Query::filter(filter))?;
        m.bump("multiget_found", found.len() as u64);
        Ok(Status::Ok)
    }

    /// getLinkList: the count, then the newest `DEFAULT_LIMIT` visible links of one id1.
    fn get_link_list(
        &mut self,
        store: &dyn Store,
        model: &Model,
        m: &mut Measurements,
    ) -> OpOutcome {
        let id1 = model.link_read_id1(&mut self.rng);
        let (_, ltype) = model.link_type(&mut self.rng);
        let filter = doc! {
            "id1": id1, "link_type": ltype, "visibility": 1i32,
            "time": {"$gte": 0i64, "$lte": i64::MAX},
        };
        store.count(LINK, filter.clone(), 0, DEFAULT_LIMIT)?;
        let rows = store.find(
            LINK,
            &Query {
                filter,
                sort: Some(doc! {"time": -1}),
                limit: DEFAULT_LIMIT,
                ..Default::default()
            },
        )?;
        m.bump("getlinklist_rows", rows.len() as u64);
        Ok(Status::Ok)
    }

    /// The node operations: add, update, delete or get one node.
    fn node_op(
        &mut self,
        store: &dyn Store,
        op: LinkOp,
        model: &Model,
        now: i64,
        m: &mut Measurements,
    ) -> OpOutcome {
        match op {
            LinkOp::AddNode => {
                let id = self.shared.next_node_id.fetch_add(1, Ordering::SeqCst);
                let data = self.node_data();
                store.insert_one(
                    NODE,
                    doc! {"_id": id, "type": DEFAULT_NODE_TYPE, "version": 1i64, "time": (now / 1000) as i32, "data": data},
                )?;
                Ok(Status::Ok)
            }
            LinkOp::UpdateNode => {
                let id = model.node_update_id(&mut self.rng);
                let data = self.node_data();
                let r = store.update_one(
                    NODE,
                    Update {
                        q: doc! {"_id": id, "type": DEFAULT_NODE_TYPE},
                        u: doc! {"$set": {"version": 2i64, "time": (now / 1000) as i32, "data": data}},
                        upsert: false,
                    },
                )?;
                if r.matched == 0 {
                    m.bump("update_node_missing", 1);
                }
                Ok(Status::Ok)
            }
            LinkOp::DeleteNode => {
                let id = model.node_delete_id(&mut self.rng);
                let n = store.delete_one(NODE, doc! {"_id": id, "type": DEFAULT_NODE_TYPE})?;
                m.bump("nodes_deleted", n);
                Ok(Status::Ok)
            }
            LinkOp::GetNode => {
                let id = model.node_read_id(&mut self.rng);
                let d = store.find_one(NODE, doc! {"_id": id})?;
                let hit = d.is_some_and(|d| d.get_i32("type").ok() == Some(DEFAULT_NODE_TYPE));
                if !hit {
                    m.bump("get_node_missing", 1);
                }
                Ok(Status::Ok)
            }
            _ => unreachable!("{op:?} is not a node operation"),
        }
    }

    /// addLink / updateLink, LinkBenchX's four steps with correct bodies:
    /// (1) upsert the link ($setOnInsert the payload, $set visibility 1); (2) upsert the count
    /// document ($set time, $setOnInsert count 0, version 0); (3) `$inc` count by +1 if the link
    /// is new or was hidden, by 0 otherwise, and version by 1; (4) if the link existed, `$set`
    /// its payload (LinkBenchX sets visibility again there; see docs/workloads.md).
    fn add_link(
        &mut self,
        store: &dyn Store,
        (id1, ltype, id2): (i64, i64, i64),
        data: Bson,
        now: i64,
        m: &mut Measurements,
    ) -> OpOutcome {
        let mut insert = doc! {"id1": id1, "id2": id2, "link_type": ltype, "data": data.clone(), "time": now, "version": 0i32};
        if let Some(id) = self.model.object_id(now, 1) {
            insert.insert("_id", id);
        }
        let r = store.update_one(
            LINK,
            Update {
                q: link_key(id1, ltype, id2),
                u: doc! {"$setOnInsert": insert, "$set": {"visibility": 1i32}},
                upsert: true,
            },
        )?;
        let existed = r.matched > 0;
        let delta: i64 = if r.upserted || r.modified > 0 { 1 } else { 0 };
        if r.upserted {
            m.bump("link_inserted", 1);
        } else if r.modified > 0 {
            m.bump("link_unhidden", 1);
        } else {
            m.bump("link_updated", 1);
        }
        self.count_upsert(store, id1, ltype, now)?;
        store.update_one(
            COUNT,
            Update {
                q: doc! {"id": id1, "link_type": ltype},
                u: doc! {"$inc": {"count": delta, "version": 1i64}},
                upsert: false,
            },
        )?;
        if existed {
            // Not visibility: step (1) set it, and setting it again here would make visible a
            // link that a concurrent delete hid (and counted) in between.
            store.update_one(
                LINK,
                Update {
                    q: link_key(id1, ltype, id2),
                    u: doc! {"$set": {"data": data, "time": now, "version": 0i32}},
                    upsert: false,
                },
            )?;
        }
        Ok(Status::Ok)
    }

    fn count_upsert(&self, store: &dyn Store, id1: i64, ltype: i64, now: i64) -> Result<()> {
        let mut insert = doc! {"count": 0i64, "version": 0i64};
        if let Some(id) = self.model.object_id(now, 1) {
            insert.insert("_id", id);
        }
        store.update_one(
            COUNT,
            Update {
                q: doc! {"id": id1, "link_type": ltype},
                u: doc! {"$set": {"time": now}, "$setOnInsert": insert},
                upsert: true,
            },
        )?;
        Ok(())
    }

    /// deleteLink (expunge = false): find the link; if visible, hide it, then the count
    /// upsert, `$inc` count −1, the floor's lookup and the count read, as LinkBenchX does, with
    /// bodies that keep the count exact when requesters race on one link.
    fn delete_link(
        &mut self,
        store: &dyn Store,
        id1: i64,
        ltype: i64,
        id2: i64,
        now: i64,
        m: &mut Measurements,
    ) -> OpOutcome {
        let Some(link) = store.find_one(LINK, link_key(id1, ltype, id2))? else {
            m.bump("delete_link_missing", 1);
            return Ok(Status::Ok);
        };
        if link.get_i32("visibility").unwrap_or(0) == 0 {
            m.bump("delete_link_hidden", 1);
            return Ok(Status::Ok);
        }
        let id = link.get("_id").cloned().unwrap_or(Bson::Null);
        // Hide only a visible link: another requester may have hidden it since the find, and
        // a second −1 for one hide would leave the count below the visible links.
        let hidden = store.update_one(
            LINK,
            Update {
                q: doc! {"_id": id, "visibility": 1i32},
                u: doc! {"$set": {"visibility": 0i32}},
                upsert: false,
            },
        )?;
        if hidden.modified == 0 {
            m.bump("delete_link_hidden", 1);
            return Ok(Status::Ok);
        }
        m.bump("link_hidden", 1);
        self.count_upsert(store, id1, ltype, now)?;
        let q = doc! {"id": id1, "link_type": ltype};
        store.update_one(
            COUNT,
            Update {
                q: q.clone(),
                u: doc! {"$inc": {"count": -1i64, "version": 1i64}},
                upsert: false,
            },
        )?;
        // LinkBenchX's floor at 0, as a lookup that does not clamp. With these bodies a count
        // is never negative at rest, but it is −1 for a moment when this hide's −1 lands before
        // the +1 of a concurrent add that made the same link visible; clamping that −1 to 0
        // would leave the count one above the visible links.
        store.find_one(
            COUNT,
            doc! {"id": id1, "link_type": ltype, "count": {"$lt": 0i64}},
        )?;
        store.find_one(COUNT, q)?;
        Ok(Status::Ok)
    }
}

/// The request phase: `requests` operations (or `maxtime`) from `requesters` threads.
/// Prints nothing; the result carries the measured C:R:U:D shares.
pub fn run_ops(
    cfg: &LinkBenchConfig,
    store: &dyn Store,
    progress: Progress,
) -> Result<PhaseResult> {
    if cfg.requests.is_none() && cfg.maxtime_s.is_none() {
        bail!("set a request count or a run time");
    }
    let model = Arc::new(Model::new(cfg)?);
    // NodeAutoIncrement: max(node._id) + 1.
    let top = store.find(
        NODE,
        &Query {
            sort: Some(doc! {"_id": -1}),
            limit: 1,
            ..Default::default()
        },
    )?;
    let start_id = top
        .first()
        .and_then(|d| d.get_i64("_id").ok())
        .map_or(cfg.maxid1, |m| m + 1);
    let shared = Arc::new(Shared {
        next_node_id: AtomicI64::new(start_id),
    });
    let limits = RunLimits {
        ops: cfg.requests,
        duration: cfg.maxtime_s.map(Duration::from_secs_f64),
        threads: cfg.requesters.max(1),
        target_ops_sec: cfg.target_ops_sec,
        interval: Duration::from_secs_f64(cfg.status_interval_s.max(0.01)),
    };
    let (m, mut r) = run_threads("run", &limits, progress, |i| {
        let mut req = Requester::new(model.clone(), shared.clone(), i);
        move |m: &mut Measurements| {
            req.step(store, m);
            Step::Done
        }
    });
    let mut classes = [0u64; 4];
    for op in LinkOp::ALL {
        classes[op.class()] += m.operations(op.metric());
    }
    let total: u64 = classes.iter().sum();
    if total > 0 {
        r.crud_percent = Some(classes.map(|c| c as f64 * 100.0 / total as f64));
    }
    Ok(r)
}

/// "C:R:U:D = a : b : c : d" for a ratio in percent.
pub fn format_crud(p: &[f64; 4]) -> String {
    format!("{:.2} : {:.2} : {:.2} : {:.2}", p[0], p[1], p[2], p[3])
}
