//! The cluster metadata, in MongoDB 3.6's shapes (`config.shards`, `databases`,
//! `collections`, `chunks`, `settings`, `changelog`, `tags`), kept in a [`MetaStore`] under
//! one root:
//!
//! ```text
//! <root>/shards/<name>                 {_id, host, state, draining?}
//! <root>/databases/<db>                {_id, primary, partitioned}
//! <root>/coll/<ns>/meta                {_id: ns, key, unique, lastmodEpoch, lastmod, dropped, uuid, noBalance}
//! <root>/coll/<ns>/chunk/<hex(min)>    {_id, ns, min, max, shard, lastmod: Timestamp(major, minor), lastmodEpoch}
//! <root>/coll/<ns>/migration           the one migration of the collection in flight
//! <root>/settings/<id>                 {_id: "chunksize", value} | {_id: "balancer", ...} | ...
//! <root>/changelog/<time>-<n>          {_id, server, time, what, ns, details}
//! <root>/users/<db.user>               the cluster's users, in mongod's shape (`users`)
//! ```
//!
//! A collection's metadata and chunks share a prefix, so one read returns them at one
//! revision. Every change to a collection's chunks rewrites its `meta` key under a guard on
//! the revision that was read, so chunk changes of one collection are serialized: of two
//! routers splitting or moving at once, exactly one commits. Values are BSON.

use crate::shardkey::ShardKey;
use crate::store::{Guard, KeyValue, MetaStore, Write};
use crate::version::ChunkVersion;
use bson::{doc, oid::ObjectId, Bson, Document};
use docdb::{DocError, DocResult};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const DEFAULT_ROOT: &str = "/flashdoc/config";

#[derive(Clone)]
pub struct Catalog {
    store: Arc<dyn MetaStore>,
    root: String,
}

/// One chunk, with its bounds' KeyStrings for ordering.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub min: Document,
    pub max: Document,
    pub min_enc: Vec<u8>,
    pub max_enc: Vec<u8>,
    pub shard: String,
    pub version: ChunkVersion,
    pub jumbo: bool,
}

impl Chunk {
    pub fn contains(&self, pos: &[u8]) -> bool {
        self.min_enc.as_slice() <= pos && pos < self.max_enc.as_slice()
    }
    pub fn to_doc(&self, ns: &str) -> Document {
        let mut d = doc! {
            "_id": chunk_id(ns, &self.min),
            "ns": ns,
            "min": self.min.clone(),
            "max": self.max.clone(),
            "shard": self.shard.clone(),
            "lastmod": self.version.lastmod(),
            "lastmodEpoch": self.version.epoch,
        };
        if self.jumbo {
            d.insert("jumbo", true);
        }
        d
    }
    fn from_doc(d: &Document, key: &ShardKey) -> DocResult<Chunk> {
        let bad = |f: &str| DocError::internal_error(format!("corrupt chunk metadata ({f}): {d}"));
        let min = d.get_document("min").map_err(|_| bad("min"))?.clone();
        let max = d.get_document("max").map_err(|_| bad("max"))?.clone();
        let epoch = d
            .get_object_id("lastmodEpoch")
            .map_err(|_| bad("lastmodEpoch"))?;
        Ok(Chunk {
            min_enc: key.encode(&min),
            max_enc: key.encode(&max),
            min,
            max,
            shard: d.get_str("shard").map_err(|_| bad("shard"))?.to_string(),
            version: ChunkVersion::from_lastmod(d.get("lastmod").unwrap_or(&Bson::Null), epoch)?,
            jumbo: d.get_bool("jumbo").unwrap_or(false),
        })
    }
}

/// config.chunks' `_id`: the namespace and the min bound, as 3.6 builds it.
pub fn chunk_id(ns: &str, min: &Document) -> String {
    let parts: Vec<String> = min.iter().map(|(k, v)| format!("{k}_{v}")).collect();
    format!("{ns}-{}", parts.join("_"))
}

/// A sharded collection as read at one revision.
#[derive(Clone, Debug)]
pub struct CollSnapshot {
    pub ns: String,
    pub doc: Document,
    pub key: ShardKey,
    pub epoch: ObjectId,
    pub unique: bool,
    /// The revision of the `meta` key (every chunk change is guarded by it).
    pub meta_rev: i64,
    /// Chunks in key order.
    pub chunks: Vec<Chunk>,
}

impl CollSnapshot {
    /// The highest chunk version (the collection version).
    pub fn version(&self) -> ChunkVersion {
        self.chunks
            .iter()
            .map(|c| c.version)
            .max_by_key(|v| (v.major, v.minor))
            .unwrap_or_else(|| ChunkVersion::new(self.epoch, 0, 0))
    }
    /// A shard's version: its highest chunk version, `(epoch, 0, 0)` if it owns none.
    pub fn shard_version(&self, shard: &str) -> ChunkVersion {
        self.chunks
            .iter()
            .filter(|c| c.shard == shard)
            .map(|c| c.version)
            .max_by_key(|v| (v.major, v.minor))
            .unwrap_or_else(|| ChunkVersion::new(self.epoch, 0, 0))
    }
    pub fn chunk_at(&self, pos: &[u8]) -> Option<&Chunk> {
        let i = self.chunks.partition_point(|c| c.min_enc.as_slice() <= pos);
        i.checked_sub(1)
            .map(|i| &self.chunks[i])
            .filter(|c| c.contains(pos))
    }
    /// The chunk with exactly these bounds.
    pub fn chunk_with_bounds(&self, min: &Document, max: &Document) -> Option<&Chunk> {
        let (lo, hi) = (self.key.encode(min), self.key.encode(max));
        self.chunks
            .iter()
            .find(|c| c.min_enc == lo && c.max_enc == hi)
    }
    pub fn shards(&self) -> Vec<String> {
        let mut s: Vec<String> = self.chunks.iter().map(|c| c.shard.clone()).collect();
        s.sort();
        s.dedup();
        s
    }
    /// Checks the invariant: chunks tile [MinKey, MaxKey) without gaps or overlaps.
    pub fn check_tiling(&self) -> DocResult<()> {
        let min = self.key.encode(&self.key.min_bound());
        let max = self.key.encode(&self.key.max_bound());
        let mut at = min;
        for c in &self.chunks {
            if c.min_enc != at || c.min_enc >= c.max_enc {
                return Err(DocError::internal_error(format!(
                    "chunks of {} do not tile the key space at {}",
                    self.ns, c.min
                )));
            }
            at = c.max_enc.clone();
        }
        if at != max {
            return Err(DocError::internal_error(format!(
                "chunks of {} end before MaxKey",
                self.ns
            )));
        }
        Ok(())
    }
}

/// A database's entry.
#[derive(Clone, Debug, PartialEq)]
pub struct DatabaseEntry {
    pub name: String,
    pub primary: String,
    pub partitioned: bool,
}

/// A chunk change to commit: chunks whose old entries go (by min) and chunks to write.
#[derive(Default)]
pub struct ChunkChange {
    pub remove: Vec<Document>,
    pub put: Vec<Chunk>,
    /// Extra guards (the migration record) and writes (its deletion).
    pub guards: Vec<Guard>,
    pub writes: Vec<Write>,
    pub changelog: Option<(String, Document)>,
}

static CHANGELOG_SEQ: AtomicU64 = AtomicU64::new(0);

pub(crate) fn esc(ns: &str) -> String {
    ns.replace('%', "%25").replace('/', "%2F")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn decode(kv: &KeyValue) -> DocResult<Document> {
    Document::from_reader(kv.value.as_slice())
        .map_err(|e| DocError::internal_error(format!("corrupt metadata at {}: {e}", kv.key)))
}

pub(crate) fn encode(d: &Document) -> Vec<u8> {
    bson::to_vec(d).expect("documents always serialize")
}

impl Catalog {
    pub fn new(store: Arc<dyn MetaStore>, root: &str) -> Catalog {
        Catalog {
            store,
            root: root.trim_end_matches('/').to_string(),
        }
    }
    pub fn store(&self) -> &Arc<dyn MetaStore> {
        &self.store
    }
    pub(crate) fn key(&self, parts: &[&str]) -> String {
        let mut k = self.root.clone();
        for p in parts {
            k.push('/');
            k.push_str(p);
        }
        k
    }
    fn coll_prefix(&self, ns: &str) -> String {
        format!("{}/coll/{}/", self.root, esc(ns))
    }
    fn chunk_key(&self, ns: &str, key: &ShardKey, min: &Document) -> String {
        format!("{}chunk/{}", self.coll_prefix(ns), hex(&key.encode(min)))
    }
    pub fn migration_key(&self, ns: &str) -> String {
        format!("{}migration", self.coll_prefix(ns))
    }

    fn list_docs(&self, prefix: &str) -> DocResult<Vec<(Document, i64)>> {
        let (kvs, _) = self.store.list(prefix)?;
        kvs.iter()
            .map(|kv| Ok((decode(kv)?, kv.mod_revision)))
            .collect()
    }

    // ------------------------------------------------------------------ shards

    pub fn shards(&self) -> DocResult<Vec<Document>> {
        Ok(self
            .list_docs(&self.key(&["shards", ""]))?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }
    pub fn shard(&self, name: &str) -> DocResult<Option<(Document, i64)>> {
        match self.store.get(&self.key(&["shards", name]))? {
            Some(kv) => Ok(Some((decode(&kv)?, kv.mod_revision))),
            None => Ok(None),
        }
    }
    /// Adds a shard; `false` if the name is taken.
    pub fn add_shard(&self, doc: &Document) -> DocResult<bool> {
        let name = doc.get_str("_id").expect("shard docs have _id");
        let key = self.key(&["shards", name]);
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: 0,
            }],
            &[Write::Put(key, encode(doc))],
        )
    }
    pub fn put_shard(&self, doc: &Document, rev: i64) -> DocResult<bool> {
        let key = self.key(&["shards", doc.get_str("_id").expect("_id")]);
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: rev,
            }],
            &[Write::Put(key, encode(doc))],
        )
    }
    pub fn remove_shard(&self, name: &str, rev: i64) -> DocResult<bool> {
        let key = self.key(&["shards", name]);
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: rev,
            }],
            &[Write::Delete(key)],
        )
    }

    // ------------------------------------------------------------------ databases

    pub fn databases(&self) -> DocResult<Vec<Document>> {
        Ok(self
            .list_docs(&self.key(&["databases", ""]))?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }
    pub fn database(&self, db: &str) -> DocResult<Option<(DatabaseEntry, i64)>> {
        let Some(kv) = self.store.get(&self.key(&["databases", db]))? else {
            return Ok(None);
        };
        let d = decode(&kv)?;
        Ok(Some((
            DatabaseEntry {
                name: db.to_string(),
                primary: d.get_str("primary").unwrap_or_default().to_string(),
                partitioned: d.get_bool("partitioned").unwrap_or(false),
            },
            kv.mod_revision,
        )))
    }
    /// Writes a database entry if its revision is still `rev` (0: create).
    pub fn put_database(&self, e: &DatabaseEntry, rev: i64) -> DocResult<bool> {
        let key = self.key(&["databases", &e.name]);
        let d = doc! {"_id": e.name.clone(), "primary": e.primary.clone(), "partitioned": e.partitioned};
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: rev,
            }],
            &[Write::Put(key, encode(&d))],
        )
    }
    pub fn delete_database(&self, db: &str) -> DocResult<()> {
        let key = self.key(&["databases", db]);
        self.store.commit(&[], &[Write::Delete(key)])?;
        Ok(())
    }

    // ------------------------------------------------------------------ collections

    /// Every sharded collection's `meta` document.
    pub fn collections(&self) -> DocResult<Vec<Document>> {
        let (kvs, _) = self.store.list(&self.key(&["coll", ""]))?;
        kvs.iter()
            .filter(|kv| kv.key.ends_with("/meta"))
            .map(decode)
            .collect()
    }
    /// Every chunk document of every collection.
    pub fn all_chunks(&self) -> DocResult<Vec<Document>> {
        let (kvs, _) = self.store.list(&self.key(&["coll", ""]))?;
        kvs.iter()
            .filter(|kv| kv.key.contains("/chunk/"))
            .map(decode)
            .collect()
    }
    /// Every in-flight migration record.
    pub fn migrations(&self) -> DocResult<Vec<(Document, i64)>> {
        let (kvs, _) = self.store.list(&self.key(&["coll", ""]))?;
        kvs.iter()
            .filter(|kv| kv.key.ends_with("/migration"))
            .map(|kv| Ok((decode(kv)?, kv.mod_revision)))
            .collect()
    }

    /// A sharded collection's metadata and chunks at one revision (`None`: not sharded).
    pub fn collection(&self, ns: &str) -> DocResult<Option<CollSnapshot>> {
        let (kvs, _) = self.store.list(&self.coll_prefix(ns))?;
        let Some(meta) = kvs.iter().find(|kv| kv.key.ends_with("/meta")) else {
            return Ok(None);
        };
        let doc = decode(meta)?;
        if doc.get_bool("dropped").unwrap_or(false) {
            return Ok(None);
        }
        let key = ShardKey::parse(doc.get_document("key").map_err(|_| {
            DocError::internal_error(format!("corrupt collection metadata for {ns}"))
        })?)?;
        let epoch = doc
            .get_object_id("lastmodEpoch")
            .map_err(|_| DocError::internal_error(format!("no epoch for {ns}")))?;
        let mut chunks = Vec::new();
        for kv in kvs.iter().filter(|kv| kv.key.contains("/chunk/")) {
            chunks.push(Chunk::from_doc(&decode(kv)?, &key)?);
        }
        chunks.sort_by(|a, b| a.min_enc.cmp(&b.min_enc));
        let snap = CollSnapshot {
            ns: ns.to_string(),
            unique: doc.get_bool("unique").unwrap_or(false),
            doc,
            key,
            epoch,
            meta_rev: meta.mod_revision,
            chunks,
        };
        snap.check_tiling()?;
        Ok(Some(snap))
    }

    /// Creates a sharded collection with its initial chunks; `false` if it already exists.
    pub fn create_collection(
        &self,
        ns: &str,
        key: &ShardKey,
        unique: bool,
        epoch: ObjectId,
        chunks: &[Chunk],
    ) -> DocResult<bool> {
        let meta_key = format!("{}meta", self.coll_prefix(ns));
        let meta = doc! {
            "_id": ns, "lastmodEpoch": epoch, "lastmod": bson::DateTime::now(),
            "dropped": false, "key": key.pattern.clone(), "unique": unique,
            "uuid": bson::Uuid::new(), "noBalance": false,
        };
        let mut writes = vec![Write::Put(meta_key.clone(), encode(&meta))];
        for c in chunks {
            writes.push(Write::Put(
                self.chunk_key(ns, key, &c.min),
                encode(&c.to_doc(ns)),
            ));
        }
        writes.push(self.changelog_write(
            "shardCollection",
            ns,
            doc! {"shardKey": key.pattern.clone(), "numChunks": chunks.len() as i64},
        ));
        self.store.commit(
            &[Guard {
                key: meta_key,
                mod_revision: 0,
            }],
            &writes,
        )
    }

    /// Commits a chunk change guarded by the snapshot's revision; `false` if another change
    /// of the collection committed first.
    pub fn commit_chunks(&self, snap: &CollSnapshot, change: ChunkChange) -> DocResult<bool> {
        let meta_key = format!("{}meta", self.coll_prefix(&snap.ns));
        let mut meta = snap.doc.clone();
        meta.insert("lastmod", bson::DateTime::now());
        let mut guards = vec![Guard {
            key: meta_key.clone(),
            mod_revision: snap.meta_rev,
        }];
        guards.extend(change.guards);
        let mut writes = vec![Write::Put(meta_key, encode(&meta))];
        for min in &change.remove {
            writes.push(Write::Delete(self.chunk_key(&snap.ns, &snap.key, min)));
        }
        for c in &change.put {
            writes.push(Write::Put(
                self.chunk_key(&snap.ns, &snap.key, &c.min),
                encode(&c.to_doc(&snap.ns)),
            ));
        }
        writes.extend(change.writes);
        if let Some((what, details)) = change.changelog {
            writes.push(self.changelog_write(&what, &snap.ns, details));
        }
        self.store.commit(&guards, &writes)
    }

    /// Removes a sharded collection's metadata (guarded by the snapshot).
    pub fn drop_collection(&self, snap: &CollSnapshot) -> DocResult<bool> {
        let meta_key = format!("{}meta", self.coll_prefix(&snap.ns));
        let (kvs, _) = self.store.list(&self.coll_prefix(&snap.ns))?;
        let mut writes: Vec<Write> = kvs.into_iter().map(|kv| Write::Delete(kv.key)).collect();
        writes.push(self.changelog_write("dropCollection", &snap.ns, doc! {}));
        self.store.commit(
            &[Guard {
                key: meta_key,
                mod_revision: snap.meta_rev,
            }],
            &writes,
        )
    }

    // ------------------------------------------------------------------ migrations

    pub fn migration(&self, ns: &str) -> DocResult<Option<(Document, i64)>> {
        match self.store.get(&self.migration_key(ns))? {
            Some(kv) => Ok(Some((decode(&kv)?, kv.mod_revision))),
            None => Ok(None),
        }
    }
    /// Registers a migration; `false` if the collection already has one in flight.
    pub fn begin_migration(&self, ns: &str, record: &Document) -> DocResult<bool> {
        let key = self.migration_key(ns);
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: 0,
            }],
            &[Write::Put(key, encode(record))],
        )
    }
    /// Deletes a migration record if it is still the one with revision `rev` (an abort).
    pub fn abort_migration(&self, ns: &str, rev: i64) -> DocResult<bool> {
        let key = self.migration_key(ns);
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: rev,
            }],
            &[Write::Delete(key)],
        )
    }

    // ------------------------------------------------------------------ settings, changelog

    pub fn settings(&self) -> DocResult<Vec<Document>> {
        Ok(self
            .list_docs(&self.key(&["settings", ""]))?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }
    pub fn setting(&self, id: &str) -> DocResult<Option<Document>> {
        match self.store.get(&self.key(&["settings", id]))? {
            Some(kv) => Ok(Some(decode(&kv)?)),
            None => Ok(None),
        }
    }
    pub fn put_setting(&self, d: &Document) -> DocResult<()> {
        let id = d
            .get_str("_id")
            .map_err(|_| DocError::bad_value("a config.settings document needs a string _id"))?;
        self.store
            .commit(&[], &[Write::Put(self.key(&["settings", id]), encode(d))])?;
        Ok(())
    }

    pub fn changelog(&self) -> DocResult<Vec<Document>> {
        Ok(self
            .list_docs(&self.key(&["changelog", ""]))?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }
    fn changelog_write(&self, what: &str, ns: &str, details: Document) -> Write {
        let now = bson::DateTime::now();
        let seq = CHANGELOG_SEQ.fetch_add(1, Ordering::Relaxed);
        let id = format!(
            "{}-{:016}-{}-{seq}",
            server::commands::hostname(),
            now.timestamp_millis(),
            std::process::id()
        );
        let d = doc! {"_id": id.clone(), "server": server::commands::hostname(), "time": now, "what": what, "ns": ns, "details": details};
        Write::Put(
            format!(
                "{}/changelog/{:016}-{id}",
                self.root,
                now.timestamp_millis()
            ),
            encode(&d),
        )
    }
    /// Keeps the newest `keep` changelog entries (config.changelog is capped in MongoDB).
    pub fn trim_changelog(&self, keep: usize) -> DocResult<()> {
        let (kvs, _) = self.store.list(&self.key(&["changelog", ""]))?;
        if kvs.len() <= keep {
            return Ok(());
        }
        let writes: Vec<Write> = kvs[..kvs.len() - keep]
            .iter()
            .map(|kv| Write::Delete(kv.key.clone()))
            .collect();
        self.store.commit(&[], &writes)?;
        Ok(())
    }

    /// A lease-like lock: `holder` takes `name` if it is free or its holder's lease expired.
    /// Returns whether `holder` holds it now (for `ttl_ms` from `now_ms`).
    pub fn take_lock(&self, name: &str, holder: &str, now_ms: i64, ttl_ms: i64) -> DocResult<bool> {
        let key = self.key(&["locks", name]);
        let cur = self.store.get(&key)?;
        let rev = match &cur {
            Some(kv) => {
                let d = decode(kv)?;
                let mine = d.get_str("holder").ok() == Some(holder);
                let expired = d.get_i64("until").unwrap_or(0) < now_ms;
                if !mine && !expired {
                    return Ok(false);
                }
                kv.mod_revision
            }
            None => 0,
        };
        let d = doc! {"_id": name, "holder": holder, "until": now_ms + ttl_ms};
        self.store.commit(
            &[Guard {
                key: key.clone(),
                mod_revision: rev,
            }],
            &[Write::Put(key, encode(&d))],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn whole(key: &ShardKey, epoch: ObjectId, shard: &str) -> Chunk {
        Chunk {
            min_enc: key.encode(&key.min_bound()),
            max_enc: key.encode(&key.max_bound()),
            min: key.min_bound(),
            max: key.max_bound(),
            shard: shard.into(),
            version: ChunkVersion::new(epoch, 1, 0),
            jumbo: false,
        }
    }

    #[test]
    fn create_and_race_on_one_chunk() {
        let cat = Catalog::new(Arc::new(MemoryStore::default()), DEFAULT_ROOT);
        let key = ShardKey::parse(&doc! {"a": 1}).unwrap();
        let epoch = ObjectId::new();
        assert!(cat
            .create_collection("t.c", &key, false, epoch, &[whole(&key, epoch, "s0")])
            .unwrap());
        assert!(!cat
            .create_collection("t.c", &key, false, epoch, &[whole(&key, epoch, "s0")])
            .unwrap());
        let snap = cat.collection("t.c").unwrap().unwrap();
        assert_eq!(snap.chunks.len(), 1);
        let split = |at: i32| {
            let c = &snap.chunks[0];
            let mid = doc! {"a": at};
            let v = snap.version();
            let mut left = c.clone();
            left.max = mid.clone();
            left.max_enc = key.encode(&mid);
            left.version = v.next_minor();
            let mut right = c.clone();
            right.min = mid.clone();
            right.min_enc = key.encode(&mid);
            right.version = v.next_minor().next_minor();
            ChunkChange {
                put: vec![left, right],
                ..Default::default()
            }
        };
        // Two routers read the same snapshot; exactly one split commits.
        assert!(cat.commit_chunks(&snap, split(10)).unwrap());
        assert!(!cat.commit_chunks(&snap, split(20)).unwrap());
        let after = cat.collection("t.c").unwrap().unwrap();
        assert_eq!(after.chunks.len(), 2);
        assert_eq!(after.chunks[1].min, doc! {"a": 10});
        assert_eq!(after.version().minor, 2);
        assert_eq!(
            after.chunk_at(&key.encode(&doc! {"a": 50})).unwrap().min,
            doc! {"a": 10}
        );
        assert!(cat.changelog().unwrap().len() == 1);
    }
}
