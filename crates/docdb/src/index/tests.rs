use super::*;
use crate::keystring;
use bson::{doc, Bson, Document};

#[test]
fn keys_multikey_and_parallel() {
    let def = IndexDef::parse(&doc! {"key": {"a": 1, "b": -1}, "name": "ab"}).unwrap();
    let k = doc_keys(&def, &doc! {"a": [1, 2, 2], "b": 5}).unwrap();
    assert_eq!(k.keys.len(), 2);
    assert!(k.multikey);
    let e = doc_keys(&def, &doc! {"a": [1], "b": [2]}).err().unwrap();
    assert_eq!(e.code, 171);
    let k = doc_keys(&def, &doc! {"x": 1}).unwrap();
    assert_eq!(k.keys[0].values, vec![Bson::Null, Bson::Null]);
    let def = IndexDef::parse(&doc! {"key": {"a.b": 1}, "name": "ab"}).unwrap();
    let k = doc_keys(&def, &doc! {"a": [{"b": 1}, {"b": 3}]}).unwrap();
    assert!(k.multikey);
    assert!(k.keys.iter().any(|x| x.values == vec![Bson::Int32(3)]));
}

#[test]
fn hashed_keys() {
    let def = IndexDef::parse(&doc! {"key": {"a": "hashed"}}).unwrap();
    assert!(def.is_hashed());
    assert_eq!(def.name, "a_hashed");
    let k = doc_keys(&def, &doc! {"a": 42.5}).unwrap();
    assert_eq!(
        k.keys[0].encoded,
        keystring::encode_one(&Bson::Int64(-944302157085130861), false)
    );
    assert_eq!(k.keys[0].values, vec![Bson::Double(42.5)]);
    assert_eq!(doc_keys(&def, &doc! {"a": [1]}).err().unwrap().code, 16766);
    let code = |d: Document| IndexDef::parse(&d).err().map(|e| e.code);
    assert_eq!(
        code(doc! {"key": {"a": "hashed"}, "unique": true}),
        Some(16764)
    );
    assert_eq!(code(doc! {"key": {"a": "hashed", "b": 1}}), Some(67));
    assert_eq!(
        code(doc! {"key": {"a": "hashed"}, "collation": {"locale": "fr"}}),
        Some(67)
    );
}

#[test]
fn compound_text_keys_and_spec() {
    let def = IndexDef::parse(&doc! {"key": {"cat": 1, "body": "text", "score": -1}}).unwrap();
    assert_eq!(def.name, "cat_1_body_text_score_-1");
    assert_eq!(
        def.key,
        doc! {"cat": 1, "_fts": "text", "_ftsx": 1, "score": -1}
    );
    assert_eq!(def.regular_before(), &[("cat".to_string(), false)]);
    assert_eq!(def.regular_after(), &[("score".to_string(), true)]);
    // The stored spec parses back to the same definition.
    let again = IndexDef::parse(&def.spec).unwrap();
    assert_eq!(again.fields, def.fields);
    assert_eq!(again.kind, def.kind);
    let k = doc_keys(&def, &doc! {"cat": "a", "body": "coffee cake", "score": 3}).unwrap();
    assert_eq!(k.keys.len(), 2);
    for key in &k.keys {
        assert_eq!(key.values[0], Bson::String("a".into()));
        assert_eq!(key.values[3], Bson::Int32(3));
        let term = key.values[1].as_str().unwrap();
        assert!(key.encoded.starts_with(&text_term_prefix(
            &def,
            &[Bson::String("a".into())],
            term
        )));
    }
    // A missing ordered field is null; an array on its path is 201; no terms, no keys.
    let k = doc_keys(&def, &doc! {"body": "coffee"}).unwrap();
    assert_eq!(k.keys[0].values[0], Bson::Null);
    assert_eq!(k.keys[0].values[3], Bson::Null);
    for bad in [
        doc! {"cat": ["a"], "body": "x"},
        doc! {"cat": [], "body": "x"},
        doc! {"cat": "a", "score": [1], "body": "x"},
    ] {
        assert_eq!(doc_keys(&def, &bad).err().unwrap().code, 201);
    }
    let def = IndexDef::parse(&doc! {"key": {"c.d": 1, "b": "text"}}).unwrap();
    assert_eq!(
        doc_keys(&def, &doc! {"c": [{"d": 1}], "b": "x"})
            .err()
            .unwrap()
            .code,
        201
    );
    assert!(doc_keys(&def, &doc! {"b": "the"}).unwrap().keys.is_empty());
    let code = |d: Document| IndexDef::parse(&d).err().map(|e| e.code);
    assert_eq!(
        code(doc! {"key": {"a": "text", "b": 1, "c": "text"}}),
        Some(17389)
    );
    assert_eq!(code(doc! {"key": {"a": 2, "b": "text"}}), Some(17273));
    assert_eq!(code(doc! {"key": {"a": "2dsphere", "b": "text"}}), Some(67));
    assert_eq!(code(doc! {"key": {"a": 1, "b": "text", "a.": 1}}), Some(67));
    assert!(IndexDef::parse(&doc! {"key": {"a": 1, "$**": "text"}}).is_ok());
}

/// The error code of parsing a wildcard key pattern with a `wildcardProjection`, if any.
fn wildcard_spec_code(key: Document, wcp: Option<Document>) -> Option<i32> {
    let mut spec = doc! {"key": key};
    if let Some(p) = wcp {
        spec.insert("wildcardProjection", p);
    }
    IndexDef::parse(&spec).err().map(|e| e.code)
}

/// The specs mongod's compound_wildcard_index_validation.js accepts.
fn accepted_compound_wildcard_specs() -> Vec<(Document, Option<Document>)> {
    vec![
        (doc! {"a": 1, "b.$**": 1}, None),
        (doc! {"a.$**": 1, "b": 1}, None),
        (doc! {"a": 1, "b.$**": -1, "c": 1}, None),
        (doc! {"a": 1, "$**": 1}, Some(doc! {"a": 0})),
        (doc! {"$**": 1, "a": 1}, Some(doc! {"a": 0})),
        (
            doc! {"a": 1, "$**": -1, "b": 1},
            Some(doc! {"a": 0, "b": 0}),
        ),
        (doc! {"$**": 1, "other": 1}, Some(doc! {"_id": 0, "a": 1})),
        (
            doc! {"$**": 1, "another": 1},
            Some(doc! {"_id": 1, "a": 0, "another": 0}),
        ),
        (doc! {"$**": 1, "e": 1}, Some(doc! {"_id": 1, "e": 0})),
        (
            doc! {"$**": 1, "_id": 1, "e": 1},
            Some(doc! {"_id": 0, "a": 1}),
        ),
        (doc! {"_id": 1, "$**": 1}, Some(doc! {"_id": 0})),
        (
            doc! {"_id": 1, "a": 1, "$**": 1},
            Some(doc! {"_id": 0, "a": 0}),
        ),
        (doc! {"e": 1, "$**": 1}, Some(doc! {"_id": 1, "f": 1})),
        (
            doc! {"_id": 1, "a.b": 1, "$**": 1},
            Some(doc! {"_id": 0, "a": 0}),
        ),
        (doc! {"$**": 1, "e.b": 1}, Some(doc! {"_id": 1, "e": 0})),
    ]
}

/// The specs mongod's compound_wildcard_index_validation.js refuses, with its error codes.
fn refused_compound_wildcard_specs() -> Vec<(Document, Option<Document>, i32)> {
    vec![
        (doc! {"a": 1, "a.$**": 1}, None, 7246204),
        (doc! {"a.b.c": 1, "a.b.$**": 1}, None, 7246204),
        (
            doc! {"$**": 1, "c": 1},
            Some(doc! {"a.b": 1, "a.b.c": 1}),
            7246200,
        ),
        (doc! {"a.$**": 1, "b.$**": 1}, None, 7246201),
        (doc! {"a.$**": 1, "b": "text"}, None, 67),
        (doc! {"a.$**": 1, "b": "hashed"}, None, 67),
        (doc! {"a.$**": 1, "b": "2dsphere"}, None, 67),
        (doc! {"a": 1, "$**": 1}, None, 67),
        (doc! {"a": 1, "$**": 1}, Some(doc! {}), 9),
        (doc! {"a": 1, "$**": 1}, Some(doc! {"a": 1}), 7246208),
        (
            doc! {"a": 1, "$**": 1, "b": 1},
            Some(doc! {"a": 1, "b": 1}),
            7246208,
        ),
        (doc! {"_id": 1, "$**": 1}, Some(doc! {"_id": 1}), 7246208),
        (
            doc! {"$**": 1, "c": 1},
            Some(doc! {"_id": 0, "a": 0, "b": 1}),
            7246211,
        ),
        (
            doc! {"$**": 1, "c": 1},
            Some(doc! {"_id": 1, "a": 0, "b": 1}),
            7246211,
        ),
        (
            doc! {"$**": 1, "_id": 1, "e": 1},
            Some(doc! {"_id": 1, "e": 0}),
            7246209,
        ),
        (doc! {"a": 1, "$**": 1}, Some(doc! {"_id": 0}), 7246210),
        (
            doc! {"_id": 1, "$**": 1, "a": 1},
            Some(doc! {"_id": 0}),
            7246210,
        ),
        (
            doc! {"a": 1, "_id": 1, "$**": 1},
            Some(doc! {"a": 0}),
            7246209,
        ),
        (
            doc! {"b": 1, "$**": 1},
            Some(doc! {"_id": 0, "a": 0}),
            7246210,
        ),
        (
            doc! {"_id": 1, "a": 1, "$**": 1},
            Some(doc! {"_id": 0, "a.b": 0}),
            7246209,
        ),
        (
            doc! {"$**": 1, "e.c": 1},
            Some(doc! {"_id": 1, "e.b": 0}),
            7246210,
        ),
    ]
}

#[test]
fn compound_wildcard_specs_follow_mongod_7() {
    // The cases of mongod's compound_wildcard_index_validation.js, expectations as there.
    for (key, wcp) in accepted_compound_wildcard_specs() {
        assert_eq!(
            wildcard_spec_code(key.clone(), wcp.clone()),
            None,
            "{key} {wcp:?}"
        );
    }
    for (key, wcp, want) in refused_compound_wildcard_specs() {
        assert_eq!(
            wildcard_spec_code(key.clone(), wcp.clone()),
            Some(want),
            "{key} {wcp:?}"
        );
    }
    for opt in ["unique", "sparse"] {
        let spec = doc! {"key": {"a.$**": 1, "b": 1}, opt: true};
        assert_eq!(IndexDef::parse(&spec).err().map(|e| e.code), Some(67));
    }
}

#[test]
fn compound_wildcard_keys() {
    let def = IndexDef::parse(&doc! {
        "key": {"tenant": 1, "$**": 1, "score": -1},
        "wildcardProjection": {"tenant": 0, "score": 0},
    })
    .unwrap();
    assert_eq!(def.regular_before(), &[("tenant".to_string(), false)]);
    assert_eq!(def.regular_after(), &[("score".to_string(), true)]);
    let k = doc_keys(
        &def,
        &doc! {"tenant": "x", "a": {"b": 1, "c": [2, 3]}, "score": 5},
    )
    .unwrap();
    let values: Vec<Vec<Bson>> = k.keys.iter().map(|k| k.values.clone()).collect();
    assert_eq!(values.len(), 3, "{values:?}");
    assert!(values.contains(&vec![
        Bson::String("x".into()),
        Bson::String("a.c".into()),
        Bson::Int32(3),
        Bson::Int32(5)
    ]));
    assert!(k.multikey);
    // Regular fields hold one value each (201); a missing regular field is null; a
    // document without covered leaves has one marker key (path MinKey) under its leading
    // fields.
    assert_eq!(
        doc_keys(&def, &doc! {"tenant": ["x"], "a": 1})
            .err()
            .unwrap()
            .code,
        201
    );
    let k = doc_keys(&def, &doc! {"a": 1}).unwrap();
    assert_eq!(k.keys[0].values[0], Bson::Null);
    let k = doc_keys(&def, &doc! {"tenant": "x"}).unwrap();
    assert_eq!(
        k.keys.iter().map(|k| k.values.clone()).collect::<Vec<_>>(),
        vec![vec![
            Bson::String("x".into()),
            Bson::MinKey,
            Bson::Null,
            Bson::Null
        ]]
    );
    // Without leading regular fields there is no marker.
    let def = IndexDef::parse(&doc! {"key": {"a.$**": 1, "n": 1}}).unwrap();
    assert!(doc_keys(&def, &doc! {"n": 1}).unwrap().keys.is_empty());
}

#[test]
fn spec_errors() {
    let code = |d: Document| IndexDef::parse(&d).err().map(|e| e.code);
    assert_eq!(code(doc! {"key": {"a": 0}, "name": "x"}), Some(67));
    assert_eq!(code(doc! {"key": {}, "name": "x"}), Some(67));
    assert_eq!(code(doc! {"key": {"a": "foo"}, "name": "x"}), Some(67));
    assert_eq!(code(doc! {"name": "x"}), Some(9));
    assert_eq!(
        code(doc! {"key": {"a": 1}, "name": "x", "bogus": 1}),
        Some(197)
    );
    assert_eq!(code(doc! {"key": 5, "name": "x"}), Some(14));
    assert_eq!(
        IndexDef::parse(&doc! {"key": {"a": 1, "b": -1}})
            .unwrap()
            .name,
        "a_1_b_-1"
    );
}

#[test]
fn build_options_background_is_listed_and_drop_dups_false_is_honoured() {
    let def = IndexDef::parse(&doc! {"key": {"a": 1}, "name": "a", "background": true}).unwrap();
    assert_eq!(def.spec.get("background"), Some(&Bson::Boolean(true)));
    let def = IndexDef::parse(&doc! {"key": {"a": 1}, "name": "a"}).unwrap();
    assert!(!def.spec.contains_key("background"));
    let e = IndexDef::parse(&doc! {"key": {"a": 1}, "name": "a", "background": "x"});
    assert_eq!(e.unwrap_err().code, 14);
    let def = IndexDef::parse(&doc! {"key": {"a": 1}, "name": "a", "dropDups": false}).unwrap();
    assert!(!def.spec.contains_key("dropDups"));
    let e = IndexDef::parse(&doc! {"key": {"a": 1}, "name": "a", "dropDups": true});
    assert_eq!(e.unwrap_err().code, 238);
}
