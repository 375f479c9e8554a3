//! The 2dsphere index: keys, plans and the `$near` scan.
//!
//! Keys are S2-style cell ids (`query::geo::cell`): a point is its leaf cell (level 30, ~1 cm),
//! a line or polygon the ≤ [`DOC_CELLS`] cells covering its bounding cap. A query region is
//! covered the same way; a document can intersect it only if one of its cells is a
//! descendant of a covering cell (the cell's id range) or an ancestor of one (point lookups):
//! in a quadtree two cells that share a point nest. So the scan is a superset and the matcher
//! re-checks every fetched document with the exact spherical predicate — results equal a
//! collection scan's (property-tested in `tests/geo_index.rs`).
//!
//! A compound 2dsphere index (`{category: 1, loc: "2dsphere"}`) puts the other fields' values
//! around the cell in each key; a scan is bounded by the cells under the equalities the query
//! gives the fields before the geo field.
//!
//! `$near` grows a cap around the point (×4 per round from [`NEAR_START`] radians up to
//! `$maxDistance`): each round scans the cap's covering, fetches documents not seen before,
//! and releases, in distance order, every fetched document no farther than the cap's
//! radius — a document nearer than that has a point in the cap, so none can come later.
#![allow(clippy::result_large_err)]

use crate::collection::{decode_doc, Index};
use crate::index::{self, DocKeys, IndexDef, RecordId};
use crate::keystring;
use crate::planner::{Access, Plan, Range};
use crate::scope::OwnershipFilter;
use crate::storage_error;
use bson::{doc, Bson, Document};
use engine::{Direction, KvEngine, Snapshot, TableId};
use query::error::{DocError, DocResult};
use query::geo::cell::{self, CellId};
use query::geo::sphere::Cap;
use query::geo::{stored_shapes, NearQuery};
use query::interrupt::Interrupt;
use query::matcher::Matcher;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `2dsphereIndexVersion` of the indexes flashdoc builds (mongod 7/8's).
pub const INDEX_VERSION: i32 = 3;
/// Cells per indexed line or polygon.
const DOC_CELLS: usize = 8;
/// Cells per query covering.
const QUERY_CELLS: usize = 20;
/// Keys one document may give a compound 2dsphere index beyond its largest field's own count:
/// the combinations of several multi-valued fields would otherwise grow without bound.
const MAX_COMBINED_KEYS: usize = 100_000;
/// The first `$near` radius: about 640 m.
const NEAR_START: f64 = 1e-4;

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
fn cell_value(c: u64) -> Bson {
    Bson::Int64((c ^ (1 << 63)) as i64)
}

fn cell_key(c: u64) -> Vec<u8> {
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
            let (vals, arrays, _) = index::field_values(doc, path);
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
    index::check_parallel_arrays(&array_fields)?;
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
        keys: index::combine_keys(&per_field, &def.descending()),
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

/// Byte ranges of the index for a cap (see the module comment) under each key prefix (the
/// encoded equalities on the fields before the geo field; one empty prefix for a geo field
/// that leads the key), and the cells' explain rendering. The fields after the geo field are
/// unbounded.
fn cap_ranges(cap: &Cap, prefixes: &[Vec<u8>]) -> (Vec<Range>, Vec<Bson>) {
    let covering = cell::cover(cap, QUERY_CELLS, cell::MAX_LEVEL);
    let cells = cell::query_ranges(&covering);
    let mut ranges = Vec::with_capacity(prefixes.len() * cells.len());
    for prefix in prefixes {
        for &(lo, hi) in &cells {
            let with = |c: u64| {
                let mut k = prefix.clone();
                k.extend_from_slice(&cell_key(c));
                k
            };
            let end = match keystring::prefix_successor(&with(hi)) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            };
            ranges.push((Bound::Included(with(lo)), end));
        }
    }
    ranges.sort_by(crate::planner::range_start_cmp);
    let shown = cells
        .iter()
        .map(|(lo, hi)| Bson::String(format!("[{lo}, {hi}]")))
        .collect();
    (ranges, shown)
}

/// How a 2dsphere index can bound a scan on its geo field `path`: the key prefixes of the
/// filter's equalities on the fields before it, with their explain bounds; None when one of
/// them has no equality (or `$in`) in the filter.
fn geo_prefixes(index: &Index, path: &str, filter: &Document) -> Option<(Vec<Vec<u8>>, Document)> {
    let at = index.def.fields.iter().position(|f| f.0 == path)?;
    crate::planner::point_prefixes(filter, &index.def.fields[..at])
}

/// The 2dsphere indexes with a geo field `path`.
fn indexes_on<'a>(
    indexes: &'a [Arc<Index>],
    path: &'a str,
) -> impl Iterator<Item = &'a Arc<Index>> + 'a {
    indexes.iter().filter(move |i| i.def.is_geo_field(path))
}

/// A plan for the filter's `$geoWithin`/`$geoIntersects` over a 2dsphere index with equality
/// on the fields before the geo field (the hinted one, if `hint` names a 2dsphere index), or
/// None.
pub fn plan_within(
    indexes: &[Arc<Index>],
    filter: &Matcher,
    filter_doc: &Document,
    hint: Option<&Bson>,
) -> Option<Plan> {
    for (path, g) in filter.geo_conjuncts() {
        for index in indexes_on(indexes, path) {
            if let Some(h) = hint {
                let named = match h {
                    Bson::String(n) => &index.def.name == n,
                    Bson::Document(k) => &index.def.key == k,
                    _ => false,
                };
                if !named {
                    continue;
                }
            }
            let Some((prefixes, mut bounds)) = geo_prefixes(index, path, filter_doc) else {
                continue;
            };
            let cap = g
                .bound()
                .expect("geo_conjuncts returns indexable predicates");
            let (ranges, shown) = cap_ranges(&cap, &prefixes);
            bounds.insert(path, shown);
            return Some(Plan::forward_ixscan(index, ranges, bounds));
        }
    }
    None
}

/// The plan of a `$near`/`$nearSphere`: a 2dsphere index on its field, else mongod's 291. An
/// index whose fields before the geo field all have equalities in the filter grows its cap
/// under those prefixes; otherwise (or under a non-simple query collation, which the index's
/// string keys do not follow) the scan reads the whole index once and orders what it fetched.
pub fn plan_near(
    indexes: &[Arc<Index>],
    path: &str,
    near: &NearQuery,
    filter: &Document,
) -> DocResult<Plan> {
    let simple = query::collation::current().is_none();
    let candidates: Vec<&Arc<Index>> = if near.flat {
        Vec::new() // a flat $near needs a 2d index, which flashdoc does not build
    } else {
        indexes_on(indexes, path).collect()
    };
    let bounded = candidates.iter().find_map(|i| {
        let at = i.def.fields.iter().position(|f| f.0 == path)?;
        if at > 0 && !simple {
            return None;
        }
        geo_prefixes(i, path, filter).map(|(p, _)| (*i, Some(Arc::new(p))))
    });
    let Some((index, prefixes)) = bounded.or_else(|| candidates.first().map(|i| (*i, None))) else {
        return Err(DocError::with_code(
            291,
            "NoQueryExecutionPlans",
            "error processing query: planner returned error :: caused by :: unable to find index for $geoNear query",
        ));
    };
    Ok(Plan {
        access: Access::GeoNear {
            index: index.clone(),
            path: path.to_string(),
            near: Arc::new(near.clone()),
            prefixes,
        },
        reverse: false,
        sort_provided: false,
    })
}

/// explain's stage for a near plan.
pub fn explain_near(index: &Index, filter: &Document) -> Document {
    doc! {
        "stage": "GEO_NEAR_2DSPHERE",
        "keyPattern": index.def.key.clone(),
        "indexName": index.def.name.clone(),
        "indexVersion": 2,
        "filter": filter.clone(),
    }
}

/// The angle from the query point to the nearest geometry at `path`.
pub fn doc_distance(doc: &Document, path: &str, near: &NearQuery) -> Option<f64> {
    query::path::traverse_path(doc, path)
        .into_iter()
        .filter_map(|r| r.value.and_then(|v| near.distance(v)))
        .reduce(f64::min)
}

/// A fetched document waiting for the cap to grow past its distance.
struct Pending {
    dist: f64,
    rid: RecordId,
    doc: Document,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == CmpOrdering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    /// Reversed (a min-heap by distance, then RecordId).
    fn cmp(&self, o: &Self) -> CmpOrdering {
        o.dist.total_cmp(&self.dist).then(o.rid.cmp(&self.rid))
    }
}

/// The `$near` scan: documents in increasing distance with their distance (radians).
pub struct NearScan {
    pub engine: Arc<dyn KvEngine>,
    /// Every round's entries and documents are read in this one snapshot.
    snap: Snapshot,
    pub table: TableId,
    pub index: Arc<Index>,
    pub path: String,
    pub near: Arc<NearQuery>,
    /// The key prefixes each cap's cells are scanned under; None: no equality bounds the
    /// fields before the geo field, so one round reads the whole index.
    pub prefixes: Option<Arc<Vec<Vec<u8>>>>,
    pub filter: Option<Arc<Matcher>>,
    pub ownership: Option<OwnershipFilter>,
    pub stats: Arc<crate::cursor::ExecStats>,
    pub interrupt: Interrupt,
    radius: f64,
    done: bool,
    seen: HashSet<RecordId>,
    pending: BinaryHeap<Pending>,
    ready: VecDeque<(RecordId, Document, f64)>,
}

impl NearScan {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: Arc<dyn KvEngine>,
        table: TableId,
        index: Arc<Index>,
        path: String,
        near: Arc<NearQuery>,
        prefixes: Option<Arc<Vec<Vec<u8>>>>,
        filter: Option<Arc<Matcher>>,
        ownership: Option<OwnershipFilter>,
        stats: Arc<crate::cursor::ExecStats>,
        interrupt: Interrupt,
    ) -> DocResult<NearScan> {
        Ok(NearScan {
            snap: engine.snapshot().map_err(storage_error)?,
            engine,
            table,
            index,
            path,
            near,
            prefixes,
            filter,
            ownership,
            stats,
            interrupt,
            radius: 0.0,
            done: false,
            seen: HashSet::new(),
            pending: BinaryHeap::new(),
            ready: VecDeque::new(),
        })
    }

    /// One round: grow the cap, fetch its new documents, release the ones it now holds.
    fn expand(&mut self) -> DocResult<()> {
        let max = self.near.max.min(std::f64::consts::PI);
        let next = if self.prefixes.is_none() {
            max
        } else if self.radius == 0.0 {
            NEAR_START.max(self.near.min)
        } else {
            self.radius * 4.0
        };
        self.radius = next.min(max);
        let last = self.radius >= max;
        let cap = Cap {
            center: self.near.center,
            radius: self.radius,
        };
        let ranges = match &self.prefixes {
            Some(prefixes) => cap_ranges(&cap, prefixes).0,
            None => vec![(Bound::Unbounded, Bound::Unbounded)],
        };
        for (lo, hi) in ranges {
            let entries = self
                .engine
                .scan_at(&self.snap, self.index.table, lo, hi, Direction::Forward)
                .map_err(storage_error)?;
            for kv in entries {
                self.interrupt.check()?;
                self.stats.keys_examined.fetch_add(1, Ordering::Relaxed);
                let (k, v) = kv.map_err(storage_error)?;
                let rid = index::entry_rid(false, &k, &v)?;
                if !self.seen.insert(rid) {
                    continue;
                }
                self.fetch(rid)?;
            }
        }
        while self.pending.peek().is_some_and(|p| p.dist <= self.radius) {
            let p = self.pending.pop().expect("peeked");
            self.ready.push_back((p.rid, p.doc, p.dist));
        }
        if last {
            // Everything left is beyond $maxDistance (the matcher holds the bounds too).
            self.done = true;
            self.pending.clear();
        }
        Ok(())
    }

    fn fetch(&mut self, rid: RecordId) -> DocResult<()> {
        self.stats.docs_examined.fetch_add(1, Ordering::Relaxed);
        let doc = match self
            .engine
            .get_at(&self.snap, self.table, &index::rid_bytes(rid))
        {
            Ok(Some(bytes)) => decode_doc(&bytes)?,
            Ok(None) => return Ok(()), // deleted since its entry was read
            Err(e) => return Err(storage_error(e)),
        };
        let keep = self.ownership.as_ref().is_none_or(|o| o.keeps(&doc))
            && self.filter.as_ref().is_none_or(|f| f.matches(&doc));
        if !keep {
            return Ok(());
        }
        let Some(dist) = doc_distance(&doc, &self.path, &self.near) else {
            return Ok(());
        };
        if self.near.in_bounds(dist) {
            self.stats.matched.fetch_add(1, Ordering::Relaxed);
            self.pending.push(Pending { dist, rid, doc });
        }
        Ok(())
    }
}

impl Iterator for NearScan {
    type Item = DocResult<(RecordId, Document, f64)>;
    fn next(&mut self) -> Option<Self::Item> {
        // Rounds are bounded: the radius grows ×4 from 1e-4 to at most π (9 rounds; one for
        // an unbounded prefix).
        while self.ready.is_empty() && !self.done {
            if let Err(e) = self.expand() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.ready.pop_front().map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
