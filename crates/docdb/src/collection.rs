//! A collection at run time: its record-store table (`RecordId → BSON`), its index tables, and
//! the write primitives that turn one document change into one atomic engine batch (the
//! collection put/delete plus every index entry put/delete).
//!
//! Concurrency:
//! - `state` (RwLock): every document write holds it shared; index builds/drops, collection
//!   drop and rename hold it exclusively, so a write never races an index list change.
//! - document locks (64 stripes by RecordId): held by update/delete/findAndModify from the
//!   re-read of a document to its write, so two updates of one document never interleave
//!   (no lost `$inc`).
//! - unique-key locks (256 stripes by (index, key)): a write that adds keys to unique indexes
//!   takes the stripes of those keys (sorted, so no deadlock), then checks the index and
//!   writes while holding them. Two writers of the same unique key are therefore serialized
//!   and the second sees the first's entry; writers of different keys rarely share a stripe.
//!   Lock order: state → one document lock → key stripes in ascending order → catalog lock.

use crate::catalog::{CollEntry, IndexEntry};
use crate::index::{self, DocKeys, RecordId};
pub use crate::index::{ambiguous_key_pattern, decode_doc, encode_doc, find_index, Index};
use crate::scope::Hooks;
use crate::storage_error;
use bson::{Bson, Document, Uuid};
use engine::{Direction, KvEngine, TableId, WriteBatch, WriteOptions};
use parking_lot::{Mutex, MutexGuard, RwLock};
use query::error::{DocError, DocResult};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

const DOC_STRIPES: usize = 64;
const KEY_STRIPES: usize = 256;
/// mongod's BSONObjMaxUserSize.
pub const MAX_DOC_SIZE: usize = 16 * 1024 * 1024;

pub struct CollState {
    pub indexes: Vec<Arc<Index>>,
    pub options: Document,
    pub next_index_ident: i64,
    /// Set when the collection was dropped or renamed away; holders of a stale handle retry.
    pub dropped: bool,
}

impl CollState {
    /// The indexes the planner and hints may use: all but the hidden ones.
    pub fn visible_indexes(&self) -> Vec<Arc<Index>> {
        self.indexes
            .iter()
            .filter(|i| !i.def.hidden)
            .cloned()
            .collect()
    }
}

/// A capped collection's limits (`create` with `capped: true`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capped {
    /// Bytes of documents kept (mongod rounds `size` up to a multiple of 256, at least 4096).
    pub size: i64,
    /// Documents kept, if given.
    pub max: Option<i64>,
}

impl Capped {
    /// From a collection's stored options (validated at create).
    pub fn from_options(o: &Document) -> Option<Capped> {
        if !o.get_bool("capped").unwrap_or(false) {
            return None;
        }
        let num = |k: &str| match o.get(k) {
            Some(Bson::Int32(i)) => Some(*i as i64),
            Some(Bson::Int64(i)) => Some(*i),
            Some(Bson::Double(d)) => Some(*d as i64),
            _ => None,
        };
        let size = num("size").unwrap_or(0).max(4096);
        Some(Capped {
            size: (size + 255) / 256 * 256,
            max: num("max").filter(|&m| m > 0),
        })
    }
}

/// A time-series bucket still taking measurements (the bucket collection's in-memory
/// catalog of them, by meta value: mongod's BucketCatalog).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenBucket {
    pub id: bson::oid::ObjectId,
    /// The bucket's time, rounded down (`control.min.<timeField>`), in milliseconds.
    pub min_time: i64,
    /// Measurements it holds.
    pub count: u32,
}

pub struct Coll {
    pub db: String,
    pub name: String,
    pub ns: String,
    pub uuid: Uuid,
    pub ident: String,
    pub table: TableId,
    pub engine: Arc<dyn KvEngine>,
    catalog_table: TableId,
    pub state: RwLock<CollState>,
    next_rid: AtomicI64,
    doc_locks: Vec<Mutex<()>>,
    key_locks: Vec<Mutex<()>>,
    catalog_lock: Mutex<()>,
    hooks: Arc<Hooks>,
    /// (document count, data size in bytes), computed on first use, then maintained.
    counts: crate::txn::SharedCounts,
    pub capped: Option<Capped>,
    /// Serializes a capped collection's inserts, so RecordId order is insertion order and
    /// the oldest documents are the first ones.
    pub capped_lock: Mutex<()>,
    /// Wakes this collection's tailable cursors on insert and kills them on drop/rename.
    pub tail: Arc<crate::cursor::TailSignal>,
    /// A time-series bucket collection's open buckets, by meta value (its BSON); the lock
    /// serializes the collection's measurement inserts.
    pub open_buckets: Mutex<std::collections::HashMap<Vec<u8>, OpenBucket>>,
    /// The document validator, from the collection's options (`collMod` replaces it).
    validator: RwLock<Option<Arc<crate::validation::Validator>>>,
    /// The collection's default collation (`create` option `collation`).
    pub default_collation: Option<Arc<query::collation::Collation>>,
    /// `changeStreamPreAndPostImages: {enabled: true}`: its updates' and deletes' oplog
    /// entries keep the document before them (`collMod` switches it).
    pre_images: std::sync::atomic::AtomicBool,
}

impl Coll {
    /// The handle of the collection `entry` describes (its database and name are the entry's
    /// namespace's), over its open tables.
    pub fn new(
        engine: Arc<dyn KvEngine>,
        catalog_table: TableId,
        entry: &CollEntry,
        table: TableId,
        indexes: Vec<Arc<Index>>,
        hooks: Arc<Hooks>,
    ) -> DocResult<Coll> {
        // RecordIds continue after the largest one stored.
        let last = engine
            .scan(
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Reverse,
            )
            .map_err(storage_error)?
            .next()
            .transpose()
            .map_err(storage_error)?;
        let next = match last {
            Some((k, _)) => index::rid_from(&k)? + 1,
            None => 1,
        };
        let (db, name) = crate::catalog::split_ns(&entry.ns)
            .ok_or_else(|| DocError::internal_error(format!("bad catalog ns {}", entry.ns)))?;
        Ok(Coll {
            db: db.to_string(),
            name: name.to_string(),
            ns: entry.ns.clone(),
            uuid: entry.uuid,
            ident: entry.ident.clone(),
            table,
            engine,
            catalog_table,
            state: RwLock::new(CollState {
                indexes,
                options: entry.options.clone(),
                next_index_ident: entry.next_index_ident,
                dropped: false,
            }),
            next_rid: AtomicI64::new(next),
            doc_locks: (0..DOC_STRIPES).map(|_| Mutex::new(())).collect(),
            key_locks: (0..KEY_STRIPES).map(|_| Mutex::new(())).collect(),
            catalog_lock: Mutex::new(()),
            hooks,
            counts: Arc::default(),
            capped: Capped::from_options(&entry.options),
            capped_lock: Mutex::new(()),
            tail: Arc::default(),
            open_buckets: Mutex::default(),
            validator: RwLock::new(
                crate::validation::Validator::from_options(&entry.options)?.map(Arc::new),
            ),
            default_collation: match entry.options.get_document("collation") {
                Ok(c) => query::collation::Collation::parse_from(
                    c,
                    query::collation::SpecOrigin::Stored,
                )?,
                Err(_) => None,
            },
            pre_images: AtomicBool::new(pre_images_enabled(&entry.options)),
        })
    }

    /// Readies a collection before it is published: a capped collection's counts must be
    /// known before its first insert (computing them later would need the state lock its
    /// inserts hold).
    pub fn prepare(&self) -> DocResult<()> {
        if self.capped.is_some() {
            self.counts()?;
        }
        Ok(())
    }

    /// The document validator in force.
    pub fn validator(&self) -> Option<Arc<crate::validation::Validator>> {
        self.validator.read().clone()
    }

    /// Replaces the validator (`collMod`; the caller holds `state` exclusively, so no write
    /// is between its check and its batch).
    /// Whether its writes' oplog entries keep pre-images for change streams.
    pub fn keeps_pre_images(&self) -> bool {
        self.pre_images.load(Ordering::Acquire)
    }

    /// Takes `changeStreamPreAndPostImages` from the collection's (new) options.
    pub fn set_pre_images(&self, options: &Document) {
        self.pre_images
            .store(pre_images_enabled(options), Ordering::Release);
    }

    pub fn set_validator(&self, v: Option<crate::validation::Validator>) {
        *self.validator.write() = v.map(Arc::new);
    }

    /// Checks a document against the collection's validator (unless bypassed), under the
    /// collection's default collation whatever the statement's (as mongod evaluates it).
    pub fn validate(&self, new: &Document, old: Option<&Document>, bypass: bool) -> DocResult<()> {
        match (self.validator(), bypass) {
            (Some(v), false) => {
                let _default = query::collation::scope(self.default_collation.clone());
                v.check(&self.ns, new, old)
            }
            _ => Ok(()),
        }
    }

    /// Inserts a prepared document (validated; for a capped collection, in insertion order,
    /// then the oldest documents past the limits are deleted).
    pub fn insert_doc(
        &self,
        st: &CollState,
        doc: &Document,
        sync: bool,
        bypass_validation: bool,
    ) -> DocResult<()> {
        // A dropped handle's tables are gone or going: a write there would be lost.
        assert!(!st.dropped, "an insert into the dropped {}", self.ns);
        assert!(
            doc.keys().next().is_some_and(|k| k == "_id"),
            "an inserted document is prepared (its _id leads): {doc}"
        );
        self.validate(doc, None, bypass_validation)?;
        let _order = self.capped.map(|_| self.capped_lock.lock());
        let rid = self.next_rid();
        self.write_doc(st, rid, None, Some(doc), sync)?;
        self.trim_capped(st, sync)?;
        if self.capped.is_some() {
            self.tail.notify_insert();
        }
        Ok(())
    }

    /// Deletes the oldest documents until the capped limits hold (caller holds `capped_lock`
    /// and `state` shared). Counts must be known already (see [`Coll::counts`]).
    pub fn trim_capped(&self, st: &CollState, sync: bool) -> DocResult<u64> {
        let Some(cap) = self.capped else { return Ok(0) };
        let mut removed = 0;
        loop {
            let (n, size) = self
                .counts
                .lock()
                .expect("capped counts are computed at open");
            if n <= cap.max.unwrap_or(i64::MAX) && size <= cap.size {
                return Ok(removed);
            }
            let oldest = self
                .engine
                .scan_all(self.table)
                .map_err(storage_error)?
                .next()
                .transpose()
                .map_err(storage_error)?;
            let Some((k, v)) = oldest else {
                return Ok(removed);
            };
            let rid = index::rid_from(&k)?;
            let _lock = self.lock_doc(rid);
            let old = decode_doc(&v)?;
            self.write_doc(st, rid, Some(&old), None, sync)?;
            removed += 1;
        }
    }

    pub fn entry(&self, st: &CollState) -> CollEntry {
        CollEntry {
            ns: self.ns.clone(),
            uuid: self.uuid,
            options: st.options.clone(),
            ident: self.ident.clone(),
            indexes: st
                .indexes
                .iter()
                .map(|i| IndexEntry {
                    def: i.def.clone(),
                    ident: i.ident.clone(),
                    multikey: i.is_multikey(),
                })
                .collect(),
            next_index_ident: st.next_index_ident,
        }
    }

    /// Writes this collection's catalog entry (from the current state).
    pub fn persist_entry(&self, st: &CollState) -> DocResult<()> {
        self.persist_entry_logged(st, None)
    }

    /// Writes this collection's catalog entry, with the oplog entry of the command that
    /// changed it (`o`, logged when the database keeps an oplog) in the same batch.
    pub fn persist_entry_logged(&self, st: &CollState, command: Option<Document>) -> DocResult<()> {
        let _g = self.catalog_lock.lock();
        let entry = self.entry(st);
        entry.assert_consistent();
        self.assert_tables_open(st);
        let bytes = encode_doc(&entry.to_doc())?;
        let mut b = WriteBatch::new();
        b.put(self.catalog_table, self.ns.as_bytes().to_vec(), bytes);
        match command {
            Some(o) => {
                let record = || crate::oplog::OpRecord::command(&self.db, Some(self.uuid), o);
                self.write_logged(&mut b, record, (None, None), true)?
            }
            None => self.engine.write(&b, WriteOptions { sync: true }),
        }
        .map_err(storage_error)?;
        Ok(())
    }

    /// The catalog entry matches its tables: the collection's and every index's table name
    /// opens the very table the handle writes to.
    fn assert_tables_open(&self, st: &CollState) {
        assert_eq!(
            self.engine.table_id(&self.ident),
            Some(self.table),
            "collection {}: its table {} is open",
            self.ns,
            self.ident
        );
        for i in &st.indexes {
            assert_eq!(
                self.engine.table_id(&i.ident),
                Some(i.table),
                "collection {}: index {} has its table {}",
                self.ns,
                i.def.name,
                i.ident
            );
        }
    }

    pub fn get(&self, rid: RecordId) -> DocResult<Option<Document>> {
        match self
            .engine
            .get(self.table, &index::rid_bytes(rid))
            .map_err(storage_error)?
        {
            Some(v) => Ok(Some(decode_doc(&v)?)),
            None => Ok(None),
        }
    }

    pub fn lock_doc(&self, rid: RecordId) -> MutexGuard<'_, ()> {
        self.doc_locks[(rid as u64 as usize) % DOC_STRIPES].lock()
    }

    fn key_stripe(table: TableId, key: &[u8]) -> usize {
        let mut h = DefaultHasher::new();
        table.hash(&mut h);
        key.hash(&mut h);
        (h.finish() as usize) % KEY_STRIPES
    }

    /// Marks indexes multikey (durably, before the document that makes them so).
    fn note_multikey(&self, st: &CollState, which: &[usize]) -> DocResult<()> {
        let mut changed = false;
        for &i in which {
            if !st.indexes[i].multikey.swap(true, Ordering::AcqRel) {
                changed = true;
            }
        }
        if changed {
            self.persist_entry(st)?;
        }
        Ok(())
    }

    pub fn keys_for(&self, st: &CollState, doc: &Document) -> DocResult<Vec<DocKeys>> {
        st.indexes
            .iter()
            .map(|i| index::doc_keys(&i.def, doc))
            .collect()
    }

    /// Inserts, updates or deletes one document: `old` is the stored version (with its
    /// RecordId) or none; `new` the version to store or none. One atomic batch; unique keys are
    /// checked under their key locks first, so a violation writes nothing.
    pub fn write_doc(
        &self,
        st: &CollState,
        rid: RecordId,
        old: Option<&Document>,
        new: Option<&Document>,
        sync: bool,
    ) -> DocResult<()> {
        assert!(
            old.is_some() || new.is_some(),
            "a write stores or removes a document"
        );
        check_id_kept(old, new);
        debug_assert!(
            old.is_some() || self.get(rid).is_ok_and(|d| d.is_none()),
            "an insert's RecordId {rid} names no stored document in {}",
            self.ns
        );
        let old_keys = match old {
            Some(d) => self.keys_for(st, d)?,
            None => Vec::new(),
        };
        let new_bytes = new.map(checked_bytes).transpose()?;
        let new_keys = match new {
            Some(d) => self.keys_for(st, d)?,
            None => Vec::new(),
        };
        let mut batch = WriteBatch::new();
        let staged = stage_index_writes(
            &st.indexes,
            rid,
            old.map(|d| (d, old_keys.as_slice())),
            new.map(|d| (d, new_keys.as_slice())),
            &mut batch,
        );
        match &new_bytes {
            Some(b) => batch.put(self.table, index::rid_bytes(rid).to_vec(), b.clone()),
            None => batch.delete(self.table, index::rid_bytes(rid).to_vec()),
        }
        let _guards = self.check_unique(st, rid, &staged.unique_checks)?;
        self.note_multikey(st, &staged.multikey)?;
        if let Some(txn) = crate::txn::current() {
            return self.stage_in_txn(&txn, &batch, old, new, new_bytes.as_deref());
        }
        self.commit(&mut batch, old, new, sync)?;
        self.count_write(old, new_bytes.as_deref())
    }

    /// Stages a document write's batch in the transaction of the thread's statement instead
    /// of writing it; the totals change when the transaction commits.
    fn stage_in_txn(
        &self,
        txn: &Arc<crate::txn::Txn>,
        batch: &WriteBatch,
        old: Option<&Document>,
        new: Option<&Document>,
        new_bytes: Option<&[u8]>,
    ) -> DocResult<()> {
        if self.capped.is_some() {
            return Err(crate::txn::not_in_transaction(format!(
                "Collection '{}' is a capped collection. Writes in transactions are not \
                 allowed on capped collections.",
                self.ns
            )));
        }
        if !crate::oplog::is_replicated(&self.db, &self.name) {
            // Its entries would go to the secondaries, which keep their own `local`.
            return Err(crate::txn::not_in_transaction(format!(
                "Cannot write to {} in a multi-document transaction: it is not replicated",
                self.ns
            )));
        }
        if self.hooks.write_hook().is_some() {
            return Err(crate::txn::not_in_transaction(format!(
                "{}: writes of a sharded collection's shard are not allowed in a transaction",
                self.ns
            )));
        }
        let old_size = old
            .map(|d| encode_doc(d).map(|b| b.len() as i64))
            .transpose()?;
        txn.stage(crate::txn::StagedWrite {
            batch,
            record: crate::oplog::OpRecord::for_write(
                &self.ns,
                self.uuid,
                (old, new),
                self.keeps_pre_images(),
            ),
            counts: self.counts.clone(),
            count_delta: (
                new.is_some() as i64 - old.is_some() as i64,
                new_bytes.map_or(0, |b| b.len() as i64) - old_size.unwrap_or(0),
            ),
        })
    }

    /// Locks the stripes of the unique keys a write adds and checks that no other document
    /// holds them; the guards keep them until the write commits.
    pub(crate) fn check_unique(
        &self,
        st: &CollState,
        rid: RecordId,
        unique_checks: &[(usize, &index::IndexKey)],
    ) -> DocResult<Vec<MutexGuard<'_, ()>>> {
        // A key checked on a non-unique index would be looked up without its RecordId suffix
        // and never found: the duplicate would go in.
        assert!(
            unique_checks.iter().all(|(i, _)| st.indexes[*i].def.unique),
            "unique keys are checked on unique indexes only"
        );
        let mut stripes: Vec<usize> = unique_checks
            .iter()
            .map(|(i, k)| Self::key_stripe(st.indexes[*i].table, &k.encoded))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let guards: Vec<_> = stripes.iter().map(|&s| self.key_locks[s].lock()).collect();
        for (i, k) in unique_checks {
            let idx = &st.indexes[*i];
            if let Some(v) = self
                .engine
                .get(idx.table, &k.encoded)
                .map_err(storage_error)?
            {
                if index::rid_from(&v)? != rid {
                    return Err(DocError::duplicate_key(
                        &self.ns,
                        &idx.def.name,
                        idx.def.key.clone(),
                        index::key_value_doc(&idx.def, &k.values),
                    ));
                }
            }
        }
        Ok(guards)
    }

    /// Writes the batch, through the write hook when one is set.
    fn commit(
        &self,
        batch: &mut WriteBatch,
        old: Option<&Document>,
        new: Option<&Document>,
        sync: bool,
    ) -> DocResult<()> {
        // Held until the batch is written, so no transaction commits between its lock check
        // and the write.
        let _gate = match self.hooks.txns() {
            Some(t) => Some(t.plain_write(batch)?),
            None => None,
        };
        let token = match self.hooks.write_hook() {
            Some(h) => h.before(&self.ns, old, new, batch)?,
            None => None,
        };
        let record = || {
            let pre_images = self.keeps_pre_images();
            crate::oplog::OpRecord::for_write(&self.ns, self.uuid, (old, new), pre_images)
        };
        let written = self.write_logged(batch, record, (old, new), sync);
        if let Some(t) = token {
            t.finish(matches!(written, Ok(Ok(()))));
        }
        written?.map_err(storage_error)?;
        Ok(())
    }

    /// Writes `batch` with the oplog entry `record` makes, when the database keeps an oplog
    /// and this collection is replicated (`oplog::is_replicated`); else just the batch. The outer error:
    /// nothing was written; the inner: the engine's.
    pub(crate) fn write_logged(
        &self,
        batch: &mut WriteBatch,
        record: impl FnOnce() -> crate::oplog::OpRecord,
        images: crate::oplog::Images<'_>,
        sync: bool,
    ) -> DocResult<engine::Result<()>> {
        let write = |b: &WriteBatch| self.engine.write(b, WriteOptions { sync });
        match self.hooks.oplog() {
            Some(log) if crate::oplog::is_replicated(&self.db, &self.name) => {
                log.write_logged(batch, record, images, write)
            }
            _ => Ok(write(batch)),
        }
    }

    /// Keeps the (count, size) totals, once known, in step with a committed write.
    pub(crate) fn count_write(
        &self,
        old: Option<&Document>,
        new_bytes: Option<&[u8]>,
    ) -> DocResult<()> {
        let old_size = old
            .map(|d| encode_doc(d).map(|b| b.len() as i64))
            .transpose()?;
        let mut c = self.counts.lock();
        if let Some((n, size)) = c.as_mut() {
            *n += new_bytes.is_some() as i64 - old.is_some() as i64;
            *size += new_bytes.map(|b| b.len() as i64).unwrap_or(0) - old_size.unwrap_or(0);
            // Below zero, a document was removed that the totals never counted: a capped
            // collection would trim by them.
            assert!(
                *n >= 0 && *size >= 0,
                "{}: the counts stay whole ({n} documents, {size} bytes)",
                self.ns
            );
        }
        Ok(())
    }

    pub fn next_rid(&self) -> RecordId {
        self.next_rid.fetch_add(1, Ordering::AcqRel)
    }

    pub fn rid_counter(&self) -> RecordId {
        self.next_rid.load(Ordering::Acquire)
    }

    /// (count, data size); computed by one scan the first time (writers are excluded by the
    /// caller holding `state` exclusively or by the count being already known).
    pub fn counts(&self) -> DocResult<(i64, i64)> {
        if let Some(c) = *self.counts.lock() {
            return Ok(c);
        }
        let _excl = self.state.write();
        // The totals are the committed documents', whatever transaction this thread is in.
        let _outside = crate::txn::suspend();
        let mut n = 0;
        let mut size = 0;
        for kv in self.engine.scan_all(self.table).map_err(storage_error)? {
            let (_, v) = kv.map_err(storage_error)?;
            n += 1;
            size += v.len() as i64;
        }
        *self.counts.lock() = Some((n, size));
        Ok((n, size))
    }

    /// Size of a table's entries (keys + values), for stats.
    pub fn table_bytes(&self, table: TableId) -> DocResult<i64> {
        let mut size = 0i64;
        for kv in self.engine.scan_all(table).map_err(storage_error)? {
            let (k, v) = kv.map_err(storage_error)?;
            size += (k.len() + v.len()) as i64;
        }
        Ok(size)
    }
}
/// A document to store, encoded: within the nesting and size limits.
fn checked_bytes(d: &Document) -> DocResult<Vec<u8>> {
    query::limits::check_stored_depth(d)?;
    let bytes = encode_doc(d)?;
    if bytes.len() > MAX_DOC_SIZE {
        return Err(DocError::bson_object_too_large(format!(
            "object to insert too large. size in bytes: {}, max size: {MAX_DOC_SIZE}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// A stored document has an `_id`, and an update keeps it (equal and of the same type: the
/// update paths refuse any other, ImmutableField). A write that broke this would leave a
/// document the `_id` index cannot find.
fn check_id_kept(old: Option<&Document>, new: Option<&Document>) {
    let Some(new) = new else { return };
    let new_id = new.get("_id");
    assert!(new_id.is_some(), "a stored document has an _id: {new}");
    if let Some(old_id) = old.and_then(|o| o.get("_id")) {
        let new_id = new_id.expect("checked above");
        assert!(
            query::compare::compare_bson(old_id, new_id) == std::cmp::Ordering::Equal
                && old_id.element_type() == new_id.element_type(),
            "an update keeps the document's _id: {old_id} became {new_id}"
        );
    }
}

/// The index entries one write stages: the unique keys it adds (index position, key), to be
/// checked against other documents, and the indexes it makes multikey.
pub(crate) struct StagedIndexWrites<'k> {
    pub unique_checks: Vec<(usize, &'k index::IndexKey)>,
    pub multikey: Vec<usize>,
}

/// Stages in `batch` the index entries that change when the document at `rid` goes from
/// `old` to `new` (each with its keys, one [`DocKeys`] per index): the old document's entries
/// that the new one lacks are deleted, the new one's that the old lacked are put.
///
/// Asserted, as an index that disagreed with its documents would answer queries wrongly from
/// then on: RecordIds are positive; each side gives one key set per index; and (in debug
/// builds, as it extracts the keys again) the keys given are exactly those each index's spec
/// extracts from that side's document.
pub(crate) fn stage_index_writes<'k>(
    indexes: &[Arc<Index>],
    rid: RecordId,
    old: Option<(&Document, &'k [DocKeys])>,
    new: Option<(&Document, &'k [DocKeys])>,
    batch: &mut WriteBatch,
) -> StagedIndexWrites<'k> {
    assert!(rid > 0, "RecordIds are positive: {rid}");
    for (doc, keys) in old.iter().chain(new.iter()) {
        assert_eq!(
            keys.len(),
            indexes.len(),
            "one key set per index for the document {doc}"
        );
        debug_assert!(
            keys_match(indexes, doc, keys),
            "the index keys given are the document's own: {doc}"
        );
    }
    let mut staged = StagedIndexWrites {
        unique_checks: Vec::new(),
        multikey: Vec::new(),
    };
    let no_keys: &'k [index::IndexKey] = &[];
    for (i, idx) in indexes.iter().enumerate() {
        let unique = idx.def.unique;
        let ok = old.map_or(no_keys, |(_, k)| k[i].keys.as_slice());
        let nk = new.map_or(no_keys, |(_, k)| k[i].keys.as_slice());
        if new.is_some_and(|(_, k)| k[i].multikey) && !idx.is_multikey() {
            staged.multikey.push(i);
        }
        for k in ok {
            if !nk.iter().any(|n| n.encoded == k.encoded) {
                batch.delete(idx.table, index::entry_key(unique, &k.encoded, rid));
            }
        }
        for k in nk {
            if !ok.iter().any(|o| o.encoded == k.encoded) {
                let value = if unique {
                    index::rid_bytes(rid).to_vec()
                } else {
                    k.payload.clone()
                };
                batch.put(idx.table, index::entry_key(unique, &k.encoded, rid), value);
                if unique {
                    staged.unique_checks.push((i, k));
                }
            }
        }
    }
    staged
}

/// Whether `keys` are, index by index, the encoded keys each index's spec extracts from `doc`.
fn keys_match(indexes: &[Arc<Index>], doc: &Document, keys: &[DocKeys]) -> bool {
    indexes.iter().zip(keys).all(|(idx, given)| {
        index::doc_keys(&idx.def, doc).is_ok_and(|want| {
            want.keys.len() == given.keys.len()
                && want
                    .keys
                    .iter()
                    .zip(&given.keys)
                    .all(|(w, g)| w.encoded == g.encoded && w.payload == g.payload)
        })
    })
}

/// Checks a document for insertion and puts `_id` first (generating an ObjectId if missing).
/// Field names are stored as given, `$`-prefixed and dotted ones included, at any level (mongod
/// 5.0+); only `_id`'s own value is checked.
pub fn prepare_insert(doc: Document) -> DocResult<Document> {
    let id = doc
        .get("_id")
        .cloned()
        .unwrap_or_else(|| Bson::ObjectId(bson::oid::ObjectId::new()));
    check_id(&id)?;
    if doc.keys().next().map(String::as_str) == Some("_id") {
        return Ok(doc);
    }
    let mut out = Document::new();
    out.insert("_id", id);
    for (k, v) in doc {
        if k != "_id" {
            out.insert(k, v);
        }
    }
    Ok(out)
}

pub fn check_id(id: &Bson) -> DocResult<()> {
    let what = match id {
        Bson::Array(_) => "an array",
        Bson::RegularExpression(_) => "a regex",
        Bson::Undefined => "a undefined",
        _ => return check_id_fields(id),
    };
    Err(DocError::bad_value(format!("can't use {what} for _id")))
}

fn check_id_fields(id: &Bson) -> DocResult<()> {
    if let Bson::Document(d) = id {
        for k in d.keys() {
            if k.starts_with('$') {
                return Err(DocError::dollar_prefixed_field_name(format!(
                    "_id fields may not contain '$'-prefixed fields: {k} is not valid for storage."
                )));
            }
        }
    }
    Ok(())
}

/// Whether options (as stored) ask for change streams' pre- and post-images.
fn pre_images_enabled(options: &Document) -> bool {
    options
        .get_document("changeStreamPreAndPostImages")
        .and_then(|d| d.get_bool("enabled"))
        .unwrap_or(false)
}
