//! The TCP transport: length-prefixed frames over connections that authenticate both ends with
//! the cluster's shared key (the bytes of `security.keyFile`; the server wires it).
//!
//! Handshake, HMAC-SHA-256 challenge-response in both directions (the key never crosses the
//! wire): the server sends a 32-byte random nonce `ns`; the client answers with its own nonce
//! `nc` and `HMAC(key, "flashdoc-repl client" ‖ ns ‖ nc)`; the server checks it (in constant
//! time) and answers `HMAC(key, "flashdoc-repl server" ‖ ns ‖ nc)`, which the client checks.
//! A peer that fails is disconnected before any request is read.
//!
//! Frames: a 4-byte big-endian length, then a request (`kind` byte, body) or an answer
//! (`0` and the body, or `1` and an error message).

use super::{RpcFuture, RpcHandler, RpcKind, Transport, TransportError};
use crate::NodeId;
use hmac::{Hmac, KeyInit, Mac};
use parking_lot::Mutex;
use sha2::Sha256;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NONCE: usize = 32;
const MAC: usize = 32;
/// The largest frame either side accepts (a snapshot chunk or a batch of entries is far less).
pub const MAX_FRAME: usize = 64 << 20;
const CLIENT_LABEL: &[u8] = b"flashdoc-repl client";
const SERVER_LABEL: &[u8] = b"flashdoc-repl server";

fn io(e: std::io::Error) -> TransportError {
    TransportError::Io(e.to_string())
}

fn mac(key: &[u8], label: &[u8], ns: &[u8], nc: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(label);
    m.update(ns);
    m.update(nc);
    m
}

/// The handshake's proofs, for a transport that carries the challenge in its own messages (the
/// server carries them as wire commands on a member's mongo port): the client's is
/// `HMAC(key, "flashdoc-repl client" ‖ ns ‖ nc)`, the server's the same with the server label.
pub fn handshake_proof(key: &[u8], server_side: bool, ns: &[u8], nc: &[u8]) -> Vec<u8> {
    let label = if server_side {
        SERVER_LABEL
    } else {
        CLIENT_LABEL
    };
    mac(key, label, ns, nc).finalize().into_bytes().to_vec()
}

/// Checks a handshake proof in constant time (see [`handshake_proof`]).
pub fn verify_handshake_proof(
    key: &[u8],
    server_side: bool,
    ns: &[u8],
    nc: &[u8],
    proof: &[u8],
) -> bool {
    let label = if server_side {
        SERVER_LABEL
    } else {
        CLIENT_LABEL
    };
    mac(key, label, ns, nc).verify_slice(proof).is_ok()
}

async fn write_frame(s: &mut TcpStream, head: u8, body: &[u8]) -> Result<(), TransportError> {
    let len = u32::try_from(body.len() + 1)
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME)
        .ok_or_else(|| {
            TransportError::Codec(format!("frame of {} bytes is too large", body.len()))
        })?;
    let mut buf = Vec::with_capacity(5 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.push(head);
    buf.extend_from_slice(body);
    s.write_all(&buf).await.map_err(io)
}

async fn read_frame(s: &mut TcpStream) -> Result<(u8, Vec<u8>), TransportError> {
    let len = s.read_u32().await.map_err(io)? as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(TransportError::Codec(format!(
            "frame length {len} out of range"
        )));
    }
    let mut buf = vec![0; len];
    s.read_exact(&mut buf).await.map_err(io)?;
    let head = buf.remove(0);
    Ok((head, buf))
}

/// The server's half of the handshake.
async fn accept_peer(s: &mut TcpStream, key: &[u8]) -> Result<(), TransportError> {
    let ns: [u8; NONCE] = rand::random();
    s.write_all(&ns).await.map_err(io)?;
    let mut answer = [0u8; NONCE + MAC];
    s.read_exact(&mut answer).await.map_err(io)?;
    let (nc, client_mac) = answer.split_at(NONCE);
    mac(key, CLIENT_LABEL, &ns, nc)
        .verify_slice(client_mac)
        .map_err(|_| TransportError::Auth("the peer does not hold the cluster key".into()))?;
    let proof = mac(key, SERVER_LABEL, &ns, nc).finalize().into_bytes();
    s.write_all(&proof).await.map_err(io)
}

/// The client's half of the handshake.
async fn connect_peer(addr: &str, key: &[u8]) -> Result<TcpStream, TransportError> {
    let mut s = TcpStream::connect(addr).await.map_err(io)?;
    s.set_nodelay(true).map_err(io)?;
    let mut ns = [0u8; NONCE];
    s.read_exact(&mut ns).await.map_err(io)?;
    let nc: [u8; NONCE] = rand::random();
    let proof = mac(key, CLIENT_LABEL, &ns, &nc).finalize().into_bytes();
    let mut answer = nc.to_vec();
    answer.extend_from_slice(&proof);
    s.write_all(&answer).await.map_err(io)?;
    let mut server_mac = [0u8; MAC];
    s.read_exact(&mut server_mac).await.map_err(|_| {
        TransportError::Auth("the peer closed the handshake: wrong cluster key?".into())
    })?;
    mac(key, SERVER_LABEL, &ns, &nc)
        .verify_slice(&server_mac)
        .map_err(|_| TransportError::Auth("the peer does not hold the cluster key".into()))?;
    Ok(s)
}

/// Serves one authenticated connection: requests in, answers out, one at a time.
async fn serve_connection(
    mut s: TcpStream,
    key: Arc<[u8]>,
    handler: Arc<dyn RpcHandler>,
) -> Result<(), TransportError> {
    s.set_nodelay(true).map_err(io)?;
    accept_peer(&mut s, &key).await?;
    loop {
        let (kind, body) = read_frame(&mut s).await?;
        let kind = RpcKind::from_byte(kind)
            .ok_or_else(|| TransportError::Codec(format!("unknown RPC kind {kind}")))?;
        match handler.handle(kind, body).await {
            Ok(answer) => write_frame(&mut s, 0, &answer).await?,
            Err(e) => write_frame(&mut s, 1, e.to_string().as_bytes()).await?,
        }
    }
}

/// A member's listening side; when dropped it stops accepting and closes its connections, as a
/// stopped process would.
pub struct TcpServer {
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl TcpServer {
    /// Listens on `addr` on the current tokio runtime and serves `handler` to peers that prove
    /// they hold `key`.
    pub async fn bind(
        addr: &str,
        key: Arc<[u8]>,
        handler: Arc<dyn RpcHandler>,
    ) -> std::io::Result<TcpServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let open = connections.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                // A failed handshake or a closed connection ends only that connection.
                let task = tokio::spawn(serve_connection(stream, key.clone(), handler.clone()));
                let mut open = open.lock();
                open.retain(|t| !t.is_finished());
                open.push(task.abort_handle());
            }
        });
        Ok(TcpServer {
            addr,
            accept,
            connections,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.connections.lock().drain(..) {
            task.abort();
        }
    }
}

/// One request and its answer on an authenticated connection.
async fn exchange(
    s: &mut TcpStream,
    kind: RpcKind,
    body: &[u8],
) -> Result<(u8, Vec<u8>), TransportError> {
    write_frame(s, kind as u8, body).await?;
    read_frame(s).await
}

async fn fresh_exchange(
    addr: &str,
    key: &[u8],
    kind: RpcKind,
    body: &[u8],
) -> Result<(TcpStream, (u8, Vec<u8>)), TransportError> {
    let mut s = connect_peer(addr, key).await?;
    let answer = exchange(&mut s, kind, body).await?;
    Ok((s, answer))
}

/// The calling side: authenticated connections to each address, reused between calls.
pub struct TcpTransport {
    key: Arc<[u8]>,
    idle: Arc<Mutex<HashMap<String, Vec<TcpStream>>>>,
}

impl TcpTransport {
    /// `key`: the cluster's shared key (every member must hold the same bytes).
    pub fn new(key: &[u8]) -> TcpTransport {
        assert!(!key.is_empty(), "an empty cluster key authenticates anyone");
        TcpTransport {
            key: key.into(),
            idle: Arc::default(),
        }
    }
}

impl Transport for TcpTransport {
    fn call(
        &self,
        _from: NodeId,
        _to: NodeId,
        addr: &str,
        kind: RpcKind,
        body: Vec<u8>,
    ) -> RpcFuture {
        let (key, idle, addr) = (self.key.clone(), self.idle.clone(), addr.to_string());
        Box::pin(async move {
            let reused = idle.lock().get_mut(&addr).and_then(Vec::pop);
            let exchanged = match reused {
                Some(mut s) => match exchange(&mut s, kind, &body).await {
                    Ok(answer) => Ok((s, answer)),
                    // The peer closed an idle connection (it restarted): once more on a new
                    // one. Raft's RPCs may be delivered twice.
                    Err(_) => fresh_exchange(&addr, &key, kind, &body).await,
                },
                None => fresh_exchange(&addr, &key, kind, &body).await,
            };
            let (s, (status, answer)) = exchanged?;
            // Only a connection that finished its exchange goes back for reuse.
            idle.lock().entry(addr).or_default().push(s);
            match status {
                0 => Ok(answer),
                _ => Err(TransportError::Io(
                    String::from_utf8_lossy(&answer).into_owned(),
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl RpcHandler for Echo {
        fn handle(&self, kind: RpcKind, mut body: Vec<u8>) -> RpcFuture {
            Box::pin(async move {
                body.push(kind as u8);
                Ok(body)
            })
        }
    }

    /// Binds `addr` again once the dropped server's listener has closed.
    async fn rebind(addr: &str) -> TcpServer {
        let key: Arc<[u8]> = Arc::from(&b"the cluster key"[..]);
        for _ in 0..100 {
            if let Ok(s) = TcpServer::bind(addr, key.clone(), Arc::new(Echo)).await {
                return s;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("cannot bind {addr} again");
    }

    #[test]
    fn handshake_proofs_need_the_key_and_the_side() {
        let (ns, nc) = ([1u8; 32], [2u8; 32]);
        let client = handshake_proof(b"key", false, &ns, &nc);
        assert!(verify_handshake_proof(b"key", false, &ns, &nc, &client));
        assert!(!verify_handshake_proof(b"other", false, &ns, &nc, &client));
        assert!(!verify_handshake_proof(b"key", true, &ns, &nc, &client));
        assert!(!verify_handshake_proof(b"key", false, &nc, &ns, &client));
    }

    #[test]
    #[should_panic(expected = "empty cluster key")]
    fn an_empty_key_is_refused() {
        TcpTransport::new(b"");
    }

    #[test]
    fn peers_with_the_key_talk_and_others_are_refused() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let key: Arc<[u8]> = Arc::from(&b"the cluster key"[..]);
            let server = TcpServer::bind("127.0.0.1:0", key, Arc::new(Echo))
                .await
                .unwrap();
            let addr = server.local_addr().to_string();
            let good = TcpTransport::new(b"the cluster key");
            for _ in 0..3 {
                // Reuses the authenticated connection after the first call.
                let answer = good.call(1, 2, &addr, RpcKind::Vote, vec![7]).await;
                assert_eq!(answer, Ok(vec![7, RpcKind::Vote as u8]));
            }
            assert_eq!(good.idle.lock()[&addr].len(), 1);
            // The server goes away and comes back on the same address: the idle connection
            // is dead, and the next call reconnects.
            drop(server);
            let server = rebind(&addr).await;
            let answer = good.call(1, 2, &addr, RpcKind::Elect, vec![]).await;
            assert_eq!(answer, Ok(vec![RpcKind::Elect as u8]));
            let bad = TcpTransport::new(b"another key");
            match bad.call(1, 2, &addr, RpcKind::Vote, vec![7]).await {
                Err(TransportError::Auth(_)) => {}
                other => panic!("a peer without the key got {other:?}"),
            }
            drop(server);
        });
    }
}
