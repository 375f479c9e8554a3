//! Index specifications and index keys.
//!
//! An index table holds one entry per (key, document): for a unique index the entry is
//! `KeyString(key) → RecordId` (so a second document with the same key finds the first);
//! otherwise `KeyString(key) ++ RecordId → ""` (duplicates sort by RecordId). RecordIds are
//! 8-byte big-endian positive i64s. A field holding an array contributes one key per element
//! (multikey; an empty array indexes as `undefined`); a missing field indexes as null; a
//! compound key may have at most one array field (CannotIndexParallelArrays, 171).
//!
//! One file per job: `record` the stored forms (RecordIds, documents, entries), `spec` what
//! an index is and `parse` how a createIndexes spec becomes one, `keys` the keys a document
//! gives and the value walk every kind shares, `extract` which kind makes them, then one file
//! per kind (`text`, `wildcard`, `geo`), and `open` an index as a collection holds it.

mod extract;
pub(crate) mod geo;
pub(crate) mod geo2d;
mod keys;
mod open;
mod parse;
mod record;
mod spec;
mod text;
mod wildcard;

pub use extract::doc_keys;
pub use keys::{key_value_doc, DocKeys, IndexKey};
pub use open::{ambiguous_key_pattern, find_index, Index};
pub use record::{decode_doc, encode_doc, entry_key, entry_rid, rid_bytes, rid_from, RecordId};
pub use spec::{default_name, IndexDef, IndexKind, WildcardSpec};
pub use text::{text_score, text_term_prefix};

#[cfg(test)]
mod tests;
