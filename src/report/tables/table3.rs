//! The paper's Table 3: the mean per-node acceptance of each scheme by
//! dataset and K, with the optimum `P*` on top.

use crate::data::Dataset;
use crate::experiment::metrics::CellRow;
use crate::report::in_order;
use crate::report::table::{Entry, Stat, Unit};
use crate::report::published::canonical;

use super::{Panel, PaperValue, Split, TableSpec};

pub struct Table3;

pub enum Row {
    /// The optimal acceptance `P*`.
    Optimal,
    Scheme(String),
}

impl TableSpec for Table3 {
    type Row = Row;
    type Column = (Dataset, usize);

    const NAME: &'static str = "Table 3 (per-node acceptance)";
    const ID: &'static str = "table3";
    const TITLE: &'static str = "Table 3: average per-node acceptance probability, draft T {temp}";
    const NOTES: &'static [&'static str] = &[
        "{sampling}; mean ± s.d. over seeds",
        "each scheme's row averages its closed-form acceptance over the nodes its own run visited (two-step IS: Σ min(p, p_I)); P* is averaged over the IS run's nodes (PAPER.md E5), or the first scheme's where IS did not run",
        "[paper: …] from {source}; the paper does not state Table 3's draft temperature: its values are shown at T = 1.2",
    ];
    const SPLIT: &'static [Split] = &[Split::Sampling, Split::Temp];

    fn reads(&self, cell: &CellRow) -> bool {
        cell.mean_accept.is_some() && cell.temp_set.pair().is_none()
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        match cells {
            [] => Err("no scheme cell with identical drafts has a mean per-node acceptance".into()),
            _ => Ok(()),
        }
    }

    fn columns(&self, panel: &Panel) -> Vec<(String, (Dataset, usize))> {
        let mut columns = Vec::new();
        for dataset in in_order(panel.cells.iter().map(|r| r.dataset)) {
            let in_dataset = panel.cells.iter().filter(|r| r.dataset == dataset);
            let mut ks = in_order(in_dataset.map(|r| r.k));
            ks.sort();
            columns.extend(
                ks.into_iter()
                    .map(|k| (format!("{dataset} K={k}"), (dataset, k))),
            );
        }
        columns
    }

    fn rows(&self, panel: &Panel) -> Vec<(String, Row)> {
        let schemes = panel
            .labels()
            .into_iter()
            .map(|l| (l.clone(), Row::Scheme(l)));
        let optimal = ("Optimal (P*)".to_string(), Row::Optimal);
        std::iter::once(optimal).chain(schemes).collect()
    }

    /// `P*` on the nodes of the IS run where there is one (PAPER.md E5),
    /// else of the first scheme with `P*` logged.
    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        row: &Row,
        (dataset, k): &(Dataset, usize),
    ) -> Vec<&'a CellRow> {
        let at = |pick: &dyn Fn(&CellRow) -> bool| {
            panel.select(|r| r.dataset == *dataset && r.k == *k && pick(r))
        };
        let label = match row {
            Row::Scheme(label) => return at(&|r| r.scheme_label() == *label),
            Row::Optimal => canonical("is"),
        };
        let source = at(&|r| r.mean_pstar.is_some() && canonical(&r.scheme_label()) == label);
        if !source.is_empty() {
            return source;
        }
        let first = at(&|r| r.mean_pstar.is_some())
            .first()
            .map(|r| r.scheme_label());
        at(&|r| r.mean_pstar.is_some() && Some(r.scheme_label()) == first)
    }

    fn entry(&self, _: &Panel, row: &Row, _: &(Dataset, usize), cells: &[&CellRow]) -> Entry {
        let values: Vec<f64> = cells
            .iter()
            .filter_map(|r| match row {
                Row::Optimal => r.mean_pstar,
                Row::Scheme(_) => r.mean_accept,
            })
            .collect();
        Entry::new(Stat::of(&values), Unit::Probability)
    }

    fn paper(&self, row: &Row, _: &(Dataset, usize)) -> Option<PaperValue> {
        let scheme = match row {
            Row::Optimal => "optimal",
            Row::Scheme(label) => label,
        };
        Some(PaperValue::new(3, "accept", scheme))
    }
}
