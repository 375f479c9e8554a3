//! The replicated log a replica set's oplog rides on (issue 36): consensus from openraft, the
//! log, vote and snapshot metadata in the storage engine's own tables, and a byte transport.
//!
//! The document layer sees three things: [`ReplNode`] (propose an entry, wait for it to be
//! majority-committed, read the set's status, change its membership), [`Applier`] (what each
//! member does with committed entries, in log order, and how it makes and installs a
//! snapshot), and [`Transport`] (how members reach each other). Entries are opaque bytes; the
//! oplog's shape belongs to crates/docdb. docs/replication.md explains the design.

pub mod applier;
pub mod error;
pub mod node;
pub mod state_machine;
pub mod status;
pub mod store;
pub mod transport;

pub use applier::{Applier, BoxError};
pub use error::{ReplError, Result};
pub use node::{Enough, Member, NodeConfig, ReplNode};
pub use status::{MemberStatus, Role, Status};
pub use transport::sim::SimNet;
pub use transport::tcp::{TcpServer, TcpTransport};
pub use transport::{RpcFuture, RpcHandler, RpcKind, Transport, TransportError};

use serde::{Deserialize, Serialize};
use std::io::Cursor;

/// A member's id in the group (mongod's member `_id`).
pub type NodeId = u64;

/// What openraft stores in a log entry: the user's bytes, tagged with who proposed them and a
/// per-node sequence so the proposer learns the entry's position as soon as it is in its own
/// log (the `w: 1` answer) without waiting for the commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub origin: NodeId,
    pub seq: u64,
    /// Base64 in the log's and the RPCs' JSON: as serde's default array of numbers it was
    /// about 3.5 bytes per byte, and parsing it number by number led the primary's profile
    /// under a bulk insert.
    #[serde(with = "base64_bytes")]
    pub data: Vec<u8>,
}

mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// A member as the group's configuration records it: its address, and what of mongod's
/// member settings Raft can carry (docs/replication.md, "What openraft lacks").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberNode {
    /// `host:port` peers connect to.
    pub addr: String,
    /// `priority > 0`: the member may start elections. A voter with priority 0 votes but never
    /// campaigns (its election timer is off); other priority values are not ordered.
    pub electable: bool,
    /// `hidden: true`: not advertised in `hello`. Raft does not look at it.
    pub hidden: bool,
}

impl std::fmt::Display for MemberNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr)
    }
}

openraft::declare_raft_types!(
    /// openraft's types for flashdoc's replicated log.
    pub TypeConfig:
        D = Proposal,
        R = (),
        NodeId = NodeId,
        Node = MemberNode,
);

pub type LogId = openraft::LogId<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;
pub type Entry = openraft::Entry<TypeConfig>;

/// A log position: Raft's term and index, which are mongod's optime `t` and the order of `ts`
/// (docs/replication.md, "Optimes"). Ordered by term, then index; within one log the index
/// alone orders positions.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct LogPosition {
    pub term: u64,
    pub index: u64,
}

impl LogPosition {
    pub fn from_log_id(id: &LogId) -> LogPosition {
        LogPosition {
            term: id.leader_id.term,
            index: id.index,
        }
    }
    /// The openraft log id of this position: with one leader per term (single-term-leader) a
    /// log id is exactly (term, index), so the node id given here is not recorded.
    pub fn to_log_id(self) -> LogId {
        openraft::LogId::new(openraft::CommittedLeaderId::new(self.term, 0), self.index)
    }
}

impl std::fmt::Display for LogPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{t: {}, i: {}}}", self.term, self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposals_bytes_travel_as_base64() {
        let p = Proposal {
            origin: 2,
            seq: 7,
            data: vec![0, 1, 254, 255],
        };
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"{"origin":2,"seq":7,"data":"AAH+/w=="}"#);
        assert_eq!(serde_json::from_str::<Proposal>(&json).unwrap(), p);
        let bad = r#"{"origin":2,"seq":7,"data":"not base64!"}"#;
        assert!(serde_json::from_str::<Proposal>(bad).is_err());
    }
}
