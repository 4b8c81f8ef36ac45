//! The paper's Figures 3 and 4 as tables: block efficiency and token rate
//! as % over single-draft SD, per draft temperature (the paper publishes
//! these only as plots, so no value stands beside them).

use crate::experiment::cell::TempSet;
use crate::experiment::metrics::CellRow;
use crate::report::in_order;
use crate::report::table::{Entry, Stat, Unit};

use super::{Draws, Panel, Split, TableSpec};

pub struct VsSd;

const FIGURE4_TITLE: &str = "Figure 4 as a table (non-identical drafts (T1:T2)): {dataset}, block efficiency (BE) and token rate (TR) as % over single-draft SD at the same draft temperature (SD at T1)";

#[derive(Clone, Copy)]
pub enum Metric {
    BlockEfficiency,
    TokenRate,
}

impl TableSpec for VsSd {
    /// `(K, scheme label)`.
    type Row = (usize, String);
    type Column = (TempSet, Metric);

    const NAME: &'static str = "Figures 3–4 as tables (% over SD)";
    /// Figure 3's; pairs are Figure 4 (`id` and `title` below).
    const ID: &'static str = "figure3";
    const TITLE: &'static str = "Figure 3 as a table (identical drafts): {dataset}, block efficiency (BE) and token rate (TR) as % over single-draft SD at the same draft temperature";
    const NOTES: &'static [&'static str] =
        &["{sampling}; mean ± s.d. over seeds; the paper publishes these only as plots"];
    const SPLIT: &'static [Split] = &[Split::Sampling, Split::Dataset, Split::Draws];

    /// The cells with an SD baseline in their group.
    fn reads(&self, cell: &CellRow) -> bool {
        cell.block_efficiency_vs_sd_pct.is_some()
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        match cells {
            [] => Err("no scheme cell has an SD baseline in its group: run with the `single` cells (they are added to every group by `specbench run`)".into()),
            _ => Ok(()),
        }
    }

    fn columns(&self, panel: &Panel) -> Vec<(String, Self::Column)> {
        let temps = panel.temps();
        let columns = temps.into_iter().map(|t| {
            [
                (format!("BE % (T {t})"), (t, Metric::BlockEfficiency)),
                (format!("TR % (T {t})"), (t, Metric::TokenRate)),
            ]
        });
        columns.flatten().collect()
    }

    /// K is named where the table has several.
    fn rows(&self, panel: &Panel) -> Vec<(String, Self::Row)> {
        let mut keys = in_order(panel.cells.iter().map(|r| (r.k, r.scheme_label())));
        keys.sort_by_key(|(k, _)| *k);
        let several_k = panel.ks().len() > 1;
        let label = |(k, label): &Self::Row| match several_k {
            true => format!("{label} (K={k})"),
            false => label.clone(),
        };
        keys.into_iter().map(|row| (label(&row), row)).collect()
    }

    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        (k, label): &Self::Row,
        (temp, _): &Self::Column,
    ) -> Vec<&'a CellRow> {
        panel.select(|r| r.k == *k && r.scheme_label() == *label && r.temp_set == *temp)
    }

    fn entry(
        &self,
        _: &Panel,
        _: &Self::Row,
        (_, metric): &Self::Column,
        cells: &[&CellRow],
    ) -> Entry {
        let values: Vec<f64> = cells
            .iter()
            .filter_map(|r| match metric {
                Metric::BlockEfficiency => r.block_efficiency_vs_sd_pct,
                Metric::TokenRate => r.token_rate_vs_sd_pct,
            })
            .collect();
        Entry::new(Stat::of(&values), Unit::Percent)
    }

    fn id(&self, panel: &Panel) -> &'static str {
        match panel.draws() {
            Draws::Identical => Self::ID,
            Draws::Pairs => "figure4",
        }
    }

    fn title(&self, panel: &Panel) -> String {
        match panel.draws() {
            Draws::Identical => panel.fill(Self::TITLE),
            Draws::Pairs => panel.fill(FIGURE4_TITLE),
        }
    }
}
