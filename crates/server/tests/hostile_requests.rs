//! Requests built to exhaust the stack or the CPU: each gets a reply (an answer or a clean
//! error) on a thread with the server's own stack size, and the server goes on serving.
//!
//! The first seven are the crashers found against wave 1 (each aborted the whole process with
//! a stack overflow); the rest are the deepest requests the limits still allow.

use bson::{doc, Bson, Document};
use server::conn::handle_message;
use server::state::ServerState;
use server::wire::{self, Header};
use std::sync::Arc;

fn state() -> Arc<ServerState> {
    let db = docdb::DocDb::open(docdb::DocDbConfig::in_memory()).unwrap();
    Arc::new(ServerState::new(
        db,
        &server::config::ServerConfig::default(),
    ))
}

/// Runs one command through the wire decoder, the command and the reply encoder.
fn run(st: &Arc<ServerState>, cmd: Document) -> Document {
    let msg = wire::msg_request(&cmd, &[], 1, 0);
    let h = Header::parse(msg[..16].try_into().unwrap());
    let info = st.new_connection("127.0.0.1:1".parse().unwrap()).unwrap();
    let out = handle_message(st, &info, &h, &msg[16..]);
    st.end_connection(info.id);
    let reply = out.reply.expect("a reply");
    let Ok(wire::Request::Msg { body, .. }) = wire::parse_request(
        &Header::parse(reply[..16].try_into().unwrap()),
        &reply[16..],
    ) else {
        panic!("reply did not parse")
    };
    body
}

fn path(parts: usize) -> String {
    vec!["a"; parts].join(".")
}

fn code(reply: &Document) -> Option<i32> {
    if reply.get_f64("ok") == Ok(1.0) {
        reply
            .get_array("writeErrors")
            .ok()
            .and_then(|e| e[0].as_document()?.get_i32("code").ok())
    } else {
        reply.get_i32("code").ok()
    }
}

/// `{k: {k: ... inner}}` with `levels` documents around `inner`.
fn wrap(levels: usize, key: &str, inner: Bson) -> Bson {
    let mut v = inner;
    for _ in 0..levels {
        v = Bson::Document(doc! {key: v});
    }
    v
}

fn on_server_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(server::THREAD_STACK_BYTES)
        .spawn(f)
        .unwrap()
        .join()
        .expect("the request panicked or overflowed");
}

#[test]
fn the_wave_one_crashers_get_clean_errors() {
    on_server_stack(|| {
        let st = state();
        let long = path(5000);
        run(
            &st,
            doc! {"insert": "c", "documents": [{"_id": 1, "a": []}], "$db": "t"},
        );
        for op in ["$set", "$unset", "$push"] {
            let r = run(
                &st,
                doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {op: {long.clone(): 1}}}], "$db": "t"},
            );
            assert_eq!(code(&r), Some(15), "{op}: {r}");
        }
        let r = run(
            &st,
            doc! {"update": "c", "updates": [{"q": {long.clone(): 1}, "u": {"$set": {"x": 1}}, "upsert": true}], "$db": "t"},
        );
        assert_eq!(code(&r), Some(5729100), "upsert: {r}");
        let r = run(
            &st,
            doc! {"aggregate": "c", "pipeline": [{"$addFields": {long.clone(): 1}}], "cursor": {}, "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "$addFields: {r}");
        let r = run(
            &st,
            doc! {"find": "c", "projection": {path(50_000): 1}, "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "projection: {r}");
        // 1000 parts: refused, not answered with a document 1000 levels deep.
        let r = run(
            &st,
            doc! {"find": "c", "projection": {path(1000): 1}, "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "projection: {r}");
        assert_eq!(
            run(&st, doc! {"ping": 1, "$db": "admin"}).get_f64("ok"),
            Ok(1.0)
        );
    });
}

#[test]
fn deepest_legal_requests_fit_the_stack() {
    on_server_stack(|| {
        let st = state();
        // A stored document may be 180 levels deep; 181 is refused.
        let deep_doc = |levels: usize| match wrap(levels, "a", Bson::Int32(1)) {
            Bson::Document(d) => {
                let mut d = d;
                d.insert("_id", levels as i32);
                d
            }
            _ => unreachable!(),
        };
        let r = run(
            &st,
            doc! {"insert": "c", "documents": [deep_doc(180)], "$db": "t"},
        );
        assert_eq!(r.get_i32("n"), Ok(1), "{r}");
        let r = run(
            &st,
            doc! {"insert": "c", "documents": [deep_doc(181)], "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "{r}");
        // An update that would nest past 180 levels is refused; within them it applies.
        let r = run(
            &st,
            doc! {"update": "c", "updates": [{"q": {"_id": 180}, "u": {"$set": {format!("b.{}", path(199)): 1}}}], "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "{r}");
        let r = run(
            &st,
            doc! {"update": "c", "updates": [{"q": {"_id": 180}, "u": {"$set": {path(178): 2}}}], "$db": "t"},
        );
        assert_eq!(r.get_i32("nModified"), Ok(1), "{r}");
        // Queries, sorts, projections and distinct on the deepest paths.
        let r = run(
            &st,
            doc! {"find": "c", "filter": {path(179): 1}, "sort": {path(200): 1}, "projection": {path(200): 1}, "$db": "t"},
        );
        assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
        let r = run(&st, doc! {"distinct": "c", "key": path(200), "$db": "t"});
        assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
        // Filters nested as deep as the wire allows: $and, $elemMatch, $not.
        let mut and = doc! {"a": 1};
        for _ in 0..98 {
            and = doc! {"$and": [and]};
        }
        let mut elem = Bson::Int32(1);
        for _ in 0..98 {
            elem = Bson::Document(doc! {"$elemMatch": {"a": elem}});
        }
        let not = wrap(196, "$not", Bson::Document(doc! {"$gt": 1}));
        for filter in [and, doc! {"a": elem}, doc! {"a": not}] {
            let r = run(&st, doc! {"find": "c", "filter": filter, "$db": "t"});
            assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
            let batch = r
                .get_document("cursor")
                .unwrap()
                .get_array("firstBatch")
                .unwrap();
            assert!(batch.is_empty(), "{r}");
        }
        // Expressions nested as deep as the wire allows.
        let mut e = Bson::String("$a".into());
        for _ in 0..97 {
            e = Bson::Document(doc! {"$not": [e]});
        }
        let r = run(
            &st,
            doc! {"aggregate": "c", "pipeline": [{"$project": {"x": e.clone()}}], "cursor": {}, "$db": "t"},
        );
        assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
        let r = run(&st, doc! {"find": "c", "filter": {"$expr": e}, "$db": "t"});
        assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
        // A $reduce that nests its own value deeper each step is stopped at 200 levels.
        let r = run(
            &st,
            doc! {"aggregate": "c", "pipeline": [{"$project": {"x": {"$reduce": {"input": {"$range": [0, 100_000]}, "initialValue": {}, "in": {"a": "$$value"}}}}}], "cursor": {}, "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "{r}");
        // So is a pipeline that wraps the document once per stage.
        let stages: Vec<Bson> = (0..300)
            .map(|_| Bson::Document(doc! {"$replaceRoot": {"newRoot": {"a": "$$ROOT"}}}))
            .collect();
        let r = run(
            &st,
            doc! {"aggregate": "c", "pipeline": stages, "cursor": {}, "$db": "t"},
        );
        assert_eq!(code(&r), Some(15), "{r}");
        // A huge $range is refused before it allocates.
        let r = run(
            &st,
            doc! {"aggregate": "c", "pipeline": [{"$project": {"x": {"$range": [0, 2_000_000_000]}}}], "cursor": {}, "$db": "t"},
        );
        assert_eq!(code(&r), Some(146), "{r}");
        assert_eq!(
            run(&st, doc! {"ping": 1, "$db": "admin"}).get_f64("ok"),
            Ok(1.0)
        );
    });
}

#[test]
fn an_update_naming_many_fields_is_checked_in_one_sort() {
    let st = state();
    let mut set = Document::new();
    for i in 0..50_000 {
        set.insert(format!("f{i}"), i);
    }
    set.insert("f7.x", 1);
    let r = run(
        &st,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": set}, "upsert": true}], "$db": "t"},
    );
    assert_eq!(code(&r), Some(40), "{r}");
}
