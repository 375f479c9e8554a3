//! The router's catalog and sharding commands, and the `config` database it serves from the
//! metadata store.

use super::autosplit::commit_split;
use super::migrations::move_chunk_to;
use super::{forwardable, namespace, Router, MAX_STALE_RETRIES};
use crate::meta::{Chunk, ChunkChange, CollSnapshot};
use crate::shardkey::ShardKey;
use crate::split::SplitPolicy;
use crate::transport::{call_ok, is_ok, reply_error};
use crate::version::ChunkVersion;
use bson::{doc, oid::ObjectId, Bson, Document};
use docdb::{DocCursor, DocError, DocResult, Interrupt};
use query::aggregate::{self, DocIter};
use query::projection::Projection;
use query::update::Update;
use server::hook::CommandCall;
use std::sync::Arc;

fn ns_arg(cmd: &Document, field: &str) -> DocResult<(String, String, String)> {
    let ns = cmd
        .get_str(field)
        .map_err(|_| DocError::type_mismatch(format!("'{field}' must be a namespace string")))?;
    let (db, coll) = ns
        .split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .ok_or_else(|| {
            DocError::invalid_namespace(format!("Invalid namespace specified '{ns}'"))
        })?;
    Ok((ns.to_string(), db.to_string(), coll.to_string()))
}

fn sharded(r: &Router, ns: &str) -> DocResult<Arc<CollSnapshot>> {
    r.table(ns)?.ok_or_else(|| {
        DocError::with_code(61, "NamespaceNotSharded", format!("{ns} is not sharded"))
    })
}

/// Every shard that may hold the collection: those with chunks and the database's primary.
fn holders(r: &Router, db: &str, table: Option<&CollSnapshot>) -> DocResult<Vec<String>> {
    let mut s = table.map(|t| t.shards()).unwrap_or_default();
    if let Some(d) = r.database(db, false)? {
        if !s.contains(&d.primary) {
            s.push(d.primary);
        }
    }
    s.sort();
    Ok(s)
}

fn send_all(r: &Router, shards: &[String], cmd: &Document) -> DocResult<Vec<(String, Document)>> {
    let mut out = Vec::new();
    for s in shards {
        let rep = r.shard_conn(s)?.call(cmd)?;
        out.push((s.clone(), rep));
    }
    Ok(out)
}

pub fn collection_command(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    if call.name == "renameCollection" {
        let (from, db, _) = ns_arg(call.cmd, "renameCollection")?;
        if r.table(&from)?.is_some() {
            return Err(DocError::illegal_operation(format!(
                "cannot rename the sharded collection {from}"
            )));
        }
        let d = r
            .database(&db, false)?
            .ok_or_else(|| DocError::namespace_not_found(format!("{from} does not exist")))?;
        let mut rep = r
            .shard_conn(&d.primary)?
            .call(&forwardable(call.cmd, &[]))?;
        rep.remove("ok");
        return finish(rep);
    }
    let (db, coll) = namespace(call)?;
    if db == "config" || db == "admin" {
        return Err(DocError::illegal_operation(format!(
            "{db}.{coll} is the router's own; it holds no user data"
        )));
    }
    let ns = format!("{db}.{coll}");
    // A view or time-series collection would live on the primary shard alone while the
    // router's reads scatter to the shards as if it were a collection: refused before the
    // database is created.
    if call.name == "create" {
        if let Some(k) = ["viewOn", "pipeline", "timeseries"]
            .iter()
            .find(|k| call.cmd.contains_key(**k))
        {
            return Err(DocError::invalid_options(format!(
                "'{k}': views and time-series collections are not supported through a flashdoc router"
            )));
        }
    }
    let creates = matches!(call.name, "create" | "createIndexes");
    let Some(dbe) = r.database(&db, creates)? else {
        return Err(DocError::namespace_not_found(format!(
            "database {db} not found"
        )));
    };
    let table = r.table(&ns)?;
    let cmd = forwardable(call.cmd, &[]);
    match call.name {
        "create" => finish(r.shard_conn(&dbe.primary)?.call(&cmd)?),
        "createIndexes" | "dropIndexes" | "deleteIndexes" | "validate" => {
            let replies = send_all(r, &holders(r, &db, table.as_deref())?, &cmd)?;
            let mut raw = Document::new();
            let mut first_err = None;
            for (s, rep) in &replies {
                if !is_ok(rep) && first_err.is_none() {
                    first_err = Some(reply_error(rep));
                }
                raw.insert(s.clone(), rep.clone());
            }
            if let Some(e) = first_err {
                return Err(e);
            }
            let mut out = replies
                .iter()
                .find(|(s, _)| *s == dbe.primary)
                .map(|(_, rep)| rep.clone())
                .unwrap_or_default();
            out.insert("raw", raw);
            finish(out)
        }
        "listIndexes" => {
            let shard = table
                .as_ref()
                .and_then(|t| t.chunks.first().map(|c| c.shard.clone()))
                .unwrap_or(dbe.primary);
            let rep = call_ok(&*r.shard_conn(&shard)?, &cmd)?;
            let docs: Vec<Document> = rep
                .get_document("cursor")
                .and_then(|c| c.get_array("firstBatch"))
                .map(|b| b.iter().filter_map(|d| d.as_document().cloned()).collect())
                .unwrap_or_default();
            call.cursor_reply(&ns, DocCursor::from_docs(docs), usize::MAX, true)
        }
        _ => coll_stats(r, &ns, &db, table.as_deref(), &cmd),
    }
}

fn finish(mut rep: Document) -> DocResult<Document> {
    if rep.contains_key("ok") && !is_ok(&rep) {
        return Err(reply_error(&rep));
    }
    rep.remove("ok");
    Ok(rep)
}

fn coll_stats(
    r: &Router,
    ns: &str,
    db: &str,
    table: Option<&CollSnapshot>,
    cmd: &Document,
) -> DocResult<Document> {
    let replies = send_all(r, &holders(r, db, table)?, cmd)?;
    let mut shards = Document::new();
    let (mut count, mut size, mut storage, mut index) = (0.0, 0.0, 0.0, 0.0);
    let mut nindexes = 0;
    for (s, rep) in &replies {
        if !is_ok(rep) {
            continue;
        }
        count += crate::num_field(rep.get("count"));
        size += crate::num_field(rep.get("size"));
        storage += crate::num_field(rep.get("storageSize"));
        index += crate::num_field(rep.get("totalIndexSize"));
        nindexes = nindexes.max(rep.get_i32("nindexes").unwrap_or(0));
        shards.insert(s.clone(), rep.clone());
    }
    if shards.is_empty() {
        return Err(DocError::namespace_not_found(format!(
            "Collection [{ns}] not found."
        )));
    }
    Ok(doc! {
        "sharded": table.is_some(), "ns": ns, "count": count as i64, "size": size as i64,
        "storageSize": storage as i64, "totalIndexSize": index as i64, "nindexes": nindexes,
        "avgObjSize": if count > 0.0 { (size / count) as i64 } else { 0 },
        "nchunks": table.map(|t| t.chunks.len() as i32).unwrap_or(1), "shards": shards,
    })
}

pub fn drop(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    let ns = format!("{db}.{coll}");
    let table = r.reload(&ns)?;
    let shards = holders(r, &db, table.as_deref())?;
    if let Some(t) = &table {
        if !r.catalog.drop_collection(t)? {
            return Err(DocError::with_code(
                117,
                "ConflictingOperationInProgress",
                format!("{ns} changed while it was being dropped"),
            ));
        }
    }
    r.forget(&ns);
    for (s, rep) in send_all(r, &shards, &doc! {"drop": coll.clone(), "$db": db.clone()})? {
        if !is_ok(&rep) && rep.get_i32("code") != Ok(26) {
            return Err(DocError::with_code(
                96,
                "OperationFailed",
                format!("drop on shard {s}: {}", reply_error(&rep)),
            ));
        }
        let _ = r
            .shard_conn(&s)?
            .call(&doc! {"_flushRoutingTableCacheUpdates": ns.clone(), "$db": "admin"});
    }
    Ok(doc! {"ns": ns})
}

pub fn drop_database(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let db = call.db;
    if matches!(db, "admin" | "config") {
        return Err(DocError::illegal_operation(format!(
            "cannot drop the '{db}' database through a router"
        )));
    }
    for c in r.catalog.collections()? {
        let ns = c.get_str("_id").unwrap_or_default().to_string();
        if ns.split_once('.').map(|(d, _)| d) == Some(db) {
            if let Some(t) = r.reload(&ns)? {
                r.catalog.drop_collection(&t)?;
            }
            r.forget(&ns);
        }
    }
    for s in r.shard_names()? {
        let rep = r
            .shard_conn(&s)?
            .call(&doc! {"dropDatabase": 1, "$db": db})?;
        if !is_ok(&rep) {
            return Err(reply_error(&rep));
        }
    }
    r.catalog.delete_database(db)?;
    r.forget_database(db);
    Ok(doc! {"dropped": db})
}

/// Which databases a `listDatabases` through the router may name: every one, or with
/// authorization on those the client's users hold a privilege on (the server's rule,
/// `auth::lists_only_authorized_databases`).
fn listable_databases<'c>(call: &'c CommandCall<'_>) -> DocResult<impl Fn(&str) -> bool + 'c> {
    let asked = match call.cmd.get("authorizedDatabases") {
        None | Some(Bson::Null) => None,
        Some(Bson::Boolean(b)) => Some(*b),
        Some(v) => Some(
            query::compare::Num::of(v)
                .ok_or_else(|| DocError::type_mismatch("authorizedDatabases must be a boolean"))?
                .as_f64()
                != 0.0,
        ),
    };
    let only_authorized =
        server::auth::lists_only_authorized_databases(call.state, call.conn, asked);
    Ok(move |db: &str| {
        !only_authorized
            || server::auth::has_privilege_on_db(
                call.conn,
                db,
                server::roles::DATABASE_ACTIONS.into_iter(),
            )
    })
}

pub fn list_databases(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let listable = listable_databases(call)?;
    let mut sizes: std::collections::BTreeMap<String, f64> = Default::default();
    for s in r.shard_names()? {
        let rep = call_ok(
            &*r.shard_conn(&s)?,
            &doc! {"listDatabases": 1, "$db": "admin"},
        )?;
        for d in rep.get_array("databases").cloned().unwrap_or_default() {
            let Some(d) = d.as_document() else { continue };
            let name = d.get_str("name").unwrap_or_default().to_string();
            if matches!(name.as_str(), "admin" | "config" | "local") {
                continue;
            }
            *sizes.entry(name).or_default() += crate::num_field(d.get("sizeOnDisk"));
        }
    }
    for d in r.catalog.databases()? {
        if let Ok(n) = d.get_str("_id") {
            sizes.entry(n.to_string()).or_default();
        }
    }
    sizes.retain(|name, _| listable(name));
    let total: f64 = sizes.values().sum();
    let mut dbs: Vec<Bson> = sizes
        .into_iter()
        .map(|(n, s)| Bson::Document(doc! {"name": n, "sizeOnDisk": s as i64, "empty": s == 0.0}))
        .collect();
    if listable("config") {
        dbs.push(Bson::Document(
            doc! {"name": "config", "sizeOnDisk": 0i64, "empty": false},
        ));
    }
    Ok(
        doc! {"databases": dbs, "totalSize": total as i64, "totalSizeMb": (total / 1048576.0) as i64},
    )
}

pub fn list_collections(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let db = call.db;
    let ns = format!("{db}.$cmd.listCollections");
    let docs: Vec<Document> = if db == "config" {
        CONFIG_COLLECTIONS
            .iter()
            .map(|c| doc! {"name": *c, "type": "collection", "options": {}, "info": {"readOnly": true}})
            .collect()
    } else {
        match r.database(db, false)? {
            None => Vec::new(),
            Some(d) => {
                let rep = call_ok(&*r.shard_conn(&d.primary)?, &forwardable(call.cmd, &[]))?;
                rep.get_document("cursor")
                    .and_then(|c| c.get_array("firstBatch"))
                    .map(|b| b.iter().filter_map(|x| x.as_document().cloned()).collect())
                    .unwrap_or_default()
            }
        }
    };
    call.cursor_reply(&ns, DocCursor::from_docs(docs), usize::MAX, true)
}

pub fn db_stats(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let mut out = doc! {"db": call.db};
    let mut raw = Document::new();
    let mut sums: std::collections::BTreeMap<&str, f64> = Default::default();
    for s in r.shard_names()? {
        let rep = r
            .shard_conn(&s)?
            .call(&doc! {"dbStats": 1, "$db": call.db})?;
        if is_ok(&rep) {
            for k in [
                "collections",
                "objects",
                "dataSize",
                "storageSize",
                "indexes",
                "indexSize",
            ] {
                *sums.entry(k).or_default() += crate::num_field(rep.get(k));
            }
        }
        raw.insert(s, rep);
    }
    for (k, v) in sums {
        out.insert(k, v as i64);
    }
    out.insert("raw", raw);
    Ok(out)
}

pub fn broadcast_admin(r: &Router, cmd: &Document) -> DocResult<Document> {
    let mut raw = Document::new();
    for s in r.shard_names()? {
        let rep = call_ok(&*r.shard_conn(&s)?, &forwardable(cmd, &[]))?;
        raw.insert(s, rep);
    }
    Ok(doc! {"raw": raw})
}

// ---------------------------------------------------------------------- shards

pub fn add_shard(r: &Router, cmd: &Document) -> DocResult<Document> {
    let given = cmd
        .get_str("addShard")
        .or_else(|_| cmd.get_str("addshard"))
        .map_err(|_| DocError::type_mismatch("addShard needs a host string"))?;
    // A replica set is named as mongod does, `setName/host1,host2,…`, and kept so: the router
    // reaches whichever member is primary (`replset_conn`).
    let set = crate::replset_conn::parse_set_host(given);
    let host = match &set {
        Some((name, seeds)) => format!("{name}/{}", seeds.join(",")),
        None if given.contains('/') => {
            return Err(DocError::bad_value(format!(
                "addShard {given}: expected host:port or setName/host:port,…"
            )))
        }
        None => given.to_string(),
    };
    for s in r.catalog.shards()? {
        let existing = s.get_str("host").unwrap_or_default();
        let same_set = set.as_ref().is_some_and(|(name, _)| {
            crate::replset_conn::parse_set_host(existing).is_some_and(|(n, _)| n == *name)
        });
        if existing == host || same_set {
            return Ok(doc! {"shardAdded": s.get_str("_id").unwrap_or_default()});
        }
    }
    let existing = r.shard_names()?;
    let name = match (cmd.get_str("name"), &set) {
        (Ok(n), _) => n.to_string(),
        // As mongos: a replica set's shard takes the set's name.
        (Err(_), Some((set_name, _))) => set_name.to_string(),
        (Err(_), None) => (0..)
            .map(|i| format!("shard{i:04}"))
            .find(|n| !existing.contains(n))
            .expect("unbounded"),
    };
    let conn = r.connector.connect(&host);
    let hello = call_ok(&*conn, &doc! {"hello": 1, "$db": "admin"}).map_err(|e| {
        DocError::with_code(96, "OperationFailed", format!("cannot reach {host}: {e}"))
    })?;
    check_shard_hello(&host, set.is_some(), &hello)?;
    call_ok(
        &*conn,
        &doc! {"_addShard": 1, "shardName": name.clone(), "configDB": r.config_db.clone(), "$db": "admin"},
    )?;
    if !r
        .catalog
        .add_shard(&doc! {"_id": name.clone(), "host": host, "state": 1})?
    {
        return Err(DocError::with_code(
            96,
            "OperationFailed",
            format!("a shard named {name} already exists"),
        ));
    }
    Ok(doc! {"shardAdded": name})
}

/// A shard's `hello`: not a router's, and a replica set's member only when added by its set's
/// name (a single member added alone would be written to while secondary, or lose its
/// writes to a rollback).
fn check_shard_hello(host: &str, as_set: bool, hello: &Document) -> DocResult<()> {
    let failed = |msg: String| Err(DocError::with_code(96, "OperationFailed", msg));
    if hello.get_str("msg") == Ok("isdbgrid") {
        return failed(format!("{host} is a router, not a shard"));
    }
    match (as_set, hello.get_str("setName")) {
        (false, Ok(set)) => failed(format!(
            "{host} is a member of replica set {set}: add it as {set}/{host}"
        )),
        (true, Err(_)) => failed(format!("{host} is not a replica set's member")),
        _ => Ok(()),
    }
}

pub fn list_shards(r: &Router) -> DocResult<Document> {
    Ok(doc! {"shards": r.catalog.shards()?})
}

/// `removeShard`: starts draining, reports progress, and removes the shard once no chunk and
/// no database primary is left on it (a database's primary must be moved by hand, as with
/// 3.6's `movePrimary`, which flashdoc does not implement: the reply lists them).
pub fn remove_shard(r: &Router, cmd: &Document) -> DocResult<Document> {
    let name = cmd
        .get_str("removeShard")
        .or_else(|_| cmd.get_str("removeshard"))
        .map_err(|_| DocError::type_mismatch("removeShard needs a shard name"))?;
    let (mut d, rev) = r.catalog.shard(name)?.ok_or_else(|| {
        DocError::with_code(70, "ShardNotFound", format!("shard {name} not found"))
    })?;
    if !d.get_bool("draining").unwrap_or(false) {
        if r.shard_names()?.len() <= 1 {
            return Err(DocError::illegal_operation("cannot remove the last shard"));
        }
        d.insert("draining", true);
        r.catalog.put_shard(&d, rev)?;
        return Ok(
            doc! {"msg": "draining started successfully", "state": "started", "shard": name},
        );
    }
    let chunks = r
        .catalog
        .all_chunks()?
        .iter()
        .filter(|c| c.get_str("shard").ok() == Some(name))
        .count();
    let dbs: Vec<Bson> = r
        .catalog
        .databases()?
        .into_iter()
        .filter(|d| d.get_str("primary").ok() == Some(name))
        .filter_map(|d| d.get_str("_id").ok().map(|s| Bson::String(s.to_string())))
        .collect();
    if chunks == 0 && dbs.is_empty() {
        r.catalog.remove_shard(name, rev)?;
        r.flush();
        return Ok(
            doc! {"msg": "removeshard completed successfully", "state": "completed", "shard": name},
        );
    }
    Ok(
        doc! {"msg": "draining ongoing", "state": "ongoing", "remaining": {"chunks": chunks as i64, "dbs": dbs.len() as i64}, "dbsToMove": dbs},
    )
}

// ---------------------------------------------------------------------- sharding

pub fn enable_sharding(r: &Router, cmd: &Document) -> DocResult<Document> {
    let db = cmd
        .get_str("enableSharding")
        .or_else(|_| cmd.get_str("enablesharding"))
        .map_err(|_| DocError::type_mismatch("enableSharding needs a database name"))?;
    for _ in 0..MAX_STALE_RETRIES {
        r.database(db, true)?;
        let (mut e, rev) = r.catalog.database(db)?.expect("just created");
        if e.partitioned {
            return Ok(doc! {});
        }
        e.partitioned = true;
        if r.catalog.put_database(&e, rev)? {
            r.forget_database(db);
            return Ok(doc! {});
        }
    }
    Err(DocError::with_code(
        117,
        "ConflictingOperationInProgress",
        format!("could not enable sharding on {db}"),
    ))
}

pub fn shard_collection(r: &Router, cmd: &Document) -> DocResult<Document> {
    let field = if cmd.contains_key("shardCollection") {
        "shardCollection"
    } else {
        "shardcollection"
    };
    let (ns, db, coll) = ns_arg(cmd, field)?;
    let pattern = cmd
        .get_document("key")
        .map_err(|_| DocError::failed_to_parse("shardCollection needs a 'key' document"))?;
    let key = ShardKey::parse(pattern)?;
    let unique = cmd.get_bool("unique").unwrap_or(false);
    if unique && key.hashed {
        return Err(DocError::invalid_options(
            "hashed shard keys cannot be declared unique",
        ));
    }
    if let Ok(c) = cmd.get_document("collation") {
        if c.get_str("locale") != Ok("simple") {
            return Err(DocError::bad_value(
                "shard keys use the simple collation only",
            ));
        }
    }
    enable_sharding(r, &doc! {"enableSharding": db.clone()})?;
    if r.reload(&ns)?.is_some() {
        return Err(DocError::with_code(
            23,
            "AlreadyInitialized",
            format!("sharding already enabled for collection {ns}"),
        ));
    }
    let dbe = r.database(&db, false)?.expect("enabled above");
    let shards: Vec<String> = r
        .catalog
        .shards()?
        .into_iter()
        .filter(|s| !s.get_bool("draining").unwrap_or(false))
        .filter_map(|s| s.get_str("_id").ok().map(String::from))
        .collect();
    let count = call_ok(
        &*r.shard_conn(&dbe.primary)?,
        &doc! {"count": coll.clone(), "$db": db.clone()},
    )
    .map(|c| crate::num_field(c.get("n")) as i64)
    .unwrap_or(0);
    let epoch = ObjectId::new();
    let initial = cmd
        .get("numInitialChunks")
        .map(|n| crate::int_field(Some(n)));
    let chunks = initial_chunks(&key, epoch, initial, count, &shards, &dbe.primary)?;
    let mut holders: Vec<String> = chunks.iter().map(|c| c.shard.clone()).collect();
    holders.push(dbe.primary.clone());
    holders.sort();
    holders.dedup();
    create_key_index(r, &holders, &key, unique, &db, &coll)?;
    if !r
        .catalog
        .create_collection(&ns, &key, unique, epoch, &chunks)?
    {
        return Err(DocError::with_code(
            23,
            "AlreadyInitialized",
            format!("sharding already enabled for collection {ns}"),
        ));
    }
    r.reload(&ns)?;
    for s in &holders {
        let _ = r
            .shard_conn(s)?
            .call(&doc! {"_flushRoutingTableCacheUpdates": ns.clone(), "$db": "admin"});
    }
    Ok(doc! {"collectionsharded": ns})
}

/// The chunks a newly sharded collection starts with: for a hashed key on an empty collection,
/// `numInitialChunks` (default 2 per shard) even slices of the hash space dealt round-robin
/// over `shards`; else one chunk on the database's `primary`.
fn initial_chunks(
    key: &ShardKey,
    epoch: ObjectId,
    initial: Option<i64>,
    count: i64,
    shards: &[String],
    primary: &str,
) -> DocResult<Vec<Chunk>> {
    let mk = |min: Document, max: Document, shard: &str, minor: u32| Chunk {
        min_enc: key.encode(&min),
        max_enc: key.encode(&max),
        min,
        max,
        shard: shard.to_string(),
        version: ChunkVersion::new(epoch, 1, minor),
        jumbo: false,
    };
    if !(key.hashed && count == 0) {
        if initial.is_some_and(|n| n > 1) {
            return Err(DocError::invalid_options(
                "numInitialChunks is only supported for hashed shard keys on empty collections",
            ));
        }
        return Ok(vec![mk(key.min_bound(), key.max_bound(), primary, 0)]);
    }
    let n = initial
        .filter(|&n| n > 0)
        .unwrap_or(2 * shards.len() as i64)
        .clamp(1, 8192) as u64;
    // Even slices of the int64 hash space, dealt round-robin over the shards.
    let field = key.fields[0].clone();
    let bound = |i: u64| -> Document {
        if i == 0 {
            key.min_bound()
        } else if i == n {
            key.max_bound()
        } else {
            let span = u64::MAX / n;
            doc! {field.clone(): Bson::Int64((i64::MIN as i128 + (span as i128) * i as i128) as i64)}
        }
    };
    Ok((0..n)
        .map(|i| {
            mk(
                bound(i),
                bound(i + 1),
                &shards[(i as usize) % shards.len()],
                i as u32,
            )
        })
        .collect())
}

/// Creates the shard-key index on every shard in `holders`.
fn create_key_index(
    r: &Router,
    holders: &[String],
    key: &ShardKey,
    unique: bool,
    db: &str,
    coll: &str,
) -> DocResult<()> {
    let mut spec =
        doc! {"key": key.index_key(), "name": docdb::index::default_name(&key.index_key())};
    if unique {
        spec.insert("unique", true);
    }
    if !key.hashed {
        // Chunk bounds are binary: the shard-key index must not take a collection default
        // collation (a hashed index under one is refused by the shard), unique or not. On a
        // collection with a default collation, a `{_id: 1}` key is refused by the shard: its
        // `_id` index has that collation, as in mongod.
        spec.insert("collation", doc! {"locale": "simple"});
    }
    let index = doc! {"createIndexes": coll, "indexes": [spec], "$db": db};
    let id_key = key.index_key() == doc! {"_id": 1};
    for s in holders {
        let conn = r.shard_conn(s)?;
        if id_key {
            // The _id index backs the key: asking for it under the simple collation creates
            // the collection if needed, and is refused if the collection's default collation
            // is another (its _id index has that one).
            let spec = doc! {"key": {"_id": 1}, "name": "_id_", "collation": {"locale": "simple"}};
            call_ok(
                &*conn,
                &doc! {"createIndexes": coll, "indexes": [spec], "$db": db},
            )?;
        } else {
            call_ok(&*conn, &index)?;
        }
    }
    Ok(())
}

/// The chunk a `find` document or `bounds` pair names.
fn chunk_of(t: &CollSnapshot, cmd: &Document) -> DocResult<Chunk> {
    if let Ok(f) = cmd.get_document("find") {
        let values = t.key.extract(f)?.ok_or_else(|| {
            DocError::with_code(
                61,
                "ShardKeyNotFound",
                format!("{f} does not contain the shard key {}", t.key.pattern),
            )
        })?;
        let pos = t.key.encode(&t.key.routing_key(&values));
        return Ok(t.chunk_at(&pos).expect("tiled").clone());
    }
    if let Ok(b) = cmd.get_array("bounds") {
        if let [Bson::Document(min), Bson::Document(max)] = b.as_slice() {
            return t.chunk_with_bounds(min, max).cloned().ok_or_else(|| {
                DocError::with_code(
                    96,
                    "OperationFailed",
                    format!("no chunk with bounds {min} - {max}"),
                )
            });
        }
        return Err(DocError::bad_value("bounds must be [min, max]"));
    }
    Err(DocError::failed_to_parse("need one of find or bounds"))
}

pub fn split(r: &Router, cmd: &Document) -> DocResult<Document> {
    let (ns, _, _) = ns_arg(cmd, "split")?;
    let given = ["middle", "find", "bounds"]
        .iter()
        .filter(|k| cmd.contains_key(**k))
        .count();
    if given != 1 {
        return Err(DocError::failed_to_parse(
            "split needs exactly one of middle, find or bounds",
        ));
    }
    let t = r.reload(&ns)?.ok_or_else(|| {
        DocError::with_code(61, "NamespaceNotSharded", format!("{ns} is not sharded"))
    })?;
    let (chunk, point) = if let Ok(m) = cmd.get_document("middle") {
        t.key.check_bound(m)?;
        let pos = t.key.encode(m);
        let c = t.chunk_at(&pos).expect("tiled").clone();
        if c.min_enc == pos {
            return Err(DocError::with_code(
                96,
                "OperationFailed",
                format!("{m} is already a chunk bound"),
            ));
        }
        (c, m.clone())
    } else {
        let c = chunk_of(&t, cmd)?;
        let rep = call_ok(
            &*r.shard_conn(&c.shard)?,
            &doc! {"splitVector": ns.clone(), "keyPattern": t.key.pattern.clone(), "min": c.min.clone(), "max": c.max.clone(), "force": true, "$db": "admin"},
        )?;
        let p = rep
            .get_array("splitKeys")
            .ok()
            .and_then(|a| a.first())
            .and_then(Bson::as_document)
            .cloned()
            .ok_or_else(|| {
                DocError::with_code(
                    96,
                    "OperationFailed",
                    "the chunk has no median key to split at (one key value)",
                )
            })?;
        (c, p)
    };
    if !commit_split(r, &ns, &chunk.min, &chunk.max, std::slice::from_ref(&point))? {
        return Err(DocError::with_code(
            117,
            "ConflictingOperationInProgress",
            format!(
                "split of {ns} at {point} failed: the chunk {} - {} changed meanwhile",
                chunk.min, chunk.max
            ),
        ));
    }
    Ok(doc! {})
}

pub fn split_vector(r: &Router, cmd: &Document) -> DocResult<Document> {
    let (ns, _, _) = ns_arg(cmd, "splitVector")?;
    let t = sharded(r, &ns)?;
    let min = cmd
        .get_document("min")
        .map_err(|_| DocError::failed_to_parse("splitVector needs min"))?;
    let c = t.chunk_at(&t.key.encode(min)).expect("tiled");
    let mut fwd = forwardable(cmd, &[]);
    fwd.insert("$db", "admin");
    let mut rep = call_ok(&*r.shard_conn(&c.shard)?, &fwd)?;
    rep.remove("ok");
    Ok(rep)
}

pub fn move_chunk(r: &Router, cmd: &Document) -> DocResult<Document> {
    let field = if cmd.contains_key("moveChunk") {
        "moveChunk"
    } else {
        "movechunk"
    };
    let (ns, _, _) = ns_arg(cmd, field)?;
    let to = cmd
        .get_str("to")
        .map_err(|_| DocError::failed_to_parse("moveChunk needs 'to'"))?;
    if r.catalog.shard(to)?.is_none() {
        return Err(DocError::with_code(
            70,
            "ShardNotFound",
            format!("shard {to} not found"),
        ));
    }
    let t = r.reload(&ns)?.ok_or_else(|| {
        DocError::with_code(61, "NamespaceNotSharded", format!("{ns} is not sharded"))
    })?;
    let c = chunk_of(&t, cmd)?;
    if c.shard == to {
        return Err(DocError::with_code(
            96,
            "OperationFailed",
            "that chunk is already on that shard",
        ));
    }
    let wait = cmd.get_bool("_waitForDelete").unwrap_or(false);
    let rep = move_chunk_to(r, &ns, &c, to, wait)?;
    Ok(doc! {"millis": rep.get_i64("millis").unwrap_or(0)})
}

pub fn merge_chunks(r: &Router, cmd: &Document) -> DocResult<Document> {
    let (ns, _, _) = ns_arg(cmd, "mergeChunks")?;
    let b = cmd
        .get_array("bounds")
        .map_err(|_| DocError::failed_to_parse("mergeChunks needs bounds: [min, max]"))?;
    let [Bson::Document(min), Bson::Document(max)] = b.as_slice() else {
        return Err(DocError::bad_value("bounds must be [min, max]"));
    };
    for _ in 0..MAX_STALE_RETRIES {
        let snap = r.catalog.collection(&ns)?.ok_or_else(|| {
            DocError::with_code(61, "NamespaceNotSharded", format!("{ns} is not sharded"))
        })?;
        let (lo, hi) = (snap.key.encode(min), snap.key.encode(max));
        let range: Vec<&Chunk> = snap
            .chunks
            .iter()
            .filter(|c| c.min_enc >= lo && c.max_enc <= hi)
            .collect();
        let ok = range.first().is_some_and(|c| c.min_enc == lo)
            && range.last().is_some_and(|c| c.max_enc == hi)
            && range.iter().all(|c| c.shard == range[0].shard);
        if !ok || range.len() < 2 {
            return Err(DocError::illegal_operation(format!(
                "could not merge chunks of {ns}: {min} - {max} must be the bounds of two or more contiguous chunks on one shard"
            )));
        }
        let mut merged = range[0].clone();
        merged.max = max.clone();
        merged.max_enc = hi.clone();
        merged.version = snap.version().next_minor();
        let shard = merged.shard.clone();
        let change = ChunkChange {
            remove: range[1..].iter().map(|c| c.min.clone()).collect(),
            put: vec![merged],
            changelog: Some((
                "merge".into(),
                doc! {"min": min.clone(), "max": max.clone()},
            )),
            ..Default::default()
        };
        if r.catalog.commit_chunks(&snap, change)? {
            r.reload(&ns)?;
            let _ = r
                .shard_conn(&shard)?
                .call(&doc! {"_flushRoutingTableCacheUpdates": ns.clone(), "$db": "admin"});
            return Ok(doc! {});
        }
    }
    Err(DocError::with_code(
        117,
        "ConflictingOperationInProgress",
        format!("could not merge chunks of {ns}"),
    ))
}

pub fn balancer_state(r: &Router, stopped: bool) -> DocResult<Document> {
    let mut d = r
        .catalog
        .setting("balancer")?
        .unwrap_or_else(|| doc! {"_id": "balancer"});
    d.insert("stopped", stopped);
    d.insert("mode", if stopped { "off" } else { "full" });
    r.catalog.put_setting(&d)?;
    r.invalidate_settings();
    Ok(doc! {})
}

pub fn balancer_status(r: &Router) -> DocResult<Document> {
    let s = r.settings()?;
    Ok(doc! {
        "mode": if s.balancer_on { "full" } else { "off" },
        "inBalancerRound": r.balancer.in_round(),
        "numBalancerRounds": r.balancer.rounds() as i64,
        "policy": s.balancer_policy.name(),
    })
}

// ---------------------------------------------------------------------- config database

pub const CONFIG_COLLECTIONS: &[&str] = &[
    "changelog",
    "chunks",
    "collections",
    "databases",
    "migrations",
    "mongos",
    "settings",
    "shards",
    "tags",
    "version",
];

/// The documents of `config.<coll>`, read from the metadata store.
pub fn config_docs(r: &Router, coll: &str) -> DocResult<Vec<Document>> {
    Ok(match coll {
        "shards" => r.catalog.shards()?,
        "databases" => r.catalog.databases()?,
        "collections" => r.catalog.collections()?,
        "chunks" => r.catalog.all_chunks()?,
        "settings" => r.catalog.settings()?,
        "changelog" => r.catalog.changelog()?,
        "migrations" => r
            .catalog
            .migrations()?
            .into_iter()
            .map(|(d, _)| d)
            .collect(),
        "version" => vec![
            doc! {"_id": 1, "minCompatibleVersion": 5, "currentVersion": 6, "clusterId": ObjectId::from_bytes([0; 12])},
        ],
        "mongos" => vec![
            doc! {"_id": r.options.id.clone(), "ping": bson::DateTime::now(), "up": 0i64, "waiting": true, "mongoVersion": server::commands::VERSION},
        ],
        _ => Vec::new(),
    })
}

pub fn config_find(r: &Router, call: &CommandCall<'_>, coll: &str) -> DocResult<Document> {
    let cmd = call.cmd;
    let mut stages = Vec::new();
    if let Ok(f) = cmd.get_document("filter") {
        stages.push(doc! {"$match": f.clone()});
    }
    if let Ok(s) = cmd.get_document("sort") {
        if !s.is_empty() {
            stages.push(doc! {"$sort": s.clone()});
        }
    }
    let skip = crate::num_field(cmd.get("skip")) as i64;
    if skip > 0 {
        stages.push(doc! {"$skip": skip});
    }
    let limit = crate::num_field(cmd.get("limit")) as i64;
    if limit != 0 {
        stages.push(doc! {"$limit": limit.abs()});
    }
    let docs = config_docs(r, coll)?;
    let input: DocIter = Box::new(docs.into_iter().map(Ok));
    let out = aggregate::run_pipeline(
        &stages,
        input,
        &|_: &str| Ok(Vec::new()),
        &Interrupt::none(),
    )?;
    let mut out: DocIter = Box::new(out.into_iter().map(Ok));
    if let Ok(p) = cmd.get_document("projection") {
        if !p.is_empty() {
            let p = Projection::parse(p)?;
            out = Box::new(out.map(move |d| d.and_then(|d| p.apply_matched(&d, None))));
        }
    }
    let single = cmd.get_bool("singleBatch").unwrap_or(false) || limit < 0;
    call.cursor_reply(
        &format!("config.{coll}"),
        DocCursor::new(out),
        usize::MAX,
        single,
    )
}

/// Writes to `config.settings` (what `sh.setBalancerState`, chunk size changes and the
/// split policy use); every other config collection is read-only through a router.
pub fn config_write(r: &Router, call: &CommandCall<'_>, coll: &str) -> DocResult<Document> {
    if coll != "settings" {
        return Err(DocError::illegal_operation(format!(
            "config.{coll} is read-only through a flashdoc router"
        )));
    }
    let mut n = 0i32;
    let mut modified = 0i32;
    match call.name {
        "insert" => {
            for d in call
                .cmd
                .get_array("documents")
                .map_err(|_| DocError::failed_to_parse("documents"))?
            {
                let d = d
                    .as_document()
                    .ok_or_else(|| DocError::type_mismatch("documents must be objects"))?;
                put_setting(r, d.clone())?;
                n += 1;
            }
        }
        "update" => {
            for u in call
                .cmd
                .get_array("updates")
                .map_err(|_| DocError::failed_to_parse("updates"))?
            {
                let u = u
                    .as_document()
                    .ok_or_else(|| DocError::type_mismatch("updates must be objects"))?;
                let q = u.get_document("q").cloned().unwrap_or_default();
                let id = q.get_str("_id").map_err(|_| {
                    DocError::bad_value("updates of config.settings must name the setting by _id")
                })?;
                let cur = r.catalog.setting(id)?;
                if cur.is_none() && !u.get_bool("upsert").unwrap_or(false) {
                    continue;
                }
                let base = cur.clone().unwrap_or_else(|| doc! {"_id": id});
                let m = Update::parse(
                    u.get("u").ok_or_else(|| DocError::failed_to_parse("u"))?,
                    None,
                )?;
                let mut new = if m.is_replacement() {
                    doc! {"_id": id}
                } else {
                    base.clone()
                };
                m.apply(&mut new, cur.is_none())?;
                n += 1;
                if Some(&new) != cur.as_ref() {
                    modified += cur.is_some() as i32;
                    put_setting(r, new)?;
                }
            }
        }
        _ => {
            return Err(DocError::illegal_operation(
                "config.settings documents can be inserted or updated, not deleted",
            ))
        }
    }
    let mut out = doc! {"n": n};
    if call.name == "update" {
        out.insert("nModified", modified);
    }
    Ok(out)
}

/// Validates and stores one settings document (every option is enforced or refused).
fn put_setting(r: &Router, d: Document) -> DocResult<()> {
    let id = d
        .get_str("_id")
        .map_err(|_| DocError::bad_value("a setting needs a string _id"))?
        .to_string();
    let allowed: &[&str] = match id.as_str() {
        "chunksize" => {
            let v = crate::num_field(d.get("value"));
            if !(1.0..=1024.0).contains(&v) {
                return Err(DocError::bad_value(
                    "chunksize value must be between 1 and 1024 (MB)",
                ));
            }
            &["_id", "value"]
        }
        "balancer" => {
            if let Some(p) = d.get("policy") {
                super::balancer::BalancerPolicy::parse(p.as_str().unwrap_or(""))?;
            }
            &[
                "_id",
                "stopped",
                "mode",
                "_secondaryThrottle",
                "_waitForDelete",
                "policy",
            ]
        }
        "autosplit" => &["_id", "enabled"],
        "split" => {
            SplitPolicy::from_doc(&d)?;
            &["_id", "policy", "ts", "td", "qps", "sustainSecs"]
        }
        other => {
            return Err(DocError::bad_value(format!(
                "unknown setting '{other}' (chunksize, balancer, autosplit, split)"
            )))
        }
    };
    if let Some(k) = d.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(DocError::bad_value(format!(
            "setting {id}: option '{k}' is not supported by flashdoc"
        )));
    }
    r.catalog.put_setting(&d)?;
    r.invalidate_settings();
    if id == "split" {
        for s in r.shard_names()? {
            let _ = r
                .shard_conn(&s)?
                .call(&doc! {"_flushRoutingTableCacheUpdates": 1, "$db": "admin"});
        }
    }
    Ok(())
}
