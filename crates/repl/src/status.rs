//! What `replSetGetStatus` and `hello` report about the set, as one member sees it.

use crate::{LogPosition, NodeId};
use std::time::Duration;

/// A member's role: Raft's states under mongod's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Raft's leader.
    Primary,
    /// A voting follower.
    Secondary,
    /// Campaigning for election.
    Candidate,
    /// A non-voting member (`votes: 0`), catching up or kept as a copy.
    Learner,
    /// Not in a group yet (before `replSetInitiate`, or removed), or shut down.
    Startup,
}

impl Role {
    /// mongod's `stateStr`.
    pub fn state_str(self) -> &'static str {
        match self {
            Role::Primary => "PRIMARY",
            // mongod has no state for a campaigning member: it stays SECONDARY.
            Role::Secondary | Role::Learner | Role::Candidate => "SECONDARY",
            Role::Startup => "STARTUP",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemberStatus {
    pub id: NodeId,
    pub addr: String,
    pub voter: bool,
    pub electable: bool,
    pub hidden: bool,
    /// The last position known to be in that member's log: on the leader, for every member
    /// (its replication progress); elsewhere, only for this member.
    pub matched: Option<LogPosition>,
    /// How long ago that member last answered this one (`lastHeartbeatRecv`); `None` for this
    /// member, and for members it has not called (a follower calls nobody).
    pub last_heartbeat: Option<Duration>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub id: NodeId,
    pub role: Role,
    pub term: u64,
    pub leader: Option<NodeId>,
    /// mongod's `electionId`: an ObjectId made from the term (`OID::fromTerm`: `0x7fffffff`,
    /// then the term, both big-endian), so a later election always compares greater.
    pub election_id: [u8; 12],
    pub last_log: Option<LogPosition>,
    /// The majority commit point (mongod's `lastCommittedOpTime`).
    pub committed: Option<LogPosition>,
    pub last_applied: Option<LogPosition>,
    pub members: Vec<MemberStatus>,
    /// Elections stay off on this member for this long (`replSetFreeze`, or after a step-down).
    pub frozen_for: Option<Duration>,
}

/// mongod's `OID::fromTerm`.
pub fn election_id(term: u64) -> [u8; 12] {
    let mut id = [0u8; 12];
    id[..4].copy_from_slice(&(i32::MAX as u32).to_be_bytes());
    id[4..].copy_from_slice(&term.to_be_bytes());
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_ids_order_as_terms() {
        assert_eq!(&election_id(1)[..4], &[0x7f, 0xff, 0xff, 0xff]);
        assert!(election_id(2) > election_id(1));
        assert!(election_id(256) > election_id(255));
    }
}
