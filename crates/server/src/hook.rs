//! The server's one extension point for commands: a [`CommandHook`] sees every command before
//! the built-in dispatch and may answer it, wrap the built-in implementation, or decline. The
//! trait and the call it receives are declared with the shared state (`state`), which holds
//! the hook and is held by the call; here is what a hook may do with a call.

use crate::commands;
use crate::commands::batch::{self, CursorOpts};
use bson::Document;
use docdb::{DocCursor, DocResult};

pub use crate::state::{CommandCall, CommandHook, HookAccess};

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
        let opts = CursorOpts {
            single,
            ..Default::default()
        };
        batch::cursor_reply(self.state, ns, cursor, first, opts, "firstBatch")
    }
}
