//! Where the cluster's metadata lives: a key-value store with revisions and compare-and-swap
//! transactions. Production uses etcd ([`EtcdStore`], `sharding.configDB: etcd://…`), which
//! is Raft-replicated; the lab's in-process cluster uses [`MemoryStore`], which keeps the same
//! semantics (one global revision, `mod_revision` per key, all-or-nothing transactions) in one
//! process, so runs are deterministic.
//!
//! Every metadata change is one transaction whose comparisons name the revisions it read:
//! two routers that race on the same chunk both read revision R, the first commit moves the
//! key past R, and the second finds its comparison false and commits nothing.

use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    pub mod_revision: i64,
}

/// A transaction guard: the key's `mod_revision` equals the value (0: the key is absent).
#[derive(Clone, Debug)]
pub struct Guard {
    pub key: String,
    pub mod_revision: i64,
}

#[derive(Clone, Debug)]
pub enum Write {
    Put(String, Vec<u8>),
    Delete(String),
}

pub trait MetaStore: Send + Sync {
    /// Every key under `prefix`, in key order, read at one revision (returned).
    fn list(&self, prefix: &str) -> DocResult<(Vec<KeyValue>, i64)>;
    fn get(&self, key: &str) -> DocResult<Option<KeyValue>>;
    /// Applies `writes` if every guard holds; `false` (nothing written) otherwise.
    fn commit(&self, guards: &[Guard], writes: &[Write]) -> DocResult<bool>;
    /// A short description for messages ("etcd://…", "memory").
    fn describe(&self) -> String;
}

pub fn unreachable(what: impl std::fmt::Display) -> DocError {
    DocError::with_code(
        6,
        "HostUnreachable",
        format!("cluster metadata store: {what}"),
    )
}

/// Opens the store a `configDB` string names: `etcd://host:port[,host:port…]`.
pub fn open(config_db: &str) -> DocResult<Arc<dyn MetaStore>> {
    match config_db.strip_prefix("etcd://") {
        Some(hosts) if !hosts.is_empty() => Ok(Arc::new(EtcdStore::connect(hosts)?)),
        _ => Err(DocError::bad_value(format!(
            "sharding.configDB must be etcd://host:port[,host:port…], not '{config_db}'"
        ))),
    }
}

/// The in-process store.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    revision: i64,
    keys: BTreeMap<String, (Vec<u8>, i64)>,
}

impl MetaStore for MemoryStore {
    fn list(&self, prefix: &str) -> DocResult<(Vec<KeyValue>, i64)> {
        let g = self.inner.lock();
        let out = g
            .keys
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (v, r))| KeyValue {
                key: k.clone(),
                value: v.clone(),
                mod_revision: *r,
            })
            .collect();
        Ok((out, g.revision))
    }
    fn get(&self, key: &str) -> DocResult<Option<KeyValue>> {
        let g = self.inner.lock();
        Ok(g.keys.get(key).map(|(v, r)| KeyValue {
            key: key.to_string(),
            value: v.clone(),
            mod_revision: *r,
        }))
    }
    fn commit(&self, guards: &[Guard], writes: &[Write]) -> DocResult<bool> {
        let mut g = self.inner.lock();
        let holds = guards
            .iter()
            .all(|c| g.keys.get(&c.key).map(|(_, r)| *r).unwrap_or(0) == c.mod_revision);
        if !holds {
            return Ok(false);
        }
        g.revision += 1;
        let rev = g.revision;
        for w in writes {
            match w {
                Write::Put(k, v) => {
                    g.keys.insert(k.clone(), (v.clone(), rev));
                }
                Write::Delete(k) => {
                    g.keys.remove(k);
                }
            }
        }
        Ok(true)
    }
    fn describe(&self) -> String {
        "memory".into()
    }
}

/// etcd through its v3 API (etcd 3.4+). The client is async; calls block on a small runtime
/// of the store's own.
pub struct EtcdStore {
    rt: tokio::runtime::Runtime,
    client: etcd_client::Client,
    endpoints: String,
}

/// How long one etcd call may take before it counts as unreachable.
const ETCD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl EtcdStore {
    pub fn connect(hosts: &str) -> DocResult<EtcdStore> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("flashdoc-etcd")
            .enable_all()
            .build()
            .map_err(|e| unreachable(format!("cannot start its runtime: {e}")))?;
        let endpoints: Vec<String> = hosts
            .split(',')
            .map(|h| format!("http://{}", h.trim()))
            .collect();
        let client = rt
            .block_on(async {
                let opts = etcd_client::ConnectOptions::new()
                    .with_connect_timeout(ETCD_TIMEOUT)
                    .with_timeout(ETCD_TIMEOUT);
                etcd_client::Client::connect(endpoints.clone(), Some(opts)).await
            })
            .map_err(|e| unreachable(format!("cannot connect to etcd at {hosts}: {e}")))?;
        Ok(EtcdStore {
            rt,
            client,
            endpoints: hosts.to_string(),
        })
    }

    fn block<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> DocResult<T> {
        self.rt
            .block_on(f)
            .map_err(|e| unreachable(format!("etcd at {}: {e}", self.endpoints)))
    }
}

impl MetaStore for EtcdStore {
    fn list(&self, prefix: &str) -> DocResult<(Vec<KeyValue>, i64)> {
        let mut c = self.client.clone();
        let resp = self.block(async move {
            c.get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
                .await
        })?;
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut out: Vec<KeyValue> = resp
            .kvs()
            .iter()
            .map(|kv| KeyValue {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                value: kv.value().to_vec(),
                mod_revision: kv.mod_revision(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok((out, rev))
    }
    fn get(&self, key: &str) -> DocResult<Option<KeyValue>> {
        let mut c = self.client.clone();
        let resp = self.block(async move { c.get(key, None).await })?;
        Ok(resp.kvs().first().map(|kv| KeyValue {
            key: key.to_string(),
            value: kv.value().to_vec(),
            mod_revision: kv.mod_revision(),
        }))
    }
    fn commit(&self, guards: &[Guard], writes: &[Write]) -> DocResult<bool> {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp};
        let when: Vec<Compare> = guards
            .iter()
            .map(|g| Compare::mod_revision(g.key.clone(), CompareOp::Equal, g.mod_revision))
            .collect();
        let ops: Vec<TxnOp> = writes
            .iter()
            .map(|w| match w {
                Write::Put(k, v) => TxnOp::put(k.clone(), v.clone(), None),
                Write::Delete(k) => TxnOp::delete(k.clone(), None),
            })
            .collect();
        let mut c = self.client.clone();
        let resp = self.block(async move { c.txn(Txn::new().when(when).and_then(ops)).await })?;
        Ok(resp.succeeded())
    }
    fn describe(&self) -> String {
        format!("etcd://{}", self.endpoints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_guards_and_orders() {
        let s = MemoryStore::default();
        let put = |k: &str, v: &str| Write::Put(k.into(), v.as_bytes().to_vec());
        assert!(s
            .commit(
                &[Guard {
                    key: "a/1".into(),
                    mod_revision: 0
                }],
                &[put("a/1", "x"), put("a/0", "y"), put("b", "z")]
            )
            .unwrap());
        let (l, rev) = s.list("a/").unwrap();
        assert_eq!(rev, 1);
        assert_eq!(
            l.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(),
            ["a/0", "a/1"]
        );
        // A stale guard commits nothing.
        let stale = Guard {
            key: "a/1".into(),
            mod_revision: 0,
        };
        assert!(!s.commit(&[stale], &[Write::Delete("b".into())]).unwrap());
        assert!(s.get("b").unwrap().is_some());
        let fresh = Guard {
            key: "a/1".into(),
            mod_revision: 1,
        };
        assert!(s.commit(&[fresh], &[Write::Delete("b".into())]).unwrap());
        assert!(s.get("b").unwrap().is_none());
    }
}
