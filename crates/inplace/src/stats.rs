//! The engine's statistics (serverStatus' storage section) and a table's extent bytes
//! (collStats' `storageSize`).

use crate::db::Inner;
use crate::space;
use crate::state::CATALOG;
use engine::{Result, TableId};

pub(crate) fn stats(inner: &Inner) -> serde_json::Value {
    let st = inner.state();
    let (checkpoints, pages_written) = inner.checkpoints();
    let c = st.counters;
    let tables: Vec<_> = st
        .tables
        .iter()
        .filter(|(&id, _)| id != CATALOG)
        .map(|(&id, t)| {
            serde_json::json!({
                "name": t.name, "id": id, "entries": t.details.entries,
            })
        })
        .collect();
    serde_json::json!({
        "engine": "mmapv1",
        "dbPath": inner.dir().display().to_string(),
        "dataFiles": st.header.file_count,
        "tables": tables,
        "entries": st.tables.iter().filter(|(&id, _)| id != CATALOG)
            .map(|(_, t)| t.details.entries).sum::<u64>(),
        "updatesInPlace": c.in_place,
        "recordMoves": c.moves,
        "inserts": c.inserts,
        "deletes": c.deletes,
        "recordBytesAllocated": c.record_bytes_allocated,
        "valueBytesAllocated": c.value_bytes_allocated,
        "dirtyBytes": st.pool.dirty_bytes(),
        "writeBacks": checkpoints,
        "pagesWrittenBack": pages_written,
        "keptVersions": st.history.kept(),
        "keptVersionBytes": st.history.bytes(),
        "liveSnapshots": inner.live_snapshots(),
        "journalDurableBatch": inner.durable_batch(),
        "flash": inner.io().flash_stats(),
    })
}

/// The bytes of the extents a user table holds: its records' and its key B-tree buckets'
/// extents, used or not. Read through the pool (an extent's length is in its header), so it
/// is not part of [`stats`], which the lab reads during its runs.
pub(crate) fn extent_bytes(inner: &Inner, table: TableId) -> Result<u64> {
    inner.check_open()?;
    let mut guard = inner.state();
    let st = &mut *guard;
    inner.user_table(st, table)?;
    let details = st.tables[&table].details.clone();
    space::extent_bytes(&mut st.pool, &details)
}
