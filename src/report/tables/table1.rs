//! The paper's Table 1: block efficiency by the number of drafts K, per
//! dataset and draft temperature.

use std::collections::BTreeSet;

use crate::experiment::metrics::CellRow;
use crate::report::table::{Entry, Stat, Unit};

use super::{Panel, PaperValue, TableSpec};

pub struct Table1;

impl TableSpec for Table1 {
    /// A scheme label.
    type Row = String;
    /// K.
    type Column = usize;

    const NAME: &'static str = "Table 1 (block efficiency by K)";
    const ID: &'static str = "table1";
    const TITLE: &'static str = "Table 1: block efficiency (tokens per target call) by number of drafts K, {dataset}, draft T {temp}";
    const NOTES: &'static [&'static str] =
        &["{sampling}; mean ± s.d. over seeds; [paper: …] from {source}"];

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        let ks: BTreeSet<usize> = cells.iter().map(|r| r.k).collect();
        if ks.len() < 2 {
            return Err(format!(
                "needs scheme cells at two or more K (this run: K = {}); run e.g. --drafts 2,3,4,5,6 (experiments/paper-e3.toml)",
                ks.iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(())
    }

    /// A panel at one K compares nothing: left out.
    fn columns(&self, panel: &Panel) -> Vec<(String, usize)> {
        let ks = panel.ks();
        if ks.len() < 2 {
            return Vec::new();
        }
        ks.into_iter().map(|k| (format!("K={k}"), k)).collect()
    }

    fn rows(&self, panel: &Panel) -> Vec<(String, String)> {
        panel.scheme_rows()
    }

    fn cells<'a>(&self, panel: &Panel<'a>, label: &String, k: &usize) -> Vec<&'a CellRow> {
        panel.scheme_at(label, *k)
    }

    fn entry(&self, _: &Panel, _: &String, _: &usize, cells: &[&CellRow]) -> Entry {
        let be: Vec<f64> = cells.iter().map(|r| r.block_efficiency).collect();
        Entry::new(Stat::of(&be), Unit::Tokens)
    }

    fn paper(&self, label: &String, _: &usize) -> Option<PaperValue> {
        Some(PaperValue::new(1, "block_efficiency", label))
    }
}
