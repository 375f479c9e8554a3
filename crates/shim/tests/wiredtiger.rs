//! The shim under a real WiredTiger (issue 15's acceptance test): a small driver of our own
//! (`crates/shim/wtdriver.c`, mongod's layout: `collection.wt` and its `_id` index `index.wt`)
//! against the WiredTiger 11.3.1 build that `scripts/build-wiredtiger.sh`
//! makes, with `checkpoint=(wait=1)` and `statistics=(fast)`.
//!
//! 1. The trace's writes, truncations, renames and removals, replayed, account for every file
//!    the run left: same set of files, no byte outside the written extents that is not zero,
//!    and the size a final truncation gave.
//! 2. The checkpoints the shim found equal WiredTiger's own `total succeed number of
//!    checkpoints` (its statistics log at close), over at least 10 checkpoints.
//! 3. With hints on (`filelog`) and `direct_io=[data,log]`, an `strace -f -e
//!    trace=fcntl,pwrite64,mmap,rename` log (`mmap` to decode the hints, see [`hint_of`];
//!    `rename` to follow a file's hint to its new name) shows every `pwrite64` to a database
//!    file issued under the write-life hint the policy chose (the trace's stream), the hint
//!    unchanged until the write returned, in a file whose writes took at least two hints.
//!    `filelog` makes that certain: a table file writes on the last busy stream until the
//!    first checkpoint commit ranks it, and the first checkpoint writes the collection before
//!    its commit. (`boundary` splits the collection only once a checkpoint window passes
//!    without growth, which a run slowed by strace may not reach.)
//!
//! Needs `FLASHDOC_WIREDTIGER` = the WiredTiger build directory (libwiredtiger.so, include/)
//! and `strace`: `scripts/test.sh` provides both and runs these tests with `--ignored`.

mod common;

use common::shim;
use placement::trace::TraceReader;
use placement::{Event, FileId};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The driver's settings: 15 s of updates with a checkpoint every second, and on until
/// WiredTiger counted 12 (a loaded machine checkpoints more slowly), so at least 10 are checked.
const TRACED_RUN: &[&str] = &[
    "records=20000",
    "seconds=15",
    "checkpoint_wait=1",
    "min_checkpoints=12",
];
const HINTED_RUN: &[&str] = &[
    "records=10000",
    "seconds=12",
    "checkpoint_wait=1",
    "direct_io=1",
];

fn wiredtiger() -> PathBuf {
    let dir = std::env::var_os("FLASHDOC_WIREDTIGER")
        .map(PathBuf::from)
        .expect(
            "FLASHDOC_WIREDTIGER must name a WiredTiger 11.3.1 build directory \
         (bash scripts/build-wiredtiger.sh prints it)",
        );
    assert!(
        dir.join("libwiredtiger.so").exists(),
        "no libwiredtiger.so in {}",
        dir.display()
    );
    dir
}

fn build_driver(wt: &Path, out: &Path) -> PathBuf {
    common::compile(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("wtdriver.c")
            .as_path(),
        out,
        &[
            format!("-I{}", wt.join("include").display()),
            format!("-L{}", wt.display()),
            format!("-Wl,-rpath,{}", wt.display()),
            "-lwiredtiger".into(),
            "-lm".into(),
        ],
    )
}

/// The shim's variables for the driver's files.
fn shim_env(db: &Path, trace: &Path) -> Vec<(String, String)> {
    [
        ("LD_PRELOAD", shim().display().to_string()),
        ("FLASHDOC_SHIM_DIR", db.display().to_string()),
        ("FLASHDOC_SHIM_TRACE", trace.display().to_string()),
        (
            "FLASHDOC_SHIM_KINDS",
            "collection=collection.wt;index=index.wt;\
             journal=WiredTigerLog.*,WiredTigerPreplog.*,WiredTigerTmplog.*"
                .into(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn read_trace(path: &Path) -> Vec<Event> {
    TraceReader::open(path)
        .unwrap()
        .collect::<std::io::Result<_>>()
        .unwrap()
}

/// A set of byte ranges [start, end), merged.
#[derive(Default)]
struct Extents(BTreeMap<u64, u64>);

impl Extents {
    fn add(&mut self, mut start: u64, mut end: u64) {
        if let Some((&s, &e)) = self.0.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
            }
        }
        let inside: Vec<(u64, u64)> = self.0.range(start..=end).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in inside {
            end = end.max(e);
            self.0.remove(&s);
        }
        self.0.insert(start, end);
    }
    fn cut(&mut self, len: u64) {
        let beyond: Vec<u64> = self.0.range(len..).map(|(&s, _)| s).collect();
        for s in beyond {
            self.0.remove(&s);
        }
        if let Some((_, e)) = self.0.range_mut(..len).next_back() {
            *e = (*e).min(len);
        }
    }
    fn bytes(&self) -> u64 {
        self.0.iter().map(|(s, e)| e - s).sum()
    }
    fn contains(&self, at: u64) -> bool {
        self.0
            .range(..=at)
            .next_back()
            .is_some_and(|(_, &e)| at < e)
    }
}

#[derive(Default)]
struct TracedFile {
    name: String,
    removed: bool,
    written: Extents,
    bytes_written: u64,
    /// The length of the last truncation, if no write reached past it since.
    truncated_to: Option<u64>,
}

/// Replays the trace's file events: what each file should hold.
fn replay_files(events: &[Event]) -> BTreeMap<FileId, TracedFile> {
    let mut files: BTreeMap<FileId, TracedFile> = BTreeMap::new();
    for ev in events {
        match ev {
            Event::FileCreate { file, name, .. } => {
                let old = files.insert(
                    *file,
                    TracedFile {
                        name: name.clone(),
                        ..Default::default()
                    },
                );
                assert!(old.is_none(), "file id {file} created twice");
            }
            Event::FileRename { file, name, .. } => {
                files.get_mut(file).unwrap().name = name.clone()
            }
            Event::FileRemove { file, .. } => files.get_mut(file).unwrap().removed = true,
            Event::FileTruncate { file, len, .. } => {
                let f = files.get_mut(file).unwrap();
                f.written.cut(*len);
                f.truncated_to = Some(*len);
            }
            Event::Write(w) => {
                let f = files.get_mut(&w.file).unwrap();
                assert!(!f.removed, "write to removed file {}", f.name);
                let end = w.offset + w.len as u64;
                f.written.add(w.offset, end);
                f.bytes_written += w.len as u64;
                if f.truncated_to.is_some_and(|t| end > t) {
                    f.truncated_to = None;
                }
            }
            Event::Read { .. }
            | Event::Free { .. }
            | Event::CheckpointBegin { .. }
            | Event::CheckpointCommit { .. } => {}
        }
    }
    files
}

/// Check 1: the files on disk are what the trace says was written to them.
fn check_files_match_trace(db: &Path, events: &[Event]) {
    let files = replay_files(events);
    let live: BTreeMap<&str, &TracedFile> = files
        .values()
        .filter(|f| !f.removed)
        .map(|f| (f.name.as_str(), f))
        .collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    let traced: Vec<String> = live.keys().map(|s| s.to_string()).collect();
    assert_eq!(
        on_disk, traced,
        "the files left are the files the trace says are alive"
    );
    let (mut total_written, mut total_held) = (0, 0);
    for (name, f) in &live {
        let data = std::fs::read(db.join(name)).unwrap();
        let size = data.len() as u64;
        let extent_end = f.written.0.values().next_back().copied().unwrap_or(0);
        assert!(
            extent_end <= size,
            "{name}: trace writes up to {extent_end}, file is {size}"
        );
        if let Some(t) = f.truncated_to {
            assert_eq!(size, t, "{name}: the last truncation left {t} bytes");
        }
        // Every byte the trace does not account for is zero (never written, or preallocated).
        let stray = data
            .iter()
            .enumerate()
            .find(|&(i, &b)| b != 0 && !f.written.contains(i as u64));
        assert!(
            stray.is_none(),
            "{name}: byte {:?} is not zero and no traced write covers it",
            stray
        );
        assert!(
            f.bytes_written >= f.written.bytes(),
            "{name}: overwrites only add"
        );
        total_written += f.bytes_written;
        total_held += f.written.bytes();
    }
    eprintln!(
        "files: {} live, {} removed; {total_written} bytes written to the live ones, {total_held} of \
         them still held (the rest overwritten or truncated)",
        live.len(),
        files.len() - live.len()
    );
    for d in ["collection.wt", "index.wt"] {
        assert!(live[d].written.bytes() > 64 << 10, "{d} holds the data");
    }
}

/// A scratch directory on a filesystem that takes `O_DIRECT` writes (tmpfs may refuse them):
/// the first of cargo's target scratch directory, /var/tmp and the system temporary directory
/// that does. None does: the test fails and says so.
fn direct_io_dir() -> tempfile::TempDir {
    let candidates = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
        std::env::temp_dir(),
    ];
    for dir in &candidates {
        let Ok(t) = tempfile::tempdir_in(dir) else {
            continue;
        };
        if takes_direct_io(&t.path().join("probe")) {
            return t;
        }
    }
    panic!("no directory among {candidates:?} takes O_DIRECT writes: the hint test needs one");
}

fn takes_direct_io(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    else {
        return false;
    };
    // An aligned buffer: 4096 bytes inside an 8192-byte allocation.
    let buf = vec![7u8; 8192];
    let at = buf.as_ptr().align_offset(4096);
    f.write_at(&buf[at..at + 4096], 0).is_ok()
}

/// WiredTiger's own count, from the statistics log it writes at close.
fn wiredtiger_checkpoints(db: &Path) -> u64 {
    let log = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("WiredTigerStat.")
        })
        .expect("WiredTiger's statistics log");
    let text = std::fs::read_to_string(log).unwrap();
    let last = text.lines().last().expect("one statistics record");
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    v["wiredTiger"]["checkpoint"]["total succeed number of checkpoints"]
        .as_u64()
        .expect("the checkpoint statistic")
}

fn commits(events: &[Event]) -> u64 {
    events
        .iter()
        .filter(|e| matches!(e, Event::CheckpointCommit { .. }))
        .count() as u64
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{cmd:?} failed: {stderr}");
    stderr
}

#[test]
#[ignore = "needs WiredTiger (FLASHDOC_WIREDTIGER); scripts/test.sh runs it"]
fn trace_of_a_real_wiredtiger_accounts_for_its_files_and_checkpoints() {
    let wt = wiredtiger();
    let tmp = tempfile::tempdir().unwrap();
    let driver = build_driver(&wt, tmp.path());
    let db = tmp.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let trace = tmp.path().join("run.trace");
    let stderr = run(Command::new(&driver)
        .arg(&db)
        .args(TRACED_RUN)
        .envs(shim_env(&db, &trace)));
    eprintln!("{stderr}");
    let events = read_trace(&trace);
    check_files_match_trace(&db, &events);
    let found = commits(&events);
    let theirs = wiredtiger_checkpoints(&db);
    eprintln!("checkpoints: shim {found}, WiredTiger {theirs}");
    assert!(theirs >= 10, "only {theirs} checkpoints: run longer");
    assert_eq!(found, theirs);
}

/// One `pwrite64` as strace saw it: path, offset, length, and the hint its inode had.
type HintedWrite = (String, u64, u64, u64);

fn hint_value(name: &str) -> u64 {
    match name {
        "RWH_WRITE_LIFE_NOT_SET" => 0,
        "RWH_WRITE_LIFE_NONE" => 1,
        "RWH_WRITE_LIFE_SHORT" => 2,
        "RWH_WRITE_LIFE_MEDIUM" => 3,
        "RWH_WRITE_LIFE_LONG" => 4,
        "RWH_WRITE_LIFE_EXTREME" => 5,
        other => panic!("unknown hint {other}"),
    }
}

/// Reads a hint from an `F_SET_RW_HINT` line. strace 6.1 (Debian 12) does not decode the
/// command: it prints `0x40c /* F_??? */` and the argument's address. The shim always passes
/// the address of entry h of its constant table `flashdoc_shim_rw_hints` (entry h holds h),
/// so the hint is the address's index in that table: `table` is the table's address in the
/// traced process. A strace that decodes it prints `[RWH_WRITE_LIFE_SHORT]`.
fn hint_of(line: &str, table: u64) -> Option<u64> {
    if line.contains("F_SET_RW_HINT") {
        let name = line.split('[').nth(1)?.split(']').next()?;
        return Some(hint_value(name));
    }
    if !line.contains(", 0x40c /* F_??? */, ") {
        return None;
    }
    let addr = line.split("0x40c /* F_??? */, 0x").nth(1)?;
    let digits = addr
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(addr.len());
    let addr = u64::from_str_radix(&addr[..digits], 16).unwrap();
    let offset = addr
        .checked_sub(table)
        .expect("a hint pointer outside the shim's table");
    assert!(
        offset % 8 == 0 && offset / 8 < 6,
        "a hint pointer outside the shim's table: {line}"
    );
    Some(offset / 8)
}

/// The address of `flashdoc_shim_rw_hints` in the traced process: the shim's load address
/// (strace's first `mmap` of it, at file offset 0) plus the symbol's value (`nm`).
fn hint_table_address(log: &str, shim: &Path) -> u64 {
    let so = shim.to_str().unwrap();
    let base = log
        .lines()
        .find(|l| l.contains("mmap(") && l.contains(&format!("<{so}>, 0)")))
        .and_then(|l| l.rsplit("= 0x").next())
        .map(|a| u64::from_str_radix(a.trim(), 16).unwrap())
        .expect("strace logs the shim's mapping");
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(shim)
        .output()
        .unwrap();
    let symbols = String::from_utf8(nm.stdout).unwrap();
    let value = symbols
        .lines()
        .find(|l| l.ends_with(" flashdoc_shim_rw_hints"))
        .map(|l| u64::from_str_radix(l.split(' ').next().unwrap(), 16).unwrap())
        .expect("the shim exports flashdoc_shim_rw_hints");
    base + value
}

/// Whether a completed strace line (`…) = 4096`, padded or not) returned without an error.
fn succeeded(line: &str) -> bool {
    let result = line.rsplit(')').next().unwrap_or("").trim_start();
    result.starts_with("= ") && !result.starts_with("= -1")
}

/// A call strace logged, from its entry line.
#[derive(Debug)]
enum Call {
    /// A `pwrite64`: its path, offset, length, and its path's hint and hint-change count at
    /// entry.
    Write(String, u64, u64, Option<u64>, u64),
    Hint(String, u64),
    Rename(String, String),
}

/// The two quoted strings of a `rename("old", "new")` line, `dir/./name` as `dir/name`.
fn rename_paths(line: &str, db: &str) -> Option<(String, String)> {
    let quoted: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
    let rel = |p: &str| {
        p.replace("/./", "/")
            .strip_prefix(&format!("{db}/"))
            .map(str::to_string)
    };
    Some((rel(quoted.first()?)?, rel(quoted.get(1)?)?))
}

/// Parses an `strace -f -y -s 0 -e trace=fcntl,pwrite64,mmap,rename` log of files under
/// `db`. A write's hint is the last `F_SET_RW_HINT` on its file that completed before the
/// write entered (a rename carries the hint to the new name: it is the inode's); it is an
/// error if another one on that file completes before the write returns.
fn hinted_writes(log: &str, db: &str, table: u64) -> Vec<HintedWrite> {
    // Per path: (hint, how many hint changes so far).
    let mut hints: HashMap<String, (Option<u64>, u64)> = HashMap::new();
    // Per thread: the call in flight.
    let mut pending: HashMap<String, Call> = HashMap::new();
    let mut out = Vec::new();
    let prefix = format!("<{db}/");
    let path_of = |args: &str| -> Option<String> {
        let start = args.find(&prefix)? + prefix.len();
        let end = start + args[start..].find('>')?;
        Some(args[start..end].to_string())
    };
    let mut finish = |call: Call, hints: &mut HashMap<String, (Option<u64>, u64)>| match call {
        Call::Write(path, off, len, at_entry, changes) => {
            let now = hints.get(&path).map_or(0, |e| e.1);
            assert_eq!(
                now, changes,
                "{path}: the hint changed during the write at {off}"
            );
            let h = at_entry.unwrap_or_else(|| panic!("{path}: write at {off} before any hint"));
            out.push((path, off, len, h));
        }
        Call::Hint(path, h) => {
            let e = hints.entry(path).or_default();
            *e = (Some(h), e.1 + 1);
        }
        Call::Rename(from, to) => {
            if let Some(e) = hints.remove(&from) {
                hints.insert(to, e);
            }
        }
    };
    for line in log.lines() {
        let (pid, rest) = line.split_once(' ').unwrap();
        let rest = rest.trim_start();
        if rest.starts_with("<...") {
            if let Some(call) = pending.remove(pid) {
                assert!(succeeded(rest), "failed call: {line}");
                finish(call, &mut hints);
            }
            continue;
        }
        let call = if rest.starts_with("rename") {
            let Some((from, to)) = rename_paths(rest, db) else {
                continue;
            };
            Call::Rename(from, to)
        } else if rest.starts_with("pwrite64(") {
            // pwrite64(9</db/docs.wt>, ""..., 4096, 12288) = 4096
            let Some(path) = path_of(rest) else {
                continue;
            };
            let args: Vec<&str> = rest.split(", ").collect();
            let len: u64 = args[2].parse().unwrap();
            let off: u64 = args[3].split([')', ' ']).next().unwrap().parse().unwrap();
            let (h, changes) = hints.get(&path).copied().unwrap_or_default();
            Call::Write(path, off, len, h, changes)
        } else if let Some(h) = rest
            .strip_prefix("fcntl(")
            .and_then(|_| hint_of(rest, table))
        {
            let Some(path) = path_of(rest) else {
                continue;
            };
            Call::Hint(path, h)
        } else {
            continue;
        };
        if rest.ends_with("<unfinished ...>") {
            pending.insert(pid.to_string(), call);
        } else {
            assert!(succeeded(rest), "failed call: {line}");
            finish(call, &mut hints);
        }
    }
    assert!(pending.is_empty(), "calls never returned: {pending:?}");
    out
}

#[test]
#[ignore = "needs WiredTiger (FLASHDOC_WIREDTIGER) and strace; scripts/test.sh runs it"]
fn with_direct_io_every_write_carries_the_hint_the_policy_chose() {
    let wt = wiredtiger();
    let tmp = tempfile::tempdir().unwrap();
    let driver = build_driver(&wt, tmp.path());
    let work = direct_io_dir();
    let db = work.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let db = db.canonicalize().unwrap();
    let trace = tmp.path().join("hints.trace");
    let log = tmp.path().join("strace.log");
    let mut cmd = Command::new("strace");
    cmd.args([
        "-f",
        "-y",
        "-s",
        "0",
        "-e",
        "trace=fcntl,pwrite64,mmap,rename",
        "-o",
    ])
    .arg(&log);
    // -E: the variables reach the driver only, not strace itself.
    let mut env = shim_env(&db, &trace);
    env.push(("FLASHDOC_SHIM_POLICY".into(), "filelog".into()));
    for (k, v) in env {
        cmd.arg("-E").arg(format!("{k}={v}"));
    }
    cmd.arg(&driver).arg(&db).args(HINTED_RUN);
    run(&mut cmd);
    let log = std::fs::read_to_string(&log).unwrap();
    let table = hint_table_address(&log, &shim());
    let mut seen = hinted_writes(&log, db.to_str().unwrap(), table);
    // The trace's writes, each with the stream its policy chose, named as at the write.
    let mut names: HashMap<FileId, String> = HashMap::new();
    let mut chosen: Vec<HintedWrite> = Vec::new();
    for ev in read_trace(&trace) {
        match ev {
            Event::FileCreate { file, name, .. } | Event::FileRename { file, name, .. } => {
                names.insert(file, name);
            }
            Event::Write(w) => chosen.push((
                names[&w.file].clone(),
                w.offset,
                w.len as u64,
                w.stream as u64,
            )),
            _ => {}
        }
    }
    assert!(seen.len() > 1000, "only {} writes", seen.len());
    seen.sort();
    chosen.sort();
    assert_eq!(
        seen.len(),
        chosen.len(),
        "strace and the trace count the same writes"
    );
    let differ = seen.iter().zip(&chosen).find(|(a, b)| a != b);
    assert!(
        differ.is_none(),
        "a write's hint is not the policy's: strace vs trace {differ:?}"
    );
    let mut per_file: BTreeMap<&str, BTreeMap<u64, u64>> = BTreeMap::new();
    for (path, _, _, hint) in &seen {
        *per_file.entry(path).or_default().entry(*hint).or_default() += 1;
    }
    let data: BTreeMap<_, _> = per_file
        .iter()
        .filter(|(p, _)| p.ends_with(".wt"))
        .collect();
    eprintln!("writes per hint in the .wt files: {data:?}");
    let split = per_file
        .iter()
        .filter(|(_, hints)| hints.len() >= 2)
        .count();
    assert!(
        split >= 1,
        "no file took writes of two streams: {per_file:?}"
    );
}
