//! The paper's Table 2: IS at K = 2 with several alphabet sizes M and LP
//! sizes s (truncation), block efficiency and token rate.

use crate::experiment::metrics::CellRow;
use crate::report::in_order;
use crate::report::table::{Entry, Stat, Unit};
use crate::report::published::canonical;

use super::{Panel, PaperValue, TableSpec};

pub struct Table2;

#[derive(Clone, Copy)]
pub enum Metric {
    BlockEfficiency,
    TokenRate,
}

/// The IS parameters `(M, s)` of a label (`is`, `is:m=20`, …), canonical.
fn is_parameters(label: &str) -> Option<(usize, usize)> {
    let canonical = canonical(label);
    let rest = canonical.strip_prefix("is:")?;
    let mut m = None;
    let mut s = None;
    for part in rest.split(':') {
        match part.split_once('=') {
            Some(("m", v)) => m = v.parse().ok(),
            Some(("s", v)) => s = v.parse().ok(),
            _ => {}
        }
    }
    Some((m?, s?))
}

fn variants(cells: &[&CellRow]) -> Vec<(usize, usize)> {
    in_order(
        cells
            .iter()
            .filter_map(|r| is_parameters(&r.scheme_label())),
    )
}

impl TableSpec for Table2 {
    /// `(M, s)`.
    type Row = (usize, usize);
    type Column = Metric;

    const NAME: &'static str = "Table 2 (IS truncation: M and s)";
    const ID: &'static str = "table2";
    const TITLE: &'static str = "Table 2: effect of truncation on IS (alphabet M, LP size s), K = 2, {dataset}, draft T {temp}";
    const NOTES: &'static [&'static str] = &[
        "{sampling}; mean ± s.d. over seeds; the paper does not state Table 2's dataset or temperature: its values are shown for Dolly at T = 1.2 (E4); [paper: …] from {source}",
    ];
    const LABEL_HEADER: &'static str = "setting";

    fn reads(&self, cell: &CellRow) -> bool {
        cell.scheme == "is" && cell.k == 2
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        if variants(cells).len() < 2 {
            return Err("needs IS at K = 2 with two or more (M, s) settings; run experiments/paper-e4.toml or --schemes is:m=10,is:m=20,is:m=40,is:s=10".into());
        }
        Ok(())
    }

    fn columns(&self, _: &Panel) -> Vec<(String, Metric)> {
        vec![
            ("block efficiency".into(), Metric::BlockEfficiency),
            ("token rate (% vs SD)".into(), Metric::TokenRate),
        ]
    }

    /// The paper's order: the alphabet sweep (by M), then the LP sweep (by
    /// s). A panel with one setting compares nothing: left out.
    fn rows(&self, panel: &Panel) -> Vec<(String, (usize, usize))> {
        let mut variants = variants(&panel.cells);
        if variants.len() < 2 {
            return Vec::new();
        }
        variants.sort_by_key(|&(m, s)| (s, m));
        let label = |(m, s)| format!("M = {m}, s = {s}");
        variants.into_iter().map(|v| (label(v), v)).collect()
    }

    fn cells<'a>(&self, panel: &Panel<'a>, row: &(usize, usize), _: &Metric) -> Vec<&'a CellRow> {
        panel.select(|r| is_parameters(&r.scheme_label()) == Some(*row))
    }

    fn entry(&self, _: &Panel, _: &(usize, usize), metric: &Metric, cells: &[&CellRow]) -> Entry {
        match metric {
            Metric::BlockEfficiency => {
                let be: Vec<f64> = cells.iter().map(|r| r.block_efficiency).collect();
                Entry::new(Stat::of(&be), Unit::Tokens)
            }
            Metric::TokenRate => {
                let tr: Vec<f64> = cells
                    .iter()
                    .filter_map(|r| r.token_rate_vs_sd_pct)
                    .collect();
                Entry::new(Stat::of(&tr), Unit::Percent)
            }
        }
    }

    fn paper(&self, (m, s): &(usize, usize), metric: &Metric) -> Option<PaperValue> {
        let metric = match metric {
            Metric::BlockEfficiency => "block_efficiency",
            Metric::TokenRate => "token_rate_vs_sd_pct",
        };
        Some(PaperValue::new(2, metric, format!("is:m={m}:s={s}")))
    }
}
