//! Members talk over their own mongo port, as mongod's do: Raft's RPCs travel as the internal
//! command `_replRpc` (the RPC's kind and its bytes), after `_replHandshake` proves on the
//! connection that the peer holds the cluster key. The proof is the TCP transport's
//! HMAC-SHA-256 challenge-response (`repl::transport::tcp`), carried in two commands: the
//! server's nonce, then the client's nonce and proof, answered by the server's proof. Without
//! `security.keyFile` members do not authenticate each other, as mongod's do not.

use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use repl::transport::tcp::{handshake_proof, verify_handshake_proof};
use repl::{NodeId, RpcFuture, RpcKind, Transport, TransportError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NONCE: usize = 32;
/// The largest reply a member accepts from another (the server's own message limit).
const MAX_REPLY: usize = crate::wire::MAX_MESSAGE_SIZE as usize;

pub fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

pub fn get_binary<'a>(d: &'a Document, key: &str) -> DocResult<&'a [u8]> {
    match d.get(key) {
        Some(Bson::Binary(b)) => Ok(&b.bytes),
        _ => Err(DocError::type_mismatch(format!(
            "{key} must be binary data"
        ))),
    }
}

struct Inner {
    key: Option<Arc<[u8]>>,
    /// Authenticated connections, by member address, kept for reuse.
    pool: Mutex<HashMap<String, Vec<TcpStream>>>,
    next_id: AtomicI32,
}

/// A [`Transport`] over members' mongo ports.
#[derive(Clone)]
pub struct WireTransport(Arc<Inner>);

fn io(e: std::io::Error) -> TransportError {
    TransportError::Io(e.to_string())
}

impl WireTransport {
    pub fn new(key: Option<Arc<[u8]>>) -> WireTransport {
        WireTransport(Arc::new(Inner {
            key,
            pool: Mutex::default(),
            next_id: AtomicI32::new(1),
        }))
    }

    /// Sends one command (it carries `$db`) and returns its reply; an `ok: 0` reply is an error.
    pub async fn command(&self, addr: &str, cmd: &Document) -> Result<Document, TransportError> {
        self.command_with(addr, cmd, &[]).await
    }

    /// `command` with a document sequence of the RPC body's parts.
    async fn command_with(
        &self,
        addr: &str,
        cmd: &Document,
        parts: &[Document],
    ) -> Result<Document, TransportError> {
        let pooled = self.0.pool.lock().get_mut(addr).and_then(Vec::pop);
        let mut s = match pooled {
            Some(s) => s,
            None => self.connect(addr).await?,
        };
        let reply = self.exchange_with(&mut s, cmd, parts).await?;
        self.0
            .pool
            .lock()
            .entry(addr.to_string())
            .or_default()
            .push(s);
        ok_reply(reply)
    }

    async fn connect(&self, addr: &str) -> Result<TcpStream, TransportError> {
        let mut s = TcpStream::connect(addr).await.map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        let Some(key) = self.0.key.clone() else {
            return Ok(s);
        };
        let hello = doc! {"_replHandshake": 1, "$db": "admin"};
        let challenge = ok_reply(self.exchange(&mut s, &hello).await?)?;
        let ns = get_binary(&challenge, "nonce")
            .map_err(|e| TransportError::Auth(e.message))?
            .to_vec();
        let nc: [u8; NONCE] = rand::random();
        let proof = handshake_proof(&key, false, &ns, &nc);
        let answer = doc! {"_replHandshake": 2, "nonce": binary(nc.to_vec()), "proof": binary(proof), "$db": "admin"};
        let reply = ok_reply(self.exchange(&mut s, &answer).await?)
            .map_err(|e| TransportError::Auth(e.to_string()))?;
        let server = get_binary(&reply, "proof").map_err(|e| TransportError::Auth(e.message))?;
        if !verify_handshake_proof(&key, true, &ns, &nc, server) {
            return Err(TransportError::Auth(
                "the member does not hold the cluster key".into(),
            ));
        }
        Ok(s)
    }

    async fn exchange(
        &self,
        s: &mut TcpStream,
        cmd: &Document,
    ) -> Result<Document, TransportError> {
        self.exchange_with(s, cmd, &[]).await
    }

    /// `exchange` with a document sequence `parts` beside the command (OP_MSG's kind 1).
    async fn exchange_with(
        &self,
        s: &mut TcpStream,
        cmd: &Document,
        parts: &[Document],
    ) -> Result<Document, TransportError> {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let sequences: &[(&str, &[Document])] = if parts.is_empty() {
            &[]
        } else {
            &[(BODY_PARTS, parts)]
        };
        s.write_all(&crate::wire::msg_request(cmd, sequences, id, 0))
            .await
            .map_err(io)?;
        let len = s.read_i32_le().await.map_err(io)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| (21..=MAX_REPLY).contains(&l))
            .ok_or_else(|| TransportError::Codec(format!("reply length {len} out of range")))?;
        let mut buf = vec![0u8; len - 4];
        s.read_exact(&mut buf).await.map_err(io)?;
        // After the header (12 bytes left of it): OP_MSG's flags, then a body section (kind 0).
        let op = i32::from_le_bytes(buf[8..12].try_into().expect("4 bytes"));
        if op != crate::wire::OP_MSG || buf[16] != 0 {
            return Err(TransportError::Codec(format!(
                "unexpected reply (op code {op})"
            )));
        }
        Document::from_reader(&buf[17..]).map_err(|e| TransportError::Codec(e.to_string()))
    }
}

fn ok_reply(reply: Document) -> Result<Document, TransportError> {
    let ok = match reply.get("ok") {
        Some(Bson::Double(d)) => *d == 1.0,
        Some(Bson::Int32(i)) => *i == 1,
        _ => false,
    };
    if ok {
        return Ok(reply);
    }
    Err(TransportError::Io(format!(
        "{} ({})",
        reply.get_str("errmsg").unwrap_or("error"),
        reply.get_i32("code").unwrap_or(0)
    )))
}

impl Transport for WireTransport {
    fn call(
        &self,
        _from: NodeId,
        _to: NodeId,
        addr: &str,
        kind: RpcKind,
        body: Vec<u8>,
    ) -> RpcFuture {
        let this = self.clone();
        let addr = addr.to_string();
        Box::pin(async move {
            let (cmd, parts) = rpc_command(kind, body)?;
            let reply = this.command_with(&addr, &cmd, &parts).await?;
            get_binary(&reply, "answer")
                .map(<[u8]>::to_vec)
                .map_err(|e| TransportError::Codec(e.message))
        })
    }
}

/// The server's side of `_replHandshake`: step 1 sends a nonce, step 2 checks the peer's
/// proof, marks the connection as a member's and answers the server's proof.
pub fn handshake(
    key: Option<&[u8]>,
    cmd: &Document,
    conn: &crate::client::ConnInfo,
) -> DocResult<Document> {
    let Some(key) = key else {
        return Ok(doc! {"note": "no security.keyFile: members do not authenticate"});
    };
    let mut auth = conn.auth.lock();
    match cmd.get("_replHandshake") {
        Some(Bson::Int32(1)) => {
            let ns: [u8; NONCE] = rand::random();
            auth.member_nonce = Some(ns);
            Ok(doc! {"nonce": binary(ns.to_vec())})
        }
        Some(Bson::Int32(2)) => {
            let ns = auth.member_nonce.take().ok_or_else(|| {
                DocError::with_code(18, "AuthenticationFailed", "no handshake in progress")
            })?;
            let nc = get_binary(cmd, "nonce")?;
            if !verify_handshake_proof(key, false, &ns, nc, get_binary(cmd, "proof")?) {
                return Err(DocError::with_code(
                    18,
                    "AuthenticationFailed",
                    "the peer does not hold the cluster key",
                ));
            }
            auth.member = true;
            Ok(doc! {"proof": binary(handshake_proof(key, true, &ns, nc))})
        }
        _ => Err(DocError::bad_value("_replHandshake must be 1 or 2")),
    }
}

/// Whether the connection may carry members' commands: always without a key, else once
/// `_replHandshake` succeeded on it.
pub fn check_member(key: Option<&[u8]>, conn: &crate::client::ConnInfo) -> DocResult<()> {
    if key.is_none() || conn.auth.lock().member {
        return Ok(());
    }
    Err(DocError::with_code(
        13,
        "Unauthorized",
        "only another member of the replica set, authenticated with the cluster key, may run this command",
    ))
}

/// The document sequence that carries an RPC body too large for one BSON value.
const BODY_PARTS: &str = "bodyParts";
/// The largest part of an RPC body in one BSON binary (BSON's own limit is 16 MB).
const RPC_PART_BYTES: usize = 8 << 20;
/// Room left in a message for the command and the parts' framing.
const RPC_FRAMING_BYTES: usize = 64 << 10;

/// `_replRpc`'s command for an RPC, and the parts of its body when it is too large for one
/// BSON binary (a catch-up's AppendEntries may be: openraft bounds it in entries, not bytes),
/// which travel as a document sequence up to the wire's 48 MB message. A larger body is
/// refused here rather than failing to encode.
fn rpc_command(kind: RpcKind, body: Vec<u8>) -> Result<(Document, Vec<Document>), TransportError> {
    let max = crate::wire::MAX_MESSAGE_SIZE as usize - RPC_FRAMING_BYTES;
    if body.len() > max {
        return Err(TransportError::Codec(format!(
            "an RPC of {} bytes is larger than a message may be ({max})",
            body.len()
        )));
    }
    let mut cmd = doc! {"_replRpc": kind as i32, "$db": "admin"};
    if body.len() <= RPC_PART_BYTES {
        cmd.insert("body", binary(body));
        return Ok((cmd, Vec::new()));
    }
    let parts = body
        .chunks(RPC_PART_BYTES)
        .map(|c| doc! {"d": binary(c.to_vec())})
        .collect();
    Ok((cmd, parts))
}

/// An RPC's body from `_replRpc`: its `body`, or its parts joined in order.
pub fn rpc_body(cmd: &Document) -> DocResult<Vec<u8>> {
    if cmd.contains_key("body") {
        return Ok(get_binary(cmd, "body")?.to_vec());
    }
    let parts = cmd
        .get_array(BODY_PARTS)
        .map_err(|_| DocError::bad_value("_replRpc needs a body or its parts"))?;
    let mut body = Vec::new();
    for p in parts {
        let Bson::Document(d) = p else {
            return Err(DocError::bad_value("an RPC body part is not a document"));
        };
        body.extend_from_slice(get_binary(d, "d")?);
    }
    Ok(body)
}

/// An RPC's kind from `_replRpc`'s value.
pub fn rpc_kind(cmd: &Document) -> DocResult<RpcKind> {
    cmd.get_i32("_replRpc")
        .ok()
        .and_then(|k| u8::try_from(k).ok())
        .and_then(RpcKind::from_byte)
        .ok_or_else(|| DocError::bad_value("_replRpc: unknown RPC kind"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command as the server sees it: the parts' sequence merged in as an array.
    fn as_received(kind: RpcKind, body: Vec<u8>) -> Document {
        let (mut cmd, parts) = rpc_command(kind, body).unwrap();
        if !parts.is_empty() {
            cmd.insert(BODY_PARTS, parts);
        }
        cmd
    }

    #[test]
    fn an_rpc_body_of_any_size_a_message_holds_arrives_whole() {
        for len in [
            0,
            1000,
            RPC_PART_BYTES,
            RPC_PART_BYTES + 1,
            3 * RPC_PART_BYTES + 7,
        ] {
            let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let cmd = as_received(RpcKind::AppendEntries, body.clone());
            assert_eq!(cmd.contains_key(BODY_PARTS), len > RPC_PART_BYTES, "{len}");
            assert_eq!(rpc_body(&cmd).unwrap(), body, "{len}");
        }
    }

    #[test]
    fn an_rpc_larger_than_a_message_is_refused_not_sent() {
        let too_big = vec![0; crate::wire::MAX_MESSAGE_SIZE as usize];
        assert!(matches!(
            rpc_command(RpcKind::AppendEntries, too_big),
            Err(TransportError::Codec(_))
        ));
        let bad = doc! {"_replRpc": 1, "bodyParts": [1]};
        assert!(rpc_body(&bad).is_err());
        assert!(rpc_body(&doc! {"_replRpc": 1}).is_err());
    }
}
