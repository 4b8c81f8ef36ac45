//! The one builder every [`TableSpec`] runs through: cells into panels,
//! entries at each row and column, the published value beside each entry
//! the paper has, and the `†` on rows whose run setup differs from the
//! paper's.

use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;
use crate::report::Skip;
use crate::report::published::{CellSettings, lookup, published};
use crate::report::table::{Entry, Stat, Table, TableRow};

use super::panel::{Panel, panels};
use super::{PaperValue, TableSpec};

pub fn build<S: TableSpec>(spec: &S, rows: &[CellRow], differs: bool) -> Result<Vec<Table>, Skip> {
    let cells: Vec<&CellRow> = rows
        .iter()
        .filter(|r| !S::SCHEMES_ONLY || r.kind == CellKind::Scheme)
        .filter(|r| spec.reads(r))
        .collect();
    (spec.applies_to(&cells)).map_err(|reason| Skip::new(S::NAME, reason))?;
    Ok(panels(&cells, S::SPLIT)
        .iter()
        .filter_map(|panel| table(spec, panel, differs))
        .collect())
}

fn table<S: TableSpec>(spec: &S, panel: &Panel, differs: bool) -> Option<Table> {
    let columns = spec.columns(panel);
    let rows = spec.rows(panel);
    if columns.is_empty() || rows.is_empty() {
        return None;
    }
    let table_rows = rows
        .iter()
        .map(|(label, row)| {
            let entries: Vec<Entry> = columns
                .iter()
                .map(|(_, column)| {
                    let cells = spec.cells(panel, row, column);
                    let mut entry = spec.entry(panel, row, column, &cells);
                    if let (Some(paper), Some(first)) = (spec.paper(row, column), cells.first()) {
                        entry.published = published_stat(&paper, first);
                    }
                    entry
                })
                .collect();
            TableRow {
                label: label.clone(),
                differs: differs && entries.iter().any(|e| e.published.is_some()),
                entries,
            }
        })
        .collect();
    let mut header = vec![S::LABEL_HEADER.to_string()];
    header.extend(columns.into_iter().map(|(header, _)| header));
    Some(Table {
        id: format!("{}/{}", spec.id(panel), panel.path()),
        title: spec.title(panel),
        columns: header,
        rows: table_rows,
        notes: spec.notes(panel),
    })
}

/// The paper's value for an entry whose cells are decoded like `cell`.
fn published_stat(paper: &PaperValue, cell: &CellRow) -> Option<Stat> {
    let settings = CellSettings {
        dataset: cell.dataset,
        temp_set: cell.temp_set,
        scheme: &paper.scheme,
        k: cell.k,
        draft_len: cell.draft_len,
        target_temp: cell.target_temp,
        top_p: cell.top_p,
        top_k: cell.top_k,
    };
    lookup(paper.table, paper.metric, &settings).map(|p| Stat {
        mean: p.value,
        spread: p.spread,
        seeds: published().paper.seeds,
    })
}
