//! Recovery (WiredTiger `txn_recover.c`): opening = the last durable checkpoint (each table's
//! root and internal pages read and verified, leaves on demand) + the journal replayed from the
//! checkpoint's LSN. A torn tail (a bad last record with nothing valid after it) ends replay
//! cleanly at the last whole record; damage with valid records after it fails the open, naming
//! the file, the offset and `flashdoc repair`. Table files no table owns are removed.

use crate::catalog::{Catalog, TABLE_EXT};
use crate::error::{Error, IoContext, Result};
use crate::io::Io;
use crate::journal::record::{self, Record};
use crate::journal::{self, Damage, Lsn, ReplayMode, ReplayOutcome};
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
///
/// Strict replay ([`ReplayMode::Strict`], every open) fails on damage that is not a crash's
/// torn tail, naming the file, the offset and `flashdoc repair` for `db_path`: the records
/// after the damage were not read, and the caller must not checkpoint or remove journal files
/// over them. Salvage (`flashdoc repair`) applies every record whose checksum verifies.
pub fn replay(
    db_path: &Path,
    jdir: &Path,
    from: Lsn,
    mode: ReplayMode,
    mut apply: impl FnMut(Record) -> Result<()>,
) -> Result<ReplayOutcome> {
    let outcome = journal::replay_with(jdir, from, mode, |lsn, rec| {
        let record = record::decode(rec).map_err(|what| Error::Corrupt {
            file: jdir.join(journal::file_name(lsn.file)),
            offset: lsn.offset as u64,
            what: format!("journal record: {what}"),
        })?;
        apply(record)
    })?;
    if let Some(damage) = &outcome.corruption {
        return Err(corruption_error(db_path, damage));
    }
    if let Some(why) = &outcome.torn_tail {
        eprintln!("flashdoc: journal replay stopped at its torn tail: {why}");
    }
    for damage in &outcome.damaged {
        eprintln!("flashdoc: journal salvage skipped damaged bytes: {damage}");
    }
    Ok(outcome)
}

/// The error strict replay's corruption opens with: where, what, and how to recover.
fn corruption_error(db_path: &Path, damage: &Damage) -> Error {
    let after = match damage.next_valid {
        Some(next) if damage.file.ends_with(journal::file_name(next.file)) => {
            format!(
                " (a record that verifies follows at offset {})",
                next.offset
            )
        }
        Some(next) => format!(" ({} follows it)", journal::file_name(next.file)),
        None => String::new(),
    };
    Error::Corrupt {
        file: damage.file.clone(),
        offset: damage.offset,
        what: format!(
            "the journal is damaged{after}, so this is not a crash's torn tail and \
             acknowledged writes may follow it; nothing was replayed past it, checkpointed or \
             removed. Run `flashdoc repair --dbpath {}` to recover every record whose checksum \
             verifies. Damage: {}",
            db_path.display(),
            damage.why
        ),
    }
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
