//! A tiny experiment end to end: results files with every parameter, plots that exist, and a
//! report that references every plot written.

use std::collections::BTreeSet;

#[test]
fn a_tiny_streams_experiment_writes_results_plots_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut exp = lab::experiment::find("streams-quick").unwrap();
    exp.workloads = vec!["ycsb-update-only".into(), "linkbench-update-only".into()];
    exp.policies = vec![
        "none".into(),
        "dsm".into(),
        "filelog".into(),
        "oracle".into(),
    ];
    exp.seeds = vec![2, 3];
    // Aging the device and long warm-ups dominate a debug-build run; the lab's own runs do both.
    exp.precondition = "none".into();
    exp.warmup_capacities = 1.0;
    let out = dir.path().join("x");
    let html = lab::run_experiment(exp.clone(), Some("tiny"), &out, true, None).unwrap();
    assert!(html.ends_with("report.html"));

    results_hold_every_parameter(&out);
    every_engine_keeps_the_reference_intervals(&out.join("points"));

    the_report_references_every_plot_written(&out, &html);
    // A report compared with an earlier run sets the headlines side by side.
    let html2 = lab::run_experiment(exp.clone(), Some("tiny"), &out, true, Some(&out)).unwrap();
    let md2 = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md2.contains("beside the reference run"),
        "{}",
        html2.display()
    );

    a_second_run_resumes(&exp, &out);
    older_engine_runs_are_made_again(exp, &out);
}

/// results.csv has a column per parameter and a row per point; results.json holds the
/// experiment, the scale and sane device figures.
fn results_hold_every_parameter(out: &std::path::Path) {
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "workload",
        "policy",
        "waf",
        "modeled_ops_s",
        "host_ops_s",
        "db_mb",
        "trim",
        "ssd",
        "device_fill",
        "allocation",
        "dirty_pct",
        "seed",
        "flash_writes_per_op",
    ] {
        assert!(head.contains(&col), "results.csv lacks {col}");
    }
    assert_eq!(
        lines.count(),
        // Two workloads × two allocations at two dirty budgets (streams-quick runs the
        // factorial's four engines) × two seeds × four policies.
        2 * 4 * 2 * 4,
        "one row per workload × engine × seed × policy"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["experiment"]["name"], "streams-quick");
    assert_eq!(json["scale"]["ycsb_records"], 3000);
    assert_eq!(json["mode"], "trace-replay");
    for p in json["points"].as_array().unwrap() {
        let waf = p["device"]["waf"].as_f64().unwrap();
        assert!(waf >= 1.0, "WAF below 1: {p}");
        assert!(p["device"]["modeled_ops_s"].as_f64().unwrap() > 0.0);
    }
}

/// The report references exactly the plots written, each with its SVG twin, inlines them all
/// and quotes the seeds.
fn the_report_references_every_plot_written(out: &std::path::Path, html: &std::path::Path) {
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let referenced: BTreeSet<String> = lab::report::referenced_plots(&md).into_iter().collect();
    let written: BTreeSet<String> = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".png"))
        .collect();
    assert!(!written.is_empty());
    assert_eq!(
        referenced, written,
        "the report references exactly the plots written"
    );
    for n in &written {
        assert!(
            out.join(n).with_extension("svg").exists(),
            "{n} has no SVG twin"
        );
    }
    let html = std::fs::read_to_string(html).unwrap();
    assert_eq!(
        html.matches("data:image/png;base64,").count(),
        written.len(),
        "report.html inlines every plot"
    );
    assert!(
        md.contains("paper:"),
        "the report quotes the seeds' published values"
    );
    assert!(
        md.contains("Flash page writes per operation"),
        "the report opens with flash page writes per operation"
    );
    assert!(
        md.contains("gap"),
        "the report measures the gap to the oracle"
    );
}

fn a_second_run_resumes(exp: &lab::experiment::Experiment, out: &std::path::Path) {
    // A second run resumes: nothing is recomputed (the engine run's file is untouched).
    let engine_file = std::fs::read_dir(out.join("points"))
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("engine-"))
        .unwrap()
        .path();
    let before = std::fs::metadata(&engine_file).unwrap().modified().unwrap();
    lab::run_experiment(exp.clone(), Some("tiny"), out, true, None).unwrap();
    assert_eq!(
        std::fs::metadata(&engine_file).unwrap().modified().unwrap(),
        before
    );
}

fn older_engine_runs_are_made_again(exp: lab::experiment::Experiment, out: &std::path::Path) {
    // Runs that an engine writing other traces made (an older TRACE_VERSION) are run again,
    // and so are their replays: a resumed experiment never mixes the two.
    let points = out.join("points");
    let version = |p: &std::path::Path| -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v["trace_version"].as_u64().unwrap()
    };
    for e in std::fs::read_dir(&points).unwrap() {
        let p = e.unwrap().path();
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("trace_version");
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    }
    lab::run_experiment(exp, Some("tiny"), out, true, None).unwrap();
    for e in std::fs::read_dir(&points).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(
            version(&p),
            lab::run::TRACE_VERSION as u64,
            "{} was not made again",
            p.display()
        );
    }
}

#[test]
fn every_experiment_kind_runs_at_tiny_scale() {
    for name in [
        "scale",
        "write-shares",
        "io-pattern",
        "compression",
        "trim",
        "leaf-size",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut exp = lab::experiment::find(name).unwrap();
        exp.workloads.truncate(1);
        exp.policies.truncate(2);
        exp.trims.truncate(3);
        exp.ssds.truncate(1);
        exp.seeds.truncate(1);
        exp.precondition = "none".into();
        exp.warmup_capacities = 1.0;
        if name == "scale" {
            // Two scales, the second cut short so a debug build finishes in seconds.
            exp.scales = vec!["tiny".into(), "quick".into()];
            exp.run_factor = 0.02;
            exp.allocations.truncate(1);
        }
        let html = lab::run_experiment(exp, Some("tiny"), dir.path(), true, None)
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(
            !lab::report::referenced_plots(&md).is_empty(),
            "{name} has no plot"
        );
        assert!(html.exists());
        if name == "io-pattern" {
            // The report reads result files only: it is written again without the traces.
            std::fs::remove_dir_all(dir.path().join("traces")).unwrap();
            assert!(dir.path().join(lab::io_pattern::FILE).exists());
            lab::rewrite_report(dir.path(), None).unwrap();
            let again = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
            let io = |md: &str| {
                let s = md.split("## Where writes land over time").nth(1).unwrap();
                s.split("\n## ").next().unwrap().to_string()
            };
            assert!(io(&again).contains(".png"), "{again}");
            assert_eq!(
                io(&again),
                io(&md),
                "the io-pattern section from its result files"
            );
        }
    }
}

/// The sweep run of each point (the co-design engine, with its dirty budget) had its
/// checkpoints begun by journal bytes at the best-fit run's mean interval, so both took the
/// same checkpoints over the same operations (docs/lab.md, "Equal intervals").
fn every_engine_keeps_the_reference_intervals(points: &std::path::Path) {
    use lab::run::{CheckpointTrigger, EngineRun};
    let runs: Vec<EngineRun> = std::fs::read_dir(points)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("engine-")
        })
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    // Two workloads × four engines (both allocations at both dirty budgets) × two seeds.
    assert_eq!(runs.len(), 2 * 4 * 2, "workload × engine × seed");
    let is_reference =
        |r: &EngineRun| r.allocation == "best" && r.dirty_pct == lab::experiment::ENGINE_DIRTY_PCT;
    for sweep in runs.iter().filter(|r| !is_reference(r)) {
        let reference = runs
            .iter()
            .find(|r| is_reference(r) && (&r.workload, r.seed) == (&sweep.workload, sweep.seed))
            .unwrap();
        let (r, s) = (reference.intervals.unwrap(), sweep.intervals.unwrap());
        assert!(matches!(
            reference.checkpoint_trigger,
            Some(CheckpointTrigger::WrittenBytes(n)) if n == reference.sizing.checkpoint_every_bytes
        ));
        assert_eq!(
            sweep.checkpoint_trigger,
            Some(CheckpointTrigger::JournalBytes(
                r.journal_bytes_per_checkpoint().unwrap()
            ))
        );
        // A trigger fires at an operation's end, so an interval holds the reference's mean
        // operations to within one: over the run, that is a checkpoint per interval's
        // operations, and one for where the run ends.
        let ops = reference
            .run
            .metrics
            .values()
            .map(|m| m.operations)
            .sum::<u64>();
        let slack = 1 + r.checkpoints * r.checkpoints / ops;
        eprintln!(
            "{} seed {}: {} checkpoints on the reference, {} on the sweep (slack {slack})",
            sweep.workload, sweep.seed, r.checkpoints, s.checkpoints
        );
        assert!(
            s.checkpoints.abs_diff(r.checkpoints) <= slack && r.checkpoints > 1,
            "{} seed {}: {} checkpoints on the reference, {} on the sweep",
            sweep.workload,
            sweep.seed,
            r.checkpoints,
            s.checkpoints
        );
    }
}
