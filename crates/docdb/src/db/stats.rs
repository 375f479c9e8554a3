//! `validate`, and the storage statistics of collections, databases and the engine.

use super::*;

impl DocDb {
    /// The `validate` command: with writers to the collection held off, the engine reads every
    /// block of the collection's table and of each index table (checksums, page kinds, key
    /// order); every document is decoded and its keys are looked up in every index; each
    /// index's entry count is compared with the keys the documents have. Problems are reported
    /// in `errors` with `valid: false`, in mongod's reply shape; a missing collection is
    /// NamespaceNotFound (26).
    /// `interrupt` is checked once per document. Without `scan_data` (the legacy
    /// `scandata: false`) only the tables' structure is checked: the documents are not decoded
    /// nor looked up in the indexes, and the entry counts are not compared.
    pub fn validate(
        &self,
        db: &str,
        coll: &str,
        scan_data: bool,
        interrupt: &Interrupt,
    ) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        self.refuse_view(db, coll)?;
        let ns = catalog::ns(db, coll);
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("Collection '{ns}' does not exist to validate."))
        })?;
        let st = c.state.write();
        let mut found = self.verify_tables(&c, &st);
        if found.errors.is_empty() && scan_data {
            let expected = self.validate_documents(&c, &st, &mut found, interrupt)?;
            found.compare_entry_counts(&st, &expected);
        }
        Ok(found.reply(ns, &c, &st))
    }

    /// The engine's check of the collection's table and of each index table.
    fn verify_tables(&self, c: &Coll, st: &CollState) -> Validation {
        let mut found = Validation {
            errors: Vec::new(),
            index_bad: vec![false; st.indexes.len()],
            entries: Vec::new(),
            nrecords: 0,
            invalid_docs: 0,
            non_compliant: 0,
            missing: 0,
        };
        found.nrecords = match self.engine.verify_table(c.table) {
            Ok(n) => n as i64,
            Err(e) => {
                found
                    .errors
                    .push(format!("collection table {}: {e}", c.ident));
                0
            }
        };
        for (i, idx) in st.indexes.iter().enumerate() {
            let entries = match self.engine.verify_table(idx.table) {
                Ok(n) => Some(n),
                Err(e) => {
                    found
                        .errors
                        .push(format!("index {} ({}): {e}", idx.def.name, idx.ident));
                    found.index_bad[i] = true;
                    None
                }
            };
            found.entries.push(entries);
        }
        found
    }

    /// Decodes every document and looks its keys up in every index; returns the keys the
    /// documents give each index.
    fn validate_documents(
        &self,
        c: &Coll,
        st: &CollState,
        found: &mut Validation,
        interrupt: &Interrupt,
    ) -> DocResult<Vec<u64>> {
        // Documents the validator would refuse now, judged as writes are (under the default
        // collation); mongod reports them as a warning, not as invalid data.
        let _default = collation::scope(c.default_collation.clone());
        let validator = c.validator();
        let mut expected = vec![0u64; st.indexes.len()];
        for rec in self.records(c.table)? {
            interrupt.check()?;
            let (rid, v) = rec?;
            let doc = match collection::decode_doc(&v) {
                Ok(d) => d,
                Err(e) => {
                    found.invalid_docs += 1;
                    found.errors.push(format!("record {rid}: {e}"));
                    continue;
                }
            };
            if validator.as_ref().is_some_and(|v| !v.matches(&doc)) {
                found.non_compliant += 1;
            }
            for (i, idx) in st.indexes.iter().enumerate() {
                expected[i] += self.check_doc_entries(idx, i, rid, &doc, found)?;
            }
        }
        Ok(expected)
    }

    /// Looks up the entries one document gives index `i`; returns how many it gives.
    fn check_doc_entries(
        &self,
        idx: &Index,
        i: usize,
        rid: RecordId,
        doc: &Document,
        found: &mut Validation,
    ) -> DocResult<u64> {
        let keys = index::doc_keys(&idx.def, doc)?;
        for key in &keys.keys {
            let entry = index::entry_key(idx.def.unique, &key.encoded, rid);
            let present = match self.engine.get(idx.table, &entry).map_err(storage_error)? {
                Some(val) => !idx.def.unique || index::rid_from(&val)? == rid,
                None => false,
            };
            if !present {
                found.index_bad[i] = true;
                found.missing += 1;
                if found.missing <= 10 {
                    found.errors.push(format!(
                        "index {} is missing the entry {:?} for record {rid}",
                        idx.def.name, key.values
                    ));
                }
            }
        }
        Ok(keys.keys.len() as u64)
    }

    /// (data bytes, index bytes) on disk for one collection: the table files' sizes on the disk
    /// engine, the bytes of the tables' extents on the in-place engine, the entries' sizes in
    /// memory.
    pub(super) fn coll_storage(&self, c: &Coll) -> DocResult<(u64, u64)> {
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

    pub(super) fn table_size(&self, name: &str, table: TableId, c: &Coll) -> DocResult<u64> {
        if let Some(e) = &self.in_place {
            // MMAPv1's storageSize: the extents the table holds, used or not.
            return e.table_extent_bytes(table).map_err(storage_error);
        }
        if let Some(f) = self.table_file(name) {
            if let Ok(m) = std::fs::metadata(&f) {
                return Ok(m.len());
            }
        }
        Ok(c.table_bytes(table)? as u64)
    }

    pub(super) fn table_file(&self, name: &str) -> Option<std::path::PathBuf> {
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

    /// The configuration stored with a table (in the engine's metadata): a table keeps the one
    /// it was created with, whatever the template says now (a table made before flash mode
    /// keeps its allocation). The template only for a table the engine does not list.
    fn stored_table_config(&self, table: TableId) -> engine::TableConfig {
        self.engine
            .tables()
            .into_iter()
            .find(|(_, id, _)| *id == table)
            .map_or_else(|| self.cfg.collection_table.clone(), |(_, _, cfg)| cfg)
    }

    pub fn coll_stats(&self, db: &str, coll: &str) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        self.refuse_view(db, coll)?;
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
        let creation = creation_string(&self.stored_table_config(c.table));
        let mut stats = doc! {
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
            // A standalone owns every document it holds.
            "numOrphanDocs": 0,
            "ok": 1.0,
        };
        // A capped collection's limits, as mongod reports them (mongosh's stats() reads
        // maxSize when `capped` is true).
        if let Some(cap) = c.capped {
            stats.insert("max", cap.max.unwrap_or(0));
            stats.insert("maxSize", cap.size);
        }
        Ok(stats)
    }

    pub fn db_stats(&self, db: &str) -> DocResult<Document> {
        let colls = self.colls_of(db)?;
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
    /// The effective flash settings (`serverStatus().flash`, the startup log): the engine's,
    /// the collection template's allocation and the hint path the engine detected.
    pub fn flash_report(&self) -> engine::FlashReport {
        let c = &self.cfg;
        engine::FlashReport::new(
            c.engine_kind,
            &c.engine,
            &c.collection_table,
            self.engine.hint_path(),
        )
    }

    /// `flash_report` as serverStatus shows it.
    pub fn flash_status(&self) -> Document {
        match bson::to_bson(&self.flash_report()) {
            Ok(Bson::Document(d)) => d,
            Ok(other) => doc! {"report": other},
            Err(e) => doc! {"error": e.to_string()},
        }
    }

    pub fn storage_stats(&self) -> Document {
        let v = self.engine.stats();
        match bson::to_bson(&v) {
            Ok(Bson::Document(d)) => d,
            Ok(other) => doc! {"engine": other},
            Err(e) => doc! {"error": e.to_string()},
        }
    }
}

/// The size fields of collStats and dbStats that `scale` divides (not `avgObjSize`, as mongod).
pub const COLL_STATS_SIZES: &[&str] = &[
    "size",
    "maxSize",
    "storageSize",
    "freeStorageSize",
    "totalIndexSize",
    "totalSize",
    "indexSizes",
];
pub const DB_STATS_SIZES: &[&str] = &[
    "dataSize",
    "storageSize",
    "indexSize",
    "totalSize",
    "fsUsedSize",
    "fsTotalSize",
];

/// Divides the named size fields (and a document of sizes, such as `indexSizes`) by `scale`.
pub fn scaled(mut stats: Document, scale: i64, fields: &[&str]) -> Document {
    fn div(v: &mut Bson, scale: i64) {
        match v {
            Bson::Int32(n) => *n = (*n as i64 / scale) as i32,
            Bson::Int64(n) => *n /= scale,
            Bson::Double(f) => *f /= scale as f64,
            Bson::Document(d) => d.iter_mut().for_each(|(_, v)| div(v, scale)),
            _ => {}
        }
    }
    if scale > 1 {
        for f in fields {
            if let Some(v) = stats.get_mut(*f) {
                div(v, scale);
            }
        }
    }
    stats.insert("scaleFactor", scale);
    stats
}

/// What `validate` found: the problems, per index whether it has one, and the counts its
/// reply shows.
struct Validation {
    errors: Vec<String>,
    /// Per index: whether a problem was found in it (indexDetails.valid).
    index_bad: Vec<bool>,
    /// Per index table: its entries, None where the engine's check failed.
    entries: Vec<Option<u64>>,
    nrecords: i64,
    invalid_docs: i64,
    /// Documents the validator would refuse now.
    non_compliant: i64,
    /// Index entries missing for documents (the first 10 are listed in `errors`).
    missing: i64,
}

impl Validation {
    /// An index table with more entries than its documents have keys holds extra ones.
    fn compare_entry_counts(&mut self, st: &CollState, expected: &[u64]) {
        for (i, idx) in st.indexes.iter().enumerate() {
            if let Some(n) = self.entries[i] {
                if n > expected[i] {
                    self.index_bad[i] = true;
                    self.errors.push(format!(
                        "index {} has {n} entries but the documents have {} keys (extra index entries)",
                        idx.def.name, expected[i]
                    ));
                }
            }
        }
    }

    /// mongod's `validate` reply.
    fn reply(self, ns: String, c: &Coll, st: &CollState) -> Document {
        let keys_per_index: Document = st
            .indexes
            .iter()
            .zip(&self.entries)
            .map(|(i, n)| (i.def.name.clone(), Bson::Int64(n.unwrap_or(0) as i64)))
            .collect();
        let index_details: Document = st
            .indexes
            .iter()
            .zip(&self.index_bad)
            .map(|(i, bad)| (i.def.name.clone(), Bson::Document(doc! {"valid": !bad})))
            .collect();
        let warnings: Vec<Bson> = match self.non_compliant {
            0 => Vec::new(),
            n => vec![Bson::String(format!(
                "Detected {n} document(s) that do not comply with the collection's validator"
            ))],
        };
        doc! {
            "ns": ns,
            "uuid": c.uuid,
            "nInvalidDocuments": self.invalid_docs,
            "nNonCompliantDocuments": self.non_compliant,
            "nrecords": self.nrecords,
            "nIndexes": st.indexes.len() as i32,
            "keysPerIndex": keys_per_index,
            "indexDetails": index_details,
            "valid": self.errors.is_empty(),
            "repaired": false,
            "warnings": warnings,
            "errors": self.errors.into_iter().map(Bson::String).collect::<Vec<_>>(),
            "extraIndexEntries": Vec::<Bson>::new(),
            "missingIndexEntries": Vec::<Bson>::new(),
            "corruptRecords": Vec::<Bson>::new(),
        }
    }
}

/// collStats' `wiredTiger.creationString`: the table's own configuration in WiredTiger's words.
fn creation_string(t: &engine::TableConfig) -> String {
    format!(
        "allocation_size=4KB,block_allocation={:?},block_compressor={},internal_page_max={},leaf_page_max={},leaf_value_max={},memory_page_max={},prefix_compression={},split_pct=90,type=file",
        t.allocation,
        t.compressor.name(),
        t.internal_page_max,
        t.leaf_page_max,
        t.leaf_value_max,
        t.memory_page_max,
        t.prefix_compression
    )
    .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_without_scan_data_checks_structure_only() {
        let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
        let opts = WriteOpts {
            bypass_validation: true,
            ..WriteOpts::default()
        };
        db.create_collection("t", "c", &doc! {"validator": {"kind": {"$in": ["a"]}}})
            .unwrap();
        let out = db.insert("t", "c", vec![doc! {"_id": 1, "kind": "z"}], opts);
        assert_eq!(out.n, 1);
        let full = db.validate("t", "c", true, &Interrupt::default()).unwrap();
        assert_eq!(full.get_i64("nNonCompliantDocuments").unwrap(), 1);
        let quick = db.validate("t", "c", false, &Interrupt::default()).unwrap();
        assert_eq!(quick.get_i64("nNonCompliantDocuments").unwrap(), 0);
        assert_eq!(quick.get_i64("nrecords").unwrap(), 1);
        assert!(quick.get_bool("valid").unwrap());
    }

    /// A table made before flash mode (under `mode: off`) keeps its stored allocation, and
    /// collStats says so; a table made after reports flash mode's.
    #[test]
    fn the_creation_string_reports_the_tables_stored_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let open = |mode: &str| {
            let yaml = format!("dbPath: {}\n{mode}", dir.path().display());
            let s: crate::config::StorageSettings = serde_yaml::from_str(&yaml).unwrap();
            DocDb::open(s.docdb_config().unwrap()).unwrap()
        };
        let creation = |db: &DocDb, coll: &str| {
            let stats = db.coll_stats("d", coll).unwrap();
            let wt = stats.get_document("wiredTiger").unwrap();
            wt.get_str("creationString").unwrap().to_string()
        };
        let db = open("flash: {mode: off}\n");
        assert_eq!(
            db.insert("d", "old", vec![doc! {"_id": 1}], WriteOpts::default())
                .n,
            1
        );
        assert!(creation(&db, "old").contains("block_allocation=best"));
        db.shutdown().unwrap();
        drop(db);
        let db = open("");
        assert_eq!(
            db.insert("d", "new", vec![doc! {"_id": 1}], WriteOpts::default())
                .n,
            1
        );
        let old = creation(&db, "old");
        assert!(old.contains("block_allocation=best,"), "{old}");
        let new = creation(&db, "new");
        assert!(new.contains("block_allocation=sweep,"), "{new}");
        db.shutdown().unwrap();
    }
}
