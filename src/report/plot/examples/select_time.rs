//! Selection time per token against K, one line per scheme.

use crate::experiment::metrics::CellRow;

use super::Skip;
use super::data::{in_order, stat};
use super::figure::{Figure, Panel, Point, Series};
use super::style::scheme_style;

pub fn select_time_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let timed: Vec<&CellRow> = rows
        .iter()
        .filter(|r| r.select_us_per_token.is_some())
        .collect();
    if timed.is_empty() {
        skipped.push(Skip::new("select-time", "no cell timed its selection"));
        return Vec::new();
    }
    let mut series = Vec::new();
    for label in in_order(timed.iter().map(|r| r.scheme_label())) {
        let mut ks = in_order(
            timed
                .iter()
                .filter(|r| r.scheme_label() == label)
                .map(|r| r.k),
        );
        ks.sort();
        let point = |k: usize| {
            let at = timed
                .iter()
                .filter(|r| r.scheme_label() == label && r.k == k);
            let s = stat(&at.filter_map(|r| r.select_us_per_token).collect::<Vec<_>>())?;
            Some(Point {
                x: k as f64,
                y: s.mean,
                err: s.se,
            })
        };
        let points = ks.into_iter().filter_map(point).collect();
        series.push(Series::new(label.clone(), scheme_style(&label), points));
    }
    let mut panel = Panel::lines(
        "Selection time",
        "number of drafts K",
        "µs per token",
        series,
    );
    panel.integer_x = true;
    let panels = vec![panel];
    vec![Figure {
        name: "select-time".into(),
        title: "Selection time against K".into(),
        caption: "Points: mean over seeds, error bars ± 1 s.e.".into(),
        legend: Figure::legend_of(&panels),
        panels,
        columns: 1,
    }]
}
