//! The command table's own rules, and the assertions on the write replies.

use super::batch::cursor_document;
use super::crud::{write_reply, Applied, WriteKind};
use super::table::{lookup, COMMANDS};
use crate::spec::{Fields, Namespace, OpKind};
use bson::{doc, Bson};
use docdb::{DocError, WriteError, WriteOutcome};

#[test]
fn every_name_is_one_rows() {
    let mut seen = std::collections::BTreeSet::new();
    for c in COMMANDS {
        for n in c.spec.names() {
            assert!(seen.insert(n), "{n} names two rows");
            assert!(std::ptr::eq(lookup(n).unwrap(), c), "{n}");
        }
    }
    assert!(lookup("noSuchCommand").is_none());
}

#[test]
fn the_rows_say_what_the_lists_beside_dispatch_said() {
    let spec = |n: &str| lookup(n).unwrap().spec;
    // Aliases are never in the Stable API; the name they alias may be.
    assert!(spec("hello").in_api_v1("hello"));
    assert!(!spec("isMaster").in_api_v1("ismaster"));
    assert!(spec("findAndModify").in_api_v1("findAndModify"));
    assert!(!spec("findandmodify").in_api_v1("findandmodify"));
    assert!(spec("deleteIndexes").write_concern && spec("insert").write_concern);
    assert!(!spec("find").write_concern && !spec("renameCollection").api_v1);
    assert!(!spec("saslStart").profiled && spec("find").profiled);
    assert_eq!(spec("delete").op, OpKind::Remove);
    assert_eq!(spec("count").op, OpKind::Command);
    assert_eq!(spec("listIndexes").namespace, Namespace::IndexList);
    assert!(spec("shutdown").ends_server && !spec("fsync").ends_server);
    assert_eq!(spec("currentOp").fields, Fields::Arguments);
    let Fields::Only { known, unsupported } = spec("find").fields else {
        panic!("find's fields are checked");
    };
    assert!(known.contains(&"filter") && known.contains(&"let") && unsupported.contains(&"term"));
    // distinct is outside the Stable API's version 1 (mongod's APIStrictError), find within.
    assert!(!spec("distinct").api_v1 && spec("find").api_v1);
}

/// The commands a member treats as writes (the `writes()` flag): a secondary refuses them and
/// the primary replicates them.
const WRITES: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "create",
    "drop",
    "dropDatabase",
    "renameCollection",
    "createIndexes",
    "dropIndexes",
    "collMod",
    "mapReduce",
    "createUser",
    "updateUser",
    "dropUser",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "setDefaultRWConcern",
    // A transaction's end: its commit writes the transaction's entry, and both take the
    // write concern (`replset::txn`).
    "commitTransaction",
    "abortTransaction",
];
/// Reads (an `aggregate` with `$out`/`$merge` is a write by its pipeline:
/// `fields::pipeline_writes`), and what each member keeps for itself: its sessions,
/// cursors, parameters, fail points, profiler level and compaction, and the set's own
/// commands, which go through Raft rather than the oplog.
const NOT_WRITES: &[&str] = &[
    "hello",
    "isMaster",
    "ping",
    "saslStart",
    "saslContinue",
    "authenticate",
    "logout",
    "buildInfo",
    "connectionStatus",
    "whatsmyuri",
    "listCommands",
    "endSessions",
    "startSession",
    "refreshSessions",
    "killSessions",
    "killAllSessions",
    "getMore",
    "killCursors",
    "find",
    "count",
    "distinct",
    "aggregate",
    "explain",
    "listCollections",
    "listIndexes",
    "collStats",
    "dbStats",
    "validate",
    "compact",
    "profile",
    "usersInfo",
    "listDatabases",
    "serverStatus",
    "hostInfo",
    "getCmdLineOpts",
    "getLog",
    "replSetInitiate",
    "replSetGetStatus",
    "replSetGetConfig",
    "replSetStepDown",
    "replSetFreeze",
    "replSetReconfig",
    "getDefaultRWConcern",
    "getParameter",
    "currentOp",
    "setParameter",
    "killOp",
    "fsync",
    "shutdown",
    "configureFailPoint",
    "waitForFailPoint",
    "sleep",
    "testVersion2",
];
/// On a replica-set member the `writes()` flag decides what a secondary refuses and what the
/// primary replicates: every command is placed here on purpose, so a new one must be too.
#[test]
fn every_command_that_changes_data_the_catalog_or_users_is_a_write() {
    for c in COMMANDS {
        let name = c.spec.name;
        if c.spec.write_concern {
            assert!(WRITES.contains(&name), "{name} writes: list it in WRITES");
        } else {
            assert!(
                NOT_WRITES.contains(&name),
                "{name}: a write (.writes()) or in NOT_WRITES?"
            );
        }
    }
    for n in WRITES.iter().chain(NOT_WRITES) {
        assert!(lookup(n).is_some(), "{n} is a command");
    }
    let agg = |stage: Bson| doc! {"aggregate": "c", "pipeline": [{"$match": {}}, stage]};
    assert!(super::fields::pipeline_writes(
        "aggregate",
        &agg(bson::bson!({"$out": "o"}))
    ));
    assert!(super::fields::pipeline_writes(
        "aggregate",
        &agg(bson::bson!({"$merge": "o"}))
    ));
    assert!(!super::fields::pipeline_writes(
        "aggregate",
        &agg(bson::bson!({"$limit": 1}))
    ));
}

fn outcome(n: u64, errors: &[usize]) -> WriteOutcome {
    WriteOutcome {
        n,
        write_errors: errors
            .iter()
            .map(|&index| WriteError {
                index,
                error: DocError::bad_value("x"),
            })
            .collect(),
        ..Default::default()
    }
}

fn applied(statements: usize, ordered: bool, kind: WriteKind) -> Applied {
    Applied {
        statements,
        ordered,
        kind,
    }
}

#[test]
fn a_write_reply_reports_its_statements() {
    let r = write_reply(outcome(2, &[1]), &applied(3, false, WriteKind::Insert));
    assert_eq!(r.get_i32("n"), Ok(2));
    assert_eq!(r.get_array("writeErrors").unwrap().len(), 1);
    // The namespace's own error names statement 0, even of an empty batch.
    let r = write_reply(outcome(0, &[0]), &applied(0, true, WriteKind::Delete));
    assert_eq!(r.get_array("writeErrors").unwrap().len(), 1);
    let mut up = outcome(5, &[]);
    up.n_modified = 4;
    up.upserted = vec![(0, Bson::Int32(1))];
    let r = write_reply(up, &applied(1, true, WriteKind::Update));
    assert_eq!(r.get_i32("nModified"), Ok(4));
}

#[test]
#[should_panic(expected = "write error for statement 3")]
fn a_write_error_names_a_statement_of_the_request() {
    write_reply(outcome(0, &[3]), &applied(3, false, WriteKind::Delete));
}

#[test]
#[should_panic(expected = "write error for statement 1 after Some(2)")]
fn write_errors_come_in_statement_order() {
    write_reply(outcome(0, &[2, 1]), &applied(3, false, WriteKind::Delete));
}

#[test]
#[should_panic(expected = "an ordered write stops at its first error")]
fn an_ordered_write_has_one_error_at_most() {
    write_reply(outcome(0, &[0, 1]), &applied(3, true, WriteKind::Insert));
}

#[test]
#[should_panic(expected = "3 inserted and 1 failed of 3 documents")]
fn an_insert_inserts_each_document_once() {
    write_reply(outcome(3, &[2]), &applied(3, false, WriteKind::Insert));
}

#[test]
#[should_panic(expected = "nModified 3")]
fn an_update_modifies_what_it_matched() {
    let mut up = outcome(2, &[]);
    up.n_modified = 3;
    write_reply(up, &applied(1, true, WriteKind::Update));
}

#[test]
#[should_panic(expected = "2 upserted")]
fn an_update_upserts_once_per_statement() {
    let mut up = outcome(2, &[]);
    up.upserted = vec![(0, Bson::Int32(1)), (0, Bson::Int32(2))];
    write_reply(up, &applied(1, true, WriteKind::Update));
}

#[test]
fn a_cursor_reply_holds_its_batch_and_id() {
    let d = cursor_document("firstBatch", vec![Bson::Document(doc! {})], 1, 9, "d.c");
    assert_eq!(d.get_document("cursor").unwrap().get_i64("id"), Ok(9));
}

#[test]
#[should_panic(expected = "a batch of 2 documents where 1 were asked")]
fn a_batch_holds_no_more_than_asked() {
    let two = vec![Bson::Document(doc! {}), Bson::Document(doc! {})];
    cursor_document("nextBatch", two, 1, 0, "d.c");
}

#[test]
#[should_panic(expected = "ids are non-negative")]
fn a_cursor_id_is_never_negative() {
    cursor_document("firstBatch", vec![], 0, -4, "d.c");
}
