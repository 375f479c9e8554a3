//! Reading a command's arguments: names, documents, numbers and flags, with mongod's errors.

use bson::{Bson, Document};
use docdb::{DocError, DocResult, Interrupt, WriteOpts};
use std::time::Duration;

pub(crate) fn truthy(v: Option<&Bson>) -> bool {
    match v {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        _ => false,
    }
}

pub(crate) fn coll_name(cmd: &Document, name: &str) -> DocResult<String> {
    match cmd.get(name) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Bson::String(_)) => Err(DocError::invalid_namespace(
            "Invalid namespace specified: empty collection name",
        )),
        _ => Err(DocError::type_mismatch(format!(
            "collection name has invalid type {}",
            cmd.get(name)
                .map(|b| format!("{:?}", b.element_type()))
                .unwrap_or_else(|| "missing".into())
        ))),
    }
}

pub(crate) fn split_ns(ns: &str) -> DocResult<(&str, &str)> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .ok_or_else(|| DocError::invalid_namespace(format!("Invalid namespace specified '{ns}'")))
}

pub(crate) fn doc_array(cmd: &Document, field: &str) -> DocResult<Vec<Document>> {
    match cmd.get(field) {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(DocError::type_mismatch(format!(
                    "{field} must be an array of objects"
                ))),
            })
            .collect(),
        Some(_) => Err(DocError::type_mismatch(format!("{field} must be an array"))),
        None => Err(DocError::failed_to_parse(format!(
            "BSON field '{field}' is missing but a required field"
        ))),
    }
}

pub(crate) fn get_doc(cmd: &Document, field: &str) -> DocResult<Option<Document>> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d.clone())),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field '{field}' must be an object"
        ))),
    }
}

pub(crate) fn get_doc_list(cmd: &Document, field: &str) -> DocResult<Option<Vec<Document>>> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(_) => doc_array(cmd, field).map(Some),
    }
}

pub(crate) fn get_i64(d: &Document, field: &str) -> DocResult<Option<i64>> {
    match d.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Int32(i)) => Ok(Some(*i as i64)),
        Some(Bson::Int64(i)) => Ok(Some(*i)),
        Some(Bson::Double(f)) if f.fract() == 0.0 => Ok(Some(*f as i64)),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field '{field}' must be a number"
        ))),
    }
}

pub(crate) fn batch_size(d: &Document, field: &str) -> DocResult<Option<usize>> {
    match get_i64(d, field)? {
        Some(n) if n < 0 => Err(DocError::bad_value(format!("{field} must be non-negative"))),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

/// A command's `let` variables, evaluated once (mongod's rules for their names and values).
pub(crate) fn let_scope(cmd: &Document) -> DocResult<query::vars::Scope> {
    match get_doc(cmd, "let")? {
        Some(l) => query::vars::Scope::from_let(&l),
        None => Ok(query::vars::Scope::default()),
    }
}

/// A write statement's or findAndModify's `hint`: an index name or a key pattern (which must
/// name an index: the write checks it), as mongod takes.
pub(crate) fn hint(d: &Document, what: &str) -> DocResult<Option<Bson>> {
    match d.get("hint") {
        None => Ok(None),
        Some(h @ (Bson::String(_) | Bson::Document(_))) => Ok(Some(h.clone())),
        Some(other) => Err(DocError::type_mismatch(format!(
            "BSON field '{what}.hint' is the wrong type '{}', expected types '[string, object]'",
            query::compare::type_name(other)
        ))),
    }
}

/// A boolean option (mongod also takes numbers); absent is false.
pub(crate) fn flag(cmd: &Document, field: &str) -> DocResult<bool> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(false),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => Ok(truthy(Some(v))),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected a boolean"
        ))),
    }
}

/// `maxTimeMS`: a non-negative integer; 0 or absent is no limit.
pub(crate) fn max_time(cmd: &Document) -> DocResult<Option<Duration>> {
    match get_i64(cmd, "maxTimeMS")? {
        None | Some(0) => Ok(None),
        Some(n) if n < 0 || n > i32::MAX as i64 => Err(DocError::bad_value(format!(
            "{n} value for maxTimeMS is out of range [0, {}]",
            i32::MAX
        ))),
        Some(n) => Ok(Some(Duration::from_millis(n as u64))),
    }
}

/// The command's interruption (killable; with its `maxTimeMS` as budget): the one its
/// listing in `currentOp` holds (`ops::current`), so `killOp` reaches it.
pub(crate) fn interrupt_for(cmd: &Document) -> DocResult<Interrupt> {
    let max_time = max_time(cmd)?;
    Ok(crate::ops::current().unwrap_or_else(|| Interrupt::new(max_time)))
}

pub(crate) fn write_opts(cmd: &Document) -> DocResult<WriteOpts> {
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let journal = cmd
        .get_document("writeConcern")
        .map(|wc| {
            truthy(wc.get("j")) || matches!(wc.get("w"), Some(Bson::String(s)) if s == "majority")
        })
        .unwrap_or(false);
    Ok(WriteOpts {
        ordered,
        journal,
        interrupt: interrupt_for(cmd)?,
        bypass_validation: flag(cmd, "bypassDocumentValidation")?,
    })
}

/// collStats' and dbStats' `scale`: a number of at least 1 (a fraction is dropped); 1 if absent.
pub(crate) fn stats_scale(cmd: &Document) -> DocResult<i64> {
    let scale = match cmd.get("scale") {
        None | Some(Bson::Null) => return Ok(1),
        Some(Bson::Int32(n)) => *n as i64,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) if f.is_finite() => f.trunc() as i64,
        Some(_) => return Err(DocError::type_mismatch("scale has to be a number")),
    };
    if scale < 1 {
        return Err(DocError::with_code(
            51024,
            "Location51024",
            "scale has to be >= 1",
        ));
    }
    Ok(scale)
}

/// compact's options. `force` is checked and has nothing to change: it makes a replica set's
/// primary compact, and flashdoc is a standalone or a shard, where compact always runs.
pub(crate) fn compact_opts(cmd: &Document) -> DocResult<docdb::CompactOpts> {
    flag(cmd, "force")?;
    let mb = match cmd.get("freeSpaceTargetMB") {
        None | Some(Bson::Null) => docdb::db::DEFAULT_FREE_SPACE_TARGET_MB as i64,
        Some(Bson::Int32(n)) => *n as i64,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) if f.fract() == 0.0 && f.is_finite() => *f as i64,
        Some(_) => {
            return Err(DocError::type_mismatch(
                "BSON field 'compact.freeSpaceTargetMB' is the wrong type, expected an integer",
            ))
        }
    };
    if !(1..=(1 << 30)).contains(&mb) {
        return Err(DocError::bad_value(format!(
            "freeSpaceTargetMB must be between 1 and 1073741824 (MB), got {mb}"
        )));
    }
    Ok(docdb::CompactOpts {
        dry_run: flag(cmd, "dryRun")?,
        free_space_target: (mb as u64) << 20,
    })
}

/// A count as mongod appends it (`appendNumber`): Int32 when it fits, else Int64. Drivers
/// rely on it: mongosh shows an Int64 `n` as a Long object or a string.
pub(crate) fn count_bson(n: u64) -> Bson {
    match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(n as i64),
    }
}
