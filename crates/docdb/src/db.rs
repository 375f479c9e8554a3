//! The document database: the public API the wire server calls (catalog commands, writes,
//! queries, explain, stats). See docs/docdb.md for the design.
#![allow(clippy::result_large_err)]

use crate::catalog::{self, CollEntry, IndexEntry, CATALOG_TABLE};
use crate::collection::{self, decode_doc, encode_doc, Coll, CollState, Index};
use crate::config::DocDbConfig;
use crate::cursor::{DocCursor, Exec, ExecStats};
use crate::index::{self, IndexDef, RecordId};
use crate::planner::{self, Access, Plan};
use crate::scope::{self, Hooks, WriteHook};
use crate::storage_error;
use bson::{doc, Bson, Document, Uuid};
use engine::{Direction, KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
use parking_lot::{Mutex, RwLock};
use query::aggregate;
use query::collation;
use query::compare::compare_bson;
use query::error::{DocError, DocResult};
use query::interrupt::Interrupt;
use query::matcher::Matcher;
use query::path;
use query::projection::Projection;
use query::sort::SortSpec;
use query::update::{self, Update};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Weak};

/// mongod's limit on indexes per collection.
const MAX_INDEXES: usize = 64;
/// Documents per engine batch while building an index.
const BUILD_BATCH: usize = 512;
/// Candidates a single-document write collects (some may stop matching before they are locked).
const ONE_TARGET: usize = 64;
/// Documents the TTL monitor deletes per batch.
pub const TTL_BATCH: usize = 1000;

#[derive(Clone, Debug, PartialEq)]
pub struct DatabaseInfo {
    pub name: String,
    pub size_on_disk: u64,
    pub empty: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CollectionInfo {
    pub name: String,
    pub options: Document,
    pub uuid: Uuid,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateIndexesOutcome {
    pub num_indexes_before: i32,
    pub num_indexes_after: i32,
    pub created_collection_automatically: bool,
    /// "all indexes already exist" when nothing was created.
    pub note: Option<String>,
}

#[derive(Clone, Debug)]
pub struct WriteOpts {
    /// Stop at the first failing statement (default) or try them all.
    pub ordered: bool,
    /// `j: true`: the batch is in the synced journal before the call returns.
    pub journal: bool,
    /// Checked before each statement and for each document a statement visits.
    pub interrupt: Interrupt,
    /// Skip document validation (`bypassDocumentValidation`).
    pub bypass_validation: bool,
}

impl Default for WriteOpts {
    fn default() -> Self {
        WriteOpts {
            ordered: true,
            journal: false,
            interrupt: Interrupt::none(),
            bypass_validation: false,
        }
    }
}

/// Options of an aggregation.
#[derive(Clone, Debug, Default)]
pub struct AggregateOpts {
    pub interrupt: Interrupt,
    /// The aggregation's collation (`{locale: ...}`); None: the collection's default.
    pub collation: Option<Document>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WriteError {
    /// Position of the failing statement in the request.
    pub index: usize,
    pub error: DocError,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteOutcome {
    /// insert: documents inserted; update: documents matched plus upserted; delete: deleted.
    pub n: u64,
    pub n_modified: u64,
    /// (statement index, `_id`) of each upserted document.
    pub upserted: Vec<(usize, Bson)>,
    pub write_errors: Vec<WriteError>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UpdateStatement {
    pub q: Document,
    /// Update operators, a replacement document, or a pipeline (array).
    pub u: Bson,
    pub upsert: bool,
    pub multi: bool,
    pub array_filters: Option<Vec<Document>>,
    /// The statement's collation; None: the collection's default.
    pub collation: Option<Document>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DeleteStatement {
    pub q: Document,
    /// 0: all matching documents; 1: the first.
    pub limit: i64,
    /// The statement's collation; None: the collection's default.
    pub collation: Option<Document>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FindAndModify {
    pub query: Document,
    pub sort: Option<Document>,
    pub update: Option<Bson>,
    pub remove: bool,
    /// Return the document after the update (default: before).
    pub new: bool,
    pub fields: Option<Document>,
    pub upsert: bool,
    pub array_filters: Option<Vec<Document>>,
    pub journal: bool,
    pub collation: Option<Document>,
    pub interrupt: Interrupt,
    pub bypass_validation: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FindAndModifyOutcome {
    pub value: Option<Document>,
    /// lastErrorObject.n
    pub n: u64,
    /// lastErrorObject.updatedExisting
    pub updated_existing: bool,
    /// lastErrorObject.upserted
    pub upserted: Option<Bson>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FindQuery {
    pub filter: Document,
    pub projection: Option<Document>,
    pub sort: Option<Document>,
    pub skip: u64,
    /// None or 0: no limit; a negative limit is taken as its absolute value.
    pub limit: Option<i64>,
    /// An index name, a key pattern, or `{$natural: ±1}`.
    pub hint: Option<Bson>,
    /// Checked for every document examined (and, for a cursor, every document returned).
    pub interrupt: Interrupt,
    /// The query's collation (`{locale: ...}`); None: the collection's default.
    pub collation: Option<Document>,
    /// A tailable cursor on a capped collection: it stays open at the end of the data and
    /// returns documents inserted later.
    pub tailable: bool,
}

pub struct DocDb {
    engine: Arc<dyn KvEngine>,
    cfg: DocDbConfig,
    catalog_table: TableId,
    colls: RwLock<BTreeMap<String, Arc<Coll>>>,
    /// Serializes catalog changes (create, drop, rename, index builds and drops).
    ddl: Mutex<()>,
    hooks: Arc<Hooks>,
    /// What the server should warn about once it starts (stored collations today's rules
    /// refuse).
    startup_warnings: Vec<String>,
    me: Weak<DocDb>,
}

fn table_name_coll(uuid: &Uuid) -> String {
    format!("collection-{uuid}")
}

fn table_name_index(uuid: &Uuid, n: i64) -> String {
    format!("index-{uuid}-{n}")
}

/// A warning per stored collation of a collection (default or index) that today's rules
/// refuse.
fn legacy_collation_warnings(c: &Coll, e: &CollEntry) -> Vec<String> {
    let default = c
        .default_collation
        .iter()
        .map(|coll| ("its default collation".to_string(), coll));
    let indexes = e.indexes.iter().filter_map(|i| {
        let coll = i.def.collation.as_ref()?;
        Some((format!("index '{}'", i.def.name), coll))
    });
    default
        .chain(indexes)
        .filter_map(|(what, coll)| {
            let why = coll.legacy()?;
            Some(format!(
                "{}: {what} {} was accepted by an earlier flashdoc and is refused today ({why}); \
                 it keeps the collator it was built with, so its data stays in order; recreate \
                 it to get an exact collation",
                e.ns,
                coll.spec()
            ))
        })
        .collect()
}

fn sort_unique_bson(v: &mut Vec<Bson>) {
    v.sort_by(compare_bson);
    v.dedup_by(|a, b| compare_bson(a, b) == Ordering::Equal);
}

impl DocDb {
    pub fn open(cfg: DocDbConfig) -> DocResult<Arc<DocDb>> {
        let engine =
            engine::open_engine(cfg.engine_kind, cfg.engine.clone()).map_err(storage_error)?;
        let catalog_table = match engine.table_id(CATALOG_TABLE) {
            Some(t) => t,
            None => engine
                .create_table(CATALOG_TABLE, &TableConfig::collection())
                .map_err(storage_error)?,
        };
        let mut entries = Vec::new();
        for kv in engine
            .scan(
                catalog_table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .map_err(storage_error)?
        {
            let (_, v) = kv.map_err(storage_error)?;
            entries.push(CollEntry::from_doc(&decode_doc(&v)?)?);
        }
        let mut colls = BTreeMap::new();
        let hooks = Arc::new(Hooks::default());
        let mut referenced = HashSet::new();
        let mut startup_warnings = Vec::new();
        referenced.insert(CATALOG_TABLE.to_string());
        for e in entries {
            let (db, name) = catalog::split_ns(&e.ns)
                .ok_or_else(|| DocError::internal_error(format!("bad catalog ns {}", e.ns)))?;
            let table = engine.table_id(&e.ident).ok_or_else(|| {
                DocError::internal_error(format!("catalog names missing table {}", e.ident))
            })?;
            referenced.insert(e.ident.clone());
            let mut idx = Vec::new();
            for i in &e.indexes {
                let t = engine.table_id(&i.ident).ok_or_else(|| {
                    DocError::internal_error(format!("catalog names missing table {}", i.ident))
                })?;
                referenced.insert(i.ident.clone());
                idx.push(Arc::new(Index {
                    def: i.def.clone(),
                    ident: i.ident.clone(),
                    table: t,
                    multikey: i.multikey.into(),
                }));
            }
            let c = Coll::new(
                db,
                name,
                engine.clone(),
                catalog_table,
                &e,
                table,
                idx,
                hooks.clone(),
            )?;
            c.prepare()?;
            startup_warnings.extend(legacy_collation_warnings(&c, &e));
            colls.insert(e.ns.clone(), Arc::new(c));
        }
        // Tables of a create or index build that crashed before its catalog entry was written.
        for (name, _, _) in engine.tables() {
            if !referenced.contains(&name)
                && (name.starts_with("collection-") || name.starts_with("index-"))
            {
                engine.drop_table(&name).map_err(storage_error)?;
            }
        }
        Ok(Arc::new_cyclic(|me| DocDb {
            engine,
            cfg,
            catalog_table,
            colls: RwLock::new(colls),
            ddl: Mutex::new(()),
            hooks,
            startup_warnings,
            me: me.clone(),
        }))
    }

    /// Warnings for the server to log at startup (see [`collation::SpecOrigin`]).
    pub fn startup_warnings(&self) -> &[String] {
        &self.startup_warnings
    }

    pub fn engine(&self) -> &Arc<dyn KvEngine> {
        &self.engine
    }

    pub fn config(&self) -> &DocDbConfig {
        &self.cfg
    }

    /// Installs (or removes) the hook every document write passes through (see `scope`).
    pub fn set_write_hook(&self, hook: Option<Arc<dyn WriteHook>>) {
        self.hooks.set_write_hook(hook);
    }

    /// Checkpoints and closes the engine; further calls fail.
    pub fn shutdown(&self) -> DocResult<()> {
        self.engine.checkpoint().map_err(storage_error)?;
        self.engine.close().map_err(storage_error)?;
        Ok(())
    }

    fn get_coll(&self, db: &str, coll: &str) -> Option<Arc<Coll>> {
        self.colls.read().get(&catalog::ns(db, coll)).cloned()
    }

    /// Creates a collection (caller holds `ddl`). Returns the new handle.
    fn create_locked(&self, db: &str, coll: &str, options: Document) -> DocResult<Arc<Coll>> {
        let uuid = Uuid::new();
        let ident = table_name_coll(&uuid);
        let table = self
            .engine
            .create_table(&ident, &self.cfg.collection_table)
            .map_err(storage_error)?;
        let id_ident = table_name_index(&uuid, 0);
        let mut icfg = self.cfg.index_table.clone();
        icfg.id_index = true;
        let id_table = self
            .engine
            .create_table(&id_ident, &icfg)
            .map_err(storage_error)?;
        let default_collation = match options.get_document("collation") {
            Ok(c) => collation::Collation::parse(c)?,
            Err(_) => None,
        };
        let entry = CollEntry {
            ns: catalog::ns(db, coll),
            uuid,
            options,
            ident,
            indexes: vec![IndexEntry {
                def: IndexDef::id_index(default_collation.clone()),
                ident: id_ident.clone(),
                multikey: false,
            }],
            next_index_ident: 1,
        };
        let idx = vec![Arc::new(Index {
            def: IndexDef::id_index(default_collation),
            ident: id_ident,
            table: id_table,
            multikey: false.into(),
        })];
        let c = Arc::new(Coll::new(
            db,
            coll,
            self.engine.clone(),
            self.catalog_table,
            &entry,
            table,
            idx,
            self.hooks.clone(),
        )?);
        c.prepare()?;
        c.persist_entry(&c.state.read())?;
        self.colls.write().insert(entry.ns.clone(), c.clone());
        Ok(c)
    }

    /// The collection, created (implicitly, as MongoDB does on first write) if missing.
    fn get_or_create(&self, db: &str, coll: &str) -> DocResult<(Arc<Coll>, bool)> {
        if let Some(c) = self.get_coll(db, coll) {
            return Ok((c, false));
        }
        catalog::validate_coll_name(db, coll)?;
        let _g = self.ddl.lock();
        if let Some(c) = self.get_coll(db, coll) {
            return Ok((c, false));
        }
        Ok((self.create_locked(db, coll, Document::new())?, true))
    }

    /// Runs `f` with the collection's state shared (retrying if it was dropped meanwhile).
    fn with_write<T>(
        &self,
        db: &str,
        coll: &str,
        create: bool,
        mut f: impl FnMut(&Coll, &CollState) -> T,
    ) -> DocResult<Option<T>> {
        loop {
            let c = if create {
                self.get_or_create(db, coll)?.0
            } else {
                match self.get_coll(db, coll) {
                    Some(c) => c,
                    None => return Ok(None),
                }
            };
            let st = c.state.read();
            if st.dropped {
                continue;
            }
            return Ok(Some(f(&c, &st)));
        }
    }

    // ---------------------------------------------------------------- catalog commands

    pub fn list_databases(&self) -> DocResult<Vec<DatabaseInfo>> {
        let colls: Vec<Arc<Coll>> = self.colls.read().values().cloned().collect();
        let mut by_db: BTreeMap<String, u64> = BTreeMap::new();
        for c in colls {
            let size = self.coll_storage(&c)?;
            *by_db.entry(c.db.clone()).or_default() += size.0 + size.1;
        }
        Ok(by_db
            .into_iter()
            .map(|(name, size_on_disk)| DatabaseInfo {
                name,
                size_on_disk,
                empty: false,
            })
            .collect())
    }

    pub fn list_collections(&self, db: &str) -> DocResult<Vec<CollectionInfo>> {
        catalog::validate_db_name(db)?;
        let colls: Vec<Arc<Coll>> = self
            .colls
            .read()
            .values()
            .filter(|c| c.db == db)
            .cloned()
            .collect();
        Ok(colls
            .into_iter()
            .map(|c| CollectionInfo {
                name: c.name.clone(),
                options: c.state.read().options.clone(),
                uuid: c.uuid,
            })
            .collect())
    }

    pub fn create_collection(&self, db: &str, coll: &str, options: &Document) -> DocResult<()> {
        catalog::validate_coll_name(db, coll)?;
        let options = catalog::validate_create_options(options)?;
        let _g = self.ddl.lock();
        if self.get_coll(db, coll).is_some() {
            return Err(DocError::namespace_exists(format!(
                "Collection {} already exists.",
                catalog::ns(db, coll)
            )));
        }
        self.create_locked(db, coll, options)?;
        Ok(())
    }

    /// Drops a collection (caller holds `ddl`).
    fn drop_locked(&self, c: &Arc<Coll>) -> DocResult<()> {
        let mut st = c.state.write();
        st.dropped = true;
        self.colls.write().remove(&c.ns);
        let mut b = WriteBatch::new();
        b.delete(self.catalog_table, c.ns.as_bytes().to_vec());
        self.engine
            .write(&b, WriteOptions { sync: true })
            .map_err(storage_error)?;
        for i in &st.indexes {
            self.engine.drop_table(&i.ident).map_err(storage_error)?;
        }
        self.engine.drop_table(&c.ident).map_err(storage_error)?;
        st.indexes.clear();
        Ok(())
    }

    pub fn drop_collection(&self, db: &str, coll: &str) -> DocResult<()> {
        catalog::validate_coll_name(db, coll)?;
        let _g = self.ddl.lock();
        let c = self
            .get_coll(db, coll)
            .ok_or_else(|| DocError::namespace_not_found("ns not found"))?;
        self.drop_locked(&c)
    }

    pub fn drop_database(&self, db: &str) -> DocResult<()> {
        catalog::validate_db_name(db)?;
        let _g = self.ddl.lock();
        let colls: Vec<Arc<Coll>> = self
            .colls
            .read()
            .values()
            .filter(|c| c.db == db)
            .cloned()
            .collect();
        for c in colls {
            self.drop_locked(&c)?;
        }
        Ok(())
    }

    pub fn rename_collection(
        &self,
        from_db: &str,
        from_coll: &str,
        to_db: &str,
        to_coll: &str,
        drop_target: bool,
    ) -> DocResult<()> {
        catalog::validate_coll_name(from_db, from_coll)?;
        catalog::validate_coll_name(to_db, to_coll)?;
        let _g = self.ddl.lock();
        let src = self
            .get_coll(from_db, from_coll)
            .ok_or_else(|| DocError::namespace_not_found("source namespace does not exist"))?;
        let to_ns = catalog::ns(to_db, to_coll);
        if src.ns == to_ns {
            return Err(DocError::illegal_operation(
                "Can't rename a collection to itself",
            ));
        }
        if let Some(t) = self.get_coll(to_db, to_coll) {
            if !drop_target {
                return Err(DocError::namespace_exists("target namespace exists"));
            }
            self.drop_locked(&t)?;
        }
        let mut st = src.state.write();
        let mut entry = src.entry(&st);
        entry.ns = to_ns.clone();
        let mut b = WriteBatch::new();
        b.delete(self.catalog_table, src.ns.as_bytes().to_vec());
        b.put(
            self.catalog_table,
            to_ns.as_bytes().to_vec(),
            encode_doc(&entry.to_doc())?,
        );
        self.engine
            .write(&b, WriteOptions { sync: true })
            .map_err(storage_error)?;
        let moved = Arc::new(Coll::new(
            to_db,
            to_coll,
            self.engine.clone(),
            self.catalog_table,
            &entry,
            src.table,
            st.indexes.clone(),
            self.hooks.clone(),
        )?);
        moved.prepare()?;
        st.dropped = true;
        let mut colls = self.colls.write();
        colls.remove(&src.ns);
        colls.insert(to_ns, moved);
        Ok(())
    }

    pub fn create_indexes(
        &self,
        db: &str,
        coll: &str,
        specs: &[Document],
    ) -> DocResult<CreateIndexesOutcome> {
        self.create_indexes_until(db, coll, specs, &Interrupt::none())
    }

    /// [`DocDb::create_indexes`], each build checking `interrupt` once per document: an
    /// interrupted build drops its half-built table, and the indexes built before it stay.
    pub fn create_indexes_until(
        &self,
        db: &str,
        coll: &str,
        specs: &[Document],
        interrupt: &Interrupt,
    ) -> DocResult<CreateIndexesOutcome> {
        catalog::validate_coll_name(db, coll)?;
        if specs.is_empty() {
            return Err(DocError::bad_value(
                "Must specify at least one index to create",
            ));
        }
        let defs = specs
            .iter()
            .map(IndexDef::parse)
            .collect::<DocResult<Vec<_>>>()?;
        for (i, a) in defs.iter().enumerate() {
            if defs[..i].iter().any(|b| b.name == a.name) {
                return Err(DocError::with_code(
                    68,
                    "IndexAlreadyExists",
                    format!("Identical index already exists: {}", a.name),
                ));
            }
        }
        let (c, created) = self.get_or_create(db, coll)?;
        let _g = self.ddl.lock();
        let c = match self.get_coll(db, coll) {
            Some(x) if Arc::ptr_eq(&x, &c) => c,
            Some(x) => x,
            None => self.create_locked(db, coll, Document::new())?,
        };
        let mut st = c.state.write();
        let before = st.indexes.len() as i32;
        let mut todo = Vec::new();
        for (mut def, spec) in defs.into_iter().zip(specs) {
            // An index without a collation of its own takes the collection's default.
            if !spec.contains_key("collation") {
                if let Some(dc) = &c.default_collation {
                    if def.hashed {
                        return Err(DocError::with_code(
                            67,
                            "CannotCreateIndex",
                            "a hashed index on a collection with a default collation is not supported by flashdoc",
                        ));
                    }
                    def.collation = Some(dc.clone());
                    def.spec.insert("collation", dc.spec().clone());
                }
            }
            let mut exists = false;
            for i in &st.indexes {
                let same_key = i.def.key == def.key;
                let same_opts = i.def.unique == def.unique
                    && i.def.sparse == def.sparse
                    && i.def.expire_after == def.expire_after
                    && i.def.collation == def.collation;
                if i.def.name == def.name {
                    if !same_key {
                        return Err(DocError::index_key_specs_conflict(format!(
                            "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                            def.spec, i.def.spec
                        )));
                    }
                    if !same_opts {
                        return Err(DocError::index_options_conflict(format!(
                            "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                            def.spec, i.def.spec
                        )));
                    }
                    exists = true;
                } else if same_key {
                    return Err(DocError::index_options_conflict(format!(
                        "Index already exists with a different name: {}",
                        i.def.name
                    )));
                }
            }
            if !exists {
                todo.push(def);
            }
        }
        if st.indexes.len() + todo.len() > MAX_INDEXES {
            return Err(DocError::with_code(
                67,
                "CannotCreateIndex",
                format!(
                    "add index fails, too many indexes for {} key:{}",
                    c.ns,
                    todo.last().map(|d| d.key.to_string()).unwrap_or_default()
                ),
            ));
        }
        let nothing = todo.is_empty();
        for def in todo {
            let n = st.next_index_ident;
            st.next_index_ident += 1;
            let idx = self.build_index(&c, def, n, interrupt)?;
            st.indexes.push(Arc::new(idx));
            c.persist_entry(&st)?;
        }
        Ok(CreateIndexesOutcome {
            num_indexes_before: before,
            num_indexes_after: st.indexes.len() as i32,
            created_collection_automatically: created,
            note: nothing.then(|| "all indexes already exist".to_string()),
        })
    }

    /// Builds a new index table from the collection (writers are excluded by the caller).
    /// A collection table's records in RecordId order, as stored (encoded BSON).
    fn records(
        &self,
        table: TableId,
    ) -> DocResult<impl Iterator<Item = DocResult<(RecordId, Vec<u8>)>>> {
        let it = self
            .engine
            .scan(
                table,
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Forward,
            )
            .map_err(storage_error)?;
        Ok(it.map(|kv| {
            let (k, v) = kv.map_err(storage_error)?;
            Ok((index::rid_from(&k)?, v))
        }))
    }

    /// On any error the table is dropped and nothing refers to it.
    fn build_index(
        &self,
        c: &Coll,
        def: IndexDef,
        n: i64,
        interrupt: &Interrupt,
    ) -> DocResult<Index> {
        let ident = table_name_index(&c.uuid, n);
        let table = self
            .engine
            .create_table(&ident, &self.cfg.index_table)
            .map_err(storage_error)?;
        let result = (|| -> DocResult<bool> {
            let mut multikey = false;
            let mut batch = WriteBatch::new();
            let mut pending: BTreeMap<Vec<u8>, (RecordId, Vec<Bson>)> = BTreeMap::new();
            let mut docs_in_batch = 0;
            for rec in self.records(c.table)? {
                interrupt.check()?;
                let (rid, v) = rec?;
                let doc = decode_doc(&v)?;
                let keys = index::doc_keys(&def, &doc)?;
                multikey |= keys.multikey;
                for key in keys.keys {
                    if def.unique {
                        let dup = pending.contains_key(&key.encoded)
                            || self
                                .engine
                                .get(table, &key.encoded)
                                .map_err(storage_error)?
                                .is_some();
                        if dup {
                            return Err(DocError::duplicate_key(
                                &c.ns,
                                &def.name,
                                def.key.clone(),
                                index::key_value_doc(&def, &key.values),
                            ));
                        }
                        pending.insert(key.encoded.clone(), (rid, key.values.clone()));
                        batch.put(table, key.encoded, index::rid_bytes(rid).to_vec());
                    } else {
                        batch.put(
                            table,
                            index::entry_key(false, &key.encoded, rid),
                            Vec::new(),
                        );
                    }
                }
                docs_in_batch += 1;
                if docs_in_batch >= BUILD_BATCH {
                    self.engine
                        .write(&batch, WriteOptions::default())
                        .map_err(storage_error)?;
                    batch = WriteBatch::new();
                    pending.clear();
                    docs_in_batch = 0;
                }
            }
            if !batch.is_empty() {
                self.engine
                    .write(&batch, WriteOptions::default())
                    .map_err(storage_error)?;
            }
            Ok(multikey)
        })();
        match result {
            Ok(multikey) => Ok(Index {
                def,
                ident,
                table,
                multikey: multikey.into(),
            }),
            Err(e) => {
                let _ = self.engine.drop_table(&ident);
                Err(e)
            }
        }
    }

    pub fn list_indexes(&self, db: &str, coll: &str) -> DocResult<Vec<Document>> {
        catalog::validate_coll_name(db, coll)?;
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("ns does not exist: {}", catalog::ns(db, coll)))
        })?;
        let st = c.state.read();
        Ok(st.indexes.iter().map(|i| i.def.spec.clone()).collect())
    }

    pub fn drop_indexes(&self, db: &str, coll: &str, which: &Bson) -> DocResult<i32> {
        catalog::validate_coll_name(db, coll)?;
        let _g = self.ddl.lock();
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("ns not found {}", catalog::ns(db, coll)))
        })?;
        let mut st = c.state.write();
        let was = st.indexes.len() as i32;
        let find = |st: &CollState, w: &Bson| -> DocResult<usize> {
            let pos = st.indexes.iter().position(|i| match w {
                Bson::String(n) => &i.def.name == n,
                Bson::Document(k) => &i.def.key == k,
                _ => false,
            });
            let pos = pos.ok_or_else(|| {
                DocError::index_not_found(match w {
                    Bson::Document(k) => format!("can't find index with key: {k}"),
                    other => format!(
                        "index not found with name [{}]",
                        other.as_str().unwrap_or("")
                    ),
                })
            })?;
            if st.indexes[pos].def.is_id() {
                return Err(DocError::invalid_options("cannot drop _id index"));
            }
            Ok(pos)
        };
        let mut victims: Vec<usize> = match which {
            Bson::String(s) if s == "*" => (0..st.indexes.len())
                .filter(|&i| !st.indexes[i].def.is_id())
                .collect(),
            Bson::String(_) | Bson::Document(_) => vec![find(&st, which)?],
            Bson::Array(names) => {
                let mut v = Vec::new();
                for n in names {
                    if !matches!(n, Bson::String(_)) {
                        return Err(DocError::type_mismatch("dropIndexes names must be strings"));
                    }
                    v.push(find(&st, n)?);
                }
                v
            }
            _ => {
                return Err(DocError::type_mismatch(
                    "BSON field 'dropIndexes.index' is the wrong type",
                ))
            }
        };
        victims.sort_unstable();
        victims.dedup();
        let mut dropped = Vec::new();
        for &i in victims.iter().rev() {
            dropped.push(st.indexes.remove(i));
        }
        c.persist_entry(&st)?;
        for i in dropped {
            self.engine.drop_table(&i.ident).map_err(storage_error)?;
        }
        Ok(was)
    }

    // ---------------------------------------------------------------- writes

    pub fn insert(
        &self,
        db: &str,
        coll: &str,
        docs: Vec<Document>,
        opts: WriteOpts,
    ) -> WriteOutcome {
        let mut out = WriteOutcome::default();
        if let Err(e) = catalog::validate_coll_name(db, coll) {
            out.write_errors.push(WriteError { index: 0, error: e });
            return out;
        }
        for (i, doc) in docs.into_iter().enumerate() {
            let r = collection::prepare_insert(doc).and_then(|doc| {
                self.with_write(db, coll, true, |c, st| {
                    c.insert_doc(st, &doc, opts.journal, opts.bypass_validation)
                })?
                .expect("created")
            });
            match r {
                Ok(()) => out.n += 1,
                Err(error) => {
                    out.write_errors.push(WriteError { index: i, error });
                    if opts.ordered {
                        break;
                    }
                }
            }
        }
        out
    }

    fn exec_for(&self, c: &Coll, st: &CollState, q: &FindQuery) -> DocResult<Exec> {
        let coll = collation::resolve(q.collation.as_ref(), c.default_collation.as_ref())?;
        self.exec_under(c, st, q, coll)
    }

    /// The execution of `q` under `coll`, the collation the caller resolved for it (once per
    /// statement: `q.collation` is not parsed again).
    fn exec_under(
        &self,
        c: &Coll,
        st: &CollState,
        q: &FindQuery,
        coll: Option<Arc<collation::Collation>>,
    ) -> DocResult<Exec> {
        let filter = Matcher::new(&q.filter)?;
        let sort = match &q.sort {
            Some(s) if !s.is_empty() => Some(Arc::new(SortSpec::parse(s)?)),
            _ => None,
        };
        let projection = match &q.projection {
            Some(p) if !p.is_empty() => Some(Arc::new(Projection::parse(p)?)),
            _ => None,
        };
        if q.tailable {
            if c.capped.is_none() {
                return Err(DocError::bad_value(format!(
                    "error processing query: ns={} tailable cursor requested on non capped collection",
                    c.ns
                )));
            }
            // A tailable cursor reads the collection forward in insertion order: the only
            // sort and hint it can honour are that order ({$natural: 1}).
            let forward = |d: &Document| {
                d.len() == 1
                    && d.get("$natural")
                        .and_then(query::compare::Num::of)
                        .is_some_and(|n| n.as_f64() > 0.0)
            };
            if q.sort
                .as_ref()
                .is_some_and(|s| !s.is_empty() && !forward(s))
            {
                return Err(DocError::bad_value(
                    "error processing query: cannot use tailable option with a sort other than {$natural: 1}",
                ));
            }
            let natural = |h: &Bson| matches!(h, Bson::Document(d) if forward(d));
            if q.hint.as_ref().is_some_and(|h| !natural(h)) {
                return Err(DocError::bad_value(
                    "error processing query: a tailable cursor reads in natural order; it cannot use an index hint",
                ));
            }
        }
        // Index bounds are encoded under the query's collation, and only indexes built with
        // it can answer the query; hidden indexes answer none.
        let _in_effect = collation::scope(coll.clone());
        let usable: Vec<Arc<Index>> = st
            .indexes
            .iter()
            .filter(|i| !i.def.hidden && collation::same(i.def.collation.as_ref(), coll.as_ref()))
            .cloned()
            .collect();
        let plan = if q.tailable {
            // Natural (insertion) order, resumed after the last RecordId returned.
            planner::plan(&[], &Document::new(), None, None)?
        } else {
            planner::plan(
                &usable,
                &q.filter,
                sort.as_ref().and(q.sort.as_ref()),
                q.hint.as_ref(),
            )?
        };
        Ok(Exec {
            engine: self.engine.clone(),
            table: c.table,
            plan,
            filter: if q.filter.is_empty() {
                None
            } else {
                Some(Arc::new(filter))
            },
            ownership: scope::current_ownership(),
            sort,
            projection,
            skip: q.skip,
            limit: q.limit.map(|l| l.unsigned_abs()).filter(|&l| l > 0),
            stats: Arc::new(ExecStats::default()),
            interrupt: q.interrupt.clone(),
            collation: coll,
        })
    }

    /// RecordIds of the documents a write statement targets (collected before any is changed,
    /// so a document moved by its own update is not seen twice).
    /// At most `max` of them (a single-document statement asks for a few, in case some no
    /// longer match when they are locked; the TTL monitor asks for a batch).
    fn targets(
        &self,
        c: &Coll,
        st: &CollState,
        q: &FindQuery,
        coll: Option<Arc<collation::Collation>>,
        max: usize,
    ) -> DocResult<Vec<RecordId>> {
        let exec = self.exec_under(c, st, q, coll)?;
        let sort = exec.sort.clone();
        let mut src = exec.source()?;
        if let (Some(s), false) = (sort, exec.plan.sort_provided) {
            let mut all: Vec<(RecordId, Document)> = src.by_ref().collect::<DocResult<_>>()?;
            all.sort_by(|a, b| s.compare(&a.1, &b.1));
            return Ok(all.into_iter().map(|x| x.0).collect());
        }
        let mut rids = Vec::new();
        for r in src {
            rids.push(r?.0);
            if rids.len() >= max {
                break;
            }
        }
        Ok(rids)
    }

    pub fn update(
        &self,
        db: &str,
        coll: &str,
        stmts: &[UpdateStatement],
        opts: WriteOpts,
    ) -> WriteOutcome {
        let mut out = WriteOutcome::default();
        if let Err(e) = catalog::validate_coll_name(db, coll) {
            out.write_errors.push(WriteError { index: 0, error: e });
            return out;
        }
        for (i, s) in stmts.iter().enumerate() {
            match self.update_one_stmt(db, coll, s, &opts) {
                Ok((matched, modified, upserted)) => {
                    out.n += matched;
                    out.n_modified += modified;
                    if let Some(id) = upserted {
                        out.n += 1;
                        out.upserted.push((i, id));
                    }
                }
                Err(error) => {
                    out.write_errors.push(WriteError { index: i, error });
                    if opts.ordered {
                        break;
                    }
                }
            }
        }
        out
    }

    /// (matched, modified, upserted _id).
    fn update_one_stmt(
        &self,
        db: &str,
        coll: &str,
        s: &UpdateStatement,
        opts: &WriteOpts,
    ) -> DocResult<(u64, u64, Option<Bson>)> {
        let (sync, interrupt) = (opts.journal, &opts.interrupt);
        interrupt.check()?;
        let filter = Matcher::new(&s.q)?;
        let modifier = Update::parse(&s.u, s.array_filters.as_deref())?;
        if s.multi && modifier.is_replacement() {
            return Err(DocError::failed_to_parse(
                "multi update is not supported for replacement-style update",
            ));
        }
        let r = self.with_write(db, coll, s.upsert, |c, st| -> DocResult<(u64, u64)> {
            let coll = collation::resolve(s.collation.as_ref(), c.default_collation.as_ref())?;
            let _in_effect = collation::scope(coll.clone());
            let q = FindQuery {
                filter: s.q.clone(),
                interrupt: interrupt.clone(),
                ..Default::default()
            };
            let max = if s.multi { usize::MAX } else { ONE_TARGET };
            let rids = self.targets(c, st, &q, coll, max)?;
            let (mut matched, mut modified) = (0, 0);
            for rid in rids {
                interrupt.check()?;
                let _lock = c.lock_doc(rid);
                let Some(old) = c.get(rid)? else { continue };
                let (hit, pos) = filter.matches_with_position(&old);
                if !hit {
                    continue;
                }
                matched += 1;
                let new = updated_doc(&old, &modifier, pos)?;
                if new != old {
                    c.validate(&new, Some(&old), opts.bypass_validation)?;
                    c.write_doc(st, rid, Some(&old), Some(&new), sync)?;
                    modified += 1;
                }
                if !s.multi {
                    break;
                }
            }
            Ok((matched, modified))
        })?;
        let (matched, modified) = match r {
            Some(x) => x?,
            None => (0, 0),
        };
        if matched > 0 || !s.upsert {
            return Ok((matched, modified, None));
        }
        let doc = upsert_doc(&s.q, &modifier)?;
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        self.with_write(db, coll, true, |c, st| {
            c.insert_doc(st, &doc, sync, opts.bypass_validation)
        })?
        .expect("created")?;
        Ok((0, 0, Some(id)))
    }

    pub fn delete(
        &self,
        db: &str,
        coll: &str,
        stmts: &[DeleteStatement],
        opts: WriteOpts,
    ) -> WriteOutcome {
        let mut out = WriteOutcome::default();
        if let Err(e) = catalog::validate_coll_name(db, coll) {
            out.write_errors.push(WriteError { index: 0, error: e });
            return out;
        }
        for (i, s) in stmts.iter().enumerate() {
            let r = (|| -> DocResult<u64> {
                if s.limit != 0 && s.limit != 1 {
                    return Err(DocError::failed_to_parse(format!(
                        "The limit field in delete objects must be 0 or 1. Got {}",
                        s.limit
                    )));
                }
                let filter = Matcher::new(&s.q)?;
                let r = self.with_write(db, coll, false, |c, st| -> DocResult<u64> {
                    let coll =
                        collation::resolve(s.collation.as_ref(), c.default_collation.as_ref())?;
                    let _in_effect = collation::scope(coll.clone());
                    let q = FindQuery {
                        filter: s.q.clone(),
                        interrupt: opts.interrupt.clone(),
                        ..Default::default()
                    };
                    let max = if s.limit == 1 { ONE_TARGET } else { usize::MAX };
                    let rids = self.targets(c, st, &q, coll, max)?;
                    let mut n = 0;
                    for rid in rids {
                        opts.interrupt.check()?;
                        let _lock = c.lock_doc(rid);
                        let Some(old) = c.get(rid)? else { continue };
                        if !filter.matches(&old) {
                            continue;
                        }
                        c.write_doc(st, rid, Some(&old), None, opts.journal)?;
                        n += 1;
                        if s.limit == 1 {
                            break;
                        }
                    }
                    Ok(n)
                })?;
                r.unwrap_or(Ok(0))
            })();
            match r {
                Ok(n) => out.n += n,
                Err(error) => {
                    out.write_errors.push(WriteError { index: i, error });
                    if opts.ordered {
                        break;
                    }
                }
            }
        }
        out
    }

    pub fn find_and_modify(
        &self,
        db: &str,
        coll: &str,
        spec: &FindAndModify,
    ) -> DocResult<FindAndModifyOutcome> {
        catalog::validate_coll_name(db, coll)?;
        let modifier = match (&spec.update, spec.remove) {
            (Some(_), true) => {
                return Err(DocError::failed_to_parse(
                    "Cannot specify both an update and remove=true",
                ))
            }
            (None, false) => {
                return Err(DocError::failed_to_parse(
                    "Either an update or remove=true must be specified",
                ))
            }
            (Some(u), false) => Some(Update::parse(u, spec.array_filters.as_deref())?),
            (None, true) => {
                if spec.upsert {
                    return Err(DocError::failed_to_parse(
                        "Cannot specify both upsert=true and remove=true",
                    ));
                }
                if spec.new {
                    return Err(DocError::failed_to_parse(
                        "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
                    ));
                }
                None
            }
        };
        let filter = Matcher::new(&spec.query)?;
        let proj = match &spec.fields {
            Some(p) if !p.is_empty() => Some(Projection::parse(p)?),
            _ => None,
        };
        let project = |d: Document| -> DocResult<Document> {
            match &proj {
                Some(p) => p.apply_matched(&d, Some(&filter)),
                None => Ok(d),
            }
        };
        let sync = spec.journal;
        let r = self.with_write(
            db,
            coll,
            spec.upsert,
            |c, st| -> DocResult<Option<FindAndModifyOutcome>> {
                let coll =
                    collation::resolve(spec.collation.as_ref(), c.default_collation.as_ref())?;
                let _in_effect = collation::scope(coll.clone());
                let q = FindQuery {
                    filter: spec.query.clone(),
                    sort: spec.sort.clone(),
                    interrupt: spec.interrupt.clone(),
                    ..Default::default()
                };
                let rids = self.targets(c, st, &q, coll, ONE_TARGET)?;
                for rid in rids {
                    let _lock = c.lock_doc(rid);
                    let Some(old) = c.get(rid)? else { continue };
                    let (hit, pos) = filter.matches_with_position(&old);
                    if !hit {
                        continue;
                    }
                    return match &modifier {
                        None => {
                            c.write_doc(st, rid, Some(&old), None, sync)?;
                            Ok(Some(FindAndModifyOutcome {
                                value: Some(project(old)?),
                                n: 1,
                                ..Default::default()
                            }))
                        }
                        Some(m) => {
                            let new = updated_doc(&old, m, pos)?;
                            if new != old {
                                c.validate(&new, Some(&old), spec.bypass_validation)?;
                                c.write_doc(st, rid, Some(&old), Some(&new), sync)?;
                            }
                            Ok(Some(FindAndModifyOutcome {
                                value: Some(project(if spec.new { new } else { old })?),
                                n: 1,
                                updated_existing: true,
                                upserted: None,
                            }))
                        }
                    };
                }
                Ok(None)
            },
        )?;
        if let Some(Some(outcome)) = r.transpose()? {
            return Ok(outcome);
        }
        match (&modifier, spec.upsert) {
            (Some(m), true) => {
                let doc = upsert_doc(&spec.query, m)?;
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                self.with_write(db, coll, true, |c, st| {
                    c.insert_doc(st, &doc, sync, spec.bypass_validation)
                })?
                .expect("created")?;
                Ok(FindAndModifyOutcome {
                    value: if spec.new { Some(project(doc)?) } else { None },
                    n: 1,
                    updated_existing: false,
                    upserted: Some(id),
                })
            }
            _ => Ok(FindAndModifyOutcome::default()),
        }
    }

    /// One pass of the TTL monitor: for every TTL index, deletes the documents whose indexed
    /// date (the earliest, for an array) is more than `expireAfterSeconds` in the past, in
    /// batches of [`TTL_BATCH`] (each batch re-checks its documents under their locks, so a
    /// document updated meanwhile is kept if it no longer qualifies). Returns how many.
    pub fn ttl_pass(&self) -> DocResult<u64> {
        let now = bson::DateTime::now().timestamp_millis();
        let colls: Vec<Arc<Coll>> = self.colls.read().values().cloned().collect();
        let mut deleted = 0;
        for c in colls {
            let ttl: Vec<(String, i64)> = c
                .state
                .read()
                .indexes
                .iter()
                .filter_map(|i| Some((i.def.fields[0].0.clone(), i.def.expire_after?)))
                .collect();
            for (field, secs) in ttl {
                let cutoff =
                    bson::DateTime::from_millis(now.saturating_sub(secs.saturating_mul(1000)));
                let q = FindQuery {
                    filter: doc! {field: {"$lt": cutoff}},
                    ..Default::default()
                };
                let filter = Matcher::new(&q.filter)?;
                // Each batch is (candidates found, documents deleted); a full batch that
                // deleted something may have more behind it.
                loop {
                    let (found, n) = self
                        .with_write(&c.db, &c.name, false, |c, st| -> DocResult<(usize, u64)> {
                            let coll = c.default_collation.clone();
                            let rids = self.targets(c, st, &q, coll, TTL_BATCH)?;
                            let mut n = 0;
                            for rid in &rids {
                                let _lock = c.lock_doc(*rid);
                                let Some(old) = c.get(*rid)? else { continue };
                                if filter.matches(&old) {
                                    c.write_doc(st, *rid, Some(&old), None, false)?;
                                    n += 1;
                                }
                            }
                            Ok((rids.len(), n))
                        })?
                        .unwrap_or(Ok((0, 0)))?;
                    deleted += n;
                    if found < TTL_BATCH || n == 0 {
                        break;
                    }
                }
            }
        }
        Ok(deleted)
    }

    // ---------------------------------------------------------------- reads

    pub fn find(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<DocCursor> {
        catalog::validate_coll_name(db, coll)?;
        let Some(c) = self.get_coll(db, coll) else {
            // Parse anyway so bad input errors even on a missing collection.
            Matcher::new(&q.filter)?;
            let coll = collation::resolve(q.collation.as_ref(), None)?;
            return Ok(DocCursor::with_collation(
                Box::new(std::iter::empty()),
                coll,
            ));
        };
        let st = c.state.read();
        let exec = self.exec_for(&c, &st, q)?;
        drop(st);
        if q.tailable {
            return Ok(exec.tail());
        }
        exec.run()
    }

    /// The documents whose keys in the index with key pattern `key` fall in `[lo, hi)`-style
    /// byte bounds over its KeyString keys, in index order (a shard clones, deletes and
    /// splits chunk ranges this way; for a hashed index the keys are the hashes).
    pub fn scan_index(
        &self,
        db: &str,
        coll: &str,
        key: &Document,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> DocResult<DocCursor> {
        catalog::validate_coll_name(db, coll)?;
        let Some(c) = self.get_coll(db, coll) else {
            return Ok(DocCursor::empty());
        };
        let st = c.state.read();
        let index = st
            .indexes
            .iter()
            .find(|i| &i.def.key == key)
            .cloned()
            .ok_or_else(|| {
                DocError::index_not_found(format!("no index with key pattern {key} on {db}.{coll}"))
            })?;
        let collation = index.def.collation.clone();
        let exec = Exec {
            engine: self.engine.clone(),
            table: c.table,
            plan: Plan {
                access: Access::IxScan {
                    index,
                    ranges: vec![(lo, hi)],
                    bounds: doc! {"range": "chunk bounds"},
                },
                reverse: false,
                sort_provided: true,
            },
            filter: None,
            ownership: scope::current_ownership(),
            sort: None,
            projection: None,
            skip: 0,
            limit: None,
            stats: Arc::new(ExecStats::default()),
            interrupt: Interrupt::none(),
            // The keys were encoded under the index's collation.
            collation,
        };
        drop(st);
        exec.run()
    }

    /// The number of documents a query (filter, skip, limit, collation) returns.
    pub fn count(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<u64> {
        if q.filter.is_empty()
            && q.skip == 0
            && q.limit.is_none_or_zero()
            && scope::current_ownership().is_none()
        {
            catalog::validate_coll_name(db, coll)?;
            return match self.get_coll(db, coll) {
                Some(c) => Ok(c.counts()?.0 as u64),
                None => Ok(0),
            };
        }
        let q = FindQuery {
            projection: None,
            sort: None,
            ..q.clone()
        };
        let mut n = 0;
        for d in self.find(db, coll, &q)? {
            d?;
            n += 1;
        }
        Ok(n)
    }

    /// The distinct values at `key` among the documents `q` matches, in BSON order (under the
    /// query's collation, strings equal under it count once).
    pub fn distinct(&self, db: &str, coll: &str, key: &str, q: &FindQuery) -> DocResult<Vec<Bson>> {
        if key.is_empty() {
            return Err(DocError::bad_value(
                "FieldPath cannot be constructed with empty string",
            ));
        }
        query::limits::check_path(key)?;
        let q = FindQuery {
            projection: None,
            sort: None,
            ..q.clone()
        };
        let mut out = Vec::new();
        let cursor = self.find(db, coll, &q)?;
        let _in_effect = collation::scope(cursor.collation().cloned());
        for d in cursor {
            let d = d?;
            for v in path::lookup_path(&d, key).into_iter().cloned() {
                match v {
                    Bson::Array(a) => out.extend(a),
                    other => out.push(other),
                }
            }
        }
        // Values equal under the collation count once.
        sort_unique_bson(&mut out);
        Ok(out)
    }

    pub fn aggregate(
        &self,
        db: &str,
        coll: &str,
        pipeline: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        catalog::validate_coll_name(db, coll)?;
        let (filter, rest) = match pipeline.first() {
            Some(first) if first.len() == 1 && first.contains_key("$match") => {
                match first.get("$match") {
                    Some(Bson::Document(f)) => (f.clone(), &pipeline[1..]),
                    _ => {
                        return Err(DocError::with_code(
                            15959,
                            "Location15959",
                            "the match filter must be an expression in an object",
                        ))
                    }
                }
            }
            _ => (Document::new(), pipeline),
        };
        let input = self.find(
            db,
            coll,
            &FindQuery {
                filter,
                interrupt: opts.interrupt.clone(),
                collation: opts.collation.clone(),
                ..Default::default()
            },
        )?;
        // The pipeline runs under the collation the find resolved.
        let coll = input.collation().cloned();
        let input = input.into_inner();
        let me = self.me.clone();
        let dbname = db.to_string();
        let lookup = move |other: &str| -> DocResult<Vec<Document>> {
            let Some(this) = me.upgrade() else {
                return Err(DocError::internal_error("database closed"));
            };
            // Stored credentials are read by authentication only; the server's guard sees a
            // command's own namespace, not the ones its stages join.
            if other == "system.users" {
                return Err(DocError::with_code(
                    13,
                    "Unauthorized",
                    format!("{dbname}.system.users cannot be joined"),
                ));
            }
            this.find(&dbname, other, &FindQuery::default())?.collect()
        };
        let _in_effect = collation::scope(coll.clone());
        Ok(DocCursor::with_collation(
            Box::new(
                aggregate::run_pipeline(rest, input, &lookup, &opts.interrupt)?
                    .into_iter()
                    .map(Ok),
            ),
            coll,
        ))
    }

    pub fn explain_find(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        let ns = catalog::ns(db, coll);
        let Some(c) = self.get_coll(db, coll) else {
            Matcher::new(&q.filter)?;
            return Ok(doc! {
                "queryPlanner": {
                    "namespace": ns, "indexFilterSet": false, "parsedQuery": q.filter.clone(),
                    "winningPlan": {"stage": "EOF"}, "rejectedPlans": [],
                },
                "executionStats": {
                    "executionSuccess": true, "nReturned": 0, "executionTimeMillis": 0,
                    "totalKeysExamined": 0, "totalDocsExamined": 0,
                },
            });
        };
        let st = c.state.read();
        let exec = self.exec_for(&c, &st, q)?;
        drop(st);
        let winning = plan_doc(&exec, q);
        let stats = exec.stats.clone();
        let started = std::time::Instant::now();
        let mut n = 0i64;
        for d in exec.run()? {
            d?;
            n += 1;
        }
        Ok(doc! {
            "queryPlanner": {
                "namespace": ns,
                "indexFilterSet": false,
                "parsedQuery": q.filter.clone(),
                "winningPlan": winning,
                "rejectedPlans": [],
            },
            "executionStats": {
                "executionSuccess": true,
                "nReturned": n,
                "executionTimeMillis": started.elapsed().as_millis() as i64,
                "totalKeysExamined": stats.keys_examined.load(AtomicOrdering::Relaxed) as i64,
                "totalDocsExamined": stats.docs_examined.load(AtomicOrdering::Relaxed) as i64,
            },
        })
    }

    /// The plan a find would use, for tests and the server's explain of other commands.
    pub fn plan_summary(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<String> {
        let Some(c) = self.get_coll(db, coll) else {
            return Ok("EOF".into());
        };
        let st = c.state.read();
        let exec = self.exec_for(&c, &st, q)?;
        Ok(match exec.plan.index_name() {
            Some(n) => format!("IXSCAN {n}"),
            None => "COLLSCAN".into(),
        })
    }

    // ---------------------------------------------------------------- validate

    /// The `validate` command: with writers to the collection held off, the engine reads every
    /// block of the collection's table and of each index table (checksums, page kinds, key
    /// order); every document is decoded and its keys are looked up in every index; each
    /// index's entry count is compared with the keys the documents have. Problems are reported
    /// in `errors` with `valid: false`, in mongod's reply shape; a missing collection is
    /// NamespaceNotFound (26).
    /// `interrupt` is checked once per document.
    pub fn validate(&self, db: &str, coll: &str, interrupt: &Interrupt) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        let ns = catalog::ns(db, coll);
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("Collection '{ns}' does not exist to validate."))
        })?;
        let st = c.state.write();
        let mut errors: Vec<String> = Vec::new();
        let nrecords = match self.engine.verify_table(c.table) {
            Ok(n) => n as i64,
            Err(e) => {
                errors.push(format!("collection table {}: {e}", c.ident));
                0
            }
        };
        let mut entries: Vec<Option<u64>> = Vec::new();
        // Which indexes an error was found in (indexDetails.valid).
        let mut index_bad = vec![false; st.indexes.len()];
        for (i, idx) in st.indexes.iter().enumerate() {
            entries.push(match self.engine.verify_table(idx.table) {
                Ok(n) => Some(n),
                Err(e) => {
                    errors.push(format!("index {} ({}): {e}", idx.def.name, idx.ident));
                    index_bad[i] = true;
                    None
                }
            });
        }
        // Documents the validator would refuse now, judged as writes are (under the default
        // collation); mongod reports them as a warning, not as invalid data.
        let _default = collation::scope(c.default_collation.clone());
        let mut non_compliant = 0i64;
        let mut expected = vec![0u64; st.indexes.len()];
        let (mut invalid_docs, mut missing) = (0i64, 0i64);
        if errors.is_empty() {
            for rec in self.records(c.table)? {
                interrupt.check()?;
                let (rid, v) = rec?;
                let doc = match collection::decode_doc(&v) {
                    Ok(d) => d,
                    Err(e) => {
                        invalid_docs += 1;
                        errors.push(format!("record {rid}: {e}"));
                        continue;
                    }
                };
                if c.validator.as_ref().is_some_and(|v| !v.matches(&doc)) {
                    non_compliant += 1;
                }
                for (i, idx) in st.indexes.iter().enumerate() {
                    let keys = index::doc_keys(&idx.def, &doc)?;
                    for key in keys.keys {
                        expected[i] += 1;
                        let entry = index::entry_key(idx.def.unique, &key.encoded, rid);
                        let found =
                            match self.engine.get(idx.table, &entry).map_err(storage_error)? {
                                Some(val) => !idx.def.unique || index::rid_from(&val)? == rid,
                                None => false,
                            };
                        if !found {
                            index_bad[i] = true;
                            missing += 1;
                            if missing <= 10 {
                                errors.push(format!(
                                    "index {} is missing the entry {:?} for record {rid}",
                                    idx.def.name, key.values
                                ));
                            }
                        }
                    }
                }
            }
            for (i, idx) in st.indexes.iter().enumerate() {
                if let Some(n) = entries[i] {
                    if n > expected[i] {
                        index_bad[i] = true;
                        errors.push(format!(
                            "index {} has {n} entries but the documents have {} keys (extra index entries)",
                            idx.def.name, expected[i]
                        ));
                    }
                }
            }
        }
        let keys_per_index: Document = st
            .indexes
            .iter()
            .zip(&entries)
            .map(|(i, n)| (i.def.name.clone(), Bson::Int64(n.unwrap_or(0) as i64)))
            .collect();
        let index_details: Document = st
            .indexes
            .iter()
            .zip(&index_bad)
            .map(|(i, bad)| (i.def.name.clone(), Bson::Document(doc! {"valid": !bad})))
            .collect();
        let warnings: Vec<Bson> = match non_compliant {
            0 => Vec::new(),
            n => vec![Bson::String(format!(
                "Detected {n} document(s) that do not comply with the collection's validator"
            ))],
        };
        Ok(doc! {
            "ns": ns,
            "uuid": c.uuid,
            "nInvalidDocuments": invalid_docs,
            "nNonCompliantDocuments": non_compliant,
            "nrecords": nrecords,
            "nIndexes": st.indexes.len() as i32,
            "keysPerIndex": keys_per_index,
            "indexDetails": index_details,
            "valid": errors.is_empty(),
            "repaired": false,
            "warnings": warnings,
            "errors": errors.into_iter().map(Bson::String).collect::<Vec<_>>(),
            "extraIndexEntries": Vec::<Bson>::new(),
            "missingIndexEntries": Vec::<Bson>::new(),
            "corruptRecords": Vec::<Bson>::new(),
        })
    }

    // ---------------------------------------------------------------- stats

    /// (data bytes, index bytes) on disk for one collection: the table files' sizes on the disk
    /// engine, the entries' sizes in memory.
    fn coll_storage(&self, c: &Coll) -> DocResult<(u64, u64)> {
        let idents: Vec<(String, TableId)> = {
            let st = c.state.read();
            st.indexes
                .iter()
                .map(|i| (i.ident.clone(), i.table))
                .collect()
        };
        let data = self.table_size(&c.ident, c.table, c)?;
        let mut idx = 0;
        for (name, t) in idents {
            idx += self.table_size(&name, t, c)?;
        }
        Ok((data, idx))
    }

    fn table_size(&self, name: &str, table: TableId, c: &Coll) -> DocResult<u64> {
        if let Some(f) = self.table_file(name) {
            if let Ok(m) = std::fs::metadata(&f) {
                return Ok(m.len());
            }
        }
        Ok(c.table_bytes(table)? as u64)
    }

    fn table_file(&self, name: &str) -> Option<std::path::PathBuf> {
        if self.cfg.engine_kind != engine::EngineKind::Disk {
            return None;
        }
        let stats = self.engine.stats();
        let file = stats
            .get("tables")?
            .as_array()?
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(name))?
            .get("file")?
            .as_str()?
            .to_string();
        Some(self.cfg.engine.db_path.join(file))
    }

    pub fn coll_stats(&self, db: &str, coll: &str) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        let ns = catalog::ns(db, coll);
        let Some(c) = self.get_coll(db, coll) else {
            return Err(DocError::namespace_not_found(format!(
                "Collection [{ns}] not found."
            )));
        };
        let (count, size) = c.counts()?;
        let data_file = self.table_size(&c.ident, c.table, &c)?;
        let indexes: Vec<(String, String, TableId)> = {
            let st = c.state.read();
            st.indexes
                .iter()
                .map(|i| (i.def.name.clone(), i.ident.clone(), i.table))
                .collect()
        };
        let mut index_sizes = Document::new();
        let mut total_index = 0i64;
        for (name, ident, t) in &indexes {
            let s = self.table_size(ident, *t, &c)? as i64;
            total_index += s;
            index_sizes.insert(name.clone(), s);
        }
        let ct = &self.cfg.collection_table;
        let creation = format!(
            "allocation_size=4KB,block_allocation={:?},block_compressor={},internal_page_max={},leaf_page_max={},leaf_value_max={},memory_page_max={},prefix_compression={},split_pct=90,type=file",
            ct.allocation,
            ct.compressor.name(),
            ct.internal_page_max,
            ct.leaf_page_max,
            ct.leaf_value_max,
            ct.memory_page_max,
            ct.prefix_compression
        )
        .to_lowercase();
        Ok(doc! {
            "ns": ns,
            "size": size,
            "count": count,
            "avgObjSize": if count > 0 { size / count } else { 0 },
            "storageSize": data_file as i64,
            "freeStorageSize": 0i64,
            "capped": c.state.read().options.get_bool("capped").unwrap_or(false),
            "wiredTiger": {
                "creationString": creation,
                "type": "file",
                "uri": format!("statistics:table:{}", c.ident),
            },
            "nindexes": indexes.len() as i32,
            "indexBuilds": [],
            "totalIndexSize": total_index,
            "totalSize": data_file as i64 + total_index,
            "indexSizes": index_sizes,
            "scaleFactor": 1,
            "ok": 1.0,
        })
    }

    pub fn db_stats(&self, db: &str) -> DocResult<Document> {
        catalog::validate_db_name(db)?;
        let colls: Vec<Arc<Coll>> = self
            .colls
            .read()
            .values()
            .filter(|c| c.db == db)
            .cloned()
            .collect();
        let (mut objects, mut data, mut storage, mut nidx, mut idx_size) =
            (0i64, 0i64, 0i64, 0i64, 0i64);
        for c in &colls {
            let (n, s) = c.counts()?;
            objects += n;
            data += s;
            let (d, i) = self.coll_storage(c)?;
            storage += d as i64;
            idx_size += i as i64;
            nidx += c.state.read().indexes.len() as i64;
        }
        Ok(doc! {
            "db": db,
            "collections": colls.len() as i64,
            "views": 0i64,
            "objects": objects,
            "avgObjSize": if objects > 0 { data as f64 / objects as f64 } else { 0.0 },
            "dataSize": data as f64,
            "storageSize": storage as f64,
            "indexes": nidx,
            "indexSize": idx_size as f64,
            "totalSize": (storage + idx_size) as f64,
            "scaleFactor": 1i64,
            "fsUsedSize": 0.0,
            "fsTotalSize": 0.0,
            "ok": 1.0,
        })
    }

    /// The engine's statistics as a BSON document (for serverStatus).
    pub fn storage_stats(&self) -> Document {
        let v = self.engine.stats();
        match bson::to_bson(&v) {
            Ok(Bson::Document(d)) => d,
            Ok(other) => doc! {"engine": other},
            Err(e) => doc! {"error": e.to_string()},
        }
    }
}

/// explain's winningPlan: [PROJECTION_SIMPLE →] [LIMIT →] [SKIP →] [SORT →] FETCH → IXSCAN | COLLSCAN.
fn plan_doc(exec: &Exec, q: &FindQuery) -> Document {
    let plan: &Plan = &exec.plan;
    let direction = if plan.reverse { "backward" } else { "forward" };
    let mut stage = match &plan.access {
        Access::CollScan => doc! {
            "stage": "COLLSCAN",
            "filter": q.filter.clone(),
            "direction": direction,
        },
        Access::IxScan { index, bounds, .. } => {
            let mut ixscan = doc! {
                "stage": "IXSCAN",
                "keyPattern": index.def.key.clone(),
                "indexName": index.def.name.clone(),
                "isMultiKey": index.is_multikey(),
                "isUnique": index.def.unique,
                "isSparse": index.def.sparse,
                "isPartial": false,
                "indexVersion": 2,
                "direction": direction,
                "indexBounds": bounds.clone(),
            };
            // As mongod: the collation the index (and so the query) uses, in full.
            if let Some(c) = &index.def.collation {
                ixscan.insert("collation", c.spec().clone());
            }
            doc! {"stage": "FETCH", "filter": q.filter.clone(), "inputStage": ixscan}
        }
    };
    if exec.sort.is_some() && !plan.sort_provided {
        stage = doc! {"stage": "SORT", "sortPattern": q.sort.clone().unwrap_or_default(), "inputStage": stage};
    }
    if exec.skip > 0 {
        stage = doc! {"stage": "SKIP", "skipAmount": exec.skip as i64, "inputStage": stage};
    }
    if let Some(l) = exec.limit {
        stage = doc! {"stage": "LIMIT", "limitAmount": l as i64, "inputStage": stage};
    }
    if exec.projection.is_some() {
        stage = doc! {"stage": "PROJECTION_DEFAULT", "transformBy": q.projection.clone().unwrap_or_default(), "inputStage": stage};
    }
    stage
}

trait LimitExt {
    fn is_none_or_zero(&self) -> bool;
}

impl LimitExt for Option<i64> {
    fn is_none_or_zero(&self) -> bool {
        matches!(self, None | Some(0))
    }
}

/// Applies an update to a stored document and checks the result (`_id` unchanged and first,
/// no `$`-prefixed top-level fields).
fn updated_doc(old: &Document, m: &Update, pos: Option<usize>) -> DocResult<Document> {
    let mut new = old.clone();
    m.apply_with_position(&mut new, false, pos)?;
    let old_id = old.get("_id");
    match (old_id, new.get("_id")) {
        (Some(a), Some(b))
            if compare_bson(a, b) == Ordering::Equal && a.element_type() == b.element_type() => {}
        (Some(a), None) => {
            let mut d = doc! {"_id": a.clone()};
            d.extend(new);
            new = d;
        }
        (None, _) => {}
        _ => {
            return Err(DocError::immutable_field(
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ))
        }
    }
    finish_doc(new)
}

fn finish_doc(doc: Document) -> DocResult<Document> {
    for k in doc.keys() {
        if k.starts_with('$') {
            return Err(DocError::dollar_prefixed_field_name(format!(
                "The dollar ($) prefixed field '{k}' in '{k}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
            )));
        }
    }
    if let Some(id) = doc.get("_id") {
        if matches!(id, Bson::Array(_)) {
            return Err(DocError::invalid_id_field(
                "The '_id' value cannot be of type array",
            ));
        }
        collection::check_id(id)?;
    }
    if doc.keys().next().map(String::as_str) != Some("_id") && doc.contains_key("_id") {
        let mut d = doc! {"_id": doc.get("_id").cloned().unwrap()};
        for (k, v) in doc {
            if k != "_id" {
                d.insert(k, v);
            }
        }
        return Ok(d);
    }
    Ok(doc)
}

/// The document an upsert inserts.
fn upsert_doc(filter: &Document, m: &Update) -> DocResult<Document> {
    let seed = update::upsert_seed(filter)?;
    let mut doc = if m.is_replacement() {
        let mut d = Document::new();
        if let Some(id) = seed.get("_id") {
            d.insert("_id", id.clone());
        }
        d
    } else {
        seed
    };
    m.apply_with_position(&mut doc, true, None)?;
    let doc = finish_doc(doc)?;
    collection::prepare_insert(doc)
}
