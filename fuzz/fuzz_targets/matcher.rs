//! The query matcher: `Matcher::new(filter)` then `matches`/`matches_with_position` on a
//! document, plus the upsert seed built from the same filter.
//!
//! Input: two raw BSON documents back to back, the filter and the document; when the second
//! is missing or invalid the filter is matched against itself.
#![no_main]

use docdb::matcher::Matcher;
use flashdoc_fuzz::take_doc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let Some(filter) = take_doc(&mut data) else {
        return;
    };
    let doc = take_doc(&mut data).unwrap_or_else(|| filter.clone());
    let _ = docdb::update::upsert_seed(&filter);
    let Ok(m) = Matcher::new(&filter) else {
        return;
    };
    let a = m.matches(&doc);
    let (b, pos) = m.matches_with_position(&doc);
    assert_eq!(a, b, "matches and matches_with_position disagree");
    assert!(a || pos.is_none());
});
