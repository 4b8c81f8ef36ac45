//! A line panel: series with error bars and markers, and a reference line.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::super::figure::{Line, Panel, Reference, Series};
use super::super::style::{AXIS_LABEL_SIZE, PANEL_TITLE_SIZE, TICK_SIZE};
use super::{draw_marker, fail, font, shape, tick_label};

/// Data range with a margin, never empty.
fn padded(lo: f64, hi: f64, fraction: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    let span = (hi - lo).abs().max(1e-9 + hi.abs() * 0.05).max(1e-6);
    (lo - span * fraction, hi + span * fraction)
}

fn lines_ranges(panel: &Panel, series: &[Series]) -> ((f64, f64), (f64, f64)) {
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for p in points {
        let e = p.err.unwrap_or(0.0);
        x0 = x0.min(p.x);
        x1 = x1.max(p.x);
        y0 = y0.min(p.y - e);
        y1 = y1.max(p.y + e);
    }
    if let Some(reference) = &panel.reference {
        y0 = y0.min(reference.y);
        y1 = y1.max(reference.y);
    }
    let x = panel.x_range.unwrap_or_else(|| {
        if panel.integer_x {
            (x0 - 0.3, x1 + 0.3)
        } else {
            padded(x0, x1, 0.06)
        }
    });
    let y = panel.y_range.unwrap_or_else(|| padded(y0, y1, 0.08));
    (x, y)
}

/// A panel's plotting area in data coordinates.
pub(super) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

pub(super) fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    series: &[Series],
) -> Result<()> {
    let ((x0, x1), (y0, y1)) = lines_ranges(panel, series);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, font(PANEL_TITLE_SIZE))
        .margin(12)
        .margin_right(24)
        .x_label_area_size(52)
        .y_label_area_size(76)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(fail)?;
    lines_mesh(&mut chart, panel, (x0, x1))?;
    if let Some(reference) = &panel.reference {
        draw_reference(root, &mut chart, reference, (x0, x1))?;
    }
    let cap = (x1 - x0) * 0.008;
    for s in series {
        draw_series(&mut chart, s, cap)?;
    }
    Ok(())
}

/// Axes, tick labels and grid of a line panel.
fn lines_mesh<DB: DrawingBackend>(
    chart: &mut Chart<DB>,
    panel: &Panel,
    (x0, x1): (f64, f64),
) -> Result<()> {
    let integer = panel.integer_x;
    let percent = panel.percent_y;
    let x_format = move |v: &f64| tick_label(*v, integer, false);
    let y_format = move |v: &f64| tick_label(*v, false, percent);
    let x_ticks = if integer {
        ((x1 - x0).round() as usize + 1).clamp(2, 12)
    } else {
        8
    };
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .axis_desc_style(font(AXIS_LABEL_SIZE))
        .label_style(font(TICK_SIZE))
        .x_labels(x_ticks)
        .y_labels(8)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
        .draw()
        .map_err(fail)
}

/// The dashed horizontal reference line across the panel, with its label
/// at the right end.
fn draw_reference<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut Chart<DB>,
    reference: &Reference,
    (x0, x1): (f64, f64),
) -> Result<()> {
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x0, reference.y), (x1, reference.y)],
            8,
            5,
            shape(BLACK, false, 1),
        ))
        .map_err(fail)?;
    if !reference.label.is_empty() {
        let (px, py) = chart.backend_coord(&(x1, reference.y));
        root.draw(&Text::new(
            reference.label.clone(),
            (px - 4, py - 3),
            font(TICK_SIZE).pos(Pos::new(HPos::Right, VPos::Bottom)),
        ))
        .map_err(fail)?;
    }
    Ok(())
}

/// One series: its line, error bars (with caps `cap` wide) and markers.
fn draw_series<DB: DrawingBackend>(chart: &mut Chart<DB>, s: &Series, cap: f64) -> Result<()> {
    let points: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
    let style = shape(s.style.color, false, 2);
    match s.line {
        Line::Solid => {
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(fail)?;
        }
        Line::Dashed => {
            chart
                .draw_series(DashedLineSeries::new(points, 10, 6, style))
                .map_err(fail)?;
        }
        Line::None => {}
    }
    for p in &s.points {
        if let Some(err) = p.err.filter(|e| *e > 0.0) {
            let style = shape(s.style.color, false, 1);
            let (low, high) = (p.y - err, p.y + err);
            chart
                .draw_series([
                    PathElement::new(vec![(p.x, low), (p.x, high)], style),
                    PathElement::new(vec![(p.x - cap, low), (p.x + cap, low)], style),
                    PathElement::new(vec![(p.x - cap, high), (p.x + cap, high)], style),
                ])
                .map_err(fail)?;
        }
    }
    if s.marker_every > 0 {
        let last = s.points.len().saturating_sub(1);
        let area = chart.plotting_area();
        for (_, p) in
            (s.points.iter().enumerate()).filter(|(i, _)| i % s.marker_every == 0 || *i == last)
        {
            draw_marker(area, (p.x, p.y), s.style.marker, s.style.color)?;
        }
    }
    Ok(())
}
