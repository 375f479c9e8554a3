//! The cursor commands: getMore and killCursors.

use super::args::{batch_size, max_time};
use super::batch::{cursor_document, fill_batch, with_resume_token};
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
/// How long an awaiting getMore sleeps at most before looking at its interruption (killOp,
/// killCursors): inserts wake it at once.
const INTERRUPT_CHECK: Duration = Duration::from_millis(50);

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
    let change_stream = entry.resume_token.is_some();
    let labelled = |e| match change_stream {
        true => super::change_stream::label_get_more_error(e),
        false => e,
    };
    if let Some(e) = state.failpoints.on_get_more_checkout() {
        reg.release(id);
        return Err(labelled(e));
    }
    let n = size.unwrap_or(usize::MAX).max(1);
    // killOp on this getMore reaches the cursor's read.
    state.ops.adopt(&entry.interrupt);
    entry.interrupt.resume();
    entry.cursor.watch_scan();
    let wait = if entry.await_data {
        await_time.unwrap_or(DEFAULT_AWAIT).min(MAX_AWAIT)
    } else {
        Duration::ZERO
    };
    let result = await_batch(&mut entry, n, wait);
    entry.interrupt.pause();
    // A failed cursor (maxTimeMS spent, killed, an error) is closed: it is not put back.
    let (batch, exhausted) = match result {
        Ok(r) => r,
        Err(e) => {
            reg.release(id);
            return Err(labelled(e));
        }
    };
    let ns = entry.ns.clone();
    let token = entry.resume_token.clone();
    let out_id = if exhausted && (!entry.tailable || entry.cursor.is_done()) {
        reg.release(id);
        0
    } else {
        reg.put_back(id, entry);
        id
    };
    let reply = cursor_document("nextBatch", batch, n, out_id, &ns);
    Ok(with_resume_token(reply, token.as_ref()))
}

/// Fills a batch; while it is empty, waits for documents inserted into the capped collection
/// up to `wait` (an awaitData cursor's), asleep on the collection's insert signal and woken
/// by the next insert, looking at the cursor's interruption every [`INTERRUPT_CHECK`] (the
/// wait holds a worker thread, hence [`MAX_AWAIT`]).
fn await_batch(
    entry: &mut crate::cursors::CursorEntry,
    n: usize,
    wait: Duration,
) -> DocResult<(Vec<Bson>, bool)> {
    let deadline = Instant::now() + wait;
    loop {
        let seen = entry.cursor.tail_signal().map(|s| s.generation());
        let (batch, exhausted) = fill_batch(&mut entry.cursor, n)?;
        let now = Instant::now();
        let (Some(seen), true, true) = (seen, batch.is_empty(), now < deadline) else {
            return Ok((batch, exhausted));
        };
        entry.interrupt.check()?;
        if let Some(signal) = entry.cursor.tail_signal() {
            signal.wait_past(seen, (deadline - now).min(INTERRUPT_CHECK));
        }
    }
}
