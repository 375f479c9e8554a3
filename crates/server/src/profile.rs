//! The database profiler: the `profile` command and the `<db>.system.profile` collection, as
//! mongod's (https://www.mongodb.com/docs/manual/tutorial/manage-the-database-profiler/).
//!
//! - Levels per database: 0 off, 1 operations slower than `slowms` (sampled at `sampleRate`),
//!   or, when a `filter` is set, the operations whose profile entry matches it; 2 every
//!   operation. The config file's `operationProfiling.mode` (off, slowOp, all) is every
//!   database's starting level, and its `slowOpThresholdMs` and `slowOpSampleRate` are the
//!   starting `slowms` and `sampleRate`; `profile` changes them at run time (slowms,
//!   sampleRate and filter are server-wide, as mongod's).
//! - An entry is written after the command replied, through the ordinary insert path, into
//!   `system.profile`: a capped collection of 1 MiB created on the first entry (mongod's
//!   default size). Entries have mongod's shape: `op`, `ns`, `command`, `keysExamined`,
//!   `docsExamined`, `nreturned`/`ninserted`/`nMatched`/`nModified`/`ndeleted`, `cursorid`,
//!   `planSummary`, `numYield`, `responseLength`, `protocol`, `millis`, `ts`, `client`,
//!   `allUsers`, `user`, and `ok: 0` with `errCode`/`errName`/`errMsg` on failure.
//! - Never profiled: the handshake and authentication commands (their payloads carry
//!   credentials), and writes of the profiler itself. A `pwd` in a command is shown as "xxx".

use crate::client::ConnInfo;
use crate::config::{ProfilingMode, ProfilingSettings};
use crate::spec::{OpKind, Spec};
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocError, DocResult, WriteOpts};
use parking_lot::Mutex;
use query::matcher::Matcher;
use std::collections::BTreeMap;

/// mongod's default `system.profile` size.
const PROFILE_BYTES: i64 = 1024 * 1024;
pub const PROFILE_COLL: &str = "system.profile";

struct Settings {
    slow_ms: i64,
    sample_rate: f64,
    /// The filter as given, and parsed.
    filter: Option<(Document, Matcher)>,
}

pub struct Profiler {
    /// Every database's level until `profile` sets its own.
    default_level: i32,
    levels: Mutex<BTreeMap<String, i32>>,
    settings: Mutex<Settings>,
}

/// What one finished command leaves for the profiler.
pub struct Finished<'a> {
    pub name: &'a str,
    /// The command's row in the command table (None: a command the server does not have).
    pub spec: Option<&'a Spec>,
    pub db: &'a str,
    pub cmd: &'a Document,
    pub reply: &'a Document,
    pub conn: &'a ConnInfo,
    pub millis: i64,
    pub scans: docdb::cursor::ExecTotals,
}

impl Profiler {
    pub fn new(cfg: &ProfilingSettings) -> Profiler {
        Profiler {
            default_level: match cfg.mode {
                ProfilingMode::Off => 0,
                ProfilingMode::SlowOp => 1,
                ProfilingMode::All => 2,
            },
            levels: Mutex::new(BTreeMap::new()),
            settings: Mutex::new(Settings {
                slow_ms: cfg.slow_op_threshold_ms.min(i64::MAX as u64) as i64,
                sample_rate: cfg.slow_op_sample_rate,
                filter: None,
            }),
        }
    }

    pub fn level(&self, db: &str) -> i32 {
        self.levels
            .lock()
            .get(db)
            .copied()
            .unwrap_or(self.default_level)
    }

    /// Whether an operation of `millis` is slow and sampled (the slow-query log's rule too).
    pub fn is_slow_sampled(&self, millis: i64) -> bool {
        let s = self.settings.lock();
        millis >= s.slow_ms && rand::random::<f64>() < s.sample_rate
    }

    /// The `profile` command: `{profile: level, slowms?, sampleRate?, filter?}`; level -1 reads
    /// the settings without changing them. Replies with the settings before the change.
    pub fn command(&self, db: &str, cmd: &Document) -> DocResult<Document> {
        let level = match cmd.get("profile").and_then(query::compare::Num::of) {
            Some(n) if n.as_i64_exact().is_some_and(|l| (-1..=2).contains(&l)) => {
                n.as_i64_exact().unwrap_or(-1) as i32
            }
            Some(_) => {
                return Err(DocError::bad_value(
                    "Invalid profiling level: must be -1 (read), 0, 1 or 2",
                ))
            }
            None => {
                return Err(DocError::type_mismatch(
                    "BSON field 'profile.profile' is the wrong type, expected a number",
                ))
            }
        };
        let slow_ms = match cmd.get("slowms") {
            None => None,
            Some(v) => Some(
                query::compare::Num::of(v)
                    .and_then(|n| n.as_i64_exact())
                    .ok_or_else(|| {
                        DocError::type_mismatch(
                            "BSON field 'profile.slowms' is the wrong type, expected an integer",
                        )
                    })?,
            ),
        };
        let sample_rate = match cmd.get("sampleRate") {
            None => None,
            Some(v) => {
                let r = query::compare::Num::of(v)
                    .map(|n| n.as_f64())
                    .ok_or_else(|| {
                        DocError::type_mismatch(
                            "BSON field 'profile.sampleRate' is the wrong type, expected a number",
                        )
                    })?;
                if !(0.0..=1.0).contains(&r) {
                    return Err(DocError::bad_value(
                        "'sampleRate' must be between 0.0 and 1.0 inclusive",
                    ));
                }
                Some(r)
            }
        };
        // `filter: "unset"` removes it; a document replaces it.
        let filter = match cmd.get("filter") {
            None => None,
            Some(Bson::String(s)) if s == "unset" => Some(None),
            Some(Bson::Document(f)) => Some(Some((f.clone(), Matcher::new(f)?))),
            Some(_) => {
                return Err(DocError::bad_value(
                    "'filter' must be an object, or the string 'unset'",
                ))
            }
        };
        let was = self.level(db);
        let mut s = self.settings.lock();
        let mut reply = doc! {"was": was, "slowms": s.slow_ms, "sampleRate": s.sample_rate};
        if let Some((f, _)) = &s.filter {
            reply.insert("filter", f.clone());
        }
        if level >= 0 {
            self.levels.lock().insert(db.to_string(), level);
        }
        if let Some(ms) = slow_ms {
            s.slow_ms = ms;
        }
        if let Some(r) = sample_rate {
            s.sample_rate = r;
        }
        if let Some(f) = filter {
            s.filter = f;
            reply.insert(
                "note",
                "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.",
            );
        }
        Ok(reply)
    }

    /// Writes the entry of a finished command when its database's level asks for it.
    pub fn record(&self, dbx: &DocDb, op: &Finished) {
        let level = self.level(op.db);
        if level == 0 || op.spec.is_some_and(|s| !s.profiled) {
            return;
        }
        let entry = entry(op);
        let profiled = level == 2 || {
            let s = self.settings.lock();
            match &s.filter {
                Some((_, m)) => m.matches(&entry),
                None => op.millis >= s.slow_ms && rand::random::<f64>() < s.sample_rate,
            }
        };
        if profiled {
            if let Err(e) = write(dbx, op.db, entry) {
                crate::log::warn(
                    "PROFILER",
                    &format!("could not write to {}.{PROFILE_COLL}: {e:?}", op.db),
                );
            }
        }
    }
}

/// Inserts an entry, creating `system.profile` (capped, 1 MiB) on the first one.
fn write(dbx: &DocDb, db: &str, entry: Document) -> DocResult<()> {
    let exists = dbx
        .list_collections(db)?
        .iter()
        .any(|c| c.name == PROFILE_COLL);
    if !exists {
        let options = doc! {"capped": true, "size": PROFILE_BYTES};
        match dbx.create_collection(db, PROFILE_COLL, &options) {
            Ok(()) => {}
            Err(e) if e.code == 48 => {} // another command created it meanwhile
            Err(e) => return Err(e),
        }
    }
    let out = dbx.insert(db, PROFILE_COLL, vec![entry], WriteOpts::default());
    match out.write_errors.into_iter().next() {
        Some(e) => Err(e.error),
        None => Ok(()),
    }
}

/// The profile entry of a finished command, in mongod's shape.
fn entry(op: &Finished) -> Document {
    let kind = op.spec.map_or(OpKind::Command, |s| s.op);
    let mut e = doc! {
        "op": kind.op_name(),
        "ns": crate::ops::namespace(op.name, op.db, op.cmd),
        "command": shown_command(op.cmd),
    };
    if let Some(plan) = &op.scans.plan_summary {
        e.insert("keysExamined", op.scans.keys_examined as i64);
        e.insert("docsExamined", op.scans.docs_examined as i64);
        e.insert("planSummary", plan.clone());
    }
    let n = op.reply.get("n").and_then(query::compare::Num::of);
    let n = n.and_then(|n| n.as_i64_exact()).unwrap_or(0);
    match kind {
        OpKind::Insert => {
            e.insert("ninserted", n);
        }
        OpKind::Remove => {
            e.insert("ndeleted", n);
        }
        OpKind::Update => {
            let upserted = op.reply.get_array("upserted").map_or(0, |u| u.len() as i64);
            e.insert("nMatched", n - upserted);
            e.insert(
                "nModified",
                op.reply
                    .get("nModified")
                    .and_then(query::compare::Num::of)
                    .and_then(|n| n.as_i64_exact())
                    .unwrap_or(0),
            );
            e.insert("nUpserted", upserted);
        }
        _ => {}
    }
    if let Ok(c) = op.reply.get_document("cursor") {
        let batch = c
            .get_array("firstBatch")
            .or_else(|_| c.get_array("nextBatch"))
            .map_or(0, |b| b.len() as i64);
        e.insert("nreturned", batch);
        let id = c.get_i64("id").unwrap_or(0);
        if id != 0 {
            e.insert("cursorid", id);
        } else {
            e.insert("cursorExhausted", true);
        }
    }
    let users: Vec<Bson> = crate::ops::users_of(op.conn)
        .into_iter()
        .map(|(u, d)| Bson::Document(doc! {"user": u, "db": d}))
        .collect();
    let user = crate::ops::users_of(op.conn)
        .first()
        .map(|(u, d)| format!("{u}@{d}"))
        .unwrap_or_default();
    e.insert("numYield", 0);
    e.insert(
        "responseLength",
        bson::to_vec(op.reply).map_or(0, |b| b.len() as i64),
    );
    e.insert("protocol", "op_msg");
    e.insert("millis", op.millis);
    e.insert("ts", bson::DateTime::now());
    e.insert("client", op.conn.peer.ip().to_string());
    e.insert("allUsers", users);
    e.insert("user", user);
    if op
        .reply
        .get("ok")
        .and_then(query::compare::Num::of)
        .map(|n| n.as_f64())
        == Some(0.0)
    {
        e.insert("ok", 0.0);
        for (from, to) in [
            ("code", "errCode"),
            ("codeName", "errName"),
            ("errmsg", "errMsg"),
        ] {
            if let Some(v) = op.reply.get(from) {
                e.insert(to, v.clone());
            }
        }
    }
    e
}

/// The command as the entry shows it: arrays cut short as currentOp's, a password hidden.
fn shown_command(cmd: &Document) -> Document {
    let mut shown = crate::ops::summary(cmd);
    if shown.contains_key("pwd") {
        shown.insert("pwd", "xxx");
    }
    shown
}
