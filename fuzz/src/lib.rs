//! Helpers shared by the fuzz targets: documents are read from the fuzz input as raw BSON,
//! so every target also exercises the BSON decoder.

use bson::{Document, RawDocumentBuf};

/// Reads one BSON document from the front of `data` (its declared length must fit in what is
/// left, so a huge declared length never allocates) and advances past it.
pub fn take_doc(data: &mut &[u8]) -> Option<Document> {
    if data.len() < 5 {
        return None;
    }
    let len = i32::from_le_bytes(data[..4].try_into().unwrap());
    if len < 5 || len as usize > data.len() {
        return None;
    }
    let (raw, rest) = data.split_at(len as usize);
    *data = rest;
    let raw = RawDocumentBuf::from_bytes(raw.to_vec()).ok()?;
    Document::try_from(raw.as_ref()).ok()
}

/// Takes one byte from the front of `data` (0 when it is empty).
pub fn take_u8(data: &mut &[u8]) -> u8 {
    match data.split_first() {
        Some((b, rest)) => {
            *data = rest;
            *b
        }
        None => 0,
    }
}
