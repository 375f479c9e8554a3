//! engine-bench's stall instruments: throughput in one-second windows of the run phase, the
//! checkpoints' spans, and whether a checkpoint overlapped the worst window. A large dirty
//! budget lets a checkpoint write most of the cache at once; the worst window against the
//! median one is how a stall shows (docs/engine.md, "Checkpoint stalls").

use serde_json::json;

/// Operations done by a time (seconds since the run began), sampled as the run goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at_s: f64,
    pub ops: u64,
}

/// One checkpoint's span in seconds since the run began.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub start_s: f64,
    pub end_s: f64,
}

/// Operations per whole second of the run: window k counts what was done between the last
/// sample at or before k s and the last at or before k + 1 s. A partial last second is left
/// out (it would look like a stall).
pub fn windows(samples: &[Sample]) -> Vec<u64> {
    let Some(last) = samples.last() else {
        return Vec::new();
    };
    let done_by = |t: f64| {
        samples
            .iter()
            .take_while(|s| s.at_s <= t + 1e-9)
            .last()
            .map_or(0, |s| s.ops)
    };
    (0..last.at_s.floor() as u64)
        .map(|k| done_by(k as f64 + 1.0) - done_by(k as f64))
        .collect()
}

/// The checkpoints completed during the run, from `(at_s, completed, last_ms)` readings of the
/// engine's counters: each time `completed` grows, the last checkpoint ended by `at_s` and
/// took `last_ms` (one span per reading; the sampling period bounds the error).
pub fn checkpoint_spans(readings: &[(f64, u64, u64)]) -> Vec<Span> {
    readings
        .windows(2)
        .filter(|w| w[1].1 > w[0].1)
        .map(|w| {
            let (end_s, _, ms) = w[1];
            Span {
                start_s: (end_s - ms as f64 / 1e3).max(0.0),
                end_s,
            }
        })
        .collect()
}

/// The report: every window, the worst and the median window (ops/s), their ratio, and
/// whether a checkpoint overlapped the worst window.
pub fn report(windows: &[u64], checkpoints: &[Span]) -> serde_json::Value {
    if windows.is_empty() {
        return json!({"windows": [], "checkpoints": []});
    }
    let (worst_at, worst) = windows
        .iter()
        .copied()
        .enumerate()
        .min_by_key(|&(_, n)| n)
        .expect("not empty");
    let mut sorted = windows.to_vec();
    sorted.sort_unstable();
    let median = if sorted.len() % 2 == 1 {
        sorted[sorted.len() / 2] as f64
    } else {
        (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) as f64 / 2.0
    };
    let (w0, w1) = (worst_at as f64, worst_at as f64 + 1.0);
    let overlapped = checkpoints.iter().any(|c| c.start_s < w1 && c.end_s > w0);
    json!({
        "windows_ops_per_s": windows,
        "worst_window_ops_per_s": worst,
        "worst_window_start_s": worst_at,
        "median_window_ops_per_s": median,
        "worst_over_median": if median > 0.0 { worst as f64 / median } else { 0.0 },
        "checkpoint_overlapped_worst_window": overlapped,
        "checkpoints": checkpoints.iter().map(|c| json!({"start_s": c.start_s, "end_s": c.end_s})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_s: f64, ops: u64) -> Sample {
        Sample { at_s, ops }
    }

    #[test]
    fn windows_count_whole_seconds_and_drop_the_partial_last() {
        let samples = [
            s(0.5, 50),
            s(1.0, 100),
            s(1.5, 150),
            s(2.0, 160),
            s(2.5, 200),
            s(3.0, 300),
            s(3.4, 340),
        ];
        assert_eq!(windows(&samples), vec![100, 60, 140]);
        assert!(windows(&[]).is_empty());
    }

    #[test]
    fn the_worst_window_and_a_checkpoint_over_it() {
        let w = [100, 60, 140, 120];
        let spans = checkpoint_spans(&[(0.0, 0, 0), (1.0, 0, 0), (1.9, 1, 700), (3.0, 1, 700)]);
        assert_eq!(spans.len(), 1);
        assert!((spans[0].start_s - 1.2).abs() < 1e-9 && spans[0].end_s == 1.9);
        let r = report(&w, &spans);
        assert_eq!(r["worst_window_ops_per_s"], 60);
        assert_eq!(r["worst_window_start_s"], 1);
        assert_eq!(r["median_window_ops_per_s"], 110.0);
        assert_eq!(r["checkpoint_overlapped_worst_window"], true);
        let elsewhere = [Span {
            start_s: 2.1,
            end_s: 2.9,
        }];
        assert_eq!(
            report(&w, &elsewhere)["checkpoint_overlapped_worst_window"],
            false
        );
        assert_eq!(report(&[5, 1, 9], &[])["median_window_ops_per_s"], 5.0);
    }
}
