//! Crash test: a writer child (`flashdoc-engine-torture write`) is SIGKILLed at a random instant
//! (10–300 ms after it starts, from a seeded RNG), over and over on the same database, so state
//! accumulates and some kills land in start-up, recovery and checkpoints. After a kill the
//! database is opened here (on two cycles in three; otherwise the next child recovers it) and
//! must hold every acknowledged batch, the in-flight batch in full or not at all, and verify.
//! Before that, the last durable checkpoint is opened alone (without the journal) and must be
//! a consistent cut: the state after one prefix of the batches, in both tables.
//!
//! `FLASHDOC_CRASH_CYCLES=N` runs N cycles (default 50), `FLASHDOC_CRASH_SEED=S` picks the
//! seed. For long runs use the binary: `flashdoc-engine-torture crash-loop DBPATH --cycles 1000`.

#[path = "../src/bin/torture/workload.rs"]
mod workload;

use std::path::Path;
use workload::CrashLoop;

const EXE: &str = env!("CARGO_BIN_EXE_flashdoc-engine-torture");

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}")),
        Err(_) => default,
    }
}

#[test]
fn sigkill_at_random_instants_loses_no_acknowledged_batch() {
    let cycles = env_u64("FLASHDOC_CRASH_CYCLES", 50);
    let seed = env_u64("FLASHDOC_CRASH_SEED", 20240601);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut cl = CrashLoop::new(Path::new(EXE), &db, seed);
    for i in 0..cycles {
        if let Err(e) = cl.cycle(i + 1 == cycles) {
            panic!(
                "crash cycle {i} of {cycles} failed (rerun with FLASHDOC_CRASH_SEED={seed}; \
                 {} batches acknowledged before it):\n{e}",
                cl.acked()
            );
        }
    }
    let s = cl.stats.clone();
    eprintln!(
        "seed {seed}: {cycles} cycles, {} batches acknowledged, {s:?}",
        cl.acked()
    );
    // The test proves nothing unless the children got work done between kills (not a speed
    // bar: one batch in 50 kills is enough), and some states were checked here (which cycles
    // are checked is a function of the seed alone).
    assert!(cl.acked() > 0, "no batch acknowledged in {cycles} cycles");
    assert!(s.verified > 0, "{s:?}");
    // Every check opened the last checkpoint alone first and found it a cut at one batch.
    assert_eq!(s.cuts_verified, s.verified, "{s:?}");
}

/// With TRIM on (small batches punched into the files as soon as they fill) a SIGKILL lands
/// right after trim batches again and again: recovery must still find every acknowledged
/// batch and every block must verify — a trim never touches space a durable checkpoint needs.
#[test]
fn sigkill_right_after_trim_batches_loses_nothing() {
    let cycles = env_u64("FLASHDOC_CRASH_CYCLES", 50).min(25);
    let seed = env_u64("FLASHDOC_CRASH_SEED", 20240611);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut cl = CrashLoop::new(Path::new(EXE), &db, seed);
    cl.opts.trim_batch = Some(4);
    for i in 0..cycles {
        if let Err(e) = cl.cycle(i + 1 == cycles) {
            panic!("trim crash cycle {i} of {cycles} failed (seed {seed}):\n{e}");
        }
    }
    assert!(cl.acked() > 0, "no batch acknowledged");
    assert!(cl.stats.verified > 0, "{:?}", cl.stats);
}

/// Whether the file system under `dir` takes `O_DIRECT` (tmpfs does not): the direct-I/O
/// tests say so and stop where it does not.
/// Compactions in the mix: a thread in the writer compacts `coll` and `idx` in turn every
/// 30 ms, so kills land before, during and after a copy and its swap-in checkpoint.
#[test]
fn sigkill_during_compactions_loses_nothing() {
    let cycles = env_u64("FLASHDOC_CRASH_CYCLES", 50).min(25);
    let seed = env_u64("FLASHDOC_CRASH_SEED", 31);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut cl = CrashLoop::new(Path::new(EXE), &db, seed);
    cl.opts.compact_ms = Some(30);
    // Kills come at random moments; on a loaded host a child may not finish a compaction for a
    // while, so the loop goes on (within a bound) until at least one compaction has finished.
    let most = cycles * 8;
    for i in 0..most {
        let enough = i + 1 >= cycles && cl.stats.compactions > 0;
        if let Err(e) = cl.cycle(enough || i + 1 == most) {
            panic!("compaction crash cycle {i} of {cycles} failed (seed {seed}):\n{e}");
        }
        if enough {
            break;
        }
    }
    assert!(cl.acked() > 0 && cl.stats.compactions > 0, "{:?}", cl.stats);
}

/// Fails without `O_DIRECT` unless `FLASHDOC_ALLOW_NO_ODIRECT=1` says the machine lacks it.
fn direct_io_supported(dir: &Path) -> bool {
    engine::io::direct_io_required(dir)
}

/// Direct I/O on table files and the journal (the journal then pads each flush to a block
/// with a filler record): SIGKILLs still lose no acknowledged batch, and replay reads across
/// the fillers.
#[test]
fn sigkill_with_direct_io_loses_nothing() {
    let cycles = env_u64("FLASHDOC_CRASH_CYCLES", 50).min(20);
    let seed = env_u64("FLASHDOC_CRASH_SEED", 20241124);
    let dir = tempfile::tempdir().unwrap();
    if !direct_io_supported(dir.path()) {
        return;
    }
    let db = dir.path().join("db");
    let mut cl = CrashLoop::new(Path::new(EXE), &db, seed);
    cl.opts.direct_io = "data,log".parse().unwrap();
    for i in 0..cycles {
        if let Err(e) = cl.cycle(i + 1 == cycles) {
            panic!("direct-I/O crash cycle {i} of {cycles} failed (seed {seed}):\n{e}");
        }
    }
    assert!(cl.acked() > 0, "no batch acknowledged");
    assert!(cl.stats.verified > 0, "{:?}", cl.stats);
}

/// The binary's `crash-loop` mode (what a long run uses) works end to end.
#[test]
fn crash_loop_mode_runs_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = std::process::Command::new(EXE)
        .arg("crash-loop")
        .arg(&db)
        .args(["--cycles", "3", "--seed", "5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("crash-loop OK: seed 5, 3 cycles"),
        "status {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The checker itself can fail: a lost acknowledged batch and a half-applied batch are both
/// caught (so a passing crash test means something).
#[test]
fn checker_rejects_lost_and_partial_batches() {
    use workload::{batch, check_state, Found, Model, Shape};
    let seed = 99;
    let mut m = Model::new(seed, Shape::Churn);
    m.advance_to(40);
    assert_eq!(check_state(&m.state, &m).unwrap(), Found::Acked);
    // The in-flight batch applied in full is accepted.
    let mut plus = m.clone();
    plus.advance_to(41);
    assert_eq!(
        check_state(&plus.state, &m).unwrap(),
        Found::AckedPlusInFlight
    );
    // A lost acknowledged batch: the state of batches 0..=39 checked against 0..=40.
    let mut older = Model::new(seed, Shape::Churn);
    older.advance_to(39);
    assert_ne!(
        older.state, m.state,
        "batch 40 of seed {seed} changes something"
    );
    {
        let e = check_state(&older.state, &m).unwrap_err();
        assert!(e.contains("neither"), "{e}");
    }
    // Half of the in-flight batch: find a batch with at least two distinct effective keys.
    let mut n = 41;
    loop {
        let mut m2 = m.clone();
        m2.advance_to(n - 1);
        let ops = batch(seed, Shape::Churn, n);
        let mut partial = m2.state.clone();
        let op = &ops[0];
        match &op.value {
            Some(v) => partial[op.table].insert(op.key.clone(), v.clone()),
            None => partial[op.table].remove(&op.key),
        };
        let mut full = m2.clone();
        full.advance_to(n);
        if partial != m2.state && partial != full.state {
            let e = check_state(&partial, &m2).unwrap_err();
            assert!(e.contains(&format!("in-flight batch {n}")), "{e}");
            break;
        }
        n += 1;
        assert!(n < 200, "no batch with two effective ops");
    }
}
