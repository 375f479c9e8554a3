//! `collMod`: change a collection's validator (`validator`, `validationLevel`,
//! `validationAction`), one index's `hidden` flag or TTL (`index: {name | keyPattern, hidden,
//! expireAfterSeconds}`), a clustered collection's `expireAfterSeconds`,
//! `changeStreamPreAndPostImages`, or a view's definition (`viewOn` and `pipeline`). The change is
//! written to the catalog entry (synced) before it is published, so it survives a restart.
//! Options mongod has and flashdoc does not are refused with NotImplemented (238), unknown
//! ones with 40415, as mongod's command parser does.

use super::*;
use crate::validation::Validator;

/// `collMod` options that only a view takes.
const VIEW_OPTIONS: &[&str] = &["viewOn", "pipeline"];
/// `collMod` options of mongod's that flashdoc refuses, and why.
const NOT_SUPPORTED: &[(&str, &str)] = &[
    (
        "cappedSize",
        "a capped collection's limits are fixed at create",
    ),
    (
        "cappedMax",
        "a capped collection's limits are fixed at create",
    ),
    (
        "timeseries",
        "a time-series collection's bucketing is fixed at create",
    ),
    (
        "timeseriesBucketsMayHaveMixedSchemaData",
        "flashdoc's buckets keep no per-bucket schema flag",
    ),
    ("dryRun", "an index conversion is not supported"),
    ("collectionUUID", "collection UUID checks are not supported"),
];

/// `collMod`'s `expireAfterSeconds` (a number, or "off" to stop expiring), which only a
/// clustered collection has.
fn set_collection_ttl(options: &mut Document, v: &Bson) -> DocResult<()> {
    if !options.contains_key("clusteredIndex") {
        return Err(DocError::invalid_options(
            "collMod 'expireAfterSeconds' is only supported on clustered or time-series collections; set it on a TTL index with 'index'",
        ));
    }
    if v.as_str() == Some("off") {
        options.remove("expireAfterSeconds");
    } else {
        let secs = catalog::parse_expire_after("collMod", v)?;
        options.insert("expireAfterSeconds", secs);
    }
    Ok(())
}

fn not_supported(what: &str, why: &str) -> DocError {
    DocError::with_code(
        238,
        "NotImplemented",
        format!("collMod option '{what}' is not supported by flashdoc: {why}"),
    )
}

fn unknown_field(path: &str) -> DocError {
    DocError::with_code(
        40415,
        "Location40415",
        format!("BSON field '{path}' is an unknown field."),
    )
}

/// What `collMod`'s `index` option asks.
struct IndexMod {
    /// The index's name or key pattern.
    which: Bson,
    hidden: Option<bool>,
    expire_after: Option<Bson>,
}

impl IndexMod {
    fn parse(v: &Bson) -> DocResult<IndexMod> {
        let Bson::Document(d) = v else {
            return Err(DocError::type_mismatch(
                "BSON field 'collMod.index' is the wrong type, expected type 'object'",
            ));
        };
        let mut which = None;
        let mut m = IndexMod {
            which: Bson::Null,
            hidden: None,
            expire_after: None,
        };
        for (k, v) in d {
            match (k.as_str(), v) {
                ("name", Bson::String(_)) | ("keyPattern", Bson::Document(_)) => {
                    if which.replace(v.clone()).is_some() {
                        return Err(DocError::invalid_options(
                            "Cannot specify both key pattern and name.",
                        ));
                    }
                }
                ("name" | "keyPattern", _) => {
                    return Err(DocError::type_mismatch(format!(
                        "BSON field 'collMod.index.{k}' is the wrong type"
                    )))
                }
                ("hidden", Bson::Boolean(b)) => m.hidden = Some(*b),
                ("hidden", _) => {
                    return Err(DocError::type_mismatch(
                        "BSON field 'collMod.index.hidden' is the wrong type, expected type 'bool'",
                    ))
                }
                ("expireAfterSeconds", _) => m.expire_after = Some(v.clone()),
                ("unique" | "prepareUnique" | "forceNonUnique", _) => {
                    return Err(not_supported(
                        &format!("index.{k}"),
                        "an index's uniqueness is fixed when it is built",
                    ))
                }
                _ => return Err(unknown_field(&format!("collMod.index.{k}"))),
            }
        }
        m.which = which.ok_or_else(|| {
            DocError::invalid_options("Must specify either index name or key pattern.")
        })?;
        if m.hidden.is_none() && m.expire_after.is_none() {
            return Err(DocError::invalid_options(
                "no expireAfterSeconds, hidden, unique or prepareUnique field to modify",
            ));
        }
        Ok(m)
    }
}

impl DocDb {
    /// `collMod` of `db.coll` with `options` (the command's fields but the name). Returns
    /// what mongod reports (`hidden_old`/`hidden_new`, `expireAfterSeconds_old`/`_new`).
    pub fn coll_mod(&self, db: &str, coll: &str, options: &Document) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        for k in options.keys() {
            if let Some((_, why)) = NOT_SUPPORTED.iter().find(|(n, _)| n == k) {
                return Err(not_supported(k, why));
            }
            let known = matches!(
                k.as_str(),
                "validator"
                    | "validationLevel"
                    | "validationAction"
                    | "index"
                    | "expireAfterSeconds"
                    | "changeStreamPreAndPostImages"
            ) || VIEW_OPTIONS.contains(&k.as_str());
            if !known {
                return Err(unknown_field(&format!("collMod.{k}")));
            }
        }
        if self.view(db, coll).is_some() {
            self.modify_view(db, coll, options)?;
            return Ok(Document::new());
        }
        if let Some(k) = options.keys().find(|k| VIEW_OPTIONS.contains(&k.as_str())) {
            return Err(DocError::invalid_options(format!(
                "'{k}' option only supported on a view"
            )));
        }
        let _g = self.ddl.lock();
        let c = self.get_coll(db, coll).ok_or_else(|| {
            DocError::namespace_not_found(format!("ns does not exist: {}", catalog::ns(db, coll)))
        })?;
        let index = options.get("index").map(IndexMod::parse).transpose()?;
        let mut st = c.state.write();
        // Everything is checked before anything changes.
        let mut new_options = st.options.clone();
        for k in ["validator", "validationLevel", "validationAction"] {
            if let Some(v) = options.get(k) {
                new_options.insert(k, v.clone());
            }
        }
        if let Some(v) = options.get("changeStreamPreAndPostImages") {
            let images = catalog::parse_pre_and_post_images("collMod", v)?;
            new_options.insert("changeStreamPreAndPostImages", images);
        }
        if let Some(v) = options.get("expireAfterSeconds") {
            set_collection_ttl(&mut new_options, v)?;
        }
        let validator = Validator::from_options(&new_options)?;
        let mut reply = Document::new();
        let changed_index = match &index {
            Some(m) => Some(self.modified_index(&c, &st, m, &mut reply)?),
            None => None,
        };
        st.options = new_options;
        if let Some((pos, idx)) = changed_index {
            st.indexes[pos] = Arc::new(idx);
        }
        let mut logged = doc! {"collMod": coll};
        logged.extend(options.clone());
        c.persist_entry_logged(&st, Some(logged))?;
        c.set_validator(validator);
        c.set_pre_images(&st.options);
        Ok(reply)
    }

    /// The index `m` names, rebuilt with its new options (same table), and its position.
    fn modified_index(
        &self,
        c: &Coll,
        st: &CollState,
        m: &IndexMod,
        reply: &mut Document,
    ) -> DocResult<(usize, Index)> {
        let pos = collection::find_index(&st.indexes, &m.which, |a, b| {
            collection::ambiguous_key_pattern(&m.which, a, b)
        })?
        .ok_or_else(|| {
            DocError::index_not_found(format!("cannot find index {} for ns {}", m.which, c.ns))
        })?;
        let old = &st.indexes[pos];
        let mut spec = old.def.spec.clone();
        if let Some(hidden) = m.hidden {
            if old.def.is_id() {
                return Err(DocError::bad_value("can't hide _id index"));
            }
            reply.insert("hidden_old", old.def.hidden);
            reply.insert("hidden_new", hidden);
            if hidden {
                spec.insert("hidden", true);
            } else {
                spec.remove("hidden");
            }
        }
        if let Some(secs) = &m.expire_after {
            let n = match secs {
                Bson::Int32(i) => *i as f64,
                Bson::Int64(i) => *i as f64,
                Bson::Double(d) => *d,
                _ => {
                    return Err(DocError::type_mismatch(
                        "BSON field 'collMod.index.expireAfterSeconds' is the wrong type, expected a number",
                    ))
                }
            };
            if !(0.0..=i32::MAX as f64).contains(&n) {
                return Err(DocError::invalid_options(format!(
                    "TTL index 'expireAfterSeconds' option must be within an acceptable range [0, {}], found: {n}",
                    i32::MAX
                )));
            }
            if old.def.is_id() || old.def.key.len() != 1 {
                return Err(DocError::invalid_options(
                    "TTL indexes are single-field indexes, compound indexes do not support TTL",
                ));
            }
            if let Some(was) = old.def.expire_after {
                reply.insert("expireAfterSeconds_old", was);
            }
            reply.insert("expireAfterSeconds_new", n as i64);
            spec.insert("expireAfterSeconds", n as i32);
        }
        let def = IndexDef::parse_from(&spec, collation::SpecOrigin::Stored)?;
        Ok((
            pos,
            Index {
                def,
                ident: old.ident.clone(),
                table: old.table,
                multikey: old.is_multikey().into(),
            },
        ))
    }
}
