//! The builder on a toy table: the one docs/extending.md ("A table") walks
//! through, so that the example there stays true.

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::CellRow;
use crate::report::table::{Entry, Stat, Unit};

use super::{AnyTable, Panel, Split, TableSpec};

pub struct SelectTime;

impl TableSpec for SelectTime {
    /// A scheme label.
    type Row = String;
    /// K.
    type Column = usize;

    const NAME: &'static str = "selection time by K";
    const ID: &'static str = "select-time";
    const TITLE: &'static str = "Selection time (µs per token) by K, {dataset}, draft T {temp}";
    const NOTES: &'static [&'static str] = &["{sampling}; mean ± s.d. over seeds"];
    const SPLIT: &'static [Split] = &[Split::Sampling, Split::Dataset, Split::Temp];

    fn reads(&self, cell: &CellRow) -> bool {
        cell.select_us_per_token.is_some()
    }

    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String> {
        match cells {
            [] => Err("no cell timed its selection".into()),
            _ => Ok(()),
        }
    }

    fn columns(&self, panel: &Panel) -> Vec<(String, usize)> {
        panel
            .ks()
            .into_iter()
            .map(|k| (format!("K={k}"), k))
            .collect()
    }

    fn rows(&self, panel: &Panel) -> Vec<(String, String)> {
        panel.scheme_rows()
    }

    fn cells<'a>(&self, panel: &Panel<'a>, label: &String, k: &usize) -> Vec<&'a CellRow> {
        panel.scheme_at(label, *k)
    }

    fn entry(&self, _: &Panel, _: &String, _: &usize, cells: &[&CellRow]) -> Entry {
        let us: Vec<f64> = cells.iter().filter_map(|r| r.select_us_per_token).collect();
        // Printed with three decimals, like block efficiency.
        Entry::new(Stat::of(&us), Unit::Tokens)
    }
}

fn cell(scheme: &str, k: usize, seed: u64, us: Option<f64>) -> CellRow {
    CellRow {
        dataset: Dataset::Dolly,
        kind: CellKind::Scheme,
        scheme: scheme.parse().unwrap(),
        k,
        draft_len: 5,
        temp_set: TempSet::Identical(1.2),
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
        cell("spectr", 2, 1, Some(1.0)),
        cell("spectr", 2, 2, Some(3.0)),
        cell("spectr", 3, 1, Some(5.0)),
        cell("specinfer", 2, 1, Some(2.0)),
        cell("specinfer", 3, 1, None),
    ];
    let tables = SelectTime.build(&rows, true).unwrap();
    assert_eq!(tables.len(), 1);
    let table = &tables[0];
    assert_eq!(
        table.id,
        "select-time/dolly/1.2/L = 5, target T = 1, top-p 0.95"
    );
    assert_eq!(
        table.title,
        "Selection time (µs per token) by K, dolly, draft T 1.2"
    );
    assert_eq!(table.columns, ["scheme", "K=2", "K=3"]);
    assert_eq!(
        table.notes,
        ["L = 5, target T = 1, top-p 0.95; mean ± s.d. over seeds"]
    );
    let labels: Vec<&str> = table.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["spectr", "specinfer"]);
    let spectr_k2 = table.rows[0].entries[0].measured.unwrap();
    assert_eq!((spectr_k2.mean, spectr_k2.seeds), (2.0, 2));
    // A cell it does not read leaves its entry empty; no published value,
    // so no † even though the setup differs.
    assert_eq!(table.rows[1].entries[1].measured, None);
    assert!(table.rows.iter().all(|r| !r.differs));

    let skip = SelectTime
        .build(&[cell("spectr", 2, 1, None)], true)
        .unwrap_err();
    assert_eq!(
        (skip.name.as_str(), skip.reason.as_str()),
        ("selection time by K", "no cell timed its selection")
    );
}
