//! The document database: the public API the wire server calls (catalog commands, writes,
//! queries, explain, stats). See docs/docdb.md for the design. This file holds the API's
//! types and opening the database; each family of calls is its own file.

mod collmod;
mod compact;
mod ddl;
mod explain;
mod geo_near;
mod oplog_apply;
mod pipeline;
mod read;
mod repair;
mod rollback;
mod snapshot;
mod statements;
mod stats;
mod timeseries;
mod views;
pub use compact::{CompactOpts, DEFAULT_FREE_SPACE_TARGET_MB};
pub use repair::{CollectionRepair, IndexRepair};
pub use snapshot::{ReplicatedSnapshot, SnapshotContents, SNAPSHOT_FORMAT};
pub use stats::{scaled, COLL_STATS_SIZES, DB_STATS_SIZES};
pub use views::ViewDef;
mod write;

use crate::catalog::{self, CollEntry, IndexEntry, CATALOG_TABLE};
use crate::collection::{self, decode_doc, encode_doc, Coll, CollState, Index};
use crate::config::DocDbConfig;
use crate::cursor::{DocCursor, Exec, ExecStats};
use crate::geo_index;
use crate::index::{self, IndexDef, IndexKind, RecordId};
use crate::oplog::{OpRecord, Oplog};
use crate::planner::{self, Access, Plan};
use crate::scope::{self, Hooks, WriteHook};
use crate::storage_error;
use bson::{doc, Bson, Document, Uuid};
use engine::{KvEngine, TableConfig, TableId, WriteBatch, WriteOptions};
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
use query::vars::Scope;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Weak};

/// mongod's limit on indexes per collection.
const MAX_INDEXES: usize = 64;
/// The name prefix of `$out`'s temporary collections (mongod's `tmp.agg_out.<uuid>`).
pub(crate) const OUT_TEMP_PREFIX: &str = "tmp.agg_out.";
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

/// What a namespace of a database is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectionKind {
    Collection,
    View,
    /// A time-series collection: the view over its `system.buckets.<name>` collection.
    Timeseries,
}

impl CollectionKind {
    /// The `type` `listCollections` reports.
    pub fn name(self) -> &'static str {
        match self {
            CollectionKind::Collection => "collection",
            CollectionKind::View => "view",
            CollectionKind::Timeseries => "timeseries",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct CollectionInfo {
    pub name: String,
    pub kind: CollectionKind,
    pub options: Document,
    /// None for a view (it has no storage of its own).
    pub uuid: Option<Uuid>,
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
#[derive(Clone, Default)]
pub struct AggregateOpts {
    pub interrupt: Interrupt,
    /// The aggregation's collation (`{locale: ...}`); None: the collection's default.
    pub collation: Option<Document>,
    /// What `$currentOp` and `$listLocalSessions` report (the server's operations and
    /// sessions); None: those stages are refused.
    pub current_ops: Option<Arc<dyn CurrentOps>>,
    /// The index (name or key pattern) the first stage's scan uses, as `find`'s hint.
    pub hint: Option<Bson>,
    /// The command's `let` variables, which every stage's expressions read.
    pub vars: Scope,
    /// `bypassDocumentValidation`: `$out` and `$merge` write without the target's validator.
    pub bypass_validation: bool,
}

impl std::fmt::Debug for AggregateOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregateOpts")
            .field("interrupt", &self.interrupt)
            .field("collation", &self.collation)
            .field("current_ops", &self.current_ops.is_some())
            .field("hint", &self.hint)
            .field("vars", &self.vars)
            .field("bypass_validation", &self.bypass_validation)
            .finish()
    }
}

/// The server's operations in progress, for `$currentOp`, and its logical sessions, for
/// `$listLocalSessions` (the document layer does not know them: the wire server does).
pub trait CurrentOps: Send + Sync {
    fn current_ops(&self, spec: &aggregate::CurrentOpSpec) -> DocResult<Vec<Document>>;
    fn local_sessions(&self, spec: &aggregate::ListSessionsSpec) -> DocResult<Vec<Document>>;
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

#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateStatement {
    pub q: Document,
    /// Update operators, a replacement document, or a pipeline (array).
    pub u: Bson,
    pub upsert: bool,
    pub multi: bool,
    pub array_filters: Option<Vec<Document>>,
    /// The statement's collation; None: the collection's default.
    pub collation: Option<Document>,
    /// The index (name or key pattern, or `{$natural: ±1}`) that finds the documents.
    pub hint: Option<Bson>,
    /// The command's `let` variables, which the filter and a pipeline update read.
    pub vars: Scope,
    /// The statement's own constants (`c`), which only a pipeline update reads.
    pub constants: Option<Document>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeleteStatement {
    pub q: Document,
    /// 0: all matching documents; 1: the first.
    pub limit: i64,
    /// The statement's collation; None: the collection's default.
    pub collation: Option<Document>,
    /// The index (name or key pattern, or `{$natural: ±1}`) that finds the documents.
    pub hint: Option<Bson>,
    /// The command's `let` variables, which the filter reads.
    pub vars: Scope,
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
    /// The index (name or key pattern, or `{$natural: ±1}`) that finds the document.
    pub hint: Option<Bson>,
    /// The command's `let` variables, which the query, a pipeline update and the returned
    /// fields read.
    pub vars: Scope,
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
    /// The command's `let` variables, which the filter's `$expr` and the projection read.
    pub vars: Scope,
    /// `min`/`max`: the inclusive lower and exclusive upper key of the scan of the hinted
    /// index (mongod's index bounds; a hint is required).
    pub min: Option<Document>,
    pub max: Option<Document>,
    /// `returnKey`: each result is the index key that produced it (`{}` without an index).
    pub return_key: bool,
    /// `showRecordId`: each result carries its RecordId as `$recordId` (a long).
    pub show_record_id: bool,
}

pub struct DocDb {
    engine: Arc<dyn KvEngine>,
    /// The same engine when it is the in-place one: collStats asks it for its extents' bytes.
    in_place: Option<Arc<inplace::InPlaceEngine>>,
    cfg: DocDbConfig,
    catalog_table: TableId,
    colls: RwLock<BTreeMap<String, Arc<Coll>>>,
    /// The views, by namespace (see `views.rs`); a namespace is a collection or a view.
    views: RwLock<BTreeMap<String, ViewDef>>,
    /// Serializes catalog changes (create, drop, rename, index builds and drops).
    ddl: Mutex<()>,
    hooks: Arc<Hooks>,
    /// The open multi-document transactions (`txn`).
    txns: Arc<crate::txn::Txns>,
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

/// The configuration of a table the server keeps for itself (the catalog, a shard's session
/// records) on an engine of `kind`: a collection table's defaults, uncompressed on the in-place
/// engine, which stores records uncompressed and refuses a table asking for a compressor.
pub fn internal_table_config(kind: engine::EngineKind) -> TableConfig {
    match kind {
        engine::EngineKind::Mmapv1 => TableConfig {
            compressor: engine::Compressor::None,
            ..TableConfig::collection()
        },
        _ => TableConfig::collection(),
    }
}

/// The storage engine `cfg` names, and the in-place engine's own handle when it is that one.
type Storage = (Arc<dyn KvEngine>, Option<Arc<inplace::InPlaceEngine>>);

fn open_storage(cfg: &DocDbConfig) -> DocResult<Storage> {
    if cfg.engine_kind == engine::EngineKind::Mmapv1 && cfg.oplog.is_some() {
        // Refused by name before anything is opened: a member must roll back to a majority
        // point and serve the oplog applier's snapshots, which the in-place engine cannot.
        return Err(DocError::with_code(
            72,
            "InvalidOptions",
            "--replSet (replication.replSetName): the mmapv1 engine cannot be a replica-set \
             member (it keeps no stable checkpoint to roll back to); run the set on wiredTiger",
        ));
    }
    match cfg.engine_kind {
        // The in-place engine's crate depends on the engine crate, so it is opened here.
        engine::EngineKind::Mmapv1 => {
            let e = Arc::new(
                inplace::InPlaceEngine::open(cfg.engine.clone()).map_err(in_place_open_error)?,
            );
            Ok((e.clone(), Some(e)))
        }
        kind => Ok((
            engine::open_engine(kind, cfg.engine.clone()).map_err(storage_error)?,
            None,
        )),
    }
}

/// The in-place engine's refusal to open: a damaged journal's message says what to do, and
/// `flashdoc repair` (which [`storage_error`] names for corrupt data) does not handle it.
fn in_place_open_error(e: engine::Error) -> DocError {
    match e {
        engine::Error::Corrupt { .. } | engine::Error::Checksum { .. } => {
            DocError::storage_error(format!("storage engine: {e}"))
        }
        e => storage_error(e),
    }
}

/// The collection a catalog entry names, on its tables (which exist), ready for use.
fn open_coll(
    engine: &Arc<dyn KvEngine>,
    catalog_table: TableId,
    e: &CollEntry,
    table: TableId,
    hooks: &Arc<Hooks>,
) -> DocResult<Coll> {
    let mut idx = Vec::new();
    for i in &e.indexes {
        let t = engine.table_id(&i.ident).ok_or_else(|| {
            DocError::internal_error(format!("catalog names missing table {}", i.ident))
        })?;
        idx.push(Arc::new(Index {
            def: i.def.clone(),
            ident: i.ident.clone(),
            table: t,
            multikey: i.multikey.into(),
        }));
    }
    let c = Coll::new(engine.clone(), catalog_table, e, table, idx, hooks.clone())?;
    c.prepare()?;
    Ok(c)
}

impl DocDb {
    pub fn open(cfg: DocDbConfig) -> DocResult<Arc<DocDb>> {
        let (engine, in_place) = open_storage(&cfg)?;
        let catalog_cfg = internal_table_config(cfg.engine_kind);
        let catalog_table = match engine.table_id(CATALOG_TABLE) {
            Some(t) => t,
            None => engine
                .create_table(CATALOG_TABLE, &catalog_cfg)
                .map_err(storage_error)?,
        };
        let mut entries = Vec::new();
        let mut views = BTreeMap::new();
        for kv in engine.scan_all(catalog_table).map_err(storage_error)? {
            let (_, v) = kv.map_err(storage_error)?;
            let d = decode_doc(&v)?;
            match d.get_document("view") {
                Ok(view) => {
                    let ns = d.get_str("ns").map_err(|_| {
                        DocError::internal_error(format!("corrupt view entry in the catalog: {d}"))
                    })?;
                    views.insert(ns.to_string(), ViewDef::from_stored(view)?);
                }
                Err(_) => entries.push(CollEntry::from_doc(&d)?),
            }
        }
        // `$out`'s temporary collections left by a crash before their rename: dropped, as
        // mongod drops temporary collections at startup (their tables go with the orphans).
        let (stale, entries): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| {
            catalog::split_ns(&e.ns).is_some_and(|(_, c)| c.starts_with(OUT_TEMP_PREFIX))
        });
        if !stale.is_empty() {
            let mut b = WriteBatch::new();
            for e in &stale {
                b.delete(catalog_table, e.ns.as_bytes().to_vec());
            }
            engine
                .write(&b, WriteOptions { sync: true })
                .map_err(storage_error)?;
        }
        let mut colls = BTreeMap::new();
        let oplog = match cfg.oplog {
            Some(settings) => Some(Arc::new(Oplog::open(engine.clone(), settings)?)),
            None => None,
        };
        let txns = crate::txn::Txns::new(engine.clone());
        let hooks = Arc::new(Hooks::new(oplog, Some(txns.clone())));
        // The collections read through a transaction on the thread of its statements; the
        // catalog is read as it is now.
        let engine: Arc<dyn KvEngine> =
            Arc::new(crate::txn::TxnEngine::new(engine, vec![catalog_table]));
        let mut referenced = HashSet::new();
        let mut startup_warnings = Vec::new();
        referenced.insert(CATALOG_TABLE.to_string());
        for e in entries {
            catalog::split_ns(&e.ns)
                .ok_or_else(|| DocError::internal_error(format!("bad catalog ns {}", e.ns)))?;
            let table = engine.table_id(&e.ident).ok_or_else(|| {
                DocError::internal_error(format!("catalog names missing table {}", e.ident))
            })?;
            referenced.insert(e.ident.clone());
            referenced.extend(e.indexes.iter().map(|i| i.ident.clone()));
            let c = open_coll(&engine, catalog_table, &e, table, &hooks)?;
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
            in_place,
            cfg,
            catalog_table,
            colls: RwLock::new(colls),
            views: RwLock::new(views),
            ddl: Mutex::new(()),
            hooks,
            txns,
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

    /// [`internal_table_config`] for this database's engine: what a table kept beside the
    /// collections (a shard's session records) is created with.
    pub fn internal_table_config(&self) -> TableConfig {
        internal_table_config(self.cfg.engine_kind)
    }

    pub fn config(&self) -> &DocDbConfig {
        &self.cfg
    }

    /// The database's multi-document transactions.
    pub fn txns(&self) -> &Arc<crate::txn::Txns> {
        &self.txns
    }

    /// Begins a multi-document transaction (its snapshot is taken now); its statements run
    /// inside [`crate::txn::with_txn`].
    pub fn begin_txn(
        &self,
        session: Option<crate::txn::TxnSession>,
    ) -> DocResult<Arc<crate::txn::Txn>> {
        self.txns.begin(session)
    }

    /// Commits `txn`: its writes, and on a replica-set member its one `applyOps` oplog entry,
    /// in one engine batch.
    pub fn commit_txn(&self, txn: &crate::txn::Txn) -> DocResult<()> {
        txn.commit(self.hooks.oplog().map(|l| &**l))
    }

    /// The oplog, when the database was opened as a replica-set member.
    pub fn oplog(&self) -> Option<&Arc<Oplog>> {
        self.hooks.oplog()
    }

    /// Writes `batch` (a catalog change) with the oplog entry of command `o` on database
    /// `db`, when the database keeps an oplog.
    fn write_catalog_logged(
        &self,
        batch: &mut WriteBatch,
        db: &str,
        ui: Option<Uuid>,
        o: Document,
    ) -> DocResult<()> {
        let write = |b: &WriteBatch| self.engine.write(b, WriteOptions { sync: true });
        match self.hooks.oplog() {
            Some(log) if db != crate::oplog::UNLOGGED_DB => {
                log.write_logged(batch, || OpRecord::command(db, ui, o), (None, None), write)?
            }
            _ => write(batch),
        }
        .map_err(storage_error)
    }

    /// Writes a no-op entry (`op: "n"`, `o: msg`) to the oplog and nothing else: what a
    /// replica set's primary proposes to learn that its term's entries commit (a linearizable
    /// read, the periodic no-op). Only a database opened with its oplog has one to write to.
    pub fn log_noop(&self, msg: Document) -> DocResult<()> {
        let log = self.hooks.oplog().ok_or_else(|| {
            DocError::illegal_operation("a no-op entry needs a replica-set member's oplog")
        })?;
        let write = |b: &WriteBatch| self.engine.write(b, WriteOptions { sync: true });
        log.write_logged(
            &mut WriteBatch::new(),
            || OpRecord::noop(msg),
            (None, None),
            write,
        )?
        .map_err(storage_error)
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

    /// The collections of database `db` (its name checked first), as of now.
    fn colls_of(&self, db: &str) -> DocResult<Vec<Arc<Coll>>> {
        catalog::validate_db_name(db)?;
        Ok(self
            .colls
            .read()
            .values()
            .filter(|c| c.db == db)
            .cloned()
            .collect())
    }

    /// The collection, created (implicitly, as MongoDB does on first write) if missing.
    fn get_or_create(&self, db: &str, coll: &str) -> DocResult<(Arc<Coll>, bool)> {
        if let Some(c) = self.get_coll(db, coll) {
            return Ok((c, false));
        }
        catalog::validate_coll_name(db, coll)?;
        views::refuse_system_views(db, coll)?;
        let _g = self.ddl.lock();
        if let Some(c) = self.get_coll(db, coll) {
            return Ok((c, false));
        }
        self.refuse_view(db, coll)?;
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
        self.refuse_view(db, coll)?;
        views::refuse_system_views(db, coll)?;
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
}

#[cfg(test)]
mod tests;

/// A replica-set member's database (a 16 MB oplog) on `cfg`, for tests.
#[cfg(test)]
pub(crate) fn test_member(mut cfg: DocDbConfig) -> Arc<DocDb> {
    cfg.oplog = Some(crate::oplog::OplogSettings::from_mb(16.0).unwrap());
    DocDb::open(cfg).unwrap()
}
