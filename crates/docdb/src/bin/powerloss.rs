//! `flashdoc-docdb-powerloss`: the power-loss crash loop through the document layer (see
//! `powerloss/crashloop.rs`).
//!
//! ```text
//! flashdoc-docdb-powerloss [--seed S] [--seeds N] [--cycles N] [--steps N] [--lineage N]
//!                          [--mutation none|metadata-fsync|dir-fsync] [--work DIR]
//!                          [--engine wiredTiger|mmapv1]
//! ```
//!
//! Runs seeds S..S+N, `--cycles` cycles each (defaults: seed 1, 1 seed, 100 cycles, 60 steps,
//! lineage 10, work dir under the system's temporary directory, the copy-on-write engine
//! `wiredTiger`; `mmapv1` is the in-place engine). Exits 1 at the first failure,
//! printing the seed and the cycle that reproduce it.

#[path = "powerloss/crashloop.rs"]
mod crashloop;

use engine::io::{CrashOdds, Mutation};
use engine::EngineKind;

fn parse(args: &[String]) -> Result<(crashloop::Settings, u64, std::path::PathBuf), String> {
    let mut s = crashloop::Settings {
        seed: 1,
        cycles: 100,
        steps: 60,
        lineage: 10,
        mutation: Mutation::None,
        odds: CrashOdds::default(),
        engine: EngineKind::Disk,
    };
    let mut seeds = 1;
    let mut work = std::env::temp_dir().join("flashdoc-docdb-powerloss");
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--seed" => s.seed = num()?,
            "--seeds" => seeds = num()?,
            "--cycles" => s.cycles = num()?,
            "--steps" => s.steps = num()? as usize,
            "--lineage" => s.lineage = num()?,
            "--work" => work = value.into(),
            "--engine" => {
                s.engine = match value.as_str() {
                    "wiredTiger" => EngineKind::Disk,
                    "mmapv1" => EngineKind::Mmapv1,
                    _ => return Err(format!("unknown engine {value} (wiredTiger or mmapv1)")),
                }
            }
            "--mutation" => {
                s.mutation = match value.as_str() {
                    "none" => Mutation::None,
                    "metadata-fsync" => Mutation::SkipMetadataFsync,
                    "dir-fsync" => Mutation::SkipRootDirFsync,
                    _ => return Err(format!("unknown mutation {value}")),
                }
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok((s, seeds, work))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (settings, seeds, work) = parse(&args).unwrap_or_else(|e| {
        eprintln!("flashdoc-docdb-powerloss: {e}");
        std::process::exit(2);
    });
    let (mut cycles, mut ops, mut acked) = (0, 0, 0);
    for seed in settings.seed..settings.seed + seeds {
        let s = crashloop::Settings {
            seed,
            ..settings.clone()
        };
        match crashloop::run(&s, &work.join(format!("seed{seed}"))) {
            Ok(r) => {
                println!(
                    "seed {seed}: {} cycles, {} operations, {} acknowledged durable, {} crashes during recovery: ok",
                    r.cycles, r.ops, r.acknowledged, r.crashed_in_open
                );
                cycles += r.cycles;
                ops += r.ops;
                acked += r.acknowledged;
                let _ = std::fs::remove_dir_all(work.join(format!("seed{seed}")));
            }
            Err(e) => {
                println!("FAILED {e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "total ({}): {cycles} cycles, {ops} operations, {acked} acknowledged durable, 0 lost, 0 corrupt",
        docdb::config::engine_kind_name(settings.engine)
    );
}
