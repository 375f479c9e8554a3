//! The write commands: insert, update, delete and findAndModify, and their replies.

use super::args::{
    count_bson, doc_array, flag, get_doc, get_doc_list, get_i64, hint, interrupt_for, let_scope,
    truthy, write_opts,
};
use super::call::Call;
use super::fields::check_fields;
use bson::{doc, Bson, Document};
use docdb::{DeleteStatement, DocError, DocResult, FindAndModify, UpdateStatement, WriteOutcome};
use query::vars::Scope;

/// Which write a reply is for: its statements' count, whether it stopped at the first error,
/// and whether it updated (an update's reply has `nModified` and `upserted`).
pub(crate) struct Applied {
    pub statements: usize,
    pub ordered: bool,
    pub kind: WriteKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    Insert,
    Update,
    Delete,
}

pub(crate) fn insert(call: &Call) -> DocResult<Document> {
    let docs = doc_array(call.cmd, "documents")?;
    let opts = write_opts(call.cmd)?;
    let applied = Applied {
        statements: docs.len(),
        ordered: opts.ordered,
        kind: WriteKind::Insert,
    };
    let out = call.dbx().insert(call.db, call.coll(), docs, opts);
    Ok(write_reply(out, &applied))
}

pub(crate) fn update(call: &Call) -> DocResult<Document> {
    let vars = let_scope(call.cmd)?;
    let stmts = doc_array(call.cmd, "updates")?
        .into_iter()
        .map(|d| parse_update_statement(d, &vars))
        .collect::<DocResult<Vec<_>>>()?;
    stmts.iter().try_for_each(|s| known_stage_names(&s.u))?;
    let opts = write_opts(call.cmd)?;
    let applied = Applied {
        statements: stmts.len(),
        ordered: opts.ordered,
        kind: WriteKind::Update,
    };
    let out = call.dbx().update(call.db, call.coll(), &stmts, opts);
    Ok(write_reply(out, &applied))
}

pub(crate) fn delete(call: &Call) -> DocResult<Document> {
    let vars = let_scope(call.cmd)?;
    let stmts = doc_array(call.cmd, "deletes")?
        .into_iter()
        .map(|d| parse_delete_statement(d, &vars))
        .collect::<DocResult<Vec<_>>>()?;
    let opts = write_opts(call.cmd)?;
    let applied = Applied {
        statements: stmts.len(),
        ordered: opts.ordered,
        kind: WriteKind::Delete,
    };
    let out = call.dbx().delete(call.db, call.coll(), &stmts, opts);
    Ok(write_reply(out, &applied))
}

pub(crate) fn find_and_modify(call: &Call) -> DocResult<Document> {
    let cmd = call.cmd;
    let spec = FindAndModify {
        query: get_doc(cmd, "query")?.unwrap_or_default(),
        sort: get_doc(cmd, "sort")?,
        remove: truthy(cmd.get("remove")),
        update: cmd.get("update").cloned(),
        new: truthy(cmd.get("new")),
        fields: get_doc(cmd, "fields")?,
        upsert: truthy(cmd.get("upsert")),
        array_filters: get_doc_list(cmd, "arrayFilters")?,
        journal: write_opts(cmd)?.journal,
        collation: get_doc(cmd, "collation")?,
        interrupt: interrupt_for(cmd)?,
        bypass_validation: flag(cmd, "bypassDocumentValidation")?,
        hint: hint(cmd, "findAndModify")?,
        vars: let_scope(cmd)?,
    };
    if spec.remove == spec.update.is_some() {
        return Err(DocError::failed_to_parse(
            "Either an update or remove=true must be specified",
        ));
    }
    let out = call.dbx().find_and_modify(call.db, call.coll(), &spec)?;
    let mut leo = doc! {"n": count_bson(out.n), "updatedExisting": out.updated_existing};
    if let Some(id) = out.upserted {
        leo.insert("upserted", id);
    }
    Ok(doc! {"lastErrorObject": leo, "value": out.value.map(Bson::Document).unwrap_or(Bson::Null)})
}

/// The reply to a write command, from what the document layer did with its statements.
pub(crate) fn write_reply(out: WriteOutcome, applied: &Applied) -> Document {
    check_outcome(&out, applied);
    let mut d = doc! {"n": count_bson(out.n)};
    if applied.kind == WriteKind::Update {
        d.insert("nModified", count_bson(out.n_modified));
        if !out.upserted.is_empty() {
            let ups: Vec<Bson> = out
                .upserted
                .into_iter()
                .map(|(i, id)| Bson::Document(doc! {"index": i as i32, "_id": id}))
                .collect();
            d.insert("upserted", ups);
        }
    }
    if !out.write_errors.is_empty() {
        let errs: Vec<Bson> = out
            .write_errors
            .into_iter()
            .map(|we| {
                let mut e = doc! {"index": we.index as i32, "code": we.error.code, "errmsg": we.error.message.clone()};
                if let Some(extra) = we.error.extra {
                    for (k, v) in *extra {
                        e.insert(k, v);
                    }
                }
                Bson::Document(e)
            })
            .collect();
        d.insert("writeErrors", errs);
    }
    d
}

/// What a write reply tells the client must be what the statements could have done: a client
/// retries, skips or reports statements by these numbers.
fn check_outcome(out: &WriteOutcome, applied: &Applied) {
    // Statement i's error names i; the namespace's own error names statement 0 (even of an
    // empty batch). Each statement fails at most once, in order.
    let bound = applied.statements.max(1);
    let mut last = None;
    for we in &out.write_errors {
        assert!(
            we.index < bound && last.is_none_or(|l| we.index > l),
            "write error for statement {} after {last:?}, of {}",
            we.index,
            applied.statements
        );
        last = Some(we.index);
    }
    assert!(
        !applied.ordered || out.write_errors.len() <= 1,
        "an ordered write stops at its first error, not after {}",
        out.write_errors.len()
    );
    match applied.kind {
        // One document per statement, inserted once.
        WriteKind::Insert => assert!(
            out.n as usize + out.write_errors.len() <= bound,
            "{} inserted and {} failed of {} documents",
            out.n,
            out.write_errors.len(),
            applied.statements
        ),
        WriteKind::Update => assert!(
            out.n_modified <= out.n
                && out.upserted.len() <= applied.statements
                && out.upserted.len() as u64 <= out.n,
            "nModified {} and {} upserted of n {} ({} statements)",
            out.n_modified,
            out.upserted.len(),
            out.n,
            applied.statements
        ),
        WriteKind::Delete => {}
    }
}

/// mongod parses every pipeline of an update command with the command (to know the
/// namespaces it reads): a stage name the pipeline language does not know fails the whole
/// command (40324), while any other error of a statement's pipeline is that statement's.
fn known_stage_names(u: &Bson) -> DocResult<()> {
    let Bson::Array(stages) = u else {
        return Ok(());
    };
    for stage in stages.iter().filter_map(Bson::as_document) {
        if let Err(e) = query::aggregate::validate_pipeline(std::slice::from_ref(stage)) {
            if e.code == 40324 {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// One statement of an update; `vars` is the command's `let`.
fn parse_update_statement(d: Document, vars: &Scope) -> DocResult<UpdateStatement> {
    check_fields(
        d.keys(),
        "update.updates",
        &[
            "q",
            "u",
            "upsert",
            "multi",
            "arrayFilters",
            "collation",
            "hint",
            "c",
        ],
        &["sort", "upsertSupplied"],
        &[],
    )?;
    let u = d.get("u").cloned().ok_or_else(|| {
        DocError::failed_to_parse("BSON field 'update.updates.u' is missing but a required field")
    })?;
    Ok(UpdateStatement {
        q: get_doc(&d, "q")?.unwrap_or_default(),
        u,
        upsert: truthy(d.get("upsert")),
        multi: truthy(d.get("multi")),
        array_filters: get_doc_list(&d, "arrayFilters")?,
        collation: get_doc(&d, "collation")?,
        hint: hint(&d, "update.updates")?,
        vars: vars.clone(),
        constants: get_doc(&d, "c")?,
    })
}

/// One statement of a delete; `vars` is the command's `let`.
fn parse_delete_statement(d: Document, vars: &Scope) -> DocResult<DeleteStatement> {
    check_fields(
        d.keys(),
        "delete.deletes",
        &["q", "limit", "collation", "hint"],
        &[],
        &[],
    )?;
    Ok(DeleteStatement {
        q: get_doc(&d, "q")?.unwrap_or_default(),
        limit: get_i64(&d, "limit")?.unwrap_or(0),
        collation: get_doc(&d, "collation")?,
        hint: hint(&d, "delete.deletes")?,
        vars: vars.clone(),
    })
}
