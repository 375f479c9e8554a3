//! A createIndexes spec (or a stored one) checked by MongoDB's rules and error codes, and
//! made an [`IndexDef`].

use super::geo;
use super::spec::{default_name, IndexDef, IndexKind, WildcardSpec};
use crate::partial::PartialFilter;
use bson::{doc, Bson, Document};
use query::collation::{Collation, SpecOrigin};
use query::error::{DocError, DocResult};
use query::geo::flat::Flat2dSpec;
use query::text::TextSpec;
use std::sync::Arc;

impl IndexDef {
    /// Validates a createIndexes spec (MongoDB's rules and error codes).
    pub fn parse(spec: &Document) -> DocResult<IndexDef> {
        Self::parse_from(spec, SpecOrigin::Request)
    }

    /// Parses an index spec from `origin`: a stored spec keeps the collation it was built
    /// with even where today's rules refuse it (see [`SpecOrigin`]). The phases: the key
    /// pattern, the name, the options, the kind they make, then the rules across them.
    pub fn parse_from(spec: &Document, origin: SpecOrigin) -> DocResult<IndexDef> {
        let pattern = KeyPattern::parse(spec)?;
        let name = index_name(spec, &pattern.key)?;
        let mut opts = SpecOptions::parse(spec, origin, &pattern, &name)?;
        let kind = pattern.kind(&mut opts)?;
        check_option_mix(&pattern, &opts)?;
        let KeyPattern { fields, hashed, .. } = pattern;
        let is_id_key = fields.len() == 1 && fields[0].0 == "_id" && !hashed;
        if name == "_id_" && !is_id_key {
            return Err(DocError::bad_value(
                "The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}",
            ));
        }
        if is_id_key && !fields[0].1 && name == "_id_" {
            return id_index_from(opts);
        }
        Ok(IndexDef {
            name,
            key: opts.stored_key,
            fields,
            unique: opts.unique,
            sparse: opts.sparse,
            expire_after: opts.expire_after,
            collation: opts.collation,
            kind,
            partial: opts.partial,
            hidden: opts.hidden,
            spec: opts.out,
        })
    }
}

/// An index key pattern read: the pattern as given, its fields as the keys hold them
/// ((path, descending); a text or wildcard index's special pair among them), and what kind
/// of index the pattern makes.
struct KeyPattern {
    key: Document,
    fields: Vec<(String, bool)>,
    text: Option<TextKeyPattern>,
    wildcard: Option<WildcardKeyPattern>,
    hashed: bool,
    geo: bool,
    /// A 2d index (`{loc: "2d", ...}`).
    flat: bool,
}

impl KeyPattern {
    fn parse(spec: &Document) -> DocResult<KeyPattern> {
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
        let text = text_key_fields(&key)?;
        let wildcard = if text.is_some() {
            None
        } else {
            wildcard_key_pattern(&key)?
        };
        let geo = geo::is_2dsphere_key(&key);
        let flat = flat_key(&key, geo)?;
        let (fields, hashed) = match (&text, &wildcard) {
            (Some(tp), _) => (
                special_fields(&tp.before, ["_fts", "_ftsx"], &tp.after),
                false,
            ),
            (None, Some(w)) => (
                special_fields(&w.before, ["$_path", "$_value"], &w.after),
                false,
            ),
            (None, None) => ordered_fields(&key)?,
        };
        Ok(KeyPattern {
            key,
            fields,
            text,
            wildcard,
            hashed,
            geo,
            flat,
        })
    }

    fn is_text(&self) -> bool {
        self.text.is_some()
    }

    /// A wildcard index's subtree ("" for `$**`).
    fn wildcard_root(&self) -> Option<&str> {
        self.wildcard.as_ref().map(|w| w.root.as_str())
    }

    /// The index kind the pattern and the options make, with the options' rules for that
    /// kind; a text spec's fields and a 2dsphere index's version join the stored spec.
    fn kind(&self, opts: &mut SpecOptions) -> DocResult<IndexKind> {
        if let Some(tp) = &self.text {
            return text_kind(tp, opts);
        }
        if let Some(w) = &self.wildcard {
            return wildcard_kind(w, opts);
        }
        if self.geo {
            geo::check_options(opts.unique, opts.expire_after, opts.collation.is_some())?;
            opts.out.insert("2dsphereIndexVersion", geo::INDEX_VERSION);
            return Ok(IndexKind::Geo2dSphere);
        }
        if self.flat {
            return flat_kind(opts);
        }
        Ok(if self.hashed {
            IndexKind::Hashed
        } else {
            IndexKind::Ordered
        })
    }
}

/// Whether a key pattern is a 2d one: one `"2d"` field, first, with ordered fields after it
/// (mongod's 16800, 16801, and one plugin per index).
fn flat_key(key: &Document, sphere: bool) -> DocResult<bool> {
    let is_plugin = |v: &Bson, name: &str| matches!(v, Bson::String(s) if s == name);
    let count = key.values().filter(|v| is_plugin(v, "2d")).count();
    if count == 0 {
        return Ok(false);
    }
    if count > 1 {
        return Err(DocError::with_code(
            16800,
            "Location16800",
            "can't have 2 geo fields",
        ));
    }
    if !key.values().next().is_some_and(|v| is_plugin(v, "2d")) {
        return Err(DocError::with_code(
            16801,
            "Location16801",
            "2d has to be first in index",
        ));
    }
    if sphere
        || key
            .values()
            .any(|v| matches!(v, Bson::String(s) if s != "2d"))
    {
        return Err(cannot_create(format!(
            "Can't use more than one index plugin for a single index: {key}"
        )));
    }
    Ok(true)
}

/// A 2d index's kind: its geometry from `min`, `max`, `bits`; the options a 2d index cannot
/// honour are refused.
fn flat_kind(opts: &SpecOptions) -> DocResult<IndexKind> {
    let refuse = |what: &str| {
        Err(cannot_create(format!(
            "Index type '2d' does not support {what} in flashdoc"
        )))
    };
    if opts.unique {
        return refuse("the unique option");
    }
    if opts.expire_after.is_some() {
        return refuse("expireAfterSeconds");
    }
    if opts.collation.is_some() {
        return refuse("a collation (its keys are geohashes, not strings)");
    }
    let [min, max, bits] = opts.flat_opts;
    Ok(IndexKind::Geo2d(Flat2dSpec::parse(min, max, bits)?))
}

/// The fields of a text or wildcard index: the ordered ones around its special pair.
fn special_fields(
    before: &[(String, bool)],
    pair: [&str; 2],
    after: &[(String, bool)],
) -> Vec<(String, bool)> {
    let mut fields = before.to_vec();
    fields.extend(pair.iter().map(|p| (p.to_string(), false)));
    fields.extend(after.iter().cloned());
    fields
}

/// The fields of an ordered, hashed or 2dsphere key pattern, and whether it is hashed.
fn ordered_fields(key: &Document) -> DocResult<(Vec<(String, bool)>, bool)> {
    let mut fields: Vec<(String, bool)> = Vec::new();
    let mut hashed = false;
    for (path, dir) in key {
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
        let n = key_direction(key, path, dir)?;
        hashed |= matches!(dir, Bson::String(s) if s == "hashed");
        if n == 0.0 || n.is_nan() {
            return Err(cannot_create("Values in the index key pattern can't be 0."));
        }
        if fields.iter().any(|(p, _)| p == path) {
            return Err(cannot_create(format!(
                "Index key pattern has a repeated field: {path}"
            )));
        }
        fields.push((path.clone(), n < 0.0));
    }
    Ok((fields, hashed))
}

/// A key pattern field's direction as a number (negative: descending); the plugins flashdoc
/// builds (`hashed`, `2dsphere`) count as ascending.
fn key_direction(key: &Document, path: &str, dir: &Bson) -> DocResult<f64> {
    Ok(match dir {
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
            1.0
        }
        Bson::String(s) if s == "2dsphere" || s == "2d" => 1.0,
        Bson::String(s) => {
            return Err(cannot_create(match s.as_str() {
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
    })
}

/// The index's name: the spec's, or mongod's default for the key pattern.
fn index_name(spec: &Document, key: &Document) -> DocResult<String> {
    let name = match spec.get("name") {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        Some(Bson::String(_)) => return Err(cannot_create("The index name cannot be empty")),
        Some(_) => return Err(DocError::type_mismatch("The field 'name' must be a string")),
        None => default_name(key),
    };
    if name.contains('\0') {
        return Err(cannot_create("The index name cannot contain null bytes"));
    }
    Ok(name)
}

/// A spec's options, each checked alone, and the spec as listIndexes will show it (`out`).
struct SpecOptions<'a> {
    unique: bool,
    sparse: bool,
    hidden: bool,
    expire_after: Option<i64>,
    collation: Option<Arc<Collation>>,
    partial: Option<PartialFilter>,
    /// A text index's `weights`, `default_language`, `language_override`,
    /// `textIndexVersion`.
    text_opts: [Option<&'a Bson>; 4],
    wildcard_projection: Option<&'a Document>,
    /// A 2d index's `min`, `max`, `bits`.
    flat_opts: [Option<&'a Bson>; 3],
    /// The key pattern the catalog stores (a text index's names `_fts`, `_ftsx`).
    stored_key: Document,
    out: Document,
}

impl<'a> SpecOptions<'a> {
    fn parse(
        spec: &'a Document,
        origin: SpecOrigin,
        pattern: &KeyPattern,
        name: &str,
    ) -> DocResult<SpecOptions<'a>> {
        let stored_key = if pattern.is_text() {
            text_stored_key(&pattern.fields)
        } else {
            pattern.key.clone()
        };
        let mut opts = SpecOptions {
            unique: false,
            sparse: false,
            hidden: false,
            expire_after: None,
            collation: None,
            partial: None,
            text_opts: [None; 4],
            wildcard_projection: None,
            flat_opts: [None; 3],
            out: doc! {"v": 2, "key": stored_key.clone(), "name": name},
            stored_key,
        };
        for (k, v) in spec {
            opts.take(spec, origin, pattern, k, v)?;
        }
        Ok(opts)
    }

    /// The options of how an index is built. `background`: every build holds writers off;
    /// mongod 4.2+ also ignores it, and lists it as given. `dropDups`: a unique build never
    /// drops duplicates (it fails with DuplicateKey), which is what `false` asks; mongod
    /// removed `dropDups: true` in 3.0.
    fn take_build_option(&mut self, k: &str, v: &Bson) -> DocResult<()> {
        match (k, v) {
            (
                "background",
                Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_),
            ) => {
                self.out.insert(k, v.clone());
                Ok(())
            }
            ("background", other) => Err(DocError::type_mismatch(format!(
                "The field 'background' must be a bool or a number, not {}",
                query::compare::type_name(other)
            ))),
            ("dropDups", Bson::Boolean(false)) => Ok(()),
            _ => Err(DocError::with_code(
                238,
                "NotImplemented",
                "index option 'dropDups: true' is not supported (MongoDB removed it in 3.0)",
            )),
        }
    }

    /// One option of the spec, checked and recorded.
    fn take(
        &mut self,
        spec: &Document,
        origin: SpecOrigin,
        pattern: &KeyPattern,
        k: &str,
        v: &'a Bson,
    ) -> DocResult<()> {
        match k {
            "weights" | "default_language" | "language_override" | "textIndexVersion"
                if pattern.is_text() =>
            {
                let i = ["weights", "default_language", "language_override"]
                    .iter()
                    .position(|x| *x == k)
                    .unwrap_or(3);
                self.text_opts[i] = Some(v);
            }
            "key" | "name" | "ns" => {}
            "background" | "dropDups" => self.take_build_option(k, v)?,
            "2dsphereIndexVersion" if pattern.geo => geo::check_version(v)?,
            "min" | "max" | "bits" if pattern.flat => {
                let i = ["min", "max", "bits"].iter().position(|x| *x == k).unwrap_or(2);
                self.flat_opts[i] = Some(v);
                self.out.insert(k, v.clone());
            }
            "v" => match v.as_i32().or(v.as_i64().map(|x| x as i32)) {
                Some(1) | Some(2) => {}
                _ => {
                    return Err(cannot_create(format!(
                        "Invalid index specification {spec}; index version must be 1 or 2"
                    )))
                }
            },
            "unique" | "sparse" | "hidden" => self.take_flag(k, v)?,
            "expireAfterSeconds" => {
                let secs = ttl_seconds(v, pattern.fields.len())?;
                self.expire_after = Some(secs as i64);
                self.out.insert(k, Bson::Int32(secs as i32));
            }
            "wildcardProjection" => {
                let p = wildcard_projection(v, pattern.wildcard_root())?;
                self.wildcard_projection = Some(p);
                self.out.insert(k, p.clone());
            }
            "partialFilterExpression" => {
                let p = PartialFilter::parse(v)?;
                self.out.insert(k, p.filter.clone());
                self.partial = Some(p);
            }
            "collation" => self.take_collation(v, origin)?,
            _ => {
                return Err(DocError::with_code(
                    197,
                    "InvalidIndexSpecificationOption",
                    format!("The field '{k}' is not valid for an index specification. Specification: {spec}"),
                ))
            }
        }
        Ok(())
    }

    fn take_flag(&mut self, k: &str, v: &Bson) -> DocResult<()> {
        let b = bool_value(v)
            .ok_or_else(|| DocError::type_mismatch(format!("The field '{k}' must be a boolean")))?;
        match k {
            "unique" => self.unique = b,
            "sparse" => self.sparse = b,
            _ => self.hidden = b,
        }
        if b {
            self.out.insert(k, true);
        }
        Ok(())
    }

    fn take_collation(&mut self, v: &Bson, origin: SpecOrigin) -> DocResult<()> {
        let Bson::Document(c) = v else {
            return Err(DocError::type_mismatch(
                "The field 'collation' must be an object",
            ));
        };
        self.collation = Collation::parse_from(c, origin)?;
        if let Some(coll) = &self.collation {
            self.out.insert("collation", coll.spec().clone());
        }
        Ok(())
    }
}

/// `expireAfterSeconds`: a number of seconds in [0, i32::MAX] on a single-field index.
fn ttl_seconds(v: &Bson, field_count: usize) -> DocResult<f64> {
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
    if field_count != 1 {
        return Err(cannot_create(
            "TTL indexes are single-field indexes, compound indexes do not support TTL",
        ));
    }
    Ok(secs)
}

/// `wildcardProjection`: an object, on an `$**` index only.
fn wildcard_projection<'a>(v: &'a Bson, root: Option<&str>) -> DocResult<&'a Document> {
    if root != Some("") {
        return Err(DocError::failed_to_parse(
            "The field 'wildcardProjection' is only allowed in an '$**' index",
        ));
    }
    let Bson::Document(p) = v else {
        return Err(DocError::type_mismatch(
            "The field 'wildcardProjection' must be a non-empty object",
        ));
    };
    Ok(p)
}

/// A text index's kind: its text spec from the options, which must name a text field and
/// ask for neither uniqueness nor a collation.
fn text_kind(tp: &TextKeyPattern, opts: &mut SpecOptions) -> DocResult<IndexKind> {
    let [w, dl, lo, ver] = opts.text_opts;
    let text = TextSpec::parse(&tp.text, w, dl, lo, ver)?;
    if text.weights.is_empty() && !text.wildcard {
        return Err(cannot_create("a text index needs at least one text field"));
    }
    if opts.unique {
        return Err(cannot_create(
            "unique text indexes are not supported by flashdoc",
        ));
    }
    if opts.collation.is_some() {
        return Err(cannot_create(
            "Index type 'text' does not support collation (flashdoc indexes text under the simple collation)",
        ));
    }
    opts.out.extend(text.spec_fields());
    Ok(IndexKind::Text(Arc::new(text)))
}

/// A wildcard index's kind: neither unique, sparse nor TTL, its regular fields checked
/// against its projection.
fn wildcard_kind(w: &WildcardKeyPattern, opts: &SpecOptions) -> DocResult<IndexKind> {
    for (opt, on) in [("unique", opts.unique), ("sparse", opts.sparse)] {
        if on {
            return Err(cannot_create(format!(
                "Index type 'wildcard' does not support the {opt} option"
            )));
        }
    }
    if opts.expire_after.is_some() {
        return Err(cannot_create(
            "Index type 'wildcard' does not support the expireAfterSeconds option",
        ));
    }
    let regular: Vec<&str> = w
        .before
        .iter()
        .chain(&w.after)
        .map(|f| f.0.as_str())
        .collect();
    if !regular.is_empty() {
        check_compound_wildcard(&w.root, &regular, opts.wildcard_projection)?;
    }
    Ok(IndexKind::Wildcard(Arc::new(WildcardSpec::new(
        w.root.clone(),
        opts.wildcard_projection,
    )?)))
}

/// The rules across options: sparse and partial exclude each other; a hashed index is
/// neither unique nor collated.
fn check_option_mix(pattern: &KeyPattern, opts: &SpecOptions) -> DocResult<()> {
    if opts.sparse && opts.partial.is_some() {
        return Err(cannot_create(
            "cannot mix \"partialFilterExpression\" and \"sparse\" options",
        ));
    }
    if pattern.hashed && opts.unique {
        return Err(DocError::with_code(
            16764,
            "Location16764",
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ));
    }
    if pattern.hashed && opts.collation.is_some() {
        // The hash is of the value's bytes; equality under a collation would miss keys.
        return Err(cannot_create(
            "a hashed index with a collation is not supported by flashdoc",
        ));
    }
    Ok(())
}

/// The `_id` index a spec `{key: {_id: 1}, name: "_id_"}` names, which takes no options but
/// its collation.
fn id_index_from(opts: SpecOptions) -> DocResult<IndexDef> {
    if opts.unique
        || opts.sparse
        || opts.hidden
        || opts.expire_after.is_some()
        || opts.partial.is_some()
    {
        return Err(DocError::with_code(
            197,
            "InvalidIndexSpecificationOption",
            "The fields 'unique', 'sparse', 'hidden', 'expireAfterSeconds' and 'partialFilterExpression' are not valid for an _id index specification",
        ));
    }
    Ok(IndexDef::id_index(opts.collation))
}

impl WildcardSpec {
    pub(super) fn new(root: String, projection: Option<&Document>) -> DocResult<WildcardSpec> {
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
