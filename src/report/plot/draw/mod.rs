//! Turns a [`Figure`] into SVG text or PNG bytes with plotters. The layout
//! keeps text apart by construction: the title and caption in a header band
//! (wrapped to the figure's width), the legend in its own column at the
//! right (never over data), bar labels in a margin sized to the longest one.
//! The panels themselves: `lines` and `bars`.

mod bars;
mod lines;

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{Bar, Body, Figure, LegendEntry, Line, Panel, legend_marker};
use super::style::{
    CAPTION_SIZE, FONT_FAMILY, LEGEND_SIZE, Marker, TICK_SIZE, TITLE_SIZE, register_fonts,
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

fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    widths: (u32, u32),
) -> Result<()> {
    match &panel.body {
        Body::Lines(series) => lines::draw_lines(root, area, panel, series),
        Body::Bars(bars) => bars::draw_bars(root, area, panel, bars, widths),
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
