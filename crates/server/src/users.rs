//! Where a server's users live ([`UserStore`]): a standalone's and a shard's in
//! `admin.system.users` ([`DocDbUsers`]), a router's in the cluster's metadata store (the
//! `cluster` crate's, as mongos reads its users from the config servers). The user commands,
//! authentication and the localhost exception (`auth`) go through it and nothing else.
//!
//! A user is mongod's document, `_id: "db.user"` (`auth` builds and reads it).

use crate::roles::{USERS_COLL, USERS_DB};
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocResult, FindQuery, WriteOpts};
use std::sync::Arc;

pub trait UserStore: Send + Sync {
    /// The user whose `_id` is `id` ("db.user").
    fn get(&self, id: &str) -> DocResult<Option<Document>>;
    /// Whether any user exists (the localhost exception closes once one does).
    fn any(&self) -> DocResult<bool>;
    /// Adds a user; false (nothing written) when its `_id` exists.
    fn insert(&self, user: Document) -> DocResult<bool>;
    /// Sets `fields` on user `id`; false when there is no such user.
    fn set_fields(&self, id: &str, fields: Document) -> DocResult<bool>;
    /// Removes user `id`; false when there is no such user.
    fn remove(&self, id: &str) -> DocResult<bool>;
    /// Every user, in `_id` order.
    fn all(&self) -> DocResult<Vec<Document>>;
}

/// The users in `admin.system.users` of a database.
pub struct DocDbUsers(pub Arc<DocDb>);

fn first_error(out: docdb::WriteOutcome) -> DocResult<u64> {
    match out.write_errors.into_iter().next() {
        Some(e) => Err(e.error),
        None => Ok(out.n),
    }
}

fn journaled() -> WriteOpts {
    WriteOpts {
        journal: true,
        ..WriteOpts::default()
    }
}

/// The duplicate-key code a second insert of one `_id` fails with.
const DUPLICATE_KEY: i32 = 11000;

impl UserStore for DocDbUsers {
    fn get(&self, id: &str) -> DocResult<Option<Document>> {
        let q = FindQuery {
            filter: doc! {"_id": id},
            ..Default::default()
        };
        self.0.find(USERS_DB, USERS_COLL, &q)?.next().transpose()
    }
    fn any(&self) -> DocResult<bool> {
        Ok(self
            .0
            .find(USERS_DB, USERS_COLL, &FindQuery::default())?
            .next()
            .transpose()?
            .is_some())
    }
    fn insert(&self, user: Document) -> DocResult<bool> {
        match first_error(self.0.insert(USERS_DB, USERS_COLL, vec![user], journaled())) {
            Ok(_) => Ok(true),
            Err(e) if e.code == DUPLICATE_KEY => Ok(false),
            Err(e) => Err(e),
        }
    }
    fn set_fields(&self, id: &str, fields: Document) -> DocResult<bool> {
        let stmt = docdb::UpdateStatement {
            q: doc! {"_id": id},
            u: Bson::Document(doc! {"$set": fields}),
            ..Default::default()
        };
        let out = self.0.update(USERS_DB, USERS_COLL, &[stmt], journaled());
        Ok(first_error(out)? > 0)
    }
    fn remove(&self, id: &str) -> DocResult<bool> {
        let stmt = docdb::DeleteStatement {
            q: doc! {"_id": id},
            limit: 1,
            ..Default::default()
        };
        Ok(first_error(self.0.delete(USERS_DB, USERS_COLL, &[stmt], journaled()))? > 0)
    }
    fn all(&self) -> DocResult<Vec<Document>> {
        let q = FindQuery {
            sort: Some(doc! {"_id": 1}),
            ..Default::default()
        };
        self.0.find(USERS_DB, USERS_COLL, &q)?.collect()
    }
}
