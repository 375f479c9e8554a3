//! Shards that are replica sets. The cluster names such a shard as mongod does,
//! `setName/host1,host2,…`; [`SetAwareConnector`] turns that name into a [`ShardConn`] that
//! always sends to the set's current primary. It learns the primary from the members' `hello`
//! (the set's name checked), and when the primary is unreachable or answers that it is no
//! longer primary, it discovers the new one (bounded retries with a short backoff) and sends
//! the command again — when sending it again is safe (`may_resend`). Other host strings go to
//! the wrapped connector unchanged.

use crate::transport::{host_unreachable, is_ok, Connector, ShardConn};
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a command keeps looking for a primary, and the pauses between attempts.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub total: Duration,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// An election on a loaded two-core machine takes a few seconds; 30 s covers several.
    fn default() -> Self {
        RetryPolicy {
            total: Duration::from_secs(30),
            first_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(1000),
        }
    }
}

/// `setName/h1,h2,…` split into the set's name and its seed hosts; `None` for a plain host.
pub fn parse_set_host(host: &str) -> Option<(&str, Vec<&str>)> {
    let (name, rest) = host.split_once('/')?;
    let seeds: Vec<&str> = rest
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    (!name.is_empty() && !seeds.is_empty()).then_some((name, seeds))
}

/// Wraps a connector: replica-set names get a [`SetConn`], other hosts the inner connection.
pub struct SetAwareConnector {
    inner: Arc<dyn Connector>,
    sets: Mutex<HashMap<String, Arc<SetConn>>>,
    policy: RetryPolicy,
}

impl SetAwareConnector {
    pub fn new(inner: Arc<dyn Connector>, policy: RetryPolicy) -> SetAwareConnector {
        SetAwareConnector {
            inner,
            sets: Mutex::default(),
            policy,
        }
    }
}

impl Connector for SetAwareConnector {
    fn connect(&self, host: &str) -> Arc<dyn ShardConn> {
        let Some((name, seeds)) = parse_set_host(host) else {
            return self.inner.connect(host);
        };
        self.sets
            .lock()
            .entry(host.to_string())
            .or_insert_with(|| {
                Arc::new(SetConn {
                    name: name.to_string(),
                    seeds: seeds.into_iter().map(String::from).collect(),
                    inner: self.inner.clone(),
                    primary: Mutex::new(None),
                    policy: self.policy,
                })
            })
            .clone()
    }
}

/// A connection to whichever member of the set `name` is primary.
pub struct SetConn {
    name: String,
    seeds: Vec<String>,
    inner: Arc<dyn Connector>,
    /// The primary last found; forgotten when it fails or says it is no longer primary.
    primary: Mutex<Option<String>>,
    policy: RetryPolicy,
}

/// Codes of a member that refused the command because it is not the primary: the command
/// did not run, so sending it to the new primary cannot run it twice.
const REFUSED_NOT_PRIMARY: &[i32] = &[10107, 13435, 13436];
/// InterruptedDueToReplStateChange: the command started and was stopped by a step-down; part
/// of it may have run.
const INTERRUPTED: i32 = 11602;

/// Commands that only read, or whose second run changes nothing the first did not: these
/// are sent again after an unknown outcome (a lost connection, an interrupted command).
const IDEMPOTENT: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "find",
    "count",
    "distinct",
    "listIndexes",
    "listCollections",
    "listDatabases",
    "collStats",
    "dbStats",
    "splitVector",
    "createIndexes",
    "_flushRoutingTableCacheUpdates",
    "_addShard",
    "_recvChunkStatus",
    "_flashdocLoadSplits",
];

/// Whether a command whose outcome is unknown may be sent again: a read or idempotent
/// command, an aggregation that writes nothing, or a retryable write (lsid + txnNumber outside
/// a transaction), which the shard runs at most once per statement (its session records).
pub fn may_resend(cmd: &Document) -> bool {
    let Some(name) = cmd.keys().next().map(String::as_str) else {
        return false;
    };
    if IDEMPOTENT.contains(&name) {
        return true;
    }
    if name == "aggregate" {
        return !writes_out(cmd);
    }
    cmd.contains_key("lsid") && server::replset::labels::is_retryable_write(name, cmd)
}

fn writes_out(cmd: &Document) -> bool {
    cmd.get_array("pipeline").is_ok_and(|p| {
        p.iter()
            .filter_map(Bson::as_document)
            .any(|s| s.contains_key("$out") || s.contains_key("$merge"))
    })
}

/// What one attempt at the primary came to.
enum Attempt {
    Done(DocResult<Document>),
    /// Send again to a (re)discovered primary, reporting this if time runs out.
    Again(DocError),
}

impl SetConn {
    /// The primary's host: the one known, or the one a member's `hello` names.
    fn primary(&self) -> DocResult<String> {
        if let Some(p) = self.primary.lock().clone() {
            return Ok(p);
        }
        let found = self.discover()?;
        *self.primary.lock() = Some(found.clone());
        Ok(found)
    }

    /// Asks the seeds and the members they list for `hello`; the member that says it is the
    /// writable primary of this set. A member of another set is an error, not a candidate.
    fn discover(&self) -> DocResult<String> {
        let mut candidates: Vec<String> = self.seeds.clone();
        let mut last = host_unreachable(&self.name, "no member of the set answered");
        let mut i = 0;
        while i < candidates.len() && i < 64 {
            let host = candidates[i].clone();
            i += 1;
            let hello = match self
                .inner
                .connect(&host)
                .call(&doc! {"hello": 1, "$db": "admin"})
            {
                Ok(h) if is_ok(&h) => h,
                Ok(h) => {
                    last = crate::transport::reply_error(&h);
                    continue;
                }
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let set = hello.get_str("setName").unwrap_or("");
            if set != self.name {
                return Err(DocError::with_code(
                    96,
                    "OperationFailed",
                    format!(
                        "{host} is not a member of replica set {} (its set: '{set}')",
                        self.name
                    ),
                ));
            }
            if hello.get_bool("isWritablePrimary").unwrap_or(false)
                || hello.get_bool("ismaster").unwrap_or(false)
            {
                return Ok(host);
            }
            last = not_primary(&self.name, &host);
            let mut learned: Vec<String> = Vec::new();
            if let Ok(p) = hello.get_str("primary") {
                learned.push(p.to_string());
            }
            for h in hello.get_array("hosts").into_iter().flatten() {
                if let Some(h) = h.as_str() {
                    learned.push(h.to_string());
                }
            }
            for h in learned {
                if !candidates.contains(&h) {
                    candidates.push(h);
                }
            }
        }
        Err(last)
    }

    fn forget(&self, host: &str) {
        let mut p = self.primary.lock();
        if p.as_deref() == Some(host) {
            *p = None;
        }
    }

    fn attempt(&self, cmd: &Document, resend: bool) -> Attempt {
        let host = match self.primary() {
            Ok(h) => h,
            // Nothing was sent: looking again is always safe.
            Err(e) if e.code == 96 => return Attempt::Done(Err(e)),
            Err(e) => return Attempt::Again(e),
        };
        match self.inner.connect(&host).call(cmd) {
            Ok(reply) => {
                let code = (!is_ok(&reply)).then(|| reply.get_i32("code").unwrap_or(0));
                match code {
                    Some(c) if REFUSED_NOT_PRIMARY.contains(&c) => {
                        self.forget(&host);
                        Attempt::Again(crate::transport::reply_error(&reply))
                    }
                    Some(INTERRUPTED) if resend => {
                        self.forget(&host);
                        Attempt::Again(crate::transport::reply_error(&reply))
                    }
                    Some(INTERRUPTED) => {
                        self.forget(&host);
                        Attempt::Done(Ok(reply))
                    }
                    _ => Attempt::Done(Ok(reply)),
                }
            }
            Err(e) => {
                self.forget(&host);
                if resend {
                    Attempt::Again(e)
                } else {
                    Attempt::Done(Err(e))
                }
            }
        }
    }
}

fn not_primary(set: &str, host: &str) -> DocError {
    DocError::with_code(
        10107,
        "NotWritablePrimary",
        format!("no primary of replica set {set} found (last asked: {host})"),
    )
}

impl ShardConn for SetConn {
    /// Sends `cmd` to the primary; on a refusal by a former primary always, on a lost
    /// connection or an interrupted command only when [`may_resend`], finds the primary again
    /// and resends, backing off, until the policy's total time is spent.
    fn call(&self, cmd: &Document) -> DocResult<Document> {
        let resend = may_resend(cmd);
        let deadline = Instant::now() + self.policy.total;
        let mut backoff = self.policy.first_backoff;
        loop {
            let last = match self.attempt(cmd, resend) {
                Attempt::Done(out) => return out,
                Attempt::Again(e) => e,
            };
            if Instant::now() + backoff > deadline {
                return Err(last);
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(self.policy.max_backoff);
        }
    }
}

#[cfg(test)]
mod tests;
