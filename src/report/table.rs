//! What a report table is, whatever table it is: entries (a measured mean
//! ± spread with the published value beside it), rows, and the table with
//! its title and notes. `tables/` fills them; `render` prints them.

use crate::experiment::metrics::{mean, standard_deviation};

/// A mean over seeds with its spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub mean: f64,
    /// Standard deviation over seeds (none with one seed).
    pub spread: Option<f64>,
    pub seeds: usize,
}

impl Stat {
    pub fn of(values: &[f64]) -> Option<Stat> {
        (!values.is_empty()).then(|| Stat {
            mean: mean(values),
            spread: standard_deviation(values),
            seeds: values.len(),
        })
    }
}

/// How an entry's numbers are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Block efficiency (tokens per target call).
    Tokens,
    /// A signed percentage (% over SD).
    Percent,
    /// A probability (acceptance).
    Probability,
    /// A ratio in percent (Table 4's loss).
    Ratio,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub measured: Option<Stat>,
    pub published: Option<Stat>,
    pub unit: Unit,
    /// A verdict in words instead of a number (E7's comparison column).
    pub text: Option<String>,
}

impl Entry {
    pub fn new(measured: Option<Stat>, unit: Unit) -> Self {
        Entry {
            measured,
            published: None,
            unit,
            text: None,
        }
    }

    /// A verdict in words, in place of a number.
    pub fn text(text: String) -> Self {
        Entry {
            measured: None,
            published: None,
            unit: Unit::Probability,
            text: Some(text),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub label: String,
    pub entries: Vec<Entry>,
    /// The row has published values but the run's setup differs from the
    /// paper's (models, prompts, max tokens): marked `†`.
    pub differs: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Stable id for CSV output (`table1/dolly/1.2`).
    pub id: String,
    pub title: String,
    /// Header of the label column, then one per entry.
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
    pub notes: Vec<String>,
}
