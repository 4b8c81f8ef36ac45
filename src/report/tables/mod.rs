//! The report's tables, one file each, all run by one builder (`build.rs`).
//!
//! A table is a [`TableSpec`]: the cells it reads (or why the run has
//! none), how they split into separate tables, its rows and columns, and
//! the entry where a row meets a column. The builder does the rest the same
//! way for every table: the split into panels (by sampling, dataset, draft
//! temperatures), the published value beside each entry the paper has, the
//! `†` on rows whose run setup differs from the paper's, and the reason when
//! the run cannot fill a table. A new table is a new file here and one line
//! in [`TABLES`] (docs/extending.md, "A table").

mod build;
mod panel;
pub mod quality;
pub mod table1;
pub mod table2;
pub mod table3;
pub mod table4;
pub mod vs_sd;

use crate::experiment::metrics::CellRow;

use super::Skip;
use super::paper_tables::{Entry, Table};

pub use panel::{Draws, Panel, Sampling, Split};

/// Every table of `specbench report`, in the order the report prints them.
pub static TABLES: &[&dyn AnyTable] = &[
    &vs_sd::VsSd,
    &table1::Table1,
    &table2::Table2,
    &table3::Table3,
    &table4::Table4,
    &quality::Quality,
];

/// One table of the report, described; [`build`](AnyTable::build) makes
/// the tables from a run.
pub trait TableSpec {
    /// What a row stands for (a scheme label, a `(K, label)` pair, …).
    type Row;
    /// What a column stands for (a K, a `(temperature, metric)` pair, …).
    type Column;

    /// Names the table in the report's "not shown:" line.
    const NAME: &'static str;
    /// How the cells split into separate tables, outermost first.
    const SPLIT: &'static [Split];
    /// The header of the label column.
    const LABEL_HEADER: &'static str = "scheme";
    /// Whether the table reads scheme cells only, or the baselines too.
    const SCHEMES_ONLY: bool = true;

    /// The cells the table reads, or why the run cannot fill it.
    fn applies_to<'a>(&self, rows: &[&'a CellRow]) -> Result<Vec<&'a CellRow>, String>;
    /// One panel's columns, each with its header; none leaves the panel
    /// out.
    fn columns(&self, panel: &Panel) -> Vec<(String, Self::Column)>;
    /// One panel's rows in order, each with its label; none leaves the
    /// panel out.
    fn rows(&self, panel: &Panel) -> Vec<(String, Self::Row)>;
    /// The cells behind one entry (one per seed). The first one's settings
    /// are the ones looked up among the published values.
    fn cells<'a>(
        &self,
        panel: &Panel<'a>,
        row: &Self::Row,
        column: &Self::Column,
    ) -> Vec<&'a CellRow>;
    /// The measured entry, from its cells.
    fn entry(
        &self,
        panel: &Panel,
        row: &Self::Row,
        column: &Self::Column,
        cells: &[&CellRow],
    ) -> Entry;
    /// Where the paper publishes this entry's value, if it does.
    fn paper(&self, _row: &Self::Row, _column: &Self::Column) -> Option<PaperValue> {
        None
    }
    /// The first part of each table's id; the builder adds the panel's
    /// dataset, temperatures and sampling (`table1` → `table1/dolly/1.2/…`).
    fn id(&self, panel: &Panel) -> &'static str;
    fn title(&self, panel: &Panel) -> String;
    fn notes(&self, panel: &Panel) -> Vec<String>;
}

/// A published value's place: the paper's table, the metric, and the scheme
/// as the paper's row names it.
pub struct PaperValue {
    pub table: u8,
    pub metric: &'static str,
    pub scheme: String,
}

impl PaperValue {
    pub fn new(table: u8, metric: &'static str, scheme: impl Into<String>) -> Self {
        PaperValue {
            table,
            metric,
            scheme: scheme.into(),
        }
    }
}

/// A [`TableSpec`] whatever its row and column types, so that one list
/// holds them all.
pub trait AnyTable: Sync {
    /// Every table this spec makes from the run's rows, or why none.
    /// `differs`: the run's setup differs from the paper's (rows with a
    /// published value get a `†`).
    fn build(&self, rows: &[CellRow], differs: bool) -> Result<Vec<Table>, Skip>;
}

impl<T: TableSpec + Sync> AnyTable for T {
    fn build(&self, rows: &[CellRow], differs: bool) -> Result<Vec<Table>, Skip> {
        build::build(self, rows, differs)
    }
}
