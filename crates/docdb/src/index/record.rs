//! The stored forms under every table of a collection: a RecordId's 8 bytes, a document's
//! BSON, and an index entry's key and value (see the module comment of `index`).

use query::error::{DocError, DocResult};

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

pub use crate::doc_codec::{decode_doc, encode_doc};
