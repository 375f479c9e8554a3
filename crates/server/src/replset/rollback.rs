//! Rollback (docs/replication.md, "Rollback"): a member whose oplog holds writes of its own
//! that the set never committed saves the documents they touched to rollback files, restores
//! its replicated data and oplog from its last snapshot (or empties them, without one), and
//! sets what it applied back to the snapshot's position, so that its Raft member applies the
//! committed log after it. The stable point is the last snapshot plus the committed log:
//! rollback never trusts the data files, so no stable timestamp is needed.

use super::stored::{self, ts_of, ts_u64, Record};
use bson::spec::BinarySubtype;
use bson::{Bson, Document, Uuid};
use docdb::DocDb;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file whose presence says a reset is under way: written and synced before the reset
/// starts, removed once it is complete; at start, it means finish the reset first.
pub const MARKER: &str = "rollback-in-progress";
/// Where rollback files go, as in mongod 4.4+: `rollback/<collection uuid>/removed.<time>.bson`.
pub const ROLLBACK_DIR: &str = "rollback";

/// Whether the member can rebuild its data: from its last snapshot and the log after it, or
/// from the whole log when nothing was purged.
pub fn refusal(db: &DocDb) -> Option<String> {
    let kv = db.engine().as_ref();
    let purged = match repl::store::purged_position(kv) {
        Ok(None) => return None,
        Ok(Some(p)) => p,
        Err(e) => return Some(format!("reading the log: {e}")),
    };
    let snapshot = match repl::state_machine::stored_snapshot(kv) {
        Ok(s) => s.and_then(|(pos, _)| pos),
        Err(e) => return Some(format!("reading the last snapshot: {e}")),
    };
    match snapshot {
        Some(s) if s.index >= purged.index => None,
        _ => Some(format!(
            "the log is purged up to {purged} and this member has no snapshot at or after it ({snapshot:?}), so it cannot rebuild its data; resync it by hand"
        )),
    }
}

/// The oplog entries a rollback undoes: this member's own past the newest committed one it
/// applied (`record.applied_ts`) that the log no longer holds (entries still in the log's
/// uncommitted tail are applied again if they commit).
pub fn undone_entries(db: &DocDb, record: &Record) -> Result<Vec<Document>, String> {
    let after = record.applied.map_or(0, |p| p.index);
    // A log entry that does not read as ours is refused, not skipped: skipped, the oplog
    // entries it holds would count as undone and be rolled back though the log keeps them.
    let mut in_log = HashSet::new();
    for bytes in
        repl::store::entries_after(db.engine().as_ref(), after).map_err(|e| e.to_string())?
    {
        let raft_entry = Document::from_reader(bytes.as_slice())
            .map_err(|e| format!("a log entry after index {after} is not a document: {e}"))?;
        for e in stored::oplog_entries(raft_entry)? {
            if let Ok(ts) = e.get_timestamp("ts") {
                in_log.insert(ts_u64(ts));
            }
        }
    }
    let oplog = db.oplog().ok_or("a member has an oplog")?;
    let own = oplog
        .entries_after(ts_of(record.applied_ts), usize::MAX, usize::MAX)
        .map_err(|e| e.message)?;
    Ok(own
        .into_iter()
        .filter(|e| {
            e.get_timestamp("ts")
                .is_ok_and(|ts| !in_log.contains(&ts_u64(ts)))
        })
        .collect())
}

/// The collection UUID and `_id` of the document a write entry touched (none for a command).
fn touched(entry: &Document) -> Option<(Uuid, Bson)> {
    let ui = match entry.get("ui") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
            Uuid::from_bytes(b.bytes.as_slice().try_into().ok()?)
        }
        _ => return None,
    };
    let id = match entry.get_str("op").ok()? {
        "i" | "d" => entry.get_document("o").ok()?.get("_id")?,
        "u" => entry.get_document("o2").ok()?.get("_id")?,
        _ => return None,
    };
    Some((ui, id.clone()))
}

/// The documents to save, by collection UUID: the current version of each one the undone
/// entries touched, once each, with the collection's namespace.
type Saved = BTreeMap<String, (String, Vec<Document>)>;

fn documents_to_save(db: &DocDb, undone: &[Document]) -> Result<Saved, String> {
    let mut seen = HashSet::new();
    let mut out = Saved::new();
    for (ui, id) in undone.iter().filter_map(touched) {
        if !seen.insert((ui, format!("{id:?}"))) {
            continue;
        }
        if let Some((ns, d)) = db.document_by_uuid(ui, &id).map_err(|e| e.message)? {
            out.entry(ui.to_string())
                .or_insert((ns, Vec::new()))
                .1
                .push(d);
        }
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Writes one file per collection, documents concatenated, synced with its directories;
/// returns the files written.
fn write_files(dir: &Path, saved: &Saved) -> std::io::Result<Vec<PathBuf>> {
    let stamp = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default()
        .replace(':', "-");
    let root = dir.join(ROLLBACK_DIR);
    let mut files = Vec::new();
    for (ui, (_, docs)) in saved {
        let coll_dir = root.join(ui);
        std::fs::create_dir_all(&coll_dir)?;
        let path = coll_dir.join(format!("removed.{stamp}.bson"));
        let mut bytes = Vec::new();
        for d in docs {
            d.to_writer(&mut bytes).map_err(std::io::Error::other)?;
        }
        let mut f = std::fs::File::create(&path)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        sync_dir(&coll_dir)?;
        files.push(path);
    }
    if !files.is_empty() {
        sync_dir(&root)?;
        sync_dir(dir)?;
    }
    Ok(files)
}

/// Saves the documents `undone` touched to rollback files under `dir` and logs what it saved.
pub fn save_documents(db: &DocDb, dir: &Path, undone: &[Document]) -> Result<(), String> {
    let saved = documents_to_save(db, undone)?;
    let files = write_files(dir, &saved).map_err(|e| format!("writing rollback files: {e}"))?;
    let count: usize = saved.values().map(|(_, d)| d.len()).sum();
    let namespaces: Vec<&str> = saved.values().map(|(ns, _)| ns.as_str()).collect();
    crate::log::warn(
        "ROLLBACK",
        &format!(
            "rolling back {} oplog entries of this member the set never committed: {count} documents of {namespaces:?} saved to {files:?}",
            undone.len()
        ),
    );
    Ok(())
}

/// Writes and syncs the marker that says a reset is under way.
fn mark(dir: &Path) -> Result<(), String> {
    let marker = dir.join(MARKER);
    let write = || -> std::io::Result<()> {
        std::fs::File::create(&marker)?.sync_all()?;
        sync_dir(dir)
    };
    write().map_err(|e| format!("{}: {e}", marker.display()))
}

/// Removes the marker: the reset is complete.
fn unmark(dir: &Path) -> Result<(), String> {
    let marker = dir.join(MARKER);
    let remove = || -> std::io::Result<()> {
        std::fs::remove_file(&marker)?;
        sync_dir(dir)
    };
    remove().map_err(|e| format!("{}: {e}", marker.display()))
}

/// Sets the replicated data, the oplog, the applier's record and the Raft state machine's
/// back to this member's last snapshot (or to empty, without one), under the marker: written
/// and synced first, removed last.
pub fn reset(db: &DocDb, dir: &Path) -> Result<(), String> {
    mark(dir)?;
    finish_reset(db, dir)
}

fn finish_reset(db: &DocDb, dir: &Path) -> Result<(), String> {
    let kv = db.engine().as_ref();
    match repl::state_machine::stored_snapshot(kv).map_err(|e| e.to_string())? {
        Some((pos, data)) => {
            let (_, contents) = stored::read_snapshot(&mut data.as_slice())?;
            db.install_replicated(&contents).map_err(|e| e.message)?;
            stored::set_record(kv, &Record::at_snapshot(pos, contents.ts()))?;
            repl::state_machine::rewind_to_snapshot(kv).map_err(|e| e.to_string())?;
            crate::log::warn(
                "ROLLBACK",
                &format!("restored this member's last snapshot, at {pos:?} (oplog {:?}); the committed log after it is applied again", contents.ts()),
            );
        }
        None => {
            db.reset_replicated().map_err(|e| e.message)?;
            stored::forget(kv)?;
            repl::state_machine::forget_applied(kv).map_err(|e| e.to_string())?;
        }
    }
    unmark(dir)
}

/// Initial sync's install: the replicated state becomes `contents` and the applier's record
/// `record`, under the marker (a crash part way is finished at start, from the member's own
/// last snapshot or from empty, and the leader sends its snapshot again).
pub fn install(
    db: &DocDb,
    dir: &Path,
    contents: &docdb::db::SnapshotContents,
    record: &Record,
) -> Result<(), String> {
    mark(dir)?;
    db.install_replicated(contents).map_err(|e| e.message)?;
    stored::set_record(db.engine().as_ref(), record)?;
    unmark(dir)
}

/// At start, before anything else of the set: a reset a crash interrupted is finished.
/// Whether there was one.
pub fn finish_interrupted(db: &DocDb, dir: &Path) -> Result<bool, String> {
    if !dir.join(MARKER).exists() {
        return Ok(false);
    }
    crate::log::warn(
        "ROLLBACK",
        "a rollback was interrupted: finishing its reset before the member starts",
    );
    finish_reset(db, dir)?;
    Ok(true)
}

/// The whole rollback of a member whose Raft node is not running: the rollback files, then
/// the reset. The node started next applies the committed log after the last snapshot (from
/// its first entry, without one).
pub fn roll_back(db: &DocDb, dir: &Path, record: &Record) -> Result<(), String> {
    if let Some(why) = refusal(db) {
        return Err(why);
    }
    let undone = undone_entries(db, record)?;
    save_documents(db, dir, &undone)?;
    reset(db, dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replset::applier::DocApplier;
    use crate::replset::stored::ZERO_TS;
    use bson::doc;
    use docdb::db::WriteOpts;
    use docdb::oplog::OplogSettings;
    use docdb::{DeleteStatement, DocDbConfig, UpdateStatement};
    use repl::{Applier, LogPosition};
    use std::sync::Arc;

    fn member(cfg: DocDbConfig) -> Arc<DocDb> {
        let mut cfg = cfg;
        cfg.oplog = Some(OplogSettings::from_mb(16.0).unwrap());
        DocDb::open(cfg).unwrap()
    }

    fn insert(db: &DocDb, ids: &[i32]) {
        let docs = ids.iter().map(|i| doc! {"_id": *i, "v": *i}).collect();
        let out = db.insert("app", "c", docs, WriteOpts::default());
        assert!(out.write_errors.is_empty());
    }

    fn entries(db: &DocDb) -> Vec<Document> {
        db.oplog()
            .unwrap()
            .entries_after(ZERO_TS, usize::MAX, usize::MAX)
            .unwrap()
    }

    fn bytes(d: &Document) -> Vec<u8> {
        let mut b = Vec::new();
        d.to_writer(&mut b).unwrap();
        b
    }

    fn docs(db: &DocDb) -> Vec<Document> {
        db.find("app", "c", &Default::default())
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Applies `log` as committed entries from index 1.
    fn apply_all(applier: &DocApplier, log: &[Document]) {
        for (i, e) in log.iter().enumerate() {
            let pos = LogPosition {
                term: 1,
                index: i as u64 + 1,
            };
            applier.apply(pos, &bytes(e)).unwrap();
        }
    }

    /// The set's log (made on a primary that never diverged), and a member that applied it
    /// and then, as a deposed primary, wrote what the set never got: an insert of 3, an
    /// update of 1 and a delete of 2.
    fn diverged_member(cfg: DocDbConfig) -> (Vec<Document>, Arc<DocDb>, DocApplier) {
        let origin = member(DocDbConfig::in_memory());
        insert(&origin, &[1, 2]);
        let log = entries(&origin);
        let db = member(cfg);
        let applier = DocApplier::open(db.clone(), Arc::default()).unwrap();
        apply_all(&applier, &log);
        insert(&db, &[3]);
        let up = UpdateStatement {
            q: doc! {"_id": 1},
            u: bson::Bson::Document(doc! {"$set": {"v": 10}}),
            ..Default::default()
        };
        let out = db.update("app", "c", &[up], WriteOpts::default());
        assert!(out.write_errors.is_empty());
        let del = DeleteStatement {
            q: doc! {"_id": 2},
            limit: 1,
            ..Default::default()
        };
        let out = db.delete("app", "c", &[del], WriteOpts::default());
        assert!(out.write_errors.is_empty());
        applier.check_accounted();
        assert!(applier.divergence.reason().is_some());
        (log, db, applier)
    }

    fn read_files(dir: &Path) -> Vec<(PathBuf, Vec<Document>)> {
        let mut out = Vec::new();
        let Ok(colls) = std::fs::read_dir(dir.join(ROLLBACK_DIR)) else {
            return out;
        };
        for coll in colls {
            for f in std::fs::read_dir(coll.unwrap().path()).unwrap() {
                let path = f.unwrap().path();
                let bytes = std::fs::read(&path).unwrap();
                let mut cur = bytes.as_slice();
                let mut docs = Vec::new();
                while !cur.is_empty() {
                    docs.push(Document::from_reader(&mut cur).unwrap());
                }
                out.push((path, docs));
            }
        }
        out
    }

    #[test]
    fn the_rollback_files_hold_exactly_the_documents_the_undone_writes_touched() {
        let dir = tempfile::tempdir().unwrap();
        let (_, db, applier) = diverged_member(DocDbConfig::in_memory());
        let undone = undone_entries(&db, &applier.record()).unwrap();
        assert_eq!(undone.len(), 3, "the insert, update and delete: {undone:?}");
        save_documents(&db, dir.path(), &undone).unwrap();
        let files = read_files(dir.path());
        assert_eq!(files.len(), 1, "one collection: {files:?}");
        let (path, saved) = &files[0];
        let uuid = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let coll = db.list_collections("app").unwrap();
        assert_eq!(
            uuid,
            coll[0].uuid.unwrap().to_string(),
            "named by its collection's uuid"
        );
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("removed."));
        // The current version of each: 3 as inserted, 1 as updated; 2 is deleted, so absent.
        assert_eq!(
            saved,
            &vec![doc! {"_id": 3, "v": 3}, doc! {"_id": 1, "v": 10}]
        );
    }

    #[test]
    fn after_the_rollback_and_the_log_applied_again_the_member_equals_one_that_never_diverged() {
        let dir = tempfile::tempdir().unwrap();
        let (log, db, applier) = diverged_member(DocDbConfig::in_memory());
        let record = applier.record();
        drop(applier);
        roll_back(&db, dir.path(), &record).unwrap();
        assert!(docs(&db).is_empty(), "no replicated data after the reset");
        assert!(entries(&db).is_empty(), "nor oplog");
        assert!(!dir.path().join(MARKER).exists());
        let again = DocApplier::open(db.clone(), Arc::default()).unwrap();
        assert_eq!(again.record(), Record::default());
        assert!(again.divergence.reason().is_none());
        apply_all(&again, &log);
        let never = member(DocDbConfig::in_memory());
        apply_all(
            &DocApplier::open(never.clone(), Arc::default()).unwrap(),
            &log,
        );
        assert_eq!(docs(&db), docs(&never));
        assert_eq!(entries(&db), entries(&never));
        assert_eq!(entries(&db), log);
    }

    #[test]
    fn a_reset_a_crash_interrupted_is_finished_at_the_next_start() {
        let data = tempfile::tempdir().unwrap();
        let (_, db, applier) = diverged_member(DocDbConfig::disk(data.path()));
        drop(applier);
        // The marker is down and the data reset, then the process dies before the records
        // are: the applier's record still says the log was applied.
        std::fs::File::create(data.path().join(MARKER)).unwrap();
        db.reset_replicated().unwrap();
        db.shutdown().unwrap();
        drop(db);
        let db = member(DocDbConfig::disk(data.path()));
        let stale = DocApplier::open(db.clone(), Arc::default())
            .unwrap()
            .record();
        assert!(stale.applied.is_some(), "not yet forgotten: {stale:?}");
        assert!(finish_interrupted(&db, data.path()).unwrap());
        assert!(!data.path().join(MARKER).exists());
        let fresh = DocApplier::open(db.clone(), Arc::default()).unwrap();
        assert_eq!(fresh.record(), Record::default());
        assert!(docs(&db).is_empty() && entries(&db).is_empty());
        assert!(!finish_interrupted(&db, data.path()).unwrap(), "once");
    }
}
