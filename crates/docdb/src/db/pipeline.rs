//! The storage an aggregation pipeline reaches: the collections its joining stages read
//! (`$lookup`, `$unionWith`) and the ones its writing stages write (`$out`, `$merge`). Every
//! write goes through the public write path (`insert`, `update`, the catalog calls), so indexes,
//! validators and the engine's placement apply to it as to any client write.

use super::stats::{scaled, COLL_STATS_SIZES};
use super::*;
use query::aggregate::{CollectionSink, CollectionSource, Namespace};

pub(super) struct PipelineStorage {
    pub(super) db: Weak<DocDb>,
    /// The pipeline's database: where a namespace without `db` is.
    pub(super) dbname: String,
    /// The pipeline's own collection (what `$collStats` reports on).
    pub(super) coll: String,
    pub(super) interrupt: Interrupt,
    pub(super) current_ops: Option<Arc<dyn CurrentOps>>,
    /// The aggregate's `bypassDocumentValidation`: `$out` and `$merge` write without the
    /// target's validator.
    pub(super) bypass_validation: bool,
}

impl PipelineStorage {
    fn docdb(&self) -> DocResult<Arc<DocDb>> {
        self.db
            .upgrade()
            .ok_or_else(|| DocError::internal_error("database closed"))
    }

    fn db_of<'a>(&'a self, ns: &'a Namespace) -> &'a str {
        ns.db.as_deref().unwrap_or(&self.dbname)
    }

    fn write_opts(&self) -> WriteOpts {
        WriteOpts {
            interrupt: self.interrupt.clone(),
            bypass_validation: self.bypass_validation,
            ..Default::default()
        }
    }
}

/// The first error of a write, as the stage's error.
fn first_error(out: WriteOutcome) -> DocResult<WriteOutcome> {
    match out.write_errors.first() {
        Some(e) => Err(e.error.clone()),
        None => Ok(out),
    }
}

impl CollectionSource for PipelineStorage {
    fn read_collection(&self, name: &str) -> DocResult<Vec<Document>> {
        let q = FindQuery {
            interrupt: self.interrupt.clone(),
            ..Default::default()
        };
        self.docdb()?.find(&self.dbname, name, &q)?.collect()
    }

    fn sink(&self) -> Option<&dyn CollectionSink> {
        Some(self)
    }

    fn current_ops(&self, spec: &aggregate::CurrentOpSpec) -> Option<DocResult<Vec<Document>>> {
        Some(self.current_ops.as_ref()?.current_ops(spec))
    }

    fn local_sessions(
        &self,
        spec: &aggregate::ListSessionsSpec,
    ) -> Option<DocResult<Vec<Document>>> {
        Some(self.current_ops.as_ref()?.local_sessions(spec))
    }

    fn collection_stats(&self, scale: i64) -> Option<DocResult<Document>> {
        if self.coll.is_empty() {
            return None;
        }
        Some(self.docdb().and_then(|this| {
            let stats = this.coll_stats(&self.dbname, &self.coll)?;
            Ok(scaled(stats, scale, COLL_STATS_SIZES))
        }))
    }
}

impl CollectionSink for PipelineStorage {
    fn replace_collection(&self, ns: &Namespace, docs: Vec<Document>) -> DocResult<()> {
        let this = self.docdb()?;
        let db = self.db_of(ns);
        catalog::validate_coll_name(db, &ns.coll)?;
        // The temporary collection takes the target's options (validator included) and its
        // indexes, so the documents meet the same checks they would in the target.
        let options = this
            .list_collections(db)?
            .into_iter()
            .find(|c| c.name == ns.coll && c.kind == CollectionKind::Collection)
            .map(|c| c.options)
            .unwrap_or_default();
        let indexes: Vec<Document> = match this.list_indexes(db, &ns.coll) {
            Ok(specs) => specs
                .into_iter()
                .filter(|s| s.get_str("name") != Ok("_id_"))
                .collect(),
            Err(e) if e.code == 26 => Vec::new(),
            Err(e) => return Err(e),
        };
        let tmp = format!("{}{}", super::OUT_TEMP_PREFIX, Uuid::new());
        this.create_collection(db, &tmp, &options)?;
        let filled = (|| -> DocResult<()> {
            if !indexes.is_empty() {
                this.create_indexes_until(db, &tmp, &indexes, &self.interrupt)?;
            }
            first_error(this.insert(db, &tmp, docs, self.write_opts()))?;
            this.rename_collection(db, &tmp, db, &ns.coll, true)
        })();
        if filled.is_err() {
            // The target is untouched; the half-filled temporary goes.
            let _ = this.drop_collection(db, &tmp);
        }
        filled
    }

    fn has_unique_index(&self, ns: &Namespace, fields: &[String]) -> DocResult<bool> {
        if fields == ["_id"] {
            return Ok(true);
        }
        let specs = match self.docdb()?.list_indexes(self.db_of(ns), &ns.coll) {
            Ok(specs) => specs,
            Err(e) if e.code == 26 => return Ok(false),
            Err(e) => return Err(e),
        };
        let wanted: HashSet<&str> = fields.iter().map(String::as_str).collect();
        Ok(specs.iter().any(|s| {
            let unique = s.get_bool("unique").unwrap_or(false);
            let keys: HashSet<&str> = s
                .get_document("key")
                .map(|k| k.keys().map(String::as_str).collect())
                .unwrap_or_default();
            // A partial index does not cover every document.
            unique && keys == wanted && !s.contains_key("partialFilterExpression")
        }))
    }

    fn insert(&self, ns: &Namespace, doc: Document) -> DocResult<()> {
        let this = self.docdb()?;
        first_error(this.insert(self.db_of(ns), &ns.coll, vec![doc], self.write_opts()))?;
        Ok(())
    }

    fn update(
        &self,
        ns: &Namespace,
        filter: Document,
        update: Bson,
        upsert: bool,
    ) -> DocResult<u64> {
        let stmt = UpdateStatement {
            q: filter,
            u: update,
            upsert,
            ..Default::default()
        };
        let this = self.docdb()?;
        let out = first_error(this.update(self.db_of(ns), &ns.coll, &[stmt], self.write_opts()))?;
        Ok(out.n)
    }
}
