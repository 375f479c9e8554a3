//! `lab run hass` at tiny scale, end to end: every workload and split policy runs on the
//! in-process cluster, the report and its plots are written, and a rerun is identical
//! (the run is deterministic).
use std::path::Path;

fn results(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn hass_runs_at_tiny_scale_and_is_deterministic() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let exp = lab::load_experiment("hass").unwrap();
    let html = lab::run_experiment(exp.clone(), Some("tiny"), a.path(), true, None).unwrap();
    assert!(html.exists());
    let md = std::fs::read_to_string(a.path().join("report.md")).unwrap();
    for plot in lab::report::referenced_plots(&md) {
        assert!(a.path().join(&plot).exists(), "{plot}");
    }
    assert!(
        md.contains("1,538,318"),
        "the seed's numbers are quoted beside ours"
    );
    let ra = results(a.path());
    assert_eq!(
        ra.len(),
        lab::hass::WORKLOADS.len() * lab::hass::POLICIES.len()
    );
    for p in &ra {
        assert!(p["run"]["ops"].as_u64().unwrap() > 0);
        assert!(p["par_median"].as_f64().unwrap() >= 1.0);
        assert!(
            p["chunks"].as_u64().unwrap() >= 2,
            "the collection split: {p}"
        );
    }
    // Rerun one workload into another directory: identical numbers.
    let mut one = exp;
    one.workloads = vec!["hotspot-ordered".into()];
    lab::run_experiment(one, Some("tiny"), b.path(), true, None).unwrap();
    let rb = results(b.path());
    let pick = |v: &[serde_json::Value]| -> Vec<serde_json::Value> {
        v.iter()
            .filter(|p| p["workload"] == "hotspot-ordered")
            .cloned()
            .collect()
    };
    assert_eq!(pick(&ra), rb);
}
