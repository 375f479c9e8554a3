//! Device configuration: geometry, over-provisioning, streams, GC policy and timing.
//!
//! Over-provisioning is stated as **ρ = (T − U) / U** (physical minus user pages, over user
//! pages) — the vendor "7 % OP" convention and Agarwal & Marrow's. The spare factor
//! sf = (T − U) / T (Hu et al. 2009, MQSim's `Overprovisioning_Ratio`) and α = T / U
//! (Desnoyers) are reported next to it; see `docs/ssd.md`.

use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Bytes in one logical page (LBA); every address in this crate counts these pages.
pub const PAGE_BYTES: u64 = 4096;

/// Which full reclaim unit GC erases next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// Fewest valid pages (ties: [`GcTie`], by default the unit that reached that count last).
    Greedy,
    /// Highest (1 − u)·age / (1 + u) (Rosenblum & Ousterhout, LFS, SOSP'91); age = host page
    /// writes since the unit was sealed.
    CostBenefit,
    /// Sample d full units uniformly, take the one with fewest valid pages (Van Houdt,
    /// SIGMETRICS'13; MQSim's RGA).
    DChoices,
    /// The unit sealed longest ago (the log-structured baseline of the Lambert-W model).
    Fifo,
    /// A uniformly random full unit.
    Random,
}

impl GcPolicy {
    pub fn name(self) -> &'static str {
        match self {
            GcPolicy::Greedy => "greedy",
            GcPolicy::CostBenefit => "cost-benefit",
            GcPolicy::DChoices => "d-choices",
            GcPolicy::Fifo => "fifo",
            GcPolicy::Random => "random",
        }
    }
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        Ok(match s {
            "greedy" => GcPolicy::Greedy,
            "cost-benefit" => GcPolicy::CostBenefit,
            "d-choices" => GcPolicy::DChoices,
            "fifo" => GcPolicy::Fifo,
            "random" => GcPolicy::Random,
            _ => {
                return Err(ConfigError(format!(
                    "unknown GC policy {s:?} (greedy, cost-benefit, d-choices, fifo, random)"
                )))
            }
        })
    }
}

/// Which unit greedy GC takes among those with equally few valid pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcTie {
    /// The unit that reached that valid count last (a stack per count; the default, and what
    /// every committed result used).
    #[default]
    Newest,
    /// The unit that reached that valid count first (a queue per count): its remaining pages
    /// have survived longest at that count, so they are the likeliest to be cold.
    Oldest,
}

impl GcTie {
    pub fn name(self) -> &'static str {
        match self {
            GcTie::Newest => "newest",
            GcTie::Oldest => "oldest",
        }
    }
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        match s {
            "newest" => Ok(GcTie::Newest),
            "oldest" => Ok(GcTie::Oldest),
            o => Err(ConfigError(format!(
                "unknown greedy tie-break {o:?} (newest, oldest)"
            ))),
        }
    }
}

/// Where GC puts the valid pages it copies out of a victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcDest {
    /// One GC destination unit per pool, apart from every host stream: pages that survived a
    /// GC are older than fresh host writes, so mixing them back would dilute the separation the
    /// streams bought (the "SepGC" baseline of SepBIT).
    Separate,
    /// Each copied page goes back to the open unit of the stream that wrote it.
    SameStream,
}

/// How physical pages are spread over dies (timing only; the FTL does not care).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DieStripe {
    /// Each program goes to the die that can start it first, whatever unit or stream it
    /// belongs to: a controller buffers incoming pages and programs whichever die is idle
    /// (MQSim's dynamic page allocation). Open units of different streams then never queue
    /// behind each other on a die that another die could have served.
    Dynamic,
    /// Consecutive pages of a unit go to consecutive dies: the unit is a superblock across
    /// dies, as controllers build them to write all dies in parallel (FEMU "lines").
    Page,
    /// A whole unit lives on one die (unit i on die i mod dies).
    Unit,
}

/// The timing model's parameters. Defaults: an MLC SATA SSD of the Samsung 840 Pro's class;
/// the sources are listed in `docs/ssd.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingConfig {
    pub channels: u32,
    pub dies_per_channel: u32,
    /// Page read (array to register), ns.
    pub t_read_ns: u64,
    /// Page program, ns.
    pub t_prog_ns: u64,
    /// Block erase, ns.
    pub t_erase_ns: u64,
    /// One 4 KiB page over the flash channel, ns.
    pub t_xfer_ns: u64,
    /// One 4 KiB page over the host link (SATA 6 Gb/s), ns.
    pub t_host_xfer_ns: u64,
    /// Host commands in flight at most (NCQ depth).
    pub queue_depth: u32,
    /// Pages of one physical block on one die (tBERS erases this much). An FTL erase unit
    /// striped over the dies holds only `unit_pages / dies` pages per die; each die is charged
    /// tBERS in proportion to the share of a physical block it frees, so the erase cost per
    /// page is the real device's whatever the simulated unit size (lab-sized devices use small
    /// units to keep thousands of them).
    #[serde(default = "default_block_pages")]
    pub block_pages: u32,
    pub stripe: DieStripe,
    /// `true`: issue each I/O at its trace time (open loop); `false`: issue as soon as a queue
    /// slot is free (closed loop, gives the sustainable throughput).
    pub use_trace_time: bool,
    /// The cost of a TRIM command (see `docs/ssd.md` for the sources).
    #[serde(default)]
    pub trim: TrimCost,
}

/// What one TRIM command (ATA DATA SET MANAGEMENT) costs the host. On SATA before 3.1 —
/// and on the Samsung 8xx drives, whose queued TRIM Linux disables — TRIM is a non-queued
/// command: the host drains the queue, issues it alone, and issues nothing else until it
/// completes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrimCost {
    /// `false`: non-queued (drain first, exclusive until done); `true`: queued like any I/O.
    pub queued: bool,
    /// Fixed time of one command, ns.
    pub command_ns: u64,
    /// Time per 4 KiB page the command unmaps, ns.
    pub per_page_ns: u64,
}

impl Default for TrimCost {
    /// A Samsung 840 Pro under Linux 3.13 (the seeds' drive and kernel): non-queued (Linux
    /// never used queued TRIM on it), 1 ms per command and 40 ns per 4 KiB page unmapped. The
    /// drain rule is libata's (`ata_std_qc_defer`); the two times are estimates between the
    /// 10 ms measured on a 2011 SandForce drive and a DRAM mapping update — no measurement of
    /// the 840 Pro exists. Sources and the sensitivity sweep: `docs/ssd.md`.
    fn default() -> Self {
        TrimCost {
            queued: false,
            command_ns: 1_000_000,
            per_page_ns: 40,
        }
    }
}

impl TrimCost {
    /// No cost at all (the model before it charged TRIMs).
    pub fn free() -> Self {
        TrimCost {
            queued: true,
            command_ns: 0,
            per_page_ns: 0,
        }
    }
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            channels: 8,
            dies_per_channel: 4,
            t_read_ns: 75_000,
            t_prog_ns: 750_000,
            t_erase_ns: 3_800_000,
            // 4096 B at 400 MT/s on an 8-bit Toggle DDR 2.0 bus.
            t_xfer_ns: 10_240,
            // 4096 B at 600 MB/s (6 Gb/s with 8b/10b coding).
            t_host_xfer_ns: 6_827,
            queue_depth: 32,
            block_pages: default_block_pages(),
            stripe: DieStripe::Dynamic,
            use_trace_time: false,
            trim: TrimCost::default(),
        }
    }
}

fn default_block_pages() -> u32 {
    256
}

impl TimingConfig {
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }
}

/// Everything that defines a simulated device. The primary geometry is `logical_pages` (what
/// the host sees) and `physical_blocks` (what the flash holds); over-provisioning is derived
/// from them. Build one with [`SsdConfig::with_op`] or [`SsdConfig::from_physical`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SsdConfig {
    /// User-visible 4 KiB pages (LBAs 0..logical_pages).
    pub logical_pages: u64,
    /// Physical erase blocks.
    pub physical_blocks: u64,
    pub pages_per_block: u32,
    /// Erase blocks per reclaim unit: GC picks, copies and erases whole reclaim units
    /// (1 = classic block-granular GC; >1 models FDP reclaim units or superblocks).
    pub blocks_per_ru: u32,
    /// Host streams 0..streams; stream 0 is the default stream.
    pub streams: u32,
    pub gc: GcPolicy,
    /// [`GcPolicy::Greedy`]'s choice among equally full units.
    #[serde(default)]
    pub gc_tie: GcTie,
    /// Sample size of [`GcPolicy::DChoices`].
    pub d_choices: u32,
    pub gc_dest: GcDest,
    /// GC runs while a pool has fewer free reclaim units than this (≥ 2, see `ftl.rs`).
    pub gc_low_water: u32,
    /// Empty: all streams share one pool of reclaim units. Otherwise one entry per stream:
    /// the reclaim units set aside for that stream (isolation, FDP-style); they must add up to
    /// all reclaim units. This is how spare capacity is split between streams.
    pub pool_units: Vec<u64>,
    /// Seed of the simulator's own randomness (d-choices, random victims).
    pub seed: u64,
    /// A write-amplification time-series point every this many host page writes (0 = none).
    pub waf_interval: u64,
    /// `None`: count pages only (fastest); `Some`: also compute completion times.
    pub timing: Option<TimingConfig>,
}

impl SsdConfig {
    /// The defaults with a user capacity of `logical_pages` and over-provisioning
    /// ρ = (T − U)/U = `op`: physical blocks = ⌈U·(1+ρ) / pages per reclaim unit⌉ reclaim units.
    pub fn with_op(logical_pages: u64, op: f64) -> Result<Self, ConfigError> {
        let mut c = Self::template(logical_pages, 0);
        c.set_op(op)?;
        Ok(c)
    }

    /// The defaults with `physical_blocks` erase blocks and U = ⌊T / (1+ρ)⌋ user pages.
    pub fn from_physical(
        physical_blocks: u64,
        pages_per_block: u32,
        op: f64,
    ) -> Result<Self, ConfigError> {
        check_op(op)?;
        let mut c = Self::template(0, physical_blocks);
        c.pages_per_block = pages_per_block;
        c.logical_pages =
            ((physical_blocks * pages_per_block as u64) as f64 / (1.0 + op)).floor() as u64;
        c.validate()?;
        Ok(c)
    }

    fn template(logical_pages: u64, physical_blocks: u64) -> Self {
        SsdConfig {
            logical_pages,
            physical_blocks,
            pages_per_block: 256,
            blocks_per_ru: 1,
            streams: 8,
            gc: GcPolicy::Greedy,
            gc_tie: GcTie::Newest,
            d_choices: 10,
            gc_dest: GcDest::Separate,
            gc_low_water: 2,
            pool_units: Vec::new(),
            seed: 1,
            waf_interval: 0,
            timing: None,
        }
    }

    /// Re-derives `physical_blocks` from `logical_pages`, the current geometry and `op`.
    pub fn set_op(&mut self, op: f64) -> Result<(), ConfigError> {
        check_op(op)?;
        if self.pages_per_block == 0 || self.blocks_per_ru == 0 {
            return Err(ConfigError(
                "pages per block and blocks per reclaim unit must be > 0".into(),
            ));
        }
        let unit = self.unit_pages() as f64;
        let units = (self.logical_pages as f64 * (1.0 + op) / unit).ceil() as u64;
        self.physical_blocks = units * self.blocks_per_ru as u64;
        self.validate()
    }

    pub fn unit_pages(&self) -> u64 {
        self.pages_per_block as u64 * self.blocks_per_ru as u64
    }
    pub fn units(&self) -> u64 {
        self.physical_blocks / self.blocks_per_ru.max(1) as u64
    }
    pub fn physical_pages(&self) -> u64 {
        self.physical_blocks * self.pages_per_block as u64
    }
    /// ρ = (T − U) / U.
    pub fn op(&self) -> f64 {
        (self.physical_pages() as f64 - self.logical_pages as f64) / self.logical_pages as f64
    }
    /// sf = (T − U) / T.
    pub fn spare_factor(&self) -> f64 {
        (self.physical_pages() as f64 - self.logical_pages as f64) / self.physical_pages() as f64
    }
    /// α = T / U.
    pub fn alpha(&self) -> f64 {
        self.physical_pages() as f64 / self.logical_pages as f64
    }
    /// Number of pools (1 when all streams share).
    pub fn pools(&self) -> usize {
        self.pool_units.len().max(1)
    }

    /// Rejects geometry that cannot work, with a message that says why.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if self.pages_per_block == 0 {
            return err("pages per block must be > 0".into());
        }
        if self.blocks_per_ru == 0 {
            return err("blocks per reclaim unit must be > 0".into());
        }
        if self.physical_blocks == 0 {
            return err("the device has zero physical blocks".into());
        }
        if self.logical_pages == 0 {
            return err("the device has zero logical pages".into());
        }
        if !self
            .physical_blocks
            .is_multiple_of(self.blocks_per_ru as u64)
        {
            return err(format!(
                "{} physical blocks is not a whole number of {}-block reclaim units",
                self.physical_blocks, self.blocks_per_ru
            ));
        }
        if self.physical_pages() <= self.logical_pages {
            return err(format!(
                "over-provisioning must be > 0: {} physical pages for {} logical pages",
                self.physical_pages(),
                self.logical_pages
            ));
        }
        // Page and unit numbers are u32 in the hot tables; u32::MAX marks "none".
        if self.physical_pages() >= u32::MAX as u64 {
            return err(format!(
                "{} physical pages exceed the model's limit of 2^32 − 1 (16 TiB)",
                self.physical_pages()
            ));
        }
        if self.streams == 0 || self.streams > 256 {
            return err(format!("streams must be 1..=256, not {}", self.streams));
        }
        if self.gc_low_water < 2 {
            return err("gc_low_water must be ≥ 2 (GC needs one free unit to copy into)".into());
        }
        if let Some(t) = &self.timing {
            if t.channels == 0 || t.dies_per_channel == 0 || t.dies() > 255 {
                return err(format!(
                    "timing needs 1 to 255 dies, not {} channels × {} dies",
                    t.channels, t.dies_per_channel
                ));
            }
        }
        if self.gc == GcPolicy::DChoices && self.d_choices == 0 {
            return err("d-choices needs d ≥ 1".into());
        }
        if self.pool_units.len() > 1 && self.pool_units.len() != self.streams as usize {
            return err(format!(
                "{} pools given for {} streams: give one per stream, or none",
                self.pool_units.len(),
                self.streams
            ));
        }
        if !self.pool_units.is_empty() && self.pool_units.iter().sum::<u64>() != self.units() {
            return err(format!(
                "pool sizes add up to {} reclaim units, the device has {}",
                self.pool_units.iter().sum::<u64>(),
                self.units()
            ));
        }
        // Each pool needs its free reserve, the GC destination and every host open unit of its
        // streams, plus at least one unit that holds data.
        let streams_per_pool = if self.pool_units.len() > 1 {
            1
        } else {
            self.streams as u64
        };
        let need = self.gc_low_water as u64 + 1 + streams_per_pool + 1;
        let pools: Vec<u64> = if self.pool_units.is_empty() {
            vec![self.units()]
        } else {
            self.pool_units.clone()
        };
        for (i, &p) in pools.iter().enumerate() {
            if p < need {
                return err(format!(
                    "pool {i} has {p} reclaim units; it needs at least {need} (free reserve, GC and open units)"
                ));
            }
        }
        if let Some(t) = &self.timing {
            if t.channels == 0 || t.dies_per_channel == 0 {
                return err("timing: channels and dies per channel must be > 0".into());
            }
            if t.queue_depth == 0 {
                return err("timing: queue depth must be > 0".into());
            }
        }
        Ok(())
    }
}

fn check_op(op: f64) -> Result<(), ConfigError> {
    if !op.is_finite() || op <= 0.0 {
        return Err(ConfigError(format!(
            "over-provisioning must be a number > 0, not {op}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_conversions_agree() {
        let c = SsdConfig::with_op(1_000_000, 0.07).unwrap();
        assert!(c.physical_pages() as f64 >= 1_070_000.0);
        assert!((c.op() - 0.07).abs() < 0.001);
        let sf = c.spare_factor();
        assert!((sf - c.op() / (1.0 + c.op())).abs() < 1e-12);
        assert!((c.alpha() - (1.0 + c.op())).abs() < 1e-12);
    }

    #[test]
    fn nonsense_geometry_is_rejected() {
        assert!(SsdConfig::with_op(1000, 0.0).is_err());
        assert!(SsdConfig::with_op(1000, -0.1).is_err());
        assert!(SsdConfig::with_op(1000, f64::NAN).is_err());
        assert!(SsdConfig::from_physical(0, 256, 0.07).is_err());
        assert!(SsdConfig::from_physical(100, 0, 0.07).is_err());
        let e = SsdConfig::from_physical(4, 256, 0.07).unwrap_err();
        assert!(e.0.contains("reclaim units"), "{e}");
        let mut c = SsdConfig::with_op(100_000, 0.1).unwrap();
        c.pool_units = vec![1, 2];
        assert!(c.validate().unwrap_err().0.contains("pools"));
    }
}
