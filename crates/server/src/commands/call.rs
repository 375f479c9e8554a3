//! One command on its way to its handler: what every handler receives.

use crate::state::{ConnInfo, ServerState};
use bson::Document;
use docdb::DocDb;
use std::sync::Arc;

pub(crate) struct Call<'a> {
    pub state: &'a Arc<ServerState>,
    /// The name it was called by (one of its row's names).
    pub name: &'a str,
    pub db: &'a str,
    pub cmd: &'a Document,
    pub conn: &'a ConnInfo,
    /// The hook's own fields on this command (see `CommandHook::command_fields`).
    pub hook_fields: &'a [&'a str],
    /// The collection the first field names, read by the dispatcher for a row whose namespace
    /// is `Namespace::Collection` or `Namespace::IndexList`.
    pub coll: Option<String>,
}

impl Call<'_> {
    pub fn dbx(&self) -> &Arc<DocDb> {
        self.state.db()
    }

    /// The collection the command names. Only a handler of a collection's row asks for it: the
    /// dispatcher has read it then, and anything else is a table row that lies.
    pub fn coll(&self) -> &str {
        self.coll
            .as_deref()
            .expect("the handler of a row whose namespace is a collection")
    }

    /// The command's own options: the fields after its name, less the generic ones and the
    /// hook's (what the document layer sees of `create` and `collMod`).
    pub fn options(&self) -> Document {
        super::fields::command_options(self.cmd, self.hook_fields)
    }
}
