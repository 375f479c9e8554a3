//! `ssd`: a flash SSD model for flashdoc's lab — page-mapped FTL with streams, reclaim units,
//! greedy / cost-benefit / d-choices / FIFO / random GC, TRIM, wear counts and a channel × die
//! timing model; trace formats and replay; preconditioning; the analytical models it is
//! validated against. It depends on no other flashdoc crate. See `docs/ssd.md`.
//!
//! ```
//! use ssd::{Ssd, SsdConfig};
//! let mut cfg = SsdConfig::with_op(100_000, 0.07).unwrap(); // 100 k logical 4 KiB pages, ρ = 7 %
//! cfg.streams = 2;
//! let mut dev = Ssd::new(cfg).unwrap();
//! dev.write(0, 16, 1).unwrap();   // 16 pages from LBA 0 on stream 1
//! dev.trim(0, 8).unwrap();
//! dev.read(8, 8).unwrap();
//! let report = dev.report();      // serde-serialisable; includes the configuration
//! assert_eq!(report.write_amplification, 1.0);
//! ```

pub mod bench;
pub mod config;
pub mod device;
pub mod error;
pub mod fs_layout;
pub mod ftl;
pub mod precondition;
pub mod replay;
pub mod theory;
pub mod timing;
pub mod trace;
pub mod validate;

pub use config::{DieStripe, GcDest, GcPolicy, GcTie, SsdConfig, TimingConfig, PAGE_BYTES};
pub use device::{BlockDevice, HostOp, OpKind, Report, Ssd};
pub use error::{ConfigError, SsdError};

pub use fs_layout::{AllocPolicy, FsLayout};
pub use precondition::{PreconditionConfig, PreconditionMode, PreconditionReport};
