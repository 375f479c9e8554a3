//! The accept loop and one task per connection. Framing: read the 16-byte header, check the
//! declared length before allocating, read the body, decode, run the command on the blocking
//! pool (the document layer is synchronous), write the reply. A message that cannot be framed
//! (bad length, unknown opcode) closes the connection; one that is framed but malformed gets an
//! error reply and the connection goes on. Either way other connections are unaffected.

use crate::commands::{self, After};
use crate::state::ServerState;
use crate::wire::{self, Header, Request};
use bson::doc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

pub async fn accept_loop(
    listener: TcpListener,
    state: Arc<ServerState>,
    shutdown_tx: watch::Sender<bool>,
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
                        tokio::spawn(async move {
                            let info = Arc::new(state.new_connection(peer.to_string()));
                            let _ = serve_connection(sock, state.clone(), info, tx).await;
                            state.end_connection();
                        });
                    }
                    Err(e) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        eprintln!("flashdoc: accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
            _ = shutdown_rx.changed() => return,
        }
    }
}

async fn serve_connection(
    mut sock: TcpStream,
    state: Arc<ServerState>,
    info: Arc<crate::state::ConnInfo>,
    shutdown: Arc<watch::Sender<bool>>,
) -> std::io::Result<()> {
    let mut header = [0u8; Header::LEN];
    loop {
        if sock.read_exact(&mut header).await.is_err() {
            return Ok(()); // closed, possibly mid-message
        }
        let h = Header::parse(&header);
        let body_len = match h.validate() {
            Ok(n) => n,
            Err(_) => return Ok(()),
        };
        let mut body = vec![0u8; body_len];
        if sock.read_exact(&mut body).await.is_err() {
            return Ok(());
        }
        let req = match wire::parse_request(&h, &body) {
            Ok(r) => r,
            Err(e) => {
                if matches!(h.op_code, wire::OP_MSG | wire::OP_COMPRESSED) {
                    let reply = doc! {"ok": 0.0, "errmsg": e.0.clone(), "code": 17, "codeName": "ProtocolError"};
                    let out = wire::msg_reply(&reply, next_id(), h.request_id, 0, None);
                    sock.write_all(&out).await?;
                    continue;
                }
                return Ok(()); // unknown opcode or broken legacy message: close
            }
        };
        let wants_reply = req.wants_reply();
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
                    sock.write_all(&wire::op_reply(&reply, next_id(), h.request_id))
                        .await?;
                    continue;
                }
                let mut q = query;
                q.insert("$db", collection.trim_end_matches(".$cmd").to_string());
                (q, None, true)
            }
        };
        let st = state.clone();
        let ci = info.clone();
        let (reply, after) = tokio::task::spawn_blocking(move || commands::run(&st, &cmd, &ci))
            .await
            .unwrap_or_else(|e| {
                (
                    doc! {"ok": 0.0, "errmsg": format!("internal error: {e}"), "code": 1, "codeName": "InternalError"},
                    After::Continue,
                )
            });
        if wants_reply {
            let out = if legacy {
                wire::op_reply(&reply, next_id(), h.request_id)
            } else {
                // hello replies are never compressed; others mirror the request.
                wire::msg_reply(&reply, next_id(), h.request_id, 0, compressor)
            };
            sock.write_all(&out).await?;
        }
        if let After::Shutdown = after {
            let _ = shutdown.send(true);
            return Ok(());
        }
    }
}

fn next_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed)
}
