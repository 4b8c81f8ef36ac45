//! Per-depth acceptance: for depth 1..L, the fraction of visited draft-tree
//! nodes whose output landed on a draft (`accept_by_depth`), one line per
//! scheme, one panel per temperature set.

use crate::data::Dataset;
use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;

use super::Skip;
use super::data::{KGroup, by_temp_set, in_order, seeds_note, settings, split_by_k, stat};
use super::figure::{Figure, Line, Panel, Point, Series};
use super::style::scheme_style;

/// `0.81;0.62;;` → `[Some(0.81), Some(0.62), None, None]`.
pub fn parse_depths(text: &str) -> Vec<Option<f64>> {
    if text.is_empty() {
        return Vec::new();
    }
    text.split(';').map(|v| v.trim().parse().ok()).collect()
}

pub fn depth_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let cells: Vec<&CellRow> = rows
        .iter()
        .filter(|r| {
            r.kind != CellKind::Target
                && parse_depths(&r.accept_by_depth).iter().any(Option::is_some)
        })
        .collect();
    if cells.is_empty() {
        skipped.push(Skip::new(
            "accept-by-depth",
            "no cell recorded accept_by_depth",
        ));
        return Vec::new();
    }
    let mut figures = Vec::new();
    for dataset in in_order(cells.iter().map(|r| r.dataset)) {
        let name = format!("accept-by-depth-{dataset}");
        let in_dataset: Vec<&CellRow> = cells
            .iter()
            .copied()
            .filter(|r| r.dataset == dataset)
            .collect();
        let depth = in_dataset
            .iter()
            .map(|r| parse_depths(&r.accept_by_depth).len())
            .max()
            .unwrap_or(0);
        if depth < 2 {
            skipped.push(Skip::new(
                &name,
                "draft length L = 1: one depth only (run with a longer draft_len)",
            ));
            continue;
        }
        for group in split_by_k(&in_dataset) {
            figures.push(depth_figure(&dataset, &group, depth));
        }
    }
    figures
}

fn depth_figure(dataset: &Dataset, group: &KGroup, depth: usize) -> Figure {
    let mut seeds = 0;
    let mut panels = Vec::new();
    for (temp_set, here) in by_temp_set(&group.rows) {
        let keys = in_order(here.iter().map(|r| (r.scheme_label(), r.k)));
        let mut series = Vec::new();
        for (label, k) in &keys {
            let cells: Vec<&CellRow> = here
                .iter()
                .copied()
                .filter(|r| &r.scheme_label() == label && r.k == *k)
                .collect();
            let by_depth: Vec<Vec<Option<f64>>> = cells
                .iter()
                .map(|r| parse_depths(&r.accept_by_depth))
                .collect();
            let points: Vec<Point> = (0..depth)
                .filter_map(|d| {
                    let values: Vec<f64> = by_depth
                        .iter()
                        .filter_map(|g| g.get(d).copied().flatten())
                        .collect();
                    let s = stat(&values)?;
                    seeds = seeds.max(s.n);
                    Some(Point {
                        x: (d + 1) as f64,
                        y: s.mean,
                        err: s.se,
                    })
                })
                .collect();
            let mut s = Series::new(group.label(cells[0]), scheme_style(label), points);
            if group.k.is_some_and(|main| *k != main) {
                s.line = Line::Dashed;
            }
            series.push(s);
        }
        let mut panel = Panel::lines(
            format!("draft T = {temp_set}"),
            "depth in the draft (token position in the block)",
            "fraction of visited nodes accepted",
            series,
        );
        panel.integer_x = true;
        panel.y_range = Some((0.0, 1.02));
        panels.push(panel);
    }
    let columns = panels.len().min(3);
    Figure {
        name: format!("accept-by-depth-{dataset}{}", group.suffix()),
        title: format!("{dataset}: acceptance by depth, {}", group.title()),
        caption: format!(
            "Fraction of the visited draft-tree nodes at each depth whose output landed on a draft; {}. {}.",
            seeds_note(seeds),
            settings(&group.rows)
        ),
        legend: Figure::legend_of(&panels),
        panels,
        columns,
    }
}
