//! Every run-phase table write of a trace as a CSV row: its device lifetime (host pages
//! written from its birth until its last page stops holding its data on the device, -1 if
//! never; no TRIM, no discard, as `sim::device_lifetimes`) beside what the engine knew when
//! it wrote it: page kind, cause, the page's previous write interval, the checkpoint count
//! and the host pages since the last commit. docs/placement.md ("Why YCSB's gap stays")
//! reads these.
//!
//! `cargo run --release -p placement --features sim --example write_lives -- TRACE
//! LOGICAL_PAGES END_OF_LOAD_EVENT > lives.csv` (the last two from the lab's engine JSON:
//! `sizing.capacity_bytes / 4096` and `end_of_load_event`).
use placement::sim::{device_lifetimes, TrimConfig};
use placement::trace::TraceReader;
use placement::{Event, TrimWhen};
use std::collections::HashMap;
use std::io::Write;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, logical_pages, end_of_load] = args.as_slice() else {
        return Err("usage: write_lives TRACE LOGICAL_PAGES END_OF_LOAD_EVENT".into());
    };
    let trace = std::path::Path::new(trace);
    let logical_pages: u64 = logical_pages.parse()?;
    let end_of_load: u64 = end_of_load.parse()?;
    let events = || -> Result<_, Error> {
        Ok(TraceReader::open(trace)
            .map_err(|e| format!("{}: {e}", trace.display()))?
            .map(|e| e.map_err(Error::from)))
    };
    let no_trim = TrimConfig {
        batch: None,
        when: TrimWhen::Free,
    };
    let lives = device_lifetimes(
        events()?,
        logical_pages,
        ssd::AllocPolicy::NextFit,
        false,
        no_trim,
    )?;
    let mut out = std::io::BufWriter::new(std::io::stdout());
    writeln!(
        out,
        "event,birth,life,pages,file,kind,cause,page,prev,commits,in_checkpoint,since_commit"
    )?;
    let mut births = lives.with_births();
    // Each page's last birth, for its previous write interval.
    let mut last_birth: HashMap<(u32, u64), u64> = HashMap::new();
    let (mut commits, mut in_checkpoint, mut commit_clock, mut clock) = (0u64, false, 0u64, 0u64);
    for (i, ev) in events()?.enumerate() {
        match ev? {
            Event::CheckpointBegin { .. } => in_checkpoint = true,
            Event::CheckpointCommit { .. } => {
                in_checkpoint = false;
                commits += 1;
                commit_clock = clock;
            }
            Event::Write(w) => {
                let (birth, life) = births.next().ok_or("fewer lives than writes")?;
                clock = birth + life.pages as u64;
                if (i as u64) < end_of_load || w.table == 0 {
                    continue;
                }
                let prev = (w.page_id != 0)
                    .then(|| last_birth.insert((w.file, w.page_id), birth))
                    .flatten()
                    .map_or(-1, |b| (birth - b) as i64);
                let life_pages = match life.death {
                    u64::MAX => -1,
                    d => (d - birth) as i64,
                };
                writeln!(
                    out,
                    "{i},{birth},{life_pages},{},{},{:?},{:?},{},{prev},{commits},{},{}",
                    life.pages,
                    w.file,
                    w.page_kind,
                    w.cause,
                    w.page_id,
                    in_checkpoint as u8,
                    birth - commit_clock
                )?;
            }
            _ => {}
        }
    }
    Ok(())
}
