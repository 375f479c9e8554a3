//! A text index's keys: one per (prefix values, term, score, suffix values).

use super::keys::{single_value, DocKeys, IndexKey};
use super::spec::IndexDef;
use crate::keystring;
use bson::{Bson, Document};
use query::collation;
use query::error::{DocError, DocResult};
use query::text::TextSpec;

/// A text index's keys: `KeyString(prefix values, term, score, suffix values)` per term, the
/// score also as the payload. The ordered fields hold one value each: an array anywhere on
/// their path is CannotBuildIndexKeys (201), as mongod's; a missing one is null.
pub(super) fn text_keys(def: &IndexDef, spec: &TextSpec, doc: &Document) -> DocResult<DocKeys> {
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

/// A text entry's score (its payload).
pub fn text_score(value: &[u8]) -> DocResult<f64> {
    let b: [u8; 8] = value
        .try_into()
        .map_err(|_| DocError::internal_error("corrupt text index entry"))?;
    Ok(f64::from_le_bytes(b))
}
