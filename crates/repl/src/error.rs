//! The errors a replica-set member reports to its caller.

use crate::{LogPosition, NodeId};

pub type Result<T, E = ReplError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ReplError {
    /// This member is not the leader (mongod's NotWritablePrimary, 10107); the leader, if known.
    #[error("not the primary (leader: {leader:?})")]
    NotLeader { leader: Option<(NodeId, String)> },
    /// The position was in this member's log but another entry was committed at its index: the
    /// write was never majority-replicated and is gone.
    #[error("the entry at {proposed} was rolled back: {committed:?} was committed at its index")]
    RolledBack {
        proposed: LogPosition,
        committed: Option<LogPosition>,
    },
    /// Waiting ran out (mongod's `wtimeout`, WriteConcernTimeout 64).
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The log no longer holds the index, so the entry committed there cannot be compared.
    #[error("position {0} is older than the retained log")]
    Compacted(LogPosition),
    #[error("storage: {0}")]
    Storage(String),
    #[error("raft: {0}")]
    Raft(String),
    #[error("the member is shut down")]
    Shutdown,
    #[error("bad configuration: {0}")]
    Config(String),
}

impl From<engine::Error> for ReplError {
    fn from(e: engine::Error) -> Self {
        ReplError::Storage(e.to_string())
    }
}
