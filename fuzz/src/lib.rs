//! Helpers shared by the fuzz targets: documents are read from the fuzz input as raw BSON and
//! checked as the server checks every document a message carries
//! (`server::wire::decode_document`: nesting, UTF-8), so every target also exercises the BSON
//! decoder and the targets see exactly what the server would let through. The deep-structure
//! generators build what a small input cannot spell out: nesting and paths far past the
//! limits.

use bson::{Bson, Document};

/// Decodes one document the way the server does.
pub fn decode_checked(raw: &[u8]) -> Option<Document> {
    server::wire::decode_document(raw).ok()
}

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
    decode_checked(raw)
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

/// Takes a little-endian u16 (0 when too little is left).
pub fn take_u16(data: &mut &[u8]) -> u16 {
    u16::from_le_bytes([take_u8(data), take_u8(data)])
}

/// Marks an input for a target's deep-structure generator.
pub const DEEP: u8 = 0xDE;

/// A dotted path of `parts` components (names from `seed`).
pub fn long_path(parts: usize, seed: u8) -> String {
    let names = ["a", "b", "0", "1", "$", "$[]", "x"];
    (0..parts.max(1))
        .map(|i| names[(i + seed as usize) % names.len()])
        .collect::<Vec<_>>()
        .join(".")
}

/// `inner` wrapped `levels` times, alternating documents and arrays by `shape`'s bits.
pub fn nest(levels: usize, shape: u8, inner: Bson) -> Bson {
    let mut v = inner;
    for i in 0..levels {
        v = if shape >> (i % 8) & 1 == 1 {
            Bson::Array(vec![v])
        } else {
            let mut d = Document::new();
            d.insert("a", v);
            Bson::Document(d)
        };
    }
    v
}

/// Encodes a generated document and lets through only what the server would decode.
pub fn as_server_sees(d: &Document) -> Option<Document> {
    let mut raw = Vec::new();
    d.to_writer(&mut raw).ok()?;
    decode_checked(&raw)
}
