//! The engine's statistics (serverStatus' storage section).

use crate::db::Inner;
use crate::state::CATALOG;

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
