//! Change streams: the oplog read as a stream of change events, as mongod's `$changeStream`
//! stage returns them (mongod 6+'s event shapes, expanded events and pre- and post-images
//! included). The stream reads the oplog after a position, turns each entry that concerns
//! its target into an event, and ends after an `invalidate`. It sees entries up to a bound the
//! caller gives (the majority commit point: an event never shows a write that may be rolled
//! back), and at the end of what it may see it yields nothing, ready to read again: the server
//! keeps it as a tailable, awaitData cursor. See docs/replication.md, "Change streams".

use super::{ts_of, ts_u64, Oplog, PRE_IMAGE};
use crate::tail::TailSignal;
use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use query::error::{DocError, DocResult};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Oplog entries read per scan.
const SCAN_ENTRIES: usize = 256;
/// Bytes of entries read per scan (at least one entry).
const SCAN_BYTES: usize = 4 << 20;
/// A resume token's `_data`: this prefix, the entry's `ts` (16 hex digits), and the kind.
const TOKEN_VERSION: &str = "FD01";

/// What a stream watches.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Collection {
        db: String,
        coll: String,
    },
    Database(String),
    /// `allChangesForCluster` on `admin`: every database but `admin`, `config` and `local`.
    Cluster,
}

/// `fullDocument`: what an update event carries of the document.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FullDocument {
    /// Nothing (a replace or insert event carries its document anyway).
    Default,
    /// The document as it is when the event is read (mongod's `updateLookup`).
    UpdateLookup,
    /// The document right after the update (its post-image: the entry's pre-image with the
    /// update applied), or null when the entry kept none.
    WhenAvailable,
    /// The post-image, or an error when the entry kept none.
    Required,
}

/// `fullDocumentBeforeChange`: what update, replace and delete events carry of the document
/// before the change (the entry's pre-image, kept with `changeStreamPreAndPostImages`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BeforeChange {
    Off,
    /// The pre-image, or null when the entry kept none.
    WhenAvailable,
    /// The pre-image, or an error when the entry kept none.
    Required,
}

/// What a token names: an event, or the stream's position where nothing matched (a
/// high-water mark), or an invalidate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TokenKind {
    Event = 0,
    HighWater = 1,
    Invalidate = 2,
}

/// Where a stream starts reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    /// After the newest entry when the stream opens.
    Now,
    /// After the entry at this `ts` (`resumeAfter`, `startAfter`).
    After(u64),
    /// At this `ts` or later (`startAtOperationTime`).
    At(u64),
    /// After operation `.1` of the transaction whose entry is at `.0` (a token of one of its
    /// events).
    AfterTxnOp(u64, u32),
}

/// A parsed `$changeStream` stage.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeStreamSpec {
    pub target: Target,
    pub full_document: FullDocument,
    pub before_change: BeforeChange,
    pub start: Start,
    /// `showExpandedEvents`: also `create`, `createIndexes`, `dropIndexes` and `modify`
    /// events, and `collectionUUID` and `operationDescription` on events (mongod 6).
    pub expanded: bool,
}

fn bad(code: i32, name: &'static str, msg: impl Into<String>) -> DocError {
    DocError::with_code(code, name, msg.into())
}

fn invalid_token(msg: impl Into<String>) -> DocError {
    bad(260, "InvalidResumeToken", msg)
}

/// The resume token of the entry at `ts`: `{_data: hex}`, opaque to drivers, ordered as the
/// oplog (a hex string of fixed width compares as the position it encodes).
fn token(ts: u64, kind: TokenKind) -> Document {
    doc! {"_data": format!("{TOKEN_VERSION}{ts:016X}{:02X}", kind as u8)}
}

/// The token of the event of operation `op` of the transaction whose entry is at `ts`: the
/// entry's, followed by the operation's place in it, so the events of one transaction are
/// ordered and a stream resumes between them.
fn txn_token(ts: u64, op: u32) -> Document {
    doc! {"_data": format!("{TOKEN_VERSION}{ts:016X}{:02X}{op:08X}", TokenKind::Event as u8)}
}

/// The `ts` and kind a token names, and the transaction operation's place when it is one's.
fn read_token(t: &Bson) -> DocResult<(u64, TokenKind, Option<u32>)> {
    let data = match t {
        Bson::Document(d) => d.get_str("_data").ok(),
        _ => None,
    }
    .ok_or_else(|| invalid_token(format!("a resume token is {{_data: <string>}}, not {t}")))?;
    let body = data
        .strip_prefix(TOKEN_VERSION)
        .filter(|b| (b.len() == 18 || b.len() == 26) && b.is_ascii())
        .ok_or_else(|| invalid_token(format!("'{data}' is not a resume token of this server")))?;
    let ts = u64::from_str_radix(&body[..16], 16);
    let kind = match u8::from_str_radix(&body[16..], 16) {
        Ok(0) => Some(TokenKind::Event),
        Ok(1) => Some(TokenKind::HighWater),
        Ok(2) => Some(TokenKind::Invalidate),
        _ => None,
    };
    let op = match body.get(18..) {
        Some("") => Ok(None),
        Some(op) => u32::from_str_radix(op, 16).map(Some),
        None => Ok(None),
    };
    match (ts, kind, op) {
        (Ok(ts), Some(kind), Ok(op)) => Ok((ts, kind, op)),
        _ => Err(invalid_token(format!("'{data}' is not a resume token"))),
    }
}

impl ChangeStreamSpec {
    /// Parses the stage's options for `target` (mongod's field names and codes).
    pub fn parse(stage: &Bson, target: Target) -> DocResult<ChangeStreamSpec> {
        let Bson::Document(opts) = stage else {
            return Err(bad(
                50808,
                "Location50808",
                "$changeStream stage expects a document as argument",
            ));
        };
        let mut spec = ChangeStreamSpec {
            target,
            full_document: FullDocument::Default,
            before_change: BeforeChange::Off,
            start: Start::Now,
            expanded: false,
        };
        let mut starts = 0;
        for (k, v) in opts {
            match k.as_str() {
                "fullDocument" => spec.full_document = full_document(v)?,
                "fullDocumentBeforeChange" => spec.before_change = before_change(v)?,
                "resumeAfter" | "startAfter" => {
                    starts += 1;
                    spec.start = resume_point(k, v)?;
                }
                "startAtOperationTime" => {
                    starts += 1;
                    let Bson::Timestamp(ts) = v else {
                        return Err(DocError::type_mismatch(
                            "startAtOperationTime must be a timestamp",
                        ));
                    };
                    spec.start = Start::At(ts_u64(*ts));
                }
                "allChangesForCluster" => cluster_flag(&spec.target, v)?,
                "showExpandedEvents" => match v {
                    Bson::Boolean(b) => spec.expanded = *b,
                    _ => return Err(DocError::type_mismatch("showExpandedEvents must be a bool")),
                },
                other => {
                    return Err(bad(
                        40415,
                        "Location40415",
                        format!("BSON field '$changeStream.{other}' is an unknown field."),
                    ))
                }
            }
        }
        if starts > 1 {
            return Err(bad(
                40674,
                "Location40674",
                "Only one type of resume option is allowed, but multiple were found.",
            ));
        }
        Ok(spec)
    }
}

fn full_document(v: &Bson) -> DocResult<FullDocument> {
    match v.as_str() {
        Some("default") => Ok(FullDocument::Default),
        Some("updateLookup") => Ok(FullDocument::UpdateLookup),
        Some("whenAvailable") => Ok(FullDocument::WhenAvailable),
        Some("required") => Ok(FullDocument::Required),
        _ => Err(DocError::bad_value(format!(
            "unrecognized value for fullDocument: {v}"
        ))),
    }
}

fn before_change(v: &Bson) -> DocResult<BeforeChange> {
    match v.as_str() {
        Some("off") => Ok(BeforeChange::Off),
        Some("whenAvailable") => Ok(BeforeChange::WhenAvailable),
        Some("required") => Ok(BeforeChange::Required),
        _ => Err(DocError::bad_value(format!(
            "unrecognized value for fullDocumentBeforeChange: {v}"
        ))),
    }
}

/// `resumeAfter` / `startAfter`: after the token's entry. Only `startAfter` may start after an
/// invalidate (the stream then begins after the drop or rename that caused it).
fn resume_point(option: &str, v: &Bson) -> DocResult<Start> {
    let (ts, kind, op) = read_token(v)?;
    if let Some(op) = op {
        return Ok(Start::AfterTxnOp(ts, op));
    }
    if kind == TokenKind::Invalidate && option == "resumeAfter" {
        return Err(invalid_token(
            "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.",
        ));
    }
    Ok(Start::After(ts))
}

fn cluster_flag(target: &Target, v: &Bson) -> DocResult<()> {
    match (v, target) {
        (Bson::Boolean(true), Target::Cluster) | (Bson::Boolean(false), _) => Ok(()),
        (Bson::Boolean(true), _) => Err(bad(
            72,
            "InvalidOptions",
            "A change stream with 'allChangesForCluster: true' must be opened on the 'admin' database with {aggregate: 1}",
        )),
        _ => Err(DocError::type_mismatch("allChangesForCluster must be a bool")),
    }
}

/// Looks a document up by collection and `_id` when an update event is read
/// (`fullDocument: "updateLookup"`); `None` when it is gone.
pub type Lookup = Arc<dyn Fn(&str, &str, &Bson) -> DocResult<Option<Document>> + Send + Sync>;
/// The newest `ts` the stream may show (the majority commit point's).
pub type Visible = Arc<dyn Fn() -> u64 + Send + Sync>;
/// The stages after `$changeStream`, run on each event: none, one or several documents.
pub type Post = Box<dyn Fn(Document) -> DocResult<Vec<Document>> + Send>;

/// A change stream being read: an iterator of events that yields nothing at the end of what
/// it may see, and can be read again later.
pub struct ChangeStream {
    oplog: Arc<Oplog>,
    spec: ChangeStreamSpec,
    /// The last entry read: the next scan starts after it.
    after: u64,
    visible: Visible,
    lookup: Lookup,
    post: Post,
    ready: VecDeque<Document>,
    /// The token of the stream's position (`postBatchResumeToken`): the last event returned,
    /// or the last entry read when nothing after that event matched.
    position: Arc<Mutex<Document>>,
    /// The `ts` `position` names.
    position_ts: u64,
    /// Set once the events up to an invalidate are returned: the stream has ended.
    ended: Arc<AtomicBool>,
    /// An entry made an invalidate: nothing after it is read.
    invalidated: bool,
    /// Resuming inside a transaction: its entry's `ts` and the last operation already shown.
    skip: Option<(u64, u32)>,
}

/// What the server keeps beside a change stream's cursor.
pub struct StreamHandles {
    pub position: Arc<Mutex<Document>>,
    pub ended: Arc<AtomicBool>,
    pub signal: Arc<TailSignal>,
}

impl ChangeStream {
    /// Opens the stream. A start the oplog no longer holds fails with ChangeStreamHistoryLost
    /// (286), as mongod's.
    pub fn open(
        oplog: Arc<Oplog>,
        spec: ChangeStreamSpec,
        visible: Visible,
        lookup: Lookup,
        post: Post,
    ) -> DocResult<(ChangeStream, StreamHandles)> {
        let after = match spec.start {
            // Events after the stream opens, as mongod's start at the current cluster time.
            Start::Now => ts_u64(oplog.last_ts()),
            Start::After(ts) => ts,
            Start::At(ts) | Start::AfterTxnOp(ts, _) => ts.saturating_sub(1),
        };
        let skip = match spec.start {
            Start::AfterTxnOp(ts, op) => Some((ts, op)),
            _ => None,
        };
        let resumed = !matches!(spec.start, Start::Now);
        if resumed {
            check_history(&oplog, after)?;
        }
        let position = Arc::new(Mutex::new(token(after, TokenKind::HighWater)));
        let ended = Arc::new(AtomicBool::new(false));
        let handles = StreamHandles {
            position: position.clone(),
            ended: ended.clone(),
            signal: oplog.signal.clone(),
        };
        let stream = ChangeStream {
            oplog,
            spec,
            after,
            visible,
            lookup,
            post,
            ready: VecDeque::new(),
            position,
            position_ts: after,
            ended,
            invalidated: false,
            skip,
        };
        Ok((stream, handles))
    }

    /// Reads the next entries the stream may see into `ready`; false when there were none.
    fn scan(&mut self) -> DocResult<bool> {
        let bound = (self.visible)();
        if bound <= self.after {
            return Ok(false);
        }
        let entries = self
            .oplog
            .entries_after(ts_of(self.after), SCAN_ENTRIES, SCAN_BYTES)?;
        let mut read = false;
        for entry in entries {
            let ts = entry_ts(&entry)?;
            if ts > bound {
                break;
            }
            debug_assert!(ts > self.after, "the oplog is read in ts order");
            read = true;
            self.after = ts;
            for event in self.events_of(&entry, ts)? {
                if self.skip.is_some_and(|s| s.0 == ts) && self.shown(&event) {
                    continue;
                }
                if event.get_str("operationType") == Ok("invalidate") {
                    self.invalidated = true;
                }
                self.push(event)?;
            }
            if self.invalidated {
                break;
            }
        }
        Ok(read)
    }

    /// Whether a transaction's event was shown before the stream resumed (its operation is at
    /// or before the resume token's).
    fn shown(&self, event: &Document) -> bool {
        let op = event
            .get("_id")
            .and_then(|id| read_token(id).ok())
            .and_then(|t| t.2);
        matches!((self.skip, op), (Some((_, last)), Some(op)) if op <= last)
    }

    /// Runs the stages after `$changeStream` on `event` and queues what they return; the
    /// event's `_id` (its token) must come through them unchanged, as mongod requires.
    fn push(&mut self, event: Document) -> DocResult<()> {
        let id = event.get("_id").cloned();
        for out in (self.post)(event)? {
            if out.get("_id") != id.as_ref() {
                return Err(bad(
                    280,
                    "ChangeStreamFatalError",
                    "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.",
                ));
            }
            self.ready.push_back(out);
        }
        Ok(())
    }

    /// The events one entry makes for this stream (none, one, or an event and an invalidate).
    fn events_of(&self, entry: &Document, ts: u64) -> DocResult<Vec<Document>> {
        let op = entry.get_str("op").unwrap_or("n");
        let ns = entry.get_str("ns").unwrap_or("");
        let Some((db, coll)) = ns.split_once('.') else {
            return Ok(vec![]);
        };
        let o = entry
            .get_document("o")
            .map_err(|_| DocError::internal_error(format!("oplog entry without o: {entry}")))?;
        let head = EventHead {
            ts,
            wall: entry.get("wall").cloned(),
            txn_op: None,
            collection_uuid: self.uuid_of(entry),
        };
        // A transaction's entry is on `admin`; its operations name their own collections.
        if let ("c", Ok(ops)) = (op, o.get_array("applyOps")) {
            return self.txn_events(&head, entry, ops);
        }
        if !self.watches_db(db) {
            return Ok(vec![]);
        }
        match op {
            "i" | "u" | "d" if self.watches_coll(coll) => self
                .document_event(op, &head, (db, coll), entry, o)
                .map(|e| e.into_iter().collect()),
            "c" => Ok(self.command_events(&head, db, o)),
            _ => Ok(vec![]),
        }
    }

    /// The events of a committed transaction's entry: one per operation this stream watches,
    /// in order, each with the transaction's `lsid` and `txnNumber`, as mongod shows them.
    fn txn_events(
        &self,
        head: &EventHead,
        entry: &Document,
        ops: &[Bson],
    ) -> DocResult<Vec<Document>> {
        let mut out = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let bad_op = || DocError::internal_error(format!("an applyOps operation {op}"));
            let op = op.as_document().ok_or_else(bad_op)?;
            let kind = op.get_str("op").map_err(|_| bad_op())?;
            let ns = op.get_str("ns").map_err(|_| bad_op())?;
            let o = op.get_document("o").map_err(|_| bad_op())?;
            let Some((db, coll)) = ns.split_once('.') else {
                continue;
            };
            if !(self.watches_db(db) && self.watches_coll(coll)) {
                continue;
            }
            let head = EventHead {
                txn_op: Some(u32::try_from(i).map_err(|_| bad_op())?),
                collection_uuid: self.uuid_of(op),
                ..head.clone()
            };
            if let Some(mut e) = self.document_event(kind, &head, (db, coll), op, o)? {
                for field in ["lsid", "txnNumber"] {
                    if let Some(v) = entry.get(field) {
                        e.insert(field, v.clone());
                    }
                }
                out.push(e);
            }
        }
        Ok(out)
    }

    /// The entry's collection UUID (`ui`), when the stream shows expanded events.
    fn uuid_of(&self, entry: &Document) -> Option<Bson> {
        entry.get("ui").filter(|_| self.spec.expanded).cloned()
    }

    fn watches_db(&self, db: &str) -> bool {
        match &self.spec.target {
            Target::Collection { db: d, .. } | Target::Database(d) => d == db,
            Target::Cluster => !matches!(db, "admin" | "config" | "local"),
        }
    }

    /// Whether the stream shows writes to collection `coll` of a database it watches.
    fn watches_coll(&self, coll: &str) -> bool {
        match &self.spec.target {
            Target::Collection { coll: c, .. } => c == coll,
            Target::Database(_) | Target::Cluster => !coll.starts_with("system."),
        }
    }

    /// An insert, update, replace or delete event.
    fn document_event(
        &self,
        op: &str,
        head: &EventHead,
        (db, coll): (&str, &str),
        entry: &Document,
        o: &Document,
    ) -> DocResult<Option<Document>> {
        let key = match entry.get_document("o2") {
            Ok(k) => doc! {"_id": k.get("_id").cloned().unwrap_or(Bson::Null)},
            Err(_) => doc! {"_id": o.get("_id").cloned().unwrap_or(Bson::Null)},
        };
        let ns = doc! {"db": db, "coll": coll};
        let mut e = head.start(match op {
            "i" => "insert",
            "d" => "delete",
            _ if is_diff(o) => "update",
            _ => "replace",
        });
        let pre_image = entry.get_document(PRE_IMAGE).ok();
        if let Some(full) = self.full_document(op, (db, coll), &key, o, pre_image)? {
            e.insert("fullDocument", full);
        }
        let before = match op {
            "i" => None,
            _ => self.before_change(pre_image, &key)?,
        };
        e.insert("ns", ns);
        e.insert("documentKey", key);
        if op == "u" && is_diff(o) {
            e.insert(
                "updateDescription",
                update_description(o, self.spec.expanded)?,
            );
        }
        if let Some(before) = before {
            e.insert("fullDocumentBeforeChange", before);
        }
        Ok(Some(e))
    }

    /// An event's `fullDocument`: an insert's or replace's document; for an update, as
    /// `fullDocument` asks (the document now, or its post-image); none for a delete.
    fn full_document(
        &self,
        op: &str,
        (db, coll): (&str, &str),
        key: &Document,
        o: &Document,
        pre_image: Option<&Document>,
    ) -> DocResult<Option<Bson>> {
        let post_image = || {
            pre_image
                .map(|pre| super::diff::apply_update_object(pre, o))
                .transpose()
        };
        Ok(match (op, self.spec.full_document) {
            ("i", _) => Some(Bson::Document(o.clone())),
            ("u", _) if !is_diff(o) => Some(Bson::Document(o.clone())),
            ("u", FullDocument::UpdateLookup) => {
                let id = key.get("_id").cloned().unwrap_or(Bson::Null);
                let now = (self.lookup)(db, coll, &id)?;
                Some(now.map_or(Bson::Null, Bson::Document))
            }
            ("u", FullDocument::WhenAvailable) => {
                Some(post_image()?.map_or(Bson::Null, Bson::Document))
            }
            ("u", FullDocument::Required) => match post_image()? {
                Some(post) => Some(Bson::Document(post)),
                None => return Err(image_missing("post-image", key)),
            },
            _ => None,
        })
    }

    /// An update's, replace's or delete's `fullDocumentBeforeChange`, as the stream asks.
    fn before_change(
        &self,
        pre_image: Option<&Document>,
        key: &Document,
    ) -> DocResult<Option<Bson>> {
        match (self.spec.before_change, pre_image) {
            (BeforeChange::Off, _) => Ok(None),
            (_, Some(pre)) => Ok(Some(Bson::Document(pre.clone()))),
            (BeforeChange::WhenAvailable, None) => Ok(Some(Bson::Null)),
            (BeforeChange::Required, None) => Err(image_missing("pre-image", key)),
        }
    }

    /// drop, rename and dropDatabase events, and the invalidate they cause.
    fn command_events(&self, head: &EventHead, db: &str, o: &Document) -> Vec<Document> {
        let mut out = Vec::new();
        if let Ok(coll) = o.get_str("drop") {
            if self.watches_coll(coll) {
                let mut e = head.start("drop");
                e.insert("ns", doc! {"db": db, "coll": coll});
                out.push(e);
                if matches!(self.spec.target, Target::Collection { .. }) {
                    out.push(head.invalidate());
                }
            }
        } else if let (Ok(from), Ok(to)) = (o.get_str("renameCollection"), o.get_str("to")) {
            out.extend(self.rename_events(head, (from, to), o.get("dropTarget")));
        } else if let Some(e) = self.expanded_event(head, db, o) {
            out.push(e);
        } else if o.contains_key("dropDatabase") {
            match &self.spec.target {
                Target::Collection { .. } => {}
                Target::Database(_) | Target::Cluster => {
                    let mut e = head.start("dropDatabase");
                    e.insert("ns", doc! {"db": db});
                    out.push(e);
                    if matches!(self.spec.target, Target::Database(_)) {
                        out.push(head.invalidate());
                    }
                }
            }
        }
        out
    }

    fn rename_events(
        &self,
        head: &EventHead,
        (from, to): (&str, &str),
        drop_target: Option<&Bson>,
    ) -> Vec<Document> {
        let (Some((fdb, fcoll)), Some((tdb, tcoll))) = (from.split_once('.'), to.split_once('.'))
        else {
            return vec![];
        };
        if !self.watches_db(fdb) || !self.watches_coll(fcoll) {
            return vec![];
        }
        let mut e = head.start("rename");
        e.insert("ns", doc! {"db": fdb, "coll": fcoll});
        e.insert("to", doc! {"db": tdb, "coll": tcoll});
        if self.spec.expanded {
            let mut description = doc! {"to": {"db": tdb, "coll": tcoll}};
            if let Some(target @ Bson::Binary(_)) = drop_target {
                description.insert("dropTarget", target.clone());
            }
            e.insert("operationDescription", description);
        }
        let mut out = vec![e];
        if matches!(self.spec.target, Target::Collection { .. }) {
            out.push(head.invalidate());
        }
        out
    }
}

impl ChangeStream {
    /// With `showExpandedEvents`, the event of a `create`, `createIndexes`, `dropIndexes` or
    /// `collMod` entry on a collection the stream watches, its `operationDescription` made of
    /// the logged command's fields (mongod 6's shapes).
    fn expanded_event(&self, head: &EventHead, db: &str, o: &Document) -> Option<Document> {
        let (verb, arg) = o.iter().next()?;
        let kind = match verb.as_str() {
            "create" => "create",
            "createIndexes" => "createIndexes",
            "dropIndexes" => "dropIndexes",
            "collMod" => "modify",
            _ => return None,
        };
        let coll = arg.as_str()?;
        if !self.spec.expanded || !self.watches_coll(coll) {
            return None;
        }
        let rest: Document = o
            .iter()
            .skip(1)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let description = match kind {
            "createIndexes" => doc! {"indexes": [rest]},
            "dropIndexes" => {
                let names = match rest.get("index") {
                    Some(Bson::Array(a)) => a.clone(),
                    Some(one) => vec![one.clone()],
                    None => vec![],
                };
                let specs: Vec<Bson> = names.into_iter().map(|n| doc! {"name": n}.into()).collect();
                doc! {"indexes": specs}
            }
            _ => rest,
        };
        let mut e = head.start(kind);
        e.insert("ns", doc! {"db": db, "coll": coll});
        e.insert("operationDescription", description);
        Some(e)
    }
}

/// The fields every event of one entry shares.
#[derive(Clone)]
struct EventHead {
    ts: u64,
    wall: Option<Bson>,
    /// The operation's place in its transaction's entry, for a transaction's event.
    txn_op: Option<u32>,
    /// The collection's UUID, shown as `collectionUUID` (expanded events only).
    collection_uuid: Option<Bson>,
}

impl EventHead {
    fn start(&self, operation: &str) -> Document {
        self.with_kind(operation, TokenKind::Event)
    }

    fn invalidate(&self) -> Document {
        self.with_kind("invalidate", TokenKind::Invalidate)
    }

    fn with_kind(&self, operation: &str, kind: TokenKind) -> Document {
        let id = match self.txn_op {
            Some(op) => txn_token(self.ts, op),
            None => token(self.ts, kind),
        };
        let mut e = doc! {
            "_id": id,
            "operationType": operation,
            "clusterTime": ts_of(self.ts),
        };
        if let Some(w) = &self.wall {
            e.insert("wallTime", w.clone());
        }
        if let (Some(uuid), TokenKind::Event) = (&self.collection_uuid, kind) {
            e.insert("collectionUUID", uuid.clone());
        }
        e
    }
}

/// mongod's NoMatchingDocument for an image a stream requires and the entry did not keep.
fn image_missing(image: &str, key: &Document) -> DocError {
    bad(
        47,
        "NoMatchingDocument",
        format!(
            "Change stream was configured to require a {image} for all update, delete and \
             replace events, but the {image} was not found for the event of document {key} \
             (its collection keeps them with changeStreamPreAndPostImages: {{enabled: true}})"
        ),
    )
}

fn entry_ts(entry: &Document) -> DocResult<u64> {
    entry
        .get_timestamp("ts")
        .map(ts_u64)
        .map_err(|_| DocError::internal_error(format!("oplog entry without ts: {entry}")))
}

fn is_diff(o: &Document) -> bool {
    o.contains_key("$v") && o.contains_key("diff")
}

/// An update entry's `$v: 2` diff as an event's `updateDescription`: fields set (dotted paths
/// into embedded documents and arrays), fields removed, arrays cut short; with expanded
/// events, `disambiguatedPaths`.
fn update_description(o: &Document, expanded: bool) -> DocResult<Document> {
    let diff = o
        .get_document("diff")
        .map_err(|_| DocError::internal_error(format!("update entry without diff: {o}")))?;
    let mut d = Described::default();
    d.document(diff, &[]);
    let mut out = doc! {
        "updatedFields": d.updated,
        "removedFields": d.removed,
        "truncatedArrays": d.truncated,
    };
    if expanded && !d.ambiguous.is_empty() {
        out.insert("disambiguatedPaths", d.ambiguous);
    }
    Ok(out)
}

/// What a diff says, as an `updateDescription`'s parts.
#[derive(Default)]
struct Described {
    updated: Document,
    removed: Vec<Bson>,
    truncated: Vec<Bson>,
    /// mongod 6.1's `disambiguatedPaths`: each path with an array index or a numeric field
    /// name, as its components (an index as an integer, a field name as a string).
    ambiguous: Document,
}

/// One component of a path: a field name or an array index.
#[derive(Clone)]
enum Part {
    Field(String),
    Index(i32),
}

impl Described {
    /// The dotted path of `parts`, noted in `ambiguous` when a reader could misread it.
    fn path(&mut self, parts: &[Part]) -> String {
        let text: Vec<String> = parts
            .iter()
            .map(|p| match p {
                Part::Field(f) => f.clone(),
                Part::Index(i) => i.to_string(),
            })
            .collect();
        let path = text.join(".");
        let numeric = |f: &str| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit());
        let unclear = parts.iter().any(|p| match p {
            Part::Index(_) => true,
            Part::Field(f) => numeric(f),
        });
        if unclear {
            let components: Vec<Bson> = parts
                .iter()
                .map(|p| match p {
                    Part::Field(f) => Bson::String(f.clone()),
                    Part::Index(i) => Bson::Int32(*i),
                })
                .collect();
            self.ambiguous.insert(path.clone(), components);
        }
        path
    }

    fn document(&mut self, diff: &Document, at: &[Part]) {
        for (k, v) in diff {
            let Bson::Document(inner) = v else { continue };
            match k.as_str() {
                "u" | "i" => {
                    for (f, value) in inner {
                        let path = self.path(&with(at, Part::Field(f.clone())));
                        self.updated.insert(path, value.clone());
                    }
                }
                "d" => {
                    for f in inner.keys() {
                        let path = self.path(&with(at, Part::Field(f.clone())));
                        self.removed.push(Bson::String(path));
                    }
                }
                sub if sub.starts_with('s') && sub.len() > 1 => {
                    self.sub(inner, &with(at, Part::Field(sub[1..].to_string())));
                }
                _ => {}
            }
        }
    }

    fn sub(&mut self, diff: &Document, at: &[Part]) {
        if super::diff::is_array_diff(diff) {
            self.array(diff, at);
        } else {
            self.document(diff, at);
        }
    }

    fn array(&mut self, diff: &Document, at: &[Part]) {
        if let Some(n) = diff
            .get("l")
            .and_then(|l| l.as_i64().or(l.as_i32().map(i64::from)))
        {
            let field = self.path(at);
            self.truncated
                .push(doc! {"field": field, "newSize": n as i32}.into());
        }
        for (k, v) in diff {
            let index = k.get(1..).and_then(|i| i.parse::<i32>().ok());
            match (k.chars().next(), index, v) {
                (Some('u'), Some(i), _) => {
                    let path = self.path(&with(at, Part::Index(i)));
                    self.updated.insert(path, v.clone());
                }
                (Some('s'), Some(i), Bson::Document(inner)) => {
                    self.sub(inner, &with(at, Part::Index(i)));
                }
                _ => {}
            }
        }
    }
}

fn with(at: &[Part], next: Part) -> Vec<Part> {
    let mut v = at.to_vec();
    v.push(next);
    v
}

/// A resume point before the oldest entry held cannot be resumed from: the events between
/// are gone.
fn check_history(oplog: &Oplog, after: u64) -> DocResult<()> {
    match oplog.oldest_ts()? {
        Some(oldest) if ts_u64(oldest) > after.saturating_add(1) && after > 0 => Err(bad(
            286,
            "ChangeStreamHistoryLost",
            format!(
                "Resume of change stream was not possible, as the resume point {:?} may no longer be in the oplog (the oldest entry is {oldest:?})",
                ts_of(after)
            ),
        )),
        _ => Ok(()),
    }
}

impl Iterator for ChangeStream {
    type Item = DocResult<Document>;

    fn next(&mut self) -> Option<DocResult<Document>> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                if let Ok(id) = e.get_document("_id") {
                    *self.position.lock() = id.clone();
                    self.position_ts = read_token(&Bson::Document(id.clone())).map_or(0, |t| t.0);
                }
                return Some(Ok(e));
            }
            if self.invalidated {
                self.ended.store(true, Ordering::Release);
                return None;
            }
            match self.scan() {
                Ok(true) => continue,
                Ok(false) => {
                    if self.after > self.position_ts {
                        // Entries after the last event were read and none matched.
                        *self.position.lock() = token(self.after, TokenKind::HighWater);
                        self.position_ts = self.after;
                    }
                    return None;
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{DeleteStatement, DocDb, FindQuery, UpdateStatement, WriteOpts, WriteOutcome};
    use crate::oplog::OplogSettings;
    use crate::DocDbConfig;
    use bson::Timestamp;

    fn member() -> Arc<DocDb> {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings {
            size_bytes: 1 << 20,
        });
        DocDb::open(cfg).unwrap()
    }

    fn everything_visible() -> Visible {
        Arc::new(|| u64::MAX)
    }

    fn lookup_in(db: &Arc<DocDb>) -> Lookup {
        let db = db.clone();
        Arc::new(move |d, c, id| {
            let q = FindQuery {
                filter: doc! {"_id": id.clone()},
                ..Default::default()
            };
            db.find(d, c, &q)?.next().transpose()
        })
    }

    fn open(db: &Arc<DocDb>, target: Target, opts: Document) -> (ChangeStream, StreamHandles) {
        let spec = ChangeStreamSpec::parse(&Bson::Document(opts), target).unwrap();
        let oplog = db.oplog().unwrap().clone();
        let post: Post = Box::new(|e| Ok(vec![e]));
        ChangeStream::open(oplog, spec, everything_visible(), lookup_in(db), post).unwrap()
    }

    fn coll_target() -> Target {
        Target::Collection {
            db: "app".into(),
            coll: "c".into(),
        }
    }

    fn read(stream: &mut ChangeStream) -> Vec<Document> {
        stream.by_ref().map(|e| e.unwrap()).collect()
    }

    fn kinds(events: &[Document]) -> Vec<&str> {
        events
            .iter()
            .map(|e| e.get_str("operationType").unwrap())
            .collect()
    }

    fn ok(out: WriteOutcome) {
        assert!(out.write_errors.is_empty(), "{:?}", out.write_errors);
    }

    fn insert(db: &DocDb, coll: &str, d: Document) {
        ok(db.insert("app", coll, vec![d], WriteOpts::default()));
    }

    fn update(db: &DocDb, id: i32, u: Document) {
        let s = UpdateStatement {
            q: doc! {"_id": id},
            u: Bson::Document(u),
            ..UpdateStatement::default()
        };
        ok(db.update("app", "c", &[s], WriteOpts::default()));
    }

    #[test]
    fn a_collection_stream_shows_its_writes_then_invalidates_on_drop() {
        let db = member();
        insert(&db, "c", doc! {"_id": 0});
        let (mut s, handles) = open(&db, coll_target(), doc! {});
        assert!(read(&mut s).is_empty(), "writes before the stream opened");
        insert(&db, "c", doc! {"_id": 1, "a": 1, "e": {"x": 1, "y": 2}});
        insert(&db, "other", doc! {"_id": 9});
        update(
            &db,
            1,
            doc! {"$set": {"a": 2, "e.x": 5}, "$unset": {"e.y": 1}},
        );
        update(&db, 1, doc! {"b": 1});
        let del = DeleteStatement {
            q: doc! {"_id": 1},
            limit: 1,
            ..DeleteStatement::default()
        };
        ok(db.delete("app", "c", &[del], WriteOpts::default()));
        let events = read(&mut s);
        assert_eq!(kinds(&events), ["insert", "update", "replace", "delete"]);
        let ins = &events[0];
        assert_eq!(
            ins.get_document("ns").unwrap(),
            &doc! {"db": "app", "coll": "c"}
        );
        assert_eq!(ins.get_document("documentKey").unwrap(), &doc! {"_id": 1});
        assert_eq!(
            ins.get_document("fullDocument").unwrap().get_i32("a"),
            Ok(1)
        );
        let desc = events[1].get_document("updateDescription").unwrap();
        assert_eq!(
            desc.get_document("updatedFields").unwrap(),
            &doc! {"a": 2, "e.x": 5}
        );
        assert_eq!(
            desc.get_array("removedFields").unwrap(),
            &vec![Bson::from("e.y")]
        );
        assert!(!events[1].contains_key("fullDocument"), "no lookup asked");
        assert_eq!(
            events[2].get_document("fullDocument").unwrap(),
            &doc! {"_id": 1, "b": 1}
        );
        assert!(!handles.ended.load(Ordering::Acquire));
        // The position is the last event's token.
        assert_eq!(
            &*handles.position.lock(),
            events[3].get_document("_id").unwrap()
        );

        db.drop_collection("app", "c").unwrap();
        insert(&db, "c", doc! {"_id": 2});
        let events = read(&mut s);
        assert_eq!(kinds(&events), ["drop", "invalidate"]);
        assert!(handles.ended.load(Ordering::Acquire));
        assert!(read(&mut s).is_empty(), "nothing after the invalidate");
    }

    #[test]
    fn a_transaction_shows_one_event_per_operation_and_resumes_between_them() {
        let db = member();
        insert(&db, "c", doc! {"_id": 1});
        insert(&db, "other", doc! {"_id": 1});
        let (mut s, _) = open(&db, coll_target(), doc! {});
        let session = crate::txn::TxnSession {
            lsid: doc! {"id": 5},
            txn_number: 2,
        };
        let t = db.begin_txn(Some(session)).unwrap();
        crate::txn::with_txn(&t, || {
            insert(&db, "c", doc! {"_id": 2});
            insert(&db, "other", doc! {"_id": 2});
            update(&db, 1, doc! {"$set": {"a": 1}});
            Ok(())
        })
        .unwrap();
        assert!(read(&mut s).is_empty(), "nothing before the commit");
        db.commit_txn(&t).unwrap();
        insert(&db, "c", doc! {"_id": 3});
        let events = read(&mut s);
        assert_eq!(kinds(&events), ["insert", "update", "insert"]);
        for e in &events[..2] {
            assert_eq!(e.get_document("lsid").unwrap(), &doc! {"id": 5});
            assert_eq!(e.get_i64("txnNumber").unwrap(), 2);
        }
        let ids: Vec<&Bson> = events.iter().map(|e| e.get("_id").unwrap()).collect();
        assert!(ids[0] != ids[1], "each operation has its own token");
        let (mut resumed, _) = open(&db, coll_target(), doc! {"resumeAfter": ids[0].clone()});
        let again = read(&mut resumed);
        assert_eq!(
            kinds(&again),
            ["update", "insert"],
            "resumed inside the transaction"
        );
        assert_eq!(again[0].get("_id"), Some(ids[1]));
    }

    #[test]
    fn tokens_resume_after_their_event_and_start_after_an_invalidate() {
        let db = member();
        let (mut s, _) = open(&db, coll_target(), doc! {});
        for i in 0..3 {
            insert(&db, "c", doc! {"_id": i});
        }
        let first = read(&mut s);
        let token = first[0].get("_id").unwrap().clone();
        let (mut resumed, _) = open(&db, coll_target(), doc! {"resumeAfter": token.clone()});
        let ids: Vec<_> = read(&mut resumed)
            .iter()
            .map(|e| {
                e.get_document("documentKey")
                    .unwrap()
                    .get_i32("_id")
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [1, 2]);

        db.rename_collection("app", "c", "app", "d", false).unwrap();
        let events = read(&mut s);
        assert_eq!(kinds(&events), ["rename", "invalidate"]);
        assert_eq!(
            events[0].get_document("to").unwrap(),
            &doc! {"db": "app", "coll": "d"}
        );
        let invalidate = events[1].get("_id").unwrap().clone();
        let spec = ChangeStreamSpec::parse(
            &Bson::Document(doc! {"resumeAfter": invalidate.clone()}),
            coll_target(),
        );
        assert_eq!(spec.unwrap_err().code, 260, "resumeAfter an invalidate");
        insert(&db, "c", doc! {"_id": 7});
        let (mut after, _) = open(&db, coll_target(), doc! {"startAfter": invalidate});
        assert_eq!(kinds(&read(&mut after)), ["insert"]);
    }

    #[test]
    fn a_stream_shows_nothing_past_its_visible_bound() {
        let db = member();
        let spec = ChangeStreamSpec::parse(&Bson::Document(doc! {}), coll_target()).unwrap();
        let bound = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = bound.clone();
        let visible: Visible = Arc::new(move || seen.load(Ordering::Acquire));
        let post: Post = Box::new(|e| Ok(vec![e]));
        let oplog = db.oplog().unwrap().clone();
        let (mut s, handles) =
            ChangeStream::open(oplog.clone(), spec, visible, lookup_in(&db), post).unwrap();
        insert(&db, "c", doc! {"_id": 1});
        insert(&db, "c", doc! {"_id": 2});
        let first_ts = {
            let all = oplog.entries_after(ts_of(0), 10, usize::MAX).unwrap();
            ts_u64(all[all.len() - 2].get_timestamp("ts").unwrap())
        };
        assert!(read(&mut s).is_empty(), "nothing is majority-committed yet");
        bound.store(first_ts, Ordering::Release);
        assert_eq!(read(&mut s).len(), 1, "the first write only");
        assert_eq!(
            &*handles.position.lock(),
            &token(first_ts, TokenKind::Event)
        );
        bound.store(u64::MAX, Ordering::Release);
        assert_eq!(read(&mut s).len(), 1);
    }

    #[test]
    fn update_lookup_and_database_and_cluster_targets() {
        let db = member();
        let (mut by_db, _) = open(
            &db,
            Target::Database("app".into()),
            doc! {"fullDocument": "updateLookup"},
        );
        let (mut cluster, _) = open(&db, Target::Cluster, doc! {"allChangesForCluster": true});
        insert(&db, "c", doc! {"_id": 1, "a": 1});
        update(&db, 1, doc! {"$inc": {"a": 1}});
        ok(db.insert("admin", "x", vec![doc! {"_id": 1}], WriteOpts::default()));
        ok(db.insert("other", "y", vec![doc! {"_id": 1}], WriteOpts::default()));
        let events = read(&mut by_db);
        assert_eq!(kinds(&events), ["insert", "update"]);
        let looked_up = events[1].get_document("fullDocument").unwrap();
        assert_eq!(looked_up, &doc! {"_id": 1, "a": 2});
        db.drop_database("app").unwrap();
        let events = read(&mut by_db);
        assert_eq!(kinds(&events), ["drop", "dropDatabase", "invalidate"]);
        let events = read(&mut cluster);
        assert_eq!(
            kinds(&events),
            ["insert", "update", "insert", "drop", "dropDatabase"],
            "admin is not watched; dropDatabase does not end a cluster stream"
        );
    }

    #[test]
    fn options_are_checked_as_mongod_checks_them() {
        let parse = |o: Document| ChangeStreamSpec::parse(&Bson::Document(o), coll_target());
        let code = |o: Document| parse(o).unwrap_err().code;
        assert_eq!(code(doc! {"bogus": 1}), 40415);
        assert_eq!(code(doc! {"fullDocument": "sometimes"}), 2);
        assert_eq!(code(doc! {"fullDocumentBeforeChange": "default"}), 2);
        assert_eq!(code(doc! {"showExpandedEvents": "yes"}), 14);
        let images = parse(doc! {"fullDocument": "required", "fullDocumentBeforeChange": "whenAvailable", "showExpandedEvents": true}).unwrap();
        assert_eq!(
            (images.full_document, images.before_change, images.expanded),
            (FullDocument::Required, BeforeChange::WhenAvailable, true)
        );
        assert_eq!(code(doc! {"allChangesForCluster": true}), 72);
        let t = Timestamp {
            time: 5,
            increment: 1,
        };
        let tok = token(ts_u64(t), TokenKind::Event);
        assert_eq!(
            code(doc! {"resumeAfter": tok.clone(), "startAtOperationTime": t}),
            40674
        );
        assert_eq!(code(doc! {"resumeAfter": {"_data": "00"}}), 260);
        // Eighteen bytes after the prefix, not eighteen characters: refused, never sliced.
        let wide = format!("{TOKEN_VERSION}{}", "€".repeat(6));
        assert_eq!(code(doc! {"resumeAfter": {"_data": wide}}), 260);
        assert_eq!(
            parse(doc! {"startAtOperationTime": t}).unwrap().start,
            Start::At(ts_u64(t))
        );
        assert_eq!(
            parse(doc! {"resumeAfter": tok}).unwrap().start,
            Start::After(ts_u64(t))
        );
    }

    #[test]
    fn a_resume_point_the_oplog_no_longer_holds_is_history_lost() {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings { size_bytes: 600 });
        let db = DocDb::open(cfg).unwrap();
        let (mut s, _) = open(&db, coll_target(), doc! {});
        insert(&db, "c", doc! {"_id": 0, "pad": "x".repeat(100)});
        let first = read(&mut s)[0].get("_id").unwrap().clone();
        for i in 1..20 {
            insert(&db, "c", doc! {"_id": i, "pad": "x".repeat(100)});
        }
        let spec =
            ChangeStreamSpec::parse(&Bson::Document(doc! {"resumeAfter": first}), coll_target())
                .unwrap();
        let post: Post = Box::new(|e| Ok(vec![e]));
        let oplog = db.oplog().unwrap().clone();
        let err = ChangeStream::open(oplog, spec, everything_visible(), lookup_in(&db), post)
            .err()
            .expect("history lost");
        assert_eq!(err.code, 286);
    }
}
