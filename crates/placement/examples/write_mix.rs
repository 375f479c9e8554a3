//! What an engine wrote in a trace's run phase, by kind of file, kind of page and cause
//! (eviction, checkpoint, split), as a CSV with bytes per operation and per run-phase
//! checkpoint, and how many times each page was written per checkpoint interval it was
//! written in (1.0: once per interval; more: the engine wrote it again before the
//! checkpoint). docs/placement.md ("Why the absolute figures do not converge") compares two
//! scales' traces with it, to find which writes fall per operation as the database grows.
//!
//! `cargo run --release -p placement --example write_mix -- TRACE END_OF_LOAD_EVENT OPS`
//! (the event index is the lab's engine JSON `end_of_load_event`; OPS the run phase's
//! operations).
use placement::trace::TraceReader;
use placement::{Event, FileKind};
use std::collections::{BTreeMap, HashSet};

type Error = Box<dyn std::error::Error>;

fn file_name(kind: FileKind, id_index: bool) -> &'static str {
    match kind {
        FileKind::Index if id_index => "_id index",
        FileKind::Index => "other index",
        other => other.name(),
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, end_of_load, ops] = args.as_slice() else {
        return Err("usage: write_mix TRACE END_OF_LOAD_EVENT OPS".into());
    };
    let trace = std::path::Path::new(trace);
    let end_of_load: u64 = end_of_load.parse()?;
    let ops: f64 = ops.parse()?;
    if ops <= 0.0 {
        return Err("OPS must be positive".into());
    }
    type Group = (&'static str, &'static str, &'static str);
    let mut bytes: BTreeMap<Group, u64> = BTreeMap::new();
    let mut writes: BTreeMap<Group, u64> = BTreeMap::new();
    // Pages (by page id) written in the current interval, per group, and the sum over the
    // intervals of their counts: writes ÷ that sum is writes per page per interval.
    let mut pages_now: BTreeMap<Group, HashSet<u64>> = BTreeMap::new();
    let mut page_intervals: BTreeMap<Group, u64> = BTreeMap::new();
    let mut checkpoints = 0u64;
    let reader = TraceReader::open(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    for (i, ev) in reader.enumerate() {
        let ev = ev?;
        if (i as u64) < end_of_load {
            continue;
        }
        match ev {
            Event::Write(w) => {
                let key = (
                    file_name(w.file_kind, w.id_index),
                    w.page_kind.name(),
                    w.cause.name(),
                );
                *bytes.entry(key).or_default() += u64::from(w.len);
                *writes.entry(key).or_default() += 1;
                if w.page_id != 0 {
                    pages_now.entry(key).or_default().insert(w.page_id);
                }
            }
            Event::CheckpointCommit { .. } => {
                checkpoints += 1;
                for (key, pages) in pages_now.iter_mut() {
                    *page_intervals.entry(*key).or_default() += pages.len() as u64;
                    pages.clear();
                }
            }
            _ => {}
        }
    }
    for (key, pages) in &pages_now {
        *page_intervals.entry(*key).or_default() += pages.len() as u64;
    }
    let total: u64 = bytes.values().sum();
    println!("# run-phase checkpoints {checkpoints}, operations {ops}, bytes {total}");
    println!("file_kind,page_kind,cause,run_bytes,share,bytes_per_op,bytes_per_checkpoint,writes_per_page_per_interval");
    for (key, b) in &bytes {
        let (file, page, cause) = key;
        let per_page = match page_intervals.get(key) {
            Some(&n) if n > 0 => format!("{:.3}", writes[key] as f64 / n as f64),
            _ => String::new(),
        };
        println!(
            "{file},{page},{cause},{b},{:.4},{:.1},{:.0},{per_page}",
            *b as f64 / total.max(1) as f64,
            *b as f64 / ops,
            *b as f64 / checkpoints.max(1) as f64
        );
    }
    Ok(())
}
