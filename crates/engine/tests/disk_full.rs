//! Disk full: a writer child runs under a file-size limit (`RLIMIT_FSIZE`, with `SIGXFSZ`
//! ignored), so writes past the limit fail with EFBIG, as on a full disk. The child must get a
//! clear error (`is_disk_full()`), print it and exit — not panic, not hang. Then the space
//! "returns" (the parent has no limit): the database opens with every acknowledged batch,
//! verifies, and takes writes again.

#[path = "../src/bin/torture/workload.rs"]
mod workload;

use engine::{DiskEngine, JournalCompressor, KvEngine, WriteOptions};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use workload::{ChildOptions, Model, Shape};

const EXE: &str = env!("CARGO_BIN_EXE_flashdoc-engine-torture");

/// A liveness bound, not a performance assertion: the child normally fails within a second or
/// two; only a hang gets anywhere near this.
const HANG: Duration = Duration::from_secs(120);

struct Outcome {
    stdout: String,
    stderr: String,
    acked: Option<u64>,
}

/// Runs a `write` child with every file limited to `limit` bytes until it exits.
fn run_limited(db: &Path, seed: u64, limit: u64, opts: &ChildOptions) -> Outcome {
    let out_path = db.with_extension("stdout");
    let err_path = db.with_extension("stderr");
    let mut cmd = workload::writer_command(Path::new(EXE), db, seed, 0, opts);
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs in the child before
    // exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit as libc::rlim_t,
                rlim_max: limit as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > HANG {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "the writer hung after the disk filled up\nstdout:\n{}\nstderr:\n{}",
                workload::tail(&std::fs::read_to_string(&out_path).unwrap(), 5),
                workload::tail(&std::fs::read_to_string(&err_path).unwrap(), 20)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    let ctx = format!(
        "status {status}\nstdout:\n{}\nstderr:\n{}",
        workload::tail(&stdout, 5),
        workload::tail(&stderr, 20)
    );
    assert!(!stderr.contains("panicked"), "the writer panicked:\n{ctx}");
    assert_eq!(
        status.code(),
        Some(2),
        "the writer must exit with status 2 after an error:\n{ctx}"
    );
    let acks = workload::parse_acks(&stdout, 0).unwrap();
    assert!(
        acks.len() > 10,
        "too few batches before the limit; raise it:\n{ctx}"
    );
    let err = stdout
        .lines()
        .find(|l| l.starts_with("ERR "))
        .unwrap_or_else(|| panic!("no ERR line:\n{ctx}"));
    assert!(
        err.starts_with("ERR disk_full=true "),
        "the error must be a disk-full error:\n{ctx}"
    );
    // The writer then closes; that must not hang or panic either (it may fail: no space).
    assert!(stdout.lines().any(|l| l.starts_with("CLOSE ")), "{ctx}");
    Outcome {
        acked: acks.last().copied(),
        stdout,
        stderr,
    }
}

/// Space is back: every acknowledged batch is there (the failed one in full or not at all), the
/// database verifies, and it takes, keeps and recovers new writes.
fn check_after_space_returns(db: &Path, seed: u64, opts: &ChildOptions, out: &Outcome) {
    let ctx = format!(
        "seed {seed}\nchild stdout:\n{}\nchild stderr:\n{}",
        workload::tail(&out.stdout, 4),
        workload::tail(&out.stderr, 10)
    );
    let mut model = Model::new(seed, opts.shape);
    model.advance_to(out.acked.expect("acks"));
    let (eng, ids) = workload::open_with_tables(opts.engine_config(db))
        .unwrap_or_else(|e| panic!("reopen: {e}\n{ctx}"));
    eng.verify()
        .unwrap_or_else(|e| panic!("verify: {e}\n{ctx}"));
    let got = workload::read_state(&eng).unwrap();
    workload::check_state(&got, &model).unwrap_or_else(|e| panic!("{e}\n{ctx}"));
    // Rewrite the possibly-applied batch (same contents) and go on.
    let next = model.next();
    for n in next..next + 50 {
        let ops = workload::batch(seed, opts.shape, n);
        eng.write(
            &workload::write_batch(&ops, ids),
            WriteOptions { sync: true },
        )
        .unwrap();
    }
    model.advance_to(next + 49);
    eng.close().unwrap();
    drop(eng);
    let eng = DiskEngine::open(opts.engine_config(db)).unwrap();
    eng.verify().unwrap();
    assert!(
        workload::read_state(&eng).unwrap() == model.state,
        "after writing on: {ctx}"
    );
}

#[test]
fn table_files_reaching_the_size_limit_fail_writes_cleanly_and_lose_nothing() {
    // Journal files are 1 MiB, preallocated: only the table files reach the limit. Different
    // limits stop the writer at different points (before the first checkpoint with data,
    // after a few).
    for (seed, limit_mib) in [(31, 3), (33, 6), (34, 9)] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let opts = ChildOptions {
            shape: Shape::Grow,
            ..ChildOptions::default()
        };
        let out = run_limited(&db, seed, limit_mib << 20, &opts);
        assert!(
            out.stdout.contains(".fdb"),
            "a table file should have hit the limit:\n{}",
            workload::tail(&out.stdout, 3)
        );
        check_after_space_returns(&db, seed, &opts, &out);
    }
}

/// Waits (with the liveness bound) until `file` holds a line for which `pred` is true.
fn wait_for_line(file: &Path, what: &str, pred: impl Fn(&str) -> bool) {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.lines().any(&pred) {
            return;
        }
        assert!(
            started.elapsed() < HANG,
            "waited too long for {what}; last lines:\n{}",
            workload::tail(&text, 5)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn writes_resume_in_the_same_process_when_space_returns() {
    let seed = 35;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (out_path, err_path) = (db.with_extension("stdout"), db.with_extension("stderr"));
    let opts = ChildOptions {
        shape: Shape::Grow,
        retry: true,
        ..ChildOptions::default()
    };
    let mut cmd = workload::writer_command(Path::new(EXE), &db, seed, 0, &opts);
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 6 << 20,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // The disk fills up; the writer retries while background eviction and checkpoints fail.
    let errs = |l: &str| l.starts_with("ERR disk_full=true ");
    wait_for_line(&out_path, "the first disk-full error", errs);
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&out_path).unwrap();
        if text.lines().filter(|l| errs(l)).count() >= 25 {
            break;
        }
        assert!(started.elapsed() < HANG, "the writer stopped retrying");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Space returns: lift the limit of the running child.
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit on our own child with valid pointers.
    let rc = unsafe {
        libc::prlimit(
            child.id() as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &unlimited,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let text = std::fs::read_to_string(&out_path).unwrap();
    let failed_at = workload::parse_acks(&text, 0).unwrap().len() as u64;
    wait_for_line(&out_path, "writes to resume", |l| {
        l.strip_prefix("ACK ")
            .and_then(|r| r.split(' ').next()?.parse::<u64>().ok())
            .is_some_and(|n| n >= failed_at + 100)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        !stderr.contains("panicked"),
        "{}",
        workload::tail(&stderr, 20)
    );
    let acks = workload::parse_acks(&stdout, 0).unwrap();
    let mut model = Model::new(seed, opts.shape);
    model.advance_to(*acks.last().unwrap());
    let eng = DiskEngine::open(opts.engine_config(&db)).unwrap();
    eng.verify().unwrap();
    let got = workload::read_state(&eng).unwrap();
    workload::check_state(&got, &model).unwrap_or_else(|e| {
        panic!(
            "seed {seed}: {e}\nchild stderr:\n{}",
            workload::tail(&stderr, 20)
        )
    });
}

#[test]
fn journal_reaching_the_size_limit_fails_writes_cleanly_and_loses_nothing() {
    let seed = 32;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // One large, growing journal file, uncompressed, over compressible values that the tables
    // store snappy-compressed (the collection) or spread over two files: the journal reaches the
    // 2 MiB limit first.
    let opts = ChildOptions {
        shape: Shape::Churn,
        journal_file_max: 64 << 20,
        preallocate: false,
        journal_compressor: JournalCompressor::None,
        ..ChildOptions::default()
    };
    let out = run_limited(&db, seed, 2 << 20, &opts);
    assert!(
        out.stdout.contains("journal"),
        "the journal should have hit the limit:\n{}",
        out.stdout
    );
    check_after_space_returns(&db, seed, &opts, &out);
}

#[test]
fn a_journal_file_that_cannot_be_preallocated_fails_the_open_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // 4 MiB journal files, preallocated, under a 1 MiB limit: the first file cannot be created.
    let opts = ChildOptions {
        journal_file_max: 4 << 20,
        ..ChildOptions::default()
    };
    let mut cmd = workload::writer_command(Path::new(EXE), &db, 1, 0, &opts);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs before exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: 1 << 20,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("ERR disk_full=true batch=open: ")
            && stdout.contains("FlashdocLog.0000000001"),
        "{stdout}"
    );
    // Without the limit the database opens and works.
    let (eng, ids) = workload::open_with_tables(opts.engine_config(&db)).unwrap();
    let ops = workload::batch(1, Shape::Churn, 0);
    eng.write(
        &workload::write_batch(&ops, ids),
        WriteOptions { sync: true },
    )
    .unwrap();
    eng.verify().unwrap();
}
