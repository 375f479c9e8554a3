//! The cluster's users, in its metadata store (`<root>/users/<db.user>`, mongod's user
//! document as BSON), as mongos keeps its users on the config servers: every router of the
//! cluster authenticates clients against them, and the user commands sent to a router change
//! them. Shards keep their own users (`admin.system.users`) for direct connections.
//!
//! Every change is one store transaction guarded by the revision of the user it read, so two
//! routers that create the same user at once create it once, and an update never overwrites
//! another router's update it did not see (it retries on the new document).

use crate::meta::{decode, encode, esc, Catalog};
use crate::store::{Guard, Write};
use bson::{Bson, Document};
use docdb::{DocError, DocResult};
use server::users::UserStore;

/// Attempts of one update that other routers' changes keep overtaking.
const MAX_ATTEMPTS: usize = 16;

pub struct ClusterUsers {
    catalog: Catalog,
}

impl ClusterUsers {
    pub fn new(catalog: Catalog) -> ClusterUsers {
        ClusterUsers { catalog }
    }
    fn key(&self, id: &str) -> String {
        self.catalog.key(&["users", &esc(id)])
    }
    fn prefix(&self) -> String {
        self.catalog.key(&["users", ""])
    }
}

impl UserStore for ClusterUsers {
    fn get(&self, id: &str) -> DocResult<Option<Document>> {
        self.catalog
            .store()
            .get(&self.key(id))?
            .map(|kv| decode(&kv))
            .transpose()
    }
    fn any(&self) -> DocResult<bool> {
        Ok(!self.catalog.store().list(&self.prefix())?.0.is_empty())
    }
    fn insert(&self, user: Document) -> DocResult<bool> {
        let id = user
            .get_str("_id")
            .map_err(|_| DocError::bad_value("a user document needs a string _id"))?;
        let key = self.key(id);
        let absent = Guard {
            key: key.clone(),
            mod_revision: 0,
        };
        self.catalog
            .store()
            .commit(&[absent], &[Write::Put(key, encode(&user))])
    }
    fn set_fields(&self, id: &str, fields: Document) -> DocResult<bool> {
        let key = self.key(id);
        for _ in 0..MAX_ATTEMPTS {
            let Some(kv) = self.catalog.store().get(&key)? else {
                return Ok(false);
            };
            let mut user = decode(&kv)?;
            for (k, v) in &fields {
                user.insert(k.clone(), v.clone());
            }
            let read = Guard {
                key: key.clone(),
                mod_revision: kv.mod_revision,
            };
            let put = Write::Put(key.clone(), encode(&user));
            if self.catalog.store().commit(&[read], &[put])? {
                return Ok(true);
            }
        }
        Err(DocError::with_code(
            112,
            "WriteConflict",
            format!("user {id} kept changing under this update; try again"),
        ))
    }
    fn remove(&self, id: &str) -> DocResult<bool> {
        let key = self.key(id);
        let Some(kv) = self.catalog.store().get(&key)? else {
            return Ok(false);
        };
        let read = Guard {
            key: key.clone(),
            mod_revision: kv.mod_revision,
        };
        self.catalog.store().commit(&[read], &[Write::Delete(key)])
    }
    fn all(&self) -> DocResult<Vec<Document>> {
        let (kvs, _) = self.catalog.store().list(&self.prefix())?;
        let mut users: Vec<Document> = kvs.iter().map(decode).collect::<DocResult<_>>()?;
        users.sort_by(|a, b| id_of(a).cmp(id_of(b)));
        Ok(users)
    }
}

fn id_of(u: &Document) -> &str {
    match u.get("_id") {
        Some(Bson::String(s)) => s,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::DEFAULT_ROOT;
    use crate::store::MemoryStore;
    use bson::doc;
    use std::sync::Arc;

    fn users() -> ClusterUsers {
        ClusterUsers::new(Catalog::new(Arc::new(MemoryStore::default()), DEFAULT_ROOT))
    }

    #[test]
    fn users_are_created_once_changed_and_removed() {
        let u = users();
        assert!(!u.any().unwrap());
        assert!(u.insert(doc! {"_id": "admin.b/oss", "roles": []}).unwrap());
        assert!(!u.insert(doc! {"_id": "admin.b/oss", "roles": [1]}).unwrap());
        assert!(u.any().unwrap());
        assert!(u.insert(doc! {"_id": "admin.ann"}).unwrap());
        let ids: Vec<String> = u
            .all()
            .unwrap()
            .iter()
            .map(|d| id_of(d).to_string())
            .collect();
        assert_eq!(ids, ["admin.ann", "admin.b/oss"]);
        assert!(u.set_fields("admin.b/oss", doc! {"roles": ["x"]}).unwrap());
        assert_eq!(
            u.get("admin.b/oss").unwrap().unwrap(),
            doc! {"_id": "admin.b/oss", "roles": ["x"]}
        );
        assert!(!u.set_fields("admin.nobody", doc! {"roles": []}).unwrap());
        assert!(u.remove("admin.b/oss").unwrap());
        assert!(!u.remove("admin.b/oss").unwrap());
        assert!(u.get("admin.b/oss").unwrap().is_none());
    }

    /// The user commands of the server, run over the cluster's store: what a router's
    /// createUser writes is what its saslStart reads.
    #[test]
    fn the_server_user_commands_run_over_the_store() {
        let u = users();
        let create = doc! {"createUser": "ann", "pwd": "secret", "roles": ["readWrite"]};
        server::auth::create_user(&u, "app", &create).unwrap();
        let again = server::auth::create_user(&u, "app", &create).unwrap_err();
        assert_eq!(again.code, 51003);
        let grant = doc! {"grantRolesToUser": "ann", "roles": [{"role": "read", "db": "other"}]};
        server::auth::change_roles(&u, "app", &grant, true).unwrap();
        let info = server::auth::users_info(&u, "app", &doc! {"usersInfo": "ann"}).unwrap();
        let listed = info.get_array("users").unwrap();
        assert_eq!(listed.len(), 1);
        let ann = listed[0].as_document().unwrap();
        assert_eq!(server::auth::roles_of(ann).len(), 2);
        assert!(!ann.contains_key("credentials"));
        server::auth::drop_user(&u, "app", &doc! {"dropUser": "ann"}).unwrap();
        assert!(!u.any().unwrap());
    }
}
