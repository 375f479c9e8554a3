//! The update applier: `Update::parse(update, arrayFilters)` then `apply(doc, inserting)`.
//!
//! Input: a flags byte, then raw BSON documents back to back: the update, the target
//! document, and optionally a document whose document values are the array filters.
//! Flags: bit 0 `inserting`; bit 1 a pipeline update (the update document's values are the
//! stages); bit 2 pass the array filters; bits 3.. the matched position for `$` (0 = none).
#![no_main]

use bson::{Bson, Document};
use docdb::update::Update;
use flashdoc_fuzz::{take_doc, take_u8};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let flags = take_u8(&mut data);
    let Some(u) = take_doc(&mut data) else {
        return;
    };
    let mut doc = take_doc(&mut data).unwrap_or_default();
    let filters: Option<Vec<Document>> = if flags & 4 != 0 {
        Some(
            take_doc(&mut data)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(_, v)| match v {
                    Bson::Document(d) => Some(d),
                    _ => None,
                })
                .collect(),
        )
    } else {
        None
    };
    let spec = if flags & 2 != 0 {
        Bson::Array(u.into_iter().map(|(_, v)| v).collect())
    } else {
        Bson::Document(u)
    };
    let Ok(update) = Update::parse(&spec, filters.as_deref()) else {
        return;
    };
    let matched = match flags >> 3 {
        0 => None,
        n => Some(n as usize - 1),
    };
    // Callers apply to a copy, so a failed update may leave `doc` half-modified; only
    // panics matter here.
    let _ = update.apply_with_position(&mut doc, flags & 1 != 0, matched);
});
