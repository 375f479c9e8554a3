//! Index specifications and index keys.
//!
//! An index table holds one entry per (key, document): for a unique index the entry is
//! `KeyString(key) → RecordId` (so a second document with the same key finds the first);
//! otherwise `KeyString(key) ++ RecordId → ""` (duplicates sort by RecordId). RecordIds are
//! 8-byte big-endian positive i64s. A field holding an array contributes one key per element
//! (multikey; an empty array indexes as `undefined`); a missing field indexes as null; a
//! compound key may have at most one array field (CannotIndexParallelArrays, 171).
#![allow(clippy::result_large_err)]

use crate::keystring;
use crate::partial::PartialFilter;
use bson::{doc, Bson, Document};
use query::collation::{self, Collation, SpecOrigin};
use query::error::{DocError, DocResult};
use query::hash;
use query::text::TextSpec;
use std::sync::Arc;

pub type RecordId = i64;

pub fn rid_bytes(rid: RecordId) -> [u8; 8] {
    (rid as u64).to_be_bytes()
}

pub fn rid_from(bytes: &[u8]) -> DocResult<RecordId> {
    let b: [u8; 8] = bytes
        .try_into()
        .map_err(|_| DocError::internal_error("corrupt RecordId in index or collection"))?;
    Ok(u64::from_be_bytes(b) as i64)
}

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
}

/// Which fields a wildcard index covers.
#[derive(Clone, Debug, PartialEq)]
pub struct WildcardSpec {
    /// The subtree: "" for `$**`, "a.b" for `a.b.$**`.
    pub root: String,
    /// `wildcardProjection`: (paths, inclusion). `_id` is covered only when included.
    projection: Option<(Vec<String>, bool)>,
    include_id: bool,
}

impl WildcardSpec {
    fn new(root: String, projection: Option<&Document>) -> DocResult<WildcardSpec> {
        let mut spec = WildcardSpec {
            root,
            projection: None,
            include_id: false,
        };
        let Some(p) = projection else {
            return Ok(spec);
        };
        if p.is_empty() {
            return Err(DocError::failed_to_parse(
                "The field 'wildcardProjection' must be a non-empty object",
            ));
        }
        let mut paths = Vec::new();
        let mut mode: Option<bool> = None;
        for (path, v) in p {
            query::limits::check_path(path)?;
            let include = bool_value(v).ok_or_else(|| {
                DocError::failed_to_parse(format!(
                    "wildcardProjection values must be 0, 1, true or false (field '{path}')"
                ))
            })?;
            if path == "_id" {
                spec.include_id = include;
                continue;
            }
            if mode.is_some_and(|m| m != include) {
                return Err(DocError::with_code(
                    31254,
                    "Location31254",
                    format!("Cannot do exclusion on field {path} in inclusion projection"),
                ));
            }
            mode = Some(include);
            paths.push(path.clone());
        }
        if let Some(m) = mode {
            spec.projection = Some((paths, m));
        }
        Ok(spec)
    }

    /// Whether the index holds keys for the field `path` (a leaf or a subtree's root):
    /// Some(true) every path below it too, Some(false) none, None some (descend).
    fn covers(&self, path: &str) -> Option<bool> {
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

    /// Validates a createIndexes spec (MongoDB's rules and error codes).
    pub fn parse(spec: &Document) -> DocResult<IndexDef> {
        Self::parse_from(spec, SpecOrigin::Request)
    }

    /// Parses an index spec from `origin`: a stored spec keeps the collation it was built
    /// with even where today's rules refuse it (see [`SpecOrigin`]).
    pub fn parse_from(spec: &Document, origin: SpecOrigin) -> DocResult<IndexDef> {
        let key = match spec.get("key") {
            Some(Bson::Document(k)) => k.clone(),
            Some(_) => return Err(DocError::type_mismatch("The field 'key' must be an object")),
            None => {
                return Err(DocError::failed_to_parse(
                    "The 'key' field is a required property of an index specification",
                ))
            }
        };
        if key.is_empty() {
            return Err(cannot_create("Index keys cannot be empty."));
        }
        if key.len() > 32 {
            return Err(cannot_create(
                "Index key pattern has more than 32 fields (the compound index limit)",
            ));
        }
        let text_pattern = text_key_fields(&key)?;
        let is_text = text_pattern.is_some();
        let wildcard = if is_text {
            None
        } else {
            wildcard_key_pattern(&key)?
        };
        let wildcard_root = wildcard.as_ref().map(|w| w.root.clone());
        let mut fields = Vec::new();
        let mut hashed = false;
        let geo = crate::geo_index::is_2dsphere_key(&key);
        for (path, dir) in key.iter().filter(|_| !is_text && wildcard_root.is_none()) {
            query::limits::check_path(path)?;
            if path.is_empty() || path.split('.').any(|p| p.is_empty()) {
                return Err(cannot_create(format!(
                    "Index key contains an illegal field name: '{path}'"
                )));
            }
            if path.split('.').any(|p| p.starts_with('$')) {
                return Err(cannot_create(format!(
                    "Index key contains an illegal field name: field name starts with '$': {path}"
                )));
            }
            let n = match dir {
                Bson::Int32(i) => *i as f64,
                Bson::Int64(i) => *i as f64,
                Bson::Double(d) => *d,
                Bson::Decimal128(d) => d.to_string().parse().unwrap_or(0.0),
                Bson::String(s) if s == "hashed" => {
                    if key.len() > 1 {
                        return Err(cannot_create(format!(
                            "A hashed index must have exactly one field (compound hashed indexes are not supported by flashdoc): {key}"
                        )));
                    }
                    hashed = true;
                    1.0
                }
                Bson::String(s) if s == "2dsphere" => 1.0,
                Bson::String(s) => {
                    return Err(cannot_create(match s.as_str() {
                        "2d" => format!("Index type '2d' is not supported by flashdoc (field '{path}'): its flat geometry serves only legacy $near/$box queries; use a 2dsphere index, which also indexes legacy [lng, lat] pairs (docs/docdb.md, \"Geo\")"),
                        "geoHaystack" | "wildcard" => {
                            format!("Index type '{s}' is not supported by flashdoc (field '{path}')")
                        }
                        _ => format!("Unknown index plugin '{s}'"),
                    }))
                }
                other => {
                    return Err(cannot_create(format!(
                        "Values in v:2 index key pattern cannot be of type {:?}. Only numbers > 0, numbers < 0, and strings are allowed.",
                        other.element_type()
                    )))
                }
            };
            if n == 0.0 || n.is_nan() {
                return Err(cannot_create("Values in the index key pattern can't be 0."));
            }
            if fields.iter().any(|(p, _): &(String, bool)| p == path) {
                return Err(cannot_create(format!(
                    "Index key pattern has a repeated field: {path}"
                )));
            }
            fields.push((path.clone(), n < 0.0));
        }
        if let Some(tp) = &text_pattern {
            fields = tp.before.clone();
            fields.push(("_fts".to_string(), false));
            fields.push(("_ftsx".to_string(), false));
            fields.extend(tp.after.iter().cloned());
        }
        if let Some(w) = &wildcard {
            fields = w.before.clone();
            fields.push(("$_path".to_string(), false));
            fields.push(("$_value".to_string(), false));
            fields.extend(w.after.iter().cloned());
        }
        let name = match spec.get("name") {
            Some(Bson::String(s)) if !s.is_empty() => s.clone(),
            Some(Bson::String(_)) => return Err(cannot_create("The index name cannot be empty")),
            Some(_) => return Err(DocError::type_mismatch("The field 'name' must be a string")),
            None => default_name(&key),
        };
        if name.contains('\0') {
            return Err(cannot_create("The index name cannot contain null bytes"));
        }
        let mut unique = false;
        let mut sparse = false;
        let mut hidden = false;
        let mut expire_after = None;
        let mut collation = None;
        let mut partial = None;
        let mut text_opts: [Option<&Bson>; 4] = [None; 4];
        let mut wildcard_projection = None;
        let stored_key = if is_text {
            text_stored_key(&fields)
        } else {
            key.clone()
        };
        let mut out = doc! {"v": 2, "key": stored_key.clone(), "name": name.clone()};
        for (k, v) in spec {
            match k.as_str() {
                "weights" | "default_language" | "language_override" | "textIndexVersion"
                    if is_text =>
                {
                    let i = ["weights", "default_language", "language_override"]
                        .iter()
                        .position(|x| x == k)
                        .unwrap_or(3);
                    text_opts[i] = Some(v);
                }
                "key" | "name" | "ns" | "background" => {}
                "2dsphereIndexVersion" if geo => {
                    crate::geo_index::check_version(v)?;
                }
                "v" => match v.as_i32().or(v.as_i64().map(|x| x as i32)) {
                    Some(1) | Some(2) => {}
                    _ => {
                        return Err(cannot_create(format!(
                            "Invalid index specification {spec}; index version must be 1 or 2"
                        )))
                    }
                },
                "unique" | "sparse" | "hidden" => {
                    let b = bool_value(v).ok_or_else(|| {
                        DocError::type_mismatch(format!("The field '{k}' must be a boolean"))
                    })?;
                    match k.as_str() {
                        "unique" => unique = b,
                        "sparse" => sparse = b,
                        _ => hidden = b,
                    }
                    if b {
                        out.insert(k.clone(), true);
                    }
                }
                "expireAfterSeconds" => {
                    let secs = match v {
                        Bson::Int32(i) => *i as f64,
                        Bson::Int64(i) => *i as f64,
                        Bson::Double(d) => *d,
                        _ => {
                            return Err(DocError::type_mismatch(
                                "TTL index 'expireAfterSeconds' option must be numeric",
                            ))
                        }
                    };
                    if !(0.0..=i32::MAX as f64).contains(&secs) {
                        return Err(cannot_create(format!(
                            "TTL index 'expireAfterSeconds' option must be within an acceptable range [0, {}], found: {secs}",
                            i32::MAX
                        )));
                    }
                    if fields.len() != 1 {
                        return Err(cannot_create(
                            "TTL indexes are single-field indexes, compound indexes do not support TTL",
                        ));
                    }
                    expire_after = Some(secs as i64);
                    out.insert(k.clone(), Bson::Int32(secs as i32));
                }
                "wildcardProjection" => {
                    if wildcard_root.as_deref() != Some("") {
                        return Err(DocError::failed_to_parse(
                            "The field 'wildcardProjection' is only allowed in an '$**' index",
                        ));
                    }
                    let Bson::Document(p) = v else {
                        return Err(DocError::type_mismatch(
                            "The field 'wildcardProjection' must be a non-empty object",
                        ));
                    };
                    wildcard_projection = Some(p);
                    out.insert(k.clone(), p.clone());
                }
                "partialFilterExpression" => {
                    let p = PartialFilter::parse(v)?;
                    out.insert(k.clone(), p.filter.clone());
                    partial = Some(p);
                }
                "collation" => match v {
                    Bson::Document(c) => {
                        collation = Collation::parse_from(c, origin)?;
                        if let Some(coll) = &collation {
                            out.insert(k.clone(), coll.spec().clone());
                        }
                    }
                    _ => {
                        return Err(DocError::type_mismatch(
                            "The field 'collation' must be an object",
                        ))
                    }
                },
                _ => {
                    return Err(DocError::with_code(
                        197,
                        "InvalidIndexSpecificationOption",
                        format!("The field '{k}' is not valid for an index specification. Specification: {spec}"),
                    ))
                }
            }
        }
        let kind = match &text_pattern {
            Some(tp) => {
                let [w, dl, lo, ver] = text_opts;
                let text = TextSpec::parse(&tp.text, w, dl, lo, ver)?;
                if text.weights.is_empty() && !text.wildcard {
                    return Err(cannot_create("a text index needs at least one text field"));
                }
                if unique {
                    return Err(cannot_create(
                        "unique text indexes are not supported by flashdoc",
                    ));
                }
                if collation.is_some() {
                    return Err(cannot_create(
                        "Index type 'text' does not support collation (flashdoc indexes text under the simple collation)",
                    ));
                }
                out.extend(text.spec_fields());
                IndexKind::Text(Arc::new(text))
            }
            None if wildcard_root.is_some() => {
                for (opt, on) in [("unique", unique), ("sparse", sparse)] {
                    if on {
                        return Err(cannot_create(format!(
                            "Index type 'wildcard' does not support the {opt} option"
                        )));
                    }
                }
                if expire_after.is_some() {
                    return Err(cannot_create(
                        "Index type 'wildcard' does not support the expireAfterSeconds option",
                    ));
                }
                let w = wildcard.as_ref().expect("a wildcard key pattern");
                let regular: Vec<&str> = w
                    .before
                    .iter()
                    .chain(&w.after)
                    .map(|f| f.0.as_str())
                    .collect();
                if !regular.is_empty() {
                    check_compound_wildcard(&w.root, &regular, wildcard_projection)?;
                }
                IndexKind::Wildcard(Arc::new(WildcardSpec::new(
                    w.root.clone(),
                    wildcard_projection,
                )?))
            }
            None if geo => {
                crate::geo_index::check_options(unique, expire_after, collation.is_some())?;
                out.insert("2dsphereIndexVersion", crate::geo_index::INDEX_VERSION);
                IndexKind::Geo2dSphere
            }
            None if hashed => IndexKind::Hashed,
            None => IndexKind::Ordered,
        };
        if sparse && partial.is_some() {
            return Err(cannot_create(
                "cannot mix \"partialFilterExpression\" and \"sparse\" options",
            ));
        }
        if hashed && unique {
            return Err(DocError::with_code(
                16764,
                "Location16764",
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            ));
        }
        if hashed && collation.is_some() {
            // The hash is of the value's bytes; equality under a collation would miss keys.
            return Err(cannot_create(
                "a hashed index with a collation is not supported by flashdoc",
            ));
        }
        let is_id_key = fields.len() == 1 && fields[0].0 == "_id" && !hashed;
        if name == "_id_" && !is_id_key {
            return Err(DocError::bad_value(
                "The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}",
            ));
        }
        if is_id_key && !fields[0].1 && name == "_id_" {
            if unique || sparse || hidden || expire_after.is_some() || partial.is_some() {
                return Err(DocError::with_code(
                    197,
                    "InvalidIndexSpecificationOption",
                    "The fields 'unique', 'sparse', 'hidden', 'expireAfterSeconds' and 'partialFilterExpression' are not valid for an _id index specification",
                ));
            }
            return Ok(IndexDef::id_index(collation));
        }
        Ok(IndexDef {
            name,
            key: stored_key,
            fields,
            unique,
            sparse,
            expire_after,
            collation,
            kind,
            partial,
            hidden,
            spec: out,
        })
    }
}

/// A text index's key pattern split as mongod's `fixSpec` splits it: the ordered fields before
/// the text fields (whose values prefix every key, so a `$text` query needs equality on each),
/// the text fields (`$**` for every string), and the ordered fields after them (stored after
/// the term and score).
#[derive(Debug, Default)]
struct TextKeyPattern {
    before: Vec<(String, bool)>,
    text: Vec<String>,
    after: Vec<(String, bool)>,
}

/// The parts of a text index's key pattern, or None for other kinds. A stored spec's
/// `{..., _fts: "text", _ftsx: 1, ...}` names no text fields of its own (its `weights` do).
fn text_key_fields(key: &Document) -> DocResult<Option<TextKeyPattern>> {
    let is_text = |v: &Bson| matches!(v, Bson::String(s) if s == "text");
    if !key.iter().any(|(k, v)| is_text(v) || k == "_fts") {
        return Ok(None);
    }
    let mut pattern = TextKeyPattern::default();
    // 0: before the text fields, 1: in them, 2: after them.
    let mut stage = 0;
    for (path, v) in key {
        match (path.as_str(), v) {
            ("_fts", v) if is_text(v) && stage == 0 => stage = 1,
            ("_ftsx", v)
                if stage == 1 && query::compare::Num::of(v).is_some_and(|n| n.as_f64() == 1.0) => {}
            ("_fts" | "_ftsx", _) => {
                return Err(DocError::with_code(
                    17271,
                    "Location17271",
                    "expecting _fts:\"text\" and _ftsx:1",
                ))
            }
            (p, v) if is_text(v) => {
                if stage == 2 {
                    return Err(DocError::with_code(
                        17389,
                        "Location17389",
                        "'text' fields in index must all be adjacent",
                    ));
                }
                stage = 1;
                query::limits::check_path(p)?;
                let bad = p.split('.').any(|c| c.is_empty() || c.starts_with('$'));
                if p != "$**" && bad {
                    return Err(cannot_create(format!(
                        "Index key contains an illegal field name: '{p}'"
                    )));
                }
                pattern.text.push(p.to_string());
            }
            (p, v) => {
                let field = text_extra_field(p, v)?;
                if pattern
                    .before
                    .iter()
                    .chain(&pattern.after)
                    .any(|f| f.0 == field.0)
                {
                    return Err(cannot_create(format!(
                        "Index key pattern has a repeated field: {p}"
                    )));
                }
                if stage == 0 {
                    pattern.before.push(field);
                } else {
                    stage = 2;
                    pattern.after.push(field);
                }
            }
        }
    }
    Ok(Some(pattern))
}

/// An ordered field beside a text index's text fields: (path, descending), by mongod's rules
/// (another plugin is 67, a direction other than ±1 is 17273, `_fts`/`_ftsx` are 17289).
fn text_extra_field(path: &str, dir: &Bson) -> DocResult<(String, bool)> {
    if let Bson::String(s) = dir {
        return Err(cannot_create(match s.as_str() {
            "2d" | "2dsphere" | "hashed" | "geoHaystack" => {
                "Can't use more than one index plugin for a single index.".to_string()
            }
            _ => format!("Unknown index plugin '{s}'"),
        }));
    }
    let n = query::compare::Num::of(dir).map(|n| n.as_f64().trunc());
    if n != Some(1.0) && n != Some(-1.0) {
        return Err(DocError::with_code(
            17273,
            "Location17273",
            "expected value 1 or -1 for non-text key in compound index",
        ));
    }
    query::limits::check_path(path)?;
    if path.split('.').any(|c| c.is_empty() || c.starts_with('$')) {
        return Err(cannot_create(format!(
            "Index key contains an illegal field name: '{path}'"
        )));
    }
    Ok((path.to_string(), n == Some(-1.0)))
}

/// A wildcard index's key pattern: the subtree its wildcard term covers ("" for `$**`, "a"
/// for `a.$**`) and the ordered (regular) fields before and after that term (mongod 7's
/// compound wildcard indexes).
#[derive(Debug)]
struct WildcardKeyPattern {
    root: String,
    before: Vec<(String, bool)>,
    after: Vec<(String, bool)>,
}

/// The parts of a wildcard key pattern, or None for other kinds, by mongod's rules: one
/// wildcard term (7246201), a non-zero number for it, ±numbers for the regular fields (no
/// other plugin, 67), and without a `wildcardProjection` no regular field under the wildcard's
/// subtree (7246204; `$**` covers every field, so it needs a projection: 67).
fn wildcard_key_pattern(key: &Document) -> DocResult<Option<WildcardKeyPattern>> {
    let is_wild = |p: &str| p == "$**" || p.ends_with(".$**");
    if !key.keys().any(|p| is_wild(p)) {
        return Ok(None);
    }
    let mut pattern = WildcardKeyPattern {
        root: String::new(),
        before: Vec::new(),
        after: Vec::new(),
    };
    let mut seen_wildcard = false;
    for (path, v) in key {
        let number = query::compare::Num::of(v)
            .map(|n| n.as_f64())
            .filter(|n| *n != 0.0 && !n.is_nan());
        if !is_wild(path) {
            let Some(n) = number else {
                return Err(cannot_create(match v {
                    Bson::String(_) => {
                        "Can't use more than one index plugin for a single index.".to_string()
                    }
                    _ => {
                        format!("Values in the index key pattern can't be 0 or non-numbers: {key}")
                    }
                }));
            };
            query::limits::check_path(path)?;
            if path.split('.').any(|c| c.is_empty() || c.starts_with('$')) {
                return Err(cannot_create(format!(
                    "Index key contains an illegal field name: '{path}'"
                )));
            }
            let field = (path.clone(), n < 0.0);
            if seen_wildcard {
                pattern.after.push(field);
            } else {
                pattern.before.push(field);
            }
            continue;
        }
        if seen_wildcard {
            return Err(DocError::with_code(
                7246201,
                "Location7246201",
                "Index Key can contain only one wildcard index field",
            ));
        }
        seen_wildcard = true;
        if number.is_none() {
            return Err(cannot_create(format!(
                "a wildcard index's key value must be a non-zero number: {key}"
            )));
        }
        let root = path.strip_suffix("$**").unwrap_or("").trim_end_matches('.');
        query::limits::check_path(path)?;
        if !root.is_empty() && root.split('.').any(|c| c.is_empty() || c.starts_with('$')) {
            return Err(cannot_create(format!(
                "Index key contains an illegal field name: '{path}'"
            )));
        }
        pattern.root = root.to_string();
    }
    if !pattern.root.is_empty() {
        let root: Vec<&str> = pattern.root.split('.').collect();
        for (field, _) in pattern.before.iter().chain(&pattern.after) {
            if path_prefix_or_equal(&root, &field.split('.').collect::<Vec<_>>()) {
                return Err(DocError::with_code(
                    7246204,
                    "Location7246204",
                    format!("A wildcard index field should not overlap with and index key fields if wildcard projection is empty, however '{field}' is overlapping with the wildcard index field."),
                ));
            }
        }
    }
    Ok(Some(pattern))
}

/// Whether dotted path `a` (as components) is `b` or one of its ancestors.
fn path_prefix_or_equal(a: &[&str], b: &[&str]) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// mongod 7's rules for a compound wildcard index's `wildcardProjection` (the codes of its
/// `validateWildcardProjection`): required for `$**` (67); no overlapping paths (7246200);
/// inclusion and exclusion mixed only through `_id` (7246211); no regular field included
/// (7246208); with exclusions, every regular field excluded (7246209, 7246210).
fn check_compound_wildcard(
    root: &str,
    regular: &[&str],
    projection: Option<&Document>,
) -> DocResult<()> {
    let Some(projection) = projection else {
        if root.is_empty() {
            return Err(cannot_create(
                "a compound wildcard index on all fields ('$**') needs a wildcardProjection that excludes its regular fields",
            ));
        }
        return Ok(());
    };
    let code = |c: i32, msg: String| {
        let name = match c {
            7246200 => "Location7246200",
            7246208 => "Location7246208",
            7246209 => "Location7246209",
            7246210 => "Location7246210",
            _ => "Location7246211",
        };
        DocError::with_code(c, name, msg)
    };
    let split = |p: &str| p.split('.').map(str::to_string).collect::<Vec<String>>();
    let mut included: Vec<Vec<String>> = Vec::new();
    let mut excluded: Vec<Vec<String>> = Vec::new();
    for (path, v) in projection {
        match bool_value(v) {
            Some(true) => included.push(split(path)),
            Some(false) => excluded.push(split(path)),
            None => continue, // WildcardSpec::new reports it
        }
    }
    let mut fields: Vec<Vec<String>> = regular.iter().map(|p| split(p)).collect();
    for list in [&mut included, &mut excluded, &mut fields] {
        list.sort();
    }
    let is_prefix =
        |a: &[String], b: &[String]| a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y);
    for list in [&included, &excluded] {
        for w in list.windows(2) {
            if is_prefix(&w[0], &w[1]) {
                return Err(code(
                    7246200,
                    format!(
                        "Fields in Wildcard Projection cannot overlap, however '{}' is overlapped with '{}'",
                        w[0].join("."),
                        w[1].join(".")
                    ),
                ));
            }
        }
    }
    let id = vec!["_id".to_string()];
    if !included.is_empty() && !excluded.is_empty() {
        // `_id` is the one field whose inclusion or exclusion may go against the rest.
        if included == [id.clone()] {
            included.clear();
        } else if excluded == [id.clone()] {
            excluded.clear();
        } else {
            return Err(code(
                7246211,
                "Inclusion and exclusion statements cannot combine in the wildcardProjection with an exception of explicitly including _id field".to_string(),
            ));
        }
    }
    for f in &fields {
        if let Some(p) = included.iter().find(|p| is_prefix(p, f)) {
            return Err(code(
                7246208,
                format!(
                    "Index Key and Wildcard Projection cannot contain overlapping fields, however '{}' index field is overlapping with '{}' wildcardProjection path.",
                    f.join("."),
                    p.join(".")
                ),
            ));
        }
    }
    if excluded.is_empty() {
        return Ok(());
    }
    for f in &fields {
        if excluded.iter().any(|p| is_prefix(p, f)) {
            continue;
        }
        let c = if excluded.iter().any(|p| p > f) {
            7246209
        } else {
            7246210
        };
        return Err(code(
            c,
            format!(
                "wildcardProjection paths must exclude all regular index fields, however '{}' is not excluded.",
                f.join(".")
            ),
        ));
    }
    Ok(())
}

/// The key pattern a text index stores: the ordered fields around `{_fts: "text", _ftsx: 1}`.
fn text_stored_key(fields: &[(String, bool)]) -> Document {
    let mut key = Document::new();
    for (path, desc) in fields {
        match path.as_str() {
            "_fts" => key.insert("_fts", "text"),
            "_ftsx" => key.insert("_ftsx", 1),
            _ => key.insert(path.clone(), if *desc { -1 } else { 1 }),
        };
    }
    key
}

fn bool_value(v: &Bson) -> Option<bool> {
    match v {
        Bson::Boolean(b) => Some(*b),
        Bson::Int32(i) => Some(*i != 0),
        Bson::Int64(i) => Some(*i != 0),
        Bson::Double(d) => Some(*d != 0.0),
        _ => None,
    }
}

fn cannot_create(msg: impl Into<String>) -> DocError {
    DocError::with_code(67, "CannotCreateIndex", msg)
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

/// One index key of a document: the values (for keyValue in duplicate-key errors) and their
/// encoding.
#[derive(Clone, Debug)]
pub struct IndexKey {
    pub values: Vec<Bson>,
    pub encoded: Vec<u8>,
    /// The value of a non-unique entry (empty but for a text index: the term's score).
    pub payload: Vec<u8>,
}

/// All keys a document contributes to an index, and whether any indexed field was an array.
pub struct DocKeys {
    pub keys: Vec<IndexKey>,
    pub multikey: bool,
}

/// Extracts a document's keys for an index (deduplicated, in encoded order).
pub fn doc_keys(def: &IndexDef, doc: &Document) -> DocResult<DocKeys> {
    // Keys are encoded under the index's collation, whatever the operation's.
    let _index_collation = collation::scope(def.collation.clone());
    if def.partial.as_ref().is_some_and(|p| !p.matches(doc)) {
        return Ok(DocKeys {
            keys: Vec::new(),
            multikey: false,
        });
    }
    match &def.kind {
        IndexKind::Text(spec) => return text_keys(def, spec, doc),
        IndexKind::Wildcard(spec) => return wildcard_keys(def, spec, doc),
        IndexKind::Geo2dSphere => return crate::geo_index::doc_keys(def, doc),
        IndexKind::Ordered | IndexKind::Hashed => {}
    }
    let mut per_field: Vec<Vec<Bson>> = Vec::with_capacity(def.fields.len());
    let mut array_fields: Vec<&str> = Vec::new();
    let mut any_present = false;
    for (path, _) in &def.fields {
        let (vals, arrays, present) = field_values(doc, path);
        if arrays {
            array_fields.push(path);
        }
        any_present |= present;
        per_field.push(vals);
    }
    if def.is_hashed() && !array_fields.is_empty() {
        return Err(DocError::with_code(
            16766,
            "Location16766",
            format!(
                "Error: hashed indexes do not currently support array values. Found array for field {}",
                array_fields[0]
            ),
        ));
    }
    check_parallel_arrays(&array_fields)?;
    if def.sparse && !any_present {
        return Ok(DocKeys {
            keys: Vec::new(),
            multikey: false,
        });
    }
    let keys = if def.is_hashed() {
        per_field[0]
            .iter()
            .map(|v| IndexKey {
                encoded: keystring::encode_one(&Bson::Int64(hash::hash_value(v)), false),
                values: vec![v.clone()],
                payload: Vec::new(),
            })
            .collect()
    } else {
        combine_keys(&per_field, &def.descending())
    };
    Ok(DocKeys {
        keys,
        multikey: !array_fields.is_empty(),
    })
}

/// A compound key may take its many values from one array field only (mongod's 171).
pub(crate) fn check_parallel_arrays(array_fields: &[&str]) -> DocResult<()> {
    if array_fields.len() > 1 {
        return Err(DocError::with_code(
            171,
            "CannotIndexParallelArrays",
            format!(
                "cannot index parallel arrays [{}] [{}]",
                array_fields[1], array_fields[0]
            ),
        ));
    }
    Ok(())
}

/// The keys of every combination of the fields' values (one value per field each),
/// deduplicated, in encoded order.
pub(crate) fn combine_keys(per_field: &[Vec<Bson>], desc: &[bool]) -> Vec<IndexKey> {
    let mut combos: Vec<Vec<Bson>> = vec![Vec::new()];
    for vals in per_field {
        let mut next = Vec::with_capacity(combos.len() * vals.len());
        for c in &combos {
            for v in vals {
                let mut c2 = c.clone();
                c2.push(v.clone());
                next.push(c2);
            }
        }
        combos = next;
    }
    let mut keys: Vec<IndexKey> = combos
        .into_iter()
        .map(|values| {
            let refs: Vec<&Bson> = values.iter().collect();
            IndexKey {
                encoded: keystring::encode_key(&refs, desc),
                values,
                payload: Vec::new(),
            }
        })
        .collect();
    keys.sort_by(|a, b| a.encoded.cmp(&b.encoded));
    keys.dedup_by(|a, b| a.encoded == b.encoded);
    keys
}

/// A text index's keys: `KeyString(prefix values, term, score, suffix values)` per term, the
/// score also as the payload. The ordered fields hold one value each: an array anywhere on
/// their path is CannotBuildIndexKeys (201), as mongod's; a missing one is null.
fn text_keys(def: &IndexDef, spec: &TextSpec, doc: &Document) -> DocResult<DocKeys> {
    let extra = |fields: &[(String, bool)]| -> DocResult<Vec<Bson>> {
        fields
            .iter()
            .map(|(path, _)| single_value(doc, path, "text index"))
            .collect()
    };
    let (prefix, suffix) = (extra(def.regular_before())?, extra(def.regular_after())?);
    let desc: Vec<bool> = def.fields.iter().map(|f| f.1).collect();
    let keys = spec
        .doc_terms(doc)?
        .into_iter()
        .map(|(term, score)| {
            let mut values = prefix.clone();
            values.push(Bson::String(term));
            values.push(Bson::Double(score));
            values.extend(suffix.iter().cloned());
            let refs: Vec<&Bson> = values.iter().collect();
            IndexKey {
                encoded: keystring::encode_key(&refs, &desc),
                values,
                payload: score.to_le_bytes().to_vec(),
            }
        })
        .collect();
    // Terms are distinct and follow the same prefix, so the encodings are distinct and in
    // order (strings first).
    Ok(DocKeys {
        keys,
        multikey: false,
    })
}

/// The value at `path` for an ordered field of a text or compound wildcard index, which holds
/// one value per document (null when missing; an array on the path is 201).
fn single_value(doc: &Document, path: &str, index_kind: &str) -> DocResult<Bson> {
    let mut at = doc;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let v = match at.get(part) {
            None => return Ok(Bson::Null),
            Some(v) => v,
        };
        match (v, parts.peek()) {
            (Bson::Array(_), _) => {
                return Err(DocError::with_code(
                    201,
                    "CannotBuildIndexKeys",
                    format!("Field '{path}' of {index_kind} contains an array in document: {doc}"),
                ))
            }
            (v, None) => return Ok(v.clone()),
            (Bson::Document(d), Some(_)) => at = d,
            (_, Some(_)) => return Ok(Bson::Null),
        }
    }
    Ok(Bson::Null)
}

/// The key range of one term in a text index: the prefix fields' values (equalities of the
/// query) then the term. Encoded without a collation (text indexes have none).
pub fn text_term_prefix(def: &IndexDef, prefix: &[Bson], term: &str) -> Vec<u8> {
    debug_assert_eq!(prefix.len(), def.regular_before().len());
    let _simple = collation::scope(None);
    let term = Bson::String(term.to_string());
    let values: Vec<&Bson> = prefix.iter().chain(std::iter::once(&term)).collect();
    let desc: Vec<bool> = def.fields.iter().map(|f| f.1).collect();
    keystring::encode_key(&values, &desc[..values.len()])
}

/// A wildcard index's keys: `KeyString(before values, path, value, after values)` for every
/// covered leaf (array elements one by one under their array's path; an empty array as
/// undefined, an empty document as itself), deduplicated. The walk follows the document's own
/// nesting (bounded by `limits`). A document with no covered leaf has no keys, but for a
/// marker (path MinKey) under its leading regular fields' values when the index has some.
fn wildcard_keys(def: &IndexDef, spec: &WildcardSpec, doc: &Document) -> DocResult<DocKeys> {
    let regular = |fields: &[(String, bool)]| -> DocResult<Vec<Bson>> {
        fields
            .iter()
            .map(|(path, _)| single_value(doc, path, "compound wildcard index"))
            .collect()
    };
    let (before, after) = (
        regular(def.regular_before())?,
        regular(def.regular_after())?,
    );
    let desc = def.descending();
    let mut pairs: Vec<(Bson, Bson)> = Vec::new();
    let mut multikey = false;
    wildcard_walk(spec, doc, "", &mut pairs, &mut multikey);
    if pairs.is_empty() && !before.is_empty() {
        // A document without covered leaves still answers predicates on the leading regular
        // fields: one marker key, its path MinKey (below every path string).
        pairs.push((Bson::MinKey, Bson::Null));
    }
    let mut keys: Vec<IndexKey> = pairs
        .into_iter()
        .map(|(path, v)| {
            let mut values = before.clone();
            values.push(path);
            values.push(v);
            values.extend(after.iter().cloned());
            let refs: Vec<&Bson> = values.iter().collect();
            IndexKey {
                encoded: keystring::encode_key(&refs, &desc),
                values,
                payload: Vec::new(),
            }
        })
        .collect();
    keys.sort_by(|a, b| a.encoded.cmp(&b.encoded));
    keys.dedup_by(|a, b| a.encoded == b.encoded);
    Ok(DocKeys { keys, multikey })
}

fn wildcard_walk(
    spec: &WildcardSpec,
    d: &Document,
    prefix: &str,
    out: &mut Vec<(Bson, Bson)>,
    multikey: &mut bool,
) {
    for (k, v) in d {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match spec.covers(&path) {
            Some(false) => {}
            Some(true) => wildcard_value(spec, v, &path, out, multikey, true),
            None => match v {
                Bson::Document(sub) => wildcard_walk(spec, sub, &path, out, multikey),
                Bson::Array(a) => {
                    for sub in a.iter().filter_map(Bson::as_document) {
                        *multikey = true;
                        wildcard_walk(spec, sub, &path, out, multikey);
                    }
                }
                _ => {}
            },
        }
    }
}

fn wildcard_value(
    spec: &WildcardSpec,
    v: &Bson,
    path: &str,
    out: &mut Vec<(Bson, Bson)>,
    multikey: &mut bool,
    expand_arrays: bool,
) {
    match v {
        Bson::Document(sub) if !sub.is_empty() => wildcard_walk(spec, sub, path, out, multikey),
        Bson::Array(a) if expand_arrays => {
            *multikey = true;
            if a.is_empty() {
                out.push((Bson::String(path.to_string()), Bson::Undefined));
            }
            for e in a {
                // A nested array is one value; documents in arrays are walked.
                wildcard_value(spec, e, path, out, multikey, false);
            }
        }
        other => out.push((Bson::String(path.to_string()), other.clone())),
    }
}

/// A text entry's score (its payload).
pub fn text_score(value: &[u8]) -> DocResult<f64> {
    let b: [u8; 8] = value
        .try_into()
        .map_err(|_| DocError::internal_error("corrupt text index entry"))?;
    Ok(f64::from_le_bytes(b))
}

/// The values an ordered index field takes in `doc` (null when missing, one per array
/// element), whether an array was on the path, and whether the field is present.
pub(crate) fn field_values(doc: &Document, path: &str) -> (Vec<Bson>, bool, bool) {
    let parts: Vec<&str> = path.split('.').collect();
    let (mut vals, mut arrays, mut present) = (Vec::new(), false, false);
    collect(
        &Bson::Document(doc.clone()),
        &parts,
        &mut vals,
        &mut arrays,
        &mut present,
        true,
    );
    if vals.is_empty() {
        vals.push(Bson::Null);
    }
    (vals, arrays, present)
}

/// Generous extraction: every value the query language could find at `parts` (arrays at any
/// level are traversed), null where a path is missing.
fn collect(
    v: &Bson,
    parts: &[&str],
    out: &mut Vec<Bson>,
    arrays: &mut bool,
    present: &mut bool,
    top: bool,
) {
    if parts.is_empty() {
        *present = true;
        match v {
            Bson::Array(a) if !top => {
                *arrays = true;
                if a.is_empty() {
                    out.push(Bson::Undefined);
                }
                for e in a {
                    out.push(e.clone());
                }
            }
            other => out.push(other.clone()),
        }
        return;
    }
    match v {
        Bson::Document(d) => match d.get(parts[0]) {
            Some(x) => collect(x, &parts[1..], out, arrays, present, false),
            None => out.push(Bson::Null),
        },
        Bson::Array(a) => {
            *arrays = true;
            if let Ok(i) = parts[0].parse::<usize>() {
                if let Some(x) = a.get(i) {
                    collect(x, &parts[1..], out, arrays, present, false);
                }
            }
            if a.is_empty() {
                out.push(Bson::Null);
            }
            for e in a {
                match e {
                    Bson::Document(_) | Bson::Array(_) => {
                        collect(e, parts, out, arrays, present, false)
                    }
                    _ => out.push(Bson::Null),
                }
            }
        }
        _ => out.push(Bson::Null),
    }
}

/// The table key of an index entry.
pub fn entry_key(unique: bool, key: &[u8], rid: RecordId) -> Vec<u8> {
    if unique {
        key.to_vec()
    } else {
        let mut k = Vec::with_capacity(key.len() + 8);
        k.extend_from_slice(key);
        k.extend_from_slice(&rid_bytes(rid));
        k
    }
}

/// The RecordId an index entry points at.
pub fn entry_rid(unique: bool, key: &[u8], value: &[u8]) -> DocResult<RecordId> {
    if unique {
        rid_from(value)
    } else if key.len() >= 8 {
        rid_from(&key[key.len() - 8..])
    } else {
        Err(DocError::internal_error("corrupt index entry"))
    }
}

/// `keyValue` of a duplicate-key error: `{field: value, ...}`.
pub fn key_value_doc(def: &IndexDef, values: &[Bson]) -> Document {
    let mut d = Document::new();
    for ((path, _), v) in def.fields.iter().zip(values) {
        d.insert(path.clone(), v.clone());
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_multikey_and_parallel() {
        let def = IndexDef::parse(&doc! {"key": {"a": 1, "b": -1}, "name": "ab"}).unwrap();
        let k = doc_keys(&def, &doc! {"a": [1, 2, 2], "b": 5}).unwrap();
        assert_eq!(k.keys.len(), 2);
        assert!(k.multikey);
        let e = doc_keys(&def, &doc! {"a": [1], "b": [2]}).err().unwrap();
        assert_eq!(e.code, 171);
        let k = doc_keys(&def, &doc! {"x": 1}).unwrap();
        assert_eq!(k.keys[0].values, vec![Bson::Null, Bson::Null]);
        let def = IndexDef::parse(&doc! {"key": {"a.b": 1}, "name": "ab"}).unwrap();
        let k = doc_keys(&def, &doc! {"a": [{"b": 1}, {"b": 3}]}).unwrap();
        assert!(k.multikey);
        assert!(k.keys.iter().any(|x| x.values == vec![Bson::Int32(3)]));
    }

    #[test]
    fn hashed_keys() {
        let def = IndexDef::parse(&doc! {"key": {"a": "hashed"}}).unwrap();
        assert!(def.is_hashed());
        assert_eq!(def.name, "a_hashed");
        let k = doc_keys(&def, &doc! {"a": 42.5}).unwrap();
        assert_eq!(
            k.keys[0].encoded,
            keystring::encode_one(&Bson::Int64(-944302157085130861), false)
        );
        assert_eq!(k.keys[0].values, vec![Bson::Double(42.5)]);
        assert_eq!(doc_keys(&def, &doc! {"a": [1]}).err().unwrap().code, 16766);
        let code = |d: Document| IndexDef::parse(&d).err().map(|e| e.code);
        assert_eq!(
            code(doc! {"key": {"a": "hashed"}, "unique": true}),
            Some(16764)
        );
        assert_eq!(code(doc! {"key": {"a": "hashed", "b": 1}}), Some(67));
        assert_eq!(
            code(doc! {"key": {"a": "hashed"}, "collation": {"locale": "fr"}}),
            Some(67)
        );
    }

    #[test]
    fn compound_text_keys_and_spec() {
        let def = IndexDef::parse(&doc! {"key": {"cat": 1, "body": "text", "score": -1}}).unwrap();
        assert_eq!(def.name, "cat_1_body_text_score_-1");
        assert_eq!(
            def.key,
            doc! {"cat": 1, "_fts": "text", "_ftsx": 1, "score": -1}
        );
        assert_eq!(def.regular_before(), &[("cat".to_string(), false)]);
        assert_eq!(def.regular_after(), &[("score".to_string(), true)]);
        // The stored spec parses back to the same definition.
        let again = IndexDef::parse(&def.spec).unwrap();
        assert_eq!(again.fields, def.fields);
        assert_eq!(again.kind, def.kind);
        let k = doc_keys(&def, &doc! {"cat": "a", "body": "coffee cake", "score": 3}).unwrap();
        assert_eq!(k.keys.len(), 2);
        for key in &k.keys {
            assert_eq!(key.values[0], Bson::String("a".into()));
            assert_eq!(key.values[3], Bson::Int32(3));
            let term = key.values[1].as_str().unwrap();
            assert!(key.encoded.starts_with(&text_term_prefix(
                &def,
                &[Bson::String("a".into())],
                term
            )));
        }
        // A missing ordered field is null; an array on its path is 201; no terms, no keys.
        let k = doc_keys(&def, &doc! {"body": "coffee"}).unwrap();
        assert_eq!(k.keys[0].values[0], Bson::Null);
        assert_eq!(k.keys[0].values[3], Bson::Null);
        for bad in [
            doc! {"cat": ["a"], "body": "x"},
            doc! {"cat": [], "body": "x"},
            doc! {"cat": "a", "score": [1], "body": "x"},
        ] {
            assert_eq!(doc_keys(&def, &bad).err().unwrap().code, 201);
        }
        let def = IndexDef::parse(&doc! {"key": {"c.d": 1, "b": "text"}}).unwrap();
        assert_eq!(
            doc_keys(&def, &doc! {"c": [{"d": 1}], "b": "x"})
                .err()
                .unwrap()
                .code,
            201
        );
        assert!(doc_keys(&def, &doc! {"b": "the"}).unwrap().keys.is_empty());
        let code = |d: Document| IndexDef::parse(&d).err().map(|e| e.code);
        assert_eq!(
            code(doc! {"key": {"a": "text", "b": 1, "c": "text"}}),
            Some(17389)
        );
        assert_eq!(code(doc! {"key": {"a": 2, "b": "text"}}), Some(17273));
        assert_eq!(code(doc! {"key": {"a": "2dsphere", "b": "text"}}), Some(67));
        assert_eq!(code(doc! {"key": {"a": 1, "b": "text", "a.": 1}}), Some(67));
        assert!(IndexDef::parse(&doc! {"key": {"a": 1, "$**": "text"}}).is_ok());
    }

    #[test]
    fn compound_wildcard_specs_follow_mongod_7() {
        // The cases of mongod's compound_wildcard_index_validation.js, expectations as there.
        let code = |key: Document, wcp: Option<Document>| {
            let mut spec = doc! {"key": key};
            if let Some(p) = wcp {
                spec.insert("wildcardProjection", p);
            }
            IndexDef::parse(&spec).err().map(|e| e.code)
        };
        let ok: Vec<(Document, Option<Document>)> = vec![
            (doc! {"a": 1, "b.$**": 1}, None),
            (doc! {"a.$**": 1, "b": 1}, None),
            (doc! {"a": 1, "b.$**": -1, "c": 1}, None),
            (doc! {"a": 1, "$**": 1}, Some(doc! {"a": 0})),
            (doc! {"$**": 1, "a": 1}, Some(doc! {"a": 0})),
            (
                doc! {"a": 1, "$**": -1, "b": 1},
                Some(doc! {"a": 0, "b": 0}),
            ),
            (doc! {"$**": 1, "other": 1}, Some(doc! {"_id": 0, "a": 1})),
            (
                doc! {"$**": 1, "another": 1},
                Some(doc! {"_id": 1, "a": 0, "another": 0}),
            ),
            (doc! {"$**": 1, "e": 1}, Some(doc! {"_id": 1, "e": 0})),
            (
                doc! {"$**": 1, "_id": 1, "e": 1},
                Some(doc! {"_id": 0, "a": 1}),
            ),
            (doc! {"_id": 1, "$**": 1}, Some(doc! {"_id": 0})),
            (
                doc! {"_id": 1, "a": 1, "$**": 1},
                Some(doc! {"_id": 0, "a": 0}),
            ),
            (doc! {"e": 1, "$**": 1}, Some(doc! {"_id": 1, "f": 1})),
            (
                doc! {"_id": 1, "a.b": 1, "$**": 1},
                Some(doc! {"_id": 0, "a": 0}),
            ),
            (doc! {"$**": 1, "e.b": 1}, Some(doc! {"_id": 1, "e": 0})),
        ];
        for (key, wcp) in ok {
            assert_eq!(code(key.clone(), wcp.clone()), None, "{key} {wcp:?}");
        }
        let bad: Vec<(Document, Option<Document>, i32)> = vec![
            (doc! {"a": 1, "a.$**": 1}, None, 7246204),
            (doc! {"a.b.c": 1, "a.b.$**": 1}, None, 7246204),
            (
                doc! {"$**": 1, "c": 1},
                Some(doc! {"a.b": 1, "a.b.c": 1}),
                7246200,
            ),
            (doc! {"a.$**": 1, "b.$**": 1}, None, 7246201),
            (doc! {"a.$**": 1, "b": "text"}, None, 67),
            (doc! {"a.$**": 1, "b": "hashed"}, None, 67),
            (doc! {"a.$**": 1, "b": "2dsphere"}, None, 67),
            (doc! {"a": 1, "$**": 1}, None, 67),
            (doc! {"a": 1, "$**": 1}, Some(doc! {}), 9),
            (doc! {"a": 1, "$**": 1}, Some(doc! {"a": 1}), 7246208),
            (
                doc! {"a": 1, "$**": 1, "b": 1},
                Some(doc! {"a": 1, "b": 1}),
                7246208,
            ),
            (doc! {"_id": 1, "$**": 1}, Some(doc! {"_id": 1}), 7246208),
            (
                doc! {"$**": 1, "c": 1},
                Some(doc! {"_id": 0, "a": 0, "b": 1}),
                7246211,
            ),
            (
                doc! {"$**": 1, "c": 1},
                Some(doc! {"_id": 1, "a": 0, "b": 1}),
                7246211,
            ),
            (
                doc! {"$**": 1, "_id": 1, "e": 1},
                Some(doc! {"_id": 1, "e": 0}),
                7246209,
            ),
            (doc! {"a": 1, "$**": 1}, Some(doc! {"_id": 0}), 7246210),
            (
                doc! {"_id": 1, "$**": 1, "a": 1},
                Some(doc! {"_id": 0}),
                7246210,
            ),
            (
                doc! {"a": 1, "_id": 1, "$**": 1},
                Some(doc! {"a": 0}),
                7246209,
            ),
            (
                doc! {"b": 1, "$**": 1},
                Some(doc! {"_id": 0, "a": 0}),
                7246210,
            ),
            (
                doc! {"_id": 1, "a": 1, "$**": 1},
                Some(doc! {"_id": 0, "a.b": 0}),
                7246209,
            ),
            (
                doc! {"$**": 1, "e.c": 1},
                Some(doc! {"_id": 1, "e.b": 0}),
                7246210,
            ),
        ];
        for (key, wcp, want) in bad {
            assert_eq!(code(key.clone(), wcp.clone()), Some(want), "{key} {wcp:?}");
        }
        for opt in ["unique", "sparse"] {
            let spec = doc! {"key": {"a.$**": 1, "b": 1}, opt: true};
            assert_eq!(IndexDef::parse(&spec).err().map(|e| e.code), Some(67));
        }
    }

    #[test]
    fn compound_wildcard_keys() {
        let def = IndexDef::parse(&doc! {
            "key": {"tenant": 1, "$**": 1, "score": -1},
            "wildcardProjection": {"tenant": 0, "score": 0},
        })
        .unwrap();
        assert_eq!(def.regular_before(), &[("tenant".to_string(), false)]);
        assert_eq!(def.regular_after(), &[("score".to_string(), true)]);
        let k = doc_keys(
            &def,
            &doc! {"tenant": "x", "a": {"b": 1, "c": [2, 3]}, "score": 5},
        )
        .unwrap();
        let values: Vec<Vec<Bson>> = k.keys.iter().map(|k| k.values.clone()).collect();
        assert_eq!(values.len(), 3, "{values:?}");
        assert!(values.contains(&vec![
            Bson::String("x".into()),
            Bson::String("a.c".into()),
            Bson::Int32(3),
            Bson::Int32(5)
        ]));
        assert!(k.multikey);
        // Regular fields hold one value each (201); a missing regular field is null; a
        // document without covered leaves has one marker key (path MinKey) under its leading
        // fields.
        assert_eq!(
            doc_keys(&def, &doc! {"tenant": ["x"], "a": 1})
                .err()
                .unwrap()
                .code,
            201
        );
        let k = doc_keys(&def, &doc! {"a": 1}).unwrap();
        assert_eq!(k.keys[0].values[0], Bson::Null);
        let k = doc_keys(&def, &doc! {"tenant": "x"}).unwrap();
        assert_eq!(
            k.keys.iter().map(|k| k.values.clone()).collect::<Vec<_>>(),
            vec![vec![
                Bson::String("x".into()),
                Bson::MinKey,
                Bson::Null,
                Bson::Null
            ]]
        );
        // Without leading regular fields there is no marker.
        let def = IndexDef::parse(&doc! {"key": {"a.$**": 1, "n": 1}}).unwrap();
        assert!(doc_keys(&def, &doc! {"n": 1}).unwrap().keys.is_empty());
    }

    #[test]
    fn spec_errors() {
        let code = |d: Document| IndexDef::parse(&d).err().map(|e| e.code);
        assert_eq!(code(doc! {"key": {"a": 0}, "name": "x"}), Some(67));
        assert_eq!(code(doc! {"key": {}, "name": "x"}), Some(67));
        assert_eq!(code(doc! {"key": {"a": "foo"}, "name": "x"}), Some(67));
        assert_eq!(code(doc! {"name": "x"}), Some(9));
        assert_eq!(
            code(doc! {"key": {"a": 1}, "name": "x", "bogus": 1}),
            Some(197)
        );
        assert_eq!(code(doc! {"key": 5, "name": "x"}), Some(14));
        assert_eq!(
            IndexDef::parse(&doc! {"key": {"a": 1, "b": -1}})
                .unwrap()
                .name,
            "a_1_b_-1"
        );
    }
}
