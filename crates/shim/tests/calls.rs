//! Every interposed call, made by a small C program (`calls.c`) under the shim: results and
//! `errno` pass through unchanged (the program checks), and the trace holds exactly the
//! events the calls make. Also: hints reach the kernel, bad settings are refused, an existing
//! trace is never overwritten, and an unconfigured shim is inert.

mod common;

use placement::trace::TraceReader;
use placement::{Event, FileKind, PageKind, WriteCause, WriteEvent};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Setup {
    _tmp: tempfile::TempDir,
    db: PathBuf,
    trace: PathBuf,
    program: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/calls.c");
    let program = common::compile(&src, tmp.path(), &[]);
    Setup {
        trace: tmp.path().join("calls.trace"),
        db,
        program,
        _tmp: tmp,
    }
}

fn run(s: &Setup, vars: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(&s.program);
    cmd.arg(&s.db).env("LD_PRELOAD", common::shim());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn traced(s: &Setup, extra: &[(&str, &str)]) -> (Vec<Event>, String) {
    let (db, trace) = (s.db.to_str().unwrap(), s.trace.to_str().unwrap());
    let mut vars = vec![
        ("FLASHDOC_SHIM_DIR", db),
        ("FLASHDOC_SHIM_TRACE", trace),
        ("FLASHDOC_SHIM_KINDS", "collection=a.wt,m.wt"),
    ];
    vars.extend_from_slice(extra);
    let out = run(s, &vars);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "calls failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    let events = TraceReader::open(&s.trace)
        .unwrap()
        .collect::<std::io::Result<_>>()
        .unwrap();
    (events, stderr)
}

fn write(file: u32, kind: FileKind, offset: u64, len: u32, stream: u8) -> Event {
    Event::Write(WriteEvent {
        time_ns: 0,
        file,
        file_kind: kind,
        table: 0,
        page_kind: PageKind::Leaf,
        offset,
        len,
        id_index: false,
        stream,
        page_id: 0,
        cause: WriteCause::Other,
    })
}

/// The events with times zeroed (checked separately: they never go backwards).
fn untimed(events: &[Event]) -> Vec<Event> {
    let mut last = 0;
    events
        .iter()
        .map(|e| {
            assert!(e.time_ns() >= last, "time went backwards at {e:?}");
            last = e.time_ns();
            let mut e = e.clone();
            e.set_time_ns(0);
            e
        })
        .collect()
}

fn expected_single_threaded(coll_stream: u8, meta_stream: u8) -> Vec<Event> {
    let c = FileKind::Collection;
    let m = FileKind::Metadata;
    let name = |n: &str| n.to_string();
    let mut v = vec![Event::FileCreate {
        time_ns: 0,
        file: 0,
        kind: c,
        name: name("a.wt"),
    }];
    for (off, len) in [
        (0, 4096),
        (4096, 300),
        (0, 300),
        (10000, 50),
        (10050, 300),
        (20000, 10),
        (30000, 10),
        (40000, 10),
        (41000, 10),
        (50000, 1),
    ] {
        v.push(write(0, c, off, len, coll_stream));
    }
    v.extend([
        Event::FileTruncate {
            time_ns: 0,
            file: 0,
            len: 45000,
        },
        Event::Free {
            time_ns: 0,
            file: 0,
            offset: 0,
            len: 4096,
        },
        Event::CheckpointBegin { time_ns: 0, id: 1 },
        Event::FileCreate {
            time_ns: 0,
            file: 1,
            kind: m,
            name: name("WiredTiger.turtle.set"),
        },
        write(1, m, 0, 6, meta_stream),
        Event::FileRename {
            time_ns: 0,
            file: 1,
            name: name("WiredTiger.turtle"),
        },
        Event::CheckpointCommit { time_ns: 0, id: 1 },
        Event::FileCreate {
            time_ns: 0,
            file: 2,
            kind: m,
            name: name("b.set"),
        },
        write(2, m, 0, 1, meta_stream),
        Event::FileRemove {
            time_ns: 0,
            file: 0,
        },
        Event::FileRename {
            time_ns: 0,
            file: 2,
            name: name("a.wt"),
        },
        Event::FileRemove {
            time_ns: 0,
            file: 2,
        },
        Event::FileCreate {
            time_ns: 0,
            file: 3,
            kind: c,
            name: name("m.wt"),
        },
    ]);
    v
}

/// Checks the threaded part (2000 writes of 512 bytes by four threads, any order); returns
/// the rest.
fn split_threaded(events: Vec<Event>, stream: u8) -> Vec<Event> {
    let (threaded, rest): (Vec<Event>, Vec<Event>) = events
        .into_iter()
        .partition(|e| matches!(e, Event::Write(w) if w.file == 3));
    let mut offsets: Vec<u64> = threaded
        .iter()
        .map(|e| match e {
            Event::Write(w) => {
                assert_eq!((w.len, w.stream), (512, stream));
                w.offset
            }
            _ => unreachable!(),
        })
        .collect();
    offsets.sort();
    assert_eq!(offsets, (0..2000).map(|i| i * 512).collect::<Vec<u64>>());
    rest
}

#[test]
fn every_call_passes_through_and_is_traced_exactly() {
    let s = setup();
    let (events, stderr) = traced(&s, &[]);
    let rest = split_threaded(untimed(&events), 0);
    assert_eq!(rest, expected_single_threaded(0, 0));
    assert!(
        stderr.contains("2012 writes (") && stderr.contains("4 files, 1 checkpoints"),
        "{stderr}"
    );
}

#[test]
fn an_online_policy_sets_hints_the_kernel_keeps() {
    let s = setup();
    let (events, stderr) = traced(
        &s,
        &[
            ("FLASHDOC_SHIM_POLICY", "file"),
            ("FLASHDOC_SHIM_STREAMS", "4"),
        ],
    );
    assert!(!stderr.contains("refused"), "{stderr}");
    // file policy, 4 streams: metadata 0, journal 1, collections 2, indexes 3.
    let rest = split_threaded(untimed(&events), 2);
    assert_eq!(rest, expected_single_threaded(2, 0));
    // The hint is on the inode: read it back (F_GET_RW_HINT = 1035).
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(s.db.join("m.wt")).unwrap();
    let mut hint: u64 = 99;
    // SAFETY: F_GET_RW_HINT writes one u64.
    let rc = unsafe { libc::fcntl(f.as_raw_fd(), 1035, &mut hint as *mut u64) };
    assert_eq!((rc, hint), (0, 2));
}

#[test]
fn bad_settings_stop_the_program_before_it_runs() {
    let s = setup();
    let db = s.db.to_str().unwrap();
    for (vars, says) in [
        (
            vec![
                ("FLASHDOC_SHIM_DIR", db),
                ("FLASHDOC_SHIM_POLICY", "lifetime"),
            ],
            "page ids",
        ),
        (vec![("FLASHDOC_SHIM_TRACE", "/tmp/x")], "FLASHDOC_SHIM_DIR"),
        (
            vec![
                ("FLASHDOC_SHIM_DIR", "/no/such/dir"),
                ("FLASHDOC_SHIM_POLICY", "file"),
            ],
            "no such directory",
        ),
        (
            vec![("FLASHDOC_SHIM_DIR", db), ("FLASHDOC_SHIM_POLCY", "file")],
            "unknown variable",
        ),
    ] {
        let out = run(&s, &vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{vars:?}: {stderr}");
        assert!(stderr.contains(says), "{vars:?}: {stderr}");
        assert!(out.stdout.is_empty(), "the program must not have run");
    }
}

#[test]
fn an_existing_trace_is_kept_and_an_unconfigured_shim_is_inert() {
    let s = setup();
    std::fs::write(&s.trace, b"precious").unwrap();
    let (db, trace) = (s.db.to_str().unwrap(), s.trace.to_str().unwrap());
    let out = run(
        &s,
        &[("FLASHDOC_SHIM_DIR", db), ("FLASHDOC_SHIM_TRACE", trace)],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists"));
    assert_eq!(std::fs::read(&s.trace).unwrap(), b"precious");
    for f in std::fs::read_dir(&s.db).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let out = run(&s, &[]);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert_eq!(out.stdout, b"ok\n");
    assert!(Path::new(&s.db).join("m.wt").exists());
}
