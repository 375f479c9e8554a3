//! The lab's replay of an engine trace with one policy (aged 8-stream device, ρ = 7 %, greedy
//! GC, 256-page blocks, no TRIM, no discard, the run phase looped until 24 device capacities
//! are written and the last pass measured), optionally without one kind of write: it tells
//! what that kind costs the device (docs/placement.md, "The journal's write size").
//!
//! `cargo run --release -p placement --features sim --example replay_without -- TRACE
//! LOGICAL_PAGES END_OF_LOAD_EVENT POLICY [journal|journal-headers]` (the numbers from the
//! lab's engine JSON: `sizing.capacity_bytes / 4096` and `end_of_load_event`). `journal`
//! leaves out every journal write; `journal-headers` only the 128-byte header write that
//! starts each buffered-layout journal file.
use placement::policy::PlacementConfig;
use placement::sim::{read_events, replay_loaded, ReplayConfig, RunLoops, TraceReplay, TrimConfig};
use placement::{Event, FileKind, TrimWhen};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The lab's `warmup_capacities`; the passes are counted as `lab::run::run_loops` counts them.
const WARMUP_CAPACITIES: f64 = 24.0;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (trace, logical_pages, end_of_load, policy, without) = match args.as_slice() {
        [t, l, e, p] => (t, l, e, p, None),
        [t, l, e, p, w] => (t, l, e, p, Some(w.as_str())),
        _ => {
            return Err(
                "usage: replay_without TRACE LOGICAL_PAGES END_OF_LOAD_EVENT POLICY \
                        [journal|journal-headers]"
                    .into(),
            )
        }
    };
    if !matches!(without, None | Some("journal" | "journal-headers")) {
        return Err(format!("unknown kind of write {without:?} (journal, journal-headers)").into());
    }
    let trace = std::path::Path::new(trace);
    let logical_pages: u64 = logical_pages.parse()?;
    let end_of_load: usize = end_of_load.parse()?;
    let leave_out = |ev: &Event| match (ev, without) {
        (Event::Write(w), Some("journal")) => w.file_kind == FileKind::Journal,
        (Event::Write(w), Some("journal-headers")) => {
            w.file_kind == FileKind::Journal && w.offset == 0 && w.len <= 128
        }
        _ => false,
    };
    let mut events = Vec::new();
    let mut run_from = 0;
    for (i, ev) in read_events(trace)?.into_iter().enumerate() {
        if i == end_of_load {
            run_from = events.len();
        }
        if !leave_out(&ev) {
            events.push(ev);
        }
    }
    let run_bytes: u64 = events[run_from..]
        .iter()
        .map(|e| match e {
            Event::Write(w) => w.len as u64,
            _ => 0,
        })
        .sum();
    let per_pass = run_bytes as f64 / (logical_pages * ssd::PAGE_BYTES) as f64;
    let loops = (1.0 + (WARMUP_CAPACITIES / per_pass).ceil()).min(64.0) as u32;
    let mut device = ssd::SsdConfig::with_op(logical_pages, 0.07)?;
    device.streams = 8;
    device.validate()?;
    let placement = PlacementConfig {
        streams: 8,
        ..PlacementConfig::default()
    };
    let (from, n) = (run_from as u64, events.len() as u64);
    let job = TraceReplay {
        trace,
        policy,
        placement: &placement,
        device,
        precondition: Some(ssd::PreconditionConfig::fill()),
        alloc: ssd::AllocPolicy::NextFit,
        fs_discard: false,
        replay: ReplayConfig {
            trim: TrimConfig {
                batch: None,
                when: TrimWhen::Free,
            },
            end_of_load_at: Some(from),
            reset_stats_at: (from + (loops as u64 - 1) * (n - from)).max(1),
        },
        loops: RunLoops { from, times: loops },
    };
    let out = replay_loaded(&job, &events, |_, _| {})?;
    println!(
        "{policy} without {}: {loops} passes of {per_pass:.2} capacities, WAF {:.4}",
        without.unwrap_or("nothing"),
        out.report.write_amplification
    );
    Ok(())
}
