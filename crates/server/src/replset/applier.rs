//! The document layer as Raft's state machine: committed oplog entries applied through
//! `DocDb::apply_oplog_entry`, skipping those this member already holds (its own writes as
//! primary, or entries applied before a restart), and the bookkeeping that tells a member
//! whose data went past what Raft holds (docs/replication.md, "The server's replica set").

use bson::{Document, Timestamp};
use docdb::DocDb;
use engine::{KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
use parking_lot::Mutex;
use repl::{Applier, BoxError, LogPosition};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::stored::{
    oplog_entries, read_snapshot, ts_of, ts_u64, Record, CONFIG_ENTRY, RECORD_KEY, TABLE, ZERO_TS,
};

/// Why the member stopped serving data, once it has, until a rollback clears it.
#[derive(Default)]
pub struct Divergence {
    reason: Mutex<Option<String>>,
}

impl Divergence {
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().clone()
    }
    /// Records the first reason and logs it; later ones add nothing.
    pub fn diverge(&self, why: String) {
        let mut r = self.reason.lock();
        if r.is_none() {
            crate::log::warn(
                "REPL",
                &format!("{why}: this member refuses reads and writes and rolls back (docs/replication.md, \"Rollback\")"),
            );
            *r = Some(why);
        }
    }
    /// The member rolled back: it holds nothing the set does not have.
    pub fn clear(&self) {
        *self.reason.lock() = None;
    }
}

pub struct DocApplier {
    db: Arc<DocDb>,
    kv: Arc<dyn KvEngine>,
    table: TableId,
    /// Held across an entry's application and its record, so the divergence check never sees
    /// an entry in the oplog that the record does not yet account for.
    record: Mutex<Record>,
    pub divergence: Arc<Divergence>,
    /// Where a configuration entry goes (none in the unit tests).
    config: Option<Arc<super::SetConfig>>,
    /// Where an installed snapshot puts its reset's marker (`rollback::MARKER`): the member's
    /// dbPath (a unit test's own directory).
    marker_dir: Option<PathBuf>,
}

fn boxed(e: impl std::fmt::Display) -> BoxError {
    e.to_string().into()
}

impl DocApplier {
    /// Opens the applier's record in the database's engine; a member whose oplog holds entries
    /// past what its record accounts for (a primary that crashed between a write and its
    /// proposal, or before the record caught up) is diverged from the start.
    pub fn open(db: Arc<DocDb>, divergence: Arc<Divergence>) -> Result<DocApplier, String> {
        let kv = db.engine().clone();
        let table = match kv.table_id(TABLE) {
            Some(t) => t,
            None => kv
                .create_table(TABLE, &TableConfig::collection())
                .map_err(|e| e.to_string())?,
        };
        let record: Record = match kv.get(table, RECORD_KEY).map_err(|e| e.to_string())? {
            Some(b) => serde_json::from_slice(&b).map_err(|e| e.to_string())?,
            None => Record::default(),
        };
        let applier = DocApplier {
            db,
            kv,
            table,
            record: Mutex::new(record),
            divergence,
            config: None,
            marker_dir: None,
        };
        let local = ts_u64(applier.oplog_last_ts());
        if local > record.accounted_ts {
            applier.divergence.diverge(format!(
                "the oplog holds entries up to {local:#x} that the replicated log does not account for (up to {:#x})",
                record.accounted_ts
            ));
        }
        Ok(applier)
    }

    /// Adopts the configuration entries it applies into `config`.
    pub fn with_config(mut self, config: Arc<super::SetConfig>) -> DocApplier {
        self.config = Some(config);
        self
    }

    /// Puts an installed snapshot's reset marker in `dir`.
    pub fn with_marker_dir(mut self, dir: PathBuf) -> DocApplier {
        self.marker_dir = Some(dir);
        self
    }

    fn adopt_config(&self, next: &Document) -> Result<(), BoxError> {
        let Some(config) = &self.config else {
            return Ok(());
        };
        if config.adopt(next).map_err(|e| boxed(e.message))? {
            crate::log::info(
                "REPL",
                &format!(
                    "adopted the set's configuration version {}",
                    super::config_version(next)
                ),
            );
        }
        Ok(())
    }

    fn oplog_last_ts(&self) -> Timestamp {
        self.db.oplog().map_or(ZERO_TS, |o| o.last_ts())
    }

    fn save(&self, r: &Record) -> Result<(), BoxError> {
        let mut b = WriteBatch::new();
        b.put(
            self.table,
            RECORD_KEY,
            serde_json::to_vec(r).map_err(boxed)?,
        );
        self.kv
            .write(&b, WriteOptions { sync: false })
            .map_err(boxed)
    }

    /// This member (as primary) is about to propose the oplog entry with `ts`. Recorded
    /// before the proposal: the entry may commit and reach `apply` here before the proposal
    /// returns, and must not then look like a write the set never got.
    pub fn proposing(&self, ts: Timestamp) -> Result<(), BoxError> {
        let mut r = self.record.lock();
        r.accounted_ts = r.accounted_ts.max(ts_u64(ts));
        self.save(&r)
    }

    /// The durable record as it stands (what a rollback starts from).
    pub fn record(&self) -> Record {
        *self.record.lock()
    }

    /// Whether the oplog holds the entry `entry` itself (by `ts`, then content).
    fn holds(&self, entry: &Document, ts: Timestamp) -> Result<bool, BoxError> {
        let Some(oplog) = self.db.oplog() else {
            return Ok(false);
        };
        let before = ts_of(ts_u64(ts).saturating_sub(1));
        let found = oplog.entries_after(before, 1, usize::MAX).map_err(boxed)?;
        Ok(found.first() == Some(entry))
    }

    /// Checks that the oplog holds nothing Raft does not account for, when no write of this
    /// member's can be on its way to the log (it is not the primary).
    pub fn check_accounted(&self) {
        let r = self.record.lock();
        let local = ts_u64(self.oplog_last_ts());
        if local > r.accounted_ts {
            self.divergence.diverge(format!(
                "this member is no longer primary and its oplog holds writes up to {local:#x} that were never proposed to the set (proposed up to {:#x})",
                r.accounted_ts
            ));
        }
    }

    /// Applies one committed oplog entry, unless it is here already. An entry that is not
    /// this member's own arriving while the oplog holds own entries not yet committed means
    /// those were not committed before it and never will be: the member diverged (its log
    /// follows the leader's, so whatever of its own survived came before this entry).
    fn apply_entry(&self, r: &mut Record, entry: &Document) -> Result<(), BoxError> {
        let ts = entry.get_timestamp("ts").map_err(boxed)?;
        let local = self.oplog_last_ts();
        let own_pending = ts_u64(local) > r.applied_ts;
        let here = ts_u64(ts) <= ts_u64(local) && (!own_pending || self.holds(entry, ts)?);
        if own_pending && !here && self.divergence.reason().is_none() {
            self.divergence.diverge(format!(
                "an entry of another primary ({ts:?}) was committed while this member's oplog holds writes of its own the set never committed (up to {local:?})"
            ));
        }
        if self.divergence.reason().is_some() {
            return Ok(());
        }
        // Already here: this member wrote it as primary, or applied it before a restart.
        if !here {
            self.db.apply_oplog_entry(entry).map_err(boxed)?;
        }
        r.accounted_ts = r.accounted_ts.max(ts_u64(ts));
        r.applied_ts = r.applied_ts.max(ts_u64(ts));
        Ok(())
    }
}

impl Applier for DocApplier {
    fn apply(&self, pos: LogPosition, bytes: &[u8]) -> Result<(), BoxError> {
        let entry = Document::from_reader(bytes).map_err(boxed)?;
        let mut r = self.record.lock();
        match entry.get_document(CONFIG_ENTRY) {
            Ok(next) => self.adopt_config(next)?,
            Err(_) => {
                for e in oplog_entries(entry).map_err(boxed)? {
                    self.apply_entry(&mut r, &e)?;
                }
            }
        }
        debug_assert!(
            r.applied.is_none_or(|a| a.index < pos.index),
            "entries are applied in log order: {pos} after {:?}",
            r.applied
        );
        r.applied = Some(pos);
        self.save(&r)
    }

    fn last_applied(&self) -> Option<LogPosition> {
        self.record.lock().applied
    }

    fn snapshot(&self, out: &mut dyn Write) -> Result<Option<LogPosition>, BoxError> {
        let r = self.record.lock();
        if let Some(why) = self.divergence.reason() {
            return Err(format!("no snapshot of a diverged member: {why}").into());
        }
        // One engine snapshot: its oplog's newest entry says which writes it holds. Past
        // `applied_ts` are this member's own, not yet committed (it is the primary): they
        // must not reach another member, so the log asks again later.
        let snap = self.db.replicated_snapshot().map_err(boxed)?;
        let ts = ts_u64(snap.ts());
        if ts != r.applied_ts {
            return Err(format!(
                "the data holds writes up to {ts:#x} not yet committed (committed up to {:#x})",
                r.applied_ts
            )
            .into());
        }
        let head = match &self.config {
            Some(c) => bson::doc! {CONFIG_ENTRY: c.get()},
            None => Document::new(),
        };
        head.to_writer(&mut *out).map_err(boxed)?;
        snap.write_to(out).map_err(boxed)?;
        Ok(r.applied)
    }

    /// Initial sync: the state becomes the snapshot's (under the rollback marker, so a crash
    /// part way is finished at start), the record its position, and the set's configuration
    /// the one it carries if newer.
    fn install_snapshot(
        &self,
        pos: Option<LogPosition>,
        data: &mut dyn Read,
    ) -> Result<(), BoxError> {
        let (config, contents) = read_snapshot(data)?;
        let mut r = self.record.lock();
        let next = Record::at_snapshot(pos, contents.ts());
        let dir = self
            .marker_dir
            .clone()
            .ok_or("installing a snapshot needs the member's directory for its marker")?;
        super::rollback::install(&self.db, &dir, &contents, &next)?;
        *r = next;
        if let Some(config) = config {
            self.adopt_config(&config)?;
        }
        crate::log::info(
            "REPL",
            &format!(
                "installed a snapshot of the set's data at {pos:?} (oplog {:?})",
                contents.ts()
            ),
        );
        Ok(())
    }

    fn log_truncated(&self, from: LogPosition) {
        // The log's entries from `from` on were never committed; if this member holds writes
        // of its own not yet committed, some may have gone with them (the rollback finds
        // which: those the log no longer holds).
        let r = self.record.lock();
        let local = ts_u64(self.oplog_last_ts());
        if local > r.applied_ts {
            self.divergence.diverge(format!(
                "the log's entries from {from} on were removed while this member's oplog holds writes of its own up to {local:#x} not yet committed (committed up to {:#x})",
                r.applied_ts
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replset::stored::batch_bytes;
    use bson::doc;
    use docdb::db::WriteOpts;
    use docdb::oplog::OplogSettings;
    use docdb::DocDbConfig;

    fn member() -> Arc<DocDb> {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings::from_mb(16.0).unwrap());
        DocDb::open(cfg).unwrap()
    }

    fn write(db: &DocDb, ids: &[i32]) -> Vec<Document> {
        let docs = ids.iter().map(|i| doc! {"_id": *i}).collect();
        let out = db.insert("app", "c", docs, WriteOpts::default());
        assert!(out.write_errors.is_empty());
        entries(db)
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

    fn count(db: &DocDb) -> usize {
        db.find("app", "c", &Default::default()).unwrap().count()
    }

    fn pos(index: u64) -> LogPosition {
        LogPosition { term: 1, index }
    }

    fn ts(e: &Document) -> Timestamp {
        e.get_timestamp("ts").unwrap()
    }

    #[test]
    fn a_fresh_member_holds_nothing_the_log_does_not_account_for() {
        // Opening docdb writes no oplog entry of its own (no internal collection goes through
        // the write path), so a new member does not start diverged.
        let db = member();
        assert!(entries(&db).is_empty());
        let applier = DocApplier::open(db.clone(), Arc::default()).unwrap();
        assert!(applier.divergence.reason().is_none());
        // Nor does the local database, nor a profiler's collection.
        for (d, c) in [("local", "startup_log"), ("app", "system.profile")] {
            let out = db.insert(d, c, vec![doc! {"_id": 1}], WriteOpts::default());
            assert!(out.write_errors.is_empty());
        }
        applier.check_accounted();
        assert!(applier.divergence.reason().is_none());
        assert!(entries(&db).is_empty());
    }

    #[test]
    fn a_secondary_applies_each_entry_once() {
        let log = write(&member(), &[1, 2]);
        assert!(log.len() >= 3, "the create and two inserts: {log:?}");
        let secondary = member();
        let applier = DocApplier::open(secondary.clone(), Arc::default()).unwrap();
        for (i, e) in log.iter().enumerate() {
            applier.apply(pos(i as u64 + 1), &bytes(e)).unwrap();
        }
        assert_eq!(count(&secondary), 2);
        assert_eq!(entries(&secondary), log);
        // Given again (a restart that lost the record): nothing is applied twice.
        for (i, e) in log.iter().enumerate() {
            applier.apply(pos(i as u64 + 10), &bytes(e)).unwrap();
        }
        assert_eq!(entries(&secondary), log);
        assert_eq!(applier.last_applied(), Some(pos(log.len() as u64 + 9)));
        applier.check_accounted();
        assert!(applier.divergence.reason().is_none());
    }

    #[test]
    fn a_batch_entry_carries_a_writes_entries_and_applies_them_in_order() {
        let log = write(&member(), &[1, 2, 3]);
        let batch = batch_bytes(&log).unwrap();
        let carried = oplog_entries(Document::from_reader(batch.as_slice()).unwrap()).unwrap();
        assert_eq!(carried, log);
        // One entry travels bare, as before batches.
        assert_eq!(batch_bytes(&log[..1]).unwrap(), bytes(&log[0]));
        let secondary = member();
        let applier = DocApplier::open(secondary.clone(), Arc::default()).unwrap();
        applier.apply(pos(1), &batch).unwrap();
        assert_eq!((count(&secondary), entries(&secondary)), (3, log.clone()));
        assert_eq!(applier.record().applied_ts, ts_u64(ts(log.last().unwrap())));
        // Given again: nothing is applied twice.
        applier.apply(pos(2), &batch).unwrap();
        assert_eq!(entries(&secondary), log);
    }

    #[test]
    fn the_primary_skips_its_own_entries_and_diverges_when_the_log_drops_one() {
        let primary = member();
        let applier = DocApplier::open(primary.clone(), Arc::default()).unwrap();
        let log = write(&primary, &[1, 2]);
        for (i, e) in log.iter().enumerate() {
            // Committed and applied before the proposal returned: still the primary's own.
            applier.proposing(ts(e)).unwrap();
            applier.apply(pos(i as u64 + 1), &bytes(e)).unwrap();
        }
        assert_eq!((count(&primary), entries(&primary)), (2, log.clone()));
        applier.check_accounted();
        applier.log_truncated(pos(log.len() as u64 + 1));
        assert!(
            applier.divergence.reason().is_none(),
            "everything of ours is committed"
        );
        // A write proposed but not committed, then the log loses its tail.
        let more = write(&primary, &[3]);
        applier.proposing(ts(more.last().unwrap())).unwrap();
        applier.check_accounted();
        assert!(applier.divergence.reason().is_none(), "on its way");
        applier.log_truncated(pos(log.len() as u64 + 1));
        let why = applier.divergence.reason().expect("diverged");
        assert!(why.contains("not yet committed"), "{why}");
    }

    #[test]
    fn an_entry_of_another_primary_at_an_earlier_ts_is_not_taken_for_ours() {
        // A deposed primary whose own write is not committed, and the new primary's entry
        // with a ts at or before it (clocks): it is not this member's, so the member diverged.
        let deposed = member();
        let applier = DocApplier::open(deposed.clone(), Arc::default()).unwrap();
        let other = write(&member(), &[7]);
        let own = write(&deposed, &[1]);
        for e in &own {
            applier.proposing(ts(e)).unwrap();
        }
        assert!(ts_u64(ts(&other[0])) <= ts_u64(ts(own.last().unwrap())));
        applier.apply(pos(1), &bytes(&other[0])).unwrap();
        let why = applier.divergence.reason().expect("diverged");
        assert!(why.contains("another primary"), "{why}");
    }

    #[test]
    fn a_configuration_entry_is_adopted_once_and_only_when_newer() {
        let dir = tempfile::tempdir().unwrap();
        let v = |version: i32| doc! {"_id": "rs0", "version": version, "members": []};
        let config = Arc::new(super::super::SetConfig::new(dir.path().into(), 1, v(2)));
        let db = member();
        let applier = DocApplier::open(db.clone(), Arc::default())
            .unwrap()
            .with_config(config.clone());
        let entry = |version: i32| bytes(&doc! {CONFIG_ENTRY: v(version)});
        applier.apply(pos(1), &entry(1)).unwrap();
        assert_eq!(
            super::super::config_version(&config.get()),
            2,
            "an older one is not taken"
        );
        applier.apply(pos(2), &entry(3)).unwrap();
        assert_eq!(super::super::config_version(&config.get()), 3);
        assert!(
            dir.path().join(super::super::STATE_FILE).exists(),
            "kept for a restart"
        );
        assert_eq!(applier.last_applied(), Some(pos(2)));
        // Not an oplog entry: nothing is written to the data or the oplog.
        assert!(entries(&db).is_empty());
        applier.check_accounted();
        assert!(applier.divergence.reason().is_none());
    }

    fn snapshot_of(applier: &DocApplier) -> Result<(Option<LogPosition>, Vec<u8>), BoxError> {
        let mut out = Vec::new();
        let pos = applier.snapshot(&mut out)?;
        Ok((pos, out))
    }

    #[test]
    fn a_secondarys_snapshot_installed_on_a_fresh_member_makes_it_the_same() {
        let origin = member();
        let log = write(&origin, &[1, 2, 3]);
        let secondary = member();
        let applier = DocApplier::open(secondary.clone(), Arc::default()).unwrap();
        for (i, e) in log.iter().enumerate() {
            applier.apply(pos(i as u64 + 1), &bytes(e)).unwrap();
        }
        let (at, data) = snapshot_of(&applier).unwrap();
        assert_eq!(at, Some(pos(log.len() as u64)));
        let dir = tempfile::tempdir().unwrap();
        let fresh = member();
        let joining = DocApplier::open(fresh.clone(), Arc::default())
            .unwrap()
            .with_marker_dir(dir.path().into());
        joining.install_snapshot(at, &mut data.as_slice()).unwrap();
        assert!(!dir.path().join(super::super::rollback::MARKER).exists());
        assert_eq!(count(&fresh), 3);
        assert_eq!(joining.last_applied(), at);
        assert_eq!(joining.record(), applier.record());
        let reopened = DocApplier::open(fresh.clone(), Arc::default()).unwrap();
        assert_eq!(reopened.record(), applier.record(), "durable");
        assert!(reopened.divergence.reason().is_none());
        // The log after the snapshot applies on top of it.
        let more = write(&origin, &[4]);
        joining
            .apply(pos(log.len() as u64 + 1), &bytes(more.last().unwrap()))
            .unwrap();
        assert_eq!(count(&fresh), 4);
        // A damaged one is refused and the state stays.
        let e = joining
            .install_snapshot(at, &mut &data[..data.len() - 3])
            .unwrap_err();
        assert!(e.to_string().contains("damaged"), "{e}");
        assert_eq!(count(&fresh), 4);
    }

    #[test]
    fn the_primary_takes_no_snapshot_while_it_holds_writes_not_yet_committed() {
        let primary = member();
        let applier = DocApplier::open(primary.clone(), Arc::default()).unwrap();
        let log = write(&primary, &[1]);
        for e in &log {
            applier.proposing(ts(e)).unwrap();
        }
        let e = snapshot_of(&applier).unwrap_err();
        assert!(e.to_string().contains("not yet committed"), "{e}");
        for (i, e) in log.iter().enumerate() {
            applier.apply(pos(i as u64 + 1), &bytes(e)).unwrap();
        }
        let (at, _) = snapshot_of(&applier).unwrap();
        assert_eq!(at, Some(pos(log.len() as u64)), "once they are");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "entries are applied in log order")]
    fn an_entry_applied_out_of_log_order_trips_the_assertion() {
        let log = write(&member(), &[1]);
        let applier = DocApplier::open(member(), Arc::default()).unwrap();
        applier.apply(pos(5), &bytes(&log[0])).unwrap();
        applier.apply(pos(4), &bytes(&log[1])).unwrap();
    }

    #[test]
    fn writes_never_proposed_make_the_member_diverge() {
        // Diverged, the member rolls back (rollback.rs's tests; the old behaviour was to
        // refuse service until resynced by hand).
        // At start: the oplog holds entries the record does not account for.
        let crashed = member();
        write(&crashed, &[1]);
        let at_start = DocApplier::open(crashed, Arc::default()).unwrap();
        assert!(at_start.divergence.reason().is_some());
        // A deposed primary's unproposed write, then another primary's entry.
        let deposed = member();
        let applier = DocApplier::open(deposed.clone(), Arc::default()).unwrap();
        write(&deposed, &[1]);
        let other = write(&member(), &[7]);
        applier.apply(pos(1), &bytes(&other[0])).unwrap();
        let why = applier.divergence.reason().expect("diverged");
        assert!(why.contains("another primary"), "{why}");
        assert_eq!(count(&deposed), 1, "nothing applied once diverged");
        // The background check finds the same without new entries.
        let idle = member();
        let applier = DocApplier::open(idle.clone(), Arc::default()).unwrap();
        write(&idle, &[1]);
        applier.check_accounted();
        assert!(applier.divergence.reason().is_some());
    }
}
