//! The configuration file, in mongod.conf's shape (seed 001 Table 10.2), plus flashdoc's own
//! `storage.flash` section. Strict: an unknown key or a bad value is an error that names the
//! key, so a typo never silently falls back to a default.
//!
//! ```yaml
//! storage:
//!   dbPath: /var/lib/flashdoc
//!   engine: wiredTiger            # or inMemory
//!   directoryPerDB: false         # accepted; files stay in dbPath (see docs/server.md)
//!   syncPeriodSecs: 60            # checkpoint interval
//!   journal: {enabled: true, commitIntervalMs: 100}
//!   wiredTiger:                   # the engine options, as mongod names them
//!     engineConfig: {cacheSizeGB: 1, journalCompressor: snappy, directoryForIndexes: false}
//!     collectionConfig: {blockCompressor: snappy, leafPageMax: 32KB, internalPageMax: 4KB}
//!     indexConfig: {prefixCompression: true, leafPageMax: 16KB, internalPageMax: 16KB}
//!   flash:                        # flashdoc's placement and TRIM settings
//!     placement: dsm              # none | file | boundary | dsm | dsm-skip-primary | lifetime | filelog
//!     streams: 8
//!     dsm: {groups: 3, alpha: 3, threshold1: 5, threshold2: 1}   # thresholds in percent
//!     trim: {enabled: true, batch: 20000, when: free}
//!     hints: none                 # or linux
//!     trace: /tmp/events.trace
//! net: {bindIp: 127.0.0.1, port: 27017}
//! systemLog: {destination: file, path: /var/log/flashdoc.log, logAppend: true, verbosity: 0, quiet: false}
//! ```
//! The engine keys are also accepted directly under `storage` (cacheSizeGB, journalCompressor,
//! blockCompressor, prefixCompression).

use bson::{doc, Document};
use engine::{Compressor, EngineConfig, EngineKind, JournalCompressor, TableConfig};
use serde_yaml::Value;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

/// flashdoc's placement and TRIM options (`storage.flash`).
#[derive(Debug, Clone, PartialEq)]
pub struct FlashOptions {
    pub placement: String,
    pub streams: u8,
    pub dsm_groups: u8,
    pub dsm_alpha: u32,
    /// Percent (seed 000 Fig. 9's THRESHOLD1 / THRESHOLD2; docs/placement.md).
    pub dsm_threshold1: f64,
    pub dsm_threshold2: f64,
    pub trim_enabled: bool,
    pub trim_batch: usize,
    pub trim_when: String,
    pub hints: String,
    pub trace: Option<PathBuf>,
}

impl Default for FlashOptions {
    fn default() -> Self {
        FlashOptions {
            placement: "none".into(),
            streams: 8,
            dsm_groups: 3,
            dsm_alpha: 3,
            dsm_threshold1: 5.0,
            dsm_threshold2: 1.0,
            trim_enabled: false,
            trim_batch: 20_000,
            trim_when: "free".into(),
            hints: "none".into(),
            trace: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind_ip: String,
    pub port: u16,
    pub db_path: PathBuf,
    pub engine: EngineKind,
    pub directory_per_db: bool,
    pub journal_enabled: bool,
    pub commit_interval_ms: u64,
    pub journal_compressor: JournalCompressor,
    pub cache_size_bytes: Option<u64>,
    pub checkpoint_secs: u64,
    pub collection: TableConfig,
    pub index: TableConfig,
    pub flash: FlashOptions,
    pub log_path: Option<PathBuf>,
    pub log_append: bool,
    pub verbosity: u32,
    pub quiet: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind_ip: "127.0.0.1".into(),
            port: 27017,
            db_path: PathBuf::from("/data/db"),
            engine: EngineKind::Disk,
            directory_per_db: false,
            journal_enabled: true,
            commit_interval_ms: 100,
            journal_compressor: JournalCompressor::Snappy,
            cache_size_bytes: None,
            checkpoint_secs: 60,
            collection: TableConfig::collection(),
            index: TableConfig::index(),
            flash: FlashOptions::default(),
            log_path: None,
            log_append: false,
            verbosity: 0,
            quiet: false,
        }
    }
}

/// A YAML mapping being consumed key by key; whatever is left over is an unknown key.
struct Section<'a> {
    path: String,
    entries: Vec<(String, &'a Value)>,
}

impl<'a> Section<'a> {
    fn new(path: &str, v: &'a Value) -> Result<Section<'a>, ConfigError> {
        let map = v
            .as_mapping()
            .ok_or_else(|| ConfigError(format!("{}: expected a mapping of keys", display(path))))?;
        let mut entries = Vec::new();
        for (k, v) in map {
            let k = k
                .as_str()
                .ok_or_else(|| ConfigError(format!("{}: keys must be strings", display(path))))?;
            entries.push((k.to_string(), v));
        }
        Ok(Section {
            path: path.to_string(),
            entries,
        })
    }
    fn key(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.path)
        }
    }
    fn take(&mut self, k: &str) -> Option<&'a Value> {
        let i = self.entries.iter().position(|(n, _)| n == k)?;
        Some(self.entries.remove(i).1)
    }
    fn section(&mut self, k: &str) -> Result<Option<Section<'a>>, ConfigError> {
        let path = self.key(k);
        self.take(k).map(|v| Section::new(&path, v)).transpose()
    }
    fn bool(&mut self, k: &str) -> Result<Option<bool>, ConfigError> {
        let path = self.key(k);
        self.take(k)
            .map(|v| v.as_bool().ok_or_else(|| bad(&path, "true or false", v)))
            .transpose()
    }
    fn string(&mut self, k: &str) -> Result<Option<String>, ConfigError> {
        let path = self.key(k);
        self.take(k)
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err(bad(&path, "a string", v)),
            })
            .transpose()
    }
    fn f64(&mut self, k: &str) -> Result<Option<f64>, ConfigError> {
        let path = self.key(k);
        self.take(k)
            .map(|v| v.as_f64().ok_or_else(|| bad(&path, "a number", v)))
            .transpose()
    }
    fn u64(&mut self, k: &str) -> Result<Option<u64>, ConfigError> {
        let path = self.key(k);
        self.take(k)
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| bad(&path, "a non-negative integer", v))
            })
            .transpose()
    }
    /// A size such as `32KB`, `4096`, `1MB`.
    fn size(&mut self, k: &str) -> Result<Option<u64>, ConfigError> {
        let path = self.key(k);
        self.take(k)
            .map(|v| match v {
                Value::Number(n) => n.as_u64().ok_or_else(|| bad(&path, "a size", v)),
                Value::String(s) => parse_size(s).ok_or_else(|| bad(&path, "a size like 32KB", v)),
                _ => Err(bad(&path, "a size like 32KB", v)),
            })
            .transpose()
    }
    fn finish(self) -> Result<(), ConfigError> {
        match self.entries.first() {
            None => Ok(()),
            Some((k, _)) => Err(ConfigError(format!(
                "unknown configuration key {}",
                self.key(k)
            ))),
        }
    }
}

fn display(path: &str) -> &str {
    if path.is_empty() {
        "the configuration"
    } else {
        path
    }
}

fn bad(path: &str, want: &str, got: &Value) -> ConfigError {
    let shown = serde_yaml::to_string(got).unwrap_or_default();
    ConfigError(format!("{path}: expected {want}, got {}", shown.trim()))
}

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

impl ServerConfig {
    pub fn from_yaml(text: &str) -> Result<ServerConfig, ConfigError> {
        let root: Value = serde_yaml::from_str(text)
            .map_err(|e| ConfigError(format!("the configuration file is not valid YAML: {e}")))?;
        let mut cfg = ServerConfig::default();
        if root.is_null() {
            return Ok(cfg);
        }
        let mut top = Section::new("", &root)?;
        if let Some(mut net) = top.section("net")? {
            if let Some(ip) = net.string("bindIp")? {
                cfg.bind_ip = ip;
            }
            if let Some(p) = net.u64("port")? {
                cfg.port = u16::try_from(p)
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| ConfigError(format!("net.port: {p} is not a valid port")))?;
            }
            let _ = net.bool("ipv6")?;
            let _ = net.u64("maxIncomingConnections")?;
            net.finish()?;
        }
        if let Some(mut st) = top.section("storage")? {
            cfg.parse_storage(&mut st)?;
            st.finish()?;
        }
        if let Some(mut log) = top.section("systemLog")? {
            match log.string("destination")?.as_deref() {
                None | Some("file") | Some("syslog") => {}
                Some(other) => {
                    return Err(ConfigError(format!(
                        "systemLog.destination: expected file or syslog, got {other}"
                    )))
                }
            }
            cfg.log_path = log.string("path")?.map(PathBuf::from);
            cfg.log_append = log.bool("logAppend")?.unwrap_or(false);
            cfg.verbosity = log.u64("verbosity")?.unwrap_or(0) as u32;
            cfg.quiet = log.bool("quiet")?.unwrap_or(false);
            let _ = log.string("logRotate")?;
            let _ = log.string("timeStampFormat")?;
            log.finish()?;
        }
        if let Some(mut pm) = top.section("processManagement")? {
            if pm.bool("fork")? == Some(true) {
                return Err(ConfigError(
                    "processManagement.fork: flashdoc does not fork; run it under a supervisor"
                        .into(),
                ));
            }
            let _ = pm.string("pidFilePath")?;
            let _ = pm.string("timeZoneInfo")?;
            pm.finish()?;
        }
        top.finish()?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn parse_storage(&mut self, st: &mut Section) -> Result<(), ConfigError> {
        if let Some(p) = st.string("dbPath")? {
            self.db_path = PathBuf::from(p);
        }
        if let Some(e) = st.string("engine")? {
            self.engine = e.parse().map_err(|_| {
                ConfigError(format!(
                    "storage.engine: expected wiredTiger or inMemory, got {e}"
                ))
            })?;
        }
        self.directory_per_db = st.bool("directoryPerDB")?.unwrap_or(false);
        if let Some(s) = st.u64("syncPeriodSecs")? {
            self.checkpoint_secs = s;
        }
        if let Some(mut j) = st.section("journal")? {
            if let Some(e) = j.bool("enabled")? {
                self.journal_enabled = e;
            }
            if let Some(ms) = j.u64("commitIntervalMs")? {
                if !(1..=500).contains(&ms) {
                    return Err(ConfigError(format!(
                        "storage.journal.commitIntervalMs: {ms} is outside 1..500"
                    )));
                }
                self.commit_interval_ms = ms;
            }
            j.finish()?;
        }
        // The engine keys, directly under storage (flashdoc's short form).
        self.engine_keys(st, "storage")?;
        if let Some(mut wt) = st.section("wiredTiger")? {
            if let Some(mut ec) = wt.section("engineConfig")? {
                self.engine_keys(&mut ec, "storage.wiredTiger.engineConfig")?;
                let _ = ec.bool("directoryForIndexes")?;
                let _ = ec.u64("zstdCompressionLevel")?;
                ec.finish()?;
            }
            if let Some(mut cc) = wt.section("collectionConfig")? {
                Self::table_keys(&mut cc, &mut self.collection)?;
                cc.finish()?;
            }
            if let Some(mut ic) = wt.section("indexConfig")? {
                Self::table_keys(&mut ic, &mut self.index)?;
                ic.finish()?;
            }
            wt.finish()?;
        }
        if let Some(mut fl) = st.section("flash")? {
            let f = &mut self.flash;
            if let Some(p) = fl.string("placement")? {
                f.placement = p;
            }
            if let Some(s) = fl.u64("streams")? {
                f.streams = u8::try_from(s)
                    .ok()
                    .filter(|s| (1..=64).contains(s))
                    .ok_or_else(|| {
                        ConfigError(format!("storage.flash.streams: {s} is outside 1..64"))
                    })?;
            }
            if let Some(mut d) = fl.section("dsm")? {
                if let Some(g) = d.u64("groups")? {
                    f.dsm_groups = u8::try_from(g).map_err(|_| {
                        ConfigError(format!("storage.flash.dsm.groups: {g} is too large"))
                    })?;
                }
                if let Some(a) = d.u64("alpha")? {
                    f.dsm_alpha = u32::try_from(a).map_err(|_| {
                        ConfigError(format!("storage.flash.dsm.alpha: {a} is too large"))
                    })?;
                }
                if let Some(t) = d.f64("threshold1")? {
                    f.dsm_threshold1 = t;
                }
                if let Some(t) = d.f64("threshold2")? {
                    f.dsm_threshold2 = t;
                }
                d.finish()?;
            }
            if let Some(mut t) = fl.section("trim")? {
                if let Some(e) = t.bool("enabled")? {
                    f.trim_enabled = e;
                }
                if let Some(b) = t.u64("batch")? {
                    f.trim_batch = b as usize;
                }
                if let Some(w) = t.string("when")? {
                    if w != "free" {
                        return Err(ConfigError(format!(
                            "storage.flash.trim.when: only 'free' is allowed on a real database ('{w}' would trim blocks the last checkpoint still needs; it exists only in the simulator)"
                        )));
                    }
                    f.trim_when = w;
                }
                t.finish()?;
            }
            if let Some(h) = fl.string("hints")? {
                if h != "linux" && h != "none" {
                    return Err(ConfigError(format!(
                        "storage.flash.hints: expected linux or none, got {h}"
                    )));
                }
                f.hints = h;
            }
            f.trace = fl.string("trace")?.map(PathBuf::from);
            fl.finish()?;
        }
        Ok(())
    }

    fn engine_keys(&mut self, s: &mut Section, _path: &str) -> Result<(), ConfigError> {
        if let Some(gb) = s.f64("cacheSizeGB")? {
            if gb <= 0.0 {
                return Err(ConfigError(format!(
                    "{}: must be positive",
                    s.key("cacheSizeGB")
                )));
            }
            self.cache_size_bytes = Some((gb * (1u64 << 30) as f64) as u64);
        }
        if let Some(c) = s.string("journalCompressor")? {
            self.journal_compressor = c.parse().map_err(|_| {
                ConfigError(format!(
                    "{}: expected none, snappy or zstd, got {c}",
                    s.key("journalCompressor")
                ))
            })?;
        }
        if let Some(c) = s.string("blockCompressor")? {
            self.collection.compressor = parse_compressor(&s.key("blockCompressor"), &c)?;
        }
        if let Some(p) = s.bool("prefixCompression")? {
            self.index.prefix_compression = p;
        }
        Ok(())
    }

    fn table_keys(s: &mut Section, t: &mut TableConfig) -> Result<(), ConfigError> {
        if let Some(c) = s.string("blockCompressor")? {
            t.compressor = parse_compressor(&s.key("blockCompressor"), &c)?;
        }
        if let Some(p) = s.bool("prefixCompression")? {
            t.prefix_compression = p;
        }
        if let Some(v) = s.size("leafPageMax")? {
            t.leaf_page_max = u32::try_from(v)
                .map_err(|_| ConfigError(format!("{}: too large", s.key("leafPageMax"))))?;
            t.leaf_value_max = t.leaf_page_max;
        }
        if let Some(v) = s.size("internalPageMax")? {
            t.internal_page_max = u32::try_from(v)
                .map_err(|_| ConfigError(format!("{}: too large", s.key("internalPageMax"))))?;
        }
        if let Some(a) = s.string("blockAllocation")? {
            t.allocation = a.parse().map_err(|_| {
                ConfigError(format!(
                    "{}: expected best, first, append or sweep, got {a}",
                    s.key("blockAllocation")
                ))
            })?;
        }
        if let Some(v) = s.u64("sweepReservePct")? {
            t.sweep_reserve_pct = u8::try_from(v).unwrap_or(u8::MAX);
        }
        t.validate()
            .map_err(|e| ConfigError(format!("{}: {e}", s.path)))?;
        Ok(())
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(
            self.flash.placement.as_str(),
            "none" | "file" | "boundary" | "dsm" | "dsm-skip-primary" | "lifetime" | "filelog"
        ) {
            return Err(ConfigError(format!(
                "storage.flash.placement: unknown policy '{}' (none, file, boundary, dsm, dsm-skip-primary, lifetime, filelog)",
                self.flash.placement
            )));
        }
        Ok(())
    }

    /// The engine's flash settings (`storage.flash`).
    pub fn flash_config(&self) -> engine::FlashConfig {
        let f = &self.flash;
        engine::FlashConfig {
            placement: f.placement.clone(),
            placement_config: placement::policy::PlacementConfig {
                streams: f.streams,
                dsm: placement::policy::DsmConfig {
                    groups: f.dsm_groups,
                    alpha: f.dsm_alpha,
                    threshold1: f.dsm_threshold1,
                    threshold2: f.dsm_threshold2,
                    ..Default::default()
                },
                ..Default::default()
            },
            trim_batch: f.trim_enabled.then_some(f.trim_batch),
            linux_hints: f.hints == "linux",
        }
    }

    /// The engine configuration this file describes. A `storage.flash.trace` file is opened
    /// (created) here.
    pub fn engine_config(&self) -> Result<EngineConfig, ConfigError> {
        let mut e = EngineConfig::new(&self.db_path);
        e.flash = self.flash_config();
        if let Some(t) = &self.flash.trace {
            let obs = placement::TraceObserver::create(t).map_err(|err| {
                ConfigError(format!(
                    "storage.flash.trace: cannot create {}: {err}",
                    t.display()
                ))
            })?;
            e.observer = Some(std::sync::Arc::new(obs));
        }
        if let Some(c) = self.cache_size_bytes {
            e.cache_size = c;
        }
        if let Some(j) = e.journal.as_mut() {
            j.commit_interval = Duration::from_millis(self.commit_interval_ms);
            j.compressor = self.journal_compressor;
        }
        if !self.journal_enabled {
            e.journal = None;
        }
        e.checkpoint_interval =
            (self.checkpoint_secs > 0).then(|| Duration::from_secs(self.checkpoint_secs));
        e.validate().map_err(|err| ConfigError(err.to_string()))?;
        Ok(e)
    }

    /// The document layer's configuration: engine, its settings, table templates.
    pub fn docdb_config(&self) -> Result<docdb::DocDbConfig, ConfigError> {
        Ok(docdb::DocDbConfig {
            engine_kind: self.engine,
            engine: self.engine_config()?,
            collection_table: self.collection.clone(),
            index_table: self.index.clone(),
            directory_per_db: self.directory_per_db,
        })
    }

    /// The options as getCmdLineOpts reports them.
    pub fn as_document(&self) -> Document {
        doc! {
            "net": {"bindIp": self.bind_ip.clone(), "port": self.port as i32},
            "storage": {
                "dbPath": self.db_path.display().to_string(),
                "engine": match self.engine { EngineKind::Disk => "wiredTiger", EngineKind::InMemory => "inMemory" },
                "journal": {"enabled": self.journal_enabled, "commitIntervalMs": self.commit_interval_ms as i64},
                "syncPeriodSecs": self.checkpoint_secs as i64,
                "flash": {"placement": self.flash.placement.clone(), "streams": self.flash.streams as i32, "hints": self.flash.hints.clone(), "trim": {"enabled": self.flash.trim_enabled, "batch": self.flash.trim_batch as i64}},
            },
        }
    }
}

fn parse_compressor(key: &str, s: &str) -> Result<Compressor, ConfigError> {
    s.parse().map_err(|_| {
        ConfigError(format!(
            "{key}: expected none, snappy, zlib or zstd, got {s}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mongod_conf_parses() {
        let c = ServerConfig::from_yaml(
            "storage:\n  dbPath: /tmp/x\n  journal:\n    enabled: true\n    commitIntervalMs: 50\n  engine: wiredTiger\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.5\n      journalCompressor: zstd\n    collectionConfig:\n      blockCompressor: zlib\n      leafPageMax: 4KB\n    indexConfig:\n      prefixCompression: false\nnet:\n  port: 27018\n  bindIp: 127.0.0.1\nsystemLog:\n  destination: file\n  path: /tmp/x.log\n",
        )
        .unwrap();
        assert_eq!(c.port, 27018);
        assert_eq!(c.collection.compressor, Compressor::Zlib);
        assert_eq!(c.collection.leaf_page_max, 4096);
        assert!(!c.index.prefix_compression);
        assert_eq!(c.cache_size_bytes, Some(512 << 20));
        assert_eq!(c.journal_compressor, JournalCompressor::Zstd);
        let e = c.engine_config().unwrap();
        assert_eq!(
            e.journal.unwrap().commit_interval,
            Duration::from_millis(50)
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let e = ServerConfig::from_yaml("storage:\n  dbPth: /x\n").unwrap_err();
        assert!(e.0.contains("storage.dbPth"), "{e}");
        let e = ServerConfig::from_yaml(
            "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: lots\n",
        )
        .unwrap_err();
        assert!(
            e.0.contains("storage.wiredTiger.engineConfig.cacheSizeGB"),
            "{e}"
        );
        let e = ServerConfig::from_yaml("net:\n  port: 70000\n").unwrap_err();
        assert!(e.0.contains("net.port"), "{e}");
        let e = ServerConfig::from_yaml("storage:\n  flash:\n    trim:\n      when: replace\n")
            .unwrap_err();
        assert!(e.0.contains("storage.flash.trim.when"), "{e}");
        let e = ServerConfig::from_yaml("storage: [1, 2]\n").unwrap_err();
        assert!(e.0.contains("storage"), "{e}");
        assert!(ServerConfig::from_yaml("net: {port: 1\n").is_err());
    }

    #[test]
    fn the_flash_section_reaches_the_engine() {
        let c = ServerConfig::from_yaml(
            "storage:\n  flash:\n    placement: dsm\n    streams: 4\n    dsm: {groups: 2, alpha: 4}\n    trim: {enabled: true, batch: 500}\n    hints: linux\n",
        )
        .unwrap();
        let f = c.engine_config().unwrap().flash;
        assert_eq!(f.placement, "dsm");
        assert_eq!(f.placement_config.streams, 4);
        assert_eq!(f.placement_config.dsm.groups, 2);
        assert_eq!(f.placement_config.dsm.alpha, 4);
        assert_eq!(f.trim_batch, Some(500));
        assert!(f.linux_hints);
        let bad = ServerConfig::from_yaml("storage:\n  flash:\n    dsm: {alpha: 1}\n").unwrap();
        let err = bad.engine_config().err().expect("alpha 1 is refused");
        assert!(err.0.contains("alpha"), "{err}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32KB"), Some(32768));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1 MB"), Some(1 << 20));
        assert_eq!(parse_size("x"), None);
    }
}
