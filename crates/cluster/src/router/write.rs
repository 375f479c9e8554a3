//! Writes through the router. Each statement is targeted: an insert by its document's shard
//! key (which it must carry), an update or delete by its query's shard key; without it, the
//! multi forms go to every shard with chunks, and `updateOne`/`deleteOne` only with an exact
//! `_id` (3.6's rule), which also goes everywhere (ownership filtering makes one shard match).
//! Statements for one shard travel together; ordered batches keep their order and stop at the
//! first error. Statements a shard refused as stale are re-targeted and re-sent after the
//! routing table is reloaded. Retryable writes carry the client's `lsid` and `txnNumber` and
//! each statement's `stmtId` (its index in the client's batch).

use super::read::{target_shards, targets};
use super::{admin, forwardable, is_stale, namespace, Router, MAX_STALE_RETRIES};
use crate::meta::CollSnapshot;
use crate::transport::{is_ok, reply_error};
use bson::{doc, oid::ObjectId, Bson, Document};
use docdb::{DocError, DocResult};
use server::hook::CommandCall;
use std::collections::BTreeMap;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Delete,
}

#[derive(Clone, Debug)]
enum Target {
    One(String, Option<Vec<u8>>),
    All(Vec<String>),
}

#[derive(Default)]
struct Totals {
    n: i64,
    modified: i64,
    upserted: Vec<Bson>,
    errors: BTreeMap<usize, Document>,
}

fn shard_key_missing(t: &CollSnapshot, what: &str) -> DocError {
    DocError::with_code(
        61,
        "ShardKeyNotFound",
        format!(
            "{what} does not contain shard key for pattern {}",
            t.key.pattern
        ),
    )
}

/// The statement's target in a routing table (`None`: unsharded, the primary).
fn target(kind: Kind, stmt: &Document, t: &CollSnapshot) -> DocResult<Target> {
    let key = &t.key;
    let one = |values: &Document| {
        let pos = key.encode(&key.routing_key(values));
        let c = t.chunk_at(&pos).expect("chunks tile the key space");
        Target::One(c.shard.clone(), Some(c.min_enc.clone()))
    };
    match kind {
        Kind::Insert => match key.extract(stmt)? {
            Some(v) => Ok(one(&v)),
            None => Err(shard_key_missing(t, &format!("document {stmt}"))),
        },
        Kind::Update | Kind::Delete => {
            let q = stmt.get_document("q").cloned().unwrap_or_default();
            if let Some(v) = key.equality(&q) {
                return Ok(one(&v));
            }
            let multi = match kind {
                Kind::Update => stmt.get_bool("multi").unwrap_or(false),
                _ => crate::int_field(stmt.get("limit")) == 0,
            };
            if kind == Kind::Update && stmt.get_bool("upsert").unwrap_or(false) {
                return Err(shard_key_missing(t, &format!("upsert query {q}")));
            }
            if !multi && crate::shardkey::field_equality(&q, "_id").is_none() {
                return Err(DocError::invalid_options(format!(
                    "A single {} on a sharded collection must contain an exact match on _id or contain the shard key {}; query: {q}",
                    if kind == Kind::Update { "update" } else { "delete" },
                    key.pattern
                )));
            }
            Ok(Target::All(target_shards(t, &q)))
        }
    }
}

pub fn write(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    if db == "config" {
        return admin::config_write(r, call, &coll);
    }
    let (field, kind) = match call.name {
        "insert" => ("documents", Kind::Insert),
        "update" => ("updates", Kind::Update),
        _ => ("deletes", Kind::Delete),
    };
    let stmts = statements(call.cmd, field, kind)?;
    let ordered = call.cmd.get_bool("ordered").unwrap_or(true);
    let ns = format!("{db}.{coll}");
    let creates =
        kind == Kind::Insert || stmts.iter().any(|s| s.get_bool("upsert").unwrap_or(false));
    let Some(dbe) = r.database(&db, creates)? else {
        // Nothing to update or delete in a database that does not exist.
        let mut out = doc! {"n": 0};
        if kind == Kind::Update {
            out.insert("nModified", 0);
        }
        return Ok(out);
    };
    let batch = Batch {
        db: &db,
        coll: &coll,
        kind,
        field,
        base: forwardable(call.cmd, &[call.name, field, "ordered", "stmtIds"]),
        session: match (call.cmd.get("lsid"), call.cmd.get("txnNumber")) {
            (Some(l), Some(t)) => Some((l.clone(), t.clone())),
            _ => None,
        },
        stmts,
        ordered,
    };
    let (totals, touched) = batch.send(r, &ns, &dbe.primary)?;
    if !touched.is_empty() {
        r.autosplit.note_writes(r, &ns, &touched);
    }
    Ok(totals.reply(kind))
}

/// The statements of a write command's `field` array; inserted documents given an `_id`.
fn statements(cmd: &Document, field: &str, kind: Kind) -> DocResult<Vec<Document>> {
    let mut stmts: Vec<Document> = cmd
        .get_array(field)
        .map_err(|_| {
            DocError::failed_to_parse(format!(
                "BSON field '{field}' is missing but a required field"
            ))
        })?
        .iter()
        .map(|d| {
            d.as_document().cloned().ok_or_else(|| {
                DocError::type_mismatch(format!("{field} must be an array of objects"))
            })
        })
        .collect::<DocResult<_>>()?;
    if kind == Kind::Insert {
        // The router gives every document its _id, so a retry sends the same one.
        for d in &mut stmts {
            if !d.contains_key("_id") {
                let mut with = doc! {"_id": ObjectId::new()};
                with.extend(std::mem::take(d));
                *d = with;
            }
        }
    }
    Ok(stmts)
}

/// One client write command as the router sends it on: what every shard command built from
/// it shares.
struct Batch<'a> {
    db: &'a str,
    coll: &'a str,
    kind: Kind,
    /// The statements' array field: `documents`, `updates` or `deletes`.
    field: &'a str,
    /// The client's fields passed on to the shards.
    base: Document,
    /// The retryable write's `lsid` and `txnNumber`.
    session: Option<(Bson, Bson)>,
    stmts: Vec<Document>,
    ordered: bool,
}

/// (chunk, bytes) written by applied targeted statements, for auto-split.
type Touched = Vec<(Vec<u8>, i64)>;

impl Batch<'_> {
    /// Sends every statement to its shards, re-targeting those refused as stale after a reload
    /// of the routing table; returns the totals and the chunks written.
    fn send(&self, r: &Router, ns: &str, primary: &str) -> DocResult<(Totals, Touched)> {
        let mut totals = Totals::default();
        let mut pending: Vec<usize> = (0..self.stmts.len()).collect();
        // Shards that already applied a broadcast statement (never sent it twice).
        let mut applied_on: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        let mut touched: Touched = Vec::new();
        let mut stale_rounds = 0;
        while !pending.is_empty() {
            let table = r.table(ns)?;
            let (plan, stop) = self.plan(
                &pending,
                table.as_deref(),
                primary,
                &applied_on,
                &mut totals,
            );
            let runs = make_runs(&plan, self.ordered);
            let mut retry: Vec<usize> = Vec::new();
            for (run, o) in self.run_all(r, runs, table.as_deref()) {
                totals.n += o.n;
                totals.modified += o.modified;
                totals.upserted.extend(o.upserted);
                for (i, e) in o.errors {
                    totals.errors.insert(i, e);
                }
                retry.extend(o.stale.iter().copied());
                if let Run::Broadcast(i, _) = &run {
                    applied_on.entry(*i).or_default().extend(o.applied_shards);
                }
                touched.extend(o.touched);
            }
            if self.ordered && (stop || !totals.errors.is_empty()) {
                break;
            }
            if retry.is_empty() {
                break;
            }
            stale_rounds += 1;
            if stale_rounds >= MAX_STALE_RETRIES {
                for i in retry {
                    let e = DocError::with_code(
                        13388,
                        "StaleConfig",
                        format!("routing for {ns} kept changing"),
                    );
                    totals.errors.insert(i, error_doc(i, &e));
                }
                break;
            }
            r.reload(ns)?;
            retry.sort_unstable();
            retry.dedup();
            pending = retry;
        }
        Ok((totals, touched))
    }

    /// Each pending statement's target in `table` (`None`: unsharded, on the `primary`),
    /// broadcasts without the shards that applied them already. A statement that cannot be
    /// targeted is an error in `totals`; true when it stops an ordered batch.
    fn plan(
        &self,
        pending: &[usize],
        table: Option<&CollSnapshot>,
        primary: &str,
        applied_on: &BTreeMap<usize, Vec<String>>,
        totals: &mut Totals,
    ) -> (Vec<(usize, Target)>, bool) {
        let mut plan: Vec<(usize, Target)> = Vec::new();
        for &i in pending {
            let t = match table {
                None => Ok(Target::One(primary.to_string(), None)),
                Some(t) => target(self.kind, &self.stmts[i], t),
            };
            match t {
                Ok(Target::All(shards)) => {
                    let done = applied_on.get(&i).cloned().unwrap_or_default();
                    plan.push((
                        i,
                        Target::All(shards.into_iter().filter(|s| !done.contains(s)).collect()),
                    ));
                }
                Ok(t) => plan.push((i, t)),
                Err(e) => {
                    totals.errors.insert(i, error_doc(i, &e));
                    if self.ordered {
                        return (plan, true);
                    }
                }
            }
        }
        (plan, false)
    }

    /// Carries out the runs: ordered, one after another up to the first error or stale
    /// refusal; unordered, in parallel.
    fn run_all(
        &self,
        r: &Router,
        runs: Vec<Run>,
        table: Option<&CollSnapshot>,
    ) -> Vec<(Run, RunOutcome)> {
        let exec = |run: &Run| -> RunOutcome { self.execute(r, run, table) };
        if self.ordered {
            let mut v = Vec::new();
            for run in runs {
                let o = exec(&run);
                let failed = !o.errors.is_empty();
                let stale = !o.stale.is_empty();
                v.push((run, o));
                if failed || stale {
                    break;
                }
            }
            v
        } else if runs.len() == 1 {
            runs.into_iter()
                .map(|run| {
                    let o = exec(&run);
                    (run, o)
                })
                .collect()
        } else {
            std::thread::scope(|s| {
                let hs: Vec<_> = runs
                    .into_iter()
                    .map(|run| {
                        s.spawn(move || {
                            let o = exec(&run);
                            (run, o)
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().expect("write run panicked"))
                    .collect()
            })
        }
    }
}

impl Totals {
    /// The client's reply.
    fn reply(self, kind: Kind) -> Document {
        let mut out = doc! {"n": self.n as i32};
        if kind == Kind::Update {
            out.insert("nModified", self.modified as i32);
            if !self.upserted.is_empty() {
                out.insert("upserted", self.upserted);
            }
        }
        if !self.errors.is_empty() {
            out.insert(
                "writeErrors",
                self.errors
                    .into_values()
                    .map(Bson::Document)
                    .collect::<Vec<_>>(),
            );
        }
        out
    }
}

fn error_doc(i: usize, e: &DocError) -> Document {
    let mut d = doc! {"index": i as i32, "code": e.code, "errmsg": e.message.clone()};
    if let Some(extra) = &e.extra {
        for (k, v) in extra.iter() {
            if !d.contains_key(k) {
                d.insert(k.clone(), v.clone());
            }
        }
    }
    d
}

/// Statements sent together: to one shard (in batch order), or one statement to many.
#[derive(Debug)]
enum Run {
    Single(String, Vec<(usize, Option<Vec<u8>>)>),
    Broadcast(usize, Vec<String>),
}

fn make_runs(plan: &[(usize, Target)], ordered: bool) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, t) in plan {
        match t {
            Target::All(shards) => runs.push(Run::Broadcast(*i, shards.clone())),
            Target::One(shard, chunk) => {
                let joined = if ordered {
                    match runs.last_mut() {
                        Some(Run::Single(s, v)) if s == shard => {
                            v.push((*i, chunk.clone()));
                            true
                        }
                        _ => false,
                    }
                } else {
                    match runs
                        .iter_mut()
                        .find(|r| matches!(r, Run::Single(s, _) if s == shard))
                    {
                        Some(Run::Single(_, v)) => {
                            v.push((*i, chunk.clone()));
                            true
                        }
                        _ => false,
                    }
                };
                if !joined {
                    runs.push(Run::Single(shard.clone(), vec![(*i, chunk.clone())]));
                }
            }
        }
    }
    runs
}

#[derive(Default)]
struct RunOutcome {
    n: i64,
    modified: i64,
    upserted: Vec<Bson>,
    errors: Vec<(usize, Document)>,
    /// Statements a shard refused as stale (to re-target).
    stale: Vec<usize>,
    applied_shards: Vec<String>,
    /// (chunk, bytes) of applied targeted statements, for auto-split.
    touched: Vec<(Vec<u8>, i64)>,
}

impl Batch<'_> {
    /// The shard command carrying the statements `idx`.
    fn command(&self, idx: &[usize]) -> Document {
        let mut cmd = self.base.clone();
        let name = match self.kind {
            Kind::Insert => "insert",
            Kind::Update => "update",
            Kind::Delete => "delete",
        };
        let mut c = doc! {name: self.coll};
        c.extend(std::mem::take(&mut cmd));
        c.insert(
            self.field,
            idx.iter()
                .map(|&i| Bson::Document(self.stmts[i].clone()))
                .collect::<Vec<_>>(),
        );
        c.insert("ordered", self.ordered);
        c.insert("$db", self.db);
        if let Some((lsid, txn)) = &self.session {
            c.insert("lsid", lsid.clone());
            c.insert("txnNumber", txn.clone());
            c.insert(
                "stmtIds",
                idx.iter()
                    .map(|&i| Bson::Int32(i as i32))
                    .collect::<Vec<_>>(),
            );
        }
        c
    }

    /// Sends one run and gathers what its shards replied.
    fn execute(&self, r: &Router, run: &Run, table: Option<&CollSnapshot>) -> RunOutcome {
        let mut out = RunOutcome::default();
        match run {
            Run::Single(shard, list) => {
                let idx: Vec<usize> = list.iter().map(|(i, _)| *i).collect();
                let reply = r.send_versioned(shard, self.command(&idx), table);
                let applied = out.absorb(reply, &idx, shard, self.ordered);
                for (i, chunk) in list.iter().take(applied) {
                    if let Some(c) = chunk {
                        out.touched
                            .push((c.clone(), written_bytes(self.kind, &self.stmts[*i])));
                    }
                }
            }
            Run::Broadcast(i, shards) => {
                let cmd = self.command(&[*i]);
                let replies = super::read::send_parallel(r, shards, &cmd, table);
                for (sh, rep) in replies {
                    out.absorb(rep, &[*i], &sh, self.ordered);
                }
                out.stale.dedup();
                out.errors.truncate(1);
            }
        }
        out
    }
}

impl RunOutcome {
    /// Adds one shard's reply to the statements `idx`; returns how many of them (from the
    /// first) were applied before its first write error.
    fn absorb(
        &mut self,
        reply: DocResult<Document>,
        idx: &[usize],
        shard: &str,
        ordered: bool,
    ) -> usize {
        let reply = match reply {
            Ok(rep) if is_ok(&rep) => rep,
            Ok(rep) => {
                let e = reply_error(&rep);
                if is_stale(e.code) {
                    self.stale.extend_from_slice(idx);
                } else {
                    self.errors.push((idx[0], error_doc(idx[0], &e)));
                }
                return 0;
            }
            Err(e) => {
                self.errors.push((idx[0], error_doc(idx[0], &e)));
                return 0;
            }
        };
        self.n += crate::int_field(reply.get("n"));
        self.modified += crate::int_field(reply.get("nModified"));
        if let Ok(list) = reply.get_array("upserted") {
            for u in list.iter().filter_map(Bson::as_document) {
                let j = crate::int_field(u.get("index")) as usize;
                let mut u = u.clone();
                u.insert("index", idx.get(j).copied().unwrap_or(idx[0]) as i32);
                self.upserted.push(Bson::Document(u));
            }
        }
        let mut first_error = idx.len();
        if let Ok(list) = reply.get_array("writeErrors") {
            for w in list.iter().filter_map(Bson::as_document) {
                let j = crate::int_field(w.get("index")) as usize;
                first_error = first_error.min(j);
                let i = idx.get(j).copied().unwrap_or(idx[0]);
                if is_stale(w.get_i32("code").unwrap_or(0)) {
                    // Not applied: ordered, neither was anything after it.
                    if ordered {
                        self.stale.extend_from_slice(&idx[j..]);
                    } else {
                        self.stale.push(i);
                    }
                    continue;
                }
                let mut w = w.clone();
                w.insert("index", i as i32);
                self.errors.push((i, w));
            }
        }
        self.applied_shards.push(shard.to_string());
        first_error
    }
}

/// What a statement adds to its chunk's bytes-written counter (3.6 counts the document for
/// inserts and the update's object size for updates).
fn written_bytes(kind: Kind, stmt: &Document) -> i64 {
    let size = |d: &Document| bson::to_vec(d).map(|v| v.len() as i64).unwrap_or(0);
    match kind {
        Kind::Insert => size(stmt),
        Kind::Update => stmt.get_document("u").map(size).unwrap_or(0),
        Kind::Delete => 0,
    }
}

pub fn find_and_modify(r: &Router, call: &CommandCall<'_>) -> DocResult<Document> {
    let (db, coll) = namespace(call)?;
    let ns = format!("{db}.{coll}");
    let query = call.cmd.get_document("query").cloned().unwrap_or_default();
    let upsert = call.cmd.get_bool("upsert").unwrap_or(false);
    let dbe = r.database(&db, upsert)?;
    let mut cmd = forwardable(call.cmd, &[]);
    if let (Some(l), Some(t)) = (call.cmd.get("lsid"), call.cmd.get("txnNumber")) {
        cmd.insert("lsid", l.clone());
        cmd.insert("txnNumber", t.clone());
        cmd.insert("stmtId", 0);
    }
    for _ in 0..MAX_STALE_RETRIES {
        let (table, shards) = targets(r, &db, &ns, &query)?;
        let (shard, chunk) = match &table {
            Some(t) => {
                let values = t.key.equality(&query).ok_or_else(|| {
                    shard_key_missing(t, &format!("query for sharded findAndModify {query}"))
                })?;
                let pos = t.key.encode(&t.key.routing_key(&values));
                let c = t.chunk_at(&pos).expect("chunks tile the key space");
                (c.shard.clone(), Some(c.min_enc.clone()))
            }
            None => match (shards.first(), &dbe) {
                (Some(s), _) => (s.clone(), None),
                (None, _) => {
                    return Ok(
                        doc! {"lastErrorObject": {"n": 0, "updatedExisting": false}, "value": Bson::Null},
                    )
                }
            },
        };
        let rep = r.send_versioned(&shard, cmd.clone(), table.as_deref())?;
        if !is_ok(&rep) {
            let e = reply_error(&rep);
            if is_stale(e.code) {
                r.reload(&ns)?;
                continue;
            }
            return Err(e);
        }
        if let (Some(c), Ok(u)) = (chunk, call.cmd.get_document("update")) {
            let bytes = bson::to_vec(u).map(|v| v.len() as i64).unwrap_or(0);
            r.autosplit.note_writes(r, &ns, &[(c, bytes)]);
        }
        let mut rep = rep;
        rep.remove("ok");
        return Ok(rep);
    }
    Err(DocError::with_code(
        13388,
        "StaleConfig",
        format!("routing for {ns} kept changing"),
    ))
}
