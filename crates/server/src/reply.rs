//! A failed command's reply document, built from the error alone: every layer that answers a
//! command (the command table, the replica-set paths) needs it, and none of them should depend
//! on another for it.

use bson::{doc, Document};
use docdb::DocError;

/// `{ok: 0, errmsg, code, codeName}` and the error's extra fields (mongod's error reply).
pub fn error_reply(e: &DocError) -> Document {
    let mut d =
        doc! {"ok": 0.0, "errmsg": e.message.clone(), "code": e.code, "codeName": e.code_name};
    if let Some(extra) = &e.extra {
        for (k, v) in extra.iter() {
            d.insert(k.clone(), v.clone());
        }
    }
    d
}
