//! A 2d index's keys, as mongod's `ExpressionKeysPrivate::get2DKeys` makes them: one key per
//! legacy point of the first (2d) field, its geohash ([`Flat2dSpec::hash`]) stored as an
//! Int64 ordered as the unsigned hash, followed by each other field's value (null when
//! missing, the array of its values when it has several: a 2d index is multikey on its
//! points only). A document without a point has no key; a point outside `[min, max]` is
//! mongod's 13027 and the write fails.
//!
//! Where the points are (mongod's grammar): `loc: [x, y]` or `loc: {a: x, b: y}` is one
//! point; `loc: [[x, y], ...]` or `loc: {p: [x, y], q: {...}}` (first value not a number) is
//! several; an empty array or document is none.

use super::keys::{combine_keys, field_values, DocKeys};
use super::spec::IndexDef;
use crate::index::geo::cell_value;
use bson::{Bson, Document};
use query::error::{DocError, DocResult};
use query::geo::flat::Flat2dSpec;

pub fn doc_keys(def: &IndexDef, spec: &Flat2dSpec, doc: &Document) -> DocResult<DocKeys> {
    let (geo_path, _) = &def.fields[0];
    let points = points(doc, geo_path)?;
    if points.is_empty() {
        return Ok(DocKeys {
            keys: Vec::new(),
            multikey: false,
        });
    }
    let mut hashes = Vec::with_capacity(points.len());
    for (x, y) in &points {
        hashes.push(cell_value(spec.hash(*x, *y)?));
    }
    let mut per_field = vec![hashes];
    for (path, _) in &def.fields[1..] {
        let (mut vals, _, _) = field_values(doc, path);
        per_field.push(vec![if vals.len() == 1 {
            vals.pop().expect("one value")
        } else {
            Bson::Array(vals)
        }]);
    }
    Ok(DocKeys {
        keys: combine_keys(&per_field, &def.descending()),
        multikey: points.len() > 1,
    })
}

/// The legacy points at `path` (see the module comment).
fn points(doc: &Document, path: &str) -> DocResult<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    for r in query::path::traverse_path(doc, path) {
        let elems: Vec<&Bson> = match r.value {
            Some(Bson::Array(a)) => a.iter().collect(),
            Some(Bson::Document(d)) => d.values().collect(),
            _ => continue, // missing, or not an object: no location
        };
        let Some(first) = elems.first() else { continue };
        if is_number(first) {
            out.push(pair(&elems, doc)?);
            continue;
        }
        for e in elems {
            let inner: Vec<&Bson> = match e {
                Bson::Array(a) => a.iter().collect(),
                Bson::Document(d) => d.values().collect(),
                _ => {
                    return Err(DocError::with_code(
                        16804,
                        "Location16804",
                        "location object expected, location array not in correct format",
                    ))
                }
            };
            if !inner.is_empty() {
                out.push(pair(&inner, doc)?);
            }
        }
    }
    Ok(out)
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_)
    )
}

/// A location's first two values as a point (`GeoHashConverter::hash`'s checks).
fn pair(elems: &[&Bson], doc: &Document) -> DocResult<(f64, f64)> {
    match elems {
        [] => Err(DocError::with_code(
            13067,
            "Location13067",
            format!("geo field is empty :: caused by :: {doc}"),
        )),
        [_] => Err(DocError::with_code(
            13068,
            "Location13068",
            "geo field only has 1 element",
        )),
        [x, y, ..] => match (
            query::compare::Num::of(x).map(|n| n.as_f64()),
            query::compare::Num::of(y).map(|n| n.as_f64()),
        ) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(DocError::with_code(
                13026,
                "Location13026",
                format!("geo values must be 'legacy coordinate pairs' for 2d indexes :: caused by :: {doc}"),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn def(key: Document) -> (IndexDef, Flat2dSpec) {
        let def = IndexDef::parse(&doc! {"key": key, "min": 0, "max": 100, "bits": 10}).unwrap();
        let spec = match &def.kind {
            super::super::spec::IndexKind::Geo2d(s) => *s,
            other => panic!("{other:?}"),
        };
        (def, spec)
    }

    #[test]
    fn points_as_mongods_grammar_finds_them() {
        let (d, spec) = def(doc! {"loc": "2d"});
        let keys = |doc: Document| doc_keys(&d, &spec, &doc).map(|k| k.keys.len());
        let h = |x: f64, y: f64| cell_value(spec.hash(x, y).unwrap());
        let one = doc_keys(&d, &spec, &doc! {"loc": [1.5, 2]}).unwrap();
        assert_eq!(one.keys[0].values, vec![h(1.5, 2.0)]);
        assert!(!one.multikey);
        assert_eq!(keys(doc! {"loc": {"x": 1, "y": 2}}), Ok(1));
        assert_eq!(keys(doc! {"loc": [[1, 2], [3, 4], []]}), Ok(2));
        assert_eq!(
            keys(doc! {"loc": {"home": [1, 2], "work": {"x": 3, "y": 4}}}),
            Ok(2)
        );
        assert!(
            doc_keys(&d, &spec, &doc! {"loc": [[1, 2], [3, 4]]})
                .unwrap()
                .multikey
        );
        for empty in [
            doc! {},
            doc! {"loc": []},
            doc! {"loc": {}},
            doc! {"loc": "x"},
            doc! {"loc": null},
        ] {
            assert_eq!(keys(empty), Ok(0));
        }
        let code = |doc: Document| doc_keys(&d, &spec, &doc).err().map(|e| e.code);
        assert_eq!(code(doc! {"loc": [1]}), Some(13068));
        assert_eq!(code(doc! {"loc": [1, "a"]}), Some(13026));
        assert_eq!(code(doc! {"loc": ["a", 1]}), Some(16804));
        assert_eq!(code(doc! {"loc": [101, 5]}), Some(13027));
        assert_eq!(code(doc! {"loc": [[1, 2], [5, -1]]}), Some(13027));
    }

    #[test]
    fn compound_keys_hold_the_other_fields_whole() {
        let (d, spec) = def(doc! {"loc": "2d", "tags": 1, "cat": -1});
        let k = doc_keys(
            &d,
            &spec,
            &doc! {"loc": [[1, 2], [3, 4]], "tags": ["a", "b"]},
        )
        .unwrap();
        assert_eq!(k.keys.len(), 2);
        for key in &k.keys {
            assert_eq!(key.values[1], Bson::Array(vec!["a".into(), "b".into()]));
            assert_eq!(key.values[2], Bson::Null);
        }
        let k = doc_keys(&d, &spec, &doc! {"loc": [1, 2], "cat": 7}).unwrap();
        assert_eq!(k.keys[0].values[2], Bson::Int32(7));
    }
}
