//! The cursor commands: getMore and killCursors.

use super::args::{batch_size, max_time};
use super::batch::{cursor_document, fill_batch};
use super::call::Call;
use crate::auth;
use crate::cursors::Kill;
use crate::state::{ConnInfo, ServerState};
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use std::time::{Duration, Instant};

pub(crate) fn get_more(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let db = call.db;
    let cmd = call.cmd;
    let id = match cmd.get("getMore") {
        Some(Bson::Int64(i)) => *i,
        _ => return Err(DocError::type_mismatch("getMore cursor id must be a long")),
    };
    let coll = cmd
        .get_str("collection")
        .map_err(|_| DocError::type_mismatch("collection must be a string"))?;
    let size = batch_size(cmd, "batchSize")?;
    let await_ms = max_time(cmd)?;
    let more = More {
        id,
        ns: format!("{db}.{coll}"),
        db,
        size,
        await_time: await_ms,
    };
    read_more(state, call.conn, &more)
}

/// One getMore: the cursor, the namespace it names, how many documents and how long to wait.
struct More<'a> {
    id: i64,
    db: &'a str,
    ns: String,
    size: Option<usize>,
    await_time: Option<Duration>,
}

pub(crate) fn kill_cursors(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let cmd = call.cmd;
    let ids = cmd
        .get_array("cursors")
        .map_err(|_| DocError::type_mismatch("cursors must be an array"))?;
    let (mut killed, mut not_found) = (vec![], vec![]);
    for id in ids {
        let Bson::Int64(id) = id else {
            return Err(DocError::type_mismatch("cursor ids must be longs"));
        };
        match state
            .cursors()
            .kill(*id, |owner| auth::may_use_cursor(state, call.conn, owner))
        {
            Kill::Killed => killed.push(Bson::Int64(*id)),
            Kill::NotFound => not_found.push(Bson::Int64(*id)),
            // mongod's killCursors fails as a whole on a cursor of another user.
            Kill::NotOwner => return Err(auth::not_cursor_owner(*id)),
        }
    }
    Ok(
        doc! {"cursorsKilled": killed, "cursorsNotFound": not_found, "cursorsAlive": [], "cursorsUnknown": []},
    )
}

/// How long a getMore on an awaitData cursor waits for new documents by default.
const DEFAULT_AWAIT: Duration = Duration::from_secs(1);
/// The longest an awaitData getMore waits for documents, whatever its maxTimeMS: the client
/// gets an empty batch and asks again (the wait holds one of the blocking pool's threads).
const MAX_AWAIT: Duration = Duration::from_secs(10);
/// How often an awaiting getMore looks for new documents.
const AWAIT_POLL: Duration = Duration::from_millis(10);

fn read_more(state: &ServerState, conn: &ConnInfo, more: &More) -> DocResult<Document> {
    let (id, db, ns, size, await_time) = (more.id, more.db, &more.ns, more.size, more.await_time);
    let reg = state.cursors();
    let mut entry = reg
        .take(id)
        .ok_or_else(|| DocError::cursor_not_found(format!("cursor id {id} not found")))?;
    if !auth::may_use_cursor(state, conn, &entry.owner) {
        reg.put_back(id, entry);
        return Err(auth::not_cursor_owner(id));
    }
    if entry.ns != *ns && !entry.ns.starts_with(&format!("{db}.$cmd")) {
        let msg = format!(
            "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}",
            entry.ns
        );
        reg.put_back(id, entry);
        return Err(DocError::with_code(13, "Unauthorized", msg));
    }
    if await_time.is_some() && !entry.await_data {
        reg.put_back(id, entry);
        return Err(DocError::bad_value(
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    let n = size.unwrap_or(usize::MAX).max(1);
    // killOp on this getMore reaches the cursor's read.
    state.ops.adopt(&entry.interrupt);
    entry.interrupt.resume();
    entry.cursor.watch_scan();
    let mut result = fill_batch(&mut entry.cursor, n);
    if entry.await_data {
        // Wait for documents inserted into the capped collection, up to the getMore's
        // maxTimeMS (1 s by default), looking every few milliseconds.
        // The wait holds a worker thread, so it is capped (MAX_AWAIT) and stops when the
        // cursor's operation is interrupted.
        let wait = await_time.unwrap_or(DEFAULT_AWAIT).min(MAX_AWAIT);
        let deadline = Instant::now() + wait;
        while matches!(&result, Ok((b, _)) if b.is_empty()) && Instant::now() < deadline {
            if let Err(e) = entry.interrupt.check() {
                result = Err(e);
                break;
            }
            std::thread::sleep(AWAIT_POLL);
            result = fill_batch(&mut entry.cursor, n);
        }
    }
    entry.interrupt.pause();
    // A failed cursor (maxTimeMS spent, killed, an error) is closed: it is not put back.
    let (batch, exhausted) = match result {
        Ok(r) => r,
        Err(e) => {
            reg.release(id);
            return Err(e);
        }
    };
    let ns = entry.ns.clone();
    let out_id = if exhausted && (!entry.tailable || entry.cursor.is_done()) {
        reg.release(id);
        0
    } else {
        reg.put_back(id, entry);
        id
    };
    Ok(cursor_document("nextBatch", batch, n, out_id, &ns))
}
