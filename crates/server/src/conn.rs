//! The accept loop and one task per connection. Framing: read the 16-byte header, check the
//! declared length before allocating, read the body; then decoding (decompression included),
//! the command and the reply's encoding run off the async workers, so a large or hostile message
//! never occupies one that other connections need. A plain-TCP connection gets a thread of its
//! own that reads, runs and replies (mongod's thread per connection): handing every message to
//! the blocking pool and back cost two context switches per message, a fifth of the server's
//! time under YCSB A (docs/engine.md, "Against WiredTiger"). A TLS connection keeps the async
//! stream and hands each message to the blocking pool. A message that cannot be framed
//! (bad length, unknown opcode) closes the connection; one that is framed but malformed gets an
//! error reply and the connection goes on. Either way other connections are unaffected.

use crate::commands::{self, After};
use crate::config::TlsMode;
use crate::limits::{next_chunk, MessageClock, Patience};
use crate::state::{ConnInfo, ServerState};
use crate::wire::{self, Header, Request};
use bson::doc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

/// What one message leads to.
pub struct Outcome {
    /// The bytes to send back (none for a `moreToCome` request).
    pub reply: Option<Vec<u8>>,
    /// The message could not be framed: close the connection without a reply.
    pub close: bool,
    pub after: After,
}

pub async fn accept_loop(
    listener: TcpListener,
    state: Arc<ServerState>,
    shutdown_tx: watch::Sender<bool>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let mut shutdown_rx = shutdown_tx.subscribe();
    let shutdown_tx = Arc::new(shutdown_tx);
    loop {
        tokio::select! {
            res = listener.accept() => {
                match res {
                    Ok((sock, peer)) => {
                        let _ = sock.set_nodelay(true);
                        let state = state.clone();
                        let tx = shutdown_tx.clone();
                        let Some(info) = state.new_connection(peer) else {
                            crate::log::warn("NETWORK", &format!("connection refused from {peer}: net.maxIncomingConnections reached"));
                            continue; // dropping the socket closes it
                        };
                        let info = Arc::new(info);
                        crate::log::connection(&format!("connection accepted from {peer} #{}", info.id));
                        let tls = tls.clone();
                        let require = state.config().net.tls.mode == TlsMode::RequireTLS;
                        tokio::spawn(async move {
                            let id = info.id;
                            let _ = serve_maybe_tls(sock, state.clone(), info, tx, tls, require).await;
                            state.end_connection(id);
                            crate::log::connection(&format!("end connection {peer} #{id}"));
                        });
                    }
                    Err(e) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        crate::log::warn("NETWORK", &format!("accept failed: {e}"));
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
            _ = shutdown_rx.changed() => return,
        }
    }
}

/// How long a connection on a TLS-optional port may take to send its first three bytes.
const SNIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves a freshly accepted connection over TLS or plain TCP, as `net.tls.mode` allows.
async fn serve_maybe_tls(
    sock: tokio::net::TcpStream,
    state: Arc<ServerState>,
    info: Arc<ConnInfo>,
    shutdown: Arc<watch::Sender<bool>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    require: bool,
) -> std::io::Result<()> {
    let Some(acceptor) = tls else {
        return serve_plain(sock, state, info, shutdown).await;
    };
    let is_tls = if require {
        true
    } else {
        // Wait for the first bytes without consuming them. A client that sends fewer than
        // three bytes is dropped after SNIFF_TIMEOUT instead of being polled forever.
        let mut first = [0u8; 3];
        let sniff = async {
            loop {
                let n = sock.peek(&mut first).await?;
                if n == 0 || n >= 3 {
                    return Ok::<usize, std::io::Error>(n);
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        match tokio::time::timeout(SNIFF_TIMEOUT, sniff).await {
            Ok(Ok(n)) if n >= 3 => {}
            Ok(Ok(_)) | Err(_) => return Ok(()),
            Ok(Err(e)) => return Err(e),
        }
        crate::tls::looks_like_tls(&first)
    };
    if !is_tls {
        return serve_plain(sock, state, info, shutdown).await;
    }
    match acceptor.accept(sock).await {
        Ok(stream) => serve_connection(stream, state, info, shutdown).await,
        Err(e) => {
            crate::log::warn(
                "NETWORK",
                &format!("TLS handshake with {} failed: {e}", info.peer),
            );
            Ok(())
        }
    }
}

/// Serves one connection until the peer hangs up, a message cannot be framed, or `shutdown`
/// is asked for. Generic over the stream so plain TCP and TLS share it.
pub async fn serve_connection<S>(
    mut sock: S,
    state: Arc<ServerState>,
    info: Arc<ConnInfo>,
    shutdown: Arc<watch::Sender<bool>>,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let mut clock = MessageClock::start(patience(&state, &info));
        let (h, body) = match read_message_async(&mut sock, &mut clock).await {
            Ok(m) => m,
            Err(end) => {
                end.log(&info);
                return Ok(());
            }
        };
        state.traffic.received(&h, &body);
        let st = state.clone();
        let ci = info.clone();
        let outcome = tokio::task::spawn_blocking(move || handle_message(&st, &ci, &h, &body))
            .await
            .unwrap_or_else(|e| internal_error(&state, &h, &e.to_string()));
        if outcome.close {
            return Ok(());
        }
        if let Some(out) = outcome.reply {
            state.traffic.sent(&out);
            // A client that stops reading its replies (a slow reader) is closed rather than
            // holding the connection's buffers forever.
            match tokio::time::timeout(crate::limits::STALLED_MESSAGE, sock.write_all(&out)).await {
                Ok(written) => written?,
                Err(_) => {
                    ReadEnd::Limit("reply not read: no progress for 30 s".into()).log(&info);
                    return Ok(());
                }
            }
        }
        if let After::Shutdown = outcome.after {
            let _ = shutdown.send(true);
            return Ok(());
        }
    }
}

/// The reply to a message whose command panicked.
fn internal_error(state: &ServerState, h: &Header, what: &str) -> Outcome {
    state.traffic.internal_error();
    Outcome {
        reply: Some(wire::msg_reply(
            &doc! {"ok": 0.0, "errmsg": format!("internal error: {what}"), "code": 1, "codeName": "InternalError"},
            next_id(),
            h.request_id,
            0,
            None,
        )),
        close: false,
        after: After::Continue,
    }
}

/// How often a connection thread blocked in a read looks whether the server is shutting down.
const SHUTDOWN_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Serves a plain-TCP connection on a thread of its own; the task waits for it, so the
/// connection is accounted for until it ends.
async fn serve_plain(
    sock: tokio::net::TcpStream,
    state: Arc<ServerState>,
    info: Arc<ConnInfo>,
    shutdown: Arc<watch::Sender<bool>>,
) -> std::io::Result<()> {
    let sock = sock.into_std()?;
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(SHUTDOWN_POLL))?;
    // A client that stops reading its replies (a slow reader) fails the write and is closed.
    sock.set_write_timeout(Some(crate::limits::STALLED_MESSAGE))?;
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    state.conn_threads.fetch_add(1, Ordering::SeqCst);
    let counted = state.clone();
    let spawned = std::thread::Builder::new()
        .name("flashdoc-conn".into())
        .stack_size(crate::THREAD_STACK_BYTES)
        .spawn(move || {
            let res = serve_connection_sync(sock, &state, &info, &shutdown);
            state.conn_threads.fetch_sub(1, Ordering::SeqCst);
            let _ = done_tx.send(res);
        });
    if let Err(e) = spawned {
        counted.conn_threads.fetch_sub(1, Ordering::SeqCst);
        return Err(e);
    }
    done_rx.await.unwrap_or(Ok(()))
}

/// At shutdown, after the accept loops stopped: waits (at most `limit`) for the connection
/// threads to finish the command they are running; idle ones see the shutdown within
/// `SHUTDOWN_POLL`.
pub fn wait_for_connection_threads(state: &ServerState, limit: std::time::Duration) {
    let start = std::time::Instant::now();
    while state.conn_threads.load(Ordering::SeqCst) > 0 && start.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Why a connection stopped reading.
enum ReadEnd {
    /// The peer hung up (possibly mid-message), the server is shutting down, or the message
    /// cannot be framed: closed without a word, as before.
    Quiet,
    /// A limit closed it: logged with the reason.
    Limit(String),
}

impl ReadEnd {
    fn log(self, info: &ConnInfo) {
        if let ReadEnd::Limit(why) = self {
            crate::log::info(
                "NETWORK",
                &format!("closing connection #{} from {}: {why}", info.id, info.peer),
            );
        }
    }
}

/// How long the connection may wait for its next message, and how large it may be, now.
fn patience(state: &ServerState, info: &ConnInfo) -> Patience {
    Patience::now(state.config().security.authorization, info, &state.params())
}

/// Reads one message (header, then body in growing chunks) from a blocking socket whose
/// reads time out every `SHUTDOWN_POLL`, within the connection's patience.
fn read_message_sync(
    sock: &mut std::net::TcpStream,
    clock: &mut MessageClock,
    shutdown: &watch::Sender<bool>,
) -> Result<(Header, Vec<u8>), ReadEnd> {
    let mut header = [0u8; Header::LEN];
    read_full(sock, &mut header, clock, shutdown)?;
    let h = Header::parse(&header);
    let body_len = h.validate().map_err(|_| ReadEnd::Quiet)?;
    clock
        .admit(body_len + Header::LEN)
        .map_err(ReadEnd::Limit)?;
    let mut body = Vec::new();
    while body.len() < body_len {
        let at = body.len();
        body.resize(at + next_chunk(body_len, at), 0);
        read_full(sock, &mut body[at..], clock, shutdown)?;
    }
    Ok((h, body))
}

/// Fills `buf` from a blocking socket whose reads time out every `SHUTDOWN_POLL`.
fn read_full(
    sock: &mut std::net::TcpStream,
    buf: &mut [u8],
    clock: &mut MessageClock,
    shutdown: &watch::Sender<bool>,
) -> Result<(), ReadEnd> {
    use std::io::{ErrorKind, Read};
    let mut at = 0;
    while at < buf.len() {
        match sock.read(&mut buf[at..]) {
            Ok(0) => return Err(ReadEnd::Quiet),
            Ok(n) => {
                at += n;
                clock.progress();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if *shutdown.borrow() {
                    return Err(ReadEnd::Quiet);
                }
                if let Some(why) = clock.expired() {
                    return Err(ReadEnd::Limit(why.into()));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(ReadEnd::Quiet),
        }
    }
    Ok(())
}

/// [`read_message_sync`] on an async stream (TLS).
async fn read_message_async<S: AsyncRead + Unpin>(
    sock: &mut S,
    clock: &mut MessageClock,
) -> Result<(Header, Vec<u8>), ReadEnd> {
    let mut header = [0u8; Header::LEN];
    read_full_async(sock, &mut header, clock).await?;
    let h = Header::parse(&header);
    let body_len = h.validate().map_err(|_| ReadEnd::Quiet)?;
    clock
        .admit(body_len + Header::LEN)
        .map_err(ReadEnd::Limit)?;
    let mut body = Vec::new();
    while body.len() < body_len {
        let at = body.len();
        body.resize(at + next_chunk(body_len, at), 0);
        read_full_async(sock, &mut body[at..], clock).await?;
    }
    Ok((h, body))
}

/// How long an async read waits at a time when the connection may wait forever.
const FOREVER_POLL: std::time::Duration = std::time::Duration::from_secs(3600);

async fn read_full_async<S: AsyncRead + Unpin>(
    sock: &mut S,
    buf: &mut [u8],
    clock: &mut MessageClock,
) -> Result<(), ReadEnd> {
    let mut at = 0;
    while at < buf.len() {
        let wait = clock.remaining().unwrap_or(FOREVER_POLL);
        match tokio::time::timeout(wait, sock.read(&mut buf[at..])).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(ReadEnd::Quiet),
            Ok(Ok(n)) => {
                at += n;
                clock.progress();
            }
            Err(_) => {
                if let Some(why) = clock.expired() {
                    return Err(ReadEnd::Limit(why.into()));
                }
            }
        }
    }
    Ok(())
}

/// `serve_connection` for a plain-TCP connection on its own thread: the same framing, the
/// same `handle_message`, no hand-off.
fn serve_connection_sync(
    mut sock: std::net::TcpStream,
    state: &Arc<ServerState>,
    info: &ConnInfo,
    shutdown: &watch::Sender<bool>,
) -> std::io::Result<()> {
    use std::io::Write;
    loop {
        let mut clock = MessageClock::start(patience(state, info));
        let (h, body) = match read_message_sync(&mut sock, &mut clock, shutdown) {
            Ok(m) => m,
            Err(end) => {
                end.log(info);
                return Ok(());
            }
        };
        state.traffic.received(&h, &body);
        // A panicking command answers InternalError, as a panicking blocking task does.
        let run = std::panic::AssertUnwindSafe(|| handle_message(state, info, &h, &body));
        let outcome = std::panic::catch_unwind(run).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            internal_error(state, &h, &what)
        });
        if outcome.close {
            return Ok(());
        }
        if let Some(out) = outcome.reply {
            state.traffic.sent(&out);
            if let Err(e) = sock.write_all(&out) {
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) {
                    ReadEnd::Limit("reply not read: no progress for 30 s".into()).log(info);
                    return Ok(());
                }
                return Err(e);
            }
        }
        if let After::Shutdown = outcome.after {
            let _ = shutdown.send(true);
            return Ok(());
        }
    }
}

/// Decodes one framed message, runs its command and encodes the reply (synchronous: it runs on
/// a connection's thread or the blocking pool).
pub fn handle_message(
    state: &Arc<ServerState>,
    info: &ConnInfo,
    h: &Header,
    body: &[u8],
) -> Outcome {
    let req = match wire::parse_request(h, body) {
        Ok(r) => r,
        Err(e) => {
            if matches!(h.op_code, wire::OP_MSG | wire::OP_COMPRESSED) {
                let reply = doc! {"ok": 0.0, "errmsg": e.message.clone(), "code": e.code, "codeName": e.code_name};
                state.traffic.replied(&reply);
                return Outcome {
                    reply: Some(wire::msg_reply(&reply, next_id(), h.request_id, 0, None)),
                    close: false,
                    after: After::Continue,
                };
            }
            // Unknown opcode or broken legacy message: close.
            return Outcome {
                reply: None,
                close: true,
                after: After::Continue,
            };
        }
    };
    let wants_reply = req.wants_reply();
    let exhaust = req.exhaust_allowed();
    let (cmd, compressor, legacy) = match req {
        Request::Msg {
            body, compressor, ..
        } => (body, compressor, false),
        Request::Query { collection, query } => {
            let name = query.keys().next().cloned().unwrap_or_default();
            let allowed = matches!(
                name.as_str(),
                "hello"
                    | "isMaster"
                    | "ismaster"
                    | "saslStart"
                    | "saslContinue"
                    | "getnonce"
                    | "authenticate"
            );
            if !allowed || !collection.ends_with(".$cmd") {
                let reply = doc! {"ok": 0.0, "errmsg": format!("Unsupported OP_QUERY command: {name}"), "code": 352, "codeName": "UnsupportedOpQueryCommand"};
                state.traffic.replied(&reply);
                return Outcome {
                    reply: Some(wire::op_reply(&reply, next_id(), h.request_id)),
                    close: false,
                    after: After::Continue,
                };
            }
            let mut q = query;
            q.insert("$db", collection.trim_end_matches(".$cmd").to_string());
            (q, None, true)
        }
    };
    let (reply, after) = commands::run(state, &cmd, info);
    state.traffic.replied(&reply);
    if let After::Close = after {
        return Outcome {
            reply: None,
            close: true,
            after: After::Continue,
        };
    }
    let reply = wants_reply.then(|| {
        if legacy {
            wire::op_reply(&reply, next_id(), h.request_id)
        } else if exhaust && is_get_more(&cmd) {
            exhaust_replies(state, info, &cmd, reply, h.request_id, compressor)
        } else {
            wire::msg_reply(&reply, next_id(), h.request_id, 0, compressor)
        }
    });
    Outcome {
        reply,
        close: false,
        after,
    }
}

fn is_get_more(cmd: &bson::Document) -> bool {
    cmd.keys().next().is_some_and(|k| k == "getMore")
}

/// Whether a getMore's reply leaves its cursor open with more batches to stream. An empty
/// batch (a tailable cursor at the end of its data) ends the stream: the client's next
/// getMore resumes it, and the connection's thread is not held while nothing comes.
fn cursor_continues(reply: &bson::Document) -> bool {
    let ok = matches!(reply.get("ok"), Some(v) if v.as_f64() == Some(1.0) || v.as_i32() == Some(1));
    let Ok(cursor) = reply.get_document("cursor") else {
        return false;
    };
    let open = cursor
        .get("id")
        .and_then(|id| id.as_i64())
        .is_some_and(|id| id != 0);
    let batch = cursor.get_array("nextBatch").map_or(0, |b| b.len());
    ok && open && batch > 0
}

/// mongod's exhaust cursor: a getMore sent with `exhaustAllowed` is answered with every batch
/// to the cursor's end, each reply answering the one before it and flagged `moreToCome` but
/// the last (the client reads them without sending more getMores; an error ends the stream).
fn exhaust_replies(
    state: &Arc<ServerState>,
    info: &ConnInfo,
    get_more: &bson::Document,
    first: bson::Document,
    request_id: i32,
    compressor: Option<wire::Compressor>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut reply, mut response_to) = (first, request_id);
    loop {
        let more = cursor_continues(&reply);
        let id = next_id();
        let flags = if more { wire::MORE_TO_COME } else { 0 };
        out.extend(wire::msg_reply(&reply, id, response_to, flags, compressor));
        if !more {
            return out;
        }
        response_to = id;
        reply = commands::run(state, get_more, info).0;
        state.traffic.replied(&reply);
    }
}

fn next_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod exhaust_tests {
    use super::{cursor_continues, is_get_more};
    use bson::doc;

    #[test]
    fn a_stream_continues_while_the_cursor_is_open_and_its_batch_not_empty() {
        let reply = |id: i64, n: usize| {
            let batch: Vec<i32> = (0..n as i32).collect();
            doc! {"cursor": {"id": id, "ns": "d.c", "nextBatch": batch}, "ok": 1.0}
        };
        assert!(cursor_continues(&reply(7, 2)));
        assert!(!cursor_continues(&reply(0, 2)), "a closed cursor ends it");
        assert!(!cursor_continues(&reply(7, 0)), "an empty batch ends it");
        let failed = doc! {"ok": 0.0, "code": 43, "codeName": "CursorNotFound"};
        assert!(!cursor_continues(&failed));
        assert!(is_get_more(&doc! {"getMore": 7_i64, "collection": "c"}));
        assert!(!is_get_more(&doc! {"find": "c"}));
    }
}
