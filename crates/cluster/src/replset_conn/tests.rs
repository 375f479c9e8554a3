//! Primary discovery against scripted members: a fake connector whose hosts answer `hello`
//! and commands as each test sets their role.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Role {
    Primary,
    Secondary,
    Down,
    /// Runs the command, then is interrupted by a step-down (11602) and becomes Secondary.
    InterruptedAfterRunning,
}

struct Member {
    host: String,
    set: String,
    role: Mutex<Role>,
    /// Commands other than hello that this member ran.
    ran: AtomicUsize,
    fake: Arc<FakeSet>,
}

#[derive(Default)]
struct FakeSet {
    members: Mutex<HashMap<String, Arc<Member>>>,
}

impl FakeSet {
    fn add(self: &Arc<Self>, host: &str, set: &str, role: Role) -> Arc<Member> {
        let m = Arc::new(Member {
            host: host.into(),
            set: set.into(),
            role: Mutex::new(role),
            ran: AtomicUsize::new(0),
            fake: self.clone(),
        });
        self.members.lock().insert(host.into(), m.clone());
        m
    }
    fn primary(&self) -> Option<String> {
        self.members
            .lock()
            .values()
            .find(|m| *m.role.lock() == Role::Primary)
            .map(|m| m.host.clone())
    }
    fn hosts(&self) -> Vec<Bson> {
        let mut h: Vec<String> = self.members.lock().keys().cloned().collect();
        h.sort();
        h.into_iter().map(Bson::from).collect()
    }
}

impl ShardConn for Member {
    fn call(&self, cmd: &Document) -> DocResult<Document> {
        let role = *self.role.lock();
        if role == Role::Down {
            return Err(host_unreachable(&self.host, "connection refused"));
        }
        if cmd.contains_key("hello") {
            let mut d = doc! {"ok": 1, "setName": self.set.clone(), "isWritablePrimary": matches!(role, Role::Primary | Role::InterruptedAfterRunning), "hosts": self.fake.hosts()};
            if let Some(p) = self.fake.primary() {
                d.insert("primary", p);
            }
            return Ok(d);
        }
        match role {
            Role::Primary => {
                self.ran.fetch_add(1, Ordering::SeqCst);
                Ok(doc! {"ok": 1, "host": self.host.clone()})
            }
            Role::InterruptedAfterRunning => {
                self.ran.fetch_add(1, Ordering::SeqCst);
                *self.role.lock() = Role::Secondary;
                Ok(
                    doc! {"ok": 0, "code": 11602, "codeName": "InterruptedDueToReplStateChange", "errmsg": "stepped down"},
                )
            }
            _ => Ok(
                doc! {"ok": 0, "code": 10107, "codeName": "NotWritablePrimary", "errmsg": "not primary"},
            ),
        }
    }
}

struct FakeConnector(Arc<FakeSet>);

impl Connector for FakeConnector {
    fn connect(&self, host: &str) -> Arc<dyn ShardConn> {
        match self.0.members.lock().get(host) {
            Some(m) => m.clone(),
            None => Arc::new(Gone(host.to_string())),
        }
    }
}

struct Gone(String);

impl ShardConn for Gone {
    fn call(&self, _cmd: &Document) -> DocResult<Document> {
        Err(host_unreachable(&self.0, "no such host"))
    }
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        total: Duration::from_millis(300),
        first_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(10),
    }
}

fn setup(roles: &[Role]) -> (Arc<FakeSet>, Vec<Arc<Member>>, SetAwareConnector) {
    let fake = Arc::new(FakeSet::default());
    let members = roles
        .iter()
        .enumerate()
        .map(|(i, r)| fake.add(&format!("h{i}:1"), "rs0", *r))
        .collect();
    let conn = SetAwareConnector::new(Arc::new(FakeConnector(fake.clone())), quick());
    (fake, members, conn)
}

fn insert() -> Document {
    doc! {"insert": "c", "documents": [{"_id": 1}], "$db": "d"}
}

fn retryable_insert() -> Document {
    let mut c = insert();
    c.insert("lsid", doc! {"id": 1});
    c.insert("txnNumber", 1i64);
    c
}

#[test]
fn set_names_parse_and_plain_hosts_do_not() {
    assert_eq!(
        parse_set_host("rs0/a:1,b:2"),
        Some(("rs0", vec!["a:1", "b:2"]))
    );
    assert_eq!(parse_set_host("a:1"), None);
    assert_eq!(parse_set_host("/a:1"), None);
    assert_eq!(parse_set_host("rs0/"), None);
}

#[test]
fn commands_go_to_the_primary_named_by_a_secondary() {
    let (_, m, conn) = setup(&[Role::Secondary, Role::Secondary, Role::Primary]);
    // Only the first seed is given: the rest is learned from its hello.
    let c = conn.connect("rs0/h0:1");
    let reply = c.call(&insert()).unwrap();
    assert_eq!(reply.get_str("host"), Ok("h2:1"));
    assert_eq!(m[2].ran.load(Ordering::SeqCst), 1);
    assert_eq!(m[0].ran.load(Ordering::SeqCst), 0);
}

#[test]
fn a_former_primary_refusing_sends_the_command_to_the_new_one() {
    let (_, m, conn) = setup(&[Role::Primary, Role::Secondary, Role::Secondary]);
    let c = conn.connect("rs0/h0:1,h1:1,h2:1");
    assert_eq!(c.call(&insert()).unwrap().get_str("host"), Ok("h0:1"));
    // Fail over: h0 steps down, h1 is elected. A plain insert refused with 10107 did not run
    // anywhere, so it is sent to the new primary even though it is not retryable.
    *m[0].role.lock() = Role::Secondary;
    *m[1].role.lock() = Role::Primary;
    assert_eq!(c.call(&insert()).unwrap().get_str("host"), Ok("h1:1"));
    assert_eq!(m[0].ran.load(Ordering::SeqCst), 1);
    assert_eq!(m[1].ran.load(Ordering::SeqCst), 1);
}

#[test]
fn a_lost_primary_is_retried_only_for_commands_safe_to_resend() {
    let (_, m, conn) = setup(&[Role::Primary, Role::Secondary, Role::Secondary]);
    let c = conn.connect("rs0/h0:1,h1:1,h2:1");
    c.call(&insert()).unwrap();
    *m[0].role.lock() = Role::Down;
    *m[2].role.lock() = Role::Primary;
    // Unknown outcome on a non-retryable write: the error is returned, not a second run.
    let e = c.call(&insert()).unwrap_err();
    assert_eq!(e.code, 6, "{e}");
    // The next command finds the new primary.
    assert_eq!(c.call(&insert()).unwrap().get_str("host"), Ok("h2:1"));
    // A retryable write whose primary dies is resent to the new primary.
    *m[2].role.lock() = Role::Down;
    *m[1].role.lock() = Role::Primary;
    assert_eq!(
        c.call(&retryable_insert()).unwrap().get_str("host"),
        Ok("h1:1")
    );
}

#[test]
fn an_interrupted_command_is_resent_only_when_safe() {
    let (_, m, conn) = setup(&[Role::InterruptedAfterRunning, Role::Secondary]);
    let c = conn.connect("rs0/h0:1,h1:1");
    // h0 runs the insert, then steps down; with nobody primary the plain insert's error is
    // the caller's (it may have run).
    let reply = c.call(&insert()).unwrap();
    assert_eq!(reply.get_i32("code"), Ok(11602));
    assert_eq!(m[0].ran.load(Ordering::SeqCst), 1);
    *m[0].role.lock() = Role::InterruptedAfterRunning;
    *m[1].role.lock() = Role::Primary;
    // A read is resent to the new primary.
    let find = doc! {"find": "c", "$db": "d"};
    assert_eq!(c.call(&find).unwrap().get_str("host"), Ok("h1:1"));
}

#[test]
fn no_primary_fails_after_the_bounded_wait() {
    let (_, _, conn) = setup(&[Role::Secondary, Role::Secondary]);
    let c = conn.connect("rs0/h0:1,h1:1");
    let e = c.call(&insert()).unwrap_err();
    assert_eq!(e.code, 10107, "{e}");
}

#[test]
fn a_member_of_another_set_is_refused() {
    let fake = Arc::new(FakeSet::default());
    fake.add("h0:1", "other", Role::Primary);
    let conn = SetAwareConnector::new(Arc::new(FakeConnector(fake)), quick());
    let e = conn.connect("rs0/h0:1").call(&insert()).unwrap_err();
    assert!(e.message.contains("not a member of replica set rs0"), "{e}");
}

#[test]
fn plain_hosts_reach_the_inner_connector() {
    let (_, _, conn) = setup(&[Role::Primary]);
    assert_eq!(
        conn.connect("h0:1")
            .call(&insert())
            .unwrap()
            .get_str("host"),
        Ok("h0:1")
    );
    assert!(!may_resend(
        &doc! {"aggregate": "c", "pipeline": [{"$out": "x"}]}
    ));
    assert!(may_resend(
        &doc! {"aggregate": "c", "pipeline": [{"$match": {}}]}
    ));
}
