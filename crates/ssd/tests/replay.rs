//! Replay end to end: determinism of the JSON result, and clear errors for bad input.

use ssd::replay::FsReplayer;
use ssd::trace::{self, Record};
use ssd::{AllocPolicy, GcPolicy, Ssd, SsdConfig, SsdError, TimingConfig};
use std::fmt::Write as _;
use std::path::Path;

/// A file-level CSV trace: files grow, are overwritten at random offsets on two streams,
/// read, punched and removed.
fn file_trace(dir: &Path) -> std::path::PathBuf {
    let mut s = String::from("time_ns,op,file,offset,bytes,stream\n");
    let mut x = 99u64;
    for i in 0..6000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let file = (x >> 60) % 6;
        let off = ((x >> 20) % 300) * 4096;
        match i % 50 {
            0 => writeln!(s, "{i},remove,{file},0,0,").unwrap(),
            1 => writeln!(s, "{i},trim,{file},{off},16384,").unwrap(),
            2 => writeln!(s, "{i},read,{file},{off},8192,").unwrap(),
            _ => writeln!(s, "{i},write,{file},{off},8192,{}", file % 2).unwrap(),
        }
    }
    let p = dir.join("files.csv");
    std::fs::write(&p, s).unwrap();
    p
}

fn run(path: &Path, seed: u64) -> String {
    let mut cfg = SsdConfig::with_op(4096, 0.15).unwrap();
    cfg.pages_per_block = 32;
    cfg.set_op(0.15).unwrap();
    cfg.gc = GcPolicy::DChoices;
    cfg.seed = seed;
    cfg.waf_interval = 500;
    cfg.timing = Some(TimingConfig::default());
    let mut dev = Ssd::new(cfg).unwrap();
    dev.precondition(&ssd::PreconditionConfig {
        seed,
        max_overwrite_factor: 3.0,
        ..Default::default()
    })
    .unwrap();
    let mut fs = FsReplayer::new(dev.logical_pages(), AllocPolicy::NextFit, true).unwrap();
    for rec in trace::Reader::open(path, trace::detect(path).unwrap()).unwrap() {
        match rec.unwrap() {
            Record::File(f) => fs.apply(&mut dev, &f).unwrap(),
            Record::Host(h) => {
                dev.submit(&h).unwrap();
            }
        }
    }
    let r = dev.report();
    assert!(r.counters.host_write_pages > 10_000 && r.timing.is_some() && !r.waf_series.is_empty());
    serde_json::to_string_pretty(&(fs.stats(), r)).unwrap()
}

#[test]
fn same_trace_and_seed_give_byte_identical_json() {
    let dir = tempfile::tempdir().unwrap();
    let p = file_trace(dir.path());
    let a = run(&p, 5);
    let b = run(&p, 5);
    assert_eq!(a, b);
    // The seed matters (d-choices and preconditioning draw from it), so the check can fail.
    assert_ne!(a, run(&p, 6));
}

#[test]
fn address_beyond_capacity_is_a_clear_error() {
    let mut dev = Ssd::new(SsdConfig::with_op(100_000, 0.1).unwrap()).unwrap();
    let e = dev.write(99_999, 2, 0).unwrap_err();
    assert!(matches!(e, SsdError::OutOfRange { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("LBA 99999")
            && msg.contains("100000 logical pages")
            && msg.contains("--size-to-trace"),
        "{msg}"
    );
}

#[test]
fn block_trace_sizes_to_fit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.csv");
    std::fs::write(
        &p,
        "time_ns,op,lba,pages,stream\n0,write,5000,10,0\n1,write,0,1,0\n2,trim,5000,10,0\n",
    )
    .unwrap();
    let ext =
        ssd::replay::scan(trace::Reader::open(&p, trace::detect(&p).unwrap()).unwrap()).unwrap();
    assert_eq!((ext.records, ext.lba_end), (3, 5010));
    let mut dev = Ssd::new(SsdConfig::with_op(ext.lba_end, 0.07).unwrap()).unwrap();
    for rec in trace::Reader::open(&p, trace::Format::CsvBlock).unwrap() {
        if let Record::Host(h) = rec.unwrap() {
            dev.submit(&h).unwrap();
        }
    }
    assert_eq!(dev.stats().host_write_pages, 11);
    assert_eq!(dev.stats().trim_invalidated_pages, 10);
}

#[test]
fn nonsensical_geometry_is_a_clear_error() {
    let e = SsdConfig::from_physical(0, 256, 0.07)
        .unwrap_err()
        .to_string();
    assert!(e.contains("zero physical blocks"), "{e}");
    let e = SsdConfig::with_op(1000, 0.0).unwrap_err().to_string();
    assert!(e.contains("over-provisioning must be"), "{e}");
    let e = SsdConfig::with_op(1000, 0.1).unwrap_err().to_string();
    assert!(e.contains("needs at least"), "{e}");
    let mut c = SsdConfig::with_op(100_000, 0.1).unwrap();
    c.logical_pages = c.physical_pages();
    let e = Ssd::new(c).err().expect("no over-provisioning").to_string();
    assert!(e.contains("over-provisioning must be > 0"), "{e}");
}
