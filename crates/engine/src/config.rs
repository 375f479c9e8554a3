//! Engine and table configuration, with MongoDB's defaults (see docs/engine.md for sources).

use crate::error::{Error, Result};
pub use crate::flash_mode::FlashMode;
use crate::io::hint_path::Hints;
use crate::io::FlashConfig;
use placement::policy::{PlacementConfig, PolicyName};
use placement::{FileKind, Observer};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The allocation unit: every block is a multiple of it (WiredTiger's `allocation_size`).
pub const ALLOC_UNIT: u64 = 4096;

/// Block compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compressor {
    None,
    Snappy,
    Zlib,
    Zstd,
}

impl Compressor {
    pub const ALL: [Compressor; 4] = [
        Compressor::None,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Compressor::None => "none",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }
}

impl FromStr for Compressor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "" => Ok(Compressor::None),
            "snappy" => Ok(Compressor::Snappy),
            "zlib" => Ok(Compressor::Zlib),
            "zstd" => Ok(Compressor::Zstd),
            _ => Err(Error::Config(format!(
                "unknown block compressor {s:?} (expected none, snappy, zlib or zstd)"
            ))),
        }
    }
}

/// Where the block manager puts a new block (WiredTiger's `block_allocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocPolicy {
    /// Smallest free extent that fits, lowest offset among equals (WiredTiger's default, and
    /// `storage.flash.mode: off`'s).
    Best,
    /// Lowest-offset free extent that fits.
    First,
    /// Always at the end of the file.
    Append,
    /// Next-fit sweep (flashdoc's flash-aware co-design): the first free extent that fits at
    /// or after a cursor that moves forward through the file and wraps to its start, so freed
    /// space is reused in the order it was last written, as in a log. Before wrapping, the
    /// file keeps a reserve of free space (`TableConfig::sweep_reserve_pct` of its size), so
    /// one sweep lasts many checkpoint intervals: without TRIM the device learns that a block
    /// is dead only when its LBA is overwritten, and the sweep overwrites dead blocks in the
    /// order they were written, so erase blocks filled together die together. Roots and
    /// extent lists still go first-fit. Flash mode's default. See docs/engine.md.
    Sweep,
}

/// How a table file allocates space: the policy and, for the sweep, its free reserve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub policy: AllocPolicy,
    /// Percent of the file kept free before the sweep wraps (0–90).
    pub sweep_reserve_pct: u8,
}

impl Allocation {
    pub fn best() -> Self {
        Allocation {
            policy: AllocPolicy::Best,
            sweep_reserve_pct: DEFAULT_SWEEP_RESERVE_PCT,
        }
    }
    pub fn sweep_reserve(self) -> f64 {
        self.sweep_reserve_pct as f64 / 100.0
    }
}

/// The sweep's default reserve: half the file free, the footprint WiredTiger had in the
/// seeds' runs (51.7 GB of files for 23 M one-kilobyte documents, seed 000 §5.5).
pub const DEFAULT_SWEEP_RESERVE_PCT: u8 = 50;
/// The largest reserve a table may keep (more would leave the sweep too little to reuse).
pub const MAX_SWEEP_RESERVE_PCT: u8 = 90;

impl AllocPolicy {
    pub fn name(self) -> &'static str {
        match self {
            AllocPolicy::Best => "best",
            AllocPolicy::First => "first",
            AllocPolicy::Append => "append",
            AllocPolicy::Sweep => "sweep",
        }
    }
}

impl FromStr for AllocPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "best" => Ok(AllocPolicy::Best),
            "first" => Ok(AllocPolicy::First),
            "append" => Ok(AllocPolicy::Append),
            "sweep" => Ok(AllocPolicy::Sweep),
            _ => Err(Error::Config(format!(
                "unknown block allocation {s:?} (expected best, first, append or sweep)"
            ))),
        }
    }
}

/// Per-table settings. Fixed when the table is created and stored in the metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableConfig {
    /// Collection or index (decides defaults and the file name; reported with every write).
    pub kind: TableKind,
    /// The table is a collection's `_id` index (reported for analysis only).
    #[serde(default)]
    pub id_index: bool,
    pub internal_page_max: u32,
    pub leaf_page_max: u32,
    /// Values longer than this go to overflow blocks.
    pub leaf_value_max: u32,
    /// An in-memory leaf larger than this is reconciled (and split) by the thread that grew it.
    pub memory_page_max: u64,
    pub compressor: Compressor,
    pub prefix_compression: bool,
    pub allocation: AllocPolicy,
    /// With `AllocPolicy::Sweep`: percent of the file kept free before the sweep wraps.
    #[serde(default = "default_sweep_reserve")]
    pub sweep_reserve_pct: u8,
}

fn default_sweep_reserve() -> u8 {
    DEFAULT_SWEEP_RESERVE_PCT
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableKind {
    Collection,
    Index,
}

impl TableKind {
    pub fn file_kind(self) -> FileKind {
        match self {
            TableKind::Collection => FileKind::Collection,
            TableKind::Index => FileKind::Index,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TableKind::Collection => "collection",
            TableKind::Index => "index",
        }
    }
}

impl TableConfig {
    /// MongoDB's collection table: 4 KB internal, 32 KB leaf pages, snappy, no prefix compression,
    /// `memory_page_max=10m` (wiredtiger_record_store.cpp); flash mode's allocation
    /// ([`flash_mode_defaults`]).
    pub fn collection() -> Self {
        TableConfig {
            kind: TableKind::Collection,
            id_index: false,
            internal_page_max: 4096,
            leaf_page_max: 32 * 1024,
            leaf_value_max: 32 * 1024,
            memory_page_max: 10 << 20,
            compressor: Compressor::Snappy,
            prefix_compression: false,
            allocation: flash_defaults().allocation,
            sweep_reserve_pct: DEFAULT_SWEEP_RESERVE_PCT,
        }
    }

    /// MongoDB's index table: 16 KB internal and leaf pages, prefix compression, no block
    /// compression (wiredtiger_index.cpp), WiredTiger's 5 MB `memory_page_max`; flash mode's
    /// allocation.
    pub fn index() -> Self {
        TableConfig {
            kind: TableKind::Index,
            id_index: false,
            internal_page_max: 16 * 1024,
            leaf_page_max: 16 * 1024,
            leaf_value_max: 16 * 1024,
            memory_page_max: 5 << 20,
            compressor: Compressor::None,
            prefix_compression: true,
            allocation: flash_defaults().allocation,
            sweep_reserve_pct: DEFAULT_SWEEP_RESERVE_PCT,
        }
    }

    pub fn with_leaf_page_max(mut self, bytes: u32) -> Self {
        self.leaf_page_max = bytes;
        self.leaf_value_max = bytes;
        self
    }

    /// The block allocation this table's file uses.
    pub fn block_allocation(&self) -> Allocation {
        Allocation {
            policy: self.allocation,
            sweep_reserve_pct: self.sweep_reserve_pct,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.sweep_reserve_pct > MAX_SWEEP_RESERVE_PCT {
            return Err(Error::Config(format!(
                "sweep_reserve_pct must be 0–{MAX_SWEEP_RESERVE_PCT}, not {}",
                self.sweep_reserve_pct
            )));
        }
        let ok = |v: u32| {
            v as u64 >= ALLOC_UNIT && (v as u64).is_multiple_of(ALLOC_UNIT) && v <= 512 << 20
        };
        if !ok(self.internal_page_max) || !ok(self.leaf_page_max) {
            return Err(Error::Config(format!(
                "page sizes must be multiples of 4 KB between 4 KB and 512 MB (internal {}, leaf {})",
                self.internal_page_max, self.leaf_page_max
            )));
        }
        if self.leaf_value_max < 64 {
            return Err(Error::Config(
                "leaf_value_max must be at least 64 bytes".into(),
            ));
        }
        Ok(())
    }

    /// The size reconciliation fills a page to before it starts another: 90% of the maximum,
    /// rounded to the nearest allocation unit (WiredTiger's `split_pct=90`); when rounding
    /// reaches the maximum itself, the unrounded 90% is used, as WiredTiger does.
    pub fn split_size(&self, page_max: u32) -> usize {
        let raw = page_max as u64 * 90 / 100;
        let rounded = (raw + ALLOC_UNIT / 2) / ALLOC_UNIT * ALLOC_UNIT;
        if rounded >= page_max as u64 || rounded == 0 {
            raw as usize
        } else {
            rounded as usize
        }
    }
}

/// Which engine sits behind the KV interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// The on-disk copy-on-write B+tree engine (MongoDB's `wiredTiger` name is accepted too).
    Disk,
    /// Everything in memory, nothing on disk.
    InMemory,
    /// The in-place engine in MMAPv1's design (crate `inplace`, which the document layer opens).
    Mmapv1,
}

impl FromStr for EngineKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "wiredTiger" | "wiredtiger" | "flashdoc" | "disk" => Ok(EngineKind::Disk),
            "inMemory" | "inmemory" | "memory" => Ok(EngineKind::InMemory),
            "mmapv1" => Ok(EngineKind::Mmapv1),
            _ => Err(Error::Config(format!(
                "unknown storage engine {s:?} (expected wiredTiger, inMemory or mmapv1)"
            ))),
        }
    }
}

/// Who does the engine's background work: eviction down to the cache's target, checkpoints
/// and journal flushes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// As a server runs: an eviction thread, a checkpoint thread and the journal's flusher,
    /// which writes the group-commit buffer every `commit_interval` (and sooner when it is
    /// large or someone syncs). How that work interleaves with the clients depends on the
    /// host's CPU, so the files' write trace does too.
    #[default]
    Background,
    /// No engine threads and no timers (docs/engine.md, "The inline schedule"): the calling
    /// thread evicts down to the target and takes a due checkpoint at the end of each write or
    /// read, and the journal is written when its buffer reaches a size or someone syncs. The
    /// trace clock counts bytes written instead of nanoseconds. With one client thread, the
    /// write trace is then a function of the calls alone. The lab's engine runs use it; the
    /// server never does (not a configuration option). Refuses a timed checkpoint interval.
    Inline,
}

/// WiredTiger's upper bound on eviction threads.
pub const MAX_EVICTION_THREADS: usize = 20;

/// An eviction target and trigger (total or dirty), percent of the cache: both in 1..=100 and
/// the target not above the trigger.
pub fn check_eviction_pct(target: u8, trigger: u8) -> std::result::Result<(), String> {
    if target == 0 || target > trigger || trigger > 100 {
        return Err(format!(
            "eviction thresholds must be percentages with 1 <= target <= trigger <= 100, not {target}/{trigger}"
        ));
    }
    Ok(())
}

/// Half the cores, at least 1 and at most MongoDB's 4: eviction shares the cores with the
/// application threads it serves.
pub fn default_eviction_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).clamp(1, 4)
}

/// Engine-wide settings.
#[derive(Clone)]
pub struct EngineConfig {
    pub db_path: PathBuf,
    /// Cache budget in bytes.
    pub cache_size: u64,
    /// Eviction thresholds in percent of the cache (WiredTiger's defaults 80/95/5/20; flash
    /// mode's 80/95/50/80).
    pub eviction_target: u8,
    pub eviction_trigger: u8,
    pub eviction_dirty_target: u8,
    pub eviction_dirty_trigger: u8,
    /// Eviction threads under the background schedule (WiredTiger's `eviction=(threads_max)`).
    /// They share one set of candidate queues. Default: half the cores, from 1 to 4 (MongoDB
    /// runs 4; on 2 cores 4 cost a sixth of engine-bench's throughput against 1, docs/engine.md).
    pub eviction_threads: usize,
    /// `None` disables the journal: then only checkpointed data survives a crash.
    pub journal: Option<JournalConfig>,
    /// Time between the end of one checkpoint and the start of the next (MongoDB `syncPeriodSecs`).
    /// `None`: checkpoints only on demand.
    pub checkpoint_interval: Option<Duration>,
    /// Also checkpoint after this many journal bytes (MongoDB 3.x: 2 GB).
    pub checkpoint_log_size: Option<u64>,
    /// Also checkpoint once this many bytes have been written to the engine's files (tables and
    /// journal) since the last checkpoint began. Not a MongoDB setting: the lab uses it so that
    /// one checkpoint interval writes a fixed share of the device whatever the machine's speed.
    pub checkpoint_written_bytes: Option<u64>,
    /// Receives every I/O event; `None` costs nothing.
    pub observer: Option<Arc<dyn Observer>>,
    /// Stream placement, Linux hints and TRIM (`storage.flash`).
    pub flash: crate::io::FlashConfig,
    /// The file backend every I/O goes through (`None`: the operating system's files). Tests
    /// plug in `io::FaultyFiles` here.
    pub backend: Option<Arc<dyn crate::io::Backend>>,
    /// Files opened with `O_DIRECT` (none by default, as in MongoDB).
    pub direct_io: crate::io::DirectIo,
    /// Background threads (the server) or everything in the calling thread (the lab).
    pub schedule: Schedule,
}

/// The defaults every engine and table default takes (flash mode).
fn flash_defaults() -> FlashDefaults {
    flash_mode_defaults(FlashMode::Flash)
}

impl EngineConfig {
    /// Flash mode's engine ([`flash_mode_defaults`]).
    pub fn new(db_path: impl Into<PathBuf>) -> Self {
        Self::with_mode(db_path, FlashMode::Flash)
    }

    /// The engine `mode` sets up; everything else MongoDB's defaults.
    pub fn with_mode(db_path: impl Into<PathBuf>, mode: FlashMode) -> Self {
        let d = flash_mode_defaults(mode);
        let db_path = db_path.into();
        EngineConfig {
            journal: Some(JournalConfig {
                dir: db_path.join("journal"),
                ..JournalConfig::default()
            }),
            db_path,
            cache_size: default_cache_size(),
            eviction_target: d.eviction_target,
            eviction_trigger: d.eviction_trigger,
            eviction_dirty_target: d.eviction_dirty_target,
            eviction_dirty_trigger: d.eviction_dirty_trigger,
            eviction_threads: default_eviction_threads(),
            checkpoint_interval: Some(Duration::from_secs(60)),
            checkpoint_log_size: None,
            checkpoint_written_bytes: None,
            observer: None,
            flash: d.flash_config(),
            backend: None,
            direct_io: crate::io::DirectIo::NONE,
            schedule: Schedule::Background,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.cache_size < 64 * 1024 {
            return Err(Error::Config(format!(
                "cache size {} bytes is too small (minimum 64 KiB)",
                self.cache_size
            )));
        }
        for (target, trigger) in [
            (self.eviction_target, self.eviction_trigger),
            (self.eviction_dirty_target, self.eviction_dirty_trigger),
        ] {
            check_eviction_pct(target, trigger).map_err(Error::Config)?;
        }
        if !(1..=MAX_EVICTION_THREADS).contains(&self.eviction_threads) {
            return Err(Error::Config(format!(
                "eviction threads must be 1 to {MAX_EVICTION_THREADS} (WiredTiger's range), not {}",
                self.eviction_threads
            )));
        }
        // Checked here, not only when the journal opens: by then the dbPath and its lock file
        // exist and the old journal has been replayed.
        if let Some(j) = &self.journal {
            j.validate()?;
        }
        placement::policy::make_policy(self.flash.placement.as_str(), &self.flash.placement_config)
            .map_err(|e| Error::Config(format!("storage.flash.placement: {e}")))?;
        if self.schedule == Schedule::Inline && self.checkpoint_interval.is_some() {
            return Err(Error::Config(
                "schedule=inline: a timed checkpoint_interval depends on the host's speed; \
                 use checkpoint_written_bytes or checkpoint_log_size"
                    .into(),
            ));
        }
        if self.checkpoint_written_bytes == Some(0) || self.checkpoint_log_size == Some(0) {
            return Err(Error::Config(
                "checkpoint byte triggers must be at least 1 byte".into(),
            ));
        }
        if self.direct_io.log && self.journal.is_none() {
            return Err(Error::Config(
                "direct_io=log: set, but the journal is disabled".into(),
            ));
        }
        if self.flash.trim_batch == Some(0) {
            return Err(Error::Config(
                "storage.flash.trim.batch must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// MongoDB's default: max(50% of (RAM − 1 GB), 256 MB).
pub fn default_cache_size() -> u64 {
    let ram = physical_memory().unwrap_or(1 << 30);
    let half = ram.saturating_sub(1 << 30) / 2;
    half.max(256 << 20)
}

fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (pages > 0 && size > 0).then(|| pages as u64 * size as u64)
}

// Flash mode's defaults live with the configuration they default (docs/engine.md, "Flash
// mode"); `settings` parses the keys that override them.

/// The online placement policy flash mode ships. One constant: the policy is switched here
/// and nowhere else (`storage.flash.placement` still names any online policy).
pub const SHIPPED_POLICY: &str = "filelog";

/// [`SHIPPED_POLICY`] as a policy name.
pub fn shipped_policy() -> PolicyName {
    let name: PolicyName = SHIPPED_POLICY
        .parse()
        .expect("SHIPPED_POLICY names a known policy");
    assert!(name.is_online(), "flash mode ships an online policy");
    assert_ne!(name, PolicyName::NONE, "flash mode never places on `none`");
    name
}

impl Default for FlashConfig {
    /// Flash mode's ([`flash_mode_defaults`]).
    fn default() -> Self {
        flash_mode_defaults(FlashMode::Flash).flash_config()
    }
}

impl FlashConfig {
    /// WiredTiger's behaviour: no placement, no hints, no TRIM (`storage.flash.mode: off`).
    pub fn off() -> Self {
        flash_mode_defaults(FlashMode::Off).flash_config()
    }
}

/// What a mode sets on the disk engine: every setting of the co-design, in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashDefaults {
    pub mode: FlashMode,
    /// New tables' block allocation (collections and indexes).
    pub allocation: AllocPolicy,
    pub eviction_target: u8,
    pub eviction_trigger: u8,
    pub eviction_dirty_target: u8,
    pub eviction_dirty_trigger: u8,
    pub placement: PolicyName,
    pub hints: Hints,
    pub trim: bool,
}

/// How many freed extents a batch of TRIM releases (`storage.flash.trim.batch`): seed 003's
/// k = 20 000.
pub const DEFAULT_TRIM_BATCH: usize = 20_000;

/// The defaults of `mode`, from which `flashdoc serve`, [`EngineConfig::new`],
/// [`TableConfig::collection`]/[`TableConfig::index`] and `engine-bench` all take theirs.
///
/// Flash mode (docs/engine.md, "Flash mode"): the sweep allocation and a 50/80 % dirty budget
/// (the engine half of the co-design), [`SHIPPED_POLICY`], the hint path detected on the
/// database's file system, and **TRIM off**: with safe TRIM (k = 20 000) the lab's reference
/// run (docs/placement.md, "Safe TRIM") shows the commands taking 82–91 % of the device's
/// time under the non-queued 1 ms-per-command estimate (docs/trim-cost.md), and flashdoc's
/// modeled throughput 0.93–1.07× `dsm`'s, while with TRIM off the sweep already overwrites
/// dead blocks in the order they were written. `off` is WiredTiger's: best fit, 80/95 and
/// 5/20 eviction, placement `none`, no TRIM, no hints.
pub fn flash_mode_defaults(mode: FlashMode) -> FlashDefaults {
    match mode {
        FlashMode::Flash => FlashDefaults {
            mode,
            allocation: AllocPolicy::Sweep,
            eviction_target: 80,
            eviction_trigger: 95,
            eviction_dirty_target: 50,
            eviction_dirty_trigger: 80,
            placement: shipped_policy(),
            hints: Hints::Auto,
            trim: false,
        },
        FlashMode::Off => FlashDefaults {
            mode,
            allocation: AllocPolicy::Best,
            eviction_target: 80,
            eviction_trigger: 95,
            eviction_dirty_target: 5,
            eviction_dirty_trigger: 20,
            placement: PolicyName::NONE,
            hints: Hints::None,
            trim: false,
        },
    }
}

impl FlashDefaults {
    /// The engine's flash configuration of this mode.
    pub fn flash_config(&self) -> FlashConfig {
        FlashConfig {
            mode: self.mode,
            placement: self.placement,
            placement_config: PlacementConfig::default(),
            trim_batch: self.trim.then_some(DEFAULT_TRIM_BATCH),
            hints: self.hints,
        }
    }

    /// Sets everything the mode decides on an engine configuration and the table templates.
    pub fn apply(
        &self,
        e: &mut EngineConfig,
        collection: &mut TableConfig,
        index: &mut TableConfig,
    ) {
        e.eviction_target = self.eviction_target;
        e.eviction_trigger = self.eviction_trigger;
        e.eviction_dirty_target = self.eviction_dirty_target;
        e.eviction_dirty_trigger = self.eviction_dirty_trigger;
        e.flash = self.flash_config();
        collection.allocation = self.allocation;
        index.allocation = self.allocation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sizes_follow_wiredtiger() {
        let c = TableConfig::collection();
        assert_eq!(c.split_size(32 * 1024), 28 * 1024);
        // 16 KB rounds to 16 KB, so the unrounded 90% is used.
        assert_eq!(c.split_size(16 * 1024), 14745);
        assert_eq!(c.split_size(4096), 3686);
    }

    #[test]
    fn parse_names() {
        assert_eq!("ZSTD".parse::<Compressor>().unwrap(), Compressor::Zstd);
        assert!("lz5".parse::<Compressor>().is_err());
        assert_eq!("first".parse::<AllocPolicy>().unwrap(), AllocPolicy::First);
        assert_eq!(
            "inMemory".parse::<EngineKind>().unwrap(),
            EngineKind::InMemory
        );
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalCompressor {
    None,
    Snappy,
    Zstd,
}

impl FromStr for JournalCompressor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(JournalCompressor::None),
            "snappy" => Ok(JournalCompressor::Snappy),
            "zstd" => Ok(JournalCompressor::Zstd),
            _ => Err(Error::Config(format!(
                "unknown journal compressor {s:?} (expected none, snappy or zstd)"
            ))),
        }
    }
}

impl fmt::Display for JournalCompressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JournalCompressor::None => "none",
            JournalCompressor::Snappy => "snappy",
            JournalCompressor::Zstd => "zstd",
        })
    }
}

#[derive(Clone, Debug)]
pub struct JournalConfig {
    /// The journal directory (dbPath/journal); created if missing.
    pub dir: PathBuf,
    /// Size of a journal file; 64 KiB to 2 GiB.
    pub file_max: u64,
    /// Group-commit sync period (MongoDB's commitIntervalMs). Under `Schedule::Inline` there is
    /// no timer: the journal is written by size and on sync only.
    pub commit_interval: Duration,
    pub compressor: JournalCompressor,
    /// Allocate new files to `file_max` before use, so that running out of space shows up when a
    /// file is created rather than in the middle of a write, and appends do not change the size.
    pub preallocate: bool,
    /// Pad every flush to a 4 KiB block and give each file's header a block of its own, the
    /// layout `direct_io=log` needs, also without `O_DIRECT`: then no journal page is written
    /// twice (a buffered flush that ends inside a block has that block written again by the
    /// next flush). The lab sets it, because the seeds ran WiredTiger with direct I/O (seed
    /// 000 §5.1), whose log pads its writes the same way. Replay reads either layout.
    pub block_aligned: bool,
}

pub const MIN_FILE_MAX: u64 = 64 << 10;
pub const MAX_FILE_MAX: u64 = 2 << 30;

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            dir: PathBuf::from("journal"),
            file_max: 100 << 20,
            commit_interval: Duration::from_millis(100),
            compressor: JournalCompressor::Snappy,
            preallocate: true,
            block_aligned: false,
        }
    }
}

impl JournalConfig {
    /// Checks the settings (also done by `EngineConfig::validate`, before anything is created).
    pub fn validate(&self) -> Result<()> {
        if !(MIN_FILE_MAX..=MAX_FILE_MAX).contains(&self.file_max) {
            return Err(Error::Config(format!(
                "journal file_max {} is out of range ({MIN_FILE_MAX} to {MAX_FILE_MAX} bytes)",
                self.file_max
            )));
        }
        if self.commit_interval.is_zero() {
            return Err(Error::Config(
                "journal commit_interval must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}
