//! The report: tables and plots of an experiment's results beside the seeds' published numbers,
//! the model that produced them, and a reading of each result. Written as `report.md` (plots
//! as files beside it) and a self-contained `report.html` (plots inlined).

mod compression;
mod condition;
mod credit;
mod scale;
mod sections;
pub mod settings;
mod streams;

use crate::experiment::{Experiment, Kind, ScaleSpec};
use crate::io_pattern;
use crate::plot::{self, Bars, Scatter};
use crate::run::{CheckpointTrigger, EngineRun, Point};
use anyhow::Result;
use base64::Engine as _;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

enum Block {
    H2(String),
    H3(String),
    P(String),
    Table(Vec<String>, Vec<Vec<String>>),
    Img(String, String),
}

pub struct Report {
    title: String,
    blocks: Vec<Block>,
    plots: Vec<String>,
}

impl Report {
    pub(crate) fn new(title: impl Into<String>) -> Report {
        Report {
            title: title.into(),
            blocks: Vec::new(),
            plots: Vec::new(),
        }
    }

    /// Writes `report.md` and `report.html` into `out`; returns the HTML's path.
    pub(crate) fn save(&self, out: &Path) -> Result<PathBuf> {
        std::fs::write(out.join("report.md"), self.markdown())?;
        let html = out.join("report.html");
        std::fs::write(&html, self.html(out)?)?;
        Ok(html)
    }

    pub(crate) fn h2(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::H2(s.into()));
    }
    pub(crate) fn h3(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::H3(s.into()));
    }
    pub(crate) fn p(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::P(s.into()));
    }
    pub(crate) fn table(&mut self, head: &[&str], rows: Vec<Vec<String>>) {
        self.blocks.push(Block::Table(
            head.iter().map(|s| s.to_string()).collect(),
            rows,
        ));
    }
    pub(crate) fn img(&mut self, file: &str, alt: &str) {
        self.plots.push(file.to_string());
        self.blocks
            .push(Block::Img(file.to_string(), alt.to_string()));
    }

    fn markdown(&self) -> String {
        let mut s = format!("# {}\n\n", self.title);
        for b in &self.blocks {
            match b {
                Block::H2(t) => writeln!(s, "## {t}\n").unwrap(),
                Block::H3(t) => writeln!(s, "### {t}\n").unwrap(),
                Block::P(t) => writeln!(s, "{t}\n").unwrap(),
                Block::Table(h, rows) => {
                    writeln!(s, "| {} |", h.join(" | ")).unwrap();
                    writeln!(s, "|{}", " --- |".repeat(h.len())).unwrap();
                    for r in rows {
                        writeln!(s, "| {} |", r.join(" | ")).unwrap();
                    }
                    s.push('\n');
                }
                Block::Img(f, alt) => writeln!(s, "![{alt}]({f})\n").unwrap(),
            }
        }
        s
    }

    fn html(&self, dir: &Path) -> Result<String> {
        let esc = |t: &str| {
            t.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        };
        // Inline `code` and **bold** as in the markdown.
        let inline = |t: &str| {
            let mut out = String::new();
            for (i, part) in esc(t).split('`').enumerate() {
                if i % 2 == 1 {
                    write!(out, "<code>{part}</code>").unwrap();
                } else {
                    for (j, q) in part.split("**").enumerate() {
                        if j % 2 == 1 {
                            write!(out, "<strong>{q}</strong>").unwrap();
                        } else {
                            out.push_str(q);
                        }
                    }
                }
            }
            out
        };
        let mut s = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:sans-serif;max-width:1150px;margin:2em auto;line-height:1.45;color:#222}}table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #bbb;padding:3px 8px;text-align:right}}th{{background:#eee}}td:first-child,th:first-child{{text-align:left}}img{{max-width:100%;border:1px solid #ddd}}code{{background:#f4f4f4;padding:0 3px}}</style></head><body>\n<h1>{}</h1>\n",
            esc(&self.title),
            esc(&self.title)
        );
        for b in &self.blocks {
            match b {
                Block::H2(t) => writeln!(s, "<h2>{}</h2>", inline(t)).unwrap(),
                Block::H3(t) => writeln!(s, "<h3>{}</h3>", inline(t)).unwrap(),
                Block::P(t) => writeln!(s, "<p>{}</p>", inline(t)).unwrap(),
                Block::Table(h, rows) => {
                    s.push_str("<table><tr>");
                    for c in h {
                        write!(s, "<th>{}</th>", inline(c)).unwrap();
                    }
                    s.push_str("</tr>\n");
                    for r in rows {
                        s.push_str("<tr>");
                        for c in r {
                            write!(s, "<td>{}</td>", inline(c)).unwrap();
                        }
                        s.push_str("</tr>\n");
                    }
                    s.push_str("</table>\n");
                }
                Block::Img(f, alt) => {
                    let bytes = std::fs::read(dir.join(f))?;
                    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                    writeln!(
                        s,
                        "<p><img alt=\"{}\" src=\"data:image/png;base64,{b64}\"></p>",
                        esc(alt)
                    )
                    .unwrap();
                }
            }
        }
        s.push_str("</body></html>\n");
        Ok(s)
    }
}

fn f(x: f64, d: usize) -> String {
    format!("{x:.d$}")
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// The scales an experiment ran at, with their sizes.
fn scales_text(exp: &Experiment, scale: &ScaleSpec) -> String {
    let size = |name: &str, s: &ScaleSpec| {
        let keys = match s.ycsb_key_classes {
            Some(c) => format!(", keys from a zipfian over {c} classes"),
            None => String::new(),
        };
        let ids = match s.linkbench_id_classes {
            Some(c) => format!(", ids from Zipfs over {c} classes"),
            None => String::new(),
        };
        format!(
            "`{name}` (YCSB {} records / {} operations{keys}, LinkBench maxid1 {} / {} requests, out-degree capped at {}{ids})",
            s.ycsb_records,
            s.ycsb_ops,
            s.linkbench_maxid1,
            s.linkbench_requests,
            s.linkbench_nlinks_cap()
        )
    };
    if exp.scales.is_empty() {
        return format!("scale {}", size(&exp.scale, scale));
    }
    let each: Vec<String> = exp
        .scales
        .iter()
        .filter_map(|n| exp.scale_spec(n).map(|s| size(n, &s)))
        .collect();
    format!("scales {}", each.join(", "))
}

/// The command that makes this report again: the built-in name when the experiment is one
/// (at its scale), else the `experiment.yaml` the run wrote beside the report.
fn reproduce_command(exp: &Experiment) -> String {
    let builtin = crate::experiment::find(&exp.name).is_some_and(|b| {
        Experiment {
            scale: exp.scale.clone(),
            ..b
        } == *exp
    });
    if builtin {
        format!(
            "`flashdoc lab run {} --scale {} --out DIR`",
            exp.name, exp.scale
        )
    } else {
        "`flashdoc lab run experiment.yaml --out DIR`, the `experiment.yaml` beside this report"
            .into()
    }
}

/// Writes the plots, `report.md` and `report.html`; returns the HTML path.
pub fn write(
    out: &Path,
    exp: &Experiment,
    scale: &ScaleSpec,
    points: &[Point],
    runs: &[EngineRun],
    reference: Option<&crate::Reference>,
) -> Result<PathBuf> {
    let mut r = Report::new(format!("flashdoc lab: {}", exp.title));
    r.p(exp.description.clone());
    r.p(format!(
        "Experiment `{}`, {}: one client thread on the engine's inline schedule, so each engine run's trace depends only on the experiment, the point and the seed (docs/lab.md). Reproduce with {}.",
        exp.name,
        scales_text(exp, scale),
        reproduce_command(exp)
    ));
    // Points saved before their dirty budget was kept get the experiment's.
    let points = &crate::summary::with_budgets(exp, points, runs);
    // A stream report opens with its headline (flash writes per operation and modeled
    // throughput at equal engine settings); how the numbers were made follows it.
    let headline_first = matches!(exp.kind, Kind::Streams | Kind::PrimaryFilter);
    if !headline_first {
        model_section(&mut r, exp, points, runs);
    }
    match exp.kind {
        Kind::Streams | Kind::PrimaryFilter => streams::section(&mut r, out, exp, points, runs)?,
        Kind::LeafSize => sections::leaf(&mut r, out, points)?,
        Kind::Trim => sections::trim(&mut r, out, points)?,
        Kind::WriteShares => shares_section(&mut r, out, runs)?,
        Kind::IoPattern => io_section(&mut r, out)?,
        Kind::Compression => compression::section(&mut r, out, runs)?,
        Kind::Scale => scale::section(&mut r, out, exp, points)?,
        Kind::Hass => unreachable!("hass experiments write their own report (hass.rs)"),
        Kind::RealWiredTiger => {
            unreachable!("real-wiredtiger writes its own report (realwt.rs)")
        }
        Kind::InPlaceVsCow => {
            unreachable!("in-place-vs-cow writes its own report (inplace_cow.rs)")
        }
    }
    if headline_first {
        model_section(&mut r, exp, points, runs);
    }
    if let Some(rf) = reference {
        streams::compare(&mut r, exp, points, rf);
    }
    host_section(&mut r, runs);
    r.save(out)
}

fn model_section(r: &mut Report, exp: &Experiment, points: &[Point], runs: &[EngineRun]) {
    r.h2("How these numbers were made");
    let dev = points.first().map(|p| p.device.clone());
    let ssd = dev
        .map(|d| {
            format!(
                "{} streams, over-provisioning ρ = {} ((physical − logical) / logical), {} GC",
                d.ssd.streams, d.ssd.op, d.ssd.gc
            )
        })
        .unwrap_or_default();
    let held: Vec<String> = exp
        .ssds
        .iter()
        .filter_map(|d| match (d.pages_per_block, d.erase_units) {
            (Some(p), _) => Some(format!("held at {p} pages on {}", d.label())),
            (None, Some(u)) => Some(format!(
                "on {} sized so the device has the count nearest {u} (a power of two from 16 to 1024 pages, so a larger device has larger blocks)",
                d.label()
            )),
            (None, None) => None,
        })
        .collect();
    let default_blocks = exp
        .ssds
        .iter()
        .any(|d| d.pages_per_block.is_none() && d.erase_units.is_none());
    let blocks = match (default_blocks, held.is_empty()) {
        (true, true) => "erase blocks sized so the device has at least 1024 of them".to_string(),
        (true, false) => format!(
            "erase blocks sized so the device has at least 1024 of them, and {}",
            held.join(", ")
        ),
        (false, _) => format!("erase blocks {}", held.join(", ")),
    };
    let trims: Vec<String> = exp
        .trims
        .iter()
        .map(|t| match (t.batch, t.discard) {
            (None, false) => "no TRIM of freed extents and no filesystem discard (the seeds' stream runs: a 3.13 kernel without TRIM)".to_string(),
            (None, true) => "no TRIM of freed extents; the filesystem discards deleted files".to_string(),
            (Some(k), _) => format!("freed extents trimmed in batches of {k} (seed-equivalent; scaled to the device) once no durable checkpoint references them ({}), with filesystem discard", t.when),
        })
        .collect();
    r.p(format!(
        "Each workload ran on flashdoc's engine (through the document layer, in process) once per seed and per engine allocation, with every physical write, free, checkpoint and file event captured as a trace (mode **trace-replay**). With a given allocation the engine's I/O does not depend on the placement policy, so every policy replays exactly the same trace on a fresh simulated SSD: {ssd}; 4 KB pages, {blocks}. Conditions: {}. **Aged device**: `{}` — before the run every LBA has been written once, so the filesystem hands out LBAs the device still counts as valid, and a deleted file's LBAs stay valid until they are reused. **Direct-I/O semantics**: every write reaches the device in order and each 4 KB page it touches is written once; no page cache coalesces writes (the trace is taken per write call at the engine's I/O seam, before any page cache; the engines ran with `direct_io` {}, and their journals in the direct-I/O layout, as the seeds' WiredTiger ran with DirectIO: a header block, each flush padded to a block and no write larger than a 256 KiB slot, so no journal page is written twice). Files map to LBAs through a next-fit filesystem layout.",
        trims.join("; "),
        exp.precondition,
        io_modes(runs)
    ));
    r.p(format!(
        "**Steady state.** The run phase is replayed back to back until the device has been written {:.0} times over, then once more; that last pass is measured (the device's counters are reset before it). A device aged by one fill needs about 20 such rewrites to reach the workload's steady state; looping a short run reproduces a long run's steady state within about 1% for the online policies (docs/lab.md).",
        exp.warmup_capacities
    ));
    r.p("Timing model: 8 channels × 4 dies, tR 75 µs, tPROG 750 µs, tBERS 3.8 ms per 256-page block, 400 MT/s channels, a 6 Gb/s host link, queue depth 32 (an MLC SATA SSD of the Samsung 840 Pro's class; docs/ssd.md); each program goes to the die that can start it first. A TRIM is non-queued, as on the 840 Pro under Linux 3.13: it waits for every I/O in flight, then holds the device for 1 ms plus 40 ns per page (estimates; docs/ssd.md). **Modeled throughput** is the measured pass's operations divided by the device time the model needs to absorb its I/O issued closed-loop at the queue depth: the throughput if the device were the bottleneck, as it was on the seeds' runs with caches far smaller than their data. **Host throughput** is what the engine did on this machine; it does not depend on the policy.");
    ratios_section(r, exp, runs);
}

/// The engines' `direct_io` settings in these runs, each once.
fn io_modes(runs: &[EngineRun]) -> String {
    let modes: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r.direct_io.as_str()).collect();
    modes.into_iter().collect::<Vec<_>>().join(" / ")
}

/// The dimensionless ratios that decide where a block dies relative to the device, per
/// engine run, beside the seeds' values.
fn ratios_section(r: &mut Report, exp: &Experiment, runs: &[EngineRun]) {
    let runs: Vec<&EngineRun> = runs
        .iter()
        .filter(|e| e.run.operations > 0 && e.sizing.capacity_bytes > 0)
        .collect();
    if runs.is_empty() {
        return;
    }
    r.h3("The scale: ratios that decide where a block dies, ours beside the seeds'");
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let mut rows = Vec::new();
    for e in &runs {
        let cap = e.sizing.capacity_bytes as f64;
        rows.push(vec![
            format!(
                "{} ({}, seed {})",
                e.workload,
                streams::engine_name(&e.allocation, e.dirty_pct),
                e.seed
            ),
            format!("{:.0} MB", cap / (1 << 20) as f64),
            format!("{:.3}", e.sizing.db_load_bytes as f64 / cap),
            format!("{:.3}", e.db_bytes as f64 / cap),
            format!("{:.2}%", e.interval_bytes_mean / cap * 100.0),
            format!(
                "{:.2}",
                e.sizing.cache_bytes as f64 / e.sizing.db_load_bytes.max(1) as f64
            ),
            format!("{:.1}", e.run_write_bytes as f64 / cap),
            format!("{:.1} MB", mb(e.sizing.journal_file_bytes)),
            format!("{}/{} %", e.dirty_pct[0], e.dirty_pct[1]),
            checkpoints_cell(e),
        ]);
    }
    r.table(
        &[
            "engine run",
            "device",
            "live data ÷ device",
            "files at the end ÷ device",
            "bytes per checkpoint interval ÷ device",
            "cache ÷ live data",
            "device capacities written per run pass",
            "journal file",
            "dirty budget",
            "run-phase checkpoints, begun every",
        ],
        rows,
    );
    if runs.iter().any(|e| {
        matches!(
            e.checkpoint_trigger,
            Some(CheckpointTrigger::JournalBytes(_))
        )
    }) {
        r.p("Equal intervals: an engine other than the reference (best fit with WiredTiger's 5/20 % dirty budget) begins its checkpoints every time the journal has grown by the reference run's mean interval, so its intervals hold the same operations and it takes as many checkpoints; a written-bytes trigger would give an engine that writes less longer intervals, and fewer checkpoints, for it. Its bytes per interval ÷ device is then what it writes in the reference's interval.");
    }
    r.p(format!(
        "Seeds (seed 000 §5.1 and §5.5, seed 002 Table 3, seed 003 §4): about 25 GB of YCSB documents and 32 GB of LinkBench data in 51.7 GB and 55 GB of files on a 256 GB Samsung 840 Pro — live data ÷ device 0.10–0.125, files ÷ device 0.20–0.21; 60 s checkpoints at about 4.5 k updates/s of about 25 KB each — 6–7 GB per interval, about 2.5% of the device; 5–30 GB caches — 0.2–1.2 of the data; 100 MB journal files; two-hour runs. This run's targets: live data ÷ device {}, checkpoint interval {:.1}% of the device (a written-bytes trigger, so no wall clock decides it), cache {:.2} of the live data; journal files (at least 8 MiB) and TRIM batches scaled by the device's size.",
        exp.device_fill,
        exp.checkpoint_share * 100.0,
        exp.cache_shares.first().copied().unwrap_or(0.0)
    ));
}

/// How many checkpoints the run phase took, and what began them.
fn checkpoints_cell(e: &EngineRun) -> String {
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let n = e
        .intervals
        .map_or(e.run_checkpoints.to_string(), |i| i.checkpoints.to_string());
    match e.checkpoint_trigger {
        Some(CheckpointTrigger::WrittenBytes(b)) => format!("{n}: {:.2} MB written", mb(b)),
        Some(CheckpointTrigger::JournalBytes(b)) => {
            format!("{n}: {:.3} MB of journal (the reference's interval)", mb(b))
        }
        None => format!("{n}: bytes written, from outside"),
    }
}

/// The journal's share of the bytes written (seed 000 / 003 Table 1), percent.
pub const PAPER_JOURNAL_SHARE: &[(&str, f64)] = &[
    ("ycsb-update-heavy", 6.40),
    ("ycsb-update-only", 10.40),
    ("linkbench-original", 1.08),
    ("linkbench-mixed", 2.27),
    ("linkbench-update-only", 2.18),
];

fn shares_section(r: &mut Report, out: &Path, runs: &[EngineRun]) -> Result<()> {
    file_shares(r, out, runs)?;
    page_shares(r, runs);
    r.p(shares_reading(runs));
    Ok(())
}

/// The run phase's bytes per file kind, beside the seeds' Table 1, as a table and a plot.
fn file_shares(r: &mut Report, out: &Path, runs: &[EngineRun]) -> Result<()> {
    r.h2("Bytes written per file kind (run phase)");
    let kinds = [
        "collection",
        "primary index",
        "secondary index",
        "journal",
        "metadata",
    ];
    let paper: BTreeMap<&str, [&str; 4]> = [
        ("ycsb-update-heavy", ["93.60", "n/a", "n/a", "6.40"]),
        ("ycsb-update-only", ["89.60", "n/a", "n/a", "10.40"]),
        ("linkbench-original", ["58.60", "3.10", "37.22", "1.08"]),
        ("linkbench-mixed", ["66.10", "0.50", "31.13", "2.27"]),
        ("linkbench-update-only", ["67.60", "0.02", "30.20", "2.18"]),
    ]
    .into_iter()
    .collect();
    let mut rows = Vec::new();
    let mut series: Vec<(String, Vec<f64>)> =
        kinds.iter().map(|k| (k.to_string(), Vec::new())).collect();
    let cats: Vec<String> = runs.iter().map(|r| r.workload.clone()).collect();
    for run in runs {
        let total: u64 = run.write_bytes_by_file.values().sum::<u64>().max(1);
        let share =
            |k: &str| *run.write_bytes_by_file.get(k).unwrap_or(&0) as f64 * 100.0 / total as f64;
        let p = paper
            .get(run.workload.as_str())
            .copied()
            .unwrap_or(["–"; 4]);
        rows.push(vec![
            run.workload.clone(),
            format!("{:.2} (paper {})", share("collection"), p[0]),
            format!("{:.2} (paper {})", share("primary index"), p[1]),
            format!("{:.2} (paper {})", share("secondary index"), p[2]),
            format!("{:.2} (paper {})", share("journal"), p[3]),
            format!("{:.3}", share("metadata")),
        ]);
        for (i, k) in kinds.iter().enumerate() {
            series[i].1.push(share(k));
        }
    }
    r.table(
        &[
            "workload",
            "collection %",
            "primary index %",
            "secondary indexes %",
            "journal %",
            "metadata %",
        ],
        rows,
    );
    plot::bars(
        &out.join("write-shares"),
        &Bars {
            title: "Bytes written per file kind in the run phase",
            x_label: "workload",
            y_label: "share of bytes written (%)",
            categories: &cats,
            series: &series,
            reference: None,
            stacked: true,
        },
    )?;
    r.img("write-shares.png", "write shares per file kind");
    Ok(())
}

/// The run phase's bytes per page kind.
fn page_shares(r: &mut Report, runs: &[EngineRun]) {
    r.h2("Bytes written per page kind (run phase)");
    let pages = [
        "leaf",
        "internal",
        "root",
        "overflow",
        "extent-list",
        "log",
        "descriptor",
    ];
    let mut rows = Vec::new();
    for run in runs {
        let total: u64 = run.write_bytes_by_page.values().sum::<u64>().max(1);
        let mut row = vec![run.workload.clone()];
        for pk in pages {
            row.push(format!(
                "{:.3}",
                *run.write_bytes_by_page.get(pk).unwrap_or(&0) as f64 * 100.0 / total as f64
            ));
        }
        rows.push(row);
    }
    r.table(
        &[
            "workload",
            "leaf %",
            "internal %",
            "root %",
            "overflow %",
            "extent-list %",
            "journal (log) %",
            "descriptor/metadata %",
        ],
        rows,
    );
}

/// The journal's and the leaves' shares against the paper's.
fn shares_reading(runs: &[EngineRun]) -> String {
    let mut reading = String::from("Paper (seed 002 Table 2, page writes in the collection file under YCSB): leaf 99.7%, internal 0.27%, root 0.000049%, checkpoint (extent-list) pages 0.00015%. ");
    for run in runs {
        let total: u64 = run.write_bytes_by_file.values().sum::<u64>().max(1);
        let share =
            |k: &str| *run.write_bytes_by_file.get(k).unwrap_or(&0) as f64 * 100.0 / total as f64;
        let leaf = *run.write_bytes_by_page.get("leaf").unwrap_or(&0) as f64 * 100.0
            / run.write_bytes_by_page.values().sum::<u64>().max(1) as f64;
        if let Some(&(_, paper)) = PAPER_JOURNAL_SHARE.iter().find(|x| x.0 == run.workload) {
            let j = share("journal");
            write!(
                reading,
                "{}: journal {j:.2}% of the bytes ({} than the paper's {paper:.2}%), leaves {leaf:.1}% of the bytes. ",
                run.workload,
                if j < paper { "less" } else { "more" }
            )
            .unwrap();
        }
    }
    reading.push_str("A smaller journal share than the paper's leaves less for the file-based mapping to separate: the journal is what `file` takes off the tables' stream.");
    reading
}

fn io_section(r: &mut Report, out: &Path) -> Result<()> {
    r.h2("Where writes land over time");
    let mut reading = String::new();
    for pattern in io_pattern::read(out)? {
        let (policy, samples, ckpts) = (&pattern.policy, &pattern.samples, &pattern.checkpoints);
        for kind in ["collection", "secondary index"] {
            if let Some((swap, follow, n)) = samples.get(kind).and_then(|s| swap_rates(s, ckpts)) {
                write!(reading, "{} {kind}: over {n} checkpoint intervals the write region swaps in {:.0}% of them, and {policy}'s busiest stream changes in {:.0}%. ", pattern.workload, swap * 100.0, follow * 100.0).unwrap();
            }
        }
        let panels: Vec<Scatter> = samples
            .iter()
            .map(|(k, pts)| Scatter {
                title: k,
                points: pts,
                checkpoints: ckpts,
            })
            .collect();
        let name = format!("io-{}", pattern.workload);
        plot::scatter_panels(&out.join(&name), &format!("{}: file offset of each write, coloured by the {policy} stream (grey lines: checkpoints)", pattern.workload), &panels)?;
        r.img(&format!("{name}.png"), "I/O pattern");
    }
    r.p(reading);
    r.p("Paper: seed 000 Fig. 3 and seed 003 Fig. 2 show the collection and secondary-index files written in two regions whose heat swaps at each checkpoint, the primary index and journal written sequentially. Swap rate: the share of consecutive checkpoint intervals whose median write offset moves to the other side of the file's middle (a perfect swap is 100%); stream follow rate: the share of intervals in which DSM's busiest stream for the file changes with the swap.");
    Ok(())
}

/// From (time s, offset MB, stream) samples and checkpoint times: the share of consecutive
/// intervals whose median offset crosses the middle of the written range, the share in which
/// the busiest stream changes, and the number of intervals compared.
fn swap_rates(samples: &[(f64, f64, u8)], ckpts: &[f64]) -> Option<(f64, f64, usize)> {
    let mut offs: Vec<f64> = samples.iter().map(|s| s.1).collect();
    offs.sort_by(|a, b| a.total_cmp(b));
    let middle = (offs.first()? + offs.last()?) / 2.0;
    let mut per: Vec<(f64, u8)> = Vec::new();
    let mut start = 0;
    for &end in ckpts.iter().chain(std::iter::once(&f64::INFINITY)) {
        let slice: Vec<&(f64, f64, u8)> =
            samples[start..].iter().take_while(|s| s.0 < end).collect();
        start += slice.len();
        if slice.len() < 8 {
            continue;
        }
        let mut o: Vec<f64> = slice.iter().map(|s| s.1).collect();
        o.sort_by(|a, b| a.total_cmp(b));
        let mut count = [0usize; 256];
        for s in &slice {
            count[s.2 as usize] += 1;
        }
        let busiest = (0..256).max_by_key(|&i| count[i]).unwrap_or(0) as u8;
        per.push((o[o.len() / 2], busiest));
    }
    if per.len() < 3 {
        return None;
    }
    let pairs = per.len() - 1;
    let swaps = per
        .windows(2)
        .filter(|w| (w[0].0 < middle) != (w[1].0 < middle))
        .count();
    let follows = per.windows(2).filter(|w| w[0].1 != w[1].1).count();
    Some((
        swaps as f64 / pairs as f64,
        follows as f64 / pairs as f64,
        pairs,
    ))
}

fn host_section(r: &mut Report, runs: &[EngineRun]) {
    r.h2("Host measurements (this machine)");
    let rows = runs
        .iter()
        .map(|run| {
            let p99 = run
                .run
                .metrics
                .values()
                .map(|m| m.p99_us)
                .max()
                .unwrap_or(0);
            vec![
                run.workload.clone(),
                run.allocation.clone(),
                run.seed.to_string(),
                format!("{:.0}%", run.cache_share * 100.0),
                format!("{} KB", run.leaf_kb),
                run.compressor.clone(),
                f(run.load.throughput_ops_sec, 0),
                f(run.run.throughput_ops_sec, 0),
                p99.to_string(),
                run.checkpoints.to_string(),
                f(run.db_bytes as f64 / (1 << 20) as f64, 1),
                run.run
                    .crud_percent
                    .map(|c| format!("{:.0}:{:.0}:{:.0}:{:.0}", c[0], c[1], c[2], c[3]))
                    .unwrap_or_else(|| "–".into()),
            ]
        })
        .collect();
    r.table(
        &[
            "workload",
            "allocation",
            "seed",
            "cache",
            "leaf",
            "compressor",
            "load ops/s",
            "run ops/s",
            "run p99 (µs, slowest op type)",
            "checkpoints",
            "database MB",
            "C:R:U:D %",
        ],
        rows,
    );
    r.p("Host numbers come from one run on a shared 2-core machine; compare ratios within a run, not across machines.");
}

/// The plot files a report references (for tests).
pub fn referenced_plots(md: &str) -> Vec<String> {
    md.lines()
        .filter_map(|l| {
            l.strip_prefix("![")
                .and_then(|l| l.split_once("]("))
                .map(|(_, f)| f.trim_end_matches(')').to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduce_command_names_a_builtin_only_when_it_is_one() {
        let streams = crate::experiment::find("streams").expect("built-in");
        let at_quick = Experiment {
            scale: "quick".into(),
            ..streams.clone()
        };
        assert_eq!(
            reproduce_command(&at_quick),
            "`flashdoc lab run streams --scale quick --out DIR`"
        );
        let changed = Experiment {
            seeds: vec![9],
            ..streams
        };
        assert!(reproduce_command(&changed).contains("experiment.yaml"));
    }
}
