//! Grouped bar charts with 95% interval whiskers: one group per measure, one bar per model
//! (`eval --eval-tasks` draws base and trained side by side). The drawing goes into an RGB
//! buffer encoded as PNG, with the embedded font, as the line charts do.

use super::plot::{register_font, write_png, MAX_SIDE, PALETTE};
use anyhow::{ensure, Result};
use plotters::prelude::*;
use std::path::Path;

/// A bar: its value and interval, in [0, 1].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    /// The share.
    pub value: f64,
    /// The interval's ends.
    pub lo: f64,
    #[allow(missing_docs)]
    pub hi: f64,
}

/// One group of bars: a label under it and one bar (or none, when missing) per series.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// The label under the group.
    pub label: String,
    /// One entry per series name, in order.
    pub bars: Vec<Option<Bar>>,
}

/// Draws `groups` of bars, one colour per entry of `series`, titled `title`, into a PNG of
/// `size` at `path`.
pub fn draw_bars_png(
    title: &str,
    series: &[String],
    groups: &[Group],
    path: &Path,
    size: (u32, u32),
) -> Result<()> {
    write_png(&render_bars(title, series, groups, size)?, size, path)
}

/// [`draw_bars_png`] into an RGB buffer, 3 bytes a pixel, row by row.
pub fn render_bars(
    title: &str,
    series: &[String],
    groups: &[Group],
    size: (u32, u32),
) -> Result<Vec<u8>> {
    ensure!(!groups.is_empty(), "nothing to plot: no group of bars");
    ensure!(!series.is_empty(), "nothing to plot: no series");
    for g in groups {
        ensure!(
            g.bars.len() == series.len(),
            "group `{}` has {} bars for {} series",
            g.label,
            g.bars.len(),
            series.len()
        );
    }
    let (w, h) = size;
    ensure!(
        (1..=MAX_SIDE).contains(&w) && (1..=MAX_SIDE).contains(&h),
        "image size {w}x{h} is outside 1..={MAX_SIDE} pixels a side"
    );
    register_font()?;
    let colour = |i: usize| {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        RGBColor(r, g, b)
    };
    let mut buf = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, size).into_drawing_area();
        root.fill(&WHITE)?;
        let n = groups.len() as f64;
        let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..n, 0.0..1.05)?;
        let label_of = |x: &f64| {
            let i = x.floor() as usize;
            // A label at each group's centre.
            if (x - i as f64 - 0.5).abs() < 1e-6 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(groups.len() * 2 + 1)
            .x_label_formatter(&label_of)
            .y_desc("share (95% interval)")
            .label_style(("sans-serif", 12))
            .draw()?;
        // Bars fill 80% of a group, side by side.
        let width = 0.8 / series.len() as f64;
        for (gi, g) in groups.iter().enumerate() {
            for (si, bar) in g.bars.iter().enumerate() {
                let Some(b) = bar else { continue };
                let x0 = gi as f64 + 0.1 + si as f64 * width;
                let x1 = x0 + width * 0.9;
                let mid = (x0 + x1) / 2.0;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x1, b.value.clamp(0.0, 1.0))],
                    colour(si).filled(),
                )))?;
                // The whisker: the interval, capped at both ends.
                let (lo, hi) = (b.lo.clamp(0.0, 1.0), b.hi.clamp(0.0, 1.0));
                let cap = width * 0.2;
                chart.draw_series(
                    [
                        vec![(mid, lo), (mid, hi)],
                        vec![(mid - cap, lo), (mid + cap, lo)],
                        vec![(mid - cap, hi), (mid + cap, hi)],
                    ]
                    .into_iter()
                    .map(|points| PathElement::new(points, BLACK.stroke_width(1))),
                )?;
            }
        }
        // The legend: a coloured square per series.
        for (si, name) in series.iter().enumerate() {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, 0.0), (0.0, 0.0)],
                    colour(si).filled(),
                )))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour(si).filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        root.present()?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_drawn_to_their_height_in_their_series_colour() {
        let bar = |v: f64| {
            Some(Bar {
                value: v,
                lo: v - 0.05,
                hi: v + 0.05,
            })
        };
        let groups = vec![
            Group {
                label: "a".into(),
                bars: vec![bar(0.2), bar(0.9)],
            },
            Group {
                label: "b".into(),
                bars: vec![None, bar(0.5)],
            },
        ];
        let series = vec!["base".to_string(), "trained".to_string()];
        let (w, h) = (400, 300);
        let rgb = render_bars("t", &series, &groups, (w, h)).unwrap();
        let count = |(r, g, b): (u8, u8, u8)| rgb.chunks(3).filter(|p| p == &[r, g, b]).count();
        // The trained series' bars (0.9 and 0.5) cover more pixels than the base's one (0.2).
        assert!(
            count(PALETTE[1]) > 2 * count(PALETTE[0]),
            "{} {}",
            count(PALETTE[1]),
            count(PALETTE[0])
        );
        assert!(count(PALETTE[0]) > 0);
        let e = render_bars(
            "t",
            &series,
            &[Group {
                label: "x".into(),
                bars: vec![None],
            }],
            (w, h),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1 bars for 2 series"), "{e}");
    }
}
