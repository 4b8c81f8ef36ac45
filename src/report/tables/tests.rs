//! The builder on a toy table: the one docs/extending.md ("A table") walks
//! through (`select_time.rs`), so that the example there stays true.

use std::path::PathBuf;

use crate::data::Dataset;
use crate::experiment::cell::{CellKind, TempSet};
use crate::experiment::metrics::CellRow;
use crate::report::paper_tables::Report;
use crate::report::render::{Format, render};
use crate::report::results::load;

use super::select_time::SelectTime;
use super::{AnyTable, TABLES};

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

/// `select_time: SelectTime;` in `tables!`: the example in the list with
/// the others, built from the reference run's rows (`results/tiny`) and
/// rendered in every format.
#[test]
fn the_example_table_builds_from_a_run_and_renders() {
    let list: Vec<&dyn AnyTable> = (TABLES.iter().copied())
        .chain([&SelectTime as &dyn AnyTable])
        .collect();
    let run = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/tiny");
    let rows = load(&[run]).unwrap().rows;
    let mut report = Report {
        tables: Vec::new(),
        skipped: Vec::new(),
        setup_differences: Vec::new(),
    };
    for table in list {
        match table.build(&rows, false) {
            Ok(tables) => report.tables.extend(tables),
            Err(skip) => report.skipped.push(skip),
        }
    }
    assert!(
        report
            .skipped
            .iter()
            .all(|s| s.name != "selection time by draft temperature")
    );
    let ours: Vec<_> = (report.tables.iter())
        .filter(|t| t.id.starts_with("select-time/"))
        .collect();
    // One table per sampling and dataset: the tiny run has one sampling.
    let datasets = crate::report::in_order(rows.iter().map(|r| r.dataset));
    assert_eq!(ours.len(), datasets.len());
    for table in &ours {
        assert!(!table.rows.is_empty(), "{}", table.id);
        assert!(
            (table.rows.iter()).all(|r| r.entries.iter().any(|e| e.measured.is_some())),
            "{}",
            table.id
        );
    }
    let markdown = render(&report, Format::Markdown);
    for dataset in datasets {
        let title = format!("Selection time (µs per token) by draft temperature, {dataset}");
        assert!(markdown.contains(&title), "{title}");
    }
    // LaTeX names each table by its id in a comment, CSV on every line.
    for format in [Format::Latex, Format::Csv] {
        let text = render(&report, format);
        for table in &ours {
            assert!(text.contains(&table.id), "{format:?}: {}", table.id);
        }
    }
}
