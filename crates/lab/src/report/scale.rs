//! The scale study: each headline figure at every scale, how much it moves to the next larger
//! scale, and the converged scale (the smallest, at least medium, at which every figure moves
//! by less than 2 % against the next larger one).

use super::Report;
use crate::experiment::{Experiment, SCALES};
use crate::plot::{self, Bars};
use crate::run::Point;
use crate::summary::{
    flash_per_op, gap_closure, modeled, waf, Cell, Table, FLASH_MODE, WIREDTIGER,
};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// How a figure is computed on one scale's table for a workload.
type FigureFn = fn(&Table, &Cell) -> Option<f64>;

/// A headline figure: its name and how it is computed.
type Figure = (&'static str, FigureFn);

fn flash(t: &Table, c: &Cell) -> Option<f64> {
    t.spread(c, flash_per_op).map(|s| s.median)
}

const FIGURES: &[Figure] = &[
    ("dsm flash writes/op", |t, b| {
        flash(t, &b.with(WIREDTIGER, "dsm"))
    }),
    ("filelog flash writes/op", |t, b| {
        flash(t, &b.with(WIREDTIGER, "filelog"))
    }),
    ("flashdoc flash writes/op", |t, b| {
        flash(t, &b.with(FLASH_MODE, "filelog"))
    }),
    ("oracle flash writes/op", |t, b| {
        ["oracle", "oracle-death"]
            .iter()
            .filter_map(|o| flash(t, &b.with(WIREDTIGER, o)))
            .reduce(f64::min)
    }),
    ("dsm throughput × none", |t, b| {
        t.paired_ratio(&b.with(WIREDTIGER, "dsm"), b, modeled)
            .map(|s| s.median)
    }),
    ("flashdoc throughput × none", |t, b| {
        t.paired_ratio(&b.with(FLASH_MODE, "filelog"), b, modeled)
            .map(|s| s.median)
    }),
    ("co-design gap closed", |t, b| {
        gap_closure(
            t,
            b,
            (FLASH_MODE, "filelog"),
            (WIREDTIGER, "dsm"),
            WIREDTIGER,
            flash_per_op,
        )
        .map(|g| g.closed.median)
    }),
];

/// Which side of flash writes per operation (host pages per operation × the device's WAF) a
/// figure measures, so the report can say which side stops moving and which does not.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    /// What the engine writes: host pages per operation.
    Engine,
    /// What the device makes of it: write amplification.
    Device,
    /// flashdoc against dsm: the claims, which are ratios.
    Relative,
}

fn host_pages(t: &Table, c: &Cell) -> Option<f64> {
    Some(flash(t, c)? / waf_of(t, c)?)
}

fn waf_of(t: &Table, c: &Cell) -> Option<f64> {
    t.spread(c, waf).map(|s| s.median)
}

/// The headline's flash writes per operation split into its two factors, and flashdoc's
/// share of dsm's.
const SPLIT: &[(&str, Side, FigureFn)] = &[
    ("host pages/op, WiredTiger engine", Side::Engine, |t, b| {
        host_pages(t, &b.with(WIREDTIGER, "dsm"))
    }),
    ("host pages/op, flashdoc engine", Side::Engine, |t, b| {
        host_pages(t, &b.with(FLASH_MODE, "filelog"))
    }),
    ("dsm WAF", Side::Device, |t, b| {
        waf_of(t, &b.with(WIREDTIGER, "dsm"))
    }),
    ("flashdoc WAF", Side::Device, |t, b| {
        waf_of(t, &b.with(FLASH_MODE, "filelog"))
    }),
    ("oracle WAF", Side::Device, |t, b| {
        ["oracle", "oracle-death"]
            .iter()
            .filter_map(|o| waf_of(t, &b.with(WIREDTIGER, o)))
            .reduce(f64::min)
    }),
    (
        "flashdoc ÷ dsm, flash writes/op",
        Side::Relative,
        |t, b| {
            Some(flash(t, &b.with(FLASH_MODE, "filelog"))? / flash(t, &b.with(WIREDTIGER, "dsm"))?)
        },
    ),
];

/// The relative move of a figure from scale `i` to the next larger one.
fn move_to_next(values: &[Vec<Option<f64>>], i: usize, j: usize) -> Option<f64> {
    let v = values[i][j]?;
    let next = values.get(i + 1)?[j]?;
    Some((v - next) / next.abs().max(1e-12))
}

/// Each scale's row of figures (`values[scale][figure]`), with how far each lies from the
/// next larger scale's.
fn moves_table(scales: &[&str], values: &[Vec<Option<f64>>]) -> Vec<Vec<String>> {
    scales
        .iter()
        .enumerate()
        .map(|(i, s)| {
            std::iter::once(s.to_string())
                .chain(values[i].iter().enumerate().map(|(j, v)| {
                    match (v, move_to_next(values, i, j)) {
                        (Some(v), Some(d)) => format!("{v:.3} ({:+.1}%)", d * 100.0),
                        (Some(v), None) => format!("{v:.3}"),
                        _ => "–".into(),
                    }
                }))
                .collect()
        })
        .collect()
}

/// Per scale, raises `worst` to the largest move to the next scale of the figures `counted`
/// selects.
fn note_largest_moves(
    values: &[Vec<Option<f64>>],
    counted: impl Fn(usize) -> bool,
    worst: &mut [f64],
) {
    for (i, w) in worst.iter_mut().enumerate() {
        for j in (0..values[i].len()).filter(|&j| counted(j)) {
            if let Some(d) = move_to_next(values, i, j) {
                *w = w.max(d.abs());
            }
        }
    }
}

pub fn section(r: &mut Report, out: &Path, exp: &Experiment, points: &[Point]) -> Result<()> {
    let mut scales: Vec<&str> = exp.scales.iter().map(|s| s.as_str()).collect();
    scales.sort_by_key(|s| SCALES.iter().position(|x| x == s));
    let tables: Vec<(&str, Vec<Point>)> = scales
        .iter()
        .map(|s| {
            (
                *s,
                points.iter().filter(|p| p.scale == *s).cloned().collect(),
            )
        })
        .collect();
    r.h2("How the headline figures move with scale");
    // The largest relative move of any figure of any workload, per scale against the next;
    // and of the split's figures, per side.
    let mut worst: Vec<f64> = vec![0.0; scales.len()];
    let mut worst_side: Vec<Vec<f64>> = vec![vec![0.0; scales.len()]; 3];
    // Every TRIM condition is its own study: the figures of one are never set beside another's.
    let trims: Vec<String> = exp.trims.iter().map(|t| t.label()).collect();
    for (w, trim) in exp
        .workloads
        .iter()
        .flat_map(|w| trims.iter().map(move |t| (w, t)))
    {
        let (by_figure, split) = at_scales(&tables, w, trim);
        // Rows are scales, columns figures.
        let transpose = |cols: &[Vec<Option<f64>>]| -> Vec<Vec<Option<f64>>> {
            (0..scales.len())
                .map(|i| cols.iter().map(|c| c[i]).collect())
                .collect()
        };
        let values = transpose(&by_figure);
        note_largest_moves(&values, |_| true, &mut worst);
        let rows = moves_table(&scales, &values);
        let split_values = transpose(&split);
        for (side, w) in [Side::Engine, Side::Device, Side::Relative]
            .into_iter()
            .zip(worst_side.iter_mut())
        {
            note_largest_moves(&split_values, |j| SPLIT[j].1 == side, w);
        }
        let split_rows = moves_table(&scales, &split_values);
        let title = if trims.len() > 1 {
            format!("{w}, TRIM {trim}")
        } else {
            w.clone()
        };
        r.h3(title.clone());
        let head: Vec<&str> = std::iter::once("scale")
            .chain(FIGURES.iter().map(|f| f.0))
            .collect();
        r.table(&head, rows);
        let name = if trims.len() > 1 {
            format!("scale-{w}-t{trim}")
        } else {
            format!("scale-{w}")
        };
        flash_plot(r, out, &scales, &title, &name, &by_figure)?;
        r.p("Flash writes per operation is host pages written per operation × the device's WAF; which factor moves:");
        let head: Vec<&str> = std::iter::once("scale")
            .chain(SPLIT.iter().map(|f| f.0))
            .collect();
        r.table(&head, split_rows);
    }
    r.p("Each cell: the median over seeds at that scale, and in parentheses how far it lies from the next larger scale's.");
    r.p(convergence_reading(&scales, &worst));
    r.p(sides_reading(&scales, &worst_side));
    Ok(())
}

/// Figures at every scale: one column per figure, with a value per scale.
type Columns = Vec<Vec<Option<f64>>>;

/// Each figure of [`FIGURES`] and of [`SPLIT`] for workload `w` under TRIM `trim`.
fn at_scales(tables: &[(&str, Vec<Point>)], w: &str, trim: &str) -> (Columns, Columns) {
    let at_scale = |figure: &dyn Fn(&Table, &Cell) -> Option<f64>| -> Vec<Option<f64>> {
        tables
            .iter()
            .map(|(_, ps)| {
                let t = Table::new(ps);
                let base = t.cells.keys().find(|c| {
                    c.workload == w && c.trim == trim && c.on(WIREDTIGER) && c.policy == "none"
                });
                base.and_then(|b| figure(&t, b))
            })
            .collect()
    };
    let by_figure: Columns = FIGURES.iter().map(|(_, f)| at_scale(f)).collect();
    let split: Columns = SPLIT.iter().map(|(_, _, f)| at_scale(f)).collect();
    (by_figure, split)
}

/// The flash-writes figures (the first four) against scale, as plot `name`.
fn flash_plot(
    r: &mut Report,
    out: &Path,
    scales: &[&str],
    title: &str,
    name: &str,
    by_figure: &Columns,
) -> Result<()> {
    // The flash-writes figures (the first four) against scale.
    let cats: Vec<String> = scales.iter().map(|s| s.to_string()).collect();
    let series: Vec<(String, Vec<f64>)> = FIGURES[..4]
        .iter()
        .zip(by_figure)
        .map(|(f, v)| {
            (
                f.0.trim_end_matches(" flash writes/op").to_string(),
                v.iter().map(|x| x.unwrap_or(0.0)).collect(),
            )
        })
        .collect();
    plot::bars(
        &out.join(name),
        &Bars {
            title: &format!("{title}: flash page writes per operation by scale"),
            x_label: "scale",
            y_label: "flash page writes / operation",
            categories: &cats,
            series: &series,
            reference: None,
            stacked: false,
        },
    )?;
    r.img(
        &format!("{name}.png"),
        "flash writes per operation by scale",
    );
    Ok(())
}

/// How far each scale's figures lie from the next larger scale's at most, and which scale
/// converged.
fn convergence_reading(scales: &[&str], worst: &[f64]) -> String {
    let mut s = String::new();
    for (i, sc) in scales.iter().enumerate() {
        if i + 1 < scales.len() {
            write!(
                s,
                "{sc}: every figure within {:.1}% of {}. ",
                worst[i] * 100.0,
                scales[i + 1]
            )
            .unwrap();
        }
    }
    let medium = SCALES.iter().position(|x| *x == "medium").unwrap_or(0);
    let converged = scales.iter().enumerate().find(|(i, sc)| {
        SCALES.iter().position(|x| x == *sc).unwrap_or(0) >= medium
            && *i + 1 < scales.len()
            && worst[*i] < 0.02
    });
    match converged {
    Some((_, sc)) => write!(s, "**The converged scale is {sc}**: the smallest scale, at least medium, at which every headline figure moves by less than 2% against the next larger scale run here.").unwrap(),
    None => write!(s, "**No scale converged** by that rule (every figure within 2% of the next larger scale) among those run here; the largest, {}, has no larger one to be checked against.", scales.last().unwrap_or(&"?")).unwrap(),
}
    s
}

/// Per pair of consecutive scales, how far the engine's figures, the device's and flashdoc's
/// share of dsm's moved at most, and the first scale from which each side stays within 2 %.
fn sides_reading(scales: &[&str], worst_side: &[Vec<f64>]) -> String {
    let names = [
        "the engine's host pages per operation",
        "the device's WAF",
        "the ratio flashdoc ÷ dsm",
    ];
    let mut s =
        String::from("Split by side, the largest move of any workload to the next larger scale: ");
    for (i, sc) in scales
        .iter()
        .enumerate()
        .take(scales.len().saturating_sub(1))
    {
        let parts: Vec<String> = names
            .iter()
            .zip(worst_side)
            .map(|(n, w)| format!("{n} {:.1}%", w[i] * 100.0))
            .collect();
        write!(s, "{sc} → {}: {}. ", scales[i + 1], parts.join(", ")).unwrap();
    }
    for (n, w) in names.iter().zip(worst_side) {
        // The first scale from which every later step stays within 2 %.
        let last = scales.len().saturating_sub(1);
        let from = (0..last).find(|&i| (i..last).all(|j| w[j] < 0.02));
        let n = n.replacen("the", "The", 1);
        match from {
            Some(i) => write!(s, "{n} stops moving (within 2 %) from {} on. ", scales[i]).unwrap(),
            None => write!(s, "{n} still moves by more than 2 % to {}. ", scales[last]).unwrap(),
        }
    }
    s.trim_end().to_string()
}
