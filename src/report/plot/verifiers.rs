//! The matched study as a figure: every verifier's mean block efficiency
//! over the run's datasets with its standard error, best first, one panel
//! per number of drafts K (single-path verifiers in each), the study's
//! value and rank written after the verifiers it has (the `verifiers`
//! table of `report`, docs/reproduction.md, "The matched study").

use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;
use crate::report::tables::verifiers::{STUDY, ranked_cells, study_of, study_rank};

use super::Skip;
use super::by_k::BE_AXIS;
use super::data::{display_label, in_order, settings};
use super::figure::{Bar, Body, Figure, Panel};
use super::style::scheme_style;

/// How many of the study's verifiers the run needs, as the table asks.
const AT_LEAST: usize = 3;

pub fn verifiers_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let cells: Vec<&CellRow> = rows.iter().filter(|r| r.kind != CellKind::Target).collect();
    let present = (STUDY.iter())
        .filter(|(id, _, _)| cells.iter().any(|r| r.scheme == *id))
        .count();
    if present < AT_LEAST {
        skipped.push(Skip::new(
            "verifiers",
            format!("{present} of the matched study's verifiers in the run, {AT_LEAST} needed: run experiments/verifiers.toml"),
        ));
        return Vec::new();
    }
    let finite = |r: &&&CellRow| {
        r.block_efficiency_mean.is_finite() && r.block_efficiency_se.is_none_or(f64::is_finite)
    };
    if let Some(bad) = cells.iter().find(|r| !finite(r)) {
        skipped.push(Skip::new(
            "verifiers",
            format!(
                "cell {}: block_efficiency_mean or its s.e. is not a finite number: the cells.csv is damaged, run the cell again",
                bad.cell_id
            ),
        ));
        return Vec::new();
    }
    let temps = in_order(cells.iter().map(|r| r.temp_set.to_string()));
    temps
        .iter()
        .map(|temp| {
            let here: Vec<&CellRow> = (cells.iter().copied())
                .filter(|r| r.temp_set.to_string() == *temp)
                .collect();
            figure(&here, temp, temps.len() > 1)
        })
        .collect()
}

fn figure(cells: &[&CellRow], temp: &str, named: bool) -> Figure {
    let mut ks = in_order(cells.iter().map(|r| r.k).filter(|&k| k > 1));
    ks.sort();
    let panels: Vec<Panel> = ks.iter().map(|&k| panel(cells, k)).collect();
    Figure {
        name: match named {
            true => format!("verifiers-T{temp}"),
            false => "verifiers".into(),
        },
        title: format!("Verifiers by block efficiency beside the matched study (arXiv 2602.16994), draft T {temp}"),
        caption: format!(
            "{}. Bars: mean over the run's datasets, whiskers ± 1 s.e.; after a bar: the study's mean block efficiency over its three model pairs and its rank among the study's 7 verifiers.",
            settings(cells)
        ),
        legend: Vec::new(),
        columns: panels.len().clamp(1, 2),
        panels,
    }
}

/// The verifiers at K drafts and the single-path ones, best first.
fn panel(cells: &[&CellRow], k: usize) -> Panel {
    let at_k: Vec<&CellRow> = (cells.iter().copied())
        .filter(|r| r.k == k || r.k == 1)
        .collect();
    let ranked = ranked_cells(&at_k);
    let top = ranked.iter().map(|(_, s)| s.mean + s.spread.unwrap_or(0.0)).fold(0.0, f64::max);
    let bars = (ranked.iter())
        .map(|((row_k, label), stat)| {
            let same: Vec<&CellRow> = (at_k.iter().copied())
                .filter(|r| r.k == *row_k && r.scheme_label() == *label)
                .collect();
            Bar {
                label: display_label(label),
                style: scheme_style(label),
                value: stat.mean,
                err: stat.spread,
                reference: None,
                note: match study_of(&same) {
                    Some((_, be)) => format!("{:.2}; study {be:.2}, rank {}", stat.mean, study_rank(be)),
                    None => format!("{:.2}", stat.mean),
                },
            }
        })
        .collect();
    Panel {
        title: format!("K = {k} (single-path verifiers beside)"),
        x_label: BE_AXIS.into(),
        y_label: String::new(),
        body: Body::Bars(bars),
        reference: None,
        x_range: Some((0.0, if top > 0.0 { top * 1.25 } else { 1.0 })),
        y_range: None,
        integer_x: false,
        percent_y: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use crate::experiment::cell::TempSet;

    fn cell(scheme: &str, k: usize, be: f64) -> CellRow {
        CellRow {
            dataset: Dataset::Xsum,
            kind: if scheme == "single" { CellKind::Sd } else { CellKind::Scheme },
            scheme: scheme.parse().unwrap(),
            k,
            temp_set: TempSet::Identical(1.0),
            block_efficiency_mean: be,
            block_efficiency_se: Some(0.05),
            ..CellRow::default()
        }
    }

    #[test]
    fn one_panel_per_k_best_first_with_the_study_beside() {
        let rows = vec![
            cell("specinfer", 4, 2.5),
            cell("traversal", 4, 3.0),
            cell("gbv", 4, 2.9),
            cell("single", 1, 2.0),
            cell("specinfer", 2, 2.2),
        ];
        let mut skipped = Vec::new();
        let figures = verifiers_figures(&rows, &mut skipped);
        assert!(skipped.is_empty());
        assert_eq!(figures.len(), 1);
        let titles: Vec<&str> = figures[0].panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, ["K = 2 (single-path verifiers beside)", "K = 4 (single-path verifiers beside)"]);
        let Body::Bars(bars) = &figures[0].panels[1].body else {
            panic!("bars expected")
        };
        let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["traversal", "gbv", "specinfer", "SD"]);
        assert_eq!(bars[0].note, "3.00; study 5.31, rank 1");
        assert_eq!(bars[1].note, "2.90");
        assert_eq!(bars[0].err, Some(0.05));
    }

    #[test]
    fn a_damaged_value_skips_the_figure_with_the_fix() {
        let mut rows = vec![cell("specinfer", 4, 2.5), cell("traversal", 4, 3.0), cell("single", 1, 2.0)];
        rows[1].block_efficiency_mean = f64::INFINITY;
        let mut skipped = Vec::new();
        assert!(verifiers_figures(&rows, &mut skipped).is_empty());
        assert!(skipped[0].reason.contains("not a finite number"), "{}", skipped[0].reason);
    }

    #[test]
    fn a_run_without_the_study_is_skipped_with_the_fix() {
        let mut skipped = Vec::new();
        assert!(verifiers_figures(&[cell("gbv", 4, 2.0)], &mut skipped).is_empty());
        assert!(skipped[0].reason.contains("experiments/verifiers.toml"));
    }
}
