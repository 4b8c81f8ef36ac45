//! The paper's Table 4: block efficiency under top-k sampling, with each
//! scheme's loss against IS.

use crate::experiment::metrics::{CellRow, mean};
use crate::report::table::{Entry, Stat, Unit};
use crate::report::published::canonical;

use super::{Panel, PaperValue, TableSpec};

pub struct Table4;

#[derive(Clone, Copy)]
pub enum Metric {
    BlockEfficiency,
    /// `BE / BE_IS` in percent.
    Loss,
}

/// The block efficiencies of a scheme at K, however its label is spelled
/// (`is` and `is:m=40:s=5` are one scheme).
fn block_efficiencies(panel: &Panel, label: &str, k: usize) -> Vec<f64> {
    let label = canonical(label);
    let at = panel.select(|r| canonical(&r.scheme_label()) == label && r.k == k);
    at.iter().map(|r| r.block_efficiency).collect()
}

impl TableSpec for Table4 {
    /// A scheme label.
    type Row = String;
    /// `(K, metric)`.
    type Column = (usize, Metric);

    const NAME: &'static str = "Table 4 (top-k sampling)";
    const ID: &'static str = "table4";
    const TITLE: &'static str = "Table 4: block efficiency under top-k sampling, {dataset}, draft T {temp}; loss = BE / BE_IS";
    const NOTES: &'static [&'static str] = &[
        "{sampling}; mean ± s.d. over seeds; loss is the ratio of seed means; [paper: …] from {source}",
    ];

    fn reads(&self, cell: &CellRow) -> bool {
        cell.top_k > 0
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        match cells {
            [] => Err("the run uses top-p, not top-k; run experiments/paper-e6.toml or --top-k 10 --top-p 1".into()),
            _ => Ok(()),
        }
    }

    fn columns(&self, panel: &Panel) -> Vec<(String, (usize, Metric))> {
        let columns = panel.ks().into_iter().map(|k| {
            [
                (format!("K={k} BE"), (k, Metric::BlockEfficiency)),
                (format!("K={k} loss"), (k, Metric::Loss)),
            ]
        });
        columns.flatten().collect()
    }

    fn rows(&self, panel: &Panel) -> Vec<(String, String)> {
        panel.scheme_rows()
    }

    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        label: &String,
        (k, _): &(usize, Metric),
    ) -> Vec<&'a CellRow> {
        panel.scheme_at(label, *k)
    }

    /// The loss is the ratio of the seed means, as the paper rounds it.
    fn entry(
        &self,
        panel: &Panel,
        label: &String,
        &(k, metric): &(usize, Metric),
        _: &[&CellRow],
    ) -> Entry {
        let be = Stat::of(&block_efficiencies(panel, label, k));
        if let Metric::BlockEfficiency = metric {
            return Entry::new(be, Unit::Tokens);
        }
        let is_be = block_efficiencies(panel, "is", k);
        let loss = match be {
            Some(stat) if !is_be.is_empty() && canonical(label) != canonical("is") => Some(Stat {
                mean: 100.0 * stat.mean / mean(&is_be),
                spread: None,
                seeds: stat.seeds,
            }),
            _ => None,
        };
        Entry::new(loss, Unit::Ratio)
    }

    fn paper(&self, label: &String, (_, metric): &(usize, Metric)) -> Option<PaperValue> {
        let metric = match metric {
            Metric::BlockEfficiency => "block_efficiency",
            Metric::Loss => "loss_pct",
        };
        Some(PaperValue::new(4, metric, label))
    }
}
