//! Recovery (WiredTiger `txn_recover.c`): opening = the last durable checkpoint (each table's
//! root and internal pages read and verified, leaves on demand) + the journal replayed from the
//! checkpoint's LSN. A torn or corrupt tail ends replay cleanly at the last whole record. Table
//! files no table owns are removed.

use crate::catalog::{Catalog, TABLE_EXT};
use crate::error::{Error, IoContext, Result};
use crate::io::Io;
use crate::journal::record::{self, Record};
use crate::journal::{self, Lsn, ReplayOutcome};
use crate::meta::{self, Metadata};
use std::path::Path;

/// Opens every table of the last durable checkpoint into `catalog`; returns the metadata
/// (`None` for a new database).
pub fn open_checkpoint(dir: &Path, io: &Io, catalog: &Catalog) -> Result<Option<Metadata>> {
    let meta = meta::read(dir)?;
    // A half-written metadata file from a crash mid-commit is not the commit.
    let _ = io.remove(&dir.join(meta::TURTLE_SET), None);
    if let Some(m) = &meta {
        catalog.fresh_from(m.next_table_id);
        for t in &m.tables {
            catalog.open_table(t)?;
        }
    }
    Ok(meta)
}

/// Replays the journal in `jdir` from `from`, handing each record to `apply` in LSN order.
pub fn replay(
    jdir: &Path,
    from: Lsn,
    mut apply: impl FnMut(Record) -> Result<()>,
) -> Result<ReplayOutcome> {
    let outcome = journal::replay(jdir, from, |_, rec| {
        let record = record::decode(rec).map_err(|what| Error::Corrupt {
            file: jdir.to_path_buf(),
            offset: 0,
            what: format!("journal record: {what}"),
        })?;
        apply(record)
    })?;
    if let Some(why) = &outcome.torn_tail {
        eprintln!("flashdoc: journal replay stopped at its torn tail: {why}");
    }
    Ok(outcome)
}

/// Removes table files that no table owns (a crash between a drop's checkpoint and the unlink,
/// or a create whose record never became durable), through the seam (reported as removed).
pub fn remove_orphans(dir: &Path, io: &Io, catalog: &Catalog) -> Result<()> {
    let owned = catalog.owned_files();
    let rd = std::fs::read_dir(dir).ctx(|| format!("listing {}", dir.display()))?;
    for e in rd.flatten() {
        let p = e.path();
        let is_table = p.extension().is_some_and(|x| x == TABLE_EXT);
        if is_table && !owned.contains(&p) {
            io.remove(&p, None)
                .ctx(|| format!("removing orphan {}", p.display()))?;
        }
    }
    Ok(())
}
