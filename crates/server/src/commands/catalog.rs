//! The catalog commands: collections, views, indexes and databases, their statistics,
//! validation, compaction and profiling.

use super::args::{compact_opts, doc_array, flag, get_doc, interrupt_for, split_ns, stats_scale};
use super::batch::{cursor_reply, listing_first_batch, CursorOpts};
use super::call::Call;
use crate::auth;
use crate::roles::DATABASE_ACTIONS;
use bson::{doc, Bson, Document};
use docdb::db::{scaled, COLL_STATS_SIZES, DB_STATS_SIZES};
use docdb::{DocCursor, DocError, DocResult};

pub(crate) fn create(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let options = call.options();
    // Bounded work (one catalog entry): its budget is checked once, before it starts.
    interrupt_for(cmd)?.check()?;
    dbx.create_collection(db, coll, &options)?;
    Ok(doc! {})
}

pub(crate) fn drop_collection(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let dbx = call.dbx();
    let coll = call.coll();
    let before = dbx.list_indexes(db, coll).map(|v| v.len() as i32);
    match dbx.drop_collection(db, coll) {
        Ok(()) => Ok(doc! {"ns": format!("{db}.{coll}"), "nIndexesWas": before.unwrap_or(0)}),
        // Recent servers answer ok for a missing collection.
        Err(e) if e.code == 26 => Ok(doc! {}),
        Err(e) => Err(e),
    }
}

pub(crate) fn drop_database(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let dbx = call.dbx();
    dbx.drop_database(db)?;
    Ok(doc! {"dropped": db})
}

pub(crate) fn rename_collection(call: &Call) -> DocResult<Document> {
    let cmd = call.cmd;
    let dbx = call.dbx();
    let from = cmd
        .get_str("renameCollection")
        .map_err(|_| DocError::type_mismatch("renameCollection must be a namespace string"))?;
    let to = cmd
        .get_str("to")
        .map_err(|_| DocError::type_mismatch("'to' must be a namespace string"))?;
    let (fdb, fcoll) = split_ns(from)?;
    let (tdb, tcoll) = split_ns(to)?;
    dbx.rename_collection(fdb, fcoll, tdb, tcoll, flag(cmd, "dropTarget")?)?;
    Ok(doc! {})
}

pub(crate) fn list_collections(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let filter = get_doc(cmd, "filter")?.unwrap_or_default();
    let name_only = flag(cmd, "nameOnly")?;
    // authorizedCollections was read by the guard (it filters nothing: see there).
    flag(cmd, "authorizedCollections")?;
    let matcher = query::matcher::Matcher::new(&filter)?;
    let first = listing_first_batch(cmd)?;
    let interrupt = interrupt_for(cmd)?;
    let mut out = Vec::new();
    for c in dbx.list_collections(db)? {
        interrupt.check()?;
        let kind = c.kind.name();
        let mut d = match (name_only, c.kind) {
            (true, _) => doc! {"name": c.name.clone(), "type": kind},
            (false, docdb::CollectionKind::Collection) => {
                // `system.views` is a listing with no storage of its own: no uuid.
                let mut info = doc! {"readOnly": false};
                if let Some(uuid) = c.uuid {
                    info.insert("uuid", uuid);
                }
                let mut d = doc! {
                    "name": c.name.clone(), "type": kind, "options": c.options.clone(),
                    "info": info,
                };
                // A clustered collection's _id index is its clustered index: mongod lists
                // no idIndex for it.
                if !c.options.contains_key("clusteredIndex") {
                    d.insert("idIndex", doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"});
                }
                d
            }
            // A time-series collection: writable, its storage the bucket collection's.
            (false, docdb::CollectionKind::Timeseries) => doc! {
                "name": c.name.clone(), "type": kind, "options": c.options.clone(),
                "info": {"readOnly": false},
            },
            // A view: no storage, so no uuid and no _id index.
            (false, docdb::CollectionKind::View) => doc! {
                "name": c.name.clone(), "type": kind, "options": c.options.clone(),
                "info": {"readOnly": true},
            },
        };
        if matcher.matches(&d) {
            out.push(std::mem::take(&mut d));
        }
    }
    let cursor = DocCursor::from_docs(out);
    cursor_reply(
        state,
        &format!("{db}.$cmd.listCollections"),
        cursor,
        first,
        CursorOpts::default(),
        "firstBatch",
    )
}

pub(crate) fn list_databases(call: &Call) -> DocResult<Document> {
    let cmd = call.cmd;
    let dbx = call.dbx();
    let name_only = flag(cmd, "nameOnly")?;
    let only_authorized = lists_authorized_databases(call)?;
    let filter = get_doc(cmd, "filter")?.unwrap_or_default();
    let matcher = query::matcher::Matcher::new(&filter)?;
    let interrupt = interrupt_for(cmd)?;
    let mut total = 0i64;
    let mut list = Vec::new();
    for d in dbx.list_databases()? {
        interrupt.check()?;
        if only_authorized
            && !auth::has_privilege_on_db(call.conn, &d.name, DATABASE_ACTIONS.into_iter())
        {
            continue;
        }
        let entry = if name_only {
            doc! {"name": d.name.clone()}
        } else {
            doc! {"name": d.name.clone(), "sizeOnDisk": d.size_on_disk as i64, "empty": d.empty}
        };
        if matcher.matches(&entry) {
            total += d.size_on_disk as i64;
            list.push(Bson::Document(entry));
        }
    }
    if name_only {
        Ok(doc! {"databases": list})
    } else {
        Ok(doc! {"databases": list, "totalSize": total, "totalSizeMb": total >> 20})
    }
}

/// Whether listDatabases lists only the databases the connection's users hold a privilege on,
/// as mongod: with authorization on, when `authorizedDatabases` is true, or unset and the
/// users lack the listDatabases action (`authorizedDatabases: false` without it was refused
/// before the handler, `access::accesses`).
fn lists_authorized_databases(call: &Call) -> DocResult<bool> {
    let asked = match call.cmd.get("authorizedDatabases") {
        None | Some(Bson::Null) => None,
        Some(_) => Some(flag(call.cmd, "authorizedDatabases")?),
    };
    Ok(auth::lists_only_authorized_databases(
        call.state, call.conn, asked,
    ))
}

pub(crate) fn create_indexes(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    if cmd.contains_key("commitQuorum") && call.state.replset().is_none() {
        // A standalone has no replica set members to wait for (mongod's answer); a member
        // waits for them as `replset::concern` says.
        return Err(DocError::bad_value(
            "Standalones can't specify commitQuorum",
        ));
    }
    let specs = doc_array(cmd, "indexes")?;
    let out = dbx.create_indexes_until(db, coll, &specs, &interrupt_for(cmd)?)?;
    let mut d = doc! {
        "numIndexesBefore": out.num_indexes_before,
        "numIndexesAfter": out.num_indexes_after,
        "createdCollectionAutomatically": out.created_collection_automatically,
    };
    if let Some(n) = out.note {
        d.insert("note", n);
    }
    Ok(d)
}

pub(crate) fn list_indexes(call: &Call) -> DocResult<Document> {
    let state = call.state;
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let first = listing_first_batch(cmd)?;
    let list = dbx.list_indexes(db, coll)?;
    let cursor = DocCursor::from_docs(list);
    cursor_reply(
        state,
        &format!("{db}.{coll}"),
        cursor,
        first,
        CursorOpts::default(),
        "firstBatch",
    )
}

pub(crate) fn drop_indexes(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let which = cmd
        .get("index")
        .cloned()
        .ok_or_else(|| DocError::failed_to_parse("dropIndexes needs 'index'"))?;
    let was = dbx.drop_indexes(db, coll, &which)?;
    Ok(doc! {"nIndexesWas": was})
}

pub(crate) fn coll_mod(call: &Call) -> DocResult<Document> {
    call.dbx().coll_mod(call.db, call.coll(), &call.options())
}

pub(crate) fn compact(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    dbx.compact(db, coll, compact_opts(cmd)?)
}

pub(crate) fn coll_stats(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    let scale = stats_scale(cmd)?;
    let stats = dbx.coll_stats(db, coll)?;
    Ok(scaled(stats, scale, COLL_STATS_SIZES))
}

pub(crate) fn db_stats(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let scale = stats_scale(cmd)?;
    Ok(scaled(dbx.db_stats(db)?, scale, DB_STATS_SIZES))
}

pub(crate) fn validate(call: &Call) -> DocResult<Document> {
    let db = call.db;
    let cmd = call.cmd;
    let dbx = call.dbx();
    let coll = call.coll();
    if flag(cmd, "full")? && flag(cmd, "background")? {
        return Err(DocError::invalid_options(
            "Running the validate command with both { background: true } and { full: true } is not supported.",
        ));
    }
    for opt in [
        "full",
        "repair",
        "metadata",
        "checkBSONConformance",
        "background",
    ] {
        if flag(cmd, opt)? && opt != "full" {
            return Err(DocError::with_code(
                238,
                "NotImplemented",
                format!("validate option '{opt}' is not supported by flashdoc"),
            ));
        }
    }
    // Every validate reads every block, checksum and index entry of the tables; the legacy
    // `scandata` (drivers still send it, false by default) says whether the documents are
    // also decoded and checked against the indexes. Absent, they are, as mongod's validate.
    let scan_data = !cmd.contains_key("scandata") || flag(cmd, "scandata")?;
    dbx.validate(db, coll, scan_data, &interrupt_for(cmd)?)
}

pub(crate) fn profile(call: &Call) -> DocResult<Document> {
    call.state.profiler.command(call.db, call.cmd)
}
