//! The commands that change who leads and who is in the set: `replSetStepDown`,
//! `replSetFreeze` and `replSetReconfig` (docs/replication.md, "The server's replica set").

use super::commands::{ask_to_join, not_yet_initialized, replset};
use super::config::{self as set_config, Change};
use super::stored::CONFIG_ENTRY;
use super::{Joined, ReplSet};
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use repl::{ReplError, Role};
use std::sync::Arc;
use std::time::Duration;

/// mongod's `replSetStepDown` when its value is 0 or not a number.
const DEFAULT_STEP_DOWN_SECS: i64 = 60;
/// mongod's default `secondaryCatchUpPeriodSecs`.
const DEFAULT_CATCH_UP_SECS: i64 = 10;

pub fn not_primary_to_step_down() -> DocError {
    DocError::with_code(
        10107,
        "NotWritablePrimary",
        "not primary so can't step down",
    )
}

/// The Raft member's step-down failure as mongod reports it.
pub fn step_down_error(e: &ReplError, catch_up: Duration) -> DocError {
    match e {
        ReplError::NotLeader { .. } => not_primary_to_step_down(),
        ReplError::Timeout(_) => DocError::with_code(
            262,
            "ExceededTimeLimit",
            format!(
                "No electable secondaries caught up within secondaryCatchUpPeriodSecs ({} s), or none took over",
                catch_up.as_secs()
            ),
        ),
        e => DocError::with_code(1, "InternalError", format!("stepping down: {e}")),
    }
}

/// A whole number of seconds from a command field (mongod truncates fractions).
fn seconds(v: &Bson, what: &str) -> DocResult<i64> {
    query::compare::Num::of(v)
        .map(|n| n.as_f64())
        .filter(|n| n.is_finite())
        .map(|n| n as i64)
        .ok_or_else(|| DocError::type_mismatch(format!("{what} must be a number")))
}

/// `replSetStepDown`'s arguments: how long to stay out of elections, and how long to wait for
/// a caught-up secondary.
#[derive(Debug, PartialEq)]
struct StepDownRequest {
    stay_down: Duration,
    catch_up: Duration,
}

fn parse_step_down(cmd: &Document) -> DocResult<StepDownRequest> {
    let stay = match cmd.get("replSetStepDown") {
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => {
            seconds(v, "replSetStepDown")?
        }
        _ => 0,
    };
    let stay = if stay == 0 {
        DEFAULT_STEP_DOWN_SECS
    } else {
        stay
    };
    let catch_up = match cmd.get("secondaryCatchUpPeriodSecs") {
        Some(v) => seconds(v, "secondaryCatchUpPeriodSecs")?,
        None => DEFAULT_CATCH_UP_SECS,
    };
    if cmd.get_bool("force").unwrap_or(false) {
        return Err(DocError::with_code(
            238,
            "NotImplemented",
            "replSetStepDown with force: true is not available: flashdoc hands the primary only to a caught-up secondary (docs/replication.md)",
        ));
    }
    if stay < 0 || catch_up < 0 {
        return Err(DocError::bad_value(
            "replSetStepDown and secondaryCatchUpPeriodSecs must not be negative",
        ));
    }
    if stay < catch_up {
        return Err(DocError::bad_value(
            "stepdown period must be longer than secondaryCatchUpPeriodSecs",
        ));
    }
    Ok(StepDownRequest {
        stay_down: Duration::from_secs(stay as u64),
        catch_up: Duration::from_secs(catch_up as u64),
    })
}

/// `replSetStepDown`: the primary hands the set to a caught-up secondary and stays out of
/// elections for the period asked. Connections stay open, as in mongod 4.2+; writes under way
/// finish first, and later ones answer NotWritablePrimary.
pub fn step_down(member: Option<&Arc<ReplSet>>, cmd: &Document) -> DocResult<Document> {
    let rs = replset(member)?;
    let j = rs.member().ok_or_else(not_yet_initialized)?;
    let req = parse_step_down(cmd)?;
    if j.status().role != Role::Primary {
        return Err(not_primary_to_step_down());
    }
    let successor = rs.step_down(&j, req.stay_down, req.catch_up)?;
    crate::log::info(
        "REPL",
        &format!(
            "stepped down; member {successor} takes over; no elections here for {} s",
            req.stay_down.as_secs()
        ),
    );
    Ok(doc! {})
}

/// `replSetFreeze`: this member does not campaign for the seconds given (0 unfreezes).
/// Refused on the primary, as mongod refuses it.
pub fn freeze(member: Option<&Arc<ReplSet>>, cmd: &Document) -> DocResult<Document> {
    let rs = replset(member)?;
    let j = rs.member().ok_or_else(not_yet_initialized)?;
    let secs = seconds(
        cmd.get("replSetFreeze").unwrap_or(&Bson::Null),
        "replSetFreeze",
    )?;
    if secs < 0 {
        return Err(DocError::bad_value("replSetFreeze must not be negative"));
    }
    if matches!(j.status().role, Role::Primary | Role::Candidate) {
        return Err(DocError::with_code(
            95,
            "NotSecondary",
            "cannot freeze node when primary or running for election",
        ));
    }
    j.node
        .freeze(secs as u64)
        .map_err(|e| DocError::with_code(95, "NotSecondary", e.to_string()))?;
    Ok(if secs == 0 {
        doc! {"info": "unfreezing"}
    } else {
        doc! {}
    })
}

/// `replSetReconfig` (without `force`): on the primary, a configuration with a greater
/// version; members added (each asked to join, then caught up as a learner before it votes),
/// removed, or given a new priority or `hidden`, one voter at a time; then the configuration
/// itself goes through the log, so every member adopts it.
pub fn reconfig(member: Option<&Arc<ReplSet>>, cmd: &Document) -> DocResult<Document> {
    let rs = replset(member)?;
    let j = rs.member().ok_or_else(not_yet_initialized)?;
    if cmd.get_bool("force").unwrap_or(false) {
        return Err(DocError::with_code(
            238,
            "NotImplemented",
            "replSetReconfig with force: true is not available: a configuration changes through the primary only (docs/replication.md)",
        ));
    }
    let given = cmd
        .get_document("replSetReconfig")
        .map_err(|_| DocError::type_mismatch("replSetReconfig takes a configuration object"))?;
    let current = j.config.get();
    let next = set_config::reconfigured(&rs.name, given, &current)?;
    if !rs.writable(&j.status()) {
        return Err(DocError::with_code(
            10107,
            "NotWritablePrimary",
            "replSetReconfig should only be run on a writable PRIMARY",
        ));
    }
    let changes = set_config::plan_changes(&current, &next, j.id)?;
    // One reconfiguration at a time on this member.
    let _one = rs.starting.lock();
    carry_out(rs, &j, &next, &changes)?;
    crate::log::info(
        "REPL",
        &format!(
            "replica set {} reconfigured to version {}: {changes:?}",
            rs.name,
            super::config_version(&next)
        ),
    );
    Ok(doc! {})
}

fn reconfig_error(step: &str, e: &ReplError) -> DocError {
    match e {
        ReplError::NotLeader { .. } => DocError::with_code(
            10107,
            "NotWritablePrimary",
            format!("lost the primary's role during replSetReconfig ({step})"),
        ),
        e => DocError::with_code(1, "InternalError", format!("replSetReconfig, {step}: {e}")),
    }
}

fn carry_out(rs: &ReplSet, j: &Joined, next: &Document, changes: &[Change]) -> DocResult<()> {
    for change in changes {
        let done = match change {
            Change::Add(m) => {
                ask_to_join(rs, m, next)?;
                j.node.run(j.node.add_member(m))
            }
            Change::Remove(id) => j.node.run(j.node.remove_member(*id)),
            Change::Reconfigure(m) => j.node.run(j.node.reconfigure_member(m)),
        };
        done.map_err(|e| reconfig_error(&format!("{change:?}"), &e))?;
    }
    let mut bytes = Vec::new();
    doc! {CONFIG_ENTRY: next.clone()}
        .to_writer(&mut bytes)
        .map_err(|e| DocError::internal_error(e.to_string()))?;
    j.node
        .run(j.node.propose(bytes))
        .map_err(|e| reconfig_error("recording the configuration", &e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn step_down_takes_mongods_arguments_and_refuses_force() {
        let parse = |d: Document| parse_step_down(&d);
        assert_eq!(
            parse(doc! {"replSetStepDown": 1}).unwrap_err().message,
            "stepdown period must be longer than secondaryCatchUpPeriodSecs"
        );
        assert_eq!(
            parse(doc! {"replSetStepDown": 30, "secondaryCatchUpPeriodSecs": 5}).unwrap(),
            StepDownRequest {
                stay_down: secs(30),
                catch_up: secs(5)
            }
        );
        assert_eq!(
            parse(doc! {"replSetStepDown": true}).unwrap(),
            StepDownRequest {
                stay_down: secs(60),
                catch_up: secs(10)
            }
        );
        assert_eq!(
            parse(doc! {"replSetStepDown": 60, "force": true})
                .unwrap_err()
                .code,
            238
        );
        assert_eq!(
            parse(doc! {"replSetStepDown": 60, "secondaryCatchUpPeriodSecs": -1})
                .unwrap_err()
                .code,
            2
        );
        assert_eq!(
            parse(doc! {"replSetStepDown": 60, "secondaryCatchUpPeriodSecs": "x"})
                .unwrap_err()
                .code,
            14
        );
    }

    #[test]
    fn step_down_failures_are_mongods_errors() {
        let not_leader = ReplError::NotLeader { leader: None };
        assert_eq!(step_down_error(&not_leader, secs(1)).code, 10107);
        let timeout = ReplError::Timeout(secs(1));
        assert_eq!(step_down_error(&timeout, secs(1)).code, 262);
    }
}
