//! The scale study: each headline figure at every scale, how much it moves to the next larger
//! scale, and the converged scale (the smallest, at least medium, at which every figure moves
//! by less than 2 % against the next larger one).

use super::Report;
use crate::experiment::{Experiment, SCALES};
use crate::plot::{self, Bars};
use crate::run::Point;
use crate::summary::{flash_per_op, gap_closure, modeled, Cell, Table, FLASHDOC, WIREDTIGER};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// A headline figure: its name and how it is computed on one scale's table for a workload.
type Figure = (&'static str, fn(&Table, &Cell) -> Option<f64>);

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
        flash(t, &b.with(FLASHDOC, "filelog"))
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
        t.paired_ratio(&b.with(FLASHDOC, "filelog"), b, modeled)
            .map(|s| s.median)
    }),
    ("co-design gap closed", |t, b| {
        gap_closure(
            t,
            b,
            (FLASHDOC, "filelog"),
            (WIREDTIGER, "dsm"),
            WIREDTIGER,
            flash_per_op,
        )
        .map(|g| g.closed.median)
    }),
];

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
    // The largest relative move of any figure of any workload, per scale against the next.
    let mut worst: Vec<f64> = vec![0.0; scales.len()];
    // Every TRIM condition is its own study: the figures of one are never set beside another's.
    let trims: Vec<String> = exp.trims.iter().map(|t| t.label()).collect();
    for (w, trim) in exp
        .workloads
        .iter()
        .flat_map(|w| trims.iter().map(move |t| (w, t)))
    {
        let mut rows = Vec::new();
        let values: Vec<Vec<Option<f64>>> = tables
            .iter()
            .map(|(_, ps)| {
                let t = Table::new(ps);
                let base = t
                    .cells
                    .keys()
                    .find(|c| {
                        &c.workload == w
                            && &c.trim == trim
                            && c.allocation == WIREDTIGER
                            && c.policy == "none"
                    })
                    .cloned();
                FIGURES
                    .iter()
                    .map(|(_, f)| base.as_ref().and_then(|b| f(&t, b)))
                    .collect()
            })
            .collect();
        for (i, s) in scales.iter().enumerate() {
            let mut row = vec![s.to_string()];
            for (j, _) in FIGURES.iter().enumerate() {
                let v = values[i][j];
                let next = values.get(i + 1).and_then(|n| n[j]);
                let cell = match (v, next) {
                    (Some(v), Some(n)) => {
                        let d = (v - n) / n.abs().max(1e-12);
                        worst[i] = worst[i].max(d.abs());
                        format!("{v:.3} ({:+.1}%)", d * 100.0)
                    }
                    (Some(v), None) => format!("{v:.3}"),
                    _ => "–".into(),
                };
                row.push(cell);
            }
            rows.push(row);
        }
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
        // The flash-writes figures (the first four) against scale.
        let cats: Vec<String> = scales.iter().map(|s| s.to_string()).collect();
        let series: Vec<(String, Vec<f64>)> = FIGURES[..4]
            .iter()
            .enumerate()
            .map(|(j, f)| {
                (
                    f.0.trim_end_matches(" flash writes/op").to_string(),
                    values.iter().map(|v| v[j].unwrap_or(0.0)).collect(),
                )
            })
            .collect();
        let name = if trims.len() > 1 {
            format!("scale-{w}-t{trim}")
        } else {
            format!("scale-{w}")
        };
        plot::bars(
            &out.join(&name),
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
    }
    r.p("Each cell: the median over seeds at that scale, and in parentheses how far it lies from the next larger scale's.");
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
    r.p(s);
    Ok(())
}
