//! `splitVector` (shard side), as mongod computes it, with the split-point policy applied.
//!
//! MongoDB 3.6: the average document size is the range's data size over its count; the keys
//! per chunk are `maxChunkSizeBytes / (2 × average)` (so split chunks start half full), capped
//! by `maxChunkObjects` (250 000); walking the shard-key index over `[min, max)`, every
//! keyCount-th key is a point (a key equal to the previous point is skipped); `force` returns
//! the median key by count. Fewer keys than keyCount: no points.
//!
//! flashdoc's addition: a `policy` field (the `split` settings document) moves the points
//! (module `split`): the reply keeps the untuned `defaultSplitKeys` and the access statistics
//! used, so a router or the lab can see what the policy changed.

use super::ShardNode;
use crate::split::{self, SplitPolicy};
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use std::ops::Bound;

const MAX_CHUNK_OBJECTS: i64 = 250_000;

pub fn split_vector(node: &ShardNode, cmd: &Document) -> DocResult<Document> {
    let ns = cmd
        .get_str("splitVector")
        .map_err(|_| DocError::failed_to_parse("splitVector needs a namespace string"))?;
    let (db, coll) = ns
        .split_once('.')
        .ok_or_else(|| DocError::invalid_namespace(format!("invalid namespace '{ns}'")))?;
    let meta = node
        .refresh(ns)?
        .ok_or_else(|| DocError::namespace_not_found(format!("{ns} is not sharded")))?;
    let key = meta.key().clone();
    if cmd.get_document("keyPattern").ok() != Some(&key.pattern) {
        return Err(DocError::bad_value(format!(
            "keyPattern must be the shard key {}",
            key.pattern
        )));
    }
    let SplitVectorArgs {
        min,
        max,
        max_bytes,
        force,
        max_points,
        max_objects,
    } = SplitVectorArgs::parse(cmd)?;
    let (lo, hi) = (key.encode(min), key.encode(max));
    let range = range_keys(node, db, coll, &key, &lo, hi)?;
    let (keys, encs, bytes) = (&range.keys, &range.encs, range.bytes);
    let n = keys.len();
    if n == 0 {
        return Ok(doc! {"splitKeys": []});
    }
    if encs.first() == encs.last() {
        // One key value: nothing to split on (mongod's low-cardinality case).
        return Ok(doc! {"splitKeys": [], "warning": "chunk has only one key value"});
    }
    if force {
        let mid = split::every_kth(encs, n / 2, 1);
        let pts: Vec<Document> = mid.iter().map(|&i| keys[i].clone()).collect();
        return Ok(doc! {"splitKeys": split::split_keys_bson(&pts)});
    }
    let avg = (bytes / n as i64).max(1);
    let key_count = ((max_bytes / (2 * avg)).min(max_objects)).max(1) as usize;
    let default_idx = split::every_kth(encs, key_count, max_points);
    let policy = match cmd.get_document("policy") {
        Ok(p) => SplitPolicy::from_doc(p)?,
        Err(_) => SplitPolicy::Default,
    };
    let chunk_min = meta
        .owned_chunk(&lo)
        .map(|c| c.min_enc.clone())
        .unwrap_or(lo);
    let (mean, count, per_key) = node.access_stats(ns, &chunk_min);
    let tuned = tune(
        &policy,
        &key,
        &range,
        (min, max),
        &default_idx,
        mean,
        per_key,
    );
    let pick = |idx: &[usize]| -> Vec<Document> { idx.iter().map(|&i| keys[i].clone()).collect() };
    let mut reply = doc! {
        "splitKeys": split::split_keys_bson(&pick(&tuned)),
        "defaultSplitKeys": split::split_keys_bson(&pick(&default_idx)),
        "policy": policy.name(),
        "accessCount": count as i64,
        "keys": n as i64,
        "avgObjSize": avg,
    };
    if let Some(m) = mean {
        reply.insert("accessMean", m);
    }
    Ok(reply)
}

/// The sizing fields of a `splitVector` command.
struct SplitVectorArgs<'a> {
    min: &'a Document,
    max: &'a Document,
    max_bytes: i64,
    force: bool,
    max_points: usize,
    max_objects: i64,
}

impl<'a> SplitVectorArgs<'a> {
    fn parse(cmd: &'a Document) -> DocResult<SplitVectorArgs<'a>> {
        let min = cmd
            .get_document("min")
            .map_err(|_| DocError::failed_to_parse("splitVector needs min"))?;
        let max = cmd
            .get_document("max")
            .map_err(|_| DocError::failed_to_parse("splitVector needs max"))?;
        let max_bytes = match (cmd.get("maxChunkSizeBytes"), cmd.get("maxChunkSize")) {
            (Some(v), _) => number(v)?,
            (None, Some(mb)) => number(mb)? * 1024 * 1024,
            (None, None) => 0,
        };
        let force = cmd.get_bool("force").unwrap_or(false);
        if max_bytes <= 0 && !force {
            return Err(DocError::bad_value(
                "need to specify the desired max chunk size (maxChunkSize or maxChunkSizeBytes)",
            ));
        }
        let max_points = match cmd.get("maxSplitPoints") {
            Some(v) if !matches!(v, Bson::Null) => number(v)?.max(1) as usize,
            _ => usize::MAX,
        };
        let max_objects = match cmd.get("maxChunkObjects") {
            Some(v) if !matches!(v, Bson::Null) => number(v)?.max(1),
            _ => MAX_CHUNK_OBJECTS,
        };
        Ok(SplitVectorArgs {
            min,
            max,
            max_bytes,
            force,
            max_points,
            max_objects,
        })
    }
}

/// The documents of a key range in shard-key order, as routing keys.
struct RangeKeys {
    keys: Vec<Document>,
    /// Each key encoded.
    encs: Vec<Vec<u8>>,
    /// The documents' total BSON size.
    bytes: i64,
}

/// Walks the shard-key index over `[lo, hi)`.
fn range_keys(
    node: &ShardNode,
    db: &str,
    coll: &str,
    key: &crate::shardkey::ShardKey,
    lo: &[u8],
    hi: Vec<u8>,
) -> DocResult<RangeKeys> {
    let mut keys: Vec<Document> = Vec::new();
    let mut encs: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0i64;
    for d in node.db.scan_index(
        db,
        coll,
        &key.index_key(),
        Bound::Included(lo.to_vec()),
        Bound::Excluded(hi),
    )? {
        let d = d?;
        bytes += bson::to_vec(&d).map(|v| v.len() as i64).unwrap_or(0);
        let rk = key.routing_key_of_doc(&d);
        encs.push(key.encode(&rk));
        keys.push(rk);
    }
    Ok(RangeKeys { keys, encs, bytes })
}

/// Applies a policy to the default points (indices into the range's keys).
fn tune(
    policy: &SplitPolicy,
    key: &crate::shardkey::ShardKey,
    range: &RangeKeys,
    (min, max): (&Document, &Document),
    default_idx: &[usize],
    mean: Option<f64>,
    per_key: Option<Vec<(Vec<u8>, u64)>>,
) -> Vec<usize> {
    let (keys, encs) = (&range.keys, &range.encs);
    if default_idx.is_empty() {
        return Vec::new();
    }
    match policy {
        SplitPolicy::Default | SplitPolicy::Load(_) => default_idx.to_vec(),
        SplitPolicy::HassStatic { .. } | SplitPolicy::HassDynamic { .. } => {
            let Some(mean) = mean else {
                return default_idx.to_vec();
            };
            let proj: Option<Vec<f64>> = keys.iter().map(|k| key.project(k, min, max)).collect();
            let Some(proj) = proj else {
                return default_idx.to_vec();
            };
            let points: Vec<f64> = default_idx.iter().map(|&i| proj[i]).collect();
            let (lo, hi) = (proj[0], proj[proj.len() - 1]);
            let tuned = match policy {
                SplitPolicy::HassStatic { ts } => split::hass_static(&points, lo, hi, mean, *ts),
                SplitPolicy::HassDynamic { ts, td } => {
                    split::hass_dynamic(&points, lo, hi, mean, *ts, *td)
                }
                _ => unreachable!(),
            };
            split::snap(&tuned, &proj)
        }
        SplitPolicy::Oracle => {
            let Some(counts) = per_key else {
                return default_idx.to_vec();
            };
            let lookup: std::collections::HashMap<&[u8], u64> =
                counts.iter().map(|(k, n)| (k.as_slice(), *n)).collect();
            // A key value counts once, at its first document.
            let weights: Vec<u64> = encs
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    if i > 0 && encs[i - 1] == *e {
                        0
                    } else {
                        lookup.get(e.as_slice()).copied().unwrap_or(0)
                    }
                })
                .collect();
            let q = split::weighted_quantiles(&weights, default_idx.len());
            if q.is_empty() {
                default_idx.to_vec()
            } else {
                q
            }
        }
    }
}

fn number(v: &Bson) -> DocResult<i64> {
    query::compare::Num::of(v)
        .map(|n| n.as_f64() as i64)
        .ok_or_else(|| DocError::type_mismatch(format!("expected a number, not {v}")))
}
