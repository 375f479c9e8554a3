//! Preconditioning: the device's state before a replay. Three modes:
//!
//! - [`PreconditionMode::Mkfs`]: the state the seeds' drive most likely had (docs/lab.md): a
//!   file system made on it, and mkfs discards the whole device by default (ext4's
//!   `mke2fs -E discard`, XFS likewise), so no LBA holds valid data; the replay then runs
//!   without discard, so the device holds valid exactly what the files have occupied — a
//!   deleted journal file's LBAs included, until the file system reuses them. Not an aged
//!   device: a fresh one has WA 1 until the file system's writes have covered it (MQSim
//!   users learn it the hard way, issue #49), which the lab's warm-up passes reach.
//!
//! - [`PreconditionMode::Fill`]: the whole logical space written once, in LBA order — every
//!   LBA holds data the device counts as valid, in dense blocks. This is the placement lab's
//!   aged device: what a filesystem that has been used hands out (freed LBAs still hold stale
//!   data until they are reused), without a random scatter the workload would first have to
//!   undo.
//! - [`PreconditionMode::Steady`]: the fill, then random overwrites until write amplification
//!   is steady (SNIA's steady state for uniform random writes). It scatters every LBA's copy
//!   over all blocks; a workload that then writes only part of the LBA space pays a long
//!   start-up transient while GC gathers the untouched data back into dense blocks (measured
//!   in `docs/ssd.md`).
//!
//! 1. Fill: every logical page written once, in LBA order, on stream 0.
//! 2. (`Steady` only) Random overwrites: uniform single-page writes on stream 0, in windows of
//!    `window_fraction · U` host pages. The WA of each window is measured.
//! 3. Steady state = the WAs of `stable_windows` consecutive windows each differ from the
//!    previous window's by less than `tolerance` (relative), after at least
//!    `min_overwrite_factor · U` overwrites. If `max_overwrite_factor · U` overwrites pass
//!    first, preconditioning stops and reports `steady: false`.

use crate::error::SsdError;
use crate::ftl::Ftl;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How far preconditioning goes (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreconditionMode {
    /// The whole logical space discarded (mkfs): nothing valid.
    Mkfs,
    /// Every logical page written once, in LBA order.
    Fill,
    /// The fill, then random overwrites until write amplification is steady.
    Steady,
}

impl PreconditionMode {
    pub fn parse(s: &str) -> Result<Self, SsdError> {
        match s {
            "mkfs" => Ok(PreconditionMode::Mkfs),
            "fill" => Ok(PreconditionMode::Fill),
            "steady" => Ok(PreconditionMode::Steady),
            o => Err(SsdError::Layout(format!(
                "unknown precondition mode {o:?} (mkfs, fill, steady)"
            ))),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreconditionConfig {
    #[serde(default = "steady")]
    pub mode: PreconditionMode,
    pub window_fraction: f64,
    pub tolerance: f64,
    pub stable_windows: u32,
    pub min_overwrite_factor: f64,
    pub max_overwrite_factor: f64,
    pub seed: u64,
}

fn steady() -> PreconditionMode {
    PreconditionMode::Steady
}

impl PreconditionConfig {
    /// The whole logical space discarded, as mkfs leaves it (the lab's default device).
    pub fn mkfs() -> Self {
        PreconditionConfig {
            mode: PreconditionMode::Mkfs,
            ..Self::default()
        }
    }

    /// The whole logical space written once (the harsher aged device).
    pub fn fill() -> Self {
        PreconditionConfig {
            mode: PreconditionMode::Fill,
            ..Self::default()
        }
    }
}

impl Default for PreconditionConfig {
    fn default() -> Self {
        PreconditionConfig {
            mode: PreconditionMode::Steady,
            window_fraction: 0.25,
            tolerance: 0.01,
            stable_windows: 3,
            min_overwrite_factor: 1.0,
            max_overwrite_factor: 20.0,
            seed: 0x5eed,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreconditionReport {
    pub config: PreconditionConfig,
    pub fill_pages: u64,
    pub overwrite_pages: u64,
    pub steady: bool,
    /// WA of the last window.
    pub final_window_waf: f64,
    /// WA of every window, in order.
    pub window_waf: Vec<f64>,
}

pub fn run(ftl: &mut Ftl, p: &PreconditionConfig) -> Result<PreconditionReport, SsdError> {
    let u = ftl.logical_pages();
    if p.mode == PreconditionMode::Mkfs {
        ftl.trim(0, u)?;
        return Ok(PreconditionReport {
            config: p.clone(),
            fill_pages: 0,
            overwrite_pages: 0,
            steady: true,
            final_window_waf: 1.0,
            window_waf: Vec::new(),
        });
    }
    for lba in 0..u {
        ftl.write_page(lba as u32, 0)?;
    }
    if p.mode == PreconditionMode::Fill {
        return Ok(PreconditionReport {
            config: p.clone(),
            fill_pages: u,
            overwrite_pages: 0,
            steady: true,
            final_window_waf: 1.0,
            window_waf: Vec::new(),
        });
    }
    let window = ((u as f64 * p.window_fraction) as u64).max(1);
    let min_pages = (u as f64 * p.min_overwrite_factor) as u64;
    let max_pages = (u as f64 * p.max_overwrite_factor) as u64;
    let mut rng = StdRng::seed_from_u64(p.seed);
    let mut written = 0u64;
    let mut wafs: Vec<f64> = Vec::new();
    let mut stable = 0u32;
    let mut steady = false;
    while written < max_pages {
        let s0 = ftl.stats().clone();
        for _ in 0..window {
            let lba = rng.gen_range(0..u) as u32;
            ftl.write_page(lba, 0)?;
        }
        written += window;
        let s1 = ftl.stats();
        let waf = (window + s1.gc_copy_pages - s0.gc_copy_pages) as f64 / window as f64;
        if let Some(&prev) = wafs.last() {
            if ((waf - prev) / prev).abs() < p.tolerance {
                stable += 1;
            } else {
                stable = 0;
            }
        }
        wafs.push(waf);
        if written >= min_pages && stable >= p.stable_windows {
            steady = true;
            break;
        }
    }
    Ok(PreconditionReport {
        config: p.clone(),
        fill_pages: u,
        overwrite_pages: written,
        steady,
        final_window_waf: wafs.last().copied().unwrap_or(1.0),
        window_waf: wafs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SsdConfig;
    use crate::theory;

    #[test]
    fn reaches_steady_state_near_theory() {
        let mut cfg = SsdConfig::from_physical(512, 64, 0.25).unwrap();
        cfg.gc = crate::config::GcPolicy::Fifo;
        let mut ftl = Ftl::new(&cfg).unwrap();
        let r = run(&mut ftl, &PreconditionConfig::default()).unwrap();
        assert!(r.steady, "{r:?}");
        let expect = theory::wa_fifo(cfg.alpha());
        assert!(
            (r.final_window_waf / expect - 1.0).abs() < 0.08,
            "{} vs {expect}",
            r.final_window_waf
        );
    }

    #[test]
    fn fill_writes_every_page_once_and_nothing_more() {
        let cfg = SsdConfig::from_physical(512, 64, 0.25).unwrap();
        let mut ftl = Ftl::new(&cfg).unwrap();
        let r = run(&mut ftl, &PreconditionConfig::fill()).unwrap();
        assert_eq!((r.fill_pages, r.overwrite_pages), (ftl.logical_pages(), 0));
        assert_eq!(ftl.stats().host_write_pages, ftl.logical_pages());
        assert_eq!(ftl.stats().gc_copy_pages, 0);
    }

    /// The device after mkfs (everything discarded), file writes and a journal file's
    /// deletion with no discard: valid exactly what the files occupied, the deleted file's
    /// LBAs included until the file system reuses them.
    #[test]
    fn mkfs_then_no_discard_holds_valid_what_the_files_occupied() {
        use crate::device::Ssd;
        use crate::fs_layout::AllocPolicy;
        use crate::replay::FsReplayer;
        let cfg = SsdConfig::from_physical(512, 64, 0.25).unwrap();
        let mut dev = Ssd::new(cfg).unwrap();
        // An aged device first, so mkfs has something to discard.
        dev.precondition(&PreconditionConfig::fill()).unwrap();
        let all = dev.logical_pages();
        assert_eq!(dev.ftl().mapped_pages(), all);
        dev.precondition(&PreconditionConfig::mkfs()).unwrap();
        assert_eq!(
            dev.ftl().mapped_pages(),
            0,
            "mkfs discards the whole device"
        );
        let mut fs = FsReplayer::new(all, AllocPolicy::FirstFit, false).unwrap();
        let (collection, journal, next_journal) = (1, 2, 3);
        fs.write(&mut dev, 0, collection, 0, 10 * 4096, 0).unwrap();
        fs.write(&mut dev, 1, journal, 0, 6 * 4096, 1).unwrap();
        assert_eq!(dev.ftl().mapped_pages(), 16);
        let first_lba = |fs: &FsReplayer, file| {
            let mut out = Vec::new();
            fs.layout().mapped(file, 0, 4096, &mut out);
            out.first().map(|&(lba, _)| lba)
        };
        let journal_lba = first_lba(&fs, journal).unwrap();
        fs.remove(&mut dev, 2, journal).unwrap();
        assert_eq!(dev.ftl().mapped_pages(), 16, "a deleted file stays valid");
        assert!(dev.ftl().lookup(journal_lba).is_some());
        assert_eq!(fs.stats().trimmed_pages, 0);
        // The next journal file reuses the deleted one's LBAs: nothing more becomes valid.
        fs.write(&mut dev, 3, next_journal, 0, 4 * 4096, 1).unwrap();
        assert_eq!(first_lba(&fs, next_journal), Some(journal_lba));
        assert_eq!(dev.ftl().mapped_pages(), 16);
        // Past the reused space, the file occupies new LBAs, which become valid.
        fs.write(&mut dev, 4, next_journal, 4 * 4096, 4 * 4096, 1)
            .unwrap();
        assert_eq!(dev.ftl().mapped_pages(), 18);
        assert_eq!(dev.stats().gc_copy_pages, 0);
    }

    #[test]
    fn reports_not_steady_when_the_budget_is_too_small() {
        let cfg = SsdConfig::from_physical(512, 64, 0.25).unwrap();
        let mut ftl = Ftl::new(&cfg).unwrap();
        let p = PreconditionConfig {
            max_overwrite_factor: 0.5,
            ..Default::default()
        };
        let r = run(&mut ftl, &p).unwrap();
        assert!(!r.steady);
        assert_eq!(r.fill_pages, ftl.logical_pages());
    }
}
