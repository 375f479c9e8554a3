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
            Err(e) if e.code == docdb::DocError::DUPLICATE_KEY => Ok(false),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The store over `admin.system.users`: a second user with one `_id` is refused (the
    /// `_id` index), changes reach only the named user.
    #[test]
    fn the_system_users_store_inserts_once_and_changes_by_id() {
        let db = DocDb::open(docdb::DocDbConfig::in_memory()).unwrap();
        let users = DocDbUsers(db);
        assert!(!users.any().unwrap());
        assert!(users.insert(doc! {"_id": "app.b", "roles": []}).unwrap());
        assert!(users.insert(doc! {"_id": "app.a", "roles": []}).unwrap());
        assert!(!users.insert(doc! {"_id": "app.a", "roles": [1]}).unwrap());
        assert!(users.any().unwrap());
        assert!(users
            .set_fields("app.a", doc! {"customData": {"x": 1}})
            .unwrap());
        assert!(!users.set_fields("app.zz", doc! {"customData": {}}).unwrap());
        let all = users.all().unwrap();
        let ids: Vec<&str> = all.iter().map(|u| u.get_str("_id").unwrap()).collect();
        assert_eq!(ids, ["app.a", "app.b"]);
        assert_eq!(all[0].get_document("customData").unwrap(), &doc! {"x": 1});
        assert_eq!(all[1].get_array("roles").unwrap().len(), 0);
        assert!(users.remove("app.a").unwrap());
        assert!(!users.remove("app.a").unwrap());
        assert!(users.get("app.a").unwrap().is_none());
        assert!(users.get("app.b").unwrap().is_some());
    }
}
