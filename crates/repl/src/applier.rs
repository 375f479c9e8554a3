//! What the document layer implements: applying committed entries in log order, and the
//! snapshot a new or far-behind member starts from (initial sync).

use crate::LogPosition;
use std::io::{Read, Write};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A member's state machine. The log calls it from one task at a time, in log order, with
/// committed entries only: nothing it is given is ever rolled back.
pub trait Applier: Send + Sync + 'static {
    /// Applies the committed entry at `pos`. Positions only increase. An error stops the member
    /// (openraft treats a state-machine failure as fatal), so the applier must make apply
    /// idempotent and retryable from `last_applied` rather than fail.
    fn apply(&self, pos: LogPosition, entry: &[u8]) -> Result<(), BoxError>;
    /// The last position applied, durably: after a restart the log resumes after it.
    fn last_applied(&self) -> Option<LogPosition>;
    /// Writes the state as of `last_applied()` to `out` and returns that position. The log
    /// asks between two `apply` calls, so the state does not move while it is written. An
    /// error means "not now": the log keeps its entries and asks again after the next
    /// applied entries (an applier holding writes not yet committed cannot snapshot them).
    fn snapshot(&self, out: &mut dyn Write) -> Result<Option<LogPosition>, BoxError>;
    /// Replaces the whole state with one a snapshot carries, taken at `pos`; afterwards
    /// `last_applied()` is `pos`.
    fn install_snapshot(
        &self,
        pos: Option<LogPosition>,
        data: &mut dyn Read,
    ) -> Result<(), BoxError>;
    /// The member's log dropped its entries from `from` on: they were never committed (so were
    /// never given to `apply`), and another leader's entries replace them. A layer that acted
    /// on an entry before its commit (mongod's primary writes its oplog and data first) undoes
    /// it here (docs/replication.md, "Rollback").
    fn log_truncated(&self, from: LogPosition) {
        let _ = from;
    }
}
