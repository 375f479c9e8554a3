//! Query execution: a plan becomes a `Send + 'static` iterator of documents (the server keeps
//! it across getMore calls). Stages: scan (collection, or index ranges → fetch by RecordId),
//! filter (the matcher re-checks every document), blocking sort when the scan does not provide
//! the order, skip, limit, projection. Counters feed explain's executionStats.
//!
//! A query reads one engine snapshot, taken when its source is built: its index entries and
//! documents are seen together, and getMore goes on in the same snapshot (a write after it is
//! not seen). A snapshot kept so long that the versions it pins would fill the cache is
//! discarded by the engine, and the cursor fails with SnapshotTooOld (239). Tailable cursors
//! read the newest data at every scan instead: they exist to see new inserts.

use crate::exec_stats::register;
pub use crate::exec_stats::{watch, ExecStats, ExecTotals, ExecWatch};
use crate::index::{self, decode_doc, Index};
use crate::keystring;
use crate::planner::{Access, Plan};
use crate::scope::OwnershipFilter;
use crate::storage_error;
pub use crate::tail::TailSignal;
use bson::{Bson, Document};
use engine::{Direction, KvEngine, TableId};
use query::aggregate::DocIter;
use query::collation::{self, Collation};
use query::error::{DocError, DocResult};
use query::interrupt::Interrupt;
use query::matcher::Matcher;
use query::projection::Projection;
use query::sort::SortSpec;
use query::text::{TextQuery, TextSpec, SCORE_FIELD};
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Documents a tailable cursor reads per scan.
const TAIL_BATCH: usize = 128;

/// A tailable cursor's error when its collection is gone: mongod's QueryPlanKilled.
fn tail_killed(why: &str) -> DocError {
    DocError::with_code(175, "QueryPlanKilled", format!("collection {why}"))
}

/// A tailable cursor's error when the document it stopped at was deleted (the capped
/// collection rolled over past it): mongod's CappedPositionLost.
fn position_lost(key: &[u8]) -> DocError {
    let rid = crate::index::rid_from(key).unwrap_or_default();
    DocError::with_code(
        136,
        "CappedPositionLost",
        format!(
            "CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({rid})"
        ),
    )
}

/// Documents with their RecordIds.
pub type RidIter = Box<dyn Iterator<Item = DocResult<(i64, Document)>> + Send>;

/// Documents with their RecordIds and text scores (a `$text` plan's; None otherwise).
pub(crate) type ScoredIter =
    Box<dyn Iterator<Item = DocResult<(i64, Document, Option<f64>)>> + Send>;

/// Documents of a find or aggregate, in order.
pub struct DocCursor {
    inner: DocIter,
    /// The collation the cursor was opened under: in effect whenever it produces documents
    /// (a getMore may run on another thread than the find).
    collation: Option<Arc<Collation>>,
    /// A tailable cursor sets it when it will return nothing more, ever (its `limit` is
    /// reached): the server then closes it instead of keeping it for new documents.
    done: Option<Arc<AtomicBool>>,
    /// The counters and plan of the scan feeding it (a find's), for the profiler.
    scan: Option<(Arc<ExecStats>, Arc<str>)>,
    /// A tailable cursor's collection signal (an awaitData getMore waits on it).
    tail: Option<Arc<TailSignal>>,
}

impl DocCursor {
    pub fn new(inner: DocIter) -> DocCursor {
        DocCursor::with_collation(inner, None)
    }
    pub fn with_collation(inner: DocIter, collation: Option<Arc<Collation>>) -> DocCursor {
        DocCursor {
            inner,
            collation,
            done: None,
            scan: None,
            tail: None,
        }
    }

    /// A tailable cursor over `inner`, which yields nothing at the end of what it can see
    /// for now and more later (a change stream); `signal` wakes an awaitData getMore, and
    /// `done` says it will yield nothing ever again.
    pub fn tailing(inner: DocIter, signal: Arc<TailSignal>, done: Arc<AtomicBool>) -> DocCursor {
        let mut cursor = DocCursor::new(inner);
        cursor.tail = Some(signal);
        cursor.done = Some(done);
        cursor
    }

    /// A tailable cursor's collection signal: an awaitData getMore reads its generation
    /// before reading and, finding nothing, waits past it.
    pub fn tail_signal(&self) -> Option<&Arc<TailSignal>> {
        self.tail.as_ref()
    }

    /// Counts what the cursor's scan examines from now on in the thread's [`watch`] (a
    /// getMore continues a find's scan).
    pub fn watch_scan(&self) {
        if let Some((stats, summary)) = &self.scan {
            register(stats, summary);
        }
    }
    /// A tailable cursor that has returned its `limit` (an ordinary cursor is done when it
    /// returns `None`).
    pub fn is_done(&self) -> bool {
        self.done
            .as_ref()
            .is_some_and(|d| d.load(Ordering::Acquire))
    }
    pub fn empty() -> DocCursor {
        DocCursor::new(Box::new(std::iter::empty()))
    }
    pub fn from_docs(docs: Vec<Document>) -> DocCursor {
        DocCursor::new(Box::new(docs.into_iter().map(Ok)))
    }
    pub fn collation(&self) -> Option<&Arc<Collation>> {
        self.collation.as_ref()
    }
    /// The documents; the caller keeps the collation in effect while it reads them.
    pub fn into_inner(self) -> DocIter {
        self.inner
    }
}

impl Iterator for DocCursor {
    type Item = DocResult<Document>;
    fn next(&mut self) -> Option<Self::Item> {
        let _in_effect = collation::scope(self.collation.clone());
        self.inner.next()
    }
}

/// Everything needed to run a plan without borrowing the database.
pub struct Exec {
    pub engine: Arc<dyn KvEngine>,
    pub table: TableId,
    pub plan: Plan,
    pub filter: Option<Arc<Matcher>>,
    /// The ownership filter of the call that planned this (see `scope`).
    pub ownership: Option<OwnershipFilter>,
    pub sort: Option<Arc<SortSpec>>,
    pub projection: Option<Arc<Projection>>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub stats: Arc<ExecStats>,
    /// Checked for every document (or index entry) the scan examines.
    pub interrupt: Interrupt,
    /// The query's collation (the one the plan's index, if any, was built with).
    pub collation: Option<Arc<Collation>>,
    /// Leave a `$text` plan's score on the documents (`query::text::SCORE_FIELD`) for a
    /// pipeline's later stages; a find takes it off.
    pub keep_score: bool,
    /// `returnKey`: each result becomes the index key that produced it (`{}` without one).
    pub return_key: bool,
    /// `showRecordId`: each result carries its RecordId as `$recordId`.
    pub show_record_id: bool,
}

/// Where a result's RecordId rides from the scan to the last stage (the name mongod shows).
const RECORD_ID_FIELD: &str = "$recordId";

/// The index key a document's scan entry had, as `returnKey` shows it: `{field: value, ...}`
/// of the first of the document's keys (in scan order) inside the plan's ranges, a hashed
/// field's value as its hash; `{}` for a plan that read no ordered index.
fn returned_key(plan: &Plan, doc: &Document) -> DocResult<Document> {
    let Access::IxScan { index, ranges, .. } = &plan.access else {
        return Ok(Document::new());
    };
    if index.def.keys_per_field() {
        return Ok(Document::new());
    }
    let keys = index::doc_keys(&index.def, doc)?.keys;
    let in_range = |k: &&index::IndexKey| {
        let e = &k.encoded;
        ranges.iter().any(|(lo, hi)| {
            let above = match lo {
                Bound::Included(l) => e >= l,
                Bound::Excluded(l) => e > l,
                Bound::Unbounded => true,
            };
            let below = match hi {
                Bound::Included(h) => e <= h || e.starts_with(h),
                Bound::Excluded(h) => e < h,
                Bound::Unbounded => true,
            };
            above && below
        })
    };
    let chosen = if plan.reverse {
        keys.iter().rev().find(in_range).or(keys.last())
    } else {
        keys.iter().find(in_range).or(keys.first())
    };
    let Some(key) = chosen else {
        return Ok(Document::new());
    };
    let values: Vec<Bson> = if index.def.is_hashed() {
        key.values
            .iter()
            .map(|v| Bson::Int64(query::hash::hash_value(v)))
            .collect()
    } else {
        key.values.clone()
    };
    Ok(index::key_value_doc(&index.def, &values))
}

impl Exec {
    /// The plan as mongod's `planSummary`: `COLLSCAN` or `IXSCAN { a: 1, b: -1 }`.
    pub fn summary(&self) -> Arc<str> {
        match &self.plan.access {
            Access::CollScan => "COLLSCAN".into(),
            Access::GeoNear { index, .. } => format!(
                "{} {{ {} }}",
                crate::geo_index::near_stage_name(&self.plan),
                index
                    .def
                    .key
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
            .into(),
            Access::IxScan { index, .. } | Access::Text { index, .. } => {
                let keys: Vec<String> = index
                    .def
                    .key
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect();
                format!("IXSCAN {{ {} }}", keys.join(", ")).into()
            }
        }
    }

    /// The document source: scan + fetch + filter (no sort, skip, limit, projection), with
    /// each document's RecordId (the write paths use it).
    pub fn source(&self) -> DocResult<RidIter> {
        Ok(Box::new(
            self.scored_source()?
                .map(|r| r.map(|(rid, doc, _)| (rid, doc))),
        ))
    }

    /// [`Exec::source`] with each document's text score (a `$text` plan) or distance in
    /// radians (a `$near` plan).
    pub(crate) fn scored_source(&self) -> DocResult<ScoredIter> {
        register(&self.stats, &self.summary());
        if let Access::Text {
            index,
            spec,
            query,
            prefix,
        } = &self.plan.access
        {
            return self.text_source(index, spec.clone(), query.clone(), prefix);
        }
        if let Access::GeoNear {
            index,
            path,
            near,
            prefixes,
        } = &self.plan.access
        {
            let target = crate::geo_index::NearTarget {
                index: index.clone(),
                path: path.clone(),
                near: near.clone(),
                prefixes: prefixes.clone(),
            };
            let scan = crate::geo_index::NearScan::new(
                self.engine.clone(),
                self.table,
                target,
                self.filter.clone(),
                self.ownership.clone(),
                self.stats.clone(),
                self.interrupt.clone(),
            )?;
            return Ok(Box::new(
                scan.map(|r| r.map(|(rid, d, dist)| (rid, d, Some(dist)))),
            ));
        }
        let raw = self.unscored_source()?;
        Ok(Box::new(raw.map(|r| r.map(|(rid, doc)| (rid, doc, None)))))
    }

    /// A `$text` plan: every term's entries (their scores summed per RecordId, in memory —
    /// mongod's TEXT_OR does the same), then each document fetched in RecordId order and held
    /// to the query's phrases, negations and sensitivity, then to the rest of the filter.
    fn text_source(
        &self,
        index: &Index,
        spec: Arc<TextSpec>,
        query: Arc<TextQuery>,
        prefix: &[Bson],
    ) -> DocResult<ScoredIter> {
        let mut scores: HashMap<i64, f64> = HashMap::new();
        let snap = self.engine.snapshot().map_err(storage_error)?;
        for term in &query.terms_for_bounds {
            let prefix = index::text_term_prefix(&index.def, prefix, term);
            let hi = match keystring::prefix_successor(&prefix) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            };
            let entries = self
                .engine
                .scan_at(
                    &snap,
                    index.table,
                    Bound::Included(prefix),
                    hi,
                    Direction::Forward,
                )
                .map_err(storage_error)?;
            for kv in entries {
                self.interrupt.check()?;
                self.stats.keys_examined.fetch_add(1, Ordering::Relaxed);
                let (k, v) = kv.map_err(storage_error)?;
                let rid = index::entry_rid(false, &k, &v)?;
                *scores.entry(rid).or_insert(0.0) += index::text_score(&v)?;
            }
        }
        let mut hits: Vec<(i64, f64)> = scores.into_iter().collect();
        hits.sort_unstable_by_key(|h| h.0);
        let (engine, table, stats) = (self.engine.clone(), self.table, self.stats.clone());
        let fetched = hits.into_iter().filter_map(move |(rid, score)| {
            stats.docs_examined.fetch_add(1, Ordering::Relaxed);
            let doc = match engine.get_at(&snap, table, &index::rid_bytes(rid)) {
                Ok(Some(bytes)) => decode_doc(&bytes),
                Ok(None) => return None, // deleted since its entries were read
                Err(e) => Err(storage_error(e)),
            };
            Some(doc.and_then(|d| Ok((spec.matches(&d, &query)?, rid, d, score))))
        });
        let wrapped = self
            .interrupt
            .wrap(Box::new(fetched.filter_map(|r| match r {
                Ok((true, rid, d, score)) => Some(Ok((rid, d, score))),
                Ok((false, ..)) => None,
                Err(e) => Some(Err(e)),
            }))
                as Box<
                    dyn Iterator<Item = DocResult<(i64, Document, f64)>> + Send,
                >);
        let ownership = self.ownership.clone();
        let (filter, stats) = (self.filter.clone(), self.stats.clone());
        Ok(Box::new(wrapped.filter_map(move |r| match r {
            Ok((rid, d, score)) => {
                let keep = ownership.as_ref().is_none_or(|o| o.keeps(&d))
                    && filter.as_ref().is_none_or(|f| f.matches(&d));
                keep.then(|| {
                    stats.matched.fetch_add(1, Ordering::Relaxed);
                    Ok((rid, d, Some(score)))
                })
            }
            Err(e) => Some(Err(e)),
        })))
    }

    /// Scan + fetch + filter for the plans without scores.
    fn unscored_source(&self) -> DocResult<RidIter> {
        let engine = self.engine.clone();
        let snap = engine.snapshot().map_err(storage_error)?;
        let stats = self.stats.clone();
        let dir = if self.plan.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        };
        let raw: RidIter = match &self.plan.access {
            Access::CollScan => {
                let st = stats.clone();
                let it = engine
                    .scan_at(&snap, self.table, Bound::Unbounded, Bound::Unbounded, dir)
                    .map_err(storage_error)?;
                Box::new(it.map(move |kv| {
                    st.docs_examined.fetch_add(1, Ordering::Relaxed);
                    let (k, v) = kv.map_err(storage_error)?;
                    Ok((index::rid_from(&k)?, decode_doc(&v)?))
                }))
            }
            Access::Text { .. } | Access::GeoNear { .. } => {
                unreachable!("text and near plans have their own sources")
            }
            Access::IxScan { index, ranges, .. } => {
                let mut ranges = ranges.clone();
                if self.plan.reverse {
                    ranges.reverse();
                }
                let unique = index.def.unique;
                let itable = index.table;
                // Geo and wildcard keys are per cell or per path: one document, many entries.
                let dedup = index.is_multikey() || index.def.keys_per_field();
                let (eng, snap_entries) = (engine.clone(), snap.clone());
                let table = self.table;
                let st = stats.clone();
                let mut seen: HashSet<i64> = HashSet::new();
                let entries = ranges.into_iter().flat_map(move |(lo, hi)| {
                    match eng.scan_at(&snap_entries, itable, lo, hi, dir) {
                        Ok(c) => c,
                        Err(e) => Box::new(std::iter::once(Err(e))) as engine::KvCursor,
                    }
                });
                Box::new(entries.filter_map(move |kv| {
                    st.keys_examined.fetch_add(1, Ordering::Relaxed);
                    let (k, v) = match kv {
                        Ok(x) => x,
                        Err(e) => return Some(Err(storage_error(e))),
                    };
                    let rid = match index::entry_rid(unique, &k, &v) {
                        Ok(r) => r,
                        Err(e) => return Some(Err(e)),
                    };
                    if dedup && !seen.insert(rid) {
                        return None;
                    }
                    st.docs_examined.fetch_add(1, Ordering::Relaxed);
                    match engine.get_at(&snap, table, &index::rid_bytes(rid)) {
                        Ok(Some(bytes)) => Some(decode_doc(&bytes).map(|d| (rid, d))),
                        Ok(None) => None, // an entry without its document: a bug elsewhere
                        Err(e) => Some(Err(storage_error(e))),
                    }
                }))
            }
        };
        let raw: RidIter = Box::new(self.interrupt.wrap(raw));
        let raw: RidIter = match &self.ownership {
            Some(o) => {
                let o = o.clone();
                Box::new(raw.filter(move |d| match d {
                    Ok((_, doc)) => o.keeps(doc),
                    Err(_) => true,
                }))
            }
            None => raw,
        };
        let filter = self.filter.clone();
        Ok(Box::new(raw.filter(move |d| match d {
            Ok((_, doc)) => {
                let keep = filter.as_ref().is_none_or(|f| f.matches(doc));
                if keep {
                    stats.matched.fetch_add(1, Ordering::Relaxed);
                }
                keep
            }
            Err(_) => true,
        })))
    }

    /// A tailable cursor (capped collections): documents in insertion order; at the end of
    /// the data it yields nothing, and the next read scans again from just after the last
    /// document returned, so it returns documents inserted in the meantime. `skip` drops the
    /// first matching documents; after `limit` documents the cursor ends. Every document
    /// scanned is an interruption point. A scan resumed after a document that is gone (the
    /// collection rolled over past it) fails with CappedPositionLost, one of a dropped or
    /// renamed collection with QueryPlanKilled, as in mongod.
    pub fn tail(self, signal: Arc<TailSignal>) -> DocCursor {
        register(&self.stats, &self.summary());
        let mut after: Option<Vec<u8>> = None;
        let mut buf: std::collections::VecDeque<DocResult<Document>> = Default::default();
        let (engine, table, filter) = (self.engine.clone(), self.table, self.filter.clone());
        let (interrupt, projection) = (self.interrupt.clone(), self.projection.clone());
        let mut to_skip = self.skip;
        let mut left = self.limit.unwrap_or(u64::MAX);
        let done = Arc::new(AtomicBool::new(false));
        let done_inside = done.clone();
        let signal_inside = signal.clone();
        let it = std::iter::from_fn(move || {
            if left == 0 {
                done_inside.store(true, Ordering::Release);
                return None;
            }
            while buf.is_empty() {
                if let Some(why) = signal_inside.closed() {
                    return Some(Err(tail_killed(why)));
                }
                let lower = match &after {
                    Some(k) => match engine.get(table, k) {
                        Ok(Some(_)) => Bound::Excluded(k.clone()),
                        Ok(None) => return Some(Err(position_lost(k))),
                        Err(e) => return Some(Err(storage_error(e))),
                    },
                    None => Bound::Unbounded,
                };
                let scan = match engine.scan(table, lower, Bound::Unbounded, Direction::Forward) {
                    Ok(s) => s,
                    Err(e) => return Some(Err(storage_error(e))),
                };
                let mut seen = 0;
                for kv in scan.take(TAIL_BATCH) {
                    seen += 1;
                    if let Err(e) = interrupt.check() {
                        return Some(Err(e));
                    }
                    let (k, v) = match kv {
                        Ok(x) => x,
                        Err(e) => return Some(Err(storage_error(e))),
                    };
                    after = Some(k);
                    let doc = match decode_doc(&v) {
                        Ok(d) => d,
                        Err(e) => return Some(Err(e)),
                    };
                    if !filter.as_ref().is_none_or(|f| f.matches(&doc)) {
                        continue;
                    }
                    if to_skip > 0 {
                        to_skip -= 1;
                    } else {
                        buf.push_back(match &projection {
                            Some(p) => p.apply_matched(&doc, filter.as_deref()),
                            None => Ok(doc),
                        });
                    }
                }
                if seen == 0 {
                    return None;
                }
            }
            if let Err(e) = interrupt.check() {
                return Some(Err(e));
            }
            left -= 1;
            buf.pop_front()
        });
        let mut cursor = DocCursor::with_collation(Box::new(it), self.collation.clone());
        cursor.done = Some(done);
        cursor.scan = Some((self.stats.clone(), self.summary()));
        cursor.tail = Some(signal);
        cursor
    }

    /// The full pipeline of stages.
    pub fn run(self) -> DocResult<DocCursor> {
        let _in_effect = collation::scope(self.collation.clone());
        let text = matches!(self.plan.access, Access::Text { .. });
        let carry_rid = self.return_key || self.show_record_id;
        let src: DocIter = Box::new(self.scored_source()?.map(move |r| {
            r.map(|(rid, mut d, score)| {
                if let Some(s) = score.filter(|_| text) {
                    d.insert(SCORE_FIELD, s);
                }
                if carry_rid {
                    d.insert(RECORD_ID_FIELD, rid);
                }
                d
            })
        }));
        let sorted: DocIter = match (&self.sort, self.plan.sort_provided) {
            (Some(s), false) => {
                let mut docs: Vec<Document> = src.collect::<DocResult<_>>()?;
                docs.sort_by(|a, b| s.compare(a, b));
                Box::new(docs.into_iter().map(Ok))
            }
            _ => src,
        };
        let skipped: DocIter = if self.skip > 0 {
            Box::new(sorted.skip(self.skip as usize))
        } else {
            sorted
        };
        let limited: DocIter = match self.limit {
            Some(n) if n > 0 => Box::new(skipped.take(n as usize)),
            _ => skipped,
        };
        let filter = self.filter.clone();
        let scan = Some((self.stats.clone(), self.summary()));
        let projected: DocIter = if carry_rid {
            let shaping = ResultShape {
                plan: self.plan,
                projection: self.projection,
                filter,
                return_key: self.return_key,
            };
            Box::new(limited.map(move |d| d.and_then(|d| shaping.apply(d))))
        } else {
            match self.projection {
                Some(p) => Box::new(
                    limited.map(move |d| d.and_then(|d| p.apply_matched(&d, filter.as_deref()))),
                ),
                None => limited,
            }
        };
        let mut cursor = DocCursor::with_collation(
            if text && !self.keep_score {
                Box::new(projected.map(|d| {
                    d.map(|mut d| {
                        d.remove(SCORE_FIELD);
                        d
                    })
                }))
            } else {
                projected
            },
            self.collation.clone(),
        );
        cursor.scan = scan;
        Ok(cursor)
    }
}

/// The last stage of a find with `returnKey` or `showRecordId`: the index key, or the
/// projected document with its RecordId (mongod drops the RecordId of a returned key).
struct ResultShape {
    plan: Plan,
    projection: Option<Arc<Projection>>,
    filter: Option<Arc<Matcher>>,
    return_key: bool,
}

impl ResultShape {
    fn apply(&self, mut doc: Document) -> DocResult<Document> {
        let rid = doc.remove(RECORD_ID_FIELD);
        debug_assert!(
            matches!(rid, Some(Bson::Int64(_))),
            "the scan carries the RecordId"
        );
        if self.return_key {
            return returned_key(&self.plan, &doc);
        }
        let mut out = match &self.projection {
            Some(p) => p.apply_matched(&doc, self.filter.as_deref())?,
            None => doc,
        };
        if let Some(rid) = rid {
            out.insert(RECORD_ID_FIELD, rid);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::TailSignal;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_waiter_wakes_on_insert_not_at_its_timeout() {
        let signal = Arc::new(TailSignal::default());
        let seen = signal.generation();
        let writer = signal.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            writer.notify_insert();
        });
        let started = Instant::now();
        signal.wait_past(seen, Duration::from_secs(20));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(signal.generation(), seen + 1);
        t.join().unwrap();
    }

    #[test]
    fn a_waiter_times_out_without_inserts_and_a_close_wakes_it() {
        let signal = TailSignal::default();
        let started = Instant::now();
        signal.wait_past(signal.generation(), Duration::from_millis(30));
        assert!(started.elapsed() >= Duration::from_millis(30));
        signal.close("dropped");
        signal.close("renamed");
        assert_eq!(signal.closed(), Some("dropped"));
        let started = Instant::now();
        signal.wait_past(signal.generation(), Duration::from_secs(20));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[cfg(test)]
mod result_shape_tests {
    use super::*;
    use crate::index::IndexDef;
    use bson::{bson, doc};

    fn scan(spec: Document, ranges: Vec<crate::planner::Range>) -> Plan {
        let index = Arc::new(Index {
            def: IndexDef::parse(&spec).unwrap(),
            ident: "index-1".into(),
            table: 1,
            multikey: false.into(),
        });
        Plan::forward_ixscan(&index, ranges, Document::new())
    }

    fn shape(plan: Plan, return_key: bool) -> ResultShape {
        ResultShape {
            plan,
            projection: None,
            filter: None,
            return_key,
        }
    }

    #[test]
    fn the_returned_key_is_the_entry_the_scan_read() {
        let full = vec![(Bound::Unbounded, Bound::Unbounded)];
        let d = doc! {"_id": 1, "a": {"b": 7}, "c": "x"};
        let plan = scan(
            doc! {"key": {"a.b": 1, "c": -1}, "name": "ab_c"},
            full.clone(),
        );
        assert_eq!(returned_key(&plan, &d).unwrap(), doc! {"a.b": 7, "c": "x"});
        // A multikey document: the key inside the scanned range, not the first one.
        let from_5 = vec![(
            Bound::Included(keystring::encode_one(&bson!(5), false)),
            Bound::Unbounded,
        )];
        let plan = scan(doc! {"key": {"t": 1}, "name": "t_1"}, from_5);
        let arr = doc! {"_id": 2, "t": [1, 6, 9]};
        assert_eq!(returned_key(&plan, &arr).unwrap(), doc! {"t": 6});
        // A hashed field shows its hash; a collection scan has no key.
        let plan = scan(doc! {"key": {"h": "hashed"}, "name": "h_hashed"}, full);
        let hashed = query::hash::hash_value(&bson!("v"));
        let got = returned_key(&plan, &doc! {"h": "v"}).unwrap();
        assert_eq!(got, doc! {"h": hashed});
        let collscan = Plan {
            access: Access::CollScan,
            reverse: false,
            sort_provided: false,
        };
        assert_eq!(returned_key(&collscan, &d).unwrap(), Document::new());
    }

    #[test]
    fn show_record_id_appends_it_after_the_projection_return_key_drops_it() {
        let full = vec![(Bound::Unbounded, Bound::Unbounded)];
        let carried = doc! {"_id": 1, "a": 2, RECORD_ID_FIELD: 42_i64};
        let mut with_projection = shape(
            scan(doc! {"key": {"a": 1}, "name": "a_1"}, full.clone()),
            false,
        );
        with_projection.projection = Some(Arc::new(
            Projection::parse(&doc! {"a": 1, "_id": 0}).unwrap(),
        ));
        let got = with_projection.apply(carried.clone()).unwrap();
        assert_eq!(got, doc! {"a": 2, RECORD_ID_FIELD: 42_i64});
        let keyed = shape(scan(doc! {"key": {"a": 1}, "name": "a_1"}, full), true);
        assert_eq!(keyed.apply(carried).unwrap(), doc! {"a": 2});
    }
}
