//! Selection time per token by draft temperature, per dataset.

use crate::experiment::cell::TempSet;
use crate::experiment::metrics::CellRow;
use crate::report::table::{Entry, Stat, Unit};

use super::{Panel, Split, TableSpec};

pub struct SelectTime;

impl TableSpec for SelectTime {
    /// A scheme label and its number of drafts.
    type Row = (String, usize);
    /// A draft temperature set.
    type Column = TempSet;

    const NAME: &'static str = "selection time by draft temperature";
    const ID: &'static str = "select-time";
    const TITLE: &'static str = "Selection time (µs per token) by draft temperature, {dataset}";
    const NOTES: &'static [&'static str] = &["{sampling}; mean ± s.d. over seeds"];
    const SPLIT: &'static [Split] = &[Split::Sampling, Split::Dataset];

    fn reads(&self, cell: &CellRow) -> bool {
        cell.select_us_per_token.is_some()
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        match cells {
            [] => Err("no cell timed its selection".into()),
            _ => Ok(()),
        }
    }

    fn columns(&self, panel: &Panel) -> Vec<(String, TempSet)> {
        let temps = panel.temps().into_iter();
        temps.map(|t| (format!("T={t}"), t)).collect()
    }

    /// One row per scheme and K that the panel holds, K ascending.
    fn rows(&self, panel: &Panel) -> Vec<(String, (String, usize))> {
        let mut rows = Vec::new();
        for label in panel.labels() {
            for k in panel.ks() {
                if !panel.scheme_at(&label, k).is_empty() {
                    rows.push((format!("{label}, K={k}"), (label.clone(), k)));
                }
            }
        }
        rows
    }

    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        (label, k): &(String, usize),
        temp: &TempSet,
    ) -> Vec<&'a CellRow> {
        panel.select(|r| r.scheme_label() == *label && r.k == *k && r.temp_set == *temp)
    }

    fn entry(&self, _: &Panel, _: &(String, usize), _: &TempSet, cells: &[&CellRow]) -> Entry {
        let us: Vec<f64> = cells.iter().filter_map(|r| r.select_us_per_token).collect();
        // Printed with three decimals, like block efficiency.
        Entry::new(Stat::of(&us), Unit::Tokens)
    }
}
