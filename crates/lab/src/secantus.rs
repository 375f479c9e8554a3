//! SecantusDB under the shim: a MongoDB-wire server on WiredTiger, driven over the wire by the
//! lab's own YCSB and LinkBench, for the `real-wiredtiger` experiment.
//!
//! SecantusDB 0.7.0b3 (`pip install secantusdb`; `scripts/install-secantusdb.sh`) is a Python
//! server that keeps every collection in WiredTiger 11 tables through WiredTiger's Python API.
//! It is run unmodified: `secantusd-py` under `libflashdoc_shim.so`, its data directory on a RAM
//! filesystem as the lab's own engine runs are ([`run::new_work_dir`]). What the lab controls only
//! from outside, and how:
//!
//! - **The cache** is fixed when the server starts (`--cache-size`), and no command changes it.
//!   The run's cache is `cache_share` of the loaded tables, so each run first loads once without
//!   the shim to measure them (the *calibration load*: same workload and seed), then starts a
//!   fresh server with that cache, under the shim, for the measured load and run. Both phases
//!   of the measured server therefore run with the run's cache; flashdoc's engine and
//!   `wtdriver` load with a larger one. The measured load's own table bytes are kept beside
//!   (`extra.measured_load_bytes`).
//! - **Checkpoints** by bytes written, as the lab's engine and `wtdriver` take them: the
//!   server's timed checkpoints are off (`SECANTUS_CHECKPOINT_SECONDS=0`), and a thread of the
//!   lab polls the server's bytes written through write calls (`wchar` in `/proc/PID/io`, less
//!   the shim's own trace bytes) every 2 ms and sends `fsync` — a WiredTiger checkpoint in
//!   SecantusDB — when a checkpoint interval's worth was written since the last one began.
//! - **The run phase** starts right after the end-of-load checkpoint's commit, as it does on
//!   flashdoc's engine. The shim stamps events with `CLOCK_MONOTONIC` from its own start, which
//!   comes after the lab spawned the server: an event the shim stamped `t` happened before the
//!   lab's `spawned + t`. So every commit before the end-of-load checkpoint returned is stamped
//!   below `returned − spawned`, and the last such commit is that checkpoint's (the next
//!   checkpoint waits for an interval's bytes, far more than the shim's start-up lag).
//!
//! SecantusDB keeps documents in `secantus_documents_sh*.wt` (collections hashed over 16
//! tables), the `_id` and secondary index entries in `secantus_index_entries.wt` and
//! `secantus_unique_keys.wt`, natural order in `secantus_natural*.wt`, the oplog in
//! `secantus_oplog*.wt` (not written by a standalone server), and its journal as
//! `WiredTigerLog.*` in the data directory: [`KINDS`].

use crate::experiment::{ScaleSpec, ENGINE_DIRTY_PCT};
use crate::run::{self, EngineRun, EngineWork, Lab, Sizing};
use crate::tools::Tools;
use anyhow::{anyhow, bail, Context, Result};
use placement::classify::FileClassifier;
use placement::trace::TraceReader;
use placement::{Event, FileKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::measure::PhaseResult;
use workload::store::Wire;

/// The allocation label of SecantusDB's runs in results.
pub const SECANTUSDB: &str = "secantusdb";

/// The version `scripts/install-secantusdb.sh` installs.
pub const VERSION: &str = "0.7.0b3";

/// SecantusDB's file kinds for the shim (`placement::classify` syntax).
pub const KINDS: &str = "collection=secantus_documents*.wt,secantus_oplog*.wt;\
     index=secantus_index_entries.wt,secantus_unique_keys.wt,secantus_natural*.wt;\
     journal=WiredTigerLog.*,WiredTigerPreplog.*,WiredTigerTmplog.*";

/// SecantusDB's journal files: it opens WiredTiger with `log=(file_max=10MB)` (WiredTiger's MB
/// is 2^20 bytes), whatever the lab's scaled size.
const JOURNAL_FILE_BYTES: u64 = 10 << 20;

/// How long a server may take to start or to shut down cleanly.
const SERVER_WAIT: Duration = Duration::from_secs(120);

/// How often the checkpoint thread reads the server's bytes written (as `wtdriver` polls).
const CHECKPOINT_POLL: Duration = Duration::from_millis(2);

/// The server program: `FLASHDOC_SECANTUSD`, else `scripts/install-secantusdb.sh` installs it.
pub(crate) fn program(quiet: bool) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("FLASHDOC_SECANTUSD") {
        let p = PathBuf::from(p);
        if !p.exists() {
            bail!("FLASHDOC_SECANTUSD: no program at {}", p.display());
        }
        return Ok(p);
    }
    if !quiet {
        eprintln!("real-wiredtiger: installing SecantusDB {VERSION} from PyPI (once)");
    }
    let path = run::setup_script("scripts/install-secantusdb.sh", "installing SecantusDB")?;
    if !path.exists() {
        bail!("scripts/install-secantusdb.sh printed no program");
    }
    Ok(path)
}

/// Where a server under the shim writes its trace.
struct Traced<'a> {
    shim: &'a Path,
    trace: &'a Path,
}

/// A running `secantusd-py`, stopped cleanly by [`Server::stop`] and killed if dropped.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
    /// `CLOCK_MONOTONIC` just before the spawn, ns.
    spawned_ns: u64,
}

impl Server {
    fn start(
        program: &Path,
        dir: &Path,
        cache_bytes: u64,
        traced: Option<Traced>,
        log: &Path,
    ) -> Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut cmd = Command::new(program);
        cmd.arg("--storage-path")
            .arg(dir)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--standalone", "--log-level", "WARNING"])
            .arg("--cache-size")
            .arg(cache_bytes.to_string())
            // The lab checkpoints by bytes written (the module's docs): no timed ones.
            .env("SECANTUS_CHECKPOINT_SECONDS", "0")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(log)?)
            .stderr(std::fs::File::create(log)?.try_clone()?);
        if let Some(t) = traced {
            cmd.env("LD_PRELOAD", t.shim)
                .env("FLASHDOC_SHIM_DIR", dir)
                .env("FLASHDOC_SHIM_TRACE", t.trace)
                .env("FLASHDOC_SHIM_KINDS", KINDS);
        }
        let spawned_ns = monotonic_ns();
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let mut server = Server {
            child,
            port,
            log: log.to_path_buf(),
            spawned_ns,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        while started.elapsed() < SERVER_WAIT {
            if let Some(status) = self.child.try_wait()? {
                bail!("SecantusDB exited at start ({status}): {}", self.log_tail());
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "SecantusDB did not listen on port {} within {SERVER_WAIT:?}",
            self.port
        )
    }

    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<_> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM, then waits for a clean exit: WiredTiger's closing checkpoint, and the shim's
    /// trace written to its end.
    fn stop(mut self) -> Result<()> {
        let pid = libc::pid_t::try_from(self.child.id())?;
        // SAFETY: kill(2) on our own child, which has not been reaped (we hold its Child).
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            bail!("signalling SecantusDB: {}", std::io::Error::last_os_error());
        }
        let started = Instant::now();
        while started.elapsed() < SERVER_WAIT {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("SecantusDB stopped with {status}: {}", self.log_tail());
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("SecantusDB did not stop within {SERVER_WAIT:?}")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A WiredTiger checkpoint through the wire (SecantusDB's `fsync`).
fn checkpoint(server: &Wire) -> Result<()> {
    server
        .client()
        .database("admin")
        .run_command(bson::doc! { "fsync": 1 })
        .run()
        .context("fsync (a checkpoint)")?;
    Ok(())
}

/// Bytes the process wrote through write calls (`/proc/PID/io`'s `wchar`).
fn written_bytes(pid: u32) -> Result<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .ok_or_else(|| anyhow!("/proc/{pid}/io has no wchar"))?
        .trim()
        .parse()
        .context("/proc/PID/io wchar")
}

/// The clock the shim stamps its events with, in ns.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into valid memory.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Checkpoints every `every_bytes` the server writes until stopped; returns how many it took.
fn checkpointer(
    pid: u32,
    uri: String,
    trace: PathBuf,
    every_bytes: u64,
    stop: Arc<AtomicBool>,
) -> Result<u64> {
    assert!(every_bytes > 0);
    let server = Wire::connect(&uri, "admin")?;
    // The shim's own trace writes count in `wchar` too.
    let written = || -> Result<u64> {
        let trace_bytes = std::fs::metadata(&trace).map_or(0, |m| m.len());
        Ok(written_bytes(pid)?.saturating_sub(trace_bytes))
    };
    let mut began_at = written()?;
    let mut taken = 0;
    while !stop.load(Ordering::Relaxed) {
        let now = written()?;
        if now.saturating_sub(began_at) >= every_bytes {
            began_at = now;
            checkpoint(&server)?;
            taken += 1;
        }
        std::thread::sleep(CHECKPOINT_POLL);
    }
    Ok(taken)
}

/// Bytes of the loaded tables: the sizes of the collection and index files.
fn table_bytes(dir: &Path) -> Result<u64> {
    let kinds = FileClassifier::parse(KINDS).map_err(|e| anyhow!(e))?;
    let mut n = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e?;
        let name = e.file_name();
        let kind = kinds.classify(&name.to_string_lossy());
        if matches!(kind, FileKind::Collection | FileKind::Index) {
            n += e.metadata()?.len();
        }
    }
    Ok(n)
}

/// The calibration load: the tables' bytes after this workload's load and a checkpoint, on a
/// server without the shim.
fn calibrate(program: &Path, work: &Path, w: &EngineWork, scale: &ScaleSpec) -> Result<u64> {
    let dir = work.join("calibration");
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(
        program,
        &dir,
        scale.load_cache_mb << 20,
        None,
        &work.join("calibration.log"),
    )?;
    let uri = server.uri();
    let admin = Wire::connect(&uri, "admin")?;
    run::drive(
        |db| Wire::connect(&uri, db),
        w,
        scale,
        run::Clients::Threads,
        || checkpoint(&admin).map(|()| None),
    )?;
    let bytes = table_bytes(&dir)?;
    server.stop()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(bytes)
}

/// What the measured server did: its phases, its tables' bytes at the end and at the end of
/// the load, when its run phase began (ns after it was spawned), and the checkpoints the lab
/// sent it in the run phase.
struct Measured {
    load: PhaseResult,
    run: PhaseResult,
    db_bytes: u64,
    measured_load_bytes: u64,
    run_began_ns: Option<u64>,
    lab_checkpoints: u64,
}

/// Starts the server with the run's cache under the shim, drives the load and the run over the
/// wire (the lab's checkpoints by bytes written in the run phase), and stops it.
fn measured_run(
    tools: &Tools,
    work: &Path,
    trace: &Path,
    sizing: &Sizing,
    w: &EngineWork,
    scale: &ScaleSpec,
) -> Result<Measured> {
    let dir = work.join("db");
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(
        &tools.secantusd,
        &dir,
        sizing.cache_bytes,
        Some(Traced {
            shim: &tools.shim,
            trace,
        }),
        &work.join("server.log"),
    )?;
    let uri = server.uri();
    let admin = Wire::connect(&uri, "admin")?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut run_began_ns = None;
    let mut measured_load_bytes = 0;
    let mut ckpt = None;
    let phases = run::drive(
        |db| Wire::connect(&uri, db),
        w,
        scale,
        run::Clients::Threads,
        || {
            checkpoint(&admin)?;
            measured_load_bytes = table_bytes(&dir)?;
            run_began_ns = Some(monotonic_ns() - server.spawned_ns);
            let (uri, trace, stop) = (uri.clone(), trace.to_path_buf(), stop.clone());
            let (pid, every) = (server.child.id(), sizing.checkpoint_every_bytes);
            ckpt = Some(std::thread::spawn(move || {
                checkpointer(pid, uri, trace, every, stop)
            }));
            Ok(Some(0))
        },
    );
    stop.store(true, Ordering::Relaxed);
    let lab_checkpoints = match ckpt.map(|h| h.join()) {
        Some(Ok(r)) => Some(r),
        Some(Err(_)) => Some(Err(anyhow!("the checkpoint thread panicked"))),
        None => None,
    };
    let (load, run_phase, _) = phases?;
    let lab_checkpoints = lab_checkpoints.ok_or_else(|| anyhow!("no end of load"))??;
    server.stop()?;
    let db_bytes = table_bytes(&dir)?;
    Ok(Measured {
        load,
        run: run_phase,
        db_bytes,
        measured_load_bytes,
        run_began_ns,
        lab_checkpoints,
    })
}

/// Runs SecantusDB under the shim for one workload and seed (or reads the run done before).
pub(crate) fn secantus_run(
    lab: &Lab,
    tools: &Tools,
    workload: &str,
    seed: u64,
    cache_share: f64,
) -> Result<EngineRun> {
    let exp = &lab.exp;
    let scale = &lab.scale;
    let key = format!(
        "{SECANTUSDB}-{workload}-c{cache_share}-f{}-k{}-r{}-s{seed}-{}",
        exp.device_fill, exp.checkpoint_share, exp.run_factor, exp.scale
    );
    let saved = lab.out.join("points").join(format!("engine-{key}.json"));
    if let Some(r) = run::saved_run(&saved) {
        return Ok(r);
    }
    let program = &tools.secantusd;
    let w = EngineWork {
        workload: workload.into(),
        cache_share,
        leaf_kb: 32,
        compressor: "none".into(),
        allocation: SECANTUSDB.into(),
        dirty_pct: ENGINE_DIRTY_PCT,
        seed,
        scale: exp.scale.clone(),
    };
    let started = Instant::now();
    let work = run::new_work_dir(&lab.out, &key)?;
    let sizing = Sizing {
        journal_file_bytes: JOURNAL_FILE_BYTES,
        ..Sizing::new(calibrate(program, &work, &w, scale)?, exp, cache_share)
    };
    let trace = lab.out.join("traces").join(format!("{key}.trace"));
    let _ = std::fs::remove_file(&trace);
    let m = measured_run(tools, &work, &trace, &sizing, &w, scale)?;
    let (load, run_phase, db_bytes) = (m.load, m.run, m.db_bytes);
    let (measured_load_bytes, lab_checkpoints) = (m.measured_load_bytes, m.lab_checkpoints);
    let _ = std::fs::remove_dir_all(&work);
    let began = m.run_began_ns.ok_or_else(|| anyhow!("no end of load"))?;
    let (end_of_load_event, events, checkpoints) = scan(&trace, began)?;
    let shares = run::write_shares(&trace, end_of_load_event)?;
    let mut extra = BTreeMap::new();
    extra.insert("measured_load_bytes".into(), measured_load_bytes as f64);
    extra.insert("lab_checkpoints".into(), lab_checkpoints as f64);
    let r = EngineRun {
        trace_version: run::TRACE_VERSION,
        engine: crate::experiment::COPY_ON_WRITE.into(),
        key,
        workload: w.workload,
        seed,
        cache_share,
        leaf_kb: w.leaf_kb,
        compressor: w.compressor,
        allocation: w.allocation,
        // WiredTiger's own dirty budget.
        dirty_pct: ENGINE_DIRTY_PCT,
        scale_name: exp.scale.clone(),
        scale: scale.clone(),
        // Buffered: neither driver opens its files with O_DIRECT.
        direct_io: "none".into(),
        sizing,
        load,
        run: run_phase,
        trace,
        end_of_load_event,
        run_write_bytes: shares.by_file.values().sum(),
        events,
        db_bytes,
        write_bytes_by_file: shares.by_file,
        write_bytes_by_page: shares.by_page,
        checkpoints,
        checkpoint_trigger: None,
        intervals: None,
        leaf_changes: None,
        run_checkpoints: shares.checkpoints,
        interval_bytes_mean: shares.interval_bytes_mean,
        wall_s: started.elapsed().as_secs_f64(),
        extra,
    };
    std::fs::write(&saved, serde_json::to_string_pretty(&r)?)?;
    Ok(r)
}

/// The run phase's first event (the one after the last checkpoint commit stamped below
/// `run_began_ns`, the module's docs say why), the events, and the checkpoints committed.
fn scan(trace: &Path, run_began_ns: u64) -> Result<(u64, u64, u64)> {
    let (mut first, mut events, mut commits) = (None, 0u64, 0u64);
    for ev in TraceReader::open(trace)? {
        let ev = ev?;
        events += 1;
        if let Event::CheckpointCommit { time_ns, .. } = ev {
            commits += 1;
            if time_ns < run_began_ns {
                first = Some(events);
            }
        }
    }
    let first = first.ok_or_else(|| {
        anyhow!(
            "{}: no checkpoint committed by the end of the load",
            trace.display()
        )
    })?;
    Ok((first, events, commits))
}
