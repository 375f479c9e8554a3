//! `flashdoc-engine-torture`: the engine's crash and fault-injection child, and the long-run
//! crash loop.
//!
//! ```text
//! flashdoc-engine-torture write DBPATH SEED [START] [options]
//!     Opens the engine (journal on, 1 MiB journal files, 1 MiB cache, a checkpoint every
//!     200 ms), creates the tables `coll` (4 KB leaves) and `idx` if missing, then writes batch
//!     START, START+1, … with sync: true, printing `ACK <n> <description>` after each one is
//!     acknowledged. Batch n is a pure function of (SEED, n) (see torture/workload.rs), so a
//!     parent can regenerate it. On an error it prints `ERR disk_full=<bool> batch=<n>: <error>`,
//!     tries to close (`CLOSE ok` / `CLOSE ERR …`) and exits with status 2.
//!     options: --grow (fresh keys, incompressible values: the files only grow)
//!              --retry (after an error, retry the same batch every 20 ms instead of exiting)
//!              --batches N (stop after N batches: print `DONE <next>` and idle until killed)
//!              --no-checkpoint   --journal-file-max BYTES   --no-preallocate
//!              --journal-compressor none|snappy|zstd   --direct-io data,log
//!              --compact MS (a thread compacts `coll` and `idx` in turn every MS ms, printing
//!                            `COMPACT <table> <bytes before> <bytes after>`)
//!
//! flashdoc-engine-torture crash-loop DBPATH [--cycles N] [--seed S] [--trim EXTENTS] [--direct-io data,log] [--compact MS]
//!     N times: start a `write` child on DBPATH, SIGKILL it after 10–300 ms, reopen the database
//!     and check that every acknowledged batch is there, no batch is half there, and every
//!     block checksums. Prints a summary; exits 1 on the first failure. With `--trim`, the
//!     writers trim freed space in batches of EXTENTS extents, punched into the files; with
//!     `--direct-io`, they open those files with O_DIRECT; with `--compact`, they compact a
//!     table every MS ms while writing, and the check also finds one file per table.
//! ```

#[path = "torture/workload.rs"]
mod workload;

use engine::{KvEngine, WriteOptions};
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use workload::{ChildOptions, CrashLoop};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("write") => write_mode(&args[2..]),
        Some("crash-loop") => crash_loop_mode(&args[2..]),
        _ => {
            eprintln!(
                "usage: flashdoc-engine-torture write DBPATH SEED [START] [options]\n       \
                 flashdoc-engine-torture crash-loop DBPATH [--cycles N] [--seed S] [--trim EXTENTS] [--direct-io data,log] [--compact MS]"
            );
            2
        }
    };
    std::process::exit(code);
}

/// One line to stdout, written and flushed at once (the parent may SIGKILL at any instant).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("{line}\n").as_bytes());
    let _ = out.flush();
}

fn write_mode(args: &[String]) -> i32 {
    let (Some(db), Some(seed)) = (args.first(), args.get(1)) else {
        eprintln!("write: DBPATH and SEED are required");
        return 2;
    };
    let Ok(seed) = seed.parse::<u64>() else {
        eprintln!("write: SEED must be a number");
        return 2;
    };
    let (start, rest) = match args.get(2).and_then(|s| s.parse::<u64>().ok()) {
        Some(s) => (s, &args[3..]),
        None => (0, &args[2..]),
    };
    let opts = match ChildOptions::parse(rest) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("write: {e}");
            return 2;
        }
    };
    let (eng, ids) = match workload::open_with_tables(opts.engine_config(Path::new(db))) {
        Ok(x) => x,
        Err(e) => {
            say(&format!(
                "ERR disk_full={} batch=open: {e}",
                e.is_disk_full()
            ));
            return 2;
        }
    };
    let eng = std::sync::Arc::new(eng);
    if let Some(ms) = opts.compact_ms {
        let eng = eng.clone();
        std::thread::spawn(move || {
            for round in 0usize.. {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                let (name, id) = (workload::TABLES[round % 2], ids[round % 2]);
                match eng.compact_table(id) {
                    Ok(s) => say(&format!(
                        "COMPACT {name} {} {}",
                        s.bytes_before, s.bytes_after
                    )),
                    Err(e) => {
                        say(&format!("ERR compact {name}: {e}"));
                        std::process::exit(3);
                    }
                }
            }
        });
    }
    say(&format!("OPEN start={start}"));
    for n in start.. {
        if opts.batches.is_some_and(|b| n >= start + b) {
            say(&format!("DONE {n}"));
            // Idle with everything since the last checkpoint in the journal only.
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        let ops = workload::batch(seed, opts.shape, n);
        let batch = workload::write_batch(&ops, ids);
        loop {
            let Err(e) = eng.write(&batch, WriteOptions { sync: true }) else {
                say(&format!("ACK {n} {}", workload::describe(&ops)));
                break;
            };
            say(&format!(
                "ERR disk_full={} batch={n}: {e}",
                e.is_disk_full()
            ));
            if opts.retry {
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
            match eng.close() {
                Ok(()) => say("CLOSE ok"),
                Err(e) => say(&format!("CLOSE ERR disk_full={}: {e}", e.is_disk_full())),
            }
            return 2;
        }
    }
    unreachable!("batch numbers do not run out")
}

fn crash_loop_mode(args: &[String]) -> i32 {
    let Some(db) = args.first() else {
        eprintln!("crash-loop: DBPATH is required");
        return 2;
    };
    let (mut cycles, mut seed, mut trim) = (100u64, 1u64, None);
    let mut direct_io = engine::DirectIo::NONE;
    let mut compact_ms = None;
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        let text = it.next();
        let v = text.and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), v) {
            ("--cycles", Some(v)) => cycles = v,
            ("--seed", Some(v)) => seed = v,
            ("--trim", Some(v)) if v > 0 => trim = Some(v as usize),
            ("--compact", Some(v)) if v > 0 => compact_ms = Some(v),
            ("--direct-io", _) if text.is_some_and(|t| t.parse::<engine::DirectIo>().is_ok()) => {
                direct_io = text.unwrap().parse().unwrap()
            }
            _ => {
                eprintln!(
                    "crash-loop: bad option {a} (expected --cycles N, --seed S, --trim EXTENTS, \
                     --direct-io data,log, --compact MS)"
                );
                return 2;
            }
        }
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("crash-loop: cannot find my own executable: {e}");
            return 2;
        }
    };
    let mut cl = CrashLoop::new(&exe, Path::new(db), seed);
    // The writers trim freed space in batches, punched into the files.
    cl.opts.trim_batch = trim;
    cl.opts.direct_io = direct_io;
    cl.opts.compact_ms = compact_ms;
    let started = Instant::now();
    for i in 0..cycles {
        if let Err(e) = cl.cycle(i + 1 == cycles) {
            eprintln!("crash-loop FAILED at cycle {i} (seed {seed}, dbPath {db}):\n{e}");
            return 1;
        }
        if (i + 1) % 50 == 0 || i + 1 == cycles {
            let s = &cl.stats;
            println!(
                "cycle {}/{cycles}: {} batches acknowledged, {} checks passed ({} found the in-flight batch applied), {} cycles killed before any ACK, {:.1} s",
                i + 1,
                cl.acked(),
                s.verified,
                s.in_flight_applied,
                s.no_ack_cycles,
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "crash-loop OK: seed {seed}, {cycles} cycles, {} batches acknowledged and all present, {} entries in the final verified database, {} compactions finished, {} checkpoints opened alone and each a cut at one batch (on average {:.1} batches behind, replayed from the journal), {:.1} s",
        cl.acked(),
        cl.stats.entries_last_verified,
        cl.stats.compactions,
        cl.stats.cuts_verified,
        cl.stats.cut_batches_behind as f64 / cl.stats.cuts_verified.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
    0
}
