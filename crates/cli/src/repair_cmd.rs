//! `flashdoc repair --dbpath DIR` (mongod's `--repair`): after `flashdoc serve` refused to
//! open a database whose journal is damaged, or a read failed on a table block whose checksum
//! fails, recover what the checksums prove and make it the database's durable state.
//!
//! 1. The engine opens with its journal salvaged: every record whose checksum verifies is
//!    replayed, each damaged extent is skipped (replay resynchronises at the next record that
//!    verifies), and a checkpoint makes the result durable, which retires the damaged files.
//! 2. Every table is salvaged: each leaf whose block fails its checksum is given up (emptied,
//!    rewritten by the next checkpoint), the rest kept; then every block is read and verified.
//! 3. The document layer opens and rebuilds every index from its collection; the old `_id`
//!    index's entries count the documents lost.
//! 4. A final checkpoint; the database then opens as `serve` opens it.

use anyhow::Context;
use engine::journal::{Damage, DamageKind, ReplayOutcome};
use engine::KvEngine;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct RepairArgs {
    /// A mongod.conf-shaped YAML file (its storage section is used).
    #[arg(long, short = 'f')]
    config: Option<PathBuf>,
    /// Overrides storage.dbPath.
    #[arg(long)]
    dbpath: Option<PathBuf>,
}

pub fn run(args: RepairArgs) -> anyhow::Result<()> {
    let storage = storage(&args)?;
    let dir = storage.db_path.clone();
    let cfg = storage
        .docdb_config()
        .map_err(|e| anyhow::anyhow!("in the configuration: {e}"))?;
    match cfg.engine_kind {
        engine::EngineKind::Disk => {}
        engine::EngineKind::InMemory => {
            anyhow::bail!(
                "storage.engine inMemory keeps nothing on disk: there is nothing to repair"
            )
        }
        engine::EngineKind::Mmapv1 => anyhow::bail!(
            "flashdoc repair salvages the wiredTiger engine's files; storage.engine mmapv1 is \
             not handled: a damaged mmapv1 journal is cut at the offset its refusal names \
             (docs/journal.md)"
        ),
    }
    anyhow::ensure!(dir.is_dir(), "dbPath {} is not a directory", dir.display());
    println!("repair: {}", dir.display());
    let (eng, outcome) = engine::DiskEngine::open_salvaging(cfg.engine.clone())
        .with_context(|| format!("opening {} with its journal salvaged", dir.display()))?;
    report_journal(&outcome);
    let salvaged = eng.salvage_tables().context("salvaging the table files")?;
    report_tables(&salvaged);
    let entries = eng
        .verify()
        .context("verifying the table files after the salvage")?;
    println!("repair: table files: every block verifies ({entries} entries)");
    eng.close().context("checkpointing the salvaged state")?;
    drop(eng);

    let db = docdb::DocDb::open(cfg.clone())
        .map_err(|e| anyhow::anyhow!("opening the salvaged database: {e}"))?;
    let colls = db
        .rebuild_all_indexes()
        .map_err(|e| anyhow::anyhow!("rebuilding indexes: {e}"))?;
    report_collections(&colls);
    db.shutdown()
        .map_err(|e| anyhow::anyhow!("checkpointing the repaired database: {e}"))?;
    drop(db);
    // The proof that `serve` will start: the database opens as it opens it.
    let db = docdb::DocDb::open(cfg)
        .map_err(|e| anyhow::anyhow!("the repaired database does not open: {e}"))?;
    db.shutdown()
        .map_err(|e| anyhow::anyhow!("closing the repaired database: {e}"))?;
    println!("repair: done; the database opens");
    Ok(())
}

/// The storage settings: the configuration file's, with `--dbpath` over them.
fn storage(args: &RepairArgs) -> anyhow::Result<docdb::config::StorageSettings> {
    let mut cfg = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the configuration file {}", path.display()))?;
            let (rest, _) = cluster::config::split_sharding(&text)
                .map_err(|e| anyhow::anyhow!("in {}: {e}", path.display()))?;
            server::config::ServerConfig::from_yaml(&rest)
                .with_context(|| format!("in {}", path.display()))?
        }
        None => {
            anyhow::ensure!(
                args.dbpath.is_some(),
                "give --dbpath DIR (or --config FILE)"
            );
            server::config::ServerConfig::default()
        }
    };
    if let Some(p) = &args.dbpath {
        cfg.storage.db_path = p.clone();
    }
    Ok(cfg.storage)
}

/// What the journal salvage replayed and what it had to skip.
fn report_journal(outcome: &ReplayOutcome) {
    println!(
        "repair: journal: {} record(s) replayed, {} damaged extent(s) skipped",
        outcome.records,
        outcome.damaged.len()
    );
    for d in &outcome.damaged {
        println!("repair:   lost: {}", describe_damage(d));
    }
    if let Some(tail) = &outcome.torn_tail {
        println!("repair:   torn tail (a crash's unacknowledged last write): {tail}");
    }
    for tail in &outcome.skipped_tails {
        println!("repair:   an earlier session's torn tail: {tail}");
    }
}

/// The table leaves the salvage gave up: each block, its file and why.
fn report_tables(salvaged: &[engine::TableSalvage]) {
    if salvaged.is_empty() {
        println!("repair: table files: no damaged leaf");
    }
    for t in salvaged {
        println!(
            "repair: table {} ({}): {} damaged leaf block(s) given up",
            t.table,
            t.file.display(),
            t.lost.len()
        );
        for l in &t.lost {
            println!(
                "repair:   lost: the leaf at offset {} ({} bytes): {}",
                l.offset, l.size, l.why
            );
        }
    }
}

/// One damaged extent: where, how many bytes of records are gone, why.
fn describe_damage(d: &Damage) -> String {
    match d.kind {
        DamageKind::MissingFile => format!("{} (every record it held)", d),
        DamageKind::Record | DamageKind::FileHeader => {
            let len = file_len(&d.file);
            format!(
                "{} bytes of records from offset {} of {} (at least one record): {}",
                d.skipped_bytes(len),
                d.offset,
                d.file.display(),
                d.why
            )
        }
    }
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Documents per collection, and each index's entries before and after its rebuild.
fn report_collections(colls: &[docdb::db::CollectionRepair]) {
    for c in colls {
        match c.documents_lost {
            Some(0) | None => println!("repair: {}: {} document(s)", c.ns, c.documents),
            Some(lost) => println!(
                "repair: {}: {} document(s), {lost} lost (in damaged blocks)",
                c.ns, c.documents
            ),
        }
        for i in &c.indexes {
            let before = match &i.entries_before {
                Ok(n) => n.to_string(),
                Err(e) => format!("unreadable ({e})"),
            };
            let change = match i.entries_before {
                Ok(n) if n > i.entries_after => {
                    format!(", {} entr(ies) dropped", n - i.entries_after)
                }
                Ok(n) if n < i.entries_after => {
                    format!(", {} entr(ies) added", i.entries_after - n)
                }
                _ => String::new(),
            };
            println!(
                "repair:   index {}: rebuilt, {} entr(ies) (before: {before}{change})",
                i.name, i.entries_after
            );
        }
    }
}
