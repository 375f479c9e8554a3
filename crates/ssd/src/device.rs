//! The device: FTL plus (optionally) the timing model, fed host I/Os.

use crate::config::SsdConfig;
use crate::error::SsdError;
use crate::ftl::{FlashOp, Ftl, FtlStats, WafPoint};
use crate::precondition::PreconditionReport;
use crate::timing::{Timing, TimingReport};
use serde::{Deserialize, Serialize};

/// What a host I/O does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Read,
    Write,
    Trim,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Trim => "trim",
        }
    }
}

/// One host I/O at block level: `pages` 4 KiB pages from `lba`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOp {
    /// Trace time (ns); used only when the timing model paces I/Os by the trace.
    pub time_ns: u64,
    pub kind: OpKind,
    pub lba: u64,
    pub pages: u64,
    pub stream: u32,
}

/// Where block I/O goes: the simulated SSD, or anything else that wants the same LBA stream
/// (the placement oracle's death tracker follows the filesystem layout's writes and TRIMs
/// through it).
pub trait BlockDevice {
    /// Executes one host I/O; returns its completion time (ns) when the device keeps time.
    fn submit(&mut self, op: &HostOp) -> Result<Option<u64>, SsdError>;

    /// A hint that an op on `lba` comes soon (a replay knows its ops ahead): start loading
    /// what it will touch into the cache. `near`: it comes sooner, so the tables the far
    /// hint loaded can be read to reach the next level. Changes nothing the device reports.
    #[inline]
    fn prefetch(&self, lba: u64, near: bool) {
        let _ = (lba, near);
    }
}

impl BlockDevice for Ssd {
    fn submit(&mut self, op: &HostOp) -> Result<Option<u64>, SsdError> {
        Ssd::submit(self, op)
    }
    #[inline]
    fn prefetch(&self, lba: u64, near: bool) {
        self.ftl.prefetch(lba, near);
    }
}

/// A simulated SSD. Construct with [`Ssd::new`], feed it with [`Ssd::submit`] (or the
/// [`Ssd::write`]/[`Ssd::trim`]/[`Ssd::read`] shorthands), read results with
/// [`Ssd::report`].
pub struct Ssd {
    cfg: SsdConfig,
    ftl: Ftl,
    timing: Option<Timing>,
    ops: Vec<FlashOp>,
    write_ios: u64,
    read_ios: u64,
    trim_ios: u64,
    precondition: Option<PreconditionReport>,
}

/// Minimum, mean and maximum erase count over all erase blocks.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WearSummary {
    pub min: u32,
    pub mean: f64,
    pub max: u32,
}

/// Per-stream page counts.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StreamReport {
    pub stream: u32,
    pub host_pages: u64,
    /// GC copies of pages this stream wrote.
    pub gc_pages: u64,
}

/// Geometry derived from the configuration, spelled out in every report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DerivedGeometry {
    pub logical_pages: u64,
    pub physical_pages: u64,
    pub reclaim_units: u64,
    pub pages_per_reclaim_unit: u64,
    /// ρ = (T − U)/U.
    pub op: f64,
    /// sf = (T − U)/T.
    pub spare_factor: f64,
    /// α = T/U.
    pub alpha: f64,
    pub logical_bytes: u64,
}

/// Everything a run produced, plus the configuration that produced it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub config: SsdConfig,
    pub geometry: DerivedGeometry,
    pub precondition: Option<PreconditionReport>,
    /// Flash page programs / host page writes.
    pub write_amplification: f64,
    pub host_write_ios: u64,
    pub host_read_ios: u64,
    pub host_trim_ios: u64,
    pub counters: FtlStats,
    /// Host page writes + GC copies.
    pub flash_program_pages: u64,
    /// Host reads of mapped pages + GC copy reads.
    pub flash_read_pages: u64,
    pub erase_count: WearSummary,
    pub streams: Vec<StreamReport>,
    pub timing: Option<TimingReport>,
    /// Host page writes between two points of `waf_series` (0 = not recorded).
    pub waf_interval: u64,
    pub waf_series: Vec<WafPoint>,
}

impl Ssd {
    pub fn new(cfg: SsdConfig) -> Result<Self, SsdError> {
        let mut ftl = Ftl::new(&cfg)?;
        let timing = cfg
            .timing
            .as_ref()
            .map(|t| Timing::new(t, ftl.unit_pages()));
        ftl.set_recording(timing.is_some());
        Ok(Ssd {
            cfg,
            ftl,
            timing,
            ops: Vec::new(),
            write_ios: 0,
            read_ios: 0,
            trim_ios: 0,
            precondition: None,
        })
    }

    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }
    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }
    pub fn logical_pages(&self) -> u64 {
        self.ftl.logical_pages()
    }
    pub fn stats(&self) -> &FtlStats {
        self.ftl.stats()
    }
    pub fn write_amplification(&self) -> f64 {
        self.ftl.stats().write_amplification()
    }

    /// Executes one host I/O; returns its completion time (ns) when timing is on.
    pub fn submit(&mut self, op: &HostOp) -> Result<Option<u64>, SsdError> {
        let issue = self.timing.as_mut().map(|t| t.issue_time(op.time_ns));
        match op.kind {
            OpKind::Write => {
                self.ftl.write(op.lba, op.pages, op.stream)?;
                self.write_ios += 1;
            }
            OpKind::Read => {
                self.ftl.read(op.lba, op.pages)?;
                self.read_ios += 1;
            }
            OpKind::Trim => {
                self.ftl.trim(op.lba, op.pages)?;
                self.trim_ios += 1;
            }
        }
        let (Some(t), Some(issue)) = (self.timing.as_mut(), issue) else {
            return Ok(None);
        };
        self.ftl.take_ops(&mut self.ops);
        let done = match op.kind {
            OpKind::Write => t.host_write(issue, op.pages, &self.ops),
            OpKind::Read => t.host_read(issue, op.pages, &self.ops),
            OpKind::Trim => t.host_trim(issue, op.pages),
        };
        Ok(Some(done))
    }

    pub fn write(&mut self, lba: u64, pages: u64, stream: u32) -> Result<Option<u64>, SsdError> {
        self.submit(&HostOp {
            time_ns: 0,
            kind: OpKind::Write,
            lba,
            pages,
            stream,
        })
    }
    pub fn trim(&mut self, lba: u64, pages: u64) -> Result<Option<u64>, SsdError> {
        self.submit(&HostOp {
            time_ns: 0,
            kind: OpKind::Trim,
            lba,
            pages,
            stream: 0,
        })
    }
    pub fn read(&mut self, lba: u64, pages: u64) -> Result<Option<u64>, SsdError> {
        self.submit(&HostOp {
            time_ns: 0,
            kind: OpKind::Read,
            lba,
            pages,
            stream: 0,
        })
    }

    /// Brings the device to an aged steady state (see [`crate::precondition`]), then zeroes
    /// every counter and the timing clocks; the report keeps what preconditioning found.
    pub fn precondition(
        &mut self,
        p: &crate::precondition::PreconditionConfig,
    ) -> Result<PreconditionReport, SsdError> {
        let recording = self.timing.is_some();
        self.ftl.set_recording(false);
        let r = crate::precondition::run(&mut self.ftl, p)?;
        self.ftl.set_recording(recording);
        self.reset_stats();
        self.precondition = Some(r.clone());
        Ok(r)
    }

    /// Zeroes counters, the WAF series and the timing statistics; keeps the device state.
    /// Use after a trace's warm-up part.
    pub fn reset_stats(&mut self) {
        self.ftl.reset_stats();
        if let Some(t) = self.timing.as_mut() {
            t.reset();
        }
        self.write_ios = 0;
        self.read_ios = 0;
        self.trim_ios = 0;
    }

    pub fn report(&self) -> Report {
        let s = self.ftl.stats().clone();
        let ec = self.ftl.erase_counts();
        let erase_count = WearSummary {
            min: ec.iter().copied().min().unwrap_or(0),
            mean: ec.iter().map(|&e| e as f64).sum::<f64>() / ec.len().max(1) as f64,
            max: ec.iter().copied().max().unwrap_or(0),
        };
        let streams = (0..self.ftl.streams() as usize)
            .map(|i| StreamReport {
                stream: i as u32,
                host_pages: s.per_stream_host_pages[i],
                gc_pages: s.per_stream_gc_pages[i],
            })
            .collect();
        let c = &self.cfg;
        Report {
            config: c.clone(),
            geometry: DerivedGeometry {
                logical_pages: c.logical_pages,
                physical_pages: c.physical_pages(),
                reclaim_units: c.units(),
                pages_per_reclaim_unit: c.unit_pages(),
                op: c.op(),
                spare_factor: c.spare_factor(),
                alpha: c.alpha(),
                logical_bytes: c.logical_pages * crate::config::PAGE_BYTES,
            },
            precondition: self.precondition.clone(),
            write_amplification: s.write_amplification(),
            host_write_ios: self.write_ios,
            host_read_ios: self.read_ios,
            host_trim_ios: self.trim_ios,
            flash_program_pages: s.host_write_pages + s.gc_copy_pages,
            flash_read_pages: s.host_read_pages - s.host_read_unmapped_pages + s.gc_copy_pages,
            erase_count,
            streams,
            timing: self.timing.as_ref().map(|t| t.report()),
            waf_interval: c.waf_interval,
            waf_series: self.ftl.waf_series().to_vec(),
            counters: s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TimingConfig;

    #[test]
    fn timed_replay_reports_latency_and_throughput() {
        let mut cfg = SsdConfig::from_physical(256, 64, 0.2).unwrap();
        cfg.timing = Some(TimingConfig::default());
        let mut ssd = Ssd::new(cfg).unwrap();
        let n = ssd.logical_pages();
        let mut x = 12345u64;
        for i in 0..3 * n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lba = if i < n { i } else { (x >> 33) % n };
            ssd.write(lba, 1, 0).unwrap();
            if i % 4 == 0 {
                ssd.read((x >> 20) % n, 1).unwrap();
            }
        }
        let r = ssd.report();
        let t = r.timing.unwrap();
        assert!(r.write_amplification > 1.0);
        assert!(t.iops > 0.0 && t.mb_per_s > 0.0 && t.makespan_ns > 0);
        assert!(t.write_latency.p50_us > 0.0);
        assert!(t.write_latency.p99_9_us >= t.write_latency.p99_us);
        assert!(t.write_latency.p99_us >= t.write_latency.p50_us);
        assert!(t.die_utilization > 0.0 && t.die_utilization <= 1.0 + 1e-9);
        // GC shows in the tail: the worst writes waited behind erases (3.8 ms).
        assert!(t.write_latency.max_us > 3800.0, "{:?}", t.write_latency);
        assert!(t.read_latency.count > 0);
    }

    #[test]
    fn erase_summary_and_streams_in_report() {
        let mut cfg = SsdConfig::from_physical(64, 16, 0.25).unwrap();
        cfg.streams = 2;
        let mut ssd = Ssd::new(cfg).unwrap();
        let n = ssd.logical_pages();
        for r in 0..5 {
            for l in 0..n {
                ssd.write(l, 1, (r % 2) as u32).unwrap();
            }
        }
        let r = ssd.report();
        assert!(r.erase_count.max >= r.erase_count.min && r.erase_count.max > 0);
        assert_eq!(r.streams.len(), 2);
        assert_eq!(r.streams[0].host_pages + r.streams[1].host_pages, 5 * n);
        assert_eq!(r.geometry.logical_pages, n);
    }
}
