//! A document's keys for an index of any kind: ordered and hashed keys here, the other kinds'
//! in their own files.

use super::keys::{check_parallel_arrays, combine_keys, field_values, DocKeys, IndexKey};
use super::spec::{IndexDef, IndexKind};
use super::{geo, geo2d, text, wildcard};
use crate::keystring;
use bson::{Bson, Document};
use query::collation;
use query::error::{DocError, DocResult};
use query::hash;

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
        IndexKind::Text(spec) => return text::text_keys(def, spec, doc),
        IndexKind::Wildcard(spec) => return wildcard::wildcard_keys(def, spec, doc),
        IndexKind::Geo2dSphere => return geo::doc_keys(def, doc),
        IndexKind::Geo2d(spec) => return geo2d::doc_keys(def, spec, doc),
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
