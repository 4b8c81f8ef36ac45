//! The paper's Figures 3 and 4: block efficiency and token rate as % over
//! single-draft SD against the draft temperature, one line per scheme, per
//! dataset. Figure 3 has identical drafts (x = their temperature), Figure 4
//! non-identical pairs `T1:T2` (x = T2, one figure per T1).

use std::collections::BTreeMap;

use crate::data::Dataset;
use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;

use super::Skip;
use super::data::{KGroup, VsSd, in_order, seeds_note, settings, split_by_k, stat};
use super::figure::{Figure, LegendEntry, Line, Panel, Point, Reference, Series};
use super::style::scheme_style;

const BE_LABEL: &str = "block efficiency, % over single-draft SD";
const TR_LABEL: &str = "token rate, % over single-draft SD";

/// One dataset's scheme cells against one temperature axis.
struct Sweep<'a> {
    name: String,
    title: String,
    /// The K of the multi-draft schemes (none: single-draft cells only).
    k: Option<usize>,
    x_label: &'static str,
    /// `(x, row)` for every cell on this axis.
    cells: Vec<(f64, &'a CellRow)>,
}

/// (legend label, scheme label, K) → x (in millionths) → the seeds'
/// `(x, BE %, TR %)`: one line of each panel.
type Lines = Vec<(
    (String, String, usize),
    BTreeMap<i64, (f64, Vec<f64>, Vec<f64>)>,
)>;

/// The sweep's cells as lines, and how many cells had no SD baseline.
fn lines(sweep: &Sweep, group: &KGroup, vs_sd: &VsSd) -> (Lines, usize) {
    let mut missing = 0;
    let mut lines: Lines = Vec::new();
    for (x, row) in &sweep.cells {
        let Some((be, tr)) = vs_sd.of(row) else {
            missing += 1;
            continue;
        };
        let key = (group.label(row), row.scheme_label(), row.k);
        let index = match lines.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                lines.push((key, BTreeMap::new()));
                lines.len() - 1
            }
        };
        let entry =
            lines[index]
                .1
                .entry((x * 1e6).round() as i64)
                .or_insert((*x, Vec::new(), Vec::new()));
        entry.1.push(be);
        entry.2.push(tr);
    }
    (lines, missing)
}

/// Each line as a block-efficiency and a token-rate series (dashed where
/// its K is not the figure's), and the most seeds behind one point.
fn series(lines: &Lines, figure_k: Option<usize>) -> (Vec<Series>, Vec<Series>, usize) {
    let mut seeds = 0;
    let (mut be_series, mut tr_series) = (Vec::new(), Vec::new());
    for ((name, label, k), by_x) in lines {
        let style = scheme_style(label);
        let (mut be_points, mut tr_points) = (Vec::new(), Vec::new());
        for (x, be, tr) in by_x.values() {
            let (be, tr) = (stat(be).expect("one seed"), stat(tr).expect("one seed"));
            seeds = seeds.max(be.n);
            be_points.push(Point {
                x: *x,
                y: be.mean,
                err: be.se,
            });
            tr_points.push(Point {
                x: *x,
                y: tr.mean,
                err: tr.se,
            });
        }
        let line = if figure_k.is_none_or(|main| *k == main) {
            Line::Solid
        } else {
            Line::Dashed
        };
        let mut be = Series::new(name.clone(), style, be_points);
        be.line = line;
        let mut tr = Series::new(name.clone(), style, tr_points);
        tr.line = line;
        be_series.push(be);
        tr_series.push(tr);
    }
    (be_series, tr_series, seeds)
}

/// A panel of % over SD, with SD's 0 % line.
fn percent_panel(title: &str, x_label: &str, y_label: &str, series: Vec<Series>) -> Panel {
    let mut panel = Panel::lines(title, x_label, y_label, series);
    panel.reference = Some(Reference {
        y: 0.0,
        label: String::new(),
    });
    panel.percent_y = true;
    panel
}

/// Makes the figures, noting the ones it cannot draw.
struct Builder<'r, 's> {
    vs_sd: VsSd<'r>,
    skipped: &'s mut Vec<Skip>,
}

impl Builder<'_, '_> {
    fn build(&mut self, sweep: Sweep) -> Option<Figure> {
        let xs = in_order(sweep.cells.iter().map(|(x, _)| x.to_bits()));
        if xs.len() < 2 {
            self.skipped.push(Skip::new(
                &sweep.name,
                format!(
                    "only one draft temperature ({}): a line needs at least two (add temperatures to the sweep)",
                    f64::from_bits(xs[0])
                ),
            ));
            return None;
        }
        let rows: Vec<&CellRow> = sweep.cells.iter().map(|(_, r)| *r).collect();
        let group = KGroup {
            k: sweep.k,
            split: false,
            rows: rows.clone(),
        };
        let (lines, missing) = lines(&sweep, &group, &self.vs_sd);
        if lines.is_empty() {
            self.skipped.push(Skip::new(
                &sweep.name,
                "no SD baseline for these cells (% over SD needs the `sd` cell of each dataset, temperature set and seed): re-run with the plan's SD cells, or give the shard that holds them too".to_string(),
            ));
            return None;
        }
        let (be, tr, seeds) = series(&lines, sweep.k);
        let panels = vec![
            percent_panel("Block efficiency", sweep.x_label, BE_LABEL, be),
            percent_panel("Token rate", sweep.x_label, TR_LABEL, tr),
        ];
        let mut caption = format!(
            "Dashed line: single-draft SD (0 %), the baseline at the same draft temperature and seed; {}. {}.",
            seeds_note(seeds),
            settings(&rows)
        );
        if missing > 0 {
            caption.push_str(&format!(
                " {missing} cells without an SD baseline left out."
            ));
        }
        let mut legend = Figure::legend_of(&panels);
        legend.push(LegendEntry {
            label: "SD baseline (0 %)".into(),
            style: scheme_style("single"),
            line: Line::Dashed,
            marker: false,
        });
        Some(Figure {
            name: sweep.name,
            title: format!("{}, {}", sweep.title, group.title()),
            caption,
            legend,
            panels,
            columns: 2,
        })
    }

    /// A figure of the sweep for each K group of its cells (the group's suffix
    /// added to the name).
    fn by_k(&mut self, sweep: Sweep) -> Vec<Figure> {
        let rows: Vec<&CellRow> = sweep.cells.iter().map(|(_, r)| *r).collect();
        let mut figures = Vec::new();
        for group in split_by_k(&rows) {
            let cells = (sweep.cells.iter())
                .filter(|(_, r)| group.rows.iter().any(|g| std::ptr::eq(*g, *r)))
                .copied()
                .collect();
            let sweep = Sweep {
                name: format!("{}{}", sweep.name, group.suffix()),
                title: sweep.title.clone(),
                k: group.k,
                x_label: sweep.x_label,
                cells,
            };
            figures.extend(self.build(sweep));
        }
        figures
    }

    /// Figure 3: one dataset's identical-draft cells against their temperature.
    fn figure3(&mut self, dataset: Dataset, identical: &[&CellRow]) -> Vec<Figure> {
        let cells: Vec<(f64, &CellRow)> = identical
            .iter()
            .filter(|r| r.dataset == dataset)
            .map(|r| (r.temp_set.identical().unwrap(), *r))
            .collect();
        if cells.is_empty() {
            return Vec::new();
        }
        if !self.vs_sd.has_baseline(dataset)
            && cells.iter().all(|(_, r)| self.vs_sd.of(r).is_none())
        {
            self.skipped.push(Skip::new(
                format!("fig3-{dataset}"),
                format!("no SD baseline for {dataset} (no `sd` cells): % over SD needs them; re-run without dropping the SD cells, or add the shard that holds them"),
            ));
            return Vec::new();
        }
        let sweep = Sweep {
            name: format!("fig3-{dataset}"),
            title: format!("{dataset}: identical drafts"),
            k: None,
            x_label: "draft temperature",
            cells,
        };
        self.by_k(sweep)
    }

    /// Figure 4: one dataset's pairs against the second draft's temperature,
    /// a figure per first draft's temperature.
    fn figure4(&mut self, dataset: Dataset, pairs: &[&CellRow]) -> Vec<Figure> {
        let pair_cells: Vec<(f64, f64, &CellRow)> = pairs
            .iter()
            .filter(|r| r.dataset == dataset)
            .map(|r| {
                let (t1, t2) = r.temp_set.pair().unwrap();
                (t1, t2, *r)
            })
            .collect();
        let mut figures = Vec::new();
        for first in in_order(pair_cells.iter().map(|(t1, _, _)| t1.to_bits())) {
            let t1 = f64::from_bits(first);
            let cells: Vec<(f64, &CellRow)> = pair_cells
                .iter()
                .filter(|(a, _, _)| a.to_bits() == first)
                .map(|(_, t2, r)| (*t2, *r))
                .collect();
            let name = format!("fig4-{dataset}-t1-{t1}");
            if cells.iter().all(|(_, r)| self.vs_sd.of(r).is_none()) {
                self.skipped.push(Skip::new(
                    &name,
                    format!("no SD baseline for {dataset} at T1 = {t1} (no `sd` cells): % over SD needs them; re-run without dropping the SD cells, or add the shard that holds them"),
                ));
                continue;
            }
            let sweep = Sweep {
                name,
                title: format!("{dataset}: non-identical drafts, first draft T = {t1}"),
                k: None,
                x_label: "second draft's temperature",
                cells,
            };
            figures.extend(self.by_k(sweep));
        }
        figures
    }
}

/// Figure 3 (identical drafts) and Figure 4 (pairs) for every dataset.
pub fn temperature_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let schemes: Vec<&CellRow> = rows.iter().filter(|r| r.kind == CellKind::Scheme).collect();
    let identical: Vec<&CellRow> = schemes
        .iter()
        .copied()
        .filter(|r| r.temp_set.identical().is_some())
        .collect();
    let pairs: Vec<&CellRow> = schemes
        .iter()
        .copied()
        .filter(|r| r.temp_set.pair().is_some())
        .collect();
    if identical.is_empty() {
        skipped.push(Skip::new(
            "fig3",
            "no identical-draft cells (temperature sets without ':')",
        ));
    }
    if pairs.is_empty() {
        skipped.push(Skip::new(
            "fig4",
            "no non-identical draft pairs (run with --draft-temp-pairs T1:T2,…)",
        ));
    }
    let mut builder = Builder {
        vs_sd: VsSd::new(rows),
        skipped,
    };
    let mut figures = Vec::new();
    for dataset in in_order(schemes.iter().map(|r| r.dataset)) {
        figures.extend(builder.figure3(dataset, &identical));
        figures.extend(builder.figure4(dataset, &pairs));
    }
    figures
}
