//! A wildcard index's keys: one per (path, value) of every leaf the index covers.

use super::keys::{single_value, DocKeys, IndexKey};
use super::spec::{IndexDef, WildcardSpec};
use crate::keystring;
use bson::{Bson, Document};
use query::error::DocResult;

/// A wildcard index's keys: `KeyString(before values, path, value, after values)` for every
/// covered leaf (array elements one by one under their array's path; an empty array as
/// undefined, an empty document as itself), deduplicated. The walk follows the document's own
/// nesting (bounded by `limits`). A document with no covered leaf has no keys, but for a
/// marker (path MinKey) under its leading regular fields' values when the index has some.
pub(super) fn wildcard_keys(
    def: &IndexDef,
    spec: &WildcardSpec,
    doc: &Document,
) -> DocResult<DocKeys> {
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
