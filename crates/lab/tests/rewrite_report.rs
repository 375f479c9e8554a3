//! `flashdoc lab report`: a committed run's report written again from its results.json. The
//! committed medium run (two TRIM conditions on the same traces) is the input: its claims
//! table must stand beside the seeds' conditions, and every reading in it must follow from the
//! numbers it prints.

use std::path::Path;

fn committed(run: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results")
        .join(run)
}

/// The claims table's rows: (workload, paper %, ours %, direction, cause).
fn claim_rows(md: &str) -> Vec<(String, f64, f64, String, String)> {
    let section = md
        .split("## The seeds' published numbers beside ours")
        .nth(1)
        .expect("a claims section");
    let pct = |s: &str| -> f64 {
        s.trim()
            .split('%')
            .next()
            .unwrap()
            .trim_start_matches('+')
            .parse()
            .unwrap()
    };
    section
        .lines()
        .skip_while(|l| !l.starts_with("| paper:"))
        .take_while(|l| l.starts_with("| paper:"))
        .map(|l| {
            let c: Vec<&str> = l.split(" | ").collect();
            (
                c[1].to_string(),
                pct(c[2]),
                pct(c[3]),
                c[4].to_string(),
                c[5].trim_end_matches(" |").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_committed_run_is_reported_again_with_its_claims_at_the_seeds_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let src = committed("streams-reference");
    for f in ["results.json", "experiment.yaml"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let html = lab::rewrite_report(dir.path(), None).unwrap();
    assert!(html.ends_with("report.html"));
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        md.contains("under the seeds' conditions (no TRIM, no discard)"),
        "the claims stand beside the seeds' conditions, not the TRIM run"
    );
    // The WAF of every policy per engine is in the secondary table (the headline's own tables
    // hold the engine settings equal).
    assert_eq!(
        md.matches("### Write amplification, GC copies and device write and read p99")
            .count(),
        2,
        "a WAF table per TRIM condition"
    );
    assert_eq!(
        md.matches("### At equal engine settings — flash mode's")
            .count(),
        2,
        "an equal-settings headline per TRIM condition"
    );
    let rows = claim_rows(&md);
    assert!(rows.len() >= 20, "{} claim rows", rows.len());
    for (w, paper, ours, direction, cause) in &rows {
        // A difference always has a cause; agreement is the same direction within 1.25x.
        let agrees = direction == "right"
            && ours.abs() >= paper.abs() / 1.25
            && ours.abs() <= paper.abs() * 1.25;
        assert_eq!(cause == "—", agrees, "{w}: {paper} vs {ours}: {cause}");
        // "the headroom exists" only where the oracle's lead over none is real.
        if let Some(rest) = cause.strip_prefix("the oracle is ") {
            let head: f64 = rest.split('%').next().unwrap().parse().unwrap();
            assert!(head >= 1.0, "{w}: headroom claimed at {head}%: {cause}");
        }
        if ours.abs() > paper.abs() * 1.25 && direction == "right" {
            assert!(cause.contains("larger than the paper's"), "{w}: {cause}");
        }
    }
    // A report needs a run's results.
    let empty = tempfile::tempdir().unwrap();
    let err = lab::rewrite_report(empty.path(), None).unwrap_err();
    assert!(format!("{err:#}").contains("results.json"), "{err:#}");
}

/// Under safe TRIM the oracle has no lead over `none` (WAF 1.00 for every policy): a claims
/// table set beside that condition alone must say there is no headroom, never that it exists.
#[test]
fn claims_beside_a_run_without_headroom_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let src = committed("streams-reference");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("results.json")).unwrap()).unwrap();
    // Keep only the TRIM condition, as if the run had had no other.
    let trims = doc["experiment"]["trims"].as_array().unwrap().clone();
    let trimmed = trims
        .into_iter()
        .find(|t| !t["batch"].is_null())
        .expect("a TRIM condition");
    doc["experiment"]["trims"] = serde_json::json!([trimmed]);
    let points: Vec<serde_json::Value> = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["trim"] != "off")
        .cloned()
        .collect();
    assert!(!points.is_empty());
    doc["points"] = serde_json::Value::Array(points);
    std::fs::write(
        dir.path().join("results.json"),
        serde_json::to_string(&doc).unwrap(),
    )
    .unwrap();
    lab::rewrite_report(dir.path(), None).unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("under TRIM 20000"), "the condition is named");
    let rows = claim_rows(&md);
    assert!(!rows.is_empty());
    for (w, _, _, _, cause) in &rows {
        assert!(!cause.contains("headroom exists"), "{w}: {cause}");
    }
    assert!(
        rows.iter().any(|r| r.4.starts_with("no headroom")),
        "at least one row explains its difference by the missing headroom"
    );
}
