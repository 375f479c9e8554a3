//! Plots as PNG and SVG (plotters). Every chart has a title, axes with units and a legend.

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::element::ComposedElement;
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

/// Series a plot can tell apart: each gets its own colour and its own marker, none repeated.
/// A plot of more series is refused (a colour or marker shared by two would mislabel one).
pub const MAX_SERIES: usize = 16;

/// A qualitative palette that stays apart in print: Tableau's ten, then six more dark or
/// saturated ones that none of the ten is near.
const PALETTE: [RGBColor; MAX_SERIES] = [
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
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 100, 0),
    RGBColor(230, 171, 2),
    RGBColor(102, 194, 165),
    RGBColor(64, 0, 75),
];

/// Series `i`'s colour (`i < MAX_SERIES`; a larger `i` wraps, which only plots of too many
/// series would ask, and [`bars`] refuses them).
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % MAX_SERIES]
}

/// A marker's outline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    TriangleUp,
    TriangleDown,
    Diamond,
    Star,
    Plus,
    Cross,
}

const SHAPES: [Shape; 8] = [
    Shape::Circle,
    Shape::Square,
    Shape::TriangleUp,
    Shape::TriangleDown,
    Shape::Diamond,
    Shape::Star,
    Shape::Plus,
    Shape::Cross,
];

/// A marker: a shape, filled with the series' colour or hollow (white inside, the colour as
/// its outline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub shape: Shape,
    pub filled: bool,
}

/// Series `i`'s marker: the eight shapes filled, then the eight hollow (wraps past
/// [`MAX_SERIES`], as [`color`]).
pub fn marker(i: usize) -> Marker {
    let i = i % MAX_SERIES;
    Marker {
        shape: SHAPES[i % SHAPES.len()],
        filled: i < SHAPES.len(),
    }
}

impl Shape {
    /// The outline as pixel offsets from the marker's centre, `r` its radius.
    fn outline(self, r: i32) -> Vec<(i32, i32)> {
        let polar = |n: usize, phase: f64, radius: &dyn Fn(usize) -> f64| -> Vec<(i32, i32)> {
            (0..n)
                .map(|k| {
                    let a = phase + k as f64 * std::f64::consts::TAU / n as f64;
                    let d = radius(k);
                    ((d * a.cos()).round() as i32, (d * a.sin()).round() as i32)
                })
                .collect()
        };
        let rf = r as f64;
        let w = (r / 3).max(1);
        match self {
            Shape::Circle => polar(16, 0.0, &|_| rf),
            Shape::Square => vec![(-r, -r), (r, -r), (r, r), (-r, r)],
            Shape::TriangleUp => vec![(0, -r), (r, r), (-r, r)],
            Shape::TriangleDown => vec![(-r, -r), (r, -r), (0, r)],
            Shape::Diamond => vec![(0, -r), (r, 0), (0, r), (-r, 0)],
            Shape::Star => polar(10, -std::f64::consts::FRAC_PI_2, &|k| {
                if k % 2 == 0 {
                    rf * 1.2
                } else {
                    rf * 0.5
                }
            }),
            Shape::Plus => vec![
                (-w, -r),
                (w, -r),
                (w, -w),
                (r, -w),
                (r, w),
                (w, w),
                (w, r),
                (-w, r),
                (-w, w),
                (-r, w),
                (-r, -w),
                (-w, -w),
            ],
            Shape::Cross => {
                // The plus turned by 45°.
                let c = std::f64::consts::FRAC_1_SQRT_2;
                Shape::Plus
                    .outline(r)
                    .into_iter()
                    .map(|(x, y)| {
                        let (x, y) = (x as f64, y as f64);
                        (((x - y) * c).round() as i32, ((x + y) * c).round() as i32)
                    })
                    .collect()
            }
        }
    }
}

/// The marker drawn at `at` (a data coordinate, or a pixel in a legend), `lift` pixels
/// higher: a polygon in the series' colour (white when hollow) inside a closed outline (dark
/// when filled, the colour when hollow).
fn marker_at<C, DB: DrawingBackend>(
    at: C,
    lift: i32,
    (m, r): (Marker, i32),
    col: RGBColor,
) -> MarkerElement<C, DB> {
    let outline: Vec<(i32, i32)> = m
        .shape
        .outline(r)
        .into_iter()
        .map(|(x, y)| (x, y - lift))
        .collect();
    let mut closed = outline.clone();
    closed.push(outline[0]);
    let (fill, edge) = if m.filled {
        (col.filled(), BLACK.stroke_width(1))
    } else {
        (WHITE.filled(), col.stroke_width(2))
    };
    EmptyElement::at(at) + Polygon::new(outline, fill) + PathElement::new(closed, edge)
}

/// A marker's drawing: its filled polygon and its outline, at one coordinate.
type MarkerElement<C, DB> = ComposedElement<C, DB, Polygon<(i32, i32)>, PathElement<(i32, i32)>>;

/// Marker radius, pixels.
const MARKER_R: i32 = 5;

/// Width of the legend column right of the plot, pixels: the legend sits outside the
/// plotting area, so it never covers data.
const LEGEND_W: u32 = 290;

/// The legend in its own area: one line per series, the colour's swatch, the marker and the
/// name.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: &[&str],
    top: i32,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let line = 22;
    for (i, name) in names.iter().enumerate() {
        let y = top + i as i32 * line;
        let col = color(i);
        area.draw(&Rectangle::new([(8, y - 6), (30, y + 6)], col.filled()))
            .map_err(|e| anyhow!("{e}"))?;
        area.draw(&marker_at::<_, DB>((44, y), 0, (marker(i), MARKER_R), col))
            .map_err(|e| anyhow!("{e}"))?;
        area.draw(&Text::new(
            name.to_string(),
            (58, y - 8),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
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

/// Writes `base.png` and `base.svg`; refuses more than [`MAX_SERIES`] series.
pub fn bars(base: &Path, chart: &Bars) -> Result<()> {
    if chart.series.len() > MAX_SERIES {
        return Err(anyhow!(
            "{}: {} series, more than the {MAX_SERIES} a plot tells apart",
            chart.title,
            chart.series.len()
        ));
    }
    init_fonts()?;
    let png = base.with_extension("png");
    let svg = base.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, (1100 + LEGEND_W, 620)).into_drawing_area();
        draw_bars(&root, chart)?;
        root.present()
            .with_context(|| format!("writing {}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (1100 + LEGEND_W, 620)).into_drawing_area();
        draw_bars(&root, chart)?;
        root.present()
            .with_context(|| format!("writing {}", svg.display()))?;
    }
    Ok(())
}

/// Where series `si`'s bar in category `ci` stands: its left edge, bottom and width.
fn bar_place(c: &Bars, si: usize, ci: usize) -> (f64, f64, f64) {
    let group_w = 0.8;
    if c.stacked {
        let below: f64 = c.series[..si]
            .iter()
            .map(|s| s.1.get(ci).copied().unwrap_or(0.0))
            .sum();
        (ci as f64 + 0.1, below, group_w)
    } else {
        let bar_w = group_w / c.series.len().max(1) as f64;
        (ci as f64 + 0.1 + si as f64 * bar_w, 0.0, bar_w)
    }
}

/// The y axis's top: the tallest bar (or stack) or the reference line, with room above for
/// the markers (the legend is beside the plot, not in it).
fn y_top(c: &Bars) -> f64 {
    let n_cat = c.categories.len().max(1);
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
    top.max(c.reference.unwrap_or(0.0)).max(1e-9) * 1.08
}

/// Where a chart put its data and its legend, in pixels: `(x range, y range)` each.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub plot: (std::ops::Range<i32>, std::ops::Range<i32>),
    pub legend: (std::ops::Range<i32>, std::ops::Range<i32>),
}

fn draw_bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Bars) -> Result<Layout>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (plot_area, legend_area) = root.split_horizontally(root.dim_in_pixel().0 - LEGEND_W);
    let n_cat = c.categories.len().max(1);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(c.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n_cat as f64, 0f64..y_top(c))
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
    for (si, (_, vals)) in c.series.iter().enumerate() {
        let col = color(si);
        let place = |ci| bar_place(c, si, ci);
        chart
            .draw_series(vals.iter().enumerate().map(|(ci, &v)| {
                let (x0, y0, w) = place(ci);
                Rectangle::new([(x0, y0), (x0 + w * 0.95, y0 + v)], col.filled())
            }))
            .map_err(|e| anyhow!("{e}"))?;
        // The series' marker on each bar: above it side by side, inside its segment stacked.
        chart
            .draw_series(vals.iter().enumerate().map(|(ci, &v)| {
                let (x0, y0, w) = place(ci);
                let y = if c.stacked { y0 + v / 2.0 } else { y0 + v };
                let at = (x0 + w * 0.475, y);
                let lift = if c.stacked { 0 } else { MARKER_R + 2 };
                marker_at::<_, DB>(at, lift, (marker(si), MARKER_R), col)
            }))
            .map_err(|e| anyhow!("{e}"))?;
    }
    if let Some(r) = c.reference {
        chart
            .draw_series(LineSeries::new(
                [(0.0, r), (n_cat as f64, r)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| anyhow!("{e}"))?;
    }
    let names: Vec<&str> = c.series.iter().map(|s| s.0.as_str()).collect();
    draw_legend(&legend_area, &names, 60)?;
    Ok(Layout {
        plot: chart.plotting_area().get_pixel_range(),
        legend: legend_area.get_pixel_range(),
    })
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
        let root = BitMapBackend::new(&png, (1100 + LEGEND_W, h)).into_drawing_area();
        draw_scatter(&root, title, panels)?;
        root.present()
            .with_context(|| format!("writing {}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (1100 + LEGEND_W, h)).into_drawing_area();
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
    for (panel, p) in areas.iter().zip(panels) {
        let (area, legend) = panel.split_horizontally(panel.dim_in_pixel().0 - LEGEND_W);
        let y_max = p.points.iter().map(|x| x.1).fold(0.0, f64::max).max(1e-3) * 1.05;
        let mut chart = ChartBuilder::on(&area)
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
        // Stream s is series s: the legend gives each stream its colour and marker.
        for &s in &streams {
            let col = color(s as usize);
            chart
                .draw_series(
                    p.points
                        .iter()
                        .filter(|x| x.2 == s)
                        .map(|x| marker_at::<_, DB>((x.0, x.1), 0, (marker(s as usize), 3), col)),
                )
                .map_err(|e| anyhow!("{e}"))?;
        }
        let max = streams.last().map_or(0, |&s| s as usize + 1);
        let names: Vec<String> = (0..max).map(|s| format!("stream {s}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        draw_legend(&legend, &names, 30)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headline's bar chart is the lab's largest plot: 12 series (the seeds' policies and
    /// ours on two engines, and the oracles on both). No two series of a plot of up to
    /// `MAX_SERIES` share a colour or a marker, and a plot of more is refused.
    #[test]
    fn no_two_series_share_a_colour_or_a_marker() {
        const LARGEST_PLOT: usize = 12;
        const { assert!(LARGEST_PLOT <= MAX_SERIES) };
        for i in 0..MAX_SERIES {
            for j in 0..i {
                assert_ne!(color(i), color(j), "series {i} and {j} share a colour");
                assert_ne!(marker(i), marker(j), "series {i} and {j} share a marker");
            }
            // Every outline is a shape of its own (no two shapes draw alike).
            let o = marker(i).shape.outline(MARKER_R);
            assert!(o.len() >= 3, "{:?}", marker(i));
        }
        let outlines: Vec<_> = SHAPES.iter().map(|s| s.outline(MARKER_R)).collect();
        for i in 0..outlines.len() {
            for j in 0..i {
                assert_ne!(outlines[i], outlines[j], "{:?} {:?}", SHAPES[i], SHAPES[j]);
            }
        }
        let cats = vec!["a".to_string()];
        let many: Vec<(String, Vec<f64>)> = (0..=MAX_SERIES)
            .map(|i| (format!("s{i}"), vec![1.0]))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let chart = Bars {
            title: "too many",
            x_label: "x",
            y_label: "y",
            categories: &cats,
            series: &many,
            reference: None,
            stacked: false,
        };
        let err = bars(&dir.path().join("many"), &chart).unwrap_err();
        assert!(err.to_string().contains("more than the 16"), "{err}");
    }

    /// The legend stands beside the plotting area, so it covers no bar, however tall.
    #[test]
    fn the_legend_is_outside_the_plotting_area() {
        init_fonts().unwrap();
        let cats: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        let series: Vec<(String, Vec<f64>)> = (0..12)
            .map(|i| (format!("series {i}"), vec![10.0; cats.len()]))
            .collect();
        let (w, h) = (1100 + LEGEND_W, 620);
        let mut buf = vec![0u8; (w * h * 3) as usize];
        for stacked in [false, true] {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            let chart = Bars {
                title: "t",
                x_label: "x",
                y_label: "y",
                categories: &cats,
                series: &series,
                reference: None,
                stacked,
            };
            let layout = draw_bars(&root, &chart).unwrap();
            root.present().unwrap();
            drop(root);
            assert!(
                layout.plot.0.end <= layout.legend.0.start,
                "the legend overlaps the plot: {layout:?}"
            );
        }
    }

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
