//! Turns a [`Figure`] into SVG text or PNG bytes with plotters. The layout
//! keeps text apart by construction: the title and caption in a header band
//! (wrapped to the figure's width), the legend in its own column at the
//! right (never over data), bar labels in a margin sized to the longest one.

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{Bar, Body, Figure, LegendEntry, Line, Panel, Series, legend_marker};
use super::style::{
    AXIS_LABEL_SIZE, CAPTION_SIZE, FONT_FAMILY, LEGEND_SIZE, Marker, PANEL_TITLE_SIZE, TICK_SIZE,
    TITLE_SIZE, register_fonts,
};

const PANEL_WIDTH: u32 = 560;
const PANEL_HEIGHT: u32 = 430;
/// Bar panels carry labels at the left and notes at the right.
const BAR_PANEL_WIDTH: u32 = 660;
const LEGEND_ROW: u32 = 24;
const MARKER_SIZE: i32 = 5;

fn fail<E: std::error::Error + Send + Sync>(error: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("drawing failed: {error}")
}

fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT_FAMILY, size as f64).into_font()).color(&BLACK)
}

fn bold(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT_FAMILY, size as f64, FontStyle::Bold).into_font()).color(&BLACK)
}

/// Text width in pixels with the embedded font.
fn text_width(text: &str, size: u32) -> u32 {
    register_fonts();
    let font = (FONT_FAMILY, size as f64).into_font();
    font.box_size(text)
        .map(|(w, _)| w)
        .unwrap_or(text.len() as u32 * size / 2)
}

/// Greedy word wrap to `width` pixels.
fn wrap(text: &str, size: u32, width: u32) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        for word in paragraph.split(' ') {
            let candidate = if line.is_empty() {
                word.to_string()
            } else {
                format!("{line} {word}")
            };
            if !line.is_empty() && text_width(&candidate, size) > width {
                lines.push(std::mem::take(&mut line));
                line = word.to_string();
            } else {
                line = candidate;
            }
        }
        lines.push(line);
    }
    lines
}

/// Legend column width and the number of sub-columns the entries need.
fn legend_layout(legend: &[LegendEntry], height: u32) -> (u32, usize) {
    if legend.is_empty() {
        return (0, 0);
    }
    let widest = legend
        .iter()
        .map(|e| text_width(&e.label, LEGEND_SIZE))
        .max()
        .unwrap_or(0)
        + 60;
    let per_column = ((height.saturating_sub(60)) / LEGEND_ROW).max(1) as usize;
    let columns = legend.len().div_ceil(per_column);
    (widest * columns as u32 + 20, columns)
}

struct Layout {
    width: u32,
    height: u32,
    header: u32,
    legend_width: u32,
    legend_columns: usize,
    title: Vec<String>,
    caption: Vec<String>,
}

fn layout(figure: &Figure) -> Layout {
    let columns = figure.columns.clamp(1, figure.panels.len().max(1));
    let rows = figure.panels.len().div_ceil(columns).max(1);
    // Tall enough for the legend in one column.
    let panels_height =
        (rows as u32 * PANEL_HEIGHT).max(figure.legend.len() as u32 * LEGEND_ROW + 60);
    let (legend_width, legend_columns) = legend_layout(&figure.legend, panels_height);
    let panel_width = if figure
        .panels
        .iter()
        .any(|p| matches!(p.body, Body::Bars(_)))
    {
        BAR_PANEL_WIDTH
    } else {
        PANEL_WIDTH
    };
    let width = columns as u32 * panel_width + legend_width;
    let title = wrap(&figure.title, TITLE_SIZE, width - 40);
    let caption = wrap(&figure.caption, CAPTION_SIZE, width - 40);
    let header =
        16 + title.len() as u32 * (TITLE_SIZE + 8) + caption.len() as u32 * (CAPTION_SIZE + 6) + 10;
    Layout {
        width,
        height: header + panels_height,
        header,
        legend_width,
        legend_columns,
        title,
        caption,
    }
}

/// The figure as an SVG document.
pub fn svg(figure: &Figure) -> Result<String> {
    let layout = layout(figure);
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (layout.width, layout.height)).into_drawing_area();
        draw(&root, figure, &layout)?;
        root.present().map_err(fail)?;
    }
    Ok(text)
}

/// Writes the figure as a PNG (RGB, rendered with the embedded font).
pub fn png(figure: &Figure, path: &std::path::Path) -> Result<()> {
    let layout = layout(figure);
    let root = BitMapBackend::new(path, (layout.width, layout.height)).into_drawing_area();
    draw(&root, figure, &layout)?;
    root.present()
        .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &Figure,
    layout: &Layout,
) -> Result<()> {
    register_fonts();
    root.fill(&WHITE).map_err(fail)?;
    let mut y = 16i32;
    for line in &layout.title {
        root.draw(&Text::new(
            line.clone(),
            (layout.width as i32 / 2, y),
            bold(TITLE_SIZE).pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(fail)?;
        y += (TITLE_SIZE + 8) as i32;
    }
    for line in &layout.caption {
        root.draw(&Text::new(
            line.clone(),
            (layout.width as i32 / 2, y),
            font(CAPTION_SIZE)
                .color(&RGBColor(0x44, 0x44, 0x44))
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(fail)?;
        y += (CAPTION_SIZE + 6) as i32;
    }
    let (_, body) = root.split_vertically(layout.header);
    let (panels_area, legend_area) = body.split_horizontally(layout.width - layout.legend_width);
    let columns = figure.columns.clamp(1, figure.panels.len().max(1));
    let rows = figure.panels.len().div_ceil(columns).max(1);
    let cells = panels_area.split_evenly((rows, columns));
    // One label and one note column width for all bar panels, so their
    // plots line up.
    let bars = || {
        figure
            .panels
            .iter()
            .filter_map(|p| match &p.body {
                Body::Bars(bars) => Some(bars.iter()),
                Body::Lines(_) => None,
            })
            .flatten()
    };
    let widest = |text: fn(&Bar) -> &str, size: u32| {
        bars().map(|b| text_width(text(b), size)).max().unwrap_or(0) * 11 / 10 + 24
    };
    let widths = (
        widest(|b| &b.label, TICK_SIZE),
        widest(|b| &b.note, TICK_SIZE - 1),
    );
    for (panel, area) in figure.panels.iter().zip(cells.iter()) {
        draw_panel(root, area, panel, widths)?;
    }
    draw_legend(&legend_area, &figure.legend, layout.legend_columns)?;
    Ok(())
}

fn shape(color: RGBColor, filled: bool, width: u32) -> ShapeStyle {
    ShapeStyle {
        color: color.to_rgba(),
        filled,
        stroke_width: width,
    }
}

/// Draws a marker centred on `coord`, `MARKER_SIZE` pixels across
/// whatever the axis scales.
fn draw_marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    coord: CT::From,
    marker: Marker,
    color: RGBColor,
) -> Result<()>
where
    CT::From: Clone,
{
    let s = MARKER_SIZE;
    let fill = shape(color, true, 1);
    let at = EmptyElement::at(coord);
    match marker {
        Marker::Circle => area.draw(&(at + Circle::new((0, 0), s as u32, fill))),
        Marker::Square => {
            area.draw(&(at + Rectangle::new([(-s + 1, -s + 1), (s - 1, s - 1)], fill)))
        }
        Marker::Triangle => area
            .draw(&(at + Polygon::new(vec![(0, -s - 1), (s + 1, s - 1), (-s - 1, s - 1)], fill))),
        Marker::Diamond => area.draw(
            &(at + Polygon::new(vec![(0, -s - 1), (s + 1, 0), (0, s + 1), (-s - 1, 0)], fill)),
        ),
        Marker::Cross => area.draw(
            &(at + PathElement::new(vec![(-s, -s), (s, s)], shape(color, false, 3))
                + PathElement::new(vec![(-s, s), (s, -s)], shape(color, false, 3))),
        ),
    }
    .map_err(fail)
}

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

fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    widths: (u32, u32),
) -> Result<()> {
    match &panel.body {
        Body::Lines(series) => draw_lines(root, area, panel, series),
        Body::Bars(bars) => draw_bars(root, area, panel, bars, widths),
    }
}

fn tick_label(value: f64, integer: bool, percent: bool) -> String {
    if integer {
        if (value - value.round()).abs() < 1e-9 {
            format!("{}", value.round() as i64)
        } else {
            String::new()
        }
    } else if percent {
        let text = format!("{value:+.0}%");
        if text == "-0%" { "0%".into() } else { text }
    } else {
        let text = format!("{value:.2}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        if text == "-0" {
            "0".into()
        } else {
            text.to_string()
        }
    }
}

fn draw_lines<DB: DrawingBackend>(
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
        .map_err(fail)?;
    if let Some(reference) = &panel.reference {
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
    }
    let cap = (x1 - x0) * 0.008;
    for s in series {
        let points: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
        match s.line {
            Line::Solid => {
                chart
                    .draw_series(LineSeries::new(
                        points.clone(),
                        shape(s.style.color, false, 2),
                    ))
                    .map_err(fail)?;
            }
            Line::Dashed => {
                chart
                    .draw_series(DashedLineSeries::new(
                        points.clone(),
                        10,
                        6,
                        shape(s.style.color, false, 2),
                    ))
                    .map_err(fail)?;
            }
            Line::None => {}
        }
        for p in &s.points {
            if let Some(err) = p.err.filter(|e| *e > 0.0) {
                let style = shape(s.style.color, false, 1);
                chart
                    .draw_series([
                        PathElement::new(vec![(p.x, p.y - err), (p.x, p.y + err)], style),
                        PathElement::new(
                            vec![(p.x - cap, p.y - err), (p.x + cap, p.y - err)],
                            style,
                        ),
                        PathElement::new(
                            vec![(p.x - cap, p.y + err), (p.x + cap, p.y + err)],
                            style,
                        ),
                    ])
                    .map_err(fail)?;
            }
        }
        if s.marker_every > 0 {
            let last = s.points.len().saturating_sub(1);
            let area = chart.plotting_area();
            for (_, p) in s
                .points
                .iter()
                .enumerate()
                .filter(|(i, _)| i % s.marker_every == 0 || *i == last)
            {
                draw_marker(area, (p.x, p.y), s.style.marker, s.style.color)?;
            }
        }
    }
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
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
        let (top, bottom) = (row + 0.82, row + 0.18);
        chart
            .draw_series([Rectangle::new(
                [(x0, bottom), (bar.value, top)],
                shape(bar.style.color, true, 1),
            )])
            .map_err(fail)?;
        if let Some(err) = bar.err.filter(|e| *e > 0.0) {
            let mid = row + 0.5;
            let style = shape(BLACK, false, 1);
            chart
                .draw_series([
                    PathElement::new(vec![(bar.value - err, mid), (bar.value + err, mid)], style),
                    PathElement::new(
                        vec![(bar.value - err, mid - 0.12), (bar.value - err, mid + 0.12)],
                        style,
                    ),
                    PathElement::new(
                        vec![(bar.value + err, mid - 0.12), (bar.value + err, mid + 0.12)],
                        style,
                    ),
                ])
                .map_err(fail)?;
        }
        if let Some(reference) = bar.reference {
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
        // The category label, right-aligned left of the axis.
        let (px, py) = chart.backend_coord(&(x0, row + 0.5));
        root.draw(&Text::new(
            bar.label.clone(),
            (px - 8, py),
            font(TICK_SIZE).pos(Pos::new(HPos::Right, VPos::Center)),
        ))
        .map_err(fail)?;
        if !bar.note.is_empty() {
            // Notes line up right of the plot, clear of bars and ticks.
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
    }
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    legend: &[LegendEntry],
    columns: usize,
) -> Result<()> {
    if legend.is_empty() {
        return Ok(());
    }
    let (width, _) = area.dim_in_pixel();
    let column_width = ((width - 20) / columns as u32) as i32;
    let per_column = legend.len().div_ceil(columns);
    for (i, entry) in legend.iter().enumerate() {
        let column = (i / per_column) as i32;
        let row = (i % per_column) as i32;
        let x = 10 + column * column_width;
        let y = 40 + row * LEGEND_ROW as i32;
        let color = entry.style.color;
        match entry.line {
            Line::Solid => {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 34, y)],
                    shape(color, false, 2),
                ))
                .map_err(fail)?;
            }
            Line::Dashed => {
                for start in [x, x + 14, x + 28] {
                    area.draw(&PathElement::new(
                        vec![(start, y), (start + 7, y)],
                        shape(color, false, 2),
                    ))
                    .map_err(fail)?;
                }
            }
            Line::None => {}
        }
        if let Some(marker) = legend_marker(entry) {
            draw_marker(area, (x + 17, y), marker, color)?;
        }
        area.draw(&Text::new(
            entry.label.clone(),
            (x + 44, y),
            font(LEGEND_SIZE).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(fail)?;
    }
    Ok(())
}
