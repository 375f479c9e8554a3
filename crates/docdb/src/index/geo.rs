//! A 2dsphere index's spec checks and keys: S2-style cell ids (`query::geo::cell`); a point
//! is its leaf cell (level 30, ~1 cm), a line or polygon the ≤ [`DOC_CELLS`] cells covering
//! its bounding cap. Plans and the `$near` scan are `crate::geo_index`'s.

use super::keys::{check_parallel_arrays, combine_keys, field_values, DocKeys};
use super::spec::IndexDef;
use crate::keystring;
use bson::{Bson, Document};
use query::error::{DocError, DocResult};
use query::geo::cell::{self, CellId};
use query::geo::stored_shapes;

/// `2dsphereIndexVersion` of the indexes flashdoc builds (mongod 7/8's).
pub const INDEX_VERSION: i32 = 3;

/// Cells per indexed line or polygon.
const DOC_CELLS: usize = 8;

/// Keys one document may give a compound 2dsphere index beyond its largest field's own count:
/// the combinations of several multi-valued fields would otherwise grow without bound.
const MAX_COMBINED_KEYS: usize = 100_000;

/// Whether a key pattern is a 2dsphere one: one or more `"2dsphere"` fields, the others
/// ordered (`{loc: "2dsphere", category: 1}`; the index parser checks those).
pub fn is_2dsphere_key(key: &Document) -> bool {
    key.values()
        .any(|v| matches!(v, Bson::String(s) if s == "2dsphere"))
}

pub fn check_version(v: &Bson) -> DocResult<()> {
    match query::compare::Num::of(v).map(|n| n.as_f64()) {
        Some(x) if x == 2.0 || x == 3.0 => Ok(()),
        _ => Err(DocError::with_code(
            67,
            "CannotCreateIndex",
            format!("unsupported geo index version {{ 2dsphereIndexVersion : {v} }}, only versions: [2,3] are supported (flashdoc builds 3)"),
        )),
    }
}

pub fn check_options(unique: bool, ttl: Option<i64>, collation: bool) -> DocResult<()> {
    let refuse = |what: &str| {
        Err(DocError::with_code(
            67,
            "CannotCreateIndex",
            format!("Index type '2dsphere' does not support {what} in flashdoc"),
        ))
    };
    if unique {
        return refuse("the unique option");
    }
    if ttl.is_some() {
        return refuse("expireAfterSeconds");
    }
    if collation {
        return refuse("a collation (its keys are cells, not strings)");
    }
    Ok(())
}

/// The index key of a cell id: an Int64 ordered as the unsigned id.
pub(crate) fn cell_value(c: u64) -> Bson {
    Bson::Int64((c ^ (1 << 63)) as i64)
}

pub(crate) fn cell_key(c: u64) -> Vec<u8> {
    keystring::encode_one(&cell_value(c), false)
}

/// A document's keys (`2dsphereIndexVersion` 3): per geo field the cells of every geometry
/// there (null when the field is missing or null; anything else that is not a geometry is
/// mongod's 16755), per ordered field its values (one array among them at most, 171), and one
/// key per combination. A document with no geometry in any geo field has none (sparse on the
/// geo fields only).
pub fn doc_keys(def: &IndexDef, doc: &Document) -> DocResult<DocKeys> {
    let mut per_field: Vec<Vec<Bson>> = Vec::with_capacity(def.fields.len());
    let mut array_fields: Vec<&str> = Vec::new();
    let mut any_geo = false;
    let mut multikey = false;
    for (path, _) in &def.fields {
        if def.is_geo_field(path) {
            let cells = geo_cells(doc, path)?;
            any_geo |= !cells.is_empty();
            multikey |= cells.len() > 1;
            per_field.push(if cells.is_empty() {
                vec![Bson::Null]
            } else {
                cells.iter().map(|c| cell_value(c.0)).collect()
            });
        } else {
            let (vals, arrays, _) = field_values(doc, path);
            if arrays {
                array_fields.push(path);
            }
            per_field.push(vals);
        }
    }
    if !any_geo {
        return Ok(DocKeys {
            keys: Vec::new(),
            multikey: false,
        });
    }
    check_parallel_arrays(&array_fields)?;
    let combined = per_field
        .iter()
        .fold(1usize, |n, v| n.saturating_mul(v.len()));
    let largest = per_field.iter().map(Vec::len).max().unwrap_or(0);
    if combined > largest.max(MAX_COMBINED_KEYS) {
        return Err(DocError::with_code(
            201,
            "CannotBuildIndexKeys",
            format!("Maximum number of generated keys exceeded: {combined} keys for index {} (at most {MAX_COMBINED_KEYS} combinations of its fields' values)", def.name),
        ));
    }
    Ok(DocKeys {
        keys: combine_keys(&per_field, &def.descending()),
        multikey: multikey || !array_fields.is_empty(),
    })
}

/// The cells of every geometry at `path` (sorted, distinct).
fn geo_cells(doc: &Document, path: &str) -> DocResult<Vec<CellId>> {
    let mut cells: Vec<CellId> = Vec::new();
    for r in query::path::traverse_path(doc, path) {
        let Some(v) = r.value else { continue };
        if matches!(v, Bson::Null | Bson::Undefined) {
            continue;
        }
        let shapes = stored_shapes(v).map_err(|e| {
            DocError::with_code(
                16755,
                "Location16755",
                format!("Can't extract geo keys: {doc}  {e}"),
            )
        })?;
        for s in shapes {
            match s {
                query::geo::shape::Shape::Point(p) => cells.push(CellId::from_point(p)),
                other => cells.extend(cell::cover(&other.bound(), DOC_CELLS, cell::MAX_LEVEL)),
            }
        }
    }
    cells.sort();
    cells.dedup();
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn compound_keys() {
        let def =
            IndexDef::parse(&doc! {"key": {"cat": 1, "loc": "2dsphere", "tags": -1}}).unwrap();
        assert_eq!(def.geo_paths().collect::<Vec<_>>(), vec!["loc"]);
        let point = doc! {"type": "Point", "coordinates": [1.0, 2.0]};
        let k = doc_keys(
            &def,
            &doc! {"cat": "a", "loc": point.clone(), "tags": [1, 2]},
        )
        .unwrap();
        assert_eq!(k.keys.len(), 2);
        assert!(k.multikey);
        let cell = cell_value(CellId::from_point(query::geo::sphere::V3::from_lng_lat(1.0, 2.0)).0);
        for key in &k.keys {
            assert_eq!(key.values[0], Bson::String("a".into()));
            assert_eq!(key.values[1], cell);
        }
        // Missing ordered fields are null; no geometry, no keys (version 3: sparse on the geo
        // field only); two arrays among the ordered fields are 171.
        let k = doc_keys(&def, &doc! {"loc": point.clone()}).unwrap();
        assert_eq!(k.keys[0].values, vec![Bson::Null, cell, Bson::Null]);
        assert!(doc_keys(&def, &doc! {"cat": "a"}).unwrap().keys.is_empty());
        let e = doc_keys(&def, &doc! {"cat": [1], "loc": point, "tags": [2]}).err();
        assert_eq!(e.unwrap().code, 171);
        // Two geo fields: a document with one of them is indexed, the other null.
        let def = IndexDef::parse(&doc! {"key": {"a": "2dsphere", "b": "2dsphere"}}).unwrap();
        let k = doc_keys(&def, &doc! {"b": [3.0, 4.0]}).unwrap();
        assert_eq!(k.keys.len(), 1);
        assert_eq!(k.keys[0].values[0], Bson::Null);
        // The combinations of two multi-valued fields are bounded (201), one field's own
        // values are not.
        let many = |n: usize| -> Vec<Bson> {
            (0..n)
                .map(|i| Bson::Array(vec![(i as f64 / 100.0).into(), (i as f64 / 200.0).into()]))
                .collect()
        };
        let e = doc_keys(&def, &doc! {"a": many(400), "b": many(400)}).err();
        assert_eq!(e.unwrap().code, 201);
        assert_eq!(
            doc_keys(&def, &doc! {"a": many(400)}).unwrap().keys.len(),
            400
        );
    }
}
