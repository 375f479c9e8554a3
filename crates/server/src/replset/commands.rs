//! The set's commands: `replSetInitiate`, `replSetGetStatus`, `replSetGetConfig`, the
//! replica-set fields of `hello`, and the members' internal commands (`_replHandshake`,
//! `_replRpc`, `_replJoin`), and the commands of the default read and write concerns
//! (`getDefaultRWConcern`, `setDefaultRWConcern`; `defaults` keeps them).

use super::config::{self as set_config, invalid};
use super::defaults;
use super::stored::ZERO_TS;
use super::{wire, Joined, ReplSet};
use crate::client::ConnInfo;
use crate::failpoint::{self, FailPoints};
use bson::{doc, Bson, DateTime, Document, Timestamp};
use docdb::{DocError, DocResult};
use repl::{LogPosition, Role, RpcKind, Status};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `replSetInitiate` waits for each other member to accept the configuration.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

fn no_replication() -> DocError {
    DocError::with_code(76, "NoReplicationEnabled", "not running with --replSet")
}

pub(super) fn not_yet_initialized() -> DocError {
    DocError::with_code(
        94,
        "NotYetInitialized",
        "no replset config has been received",
    )
}

/// The member, or NoReplicationEnabled on a standalone (which passes `None`).
pub(super) fn replset(member: Option<&Arc<ReplSet>>) -> DocResult<&Arc<ReplSet>> {
    member.ok_or_else(no_replication)
}

/// The host this member answers to before the set names it.
fn default_host(rs: &ReplSet) -> String {
    format!("{}:{}", crate::build_info::hostname(), rs.port)
}

/// AlreadyInitialized (23): this server is a member of a set already.
fn already_initialized() -> DocError {
    DocError::with_code(23, "AlreadyInitialized", "already initialized")
}

/// `replSetInitiate`: checks the configuration, has every other member accept it
/// (`_replJoin`, mongod's quorum check), then starts the set from this member.
pub fn initiate(member: Option<&Arc<ReplSet>>, cmd: &Document) -> DocResult<Document> {
    let rs = replset(member)?;
    let _starting = rs.starting.lock();
    if rs.member().is_some() {
        return Err(already_initialized());
    }
    let given = match cmd.get("replSetInitiate") {
        Some(Bson::Document(d)) if !d.is_empty() => Some(d),
        Some(Bson::Document(_) | Bson::Null) | None => None,
        Some(Bson::Int32(1)) => None,
        Some(_) => {
            return Err(DocError::type_mismatch(
                "replSetInitiate takes a configuration object",
            ))
        }
    };
    let config = set_config::normalize(&rs.name, given, &default_host(rs))?;
    let members = set_config::members_of(&config)?;
    let mine: Vec<_> = members.iter().filter(|m| rs.is_me(&m.addr)).collect();
    let [me] = mine.as_slice() else {
        return Err(invalid(format!("No host described in new configuration with version 1 for replica set {} maps to this node (or more than one does)", rs.name)));
    };
    for other in members.iter().filter(|m| m.id != me.id) {
        ask_to_join(rs, other, &config)?;
    }
    let j = rs.start_member(me.id, config)?;
    j.node
        .run(j.node.initialize(&members))
        .map_err(|e| DocError::with_code(1, "InternalError", format!("starting the set: {e}")))?;
    crate::log::info(
        "REPL",
        &format!(
            "replica set {} initiated with {} members",
            rs.name,
            members.len()
        ),
    );
    Ok(doc! {})
}

/// Has `other` start as its member of the set `config` describes (`_replJoin`): mongod's
/// quorum check, at initiation and for a member a reconfiguration adds.
pub(super) fn ask_to_join(rs: &ReplSet, other: &repl::Member, config: &Document) -> DocResult<()> {
    let join = doc! {"_replJoin": rs.name.clone(), "id": other.id as i64, "config": config.clone(), "$db": "admin"};
    let transport = wire::WireTransport::new(rs.key.clone());
    let addr = other.addr.clone();
    let joined = super::run_async(async move {
        tokio::time::timeout(JOIN_TIMEOUT, transport.command(&addr, &join)).await
    });
    match joined {
        Some(Ok(Ok(_))) => Ok(()),
        Some(Ok(Err(e))) => Err(quorum_failed(&other.addr, &e.to_string())),
        Some(Err(_)) | None => Err(quorum_failed(&other.addr, "no answer in time")),
    }
}

fn quorum_failed(host: &str, why: &str) -> DocError {
    DocError::with_code(
        74,
        "NodeNotFound",
        format!("quorum check failed because not all proposed set members responded affirmatively: {host} failed with {why}"),
    )
}

/// `_replJoin` from the initiating member: this member starts as member `id` of `config`.
fn join(rs: &ReplSet, cmd: &Document) -> DocResult<Document> {
    let name = cmd
        .get_str("_replJoin")
        .map_err(|_| invalid("_replJoin: the set's name"))?;
    if name != rs.name {
        return Err(invalid(format!(
            "this member is in set {}, not {name}",
            rs.name
        )));
    }
    let id = cmd.get_i64("id").map_err(|_| invalid("_replJoin: id"))? as u64;
    let config = cmd
        .get_document("config")
        .map_err(|_| invalid("_replJoin: config"))?;
    let host = set_config::host_of(config, id).unwrap_or_default();
    if !rs.is_me(&host) {
        return Err(invalid(format!(
            "member {id} is {host}, which is not this server"
        )));
    }
    let _starting = rs.starting.lock();
    if rs.member().is_some() {
        return Err(already_initialized());
    }
    rs.start_member(id, config.clone())?;
    Ok(doc! {})
}

/// The members' own commands, answered before authorization (they authenticate with the
/// cluster key on the connection); `None` for any other command, or on a standalone.
pub fn internal(
    member: Option<&Arc<ReplSet>>,
    name: &str,
    cmd: &Document,
    conn: &ConnInfo,
    failpoints: &FailPoints,
) -> Option<Document> {
    if !matches!(name, "_replHandshake" | "_replRpc" | "_replJoin") {
        return None;
    }
    let rs = member?;
    let res = match name {
        "_replHandshake" => wire::handshake(rs.key(), cmd, conn),
        _ => wire::check_member(rs.key(), conn).and_then(|()| match name {
            "_replJoin" => join(rs, cmd),
            _ => rpc(rs, cmd, failpoints),
        }),
    };
    Some(match res {
        Ok(mut d) => {
            d.insert("ok", 1.0);
            d
        }
        Err(e) => crate::reply::error_reply(&e),
    })
}

fn rpc(rs: &ReplSet, cmd: &Document, failpoints: &FailPoints) -> DocResult<Document> {
    let kind = wire::rpc_kind(cmd)?;
    let body = wire::rpc_body(cmd)?;
    // Checked in this order so that the replication path pays one atomic load while no fail
    // point is on, never a parse of the request.
    if failpoints.armed()
        && kind == RpcKind::AppendEntries
        && carries_entries(&body)
        && failpoints.fires(failpoint::STOP_REPL_PRODUCER)
    {
        // The leader sees this member as unreachable for appends, backs off and retries;
        // heartbeats (no entries) still pass, so no election follows.
        return Err(DocError::with_code(
            91,
            "ShutdownInProgress",
            "the stopReplProducer fail point holds this member's replication",
        ));
    }
    let j = rs.member().ok_or_else(not_yet_initialized)?;
    let answer = j
        .node
        .run(j.node.handler().handle(kind, body))
        .map_err(|e| DocError::with_code(1, "InternalError", e.to_string()))?;
    Ok(doc! {"answer": wire::binary(answer)})
}

/// Whether an AppendEntries request (openraft's, as JSON) carries entries; a heartbeat
/// carries none.
fn carries_entries(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("entries")?.as_array().map(|e| !e.is_empty()))
        .unwrap_or(true)
}

fn optime(ts: Timestamp, term: u64) -> Document {
    doc! {"ts": ts, "t": term as i64}
}

fn date_of(ts: Timestamp) -> bson::DateTime {
    bson::DateTime::from_millis(i64::from(ts.time) * 1000)
}

/// The newest write here and the newest a majority holds, as `(ts, term)`.
fn write_times(rs: &ReplSet, j: &Joined, status: &Status) -> ((Timestamp, u64), (Timestamp, u64)) {
    let last = rs.db.oplog().map_or(ZERO_TS, |o| o.last_ts());
    let term = status.last_applied.map_or(0, |p| p.term);
    let majority = if status.role == Role::Primary {
        j.majority_ts(status.committed).unwrap_or(last)
    } else {
        // A secondary applies committed entries only.
        last
    };
    let committed_term = status.committed.map_or(0, |p: LogPosition| p.term);
    ((last, term), (majority, committed_term))
}

/// `topologyVersion.counter`: changes whenever the member's role or term does.
fn topology_counter(rs: &ReplSet, status: Option<&Status>) -> i64 {
    let Some(s) = status else { return 0 };
    let role = match (rs.diverged().is_some(), rs.writable(s), s.role) {
        (true, _, _) => 3,
        (false, true, _) => 2,
        (false, false, Role::Startup) => 0,
        _ => 1,
    };
    (s.term as i64) * 4 + role
}

/// Waits, for an awaitable `hello` (`topologyVersion` and `maxAwaitTimeMS`), until the
/// member's topology differs from the one the client knows, or the time is up.
fn await_topology_change(rs: &ReplSet, cmd: &Document) {
    let (Ok(tv), Some(wait)) = (
        cmd.get_document("topologyVersion"),
        cmd.get("maxAwaitTimeMS").and_then(query::compare::Num::of),
    ) else {
        return;
    };
    let known = (
        tv.get_object_id("processId").ok(),
        tv.get_i64("counter").ok(),
    );
    let until = Instant::now() + Duration::from_millis(wait.as_f64().clamp(0.0, 60_000.0) as u64);
    while Instant::now() < until {
        let status = rs.member().map(|j| j.status());
        if known
            != (
                Some(rs.process_id),
                Some(topology_counter(rs, status.as_ref())),
            )
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The replica-set fields of `hello`/`isMaster` (`writable_key` is `isWritablePrimary` or
/// `ismaster`).
pub fn hello_fields(rs: &ReplSet, cmd: &Document, writable_key: &str, d: &mut Document) {
    await_topology_change(rs, cmd);
    let joined = rs.member();
    let status = joined.as_ref().map(|j| j.status());
    d.insert(
        "topologyVersion",
        doc! {"processId": rs.process_id, "counter": topology_counter(rs, status.as_ref())},
    );
    let (Some(j), Some(status)) = (joined, status) else {
        d.insert(writable_key, false);
        d.insert("secondary", false);
        d.insert("info", "Does not have a valid replica set config");
        d.insert("isreplicaset", true);
        return;
    };
    let diverged = rs.diverged().is_some();
    let writable = rs.writable(&status);
    d.insert(writable_key, writable);
    d.insert(
        "secondary",
        // A primary draining its log or stepping down is neither, as in mongod.
        !diverged && !matches!(status.role, Role::Startup | Role::Primary),
    );
    d.insert("setName", rs.name.clone());
    let config = j.config.get();
    d.insert("setVersion", super::config_version(&config));
    let members = set_config::members_of(&config).unwrap_or_default();
    let hosts: Vec<Bson> = members
        .iter()
        .filter(|m| !m.hidden && m.priority > 0.0)
        .map(|m| Bson::String(m.addr.clone()))
        .collect();
    let passives: Vec<Bson> = members
        .iter()
        .filter(|m| !m.hidden && m.priority == 0.0)
        .map(|m| Bson::String(m.addr.clone()))
        .collect();
    d.insert("hosts", hosts);
    if !passives.is_empty() {
        d.insert("passives", passives);
    }
    if let Some(leader) = status
        .leader
        .and_then(|l| members.iter().find(|m| m.id == l))
    {
        d.insert("primary", leader.addr.clone());
    }
    d.insert("me", set_config::host_of(&config, j.id).unwrap_or_default());
    let tags = super::tags::tags_of(&config, j.id);
    if !tags.is_empty() {
        d.insert("tags", tags);
    }
    if writable {
        d.insert(
            "electionId",
            bson::oid::ObjectId::from_bytes(status.election_id),
        );
    }
    let ((last, t), (majority, mt)) = write_times(rs, &j, &status);
    d.insert("lastWrite", doc! {"opTime": optime(last, t), "lastWriteDate": date_of(last), "majorityOpTime": optime(majority, mt), "majorityWriteDate": date_of(majority)});
}

/// `replSetGetConfig`.
pub fn get_config(member: Option<&Arc<ReplSet>>) -> DocResult<Document> {
    let rs = replset(member)?;
    let j = rs.member().ok_or_else(not_yet_initialized)?;
    let mut config = j.config.get();
    config.insert("term", j.status().term as i64);
    Ok(doc! {"config": config})
}

/// `replSetGetStatus`.
pub fn get_status(member: Option<&Arc<ReplSet>>) -> DocResult<Document> {
    let rs = replset(member)?;
    let Some(j) = rs.member() else {
        return match rs.rollback_config() {
            Some(config) => rollback_status(rs, &config),
            None => Err(not_yet_initialized()),
        };
    };
    let status = j.status();
    let ((last, t), (majority, mt)) = write_times(rs, &j, &status);
    let config = j.config.get();
    let members: Vec<Bson> = set_config::members_of(&config)?
        .iter()
        .map(|m| Bson::Document(member_status(rs, &j, &status, m)))
        .collect();
    Ok(doc! {
        "set": rs.name.clone(),
        "date": bson::DateTime::now(),
        "myState": my_state(rs, &status),
        "term": status.term as i64,
        "heartbeatIntervalMillis": config.get_document("settings").ok().and_then(|s| s.get_i64("heartbeatIntervalMillis").ok()).unwrap_or(set_config::DEFAULT_HEARTBEAT_MS),
        "optimes": {"lastCommittedOpTime": optime(majority, mt), "appliedOpTime": optime(last, t), "durableOpTime": optime(last, t)},
        "members": members,
    })
}

/// `replSetGetStatus` while a rollback in place has the Raft member stopped: this member in
/// state 9 (ROLLBACK), the others unknown to it.
fn rollback_status(rs: &ReplSet, set_config: &super::SetConfig) -> DocResult<Document> {
    let (me, config) = (Some(set_config.id), set_config.get());
    let members: Vec<Bson> = set_config::members_of(&config)?
        .iter()
        .map(|m| {
            let (state, name) = if Some(m.id) == me {
                (9, "ROLLBACK")
            } else {
                (6, "UNKNOWN")
            };
            Bson::Document(
                doc! {"_id": m.id as i32, "name": m.addr.clone(), "state": state, "stateStr": name},
            )
        })
        .collect();
    Ok(
        doc! {"set": rs.name.clone(), "date": bson::DateTime::now(), "myState": 9, "members": members},
    )
}

/// mongod's member state number: 1 primary, 2 secondary, 0 startup, 3 recovering (a member
/// that holds unreplicated writes), 9 rollback.
fn my_state(rs: &ReplSet, status: &Status) -> i32 {
    if rs.rolling_back() {
        return 9;
    }
    if rs.diverged().is_some() {
        return 3;
    }
    match status.role {
        Role::Primary => 1,
        Role::Startup => 0,
        _ => 2,
    }
}

fn member_status(rs: &ReplSet, j: &Joined, status: &Status, m: &repl::Member) -> Document {
    let seen = status.members.iter().find(|s| s.id == m.id);
    let me = m.id == j.id;
    let state = if me {
        my_state(rs, status)
    } else if status.leader == Some(m.id) {
        1
    } else if seen.is_some_and(|s| {
        s.last_heartbeat
            .is_some_and(|h| h < Duration::from_secs(10))
            || status.role != Role::Primary
    }) {
        2
    } else {
        8
    };
    let state_str = match state {
        1 => "PRIMARY",
        2 => "SECONDARY",
        3 => "RECOVERING",
        9 => "ROLLBACK",
        8 => "(not reachable/healthy)",
        _ => "STARTUP",
    };
    let mut d = doc! {"_id": m.id as i32, "name": m.addr.clone(), "health": if state == 8 { 0.0 } else { 1.0 }, "state": state, "stateStr": state_str};
    if me {
        d.insert("self", true);
    }
    if let Some(pos) = seen.and_then(|s| s.matched) {
        d.insert(
            "optime",
            doc! {"index": pos.index as i64, "t": pos.term as i64},
        );
    }
    if let Some(h) = seen.and_then(|s| s.last_heartbeat) {
        d.insert(
            "lastHeartbeatRecv",
            bson::DateTime::from_system_time(std::time::SystemTime::now() - h),
        );
    }
    d
}

/// mongod's refusal of both commands on a standalone.
fn defaults_on_standalone(name: &str) -> DocError {
    DocError::with_code(
        51300,
        "Location51300",
        format!("'{name}' is not supported on standalone nodes."),
    )
}

/// The member a default read or write concern command runs on: 51300 on a standalone,
/// Unauthorized (13) outside the `admin` database, as mongod.
fn defaults_member<'a>(
    rs: Option<&'a Arc<ReplSet>>,
    name: &str,
    db: &str,
) -> DocResult<&'a Arc<ReplSet>> {
    let rs = rs.ok_or_else(|| defaults_on_standalone(name))?;
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
pub fn get_default_rw_concern(
    rs: Option<&Arc<ReplSet>>,
    db: &str,
    cmd: &Document,
) -> DocResult<Document> {
    let rs = defaults_member(rs, "getDefaultRWConcern", db)?;
    let in_memory = match cmd.get("inMemory") {
        None => false,
        Some(Bson::Boolean(b)) => *b,
        Some(_) => return Err(DocError::type_mismatch("inMemory must be a boolean")),
    };
    let mut reply = defaults::load(&rs.db)?.reply(DateTime::now());
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
pub fn set_default_rw_concern(
    rs: Option<&Arc<ReplSet>>,
    db: &str,
    cmd: &Document,
) -> DocResult<Document> {
    let rs = defaults_member(rs, "setDefaultRWConcern", db)?;
    let change = parse_change(cmd)?;
    let mut defaults = defaults::load(&rs.db)?;
    if let Some(read) = change.read {
        defaults.read = read;
    }
    if let Some(write) = change.write {
        defaults.write = write;
    }
    defaults.update_op_time = Some(super::causal::cluster_time(rs));
    let now = DateTime::now();
    defaults.update_wall = Some(now);
    defaults::save(&rs.db, &defaults)?;
    Ok(defaults.reply(now))
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
}
