//! A replica-set member's replicated state as one stream (docs/replication.md, "Snapshots"):
//! what initial sync copies to a new member and what a rollback restores. Taken from ONE
//! engine snapshot, so it is consistent without stopping writes; its position is the oplog's
//! newest entry in that snapshot, which the stream carries so the new member's oplog starts
//! there (as mongod's initial sync starts the oplog at its sync point).
//!
//! The stream is BSON documents, in this order:
//!
//! ```text
//! { flashdocSnapshot: 1, ts: Timestamp }                 header: format version, position
//! { oplog: BinData }                                     the entry at `ts` (absent when empty)
//! { catalog: "<ns>", entry: BinData }                    a replicated collection's or view's
//!                                                        catalog entry (options, index specs)
//! { table: "<ident>", k: BinData, v: BinData }           one record of a table the catalog
//!                                                        entries before it name, or of the
//!                                                        session table (config.transactions)
//! { end: <records before it> }                           the trailer: a torn stream lacks it
//! ```
//!
//! The tables are copied record for record (documents, index keys, session records), so a
//! member that installs a snapshot holds the same collections under the same UUIDs, the same
//! indexes (unique ones enforced from their own keys) and the same users and roles (which
//! are documents of `admin.system.users` and `admin.system.roles`).

use super::{open_coll, DocDb};
use crate::catalog::{self, CollEntry};
use crate::collection::decode_doc;
use crate::oplog::{is_replicated, SESSIONS_TABLE};
use crate::storage_error;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document, Timestamp};
use engine::{Direction, KvPair, TableConfig, WriteBatch, WriteOptions};
use query::error::{DocError, DocResult};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::ops::Bound;
use std::sync::Arc;

/// The version of the stream's format this build writes and reads.
pub const SNAPSHOT_FORMAT: i32 = 1;
const HEADER: &str = "flashdocSnapshot";
/// Records written per engine batch when a snapshot is loaded.
const LOAD_BATCH: usize = 1024;

fn torn(why: impl std::fmt::Display) -> DocError {
    DocError::with_code(
        22,
        "InvalidBSON",
        format!("the replicated-state snapshot is damaged: {why}"),
    )
}

fn bin(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

fn bytes_of(d: &Document, key: &str) -> DocResult<Vec<u8>> {
    match d.get(key) {
        Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
        _ => Err(torn(format!("a record without its '{key}' bytes: {d}"))),
    }
}

fn ts_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

fn ts_of(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

fn write_doc(out: &mut dyn Write, d: &Document) -> DocResult<()> {
    let mut b = Vec::new();
    d.to_writer(&mut b)
        .map_err(|e| DocError::internal_error(e.to_string()))?;
    out.write_all(&b)
        .map_err(|e| DocError::internal_error(format!("writing the snapshot: {e}")))
}

/// The next document of the stream; `None` at its end (between two documents).
fn read_doc(r: &mut dyn Read) -> DocResult<Option<Document>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(torn("it ends inside a record's length")),
            Ok(n) => got += n,
            Err(e) => return Err(torn(e)),
        }
    }
    let n = i32::from_le_bytes(len);
    if !(5..=64 * 1024 * 1024).contains(&n) {
        return Err(torn(format!("a record of {n} bytes")));
    }
    let mut bytes = len.to_vec();
    bytes.resize(n as usize, 0);
    r.read_exact(&mut bytes[4..])
        .map_err(|e| torn(format!("it ends inside a record ({e})")))?;
    Document::from_reader(bytes.as_slice())
        .map(Some)
        .map_err(torn)
}

/// The replicated state as of one engine snapshot, ready to be written out.
pub struct ReplicatedSnapshot<'a> {
    db: &'a DocDb,
    snap: engine::Snapshot,
    /// The oplog's newest entry in `snap` (`ts` and bytes): the snapshot's position.
    last: Option<(u64, Vec<u8>)>,
}

impl ReplicatedSnapshot<'_> {
    /// The position: the `ts` of the newest oplog entry it holds (`Timestamp(0, 0)` if none).
    pub fn ts(&self) -> Timestamp {
        ts_of(self.last.as_ref().map_or(0, |(ts, _)| *ts))
    }

    /// Writes the stream (module docs); returns the records written between header and end.
    pub fn write_to(&self, out: &mut dyn Write) -> DocResult<u64> {
        let db = self.db;
        write_doc(out, &doc! {HEADER: SNAPSHOT_FORMAT, "ts": self.ts()})?;
        let mut records = 0u64;
        if let Some((_, entry)) = &self.last {
            write_doc(out, &doc! {"oplog": bin(entry.clone())})?;
            records += 1;
        }
        let catalog = db.scan_at(&self.snap, db.catalog_table)?;
        for (k, v) in catalog {
            let entry = decode_doc(&v)?;
            let ns = String::from_utf8(k).map_err(|e| DocError::internal_error(e.to_string()))?;
            let Some((d, c)) = catalog::split_ns(&ns) else {
                continue;
            };
            if !is_replicated(d, c) {
                continue;
            }
            write_doc(out, &doc! {"catalog": &ns, "entry": bin(v)})?;
            records += 1;
            if entry.get_document("view").is_ok() {
                continue;
            }
            let e = CollEntry::from_doc(&entry)?;
            let idents = std::iter::once(&e.ident).chain(e.indexes.iter().map(|i| &i.ident));
            for ident in idents {
                records += self.write_table(out, ident)?;
            }
        }
        if db.oplog().is_some() {
            records += self.write_table(out, SESSIONS_TABLE)?;
        }
        write_doc(out, &doc! {"end": records as i64})?;
        Ok(records)
    }

    fn write_table(&self, out: &mut dyn Write, ident: &str) -> DocResult<u64> {
        let table = self.db.engine.table_id(ident).ok_or_else(|| {
            DocError::internal_error(format!(
                "the snapshot's catalog names missing table {ident}"
            ))
        })?;
        let mut n = 0;
        for (k, v) in self.db.scan_at(&self.snap, table)? {
            write_doc(out, &doc! {"table": ident, "k": bin(k), "v": bin(v)})?;
            n += 1;
        }
        Ok(n)
    }
}

/// A snapshot read whole and checked (header, version, every record, the trailer) before
/// anything of the member's state is replaced.
#[derive(Debug, Default)]
pub struct SnapshotContents {
    ts: u64,
    oplog_entry: Option<Vec<u8>>,
    /// Catalog entries by namespace (raw, as stored).
    catalog: Vec<(String, Vec<u8>)>,
    /// Records by table ident (the session table's under its own name).
    tables: BTreeMap<String, Vec<KvPair>>,
}

impl SnapshotContents {
    /// The position the snapshot was taken at (its oplog's newest `ts`).
    pub fn ts(&self) -> Timestamp {
        ts_of(self.ts)
    }

    /// Reads a stream [`ReplicatedSnapshot::write_to`] wrote; a stream cut short, with a bad
    /// header or a version this build does not know, or a record naming a table no catalog
    /// entry before it names, is refused.
    pub fn read(r: &mut dyn Read) -> DocResult<SnapshotContents> {
        let header = read_doc(r)?.ok_or_else(|| torn("it is empty"))?;
        let version = match header.get(HEADER) {
            Some(Bson::Int32(v)) => *v,
            _ => return Err(torn(format!("no snapshot header: {header}"))),
        };
        if version != SNAPSHOT_FORMAT {
            return Err(DocError::bad_value(format!(
                "the replicated-state snapshot has format version {version}; this build reads version {SNAPSHOT_FORMAT} only"
            )));
        }
        let ts = header
            .get_timestamp("ts")
            .map_err(|_| torn(format!("no position in the header: {header}")))?;
        let mut c = SnapshotContents {
            ts: ts_u64(ts),
            ..SnapshotContents::default()
        };
        let mut records = 0i64;
        loop {
            let d = read_doc(r)?.ok_or_else(|| torn("it ends before its trailer"))?;
            if let Ok(end) = d.get_i64("end") {
                if end != records {
                    return Err(torn(format!("{records} records, the trailer says {end}")));
                }
                break;
            }
            c.take(&d)?;
            records += 1;
        }
        if read_doc(r)?.is_some() {
            return Err(torn("records after its trailer"));
        }
        Ok(c)
    }

    /// Takes one record.
    fn take(&mut self, d: &Document) -> DocResult<()> {
        if d.contains_key("oplog") {
            self.oplog_entry = Some(bytes_of(d, "oplog")?);
        } else if let Ok(ns) = d.get_str("catalog") {
            let v = bytes_of(d, "entry")?;
            let entry = decode_doc(&v)?;
            if entry.get_document("view").is_err() {
                let e = CollEntry::from_doc(&entry)?;
                let idents = std::iter::once(&e.ident).chain(e.indexes.iter().map(|i| &i.ident));
                for ident in idents {
                    self.tables.insert(ident.clone(), Vec::new());
                }
            }
            self.catalog.push((ns.to_string(), v));
        } else if let Ok(ident) = d.get_str("table") {
            let kv = (bytes_of(d, "k")?, bytes_of(d, "v")?);
            match self.tables.get_mut(ident) {
                Some(records) => records.push(kv),
                None if ident == SESSIONS_TABLE => {
                    self.tables.entry(ident.to_string()).or_default().push(kv);
                }
                None => {
                    return Err(torn(format!(
                        "records of table {ident}, which no entry names"
                    )))
                }
            }
        } else {
            return Err(torn(format!("an unknown record: {d}")));
        }
        Ok(())
    }
}

impl DocDb {
    /// Every record of `table` in `snap`, in key order.
    fn scan_at(&self, snap: &engine::Snapshot, table: engine::TableId) -> DocResult<Vec<KvPair>> {
        self.engine
            .scan_at(
                snap,
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .map_err(storage_error)?
            .map(|kv| kv.map_err(storage_error))
            .collect()
    }

    /// The replicated state now, from one engine snapshot (a member's only: it needs the
    /// oplog for its position).
    pub fn replicated_snapshot(&self) -> DocResult<ReplicatedSnapshot<'_>> {
        let oplog = self
            .oplog()
            .ok_or_else(|| DocError::illegal_operation("a snapshot is a replica-set member's"))?;
        let snap = self.engine.snapshot().map_err(storage_error)?;
        let last = oplog.last_at(&snap)?;
        Ok(ReplicatedSnapshot {
            db: self,
            snap,
            last,
        })
    }

    /// Replaces the replicated state with a snapshot's: [`DocDb::reset_replicated`], then the
    /// collections' tables and catalog entries, the views, the session records, and the
    /// oplog started at the snapshot's entry. The caller keeps the marker that says a reset
    /// is under way (a crash before the end is repaired by resetting again).
    pub fn install_replicated(&self, c: &SnapshotContents) -> DocResult<()> {
        self.reset_replicated()?;
        let _g = self.ddl.lock();
        let oplog = self
            .oplog()
            .ok_or_else(|| DocError::illegal_operation("a snapshot is a replica-set member's"))?;
        let entries = self.load_tables(c)?;
        let mut batch = WriteBatch::new();
        for (ns, v) in &c.catalog {
            batch.put(self.catalog_table, ns.as_bytes().to_vec(), v.clone());
        }
        self.engine
            .write(&batch, WriteOptions { sync: true })
            .map_err(storage_error)?;
        self.register_loaded(c, entries)?;
        if let Some(entry) = &c.oplog_entry {
            oplog.start_at(c.ts, entry)?;
        }
        Ok(())
    }

    /// Creates each collection's tables and writes their records (not synced: the catalog's
    /// synced batch after them makes them durable); returns the collections' entries.
    fn load_tables(&self, c: &SnapshotContents) -> DocResult<Vec<CollEntry>> {
        let mut entries = Vec::new();
        for (_, v) in &c.catalog {
            let d = decode_doc(v)?;
            if d.get_document("view").is_err() {
                entries.push(CollEntry::from_doc(&d)?);
            }
        }
        for e in &entries {
            e.assert_consistent();
            self.load_table(&e.ident, &self.cfg.collection_table, c)?;
            for i in &e.indexes {
                let mut icfg = self.cfg.index_table.clone();
                icfg.id_index = i.def.is_id();
                self.load_table(&i.ident, &icfg, c)?;
            }
        }
        if let Some(records) = c.tables.get(SESSIONS_TABLE) {
            let table = self.engine.table_id(SESSIONS_TABLE).ok_or_else(|| {
                DocError::internal_error("a member's session table is missing".to_string())
            })?;
            self.write_records(table, records)?;
        }
        Ok(entries)
    }

    fn load_table(&self, ident: &str, cfg: &TableConfig, c: &SnapshotContents) -> DocResult<()> {
        // A table left by an earlier load a crash cut short holds records of its own.
        if self.engine.table_id(ident).is_some() {
            self.engine.drop_table(ident).map_err(storage_error)?;
        }
        let table = self
            .engine
            .create_table(ident, cfg)
            .map_err(storage_error)?;
        self.write_records(table, c.tables.get(ident).map_or(&[][..], Vec::as_slice))
    }

    fn write_records(&self, table: engine::TableId, records: &[KvPair]) -> DocResult<()> {
        for chunk in records.chunks(LOAD_BATCH) {
            let mut batch = WriteBatch::new();
            for (k, v) in chunk {
                batch.put(table, k.clone(), v.clone());
            }
            self.engine
                .write(&batch, WriteOptions { sync: false })
                .map_err(storage_error)?;
        }
        Ok(())
    }

    /// Opens the loaded collections and views in memory, as open does.
    fn register_loaded(&self, c: &SnapshotContents, entries: Vec<CollEntry>) -> DocResult<()> {
        for (ns, v) in &c.catalog {
            if let Ok(view) = decode_doc(v)?.get_document("view") {
                let def = super::ViewDef::from_stored(view)?;
                self.views.write().insert(ns.clone(), def);
            }
        }
        for e in entries {
            let table = self.engine.table_id(&e.ident).ok_or_else(|| {
                DocError::internal_error(format!("a loaded table is missing: {}", e.ident))
            })?;
            let coll = open_coll(&self.engine, self.catalog_table, &e, table, &self.hooks)?;
            self.colls.write().insert(e.ns.clone(), Arc::new(coll));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::test_member as member;
    use crate::db::WriteOpts;
    use crate::oplog::sessions::session_key;
    use crate::oplog::{with_retryable_write, RetryableWrite};
    use crate::DocDbConfig;
    use bson::Uuid;

    fn insert(db: &DocDb, d: &str, c: &str, docs: Vec<Document>) {
        let out = db.insert(d, c, docs, WriteOpts::default());
        assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    }

    fn all(db: &DocDb, d: &str, c: &str) -> Vec<Document> {
        db.find(d, c, &Default::default())
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    fn names(db: &DocDb) -> Vec<String> {
        let mut out = Vec::new();
        for d in db.list_databases().unwrap() {
            for c in db.list_collections(&d.name).unwrap() {
                out.push(format!("{}.{} {:?}", d.name, c.name, c.uuid));
            }
        }
        out.sort();
        out
    }

    /// A member with a collection with options and a unique index, a view, a user, a
    /// retryable write's session record and an unreplicated collection.
    fn source() -> (Arc<DocDb>, Document) {
        let db = member(DocDbConfig::in_memory());
        db.create_collection("app", "c", &doc! {"validator": {"x": {"$gte": 0}}})
            .unwrap();
        db.create_indexes(
            "app",
            "c",
            &[doc! {"key": {"x": 1}, "name": "x_1", "unique": true}],
        )
        .unwrap();
        insert(
            &db,
            "app",
            "c",
            (0..50).map(|i| doc! {"_id": i, "x": i}).collect(),
        );
        db.create_collection(
            "app",
            "v",
            &doc! {"viewOn": "c", "pipeline": [{"$match": {"x": {"$lt": 3}}}]},
        )
        .unwrap();
        insert(
            &db,
            "admin",
            "system.users",
            vec![doc! {"_id": "app.ann", "user": "ann", "db": "app"}],
        );
        let lsid = doc! {"id": Uuid::new()};
        let w = RetryableWrite {
            lsid: lsid.clone(),
            txn_number: 7,
            first_stmt_id: 0,
            image: None,
        };
        with_retryable_write(w, || {
            insert(&db, "app", "c", vec![doc! {"_id": 100, "x": 100}])
        });
        insert(&db, "local", "startup_log", vec![doc! {"_id": 1}]);
        (db, lsid)
    }

    fn dump(db: &DocDb) -> (Timestamp, Vec<u8>) {
        let snap = db.replicated_snapshot().unwrap();
        let mut out = Vec::new();
        snap.write_to(&mut out).unwrap();
        (snap.ts(), out)
    }

    fn install(db: &DocDb, bytes: &[u8]) -> DocResult<()> {
        let c = SnapshotContents::read(&mut &bytes[..])?;
        db.install_replicated(&c)
    }

    #[test]
    fn an_installed_snapshot_holds_the_same_collections_indexes_users_and_sessions() {
        let (src, lsid) = source();
        let (ts, bytes) = dump(&src);
        assert_eq!(ts, src.oplog().unwrap().last_ts());
        let dir = tempfile::tempdir().unwrap();
        let fresh = member(DocDbConfig::disk(dir.path()));
        insert(&fresh, "old", "gone", vec![doc! {"_id": 1}]);
        insert(&fresh, "local", "mine", vec![doc! {"_id": 1}]);
        install(&fresh, &bytes).unwrap();
        let kept: Vec<String> = names(&fresh)
            .into_iter()
            .filter(|n| n.starts_with("local.mine"))
            .collect();
        assert_eq!(kept.len(), 1, "the unreplicated collection stays");
        let check = |db: &DocDb| {
            let replicated: Vec<String> = names(&src)
                .into_iter()
                .filter(|n| !n.starts_with("local."))
                .collect();
            let here: Vec<String> = names(db)
                .into_iter()
                .filter(|n| !n.starts_with("local."))
                .collect();
            assert_eq!(here, replicated, "same namespaces, same uuids");
            assert_eq!(all(db, "app", "c"), all(&src, "app", "c"));
            assert_eq!(all(db, "app", "v"), all(&src, "app", "v"), "the view");
            assert_eq!(
                all(db, "admin", "system.users"),
                all(&src, "admin", "system.users")
            );
            assert_eq!(
                db.list_indexes("app", "c").unwrap(),
                src.list_indexes("app", "c").unwrap()
            );
            let rec = db
                .oplog()
                .unwrap()
                .sessions()
                .lookup(&session_key(&lsid), 7, 0)
                .unwrap();
            assert!(rec.is_some(), "the retryable write's record");
            // The unique index is enforced from its copied keys.
            let out = db.insert(
                "app",
                "c",
                vec![doc! {"_id": 500, "x": 7}],
                WriteOpts::default(),
            );
            assert_eq!(
                out.write_errors[0].error.code, 11000,
                "{:?}",
                out.write_errors
            );
            // The validator (a collection option) came along.
            let out = db.insert(
                "app",
                "c",
                vec![doc! {"_id": 501, "x": -1}],
                WriteOpts::default(),
            );
            assert_eq!(
                out.write_errors[0].error.code, 121,
                "{:?}",
                out.write_errors
            );
        };
        assert_eq!(
            fresh.oplog().unwrap().last_ts(),
            ts,
            "the oplog starts at the snapshot"
        );
        check(&fresh);
        // New entries follow the snapshot's.
        insert(&fresh, "app", "d", vec![doc! {"_id": 1}]);
        assert!(ts_u64(fresh.oplog().unwrap().last_ts()) > ts_u64(ts));
        fresh.drop_collection("app", "d").unwrap();
        fresh.shutdown().unwrap();
        drop(fresh);
        let reopened = member(DocDbConfig::disk(dir.path()));
        check(&reopened);
    }

    #[test]
    fn a_torn_or_foreign_stream_is_refused_and_the_old_state_stays() {
        let (src, _) = source();
        let (_, bytes) = dump(&src);
        let (target, _) = source();
        let before = all(&target, "app", "c");
        for cut in [0, 3, 10, bytes.len() / 2, bytes.len() - 1] {
            let e = install(&target, &bytes[..cut]).unwrap_err();
            assert_eq!(
                (e.code, e.code_name),
                (22, "InvalidBSON"),
                "cut at {cut}: {e:?}"
            );
        }
        let mut extra = bytes.clone();
        extra.extend_from_slice(&bytes);
        assert!(install(&target, &extra)
            .unwrap_err()
            .message
            .contains("after its trailer"));
        let mut foreign = Vec::new();
        doc! {"hello": 1}.to_writer(&mut foreign).unwrap();
        assert!(install(&target, &foreign)
            .unwrap_err()
            .message
            .contains("no snapshot header"));
        let mut newer = Vec::new();
        doc! {HEADER: 2, "ts": Timestamp { time: 1, increment: 1 }}
            .to_writer(&mut newer)
            .unwrap();
        doc! {"end": 0i64}.to_writer(&mut newer).unwrap();
        let e = install(&target, &newer).unwrap_err();
        assert_eq!(e.code_name, "BadValue");
        assert!(e.message.contains("format version 2"), "{e:?}");
        assert_eq!(all(&target, "app", "c"), before, "nothing was replaced");
    }

    #[test]
    fn an_install_a_crash_cut_short_is_redone_whole() {
        // A crash after some tables were loaded, before the catalog: installing again (as
        // the marker has the member do) drops the half-loaded tables and loads them anew.
        let (src, _) = source();
        let (_, bytes) = dump(&src);
        let c = SnapshotContents::read(&mut &bytes[..]).unwrap();
        let fresh = member(DocDbConfig::in_memory());
        fresh.reset_replicated().unwrap();
        let _ = fresh.load_tables(&c).unwrap();
        fresh.install_replicated(&c).unwrap();
        assert_eq!(all(&fresh, "app", "c"), all(&src, "app", "c"));
    }

    #[test]
    #[should_panic(expected = "an oplog starts at a snapshot only when empty")]
    fn an_oplog_that_holds_entries_is_not_started_at_a_snapshot() {
        let (src, _) = source();
        let (ts, _) = dump(&src);
        src.oplog().unwrap().start_at(ts_u64(ts) + 1, b"x").unwrap();
    }
}
