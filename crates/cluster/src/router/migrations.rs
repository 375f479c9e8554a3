//! Chunk migrations: the one place a router asks a shard to donate a chunk. The balancer and
//! the autosplitter choose what moves (a [`Migration`]); this file carries the choice out, as
//! in fjall/lsm-tree a compaction strategy returns a choice and a worker runs it. It names no
//! sibling, so the deciders can depend on it without a circle.

use super::Router;
use crate::meta::Chunk;
use crate::transport::{is_ok, reply_error};
use bson::{doc, Document};
use docdb::DocResult;

/// One chosen move: `chunk` goes from its shard to `to`.
#[derive(Clone, Debug)]
pub struct Migration {
    pub chunk: Chunk,
    pub to: String,
}

/// Asks the chunk's shard to donate it to `to`; reloads the routing table after.
pub fn move_chunk_to(
    r: &Router,
    ns: &str,
    c: &Chunk,
    to: &str,
    wait_for_delete: bool,
) -> DocResult<Document> {
    let started = std::time::Instant::now();
    let rep = r.shard_conn(&c.shard)?.call(&doc! {
        "_shardsvrMoveChunk": ns, "min": c.min.clone(), "max": c.max.clone(), "to": to,
        "waitForDelete": wait_for_delete, "$db": "admin",
    });
    r.reload(ns)?;
    let mut rep = rep?;
    if !is_ok(&rep) {
        return Err(reply_error(&rep));
    }
    rep.insert("millis", started.elapsed().as_millis() as i64);
    Ok(rep)
}

/// Carries out `plan` in order, one migration at a time, and returns each one's outcome (the
/// donor's reply or its error) in the same order.
pub fn carry_out(
    r: &Router,
    ns: &str,
    plan: &[Migration],
    wait_for_delete: bool,
) -> Vec<DocResult<Document>> {
    plan.iter()
        .map(|m| move_chunk_to(r, ns, &m.chunk, &m.to, wait_for_delete))
        .collect()
}
