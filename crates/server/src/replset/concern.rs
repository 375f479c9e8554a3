//! What a member's role does to a command: writes only on a writable primary, reads on a
//! secondary only when the client allows it (`$readPreference` other than primary), nothing
//! on a member that holds unreplicated writes; a write's write concern: `w: 1` answers
//! after the local write, `w: "majority"` (the implicit default, as in mongod 5.0+) once a
//! majority holds it, `w: N` once N members' logs hold it; and a read's read concern:
//! `local` answers what the member holds, `majority` once a majority holds every entry the
//! answer may reflect, `linearizable` (the primary only) once a no-op written after the read
//! is the majority's; with `afterClusterTime`, once the member holds that time (`causal`). A
//! command without its own write concern or read concern level takes the set's default
//! (`defaults`). A tag set's mode waits for the members its tags name (`tags`); any other
//! write or read concern is refused, never ignored.

use super::{ReplSet, WriteGate};
use crate::spec::{Namespace, Spec};
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocError, DocResult};
use repl::ReplError;
use std::time::{Duration, Instant};

/// How long an unbounded `w: "majority"` (no `wtimeout`) waits at most before it reports a
/// timeout: a write concern without a timeout waits as long as it takes in mongod too, but a
/// connection thread must come back eventually.
pub(crate) const MAJORITY_WAIT_LIMIT: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug, PartialEq)]
pub enum Acknowledge {
    /// `w: 0` or `w: 1`: after the local write.
    Local,
    /// `w: "majority"`: once a majority of voters hold the write, waiting at most this long.
    Majority(Option<Duration>),
    /// `w: N` (N > 1): once N members (this one included) hold the write in their logs,
    /// waiting at most this long. As in mongod, such a write may still be rolled back unless
    /// those N are a majority.
    Members(usize, Option<Duration>),
    /// `w: "<mode>"` (a tag set's mode, `settings.getLastErrorModes`): once the members that
    /// applied the write carry the tag values the mode names, waiting at most this long.
    Tagged(String, Option<Duration>),
}

/// A read's read concern on a member (`readConcern.level`; the other fields and levels are
/// refused with the generic fields, `commands::fields`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReadConcern {
    /// `local`, `available`, or none: what the member holds now.
    Local,
    /// Only what a majority holds: the answer is given once the majority holds every entry
    /// it may reflect.
    Majority,
    /// On the writable primary only: the answer reflects every write acknowledged with
    /// `w: "majority"` before the read began (for a read of one document, as in mongod).
    Linearizable,
}

/// The command's read concern level; anything but the levels served here reads as `Local`
/// here and is refused by the generic fields' check before the command runs.
pub fn read_concern(cmd: &Document) -> ReadConcern {
    let level = cmd
        .get_document("readConcern")
        .ok()
        .and_then(|rc| rc.get_str("level").ok());
    match level {
        Some("majority") => ReadConcern::Majority,
        Some("linearizable") => ReadConcern::Linearizable,
        _ => ReadConcern::Local,
    }
}

/// What a read admitted on a member waits for once it has run (`settled`).
#[derive(Clone, Copy, Debug)]
pub struct ReadWait {
    concern: ReadConcern,
    /// The member was the writable primary when the read began: its answer may hold this
    /// term's writes, which the majority may not have yet.
    was_writable: bool,
    started: Instant,
}

/// A command admitted on a member: a read and what it waits for, or a write's licence and
/// how it is acknowledged.
pub enum Admitted<'a> {
    Read(ReadWait),
    Write(WriteGate<'a>, Acknowledge),
}

pub fn not_writable_primary() -> DocError {
    DocError::with_code(10107, "NotWritablePrimary", "not primary")
}

/// The write's fate is unknown to this member because its role changed (mongod's
/// InterruptedDueToReplStateChange, which drivers retry).
pub fn repl_state_changed(why: &str) -> DocError {
    DocError::with_code(
        11602,
        "InterruptedDueToReplStateChange",
        format!("operation was interrupted because the member's role changed: {why}"),
    )
}

/// The command's write concern on a member.
pub fn acknowledge(cmd: &Document) -> DocResult<Acknowledge> {
    let Some(wc) = cmd.get("writeConcern") else {
        return Ok(Acknowledge::Majority(None));
    };
    let Bson::Document(wc) = wc else {
        return Err(DocError::type_mismatch("writeConcern must be an object"));
    };
    let mut timeout = None;
    let mut members = None;
    let mut mode = None;
    for (k, v) in wc {
        match (k.as_str(), v) {
            ("w", Bson::String(s)) if s == "majority" => {}
            ("w", Bson::String(name)) => mode = Some(name.clone()),
            ("w", n) => match query::compare::Num::of(n).map(|n| n.as_f64()) {
                // mongod's limit on w: the most members a set may have.
                Some(n) if (0.0..=50.0).contains(&n) && n.fract() == 0.0 => {
                    members = Some(n as usize)
                }
                _ => {
                    return Err(DocError::failed_to_parse(format!(
                        "writeConcern.w: bad value {n}"
                    )))
                }
            },
            ("wtimeout", n) => {
                let ms = query::compare::Num::of(n)
                    .map(|n| n.as_f64())
                    .filter(|ms| *ms >= 0.0)
                    .ok_or_else(|| {
                        DocError::failed_to_parse(
                            "writeConcern.wtimeout must be a non-negative number",
                        )
                    })?;
                timeout = (ms > 0.0).then(|| Duration::from_millis(ms as u64));
            }
            // Appends to the log are always synced: `j` is always true here.
            ("j" | "fsync", _) | ("provenance", Bson::String(_)) => {}
            _ => {
                return Err(DocError::failed_to_parse(format!(
                    "writeConcern.{k} is not a write concern field"
                )))
            }
        }
    }
    if let Some(mode) = mode {
        return Ok(Acknowledge::Tagged(mode, timeout));
    }
    Ok(match members {
        Some(0 | 1) => Acknowledge::Local,
        Some(n) => Acknowledge::Members(n, timeout),
        None => Acknowledge::Majority(timeout),
    })
}

/// mongod's answer to a `w: N` the set can never satisfy: the write is applied, and its
/// write concern fails at once (a `writeConcernError`, which drivers raise as
/// WriteConcernError), rather than the command being refused.
fn unsatisfiable(j: &super::Joined, ack: &Acknowledge) -> Option<Document> {
    let &Acknowledge::Members(n, _) = ack else {
        return None;
    };
    let held_by = j.status().members.len();
    (n > held_by).then(|| {
        doc! {"code": 100, "codeName": "UnsatisfiableWriteConcern", "errmsg": format!("Not enough data-bearing nodes: w: {n} with {held_by} members")}
    })
}

/// `createIndexes`' `commitQuorum` on a member: the index build is done once that many
/// members hold its entry, as a write concern's wait (mongod waits for them to report the
/// build ready; here each member builds as it applies the entry, in log order, so holding it
/// is the closest point the primary sees). Combined with the command's write concern: the
/// answer waits for whichever needs more members.
fn with_commit_quorum(rs: &ReplSet, cmd: &Document, ack: Acknowledge) -> DocResult<Acknowledge> {
    let Some(q) = cmd.get("commitQuorum") else {
        return Ok(ack);
    };
    let voters = rs.member().map_or(1, |j| j.status().members.len());
    let quorum = match q {
        Bson::String(s) if s == "majority" => Acknowledge::Majority(None),
        Bson::String(s) if s == "votingMembers" => Acknowledge::Members(voters, None),
        Bson::String(s) => {
            return Err(DocError::with_code(
                79,
                "UnknownReplWriteConcern",
                format!("commitQuorum '{s}' is not a mode this set's configuration has"),
            ))
        }
        v => match v.as_i64().or_else(|| v.as_i32().map(i64::from)) {
            Some(n) if (0..=voters as i64).contains(&n) => Acknowledge::Members(n as usize, None),
            Some(n) => {
                return Err(DocError::with_code(
                    100,
                    "UnsatisfiableCommitQuorum",
                    format!("commitQuorum {n} is more than the set's {voters} voting members"),
                ))
            }
            None => {
                return Err(DocError::type_mismatch(
                    "commitQuorum must be a number or a string",
                ))
            }
        },
    };
    let needs = |a: &Acknowledge| match a {
        Acknowledge::Local | Acknowledge::Members(0 | 1, _) => 1,
        Acknowledge::Majority(_) => voters / 2 + 1,
        Acknowledge::Members(n, _) => *n,
        // A mode's count is not comparable: the quorum's own wait is taken.
        Acknowledge::Tagged(..) => 0,
    };
    let timeout = match ack {
        Acknowledge::Local => None,
        Acknowledge::Majority(t) | Acknowledge::Members(_, t) | Acknowledge::Tagged(_, t) => t,
    };
    Ok(match quorum {
        _ if needs(&quorum) <= needs(&ack) => ack,
        Acknowledge::Majority(_) => Acknowledge::Majority(timeout),
        Acknowledge::Members(n, _) => Acknowledge::Members(n, timeout),
        Acknowledge::Local | Acknowledge::Tagged(..) => ack,
    })
}

/// The options that make a `create` or `collMod` a time-series collection's: its view and
/// buckets are not replicated as one yet, so no secondary would get it whole.
const UNREPLICATED_OPTIONS: &[&str] = &["timeseries"];

/// Refuses a catalog command that would change the primary alone (time-series collections
/// are not replicated yet), rather than let the members silently differ.
fn refuse_unreplicated(cmd: &Document) -> DocResult<()> {
    let Some(name) = cmd.keys().next() else {
        return Ok(());
    };
    if !matches!(name.as_str(), "create" | "collMod") {
        return Ok(());
    }
    match UNREPLICATED_OPTIONS.iter().find(|k| cmd.contains_key(**k)) {
        Some(k) => Err(DocError::with_code(
            115,
            "CommandNotSupported",
            format!("{name} with '{k}': time-series collections are not replicated yet by flashdoc's replica sets (docs/replication.md)"),
        )),
        None => Ok(()),
    }
}

/// Whether the client lets a secondary answer (`$readPreference` other than primary).
fn secondary_ok(cmd: &Document) -> bool {
    cmd.get_document("$readPreference")
        .ok()
        .and_then(|rp| rp.get_str("mode").ok())
        .is_some_and(|m| m != "primary")
}

/// Whether the command reads or writes data (not the server's own state).
fn touches_data(spec: Option<&Spec>) -> bool {
    spec.is_some_and(|s| !matches!(s.namespace, Namespace::Server | Namespace::Users))
}

fn diverged_error(why: &str) -> DocError {
    DocError::with_code(
        13436,
        "NotPrimaryOrSecondary",
        format!("this member holds writes the set does not have and refuses reads and writes until it is resynced: {why}"),
    )
}

/// A write's read concern: only `local` (a write reads what it changes on the primary);
/// mongod takes the others on writes only inside transactions, which members do not have.
fn refuse_read_concern_on_write(name: &str, concern: ReadConcern) -> DocResult<()> {
    if concern == ReadConcern::Local {
        return Ok(());
    }
    Err(DocError::invalid_options(format!(
        "{name} writes: readConcern level {concern:?} is not available on a write outside a transaction"
    )))
}

/// The member's checks before a command runs; for a write, its licence on the primary (and
/// how it is acknowledged); for a read, what it waits for after it ran, once the member has
/// what its `afterClusterTime` asks for (waiting at most `max_time`, the command's `maxTimeMS`).
pub fn admit<'a>(
    rs: &'a ReplSet,
    spec: Option<&Spec>,
    writes: bool,
    db: &str,
    cmd: &Document,
    max_time: Option<Duration>,
) -> DocResult<Admitted<'a>> {
    if let Some(why) = rs.diverged() {
        if writes || touches_data(spec) {
            return Err(diverged_error(&why));
        }
    }
    if writes && db != "local" {
        return admit_write(rs, cmd, max_time);
    }
    let started = Instant::now();
    let writable = rs.member().is_some_and(|j| rs.writable(&j.status()));
    // A cursor's getMore runs where its first batch was allowed.
    let opens_read = touches_data(spec) && !spec.is_some_and(|s| s.namespace == Namespace::Cursors);
    if !writable && opens_read && db != "local" && !secondary_ok(cmd) {
        return Err(DocError::with_code(
            13435,
            "NotPrimaryNoSecondaryOk",
            "not primary and secondaryOk=false",
        ));
    }
    let concern = read_concern_of(&rs.db, cmd, opens_read)?;
    if concern == ReadConcern::Linearizable && !writable {
        return Err(DocError::with_code(
            10107,
            "NotWritablePrimary",
            "cannot satisfy linearizable read concern on non-primary node",
        ));
    }
    if let Some(t) = super::causal::after_cluster_time(cmd)? {
        let deadline = started + max_time.unwrap_or(MAJORITY_WAIT_LIMIT);
        super::causal::wait_after(rs, t, deadline)?;
    }
    Ok(Admitted::Read(ReadWait {
        concern,
        was_writable: writable,
        started,
    }))
}

/// A write's checks, its wait for `afterClusterTime` (before its licence: the wait may write a
/// no-op, which takes one), and its licence on the writable primary.
fn admit_write<'a>(
    rs: &'a ReplSet,
    cmd: &Document,
    max_time: Option<Duration>,
) -> DocResult<Admitted<'a>> {
    let name = cmd.keys().next().map_or("", String::as_str);
    refuse_read_concern_on_write(name, read_concern(cmd))?;
    refuse_unreplicated(cmd)?;
    let ack = with_commit_quorum(rs, cmd, write_concern_of(&rs.db, cmd)?)?;
    if let (Acknowledge::Tagged(mode, _), Some(j)) = (&ack, rs.member()) {
        super::tags::check_mode(&j.config.get(), mode)?;
    }
    // A causally consistent session's write carries its last operation time too (drivers
    // send it on every command that takes a read concern, as mongod's writes do).
    if let Some(t) = super::causal::after_cluster_time(cmd)? {
        if !rs.member().is_some_and(|j| rs.writable(&j.status())) {
            return Err(not_writable_primary());
        }
        let deadline = Instant::now() + max_time.unwrap_or(MAJORITY_WAIT_LIMIT);
        super::causal::wait_after(rs, t, deadline)?;
    }
    let gate = rs.write_gate().ok_or_else(not_writable_primary)?;
    Ok(Admitted::Write(gate, ack))
}

/// Whether the command carries a write concern of its own (`writeConcern: {}` is none, as in
/// mongod).
fn has_write_concern(cmd: &Document) -> bool {
    match cmd.get("writeConcern") {
        None => false,
        Some(Bson::Document(wc)) => !wc.is_empty(),
        Some(_) => true,
    }
}

/// The write's own write concern, or else the set's default (`setDefaultRWConcern`), or else
/// the implicit `w: "majority"`.
fn write_concern_of(db: &DocDb, cmd: &Document) -> DocResult<Acknowledge> {
    if has_write_concern(cmd) {
        return acknowledge(cmd);
    }
    match super::defaults::load(db)?.write {
        Some(wc) => acknowledge(&doc! {"writeConcern": wc}),
        None => Ok(Acknowledge::Majority(None)),
    }
}

/// The read's own read concern level, or else, for a read of data (`opens_read`), the set's
/// default level (`setDefaultRWConcern`), or else `local`.
fn read_concern_of(db: &DocDb, cmd: &Document, opens_read: bool) -> DocResult<ReadConcern> {
    let has_level = cmd
        .get_document("readConcern")
        .is_ok_and(|rc| rc.contains_key("level"));
    if has_level || !opens_read {
        return Ok(read_concern(cmd));
    }
    let default = super::defaults::load(db)?.read;
    Ok(default.map_or(ReadConcern::Local, |rc| {
        read_concern(&doc! {"readConcern": rc})
    }))
}

/// After a read ran: waits as its read concern asks, within the command's `maxTimeMS`
/// (`max_time`); a read that cannot be answered so gets the reason instead (MaxTimeMSExpired
/// when `maxTimeMS` ran out first, the role change that stopped it otherwise).
pub fn settled(rs: &ReplSet, wait: ReadWait, max_time: Option<Duration>, reply: &mut Document) {
    let ran = reply
        .get("ok")
        .and_then(query::compare::Num::of)
        .is_some_and(|n| n.as_f64() == 1.0);
    if wait.concern == ReadConcern::Local || !ran {
        return;
    }
    if let Err(e) = settle(rs, &wait, max_time) {
        *reply = crate::reply::error_reply(&e);
    }
}

/// Waits until the majority holds every entry a read's answer may reflect: on a member that
/// was not the primary, its data is what it applied, and it applies committed entries only;
/// on the primary, the entries of its term up to the newest, or (linearizable) up to a no-op
/// written after the read, which commits only while no other primary has taken writes.
fn settle(rs: &ReplSet, wait: &ReadWait, max_time: Option<Duration>) -> DocResult<()> {
    let Some(j) = rs.member() else {
        // Not in a set yet: nothing was ever written here but to `local`.
        return Ok(());
    };
    let primary = wait.was_writable || rs.writable(&j.status());
    if wait.concern == ReadConcern::Majority && !primary {
        return rs
            .diverged()
            .map_or(Ok(()), |why| Err(diverged_error(&why)));
    }
    let gate = rs
        .write_gate()
        .ok_or_else(|| repl_state_changed("it stopped being the primary during the read"))?;
    if wait.concern == ReadConcern::Linearizable {
        rs.db.log_noop(doc! {"msg": "linearizable read"})?;
    }
    let shipped = gate.joined.ship(&rs.db);
    drop(gate);
    let Some(pos) = shipped? else {
        return Ok(());
    };
    let limit = max_time.map_or(MAJORITY_WAIT_LIMIT, |t| {
        t.saturating_sub(wait.started.elapsed())
    });
    match j.node.run(j.node.wait_committed(pos, limit)) {
        Ok(()) => Ok(()),
        Err(ReplError::Timeout(_)) => Err(DocError::with_code(
            50,
            "MaxTimeMSExpired",
            "operation exceeded time limit while waiting for the majority to hold what the read returned",
        )),
        Err(e) => Err(repl_state_changed(&e.to_string())),
    }
}

/// After a write ran on the primary: proposes its oplog entries and waits as its write
/// concern asks. A failure to get the write to a majority is the reply's `writeConcernError`
/// (a timeout) or the command's error (the member's role changed under it).
pub fn acknowledged(rs: &ReplSet, gate: WriteGate<'_>, ack: Acknowledge, reply: &mut Document) {
    let j = gate.joined.clone();
    let shipped = j.ship(&rs.db);
    // Proposed: a step-down need not wait for the majority's answer.
    drop(gate);
    let (w, timeout) = match &ack {
        Acknowledge::Local => return,
        Acknowledge::Majority(t) => (Bson::from("majority"), *t),
        Acknowledge::Members(n, t) => (Bson::Int64(*n as i64), *t),
        Acknowledge::Tagged(mode, t) => (Bson::from(mode.as_str()), *t),
    };
    let pos = match shipped {
        Ok(Some(pos)) => pos,
        Ok(None) => return,
        Err(e) => {
            *reply = crate::reply::error_reply(&e);
            return;
        }
    };
    if let Some(e) = unsatisfiable(&j, &ack) {
        reply.insert("writeConcernError", e);
        return;
    }
    let wait = timeout.unwrap_or(MAJORITY_WAIT_LIMIT);
    let waited = match ack {
        Acknowledge::Members(n, _) => j.node.run(j.node.wait_applied_by(pos, n, wait)),
        Acknowledge::Tagged(mode, _) => match super::tags::enough(&j.config.get(), &mode) {
            Ok(enough) => j.node.run(j.node.wait_applied(pos, enough, wait)),
            // The configuration changed since the write was admitted.
            Err(e) => {
                reply.insert("writeConcernError", crate::reply::error_reply(&e));
                return;
            }
        },
        _ => j.node.run(j.node.wait_committed(pos, wait)),
    };
    match waited {
        Ok(()) => {}
        Err(ReplError::Timeout(_)) => {
            reply.insert(
                "writeConcernError",
                doc! {"code": 64, "codeName": "WriteConcernTimeout", "errmsg": "waiting for replication timed out", "errInfo": {"wtimeout": true, "writeConcern": {"w": w, "wtimeout": wait.as_millis() as i64}}},
            );
        }
        Err(e) => *reply = crate::reply::error_reply(&repl_state_changed(&e.to_string())),
    }
}

/// For work that writes outside a command's licence (a shard's migration steps): fails with
/// NotWritablePrimary unless this member is the writable primary now, and readies its
/// proposer for this term, so that what it writes next is this term's and gets proposed.
pub fn check_primary(rs: &ReplSet) -> DocResult<()> {
    rs.write_gate().map(drop).ok_or_else(not_writable_primary)
}

/// Proposes every oplog entry this primary holds that is not yet proposed (writes made outside
/// a command) and waits up to `limit` until a majority of the set holds them all: after this,
/// no failover can roll them back. Fails if the member is not (or stops being) the primary.
pub fn replicate_to_majority(rs: &ReplSet, limit: Duration) -> DocResult<()> {
    let gate = rs.write_gate().ok_or_else(not_writable_primary)?;
    let j = gate.joined.clone();
    let shipped = j.ship(&rs.db);
    drop(gate);
    let Some(pos) = shipped? else {
        return Ok(());
    };
    match j.node.run(j.node.wait_committed(pos, limit)) {
        Ok(()) => Ok(()),
        Err(ReplError::Timeout(_)) => Err(DocError::with_code(
            64,
            "WriteConcernTimeout",
            "waiting for a majority of the set to hold this primary's writes timed out",
        )),
        Err(e) => Err(repl_state_changed(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_concerns_are_taken_or_refused_never_ignored() {
        let wc = |w: Document| acknowledge(&doc! {"insert": "c", "writeConcern": w});
        assert_eq!(
            acknowledge(&doc! {"insert": "c"}).unwrap(),
            Acknowledge::Majority(None)
        );
        assert_eq!(wc(doc! {"w": 1}).unwrap(), Acknowledge::Local);
        assert_eq!(wc(doc! {"w": 0}).unwrap(), Acknowledge::Local);
        assert_eq!(
            wc(doc! {"w": "majority", "wtimeout": 250}).unwrap(),
            Acknowledge::Majority(Some(Duration::from_millis(250)))
        );
        assert_eq!(wc(doc! {"j": true}).unwrap(), Acknowledge::Majority(None));
        assert_eq!(
            wc(doc! {"w": 2, "wtimeout": 100}).unwrap(),
            Acknowledge::Members(2, Some(Duration::from_millis(100)))
        );
        assert_eq!(wc(doc! {"w": 51}).unwrap_err().code, 9);
        // A mode's name is looked up in the configuration when the write is admitted.
        assert_eq!(
            wc(doc! {"w": "dc"}).unwrap(),
            Acknowledge::Tagged("dc".into(), None)
        );
        assert_eq!(wc(doc! {"w": -1}).unwrap_err().code, 9);
        assert_eq!(wc(doc! {"wtimeout": -5}).unwrap_err().code, 9);
        assert_eq!(wc(doc! {"x": 1}).unwrap_err().code, 9);
    }

    #[test]
    fn read_concern_levels_on_a_member() {
        let rc = |rc: Document| read_concern(&doc! {"find": "c", "readConcern": rc});
        assert_eq!(read_concern(&doc! {"find": "c"}), ReadConcern::Local);
        assert_eq!(rc(doc! {"level": "local"}), ReadConcern::Local);
        assert_eq!(rc(doc! {"level": "available"}), ReadConcern::Local);
        assert_eq!(rc(doc! {"level": "majority"}), ReadConcern::Majority);
        assert_eq!(
            rc(doc! {"level": "linearizable"}),
            ReadConcern::Linearizable
        );
        // Writes read locally; the others levels are refused on them by name.
        assert!(refuse_read_concern_on_write("update", ReadConcern::Local).is_ok());
        for c in [ReadConcern::Majority, ReadConcern::Linearizable] {
            let e = refuse_read_concern_on_write("update", c).unwrap_err();
            assert_eq!((e.code, e.message.contains("update")), (72, true));
        }
    }

    #[test]
    fn the_defaults_apply_to_commands_without_their_own_concern() {
        let db = DocDb::open(docdb::DocDbConfig::in_memory()).unwrap();
        let insert = doc! {"insert": "c"};
        let find = doc! {"find": "c"};
        // Unset: the implicit w: "majority" and local.
        assert_eq!(
            write_concern_of(&db, &insert).unwrap(),
            Acknowledge::Majority(None)
        );
        assert_eq!(
            read_concern_of(&db, &find, true).unwrap(),
            ReadConcern::Local
        );
        super::super::defaults::set_in(
            &db,
            doc! {"w": 2, "wtimeout": 50},
            doc! {"level": "majority"},
        )
        .unwrap();
        let members = Acknowledge::Members(2, Some(Duration::from_millis(50)));
        assert_eq!(write_concern_of(&db, &insert).unwrap(), members);
        let empty = doc! {"insert": "c", "writeConcern": {}};
        assert_eq!(write_concern_of(&db, &empty).unwrap(), members);
        let own = doc! {"insert": "c", "writeConcern": {"w": 1}};
        assert_eq!(write_concern_of(&db, &own).unwrap(), Acknowledge::Local);
        assert_eq!(
            read_concern_of(&db, &find, true).unwrap(),
            ReadConcern::Majority
        );
        // Not to a read of the server's own state, nor over a read's own level; a read
        // concern with afterClusterTime alone takes the default level.
        assert_eq!(
            read_concern_of(&db, &find, false).unwrap(),
            ReadConcern::Local
        );
        let local = doc! {"find": "c", "readConcern": {"level": "local"}};
        assert_eq!(
            read_concern_of(&db, &local, true).unwrap(),
            ReadConcern::Local
        );
        let after = doc! {"find": "c", "readConcern": {"afterClusterTime": bson::Timestamp {time: 1, increment: 1}}};
        assert_eq!(
            read_concern_of(&db, &after, true).unwrap(),
            ReadConcern::Majority
        );
    }

    #[test]
    fn time_series_are_refused_until_they_replicate() {
        let cmd = doc! {"create": "t", "timeseries": {"timeField": "at"}};
        assert_eq!(refuse_unreplicated(&cmd).unwrap_err().code, 115, "{cmd}");
        for cmd in [
            doc! {"create": "c", "capped": true, "size": 4096},
            doc! {"collMod": "c", "validator": {}},
            doc! {"insert": "c", "pipeline": []},
            doc! {"create": "v", "viewOn": "c", "pipeline": []},
            doc! {"collMod": "v", "viewOn": "c", "pipeline": []},
        ] {
            assert!(refuse_unreplicated(&cmd).is_ok(), "{cmd}");
        }
    }

    #[test]
    fn secondaries_answer_reads_only_when_the_client_allows_it() {
        assert!(!secondary_ok(&doc! {"find": "c"}));
        assert!(!secondary_ok(
            &doc! {"find": "c", "$readPreference": {"mode": "primary"}}
        ));
        assert!(secondary_ok(
            &doc! {"find": "c", "$readPreference": {"mode": "secondaryPreferred"}}
        ));
    }
}
