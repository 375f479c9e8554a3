//! Catalog commands (DDL): create, list, drop and rename collections and databases; create, list and
//! drop indexes (an index build reads the collection in batches).

use super::*;

impl DocDb {
    /// A new collection's UUID: random, or under `uuid_seed` the first of the seed's UUIDs for
    /// this namespace whose table name no live table has (deterministic given the DDL history;
    /// a namespace dropped and created again may get its old UUID back).
    pub(super) fn collection_uuid(&self, db: &str, coll: &str) -> Uuid {
        let Some(seed) = self.cfg.uuid_seed else {
            return Uuid::new();
        };
        // FNV-1a over the namespace, then splitmix64 per attempt: fixed functions, so the same
        // seed gives the same UUIDs on every build.
        let ns = catalog::ns(db, coll);
        let h = ns.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let mix = |mut z: u64| {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        (0u64..1 << 16)
            .map(|k| {
                let a = mix(seed ^ h ^ k.wrapping_mul(0x2545_f491_4f6c_dd1d));
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&a.to_be_bytes());
                b[8..].copy_from_slice(&mix(a).to_be_bytes());
                // Version 4, RFC 4122 variant, as a random UUID.
                b[6] = (b[6] & 0x0f) | 0x40;
                b[8] = (b[8] & 0x3f) | 0x80;
                Uuid::from_bytes(b)
            })
            .find(|u| self.engine.table_id(&table_name_coll(u)).is_none())
            // 65 536 live collections of this name's seed sequence: give up determinism.
            .unwrap_or_else(Uuid::new)
    }

    /// Creates a collection (caller holds `ddl`). Returns the new handle.
    pub(super) fn create_locked(
        &self,
        db: &str,
        coll: &str,
        options: Document,
    ) -> DocResult<Arc<Coll>> {
        self.create_locked_as(db, coll, options, None)
    }

    /// Creates a collection with UUID `uuid` (a secondary applying a primary's `create`), or
    /// a new one (caller holds `ddl`); logged as a `create` command.
    pub(super) fn create_locked_as(
        &self,
        db: &str,
        coll: &str,
        options: Document,
        uuid: Option<Uuid>,
    ) -> DocResult<Arc<Coll>> {
        let uuid = uuid.unwrap_or_else(|| self.collection_uuid(db, coll));
        let mut logged = doc! {"create": coll};
        logged.extend(options.clone());
        let ident = table_name_coll(&uuid);
        let id_ident = table_name_index(&uuid, 0);
        let ns = catalog::ns(db, coll);
        assert!(
            !self.colls.read().contains_key(&ns),
            "a created namespace is new: {ns}"
        );
        // An existing table would be opened, not created: its old entries would join the new
        // collection.
        assert!(
            self.engine.table_id(&ident).is_none() && self.engine.table_id(&id_ident).is_none(),
            "a new collection's tables are new: {ident}, {id_ident}"
        );
        let table = self
            .engine
            .create_table(&ident, &self.cfg.collection_table)
            .map_err(storage_error)?;
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
            ns,
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
            self.engine.clone(),
            self.catalog_table,
            &entry,
            table,
            idx,
            self.hooks.clone(),
        )?);
        c.prepare()?;
        c.persist_entry_logged(&c.state.read(), Some(logged))?;
        self.colls.write().insert(entry.ns.clone(), c.clone());
        Ok(c)
    }

    /// Every collection, as of now.
    pub(crate) fn colls_snapshot(&self) -> Vec<Arc<Coll>> {
        self.colls.read().values().cloned().collect()
    }

    /// The collection `db.coll`, if it exists.
    pub(crate) fn collection_handle(&self, db: &str, coll: &str) -> Option<Arc<Coll>> {
        self.get_coll(db, coll)
    }

    /// Creates `db.coll` with the UUID a primary gave it (oplog application).
    pub(crate) fn create_with_uuid(
        &self,
        db: &str,
        coll: &str,
        options: Document,
        uuid: Uuid,
    ) -> DocResult<()> {
        let _g = self.ddl.lock();
        if self.get_coll(db, coll).is_some() {
            return Err(DocError::namespace_exists(format!(
                "Collection {} already exists.",
                catalog::ns(db, coll)
            )));
        }
        self.create_locked_as(db, coll, options, Some(uuid))
            .map(drop)
    }

    /// Drops the collection with UUID `uuid`, if it exists (oplog application).
    pub(crate) fn drop_by_uuid(&self, uuid: Uuid) -> DocResult<()> {
        let _g = self.ddl.lock();
        let found = self.colls.read().values().find(|c| c.uuid == uuid).cloned();
        match found {
            Some(c) => self.drop_locked(&c),
            None => Ok(()),
        }
    }

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

    /// The collections and views of database `db`, by name.
    pub fn list_collections(&self, db: &str) -> DocResult<Vec<CollectionInfo>> {
        let colls = self.colls_of(db)?;
        let mut out: Vec<CollectionInfo> = colls
            .into_iter()
            .map(|c| CollectionInfo {
                name: c.name.clone(),
                kind: CollectionKind::Collection,
                options: c.state.read().options.clone(),
                uuid: Some(c.uuid),
            })
            .collect();
        let views = self.views_of(db);
        // mongod lists the collection its views live in; here, while the database has one.
        if !views.is_empty() {
            out.push(CollectionInfo {
                name: views::SYSTEM_VIEWS.to_string(),
                kind: CollectionKind::Collection,
                options: Document::new(),
                uuid: None,
            });
        }
        out.extend(
            views
                .into_iter()
                .map(|(name, v)| match self.timeseries_listing(db, &v) {
                    Some(options) => CollectionInfo {
                        name,
                        kind: CollectionKind::Timeseries,
                        options,
                        uuid: None,
                    },
                    None => CollectionInfo {
                        name,
                        kind: CollectionKind::View,
                        options: v.options(),
                        uuid: None,
                    },
                }),
        );
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// `create`: a collection, or a view when the options have `viewOn` or `pipeline`.
    pub fn create_collection(&self, db: &str, coll: &str, options: &Document) -> DocResult<()> {
        catalog::validate_coll_name(db, coll)?;
        views::refuse_system_views(db, coll)?;
        if options.contains_key("viewOn") || options.contains_key("pipeline") {
            return self.create_view(db, coll, options);
        }
        if options.contains_key("timeseries") {
            return self.create_timeseries(db, coll, options);
        }
        let options = catalog::validate_create_options(options)?;
        let _g = self.ddl.lock();
        self.refuse_view(db, coll).map_err(|_| {
            DocError::namespace_exists(format!(
                "Namespace already exists: {}",
                catalog::ns(db, coll)
            ))
        })?;
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
    pub(super) fn drop_locked(&self, c: &Arc<Coll>) -> DocResult<()> {
        let mut b = WriteBatch::new();
        b.delete(self.catalog_table, c.ns.as_bytes().to_vec());
        if crate::oplog::is_replicated(&c.db, &c.name) {
            self.write_catalog_logged(&mut b, &c.db, Some(c.uuid), doc! {"drop": &c.name})?;
        } else {
            self.engine
                .write(&b, WriteOptions { sync: true })
                .map_err(storage_error)?;
        }
        self.release_dropped(c)
    }

    /// After the catalog entry of `c` is gone (committed): forget the collection and drop its
    /// tables. A crash before the tables go leaves them unnamed by the catalog, and open drops
    /// such tables.
    pub(super) fn release_dropped(&self, c: &Arc<Coll>) -> DocResult<()> {
        let mut st = c.state.write();
        assert!(!st.dropped, "a collection is dropped once: {}", c.ns);
        debug_assert!(
            !self.catalog_names(c),
            "the catalog entry of {} is gone before its tables",
            c.ns
        );
        st.dropped = true;
        c.tail.close("dropped");
        self.colls.write().remove(&c.ns);
        for i in &st.indexes {
            self.engine.drop_table(&i.ident).map_err(storage_error)?;
        }
        self.engine.drop_table(&c.ident).map_err(storage_error)?;
        st.indexes.clear();
        Ok(())
    }

    /// Whether the catalog's entry for `c`'s namespace is `c` (by UUID).
    fn catalog_names(&self, c: &Coll) -> bool {
        let stored = self.engine.get(self.catalog_table, c.ns.as_bytes());
        let Ok(Some(bytes)) = stored else {
            return false;
        };
        decode_doc(&bytes)
            .and_then(|d| CollEntry::from_doc(&d))
            .is_ok_and(|e| e.uuid == c.uuid)
    }

    /// Drops a collection or a view.
    pub fn drop_collection(&self, db: &str, coll: &str) -> DocResult<()> {
        catalog::validate_coll_name(db, coll)?;
        let _g = self.ddl.lock();
        // A time-series collection is its view and its buckets: both go.
        let buckets = self.timeseries_buckets(db, coll).map(|(c, _)| c);
        if self.drop_view_locked(db, coll)? {
            if let Some(b) = buckets {
                self.drop_locked(&b)?;
            }
            return Ok(());
        }
        let c = self
            .get_coll(db, coll)
            .ok_or_else(|| DocError::namespace_not_found("ns not found"))?;
        self.drop_locked(&c)
    }

    pub fn drop_database(&self, db: &str) -> DocResult<()> {
        let _g = self.ddl.lock();
        let colls = self.colls_of(db)?;
        for (name, _) in self.views_of(db) {
            self.drop_view_locked(db, &name)?;
        }
        let any = !colls.is_empty();
        for c in colls {
            self.drop_locked(&c)?;
        }
        if any {
            let o = doc! {"dropDatabase": 1};
            self.write_catalog_logged(&mut WriteBatch::new(), db, None, o)?;
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
        self.refuse_view(from_db, from_coll)?;
        self.refuse_view(to_db, to_coll)?;
        let src = self
            .get_coll(from_db, from_coll)
            .ok_or_else(|| DocError::namespace_not_found("source namespace does not exist"))?;
        let to_ns = catalog::ns(to_db, to_coll);
        if src.ns == to_ns {
            return Err(DocError::illegal_operation(
                "Can't rename a collection to itself",
            ));
        }
        let target = self.get_coll(to_db, to_coll);
        if target.is_some() && !drop_target {
            return Err(DocError::namespace_exists("target namespace exists"));
        }
        let mut st = src.state.write();
        let mut entry = src.entry(&st);
        entry.ns = to_ns.clone();
        let mut b = self.rename_batch(&src.ns, target.as_deref(), &entry)?;
        let o = doc! {
            "renameCollection": &src.ns,
            "to": &to_ns,
            "stayTemp": false,
            "dropTarget": target.as_ref().map_or(Bson::Boolean(false), |t| Bson::from(t.uuid)),
        };
        self.write_catalog_logged(&mut b, &src.db, Some(src.uuid), o)?;
        if let Some(t) = &target {
            self.release_dropped(t)?;
        }
        let moved = Arc::new(Coll::new(
            self.engine.clone(),
            self.catalog_table,
            &entry,
            src.table,
            st.indexes.clone(),
            self.hooks.clone(),
        )?);
        moved.prepare()?;
        st.dropped = true;
        src.tail.close("renamed");
        let mut colls = self.colls.write();
        colls.remove(&src.ns);
        colls.insert(to_ns, moved);
        Ok(())
    }

    /// The one catalog batch of a rename: it drops the target and moves the source (`$out`'s
    /// atomic replace), so after a crash the catalog names either the old target or the
    /// renamed source. Asserted: the entry moves to another namespace (else the batch would
    /// delete what it puts), a target is that namespace's other collection, and the entry is
    /// consistent.
    pub(super) fn rename_batch(
        &self,
        from_ns: &str,
        target: Option<&Coll>,
        entry: &CollEntry,
    ) -> DocResult<WriteBatch> {
        assert_ne!(entry.ns, from_ns, "a rename moves the entry");
        assert!(
            target.is_none_or(|t| t.ns == entry.ns && t.uuid != entry.uuid),
            "a rename's target is the other collection at {}",
            entry.ns
        );
        entry.assert_consistent();
        let mut b = WriteBatch::new();
        if let Some(t) = target {
            b.delete(self.catalog_table, t.ns.as_bytes().to_vec());
        }
        b.delete(self.catalog_table, from_ns.as_bytes().to_vec());
        b.put(
            self.catalog_table,
            entry.ns.as_bytes().to_vec(),
            encode_doc(&entry.to_doc())?,
        );
        Ok(b)
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
        self.refuse_view(db, coll)?;
        let defs = parse_index_specs(specs)?;
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
            take_default_collation(&c, &mut def, spec)?;
            if !already_built(&st, &def)? {
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
            let idx = self.build_index(&c, &st, def, n, interrupt)?;
            let mut logged = doc! {"createIndexes": &c.name};
            logged.extend(idx.def.spec.clone());
            st.indexes.push(Arc::new(idx));
            c.persist_entry_logged(&st, Some(logged))?;
        }
        Ok(CreateIndexesOutcome {
            num_indexes_before: before,
            num_indexes_after: st.indexes.len() as i32,
            created_collection_automatically: created,
            note: nothing.then(|| "all indexes already exist".to_string()),
        })
    }

    /// A collection table's records in RecordId order, as stored (encoded BSON).
    pub(super) fn records(
        &self,
        table: TableId,
    ) -> DocResult<impl Iterator<Item = DocResult<(RecordId, Vec<u8>)>>> {
        let it = self.engine.scan_all(table).map_err(storage_error)?;
        Ok(it.map(|kv| {
            let (k, v) = kv.map_err(storage_error)?;
            Ok((index::rid_from(&k)?, v))
        }))
    }

    /// Builds a new index table from the collection (writers are excluded by the caller).
    /// On any error the table is dropped and nothing refers to it.
    pub(super) fn build_index(
        &self,
        c: &Coll,
        st: &CollState,
        def: IndexDef,
        n: i64,
        interrupt: &Interrupt,
    ) -> DocResult<Index> {
        let ident = table_name_index(&c.uuid, n);
        assert!(
            st.indexes.iter().all(|i| i.def.name != def.name),
            "index {} of {} is built once",
            def.name,
            c.ns
        );
        // An existing table would be opened, not created: its entries would join the index.
        assert!(
            self.engine.table_id(&ident).is_none(),
            "a new index's table is new: {ident}"
        );
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
                            key.payload,
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
        self.refuse_view(db, coll)?;
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("ns does not exist: {}", catalog::ns(db, coll)))
        })?;
        let st = c.state.read();
        let clustered = st.options.get("clusteredIndex");
        Ok(st
            .indexes
            .iter()
            .map(|i| match clustered {
                // A clustered collection's `_id` index is its clustered index, listed as
                // mongod lists it.
                Some(Bson::Document(spec)) if i.def.is_id() => {
                    let mut out = spec.clone();
                    out.insert("clustered", true);
                    out
                }
                _ => i.def.spec.clone(),
            })
            .collect())
    }

    pub fn drop_indexes(&self, db: &str, coll: &str, which: &Bson) -> DocResult<i32> {
        catalog::validate_coll_name(db, coll)?;
        self.refuse_view(db, coll)?;
        let _g = self.ddl.lock();
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("ns not found {}", catalog::ns(db, coll)))
        })?;
        let mut st = c.state.write();
        let was = st.indexes.len() as i32;
        let find = |st: &CollState, w: &Bson| -> DocResult<usize> {
            let pos = collection::find_index(&st.indexes, w, |a, b| {
                collection::ambiguous_key_pattern(w, a, b)
            })?;
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
        let dropped = remove_indexes(&mut st, &victims);
        let mut names: Vec<Bson> = dropped.iter().map(|i| i.def.name.clone().into()).collect();
        let logged = match names.len() {
            0 => None,
            1 => Some(names.remove(0)),
            _ => Some(Bson::Array(names)),
        };
        let logged = logged.map(|index| doc! {"dropIndexes": &c.name, "index": index});
        c.persist_entry_logged(&st, logged)?;
        for i in dropped {
            self.engine.drop_table(&i.ident).map_err(storage_error)?;
        }
        Ok(was)
    }
}

/// The definitions of a createIndexes' specs: at least one, each valid, no name twice.
fn parse_index_specs(specs: &[Document]) -> DocResult<Vec<IndexDef>> {
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
    Ok(defs)
}

/// An index without a collation of its own takes the collection's default (which only an
/// ordered index can).
fn take_default_collation(c: &Coll, def: &mut IndexDef, spec: &Document) -> DocResult<()> {
    if !spec.contains_key("collation") {
        if let Some(dc) = &c.default_collation {
            if def.kind != index::IndexKind::Ordered {
                return Err(DocError::with_code(
                    67,
                    "CannotCreateIndex",
                    "a hashed or text index on a collection with a default collation is not supported by flashdoc",
                ));
            }
            def.collation = Some(dc.clone());
            def.spec.insert("collation", dc.spec().clone());
        }
    }
    Ok(())
}

/// Whether an index like `def` is built already (same name, key and options); an index that
/// conflicts with it (same name but not the same, same key, filter and collation under another
/// name, a second text index) is refused.
fn already_built(st: &CollState, def: &IndexDef) -> DocResult<bool> {
    let mut exists = false;
    for i in &st.indexes {
        let same_key = i.def.key == def.key;
        let same_opts = i.def.unique == def.unique
            && i.def.sparse == def.sparse
            && i.def.expire_after == def.expire_after
            && i.def.collation == def.collation
            && i.def.partial == def.partial
            && i.def.kind == def.kind;
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
        } else if (same_key && i.def.partial == def.partial && i.def.collation == def.collation)
            || (i.def.is_text() && def.is_text())
        {
            // One text index per collection, whatever its fields (mongod's rule). Indexes of
            // one key pattern may coexist when their partial filters or their collations
            // differ (mongod's "equivalent" indexes are those alike in both).
            return Err(DocError::index_options_conflict(format!(
                "Index already exists with a different name: {}",
                i.def.name
            )));
        }
    }
    Ok(exists)
}

/// Takes the indexes at `victims` (ascending positions) out of the collection's state.
/// Asserted: the positions are distinct and in range, and none is the `_id` index, which a
/// collection always has.
pub(super) fn remove_indexes(st: &mut CollState, victims: &[usize]) -> Vec<Arc<Index>> {
    assert!(
        victims.windows(2).all(|w| w[0] < w[1]),
        "index positions ascend, each once: {victims:?}"
    );
    assert!(
        victims
            .iter()
            .all(|&i| st.indexes.get(i).is_some_and(|x| !x.def.is_id())),
        "the indexes dropped exist and the _id index is not among them: {victims:?}"
    );
    victims
        .iter()
        .rev()
        .map(|&i| st.indexes.remove(i))
        .collect()
}
