//! The configuration file's engine sections, as mongod.conf names them: `storage.wiredTiger`
//! (cache, journal compressor, table templates) and flashdoc's `storage.flash` (placement,
//! streams, DSM parameters, TRIM, Linux hints, an event trace). These are the serde types; the
//! document layer parses `storage` around them and the server composes the whole file.
//!
//! Strict: an unknown key is an error naming it, and an option the engine cannot honour is
//! refused, never accepted and ignored.
//!
//! ```yaml
//! wiredTiger:
//!   engineConfig: {cacheSizeGB: 1, journalCompressor: snappy, directIO: [data, log],
//!                  evictionDirtyTarget: 50, evictionDirtyTrigger: 80}   # percent of the cache
//!   collectionConfig: {blockCompressor: snappy, leafPageMax: 32KB, internalPageMax: 4KB,
//!                      blockAllocation: sweep, sweepReservePct: 50}   # best | first | append | sweep
//!   indexConfig: {prefixCompression: true, leafPageMax: 16KB, internalPageMax: 16KB}
//! flash:
//!   placement: dsm        # any online policy of placement::policy::POLICY_NAMES
//!   streams: 8
//!   dsm: {groups: 3, alpha: 3, threshold1: 5, threshold2: 1}   # thresholds in percent
//!   trim: {enabled: true, batch: 20000, when: free}
//!   hints: none           # or linux
//!   trace: /tmp/events.trace
//! ```

pub use crate::config::{
    flash_mode_defaults, shipped_policy, FlashDefaults, DEFAULT_TRIM_BATCH, SHIPPED_POLICY,
};
use crate::config::{
    AllocPolicy, Compressor, EngineConfig, EngineKind, TableConfig, MAX_SWEEP_RESERVE_PCT,
};
pub use crate::flash_mode::FlashMode;
pub use crate::io::hint_path::{HintPath, Hints};
use crate::io::FlashConfig;
use crate::journal::JournalCompressor;
use placement::policy::{DsmConfig, PlacementConfig, PolicyName};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

/// `storage.wiredTiger`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WiredTigerSettings {
    #[serde(default)]
    pub engine_config: EngineSettings,
    #[serde(default)]
    pub collection_config: TableSettings,
    #[serde(default)]
    pub index_config: TableSettings,
}

/// `storage.wiredTiger.engineConfig`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EngineSettings {
    #[serde(rename = "cacheSizeGB", skip_serializing_if = "Option::is_none")]
    pub cache_size_gb: Option<f64>,
    #[serde(
        default,
        deserialize_with = "from_str_opt",
        serialize_with = "display_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub journal_compressor: Option<JournalCompressor>,
    /// Only `false`: every table file lives in dbPath.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directory_for_indexes: Option<bool>,
    /// Files opened with `O_DIRECT`: `[data]`, `[log]` or `[data, log]` (WiredTiger's
    /// `direct_io`, which mongod can only pass through `configString`).
    #[serde(rename = "directIO", skip_serializing_if = "Option::is_none")]
    pub direct_io: Option<Vec<String>>,
    /// Eviction's dirty target and trigger, percent of the cache (WiredTiger's
    /// `eviction_dirty_target`/`eviction_dirty_trigger`, 5 and 20 by default; mongod passes them
    /// only through `configString`). flashdoc's co-design on flash runs 50/80 with
    /// `blockAllocation: sweep` (docs/placement.md, "The dirty budget").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_dirty_target: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_dirty_trigger: Option<u8>,
}

/// `storage.wiredTiger.collectionConfig` / `indexConfig`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TableSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_compressor: Option<Compressor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_compression: Option<bool>,
    #[serde(
        default,
        deserialize_with = "size_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub leaf_page_max: Option<u64>,
    #[serde(
        default,
        deserialize_with = "size_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub internal_page_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_allocation: Option<AllocPolicy>,
    /// With `blockAllocation: sweep`: percent of the file kept free before the sweep wraps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_reserve_pct: Option<u8>,
}

/// `storage.flash`. Every key but `mode` is optional: a key given overrides what the mode
/// sets, a key left out takes the mode's value ([`flash_mode_defaults`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct FlashSettings {
    pub mode: FlashMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<PolicyName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u8>,
    pub dsm: DsmSettings,
    pub trim: TrimSettings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints: Option<Hints>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
}

impl Default for FlashSettings {
    fn default() -> Self {
        let d = DsmConfig::default();
        FlashSettings {
            mode: FlashMode::Flash,
            placement: None,
            streams: None,
            dsm: DsmSettings {
                groups: d.groups,
                alpha: d.alpha,
                threshold1: d.threshold1,
                threshold2: d.threshold2,
            },
            trim: TrimSettings::default(),
            hints: None,
            trace: None,
        }
    }
}

/// `storage.flash.dsm`: seed 000's K, α and Fig. 9's thresholds (percent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DsmSettings {
    pub groups: u8,
    pub alpha: u32,
    pub threshold1: f64,
    pub threshold2: f64,
}

impl Default for DsmSettings {
    fn default() -> Self {
        FlashSettings::default().dsm
    }
}

/// `storage.flash.trim`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrimSettings {
    /// Left out: the mode's (off in both modes, see [`flash_mode_defaults`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    pub batch: usize,
    /// Only `free` on a real database: blocks are trimmed once no durable checkpoint needs them.
    pub when: TrimWhen,
}

impl Default for TrimSettings {
    fn default() -> Self {
        TrimSettings {
            enabled: None,
            batch: DEFAULT_TRIM_BATCH,
            when: TrimWhen::Free,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrimWhen {
    Free,
}

/// One effective setting as an engine reports it: its value, or `n/a` when the engine has no
/// such setting (the in-memory engine has no files to allocate in, place or trim). A setting an
/// engine does not have is not applied and not refused.
#[derive(Clone, Debug, PartialEq)]
pub enum Effective<T> {
    Value(T),
    NotApplicable,
}

impl<T: Serialize> Serialize for Effective<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Effective::Value(v) => v.serialize(s),
            Effective::NotApplicable => s.serialize_str("n/a"),
        }
    }
}

/// The effective flash settings of a running database: `serverStatus().flash`, the startup
/// log and engine-bench's JSON. Keys as serverStatus names them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlashReport {
    pub mode: &'static str,
    pub allocation: Effective<String>,
    pub dirty_target: Effective<u8>,
    pub dirty_trigger: Effective<u8>,
    pub placement: Effective<&'static str>,
    /// The hint path actually used: `write-streams`, `rw-hint` or `none`.
    pub hints: Effective<&'static str>,
    /// Whether the hints reach the device's data placement (FDP / streams).
    pub reaches_device: bool,
    pub streams: Effective<u8>,
    pub trim: Effective<bool>,
}

impl FlashReport {
    /// The report of an engine of `kind` opened with `e`, new collections made from
    /// `collection`, writing through `hint_path` (what the engine detected when it opened).
    pub fn new(
        kind: EngineKind,
        e: &EngineConfig,
        collection: &TableConfig,
        hint_path: HintPath,
    ) -> FlashReport {
        let mode = e.flash.mode.as_str();
        if kind == EngineKind::InMemory {
            use Effective::NotApplicable as NA;
            return FlashReport {
                mode,
                allocation: NA,
                dirty_target: NA,
                dirty_trigger: NA,
                placement: NA,
                hints: NA,
                reaches_device: false,
                streams: NA,
                trim: NA,
            };
        }
        use Effective::Value as V;
        if kind == EngineKind::Mmapv1 {
            // Records are placed by its free lists and extents, and pages are written back
            // every syncPeriodSecs: no allocation policy, no dirty budget.
            use Effective::NotApplicable as NA;
            return FlashReport {
                mode,
                allocation: NA,
                dirty_target: NA,
                dirty_trigger: NA,
                placement: V(e.flash.placement.as_str()),
                hints: V(hint_path.as_str()),
                reaches_device: hint_path.reaches_device(),
                streams: V(e.flash.placement_config.streams),
                trim: V(e.flash.trim_batch.is_some()),
            };
        }
        FlashReport {
            mode,
            allocation: V(collection.allocation.name().to_string()),
            dirty_target: V(e.eviction_dirty_target),
            dirty_trigger: V(e.eviction_dirty_trigger),
            placement: V(e.flash.placement.as_str()),
            hints: V(hint_path.as_str()),
            reaches_device: hint_path.reaches_device(),
            streams: V(e.flash.placement_config.streams),
            trim: V(e.flash.trim_batch.is_some()),
        }
    }

    /// One line for the startup log.
    pub fn log_line(&self) -> String {
        format!(
            "storage.flash.mode: {}; effective {}",
            self.mode,
            serde_json::to_string(self).expect("a report serializes")
        )
    }
}

fn cfg_err(key: &str, msg: impl std::fmt::Display) -> crate::Error {
    crate::Error::Config(format!("{key}: {msg}"))
}

impl WiredTigerSettings {
    /// Applies the engine keys to the engine configuration and the table templates.
    pub fn apply(
        &self,
        engine: &mut EngineConfig,
        collection: &mut TableConfig,
        index: &mut TableConfig,
    ) -> crate::Result<()> {
        self.engine_config
            .apply(engine, "storage.wiredTiger.engineConfig")?;
        self.collection_config
            .apply(collection, "storage.wiredTiger.collectionConfig")?;
        self.index_config
            .apply(index, "storage.wiredTiger.indexConfig")?;
        Ok(())
    }
}

impl EngineSettings {
    pub fn apply(&self, e: &mut EngineConfig, key: &str) -> crate::Result<()> {
        if let Some(gb) = self.cache_size_gb {
            if !(gb > 0.0 && gb.is_finite()) {
                return Err(cfg_err(&format!("{key}.cacheSizeGB"), "must be positive"));
            }
            e.cache_size = (gb * (1u64 << 30) as f64) as u64;
        }
        if let (Some(c), Some(j)) = (self.journal_compressor, e.journal.as_mut()) {
            j.compressor = c;
        }
        if self.directory_for_indexes == Some(true) {
            return Err(cfg_err(
                &format!("{key}.directoryForIndexes"),
                "not supported: every table file lives in dbPath",
            ));
        }
        if let Some(list) = &self.direct_io {
            e.direct_io = list.join(",").parse().map_err(|err| match err {
                crate::Error::Config(why) => cfg_err(&format!("{key}.directIO"), why),
                other => other,
            })?;
        }
        if let Some(pct) = self.eviction_dirty_target {
            e.eviction_dirty_target = pct;
        }
        if let Some(pct) = self.eviction_dirty_trigger {
            e.eviction_dirty_trigger = pct;
        }
        crate::config::check_eviction_pct(e.eviction_dirty_target, e.eviction_dirty_trigger)
            .map_err(|why| {
                cfg_err(
                    &format!("{key}.evictionDirtyTarget/evictionDirtyTrigger"),
                    why,
                )
            })
    }
}

impl TableSettings {
    pub fn apply(&self, t: &mut TableConfig, key: &str) -> crate::Result<()> {
        if let Some(c) = self.block_compressor {
            t.compressor = c;
        }
        if let Some(p) = self.prefix_compression {
            t.prefix_compression = p;
        }
        if let Some(v) = self.leaf_page_max {
            t.leaf_page_max = u32::try_from(v)
                .map_err(|_| cfg_err(&format!("{key}.leafPageMax"), "too large"))?;
            t.leaf_value_max = t.leaf_page_max;
        }
        if let Some(v) = self.internal_page_max {
            t.internal_page_max = u32::try_from(v)
                .map_err(|_| cfg_err(&format!("{key}.internalPageMax"), "too large"))?;
        }
        if let Some(a) = self.block_allocation {
            t.allocation = a;
        }
        if let Some(pct) = self.sweep_reserve_pct {
            let key = format!("{key}.sweepReservePct");
            if t.allocation != AllocPolicy::Sweep {
                return Err(cfg_err(&key, "applies only with blockAllocation: sweep"));
            }
            if pct > MAX_SWEEP_RESERVE_PCT {
                return Err(cfg_err(
                    &key,
                    format!("must be 0–{MAX_SWEEP_RESERVE_PCT}, not {pct}"),
                ));
            }
            t.sweep_reserve_pct = pct;
        }
        t.validate().map_err(|e| cfg_err(key, e))
    }
}

impl FlashSettings {
    /// What the mode sets before any explicit key (storage.flash.mode's defaults).
    pub fn defaults(&self) -> FlashDefaults {
        flash_mode_defaults(self.mode)
    }

    /// The running engine's flash configuration: the mode's, with every key given applied over
    /// it.
    pub fn flash_config(&self) -> crate::Result<FlashConfig> {
        let defaults = self.defaults();
        let placement = self.placement.unwrap_or(defaults.placement);
        if !placement.is_online() {
            return Err(cfg_err(
                "storage.flash.placement",
                format!(
                    "'{placement}' is offline only (it needs the whole trace); it runs in the lab"
                ),
            ));
        }
        let placement_config = PlacementConfig {
            streams: self.streams.unwrap_or(PlacementConfig::default().streams),
            dsm: DsmConfig {
                groups: self.dsm.groups,
                alpha: self.dsm.alpha,
                threshold1: self.dsm.threshold1,
                threshold2: self.dsm.threshold2,
                ..Default::default()
            },
            ..Default::default()
        };
        // The placement crate owns the ranges (streams 2..=16, K ≥ 1, α ≥ 2).
        placement_config
            .validate()
            .map_err(|e| cfg_err("storage.flash", e))?;
        let trim = self.trim.enabled.unwrap_or(defaults.trim);
        Ok(FlashConfig {
            mode: self.mode,
            placement,
            placement_config,
            trim_batch: trim.then_some(self.trim.batch),
            hints: self.hints.unwrap_or(defaults.hints),
        })
    }

    /// Applies the section to the engine configuration; a `trace` file is created here. The
    /// mode's engine and table defaults are [`FlashDefaults::apply`]'s, applied first by the
    /// caller (before `storage.wiredTiger`'s keys, which override them).
    pub fn apply(&self, e: &mut EngineConfig) -> crate::Result<()> {
        e.flash = self.flash_config()?;
        if let Some(t) = &self.trace {
            let obs = placement::TraceObserver::create(t).map_err(|err| {
                cfg_err(
                    "storage.flash.trace",
                    format!("cannot create {}: {err}", t.display()),
                )
            })?;
            e.observer = Some(Arc::new(obs));
        }
        Ok(())
    }
}

fn from_str_opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

fn display_opt<S: serde::Serializer, T: std::fmt::Display>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

/// A size: a number of bytes, or a string such as `32KB`, `4096`, `1MB`.
fn size_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        N(u64),
        S(String),
    }
    match Size::deserialize(d)? {
        Size::N(n) => Ok(Some(n)),
        Size::S(s) => parse_size(&s).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!("expected a size like 32KB, got {s:?}"))
        }),
    }
}

/// Parses `32KB`, `4096`, `1 MB`, `2G`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" => 1 << 10,
        "M" | "MB" => 1 << 20,
        "G" | "GB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flash_section_reaches_the_engine() {
        let f: FlashSettings = serde_yaml::from_str(
            "placement: dsm\nstreams: 4\ndsm: {groups: 2, alpha: 4}\ntrim: {enabled: true, batch: 500}\nhints: linux\n",
        )
        .unwrap();
        let c = f.flash_config().unwrap();
        assert_eq!(c.placement.as_str(), "dsm");
        assert_eq!(c.placement_config.streams, 4);
        assert_eq!(c.placement_config.dsm.groups, 2);
        assert_eq!(c.placement_config.dsm.alpha, 4);
        assert_eq!(c.trim_batch, Some(500));
        assert_eq!(c.hints, Hints::Linux);
        let e = serde_yaml::from_str::<FlashSettings>("trim: {when: replace}\n").unwrap_err();
        assert!(e.to_string().contains("replace"), "{e}");
        let e = serde_yaml::from_str::<FlashSettings>("placement: magic\n").unwrap_err();
        assert!(e.to_string().contains("unknown placement policy"), "{e}");
        for offline in ["oracle", "oracle-death"] {
            let f: FlashSettings =
                serde_yaml::from_str(&format!("placement: {offline}\n")).unwrap();
            assert!(f.flash_config().is_err(), "{offline}");
        }
        let f: FlashSettings = serde_yaml::from_str("placement: filelog\n").unwrap();
        assert_eq!(f.flash_config().unwrap().placement.as_str(), "filelog");
        // The stream budget is the placement crate's 2..=16 (a one-stream "device" is refused
        // here, not later under another key).
        for streams in [1, 17] {
            let f: FlashSettings =
                serde_yaml::from_str(&format!("placement: dsm\nstreams: {streams}\n")).unwrap();
            let e = f.flash_config().unwrap_err().to_string();
            assert!(e.contains("storage.flash") && e.contains("2..=16"), "{e}");
        }
    }

    #[test]
    fn wired_tiger_keys_apply_and_unknown_keys_are_errors() {
        let w: WiredTigerSettings = serde_yaml::from_str(
            "engineConfig: {cacheSizeGB: 0.5, journalCompressor: zstd}\ncollectionConfig: {blockCompressor: zlib, leafPageMax: 4KB}\nindexConfig: {prefixCompression: false}\n",
        )
        .unwrap();
        let mut e = EngineConfig::new("/tmp/x");
        let (mut c, mut i) = (TableConfig::collection(), TableConfig::index());
        w.apply(&mut e, &mut c, &mut i).unwrap();
        assert_eq!(e.cache_size, 512 << 20);
        assert_eq!(
            e.journal.as_ref().unwrap().compressor,
            JournalCompressor::Zstd
        );
        assert_eq!(c.compressor, Compressor::Zlib);
        assert_eq!(c.leaf_page_max, 4096);
        assert!(!i.prefix_compression);
        let err = serde_yaml::from_str::<WiredTigerSettings>("engineConfig: {cacheSizeGB: lots}\n")
            .unwrap_err();
        assert!(err.to_string().contains("cacheSizeGB"), "{err}");
        let err =
            serde_yaml::from_str::<WiredTigerSettings>("engineConfig: {bogus: 1}\n").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        let w: WiredTigerSettings =
            serde_yaml::from_str("engineConfig: {directoryForIndexes: true}\n").unwrap();
        assert!(w.apply(&mut e, &mut c, &mut i).is_err());
    }

    #[test]
    fn the_dirty_budget_applies_and_a_bad_one_is_refused() {
        let apply = |yaml: &str| -> Result<(u8, u8), String> {
            let s: EngineSettings = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
            let mut e = EngineConfig::with_mode("/tmp/x", FlashMode::Off);
            s.apply(&mut e, "engineConfig").map_err(|e| e.to_string())?;
            Ok((e.eviction_dirty_target, e.eviction_dirty_trigger))
        };
        assert_eq!(
            apply("{}").unwrap(),
            (5, 20),
            "WiredTiger's defaults (mode off)"
        );
        assert_eq!(
            apply("{evictionDirtyTarget: 50, evictionDirtyTrigger: 80}").unwrap(),
            (50, 80)
        );
        assert_eq!(apply("{evictionDirtyTrigger: 40}").unwrap(), (5, 40));
        for bad in [
            "{evictionDirtyTarget: 30}",
            "{evictionDirtyTarget: 0}",
            "{evictionDirtyTarget: 50, evictionDirtyTrigger: 101}",
        ] {
            let err = apply(bad).unwrap_err();
            assert!(err.contains("evictionDirtyTarget"), "{bad}: {err}");
        }
        assert!(apply("{evictionDirtyTarget: 300}")
            .unwrap_err()
            .contains("300"));
    }

    #[test]
    fn block_allocation_and_the_sweep_reserve() {
        let apply = |yaml: &str| -> Result<crate::Allocation, String> {
            let t: TableSettings = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
            // WiredTiger's best fit (mode off): the reserve needs the sweep named.
            let mut c = TableConfig {
                allocation: AllocPolicy::Best,
                ..TableConfig::collection()
            };
            t.apply(&mut c, "collectionConfig")
                .map_err(|e| e.to_string())?;
            Ok(c.block_allocation())
        };
        let a = apply("{blockAllocation: sweep, sweepReservePct: 20}").unwrap();
        assert_eq!(a.policy, AllocPolicy::Sweep);
        assert_eq!(a.sweep_reserve_pct, 20);
        let a = apply("{blockAllocation: sweep}").unwrap();
        assert_eq!(
            a.sweep_reserve_pct,
            crate::config::DEFAULT_SWEEP_RESERVE_PCT
        );
        assert_eq!(
            apply("{blockAllocation: first}").unwrap().policy,
            AllocPolicy::First
        );
        let err = |yaml: &str| apply(yaml).unwrap_err();
        assert!(err("{blockAllocation: spiral}").contains("spiral"));
        assert!(err("{blockAllocation: sweep, sweepReservePct: 91}").contains("must be 0–90"));
        assert!(err("{blockAllocation: sweep, sweepReservePct: 256}").contains("256"));
        assert!(err("{sweepReservePct: 10}").contains("applies only with blockAllocation: sweep"));
    }

    #[test]
    fn flash_mode_is_the_default_and_off_is_wiredtigers() {
        let flash = flash_mode_defaults(FlashMode::Flash);
        assert_eq!(flash.allocation, AllocPolicy::Sweep);
        assert_eq!(
            (flash.eviction_dirty_target, flash.eviction_dirty_trigger),
            (50, 80)
        );
        assert_eq!(flash.placement.as_str(), SHIPPED_POLICY);
        assert_ne!(flash.placement, PolicyName::NONE);
        assert_eq!(flash.hints, Hints::Auto);
        assert!(!flash.trim);
        let off = flash_mode_defaults(FlashMode::Off);
        assert_eq!(off.allocation, AllocPolicy::Best);
        assert_eq!((off.eviction_target, off.eviction_trigger), (80, 95));
        assert_eq!(
            (off.eviction_dirty_target, off.eviction_dirty_trigger),
            (5, 20)
        );
        assert_eq!(off.placement, PolicyName::NONE);
        assert_eq!(off.hints, Hints::None);
        assert!(!off.trim);
        // The engine's and the tables' own defaults are flash mode's.
        let e = EngineConfig::new("/tmp/x");
        assert_eq!(
            (e.eviction_dirty_target, e.eviction_dirty_trigger),
            (50, 80)
        );
        assert_eq!(e.flash, flash.flash_config());
        assert_eq!(crate::io::FlashConfig::default(), flash.flash_config());
        assert_eq!(TableConfig::collection().allocation, AllocPolicy::Sweep);
        assert_eq!(TableConfig::index().allocation, AllocPolicy::Sweep);
        let f = FlashSettings::default().flash_config().unwrap();
        assert_eq!(f, flash.flash_config());
    }

    #[test]
    fn an_explicit_key_overrides_the_mode() {
        let cfg = |yaml: &str| -> crate::io::FlashConfig {
            serde_yaml::from_str::<FlashSettings>(yaml)
                .unwrap()
                .flash_config()
                .unwrap()
        };
        let off = cfg("mode: off\n");
        assert_eq!(off, crate::io::FlashConfig::off());
        let c = cfg("mode: off\nplacement: dsm\nhints: linux\ntrim: {enabled: true}\n");
        assert_eq!(c.mode, FlashMode::Off);
        assert_eq!(c.placement.as_str(), "dsm");
        assert_eq!(c.hints, Hints::Linux);
        assert_eq!(c.trim_batch, Some(20_000));
        let c = cfg("placement: none\nhints: none\n");
        assert_eq!(c.mode, FlashMode::Flash);
        assert_eq!(
            c.placement,
            PolicyName::NONE,
            "an explicit key wins over flash mode"
        );
        assert_eq!(c.hints, Hints::None);
        let c = cfg("streams: 4\n");
        assert_eq!(c.placement.as_str(), SHIPPED_POLICY);
        assert_eq!(c.placement_config.streams, 4);
        // The engine keys override the mode's too: the mode's first, then storage.wiredTiger.
        let mut e = EngineConfig::with_mode("/tmp/x", FlashMode::Flash);
        let (mut col, mut idx) = (TableConfig::collection(), TableConfig::index());
        flash_mode_defaults(FlashMode::Off).apply(&mut e, &mut col, &mut idx);
        let w: WiredTigerSettings = serde_yaml::from_str(
            "engineConfig: {evictionDirtyTarget: 10, evictionDirtyTrigger: 30}\nindexConfig: {blockAllocation: sweep}\n",
        )
        .unwrap();
        w.apply(&mut e, &mut col, &mut idx).unwrap();
        assert_eq!(
            (e.eviction_dirty_target, e.eviction_dirty_trigger),
            (10, 30)
        );
        assert_eq!(
            (col.allocation, idx.allocation),
            (AllocPolicy::Best, AllocPolicy::Sweep)
        );
    }

    #[test]
    fn a_bad_mode_or_hint_is_refused_naming_the_choices() {
        let e = serde_yaml::from_str::<FlashSettings>("mode: fast\n").unwrap_err();
        assert!(
            e.to_string().contains("flash") && e.to_string().contains("off"),
            "{e}"
        );
        let e = serde_yaml::from_str::<FlashSettings>("hints: fdp\n").unwrap_err();
        assert!(e.to_string().contains("auto"), "{e}");
        let e = "fast".parse::<FlashMode>().unwrap_err().to_string();
        assert!(
            e.contains("storage.flash.mode") && e.contains("expected flash or off"),
            "{e}"
        );
        assert_eq!("off".parse::<FlashMode>().unwrap(), FlashMode::Off);
    }

    #[test]
    fn the_report_says_what_runs_and_na_where_an_engine_has_no_such_setting() {
        let e = EngineConfig::new("/tmp/x");
        let r = FlashReport::new(
            EngineKind::Disk,
            &e,
            &TableConfig::collection(),
            HintPath::RwHint,
        );
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["mode"], "flash");
        assert_eq!(j["allocation"], "sweep");
        assert_eq!(
            (j["dirtyTarget"].as_u64(), j["dirtyTrigger"].as_u64()),
            (Some(50), Some(80))
        );
        assert_eq!(j["placement"], SHIPPED_POLICY);
        assert_eq!(j["hints"], "rw-hint");
        assert_eq!(j["reachesDevice"], false);
        assert_eq!(j["streams"], 8);
        assert_eq!(j["trim"], false);
        let r = FlashReport::new(
            EngineKind::InMemory,
            &e,
            &TableConfig::collection(),
            HintPath::None,
        );
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["mode"], "flash");
        for k in [
            "allocation",
            "dirtyTarget",
            "dirtyTrigger",
            "placement",
            "hints",
            "streams",
            "trim",
        ] {
            assert_eq!(j[k], "n/a", "{k}");
        }
        assert!(r.log_line().contains("storage.flash.mode: flash"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32KB"), Some(32768));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1 MB"), Some(1 << 20));
        assert_eq!(parse_size("x"), None);
    }
}
