//! A failed command's reply document, built from the error alone: every layer that answers a
//! command (the command table, the replica-set paths) needs it, and none of them should depend
//! on another for it.

use bson::{doc, Document};
use docdb::DocError;

/// The codes after which a change stream cannot be resumed (ChangeStreamFatalError,
/// ChangeStreamHistoryLost): mongod labels them `NonResumableChangeStreamError` on any command.
const NON_RESUMABLE_CHANGE_STREAM_CODES: &[i32] = &[280, 286];

/// `{ok: 0, errmsg, code, codeName}` and the error's extra fields (mongod's error reply), with
/// `NonResumableChangeStreamError` among the labels of an error a change stream cannot
/// resume after.
pub fn error_reply(e: &DocError) -> Document {
    let mut d = plain_error_reply(e);
    if NON_RESUMABLE_CHANGE_STREAM_CODES.contains(&e.code) && !d.contains_key("errorLabels") {
        d.insert("errorLabels", vec!["NonResumableChangeStreamError"]);
    }
    d
}

fn plain_error_reply(e: &DocError) -> Document {
    let mut d =
        doc! {"ok": 0.0, "errmsg": e.message.clone(), "code": e.code, "codeName": e.code_name};
    if let Some(extra) = &e.extra {
        for (k, v) in extra.iter() {
            d.insert(k.clone(), v.clone());
        }
    }
    d
}
