//! The update applier: `Update::parse(update, arrayFilters)` then `apply(doc, inserting)`;
//! a result the server would store must then pass its storage check and encode.
//!
//! Input: a flags byte, then raw BSON documents back to back: the update, the target
//! document, and optionally a document whose document values are the array filters.
//! Flags: bit 0 `inserting`; bit 1 a pipeline update (the update document's values are the
//! stages); bit 2 pass the array filters; bits 3.. the matched position for `$` (0 = none).
//! Documents pass the server's own check first (200 levels, UTF-8), as over the wire.
//!
//! Deep-structure mode (first byte `DEEP`): a component count (u16), an operator byte and a
//! depth byte build an update on one path of thousands of components (`$set`, `$unset`,
//! `$push`, `$inc`, `$rename`, `$addToSet`, a pipeline `$addFields`, a pipeline `$set` of a
//! deeply nested value) applied to a document nested up to hundreds of levels.
#![no_main]

use bson::{doc, Bson, Document};
use query::update::Update;
use flashdoc_fuzz::{as_server_sees, long_path, nest, take_doc, take_u16, take_u8, DEEP};
use libfuzzer_sys::fuzz_target;

fn run(
    spec: &Bson,
    filters: Option<&[Document]>,
    doc: &mut Document,
    inserting: bool,
    pos: Option<usize>,
) {
    let Ok(update) = Update::parse(spec, filters) else {
        return;
    };
    // Callers apply to a copy, so a failed update may leave `doc` half-modified; only
    // panics matter here.
    if update.apply_with_position(doc, inserting, pos).is_ok()
        && query::limits::check_stored_depth(doc).is_ok()
    {
        let mut out = Vec::new();
        doc.to_writer(&mut out).expect("a stored document encodes");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    if data.first() == Some(&DEEP) {
        take_u8(&mut data);
        let parts = (take_u16(&mut data) % 12_000) as usize;
        let (op, depth) = (take_u8(&mut data), take_u8(&mut data) as usize * 2);
        let path = long_path(parts, op);
        let spec = match op % 8 {
            0 => Bson::Document(doc! {"$set": {path: 1}}),
            1 => Bson::Document(doc! {"$unset": {path: ""}}),
            2 => Bson::Document(doc! {"$push": {path: 1}}),
            3 => Bson::Document(doc! {"$inc": {path: 1}}),
            4 => Bson::Document(doc! {"$rename": {"a": path}}),
            5 => Bson::Document(doc! {"$addToSet": {path: {"$each": [1, 2]}}}),
            6 => Bson::Array(vec![Bson::Document(doc! {"$addFields": {path: 1}})]),
            _ => Bson::Array(vec![Bson::Document(
                doc! {"$set": {"a": {"$literal": nest(depth, op, Bson::Int32(1))}}},
            )]),
        };
        let mut target = Document::new();
        target.insert("a", nest(depth, op.rotate_left(3), Bson::Int32(0)));
        let wrapped = doc! {"u": spec};
        let (Some(w), Some(mut t)) = (as_server_sees(&wrapped), as_server_sees(&target)) else {
            return;
        };
        run(w.get("u").expect("u"), None, &mut t, false, Some(0));
        return;
    }
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
    let matched = match flags >> 3 {
        0 => None,
        n => Some(n as usize - 1),
    };
    run(&spec, filters.as_deref(), &mut doc, flags & 1 != 0, matched);
});
