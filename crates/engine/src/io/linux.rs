//! Flash hints that reach a real Linux device: which write-life hint a stream gets, and the
//! counters of hint calls (`fcntl(F_SET_RW_HINT)`) and punched trims
//! (`fallocate(FALLOC_FL_PUNCH_HOLE | KEEP_SIZE)`; the calls themselves are the backend's).
//! When the kernel or filesystem refuses, the failure is logged once and counted, and the
//! database goes on: hints are advice, never a reason to fail a write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
/// RWH_WRITE_LIFE_NOT_SET .. RWH_WRITE_LIFE_EXTREME.
pub const RWH_NOT_SET: u64 = 0;
pub const RWH_EXTREME: u64 = 5;

/// The Linux write-life hint for a stream. Stream 0 (the default stream) is "not set"; streams
/// 1..streams-1 are spread evenly over the five named lifetimes NONE, SHORT, MEDIUM, LONG,
/// EXTREME (hint = ceil(s · 5 / (streams − 1))): with 8 streams, 1→NONE, 2→SHORT, 3→MEDIUM,
/// 4→MEDIUM, 5→LONG, 6→EXTREME, 7→EXTREME. Linux has only five values, so more than five
/// streams fold; a policy's streams are ordered so that neighbours are alike.
pub fn hint_for_stream(stream: u8, streams: u8) -> u64 {
    if stream == 0 || streams < 2 {
        return RWH_NOT_SET;
    }
    let s = stream.min(streams - 1) as u64;
    (s * 5).div_ceil(streams as u64 - 1).clamp(1, RWH_EXTREME)
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
        assert_eq!(m, vec![0, 1, 2, 3, 3, 4, 5, 5]);
        assert_eq!(hint_for_stream(1, 2), 5);
        assert_eq!(hint_for_stream(0, 2), 0);
        for streams in 2..=16u8 {
            for s in 1..streams {
                assert!((1..=5).contains(&hint_for_stream(s, streams)));
            }
        }
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
