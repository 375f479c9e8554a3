//! Simulator speed: host page writes simulated per second at steady state (one core).
//! Not a test — wall-clock figures are measured and reported, never asserted.

use crate::config::SsdConfig;
use crate::device::Ssd;
use crate::error::SsdError;
use crate::precondition::{PreconditionConfig, PreconditionReport};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub label: String,
    pub config: SsdConfig,
    pub precondition: PreconditionReport,
    pub host_page_writes: u64,
    pub seconds: f64,
    pub host_page_writes_per_sec: f64,
    pub write_amplification: f64,
}

/// Preconditions `cfg`, then times `measure_factor · U` uniform random single-page writes
/// through [`Ssd::submit`] (the timing model runs too when `cfg.timing` is set). The random
/// number generation is inside the timed loop.
pub fn run(
    label: &str,
    cfg: SsdConfig,
    measure_factor: f64,
    seed: u64,
) -> Result<BenchResult, SsdError> {
    let mut ssd = Ssd::new(cfg.clone())?;
    let pre = ssd.precondition(&PreconditionConfig {
        seed,
        ..Default::default()
    })?;
    let u = ssd.logical_pages();
    let n = (u as f64 * measure_factor) as u64;
    let mut rng = StdRng::seed_from_u64(seed ^ 0xb3);
    let start = Instant::now();
    for _ in 0..n {
        let lba = ((rng.gen::<u64>() as u128 * u as u128) >> 64) as u64;
        ssd.write(lba, 1, 0)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(BenchResult {
        label: label.to_string(),
        config: cfg,
        precondition: pre,
        host_page_writes: n,
        seconds,
        host_page_writes_per_sec: n as f64 / seconds,
        write_amplification: ssd.write_amplification(),
    })
}
