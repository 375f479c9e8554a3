//! How members reach each other: openraft's RPCs (append entries, vote, install snapshot) and
//! the set's own (start an election, for a step-down), carried as bytes by a [`Transport`].
//! Two transports: [`sim::SimNet`] in process, with injected faults, for tests, and
//! [`tcp`] between processes, authenticated with the cluster's shared key.

pub mod sim;
pub mod tcp;

use crate::{MemberNode, NodeId, Raft, TypeConfig};
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

/// The RPCs a member serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RpcKind {
    AppendEntries = 1,
    Vote = 2,
    InstallSnapshot = 3,
    /// Start an election now (the target of a step-down, `replSetStepDown`).
    Elect = 4,
    /// The newest entry the member applied (a `w: N` write waits for N members to apply it,
    /// as mongod's secondaries report their applied optime upstream).
    Applied = 5,
}

impl RpcKind {
    pub fn from_byte(b: u8) -> Option<RpcKind> {
        Some(match b {
            1 => RpcKind::AppendEntries,
            2 => RpcKind::Vote,
            3 => RpcKind::InstallSnapshot,
            4 => RpcKind::Elect,
            5 => RpcKind::Applied,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("node {0} is unreachable")]
    Unreachable(NodeId),
    #[error("connection: {0}")]
    Io(String),
    #[error("authentication with the peer failed: {0}")]
    Auth(String),
    #[error("bad message: {0}")]
    Codec(String),
}

pub type RpcFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>> + Send>>;

/// Carries one request to member `to` (at `addr`) and brings back its answer.
pub trait Transport: Send + Sync + 'static {
    fn call(&self, from: NodeId, to: NodeId, addr: &str, kind: RpcKind, body: Vec<u8>)
        -> RpcFuture;
}

/// A member's receiving side: answers one request.
pub trait RpcHandler: Send + Sync + 'static {
    fn handle(&self, kind: RpcKind, body: Vec<u8>) -> RpcFuture;
}

fn to_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("RPC messages serialize")
}

fn from_bytes<T: DeserializeOwned>(b: &[u8]) -> Result<T, TransportError> {
    serde_json::from_slice(b).map_err(|e| TransportError::Codec(e.to_string()))
}

/// The handler of a running member: decodes the request, asks its Raft, encodes the answer
/// (openraft's `Result`, so the caller gets the remote error back).
pub struct RaftHandler {
    pub raft: Raft,
}

impl RpcHandler for RaftHandler {
    fn handle(&self, kind: RpcKind, body: Vec<u8>) -> RpcFuture {
        let raft = self.raft.clone();
        Box::pin(async move {
            Ok(match kind {
                RpcKind::AppendEntries => to_bytes(&raft.append_entries(from_bytes(&body)?).await),
                RpcKind::Vote => to_bytes(&raft.vote(from_bytes(&body)?).await),
                RpcKind::InstallSnapshot => {
                    to_bytes(&raft.install_snapshot(from_bytes(&body)?).await)
                }
                RpcKind::Elect => {
                    let res = raft.trigger().elect().await.map_err(|e| e.to_string());
                    to_bytes(&res)
                }
                RpcKind::Applied => {
                    let applied = raft.metrics().borrow().last_applied;
                    to_bytes(&applied.map(|l| l.index))
                }
            })
        })
    }
}

/// When each peer last answered this member (the leader's heartbeats): `replSetGetStatus`'s
/// `lastHeartbeatRecv`.
pub type Contacts = Arc<Mutex<HashMap<NodeId, Instant>>>;

/// openraft's network factory over a [`Transport`].
pub struct Network {
    pub id: NodeId,
    pub transport: Arc<dyn Transport>,
    pub contacts: Contacts,
}

pub struct Peer {
    id: NodeId,
    target: NodeId,
    addr: String,
    transport: Arc<dyn Transport>,
    contacts: Contacts,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;
    async fn new_client(&mut self, target: NodeId, node: &MemberNode) -> Peer {
        Peer {
            id: self.id,
            target,
            addr: node.addr.clone(),
            transport: self.transport.clone(),
            contacts: self.contacts.clone(),
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, MemberNode, RaftError<NodeId, E>>>;

impl Peer {
    /// Sends one RPC and decodes the remote `Result`, mapping a lost message or a timeout to
    /// `Unreachable` (openraft then backs off and retries).
    async fn send<Req, Resp, E>(
        &self,
        kind: RpcKind,
        req: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: DeserializeOwned + std::error::Error,
    {
        let call = self
            .transport
            .call(self.id, self.target, &self.addr, kind, to_bytes(req));
        let answer = match tokio::time::timeout(option.hard_ttl(), call).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(_) => {
                let e = TransportError::Unreachable(self.target);
                return Err(RPCError::Unreachable(Unreachable::new(&e)));
            }
        };
        let decoded: Result<Resp, RaftError<NodeId, E>> =
            from_bytes(&answer).map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        self.contacts.lock().insert(self.target, Instant::now());
        decoded.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.send(RpcKind::AppendEntries, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.send(RpcKind::InstallSnapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.send(RpcKind::Vote, &rpc, &option).await
    }
}

/// Asks member `to` to start an election now (a step-down's hand-over).
pub async fn request_election(
    transport: &dyn Transport,
    from: NodeId,
    to: NodeId,
    addr: &str,
) -> Result<(), TransportError> {
    let answer = transport
        .call(from, to, addr, RpcKind::Elect, Vec::new())
        .await?;
    let res: Result<(), String> = from_bytes(&answer)?;
    res.map_err(TransportError::Io)
}

/// The index of the newest entry member `to` applied (`None`: nothing yet).
pub async fn applied_index(
    transport: &dyn Transport,
    from: NodeId,
    to: NodeId,
    addr: &str,
) -> Result<Option<u64>, TransportError> {
    let answer = transport
        .call(from, to, addr, RpcKind::Applied, Vec::new())
        .await?;
    from_bytes(&answer)
}
