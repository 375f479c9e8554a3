//! `aggregate` with a `$changeStream` first stage: the oplog as change events
//! (`docdb::oplog::change_stream`), kept as a tailable, awaitData cursor whose replies carry
//! `postBatchResumeToken`. A replica-set member only: a standalone has no oplog (40573).

use super::batch::{cursor_reply, CursorOpts, DEFAULT_FIRST_BATCH};
use super::call::Call;
use bson::{doc, Bson, Document};
use docdb::oplog::change_stream::{ChangeStream, ChangeStreamSpec, Lookup, Post, Target, Visible};
use docdb::{DocCursor, DocError, DocResult, FindQuery, Interrupt};
use std::sync::Arc;

/// The stages mongod lets follow `$changeStream`.
const STAGES_AFTER: &[&str] = &[
    "$match",
    "$project",
    "$addFields",
    "$set",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
    "$redact",
];

fn not_a_member() -> DocError {
    DocError::with_code(
        40573,
        "Location40573",
        "The $changeStream stage is only supported on replica sets",
    )
}

/// Opens the stream `pipeline` asks for on `coll` (None: `aggregate: 1`, the database or,
/// on `admin`, the cluster) and answers its first batch.
pub(crate) fn open(
    call: &Call,
    coll: Option<&str>,
    pipeline: &[Document],
    first: Option<usize>,
) -> DocResult<Document> {
    let (state, db) = (call.state, call.db);
    let rs = state.replset().ok_or_else(not_a_member)?.clone();
    majority_read_concern_only(call.cmd)?;
    let oplog = call.dbx().oplog().ok_or_else(not_a_member)?.clone();
    let stage = pipeline[0].get("$changeStream").unwrap_or(&Bson::Null);
    let spec = ChangeStreamSpec::parse(stage, target(db, coll, stage)?)?;
    let post = post_stages(pipeline[1..].to_vec())?;
    let visible: Visible = Arc::new(move || rs.majority_visible_ts());
    let (stream, handles) = ChangeStream::open(oplog, spec, visible, lookup(call), post)?;
    let cursor = DocCursor::tailing(Box::new(stream), handles.signal, handles.ended);
    let ns = match coll {
        Some(c) => format!("{db}.{c}"),
        None => format!("{db}.$cmd.aggregate"),
    };
    cursor_reply(
        state,
        &ns,
        cursor,
        first.unwrap_or(DEFAULT_FIRST_BATCH),
        CursorOpts {
            tailable: true,
            await_data: true,
            resume_token: Some(handles.position),
            ..Default::default()
        },
        "firstBatch",
    )
}

/// A stream reads what a majority holds: an explicit read concern other than `majority` is
/// refused (mongod's InvalidOptions), none is taken as `majority`.
fn majority_read_concern_only(cmd: &Document) -> DocResult<()> {
    let level = match cmd.get("readConcern") {
        Some(Bson::Document(rc)) => rc.get_str("level").ok(),
        _ => None,
    };
    match level {
        None | Some("majority") => Ok(()),
        Some(other) => Err(DocError::with_code(
            72,
            "InvalidOptions",
            format!("$changeStream only supports readConcern level majority, not '{other}'"),
        )),
    }
}

/// What the stream watches, with mongod's refusals of internal namespaces.
fn target(db: &str, coll: Option<&str>, stage: &Bson) -> DocResult<Target> {
    let invalid = |msg: String| DocError::with_code(73, "InvalidNamespace", msg);
    let cluster =
        matches!(stage, Bson::Document(d) if d.get_bool("allChangesForCluster") == Ok(true));
    match coll {
        None if cluster && db == "admin" => Ok(Target::Cluster),
        _ if matches!(db, "admin" | "config" | "local") && !cluster => Err(invalid(format!(
            "$changeStream may not be opened on the internal {db} database"
        ))),
        Some(c) if c.starts_with("system.") => Err(invalid(format!(
            "$changeStream may not be opened on the internal {db}.{c} collection"
        ))),
        Some(c) => Ok(Target::Collection {
            db: db.to_string(),
            coll: c.to_string(),
        }),
        None => Ok(Target::Database(db.to_string())),
    }
}

/// The stages after `$changeStream`, run on each event as it is read.
fn post_stages(rest: Vec<Document>) -> DocResult<Post> {
    for stage in &rest {
        let name = stage.keys().next().map(String::as_str).unwrap_or("");
        if !STAGES_AFTER.contains(&name) {
            // A stage mongod does not know is Unrecognized pipeline stage name (40324)
            // before it is one a change stream does not permit.
            query::aggregate::validate_pipeline(std::slice::from_ref(stage)).or_else(|e| {
                if e.code == 40324 {
                    Err(e)
                } else {
                    Ok(())
                }
            })?;
            return Err(DocError::with_code(
                40602,
                "Location40602",
                format!("{name} is not permitted in a $changeStream pipeline"),
            ));
        }
    }
    let no_collections = |name: &str| -> DocResult<Vec<Document>> {
        Err(DocError::internal_error(format!(
            "a change stream's stages read no collection ({name})"
        )))
    };
    Ok(Box::new(move |event| {
        if rest.is_empty() {
            return Ok(vec![event]);
        }
        let input = Box::new(std::iter::once(Ok(event)));
        query::aggregate::run_pipeline(&rest, input, &no_collections, &Interrupt::none())
    }))
}

/// `fullDocument: "updateLookup"`: the document as it is now, by `_id`.
fn lookup(call: &Call) -> Lookup {
    let db = call.dbx().clone();
    Arc::new(move |dbname, coll, id| {
        let q = FindQuery {
            filter: doc! {"_id": id.clone()},
            limit: Some(1),
            ..Default::default()
        };
        db.find(dbname, coll, &q)?.next().transpose()
    })
}

/// The errors after which a driver resumes a change stream (the change-streams spec's
/// "Resumable Error", as mongod 4.4+ labels them): network, not-primary, shutdown and
/// stale-routing errors, `RetryChangeStream` and `FailedToSatisfyReadPreference`.
const RESUMABLE_CODES: &[i32] = &[
    6,     // HostUnreachable
    7,     // HostNotFound
    63,    // StaleShardVersion
    89,    // NetworkTimeout
    91,    // ShutdownInProgress
    133,   // FailedToSatisfyReadPreference
    150,   // StaleEpoch
    189,   // PrimarySteppedDown
    234,   // RetryChangeStream
    262,   // ExceededTimeLimit
    9001,  // SocketException
    10107, // NotWritablePrimary
    11600, // InterruptedAtShutdown
    11602, // InterruptedDueToReplStateChange
    13388, // StaleConfig
    13435, // NotPrimaryNoSecondaryOk
    13436, // NotPrimaryOrSecondary
];

/// The label mongod puts on a resumable error of a getMore on a change stream's cursor.
pub(crate) const RESUMABLE_LABEL: &str = "ResumableChangeStreamError";

/// A change stream getMore's error, with `ResumableChangeStreamError` among its
/// `errorLabels` when a driver may resume after it.
pub(crate) fn label_get_more_error(mut e: DocError) -> DocError {
    if !RESUMABLE_CODES.contains(&e.code) {
        return e;
    }
    let extra = e.extra.get_or_insert_with(Default::default);
    let mut labels = match extra.remove("errorLabels") {
        Some(Bson::Array(a)) => a,
        _ => Vec::new(),
    };
    labels.push(Bson::String(RESUMABLE_LABEL.into()));
    extra.insert("errorLabels", labels);
    e
}
