//! The engine settings of a report's row, which of them differ between two rows, and the guard
//! every comparison the report prints as a headline or a claim goes through: rows compared on
//! one setting hold every other equal, and a row that changes several says so.

use crate::experiment::{Experiment, EVICTION_PCT};
use crate::summary::Cell;
use anyhow::{bail, Result};
use engine::TableConfig;
use serde::{Deserialize, Serialize};

/// Every engine setting behind a row. [`settings_that_differ`] compares the serialized fields,
/// so a setting added here is compared without another line of code (and the test
/// `every_setting_is_compared` changes each one in turn).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    /// The run phase's cache ÷ the loaded database's live data.
    pub cache_share: f64,
    /// Eviction's dirty budget, percent of the cache.
    pub dirty_target_pct: u8,
    pub dirty_trigger_pct: u8,
    /// Eviction's clean-and-dirty budget, percent of the cache.
    pub eviction_target_pct: u8,
    pub eviction_trigger_pct: u8,
    /// Block allocation of the collection's and the indexes' files (the journal is appended
    /// to files of its own and has no allocation).
    pub collection_allocation: String,
    pub index_allocation: String,
    /// The sweep's free reserve, percent of each file; `None` when no table sweeps.
    pub sweep_reserve_pct: Option<u8>,
    /// Bytes written per checkpoint interval ÷ device, on the reference engine; every other
    /// engine of a point keeps the reference's intervals (docs/lab.md, "Equal intervals").
    pub checkpoint_share: f64,
    /// What a write waits for.
    pub durability: String,
    /// Leaf and internal page sizes, KB.
    pub collection_leaf_kb: u32,
    pub collection_internal_kb: u32,
    pub index_leaf_kb: u32,
    pub index_internal_kb: u32,
    pub compressor: String,
    pub placement: String,
    /// TRIM of freed space and the filesystem's discard.
    pub trim: String,
    /// How the placement's streams reach the device.
    pub hints: String,
}

/// The lab's durability: every engine journals, and the journal is written when 4 MiB are
/// buffered, at checkpoints and at the end (the inline schedule; no write waits for it).
const LAB_DURABILITY: &str = "journal, j: false";

/// The lab hands each write's stream to the simulated device (no hint path in between).
const LAB_HINTS: &str = "streams given to the simulated device";

/// The engine settings of `cell` in experiment `exp`.
pub fn settings_of(exp: &Experiment, cell: &Cell) -> EngineSettings {
    let sweeps = cell.allocation == "sweep";
    EngineSettings {
        cache_share: cell.cache_permille as f64 / 1000.0,
        dirty_target_pct: cell.dirty_pct[0],
        dirty_trigger_pct: cell.dirty_pct[1],
        eviction_target_pct: EVICTION_PCT[0],
        eviction_trigger_pct: EVICTION_PCT[1],
        collection_allocation: cell.allocation.clone(),
        index_allocation: cell.allocation.clone(),
        sweep_reserve_pct: sweeps.then_some(exp.sweep_reserve_pct),
        checkpoint_share: exp.checkpoint_share,
        durability: LAB_DURABILITY.into(),
        collection_leaf_kb: cell.leaf_kb,
        collection_internal_kb: TableConfig::collection().internal_page_max / 1024,
        index_leaf_kb: TableConfig::index().leaf_page_max / 1024,
        index_internal_kb: TableConfig::index().internal_page_max / 1024,
        compressor: cell.compressor.clone(),
        placement: cell.policy.clone(),
        trim: cell.trim.clone(),
        hints: LAB_HINTS.into(),
    }
}

/// One setting that differs between two rows: its name and both values.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingChange {
    pub setting: String,
    pub from: String,
    pub to: String,
}

impl std::fmt::Display for SettingChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} → {}", self.setting, self.from, self.to)
    }
}

fn fields(s: &EngineSettings) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(m)) => m,
        other => unreachable!("a struct serializes to a JSON object, not {other:?}"),
    }
}

/// Every engine setting that differs from `a` to `b`, in the struct's order.
pub fn settings_that_differ(a: &EngineSettings, b: &EngineSettings) -> Vec<SettingChange> {
    let (x, y) = (fields(a), fields(b));
    debug_assert_eq!(x.len(), y.len());
    x.into_iter()
        .filter_map(|(k, va)| {
            let vb = &y[&k];
            (va != *vb).then(|| SettingChange {
                setting: k,
                from: va.to_string(),
                to: vb.to_string(),
            })
        })
        .collect()
}

/// What a comparison varies: the one setting it is about (every other must be equal), or
/// several, in a row labelled as changing more than one thing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compared {
    /// E.g. `"placement"`: one policy against another at equal engine settings.
    One(&'static str),
    /// A row labelled as changing several settings (printed after the equal-settings ones,
    /// with the decomposition beside it).
    MultiSetting,
}

/// The guard of every headline comparison and claim: `ours` against `theirs` may differ in
/// `compared`'s setting only, unless the row is labelled [`Compared::MultiSetting`], and such a
/// row must change at least two. Returns what differs (for the label).
pub fn comparable(
    ours: &EngineSettings,
    theirs: &EngineSettings,
    compared: Compared,
) -> Result<Vec<SettingChange>> {
    let differ = settings_that_differ(theirs, ours);
    match compared {
        Compared::One(setting) => {
            let others: Vec<String> = differ
                .iter()
                .filter(|c| c.setting != setting)
                .map(|c| c.to_string())
                .collect();
            if !others.is_empty() {
                bail!(
                    "a comparison of {setting} between rows whose engine settings also differ ({}): hold them equal, or label the row as changing several settings",
                    others.join("; ")
                );
            }
        }
        Compared::MultiSetting if differ.len() < 2 => bail!(
            "a row labelled as changing several settings changes {}",
            if differ.is_empty() {
                "none".to_string()
            } else {
                differ[0].to_string()
            }
        ),
        Compared::MultiSetting => {}
    }
    Ok(differ)
}

/// The guard for two cells of `exp`.
pub fn comparable_cells(
    exp: &Experiment,
    ours: &Cell,
    theirs: &Cell,
    compared: Compared,
) -> Result<Vec<SettingChange>> {
    comparable(&settings_of(exp, ours), &settings_of(exp, theirs), compared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{FLASH_MODE, WIREDTIGER};

    fn cell() -> Cell {
        Cell {
            workload: "ycsb-update-only".into(),
            cache_permille: 200,
            leaf_kb: 32,
            compressor: "none".into(),
            allocation: "best".into(),
            dirty_pct: [5, 20],
            trim: "off".into(),
            ssd: "8st-op0.07-greedy".into(),
            policy: "none".into(),
        }
    }

    fn streams() -> Experiment {
        crate::experiment::find("streams-quick").expect("built-in")
    }

    /// Each serialized setting in turn is changed in the JSON and read back: the comparison
    /// names exactly it. A field added to the struct is in the JSON, so it is changed and
    /// checked here too; one the comparison skipped would fail this test.
    #[test]
    fn every_setting_is_compared() {
        let a = settings_of(&streams(), &cell());
        let base = fields(&a);
        // Every engine setting the issue names, at least.
        assert!(base.len() >= 16, "{base:?}");
        for key in base.keys() {
            let mut changed = base.clone();
            let v = changed.get_mut(key).expect("a key of the map");
            *v = match v.take() {
                serde_json::Value::Number(n) => match n.as_u64() {
                    Some(u) => serde_json::json!(u + 1),
                    None => serde_json::json!(n.as_f64().unwrap_or(0.0) + 1.0),
                },
                serde_json::Value::String(s) => serde_json::json!(format!("{s}-other")),
                serde_json::Value::Null => serde_json::json!(1),
                other => panic!("setting {key}: a value of a new kind, {other:?}"),
            };
            let b: EngineSettings =
                serde_json::from_value(serde_json::Value::Object(changed)).expect(key);
            let d = settings_that_differ(&a, &b);
            assert_eq!(d.len(), 1, "{key}: {d:?}");
            assert_eq!(&d[0].setting, key);
        }
    }

    #[test]
    fn flash_mode_and_wiredtigers_defaults_differ_in_budget_allocation_reserve_and_placement() {
        let exp = streams();
        let wt = settings_of(&exp, &cell().with(WIREDTIGER, "none"));
        let flash = settings_of(&exp, &cell().with(FLASH_MODE, "filelog"));
        let names: Vec<String> = settings_that_differ(&wt, &flash)
            .into_iter()
            .map(|c| c.setting)
            .collect();
        assert_eq!(
            names,
            [
                "dirty_target_pct",
                "dirty_trigger_pct",
                "collection_allocation",
                "index_allocation",
                "sweep_reserve_pct",
                "placement"
            ]
        );
        assert_eq!(
            (wt.eviction_target_pct, wt.eviction_trigger_pct),
            (80, 95),
            "WiredTiger's eviction"
        );
        let engine = engine::EngineConfig::new("db");
        assert_eq!(
            [engine.eviction_target, engine.eviction_trigger],
            EVICTION_PCT,
            "the lab's engines keep the engine's eviction"
        );
    }

    /// The guard: a policy comparison across engines is refused unless labelled, a labelled
    /// row must change several settings, and equal settings pass.
    #[test]
    fn a_headline_comparison_across_unequal_engine_settings_is_refused() {
        let exp = streams();
        let ours = cell().with(FLASH_MODE, "filelog");
        let dsm_wt = cell().with(WIREDTIGER, "dsm");
        let err = comparable_cells(&exp, &ours, &dsm_wt, Compared::One("placement"))
            .expect_err("flash mode against dsm on WiredTiger's engine changes the engine too");
        assert!(err.to_string().contains("dirty_target_pct"), "{err}");
        let changed =
            comparable_cells(&exp, &ours, &dsm_wt, Compared::MultiSetting).expect("labelled");
        assert_eq!(changed.len(), 6, "{changed:?}");
        let dsm_flash = cell().with(FLASH_MODE, "dsm");
        let one = comparable_cells(&exp, &ours, &dsm_flash, Compared::One("placement"))
            .expect("equal engine settings");
        assert_eq!(one.len(), 1);
        assert!(comparable_cells(&exp, &ours, &dsm_flash, Compared::MultiSetting).is_err());
        // A different TRIM condition is an engine setting too.
        let trimmed = Cell {
            trim: "20000".into(),
            ..dsm_flash
        };
        assert!(comparable_cells(&exp, &ours, &trimmed, Compared::One("placement")).is_err());
    }
}
