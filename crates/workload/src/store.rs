//! Where a workload's operations go: the [`Store`] trait, at the level of MongoDB commands,
//! with two implementations:
//!
//! * [`InProc`]: the document layer ([`docdb::DocDb`]) in this process, the target of lab runs
//!   (the database may have been opened with an engine observer attached, see
//!   [`InProc::open`] and [`InProc::new`]);
//! * [`Wire`]: any MongoDB-compatible server through the official Rust driver (`mongodb`, sync
//!   API), e.g. `flashdoc serve` or a real mongod.
//!
//! Each operation is the logical command the reference client sends (YCSB's MongoDB binding,
//! LinkBenchX's `LinkStoreMongoDBv2`): `find` with filter/projection/sort/skip/limit, `insert`,
//! `update` with upsert, `delete`, `count`, index creation. Both stores answer them with the same
//! documents, so a run against either ends with the same data (a test checks this).

use anyhow::{anyhow, Context, Result};
use bson::{doc, Bson, Document};
use docdb::{DeleteStatement, DocDb, DocDbConfig, FindQuery, UpdateStatement, WriteOpts};
use std::sync::Arc;

/// A find: `filter`, optional projection and sort, skip, limit (0 = none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Query {
    pub filter: Document,
    pub projection: Option<Document>,
    pub sort: Option<Document>,
    pub skip: u64,
    /// 0: no limit.
    pub limit: i64,
}

impl Query {
    pub fn filter(filter: Document) -> Query {
        Query {
            filter,
            ..Default::default()
        }
    }
}

/// One statement of an `update` command.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    pub q: Document,
    /// Update operators or a replacement document.
    pub u: Document,
    pub upsert: bool,
}

/// What an update statement did (the command reply's n / nModified / upserted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateResult {
    pub matched: u64,
    pub modified: u64,
    pub upserted: bool,
}

/// An index to create: key pattern, name, unique.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexSpec {
    pub keys: Document,
    pub name: String,
    pub unique: bool,
}

/// A database a workload runs against. All collections live in one database, named when the
/// store is built. Implementations are shared by all client threads.
pub trait Store: Send + Sync {
    /// A short description for reports ("inproc", "mongodb://127.0.0.1:27017/ycsb").
    fn describe(&self) -> String;
    /// Drops a collection (no error if it does not exist).
    fn drop_collection(&self, coll: &str) -> Result<()>;
    /// Creates indexes (existing identical ones are fine).
    fn create_indexes(&self, coll: &str, specs: &[IndexSpec]) -> Result<()>;
    /// `insert` of one document (ordered, as the drivers' insertOne).
    fn insert_one(&self, coll: &str, doc: Document) -> Result<()>;
    /// Unordered `insert` of many documents; returns how many were inserted.
    fn insert_many(&self, coll: &str, docs: Vec<Document>) -> Result<u64>;
    /// `find`: all documents of the result (getMores included).
    fn find(&self, coll: &str, q: &Query) -> Result<Vec<Document>>;
    /// `find` with limit 1 and singleBatch (the drivers' findOne / `.first()`).
    fn find_one(&self, coll: &str, filter: Document) -> Result<Option<Document>>;
    /// `update` with one statement (updateOne / replaceOne, `multi: false`).
    fn update_one(&self, coll: &str, u: Update) -> Result<UpdateResult>;
    /// Unordered `update` with many statements (bulk upserts of a load phase).
    fn update_bulk(&self, coll: &str, us: Vec<Update>) -> Result<()>;
    /// `delete` with limit 1; returns the number deleted.
    fn delete_one(&self, coll: &str, filter: Document) -> Result<u64>;
    /// The `count` command (filter, skip, limit 0 = none).
    fn count(&self, coll: &str, filter: Document, skip: u64, limit: i64) -> Result<u64>;
    /// Makes everything written so far durable (checkpoint in process; nothing on the wire).
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

// ------------------------------------------------------------------------------- in process

/// The document layer in this process.
pub struct InProc {
    db: Arc<DocDb>,
    dbname: String,
}

impl InProc {
    /// Drives an already open database (e.g. one the lab opened with an observer attached).
    pub fn new(db: Arc<DocDb>, dbname: impl Into<String>) -> InProc {
        InProc {
            db,
            dbname: dbname.into(),
        }
    }

    /// Opens a database from a fully built configuration.
    pub fn open(cfg: DocDbConfig, dbname: impl Into<String>) -> Result<InProc> {
        let db = DocDb::open(cfg).map_err(|e| anyhow!("opening the database: {e}"))?;
        Ok(InProc::new(db, dbname))
    }

    /// The in-memory engine (tests).
    pub fn in_memory(dbname: impl Into<String>) -> Result<InProc> {
        InProc::open(DocDbConfig::in_memory(), dbname)
    }

    pub fn db(&self) -> &Arc<DocDb> {
        &self.db
    }

    /// Checkpoints and closes the database.
    pub fn shutdown(&self) -> Result<()> {
        self.db.shutdown().map_err(|e| anyhow!("shutdown: {e}"))
    }
}

fn outcome(o: docdb::WriteOutcome) -> Result<docdb::WriteOutcome> {
    if let Some(e) = o.write_errors.first() {
        return Err(anyhow!("write error at statement {}: {}", e.index, e.error));
    }
    Ok(o)
}

impl Store for InProc {
    fn describe(&self) -> String {
        format!("inproc/{}", self.dbname)
    }

    fn drop_collection(&self, coll: &str) -> Result<()> {
        match self.db.drop_collection(&self.dbname, coll) {
            Ok(()) => Ok(()),
            Err(e) if e.code_name == "NamespaceNotFound" => Ok(()),
            Err(e) => Err(anyhow!("drop {coll}: {e}")),
        }
    }

    fn create_indexes(&self, coll: &str, specs: &[IndexSpec]) -> Result<()> {
        let docs: Vec<Document> = specs
            .iter()
            .map(|s| doc! {"key": s.keys.clone(), "name": &s.name, "unique": s.unique})
            .collect();
        self.db
            .create_indexes(&self.dbname, coll, &docs)
            .map_err(|e| anyhow!("createIndexes on {coll}: {e}"))?;
        Ok(())
    }

    fn insert_one(&self, coll: &str, doc: Document) -> Result<()> {
        outcome(
            self.db
                .insert(&self.dbname, coll, vec![doc], WriteOpts::default()),
        )?;
        Ok(())
    }

    fn insert_many(&self, coll: &str, docs: Vec<Document>) -> Result<u64> {
        let o = self.db.insert(
            &self.dbname,
            coll,
            docs,
            WriteOpts {
                ordered: false,
                ..WriteOpts::default()
            },
        );
        Ok(outcome(o)?.n)
    }

    fn find(&self, coll: &str, q: &Query) -> Result<Vec<Document>> {
        let fq = FindQuery {
            filter: q.filter.clone(),
            projection: q.projection.clone(),
            sort: q.sort.clone(),
            skip: q.skip,
            limit: (q.limit != 0).then_some(q.limit),
            ..FindQuery::default()
        };
        let cur = self
            .db
            .find(&self.dbname, coll, &fq)
            .map_err(|e| anyhow!("find on {coll}: {e}"))?;
        cur.map(|d| d.map_err(|e| anyhow!("find on {coll}: {e}")))
            .collect()
    }

    fn find_one(&self, coll: &str, filter: Document) -> Result<Option<Document>> {
        let q = Query {
            filter,
            limit: 1,
            ..Default::default()
        };
        Ok(self.find(coll, &q)?.into_iter().next())
    }

    fn update_one(&self, coll: &str, u: Update) -> Result<UpdateResult> {
        let o = self.db.update(
            &self.dbname,
            coll,
            &[UpdateStatement {
                q: u.q,
                u: Bson::Document(u.u),
                upsert: u.upsert,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        );
        let o = outcome(o)?;
        let upserted = !o.upserted.is_empty();
        Ok(UpdateResult {
            matched: o.n - u64::from(upserted),
            modified: o.n_modified,
            upserted,
        })
    }

    fn update_bulk(&self, coll: &str, us: Vec<Update>) -> Result<()> {
        let stmts: Vec<UpdateStatement> = us
            .into_iter()
            .map(|u| UpdateStatement {
                q: u.q,
                u: Bson::Document(u.u),
                upsert: u.upsert,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            })
            .collect();
        outcome(self.db.update(
            &self.dbname,
            coll,
            &stmts,
            WriteOpts {
                ordered: false,
                ..WriteOpts::default()
            },
        ))?;
        Ok(())
    }

    fn delete_one(&self, coll: &str, filter: Document) -> Result<u64> {
        let o = self.db.delete(
            &self.dbname,
            coll,
            &[DeleteStatement {
                q: filter,
                limit: 1,
                collation: None,
                ..Default::default()
            }],
            WriteOpts::default(),
        );
        Ok(outcome(o)?.n)
    }

    fn count(&self, coll: &str, filter: Document, skip: u64, limit: i64) -> Result<u64> {
        self.db
            .count(
                &self.dbname,
                coll,
                &FindQuery {
                    filter,
                    skip,
                    limit: (limit != 0).then_some(limit),
                    ..FindQuery::default()
                },
            )
            .map_err(|e| anyhow!("count on {coll}: {e}"))
    }

    fn flush(&self) -> Result<()> {
        self.db
            .engine()
            .checkpoint()
            .map_err(|e| anyhow!("checkpoint: {e}"))
    }
}

// ------------------------------------------------------------------------------- wire

/// A MongoDB-compatible server through the Rust driver (one client, one connection pool,
/// shared by all threads, as YCSB's binding shares its `MongoClient`).
pub struct Wire {
    uri: String,
    client: mongodb::sync::Client,
    db: mongodb::sync::Database,
}

impl Wire {
    /// `uri` is a MongoDB connection string. The database is its path, or `default_db` when it
    /// has none (YCSB's binding: "ycsb" when the path is empty or `admin`).
    pub fn connect(uri: &str, default_db: &str) -> Result<Wire> {
        let client = mongodb::sync::Client::with_uri_str(uri)
            .with_context(|| format!("connecting to {uri}"))?;
        let name = client
            .default_database()
            .map(|d| d.name().to_string())
            .filter(|n| !n.is_empty() && n != "admin")
            .unwrap_or_else(|| default_db.to_string());
        let db = client.database(&name);
        Ok(Wire {
            uri: uri.to_string(),
            client,
            db,
        })
    }

    pub fn client(&self) -> &mongodb::sync::Client {
        &self.client
    }

    fn coll(&self, name: &str) -> mongodb::sync::Collection<Document> {
        self.db.collection(name)
    }

    fn command(&self, cmd: Document) -> Result<Document> {
        let reply = self.db.run_command(cmd).run().map_err(|e| anyhow!("{e}"))?;
        if let Ok(errs) = reply.get_array("writeErrors") {
            if let Some(Bson::Document(e)) = errs.first() {
                return Err(anyhow!(
                    "write error: {}",
                    e.get_str("errmsg").unwrap_or("unknown")
                ));
            }
        }
        Ok(reply)
    }
}

fn as_u64(d: &Document, key: &str) -> u64 {
    match d.get(key) {
        Some(Bson::Int32(n)) => *n as u64,
        Some(Bson::Int64(n)) => *n as u64,
        Some(Bson::Double(n)) => *n as u64,
        _ => 0,
    }
}

impl Store for Wire {
    fn describe(&self) -> String {
        self.uri.clone()
    }

    fn drop_collection(&self, coll: &str) -> Result<()> {
        match self.coll(coll).drop().run() {
            Ok(()) => Ok(()),
            Err(e)
                if e.to_string().contains("NamespaceNotFound")
                    || e.to_string().contains("ns not found") =>
            {
                Ok(())
            }
            Err(e) => Err(anyhow!("drop {coll}: {e}")),
        }
    }

    fn create_indexes(&self, coll: &str, specs: &[IndexSpec]) -> Result<()> {
        let indexes: Vec<Bson> = specs
            .iter()
            .map(|s| {
                Bson::Document(doc! {"key": s.keys.clone(), "name": &s.name, "unique": s.unique})
            })
            .collect();
        self.command(doc! {"createIndexes": coll, "indexes": indexes})
            .with_context(|| format!("createIndexes on {coll}"))?;
        Ok(())
    }

    fn insert_one(&self, coll: &str, doc: Document) -> Result<()> {
        self.coll(coll)
            .insert_one(doc)
            .run()
            .map_err(|e| anyhow!("insert into {coll}: {e}"))?;
        Ok(())
    }

    fn insert_many(&self, coll: &str, docs: Vec<Document>) -> Result<u64> {
        let n = docs.len() as u64;
        self.coll(coll)
            .insert_many(docs)
            .ordered(false)
            .run()
            .map_err(|e| anyhow!("insert into {coll}: {e}"))?;
        Ok(n)
    }

    fn find(&self, coll: &str, q: &Query) -> Result<Vec<Document>> {
        let c = self.coll(coll);
        let mut f = c.find(q.filter.clone());
        if let Some(p) = &q.projection {
            f = f.projection(p.clone());
        }
        if let Some(s) = &q.sort {
            f = f.sort(s.clone());
        }
        if q.skip > 0 {
            f = f.skip(q.skip);
        }
        if q.limit != 0 {
            f = f.limit(q.limit);
        }
        let cur = f.run().map_err(|e| anyhow!("find on {coll}: {e}"))?;
        cur.map(|d| d.map_err(|e| anyhow!("find on {coll}: {e}")))
            .collect()
    }

    fn find_one(&self, coll: &str, filter: Document) -> Result<Option<Document>> {
        self.coll(coll)
            .find_one(filter)
            .run()
            .map_err(|e| anyhow!("find on {coll}: {e}"))
    }

    fn update_one(&self, coll: &str, u: Update) -> Result<UpdateResult> {
        let is_replacement = u.u.keys().next().is_some_and(|k| !k.starts_with('$'));
        let r = if is_replacement {
            self.coll(coll).replace_one(u.q, u.u).upsert(u.upsert).run()
        } else {
            self.coll(coll).update_one(u.q, u.u).upsert(u.upsert).run()
        }
        .map_err(|e| anyhow!("update on {coll}: {e}"))?;
        Ok(UpdateResult {
            matched: r.matched_count,
            modified: r.modified_count,
            upserted: r.upserted_id.is_some(),
        })
    }

    fn update_bulk(&self, coll: &str, us: Vec<Update>) -> Result<()> {
        let updates: Vec<Bson> = us
            .into_iter()
            .map(|u| Bson::Document(doc! {"q": u.q, "u": u.u, "upsert": u.upsert, "multi": false}))
            .collect();
        self.command(doc! {"update": coll, "updates": updates, "ordered": false})
            .with_context(|| format!("bulk update on {coll}"))?;
        Ok(())
    }

    fn delete_one(&self, coll: &str, filter: Document) -> Result<u64> {
        let r = self
            .coll(coll)
            .delete_one(filter)
            .run()
            .map_err(|e| anyhow!("delete on {coll}: {e}"))?;
        Ok(r.deleted_count)
    }

    fn count(&self, coll: &str, filter: Document, skip: u64, limit: i64) -> Result<u64> {
        let mut cmd = doc! {"count": coll, "query": filter};
        if skip > 0 {
            cmd.insert("skip", skip as i64);
        }
        if limit != 0 {
            cmd.insert("limit", limit);
        }
        let reply = self
            .command(cmd)
            .with_context(|| format!("count on {coll}"))?;
        Ok(as_u64(&reply, "n"))
    }
}

/// Opens the store a `--target` names: `inproc` (with `inproc` = the given config) or a
/// `mongodb://` connection string.
pub fn open_target(
    target: &str,
    inproc: impl FnOnce() -> Result<DocDbConfig>,
    dbname: &str,
) -> Result<Arc<dyn Store>> {
    if target == "inproc" {
        Ok(Arc::new(InProc::open(inproc()?, dbname)?))
    } else if target.starts_with("mongodb://") || target.starts_with("mongodb+srv://") {
        Ok(Arc::new(Wire::connect(target, dbname)?))
    } else {
        Err(anyhow!(
            "unknown target '{target}': use inproc or a mongodb:// connection string"
        ))
    }
}

/// A checksum of a collection's content: (documents, FNV-1a-64 over every document's BSON
/// bytes in `_id` order). Two stores with the same data give the same value.
pub fn collection_checksum(store: &dyn Store, coll: &str) -> Result<(u64, u64)> {
    let docs = store.find(
        coll,
        &Query {
            sort: Some(doc! {"_id": 1}),
            ..Default::default()
        },
    )?;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for d in &docs {
        let bytes = bson::to_vec(d).context("encoding a document")?;
        for b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(1_099_511_628_211);
        }
    }
    Ok((docs.len() as u64, h))
}

/// A store that forwards to another and logs every call (tests: the same seed gives the same
/// operation sequence; debugging: what a workload sends).
pub struct Traced<S: Store> {
    pub inner: S,
    pub log: parking_lot::Mutex<Vec<String>>,
}

impl<S: Store> Traced<S> {
    pub fn new(inner: S) -> Traced<S> {
        Traced {
            inner,
            log: parking_lot::Mutex::new(Vec::new()),
        }
    }

    fn note(&self, s: String) {
        self.log.lock().push(s);
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock())
    }
}

impl<S: Store> Store for Traced<S> {
    fn describe(&self) -> String {
        format!("traced {}", self.inner.describe())
    }
    fn drop_collection(&self, coll: &str) -> Result<()> {
        self.note(format!("drop {coll}"));
        self.inner.drop_collection(coll)
    }
    fn create_indexes(&self, coll: &str, specs: &[IndexSpec]) -> Result<()> {
        self.note(format!("createIndexes {coll} {specs:?}"));
        self.inner.create_indexes(coll, specs)
    }
    fn insert_one(&self, coll: &str, doc: Document) -> Result<()> {
        self.note(format!("insert {coll} {doc}"));
        self.inner.insert_one(coll, doc)
    }
    fn insert_many(&self, coll: &str, docs: Vec<Document>) -> Result<u64> {
        self.note(format!("insertMany {coll} {docs:?}"));
        self.inner.insert_many(coll, docs)
    }
    fn find(&self, coll: &str, q: &Query) -> Result<Vec<Document>> {
        self.note(format!("find {coll} {q:?}"));
        self.inner.find(coll, q)
    }
    fn find_one(&self, coll: &str, filter: Document) -> Result<Option<Document>> {
        self.note(format!("findOne {coll} {filter}"));
        self.inner.find_one(coll, filter)
    }
    fn update_one(&self, coll: &str, u: Update) -> Result<UpdateResult> {
        self.note(format!("update {coll} {u:?}"));
        self.inner.update_one(coll, u)
    }
    fn update_bulk(&self, coll: &str, us: Vec<Update>) -> Result<()> {
        self.note(format!("updateBulk {coll} {us:?}"));
        self.inner.update_bulk(coll, us)
    }
    fn delete_one(&self, coll: &str, filter: Document) -> Result<u64> {
        self.note(format!("delete {coll} {filter}"));
        self.inner.delete_one(coll, filter)
    }
    fn count(&self, coll: &str, filter: Document, skip: u64, limit: i64) -> Result<u64> {
        self.note(format!("count {coll} {filter} {skip} {limit}"));
        self.inner.count(coll, filter, skip, limit)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}
