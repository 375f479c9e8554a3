//! MongoDB 3.6's auto-split, as mongos runs it (the trigger is the same for `default`,
//! `hass-static`, `hass-dynamic` and `oracle`; they differ only in where the points go):
//!
//! 1. after each write, the bytes written (an inserted document, an update's object) are
//!    added to the chunk's counter;
//! 2. the desired chunk size ramps with the collection's chunk count (1 KB with one chunk,
//!    0.5 MB under 3, max(max/4, 1 MB) under 10, max(max/2, 1 MB) under 20, then the
//!    configured `chunksize`), never above the configured size;
//! 3. when the counter reaches a fifth of the desired size (of 90 % of it for the chunks
//!    holding MinKey or MaxKey), it is reset and the owning shard is asked for `splitVector`
//!    points with the policy;
//! 4. fewer than two default points means the chunk is under the desired size: no split;
//! 5. the top-chunk rule (range keys): splitting the chunk holding MaxKey (MinKey), the last
//!    (first) point becomes the collection's largest (smallest) key, so the edge chunk holds
//!    one document and catches the next monotonic inserts; with the balancer on, that new edge
//!    chunk is moved to the shard with the fewest chunks.
//!
//! The `load` policy keeps the size trigger (with the default points), as CockroachDB and
//! TiKV split by size too, and adds the load trigger: [`load_split_round`] asks each shard for
//! chunks whose request rate stayed above the threshold and splits them at the finder's key.

use super::Router;
use crate::meta::{Chunk, ChunkChange};
use crate::split::{split_keys_bson, SplitPolicy};
use crate::transport::call_ok;
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub const DEFAULT_CHUNK_MB: i64 = 64;

#[derive(Default)]
pub struct AutoSplit {
    written: Mutex<HashMap<(String, Vec<u8>), i64>>,
    busy: AtomicBool,
    pub counters: SplitCounters,
}

/// What auto-split did (the lab reports it).
#[derive(Default)]
pub struct SplitCounters {
    pub attempts: AtomicU64,
    pub splits: AtomicU64,
    pub new_chunks: AtomicU64,
    /// Splits whose points the policy moved away from the default ones.
    pub tuned: AtomicU64,
    pub top_chunk_moves: AtomicU64,
    pub top_chunk_bytes: AtomicU64,
}

/// The desired chunk size for a collection with `chunks` chunks (module docs, step 2).
pub fn desired_size(chunks: usize, max: i64) -> i64 {
    const MB: i64 = 1 << 20;
    let d = match chunks {
        0 | 1 => 1024,
        2 => MB / 2,
        3..=9 => (max / 4).max(MB),
        10..=19 => (max / 2).max(MB),
        _ => max,
    };
    d.min(max)
}

impl AutoSplit {
    /// Adds applied writes to their chunks' counters and splits the chunks that crossed the
    /// trigger.
    pub fn note_writes(&self, r: &Router, ns: &str, touched: &[(Vec<u8>, i64)]) {
        let result = (|| -> DocResult<()> {
            let settings = r.settings()?;
            if !settings.autosplit {
                return Ok(());
            }
            let Some(table) = r.table(ns)? else {
                return Ok(());
            };
            let max = settings.chunk_bytes;
            let desired = desired_size(table.chunks.len(), max);
            let min_bound = table.key.encode(&table.key.min_bound());
            let max_bound = table.key.encode(&table.key.max_bound());
            let mut due: Vec<(Vec<u8>, i64)> = Vec::new();
            {
                let mut w = self.written.lock();
                for (chunk, bytes) in touched {
                    let Some(c) = table.chunks.iter().find(|c| &c.min_enc == chunk) else {
                        continue;
                    };
                    let edge = c.min_enc == min_bound || c.max_enc == max_bound;
                    let threshold = if edge { desired * 9 / 10 } else { desired };
                    let counter = w.entry((ns.to_string(), chunk.clone())).or_default();
                    *counter += bytes;
                    if *counter >= threshold / 5 {
                        due.push((chunk.clone(), *counter));
                        *counter = 0;
                    }
                }
            }
            for (chunk, written) in due {
                if r.options.inline_autosplit {
                    self.split_chunk(r, ns, &chunk, desired, written, &settings.policy)?;
                } else if !self.busy.swap(true, Ordering::AcqRel) {
                    let router = r.me().upgrade().expect("router alive");
                    let ns = ns.to_string();
                    let policy = settings.policy.clone();
                    std::thread::spawn(move || {
                        if let Err(e) = router
                            .autosplit
                            .split_chunk(&router, &ns, &chunk, desired, written, &policy)
                        {
                            eprintln!("flashdoc: auto-split of {ns} failed: {e}");
                        }
                        router.autosplit.busy.store(false, Ordering::Release);
                    });
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            eprintln!("flashdoc: auto-split check of {ns}: {e}");
        }
    }

    /// One split attempt of the chunk starting at `chunk_min` (module docs, steps 3–5).
    pub fn split_chunk(
        &self,
        r: &Router,
        ns: &str,
        chunk_min: &[u8],
        desired: i64,
        written: i64,
        policy: &SplitPolicy,
    ) -> DocResult<usize> {
        self.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let Some(table) = r.table(ns)? else {
            return Ok(0);
        };
        let Some(chunk) = table
            .chunks
            .iter()
            .find(|c| c.min_enc == chunk_min)
            .cloned()
        else {
            return Ok(0);
        };
        let conn = r.shard_conn(&chunk.shard)?;
        let reply = call_ok(
            &*conn,
            &doc! {
                "splitVector": ns, "keyPattern": table.key.pattern.clone(),
                "min": chunk.min.clone(), "max": chunk.max.clone(),
                "maxChunkSizeBytes": desired, "policy": policy.to_doc(), "$db": "admin",
            },
        )?;
        let _ = written;
        let keys = |f: &str| -> Vec<Document> {
            reply
                .get_array(f)
                .map(|a| a.iter().filter_map(|d| d.as_document().cloned()).collect())
                .unwrap_or_default()
        };
        let defaults = keys("defaultSplitKeys");
        let mut points = keys("splitKeys");
        if defaults.len() < 2 || points.is_empty() {
            return Ok(0);
        }
        if points != defaults {
            self.counters.tuned.fetch_add(1, Ordering::Relaxed);
        }
        let key = &table.key;
        let top = chunk.max_enc == key.encode(&key.max_bound());
        let bottom = chunk.min_enc == key.encode(&key.min_bound());
        if !key.hashed && (top || bottom) {
            if let Some(extreme) = extreme_key(r, ns, &chunk, top)? {
                let e = key.encode(&extreme);
                if top && e > key.encode(points.last().expect("non-empty")) {
                    *points.last_mut().expect("non-empty") = extreme;
                } else if bottom && !top && e > chunk.min_enc && e < key.encode(&points[0]) {
                    points[0] = extreme;
                }
            }
        }
        if !commit_split(r, ns, &chunk.min, &chunk.max, &points)? {
            return Ok(0);
        }
        self.counters.splits.fetch_add(1, Ordering::Relaxed);
        self.counters
            .new_chunks
            .fetch_add(points.len() as u64, Ordering::Relaxed);
        if top && !key.hashed && r.settings()?.balancer_on {
            self.move_top_chunk(r, ns)?;
        }
        Ok(points.len())
    }

    /// Moves the chunk holding MaxKey to the shard with the fewest chunks of the collection.
    fn move_top_chunk(&self, r: &Router, ns: &str) -> DocResult<()> {
        let Some(table) = r.reload(ns)? else {
            return Ok(());
        };
        let top = table
            .chunks
            .last()
            .expect("a collection has chunks")
            .clone();
        let mut counts: HashMap<String, usize> =
            r.shard_names()?.into_iter().map(|s| (s, 0)).collect();
        for c in &table.chunks {
            *counts.entry(c.shard.clone()).or_default() += 1;
        }
        let Some((to, _)) = counts
            .into_iter()
            .filter(|(s, _)| *s != top.shard)
            .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
        else {
            return Ok(());
        };
        if super::migrations::move_chunk_to(r, ns, &top, &to, false).is_ok() {
            self.counters
                .top_chunk_moves
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The collection's largest (`top`) or smallest routing key, read from the chunk's shard.
fn extreme_key(r: &Router, ns: &str, chunk: &Chunk, top: bool) -> DocResult<Option<Document>> {
    let table = r
        .table(ns)?
        .ok_or_else(|| DocError::namespace_not_found(ns.to_string()))?;
    let (db, coll) = ns.split_once('.').expect("namespaces have a dot");
    let dir = if top { -1 } else { 1 };
    let sort: Document = table
        .key
        .fields
        .iter()
        .map(|f| (f.clone(), Bson::Int32(dir)))
        .collect();
    let rep = r.send_versioned(
        &chunk.shard,
        doc! {"find": coll, "sort": sort, "limit": 1, "singleBatch": true, "$db": db},
        Some(&table),
    )?;
    Ok(rep
        .get_document("cursor")
        .ok()
        .and_then(|c| c.get_array("firstBatch").ok())
        .and_then(|b| b.first())
        .and_then(Bson::as_document)
        .map(|d| table.key.routing_key_of_doc(d)))
}

/// Splits chunk `[min, max)` at `points` (strictly increasing, inside the chunk): one guarded
/// metadata transaction; the new chunks take the next minor versions. `false` if the chunk
/// no longer exists with these bounds.
pub fn commit_split(
    r: &Router,
    ns: &str,
    min: &Document,
    max: &Document,
    points: &[Document],
) -> DocResult<bool> {
    for _ in 0..super::MAX_STALE_RETRIES {
        let Some(snap) = r.catalog.collection(ns)? else {
            return Ok(false);
        };
        let Some(chunk) = snap.chunk_with_bounds(min, max).cloned() else {
            r.reload(ns)?;
            return Ok(false);
        };
        let key = &snap.key;
        let mut at = chunk.min_enc.clone();
        for p in points {
            key.check_bound(p)?;
            let e = key.encode(p);
            if e <= at || e >= chunk.max_enc {
                return Err(DocError::bad_value(format!(
                    "split points must be strictly increasing and inside the chunk {} - {}: {p}",
                    chunk.min, chunk.max
                )));
            }
            at = e;
        }
        let mut v = snap.version();
        let mut pieces: Vec<Chunk> = Vec::new();
        let mut lo = chunk.min.clone();
        for hi in points.iter().chain(std::iter::once(&chunk.max)) {
            v = v.next_minor();
            pieces.push(Chunk {
                min_enc: key.encode(&lo),
                max_enc: key.encode(hi),
                min: lo.clone(),
                max: hi.clone(),
                shard: chunk.shard.clone(),
                version: v,
                jumbo: false,
            });
            lo = hi.clone();
        }
        let what = if points.len() == 1 {
            "split"
        } else {
            "multi-split"
        };
        let change = ChunkChange {
            put: pieces,
            changelog: Some((
                what.into(),
                doc! {"before": {"min": min.clone(), "max": max.clone()}, "splitKeys": split_keys_bson(points)},
            )),
            ..Default::default()
        };
        if r.catalog.commit_chunks(&snap, change)? {
            r.reload(ns)?;
            if let Ok(conn) = r.shard_conn(&chunk.shard) {
                let _ = conn.call(&doc! {"_flushRoutingTableCacheUpdates": ns, "$db": "admin"});
            }
            return Ok(true);
        }
    }
    Err(DocError::with_code(
        117,
        "ConflictingOperationInProgress",
        format!("could not commit a split of {ns}"),
    ))
}

/// The `load` policy's round: split every chunk a shard reports hot at its finder's key.
pub fn load_split_round(r: &Arc<Router>) -> DocResult<usize> {
    let mut n = 0;
    for shard in r.shard_names()? {
        let conn = r.shard_conn(&shard)?;
        let rep = call_ok(&*conn, &doc! {"_flashdocLoadSplits": 1, "$db": "admin"})?;
        for s in rep.get_array("splits").cloned().unwrap_or_default() {
            let Some(s) = s.as_document() else { continue };
            let (Ok(ns), Ok(min), Ok(max), Ok(at)) = (
                s.get_str("ns"),
                s.get_document("min"),
                s.get_document("max"),
                s.get_document("splitKey"),
            ) else {
                continue;
            };
            r.autosplit
                .counters
                .attempts
                .fetch_add(1, Ordering::Relaxed);
            match commit_split(r, ns, min, max, std::slice::from_ref(at)) {
                Ok(true) => {
                    n += 1;
                    r.autosplit.counters.splits.fetch_add(1, Ordering::Relaxed);
                    r.autosplit
                        .counters
                        .new_chunks
                        .fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(e) if e.code == 2 => {} // the key is a bound already
                Err(e) => return Err(e),
            }
        }
    }
    Ok(n)
}
