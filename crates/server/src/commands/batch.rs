//! Cursor replies: a batch filled from a cursor, the cursor kept for getMore unless it is
//! done, and the `{cursor: {firstBatch | nextBatch, id, ns}}` document.

use super::args::{batch_size, get_doc};
use super::fields::check_fields;
use crate::cursors::{CursorEntry, ResumeToken};
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use docdb::{DocCursor, DocResult, Interrupt};
use std::sync::Arc;

/// The default first batch: 101 documents (or 16 MB), as mongod.
pub(crate) const DEFAULT_FIRST_BATCH: usize = 101;
/// Reply batches stop growing past this many bytes.
const BATCH_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;

/// How a cursor is kept between batches.
#[derive(Default)]
pub(crate) struct CursorOpts {
    pub single: bool,
    pub no_timeout: bool,
    pub tailable: bool,
    pub await_data: bool,
    pub interrupt: Interrupt,
    /// A change stream's position, sent with every batch as `postBatchResumeToken`.
    pub resume_token: Option<ResumeToken>,
}

/// Adds a change stream's `postBatchResumeToken` to a cursor reply.
pub(crate) fn with_resume_token(mut reply: Document, token: Option<&ResumeToken>) -> Document {
    if let (Some(t), Ok(cursor)) = (token, reply.get_document_mut("cursor")) {
        cursor.insert("postBatchResumeToken", t.lock().clone());
    }
    reply
}

/// Fills a batch from the cursor; keeps the cursor for getMore unless it is exhausted (a
/// tailable cursor is kept at the end of the data too).
pub(crate) fn cursor_reply(
    state: &Arc<ServerState>,
    ns: &str,
    mut cursor: DocCursor,
    first: usize,
    opts: CursorOpts,
    field: &str,
) -> DocResult<Document> {
    let (batch, exhausted) = fill_batch(&mut cursor, first)?;
    let token = opts.resume_token.clone();
    let id = if (exhausted && (!opts.tailable || cursor.is_done())) || opts.single {
        0i64
    } else {
        // Time waiting for the next getMore is not charged to maxTimeMS.
        opts.interrupt.pause();
        if opts.await_data {
            // The find's maxTimeMS bounded the find; a getMore's is how long it awaits data.
            opts.interrupt.lift_budget();
        }
        let mut entry = CursorEntry::new(ns.to_string(), cursor);
        entry.no_timeout = opts.no_timeout;
        entry.tailable = opts.tailable;
        entry.await_data = opts.await_data;
        entry.resume_token = opts.resume_token;
        // Whoever runs the command that opens it owns it (getMore and killCursors check).
        entry.owner = state.ops.current_users();
        // Every kept cursor can be killed, even one opened without an interrupt of its own (a
        // listing, a router's merged cursor): killCursors must stop a getMore reading it.
        entry.interrupt = if opts.interrupt == Interrupt::none() {
            Interrupt::new(None)
        } else {
            opts.interrupt
        };
        match state.ops.current_connection() {
            Some(conn) => {
                let cap = state.params().max_cursors_per_connection;
                state
                    .cursors()
                    .insert_for(conn, usize::try_from(cap).unwrap_or(usize::MAX), entry)
                    .map_err(|m| docdb::DocError::with_code(146, "ExceededMemoryLimit", m))?
            }
            // Outside a connection's command (in-process callers): no connection to cap.
            None => state.cursors().insert(entry),
        }
    };
    let reply = cursor_document(field, batch, first, id, ns);
    Ok(with_resume_token(reply, token.as_ref()))
}

/// The reply to a command that returns a cursor: `batch` (at most `limit` documents, as asked)
/// and the id of the cursor kept for getMore, 0 when none is kept (ids are non-negative: the
/// registry draws them so; a negative one would send the client after another cursor).
pub(crate) fn cursor_document(
    field: &str,
    batch: Vec<Bson>,
    limit: usize,
    id: i64,
    ns: &str,
) -> Document {
    assert!(
        batch.len() <= limit,
        "a batch of {} documents where {limit} were asked",
        batch.len()
    );
    assert!(id >= 0, "cursor id {id}: ids are non-negative, 0 is none");
    doc! {"cursor": {field: batch, "id": id, "ns": ns}}
}

pub(crate) fn fill_batch(cursor: &mut DocCursor, n: usize) -> DocResult<(Vec<Bson>, bool)> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while out.len() < n && bytes < BATCH_BYTES {
        match cursor.next() {
            Some(Ok(d)) => {
                bytes += bson::to_vec(&d).map(|v| v.len()).unwrap_or(0);
                out.push(Bson::Document(d));
            }
            Some(Err(e)) => return Err(e),
            None => return Ok((out, true)),
        }
    }
    Ok((out, false))
}

/// A listing's (listCollections, listIndexes) first batch: `cursor.batchSize`, else all of it
/// (the rest, if any, is for getMore).
pub(crate) fn listing_first_batch(cmd: &Document) -> DocResult<usize> {
    let opts = get_doc(cmd, "cursor")?.unwrap_or_default();
    check_fields(opts.keys(), "cursor", &["batchSize"], &[], &[])?;
    Ok(batch_size(&opts, "batchSize")?.unwrap_or(usize::MAX))
}
