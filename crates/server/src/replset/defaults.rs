//! The set's default read and write concerns (`getDefaultRWConcern`, `setDefaultRWConcern`,
//! mongod 4.4+): one document, `config.settings` `{_id: "ReadWriteConcernDefaults"}`, as mongod
//! keeps it. It is written on the primary like any document, so its oplog entry replicates it
//! to every member and it survives a restart; every member reads its own copy when a command
//! needs it (`concern::admit`): a write without `writeConcern` takes the default write concern,
//! a read of data without a read concern level takes the default level.

use super::ReplSet;
use bson::{doc, Bson, DateTime, Document, Timestamp};
use docdb::{DocDb, DocError, DocResult, FindQuery, UpdateStatement, WriteOpts};
use std::sync::Arc;

const SETTINGS_DB: &str = "config";
const SETTINGS_COLL: &str = "settings";
const DEFAULTS_ID: &str = "ReadWriteConcernDefaults";

/// The defaults as set; `None`: not set (the implicit one applies).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Defaults {
    pub read: Option<Document>,
    pub write: Option<Document>,
    /// The member's newest oplog `ts` when they were last set (the change's entry follows it).
    update_op_time: Option<Timestamp>,
    update_wall: Option<DateTime>,
}

/// mongod's implicit defaults (5.0+): `w: "majority"`, read concern `local`.
fn implicit_write() -> Document {
    doc! {"w": "majority", "wtimeout": 0}
}

fn implicit_read() -> Document {
    doc! {"level": "local"}
}

impl Defaults {
    fn from_stored(d: &Document) -> Defaults {
        Defaults {
            read: d.get_document("defaultReadConcern").ok().cloned(),
            write: d.get_document("defaultWriteConcern").ok().cloned(),
            update_op_time: d.get_timestamp("updateOpTime").ok(),
            update_wall: d.get_datetime("updateWallClockTime").ok().copied(),
        }
    }

    fn to_stored(&self) -> Document {
        let mut d = doc! {"_id": DEFAULTS_ID};
        self.put_times(&mut d);
        if let Some(rc) = &self.read {
            d.insert("defaultReadConcern", rc.clone());
        }
        if let Some(wc) = &self.write {
            d.insert("defaultWriteConcern", wc.clone());
        }
        d
    }

    fn put_times(&self, d: &mut Document) {
        if let Some(t) = self.update_op_time {
            d.insert("updateOpTime", t);
        }
        if let Some(w) = self.update_wall {
            d.insert("updateWallClockTime", w);
        }
    }

    /// The reply of both commands. This member reads the document on every use, so what it
    /// holds took effect here at `now` (`localUpdateWallClockTime`).
    fn reply(&self, now: DateTime) -> Document {
        let source = |set: bool| if set { "global" } else { "implicit" };
        let mut d = doc! {
            "defaultReadConcern": self.read.clone().unwrap_or_else(implicit_read),
            "defaultWriteConcern": self.write.clone().unwrap_or_else(implicit_write),
        };
        self.put_times(&mut d);
        d.insert("localUpdateWallClockTime", now);
        d.insert("defaultWriteConcernSource", source(self.write.is_some()));
        d.insert("defaultReadConcernSource", source(self.read.is_some()));
        d
    }
}

/// The defaults this member holds.
pub fn load(db: &DocDb) -> DocResult<Defaults> {
    let q = FindQuery {
        filter: doc! {"_id": DEFAULTS_ID},
        ..Default::default()
    };
    let found = db
        .find(SETTINGS_DB, SETTINGS_COLL, &q)?
        .next()
        .transpose()?;
    Ok(found.map(|d| Defaults::from_stored(&d)).unwrap_or_default())
}

/// mongod's refusal of both commands on a standalone.
fn standalone(name: &str) -> DocError {
    DocError::with_code(
        51300,
        "Location51300",
        format!("'{name}' is not supported on standalone nodes."),
    )
}

fn member<'a>(rs: Option<&'a Arc<ReplSet>>, name: &str, db: &str) -> DocResult<&'a Arc<ReplSet>> {
    let rs = rs.ok_or_else(|| standalone(name))?;
    if db != "admin" {
        return Err(DocError::with_code(
            13,
            "Unauthorized",
            format!("{name} may only be run against the admin database."),
        ));
    }
    Ok(rs)
}

/// `getDefaultRWConcern` (`inMemory`: the member keeps no cache apart from the document, so
/// both answers are the document's; the reply says `inMemory: true` when asked, as mongod's).
pub fn get(rs: Option<&Arc<ReplSet>>, db: &str, cmd: &Document) -> DocResult<Document> {
    let rs = member(rs, "getDefaultRWConcern", db)?;
    let in_memory = match cmd.get("inMemory") {
        None => false,
        Some(Bson::Boolean(b)) => *b,
        Some(_) => return Err(DocError::type_mismatch("inMemory must be a boolean")),
    };
    let mut reply = load(&rs.db)?.reply(DateTime::now());
    if in_memory {
        reply.insert("inMemory", true);
    }
    Ok(reply)
}

/// What a `setDefaultRWConcern` changes: `Some(None)` unsets (`{}`), `None` keeps.
#[derive(Debug, PartialEq)]
struct Change {
    read: Option<Option<Document>>,
    write: Option<Option<Document>>,
}

fn parse_change(cmd: &Document) -> DocResult<Change> {
    let read = cmd.get("defaultReadConcern").map(check_read).transpose()?;
    let write = cmd
        .get("defaultWriteConcern")
        .map(check_write)
        .transpose()?;
    if read.is_none() && write.is_none() {
        return Err(DocError::bad_value(
            "At least one of the 'defaultReadConcern' or 'defaultWriteConcern' fields must be present",
        ));
    }
    Ok(Change { read, write })
}

/// A default read concern: `{}` (unset) or `{level}` with `local`, `majority` or `available`.
fn check_read(v: &Bson) -> DocResult<Option<Document>> {
    let Bson::Document(rc) = v else {
        return Err(DocError::type_mismatch(
            "defaultReadConcern must be an object",
        ));
    };
    if rc.is_empty() {
        return Ok(None);
    }
    if let Some(k) = rc.keys().find(|k| *k != "level") {
        return Err(DocError::bad_value(format!(
            "A default read concern may only contain 'level', not '{k}'"
        )));
    }
    match rc.get("level") {
        Some(Bson::String(l)) if matches!(l.as_str(), "local" | "majority" | "available") => {
            Ok(Some(rc.clone()))
        }
        Some(Bson::String(l)) if matches!(l.as_str(), "linearizable" | "snapshot") => {
            Err(DocError::bad_value(format!(
                "level: '{l}' is not allowed as a default read concern"
            )))
        }
        Some(Bson::String(l)) => Err(DocError::failed_to_parse(format!(
            "readConcern level '{l}' is not a read concern level"
        ))),
        _ => Err(DocError::type_mismatch(
            "readConcern.level must be a string",
        )),
    }
}

/// A default write concern: `{}` (unset) or one a command could carry, but not `w: 0`.
fn check_write(v: &Bson) -> DocResult<Option<Document>> {
    let Bson::Document(wc) = v else {
        return Err(DocError::type_mismatch(
            "defaultWriteConcern must be an object",
        ));
    };
    if wc.is_empty() {
        return Ok(None);
    }
    super::concern::acknowledge(&doc! {"writeConcern": wc.clone()})?;
    let w0 = wc
        .get("w")
        .and_then(query::compare::Num::of)
        .is_some_and(|n| n.as_f64() == 0.0);
    if w0 {
        return Err(DocError::bad_value(
            "The default write concern cannot be { w: 0 }: an unacknowledged write cannot be the default",
        ));
    }
    Ok(Some(wc.clone()))
}

/// `setDefaultRWConcern`: on the writable primary (the command is a write, admitted as one),
/// checks the new defaults and writes the document; the reply is the defaults now.
pub fn set(rs: Option<&Arc<ReplSet>>, db: &str, cmd: &Document) -> DocResult<Document> {
    let rs = member(rs, "setDefaultRWConcern", db)?;
    let change = parse_change(cmd)?;
    let mut defaults = load(&rs.db)?;
    if let Some(read) = change.read {
        defaults.read = read;
    }
    if let Some(write) = change.write {
        defaults.write = write;
    }
    defaults.update_op_time = Some(super::causal::cluster_time(rs));
    let now = DateTime::now();
    defaults.update_wall = Some(now);
    save(&rs.db, &defaults)?;
    Ok(defaults.reply(now))
}

fn save(db: &DocDb, defaults: &Defaults) -> DocResult<()> {
    let stmt = UpdateStatement {
        q: doc! {"_id": DEFAULTS_ID},
        u: Bson::Document(defaults.to_stored()),
        upsert: true,
        ..Default::default()
    };
    let opts = WriteOpts {
        journal: true,
        ..WriteOpts::default()
    };
    let out = db.update(SETTINGS_DB, SETTINGS_COLL, &[stmt], opts);
    match out.write_errors.into_iter().next() {
        Some(e) => Err(e.error),
        None => Ok(()),
    }
}

/// Sets both defaults in `db` directly (what `setDefaultRWConcern` writes), for the tests of
/// their use.
#[cfg(test)]
pub(super) fn set_in(db: &DocDb, write: Document, read: Document) -> DocResult<()> {
    let defaults = Defaults {
        read: Some(read),
        write: Some(write),
        ..Defaults::default()
    };
    save(db, &defaults)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_cmd(fields: Document) -> Document {
        let mut cmd = doc! {"setDefaultRWConcern": 1};
        cmd.extend(fields);
        cmd
    }

    #[test]
    fn bad_defaults_get_mongods_errors() {
        let code = |fields: Document| parse_change(&set_cmd(fields)).unwrap_err().code;
        assert_eq!(code(doc! {}), 2);
        assert_eq!(code(doc! {"defaultWriteConcern": 1}), 14);
        assert_eq!(code(doc! {"defaultWriteConcern": {"w": 0}}), 2);
        assert_eq!(code(doc! {"defaultWriteConcern": {"w": -1}}), 9);
        assert_eq!(code(doc! {"defaultReadConcern": 1}), 14);
        assert_eq!(code(doc! {"defaultReadConcern": {"level": "dummy"}}), 9);
        assert_eq!(
            code(doc! {"defaultReadConcern": {"level": "linearizable"}}),
            2
        );
        assert_eq!(code(doc! {"defaultReadConcern": {"level": "snapshot"}}), 2);
        let after = bson::Timestamp {
            time: 50,
            increment: 1,
        };
        assert_eq!(
            code(doc! {"defaultReadConcern": {"level": "local", "afterClusterTime": after}}),
            2
        );
    }

    #[test]
    fn good_defaults_set_keep_or_unset() {
        let change = parse_change(&set_cmd(doc! {
            "defaultReadConcern": {"level": "majority"},
            "defaultWriteConcern": {"w": 1, "j": false},
        }))
        .unwrap();
        assert_eq!(change.read, Some(Some(doc! {"level": "majority"})));
        assert_eq!(change.write, Some(Some(doc! {"w": 1, "j": false})));
        let unset = parse_change(&set_cmd(doc! {"defaultReadConcern": {}})).unwrap();
        assert_eq!((unset.read, unset.write), (Some(None), None));
    }

    #[test]
    fn the_stored_document_reads_back_and_the_reply_names_its_sources() {
        let set = Defaults {
            read: None,
            write: Some(doc! {"w": 2}),
            update_op_time: Some(Timestamp {
                time: 7,
                increment: 1,
            }),
            update_wall: Some(DateTime::from_millis(1000)),
        };
        assert_eq!(Defaults::from_stored(&set.to_stored()), set);
        let reply = set.reply(DateTime::from_millis(2000));
        assert_eq!(
            reply.get_document("defaultWriteConcern"),
            Ok(&doc! {"w": 2})
        );
        assert_eq!(reply.get_str("defaultWriteConcernSource"), Ok("global"));
        assert_eq!(
            reply.get_document("defaultReadConcern"),
            Ok(&doc! {"level": "local"})
        );
        assert_eq!(reply.get_str("defaultReadConcernSource"), Ok("implicit"));
        assert!(
            reply.contains_key("updateOpTime") && reply.contains_key("localUpdateWallClockTime")
        );
    }

    #[test]
    fn the_defaults_persist_in_config_settings() {
        let db = DocDb::open(docdb::DocDbConfig::in_memory()).unwrap();
        assert_eq!(load(&db).unwrap(), Defaults::default());
        let mut d = Defaults {
            read: Some(doc! {"level": "majority"}),
            ..Defaults::default()
        };
        save(&db, &d).unwrap();
        assert_eq!(load(&db).unwrap(), d);
        d.read = None;
        d.write = Some(doc! {"w": "majority", "wtimeout": 100});
        save(&db, &d).unwrap();
        assert_eq!(load(&db).unwrap(), d);
    }
}
