//! The 2dsphere and 2d indexes: keys, plans and the `$near` scan.
//!
//! Keys are S2-style cell ids (`query::geo::cell`): a point is its leaf cell (level 30, ~1 cm),
//! a line or polygon the ≤ 8 cells (`crate::index::geo`) covering its bounding cap. A query region is
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
//!
//! A 2d index (`crate::index::geo2d`) keys legacy points by geohash: a flat `$geoWithin`
//! scans the hash ranges covering the shape's bounding box (`query::geo::flat`), a flat
//! `$near` grows a square around the point the same way (×4 per round from 1/1024 of the
//! index's side), and a legacy `$nearSphere` on it reads the index once and orders by
//! spherical distance. The matcher re-checks every fetched document, as for 2dsphere.

use crate::exec_stats::ExecStats;
use crate::index::geo::cell_key;
pub use crate::index::geo::{
    check_options, check_version, doc_keys, is_2dsphere_key, INDEX_VERSION,
};
use crate::index::IndexKind;
use crate::index::{self, decode_doc, Index, RecordId};
use crate::keystring;
use crate::planner::{Access, Plan, Range};
use crate::scope::OwnershipFilter;
use crate::storage_error;
use bson::{doc, Bson, Document};
use engine::{Direction, KvEngine, Snapshot, TableId};
use query::error::{DocError, DocResult};
use query::geo::cell;
use query::geo::flat::{Flat2dSpec, FlatBox};
use query::geo::sphere::Cap;
use query::geo::NearQuery;
use query::interrupt::Interrupt;
use query::matcher::Matcher;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Cells per query covering.
const QUERY_CELLS: usize = 20;
/// The first `$near` radius: about 640 m.
const NEAR_START: f64 = 1e-4;

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
/// on the fields before the geo field, or for a flat `$geoWithin` (or `$centerSphere`) over a
/// 2d index on the field (the hinted index, if `hint` names one), or None.
pub fn plan_within(
    indexes: &[Arc<Index>],
    filter: &Matcher,
    filter_doc: &Document,
    hint: Option<&Bson>,
) -> Option<Plan> {
    for (path, g) in filter.geo_conjuncts() {
        for index in indexes {
            if hint.is_some_and(|h| !names(h, index)) {
                continue;
            }
            if let Some(spec) = index.def.flat_geo_field(path) {
                if let Some(boxes) = g.flat_boxes() {
                    let (ranges, shown) = flat_ranges(spec, &boxes);
                    return Some(Plan::forward_ixscan(index, ranges, doc! {path: shown}));
                }
                continue;
            }
            if !index.def.is_geo_field(path) {
                continue;
            }
            let Some(cap) = g.bound() else { continue };
            let Some((prefixes, mut bounds)) = geo_prefixes(index, path, filter_doc) else {
                continue;
            };
            let (ranges, shown) = cap_ranges(&cap, &prefixes);
            bounds.insert(path, shown);
            return Some(Plan::forward_ixscan(index, ranges, bounds));
        }
    }
    None
}

/// Whether a hint (a name or a key pattern) names `index`.
fn names(hint: &Bson, index: &Index) -> bool {
    match hint {
        Bson::String(n) => &index.def.name == n,
        Bson::Document(k) => &index.def.key == k,
        _ => false,
    }
}

/// Byte ranges of a 2d index holding every point of `boxes` (its geohash field leads the
/// key; the fields after it are unbounded), and their explain rendering.
fn flat_ranges(spec: &Flat2dSpec, boxes: &[FlatBox]) -> (Vec<Range>, Vec<Bson>) {
    let mut hashes: Vec<(u64, u64)> = boxes
        .iter()
        .flat_map(|b| spec.cover_box(b, QUERY_CELLS))
        .collect();
    hashes.sort_unstable();
    let ranges = hashes
        .iter()
        .map(|&(lo, hi)| {
            let end = match keystring::prefix_successor(&cell_key(hi)) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            };
            (Bound::Included(cell_key(lo)), end)
        })
        .collect();
    let shown = hashes
        .iter()
        .map(|(lo, hi)| Bson::String(format!("[{lo}, {hi}]")))
        .collect();
    (ranges, shown)
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
    let flat_indexes = || {
        indexes
            .iter()
            .filter(|i| i.def.flat_geo_field(path).is_some())
    };
    if near.flat || (!near.metres && indexes_on(indexes, path).next().is_none()) {
        // A flat $near needs a 2d index; a legacy $nearSphere takes one when no 2dsphere
        // index is there (its scan reads the index once: the cap is no box of the plane).
        if let Some(index) = flat_indexes().next() {
            let prefixes = near.flat.then(|| Arc::new(vec![Vec::new()]));
            return Ok(near_plan(index, path, near, prefixes));
        }
    }
    let candidates: Vec<&Arc<Index>> = if near.flat {
        Vec::new()
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
    Ok(near_plan(index, path, near, prefixes))
}

fn near_plan(
    index: &Arc<Index>,
    path: &str,
    near: &NearQuery,
    prefixes: Option<Arc<Vec<Vec<u8>>>>,
) -> Plan {
    Plan {
        access: Access::GeoNear {
            index: index.clone(),
            path: path.to_string(),
            near: Arc::new(near.clone()),
            prefixes,
        },
        reverse: false,
        sort_provided: false,
    }
}

/// mongod's stage name for a near scan of `index`.
fn stage_name(index: &Index) -> &'static str {
    match index.def.kind {
        IndexKind::Geo2d(_) => "GEO_NEAR_2D",
        _ => "GEO_NEAR_2DSPHERE",
    }
}

/// The stage name of a near plan (`GEO_NEAR_2D` or `GEO_NEAR_2DSPHERE`).
pub fn near_stage_name(plan: &Plan) -> &'static str {
    match &plan.access {
        Access::GeoNear { index, .. } => stage_name(index),
        _ => "GEO_NEAR_2DSPHERE",
    }
}

/// explain's stage for a near plan.
pub fn explain_near(index: &Index, filter: &Document) -> Document {
    doc! {
        "stage": stage_name(index),
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

/// A flat `$near`'s first radius (1/1024 of the index's side) and last (`$maxDistance`, or
/// the distance from the point to the index square's farthest corner, past which no indexed
/// point lies). The square of half-side r around the point holds every point within r.
fn flat_near_radii(spec: &Flat2dSpec, near: &NearQuery) -> (f64, f64) {
    let (x, y) = near.point;
    let far = |v: f64| (v - spec.min).abs().max((v - spec.max).abs());
    let corner = far(x).hypot(far(y));
    ((spec.max - spec.min) / 1024.0, near.max.min(corner))
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
    pub stats: Arc<ExecStats>,
    pub interrupt: Interrupt,
    radius: f64,
    done: bool,
    seen: HashSet<RecordId>,
    pending: BinaryHeap<Pending>,
    ready: VecDeque<(RecordId, Document, f64)>,
}

/// What a `$near` scan reads: the 2dsphere index, its geo field, the query's point and
/// distances, and the key prefixes of the equalities before the geo field (see
/// [`NearScan::prefixes`]).
pub struct NearTarget {
    pub index: Arc<Index>,
    pub path: String,
    pub near: Arc<NearQuery>,
    pub prefixes: Option<Arc<Vec<Vec<u8>>>>,
}

impl NearScan {
    pub fn new(
        engine: Arc<dyn KvEngine>,
        table: TableId,
        target: NearTarget,
        filter: Option<Arc<Matcher>>,
        ownership: Option<OwnershipFilter>,
        stats: Arc<ExecStats>,
        interrupt: Interrupt,
    ) -> DocResult<NearScan> {
        let NearTarget {
            index,
            path,
            near,
            prefixes,
        } = target;
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
        let flat = self.index.def.flat_geo_field(&self.path).copied();
        let (start, max) = match flat {
            Some(spec) if self.near.flat => flat_near_radii(&spec, &self.near),
            _ => (NEAR_START, self.near.max.min(std::f64::consts::PI)),
        };
        let next = if self.prefixes.is_none() {
            max
        } else if self.radius == 0.0 {
            start.max(self.near.min)
        } else {
            self.radius * 4.0
        };
        self.radius = next.min(max);
        let last = self.radius >= max;
        let ranges = match (&self.prefixes, flat) {
            (Some(_), Some(spec)) => {
                let (x, y, r) = (self.near.point.0, self.near.point.1, self.radius);
                let square = FlatBox {
                    lo: (x - r, y - r),
                    hi: (x + r, y + r),
                };
                flat_ranges(&spec, &[square]).0
            }
            (Some(prefixes), None) => {
                let cap = Cap {
                    center: self.near.center,
                    radius: self.radius,
                };
                cap_ranges(&cap, prefixes).0
            }
            (None, _) => vec![(Bound::Unbounded, Bound::Unbounded)],
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
