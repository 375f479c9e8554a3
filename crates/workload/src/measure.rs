//! Measurement and the client-thread runner shared by YCSB and LinkBench.
//!
//! Each client thread keeps its own [`Measurements`]: one HdrHistogram (µs, 3 significant
//! digits, as YCSB's `hdrhistogram` measurement type) per metric name, and per operation the
//! count of each return status (`Return=OK`, `Return=NOT_FOUND`, `Return=ERROR`). A failed
//! operation's latency goes to `<OP>-FAILED`, as YCSB's `DBWrapper` records it. The threads'
//! measurements are merged when the phase ends into a serializable [`PhaseResult`]; a monitor
//! thread samples the shared operation counter every interval for the throughput time series
//! and drives the progress bar.

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An operation's outcome (YCSB's `Status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    NotFound,
    Error,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::NotFound => "NOT_FOUND",
            Status::Error => "ERROR",
        }
    }
}

/// 1 µs to 1 hour at 3 significant digits (YCSB's precision). Fixed bounds: an
/// auto-resizing histogram's `saturating_record` clamps to its current (tiny) range.
fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("a 3-digit histogram")
}

/// One thread's measurements.
#[derive(Default)]
pub struct Measurements {
    hists: BTreeMap<String, Histogram<u64>>,
    returns: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// Free-form counters (e.g. LinkBench's DB-level effects).
    pub counters: BTreeMap<String, u64>,
}

impl Measurements {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one operation of `op` that took `us` µs and ended with `status`.
    pub fn record(&mut self, op: &str, status: Status, us: u64) {
        let metric = if status == Status::Ok {
            op.to_string()
        } else {
            format!("{op}-FAILED")
        };
        self.hists
            .entry(metric)
            .or_insert_with(new_hist)
            .saturating_record(us);
        *self
            .returns
            .entry(op.to_string())
            .or_default()
            .entry(status.name())
            .or_default() += 1;
    }

    /// Times `f` and records it under `op`.
    pub fn time<T>(&mut self, op: &str, f: impl FnOnce() -> (Status, T)) -> T {
        let t0 = Instant::now();
        let (st, v) = f();
        self.record(op, st, t0.elapsed().as_micros() as u64);
        v
    }

    pub fn bump(&mut self, counter: &str, n: u64) {
        *self.counters.entry(counter.to_string()).or_default() += n;
    }

    pub fn merge(&mut self, other: Measurements) {
        for (k, h) in other.hists {
            self.hists
                .entry(k)
                .or_insert_with(new_hist)
                .add(&h)
                .expect("histograms of the same shape");
        }
        for (k, r) in other.returns {
            let e = self.returns.entry(k).or_default();
            for (s, n) in r {
                *e.entry(s).or_default() += n;
            }
        }
        for (k, n) in other.counters {
            *self.counters.entry(k).or_default() += n;
        }
    }

    /// Operations counted under `op` (all statuses).
    pub fn operations(&self, op: &str) -> u64 {
        self.returns.get(op).map_or(0, |r| r.values().sum())
    }
}

/// A metric's latency summary (µs).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OpSummary {
    pub operations: u64,
    pub avg_us: f64,
    pub min_us: u64,
    pub max_us: u64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    /// Return status counts for the operation (only on the operation's own metric).
    pub returns: BTreeMap<String, u64>,
}

/// One sample of the throughput time series.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IntervalSample {
    /// Seconds since the phase started (end of the interval).
    pub t_s: f64,
    /// Operations completed since the phase started.
    pub total_ops: u64,
    /// Throughput in this interval.
    pub ops_per_sec: f64,
}

/// A phase's result: what the JSON report holds and the summary lines are printed from.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseResult {
    /// "load" or "run".
    pub phase: String,
    pub runtime_ms: f64,
    pub operations: u64,
    pub throughput_ops_sec: f64,
    /// Per metric (READ, UPDATE, READ-FAILED, ADD_LINK, …).
    pub metrics: BTreeMap<String, OpSummary>,
    pub intervals: Vec<IntervalSample>,
    /// Free-form counters (LinkBench's DB-level effects: links inserted by updates, …).
    pub counters: BTreeMap<String, u64>,
    /// LinkBench: the measured C:R:U:D shares in percent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub crud_percent: Option<[f64; 4]>,
}

impl PhaseResult {
    pub fn from_measurements(
        phase: &str,
        m: &Measurements,
        operations: u64,
        elapsed: Duration,
        intervals: Vec<IntervalSample>,
    ) -> PhaseResult {
        let runtime_ms = elapsed.as_secs_f64() * 1000.0;
        let mut metrics = BTreeMap::new();
        for (name, h) in &m.hists {
            let returns = m
                .returns
                .get(name)
                .map(|r| r.iter().map(|(k, v)| (k.to_string(), *v)).collect())
                .unwrap_or_default();
            metrics.insert(
                name.clone(),
                OpSummary {
                    operations: h.len(),
                    avg_us: h.mean(),
                    min_us: h.min(),
                    max_us: h.max(),
                    p50_us: h.value_at_quantile(0.50),
                    p95_us: h.value_at_quantile(0.95),
                    p99_us: h.value_at_quantile(0.99),
                    p999_us: h.value_at_quantile(0.999),
                    returns,
                },
            );
        }
        // Operations whose every call failed have returns but no own histogram.
        for (name, r) in &m.returns {
            metrics.entry(name.clone()).or_insert_with(|| OpSummary {
                returns: r.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                ..Default::default()
            });
        }
        PhaseResult {
            phase: phase.to_string(),
            runtime_ms,
            operations,
            throughput_ops_sec: if runtime_ms > 0.0 {
                operations as f64 * 1000.0 / runtime_ms
            } else {
                0.0
            },
            metrics,
            intervals,
            counters: m.counters.clone(),
            crud_percent: None,
        }
    }

    /// YCSB's text summary (`TextMeasurementsExporter`): `[OVERALL], RunTime(ms), …`, then per
    /// metric Operations, latencies and `Return=` counts (we add the 50th and 99.9th
    /// percentiles, as YCSB does when `hdrhistogram.percentiles=50,95,99,99.9`).
    pub fn ycsb_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "[OVERALL], RunTime(ms), {}\n",
            self.runtime_ms.round() as u64
        ));
        s.push_str(&format!(
            "[OVERALL], Throughput(ops/sec), {}\n",
            self.throughput_ops_sec
        ));
        for (name, m) in &self.metrics {
            s.push_str(&format!("[{name}], Operations, {}\n", m.operations));
            if m.operations > 0 {
                s.push_str(&format!("[{name}], AverageLatency(us), {}\n", m.avg_us));
                s.push_str(&format!("[{name}], MinLatency(us), {}\n", m.min_us));
                s.push_str(&format!("[{name}], MaxLatency(us), {}\n", m.max_us));
                s.push_str(&format!(
                    "[{name}], 50thPercentileLatency(us), {}\n",
                    m.p50_us
                ));
                s.push_str(&format!(
                    "[{name}], 95thPercentileLatency(us), {}\n",
                    m.p95_us
                ));
                s.push_str(&format!(
                    "[{name}], 99thPercentileLatency(us), {}\n",
                    m.p99_us
                ));
                s.push_str(&format!(
                    "[{name}], 99.9PercentileLatency(us), {}\n",
                    m.p999_us
                ));
            }
            for (st, n) in &m.returns {
                s.push_str(&format!("[{name}], Return={st}, {n}\n"));
            }
        }
        s
    }
}

/// How a phase shows its progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Progress {
    /// A progress bar on stderr.
    Bar,
    /// Nothing (tests, the lab).
    #[default]
    Hidden,
}

/// How long a phase runs and how fast.
#[derive(Clone, Debug)]
pub struct RunLimits {
    /// Total operations (split over the threads as YCSB splits them), or None.
    pub ops: Option<u64>,
    /// Wall-clock limit, or None. At least one of `ops` and `duration` must be set.
    pub duration: Option<Duration>,
    pub threads: usize,
    /// Total target ops/s (split evenly over the threads), or None for a closed loop.
    pub target_ops_sec: Option<f64>,
    /// Sampling interval of the throughput series.
    pub interval: Duration,
}

/// What a thread's step reports.
pub enum Step {
    /// One operation done.
    Done,
    /// The thread has nothing more to do.
    Finished,
}

/// Runs `threads` client threads. `make(i)` builds thread i's step function; each call of it
/// does one operation and records it in the thread's measurements. Operations are split as
/// YCSB splits them: `ops / threads` each, the first `ops % threads` threads one more.
pub fn run_threads<F>(
    phase: &str,
    limits: &RunLimits,
    progress: Progress,
    make: impl Fn(usize) -> F + Sync,
) -> (Measurements, PhaseResult)
where
    F: FnMut(&mut Measurements) -> Step,
{
    let threads = limits.threads.max(1);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let bar = match progress {
        Progress::Bar => Some(progress_bar(phase, limits)),
        Progress::Hidden => None,
    };
    let intervals = Mutex::new(Vec::new());
    let mut total = Measurements::new();
    std::thread::scope(|s| {
        // Monitor: interval series, progress, duration limit.
        let monitor = {
            let monitor = Monitor {
                start,
                interval: limits.interval.max(Duration::from_millis(10)),
                by_ops: limits.ops.is_some(),
                done: done.clone(),
                stop: stop.clone(),
                bar: bar.clone(),
            };
            let intervals = &intervals;
            s.spawn(move || monitor.run(intervals))
        };
        let make = &make;
        let mut handles = Vec::new();
        for i in 0..threads {
            let client = Client {
                ops: limits.ops.map(|n| {
                    let each = n / threads as u64;
                    each + u64::from((i as u64) < n % threads as u64)
                }),
                deadline: limits.duration.map(|d| start + d),
                target_ops_sec: limits.target_ops_sec.map(|t| t / threads as f64),
                done: done.clone(),
                stop: stop.clone(),
            };
            handles.push(s.spawn(move || client.run(make(i))));
        }
        for h in handles {
            total.merge(h.join().expect("client thread panicked"));
        }
        stop.store(true, Ordering::Relaxed);
        monitor.join().expect("monitor thread");
    });
    let elapsed = start.elapsed();
    let n = done.load(Ordering::Relaxed);
    if let Some(pb) = bar {
        pb.set_position(if limits.ops.is_some() {
            n
        } else {
            elapsed.as_secs()
        });
        pb.finish_with_message(format!(
            "{:.0} ops/s",
            n as f64 / elapsed.as_secs_f64().max(1e-9)
        ));
    }
    let mut series = intervals.into_inner().unwrap();
    let t = elapsed.as_secs_f64();
    let last = series.last().map_or((0.0, 0), |s| (s.t_s, s.total_ops));
    if n > last.1 || series.is_empty() {
        series.push(IntervalSample {
            t_s: t,
            total_ops: n,
            ops_per_sec: (n - last.1) as f64 / (t - last.0).max(1e-9),
        });
    }
    let result = PhaseResult::from_measurements(phase, &total, n, elapsed, series);
    (total, result)
}

/// The phase's progress bar: operations done, or seconds gone when the phase runs for a time.
fn progress_bar(phase: &str, limits: &RunLimits) -> ProgressBar {
    let pb = match limits.ops {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new(limits.duration.map_or(0, |d| d.as_secs())),
    };
    pb.set_draw_target(ProgressDrawTarget::stderr());
    let tmpl = if limits.ops.is_some() {
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} ops ({per_sec}, eta {eta}) {msg}"
    } else {
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} s {msg}"
    };
    pb.set_style(ProgressStyle::with_template(tmpl).expect("template"));
    pb.set_prefix(phase.to_string());
    pb
}

/// The monitor thread: samples the throughput every `interval` and moves the progress bar,
/// until `stop`.
struct Monitor {
    start: Instant,
    interval: Duration,
    /// The bar counts operations (else seconds).
    by_ops: bool,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    bar: Option<ProgressBar>,
}

impl Monitor {
    fn run(self, intervals: &Mutex<Vec<IntervalSample>>) {
        let Monitor {
            start,
            interval,
            by_ops,
            done,
            stop,
            bar,
        } = self;
        let mut last_t = 0.0;
        let mut last_n = 0;
        let mut next = interval;
        loop {
            // Sleep in short steps so the end of the phase is noticed quickly.
            while start.elapsed() < next && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5).min(interval));
                if let Some(pb) = &bar {
                    if by_ops {
                        pb.set_position(done.load(Ordering::Relaxed));
                    }
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let t = start.elapsed().as_secs_f64();
            let n = done.load(Ordering::Relaxed);
            let rate = (n - last_n) as f64 / (t - last_t).max(1e-9);
            intervals.lock().unwrap().push(IntervalSample {
                t_s: t,
                total_ops: n,
                ops_per_sec: rate,
            });
            if let Some(pb) = &bar {
                if by_ops {
                    pb.set_position(n);
                } else {
                    pb.set_position(t as u64);
                }
                pb.set_message(format!("{rate:.0} ops/s"));
            }
            last_t = t;
            last_n = n;
            next += interval;
        }
    }
}

/// One client thread's limits: its share of the operations, the deadline, its share of the
/// target rate.
struct Client {
    ops: Option<u64>,
    deadline: Option<Instant>,
    target_ops_sec: Option<f64>,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Client {
    /// Calls `step` until a limit is reached or it has nothing more to do; returns what it
    /// measured.
    fn run<F>(self, mut step: F) -> Measurements
    where
        F: FnMut(&mut Measurements) -> Step,
    {
        let mut m = Measurements::new();
        let t_start = Instant::now();
        let mut n: u64 = 0;
        loop {
            if self.ops.is_some_and(|k| n >= k) {
                break;
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            if let Some(t) = self.target_ops_sec {
                // YCSB's throttle: sleep until start + n / target.
                let due = t_start + Duration::from_secs_f64(n as f64 / t);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            match step(&mut m) {
                Step::Done => {
                    n += 1;
                    self.done.fetch_add(1, Ordering::Relaxed);
                }
                Step::Finished => break,
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_short_latencies_and_failures() {
        let mut m = Measurements::new();
        m.record("LOAD", Status::Ok, 45_000_000);
        m.record("LOAD", Status::Ok, 0);
        m.record("READ", Status::NotFound, 7);
        let mut other = Measurements::new();
        other.record("LOAD", Status::Ok, 5);
        m.merge(other);
        let r = PhaseResult::from_measurements("run", &m, 4, Duration::from_secs(2), vec![]);
        let load = &r.metrics["LOAD"];
        assert_eq!(load.operations, 3);
        assert!(load.max_us >= 44_990_000, "{}", load.max_us);
        assert_eq!(load.min_us, 0);
        assert_eq!(load.returns["OK"], 3);
        assert_eq!(r.metrics["READ-FAILED"].operations, 1);
        assert_eq!(r.metrics["READ"].returns["NOT_FOUND"], 1);
        assert_eq!(r.throughput_ops_sec, 2.0);
        let t = r.ycsb_text();
        assert!(t.contains("[LOAD], 99thPercentileLatency(us), "));
        assert!(t.contains("[READ], Return=NOT_FOUND, 1"));
    }
}
