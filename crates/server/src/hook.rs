//! The server's one extension point for commands. A [`CommandHook`] sees every command before
//! the built-in dispatch and may answer it itself, wrap the built-in implementation (run its
//! own checks, then [`CommandCall::builtin`], possibly with a rewritten command), or decline.
//! The `cluster` crate's shard and router plug in here; the server knows nothing about them.
#![allow(clippy::result_large_err)]

use crate::commands;
use crate::state::{ConnInfo, ServerState};
use bson::Document;
use docdb::{DocCursor, DocResult};
use std::sync::Arc;

pub trait CommandHook: Send + Sync {
    /// `Some(reply)` answers the command; `None` leaves it to the built-in dispatch.
    fn run(&self, call: &CommandCall<'_>) -> Option<Document>;
    /// Adds fields to the reply of a command the hook left to the built-in dispatch (a router
    /// marks `hello` with `msg: "isdbgrid"`).
    fn amend_reply(&self, _name: &str, _reply: &mut Document) {}
    /// Fields of its own the hook reads from the commands it wraps (a shard's
    /// `shardVersion`): the built-in commands' strict field check accepts them, so the hook
    /// hands the command on as it came, without copying it to remove them.
    fn command_fields(&self, _name: &str) -> &'static [&'static str] {
        &[]
    }
}

/// One command as the hook sees it.
pub struct CommandCall<'a> {
    pub name: &'a str,
    pub db: &'a str,
    pub cmd: &'a Document,
    pub state: &'a Arc<ServerState>,
    pub conn: &'a ConnInfo,
}

impl CommandCall<'_> {
    /// The built-in implementation of `cmd` (same name), its errors as `ok: 0` replies.
    pub fn builtin(&self, cmd: &Document) -> Document {
        commands::run_builtin(self.state, self.name, self.db, cmd, self.conn)
    }

    /// Keeps `cursor` for getMore (unless exhausted or `single`) and returns the
    /// `{cursor: {firstBatch, id, ns}}` reply with up to `first` documents.
    pub fn cursor_reply(
        &self,
        ns: &str,
        cursor: DocCursor,
        first: usize,
        single: bool,
    ) -> DocResult<Document> {
        let opts = commands::CursorOpts {
            single,
            ..Default::default()
        };
        commands::cursor_reply(self.state, ns, cursor, first, opts, "firstBatch")
    }
}
