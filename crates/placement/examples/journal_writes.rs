//! The journal's run-phase writes in an engine trace: files created and removed, writes, bytes,
//! 4 KiB pages touched, and how many writes fall in each size class (docs/placement.md, "The
//! journal's write size").
//!
//! `cargo run --release -p placement --example journal_writes -- TRACE END_OF_LOAD_EVENT`
use placement::trace::TraceReader;
use placement::{Event, FileKind};
use std::collections::{BTreeMap, HashSet};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, end_of_load] = args.as_slice() else {
        return Err("usage: journal_writes TRACE END_OF_LOAD_EVENT".into());
    };
    let end_of_load: usize = end_of_load.parse()?;
    let mut journal: HashSet<u64> = HashSet::new();
    let (mut created, mut removed, mut writes, mut bytes, mut pages) = (0, 0, 0u64, 0u64, 0u64);
    // Writes by size class: the power of two at or above the write's length.
    let mut by_size: BTreeMap<u64, u64> = BTreeMap::new();
    for (i, ev) in TraceReader::open(std::path::Path::new(trace))?.enumerate() {
        let run = i >= end_of_load;
        match ev? {
            Event::FileCreate {
                file,
                kind: FileKind::Journal,
                ..
            } => {
                journal.insert(file as u64);
                created += run as u64;
            }
            Event::FileRemove { file, .. } if journal.contains(&(file as u64)) => {
                removed += run as u64;
            }
            Event::Write(w) if w.file_kind == FileKind::Journal && run => {
                writes += 1;
                bytes += w.len as u64;
                pages += (w.offset + w.len as u64).div_ceil(4096) - w.offset / 4096;
                *by_size
                    .entry((w.len as u64).next_power_of_two())
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    println!(
        "files created {created}, removed {removed}; writes {writes}, bytes {bytes}, pages \
         {pages} ({:.0} bytes per write, {:.1} pages per write)",
        bytes as f64 / writes.max(1) as f64,
        pages as f64 / writes.max(1) as f64
    );
    println!("writes by size (up to bytes: count): {by_size:?}");
    Ok(())
}
