//! The lab's engine runs do not depend on how busy the host is: the same point run twice, the
//! second time with two threads spinning on the CPU, writes the same trace byte for byte
//! (docs/lab.md, "The schedule").

use lab::experiment;
use lab::run::{run_engine, EngineWork};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Threads that keep the CPU busy until dropped.
struct CpuHogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl CpuHogs {
    fn start(n: usize) -> CpuHogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|i| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = i as u64 + 1;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        }
                    }
                    x
                })
            })
            .collect();
        CpuHogs { stop, threads }
    }
}

impl Drop for CpuHogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The trace's bytes and a hash of them (for the failure message).
fn trace_of(
    dir: &std::path::Path,
    w: &EngineWork,
    journal_checkpoint_bytes: Option<u64>,
) -> (Vec<u8>, u64) {
    let mut exp = experiment::find("streams-quick").unwrap();
    exp.seeds = vec![w.seed];
    let scale = exp.scale_spec(&w.scale).unwrap();
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    let run = run_engine(dir, "point", w, &exp, &scale, journal_checkpoint_bytes).unwrap();
    assert!(run.run_checkpoints > 1, "the run phase took checkpoints");
    let bytes = std::fs::read(&run.trace).unwrap();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    (bytes, h.finish())
}

fn events(bytes: &[u8]) -> Vec<placement::Event> {
    let mut r = placement::trace::TraceReader::new(bytes).unwrap();
    let mut v = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        v.push(e);
    }
    v
}

#[test]
fn an_engine_run_writes_the_same_trace_on_a_busy_host() {
    // Both checkpoint triggers: bytes written (the reference engine's) and journal bytes (the
    // co-design's, with its dirty budget).
    for (workload, allocation, dirty_pct, journal) in [
        (
            "linkbench-mixed",
            "sweep",
            experiment::CODESIGN_DIRTY_PCT,
            Some(100_000),
        ),
        (
            "ycsb-update-heavy",
            "best",
            experiment::ENGINE_DIRTY_PCT,
            None,
        ),
    ] {
        let w = EngineWork {
            workload: workload.into(),
            cache_share: 0.2,
            leaf_kb: 32,
            compressor: "snappy".into(),
            allocation: allocation.into(),
            dirty_pct,
            seed: 2,
            scale: "tiny".into(),
        };
        let quiet = tempfile::tempdir().unwrap();
        let (a, ha) = trace_of(quiet.path(), &w, journal);
        let busy = tempfile::tempdir().unwrap();
        let (b, hb) = {
            let _hogs = CpuHogs::start(2);
            trace_of(busy.path(), &w, journal)
        };
        if a != b {
            // Where they part, for whoever reads the failure.
            let ea = events(&a);
            let eb = events(&b);
            let i = ea
                .iter()
                .zip(&eb)
                .position(|(x, y)| x != y)
                .unwrap_or(ea.len().min(eb.len()));
            for k in i.saturating_sub(5)..(i + 5).min(ea.len()).min(eb.len()) {
                eprintln!("{k}: {:?}\n   {:?}", ea[k], eb[k]);
            }
        }
        assert!(
            a == b,
            "{workload}: the busy run's trace differs: {} bytes (hash {ha:x}) quiet, {} bytes \
             (hash {hb:x}) busy",
            a.len(),
            b.len()
        );
    }
}
