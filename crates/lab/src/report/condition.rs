//! A condition of a stream experiment: the settings its cells share apart from workload,
//! engine, policy and seed. Both the headline (`credit`) and the rest of the stream report
//! (`streams`) group their cells by it.

use crate::summary::{Cell, Table, WIREDTIGER};
use std::collections::BTreeMap;

/// Points of one condition (everything but workload, engine, policy and seed): cache share
/// (permille), leaf KB, compressor, TRIM, device.
pub(super) type Condition = (u64, u32, String, String, String);

pub(super) fn conditions(t: &Table) -> BTreeMap<Condition, Vec<String>> {
    let mut m: BTreeMap<Condition, Vec<String>> = BTreeMap::new();
    for c in t.cells.keys() {
        let k = (
            c.cache_permille,
            c.leaf_kb,
            c.compressor.clone(),
            c.trim.clone(),
            c.ssd.clone(),
        );
        let w = m.entry(k).or_default();
        if !w.contains(&c.workload) {
            w.push(c.workload.clone());
        }
    }
    m
}

/// `none` on WiredTiger's engine settings in condition `k`.
pub(super) fn base_cell(k: &Condition, workload: &str) -> Cell {
    Cell {
        workload: workload.into(),
        cache_permille: k.0,
        leaf_kb: k.1,
        compressor: k.2.clone(),
        allocation: WIREDTIGER.allocation.into(),
        dirty_pct: WIREDTIGER.dirty_pct,
        trim: k.3.clone(),
        ssd: k.4.clone(),
        policy: "none".into(),
    }
}
