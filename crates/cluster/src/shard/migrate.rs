//! Chunk migration, as MongoDB does it (`README_migrations.md`): the donor registers the
//! migration, the recipient clones the range, then catches up on the writes made during the
//! clone, the donor enters a critical section (writes to the collection wait), the recipient
//! drains the last writes, the donor commits the new owner in the metadata store, leaves the
//! critical section and deletes its copy of the range once no read that started before the
//! commit can still see it.
//!
//! Failure handling rests on the migration record in the store: the commit is a transaction
//! guarded by the record's revision, and an abort deletes the record. Whoever gives up first
//! (the donor on any error, the recipient when it loses its donor, a restarted shard for
//! records naming it) deletes the record, which makes a later commit impossible; a recipient
//! that finds the record gone looks at the chunk's owner to learn the outcome. Every shard
//! deletes documents outside its chunks when it restarts (orphans of an interrupted clone or
//! of a range deletion that did not finish).

use super::{CollMeta, Identity, ShardNode};
use crate::meta::{ChunkChange, CollSnapshot};
use crate::shardkey::ShardKey;
use crate::store::{Guard, Write};
use crate::transport::{call_ok, ShardConn};
use bson::{doc, oid::ObjectId, Bson, Document};
use docdb::scope::WriteToken;
use docdb::{
    DeleteStatement, DocCursor, DocError, DocResult, FindQuery, UpdateStatement, WriteOpts,
};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Documents per clone batch, and bytes.
const CLONE_BATCH_DOCS: usize = 1000;
const CLONE_BATCH_BYTES: usize = 4 << 20;
/// `_id`s per `_transferMods` reply.
const MODS_BATCH: usize = 1000;
/// How long the donor waits for the recipient to catch up.
const CATCHUP_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long range deletion waits for reads that started before the commit (a cursor idles
/// out after 10 minutes).
const READ_DRAIN_TIMEOUT: Duration = Duration::from_secs(660);
/// Documents deleted per batch by range deletion.
const DELETE_BATCH: usize = 500;

fn conflicting(msg: impl Into<String>) -> DocError {
    DocError::with_code(117, "ConflictingOperationInProgress", msg)
}

fn split_ns(ns: &str) -> DocResult<(&str, &str)> {
    ns.split_once('.')
        .ok_or_else(|| DocError::invalid_namespace(format!("invalid namespace '{ns}'")))
}

/// The `_id`s of documents a migration must send again, in a range of one collection.
pub struct Capture {
    pub ns: String,
    pub key: ShardKey,
    lo: Vec<u8>,
    hi: Vec<u8>,
    ids: Mutex<BTreeMap<Vec<u8>, Bson>>,
}

impl Capture {
    fn take(&self, max: usize) -> Vec<Bson> {
        let mut ids = self.ids.lock();
        let keys: Vec<Vec<u8>> = ids.keys().take(max).cloned().collect();
        keys.into_iter().filter_map(|k| ids.remove(&k)).collect()
    }
    fn pending(&self) -> usize {
        self.ids.lock().len()
    }
}

/// Records the `_id` of an applied write in every capture whose range it touched.
pub struct CaptureToken {
    pub captures: Vec<Arc<Capture>>,
    pub positions: Vec<Vec<u8>>,
    pub ids: Vec<Bson>,
}

impl WriteToken for CaptureToken {
    fn finish(self: Box<Self>, applied: bool) {
        if !applied {
            return;
        }
        for c in &self.captures {
            let touched = self
                .positions
                .iter()
                .any(|p| c.lo.as_slice() <= p.as_slice() && p.as_slice() < c.hi.as_slice());
            if touched {
                let mut ids = c.ids.lock();
                for id in &self.ids {
                    ids.insert(docdb::keystring::encode_one(id, false), id.clone());
                }
            }
        }
    }
}

/// The node's migrations: at most one as donor and one as recipient at a time.
#[derive(Default)]
pub struct Migrations {
    donor: Mutex<Option<Arc<Donor>>>,
    recipient: Mutex<Option<Arc<Recipient>>>,
}

struct Donor {
    id: String,
    capture: Arc<Capture>,
    clone: Mutex<Option<DocCursor>>,
    cloned: AtomicU64,
    cloned_bytes: AtomicU64,
}

#[derive(Clone, Debug, PartialEq)]
enum RecvState {
    Clone,
    Catchup,
    Steady,
    Done,
    Failed(String),
}

pub struct Recipient {
    id: String,
    ns: String,
    min: Document,
    max: Document,
    key: ShardKey,
    donor_host: String,
    state: Mutex<RecvState>,
    cv: Condvar,
    commit: AtomicBool,
    abort: AtomicBool,
    cloned: AtomicU64,
    mods: AtomicU64,
}

impl Recipient {
    fn set(&self, s: RecvState) {
        *self.state.lock() = s;
        self.cv.notify_all();
    }
    fn state(&self) -> RecvState {
        self.state.lock().clone()
    }
    fn finished(&self) -> bool {
        matches!(self.state(), RecvState::Done | RecvState::Failed(_))
    }
}

// ---------------------------------------------------------------------- donor

/// A `_shardsvrMoveChunk` request.
struct MoveRequest {
    ns: String,
    min: Document,
    max: Document,
    /// The recipient shard's name.
    to: String,
    wait_for_delete: bool,
}

impl MoveRequest {
    fn parse(cmd: &Document) -> DocResult<MoveRequest> {
        let ns = cmd
            .get_str("_shardsvrMoveChunk")
            .map_err(|_| DocError::failed_to_parse("_shardsvrMoveChunk needs a namespace"))?
            .to_string();
        let min = cmd
            .get_document("min")
            .map_err(|_| DocError::failed_to_parse("min"))?
            .clone();
        let max = cmd
            .get_document("max")
            .map_err(|_| DocError::failed_to_parse("max"))?
            .clone();
        let to = cmd
            .get_str("to")
            .map_err(|_| DocError::failed_to_parse("to"))?
            .to_string();
        let wait_for_delete = cmd.get_bool("waitForDelete").unwrap_or(false);
        Ok(MoveRequest {
            ns,
            min,
            max,
            to,
            wait_for_delete,
        })
    }
}

/// `_shardsvrMoveChunk {ns, min, max, to, waitForDelete}`: moves one chunk this shard owns.
pub fn move_chunk(node: &Arc<ShardNode>, cmd: &Document) -> DocResult<Document> {
    let req = MoveRequest::parse(cmd)?;
    let (ns, min, max, to) = (&req.ns, &req.min, &req.max, &req.to);
    let id = node.identity()?;
    if *to == id.name {
        return Err(DocError::bad_value("the chunk is already on that shard"));
    }
    let meta = node
        .refresh(ns)?
        .ok_or_else(|| DocError::namespace_not_found(format!("{ns} is not sharded")))?;
    let owned = meta
        .snap
        .chunk_with_bounds(min, max)
        .is_some_and(|c| c.shard == id.name);
    if !owned {
        return Err(DocError::with_code(
            96,
            "OperationFailed",
            format!("this shard owns no chunk with bounds {min} - {max} of {ns}"),
        ));
    }
    let to_host = id
        .catalog
        .shard(to)?
        .and_then(|(d, _)| d.get_str("host").ok().map(String::from))
        .ok_or_else(|| DocError::with_code(70, "ShardNotFound", format!("shard {to} not found")))?;
    let key = meta.key().clone();
    let mig_id = ObjectId::new().to_hex();
    let donor = register_donor(node, &id, &req, &key, &mig_id)?;
    let rec_rev = id.catalog.migration(ns)?.map(|(_, r)| r).unwrap_or(0);
    let recipient = node.connector.connect(&to_host);
    drop(meta);
    let outcome = run_donor(node, &req, &to_host, &donor, &*recipient, rec_rev);
    // Whatever happened, stop capturing and free the slot.
    node.captures
        .write()
        .retain(|c| !Arc::ptr_eq(c, &donor.capture));
    *node.migrations.donor.lock() = None;
    match outcome {
        Ok(pre_commit) => {
            let _ = recipient
                .call(&doc! {"_flushRoutingTableCacheUpdates": ns.clone(), "$db": "admin"});
            let cloned = donor.cloned.load(Ordering::Relaxed) as i64;
            let cloned_bytes = donor.cloned_bytes.load(Ordering::Relaxed) as i64;
            delete_donated(node, &req, pre_commit)?;
            Ok(doc! {"migrationId": mig_id, "cloned": cloned, "clonedBytes": cloned_bytes})
        }
        Err(e) => {
            node.gate(ns).open();
            let _ = recipient.call(&doc! {"_recvChunkAbort": mig_id, "$db": "admin"});
            let _ = id.catalog.abort_migration(ns, rec_rev);
            Err(e)
        }
    }
}

/// Takes this shard's donor slot for the migration `mig_id`: records the migration in the
/// catalog, starts capturing the chunk's writes, and opens the clone cursor.
fn register_donor(
    node: &Arc<ShardNode>,
    id: &Identity,
    req: &MoveRequest,
    key: &ShardKey,
    mig_id: &str,
) -> DocResult<Arc<Donor>> {
    let (ns, min, max, to) = (&req.ns, &req.min, &req.max, &req.to);
    let mut slot = node.migrations.donor.lock();
    if slot.is_some() {
        return Err(conflicting("this shard is already donating a chunk"));
    }
    let record = doc! {
        "_id": ns.clone(), "ns": ns.clone(), "min": min.clone(), "max": max.clone(),
        "from": id.name.clone(), "to": to.clone(), "migrationId": mig_id,
        "started": bson::DateTime::now(),
    };
    if !id.catalog.begin_migration(ns, &record)? && !retake_stale_record(id, ns, &record)? {
        return Err(conflicting(format!(
            "another migration of {ns} is in progress"
        )));
    }
    let capture = Arc::new(Capture {
        ns: ns.clone(),
        key: key.clone(),
        lo: key.encode(min),
        hi: key.encode(max),
        ids: Mutex::new(BTreeMap::new()),
    });
    // Capture first, then start reading: a write behind the cursor is still seen. A
    // write whose hook ran before the capture existed is not captured, so it must be
    // applied before the clone's snapshot is taken: register the capture with the
    // collection's writes drained (3.6 registers its cloner under the collection's X
    // lock for the same reason). Writes that enter after this see the capture.
    let gate = node.gate(ns);
    if let Err(e) = gate.close() {
        if let Ok(Some((_, rev))) = id.catalog.migration(ns) {
            let _ = id.catalog.abort_migration(ns, rev);
        }
        return Err(e);
    }
    node.captures.write().push(capture.clone());
    gate.open();
    let (db, coll) = split_ns(ns)?;
    let cursor = node.db.scan_index(
        db,
        coll,
        &key.index_key(),
        Bound::Included(capture.lo.clone()),
        Bound::Excluded(capture.hi.clone()),
    );
    let d = Arc::new(Donor {
        id: mig_id.to_string(),
        capture,
        clone: Mutex::new(cursor.ok()),
        cloned: AtomicU64::new(0),
        cloned_bytes: AtomicU64::new(0),
    });
    *slot = Some(d.clone());
    Ok(d)
}

/// A record naming this shard as donor while its donor slot is free (the caller holds it) was
/// left by a former primary of this shard's set: nothing here runs it, a deposed primary
/// still running it cannot commit (its majority wait fails, and the commit is conditional on
/// the record), so it is aborted and the migration registered again. Whether it was.
fn retake_stale_record(id: &Identity, ns: &str, record: &Document) -> DocResult<bool> {
    let Some((stale, rev)) = id.catalog.migration(ns)? else {
        return id.catalog.begin_migration(ns, record);
    };
    if stale.get_str("from").ok() != Some(id.name.as_str()) {
        return Ok(false);
    }
    eprintln!(
        "flashdoc: aborting migration {} of {ns}, left by a former primary of this shard",
        stale.get_str("migrationId").unwrap_or("?")
    );
    id.catalog.abort_migration(ns, rev)?;
    id.catalog.begin_migration(ns, record)
}

/// After the commit: deletes the donated range, now or (unless `waitForDelete`) in a thread.
fn delete_donated(
    node: &Arc<ShardNode>,
    req: &MoveRequest,
    pre_commit: Weak<CollMeta>,
) -> DocResult<()> {
    let task = RangeDeletion {
        node: node.clone(),
        ns: req.ns.clone(),
        min: req.min.clone(),
        max: req.max.clone(),
        pre_commit,
    };
    if req.wait_for_delete {
        task.run()?;
    } else {
        std::thread::Builder::new()
            .name("flashdoc-range-deleter".into())
            .spawn(move || {
                if let Err(e) = task.run() {
                    eprintln!("flashdoc: range deletion failed: {e}");
                }
            })
            .map_err(|e| DocError::internal_error(format!("spawn range deleter: {e}")))?;
    }
    Ok(())
}

/// The donor's steps after registration; returns the metadata from before the commit (range
/// deletion waits until nothing uses it).
fn run_donor(
    node: &Arc<ShardNode>,
    req: &MoveRequest,
    to_host: &str,
    donor: &Donor,
    recipient: &dyn ShardConn,
    rec_rev: i64,
) -> DocResult<Weak<CollMeta>> {
    let (ns, min, max, to) = (req.ns.as_str(), &req.min, &req.max, req.to.as_str());
    let id = node.identity()?;
    let (db, coll) = split_ns(ns)?;
    let indexes: Vec<Bson> = node
        .db
        .list_indexes(db, coll)
        .unwrap_or_default()
        .into_iter()
        .map(Bson::Document)
        .collect();
    let key = &donor.capture.key;
    call_ok(
        recipient,
        &doc! {
            "_recvChunkStart": ns, "migrationId": donor.id.clone(), "min": min.clone(),
            "max": max.clone(), "fromShard": id.name.clone(), "fromHost": node.host.clone(),
            "shardKey": key.pattern.clone(), "indexes": indexes, "$db": "admin",
        },
    )?;
    let deadline = Instant::now() + CATCHUP_TIMEOUT;
    loop {
        let st = call_ok(
            recipient,
            &doc! {"_recvChunkStatus": donor.id.clone(), "$db": "admin"},
        )?;
        match st.get_str("state").unwrap_or("") {
            "steady" => break,
            "fail" => {
                return Err(DocError::with_code(
                    96,
                    "OperationFailed",
                    format!(
                        "migration to {to} failed on the recipient: {}",
                        st.get_str("errmsg").unwrap_or("")
                    ),
                ))
            }
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(DocError::with_code(
                262,
                "ExceededTimeLimit",
                "the recipient did not catch up in time",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The critical section: no write enters; the recipient drains what is left.
    let gate = node.gate(ns);
    gate.close()?;
    call_ok(
        recipient,
        &doc! {"_recvChunkCommit": donor.id.clone(), "$db": "admin"},
    )?;
    let pre_commit = node
        .cached(ns)
        .map(|m| Arc::downgrade(&m))
        .unwrap_or_default();
    // The recipient made its copy majority-durable before it confirmed; the donor, still
    // the primary, makes its own writes so before the owner changes in the store: a donor
    // deposed meanwhile fails here, and the migration aborts.
    node.replicate_to_majority()?;
    commit(node, ns, min, max, to, rec_rev)?;
    node.refresh(ns)?;
    node.reset_stats(ns, &key.encode(min));
    gate.open();
    let _ = to_host;
    Ok(pre_commit)
}

/// Commits the new owner: the moved chunk gets the next major version and, if the donor keeps
/// chunks, one of them the version after (so the donor's version moves too). Retries when
/// another change of the collection committed first, as long as the migration record and the
/// chunk are unchanged.
fn commit(
    node: &ShardNode,
    ns: &str,
    min: &Document,
    max: &Document,
    to: &str,
    rec_rev: i64,
) -> DocResult<()> {
    let id = node.identity()?;
    for _ in 0..20 {
        let snap = match id.catalog.collection(ns) {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Err(DocError::namespace_not_found(format!(
                    "{ns} was dropped during the migration"
                )))
            }
            Err(e) => {
                std::thread::sleep(Duration::from_millis(500));
                eprintln!("flashdoc: migration commit of {ns}: {e}; retrying");
                continue;
            }
        };
        if snap
            .chunk_with_bounds(min, max)
            .is_some_and(|c| c.shard == to)
        {
            return Ok(()); // an earlier attempt committed, its reply was lost
        }
        let change = commit_change(
            &snap,
            &id.name,
            min,
            max,
            to,
            &id.catalog.migration_key(ns),
            rec_rev,
        )?;
        match id.catalog.commit_chunks(&snap, change) {
            Ok(true) => return Ok(()),
            Ok(false) => {
                if id.catalog.migration(ns)?.map(|(_, r)| r) != Some(rec_rev) {
                    return Err(conflicting(
                        "the migration was aborted before it could commit",
                    ));
                }
            }
            Err(e) => {
                eprintln!("flashdoc: migration commit of {ns}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    Err(conflicting(format!(
        "could not commit the migration of {ns}"
    )))
}

fn commit_change(
    snap: &CollSnapshot,
    me: &str,
    min: &Document,
    max: &Document,
    to: &str,
    record_key: &str,
    rec_rev: i64,
) -> DocResult<ChunkChange> {
    let chunk = snap
        .chunk_with_bounds(min, max)
        .filter(|c| c.shard == me)
        .ok_or_else(|| conflicting("the chunk changed during the migration"))?;
    let v = snap.version().next_major();
    let mut moved = chunk.clone();
    moved.shard = to.to_string();
    moved.version = v;
    let mut put = vec![moved];
    if let Some(c) = snap
        .chunks
        .iter()
        .find(|c| c.shard == me && c.min_enc != chunk.min_enc)
    {
        let mut control = c.clone();
        control.version = v.next_minor();
        put.push(control);
    }
    Ok(ChunkChange {
        remove: Vec::new(),
        put,
        guards: vec![Guard {
            key: record_key.to_string(),
            mod_revision: rec_rev,
        }],
        writes: vec![Write::Delete(record_key.to_string())],
        changelog: Some((
            "moveChunk.commit".into(),
            doc! {"min": min.clone(), "max": max.clone(), "from": me, "to": to},
        )),
    })
}

/// `_migrateClone {migrationId}`: the next batch of the range's documents.
pub fn migrate_clone(node: &ShardNode, cmd: &Document) -> DocResult<Document> {
    let donor = active_donor(node, cmd.get_str("_migrateClone").unwrap_or(""))?;
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut guard = donor.clone.lock();
    if let Some(cur) = guard.as_mut() {
        while out.len() < CLONE_BATCH_DOCS && bytes < CLONE_BATCH_BYTES {
            match cur.next() {
                Some(d) => {
                    let d = d?;
                    bytes += bson::to_vec(&d).map(|v| v.len()).unwrap_or(0);
                    out.push(Bson::Document(d));
                }
                None => {
                    *guard = None;
                    break;
                }
            }
        }
    }
    donor.cloned.fetch_add(out.len() as u64, Ordering::Relaxed);
    donor
        .cloned_bytes
        .fetch_add(bytes as u64, Ordering::Relaxed);
    Ok(doc! {"objects": out})
}

/// `_transferMods {migrationId}`: the range's documents written since they were last sent
/// (their current version), and the `_id`s that left the range or were deleted.
pub fn transfer_mods(node: &ShardNode, cmd: &Document) -> DocResult<Document> {
    let donor = active_donor(node, cmd.get_str("_transferMods").unwrap_or(""))?;
    let (db, coll) = split_ns(&donor.capture.ns)?;
    let mut reload = Vec::new();
    let mut deleted = Vec::new();
    for id in donor.capture.take(MODS_BATCH) {
        let found = node
            .db
            .find(
                db,
                coll,
                &FindQuery {
                    filter: doc! {"_id": id.clone()},
                    ..Default::default()
                },
            )?
            .next()
            .transpose()?;
        let c = &donor.capture;
        match found {
            Some(d)
                if {
                    let p = c.key.position_of_doc(&d);
                    c.lo <= p && p < c.hi
                } =>
            {
                reload.push(Bson::Document(d))
            }
            _ => deleted.push(id),
        }
    }
    Ok(doc! {"reload": reload, "deleted": deleted, "pending": donor.capture.pending() as i64})
}

fn active_donor(node: &ShardNode, id: &str) -> DocResult<Arc<Donor>> {
    node.migrations
        .donor
        .lock()
        .clone()
        .filter(|d| d.id == id)
        .ok_or_else(|| conflicting(format!("no migration {id} is being donated by this shard")))
}

// ---------------------------------------------------------------------- recipient

/// `_recvChunkStart`: prepares the collection and starts pulling the range.
pub fn recv_chunk_start(node: &Arc<ShardNode>, cmd: &Document) -> DocResult<Document> {
    let ns = cmd
        .get_str("_recvChunkStart")
        .map_err(|_| DocError::failed_to_parse("_recvChunkStart"))?;
    let get = |k: &str| -> DocResult<Document> {
        cmd.get_document(k)
            .cloned()
            .map_err(|_| DocError::failed_to_parse(format!("_recvChunkStart needs {k}")))
    };
    let (min, max) = (get("min")?, get("max")?);
    let key = ShardKey::parse(&get("shardKey")?)?;
    let id = cmd
        .get_str("migrationId")
        .map_err(|_| DocError::failed_to_parse("migrationId"))?;
    let donor_host = cmd
        .get_str("fromHost")
        .map_err(|_| DocError::failed_to_parse("fromHost"))?;
    let mut slot = node.migrations.recipient.lock();
    if slot.as_ref().is_some_and(|r| !r.finished()) {
        return Err(conflicting("this shard is already receiving a chunk"));
    }
    let meta = node
        .refresh(ns)?
        .ok_or_else(|| DocError::namespace_not_found(format!("{ns} is not sharded")))?;
    let (lo, hi) = (key.encode(&min), key.encode(&max));
    if meta.owned.iter().any(|c| c.min_enc < hi && lo < c.max_enc) {
        return Err(conflicting(format!(
            "this shard already owns part of {min} - {max}"
        )));
    }
    let (db, coll) = split_ns(ns)?;
    let specs: Vec<Document> = cmd
        .get_array("indexes")
        .map(|a| {
            a.iter()
                .filter_map(Bson::as_document)
                .filter(|d| d.get_str("name").ok() != Some("_id_"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    node.db
        .create_collection(db, coll, &Document::new())
        .or_else(|e| if e.code == 48 { Ok(()) } else { Err(e) })?;
    if !specs.is_empty() {
        node.db.create_indexes(db, coll, &specs)?;
    }
    // Leftovers of an earlier attempt are orphans here: start from an empty range.
    delete_range(node, ns, &key, Bound::Included(lo), Bound::Excluded(hi))?;
    let r = Arc::new(Recipient {
        id: id.to_string(),
        ns: ns.to_string(),
        min,
        max,
        key,
        donor_host: donor_host.to_string(),
        state: Mutex::new(RecvState::Clone),
        cv: Condvar::new(),
        commit: AtomicBool::new(false),
        abort: AtomicBool::new(false),
        cloned: AtomicU64::new(0),
        mods: AtomicU64::new(0),
    });
    *slot = Some(r.clone());
    let node = node.clone();
    std::thread::Builder::new()
        .name("flashdoc-migration-recipient".into())
        .spawn(move || {
            let outcome = pull(&node, &r);
            if let Err(e) = outcome {
                let msg = e.to_string();
                if let Err(e2) = give_up(&node, &r) {
                    eprintln!("flashdoc: migration {} cleanup: {e2}", r.id);
                }
                r.set(RecvState::Failed(msg));
            }
        })
        .map_err(|e| DocError::internal_error(format!("spawn migration recipient: {e}")))?;
    Ok(doc! {"started": true})
}

/// The recipient's clone and catch-up loop; ends `Done` after the commit's final drain.
fn pull(node: &ShardNode, r: &Recipient) -> DocResult<()> {
    let donor = node.connector.connect(&r.donor_host);
    let (db, coll) = split_ns(&r.ns)?;
    let upsert = |docs: &[Bson]| -> DocResult<()> {
        let stmts: Vec<UpdateStatement> = docs
            .iter()
            .filter_map(Bson::as_document)
            .map(|d| UpdateStatement {
                q: doc! {"_id": d.get("_id").cloned().unwrap_or(Bson::Null)},
                u: Bson::Document(d.clone()),
                upsert: true,
                multi: false,
                array_filters: None,
                collation: None,
                ..Default::default()
            })
            .collect();
        // The donor's documents were validated when they were written there (mongod's
        // migrations bypass validation too).
        let opts = WriteOpts {
            bypass_validation: true,
            ..WriteOpts::default()
        };
        let out = node.db.update(db, coll, &stmts, opts);
        match out.write_errors.into_iter().next() {
            Some(e) => Err(e.error),
            None => Ok(()),
        }
    };
    loop {
        if r.abort.load(Ordering::Acquire) {
            return Err(conflicting("aborted"));
        }
        let batch = call_ok(
            &*donor,
            &doc! {"_migrateClone": r.id.clone(), "$db": "admin"},
        )?;
        let objs = batch.get_array("objects").cloned().unwrap_or_default();
        if objs.is_empty() {
            break;
        }
        upsert(&objs)?;
        r.cloned.fetch_add(objs.len() as u64, Ordering::Relaxed);
    }
    r.set(RecvState::Catchup);
    loop {
        if r.abort.load(Ordering::Acquire) {
            return Err(conflicting("aborted"));
        }
        // Read the flag before draining: a drain that comes back empty after the donor closed
        // its critical section has seen every write.
        let committing = r.commit.load(Ordering::Acquire);
        let mods = call_ok(
            &*donor,
            &doc! {"_transferMods": r.id.clone(), "$db": "admin"},
        )?;
        let reload = mods.get_array("reload").cloned().unwrap_or_default();
        let deleted = mods.get_array("deleted").cloned().unwrap_or_default();
        if !reload.is_empty() {
            upsert(&reload)?;
        }
        if !deleted.is_empty() {
            let stmts: Vec<DeleteStatement> = deleted
                .iter()
                .map(|id| DeleteStatement {
                    q: doc! {"_id": id.clone()},
                    limit: 1,
                    collation: None,
                    ..Default::default()
                })
                .collect();
            let out = node.db.delete(db, coll, &stmts, WriteOpts::default());
            if let Some(e) = out.write_errors.into_iter().next() {
                return Err(e.error);
            }
        }
        r.mods
            .fetch_add((reload.len() + deleted.len()) as u64, Ordering::Relaxed);
        let drained =
            reload.is_empty() && deleted.is_empty() && mods.get_i64("pending").unwrap_or(0) == 0;
        if drained && committing {
            // Everything received must be durable before the donor commits the new owner, and
            // on a replica set held by a majority: no failover may roll back the copy of a
            // chunk the store says is here.
            node.db.engine().sync().map_err(docdb::storage_error)?;
            node.replicate_to_majority()?;
            r.set(RecvState::Done);
            return Ok(());
        }
        if drained {
            if r.state() == RecvState::Catchup {
                r.set(RecvState::Steady);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The recipient lost its donor (or was aborted): abort through the record if it still
/// exists; keep the range only if the store says it is ours.
fn give_up(node: &ShardNode, r: &Recipient) -> DocResult<()> {
    let id = node.identity()?;
    if let Some((rec, rev)) = id.catalog.migration(&r.ns)? {
        if rec.get_str("migrationId").ok() == Some(r.id.as_str()) {
            id.catalog.abort_migration(&r.ns, rev)?;
        }
    }
    let meta = node.refresh(&r.ns)?;
    let ours = meta.as_ref().is_some_and(|m| {
        m.snap
            .chunk_with_bounds(&r.min, &r.max)
            .is_some_and(|c| c.shard == id.name)
    });
    if !ours {
        let (lo, hi) = (r.key.encode(&r.min), r.key.encode(&r.max));
        delete_range(
            node,
            &r.ns,
            &r.key,
            Bound::Included(lo),
            Bound::Excluded(hi),
        )?;
    }
    Ok(())
}

fn active_recipient(node: &ShardNode, id: &str) -> DocResult<Arc<Recipient>> {
    node.migrations
        .recipient
        .lock()
        .clone()
        .filter(|r| r.id == id)
        .ok_or_else(|| conflicting(format!("no migration {id} is being received by this shard")))
}

pub fn recv_chunk_status(node: &ShardNode, cmd: &Document) -> DocResult<Document> {
    let r = active_recipient(node, cmd.get_str("_recvChunkStatus").unwrap_or(""))?;
    let (state, err) = match r.state() {
        RecvState::Clone => ("clone", String::new()),
        RecvState::Catchup => ("catchup", String::new()),
        RecvState::Steady => ("steady", String::new()),
        RecvState::Done => ("done", String::new()),
        RecvState::Failed(e) => ("fail", e),
    };
    Ok(
        doc! {"state": state, "errmsg": err, "cloned": r.cloned.load(Ordering::Relaxed) as i64, "mods": r.mods.load(Ordering::Relaxed) as i64},
    )
}

/// `_recvChunkCommit`: the donor is in its critical section; drain and confirm.
pub fn recv_chunk_commit(node: &ShardNode, cmd: &Document) -> DocResult<Document> {
    let r = active_recipient(node, cmd.get_str("_recvChunkCommit").unwrap_or(""))?;
    r.commit.store(true, Ordering::Release);
    let mut s = r.state.lock();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match &*s {
            RecvState::Done => return Ok(doc! {"cloned": r.cloned.load(Ordering::Relaxed) as i64}),
            RecvState::Failed(e) => {
                return Err(DocError::with_code(
                    96,
                    "OperationFailed",
                    format!("recipient failed: {e}"),
                ))
            }
            _ => {}
        }
        if r.cv.wait_until(&mut s, deadline).timed_out() {
            return Err(DocError::with_code(
                262,
                "ExceededTimeLimit",
                "the recipient did not drain in time",
            ));
        }
    }
}

/// `_recvChunkAbort`: stop and delete what was received (unless the store says it is ours).
pub fn recv_chunk_abort(node: &ShardNode, cmd: &Document) -> DocResult<Document> {
    let r = active_recipient(node, cmd.get_str("_recvChunkAbort").unwrap_or(""))?;
    r.abort.store(true, Ordering::Release);
    let mut s = r.state.lock();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(&*s, RecvState::Done | RecvState::Failed(_)) {
        if r.cv.wait_until(&mut s, deadline).timed_out() {
            break;
        }
    }
    drop(s);
    give_up(node, &r)?;
    Ok(doc! {})
}

// ---------------------------------------------------------------------- range deletion

struct RangeDeletion {
    node: Arc<ShardNode>,
    ns: String,
    min: Document,
    max: Document,
    pre_commit: Weak<CollMeta>,
}

impl RangeDeletion {
    fn run(self) -> DocResult<()> {
        let deadline = Instant::now() + READ_DRAIN_TIMEOUT;
        while self.pre_commit.strong_count() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let Some(meta) = self.node.cached(&self.ns) else {
            return Ok(());
        };
        let key = meta.key().clone();
        let (lo, hi) = (key.encode(&self.min), key.encode(&self.max));
        if meta.owned.iter().any(|c| c.min_enc < hi && lo < c.max_enc) {
            return Ok(()); // the range came back meanwhile
        }
        delete_range(
            &self.node,
            &self.ns,
            &key,
            Bound::Included(lo),
            Bound::Excluded(hi),
        )?;
        // With `waitForDelete`, the caller learns of deletes a failover cannot undo.
        self.node.replicate_to_majority()
    }
}

/// Deletes every document of `ns` whose routing key is in the range, in batches.
pub fn delete_range(
    node: &ShardNode,
    ns: &str,
    key: &ShardKey,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
) -> DocResult<()> {
    let (db, coll) = split_ns(ns)?;
    // A set's secondary deletes only what its primary's oplog tells it to.
    node.check_primary()?;
    loop {
        let ids: Vec<Bson> =
            match node
                .db
                .scan_index(db, coll, &key.index_key(), lo.clone(), hi.clone())
            {
                Ok(c) => c
                    .take(DELETE_BATCH)
                    .filter_map(|d| d.ok().and_then(|d| d.get("_id").cloned()))
                    .collect(),
                Err(e) if e.code == 27 => return Ok(()), // no shard-key index: nothing was ever cloned
                Err(e) => return Err(e),
            };
        if ids.is_empty() {
            return Ok(());
        }
        let stmts: Vec<DeleteStatement> = ids
            .into_iter()
            .map(|id| DeleteStatement {
                q: doc! {"_id": id},
                limit: 1,
                collation: None,
                ..Default::default()
            })
            .collect();
        let out = node.db.delete(
            db,
            coll,
            &stmts,
            WriteOpts {
                ordered: false,
                journal: false,
                ..WriteOpts::default()
            },
        );
        if let Some(e) = out.write_errors.into_iter().next() {
            return Err(e.error);
        }
    }
}

/// Deletes the documents of every range the shard does not own.
pub fn delete_orphans(node: &ShardNode, ns: &str, meta: &CollMeta) -> DocResult<()> {
    let key = meta.key();
    let mut at = Bound::Unbounded;
    for c in &meta.owned {
        delete_range(node, ns, key, at, Bound::Excluded(c.min_enc.clone()))?;
        at = Bound::Included(c.max_enc.clone());
    }
    delete_range(node, ns, key, at, Bound::Unbounded)
}
