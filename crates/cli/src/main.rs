//! The `flashdoc` command.

use clap::{Parser, Subcommand};

/// MongoDB ships with tcmalloc for the reason flashdoc uses mimalloc: a page is decoded by one
/// thread and freed by another (eviction), and glibc's malloc serializes those frees on the
/// decoding thread's arena lock (measured in `engine-bench`; docs/engine.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's C API, from the library `mimalloc` links (the crate binds only the allocator).
extern "C" {
    fn mi_collect(force: bool);
}

/// Has mimalloc give back now the pages freed since it last did. mimalloc (v3) frees a page
/// the moment its last block goes, but returns it to the system (purges it) only when a later
/// page free, abandonment or collection on some thread finds the purge delay past; a forced
/// collection purges every arena's freed pages at once. The server calls this after the
/// checkpoint that frees a closed burst's records (`server::burst`).
fn return_freed_pages() {
    // SAFETY: mi_collect takes no arguments to trust; it collects the calling thread's own heap
    // and purges the arenas under mimalloc's own synchronization, from any thread.
    unsafe { mi_collect(true) }
}

mod bench_cmd;
mod bench_windows;
mod cluster_cmd;
mod engine_bench;
mod lab_cmd;
mod placement_cmd;
mod repair_cmd;
mod serve_cmd;
mod ssd_cmd;

#[derive(Parser)]
#[command(
    name = "flashdoc",
    version,
    about = "flashdoc: a flash-aware document database and the lab that measures it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The SSD simulator: replay traces, validate the model against theory.
    Ssd(ssd_cmd::SsdArgs),
    /// Placement policies offline: replay an event trace on the simulated SSD.
    Placement(placement_cmd::PlacementArgs),
    /// The lab: run experiments on the engine and the simulated SSD, write reports.
    Lab(lab_cmd::LabArgs),
    /// Run the MongoDB-compatible server (a shard with --shardsvr).
    Serve(serve_cmd::ServeArgs),
    /// Repair a database that `serve` refused to open (mongod's --repair): salvage the
    /// journal's verifiable records, verify the table files, rebuild every index.
    Repair(repair_cmd::RepairArgs),
    /// Run a router (mongos) of a sharded cluster whose metadata lives in etcd.
    Router(cluster_cmd::RouterArgs),
    /// Start or stop a local sharded cluster: etcd, shards and a router.
    Cluster(cluster_cmd::ClusterArgs),
    /// Benchmark the storage engine alone (YCSB-style load + read/update mix).
    EngineBench(engine_bench::EngineBenchArgs),
    /// Run YCSB or LinkBench against flashdoc (in-process) or any MongoDB-compatible server.
    Bench(bench_cmd::BenchArgs),
}

fn main() -> anyhow::Result<()> {
    server::burst::set_return_freed_pages(return_freed_pages);
    let cli = Cli::parse();
    match cli.command {
        Command::Ssd(args) => ssd_cmd::run(args),
        Command::EngineBench(args) => engine_bench::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Placement(args) => placement_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Repair(args) => repair_cmd::run(args),
        Command::Router(args) => cluster_cmd::run_router(args),
        Command::Cluster(args) => cluster_cmd::run_cluster(args),
        Command::Lab(args) => lab_cmd::run(args),
    }
}
