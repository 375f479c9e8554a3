//! The set's default read and write concerns (set and read by `getDefaultRWConcern` and
//! `setDefaultRWConcern`, mongod 4.4+, in `commands`): one document, `config.settings` `{_id: "ReadWriteConcernDefaults"}`, as mongod
//! keeps it. It is written on the primary like any document, so its oplog entry replicates it
//! to every member and it survives a restart; every member reads its own copy when a command
//! needs it (`concern::admit`): a write without `writeConcern` takes the default write concern,
//! a read of data without a read concern level takes the default level.

use bson::{doc, Bson, DateTime, Document, Timestamp};
use docdb::{DocDb, DocResult, FindQuery, UpdateStatement, WriteOpts};

const SETTINGS_DB: &str = "config";
const SETTINGS_COLL: &str = "settings";
const DEFAULTS_ID: &str = "ReadWriteConcernDefaults";

/// The defaults as set; `None`: not set (the implicit one applies).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Defaults {
    pub read: Option<Document>,
    pub write: Option<Document>,
    /// The member's newest oplog `ts` when they were last set (the change's entry follows it).
    pub(super) update_op_time: Option<Timestamp>,
    pub(super) update_wall: Option<DateTime>,
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
    pub(super) fn reply(&self, now: DateTime) -> Document {
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

/// Writes the defaults (on the primary: the write's oplog entry replicates them).
pub(super) fn save(db: &DocDb, defaults: &Defaults) -> DocResult<()> {
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
