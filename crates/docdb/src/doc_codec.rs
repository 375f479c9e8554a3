//! A stored document's bytes: BSON, with the errors the document layer reports. A leaf module,
//! so that every layer that stores documents (collections, indexes, the oplog) can use it
//! without naming another.

use bson::Document;
use query::error::{DocError, DocResult};

pub fn encode_doc(doc: &Document) -> DocResult<Vec<u8>> {
    let mut v = Vec::new();
    doc.to_writer(&mut v)
        .map_err(|e| DocError::bad_value(format!("cannot encode document: {e}")))?;
    Ok(v)
}

pub fn decode_doc(bytes: &[u8]) -> DocResult<Document> {
    Document::from_reader(bytes)
        .map_err(|e| DocError::internal_error(format!("corrupt stored document: {e}")))
}
