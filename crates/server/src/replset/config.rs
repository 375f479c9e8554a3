//! The replica-set configuration `replSetInitiate` takes and `replSetGetConfig` shows, in
//! mongod's shape, and what the Raft member is started with from it.

use super::tags::count;
use bson::{doc, oid::ObjectId, Bson, Document};
use docdb::{DocError, DocResult};
use repl::{Member, NodeConfig};
use std::collections::BTreeSet;

/// mongod's `settings.electionTimeoutMillis` default.
pub const DEFAULT_ELECTION_TIMEOUT_MS: i64 = 10_000;
/// mongod's `settings.heartbeatIntervalMillis` default.
pub const DEFAULT_HEARTBEAT_MS: i64 = 2_000;

pub fn invalid(msg: impl Into<String>) -> DocError {
    DocError::with_code(93, "InvalidReplicaSetConfig", msg)
}

fn int(v: &Bson, what: &str) -> DocResult<i64> {
    match v {
        Bson::Int32(n) => Ok(i64::from(*n)),
        Bson::Int64(n) => Ok(*n),
        Bson::Double(f) if f.fract() == 0.0 => Ok(*f as i64),
        _ => Err(invalid(format!("{what} must be an integer"))),
    }
}

fn num(v: &Bson, what: &str) -> DocResult<f64> {
    match v {
        Bson::Int32(n) => Ok(f64::from(*n)),
        Bson::Int64(n) => Ok(*n as f64),
        Bson::Double(f) => Ok(*f),
        _ => Err(invalid(format!("{what} must be a number"))),
    }
}

/// One `members[n]`, with mongod's defaults filled in; what flashdoc cannot honour is refused
/// by name.
fn member(m: &Bson, n: usize) -> DocResult<Document> {
    let Bson::Document(m) = m else {
        return Err(invalid(format!("members[{n}] must be an object")));
    };
    let at = |f: &str| format!("members[{n}].{f}");
    let id = int(
        m.get("_id")
            .ok_or_else(|| invalid(format!("{} is required", at("_id"))))?,
        &at("_id"),
    )?;
    if !(0..=255).contains(&id) {
        return Err(invalid(format!("{} must be between 0 and 255", at("_id"))));
    }
    let host = m
        .get_str("host")
        .map_err(|_| invalid(format!("{} is required and must be a string", at("host"))))?;
    let mut out = doc! {"_id": id as i32, "host": host, "arbiterOnly": false, "buildIndexes": true, "hidden": false, "priority": 1.0, "tags": {}, "secondaryDelaySecs": 0i64, "votes": 1};
    for (k, v) in m {
        match k.as_str() {
            "_id" | "host" => {}
            "priority" => {
                out.insert("priority", num(v, &at(k))?);
            }
            "votes" => {
                out.insert("votes", int(v, &at(k))? as i32);
            }
            "hidden" => {
                out.insert("hidden", v.as_bool().ok_or_else(|| invalid(format!("{} must be a boolean", at(k))))?);
            }
            "arbiterOnly" if v.as_bool() == Some(false) => {}
            "arbiterOnly" => return Err(invalid(format!("{}: arbiters are not available: a Raft voter must hold the log (docs/replication.md); use a data-bearing member with priority 0", at(k)))),
            "buildIndexes" if v.as_bool() == Some(true) => {}
            "tags" => {
                out.insert("tags", member_tags(v, &at(k))?);
            }
            "secondaryDelaySecs" if int(v, &at(k)).is_ok_and(|d| d == 0) => {}
            "buildIndexes" | "secondaryDelaySecs" => {
                return Err(invalid(format!("{} is not available yet; only its default is accepted", at(k))))
            }
            _ => return Err(invalid(format!("{}: unknown field", at(k)))),
        }
    }
    Ok(out)
}

/// `settings`: the election timeout and heartbeat interval; the rest refused by name.
fn settings(given: Option<&Document>) -> DocResult<Document> {
    let mut election = DEFAULT_ELECTION_TIMEOUT_MS;
    let mut heartbeat = None;
    let mut modes = Document::new();
    for (k, v) in given.into_iter().flatten() {
        match k.as_str() {
            "electionTimeoutMillis" => election = int(v, "settings.electionTimeoutMillis")?,
            "heartbeatIntervalMillis" => heartbeat = Some(int(v, "settings.heartbeatIntervalMillis")?),
            "getLastErrorModes" => modes = tag_modes(v)?,
            "chainingAllowed" if v.as_bool() == Some(false) => {}
            "chainingAllowed" => return Err(invalid("settings.chainingAllowed: Raft replicates from the primary only; only false is accepted")),
            _ => return Err(invalid(format!("settings.{k} is not available"))),
        }
    }
    if election < 100 {
        return Err(invalid(
            "settings.electionTimeoutMillis must be at least 100",
        ));
    }
    // Raft's heartbeats keep the primary's lease: several must fit in one election timeout.
    let heartbeat = heartbeat.unwrap_or(DEFAULT_HEARTBEAT_MS.min(election / 5));
    if heartbeat <= 0 || heartbeat * 2 > election {
        return Err(invalid(format!("settings.heartbeatIntervalMillis ({heartbeat}) must be positive and at most half of electionTimeoutMillis ({election})")));
    }
    Ok(
        doc! {"chainingAllowed": false, "heartbeatIntervalMillis": heartbeat, "electionTimeoutMillis": election, "getLastErrorModes": modes, "replicaSetId": ObjectId::new()},
    )
}

/// A configuration as given to `replSetInitiate` or `replSetReconfig`, its members checked.
struct Given<'a> {
    version: i64,
    members: Vec<Document>,
    settings: Option<&'a Document>,
}

fn parse_given<'a>(set_name: &str, given: &'a Document) -> DocResult<Given<'a>> {
    let mut out = Given {
        version: 1,
        members: Vec::new(),
        settings: None,
    };
    for (k, v) in given {
        match (k.as_str(), v) {
            ("_id", Bson::String(id)) if id == set_name => {}
            ("_id", _) => return Err(invalid(format!("Attempting to configure a replica set with name {v}, but command line reports {set_name}; rejecting"))),
            ("members", Bson::Array(list)) => {
                for (n, m) in list.iter().enumerate() {
                    out.members.push(member(m, n)?);
                }
            }
            ("members", _) => return Err(invalid("members must be an array")),
            ("version", v) if int(v, "version")? >= 1 => out.version = int(v, "version")?,
            ("protocolVersion", v) if int(v, "protocolVersion")? == 1 => {}
            ("writeConcernMajorityJournalDefault", Bson::Boolean(true)) => {}
            ("settings", Bson::Document(s)) => out.settings = Some(s),
            // What `replSetGetConfig` shows (rs.conf()), given back to `replSetReconfig`:
            // the term is the set's own, as in mongod.
            ("term", Bson::Int32(_) | Bson::Int64(_)) => {}
            ("version" | "protocolVersion" | "writeConcernMajorityJournalDefault", _) => {
                return Err(invalid(format!("{k}: only mongod's default is accepted")))
            }
            _ => return Err(invalid(format!("{k}: unknown or unsupported field"))),
        }
    }
    if !given.contains_key("_id") {
        return Err(invalid("_id (the set's name) is required"));
    }
    check_members(&out.members)?;
    Ok(out)
}

fn full_config(
    set_name: &str,
    version: i64,
    members: Vec<Document>,
    settings: Document,
) -> Document {
    doc! {
        "_id": set_name, "version": version as i32, "term": 0i64, "members": members,
        "protocolVersion": 1i64, "writeConcernMajorityJournalDefault": true,
        "settings": settings,
    }
}

/// Checks `replSetInitiate`'s configuration and returns it in mongod's full shape (defaults
/// filled). `None` (no configuration given) is a set of this member alone.
pub fn normalize(set_name: &str, given: Option<&Document>, me: &str) -> DocResult<Document> {
    let alone = doc! {"_id": set_name, "members": [{"_id": 0, "host": me}]};
    let g = parse_given(set_name, given.unwrap_or(&alone))?;
    let settings = settings(g.settings)?;
    check_modes(&g.members, &settings)?;
    Ok(full_config(set_name, g.version, g.members, settings))
}

/// Checks `replSetReconfig`'s configuration against the `current` one: a greater version, the
/// same settings (changing them is not available yet), and returns it in full shape.
pub fn reconfigured(set_name: &str, given: &Document, current: &Document) -> DocResult<Document> {
    let g = parse_given(set_name, given)?;
    let version = current.get_i32("version").map_or(1, i64::from);
    if g.version <= version {
        return Err(DocError::with_code(
            103,
            "NewReplicaSetConfigurationIncompatible",
            format!("New config is rejected: its version {} must be greater than the current version {version}", g.version),
        ));
    }
    let mut kept = current
        .get_document("settings")
        .map_err(|_| invalid("the current configuration has no settings"))?
        .clone();
    // The write concern modes are the server's own business, not Raft's: they may change.
    if let Some(modes) = g.settings.and_then(|s| s.get("getLastErrorModes")) {
        kept.insert("getLastErrorModes", tag_modes(modes)?);
    }
    for (k, v) in g.settings.into_iter().flatten() {
        let same = kept.get(k).is_some_and(|was| {
            was == v || matches!((num(was, k), num(v, k)), (Ok(a), Ok(b)) if a == b)
        });
        if !same {
            return Err(invalid(format!(
                "settings.{k} cannot be changed by replSetReconfig yet (docs/replication.md); it is {}",
                kept.get(k).map_or_else(|| "unset".to_string(), ToString::to_string)
            )));
        }
    }
    check_modes(&g.members, &kept)?;
    Ok(full_config(set_name, g.version, g.members, kept))
}

/// A member's `tags`: a document of strings.
fn member_tags(v: &Bson, at: &str) -> DocResult<Document> {
    let Bson::Document(tags) = v else {
        return Err(invalid(format!("{at} must be an object")));
    };
    if let Some((k, _)) = tags.iter().find(|(_, v)| !matches!(v, Bson::String(_))) {
        return Err(invalid(format!("{at}.{k} must be a string")));
    }
    Ok(tags.clone())
}

/// `settings.getLastErrorModes`: `{mode: {tag: positive integer}}`.
fn tag_modes(v: &Bson) -> DocResult<Document> {
    let Bson::Document(modes) = v else {
        return Err(invalid("settings.getLastErrorModes must be an object"));
    };
    for (mode, spec) in modes {
        let Bson::Document(spec) = spec else {
            return Err(invalid(format!(
                "settings.getLastErrorModes.{mode} must be an object"
            )));
        };
        if spec.is_empty() {
            return Err(invalid(format!(
                "settings.getLastErrorModes.{mode} names no tag"
            )));
        }
        for (tag, n) in spec {
            if count(n).is_none_or(|n| n == 0) {
                return Err(invalid(format!(
                    "settings.getLastErrorModes.{mode}.{tag} must be a positive integer"
                )));
            }
        }
    }
    Ok(modes.clone())
}

/// Refuses a mode the members can never meet: a tag it needs more distinct values of than the
/// members carry (mongod refuses such a configuration).
fn check_tag_modes(members: &[Document], modes: &Document) -> DocResult<()> {
    for (mode, spec) in modes {
        for (tag, n) in spec.as_document().into_iter().flatten() {
            let n = count(n).unwrap_or(usize::MAX);
            let values: BTreeSet<&str> = members
                .iter()
                .filter_map(|m| m.get_document("tags").ok()?.get_str(tag).ok())
                .collect();
            if values.len() < n {
                return Err(invalid(format!(
                    "mode {mode} requires {n} different values for the tag {tag}, but only {} exist in the members",
                    values.len()
                )));
            }
        }
    }
    Ok(())
}

/// The write concern modes of `settings` against the members' tags.
fn check_modes(members: &[Document], settings: &Document) -> DocResult<()> {
    match settings.get_document("getLastErrorModes") {
        Ok(modes) => check_tag_modes(members, modes),
        Err(_) => Ok(()),
    }
}

fn check_members(members: &[Document]) -> DocResult<()> {
    if members.is_empty() {
        return Err(invalid("members must not be empty"));
    }
    for (i, a) in members.iter().enumerate() {
        for b in &members[..i] {
            if a.get("_id") == b.get("_id") {
                return Err(invalid(format!(
                    "two members have _id {}",
                    a.get("_id").unwrap_or(&Bson::Null)
                )));
            }
            if a.get_str("host").ok() == b.get_str("host").ok() {
                return Err(invalid(format!(
                    "two members have host {}",
                    a.get_str("host").unwrap_or_default()
                )));
            }
        }
    }
    for m in members_of(&doc! {"members": members.to_vec()})? {
        repl_member_check(&m)?;
    }
    Ok(())
}

/// The settings the Raft member checks (votes 0 or 1, priority 0 with votes 0 or hidden).
fn repl_member_check(m: &Member) -> DocResult<()> {
    let ok_votes = m.votes <= 1;
    let ok_priority = (0.0..=1000.0).contains(&m.priority);
    let ok_passive = !(m.votes == 0 || m.hidden) || m.priority == 0.0;
    if ok_votes && ok_priority && ok_passive {
        return Ok(());
    }
    Err(invalid(format!("member {}: votes must be 0 or 1, priority between 0 and 1000, and a member with votes 0 or hidden must have priority 0", m.id)))
}

/// The configuration's members as the Raft member takes them.
pub fn members_of(config: &Document) -> DocResult<Vec<Member>> {
    let list = config
        .get_array("members")
        .map_err(|_| invalid("no members"))?;
    list.iter()
        .filter_map(Bson::as_document)
        .map(|m| {
            Ok(Member {
                id: int(m.get("_id").unwrap_or(&Bson::Null), "_id")? as u64,
                addr: m.get_str("host").map_err(|_| invalid("host"))?.to_string(),
                votes: u8::try_from(int(m.get("votes").unwrap_or(&Bson::Int32(1)), "votes")?)
                    .map_err(|_| invalid("votes must be 0 or 1"))?,
                priority: num(m.get("priority").unwrap_or(&Bson::Double(1.0)), "priority")?,
                hidden: m.get_bool("hidden").unwrap_or(false),
            })
        })
        .collect()
}

/// One step of a reconfiguration on the Raft membership.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A new member: joins as a learner, catches up, then votes if it has `votes: 1`.
    Add(Member),
    Remove(u64),
    /// A new `priority` or `hidden` for a member.
    Reconfigure(Member),
}

/// The changes from the `current` configuration to `next` (both checked) on a primary that is
/// member `me`. What Raft cannot change in place is refused by name: a member's host or votes
/// (remove it and add it), removing the primary or making it unelectable (step it down
/// first), and more than one voter added or removed at once (mongod's rule for a reconfig
/// without `force`).
pub fn plan_changes(current: &Document, next: &Document, me: u64) -> DocResult<Vec<Change>> {
    let old = members_of(current)?;
    let new = members_of(next)?;
    let mut changes = Vec::new();
    let mut voters_changed = 0;
    for m in old.iter().filter(|m| !new.iter().any(|n| n.id == m.id)) {
        if m.id == me {
            return Err(invalid(format!(
                "member {me} is the primary and cannot be removed; step it down first"
            )));
        }
        voters_changed += usize::from(m.votes == 1);
        changes.push(Change::Remove(m.id));
    }
    for n in &new {
        let Some(m) = old.iter().find(|m| m.id == n.id) else {
            voters_changed += usize::from(n.votes == 1);
            changes.push(Change::Add(n.clone()));
            continue;
        };
        if m.addr != n.addr || m.votes != n.votes {
            return Err(invalid(format!(
                "member {}: its host and votes cannot change in place (remove it, then add it)",
                n.id
            )));
        }
        if m.priority != n.priority || m.hidden != n.hidden {
            if n.id == me && (n.priority == 0.0 || n.hidden) {
                return Err(invalid(format!(
                    "member {me} is the primary and must stay electable; step it down first"
                )));
            }
            changes.push(Change::Reconfigure(n.clone()));
        }
    }
    if voters_changed > 1 {
        return Err(DocError::with_code(
            103,
            "NewReplicaSetConfigurationIncompatible",
            "Non force replica set reconfig can only add or remove at most 1 voting member.",
        ));
    }
    Ok(changes)
}

/// The host of member `id`.
pub fn host_of(config: &Document, id: u64) -> Option<String> {
    members_of(config)
        .ok()?
        .into_iter()
        .find(|m| m.id == id)
        .map(|m| m.addr)
}

/// The Raft member's settings for member `id`: elections after `electionTimeoutMillis` to 1.5
/// times it (mongod adds a random offset too), heartbeats at `heartbeatIntervalMillis`. A
/// snapshot of the replicated state every `snapshot_every` entries, and a tenth of that kept
/// in the log behind it (a member that far behind catches up from the log, further behind
/// from the snapshot); docs/replication.md, "Snapshots".
pub fn node_config(id: u64, config: &Document, snapshot_every: u64) -> DocResult<NodeConfig> {
    let host = host_of(config, id).ok_or_else(|| invalid(format!("no member with _id {id}")))?;
    let s = config
        .get_document("settings")
        .map_err(|_| invalid("settings"))?;
    let election = s
        .get_i64("electionTimeoutMillis")
        .unwrap_or(DEFAULT_ELECTION_TIMEOUT_MS) as u64;
    let heartbeat = s
        .get_i64("heartbeatIntervalMillis")
        .unwrap_or(DEFAULT_HEARTBEAT_MS) as u64;
    let mut cfg = NodeConfig::new(id, host);
    cfg.election_timeout = (election, election + election / 2);
    cfg.heartbeat = heartbeat;
    assert!(snapshot_every > 0, "a snapshot every 0 entries");
    cfg.snapshot_every = snapshot_every;
    cfg.keep_behind_snapshot = snapshot_every / 10;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_tags_are_checked() {
        let config = doc! {"members": [{"_id": 0, "tags": {"dc": "east", "rack": "a"}}, {"_id": 1, "tags": {"dc": "east", "rack": "b"}}, {"_id": 2, "tags": {"dc": "west"}}]};
        let members = config
            .get_array("members")
            .unwrap()
            .iter()
            .filter_map(|m| m.as_document().cloned())
            .collect::<Vec<_>>();
        assert!(check_tag_modes(&members, &doc! {"m": {"dc": 2}}).is_ok());
        assert_eq!(
            check_tag_modes(&members, &doc! {"m": {"dc": 3}})
                .unwrap_err()
                .code,
            93
        );
        assert_eq!(
            check_tag_modes(&members, &doc! {"m": {"zone": 1}})
                .unwrap_err()
                .code,
            93
        );
        assert!(tag_modes(&Bson::Document(doc! {"m": {"dc": 0}})).is_err());
        assert!(tag_modes(&Bson::Document(doc! {"m": {}})).is_err());
        assert!(member_tags(&Bson::Document(doc! {"dc": 1}), "members[0].tags").is_err());
        assert!(member_tags(&Bson::Document(doc! {"dc": "x"}), "members[0].tags").is_ok());
    }

    #[test]
    fn a_minimal_config_gets_mongods_defaults() {
        let c = normalize("rs0", Some(&doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}, {"_id": 1, "host": "b:2"}]}), "a:1").unwrap();
        assert_eq!(c.get_i32("version").unwrap(), 1);
        let m = members_of(&c).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!((m[1].id, m[1].addr.as_str(), m[1].votes), (1, "b:2", 1));
        let n = node_config(1, &c, 10_000).unwrap();
        assert_eq!(n.election_timeout, (10_000, 15_000));
        assert_eq!(n.heartbeat, 2_000);
        assert_eq!((n.snapshot_every, n.keep_behind_snapshot), (10_000, 1_000));
        let alone = normalize("rs0", None, "me:5").unwrap();
        assert_eq!(host_of(&alone, 0).as_deref(), Some("me:5"));
    }

    #[test]
    #[should_panic(expected = "a snapshot every 0 entries")]
    fn a_snapshot_interval_of_zero_trips_the_assertion() {
        let c = normalize("rs0", None, "me:5").unwrap();
        let _ = node_config(0, &c, 0);
    }

    fn three() -> Document {
        let given = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}, {"_id": 1, "host": "b:1"}, {"_id": 2, "host": "c:1"}]};
        normalize("rs0", Some(&given), "a:1").unwrap()
    }

    fn next(current: &Document, version: i32, members: Vec<Document>) -> DocResult<Document> {
        let mut given = current.clone();
        given.insert("version", version);
        given.insert("members", members);
        reconfigured("rs0", &given, current)
    }

    fn member_doc(id: i32, host: &str) -> Document {
        doc! {"_id": id, "host": host}
    }

    #[test]
    fn a_reconfig_adds_removes_and_changes_one_voter_at_a_time() {
        let cur = three();
        let base = || {
            vec![
                member_doc(0, "a:1"),
                member_doc(1, "b:1"),
                member_doc(2, "c:1"),
            ]
        };
        // rs.conf() given back with a new version and one more member.
        let mut four = base();
        four.push(member_doc(3, "d:1"));
        let added = next(&cur, 2, four.clone()).unwrap();
        assert_eq!(added.get_i32("version").unwrap(), 2);
        assert_eq!(
            added.get_document("settings").unwrap(),
            cur.get_document("settings").unwrap()
        );
        let changes = plan_changes(&cur, &added, 0).unwrap();
        assert!(matches!(changes.as_slice(), [Change::Add(m)] if m.id == 3 && m.addr == "d:1"));
        let removed = next(&cur, 2, base()[..2].to_vec()).unwrap();
        assert_eq!(
            plan_changes(&cur, &removed, 0).unwrap(),
            vec![Change::Remove(2)]
        );
        let mut passive = base();
        passive[2].insert("priority", 0);
        let passive = next(&cur, 2, passive).unwrap();
        assert!(
            matches!(plan_changes(&cur, &passive, 0).unwrap().as_slice(), [Change::Reconfigure(m)] if m.id == 2 && m.priority == 0.0)
        );
        // Refused by name.
        assert_eq!(
            next(&cur, 1, base()).unwrap_err().code,
            103,
            "the version must grow"
        );
        let mut five = four.clone();
        five.push(member_doc(4, "e:1"));
        let two_voters = next(&cur, 2, five).unwrap();
        assert_eq!(plan_changes(&cur, &two_voters, 0).unwrap_err().code, 103);
        assert!(plan_changes(&cur, &removed, 2)
            .unwrap_err()
            .message
            .contains("primary"));
        let mut moved = base();
        moved[1].insert("host", "x:1");
        let moved = next(&cur, 2, moved).unwrap();
        assert!(plan_changes(&cur, &moved, 0)
            .unwrap_err()
            .message
            .contains("cannot change in place"));
        let mut given = cur.clone();
        given.insert("version", 2);
        given.insert("settings", doc! {"electionTimeoutMillis": 5});
        assert!(reconfigured("rs0", &given, &cur)
            .unwrap_err()
            .message
            .contains("settings.electionTimeoutMillis"));
    }

    #[test]
    fn what_flashdoc_cannot_honour_is_refused_by_name() {
        let cases = [
            (
                doc! {"_id": "other", "members": [{"_id": 0, "host": "a:1"}]},
                "command line reports rs0",
            ),
            (
                doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "arbiterOnly": true}]},
                "arbiterOnly: arbiters",
            ),
            (
                doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "slaveDelay": 5}]},
                "slaveDelay: unknown",
            ),
            (
                doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}, {"_id": 0, "host": "b:1"}]},
                "two members have _id",
            ),
            (
                doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "votes": 0}]},
                "priority 0",
            ),
            (doc! {"_id": "rs0", "members": []}, "must not be empty"),
            (
                doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}], "settings": {"getLastErrorModes": {"m": {"dc": 1}}}},
                "mode m requires 1 different values for the tag dc",
            ),
            (
                doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}], "settings": {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 900}},
                "at most half",
            ),
        ];
        for (cfg, want) in cases {
            let e = normalize("rs0", Some(&cfg), "a:1").unwrap_err();
            assert_eq!(e.code, 93, "{cfg}");
            assert!(e.message.contains(want), "{cfg}: {}", e.message);
        }
    }
}
