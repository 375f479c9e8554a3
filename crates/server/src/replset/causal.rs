//! Causal consistency on a member: the cluster time gossiped in every reply (`$clusterTime`,
//! `operationTime`) and taken from every command, and read concern `afterClusterTime`, which a
//! read waits for before it runs (docs/replication.md, "Causal consistency").
//!
//! The member's cluster time is the newest of its oplog's newest `ts` and the newest time a
//! trusted client gossiped to it (at most [`MAX_AHEAD_SECS`] past this member's wall clock).
//! Times are not signed (mongod without keys sends the same zero signature): with
//! authorization on, only an authenticated connection's `$clusterTime` advances the clock.

use super::ReplSet;
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, Timestamp};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How far past this member's wall clock a gossiped cluster time may be (mongod bounds it by
/// `maxAcceptableLogicalClockDriftSecs`, a year; here a minute, because the oplog's clock is
/// the wall clock's: a primary reaches a time ahead of it only by waiting for it, see
/// [`wait_after`]).
pub const MAX_AHEAD_SECS: u32 = 60;

/// How often a read that waits for `afterClusterTime` looks at the oplog again.
const POLL: Duration = Duration::from_millis(2);

/// The newest cluster time clients gossiped to this member.
pub struct ClusterClock {
    gossiped: Mutex<Timestamp>,
}

impl Default for ClusterClock {
    fn default() -> Self {
        ClusterClock {
            gossiped: Mutex::new(super::stored::ZERO_TS),
        }
    }
}

impl ClusterClock {
    /// Moves the gossiped time forward to `t` if it is newer.
    fn advance(&self, t: Timestamp) {
        let mut g = self.gossiped.lock();
        if ts_newer(t, *g) {
            *g = t;
        }
    }

    fn get(&self) -> Timestamp {
        *self.gossiped.lock()
    }
}

fn ts_newer(a: Timestamp, b: Timestamp) -> bool {
    (a.time, a.increment) > (b.time, b.increment)
}

fn ts_max(a: Timestamp, b: Timestamp) -> Timestamp {
    if ts_newer(a, b) {
        a
    } else {
        b
    }
}

/// The newest oplog `ts` on this member (its last applied or written op).
fn op_time(rs: &ReplSet) -> Timestamp {
    rs.db.oplog().expect("a member has an oplog").last_ts()
}

/// The member's cluster time: its newest op or a newer gossiped time.
pub fn cluster_time(rs: &ReplSet) -> Timestamp {
    ts_max(op_time(rs), rs.clock.get())
}

fn now_secs() -> u32 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

/// The time a command's `$clusterTime` carries (`None` without one); a malformed one is refused.
pub fn gossiped_time(cmd: &Document) -> DocResult<Option<Timestamp>> {
    let Some(ct) = cmd.get("$clusterTime") else {
        return Ok(None);
    };
    let Bson::Document(ct) = ct else {
        return Err(DocError::type_mismatch("$clusterTime must be an object"));
    };
    match ct.get("clusterTime") {
        Some(Bson::Timestamp(t)) => Ok(Some(*t)),
        Some(_) => Err(DocError::type_mismatch(
            "$clusterTime.clusterTime must be a Timestamp",
        )),
        None => Err(DocError::no_such_key(
            "$clusterTime must have a clusterTime field",
        )),
    }
}

/// Takes the cluster time a command gossips: refused if it is more than [`MAX_AHEAD_SECS`] past
/// `now` (mongod's ClusterTimeFailsRateLimiter, 209); it advances the member's clock only if
/// `trusted` (authorization off, or an authenticated connection).
pub fn gossip_in(rs: &ReplSet, cmd: &Document, trusted: bool, now: u32) -> DocResult<()> {
    let Some(t) = gossiped_time(cmd)? else {
        return Ok(());
    };
    check_not_too_far_ahead(t, now)?;
    if trusted {
        rs.clock.advance(t);
    }
    Ok(())
}

/// Refuses a gossiped time more than [`MAX_AHEAD_SECS`] past `now` (seconds).
fn check_not_too_far_ahead(t: Timestamp, now: u32) -> DocResult<()> {
    if t.time > now.saturating_add(MAX_AHEAD_SECS) {
        return Err(DocError::with_code(
            209,
            "ClusterTimeFailsRateLimiter",
            format!("New cluster time, {t}, is too far from this node's wall clock time, {now} (at most {MAX_AHEAD_SECS} s ahead)"),
        ));
    }
    Ok(())
}

/// [`gossip_in`] at the wall clock's second.
pub fn gossip_in_now(rs: &ReplSet, cmd: &Document, trusted: bool) -> DocResult<()> {
    gossip_in(rs, cmd, trusted, now_secs())
}

/// Adds `operationTime` and `$clusterTime` (mongod's unsigned form) to a member's reply, once
/// its oplog holds an entry (a zero time would have drivers send a null `afterClusterTime`).
pub fn gossip_out(rs: &ReplSet, reply: &mut Document) {
    let op = op_time(rs);
    let cluster = cluster_time(rs);
    if cluster.time == 0 {
        return;
    }
    let hash = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0; 20],
    };
    reply.insert(
        "$clusterTime",
        doc! {"clusterTime": cluster, "signature": {"hash": hash, "keyId": 0_i64}},
    );
    if op.time != 0 {
        reply.insert("operationTime", op);
    }
}

/// The read concern's `afterClusterTime`, checked: a non-null Timestamp, with level `local`,
/// `majority` or none, or `snapshot` on a transaction's first statement (the transaction's
/// snapshot is taken after the wait; a snapshot read outside a transaction is not served).
pub fn after_cluster_time(cmd: &Document) -> DocResult<Option<Timestamp>> {
    let Ok(rc) = cmd.get_document("readConcern") else {
        return Ok(None);
    };
    let t = match rc.get("afterClusterTime") {
        None => return Ok(None),
        Some(Bson::Timestamp(t)) => *t,
        Some(_) => {
            return Err(DocError::type_mismatch(
                "readConcern.afterClusterTime must be a Timestamp",
            ))
        }
    };
    if t.time == 0 && t.increment == 0 {
        return Err(DocError::invalid_options(
            "readConcern.afterClusterTime cannot be a null timestamp",
        ));
    }
    match rc.get("level") {
        None => Ok(Some(t)),
        Some(Bson::String(l)) if l == "local" || l == "majority" => Ok(Some(t)),
        Some(Bson::String(l)) if l == "snapshot" && cmd.contains_key("startTransaction") => {
            Ok(Some(t))
        }
        Some(_) => Err(DocError::invalid_options(
            "readConcern.afterClusterTime can be set only with level local or majority, or \
             snapshot in a transaction (a snapshot read outside one is not served)",
        )),
    }
}

/// mongod's refusal of `afterClusterTime` on a standalone.
pub fn standalone_refusal() -> DocError {
    DocError::illegal_operation(
        "Cannot specify afterClusterTime readConcern without replication enabled",
    )
}

/// Waits, before a read runs, until this member's oplog holds `t` (for level `majority` the
/// read's own wait afterwards covers the majority: a secondary applies committed entries only,
/// and a primary waits for its newest entry, at or after `t`). `t` past the member's cluster
/// time is refused, as mongod refuses it. A writable primary whose oplog ends before `t` writes
/// a no-op once its wall clock has passed `t`'s second (its oplog's clock is the wall clock's,
/// so the no-op lands after `t`), as mongod's primary writes one; a secondary waits for the
/// primary's entries (its writes, or its periodic no-op within 10 s). Bounded by `deadline`
/// and the command's interrupt (maxTimeMS, killOp).
pub fn wait_after(rs: &ReplSet, t: Timestamp, deadline: Instant) -> DocResult<()> {
    let current = cluster_time(rs);
    if ts_newer(t, current) {
        return Err(DocError::invalid_options(format!(
            "readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: {t}; current clusterTime: {current}"
        )));
    }
    // Set once the member turns out not to be the writable primary: it waits for the primary.
    let mut secondary = false;
    while ts_newer(t, op_time(rs)) {
        if let Some(i) = crate::ops::current() {
            i.check()?;
        }
        if Instant::now() >= deadline {
            return Err(DocError::with_code(
                50,
                "MaxTimeMSExpired",
                format!("operation exceeded time limit while waiting for this member's oplog to reach afterClusterTime {t}"),
            ));
        }
        if !secondary && now_secs() > t.time {
            secondary = !noop_past(rs)?;
        }
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// On the writable primary, writes and proposes a no-op (mongod's "noop write for
/// afterClusterTime read concern"); whether this member was the writable primary.
fn noop_past(rs: &ReplSet) -> DocResult<bool> {
    let Some(gate) = rs.write_gate() else {
        return Ok(false);
    };
    rs.db
        .log_noop(doc! {"msg": "noop write for afterClusterTime read concern"})?;
    gate.joined.ship(&rs.db)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_cluster_time_is_parsed_or_refused_with_mongods_codes() {
        let rc = |rc: Document| after_cluster_time(&doc! {"find": "c", "readConcern": rc});
        let t = Timestamp {
            time: 5,
            increment: 2,
        };
        assert_eq!(after_cluster_time(&doc! {"find": "c"}).unwrap(), None);
        let snapshot = doc! {"level": "snapshot", "afterClusterTime": t};
        let first = doc! {"find": "c", "readConcern": snapshot, "startTransaction": true};
        assert_eq!(after_cluster_time(&first).unwrap(), Some(t));
        assert_eq!(rc(doc! {"level": "majority"}).unwrap(), None);
        assert_eq!(rc(doc! {"afterClusterTime": t}).unwrap(), Some(t));
        assert_eq!(
            rc(doc! {"level": "local", "afterClusterTime": t}).unwrap(),
            Some(t)
        );
        assert_eq!(
            rc(doc! {"level": "majority", "afterClusterTime": t}).unwrap(),
            Some(t)
        );
        for level in ["available", "linearizable", "snapshot"] {
            let e = rc(doc! {"level": level, "afterClusterTime": t}).unwrap_err();
            assert_eq!(e.code, 72, "{level}");
        }
        let zero = Timestamp {
            time: 0,
            increment: 0,
        };
        assert_eq!(rc(doc! {"afterClusterTime": zero}).unwrap_err().code, 72);
        assert_eq!(rc(doc! {"afterClusterTime": 5}).unwrap_err().code, 14);
    }

    #[test]
    fn a_gossiped_time_is_checked_for_shape() {
        let t = Timestamp {
            time: 9,
            increment: 1,
        };
        assert_eq!(gossiped_time(&doc! {"ping": 1}).unwrap(), None);
        assert_eq!(
            gossiped_time(&doc! {"ping": 1, "$clusterTime": {"clusterTime": t}}).unwrap(),
            Some(t)
        );
        let bad = |ct: Bson| gossiped_time(&doc! {"ping": 1, "$clusterTime": ct}).unwrap_err();
        assert_eq!(bad(Bson::Int32(1)).code, 14);
        assert_eq!(bad(Bson::Document(doc! {"clusterTime": 1})).code, 14);
        assert_eq!(bad(Bson::Document(doc! {})).code, 4);
        let now = 1000;
        let ahead = |s| Timestamp {
            time: now + s,
            increment: 7,
        };
        assert!(check_not_too_far_ahead(ahead(MAX_AHEAD_SECS), now).is_ok());
        assert_eq!(
            check_not_too_far_ahead(ahead(MAX_AHEAD_SECS + 1), now)
                .unwrap_err()
                .code,
            209
        );
    }

    #[test]
    fn the_clock_only_moves_forward() {
        let clock = ClusterClock::default();
        let at = |time, increment| Timestamp { time, increment };
        clock.advance(at(10, 3));
        clock.advance(at(10, 2));
        clock.advance(at(9, 50));
        assert_eq!(clock.get(), at(10, 3));
        clock.advance(at(11, 1));
        assert_eq!(clock.get(), at(11, 1));
        assert_eq!(ts_max(at(3, 1), at(2, 9)), at(3, 1));
    }
}

/// The gossip and the wait on a member not yet in a set (its oplog written by hand).
#[cfg(test)]
mod member_tests {
    use super::*;
    use docdb::oplog::OplogSettings;
    use docdb::{DocDb, DocDbConfig};

    fn member(dir: &std::path::Path) -> std::sync::Arc<ReplSet> {
        let mut cfg = DocDbConfig::in_memory();
        cfg.oplog = Some(OplogSettings::from_mb(16.0).unwrap());
        let db = DocDb::open(cfg).unwrap();
        let mut server = crate::config::ServerConfig::default();
        server.storage.db_path = dir.to_path_buf();
        let rs = ReplSet::open("rs", db, &server, None).unwrap();
        rs.db.log_noop(doc! {"msg": "first"}).unwrap();
        rs
    }

    fn with_time(t: Timestamp) -> Document {
        doc! {"ping": 1, "$clusterTime": {"clusterTime": t}}
    }

    #[test]
    fn only_a_trusted_gossip_moves_the_cluster_time_and_replies_carry_it() {
        let dir = tempfile::tempdir().unwrap();
        let rs = member(dir.path());
        let op = op_time(&rs);
        let now = now_secs();
        let ahead = Timestamp {
            time: now + 30,
            increment: 1,
        };
        gossip_in(&rs, &with_time(ahead), false, now).unwrap();
        assert_eq!(cluster_time(&rs), op);
        gossip_in(&rs, &with_time(ahead), true, now).unwrap();
        assert_eq!(cluster_time(&rs), ahead);
        assert_eq!(op_time(&rs), op, "the gossip leaves the oplog alone");
        let mut reply = doc! {"ok": 1.0};
        gossip_out(&rs, &mut reply);
        assert_eq!(reply.get_timestamp("operationTime"), Ok(op));
        let ct = reply.get_document("$clusterTime").unwrap();
        assert_eq!(ct.get_timestamp("clusterTime"), Ok(ahead));
        assert_eq!(
            ct.get_document("signature").unwrap().get_i64("keyId"),
            Ok(0)
        );
        rs.shutdown();
    }

    #[test]
    fn after_cluster_time_is_refused_past_the_cluster_time_and_bounded_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let rs = member(dir.path());
        let op = op_time(&rs);
        let soon = Instant::now() + Duration::from_millis(100);
        // What the oplog holds: no wait.
        wait_after(&rs, op, soon).unwrap();
        let later = Timestamp {
            time: op.time + 20,
            increment: 1,
        };
        assert_eq!(wait_after(&rs, later, soon).unwrap_err().code, 72);
        rs.clock.advance(later);
        // Not a writable primary: nothing writes past it, so the deadline ends the wait.
        assert_eq!(wait_after(&rs, later, soon).unwrap_err().code, 50);
        rs.shutdown();
    }
}
