//! `flashdoc lab run real-wiredtiger` end to end at the tiny scale: a real WiredTiger (through
//! its C API, and inside SecantusDB, a MongoDB-wire server) under the shim and flashdoc's engine
//! on the same workloads, every trace replayed through every policy. Needs
//! `FLASHDOC_WIREDTIGER` (a WiredTiger build directory) and SecantusDB (`FLASHDOC_SECANTUSD`,
//! else `scripts/install-secantusdb.sh` installs it from PyPI); `scripts/test.sh` runs it.

use std::process::Command;

#[test]
#[ignore = "needs WiredTiger (FLASHDOC_WIREDTIGER); scripts/test.sh runs it"]
fn real_wiredtiger_reports_every_policy_beside_flashdocs_engine() {
    assert!(
        std::env::var_os("FLASHDOC_WIREDTIGER").is_some(),
        "FLASHDOC_WIREDTIGER must name a WiredTiger build (bash scripts/build-wiredtiger.sh)"
    );
    // The shim, built now (cargo builds no cdylib for another crate's tests).
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "flashdoc-shim"])
        .status()
        .unwrap();
    assert!(status.success());
    let exe = std::env::current_exe().unwrap();
    let shim = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libflashdoc_shim.so");
    std::env::set_var("FLASHDOC_SHIM", &shim);
    let out = tempfile::tempdir().unwrap();
    let exp = lab::experiment::find("real-wiredtiger").unwrap();
    lab::run_experiment(exp.clone(), Some("tiny"), out.path(), true, None).unwrap();

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    let points = results["points"].as_array().unwrap();
    let secantus = lab::secantus::SECANTUSDB;
    for engine in [lab::realwt::WIREDTIGER, secantus, "best", "sweep"] {
        for w in &exp.workloads {
            if engine == lab::realwt::WIREDTIGER && !w.starts_with("ycsb-") {
                continue; // wtdriver runs YCSB only
            }
            for p in &exp.policies {
                let found = points.iter().find(|x| {
                    x["allocation"] == engine && x["workload"] == *w && x["policy"] == *p
                });
                let waf = found.unwrap_or_else(|| panic!("no point for {engine} {w} {p}"))
                    ["device"]["waf"]
                    .as_f64()
                    .unwrap();
                assert!(waf >= 1.0, "{engine} {w} {p}: WAF {waf}");
            }
        }
    }
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        md.contains("| ycsb-update-only | WiredTiger 11.3.1 |"),
        "{md}"
    );
    assert!(md.contains(
        "| WiredTiger 11.3.1 | SecantusDB 0.7.0b3 (WiredTiger) | flashdoc (best-fit) | flashdoc (sweep) |"
    ));
    assert!(md.contains("| linkbench-mixed | dsm | — |"), "{md}");
    // The differences are sentences computed per workload and engine.
    for w in &exp.workloads {
        let line = format!("**{w}, SecantusDB 0.7.0b3 (WiredTiger):** ");
        assert!(md.contains(&line), "{line} in {md}");
    }
    // Both checkpointed in their run phase, by bytes written as the lab's engine does.
    let runs = results["engine_runs"].as_array().unwrap();
    let ycsb = exp
        .workloads
        .iter()
        .filter(|w| w.starts_with("ycsb-"))
        .count();
    for (engine, workloads) in [
        (lab::realwt::WIREDTIGER, ycsb),
        (secantus, exp.workloads.len()),
    ] {
        let of_engine: Vec<_> = runs.iter().filter(|r| r["allocation"] == engine).collect();
        assert_eq!(of_engine.len(), workloads * exp.seeds.len(), "{engine}");
        for r in of_engine {
            assert!(r["run_checkpoints"].as_u64().unwrap() >= 2, "{r}");
            // The run phase starts after the load's writes and checkpoint.
            let eol = r["end_of_load_event"].as_u64().unwrap();
            assert!(eol > 0 && eol < r["events"].as_u64().unwrap(), "{r}");
        }
    }
    // SecantusDB's checkpoints were the lab's (fsync by bytes written), seen by the shim: the
    // shim also sees the closing ones at shutdown (SecantusDB checkpoints, then WiredTiger's
    // close does).
    for r in runs.iter().filter(|r| r["allocation"] == secantus) {
        let asked = r["extra"]["lab_checkpoints"].as_f64().unwrap() as u64;
        let seen = r["run_checkpoints"].as_u64().unwrap();
        assert!(asked >= 2 && seen >= asked && seen <= asked + 2, "{r}");
    }
}
