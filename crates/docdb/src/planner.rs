//! Query planning: pick an index whose leading fields the filter constrains (equality prefix,
//! then at most one range field) or whose key order gives the requested sort, else a
//! collection scan. Index bounds are byte ranges over KeyString keys; they are a superset of
//! the matching documents (the matcher re-checks every fetched document), so the planner only
//! has to be conservative, never exact.
//!
//! What is indexable, per top-level (or `$and`-nested) field predicate: equality with a scalar,
//! document or null (`{a: v}`, `{$eq: v}`), `$in` of such values, and `$gt/$gte/$lt/$lte`
//! with a scalar (bounded to that value's type bracket, as MongoDB's type bracketing does).
//! Arrays, regexes, MinKey/MaxKey operands and every other operator are left to the matcher.
//! On a multikey index two predicates of one field are not intersected (different array
//! elements may satisfy them); one of them bounds the scan. A sparse index is not used for
//! predicates that can match null/missing, nor for sort-only scans. A partial index is used
//! only when the query implies its filter (`partial::implies`).

use crate::index::Index;
use crate::index::{IndexKind, WildcardSpec};
use crate::keystring::{self, prefix_successor};
use bson::{Bson, Document};
use query::error::{DocError, DocResult};
use query::text::{TextOperand, TextQuery, TextSpec};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// At most this many point combinations on an index's equality prefix.
const MAX_POINTS: usize = 4096;

pub type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

#[derive(Clone, Debug)]
struct Interval {
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    lo_disp: String,
    hi_disp: String,
}

impl Interval {
    fn point(v: &Bson) -> Interval {
        let e = keystring::encode_one(v, false);
        let d = keystring::display_value(v);
        Interval {
            lo: Bound::Included(e.clone()),
            hi: Bound::Included(e),
            lo_disp: d.clone(),
            hi_disp: d,
        }
    }
    fn is_point(&self) -> bool {
        matches!((&self.lo, &self.hi), (Bound::Included(a), Bound::Included(b)) if a == b)
    }
    fn is_empty(&self) -> bool {
        match (&self.lo, &self.hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a >= b
            }
            _ => false,
        }
    }
    fn display(&self) -> String {
        let l = if matches!(self.lo, Bound::Excluded(_)) {
            "("
        } else {
            "["
        };
        let r = if matches!(self.hi, Bound::Excluded(_)) {
            ")"
        } else {
            "]"
        };
        format!("{l}{}, {}{r}", self.lo_disp, self.hi_disp)
    }
    fn full() -> Interval {
        Interval {
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
            lo_disp: "MinKey".into(),
            hi_disp: "MaxKey".into(),
        }
    }
    /// For a descending field: the same set of values in inverted-byte space.
    fn inverted(&self) -> Interval {
        let inv = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(x) => Bound::Included(inv_bytes(x)),
            Bound::Excluded(x) => Bound::Excluded(inv_bytes(x)),
            Bound::Unbounded => Bound::Unbounded,
        };
        Interval {
            lo: inv(&self.hi),
            hi: inv(&self.lo),
            lo_disp: self.hi_disp.clone(),
            hi_disp: self.lo_disp.clone(),
        }
    }
}

fn inv_bytes(x: &[u8]) -> Vec<u8> {
    let mut v = x.to_vec();
    keystring::invert(&mut v);
    v
}

fn lo_key(b: &Bound<Vec<u8>>) -> (u8, &[u8], u8) {
    match b {
        Bound::Unbounded => (0, &[], 0),
        Bound::Included(x) => (1, x, 0),
        Bound::Excluded(x) => (1, x, 1),
    }
}

fn hi_key(b: &Bound<Vec<u8>>) -> (u8, &[u8], u8) {
    match b {
        Bound::Unbounded => (1, &[], 0),
        Bound::Included(x) => (0, x, 1),
        Bound::Excluded(x) => (0, x, 0),
    }
}

fn intersect(a: &Interval, b: &Interval) -> Interval {
    let (lo, lo_disp) = if lo_key(&a.lo) >= lo_key(&b.lo) {
        (a.lo.clone(), a.lo_disp.clone())
    } else {
        (b.lo.clone(), b.lo_disp.clone())
    };
    let (hi, hi_disp) = if hi_key(&a.hi) <= hi_key(&b.hi) {
        (a.hi.clone(), a.hi_disp.clone())
    } else {
        (b.hi.clone(), b.hi_disp.clone())
    };
    Interval {
        lo,
        hi,
        lo_disp,
        hi_disp,
    }
}

fn intersect_lists(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let i = intersect(x, y);
            if !i.is_empty() {
                out.push(i);
            }
        }
    }
    out
}

/// One indexable predicate on a field.
#[derive(Clone, Debug)]
struct Pred {
    intervals: Vec<Interval>,
    /// Can match null or a missing field (not usable on a sparse index).
    matches_null: bool,
    equality: bool,
    /// The values of an equality (`$eq`, `$in`): a hashed index looks up their hashes.
    values: Vec<Bson>,
}

fn scalar_ok(v: &Bson) -> bool {
    !matches!(
        v,
        Bson::Array(_) | Bson::RegularExpression(_) | Bson::MinKey | Bson::MaxKey | Bson::Undefined
    )
}

fn range_pred(op: &str, v: &Bson) -> Option<Pred> {
    if !scalar_ok(v) || matches!(v, Bson::Document(_)) {
        return None;
    }
    if matches!(v, Bson::Double(d) if d.is_nan()) {
        return None;
    }
    let t = keystring::type_byte(v);
    let e = keystring::encode_one(v, false);
    let d = keystring::display_value(v);
    let bstart = (
        Bound::Included(vec![t]),
        keystring::bracket_display(t, false),
    );
    let bend = (
        Bound::Excluded(vec![t + 1]),
        keystring::bracket_display(t, true),
    );
    let ((lo, lo_disp), (hi, hi_disp)) = match op {
        "$gt" => ((Bound::Excluded(e), d), bend),
        "$gte" => ((Bound::Included(e), d), bend),
        "$lt" => (bstart, (Bound::Excluded(e), d)),
        "$lte" => (bstart, (Bound::Included(e), d)),
        _ => return None,
    };
    Some(Pred {
        intervals: vec![Interval {
            lo,
            hi,
            lo_disp,
            hi_disp,
        }],
        matches_null: matches!(v, Bson::Null) && op.ends_with('e'),
        equality: false,
        values: Vec::new(),
    })
}

fn eq_pred(v: &Bson) -> Option<Pred> {
    if !scalar_ok(v) {
        return None;
    }
    Some(Pred {
        intervals: vec![Interval::point(v)],
        matches_null: matches!(v, Bson::Null),
        equality: true,
        values: vec![v.clone()],
    })
}

fn in_pred(v: &Bson) -> Option<Pred> {
    let arr = v.as_array()?;
    let mut pts: Vec<(Vec<u8>, &Bson)> = Vec::new();
    for e in arr {
        if !scalar_ok(e) {
            return None;
        }
        pts.push((keystring::encode_one(e, false), e));
    }
    pts.sort_by(|a, b| a.0.cmp(&b.0));
    pts.dedup_by(|a, b| a.0 == b.0);
    Some(Pred {
        matches_null: arr.iter().any(|e| matches!(e, Bson::Null)),
        values: pts.iter().map(|(_, e)| (*e).clone()).collect(),
        intervals: pts.into_iter().map(|(_, e)| Interval::point(e)).collect(),
        equality: true,
    })
}

/// The indexable predicates of a filter, by field path.
fn collect_preds(filter: &Document, out: &mut HashMap<String, Vec<Pred>>) {
    for (k, v) in filter {
        if k == "$and" {
            if let Some(arr) = v.as_array() {
                for e in arr {
                    if let Some(d) = e.as_document() {
                        collect_preds(d, out);
                    }
                }
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let ops = match v {
            Bson::Document(d) if d.keys().next().is_some_and(|x| x.starts_with('$')) => d,
            _ => {
                if let Some(p) = eq_pred(v) {
                    out.entry(k.clone()).or_default().push(p);
                }
                continue;
            }
        };
        for (op, arg) in ops {
            let p = match op.as_str() {
                "$eq" => eq_pred(arg),
                "$in" => in_pred(arg),
                "$gt" | "$gte" | "$lt" | "$lte" => range_pred(op, arg),
                _ => None,
            };
            if let Some(p) = p {
                out.entry(k.clone()).or_default().push(p);
            }
        }
    }
}

/// Sort fields with directions, if the sort is a plain `{field: ±1, ...}` spec.
pub fn simple_sort(sort: &Document) -> Option<Vec<(String, bool)>> {
    let mut v = Vec::new();
    for (k, d) in sort {
        let n = match d {
            Bson::Int32(i) => *i as f64,
            Bson::Int64(i) => *i as f64,
            Bson::Double(f) => *f,
            _ => return None,
        };
        if n == 1.0 {
            v.push((k.clone(), false));
        } else if n == -1.0 {
            v.push((k.clone(), true));
        } else {
            return None;
        }
    }
    Some(v)
}

pub enum Access {
    CollScan,
    /// A `$text` query: each term's entries of the text index, scores summed per document,
    /// then every fetched document re-checked against the phrases and negations.
    Text {
        index: Arc<Index>,
        spec: Arc<TextSpec>,
        query: Arc<TextQuery>,
        /// The values of a compound index's prefix fields (the query's equalities).
        prefix: Vec<Bson>,
    },
    IxScan {
        index: Arc<Index>,
        ranges: Vec<Range>,
        /// `{field: ["[1, 1]", ...]}` for explain.
        bounds: Document,
    },
    /// `$near`/`$nearSphere` on `path`: the 2dsphere index's growing-cap scan, documents in
    /// distance order (`crate::geo_index::NearScan`).
    GeoNear {
        index: Arc<Index>,
        path: String,
        near: Arc<query::geo::NearQuery>,
        /// Key prefixes from equalities on a compound index's fields before the geo field
        /// (`[[]]` when it leads); None: not bounded, the whole index is read once.
        prefixes: Option<Arc<Vec<Vec<u8>>>>,
    },
}

pub struct Plan {
    pub access: Access,
    /// Scan direction (backward: to provide a descending sort, or `$natural: -1`).
    pub reverse: bool,
    /// The scan already returns documents in the requested sort order.
    pub sort_provided: bool,
}

impl Plan {
    pub fn index_name(&self) -> Option<&str> {
        match &self.access {
            Access::IxScan { index, .. }
            | Access::Text { index, .. }
            | Access::GeoNear { index, .. } => Some(&index.def.name),
            Access::CollScan => None,
        }
    }

    /// A forward scan of `ranges` of `index` that provides no sort order.
    pub(crate) fn forward_ixscan(index: &Arc<Index>, ranges: Vec<Range>, bounds: Document) -> Plan {
        Plan {
            access: Access::IxScan {
                index: index.clone(),
                ranges,
                bounds,
            },
            reverse: false,
            sort_provided: false,
        }
    }
}

struct Candidate {
    plan: Plan,
    score: i64,
}

fn plan_index(
    index: &Arc<Index>,
    preds: &HashMap<String, Vec<Pred>>,
    sort: Option<&[(String, bool)]>,
) -> Option<Candidate> {
    match &index.def.kind {
        IndexKind::Hashed => return plan_hashed(index, preds),
        IndexKind::Wildcard(spec) => return plan_wildcard(index, spec, preds),
        IndexKind::Text(_) | IndexKind::Geo2dSphere | IndexKind::Geo2d(_) => return None,
        IndexKind::Ordered => {}
    }
    let multikey = index.is_multikey();
    let sparse = index.def.sparse;
    // Intervals per index field (ascending value space), until the first non-point field.
    let mut fields: Vec<Vec<Interval>> = Vec::new();
    let mut eq_len = 0;
    let mut has_range = false;
    for (path, _) in &index.def.fields {
        let ps: Vec<&Pred> = preds
            .get(path)
            .map(|v| v.iter().filter(|p| !(sparse && p.matches_null)).collect())
            .unwrap_or_default();
        if ps.is_empty() {
            break;
        }
        let ivs = if multikey {
            let p = ps.iter().find(|p| p.equality).unwrap_or(&ps[0]);
            p.intervals.clone()
        } else {
            let mut acc = ps[0].intervals.clone();
            for p in &ps[1..] {
                acc = intersect_lists(&acc, &p.intervals);
            }
            acc
        };
        let all_points = !ivs.is_empty() && ivs.iter().all(Interval::is_point);
        let product: usize = fields.iter().map(|f| f.len().max(1)).product();
        if product.saturating_mul(ivs.len().max(1)) > MAX_POINTS {
            break;
        }
        fields.push(ivs);
        if all_points {
            eq_len += 1;
        } else {
            has_range = true;
            break;
        }
    }
    let single_range = fields.iter().all(|f| f.len() == 1);
    // Can the index order provide the sort?
    let mut sort_dir: Option<bool> = None;
    if let Some(sort) = sort {
        if !sort.is_empty() && !multikey && single_range {
            let max_start = eq_len;
            for s in 0..=max_start {
                if s + sort.len() > index.def.fields.len() {
                    break;
                }
                let idx_fields = &index.def.fields[s..s + sort.len()];
                let names_match = idx_fields.iter().zip(sort).all(|(a, b)| a.0 == b.0);
                if !names_match {
                    continue;
                }
                let same = idx_fields.iter().zip(sort).all(|(a, b)| a.1 == b.1);
                let opposite = idx_fields.iter().zip(sort).all(|(a, b)| a.1 != b.1);
                if same {
                    sort_dir = Some(false);
                } else if opposite {
                    sort_dir = Some(true);
                }
                if sort_dir.is_some() {
                    break;
                }
            }
        }
    }
    let usable_filter = eq_len > 0 || has_range;
    if !usable_filter && (sort_dir.is_none() || sparse) {
        return None;
    }
    let exact_unique = index.def.unique && eq_len == index.def.fields.len();
    let score = eq_len as i64 * 8
        + has_range as i64 * 4
        + sort_dir.is_some() as i64 * 2
        + exact_unique as i64 * 100
        + index.def.is_id() as i64;
    let (ranges, bounds) = build_ranges(index, &fields);
    Some(Candidate {
        plan: Plan {
            access: Access::IxScan {
                index: index.clone(),
                ranges,
                bounds,
            },
            reverse: sort_dir.unwrap_or(false),
            sort_provided: sort_dir.is_some(),
        },
        score,
    })
}

/// A hashed index answers equality only: one point per hash of an equality's values. It never
/// provides a sort (keys are in hash order).
fn plan_hashed(index: &Arc<Index>, preds: &HashMap<String, Vec<Pred>>) -> Option<Candidate> {
    let path = &index.def.fields[0].0;
    let pred = preds
        .get(path)?
        .iter()
        .find(|p| p.equality && !(index.def.sparse && p.matches_null))?;
    let mut points: Vec<Interval> = pred
        .values
        .iter()
        .map(|v| Interval::point(&Bson::Int64(query::hash::hash_value(v))))
        .collect();
    points.sort_by(|a, b| lo_key(&a.lo).cmp(&lo_key(&b.lo)));
    points.dedup_by(|a, b| a.lo == b.lo);
    let (ranges, bounds) = build_ranges(index, &[points]);
    Some(Candidate {
        plan: Plan::forward_ixscan(index, ranges, bounds),
        score: 8,
    })
}

/// A wildcard index answers equality or a range on one field it covers (mongod's rules: not
/// for predicates that can match null or a missing field, nor for equality to a document or
/// array, which its per-leaf keys cannot see). Keys are (regular fields before, path, value,
/// regular fields after); the field is treated as multikey (one predicate bounds the scan),
/// and the order never provides a sort. A compound index's leading regular fields bound the
/// scan too: with equalities on all of them the path and value follow; otherwise the scan
/// stops at the first one without (its range, if any, is the last bound) and every path under
/// it is read, the fetch's filter and RecordId dedup doing the rest. Predicates on the leading
/// regular fields alone use it the same way (as mongod 7's): a document without covered
/// leaves has its marker key there (`crate::index`'s `wildcard_keys`).
fn plan_wildcard(
    index: &Arc<Index>,
    spec: &WildcardSpec,
    preds: &HashMap<String, Vec<Pred>>,
) -> Option<Candidate> {
    let usable = |p: &&Pred| {
        !p.matches_null
            && !p
                .values
                .iter()
                .any(|v| matches!(v, Bson::Document(_) | Bson::Array(_)))
    };
    let mut covered: Vec<(&String, &Pred)> = preds
        .iter()
        .filter(|(path, _)| spec.answers(path))
        .filter_map(|(path, ps)| {
            let eq = ps.iter().filter(usable).find(|p| p.equality);
            eq.or_else(|| ps.iter().find(usable)).map(|p| (path, p))
        })
        .collect();
    // Equality first, then the field name (a deterministic choice among equals).
    covered.sort_by(|a, b| b.1.equality.cmp(&a.1.equality).then(a.0.cmp(b.0)));
    let covered = covered.first().copied();
    // The leading regular fields: single-valued (arrays are refused at write), so every
    // predicate on one bounds it.
    let mut fields: Vec<Vec<Interval>> = Vec::new();
    let mut eq_len = 0;
    for (regular, _) in index.def.regular_before() {
        let Some(ps) = preds.get(regular).filter(|ps| !ps.is_empty()) else {
            break;
        };
        let mut ivs = ps[0].intervals.clone();
        for p in &ps[1..] {
            ivs = intersect_lists(&ivs, &p.intervals);
        }
        let product: usize = fields.iter().map(|f| f.len().max(1)).product();
        if product.saturating_mul(ivs.len().max(1)) > MAX_POINTS {
            break;
        }
        let points = !ivs.is_empty() && ivs.iter().all(Interval::is_point);
        fields.push(ivs);
        if !points {
            break;
        }
        eq_len += 1;
    }
    let whole_prefix = eq_len == index.def.regular_before().len();
    let bounded_path = match covered {
        Some((path, pred)) if whole_prefix => {
            fields.push(vec![Interval::point(&Bson::String(path.clone()))]);
            fields.push(pred.intervals.clone());
            Some(path)
        }
        // Nothing bounds the scan's start: every key of the index would be read.
        _ if fields.is_empty() => return None,
        _ => None,
    };
    let (ranges, shown) = build_ranges(index, &fields);
    // As mongod's explain: the value's bounds under the field's own name.
    let bounds: Document = shown
        .into_iter()
        .map(|(k, v)| match (k.as_str(), bounded_path) {
            ("$_value", Some(path)) => (path.clone(), v),
            ("$_path", Some(path)) => {
                let point = format!("[\"{path}\", \"{path}\"]");
                (k, Bson::Array(vec![Bson::String(point)]))
            }
            _ => (k, v),
        })
        .collect();
    let score = eq_len as i64 * 8
        + match (bounded_path, covered) {
            (Some(_), Some((_, pred))) if pred.equality => 8,
            (Some(_), _) => 4,
            (None, Some(_)) => 2,
            (None, None) => 1,
        };
    Some(Candidate {
        plan: Plan::forward_ixscan(index, ranges, bounds),
        score,
    })
}

/// The key prefixes (in index byte order) that the filter's equalities or `$in`s on an
/// index's leading `fields` give, with their explain bounds; None unless each field has one
/// (or their combinations exceed [`MAX_POINTS`]). One empty prefix for no fields.
pub(crate) fn point_prefixes(
    filter: &Document,
    fields: &[(String, bool)],
) -> Option<(Vec<Vec<u8>>, Document)> {
    let mut preds = HashMap::new();
    collect_preds(filter, &mut preds);
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    let mut bounds = Document::new();
    for (path, desc) in fields {
        let points = preds
            .get(path)?
            .iter()
            .find(|p| !p.intervals.is_empty() && p.intervals.iter().all(Interval::is_point))?;
        if prefixes.len().saturating_mul(points.intervals.len()) > MAX_POINTS {
            return None;
        }
        let mut next = Vec::with_capacity(prefixes.len() * points.intervals.len());
        for p in &prefixes {
            for iv in &points.intervals {
                let iv = if *desc { iv.inverted() } else { iv.clone() };
                if let Bound::Included(x) = &iv.lo {
                    next.push(cat(p, x));
                }
            }
        }
        prefixes = next;
        let shown: Vec<Bson> = points
            .intervals
            .iter()
            .map(|x| Bson::String(x.display()))
            .collect();
        bounds.insert(path.clone(), shown);
    }
    Some((prefixes, bounds))
}

/// Orders ranges by where they start (scans read them in key order).
pub(crate) fn range_start_cmp(a: &Range, b: &Range) -> std::cmp::Ordering {
    lo_key(&a.0).cmp(&lo_key(&b.0))
}

/// Byte ranges over the index table for per-field intervals (leading fields; the rest are
/// unconstrained), sorted in key order, plus their explain rendering.
fn build_ranges(index: &Index, fields: &[Vec<Interval>]) -> (Vec<Range>, Document) {
    let mut bounds = Document::new();
    for (i, (path, _)) in index.def.fields.iter().enumerate() {
        let shown: Vec<Bson> = match fields.get(i) {
            Some(ivs) => ivs.iter().map(|x| Bson::String(x.display())).collect(),
            None => vec![Bson::String(Interval::full().display())],
        };
        bounds.insert(path.clone(), shown);
    }
    // Components in index byte space.
    let comps: Vec<Vec<Interval>> = fields
        .iter()
        .enumerate()
        .map(|(i, ivs)| {
            if index.def.fields[i].1 {
                ivs.iter().map(Interval::inverted).collect()
            } else {
                ivs.clone()
            }
        })
        .collect();
    let (points, last) = match comps.split_last() {
        Some((last, rest)) if !last.iter().all(Interval::is_point) => (rest, Some(last)),
        _ => (&comps[..], None),
    };
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    for f in points {
        let mut next = Vec::new();
        for p in &prefixes {
            for iv in f {
                if let Bound::Included(x) = &iv.lo {
                    let mut q = p.clone();
                    q.extend_from_slice(x);
                    next.push(q);
                }
            }
        }
        prefixes = next;
    }
    let mut ranges = Vec::new();
    for p in &prefixes {
        match last {
            None => ranges.push(prefix_range(p)),
            Some(ivs) => {
                for iv in ivs {
                    if let Some(r) = compose(p, iv) {
                        ranges.push(r);
                    }
                }
            }
        }
    }
    ranges.sort_by(|a, b| lo_key(&a.0).cmp(&lo_key(&b.0)));
    (ranges, bounds)
}

fn prefix_range(p: &[u8]) -> Range {
    if p.is_empty() {
        return (Bound::Unbounded, Bound::Unbounded);
    }
    (
        Bound::Included(p.to_vec()),
        match prefix_successor(p) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        },
    )
}

fn cat(p: &[u8], x: &[u8]) -> Vec<u8> {
    let mut v = p.to_vec();
    v.extend_from_slice(x);
    v
}

fn compose(p: &[u8], iv: &Interval) -> Option<Range> {
    let lo = match &iv.lo {
        Bound::Unbounded if p.is_empty() => Bound::Unbounded,
        Bound::Unbounded => Bound::Included(p.to_vec()),
        Bound::Included(x) => Bound::Included(cat(p, x)),
        Bound::Excluded(x) => Bound::Included(prefix_successor(&cat(p, x))?),
    };
    let hi = match &iv.hi {
        Bound::Unbounded => match prefix_successor(p) {
            Some(s) if !p.is_empty() => Bound::Excluded(s),
            _ => Bound::Unbounded,
        },
        Bound::Included(x) => match prefix_successor(&cat(p, x)) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        },
        Bound::Excluded(x) => Bound::Excluded(cat(p, x)),
    };
    Some((lo, hi))
}

/// What a hint names: the collection in natural order (`{$natural: ±1}`), or an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hinted {
    Natural {
        reverse: bool,
    },
    /// The position of the index in the list the hint was resolved against.
    Index(usize),
}

/// The prefix of the planner's errors in a find (mongod's); a write's hint errors have none.
pub const PLANNER_ERROR: &str = "error processing query: planner returned error :: caused by :: ";

/// Resolves a hint (an index name, a key pattern or `{$natural: ±1}`) against `indexes`, as
/// mongod's planner: a name or pattern no index has is BadValue (2), a key pattern several
/// indexes share is IndexNotFound (27). Errors start with `prefix`.
pub fn resolve_hint(indexes: &[Arc<Index>], hint: &Bson, prefix: &str) -> DocResult<Hinted> {
    if let Bson::Document(d) = hint {
        if let Some(v) = d.get("$natural") {
            let reverse = matches!(v, Bson::Int32(i) if *i < 0)
                || matches!(v, Bson::Int64(i) if *i < 0)
                || matches!(v, Bson::Double(f) if *f < 0.0);
            return Ok(Hinted::Natural { reverse });
        }
    }
    let found = crate::index::find_index(indexes, hint, |a, b| {
        DocError::index_not_found(format!(
            "{prefix}Hint matched multiple indexes, must hint by index name. Matched: {} and {}",
            a.def.spec, b.def.spec
        ))
    })?;
    match found {
        Some(pos) => Ok(Hinted::Index(pos)),
        None => Err(DocError::bad_value(format!(
            "{prefix}hint provided does not correspond to an existing index"
        ))),
    }
}

/// mongod's error of a min/max query (its code name is `Location<code>`).
fn min_max_error(code: i32, msg: &str) -> DocError {
    let name = match code {
        51173 => "Location51173",
        51174 => "Location51174",
        51175 => "Location51175",
        _ => "Location51176",
    };
    DocError::with_code(code, name, msg)
}

/// The plan of a find with `min` and/or `max`: a forward scan of the hinted index from the
/// `min` key (inclusive) to the `max` key (exclusive), as mongod's. A hint naming an index is
/// required (51173); each bound's fields must be the index's key fields in order (51174), the
/// two bounds the same fields (51176), and `min` before `max` in the index (51175).
pub fn plan_min_max(
    indexes: &[Arc<Index>],
    hint: Option<&Bson>,
    min: Option<&Document>,
    max: Option<&Document>,
) -> DocResult<Plan> {
    if let (Some(lo), Some(hi)) = (min, max) {
        if !lo.keys().eq(hi.keys()) {
            return Err(min_max_error(
                51176,
                "min() and max() must have the same field names",
            ));
        }
    }
    let no_hint = || {
        min_max_error(
            51173,
            "When using min()/max() a hint of which index to use must be provided",
        )
    };
    let index = match resolve_hint(indexes, hint.ok_or_else(no_hint)?, PLANNER_ERROR)? {
        Hinted::Natural { .. } => return Err(no_hint()),
        Hinted::Index(pos) => &indexes[pos],
    };
    let key_of = |bound: &Document| -> DocResult<Vec<u8>> {
        let compatible = !index.def.keys_per_field()
            && bound.len() == index.def.fields.len()
            && bound
                .keys()
                .zip(&index.def.fields)
                .all(|(k, (f, _))| k == f);
        if !compatible {
            return Err(min_max_error(
                51174,
                "The index chosen is not compatible with min/max",
            ));
        }
        let values: Vec<&Bson> = bound.values().collect();
        Ok(keystring::encode_key(&values, &index.def.descending()))
    };
    let lo = min.map(key_of).transpose()?;
    let hi = max.map(key_of).transpose()?;
    if let (Some(l), Some(h)) = (&lo, &hi) {
        if l >= h {
            return Err(min_max_error(
                51175,
                "The value provided for min() does not come before the value provided for max() in the hinted index",
            ));
        }
    }
    let mut bounds = Document::new();
    bounds.insert("min", min.cloned().map_or(Bson::Null, Bson::Document));
    bounds.insert("max", max.cloned().map_or(Bson::Null, Bson::Document));
    let range = (
        lo.map_or(Bound::Unbounded, Bound::Included),
        hi.map_or(Bound::Unbounded, Bound::Excluded),
    );
    Ok(Plan::forward_ixscan(index, vec![range], bounds))
}

/// Chooses the plan for a find.
pub fn plan(
    indexes: &[Arc<Index>],
    filter: &Document,
    sort: Option<&Document>,
    hint: Option<&Bson>,
) -> DocResult<Plan> {
    let mut preds = HashMap::new();
    collect_preds(filter, &mut preds);
    let sort_fields = sort.and_then(simple_sort);
    let sort_ref = sort_fields.as_deref();
    let collscan = |reverse: bool| Plan {
        access: Access::CollScan,
        reverse,
        sort_provided: false,
    };
    if let Some(h) = hint {
        let index = match resolve_hint(indexes, h, PLANNER_ERROR)? {
            Hinted::Natural { reverse } => return Ok(collscan(reverse)),
            Hinted::Index(pos) => &indexes[pos],
        };
        if let Some(c) = plan_index(index, &preds, sort_ref) {
            return Ok(c.plan);
        }
        if index.def.keys_per_field() {
            return Err(DocError::bad_value(format!(
                "error processing query: planner returned error :: caused by :: the hinted index {} cannot answer this query (a text index answers $text, a wildcard index a predicate on one of its fields)",
                index.def.name
            )));
        }
        let (ranges, bounds) = build_ranges(index, &[]);
        return Ok(Plan::forward_ixscan(index, ranges, bounds));
    }
    let mut best: Option<Candidate> = None;
    for index in indexes {
        // A partial index holds only the documents its filter matches: usable only when the
        // query cannot match any other (a hint, as mongod's, uses it regardless).
        if let Some(p) = &index.def.partial {
            if !crate::partial::implies(filter, p) {
                continue;
            }
        }
        if let Some(c) = plan_index(index, &preds, sort_ref) {
            if best.as_ref().is_none_or(|b| c.score > b.score) {
                best = Some(c);
            }
        }
    }
    Ok(best.map(|c| c.plan).unwrap_or_else(|| collscan(false)))
}

/// The plan of a query with `$text`: the collection's text index (one at most) answers it, in
/// the query's language or the index's default; none is IndexNotFound (27), as mongod's. A
/// compound text index needs an equality on each of its prefix fields, under the simple
/// collation (its keys have no other); a hint must name it. Otherwise the query fails as
/// mongod's planner fails it: NoQueryExecutionPlans (291).
pub fn plan_text(
    indexes: &[Arc<Index>],
    text: &TextOperand,
    filter: &Document,
    hint: Option<&Bson>,
) -> DocResult<Plan> {
    let found = indexes.iter().find_map(|i| match &i.def.kind {
        IndexKind::Text(spec)
            if i.def
                .partial
                .as_ref()
                .is_none_or(|p| crate::partial::implies(filter, p)) =>
        {
            Some((i, spec))
        }
        _ => None,
    });
    let Some((index, spec)) = found else {
        return Err(DocError::index_not_found(
            "text index required for $text query",
        ));
    };
    let no_plan = || {
        DocError::with_code(
            291,
            "NoQueryExecutionPlans",
            "error processing query: planner returned error :: caused by :: failed to use text index to satisfy $text query (if text index is compound, are equality predicates given for all prefix fields?)",
        )
    };
    if let Some(h) = hint {
        let hinted = crate::index::find_index(indexes, h, |_, _| no_plan())?;
        match hinted {
            None => {
                return Err(DocError::bad_value(
                    "error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index",
                ))
            }
            Some(pos) if !Arc::ptr_eq(&indexes[pos], index) => return Err(no_plan()),
            Some(_) => {}
        }
    }
    let simple = query::collation::current().is_none();
    let mut prefix = Vec::with_capacity(index.def.regular_before().len());
    for (path, _) in index.def.regular_before() {
        match equality_on(filter, path) {
            Some(v) if simple || !collatable(&v) => prefix.push(v),
            _ => return Err(no_plan()),
        }
    }
    Ok(Plan {
        access: Access::Text {
            index: index.clone(),
            spec: spec.clone(),
            query: Arc::new(text.resolve(spec.default_language)?),
            prefix,
        },
        reverse: false,
        sort_provided: false,
    })
}

/// The value a top-level equality of `filter` (or of its top-level `$and`) gives `path`:
/// `{path: v}` or `{path: {$eq: v}}`; a regex, `$in` or range is no equality.
fn equality_on(filter: &Document, path: &str) -> Option<Bson> {
    for (k, v) in filter {
        if k == "$and" {
            let Bson::Array(items) = v else { continue };
            let found = items
                .iter()
                .filter_map(Bson::as_document)
                .find_map(|d| equality_on(d, path));
            if found.is_some() {
                return found;
            }
            continue;
        }
        if k != path {
            continue;
        }
        match v {
            Bson::RegularExpression(_) => {}
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                if let Some(eq) = d.get("$eq") {
                    return Some(eq.clone());
                }
            }
            other => return Some(other.clone()),
        }
    }
    None
}

/// Whether a collation changes how `v` compares (it holds a string somewhere).
fn collatable(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(collatable),
        Bson::Array(a) => a.iter().any(collatable),
        _ => false,
    }
}

#[cfg(test)]
mod hint_tests {
    use super::*;
    use crate::index::IndexDef;
    use bson::{bson, doc};

    fn index(spec: Document, table: engine::TableId) -> Arc<Index> {
        Arc::new(Index {
            def: IndexDef::parse(&spec).unwrap(),
            ident: format!("index-{table}"),
            table,
            multikey: false.into(),
        })
    }

    fn indexes() -> Vec<Arc<Index>> {
        vec![
            Arc::new(Index {
                def: IndexDef::id_index(None),
                ident: "index-0".into(),
                table: 0,
                multikey: false.into(),
            }),
            index(doc! {"key": {"a": 1}, "name": "a_1"}, 1),
            index(doc! {"key": {"b": 1}, "name": "b_up"}, 2),
            index(doc! {"key": {"b": 1}, "name": "b_again", "sparse": true}, 3),
        ]
    }

    #[test]
    fn a_hint_names_an_index_by_name_or_key_pattern() {
        let ix = indexes();
        let r = |h: Bson| resolve_hint(&ix, &h, "");
        assert_eq!(r(bson!("_id_")).unwrap(), Hinted::Index(0));
        assert_eq!(r(bson!({"_id": 1})).unwrap(), Hinted::Index(0));
        assert_eq!(r(bson!("a_1")).unwrap(), Hinted::Index(1));
        assert_eq!(r(bson!({"a": 1})).unwrap(), Hinted::Index(1));
        assert_eq!(r(bson!("b_again")).unwrap(), Hinted::Index(3));
        assert_eq!(
            r(bson!({"$natural": -1})).unwrap(),
            Hinted::Natural { reverse: true }
        );
        assert_eq!(
            r(bson!({"$natural": 1})).unwrap(),
            Hinted::Natural { reverse: false }
        );
    }

    #[test]
    fn a_hint_that_names_no_index_is_refused() {
        let ix = indexes();
        for h in [bson!("nope"), bson!({"a": -1}), bson!({"c": 1}), bson!(5)] {
            let e = resolve_hint(&ix, &h, "").unwrap_err();
            assert_eq!(e.code, 2, "{h}");
            assert_eq!(
                e.message,
                "hint provided does not correspond to an existing index"
            );
        }
        // A key pattern two indexes share must be named instead.
        let e = resolve_hint(&ix, &bson!({"b": 1}), PLANNER_ERROR).unwrap_err();
        assert_eq!(e.code, 27);
        assert!(e.message.starts_with(PLANNER_ERROR), "{}", e.message);
        // The plan uses the hinted index, and a find's error carries the planner's prefix.
        let p = plan(&ix, &doc! {"b": 3}, None, Some(&bson!("b_up"))).unwrap();
        assert!(matches!(p.access, Access::IxScan { ref index, .. } if index.def.name == "b_up"));
        let Err(e) = plan(&ix, &doc! {}, None, Some(&bson!("nope"))) else {
            panic!("a hint naming no index is refused");
        };
        assert_eq!(
            e.message,
            format!("{PLANNER_ERROR}hint provided does not correspond to an existing index")
        );
    }
}

#[cfg(test)]
mod min_max_tests {
    use super::*;
    use crate::index::IndexDef;
    use bson::{bson, doc};

    fn indexes() -> Vec<Arc<Index>> {
        vec![Arc::new(Index {
            def: IndexDef::parse(&doc! {"key": {"j": 1, "k": -1}, "name": "j_1_k_-1"}).unwrap(),
            ident: "index-1".into(),
            table: 1,
            multikey: false.into(),
        })]
    }

    fn code(r: DocResult<Plan>) -> i32 {
        match r {
            Err(e) => e.code,
            Ok(_) => panic!("the min/max query is refused"),
        }
    }

    #[test]
    fn the_bounds_are_the_encoded_keys_min_inclusive_max_exclusive() {
        let ix = indexes();
        let (lo, hi) = (doc! {"j": 1, "k": 5}, doc! {"j": 3, "k": 0});
        let hint = bson!("j_1_k_-1");
        let p = plan_min_max(&ix, Some(&hint), Some(&lo), Some(&hi)).unwrap();
        let Access::IxScan { ranges, .. } = p.access else {
            panic!("a min/max query scans the hinted index");
        };
        let enc = |a: i32, b: i32| keystring::encode_key(&[&bson!(a), &bson!(b)], &[false, true]);
        assert_eq!(
            ranges,
            vec![(Bound::Included(enc(1, 5)), Bound::Excluded(enc(3, 0)))]
        );
        assert!(!p.reverse && !p.sort_provided);
        // One bound alone leaves the other end open.
        let p = plan_min_max(&ix, Some(&hint), None, Some(&hi)).unwrap();
        let Access::IxScan { ranges, .. } = p.access else {
            panic!("a min/max query scans the hinted index");
        };
        assert_eq!(ranges, vec![(Bound::Unbounded, Bound::Excluded(enc(3, 0)))]);
    }

    #[test]
    fn min_max_without_a_matching_hinted_index_is_refused_with_mongods_codes() {
        let ix = indexes();
        let hint = bson!({"j": 1, "k": -1});
        let (a, b) = (doc! {"j": 1, "k": 1}, doc! {"j": 2, "k": 1});
        assert_eq!(code(plan_min_max(&ix, None, Some(&a), None)), 51173);
        let natural = bson!({"$natural": 1});
        assert_eq!(
            code(plan_min_max(&ix, Some(&natural), Some(&a), None)),
            51173
        );
        let swapped = doc! {"k": 1, "j": 1};
        assert_eq!(
            code(plan_min_max(&ix, Some(&hint), Some(&swapped), None)),
            51174
        );
        let short = doc! {"j": 1};
        assert_eq!(
            code(plan_min_max(&ix, Some(&hint), None, Some(&short))),
            51174
        );
        assert_eq!(
            code(plan_min_max(&ix, Some(&hint), Some(&b), Some(&a))),
            51175
        );
        assert_eq!(
            code(plan_min_max(&ix, Some(&hint), Some(&a), Some(&a))),
            51175
        );
        assert_eq!(
            code(plan_min_max(&ix, Some(&hint), Some(&a), Some(&short))),
            51176
        );
    }
}
