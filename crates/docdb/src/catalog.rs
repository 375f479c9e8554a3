//! The durable catalog: the `_mdb_catalog` table maps a namespace (`db.coll`) to a BSON entry
//!
//! ```text
//! { ns, uuid: UUID, options: {...}, ident: "collection-<uuid>",
//!   indexes: [ { spec: {v, key, name, unique?, sparse?, ...}, ident: "index-<uuid>-<n>",
//!                multikey: bool } ... ],
//!   nextIndexIdent: n }
//! ```
//!
//! Table names ("idents") never contain the namespace, so a rename rewrites one catalog entry
//! and moves no data — as MongoDB does. Catalog entries are written in their own engine batch;
//! tables are created before the entry that names them is written and dropped after the entry
//! is deleted, and tables no entry names are dropped at open (a crash in between leaves no
//! garbage behind).

use crate::index::IndexDef;
use bson::{doc, Bson, Document, Uuid};
use query::error::{DocError, DocResult};

pub const CATALOG_TABLE: &str = "_mdb_catalog";

#[derive(Clone, Debug)]
pub struct IndexEntry {
    pub def: IndexDef,
    pub ident: String,
    pub multikey: bool,
}

#[derive(Clone, Debug)]
pub struct CollEntry {
    pub ns: String,
    pub uuid: Uuid,
    pub options: Document,
    pub ident: String,
    pub indexes: Vec<IndexEntry>,
    pub next_index_ident: i64,
}

impl CollEntry {
    /// The invariants of an entry, asserted before it is written (a catalog that broke them
    /// would open a collection whose indexes share a table or miss the `_id` index): exactly
    /// one `_id` index; index names distinct; each index its own table, none the collection's.
    pub fn assert_consistent(&self) {
        let ids = self.indexes.iter().filter(|i| i.def.is_id()).count();
        assert_eq!(ids, 1, "catalog entry {}: one _id index", self.ns);
        let mut names = std::collections::HashSet::new();
        let mut tables = std::collections::HashSet::from([self.ident.as_str()]);
        for i in &self.indexes {
            assert!(
                names.insert(i.def.name.as_str()),
                "catalog entry {}: index name {} twice",
                self.ns,
                i.def.name
            );
            assert!(
                tables.insert(i.ident.as_str()),
                "catalog entry {}: table {} named twice",
                self.ns,
                i.ident
            );
        }
    }

    pub fn to_doc(&self) -> Document {
        let indexes: Vec<Bson> = self
            .indexes
            .iter()
            .map(|i| {
                Bson::Document(doc! {
                    "spec": i.def.spec.clone(),
                    "ident": i.ident.clone(),
                    "multikey": i.multikey,
                })
            })
            .collect();
        doc! {
            "ns": self.ns.clone(),
            "uuid": self.uuid,
            "options": self.options.clone(),
            "ident": self.ident.clone(),
            "indexes": indexes,
            "nextIndexIdent": self.next_index_ident,
        }
    }

    pub fn from_doc(d: &Document) -> DocResult<CollEntry> {
        let bad =
            |what: &str| DocError::internal_error(format!("corrupt catalog entry ({what}): {d}"));
        let uuid = match d.get("uuid") {
            Some(Bson::Binary(b)) => b.to_uuid().map_err(|_| bad("uuid"))?,
            _ => return Err(bad("uuid")),
        };
        let mut indexes = Vec::new();
        for i in d.get_array("indexes").map_err(|_| bad("indexes"))? {
            let i = i.as_document().ok_or_else(|| bad("index"))?;
            let spec = i.get_document("spec").map_err(|_| bad("spec"))?;
            let def = IndexDef::parse_from(spec, query::collation::SpecOrigin::Stored)?;
            indexes.push(IndexEntry {
                def,
                ident: i
                    .get_str("ident")
                    .map_err(|_| bad("index ident"))?
                    .to_string(),
                multikey: i.get_bool("multikey").unwrap_or(false),
            });
        }
        Ok(CollEntry {
            ns: d.get_str("ns").map_err(|_| bad("ns"))?.to_string(),
            uuid,
            options: d.get_document("options").cloned().unwrap_or_default(),
            ident: d.get_str("ident").map_err(|_| bad("ident"))?.to_string(),
            indexes,
            next_index_ident: d.get_i64("nextIndexIdent").unwrap_or(1),
        })
    }
}

pub fn ns(db: &str, coll: &str) -> String {
    format!("{db}.{coll}")
}

/// Splits `db.coll` at the first dot.
pub fn split_ns(ns: &str) -> Option<(&str, &str)> {
    ns.split_once('.')
}

/// mongod's database-name rules.
pub fn validate_db_name(db: &str) -> DocResult<()> {
    if db.is_empty() {
        return Err(DocError::invalid_namespace("database name cannot be empty"));
    }
    if db.len() >= 64 {
        return Err(DocError::invalid_namespace(format!(
            "db name is too long: {db} (max 63 bytes)"
        )));
    }
    if let Some(c) = db.chars().find(|c| {
        matches!(
            c,
            '/' | '\\' | '.' | ' ' | '"' | '$' | '*' | '<' | '>' | ':' | '|' | '?' | '\0'
        )
    }) {
        return Err(DocError::invalid_namespace(format!(
            "Invalid database name: '{db}' (contains '{}')",
            c.escape_default()
        )));
    }
    Ok(())
}

/// mongod's collection-name rules (and the 255-byte namespace limit).
pub fn validate_coll_name(db: &str, coll: &str) -> DocResult<()> {
    validate_db_name(db)?;
    let full = ns(db, coll);
    if coll.is_empty() {
        return Err(DocError::invalid_namespace(format!(
            "Invalid namespace specified '{full}'"
        )));
    }
    if coll.contains('\0') {
        return Err(DocError::invalid_namespace(
            "collection names cannot contain the null character",
        ));
    }
    if coll.starts_with('.') || coll.ends_with('.') {
        return Err(DocError::invalid_namespace(format!(
            "Invalid collection name: '{coll}'"
        )));
    }
    if coll.contains('$') {
        return Err(DocError::invalid_namespace(format!(
            "Invalid collection name: '{coll}' (collection names cannot contain '$')"
        )));
    }
    if full.len() > 255 {
        return Err(DocError::invalid_namespace(format!(
            "Fully qualified namespace is too long. Namespace: {full} Max: 255"
        )));
    }
    Ok(())
}

/// The `create` options flashdoc enforces: `capped` with `size` and `max`, `validator` with
/// `validationLevel` and `validationAction`, `collation` (the collection's default),
/// `clusteredIndex` with `expireAfterSeconds` (TTL by `_id`), `changeStreamPreAndPostImages`
/// (stored and listed: a standalone has no change streams to use it); a view's options
/// (`viewOn`, `pipeline`) are `ViewDef::parse`'s. Options mongod has
/// and flashdoc does not are refused with InvalidOptions naming them; unknown ones too.
pub fn validate_create_options(options: &Document) -> DocResult<Document> {
    let mut out = Document::new();
    let num = |k: &str, v: &Bson| -> DocResult<f64> {
        match v {
            Bson::Int32(i) => Ok(*i as f64),
            Bson::Int64(i) => Ok(*i as f64),
            Bson::Double(d) => Ok(*d),
            _ => Err(DocError::type_mismatch(format!(
                "BSON field 'create.{k}' is the wrong type, expected a number"
            ))),
        }
    };
    for (k, v) in options {
        match k.as_str() {
            "capped" => {
                let Bson::Boolean(b) = v else {
                    return Err(DocError::type_mismatch(
                        "BSON field 'create.capped' is the wrong type, expected a boolean",
                    ));
                };
                out.insert(k.clone(), *b);
            }
            "size" | "max" => {
                // NaN and infinities are refused (a cast would store them as 0 or i64::MAX).
                let n = num(k, v)?;
                let top = if k == "size" { 1e15 } else { i64::MAX as f64 };
                if !n.is_finite() || n < 0.0 || n > top {
                    return Err(DocError::bad_value(format!(
                        "'{k}' has to be a finite, non-negative number{}, got {v}",
                        if k == "size" { " not above 1 PB" } else { "" }
                    )));
                }
                out.insert(k.clone(), n as i64);
            }
            "validator" | "validationLevel" | "validationAction" => {
                out.insert(k.clone(), v.clone());
            }
            "collation" => {
                let Bson::Document(c) = v else {
                    return Err(DocError::type_mismatch("'collation' must be an object"));
                };
                // Stored (and reported) as the collation in use; `simple` is no collation.
                if let Some(coll) = query::collation::Collation::parse(c)? {
                    out.insert(k.clone(), coll.spec().clone());
                }
            }
            "clusteredIndex" => {
                out.insert(k.clone(), parse_clustered_index(v)?);
            }
            "expireAfterSeconds" => {
                out.insert(k.clone(), parse_expire_after("create", v)?);
            }
            "changeStreamPreAndPostImages" => {
                out.insert(k.clone(), parse_pre_and_post_images("create", v)?);
            }
            // Time-series collections are made by `DocDb::create_collection` (a bucket
            // collection and a view over it), never as a plain collection.
            "timeseries" => {
                return Err(DocError::invalid_options(
                    "a time-series collection is not a plain collection",
                ))
            }
            "storageEngine"
            | "indexOptionDefaults"
            | "encryptedFields"
            | "autoIndexId"
            | "flags"
            | "temp" => {
                return Err(DocError::invalid_options(format!(
                    "the '{k}' option is not supported by flashdoc"
                )))
            }
            _ => {
                return Err(DocError::invalid_options(format!(
                    "BSON field 'create.{k}' is an unknown field."
                )))
            }
        }
    }
    let capped = out.get_bool("capped").unwrap_or(false);
    if capped && !out.contains_key("size") {
        return Err(DocError::invalid_options(
            "the 'size' field is required when 'capped' is true",
        ));
    }
    if !capped && (out.contains_key("size") || out.contains_key("max")) {
        return Err(DocError::invalid_options(
            "the 'size' and 'max' fields are only valid for capped collections",
        ));
    }
    check_clustered(&out)?;
    crate::validation::check_options(&out)?;
    Ok(out)
}

/// A clustered collection's rules: TTL through `expireAfterSeconds` needs the clustering,
/// and a clustered collection is not capped (mongod's InvalidOptions for both).
fn check_clustered(out: &Document) -> DocResult<()> {
    let clustered = out.contains_key("clusteredIndex");
    if out.contains_key("expireAfterSeconds") && !clustered {
        return Err(DocError::invalid_options(
            "'expireAfterSeconds' requires clustering to be enabled",
        ));
    }
    if clustered && out.get_bool("capped").unwrap_or(false) {
        return Err(DocError::invalid_options(
            "Cannot create a clustered collection that is capped",
        ));
    }
    Ok(())
}

fn missing_field(path: &str) -> DocError {
    DocError::with_code(
        40414,
        "Location40414",
        format!("BSON field '{path}' is missing but a required field"),
    )
}

fn unknown_field(path: &str) -> DocError {
    DocError::with_code(
        40415,
        "Location40415",
        format!("BSON field '{path}' is an unknown field."),
    )
}

/// `create`'s `clusteredIndex: {key: {_id: 1}, unique: true, name?, v?}`, as stored and
/// listed (mongod adds `v: 2` and names it `_id_` when unnamed).
pub fn parse_clustered_index(v: &Bson) -> DocResult<Document> {
    let Bson::Document(spec) = v else {
        return Err(DocError::type_mismatch(
            "BSON field 'create.clusteredIndex' is the wrong type, expected type 'object'",
        ));
    };
    let mut name = "_id_".to_string();
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("key", Bson::Document(key)) => {
                let id_ascending = key.len() == 1
                    && key
                        .get("_id")
                        .and_then(query::compare::Num::of)
                        .is_some_and(|n| n.as_f64() == 1.0);
                if !id_ascending {
                    return Err(DocError::invalid_options(
                        "The clusteredIndex option is only supported for key: {_id: 1}",
                    ));
                }
            }
            ("unique", Bson::Boolean(true)) => {}
            ("unique", Bson::Boolean(false)) => {
                return Err(DocError::invalid_options(
                    "The clusteredIndex option requires unique: true",
                ))
            }
            ("name", Bson::String(n)) => name = n.clone(),
            ("v", Bson::Int32(2) | Bson::Int64(2)) => {}
            ("v", _) => {
                return Err(DocError::invalid_options(
                    "Invalid clusteredIndex version: only v: 2 is supported",
                ))
            }
            ("key" | "unique" | "name", _) => {
                return Err(DocError::type_mismatch(format!(
                    "BSON field 'clusteredIndex.{k}' is the wrong type"
                )))
            }
            _ => return Err(unknown_field(&format!("clusteredIndex.{k}"))),
        }
    }
    for required in ["key", "unique"] {
        if !spec.contains_key(required) {
            return Err(missing_field(&format!("clusteredIndex.{required}")));
        }
    }
    Ok(bson::doc! {"key": {"_id": 1}, "unique": true, "name": name, "v": 2})
}

/// A collection's `expireAfterSeconds` (clustered and time-series collections): a whole
/// number of seconds, 0 up to mongod's limit.
pub fn parse_expire_after(verb: &str, v: &Bson) -> DocResult<i64> {
    let n = match v {
        Bson::Int32(i) => *i as f64,
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        _ => {
            return Err(DocError::type_mismatch(format!(
                "BSON field '{verb}.expireAfterSeconds' is the wrong type, expected a number"
            )))
        }
    };
    if !n.is_finite() || !(0.0..=i32::MAX as f64).contains(&n) {
        return Err(DocError::invalid_options(format!(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range [0, {}], found: {n}",
            i32::MAX
        )));
    }
    Ok(n as i64)
}

/// `changeStreamPreAndPostImages: {enabled: <bool>}` (create and collMod), as stored.
pub fn parse_pre_and_post_images(verb: &str, v: &Bson) -> DocResult<Document> {
    let path = format!("{verb}.changeStreamPreAndPostImages");
    let Bson::Document(d) = v else {
        return Err(DocError::type_mismatch(format!(
            "BSON field '{path}' is the wrong type, expected type 'object'"
        )));
    };
    let mut enabled = None;
    for (k, v) in d {
        match (k.as_str(), v) {
            ("enabled", Bson::Boolean(b)) => enabled = Some(*b),
            ("enabled", _) => {
                return Err(DocError::type_mismatch(format!(
                    "BSON field '{path}.enabled' is the wrong type, expected type 'bool'"
                )))
            }
            _ => return Err(unknown_field(&format!("{path}.{k}"))),
        }
    }
    let enabled = enabled.ok_or_else(|| missing_field(&format!("{path}.enabled")))?;
    Ok(bson::doc! {"enabled": enabled})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_coll_name("db", "c").is_ok());
        assert!(validate_coll_name("db", "system.views").is_ok());
        assert_eq!(validate_coll_name("d b", "c").unwrap_err().code, 73);
        assert_eq!(validate_coll_name("db", "").unwrap_err().code, 73);
        assert_eq!(validate_coll_name("db", "a$b").unwrap_err().code, 73);
        assert_eq!(validate_coll_name("db", ".a").unwrap_err().code, 73);
        assert_eq!(validate_coll_name("", "a").unwrap_err().code, 73);
        assert_eq!(
            validate_coll_name("db", &"x".repeat(300)).unwrap_err().code,
            73
        );
    }

    #[test]
    fn clustered_and_pre_post_image_options_are_checked_and_normalized() {
        let ok = validate_create_options(&bson::doc! {
            "clusteredIndex": {"key": {"_id": 1}, "unique": true},
            "expireAfterSeconds": 60.0,
            "changeStreamPreAndPostImages": {"enabled": true},
        })
        .unwrap();
        assert_eq!(
            ok,
            bson::doc! {
                "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "_id_", "v": 2},
                "expireAfterSeconds": 60_i64,
                "changeStreamPreAndPostImages": {"enabled": true},
            }
        );
        let code = |o: Document| validate_create_options(&o).unwrap_err().code;
        assert_eq!(
            code(bson::doc! {"clusteredIndex": {"key": {"_id": -1}, "unique": true}}),
            72
        );
        assert_eq!(
            code(bson::doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": false}}),
            72
        );
        assert_eq!(code(bson::doc! {"clusteredIndex": {"unique": true}}), 40414);
        assert_eq!(
            code(bson::doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true, "x": 1}}),
            40415
        );
        assert_eq!(code(bson::doc! {"clusteredIndex": 1}), 14);
        assert_eq!(code(bson::doc! {"expireAfterSeconds": 5}), 72);
        assert_eq!(
            code(
                bson::doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "capped": true, "size": 4096}
            ),
            72
        );
        assert_eq!(code(bson::doc! {"changeStreamPreAndPostImages": {}}), 40414);
        assert_eq!(
            code(bson::doc! {"changeStreamPreAndPostImages": {"enabled": 1}}),
            14
        );
        assert_eq!(code(bson::doc! {"changeStreamPreAndPostImages": true}), 14);
    }

    #[test]
    fn capped_limits_are_numbers() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 2e15] {
            let o = bson::doc! {"capped": true, "size": bad};
            assert_eq!(
                validate_create_options(&o).unwrap_err().code,
                2,
                "size {bad}"
            );
            let o = bson::doc! {"capped": true, "size": 4096, "max": bad};
            let r = validate_create_options(&o);
            assert_eq!(r.is_err(), bad != 2e15, "max {bad}");
        }
        let o = bson::doc! {"capped": true, "size": "big"};
        assert_eq!(validate_create_options(&o).unwrap_err().code, 14);
        let o = bson::doc! {"capped": true, "size": 5000.0, "max": 10};
        let out = validate_create_options(&o).unwrap();
        assert_eq!(out.get_i64("size").unwrap(), 5000);
        assert_eq!(out.get_i64("max").unwrap(), 10);
    }

    #[test]
    fn collation_is_stored_as_used() {
        let o = bson::doc! {"collation": {"locale": "fr", "strength": 1}};
        let c = validate_create_options(&o).unwrap();
        let c = c.get_document("collation").unwrap();
        assert_eq!(c.get_str("locale").unwrap(), "fr");
        assert_eq!(c.get_i32("strength").unwrap(), 1);
        assert_eq!(c.get_str("caseFirst").unwrap(), "off");
        let o = bson::doc! {"collation": {"locale": "simple"}};
        assert!(!validate_create_options(&o)
            .unwrap()
            .contains_key("collation"));
        let o = bson::doc! {"collation": {"locale": "xx"}};
        assert_eq!(validate_create_options(&o).unwrap_err().code, 2);
    }

    /// An entry of `t.c` with the `_id` index and the given (name, table) indexes.
    fn entry_with(indexes: &[(&str, &str)]) -> CollEntry {
        let mut all = vec![IndexEntry {
            def: IndexDef::id_index(None),
            ident: "index-0".into(),
            multikey: false,
        }];
        for (name, ident) in indexes {
            let mut def = IndexDef::parse(&doc! {"key": {"a": 1}}).unwrap();
            def.name = name.to_string();
            all.push(IndexEntry {
                def,
                ident: ident.to_string(),
                multikey: false,
            });
        }
        CollEntry {
            ns: ns("t", "c"),
            uuid: Uuid::new(),
            options: Document::new(),
            ident: "collection".into(),
            indexes: all,
            next_index_ident: 3,
        }
    }

    #[test]
    fn a_consistent_entry_passes() {
        entry_with(&[("a_1", "index-1"), ("b_1", "index-2")]).assert_consistent();
    }

    #[test]
    #[should_panic(expected = "one _id index")]
    fn an_entry_without_its_id_index_is_refused() {
        let mut e = entry_with(&[]);
        e.indexes.clear();
        e.assert_consistent();
    }

    #[test]
    #[should_panic(expected = "index name a_1 twice")]
    fn an_index_name_twice_is_refused() {
        entry_with(&[("a_1", "index-1"), ("a_1", "index-2")]).assert_consistent();
    }

    #[test]
    #[should_panic(expected = "table index-1 named twice")]
    fn an_index_table_twice_is_refused() {
        entry_with(&[("a_1", "index-1"), ("b_1", "index-1")]).assert_consistent();
    }

    #[test]
    #[should_panic(expected = "table collection named twice")]
    fn an_index_in_the_collections_table_is_refused() {
        entry_with(&[("a_1", "collection")]).assert_consistent();
    }
}
