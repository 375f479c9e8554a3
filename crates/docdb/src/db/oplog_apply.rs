//! A secondary's application of oplog entries: [`DocDb::apply_oplog_entry`]. Every entry is
//! applied idempotently, as mongod's oplog application is: applying an entry twice, or a
//! sequence again from any earlier point, leaves what applying it once leaves.
//!
//! - Writes find their collection by UUID (`ui`): an entry of a collection since dropped (or
//!   dropped and created again, with another UUID) finds nothing and does nothing.
//! - An insert is an upsert of the whole document by `_id`; an update applies its diff (or
//!   replacement) to the document if it exists, else does nothing (a later delete removed it);
//!   a delete removes the document if it exists.
//! - `create` of a UUID that exists elsewhere moves it back (a replayed rename left it there);
//!   a namespace held by another UUID is moved aside to `tmp.oplog.<uuid>` (a later entry of
//!   the sequence drops it or moves it to its name, as in the original history).
//! - `drop`, `renameCollection`, `createIndexes`, `dropIndexes`, `collMod` of a collection
//!   that is not there do nothing; `createIndexes` of an index that is there does nothing.
//!
//! Writes go through the normal write path (indexes maintained, unique keys checked), and each
//! one logs the applied entry in the secondary's own oplog, in the same batch.

use super::views::ViewDef;
use super::{DeleteStatement, DocDb, FindQuery, UpdateStatement, WriteOpts, WriteOutcome};
use crate::catalog;
use crate::collection::{encode_doc, Coll};
use crate::oplog::diff::{self, bad_entry};
use crate::oplog::{ts_u64, OpRecord, Oplog, UNLOGGED_DB};
use bson::spec::BinarySubtype;
use bson::{doc, Bson, Document, Uuid};
use engine::{WriteBatch, WriteOptions};
use query::error::{DocError, DocResult};
use std::sync::Arc;

/// An oplog entry's fields that application reads.
#[derive(Debug)]
struct Parsed<'a> {
    op: &'a str,
    ns: &'a str,
    ui: Option<Uuid>,
    o: &'a Document,
    o2: Option<&'a Document>,
}

fn parse(entry: &Document) -> DocResult<(u64, Parsed<'_>)> {
    let ts = entry
        .get_timestamp("ts")
        .map_err(|_| bad_entry(format!("field ts missing or mistyped in {entry}")))?;
    Ok((ts_u64(ts), parse_op(entry)?))
}

/// An entry's operation fields (an `applyOps` entry's operations have no `ts`).
fn parse_op(entry: &Document) -> DocResult<Parsed<'_>> {
    let field = |k: &str| bad_entry(format!("field {k} missing or mistyped in {entry}"));
    let ui = match entry.get("ui") {
        None => None,
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
            let bytes: [u8; 16] = b.bytes.as_slice().try_into().map_err(|_| field("ui"))?;
            Some(Uuid::from_bytes(bytes))
        }
        Some(_) => return Err(field("ui")),
    };
    let parsed = Parsed {
        op: entry.get_str("op").map_err(|_| field("op"))?,
        ns: entry.get_str("ns").map_err(|_| field("ns"))?,
        ui,
        o: entry.get_document("o").map_err(|_| field("o"))?,
        o2: entry.get_document("o2").ok(),
    };
    Ok(parsed)
}

/// The first write error of an outcome, as an error.
fn first_error(out: WriteOutcome) -> DocResult<WriteOutcome> {
    match out.write_errors.first() {
        Some(e) => Err(e.error.clone()),
        None => Ok(out),
    }
}

fn applier_opts() -> WriteOpts {
    WriteOpts {
        bypass_validation: true,
        ..WriteOpts::default()
    }
}

/// An update that makes the document `new`: a replacement, or, when `new` has a top-level
/// field whose name starts with `$` (which a pipeline update may write and a replacement may
/// not), a pipeline that replaces it with `new` as a literal.
fn replacement(new: Document) -> Bson {
    if new.keys().any(|k| k.starts_with('$')) {
        return Bson::Array(vec![Bson::Document(
            doc! {"$replaceWith": {"$literal": new}},
        )]);
    }
    Bson::Document(new)
}

fn by_id(id: &Bson) -> Document {
    doc! {"_id": id.clone()}
}

impl Oplog {
    /// Runs `body`, the application of `entry`, so that its writes log `entry`; if none did
    /// (an entry that changed nothing here), `entry` is appended on its own. An entry at or
    /// before the oplog's end is applied without being appended again.
    fn apply_logged(
        &self,
        engine: &dyn engine::KvEngine,
        ts: u64,
        entry: &Document,
        body: impl FnOnce() -> DocResult<()>,
    ) -> DocResult<()> {
        let bytes = encode_doc(entry)?;
        // A retryable write's statement: its record joins the batch that logs it.
        let statement = entry.contains_key("lsid").then(|| entry.clone());
        crate::oplog::applying(ts, bytes, statement, || {
            body()?;
            if crate::oplog::applied_unlogged() {
                let write = |b: &WriteBatch| engine.write(b, WriteOptions::default());
                let images = (None, None);
                self.write_logged(&mut WriteBatch::new(), unreachable_record, images, write)?
                    .map_err(crate::storage_error)?;
            }
            Ok(())
        })
    }
}

/// Never called: while an entry is applied, the oplog logs that entry, not a new record.
fn unreachable_record() -> OpRecord {
    unreachable!("an applied entry logs itself")
}

impl DocDb {
    /// Applies one oplog entry of the primary (a secondary's applier), idempotently, and
    /// appends it to this member's oplog in the same batch as its write. Refused unless the
    /// database was opened with an oplog (as a replica-set member).
    pub fn apply_oplog_entry(&self, entry: &Document) -> DocResult<()> {
        let log = self.oplog().cloned().ok_or_else(|| {
            DocError::illegal_operation("oplog application needs a replica-set member's oplog")
        })?;
        let (ts, e) = parse(entry)?;
        // A member applying the primary's entries is not primary: any transaction it had
        // open ended when it stepped down, and would only hold keys the entries write.
        self.txns().abort_all("this member is no longer primary");
        if catalog::split_ns(e.ns).is_some_and(|(db, _)| db == UNLOGGED_DB) {
            return Err(bad_entry(format!(
                "an entry of the local database: {}",
                e.ns
            )));
        }
        log.apply_logged(self.engine().as_ref(), ts, entry, || match e.op {
            "n" => Ok(()),
            "i" => self.apply_insert(&e),
            "u" => self.apply_update(&e),
            "d" => self.apply_delete(&e),
            "c" => self.apply_command(&e),
            other => Err(bad_entry(format!("unknown op {other}"))),
        })
    }

    /// The collection with UUID `ui`, wherever it is now.
    fn coll_by_uuid(&self, ui: Uuid) -> Option<Arc<Coll>> {
        self.colls_snapshot().into_iter().find(|c| c.uuid == ui)
    }

    /// The collection a write entry names: by UUID when it has one, else by namespace.
    fn entry_target(&self, e: &Parsed<'_>) -> DocResult<Option<Arc<Coll>>> {
        if let Some(ui) = e.ui {
            return Ok(self.coll_by_uuid(ui));
        }
        let (db, coll) =
            catalog::split_ns(e.ns).ok_or_else(|| bad_entry(format!("bad namespace {}", e.ns)))?;
        Ok(self.collection_handle(db, coll))
    }

    /// The stored document with this `_id`, if any.
    pub(super) fn doc_by_id(&self, c: &Coll, id: &Bson) -> DocResult<Option<Document>> {
        let q = FindQuery {
            filter: by_id(id),
            hint: Some(Bson::String("_id_".into())),
            ..FindQuery::default()
        };
        self.find(&c.db, &c.name, &q)?.next().transpose()
    }

    fn apply_insert(&self, e: &Parsed<'_>) -> DocResult<()> {
        let Some(c) = self.entry_target(e)? else {
            return Ok(());
        };
        let id =
            e.o.get("_id")
                .ok_or_else(|| bad_entry("an insert without _id".into()))?;
        let stmt = UpdateStatement {
            q: by_id(id),
            u: replacement(e.o.clone()),
            upsert: true,
            hint: Some(Bson::String("_id_".into())),
            ..UpdateStatement::default()
        };
        first_error(self.update(&c.db, &c.name, &[stmt], applier_opts())).map(drop)
    }

    fn apply_update(&self, e: &Parsed<'_>) -> DocResult<()> {
        let Some(c) = self.entry_target(e)? else {
            return Ok(());
        };
        let id =
            e.o2.and_then(|o2| o2.get("_id"))
                .ok_or_else(|| bad_entry("an update without o2._id".into()))?;
        let Some(old) = self.doc_by_id(&c, id)? else {
            return Ok(());
        };
        let mut new = diff::apply_update_object(&old, e.o)?;
        if !new.contains_key("_id") {
            // A replacement without `_id` keeps the document's (`o2` names it).
            let mut with_id = by_id(id);
            with_id.extend(new);
            new = with_id;
        }
        let stmt = UpdateStatement {
            q: by_id(id),
            u: replacement(new),
            hint: Some(Bson::String("_id_".into())),
            ..UpdateStatement::default()
        };
        first_error(self.update(&c.db, &c.name, &[stmt], applier_opts())).map(drop)
    }

    fn apply_delete(&self, e: &Parsed<'_>) -> DocResult<()> {
        let Some(c) = self.entry_target(e)? else {
            return Ok(());
        };
        let id =
            e.o.get("_id")
                .ok_or_else(|| bad_entry("a delete without _id".into()))?;
        let stmt = DeleteStatement {
            q: by_id(id),
            limit: 1,
            hint: Some(Bson::String("_id_".into())),
            ..DeleteStatement::default()
        };
        first_error(self.delete(&c.db, &c.name, &[stmt], applier_opts())).map(drop)
    }

    fn apply_command(&self, e: &Parsed<'_>) -> DocResult<()> {
        let db =
            e.ns.strip_suffix(".$cmd")
                .ok_or_else(|| bad_entry(format!("a command on {}", e.ns)))?;
        let (name, arg) =
            e.o.iter()
                .next()
                .ok_or_else(|| bad_entry("an empty command".into()))?;
        let rest: Document =
            e.o.iter()
                .skip(1)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        let ui = || e.ui.ok_or_else(|| bad_entry(format!("{name} without ui")));
        let coll = || match arg {
            Bson::String(s) => Ok(s.as_str()),
            _ => Err(bad_entry(format!("{name}'s argument is not a name: {arg}"))),
        };
        match name.as_str() {
            // A view's entries carry no `ui`: a view has no UUID.
            "create" if rest.contains_key("viewOn") => self.apply_put_view(db, coll()?, &rest),
            "collMod" if e.ui.is_none() => self.apply_put_view(db, coll()?, &rest),
            "drop" if e.ui.is_none() => self.apply_drop_view(db, coll()?),
            "create" => self.apply_create(db, coll()?, ui()?, &rest),
            "drop" => self.drop_by_uuid(ui()?),
            "renameCollection" => self.apply_rename(ui()?, &rest),
            "createIndexes" => self.apply_create_index(ui()?, &rest),
            "dropIndexes" => self.apply_drop_indexes(ui()?, &rest),
            "collMod" => match self.coll_by_uuid(ui()?) {
                Some(c) => self.coll_mod(&c.db, &c.name, &rest).map(drop),
                None => Ok(()),
            },
            "dropDatabase" => self.drop_database(db),
            "applyOps" => self.apply_txn_ops(arg),
            other => Err(bad_entry(format!("unknown command {other}"))),
        }
    }

    /// A committed transaction's entry: its operations are applied in a transaction of this
    /// member, committed with the entry in one batch, so this member's readers see all of it
    /// or none. Each operation is applied as its own entry would be (idempotently).
    fn apply_txn_ops(&self, ops: &Bson) -> DocResult<()> {
        let Bson::Array(ops) = ops else {
            return Err(bad_entry(format!("applyOps of {ops}, not an array")));
        };
        let log = self.oplog().cloned().ok_or_else(|| {
            DocError::illegal_operation("oplog application needs a replica-set member's oplog")
        })?;
        let txn = self.begin_txn(None)?;
        crate::txn::with_txn(&txn, || {
            for op in ops {
                let Bson::Document(op) = op else {
                    return Err(bad_entry(format!("an applyOps operation {op}")));
                };
                let e = parse_op(op)?;
                match e.op {
                    "i" => self.apply_insert(&e)?,
                    "u" => self.apply_update(&e)?,
                    "d" => self.apply_delete(&e)?,
                    other => return Err(bad_entry(format!("applyOps of op {other}"))),
                }
            }
            Ok(())
        })?;
        txn.commit_with(WriteOptions::default(), |batch, _, write| {
            log.write_logged(batch, unreachable_record, (None, None), write)
        })
    }

    /// Moves the collection at `db.coll`, if any, out of the way (to `tmp.oplog.<uuid>`).
    fn move_aside(&self, db: &str, coll: &str) -> DocResult<()> {
        match self.collection_handle(db, coll) {
            Some(c) => {
                let aside = format!("tmp.oplog.{}", c.uuid);
                self.rename_collection(db, coll, db, &aside, false)
            }
            None => Ok(()),
        }
    }

    fn apply_create(&self, db: &str, coll: &str, ui: Uuid, options: &Document) -> DocResult<()> {
        if let Some(c) = self.coll_by_uuid(ui) {
            if c.db == db && c.name == coll {
                return Ok(());
            }
            self.move_aside(db, coll)?;
            return self.rename_collection(&c.db, &c.name, db, coll, false);
        }
        self.move_aside(db, coll)?;
        let options = catalog::validate_create_options(options)?;
        self.create_with_uuid(db, coll, options, ui)
    }

    /// A view's `create` or `collMod`: the view is (re)defined as the entry says, whatever
    /// was there (replayed, a `create` may find the view the entry made, or a collection a
    /// later entry drops, which is moved aside as for a collection's `create`).
    fn apply_put_view(&self, db: &str, name: &str, options: &Document) -> DocResult<()> {
        let def = ViewDef::parse(options, "create")?;
        self.move_aside(db, name)?;
        let _g = self.ddl.lock();
        self.put_view_locked(db, name, def, "create")
    }

    /// A view's `drop`; nothing if it is not there (replayed).
    fn apply_drop_view(&self, db: &str, name: &str) -> DocResult<()> {
        let _g = self.ddl.lock();
        self.drop_view_locked(db, name).map(drop)
    }

    fn apply_rename(&self, ui: Uuid, o: &Document) -> DocResult<()> {
        // The target the primary dropped goes, wherever a replay left it, even when the
        // source is gone already (a later entry dropped it).
        if let Some(Bson::Binary(b)) = o.get("dropTarget") {
            let bytes: [u8; 16] = b
                .bytes
                .as_slice()
                .try_into()
                .map_err(|_| bad_entry(format!("rename's dropTarget is not a UUID: {o}")))?;
            self.drop_by_uuid(Uuid::from_bytes(bytes))?;
        }
        let Some(src) = self.coll_by_uuid(ui) else {
            return Ok(());
        };
        let to = o
            .get_str("to")
            .map_err(|_| bad_entry(format!("rename without to: {o}")))?;
        let (to_db, to_coll) =
            catalog::split_ns(to).ok_or_else(|| bad_entry(format!("bad namespace {to}")))?;
        if src.ns == to {
            return Ok(());
        }
        // Whatever else holds the name is moved aside.
        self.move_aside(to_db, to_coll)?;
        self.rename_collection(&src.db, &src.name, to_db, to_coll, false)
    }

    fn apply_create_index(&self, ui: Uuid, spec: &Document) -> DocResult<()> {
        let Some(c) = self.coll_by_uuid(ui) else {
            return Ok(());
        };
        let created = self.create_indexes(&c.db, &c.name, std::slice::from_ref(spec));
        match created {
            // An index of this name but another spec, or one alike under another name: one a
            // later entry drops (the log is being replayed); replaced.
            Err(err) if err.code == 85 || err.code == 86 => {
                for name in self.conflicting_indexes(&c, spec)? {
                    self.drop_indexes(&c.db, &c.name, &Bson::String(name))?;
                }
                self.create_indexes(&c.db, &c.name, std::slice::from_ref(spec))
                    .map(drop)
            }
            other => other.map(drop),
        }
    }

    /// The indexes of `c` that `spec` conflicts with: the one of its name, and those of its
    /// key, collation and partial filter under another name.
    fn conflicting_indexes(&self, c: &Coll, spec: &Document) -> DocResult<Vec<String>> {
        let alike = |i: &Document, k: &str| i.get(k) == spec.get(k);
        Ok(self
            .list_indexes(&c.db, &c.name)?
            .iter()
            .filter(|i| {
                alike(i, "name")
                    || (alike(i, "key")
                        && alike(i, "collation")
                        && alike(i, "partialFilterExpression"))
            })
            .filter_map(|i| i.get_str("name").ok().map(str::to_string))
            .filter(|name| name != "_id_")
            .collect())
    }

    fn apply_drop_indexes(&self, ui: Uuid, o: &Document) -> DocResult<()> {
        let Some(c) = self.coll_by_uuid(ui) else {
            return Ok(());
        };
        let names = match o.get("index") {
            Some(Bson::Array(a)) => a.clone(),
            Some(one) => vec![one.clone()],
            None => return Err(bad_entry(format!("dropIndexes without index: {o}"))),
        };
        for name in names {
            match self.drop_indexes(&c.db, &c.name, &name) {
                Err(err) if err.code == DocError::index_not_found("").code => {}
                other => other.map(drop)?,
            }
        }
        Ok(())
    }
}
