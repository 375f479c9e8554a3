//! The simulated SSD in the engine's loop: every event reaches the device as it happens, on the
//! stream the engine's online placement chose, together with a trace file (sinks combined).

use engine::{DiskEngine, EngineConfig, FlashConfig, KvEngine, TableConfig, WriteBatch};
use placement::sim::{ReplayConfig, SimObserver, TrimConfig};
use placement::{Observer, Tee, TraceObserver, TrimWhen};
use std::sync::Arc;

#[test]
fn the_device_sees_the_engines_streams_live() {
    let dir = tempfile::tempdir().unwrap();
    let mut dev = ssd::SsdConfig::with_op(64 * 1024, 0.07).unwrap();
    dev.pages_per_block = 32;
    dev.set_op(0.07).unwrap();
    let dev = ssd::Ssd::new(dev).unwrap();
    let fs =
        ssd::replay::FsReplayer::new(dev.logical_pages(), ssd::AllocPolicy::NextFit, true).unwrap();
    let sim = Arc::new(SimObserver::new(
        dev,
        fs,
        ReplayConfig {
            trim: TrimConfig {
                batch: Some(256),
                when: TrimWhen::Free,
            },
            end_of_load_at: None,
            reset_stats_at: 0,
        },
    ));
    let trace_path = dir.path().join("t.trace");
    let trace = Arc::new(TraceObserver::create(&trace_path).unwrap());
    // WiredTiger's engine (flash mode off) with `file` placement, as before flash mode.
    let mut cfg = EngineConfig::with_mode(dir.path().join("db"), engine::FlashMode::Off);
    cfg.cache_size = 1 << 20;
    cfg.checkpoint_interval = None;
    cfg.flash = FlashConfig {
        placement: "file".parse().unwrap(),
        ..FlashConfig::off()
    };
    cfg.observer = Some(Arc::new(Tee(vec![sim.clone() as Arc<dyn Observer>, trace])));
    let eng = DiskEngine::open(cfg).unwrap();
    let best_fit = TableConfig {
        allocation: engine::AllocPolicy::Best,
        ..TableConfig::collection()
    };
    let t = eng.create_table("c", &best_fit).unwrap();
    for round in 0..4u32 {
        for k in 0..2000u32 {
            let mut b = WriteBatch::new();
            b.put(
                t,
                format!("k{:05}", (k * 13) % 2000),
                vec![round as u8; 500],
            );
            eng.write(&b, Default::default()).unwrap();
        }
        eng.checkpoint().unwrap();
    }
    eng.close().unwrap();
    let out = sim.finish().unwrap();
    let r = &out.report;
    assert!(r.write_amplification >= 1.0);
    let streams_used = r
        .counters
        .per_stream_host_pages
        .iter()
        .filter(|&&p| p > 0)
        .count();
    assert!(
        streams_used >= 2,
        "collection and journal on different streams: {:?}",
        r.counters.per_stream_host_pages
    );
    // The trace written beside it replays to the same host page count.
    let n_trace_writes = placement::trace::TraceReader::open(&trace_path)
        .unwrap()
        .filter(|e| matches!(e, Ok(placement::Event::Write(_))))
        .count() as u64;
    assert_eq!(out.counts.writes, n_trace_writes);
}
