//! The fields a command may carry: the generic ones every command takes (checked on every
//! command, whatever it is), and each command's own, from its row in the command table.

use super::args::{flag, max_time};
use crate::spec::{Fields, Spec};
use bson::{Bson, Document};
use docdb::{DocError, DocResult};

/// Fields every command may carry: mongod's generic arguments, the one list of them (the
/// document layer never sees them). [`check_generic_fields`] checks their values: `maxTimeMS`
/// bounds every command, `readConcern` is checked on every command, `writeConcern` is taken
/// only by commands that write; the others (session, cluster time, API version, comment)
/// change nothing on a standalone.
pub const GENERIC_FIELDS: &[&str] = &[
    "$db",
    "lsid",
    "$readPreference",
    "$clusterTime",
    "writeConcern",
    "readConcern",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
];

/// Transaction fields: a standalone has neither retryable writes nor transactions, so they are
/// refused unless a hook implements them (a shard's retryable writes declare `txnNumber`). A
/// member takes them all on a transaction's commands (`replset::txn`), and `txnNumber` on the
/// four retryable write commands (`replset::retry` runs them statement by statement, and each
/// statement's command reaches here without it); here `txnNumber` is refused on every other
/// command.
const TRANSACTION_FIELDS: &[&str] = &["startTransaction", "autocommit", "txnNumber"];

/// Why a member refuses `txnNumber` on command `name` (a command outside a transaction).
fn member_refusal(name: &str) -> DocError {
    if crate::retryable::is_retryable_command(name) {
        // The retryable runner took every such write but those of the local database.
        return DocError::illegal_operation(format!(
            "retryable writes are not available on the local database ('txnNumber' on {name})"
        ));
    }
    DocError::illegal_operation(format!(
        "txnNumber may only be provided for multi-document transactions and retryable write commands, not {name}"
    ))
}

/// The Stable API fields: `apiVersion` must be "1"; `apiStrict: true` refuses a command
/// outside version 1 (APIStrictError, 323; the table says which are in it); `apiDeprecationErrors` has nothing to refuse
/// (no command of version 1 that flashdoc has is deprecated).
fn check_api_version(name: &str, spec: Option<&Spec>, cmd: &Document) -> DocResult<()> {
    let strict = flag(cmd, "apiStrict")?;
    flag(cmd, "apiDeprecationErrors")?;
    match cmd.get("apiVersion") {
        None if cmd.contains_key("apiStrict") || cmd.contains_key("apiDeprecationErrors") => {
            Err(DocError::with_code(
                4886600,
                "Location4886600",
                "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
            ))
        }
        None => Ok(()),
        Some(Bson::String(v)) if v == "1" => {
            if strict && !spec.is_some_and(|s| s.in_api_v1(name)) {
                return Err(DocError::with_code(
                    323,
                    "APIStrictError",
                    format!(
                        "Provided apiStrict:true, but the command {name} is not in API Version 1"
                    ),
                ));
            }
            Ok(())
        }
        Some(v) => Err(DocError::with_code(
            322,
            "APIVersionError",
            format!("API version must be \"1\", not {v}"),
        )),
    }
}

/// Checks the generic fields every command may carry, whatever the command: so none of them
/// is accepted and ignored, on any command.
pub(crate) fn check_generic_fields(
    name: &str,
    spec: Option<&Spec>,
    cmd: &Document,
    hook_fields: &[&str],
    member: bool,
) -> DocResult<()> {
    // A member's transaction takes its fields (`replset::txn`), and its first statement may
    // read at `snapshot`.
    let in_txn = member && crate::replset::txn::applies(name, cmd);
    read_concern(cmd, member, in_txn)?;
    check_api_version(name, spec, cmd)?;
    max_time(cmd)?;
    if cmd.contains_key("writeConcern")
        && !spec.is_some_and(|s| s.write_concern)
        && !pipeline_writes(name, cmd)
    {
        return Err(DocError::invalid_options(format!(
            "Command {name} does not support writeConcern"
        )));
    }
    if !member {
        // A member's write concern is its own (`replset::concern`).
        standalone_write_concern(cmd)?;
    }
    if let Some(f) = TRANSACTION_FIELDS
        .iter()
        .find(|f| cmd.contains_key(f) && !hook_fields.contains(f) && !in_txn)
    {
        if member {
            return Err(member_refusal(name));
        }
        return Err(DocError::illegal_operation(format!(
            "Transaction numbers are only allowed on a replica set member or mongos ('{f}' on {name})"
        )));
    }
    Ok(())
}

/// A standalone has one node to acknowledge a write: a write concern asking for more is
/// refused before the command runs, as mongod refuses it.
fn standalone_write_concern(cmd: &Document) -> DocResult<()> {
    let w = cmd
        .get_document("writeConcern")
        .ok()
        .and_then(|wc| wc.get("w"))
        .and_then(query::compare::Num::of);
    if w.is_some_and(|n| n.as_f64() > 1.0) {
        return Err(DocError::bad_value("cannot use 'w' > 1 on a standalone"));
    }
    Ok(())
}

/// Whether a command is an aggregate whose last stage writes (`$out`, `$merge`): mongod takes
/// a write concern for it, and refuses one for a pipeline that only reads.
pub(crate) fn pipeline_writes(name: &str, cmd: &Document) -> bool {
    name == "aggregate"
        && cmd
            .get_array("pipeline")
            .ok()
            .and_then(|p| p.last())
            .and_then(Bson::as_document)
            .and_then(|s| s.keys().next())
            .is_some_and(|k| k == "$out" || k == "$merge")
}

/// Checks a command's own fields against its row's (a hook's own fields are taken too).
pub(crate) fn check_command_fields(
    name: &str,
    spec: &Spec,
    cmd: &Document,
    hook_fields: &[&str],
) -> DocResult<()> {
    match spec.fields {
        Fields::Arguments => Ok(()),
        Fields::Only { known, unsupported } => {
            let generic: &[&[&str]] = &[GENERIC_FIELDS, hook_fields];
            check_fields(cmd.keys().skip(1), name, known, unsupported, generic)
        }
    }
}

/// Refuses a field the command does not know (40415, as mongod) and one flashdoc knows but
/// does not implement (NotImplemented, 238): nothing is accepted and ignored. `accepted` are
/// further lists of fields taken (the generic ones, a hook's).
pub(crate) fn check_fields<'a>(
    keys: impl Iterator<Item = &'a String>,
    what: &str,
    known: &[&str],
    not_implemented: &[&str],
    accepted: &[&[&str]],
) -> DocResult<()> {
    for k in keys {
        if known.contains(&k.as_str()) || accepted.iter().any(|l| l.contains(&k.as_str())) {
            continue;
        }
        if not_implemented.contains(&k.as_str()) {
            return Err(DocError::with_code(
                238,
                "NotImplemented",
                format!("BSON field '{what}.{k}' is not supported by flashdoc"),
            ));
        }
        return Err(DocError::with_code(
            40415,
            "Location40415",
            format!("BSON field '{what}.{k}' is an unknown field."),
        ));
    }
    Ok(())
}

/// `readConcern`: `local`, `available` and `majority` read the same on a standalone (every
/// acknowledged write is the majority's); a replica-set member also serves `linearizable`
/// (`replset::concern` waits as each level asks) and `afterClusterTime` with `local` or
/// `majority` (`replset::causal`, IllegalOperation on a standalone, as mongod); `snapshot` (and
/// `linearizable` on a standalone) and `afterOpTime` (internal to mongod) are refused.
fn read_concern(cmd: &Document, member: bool, in_txn: bool) -> DocResult<()> {
    let Some(rc) = cmd.get("readConcern") else {
        return Ok(());
    };
    let Bson::Document(rc) = rc else {
        return Err(DocError::type_mismatch("readConcern must be an object"));
    };
    for (k, v) in rc {
        match (k.as_str(), v) {
            ("level", Bson::String(l))
                if matches!(l.as_str(), "local" | "available" | "majority")
                    || (member && l == "linearizable")
                    || (in_txn && l == "snapshot") => {}
            ("level", Bson::String(l)) => {
                return Err(DocError::with_code(
                    238,
                    "NotImplemented",
                    format!("readConcern level '{l}' is not supported by flashdoc"),
                ))
            }
            ("afterClusterTime", _) if !member => {
                return Err(crate::replset::causal::standalone_refusal())
            }
            ("afterClusterTime", _) => {
                crate::replset::causal::after_cluster_time(cmd)?;
            }
            _ => {
                return Err(DocError::with_code(
                    238,
                    "NotImplemented",
                    format!("readConcern.{k} is not supported by flashdoc"),
                ))
            }
        }
    }
    Ok(())
}

/// A command's own options (the fields after its name, without the generic ones and the
/// hook's): what the document layer sees of `create` and `collMod`.
pub(crate) fn command_options(cmd: &Document, hook_fields: &[&str]) -> Document {
    cmd.iter()
        .skip(1)
        .filter(|(k, _)| {
            !GENERIC_FIELDS.contains(&k.as_str()) && !hook_fields.contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
