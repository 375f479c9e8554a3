//! The workload drivers over the wire against a real `flashdoc serve` process: the same YCSB
//! load + run in process and over the wire ends with identical data, and LinkBench runs over
//! the wire with correct counts. The server listens on 127.0.0.1 on a free port and is
//! killed at the end of each test.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use workload::linkbench::{self, LinkBenchConfig, Mix};
use workload::measure::Progress;
use workload::store::{collection_checksum, InProc, Query, Store, Wire};
use workload::ycsb::{self, Workload, YcsbConfig};

struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_flashdoc"))
            .args(["serve", "--port", "0", "--bind-ip", "127.0.0.1", "--dbpath"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting flashdoc serve");
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("server exited before listening")
                .unwrap();
            if let Some(addr) = line.split("waiting for connections on ").nth(1) {
                break addr.rsplit(':').next().unwrap().trim().parse().unwrap();
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Server {
            child,
            port,
            _dir: dir,
        }
    }

    fn uri(&self, db: &str) -> String {
        format!("mongodb://127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ycsb_both(cfg: &YcsbConfig, store: &dyn Store) -> (u64, u64) {
    ycsb::prepare_load(cfg, store).unwrap();
    let load = ycsb::run_load(cfg, store, Progress::Hidden).unwrap();
    assert_eq!(load.operations, cfg.record_count);
    let run = ycsb::run_ops(cfg, store, Progress::Hidden).unwrap();
    for (name, m) in &run.metrics {
        assert!(
            !name.ends_with("-FAILED"),
            "{}: {name} {m:?}",
            store.describe()
        );
        assert_eq!(m.returns.get("ERROR"), None, "{name}");
    }
    collection_checksum(store, &cfg.table).unwrap()
}

#[test]
fn ycsb_in_process_and_over_the_wire_end_with_identical_data() {
    let server = Server::start();
    for w in [
        Workload::A,
        Workload::UpdateOnly,
        Workload::D,
        Workload::E,
        Workload::F,
    ] {
        let mut cfg = YcsbConfig::workload(w, 300, 600);
        cfg.seed = 9;
        let wire = Wire::connect(&server.uri("ycsb"), "ycsb").unwrap();
        let a = ycsb_both(&cfg, &wire);
        let local = InProc::in_memory("ycsb").unwrap();
        let b = ycsb_both(&cfg, &local);
        assert_eq!(a, b, "{w:?}: wire vs inproc");
        assert!(a.0 >= 300);
    }
}

#[test]
fn linkbench_over_the_wire_keeps_counts_correct() {
    let server = Server::start();
    let wire = Wire::connect(&server.uri("linkbench"), "linkbench").unwrap();
    let cfg = LinkBenchConfig {
        maxid1: 501,
        mix: Mix::Original,
        requests: Some(1500),
        requesters: 2,
        loaders: 2,
        nlinks_cap: Some(100),
        ..LinkBenchConfig::default()
    };
    linkbench::prepare_load(&wire).unwrap();
    let load = linkbench::run_load(&cfg, &wire, Progress::Hidden).unwrap();
    assert_eq!(load.counters["nodes"], 500);
    let run = linkbench::run_ops(&cfg, &wire, Progress::Hidden).unwrap();
    assert_eq!(run.operations, 1500);
    for name in run.metrics.keys() {
        assert!(!name.ends_with("-FAILED"), "{name}: {:?}", run.counters);
    }
    // Counts equal the visible links per (id1, link_type).
    let links = wire.find(linkbench::LINK, &Query::default()).unwrap();
    let mut visible = std::collections::HashMap::new();
    for l in &links {
        let k = (l.get_i64("id1").unwrap(), l.get_i64("link_type").unwrap());
        *visible.entry(k).or_insert(0i64) += i64::from(l.get_i32("visibility").unwrap() == 1);
    }
    for c in wire.find(linkbench::COUNT, &Query::default()).unwrap() {
        let k = (c.get_i64("id").unwrap(), c.get_i64("link_type").unwrap());
        assert_eq!(
            c.get_i64("count").unwrap(),
            visible.get(&k).copied().unwrap_or(0)
        );
    }
}

/// `--zipfian-classes` is enforced: it runs with `--distribution zipfian-classes`, and is
/// refused with any other distribution or more classes than records.
#[test]
fn zipfian_classes_option_is_enforced_or_refused() {
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_flashdoc"))
            .args([
                "bench",
                "ycsb",
                "--workload",
                "update-only",
                "--records",
                "500",
            ])
            .args(["--ops", "1000", "--quiet"])
            .args(extra)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = run(&[
        "--distribution",
        "zipfian-classes",
        "--zipfian-classes",
        "50",
    ]);
    assert!(ok, "{err}");
    let (ok, err) = run(&["--zipfian-classes", "50"]);
    assert!(
        !ok && err.contains("--distribution zipfian-classes"),
        "{err}"
    );
    let (ok, err) = run(&["--distribution", "zipfian-classes"]);
    assert!(
        !ok && err.contains("between 1 and insertcount (500)"),
        "{err}"
    );
}
