//! Stream-placement policies: each chooses a stream for every write from the event stream
//! alone, so the same code runs online in the engine and offline on a trace.
//!
//! | policy | seed | streams (8-stream device) |
//! | --- | --- | --- |
//! | `none` | — | everything on 0 |
//! | `file` | 000 Table 2 | metadata 0, journal 1, collections 2, indexes 3 |
//! | `boundary` | 003 Alg. 1, 000 Fig. 4 / Table 2 | metadata 0, journal 1, collections 2 (below the boundary) 3 (above), indexes 4, 5 |
//! | `dsm` | 000 §4, Fig. 9 / Table 2 | metadata 0, journal + primary indexes 1, collection groups 2,3,4, secondary-index groups 5,6,7 |
//! | `dsm-skip-primary` | 000 §5.3 | as `dsm` without primary-index filtering: stream 1 holds the journal only |
//! | `lifetime` | flashdoc | metadata 0, journal 1, predicted-lifetime buckets 2, 3 (shortest first; up to 2..7) |
//! | `filelog` | flashdoc | metadata 0, journal 1, rarely written table files 2, each busy table file its own stream 3..7 (busiest first) |
//! | `reuse` | flashdoc, after SepBIT and MiDAS | metadata 0, journal 1, table writes by the age of the data they overwrite at their address: classes 2..7 (shortest first) |
//! | `agegroup` | flashdoc, after SepBIT and MiDAS | metadata 0, journal 1, table writes by the age of the block they invalidate (the page's last rewrite interval): adaptive groups 2..7 (youngest first) |
//! | `oracle` | offline bound | true device-lifetime buckets 0..7 (shortest first) |
//! | `oracle-death` | offline bound | true death time: lifetime classes split by death-time parity |
//!
//! Each policy's module says how it folds its groups onto fewer streams (down to 2); the full
//! tables are in `docs/placement.md`. Policies are deterministic functions of the events they
//! are shown.

mod agegroup;
mod boundary;
mod dsm;
mod file;
mod filelog;
mod lifetime;
mod none;
mod oracle;
mod reuse;
mod untracked;

pub use agegroup::AgeGroupPolicy;
pub use boundary::BoundaryPolicy;
pub use dsm::{
    compute_pivots, map_sid_by_hotness, predict_stream, DsmCheckpoint, DsmPolicy, RegionStat,
};
pub use file::FilePolicy;
pub use filelog::FileLogPolicy;
pub use lifetime::LifetimePolicy;
pub use none::NonePolicy;
pub use oracle::{Lifetimes, OracleGrouping, OraclePolicy, WriteLife};
pub use reuse::ReusePolicy;

use crate::event::{Event, FileId, FileKind, WriteEvent};
use std::collections::HashMap;

/// The 4 KB page the seeds count in (seed 000 Eq. 1 `PAGESIZE`).
pub const PAGE_SIZE: u64 = 4096;

/// Every policy name: those [`make_policy`] builds, and the two oracles (offline only:
/// [`OraclePolicy`], built from the whole trace).
pub const POLICY_NAMES: &[&str] = &[
    "none",
    "file",
    "boundary",
    "dsm",
    "dsm-skip-primary",
    "lifetime",
    "filelog",
    "reuse",
    "agegroup",
    "oracle",
    "oracle-death",
];

/// A placement policy's name, checked against [`POLICY_NAMES`] when it is made, so a value of
/// this type always names a known policy (adding a policy to `POLICY_NAMES` is all it takes to
/// make its name parse). Configuration files name policies by it (`storage.flash.placement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicyName(&'static str);

impl PolicyName {
    pub const NONE: PolicyName = PolicyName("none");

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Every known name, in [`POLICY_NAMES`] order.
    pub fn all() -> impl Iterator<Item = PolicyName> {
        POLICY_NAMES.iter().map(|&n| PolicyName(n))
    }

    /// Whether [`make_policy`] can build it (the oracles are offline only).
    pub fn is_online(self) -> bool {
        OracleGrouping::from_name(self.0).is_none()
    }
}

impl Default for PolicyName {
    fn default() -> Self {
        PolicyName::NONE
    }
}

impl std::str::FromStr for PolicyName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        POLICY_NAMES
            .iter()
            .find(|&&n| n == s)
            .map(|&n| PolicyName(n))
            .ok_or_else(|| {
                format!(
                    "unknown placement policy {s:?} (known: {})",
                    POLICY_NAMES.join(", ")
                )
            })
    }
}

impl std::fmt::Display for PolicyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl serde::Serialize for PolicyName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for PolicyName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Parameters of seed 000's dynamic stream mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct DsmConfig {
    /// K: hotness groups per file type (collections, secondary indexes). Default 3.
    pub groups: u8,
    /// α: the positive-integer weight of Eq. 3 (≥ 2; α = K gives K equal-width groups).
    /// Default 3.
    pub alpha: u32,
    /// THRESHOLD1 of Fig. 9, in percent: an index file whose two regions' global percentages
    /// sum to at most this is a primary index. Default 5.
    pub threshold1: f64,
    /// THRESHOLD2 of Fig. 9, in percent: an index file with a region whose global percentage
    /// is at most this is a primary index. Default 1.
    pub threshold2: f64,
    /// How PredictStream decides that a region's hot-cold trend changed (see `dsm.rs`,
    /// ambiguity 10). Default [`DsmPrediction::Trend`].
    pub prediction: DsmPrediction,
}

/// Seed 000 Eq. 5 / Fig. A.5 read two ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsmPrediction {
    /// The prose of §4.4: the trend is unchanged when a region's newly computed stream equals
    /// the one computed at the previous checkpoint; then it is kept, else the region is
    /// predicted to swap (it takes the other region's newly computed stream).
    Trend,
    /// Fig. A.5 to the letter: compare with the *predicted* stream of the previous checkpoint.
    Literal,
}

impl DsmPrediction {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "trend" => Ok(DsmPrediction::Trend),
            "literal" => Ok(DsmPrediction::Literal),
            o => Err(format!("unknown DSM prediction {o:?} (trend, literal)")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DsmPrediction::Trend => "trend",
            DsmPrediction::Literal => "literal",
        }
    }
}

impl Default for DsmConfig {
    fn default() -> Self {
        DsmConfig {
            groups: 3,
            alpha: 3,
            threshold1: 5.0,
            threshold2: 1.0,
            prediction: DsmPrediction::Trend,
        }
    }
}

/// Parameters of the `lifetime` policy.
#[derive(Clone, Debug, PartialEq)]
pub struct LifetimeConfig {
    /// Weight of the newest inter-write interval in a page's (linear-space) moving average of
    /// its intervals. Default 0.2.
    pub ewma_weight: f64,
    /// Quantiles of recent predictions that the outermost bucket boundaries sit on.
    pub low_quantile: f64,
    pub high_quantile: f64,
    /// At most this many lifetime buckets (data streams). Default 2.
    pub buckets: u8,
    /// Octaves (log₂) added to the prediction of tree-page writes made during a checkpoint.
    /// Default 2.
    pub checkpoint_bias: f64,
}

impl Default for LifetimeConfig {
    fn default() -> Self {
        LifetimeConfig {
            ewma_weight: 0.2,
            low_quantile: 0.05,
            high_quantile: 0.95,
            buckets: 2,
            checkpoint_bias: 2.0,
        }
    }
}

/// Parameters of the `filelog` policy (see `policy/filelog.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct FileLogConfig {
    /// A table file whose share of the (decayed) table bytes written is below this is rare:
    /// it shares one stream with the other rare files. Default 0.02.
    pub cold_share: f64,
    /// Each checkpoint commit multiplies a file's accumulated bytes by this before adding the
    /// new window's. Default 0.5.
    pub decay: f64,
}

impl Default for FileLogConfig {
    fn default() -> Self {
        FileLogConfig {
            cold_share: 0.02,
            decay: 0.5,
        }
    }
}

/// Parameters of the `reuse` policy (see `policy/reuse.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReuseConfig {
    /// How many times rarer than its file kind's a signal's young (old) deaths must be for
    /// the signal to be long (short). Default 2.
    pub ratio: f64,
    /// Pages a signal must have written before it is classed. Default 64.
    pub min_samples: f64,
    /// The weight of older realized lifetimes in a kind's typical lifetime, per new page.
    /// Default 0.9999.
    pub memory: f64,
    /// Each checkpoint commit multiplies the written and young counts by this. Default 0.9.
    pub decay: f64,
    /// A class gets its own stream only while it draws at least this share of its file
    /// kind's writes. Default 0.05.
    pub min_share: f64,
}

impl Default for ReuseConfig {
    fn default() -> Self {
        ReuseConfig {
            ratio: 2.0,
            min_samples: 64.0,
            memory: 0.9999,
            decay: 0.9,
            min_share: 0.05,
        }
    }
}

/// Parameters of the `agegroup` policy (see `policy/agegroup.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct AgeGroupConfig {
    /// Each checkpoint commit multiplies the histogram of recent ages by this. Default 0.5.
    pub decay: f64,
    /// The narrowest group, in octaves of age. Default 1.
    pub min_octaves: f64,
    /// A group with under this share of the recent table pages joins its younger neighbour.
    /// Default 0.05.
    pub min_share: f64,
}

impl Default for AgeGroupConfig {
    fn default() -> Self {
        AgeGroupConfig {
            decay: 0.5,
            min_octaves: 1.0,
            min_share: 0.05,
        }
    }
}

/// What every policy is configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementConfig {
    /// The device's stream budget, stream 0 included (2..=16; default 8).
    pub streams: u8,
    pub dsm: DsmConfig,
    pub lifetime: LifetimeConfig,
    pub filelog: FileLogConfig,
    pub reuse: ReuseConfig,
    pub agegroup: AgeGroupConfig,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            streams: 8,
            dsm: DsmConfig::default(),
            lifetime: LifetimeConfig::default(),
            filelog: FileLogConfig::default(),
            reuse: ReuseConfig::default(),
            agegroup: AgeGroupConfig::default(),
        }
    }
}

impl PlacementConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=16).contains(&self.streams) {
            return Err(format!(
                "streams must be in 2..=16 (stream 0 included), not {}",
                self.streams
            ));
        }
        if self.dsm.groups == 0 {
            return Err("dsm groups (K) must be at least 1".into());
        }
        if self.dsm.alpha < 2 {
            return Err(format!(
                "dsm alpha must be an integer ≥ 2 (α = 1 puts p1 above p(K−1)), not {}",
                self.dsm.alpha
            ));
        }
        let l = &self.lifetime;
        if !(l.ewma_weight > 0.0 && l.ewma_weight <= 1.0) {
            return Err("lifetime ewma_weight must be in (0, 1]".into());
        }
        if !(0.0 <= l.low_quantile && l.low_quantile < l.high_quantile && l.high_quantile <= 1.0) {
            return Err("lifetime quantiles must satisfy 0 ≤ low < high ≤ 1".into());
        }
        if l.buckets == 0 || !l.checkpoint_bias.is_finite() {
            return Err("lifetime buckets must be ≥ 1 and checkpoint_bias finite".into());
        }
        let f = &self.filelog;
        if !(0.0..1.0).contains(&f.cold_share) || !(0.0..=1.0).contains(&f.decay) {
            return Err("filelog cold_share must be in [0, 1) and decay in [0, 1]".into());
        }
        let r = &self.reuse;
        let memory_ok = r.memory > 0.0 && r.memory < 1.0;
        let ratio_ok = r.ratio > 1.0 && r.ratio.is_finite();
        let samples_ok = r.min_samples >= 0.0 && r.min_samples.is_finite();
        let shares_ok = (0.0..=1.0).contains(&r.decay) && (0.0..=1.0).contains(&r.min_share);
        if !(memory_ok && ratio_ok && samples_ok && shares_ok) {
            let want =
                "memory in (0, 1), ratio > 1, min_samples ≥ 0, decay and min_share in [0, 1]";
            return Err(format!("reuse: {want}"));
        }
        let a = &self.agegroup;
        let octaves_ok = a.min_octaves > 0.0 && a.min_octaves.is_finite();
        if !((0.0..=1.0).contains(&a.decay) && octaves_ok && (0.0..1.0).contains(&a.min_share)) {
            return Err(
                "agegroup: decay in [0, 1], min_octaves > 0 and finite, min_share in [0, 1)".into(),
            );
        }
        Ok(())
    }
}

/// A placement policy. The engine calls [`Policy::place`] for each write it is about to issue
/// and [`Policy::observe`] for every other event, in order.
pub trait Policy: Send {
    fn name(&self) -> &'static str;
    /// Chooses the stream (0..streams) for a write about to be issued (`w.stream` is ignored).
    fn place(&mut self, w: &WriteEvent) -> u8;
    /// Sees every other event, in order (file create/rename/remove/truncate, Free, checkpoint
    /// begin/commit).
    fn observe(&mut self, ev: &Event);
    /// The end of the load phase was declared (boundary policy; others ignore it).
    fn end_of_load(&mut self) {}
    /// A hint: `ev` comes a few events from now (an offline replay knows). A policy may
    /// start loading the state it will touch into the cache; nothing it decides may change.
    fn prefetch(&self, ev: &Event) {
        let _ = ev;
    }
}

/// Builds an online policy by name. The oracles need the whole trace: the offline replay
/// builds them ([`OraclePolicy::from_lifetimes`]).
pub fn make_policy(name: &str, cfg: &PlacementConfig) -> Result<Box<dyn Policy>, String> {
    cfg.validate()?;
    // An unknown name gets PolicyName's error, which lists the known ones.
    let name: PolicyName = name.parse()?;
    Ok(match name.as_str() {
        "none" => Box::new(NonePolicy),
        "file" => Box::new(FilePolicy::new(cfg)),
        "boundary" => Box::new(BoundaryPolicy::new(cfg)),
        "dsm" => Box::new(DsmPolicy::new(cfg, true)),
        "dsm-skip-primary" => Box::new(DsmPolicy::new(cfg, false)),
        "lifetime" => Box::new(LifetimePolicy::new(cfg)),
        "filelog" => Box::new(FileLogPolicy::new(cfg)),
        "reuse" => Box::new(ReusePolicy::new(cfg)),
        "agegroup" => Box::new(AgeGroupPolicy::new(cfg)),
        "oracle" | "oracle-death" => {
            return Err(format!(
                "{name} is offline only: it is built from the whole trace by the replay"
            ))
        }
        o => unreachable!("{o} is in POLICY_NAMES but make_policy cannot build it"),
    })
}

/// Is this a B-tree table file (the files the region-based policies split)?
pub(crate) fn is_table(kind: FileKind) -> bool {
    matches!(kind, FileKind::Collection | FileKind::Index)
}

/// The boundary between the two regions of each collection/index file (seed 003 §3.2: "the
/// last file offset after the load phase finished").
///
/// - [`Boundaries::end_of_load`] (the explicit API): every table file known then gets its
///   current size (highest written end) as boundary, replacing any automatic one.
/// - Automatic fallback, for files without an explicit boundary (end of load never declared,
///   or the file created after it): at each checkpoint commit the file's growth since the
///   previous commit is measured. Once a checkpoint window passes in which the file did not
///   grow (by more than max(64 KiB, 1 % of its size)), the boundary is its size **at the start
///   of the last window in which it grew** — because in WiredTiger (and flashdoc's engine) the
///   first window after the load still appends: nothing is free until the first checkpoint
///   after the load releases the pages that window rewrote, so those appends *are* the second
///   region. Exception: if that last growing window more than doubled the file it was itself
///   loading, and the boundary is the current size.
/// - Until a file has a boundary every write counts as region 1 (below the boundary).
#[derive(Default, Debug, Clone)]
pub(crate) struct Boundaries {
    files: HashMap<FileId, FileBoundary>,
}

#[derive(Default, Debug, Clone)]
struct FileBoundary {
    /// Highest written end (bytes), cut by truncation.
    size: u64,
    boundary: Option<u64>,
    explicit: bool,
    size_at_last_commit: u64,
    /// Size at the start of the most recent window in which the file grew.
    pre_growth_size: u64,
    last_growth: u64,
    grew_ever: bool,
}

impl Boundaries {
    pub(crate) fn on_write(&mut self, w: &WriteEvent) {
        if !is_table(w.file_kind) {
            return;
        }
        let f = self.files.entry(w.file).or_default();
        f.size = f.size.max(w.offset + w.len as u64);
    }

    pub(crate) fn observe(&mut self, ev: &Event) {
        match ev {
            Event::FileRemove { file, .. } => {
                self.files.remove(file);
            }
            Event::FileTruncate { file, len, .. } => {
                if let Some(f) = self.files.get_mut(file) {
                    f.size = f.size.min(*len);
                }
            }
            Event::CheckpointCommit { .. } => {
                for f in self.files.values_mut() {
                    let growth = f.size.saturating_sub(f.size_at_last_commit);
                    let tol = (64 << 10).max(f.size / 100);
                    if growth > tol {
                        f.pre_growth_size = f.size_at_last_commit;
                        f.last_growth = growth;
                        f.grew_ever = true;
                    } else if f.boundary.is_none() && f.grew_ever {
                        f.boundary = Some(if f.last_growth > f.pre_growth_size {
                            f.size
                        } else {
                            f.pre_growth_size
                        });
                    }
                    f.size_at_last_commit = f.size;
                }
            }
            _ => {}
        }
    }

    pub(crate) fn end_of_load(&mut self) {
        for f in self.files.values_mut() {
            f.boundary = Some(f.size);
            f.explicit = true;
        }
    }

    pub(crate) fn boundary(&self, file: FileId) -> Option<u64> {
        self.files.get(&file).and_then(|f| f.boundary)
    }

    /// 0 = region 1 (below the boundary, or no boundary yet), 1 = region 2.
    pub(crate) fn region(&self, file: FileId, offset: u64) -> usize {
        match self.boundary(file) {
            Some(b) if offset >= b => 1,
            _ => 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn is_explicit(&self, file: FileId) -> bool {
        self.files.get(&file).is_some_and(|f| f.explicit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::PageKind;

    pub(crate) fn w(file: FileId, kind: FileKind, offset: u64, len: u32) -> WriteEvent {
        WriteEvent {
            time_ns: 0,
            file,
            file_kind: kind,
            table: 1,
            page_kind: PageKind::Leaf,
            offset,
            len,
            id_index: false,
            stream: 0,
            page_id: 0,
            cause: crate::event::WriteCause::Other,
        }
    }

    pub(crate) fn commit() -> Event {
        Event::CheckpointCommit { time_ns: 0, id: 0 }
    }

    pub(crate) fn config(streams: u8) -> PlacementConfig {
        PlacementConfig {
            streams,
            ..Default::default()
        }
    }

    /// Each event's stream under policy `name` (`None` for events that are not writes), as
    /// the replay asks.
    pub(crate) fn streams_of_policy(
        name: &str,
        events: &[Event],
        cfg: &PlacementConfig,
    ) -> Vec<Option<u8>> {
        let mut p = make_policy(name, cfg).unwrap();
        events
            .iter()
            .map(|ev| match ev {
                Event::Write(w) => Some(p.place(w)),
                other => {
                    p.observe(other);
                    None
                }
            })
            .collect()
    }

    #[test]
    fn names_build_and_unknown_is_an_error() {
        let cfg = PlacementConfig::default();
        for &n in POLICY_NAMES {
            match OracleGrouping::from_name(n) {
                Some(g) => {
                    assert_eq!(g.name(), n);
                    let e = make_policy(n, &cfg).err().unwrap();
                    assert!(e.contains("offline only"), "{e}");
                }
                None => assert_eq!(make_policy(n, &cfg).unwrap().name(), n),
            }
        }
        assert!(make_policy("nope", &cfg).is_err());
        let bad = PlacementConfig {
            streams: 1,
            ..Default::default()
        };
        assert!(make_policy("none", &bad).is_err());
    }

    #[test]
    fn policy_names_parse_from_the_list() {
        for n in PolicyName::all() {
            assert_eq!(n.as_str().parse::<PolicyName>().unwrap(), n);
            assert_eq!(
                n.is_online(),
                make_policy(n.as_str(), &PlacementConfig::default()).is_ok()
            );
        }
        assert_eq!(PolicyName::all().count(), POLICY_NAMES.len());
        assert!("DSM".parse::<PolicyName>().unwrap_err().contains("unknown"));
        assert_eq!(PolicyName::default().to_string(), "none");
    }

    #[test]
    fn boundary_fallback_is_the_size_before_the_last_growing_window() {
        let mut b = Boundaries::default();
        let c = FileKind::Collection;
        // Window 0: load to 10 MB.
        b.on_write(&w(1, c, 0, 4096));
        b.on_write(&w(1, c, 10 << 20, 4096));
        b.observe(&commit());
        assert_eq!(b.boundary(1), None);
        // Window 1: the first update window appends 2 MB (the second region).
        b.on_write(&w(1, c, 12 << 20, 4096));
        b.observe(&commit());
        assert_eq!(b.boundary(1), None);
        // Window 2: no growth → boundary = size at the start of window 1.
        b.on_write(&w(1, c, 4096, 4096));
        b.observe(&commit());
        assert_eq!(b.boundary(1), Some((10 << 20) + 4096));
        assert_eq!(b.region(1, 4096), 0);
        assert_eq!(b.region(1, 11 << 20), 1);
        // end_of_load overrides it.
        b.end_of_load();
        assert_eq!(b.boundary(1), Some((12 << 20) + 4096));
        assert!(b.is_explicit(1));
    }

    #[test]
    fn boundary_fallback_when_the_load_window_is_the_last_growth() {
        let mut b = Boundaries::default();
        let c = FileKind::Index;
        b.on_write(&w(2, c, 1 << 20, 4096));
        b.observe(&commit()); // grew 0 → 1 MB: a load window (more than doubled)
        b.on_write(&w(2, c, 0, 4096));
        b.observe(&commit()); // no growth
        assert_eq!(b.boundary(2), Some((1 << 20) + 4096));
    }
}
