//! Plots as PNG and SVG (plotters). Every chart has a title, axes with units and a legend.

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

static FONT: OnceLock<Result<(), String>> = OnceLock::new();

/// Registers a TrueType sans font found on the system as "sans-serif" (once).
pub fn init_fonts() -> Result<()> {
    FONT.get_or_init(|| {
        let candidates = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        ];
        for c in candidates {
            if let Ok(bytes) = std::fs::read(c) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err("no TrueType sans font found (install fonts-dejavu-core)".to_string())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// A qualitative palette that stays apart in print.
pub fn color(i: usize) -> RGBColor {
    const P: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    P[i % P.len()]
}

/// One bar chart: `categories` along x, one bar per series in each category.
pub struct Bars<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub categories: &'a [String],
    pub series: &'a [(String, Vec<f64>)],
    /// A horizontal reference line (e.g. 1.0 for ratios to a baseline).
    pub reference: Option<f64>,
    /// Stack the series instead of placing them side by side.
    pub stacked: bool,
}

/// Writes `base.png` and `base.svg`.
pub fn bars(base: &Path, chart: &Bars) -> Result<()> {
    init_fonts()?;
    let png = base.with_extension("png");
    let svg = base.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, (1100, 620)).into_drawing_area();
        draw_bars(&root, chart)?;
        root.present()
            .with_context(|| format!("writing {}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (1100, 620)).into_drawing_area();
        draw_bars(&root, chart)?;
        root.present()
            .with_context(|| format!("writing {}", svg.display()))?;
    }
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Bars) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let n_cat = c.categories.len().max(1);
    let n_ser = c.series.len().max(1);
    let top = if c.stacked {
        (0..n_cat)
            .map(|i| {
                c.series
                    .iter()
                    .map(|s| s.1.get(i).copied().unwrap_or(0.0))
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    } else {
        c.series
            .iter()
            .flat_map(|s| s.1.iter().copied())
            .fold(0.0, f64::max)
    };
    // Headroom above the tallest bar for the legend (about one line per series).
    let top = top.max(c.reference.unwrap_or(0.0)).max(1e-9) * (1.12 + 0.06 * n_ser as f64);
    let mut chart = ChartBuilder::on(root)
        .caption(c.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n_cat as f64, 0f64..top)
        .map_err(|e| anyhow!("{e}"))?;
    let cats = c.categories.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n_cat * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 1e-6 && i < cats.len() {
                cats[i].clone()
            } else {
                String::new()
            }
        })
        .x_desc(c.x_label)
        .y_desc(c.y_label)
        .light_line_style(WHITE)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let group_w = 0.8;
    let bar_w = if c.stacked {
        group_w
    } else {
        group_w / n_ser as f64
    };
    for (si, (name, vals)) in c.series.iter().enumerate() {
        let col = color(si);
        let rects: Vec<Rectangle<(f64, f64)>> = vals
            .iter()
            .enumerate()
            .map(|(ci, &v)| {
                let (x0, y0) = if c.stacked {
                    let below: f64 = c.series[..si]
                        .iter()
                        .map(|s| s.1.get(ci).copied().unwrap_or(0.0))
                        .sum();
                    (ci as f64 + 0.1, below)
                } else {
                    (ci as f64 + 0.1 + si as f64 * bar_w, 0.0)
                };
                Rectangle::new([(x0, y0), (x0 + bar_w * 0.95, y0 + v)], col.filled())
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(|e| anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], col.filled()));
    }
    if let Some(r) = c.reference {
        chart
            .draw_series(LineSeries::new(
                [(0.0, r), (n_cat as f64, r)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// One scatter panel of the I/O-pattern figure.
pub struct Scatter<'a> {
    pub title: &'a str,
    /// (time s, offset MB, stream) per write.
    pub points: &'a [(f64, f64, u8)],
    /// Checkpoint commit times, s.
    pub checkpoints: &'a [f64],
}

/// Writes `base.png` and `base.svg`: one panel per entry, stacked vertically.
pub fn scatter_panels(base: &Path, title: &str, panels: &[Scatter]) -> Result<()> {
    init_fonts()?;
    let h = 260 * panels.len().max(1) as u32 + 60;
    let png = base.with_extension("png");
    let svg = base.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, (1100, h)).into_drawing_area();
        draw_scatter(&root, title, panels)?;
        root.present()
            .with_context(|| format!("writing {}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (1100, h)).into_drawing_area();
        draw_scatter(&root, title, panels)?;
        root.present()
            .with_context(|| format!("writing {}", svg.display()))?;
    }
    Ok(())
}

fn draw_scatter<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Scatter],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let root = root
        .titled(title, ("sans-serif", 24))
        .map_err(|e| anyhow!("{e}"))?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    let t_max = panels
        .iter()
        .flat_map(|p| {
            p.points
                .iter()
                .map(|x| x.0)
                .chain(p.checkpoints.iter().copied())
        })
        .fold(0.0, f64::max)
        .max(1e-3);
    for (area, p) in areas.iter().zip(panels) {
        let y_max = p.points.iter().map(|x| x.1).fold(0.0, f64::max).max(1e-3) * 1.05;
        let mut chart = ChartBuilder::on(area)
            .caption(p.title, ("sans-serif", 17))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("file offset (MB)")
            .light_line_style(WHITE)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for &t in p.checkpoints {
            chart
                .draw_series(LineSeries::new(
                    [(t, 0.0), (t, y_max)],
                    BLACK.mix(0.35).stroke_width(1),
                ))
                .map_err(|e| anyhow!("{e}"))?;
        }
        let mut streams: Vec<u8> = p.points.iter().map(|x| x.2).collect();
        streams.sort_unstable();
        streams.dedup();
        for s in streams {
            let col = color(s as usize);
            chart
                .draw_series(
                    p.points
                        .iter()
                        .filter(|x| x.2 == s)
                        .map(|x| Circle::new((x.0, x.1), 2, col.filled())),
                )
                .map_err(|e| anyhow!("{e}"))?
                .label(format!("stream {s}"))
                .legend(move |(x, y)| Circle::new((x + 6, y), 4, col.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_render_to_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let cats = vec!["a".to_string(), "b".to_string()];
        let series = vec![
            ("x".to_string(), vec![1.0, 2.0]),
            ("y".to_string(), vec![0.5, 1.5]),
        ];
        for stacked in [false, true] {
            let base = dir.path().join(format!("bars{stacked}"));
            bars(
                &base,
                &Bars {
                    title: "t",
                    x_label: "x",
                    y_label: "y",
                    categories: &cats,
                    series: &series,
                    reference: Some(1.0),
                    stacked,
                },
            )
            .unwrap();
            assert!(std::fs::metadata(base.with_extension("png")).unwrap().len() > 1000);
            assert!(std::fs::read_to_string(base.with_extension("svg"))
                .unwrap()
                .contains("<svg"));
        }
        let pts = [(0.1, 1.0, 0u8), (0.5, 2.0, 3u8)];
        let base = dir.path().join("sc");
        scatter_panels(
            &base,
            "io",
            &[Scatter {
                title: "coll",
                points: &pts,
                checkpoints: &[0.3],
            }],
        )
        .unwrap();
        assert!(base.with_extension("png").exists());
    }
}
