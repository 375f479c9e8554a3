//! `flashdoc repair`'s document half (mongod's `--repair`): every collection's table is read
//! through (each block's checksum verified) and every index is rebuilt from its collection
//! with the index-build code, replacing the old index table, so no index holds an entry for a
//! document the salvage lost or lacks one for a document it kept.

use super::*;

/// What rebuilding one index found.
#[derive(Clone, Debug)]
pub struct IndexRepair {
    pub name: String,
    /// Entries in the old index table, or why it could not be read.
    pub entries_before: Result<u64, String>,
    /// Entries in the rebuilt index.
    pub entries_after: u64,
}

/// What repairing one collection found.
#[derive(Clone, Debug)]
pub struct CollectionRepair {
    pub ns: String,
    /// Documents in the collection (every block of its table verified).
    pub documents: u64,
    /// Documents the salvage lost: the `_id` index's entries before its rebuild less the
    /// documents found (`None` when that index could not be read).
    pub documents_lost: Option<u64>,
    pub indexes: Vec<IndexRepair>,
}

impl DocDb {
    /// Rebuilds every index of every collection from the collection's documents, in namespace
    /// order. A collection table that fails its checks fails the repair (its documents cannot
    /// be told from damage); the error names the table's file and offset.
    pub fn rebuild_all_indexes(&self) -> DocResult<Vec<CollectionRepair>> {
        let colls: Vec<Arc<Coll>> = self.colls.read().values().cloned().collect();
        colls.iter().map(|c| self.rebuild_indexes(c)).collect()
    }

    fn rebuild_indexes(&self, c: &Coll) -> DocResult<CollectionRepair> {
        let _ddl = self.ddl.lock();
        let mut st = c.state.write();
        let documents = self
            .engine
            .verify_table(c.table)
            .map_err(|e| DocError::internal_error(format!("collection {}: {e}", c.ns)))?;
        let mut indexes = Vec::with_capacity(st.indexes.len());
        for i in 0..st.indexes.len() {
            let old = st.indexes[i].clone();
            let entries_before = self
                .engine
                .verify_table(old.table)
                .map_err(|e| e.to_string());
            let n = st.next_index_ident;
            st.next_index_ident += 1;
            // The index is built as new (an index name is built once): out of the list while
            // its replacement is built, back in its place after.
            st.indexes.remove(i);
            let built = self.build_index(c, &st, old.def.clone(), n, &Interrupt::none());
            let rebuilt = match built {
                Ok(index) => index,
                Err(e) => {
                    st.indexes.insert(i, old);
                    return Err(e);
                }
            };
            let rebuilt_table = rebuilt.table;
            st.indexes.insert(i, Arc::new(rebuilt));
            let entries_after = self
                .engine
                .verify_table(rebuilt_table)
                .map_err(storage_error)?;
            // The catalog names the new table before the old one goes, so a crash in between
            // leaves an orphan table, which the next open drops.
            c.persist_entry(&st)?;
            self.engine.drop_table(&old.ident).map_err(storage_error)?;
            indexes.push(IndexRepair {
                name: old.def.name.clone(),
                entries_before,
                entries_after,
            });
        }
        // Every document has one `_id` entry: entries without a document are documents lost.
        let documents_lost = indexes
            .iter()
            .find(|i| i.name == "_id_")
            .and_then(|i| i.entries_before.as_ref().ok())
            .map(|before| before.saturating_sub(documents));
        Ok(CollectionRepair {
            ns: c.ns.clone(),
            documents,
            documents_lost,
            indexes,
        })
    }
}
