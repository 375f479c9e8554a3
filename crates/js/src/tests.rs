use super::*;
use bson::{doc, Bson};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn never() -> Stop {
    Arc::new(|| false)
}

fn call_fn(src: &str, args: &[Bson]) -> Result<Bson, JsError> {
    let call = Call {
        args,
        ..Call::default()
    };
    run(
        &Func::new(src, Kind::Function),
        &call,
        Limits::default(),
        never(),
    )
    .map(|o| o.value)
}

/// Every BSON type mongod's JavaScript shows goes in as its shell type and comes back as the
/// same BSON value (numbers come back as doubles, as mongod writes JavaScript numbers).
#[test]
fn every_bson_type_round_trips_through_javascript() {
    let oid = bson::oid::ObjectId::parse_str("64b7f0c2a1b2c3d4e5f60718").unwrap();
    let values = vec![
        Bson::Double(1.5),
        Bson::String("héllo".into()),
        Bson::Document(doc! {"a": 1.0, "b": {"c": [1.0, "x"]}}),
        Bson::Array(vec![Bson::Double(1.0), Bson::Null, Bson::Boolean(true)]),
        Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: (0u8..16).collect(),
        }),
        Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::UserDefined(0x80),
            bytes: vec![],
        }),
        Bson::Undefined,
        Bson::ObjectId(oid),
        Bson::Boolean(false),
        Bson::DateTime(bson::DateTime::from_millis(1_700_000_000_123)),
        Bson::DateTime(bson::DateTime::from_millis(-86_400_000)),
        Bson::Null,
        Bson::RegularExpression(bson::Regex {
            pattern: "^a/b$".into(),
            options: "im".into(),
        }),
        Bson::RegularExpression(bson::Regex {
            pattern: "a # comment".into(),
            options: "x".into(),
        }),
        Bson::RegularExpression(bson::Regex {
            pattern: "(?<=a)b".into(),
            options: "".into(),
        }),
        Bson::JavaScriptCode("function() { return 1; }".into()),
        Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
            code: "x + 1".into(),
            scope: doc! {"x": 2.0},
        }),
        Bson::Timestamp(bson::Timestamp {
            time: 4_000_000_000,
            increment: 7,
        }),
        Bson::Int64(i64::MAX),
        Bson::Int64(-5),
        Bson::Decimal128("1.0000000000000000000000000000001".parse().unwrap()),
        Bson::MinKey,
        Bson::MaxKey,
        Bson::DbPointer(
            bson::Document::from_reader(&mut &dbpointer_doc()[..])
                .unwrap()
                .get("p")
                .unwrap()
                .clone()
                .as_db_pointer()
                .unwrap()
                .clone(),
        ),
    ];
    for v in values {
        let back = call_fn("function(v) { return v; }", std::slice::from_ref(&v)).unwrap();
        assert_eq!(back, v, "round trip of {v:?}");
        // Inside a document too.
        let d = Bson::Document(doc! {"v": v.clone()});
        let back = call_fn("function(d) { return {v: d.v}; }", std::slice::from_ref(&d)).unwrap();
        assert_eq!(back, d, "round trip of {v:?} in a document");
    }
    // Int32 and Symbol are numbers and strings to JavaScript: they come back as mongod writes
    // those (double, string).
    assert_eq!(
        call_fn("function(v) { return v; }", &[Bson::Int32(7)]).unwrap(),
        Bson::Double(7.0)
    );
    assert_eq!(
        call_fn("function(v) { return v; }", &[Bson::Symbol("s".into())]).unwrap(),
        Bson::String("s".into())
    );
}

/// `{p: DBPointer("db.c", 64b7…)}` encoded by hand (the bson crate builds none).
fn dbpointer_doc() -> Vec<u8> {
    let mut elem = vec![0x0C, b'p', 0, 5, 0, 0, 0];
    elem.extend_from_slice(b"db.c\0");
    elem.extend_from_slice(&[
        0x64, 0xb7, 0xf0, 0xc2, 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18,
    ]);
    let mut d = ((elem.len() + 5) as u32).to_le_bytes().to_vec();
    d.extend_from_slice(&elem);
    d.push(0);
    d
}

/// The shell types behave as mongod's do to the code that uses them.
#[test]
fn shell_types_act_as_mongods() {
    let oid = bson::oid::ObjectId::parse_str("64b7f0c2a1b2c3d4e5f60718").unwrap();
    let got = call_fn(
        "function(o, l, d, b, t, dt) { return [o.str, o.getTimestamp().getTime(), l + 1, \
         d.toString(), b.length(), b.subtype(), t.t, t.i, dt.getUTCFullYear(), \
         o instanceof ObjectId, NumberLong(5), NumberInt(3), new Date(0)]; }",
        &[
            Bson::ObjectId(oid),
            Bson::Int64(41),
            Bson::Decimal128("2.5".parse().unwrap()),
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![1, 2, 3, 4],
            }),
            Bson::Timestamp(bson::Timestamp {
                time: 9,
                increment: 2,
            }),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_000_000)),
        ],
    )
    .unwrap();
    let want = bson::bson!([
        "64b7f0c2a1b2c3d4e5f60718",
        (0x64b7f0c2_u32 as f64) * 1000.0,
        42.0,
        "NumberDecimal(\"2.5\")",
        4.0,
        0.0,
        9.0,
        2.0,
        2023.0,
        true,
        Bson::Int64(5),
        Bson::Int32(3),
        Bson::DateTime(bson::DateTime::from_millis(0)),
    ]);
    assert_eq!(got, want);
}

#[test]
fn where_sources_are_functions_expressions_or_statements() {
    let doc = doc! {"x": 2};
    let run_where = |src: &str| {
        let call = Call {
            this: Some(&doc),
            ..Call::default()
        };
        run(
            &Func::new(src, Kind::Where),
            &call,
            Limits::default(),
            never(),
        )
        .map(|o| o.value)
    };
    assert_eq!(run_where("this.x < 3").unwrap(), Bson::Boolean(true));
    assert_eq!(
        run_where("return this.x > 3").unwrap(),
        Bson::Boolean(false)
    );
    assert_eq!(
        run_where("function() { return obj.x == 2; }").unwrap(),
        Bson::Boolean(true)
    );
    assert!(matches!(run_where("this.x <"), Err(JsError::Compile(_))));
    // A $function body must be a function.
    assert!(matches!(call_fn("1 + 1", &[]), Err(JsError::Compile(_))));
    assert!(Func::new("function(", Kind::Function).check().is_err());
    assert!(Func::new("function(a) { return a; }", Kind::Function)
        .check()
        .is_ok());
}

#[test]
fn a_thrown_exception_names_itself() {
    let e = call_fn("function() { return a(); }", &[]).unwrap_err();
    let JsError::Exception(m) = e else {
        panic!("{e:?}")
    };
    assert!(m.starts_with("ReferenceError: "), "{m}");
    let e = call_fn("function() { throw 'plain'; }", &[]).unwrap_err();
    assert_eq!(e, JsError::Exception("uncaught exception: plain".into()));
}

/// An infinite loop stops when its stop flag rises, from another thread, as `killOp` and a
/// spent `maxTimeMS` raise it; the same thread runs JavaScript normally afterwards.
#[test]
fn an_infinite_loop_is_interrupted() {
    let flag = Arc::new(AtomicBool::new(false));
    let raiser = flag.clone();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        raiser.store(true, Ordering::Relaxed);
    });
    let stop: Stop = Arc::new(move || flag.load(Ordering::Relaxed));
    let started = Instant::now();
    let f = Func::new(
        "function() { for (;;) { try { while (true) {} } catch (e) {} } }",
        Kind::Function,
    );
    let got = run(&f, &Call::default(), Limits::default(), stop);
    killer.join().unwrap();
    assert_eq!(got.unwrap_err(), JsError::Interrupted);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        call_fn("function() { return 1; }", &[]).unwrap(),
        Bson::Double(1.0)
    );
}

/// The shell's `sleep` asks the stop flag too (pymongo's tests hold a query with it).
#[test]
fn sleep_is_interrupted() {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(30);
    let stop: Stop = Arc::new(move || Instant::now() >= deadline);
    let f = Func::new("function() { sleep(60000); return true; }", Kind::Function);
    let got = run(&f, &Call::default(), Limits::default(), stop);
    assert_eq!(got.unwrap_err(), JsError::Interrupted);
    assert!(started.elapsed() < Duration::from_secs(10));
    // Without a stop it sleeps the time asked.
    let started = Instant::now();
    assert_eq!(
        call_fn("function() { sleep(20); return 2; }", &[]).unwrap(),
        Bson::Double(2.0)
    );
    assert!(started.elapsed() >= Duration::from_millis(20));
}

/// A function that allocates without end is refused at the heap limit, and the runtime works
/// afterwards.
#[test]
fn a_heap_blowup_is_refused() {
    let limits = Limits {
        heap_bytes: 16 << 20,
        ..Limits::default()
    };
    let f = Func::new(
        "function() { var a = []; for (;;) { a.push('x'.repeat(1000) + a.length); } }",
        Kind::Function,
    );
    let got = run(&f, &Call::default(), limits, never());
    assert_eq!(got.unwrap_err(), JsError::OutOfMemory);
    assert_eq!(
        call_fn("function() { return 3; }", &[]).unwrap(),
        Bson::Double(3.0)
    );
}

#[test]
fn deep_recursion_is_an_exception_not_a_crash() {
    let e = call_fn(
        "function f(n) { return f(n + 1) + 1; }",
        &[Bson::Double(0.0)],
    )
    .unwrap_err();
    assert!(
        matches!(&e, JsError::Exception(m) if m.contains("stack")),
        "{e:?}"
    );
    let e = call_fn("function() { var a = {}; a.self = a; return a; }", &[]).unwrap_err();
    assert!(matches!(e, JsError::Conversion(_)), "{e:?}");
}

#[test]
fn emit_collects_pairs_and_scope_sets_globals() {
    let doc = doc! {"tags": ["a", "b"]};
    let scope = doc! {"weight": 2};
    let call = Call {
        this: Some(&doc),
        scope: Some(&scope),
        emit: true,
        ..Call::default()
    };
    let f = Func::new(
        "function() { this.tags.forEach(function(t) { emit(t, weight); }); }",
        Kind::Function,
    );
    let out = run(&f, &call, Limits::default(), never()).unwrap();
    assert_eq!(
        out.emitted,
        vec![
            (Bson::String("a".into()), Bson::Double(2.0)),
            (Bson::String("b".into()), Bson::Double(2.0)),
        ]
    );
    // Outside a map, emit is refused.
    let e = call_fn("function() { emit(1, 2); }", &[]).unwrap_err();
    assert!(
        matches!(&e, JsError::Exception(m) if m.contains("emit")),
        "{e:?}"
    );
    assert_eq!(
        call_fn(
            "function(v) { return Array.sum(v); }",
            &[bson::bson!([1, 2, 3.5])]
        )
        .unwrap(),
        Bson::Double(6.5)
    );
}
