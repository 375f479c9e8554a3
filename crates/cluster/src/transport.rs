//! How routers and shards send each other commands: [`ShardConn`] runs one command on one
//! node and returns its reply. Over TCP ([`TcpConnector`]) it is an OP_MSG client with a small
//! connection pool per host; in process ([`InProcConnector`], the lab) it calls the node's
//! command dispatch directly, through the same hooks a socket would reach.

use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use server::keyfile::{KeyFile, INTERNAL_DB, INTERNAL_USER};
use server::scram::{self, ClientConversation, Mechanism};
use server::state::{ConnInfo, ServerState};
use server::wire;
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub trait ShardConn: Send + Sync {
    /// Runs `cmd` (which carries `$db`); an `ok: 0` reply is returned as a reply, a node that
    /// cannot be reached is an error (HostUnreachable).
    fn call(&self, cmd: &Document) -> DocResult<Document>;
}

/// Opens connections to nodes by their host string.
pub trait Connector: Send + Sync {
    fn connect(&self, host: &str) -> Arc<dyn ShardConn>;
}

/// Runs a command and turns an `ok: 0` reply into an error with the node's code.
pub fn call_ok(conn: &dyn ShardConn, cmd: &Document) -> DocResult<Document> {
    let reply = conn.call(cmd)?;
    if is_ok(&reply) {
        Ok(reply)
    } else {
        Err(reply_error(&reply))
    }
}

pub fn is_ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(d)) => *d == 1.0,
        Some(Bson::Int32(i)) => *i == 1,
        Some(Bson::Int64(i)) => *i == 1,
        Some(Bson::Boolean(b)) => *b,
        _ => false,
    }
}

/// The error an `ok: 0` reply (or a write error document) describes, extra fields kept.
pub fn reply_error(reply: &Document) -> DocError {
    let code = reply.get_i32("code").unwrap_or(8);
    let mut e = DocError::with_code(
        code,
        intern(reply.get_str("codeName").unwrap_or("UnknownError")),
        reply
            .get_str("errmsg")
            .unwrap_or("unknown error")
            .to_string(),
    );
    let mut extra = Document::new();
    for (k, v) in reply {
        if !matches!(k.as_str(), "ok" | "code" | "codeName" | "errmsg" | "index") {
            extra.insert(k.clone(), v.clone());
        }
    }
    if !extra.is_empty() {
        e.extra = Some(Box::new(extra));
    }
    e
}

/// Error code names as `&'static str` (DocError's type); the set of names is small and fixed
/// by the servers, so interning them is bounded.
fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = NAMES.get_or_init(Default::default).lock();
    if let Some(n) = set.get(name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

pub fn host_unreachable(host: &str, what: impl std::fmt::Display) -> DocError {
    DocError::with_code(6, "HostUnreachable", format!("{host}: {what}"))
}

/// TCP connections, pooled per host; with the cluster's key file, each connection
/// authenticates as the internal user before its first command.
#[derive(Default)]
pub struct TcpConnector {
    hosts: Mutex<HashMap<String, Arc<TcpShard>>>,
    key: Option<KeyFile>,
}

impl TcpConnector {
    /// Connections that authenticate as the internal user with `key` (`security.keyFile`).
    pub fn with_key(key: Option<KeyFile>) -> TcpConnector {
        TcpConnector {
            hosts: Mutex::default(),
            key,
        }
    }
}

impl Connector for TcpConnector {
    fn connect(&self, host: &str) -> Arc<dyn ShardConn> {
        self.hosts
            .lock()
            .entry(host.to_string())
            .or_insert_with(|| {
                Arc::new(TcpShard {
                    host: host.to_string(),
                    idle: Mutex::new(Vec::new()),
                    key: self.key.clone(),
                })
            })
            .clone()
    }
}

pub struct TcpShard {
    host: String,
    idle: Mutex<Vec<TcpStream>>,
    key: Option<KeyFile>,
}

/// Idle connections kept per host.
const POOL_MAX: usize = 32;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A command may take this long (a large batch of journaled writes is the slowest); a node
/// that stays silent longer is taken as unreachable.
const REPLY_TIMEOUT: Duration = Duration::from_secs(3600);
static REQUEST_ID: AtomicI32 = AtomicI32::new(1);

impl TcpShard {
    fn open(&self) -> DocResult<TcpStream> {
        let addr = self
            .host
            .to_socket_addrs()
            .map_err(|e| host_unreachable(&self.host, e))?
            .next()
            .ok_or_else(|| host_unreachable(&self.host, "resolves to nothing"))?;
        let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|e| host_unreachable(&self.host, e))?;
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(REPLY_TIMEOUT)).ok();
        s.set_write_timeout(Some(REPLY_TIMEOUT)).ok();
        let mut s = s;
        if let Some(key) = &self.key {
            self.authenticate(&mut s, key)?;
        }
        Ok(s)
    }

    /// SCRAM-SHA-256 as the internal user (`__system@local`) with the key as its password,
    /// checking the node's signature too: a node without the key is refused as much as it
    /// refuses us.
    fn authenticate(&self, s: &mut TcpStream, key: &KeyFile) -> DocResult<()> {
        let failed = |what: String| {
            DocError::with_code(
                18,
                "AuthenticationFailed",
                format!(
                    "authenticating to {} as the cluster's internal user: {what}",
                    self.host
                ),
            )
        };
        let (mut client, first) =
            ClientConversation::start(Mechanism::Sha256, INTERNAL_USER, key.password())
                .map_err(failed)?;
        let start = doc! {
            "saslStart": 1,
            "mechanism": Mechanism::Sha256.name(),
            "payload": scram::bin(first),
            "options": {"skipEmptyExchange": true},
            "$db": INTERNAL_DB,
        };
        let reply = self.exchange(s, &start)?;
        let server_first = sasl_payload(&reply).map_err(failed)?;
        let last = client.finish(&server_first).map_err(failed)?;
        let cont = doc! {
            "saslContinue": 1,
            "conversationId": reply.get("conversationId").cloned().unwrap_or(Bson::Int32(1)),
            "payload": scram::bin(last),
            "$db": INTERNAL_DB,
        };
        let reply = self.exchange(s, &cont)?;
        client
            .verify(&sasl_payload(&reply).map_err(failed)?)
            .map_err(failed)?;
        if reply.get_bool("done") != Ok(true) {
            return Err(failed("the node did not end the exchange".into()));
        }
        Ok(())
    }

    /// One command on a connection not yet pooled.
    fn exchange(&self, s: &mut TcpStream, cmd: &Document) -> DocResult<Document> {
        let id = REQUEST_ID.fetch_add(1, Ordering::Relaxed);
        s.write_all(&wire::msg_request(cmd, &[], id, 0))
            .map_err(|e| host_unreachable(&self.host, e))?;
        read_reply(s).map_err(|e| host_unreachable(&self.host, e))
    }
}

/// The SCRAM payload of a saslStart/saslContinue reply (an `ok: 0` reply is the node's error).
fn sasl_payload(reply: &Document) -> Result<Vec<u8>, String> {
    if !is_ok(reply) {
        return Err(reply_error(reply).message);
    }
    match reply.get("payload") {
        Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
        _ => Err("the reply has no SCRAM payload".into()),
    }
}

impl TcpShard {
    /// An idle connection whose peer is still there. A peer that closed it (a restarted
    /// node) leaves an end-of-file waiting on it; writing to such a socket often succeeds and
    /// only the read fails, after the request was sent — too late to retry safely. So each
    /// pooled connection is probed before use, and closed ones are dropped (bounded by the
    /// pool's size).
    fn live_idle(&self) -> Option<TcpStream> {
        for _ in 0..=POOL_MAX {
            let s = self.idle.lock().pop()?;
            if is_open(&s) {
                return Some(s);
            }
        }
        None
    }
}

/// Whether the peer has neither closed `s` nor sent anything unasked (a non-blocking peek
/// finds nothing to read).
fn is_open(s: &TcpStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return false;
    }
    let open =
        matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    open && s.set_nonblocking(false).is_ok()
}

impl ShardConn for TcpShard {
    fn call(&self, cmd: &Document) -> DocResult<Document> {
        let mut s = match self.live_idle() {
            Some(s) => s,
            None => self.open()?,
        };
        let id = REQUEST_ID.fetch_add(1, Ordering::Relaxed);
        let request = wire::msg_request(cmd, &[], id, 0);
        if s.write_all(&request).is_err() {
            // A pooled connection the peer closed meanwhile: the request never arrived whole,
            // so sending it on a fresh connection cannot run it twice.
            s = self.open()?;
            s.write_all(&request)
                .map_err(|e| host_unreachable(&self.host, e))?;
        }
        // Once sent, a command is never sent again: the node may have run it.
        let reply = read_reply(&mut s).map_err(|e| host_unreachable(&self.host, e))?;
        let mut idle = self.idle.lock();
        if idle.len() < POOL_MAX {
            idle.push(s);
        }
        Ok(reply)
    }
}

fn read_reply(s: &mut TcpStream) -> std::io::Result<Document> {
    let mut h = [0u8; wire::Header::LEN];
    s.read_exact(&mut h)?;
    let header = wire::Header::parse(&h);
    let len = header
        .validate()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    match wire::parse_request(&header, &body) {
        Ok(wire::Request::Msg { body, .. }) => Ok(body),
        Ok(_) => Err(std::io::Error::other("unexpected reply opcode")),
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

/// In-process nodes by host name (the lab's cluster).
#[derive(Default)]
pub struct InProcConnector {
    nodes: Mutex<HashMap<String, Arc<InProcShard>>>,
}

impl InProcConnector {
    pub fn register(&self, host: &str, state: Arc<ServerState>) {
        self.nodes
            .lock()
            .insert(host.to_string(), Arc::new(InProcShard { state }));
    }
}

impl Connector for InProcConnector {
    fn connect(&self, host: &str) -> Arc<dyn ShardConn> {
        match self.nodes.lock().get(host) {
            Some(n) => n.clone(),
            None => Arc::new(Unreachable(host.to_string())),
        }
    }
}

struct Unreachable(String);

impl ShardConn for Unreachable {
    fn call(&self, _cmd: &Document) -> DocResult<Document> {
        Err(host_unreachable(&self.0, "no such in-process node"))
    }
}

pub struct InProcShard {
    state: Arc<ServerState>,
}

impl ShardConn for InProcShard {
    fn call(&self, cmd: &Document) -> DocResult<Document> {
        let conn = ConnInfo::in_process(0);
        Ok(server::commands::run(&self.state, cmd, &conn).0)
    }
}

/// `{name: value, $db: db}` helper for building commands.
pub fn command(name: &str, value: impl Into<Bson>, db: &str) -> Document {
    doc! {name: value.into(), "$db": db}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A node that answers one request per connection and then closes it, as a restarted
    /// node leaves its peers' pooled connections: the second call must not fail on the
    /// pooled, closed one.
    #[test]
    fn a_connection_the_peer_closed_is_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let (closed_tx, closed_rx) = mpsc::channel();
        let node = std::thread::spawn(move || {
            for n in 0..2 {
                let (mut s, _) = listener.accept().unwrap();
                let mut h = [0u8; wire::Header::LEN];
                s.read_exact(&mut h).unwrap();
                let len = wire::Header::parse(&h).validate().unwrap();
                let mut body = vec![0u8; len];
                s.read_exact(&mut body).unwrap();
                s.write_all(&wire::msg_request(&doc! {"ok": 1, "n": n}, &[], 1, 0))
                    .unwrap();
                drop(s);
                closed_tx.send(()).unwrap();
            }
        });
        let conn = TcpConnector::default().connect(&host);
        assert_eq!(conn.call(&doc! {"ping": 1}).unwrap().get_i32("n"), Ok(0));
        closed_rx.recv().unwrap();
        // Let the FIN reach this side's socket before the pooled connection is looked at.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(conn.call(&doc! {"ping": 1}).unwrap().get_i32("n"), Ok(1));
        node.join().unwrap();
    }
}
