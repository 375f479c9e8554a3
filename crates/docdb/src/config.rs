//! The document layer's configuration: which engine, its settings, and the table templates new
//! collections and indexes are created with; and `storage.*` of the configuration file, which
//! this crate parses (the engine owns the serde types of `storage.wiredTiger` and
//! `storage.flash`; the server composes the whole file).

use engine::{EngineConfig, EngineKind, FlashSettings, TableConfig, WiredTigerSettings};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone)]
pub struct DocDbConfig {
    pub engine_kind: EngineKind,
    pub engine: EngineConfig,
    /// Template for every collection table (page sizes, block compressor, prefix compression).
    pub collection_table: TableConfig,
    /// Template for every index table (`id_index` is set per table by the catalog).
    pub index_table: TableConfig,
    /// Collection UUIDs (and so their tables' names) derived from this seed and the namespace
    /// instead of the system's random source, so the bytes a run writes are reproducible (the
    /// lab's deterministic engine runs). `None`: random, as mongod. Not a server option.
    pub uuid_seed: Option<u64>,
    /// A replica-set member's oplog (`local.oplog.rs`): every write is logged in its own
    /// batch. `None` (a standalone): nothing is logged and writes pay nothing for it.
    pub oplog: Option<crate::oplog::OplogSettings>,
}

impl DocDbConfig {
    /// MongoDB's defaults on the disk engine.
    pub fn disk(db_path: impl Into<PathBuf>) -> Self {
        DocDbConfig {
            engine_kind: EngineKind::Disk,
            engine: EngineConfig::new(db_path),
            collection_table: TableConfig::collection(),
            index_table: TableConfig::index(),
            uuid_seed: None,
            oplog: None,
        }
    }

    /// The in-memory engine (`storage.engine: inMemory`); the path is not used.
    pub fn in_memory() -> Self {
        DocDbConfig {
            engine_kind: EngineKind::InMemory,
            ..DocDbConfig::disk("/nonexistent-in-memory")
        }
    }
}

/// `storage` of a mongod.conf-shaped file.
///
/// ```yaml
/// storage:
///   dbPath: /var/lib/flashdoc
///   engine: wiredTiger            # or inMemory, or mmapv1
///   syncPeriodSecs: 60            # checkpoint interval (0: only on demand)
///   journal: {enabled: true, commitIntervalMs: 100}
///   wiredTiger: ...               # engine::settings::WiredTigerSettings
///   flash: ...                    # engine::settings::FlashSettings
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct StorageSettings {
    pub db_path: PathBuf,
    #[serde(
        deserialize_with = "engine_kind_de",
        serialize_with = "engine_kind_ser"
    )]
    pub engine: EngineKind,
    /// Only `false`: every table file lives in dbPath, named by the engine.
    #[serde(rename = "directoryPerDB")]
    pub directory_per_db: bool,
    pub sync_period_secs: u64,
    pub journal: JournalSettings,
    pub wired_tiger: WiredTigerSettings,
    pub flash: FlashSettings,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct JournalSettings {
    pub enabled: bool,
    /// Group-commit period; [`DEFAULT_COMMIT_INTERVAL_MS`] when not given. Kept as given so
    /// that setting it with the journal disabled is refused rather than ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_interval_ms: Option<u64>,
}

/// mongod's default `storage.journal.commitIntervalMs`.
pub const DEFAULT_COMMIT_INTERVAL_MS: u64 = 100;

impl Default for JournalSettings {
    fn default() -> Self {
        JournalSettings {
            enabled: true,
            commit_interval_ms: None,
        }
    }
}

impl Default for StorageSettings {
    fn default() -> Self {
        StorageSettings {
            db_path: PathBuf::from("/data/db"),
            engine: EngineKind::Disk,
            directory_per_db: false,
            sync_period_secs: 60,
            journal: JournalSettings::default(),
            wired_tiger: WiredTigerSettings::default(),
            flash: FlashSettings::default(),
        }
    }
}

fn engine_kind_de<'de, D: Deserializer<'de>>(d: D) -> Result<EngineKind, D::Error> {
    String::deserialize(d)?
        .parse()
        .map_err(serde::de::Error::custom)
}

fn engine_kind_ser<S: Serializer>(k: &EngineKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(engine_kind_name(*k))
}

/// mongod's name for an engine kind.
pub fn engine_kind_name(k: EngineKind) -> &'static str {
    match k {
        EngineKind::Disk => "wiredTiger",
        EngineKind::InMemory => "inMemory",
        EngineKind::Mmapv1 => "mmapv1",
    }
}

impl StorageSettings {
    /// The in-place engine has none of WiredTiger's settings but the cache size (its page
    /// pool's budget): each one given is refused by name rather than ignored.
    fn check_mmapv1_options(&self) -> Result<(), String> {
        let wt = bson::to_document(&self.wired_tiger).map_err(|e| e.to_string())?;
        for (section, v) in &wt {
            let Some(keys) = v.as_document() else {
                continue;
            };
            if let Some(key) = keys
                .keys()
                .find(|k| !(section == "engineConfig" && *k == "cacheSizeGB"))
            {
                return Err(format!(
                    "storage.wiredTiger.{section}.{key}: set, but the mmapv1 engine has no such \
                     setting (it stores records uncompressed and updates them in place, with \
                     no allocation policy, dirty budget or direct I/O); remove the option"
                ));
            }
        }
        Ok(())
    }

    /// The journal's options need a journal: given without one (disabled, or the in-memory
    /// engine, which has none), they would be accepted and do nothing, so they are refused.
    fn check_journal_options(&self) -> Result<(), String> {
        let given = [
            (
                "storage.journal.commitIntervalMs",
                self.journal.commit_interval_ms.is_some(),
            ),
            (
                "storage.wiredTiger.engineConfig.journalCompressor",
                self.wired_tiger.engine_config.journal_compressor.is_some(),
            ),
        ];
        let without = if !self.journal.enabled {
            "storage.journal.enabled is false"
        } else if self.engine == EngineKind::InMemory {
            "the inMemory engine has no journal"
        } else {
            return Ok(());
        };
        match given.iter().find(|(_, set)| *set) {
            Some((name, _)) => Err(format!("{name}: set, but {without}; remove the option")),
            None => Ok(()),
        }
    }

    /// `--flash-mode`: `flash` (the default) or `off` (WiredTiger's behaviour).
    pub fn set_flash_mode(&mut self, mode: &str) -> Result<(), String> {
        self.flash.mode = mode.parse().map_err(|e: engine::Error| e.to_string())?;
        Ok(())
    }

    /// `--storage-engine`: mongod's names (and flashdoc's aliases).
    pub fn set_engine(&mut self, name: &str) -> Result<(), String> {
        self.engine = name.parse().map_err(|e: engine::Error| e.to_string())?;
        Ok(())
    }

    /// The document layer's configuration. Checks everything the engine would refuse later
    /// (before the dbPath is touched); a `flash.trace` file is created here.
    pub fn docdb_config(&self) -> Result<DocDbConfig, String> {
        if self.directory_per_db {
            return Err(
                "storage.directoryPerDB: not supported: every table file lives in dbPath".into(),
            );
        }
        let j = &self.journal;
        let commit_interval_ms = j.commit_interval_ms.unwrap_or(DEFAULT_COMMIT_INTERVAL_MS);
        if !(1..=500).contains(&commit_interval_ms) {
            return Err(format!(
                "storage.journal.commitIntervalMs: {commit_interval_ms} is outside 1..500"
            ));
        }
        self.check_journal_options()?;
        let mut cfg = DocDbConfig::disk(&self.db_path);
        cfg.engine_kind = self.engine;
        // The mode's settings first; storage.wiredTiger's and storage.flash's keys override them.
        self.flash.defaults().apply(
            &mut cfg.engine,
            &mut cfg.collection_table,
            &mut cfg.index_table,
        );
        let e = &mut cfg.engine;
        if let Some(jc) = e.journal.as_mut() {
            jc.commit_interval = Duration::from_millis(commit_interval_ms);
        }
        self.wired_tiger
            .apply(e, &mut cfg.collection_table, &mut cfg.index_table)
            .map_err(|err| err.to_string())?;
        self.flash.apply(e).map_err(|err| err.to_string())?;
        if self.engine == EngineKind::InMemory && e.direct_io.any() {
            return Err(
                "storage.wiredTiger.engineConfig.directIO: set, but the inMemory engine has no files"
                    .into(),
            );
        }
        if !j.enabled {
            e.journal = None;
        }
        e.checkpoint_interval =
            (self.sync_period_secs > 0).then(|| Duration::from_secs(self.sync_period_secs));
        e.validate().map_err(|err| err.to_string())?;
        if self.engine == EngineKind::Mmapv1 {
            self.check_mmapv1_options()?;
            // What the templates say is what its tables get: no compression of any kind.
            for t in [&mut cfg.collection_table, &mut cfg.index_table] {
                t.compressor = engine::Compressor::None;
                t.prefix_compression = false;
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_section_parses_and_reaches_the_engine() {
        let s: StorageSettings = serde_yaml::from_str(
            "dbPath: /tmp/x\njournal:\n  enabled: true\n  commitIntervalMs: 50\nengine: wiredTiger\nwiredTiger:\n  engineConfig:\n    cacheSizeGB: 0.5\n  collectionConfig:\n    blockCompressor: zlib\nflash: {placement: dsm, dsm: {alpha: 4}}\n",
        )
        .unwrap();
        let c = s.docdb_config().unwrap();
        assert_eq!(
            c.engine.journal.as_ref().unwrap().commit_interval,
            Duration::from_millis(50)
        );
        assert_eq!(c.engine.cache_size, 512 << 20);
        assert_eq!(c.collection_table.compressor, engine::Compressor::Zlib);
        assert_eq!(c.engine.flash.placement.as_str(), "dsm");
        assert_eq!(c.engine.direct_io, engine::DirectIo::NONE);
        let s: StorageSettings =
            serde_yaml::from_str("wiredTiger: {engineConfig: {directIO: [data, log]}}\n").unwrap();
        let d = s.docdb_config().unwrap().engine.direct_io;
        assert!(d.data && d.log);
        let e = serde_yaml::from_str::<StorageSettings>("dbPth: /x\n").unwrap_err();
        assert!(e.to_string().contains("dbPth"), "{e}");
        let bad: StorageSettings = serde_yaml::from_str("flash: {dsm: {alpha: 1}}\n").unwrap();
        assert!(bad.docdb_config().err().unwrap().contains("alpha"));
        let bad: StorageSettings = serde_yaml::from_str("directoryPerDB: true\n").unwrap();
        assert!(bad.docdb_config().err().unwrap().contains("directoryPerDB"));
        let bad: StorageSettings =
            serde_yaml::from_str("journal: {commitIntervalMs: 900}\n").unwrap();
        assert!(bad
            .docdb_config()
            .err()
            .unwrap()
            .contains("commitIntervalMs"));
    }

    #[test]
    fn journal_options_without_a_journal_are_refused() {
        for (yaml, want) in [
            (
                "journal: {enabled: false, commitIntervalMs: 50}\n",
                "commitIntervalMs: set, but storage.journal.enabled is false",
            ),
            (
                "journal: {enabled: false}\nwiredTiger: {engineConfig: {journalCompressor: zstd}}\n",
                "journalCompressor: set, but storage.journal.enabled is false",
            ),
            (
                "engine: inMemory\njournal: {commitIntervalMs: 50}\n",
                "the inMemory engine has no journal",
            ),
            (
                "journal: {enabled: false}\nwiredTiger: {engineConfig: {directIO: [data, log]}}\n",
                "direct_io=log: set, but the journal is disabled",
            ),
            (
                "engine: inMemory\nwiredTiger: {engineConfig: {directIO: [data]}}\n",
                "directIO: set, but the inMemory engine has no files",
            ),
            (
                "wiredTiger: {engineConfig: {directIO: [checkpoint]}}\n",
                "storage.wiredTiger.engineConfig.directIO: unknown direct_io file type",
            ),
        ] {
            let s: StorageSettings = serde_yaml::from_str(yaml).unwrap();
            let e = s.docdb_config().err().unwrap();
            assert!(e.contains(want), "{yaml}: {e}");
        }
        let s: StorageSettings = serde_yaml::from_str("journal: {enabled: false}\n").unwrap();
        assert!(s.docdb_config().unwrap().engine.journal.is_none());
        let e = serde_yaml::from_str::<StorageSettings>("engine: rocks\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("expected wiredTiger, inMemory or mmapv1"),
            "{e}"
        );
    }

    #[test]
    fn block_allocation_and_placement_reach_the_engine_tables() {
        let dir = tempfile::tempdir().unwrap();
        let s: StorageSettings = serde_yaml::from_str(&format!(
            "dbPath: {}
wiredTiger:
  collectionConfig: {{blockAllocation: sweep, sweepReservePct: 30}}
  indexConfig: {{blockAllocation: append}}
flash: {{placement: filelog}}
",
            dir.path().display()
        ))
        .unwrap();
        let cfg = s.docdb_config().unwrap();
        assert_eq!(cfg.engine.flash.placement.as_str(), "filelog");
        let db = crate::DocDb::open(cfg).unwrap();
        let out = db.insert(
            "d",
            "c",
            vec![bson::doc! {"_id": 1}],
            crate::WriteOpts::default(),
        );
        assert_eq!(out.n, 1);
        let tables = db.engine().tables();
        let coll = tables
            .iter()
            .find(|(name, _, t)| {
                name != crate::catalog::CATALOG_TABLE && t.kind == engine::TableKind::Collection
            })
            .map(|(_, _, t)| t.block_allocation())
            .unwrap();
        assert_eq!(coll.policy, engine::AllocPolicy::Sweep);
        assert_eq!(coll.sweep_reserve_pct, 30);
        let id_index = tables.iter().find(|(_, _, t)| t.id_index).unwrap();
        assert_eq!(id_index.2.allocation, engine::AllocPolicy::Append);
    }

    #[test]
    fn bad_allocation_and_placement_values_are_refused() {
        let refused = |yaml: &str| match serde_yaml::from_str::<StorageSettings>(yaml) {
            Err(e) => e.to_string(),
            Ok(s) => s.docdb_config().err().expect(yaml),
        };
        let e = refused("wiredTiger: {collectionConfig: {blockAllocation: spiral}}\n");
        assert!(e.contains("spiral"), "{e}");
        let e = refused(
            "wiredTiger: {collectionConfig: {blockAllocation: sweep, sweepReservePct: 95}}\n",
        );
        assert!(e.contains("sweepReservePct: must be 0–90"), "{e}");
        let e = refused(
            "wiredTiger: {collectionConfig: {blockAllocation: sweep, sweepReservePct: 300}}\n",
        );
        assert!(e.contains("sweepReservePct") || e.contains("300"), "{e}");
        // Under flash mode the tables sweep, so the reserve alone is fine; WiredTiger's best fit
        // (mode off) needs the sweep named.
        let e = refused("flash: {mode: off}\nwiredTiger: {indexConfig: {sweepReservePct: 20}}\n");
        assert!(
            e.contains("indexConfig.sweepReservePct: applies only with blockAllocation: sweep"),
            "{e}"
        );
        let e = refused("flash: {placement: oracle-death}\n");
        assert!(e.contains("offline only"), "{e}");
        let e = refused("flash: {placement: filelogg}\n");
        assert!(e.contains("unknown placement policy"), "{e}");
    }

    #[test]
    fn flash_mode_sets_the_engine_and_off_gives_wiredtigers_back() {
        let cfg = |yaml: &str| {
            serde_yaml::from_str::<StorageSettings>(yaml)
                .unwrap()
                .docdb_config()
                .unwrap()
        };
        let c = cfg("{}");
        assert_eq!(c.engine.flash.mode, engine::FlashMode::Flash);
        assert_eq!(c.engine.flash.placement.as_str(), engine::SHIPPED_POLICY);
        assert_eq!(c.engine.flash.hints, engine::settings::Hints::Auto);
        assert_eq!(
            (
                c.engine.eviction_dirty_target,
                c.engine.eviction_dirty_trigger
            ),
            (50, 80)
        );
        assert_eq!(c.collection_table.allocation, engine::AllocPolicy::Sweep);
        assert_eq!(c.index_table.allocation, engine::AllocPolicy::Sweep);
        assert_eq!(c.engine.flash.trim_batch, None);
        let c = cfg("flash: {mode: off}\n");
        assert_eq!(c.engine.flash, engine::FlashConfig::off());
        assert_eq!(
            (c.engine.eviction_target, c.engine.eviction_trigger),
            (80, 95)
        );
        assert_eq!(
            (
                c.engine.eviction_dirty_target,
                c.engine.eviction_dirty_trigger
            ),
            (5, 20)
        );
        assert_eq!(c.collection_table.allocation, engine::AllocPolicy::Best);
        assert_eq!(c.index_table.allocation, engine::AllocPolicy::Best);
        // An explicit key overrides the mode, in either direction.
        let c = cfg("flash: {mode: off, placement: filelog}\nwiredTiger: {engineConfig: {evictionDirtyTarget: 40, evictionDirtyTrigger: 60}, collectionConfig: {blockAllocation: sweep}}\n");
        assert_eq!(c.engine.flash.placement.as_str(), "filelog");
        assert_eq!(
            (
                c.engine.eviction_dirty_target,
                c.engine.eviction_dirty_trigger
            ),
            (40, 60)
        );
        assert_eq!(c.collection_table.allocation, engine::AllocPolicy::Sweep);
        assert_eq!(c.index_table.allocation, engine::AllocPolicy::Best);
        let c = cfg("wiredTiger: {engineConfig: {evictionDirtyTarget: 5, evictionDirtyTrigger: 20}, indexConfig: {blockAllocation: best}}\n");
        assert_eq!(
            (
                c.engine.eviction_dirty_target,
                c.engine.eviction_dirty_trigger
            ),
            (5, 20)
        );
        assert_eq!(c.index_table.allocation, engine::AllocPolicy::Best);
        assert_eq!(c.collection_table.allocation, engine::AllocPolicy::Sweep);
        // The in-memory engine takes either mode: what it lacks is not applied, not refused.
        cfg("engine: inMemory\nflash: {mode: off}\n");
        cfg("engine: inMemory\n");
        let mut s = StorageSettings::default();
        s.set_flash_mode("off").unwrap();
        assert_eq!(s.flash.mode, engine::FlashMode::Off);
        let e = s.set_flash_mode("fast").unwrap_err();
        assert!(e.contains("expected flash or off"), "{e}");
        let e = serde_yaml::from_str::<StorageSettings>("flash: {mode: fast}\n").unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
    }

    /// A database made before flash mode (here: under `mode: off`) opens as it was: its tables
    /// keep the allocation stored in their metadata; a table made after takes flash mode's.
    #[test]
    fn a_directory_made_under_mode_off_keeps_its_tables_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = |mode: &str| format!("dbPath: {}\n{mode}", dir.path().display());
        // Every collection table's name and allocation.
        let allocation_of = |db: &crate::DocDb| {
            db.engine()
                .tables()
                .into_iter()
                .filter(|(name, _, t)| {
                    name != crate::catalog::CATALOG_TABLE && t.kind == engine::TableKind::Collection
                })
                .map(|(name, _, t)| (name, t.allocation))
                .collect::<Vec<_>>()
        };
        let open = |mode: &str| {
            let s: StorageSettings = serde_yaml::from_str(&yaml(mode)).unwrap();
            crate::DocDb::open(s.docdb_config().unwrap()).unwrap()
        };
        let insert = |db: &crate::DocDb, coll: &str| {
            let out = db.insert(
                "d",
                coll,
                vec![bson::doc! {"_id": 1}],
                crate::WriteOpts::default(),
            );
            assert_eq!(out.n, 1);
        };
        let db = open("flash: {mode: off}\n");
        insert(&db, "old");
        let before = allocation_of(&db);
        assert_eq!(before.len(), 1);
        assert_eq!(before[0].1, engine::AllocPolicy::Best);
        db.shutdown().unwrap();
        drop(db);
        let db = open("");
        let reopened = allocation_of(&db);
        assert_eq!(
            reopened, before,
            "the old table keeps its stored allocation"
        );
        insert(&db, "new");
        let after = allocation_of(&db);
        assert_eq!(after.len(), 2);
        let new: Vec<_> = after.iter().filter(|t| !before.contains(t)).collect();
        assert_eq!(new.len(), 1);
        assert_eq!(
            new[0].1,
            engine::AllocPolicy::Sweep,
            "a new table takes flash mode's"
        );
        let old_index = db
            .engine()
            .tables()
            .into_iter()
            .filter(|(_, _, t)| t.id_index)
            .map(|(_, _, t)| t.allocation)
            .collect::<Vec<_>>();
        assert_eq!(old_index.len(), 2);
        assert!(old_index.contains(&engine::AllocPolicy::Best));
        assert!(old_index.contains(&engine::AllocPolicy::Sweep));
        db.shutdown().unwrap();
    }
    #[test]
    fn mmapv1_takes_its_cache_and_journal_settings_and_refuses_wiredtigers_by_name() {
        let s: StorageSettings = serde_yaml::from_str(
            "dbPath: /tmp/x\nengine: mmapv1\njournal: {commitIntervalMs: 30}\nsyncPeriodSecs: 5\nwiredTiger: {engineConfig: {cacheSizeGB: 0.25}}\n",
        )
        .unwrap();
        let c = s.docdb_config().unwrap();
        assert_eq!(c.engine_kind, EngineKind::Mmapv1);
        assert_eq!(c.engine.cache_size, 256 << 20);
        assert_eq!(c.engine.checkpoint_interval, Some(Duration::from_secs(5)));
        assert_eq!(
            c.engine.journal.as_ref().unwrap().commit_interval,
            Duration::from_millis(30)
        );
        // The default compressors are not the engine's: its tables are made without them.
        assert_eq!(c.collection_table.compressor, engine::Compressor::None);
        assert_eq!(c.index_table.compressor, engine::Compressor::None);
        assert!(!c.index_table.prefix_compression);
        for (yaml, key) in [
            (
                "collectionConfig: {blockCompressor: zstd}",
                "collectionConfig.blockCompressor",
            ),
            (
                "indexConfig: {prefixCompression: true}",
                "indexConfig.prefixCompression",
            ),
            (
                "engineConfig: {journalCompressor: snappy}",
                "engineConfig.journalCompressor",
            ),
            (
                "collectionConfig: {blockAllocation: sweep}",
                "collectionConfig.blockAllocation",
            ),
            (
                "engineConfig: {evictionDirtyTarget: 40}",
                "engineConfig.evictionDirtyTarget",
            ),
            ("engineConfig: {directIO: [data]}", "engineConfig.directIO"),
        ] {
            let s: StorageSettings =
                serde_yaml::from_str(&format!("engine: mmapv1\nwiredTiger: {{{yaml}}}\n")).unwrap();
            let e = s.docdb_config().err().expect("refused");
            assert!(
                e.contains(&format!("storage.wiredTiger.{key}")) && e.contains("mmapv1"),
                "{e}"
            );
        }
    }
}
