//! Errors. Every message names what was wrong and, for input, where.

use thiserror::Error;

/// A configuration that cannot describe a working device.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("bad SSD configuration: {0}")]
pub struct ConfigError(pub String);

/// Errors while simulating.
#[derive(Debug, Error)]
pub enum SsdError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("LBA {lba} (+{pages} pages) is beyond the device's {capacity} logical pages (use --size-to-trace to size the device to the trace)")]
    OutOfRange { lba: u64, pages: u64, capacity: u64 },
    #[error("stream {stream} but the device has {streams} streams (0..{streams})")]
    BadStream { stream: u32, streams: u32 },
    #[error("GC cannot free a unit in pool {pool}: every candidate is fully valid (over-provisioning too small for the open units?)")]
    NoVictim { pool: usize },
    #[error("the filesystem layout is full: {needed} more pages needed, {capacity} pages in all")]
    LayoutFull { needed: u64, capacity: u64 },
    #[error("{0}")]
    Layout(String),
    #[error("trace {path}: line {line}: {msg}")]
    TraceLine {
        path: String,
        line: u64,
        msg: String,
    },
    #[error("trace {path}: {msg}")]
    Trace { path: String, msg: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
