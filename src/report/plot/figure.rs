//! What a figure shows, as plain data: the figure builders fill these in
//! from the results, `draw` turns them into pixels. Keeping the two apart
//! lets the tests check what a figure holds without rasterising it.

use super::style::{Marker, SeriesStyle};

/// One point of a line, with its error bar half-width (s.e. over seeds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub err: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    Solid,
    Dashed,
    /// Markers only (Figure 2's full-LP check over the Optimal curve).
    None,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub style: SeriesStyle,
    pub line: Line,
    /// Draw the marker on every n-th point only (0: no markers).
    pub marker_every: usize,
    pub points: Vec<Point>,
}

impl Series {
    /// A line with a marker on every point: the usual series.
    pub fn new(label: impl Into<String>, style: SeriesStyle, points: Vec<Point>) -> Self {
        Series {
            label: label.into(),
            style,
            line: Line::Solid,
            marker_every: 1,
            points,
        }
    }
}

/// One horizontal bar: a scheme's mean acceptance, with `P*` as a tick.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    pub style: SeriesStyle,
    pub value: f64,
    pub err: Option<f64>,
    /// The optimum this value is measured against (`P*`), drawn as a tick.
    pub reference: Option<f64>,
    /// Printed after the bar (e.g. `94.1% of P*`).
    pub note: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Lines(Vec<Series>),
    /// Horizontal bars, first at the top.
    Bars(Vec<Bar>),
}

/// A horizontal reference line across a panel (SD's 0 % line).
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub y: f64,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub body: Body,
    pub reference: Option<Reference>,
    /// Fixed axis ranges (probabilities 0..1); otherwise from the data.
    pub x_range: Option<(f64, f64)>,
    pub y_range: Option<(f64, f64)>,
    /// Tick labels at whole numbers only (K, depth).
    pub integer_x: bool,
    /// Format y tick labels as signed percentages.
    pub percent_y: bool,
}

impl Panel {
    pub fn lines(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        series: Vec<Series>,
    ) -> Self {
        Panel {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            body: Body::Lines(series),
            reference: None,
            x_range: None,
            y_range: None,
            integer_x: false,
            percent_y: false,
        }
    }

    pub fn series(&self) -> &[Series] {
        match &self.body {
            Body::Lines(series) => series,
            Body::Bars(_) => &[],
        }
    }
}

/// One entry of the legend at the figure's right.
#[derive(Clone, Debug, PartialEq)]
pub struct LegendEntry {
    pub label: String,
    pub style: SeriesStyle,
    pub line: Line,
    pub marker: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// File stem (`fig3-dolly`), unique within one `plot` call.
    pub name: String,
    pub title: String,
    /// One or two lines under the title: what the bars are, seeds, settings.
    pub caption: String,
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub columns: usize,
    pub legend: Vec<LegendEntry>,
}

impl Figure {
    /// The legend of every distinct series label over the panels, in order.
    pub fn legend_of(panels: &[Panel]) -> Vec<LegendEntry> {
        let mut legend: Vec<LegendEntry> = Vec::new();
        for series in panels.iter().flat_map(Panel::series) {
            if !legend.iter().any(|e| e.label == series.label) {
                legend.push(LegendEntry {
                    label: series.label.clone(),
                    style: series.style,
                    line: series.line,
                    marker: series.marker_every > 0,
                });
            }
        }
        legend
    }
}

/// Marker used for the legend sample when a series draws none.
pub fn legend_marker(entry: &LegendEntry) -> Option<Marker> {
    entry.marker.then_some(entry.style.marker)
}
