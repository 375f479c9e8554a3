//! The compression experiment's section: every configuration it ran — WiredTiger's block
//! compressors on the copy-on-write engine and the in-place engine in MMAPv1's design — beside
//! the chapter's Tables 10.3–10.5 (seed 001 §10.3), each measure as seconds or megabytes and
//! as a ratio to uncompressed WiredTiger, ours and the chapter's.

use super::{f, Report};
use crate::chapter10::READ_PASSES;
use crate::experiment::IN_PLACE;
use crate::plot::{self, Bars};
use crate::run::EngineRun;
use anyhow::Result;
use std::path::Path;

/// The chapter's configurations, in its columns' order.
const CHAPTER_COLUMNS: [&str; 4] = ["MMAPv1", "WT", "WT snappy", "WT zlib"];

/// Table 10.3 (a fresh dbPath, 160 000 documents): startup, insert job, shutdown (s), and
/// disk use (MB, `du` of the dbPath after the shutdown).
const T10_3_STARTUP: [f64; 4] = [102.0, 2.0, 1.0, 2.0];
const T10_3_INSERT: [f64; 4] = [105.0, 92.0, 93.0, 104.0];
const T10_3_SHUTDOWN: [f64; 4] = [1.0, 3.0, 2.0, 3.0];
const T10_3_DISK_MB: [f64; 4] = [4128.04, 560.56, 380.27, 326.67];
/// Table 10.4 (the read job's restart on that dbPath): startup, read job, shutdown (s).
const T10_4_STARTUP: [f64; 4] = [3.0, 2.0, 3.0, 2.0];
const T10_4_READ_JOB: [f64; 4] = [33.0, 23.0, 21.0, 21.0];
const T10_4_SHUTDOWN: [f64; 4] = [1.0, 2.0, 1.0, 1.0];
/// Table 10.5: each of the read job's 16 passes (s), per configuration.
const T10_5_PASSES: [[f64; 4]; READ_PASSES] = [
    [17.88, 7.37, 5.67, 5.17],
    [1.01, 1.1, 1.05, 1.05],
    [1.0, 1.05, 1.02, 1.08],
    [1.03, 1.03, 1.05, 1.08],
    [0.99, 1.07, 1.04, 1.08],
    [1.03, 1.03, 1.05, 1.08],
    [0.96, 1.06, 0.99, 1.07],
    [0.99, 1.08, 1.01, 1.06],
    [0.97, 1.03, 1.02, 1.03],
    [0.96, 1.03, 1.03, 1.03],
    [0.99, 1.03, 1.06, 1.06],
    [1.01, 1.07, 1.06, 1.07],
    [0.98, 1.04, 1.08, 1.06],
    [1.01, 1.08, 1.03, 1.07],
    [1.08, 1.05, 1.05, 1.05],
    [1.02, 1.06, 1.04, 1.06],
];

/// The chapter's uncompressed WiredTiger column, which ratios divide by.
const CHAPTER_BASE: usize = 1;

const MB: f64 = (1 << 20) as f64;

/// One configuration's run, as the section shows it.
struct Column<'a> {
    label: String,
    run: &'a EngineRun,
    /// Its column in the chapter's tables (zstd has none).
    chapter: Option<usize>,
}

impl Column<'_> {
    fn get(&self, k: &str) -> f64 {
        self.run.extra.get(k).copied().unwrap_or(f64::NAN)
    }
    fn in_place(&self) -> bool {
        self.run.engine == IN_PLACE
    }
}

/// The runs as columns: MMAPv1 first, as the chapter sets it, then the compressors in run
/// order; with several seeds each column names its seed.
fn columns(runs: &[EngineRun]) -> Vec<Column<'_>> {
    let seeds = runs
        .iter()
        .map(|r| r.seed)
        .collect::<std::collections::BTreeSet<_>>();
    let mut cols: Vec<Column> = runs
        .iter()
        .map(|run| {
            let (label, chapter) = if run.engine == IN_PLACE {
                ("MMAPv1 (in place)".to_string(), Some(0))
            } else {
                let c = run.compressor.as_str();
                let at = ["none", "snappy", "zlib"].iter().position(|x| *x == c);
                (format!("WT {c}"), at.map(|i| i + 1))
            };
            let label = if seeds.len() > 1 {
                format!("{label} s{}", run.seed)
            } else {
                label
            };
            Column {
                label,
                run,
                chapter,
            }
        })
        .collect();
    cols.sort_by_key(|c| !c.in_place());
    cols
}

/// The column ratios divide by: uncompressed WiredTiger of the same seed.
fn base<'a>(cols: &'a [Column<'a>], c: &Column) -> Option<&'a Column<'a>> {
    cols.iter()
        .find(|b| !b.in_place() && b.run.compressor == "none" && b.run.seed == c.run.seed)
}

/// One measure's four rows: ours, ours ÷ uncompressed WT, the chapter's, the chapter's ÷ WT.
fn measure_rows(
    cols: &[Column],
    name: &str,
    ours: &dyn Fn(&Column) -> f64,
    chapter: &[f64; 4],
    digits: usize,
) -> Vec<Vec<String>> {
    let row = |what: &str, cell: &dyn Fn(&Column) -> String| {
        std::iter::once(format!("{name}, {what}"))
            .chain(cols.iter().map(cell))
            .collect::<Vec<_>>()
    };
    let ratio = |c: &Column| match base(cols, c) {
        Some(b) => f(ours(c) / ours(b), 2),
        None => "–".into(),
    };
    let published = |c: &Column| c.chapter.map_or("–".into(), |i| f(chapter[i], digits));
    let published_ratio = |c: &Column| {
        c.chapter
            .map_or("–".into(), |i| f(chapter[i] / chapter[CHAPTER_BASE], 2))
    };
    vec![
        row("ours", &|c| f(ours(c), 3)),
        row("ours ÷ WT none", &ratio),
        row("chapter", &published),
        row("chapter ÷ WT", &published_ratio),
    ]
}

fn head<'a>(first: &'a str, cols: &'a [Column]) -> Vec<&'a str> {
    std::iter::once(first)
        .chain(cols.iter().map(|c| c.label.as_str()))
        .collect()
}

/// Writes the section.
pub(super) fn section(r: &mut Report, out: &Path, runs: &[EngineRun]) -> Result<()> {
    r.h2("Block compressors, and MMAPv1 beside them (seed 001 Tables 10.3–10.5)");
    let cols = columns(runs);
    let docs = runs.first().map_or(0, |r| r.scale.chapter10_docs);
    r.p(format!("{docs} documents of the chapter's shape (the chapter: 160 000), one client inserting one at a time, then the read job's {READ_PASSES} passes over the collection after a restart. Every ratio divides by uncompressed WiredTiger of the same table: ours by our run, the chapter's by its column `WT`. The chapter ran on two 7200 rpm disks; ours ran with the files in RAM (`/dev/shm`), so seconds differ by orders and only the ratios compare. The chapter has no zstd column."));
    fresh_table(r, &cols);
    restart_table(r, &cols);
    passes_table(r, &cols);
    disk_plot(r, out, &cols)?;
    differences(r, &cols);
    Ok(())
}

/// Table 10.3: a fresh dbPath.
fn fresh_table(r: &mut Report, cols: &[Column]) {
    r.h3("Table 10.3 beside ours: startup on an empty dbPath, the insert job, shutdown, disk use");
    let mut rows = Vec::new();
    rows.extend(measure_rows(
        cols,
        "Starting up (s)",
        &|c| c.get("startup_s"),
        &T10_3_STARTUP,
        0,
    ));
    rows.extend(measure_rows(
        cols,
        "Insert job (s)",
        &|c| c.get("insert_s"),
        &T10_3_INSERT,
        0,
    ));
    rows.extend(measure_rows(
        cols,
        "Shut down (s)",
        &|c| c.get("shutdown_s"),
        &T10_3_SHUTDOWN,
        0,
    ));
    rows.extend(measure_rows(
        cols,
        "Disk use (MB, du of the dbPath)",
        &|c| c.get("du_bytes") / MB,
        &T10_3_DISK_MB,
        2,
    ));
    rows.push(
        std::iter::once("Data files (MB, their size)".to_string())
            .chain(cols.iter().map(|c| f(c.run.db_bytes as f64 / MB, 2)))
            .collect(),
    );
    r.table(&head("measure", cols), rows);
}

/// Table 10.4: the read job's restart.
fn restart_table(r: &mut Report, cols: &[Column]) {
    r.h3("Table 10.4 beside ours: the read job's restart, read job and shutdown");
    let mut rows = Vec::new();
    rows.extend(measure_rows(
        cols,
        "Starting up (s)",
        &|c| c.get("restart_s"),
        &T10_4_STARTUP,
        0,
    ));
    rows.extend(measure_rows(
        cols,
        "Read job (s)",
        &|c| c.get("read_job_s"),
        &T10_4_READ_JOB,
        0,
    ));
    rows.extend(measure_rows(
        cols,
        "Shut down (s)",
        &|c| c.get("restart_shutdown_s"),
        &T10_4_SHUTDOWN,
        0,
    ));
    r.table(&head("measure", cols), rows);
}

/// Table 10.5: every pass, then the cold pass and the warm passes as ratios.
fn passes_table(r: &mut Report, cols: &[Column]) {
    r.h3("Table 10.5 beside ours: each read pass (s)");
    let mut h = head("pass", cols);
    let chapter_heads: Vec<String> = CHAPTER_COLUMNS
        .iter()
        .map(|c| format!("{c} (chapter)"))
        .collect();
    h.extend(chapter_heads.iter().map(String::as_str));
    let mut rows: Vec<Vec<String>> = (0..READ_PASSES)
        .map(|i| {
            let key = format!("read_pass_{:02}_s", i + 1);
            std::iter::once((i + 1).to_string())
                .chain(cols.iter().map(|c| f(c.get(&key), 3)))
                .chain(T10_5_PASSES[i].iter().map(|x| f(*x, 2)))
                .collect()
        })
        .collect();
    let warm_mean =
        |i: usize| T10_5_PASSES[1..].iter().map(|p| p[i]).sum::<f64>() / (READ_PASSES - 1) as f64;
    let summary = |name: &str, ours: &dyn Fn(&Column) -> f64, chapter: &dyn Fn(usize) -> f64| {
        std::iter::once(name.to_string())
            .chain(cols.iter().map(|c| f(ours(c), 2)))
            .chain((0..4).map(|i| f(chapter(i), 2)))
            .collect::<Vec<_>>()
    };
    let over_base =
        |k: &'static str| move |c: &Column| base(cols, c).map_or(f64::NAN, |b| c.get(k) / b.get(k));
    rows.push(summary(
        "cold ÷ warm mean",
        &|c| c.get("cold_read_s") / c.get("warm_read_s"),
        &|i| T10_5_PASSES[0][i] / warm_mean(i),
    ));
    rows.push(summary(
        "cold ÷ WT none's cold",
        &over_base("cold_read_s"),
        &|i| T10_5_PASSES[0][i] / T10_5_PASSES[0][CHAPTER_BASE],
    ));
    rows.push(summary(
        "warm mean ÷ WT none's",
        &over_base("warm_read_s"),
        &|i| warm_mean(i) / warm_mean(CHAPTER_BASE),
    ));
    r.table(&h, rows);
}

fn disk_plot(r: &mut Report, out: &Path, cols: &[Column]) -> Result<()> {
    let cats: Vec<String> = cols.iter().map(|c| c.label.clone()).collect();
    let du: Vec<f64> = cols.iter().map(|c| c.get("du_bytes") / MB).collect();
    let size: Vec<f64> = cols.iter().map(|c| c.run.db_bytes as f64 / MB).collect();
    plot::bars(
        &out.join("compression-disk"),
        &Bars {
            title: "Disk use per configuration",
            x_label: "engine and block compressor",
            y_label: "MB",
            categories: &cats,
            series: &[
                ("du of the dbPath".to_string(), du),
                ("data files' size".to_string(), size),
            ],
            reference: None,
            stacked: false,
        },
    )?;
    r.img("compression-disk.png", "disk use");
    Ok(())
}

/// What differs between the engines that cannot be held equal, each with what this run
/// measured of it.
fn differences(r: &mut Report, cols: &[Column]) {
    r.h3("What differs between the engines and cannot be held equal");
    r.p("Held equal: the documents (one generator, one seed), the cache (the chapter's `cacheSizeGB: 8` for every engine, which holds all the data), durability (a journal group-committed every 100 ms, uncompressed as the chapter configured WiredTiger's, each insert acknowledged before its group commit, a checkpoint or write-back closing the insert job and another at shutdown), one client thread, and one engine run at a time on this machine.");
    let Some(mm) = cols.iter().find(|c| c.in_place()) else {
        return;
    };
    let wt = base(cols, mm);
    let docs = mm.run.load.operations.max(1) as f64;
    let padding = mm.get("record_bytes_allocated") / mm.get("value_bytes_allocated");
    let mut items = vec![
        "**Compression (MMAPv1 has none).** The in-place engine stores records and index buckets uncompressed; `WT none` (no block compression, no prefix compression) is its like-for-like column, and the compressors' columns show what MMAPv1 could not have.".to_string(),
        format!("**Padding.** Records are padded to a power of two (MongoDB 3.0's `usePowerOf2Sizes`): the records allocated took {:.2}× the bytes of the values they hold (measured: {:.1} MB of records for {:.1} MB of values; the documents average {:.0} bytes of BSON).", padding, mm.get("record_bytes_allocated") / MB, mm.get("value_bytes_allocated") / MB, mm.get("doc_bytes") / docs),
        format!("**Data files.** They double from 1 MiB to 2 GiB (MMAPv1: 64 MiB to 2 GiB) and are allocated whole, so the last one is mostly empty: {:.1} MB of data files, of which {:.1} MB written. MMAPv1 wrote zeros into each new file, so `du` counted their whole size (the chapter's 4128 MB); ours are sparse, so `du` counts only the blocks written, and the `Data files (MB, their size)` row is the figure comparable with the chapter's.", mm.run.db_bytes as f64 / MB, mm.get("data_files_allocated_bytes") / MB),
        format!("**Journal.** The in-place engine journals full page images (the first change to a page after a write-back, then the changed bytes), so a torn in-place write can be repaired; WiredTiger journals each operation's records. The insert job and its shutdown wrote {}; {}.", written(mm), wt.map_or("–".into(), written)),
        "**Startup.** MMAPv1 preallocated its journal (three 1 GB files) and its first data files before it listened, the chapter's 102 s; the in-place engine creates one 1 MiB data file and no preallocated journal, so its startup is of WiredTiger's order here.".to_string(),
        "**Reads.** Cold means nothing in the engine's cache after a restart; the files were in RAM, not on the chapter's disks, so a cold pass here costs the engine's decoding and lookups, not seeks. One lock per database (the in-place engine) against document-level concurrency does not matter to one client.".to_string(),
    ];
    if let Some(b) = wt {
        items.push(format!(
            "**Disk use, ours against the chapter's.** MMAPv1's data files take {:.2}× uncompressed WiredTiger's `du` here, the chapter {:.2}×.",
            mm.run.db_bytes as f64 / b.get("du_bytes"),
            T10_3_DISK_MB[0] / T10_3_DISK_MB[CHAPTER_BASE]
        ));
    }
    for i in items {
        r.p(i);
    }
}

/// What an engine run's insert job wrote: to the journal, and to the data files.
fn written(c: &Column) -> String {
    format!(
        "{}: {:.1} MB to the journal and {:.1} MB to the data files",
        c.label,
        c.get("written_journal_bytes") / MB,
        c.get("written_data_bytes") / MB
    )
}
