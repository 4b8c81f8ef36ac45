//! Block efficiency against the number of drafts K (the paper's Table 1 as
//! a figure): per dataset, one panel per temperature set, one line per
//! scheme, SD as the K = 1 point.

use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;

use super::Skip;
use super::data::{by_temp_set, display_label, in_order, seeds_note, settings, stat};
use super::figure::{Figure, Panel, Point, Series};
use super::style::scheme_style;

pub const BE_AXIS: &str = "block efficiency (tokens per target call)";

fn series_over_k(label: &str, cells: &[&CellRow], seeds: &mut usize) -> Series {
    let ks = {
        let mut ks = in_order(cells.iter().map(|r| r.k));
        ks.sort();
        ks
    };
    let points = ks
        .iter()
        .map(|k| {
            let values: Vec<f64> = cells
                .iter()
                .filter(|r| r.k == *k)
                .map(|r| r.block_efficiency)
                .collect();
            let s = stat(&values).expect("a cell per K");
            *seeds = (*seeds).max(s.n);
            Point {
                x: *k as f64,
                y: s.mean,
                err: s.se,
            }
        })
        .collect();
    Series::new(display_label(label), scheme_style(label), points)
}

pub fn by_k_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let schemes: Vec<&CellRow> = rows.iter().filter(|r| r.kind == CellKind::Scheme).collect();
    // Single-draft schemes (block, K = 1) alone do not make a K axis.
    let ks = in_order(schemes.iter().map(|r| r.k).filter(|k| *k >= 2));
    if ks.len() < 2 {
        skipped.push(Skip::new(
            "be-by-k",
            format!(
                "one multi-draft K ({}): block efficiency against K needs at least two (run with --drafts 2,3,…)",
                ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
        return Vec::new();
    }
    let mut figures = Vec::new();
    for dataset in in_order(schemes.iter().map(|r| r.dataset)) {
        let in_dataset: Vec<&CellRow> = rows
            .iter()
            .filter(|r| r.dataset == dataset && r.kind != CellKind::Target)
            .collect();
        let mut panels = Vec::new();
        let mut seeds = 0;
        for (temp_set, here) in by_temp_set(&in_dataset) {
            // Only schemes run at two or more K make a line.
            let labels = in_order(here.iter().map(|r| r.scheme_label()));
            let mut series = Vec::new();
            for label in &labels {
                let cells: Vec<&CellRow> = here
                    .iter()
                    .copied()
                    .filter(|r| &r.scheme_label() == label)
                    .collect();
                let is_sd = cells.iter().all(|r| r.kind == CellKind::Sd);
                if is_sd || in_order(cells.iter().map(|r| r.k)).len() >= 2 {
                    series.push(series_over_k(label, &cells, &mut seeds));
                }
            }
            if series.iter().any(|s| s.points.len() >= 2) {
                let mut panel = Panel::lines(
                    format!("draft T = {temp_set}"),
                    "number of drafts K",
                    BE_AXIS,
                    series,
                );
                panel.integer_x = true;
                panels.push(panel);
            }
        }
        let name = format!("be-by-k-{dataset}");
        if panels.is_empty() {
            skipped.push(Skip::new(
                &name,
                "no scheme ran at two or more K at one temperature set",
            ));
            continue;
        }
        let columns = panels.len().min(3);
        figures.push(Figure {
            name,
            title: format!("{dataset}: block efficiency against the number of drafts"),
            caption: format!(
                "SD is the K = 1 point; {}. {}.",
                seeds_note(seeds),
                settings(&in_dataset)
            ),
            legend: Figure::legend_of(&panels),
            panels,
            columns,
        });
    }
    figures
}
