//! The compression experiment on the in-place engine (MMAPv1's design) beside uncompressed
//! WiredTiger, end to end at a small scale: both engines measured as the chapter measures
//! them, the in-place run traced and replayed, and the report setting both beside the
//! chapter's Tables 10.3–10.5.

use lab::experiment::{COPY_ON_WRITE, IN_PLACE};
use lab::run::EngineRun;

#[test]
fn mmapv1_runs_beside_uncompressed_wiredtiger_and_the_report_sets_both_beside_the_chapter() {
    let dir = tempfile::tempdir().unwrap();
    let mut exp = lab::experiment::find("compression").unwrap();
    exp.compressors = vec!["none".into()];
    exp.precondition = "none".into();
    exp.warmup_capacities = 1.0;
    lab::run_experiment(exp, Some("tiny"), dir.path(), true, None).unwrap();

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();
    let runs: Vec<EngineRun> = serde_json::from_value(doc["engine_runs"].clone()).unwrap();
    let engines: Vec<&str> = runs.iter().map(|r| r.engine.as_str()).collect();
    assert_eq!(engines, [COPY_ON_WRITE, IN_PLACE]);
    let (wt, mm) = (&runs[0], &runs[1]);
    let docs = wt.scale.chapter10_docs;
    for run in [wt, mm] {
        assert_eq!(
            run.load.operations, docs,
            "{}: the same documents",
            run.engine
        );
        for k in [
            "startup_s",
            "insert_s",
            "shutdown_s",
            "restart_s",
            "read_job_s",
            "restart_shutdown_s",
            "cold_read_s",
            "warm_read_s",
            "read_pass_16_s",
        ] {
            let v = run.extra[k];
            assert!(v > 0.0 && v < 60.0, "{} {k} = {v}", run.engine);
        }
        assert!(run.extra["du_bytes"] > 0.0, "{}", run.engine);
        assert!(run.extra["written_journal_bytes"] > 0.0, "{}", run.engine);
    }
    assert_eq!(
        wt.extra["doc_bytes"], mm.extra["doc_bytes"],
        "both engines inserted the same bytes of BSON"
    );
    in_place_space_is_measured(mm);
    the_in_place_run_is_a_point(dir.path());
    the_report_sets_both_beside_the_chapter(dir.path());
}

/// The in-place run's padding and files, from the engine's own counters and its files.
fn in_place_space_is_measured(mm: &EngineRun) {
    let records = mm.extra["record_bytes_allocated"];
    let values = mm.extra["value_bytes_allocated"];
    // A record is the power of two at or above its value and 8-byte header, at least 32
    // bytes: under twice the value plus 32 for each of the collection's and the _id index's
    // records (and the catalog's few).
    let entries = 2.0 * mm.load.operations as f64 + 16.0;
    assert!(
        values >= mm.extra["doc_bytes"]
            && records > values
            && records < 2.0 * values + 32.0 * entries,
        "records {records} for values {values}"
    );
    // Data files are allocated whole (1 MiB doubling), written only in part.
    let data = mm.db_bytes as f64;
    assert!(data >= records, "data files {data} hold records {records}");
    assert!(mm.extra["data_files_allocated_bytes"] <= data);
    assert_eq!(mm.compressor, "none");
    assert_eq!(mm.allocation, lab::run::IN_PLACE_ALLOCATION);
    assert!(mm.trace.exists() && mm.events > 0);
}

fn the_in_place_run_is_a_point(out: &std::path::Path) {
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(
        rows[1].contains(",none,in-place,–,none,"),
        "the in-place point: no compressor, no dirty budget: {}",
        rows[1]
    );
}

fn the_report_sets_both_beside_the_chapter(out: &std::path::Path) {
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "| measure | MMAPv1 (in place) | WT none |",
        "Table 10.3 beside ours",
        "Table 10.4 beside ours",
        "Table 10.5 beside ours",
        // The chapter's own figures and the ratios computed from them.
        "| Disk use (MB, du of the dbPath), chapter | 4128.04 | 560.56 |",
        "| Disk use (MB, du of the dbPath), chapter ÷ WT | 7.36 | 1.00 |",
        "| 1 | ",
        "17.88",
        "What differs between the engines and cannot be held equal",
        "**Padding.**",
        "**Journal.**",
    ] {
        assert!(md.contains(want), "the report lacks {want:?}:\n{md}");
    }
    // Our ratio row divides by our uncompressed WiredTiger: 1.00 in its own column.
    let ratio = md
        .lines()
        .find(|l| l.starts_with("| Insert job (s), ours ÷ WT none |"))
        .unwrap();
    let cells: Vec<&str> = ratio.split('|').map(str::trim).collect();
    assert_eq!(cells[3], "1.00", "{ratio}");
    assert!(cells[2].parse::<f64>().unwrap() > 0.0, "{ratio}");
    // The report is made again from the results alone.
    lab::rewrite_report(out, None).unwrap();
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), md);
}
