//! The keys a document gives an index, and the walk of its values every kind shares.

use super::spec::IndexDef;
use crate::keystring;
use bson::{Bson, Document};
use query::error::{DocError, DocResult};

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

/// The value at `path` for an ordered field of a text or compound wildcard index, which holds
/// one value per document (null when missing; an array on the path is 201).
pub(super) fn single_value(doc: &Document, path: &str, index_kind: &str) -> DocResult<Bson> {
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

/// `keyValue` of a duplicate-key error: `{field: value, ...}`.
pub fn key_value_doc(def: &IndexDef, values: &[Bson]) -> Document {
    let mut d = Document::new();
    for ((path, _), v) in def.fields.iter().zip(values) {
        d.insert(path.clone(), v.clone());
    }
    d
}
