//! A bar panel: one horizontal bar per scheme, its `P*` tick, its label
//! at the left and its note at the right.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::super::figure::{Bar, Panel};
use super::super::style::{AXIS_LABEL_SIZE, PANEL_TITLE_SIZE, TICK_SIZE};
use super::lines::Chart;
use super::{fail, font, shape, tick_label};

pub(super) fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    bars: &[Bar],
    (label_width, note_width): (u32, u32),
) -> Result<()> {
    let n = bars.len().max(1) as f64;
    let (x0, x1) = panel.x_range.unwrap_or((0.0, 1.0));
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, font(PANEL_TITLE_SIZE))
        .margin(12)
        .margin_right(note_width.max(24))
        .x_label_area_size(52)
        .y_label_area_size(label_width)
        .build_cartesian_2d(x0..x1, 0.0..n)
        .map_err(fail)?;
    let x_format = |v: &f64| tick_label(*v, false, false);
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .axis_desc_style(font(AXIS_LABEL_SIZE))
        .label_style(font(TICK_SIZE))
        .x_labels(6)
        .x_label_formatter(&x_format)
        .disable_y_mesh()
        .y_labels(0)
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
        .draw()
        .map_err(fail)?;
    for (i, bar) in bars.iter().enumerate() {
        // First bar at the top.
        let row = n - 1.0 - i as f64;
        draw_bar(&mut chart, bar, row, (x0, x1))?;
        draw_bar_text(root, &chart, bar, row, (x0, x1))?;
    }
    Ok(())
}

/// One bar in row `row` (from the bottom), its error bar and its `P*` tick.
fn draw_bar<DB: DrawingBackend>(
    chart: &mut Chart<DB>,
    bar: &Bar,
    row: f64,
    (x0, x1): (f64, f64),
) -> Result<()> {
    // Values far off the axis (a damaged cells.csv) overflow plotters'
    // pixel arithmetic: they are drawn one axis width beyond it instead
    // (valid ones, probabilities, never reach that far).
    let width = x1 - x0;
    let x = |v: f64| v.max(x0 - width).min(x1 + width);
    let (top, bottom) = (row + 0.82, row + 0.18);
    chart
        .draw_series([Rectangle::new(
            [(x0, bottom), (x(bar.value), top)],
            shape(bar.style.color, true, 1),
        )])
        .map_err(fail)?;
    if let Some(err) = bar.err.filter(|e| *e > 0.0) {
        let mid = row + 0.5;
        let style = shape(BLACK, false, 1);
        let (low, high) = (x(bar.value - err), x(bar.value + err));
        chart
            .draw_series([
                PathElement::new(vec![(low, mid), (high, mid)], style),
                PathElement::new(vec![(low, mid - 0.12), (low, mid + 0.12)], style),
                PathElement::new(vec![(high, mid - 0.12), (high, mid + 0.12)], style),
            ])
            .map_err(fail)?;
    }
    if let Some(reference) = bar.reference.map(x) {
        // A white halo keeps the tick visible on dark bars.
        for (color, width) in [(WHITE, 7), (BLACK, 3)] {
            chart
                .draw_series([PathElement::new(
                    vec![(reference, row + 0.02), (reference, row + 0.98)],
                    shape(color, false, width),
                )])
                .map_err(fail)?;
        }
    }
    Ok(())
}

/// A bar's label, right-aligned left of the axis, and its note right of
/// the plot, clear of bars and ticks.
fn draw_bar_text<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart<DB>,
    bar: &Bar,
    row: f64,
    (x0, x1): (f64, f64),
) -> Result<()> {
    let (px, py) = chart.backend_coord(&(x0, row + 0.5));
    root.draw(&Text::new(
        bar.label.clone(),
        (px - 8, py),
        font(TICK_SIZE).pos(Pos::new(HPos::Right, VPos::Center)),
    ))
    .map_err(fail)?;
    if !bar.note.is_empty() {
        let (nx, ny) = chart.backend_coord(&(x1, row + 0.5));
        root.draw(&Text::new(
            bar.note.clone(),
            (nx + 8, ny),
            font(TICK_SIZE - 1)
                .color(&RGBColor(0x33, 0x33, 0x33))
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(fail)?;
    }
    Ok(())
}
