//! Line charts drawn to PNG: one panel per [`Chart`], several [`Series`] a panel, a legend.
//!
//! Drawing goes into an RGB buffer ([`render_rgb`]) that is then PNG-encoded, so tests can
//! look at pixels without decoding a file. Text uses Noto Sans compiled into the binary, so a
//! machine without fonts (CI) draws the same image as a desktop.

use super::series::Series;
use anyhow::{bail, ensure, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

/// One panel: a title, axis labels and the lines drawn on it.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// The caption above the panel.
    pub title: String,
    /// The x axis description (empty: none).
    pub x_label: String,
    /// The y axis description (empty: none).
    pub y_label: String,
    /// The lines, each with a legend entry; one name keeps one colour across panels.
    pub series: Vec<Series>,
    /// A fixed y range; `None` fits the data.
    pub y_range: Option<(f64, f64)>,
}

/// The line colours, in order of first appearance of a series name (Tableau 10: distinct, and
/// readable by most colour-blind readers).
pub const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// The largest image side accepted, so a typo in a size cannot allocate gigabytes.
pub const MAX_SIDE: u32 = 16_384;

/// The font family every text is drawn in; registered once with the embedded font.
const FONT: &str = "sans-serif";

/// `(rows, columns)` of the grid holding `panels` panels: as square as possible, wider than
/// tall (screens and papers are).
pub fn grid(panels: usize) -> (usize, usize) {
    let panels = panels.max(1);
    let cols = (panels as f64).sqrt().ceil() as usize;
    (panels.div_ceil(cols), cols)
}

/// The image size for `panels` panels of `panel` pixels each, laid out by [`grid`].
pub fn grid_size(panels: usize, panel: (u32, u32)) -> (u32, u32) {
    let (rows, cols) = grid(panels);
    (panel.0 * cols as u32, panel.1 * rows as u32)
}

/// Draws `charts` (one panel each, in a [`grid`]) into a `size` PNG at `path`, creating its
/// folder.
pub fn draw_png(charts: &[Chart], path: &Path, size: (u32, u32)) -> Result<()> {
    write_png(&render_rgb(charts, size)?, size, path)
}

/// Encodes an RGB buffer of `size` as a PNG at `path`, creating its folder.
pub(crate) fn write_png(rgb: &[u8], size: (u32, u32), path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create folder {}", dir.display()))?;
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), size.0, size.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder
        .write_header()
        .with_context(|| format!("cannot write {}", path.display()))?;
    writer
        .write_image_data(rgb)
        .and_then(|()| writer.finish())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Draws `charts` (one panel each, in a [`grid`]) into a `size` RGB buffer, 3 bytes a pixel,
/// row by row.
pub fn render_rgb(charts: &[Chart], size: (u32, u32)) -> Result<Vec<u8>> {
    ensure!(!charts.is_empty(), "nothing to plot: no chart");
    let (w, h) = size;
    ensure!(
        (1..=MAX_SIDE).contains(&w) && (1..=MAX_SIDE).contains(&h),
        "image size {w}x{h} is outside 1..={MAX_SIDE} pixels a side"
    );
    register_font()?;
    let colours = colours(charts);
    let mut buf = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, size).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly(grid(charts.len()));
        for (chart, area) in charts.iter().zip(&panels) {
            draw_panel(area, chart, &colours)
                .with_context(|| format!("cannot draw panel `{}`", chart.title))?;
        }
        root.present()?;
    }
    Ok(buf)
}

/// Registers the embedded Noto Sans under the family names plotters asks for; `ab_glyph` has
/// no other font source (deliberately: no system fonts on CI).
pub(crate) fn register_font() -> Result<()> {
    static OK: OnceLock<bool> = OnceLock::new();
    let ok = *OK.get_or_init(|| {
        ["sans-serif", "serif", "monospace"].iter().all(|family| {
            plotters::style::register_font(family, FontStyle::Normal, ttf_noto_sans::REGULAR)
                .is_ok()
        })
    });
    if !ok {
        bail!("the embedded Noto Sans font could not be parsed");
    }
    Ok(())
}

/// One colour per distinct series name, in order of first appearance over all panels.
fn colours(charts: &[Chart]) -> HashMap<&str, RGBColor> {
    let mut map = HashMap::new();
    for s in charts.iter().flat_map(|c| &c.series) {
        let n = map.len();
        map.entry(s.name.as_str()).or_insert_with(|| {
            let (r, g, b) = PALETTE[n % PALETTE.len()];
            RGBColor(r, g, b)
        });
    }
    map
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    chart: &Chart,
    colours: &HashMap<&str, RGBColor>,
) -> Result<()> {
    let finite = |&&(x, y): &&(f64, f64)| x.is_finite() && y.is_finite();
    let points = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter(finite))
    };
    let has_data = points().next().is_some();
    let x_range = fit(points().map(|p| p.0), false);
    let y_range = match chart.y_range {
        Some((lo, hi)) if lo < hi && lo.is_finite() && hi.is_finite() => (lo, hi),
        Some((lo, hi)) => bail!("y range {lo}..{hi} is empty or not finite"),
        None => fit(points().map(|p| p.1), true),
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&chart.title, (FONT, 18))
        .margin(10)
        .x_label_area_size(if chart.x_label.is_empty() { 25 } else { 40 })
        .y_label_area_size(if chart.y_label.is_empty() { 60 } else { 75 });
    let mut ctx = builder.build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)?;
    let x_span = x_range.1 - x_range.0;
    let y_span = y_range.1 - y_range.0;
    let x_fmt = move |v: &f64| tick_label(*v, x_span);
    let y_fmt = move |v: &f64| tick_label(*v, y_span);
    let mut mesh = ctx.configure_mesh();
    mesh.label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(RGBColor(235, 235, 235))
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt);
    if !chart.x_label.is_empty() {
        mesh.x_desc(chart.x_label.as_str());
    }
    if !chart.y_label.is_empty() {
        mesh.y_desc(chart.y_label.as_str());
    }
    mesh.draw()?;

    if !has_data {
        // Sides are at most MAX_SIDE, so they fit an i32.
        let (w, h) = area.dim_in_pixel();
        let style = TextStyle::from((FONT, 14).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        area.draw_text("no data", &style, (w as i32 / 2, h as i32 / 2))?;
        return Ok(());
    }
    let mut labelled = false;
    for s in &chart.series {
        let colour = colours[s.name.as_str()];
        let pts: Vec<(f64, f64)> = s.points.iter().filter(finite).copied().collect();
        let drawn = if pts.len() == 1 {
            // A line needs two points; one point is still a result worth seeing.
            ctx.draw_series(std::iter::once(Circle::new(pts[0], 3, colour.filled())))?
        } else {
            ctx.draw_series(LineSeries::new(pts, colour.stroke_width(2)))?
        };
        if !s.name.is_empty() {
            labelled = true;
            drawn.label(s.name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        }
    }
    if labelled {
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .draw()?;
    }
    Ok(())
}

/// The axis range holding `values`, padded a little so lines do not run along the frame (`pad`,
/// for y) and widened when all values are equal, since plotters needs a non-empty range.
fn fit(values: impl Iterator<Item = f64>, pad: bool) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi {
        return (0.0, 1.0);
    }
    if hi - lo <= f64::EPSILON * lo.abs().max(hi.abs()) {
        let half = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - half, hi + half);
    }
    if pad {
        let p = (hi - lo) * 0.05;
        (lo - p, hi + p)
    } else {
        (lo, hi)
    }
}

/// A tick label with as many digits as ticks about `span / 5` apart need: `0.2`, `1200`,
/// `1.04e-4` (learning rates would all read `0.0000` in fixed notation). plotters puts at
/// most 6 ticks at multiples of 1, 2 or 5 times a power of ten, so the real step is never
/// below the power of ten that `span / 5` starts with.
fn tick_label(v: f64, span: f64) -> String {
    let step = (span.abs() / 5.0).max(f64::MIN_POSITIVE);
    if v.abs() < step * 1e-6 {
        return "0".into();
    }
    let mag = v.abs().max(span.abs());
    if (1e-3..1e6).contains(&mag) {
        let decimals = (-step.log10().floor()).clamp(0.0, 8.0) as usize;
        format!("{v:.decimals$}")
    } else {
        // Scientific for the whole axis (by `mag`), mantissa digits by this value's own size.
        let digits = (v.abs().log10().floor() - step.log10().floor()).clamp(0.0, 6.0) as usize;
        // `1.0e-4` next to `8e-5` reads as two precisions: drop the zeros a mantissa ends with.
        let s = format!("{v:.digits$e}");
        match s.split_once('e') {
            Some((m, e)) if m.contains('.') => {
                format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
            }
            _ => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::read_jsonl_series;

    fn pixel(buf: &[u8], w: u32, x: u32, y: u32) -> (u8, u8, u8) {
        let i = (y * w + x) as usize * 3;
        (buf[i], buf[i + 1], buf[i + 2])
    }

    /// Pixels of exactly `c` in the rectangle `x0..x1` by `y0..y1`.
    fn count(
        buf: &[u8],
        w: u32,
        (x0, x1): (u32, u32),
        (y0, y1): (u32, u32),
        c: (u8, u8, u8),
    ) -> usize {
        (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .filter(|&(x, y)| pixel(buf, w, x, y) == c)
            .count()
    }

    /// Dark pixels (text is drawn in black, antialiased) in a rectangle.
    fn dark(buf: &[u8], w: u32, (x0, x1): (u32, u32), (y0, y1): (u32, u32)) -> usize {
        (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let (r, g, b) = pixel(buf, w, x, y);
                r < 100 && g < 100 && b < 100
            })
            .count()
    }

    fn curve(name: &str, f: impl Fn(f64) -> f64) -> Series {
        Series::new(name, (0..50).map(|i| (i as f64, f(i as f64))).collect())
    }

    #[test]
    fn report_grid_is_square_ish() {
        assert_eq!(grid(1), (1, 1));
        assert_eq!(grid(2), (1, 2));
        assert_eq!(grid(3), (2, 2));
        assert_eq!(grid(7), (3, 3));
        assert_eq!(grid(10), (3, 4));
        assert_eq!(grid_size(7, (100, 50)), (300, 150));
    }

    #[test]
    fn report_tick_labels_fit_the_span() {
        // plotters puts ticks at 1, 2 or 5 times a power of ten, at most 6 an axis here.
        assert_eq!(tick_label(0.2, 1.0), "0.2");
        assert_eq!(tick_label(0.05, 0.2), "0.05");
        assert_eq!(tick_label(40.0, 100.0), "40");
        assert_eq!(tick_label(1.04e-4, 2e-5), "1.04e-4");
        assert_eq!(tick_label(1e-17, 1.0), "0");
        assert_eq!(tick_label(3e6, 5e6), "3e6");
        assert_eq!(tick_label(1.2e7, 5e6), "1.2e7");
        assert_eq!(tick_label(1e-4, 1e-4), "1e-4");
        assert_eq!(tick_label(8e-5, 1e-4), "8e-5");
    }

    #[test]
    fn report_fit_pads_and_widens_flat_data() {
        assert_eq!(fit([1.0, 3.0].into_iter(), false), (1.0, 3.0));
        let (lo, hi) = fit([1.0, 3.0].into_iter(), true);
        assert!((lo - 0.9).abs() < 1e-12 && (hi - 3.1).abs() < 1e-12);
        assert_eq!(fit([0.0, 0.0].into_iter(), true), (-1.0, 1.0));
        assert_eq!(fit([2.0].into_iter(), true), (1.8, 2.2));
        assert_eq!(fit(std::iter::empty(), true), (0.0, 1.0));
    }

    #[test]
    fn report_draws_three_methods_with_their_colours_and_text() {
        let (w, h) = (640, 480);
        let chart = Chart {
            title: "Learning curves".into(),
            x_label: "step".into(),
            y_label: "reward".into(),
            series: vec![
                curve("binary-rl", |x| (x / 10.0).sin()),
                curve("opd", |x| x / 50.0),
                curve("combine", |x| 1.0 - x / 50.0),
            ],
            y_range: None,
        };
        let buf = render_rgb(&[chart], (w, h)).unwrap();
        assert_eq!(buf.len(), (w * h * 3) as usize);
        // Each method's line, in its own colour, over the plotting area (below the title).
        for c in &PALETTE[..3] {
            let n = count(&buf, w, (0, w), (40, h), *c);
            assert!(n > 200, "colour {c:?}: {n} pixels");
        }
        assert_eq!(count(&buf, w, (0, w), (0, h), PALETTE[3]), 0);
        // The title is drawn in the 10 px margin plus caption band at the top: text, not a
        // blank strip (its centre holds dark glyph pixels).
        let title = dark(&buf, w, (w / 2 - 80, w / 2 + 80), (0, 35));
        assert!(title > 100, "{title} dark pixels in the title area");
        // Tick labels at the left of the plot area.
        assert!(dark(&buf, w, (0, 70), (40, h - 40)) > 50);
    }

    #[test]
    fn report_colour_follows_the_series_name_across_panels() {
        let (w, h) = (800, 300);
        let charts = [
            Chart {
                title: "a".into(),
                series: vec![curve("run-1", |x| x), curve("run-2", |x| -x)],
                ..Chart::default()
            },
            Chart {
                title: "b".into(),
                // run-1 is missing here: run-2 must keep its colour.
                series: vec![curve("run-2", |x| x * x)],
                ..Chart::default()
            },
        ];
        let buf = render_rgb(&charts, (w, h)).unwrap();
        let right = (w / 2, w);
        assert_eq!(count(&buf, w, right, (0, h), PALETTE[0]), 0);
        assert!(count(&buf, w, right, (0, h), PALETTE[1]) > 100);
        assert!(count(&buf, w, (0, w / 2), (0, h), PALETTE[0]) > 100);
    }

    #[test]
    fn report_rejects_bad_sizes_ranges_and_empty_input() {
        let one = Chart {
            series: vec![curve("x", |x| x)],
            ..Chart::default()
        };
        assert!(render_rgb(&[], (10, 10)).is_err());
        assert!(render_rgb(std::slice::from_ref(&one), (0, 10)).is_err());
        assert!(render_rgb(std::slice::from_ref(&one), (MAX_SIDE + 1, 10)).is_err());
        let flat = Chart {
            y_range: Some((1.0, 1.0)),
            ..one
        };
        let e = format!("{:#}", render_rgb(&[flat], (200, 200)).unwrap_err());
        assert!(e.contains("y range"), "{e}");
        // A panel with no points (or one) still draws.
        let sparse = [
            Chart::default(),
            Chart {
                series: vec![Series::new("one", vec![(1.0, 2.0)])],
                ..Chart::default()
            },
        ];
        let buf = render_rgb(&sparse, (400, 200)).unwrap();
        assert!(count(&buf, 400, (200, 400), (0, 200), PALETTE[0]) > 5);
    }

    #[test]
    fn report_training_log_to_png() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("training.log");
        let text: String = (1..=30)
            .map(|s| {
                format!(
                    "{{\"step\":{s},\"samples\":4,\"loss\":{},\"metrics\":{{\"clip_frac\":0.0,\"kl\":{}}},\"grad_norm\":0.8,\"lr\":0.0001,\"step_time_s\":0.05}}\n",
                    1.0 / s as f64,
                    0.01 * s as f64
                )
            })
            .collect();
        std::fs::write(&log, text).unwrap();
        let read = read_jsonl_series(&log, "step").unwrap();
        let charts: Vec<Chart> = ["loss", "metrics.kl"]
            .iter()
            .map(|m| Chart {
                title: m.to_string(),
                x_label: "step".into(),
                series: vec![Series::new("run", read.series[*m].clone())],
                ..Chart::default()
            })
            .collect();
        let out = dir.path().join("sub/training.png");
        draw_png(&charts, &out, (900, 350)).unwrap();

        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&bytes[12..16], b"IHDR");
        let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
        assert_eq!((be(16), be(20)), (900, 350));

        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let rgb = &rgb[..info.buffer_size()];
        // Not blank: both panels hold the run's line, and text.
        for half in [(0, 450), (450, 900)] {
            assert!(count(rgb, 900, half, (40, 350), PALETTE[0]) > 100);
            assert!(dark(rgb, 900, half, (0, 35)) > 20);
        }
    }
}
