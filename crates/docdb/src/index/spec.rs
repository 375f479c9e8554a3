//! What an index is: its kind and its validated definition, as the catalog stores it.

use crate::partial::PartialFilter;
use bson::{doc, Bson, Document};
use query::collation::Collation;
use query::geo::flat::Flat2dSpec;
use query::text::TextSpec;
use std::sync::Arc;

/// The kind of an index: how a document's keys are made and which predicates they answer.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexKind {
    /// Ascending/descending fields: the KeyString of the values (equality, ranges, sorts).
    Ordered,
    /// `{field: "hashed"}`: one field, whose key is the value's 64-bit hash ([`query::hash`])
    /// stored as an Int64; it answers equality, never ranges or sorts.
    Hashed,
    /// A text index (`{field: "text", ...}`, stored as `{_fts: "text", _ftsx: 1}`, with any
    /// ordered fields before and after): one key per (prefix values, term, score, suffix
    /// values) of the document ([`TextSpec::doc_terms`]); the score is also the entry's
    /// value. It answers `$text` only (with equalities on the prefix fields).
    Text(Arc<TextSpec>),
    /// A wildcard index (`{"$**": 1}`, `{"a.$**": 1}`, `wildcardProjection`): one key per
    /// (field path, value) of every leaf the index covers; it answers equality and ranges on
    /// one field at a time, never sorts, nulls or `$exists: false`.
    Wildcard(Arc<WildcardSpec>),
    /// `{field: "2dsphere"}` (`2dsphereIndexVersion` 3): one key per S2-style cell covering
    /// each geometry of the document (`crate::geo_index`); documents without the field have
    /// none. It answers `$geoWithin`, `$geoIntersects` and `$near`.
    Geo2dSphere,
    /// `{field: "2d", ...}` (`min`, `max`, `bits`): its first field's legacy points keyed by
    /// their geohash ([`Flat2dSpec::hash`]), the other fields' values after it
    /// (`crate::index::geo2d`). It answers the flat `$near`, `$geoWithin` (`$box`, `$center`,
    /// `$polygon`, `$centerSphere`), `$nearSphere` and `$geoNear`.
    Geo2d(Flat2dSpec),
}

/// Which fields a wildcard index covers.
#[derive(Clone, Debug, PartialEq)]
pub struct WildcardSpec {
    /// The subtree: "" for `$**`, "a.b" for `a.b.$**`.
    pub root: String,
    /// `wildcardProjection`: (paths, inclusion). `_id` is covered only when included.
    pub(super) projection: Option<(Vec<String>, bool)>,
    pub(super) include_id: bool,
}

impl WildcardSpec {
    /// Whether the index holds keys for the field `path` (a leaf or a subtree's root):
    /// Some(true) every path below it too, Some(false) none, None some (descend).
    pub(super) fn covers(&self, path: &str) -> Option<bool> {
        let under = |p: &str, prefix: &str| {
            p == prefix || (p.starts_with(prefix) && p.as_bytes().get(prefix.len()) == Some(&b'.'))
        };
        if !self.root.is_empty() {
            if under(path, &self.root) {
                return Some(true);
            }
            // An ancestor of the root: descend towards it.
            return if under(&self.root, path) {
                None
            } else {
                Some(false)
            };
        }
        if path == "_id" || path.starts_with("_id.") {
            return Some(self.include_id);
        }
        match &self.projection {
            None => Some(true),
            Some((paths, true)) => {
                if paths.iter().any(|p| under(path, p)) {
                    Some(true)
                } else if paths.iter().any(|p| under(p, path)) {
                    None
                } else {
                    Some(false)
                }
            }
            Some((paths, false)) => {
                if paths.iter().any(|p| under(path, p)) {
                    Some(false)
                } else if paths.iter().any(|p| under(p, path)) {
                    None
                } else {
                    Some(true)
                }
            }
        }
    }

    /// Whether a query predicate on `path` can be answered from the index: the field is
    /// covered and names no array position (mongod's rule for `a.0`-style paths).
    pub fn answers(&self, path: &str) -> bool {
        self.covers(path) == Some(true)
            && !path
                .split('.')
                .any(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// A validated index definition as the catalog stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexDef {
    pub name: String,
    /// The key pattern exactly as given (e.g. `{a: 1, b: -1}`).
    pub key: Document,
    /// (path, descending) per field.
    pub fields: Vec<(String, bool)>,
    pub unique: bool,
    pub sparse: bool,
    /// A TTL index: documents whose indexed date is older than this many seconds are deleted
    /// by the TTL monitor.
    pub expire_after: Option<i64>,
    /// String keys are sort keys under this collation (None: the strings' bytes).
    pub collation: Option<Arc<Collation>>,
    /// What the keys are (ordered values, hashes, ...).
    pub kind: IndexKind,
    /// A partial index (`partialFilterExpression`) holds entries only for the documents its
    /// filter matches.
    pub partial: Option<PartialFilter>,
    /// A hidden index (`hidden: true`) is maintained but the planner never uses it, not even
    /// through a hint.
    pub hidden: bool,
    /// The full spec as listIndexes shows it (`v`, `key`, `name`, options).
    pub spec: Document,
}

impl IndexDef {
    /// The `_id` index, under the collection's default collation (as mongod's: equality on
    /// `_id` under that collation is answered by it, and `_id`s equal under it are duplicates).
    pub fn id_index(collation: Option<Arc<Collation>>) -> IndexDef {
        let key = doc! {"_id": 1};
        let mut spec = doc! {"v": 2, "key": key.clone(), "name": "_id_"};
        if let Some(c) = &collation {
            spec.insert("collation", c.spec().clone());
        }
        IndexDef {
            name: "_id_".into(),
            fields: vec![("_id".into(), false)],
            unique: true,
            sparse: false,
            expire_after: None,
            collation,
            kind: IndexKind::Ordered,
            partial: None,
            hidden: false,
            spec,
            key,
        }
    }

    pub fn is_hashed(&self) -> bool {
        self.kind == IndexKind::Hashed
    }

    pub fn is_text(&self) -> bool {
        matches!(self.kind, IndexKind::Text(_))
    }

    /// Whether `path` is one of a 2dsphere index's geo fields (its other fields are ordered).
    pub fn is_geo_field(&self, path: &str) -> bool {
        self.kind == IndexKind::Geo2dSphere
            && matches!(self.key.get(path), Some(Bson::String(s)) if s == "2dsphere")
    }

    /// Whether `path` is a 2d index's point field (its first), with the index's geometry.
    pub fn flat_geo_field(&self, path: &str) -> Option<&Flat2dSpec> {
        match &self.kind {
            IndexKind::Geo2d(spec) if self.fields.first().is_some_and(|f| f.0 == path) => {
                Some(spec)
            }
            _ => None,
        }
    }

    /// A 2dsphere index's geo fields, in key order.
    pub fn geo_paths(&self) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .map(|f| f.0.as_str())
            .filter(|p| self.is_geo_field(p))
    }

    /// Where a text (`_fts`, `_ftsx`) or wildcard (`$_path`, `$_value`) index's special pair
    /// of key components sits among its fields.
    fn special_at(&self) -> Option<usize> {
        self.fields
            .iter()
            .position(|f| f.0 == "_fts" || f.0 == "$_path")
    }

    /// A text or wildcard index's ordered fields before its special pair: their values lead
    /// every key (a `$text` query needs an equality on each).
    pub fn regular_before(&self) -> &[(String, bool)] {
        &self.fields[..self.special_at().unwrap_or(0)]
    }

    /// A text or wildcard index's ordered fields after its special pair.
    pub fn regular_after(&self) -> &[(String, bool)] {
        match self.special_at() {
            Some(at) => &self.fields[at + 2..],
            None => &[],
        }
    }

    /// Whether a full scan of the index would list documents more than once or not at all
    /// (text and wildcard keys are per term or per path): such an index answers only the
    /// predicates it was built for, never a hint alone.
    pub fn keys_per_field(&self) -> bool {
        matches!(
            self.kind,
            IndexKind::Text(_) | IndexKind::Wildcard(_) | IndexKind::Geo2dSphere
        )
    }

    pub fn is_id(&self) -> bool {
        self.name == "_id_"
    }

    pub fn descending(&self) -> Vec<bool> {
        self.fields.iter().map(|f| f.1).collect()
    }
}

/// mongod's default index name: `a_1_b_-1`.
pub fn default_name(key: &Document) -> String {
    key.iter()
        .map(|(k, v)| format!("{k}_{}", display_dir(v)))
        .collect::<Vec<_>>()
        .join("_")
}

fn display_dir(v: &Bson) -> String {
    match v {
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(d) if d.fract() == 0.0 => format!("{}", *d as i64),
        Bson::String(s) => s.clone(),
        other => other.to_string(),
    }
}
