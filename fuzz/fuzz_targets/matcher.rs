//! The query matcher: `Matcher::new(filter)` then `matches`/`matches_with_position` on a
//! document, the upsert seed built from the same filter, and a find projection.
//!
//! Input: raw BSON documents back to back: the filter, the document (when missing or invalid
//! the filter is matched against itself), and optionally a projection. Documents pass the
//! server's own check first (200 levels, UTF-8), as over the wire.
//!
//! Deep-structure mode (first byte `DEEP`): a depth (u16), a shape byte and a kind byte build
//! a filter nested far past the limits — `$and`, `$or`, `$nor`, `$elemMatch`, `$not`,
//! `$expr`, embedded equality, or one path of thousands of components — matched against a
//! document nested as deep, and projected by that long path.
#![no_main]

use bson::{doc, Bson, Document};
use query::matcher::Matcher;
use query::projection::Projection;
use flashdoc_fuzz::{as_server_sees, long_path, nest, take_doc, take_u16, take_u8, DEEP};
use libfuzzer_sys::fuzz_target;

fn deep_filter(depth: usize, kind: u8, shape: u8) -> Document {
    let leaf = doc! {"a": {"$gt": 1}};
    let mut f = leaf.clone();
    match kind % 8 {
        0..=2 => {
            let op = ["$and", "$or", "$nor"][(kind % 8) as usize];
            for _ in 0..depth {
                f = doc! {op: [f]};
            }
        }
        3 => {
            let mut v = Bson::Document(doc! {"$gt": 1});
            for _ in 0..depth {
                v = Bson::Document(doc! {"$elemMatch": {"a": v}});
            }
            f = doc! {"a": v};
        }
        4 => {
            let mut v = Bson::Document(doc! {"$gt": 1});
            for _ in 0..depth {
                v = Bson::Document(doc! {"$not": v});
            }
            f = doc! {"a": v};
        }
        5 => {
            let mut e = Bson::String("$a".into());
            for _ in 0..depth {
                e = Bson::Document(doc! {"$not": [e]});
            }
            f = doc! {"$expr": e};
        }
        6 => f = doc! {"a": nest(depth, shape, Bson::Int32(1))},
        _ => f = doc! {long_path(depth * 25, shape): 1},
    }
    f
}

fn check(filter: &Document, doc: &Document, projection: Option<&Document>) {
    let _ = query::update::upsert_seed(filter);
    if let Some(p) = projection {
        if let Ok(p) = Projection::parse(p) {
            let _ = p.apply_with_position(doc, Some(0));
        }
    }
    let Ok(m) = Matcher::new(filter) else {
        return;
    };
    let a = m.matches(doc);
    let (b, pos) = m.matches_with_position(doc);
    assert_eq!(a, b, "matches and matches_with_position disagree");
    assert!(a || pos.is_none());
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    if data.first() == Some(&DEEP) {
        take_u8(&mut data);
        let depth = (take_u16(&mut data) % 600) as usize;
        let (kind, shape) = (take_u8(&mut data), take_u8(&mut data));
        let filter = deep_filter(depth, kind, shape);
        let mut target = Document::new();
        target.insert("a", nest(depth, shape.rotate_left(1), Bson::Int32(2)));
        let projection = doc! {long_path(depth * 25, shape): 1};
        // The server would refuse what is too deep before any of this runs.
        let (Some(f), Some(t), Some(p)) = (
            as_server_sees(&filter),
            as_server_sees(&target),
            as_server_sees(&projection),
        ) else {
            return;
        };
        check(&f, &t, Some(&p));
        return;
    }
    let Some(filter) = take_doc(&mut data) else {
        return;
    };
    let doc = take_doc(&mut data).unwrap_or_else(|| filter.clone());
    let projection = take_doc(&mut data);
    check(&filter, &doc, projection.as_ref());
});
