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
// docs/extending.md's worked example of a table: the doc shows this file's
// text (tests/it/doc_examples.rs), compiled here as if it were
// `src/report/tables/select_time.rs` but not in `tables!`, so `report` does
// not print it; `tests.rs` builds and renders it as its line would.
#[cfg(test)]
#[path = "examples/select_time.rs"]
mod select_time;
#[cfg(test)]
mod tests;

/// Declares each table's module and lists its spec in [`TABLES`]: one line
/// a table.
macro_rules! tables {
    ($($module:ident: $spec:ident;)*) => {
        $(pub mod $module;)*

        /// Every table of `specbench report`, in the order the report
        /// prints them.
        pub static TABLES: &[&dyn AnyTable] = &[$(&$module::$spec),*];
    };
}

tables! {
    vs_sd: VsSd;
    table1: Table1;
    table2: Table2;
    table3: Table3;
    table4: Table4;
    quality: Quality;
    verifiers: Verifiers;
}

use crate::experiment::metrics::CellRow;

use super::Skip;
use super::table::{Entry, Table};

pub use panel::{Draws, Panel, Sampling, Split};

/// One table of the report, described; [`build`](AnyTable::build) makes
/// the tables from a run.
pub trait TableSpec {
    /// What a row stands for (a scheme label, a `(K, label)` pair, …).
    type Row;
    /// What a column stands for (a K, a `(temperature, metric)` pair, …).
    type Column;

    /// Names the table in the report's "not shown:" line.
    const NAME: &'static str;
    /// The first part of each table's id; the builder adds the panel's
    /// dataset, temperatures and sampling (`table1/dolly/1.2/L = 5, …`).
    const ID: &'static str;
    /// The caption. `{dataset}`, `{temp}` and `{sampling}` are filled in
    /// from the panel, `{source}` with where the published values come from.
    const TITLE: &'static str;
    /// The notes under each table, filled in like the title.
    const NOTES: &'static [&'static str];
    /// How the cells split into separate tables, outermost first; by
    /// default one table per sampling, dataset and draft temperature, as
    /// the paper's tables are.
    const SPLIT: &'static [Split] = &[Split::Sampling, Split::Dataset, Split::Temp];
    /// The header of the label column.
    const LABEL_HEADER: &'static str = "scheme";
    /// Whether the table reads scheme cells only, or the baselines too.
    const SCHEMES_ONLY: bool = true;

    /// Whether the table reads this cell.
    fn reads(&self, _cell: &CellRow) -> bool {
        true
    }
    /// Whether the cells it reads fill the table; the reason when not.
    fn applies_to(&self, cells: &[&CellRow]) -> Result<(), String>;
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
    /// [`ID`](Self::ID), [`TITLE`](Self::TITLE) and [`NOTES`](Self::NOTES)
    /// for one panel; a table whose wording depends on more than the
    /// panel's keys overrides these (Figures 3–4, E7).
    fn id(&self, _panel: &Panel) -> &'static str {
        Self::ID
    }
    fn title(&self, panel: &Panel) -> String {
        panel.fill(Self::TITLE)
    }
    fn notes(&self, panel: &Panel) -> Vec<String> {
        Self::NOTES.iter().map(|note| panel.fill(note)).collect()
    }
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
