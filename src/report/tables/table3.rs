//! The paper's Table 3: the mean per-node acceptance of each scheme by
//! dataset and K, with the optimum `P*` on top.
//!
//! Every row averages over one run's nodes (`docs/paper.md` E5): the IS run at
//! the panel's temperature, where every node logged `P*` and each Table 3
//! scheme's closed form (`decode::TokenAccepts`). On the same nodes no
//! i.i.d. scheme can exceed `P*`. A run written before those closed forms
//! were logged (`results/tiny`) gets the older table instead: each scheme's
//! row over the nodes its own run visited, `P*` over the IS run's; the
//! footer says which one a panel shows.

use crate::data::Dataset;
use crate::experiment::metrics::CellRow;
use crate::report::in_order;
use crate::report::published::canonical;
use crate::report::table::{Entry, Stat, Unit};

use super::{Panel, PaperValue, Split, TableSpec};

pub struct Table3;

/// A `cells.csv` column of a cell.
type Column = fn(&CellRow) -> Option<f64>;

/// Table 3's schemes besides `P*`, as `cells.csv` holds their closed forms
/// at a run's nodes: (row label, column). A new one is one line here.
const LOGGED: &[(&str, Column)] = &[
    ("is", |r| r.mean_accept_is),
    ("spectr", |r| r.mean_accept_spectr),
    ("specinfer", |r| r.mean_accept_specinfer),
];

pub enum Row {
    /// The optimal acceptance `P*`.
    Optimal,
    /// One of [`LOGGED`], over the source run's nodes.
    Logged(usize),
    /// Older runs: a scheme's own `mean_accept` over its own run's nodes.
    Scheme(String),
}

const NOTES: &[&str] = &[
    "{sampling}; mean ± s.d. over seeds",
    "[paper: …] from {source}; the paper does not state Table 3's draft temperature: its values are shown at T = 1.2",
];

const SAME_NODES: &str = "every row averages its closed form (IS: selection acceptance Σ min(p, p_I), tournament for K > 2; SpecTr 1 − (1 − β(ρ*))^K; SpecInfer 1 − Π TV) and P* over the nodes of one run: the IS run at this temperature (docs/reproduction.md, Table 3)";

const OWN_NODES: &str = "this run predates per-node logging of every Table 3 scheme: each scheme's row averages its closed-form acceptance over the nodes its own run visited (two-step IS: Σ min(p, p_I)); P* is averaged over the IS run's nodes (docs/reproduction.md, Table 3), or the first scheme's where IS did not run; rows over different nodes are not comparable (re-run for the table on one run's nodes)";

impl Table3 {
    /// Whether this panel's runs logged every Table 3 scheme at their nodes.
    fn same_nodes(panel: &Panel) -> bool {
        panel.cells.iter().any(|r| has_logged(r))
    }

    /// The cells whose nodes give a column: the IS run's (`docs/paper.md` E5),
    /// else the first scheme's with the values `has` asks for, one per seed.
    fn source<'a>(
        panel: &Panel<'a>,
        (dataset, k): &(Dataset, usize),
        has: fn(&CellRow) -> bool,
    ) -> Vec<&'a CellRow> {
        let at = |pick: &dyn Fn(&CellRow) -> bool| {
            panel.select(|r| r.dataset == *dataset && r.k == *k && has(r) && pick(r))
        };
        let is = canonical("is");
        let source = at(&|r| canonical(&r.scheme_label()) == is);
        if !source.is_empty() {
            return source;
        }
        let first = at(&|_| true).first().map(|r| r.scheme_label());
        at(&|r| Some(r.scheme_label()) == first)
    }
}

fn has_logged(cell: &CellRow) -> bool {
    cell.mean_pstar.is_some() && LOGGED.iter().any(|(_, value)| value(cell).is_some())
}

fn has_pstar(cell: &CellRow) -> bool {
    cell.mean_pstar.is_some()
}

impl TableSpec for Table3 {
    type Row = Row;
    type Column = (Dataset, usize);

    const NAME: &'static str = "Table 3 (per-node acceptance)";
    const ID: &'static str = "table3";
    const TITLE: &'static str = "Table 3: average per-node acceptance probability, draft T {temp}";
    const NOTES: &'static [&'static str] = NOTES;
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
        let optimal = ("Optimal (P*)".to_string(), Row::Optimal);
        let rest: Vec<(String, Row)> = if Self::same_nodes(panel) {
            (0..LOGGED.len())
                .map(|i| (canonical(LOGGED[i].0), Row::Logged(i)))
                .collect()
        } else {
            panel
                .labels()
                .into_iter()
                .map(|l| (l.clone(), Row::Scheme(l)))
                .collect()
        };
        std::iter::once(optimal).chain(rest).collect()
    }

    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        row: &Row,
        column: &(Dataset, usize),
    ) -> Vec<&'a CellRow> {
        match row {
            Row::Scheme(label) => panel.select(|r| {
                r.dataset == column.0 && r.k == column.1 && r.scheme_label() == *label
            }),
            Row::Logged(_) => Self::source(panel, column, has_logged),
            Row::Optimal if Self::same_nodes(panel) => Self::source(panel, column, has_logged),
            Row::Optimal => Self::source(panel, column, has_pstar),
        }
    }

    fn entry(&self, _: &Panel, row: &Row, _: &(Dataset, usize), cells: &[&CellRow]) -> Entry {
        let values: Vec<f64> = cells
            .iter()
            .filter_map(|r| match row {
                Row::Optimal => r.mean_pstar,
                Row::Logged(i) => (LOGGED[*i].1)(r),
                Row::Scheme(_) => r.mean_accept,
            })
            .collect();
        Entry::new(Stat::of(&values), Unit::Probability)
    }

    fn paper(&self, row: &Row, _: &(Dataset, usize)) -> Option<PaperValue> {
        let scheme = match row {
            Row::Optimal => "optimal",
            Row::Logged(i) => LOGGED[*i].0,
            Row::Scheme(label) => label,
        };
        Some(PaperValue::new(3, "accept", scheme))
    }

    fn notes(&self, panel: &Panel) -> Vec<String> {
        let mut notes: Vec<String> = NOTES.iter().map(|note| panel.fill(note)).collect();
        let (nodes, has): (&str, fn(&CellRow) -> bool) = if Self::same_nodes(panel) {
            (SAME_NODES, has_logged)
        } else {
            (OWN_NODES, has_pstar)
        };
        notes.insert(1, nodes.to_string());
        // Say where a column's nodes are not the IS run's.
        let is = canonical("is");
        let elsewhere: Vec<String> = self
            .columns(panel)
            .into_iter()
            .filter_map(|(header, column)| {
                let label = Self::source(panel, &column, has).first()?.scheme_label();
                (canonical(&label) != is).then(|| format!("{header}: {label}"))
            })
            .collect();
        if !elsewhere.is_empty() {
            notes.insert(
                2,
                format!(
                    "no IS run here, nodes of the first scheme that ran instead: {}",
                    elsewhere.join(", ")
                ),
            );
        }
        notes
    }
}
