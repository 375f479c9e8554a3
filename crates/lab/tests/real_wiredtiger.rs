//! `flashdoc lab run real-wiredtiger` end to end at the tiny scale: a real WiredTiger under the
//! shim and flashdoc's engine on the same workloads, every trace replayed through every policy.
//! Needs `FLASHDOC_WIREDTIGER` (a WiredTiger build directory); `scripts/test.sh` runs it.

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
    for engine in [lab::realwt::WIREDTIGER, "best", "sweep"] {
        for w in &exp.workloads {
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
    assert!(md.contains("| WiredTiger 11.3.1 | flashdoc (best-fit) | flashdoc (sweep) |"));
    // WiredTiger checkpointed in its run phase, by bytes written as the lab's engine does.
    let runs = results["engine_runs"].as_array().unwrap();
    let wiredtiger: Vec<_> = runs
        .iter()
        .filter(|r| r["allocation"] == lab::realwt::WIREDTIGER)
        .collect();
    assert_eq!(wiredtiger.len(), exp.workloads.len() * exp.seeds.len());
    for r in wiredtiger {
        assert!(r["run_checkpoints"].as_u64().unwrap() >= 2, "{r}");
    }
}
