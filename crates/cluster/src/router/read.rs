//! Reads through the router: targeting (equality and range on the shard key, scatter-gather
//! otherwise), cursors merged across shards with `getMore` on each (sorted merge when there is
//! a sort), skip and limit applied after the merge, merged `count` and `distinct`, and
//! aggregation split into a shard part and a merge part.

use super::{admin, is_stale, namespace, Router, MAX_STALE_RETRIES};
use crate::meta::CollSnapshot;
use crate::transport::{is_ok, reply_error, ShardConn};
use bson::{doc, Bson, Document};
use docdb::{DocCursor, DocError, DocResult, Interrupt};
use query::aggregate::{self, DocIter};
use query::compare::compare_bson;
use query::matcher::Matcher;
use query::projection::Projection;
use query::sort::SortSpec;
use server::hook::CommandCall;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

const DEFAULT_FIRST_BATCH: usize = 101;

/// The shards a filter can match in a routing table (every shard with chunks when the filter
/// does not pin the shard key).
pub(crate) fn target_shards(t: &CollSnapshot, filter: &Document) -> Vec<String> {
    let Some(ranges) = t.key.target_ranges(filter) else {
        return t.shards();
    };
    let mut out: Vec<String> = Vec::new();
    for (lo, hi) in ranges {
        for c in &t.chunks {
            let above_lo = match &lo {
                Bound::Included(l) | Bound::Excluded(l) => c.max_enc > *l,
                Bound::Unbounded => true,
            };
            let below_hi = match &hi {
                Bound::Included(h) => c.min_enc <= *h,
                Bound::Excluded(h) => c.min_enc < *h,
                Bound::Unbounded => true,
            };
            if above_lo && below_hi && !out.contains(&c.shard) {
                out.push(c.shard.clone());
            }
        }
    }
    out.sort();
    out
}

/// Where a command on `db.coll` goes: the routing table's shards for `filter`, or the
/// database's primary for an unsharded collection (nothing if the database does not exist).
pub(crate) fn targets(
    r: &Router,
    db: &str,
    ns: &str,
    filter: &Document,
) -> DocResult<(Option<Arc<CollSnapshot>>, Vec<String>)> {
    match r.table(ns)? {
        Some(t) => {
            let s = target_shards(&t, filter);
            Ok((Some(t), s))
        }
        None => Ok((
            None,
            r.database(db, false)?
                .map(|d| vec![d.primary])
                .unwrap_or_default(),
        )),
    }
}

/// Sends one command to several shards at once (with their versions); each shard's reply.
pub(crate) fn send_parallel(
    r: &Router,
    shards: &[String],
    cmd: &Document,
    table: Option<&CollSnapshot>,
) -> Vec<(String, DocResult<Document>)> {
    if let [one] = shards {
        return vec![(one.clone(), r.send_versioned(one, cmd.clone(), table))];
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = shards
            .iter()
            .map(|sh| {
                let cmd = cmd.clone();
                (
                    sh.clone(),
                    s.spawn(move || r.send_versioned(sh, cmd, table)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(sh, h)| {
                let reply = h
                    .join()
                    .unwrap_or_else(|_| Err(DocError::internal_error("shard call panicked")));
                (sh, reply)
            })
            .collect()
    })
}

/// Sends one command to several shards at once (with their versions); any StaleConfig reply
/// makes the whole round stale (`Ok(None)`), any other error fails it.
pub(crate) fn scatter(
    r: &Router,
    shards: &[String],
    cmd: &Document,
    table: Option<&CollSnapshot>,
) -> DocResult<Option<Vec<(String, Document)>>> {
    let replies = send_parallel(r, shards, cmd, table);
    let mut out = Vec::new();
    let mut stale = false;
    for (sh, rep) in replies {
        let rep = rep?;
        if !is_ok(&rep) {
            let e = reply_error(&rep);
            if is_stale(e.code) {
                stale = true;
                continue;
            }
            return Err(e);
        }
        out.push((sh, rep));
    }
    Ok(if stale { None } else { Some(out) })
}

/// Runs `make(table, shards)` → per-shard replies, reloading the routing table and retrying
/// while shards say it is stale.
/// Per-shard replies and the routing table they were sent with.
pub(crate) type ShardReplies = (Vec<(String, Document)>, Option<Arc<CollSnapshot>>);

pub(crate) fn with_retries(
    r: &Router,
    db: &str,
    ns: &str,
    filter: &Document,
    cmd: &Document,
) -> DocResult<ShardReplies> {
    for _ in 0..MAX_STALE_RETRIES {
        let (table, shards) = targets(r, db, ns, filter)?;
        if let Some(replies) = scatter(r, &shards, cmd, table.as_deref())? {
            return Ok((replies, table));
        }
        r.reload(ns)?;
    }
    Err(DocError::with_code(
        13388,
        "StaleConfig",
        format!("routing information for {ns} kept changing; gave up after {MAX_STALE_RETRIES} attempts"),
    ))
}

/// One shard's cursor, pulled with getMore as the merge needs it; killed when dropped early.
struct Remote {
    conn: Arc<dyn ShardConn>,
    db: String,
    coll: String,
    id: i64,
    buf: VecDeque<Document>,
}

impl Remote {
    fn from_reply(
        conn: Arc<dyn ShardConn>,
        db: &str,
        coll: &str,
        reply: &Document,
    ) -> DocResult<Remote> {
        let c = reply
            .get_document("cursor")
            .map_err(|_| DocError::internal_error("a shard's reply has no cursor"))?;
        let batch = c
            .get_array("firstBatch")
            .map_err(|_| DocError::internal_error("a shard's cursor has no firstBatch"))?;
        Ok(Remote {
            conn,
            db: db.to_string(),
            coll: coll.to_string(),
            id: c.get_i64("id").unwrap_or(0),
            buf: batch
                .iter()
                .filter_map(|d| d.as_document().cloned())
                .collect(),
        })
    }
    fn peek(&mut self) -> DocResult<Option<&Document>> {
        while self.buf.is_empty() && self.id != 0 {
            let reply = self.conn.call(
                &doc! {"getMore": self.id, "collection": self.coll.clone(), "$db": self.db.clone()},
            )?;
            if !is_ok(&reply) {
                self.id = 0;
                return Err(reply_error(&reply));
            }
            let c = reply.get_document("cursor").cloned().unwrap_or_default();
            self.id = c.get_i64("id").unwrap_or(0);
            if let Ok(b) = c.get_array("nextBatch") {
                self.buf
                    .extend(b.iter().filter_map(|d| d.as_document().cloned()));
            }
        }
        Ok(self.buf.front())
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        if self.id != 0 {
            let _ = self.conn.call(&doc! {"killCursors": self.coll.clone(), "cursors": [self.id], "$db": self.db.clone()});
        }
    }
}

/// The shards' streams as one: in sort order when `sort` is given, else one shard after
/// another.
struct Merge {
    remotes: Vec<Remote>,
    sort: Option<SortSpec>,
    at: usize,
}

impl Iterator for Merge {
    type Item = DocResult<Document>;
    fn next(&mut self) -> Option<Self::Item> {
        match &self.sort {
            None => {
                while self.at < self.remotes.len() {
                    match self.remotes[self.at].peek() {
                        Err(e) => return Some(Err(e)),
                        Ok(Some(_)) => return self.remotes[self.at].buf.pop_front().map(Ok),
                        Ok(None) => self.at += 1,
                    }
                }
                None
            }
            Some(sort) => {
                let mut best: Option<usize> = None;
                for i in 0..self.remotes.len() {
                    if let Err(e) = self.remotes[i].peek() {
                        return Some(Err(e));
                    }
                    let Some(d) = self.remotes[i].buf.front() else {
                        continue;
                    };
                    let better = match best {
                        None => true,
                        Some(b) => sort
                            .compare(d, self.remotes[b].buf.front().expect("peeked"))
                            .is_lt(),
                    };
                    if better {
                        best = Some(i);
                    }
                }
                best.and_then(|b| self.remotes[b].buf.pop_front()).map(Ok)
            }
        }
    }
}

fn merged(
    r: &Router,
    db: &str,
    coll: &str,
    replies: Vec<(String, Document)>,
    sort: Option<&Document>,
) -> DocResult<Merge> {
    let mut remotes = Vec::new();
    for (shard, rep) in replies {
        remotes.push(Remote::from_reply(r.shard_conn(&shard)?, db, coll, &rep)?);
    }
    Ok(Merge {
        remotes,
        sort: match sort {
            Some(s) if !s.is_empty() => Some(SortSpec::parse(s)?),
            _ => None,
        },
        at: 0,
    })
}

fn opt_doc(cmd: &Document, k: &str) -> DocResult<Option<Document>> {
    match cmd.get(k) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d.clone())),
        Some(_) => Err(DocError::type_mismatch(format!("'{k}' must be an object"))),
    }
}

fn opt_i64(cmd: &Document, k: &str) -> DocResult<Option<i64>> {
    match cmd.get(k) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => query::compare::Num::of(v)
            .map(|n| Some(n.as_f64() as i64))
            .ok_or_else(|| DocError::type_mismatch(format!("'{k}' must be a number"))),
    }
}

/// What a find asks of its result besides the filter; the default is everything, unsorted.
#[derive(Default)]
pub(crate) struct FindShape {
    pub sort: Option<Document>,
    pub projection: Option<Document>,
    pub skip: u64,
    pub limit: Option<u64>,
    /// The shards' batch size.
    pub batch: Option<i64>,
}

/// A scatter-gather find as one cursor: the shards get `skip + limit` as their limit, the
/// router skips, limits and (when a sort needs fields the projection drops) projects.
pub(crate) fn scatter_find(
    r: &Router,
    db: &str,
    coll: &str,
    filter: &Document,
    shape: FindShape,
) -> DocResult<DocCursor> {
    let FindShape {
        sort,
        projection,
        skip,
        limit,
        batch,
    } = shape;
    let ns = format!("{db}.{coll}");
    let mut cmd = doc! {"find": coll, "filter": filter.clone(), "$db": db};
    if let Some(s) = &sort {
        cmd.insert("sort", s.clone());
    }
    let project_here = sort.is_some() && projection.is_some();
    if let (Some(p), false) = (&projection, project_here) {
        cmd.insert("projection", p.clone());
    }
    if let Some(l) = limit {
        cmd.insert("limit", (l + skip) as i64);
    }
    if let Some(b) = batch {
        cmd.insert("batchSize", b);
    }
    let (replies, _) = with_retries(r, db, &ns, filter, &cmd)?;
    let m = merged(r, db, coll, replies, sort.as_ref())?;
    let mut it: DocIter = Box::new(m.skip(skip as usize));
    if let Some(l) = limit {
        it = Box::new(it.take(l as usize));
    }
    if let (Some(p), true) = (projection, project_here) {
        let p = Projection::parse(&p)?;
        it = Box::new(it.map(move |d| d.and_then(|d| p.apply_matched(&d, None))));
    }
    Ok(DocCursor::new(it))
}

pub fn find(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    let cmd = call.cmd;
    if db == "config" {
        return admin::config_find(r, call, &coll);
    }
    let filter = opt_doc(cmd, "filter")?.unwrap_or_default();
    if Matcher::new_for_find(&filter)?.near().is_some() {
        return Err(near_through_router());
    }
    let skip = match opt_i64(cmd, "skip")? {
        Some(s) if s < 0 => return Err(DocError::bad_value("skip value must be non-negative")),
        s => s.unwrap_or(0) as u64,
    };
    let limit = opt_i64(cmd, "limit")?.filter(|&l| l != 0);
    let batch = opt_i64(cmd, "batchSize")?;
    let single = cmd.get_bool("singleBatch").unwrap_or(false) || limit.is_some_and(|l| l < 0);
    let cursor = scatter_find(
        r,
        &db,
        &coll,
        &filter,
        FindShape {
            sort: opt_doc(cmd, "sort")?.filter(|s| !s.is_empty()),
            projection: opt_doc(cmd, "projection")?.filter(|p| !p.is_empty()),
            skip,
            limit: limit.map(|l| l.unsigned_abs()),
            batch,
        },
    )?;
    let first = batch
        .map(|b| b.max(0) as usize)
        .unwrap_or(DEFAULT_FIRST_BATCH);
    call.cursor_reply(&format!("{db}.{coll}"), cursor, first, single)
}

pub fn count(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    if db == "config" {
        let filter = opt_doc(call.cmd, "query")?.unwrap_or_default();
        let m = Matcher::new(&filter)?;
        let n = admin::config_docs(r, &coll)?
            .iter()
            .filter(|d| m.matches(d))
            .count();
        return Ok(doc! {"n": n as i32});
    }
    let filter = opt_doc(call.cmd, "query")?.unwrap_or_default();
    let skip = opt_i64(call.cmd, "skip")?.unwrap_or(0).max(0);
    let limit = opt_i64(call.cmd, "limit")?
        .filter(|&l| l != 0)
        .map(|l| l.abs());
    let mut cmd = doc! {"count": coll.clone(), "query": filter.clone(), "$db": db.clone()};
    if let Some(l) = limit {
        cmd.insert("limit", l + skip);
    }
    let (replies, _) = with_retries(r, &db, &format!("{db}.{coll}"), &filter, &cmd)?;
    let total: i64 = replies
        .iter()
        .map(|(_, rep)| crate::int_field(rep.get("n")))
        .sum();
    let mut n = (total - skip).max(0);
    if let Some(l) = limit {
        n = n.min(l);
    }
    Ok(doc! {"n": n as i32})
}

pub fn distinct(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    let key = call
        .cmd
        .get_str("key")
        .map_err(|_| DocError::failed_to_parse("distinct needs a string 'key'"))?;
    let filter = opt_doc(call.cmd, "query")?.unwrap_or_default();
    let cmd =
        doc! {"distinct": coll.clone(), "key": key, "query": filter.clone(), "$db": db.clone()};
    let (replies, _) = with_retries(r, &db, &format!("{db}.{coll}"), &filter, &cmd)?;
    let mut values: Vec<Bson> = replies
        .into_iter()
        .flat_map(|(_, rep)| rep.get_array("values").cloned().unwrap_or_default())
        .collect();
    values.sort_by(compare_bson);
    values.dedup_by(|a, b| compare_bson(a, b).is_eq());
    Ok(doc! {"values": values})
}

/// How the shards' aggregation streams are combined before the rest of the pipeline.
enum MergeKind {
    Concat,
    Sorted(Document),
}

/// Splits a pipeline: leading `$match` stages go to the shards; then a `$sort` (with a
/// following `$limit`) runs on the shards and the router merges in order; or a `$group`
/// whose accumulators combine ($sum, $min, $max, $first, $last) runs partially on the shards
/// and finally on the router. Everything else runs on the merged stream.
fn split_pipeline(p: &[Document]) -> (Vec<Document>, MergeKind, Vec<Document>) {
    let mut shard: Vec<Document> = Vec::new();
    let mut i = 0;
    while i < p.len() && p[i].contains_key("$match") {
        shard.push(p[i].clone());
        i += 1;
    }
    if let Some(Bson::Document(s)) = p.get(i).and_then(|st| st.get("$sort")) {
        shard.push(p[i].clone());
        if let Some(l) = p.get(i + 1).filter(|st| st.contains_key("$limit")) {
            shard.push(l.clone());
        }
        return (shard, MergeKind::Sorted(s.clone()), p[i + 1..].to_vec());
    }
    if let Some(Bson::Document(g)) = p.get(i).and_then(|st| st.get("$group")) {
        if let Some(fin) = final_group(g) {
            shard.push(p[i].clone());
            let mut rest = vec![doc! {"$group": fin}];
            rest.extend_from_slice(&p[i + 1..]);
            return (shard, MergeKind::Concat, rest);
        }
    }
    if let Some(l) = p.get(i).filter(|st| st.contains_key("$limit")) {
        shard.push(l.clone());
    }
    (shard, MergeKind::Concat, p[i..].to_vec())
}

/// The router's `$group` over partial groups, if every accumulator combines.
fn final_group(g: &Document) -> Option<Document> {
    let mut fin = doc! {"_id": "$_id"};
    for (k, v) in g {
        if k == "_id" {
            continue;
        }
        let acc = v.as_document().filter(|d| d.len() == 1)?;
        let op = acc.keys().next()?.as_str();
        let combine = match op {
            "$sum" => "$sum",
            "$min" => "$min",
            "$max" => "$max",
            "$first" => "$first",
            "$last" => "$last",
            _ => return None,
        };
        fin.insert(k.clone(), doc! {combine: format!("${k}")});
    }
    Some(fin)
}

pub fn aggregate(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    let pipeline: Vec<Document> = call
        .cmd
        .get_array("pipeline")
        .map_err(|_| DocError::failed_to_parse("aggregate needs a 'pipeline' array"))?
        .iter()
        .map(|s| {
            s.as_document()
                .cloned()
                .ok_or_else(|| DocError::type_mismatch("pipeline stages must be objects"))
        })
        .collect::<DocResult<_>>()?;
    for st in &pipeline {
        if st.contains_key("$geoNear") {
            return Err(near_through_router());
        }
        if st.contains_key("$out") || st.contains_key("$merge") {
            return Err(DocError::illegal_operation(
                "$out and $merge are not supported through a flashdoc router",
            ));
        }
    }
    let first = call
        .cmd
        .get_document("cursor")
        .ok()
        .and_then(|c| opt_i64(c, "batchSize").ok().flatten())
        .map(|b| b.max(0) as usize)
        .unwrap_or(DEFAULT_FIRST_BATCH);
    let ns = format!("{db}.{coll}");
    let lookup_router = r.me();
    let lookup_db = db.clone();
    let lookup = move |other: &str| -> DocResult<Vec<Document>> {
        let r = lookup_router
            .upgrade()
            .ok_or_else(|| DocError::internal_error("router closed"))?;
        scatter_find(
            &r,
            &lookup_db,
            other,
            &Document::new(),
            FindShape::default(),
        )?
        .collect()
    };
    if db == "config" {
        let docs = admin::config_docs(r, &coll)?;
        let input: DocIter = Box::new(docs.into_iter().map(Ok));
        let out = aggregate::run_pipeline(&pipeline, input, &lookup, &Interrupt::none())?;
        let out: DocIter = Box::new(out.into_iter().map(Ok));
        return call.cursor_reply(&ns, DocCursor::new(out), first, false);
    }
    let (shard_part, kind, rest) = split_pipeline(&pipeline);
    let filter = shard_part
        .first()
        .and_then(|s| s.get_document("$match").ok().cloned())
        .unwrap_or_default();
    let shard_cmd = doc! {
        "aggregate": coll.clone(),
        "pipeline": shard_part.into_iter().map(Bson::Document).collect::<Vec<_>>(),
        "cursor": {},
        "$db": db.clone(),
    };
    let (replies, _) = with_retries(r, &db, &ns, &filter, &shard_cmd)?;
    let sort = match &kind {
        MergeKind::Sorted(s) => Some(s.clone()),
        MergeKind::Concat => None,
    };
    let m: DocIter = Box::new(merged(r, &db, &coll, replies, sort.as_ref())?);
    let out = if rest.is_empty() {
        m
    } else {
        let out = aggregate::run_pipeline(&rest, m, &lookup, &Interrupt::none())?;
        Box::new(out.into_iter().map(Ok))
    };
    call.cursor_reply(&ns, DocCursor::new(out), first, false)
}

/// `explain` of a find, count, distinct or aggregate: each target shard's explain.
pub fn explain(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let inner = call
        .cmd
        .get_document("explain")
        .map_err(|_| DocError::failed_to_parse("explain needs a command document"))?;
    let name = inner.keys().next().cloned().unwrap_or_default();
    let coll = inner
        .get_str(&name)
        .map_err(|_| DocError::invalid_namespace("explain needs a collection"))?;
    let filter = inner
        .get_document("filter")
        .or_else(|_| inner.get_document("query"))
        .cloned()
        .unwrap_or_default();
    let db = call.db.to_string();
    let cmd = doc! {"explain": inner.clone(), "$db": db.clone()};
    let (replies, table) = with_retries(r, &db, &format!("{db}.{coll}"), &filter, &cmd)?;
    let shards: Vec<Bson> = replies
        .into_iter()
        .map(|(s, rep)| Bson::Document(doc! {"shardName": s, "explain": rep}))
        .collect();
    let stage = if shards.len() == 1 {
        "SINGLE_SHARD"
    } else {
        "SHARD_MERGE"
    };
    Ok(doc! {
        "queryPlanner": {"mongosPlannerVersion": 1, "winningPlan": {"stage": stage, "shards": shards}},
        "sharded": table.is_some(),
    })
}

/// Each shard orders its own `$near`/`$geoNear` results by distance; the router has no merge
/// by distance, so it refuses them rather than return them out of order.
fn near_through_router() -> DocError {
    DocError::illegal_operation(
        "$near, $nearSphere and $geoNear are not supported through a flashdoc router (shards' results would need a merge by distance); use $geoWithin, or query a shard",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelines_split_into_shard_and_merge_parts() {
        let p = vec![
            doc! {"$match": {"a": 1}},
            doc! {"$sort": {"b": 1}},
            doc! {"$limit": 5},
            doc! {"$project": {"b": 1}},
        ];
        let (s, k, rest) = split_pipeline(&p);
        assert_eq!(s.len(), 3);
        assert!(matches!(k, MergeKind::Sorted(_)));
        assert_eq!(rest, p[2..].to_vec());
        let g = vec![
            doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "m": {"$max": "$v"}}},
            doc! {"$sort": {"_id": 1}},
        ];
        let (s, _, rest) = split_pipeline(&g);
        assert_eq!(s, vec![g[0].clone()]);
        assert_eq!(
            rest[0],
            doc! {"$group": {"_id": "$_id", "n": {"$sum": "$n"}, "m": {"$max": "$m"}}}
        );
        // $avg does not combine from partial groups: the whole group runs on the router.
        let a = vec![doc! {"$group": {"_id": null, "x": {"$avg": "$v"}}}];
        let (s, _, rest) = split_pipeline(&a);
        assert!(s.is_empty());
        assert_eq!(rest, a);
    }
}
