//! A replica-set member's rollback, docdb's side (docs/replication.md, "Rollback"): the
//! current version of a document an undone oplog entry touched (for the rollback files), and
//! the reset that empties every replicated namespace and the oplog so the member rebuilds its
//! data from the replicated log.

use super::DocDb;
use crate::oplog::is_replicated;
use crate::storage_error;
use bson::{Bson, Document, Uuid};
use engine::{WriteBatch, WriteOptions};
use query::error::DocResult;

impl DocDb {
    /// The document with `_id` `id` in the collection with UUID `ui`, as it is now, with the
    /// collection's namespace; `None` when either is gone (an undone insert's document that a
    /// later undone delete removed is not there to save, as in mongod).
    pub fn document_by_uuid(&self, ui: Uuid, id: &Bson) -> DocResult<Option<(String, Document)>> {
        let Some(c) = self.colls_snapshot().into_iter().find(|c| c.uuid == ui) else {
            return Ok(None);
        };
        Ok(self.doc_by_id(&c, id)?.map(|d| (c.ns.clone(), d)))
    }

    /// Removes every replicated namespace (all but the `local` database and the profilers'
    /// collections): collections with their indexes, and views, then empties the oplog and
    /// sets its clock back. Logs nothing to the oplog. Crash-safe by running it again: the
    /// catalog's entries go in one synced batch (a crash after it leaves tables the catalog
    /// no longer names, which open drops), the oplog in another; a second run finds less to
    /// do and finishes. The caller keeps the marker that says a reset is under way.
    pub fn reset_replicated(&self) -> DocResult<()> {
        let _g = self.ddl.lock();
        let colls: Vec<_> = self
            .colls_snapshot()
            .into_iter()
            .filter(|c| is_replicated(&c.db, &c.name))
            .collect();
        let views: Vec<String> = self
            .views
            .read()
            .keys()
            .filter(|ns| {
                crate::catalog::split_ns(ns).is_some_and(|(db, coll)| is_replicated(db, coll))
            })
            .cloned()
            .collect();
        let mut batch = WriteBatch::new();
        for ns in colls.iter().map(|c| &c.ns).chain(&views) {
            batch.delete(self.catalog_table, ns.as_bytes().to_vec());
        }
        self.engine
            .write(&batch, WriteOptions { sync: true })
            .map_err(storage_error)?;
        self.views.write().retain(|ns, _| !views.contains(ns));
        for c in &colls {
            self.release_dropped(c)?;
        }
        if let Some(oplog) = self.oplog() {
            oplog.clear()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::db::test_member as member;
    use crate::db::WriteOpts;
    use crate::{DocDb, DocDbConfig};
    use bson::{doc, Bson};

    fn insert(db: &DocDb, d: &str, c: &str, id: i32) {
        let out = db.insert(d, c, vec![doc! {"_id": id, "x": id}], WriteOpts::default());
        assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    }

    fn names(db: &DocDb) -> Vec<String> {
        let mut out = Vec::new();
        for d in db.list_databases().unwrap() {
            for c in db.list_collections(&d.name).unwrap() {
                out.push(format!("{}.{}", d.name, c.name));
            }
        }
        out
    }

    #[test]
    fn the_reset_keeps_only_what_is_not_replicated_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let db = member(DocDbConfig::disk(dir.path()));
        insert(&db, "app", "c", 1);
        insert(&db, "other", "d", 2);
        insert(&db, "local", "startup_log", 3);
        db.create_collection("app", "v", &doc! {"viewOn": "c", "pipeline": []})
            .unwrap();
        let oplog = db.oplog().unwrap().clone();
        assert!(oplog.totals().0 > 0);
        db.reset_replicated().unwrap();
        assert_eq!(names(&db), vec!["local.startup_log".to_string()]);
        assert_eq!(oplog.totals(), (0, 0));
        assert_eq!(
            oplog.last_ts(),
            bson::Timestamp {
                time: 0,
                increment: 0
            }
        );
        // Run again (a crash after it, before the caller's marker went): nothing left to do.
        db.reset_replicated().unwrap();
        // The same collection can be made again, and its entry starts the oplog anew.
        insert(&db, "app", "c", 1);
        assert!(oplog.totals().0 >= 1);
        db.shutdown().unwrap();
        drop((oplog, db));
        let again = member(DocDbConfig::disk(dir.path()));
        let mut seen = names(&again);
        seen.sort();
        assert_eq!(
            seen,
            vec!["app.c".to_string(), "local.startup_log".to_string()]
        );
    }

    #[test]
    fn a_document_is_found_by_its_collection_uuid() {
        let db = member(DocDbConfig::in_memory());
        insert(&db, "app", "c", 1);
        let ui = db.collection_handle("app", "c").unwrap().uuid;
        let (ns, d) = db.document_by_uuid(ui, &Bson::Int32(1)).unwrap().unwrap();
        assert_eq!((ns.as_str(), d), ("app.c", doc! {"_id": 1, "x": 1}));
        assert!(db.document_by_uuid(ui, &Bson::Int32(2)).unwrap().is_none());
        db.drop_collection("app", "c").unwrap();
        assert!(db.document_by_uuid(ui, &Bson::Int32(1)).unwrap().is_none());
    }
}
