//! YCSB 0.17.0 (brianfrankcooper/YCSB, tag 0.17.0): the generator core of `CoreWorkload`,
//! reimplemented from the notes in `notes/workloads.md` (no upstream code is copied).
//!
//! Java's `ThreadLocalRandom` cannot be reproduced and need not be: every generator here draws
//! from an `rand::Rng` the caller passes in, so a run is reproducible from its seed. Everything
//! that is deterministic in YCSB (the FNV hash, key names, ζ constants, the scrambling, the
//! formulas) is reproduced exactly, including its quirks, which are documented where they occur.

pub mod generator;

pub use generator::{
    build_key_name, fnvhash64, write_key_name, zeta, zeta_incremental,
    AcknowledgedCounterGenerator, ClassZipfianGenerator, CounterGenerator, DiscreteGenerator,
    HotspotIntegerGenerator, KeyCounter, KeyOrder, NumberGenerator, ScrambledZipfianGenerator,
    SkewedLatestGenerator, TooManyUnacknowledged, UniformLongGenerator, ZipfianGenerator,
    ACK_WINDOW_SIZE, SCRAMBLED_ITEM_COUNT, SCRAMBLED_ZETAN, ZIPFIAN_CONSTANT,
};

pub mod workload;

pub use workload::{
    prepare_load, random_bytes, run_load, run_ops, Op, OpKind, RequestDistribution,
    ScanLengthDistribution, ThreadWorkload, Workload, YcsbConfig, YcsbReport,
    DEFAULT_ZIPFIAN_CLASSES,
};
