//! Linux write-life hints (kept by the kernel; whether they reach the device is `hint_path`'s
//! question, and through a file system they do not): which hint a stream gets, and the
//! counters of hint calls (`fcntl(F_SET_RW_HINT)`) and punched trims
//! (`fallocate(FALLOC_FL_PUNCH_HOLE | KEEP_SIZE)`; the calls themselves are the backend's).
//! When the kernel or filesystem refuses, the failure is logged once and counted, and the
//! database goes on: hints are advice, never a reason to fail a write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
/// RWH_WRITE_LIFE_NOT_SET, NONE, SHORT, MEDIUM, LONG, EXTREME (uapi fcntl.h).
pub const RWH_NOT_SET: u64 = 0;
pub const RWH_NONE: u64 = 1;
pub const RWH_SHORT: u64 = 2;
pub const RWH_MEDIUM: u64 = 3;
pub const RWH_LONG: u64 = 4;
pub const RWH_EXTREME: u64 = 5;

/// The Linux write-life hint for a stream.
///
/// Linux has four lifetimes (SHORT, MEDIUM, LONG, EXTREME) and "no lifetime" (NOT_SET and
/// NONE, which every consumer treats alike: the old NVMe streams code and f2fs put both in
/// the default class). So a device or file system can tell at most **five** classes apart,
/// and with more streams some must share one. Which ones share decides what the hints are
/// worth, so the map keeps apart the streams the placement policies make most different and
/// folds the tail, whose streams are alike by construction:
///
/// | stream | `filelog` (the shipped policy, ≥ 5 streams) | hint |
/// | --- | --- | --- |
/// | 0 | metadata (< 0.1 % of writes) | NOT_SET |
/// | 1 | the journal: written once, dies whole at a checkpoint | SHORT |
/// | 2 | rarely written table files: the coldest | EXTREME |
/// | 3 | the busiest table file | MEDIUM |
/// | 4 | the second busiest | LONG |
/// | 5.. | the less busy table files | NONE |
///
/// Why: the journal's own stream is what took `filelog` from 49.9 to 30.6 flash writes per
/// operation on linkbench-mixed (docs/placement.md), so it never shares; cold data mixed with
/// hot is the classic cause of GC copies, so the rare files never share with a busy one; each
/// busy file sweeps at its own speed, and the two busiest carry most of the bytes, so each
/// keeps a class of its own. The less busy files (ranked neighbours, and already sharing the
/// last stream when they outnumber the streams) fold together with the metadata, whose
/// volume is negligible. With 5 streams or fewer every stream has a class of its own. The
/// names are labels only: FDP placement and NVMe streams compare identifiers, not lifetimes.
pub fn hint_for_stream(stream: u8, streams: u8) -> u64 {
    if streams < 2 {
        return RWH_NOT_SET;
    }
    match stream.min(streams - 1) {
        0 => RWH_NOT_SET,
        1 => RWH_SHORT,
        2 => RWH_EXTREME,
        3 => RWH_MEDIUM,
        4 => RWH_LONG,
        _ => RWH_NONE,
    }
}

#[derive(Default)]
pub struct LinuxIo {
    pub hint_calls: AtomicU64,
    pub hint_failures: AtomicU64,
    pub punch_calls: AtomicU64,
    pub punch_bytes: AtomicU64,
    pub punch_failures: AtomicU64,
    hint_warned: AtomicBool,
    punch_warned: AtomicBool,
}

impl LinuxIo {
    /// Counts a write-life hint call and its outcome (a refusal is warned about once).
    pub fn hinted(&self, res: std::io::Result<()>) {
        self.hint_calls.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = res {
            self.hint_failures.fetch_add(1, Ordering::Relaxed);
            if !self.hint_warned.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "flashdoc: the kernel refused a write-life hint (F_SET_RW_HINT): {e}; going on without hints"
                );
            }
        }
    }

    /// Counts a punched trim of `len` bytes and its outcome (a refusal is warned about once).
    pub fn punched(&self, len: u64, res: std::io::Result<()>) {
        self.punch_calls.fetch_add(1, Ordering::Relaxed);
        match res {
            Ok(()) => {
                self.punch_bytes.fetch_add(len, Ordering::Relaxed);
            }
            Err(e) => {
                self.punch_failures.fetch_add(1, Ordering::Relaxed);
                if !self.punch_warned.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "flashdoc: the filesystem refused a trim (fallocate PUNCH_HOLE): {e}; going on"
                    );
                }
            }
        }
    }

    pub fn stats(&self) -> serde_json::Value {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "hint_calls": l(&self.hint_calls),
            "hint_failures": l(&self.hint_failures),
            "punch_hole_calls": l(&self.punch_calls),
            "punch_hole_bytes": l(&self.punch_bytes),
            "punch_hole_failures": l(&self.punch_failures),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn stream_to_hint_map() {
        let m: Vec<u64> = (0..8).map(|s| hint_for_stream(s, 8)).collect();
        assert_eq!(m, vec![0, 2, 5, 3, 4, 1, 1, 1]);
        // Five classes: NOT_SET and NONE are one ("no lifetime").
        let class = |h: u64| h.max(RWH_NONE);
        for streams in 2..=5u8 {
            let mut classes: Vec<u64> = (0..streams)
                .map(|s| class(hint_for_stream(s, streams)))
                .collect();
            classes.sort_unstable();
            classes.dedup();
            assert_eq!(
                classes.len(),
                streams as usize,
                "{streams} streams, one class each"
            );
        }
        // filelog's journal (1), rare files (2) and two busiest files (3, 4) never share.
        for streams in 5..=16u8 {
            for s in 0..streams {
                let h = hint_for_stream(s, streams);
                assert!(h <= RWH_EXTREME);
                for kept_apart in 1..=4u8 {
                    if s != kept_apart {
                        assert_ne!(class(h), class(hint_for_stream(kept_apart, streams)));
                    }
                }
            }
        }
        assert_eq!(hint_for_stream(1, 2), RWH_SHORT);
        assert_eq!(hint_for_stream(0, 2), RWH_NOT_SET);
    }

    #[test]
    fn punch_hole_zeroes_the_range_and_keeps_the_size() {
        use crate::io::{Backend, FileRole, Io, OpenMode};
        use placement::FileKind;
        let dir = tempfile::tempdir().unwrap();
        let io = Io::quiet();
        let f = io
            .open(
                &dir.path().join("f"),
                OpenMode::CreateTruncate,
                FileRole::of(FileKind::Collection),
                "f".into(),
            )
            .unwrap();
        f.file().write_all_at(&[7u8; 16384], 0).unwrap();
        let stats = LinuxIo::default();
        let os = crate::io::OsFiles;
        stats.punched(8192, os.punch_hole(&f, 4096, 8192));
        stats.hinted(os.set_write_hint(&f, hint_for_stream(3, 8)));
        assert_eq!(f.file().metadata().unwrap().len(), 16384);
        assert_eq!(stats.punch_calls.load(Ordering::Relaxed), 1);
        assert_eq!(stats.hint_calls.load(Ordering::Relaxed), 1);
        if stats.punch_failures.load(Ordering::Relaxed) == 0 {
            let mut b = [1u8; 16384];
            f.file().read_exact_at(&mut b, 0).unwrap();
            assert!(b[..4096].iter().all(|&x| x == 7));
            assert!(b[4096..12288].iter().all(|&x| x == 0));
            assert!(b[12288..].iter().all(|&x| x == 7));
        }
    }
}
