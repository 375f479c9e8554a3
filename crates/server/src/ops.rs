//! The operations in progress: `currentOp` lists them and `killOp` interrupts one.
//!
//! Every command is registered while it runs ([`Ops::begin`]; the [`Running`] guard removes it)
//! with its one [`Interrupt`], which carries the command's `maxTimeMS` budget and is what every
//! yield point of the command checks (the command's code gets it from [`current`]). `killOp`
//! kills that interrupt: the operation fails at its next yield point with Interrupted (11601),
//! as in mongod. A `getMore` reads its cursor under the cursor's own interrupt (so a cursor's
//! budget spans its batches): killing a getMore's opid stops the cursor's read too, because the
//! getMore registers the cursor's interrupt in place of a new one.

use crate::client::ConnInfo;
use crate::spec::OpKind;
use bson::{doc, Bson, Document};
use docdb::Interrupt;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Instant;

/// One operation in progress.
struct Op {
    ns: String,
    /// Its kind (from the command's row in the command table).
    op: OpKind,
    command: Document,
    started: Instant,
    client: String,
    connection: i32,
    /// Who was authenticated on the connection when it started: (user, db).
    users: Vec<(String, String)>,
    interrupt: Interrupt,
}

#[derive(Default)]
pub struct Ops {
    next: Mutex<i32>,
    running: Mutex<BTreeMap<i32, Op>>,
    /// The open connections (id → peer), for the idle ones `currentOp` lists on request.
    connections: Mutex<BTreeMap<i32, String>>,
}

/// Which operations a listing shows (`currentOp`'s `$ownOps`/`$all`, `$currentOp`'s
/// `allUsers`/`idleConnections`).
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// Only the operations of these users (with authorization off nobody is authenticated,
    /// so every operation is everybody's); None: every user's.
    pub only_users: Option<Vec<(String, String)>>,
    /// Also the open connections that run nothing (`active: false`).
    pub idle_connections: bool,
}

/// The (user, db) pairs authenticated on a connection.
pub fn users_of(conn: &ConnInfo) -> Vec<(String, String)> {
    conn.auth
        .lock()
        .users
        .iter()
        .map(|u| (u.user.clone(), u.db.clone()))
        .collect()
}

thread_local! {
    /// The interrupt of the command this thread runs (commands run synchronously on one
    /// blocking-pool thread from dispatch to reply).
    static CURRENT: RefCell<Option<(i32, Interrupt)>> = const { RefCell::new(None) };
}

/// The running command's interrupt, if this thread runs one.
pub fn current() -> Option<Interrupt> {
    CURRENT.with(|c| c.borrow().as_ref().map(|(_, i)| i.clone()))
}

/// While alive, the operation is listed; dropping it unlists it and makes the command this
/// thread ran before (a caller that runs a command inside its own) current again.
pub struct Running<'a> {
    ops: &'a Ops,
    opid: i32,
    outer: Option<(i32, Interrupt)>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.ops.running.lock().remove(&self.opid);
        let outer = self.outer.take();
        Interrupt::set_current(outer.as_ref().map(|(_, i)| i.clone()));
        CURRENT.with(|c| *c.borrow_mut() = outer);
    }
}

impl Ops {
    /// Lists a command of kind `op` as running under `interrupt` and makes it this thread's
    /// current one.
    pub fn begin(
        &self,
        name: &str,
        op: OpKind,
        db: &str,
        cmd: &Document,
        conn: &ConnInfo,
        interrupt: Interrupt,
    ) -> Running<'_> {
        let opid = {
            let mut next = self.next.lock();
            *next = next.wrapping_add(1).max(1);
            *next
        };
        let ns = namespace(name, db, cmd);
        let outer = CURRENT.with(|c| c.borrow_mut().replace((opid, interrupt.clone())));
        // What the query crate's server-side JavaScript stops on (killOp, maxTimeMS).
        Interrupt::set_current(Some(interrupt.clone()));
        self.running.lock().insert(
            opid,
            Op {
                ns,
                op,
                command: summary(cmd),
                started: Instant::now(),
                client: conn.peer.to_string(),
                connection: conn.id,
                users: users_of(conn),
                interrupt,
            },
        );
        Running {
            ops: self,
            opid,
            outer,
        }
    }

    /// The running command continues under `interrupt` (a getMore under its cursor's): killOp
    /// and this thread's [`current`] reach it from now on.
    pub fn adopt(&self, interrupt: &Interrupt) {
        Interrupt::set_current(Some(interrupt.clone()));
        let opid = CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            let (opid, current) = c.as_mut()?;
            *current = interrupt.clone();
            Some(*opid)
        });
        if let Some(id) = opid {
            if let Some(op) = self.running.lock().get_mut(&id) {
                op.interrupt = interrupt.clone();
            }
        }
    }

    /// The connection of the command this thread runs (None outside a command).
    pub fn current_connection(&self) -> Option<i32> {
        let opid = CURRENT.with(|c| c.borrow().as_ref().map(|(id, _)| *id))?;
        self.running.lock().get(&opid).map(|op| op.connection)
    }

    /// The users authenticated on the connection of the command this thread runs (empty when
    /// nobody was, or outside a command): who owns the cursors it opens.
    pub fn current_users(&self) -> Vec<(String, String)> {
        let Some(opid) = CURRENT.with(|c| c.borrow().as_ref().map(|(id, _)| *id)) else {
            return Vec::new();
        };
        self.running
            .lock()
            .get(&opid)
            .map(|op| op.users.clone())
            .unwrap_or_default()
    }

    /// Kills an operation; whether it was running.
    pub fn kill(&self, opid: i32) -> bool {
        match self.running.lock().get(&opid) {
            Some(op) => {
                op.interrupt.kill();
                true
            }
            None => false,
        }
    }

    /// A connection opened (listed as idle while it runs nothing).
    pub fn connect(&self, id: i32, peer: String) {
        self.connections.lock().insert(id, peer);
    }

    /// A connection closed.
    pub fn disconnect(&self, id: i32) {
        self.connections.lock().remove(&id);
    }

    /// Every operation in progress, as mongod's `currentOp` describes one.
    pub fn list(&self) -> Vec<Document> {
        self.list_with(&Listing::default())
    }

    /// The operations `which` asks for, then (if asked) the idle connections.
    pub fn list_with(&self, which: &Listing) -> Vec<Document> {
        let running = self.running.lock();
        let mut out: Vec<Document> = running
            .iter()
            .filter(|(_, op)| which.only_users.as_ref().is_none_or(|u| *u == op.users))
            .map(|(opid, op)| {
                let micros = op.started.elapsed().as_micros() as i64;
                doc! {
                    "type": "op",
                    "opid": *opid,
                    "active": true,
                    "op": op.op.op_name(),
                    "ns": op.ns.clone(),
                    "command": op.command.clone(),
                    "secs_running": micros / 1_000_000,
                    "microsecs_running": micros,
                    "client": op.client.clone(),
                    "connectionId": op.connection,
                    "desc": format!("conn{}", op.connection),
                    "killPending": op.interrupt.is_killed(),
                    "effectiveUsers": users_doc(&op.users),
                }
            })
            .collect();
        if which.idle_connections {
            let busy: std::collections::HashSet<i32> =
                running.values().map(|op| op.connection).collect();
            for (id, peer) in self.connections.lock().iter() {
                if !busy.contains(id) {
                    out.push(doc! {
                        "type": "op",
                        "active": false,
                        "client": peer.clone(),
                        "connectionId": *id,
                        "desc": format!("conn{id}"),
                    });
                }
            }
        }
        out
    }
}

fn users_doc(users: &[(String, String)]) -> Vec<Bson> {
    users
        .iter()
        .map(|(u, d)| Bson::Document(doc! {"user": u.clone(), "db": d.clone()}))
        .collect()
}

/// The namespace a command works on: `db.coll` for the collection it names (a getMore names
/// it in `collection`), else `db.$cmd`.
pub(crate) fn namespace(name: &str, db: &str, cmd: &Document) -> String {
    match (cmd.get(name), cmd.get("collection")) {
        (Some(Bson::String(c)), _) | (_, Some(Bson::String(c))) if !c.is_empty() => {
            format!("{db}.{c}")
        }
        _ => format!("{db}.$cmd"),
    }
}

/// Array elements of a command that its `currentOp` listing keeps: listing an `insert` of
/// 100 000 documents must not copy them on every command's way in.
const LISTED_ELEMENTS: usize = 8;

/// The command as `currentOp` shows it: every field, with an array cut to its first
/// [`LISTED_ELEMENTS`] and `$truncated: true` added when one was (mongod truncates large
/// commands in currentOp too).
pub(crate) fn summary(cmd: &Document) -> Document {
    let mut out = Document::new();
    let mut truncated = false;
    for (k, v) in cmd {
        let v = match v {
            Bson::Array(a) if a.len() > LISTED_ELEMENTS => {
                truncated = true;
                Bson::Array(a[..LISTED_ELEMENTS].to_vec())
            }
            other => other.clone(),
        };
        out.insert(k.clone(), v);
    }
    if truncated {
        out.insert("$truncated", true);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_operation_is_killed_through_its_interrupt_and_unlisted_at_the_end() {
        let ops = Ops::default();
        let conn = ConnInfo::in_process(7);
        let cmd = doc! {"find": "c", "filter": {}};
        {
            let running = ops.begin(
                "find",
                OpKind::Query,
                "d",
                &cmd,
                &conn,
                Interrupt::new(None),
            );
            let listed = ops.list();
            assert_eq!(listed.len(), 1);
            let op = &listed[0];
            assert_eq!(op.get_str("ns"), Ok("d.c"));
            assert_eq!(op.get_str("op"), Ok("query"));
            assert_eq!(op.get_i32("connectionId"), Ok(7));
            assert!(current().is_some());
            assert!(current().unwrap().check().is_ok());
            assert!(ops.kill(running.opid));
            let e = current().unwrap().check().unwrap_err();
            assert_eq!(e.code, 11601);
            assert_eq!(ops.list()[0].get_bool("killPending"), Ok(true));
        }
        assert!(ops.list().is_empty());
        assert!(current().is_none());
        // A large command is listed cut short.
        let docs: Vec<Bson> = (0..100).map(|i| Bson::Document(doc! {"i": i})).collect();
        let insert = doc! {"insert": "c", "documents": docs};
        let running = ops.begin(
            "insert",
            OpKind::Insert,
            "d",
            &insert,
            &conn,
            Interrupt::new(None),
        );
        let listed = ops.list()[0].get_document("command").unwrap().clone();
        assert_eq!(
            listed.get_array("documents").unwrap().len(),
            LISTED_ELEMENTS
        );
        assert_eq!(listed.get_bool("$truncated"), Ok(true));
        drop(running);
        // A command run inside another leaves the outer one current when it ends.
        let outer = ops.begin(
            "aggregate",
            OpKind::Command,
            "d",
            &cmd,
            &conn,
            Interrupt::new(None),
        );
        {
            let _inner = ops.begin(
                "find",
                OpKind::Query,
                "d",
                &cmd,
                &conn,
                Interrupt::new(None),
            );
            assert_eq!(ops.list().len(), 2);
        }
        assert!(ops.kill(outer.opid));
        assert_eq!(current().unwrap().check().unwrap_err().code, 11601);
        drop(outer);
        assert!(current().is_none());
        assert!(!ops.kill(1));
    }
}
