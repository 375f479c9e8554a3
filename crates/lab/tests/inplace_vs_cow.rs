//! `inplace-vs-cow` end to end at the tiny scale: both designs replayed at two fills, each
//! replay on a device its own files fill as asked (with discard, one erase block per run),
//! the in-place trace announcing its overwrites, and a report with computed conclusions.

use placement::Event;

#[test]
fn a_tiny_inplace_vs_cow_run_compares_both_designs_at_every_fill() {
    let dir = tempfile::tempdir().unwrap();
    let mut exp = lab::experiment::find("inplace-vs-cow").unwrap();
    exp.workloads = vec!["ycsb-update-only".into()];
    exp.policies = vec!["none".into(), "filelog".into()];
    exp.device_fills = vec![0.5, 0.9];
    exp.seeds = vec![2];
    // Aging the device dominates a debug-build run; the lab's own runs warm it up.
    exp.warmup_capacities = 1.0;
    let out = dir.path().join("x");
    let html = lab::run_experiment(exp.clone(), Some("tiny"), &out, true, None).unwrap();
    assert!(html.ends_with("report.html"));

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 2 * 2 * 2, "designs × policies × fills");
    for design in ["sweep", "in-place"] {
        for fill in [0.5, 0.9] {
            let at: Vec<_> = points
                .iter()
                .filter(|p| p["allocation"] == design && p["device_fill"] == fill)
                .collect();
            assert_eq!(at.len(), 2, "{design} at {fill}");
            for p in at {
                let d = &p["device"];
                assert!(d["waf"].as_f64().unwrap() >= 1.0, "{p}");
                assert!(d["flash_writes_per_op"].as_f64().unwrap() > 0.0, "{p}");
                assert!(d["modeled_ops_s"].as_f64().unwrap() > 0.0, "{p}");
            }
        }
    }
    // The fuller device is the smaller one, for each design.
    let gib = |design: &str, fill: f64| {
        points
            .iter()
            .find(|p| p["allocation"] == design && p["device_fill"] == fill)
            .unwrap()["device"]["logical_gib"]
            .as_f64()
            .unwrap()
    };
    for design in ["sweep", "in-place"] {
        assert!(gib(design, 0.9) < gib(design, 0.5), "{design}");
    }
    // Every replay discards what removed files free (the device holds valid what the files
    // hold), and a run's replays share one erase block, whatever the fill.
    for p in points {
        assert_eq!(p["trim"], "off-discard", "{p}");
        assert!(p["ssd"].as_str().unwrap().contains("-ppb"), "{p}");
    }
    for design in ["sweep", "in-place"] {
        let ssd = |fill: f64| {
            points
                .iter()
                .find(|p| p["allocation"] == design && p["device_fill"] == fill)
                .unwrap()["ssd"]
                .clone()
        };
        assert_eq!(ssd(0.5), ssd(0.9), "{design}");
    }
    in_place_trace_kills_what_it_overwrites(&doc);

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        "Where each design wins, and why",
        "WAF as the device fills",
        "Flash page writes per operation",
        "copy-on-write",
        "in-place",
    ] {
        assert!(md.contains(needle), "{needle}: {md}");
    }
    // A second run reuses every saved step and reports the same.
    lab::run_experiment(exp, Some("tiny"), &out, true, None).unwrap();
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), md);
}

/// The in-place run's trace: write-backs are checkpoints, and its run phase overwrites data
/// pages in place, each after a `Free` of the same range.
fn in_place_trace_kills_what_it_overwrites(doc: &serde_json::Value) {
    let run = doc["engine_runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["allocation"] == "in-place")
        .unwrap();
    let trace = std::path::PathBuf::from(run["trace"].as_str().unwrap());
    let events = placement::sim::read_events(&trace).unwrap();
    let commits = events
        .iter()
        .filter(|e| matches!(e, Event::CheckpointCommit { .. }))
        .count();
    assert!(commits >= 2, "write-backs are checkpoints: {commits}");
    let mut overwrites = 0;
    for pair in events.windows(2) {
        if let (Event::Free { file, offset, .. }, Event::Write(w)) = (&pair[0], &pair[1]) {
            if *file == w.file && *offset == w.offset {
                overwrites += 1;
            }
        }
    }
    assert!(overwrites > 0, "the in-place engine overwrites its pages");
}
