//! The papers' figures as SVG (plotters): line charts of measured series, one file each.
//! Text goes into the SVG as `<text>` in a generic sans-serif family (no font files, no
//! network), so a browser shows it with whatever sans-serif it has.

use plotters::prelude::*;
use serde::Serialize;

/// One plotted line: a name for the legend and its (x, y) points.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A figure in the paper's shape: its axes, their units and scales, and the series.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    /// File stem: the SVG is `<id>.svg`.
    pub id: String,
    pub paper: String,
    /// The paper's figure or table it redraws, and what it shows.
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Bars instead of lines: the x of each point is an index into these names.
    pub categories: Vec<String>,
}

/// Twelve colours, so `compare`'s eleven designs each get their own.
const COLORS: [RGBColor; 12] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x39, 0x3b, 0x79),
    RGBColor(0x00, 0x00, 0x00),
];

/// The range an axis needs for `values`, padded; positive for a log axis. The y axis
/// (`headroom`) leaves room above the data for the legend, upper left.
fn span(values: impl Iterator<Item = f64>, log: bool, headroom: bool) -> (f64, f64) {
    let v: Vec<f64> = values
        .filter(|x| x.is_finite() && (!log || *x > 0.0))
        .collect();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if v.is_empty() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 2.0, hi * if headroom { 30.0 } else { 2.0 })
    } else {
        // Positive data start at zero, as the papers draw them.
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        let lo = if lo >= 0.0 { 0.0 } else { lo - pad };
        let room = if headroom { (hi - lo) * 0.45 } else { 0.0 };
        (lo, hi + room + pad)
    }
}

/// The y axis range of `f`, with room for the legend.
fn y_span(f: &Figure) -> (f64, f64) {
    span(
        f.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        f.log_y,
        true,
    )
}

/// A chart builder with the figure's title and the label areas every figure has.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    f: &Figure,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&f.title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(84);
    builder
}

/// Draws `f` as an SVG document.
pub fn svg(f: &Figure) -> anyhow::Result<String> {
    if !f.categories.is_empty() {
        return bars(f);
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let xs = span(
            f.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            f.log_x,
            false,
        );
        let ys = y_span(f);
        let mut builder = frame(&root, f);
        // Four combinations of linear and log axes are four chart types.
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(draw_err)?;
                chart
                    .configure_mesh()
                    .x_desc(&f.x_label)
                    .y_desc(&f.y_label)
                    .label_style(("sans-serif", 13))
                    .axis_desc_style(("sans-serif", 15))
                    .draw()
                    .map_err(draw_err)?;
                for (i, s) in f.series.iter().enumerate() {
                    let c = COLORS[i % COLORS.len()];
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|&(x, y)| (!f.log_x || x > 0.0) && (!f.log_y || y > 0.0))
                        .collect();
                    chart
                        .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                        .map_err(draw_err)?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                        });
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                        .map_err(draw_err)?;
                }
                legend(&mut chart)?;
            }};
        }
        match (f.log_x, f.log_y) {
            (false, false) => draw!(builder.build_cartesian_2d(xs.0..xs.1, ys.0..ys.1)),
            (false, true) => {
                draw!(builder.build_cartesian_2d(xs.0..xs.1, (ys.0..ys.1).log_scale()))
            }
            (true, false) => {
                draw!(builder.build_cartesian_2d((xs.0..xs.1).log_scale(), ys.0..ys.1))
            }
            (true, true) => {
                draw!(builder.build_cartesian_2d((xs.0..xs.1).log_scale(), (ys.0..ys.1).log_scale()))
            }
        }
        root.present().map_err(draw_err)?;
    }
    Ok(out)
}

/// Grouped bars: one group per category, one bar per series.
fn bars(f: &Figure) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let n = f.categories.len();
        let ys = y_span(f);
        let mut builder = frame(&root, f);
        let names = f.categories.clone();
        let label = move |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].clone()
            } else {
                String::new()
            }
        };
        let width = 0.8 / f.series.len().max(1) as f64;
        macro_rules! draw {
            ($chart:expr, $base:expr) => {{
                let mut chart = $chart.map_err(draw_err)?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(n + 1)
                    .x_label_formatter(&label)
                    .x_desc(&f.x_label)
                    .y_desc(&f.y_label)
                    .label_style(("sans-serif", 13))
                    .axis_desc_style(("sans-serif", 15))
                    .draw()
                    .map_err(draw_err)?;
                for (i, s) in f.series.iter().enumerate() {
                    let c = COLORS[i % COLORS.len()];
                    let left = |x: f64| x - 0.4 + i as f64 * width;
                    chart
                        .draw_series(s.points.iter().filter(|p| !f.log_y || p.1 > 0.0).map(
                            |&(x, y)| {
                                Rectangle::new([(left(x), $base), (left(x) + width, y)], c.filled())
                            },
                        ))
                        .map_err(draw_err)?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled())
                        });
                }
                legend(&mut chart)?;
            }};
        }
        let xs = -0.5..(n as f64 - 0.5);
        if f.log_y {
            draw!(
                builder.build_cartesian_2d(xs, (ys.0..ys.1).log_scale()),
                ys.0
            );
        } else {
            draw!(builder.build_cartesian_2d(xs, ys.0..ys.1), 0.0);
        }
        root.present().map_err(draw_err)?;
    }
    Ok(out)
}

/// The legend every figure has: upper left, in the room `y_span` leaves above the data.
fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(draw_err)
}

fn draw_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_has_its_title_axes_and_legend_as_text() {
        let f = Figure {
            id: "t".into(),
            paper: "minv".into(),
            title: "Figure 8: mount time".into(),
            x_label: "Utilization (%)".into(),
            y_label: "Mount time (ms)".into(),
            log_x: false,
            log_y: true,
            series: vec![
                Series {
                    name: "yaffs scan".into(),
                    points: vec![(0.0, 820.0), (100.0, 850.0)],
                },
                Series {
                    name: "minv".into(),
                    points: vec![(0.0, 0.74), (100.0, 0.75)],
                },
            ],
            categories: Vec::new(),
        };
        let s = svg(&f).unwrap();
        for text in [
            "Figure 8: mount time",
            "Utilization (%)",
            "Mount time (ms)",
            "minv",
        ] {
            assert!(s.contains(text), "{text} missing");
        }
        assert!(s.contains("<svg"));
        // As bars over named categories.
        let f = Figure {
            categories: vec!["fax".into(), "phone".into()],
            series: vec![Series {
                name: "yaffs".into(),
                points: vec![(0.0, 3.0), (1.0, 5.0)],
            }],
            ..f
        };
        let s = svg(&f).unwrap();
        assert!(s.contains("phone") && s.contains("yaffs") && s.contains("<rect"));
    }
}
