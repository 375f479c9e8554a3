//! Shard key patterns: `{a: 1}`, compound `{a: 1, b: 1}`, or hashed `{a: "hashed"}`.
//!
//! A document's *routing key* is the document of its shard-key values (a missing field is
//! null), with a hashed field replaced by the 64-bit hash mongod computes for hashed indexes
//! ([`docdb::hash`]). Chunk bounds are routing keys too (`{a: MinKey}` … `{a: MaxKey}`, or
//! `NumberLong` hashes), and both are compared through their KeyString encoding, which orders
//! values exactly as MongoDB compares them.
//!
//! ## The numeric projection (for HASS's access mean)
//! HASS averages the shard-key values of accessed documents, which needs numbers. The
//! projection of a routing key's first field: a number is itself; a string is the first 8
//! bytes *after the prefix its chunk's bounds share* as a big-endian unsigned integer (zero
//! padded); an ObjectId is its first 8 bytes, a date its milliseconds; anything else has no
//! projection (not counted). Within one chunk it keeps key order. Why the chunk's prefix:
//! zero-padded ordered YCSB keys ("user0000012345") all share their first 8 bytes, so the
//! plain first-8-bytes rule collapses every key of a collection onto one number; under a
//! chunk whose bounds are "user00001" and "user00002" the bytes that vary are the ones
//! projected. For a hashed key the projection is the hash itself: accesses to a hot range of
//! values land all over the hash space, their mean sits near the middle of the chunk's hash
//! range, and HASS has nothing to work with (docs/sharding.md).

use bson::{doc, Bson, Document};
use docdb::{hash, keystring, DocError, DocResult};
use std::ops::Bound;

#[derive(Clone, Debug, PartialEq)]
pub struct ShardKey {
    /// The pattern as given (`{a: 1}` or `{a: "hashed"}`).
    pub pattern: Document,
    pub fields: Vec<String>,
    pub hashed: bool,
}

pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

impl ShardKey {
    pub fn parse(pattern: &Document) -> DocResult<ShardKey> {
        if pattern.is_empty() {
            return Err(DocError::bad_value("shard key pattern cannot be empty"));
        }
        let mut fields = Vec::new();
        let mut hashed = false;
        for (f, v) in pattern {
            if f.is_empty() || f.starts_with('$') || f.split('.').any(str::is_empty) {
                return Err(DocError::bad_value(format!(
                    "invalid shard key field '{f}'"
                )));
            }
            match v {
                Bson::String(s) if s == "hashed" => hashed = true,
                Bson::Int32(1) | Bson::Int64(1) => {}
                Bson::Double(d) if *d == 1.0 => {}
                _ => {
                    return Err(DocError::bad_value(format!(
                        "Unsupported shard key pattern {pattern}. Pattern must either be a single hashed field, or a list of ascending fields"
                    )))
                }
            }
            fields.push(f.clone());
        }
        if hashed && fields.len() > 1 {
            return Err(DocError::bad_value(format!(
                "Unsupported shard key pattern {pattern}: a hashed shard key has exactly one field"
            )));
        }
        Ok(ShardKey {
            pattern: pattern.clone(),
            fields,
            hashed,
        })
    }

    /// The index that backs the key (its key pattern is the shard key pattern).
    pub fn index_key(&self) -> Document {
        self.pattern.clone()
    }

    pub fn min_bound(&self) -> Document {
        self.fields
            .iter()
            .map(|f| (f.clone(), Bson::MinKey))
            .collect()
    }
    pub fn max_bound(&self) -> Document {
        self.fields
            .iter()
            .map(|f| (f.clone(), Bson::MaxKey))
            .collect()
    }

    /// The shard-key values of a document, `None` if a field is missing (an insert must carry
    /// the full key). Arrays are refused, as MongoDB does.
    pub fn extract(&self, doc: &Document) -> DocResult<Option<Document>> {
        let mut out = Document::new();
        for f in &self.fields {
            match lookup(doc, f)? {
                Some(v) => {
                    out.insert(f.clone(), v.clone());
                }
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// The routing key of a stored document: missing fields as null, hashed field hashed.
    pub fn routing_key_of_doc(&self, doc: &Document) -> Document {
        let mut out = Document::new();
        for f in &self.fields {
            let v = lookup(doc, f).ok().flatten().cloned().unwrap_or(Bson::Null);
            out.insert(f.clone(), v);
        }
        self.routing_key(&out)
    }

    /// Shard-key values → routing key (hashes a hashed field).
    pub fn routing_key(&self, values: &Document) -> Document {
        if !self.hashed {
            return values.clone();
        }
        let f = &self.fields[0];
        let v = values.get(f).cloned().unwrap_or(Bson::Null);
        doc! {f.clone(): Bson::Int64(hash::hash_value(&v))}
    }

    /// The KeyString of a routing key or chunk bound, in pattern order.
    pub fn encode(&self, key: &Document) -> Vec<u8> {
        let vals: Vec<&Bson> = self
            .fields
            .iter()
            .map(|f| key.get(f).unwrap_or(&Bson::Null))
            .collect();
        // Chunk bounds are binary KeyStrings; the thread's collation (a query's or a write
        // statement's, in scope while this runs from the ownership filter) must not apply.
        let _binary = query::collation::scope(None);
        keystring::encode_key(&vals, &vec![false; vals.len()])
    }

    /// Where a stored document sits in routing-key order.
    pub fn position_of_doc(&self, doc: &Document) -> Vec<u8> {
        self.encode(&self.routing_key_of_doc(doc))
    }

    /// Checks a user-given chunk bound or split point: exactly the key's fields, in order.
    pub fn check_bound(&self, key: &Document) -> DocResult<()> {
        let names: Vec<&String> = key.keys().collect();
        if names.len() != self.fields.len() || names.iter().zip(&self.fields).any(|(a, b)| *a != b)
        {
            return Err(DocError::bad_value(format!(
                "{key} is not a valid key for shard key pattern {}",
                self.pattern
            )));
        }
        for v in key.values() {
            if matches!(v, Bson::Array(_)) {
                return Err(DocError::bad_value("shard key values cannot be arrays"));
            }
            if self.hashed && !matches!(v, Bson::Int64(_) | Bson::MinKey | Bson::MaxKey) {
                return Err(DocError::bad_value(format!(
                    "{key}: bounds of a hashed shard key are NumberLong hashes"
                )));
            }
        }
        Ok(())
    }

    /// The shard-key values a filter pins by equality on every field (`{a: 5}`,
    /// `{a: {$eq: 5}}`, also inside `$and`), if it does.
    pub fn equality(&self, filter: &Document) -> Option<Document> {
        let mut out = Document::new();
        for f in &self.fields {
            out.insert(f.clone(), field_equality(filter, f)?);
        }
        Some(out)
    }

    /// The routing-key ranges a filter can match (a superset), or `None` for "anywhere".
    pub fn target_ranges(&self, filter: &Document) -> Option<Vec<KeyRange>> {
        if let Some(values) = self.equality(filter) {
            let e = self.encode(&self.routing_key(&values));
            return Some(vec![(Bound::Included(e.clone()), Bound::Included(e))]);
        }
        if self.fields.len() != 1 {
            return None;
        }
        let f = &self.fields[0];
        if let Some(list) = field_in(filter, f) {
            let mut out: Vec<KeyRange> = list
                .iter()
                .map(|v| {
                    let e = self.encode(&self.routing_key(&doc! {f.clone(): v.clone()}));
                    (Bound::Included(e.clone()), Bound::Included(e))
                })
                .collect();
            out.sort_by(|a, b| bound_bytes(&a.0).cmp(bound_bytes(&b.0)));
            return Some(out);
        }
        if self.hashed {
            return None;
        }
        let (lo, hi) = field_range(filter, f)?;
        let enc = |v: &Bson| keystring::encode_one(v, false);
        Some(vec![(
            lo.map(|v| Bound::Included(enc(&v)))
                .unwrap_or(Bound::Unbounded),
            hi.map(|v| Bound::Included(enc(&v)))
                .unwrap_or(Bound::Unbounded),
        )])
    }

    /// HASS's numeric projection of a routing key inside the chunk `[min, max)` (module docs).
    pub fn project(&self, key: &Document, min: &Document, max: &Document) -> Option<f64> {
        let f = &self.fields[0];
        let v = key.get(f)?;
        match v {
            Bson::String(s) => {
                let prefix = common_prefix(min.get(f), max.get(f));
                let rest = s.as_bytes().get(prefix..).unwrap_or(&[]);
                let mut b = [0u8; 8];
                let n = rest.len().min(8);
                b[..n].copy_from_slice(&rest[..n]);
                Some(u64::from_be_bytes(b) as f64)
            }
            Bson::ObjectId(o) => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&o.bytes()[..8]);
                Some(u64::from_be_bytes(b) as f64)
            }
            Bson::DateTime(d) => Some(d.timestamp_millis() as f64),
            other => query::compare::Num::of(other).map(|n| n.as_f64()),
        }
    }
}

fn bound_bytes(b: &Bound<Vec<u8>>) -> &[u8] {
    match b {
        Bound::Included(x) | Bound::Excluded(x) => x,
        Bound::Unbounded => &[],
    }
}

/// Bytes shared by two string bounds (0 unless both are strings).
fn common_prefix(a: Option<&Bson>, b: Option<&Bson>) -> usize {
    match (a, b) {
        (Some(Bson::String(x)), Some(Bson::String(y))) => {
            x.bytes().zip(y.bytes()).take_while(|(p, q)| p == q).count()
        }
        _ => 0,
    }
}

/// A dotted path's value; arrays on the way are refused (shard keys cannot hold arrays).
pub fn lookup<'a>(doc: &'a Document, path: &str) -> DocResult<Option<&'a Bson>> {
    let mut cur = doc;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        let Some(v) = cur.get(p) else { return Ok(None) };
        if matches!(v, Bson::Array(_)) {
            return Err(DocError::with_code(
                ARRAY_IN_SHARD_KEY,
                "ShardKeyNotFound",
                format!(
                    "Shard key cannot contain array values or array descendants (field '{path}')"
                ),
            ));
        }
        if parts.peek().is_none() {
            return Ok(Some(v));
        }
        match v {
            Bson::Document(d) => cur = d,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

pub const ARRAY_IN_SHARD_KEY: i32 = 61;

fn is_plain_value(v: &Bson) -> bool {
    match v {
        Bson::Array(_) | Bson::RegularExpression(_) => false,
        Bson::Document(d) => !d.keys().any(|k| k.starts_with('$')),
        _ => true,
    }
}

/// `field`'s equality value in a filter (top level or `$and`).
pub fn field_equality(filter: &Document, field: &str) -> Option<Bson> {
    for (k, v) in filter {
        if k == "$and" {
            for e in v.as_array()? {
                if let Some(x) = e.as_document().and_then(|d| field_equality(d, field)) {
                    return Some(x);
                }
            }
            continue;
        }
        if k != field {
            continue;
        }
        if is_plain_value(v) {
            return Some(v.clone());
        }
        if let Bson::Document(ops) = v {
            if let Some(x) = ops.get("$eq").filter(|x| is_plain_value(x)) {
                return Some(x.clone());
            }
        }
    }
    None
}

fn field_in(filter: &Document, field: &str) -> Option<Vec<Bson>> {
    match filter.get(field)? {
        Bson::Document(ops) if ops.len() == 1 => {
            let list = ops.get("$in")?.as_array()?;
            list.iter().all(is_plain_value).then(|| list.clone())
        }
        _ => None,
    }
}

/// Lower and upper values of `$gt/$gte/$lt/$lte` on `field` (inclusive; a superset).
fn field_range(filter: &Document, field: &str) -> Option<(Option<Bson>, Option<Bson>)> {
    let Bson::Document(ops) = filter.get(field)? else {
        return None;
    };
    let (mut lo, mut hi) = (None, None);
    for (op, v) in ops {
        match op.as_str() {
            "$gt" | "$gte" => lo = Some(v.clone()),
            "$lt" | "$lte" => hi = Some(v.clone()),
            _ => return None,
        }
    }
    (lo.is_some() || hi.is_some()).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_extract_and_route() {
        let k = ShardKey::parse(&doc! {"a": 1}).unwrap();
        assert_eq!(
            k.extract(&doc! {"a": 5, "b": 1}).unwrap(),
            Some(doc! {"a": 5})
        );
        assert_eq!(k.extract(&doc! {"b": 1}).unwrap(), None);
        assert!(k.extract(&doc! {"a": [1]}).is_err());
        assert!(k.encode(&doc! {"a": 4}) < k.encode(&doc! {"a": 5.5}));
        assert!(k.encode(&k.min_bound()) < k.encode(&doc! {"a": Bson::Null}));
        assert!(k.encode(&doc! {"a": "z"}) < k.encode(&k.max_bound()));
        let h = ShardKey::parse(&doc! {"a": "hashed"}).unwrap();
        assert_eq!(
            h.routing_key(&doc! {"a": 42}),
            doc! {"a": -944302157085130861i64}
        );
        assert!(ShardKey::parse(&doc! {"a": "hashed", "b": 1}).is_err());
        assert!(ShardKey::parse(&doc! {"a": -1}).is_err());
        let nested = ShardKey::parse(&doc! {"x.y": 1}).unwrap();
        assert_eq!(
            nested.routing_key_of_doc(&doc! {"x": {"y": 3}}),
            doc! {"x.y": 3}
        );
    }

    #[test]
    fn targeting_from_filters() {
        let k = ShardKey::parse(&doc! {"a": 1}).unwrap();
        assert_eq!(
            k.equality(&doc! {"a": {"$eq": 3}, "b": 1}),
            Some(doc! {"a": 3})
        );
        assert_eq!(
            k.equality(&doc! {"$and": [{"b": 2}, {"a": 7}]}),
            Some(doc! {"a": 7})
        );
        assert_eq!(k.equality(&doc! {"a": {"$gt": 3}}), None);
        let r = k.target_ranges(&doc! {"a": {"$gte": 3, "$lt": 9}}).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            k.target_ranges(&doc! {"a": {"$in": [3, 1]}}).unwrap().len(),
            2
        );
        assert!(k.target_ranges(&doc! {"b": 1}).is_none());
        let h = ShardKey::parse(&doc! {"a": "hashed"}).unwrap();
        assert!(h.target_ranges(&doc! {"a": {"$gt": 1}}).is_none());
        assert_eq!(h.target_ranges(&doc! {"a": 1}).unwrap().len(), 1);
    }

    #[test]
    fn projection_keeps_order_within_a_chunk() {
        let k = ShardKey::parse(&doc! {"_id": 1}).unwrap();
        let (min, max) = (doc! {"_id": "user00001000"}, doc! {"_id": "user00002000"});
        let p = |s: &str| k.project(&doc! {"_id": s}, &min, &max).unwrap();
        assert!(p("user00001000") < p("user00001001"));
        assert!(p("user00001001") < p("user00001999"));
        // Without shared bound prefixes: the first 8 bytes.
        let any = k
            .project(&doc! {"_id": "ab"}, &k.min_bound(), &k.max_bound())
            .unwrap();
        assert_eq!(any, u64::from_be_bytes(*b"ab\0\0\0\0\0\0") as f64);
        assert_eq!(
            k.project(&doc! {"_id": 7.5}, &k.min_bound(), &k.max_bound()),
            Some(7.5)
        );
        assert_eq!(k.project(&doc! {"_id": true}, &min, &max), None);
    }
}
