//! Where an online policy puts a trace's run-phase bytes: for each policy, the bytes per
//! stream and per kind of file (collection, `_id` index, other index, journal, metadata), as
//! a CSV. docs/placement.md ("The seeds' claims at medium") reads it to count what DSM's
//! primary-index filter moves onto the journal's stream.
//!
//! `cargo run --release -p placement --example stream_bytes -- TRACE END_OF_LOAD_EVENT
//! [POLICY …]` (policies default to dsm and dsm-skip-primary; the event index is the lab's
//! engine JSON `end_of_load_event`).
use placement::trace::TraceReader;
use placement::{make_policy, Event, FileKind, PlacementConfig};
use std::collections::BTreeMap;

type Error = Box<dyn std::error::Error>;

fn kind_name(kind: FileKind, id_index: bool) -> &'static str {
    match kind {
        FileKind::Collection => "collection",
        FileKind::Index if id_index => "_id index",
        FileKind::Index => "other index",
        FileKind::Journal => "journal",
        FileKind::Metadata => "metadata",
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, end_of_load, policies @ ..] = args.as_slice() else {
        return Err("usage: stream_bytes TRACE END_OF_LOAD_EVENT [POLICY …]".into());
    };
    let trace = std::path::Path::new(trace);
    let end_of_load: u64 = end_of_load.parse()?;
    let policies: Vec<&str> = if policies.is_empty() {
        vec!["dsm", "dsm-skip-primary"]
    } else {
        policies.iter().map(|s| s.as_str()).collect()
    };
    println!("policy,stream,file_kind,run_bytes,share_of_run_bytes");
    for name in policies {
        let mut policy = make_policy(name, &PlacementConfig::default())?;
        let mut bytes: BTreeMap<(u8, &str), u64> = BTreeMap::new();
        let reader = TraceReader::open(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
        for (i, ev) in reader.enumerate() {
            if i as u64 == end_of_load {
                policy.end_of_load();
            }
            match ev? {
                Event::Write(w) => {
                    let stream = policy.place(&w);
                    if i as u64 >= end_of_load {
                        *bytes
                            .entry((stream, kind_name(w.file_kind, w.id_index)))
                            .or_default() += u64::from(w.len);
                    }
                }
                other => policy.observe(&other),
            }
        }
        let total: u64 = bytes.values().sum();
        for ((stream, kind), b) in &bytes {
            println!(
                "{name},{stream},{kind},{b},{:.4}",
                *b as f64 / total.max(1) as f64
            );
        }
    }
    Ok(())
}
