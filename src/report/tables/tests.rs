//! The builder on a toy table: the one docs/extending.md ("A table") walks
//! through, so that the example there stays true.

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::CellRow;
use crate::report::table::{Entry, Stat, Unit};

use super::{AnyTable, Panel, Split, TableSpec};

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

fn cell(scheme: &str, k: usize, temp: f64, seed: u64, us: Option<f64>) -> CellRow {
    CellRow {
        dataset: Dataset::Dolly,
        kind: CellKind::Scheme,
        scheme: scheme.parse().unwrap(),
        k,
        draft_len: 5,
        temp_set: TempSet::Identical(temp),
        target_temp: 1.0,
        top_p: 0.95,
        seed,
        select_us_per_token: us,
        ..CellRow::default()
    }
}

#[test]
fn a_toy_table_gets_panels_rows_columns_and_seed_means() {
    let rows = vec![
        cell("spectr", 2, 1.2, 1, Some(1.0)),
        cell("spectr", 2, 1.2, 2, Some(3.0)),
        cell("spectr", 2, 2.4, 1, Some(5.0)),
        cell("spectr", 3, 2.4, 1, Some(7.0)),
        cell("specinfer", 2, 1.2, 1, Some(2.0)),
        cell("specinfer", 2, 2.4, 1, None),
    ];
    let tables = SelectTime.build(&rows, true).unwrap();
    assert_eq!(tables.len(), 1);
    let table = &tables[0];
    assert_eq!(
        table.id,
        "select-time/dolly/L = 5, target T = 1, top-p 0.95"
    );
    assert_eq!(
        table.title,
        "Selection time (µs per token) by draft temperature, dolly"
    );
    assert_eq!(table.columns, ["scheme", "T=1.2", "T=2.4"]);
    assert_eq!(
        table.notes,
        ["L = 5, target T = 1, top-p 0.95; mean ± s.d. over seeds"]
    );
    let labels: Vec<&str> = table.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["spectr, K=2", "spectr, K=3", "specinfer, K=2"]);
    let spectr_k2 = table.rows[0].entries[0].measured.unwrap();
    assert_eq!((spectr_k2.mean, spectr_k2.seeds), (2.0, 2));
    // A scheme and K with no cell at a temperature leaves its entry empty,
    // as does a cell the table does not read; no published value, so no †
    // even though the setup differs.
    assert_eq!(table.rows[1].entries[0].measured, None);
    assert_eq!(table.rows[2].entries[1].measured, None);
    assert!(table.rows.iter().all(|r| !r.differs));

    let skip = SelectTime
        .build(&[cell("spectr", 2, 1.2, 1, None)], true)
        .unwrap_err();
    assert_eq!(
        (skip.name.as_str(), skip.reason.as_str()),
        (
            "selection time by draft temperature",
            "no cell timed its selection"
        )
    );
}
