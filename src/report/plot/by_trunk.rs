//! Block efficiency against the trunk depth d of delayed tree expansion
//! (`docs/schemes.md#delayed-tree-expansion-a-trunk`): per dataset, one panel per temperature set
//! and K, one line per verifier over d, SD as the dashed reference line.

use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;

use super::Skip;
use super::by_k::BE_AXIS;
use super::data::{by_temp_set, display_label, in_order, settings, stat};
use super::figure::{Figure, Panel, Point, Reference, Series};
use super::style::scheme_style;

const TRUNK_AXIS: &str = "trunk depth d (tokens drafted before the rows branch)";

/// The point of one verifier at one depth: with one seed, the cell's mean
/// block efficiency over prompts ± its s.e. over prompts; with several,
/// the mean over seeds ± the s.e. over seeds.
fn point_at(d: usize, cells: &[&CellRow], seeds: &mut usize) -> Point {
    let at_d: Vec<&CellRow> = (cells.iter().copied()).filter(|r| r.trunk == d).collect();
    *seeds = (*seeds).max(at_d.len());
    if let [cell] = at_d[..] {
        return Point {
            x: d as f64,
            y: cell.block_efficiency_mean,
            err: cell.block_efficiency_se,
        };
    }
    let values: Vec<f64> = at_d.iter().map(|r| r.block_efficiency_mean).collect();
    let s = stat(&values).expect("a cell per trunk");
    Point {
        x: d as f64,
        y: s.mean,
        err: s.se,
    }
}

/// One verifier's cells (one K, one temperature set) as a line over d.
fn series_over_trunk(label: &str, cells: &[&CellRow], seeds: &mut usize) -> Series {
    let mut trunks = in_order(cells.iter().map(|r| r.trunk));
    trunks.sort();
    let points = (trunks.iter()).map(|d| point_at(*d, cells, seeds)).collect();
    Series::new(display_label(label), scheme_style(label), points)
}

/// What the points and whiskers are.
fn points_note(seeds: usize) -> String {
    match seeds {
        0 | 1 => "points: mean over prompts, whiskers ± 1 s.e. over prompts".into(),
        n => format!("points: mean over {n} seeds, whiskers ± 1 s.e. over seeds"),
    }
}

/// The panel of one temperature set and K: a line per verifier run at two
/// or more trunk depths; none when no verifier was.
fn panel_at(title: String, at_k: &[&CellRow], sd: Option<f64>, seeds: &mut usize) -> Option<Panel> {
    let mut series = Vec::new();
    for label in in_order(at_k.iter().map(|r| r.verifier_label())) {
        let cells: Vec<&CellRow> = (at_k.iter().copied())
            .filter(|r| r.verifier_label() == label)
            .collect();
        if in_order(cells.iter().map(|r| r.trunk)).len() >= 2 {
            series.push(series_over_trunk(&label, &cells, seeds));
        }
    }
    if series.is_empty() {
        return None;
    }
    let mut panel = Panel::lines(title, TRUNK_AXIS, BE_AXIS, series);
    panel.integer_x = true;
    panel.reference = sd.map(|y| Reference {
        y,
        label: "SD".into(),
    });
    Some(panel)
}

/// One dataset's panels, one per temperature set and multi-draft K.
fn dataset_panels(in_dataset: &[&CellRow], seeds: &mut usize) -> Vec<Panel> {
    let mut panels = Vec::new();
    for (temp_set, here) in by_temp_set(in_dataset) {
        let sd_values: Vec<f64> = (here.iter())
            .filter(|r| r.kind == CellKind::Sd)
            .map(|r| r.block_efficiency_mean)
            .collect();
        let sd = stat(&sd_values).map(|s| s.mean);
        let schemes: Vec<&CellRow> = (here.iter().copied())
            .filter(|r| r.kind == CellKind::Scheme && r.k >= 2)
            .collect();
        let mut ks = in_order(schemes.iter().map(|r| r.k));
        ks.sort();
        for k in ks {
            let at_k: Vec<&CellRow> = (schemes.iter().copied()).filter(|r| r.k == k).collect();
            let title = format!("draft T = {temp_set}, K = {k}");
            panels.extend(panel_at(title, &at_k, sd, seeds));
        }
    }
    panels
}

pub fn by_trunk_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let trunks = in_order(
        rows.iter()
            .filter(|r| r.kind == CellKind::Scheme)
            .map(|r| r.trunk),
    );
    if trunks.len() < 2 {
        skipped.push(Skip::new(
            "be-by-trunk",
            "one trunk depth: block efficiency against the trunk needs two (run with --trunks 0,1,2)",
        ));
        return Vec::new();
    }
    let mut figures = Vec::new();
    for dataset in in_order(rows.iter().map(|r| r.dataset)) {
        let in_dataset: Vec<&CellRow> = (rows.iter())
            .filter(|r| r.dataset == dataset && r.kind != CellKind::Target)
            .collect();
        let mut seeds = 0;
        let panels = dataset_panels(&in_dataset, &mut seeds);
        let name = format!("be-by-trunk-{dataset}");
        if panels.is_empty() {
            skipped.push(Skip::new(
                &name,
                "no multi-draft scheme ran at two or more trunk depths",
            ));
            continue;
        }
        figures.push(Figure {
            name,
            title: format!("{dataset}: block efficiency against the trunk depth"),
            caption: format!(
                "Delayed tree expansion: d tokens drafted on one row, then K rows branch to depth L; dashed: SD; {}. {}.",
                points_note(seeds),
                settings(&in_dataset)
            ),
            legend: Figure::legend_of(&panels),
            columns: panels.len().min(3),
            panels,
        });
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use crate::experiment::cell::TempSet;

    fn cell(scheme: &str, k: usize, trunk: usize, be: f64) -> CellRow {
        CellRow {
            dataset: Dataset::Xsum,
            kind: if scheme == "single" {
                CellKind::Sd
            } else {
                CellKind::Scheme
            },
            scheme: scheme.parse().unwrap(),
            k,
            trunk,
            temp_set: TempSet::Identical(1.0),
            block_efficiency_mean: be,
            block_efficiency_se: Some(0.1),
            ..CellRow::default()
        }
    }

    #[test]
    fn one_line_per_verifier_over_d_with_sd_as_reference() {
        let mut rows = vec![
            cell("specinfer", 4, 0, 2.5),
            cell("specinfer", 4, 1, 2.7),
            cell("gbv", 4, 0, 2.6),
            cell("single", 1, 0, 2.0),
        ];
        let mut skipped = Vec::new();
        let figures = by_trunk_figures(&rows, &mut skipped);
        assert_eq!(figures.len(), 1, "{skipped:?}");
        let panel = &figures[0].panels[0];
        // gbv ran at one depth only: no line.
        let labels: Vec<&str> = panel.series().iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["specinfer"]);
        let xs: Vec<f64> = panel.series()[0].points.iter().map(|p| p.x).collect();
        assert_eq!(xs, [0.0, 1.0]);
        assert_eq!(panel.series()[0].points[1].err, Some(0.1));
        assert_eq!(panel.reference.as_ref().unwrap().y, 2.0);
        // Without a second depth there is no figure, and it says why.
        rows.retain(|r| r.trunk == 0);
        let mut skipped = Vec::new();
        assert!(by_trunk_figures(&rows, &mut skipped).is_empty());
        assert!(skipped[0].reason.contains("--trunks"));
    }
}
